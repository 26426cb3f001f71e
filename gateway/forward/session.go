package forward

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/xdr"
)

// session bridges one RDMA client connection to its own backend TCP
// connection (connection_policy per_client). It is the engine's Handler:
// ServeCall registers each call by XID and queues it for the backend
// writer; the backend reader matches replies by XID, builds each reply in
// registered buffers and hands it to call.Reply. The backend goroutines
// (backend.go) reconnect on failure and re-send what has no reply yet.
//
// Who owns a call (pendingCall and its rdmarpc.Call):
//   - ServeCall puts it in the pending table and the send queue. While it
//     is in the pending table the writer may put its message on the wire
//     (as often as reconnects need) and the reader may build its reply.
//   - The reader takes it out of the pending table (takeAnswered) when it
//     has its answer: from then on the answer is the reader's to send,
//     and nothing else answers, drops or re-sends the call.
//   - Answering (call.Reply, or Drop) hands the call's buffers back to
//     the engine, so it must not happen while the writer is still inside
//     the writev that carries them: on loopback the reply often arrives
//     before writev returns. Nobody waits for that. The writer marks the
//     call wireWriting around its writev; the reader that finds it so
//     hands the answer over (wireHandedOff) and goes on reading, and the
//     writer, back from writev, sends the answer itself. Whichever of the
//     two lets go of the call last answers it (as svcrdma's completion
//     handlers leave the release to whoever drops the last reference).
//   - A reply is matched only to a call the writer has begun to write on
//     the current connection (onWire). A reply for a call still waiting
//     in the writer's batch answers an earlier send of the same XID: on
//     a backend connection kept across a client's reconnect, the reply
//     to the old client's call can arrive after the new client sent the
//     call again. It is dropped as an unknown XID (the re-send gets the
//     server's cached reply); taking it would recycle a call the writer
//     is about to write (lab 21-drc-reconnect: a nil call in writeCalls).
//   - The answer recycles the pendingCall; teardown drops what is still
//     in the table once both backend goroutines have stopped.
type session struct {
	rc   *rdmarpc.ResponderConn
	cfg  *gateway.Config
	log  hclog.Logger
	met  *gateway.Metrics
	pool *rdmarpc.Pool
	peer string
	// seq orders sessions by creation: parked sessions of one client
	// are handed out oldest first (park.go).
	seq uint64
	// replyQuota bounds the pool memory the session's replies hold
	// (connections.max_reply_memory).
	replyQuota *rdmarpc.Quota

	mu      sync.Mutex
	pending pendingTable
	sendQ   []*pendingCall // queued for the writer, in arrival order
	spareQ  []*pendingCall // the writer's batch storage, swapped with sendQ
	closing bool
	wake    chan struct{} // tells the writer sendQ is not empty (cap 1)

	// hdrScratch gathers a call's RPC header when it is split across
	// pieces (ServeCall runs on the engine's one goroutine, so one buffer
	// serves).
	hdrScratch [oncrpc.MaxCallHeader]byte

	giveUp bool // the backend stayed unreachable: the client was disconnected

	bc bcSession // NFSv4.1 callbacks (backchannel.go)

	ops    *gateway.ClientOps // live view and drain (gateway/ops.go, ops.go)
	dialer *backendDialer     // the backend connection's addresses, for the live view
	be     beState            // backend connection health (backend.go)
	w      inlineState        // the engine's own writes to the backend (backend_inline.go)
}

// sessionSeq numbers sessions (session.seq).
var sessionSeq atomic.Uint64

func newSession(rc *rdmarpc.ResponderConn, cfg *gateway.Config, log hclog.Logger, met *gateway.Metrics, pool *rdmarpc.Pool) *session {
	s := &session{
		rc: rc, cfg: cfg, log: log, met: met, pool: pool, peer: rc.RemoteAddr(),
		replyQuota: rdmarpc.NewQuota(int64(cfg.Connections.MaxReplyMemory), nil),
		pending:    newPendingTable(cfg.RDMA.Credits),
		sendQ:      make([]*pendingCall, 0, cfg.RDMA.Credits),
		spareQ:     make([]*pendingCall, 0, cfg.RDMA.Credits),
		wake:       make(chan struct{}, 1),
		seq:        sessionSeq.Add(1),
	}
	s.initBackchannel()
	s.ops = new(gateway.ClientOps)
	s.ops.Init(time.Now())
	return s
}

// ServeCall implements rdmarpc.Handler. It never blocks on the network:
// it decodes the RPC header for the metrics and the reply walk, records
// the call and wakes the backend writer, or, onto an idle backend
// connection, leaves the write to ServeBatchDone (backend_inline.go).
func (s *session) ServeCall(call *rdmarpc.Call) {
	now := time.Now()
	s.met.CreditsInUse.Inc()
	var h oncrpc.CallHeader
	hdr := s.callHeaderBytes(&call.Msg)
	if _, err := h.Decode(hdr); err != nil {
		s.rejectCall(call, &h, err)
		return
	}
	if call.Version() == rdmarpc.V2Version && !ulb.BoundOnV2(h.Prog) {
		s.refuseUnbound(call, &h)
		return
	}
	pc := s.getPending()
	pc.call, pc.xid, pc.received = call, h.XID, now
	pc.prog, pc.vers, pc.proc = h.Prog, h.Vers, h.Proc
	wrapped, gerr := oncrpc.GSSBodyWrapped(h.Cred)
	pc.ddp = !wrapped && gerr == nil
	pc.stats = s.met.Proc(h.Prog, h.Vers, h.Proc)
	pc.stats.Calls.Inc()
	s.ops.Touch(now)

	s.mu.Lock()
	if s.ops.Draining.Load() {
		s.pending.put(pc)
		s.mu.Unlock()
		s.drop(call, "draining")
		return
	}
	if s.closing {
		s.pending.put(pc)
		s.mu.Unlock()
		s.drop(call, "client_gone")
		return
	}
	if !s.pending.add(pc) {
		s.pending.put(pc)
		s.mu.Unlock()
		// The client reused an XID still outstanding: a retransmission
		// of a call in progress. A server's duplicate request cache drops
		// such a call (Linux nfsd: RC_DROPIT) because the first call's
		// reply answers it: the client matches replies by XID and holds
		// one request per XID. Any answer of our own (an error) would
		// complete the client's request before the server has acted on
		// it. This is no reply the gateway cannot send (RFC 8166 §4.5.4
		// does not apply): one reply for the XID will be sent. The
		// duplicate's receive and credit come back at once.
		s.drop(call, "duplicate_xid")
		return
	}
	wake := s.queueCall(pc)
	s.mu.Unlock()
	if wake {
		s.wakeWriter()
	}
}

// callHeaderBytes returns the start of the call message, gathered into
// hdrScratch only when the first piece is shorter than a maximal header.
func (s *session) callHeaderBytes(m *rdmarpc.Message) []byte {
	if len(m.Pieces) == 0 {
		return nil
	}
	if first := m.Pieces[0].Data; len(first) >= oncrpc.MaxCallHeader || len(m.Pieces) == 1 {
		return first
	}
	n := 0
	for i := range m.Pieces {
		n += copy(s.hdrScratch[n:], m.Pieces[i].Data)
		if n == len(s.hdrScratch) {
			break
		}
	}
	return s.hdrScratch[:n]
}

// rejectCall answers a call whose RPC header does not decode, with the
// RPC-level answer a server gives (RFC 5531 §9): an RPC version other
// than 2 gets RPC_MISMATCH; a credential or verifier that cannot be
// parsed (too long, cut short) MSG_DENIED AUTH_ERROR with AUTH_BADCRED or
// AUTH_BADVERF; a header cut short before them GARBAGE_ARGS. Only a
// message that is not a call at all (msg_type REPLY or unknown) is
// dropped: it asks for no reply. If the answer itself cannot be sent
// the engine closes the connection.
func (s *session) rejectCall(call *rdmarpc.Call, h *oncrpc.CallHeader, err error) {
	var rh oncrpc.ReplyHeader
	var he *oncrpc.HeaderError
	reason := ""
	switch {
	case errors.Is(err, oncrpc.ErrBadRPCVersion):
		rh, reason = oncrpc.RPCMismatchReply(h.XID), "rpc_mismatch"
	case errors.As(err, &he) && he.Field == "cred":
		rh, reason = oncrpc.AuthErrorReply(h.XID, oncrpc.AuthBadCred), "bad_cred"
	case errors.As(err, &he) && he.Field == "verf":
		rh, reason = oncrpc.AuthErrorReply(h.XID, oncrpc.AuthBadVerf), "bad_verf"
	case errors.Is(err, oncrpc.ErrNotCall), errors.Is(err, oncrpc.ErrBadMsgType),
		he != nil && (he.Field == "xid" || he.Field == "msg_type"):
		s.drop(call, "not_rpc") // logs the client event
		return
	default:
		rh, reason = oncrpc.GarbageArgsReply(h.XID), "garbage_header"
	}
	s.answerInstead(call, h.XID, &rh, reason, "error", err)
}

// answerInstead answers call with the gateway-made reply header rh
// instead of forwarding it: the client event is logged (kv says why) and
// the call counted as dropped for reason before the answer goes out, so
// a client holding the answer finds it counted.
func (s *session) answerInstead(call *rdmarpc.Call, xid uint32, rh *oncrpc.ReplyHeader, reason string, kv ...any) {
	s.met.CallEvent(reason, s.peer, xid, kv...) // gateway/logging.go
	s.met.CallDropped(reason)
	if err := s.replyWithHeader(call, rh); err != nil {
		s.log.Debug("gateway answer not sent", "peer", s.peer, "xid", xid, "reason", reason, "error", err)
	}
}

// refuseUnbound answers PROG_UNAVAIL to a call of a program the NFS
// binding for RPC-over-RDMA version two does not bind (MOUNT, NLM, NSM:
// ulb.BoundOnV2) that came over version two, without forwarding it.
func (s *session) refuseUnbound(call *rdmarpc.Call, h *oncrpc.CallHeader) {
	s.met.Proc(h.Prog, h.Vers, h.Proc).Calls.Inc()
	rh := oncrpc.ProgUnavailReply(h.XID)
	s.answerInstead(call, h.XID, &rh, reasonNoV2Binding, "program", h.Prog)
}

// reasonNoV2Binding: a MOUNT, NLM or NSM call over RPC-over-RDMA version
// two, answered PROG_UNAVAIL (rdmagw_calls_dropped_total).
const reasonNoV2Binding = "no_v2_binding"

// replyWithHeader answers call with a gateway-made reply of just a header.
func (s *session) replyWithHeader(call *rdmarpc.Call, rh *oncrpc.ReplyHeader) error {
	buf, err := s.pool.Get(rh.EncodedLen())
	if err != nil {
		// No memory for a few bytes of answer: the answer cannot be
		// sent, so the connection closes (RFC 8166 §4.5.4).
		s.met.CreditsInUse.Dec()
		call.Drop()
		s.rc.CloseUnsendable(call.XID(), "RPC error reply")
		return err
	}
	e := xdr.NewEncoder(buf.Bytes)
	if err := rh.Encode(&e); err != nil {
		buf.Release()
		return err
	}
	var msg rdmarpc.Message
	msg.XID = rh.XID
	msg.Append(rdmarpc.Piece{Data: e.Bytes(), Buf: buf})
	s.met.CreditsInUse.Dec()
	return call.Reply(&msg)
}

// drop abandons a call that will get no reply.
func (s *session) drop(call *rdmarpc.Call, reason string) {
	s.met.CallDropped(reason)
	s.met.CallEvent(reason, s.peer, call.XID()) // gateway/logging.go
	s.met.CreditsInUse.Dec()
	call.Drop()
}

func (s *session) getPending() *pendingCall {
	s.mu.Lock()
	pc := s.pending.get()
	s.mu.Unlock()
	return pc
}

// deliver hands pc's finished reply to the engine, unless the session is
// tearing down (then the reply is discarded and the call dropped by
// teardown). It is called by the backend reader.
func (s *session) deliver(pc *pendingCall, st gateway.ReplyStatus) {
	if !s.takeAnswered(pc) {
		// Not ours any more (cannot happen while the reader runs).
		pc.reply.ReleaseBuffers()
		return
	}
	pc.answer, pc.status = answerReply, st
	s.answerOrHandOff(pc)
}

// answerKind is how a call taken from the pending table is answered.
type answerKind uint8

const (
	answerNone  answerKind = iota
	answerReply            // the backend's reply, built in pc.reply (sendReply)
	answerFail             // SYSTEM_ERR (sendFailure)
)

// pendingCall.wire states.
const (
	wireIdle      = iota // the writer is not writing the call
	wireWriting          // the writer is inside the writev that carries the call's buffers
	wireHandedOff        // ...and the reader has left the answer to it
)

// writing marks pc as being put on the wire (writer, before writev).
// wire first: a reader that sees onWire finds wireWriting (and hands
// the answer over) or the writev done.
func (pc *pendingCall) writing() {
	pc.wire.Store(wireWriting)
	pc.onWire.Store(true)
}

// written ends writing (writer, after writev) and reports whether the
// reader handed pc's answer over meanwhile: then the writer sends it.
func (pc *pendingCall) written() bool {
	if pc.wire.CompareAndSwap(wireWriting, wireIdle) {
		return false
	}
	pc.wire.Store(wireIdle)
	return true
}

// handOff gives pc's answer to the writer if it is still inside the
// writev that sent the call; false if it is not, and the caller (the
// reader) answers. Either way the reader does not touch pc again.
func (pc *pendingCall) handOff() bool { return pc.wire.CompareAndSwap(wireWriting, wireHandedOff) }

// answerOrHandOff answers pc, which the reader has taken from the
// pending table with its answer set, or, while the writer is still
// inside the writev that sent the call, hands the answer to the writer.
// Reader only.
func (s *session) answerOrHandOff(pc *pendingCall) {
	if pc.handOff() {
		return // the writer finishes it when writev returns
	}
	s.finishAnswer(pc)
}

// finishAnswer sends pc's answer and recycles pc. It runs on the reader,
// or on the writer when the answer was handed to it.
func (s *session) finishAnswer(pc *pendingCall) {
	switch pc.answer {
	case answerReply:
		s.sendReply(pc)
	case answerFail:
		s.sendFailure(pc)
	}
}

// sendReply is deliver's answer (finishAnswer).
func (s *session) sendReply(pc *pendingCall) {
	now := time.Now() // one reading for both
	s.ops.Touch(now)
	s.met.CallLatency.Observe(now.Sub(pc.received).Seconds())
	pc.stats.Reply(s.met, pc.status).Inc()
	s.met.CreditsInUse.Dec()
	if err := pc.call.Reply(&pc.reply); err != nil {
		s.log.Debug("reply not sent: client connection gone", "peer", s.peer, "xid", pc.xid, "error", err)
	}
	s.mu.Lock()
	s.pending.put(pc)
	s.mu.Unlock()
}

// teardown abandons every call still waiting for the backend: the client
// is gone (or being disconnected), so their replies have nowhere to go.
// The backend goroutines have stopped, so nothing else touches them.
func (s *session) teardown(reason string) {
	s.mu.Lock()
	s.closing = true
	calls := make([]*pendingCall, 0, len(s.pending.byXID))
	for _, pc := range s.pending.byXID {
		calls = append(calls, pc)
	}
	clear(s.pending.byXID)
	s.sendQ = s.sendQ[:0]
	s.mu.Unlock()
	for _, pc := range calls {
		pc.reply.ReleaseBuffers()
		s.drop(pc.call, reason)
	}
	if len(calls) > 0 {
		s.log.Debug("outstanding calls abandoned", "peer", s.peer, "calls", len(calls), "reason", reason)
	}
}

// localAddr is for logs.
func localAddr(c net.Conn) string {
	if c == nil {
		return ""
	}
	return c.LocalAddr().String()
}

// run serves the session until the client goes, ctx ends or the backend
// is given up on, then releases everything. conn is the backend
// connection dialed before the client was accepted. When the client
// goes by itself and backend.reconnect_grace is set, it returns the
// backend connection, still open, to be kept for the client's
// reconnect (park.go); otherwise nil.
func (s *session) run(ctx context.Context, conn *net.TCPConn, d *backendDialer) (kept *net.TCPConn) {
	bctx, stopBackend := context.WithCancel(ctx)
	backendDone := make(chan struct{})
	s.be.pause = make(chan struct{})
	go func() {
		defer close(backendDone)
		kept = s.runBackend(bctx, conn, d)
	}()
	bcDone := make(chan struct{})
	go func() {
		defer close(bcDone)
		s.runBackchannel(bctx)
	}()
	serveErr := s.rc.Serve(ctx, s)
	if hook := testHookServed; hook != nil {
		hook() // tests: widen the window between the transport's end and parking
	}
	if s.cfg.Backend.ReconnectGrace > 0 && ctx.Err() == nil {
		s.be.onLeave()
		close(s.be.pause)
		<-backendDone
	}
	stopBackend()
	<-backendDone
	<-bcDone
	reason := "client_gone"
	if s.giveUp {
		reason = "backend_gone"
	}
	s.teardown(reason)
	s.rc.Close()
	why := closeReason(serveErr, s.giveUp, ctx.Err() != nil)
	s.met.ConnClosed(why)
	if why == "error" {
		s.log.Warn("client connection failed", "peer", s.peer, "error", errString(serveErr))
	} else {
		// reason: client (it disconnected, e.g. an unmount), shutdown, backend_gone
		s.log.Info("client disconnected", "peer", s.peer, "reason", why)
	}
	return kept
}

// testHookServed, when set by a test before the gateway starts, runs
// after a session's engine has stopped serving and before the session
// parks or tears down.
var testHookServed func()

// testHookParked, when set by a test before the gateway starts, runs
// in serveClient right after a session's backend connection was parked.
var testHookParked func()

func errString(err error) string {
	if err == nil {
		return "closed"
	}
	return err.Error()
}
