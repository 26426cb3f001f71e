package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/metricname"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/tcprpc"
)

// startGateway runs a forward gateway on the pure-Go iWARP provider on a
// free loopback port, in front of backend ("host:port").
func startGateway(t testing.TB, backend string, tweak func(*gateway.Config)) *gateway.Forward {
	t.Helper()
	return startGatewayLog(t, backend, tweak, io.Discard)
}

// startGatewayLog is startGateway with the gateway's log also written to
// logs (at debug unless tweak says otherwise).
func startGatewayLog(t testing.TB, backend string, tweak func(*gateway.Config), logs io.Writer) *gateway.Forward {
	t.Helper()
	return nfstest.StartGatewayWith(t, backend, func(c *gateway.Config) {
		c.Log.Level = "debug"
		if tweak != nil {
			tweak(c)
		}
	}, io.MultiWriter(testWriter{t}, logs))
}

// testWriter sends log lines to the test log (silenced once the test is
// over, when late goroutines may still log).
type testWriter struct{ t testing.TB }

var testsOver atomic.Bool

func (w testWriter) Write(p []byte) (int, error) {
	if !testsOver.Load() {
		w.t.Logf("%s", p)
	}
	return len(p), nil
}

// metric returns the value of the series name{labels} (0 if absent;
// name must be one of the gateway's metric names).
func metric(t testing.TB, m *gateway.Metrics, name string, labels ...string) float64 {
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

// waitFor polls cond for up to d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tcpServer is a test's TCP server on a free loopback port: it hands
// each accepted connection to handle, on the accepting goroutine
// (handle starts one of its own to serve it); at the test's end it
// closes the listener and every connection it accepted.
type tcpServer struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startTCPServer(t testing.TB, handle func(c net.Conn)) *tcpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tcpServer{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			handle(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
	})
	return s
}

func (s *tcpServer) addr() string { return s.ln.Addr().String() }

// proxy sits between the gateway and the NFS server so a test can break
// the backend connection, hold or swallow replies, and inject bogus ones.
// Calls pass byte for byte; replies are re-framed record by record.
type proxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu       sync.Mutex
	conns    []net.Conn
	srcPorts []int
	closed   bool

	// hold: replies are read from the server but not forwarded.
	hold atomic.Bool
	// cutOnReply: the next reply is swallowed and both connections closed.
	cutOnReply atomic.Bool
	// injectUnknown: before the next reply, send one with an XID no call has.
	injectUnknown atomic.Bool
	accepted      atomic.Int32

	// gate, while closed (pause), keeps replies back, in order, until it
	// opens again (ops_test.go): a slow backend.
	gateMu sync.Mutex
	gate   chan struct{} // nil or closed: open
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, target: target}
	go p.acceptLoop()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) acceptLoop() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.srcPorts = append(p.srcPorts, c.RemoteAddr().(*net.TCPAddr).Port)
		p.mu.Unlock()
		p.accepted.Add(1)
		go func() {
			io.Copy(s, c)
			s.Close()
			c.Close()
		}()
		go p.replies(s, c)
	}
}

// replies forwards server records to the gateway, applying the test's
// mischief.
func (p *proxy) replies(s, c net.Conn) {
	defer c.Close()
	defer s.Close()
	rr := tcprpc.NewRecordReader(s, nil)
	rw := tcprpc.NewRecordWriter(c, nil)
	var buf []byte
	for {
		rec, err := rr.ReadRecord(buf[:0])
		if err != nil {
			return
		}
		buf = rec
		if p.cutOnReply.CompareAndSwap(true, false) {
			return
		}
		if p.hold.Load() {
			continue
		}
		p.waitGate()
		if p.injectUnknown.CompareAndSwap(true, false) {
			bogus := append([]byte(nil), rec...)
			bogus[0] ^= 0x5a // another XID, same shape
			bogus[3] ^= 0xa5
			if rw.WriteRecord(bogus, nil, nil) != nil {
				return
			}
		}
		if rw.WriteRecord(rec, nil, nil) != nil {
			return
		}
	}
}

// cut closes every connection through the proxy (the listener stays).
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// ports returns the gateway-side source ports of the connections seen.
func (p *proxy) ports() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.srcPorts...)
}

func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.cut()
}

// logRecord is one line of the gateway's JSON log (Log.Format "json"):
// "@level", "@message" and the line's typed fields.
type logRecord map[string]any

// logged counts the records in logs (a JSON log) at level whose fields
// hold kv (name, value pairs; a nil value matches any value of a field
// that is there, others compare as fmt.Sprint). Tests assert on a
// record's level and typed fields, never on its wording.
func logged(t testing.TB, logs *syncBuffer, level string, kv ...any) int {
	t.Helper()
	n := 0
	for _, raw := range bytes.Split([]byte(logs.String()), []byte("\n")) {
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		var r logRecord
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber() // numbers as written: an XID compares as a decimal integer
		if err := d.Decode(&r); err != nil {
			t.Fatalf("log line is not JSON (set Log.Format to json): %v: %s", err, raw)
		}
		if r["@level"] == level && r.has(kv...) {
			n++
		}
	}
	return n
}

func (r logRecord) has(kv ...any) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		v, ok := r[fmt.Sprint(kv[i])]
		if !ok || kv[i+1] != nil && fmt.Sprint(v) != fmt.Sprint(kv[i+1]) {
			return false
		}
	}
	return true
}

// poolInUse is the registered memory handed out and not given back
// (rdmagw_pool_bytes_in_use).
func poolInUse(t testing.TB, m *gateway.Metrics) int64 {
	t.Helper()
	return int64(metric(t, m, "rdmagw_pool_bytes_in_use"))
}
