package rdmarpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"
)

type bcCount struct {
	mu sync.Mutex
	n  map[string]int
}

func newBCCount() *bcCount { return &bcCount{n: map[string]int{}} }
func (m *bcCount) add(k string) {
	m.mu.Lock()
	m.n[k]++
	m.mu.Unlock()
}
func (m *bcCount) get(k string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[k]
}
func (m *bcCount) BackwardCall(int)       { m.add("call") }
func (m *bcCount) BackwardReply(int)      { m.add("reply") }
func (m *bcCount) BackwardError(r string) { m.add(r) }

// bcCallMsg is an RPC CALL message of n bytes (at least 8) with a
// recognisable body.
func bcCallMsg(xid uint32, n int) []byte {
	b := patterned(n, int(xid))
	binary.BigEndian.PutUint32(b, xid)
	binary.BigEndian.PutUint32(b[4:], 0) // CALL
	return b
}

// bcFwdMsg is a forward toy call whose call and reply have neither CALL
// nor REPLY in their second word (the toy protocol's words are no RPC).
func bcFwdMsg(xid uint32) *Message {
	m := new(Message)
	m.XID = xid
	m.Append(Piece{Data: put32s(xid, opBig, 100)})
	return m
}

// bcEcho answers a backward call with a REPLY that carries the call's
// body reversed, so the caller can verify it byte for byte.
func bcEcho(call []byte) []byte {
	r := make([]byte, len(call))
	copy(r, call[:4])
	binary.BigEndian.PutUint32(r[4:], 1) // REPLY
	for i := 8; i < len(call); i++ {
		r[i] = call[len(call)-1-(i-8)]
	}
	return r
}

type bcPair struct {
	*enginePair
	rm, qm  *bcCount
	mu      sync.Mutex
	replies map[uint32][]byte
}

func newBCPair(t *testing.T, maxCalls int, h BackwardHandler) *bcPair {
	return newBCPairOpts(t, maxCalls, h, pairOpts{})
}

// newBCPairOpts is newBCPair over the engines configured by o.
func newBCPairOpts(t *testing.T, maxCalls int, h BackwardHandler, o pairOpts) *bcPair {
	bp := &bcPair{rm: newBCCount(), qm: newBCCount(), replies: map[uint32][]byte{}}
	o.rcfg.Backchannel = ResponderBackchannel{MaxCalls: maxCalls, Metrics: bp.rm,
		OnReply: func(xid uint32, reply []byte) {
			bp.mu.Lock()
			bp.replies[xid] = append([]byte(nil), reply...)
			bp.mu.Unlock()
		}}
	o.qcfg.Backchannel = RequesterBackchannel{Credits: o.qcfg.Backchannel.Credits, Handler: h, Metrics: bp.qm}
	bp.enginePair = newEnginePair(t, o)
	return bp
}

func (bp *bcPair) wait(t *testing.T, xid uint32) []byte {
	t.Helper()
	var got []byte
	waitFor(t, 10*time.Second, "backward reply", func() bool {
		bp.mu.Lock()
		defer bp.mu.Unlock()
		got = bp.replies[xid]
		return got != nil
	})
	return got
}

// sizes sends a backward call of each size (split in two gather pieces)
// and checks each reply byte for byte.
func (bp *bcPair) sizes(t *testing.T, ctx context.Context, sizes []int) {
	t.Helper()
	for i, n := range sizes {
		xid := uint32(100 + i)
		call := bcCallMsg(xid, n)
		if err := bp.resp.SendBackwardCall(ctx, [][]byte{call[:5], call[5:]}, true); err != nil {
			t.Fatalf("size %d: %v", n, err)
		}
		if got := bp.wait(t, xid); !bytes.Equal(got, bcEcho(call)) {
			t.Fatalf("size %d: reply differs", n)
		}
	}
}

// alongside runs n backward calls and n forward calls with the same XIDs
// (1000..) at once, then checks every backward reply byte for byte.
func (bp *bcPair) alongside(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Add(2)
		xid := uint32(1000 + i)
		go func() {
			defer wg.Done()
			if err := bp.resp.SendBackwardCall(ctx, [][]byte{bcCallMsg(xid, 64+i)}, true); err != nil {
				errs <- err
			}
		}()
		go func() {
			defer wg.Done()
			r, err := bp.call(bcFwdMsg(xid), nil)
			if err != nil {
				errs <- err
				return
			}
			r.Release()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range n {
		xid := uint32(1000 + i)
		if got := bp.wait(t, xid); !bytes.Equal(got, bcEcho(bcCallMsg(xid, 64+i))) {
			t.Fatalf("xid %d: reply differs", xid)
		}
	}
}

// Backward calls of every size up to the inline limit reach the
// requester's handler and its replies come back byte for byte, while
// forward calls with the same XIDs run alongside.
func TestBackchannelRoundTrip(t *testing.T) {
	bp := newBCPair(t, 4, BackwardHandlerFunc(bcEcho))
	ctx := context.Background()
	max := bp.resp.BackchannelMax()
	if max != 4096-BackwardHeaderSize {
		t.Fatalf("BackchannelMax %d", max)
	}
	sizes := []int{8, 9, 100, 1000, max - 1, max}
	bp.sizes(t, ctx, sizes)
	// The requester's grant (default 8) is capped by our MaxCalls (4).
	bp.resp.bc.mu.Lock()
	g := bp.resp.bc.granted
	bp.resp.bc.mu.Unlock()
	if g != 4 {
		t.Fatalf("granted %d, want 4", g)
	}
	// Concurrent backward calls and forward calls sharing XIDs.
	bp.alongside(t, ctx, 32)
	if bp.rm.get("call") != len(sizes)+32 || bp.qm.get("reply") != len(sizes)+32 {
		t.Fatalf("metrics: responder %v requester %v", bp.rm.n, bp.qm.n)
	}
	if bp.resp.Outstanding() != 0 || bp.resp.BackchannelOutstanding() != 0 {
		t.Fatalf("outstanding forward %d backward %d", bp.resp.Outstanding(), bp.resp.BackchannelOutstanding())
	}
}

// Credits: one backward call before the first grant; more only after
// the requester's reply grants them; a call that does not fit is refused
// before anything is sent.
func TestBackchannelCreditsAndSize(t *testing.T) {
	release := make(chan struct{})
	bp := newBCPair(t, 2, BackwardHandlerFunc(func(call []byte) []byte {
		<-release
		return bcEcho(call)
	}))
	ctx := context.Background()
	if err := bp.resp.SendBackwardCall(ctx, [][]byte{bcCallMsg(1, 16)}, false); err != nil {
		t.Fatal(err)
	}
	if err := bp.resp.SendBackwardCall(ctx, [][]byte{bcCallMsg(2, 16)}, false); !errors.Is(err, ErrBackchannelCredit) {
		t.Fatalf("second call before a grant: %v", err)
	}
	if err := bp.resp.SendBackwardCall(ctx, [][]byte{bcCallMsg(1, 16)}, false); !errors.Is(err, ErrBackchannelXID) && !errors.Is(err, ErrBackchannelCredit) {
		t.Fatalf("duplicate xid: %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := bp.resp.SendBackwardCall(tctx, [][]byte{bcCallMsg(2, 16)}, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting call: %v", err)
	}
	close(release)
	bp.wait(t, 1)
	for xid := uint32(2); xid < 4; xid++ {
		if err := bp.resp.SendBackwardCall(ctx, [][]byte{bcCallMsg(xid, 16)}, false); err != nil {
			t.Fatalf("after the grant, call %d: %v", xid, err)
		}
	}
	bp.wait(t, 2)
	bp.wait(t, 3)
	big := bcCallMsg(9, bp.resp.BackchannelMax()+1)
	if err := bp.resp.SendBackwardCall(ctx, [][]byte{big}, true); !errors.Is(err, ErrBackchannelTooBig) {
		t.Fatalf("oversized call: %v", err)
	}
	if bp.rm.get("no_credit") != 1 || bp.rm.get("too_big") != 1 {
		t.Fatalf("metrics %v", bp.rm.n)
	}
	// The connection is still good for forward traffic.
	r, err := bp.call(bcFwdMsg(7), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
}

// A requester without a backchannel service drops backward calls as
// unmatched replies (as Linux does without a bc_serv) but keeps its connection; a backward reply matching no call
// is dropped by the responder and the connection survives too; a
// responder without a backchannel refuses to send.
func TestBackchannelStrayMessages(t *testing.T) {
	bp := newBCPair(t, 2, nil)
	ctx := context.Background()
	if err := bp.resp.SendBackwardCall(ctx, [][]byte{bcCallMsg(5, 40)}, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "unmatched drop counted", func() bool { return bp.qmet.get("drop_unmatched") == 1 })
	bp.resp.AbandonBackwardCall(5)
	if err := bp.req.sendBackwardReply(bcEcho(bcCallMsg(77, 40))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "unmatched counted", func() bool { return bp.rm.get("unmatched") == 1 })
	r, err := bp.call(bcFwdMsg(5), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	if bp.resp.Outstanding() != 0 {
		t.Fatalf("a stray reply took a forward credit: %d", bp.resp.Outstanding())
	}

	off := newEnginePair(t, pairOpts{}) // backchannel receives posted, no OnReply
	if err := off.resp.SendBackwardCall(ctx, [][]byte{bcCallMsg(1, 16)}, true); !errors.Is(err, ErrBackchannelOff) {
		t.Fatalf("no backchannel: %v", err)
	}
}
