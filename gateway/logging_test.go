package gateway

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	dto "github.com/prometheus/client_model/go"
)

// The client-event log: a burst of lines per kind, then the rate; what
// the bucket refuses is counted and reported by the kind's next line;
// kinds do not share a bucket.
func TestEventLogRateLimit(t *testing.T) {
	m := NewMetrics()
	var out bytes.Buffer
	m.SetEventLogger(hclog.New(&hclog.LoggerOptions{Level: hclog.Info, JSONFormat: true, Output: &out}))
	clock := time.Unix(1000, 0)
	m.events.now = func() time.Time { return clock }

	for i := 0; i < 25; i++ {
		m.CallEvent("not_rpc", "10.0.0.1:999", uint32(i))
	}
	m.CallEvent("rpc_mismatch", "10.0.0.2:999", 7) // another kind: its own bucket
	logged := func(kind, outcome string) float64 {
		var d dto.Metric
		if err := m.events.counts.WithLabelValues(kind, outcome).Write(&d); err != nil {
			t.Fatal(err)
		}
		return d.GetCounter().GetValue()
	}
	if l, s := logged("call_dropped_not_rpc", "logged"), logged("call_dropped_not_rpc", "suppressed"); l != eventBurst || s != 25-eventBurst {
		t.Fatalf("after 25 events at once: logged %v, suppressed %v; want %d, %d", l, s, eventBurst, 25-eventBurst)
	}
	if l := logged("call_answered_rpc_mismatch", "logged"); l != 1 {
		t.Fatalf("another kind's first event: logged %v", l)
	}
	clock = clock.Add(2 * time.Second)            // two tokens
	m.CallEvent("client_gone", "10.0.0.1:999", 1) // a client leaving is no event
	m.CallEvent("not_rpc", "10.0.0.1:999", 100)
	m.CallEvent("not_rpc", "10.0.0.1:999", 101)
	m.CallEvent("not_rpc", "10.0.0.1:999", 102)
	if l, s := logged("call_dropped_not_rpc", "logged"), logged("call_dropped_not_rpc", "suppressed"); l != eventBurst+2 || s != 25-eventBurst+1 {
		t.Fatalf("2 s later, 3 events: logged %v, suppressed %v; want %d, %d", l, s, eventBurst+2, 25-eventBurst+1)
	}

	type line struct {
		Level      string `json:"@level"`
		Event      string `json:"event"`
		Peer       string `json:"peer"`
		XID        uint32 `json:"xid"`
		Suppressed uint64 `json:"suppressed"`
	}
	var lines []line
	for _, raw := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var l line
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		lines = append(lines, l)
	}
	if len(lines) != eventBurst+3 {
		t.Fatalf("%d lines logged, want %d", len(lines), eventBurst+3)
	}
	for _, l := range lines {
		if l.Level != "info" || l.Peer == "" || l.Event == "" {
			t.Errorf("line %+v: want level info with event and peer", l)
		}
	}
	// The first line after the pause reports the 15 suppressed.
	if l := lines[eventBurst+1]; l.Event != "call_dropped_not_rpc" || l.XID != 100 || l.Suppressed != 25-eventBurst {
		t.Errorf("first line after the pause: %+v, want xid 100 reporting %d suppressed", l, 25-eventBurst)
	}
	if l := lines[eventBurst+2]; l.Suppressed != 0 {
		t.Errorf("second line after the pause reports %d suppressed again", l.Suppressed)
	}
}
