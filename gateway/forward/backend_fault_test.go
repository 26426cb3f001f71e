package forward_test

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/xdr"
)

// Backend faults nfs-ganesha cannot produce on demand, from a fake NFS
// server: replies too large to carry, connections closed inside a reply,
// bytes that are not RPC records, a server that goes silent. Each costs
// one call or one connection, with backoff, never a reconnect storm.

// fakeBackend is a TCP server that reads RPC call records and lets the
// test answer each (nil handler: NULL replies SUCCESS, others are not
// answered).
type fakeBackend struct {
	*tcpServer
	accepted atomic.Int32
	// handle answers one call on c; false closes the connection.
	handle func(c net.Conn, h *oncrpc.CallHeader) bool
	// mute: calls are read and answered only after mute is cleared (a
	// hung server).
	mute atomic.Bool
}

func startFakeBackend(t testing.TB, handle func(c net.Conn, h *oncrpc.CallHeader) bool) *fakeBackend {
	t.Helper()
	fb := &fakeBackend{handle: handle}
	fb.tcpServer = startTCPServer(t, func(c net.Conn) {
		fb.accepted.Add(1)
		go fb.conn(c)
	})
	return fb
}

func (fb *fakeBackend) conn(c net.Conn) {
	defer c.Close()
	rr := tcprpc.NewRecordReader(c, nil)
	var buf []byte
	for {
		rec, err := rr.ReadRecord(buf[:0])
		if err != nil {
			return
		}
		buf = rec
		var h oncrpc.CallHeader
		if _, err := h.Decode(rec); err != nil {
			continue
		}
		for fb.mute.Load() {
			time.Sleep(5 * time.Millisecond) // hung: answers after waking up
		}
		if h.Proc == 0 {
			if writeReply(c, oncrpc.AcceptedReply(h.XID, oncrpc.Success)) != nil {
				return
			}
			continue
		}
		if fb.handle != nil && !fb.handle(c, &h) {
			return
		}
	}
}

func writeReply(c net.Conn, rh oncrpc.ReplyHeader) error {
	b := make([]byte, rh.EncodedLen())
	e := xdr.NewEncoder(b)
	if err := rh.Encode(&e); err != nil {
		return err
	}
	return tcprpc.NewRecordWriter(c, nil).WriteRecord(e.Bytes(), nil, nil)
}

// replyStart writes a record marker announcing size bytes (last
// fragment) and the first bytes of a reply to xid: not the whole record.
func replyStart(c net.Conn, xid uint32, size uint32) error {
	b := make([]byte, 4+100)
	binary.BigEndian.PutUint32(b, 1<<31|size)
	binary.BigEndian.PutUint32(b[4:], xid)
	binary.BigEndian.PutUint32(b[8:], 1) // REPLY
	_, err := c.Write(b)
	return err
}

// nfsRead3 sends an NFSv3 READ (the fake backend does not look at its
// arguments) and returns the reply header.
func nfsRead3(t *testing.T, c *rdmaClient, timeout time.Duration) (oncrpc.ReplyHeader, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := new(enc).opaque(make([]byte, 8)).u64(0).u32(4096).b
	var h oncrpc.ReplyHeader
	rep, err := c.call(ctx, ulb.ProgNFS, 3, nfs3Read, args, nil, nil)
	if err != nil {
		return h, err
	}
	_, err = h.Decode(rep)
	return h, err
}

func null3(c *rdmaClient, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := c.call(ctx, ulb.ProgNFS, 3, nfs3Null, nil, nil, nil)
	return err
}

func wantSystemErr(t *testing.T, h oncrpc.ReplyHeader, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("READ not answered: %v", err)
	}
	if h.Stat != oncrpc.MsgAccepted || h.AcceptStat != oncrpc.SystemErr {
		t.Fatalf("READ answered %+v, want SYSTEM_ERR", h)
	}
}

// A reply record above max_reply_bytes: that call is answered SYSTEM_ERR
// and not sent again; the connection is replaced once; the client and
// its other calls carry on.
func TestForwardBackendReplyTooLarge(t *testing.T) {
	fb := startFakeBackend(t, func(c net.Conn, h *oncrpc.CallHeader) bool {
		return replyStart(c, h.XID, 2<<20) == nil // 2 MiB > 1088 KiB
	})
	gw := startGateway(t, fb.addr(), nil)
	c := dialRDMA(t, gw.Addr().String())
	h, err := nfsRead3(t, c, 10*time.Second)
	wantSystemErr(t, h, err)
	if err := null3(c, 10*time.Second); err != nil {
		t.Fatalf("NULL after the refused reply: %v", err)
	}
	m := gw.Metrics()
	if v := gwtest.Metric(t, m, "rdmagw_backend_calls_failed_total", "reason", "reply_too_large"); v != 1 {
		t.Errorf("calls failed{reply_too_large} = %v, want 1", v)
	}
	if v := gwtest.Metric(t, m, "rdmagw_replies_total", "procedure", "READ", "status", "system_err"); v != 1 {
		t.Errorf("READ replies{system_err} = %v, want 1", v)
	}
	if v := gwtest.Metric(t, m, "rdmagw_backend_reconnects_total"); v != 1 {
		t.Errorf("reconnects = %v, want 1 (the refused record's connection replaced once)", v)
	}
	if v := gwtest.Metric(t, m, "rdmagw_credits_in_use"); v != 0 {
		t.Errorf("credits in use = %v", v)
	}
}

// The server closes the connection inside the same call's reply every
// time: the call is sent three times, then answered SYSTEM_ERR.
func TestForwardBackendClosesInsideReply(t *testing.T) {
	fb := startFakeBackend(t, func(c net.Conn, h *oncrpc.CallHeader) bool {
		replyStart(c, h.XID, 1000)
		return false
	})
	gw := startGateway(t, fb.addr(), func(c *gateway.Config) {
		c.Backend.ReconnectInitial = 10 * time.Millisecond
	})
	c := dialRDMA(t, gw.Addr().String())
	h, err := nfsRead3(t, c, 20*time.Second)
	wantSystemErr(t, h, err)
	if err := null3(c, 10*time.Second); err != nil {
		t.Fatalf("NULL after the broken replies: %v", err)
	}
	m := gw.Metrics()
	if v := gwtest.Metric(t, m, "rdmagw_backend_calls_failed_total", "reason", "reply_broken"); v != 1 {
		t.Errorf("calls failed{reply_broken} = %v, want 1", v)
	}
	if v := gwtest.Metric(t, m, "rdmagw_backend_reconnects_total"); v != 3 {
		t.Errorf("reconnects = %v, want 3 (one per broken reply)", v)
	}
	if v := fb.accepted.Load(); v != 4 {
		t.Errorf("backend connections = %d, want 4", v)
	}
}

// A server that answers with bytes that are not RPC records: the
// gateway reconnects with exponential backoff from the first failure
// (not at once, thousands of times a second) and gives up after
// give_up_after although every dial succeeds.
func TestForwardBackendGarbageBacksOffAndGivesUp(t *testing.T) {
	fb := startFakeBackend(t, func(c net.Conn, h *oncrpc.CallHeader) bool {
		c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
		return true
	})
	const (
		initial = 50 * time.Millisecond
		most    = 400 * time.Millisecond
		giveUp  = 2 * time.Second
	)
	gw := startGateway(t, fb.addr(), func(c *gateway.Config) {
		c.Backend.ReconnectInitial = initial
		c.Backend.ReconnectMax = most
		c.Backend.GiveUpAfter = giveUp
	})
	c := dialRDMA(t, gw.Addr().String())
	start := time.Now()
	if _, err := nfsRead3(t, c, 20*time.Second); err == nil {
		t.Fatal("READ answered by a server that speaks no RPC")
	}
	m := gw.Metrics()
	gwtest.WaitFor(t, 20*time.Second, "the give-up", func() bool {
		return gwtest.Metric(t, m, "rdmagw_backend_give_ups_total") == 1
	})
	if el := time.Since(start); el < giveUp {
		t.Errorf("gave up after %v, before give_up_after %v", el, giveUp)
	}
	// Waits are at least half the doubled backoff: 25, 50, 100 ms, then
	// 200 ms each; at most 3 + 9 of them fit in 2 s (a loaded machine
	// only makes fewer).
	r := gwtest.Metric(t, m, "rdmagw_backend_reconnects_total")
	if r < 2 || r > 13 {
		t.Errorf("reconnects = %v in give_up_after %v, want 2..13 (exponential backoff)", r, giveUp)
	}
	// The session counts its close after its teardown, a moment after
	// the give-up.
	gwtest.WaitFor(t, 10*time.Second, "closed{backend_gone}", func() bool {
		return gwtest.Metric(t, m, "rdmagw_connections_closed_total", "reason", "backend_gone") == 1
	})
	if a := fb.accepted.Load(); float64(a) != r+1 {
		t.Errorf("backend connections = %d, want reconnects+1 = %v", a, r+1)
	}
}

// A connected server that stops answering (a hung process): the NULL
// ping goes unanswered, the connection is replaced, the calls are sent
// again and answered once the server is back.
func TestForwardBackendSilentPinged(t *testing.T) {
	fb := startFakeBackend(t, nil)
	gw := startGateway(t, fb.addr(), func(c *gateway.Config) {
		c.Backend.PingInterval = 100 * time.Millisecond
		c.Backend.PingTimeout = 200 * time.Millisecond
		c.Backend.ReconnectInitial = 10 * time.Millisecond
	})
	c := dialRDMA(t, gw.Addr().String())
	if err := null3(c, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	m := gw.Metrics()
	// An idle connection is pinged and answers.
	gwtest.WaitFor(t, 10*time.Second, "an answered ping", func() bool {
		return gwtest.Metric(t, m, "rdmagw_backend_pings_total", "result", "ok") >= 1
	})
	fb.mute.Store(true)
	errc := make(chan error, 1)
	go func() { errc <- null3(c, 30*time.Second) }()
	gwtest.WaitFor(t, 10*time.Second, "a ping timeout", func() bool {
		return gwtest.Metric(t, m, "rdmagw_backend_pings_total", "result", "timeout") >= 1 &&
			gwtest.Metric(t, m, "rdmagw_backend_reconnects_total") >= 1
	})
	fb.mute.Store(false)
	if err := <-errc; err != nil {
		t.Fatalf("NULL sent while the server was silent, not answered after it came back: %v", err)
	}
	if v := gwtest.Metric(t, m, "rdmagw_backend_errors_total", "where", "ping_timeout"); v < 1 {
		t.Errorf("backend errors{ping_timeout} = %v", v)
	}
}

// A real nfs-ganesha stopped with SIGSTOP: its kernel still accepts
// connections, but nothing answers. The gateway notices by its ping and
// gives up on it after give_up_after; clients that come after SIGCONT
// are served.
func TestForwardBackendGaneshaStopped(t *testing.T) {
	g := nfstest.StartGanesha(t)
	if g.Pid == 0 {
		t.Skip("external ganesha: cannot stop it")
	}
	gw := startGateway(t, g.NFSAddr, func(c *gateway.Config) {
		c.Backend.PingInterval = 100 * time.Millisecond
		c.Backend.PingTimeout = 300 * time.Millisecond
		c.Backend.ReconnectInitial = 20 * time.Millisecond
		c.Backend.ReconnectMax = 200 * time.Millisecond
		c.Backend.GiveUpAfter = 2 * time.Second
	})
	c := dialRDMA(t, gw.Addr().String())
	if err := null3(c, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(g.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := sync.OnceFunc(func() { syscall.Kill(g.Pid, syscall.SIGCONT) })
	t.Cleanup(cont)
	m := gw.Metrics()
	gwtest.WaitFor(t, 20*time.Second, "the give-up on the stopped server", func() bool {
		return gwtest.Metric(t, m, "rdmagw_backend_give_ups_total") == 1
	})
	if v := gwtest.Metric(t, m, "rdmagw_backend_pings_total", "result", "timeout"); v < 1 {
		t.Errorf("ping timeouts = %v", v)
	}
	cont()
	c2 := dialRDMA(t, gw.Addr().String())
	if err := null3(c2, 10*time.Second); err != nil {
		t.Fatalf("NULL after SIGCONT: %v", err)
	}
}
