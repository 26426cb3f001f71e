package nfsclient_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/rdmagw/rdmagw/gateway/forward/forwardtest"
	"github.com/rdmagw/rdmagw/internal/gwstats"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfstest"
)

// v4Suite sets up a session on t, resolves the export and round-trips
// every test size, then destroys the session.
func v4Suite(t *testing.T, ctx context.Context, tr nfsclient.Transport, g *nfstest.Ganesha) {
	c := &nfsclient.V4{T: tr}
	if err := c.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	dir, a, err := c.LookupPath(ctx, g.Export)
	if err != nil || a.Type != 2 {
		t.Fatalf("LookupPath %s: %+v %v", g.Export, a, err)
	}
	for _, size := range nfstest.Sizes {
		name := fmt.Sprintf("v4-%d", size)
		t.Run(name, func(t *testing.T) { nfstest.V4RoundTrip(t, ctx, c, dir, name, size, g.Dir) })
	}
	if _, _, err := c.LookupPath(ctx, g.Export+"/no-such-file"); err == nil {
		t.Fatal("LOOKUP of a missing name succeeded")
	}
	if err := c.DestroySession(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestV41GaneshaTCP(t *testing.T) {
	g := nfstest.StartGanesha(t)
	ctx := nfstest.Ctx(t)
	tr, err := nfsclient.DialTCP(ctx, g.NFSAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	v4Suite(t, ctx, tr, g)
}

// TestV41GaneshaRDMA runs the same NFSv4.1 suite over RPC-over-RDMA
// through rdmagw: COMPOUND READ results land in Write chunks, WRITE data
// travels in Read chunks.
func TestV41GaneshaRDMA(t *testing.T) {
	g := nfstest.StartGanesha(t)
	gw := forwardtest.Start(t, g.NFSAddr)
	ctx := nfstest.Ctx(t)
	tr := nfstest.DialRDMA(t, ctx, gw.Addr().String())
	v4Suite(t, ctx, tr, g)

	// A COMPOUND too big to send inline (many long LOOKUP components)
	// goes as a Long Call; the answer is an ordinary NFS4ERR_NOENT.
	c := &nfsclient.V4{T: tr}
	if err := c.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	long := g.Export
	for i := range 24 {
		long += fmt.Sprintf("/%0200d", i)
	}
	if _, _, err := c.LookupPath(ctx, long); !errors.Is(err, nfsclient.NFS4ErrNoEnt) {
		t.Fatalf("long LOOKUP: %v, want NFS4ERR_NOENT", err)
	}
	snap, err := gwstats.Take(gw.Metrics().Registry)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Bytes("long_call", "in") == 0 || snap.Bytes("write_chunk", "out") == 0 || snap.Bytes("read_chunk", "in") == 0 {
		t.Fatalf("bytes by path: %+v", snap.Paths)
	}
}
