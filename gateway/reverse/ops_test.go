package reverse_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
)

// Reverse mode: the live view lists a TCP client with the bytes it moved
// and its RDMA connection; calls in flight at a drain are answered before
// the client is disconnected, and one past the deadline is abandoned.
func TestReverseSessionsAndDrain(t *testing.T) {
	srv := startFakeServer(t, 32, func(c *fakeCall) (fakeAction, []byte) {
		body := binary.BigEndian.AppendUint32(nil, c.xid^0x5a5a5a5a) // verifiable per call
		if c.proc == 0 {
			return fakeAnswer, rpcAccepted(c.xid, nil)
		}
		return fakeHold, rpcAccepted(c.xid, body)
	})
	r := startReverse(t, srv.addr(), nil)
	c := dialRaw(t, r.Addr().String())

	null := gwtest.EncodeCall(0x1000, 100003, 3, 0, nil)
	if err := c.send(null); err != nil {
		t.Fatal(err)
	}
	rep, err := c.recv(10 * time.Second)
	if err != nil || !bytes.Equal(rep, rpcAccepted(0x1000, nil)) {
		t.Fatalf("NULL reply %x, %v", rep, err)
	}
	gwtest.SessionsOf(t, r.Sessions, 1, "one client")
	// The reply is counted once written: the client may read it first.
	var cl gateway.SessionInfo
	gwtest.WaitFor(t, 10*time.Second, "the reply's bytes to be counted", func() bool {
		s := r.Sessions()
		if len(s.Clients) == 1 {
			cl = s.Clients[0]
		}
		return cl.BytesOut > 0
	})
	if cl.Mode != "reverse" || cl.BytesIn != uint64(4+len(null)) || cl.BytesOut != uint64(4+len(rep)) {
		t.Errorf("bytes in %d out %d, want %d and %d", cl.BytesIn, cl.BytesOut, 4+len(null), 4+len(rep))
	}
	if cl.Backend.Transport != "rdma" || cl.Backend.Local == "" || cl.Backend.Remote != srv.addr() || cl.CreditsGranted == 0 || cl.InlineSend == 0 {
		t.Errorf("session %+v", cl)
	}

	// Two GETATTRs held at the server, then a drain.
	for _, xid := range []uint32{0x2001, 0x2002} {
		if err := c.send(gwtest.EncodeCall(xid, 100003, 3, 1, make([]byte, 8))); err != nil {
			t.Fatal(err)
		}
	}
	gwtest.WaitFor(t, 10*time.Second, "two calls in flight", func() bool {
		s := r.Sessions()
		return len(s.Clients) == 1 && s.Clients[0].CallsInFlight == 2
	})
	drained := make(chan gateway.DrainResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		drained <- r.Drain(ctx)
	}()
	gwtest.WaitFor(t, 10*time.Second, "the client to be draining", func() bool {
		s := r.Sessions()
		return len(s.Clients) == 1 && s.Clients[0].Draining
	})
	// A call sent during the drain is not forwarded.
	if err := c.send(gwtest.EncodeCall(0x2003, 100003, 3, 1, make([]byte, 8))); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-drained:
		t.Fatalf("drain ended with calls held at the server: %+v", res)
	case <-time.After(200 * time.Millisecond):
	}
	srv.release()
	got := map[uint32]bool{}
	for range 2 {
		rep, err := c.recv(10 * time.Second)
		if err != nil {
			t.Fatalf("reply to a call in flight at the drain: %v", err)
		}
		xid := binary.BigEndian.Uint32(rep)
		body := binary.BigEndian.AppendUint32(nil, xid^0x5a5a5a5a)
		if !bytes.Equal(rep, rpcAccepted(xid, body)) {
			t.Fatalf("reply %x differs", rep)
		}
		got[xid] = true
	}
	if !got[0x2001] || !got[0x2002] {
		t.Fatalf("replies %v", got)
	}
	res := <-drained
	if res.TimedOut || res.Abandoned != 0 || res.Clients != 1 {
		t.Fatalf("drain result %+v", res)
	}
	if _, err := c.recv(10 * time.Second); err == nil {
		t.Fatal("a reply to the call sent during the drain, or no disconnect")
	}
	gwtest.SessionsOf(t, r.Sessions, 0, "the client to be disconnected")
	for _, fc := range srv.seen() {
		if fc.xid == 0x2003 {
			t.Error("the call sent during the drain reached the server")
		}
	}
}

func TestReverseDrainDeadline(t *testing.T) {
	srv := startFakeServer(t, 32, func(c *fakeCall) (fakeAction, []byte) { return fakeIgnore, nil })
	// The abandoned call's RDMA connection is given up by the ping (its
	// registered memory stays exposed until then): keep that short.
	r := startReverse(t, srv.addr(), func(c *gateway.Config) {
		c.Reverse.PingInterval, c.Reverse.PingTimeout = 100*time.Millisecond, 300*time.Millisecond
	})
	c := dialRaw(t, r.Addr().String())
	if err := c.send(gwtest.EncodeCall(0x3001, 100003, 3, 1, make([]byte, 8))); err != nil {
		t.Fatal(err)
	}
	gwtest.WaitFor(t, 10*time.Second, "a call in flight", func() bool {
		s := r.Sessions()
		return len(s.Clients) == 1 && s.Clients[0].CallsInFlight == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if res := r.Drain(ctx); !res.TimedOut || res.Abandoned != 1 {
		t.Fatalf("drain result %+v, want 1 abandoned", res)
	}
	if v := gwtest.Metric(t, r.Metrics(), "rdmagw_drain_abandoned_calls_total"); v != 1 {
		t.Errorf("abandoned = %v", v)
	}
	gwtest.SessionsOf(t, r.Sessions, 0, "the client to be disconnected")
}
