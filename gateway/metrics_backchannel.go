package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmagw/rdmagw/gateway/metricname"
)

// Reasons of rdmagw_backchannel_errors_total (BackwardError maps the
// engine's "closed" to client_gone).
var bcErrorReasons = []string{"too_big", "no_credit", "client_gone", "unmatched", "timeout", "disabled"}

// BackchannelMetrics are the backchannel's Prometheus metrics; it implements
// rdmarpc.BackchannelMetrics.
type BackchannelMetrics struct {
	calls   prometheus.Counter
	replies prometheus.Counter
	errs    *prometheus.CounterVec
}

// newBCMetrics registers the backchannel metrics (NewMetricsFor). Every
// reason of the error counter starts at 0, so rates and alerts see the
// series before the first error. Both modes relay callbacks: forward mode
// from the TCP server to RDMA clients (gateway/forward/backchannel.go), reverse mode from the
// RDMA server to TCP clients (gateway/reverse/backchannel.go).
func newBCMetrics(f factory) *BackchannelMetrics {
	b := &BackchannelMetrics{
		calls:   f.counter(metricname.BackchannelCallsTotal, "NFSv4.1 callbacks (RPC calls from the NFS server on the client's bound connection) relayed to the client: forward mode as backward-direction RPC-over-RDMA calls, reverse mode as RPC calls on the client's TCP connection."),
		replies: f.counter(metricname.BackchannelRepliesTotal, "Callback replies relayed from the client to the NFS server (forward mode: received from RDMA clients; reverse mode: sent to the RDMA server as backward-direction replies)."),
		errs: f.counterVec(metricname.BackchannelErrorsTotal,
			"Callbacks not delivered and backchannel messages dropped, by reason (too_big: larger than the receiver's inline size; no_credit: the backchannel credits (and in forward mode the queue) were full; client_gone: the client connection ended first; unmatched: a callback reply for no outstanding callback; timeout: no reply in backchannel.timeout; disabled: the backchannel is off).", "reason"),
	}
	for _, r := range bcErrorReasons {
		b.errs.WithLabelValues(r)
	}
	return b
}

// Backchannel returns m's Backchannel metrics.
func (m *Metrics) Backchannel() *BackchannelMetrics { return m.bc }

func (b *BackchannelMetrics) BackwardCall(int) { b.calls.Inc() }

func (b *BackchannelMetrics) BackwardReply(int) { b.replies.Inc() }

func (b *BackchannelMetrics) BackwardError(reason string) {
	if reason == "closed" {
		reason = "client_gone"
	}
	b.errs.WithLabelValues(reason).Inc()
}
