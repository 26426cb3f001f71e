package sdnotify

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/internal/sdnotify/sdnotifytest"
)

func listen(t *testing.T, name string) chan string { return sdnotifytest.Listen(t, name) }

func recv(t *testing.T, got chan string) string {
	t.Helper()
	select {
	case m := <-got:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
		return ""
	}
}

func TestNotifyPathAndAbstract(t *testing.T) {
	for _, name := range []string{filepath.Join(t.TempDir(), "notify"), "@rdmagw-test-" + t.Name()} {
		got := listen(t, name)
		t.Setenv("NOTIFY_SOCKET", name)
		n, err := FromEnv()
		if err != nil || n == nil {
			t.Fatalf("%s: FromEnv = %v, %v", name, n, err)
		}
		n.Ready()
		n.Status("2 clients\n3 calls")
		n.Reloading()
		n.Stopping()
		for _, want := range []string{"READY=1", "STATUS=2 clients 3 calls", "RELOADING=1\nMONOTONIC_USEC=", "STOPPING=1"} {
			if m := recv(t, got); !strings.HasPrefix(m, want) {
				t.Errorf("%s: got %q, want %q", name, m, want)
			}
		}
		n.Close()
	}
}

func TestNotifyUnset(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	n, err := FromEnv()
	if n != nil || err != nil {
		t.Fatalf("FromEnv without NOTIFY_SOCKET = %v, %v", n, err)
	}
	if err := n.Ready(); err != nil { // a nil Notifier sends nothing
		t.Fatal(err)
	}
	if _, err := New("vsock:2:1234"); err == nil {
		t.Fatal("vsock address accepted")
	}
}

func TestWatchdogInterval(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", "3000000")
	t.Setenv("WATCHDOG_PID", "")
	if d := WatchdogInterval(); d != 3*time.Second {
		t.Fatalf("interval %v", d)
	}
	t.Setenv("WATCHDOG_PID", "1") // someone else's
	if d := WatchdogInterval(); d != 0 {
		t.Fatalf("interval %v for another pid", d)
	}
	t.Setenv("WATCHDOG_USEC", "")
	if d := WatchdogInterval(); d != 0 {
		t.Fatalf("interval %v unset", d)
	}
}

// Pings come while the probe succeeds, stop while it is stalled, and
// resume when it answers again.
func TestRunWatchdogFollowsProbe(t *testing.T) {
	name := filepath.Join(t.TempDir(), "notify")
	got := listen(t, name)
	n, err := New(name)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var stalled atomic.Bool
	release := make(chan struct{})
	var mu sync.Mutex
	var fails []error
	probe := func(ctx context.Context) error {
		if stalled.Load() {
			<-release // wedged, deaf to ctx
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunWatchdog(ctx, n, 100*time.Millisecond, probe, func(err error) {
			mu.Lock()
			fails = append(fails, err)
			mu.Unlock()
		})
	}()
	start := time.Now()
	for range 5 {
		if m := recv(t, got); m != "WATCHDOG=1" {
			t.Fatalf("got %q", m)
		}
	}
	// Five pings every timeout/2 (50ms) take at least 4 periods.
	if el := time.Since(start); el < 4*50*time.Millisecond-10*time.Millisecond {
		t.Errorf("5 pings in %v: faster than every WATCHDOG_USEC/2", el)
	}
	stalled.Store(true)
	// Let any ping already on its way arrive, then expect silence while
	// the probe hangs, for several watchdog periods.
	time.Sleep(150 * time.Millisecond)
	for len(got) > 0 {
		<-got
	}
	time.Sleep(500 * time.Millisecond)
	if k := len(got); k != 0 {
		t.Fatalf("%d pings while the probe was stalled", k)
	}
	mu.Lock()
	nf := len(fails)
	mu.Unlock()
	if nf == 0 {
		t.Error("stalled probe not reported")
	}
	stalled.Store(false)
	close(release)
	if m := recv(t, got); m != "WATCHDOG=1" {
		t.Fatalf("after the stall: got %q", m)
	}
	cancel()
	<-done
}
