package forward

import (
	"errors"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/verbs"
)

// sessionMetrics counts one forward client's RDMA bytes for the live
// view and passes every event on to the gateway's metrics.
type sessionMetrics struct {
	rdmarpc.ResponderMetrics
	ops *gateway.ClientOps
	gateway.EngineExtras
	log  hclog.Logger
	peer string
}

func newSessionMetrics(next rdmarpc.ResponderMetrics, ops *gateway.ClientOps, log hclog.Logger, peer string) sessionMetrics {
	return sessionMetrics{ResponderMetrics: next, ops: ops, EngineExtras: gateway.ExtrasOf(next), log: log, peer: peer}
}

// VersionSettled implements rdmarpc.VersionMetrics: the line that says
// which RPC-over-RDMA version the client speaks (its first message
// decides, after "client connected"), and the count by version.
func (m sessionMetrics) VersionSettled(v uint32, fellBack bool) {
	m.log.Info("client RPC-over-RDMA version", "peer", m.peer, "version", v)
	m.EngineExtras.VersionSettled(v, fellBack)
}

// CallReceived implements rdmarpc.ResponderMetrics.
func (m sessionMetrics) CallReceived(kind rdmarpc.CallKind, inline, chunk int) {
	m.ops.In.Add(uint64(inline + chunk))
	m.ResponderMetrics.CallReceived(kind, inline, chunk)
}

// ReplySent implements rdmarpc.ResponderMetrics.
func (m sessionMetrics) ReplySent(kind rdmarpc.ReplyKind, inline, written int) {
	m.ops.Out.Add(uint64(inline + written))
	m.ResponderMetrics.ReplySent(kind, inline, written)
}

// closeReason classifies why a client connection ended, for
// rdmagw_connections_closed_total.
func closeReason(serveErr error, giveUp, shutdown bool) string {
	switch {
	case giveUp:
		return "backend_gone"
	case shutdown:
		return "shutdown"
	case errors.Is(serveErr, rdmarpc.ErrIdleTimeout):
		return "idle"
	case errors.Is(serveErr, rdmarpc.ErrReplyTimeout):
		return "reply_timeout"
	case errors.Is(serveErr, rdmarpc.ErrReplyUnsendable):
		return "reply_unsendable"
	case serveErr == nil, errors.Is(serveErr, rdmarpc.ErrConnClosed), errors.Is(serveErr, verbs.ErrClosed):
		return "client"
	}
	return "error"
}

// Reasons of rdmagw_backend_calls_failed_total.
const (
	failTooLarge = "reply_too_large" // record above backend.max_reply_bytes
	failBroken   = "reply_broken"    // the connection broke inside this call's reply maxReplyBreaks times
	failNoDDP    = "ddp_impossible"  // a result the client offered a Write chunk for cannot be placed in it (replybuilder)
)
