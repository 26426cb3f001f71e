package auxrelay

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// TestRunStopsCleanly: after client and filer connections were opened,
// cancelling Run closes every socket and leaves no goroutine behind.
func TestRunStopsCleanly(t *testing.T) {
	before := runtime.NumGoroutine()
	filer := startFakePeer(t, "127.0.0.1", 0, func(recvCall) []byte { return nil })
	cfg := testConfig()
	cfg.Enabled = true
	cfg.Filer.MountPort, cfg.Filer.NLMPort, cfg.Filer.NSMPort = int(filer.addr.Port()), int(filer.addr.Port()), int(filer.addr.Port())
	r, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	<-r.Ready()
	for _, network := range []string{"tcp", "udp"} {
		c := dialRPC(t, network, "", r.Addr("mount", network))
		c.mustSucceed(t, progMount, 3, 0, nil)
		c.conn.Close()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := r.pending.len(); n != 0 {
		t.Errorf("%d calls still pending", n)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before+4 && time.Now().Before(deadline) { // +4: the fake filer's own
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+4 {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after stop, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}
