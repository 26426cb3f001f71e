package rdmarpc

import (
	"errors"
	"fmt"

	"github.com/rdmagw/rdmagw/verbs"
)

// Marshaling a call and unmarshaling its reply (rpc_rdma.c in Linux).
//
// The call goes, in order of preference (rpcrdma_marshal_req):
//
//	inline     header + whole message <= InlineSend: RDMA_MSG, items inline
//	read chunk items as Read chunks at their XDR Position, the rest inline
//	long call  the rest still too big: RDMA_NOMSG, the rest in a
//	           Position-Zero Read chunk, items still in their own chunks
//
// Position is the item's byte offset in the whole XDR stream of the call,
// earlier items and their round-up included (rpcrdma_encode_read_list
// uses the offset of the page list in the xdr_buf). The round-up of an
// item is neither sent in its chunk nor inline: the responder supplies it.

// marshal builds x's transport header, registrations and Send, in the
// first of the three forms above that fits.
func (c *RequesterConn) marshal(x *reqCtxt, msg *Message, plan *ReplyPlan) (kind CallKind, inline, exposed int, err error) {
	if err := c.beginCall(x, msg, plan); err != nil {
		return 0, 0, 0, err
	}
	h := &x.hdr
	if h.EncodedLen()+msg.Len() <= c.sendMax {
		n, err := x.sendInline(msg)
		return CallInline, n, 0, err
	}
	rest, exposed, err := c.exposeItems(x, msg)
	if err != nil {
		return 0, 0, 0, err
	}
	if h.EncodedLen()+len(x.segs)*(4+readSegmentSize)+rest <= c.sendMax {
		n, err := x.sendWithReadChunks(msg)
		return CallReadChunk, n, exposed, err
	}
	n, err := c.sendLong(x, msg, rest)
	return CallLong, n, exposed + rest, err
}

// beginCall resets x for a new call: its Send buffer, a header with our
// credit request, and the reply room plan offers.
func (c *RequesterConn) beginCall(x *reqCtxt, msg *Message, plan *ReplyPlan) error {
	x.resetReg()
	if x.sendBuf == nil {
		b, err := c.pool.Get(c.sendMax)
		if err != nil {
			return err
		}
		x.sendBuf = b
	}
	x.hdr.Init(msg.XID, uint32(c.cfg.Credits), ProcMsg)
	return c.offerReplyRoom(x, plan)
}

// sendInline: RDMA_MSG with the whole message after the header.
func (x *reqCtxt) sendInline(msg *Message) (int, error) {
	n := x.hdr.EncodedLen()
	if _, err := x.hdr.Encode(x.sendBuf.Bytes[:n]); err != nil {
		return 0, err
	}
	n += msg.Flatten(x.sendBuf.Bytes[n:])
	x.setSend(n)
	return n, nil
}

// exposeItems registers every non-empty item for remote Read and records
// it in x.segs at its XDR Position. It returns the bytes of the call
// outside those items (what stays to be sent) and the bytes exposed.
func (c *RequesterConn) exposeItems(x *reqCtxt, msg *Message) (rest, exposed int, err error) {
	pos := 0
	for i := range msg.Pieces {
		p := &msg.Pieces[i]
		if !isReadItem(p) {
			pos += len(p.Data)
			rest += len(p.Data)
			continue
		}
		if pos&3 != 0 {
			return 0, 0, fmt.Errorf("rdmarpc: xid 0x%08x: item at stream offset %d is not XDR-aligned", msg.XID, pos)
		}
		data, err := x.registrable(c, p)
		if err != nil {
			return 0, 0, err
		}
		segs, err := x.exposeSegs(data, verbs.AccessRemoteRead)
		if err != nil {
			return 0, 0, err
		}
		for _, s := range segs {
			x.segs = append(x.segs, ReadSegment{Position: uint32(pos), Segment: s})
		}
		exposed += len(p.Data)
		pos += len(p.Data) + padLen(len(p.Data))
	}
	return rest, exposed, nil
}

// isReadItem reports a piece that goes in a Read chunk of its own.
func isReadItem(p *Piece) bool { return p.Item && len(p.Data) > 0 }

// copyRest copies the pieces that are not Read chunks into dst.
func copyRest(dst []byte, msg *Message) int {
	n := 0
	for i := range msg.Pieces {
		if p := &msg.Pieces[i]; !isReadItem(p) {
			n += copy(dst[n:], p.Data)
		}
	}
	return n
}

// sendWithReadChunks: RDMA_MSG with the items' Read chunks in the header
// and the rest of the message inline.
func (x *reqCtxt) sendWithReadChunks(msg *Message) (int, error) {
	h := &x.hdr
	for _, s := range x.segs {
		h.AppendReadSegment(s.Position, s.Segment)
	}
	n := h.EncodedLen()
	if _, err := h.Encode(x.sendBuf.Bytes[:n]); err != nil {
		return 0, err
	}
	n += copyRest(x.sendBuf.Bytes[n:], msg)
	x.setSend(n)
	return n, nil
}

// sendLong: RDMA_NOMSG, the rest of the message (rest bytes) copied into
// one staging buffer offered as the Position-Zero Read chunk, the items
// still in their own Read chunks.
func (c *RequesterConn) sendLong(x *reqCtxt, msg *Message, rest int) (int, error) {
	b, err := c.stageRest(x, msg, rest)
	if err != nil {
		return 0, err
	}
	h := &x.hdr
	h.Proc = ProcNoMsg
	var seg Segment
	if rest > 0 {
		if seg, err = x.expose(b, verbs.AccessRemoteRead); err != nil {
			return 0, err
		}
	}
	h.AppendReadSegment(0, seg)
	for _, s := range x.segs {
		h.AppendReadSegment(s.Position, s.Segment)
	}
	n := h.EncodedLen()
	if n > c.sendMax {
		return 0, fmt.Errorf("rdmarpc: xid 0x%08x: transport header of %d bytes exceeds the inline threshold %d", msg.XID, n, c.sendMax)
	}
	if _, err := h.Encode(x.sendBuf.Bytes[:n]); err != nil {
		return 0, err
	}
	x.setSend(n)
	return n, nil
}

// stageRest copies the rest of msg (rest bytes outside its Read items)
// into one staging buffer of x, for a Long call's Position-Zero Read
// chunk or a version-two Call chunk.
func (c *RequesterConn) stageRest(x *reqCtxt, msg *Message, rest int) ([]byte, error) {
	if rest > c.pool.MaxSize() {
		return nil, fmt.Errorf("rdmarpc: xid 0x%08x: %d bytes of call outside its items exceed the largest pool buffer (%d)", msg.XID, rest, c.pool.MaxSize())
	}
	b, err := c.pool.Get(rest)
	if err != nil {
		return nil, err
	}
	x.stage = append(x.stage, b)
	copyRest(b.Bytes, msg)
	return b.Bytes[:rest], nil
}

// registrable returns p's bytes in registered memory: in place when p
// lies in a pool buffer, else copied into a staging buffer.
func (x *reqCtxt) registrable(c *RequesterConn, p *Piece) ([]byte, error) {
	if p.Buf != nil {
		return p.Data, nil
	}
	b, err := c.pool.Get(len(p.Data))
	if err != nil {
		return nil, err
	}
	x.stage = append(x.stage, b)
	copy(b.Bytes, p.Data)
	return b.Bytes, nil
}

// offerReplyRoom registers the Write chunks and Reply chunk of plan and
// puts them in the header.
func (c *RequesterConn) offerReplyRoom(x *reqCtxt, plan *ReplyPlan) error {
	if plan == nil {
		return nil
	}
	h := &x.hdr
	if len(plan.WriteChunks) > len(x.chunkStore) {
		return fmt.Errorf("rdmarpc: %d Write chunks offered, at most %d", len(plan.WriteChunks), len(x.chunkStore))
	}
	for _, room := range plan.WriteChunks {
		if room <= 0 {
			x.wbufs = append(x.wbufs, nil)
			h.AppendWriteChunk()
			continue
		}
		b, err := c.pool.Get(room)
		if err != nil {
			return err
		}
		x.wbufs = append(x.wbufs, b)
		segs, err := x.exposeSegs(b.Bytes, verbs.AccessRemoteWrite)
		if err != nil {
			return err
		}
		h.AppendWriteChunk(segs...)
	}
	if plan.ReplyChunk > 0 {
		b, err := c.pool.Get(plan.ReplyChunk)
		if err != nil {
			return err
		}
		x.rbuf = b
		segs, err := x.exposeSegs(b.Bytes, verbs.AccessRemoteWrite)
		if err != nil {
			return err
		}
		h.SetReplyChunk(segs...)
	}
	return nil
}

func (x *reqCtxt) setSend(n int) {
	x.credBuf, x.credAt[0], x.ncred, x.nfrags = x.sendBuf, 8, 1, 0
	x.sge[0] = x.conn.sge(x.sendBuf, 0, n)
	x.wr = verbs.SendWR{ID: wrSend | uint64(x.idx), Op: verbs.OpSend, SGL: x.sge[:], Signal: true}
}

// lookupLocked finds the call in flight with the given XID.
func (c *RequesterConn) lookupLocked(xid uint32) *reqCtxt {
	for i := range c.reqs {
		if x := &c.reqs[i]; (x.state == reqWaiting || x.state == reqAbandon) && x.xid == xid {
			return x
		}
	}
	return nil
}

// reply handles one received message. Loop goroutine.
// inv is the rkey the responder invalidated with the reply's Send (0:
// none).
func (c *RequesterConn) reply(r *rrecv, n int, inv uint32) {
	h := &r.hdr
	hlen, err := h.Decode(r.buf.Bytes[:n], c.cfg.Limits)
	// A backward-direction call (RFC 8167) is no reply: its XID is of
	// the other direction's space and its rdma_credit no grant.
	if err == nil && c.backwardCall(r, r.buf.Bytes[hlen:n]) {
		return
	}
	if err != nil {
		c.malformedReply(r, err)
		return
	}
	c.mu.Lock()
	c.grantLocked(h.Credit)
	c.mu.Unlock()
	x := c.replyFor(r, h.XID, inv)
	if x == nil {
		return
	}
	keep := x.takeReply(h, r.buf.Bytes[hlen:n])
	if h.Proc == ProcError {
		c.met.ErrorReceived(h.ErrCode)
	}
	c.handOver(x, r, keep, h.XID, h.Writes)
}

// replyFor finds the call a reply (of either version) names and revokes
// the responder's access to its memory: the responder is done with it,
// and nobody may look at what was written before (what the Send
// invalidated is revoked already; inv is its rkey, 0 for none). A reply
// for no call in flight is dropped, r reposted, and nil returned.
func (c *RequesterConn) replyFor(r *rrecv, xid, inv uint32) *reqCtxt {
	c.mu.Lock()
	x := c.lookupLocked(xid)
	if x == nil {
		c.repostLocked(r)
		c.mu.Unlock()
		c.met.Dropped(DropUnmatched)
		c.log.Debug("reply for no call in flight dropped", "xid", xid)
		return nil
	}
	c.mu.Unlock()
	x.remoteInv = inv
	if err := c.unregister(x); err != nil {
		x.err = err
	}
	return x
}

// handOver checks the reply's Write list (writes) against what x
// offered, keeps r for the Result when the reply lies in it (keep), else
// reposts it, and delivers x.
func (c *RequesterConn) handOver(x *reqCtxt, r *rrecv, keep bool, xid uint32, writes []WriteChunk) {
	if x.err == nil {
		x.err = x.collectChunksOf(xid, writes)
	}
	if x.err == nil {
		c.met.ReplyReceived(x.kind, len(x.inline), x.written())
	}
	c.mu.Lock()
	if keep && x.err == nil {
		r.held = true
		x.rep = r
	} else {
		c.repostLocked(r)
	}
	c.mu.Unlock()
	c.deliver(x)
}

// malformedReply drops a reply whose header does not decode, failing the
// call it names when the error says which (its XID was readable).
func (c *RequesterConn) malformedReply(r *rrecv, err error) {
	c.met.Dropped(DropMalformed)
	var xid uint32
	var ok bool
	var ve *VersionError
	var ce *ChunkError
	if errors.As(err, &ve) {
		xid, ok = ve.XID, true
	} else if errors.As(err, &ce) {
		xid, ok = ce.XID, true
	}
	c.mu.Lock()
	c.repostLocked(r)
	var x *reqCtxt
	if ok {
		x = c.lookupLocked(xid)
	}
	c.mu.Unlock()
	c.log.Warn("malformed reply", "error", err)
	if x != nil {
		x.err = fmt.Errorf("%w: %w", ErrBadReply, err)
		c.deliver(x)
	}
}

// takeReply points x at the reply by its procedure: the inline payload
// of an RDMA_MSG (in the receive, so true: keep it), the Reply chunk of
// an RDMA_NOMSG, or the RemoteError of an RDMA_ERROR.
func (x *reqCtxt) takeReply(h *Header, payload []byte) (keep bool) {
	switch h.Proc {
	case ProcError:
		x.err = &RemoteError{XID: h.XID, Code: h.ErrCode, VersLow: h.VersLow, VersHigh: h.VersHigh}
	case ProcMsg:
		x.inline, x.kind = payload, ReplyInline
		return true
	case ProcNoMsg:
		l := h.Reply.Len()
		if !h.HasReply || x.rbuf == nil || l > uint64(len(x.rbuf.Bytes)) {
			x.err = fmt.Errorf("%w: xid 0x%08x: RDMA_NOMSG reply with %d bytes in a Reply chunk of %d", ErrBadReply, h.XID, l, len(x.rbufBytes()))
			break
		}
		x.inline, x.kind = x.rbuf.Bytes[:l], ReplyReplyChunk
	}
	return false
}

func (x *reqCtxt) rbufBytes() []byte {
	if x.rbuf == nil {
		return nil
	}
	return x.rbuf.Bytes
}

// collectChunksOf checks the Write list writes of the reply to xid
// (either version) against what was offered and slices out what the
// responder wrote.
func (x *reqCtxt) collectChunksOf(xid uint32, writes []WriteChunk) error {
	if len(writes) > len(x.wbufs) {
		return fmt.Errorf("%w: xid 0x%08x: reply returns %d Write chunks, %d offered", ErrBadReply, xid, len(writes), len(x.wbufs))
	}
	x.chunks = x.chunkStore[:len(x.wbufs)]
	for i, b := range x.wbufs {
		room, segs := 0, 0 // offerReplyRoom: exposeSegs' segments per chunk with room
		if b != nil {
			room, segs = len(b.Bytes), x.conn.segsFor(len(b.Bytes))
		}
		var w uint64
		if i < len(writes) {
			w = writes[i].Len()
			// RFC 8166 §3.4.6: the responder MUST NOT change the number
			// of segments in a Write chunk.
			if n := len(writes[i]); n != segs {
				return fmt.Errorf("%w: xid 0x%08x: Write chunk %d returned with %d segments, %d offered", ErrBadReply, xid, i, n, segs)
			}
		}
		if w > uint64(room) {
			return fmt.Errorf("%w: xid 0x%08x: Write chunk %d claims %d bytes written, %d offered", ErrBadReply, xid, i, w, room)
		}
		if b == nil {
			x.chunks[i] = nil
		} else {
			x.chunks[i] = b.Bytes[:w]
		}
	}
	return nil
}

func (x *reqCtxt) written() int {
	n := 0
	for _, c := range x.chunks {
		n += len(c)
	}
	return n
}

// deliver hands a finished call to its caller, or finishes it when the
// caller gave up.
func (c *RequesterConn) deliver(x *reqCtxt) {
	c.mu.Lock()
	if x.state == reqAbandon {
		c.mu.Unlock()
		c.finish(x)
		return
	}
	x.state = reqReplied
	c.mu.Unlock()
	x.done <- struct{}{}
}

// grantLocked takes the responder's credit grant: 0 counts as 1, and
// never more than we asked for (and posted receives for).
func (c *RequesterConn) grantLocked(credit uint32) {
	g := min(max(int(credit), 1), c.cfg.Credits)
	if g > c.granted {
		defer c.signalCredit()
	}
	c.granted = g
}
