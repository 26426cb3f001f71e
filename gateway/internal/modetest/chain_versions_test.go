package modetest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/forward/forwardtest"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/gateway/metricname"
	"github.com/rdmagw/rdmagw/internal/gwstats"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/ulb"
)

// The host chain in each RPC-over-RDMA version pairing (issue 15):
//
//	TCP client -> reverse (backend.rdma_version) -> forward (rdma.versions) -> nfs-ganesha
//
// v2: both sides speak version two (the defaults); rev1: the reverse side
// forced to version one against a forward that accepts both; fwd1: the
// reverse side on auto against a forward that accepts version one only,
// so it falls back on ERR_VERS once and remembers. Each carries NFSv3
// files of every size (64 MiB once per pairing, not with -short), the
// namespace procedures, a 2,000-entry READDIRPLUS and NFSv4.1 files, byte
// for byte, and both gateways' metrics show the version.
func TestChainVersions(t *testing.T) {
	g := nfstest.StartGanesha(t)
	for _, p := range []struct {
		name     string
		rev      string // backend.rdma_version of the reverse gateway
		fwd      []int  // rdma.versions of the forward gateway
		want     uint32
		fellBack bool
	}{
		{"v2", "auto", []int{1, 2}, 2, false},
		{"rev1", "1", []int{1, 2}, 1, false},
		{"fwd1", "auto", []int{1}, 1, true},
	} {
		t.Run(p.name, func(t *testing.T) {
			fwd := forwardtest.StartWith(t, g.NFSAddr, func(c *gateway.Config) {
				c.Log.Level = "warn"
				c.RDMA.Versions = p.fwd
			}, gwtest.TestLog(t))
			rev := startReverse(t, fwd.Addr().String(), func(c *gateway.Config) { c.Backend.RDMAVersion = p.rev })
			ch := &chain{g: g, fwd: fwd, rev: rev}
			ctx := nfstest.Ctx(t)
			c, root := ch.v3(t, ctx)
			dir, err := c.Mkdir(ctx, root, p.name, 0o755)
			if err != nil {
				t.Fatalf("MKDIR %s: %v", p.name, err)
			}
			disk := filepath.Join(g.Dir, p.name)
			sizes := append([]int(nil), nfstest.Sizes...)
			if !testing.Short() {
				sizes = append(sizes, 64<<20)
			}
			for _, size := range sizes {
				name := fmt.Sprintf("v3-%d", size)
				t.Run(name, func(t *testing.T) { nfstest.V3RoundTrip(t, ctx, c, dir, name, size, nfsproto.Unstable, disk) })
			}
			t.Run("v3-namespace", func(t *testing.T) { nfstest.V3Namespace(t, ctx, c, dir) })
			// 32 KiB READDIRPLUS replies: version one needs the Reply
			// chunk for them, version two continues them.
			t.Run("v3-readdirplus-2000", func(t *testing.T) { readDirPlus2000(t, ctx, c, dir, disk, 32<<10) })
			t.Run("v41", func(t *testing.T) { chainV41Files(t, ctx, ch, g.Export+"/"+p.name, disk) })

			// MOUNT has no version-two binding: on a v2 link the reverse
			// gateway answers PROG_UNAVAIL itself; on v1 it forwards it.
			_, err = c.T.Call(ctx, ulb.ProgMount, 3, 0, nil)
			st, accepted := nfsclient.AcceptStat(err)
			refused := gwtest.Metric(t, rev.Metrics(), metricname.GatewayErrorRepliesTotal, "reason", "no_v2_binding")
			if v2 := p.want == rdmarpc.V2Version; v2 && (!accepted || st != oncrpc.ProgUnavail || refused != 1) || !v2 && refused != 0 {
				t.Errorf("MOUNT NULL over version %d: %v, %v refused by the reverse gateway", p.want, err, refused)
			}

			// Two TCP clients, two RDMA connections, each in the
			// pairing's version at both ends; a fallback only on the
			// first (the server's version is remembered after it).
			other := 3 - p.want
			for _, m := range []struct {
				side string
				met  *gateway.Metrics
			}{{"forward", fwd.Metrics()}, {"reverse", rev.Metrics()}} {
				got := gwtest.Metric(t, m.met, metricname.RDMAConnectionsByVersionTotal, "version", fmt.Sprint(p.want))
				if got != 2 || gwtest.Metric(t, m.met, metricname.RDMAConnectionsByVersionTotal, "version", fmt.Sprint(other)) != 0 {
					t.Errorf("%s: %v connections in version %d, want 2 and none in %d", m.side, got, p.want, other)
				}
			}
			fb, vers := 0.0, 0.0
			if p.fellBack {
				fb, vers = 1, 1
			}
			if got := gwtest.Metric(t, rev.Metrics(), metricname.RDMAVersionFallbacksTotal); got != fb {
				t.Errorf("reverse: %v fallbacks, want %v", got, fb)
			}
			if got := gwtest.Metric(t, fwd.Metrics(), metricname.RDMAErrorsSentTotal, "code", rdmarpc.ErrCodeVers.String()); got != vers {
				t.Errorf("forward: %v ERR_VERS answers, want %v", got, vers)
			}
			// Medium replies: through the Reply chunk in version one,
			// by continuation in version two (NFS ULB v2: no Reply
			// chunk provisioned for them).
			rs, _ := gwstats.Take(rev.Metrics().Registry)
			cont := gwtest.Metric(t, fwd.Metrics(), metricname.RDMAWorkRequestsTotal, "path", "continuation")
			if v2 := p.want == rdmarpc.V2Version; v2 != (rs.Bytes("reply_chunk", "in") == 0) || v2 != (cont > 0) {
				t.Errorf("version %d: %v bytes came through the Reply chunk, %v continuation Sends", p.want, rs.Bytes("reply_chunk", "in"), cont)
			}
		})
	}
}

// readDirPlus2000 lists a directory of 2,000 entries with maxcount and
// checks the names against the server's disk.
func readDirPlus2000(t *testing.T, ctx context.Context, c *nfsclient.V3, parent []byte, disk string, maxcount uint32) {
	dir, err := c.Mkdir(ctx, parent, "big", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	for i := range n {
		if _, err := c.Create(ctx, dir, fmt.Sprintf("file-%05d", i), nfsproto.CreateGuarded, nfsproto.Sattr3{SetMode: true, Mode: 0o644}); err != nil {
			t.Fatalf("CREATE %d: %v", i, err)
		}
	}
	ents, err := c.ReadDirPlus(ctx, dir, maxcount)
	if err != nil {
		t.Fatalf("READDIRPLUS: %v", err)
	}
	var names []string
	for _, e := range ents {
		if e.Name != "." && e.Name != ".." {
			if e.FH == nil || e.Attr == nil {
				t.Fatalf("entry %q without handle or attributes", e.Name)
			}
			names = append(names, e.Name)
		}
	}
	sort.Strings(names)
	onDisk, err := os.ReadDir(filepath.Join(disk, "big"))
	if err != nil || len(onDisk) != n || len(names) != n {
		t.Fatalf("READDIRPLUS listed %d entries, the disk has %d (%v)", len(names), len(onDisk), err)
	}
	for i, e := range onDisk { // os.ReadDir sorts by name
		if names[i] != e.Name() {
			t.Fatalf("entry %d: %q listed, %q on disk", i, names[i], e.Name())
		}
	}
}

// chainV41Files round-trips files of every size over NFSv4.1 through the
// chain, in the directory at path.
func chainV41Files(t *testing.T, ctx context.Context, ch *chain, path, disk string) {
	tr, err := nfsclient.DialTCP(ctx, ch.rev.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	c := &nfsclient.V4{T: tr}
	if err := c.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	dir, a, err := c.LookupPath(ctx, path)
	if err != nil || a.Type != 2 {
		t.Fatalf("LookupPath %s: %+v %v", path, a, err)
	}
	for _, size := range nfstest.Sizes {
		name := fmt.Sprintf("v41-%d", size)
		t.Run(name, func(t *testing.T) { nfstest.V4RoundTrip(t, ctx, c, dir, name, size, disk) })
	}
	if err := c.DestroySession(ctx); err != nil {
		t.Fatal(err)
	}
}
