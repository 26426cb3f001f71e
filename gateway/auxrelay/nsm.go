package auxrelay

import (
	"time"

	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/xdr"
)

// handleNSM relays NSM: SM_NOTIFY from the filer (it rebooted) is
// answered here and fanned out to every client that used NLM or NSM
// through the relay; every other call goes to the filer's statd.
func (r *Relay) handleNSM(msg []byte, h *oncrpc.CallHeader, argOff int, in *inbound) {
	if h.Proc == nsmNotify && r.isFiler(in.remote.Addr()) {
		n, err := decodeSMNotify(msg[argOff:])
		if err != nil {
			r.m.Event(eventGarbageArgs)
			r.reply(in, oncrpc.GarbageArgsReply(h.XID), nil)
			return
		}
		r.m.Call(h.Prog, h.Vers, h.Proc, "local")
		r.reply(in, oncrpc.AcceptedReply(h.XID, oncrpc.Success), nil)
		r.log.Info("filer rebooted (SM_NOTIFY); notifying clients", "mon_name", string(n.MonName), "state", n.State)
		r.wg.Add(1)
		go func() { defer r.wg.Done(); r.fanOutNotify(n.State) }()
		return
	}
	r.routes.seenClient(in.remote.Addr().Unmap(), time.Now())
	r.forwardToFiler(msg, h, in)
}

// notifySink swallows the replies to the relay's own SM_NOTIFY calls.
type notifySink struct{ name string }

func (s notifySink) id() string             { return s.name }
func (s notifySink) sendReply([]byte) error { return nil }

// fanOutNotify tells every known client's statd that the server they
// monitor (the gateway, by the name they know it by) restarted.
func (r *Relay) fanOutNotify(state int32) {
	mon := r.cfg.NotifyMonName
	if mon == "" {
		if r.cfg.AdvertiseAddress != "" {
			mon = r.cfg.AdvertiseAddress
		} else {
			mon = r.listenIP.String()
		}
	}
	for i, client := range r.routes.knownClients() {
		n := smNotify{MonName: []byte(mon), State: state}
		h := oncrpc.CallHeader{RPCVers: oncrpc.RPCVersion, Prog: progNSM, Vers: 1, Proc: nsmNotify,
			Cred: oncrpc.NullAuth, Verf: oncrpc.NullAuth}
		call := make([]byte, h.EncodedLen())
		e := xdr.NewEncoder(call)
		_ = h.Encode(&e)
		w := xdrWriter{b: call}
		n.encode(&w)
		in := &inbound{sink: notifySink{name: "notify/" + client.String() + "/" + itoa(uint32(i))}, transport: "udp"}
		if r.forwardToClient(w.b, &h, in, client) {
			r.m.Event(eventNotifyFanout)
			r.log.Info("SM_NOTIFY forwarded", "client", client.String(), "mon_name", mon, "state", state)
		}
	}
}
