package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/internal/gwstats"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/verbs/iwarp"
)

func init() {
	register("demo", "write and read back a file through a gateway on loopback (pure Go, nothing else needed)", demo)
}

// demoOptions are the demo's flags.
type demoOptions struct {
	size        int64
	chunk       int
	concurrency int
	metrics     string
	hold        time.Duration
	verbose     bool
}

func parseDemoFlags(args []string, stderr io.Writer) (*demoOptions, error) {
	o := &demoOptions{}
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	size := fs.String("size", "64MiB", "size of the file written and read back (e.g. 4MiB, 1GiB)")
	chunk := fs.String("chunk", "1MiB", "bytes per NFS READ/WRITE")
	fs.IntVar(&o.concurrency, "concurrency", 4, "READs/WRITEs in flight")
	fs.StringVar(&o.metrics, "metrics", "127.0.0.1:0", `where the gateway serves /metrics ("" for nowhere)`)
	fs.DurationVar(&o.hold, "hold", 0, "keep everything running this long after the summary (to look at /metrics)")
	fs.BoolVar(&o.verbose, "v", false, "log the gateway's debug messages")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rdmagw demo [flags]")
		fmt.Fprintln(stderr, "Starts an in-memory NFSv3 server, the gateway on the pure-Go iWARP provider")
		fmt.Fprintln(stderr, "and an NFS client over RPC-over-RDMA, all on loopback; writes a file, reads")
		fmt.Fprintln(stderr, "it back, verifies it and prints the throughput and the bytes by path.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	s, err := gateway.ParseByteSize(*size)
	if err != nil {
		return nil, fmt.Errorf("-size: %w", err)
	}
	c, err := gateway.ParseByteSize(*chunk)
	if err != nil || c <= 0 || c > 1<<20 {
		return nil, fmt.Errorf("-chunk %q: want 1 byte to 1MiB", *chunk)
	}
	if o.concurrency < 1 {
		return nil, errors.New("-concurrency must be at least 1")
	}
	o.size, o.chunk = int64(s), int(c)
	return o, nil
}

func demo(args []string, stdout, stderr io.Writer) int {
	o, err := parseDemoFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "rdmagw demo:", err)
		return 2
	}
	if err := runDemo(o, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "rdmagw demo: FAILED:", err)
		return 1
	}
	return 0
}

func runDemo(o *demoOptions, out, errw io.Writer) error {
	level := hclog.Warn
	if o.verbose {
		level = hclog.Debug
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "rdmagw", Level: level, Output: errw})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	st, err := startDemoStack(ctx, o, out, log)
	defer st.close()
	if err != nil {
		return err
	}
	gw, tr := st.gw, st.tr
	c, fh, err := demoCreate(ctx, tr)
	if err != nil {
		return err
	}
	data := demoPattern(o.size)
	before, _ := gwstats.Take(gw.fwd.Metrics().Registry)
	fmt.Fprintf(out, "writing %s to /demo.bin in %s WRITEs (%d in flight)\n", mib(float64(o.size)), gateway.ByteSize(o.chunk), o.concurrency)
	wr, mid, err := demoPhase(out, "write", o, gw, before, func(io nfsclient.IOOptions) error {
		return c.WriteAll(ctx, fh, data, io)
	})
	if err != nil {
		return err
	}
	a, err := c.Getattr(ctx, fh)
	if err != nil {
		return fmt.Errorf("GETATTR: %w", err)
	}
	if int64(a.Size) != o.size {
		return fmt.Errorf("the server says demo.bin has %d bytes, we wrote %d", a.Size, o.size)
	}

	fmt.Fprintf(out, "reading it back\n")
	var got []byte
	rd, after, err := demoPhase(out, "read", o, gw, mid, func(io nfsclient.IOOptions) (err error) {
		got, err = c.ReadAll(ctx, fh, o.size, io)
		return err
	})
	if err != nil {
		return err
	}
	if i := firstMismatch(got, data); i >= 0 {
		return fmt.Errorf("read back differs from what was written at byte %d", i)
	}
	fmt.Fprintf(out, "verified: %s read back byte for byte identical\n\n", mib(float64(o.size)))
	printDemoSummary(out, []phaseResult{wr, rd}, after, gw.metricsURL())
	if o.hold > 0 {
		fmt.Fprintf(out, "holding for %v (Ctrl-C to stop)\n", o.hold)
		time.Sleep(o.hold)
	}
	return nil
}

// demoStack is what the demo runs on loopback: the memory NFS server,
// the gateway in front of it, and the RDMA client connected to it.
type demoStack struct {
	mem interface{ Close() error }
	gw  *localGateway
	tr  *rdmaClient
}

// startDemoStack starts the stack, saying what runs where. What started
// is in st even on error: close it either way.
func startDemoStack(ctx context.Context, o *demoOptions, out io.Writer, log hclog.Logger) (st demoStack, err error) {
	mem, memAddr, err := startMemServer(log.Named("nfsmem"))
	if err != nil {
		return st, fmt.Errorf("start the memory NFS server: %w", err)
	}
	st.mem = mem
	fmt.Fprintf(out, "nfsmem   NFSv3 + MOUNT v3 in memory on %s (tcp)\n", memAddr)

	if st.gw, err = startLocalGateway(memAddr, o.metrics, log.Named("gateway")); err != nil {
		return st, fmt.Errorf("start the gateway: %w", err)
	}
	fmt.Fprintf(out, "gateway  RPC-over-RDMA on %s (iwarp, pure Go) -> %s\n", st.gw.fwd.Addr(), memAddr)

	if st.tr, err = dialRDMAClient(ctx, st.gw.fwd.Addr().String(), 64, iwarp.Config{}, 0); err != nil {
		return st, fmt.Errorf("connect the RDMA client: %w", err)
	}
	fmt.Fprintf(out, "client   NFSv3 over RPC-over-RDMA, inline threshold %d bytes\n\n", st.tr.Conn().InlineSend())
	return st, nil
}

// close stops what started, the client first.
func (st demoStack) close() {
	if st.tr != nil {
		st.tr.Close()
	}
	if st.gw != nil {
		st.gw.close()
	}
	if st.mem != nil {
		st.mem.Close()
	}
}

// demoCreate mounts / and creates demo.bin in it.
func demoCreate(ctx context.Context, tr nfsclient.Transport) (*nfsclient.V3, []byte, error) {
	root, _, err := (&nfsclient.Mount{T: tr}).Mnt(ctx, "/")
	if err != nil {
		return nil, nil, fmt.Errorf("MOUNT /: %w", err)
	}
	c := &nfsclient.V3{T: tr}
	fh, err := c.Create(ctx, root, "demo.bin", nfsproto.CreateUnchecked, nfsproto.Sattr3{SetMode: true, Mode: 0o644, SetSize: true})
	if err != nil {
		return nil, nil, fmt.Errorf("CREATE demo.bin: %w", err)
	}
	return c, fh, nil
}

// demoPhase runs one phase (do: the WRITEs or the READs of the whole
// file) with a progress line; the gateway's counters after it, and the
// RPCs it saw since from.
func demoPhase(out io.Writer, name string, o *demoOptions, gw *localGateway, from gwstats.Snapshot,
	do func(nfsclient.IOOptions) error) (phaseResult, gwstats.Snapshot, error) {
	p := newProgress(out, name, o.size)
	if err := do(nfsclient.IOOptions{Chunk: o.chunk, Concurrency: o.concurrency, Progress: p.add}); err != nil {
		return phaseResult{}, from, fmt.Errorf("%s: %w", name, err)
	}
	res := phaseResult{name: name, bytes: o.size, elapsed: p.finish()}
	to, err := gwstats.Take(gw.fwd.Metrics().Registry)
	if err != nil {
		return res, to, err
	}
	res.calls = to.Calls - from.Calls
	return res, to, nil
}

// demoPattern is size pseudo-random bytes: incompressible, and a
// misplaced block shows as a mismatch.
func demoPattern(size int64) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(size), 0x72646d61))
	for i := 0; i+8 <= len(b); i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// firstMismatch is the first index where a and b differ, or -1.
func firstMismatch(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
