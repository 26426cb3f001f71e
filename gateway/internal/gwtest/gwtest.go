// Package gwtest holds the test helpers the gateway packages' tests
// share (gateway, gateway/forward, gateway/reverse,
// gateway/internal/modetest): reading a metric back, waiting for a
// condition, a test's log and the JSON log records a test asserts on,
// building raw ONC RPC messages, and starting a gateway of either mode
// for a test (start.go: Start, filled in by forwardtest and reversetest).
// It imports no gateway mode, so the modes' own (internal) tests can use
// it.
package gwtest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/metricname"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/xdr"
)

// Metric returns the value of the series name{labels} (0 if absent;
// name must be one of the gateway's metric names).
func Metric(t testing.TB, m *gateway.Metrics, name string, labels ...string) float64 {
	t.Helper()
	if !metricname.Known(name) {
		t.Fatalf("%s is not a gateway metric (package metricname)", name)
	}
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		sum := 0.0
		for _, s := range f.GetMetric() {
			if matchLabels(s.GetLabel(), labels) {
				switch {
				case s.Counter != nil:
					sum += s.Counter.GetValue()
				case s.Gauge != nil:
					sum += s.Gauge.GetValue()
				case s.Histogram != nil:
					sum += float64(s.Histogram.GetSampleCount())
				}
			}
		}
		return sum
	}
	return 0
}

func matchLabels(have []*dto.LabelPair, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		ok := false
		for _, l := range have {
			if l.GetName() == want[i] && l.GetValue() == want[i+1] {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// PoolInUse is the registered memory handed out and not given back
// (rdmagw_pool_bytes_in_use).
func PoolInUse(t testing.TB, m *gateway.Metrics) int64 {
	t.Helper()
	return int64(Metric(t, m, "rdmagw_pool_bytes_in_use"))
}

// WaitFor polls cond for up to d.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLog is a writer that sends log lines to the test log (silenced
// once the test is over, when late goroutines may still log).
func TestLog(t testing.TB) io.Writer { return testWriter{t} }

type testWriter struct{ t testing.TB }

var testsOver atomic.Bool

func (w testWriter) Write(p []byte) (int, error) {
	if !testsOver.Load() {
		w.t.Logf("%s", p)
	}
	return len(p), nil
}

// SyncBuffer is a bytes.Buffer safe for a gateway's goroutines to log
// into while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// LogRecord is one line of the gateway's JSON log (Log.Format "json"):
// "@level", "@message" and the line's typed fields.
type LogRecord map[string]any

// Logged counts the records in logs (a JSON log) at level whose fields
// hold kv (name, value pairs; a nil value matches any value of a field
// that is there, others compare as fmt.Sprint). Tests assert on a
// record's level and typed fields, never on its wording.
func Logged(t testing.TB, logs *SyncBuffer, level string, kv ...any) int {
	t.Helper()
	n := 0
	for _, raw := range bytes.Split([]byte(logs.String()), []byte("\n")) {
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		var r LogRecord
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber() // numbers as written: an XID compares as a decimal integer
		if err := d.Decode(&r); err != nil {
			t.Fatalf("log line is not JSON (set Log.Format to json): %v: %s", err, raw)
		}
		if r["@level"] == level && r.Has(kv...) {
			n++
		}
	}
	return n
}

// Has reports whether r holds kv (as Logged).
func (r LogRecord) Has(kv ...any) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		v, ok := r[fmt.Sprint(kv[i])]
		if !ok || kv[i+1] != nil && fmt.Sprint(v) != fmt.Sprint(kv[i+1]) {
			return false
		}
	}
	return true
}

// BE32 appends each v to b as a big-endian XDR unsigned int.
func BE32(b []byte, vs ...uint32) []byte {
	for _, v := range vs {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return b
}

// SessionsOf waits until list (a gateway's Sessions) shows n clients and
// returns them.
func SessionsOf(t testing.TB, list func() gateway.Sessions, n int, what string) []gateway.SessionInfo {
	t.Helper()
	var s gateway.Sessions
	WaitFor(t, 10*time.Second, what, func() bool {
		s = list()
		return len(s.Clients) == n
	})
	return s.Clients
}

// authSysRoot is an AUTH_SYS credential body for uid 0 on host "gwtest".
var authSysRoot = func() []byte {
	b := make([]byte, 4+4+8+4+4+4)
	e := xdr.NewEncoder(b)
	e.PutUint32(1)
	e.PutString("gwtest")
	e.PutUint32(0)
	e.PutUint32(0)
	e.PutUint32(0)
	return e.Bytes()
}()

// EncodeCall returns an RPC call header for prog/vers/proc (AUTH_SYS,
// uid 0) followed by args.
func EncodeCall(xid, prog, vers, proc uint32, args []byte) []byte {
	h := oncrpc.CallHeader{XID: xid, RPCVers: oncrpc.RPCVersion, Prog: prog, Vers: vers, Proc: proc,
		Cred: oncrpc.OpaqueAuth{Flavor: oncrpc.AuthSys, Body: authSysRoot}, Verf: oncrpc.NullAuth}
	b := make([]byte, h.EncodedLen()+len(args))
	e := xdr.NewEncoder(b)
	if err := h.Encode(&e); err != nil {
		panic(err)
	}
	copy(b[e.Len():], args)
	return b
}
