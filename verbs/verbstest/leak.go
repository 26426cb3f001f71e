package verbstest

import (
	"bytes"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"
)

// checkLeaks records the goroutine count now and, as the case's last
// cleanup, waits for it to come back down. Providers end goroutines
// asynchronously (a reader noticing a closed socket), so it settles for up
// to the case timeout before failing with every goroutine's stack.
func checkLeaks(t testing.TB, c config) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(c.Timeout)
		n := runtime.NumGoroutine()
		for n > base && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			n = runtime.NumGoroutine()
		}
		if n > base {
			var buf bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
			t.Errorf("goroutine leak: %d goroutines after the case, %d before\n%s", n, base, buf.String())
		}
	})
}
