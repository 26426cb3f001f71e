package rdmarpc

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// sendMiddle sends a REPLY_MIDDLE of xid with payload and remaining.
func (p *v2Peer) sendMiddle(xid uint32, remaining uint32, payload []byte) {
	var a V2Header
	a.Init(xid, p.credit(), HTypeReplyMiddle)
	a.Remaining = remaining
	p.sendHdr(&a, payload)
}

// sendContinued sends msg as REPLY_MIDDLE fragments of frag bytes and a
// final REPLY_INLINE, as the responder does.
func (p *v2Peer) sendContinued(xid uint32, msg []byte, frag int) {
	off := 0
	for len(msg)-off > frag {
		p.sendMiddle(xid, uint32(len(msg)-off-frag), msg[off:off+frag])
		off += frag
	}
	p.reply(xid, nil, msg[off:])
}

// Continued replies: reassembled byte for byte (a GRANT between fragments
// passes), into a buffer the Result holds until Release; broken sequences
// fail their calls with ErrBadReply and are answered INVAL_CONT (BAD_XDR
// when the first fragment's first word is not the XID); a reply over the
// reassembly bound is refused at its first fragment.
func TestRequesterV2ContinuedReplies(t *testing.T) {
	const (
		xidOK = 1 + iota
		xidWithGrant
		xidInterleavedA
		xidInterleavedB
		xidRemaining
		xidFirstWord
		xidTooLarge
		xidAfter
	)
	body := func(xid uint32, n int) []byte { return append(put32s(xid), patterned(n, int(xid))...) }
	p, addr := startV2Peer(t, func(p *v2Peer, h *V2Header, b []byte) {
		if h.HType == HTypeConnPropFinal {
			p.answerProps(DefaultTransportProps())
			return
		}
		if !h.HType.IsCall() {
			return
		}
		switch xid := h.XID; xid {
		case xidOK, xidAfter:
			p.sendContinued(xid, body(xid, 30000), 4000)
		case xidWithGrant:
			m := body(xid, 6000)
			p.sendMiddle(xid, uint32(len(m)-4000), m[:4000])
			var g V2Header
			g.Init(0, p.credit(), HTypeGrant)
			p.sendHdr(&g)
			p.reply(xid, nil, m[4000:])
		case xidInterleavedA:
			// Held until B's call comes, then broken into by B's reply.
		case xidInterleavedB:
			m := body(xidInterleavedA, 9000)
			p.sendMiddle(xidInterleavedA, uint32(len(m)-4000), m[:4000])
			p.reply(xid, nil, put32s(xid, 0))
		case xidRemaining:
			m := body(xid, 9000)
			p.sendMiddle(xid, uint32(len(m)-4000), m[:4000])
			p.reply(xid, nil, m[4000:8000]) // 1004 bytes short
		case xidFirstWord:
			m := body(xid+1, 9000)
			p.sendMiddle(xid, uint32(len(m)-4000), m[:4000])
		case xidTooLarge:
			p.sendMiddle(xid, 1<<30, body(xid, 3996))
		}
	})
	req, met, cli := dialV2(t, addr, RequesterConfig{Version: VersionV2, Credits: 8})
	call := func(xid uint32) (*Result, error) {
		return callCtx(req, &Message{XID: xid, Pieces: []Piece{{Data: put32s(xid, 0)}}}, nil, 5*time.Second)
	}
	for _, xid := range []uint32{xidOK, xidWithGrant} {
		r, err := call(xid)
		if err != nil {
			t.Fatal(err)
		}
		n := 30000
		if xid == xidWithGrant {
			n = 6000
		}
		if !bytes.Equal(r.Inline, body(xid, n)) || r.Kind != ReplyInline {
			t.Fatalf("xid %d: continued reply of %d bytes differs", xid, len(r.Inline))
		}
		r.Release()
	}
	errA := make(chan error, 1)
	go func() {
		_, err := call(xidInterleavedA)
		errA <- err
	}()
	waitFor(t, 5*time.Second, "call A", func() bool { return req.Outstanding() == 1 })
	if _, err := call(xidInterleavedB); !errors.Is(err, ErrBadReply) {
		t.Errorf("the reply that broke into a sequence: %v", err)
	}
	if err := <-errA; !errors.Is(err, ErrBadReply) {
		t.Errorf("the sequence broken into: %v", err)
	}
	for _, xid := range []uint32{xidRemaining, xidFirstWord, xidTooLarge} {
		if _, err := call(xid); !errors.Is(err, ErrBadReply) {
			t.Errorf("xid %d: %v", xid, err)
		}
	}
	r, err := call(xidAfter)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Inline, body(xidAfter, 30000)) {
		t.Fatal("continued reply after the broken ones differs")
	}
	r.Release()
	answers := map[uint32]V2ErrCode{}
	waitFor(t, 5*time.Second, "the answers", func() bool {
		for _, h := range p.received() {
			if h.HType == HTypeError {
				answers[h.XID] = h.ErrBody.Code
			}
		}
		if len(answers) < 5 {
			t.Logf("answers %v", answers)
		}
		return len(answers) >= 5
	})
	want := map[uint32]V2ErrCode{xidInterleavedA: V2ErrInvalCont, xidInterleavedB: V2ErrInvalCont,
		xidRemaining: V2ErrInvalCont, xidFirstWord: V2ErrBadXDR, xidTooLarge: V2ErrInvalCont}
	for xid, code := range want {
		if answers[xid] != code {
			t.Errorf("xid %d answered %v, want %v (all: %v)", xid, answers[xid], code, answers)
		}
	}
	if met.get("received_inline") != 3 || met.get("v2_continued_received") != 3 ||
		met.get("v2_error_RDMA2_ERR_INVAL_CONT") != 4 || met.get("v2_error_RDMA2_ERR_BAD_XDR") != 1 {
		t.Errorf("metrics %v", met.n)
	}
	waitFor(t, 5*time.Second, "client pool idle", func() bool { return cli.pool.InUse() == idleBuffers(req) })
}

// A connection that ends in the middle of a continued reply fails the
// call and gives every buffer back, the partial reassembly's included.
func TestRequesterV2ContinuedCutOff(t *testing.T) {
	_, addr := startV2Peer(t, func(p *v2Peer, h *V2Header, b []byte) {
		switch {
		case h.HType == HTypeConnPropFinal:
			p.answerProps(DefaultTransportProps())
		case h.HType.IsCall():
			m := append(put32s(h.XID), patterned(20000, 1)...)
			p.sendMiddle(h.XID, uint32(len(m)-4000), m[:4000])
		}
	})
	req, _, cli := dialV2(t, addr, RequesterConfig{Version: VersionV2, Credits: 8})
	done := make(chan error, 1)
	go func() {
		_, err := callCtx(req, &Message{XID: 5, Pieces: []Piece{{Data: put32s(5, 0)}}}, nil, 10*time.Second)
		done <- err
	}()
	waitFor(t, 5*time.Second, "the first fragment", func() bool {
		req.mu.Lock()
		defer req.mu.Unlock()
		return req.link.received >= 2
	})
	time.Sleep(20 * time.Millisecond) // the loop stores it
	req.Close()
	if err := <-done; !errors.Is(err, ErrConnClosed) {
		t.Fatalf("call cut off: %v", err)
	}
	if n := cli.pool.InUse(); n != 0 {
		t.Fatalf("%d bytes of the pool still in use after Close", n)
	}
}
