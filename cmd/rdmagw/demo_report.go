package main

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/rdmagw/rdmagw/internal/gwstats"
)

// mib formats a byte count in MiB.
func mib(n float64) string { return fmt.Sprintf("%.1f MiB", n/(1<<20)) }

// progress prints "phase: done / total (rate)" lines at most every
// interval, and once at the end, so a long run shows it is alive without
// flooding a log.
type progress struct {
	w        io.Writer
	phase    string
	total    int64
	done     atomic.Int64
	start    time.Time
	interval time.Duration

	mu   sync.Mutex
	last time.Time
}

func newProgress(w io.Writer, phase string, total int64) *progress {
	now := time.Now()
	return &progress{w: w, phase: phase, total: total, start: now, last: now, interval: 500 * time.Millisecond}
}

// add records n more bytes done; safe from any goroutine.
func (p *progress) add(n int) {
	d := p.done.Add(int64(n))
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); now.Sub(p.last) >= p.interval && d < p.total {
		p.last = now
		p.print(d, now)
	}
}

func (p *progress) finish() time.Duration {
	now := time.Now()
	p.mu.Lock()
	p.print(p.done.Load(), now)
	p.mu.Unlock()
	return now.Sub(p.start)
}

func (p *progress) print(d int64, now time.Time) {
	secs := now.Sub(p.start).Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(d) / secs / (1 << 20)
	}
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(d) / float64(p.total)
	}
	fmt.Fprintf(p.w, "  %-6s %10s / %-10s %5.1f%%  %8.1f MiB/s\n", p.phase, mib(float64(d)), mib(float64(p.total)), pct, rate)
}

// phaseResult is one line of the demo's summary.
type phaseResult struct {
	name    string
	bytes   int64
	elapsed time.Duration
	calls   float64 // RPCs the gateway saw during the phase
}

// printDemoSummary writes the throughput table and the bytes by path.
func printDemoSummary(w io.Writer, phases []phaseResult, snap gwstats.Snapshot, metricsURL string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tbytes\tseconds\tMiB/s\tRPCs\tops/s\t")
	for _, p := range phases {
		secs := p.elapsed.Seconds()
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.1f\t%.0f\t%.0f\t\n", p.name, mib(float64(p.bytes)), secs,
			float64(p.bytes)/(1<<20)/secs, p.calls, p.calls/secs)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "bytes by path on the RDMA side (rdmagw_bytes_total):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\tdirection\tbytes\t\t")
	for _, p := range snap.Paths {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t\n", p.Path, p.Direction, p.Bytes, mib(p.Bytes))
	}
	tw.Flush()
	if metricsURL != "" {
		fmt.Fprintf(w, "\nmetrics: %s\n", metricsURL)
	}
}
