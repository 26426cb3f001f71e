package auxrelay

import (
	"encoding/binary"
	"time"

	"github.com/rdmagw/rdmagw/oncrpc"
)

// handleNLM relays an NLM call: the filer's calls to clients (GRANTED,
// *_RES) go to the client that owns the lock or cookie; everything else
// goes to the filer, after the relay has noted who owns what.
func (r *Relay) handleNLM(msg []byte, h *oncrpc.CallHeader, argOff int, in *inbound) {
	a, err := decodeNLMArgs(h.Vers, h.Proc, msg[argOff:], argOff)
	if err != nil {
		r.m.Event(eventGarbageArgs)
		r.log.Debug("undecodable NLM arguments", "peer", in.remote.String(), "procedure", procLabel(h.Prog, h.Vers, h.Proc), "error", err)
		r.reply(in, oncrpc.GarbageArgsReply(h.XID), nil)
		return
	}
	if nlmServerToClient(h.Proc) && r.isFiler(in.remote.Addr()) {
		r.nlmCallback(msg, h, &a, in)
		return
	}
	now := time.Now()
	client := in.remote.Addr().Unmap()
	r.routes.seenClient(client, now)
	out := msg
	// Splice later fields first so earlier spans stay valid.
	if a.HasLock {
		if !r.routes.recordLock(&a.Lock, client, now) {
			r.m.Event(eventRouteTableFull)
		}
		if r.cfg.NLMCallerName != "" {
			out = splice(out, a.Lock.CallerAt.From, a.Lock.CallerAt.To, xdrOpaque([]byte(r.cfg.NLMCallerName)))
		}
	}
	if h.Proc >= nlmTestMsg && h.Proc <= nlmUnlockMsg {
		c, ok := r.routes.newCookie(a.Cookie, client, now)
		if !ok {
			r.m.Event(eventRouteTableFull)
		} else {
			out = splice(out, a.CookieAt.From, a.CookieAt.To, xdrOpaque(c))
		}
	}
	r.forwardToFiler(out, h, in)
}

// nlmCallback routes one of the filer's NLM calls to its client.
func (r *Relay) nlmCallback(msg []byte, h *oncrpc.CallHeader, a *nlmArgs, in *inbound) {
	switch h.Proc {
	case nlmGranted, nlmGrantedMsg:
		route, ok := r.routes.lookupLock(&a.Lock, r.cfg.NLMCallerName == "")
		if !ok {
			r.unroutable(h, a, in)
			return
		}
		out := msg
		if r.cfg.NLMCallerName != "" && route.callerName != string(a.Lock.CallerName) {
			out = splice(msg, a.Lock.CallerAt.From, a.Lock.CallerAt.To, xdrOpaque([]byte(route.callerName)))
		}
		if !r.forwardToClient(out, h, in, route.client) {
			r.unroutable(h, a, in)
		}
	default: // TEST_RES, LOCK_RES, CANCEL_RES, UNLOCK_RES
		route, ok := r.routes.takeCookie(a.Cookie)
		if !ok {
			r.unroutable(h, a, in)
			return
		}
		out := splice(msg, a.CookieAt.From, a.CookieAt.To, xdrOpaque(route.orig))
		if !r.forwardToClient(out, h, in, route.client) {
			r.unroutable(h, a, in)
		}
	}
}

// nlm4Denied is nlm4_stats NLM4_DENIED (the same value in nlm_stats).
const nlm4Denied = 1

// unroutable answers a filer callback the relay cannot deliver. A
// synchronous GRANTED is refused (the filer then frees the lock rather
// than holding it for a client that never hears of it, what a client with
// no matching blocked request answers too); the one-way procedures get
// their void reply.
func (r *Relay) unroutable(h *oncrpc.CallHeader, a *nlmArgs, in *inbound) {
	r.m.Event(eventUnroutable)
	r.log.Warn("NLM callback from the filer matches no client", "procedure", procLabel(h.Prog, h.Vers, h.Proc),
		"caller_name", string(a.Lock.CallerName), "svid", a.Lock.Svid)
	if h.Proc == nlmGranted {
		res := xdrOpaque(a.Cookie)
		res = binary.BigEndian.AppendUint32(res, nlm4Denied)
		r.reply(in, oncrpc.AcceptedReply(h.XID, oncrpc.Success), res)
		return
	}
	r.reply(in, oncrpc.AcceptedReply(h.XID, oncrpc.Success), nil)
}
