package rdmarpc

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"
)

// The engine matrix on the pure-Go provider with rdmagw's own responder
// (ResponderConfig.V2): version two both ways, and a version-one
// requester against a version-two responder. (A version-two requester
// against a version-one responder: TestRequesterV2FallbackRemembered.)
func TestEngineV2Matrix(t *testing.T) {
	for _, c := range []struct {
		name     string
		mode     VersionMode
		respV2   bool
		wantVers uint32
	}{
		{"v2-v2", VersionV2, true, 2},
		{"v2-v2-remote-invalidate", VersionV2, true, 2},
		{"auto-v2", VersionAuto, true, 2},
		{"v1-v2", VersionV1, true, 1},
		{"auto-v1", VersionAuto, false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			inv := c.name == "v2-v2-remote-invalidate"
			p := newEnginePair(t, pairOpts{rcfg: ResponderConfig{V2: c.respV2},
				qcfg: RequesterConfig{Version: c.mode, VersionMemory: new(VersionMemory), RemoteInvalidate: inv}})
			if p.req.Version() != c.wantVers {
				t.Fatalf("requester speaks version %d", p.req.Version())
			}
			// READ through a Write chunk and inline; WRITE through a Read
			// chunk; a Long call (ECHO) with its reply in the Reply chunk.
			for i, n := range []int{10, 3000, 70000} {
				xid := uint32(100 + i)
				r, err := p.call(readCallMsg(xid, n), &ReplyPlan{WriteChunks: []int{n}})
				if err != nil {
					t.Fatal(err)
				}
				checkRead(t, r, xid, n, true)
				r.Release()
			}
			// The version each engine settled on, reported once
			// (VersionMetrics); fell_back when auto met a v1 responder.
			fell := 0
			if c.name == "auto-v1" {
				fell = 1
			}
			key := fmt.Sprintf("version_%d", c.wantVers)
			if p.rmet.get(key) != 1 || p.qmet.get(key) != 1 || p.qmet.get("fell_back") != fell || p.rmet.get("fell_back") != 0 {
				t.Fatalf("version metrics: responder %v requester %v; want %s once each, fell_back %d", p.rmet.n, p.qmet.n, key, fell)
			}
			if p.req.FellBack() != (fell == 1) {
				t.Fatalf("FellBack() = %v", p.req.FellBack())
			}
			for i, n := range []int{100, 9000, 1<<20 + 3} {
				xid := uint32(200 + i)
				r, err := p.call(writeCallMsg(t, nil, xid, n), nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(r.Inline, put32s(xid, 0, sum32(patterned(n, int(xid))))) {
					t.Fatalf("WRITE %d: reply % x", n, r.Inline)
				}
				r.Release()
			}
			echo := &Message{XID: 300}
			echo.Append(Piece{Data: append(put32s(300, opEcho), patterned(20000, 3)...)})
			want := make([]byte, echo.Len())
			echo.Flatten(want)
			r, err := p.call(echo, &ReplyPlan{ReplyChunk: len(want) + 64})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(r.Inline, want) {
				t.Fatalf("ECHO of %d bytes came back as %d differing bytes", len(want), len(r.Inline))
			}
			r.Release()
			if p.resp.Version() != int(c.wantVers) {
				t.Errorf("responder speaks version %d", p.resp.Version())
			}
			if c.wantVers == 2 {
				// A call larger than the inline threshold: continued
				// (CALL_MIDDLE); its echo, with no Reply chunk, too.
				echo := &Message{XID: 301}
				echo.Append(Piece{Data: append(put32s(301, opEcho), patterned(10000, 4)...)})
				want := make([]byte, echo.Len())
				echo.Flatten(want)
				r, err := p.call(echo, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(r.Inline, want) || r.Kind != ReplyInline {
					t.Fatalf("continued ECHO of %d bytes came back as %d differing bytes", len(want), len(r.Inline))
				}
				r.Release()
				// A reply larger than the inline threshold with no Reply
				// chunk: continuation, reassembled byte for byte.
				for i, n := range []int{5000, 70000} {
					xid := uint32(400 + i)
					r, err := p.call(&Message{XID: xid, Pieces: []Piece{{Data: put32s(xid, opBig, uint32(n))}}}, nil)
					if err != nil {
						t.Fatal(err)
					}
					if want := append(put32s(xid, uint32(n)), patterned(n, int(xid))...); !bytes.Equal(r.Inline, want) {
						t.Fatalf("continued BIG %d: %d bytes differ", n, len(r.Inline))
					}
					r.Release()
				}
			} else {
				_, err := p.call(readCallMsg(9, 5000), &ReplyPlan{})
				if !errors.Is(err, ErrRemoteChunk) {
					t.Fatalf("no Reply chunk in version one: %v", err)
				}
			}
			r, err = p.call(readCallMsg(10, 10), nil)
			if err != nil {
				t.Fatal(err)
			}
			checkRead(t, r, 10, 10, false)
			r.Release()
			if _, remote := p.req.InvalidateStats(); inv != (remote > 0) {
				t.Errorf("remote invalidations %d with RemoteInvalidate %v", remote, inv)
			}
			if g := p.req.Granted(); g < 1 || g > 128 {
				t.Errorf("granted %d", g)
			}
			waitFor(t, 5*time.Second, "client pool idle", func() bool { return p.cli.pool.InUse() == idleBuffers(p.req) })
		})
	}
}
