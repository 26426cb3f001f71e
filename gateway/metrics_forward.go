package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmagw/rdmagw/gateway/metricname"
)

// ForwardBackendMetrics are the forward gateway's backend connection health counters
// (gateway/forward/backend.go, sessions kept across client reconnects in
// gateway/forward/park.go).
type ForwardBackendMetrics struct {
	PingOK, PingTimeout prometheus.Counter
	CallsFailed         *prometheus.CounterVec
	Kept                prometheus.Counter
	PortChanges         prometheus.Counter
	Parked              prometheus.Gauge
	// Waits: client connections that waited for one of their address's
	// in transit (park.go claim), by outcome.
	WaitKept, WaitNew, WaitTimeout prometheus.Counter
}

func newBEMetrics(f factory) *ForwardBackendMetrics {
	m := &ForwardBackendMetrics{}
	pings := f.counterVec(metricname.BackendPingsTotal,
		"NULL pings sent on a backend TCP connection that was silent for backend.ping_interval, by result (ok; timeout: nothing from the server within backend.ping_timeout, the connection was closed and re-established).", "result")
	m.PingOK = pings.WithLabelValues("ok")
	m.PingTimeout = pings.WithLabelValues("timeout")
	m.CallsFailed = f.counterVec(metricname.BackendCallsFailedTotal,
		"Calls answered SYSTEM_ERR by the gateway because their reply from the server could not be carried (reply_too_large: above backend.max_reply_bytes; reply_broken: the connection broke inside the reply on 3 attempts; ddp_impossible: the client offered a Write chunk for a READ/READLINK result that could not be placed in it, which RFC 8267 §6.4.1 forbids sending inline: results that do not decode, need more look-ahead than the reader has, or exceed the largest pool buffer).", "reason")
	m.Kept = f.counter(metricname.BackendConnectionsKeptTotal,
		"Backend connections handed to a client that reconnected from the same address within backend.reconnect_grace (same source port: the server's duplicate request cache recognises its retransmissions).")
	m.PortChanges = f.counter(metricname.BackendReconnectPortChangesTotal,
		"Backend reconnects that could not keep the previous local port (another socket on this host holds it; backend.reserved_source_port avoids the ephemeral range): the server's duplicate request cache does not recognise the calls sent again, so a non-idempotent call that had executed may execute twice. Each is also logged.")
	m.Parked = f.gauge(metricname.BackendConnectionsParked,
		"Backend connections kept open for a disconnected client for backend.reconnect_grace.")
	waits := f.counterVec(metricname.BackendConnectionWaitsTotal,
		"Client connections that, with backend.reconnect_grace set, waited before choosing their backend connection for one of the same address in transit (its client gone and its backend connection being parked, or a connection that took a parked one and was not yet established), by outcome (kept: it took a kept connection; new: none was left, it dialed a new one, e.g. the other was an additional live connection; timeout: it stopped waiting after 4 s and chose without it, also logged).", "outcome")
	m.WaitKept = waits.WithLabelValues("kept")
	m.WaitNew = waits.WithLabelValues("new")
	m.WaitTimeout = waits.WithLabelValues("timeout")
	return m
}
