package autoprocs

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// step is one interval of a policy script: the sample and the count the
// policy must answer with.
type step struct {
	s    Sample
	want int
	why  Why
}

func TestPolicy(t *testing.T) {
	idle := Sample{CPU: 0.1}
	for _, tc := range []struct {
		name  string
		max   int
		start int
		steps []step
	}{
		{"busy doubles after two intervals, up to max", 8, 1, []step{
			{Sample{CPU: 0.8}, 1, 0},
			{Sample{CPU: 0.9}, 2, Busy},
			{Sample{CPU: 1.6}, 2, 0},
			{Sample{CPU: 1.9}, 4, Busy},
			{Sample{CPU: 3.5}, 4, 0},
			{Sample{CPU: 3.9}, 8, Busy},
			{Sample{CPU: 7.9}, 8, 0},
			{Sample{CPU: 8}, 8, 0}, // at max
		}},
		{"max not a power of two", 3, 2, []step{
			{Sample{CPU: 1.8}, 2, 0},
			{Sample{CPU: 1.8}, 3, Busy},
		}},
		{"one busy interval is not enough", 2, 1, []step{
			{Sample{CPU: 0.9}, 1, 0},
			{Sample{CPU: 0.3}, 1, 0},
			{Sample{CPU: 0.9}, 1, 0},
			{Sample{CPU: 0.3}, 1, 0},
		}},
		{"waiting goroutines ask for more at low CPU", 4, 1, []step{
			{Sample{CPU: 0.4, Waiting: 0.2}, 1, 0},
			{Sample{CPU: 0.4, Waiting: 0.1}, 2, Waiting},
		}},
		{"down by one after the idle run, not below 1", 4, 4, []step{
			{idle, 4, 0}, {idle, 4, 0}, {idle, 3, Idle},
			{idle, 3, 0}, {idle, 3, 0}, {idle, 2, Idle},
			{idle, 2, 0}, {idle, 2, 0}, {idle, 1, Idle},
			{idle, 1, 0}, {idle, 1, 0}, {idle, 1, 0}, {idle, 1, 0},
		}},
		{"a busier interval restarts the idle run", 2, 2, []step{
			{idle, 2, 0}, {idle, 2, 0},
			{Sample{CPU: 0.6}, 2, 0}, // would not fit half of one P
			{idle, 2, 0}, {idle, 2, 0}, {idle, 1, Idle},
		}},
		{"waiting holds the count up", 2, 2, []step{
			{idle, 2, 0}, {idle, 2, 0},
			{Sample{CPU: 0.1, Waiting: 0.5}, 2, 0},
			{idle, 2, 0}, {idle, 2, 0}, {idle, 1, Idle},
		}},
		{"a load between the thresholds stays where it is", 2, 2, []step{
			// 0.6 cores: more than half of one P (stay at 2), less
			// than three-quarters of one (stay at 1).
			{Sample{CPU: 0.6}, 2, 0}, {Sample{CPU: 0.6}, 2, 0}, {Sample{CPU: 0.6}, 2, 0}, {Sample{CPU: 0.6}, 2, 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy(tc.max)
			p.DownAfter = 3
			procs := tc.start
			for i, st := range tc.steps {
				next, why := p.Next(procs, st.s)
				if next != st.want || why != st.why {
					t.Fatalf("step %d: %d Ps, %+v: got %d (%v), want %d (%v)", i, procs, st.s, next, why, st.want, st.why)
				}
				procs = next
			}
		})
	}
}

func TestWaitingFraction(t *testing.T) {
	h := &metrics.Float64Histogram{
		Buckets: []float64{0, 1e-4, 1e-3, 1e-2, 1},
		Counts:  []uint64{10, 20, 30, 40},
	}
	// Since prev: 5, 5, 6, 4 more: 10 at 1 ms or longer of 20.
	prev := []uint64{5, 15, 24, 36}
	if got := waitingFraction(h, prev, 1e-3); got != 0.5 {
		t.Fatalf("got %v, want 0.5", got)
	}
	if got := waitingFraction(h, nil, 1e-3); got != 0.7 {
		t.Fatalf("first reading: got %v, want 0.7", got)
	}
	if got := waitingFraction(h, h.Counts, 1e-3); got != 0 {
		t.Fatalf("no new samples: got %v, want 0", got)
	}
}

// TestControllerFollowsLoad runs the controller on this process: it
// drops to one P while the test idles, goes up when two goroutines burn
// CPU, and comes back down when they stop.
func TestControllerFollowsLoad(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(before)
	pol := DefaultPolicy(2)
	pol.DownAfter = 5
	var mu sync.Mutex
	var changes []Why
	procs := make(chan int, 64)
	c := New(Config{Policy: pol, Interval: 20 * time.Millisecond, OnChange: func(from, to int, why Why, s Sample) {
		mu.Lock()
		changes = append(changes, why)
		mu.Unlock()
		procs <- to
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	runtime.GOMAXPROCS(3) // what Run finds; it starts at the policy's 2
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	waitFor := procsWaiter(t, procs)
	waitFor(1, "idle")

	stop := spin(2)
	waitFor(2, "busy")
	stop()
	waitFor(1, "idle again")

	cancel()
	<-done
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("after Run GOMAXPROCS is %d, want the 3 it found", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(changes) != 3 || changes[0] != Idle || changes[2] != Idle || (changes[1] != Busy && changes[1] != Waiting) {
		t.Fatalf("changes %v, want idle, busy (or waiting), idle", changes)
	}
}

// procsWaiter returns a wait for the Controller's OnChange (which sends
// the new count on procs) to report want Ps, GOMAXPROCS then being want.
func procsWaiter(t *testing.T, procs <-chan int) func(want int, what string) {
	return func(want int, what string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case n := <-procs:
				if n == want {
					if got := runtime.GOMAXPROCS(0); got != want {
						t.Fatalf("%s: OnChange said %d Ps, GOMAXPROCS is %d", what, want, got)
					}
					return
				}
			case <-deadline:
				t.Fatalf("%s: no change to %d Ps in 10 s (GOMAXPROCS %d)", what, want, runtime.GOMAXPROCS(0))
			}
		}
	}
}

// spin keeps n goroutines computing until the stop it returns is called
// (which waits for them).
func spin(n int) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := 0
			for !done.Load() {
				for i := range 1000 {
					x += i
				}
			}
			_ = x
		}()
	}
	return func() { done.Store(true); wg.Wait() }
}
