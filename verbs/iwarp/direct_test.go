package iwarp

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// directSink is a verbs.DirectCQ consumer for tests: it polls what the
// provider hands it into got, or declines (leaving the CQ to Wait).
type directSink struct {
	cq      *cq
	decline atomic.Bool
	got     chan verbs.WC
}

func (d *directSink) consume() bool {
	if d.decline.Load() {
		return false
	}
	var wcs [4]verbs.WC
	for {
		n := d.cq.Poll(wcs[:])
		if n == 0 {
			return true
		}
		for _, wc := range wcs[:n] {
			d.got <- wc
		}
	}
}

func newSink(t *testing.T, c verbs.CQ) *directSink {
	d := &directSink{cq: c.(*cq), got: make(chan verbs.WC, 16)}
	c.(verbs.DirectCQ).SetDirect(d.consume)
	t.Cleanup(func() { c.(verbs.DirectCQ).SetDirect(nil) })
	return d
}

func (d *directSink) next(t *testing.T) verbs.WC {
	t.Helper()
	select {
	case wc := <-d.got:
		return wc
	case <-time.After(10 * time.Second):
		t.Fatal("the direct consumer got no completion")
		return verbs.WC{}
	}
}

// TestDirectCQ: with a direct consumer installed, the Send completion
// (tx goroutine) and the Recv completion (rx goroutine) are handed to it
// on the provider's goroutine and Wait gets no wake-up; a consumer that
// declines leaves them to Wait, woken as without one.
func TestDirectCQ(t *testing.T) {
	cli, srv := pair(t, Config{}, "")
	sbuf := cli.mem(t, 64, verbs.AccessLocalWrite)
	rbuf := srv.mem(t, 64, verbs.AccessLocalWrite)
	send := cli.conn.(*conn).scq
	recv := srv.conn.(*conn).rcq
	sendSink, recvSink := newSink(t, send), newSink(t, recv)

	for i := range 3 {
		if err := srv.conn.PostRecv(&verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{{Buf: rbuf.Bytes(), LKey: rbuf.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		copy(sbuf.Bytes(), "direct")
		wr := &verbs.SendWR{ID: uint64(100 + i), Op: verbs.OpSend, Signal: true, SGL: []verbs.SGE{{Buf: sbuf.Bytes()[:6], LKey: sbuf.LKey()}}}
		if err := cli.conn.PostSend(wr); err != nil {
			t.Fatal(err)
		}
		expectStatus(t, sendSink.next(t), verbs.OpSend, verbs.StatusSuccess)
		wc := recvSink.next(t)
		expectStatus(t, wc, verbs.OpRecv, verbs.StatusSuccess)
		if wc.ID != uint64(i) || wc.ByteLen != 6 || string(rbuf.Bytes()[:6]) != "direct" {
			t.Fatalf("receive %+v, %q", wc, rbuf.Bytes()[:6])
		}
	}
	if len(send.notify) != 0 || len(recv.notify) != 0 {
		t.Fatalf("Wait was woken (send %d, recv %d) although the direct consumer took every completion", len(send.notify), len(recv.notify))
	}

	// Declined: the completion waits in the CQ and Wait is woken.
	recvSink.decline.Store(true)
	if err := srv.conn.PostRecv(&verbs.RecvWR{ID: 9, SGL: []verbs.SGE{{Buf: rbuf.Bytes(), LKey: rbuf.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	if err := cli.conn.PostSend(&verbs.SendWR{ID: 109, Op: verbs.OpSend, SGL: []verbs.SGE{{Buf: sbuf.Bytes()[:6], LKey: sbuf.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	wc := wait(t, srv.rcq)
	expectStatus(t, wc, verbs.OpRecv, verbs.StatusSuccess)
	if wc.ID != 9 || len(recvSink.got) != 0 {
		t.Fatalf("declined receive %+v (and %d given to the consumer), want ID 9 through Wait", wc, len(recvSink.got))
	}
}

// TestSettleAfterPost: with CompleteOnTransmit a Write written inline
// completes inside PostSend. With a direct consumer that settles after
// its posts (verbs.PostSettledCQ) that completion wakes no Wait: the
// poster's Settle(true) hands it to the consumer on the poster's
// goroutine, and Settle(false) wakes Wait for it instead. Without the
// promise, PostSend wakes Wait as before.
func TestSettleAfterPost(t *testing.T) {
	cli, srv := pair(t, Config{CompleteOnTransmit: true}, "")
	cc := cli.conn.(*conn)
	scq := cc.scq
	sink := newSink(t, scq)
	local := cli.mem(t, 64, allAccess)
	remote := srv.mem(t, 64, allAccess)
	write := func(id uint64) {
		t.Helper()
		waitParked(t, cc)
		if err := cli.conn.PostSend(&verbs.SendWR{ID: id, Op: verbs.OpRDMAWrite, Signal: true,
			SGL:        []verbs.SGE{{Buf: local.Bytes(), LKey: local.LKey()}},
			RemoteAddr: remote.Addr(), RKey: remote.RKey()}); err != nil {
			t.Fatal(err)
		}
	}
	inline0 := cc.tx.inlineRounds.Load()

	scq.SettlePosts(true)
	write(1)
	if len(scq.notify) != 0 || len(sink.got) != 0 || !scq.owed.Load() {
		t.Fatalf("after PostSend: Wait woken %d, consumer got %d, owed %v; want the completion left to Settle", len(scq.notify), len(sink.got), scq.owed.Load())
	}
	scq.Settle(true)
	if len(sink.got) != 1 || len(scq.notify) != 0 {
		t.Fatalf("Settle(true): consumer got %d, Wait woken %d; want the completion consumed here", len(sink.got), len(scq.notify))
	}
	if wc := <-sink.got; wc.ID != 1 || wc.Status != verbs.StatusSuccess {
		t.Fatalf("completion %+v, want id 1 success", wc)
	}

	write(2)
	scq.Settle(false)
	if len(scq.notify) != 1 || len(sink.got) != 0 {
		t.Fatalf("Settle(false): Wait woken %d, consumer got %d; want Wait woken", len(scq.notify), len(sink.got))
	}
	if wc := wait(t, scq); wc.ID != 2 {
		t.Fatalf("Wait found %+v, want id 2", wc)
	}

	scq.SettlePosts(false)
	write(3)
	if len(scq.notify) != 1 {
		t.Fatalf("without the promise PostSend's completion woke Wait %d times, want 1", len(scq.notify))
	}
	if wc := wait(t, scq); wc.ID != 3 {
		t.Fatalf("Wait found %+v, want id 3", wc)
	}
	if n := cc.tx.inlineRounds.Load() - inline0; n != 3 {
		t.Errorf("%d of 3 Writes on an idle connection went inline", n)
	}
}

// A direct consumer that posts RDMA Reads while others are outstanding
// (the gateway's engine pulling Read chunks) has them transmitted by the
// rx goroutine that ran it, in one round before rx next waits, instead of
// each post kicking the tx goroutine (each kick a goroutine wake-up, and
// at GOMAXPROCS > 1 a thread's). 2,000 Reads, four in flight, each one's
// data checked byte for byte: without that path the client's tx goroutine
// was kicked about once per Read completion batch (0.25 per Read); with
// it, almost never. Also proves the posts rx holds back while more data
// is queued are never stranded: the run would stall otherwise.
func TestDirectConsumerPostsGoWithRx(t *testing.T) {
	const window, size, total = 4, 4 << 10, 2000
	cli, srv := pair(t, Config{}, "")
	wrs, local, remote := windowWRsMem(t, cli, srv, verbs.OpRDMARead, size, window)
	for i := range window {
		fill(remote.Bytes()[i*size:(i+1)*size], byte(17*i+1))
	}
	slot := func(m verbs.MR, i uint64) []byte { return m.Bytes()[int(i)*size : int(i+1)*size] }
	c := cli.conn.(*conn)
	kicks := c.tx.kicks.Load()
	err := runDirect(t, cli, wrs, total,
		func(_ int, w *verbs.SendWR) { clear(slot(local, w.ID)) },
		func(wc verbs.WC) error {
			if !bytes.Equal(slot(local, wc.ID), slot(remote, wc.ID)) {
				return fmt.Errorf("Read in slot %d: data differs", wc.ID)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if k := c.tx.kicks.Load() - kicks; k > total/50 {
		t.Errorf("the client's tx goroutine was kicked %d times for %d Reads posted by the direct consumer; want at most %d", k, total, total/50)
	} else {
		t.Logf("%d Reads, %d kicks of the tx goroutine", total, k)
	}
}

// The reply a direct consumer posts from the receive goroutine (the
// gateway's engine answering a call itself) with CompleteOnTransmit and
// the consumer's promise to settle after its posts: rx writes it once the
// consumer returns (rxState.consume), so its completion, left owed by
// that inline write, must be settled by rx before it waits again. With no
// further traffic on the connection nothing else would hand it to the
// consumer: the Send would stay uncompleted (its buffer and send queue
// slot held) until the peer's next message.
func TestDirectConsumerReplyCompletes(t *testing.T) {
	// rx's periodic look (rxResetCheck) would settle it after a second:
	// out of this test's way.
	defer func(d time.Duration) { rxResetCheck = d }(rxResetCheck)
	rxResetCheck = time.Minute
	cli, srv := pair(t, Config{CompleteOnTransmit: true}, "")
	sc := srv.conn.(*conn)
	in := srv.mem(t, 64, verbs.AccessLocalWrite)
	out := srv.mem(t, 64, 0)
	copy(out.Bytes(), "reply")
	cin := cli.mem(t, 64, verbs.AccessLocalWrite)
	cout := cli.mem(t, 64, 0)
	copy(cout.Bytes(), "call")
	if err := sc.PostRecv(&verbs.RecvWR{ID: 1, SGL: []verbs.SGE{{Buf: in.Bytes(), LKey: in.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	if err := cli.conn.PostRecv(&verbs.RecvWR{ID: 2, SGL: []verbs.SGE{{Buf: cin.Bytes(), LKey: cin.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	sent := make(chan verbs.WC, 4)
	var failed error
	consume := func() bool {
		if !mu.TryLock() {
			return false
		}
		defer mu.Unlock()
		var wcs [4]verbs.WC
		for {
			n := sc.rcq.Poll(wcs[:])
			for _, wc := range wcs[:n] {
				if wc.Status != verbs.StatusSuccess || string(in.Bytes()[:wc.ByteLen]) != "call" {
					failed = fmt.Errorf("call %+v %q", wc, in.Bytes()[:wc.ByteLen])
					continue
				}
				if err := sc.PostSend(&verbs.SendWR{ID: 3, Op: verbs.OpSend, Signal: true,
					SGL: []verbs.SGE{{Buf: out.Bytes()[:5], LKey: out.LKey()}}}); err != nil {
					failed = err
				}
				sc.scq.Settle(true) // the promise (harmless inside consume)
			}
			m := sc.scq.Poll(wcs[:])
			for _, wc := range wcs[:m] {
				sent <- wc
			}
			if n == 0 && m == 0 {
				return true
			}
		}
	}
	sc.scq.SettlePosts(true)
	sc.rcq.SetDirect(consume)
	sc.scq.SetDirect(consume)
	t.Cleanup(func() { sc.rcq.SetDirect(nil); sc.scq.SetDirect(nil); sc.scq.SettlePosts(false) })
	// The owner's goroutines, as the gateway's: they take what a consume
	// that declined (rx's and tx's colliding) left to Wait. A completion
	// left owed to a settle wakes no Wait, so they do not hide the bug.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, q := range []verbs.CQ{sc.rcq, sc.scq} {
		go func() {
			for q.Wait(ctx) == nil {
				if !consume() {
					mu.Lock() // the holder drains the CQs; then look again
					mu.Unlock()
				}
			}
		}()
	}

	if err := cli.conn.PostSend(&verbs.SendWR{ID: 4, Op: verbs.OpSend, Signal: true,
		SGL: []verbs.SGE{{Buf: cout.Bytes()[:4], LKey: cout.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	wc := wait(t, cli.rcq)
	if wc.ID != 2 || wc.Status != verbs.StatusSuccess || string(cin.Bytes()[:wc.ByteLen]) != "reply" {
		t.Fatalf("client receive %+v %q, want the reply", wc, cin.Bytes()[:wc.ByteLen])
	}
	select {
	case wc := <-sent:
		if wc.ID != 3 || wc.Status != verbs.StatusSuccess {
			t.Fatalf("reply's completion %+v, want ID 3 success", wc)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the reply went out but its Send never completed to the consumer (owed %v)", sc.scq.owed.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if failed != nil {
		t.Fatal(failed)
	}
}
