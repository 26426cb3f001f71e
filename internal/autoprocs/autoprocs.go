// Package autoprocs sizes the process's GOMAXPROCS to its load
// (runtime.procs: auto): as few Ps as the work needs, up to the CPUs the
// process may use.
//
// Why: every P without work costs the gateway CPU per RPC. When a
// goroutine becomes runnable (a socket readable, a channel sent to) and a
// P is idle, the runtime wakes a thread for it (wakep: a futex) that
// spins looking for work and parks again (futex, nanosleep), and the
// two halves of one RPC's hand-off run on two cores with their caches.
// On the forward gateway in front of nfs-ganesha (rdmagw bench -relay
// haproxy, 2 CPUs, 8 GETATTRs in flight) one P cost 23 µs of CPU per op
// against 29 µs for two, 0.48 context switches per op against 1.05
// (haproxy: 0.57). But one P is one core: a gateway whose load needs
// more, or whose thread shares a busy CPU with other processes (the
// kernel divides CPU time among runnable threads), must have more. A
// fixed runtime.procs makes the operator choose; auto follows the load.
//
// The policy (Policy.Next), evaluated every Config.Interval:
//
//   - Up, doubling (up to Max), when for UpAfter intervals in a row the
//     process used at least UpBusy of its Ps' worth of CPU (utime+stime
//     over wall time, against procs) or goroutines waited for a P:
//     at least UpWaiting of the scheduling latencies the runtime sampled
//     (/sched/latencies:seconds) were WaitLatency or longer. Waiting is
//     the signal of a P whose thread the kernel does not run (CPUs busy
//     with other processes) or of Ps all busy.
//   - Down by one (to 1 at least) when for DownAfter intervals in a row
//     the CPU used would have fitted DownBusy of one P fewer and nothing
//     waited. Down is slower than up: a gateway short of Ps queues RPCs,
//     one with a P too many only spends more per RPC.
//
// With Config.Limit the Max follows the CPUs the process may use
// (CPULimit: affinity and cgroup CPU limit, read every second): the
// runtime would follow a container resized in place itself, but only
// while nothing set GOMAXPROCS, and the Controller does.
//
// The thresholds leave a band (UpBusy of p against DownBusy of p-1)
// where the count stays, so a steady load does not flap between two
// counts. Each change is a stop-the-world of the runtime (tens of
// microseconds), at most one per interval.
//
// Files: autoprocs.go (Policy, Controller), sample.go (what one interval
// measured, from getrusage and runtime/metrics), limit.go (the CPUs the
// process may use, from its affinity mask and cgroup).
package autoprocs

import (
	"context"
	"runtime"
	"time"
)

// Policy decides the P count from one interval's sample at a time. The
// zero value is not usable: see DefaultPolicy.
type Policy struct {
	Max         int     // the most Ps (the CPUs the process may use)
	UpBusy      float64 // CPU used, as a fraction of procs cores, that asks for more Ps
	UpWaiting   float64 // fraction of scheduling latencies >= WaitLatency that asks for more Ps
	UpAfter     int     // intervals in a row that must ask for more
	DownBusy    float64 // CPU used, as a fraction of procs-1 cores, under which one P is dropped
	DownAfter   int     // intervals in a row that must allow one P fewer
	WaitLatency time.Duration

	up, down int // intervals in a row asking for more, allowing fewer
}

// DefaultPolicy is the policy of runtime.procs: auto with max Ps: up when
// the Ps are three-quarters busy or 5% of goroutine wake-ups waited a
// millisecond or more, for 2 intervals; down when the load would keep
// one P fewer at most half busy, for 20 intervals (2 s at the default
// interval).
func DefaultPolicy(max int) Policy {
	return Policy{Max: max, UpBusy: 0.75, UpWaiting: 0.05, UpAfter: 2,
		DownBusy: 0.5, DownAfter: 20, WaitLatency: time.Millisecond}
}

// Sample is what one interval measured.
type Sample struct {
	// CPU is the process's CPU time over the interval's wall time, in
	// cores (1.5: one and a half cores busy on average).
	CPU float64
	// Waiting is the fraction of the goroutine scheduling latencies the
	// runtime sampled in the interval that were Policy.WaitLatency or
	// longer (0 when it sampled none).
	Waiting float64
}

// Why says what a change answered.
type Why uint8

const (
	Busy    Why = iota + 1 // up: the Ps were busy
	Waiting                // up: goroutines waited for a P
	Idle                   // down: one P fewer would do
	Limit                  // the CPUs the process may use changed (Config.Limit)
)

func (w Why) String() string {
	switch w {
	case Busy:
		return "busy"
	case Waiting:
		return "waiting"
	case Idle:
		return "idle"
	case Limit:
		return "limit"
	}
	return "none"
}

// Next returns the P count after an interval that ran with procs Ps and
// measured s, and why it changed (0 when it did not).
func (p *Policy) Next(procs int, s Sample) (int, Why) {
	busy := s.CPU >= p.UpBusy*float64(procs)
	waiting := s.Waiting >= p.UpWaiting
	if (busy || waiting) && procs < p.Max {
		p.down = 0
		if p.up++; p.up < p.UpAfter {
			return procs, 0
		}
		p.up = 0
		why := Busy
		if !busy {
			why = Waiting
		}
		return min(2*procs, p.Max), why
	}
	p.up = 0
	if procs > 1 && !waiting && s.CPU < p.DownBusy*float64(procs-1) {
		if p.down++; p.down < p.DownAfter {
			return procs, 0
		}
		p.down = 0
		return procs - 1, Idle
	}
	p.down = 0
	return procs, 0
}

// Config sets a Controller up.
type Config struct {
	Policy   Policy
	Interval time.Duration // 0: 100 ms
	// OnChange, if set, is called after each change, on the controller's
	// goroutine.
	OnChange func(from, to int, why Why, s Sample)
	// Limit, if set, says how many CPUs the process may use now
	// (CPULimit()); it is asked every LimitEvery intervals (0: 10), and
	// when its answer changes, that becomes the policy's Max (a count
	// above it comes down at once, why Limit). Nil: Max stays.
	Limit      func() int
	LimitEvery int
}

// Controller applies a Policy to the process's GOMAXPROCS.
type Controller struct {
	cfg Config
}

// New returns a controller for cfg. Run starts it.
func New(cfg Config) *Controller {
	if cfg.Interval <= 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	if cfg.Policy.Max < 1 {
		cfg.Policy.Max = 1
	}
	if cfg.LimitEvery <= 0 {
		cfg.LimitEvery = 10
	}
	return &Controller{cfg: cfg}
}

// Run sets GOMAXPROCS every interval until ctx ends, starting from the
// policy's Max (a gateway starts with every CPU: clients reconnecting at
// once after a restart are its busiest moment). When it returns it puts
// back the GOMAXPROCS it found (a draining gateway, or a test process
// that runs more than a gateway, gets every P again). With a Limit, the
// Max follows the CPUs the process may use: the first answer is the
// baseline (Max came from the runtime's own count at start), a later
// different one the new Max.
func (c *Controller) Run(ctx context.Context) {
	pol := c.cfg.Policy
	procs := pol.Max
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	var sm sampler
	sm.start()
	limit := 0
	if c.cfg.Limit != nil {
		limit = c.cfg.Limit()
	}
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := sm.next(pol.WaitLatency)
		next, why := pol.Next(procs, s)
		if c.cfg.Limit != nil && n%c.cfg.LimitEvery == 0 {
			if l := c.cfg.Limit(); l > 0 && l != limit {
				limit, pol.Max = l, l
				if next > l {
					next, why = l, Limit
				}
			}
		}
		if next == procs {
			continue
		}
		runtime.GOMAXPROCS(next)
		if c.cfg.OnChange != nil {
			c.cfg.OnChange(procs, next, why, s)
		}
		procs = next
	}
}
