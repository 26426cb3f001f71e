package nfsclient_test

import (
	"fmt"
	"testing"

	"github.com/rdmagw/rdmagw/gateway/forward/forwardtest"
	"github.com/rdmagw/rdmagw/internal/gwstats"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsmem"
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/internal/nfstest"
)

// TestRDMAThroughGatewayToMem runs the NFSv3 suite over RPC-over-RDMA:
// our RDMA transport → rdmagw (pure-Go iWARP) → nfsmem over TCP. MOUNT
// goes through the gateway too (nfsmem serves it on the NFS port).
func TestRDMAThroughGatewayToMem(t *testing.T) {
	s := nfsmem.New(nfsmem.Config{})
	addr, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gw := forwardtest.Start(t, addr.String())
	ctx := nfstest.Ctx(t)
	tr := nfstest.DialRDMA(t, ctx, gw.Addr().String())
	root, _, err := (&nfsclient.Mount{T: tr}).Mnt(ctx, "/")
	if err != nil {
		t.Fatalf("MNT over RDMA: %v", err)
	}
	c := &nfsclient.V3{T: tr}
	for _, stable := range []uint32{nfsproto.Unstable, nfsproto.FileSync} {
		for _, size := range nfstest.Sizes {
			name := fmt.Sprintf("f-%d-%d", stable, size)
			t.Run(name, func(t *testing.T) { nfstest.V3RoundTrip(t, ctx, c, root, name, size, stable, "") })
		}
	}
	t.Run("namespace", func(t *testing.T) { nfstest.V3Namespace(t, ctx, c, root) })

	// A listing too big for the inline receive buffer comes back through
	// the Reply chunk.
	dir, err := c.Mkdir(ctx, root, "big", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := c.Create(ctx, dir, fmt.Sprintf("a-rather-long-file-name-%04d", i), nfsproto.CreateGuarded, nfsproto.Sattr3{}); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := c.ReadDirPlus(ctx, dir, 64<<10)
	if err != nil || len(ents) != 202 {
		t.Fatalf("READDIRPLUS: %d entries, %v", len(ents), err)
	}

	snap, err := gwstats.Take(gw.Metrics().Registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ path, dir string }{
		{"read_chunk", "in"}, {"write_chunk", "out"}, {"reply_chunk", "out"}, {"inline", "in"}, {"inline", "out"},
	} {
		if snap.Bytes(p.path, p.dir) == 0 {
			t.Errorf("no bytes went by %s/%s: %+v", p.path, p.dir, snap.Paths)
		}
	}
	// Every WRITE payload above went by Read chunk, every READ by Write
	// chunk: at least the 1 MiB files, written and read twice.
	if got := snap.Bytes("write_chunk", "out"); got < 2<<20 {
		t.Errorf("write_chunk bytes %v, want at least 2 MiB", got)
	}
}

// TestRDMAThroughGatewayToGanesha is the same against nfs-ganesha, with
// MOUNT over plain TCP (ganesha serves it on its own port) and the file
// contents checked on ganesha's disk too.
func TestRDMAThroughGatewayToGanesha(t *testing.T) {
	g := nfstest.StartGanesha(t)
	gw := forwardtest.Start(t, g.NFSAddr)
	ctx := nfstest.Ctx(t)
	root := nfstest.MountRoot(t, ctx, g.MountAddr, g.Export)
	c := &nfsclient.V3{T: nfstest.DialRDMA(t, ctx, gw.Addr().String())}
	for _, size := range nfstest.Sizes {
		name := fmt.Sprintf("r-%d", size)
		t.Run(name, func(t *testing.T) { nfstest.V3RoundTrip(t, ctx, c, root, name, size, nfsproto.Unstable, g.Dir) })
	}
	t.Run("namespace", func(t *testing.T) { nfstest.V3Namespace(t, ctx, c, root) })
}
