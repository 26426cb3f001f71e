package reverse_test

import (
	"bytes"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfstest"
)

// getattr3 is an NFSv3 GETATTR call; its fake reply body depends on the
// XID so that a reply given to the wrong call shows.
func getattr3(xid uint32) []byte { return rpcCall(xid, progNFS, 3, 1, xdrOpaque(nil, []byte("fh"))) }

func getattr3Reply(xid uint32) []byte {
	return rpcAccepted(xid, nfstest.Pattern(200, uint64(xid)))
}

// A server that stops answering but keeps its connection is found out
// by the NULL pings on the reserve credit; the gateway reconnects with
// backoff and sends the calls still waiting again, with their XIDs, and
// the client gets the right replies. A server that stays away past
// give_up_after gets the TCP client disconnected.
func TestReverseDeadServer(t *testing.T) {
	noLeaks(t, func(t *testing.T) {
		var deadConn atomic.Int32 // calls on this connection are never answered
		srv := startFakeServer(t, 32, func(c *fakeCall) (fakeAction, []byte) {
			if int32(c.conn) == deadConn.Load() {
				return fakeIgnore, nil
			}
			if c.proc == 1 {
				return fakeAnswer, getattr3Reply(c.xid)
			}
			return defaultFakeHandler(c)
		})
		const (
			pingEvery   = 200 * time.Millisecond
			pingTimeout = 300 * time.Millisecond
			backoff     = 50 * time.Millisecond
			backoffMax  = 200 * time.Millisecond
			giveUp      = 1500 * time.Millisecond
		)
		rev, logs := startReverseLogged(t, srv.addr(), func(c *gateway.Config) {
			c.Reverse.PingInterval, c.Reverse.PingTimeout = pingEvery, pingTimeout
			c.Backend.ReconnectInitial, c.Backend.ReconnectMax = backoff, backoffMax
			c.Backend.GiveUpAfter = giveUp
		})
		m := func(name string, labels ...string) float64 { return gwtest.Metric(t, rev.Metrics(), name, labels...) }
		cl := dialRaw(t, rev.Addr().String())
		expect := func(xids ...uint32) {
			t.Helper()
			want := map[uint32][]byte{}
			for _, x := range xids {
				want[x] = getattr3Reply(x)
			}
			for range xids {
				r, err := cl.recv(20 * time.Second)
				if err != nil {
					t.Fatalf("waiting for replies to %#x: %v", xids, err)
				}
				x := uint32(0)
				if len(r) >= 4 {
					x = uint32(r[0])<<24 | uint32(r[1])<<16 | uint32(r[2])<<8 | uint32(r[3])
				}
				if w, ok := want[x]; !ok || !bytes.Equal(r, w) {
					t.Fatalf("unexpected reply for xid %#x (%d bytes)", x, len(r))
				}
				delete(want, x)
			}
		}

		if err := cl.send(getattr3(0xa1)); err != nil {
			t.Fatal(err)
		}
		expect(0xa1)
		// The server hangs: calls reach it, nothing comes back.
		deadConn.Store(1)
		for _, x := range []uint32{0xb1, 0xb2, 0xb3} {
			if err := cl.send(getattr3(x)); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		expect(0xb1, 0xb2, 0xb3)
		took := time.Since(start)
		if took < pingTimeout {
			t.Errorf("replies after %v: sooner than a ping can time out", took)
		}
		// Each stuck call reached the dead connection, then the new one,
		// byte for byte the same, same XID.
		byXID := map[uint32][]fakeCall{}
		for _, c := range srv.seen() {
			byXID[c.xid] = append(byXID[c.xid], c)
		}
		for _, x := range []uint32{0xb1, 0xb2, 0xb3} {
			cs := byXID[x]
			if len(cs) != 2 || cs[0].conn != 1 || cs[1].conn != 2 || !bytes.Equal(cs[0].rpc, getattr3(x)) || !bytes.Equal(cs[1].rpc, getattr3(x)) {
				t.Errorf("xid %#x: server saw %d copies (want one per connection, identical)", x, len(cs))
			}
		}
		if n := m("rdmagw_backend_pings_total", "result", "timeout"); n != 1 {
			t.Errorf("ping timeouts = %v, want 1", n)
		}
		if n := m("rdmagw_backend_pings_total", "result", "ok"); n < 1 {
			t.Errorf("pings answered = %v", n)
		}
		if n := m("rdmagw_backend_reconnects_total"); n != 1 {
			t.Errorf("reconnects = %v, want 1", n)
		}
		if n := m("rdmagw_backend_errors_total", "where", "lost"); n != 1 {
			t.Errorf("connections lost = %v, want 1", n)
		}
		if n := m("rdmagw_backend_rdma_connections"); n != 1 {
			t.Errorf("RDMA connections open = %v, want 1", n)
		}

		// Now the server hangs and refuses new connections: the gateway
		// retries with backoff, then gives up and disconnects the client.
		srv.mu.Lock()
		before := len(srv.attempts)
		srv.mu.Unlock()
		srv.refuse.Store(true)
		deadConn.Store(2)
		if err := cl.send(getattr3(0xc1)); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		r, err := cl.recv(20 * time.Second)
		if !errors.Is(err, io.EOF) {
			t.Fatalf("after give_up_after the client got %d bytes, %v; want its connection closed", len(r), err)
		}
		if took := time.Since(start); took < giveUp {
			t.Errorf("client disconnected after %v, before give_up_after (%v)", took, giveUp)
		}
		srv.mu.Lock()
		attempts := srv.attempts[before:]
		srv.mu.Unlock()
		if len(attempts) < 4 {
			t.Fatalf("%d reconnection attempts in %v", len(attempts), giveUp)
		}
		// Backoff: 50ms, 100ms, 200ms, then 200ms (the max) between tries
		// (the last wait is cut short by the give-up deadline).
		for i := 1; i < len(attempts)-1; i++ {
			want := min(backoff<<(i-1), backoffMax)
			if gap := attempts[i].Sub(attempts[i-1]); gap < want*8/10 {
				t.Errorf("attempt %d came %v after the previous, want at least %v", i+1, gap, want)
			}
		}
		if len(attempts) > 12 {
			t.Errorf("%d attempts in %v: no backoff", len(attempts), giveUp)
		}
		gwtest.WaitFor(t, 5*time.Second, "the give-up counted", func() bool {
			return m("rdmagw_connections_closed_total", "reason", "backend_gone") == 1
		})
		if n := m("rdmagw_backend_give_ups_total"); n != 1 {
			t.Errorf("give ups = %v, want 1", n)
		}
		if n := m("rdmagw_backend_errors_total", "where", "connect"); n < float64(len(attempts)) {
			t.Errorf("failed connects counted %v, attempts %d", n, len(attempts))
		}
		if n := m("rdmagw_calls_dropped_total", "reason", "backend_gone"); n != 1 {
			t.Errorf("calls dropped for backend_gone = %v, want 1", n)
		}
		if n := m("rdmagw_backend_rdma_connections"); n != 0 {
			t.Errorf("RDMA connections open = %v after the give-up", n)
		}
		// The give-up is the one ERROR line, with the client; the
		// client's disconnect says why.
		if n := gwtest.Logged(t, logs, "error"); n != 1 || gwtest.Logged(t, logs, "error", "peer", nil, "give_up_after", nil) != 1 {
			t.Errorf("%d ERROR lines, want 1: the give-up, with the peer", n)
		}
		if n := gwtest.Logged(t, logs, "info", "reason", "backend_gone", "peer", nil); n != 1 {
			t.Errorf("%d INFO lines of a client disconnected for backend_gone, want 1", n)
		}
		if n := gwtest.PoolInUse(t, rev.Metrics()); n != 0 {
			t.Errorf("pool: %d bytes in use after the client is gone", n)
		}
	})
}

// A client that leaves while its RDMA connection is being re-established
// stops the reconnection: no dialing goes on for a session that is over
// (up to give_up_after, with the device possibly closed under it).
func TestReverseClientLeavesDuringReconnect(t *testing.T) {
	noLeaks(t, func(t *testing.T) {
		srv := startFakeServer(t, 32, nil)
		rev, _ := startReverseLogged(t, srv.addr(), func(c *gateway.Config) {
			c.Reverse.PingInterval, c.Reverse.PingTimeout = 100*time.Millisecond, 200*time.Millisecond
			c.Backend.ReconnectInitial, c.Backend.ReconnectMax = 20*time.Millisecond, 40*time.Millisecond
			c.Backend.GiveUpAfter = time.Minute
		})
		cl := dialRaw(t, rev.Addr().String())
		if err := cl.send(rpcCall(1, progNFS, 3, 0, nil)); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.recv(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		// The server crashes and stays down: the pinger notices.
		srv.refuse.Store(true)
		srv.closeConns()
		gwtest.WaitFor(t, 10*time.Second, "reconnection attempts", func() bool {
			return gwtest.Metric(t, rev.Metrics(), "rdmagw_backend_errors_total", "where", "connect") >= 2
		})
		cl.conn.Close()
		gwtest.WaitFor(t, 10*time.Second, "the session to end", func() bool {
			return gwtest.Metric(t, rev.Metrics(), "rdmagw_connections_closed_total") == 1
		})
		srv.mu.Lock()
		n := len(srv.attempts)
		srv.mu.Unlock()
		time.Sleep(300 * time.Millisecond) // several backoff periods
		srv.mu.Lock()
		after := len(srv.attempts)
		srv.mu.Unlock()
		if after != n {
			t.Errorf("%d connection attempts after the client left", after-n)
		}
	})
}
