package gateway

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/rdmagw/rdmagw/gateway/metricname"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/verbs"
)

// Metrics holds the gateway's Prometheus metrics in their own registry
// (so several gateways in one process, as in tests and the demo, do not
// collide). Its engine view (engineMetrics) implements
// rdmarpc.ResponderMetrics; the bridge calls the other methods. Everything here is safe for concurrent
// use and, once a label combination has been seen, allocation-free.
type Metrics struct {
	Registry *prometheus.Registry
	mode     string
	f        factory       // registers with the mode label (metrics_reverse.go)
	recv     receiveSeries // forward receive buffers (metrics_srq.go)
	bytes    *prometheus.CounterVec

	connsCurrent  prometheus.Gauge
	connsTotal    prometheus.Counter
	connsRejected *prometheus.CounterVec
	connsClosed   *prometheus.CounterVec
	CreditsInUse  prometheus.Gauge
	// CreditsGranted: rdma.credits per connected client (forward mode),
	// the denominator of the credit saturation ratio.
	CreditsGranted prometheus.Gauge

	calls     *prometheus.CounterVec
	replies   *prometheus.CounterVec
	procMu    sync.RWMutex
	procStats map[procKey]*ProcCounters

	bytesInline     prometheus.Counter
	bytesInlineOut  prometheus.Counter
	bytesReadChunk  prometheus.Counter
	bytesWriteChunk prometheus.Counter
	bytesReplyChunk prometheus.Counter
	bytesLongCall   prometheus.Counter

	rdmaOps         *prometheus.CounterVec
	opRecv, opSend  prometheus.Counter
	opRead, opWrite prometheus.Counter
	errorsSent      *prometheus.CounterVec
	errVers         prometheus.Counter
	errChunk        prometheus.Counter
	engineDrops     *prometheus.CounterVec
	sendInv         prometheus.Counter
	writtenAhead    prometheus.Counter
	work            *workMetrics // work requests by path (metrics_work.go)

	BackendLatency    prometheus.Histogram
	CallLatency       prometheus.Histogram
	BackendReconnects prometheus.Counter
	BackendGiveUps    prometheus.Counter
	UnknownXIDReplies prometheus.Counter
	callsDropped      *prometheus.CounterVec
	memoryWaits       prometheus.Counter
	DDPFallbacks      prometheus.Counter
	backendErrors     *prometheus.CounterVec
	bc                *BackchannelMetrics // NFSv4.1 backchannel (metrics_backchannel.go)
	events            *eventLog           // client events, rate-limited at INFO (logging.go)

	vers           *versionMetrics        // RPC-over-RDMA version per connection (metrics_version.go)
	ops            *opsMetrics            // drain and reload (ops.go)
	ForwardBackend *ForwardBackendMetrics // backend connection health (metrics_forward.go)
}

// procKey names one procedure of one program version.
type procKey struct{ prog, vers, proc uint32 }

// ProcCounters are the per-procedure counters, resolved once.
type ProcCounters struct {
	Calls   prometheus.Counter
	replies [replyStatusCount]atomic.Value // prometheus.Counter, set on first use
	labels  [3]string
}

// ReplyStatus is the label of a reply: the RPC accept or reject status,
// or what happened instead of a reply.
type ReplyStatus uint8

const (
	StatusSuccess ReplyStatus = iota
	StatusProgUnavail
	StatusProgMismatch
	StatusProcUnavail
	StatusGarbageArgs
	StatusSystemErr
	StatusDenied
	StatusUnparsable
	replyStatusCount
)

var replyStatusNames = [replyStatusCount]string{"success", "prog_unavail", "prog_mismatch",
	"proc_unavail", "garbage_args", "system_err", "denied", "unparsable"}

func ReplyStatusOf(h *oncrpc.ReplyHeader) ReplyStatus {
	if h.Stat == oncrpc.MsgDenied {
		return StatusDenied
	}
	if h.AcceptStat <= oncrpc.SystemErr {
		return ReplyStatus(h.AcceptStat)
	}
	return StatusUnparsable
}

// Byte paths (the "path" label of rdmagw_bytes_total).
const (
	pathInline     = "inline"
	pathReadChunk  = "read_chunk"
	pathWriteChunk = "write_chunk"
	pathReplyChunk = "reply_chunk"
	pathLongCall   = "long_call"
)

// NewMetrics creates the forward gateway's metrics (NewMetricsFor).
func NewMetrics() *Metrics { return NewMetricsFor("forward") }

// NewMetricsFor creates the metrics of a gateway in mode ("forward" or
// "reverse") and registers them, with the Go runtime and process
// collectors, on a new registry. Every rdmagw_ series carries the
// constant label mode, so one Prometheus can scrape gateways of both
// kinds and tell them apart. In reverse mode "clients" are TCP clients
// and the "backend" is the RDMA server.
func NewMetricsFor(mode string) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{Registry: reg, mode: mode, procStats: make(map[procKey]*ProcCounters)}
	f := factory{prometheus.WrapRegistererWith(prometheus.Labels{"mode": mode}, reg)}
	m.f = f

	m.registerClientSeries(f)
	m.registerRDMASeries(f)
	m.registerBackendSeries(f)
	m.work = newWorkMetrics(f)

	m.bc = newBCMetrics(f)
	m.events = newEventLog(f)
	m.ops = newOpsMetrics(f)
	m.vers = newVersionMetrics(f)
	if mode == "forward" { // reverse mode has its own backend series (metrics_reverse.go)
		m.ForwardBackend = newBEMetrics(f)
	}

	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// registerClientSeries registers the client connections', credits' and
// calls' series.
func (m *Metrics) registerClientSeries(f factory) {
	m.connsCurrent = f.gauge(metricname.Connections, "RDMA client connections open now.")
	m.connsTotal = f.counter(metricname.ConnectionsTotal, "RDMA client connections accepted.")
	m.connsRejected = f.counterVec(metricname.ConnectionsRejectedTotal,
		"RDMA connection requests refused, by reason (not_allowed: address outside listen.allowed_networks; too_many: connections.max reached; too_many_from_address: connections.max_per_address reached for the client's address; backend_unavailable: the NFS server could not be reached; accept_failed: the RDMA accept itself failed).", "reason")
	m.connsClosed = f.counterVec(metricname.ConnectionsClosedTotal,
		"RDMA client connections ended, by reason (client: the client disconnected; error: a transport error; shutdown: the gateway closed it; backend_gone: the backend stayed unreachable past give_up_after; idle: no call for connections.idle_timeout; reply_timeout: the client took no reply for connections.reply_timeout; reply_unsendable: a reply found no send resources, RFC 8166 section 4.5.4).", "reason")
	m.CreditsInUse = f.gauge(metricname.CreditsInUse, "Calls received from RDMA clients and not yet answered (credits held), over all connections.")
	m.CreditsGranted = f.gauge(metricname.CreditsGranted, "RPC-over-RDMA credits granted to the RDMA clients connected now (rdma.credits each; forward mode).")

	m.calls = f.counterVec(metricname.CallsTotal, "RPC calls received from RDMA clients, by program, version and procedure (numbers outside the NFS family's programs, versions and procedures are labelled other).", "program", "version", "procedure")
	m.replies = f.counterVec(metricname.RepliesTotal, "RPC replies forwarded to RDMA clients, by program, version, procedure (other: see rdmagw_calls_total) and RPC status.", "program", "version", "procedure", "status")
}

// registerRDMASeries registers the series of the RDMA side: bytes by
// path, operations, error answers, engine drops.
func (m *Metrics) registerRDMASeries(f factory) {
	bytes := f.counterVec(metricname.BytesTotal,
		"Bytes moved on the RDMA side, by path: inline (Send/Receive), read_chunk (WRITE payloads moved by RDMA Read), write_chunk (READ payloads moved by RDMA Write), reply_chunk (large replies RDMA-written into the Reply chunk), long_call (calls moved through a Position-Zero Read chunk); direction in = towards the gateway, out = away from it (forward: from/to the RDMA clients; reverse: from/to the RDMA server).", "path", "direction")
	m.bytes = bytes
	m.bytesInline = bytes.WithLabelValues(pathInline, "in")
	m.bytesInlineOut = bytes.WithLabelValues(pathInline, "out")
	m.bytesReadChunk = bytes.WithLabelValues(pathReadChunk, "in")
	m.bytesWriteChunk = bytes.WithLabelValues(pathWriteChunk, "out")
	m.bytesReplyChunk = bytes.WithLabelValues(pathReplyChunk, "out")
	m.bytesLongCall = bytes.WithLabelValues(pathLongCall, "in")

	m.rdmaOps = f.counterVec(metricname.RDMAOperationsTotal,
		"RDMA operations by opcode and completion status. Successful operations are counted per RPC message (RECV per call received, SEND per reply, RDMA_READ per call with Read chunks, RDMA_WRITE per reply with chunk data); failed ones per failed work request.", "op", "status")
	ok := verbs.StatusSuccess.String()
	m.opRecv = m.rdmaOps.WithLabelValues(verbs.OpRecv.String(), ok)
	m.opSend = m.rdmaOps.WithLabelValues(verbs.OpSend.String(), ok)
	m.opRead = m.rdmaOps.WithLabelValues(verbs.OpRDMARead.String(), ok)
	m.opWrite = m.rdmaOps.WithLabelValues(verbs.OpRDMAWrite.String(), ok)
	m.errorsSent = f.counterVec(metricname.RDMAErrorsSentTotal, "RDMA_ERROR answers sent to the RDMA peer (the clients in forward mode, the server in reverse mode), by code (ERR_VERS, ERR_CHUNK), and the RPC GARBAGE_ARGS replies the engine makes itself for Read chunks that do not fit the call's Payload stream (code GARBAGE_ARGS, RFC 8166 §4.5.2).", "code")
	m.errVers = m.errorsSent.WithLabelValues(rdmarpc.ErrCodeVers.String())
	m.errChunk = m.errorsSent.WithLabelValues(rdmarpc.ErrCodeChunk.String())
	m.memoryWaits = f.counter(metricname.RDMAMemoryWaitsTotal, "Times a connection's calls began to wait for registered memory for their Read chunks (the pool or connections.max_call_memory was used up); the client is slowed down, no call is dropped.")
	m.sendInv = f.counter(metricname.RepliesSendInvalidateTotal,
		"Replies sent with Send With Invalidate of the client's rkey (the client offered it in its RFC 8797 private data and the call named one rkey), sparing the client a LOCAL_INV per RPC; a subset of the SEND operations.")
	m.writtenAhead = f.counter(metricname.ReplyBytesWrittenAheadTotal,
		"Bytes of READ (and READLINK) results RDMA-written into the client's Write chunk while the rest of the reply was still arriving from the backend (cut-through, rdma.cut_through); also counted with the reply in rdmagw_bytes_total.")
	m.engineDrops = f.counterVec(metricname.RDMAMessagesDroppedTotal, "RPC-over-RDMA messages from clients dropped without an answer, by reason.", "reason")
}

// registerBackendSeries registers the backend's and the calls' latency
// and failure series.
func (m *Metrics) registerBackendSeries(f factory) {
	m.BackendLatency = f.histogram(metricname.BackendLatencySeconds, "Time from sending a call to the NFS server to the start of its reply (reverse: to the reply's arrival over RDMA).")
	m.CallLatency = f.histogram(metricname.CallLatencySeconds, "Time from a complete call received (forward: over RDMA, Read chunks pulled; reverse: from a TCP client, payload in registered memory) to its reply handed to the client's transport.")
	m.BackendReconnects = f.counter(metricname.BackendReconnectsTotal, "Backend TCP connections re-established after a failure.")
	m.BackendGiveUps = f.counter(metricname.BackendGiveUpsTotal, "RDMA clients disconnected because their backend stayed unreachable past backend.give_up_after.")
	m.UnknownXIDReplies = f.counter(metricname.BackendUnknownXIDRepliesTotal, "Backend replies dropped because their XID matched no outstanding call.")
	m.callsDropped = f.counterVec(metricname.CallsDroppedTotal,
		"Calls not forwarded to the backend or abandoned without its reply, by reason (client_gone: the client disconnected first; backend_gone: the backend stayed unreachable; duplicate_xid: a call reused an XID still outstanding; not_rpc: the message is not an RPC call; rpc_mismatch: rpcvers was not 2, answered RPC_MISMATCH by the gateway; bad_cred, bad_verf: the credential or verifier could not be parsed, answered AUTH_ERROR AUTH_BADCRED / AUTH_BADVERF; garbage_header: the call header was cut short, answered GARBAGE_ARGS; draining: arrived while the gateway drains, not forwarded, sent again by the client after reconnecting; no_v2_binding: a MOUNT, NLM or NSM call over RPC-over-RDMA version two, which binds none of them, answered PROG_UNAVAIL).", "reason")
	m.DDPFallbacks = f.counter(metricname.DDPFallbacksTotal, "READ/READLINK results sent inline instead of by Direct Data Placement (reply not walkable, or item larger than the largest pool buffer).")
	m.backendErrors = f.counterVec(metricname.BackendErrorsTotal, "Backend connection failures, by where they happened (connect, write, read, protocol; ping_timeout: a forward backend silent past backend.ping_timeout; lost: an established RDMA backend connection ended, reverse mode).", "where")
}

// registerPool exports the pool's usage.
func (m *Metrics) registerPool(p *rdmarpc.Pool) {
	m.f.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metricname.PoolBytesInUse, Help: "Registered buffer bytes handed out and not yet returned."},
			func() float64 { return float64(p.InUse()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metricname.PoolBytesRegistered, Help: "Registered buffer bytes mapped (grows with demand up to pool.max_bytes)."},
			func() float64 { return float64(p.Mapped()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metricname.PoolBytesMax, Help: "The most registered buffer bytes the pool may map (pool.max_bytes)."},
			func() float64 { return float64(p.MaxBytes()) }),
	)
}

// Proc returns the counters of one procedure, creating them on first use.
// Programs, versions and procedures outside the NFS family's tables share
// the label value "other" (procKeyOf), so invented numbers from a client
// cannot grow the series (or this map) without bound.
func (m *Metrics) Proc(prog, vers, proc uint32) *ProcCounters {
	k, labels := procKeyOf(prog, vers, proc)
	m.procMu.RLock()
	pc := m.procStats[k]
	m.procMu.RUnlock()
	if pc != nil {
		return pc
	}
	m.procMu.Lock()
	defer m.procMu.Unlock()
	if pc = m.procStats[k]; pc != nil {
		return pc
	}
	pc = &ProcCounters{labels: labels}
	pc.Calls = m.calls.WithLabelValues(pc.labels[:]...)
	m.procStats[k] = pc
	return pc
}

// labelOther is the program, version or procedure label of every number
// the gateway has no name for.
const labelOther = "other"

// procOther stands for an unknown program, version or procedure in a
// procKey (no NFS-family program uses it).
const procOther = ^uint32(0)

// procKeyOf maps a call's numbers to its bounded key and labels: a known
// procedure keeps its own; an unknown procedure of a known version, an
// unknown version of a known program, and an unknown program fold into
// "other" at that level and below.
func procKeyOf(prog, vers, proc uint32) (procKey, [3]string) {
	pname := programName(prog)
	if pname == "" {
		return procKey{procOther, procOther, procOther}, [3]string{labelOther, labelOther, labelOther}
	}
	name, versKnown, ok := ulb.LookupProc(prog, vers, proc)
	switch {
	case ok:
		return procKey{prog, vers, proc}, [3]string{pname, strconv.FormatUint(uint64(vers), 10), name}
	case versKnown:
		return procKey{prog, vers, procOther}, [3]string{pname, strconv.FormatUint(uint64(vers), 10), labelOther}
	}
	return procKey{prog, procOther, procOther}, [3]string{pname, labelOther, labelOther}
}

func (pc *ProcCounters) Reply(m *Metrics, st ReplyStatus) prometheus.Counter {
	if c, ok := pc.replies[st].Load().(prometheus.Counter); ok {
		return c
	}
	// Racing first uses store the same child: WithLabelValues is idempotent.
	c := m.replies.WithLabelValues(pc.labels[0], pc.labels[1], pc.labels[2], replyStatusNames[st])
	pc.replies[st].Store(c)
	return c
}

func programName(prog uint32) string {
	switch prog {
	case ulb.ProgNFS:
		return "nfs"
	case ulb.ProgMount:
		return "mount"
	case ulb.ProgNLM:
		return "nlm"
	case ulb.ProgNSM:
		return "nsm"
	case ulb.ProgNFSACL:
		return "nfsacl"
	}
	return ""
}

// ---- rdmarpc.ResponderMetrics ----

// engineMetrics is the view of Metrics the RPC-over-RDMA engine reports
// to (rdmarpc.ResponderMetrics); it is no part of the gateway's API.
type engineMetrics Metrics

// engine returns m's engine view.
func (m *Metrics) engine() *engineMetrics { return (*engineMetrics)(m) }

// ResponderMetrics is m as the engine's rdmarpc.ResponderMetrics (the
// counters of every RDMA client connection together).
func (m *Metrics) ResponderMetrics() rdmarpc.ResponderMetrics { return m.engine() }

var _ rdmarpc.ResponderMetrics = (*engineMetrics)(nil)

// CallReceived counts a call's bytes by the path they took.
func (m *engineMetrics) CallReceived(kind rdmarpc.CallKind, inline, chunk int) {
	m.opRecv.Inc()
	m.bytesInline.Add(float64(inline))
	switch kind {
	case rdmarpc.CallReadChunk:
		m.opRead.Inc()
		m.bytesReadChunk.Add(float64(chunk))
	case rdmarpc.CallLong:
		m.opRead.Inc()
		m.bytesLongCall.Add(float64(chunk))
	}
}

// ReplySent counts a reply's bytes. For a reply through the Reply chunk
// the engine reports Write chunk and Reply chunk bytes together; they
// are counted as reply_chunk.
func (m *engineMetrics) ReplySent(kind rdmarpc.ReplyKind, inline, written int) {
	m.opSend.Inc()
	m.work.send.Inc()
	m.bytesInlineOut.Add(float64(inline))
	if written > 0 {
		m.opWrite.Inc()
	}
	switch kind {
	case rdmarpc.ReplyInline:
		m.bytesWriteChunk.Add(float64(written))
	case rdmarpc.ReplyReplyChunk:
		m.bytesReplyChunk.Add(float64(written))
	}
}

// ErrorSent counts an RDMA_ERROR answer.
func (m *engineMetrics) ErrorSent(code rdmarpc.ErrorCode) {
	switch code {
	case rdmarpc.ErrCodeVers:
		m.errVers.Inc()
	case rdmarpc.ErrCodeChunk:
		m.errChunk.Inc()
	default:
		m.errorsSent.WithLabelValues(code.String()).Inc()
	}
}

// SendInvalidated counts a reply sent with Send With Invalidate.
func (m *engineMetrics) SendInvalidated() { m.sendInv.Inc() }

// WrittenAhead counts item bytes written ahead of their reply.
func (m *engineMetrics) WrittenAhead(n int) { m.writtenAhead.Add(float64(n)) }

// Dropped counts a message the engine dropped.
func (m *engineMetrics) Dropped(reason rdmarpc.DropReason) {
	m.engineDrops.WithLabelValues(reason.String()).Inc()
}

// MemoryWait counts calls beginning to wait for Read chunk memory.
func (m *engineMetrics) MemoryWait() { m.memoryWaits.Inc() }

// RDMAFailed counts a failed work request.
func (m *engineMetrics) RDMAFailed(op verbs.Opcode, status verbs.Status) {
	m.rdmaOps.WithLabelValues(op.String(), status.String()).Inc()
}

// ConnUp counts an established client connection.
func (m *engineMetrics) ConnUp() {
	m.connsTotal.Inc()
	m.connsCurrent.Inc()
}

// ConnDown counts a connection's end. The engine's err only says whether
// it ended cleanly; the session records the finer reason (closeReason).
func (m *engineMetrics) ConnDown(err error) {
	m.connsCurrent.Dec()
}

// ---- bridge events ----

func (m *Metrics) ConnClosed(reason string) { m.connsClosed.WithLabelValues(reason).Inc() }

func (m *Metrics) Rejected(reason string) { m.connsRejected.WithLabelValues(reason).Inc() }

func (m *Metrics) CallDropped(reason string) { m.callsDropped.WithLabelValues(reason).Inc() }

func (m *Metrics) BackendError(where string) { m.backendErrors.WithLabelValues(where).Inc() }

// BackendReadFailed counts a failed read from the backend, unless the
// gateway had closed the connection itself (the client went away, the
// session is ending, a reconnect): that is no backend error.
func (m *Metrics) BackendReadFailed(err error) {
	if errors.Is(err, net.ErrClosed) {
		return
	}
	m.BackendError("read")
}

func (m *Metrics) Observe(h prometheus.Histogram, since time.Time) {
	h.Observe(time.Since(since).Seconds())
}

// factory registers metrics on one registry.
type factory struct{ reg prometheus.Registerer }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

// latencyBuckets span 25 µs (an RDMA round trip) to 10 s (a stalled
// server).
var latencyBuckets = prometheus.ExponentialBucketsRange(25e-6, 10, 20)

func (f factory) histogram(name, help string) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets})
	f.reg.MustRegister(h)
	return h
}
