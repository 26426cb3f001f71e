package auxrelay

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics receives the relay's operational events. Implementations must
// be safe for concurrent use. NewPrometheusMetrics is the gateway's;
// NopMetrics discards everything.
type Metrics interface {
	// Call counts a call the relay handled. Direction is "to_filer",
	// "to_client" (a filer callback or notification forwarded) or "local"
	// (answered by the relay: rpcbind, an error reply).
	Call(prog, vers, proc uint32, direction string)
	// Reply counts a reply relayed back, with the time since the call.
	Reply(prog, vers, proc uint32, direction string, latency time.Duration)
	// Event counts an operational event (see the event* constants).
	Event(name string)
	// Connections tracks open TCP connections by role ("client" inbound,
	// "filer" and "callback" outbound).
	Connections(role string, delta int)
}

// Operational events, the label values of Event.
const (
	eventGarbageArgs       = "garbage_args"        // undecodable call answered GARBAGE_ARGS
	eventProgUnavail       = "prog_unavail"        // call for a program the relay does not relay
	eventProgMismatch      = "prog_mismatch"       // call for a version the relay does not relay
	eventRPCMismatch       = "rpc_mismatch"        // rpcvers != 2
	eventUnexpectedReply   = "unexpected_reply"    // a reply arrived where calls are expected
	eventUnexpectedCall    = "unexpected_call"     // a call arrived on an outbound connection
	eventUnknownXID        = "unknown_xid"         // a reply matching no pending call
	eventCallTimeout       = "call_timeout"        // a forwarded call got no reply in time
	eventRetransmit        = "retransmit"          // a client resent a call still pending
	eventFilerUnreachable  = "filer_unreachable"   // filer port lookup or connect failed
	eventClientUnreachable = "client_unreachable"  // client rpcbind lookup or connect failed
	eventSendError         = "send_error"          // writing to a peer failed
	eventRecordError       = "record_error"        // bad record marking, connection closed
	eventUnroutable        = "callback_unroutable" // a filer callback matching no client
	eventNotifyFanout      = "notify_fanout"       // one SM_NOTIFY forwarded to one client
	eventRouteTableFull    = "route_table_full"    // NLM route not recorded: table full
	eventPortLookup        = "port_lookup"         // an rpcbind GETPORT sent to filer or client
)

// NopMetrics discards every event.
type NopMetrics struct{}

func (NopMetrics) Call(uint32, uint32, uint32, string)                 {}
func (NopMetrics) Reply(uint32, uint32, uint32, string, time.Duration) {}
func (NopMetrics) Event(string)                                        {}
func (NopMetrics) Connections(string, int)                             {}

// PrometheusMetrics exports the relay's metrics as
// rdmagw_auxrelay_* collectors.
type PrometheusMetrics struct {
	calls   *prometheus.CounterVec
	replies *prometheus.CounterVec
	latency *prometheus.HistogramVec
	events  *prometheus.CounterVec
	conns   *prometheus.GaugeVec

	mu    sync.Mutex
	names map[[3]uint32][2]string
}

// NewPrometheusMetrics creates the collectors and registers them with reg
// (nil: not registered; use Collectors).
func NewPrometheusMetrics(reg prometheus.Registerer) (*PrometheusMetrics, error) {
	m := &PrometheusMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdmagw", Subsystem: "auxrelay", Name: "calls_total",
			Help: "Auxiliary-protocol calls handled, by program, version, procedure and direction.",
		}, []string{"program", "version", "procedure", "direction"}),
		replies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdmagw", Subsystem: "auxrelay", Name: "replies_total",
			Help: "Replies relayed back to the caller, by program, version, procedure and direction.",
		}, []string{"program", "version", "procedure", "direction"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rdmagw", Subsystem: "auxrelay", Name: "call_duration_seconds",
			Help:    "Time from a relayed call to its reply, by program and direction.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"program", "direction"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdmagw", Subsystem: "auxrelay", Name: "events_total",
			Help: "Operational events of the relay (errors, timeouts, callbacks routed or not).",
		}, []string{"event"}),
		conns: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "rdmagw", Subsystem: "auxrelay", Name: "connections",
			Help: "Open TCP connections of the relay, by role (client, filer, callback).",
		}, []string{"role"}),
		names: map[[3]uint32][2]string{},
	}
	if reg != nil {
		for _, c := range m.Collectors() {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Collectors lists the collectors, for a caller that registers them.
func (m *PrometheusMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.calls, m.replies, m.latency, m.events, m.conns}
}

func (m *PrometheusMetrics) labels(prog, vers, proc uint32) (string, string) {
	k := [3]uint32{prog, vers, proc}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.names[k]; ok {
		return n[0], n[1]
	}
	n := [2]string{itoa(vers), procLabel(prog, vers, proc)}
	if vers > 16 || proc > 63 { // junk from a peer: keep label cardinality bounded
		n = [2]string{"other", "other"}
	}
	if len(m.names) < 4096 { // bound label memory against junk procedures
		m.names[k] = n
	}
	return n[0], n[1]
}

func (m *PrometheusMetrics) Call(prog, vers, proc uint32, dir string) {
	v, p := m.labels(prog, vers, proc)
	m.calls.WithLabelValues(progLabel(prog), v, p, dir).Inc()
}

func (m *PrometheusMetrics) Reply(prog, vers, proc uint32, dir string, d time.Duration) {
	v, p := m.labels(prog, vers, proc)
	m.replies.WithLabelValues(progLabel(prog), v, p, dir).Inc()
	m.latency.WithLabelValues(progLabel(prog), dir).Observe(d.Seconds())
}

func (m *PrometheusMetrics) Event(name string) { m.events.WithLabelValues(name).Inc() }

func (m *PrometheusMetrics) Connections(role string, delta int) {
	m.conns.WithLabelValues(role).Add(float64(delta))
}
