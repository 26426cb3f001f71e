package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/verbs/iwarp"
)

func init() {
	register("bench", "NFSv3/NFSv4.1 READ, WRITE, GETATTR through a gateway over RDMA vs. directly over TCP", bench)
}

// benchOptions are the bench's flags.
type benchOptions struct {
	gateway     string
	backend     string
	mountPort   int
	export      string
	vers        string
	ops         []benchOp
	size        int64
	concurrency []int // in-flight levels, each run for every workload
	duration    time.Duration
	json        bool
	embedded    bool
	direct      bool
	metrics     string

	relay          string          // "haproxy": the direct path goes through a TCP relay started here
	spawnGateway   bool            // run the gateway as its own process (rdmagw serve)
	gatewayProcs   []gateway.Procs // with spawnGateway: one gateway per runtime.procs value (nil: one, its default)
	gatewayPID     int             // the gateway's process, for CPU per op
	backendPID     int             // the backend server's process, for its CPU per op
	gatewayMetrics string          // the gateway's metrics.listen, for -cpuprofile
	burn           int             // CPU burner processes beside the run
	crc            bool            // MPA CRCs asked for on the RDMA side (client, spawned gateways)
	clientCompl    string          // -client-completion: the bench client's Send completion (rdma.send_completion's values)
	gatewayCompl   string          // -send-completion: the spawned gateways' rdma.send_completion ("": their default)
	gatewayCuts    []string        // -cut-through: one spawned gateway per rdma.cut_through value (nil: one, its default)
	gatewayBins    []string        // -gateway-bin: one spawned gateway per program (nil: one, this program)
	syscalls       string          // how system calls are counted: "io" (/proc/<pid>/io) or "perf" (all of them)
	cpuprofile     string          // where the gateway's CPU profile goes
	trace          string          // where the gateway's runtime trace goes
	profileOp      string          // the workload profiled
	profileDepth   int             // at this many in flight
	anchors        []benchAnchor   // -anchors: Go TCP relays measured beside haproxy
	rounds         int             // -rounds: each workload this many times on every path, alternated
	inline         int             // -inline: the RDMA side's inline threshold (0: defaults)
}

// benchFlagText holds the flags that parseBenchFlags converts after
// parsing.
type benchFlagText struct {
	ops, size, concurrency, procs, cuts, bins, anchors, inline *string
}

func parseBenchFlags(args []string, stderr io.Writer) (*benchOptions, error) {
	o := &benchOptions{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	text := o.flags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rdmagw bench -gateway host:port -backend host:port [flags]")
		fmt.Fprintln(stderr, "       rdmagw bench -spawn-gateway -relay haproxy -backend host:port [flags]")
		fmt.Fprintln(stderr, "       rdmagw bench -embedded [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := o.convert(text); err != nil {
		return nil, err
	}
	if err := o.checkPaths(); err != nil {
		return nil, err
	}
	if err := o.checkExtras(); err != nil {
		return nil, err
	}
	if err := o.checkCompletion(); err != nil {
		return nil, err
	}
	return o, nil
}

// flags defines the bench's flags on fs, into o but for the ones that
// need converting.
func (o *benchOptions) flags(fs *flag.FlagSet) benchFlagText {
	fs.StringVar(&o.gateway, "gateway", "", "RPC-over-RDMA address of a running rdmagw (host:port) in front of -backend")
	fs.StringVar(&o.backend, "backend", "", "the NFS server behind the gateway, over TCP (host:port), benchmarked directly too")
	fs.IntVar(&o.mountPort, "mountport", 0, "the backend's MOUNT port for NFSv3 (default: the -backend port)")
	fs.StringVar(&o.export, "export", "/", "the export (NFSv3 mount path; NFSv4.1 path of the directory)")
	fs.StringVar(&o.vers, "vers", "3", "NFS version: 3 or 4.1")
	var text benchFlagText
	text.ops = fs.String("ops", defaultBenchOps, "workloads: read-SIZE, write-SIZE (SIZE up to 1m), getattr")
	text.inline = fs.String("inline", "", "the RDMA side's inline threshold, both ways: the bench client's (RFC 8797: capped by what the gateway announces) and, with -spawn-gateway, the gateways' rdma.inline_recv and inline_send (empty: their defaults, 4KiB); 8KiB lets a 4 KiB READ or WRITE go inline, as on Linux clients with sunrpc.rdma_max_inline_read/write raised")
	text.size = fs.String("size", "64MiB", "size of the benchmark file (reads and writes land at random aligned offsets in it)")
	text.concurrency = fs.String("concurrency", "8", "operations in flight per workload; a list (1,8) runs every workload at each")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long each workload runs on each path")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON on stdout (progress goes to stderr)")
	fs.BoolVar(&o.embedded, "embedded", false, "start the in-memory NFSv3 server and a gateway in-process (ignores -gateway/-backend)")
	fs.BoolVar(&o.direct, "direct", true, "also run every workload directly over TCP (or through -relay) and print the ratio")
	fs.StringVar(&o.metrics, "metrics", "", "with -embedded: where the gateway serves /metrics")
	fs.StringVar(&o.relay, "relay", "", "haproxy: the direct path goes through haproxy in TCP mode, started here in front of -backend")
	fs.BoolVar(&o.spawnGateway, "spawn-gateway", false, "start the gateway as its own process (rdmagw serve, pure-Go provider, loopback) in front of -backend")
	text.procs = fs.String("gateway-procs", "", "with -spawn-gateway: the gateway's runtime.procs (GOMAXPROCS: auto follows the load, 0 is Go's default); a list (1,2,auto) starts one gateway for each and runs every workload through each in turn")
	fs.IntVar(&o.gatewayPID, "gateway-pid", 0, "the process of the -gateway, to report its CPU per op")
	fs.IntVar(&o.backendPID, "backend-pid", 0, "the process of the -backend server, to report its CPU per op on every path (with the bench client's own: what all three cost per op, which bounds throughput when they share the cores)")
	fs.StringVar(&o.gatewayMetrics, "gateway-metrics", "", "the -gateway's metrics.listen (host:port, with metrics.pprof on), for -cpuprofile")
	fs.StringVar(&o.syscalls, "syscalls", "io", "how the relay processes' system calls per op are counted: io (syscr+syscw of /proc/<pid>/io: read/write family only) or perf (every call, perf stat -e "+perfSyscallEvent+"; needs perf and root)")
	fs.BoolVar(&o.crc, "crc", true, "ask for MPA CRCs on the pure-Go RDMA connections; false: the bench client asks for none and -spawn-gateway starts the gateways with rdma.mpa_crc: false, so the connections carry none (a -gateway of yours must have it off too)")
	clientCompletionFlag(fs, &o.clientCompl)
	fs.StringVar(&o.gatewayCompl, "send-completion", "", "with -spawn-gateway: the gateways' rdma.send_completion (transmit or placement; empty: the gateway's default)")
	text.cuts = fs.String("cut-through", "", "with -spawn-gateway: the gateways' rdma.cut_through (a size such as 128KiB; 0: off; empty: the gateway's default); a list (0,128KiB) starts one gateway for each (with -gateway-procs, one for each pair) and runs every workload through each in turn")
	text.bins = fs.String("gateway-bin", "", "with -spawn-gateway: the rdmagw programs run as the gateway (default: this one); a list (rdmagw-old,rdmagw-new) starts one gateway of each (with -gateway-procs and -cut-through, one for each combination), named after its file, and runs every workload through each in turn: two builds compared in one run, against the same relay")
	text.anchors = fs.String("anchors", "", "diagnostic: minimal Go TCP relays (rdmagw tcprelay) in front of -backend, each its own path measured like -relay's: MODE:PROCS[:WORKERS],... with MODE netpoll (a goroutine per direction on Go's netpoller) or epoll (run to completion on locked threads, haproxy's design), PROCS its GOMAXPROCS, WORKERS (epoll) its threads if fewer than PROCS")
	fs.IntVar(&o.rounds, "rounds", 1, "run every workload this many times on every path, alternating the paths (ABBA: in even rounds the other path goes first), and report each round's ratios and their median (min-max): the spread says how much of a difference is noise")
	fs.IntVar(&o.burn, "burn", 0, "start this many CPU-burning processes beside the run (cores kept busy)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write the gateway's CPU profile during one workload to this file (-spawn-gateway or -gateway-metrics)")
	fs.StringVar(&o.trace, "trace", "", "write the gateway's runtime trace (go tool trace: goroutine wake-ups, system calls, scheduling latency) during the workload -cpuprofile would cover to this file (-spawn-gateway or -gateway-metrics)")
	fs.StringVar(&o.profileOp, "profile-op", "", "the workload -cpuprofile and -trace cover (default: the first)")
	fs.IntVar(&o.profileDepth, "profile-concurrency", 0, "the in-flight level -cpuprofile and -trace cover (default: the highest)")
	return text
}

// convert reads the flags that are lists or sizes, and fills in the
// profile defaults that depend on them.
func (o *benchOptions) convert(text benchFlagText) error {
	var err error
	if o.ops, err = parseBenchOps(*text.ops); err != nil {
		return fmt.Errorf("-ops: %w", err)
	}
	if o.concurrency, err = parseConcurrency(*text.concurrency); err != nil {
		return fmt.Errorf("-concurrency: %w", err)
	}
	if o.gatewayProcs, err = parseProcsList(*text.procs); err != nil {
		return fmt.Errorf("-gateway-procs: %w", err)
	}
	if o.gatewayCuts, err = parseCutList(*text.cuts); err != nil {
		return fmt.Errorf("-cut-through: %w", err)
	}
	if o.gatewayBins, err = parseBinList(*text.bins); err != nil {
		return fmt.Errorf("-gateway-bin: %w", err)
	}
	if o.anchors, err = parseAnchors(*text.anchors); err != nil {
		return fmt.Errorf("-anchors: %w", err)
	}
	s, err := gateway.ParseByteSize(*text.size)
	if err != nil || s < 1<<20 {
		return fmt.Errorf("-size %q: want at least 1MiB", *text.size)
	}
	o.size = int64(s)
	if *text.inline != "" {
		v, err := gateway.ParseByteSize(*text.inline)
		if err != nil || !rdmarpc.InlineSizeExact(int(v)) || v > 64<<10 {
			return fmt.Errorf("-inline %q: want 1KiB to 64KiB, a multiple of 1KiB", *text.inline)
		}
		o.inline = int(v)
	}
	if o.profileOp == "" {
		o.profileOp = o.ops[0].name
	}
	if o.profileDepth == 0 {
		o.profileDepth = slices.Max(o.concurrency)
	}
	return nil
}

// checkPaths checks the flags that say what is measured: the version,
// the duration and where the gateway and the backend come from.
func (o *benchOptions) checkPaths() error {
	switch {
	case o.vers != "3" && o.vers != "4.1":
		return fmt.Errorf("-vers %q: want 3 or 4.1", o.vers)
	case o.duration <= 0:
		return errors.New("-duration must be positive")
	case o.embedded && o.vers != "3":
		return errors.New("-embedded serves NFSv3 only (use -vers 3)")
	case o.embedded && (o.spawnGateway || o.relay != ""):
		return errors.New("-embedded runs everything in-process: no -spawn-gateway or -relay")
	case o.embedded && !o.crc:
		return errors.New("-crc=false: with -spawn-gateway or -gateway, not -embedded")
	case o.embedded && o.inline > 0:
		return errors.New("-inline: with -spawn-gateway or -gateway, not -embedded")
	case o.spawnGateway && (o.gateway != "" || o.gatewayPID != 0 || o.gatewayMetrics != ""):
		return errors.New("-spawn-gateway starts the gateway: no -gateway, -gateway-pid or -gateway-metrics")
	case !o.embedded && o.backend == "":
		return errors.New("name the -backend (and a -gateway in front of it, or -spawn-gateway), or use -embedded")
	case !o.embedded && !o.spawnGateway && o.gateway == "":
		return errors.New("name the -gateway in front of the -backend, or use -spawn-gateway")
	}
	return nil
}

// checkExtras checks the relay, the CPU burners and the profile.
func (o *benchOptions) checkExtras() error {
	switch {
	case o.relay != "" && o.relay != "haproxy":
		return fmt.Errorf("-relay %q: the one relay known is haproxy", o.relay)
	case o.anchors != nil && o.embedded:
		return errors.New("-anchors start relays in front of -backend: not with -embedded")
	case o.relay != "" && !o.direct:
		return errors.New("-relay is on the direct path: not with -direct=false")
	case o.syscalls != "io" && o.syscalls != "perf":
		return fmt.Errorf("-syscalls %q: want io or perf", o.syscalls)
	case o.burn < 0:
		return errors.New("-burn must not be negative")
	case o.rounds < 1:
		return errors.New("-rounds must be at least 1")
	case o.gatewayProcs != nil && !o.spawnGateway:
		return errors.New("-gateway-procs sets the spawned gateway's runtime.procs: with -spawn-gateway only")
	case o.gatewayBins != nil && !o.spawnGateway:
		return errors.New("-gateway-bin is the program of the spawned gateways: with -spawn-gateway only")
	case o.cpuprofile != "" && !o.spawnGateway && o.gatewayMetrics == "":
		return errors.New("-cpuprofile needs the gateway's profiler: -spawn-gateway or -gateway-metrics")
	case o.trace != "" && !o.spawnGateway && o.gatewayMetrics == "":
		return errors.New("-trace needs the gateway's profiler: -spawn-gateway or -gateway-metrics")
	case !slices.ContainsFunc(o.ops, func(op benchOp) bool { return op.name == o.profileOp }):
		return fmt.Errorf("-profile-op %q is not one of -ops", o.profileOp)
	case !slices.Contains(o.concurrency, o.profileDepth):
		return fmt.Errorf("-profile-concurrency %d is not one of -concurrency", o.profileDepth)
	}
	return nil
}

// parseList splits s at commas and converts each field, spaces trimmed,
// with item; the first error item returns is the list's.
func parseList[T any](s string, item func(string) (T, error)) ([]T, error) {
	var out []T
	for _, f := range strings.Split(s, ",") {
		v, err := item(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// parseConcurrency reads "1,8": in-flight levels, each at least 1.
func parseConcurrency(s string) ([]int, error) {
	return parseList(s, func(f string) (int, error) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%q: want whole numbers of at least 1, separated by commas", s)
		}
		return n, nil
	})
}

// parseProcsList reads "1,2,auto": runtime.procs values, each auto or
// 0 (Go's default) to gateway.MaxRuntimeProcs; "" is none.
func parseProcsList(s string) ([]gateway.Procs, error) {
	if s == "" {
		return nil, nil
	}
	return parseList(s, func(f string) (gateway.Procs, error) {
		n, err := gateway.ParseProcs(f)
		if err != nil {
			return 0, fmt.Errorf("%q: want auto or whole numbers from 0 (Go's default) to %d, separated by commas", s, gateway.MaxRuntimeProcs)
		}
		return n, nil
	})
}

// procsUnset is a gateway whose runtime.procs the bench leaves at the
// gateway's default.
const procsUnset gateway.Procs = -2

// reportProcs is how results report a -gateway-procs value: the number
// (0: Go's default, -1: auto) and the setting as given; 0 and "" when
// none was given (the program's default).
func reportProcs(p gateway.Procs) (int, string) {
	if p == procsUnset {
		return 0, ""
	}
	return int(p), p.String()
}

// parseCutList parses -cut-through: sizes separated by commas.
func parseCutList(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	return parseList(s, func(f string) (string, error) {
		if _, err := gateway.ParseByteSize(f); err != nil {
			return "", fmt.Errorf("%q: want sizes (0 for off) separated by commas: %w", s, err)
		}
		return f, nil
	})
}

// parseBinList parses -gateway-bin: programs separated by commas, each
// an existing file, no two with the same file name (it names the path).
func parseBinList(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	seen := map[string]bool{}
	return parseList(s, func(f string) (string, error) {
		if fi, err := os.Stat(f); err != nil || fi.IsDir() {
			return "", fmt.Errorf("%q: not a program", f)
		}
		name := filepath.Base(f)
		if seen[name] {
			return "", fmt.Errorf("%q: two programs named %s; the file name names the gateway's path, give them different ones", s, name)
		}
		seen[name] = true
		return f, nil
	})
}

// runtimeProcsConfig is the runtime section a spawned gateway gets for
// -gateway-procs.
func runtimeProcsConfig(procs gateway.Procs) string {
	return fmt.Sprintf("runtime:\n  procs: %s\n", procs)
}

func bench(args []string, stdout, stderr io.Writer) int {
	return benchCommand("bench", args, stdout, stderr, parseBenchFlags, func(o *benchOptions) (benchReport, error) {
		results, info, err := runBench(o, stdout, stderr)
		return benchReport{json: o.json, doc: benchDoc(info, results),
			table:     func(w io.Writer) { printBenchTable(w, info, results) },
			hadErrors: slices.ContainsFunc(results, func(r benchResult) bool { return r.Errors > 0 })}, err
	})
}

// benchInfo describes the run for the report.
type benchInfo struct {
	Gateway     string `json:"gateway"`
	Backend     string `json:"backend"`
	Direct      string `json:"direct,omitempty"` // where the direct path connects (a relay, or the backend)
	Vers        string `json:"nfs_version"`
	FileBytes   int64  `json:"file_bytes"`
	Concurrency []int  `json:"concurrency"`
	Duration    string `json:"duration"`
	Embedded    bool   `json:"embedded"`
	MetricsURL  string `json:"metrics_url,omitempty"`
	// The processes whose CPU is measured (0: not measured), and the
	// ones the bench started (all stopped by the time it returns).
	GatewayPID int `json:"gateway_pid,omitempty"`
	// Gateways are the gateway processes started (-spawn-gateway), one
	// per -gateway-procs value; GatewayPID is the first's.
	Gateways   []benchGateway `json:"gateways,omitempty"`
	RelayPID   int            `json:"relay_pid,omitempty"`
	Relay      string         `json:"relay,omitempty"`
	Burners    []int          `json:"burner_pids,omitempty"`
	Syscalls   string         `json:"syscalls_counted"`      // "io": read/write family (/proc/<pid>/io); "perf": every call
	CPUProfile string         `json:"cpu_profile,omitempty"` // "op@in-flight file"
	Trace      string         `json:"trace,omitempty"`       // "op@in-flight file"
	Anchors    []benchAnchor  `json:"anchors,omitempty"`     // -anchors, after the direct path
	Rounds     int            `json:"rounds"`                // -rounds: every workload this many times on every path
}

// benchGateway is a gateway process the bench started, and the path
// through it.
type benchGateway struct {
	Path  string `json:"path"`
	PID   int    `json:"pid"`
	Procs int    `json:"procs"` // its runtime.procs (0: Go's default, -1: auto)
	// ProcsSetting is the -gateway-procs value it was started with ("":
	// none, the program's default).
	ProcsSetting string `json:"procs_setting,omitempty"`
	// CutThrough is its rdma.cut_through as given to -cut-through ("":
	// the default).
	CutThrough string `json:"cut_through,omitempty"`
	// Bin is its program as given to -gateway-bin ("": this one).
	Bin     string `json:"bin,omitempty"`
	Addr    string `json:"address"`
	Metrics string `json:"metrics"`
}

func runBench(o *benchOptions, stdout, stderr io.Writer) (results []benchResult, info *benchInfo, err error) {
	progress := stdout
	if o.json {
		progress = stderr
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "rdmagw", Level: hclog.Warn, Output: stderr})
	info = &benchInfo{Gateway: o.gateway, Backend: o.backend, Vers: o.vers, FileBytes: o.size,
		Concurrency: o.concurrency, Duration: o.duration.String(), Embedded: o.embedded, GatewayPID: o.gatewayPID, Syscalls: o.syscalls}
	st := &benchStack{metrics: o.gatewayMetrics}
	defer st.stop()
	if err := st.start(o, info, log); err != nil {
		return nil, nil, err
	}
	npaths := max(len(o.gatewayBins), 1)*max(len(o.gatewayProcs), 1)*max(len(o.gatewayCuts), 1) + 1 + len(o.anchors)
	budget := time.Duration(len(o.ops)*len(o.concurrency)*npaths*o.rounds)*o.duration + 5*time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	printBenchHeader(progress, o, info)

	info.Rounds = o.rounds
	paths, err := dialBenchPaths(ctx, o, info)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		for _, p := range paths {
			p.tr.Close()
		}
	}()
	mountAddr := o.backend
	if o.mountPort > 0 {
		mountAddr = withPort(o.backend, o.mountPort)
	}
	bf := &benchFile{vers: o.vers, mountAddr: mountAddr, export: o.export,
		name: "rdmagw-bench-" + strconv.Itoa(os.Getpid()) + ".dat"}
	if err := openBenchTargets(ctx, paths, bf, o.size, progress); err != nil {
		return nil, nil, err
	}
	for _, op := range o.ops {
		for _, n := range o.concurrency {
			for round := 1; round <= o.rounds; round++ {
				for _, p := range roundOrder(paths, round) {
					r, err := measure(ctx, o, st, info, p, op, n, round, progress)
					if err != nil {
						return nil, nil, err
					}
					results = append(results, r)
				}
			}
		}
	}
	for _, p := range paths {
		p.target.close(ctx)
	}
	if err := removeBenchFile(ctx, paths[0].tr, bf); err != nil {
		fmt.Fprintf(stderr, "rdmagw bench: could not remove %s: %v\n", bf.name, err)
	}
	return results, info, nil
}

// printBenchHeader says what the bench is about to measure.
func printBenchHeader(progress io.Writer, o *benchOptions, info *benchInfo) {
	fmt.Fprintf(progress, "rdmagw bench: NFSv%s, file %s, %v in flight, %v per workload\n",
		o.vers, mib(float64(o.size)), o.concurrency, o.duration)
	fmt.Fprintf(progress, "  gateway: RPC-over-RDMA (iwarp) to %s -> %s\n", info.Gateway, o.backend)
	if info.Relay != "" {
		fmt.Fprintf(progress, "  direct: TCP through %s (pid %d) at %s -> %s\n", info.Relay, info.RelayPID, info.Direct, o.backend)
	}
	if len(info.Burners) > 0 {
		fmt.Fprintf(progress, "  %d CPU burner processes beside the run\n", len(info.Burners))
	}
}

// openBenchTargets opens the bench file on every path: the last path
// opened creates and fills it, the others open it.
func openBenchTargets(ctx context.Context, paths []*benchPath, bf *benchFile, size int64, progress io.Writer) error {
	for i := len(paths) - 1; i >= 0; i-- {
		first := i == len(paths)-1
		t, err := openTarget(ctx, paths[i].tr, bf, first)
		if err != nil {
			return fmt.Errorf("%s: %w", paths[i].name, err)
		}
		paths[i].target = t
		if first {
			fmt.Fprintf(progress, "  filling %s (%s)\n", bf.name, mib(float64(size)))
			if err := fillBenchFile(ctx, t, size); err != nil {
				return fmt.Errorf("fill: %w", err)
			}
		}
	}
	return nil
}

// roundOrder is the order of the paths in a round: as dialed in odd
// rounds, reversed in even ones (ABBA), so that a drift of the machine
// over the run (another tenant, a warming cache) does not always favour
// the same path.
func roundOrder(paths []*benchPath, round int) []*benchPath {
	if round%2 == 1 {
		return paths
	}
	rev := slices.Clone(paths)
	slices.Reverse(rev)
	return rev
}

// measure runs workload op at n in flight on path p (in the given
// round); with -cpuprofile or -trace it profiles or traces the gateway
// meanwhile if this is the run asked for (in the first round).
func measure(ctx context.Context, o *benchOptions, st *benchStack, info *benchInfo, p *benchPath, op benchOp, n, round int, progress io.Writer) (benchResult, error) {
	run := benchRun{fileSize: o.size, concurrency: n, duration: o.duration, progress: progress}
	var profs []chan error
	if p.profiled && op.name == o.profileOp && n == o.profileDepth && round == 1 {
		secs := max(1, int(o.duration.Seconds()))
		at := fmt.Sprintf("%s@%d ", op.name, n)
		if o.cpuprofile != "" {
			profs = append(profs, fetchAsync(func() error { return fetchCPUProfile(st.metrics, secs, o.cpuprofile) }))
			info.CPUProfile = at + o.cpuprofile
		}
		if o.trace != "" {
			profs = append(profs, fetchAsync(func() error { return fetchTrace(st.metrics, secs, o.trace) }))
			info.Trace = at + o.trace
		}
	}
	// The gateway's counters are read outside the windows of its CPU
	// and system calls: the scrape costs the gateway too.
	var m0 map[string]float64
	if p.metrics != "" {
		m0, _ = fetchMetrics(p.metrics)
	}
	var perf *benchProc
	if p.pid != 0 && o.syscalls == "perf" {
		var err error
		if perf, err = startPerfSyscalls(p.pid); err != nil {
			return benchResult{}, err
		}
		defer perf.stop(time.Second)
	}
	u0, measured := p.usage()
	c0, s0 := peerCPU(os.Getpid()), peerCPU(o.backendPID)
	r := runWorkload(ctx, p.target, op, p.name, o.vers, run)
	r.Round = round
	if measured && r.Ops > 0 {
		if u1, ok := p.usage(); ok && u1.cpu >= u0.cpu {
			r.CPUProcess = p.proc
			r.CPUMicrosPerOp, r.SyscallsPerOp, r.CtxSwitchesPerOp = perOp(u0, u1, r.Ops)
		}
	}
	if r.Ops > 0 {
		r.ClientCPUMicrosPerOp = cpuPerOp(c0, peerCPU(os.Getpid()), r.Ops)
		r.ServerCPUMicrosPerOp = cpuPerOp(s0, peerCPU(o.backendPID), r.Ops)
	}
	if perf != nil {
		n, kinds, err := perf.stopPerfCount()
		if err != nil {
			return r, err
		}
		ops := float64(max(r.Ops, 1))
		r.SyscallsPerOp = float64(n) / ops
		r.SyscallsByKind = make(map[string]float64)
		for k, c := range kinds {
			r.SyscallsByKind[k] = float64(c) / ops
		}
	}
	if m0 != nil && r.Ops > 0 {
		if m1, err := fetchMetrics(p.metrics); err == nil {
			r.GatewayCountersPerOp = counterGrowth(m0, m1, r.Ops)
		}
	}
	for _, prof := range profs {
		if err := <-prof; err != nil {
			return r, err
		}
	}
	return r, nil
}

// counterGrowth is how much each of the gateway's own counters (rdmagw_
// ..._total; not the Go runtime's or the process's, which the scrapes
// themselves move) grew from m0 to m1, per op; counters that did not
// grow are left out.
func counterGrowth(m0, m1 map[string]float64, ops int64) map[string]float64 {
	out := make(map[string]float64)
	for k, v := range m1 {
		if d := v - m0[k]; strings.HasPrefix(k, "rdmagw_") && strings.HasSuffix(k, "_total") && d > 0 {
			out[k] = d / float64(ops)
		}
	}
	return out
}

// fetchAsync runs fetch on its own goroutine; its error comes on the
// channel.
func fetchAsync(fetch func() error) chan error {
	c := make(chan error, 1)
	go func() { c <- fetch() }()
	return c
}

// benchStack is what the bench starts around the measured paths: the
// embedded server and gateway, a gateway process, a relay, CPU burners.
type benchStack struct {
	dir     string
	mem     interface{ Close() error }
	local   *localGateway
	procs   []*benchProc // stopped by PID, in reverse order
	metrics string       // the gateway's metrics.listen ("" if unknown)
}

func (st *benchStack) start(o *benchOptions, info *benchInfo, log hclog.Logger) error {
	var err error
	if st.dir, err = os.MkdirTemp("", "rdmagw-bench-"); err != nil {
		return err
	}
	if o.embedded {
		mem, memAddr, err := startMemServer(log.Named("nfsmem"))
		if err != nil {
			return err
		}
		st.mem = mem
		if st.local, err = startLocalGateway(memAddr, o.metrics, log.Named("gateway")); err != nil {
			return err
		}
		o.backend, o.gateway, o.export = memAddr, st.local.fwd.Addr().String(), "/"
		info.Gateway, info.Backend, info.MetricsURL = o.gateway, o.backend, st.local.metricsURL()
	}
	if o.spawnGateway {
		if err := st.spawnGateways(o, info); err != nil {
			return err
		}
	}
	info.Direct = o.backend
	if o.relay == "haproxy" {
		p, addr, err := startHaproxy(st.dir, o.backend, haproxyMaxConn)
		if err != nil {
			return err
		}
		st.procs = append(st.procs, p)
		info.Direct, info.Relay, info.RelayPID = addr, o.relay, p.pid()
	}
	if o.anchors != nil {
		if err := st.startAnchors(o.anchors, o.backend); err != nil {
			return err
		}
		info.Anchors = o.anchors
	}
	if o.burn > 0 {
		ps, err := startBurners(o.burn)
		if err != nil {
			return err
		}
		st.procs = append(st.procs, ps...)
		for _, p := range ps {
			info.Burners = append(info.Burners, p.pid())
		}
	}
	return nil
}

// spawnGateways starts the gateway processes: one per -gateway-bin,
// -gateway-procs and -cut-through combination, or one with the
// defaults. The first is the one -cpuprofile profiles, -trace traces and
// -gateway names.
func (st *benchStack) spawnGateways(o *benchOptions, info *benchInfo) error {
	bins, procs, cuts := o.gatewayBins, o.gatewayProcs, o.gatewayCuts
	if bins == nil {
		bins = []string{""}
	}
	if procs == nil {
		procs = []gateway.Procs{procsUnset}
	}
	if cuts == nil {
		cuts = []string{""}
	}
	for _, bin := range bins {
		for _, n := range procs {
			for _, cut := range cuts {
				extra, path := "", "gateway"
				if n != procsUnset {
					extra = runtimeProcsConfig(n)
				}
				extra += o.gatewayRDMAConfig(cut)
				if len(bins) > 1 {
					path += "-" + filepath.Base(bin)
				}
				if len(procs) > 1 {
					path += "-p" + n.String()
				}
				if len(cuts) > 1 {
					path += "-ct" + cut
				}
				g := benchGateway{Path: path, CutThrough: cut, Bin: bin}
				g.Procs, g.ProcsSetting = reportProcs(n)
				if err := st.spawnGateway(o, &g, extra); err != nil {
					return err
				}
				info.Gateways = append(info.Gateways, g)
			}
		}
	}
	g := info.Gateways[0]
	o.gateway, st.metrics = g.Addr, g.Metrics
	info.Gateway, info.GatewayPID, info.MetricsURL = g.Addr, g.PID, "http://"+g.Metrics+"/metrics"
	return nil
}

// spawnGateway starts g's process (g.Bin, "": this program) with the
// extra configuration, and fills in its PID and addresses.
func (st *benchStack) spawnGateway(o *benchOptions, g *benchGateway, extra string) error {
	if g.Bin != "" {
		benchExecutable = func() (string, error) { return g.Bin, nil }
		defer func() { benchExecutable = os.Executable }()
	}
	p, addr, metrics, err := startGatewayProcess(st.dir, o.backend, extra)
	if err != nil {
		return err
	}
	st.procs = append(st.procs, p)
	g.PID, g.Addr, g.Metrics = p.pid(), addr, metrics
	return nil
}

// stop stops everything started, processes by their PIDs.
func (st *benchStack) stop() {
	for i := len(st.procs) - 1; i >= 0; i-- {
		st.procs[i].stop(10 * time.Second)
	}
	if st.local != nil {
		st.local.close()
	}
	if st.mem != nil {
		st.mem.Close()
	}
	if st.dir != "" {
		os.RemoveAll(st.dir)
	}
}

// benchPath is one way to the backend.
type benchPath struct {
	name   string
	tr     nfsclient.Transport
	target benchTarget
	pid    int    // the relay process on this path whose CPU is measured (0: none)
	proc   string // what pid is, for the report
	// metrics is the gateway's metrics.listen on a gateway path ("": not
	// read), for GatewayCountersPerOp.
	metrics string
	// profiled: the gateway path -cpuprofile and -trace cover (the first).
	profiled bool
}

// usage is what the path's relay process has used so far; false if it
// is not measured.
func (p *benchPath) usage() (procUsage, bool) {
	if p.pid == 0 {
		return procUsage{}, false
	}
	u, err := readProcUsage(p.pid)
	return u, err == nil
}

// dialBenchPaths connects the gateway path and, with -direct, the TCP
// path (through the relay if there is one).
func dialBenchPaths(ctx context.Context, o *benchOptions, info *benchInfo) ([]*benchPath, error) {
	gws := info.Gateways
	if gws == nil {
		gws = []benchGateway{{Path: "gateway", PID: info.GatewayPID, Addr: o.gateway, Metrics: o.gatewayMetrics}}
	}
	var paths []*benchPath
	closeAll := func() {
		for _, p := range paths {
			p.tr.Close()
		}
	}
	for i, g := range gws {
		gw, err := dialRDMAClient(ctx, g.Addr, max(64, 2*slices.Max(o.concurrency)), o.clientIWARP(), o.inline)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("connect to the gateway %s: %w", g.Addr, err)
		}
		paths = append(paths, &benchPath{name: g.Path, tr: gw, pid: g.PID, proc: "rdmagw", profiled: i == 0, metrics: g.Metrics})
	}
	if o.direct {
		d, err := nfsclient.DialTCP(ctx, info.Direct)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("connect to %s: %w", info.Direct, err)
		}
		name := "direct"
		if info.Relay != "" {
			name = info.Relay
		}
		paths = append(paths, &benchPath{name: name, tr: d, pid: info.RelayPID, proc: info.Relay})
	}
	for _, a := range info.Anchors {
		d, err := nfsclient.DialTCP(ctx, a.Addr)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("connect to %s (%s): %w", a.Addr, a.Path, err)
		}
		paths = append(paths, &benchPath{name: a.Path, tr: d, pid: a.PID, proc: "rdmagw tcprelay"})
	}
	return paths, nil
}

// fillBenchFile writes size bytes so that reads anywhere in the file
// return data.
func fillBenchFile(ctx context.Context, t benchTarget, size int64) error {
	const chunk = 1 << 20
	data := demoPattern(chunk)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	offs := make(chan int64)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := range offs {
				n := min(int64(chunk), size-off)
				if err := t.write(ctx, uint64(off), data[:n]); err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		}()
	}
	for off := int64(0); off < size; off += chunk {
		offs <- off
	}
	close(offs)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// checkCompletion checks -client-completion, -send-completion and
// -cut-through.
func (o *benchOptions) checkCompletion() error {
	if err := checkClientCompletion(o.clientCompl); err != nil {
		return err
	}
	if o.gatewayCompl != "" && !o.spawnGateway {
		return errors.New("-send-completion: with -spawn-gateway (a -gateway of yours has its own rdma.send_completion)")
	}
	if o.gatewayCuts != nil && !o.spawnGateway {
		return errors.New("-cut-through: with -spawn-gateway (a -gateway of yours has its own rdma.cut_through)")
	}
	return nil
}

// benchClientCompletion is -client-completion's default: see the README
// ("Send completions") for why.
const benchClientCompletion = gateway.SendCompletionTransmit

// clientCompletionFlag defines -client-completion (bench, bench-conns)
// into v.
func clientCompletionFlag(fs *flag.FlagSet, v *string) {
	fs.StringVar(v, "client-completion", benchClientCompletion, "when the bench client's pure-Go provider completes its Sends: transmit (on handing them to TCP, with no zero-length RDMA Read after them, as a Linux siw client does) or placement (after such a Read proves them placed, the provider's default)")
}

// checkClientCompletion checks -client-completion's value.
func checkClientCompletion(v string) error {
	if v != gateway.SendCompletionTransmit && v != gateway.SendCompletionPlacement {
		return fmt.Errorf("-client-completion %q: want transmit or placement", v)
	}
	return nil
}

// clientIWARP is the bench client's pure-Go provider configuration
// (-crc, -client-completion).
func (o *benchOptions) clientIWARP() iwarp.Config {
	return gateway.IWARPConfigFor(o.crc, o.clientCompl)
}

// gatewayRDMAConfig is the rdma section -crc, -send-completion,
// -cut-through and -inline give the spawned gateways ("" if they keep
// the defaults).
// cut is the gateway's rdma.cut_through ("": its default).
func (o *benchOptions) gatewayRDMAConfig(cut string) string {
	s := ""
	if !o.crc {
		s += "  mpa_crc: false\n"
	}
	if o.gatewayCompl != "" {
		s += "  send_completion: " + o.gatewayCompl + "\n"
	}
	if cut != "" {
		s += "  cut_through: " + cut + "\n"
	}
	if o.inline > 0 {
		s += fmt.Sprintf("  inline_recv: %d\n  inline_send: %d\n", o.inline, o.inline)
	}
	if s == "" {
		return ""
	}
	return "rdma:\n" + s
}
