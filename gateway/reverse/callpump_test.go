package reverse_test

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/gateway/reverse"
	"github.com/rdmagw/rdmagw/internal/sockread"
	"github.com/rdmagw/rdmagw/ulb"
)

// A client with one call at a time costs the reader one read per call:
// the pump waits for the next call without the read that returns EAGAIN
// (client.go, callPump; internal/sockread). A net.Conn read loop makes
// two reads per call.
func TestReverseReaderOneReadPerCall(t *testing.T) {
	var mu sync.Mutex
	var readers []*sockread.Reader
	t.Cleanup(reverse.SetReaderHook(func(r *sockread.Reader) {
		mu.Lock()
		readers = append(readers, r)
		mu.Unlock()
	}))
	srv := startFakeServer(t, 32, nil)
	gw := startReverse(t, srv.addr(), nil)
	cl := dialRaw(t, gw.Addr().String())
	fh := make([]byte, 32)
	const n = 200
	for i := range n {
		if err := cl.send(rpcCall(uint32(i+1), ulb.ProgNFS, 3, 1, xdrOpaque(nil, fh))); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.recv(10 * time.Second); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(readers) != 1 {
		t.Fatalf("%d client readers started, want 1", len(readers))
	}
	r := readers[0]
	if !r.SkipsEmpty() {
		t.Skip("TCP_INQ not available: every wait is preceded by a read")
	}
	reads, waits := r.Reads(), r.Waits()
	t.Logf("%d calls one at a time: %d reads, %d waits", n, reads, waits)
	if reads > n+n/10 || waits < n/2 {
		t.Errorf("%d calls one at a time took %d reads and %d waits; want about one read and one wait per call", n, reads, waits)
	}
}

// A reset right behind the client's last bytes, when those bytes are not
// a whole call (nothing is written back that would fail on the reset),
// raises no edge for the pump's wait once the read took the bytes: the
// reader looks again within clientResetCheck, finds the reset and ends
// the session. The bytes and the reset land before the reader starts
// (the hook holds it), so the runtime has consumed their one edge.
func TestReverseReaderSeesResetBehindPartialCall(t *testing.T) {
	t.Cleanup(reverse.SetClientResetCheck(100 * time.Millisecond))
	t.Cleanup(reverse.SetReaderHook(func(*sockread.Reader) { time.Sleep(200 * time.Millisecond) }))
	srv := startFakeServer(t, 32, nil)
	gw := startReverse(t, srv.addr(), nil)
	cl := dialRaw(t, gw.Addr().String())
	rec := binary.BigEndian.AppendUint32(nil, 1<<31|100)                       // a 100-byte record...
	if _, err := cl.conn.Write(append(rec, make([]byte, 40)...)); err != nil { // ...cut at 40
		t.Fatal(err)
	}
	cl.conn.SetLinger(0)
	cl.conn.Close() // RST
	start := time.Now()
	gwtest.WaitFor(t, 5*time.Second, "the session to end after the client's reset", func() bool {
		return gwtest.Metric(t, gw.Metrics(), "rdmagw_connections_closed_total") == 1
	})
	t.Logf("session ended %v after the reset", time.Since(start).Round(time.Millisecond))
	// Ended by the reset (an ordinary client disconnect), not by the
	// check's own deadline taken for a read error.
	if v := gwtest.Metric(t, gw.Metrics(), "rdmagw_connections_closed_total", "reason", "client"); v != 1 {
		t.Errorf("connections closed for reason client = %v, want 1: the session ended, but not on the reset", v)
	}
}
