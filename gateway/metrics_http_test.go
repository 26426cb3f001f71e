package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// /metrics is always there; the profiler only with metrics.pprof, and
// never on Go's default mux.
func TestMetricsServerPprof(t *testing.T) {
	for _, on := range []bool{false, true} {
		ms, err := startMetricsServer("127.0.0.1:0", on, NewMetrics(), hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + ms.Addr().String()
		if code, body := get(t, base+"/metrics"); code != 200 || !strings.Contains(body, "rdmagw_connections_total") {
			t.Errorf("pprof=%v: /metrics %d %.200q", on, code, body)
		}
		code, body := get(t, base+"/debug/pprof/")
		if on && (code != 200 || !strings.Contains(body, "goroutine")) {
			t.Errorf("pprof on: /debug/pprof/ %d %.200q", code, body)
		}
		if !on && code != 404 {
			t.Errorf("pprof off: /debug/pprof/ answered %d, want 404", code)
		}
		if code, _ := get(t, base+"/debug/pprof/cmdline"); on != (code == 200) {
			t.Errorf("pprof=%v: /debug/pprof/cmdline answered %d", on, code)
		}
		if err := ms.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
