package rdmarpc

import (
	"errors"
	"fmt"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
	"github.com/rdmagw/rdmagw/xdr"
)

// Version-two replies. buildReply builds the reply header in its
// version-one form (Header: RDMA_MSG with the Write list, or RDMA_NOMSG
// with the Reply chunk) and encodes it in the version-two form at the
// end: RDMA2_REPLY_INLINE or RDMA2_REPLY_EXTERNAL. A reply that fits
// neither the peer's receive size nor the Reply chunk goes by
// continuation (appendContinued); failures are the draft's answers
// (buildV2ReplyError): RDMA2_ERR_WRITE_RESOURCE for an item larger than
// its Write chunk, RDMA2_ERR_REPLY_RESOURCE when even continuation cannot
// carry the reply, RDMA2_ERR_SYSTEM for the engine's own limits.

// roomError is a reply item or reply that does not fit the room the call
// offered: chunk is the Write chunk (0-based), -1 for the reply as a
// whole; need the bytes it needed.
type roomError struct {
	chunk int
	need  uint64
	err   error
}

func (e *roomError) Error() string { return e.err.Error() }
func (e *roomError) Unwrap() error { return e.err }

// replyHeaderLen is the encoded length of reply header h in version one,
// or in version two (v2): REPLY_INLINE has no Read list and no Reply
// chunk word, REPLY_EXTERNAL no Read list.
func replyHeaderLen(h *Header, v2 bool) int {
	if !v2 {
		return h.EncodedLen()
	}
	n := V2PrefixSize + writeListLen(h.Writes)
	if h.Proc == ProcNoMsg {
		n += 4
		if h.HasReply {
			n += h.Reply.encodedLen()
		}
	}
	return n
}

// encodeReplyHeader writes reply header h into b, in its version-two form
// when v2, and returns its length.
func encodeReplyHeader(b []byte, h *Header, v2 bool) (int, error) {
	if !v2 {
		return h.Encode(b[:h.EncodedLen()])
	}
	t := HTypeReplyInline
	if h.Proc == ProcNoMsg {
		t = HTypeReplyExternal
	}
	e := xdr.NewEncoder(b[:replyHeaderLen(h, true)])
	putV2Prefix(&e, h.XID, V2Version, h.Credit, t)
	encodeWriteList(&e, h.Writes)
	if t == HTypeReplyExternal {
		encodeReplyChunk(&e, h.HasReply, h.Reply)
	}
	if err := e.Err(); err != nil {
		return 0, err
	}
	return e.Len(), nil
}

func putV2Prefix(e *xdr.Encoder, xid, vers, credit uint32, t HType) {
	e.PutUint32(xid)
	e.PutUint32(vers)
	e.PutUint32(credit)
	e.PutUint32(uint32(t))
}

// maxContSends bounds the Sends of one continued reply (each costs one of
// the peer's credits and a send-queue slot); beyond it the reply is
// answered with RDMA2_ERR_REPLY_RESOURCE.
func (c *ResponderConn) maxContSends() int { return max(c.sqDepth/4, 2) }

// appendContinued ends the chain with the reply's inline part as MIDDLE
// fragments and a final REPLY_INLINE carrying the Write list: each
// fragment's header and Payload laid out one after the other in one
// staging buffer (the Payload copied once), one Send each, only the last
// signaled (and With Invalidate when the call asks).
func (c *ResponderConn) appendContinued(s *sendCtxt, call *Call, msg *Message, h *Header, l *replyLayout, written int) (ReplyKind, int, error) {
	final := replyHeaderLen(h, true)
	p, err := PlanContinuation(l.inline, final, c.replyMax(true))
	if err == nil && (p.Frags > c.maxContSends() || len(s.wrs)+p.Frags > c.sqDepth) {
		err = fmt.Errorf("%d Sends, at most %d", p.Frags, min(c.maxContSends(), c.sqDepth-len(s.wrs)))
	}
	if err != nil {
		return 0, 0, &roomError{chunk: -1, need: uint64(l.inline),
			err: fmt.Errorf("%w: %d bytes, no Reply chunk for them, continuation refused: %w", errReplyTooLarge, l.inline, err)}
	}
	area := (p.Frags-1)*V2MiddleHeaderSize + final + l.inline
	st, err := c.stage(s, area)
	if err != nil {
		return 0, 0, err
	}
	b := st.b
	cur := streamCursor{msg: msg, chunk: s.chunk}
	pos := 0
	for i := 0; i < p.Frags; i++ {
		off, end, rem := p.Fragment(i)
		var n int
		if i < p.Frags-1 {
			e := xdr.NewEncoder(b.Bytes[pos : pos+V2MiddleHeaderSize])
			putV2Prefix(&e, h.XID, V2Version, h.Credit, HTypeReplyMiddle)
			e.PutUint32(rem)
			n = e.Len()
		} else if n, err = encodeReplyHeader(b.Bytes[pos:], h, true); err != nil {
			return 0, 0, err
		}
		cur.read(b.Bytes[pos+n : pos+n+end-off])
		start := len(s.sges)
		s.sges = append(s.sges, b.SGE(pos, n+end-off))
		// Only the last Send is signaled and retires the chain; the
		// others complete unseen, or are reported like failed Writes.
		id := wrWrite | uint64(s.idx)
		if i == p.Frags-1 {
			id = wrSend | uint64(s.idx)
		}
		s.addWR(id, verbs.OpSend, start, 0, 0)
		pos += n + end - off
	}
	last := &s.wrs[len(s.wrs)-1]
	last.Signal = true
	s.slots, s.sends = len(s.wrs), p.Frags
	c.setInvalidate(last, call)
	return ReplyInline, written, nil
}

// streamCursor reads a reply's inline stream in order: the pieces not
// placed in a Write chunk (chunk[i] < 0), inline items with their XDR pad.
type streamCursor struct {
	msg   *Message
	chunk []int
	i     int
	off   int
}

func (sc *streamCursor) read(dst []byte) {
	for len(dst) > 0 && sc.i < len(sc.msg.Pieces) {
		p := &sc.msg.Pieces[sc.i]
		n := len(p.Data)
		if p.Item {
			n += padLen(n)
		}
		if sc.chunk[sc.i] >= 0 || sc.off >= n {
			sc.i, sc.off = sc.i+1, 0
			continue
		}
		var k int
		if sc.off < len(p.Data) {
			k = copy(dst, p.Data[sc.off:])
		} else {
			k = copy(dst, zeroPad[:n-sc.off])
		}
		dst = dst[k:]
		sc.off += k
	}
}

// buildV2ReplyError makes s the RDMA2_ERROR that replaces a reply
// buildReply could not build.
func (c *ResponderConn) buildV2ReplyError(s *sendCtxt, call *Call, err error) {
	body := V2ErrorBody{Code: V2ErrSystem}
	var re *roomError
	if errors.As(err, &re) {
		need := uint32(min(re.need, uint64(^uint32(0))))
		if re.chunk >= 0 {
			body = V2ErrorBody{Code: V2ErrWriteResource, ChunkIndex: uint32(re.chunk + 1), LengthNeeded: need}
		} else {
			body = V2ErrorBody{Code: V2ErrReplyResource, LengthNeeded: need}
		}
	}
	c.log.Warn("reply replaced by "+body.Code.String(), "peer", c.RemoteAddr(), "xid", call.hdr.XID, "reason", err)
	c.sendV2Control(s, call.hdr.XID, V2Version, HTypeError, &body)
	s.v2err = body.Code
}

// answerV2Garbage answers a version-two call whose Read chunks do not fit
// its Payload stream with an RPC reply of GARBAGE_ARGS in an
// RDMA2_REPLY_INLINE (the draft's "XDR Errors"), and reposts r.
func (c *ResponderConn) answerV2Garbage(r *recvCtxt, xid uint32) {
	c.repost(r)
	s := c.takeControlSend(0)
	if s == nil {
		if !c.isDead() {
			c.unsendable(xid, "GARBAGE_ARGS reply")
		}
		return
	}
	s.begin()
	n := encodeV2GarbageArgs(s.buf.Bytes, xid, c.v2Grant())
	s.single(n)
	if c.post(s) == nil {
		c.met.ReplySent(ReplyInline, n, 0)
	}
}

// postV2 posts a built version-two chain whose Sends count against the
// peer's credit: as many as the credit allows at a time, waiting for more
// (a GRANT, or the credit in the peer's next message) in between, so that
// a continued reply longer than the peer's window goes as the peer makes
// room. Handler goroutines only. If the connection ends while it waits,
// the part already posted flushes and the chain is abandoned.
func (c *ResponderConn) postV2(s *sendCtxt) error {
	if c.v2Take(s.sends, 0, false, false) > 0 {
		return c.post(s)
	}
	s.link()
	c.inFlight.Add(1)
	if c.cfg.ReplyTimeout > 0 {
		s.posted.Store(time.Now().UnixNano())
	}
	left, total := s.sends, len(s.wrs)
	for first := 0; first < total; {
		n := c.v2Take(left, 0, true, true)
		if n == 0 {
			// The connection ended: what was posted flushes (reported
			// like failed Writes, never retiring the chain), so the
			// chain is retired here.
			s.posted.Store(0)
			c.inFlight.Add(-1)
			c.putSend(s)
			return c.closedErr()
		}
		left -= n
		end := first
		for sends := 0; sends < n; end++ {
			if op := s.wrs[end].Op; op == verbs.OpSend || op == verbs.OpSendInv {
				sends++
			}
		}
		// The last part's signaled Send may retire s at once: s is not
		// touched after it is posted.
		last := end == total
		next := s.wrs[end-1].Next
		s.wrs[end-1].Next = nil
		err := c.qp.PostSend(&s.wrs[first])
		if !last {
			s.wrs[end-1].Next = next
		}
		c.settle(c.outstanding.Load() == 0) // after the last part s may be retired
		if err != nil {
			s.posted.Store(0)
			c.inFlight.Add(-1)
			c.putSend(s)
			return c.postFailed("reply", err)
		}
		first = end
	}
	return nil
}
