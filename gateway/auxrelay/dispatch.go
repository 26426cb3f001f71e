package auxrelay

import (
	"errors"
	"net/netip"
	"time"

	"github.com/rdmagw/rdmagw/oncrpc"
)

// handleMessage takes one RPC message from any socket: replies go back to
// the caller they belong to, calls are answered or forwarded.
func (r *Relay) handleMessage(msg []byte, in *inbound) {
	xid, mt, err := oncrpc.PeekMsgType(msg)
	if err != nil {
		r.m.Event(eventGarbageArgs)
		r.log.Debug("undecodable message dropped", "peer", in.remote.String(), "error", err)
		return
	}
	if mt == oncrpc.Reply {
		r.handleReply(msg, xid, in)
		return
	}
	if in.sink == nil { // a call on the outbound UDP socket has its sink set by the reader
		return
	}
	var h oncrpc.CallHeader
	n, err := h.Decode(msg)
	if err != nil {
		if errors.Is(err, oncrpc.ErrBadRPCVersion) {
			r.m.Event(eventRPCMismatch)
			r.reply(in, oncrpc.RPCMismatchReply(xid), nil)
			return
		}
		r.m.Event(eventGarbageArgs)
		r.log.Debug("malformed call header", "peer", in.remote.String(), "error", err)
		r.reply(in, oncrpc.GarbageArgsReply(xid), nil)
		return
	}
	args := msg[n:]
	switch h.Prog {
	case progRPCBind:
		r.serveRPCBind(&h, args, in)
	case progMount, progNLM, progNSM:
		if ok, lo, hi := versionOK(h.Prog, h.Vers); !ok {
			r.m.Event(eventProgMismatch)
			r.reply(in, oncrpc.ProgMismatchReply(xid, lo, hi), nil)
			return
		}
		switch h.Prog {
		case progMount:
			r.forwardToFiler(msg, &h, in)
		case progNLM:
			r.handleNLM(msg, &h, n, in)
		case progNSM:
			r.handleNSM(msg, &h, n, in)
		}
	default:
		r.m.Event(eventProgUnavail)
		r.log.Debug("call for a program not relayed", "peer", in.remote.String(), "program", h.Prog)
		r.reply(in, oncrpc.ProgUnavailReply(xid), nil)
	}
}

// reply sends the relay's own reply to in.
func (r *Relay) reply(in *inbound, h oncrpc.ReplyHeader, results []byte) {
	if err := in.sink.sendReply(replyMsg(h, results)); err != nil {
		r.m.Event(eventSendError)
		r.log.Debug("reply failed", "peer", in.sink.id(), "error", err)
	}
}

func (r *Relay) serveRPCBind(h *oncrpc.CallHeader, args []byte, in *inbound) {
	if h.Vers < 2 || h.Vers > 4 {
		r.m.Event(eventProgMismatch)
		r.reply(in, oncrpc.ProgMismatchReply(h.XID, 2, 4), nil)
		return
	}
	r.m.Call(h.Prog, h.Vers, h.Proc, "local")
	stat, res := r.table.serve(h, args, in.netid(), in.local)
	if stat == oncrpc.GarbageArgs {
		r.m.Event(eventGarbageArgs)
	}
	r.log.Trace("rpcbind", "peer", in.remote.String(), "procedure", procLabel(h.Prog, h.Vers, h.Proc), "version", h.Vers, "stat", stat)
	r.reply(in, oncrpc.AcceptedReply(h.XID, stat), res)
}

// handleReply returns a reply to the caller of the call it answers.
func (r *Relay) handleReply(msg []byte, xid uint32, in *inbound) {
	pc := r.pending.take(xid)
	if pc == nil {
		r.m.Event(eventUnknownXID)
		r.log.Debug("reply for no pending call dropped", "peer", in.remote.String(), "xid", xid)
		return
	}
	r.m.Reply(pc.prog, pc.vers, pc.proc, pc.direction, time.Since(pc.started))
	setXID(msg, pc.origXID)
	if err := pc.sink.sendReply(msg); err != nil {
		r.m.Event(eventSendError)
		r.log.Debug("relaying reply failed", "to", pc.sink.id(), "error", err)
	}
}

// isFiler reports whether ip is one of the filer's addresses.
func (r *Relay) isFiler(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, f := range r.filerIPs {
		if f == ip {
			return true
		}
	}
	return false
}

// filerNetwork is the transport to the filer for a call that came in over
// transport: the same, or TCP when the filer is not asked over UDP.
func (r *Relay) filerNetwork(transport string) string {
	if transport == "udp" && !r.cfg.Filer.UDP {
		return "tcp"
	}
	return transport
}

// forwardToFiler sends a client's call (msg, possibly rewritten) to the
// filer under a relay XID.
func (r *Relay) forwardToFiler(msg []byte, h *oncrpc.CallHeader, in *inbound) {
	network := r.filerNetwork(in.transport)
	ip := r.filerIPs[0]
	port, err := r.filerPort(ip, h.Prog, h.Vers, network)
	if err != nil {
		r.m.Event(eventFilerUnreachable)
		r.log.Warn("filer port unknown", "program", progLabel(h.Prog), "version", h.Vers, "transport", network, "error", err)
		if errors.Is(err, errNotRegistered) {
			r.reply(in, oncrpc.ProgUnavailReply(h.XID), nil)
		} else {
			r.reply(in, oncrpc.SystemErrReply(h.XID), nil)
		}
		return
	}
	dest := netip.AddrPortFrom(ip, uint16(port))
	if err := r.forward(msg, h, in, network, "filer", "to_filer", dest); err != nil {
		r.m.Event(eventFilerUnreachable)
		r.ports.forget(portKey{ip, h.Prog, h.Vers, network}) // the filer may have restarted elsewhere
		r.log.Warn("cannot reach the filer", "program", progLabel(h.Prog), "dest", dest.String(), "transport", network, "error", err)
		r.reply(in, oncrpc.SystemErrReply(h.XID), nil)
	}
}

// forwardToClient sends a filer's call to a client's program port, found
// through the client's rpcbind. It reports whether the call went out.
func (r *Relay) forwardToClient(msg []byte, h *oncrpc.CallHeader, in *inbound, client netip.Addr) bool {
	network := in.transport
	port, err := r.clientPort(client, h.Prog, h.Vers, network)
	if err == nil {
		dest := netip.AddrPortFrom(client, uint16(port))
		if err = r.forward(msg, h, in, network, "callback", "to_client", dest); err == nil {
			return true
		}
		r.ports.forget(portKey{client, h.Prog, h.Vers, network})
	}
	r.m.Event(eventClientUnreachable)
	r.log.Warn("cannot reach the client", "client", client.String(), "program", progLabel(h.Prog),
		"procedure", procLabel(h.Prog, h.Vers, h.Proc), "transport", network, "error", err)
	return false
}

// forward records the call as pending and sends it to dest with a relay
// XID. A retransmission of a call still pending is resent under the same
// relay XID.
func (r *Relay) forward(msg []byte, h *oncrpc.CallHeader, in *inbound, network, role, direction string, dest netip.AddrPort) error {
	pc := &pendingCall{sink: in.sink, origXID: h.XID, prog: h.Prog, vers: h.Vers, proc: h.Proc,
		direction: direction, dest: dest.String(), started: time.Now()}
	xid, retrans := r.pending.add(pc)
	if retrans {
		r.m.Event(eventRetransmit)
	}
	out := append([]byte(nil), msg...)
	setXID(out, xid)
	r.m.Call(h.Prog, h.Vers, h.Proc, direction)
	r.log.Trace("forward", "direction", direction, "program", progLabel(h.Prog), "procedure", procLabel(h.Prog, h.Vers, h.Proc),
		"from", in.sink.id(), "to", dest.String(), "xid", h.XID, "relay_xid", xid)
	if err := r.out.send(r.ctx, network, role, dest, out); err != nil {
		r.pending.take(xid)
		r.m.Event(eventSendError)
		return err
	}
	return nil
}

// filerPort is the filer's port for prog/vers: from config, else from the
// filer's rpcbind (cached).
func (r *Relay) filerPort(ip netip.Addr, prog, vers uint32, network string) (int, error) {
	switch {
	case prog == progMount && r.cfg.Filer.MountPort > 0:
		return r.cfg.Filer.MountPort, nil
	case prog == progNLM && r.cfg.Filer.NLMPort > 0:
		return r.cfg.Filer.NLMPort, nil
	case prog == progNSM && r.cfg.Filer.NSMPort > 0:
		return r.cfg.Filer.NSMPort, nil
	}
	return r.lookupPort(ip, r.cfg.Filer.RPCBindPort, prog, vers, network)
}

func (r *Relay) clientPort(ip netip.Addr, prog, vers uint32, network string) (int, error) {
	return r.lookupPort(ip, r.cfg.ClientRPCBindPort, prog, vers, network)
}

func (r *Relay) lookupPort(ip netip.Addr, rpcbPort int, prog, vers uint32, network string) (int, error) {
	k := portKey{ip, prog, vers, network}
	now := time.Now()
	if p, ok := r.ports.get(k, now); ok {
		return p, nil
	}
	r.m.Event(eventPortLookup)
	p, err := pmapGetPort(r.ctx, network, netip.AddrPortFrom(ip, uint16(rpcbPort)), r.listenIP, prog, vers, r.cfg.ConnectTimeout)
	if err != nil {
		return 0, err
	}
	r.ports.put(k, p, now)
	r.log.Debug("port looked up", "host", ip.String(), "program", progLabel(prog), "version", vers, "transport", network, "port", p)
	return p, nil
}
