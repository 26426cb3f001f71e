package reverse

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/ulb"
)

// serve runs the slot's call over the RDMA link and answers the client.
// Worker goroutine of the slot.
func (s *revSlot) serve() {
	c := s.c
	defer s.releaseItems()
	c.met.CreditsInUse.Inc()
	defer c.met.CreditsInUse.Dec()
	sent := time.Now()
	err := s.callWithRetry()
	if err != nil {
		s.callFailed(err)
		return
	}
	c.met.Observe(c.met.BackendLatency, sent)
	st, err := s.replyVec()
	if err != nil {
		s.res.Release()
		c.log.Warn("server reply cannot be rebuilt for TCP; client gets SYSTEM_ERR", "peer", c.peer, "xid", s.xid,
			"program", s.prog, "version", s.vers, "procedure", ulb.ProcName(s.prog, s.vers, s.proc), "error", err)
		s.systemErr("bad_reply")
		return
	}
	werr := c.writeReply(s.vec)
	clear(s.vec)
	s.vec = s.vec[:0]
	s.res.Release()
	if werr != nil {
		c.log.Debug("reply not sent: client connection gone", "peer", c.peer, "xid", s.xid, "error", werr)
		c.met.CallDropped("client_gone")
		return
	}
	c.met.Observe(c.met.CallLatency, s.received)
	s.stats.Reply(c.met.Metrics, st).Inc()
}

// callWithRetry calls, and retries with a new XID and a larger Reply
// chunk when the server answers ERR_CHUNK to a call the policy names
// retryable (ulb.ReplyOffer.Retryable: short Reply chunk retry, RFC 8267
// §3.1; the new XID keeps the server's reply cache from answering with
// the error again).
func (s *revSlot) callWithRetry() error {
	c := s.c
	pol := c.r.replyPolicy(c.link.rdmaVers.Load())
	for retry := 0; ; retry++ {
		err := c.link.call(c.ctx, &s.msg, &s.plan, &s.res)
		if err == nil {
			if retry > 0 {
				// The reply carries the retry's XID: the client knows
				// its own.
				if len(s.res.Inline) >= 4 {
					binary.BigEndian.PutUint32(s.res.Inline, s.xid)
				}
				binary.BigEndian.PutUint32(s.scratch, s.xid)
			}
			return nil
		}
		room, grow := retryRoom(&pol, s.plan.ReplyChunk, err)
		if !errors.Is(err, rdmarpc.ErrRemoteChunk) || !s.offer.Retryable ||
			retry >= c.r.cfg.Reverse.ReplyChunkRetries || !grow {
			if retry > 0 {
				binary.BigEndian.PutUint32(s.scratch, s.xid)
			}
			return err
		}
		s.plan.ReplyChunk = room
		xid := c.link.nextXID()
		binary.BigEndian.PutUint32(s.scratch, xid) // the RPC header's XID
		s.msg.XID = xid
		c.met.ChunkRetries.Inc()
		c.log.Debug("server answered ERR_CHUNK; retrying with a larger Reply chunk", "peer", c.peer,
			"xid", s.xid, "retry_xid", xid, "reply_chunk", s.plan.ReplyChunk)
	}
}

// retryRoom is the Reply chunk room for the retry of a call offering
// room that failed with err: what RDMA2_ERR_REPLY_RESOURCE said it needs
// (version two), else twice as much (ulb.Requester.GrowReplyChunk).
func retryRoom(pol *ulb.Requester, room int, err error) (int, bool) {
	var re *rdmarpc.RemoteError
	if errors.As(err, &re) && re.V2 != nil && re.V2.Code == rdmarpc.V2ErrReplyResource {
		return pol.ReplyResourceRoom(room, int(re.V2.LengthNeeded))
	}
	return pol.GrowReplyChunk(room)
}

// replyVec lays the reply out for one vectored write: the RPC header and
// results as received, each READ/READLINK body spliced back from the
// buffer the server RDMA-wrote it into, with its XDR pad
// (ulb.SpliceReply).
func (s *revSlot) replyVec() (gateway.ReplyStatus, error) {
	in := s.res.Inline
	var h oncrpc.ReplyHeader
	n, err := h.Decode(in)
	if err != nil {
		return gateway.StatusUnparsable, err
	}
	st := gateway.ReplyStatusOf(&h)
	s.vec = append(s.vec[:0], in[:n])
	var spliced bool
	s.vec, spliced, err = ulb.SpliceReply(s.vec, &s.walk, s.prog, s.vers, s.proc, st == gateway.StatusSuccess,
		in[n:], s.res.Chunks, s.plan.WriteChunks)
	if err == nil && !spliced && st == gateway.StatusSuccess && s.ddp {
		// Whole and ours (a receive or Reply chunk buffer): lower the
		// transfer sizes the server advertises to ours.
		ulb.CapLimits(s.prog, s.vers, s.proc, in[n:], &s.c.r.carry)
	}
	return st, err
}

// callFailed answers a call the server did not answer usefully.
func (s *revSlot) callFailed(err error) {
	c := s.c
	switch {
	case c.ctx.Err() != nil || errors.Is(err, errGaveUp):
		// The client is gone, or about to be disconnected because the
		// server is: it retransmits after reconnecting.
		reason := "client_gone"
		// The link's give-up cancels the client's context too, so a
		// call waiting there may see either error first: the link says
		// which it was.
		if errors.Is(err, errGaveUp) || c.link.gone() {
			reason = "backend_gone"
		}
		c.met.CallDropped(reason)
	case errors.Is(err, rdmarpc.ErrXIDInUse):
		// The client retransmitted a call whose XID is still at the
		// server: dropped, and the first call's reply answers it. This
		// is what Linux nfsd does with a retransmission its duplicate
		// request cache finds in progress (nfsd_cache_lookup: an entry
		// in RC_INPROG gives RC_DROPIT), and the only choice here: one
		// RPC-over-RDMA connection cannot have two calls with one XID,
		// replies are matched by it. A retransmission that arrives after
		// the reply was sent is an ordinary call again and goes to the
		// server, whose cache answers it (RC_REPLY) or runs it.
		// (Linux also keys its cache on a checksum of the arguments, so
		// a different call reusing an XID in flight would run there; a
		// client doing that breaks RFC 5531's XID rules and is dropped
		// here.)
		c.log.Warn("call with a duplicate XID dropped", "peer", c.peer, "xid", s.xid)
		c.met.CallDropped("duplicate_xid")
	case errors.Is(err, rdmarpc.ErrRemoteChunk), errors.Is(err, rdmarpc.ErrRemoteVersion):
		c.log.Warn("server refused the call (RDMA_ERROR); client gets SYSTEM_ERR", "peer", c.peer, "xid", s.xid,
			"program", s.prog, "version", s.vers, "procedure", ulb.ProcName(s.prog, s.vers, s.proc),
			"reply_chunk", s.plan.ReplyChunk, "error", err)
		s.systemErr("err_chunk")
	case errors.Is(err, errConnLostRepeatedly):
		c.log.Warn("connection to the server lost again and again under the call; client gets SYSTEM_ERR", "peer", c.peer, "xid", s.xid,
			"program", s.prog, "version", s.vers, "procedure", ulb.ProcName(s.prog, s.vers, s.proc),
			"reply_chunk", s.plan.ReplyChunk, "error", err)
		s.systemErr("connection_lost")
	case errors.Is(err, rdmarpc.ErrBadReply):
		c.met.BackendError("protocol")
		c.log.Warn("malformed reply from the server; client gets SYSTEM_ERR", "peer", c.peer, "xid", s.xid, "error", err)
		s.systemErr("bad_reply")
	default:
		c.log.Warn("call failed; client gets SYSTEM_ERR", "peer", c.peer, "xid", s.xid, "error", err)
		s.systemErr("resources")
	}
}

// systemErr answers the call with SYSTEM_ERR.
func (s *revSlot) systemErr(reason string) {
	c := s.c
	c.met.SystemErrs.WithLabelValues(reason).Inc()
	rh := oncrpc.SystemErrReply(s.xid)
	if err := s.replyHeaderOnly(&rh); err != nil {
		c.met.CallDropped("client_gone")
		return
	}
	s.stats.Reply(c.met.Metrics, gateway.StatusSystemErr).Inc()
}
