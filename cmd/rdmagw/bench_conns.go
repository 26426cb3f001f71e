package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/metricname"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/verbs"
	"github.com/rdmagw/rdmagw/verbs/iwarp"
)

// rdmagw bench-conns: many clients on one forward gateway (issue 12
// item 4). The gateway runs as its own process (rdmagw serve, pure-Go
// iWARP on loopback) in front of the in-memory NFSv3 server, so its RSS
// and CPU are its own; this process holds the N client connections
// (one device, one pool) and keeps -inflight GETATTRs in flight on each.
// Every case starts a fresh gateway (RSS never shrinks), and the cases
// alternate (-conns 16,1000 -repeat 2: 16, 1000, 16, 1000). With -relay
// haproxy every connection count runs a second time as NFSv3/TCP clients
// through haproxy in front of the same server: the anchor, what a TCP
// relay on this machine keeps of its 16-connection rate at 1,000.

func init() {
	register("bench-conns", "N RDMA clients on one forward gateway (its own process): its RSS, registered bytes, ops/s, CPU per op", benchConns)
}

// connsOptions are bench-conns' flags.
type connsOptions struct {
	conns    []int
	inflight int
	active   int // connections loaded (0: all); the others stay connected and idle
	duration time.Duration
	srqDepth int
	credits  int
	repeat   int
	json     bool
	profile  string          // directory for the gateway's CPU and heap profiles
	bins     []string        // the gateway programs compared ("": this one)
	procs    []gateway.Procs // the gateways' runtime.procs compared (nil: not set)
	crc      bool            // MPA CRCs asked for (clients and gateway)
	compl    string          // -client-completion: the clients' Send completion (rdma.send_completion's values)
	relay    string          // "haproxy": each count also through haproxy, TCP clients
}

func parseConnsFlags(args []string, stderr io.Writer) (*connsOptions, error) {
	o := &connsOptions{}
	fs := flag.NewFlagSet("bench-conns", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conns := fs.String("conns", "16,1000", "client connections per case; a list runs each case with a fresh gateway")
	fs.IntVar(&o.inflight, "inflight", 2, "GETATTRs in flight per connection")
	fs.IntVar(&o.active, "active", 0, "load only this many of the connections (0: all); the others stay connected and idle: what holding connections costs, apart from what spreading the load over them costs")
	fs.DurationVar(&o.duration, "duration", 3*time.Second, "how long each case's load runs")
	fs.IntVar(&o.srqDepth, "srq-depth", 4096, "the gateway's rdma.srq_depth (0: receives per connection)")
	fs.IntVar(&o.credits, "credits", 128, "the gateway's rdma.credits (granted per connection)")
	fs.IntVar(&o.repeat, "repeat", 1, "run the list of cases this many times, alternating")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON on stdout (progress goes to stderr)")
	fs.StringVar(&o.profile, "profile", "", "write the gateway's CPU profile of the load and heap profile after it to this directory (cpu-N-R.prof, heap-N-R.prof)")
	bins := fs.String("gateway-bin", "", "the rdmagw programs run as the gateway, a list alternates them within each run (default: this one), e.g. old,new")
	procs := fs.String("gateway-procs", "", "the gateway's runtime.procs (GOMAXPROCS: auto follows the load, 0 is Go's default); a list alternates them within each run, e.g. 1,2,auto")
	fs.BoolVar(&o.crc, "crc", true, "ask for MPA CRCs; false: the clients ask for none and the gateway runs with rdma.mpa_crc: false, so the connections carry none")
	clientCompletionFlag(fs, &o.compl)
	fs.StringVar(&o.relay, "relay", "", "haproxy: also run every connection count as NFSv3/TCP clients through haproxy in TCP mode in front of the same server (the anchor: its ops/s at N connections over its ops/s at the fewest)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.relay != "" && o.relay != "haproxy" {
		return nil, fmt.Errorf("-relay %q: want haproxy", o.relay)
	}
	o.bins = strings.Split(*bins, ",")
	var err error
	if o.procs, err = parseProcsList(*procs); err != nil {
		return nil, fmt.Errorf("-gateway-procs: %w", err)
	}
	if o.conns, err = parseConcurrency(*conns); err != nil {
		return nil, fmt.Errorf("-conns: %w", err)
	}
	if err := checkClientCompletion(o.compl); err != nil {
		return nil, err
	}
	switch {
	case o.inflight < 1 || o.repeat < 1 || o.credits < 1 || o.srqDepth < 0 || o.active < 0:
		return nil, errors.New("-inflight, -repeat and -credits want at least 1, -srq-depth and -active at least 0")
	case o.duration < time.Second:
		return nil, errors.New("-duration: want at least 1s")
	}
	return o, nil
}

// connsResult is one case's numbers. The gateway's figures are its own
// process's: CPU (utime+stime) over the load, RSS (VmRSS) and peak RSS
// (VmHWM) at the end of the load, and its metrics then.
type connsResult struct {
	Path          string  `json:"path"` // "gateway", or the -relay (haproxy) with TCP clients
	Conns         int     `json:"conns"`
	Active        int     `json:"active"` // connections loaded (-active; the rest idle)
	Run           int     `json:"run"`
	Gateway       string  `json:"gateway_bin,omitempty"`
	Procs         int     `json:"gateway_procs"`                   // -gateway-procs (0: Go's default, -1: auto)
	ProcsSetting  string  `json:"gateway_procs_setting,omitempty"` // -gateway-procs as given (auto, 0, N); "": not given (the default, auto)
	GOMAXPROCS    float64 `json:"gateway_gomaxprocs"`              // in force, from its go_sched_gomaxprocs_threads
	SetupSeconds  float64 `json:"setup_seconds"`                   // connecting all clients
	Ops           int64   `json:"ops"`
	OpsPerSec     float64 `json:"ops_per_sec"`
	CPUPerOpUs    float64 `json:"gateway_cpu_us_per_op"`
	SyscallsPerOp float64 `json:"gateway_syscalls_per_op"`     // syscr+syscw: read/write family only
	CtxSwPerOp    float64 `json:"gateway_ctx_switches_per_op"` // voluntary+nonvoluntary, all threads
	CPUCores      float64 `json:"gateway_cpu_cores"`           // CPU seconds per second of load
	ClientCores   float64 `json:"client_cpu_cores"`            // the same of this process (the clients)
	RSSMiB        float64 `json:"gateway_rss_mib"`
	PeakRSSMiB    float64 `json:"gateway_peak_rss_mib"`
	RegisteredMiB float64 `json:"gateway_registered_mib"` // data pool + receive pool
	RecvMiB       float64 `json:"gateway_recv_registered_mib"`
	HeapMiB       float64 `json:"gateway_heap_inuse_mib"`
	Goroutines    float64 `json:"gateway_goroutines"`
	Errors        int64   `json:"errors"`
}

func benchConns(args []string, stdout, stderr io.Writer) int {
	return benchCommand("bench-conns", args, stdout, stderr, parseConnsFlags, func(o *connsOptions) (benchReport, error) {
		progress := stdout
		if o.json {
			progress = stderr
		}
		results, err := runConns(o, progress)
		return benchReport{json: o.json, doc: results,
			table:     func(w io.Writer) { printConnsTable(w, results) },
			hadErrors: slices.ContainsFunc(results, func(r connsResult) bool { return r.Errors > 0 })}, err
	})
}

func runConns(o *connsOptions, progress io.Writer) ([]connsResult, error) {
	log := hclog.New(&hclog.LoggerOptions{Name: "rdmagw", Level: hclog.Warn, Output: os.Stderr})
	mem, memAddr, err := startMemServer(log.Named("nfsmem"))
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	dir, err := os.MkdirTemp("", "rdmagw-bench-conns-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(progress, "bench-conns: %d GETATTRs in flight per connection, %s per case, srq_depth %d, %d credits granted, MPA CRCs %t, clients complete Sends on %s\n",
		o.inflight, o.duration, o.srqDepth, o.credits, o.crc, o.compl)
	var results []connsResult
	for run := 1; run <= o.repeat; run++ {
		for _, n := range o.conns {
			for _, c := range o.cases() {
				r, err := runConnsCase(o, dir, memAddr, n, run, c)
				if err != nil {
					return results, fmt.Errorf("%d connections (run %d, %s, procs %s): %w", n, run, c.bin, c.procs, err)
				}
				fmt.Fprintf(progress, "  %d conns run %d %s procs %.0f: %.0f ops/s, gateway %.0f µs/op, RSS %.1f MiB, registered %.1f MiB, setup %.1fs\n",
					n, run, c.bin, r.GOMAXPROCS, r.OpsPerSec, r.CPUPerOpUs, r.RSSMiB, r.RegisteredMiB, r.SetupSeconds)
				results = append(results, r)
			}
			if o.relay != "" {
				r, err := runConnsRelay(o, dir, memAddr, n, run)
				if err != nil {
					return results, fmt.Errorf("%d connections through %s (run %d): %w", n, o.relay, run, err)
				}
				fmt.Fprintf(progress, "  %d conns run %d %s: %.0f ops/s, %s %.0f µs/op, RSS %.1f MiB, setup %.1fs\n",
					n, run, o.relay, r.OpsPerSec, o.relay, r.CPUPerOpUs, r.RSSMiB, r.SetupSeconds)
				results = append(results, r)
			}
		}
	}
	return results, nil
}

// connsGateway is one gateway compared: its program ("": this one) and
// runtime.procs (procsUnset: not set).
type connsGateway struct {
	bin   string
	procs gateway.Procs
}

// cases are the gateways compared at each connection count, in the
// order they run.
func (o *connsOptions) cases() []connsGateway {
	procs := o.procs
	if procs == nil {
		procs = []gateway.Procs{procsUnset}
	}
	var out []connsGateway
	for _, bin := range o.bins {
		for _, p := range procs {
			out = append(out, connsGateway{bin, p})
		}
	}
	return out
}

// connsGatewayConfig is what bench-conns adds to the gateway's
// configuration: the credits, the shared receive queue, MPA CRCs (-crc)
// and room for the connections, all from one address.
const connsGatewayConfig = `rdma:
  credits: %d
  srq_depth: %d
  mpa_crc: %t
connections:
  max: %d
  max_per_address: 0
`

// runConnsCase starts a gateway (program bin, "" this one), connects n
// clients to it, loads them and measures the gateway.
func runConnsCase(o *connsOptions, dir, memAddr string, n, run int, gw connsGateway) (connsResult, error) {
	bin := gw.bin
	r := connsResult{Path: "gateway", Conns: n, Run: run, Gateway: bin}
	r.Procs, r.ProcsSetting = reportProcs(gw.procs)
	if bin != "" {
		benchExecutable = func() (string, error) { return bin, nil }
		defer func() { benchExecutable = os.Executable }()
	}
	extra := fmt.Sprintf(connsGatewayConfig, o.credits, o.srqDepth, o.crc, n+16)
	if gw.procs != procsUnset {
		extra += runtimeProcsConfig(gw.procs)
	}
	p, addr, metrics, err := startGatewayProcess(dir, memAddr, extra)
	if err != nil {
		return r, err
	}
	defer p.stop(10 * time.Second)
	var during func() error
	if o.profile != "" {
		file := filepath.Join(o.profile, fmt.Sprintf("cpu-%d-%d%s.prof", n, run, profSuffix(gw)))
		during = func() error { return fetchCPUProfile(metrics, max(int(o.duration.Seconds())-1, 1), file) }
	}
	err = o.loadCase(memAddr, p.pid(), &r, func(ctx context.Context) (*connsClients, error) {
		return dialConnsClients(ctx, addr, n, o.inflight, o.clientIWARP())
	}, during, func() error { return gatewayMemory(p.pid(), metrics, &r) })
	if err != nil || o.profile == "" {
		return r, err
	}
	return r, fetchProfile(metrics, "heap", 0, filepath.Join(o.profile, fmt.Sprintf("heap-%d-%d%s.prof", n, run, profSuffix(gw))))
}

// runConnsRelay starts haproxy in front of the server at memAddr,
// connects n NFSv3/TCP clients to it and loads them as runConnsCase
// loads the gateway's: the same GETATTRs, in flight, duration and
// figures of the relay process (its RSS; it registers nothing).
func runConnsRelay(o *connsOptions, dir, memAddr string, n, run int) (connsResult, error) {
	r := connsResult{Path: o.relay, Conns: n, Run: run}
	p, addr, err := startHaproxy(dir, memAddr, n+64)
	if err != nil {
		return r, err
	}
	defer p.stop(10 * time.Second)
	err = o.loadCase(memAddr, p.pid(), &r, func(ctx context.Context) (*connsClients, error) {
		return dialConnsTCP(ctx, addr, n)
	}, nil, func() error { return procMemory(p.pid(), &r) })
	return r, err
}

// loadCase is one case's load on the relay process pid (the gateway or
// haproxy) in front of the server at memAddr: it connects the clients
// with dial, warms them, and measures the load into r; during (if set)
// runs beside the measured load (a profile) and after (if set) right
// after it, with the clients still connected.
func (o *connsOptions) loadCase(memAddr string, pid int, r *connsResult, dial func(context.Context) (*connsClients, error), during, after func() error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := nfsclient.MountRoot(ctx, memAddr, "/")
	if err != nil {
		return err
	}
	cl, err := dial(ctx)
	r.SetupSeconds = cl.setup.Seconds()
	defer cl.close()
	if err != nil {
		return err
	}
	if err := cl.warm(ctx, root, o.inflight); err != nil {
		return err
	}
	var beside chan error
	if during != nil {
		beside = make(chan error, 1)
		go func() { beside <- during() }()
	}
	if err := cl.measure(ctx, root, o, pid, r); err != nil {
		return err
	}
	if after != nil {
		if err := after(); err != nil {
			return err
		}
	}
	if beside != nil {
		return <-beside
	}
	return nil
}

// profSuffix tells apart the profiles of the gateways compared.
func profSuffix(gw connsGateway) string {
	s := ""
	if gw.bin != "" {
		s = "-" + filepath.Base(gw.bin)
	}
	if gw.procs != procsUnset {
		s += "-p" + gw.procs.String()
	}
	return s
}

// connsClients are the n client connections: RDMA ones on one pure-Go
// device and one pool, or TCP ones (no device).
type connsClients struct {
	dev   verbs.Device
	pd    verbs.PD
	pool  *rdmarpc.Pool
	trs   []nfsclient.Transport
	setup time.Duration
}

// clientIWARP is the clients' pure-Go provider configuration (-crc,
// -client-completion), as the bench client's.
func (o *connsOptions) clientIWARP() iwarp.Config {
	return gateway.IWARPConfigFor(o.crc, o.compl)
}

// dialConnsClients connects n clients to the gateway at addr, on one
// device of the pure-Go provider configured as ic.
func dialConnsClients(ctx context.Context, addr string, n, inflight int, ic iwarp.Config) (*connsClients, error) {
	cl := &connsClients{}
	p, err := gateway.Provider("iwarp", ic)
	if err != nil {
		return cl, err
	}
	if cl.dev, err = p.Open("127.0.0.1"); err != nil {
		return cl, err
	}
	if cl.pd, err = cl.dev.AllocPD(); err != nil {
		return cl, err
	}
	if cl.pool, err = rdmarpc.NewPool(cl.pd, rdmarpc.PoolConfig{MaxBytes: 1 << 30}); err != nil {
		return cl, err
	}
	cfg := rdmarpc.RequesterConfig{Pool: cl.pool, Credits: inflight + 2, InlineRecv: 1024, InlineSend: 1024}
	err = cl.dial(n, func() (nfsclient.Transport, error) { return nfsclient.DialRDMA(ctx, cl.dev, addr, cfg) })
	return cl, err
}

// dialConnsTCP connects n NFSv3/TCP clients to addr.
func dialConnsTCP(ctx context.Context, addr string, n int) (*connsClients, error) {
	cl := &connsClients{}
	err := cl.dial(n, func() (nfsclient.Transport, error) { return nfsclient.DialTCP(ctx, addr) })
	return cl, err
}

// dial makes the n connections, connsDialers at once, and times it.
func (cl *connsClients) dial(n int, dial func() (nfsclient.Transport, error)) (err error) {
	start := time.Now()
	defer func() { cl.setup = time.Since(start) }()
	cl.trs = make([]nfsclient.Transport, n)
	next := make(chan int)
	errs := make(chan error, connsDialers)
	var wg sync.WaitGroup
	for range connsDialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t, err := dial()
				if err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
					return
				}
				cl.trs[i] = t
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil && len(errs) > 0 {
		err = <-errs
	}
	return err
}

// connsDialers is how many connections the clients set up at once (the
// gateway accepts them one at a time; a few at once keep its accept loop
// busy rather than measuring one round trip after another).
const connsDialers = 8

func (cl *connsClients) close() {
	for _, t := range cl.trs {
		if t != nil {
			t.Close()
		}
	}
	if cl.pool != nil {
		cl.pool.Close()
	}
	if cl.pd != nil {
		cl.pd.Close()
	}
	if cl.dev != nil {
		cl.dev.Close()
	}
}

// each runs f on inflight goroutines for each of the first n
// connections (its NFSv3 client) and waits for them all.
func (cl *connsClients) each(n, inflight int, f func(c *nfsclient.V3)) {
	var wg sync.WaitGroup
	for _, t := range cl.trs[:n] {
		c := &nfsclient.V3{T: t}
		for range inflight {
			wg.Go(func() { f(c) })
		}
	}
	wg.Wait()
}

// warm sends inflight GETATTRs of root at once on every connection and
// waits for them: what each connection makes on its first calls (on
// both sides) is made before the measured load, not during it.
func (cl *connsClients) warm(ctx context.Context, root []byte, inflight int) error {
	errs := make(chan error, 1)
	cl.each(len(cl.trs), inflight, func(c *nfsclient.V3) {
		if _, err := c.Getattr(ctx, root); err != nil {
			select {
			case errs <- fmt.Errorf("warm-up GETATTR: %w", err):
			default:
			}
		}
	})
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// load keeps inflight GETATTRs of root in flight on each of the first
// r.Active connections for d, counting into r, and returns how long it
// ran.
func (cl *connsClients) load(ctx context.Context, root []byte, inflight int, d time.Duration, r *connsResult) time.Duration {
	ctx, stop := context.WithTimeout(ctx, d)
	defer stop()
	var ops, errs atomic.Int64
	start := time.Now()
	cl.each(r.Active, inflight, func(c *nfsclient.V3) {
		for ctx.Err() == nil {
			if _, err := c.Getattr(ctx, root); err != nil {
				if ctx.Err() == nil {
					errs.Add(1)
				}
				return
			}
			ops.Add(1)
		}
	})
	r.Ops, r.Errors = ops.Load(), errs.Load()
	return time.Since(start)
}

// measure runs the load and fills r's rates and what the gateway (pid)
// and this process used per op and per second.
func (cl *connsClients) measure(ctx context.Context, root []byte, o *connsOptions, pid int, r *connsResult) error {
	r.Active = len(cl.trs)
	if o.active > 0 {
		r.Active = min(o.active, r.Active)
	}
	self0, _ := procCPU(os.Getpid())
	u0, err := readProcUsage(pid)
	if err != nil {
		return err
	}
	el := cl.load(ctx, root, o.inflight, o.duration, r)
	self1, _ := procCPU(os.Getpid())
	u1, err := readProcUsage(pid)
	if err != nil {
		return err
	}
	r.OpsPerSec = float64(r.Ops) / el.Seconds()
	r.CPUPerOpUs, r.SyscallsPerOp, r.CtxSwPerOp = perOp(u0, u1, max(r.Ops, 1))
	r.CPUCores = (u1.cpu - u0.cpu).Seconds() / el.Seconds()
	r.ClientCores = (self1 - self0).Seconds() / el.Seconds()
	return nil
}

// gatewayMemory fills r's memory figures: RSS from /proc, registered
// bytes, heap and goroutines from the gateway's metrics.
func gatewayMemory(pid int, metricsAddr string, r *connsResult) error {
	if err := procMemory(pid, r); err != nil {
		return err
	}
	m, err := fetchMetrics(metricsAddr)
	if err != nil {
		return err
	}
	r.RecvMiB = m[metricname.RecvPoolBytesRegistered] / (1 << 20)
	r.RegisteredMiB = m[metricname.PoolBytesRegistered]/(1<<20) + r.RecvMiB
	r.HeapMiB = m["go_memstats_heap_inuse_bytes"] / (1 << 20)
	r.Goroutines = m["go_goroutines"]
	r.GOMAXPROCS = m["go_sched_gomaxprocs_threads"]
	return nil
}

// procMemory fills r's RSS and peak RSS from /proc/<pid>/status (VmRSS,
// VmHWM): the relay process's, the gateway's or haproxy's.
func procMemory(pid int, r *connsResult) error {
	st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return err
	}
	r.RSSMiB = procField(st, "VmRSS:") / 1024
	r.PeakRSSMiB = procField(st, "VmHWM:") / 1024
	return nil
}

// fetchMetrics reads a gateway's /metrics: each sample by its name, the
// samples of one name (label sets) summed.
func fetchMetrics(metricsAddr string) (map[string]float64, error) {
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	m := make(map[string]float64)
	s := bufio.NewScanner(resp.Body)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		line := s.Text()
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line[:i], "{")
		if f, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[name] += f
		}
	}
	return m, s.Err()
}

func printConnsTable(w io.Writer, rs []connsResult) {
	fmt.Fprintln(w, "sys/op: the relay's syscr+syscw (/proc/<pid>/io, read- and write-family calls only; haproxy's recvfrom/sendto are not); csw/op: its voluntary+nonvoluntary context switches, all threads; procs: the gateway's GOMAXPROCS (go_sched_gomaxprocs_threads); gw_us/op, gw_cores, rss: the relay process's (the gateway or haproxy); cli_cores: this process's (the clients and the server)")
	fmt.Fprintf(w, "%-16s %5s %6s %6s %4s %9s %10s %8s %8s %9s %9s %9s %9s %9s %9s %8s %8s %6s\n",
		"path", "procs", "conns", "active", "run", "ops/s", "gw_us/op", "sys/op", "csw/op", "gw_cores", "cli_cores", "rss_MiB", "peak_MiB", "reg_MiB", "heap_MiB", "gorout", "setup_s", "errors")
	for _, r := range rs {
		fmt.Fprintf(w, "%-16s %5.0f %6d %6d %4d %9.0f %10.1f %8.2f %8.2f %9.2f %9.2f %9.1f %9.1f %9.1f %9.1f %8.0f %8.1f %6d\n",
			r.label(), r.GOMAXPROCS, r.Conns, r.Active, r.Run, r.OpsPerSec, r.CPUPerOpUs, r.SyscallsPerOp, r.CtxSwPerOp, r.CPUCores, r.ClientCores, r.RSSMiB, r.PeakRSSMiB, r.RegisteredMiB, r.HeapMiB, r.Goroutines, r.SetupSeconds, r.Errors)
	}
	if sc := connsScaling(rs); len(sc) > 0 {
		fmt.Fprintln(w, "\naggregate ops/s at the most connections over the fewest, per path and run;")
		fmt.Fprintln(w, "relay: the relay's CPU per op, most over fewest; clients: this process's")
		fmt.Fprintln(w, "(clients and server); flat relay: the aggregate ratio a relay whose CPU per")
		fmt.Fprintln(w, "op did not grow would reach with these clients, when the cases use every")
		fmt.Fprintln(w, "core (both processes' CPU per op shares them):")
		for _, s := range sc {
			fmt.Fprintf(w, "  %-16s run %d: %d/%d conns %.2fx   relay %.2fx  clients %.2fx  flat relay %.2fx\n",
				s.path, s.run, s.most, s.fewest, s.ratio, s.relayCost, s.clientCost, s.flatRelay)
		}
	}
}

// label names a result's path in the table: the gateway program's base
// name ("this": this one), or the relay.
func (r connsResult) label() string {
	switch {
	case r.Path != "" && r.Path != "gateway":
		return r.Path
	case r.Gateway == "":
		return "this"
	}
	return filepath.Base(r.Gateway)
}

// threads names the gateway's threads for the scaling lines: the
// -gateway-procs setting, not the GOMAXPROCS in force, which under auto
// (the default) may differ between the two counts of connections.
func (r connsResult) threads() string { return r.ProcsSetting }

// connsScale is one path's aggregate at its most connections over its
// aggregate at its fewest, in one run.
type connsScale struct {
	path         string
	run          int
	fewest, most int
	ratio        float64
	// relayCost and clientCost: the relay's CPU per op and this
	// process's (the clients and the server) at the most connections
	// over the same at the fewest. flatRelay: the aggregate ratio if the
	// relay's CPU per op had stayed what it was at the fewest, the
	// clients' grown as measured, on cores both saturate: (relay +
	// clients per op at the fewest) over (relay at the fewest + clients
	// at the most). On a 2-core host the clients' own growth bounds what
	// any relay can show here.
	relayCost, clientCost, flatRelay float64
}

// connsScaling pairs, for every path (label and -gateway-procs setting)
// and run, the case with the fewest connections and the one with the
// most.
func connsScaling(rs []connsResult) []connsScale {
	type key struct {
		path  string
		procs string
		run   int
	}
	lo, hi := map[key]connsResult{}, map[key]connsResult{}
	var order []key
	for _, r := range rs {
		k := key{r.label(), r.threads(), r.Run}
		if l, ok := lo[k]; !ok {
			order = append(order, k)
			lo[k], hi[k] = r, r
		} else {
			if r.Conns < l.Conns {
				lo[k] = r
			}
			if r.Conns > hi[k].Conns {
				hi[k] = r
			}
		}
	}
	var out []connsScale
	for _, k := range order {
		l, h := lo[k], hi[k]
		if l.Conns == h.Conns || l.OpsPerSec == 0 {
			continue
		}
		path := k.path
		if k.procs != "" {
			path += " procs " + k.procs
		}
		sc := connsScale{path: path, run: k.run, fewest: l.Conns, most: h.Conns, ratio: h.OpsPerSec / l.OpsPerSec}
		if h.OpsPerSec > 0 && l.CPUPerOpUs > 0 && l.ClientCores > 0 {
			cliLo, cliHi := l.ClientCores/l.OpsPerSec*1e6, h.ClientCores/h.OpsPerSec*1e6
			sc.relayCost, sc.clientCost = h.CPUPerOpUs/l.CPUPerOpUs, cliHi/cliLo
			sc.flatRelay = (l.CPUPerOpUs + cliLo) / (l.CPUPerOpUs + cliHi)
		}
		out = append(out, sc)
	}
	return out
}
