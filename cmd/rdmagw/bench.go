package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
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
	concurrency int
	duration    time.Duration
	json        bool
	embedded    bool
	direct      bool
	metrics     string
}

func parseBenchFlags(args []string, stderr io.Writer) (*benchOptions, error) {
	o := &benchOptions{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.gateway, "gateway", "", "RPC-over-RDMA address of a running rdmagw (host:port) in front of -backend")
	fs.StringVar(&o.backend, "backend", "", "the NFS server behind the gateway, over TCP (host:port), benchmarked directly too")
	fs.IntVar(&o.mountPort, "mountport", 0, "the backend's MOUNT port for NFSv3 (default: the -backend port)")
	fs.StringVar(&o.export, "export", "/", "the export (NFSv3 mount path; NFSv4.1 path of the directory)")
	fs.StringVar(&o.vers, "vers", "3", "NFS version: 3 or 4.1")
	ops := fs.String("ops", defaultBenchOps, "workloads: read-SIZE, write-SIZE (SIZE up to 1m), getattr")
	size := fs.String("size", "64MiB", "size of the benchmark file (reads and writes land at random aligned offsets in it)")
	fs.IntVar(&o.concurrency, "concurrency", 8, "operations in flight per workload")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long each workload runs on each path")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON on stdout (progress goes to stderr)")
	fs.BoolVar(&o.embedded, "embedded", false, "start the in-memory NFSv3 server and a gateway in-process (ignores -gateway/-backend)")
	fs.BoolVar(&o.direct, "direct", true, "also run every workload directly over TCP and print the ratio")
	fs.StringVar(&o.metrics, "metrics", "", "with -embedded: where the gateway serves /metrics")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rdmagw bench -gateway host:port -backend host:port [flags]")
		fmt.Fprintln(stderr, "       rdmagw bench -embedded [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var err error
	if o.ops, err = parseBenchOps(*ops); err != nil {
		return nil, fmt.Errorf("-ops: %w", err)
	}
	s, err := gateway.ParseByteSize(*size)
	if err != nil || s < 1<<20 {
		return nil, fmt.Errorf("-size %q: want at least 1MiB", *size)
	}
	o.size = int64(s)
	switch {
	case o.vers != "3" && o.vers != "4.1":
		return nil, fmt.Errorf("-vers %q: want 3 or 4.1", o.vers)
	case o.concurrency < 1:
		return nil, errors.New("-concurrency must be at least 1")
	case o.duration <= 0:
		return nil, errors.New("-duration must be positive")
	case o.embedded && o.vers != "3":
		return nil, errors.New("-embedded serves NFSv3 only (use -vers 3)")
	case !o.embedded && (o.gateway == "" || o.backend == ""):
		return nil, errors.New("name the -gateway and the -backend behind it, or use -embedded")
	}
	return o, nil
}

func bench(args []string, stdout, stderr io.Writer) int {
	o, err := parseBenchFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "rdmagw bench:", err)
		return 2
	}
	results, info, err := runBench(o, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "rdmagw bench: FAILED:", err)
		return 1
	}
	if o.json {
		err = writeBenchJSON(stdout, o, info, results)
	} else {
		printBenchTable(stdout, info, results)
	}
	if err != nil {
		fmt.Fprintln(stderr, "rdmagw bench:", err)
		return 1
	}
	for _, r := range results {
		if r.Errors > 0 {
			return 1
		}
	}
	return 0
}

// benchInfo describes the run for the report.
type benchInfo struct {
	Gateway     string `json:"gateway"`
	Backend     string `json:"backend"`
	Vers        string `json:"nfs_version"`
	FileBytes   int64  `json:"file_bytes"`
	Concurrency int    `json:"concurrency"`
	Duration    string `json:"duration"`
	Embedded    bool   `json:"embedded"`
	MetricsURL  string `json:"metrics_url,omitempty"`
}

func runBench(o *benchOptions, stdout, stderr io.Writer) ([]benchResult, *benchInfo, error) {
	progress := stdout
	if o.json {
		progress = stderr
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "rdmagw", Level: hclog.Warn, Output: stderr})
	info := &benchInfo{Gateway: o.gateway, Backend: o.backend, Vers: o.vers, FileBytes: o.size,
		Concurrency: o.concurrency, Duration: o.duration.String(), Embedded: o.embedded}
	if o.embedded {
		mem, memAddr, err := startMemServer(log.Named("nfsmem"))
		if err != nil {
			return nil, nil, err
		}
		defer mem.Close()
		gw, err := startLocalGateway(memAddr, o.metrics, log.Named("gateway"))
		if err != nil {
			return nil, nil, err
		}
		defer gw.close()
		o.backend, o.gateway, o.export = memAddr, gw.fwd.Addr().String(), "/"
		info.Gateway, info.Backend, info.MetricsURL = o.gateway, o.backend, gw.metricsURL()
	}
	mountAddr := o.backend
	if o.mountPort > 0 {
		mountAddr = withPort(o.backend, o.mountPort)
	}
	budget := time.Duration(len(o.ops)*2)*o.duration + 5*time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	fmt.Fprintf(progress, "rdmagw bench: NFSv%s, file %s, %d in flight, %v per workload\n",
		o.vers, mib(float64(o.size)), o.concurrency, o.duration)
	fmt.Fprintf(progress, "  gateway: RPC-over-RDMA (iwarp) to %s -> %s\n", o.gateway, o.backend)

	paths, err := dialBenchPaths(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		for _, p := range paths {
			p.tr.Close()
		}
	}()
	bf := &benchFile{vers: o.vers, mountAddr: mountAddr, export: o.export,
		name: "rdmagw-bench-" + strconv.Itoa(os.Getpid()) + ".dat"}
	// The last path opened creates and fills the file; the others open it.
	for i := len(paths) - 1; i >= 0; i-- {
		t, err := openTarget(ctx, paths[i].tr, bf, i == len(paths)-1)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", paths[i].name, err)
		}
		paths[i].target = t
		if i == len(paths)-1 {
			fmt.Fprintf(progress, "  filling %s (%s)\n", bf.name, mib(float64(o.size)))
			if err := fillBenchFile(ctx, t, o.size); err != nil {
				return nil, nil, fmt.Errorf("fill: %w", err)
			}
		}
	}
	run := benchRun{fileSize: o.size, concurrency: o.concurrency, duration: o.duration, progress: progress}
	var results []benchResult
	for _, op := range o.ops {
		for _, p := range paths {
			results = append(results, runWorkload(ctx, p.target, op, p.name, o.vers, run))
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

// benchPath is one way to the backend.
type benchPath struct {
	name   string
	tr     nfsclient.Transport
	target benchTarget
}

// dialBenchPaths connects the gateway path and, with -direct, the TCP
// path.
func dialBenchPaths(ctx context.Context, o *benchOptions) ([]*benchPath, error) {
	gw, err := dialRDMAClient(ctx, o.gateway, max(64, 2*o.concurrency))
	if err != nil {
		return nil, fmt.Errorf("connect to the gateway %s: %w", o.gateway, err)
	}
	paths := []*benchPath{{name: "gateway", tr: gw}}
	if o.direct {
		d, err := nfsclient.DialTCP(ctx, o.backend)
		if err != nil {
			gw.Close()
			return nil, fmt.Errorf("connect to the backend %s: %w", o.backend, err)
		}
		paths = append(paths, &benchPath{name: "direct", tr: d})
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
