package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmagw/rdmagw/gateway/metricname"
	"github.com/rdmagw/rdmagw/rdmarpc"
)

// Work request paths (the "path" label of rdmagw_rdma_work_requests_total):
// the message's own Send, the extra Sends of a version-two continued
// message, version-two GRANTs, and rdmarpc.WorkPath's Reads and Writes.
const (
	workSend         = "send"
	workContinuation = "continuation"
	workGrant        = "grant"
)

// workMetrics counts the work requests the gateway's engine posts, by
// path: with rdmagw_calls_total they give RDMA operations per RPC.
type workMetrics struct {
	send, continuation, grant prometheus.Counter
	rdma                      [rdmarpc.WorkPaths]prometheus.Counter
}

func newWorkMetrics(f factory) *workMetrics {
	v := f.counterVec(metricname.RDMAWorkRequestsTotal,
		"RDMA work requests the gateway posted on its RDMA connections, by path: send (the one Send of each RPC-over-RDMA message: forward replies and error answers, reverse calls), continuation (the further Sends of a version-two message sent by continuation, its MIDDLE fragments), grant (version-two RDMA2_GRANT messages), read_chunk and long_call (RDMA Reads, one per Read chunk segment; long_call: the Position-Zero Read chunk or version-two Call chunk), write_chunk and reply_chunk (RDMA Writes into Write chunks and the Reply chunk, one per segment or more); reverse mode also counts registration (memory registrations exposing a call's chunks to the server, one per chunk, each revoked when the reply comes: with FRWR hardware a registration and an invalidation work request). The bytes each path moved are in rdmagw_bytes_total.", "path")
	w := &workMetrics{send: v.WithLabelValues(workSend), continuation: v.WithLabelValues(workContinuation),
		grant: v.WithLabelValues(workGrant)}
	for p := range w.rdma {
		w.rdma[p] = v.WithLabelValues(rdmarpc.WorkPath(p).String())
	}
	return w
}

// continued counts the MIDDLE Sends of a message this side sent in sends
// Sends (the final one is counted as its send).
func (w *workMetrics) continued(sends int) {
	if sends > 1 {
		w.continuation.Add(float64(sends - 1))
	}
}

// ---- rdmarpc.WorkMetrics and rdmarpc.ResponderV2Metrics (forward) ----

var (
	_ rdmarpc.WorkMetrics        = (*engineMetrics)(nil)
	_ rdmarpc.ResponderV2Metrics = (*engineMetrics)(nil)
	_ rdmarpc.ResponderV2Metrics = (*ReverseMetrics)(nil)
	_ rdmarpc.WorkMetrics        = (*ReverseMetrics)(nil)
)

// posted counts n work requests of path p.
func (w *workMetrics) posted(p rdmarpc.WorkPath, n int) {
	if int(p) < len(w.rdma) {
		w.rdma[p].Add(float64(n))
	}
}

// Posted counts the RDMA Reads and Writes of one message.
func (m *engineMetrics) Posted(p rdmarpc.WorkPath, n int) { m.work.posted(p, n) }

// V2ErrorSent counts an RDMA2_ERROR answer by its code.
func (m *engineMetrics) V2ErrorSent(code rdmarpc.V2ErrCode) {
	m.errorsSent.WithLabelValues(code.String()).Inc()
}

// V2GrantSent counts an RDMA2_GRANT posted.
func (m *engineMetrics) V2GrantSent() { m.work.grant.Inc() }

// V2Continued counts the MIDDLE Sends of a reply sent by continuation;
// a continued call received is the peer's Sends, not counted here.
func (m *engineMetrics) V2Continued(received bool, sends int) {
	if !received {
		m.work.continued(sends)
	}
}

// V2Discarded counts a continuation fragment dropped silently.
func (m *engineMetrics) V2Discarded() { m.engineDrops.WithLabelValues(dropV2Fragment).Inc() }

// dropV2Fragment is the rdmagw_rdma_messages_dropped_total reason of a
// version-two continuation fragment discarded (its sequence was already
// answered with an error).
const dropV2Fragment = "v2_fragment"

// ---- the requester's (reverse) ----

// Posted counts the registrations of one call (the requester posts no
// RDMA Reads or Writes).
func (m *ReverseMetrics) Posted(p rdmarpc.WorkPath, n int) { m.work.posted(p, n) }

// V2ErrorSent counts an RDMA2_ERROR the requester sent to the server.
func (m *ReverseMetrics) V2ErrorSent(code rdmarpc.V2ErrCode) { m.engine().V2ErrorSent(code) }

// V2GrantSent counts an RDMA2_GRANT the requester sent.
func (m *ReverseMetrics) V2GrantSent() { m.work.grant.Inc() }

// V2Continued counts the MIDDLE Sends of a call sent by continuation; a
// continued reply received is the server's Sends, not counted here.
func (m *ReverseMetrics) V2Continued(received bool, sends int) {
	if !received {
		m.work.continued(sends)
	}
}

// V2Discarded counts a reply fragment dropped silently.
func (m *ReverseMetrics) V2Discarded() { m.engine().V2Discarded() }

// EngineExtras are the optional engine metrics the gateway implements
// beside rdmarpc.ResponderMetrics. The engine finds them by type
// assertion, which a wrapper embedding only the ResponderMetrics
// interface hides: wrappers (connMetrics, forward's per-session
// metrics) embed EngineExtras too, filled by ExtrasOf.
type EngineExtras struct {
	rdmarpc.WorkMetrics
	rdmarpc.ResponderV2Metrics
	rdmarpc.VersionMetrics // metrics_version.go
}

// ExtrasOf is next's optional metrics, or ones counting nothing.
func ExtrasOf(next any) EngineExtras {
	e := EngineExtras{WorkMetrics: nopExtras{}, ResponderV2Metrics: nopExtras{}, VersionMetrics: nopExtras{}}
	if w, ok := next.(rdmarpc.WorkMetrics); ok {
		e.WorkMetrics = w
	}
	if v, ok := next.(rdmarpc.ResponderV2Metrics); ok {
		e.ResponderV2Metrics = v
	}
	if v, ok := next.(rdmarpc.VersionMetrics); ok {
		e.VersionMetrics = v
	}
	return e
}

type nopExtras struct{}

func (nopExtras) Posted(rdmarpc.WorkPath, int)  {}
func (nopExtras) V2ErrorSent(rdmarpc.V2ErrCode) {}
func (nopExtras) V2GrantSent()                  {}
func (nopExtras) V2Continued(bool, int)         {}
func (nopExtras) V2Discarded()                  {}
