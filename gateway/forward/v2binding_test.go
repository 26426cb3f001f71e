package forward_test

import (
	"slices"
	"testing"

	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/gateway/metricname"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/ulb"
)

// The NFS binding for RPC-over-RDMA version two binds no MOUNT, NLM or
// NSM (draft-ietf-nfsv4-nfs-ulb-v2: they go over TCP): over version two
// the gateway answers their calls PROG_UNAVAIL itself and forwards none;
// NFS goes on as usual. Over version one they are forwarded as before.
func TestForwardV2NoBindingForMountNLMNSM(t *testing.T) {
	g := nfstest.StartGanesha(t)
	gw := startGateway(t, g.NFSAddr, nil)
	m := gw.Metrics()
	ctx := nfstest.Ctx(t)
	dev := nfstest.OpenIWARP(t, "127.0.0.1")
	for _, c := range []struct {
		name  string
		mode  rdmarpc.VersionMode
		vers  uint32
		calls float64 // refused so far
	}{{"v2", rdmarpc.VersionV2, 2, 3}, {"v1", rdmarpc.VersionV1, 1, 3}} {
		tr, err := nfsclient.DialRDMA(ctx, dev, gw.Addr().String(), rdmarpc.RequesterConfig{Credits: 8, Version: c.mode})
		if err != nil {
			t.Fatal(err)
		}
		if tr.Conn().Version() != c.vers {
			t.Fatalf("%s: connection speaks version %d", c.name, tr.Conn().Version())
		}
		if _, err := tr.Call(ctx, ulb.ProgNFS, 3, 0, nil); err != nil {
			t.Fatalf("%s: NFS NULL: %v", c.name, err)
		}
		for _, p := range []struct{ prog, vers uint32 }{{ulb.ProgMount, 3}, {ulb.ProgNLM, 4}, {ulb.ProgNSM, 1}} {
			_, err := tr.Call(ctx, p.prog, p.vers, 0, nil)
			st, accepted := nfsclient.AcceptStat(err)
			if c.vers == 2 && (!accepted || st != oncrpc.ProgUnavail) {
				t.Errorf("%s: program %d NULL: %v, want PROG_UNAVAIL from the gateway", c.name, p.prog, err)
			}
		}
		tr.Close()
		if got := gwtest.Metric(t, m, metricname.CallsDroppedTotal, "reason", "no_v2_binding"); got != c.calls {
			t.Errorf("%s: %v calls refused for want of a version-two binding, want %v", c.name, got, c.calls)
		}
	}
}

// rdma.versions changes on reload for the connections made after it: a
// connection made before keeps version two, the next auto requester is
// answered ERR_VERS and continues in version one.
func TestForwardRDMAVersionsReload(t *testing.T) {
	g := nfstest.StartGanesha(t)
	gw := startGateway(t, g.NFSAddr, nil)
	ctx := nfstest.Ctx(t)
	dev := nfstest.OpenIWARP(t, "127.0.0.1")
	dial := func() *nfsclient.RDMA {
		t.Helper()
		tr, err := nfsclient.DialRDMA(ctx, dev, gw.Addr().String(),
			rdmarpc.RequesterConfig{Credits: 8, Version: rdmarpc.VersionAuto, VersionMemory: new(rdmarpc.VersionMemory)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	before := dial()
	next := *gw.Config()
	next.RDMA.Versions = []int{1}
	res, err := gw.Reconfigure(&next)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.NewConnections, "rdma.versions") {
		t.Fatalf("reload result %+v: want rdma.versions for new connections", res)
	}
	after := dial()
	for _, c := range []struct {
		tr       *nfsclient.RDMA
		vers     uint32
		fellBack bool
	}{{before, 2, false}, {after, 1, true}} {
		if _, err := c.tr.Call(ctx, ulb.ProgNFS, 3, 0, nil); err != nil {
			t.Fatal(err)
		}
		if c.tr.Conn().Version() != c.vers || c.tr.Conn().FellBack() != c.fellBack {
			t.Errorf("connection speaks version %d (fell back %v), want %d (%v)", c.tr.Conn().Version(), c.tr.Conn().FellBack(), c.vers, c.fellBack)
		}
	}
	m := gw.Metrics()
	if gwtest.Metric(t, m, metricname.RDMAConnectionsByVersionTotal, "version", "2") != 1 ||
		gwtest.Metric(t, m, metricname.RDMAConnectionsByVersionTotal, "version", "1") != 1 {
		t.Error("rdmagw_rdma_connections_by_version_total: want one connection in each version")
	}
}
