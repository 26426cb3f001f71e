package gateway

import (
	"context"
	"sync"
	"testing"
	"time"
)

// wedgedClient is a client whose call-path lock is held.
type wedgedClient struct{ mu sync.Mutex }

func (c *wedgedClient) info(time.Time) SessionInfo { return SessionInfo{Peer: "192.0.2.1:1"} }
func (c *wedgedClient) beginDrain()                {}
func (c *wedgedClient) inFlight() int              { return 0 }
func (c *wedgedClient) probe(ctx context.Context) error {
	return lockWithin(ctx, &c.mu, "session 192.0.2.1:1")
}

// The liveness probe fails while a client's lock is held or the accept
// loop is stuck on a request, and passes otherwise.
func TestAliveSeesAWedge(t *testing.T) {
	var tb clientTable
	c := &wedgedClient{}
	tb.add(c, func() {})
	probe := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return tb.alive(ctx, nil)
	}
	if err := probe(); err != nil {
		t.Fatalf("idle gateway: %v", err)
	}
	c.mu.Lock()
	if err := probe(); err == nil {
		t.Fatal("held session lock not seen")
	}
	c.mu.Unlock()
	if err := probe(); err != nil {
		t.Fatalf("after release: %v", err)
	}
	tb.acceptBusy.Store(time.Now().Add(-acceptStall - time.Second).UnixNano())
	if err := probe(); err == nil {
		t.Fatal("stuck accept loop not seen")
	}
}
