package autoprocs

import (
	"runtime/metrics"
	"syscall"
	"time"
)

// schedLatencies is the runtime's histogram of how long goroutines
// waited, runnable, for a P to run them (sampled by the runtime).
const schedLatencies = "/sched/latencies:seconds"

// sampler measures intervals: the process's CPU time (getrusage) and the
// scheduling latencies the runtime sampled, each against the previous
// reading. One goroutine uses it.
type sampler struct {
	at     time.Time
	cpu    time.Duration
	m      [1]metrics.Sample
	counts []uint64 // the histogram's counts at the previous reading
}

// start takes the first reading, which the first interval is measured
// against.
func (sm *sampler) start() {
	sm.m[0].Name = schedLatencies
	sm.next(0)
}

// next measures the interval since the last reading.
func (sm *sampler) next(wait time.Duration) Sample {
	now, cpu := time.Now(), processCPU()
	var s Sample
	if wall := now.Sub(sm.at); wall > 0 {
		s.CPU = float64(cpu-sm.cpu) / float64(wall)
	}
	sm.at, sm.cpu = now, cpu
	metrics.Read(sm.m[:])
	if sm.m[0].Value.Kind() != metrics.KindFloat64Histogram {
		return s
	}
	h := sm.m[0].Value.Float64Histogram()
	s.Waiting = waitingFraction(h, sm.counts, wait.Seconds())
	sm.counts = append(sm.counts[:0], h.Counts...)
	return s
}

// waitingFraction is the fraction of the samples h gained over prev
// (counts of the same buckets; shorter or empty at the first reading)
// that lie in buckets starting at wait seconds or later.
func waitingFraction(h *metrics.Float64Histogram, prev []uint64, wait float64) float64 {
	var all, long uint64
	for i, n := range h.Counts {
		if i < len(prev) {
			n -= prev[i]
		}
		all += n
		if h.Buckets[i] >= wait {
			long += n
		}
	}
	if all == 0 {
		return 0
	}
	return float64(long) / float64(all)
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
