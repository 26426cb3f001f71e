package reverse_test

import (
	"bytes"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/gateway/reverse"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/rdmarpc"
)

// readReplies reads n replies in the background and checks each against
// want(xid), byte for byte, each XID once.
func readReplies(t *testing.T, cl *rawClient, n int, want func(xid uint32) []byte) (done chan struct{}, got *atomic.Int64) {
	done, got = make(chan struct{}), new(atomic.Int64)
	go func() {
		defer close(done)
		seen := map[uint32]bool{}
		for range n {
			r, err := cl.recv(60 * time.Second)
			if err != nil {
				t.Errorf("after %d replies: %v", got.Load(), err)
				return
			}
			x := binary.BigEndian.Uint32(r)
			if seen[x] || !bytes.Equal(r, want(x)) {
				t.Errorf("reply %d: xid %#x (seen before: %v), %d bytes, not the reply to that call", got.Load(), x, seen[x], len(r))
				return
			}
			seen[x] = true
			got.Add(1)
		}
	}()
	return done, got
}

// Never more calls at the server than its grant less the reserve credit
// of the pings, however fast the client pipelines, and the window is
// used in full.
func TestReverseCreditsBoundCallsInFlight(t *testing.T) {
	noLeaks(t, func(t *testing.T) {
		const grant = 8
		srv := startFakeServer(t, grant, func(c *fakeCall) (fakeAction, []byte) {
			if c.proc == 1 {
				return fakeHold, getattr3Reply(c.xid) // answered in batches
			}
			return defaultFakeHandler(c)
		})
		srv.batch = 3 * time.Millisecond
		rev, _ := startReverseLogged(t, srv.addr(), nil)
		cl := dialRaw(t, rev.Addr().String())
		const n = 500
		done, got := readReplies(t, cl, n, getattr3Reply)
		var all []byte
		for i := range n {
			call := getattr3(uint32(0x10000 + i))
			all = binary.BigEndian.AppendUint32(all, 1<<31|uint32(len(call)))
			all = append(all, call...)
		}
		if _, err := cl.conn.Write(all); err != nil { // 500 calls, one write
			t.Fatal(err)
		}
		<-done
		if got.Load() != n {
			t.Fatalf("%d replies of %d", got.Load(), n)
		}
		_, maxData, maxAll, _ := srv.stats()
		t.Logf("grant %d: at most %d calls in flight at the server (%d with pings)", grant, maxData, maxAll)
		if maxData != grant-1 {
			t.Errorf("at most %d data calls in flight at the server, want exactly grant-1 = %d", maxData, grant-1)
		}
		if maxAll > grant {
			t.Errorf("%d calls in flight at the server, over its grant of %d", maxAll, grant)
		}
	})
}

// A client with max_calls_per_client calls at the server is not read
// any further: its writes block once the socket buffers are full, and
// nothing is queued in the gateway. The stall is counted, and every call
// is answered once the server answers.
func TestReverseBackpressureMaxCallsPerClient(t *testing.T) {
	noLeaks(t, func(t *testing.T) {
		var holding atomic.Bool
		holding.Store(true)
		pad := bytes.Repeat([]byte{0x5a}, 2000)
		call := func(x uint32) []byte { return rpcCall(x, progNFS, 3, 1, append(xdrOpaque(nil, []byte("fh")), pad...)) }
		srv := startFakeServer(t, 32, func(c *fakeCall) (fakeAction, []byte) {
			if c.proc == 1 && holding.Load() {
				return fakeHold, getattr3Reply(c.xid)
			}
			if c.proc == 1 {
				return fakeAnswer, getattr3Reply(c.xid)
			}
			return defaultFakeHandler(c)
		})
		const perClient = 4
		rev, _ := startReverseLogged(t, srv.addr(), func(c *gateway.Config) {
			c.Reverse.MaxCallsPerClient = perClient
			c.Reverse.PingInterval = 0
		})
		cl := dialRaw(t, rev.Addr().String())
		cl.conn.SetWriteBuffer(16 << 10)
		const n = 4000 // 8 MB of calls: far more than socket buffers hold
		var sent atomic.Int64
		wrote := make(chan error, 1)
		go func() {
			for i := range n {
				if err := cl.send(call(uint32(i + 1))); err != nil {
					wrote <- err
					return
				}
				sent.Add(1)
			}
			wrote <- nil
		}()
		// The gateway's reader waits for a call slot: the stall is
		// counted with every slot at the server, which holds them, so it
		// cannot read on until the server answers.
		gwtest.WaitFor(t, 20*time.Second, "the client's reader to stall with max_calls_per_client calls at the server", func() bool {
			inflight, _, _, _ := srv.stats()
			return inflight == perClient && gwtest.Metric(t, rev.Metrics(), "rdmagw_client_backpressure_total") >= 1
		})
		select {
		case err := <-wrote:
			t.Fatalf("the client wrote all %d calls (%v): its socket was read without bound", n, err)
		default:
		}
		inflight, maxData, _, _ := srv.stats()
		t.Logf("client held back after %d calls written so far; %d at the server", sent.Load(), inflight)
		if maxData != perClient || inflight != perClient {
			t.Errorf("%d calls at the server (max %d), want max_calls_per_client = %d", inflight, maxData, perClient)
		}
		// The server answers: everything drains, every reply right.
		done, got := readReplies(t, cl, n, getattr3Reply)
		holding.Store(false)
		srv.release()
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
		<-done
		if got.Load() != n {
			t.Fatalf("%d replies of %d", got.Load(), n)
		}
		if _, maxData, _, _ = srv.stats(); maxData > perClient {
			t.Errorf("%d calls at the server at once, over max_calls_per_client", maxData)
		}
	})
}

// poolCanGive reports whether p has a buffer of n bytes free now (the
// buffer is given back at once).
func poolCanGive(p *rdmarpc.Pool, n int) bool {
	b, err := p.Get(n)
	if err != nil {
		return false
	}
	b.Release()
	return true
}

// write3 is an NFSv3 WRITE of data at off.
func write3(xid uint32, off uint64, data []byte) []byte {
	a := xdrOpaque(nil, []byte("a file handle"))
	a = binary.BigEndian.AppendUint64(a, off)
	a = gwtest.BE32(a, uint32(len(data)), 0)
	return rpcCall(xid, progNFS, 3, 7, xdrOpaque(a, data))
}

func write3Reply(xid uint32) []byte {
	return rpcAccepted(xid, gwtest.BE32(nil, 0, 0, 0, 60000, 0, 1, 2))
}

// When registered memory runs out the gateway stops reading its clients
// until buffers come back, instead of failing calls; the WRITE payloads
// reach the server byte for byte.
func TestReverseBackpressurePoolExhausted(t *testing.T) {
	noLeaks(t, func(t *testing.T) {
		var holding atomic.Bool
		holding.Store(true)
		srv := startFakeServer(t, 32, func(c *fakeCall) (fakeAction, []byte) {
			if c.proc == 7 {
				if holding.Load() {
					return fakeHold, write3Reply(c.xid)
				}
				return fakeAnswer, write3Reply(c.xid)
			}
			return defaultFakeHandler(c)
		})
		rev, _ := startReverseLogged(t, srv.addr(), func(c *gateway.Config) {
			c.Pool.Classes = []gateway.ByteSize{4 << 10, 64 << 10}
			c.Pool.MaxBytes = 1 << 20
			c.Pool.SlabBytes = 128 << 10
			c.RDMA.Credits = 16
			c.Reverse.PingInterval = 0
		})
		cl := dialRaw(t, rev.Addr().String())
		cl.conn.SetWriteBuffer(16 << 10)
		const n = 60
		payload := func(i int) []byte { return nfstest.Pattern(60000, uint64(i)) }
		var sent atomic.Int64
		wrote := make(chan error, 1)
		go func() {
			for i := range n {
				if err := cl.send(write3(uint32(i+1), uint64(i)*60000, payload(i))); err != nil {
					wrote <- err
					return
				}
				sent.Add(1)
			}
			wrote <- nil
		}()
		// The pool runs out with WRITEs at the server, which holds them:
		// the reader waits for a buffer that comes back only when the
		// server answers.
		gwtest.WaitFor(t, 20*time.Second, "the pool to run out with WRITEs at the server", func() bool {
			inflight, _, _, _ := srv.stats()
			return inflight >= 2 && !poolCanGive(reverse.PoolOf(rev), 60000)
		})
		select {
		case err := <-wrote:
			t.Fatalf("the client wrote all %d WRITEs (%v) with the pool exhausted", n, err)
		default:
		}
		inflight, _, _, _ := srv.stats()
		t.Logf("client held back after %d WRITEs written so far; %d at the server", sent.Load(), inflight)
		if inflight < 2 || inflight >= 15 {
			t.Errorf("%d WRITEs at the server: want the pool, not the credits (15), to be the bound", inflight)
		}
		if n := gwtest.Metric(t, rev.Metrics(), "rdmagw_gateway_error_replies_total"); n != 0 {
			t.Errorf("%v error replies while the pool was exhausted", n)
		}
		done, got := readReplies(t, cl, n, write3Reply)
		holding.Store(false)
		srv.release()
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
		<-done
		if got.Load() != n {
			t.Fatalf("%d replies of %d", got.Load(), n)
		}
		seen := map[uint32]bool{}
		for _, c := range srv.seen() {
			if c.proc != 7 {
				continue
			}
			i := int(c.xid) - 1
			if seen[c.xid] || !bytes.Equal(c.rpc, write3(c.xid, uint64(i)*60000, payload(i))) {
				t.Errorf("WRITE xid %d reached the server altered (or twice)", c.xid)
			}
			seen[c.xid] = true
		}
		if len(seen) != n {
			t.Errorf("server received %d WRITEs of %d", len(seen), n)
		}
		if n := gwtest.Metric(t, rev.Metrics(), "rdmagw_gateway_error_replies_total"); n != 0 {
			t.Errorf("%v error replies", n)
		}
	})
}

// A retransmission whose XID is still at the server is dropped (and
// counted), as Linux nfsd drops a request its reply cache holds in
// progress; one sent after the reply went out is forwarded like any call
// (the server's reply cache decides what to do with it).
func TestReverseRetransmit(t *testing.T) {
	noLeaks(t, func(t *testing.T) {
		var mu sync.Mutex
		hold := true
		srv := startFakeServer(t, 32, func(c *fakeCall) (fakeAction, []byte) {
			mu.Lock()
			defer mu.Unlock()
			if c.proc == 1 && hold {
				return fakeHold, getattr3Reply(c.xid)
			}
			if c.proc == 1 {
				return fakeAnswer, getattr3Reply(c.xid)
			}
			return defaultFakeHandler(c)
		})
		rev, logs := startReverseLogged(t, srv.addr(), nil)
		cl := dialRaw(t, rev.Addr().String())
		count := func() int {
			k := 0
			for _, c := range srv.seen() {
				if c.xid == 0x77 {
					k++
				}
			}
			return k
		}
		if err := cl.send(getattr3(0x77)); err != nil {
			t.Fatal(err)
		}
		gwtest.WaitFor(t, 10*time.Second, "the call at the server", func() bool { return count() == 1 })
		// Retransmitted while the server works on it: dropped.
		if err := cl.send(getattr3(0x77)); err != nil {
			t.Fatal(err)
		}
		gwtest.WaitFor(t, 10*time.Second, "the duplicate counted", func() bool {
			return gwtest.Metric(t, rev.Metrics(), "rdmagw_calls_dropped_total", "reason", "duplicate_xid") == 1
		})
		mu.Lock()
		hold = false
		mu.Unlock()
		srv.release()
		r, err := cl.recv(10 * time.Second)
		if err != nil || !bytes.Equal(r, getattr3Reply(0x77)) {
			t.Fatalf("reply: %d bytes, %v", len(r), err)
		}
		if r, err := cl.recv(300 * time.Millisecond); err == nil {
			t.Fatalf("a second reply (%d bytes) to the dropped duplicate", len(r))
		}
		// Retransmitted after the reply: forwarded and answered. At once
		// after the reply came, many times, so a reply-to-release race in
		// the gateway would show.
		for i := range 50 {
			if err := cl.send(getattr3(0x77)); err != nil {
				t.Fatal(err)
			}
			r, err := cl.recv(10 * time.Second)
			if err != nil || !bytes.Equal(r, getattr3Reply(0x77)) {
				t.Fatalf("retransmission %d after the reply: %d bytes, %v", i, len(r), err)
			}
		}
		if k := count(); k != 51 {
			t.Errorf("server saw xid 0x77 %d times, want 51", k)
		}
		if n := gwtest.Metric(t, rev.Metrics(), "rdmagw_calls_dropped_total", "reason", "duplicate_xid"); n != 1 {
			t.Errorf("duplicate_xid drops = %v, want 1", n)
		}
		if n := gwtest.Logged(t, logs, "warn", "xid", 0x77); n != 1 {
			t.Errorf("the drop is logged in %d WARN lines, want 1", n)
		}
	})
}
