package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
)

// benchKind is what one benchmark operation does.
type benchKind int

const (
	kindRead benchKind = iota
	kindWrite
	kindGetattr
)

// benchOp is one workload: an operation and its I/O size.
type benchOp struct {
	name string
	kind benchKind
	size int
}

// defaultBenchOps is the workload of issue #4: READ and WRITE of 1 MiB
// and 4 KiB, and GETATTR.
const defaultBenchOps = "read-1m,write-1m,read-4k,write-4k,getattr"

// parseBenchOps reads "read-1m,write-4k,getattr": read-SIZE or write-SIZE
// (a size such as 4k, 64KiB, 1m), or getattr.
func parseBenchOps(s string) ([]benchOp, error) {
	var ops []benchOp
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(strings.ToLower(name))
		if name == "getattr" {
			ops = append(ops, benchOp{name: name, kind: kindGetattr})
			continue
		}
		verb, size, ok := strings.Cut(name, "-")
		var kind benchKind
		switch {
		case ok && verb == "read":
			kind = kindRead
		case ok && verb == "write":
			kind = kindWrite
		default:
			return nil, fmt.Errorf("unknown op %q (want read-SIZE, write-SIZE or getattr)", name)
		}
		n, err := gateway.ParseByteSize(strings.ToUpper(size))
		if err != nil || n <= 0 || n > 1<<20 {
			return nil, fmt.Errorf("op %q: size must be 1 byte to 1MiB", name)
		}
		ops = append(ops, benchOp{name: name, kind: kind, size: int(n)})
	}
	return ops, nil
}

// benchResult is one workload on one path.
type benchResult struct {
	Op         string  `json:"op"`
	Path       string  `json:"path"` // "gateway" (RPC-over-RDMA), "direct" (TCP) or the relay's name (TCP through it)
	Vers       string  `json:"nfs_version"`
	InFlight   int     `json:"in_flight"`
	Round      int     `json:"round"` // 1, 2... with -rounds
	Ops        int64   `json:"ops"`
	Bytes      int64   `json:"bytes"`
	Errors     int64   `json:"errors"`
	Seconds    float64 `json:"seconds"`
	OpsPerSec  float64 `json:"ops_per_sec"`
	MiBPerSec  float64 `json:"mib_per_sec"`
	P50Micros  float64 `json:"p50_us"`
	P99Micros  float64 `json:"p99_us"`
	FirstError string  `json:"first_error,omitempty"`
	// CPUMicrosPerOp is the CPU (utime+stime from /proc/<pid>/stat) that
	// the relay process on the path (CPUProcess: the gateway, haproxy)
	// used during the run, divided by the operations; 0 when that
	// process is not known (an in-process gateway, a direct path).
	CPUProcess     string  `json:"cpu_process,omitempty"`
	CPUMicrosPerOp float64 `json:"cpu_us_per_op,omitempty"`
	// SyscallsPerOp and CtxSwitchesPerOp are that process's system
	// calls (syscr+syscw of /proc/<pid>/io: read- and write-family calls
	// only) and context switches (voluntary and not, over its threads)
	// per operation, measured when CPUMicrosPerOp is.
	SyscallsPerOp    float64 `json:"syscalls_per_op"`
	CtxSwitchesPerOp float64 `json:"ctx_switches_per_op"`
	// ClientCPUMicrosPerOp is the bench process's own CPU per op over
	// the run: its NFS client on this path (over RDMA to a gateway, over
	// TCP to a relay or the server). ServerCPUMicrosPerOp is the backend
	// server's (-backend-pid; 0 when not known). With the relay's they
	// are all the CPU an op costs on this machine: where client, relay
	// and server share the cores, their sum bounds the throughput.
	ClientCPUMicrosPerOp float64 `json:"client_cpu_us_per_op,omitempty"`
	ServerCPUMicrosPerOp float64 `json:"server_cpu_us_per_op,omitempty"`
	// SyscallsByKind (-syscalls perf) is SyscallsPerOp split by call:
	// read, writev, recvfrom, epoll_pwait, futex, nanosleep...
	SyscallsByKind map[string]float64 `json:"syscalls_per_op_by_kind,omitempty"`
	// GatewayCountersPerOp is, on a gateway path whose /metrics the bench
	// reads (a spawned gateway, or -gateway-metrics), how much each of
	// its own counters (rdmagw_..._total, label sets summed) grew over
	// the run, per operation; counters that did not move are left out.
	GatewayCountersPerOp map[string]float64 `json:"gateway_counters_per_op,omitempty"`
}

// benchRun is how long and how wide one workload runs.
type benchRun struct {
	fileSize    int64
	concurrency int
	duration    time.Duration
	progress    io.Writer // nil: no progress lines
}

// runWorkload runs op against t with r.concurrency workers for
// r.duration and measures every operation's latency.
func runWorkload(ctx context.Context, t benchTarget, op benchOp, path, vers string, r benchRun) benchResult {
	res := benchResult{Op: op.name, Path: path, Vers: vers, InFlight: r.concurrency}
	var ops, bytes, errs atomic.Int64
	var errOnce sync.Once
	// Workers stop starting operations at the deadline but let those in
	// flight finish: cancelling an RPC-over-RDMA call whose WRITE data
	// the gateway is still pulling invalidates that memory under the
	// gateway's RDMA Read, which (correctly) costs the connection.
	// Each worker's generator and WRITE data are made before the clock
	// starts: filling megabytes takes a while on a busy (or -race)
	// machine, and counting it could leave no time for a single op.
	rngs, datas := workerInputs(op, r.concurrency)
	deadline := time.Now().Add(r.duration)
	lats := make([][]time.Duration, r.concurrency)
	start := time.Now()
	stopProgress := startBenchProgress(r.progress, path, op.name, start, &ops, &bytes)
	var wg sync.WaitGroup
	for w := range r.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng, data := rngs[w], datas[w]
			slots := max(1, (r.fileSize-int64(op.size))/int64(max(op.size, 1))+1)
			// Every worker runs at least one op: a result always has a sample.
			for first := true; ctx.Err() == nil && (first || time.Now().Before(deadline)); first = false {
				off := uint64(rng.Int64N(slots)) * uint64(op.size)
				t0 := time.Now()
				n, err := doBenchOp(ctx, t, op, off, data)
				if err != nil {
					errs.Add(1)
					errOnce.Do(func() { res.FirstError = err.Error() })
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
				ops.Add(1)
				bytes.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	stopProgress()
	res.Seconds = time.Since(start).Seconds()
	res.Ops, res.Bytes, res.Errors = ops.Load(), bytes.Load(), errs.Load()
	res.rates(lats)
	return res
}

// workerInputs makes each of n workers' random generator and, for
// WRITEs, its data.
func workerInputs(op benchOp, n int) ([]*rand.Rand, [][]byte) {
	seed := uint64(time.Now().UnixNano())
	rngs := make([]*rand.Rand, n)
	datas := make([][]byte, n)
	for w := range rngs {
		rngs[w] = rand.New(rand.NewPCG(uint64(w), seed))
		if op.kind == kindWrite {
			datas[w] = make([]byte, op.size)
			for i := range datas[w] {
				datas[w][i] = byte(rngs[w].Uint32())
			}
		}
	}
	return rngs, datas
}

// rates fills in the rates and the latency percentiles from the counts,
// the time and every operation's latency (lats: one list a worker).
func (res *benchResult) rates(lats [][]time.Duration) {
	res.OpsPerSec = float64(res.Ops) / res.Seconds
	res.MiBPerSec = float64(res.Bytes) / res.Seconds / (1 << 20)
	all := slices.Concat(lats...)
	slices.Sort(all)
	if n := len(all); n > 0 {
		res.P50Micros = float64(all[n/2].Nanoseconds()) / 1e3
		res.P99Micros = float64(all[min(n-1, n*99/100)].Nanoseconds()) / 1e3
	}
}

func doBenchOp(ctx context.Context, t benchTarget, op benchOp, off uint64, data []byte) (int, error) {
	switch op.kind {
	case kindRead:
		return t.read(ctx, off, uint32(op.size))
	case kindWrite:
		return len(data), t.write(ctx, off, data)
	}
	return 0, t.getattr(ctx)
}

// startBenchProgress prints a line a second while a workload runs and
// returns the function that stops it.
func startBenchProgress(w io.Writer, path, op string, start time.Time, ops, bytes *atomic.Int64) func() {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				secs := now.Sub(start).Seconds()
				fmt.Fprintf(w, "  %-7s %-9s %5.1fs %9d ops %9.0f ops/s %9.1f MiB/s\n", path, op, secs,
					ops.Load(), float64(ops.Load())/secs, float64(bytes.Load())/secs/(1<<20))
			}
		}
	}()
	return func() { close(done); <-stopped }
}
