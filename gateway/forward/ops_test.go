package forward_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/forward"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/ulb"
)

// pause closes (true) or opens (false) the proxy's reply gate.
func (p *proxy) pause(on bool) {
	p.gateMu.Lock()
	defer p.gateMu.Unlock()
	switch {
	case on && p.gate == nil:
		p.gate = make(chan struct{})
	case !on && p.gate != nil:
		close(p.gate)
		p.gate = nil
	}
}

func (p *proxy) waitGate() {
	p.gateMu.Lock()
	ch := p.gate
	p.gateMu.Unlock()
	if ch != nil {
		<-ch
	}
}

// forwardWithFile starts ganesha behind a proxy and a forward gateway, and
// writes a verified file through it.
func forwardWithFile(t *testing.T, data []byte) (*proxy, *forward.Gateway, *nfs3, []byte) {
	g := nfstest.StartGanesha(t)
	gt := startProxy(t, g.NFSAddr)
	t.Cleanup(func() { gt.pause(false) })
	gw := startGateway(t, gt.addr(), nil)
	c := dialRDMA(t, gw.Addr().String())
	n := &nfs3{c: c, t: t}
	root := mount3(t, g.MountAddr, g.Export)
	name := "drain-" + t.Name()
	fh := n.create(root, name)
	n.writeFile(fh, data, 64<<10)
	n.commit(fh)
	if got := n.readFile(fh, 64<<10); !bytes.Equal(got, data) {
		t.Fatalf("file read back differs from what was written")
	}
	return gt, gw, n, fh
}

// readAsync sends a READ and returns its reply (or error) on a channel.
func readAsync(n *nfs3, fh []byte, off uint64, count int) chan []byte {
	out := make(chan []byte, 1)
	go func() {
		rep, err := n.c.call(context.Background(), ulb.ProgNFS, 3, nfs3Read,
			new(enc).opaque(fh).u64(off).u32(uint32(count)).b, nil, nil)
		if err != nil {
			rep = nil
		}
		out <- rep
	}()
	return out
}

// readReplyData decodes a READ reply's data.
func readReplyData(t *testing.T, rep []byte) []byte {
	t.Helper()
	d := results(t, rep)
	status(t, d, "READ")
	skipPostOpAttr(d)
	d.Uint32()
	d.Bool()
	data, err := d.Opaque(-1)
	if err != nil {
		t.Fatalf("READ data: %v", err)
	}
	return data
}

// Calls in flight when a drain begins get their replies, verified byte
// for byte, before the client is disconnected; the drain reports nothing
// abandoned and the gateway's Serve returns.
func TestForwardDrainAnswersCallsInFlight(t *testing.T) {
	data := pattern(256<<10, 7)
	gt, gw, n, fh := forwardWithFile(t, data)
	cl := gwtest.SessionsOf(t, gw.Sessions, 1, "one client listed")[0]
	if cl.Mode != "forward" || cl.BytesIn == 0 {
		t.Errorf("session before drain: %+v", cl)
	}
	// The engine counts a reply's bytes after posting its Send, so the
	// client may hold the last reply before the count moves.
	gwtest.WaitFor(t, 10*time.Second, "the file's bytes counted out", func() bool {
		s := gw.Sessions()
		return len(s.Clients) == 1 && s.Clients[0].BytesOut >= uint64(len(data))
	})

	gt.pause(true)
	const calls = 4
	var replies []chan []byte
	for i := range calls {
		replies = append(replies, readAsync(n, fh, uint64(i)*(64<<10), 64<<10))
	}
	gwtest.WaitFor(t, 10*time.Second, "calls in flight at the backend", func() bool {
		s := gw.Sessions()
		return len(s.Clients) == 1 && s.Clients[0].CallsInFlight == calls
	})

	drained := make(chan gateway.DrainResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		drained <- gw.Drain(ctx)
	}()
	gwtest.WaitFor(t, 10*time.Second, "the drain to start", func() bool { return gw.Sessions().Draining })
	if v := gwtest.Metric(t, gw.Metrics(), "rdmagw_draining"); v != 1 {
		t.Errorf("rdmagw_draining = %v during the drain", v)
	}
	select {
	case res := <-drained:
		t.Fatalf("drain ended with calls still held at the backend: %+v", res)
	case <-time.After(200 * time.Millisecond):
	}
	gt.pause(false)
	for i, ch := range replies {
		rep := <-ch
		if rep == nil {
			t.Fatalf("READ %d in flight at the drain got no reply", i)
		}
		want := data[i*(64<<10) : (i+1)*(64<<10)]
		if got := readReplyData(t, rep); !bytes.Equal(got, want) {
			t.Fatalf("READ %d: data differs", i)
		}
	}
	res := <-drained
	if res.TimedOut || res.Abandoned != 0 || res.Clients != 1 {
		t.Fatalf("drain result %+v, want 1 client, nothing abandoned", res)
	}
	gwtest.SessionsOf(t, gw.Sessions, 0, "the drained client to be disconnected")
	if v := gwtest.Metric(t, gw.Metrics(), "rdmagw_connections_closed_total", "reason", "shutdown"); v != 1 {
		t.Errorf("connections closed by shutdown = %v", v)
	}
	if v := gwtest.Metric(t, gw.Metrics(), "rdmagw_drain_abandoned_calls_total"); v != 0 {
		t.Errorf("abandoned = %v", v)
	}
}

// A call still at the backend when the drain deadline passes is
// abandoned and counted; the client is disconnected.
func TestForwardDrainDeadlineAbandons(t *testing.T) {
	data := pattern(64<<10, 3)
	gt, gw, n, fh := forwardWithFile(t, data)
	gt.pause(true)
	rep := readAsync(n, fh, 0, 4096)
	gwtest.WaitFor(t, 10*time.Second, "a call in flight", func() bool {
		s := gw.Sessions()
		return len(s.Clients) == 1 && s.Clients[0].CallsInFlight == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res := gw.Drain(ctx)
	if !res.TimedOut || res.Abandoned != 1 {
		t.Fatalf("drain result %+v, want timed out with 1 call abandoned", res)
	}
	if v := gwtest.Metric(t, gw.Metrics(), "rdmagw_drain_abandoned_calls_total"); v != 1 {
		t.Errorf("rdmagw_drain_abandoned_calls_total = %v, want 1", v)
	}
	gwtest.SessionsOf(t, gw.Sessions, 0, "the client to be disconnected")
	select {
	case r := <-rep:
		if r != nil {
			t.Fatalf("abandoned call got a reply")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("abandoned call still waiting after the disconnect")
	}
}

// The live view lists a client with the bytes of a verified transfer and
// its backend connection, in JSON too, and forgets it once it has gone.
func TestForwardSessionsView(t *testing.T) {
	data := pattern(512<<10, 9)
	_, gw, n, _ := forwardWithFile(t, data)
	// 512 KiB written by RDMA Read and read back by RDMA Write, plus
	// headers. A reply's bytes are counted when its Send completes,
	// which may be just after the client has the reply: wait for them.
	var cl gateway.SessionInfo
	gwtest.WaitFor(t, 10*time.Second, "the transfer's bytes in the live view", func() bool {
		cl = gwtest.SessionsOf(t, gw.Sessions, 1, "one client")[0]
		return cl.BytesIn >= uint64(len(data)) && cl.BytesOut >= uint64(len(data))
	})
	if cl.BytesIn > 2*uint64(len(data)) {
		t.Errorf("bytes in %d out %d after moving %d each way", cl.BytesIn, cl.BytesOut, len(data))
	}
	if cl.CreditsGranted != gateway.DefaultConfig().RDMA.Credits || cl.InlineRecv != 4096 || cl.InlineSend == 0 {
		t.Errorf("credits/inline: %+v", cl)
	}
	if cl.Backend.Transport != "tcp" || cl.Backend.Local == "" || cl.Backend.Remote == "" || cl.Backend.Client != cl.Peer {
		t.Errorf("backend connection: %+v", cl.Backend)
	}
	if cl.AgeSeconds <= 0 || cl.LastActivity.Before(cl.ConnectedAt) {
		t.Errorf("age/activity: %+v", cl)
	}
	b, err := json.Marshal(gw.Sessions())
	if err != nil {
		t.Fatal(err)
	}
	var back gateway.Sessions
	if err := json.Unmarshal(b, &back); err != nil || len(back.Clients) != 1 || back.Clients[0].BytesOut != cl.BytesOut && back.Clients[0].BytesOut < cl.BytesOut {
		t.Fatalf("JSON round trip: %v %s", err, b)
	}
	if len(back.Backends) != 1 || back.Backends[0].Local != cl.Backend.Local {
		t.Errorf("backends: %+v", back.Backends)
	}
	if back.Backends[0].State != "serving" {
		t.Errorf("backend state %q while its client is connected", back.Backends[0].State)
	}
	n.c.close()
	gwtest.SessionsOf(t, gw.Sessions, 0, "the client to disappear after it disconnected")
	// Its backend connection is kept for its reconnection (reconnect_grace).
	var s gateway.Sessions
	gwtest.WaitFor(t, 10*time.Second, "the backend connection to be listed as parked", func() bool {
		s = gw.Sessions()
		return len(s.Backends) == 1 && s.Backends[0].State == "parked"
	})
	if b := s.Backends[0]; b.Local != cl.Backend.Local || b.Client != "127.0.0.1" {
		t.Errorf("parked backend %+v, want local %s for client 127.0.0.1", b, cl.Backend.Local)
	}
}

// A reload changes what it can without disconnecting anyone: the
// connected client keeps working (verified data), a new client gets the
// new connection settings, and restart-only changes are reported, not
// applied. A configuration that would be invalid changes nothing.
func TestForwardReconfigureKeepsClients(t *testing.T) {
	data := pattern(128<<10, 5)
	_, gw, n, fh := forwardWithFile(t, data)
	before := gwtest.SessionsOf(t, gw.Sessions, 1, "one client")[0]

	next := gateway.DefaultConfig()
	next.Listen.Address = "127.0.0.1"
	next.Listen.Port = 1 // restart-only
	next.RDMA.InlineSend = 2048
	next.RDMA.Credits = 16 // restart-only: sizes the receive pool
	next.Log.Level = "warn"
	next.Listen.AllowedNetworks = []string{"10.0.0.0/8"}
	next.Metrics.Listen = ""
	next.Pool.MaxBytes = 64 << 20
	next.Backend.ConnectTimeout = 2 * time.Second
	res, err := gw.Reconfigure(&next)
	if err != nil {
		t.Fatal(err)
	}
	if !contains(res.Applied, "log.level") || !contains(res.Applied, "listen.allowed_networks") ||
		!contains(res.NewConnections, "rdma.inline_send") || !contains(res.NeedRestart, "listen.port") ||
		!contains(res.NeedRestart, "rdma.credits") {
		t.Fatalf("reload result %+v", res)
	}
	if v := gwtest.Metric(t, gw.Metrics(), "rdmagw_config_reloads_total", "result", "applied"); v != 1 {
		t.Errorf("reloads applied = %v", v)
	}
	// The connected client, now outside allowed_networks, is kept.
	if got := n.readFile(fh, 64<<10); !bytes.Equal(got, data) {
		t.Fatal("data read after the reload differs")
	}
	after := gwtest.SessionsOf(t, gw.Sessions, 1, "the same client")[0]
	if after.Peer != before.Peer || after.InlineSend != before.InlineSend {
		t.Errorf("client changed by the reload: %+v -> %+v", before, after)
	}
	// A new client is refused: 127.0.0.1 is outside 10.0.0.0/8.
	if gwtest.Metric(t, gw.Metrics(), "rdmagw_connections_rejected_total", "reason", "not_allowed") != 0 {
		t.Fatal("rejections before any new client")
	}
	next.Listen.AllowedNetworks = []string{"127.0.0.0/8"}
	if _, err := gw.Reconfigure(&next); err != nil {
		t.Fatal(err)
	}
	dialRDMA(t, gw.Addr().String())
	var newer gateway.SessionInfo
	gwtest.WaitFor(t, 10*time.Second, "the second client", func() bool {
		for _, c := range gw.Sessions().Clients {
			if c.Peer != before.Peer {
				newer = c
				return true
			}
		}
		return false
	})
	if newer.InlineSend != 2048 || newer.CreditsGranted != before.CreditsGranted {
		t.Errorf("new client: inline send %d, credits %d; want the reloaded 2048 and the running %d",
			newer.InlineSend, newer.CreditsGranted, before.CreditsGranted)
	}

	bad := next
	bad.Mode = "reverse"
	if _, err := gw.Reconfigure(&bad); err == nil {
		t.Fatal("mode change accepted on reload")
	}
	bad = next
	bad.RDMA.Credits = 0
	if _, err := gw.Reconfigure(&bad); err == nil || !strings.Contains(err.Error(), "rdma.credits") {
		t.Fatalf("invalid credits: %v", err)
	}
	if v := gwtest.Metric(t, gw.Metrics(), "rdmagw_config_reloads_total", "result", "rejected"); v != 2 {
		t.Errorf("reloads rejected = %v, want 2", v)
	}
	if got := n.readFile(fh, 64<<10); !bytes.Equal(got, data) {
		t.Fatal("data read after the rejected reloads differs")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
