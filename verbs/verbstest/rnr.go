package verbstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// expectBroken checks the state a queue pair must be in after a fatal
// completion error: a further Send is either refused at post time or
// completes in error (a flush), never with success.
func (e *env) expectBroken(t testing.TB, x *end, sge verbs.SGE) {
	t.Helper()
	const id = 0xdead
	if err := x.conn.PostSend(sendWR(id, sge)); err != nil {
		t.Logf("%s: PostSend after the error: %v", x.name, err)
		return
	}
	wc := e.waitOne(t, x.scq)
	if wc.ID != id || wc.Status == verbs.StatusSuccess {
		t.Fatalf("%s: Send after a fatal error completed %s, want an error (flushed)", x.name, describe1(wc))
	}
}

// testRNR sends with no receive posted at the peer and RNRRetry
// Factory.RNRRetry (default 1): the sender sees StatusRNR (or, under the
// RNRRetryExceeded quirk, StatusGeneral) and its queue pair is then
// broken. Under the NoRNRRetry quirk (iWARP) the connection may instead
// end on both sides.
func testRNR(t *testing.T, c config) {
	e := newEnv(t, c)
	p := e.connect(t, func(o *verbs.ConnOptions) { o.RNRRetry = c.RNRRetry }, nil)
	out := e.cli.region(t, 64, 0)
	start := time.Now()
	post(t, p.cli.conn, sendWR(1, out.sge(0, 64)))
	if !c.Quirks.NoRNRRetry {
		wc := e.waitOne(t, p.cli.scq)
		t.Logf("Send without a receive completed %s after %v", describe1(wc), time.Since(start))
		if c.Quirks.RNRRetryExceeded && wc.Status == verbs.StatusGeneral {
			wc.Status = verbs.StatusRNR // documented equivalent
		}
		mustWC(t, wc, 1, verbs.OpSend, verbs.StatusRNR, p.cli.conn)
		e.expectBroken(t, p.cli, out.sge(0, 64))
		return
	}
	deadline := time.Now().Add(c.Timeout)
	for !isDone(p.cli.conn) {
		var buf [4]verbs.WC
		for _, wc := range buf[:p.cli.scq.Poll(buf[:])] {
			t.Logf("sender completion %s", describe1(wc))
			if wc.Status == verbs.StatusRNR {
				e.expectBroken(t, p.cli, out.sge(0, 64))
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("Send without a posted receive: no StatusRNR and the connection did not end")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_ = p.cli.scq.Wait(ctx)
		cancel()
	}
	e.waitDone(t, p.srv.conn, "receiver after an unexpected Send")
	if p.cli.conn.Err() == nil || p.srv.conn.Err() == nil {
		t.Errorf("connection ended by a protocol error but Err() is nil: sender %v, receiver %v",
			p.cli.conn.Err(), p.srv.conn.Err())
	}
	if err := p.cli.conn.PostSend(sendWR(2, out.sge(0, 64))); !errors.Is(err, verbs.ErrNotConnected) {
		t.Errorf("PostSend after the connection ended: %v, want ErrNotConnected", err)
	}
}

// testRNRRetryRecovers: with RNRRetry 7 (retry forever) a Send that
// arrives before its receive is posted is delivered once the receive is
// posted. Not for transports without RNR retry.
func testRNRRetryRecovers(t *testing.T, c config) {
	if c.Quirks.NoRNRRetry {
		t.Skip("provider has no receiver-not-ready retry (Quirks.NoRNRRetry)")
	}
	e := newEnv(t, c)
	p := e.connect(t, func(o *verbs.ConnOptions) { o.RNRRetry = 7 }, nil)
	out := e.cli.region(t, 256, 0)
	in := e.srv.region(t, 256, verbs.AccessLocalWrite)
	fill(out.Bytes(), 41)
	post(t, p.cli.conn, sendWR(1, out.sge(0, 256)))
	time.Sleep(100 * time.Millisecond)
	postRecv(t, p.srv.conn, recvWR(2, in.sge(0, 256)))
	mustWC(t, e.waitOne(t, p.cli.scq), 1, verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
	mustWC(t, e.waitOne(t, p.srv.rcq), 2, verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
	same(t, "message sent before its receive was posted", in.Bytes(), out.Bytes())
}

// testReceiveTooSmall sends 100 bytes into a 16-byte receive: the receive
// completes with StatusLocalLength and the receiver's queue pair is then
// broken. Whatever the sender sees is transport-specific (InfiniBand: a
// remote invalid request error; iWARP: a local success before the
// Terminate), so it is only logged.
func testReceiveTooSmall(t *testing.T, c config) {
	e := newEnv(t, c)
	p := e.connect(t, nil, nil)
	out := e.cli.region(t, 100, 0)
	in := e.srv.region(t, 64, verbs.AccessLocalWrite)
	postRecv(t, p.srv.conn, recvWR(1, in.sge(0, 16)))
	post(t, p.cli.conn, sendWR(2, out.sge(0, 100)))
	mustWC(t, e.waitOne(t, p.srv.rcq), 1, verbs.OpRecv, verbs.StatusLocalLength, p.srv.conn)
	for _, b := range in.Bytes()[16:] {
		if b != 0 {
			t.Fatal("a too-long message was written past its receive buffer")
		}
	}
	e.expectBroken(t, p.srv, in.sge(0, 16))
	var buf [2]verbs.WC
	for _, wc := range buf[:p.cli.scq.Poll(buf[:])] {
		t.Logf("sender completion %s", describe1(wc))
	}
}
