package forward

import (
	"context"
	"errors"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/callback"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/tcprpc"
)

// The NFSv4.1+ backchannel through the forward gateway (RFC 8167, RFC
// 8267 §6.5.2).
//
// An NFSv4.1 server sends callbacks (CB_NULL, CB_COMPOUND with
// CB_SEQUENCE, CB_RECALL, CB_LAYOUTRECALL, ...) as RPC CALL messages on
// the TCP connection the client bound as its session's back channel
// (CREATE_SESSION with CREATE_SESSION4_FLAG_CONN_BACK_CHAN, or
// BIND_CONN_TO_SESSION). Through rdmagw that is the backend connection of
// the client's session, so:
//
//   - the backend reader tells calls from replies by msg_type
//     (oncrpc.PeekMsgType); a call is read whole (it must fit the
//     client's inline receive size less the 28-byte transport header:
//     backward messages are never chunked) and queued for the session's
//     backchannel goroutine;
//   - that goroutine sends it to the client as a backward-direction call
//     (RDMA_MSG, no chunks, rdmarpc.ResponderConn.SendBackwardCall),
//     waiting while the client's backchannel credits are in use: at most
//     as many calls are outstanding as the client granted in the
//     rdma_credit of its last backward reply (1 until the first; Linux
//     grants 16) and as receives the engine posted for the replies;
//   - the client's reply arrives as an RDMA_MSG carrying an RPC REPLY;
//     the engine recognises it (it takes no forward credit and is never
//     taken for a malformed call) and hands it here; the backend writer
//     sends it to the server on the same TCP connection;
//   - a callback that cannot be delivered — too big for the client's
//     inline size, no credit free within the queue's room, the client
//     gone — is answered to the server with an RPC SYSTEM_ERR reply, so
//     it sees the failure at once rather than after a timeout; each case
//     is counted in rdmagw_backchannel_errors_total{reason} and logged.
//
// After a backend reconnect the server sees a new connection that is not
// bound to the session: it reports SEQ4_STATUS_CB_PATH_DOWN_SESSION in
// SEQUENCE replies, and the client binds the connection again with
// BIND_CONN_TO_SESSION, which goes through the gateway like any call.
// Replies to callbacks of the old connection are discarded.
//
// NFSv4.0 has no backchannel on the forward connection (RFC 8267 §6.5.1):
// the client names a callback address in SETCLIENTID (cb_location, a
// netid and universal address) and the server opens a separate TCP
// connection to it. rdmagw does not touch that connection: the SETCLIENTID
// arguments pass through unchanged, so the server connects straight to
// the address the client gave — usually the client's own IP on the RDMA
// fabric (Linux uses its "clientaddr", by default the local address of
// the RDMA connection, with netid "rdma" or "tcp"). Delegations and
// callbacks then work only if the filer can reach that address over TCP
// (routing between the filer's network and the client's RDMA-side
// address, no firewall on the client's callback port). When it cannot,
// the server sees the callback path down and simply grants no
// delegations; everything else works. A Linux client whose SETCLIENTID
// names netid "rdma" gets no callbacks from a TCP-only filer at all.

// bcSession is a session's backchannel state. q is fed by the backend
// reader and drained by the backchannel goroutine; out (guarded by the
// session's mu) holds client replies for the backend writer.
type bcSession struct {
	cfg gateway.BackchannelConfig
	met *gateway.BackchannelMetrics
	q   chan []byte
	out [][]byte
}

// initBackchannel enables backward-direction calls on the session's
// connection. Called by newSession, before Serve.
func (s *session) initBackchannel() {
	cfg := s.cfg.Backchannel.WithDefaults()
	s.bc.cfg = cfg
	s.bc.met = s.met.Backchannel()
	if cfg.Disabled {
		return
	}
	s.bc.q = make(chan []byte, cfg.Queue)
	s.rc.SetBackchannel(s.backwardReply, s.bc.met)
}

// backwardReply takes a client's callback reply (engine goroutine: copy
// and hand to the backend writer, never block).
func (s *session) backwardReply(xid uint32, reply []byte) {
	msg := append([]byte(nil), reply...)
	s.mu.Lock()
	s.bc.out = append(s.bc.out, msg)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	s.log.Debug("callback reply forwarded to the backend", "peer", s.peer, "xid", xid, "bytes", len(reply))
}

// readBackchannelCall reads the CALL record the backend reader has just
// peeked at and queues it for the client. It returns an error only when
// the backend connection failed.
func (s *session) readBackchannelCall(rr *tcprpc.RecordReader, xid uint32) error {
	limit := s.rc.BackchannelMax()
	if s.bc.q == nil || limit <= 0 {
		limit = 0
	}
	buf, whole, err := callback.ReadRecord(rr, limit)
	if err != nil {
		s.met.BackendReadFailed(err)
		return err
	}
	if !whole {
		reason := "too_big"
		if s.bc.q == nil {
			reason = "disabled"
		}
		s.bc.met.BackwardError(reason)
		s.log.Warn("callback from the server not forwarded", "peer", s.peer, "xid", xid, "reason", reason,
			"bytes_at_least", len(buf), "client_inline_limit", limit)
		s.answerCallbackError(xid)
		return nil
	}
	select {
	case s.bc.q <- buf:
	default:
		s.bc.met.BackwardError("no_credit")
		s.log.Warn("callback from the server not forwarded: backchannel queue full", "peer", s.peer, "xid", xid, "queue", cap(s.bc.q))
		s.answerCallbackError(xid)
	}
	return nil
}

// answerCallbackError answers a callback the gateway could not deliver
// with SYSTEM_ERR, through the backend writer.
func (s *session) answerCallbackError(xid uint32) {
	msg := callback.ErrorReply(xid)
	if msg == nil {
		return
	}
	s.mu.Lock()
	s.bc.out = append(s.bc.out, msg)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// runBackchannel sends queued callbacks to the client, one at a time in
// arrival order, each waiting for a backchannel credit, until ctx ends.
func (s *session) runBackchannel(ctx context.Context) {
	if s.bc.q == nil {
		return
	}
	for {
		var msg []byte
		select {
		case msg = <-s.bc.q:
		case <-ctx.Done():
			return
		}
		xid, _, _ := oncrpc.PeekMsgType(msg)
		err := s.rc.SendBackwardCall(ctx, [][]byte{msg}, true)
		switch {
		case err == nil:
			s.log.Debug("callback forwarded to the client", "peer", s.peer, "xid", xid, "bytes", len(msg))
		case errors.Is(err, context.Canceled):
			return
		default:
			// too_big and client_gone are counted by the engine.
			s.log.Warn("callback not forwarded to the client", "peer", s.peer, "xid", xid, "error", err)
			s.answerCallbackError(xid)
			if errors.Is(err, rdmarpc.ErrConnClosed) {
				return
			}
		}
	}
}

// writeBackchannelReplies sends the callback replies waiting for the
// backend (backend writer).
func (s *session) writeBackchannelReplies(rw *tcprpc.RecordWriter) error {
	s.mu.Lock()
	out := s.bc.out
	s.bc.out = nil
	s.mu.Unlock()
	for _, m := range out {
		if err := rw.WriteRecord(m, nil, nil); err != nil {
			// The connection is going; the rest belongs to it.
			s.met.BackendError("write")
			return err
		}
	}
	return nil
}

// resetBackchannel drops the callback replies of a backend connection
// that is gone: the new one is not the server's back channel.
func (s *session) resetBackchannel() {
	s.mu.Lock()
	n := len(s.bc.out)
	s.bc.out = nil
	s.mu.Unlock()
	if n > 0 {
		s.log.Debug("callback replies for the previous backend connection discarded", "peer", s.peer, "replies", n)
	}
}
