package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmagw/rdmagw/gateway/metricname"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/verbs"
)

// ReverseMetrics adds what only reverse mode has to the shared Metrics,
// and implements rdmarpc.RequesterMetrics for the RDMA connections to the
// server. In reverse mode the shared series read: connections = TCP
// clients, calls/replies = RPCs from those clients, backend = the RDMA
// server, bytes_total direction out = to the server, in = from it.
type ReverseMetrics struct {
	*Metrics

	bytesInlineToServer   prometheus.Counter
	bytesInlineFromServer prometheus.Counter
	bytesReadChunkOut     prometheus.Counter
	bytesLongCallOut      prometheus.Counter
	bytesWriteChunkIn     prometheus.Counter
	bytesReplyChunkIn     prometheus.Counter

	backendConns   prometheus.Gauge
	errorsReceived *prometheus.CounterVec
	pings          *prometheus.CounterVec
	PingOK         prometheus.Counter
	PingTimeout    prometheus.Counter
	PingError      prometheus.Counter
	ChunkRetries   prometheus.Counter
	ClientStalls   prometheus.Counter
	SystemErrs     *prometheus.CounterVec
}

func NewReverseMetrics() *ReverseMetrics {
	m := &ReverseMetrics{Metrics: NewMetricsFor("reverse")}
	f := m.f
	m.bytesInlineToServer = m.bytes.WithLabelValues(pathInline, "out")
	m.bytesInlineFromServer = m.bytes.WithLabelValues(pathInline, "in")
	m.bytesReadChunkOut = m.bytes.WithLabelValues(pathReadChunk, "out")
	m.bytesLongCallOut = m.bytes.WithLabelValues(pathLongCall, "out")
	m.bytesWriteChunkIn = m.bytes.WithLabelValues(pathWriteChunk, "in")
	m.bytesReplyChunkIn = m.bytes.WithLabelValues(pathReplyChunk, "in")

	m.backendConns = f.gauge(metricname.BackendRDMAConnections, "RPC-over-RDMA connections to the NFS server open now (reverse mode: one per TCP client).")
	m.errorsReceived = f.counterVec(metricname.RDMAErrorsReceivedTotal, "RDMA_ERROR answers received from the server, by code (ERR_VERS, ERR_CHUNK).", "code")
	m.pings = f.counterVec(metricname.BackendPingsTotal,
		"NULL calls sent on the reserve credit to check an idle RDMA connection (RFC 8267 §6.7.2), by result (ok; timeout: unanswered within reverse.ping_timeout, the connection is re-established; error: the call failed).", "result")
	m.PingOK = m.pings.WithLabelValues("ok")
	m.PingTimeout = m.pings.WithLabelValues("timeout")
	m.PingError = m.pings.WithLabelValues("error")
	m.ChunkRetries = f.counter(metricname.ReplyChunkRetriesTotal, "Calls sent again with a new XID and a larger Reply chunk after the server answered ERR_CHUNK (short Reply chunk retry, RFC 8267 §3.1).")
	m.ClientStalls = f.counter(metricname.ClientBackpressureTotal, "Times a TCP client's socket stopped being read because it had reverse.max_calls_per_client calls at the server.")
	m.SystemErrs = f.counterVec(metricname.GatewayErrorRepliesTotal,
		"RPC error replies made by the gateway itself for TCP clients, by reason (err_chunk: the server refused the call or its reply did not fit; bad_reply: the server's reply was malformed; resources: no registered memory; rpc_mismatch: rpcvers was not 2; connection_lost: the RDMA connection failed 3 times while the call was outstanding; call_too_large: GARBAGE_ARGS for a call record over reverse.max_call_bytes, which is skipped; no_v2_binding: PROG_UNAVAIL for a MOUNT, NLM or NSM call while the connection to the server speaks RPC-over-RDMA version two, which binds none of them).", "reason")
	return m
}

// CallSent counts a call's bytes by the path they took to the server.
func (m *ReverseMetrics) CallSent(kind rdmarpc.CallKind, inline, exposed int) {
	m.opSend.Inc()
	m.work.send.Inc()
	m.bytesInlineToServer.Add(float64(inline))
	switch kind {
	case rdmarpc.CallReadChunk:
		m.opRead.Inc()
		m.bytesReadChunkOut.Add(float64(exposed))
	case rdmarpc.CallLong:
		m.opRead.Inc()
		m.bytesLongCallOut.Add(float64(exposed))
	}
}

// ReplyReceived counts a reply's bytes by the path they came.
func (m *ReverseMetrics) ReplyReceived(kind rdmarpc.ReplyKind, inline, written int) {
	m.opRecv.Inc()
	if kind == rdmarpc.ReplyReplyChunk {
		m.bytesReplyChunkIn.Add(float64(inline))
	} else {
		m.bytesInlineFromServer.Add(float64(inline))
	}
	if written > 0 {
		m.opWrite.Inc()
		m.bytesWriteChunkIn.Add(float64(written))
	}
}

// ErrorReceived counts an RDMA_ERROR from the server.
func (m *ReverseMetrics) ErrorReceived(code rdmarpc.ErrorCode) {
	m.errorsReceived.WithLabelValues(code.String()).Inc()
}

// ConnUp counts an RDMA connection to the server established.
func (m *ReverseMetrics) ConnUp() { m.backendConns.Inc() }

// ConnDown counts its end.
func (m *ReverseMetrics) ConnDown(error) { m.backendConns.Dec() }

// Dropped and RDMAFailed are the shared Metrics' (engine drops, failed
// work requests); they are listed to show the interface is complete.
var _ rdmarpc.RequesterMetrics = (*ReverseMetrics)(nil)

func (m *ReverseMetrics) Dropped(reason rdmarpc.DropReason) { m.engine().Dropped(reason) }

func (m *ReverseMetrics) RDMAFailed(op verbs.Opcode, status verbs.Status) {
	m.engine().RDMAFailed(op, status)
}
