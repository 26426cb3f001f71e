package verbstest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// collect takes exactly n completions from cq, waiting (parked in
// CQ.Wait) until ctx is done. It never polls more than it needs, so
// completions beyond n stay on the queue for a later check.
func collect(ctx context.Context, cq verbs.CQ, n int) ([]verbs.WC, error) {
	wcs := make([]verbs.WC, 0, n)
	buf := make([]verbs.WC, 64)
	for len(wcs) < n {
		k := cq.Poll(buf[:min(len(buf), n-len(wcs))])
		if k < 0 || k > min(len(buf), n-len(wcs)) {
			return wcs, fmt.Errorf("CQ.Poll returned %d for a %d-entry slice", k, min(len(buf), n-len(wcs)))
		}
		wcs = append(wcs, buf[:k]...)
		if k > 0 {
			continue
		}
		if err := cq.Wait(ctx); err != nil {
			return wcs, fmt.Errorf("waiting for completion %d of %d: %w (got %s)", len(wcs)+1, n, err, describe(wcs))
		}
	}
	return wcs, nil
}

// waitWCs is collect bounded by the case timeout, failing the test.
func (e *env) waitWCs(t testing.TB, cq verbs.CQ, n int) []verbs.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e.c.Timeout)
	defer cancel()
	wcs, err := collect(ctx, cq, n)
	if err != nil {
		t.Fatal(err)
	}
	return wcs
}

// waitOne waits for a single completion.
func (e *env) waitOne(t testing.TB, cq verbs.CQ) verbs.WC {
	t.Helper()
	return e.waitWCs(t, cq, 1)[0]
}

// expectQuiet fails if cq yields a completion within d.
func expectQuiet(t testing.TB, cq verbs.CQ, d time.Duration, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	err := cq.Wait(ctx)
	var buf [8]verbs.WC
	if n := cq.Poll(buf[:]); n > 0 {
		t.Fatalf("%s: unexpected completions %s", what, describe(buf[:n]))
	}
	if err == nil {
		t.Fatalf("%s: CQ.Wait returned nil but Poll found nothing", what)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s: CQ.Wait: %v, want context.DeadlineExceeded", what, err)
	}
}

// checkWC checks the fields of a completion that are defined for it. The
// opcode and byte count are only defined for successful completions (an
// HCA leaves them undefined on errors), and ByteLen only for receives.
func checkWC(wc verbs.WC, id uint64, op verbs.Opcode, st verbs.Status, conn verbs.Conn) error {
	if wc.ID != id || wc.Status != st {
		return fmt.Errorf("completion %s, want id %#x status %q", describe1(wc), id, st)
	}
	if st == verbs.StatusSuccess && wc.Op != op {
		return fmt.Errorf("completion %s, want opcode %s", describe1(wc), op)
	}
	if conn != nil && wc.Conn != conn {
		return fmt.Errorf("completion %s: WC.Conn is %v, want the Conn %v", describe1(wc), wc.Conn, conn)
	}
	return nil
}

func mustWC(t testing.TB, wc verbs.WC, id uint64, op verbs.Opcode, st verbs.Status, conn verbs.Conn) {
	t.Helper()
	if err := checkWC(wc, id, op, st, conn); err != nil {
		t.Fatal(err)
	}
}

func describe1(wc verbs.WC) string {
	s := fmt.Sprintf("{id %#x %s %q len %d", wc.ID, wc.Op, wc.Status, wc.ByteLen)
	if wc.Invalidated {
		s += fmt.Sprintf(" invalidated rkey %#x", wc.InvalidatedRKey)
	}
	return s + "}"
}

func describe(wcs []verbs.WC) string {
	s := "["
	for i, wc := range wcs {
		if i == 8 {
			s += fmt.Sprintf(" ... %d more", len(wcs)-i)
			break
		}
		if i > 0 {
			s += " "
		}
		s += describe1(wc)
	}
	return s + "]"
}

// post posts a send chain and fails the test on error.
func post(t testing.TB, c verbs.Conn, wr *verbs.SendWR) {
	t.Helper()
	if err := c.PostSend(wr); err != nil {
		t.Fatalf("PostSend(%s id %#x): %v", wr.Op, wr.ID, err)
	}
}

// postRecv posts a receive chain and fails the test on error.
func postRecv(t testing.TB, c verbs.Conn, wr *verbs.RecvWR) {
	t.Helper()
	if err := c.PostRecv(wr); err != nil {
		t.Fatalf("PostRecv(id %#x): %v", wr.ID, err)
	}
}

// recvWR is a receive of one SGE.
func recvWR(id uint64, sges ...verbs.SGE) *verbs.RecvWR {
	return &verbs.RecvWR{ID: id, SGL: sges}
}

// sendWR is a signalled Send of the given SGEs.
func sendWR(id uint64, sges ...verbs.SGE) *verbs.SendWR {
	return &verbs.SendWR{ID: id, Op: verbs.OpSend, SGL: sges, Signal: true}
}

// rdmaWR is a signalled RDMA Write or Read between sges and rem.
func rdmaWR(id uint64, op verbs.Opcode, rem remote, sges ...verbs.SGE) *verbs.SendWR {
	return &verbs.SendWR{ID: id, Op: op, SGL: sges, Signal: true, RemoteAddr: rem.addr, RKey: rem.rkey}
}

// chain links work requests with Next and returns the first.
func chain(wrs ...*verbs.SendWR) *verbs.SendWR {
	for i := 0; i+1 < len(wrs); i++ {
		wrs[i].Next = wrs[i+1]
	}
	return wrs[0]
}

// waitDone waits for a connection to end.
func (e *env) waitDone(t testing.TB, c verbs.Conn, what string) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(e.c.Timeout):
		t.Fatalf("%s: Done not closed within %v", what, e.c.Timeout)
	}
}

// isDone reports whether a connection has ended.
func isDone(c verbs.Conn) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}
