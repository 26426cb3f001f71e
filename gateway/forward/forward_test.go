package forward_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/forward"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/ulb"
)

// The forward gateway end to end with real peers: the RPC-over-RDMA
// requester on the pure-Go iWARP provider → rdmagw → nfs-ganesha over TCP.

func TestForwardNullAndGetattr(t *testing.T) {
	g := nfstest.StartGanesha(t)
	gw := startGateway(t, g.NFSAddr, nil)
	c := dialRDMA(t, gw.Addr().String())
	root := mount3(t, g.MountAddr, g.Export)

	rep, err := c.call(context.Background(), ulb.ProgNFS, 3, nfs3Null, nil, nil, nil)
	if err != nil {
		t.Fatalf("NULL: %v", err)
	}
	results(t, rep)
	n := &nfs3{c: c, t: t}
	d := n.call(nfs3Getattr, new(enc).opaque(root).b, nil, nil)
	status(t, d, "GETATTR")
	if typ, _ := d.Uint32(); typ != 2 { // NF3DIR
		t.Fatalf("root type %d, want NF3DIR", typ)
	}
	if v := gwtest.Metric(t, gw.Metrics(), "rdmagw_replies_total", "procedure", "GETATTR", "status", "success"); v != 1 {
		t.Errorf("GETATTR replies = %v", v)
	}
	if v := gwtest.Metric(t, gw.Metrics(), "rdmagw_calls_total", "program", "nfs", "procedure", "NULL"); v != 1 {
		t.Errorf("NULL calls = %v", v)
	}
	if v := gwtest.Metric(t, gw.Metrics(), "rdmagw_backend_latency_seconds"); v != 2 {
		t.Errorf("backend latency samples = %v, want 2", v)
	}
	// The denominators of the saturation alerts (deploy/prometheus).
	if v, want := gwtest.Metric(t, gw.Metrics(), "rdmagw_credits_granted"), float64(gateway.DefaultConfig().RDMA.Credits); v != want {
		t.Errorf("credits granted = %v with one client, want %v", v, want)
	}
	if v := gwtest.Metric(t, gw.Metrics(), "rdmagw_pool_bytes_max"); v != 64<<20 {
		t.Errorf("pool bytes max = %v, want pool.max_bytes %v", v, 64<<20)
	}
}

// WRITE payloads travel in Read chunks and go to TCP from the buffer
// they landed in; READ payloads come from TCP straight into registered
// memory and go out in Write chunks. Every byte is checked, through the
// gateway and on the server's disk.
func TestForwardWriteReadFiles(t *testing.T) {
	g := nfstest.StartGanesha(t)
	gw := startGateway(t, g.NFSAddr, nil)
	c := dialRDMA(t, gw.Addr().String())
	n := &nfs3{c: c, t: t}
	root := mount3(t, g.MountAddr, g.Export)

	for i, size := range []int{0, 1, 4095, 1<<20 + 3} {
		name := sizeName(size)
		data := pattern(size, byte(i))
		fh := n.create(root, name)
		n.writeFile(fh, data, 1<<20)
		n.commit(fh)
		if got := n.getattrSize(fh); got != uint64(size) {
			t.Fatalf("%s: size %d after write, want %d", name, got, size)
		}
		got := n.readFile(fh, 1<<20)
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: read back %d bytes differing from the %d written (first diff at %d)", name, len(got), size, firstDiff(got, data))
		}
		if g.Dir != "" {
			disk, err := os.ReadFile(filepath.Join(g.Dir, name))
			if err != nil || !bytes.Equal(disk, data) {
				t.Fatalf("%s: file on the server's disk differs (%d bytes, %v)", name, len(disk), err)
			}
		}
		n.remove(root, name)
	}
	m := gw.Metrics()
	// The requester may send a small WRITE's data inline; the big one
	// surely comes by RDMA Read.
	wrote := 1<<20 + 3
	if v := gwtest.Metric(t, m, "rdmagw_bytes_total", "path", "read_chunk"); v < float64(wrote) {
		t.Errorf("read_chunk bytes = %v, want >= %d (WRITE payloads by RDMA Read)", v, wrote)
	}
	gwtest.WaitFor(t, 5*time.Second, "write_chunk bytes (READ payloads by RDMA Write) to be counted", func() bool {
		return gwtest.Metric(t, m, "rdmagw_bytes_total", "path", "write_chunk") >= float64(wrote)
	})
	// ... by as many RDMA Reads and Writes, counted through the
	// session's metrics wrappers.
	for _, path := range []string{"read_chunk", "write_chunk"} {
		if v := gwtest.Metric(t, m, "rdmagw_rdma_work_requests_total", "path", path); v < 1 {
			t.Errorf("%s work requests = %v, want at least 1", path, v)
		}
	}
	if v := gwtest.Metric(t, m, "rdmagw_ddp_fallbacks_total"); v != 0 {
		t.Errorf("ddp fallbacks = %v", v)
	}
	c.close()
	gwtest.WaitFor(t, 5*time.Second, "gateway pool to drain", func() bool { return gwtest.PoolInUse(t, gw.Metrics()) == 0 })
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// A directory listing bigger than the inline threshold comes back through
// the Reply chunk.
func TestForwardReaddirplusReplyChunk(t *testing.T) {
	g := nfstest.StartGanesha(t)
	gw := startGateway(t, g.NFSAddr, nil)
	c := dialRDMA(t, gw.Addr().String())
	n := &nfs3{c: c, t: t}
	root := mount3(t, g.MountAddr, g.Export)
	want := map[string]bool{}
	for i := range 120 {
		name := "entry-with-a-rather-long-name-" + sizeName(i)
		n.create(root, name)
		want[name] = true
	}
	names := n.readdirplus(root, 64<<10)
	if c.lastKind != rdmarpc.ReplyReplyChunk {
		t.Fatalf("READDIRPLUS reply came as %v, want reply_chunk", c.lastKind)
	}
	for _, nm := range names {
		delete(want, nm)
	}
	if len(want) != 0 {
		t.Fatalf("%d entries missing from the listing of %d names", len(want), len(names))
	}
	// The engine counts a reply's bytes after posting it: the client may
	// be quicker.
	gwtest.WaitFor(t, 5*time.Second, "reply_chunk bytes to be counted", func() bool {
		return gwtest.Metric(t, gw.Metrics(), "rdmagw_bytes_total", "path", "reply_chunk") >= 4096
	})
	if v := gwtest.Metric(t, gw.Metrics(), "rdmagw_rdma_work_requests_total", "path", "reply_chunk"); v < 1 {
		t.Errorf("reply_chunk work requests = %v, want at least 1", v)
	}
}

// The backend connection breaks while a call is in flight: the gateway
// reconnects from the same local port and re-sends the call, and the
// client gets its reply as if nothing happened.
func TestForwardBackendReconnect(t *testing.T) {
	px, gw := reconnectAfterCut(t, "reconnect", 100000, nil)
	m := gw.Metrics()
	if v := gwtest.Metric(t, m, "rdmagw_backend_reconnects_total"); v != 1 {
		t.Fatalf("reconnects = %v, want 1", v)
	}
	ports := px.ports()
	changed := 0.0
	if len(ports) == 2 && ports[0] != ports[1] {
		changed = 1
	}
	if v := gwtest.Metric(t, m, "rdmagw_backend_reconnect_port_changes_total"); v != changed {
		t.Errorf("port changes = %v, want %v (ports %v)", v, changed, ports)
	}
	switch {
	case len(ports) != 2:
		t.Errorf("backend source ports %v: want two connections", ports)
	case ports[0] != ports[1] && !forward.PortHeldElsewhere(t, ports[0]):
		t.Errorf("backend source ports %v: want the same port twice", ports)
	case ports[0] != ports[1]:
		// The dialer's documented fallback: another socket on this host
		// without SO_REUSEADDR (the kernel gives the same ephemeral port
		// to connections towards other destinations: this test's own
		// client and proxy sockets) holds the port, so the OS refused it.
		t.Logf("backend source ports %v: port %d is held by another socket on this host; fell back to any port", ports, ports[0])
	}
}

// A reply whose XID matches no outstanding call is dropped and counted;
// the real reply behind it still reaches the client.
func TestForwardUnknownXIDDropped(t *testing.T) {
	g := nfstest.StartGanesha(t)
	px := startProxy(t, g.NFSAddr)
	gw := startGateway(t, px.addr(), nil)
	c := dialRDMA(t, gw.Addr().String())
	px.injectUnknown.Store(true)
	rep, err := c.call(context.Background(), ulb.ProgNFS, 3, nfs3Null, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	results(t, rep)
	if v := gwtest.Metric(t, gw.Metrics(), "rdmagw_backend_unknown_xid_replies_total"); v != 1 {
		t.Fatalf("unknown-XID replies = %v, want 1", v)
	}
}

// The backend stays away: after give_up_after the client is disconnected
// and everything it held is released.
func TestForwardBackendGiveUp(t *testing.T) {
	g := nfstest.StartGanesha(t)
	px := startProxy(t, g.NFSAddr)
	gw := startGateway(t, px.addr(), func(c *gateway.Config) {
		c.Backend.ReconnectInitial = 20 * time.Millisecond
		c.Backend.ReconnectMax = 100 * time.Millisecond
		c.Backend.GiveUpAfter = 500 * time.Millisecond
	})
	c := dialRDMA(t, gw.Addr().String())
	if _, err := c.call(context.Background(), ulb.ProgNFS, 3, nfs3Null, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	px.close() // no listener, no connection
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.call(ctx, ulb.ProgNFS, 3, nfs3Null, nil, nil, nil)
	if err == nil {
		t.Fatal("call succeeded with the backend gone")
	}
	m := gw.Metrics()
	gwtest.WaitFor(t, 5*time.Second, "give-up to be counted", func() bool {
		return gwtest.Metric(t, m, "rdmagw_backend_give_ups_total") == 1 && gwtest.Metric(t, m, "rdmagw_connections") == 0 &&
			gwtest.Metric(t, m, "rdmagw_credits_granted") == 0
	})
	gwtest.WaitFor(t, 5*time.Second, "pool to drain", func() bool { return gwtest.PoolInUse(t, gw.Metrics()) == 0 })
	if v := gwtest.Metric(t, m, "rdmagw_connections_closed_total", "reason", "backend_gone"); v != 1 {
		t.Errorf("closed{backend_gone} = %v", v)
	}
}

// The client goes away with calls outstanding at the backend: they are
// abandoned without leaking buffers or goroutines.
func TestForwardClientDisconnectAbandonsCalls(t *testing.T) {
	g := nfstest.StartGanesha(t)
	px := startProxy(t, g.NFSAddr)
	gw := startGateway(t, px.addr(), nil)
	root := mount3(t, g.MountAddr, g.Export)
	before := runtime.NumGoroutine()

	c := dialRDMA(t, gw.Addr().String())
	n := &nfs3{c: c, t: t}
	fh := n.create(root, "abandon")
	px.hold.Store(true)
	const calls = 8
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := new(enc).opaque(fh).u64(uint64(i) << 16).u32(65536).u32(fileSync).u32(65536).b
			c.call(ctx, ulb.ProgNFS, 3, nfs3Write, args, pattern(65536, byte(i)), nil)
		}()
	}
	m := gw.Metrics()
	gwtest.WaitFor(t, 10*time.Second, "calls to reach the backend", func() bool {
		return gwtest.Metric(t, m, "rdmagw_credits_in_use") == calls
	})
	if gwtest.PoolInUse(t, gw.Metrics()) == 0 {
		t.Fatal("pool empty with WRITE payloads outstanding")
	}
	cancel()
	c.close()
	wg.Wait()
	gwtest.WaitFor(t, 10*time.Second, "calls to be abandoned", func() bool {
		return gwtest.Metric(t, m, "rdmagw_calls_dropped_total", "reason", "client_gone") == calls
	})
	gwtest.WaitFor(t, 5*time.Second, "pool to drain", func() bool { return gwtest.PoolInUse(t, gw.Metrics()) == 0 })
	if v := gwtest.Metric(t, m, "rdmagw_credits_in_use"); v != 0 {
		t.Errorf("credits in use = %v after the client left", v)
	}
	gwtest.WaitFor(t, 10*time.Second, "goroutines to settle", func() bool { return runtime.NumGoroutine() <= before+2 })
}

// A client from outside listen.allowed_networks is refused and counted.
func TestForwardRejectsDisallowedClient(t *testing.T) {
	ln := startProxy(t, "127.0.0.1:1") // a backend that is never reached
	gw := startGateway(t, ln.addr(), func(c *gateway.Config) { c.Listen.AllowedNetworks = []string{"10.0.0.0/8"} })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	dev, pool := newClientDevice(t)
	_, err := rdmarpc.DialRequester(ctx, dev, gw.Addr().String(), rdmarpc.RequesterConfig{Pool: pool})
	if err == nil {
		t.Fatal("connection from 127.0.0.1 accepted")
	}
	if v := gwtest.Metric(t, gw.Metrics(), "rdmagw_connections_rejected_total", "reason", "not_allowed"); v != 1 {
		t.Fatalf("rejected{not_allowed} = %v", v)
	}
}

// Messages that are not well-formed RPC calls get their RFC 5531 answer
// from the gateway itself, or are dropped and counted; nothing reaches
// the backend and the connection stays usable.
func TestForwardMalformedRPC(t *testing.T) {
	g := nfstest.StartGanesha(t)
	gw := startGateway(t, g.NFSAddr, nil)
	c := dialRDMA(t, gw.Addr().String())
	m := gw.Metrics()

	// rpcvers 3: MSG_DENIED / RPC_MISMATCH (2, 2).
	xid := testXID.Add(1)
	call := gwtest.EncodeCall(xid, ulb.ProgNFS, 3, nfs3Null, nil)
	call[11] = 3
	rep, err := c.callRaw(context.Background(), xid, call)
	if err != nil {
		t.Fatal(err)
	}
	var h oncrpc.ReplyHeader
	if _, err := h.Decode(rep); err != nil || h.XID != xid || h.Stat != oncrpc.MsgDenied ||
		h.RejectStat != oncrpc.RPCMismatch || h.Low != 2 || h.High != 2 {
		t.Fatalf("reply to rpcvers 3: %+v, %v", h, err)
	}

	// A REPLY where a call belongs, and a message too short for a header:
	// dropped (the client's RPC layer times out), counted. Their XID is
	// the transport's (else the engine answers ERR_CHUNK, RFC 8166 §4.5.2),
	// which makes the REPLY a backward-direction reply for no callback.
	for _, words := range [][]uint32{{1, 0}, {}} {
		xid := testXID.Add(1)
		raw := binary.BigEndian.AppendUint32(nil, xid)
		for _, w := range words {
			raw = binary.BigEndian.AppendUint32(raw, w)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := c.callRaw(ctx, xid, raw)
		cancel()
		if err == nil {
			t.Fatalf("message %x answered", raw)
		}
	}
	if v := gwtest.Metric(t, m, "rdmagw_calls_dropped_total", "reason", "not_rpc"); v != 1 {
		t.Fatalf("dropped{not_rpc} = %v, want 1", v)
	}
	if v := gwtest.Metric(t, m, "rdmagw_backchannel_errors_total", "reason", "unmatched"); v != 1 {
		t.Fatalf("backchannel_errors{unmatched} = %v, want 1", v)
	}
	if v := gwtest.Metric(t, m, "rdmagw_calls_dropped_total", "reason", "rpc_mismatch"); v != 1 {
		t.Fatalf("dropped{rpc_mismatch} = %v, want 1", v)
	}
	// Still serving.
	if _, err := c.call(context.Background(), ulb.ProgNFS, 3, nfs3Null, nil, nil, nil); err != nil {
		t.Fatalf("NULL after bad input: %v", err)
	}
	if v := gwtest.Metric(t, m, "rdmagw_credits_in_use"); v != 0 {
		t.Errorf("credits in use = %v", v)
	}
}

// An ordinary client disconnect (an unmount) is logged once, at INFO,
// with reason client; no WARN or ERROR line, and it is counted as by the
// client.
func TestForwardClientDisconnectLoggedQuietly(t *testing.T) {
	g := nfstest.StartGanesha(t)
	var logs gwtest.SyncBuffer
	gw := startGatewayLog(t, g.NFSAddr, func(c *gateway.Config) { c.Log.Level, c.Log.Format = "info", "json" }, &logs)
	c := dialRDMA(t, gw.Addr().String())
	if _, err := c.call(context.Background(), ulb.ProgNFS, 3, nfs3Null, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	c.close()
	m := gw.Metrics()
	gwtest.WaitFor(t, 5*time.Second, "the disconnect to be counted", func() bool {
		return gwtest.Metric(t, m, "rdmagw_connections_closed_total", "reason", "client") == 1
	})
	gwtest.WaitFor(t, 5*time.Second, "the disconnect to be logged", func() bool {
		return gwtest.Logged(t, &logs, "info", "reason", "client", "peer", nil) == 1
	})
	for _, bad := range []string{"warn", "error"} {
		if n := gwtest.Logged(t, &logs, bad); n != 0 {
			t.Errorf("an ordinary disconnect logged %d %s lines:\n%s", n, bad, logs.String())
		}
	}
}

// reconnectAfterCut creates a file through a gateway behind a proxy, runs
// hold (if any) with the backend source ports so far (false: it could
// not, and nothing more is done: nil, nil), loses the reply of
// a size-byte WRITE that executed (the proxy cuts both connections), and
// checks that the data reads back after the gateway reconnected.
func reconnectAfterCut(t *testing.T, name string, size int, hold func(ports []int) bool) (*proxy, *forward.Gateway) {
	t.Helper()
	g := nfstest.StartGanesha(t)
	px := startProxy(t, g.NFSAddr)
	gw := startGateway(t, px.addr(), func(c *gateway.Config) {
		c.Backend.ReconnectInitial = 20 * time.Millisecond
	})
	c := dialRDMA(t, gw.Addr().String())
	n := &nfs3{c: c, t: t}
	root := mount3(t, g.MountAddr, g.Export)
	fh := n.create(root, name)
	if hold != nil && !hold(px.ports()) {
		return nil, nil
	}
	data := pattern(size, 7)
	px.cutOnReply.Store(true) // the WRITE executes; its reply is lost
	n.write(fh, 0, data)
	if got := n.readFile(fh, 1<<20); !bytes.Equal(got, data) {
		t.Fatalf("data after reconnect differs")
	}
	return px, gw
}

// A reconnect that cannot keep the source port (a listener on this host
// holds it) still carries the resent call, and is counted and logged.
func TestForwardBackendReconnectPortHeld(t *testing.T) {
	var px *proxy
	var gw *forward.Gateway
	for try := 1; gw == nil; try++ {
		px, gw = reconnectAfterCut(t, "portheld"+strconv.Itoa(try), 50000, func(ports []int) bool {
			if len(ports) != 1 {
				t.Fatalf("backend connections %v, want 1", ports)
			}
			// SO_REUSEADDR lets a listener share the port of an
			// established connection, and no connect may then bind it.
			lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
				var serr error
				rc.Control(func(fd uintptr) {
					serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
				})
				return serr
			}}
			hold, err := lc.Listen(context.Background(), "tcp", fmt.Sprintf("127.0.0.1:%d", ports[0]))
			if errors.Is(err, syscall.EADDRINUSE) && try < 5 {
				// Another connection on this host (a parallel test's)
				// has the same local port towards another peer, which
				// Linux allows and a listener cannot share: try again.
				t.Logf("port %d also in use by another connection: try %d", ports[0], try+1)
				return false
			}
			if err != nil {
				t.Fatalf("hold the gateway's backend port %d: %v", ports[0], err)
			}
			t.Cleanup(func() { hold.Close() })
			return true
		})
	}
	m := gw.Metrics()
	if ports := px.ports(); len(ports) != 2 || ports[0] == ports[1] {
		t.Fatalf("backend source ports %v: want two different", ports)
	}
	if v := gwtest.Metric(t, m, "rdmagw_backend_reconnect_port_changes_total"); v != 1 {
		t.Fatalf("port changes = %v, want 1", v)
	}
}
