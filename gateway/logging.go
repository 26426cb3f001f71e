package gateway

import (
	"io"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmagw/rdmagw/gateway/metricname"
	"github.com/rdmagw/rdmagw/rdmarpc"
)

// NewLogger builds the gateway's logger from the log section: level and
// text or JSON format, writing to w.
func NewLogger(c LogConfig, w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "rdmagw",
		Level:      hclog.LevelFromString(c.Level),
		JSONFormat: c.Format == "json",
		Output:     w,
	})
}

// Client events: what a client's bad input or misbehaviour cost it — an
// error answer (ERR_VERS, ERR_CHUNK, RPC_MISMATCH), a message or call
// dropped — is logged at INFO with the peer, so an operator sees it at the
// default level. A client can send such input as fast as the link
// carries it, so the lines are rate-limited: a token bucket per event kind
// (eventBurst lines at once, then eventRate a second), shared by all
// clients. A line that finds the bucket empty is not written but counted,
// and the next line of its kind says how many were suppressed
// ("suppressed"). rdmagw_log_events_total{event, outcome} counts both
// (logged, suppressed).

const (
	eventBurst = 10
	eventRate  = 1.0 // lines per second and kind after the burst
)

// eventLog is the rate-limited INFO log of client events.
type eventLog struct {
	log    hclog.Logger
	counts *prometheus.CounterVec
	now    func() time.Time

	mu    sync.Mutex
	kinds map[string]*eventBucket
}

type eventBucket struct {
	tokens     float64
	last       time.Time
	suppressed uint64
	logged     prometheus.Counter
	dropped    prometheus.Counter
}

func newEventLog(f factory) *eventLog {
	return &eventLog{
		log: hclog.NewNullLogger(),
		counts: f.counterVec(metricname.LogEventsTotal,
			"Client events (error answers, dropped messages and calls) by kind, and whether their INFO line was logged or suppressed by the rate limit (a token bucket per kind: 10 lines at once, then 1 a second; the next logged line reports how many were suppressed).",
			"event", "outcome"),
		now:   time.Now,
		kinds: make(map[string]*eventBucket),
	}
}

// event records one event of kind (a fixed name, used as a metric label)
// from peer: an INFO line msg with kv, unless the kind's bucket is empty.
func (e *eventLog) event(kind, msg, peer string, kv ...any) {
	now := e.now()
	e.mu.Lock()
	b := e.kinds[kind]
	if b == nil {
		b = &eventBucket{tokens: eventBurst, last: now,
			logged: e.counts.WithLabelValues(kind, "logged"), dropped: e.counts.WithLabelValues(kind, "suppressed")}
		e.kinds[kind] = b
	}
	b.tokens = min(eventBurst, b.tokens+now.Sub(b.last).Seconds()*eventRate)
	b.last = now
	if b.tokens < 1 {
		b.suppressed++
		e.mu.Unlock()
		b.dropped.Inc()
		return
	}
	b.tokens--
	n := b.suppressed
	b.suppressed = 0
	e.mu.Unlock()
	b.logged.Inc()
	args := make([]any, 0, 6+len(kv))
	args = append(args, "event", kind, "peer", peer)
	args = append(args, kv...)
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	e.log.Info(msg, args...)
}

// ClientEvent records one client event of kind (eventLog.event).
func (m *Metrics) ClientEvent(kind, msg, peer string, kv ...any) {
	m.events.event(kind, msg, peer, kv...)
}

// SetEventLogger sets where the client events are logged (the gateway's
// logger; until then they are only counted).
func (m *Metrics) SetEventLogger(l hclog.Logger) { m.events.log = l }

// connMetrics is the engine's ResponderMetrics for one client connection:
// next's counters, and a client event with the peer for every error
// answer and dropped message.
type connMetrics struct {
	rdmarpc.ResponderMetrics
	EngineExtras // next's work and version-two counters (metrics_work.go)
	events       *eventLog
	peer         string
}

// ForConn wraps next, the engine metrics of the connection from peer.
func (m *Metrics) ForConn(peer string, next rdmarpc.ResponderMetrics) *connMetrics {
	return &connMetrics{ResponderMetrics: next, EngineExtras: ExtrasOf(next), events: m.events, peer: peer}
}

func (m *connMetrics) ErrorSent(code rdmarpc.ErrorCode) {
	m.ResponderMetrics.ErrorSent(code)
	switch code {
	case rdmarpc.ErrCodeVers:
		m.events.event("err_vers", "RDMA_ERROR sent: the client's transport version is not 1 (ERR_VERS)", m.peer)
	default:
		m.events.event("err_chunk", "RDMA_ERROR sent: the client's transport header or chunks are unusable, or the reply fits none of them (ERR_CHUNK)", m.peer)
	}
}

func (m *connMetrics) Dropped(reason rdmarpc.DropReason) {
	m.ResponderMetrics.Dropped(reason)
	m.events.event("message_dropped_"+reason.String(), "message from the client dropped without an answer", m.peer, "reason", reason.String())
}

// CallEvent records a call the gateway dropped, or answered itself with
// an RPC error reply (a bad RPC header), for a reason that is the
// client's; client_gone and draining are not events (the client left).
func (m *Metrics) CallEvent(reason, peer string, xid uint32, kv ...any) {
	switch reason {
	case "client_gone", "draining":
		return
	case "rpc_mismatch", "bad_cred", "bad_verf", "bad_auth", "garbage_header", "no_v2_binding":
		m.events.event("call_answered_"+reason, "call with a bad RPC header answered by the gateway", peer,
			append([]any{"answer", reason, "xid", xid}, kv...)...)
		return
	}
	m.events.event("call_dropped_"+reason, "call dropped", peer, append([]any{"reason", reason, "xid", xid}, kv...)...)
}
