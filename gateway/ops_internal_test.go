package gateway

import (
	"context"
	"sync"
	"testing"
	"time"
)

// wedgedClient is a client whose call-path lock is held.
type wedgedClient struct{ mu sync.Mutex }

func (c *wedgedClient) Info(time.Time) SessionInfo { return SessionInfo{Peer: "192.0.2.1:1"} }
func (c *wedgedClient) BeginDrain()                {}
func (c *wedgedClient) InFlight() int              { return 0 }
func (c *wedgedClient) Probe(ctx context.Context) error {
	return LockWithin(ctx, &c.mu, "session 192.0.2.1:1")
}

// The liveness probe fails while a client's lock is held or the accept
// loop is stuck on a request, and passes otherwise.
func TestAliveSeesAWedge(t *testing.T) {
	var tb ClientTable
	c := &wedgedClient{}
	tb.Add(c, func() {})
	// A probe that must fail gets a short deadline; one that must pass a
	// long one: its goroutines may wait long for a CPU on a loaded machine.
	probe := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return tb.Alive(ctx, nil)
	}
	const fails, passes = 200 * time.Millisecond, 10 * time.Second
	if err := probe(passes); err != nil {
		t.Fatalf("idle gateway: %v", err)
	}
	c.mu.Lock()
	if err := probe(fails); err == nil {
		t.Fatal("held session lock not seen")
	}
	c.mu.Unlock()
	if err := probe(passes); err != nil {
		t.Fatalf("after release: %v", err)
	}
	tb.AcceptBusy.Store(time.Now().Add(-acceptStall - time.Second).UnixNano())
	if err := probe(fails); err == nil {
		t.Fatal("stuck accept loop not seen")
	}
}

// Any finds a client the predicate holds for, and none once it left.
func TestClientTableAny(t *testing.T) {
	var tb ClientTable
	a, b := &wedgedClient{}, &wedgedClient{}
	is := func(want LiveClient) func(LiveClient) bool { return func(c LiveClient) bool { return c == want } }
	if tb.Any(is(a)) {
		t.Fatal("Any on an empty table")
	}
	tb.Add(a, func() {})
	tb.Add(b, func() {})
	if !tb.Any(is(b)) || !tb.Any(is(a)) {
		t.Fatal("Any missed a client in the table")
	}
	tb.Remove(b)
	if tb.Any(is(b)) {
		t.Fatal("Any found a client that left")
	}
}
