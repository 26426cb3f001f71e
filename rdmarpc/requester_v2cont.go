package rdmarpc

import (
	"fmt"

	"github.com/rdmagw/rdmagw/verbs"
)

// Message continuation on the requester (v2_cont.go's Reassembler): a
// reply the responder sends as REPLY_MIDDLE fragments and a final
// REPLY_INLINE is reassembled into one pool buffer, bounded by the pool's
// largest buffer, and handed to the call as an inline reply (Result.Kind
// ReplyInline, Result.Inline the whole Payload stream). A broken sequence
// is answered as the Reassembler says and fails the calls it names with
// ErrBadReply. Loop goroutine only.

// rqCont is the requester's continuation state. Loop goroutine only.
type rqCont struct {
	reasm Reassembler
	buf   *Buffer // the continued reply in progress
	frags int     // its fragments so far
}

// reasmV2 offers one decoded version-two message to the reassembler. It
// reports true when the message was taken (stored, discarded or
// answered); false: handle it as a whole message.
func (c *RequesterConn) reasmV2(r *rrecv, h *V2Header, payload []byte) bool {
	if h.HType == HTypeCallMiddle {
		return false // no continued backward calls: answered INVAL_HTYPE
	}
	if c.cont.reasm.Max == 0 {
		c.cont.reasm.Max = c.pool.MaxSize()
	}
	st := c.cont.reasm.Offer(h, payload)
	switch st.Verdict {
	case ContPass:
		return false
	case ContComplete:
		copy(c.cont.buf.Bytes[st.Off:], payload)
		b := c.cont.buf
		c.cont.buf = nil
		c.v2met.V2Continued(true, c.cont.frags+1)
		c.completeV2(r, h, b.Bytes[:st.Total], 0, b)
		return true
	case ContStart:
		b, err := c.pool.Get(st.Total)
		if err != nil {
			c.cont.reasm.Abort()
			c.repost(r)
			c.log.Warn("no memory to reassemble a continued reply", "peer", c.peer(), "xid", h.XID, "bytes", st.Total, "error", err)
			c.sendErrorV2(h.XID, V2ErrorBody{Code: V2ErrSystem})
			c.failNamed(h, fmt.Errorf("rdmarpc: xid 0x%08x: reassembling a reply of %d bytes: %w", h.XID, st.Total, err))
			return true
		}
		c.cont.buf, c.cont.frags = b, 0
		fallthrough
	case ContAppend:
		copy(c.cont.buf.Bytes[st.Off:], payload)
		c.cont.frags++
		c.repost(r)
		return true
	case ContDiscard:
		c.repost(r)
		c.met.Dropped(DropMalformed)
		c.v2met.V2Discarded()
		return true
	}
	c.reasmRejected(r, h, &st) // ContReject
	return true
}

// reasmRejected answers a fragment the reassembler refused: an ERR_MSG
// to the peer, and the calls whose replies it broke are failed.
func (c *RequesterConn) reasmRejected(r *rrecv, h *V2Header, st *ContStep) {
	c.repost(r)
	c.met.Dropped(DropMalformed)
	e := st.Err
	c.log.Warn("continued reply refused", "peer", c.peer(), "error", e)
	c.sendErrorV2(e.XID, V2ErrorBody{Code: e.Code()})
	if st.Abandoned {
		if c.cont.buf != nil {
			c.cont.buf.Release()
			c.cont.buf = nil
		}
		if st.AbandonedXID != e.XID {
			c.sendErrorV2(st.AbandonedXID, V2ErrorBody{Code: V2ErrInvalCont})
		}
		if !st.AbandonedCall {
			c.failXID(st.AbandonedXID, e)
		}
	}
	if h.HType.IsReply() {
		c.failXID(e.XID, e)
	}
}

// Continued calls. A call whose Payload stream, reduced by its data item
// Read chunks, does not fit the responder's receive buffer goes as
// CALL_MIDDLE fragments and a final CALL_INLINE when that takes at most
// contMaxFrags Sends and the responder's credit allows them all now;
// otherwise as CALL_EXTERNAL with a Call chunk (one Send and an RDMA Read
// by the responder). The fragments are built in one staging buffer and
// posted as one chain, only the last Send signaled.

// contMaxFrags bounds the Sends of a continued call.
const contMaxFrags = 4

// wrContSend identifies the unsignaled MIDDLE Sends of a continued call:
// their completions appear only when they fail.
const wrContSend uint64 = 7 << 56

// sendContinuedV2 tries to send x's call (header h, rest bytes of reduced
// Payload stream) continued. ok false: it does not qualify, nothing done.
func (c *RequesterConn) sendContinuedV2(x *reqCtxt, msg *Message, rest int) (n int, ok bool, err error) {
	h := x.h2
	if err := x.sealV2(); err != nil {
		return 0, true, err
	}
	final := h.EncodedLen()
	plan, perr := PlanContinuation(rest, final, c.sendMax)
	if perr != nil || plan.Frags < 2 || plan.Frags > contMaxFrags {
		return 0, false, nil
	}
	c.mu.Lock()
	if c.link.allowance() < plan.Frags-1 {
		c.mu.Unlock()
		return 0, false, nil
	}
	for range plan.Frags - 1 {
		c.link.posted()
	}
	x.v2counted += plan.Frags - 1
	c.mu.Unlock()
	total := (plan.Frags-1)*V2MiddleHeaderSize + final + rest
	b, err := c.pool.Get(total)
	if err != nil {
		return 0, true, err
	}
	x.stage = append(x.stage, b)
	var mid V2Header
	off := 0
	for i := range plan.Frags {
		from, to, remaining := plan.Fragment(i)
		hdr := h
		if i < plan.Frags-1 {
			mid.Init(h.XID, 0, HTypeCallMiddle)
			mid.Remaining = remaining
			hdr = &mid
		}
		start := off
		hn, err := hdr.Encode(b.Bytes[off:])
		if err != nil {
			return 0, true, err
		}
		x.credAt[i] = off + 8
		off += hn
		off += copyRestRange(b.Bytes[off:], msg, from, to)
		wr, sgl := &x.wr, x.sge[:]
		if i < plan.Frags-1 {
			wr, sgl = &x.frags[i], x.fsge[i][:]
		}
		sgl[0] = c.sge(b, start, off-start)
		*wr = verbs.SendWR{ID: wrContSend | uint64(x.idx), Op: verbs.OpSend, SGL: sgl}
		if i > 0 {
			prev := &x.frags[i-1]
			prev.Next = wr
		}
	}
	x.wr.ID, x.wr.Signal = wrSend|uint64(x.idx), true
	x.credBuf, x.ncred, x.nfrags = b, plan.Frags, plan.Frags-1
	return off, true, nil
}

// copyRestRange copies bytes [from, to) of msg's stream outside its Read
// items (what copyRest copies whole) into dst.
func copyRestRange(dst []byte, msg *Message, from, to int) int {
	n, pos := 0, 0
	for i := range msg.Pieces {
		p := &msg.Pieces[i]
		if isReadItem(p) {
			continue
		}
		lo, hi := max(from-pos, 0), min(to-pos, len(p.Data))
		if lo < hi {
			n += copy(dst[n:], p.Data[lo:hi])
		}
		pos += len(p.Data)
		if pos >= to {
			break
		}
	}
	return n
}

// contWRs is the send-queue room continued calls need beyond one Send
// per call.
func (c *RequesterConn) contWRs() int {
	if c.cfg.Version == VersionV1 {
		return 0
	}
	return c.cfg.Credits * (contMaxFrags - 1)
}
