package verbstest

import (
	"context"
	"errors"
	"runtime"
	"sort"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
	"golang.org/x/sys/unix"
)

// testDisconnect disconnects from either side with receives outstanding
// on both: every receive completes with StatusFlushed exactly once, Done
// closes on both ends, the disconnecting end's Err is nil, and PostSend
// afterwards fails with ErrNotConnected on both ends.
func testDisconnect(t *testing.T, c config) {
	for _, who := range []string{"ClientFirst", "ServerFirst"} {
		t.Run(who, func(t *testing.T) {
			const n = 8
			e := newEnv(t, c)
			p := e.connect(t, nil, nil)
			cin := e.cli.region(t, n*64, verbs.AccessLocalWrite)
			sin := e.srv.region(t, n*64, verbs.AccessLocalWrite)
			for i := range n {
				postRecv(t, p.cli.conn, recvWR(uint64(10+i), cin.sge(i*64, 64)))
				postRecv(t, p.srv.conn, recvWR(uint64(20+i), sin.sge(i*64, 64)))
			}
			first, second := p.cli, p.srv
			if who == "ServerFirst" {
				first, second = p.srv, p.cli
			}
			if err := first.conn.Disconnect(); err != nil {
				t.Fatalf("%s Disconnect: %v", first.name, err)
			}
			e.waitDone(t, first.conn, first.name+" after its Disconnect")
			e.waitDone(t, second.conn, second.name+" after the peer's Disconnect")
			if err := first.conn.Err(); err != nil {
				t.Errorf("%s Err after a local Disconnect: %v, want nil", first.name, err)
			}
			for _, x := range []struct {
				end  *end
				base uint64
				mem  *region
			}{{p.cli, 10, cin}, {p.srv, 20, sin}} {
				wcs := e.waitWCs(t, x.end.rcq, n)
				ids := make([]int, 0, n)
				for _, wc := range wcs {
					if wc.Status != verbs.StatusFlushed {
						t.Errorf("%s: outstanding receive completed %s, want flushed", x.end.name, describe1(wc))
					}
					if wc.Conn != x.end.conn {
						t.Errorf("%s: flushed receive %s has the wrong WC.Conn", x.end.name, describe1(wc))
					}
					ids = append(ids, int(wc.ID-x.base))
				}
				sort.Ints(ids)
				for i, id := range ids {
					if id != i {
						t.Fatalf("%s: flushed receive ids %v, want each of 0..%d once (plus %d)", x.end.name, ids, n-1, x.base)
					}
				}
				expectQuiet(t, x.end.rcq, 50*time.Millisecond, x.end.name+" receive CQ after the flush")
				if err := x.end.conn.PostSend(sendWR(1, x.mem.sge(0, 8))); !errors.Is(err, verbs.ErrNotConnected) {
					t.Errorf("%s: PostSend after disconnect: %v, want ErrNotConnected", x.end.name, err)
				}
			}
			// A second Disconnect and a Close after it must not fail loudly.
			_ = first.conn.Disconnect()
		})
	}
}

// testQueueFull: a send chain longer than MaxSendWR is refused whole with
// ErrQueueFull (nothing is sent), a chain of exactly MaxSendWR goes
// through; receives beyond MaxRecvWR are refused and, as a disconnect's
// flush shows, the refused ones were never queued.
func testQueueFull(t *testing.T, c config) {
	const depth = 8
	e := newEnv(t, c)
	p := e.connect(t, func(o *verbs.ConnOptions) { o.MaxSendWR, o.MaxRecvWR = depth, depth }, nil)
	out := e.cli.region(t, 2*depth*64, 0)
	in := e.srv.region(t, 2*depth*64, verbs.AccessLocalWrite)
	for i := range 2 * depth {
		message(out.Bytes()[i*64:(i+1)*64], i)
		postRecv(t, p.srv.conn, recvWR(uint64(i), in.sge(i*64, 64)))
	}
	sends := func(from, n int) *verbs.SendWR {
		wrs := make([]*verbs.SendWR, n)
		for i := range n {
			wrs[i] = sendWR(uint64(from+i), out.sge((from+i)*64, 64))
		}
		return chain(wrs...)
	}
	if err := p.cli.conn.PostSend(sends(0, depth+1)); !errors.Is(err, verbs.ErrQueueFull) {
		t.Fatalf("PostSend of %d WRs with MaxSendWR %d: %v, want ErrQueueFull", depth+1, depth, err)
	}
	expectQuiet(t, p.srv.rcq, 100*time.Millisecond, "receiver after a refused chain")
	post(t, p.cli.conn, sends(depth, depth))
	for i, wc := range e.waitWCs(t, p.cli.scq, depth) {
		mustWC(t, wc, uint64(depth+i), verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
	}
	// The receives complete in order, so the first eight hold the second
	// chain: none of the refused chain arrived.
	for i, wc := range e.waitWCs(t, p.srv.rcq, depth) {
		mustWC(t, wc, uint64(i), verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
	}
	same(t, "the chain that fit", in.Bytes()[:depth*64], out.Bytes()[depth*64:])

	// Receive queue: the client's is empty and takes exactly depth.
	cin := e.cli.region(t, (depth+2)*64, verbs.AccessLocalWrite)
	rchain := &verbs.RecvWR{ID: 100, SGL: []verbs.SGE{cin.sge(0, 64)}}
	last := rchain
	for i := 1; i <= depth; i++ {
		last.Next = recvWR(uint64(100+i), cin.sge(i*64, 64))
		last = last.Next
	}
	if err := p.cli.conn.PostRecv(rchain); !errors.Is(err, verbs.ErrQueueFull) {
		t.Fatalf("PostRecv of %d WRs with MaxRecvWR %d: %v, want ErrQueueFull", depth+1, depth, err)
	}
	for i := range depth {
		postRecv(t, p.cli.conn, recvWR(uint64(i), cin.sge(i*64, 64)))
	}
	if err := p.cli.conn.PostRecv(recvWR(depth, cin.sge(depth*64, 64))); !errors.Is(err, verbs.ErrQueueFull) {
		t.Fatalf("receive %d with MaxRecvWR %d: %v, want ErrQueueFull", depth+1, depth, err)
	}
	if err := p.cli.conn.Disconnect(); err != nil {
		t.Fatal(err)
	}
	for i, wc := range e.waitWCs(t, p.cli.rcq, depth) {
		if wc.ID != uint64(i) || wc.Status != verbs.StatusFlushed {
			t.Fatalf("flushed receive %d: %s, want id %d flushed", i, describe1(wc), i)
		}
	}
	expectQuiet(t, p.cli.rcq, 100*time.Millisecond, "client receive CQ after the flush")
}

// testCQWait: Wait parks (uses next to no CPU) until a completion arrives,
// allocates nothing when it returns at once with a context it waited with
// before, returns the context's error when cancelled, and ErrClosed when
// the CQ is closed under it. Poll of an empty CQ returns 0.
func testCQWait(t *testing.T, c config) {
	e := newEnv(t, c)
	p := e.connect(t, nil, nil)
	var none [4]verbs.WC
	if n := p.srv.rcq.Poll(none[:]); n != 0 {
		t.Fatalf("Poll of an empty CQ returned %d", n)
	}
	if n := p.srv.rcq.Poll(nil); n != 0 {
		t.Fatalf("Poll with no room returned %d", n)
	}

	t.Run("WakesOnCompletion", func(t *testing.T) { cqWaitWakes(t, e, p) })
	t.Run("NoAllocs", func(t *testing.T) { cqWaitAllocs(t, e, p) })
	t.Run("Cancel", func(t *testing.T) { cqWaitCancel(t, e, p) })
	t.Run("Close", func(t *testing.T) { cqWaitClose(t, e) })
}

// cqWaitWakes: a Wait with nothing on the CQ stays parked (using next to
// no CPU) and wakes on a completion.
func cqWaitWakes(t *testing.T, e *env, p *pair) {
	c := e.c
	in := e.srv.region(t, 64, verbs.AccessLocalWrite)
	out := e.cli.region(t, 64, 0)
	postRecv(t, p.srv.conn, recvWR(1, in.sge(0, 64)))
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	woke := make(chan error, 1)
	const idle = 300 * time.Millisecond
	// The Wait runs on a thread of its own, so that its CPU time is that
	// thread's: a parked Wait leaves it asleep.
	clk := make(chan threadClock, 1)
	go func() {
		runtime.LockOSThread()
		clk <- myThreadClock()
		woke <- p.srv.rcq.Wait(ctx)
	}()
	waiter := <-clk
	// A parked Wait costs next to nothing; a spinning one as much CPU as
	// a busy goroutine beside it gets in the same window. Judging the
	// Wait against that share of the same window, not against the wall
	// clock or a share measured before, means load from other processes
	// (which can change from one moment to the next) neither hides a
	// spin nor fakes one. The runtime may still run something on the
	// Wait's thread in a window (a GC assist, a timer), so the Wait
	// fails only if each of 3 windows costs it a quarter of the share.
	var used, share time.Duration
	for range 3 {
		used, share = cpuBeside(waiter, idle, woke, t)
		if used <= share/4+100*time.Microsecond {
			break
		}
	}
	if used > share/4+100*time.Microsecond {
		t.Errorf("the waiting thread used %v of CPU during %v of Wait while a busy goroutine beside it got %v, in each of 3 windows: not parked", used, idle, share)
	}
	post(t, p.cli.conn, sendWR(2, out.sge(0, 64)))
	select {
	case err := <-woke:
		if err != nil {
			t.Fatalf("Wait after a completion: %v", err)
		}
	case <-time.After(c.Timeout):
		t.Fatal("Wait did not wake on a completion")
	}
	mustWC(t, e.waitOne(t, p.srv.rcq), 1, verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
	mustWC(t, e.waitOne(t, p.cli.scq), 2, verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
}

// cqWaitAllocs: with a completion ready, Wait returns at once and
// allocates nothing, its context's watch included, once it has waited
// with that context before: the gateway's engine waits with one context
// for the life of its connection, once per completion batch when calls
// come one at a time, so a provider that allocates per Wait allocates per
// RPC. (testing.AllocsPerRun divides with an integer: a few allocations
// of the providers' own goroutines during the 100 runs do not count.)
func cqWaitAllocs(t *testing.T, e *env, p *pair) {
	in := e.srv.region(t, 64, verbs.AccessLocalWrite)
	out := e.cli.region(t, 64, 0)
	postRecv(t, p.srv.conn, recvWR(3, in.sge(0, 64)))
	ctx, cancel := context.WithTimeout(context.Background(), e.c.Timeout)
	defer cancel()
	post(t, p.cli.conn, sendWR(4, out.sge(0, 64)))
	if err := p.srv.rcq.Wait(ctx); err != nil { // the completion is in
		t.Fatalf("Wait for the Recv: %v", err)
	}
	var werr error
	allocs := testing.AllocsPerRun(100, func() {
		if err := p.srv.rcq.Wait(ctx); err != nil && werr == nil {
			werr = err
		}
	})
	if werr != nil {
		t.Fatalf("Wait with a completion ready: %v", werr)
	}
	if allocs != 0 {
		t.Errorf("Wait with a completion ready: %v allocations per call, want 0", allocs)
	}
	mustWC(t, e.waitOne(t, p.srv.rcq), 3, verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
	mustWC(t, e.waitOne(t, p.cli.scq), 4, verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
}

// cqWaitCancel: Wait returns context.Canceled when its context is.
func cqWaitCancel(t *testing.T, e *env, p *pair) {
	c := e.c
	ctx, cancel := context.WithCancel(context.Background())
	woke := make(chan error, 1)
	go func() { woke <- p.srv.rcq.Wait(ctx) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-woke:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(c.Timeout):
		t.Fatal("Wait did not return after its context was cancelled")
	}
}

// cqWaitClose: Close wakes a Wait with ErrClosed, and Wait on a closed CQ
// returns it at once.
func cqWaitClose(t *testing.T, e *env) {
	c := e.c
	cq, err := e.srv.dev.CreateCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	woke := make(chan error, 1)
	go func() { woke <- cq.Wait(ctx) }()
	time.Sleep(50 * time.Millisecond)
	if err := cq.Close(); err != nil {
		t.Errorf("CQ.Close: %v", err)
	}
	select {
	case err := <-woke:
		if !errors.Is(err, verbs.ErrClosed) {
			t.Fatalf("Wait on a closed CQ: %v, want ErrClosed", err)
		}
	case <-time.After(c.Timeout):
		t.Fatal("Wait did not return after the CQ was closed")
	}
	if err := cq.Wait(ctx); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("Wait after Close: %v, want ErrClosed", err)
	}
}

// cpuBeside waits for d (failing t if woke delivers meanwhile) while a
// goroutine locked to its own thread spins, and returns the CPU time the
// thread of clock c used in that window and what the spinner got.
func cpuBeside(c threadClock, d time.Duration, woke <-chan error, t *testing.T) (used, share time.Duration) {
	spin := make(chan threadClock, 1)
	var stop atomic.Bool
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		spin <- myThreadClock()
		var sink uint64
		for !stop.Load() {
			for i := 0; i < 1000; i++ {
				sink += uint64(i)
			}
		}
		busySink.Store(sink)
	}()
	s := <-spin
	defer stop.Store(true)
	c0, s0 := c.cpu(), s.cpu()
	select {
	case err := <-woke:
		t.Fatalf("Wait returned %v with nothing on the CQ", err)
	case <-time.After(d):
	}
	return c.cpu() - c0, s.cpu() - s0
}

var busySink atomic.Uint64

// threadClock is the CPU-time clock of one thread of this process (Linux:
// the clock id pthread_getcpuclockid gives, which any thread can read).
type threadClock int32

// myThreadClock is the clock of the calling goroutine's thread; the
// goroutine must be locked to it.
func myThreadClock() threadClock { return threadClock((^syscall.Gettid())<<3 | 6) }

func (c threadClock) cpu() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(int32(c), &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
