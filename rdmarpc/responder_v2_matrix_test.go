package rdmarpc

import (
	"bytes"
	"errors"
	"testing"
)

// requesterReassembles: the requester takes replies sent by continuation
// (REPLY_MIDDLE); set when it does.
const requesterReassembles = false

// TestV2EngineMatrix: the requester and responder engines against each
// other on the pure-Go provider, every version pairing, through every
// way a call and a reply travel: inline, a Write chunk, a Reply chunk,
// a Read chunk, a Long call, and a reply too large for inline without a
// Reply chunk (continuation in version two, ERR_CHUNK in version one).
func TestV2EngineMatrix(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   VersionMode
		respV2 bool
		want   int
	}{
		{"v2 requester, v2 responder", VersionV2, true, 2},
		{"auto requester, v2 responder", VersionAuto, true, 2},
		{"auto requester, v1-only responder", VersionAuto, false, 1},
		{"v1 requester, v2 responder", VersionV1, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newEnginePair(t, pairOpts{rcfg: ResponderConfig{V2: tc.respV2},
				qcfg: RequesterConfig{Version: tc.mode, VersionMemory: new(VersionMemory)}})
			checkCall := func(xid uint32, n int, plan *ReplyPlan, ddp bool) {
				t.Helper()
				r, err := p.call(readCallMsg(xid, n), plan)
				if err != nil {
					t.Fatalf("READ %d: %v", n, err)
				}
				checkRead(t, r, xid, n, ddp)
				r.Release()
			}
			checkCall(1, 100, &ReplyPlan{}, false)
			checkCall(2, 9000, &ReplyPlan{WriteChunks: []int{9000}}, true)
			checkCall(3, 70000, &ReplyPlan{ReplyChunk: 70100}, false)
			// WRITE through a Read chunk, and a Long call (Call chunk).
			for i, n := range []int{5000, 200000} {
				xid := uint32(10 + i)
				r, err := p.call(writeCallMsg(t, p.cli.pool, xid, n), nil)
				if err != nil {
					t.Fatalf("WRITE %d: %v", n, err)
				}
				if want := put32s(xid, 0, sum32(patterned(n, int(xid)))); !bytes.Equal(r.Inline, want) {
					t.Fatalf("WRITE %d: reply % x", n, r.Inline)
				}
				r.Release()
			}
			// Too large for inline, no Reply chunk: version one answers
			// ERR_CHUNK; version two sends it by continuation, which the
			// requester does not reassemble yet (v2req; the responder's
			// side is TestV2ResponderContinuedReply).
			if tc.want == 1 {
				if _, err := p.call(readCallMsg(20, 20000), &ReplyPlan{}); !errors.Is(err, ErrRemoteChunk) {
					t.Fatalf("version one, reply larger than inline without a Reply chunk: %v", err)
				}
			} else if requesterReassembles {
				r, err := p.call(readCallMsg(20, 20000), &ReplyPlan{})
				if err != nil {
					t.Fatalf("continued reply: %v", err)
				}
				checkRead(t, r, 20, 20000, false)
				r.Release()
			}
			checkCall(21, 8, nil, false)
			if v := p.resp.Version(); v != tc.want {
				t.Fatalf("responder version %d, want %d", v, tc.want)
			}
			if v := p.req.Version(); int(v) != tc.want {
				t.Fatalf("requester version %d, want %d", v, tc.want)
			}
		})
	}
}
