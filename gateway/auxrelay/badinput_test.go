package auxrelay

import (
	"testing"

	"github.com/rdmagw/rdmagw/oncrpc"
)

// TestBadInput: malformed calls get their specified answer and the
// connection stays usable.
func TestBadInput(t *testing.T) {
	cfg := testConfig()
	cfg.Filer.MountPort, cfg.Filer.NLMPort, cfg.Filer.NSMPort = 1, 1, 1
	r := startRelay(t, cfg)
	for _, network := range []string{"tcp", "udp"} {
		c := dialRPC(t, network, "", r.Addr("nlm", network))
		check := func(name string, msg []byte, want func(h oncrpc.ReplyHeader) bool) {
			t.Helper()
			var h oncrpc.ReplyHeader
			if _, err := h.Decode(c.raw(t, msg)); err != nil || !want(h) {
				t.Errorf("%s %s: reply %+v (%v)", network, name, h, err)
			}
		}
		accept := func(s oncrpc.AcceptStat) func(oncrpc.ReplyHeader) bool {
			return func(h oncrpc.ReplyHeader) bool { return h.Stat == oncrpc.MsgAccepted && h.AcceptStat == s }
		}
		check("unknown program", buildCall(1, 100099, 1, 0, nil), accept(oncrpc.ProgUnavail))
		check("NFSACL (not relayed)", buildCall(2, 100227, 3, 0, nil), accept(oncrpc.ProgUnavail))
		check("NLM v2", buildCall(3, progNLM, 2, 0, nil), func(h oncrpc.ReplyHeader) bool {
			return h.AcceptStat == oncrpc.ProgMismatch && h.Low == 1 && h.High == 4
		})
		check("MOUNT v4", buildCall(4, progMount, 4, 0, nil), accept(oncrpc.ProgMismatch))
		check("truncated NLM4 LOCK", buildCall(5, progNLM, 4, nlmLock, []byte{0, 0, 0, 4, 'a'}), accept(oncrpc.GarbageArgs))
		check("NLM cookie too long", buildCall(6, progNLM, 4, nlmTest, []byte{0, 1, 0, 0}), accept(oncrpc.GarbageArgs))
		check("NLM1 TEST short lock", buildCall(7, progNLM, 1, nlmTest, nlm4TestArgs("c", true, nlmOwner{"x", nil, 1}, nil, 0, 0)[:30]), accept(oncrpc.GarbageArgs))
		bad := buildCall(8, progNLM, 4, 0, nil)
		bad[8+3] = 3 // rpcvers 3
		check("rpcvers 3", bad, func(h oncrpc.ReplyHeader) bool {
			return h.Stat == oncrpc.MsgDenied && h.RejectStat == oncrpc.RPCMismatch
		})
		check("cred too long", append(buildCall(9, progNLM, 4, 0, nil)[:24], 0, 0, 0, 1, 0, 0, 2, 0), accept(oncrpc.GarbageArgs))
		check("rpcbind GETPORT short", buildCall(10, progRPCBind, 2, 3, []byte{0, 0}), accept(oncrpc.GarbageArgs))
		check("rpcbind GETADDR netid too long", buildCall(11, progRPCBind, 4, 3, []byte{0, 0, 0, 1, 0, 0, 0, 1, 0x7f, 0, 0, 0}), accept(oncrpc.GarbageArgs))
		check("rpcbind v4 unknown proc", buildCall(12, progRPCBind, 4, 99, nil), accept(oncrpc.ProcUnavail))
		// The filer's TCP port 1 refuses: SYSTEM_ERR, and the relay goes
		// on. (Over UDP the datagram just goes unanswered, as it would
		// to the filer directly; the client retransmits.)
		if network == "tcp" {
			check("filer down", buildCall(13, progMount, 3, 0, nil), accept(oncrpc.SystemErr))
		}
		c.mustSucceed(t, progRPCBind, 2, 0, nil)
	}
}
