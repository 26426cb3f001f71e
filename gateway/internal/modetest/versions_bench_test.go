package modetest_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/forward/forwardtest"
	"github.com/rdmagw/rdmagw/gateway/reverse"
	"github.com/rdmagw/rdmagw/internal/gwstats"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/internal/nfstest/ganesha"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/xdr"
)

// What RPC-over-RDMA version two buys over version one (issue 15 item 5),
// measured over the host chain: one forward gateway accepting both
// versions in front of nfs-ganesha, and two reverse gateways in front of
// it, one speaking version one and one version two (backend.rdma_version
// 1 and 2). Each workload runs through both, alternating, -v2reps times;
// every run reports, per RPC, the work requests posted on the RDMA link
// by path (both gateways' rdmagw_rdma_work_requests_total) and the
// bytes by path (the forward gateway's rdmagw_bytes_total), and at the
// end the medians are logged as a markdown table:
//
//	go test ./gateway/internal/modetest -run '^$' -bench ChainVersions -benchtime 2s -v2reps 3
//
// Speeds are comparable only within one run (the machine is shared);
// the operation counts do not depend on it.
var v2reps = flag.Int("v2reps", 1, "BenchmarkChainVersions: repeats of every workload at each version, alternating")

// chainOp is one workload: one NFSv3 RPC per op.
type chainOp struct {
	name string
	do   func(ctx context.Context, c *nfsclient.V3) error
}

// versionResult is one run's numbers, per RPC.
type versionResult struct {
	nsPerOp float64
	m       map[string]float64
}

// The per-RPC columns, in table order: work requests (wr) and bytes (B)
// by path. send counts both gateways' Sends (the reverse's calls, the
// forward's replies), cont (continuation) and grant likewise; the RDMA
// Reads and Writes are the forward's; reg is the reverse's memory
// registrations exposing the call's chunks (not in wr: the pure-Go
// provider posts no work request for them, FRWR hardware two each).
var versionColumns = []string{"rpcs", "wr", "send", "cont", "grant", "rdma_read", "write_chunk", "reply_chunk", "reg",
	"B_send_call", "B_send_reply", "B_read", "B_write_chunk", "B_reply_chunk"}

func BenchmarkChainVersions(b *testing.B) {
	g := ganesha.Start(b, ganesha.Options{NFSACL: true})
	fwd := forwardtest.StartWith(b, g.NFSAddr, func(c *gateway.Config) {
		c.Log.Level = "warn"
		c.RDMA.Versions = []int{1, 2}
	}, nil)
	var revs [2]*reverse.Gateway
	for i, v := range []string{"1", "2"} {
		revs[i] = startReverse(b, fwd.Addr().String(), func(c *gateway.Config) { c.Backend.RDMAVersion = v })
	}
	ctx := context.Background()
	root := nfstest.MountRoot(b, ctx, g.MountAddr, g.Export)
	ops := versionWorkloads(b, ctx, g, revs[0], root)
	clients := [2]*nfsclient.V3{}
	for i, r := range revs {
		t, err := nfsclient.DialTCP(ctx, r.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { t.Close() })
		clients[i] = &nfsclient.V3{T: t}
	}
	var mu sync.Mutex
	results := map[string][]versionResult{} // "op/v1" -> one per repeat
	for rep := 1; rep <= *v2reps; rep++ {
		for _, op := range ops {
			for i := range revs {
				key := fmt.Sprintf("%s/v%d", op.name, i+1)
				var last versionResult
				if !b.Run(fmt.Sprintf("%s/r%d", key, rep), func(b *testing.B) {
					last = runVersion(b, ctx, op, clients[i], fwd.Metrics(), revs[i].Metrics())
				}) || last.m == nil { // filtered out by -bench
					continue
				}
				mu.Lock()
				results[key] = append(results[key], last)
				mu.Unlock()
			}
		}
	}
	// Printed, not logged: go test shows a parent benchmark's log only
	// with -v.
	fmt.Printf("BenchmarkChainVersions: medians of %d runs per row (ops/s; work requests and bytes per RPC):\n%s", *v2reps, versionTable(ops, results))
}

// runVersion runs op b.N times through one reverse gateway and returns
// the run's numbers per RPC (the last call of a sub-benchmark is the one
// go test reports).
func runVersion(b *testing.B, ctx context.Context, op chainOp, c *nfsclient.V3, fm, rm *gateway.Metrics) versionResult {
	if err := op.do(ctx, c); err != nil { // warm: connection up, version settled
		b.Fatal(err)
	}
	f0, r0 := takeStats(b, fm), takeStats(b, rm)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := op.do(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// A gateway counts a message after posting it: the last reply may
	// be at the client before it is counted.
	f1, r1 := takeStats(b, fm), takeStats(b, rm)
	for i := 0; i < 1000 && f1.Work["send"]-f0.Work["send"] < f1.Calls-f0.Calls; i++ {
		time.Sleep(time.Millisecond)
		f1 = takeStats(b, fm)
	}
	res := versionResult{nsPerOp: float64(b.Elapsed().Nanoseconds()) / float64(b.N), m: map[string]float64{}}
	rpcs := f1.Calls - f0.Calls
	if rpcs <= 0 {
		b.Fatalf("%s: the forward gateway saw no calls", op.name)
	}
	w := func(s0, s1 gwstats.Snapshot, path string) float64 { return s1.Work[path] - s0.Work[path] }
	by := func(path, dir string) float64 { return f1.Bytes(path, dir) - f0.Bytes(path, dir) }
	m := res.m
	m["rpcs"] = rpcs
	m["send"] = w(f0, f1, "send") + w(r0, r1, "send")
	m["cont"] = w(f0, f1, "continuation") + w(r0, r1, "continuation")
	m["grant"] = w(f0, f1, "grant") + w(r0, r1, "grant")
	m["rdma_read"] = w(f0, f1, "read_chunk") + w(f0, f1, "long_call")
	m["write_chunk"] = w(f0, f1, "write_chunk")
	m["reply_chunk"] = w(f0, f1, "reply_chunk")
	m["reg"] = w(r0, r1, "registration")
	m["wr"] = m["send"] + m["cont"] + m["grant"] + m["rdma_read"] + m["write_chunk"] + m["reply_chunk"]
	m["B_send_call"] = by("inline", "in")
	m["B_send_reply"] = by("inline", "out")
	m["B_read"] = by("read_chunk", "in") + by("long_call", "in")
	m["B_write_chunk"] = by("write_chunk", "out")
	m["B_reply_chunk"] = by("reply_chunk", "out")
	for _, k := range versionColumns {
		if k != "rpcs" {
			m[k] /= rpcs
		}
	}
	m["rpcs"] /= float64(b.N)
	for _, k := range versionColumns {
		b.ReportMetric(m[k], k+"/rpc")
	}
	return res
}

func takeStats(b *testing.B, m *gateway.Metrics) gwstats.Snapshot {
	s, err := gwstats.Take(m.Registry)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// versionWorkloads makes the files the workloads use (a 1 MiB file, a
// 2,000-entry directory, written in the export directly) and returns
// them: GETATTR, READ and WRITE of 4 KiB to 1 MiB (READ payloads go to
// Write chunks in both versions: DDP-eligible), and the medium replies
// version one must send through a Reply chunk: READDIR and READDIRPLUS
// of the first 8 to 64 KiB of the directory.
func versionWorkloads(b *testing.B, ctx context.Context, g *nfstest.Ganesha, rev *reverse.Gateway, root []byte) []chainOp {
	if g.Dir == "" {
		b.Skip("needs a ganesha started here (RDMAGW_GANESHA gives no export directory)")
	}
	data := nfstest.Pattern(1<<20, 5)
	if err := os.WriteFile(filepath.Join(g.Dir, "v2m-file"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(g.Dir, "v2m-dir")
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range 2000 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("entry-with-a-longer-name-%05d", i)), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	t, err := nfsclient.DialTCP(ctx, rev.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer t.Close()
	c := &nfsclient.V3{T: t}
	fh, _, err := c.Lookup(ctx, root, "v2m-file")
	if err != nil {
		b.Fatal(err)
	}
	dh, _, err := c.Lookup(ctx, root, "v2m-dir")
	if err != nil {
		b.Fatal(err)
	}
	ops := []chainOp{{"getattr", func(ctx context.Context, c *nfsclient.V3) error {
		_, err := c.Getattr(ctx, fh)
		return err
	}}}
	for _, n := range []int{4 << 10, 16 << 10, 64 << 10, 1 << 20} {
		ops = append(ops, chainOp{"read-" + sizeName(n), func(ctx context.Context, c *nfsclient.V3) error {
			got, _, err := c.Read(ctx, fh, 0, uint32(n))
			if err == nil && len(got) != n {
				err = fmt.Errorf("READ %d: %d bytes", n, len(got))
			}
			return err
		}})
	}
	for _, n := range []int{4 << 10, 1 << 20} {
		ops = append(ops, chainOp{"write-" + sizeName(n), func(ctx context.Context, c *nfsclient.V3) error {
			_, err := c.Write(ctx, fh, 0, data[:n], nfsproto.Unstable)
			return err
		}})
	}
	for _, n := range []int{8 << 10, 32 << 10} {
		ops = append(ops, chainOp{"readdir-" + sizeName(n), func(ctx context.Context, c *nfsclient.V3) error {
			p, err := c.ReadDir(ctx, dh, 0, [nfsproto.VerfSize]byte{}, uint32(n))
			if err == nil && len(p.Entries) < 50 {
				err = fmt.Errorf("READDIR %d: %d entries", n, len(p.Entries))
			}
			return err
		}})
	}
	for _, n := range []int{8 << 10, 32 << 10, 64 << 10} {
		ops = append(ops, chainOp{"readdirplus-" + sizeName(n), func(ctx context.Context, c *nfsclient.V3) error {
			return readDirPlusOnce(ctx, c, dh, uint32(n))
		}})
	}
	return append(ops, aclWorkloads(b, ctx, c, root)...)
}

// aclWorkloads is NFSACL GETACL of the file (ganesha 4.3's FSAL VFS
// answers with no ACL entries, about 100 bytes, even with POSIX ACLs set
// on the file: no medium GETACL reply can be had from it); the binding
// still provisions a Reply chunk for it (RFC 8267 §4.4: GETACL replies
// cannot be bounded).
func aclWorkloads(b *testing.B, ctx context.Context, c *nfsclient.V3, root []byte) []chainOp {
	fh, _, err := c.Lookup(ctx, root, "v2m-file")
	if err != nil {
		b.Fatal(err)
	}
	getacl := func(ctx context.Context, c *nfsclient.V3) error {
		buf := make([]byte, 96)
		e := xdr.NewEncoder(buf)
		e.PutOpaque(fh)
		e.PutUint32(0xf) // NFS_ACL | NFS_ACLCNT | NFS_DFACL | NFS_DFACLCNT
		res, err := c.T.Call(ctx, ulb.ProgNFSACL, 3, 1, e.Bytes())
		if err == nil && (len(res) < 16 || res[0]|res[1]|res[2]|res[3] != 0) {
			err = fmt.Errorf("GETACL: a reply of %d bytes, status % x", len(res), res[:min(4, len(res))])
		}
		return err
	}
	if err := getacl(ctx, c); err != nil {
		b.Logf("no GETACL workload: %v", err)
		return nil
	}
	return []chainOp{{"getacl", getacl}}
}

// readDirPlusOnce makes one READDIRPLUS call from the start of dir with
// dircount = maxcount = n (nfsclient.V3.ReadDirPlus lists the whole
// directory in as many calls as it takes).
func readDirPlusOnce(ctx context.Context, c *nfsclient.V3, dir []byte, n uint32) error {
	buf := make([]byte, 128)
	e := xdr.NewEncoder(buf)
	e.PutOpaque(dir)
	e.PutUint64(0)
	e.PutFixedOpaque(make([]byte, nfsproto.VerfSize))
	e.PutUint32(n)
	e.PutUint32(n)
	if err := e.Err(); err != nil {
		return err
	}
	res, err := c.T.Call(ctx, nfsproto.ProgNFS, nfsproto.NFSVers3, nfsproto.NFS3Readdirplus, e.Bytes())
	if err != nil {
		return err
	}
	if len(res) < int(n)/2 || res[0]|res[1]|res[2]|res[3] != 0 {
		return fmt.Errorf("READDIRPLUS %d: a reply of %d bytes, status % x", n, len(res), res[:min(4, len(res))])
	}
	return nil
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dm", n>>20)
	}
	return fmt.Sprintf("%dk", n>>10)
}

// versionTable renders the medians as markdown: one row per workload and
// version.
func versionTable(ops []chainOp, results map[string][]versionResult) string {
	var sb strings.Builder
	sb.WriteString("| workload | v | ops/s | " + strings.Join(versionColumns, " | ") + " |\n|---|---|---:|")
	sb.WriteString(strings.Repeat("---:|", len(versionColumns)) + "\n")
	for _, op := range ops {
		for v := 1; v <= 2; v++ {
			rs := results[fmt.Sprintf("%s/v%d", op.name, v)]
			if len(rs) == 0 {
				continue
			}
			ns := median(rs, func(r versionResult) float64 { return r.nsPerOp })
			fmt.Fprintf(&sb, "| %s | %d | %.0f |", op.name, v, 1e9/ns)
			for _, k := range versionColumns {
				x := median(rs, func(r versionResult) float64 { return r.m[k] })
				if strings.HasPrefix(k, "B_") {
					fmt.Fprintf(&sb, " %.0f |", x)
				} else {
					fmt.Fprintf(&sb, " %.2f |", x)
				}
			}
			sb.WriteString("\n")
		}
	}
	return sb.String()
}

func median(rs []versionResult, f func(versionResult) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}
