package modetest_test

import (
	"context"
	"testing"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/oncrpc"
)

// A gateway stands in for the server, so a client must see what the
// gateway can carry, not the server's larger transfer sizes: through the
// chain (TCP client -> reverse -> iWARP -> forward -> ganesha) NFSv3
// FSINFO, NFSv4 GETATTR of maxread/maxwrite and NFSv4.1 CREATE_SESSION
// show the gateways' 1 MiB (default pool and record limits) where
// ganesha, asked directly, advertises more.
func TestReverseChainAdvertisesCarryLimits(t *testing.T) {
	ch := startChain(t)
	ctx := nfstest.Ctx(t)
	rc, fc := gateway.DefaultConfigFor("reverse"), gateway.DefaultConfigFor("forward")
	lim := rc.CarryLimits()
	if f := fc.CarryLimits(); f.MaxRead != 1<<20 || f.MaxWrite != 1<<20 || lim.MaxRead != 1<<20 || lim.MaxWrite != 1<<20 {
		t.Fatalf("default carry limits: forward %+v reverse %+v", f, lim)
	}
	c, root := ch.v3(t, ctx)
	own := ganeshaFsinfo(t, ctx, ch, root)
	if own.RTMax <= 1<<20 || own.WTMax <= 1<<20 {
		t.Fatalf("ganesha advertises rtmax %d wtmax %d: nothing to cap", own.RTMax, own.WTMax)
	}
	fi, err := c.Fsinfo(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if fi.RTMax != 1<<20 || fi.WTMax != 1<<20 || fi.RTPref > 1<<20 || fi.WTPref > 1<<20 {
		t.Errorf("FSINFO through the chain: %+v (ganesha's own: %+v)", fi, own)
	}
	if fi.MaxFileSize != own.MaxFileSize || fi.RTMult != own.RTMult || fi.Properties != own.Properties {
		t.Errorf("FSINFO fields besides the sizes changed: %+v, ganesha's %+v", fi, own)
	}

	// Forward mode alone (RDMA client -> forward -> ganesha) caps too.
	rt := nfstest.DialRDMA(t, ctx, ch.fwd.Addr().String())
	if fi, err := (&nfsclient.V3{T: rt}).Fsinfo(ctx, root); err != nil || fi.RTMax != 1<<20 || fi.WTMax != 1<<20 {
		t.Errorf("FSINFO through the forward gateway alone: %+v %v", fi, err)
	}

	tr, err := nfsclient.DialTCP(ctx, ch.rev.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	v4 := &nfsclient.V4{T: tr}
	if err := v4.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if v4.ForeMaxRequest > uint32(lim.MaxRequest) || v4.ForeMaxResponse > uint32(lim.MaxResponse) || v4.ForeMaxRequest == 0 {
		t.Errorf("CREATE_SESSION fore channel: maxrequestsize %d maxresponsesize %d, gateway carries %d/%d",
			v4.ForeMaxRequest, v4.ForeMaxResponse, lim.MaxRequest, lim.MaxResponse)
	}
	dir, _, err := v4.LookupPath(ctx, ch.g.Export)
	if err != nil {
		t.Fatal(err)
	}
	mr, mw, err := v4.TransferLimits(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if mr != 1<<20 || mw != 1<<20 {
		t.Errorf("GETATTR maxread %d maxwrite %d through the chain, want 1 MiB each", mr, mw)
	}
	t.Logf("ganesha: rtmax %d wtmax %d; through the chain: FSINFO %d/%d, maxread/maxwrite %d/%d, session %d/%d",
		own.RTMax, own.WTMax, fi.RTMax, fi.WTMax, mr, mw, v4.ForeMaxRequest, v4.ForeMaxResponse)
	if err := v4.DestroySession(ctx); err != nil {
		t.Fatal(err)
	}
}

// A client that ignores the advertised wtmax and WRITEs as much as the
// server itself accepts (ganesha: 64 MiB) sends a call record the reverse
// gateway cannot carry (reverse.max_call_bytes): it gets GARBAGE_ARGS,
// the record is skipped, and the same connection goes on working. It
// used to be reset ("record exceeds size limit").
func TestReverseChainOversizeWriteAnswered(t *testing.T) {
	ch := startChain(t)
	ctx := nfstest.Ctx(t)
	c, root := ch.v3(t, ctx)
	fh, err := c.Create(ctx, root, "oversize", nfsproto.CreateUnchecked, nfsproto.Sattr3{SetMode: true, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	own := ganeshaFsinfo(t, ctx, ch, root)
	for _, size := range []int{2 << 20, int(own.WTMax)} {
		_, err := c.Write(ctx, fh, 0, nfstest.Pattern(size, 3), nfsproto.FileSync)
		if st, ok := nfsclient.AcceptStat(err); !ok || st != oncrpc.GarbageArgs {
			t.Fatalf("WRITE of %d bytes: %v, want GARBAGE_ARGS", size, err)
		}
		// The connection is still up: a WRITE the gateway carries works.
		data := nfstest.Pattern(1<<20, 4)
		if _, err := c.Write(ctx, fh, 0, data, nfsproto.FileSync); err != nil {
			t.Fatalf("WRITE after the refused one: %v", err)
		}
		got, _, err := c.Read(ctx, fh, 0, 1<<20)
		if err != nil || nfstest.FirstDiff(got, data) >= 0 {
			t.Fatalf("READ back after the refused WRITE: %v", err)
		}
	}
	if n := gwtest.Metric(t, ch.rev.Metrics(), "rdmagw_gateway_error_replies_total", "reason", "call_too_large"); n != 2 {
		t.Errorf("call_too_large answers counted: %v, want 2", n)
	}
	t.Logf("ganesha wtmax %d: WRITEs of 2 MiB and %d bytes answered GARBAGE_ARGS, connection kept", own.WTMax, own.WTMax)
}

// ganeshaFsinfo asks ganesha itself, not through the chain.
func ganeshaFsinfo(t *testing.T, ctx context.Context, ch *chain, root []byte) nfsclient.FSInfo {
	t.Helper()
	direct, err := nfsclient.DialTCP(ctx, ch.g.NFSAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	own, err := (&nfsclient.V3{T: direct}).Fsinfo(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	return own
}
