package iwarp

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// A chain longer than one transmit batch is one burst: every entry goes
// out, in order, and a single zero-length Read proves the placement of all
// of them. The data is checked byte for byte and the completions in order.
func TestBurstOneFence(t *testing.T) {
	cli, srv := pair(t, Config{}, "")
	const n, size = 2*batchWRs - 3, 300 // more than one batch, within MaxSendWR 64
	remote := srv.mem(t, n*size, allAccess)
	local := cli.mem(t, n*size, allAccess)
	fill(local.Bytes(), 0x5a)
	wrs := make([]verbs.SendWR, n)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(100 + i), Op: verbs.OpRDMAWrite, Signal: i%3 != 1,
			SGL:        []verbs.SGE{{Buf: local.Bytes()[i*size : (i+1)*size], LKey: local.LKey()}},
			RemoteAddr: remote.Addr() + uint64(i*size), RKey: remote.RKey()}
		if i > 0 {
			wrs[i-1].Next = &wrs[i]
		}
	}
	if err := cli.conn.PostSend(&wrs[0]); err != nil {
		t.Fatal(err)
	}
	for i := range wrs {
		if i%3 == 1 {
			continue
		}
		wc := wait(t, cli.scq)
		if wc.ID != uint64(100+i) || wc.Status != verbs.StatusSuccess || wc.ByteLen != size {
			t.Fatalf("completion %+v, want ID %d success", wc, 100+i)
		}
	}
	// Completion proves placement: the bytes are there without any
	// further message.
	sameBytes(t, remote.Bytes(), local.Bytes())
	c := cli.conn.(*conn)
	c.mu.Lock()
	reads := c.txMSN[qnReadReq] - 1
	c.mu.Unlock()
	if reads != 1 {
		t.Fatalf("%d zero-length Reads for one posted burst of %d Writes, want 1", reads, n)
	}
}

// A burst of large Writes is proven piecewise: one fence Read per
// fenceBytes of payload, so the first Writes complete while the later ones
// are still in flight (TestBurstOneFence is the small-message side of the
// same rule). Data checked byte for byte, completions in order.
func TestLargeBurstFencePerMiB(t *testing.T) {
	cli, srv := pair(t, Config{}, "")
	const n, size = 4, fenceBytes
	remote := srv.mem(t, n*size, allAccess)
	local := cli.mem(t, n*size, allAccess)
	fill(local.Bytes(), 0xa7)
	wrs := make([]verbs.SendWR, n)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i), Op: verbs.OpRDMAWrite, Signal: true,
			SGL:        []verbs.SGE{{Buf: local.Bytes()[i*size : (i+1)*size], LKey: local.LKey()}},
			RemoteAddr: remote.Addr() + uint64(i*size), RKey: remote.RKey()}
		if i > 0 {
			wrs[i-1].Next = &wrs[i]
		}
	}
	c := cli.conn.(*conn)
	c.mu.Lock()
	before := c.txMSN[qnReadReq]
	c.mu.Unlock()
	if err := cli.conn.PostSend(&wrs[0]); err != nil {
		t.Fatal(err)
	}
	for i := range wrs {
		wc := wait(t, cli.scq)
		if wc.ID != uint64(i) || wc.Status != verbs.StatusSuccess || wc.ByteLen != size {
			t.Fatalf("completion %+v, want ID %d success", wc, i)
		}
	}
	sameBytes(t, remote.Bytes(), local.Bytes())
	c.mu.Lock()
	reads := c.txMSN[qnReadReq] - before
	c.mu.Unlock()
	if reads != n {
		t.Fatalf("%d zero-length Reads for %d Writes of %d bytes, want one per Write", reads, n, size)
	}
}

// An entry whose buffer fails the local check in the middle of a batch:
// the entries before it are sent and succeed (the peer has their data),
// it completes with StatusLocalProtection, the rest flush, and a PostSend
// after the error completion is refused.
func TestBatchLocalErrorMidChain(t *testing.T) {
	cli, srv := pair(t, Config{}, "")
	remote := srv.mem(t, 4096, allAccess)
	rbuf := srv.mem(t, 256, allAccess)
	local := cli.mem(t, 4096, allAccess)
	fill(local.Bytes(), 0x33)
	for i := range 2 {
		if err := srv.conn.PostRecv(&verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{{Buf: rbuf.Bytes()[i*128 : (i+1)*128], LKey: rbuf.LKey()}}}); err != nil {
			t.Fatal(err)
		}
	}
	stray := make([]byte, 16) // not registered
	w4 := &verbs.SendWR{ID: 4, Op: verbs.OpSend, Signal: true, SGL: []verbs.SGE{{Buf: local.Bytes()[:8], LKey: local.LKey()}}}
	w3 := &verbs.SendWR{ID: 3, Op: verbs.OpSend, Signal: true, SGL: []verbs.SGE{{Buf: stray, LKey: local.LKey()}}, Next: w4}
	w2 := &verbs.SendWR{ID: 2, Op: verbs.OpSend, Signal: true, SGL: []verbs.SGE{{Buf: local.Bytes()[1000:1100], LKey: local.LKey()}}, Next: w3}
	w1 := &verbs.SendWR{ID: 1, Op: verbs.OpRDMAWrite, Signal: true, SGL: []verbs.SGE{{Buf: local.Bytes()[:4096], LKey: local.LKey()}},
		RemoteAddr: remote.Addr(), RKey: remote.RKey(), Next: w2}
	if err := cli.conn.PostSend(w1); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		id uint64
		st verbs.Status
	}{{1, verbs.StatusSuccess}, {2, verbs.StatusSuccess}, {3, verbs.StatusLocalProtection}, {4, verbs.StatusFlushed}} {
		wc := wait(t, cli.scq)
		if wc.ID != want.id || wc.Status != want.st || wc.Conn != cli.conn {
			t.Fatalf("completion %+v, want ID %d %s", wc, want.id, want.st)
		}
		if want.st == verbs.StatusLocalProtection {
			if err := cli.conn.PostSend(w4); err == nil {
				t.Fatal("PostSend accepted after a local protection error completed")
			}
		}
	}
	wc := wait(t, srv.rcq)
	if wc.ID != 0 || wc.Status != verbs.StatusSuccess || wc.ByteLen != 100 {
		t.Fatalf("receive %+v, want ID 0 with 100 bytes", wc)
	}
	sameBytes(t, rbuf.Bytes()[:100], local.Bytes()[1000:1100])
	// The Write before the Send is placed in full (RDMAP ordering).
	sameBytes(t, remote.Bytes(), local.Bytes())
	expectStatus(t, wait(t, srv.rcq), verbs.OpRecv, verbs.StatusFlushed)
	waitDone(t, srv.conn)
}

// A Send whose writev failed was not handed to TCP: it completes flushed,
// not successfully, whether completions wait for placement or come on
// transmit, and whoever wrote it (the tx goroutine or, inline, PostSend).
// The write fails at once (a write deadline in the past), the receive side
// untouched.
func TestFailedWriteNotCompleted(t *testing.T) {
	for _, cfg := range []Config{{}, {CompleteOnTransmit: true}, {CompleteOnTransmit: true, TxMode: TxGoroutine}, {TxMode: TxGoroutine}, {TxMode: TxGreedy}} {
		t.Run(fmt.Sprintf("onTransmit=%v,tx=%v", cfg.CompleteOnTransmit, cfg.TxMode), func(t *testing.T) {
			cli, srv := pair(t, cfg, "")
			cc := cli.conn.(*conn)
			local := cli.mem(t, 512, allAccess)
			rbuf := srv.mem(t, 512, allAccess)
			if err := srv.conn.PostRecv(&verbs.RecvWR{ID: 1, SGL: []verbs.SGE{{Buf: rbuf.Bytes(), LKey: rbuf.LKey()}}}); err != nil {
				t.Fatal(err)
			}
			waitParked(t, cc)
			if err := cc.tc.SetWriteDeadline(time.Now().Add(-time.Second)); err != nil {
				t.Fatal(err)
			}
			if err := cli.conn.PostSend(&verbs.SendWR{ID: 7, Op: verbs.OpSend, Signal: true,
				SGL: []verbs.SGE{{Buf: local.Bytes(), LKey: local.LKey()}}}); err != nil {
				t.Fatal(err)
			}
			wc := wait(t, cli.scq)
			if wc.ID != 7 || wc.Status != verbs.StatusFlushed {
				t.Fatalf("completion %+v of a Send whose write failed, want ID 7 %v", wc, verbs.StatusFlushed)
			}
			waitDone(t, cli.conn)
			if err := cli.conn.Err(); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("Err() = %v, want the failed write", err)
			}
		})
	}
}
