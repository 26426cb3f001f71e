package forward_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/forward"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/xdr"
)

const (
	nfs3Rename   = 14
	nfs3ErrNoent = 2
	nfs3ErrExist = 17
)

// A client reconnects in the middle of non-idempotent calls whose
// replies were lost (the server executed them) and sends them again
// with the same XIDs, as the Linux client does after a timeout. The
// gateway keeps the backend connection for the reconnecting client, so
// nfs-ganesha's duplicate request cache answers the retransmissions with
// the original results instead of running them again (which would give
// NFS3ERR_NOENT for REMOVE and RENAME and NFS3ERR_EXIST for a GUARDED
// CREATE).
func TestForwardReconnectKeepsBackendForDRC(t *testing.T) {
	g := nfstest.StartGanesha(t)
	if g.Dir == "" {
		t.Skip("external ganesha: its directory cannot be checked")
	}
	px := startProxy(t, g.NFSAddr)
	gw := startGateway(t, px.addr(), nil) // the default reconnect_grace
	root := mount3(t, g.MountAddr, g.Export)
	c1 := dialRDMA(t, gw.Addr().String())
	n := &nfs3{c: c1, t: t}
	n.create(root, "doomed")
	n.create(root, "from")

	sattrNone := new(enc).u32(0).u32(0).u32(0).u32(0).u32(0).u32(0).b // sattr3: nothing set
	calls := []struct {
		what string
		proc uint32
		args []byte
		xid  uint32
	}{
		{"REMOVE doomed", nfs3Remove, new(enc).opaque(root).str("doomed").b, 0},
		{"RENAME from to", nfs3Rename, new(enc).opaque(root).str("from").opaque(root).str("to").b, 0},
		{"CREATE GUARDED fresh", nfs3Create, append(new(enc).opaque(root).str("fresh").u32(1).b, sattrNone...), 0},
	}
	for i := range calls {
		calls[i].xid = testXID.Add(1)
	}
	px.hold.Store(true) // the server executes them; the replies are lost
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c1.callRaw(ctx, call.xid, gwtest.EncodeCall(call.xid, ulb.ProgNFS, 3, call.proc, call.args))
		}()
	}
	exists := func(name string) bool { _, err := os.Stat(filepath.Join(g.Dir, name)); return err == nil }
	gwtest.WaitFor(t, 20*time.Second, "the server to execute the calls", func() bool {
		return !exists("doomed") && !exists("from") && exists("to") && exists("fresh")
	})
	// The client's transport goes; a new one from the same address
	// sends the same calls again.
	cancel()
	c1.close()
	wg.Wait()
	m := gw.Metrics()
	gwtest.WaitFor(t, 10*time.Second, "the backend connection to be parked", func() bool {
		return gwtest.Metric(t, m, "rdmagw_backend_connections_parked") == 1
	})
	px.hold.Store(false)
	c2 := dialRDMA(t, gw.Addr().String())
	for _, call := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		rep, err := c2.callRaw(ctx, call.xid, gwtest.EncodeCall(call.xid, ulb.ProgNFS, 3, call.proc, call.args))
		cancel()
		if err != nil {
			t.Fatalf("%s sent again: %v", call.what, err)
		}
		var h oncrpc.ReplyHeader
		hl, err := h.Decode(rep)
		if err != nil || h.AcceptStat != oncrpc.Success {
			t.Fatalf("%s sent again: reply %+v, %v", call.what, h, err)
		}
		d := xdr.NewDecoder(rep[hl:])
		if st, _ := d.Uint32(); st != 0 {
			t.Errorf("%s sent again: nfsstat3 %d, want NFS3_OK from the duplicate request cache (%d: NOENT, %d: EXIST: executed twice)",
				call.what, st, nfs3ErrNoent, nfs3ErrExist)
		}
	}
	if v := gwtest.Metric(t, m, "rdmagw_backend_connections_kept_total"); v != 1 {
		t.Errorf("backend connections kept = %v, want 1", v)
	}
	if v := gwtest.Metric(t, m, "rdmagw_backend_connections_parked"); v != 0 {
		t.Errorf("backend connections parked = %v after the client came back", v)
	}
	if ports := px.ports(); len(ports) != 1 {
		t.Errorf("backend connections from source ports %v: want one, kept across the client's reconnect", ports)
	}
}

// With reconnect_grace 0 the backend connection ends with the client's;
// a parked one not taken up is closed when its grace runs out.
func TestForwardParkedBackendExpires(t *testing.T) {
	g := nfstest.StartGanesha(t)
	px := startProxy(t, g.NFSAddr)
	gw := startGateway(t, px.addr(), func(c *gateway.Config) { c.Backend.ReconnectGrace = 200 * time.Millisecond })
	c := dialRDMA(t, gw.Addr().String())
	if err := null3(c, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	c.close()
	m := gw.Metrics()
	gwtest.WaitFor(t, 10*time.Second, "the backend connection to be parked", func() bool {
		return gwtest.Metric(t, m, "rdmagw_backend_connections_parked") == 1
	})
	gwtest.WaitFor(t, 10*time.Second, "the parked connection to expire", func() bool {
		return gwtest.Metric(t, m, "rdmagw_backend_connections_parked") == 0
	})
	c2 := dialRDMA(t, gw.Addr().String())
	if err := null3(c2, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if v := gwtest.Metric(t, m, "rdmagw_backend_connections_kept_total"); v != 0 {
		t.Errorf("kept = %v after the grace ran out", v)
	}
	if ports := px.ports(); len(ports) != 2 {
		t.Errorf("backend connections %v: want a new one after the grace", ports)
	}
}

// A client that reconnects again and again keeps one backend connection
// throughout: parking never closes it, and every reconnect takes it over.
func TestForwardParkedBackendKeptAcrossManyReconnects(t *testing.T) {
	g := nfstest.StartGanesha(t)
	px := startProxy(t, g.NFSAddr)
	gw := startGateway(t, px.addr(), nil)
	m := gw.Metrics()
	const rounds = 15
	for i := range rounds {
		c := dialRDMA(t, gw.Addr().String())
		if err := null3(c, 10*time.Second); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		c.close()
		gwtest.WaitFor(t, 10*time.Second, "the backend connection to be parked", func() bool {
			return gwtest.Metric(t, m, "rdmagw_backend_connections_parked") == 1
		})
	}
	if v := gwtest.Metric(t, m, "rdmagw_backend_connections_kept_total"); v != rounds-1 {
		t.Errorf("kept = %v, want %d", v, rounds-1)
	}
	if v := gwtest.Metric(t, m, "rdmagw_backend_reconnects_total"); v != 0 {
		t.Errorf("backend reconnects = %v: a kept connection was found closed", v)
	}
	if ports := px.ports(); len(ports) != 1 {
		t.Errorf("backend connections %v, want one", ports)
	}
}

// The Linux client's reconnect can reach the gateway while the old
// connection's session is still draining: the provider has seen the
// disconnect, the session has not parked yet. The reconnect must wait
// for it and take the kept backend connection over, not dial a new one
// (lab case 21-drc-reconnect failed so: "backend_kept=false" right after
// a disconnect, and knfsd's duplicate request cache missed).
func TestForwardReconnectDuringTeardownKeepsBackend(t *testing.T) {
	served := make(chan struct{}, 4)
	release := make(chan struct{})
	var hold atomic.Bool
	restore := forward.SetServedHook(func() {
		if hold.Load() {
			served <- struct{}{}
			<-release
		}
	})
	t.Cleanup(restore) // registered before the gateway's: runs after it (LIFO)
	g := nfstest.StartGanesha(t)
	px := startProxy(t, g.NFSAddr)
	gw := startGateway(t, px.addr(), nil)
	m := gw.Metrics()
	c1 := dialRDMA(t, gw.Addr().String())
	if err := null3(c1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	hold.Store(true)
	c1.close()
	select {
	case <-served: // the old session's transport has ended; it is not parked
	case <-time.After(20 * time.Second):
		t.Fatal("the first session did not see its client go")
	}
	hold.Store(false)
	go func() {
		time.Sleep(300 * time.Millisecond) // the reconnect's claim runs meanwhile
		close(release)
	}()
	c2 := dialRDMA(t, gw.Addr().String())
	if err := null3(c2, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if v := gwtest.Metric(t, m, "rdmagw_backend_connections_kept_total"); v != 1 {
		t.Errorf("backend connections kept = %v, want 1: the reconnect did not wait for the old session to park", v)
	}
	if v := gwtest.Metric(t, m, "rdmagw_backend_connection_waits_total", "outcome", "kept"); v != 1 {
		t.Errorf("connection waits (kept) = %v, want 1", v)
	}
	if ports := px.ports(); len(ports) != 1 {
		t.Errorf("backend connections from source ports %v: want one, kept across the reconnect", ports)
	}
}

// A client that reconnects right after its old transport's backend
// connection was parked, before that transport's goroutine is done,
// takes the parked session and must stay in the client table (live view,
// drain) when the old transport's goroutine finishes.
func TestForwardReconnectRightAfterParkStaysListed(t *testing.T) {
	parked := make(chan struct{}, 4)
	release := make(chan struct{})
	var hold atomic.Bool
	restore := forward.SetParkedHook(func() {
		if hold.Load() {
			parked <- struct{}{}
			<-release
		}
	})
	t.Cleanup(restore) // registered before the gateway's: runs after it (LIFO)
	g := nfstest.StartGanesha(t)
	gw := startGateway(t, g.NFSAddr, nil)
	m := gw.Metrics()
	c1 := dialRDMA(t, gw.Addr().String())
	if err := null3(c1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	perClient := gwtest.Metric(t, m, "rdmagw_credits_granted")
	hold.Store(true)
	c1.close()
	select {
	case <-parked: // the old transport parked its backend and has not returned
	case <-time.After(20 * time.Second):
		t.Fatal("the first session did not park")
	}
	hold.Store(false)
	c2 := dialRDMA(t, gw.Addr().String())
	if err := null3(c2, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if v := gwtest.Metric(t, m, "rdmagw_backend_connections_kept_total"); v != 1 {
		t.Fatalf("backend connections kept = %v, want 1: the reconnect did not take the parked session", v)
	}
	close(release)
	gwtest.WaitFor(t, 10*time.Second, "the old transport's goroutine to finish", func() bool {
		return gwtest.Metric(t, m, "rdmagw_credits_granted") == perClient
	})
	if n := len(gw.Sessions().Clients); n != 1 {
		t.Errorf("%d clients in the live view after the old transport finished, want 1 (the reconnected one)", n)
	}
	if err := null3(c2, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}
