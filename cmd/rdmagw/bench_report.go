package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// benchRatio compares the gateway (or an -anchors relay) with the other
// path (direct, or through the relay) for one workload at one in-flight
// level.
type benchRatio struct {
	Gateway    string  `json:"gateway"` // the gateway's path (several with -gateway-procs 1,2), or an anchor's
	Op         string  `json:"op"`
	InFlight   int     `json:"in_flight"`
	Round      int     `json:"round"`      // the round both results come from (-rounds)
	Versus     string  `json:"versus"`     // the other path's name
	Throughput float64 `json:"throughput"` // gateway ops/s divided by the other path's
	P50        float64 `json:"p50_latency"`
	P99        float64 `json:"p99_latency"`
	// CPUPerOp is the gateway's CPU per op divided by the relay's; 0
	// when either is not measured.
	CPUPerOp float64 `json:"cpu_per_op,omitempty"`
	// AllCPUPerOp is the CPU per op of client, relay and server together
	// (benchResult.ClientCPUMicrosPerOp...) on the gateway's path divided
	// by the same on the other; 0 unless all six are measured.
	AllCPUPerOp float64 `json:"all_cpu_per_op,omitempty"`
}

// allCPU is what an op cost the client, the relay and the server
// together; 0 unless all three are measured.
func (r *benchResult) allCPU() float64 {
	if r.CPUMicrosPerOp <= 0 || r.ClientCPUMicrosPerOp <= 0 || r.ServerCPUMicrosPerOp <= 0 {
		return 0
	}
	return r.ClientCPUMicrosPerOp + r.CPUMicrosPerOp + r.ServerCPUMicrosPerOp
}

// isGatewayPath tells the gateway's paths ("gateway", "gateway-p1"...)
// from the direct or relayed one.
func isGatewayPath(path string) bool { return strings.HasPrefix(path, "gateway") }

func benchRatios(results []benchResult) []benchRatio {
	var out []benchRatio
	for _, g := range results {
		if !isGatewayPath(g.Path) && !isAnchorPath(g.Path) {
			continue
		}
		for _, d := range results {
			if d.Op == g.Op && d.InFlight == g.InFlight && d.Round == g.Round && !isGatewayPath(d.Path) && !isAnchorPath(d.Path) && d.OpsPerSec > 0 && d.P50Micros > 0 && d.P99Micros > 0 {
				r := benchRatio{Gateway: g.Path, Op: g.Op, InFlight: g.InFlight, Round: g.Round, Versus: d.Path, Throughput: g.OpsPerSec / d.OpsPerSec,
					P50: g.P50Micros / d.P50Micros, P99: g.P99Micros / d.P99Micros}
				if g.CPUMicrosPerOp > 0 && d.CPUMicrosPerOp > 0 {
					r.CPUPerOp = g.CPUMicrosPerOp / d.CPUMicrosPerOp
				}
				if ga, da := g.allCPU(), d.allCPU(); ga > 0 && da > 0 {
					r.AllCPUPerOp = ga / da
				}
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// benchSpread is one ratio over the rounds of -rounds: the median and
// the lowest and highest round (0 when a round did not measure it).
type benchSpread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// benchRatioRounds is a gateway path's ratios for one workload at one
// in-flight level over all the rounds.
type benchRatioRounds struct {
	Gateway     string      `json:"gateway"`
	Op          string      `json:"op"`
	InFlight    int         `json:"in_flight"`
	Versus      string      `json:"versus"`
	Rounds      int         `json:"rounds"`
	Throughput  benchSpread `json:"throughput"`
	P50         benchSpread `json:"p50_latency"`
	P99         benchSpread `json:"p99_latency"`
	CPUPerOp    benchSpread `json:"cpu_per_op"`
	AllCPUPerOp benchSpread `json:"all_cpu_per_op"`
}

// benchRoundSpreads gathers the per-round ratios of each gateway path,
// workload and in-flight level, in the order they first appear.
func benchRoundSpreads(ratios []benchRatio) []benchRatioRounds {
	type key struct {
		gw, op string
		n      int
	}
	var order []key
	byKey := map[key][]benchRatio{}
	for _, r := range ratios {
		k := key{r.Gateway, r.Op, r.InFlight}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	out := make([]benchRatioRounds, 0, len(order))
	for _, k := range order {
		rs := byKey[k]
		pick := func(f func(*benchRatio) float64) benchSpread {
			var v []float64
			for i := range rs {
				if x := f(&rs[i]); x > 0 {
					v = append(v, x)
				}
			}
			return spreadOf(v)
		}
		out = append(out, benchRatioRounds{Gateway: k.gw, Op: k.op, InFlight: k.n, Versus: rs[0].Versus, Rounds: len(rs),
			Throughput:  pick(func(r *benchRatio) float64 { return r.Throughput }),
			P50:         pick(func(r *benchRatio) float64 { return r.P50 }),
			P99:         pick(func(r *benchRatio) float64 { return r.P99 }),
			CPUPerOp:    pick(func(r *benchRatio) float64 { return r.CPUPerOp }),
			AllCPUPerOp: pick(func(r *benchRatio) float64 { return r.AllCPUPerOp })})
	}
	return out
}

// spreadOf is the median (of the middle two for an even count), lowest
// and highest of v; all 0 for none.
func spreadOf(v []float64) benchSpread {
	if len(v) == 0 {
		return benchSpread{}
	}
	slices.Sort(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return benchSpread{Median: m, Min: v[0], Max: v[len(v)-1]}
}

// spreadCell is a spread as "median (min-max)", or "-" when not measured.
func spreadCell(s benchSpread) string {
	if s.Median <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx (%.2f-%.2f)", s.Median, s.Min, s.Max)
}

// cpuCell is a CPU-per-op figure, or "-" when not measured.
func cpuCell(v float64, format string) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

// printRelayProcs says how each relay process was measured, and which
// it is.
func printRelayProcs(w io.Writer, info *benchInfo) {
	fmt.Fprintln(w, "\nPer op, of each relay process over the run, divided by its ops:")
	fmt.Fprintln(w, "  CPU: utime+stime (/proc/<pid>/stat)")
	if info.Syscalls == "perf" {
		fmt.Fprintln(w, "  syscalls: every system call of its threads (perf stat -e "+perfSyscallEvent+")")
	} else {
		fmt.Fprintln(w, "  syscalls: syscr+syscw (/proc/<pid>/io), read- and write-family calls only (read, readv, write, writev...;")
		fmt.Fprintln(w, "    not recvfrom, sendto, recvmsg, sendmsg, splice, epoll_wait, futex; -syscalls perf counts them all)")
	}
	fmt.Fprintln(w, "  ctx sw: voluntary + nonvoluntary context switches of its threads (/proc/<pid>/task/*/status)")
	fmt.Fprintln(w, "  client, server: the CPU of this bench process (the NFS client of the path) and of the -backend-pid server;")
	fmt.Fprintln(w, "    all CPU per op: client + relay + server, gateway path / other path (what bounds throughput on shared cores)")
	for _, g := range info.Gateways {
		ct := ""
		if g.CutThrough != "" {
			ct = ", rdma.cut_through " + g.CutThrough
		}
		if g.Bin != "" {
			ct += ", program " + g.Bin
		}
		procs := g.ProcsSetting
		if procs == "" {
			procs = "default"
		}
		fmt.Fprintf(w, "  %s: rdmagw, pid %d (its own process), runtime.procs %s%s\n", g.Path, g.PID, procs, ct)
	}
	if info.Gateways == nil && info.GatewayPID != 0 {
		fmt.Fprintf(w, "  gateway: rdmagw, pid %d (its own process)\n", info.GatewayPID)
	}
	if info.RelayPID != 0 {
		fmt.Fprintf(w, "  %s: pid %d\n", info.Relay, info.RelayPID)
	}
	for _, a := range info.Anchors {
		fmt.Fprintf(w, "  %s: rdmagw tcprelay -mode %s, pid %d, GOMAXPROCS %d (diagnostic anchor)\n", a.Path, a.Mode, a.PID, a.Procs)
	}
}

func printBenchTable(w io.Writer, info *benchInfo, results []benchResult) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// With -rounds the results and the ratios get a round column.
	rounds := info.Rounds > 1
	roundCol := func(n int) string {
		if !rounds {
			return ""
		}
		return fmt.Sprintf("%d\t", n)
	}
	roundHead := ""
	if rounds {
		roundHead = "round\t"
	}
	const ratioHead = "path\top\tin flight\t"
	const ratioCols = "throughput\tp50 latency\tp99 latency\tCPU per op\tall CPU per op\t"
	fmt.Fprintln(tw, "op\tin flight\t"+roundHead+"path\tops\tops/s\tMiB/s\tp50 µs\tp99 µs\terrors\tCPU µs/op\tsyscalls/op\tctx sw/op\tclient µs/op\tserver µs/op\t")
	for _, r := range results {
		sys, cs := "-", "-"
		if r.CPUMicrosPerOp > 0 {
			sys, cs = fmt.Sprintf("%.2f", r.SyscallsPerOp), fmt.Sprintf("%.2f", r.CtxSwitchesPerOp)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s%s\t%d\t%.0f\t%.1f\t%.0f\t%.0f\t%d\t%s\t%s\t%s\t%s\t%s\t\n", r.Op, r.InFlight, roundCol(r.Round), r.Path, r.Ops, r.OpsPerSec,
			r.MiBPerSec, r.P50Micros, r.P99Micros, r.Errors, cpuCell(r.CPUMicrosPerOp, "%.1f"), sys, cs,
			cpuCell(r.ClientCPUMicrosPerOp, "%.1f"), cpuCell(r.ServerCPUMicrosPerOp, "%.1f"))
	}
	tw.Flush()
	if ratios := benchRatios(results); len(ratios) > 0 {
		fmt.Fprintf(w, "\ngateway / %s (throughput > 1: the gateway is faster; latency and CPU < 1: the gateway is quicker, cheaper):\n", ratios[0].Versus)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, ratioHead+roundHead+ratioCols)
		for _, r := range ratios {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s%.2fx\t%.2fx\t%.2fx\t%s\t%s\t\n", r.Gateway, r.Op, r.InFlight, roundCol(r.Round), r.Throughput, r.P50, r.P99,
				cpuCell(r.CPUPerOp, "%.2fx"), cpuCell(r.AllCPUPerOp, "%.2fx"))
		}
		tw.Flush()
		if rounds {
			fmt.Fprintf(w, "\nmedian of the %d rounds (lowest-highest round):\n", info.Rounds)
			tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, ratioHead+ratioCols)
			for _, r := range benchRoundSpreads(ratios) {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", r.Gateway, r.Op, r.InFlight, spreadCell(r.Throughput), spreadCell(r.P50),
					spreadCell(r.P99), spreadCell(r.CPUPerOp), spreadCell(r.AllCPUPerOp))
			}
			tw.Flush()
		}
	}
	if info.GatewayPID != 0 || info.RelayPID != 0 || info.Anchors != nil {
		printRelayProcs(w, info)
	}
	printSyscallKinds(w, results)
	printGatewayCounters(w, results)
	if len(info.Burners) > 0 {
		fmt.Fprintf(w, "%d CPU burner processes ran beside it\n", len(info.Burners))
	}
	for _, r := range results {
		if r.FirstError != "" {
			fmt.Fprintf(w, "\n%s at %d in flight over %s stopped on an error: %s\n", r.Op, r.InFlight, r.Path, r.FirstError)
		}
	}
	if info.CPUProfile != "" {
		fmt.Fprintf(w, "\ngateway CPU profile (%s): go tool pprof -top %s\n", info.CPUProfile, info.CPUProfile[strings.IndexByte(info.CPUProfile, ' ')+1:])
	}
	if info.Trace != "" {
		fmt.Fprintf(w, "\ngateway runtime trace (%s): go tool trace %s\n", info.Trace, info.Trace[strings.IndexByte(info.Trace, ' ')+1:])
	}
	if info.MetricsURL != "" {
		fmt.Fprintf(w, "\nmetrics: %s\n", info.MetricsURL)
	}
}

// benchDoc is `rdmagw bench -json`'s document.
func benchDoc(info *benchInfo, results []benchResult) any {
	ratios := benchRatios(results)
	return struct {
		Run     *benchInfo         `json:"run"`
		Results []benchResult      `json:"results"`
		Ratios  []benchRatio       `json:"ratios"`
		Medians []benchRatioRounds `json:"ratio_medians"`
	}{info, results, ratios, benchRoundSpreads(ratios)}
}

// benchReport is what a bench command measured, ready to print.
type benchReport struct {
	json      bool            // print doc as JSON rather than the table
	doc       any             // the JSON document
	table     func(io.Writer) // prints the table
	hadErrors bool            // a result counted errors: the command fails
}

// benchCommand is the frame of `rdmagw bench` and `rdmagw bench-conns`:
// it parses the flags (exit 2 on a bad one, 0 on -h), runs the bench
// (exit 1 if it failed), prints the report, as JSON on stdout or as a
// table, and exits 1 if printing failed or a result had errors.
func benchCommand[O any](cmd string, args []string, stdout, stderr io.Writer,
	parse func([]string, io.Writer) (O, error), run func(O) (benchReport, error)) int {
	o, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "rdmagw %s: %v\n", cmd, err)
		return 2
	}
	rep, err := run(o)
	if err != nil {
		fmt.Fprintf(stderr, "rdmagw %s: FAILED: %v\n", cmd, err)
		return 1
	}
	if rep.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep.doc)
	} else {
		rep.table(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rdmagw %s: %v\n", cmd, err)
		return 1
	}
	if rep.hadErrors {
		return 1
	}
	return 0
}

// printGatewayCounters prints each gateway run's counters that moved,
// per op, by name (rdmagw_ and _total left off).
func printGatewayCounters(w io.Writer, results []benchResult) {
	header := false
	for _, r := range results {
		if len(r.GatewayCountersPerOp) == 0 {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\ngateway counters per op (its /metrics before and after the run; those that moved, label sets summed):")
			header = true
		}
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(r.GatewayCountersPerOp)) {
			name := strings.TrimSuffix(strings.TrimPrefix(k, "rdmagw_"), "_total")
			fmt.Fprintf(&b, " %s %.4g", name, r.GatewayCountersPerOp[k])
		}
		round := ""
		if r.Round > 1 {
			round = fmt.Sprintf(" (round %d)", r.Round)
		}
		fmt.Fprintf(w, "  %s@%d %s%s:%s\n", r.Op, r.InFlight, r.Path, round, b.String())
	}
}

// printSyscallKinds prints, for -syscalls perf, each relay process's
// system calls per op by kind, the most frequent first; "other" is the
// calls of no kind counted.
func printSyscallKinds(w io.Writer, results []benchResult) {
	header := false
	for _, r := range results {
		if r.SyscallsByKind == nil {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nsystem calls per op by kind (perf stat):")
			header = true
		}
		kinds := slices.SortedFunc(maps.Keys(r.SyscallsByKind), func(a, b string) int {
			return cmp.Compare(r.SyscallsByKind[b], r.SyscallsByKind[a])
		})
		var b strings.Builder
		other := r.SyscallsPerOp
		for _, k := range kinds {
			if v := r.SyscallsByKind[k]; v >= 0.005 {
				fmt.Fprintf(&b, " %s %.2f", k, v)
				other -= v
			}
		}
		round := ""
		if r.Round > 1 {
			round = fmt.Sprintf(" (round %d)", r.Round)
		}
		fmt.Fprintf(w, "  %s@%d %s%s: %.2f =%s other %.2f\n", r.Op, r.InFlight, r.Path, round, r.SyscallsPerOp, b.String(), max(other, 0))
	}
}
