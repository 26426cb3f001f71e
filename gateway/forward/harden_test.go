package forward_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/verbs"
)

// Issue 13, findings 1 and 2: no call lost in silence, no client able to
// hurt another. Misbehaving clients are raw RPC-over-RDMA peers on the
// pure-Go iWARP provider (rawPeer); the backend is nfs-ganesha.

// rawPeer is an RPC-over-RDMA client without an engine: it sends what a
// test builds and, unless the test polls it, never looks at its receive
// completion queue. With a small receive CQ left unpolled its provider
// stops reading the connection (a full CQ back-pressures), which is a
// client that takes no replies.
type rawPeer struct {
	t    testing.TB
	dev  verbs.Device
	pd   verbs.PD
	scq  verbs.CQ
	rcq  verbs.CQ
	conn verbs.Conn
	mem  *verbs.Memory
	mr   verbs.MR

	recvs, sends int
	next         int // next send slot
}

const rawSlot = 4096

// rawDataOff is where the data area (Write chunk targets) begins.
func (p *rawPeer) rawDataOff() int { return (p.recvs + p.sends) * rawSlot }

// dialRawPeer connects from local (an IP) to the gateway with recvs
// receives posted, a receive CQ of rcq entries, room for sends Sends in
// flight and data bytes of remotely writable memory.
func dialRawPeer(t testing.TB, gw, local string, recvs, rcq, sends, data int) *rawPeer {
	t.Helper()
	prov, err := verbs.Lookup("iwarp")
	if err != nil {
		t.Fatal(err)
	}
	p := &rawPeer{t: t, recvs: recvs, sends: sends}
	if p.dev, err = prov.Open(local); err != nil {
		t.Fatal(err)
	}
	p.pd, _ = p.dev.AllocPD()
	p.scq, _ = p.dev.CreateCQ(2*sends + 16)
	p.rcq, _ = p.dev.CreateCQ(rcq)
	if p.mem, err = verbs.Alloc(p.rawDataOff() + data); err != nil {
		t.Fatal(err)
	}
	if p.mr, err = p.pd.Register(p.mem.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	var pdata [rdmarpc.PrivateDataSize]byte
	rdmarpc.PrivateData{MaxSendSize: rawSlot, MaxRecvSize: rawSlot}.Encode(pdata[:])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p.conn, err = p.dev.Dial(ctx, gw, verbs.ConnOptions{PD: p.pd, SendCQ: p.scq, RecvCQ: p.rcq,
		MaxSendWR: sends + 8, MaxRecvWR: recvs, PrivateData: pdata[:]})
	if err != nil {
		t.Fatalf("raw dial %s from %s: %v", gw, local, err)
	}
	for i := range recvs {
		b := p.mem.Bytes()[i*rawSlot : (i+1)*rawSlot]
		if err := p.conn.PostRecv(&verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{{Buf: b, LKey: p.mr.LKey()}}}); err != nil {
			t.Fatalf("post receive: %v", err)
		}
	}
	t.Cleanup(p.close)
	return p
}

// close drains the completion queues (so a provider waiting for room
// goes on) and releases everything.
func (p *rawPeer) close() {
	stop := make(chan struct{})
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		wcs := make([]verbs.WC, 64)
		for {
			p.rcq.Poll(wcs)
			p.scq.Poll(wcs)
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	p.conn.Close()
	close(stop)
	<-drained
	p.mr.Deregister()
	p.mem.Free()
	p.scq.Close()
	p.rcq.Close()
	p.pd.Close()
	p.dev.Close()
}

// send posts b as one Send without waiting for its completion.
func (p *rawPeer) send(b []byte) {
	p.t.Helper()
	if err := p.trySend(b); err != nil {
		p.t.Fatalf("raw post send: %v", err)
	}
}

// trySend is send for a test in which the gateway may close the
// connection: the post's error is returned.
func (p *rawPeer) trySend(b []byte) error {
	i := p.recvs + p.next%p.sends
	p.next++
	buf := p.mem.Bytes()[i*rawSlot : i*rawSlot+len(b)]
	copy(buf, b)
	return p.conn.PostSend(&verbs.SendWR{ID: uint64(i), Op: verbs.OpSend, Signal: true,
		SGL: []verbs.SGE{{Buf: buf, LKey: p.mr.LKey()}}})
}

// sendCall sends an RPC call as RDMA_MSG, offering writeLen bytes of the
// data area at off as a Write chunk (none when writeLen is 0).
func (p *rawPeer) sendCall(xid uint32, rpc []byte, off, writeLen int) {
	p.t.Helper()
	var h rdmarpc.Header
	h.Init(xid, 128, rdmarpc.ProcMsg)
	if writeLen > 0 {
		h.AppendWriteChunk(rdmarpc.Segment{Handle: p.mr.RKey(), Length: uint32(writeLen),
			Offset: p.mr.Addr() + uint64(p.rawDataOff()+off)})
	}
	b := make([]byte, h.EncodedLen()+len(rpc))
	n, err := h.Encode(b)
	if err != nil {
		p.t.Fatal(err)
	}
	copy(b[n:], rpc)
	p.send(b)
}

// read3 is an NFSv3 READ call of count bytes at off.
func read3(xid uint32, fh []byte, off uint64, count int) []byte {
	return gwtest.EncodeCall(xid, ulb.ProgNFS, 3, nfs3Read, new(enc).opaque(fh).u64(off).u32(uint32(count)).b)
}

// writeTestFile creates name under root with size patterned bytes
// through the gateway.
func writeTestFile(t testing.TB, gwAddr string, root []byte, name string, size int) []byte {
	t.Helper()
	c := dialRDMA(t, gwAddr)
	n := &nfs3{c: c, t: t}
	fh := n.create(root, name)
	n.writeFile(fh, pattern(size, 7), 1<<20)
	n.commit(fh)
	c.close()
	return fh
}

// Finding 1: more WRITE payload in flight than the pool may give to
// calls. Before, the calls that found no memory were dropped and their
// client waited out its RPC timeout; now they wait for memory (the
// client is slowed down) and every one is answered. The Linux client's
// behaviour is the requester's here: 32 credits, 32 WRITEs of 1 MiB in
// flight, against a pool that lets calls hold 8 MiB.
func TestHardenCallsWaitForMemory(t *testing.T) {
	g := nfstest.StartGanesha(t)
	gw := startGateway(t, g.NFSAddr, func(c *gateway.Config) { c.Pool.MaxBytes = 16 << 20 })
	root := mount3(t, g.MountAddr, g.Export)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	v3 := &nfsclient.V3{T: nfstest.DialRDMA(t, ctx, gw.Addr().String())} // 32 credits
	fh, err := v3.Create(ctx, root, "membp", 0, nfsproto.Sattr3{})
	if err != nil {
		t.Fatalf("CREATE: %v", err)
	}
	data := pattern(48<<20, 3)
	if err := v3.WriteAll(ctx, fh, data, nfsclient.IOOptions{Concurrency: 32, Stable: nfsproto.FileSync}); err != nil {
		t.Fatalf("WRITE: %v", err)
	}
	got, err := v3.ReadAll(ctx, fh, int64(len(data)), nfsclient.IOOptions{Concurrency: 32})
	if err != nil {
		t.Fatalf("READ: %v", err)
	}
	if len(got) != len(data) || firstDiff(got, data) != len(data) {
		t.Fatalf("read back %d bytes, first difference at %d", len(got), firstDiff(got, data))
	}
	m := gw.Metrics()
	if v := gwtest.Metric(t, m, "rdmagw_rdma_messages_dropped_total"); v != 0 {
		t.Errorf("messages dropped = %v, want 0", v)
	}
	if v := gwtest.Metric(t, m, "rdmagw_rdma_memory_waits_total"); v < 1 {
		t.Errorf("memory waits = %v: the test never ran the pool dry", v)
	}
	if v := gwtest.Metric(t, m, "rdmagw_connections_closed_total"); v != 0 {
		t.Errorf("connections closed = %v, want 0", v)
	}
	v3.Remove(ctx, root, "membp")
}

// Finding 1: an answer the gateway cannot send closes the connection
// (RFC 8166 §4.5.4). The client takes no replies and keeps sending
// messages that each need an RDMA_ERROR answer; when every send context
// holds an answer the client has not taken, the next one cannot be sent.
// Before, it was dropped and the connection lived on.
func TestHardenUnsendableAnswerCloses(t *testing.T) {
	g := nfstest.StartGanesha(t)
	gw := startGateway(t, g.NFSAddr, func(c *gateway.Config) { c.RDMA.Credits = 16 })
	p := dialRawPeer(t, gw.Addr().String(), "127.0.0.1", 32, 4, 512, 0)
	m := gw.Metrics()
	// In batches of 8, each sent once the gateway has answered the last
	// (its receives are reposted as it answers): the client never has
	// more messages outstanding than the gateway has receives, only more
	// answers not taken than it has send contexts.
	// The gateway may close the connection in the middle of a batch: a
	// post that fails then ends the sending (the closing is checked below).
	for i, closed := 0, false; !closed && i < 400 && gwtest.Metric(t, m, "rdmagw_connections_closed_total") == 0; {
		for range 8 {
			// Version 2: answered ERR_VERS.
			b := binary.BigEndian.AppendUint32(nil, uint32(0x1000+i))
			b = binary.BigEndian.AppendUint32(b, 2)
			b = binary.BigEndian.AppendUint32(b, 16)
			b = binary.BigEndian.AppendUint32(b, 0)
			if err := p.trySend(b); err != nil {
				t.Logf("post send %d: %v (the gateway closed the connection)", i, err)
				closed = true
				break
			}
			i++
		}
		if closed {
			break
		}
		gwtest.WaitFor(t, 20*time.Second, "the batch to be answered", func() bool {
			return gwtest.Metric(t, m, "rdmagw_rdma_errors_sent_total")+gwtest.Metric(t, m, "rdmagw_rdma_messages_dropped_total") >= float64(i) ||
				gwtest.Metric(t, m, "rdmagw_connections_closed_total") > 0
		})
	}
	gwtest.WaitFor(t, 20*time.Second, "the connection to close", func() bool {
		return gwtest.Metric(t, m, "rdmagw_connections_closed_total") > 0
	})
	if v := gwtest.Metric(t, m, "rdmagw_connections_closed_total", "reason", "reply_unsendable"); v != 1 {
		t.Errorf("connections closed as reply_unsendable = %v, want 1", v)
	}
	if v := gwtest.Metric(t, m, "rdmagw_rdma_messages_dropped_total", "reason", "no_resources"); v != 1 {
		t.Errorf("no_resources drops = %v, want 1 (the answer that closed the connection)", v)
	}
}

// Finding 1: calls whose RPC header does not decode get the RPC-level
// answer a server gives instead of silence; the connection goes on.
func TestHardenBadRPCHeaderAnswered(t *testing.T) {
	g := nfstest.StartGanesha(t)
	gw := startGateway(t, g.NFSAddr, nil)
	c := dialRDMA(t, gw.Addr().String())
	words := func(ws ...uint32) []byte {
		var b []byte
		for _, w := range ws {
			b = binary.BigEndian.AppendUint32(b, w)
		}
		return b
	}
	const xid = 0x5eed0000
	longAuth := append(words(1, 500), make([]byte, 500)...)
	cases := []struct {
		name   string
		msg    []byte
		check  func(h *oncrpc.ReplyHeader) bool
		reason string
	}{
		{"cred over 400 bytes", append(append(words(xid+1, 0, 2, ulb.ProgNFS, 3, 0), longAuth...), words(0, 0)...),
			func(h *oncrpc.ReplyHeader) bool {
				return h.Stat == oncrpc.MsgDenied && h.RejectStat == oncrpc.AuthError && h.AuthStat == oncrpc.AuthBadCred
			}, "bad_cred"},
		{"verifier over 400 bytes", append(words(xid+2, 0, 2, ulb.ProgNFS, 3, 0, 0, 0), longAuth...),
			func(h *oncrpc.ReplyHeader) bool {
				return h.Stat == oncrpc.MsgDenied && h.RejectStat == oncrpc.AuthError && h.AuthStat == oncrpc.AuthBadVerf
			}, "bad_verf"},
		{"header cut short", words(xid+3, 0, 2, ulb.ProgNFS),
			func(h *oncrpc.ReplyHeader) bool {
				return h.Stat == oncrpc.MsgAccepted && h.AcceptStat == oncrpc.GarbageArgs
			}, "garbage_header"},
		{"cred cut short", words(xid+4, 0, 2, ulb.ProgNFS, 3, 0, 1, 64, 0),
			func(h *oncrpc.ReplyHeader) bool {
				return h.Stat == oncrpc.MsgDenied && h.RejectStat == oncrpc.AuthError && h.AuthStat == oncrpc.AuthBadCred
			}, "bad_cred"},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		xid := binary.BigEndian.Uint32(tc.msg)
		rep, err := c.callRaw(ctx, xid, tc.msg)
		cancel()
		if err != nil {
			t.Fatalf("%s: no answer: %v", tc.name, err)
		}
		var h oncrpc.ReplyHeader
		if _, err := h.Decode(rep); err != nil || h.XID != xid || !tc.check(&h) {
			t.Errorf("%s: answer %+v (%v)", tc.name, h, err)
		}
	}
	m := gw.Metrics()
	for _, r := range []string{"bad_cred", "bad_verf", "garbage_header"} {
		want := 1.0
		if r == "bad_cred" {
			want = 2
		}
		if v := gwtest.Metric(t, m, "rdmagw_calls_dropped_total", "reason", r); v != want {
			t.Errorf("calls answered %s = %v, want %v", r, v, want)
		}
	}
	// The connection is still good.
	if _, err := c.call(context.Background(), ulb.ProgNFS, 3, nfs3Null, nil, nil, nil); err != nil {
		t.Fatalf("NULL after bad headers: %v", err)
	}
}

// Finding 2: a client that takes no replies pins at most
// connections.max_reply_memory of the pool, and is disconnected after
// connections.reply_timeout; its memory comes back. Before, it kept
// every reply it was sent, for ever.
func TestHardenStalledClientBoundedAndTimedOut(t *testing.T) {
	g := nfstest.StartGanesha(t)
	const replyMem = 4 << 20
	gw := startGateway(t, g.NFSAddr, func(c *gateway.Config) {
		c.Connections.MaxReplyMemory = replyMem
		c.Connections.ReplyTimeout = time.Second
	})
	root := mount3(t, g.MountAddr, g.Export)
	fh := writeTestFile(t, gw.Addr().String(), root, "stall", 1<<20)
	m := gw.Metrics()
	gwtest.WaitFor(t, 5*time.Second, "the writer's connection to end", func() bool {
		return gwtest.Metric(t, m, "rdmagw_connections") == 0 && gwtest.PoolInUse(t, gw.Metrics()) == 0
	})

	// More 1 MiB replies than the kernel can hold between the two ends
	// and the gateway's reply memory: the client's receive buffer grows
	// up to tcp_rmem's maximum while its provider still reads, the
	// gateway's send buffer up to tcp_wmem's (6 and 4 MiB with Debian
	// 12's kernel; 32 and 4 with Linux 6.15 and later, where the 32
	// calls this test sent were now and then all taken into the buffers
	// and nothing stalled).
	const sends = 64
	calls := (tcpBufMax(t, "tcp_rmem")+tcpBufMax(t, "tcp_wmem")+replyMem)>>20 + 8
	if calls > sends {
		t.Skipf("TCP buffers of up to %d MiB need %d calls to stall, more than the %d this client sends", calls-8-replyMem>>20, calls, sends)
	}
	p := dialRawPeer(t, gw.Addr().String(), "127.0.0.1", 40, 4, sends, 1<<20)
	for i := range calls {
		p.sendCall(uint32(0x7000+i), read3(uint32(0x7000+i), fh, 0, 1<<20), 0, 1<<20)
	}
	var peak int64
	closed := gwtest.Metric(t, m, "rdmagw_connections_closed_total")
	for deadline := time.Now().Add(60 * time.Second); gwtest.Metric(t, m, "rdmagw_connections_closed_total") == closed; {
		if time.Now().After(deadline) {
			t.Fatal("the stalled client was never disconnected")
		}
		peak = max(peak, gwtest.PoolInUse(t, gw.Metrics()))
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("pool in use peaked at %d bytes with one stalled client (max_reply_memory %d)", peak, replyMem)
	// Replies beyond the ceiling wait in the backend socket; what is in
	// use is the replies' buffers plus a send header buffer per reply.
	if limit := int64(replyMem + 64<<10); peak > limit {
		t.Errorf("pool in use peaked at %d bytes with one stalled client, ceiling %d", peak, limit)
	}
	if peak < 2<<20 {
		t.Errorf("pool in use peaked at %d bytes: the client never held replies", peak)
	}
	if v := gwtest.Metric(t, m, "rdmagw_connections_closed_total", "reason", "reply_timeout"); v != 1 {
		t.Errorf("connections closed as reply_timeout = %v, want 1", v)
	}
	gwtest.WaitFor(t, 10*time.Second, "the stalled client's memory to come back", func() bool { return gwtest.PoolInUse(t, gw.Metrics()) == 0 })
}

// tcpBufMax is the largest buffer TCP autotuning gives a socket
// (net.ipv4.tcp_rmem or tcp_wmem, the third value), in bytes.
func tcpBufMax(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/" + name)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		t.Fatalf("%s: %q", name, b)
	}
	n, err := strconv.Atoi(f[2])
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

// Finding 2: connection limits, global and per address, refuse with a
// counted reason; a connection that stays idle is closed.
func TestHardenConnectionLimitsAndIdle(t *testing.T) {
	g := nfstest.StartGanesha(t)
	// 2 s: the busy connection's NULLs below must come more often than
	// that even when a loaded machine starves the test (with 300 ms it
	// was closed as idle once).
	idle := startGateway(t, g.NFSAddr, func(c *gateway.Config) { c.Connections.IdleTimeout = 2 * time.Second })
	// Idle: a connection with no calls goes after idle_timeout; one
	// with a call outstanding or recent stays.
	busy := dialRDMA(t, idle.Addr().String())
	dialRawPeer(t, idle.Addr().String(), "127.0.0.1", 4, 8, 4, 0)
	gwtest.WaitFor(t, 20*time.Second, "the idle connection to close", func() bool {
		_, err := busy.call(context.Background(), ulb.ProgNFS, 3, nfs3Null, nil, nil, nil)
		if err != nil {
			t.Fatalf("NULL on the busy connection: %v", err)
		}
		return gwtest.Metric(t, idle.Metrics(), "rdmagw_connections_closed_total", "reason", "idle") == 1
	})
	if v := gwtest.Metric(t, idle.Metrics(), "rdmagw_connections"); v != 1 {
		t.Errorf("connections = %v after the idle one closed, want the busy one", v)
	}

	gw := startGateway(t, g.NFSAddr, func(c *gateway.Config) {
		c.Connections.Max = 2
		c.Connections.MaxPerAddress = 1
	})
	m := gw.Metrics()
	addr := gw.Addr().String()
	c1 := dialRDMA(t, addr) // from 127.0.0.1
	if _, err := c1.call(context.Background(), ulb.ProgNFS, 3, nfs3Null, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	tryDial := func(local string) error {
		prov, _ := verbs.Lookup("iwarp")
		dev, err := prov.Open(local)
		if err != nil {
			return err
		}
		defer dev.Close()
		pd, _ := dev.AllocPD()
		defer pd.Close()
		pool, _ := rdmarpc.NewPool(pd, rdmarpc.PoolConfig{MaxBytes: 4 << 20})
		defer pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rq, err := rdmarpc.DialRequester(ctx, dev, addr, rdmarpc.RequesterConfig{Pool: pool, Credits: 4})
		if err == nil {
			t.Cleanup(func() { rq.Close() })
		}
		return err
	}
	if err := tryDial("127.0.0.1"); err == nil {
		t.Errorf("a second connection from 127.0.0.1 was accepted with max_per_address 1")
	}
	if v := gwtest.Metric(t, m, "rdmagw_connections_rejected_total", "reason", "too_many_from_address"); v != 1 {
		t.Errorf("rejected too_many_from_address = %v, want 1", v)
	}
	if err := tryDial("127.0.0.2"); err != nil {
		t.Fatalf("a connection from 127.0.0.2 was refused: %v", err)
	}
	if err := tryDial("127.0.0.3"); err == nil {
		t.Errorf("a third connection was accepted with max 2")
	}
	if v := gwtest.Metric(t, m, "rdmagw_connections_rejected_total", "reason", "too_many"); v != 1 {
		t.Errorf("rejected too_many = %v, want 1", v)
	}
}

// The load proof of issue 13: against one gateway with the default
// configuration, 4 clients that stop taking replies with 128 READs of
// 1 MiB outstanding and 1,000 connections that never send do not cost a
// steady client an error or a stall: its verified 64 MiB write/read loop
// goes on. Each iteration prints its timings and the longest gap between
// two completed 1 MiB calls ("stall"). The 2 s stall bound is checked
// only with RDMAGW_LOAD_STRICT=1 (a timing judgement on a shared CI
// machine would be flaky); errors, data and the memory bounds always are.
// RDMAGW_LOAD_ITERATIONS sets the iterations (default 3). It runs only
// with RDMAGW_LOAD=1: the 1,005 connections, both ends in this one
// process, cost about 13,000 goroutines, 3,000 descriptors, 3 GB of
// memory and 45 s, too much for every CI run:
//
//	RDMAGW_LOAD=1 RDMAGW_LOAD_STRICT=1 go test ./gateway/forward -run TestHardenLoad -v
func TestHardenLoadStalledAndIdleClients(t *testing.T) {
	if os.Getenv("RDMAGW_LOAD") != "1" {
		t.Skip("set RDMAGW_LOAD=1 to run the 1,000-connection load proof")
	}
	g := nfstest.StartGanesha(t)
	gw := startGateway(t, g.NFSAddr, func(c *gateway.Config) {
		def := gateway.DefaultConfig()
		c.Pool = def.Pool
		c.Connections = def.Connections
		c.RDMA = def.RDMA
		c.Log.Level = "warn"
	})
	addr := gw.Addr().String()
	m := gw.Metrics()
	root := mount3(t, g.MountAddr, g.Export)
	src := writeTestFile(t, addr, root, "loadsrc", 1<<20)
	gwtest.WaitFor(t, 10*time.Second, "the writer's connection to end", func() bool { return gwtest.Metric(t, m, "rdmagw_connections") == 0 })
	baseG := runtime.NumGoroutine()

	// 1,000 idle connections from 20 addresses (max_per_address is 64).
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range 1000 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			dialRawPeer(t, addr, fmt.Sprintf("127.0.0.%d", 2+i%20), 4, 8, 1, 0)
		}()
	}
	wg.Wait()
	idleIn := time.Since(start)
	// 4 stalled clients: 128 READs of 1 MiB each, replies never taken.
	for i := range 4 {
		p := dialRawPeer(t, addr, "127.0.0.1", 136, 4, 160, 1<<20)
		for k := range 128 {
			xid := uint32(0x10000*(i+1) + k)
			p.sendCall(xid, read3(xid, src, 0, 1<<20), 0, 1<<20)
		}
	}
	gwtest.WaitFor(t, 60*time.Second, "1,004 connections", func() bool { return gwtest.Metric(t, m, "rdmagw_connections") == 1004 })
	stalledAt := time.Now()
	t.Logf("1000 idle connected in %v, then 4 stalled: gateway pool in use %d MiB, goroutines +%d, descriptors %d, credits in use %v",
		idleIn.Round(time.Millisecond), gwtest.PoolInUse(t, gw.Metrics())>>20, runtime.NumGoroutine()-baseG, openFDs(), gwtest.Metric(t, m, "rdmagw_credits_in_use"))

	// The steady client.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	v3 := &nfsclient.V3{T: nfstest.DialRDMA(t, ctx, addr)}
	fh, err := v3.Create(ctx, root, "steady", 0, nfsproto.Sattr3{})
	if err != nil {
		t.Fatalf("CREATE: %v", err)
	}
	iters := 3
	if s := os.Getenv("RDMAGW_LOAD_ITERATIONS"); s != "" {
		iters, _ = strconv.Atoi(s)
	}
	var worst time.Duration
	for it := range iters {
		data := pattern(64<<20, byte(it))
		var mu sync.Mutex
		last, gap := time.Now(), time.Duration(0)
		progress := func(int) {
			mu.Lock()
			now := time.Now()
			gap = max(gap, now.Sub(last))
			last = now
			mu.Unlock()
		}
		t0 := time.Now()
		if err := v3.WriteAll(ctx, fh, data, nfsclient.IOOptions{Concurrency: 16, Progress: progress}); err != nil {
			t.Fatalf("iteration %d: write: %v", it, err)
		}
		t1 := time.Now()
		got, err := v3.ReadAll(ctx, fh, int64(len(data)), nfsclient.IOOptions{Concurrency: 16, Progress: progress})
		if err != nil {
			t.Fatalf("iteration %d: read: %v", it, err)
		}
		t2 := time.Now()
		if d := firstDiff(got, data); d != len(data) || len(got) != len(data) {
			t.Fatalf("iteration %d: read back %d bytes, first difference at %d", it, len(got), d)
		}
		worst = max(worst, gap)
		t.Logf("iteration %d: write 64 MiB %v (%.0f MiB/s), read %v (%.0f MiB/s), longest gap between calls %v; pool in use %d MiB, connections %v",
			it, t1.Sub(t0).Round(time.Millisecond), 64/t1.Sub(t0).Seconds(), t2.Sub(t1).Round(time.Millisecond), 64/t2.Sub(t1).Seconds(),
			gap.Round(time.Millisecond), gwtest.PoolInUse(t, gw.Metrics())>>20, gwtest.Metric(t, m, "rdmagw_connections"))
	}
	if v := gwtest.Metric(t, m, "rdmagw_rdma_messages_dropped_total"); v != 0 {
		t.Errorf("messages dropped = %v", v)
	}
	if v := gwtest.Metric(t, m, "rdmagw_connections_rejected_total"); v != 0 {
		t.Errorf("connections refused = %v", v)
	}
	// Stalled replies are bounded: 4 x max_reply_memory, plus send buffers.
	def := gateway.DefaultConfig().Connections
	if in, most := gwtest.PoolInUse(t, gw.Metrics()), 4*int64(def.MaxReplyMemory)+64<<20; in > most {
		t.Errorf("pool in use %d with 4 stalled clients, want at most %d", in, most)
	}
	t.Logf("longest gap between the steady client's calls: %v; loop ended %v after the stalls began; stalled clients closed so far: %v; backend ping timeouts %v",
		worst.Round(time.Millisecond), time.Since(stalledAt).Round(time.Millisecond),
		gwtest.Metric(t, m, "rdmagw_connections_closed_total", "reason", "reply_timeout"),
		gwtest.Metric(t, m, "rdmagw_backend_errors_total", "where", "ping_timeout"))
	if v := gwtest.Metric(t, m, "rdmagw_backend_errors_total", "where", "ping_timeout"); v != 0 {
		t.Errorf("backend ping timeouts = %v: a session held up by its stalled client took its backend for silent", v)
	}
	if os.Getenv("RDMAGW_LOAD_STRICT") == "1" && worst > 2*time.Second {
		t.Errorf("the steady client stalled for %v (> 2 s)", worst)
	}
	v3.Remove(ctx, root, "steady")
}

// openFDs is the number of open file descriptors of this process.
func openFDs() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}
