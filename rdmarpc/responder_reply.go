package rdmarpc

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// The reply side of the responder (svc_rdma_sendto.c and the Write half of
// svc_rdma_rw.c in Linux): pair the reply's DDP-eligible items with the
// call's Write chunks (RFC 8267 §6.4.1), decide between an inline reply,
// a Reply chunk and ERR_CHUNK with every size checked before any RDMA
// Write, and post the Writes and the Send as one chain.

// errCallAnswered is returned by Reply or Drop on a call already answered.
var errCallAnswered = errors.New("rdmarpc: call already answered or dropped")

// ErrNoResources: a reply from within Handler.ServeCall found no send
// context, send-queue slot or registered buffer free; the connection is
// closed (the error also wraps ErrReplyUnsendable).
var ErrNoResources = errors.New("rdmarpc: no send resources for the reply")

// Reasons a reply is replaced by ERR_CHUNK.
var (
	errWriteChunkTooSmall = errors.New("reply item larger than its Write chunk")
	errReplyTooLarge      = errors.New("reply exceeds the inline threshold and the Reply chunk")
	errTooManyWRs         = errors.New("reply needs more work requests than the send queue holds")
	errStagingTooLarge    = errors.New("unregistered reply data exceeds the largest pool buffer")
	errWrittenAhead       = errors.New("reply piece written ahead where the reply does not put it")
)

// sendCtxt is one reply (or error answer) in flight: its header buffer,
// its chain of work requests, and the buffers to release when the Send
// completes. Its slices grow to the largest reply seen and are reused.
type sendCtxt struct {
	idx   int
	buf   *Buffer // transport header and inline reply; InlineSend bytes
	hdr   Header
	wrs   []verbs.SendWR
	rng   [][2]int // SGL of wrs[i] is sges[rng[i][0]:rng[i][1]]
	sges  []verbs.SGE
	src   []verbs.SGE // scratch: the local side of one chunk's Writes
	chunk []int       // Write chunk of each reply piece, -1 if none (pairReply)
	bufs  []*Buffer   // released when the Send completes
	slots int
	// sends is the number of Sends in the chain (more than one for a
	// version-two reply sent by continuation); v2err the code of a
	// version-two RDMA2_ERROR built in place of a reply.
	sends int
	v2err V2ErrCode
	// itemWRs: the requests before this index are the Writes into Write
	// chunks (metrics_work.go); Writes after it go into the Reply chunk.
	itemWRs int
	// posted is when the chain was posted (UnixNano; 0: not in flight),
	// for the reply timeout; set only when there is one.
	posted atomic.Int64
}

func (s *sendCtxt) begin() {
	s.wrs, s.rng, s.sges, s.src = s.wrs[:0], s.rng[:0], s.sges[:0], s.src[:0]
	s.sends, s.v2err, s.itemWRs = 1, 0, 0
}

func (s *sendCtxt) releaseBufs() {
	for i, b := range s.bufs {
		b.Release()
		s.bufs[i] = nil
	}
	s.bufs = s.bufs[:0]
}

// own records b to be released when the Send completes, once.
func (s *sendCtxt) own(b *Buffer) {
	for _, o := range s.bufs {
		if o == b {
			return
		}
	}
	s.bufs = append(s.bufs, b)
}

// sendLen is the size of the chain's Send (its last request).
func (s *sendCtxt) sendLen() int {
	r := s.rng[len(s.rng)-1]
	n := 0
	for _, g := range s.sges[r[0]:r[1]] {
		n += len(g.Buf)
	}
	return n
}

func (s *sendCtxt) addWR(id uint64, op verbs.Opcode, start int, raddr uint64, rkey uint32) {
	s.wrs = append(s.wrs, verbs.SendWR{ID: id, Op: op, RemoteAddr: raddr, RKey: rkey})
	s.rng = append(s.rng, [2]int{start, len(s.sges)})
}

// link sets each request's SGL and chains them; done last because the
// slices may move while they grow.
func (s *sendCtxt) link() {
	for i := range s.wrs {
		s.wrs[i].SGL = s.sges[s.rng[i][0]:s.rng[i][1]]
		s.wrs[i].Next = nil
		if i > 0 {
			s.wrs[i-1].Next = &s.wrs[i]
		}
	}
	s.slots = len(s.wrs)
}

// appendWrites emits RDMA Writes that move src, in order, into the
// segments of room, filling each segment before the next, at most maxSGE
// local elements per request, starting skip bytes into room (bytes
// written there before: WriteAhead). out (the reply header's copy of the
// chunk; nil for Writes ahead of the reply) gets each segment's Length
// set to the bytes written into it, the skipped ones included; unused
// segments stay at zero, as the reply must return them.
func (s *sendCtxt) appendWrites(src []verbs.SGE, room, out WriteChunk, skip, maxSGE int) {
	si, so := 0, 0
	for k := range room {
		left := int(room[k].Length)
		remote := room[k].Offset
		if skip > 0 {
			d := min(skip, left)
			skip -= d
			left -= d
			remote += uint64(d)
			if out != nil {
				out[k].Length += uint32(d)
			}
		}
		for left > 0 && si < len(src) {
			start, n := len(s.sges), 0
			for left > 0 && si < len(src) && len(s.sges)-start < maxSGE {
				take := min(len(src[si].Buf)-so, left)
				s.sges = append(s.sges, verbs.SGE{Buf: src[si].Buf[so : so+take], LKey: src[si].LKey})
				so += take
				left -= take
				n += take
				if so == len(src[si].Buf) {
					si, so = si+1, 0
				}
			}
			s.addWR(wrWrite|uint64(s.idx), verbs.OpRDMAWrite, start, remote, room[k].Handle)
			remote += uint64(n)
			if out != nil {
				out[k].Length += uint32(n)
			}
		}
	}
}

// getSend takes a free send context, waiting while all are in flight.
// nil when the connection has ended.
func (c *ResponderConn) getSend(wait bool) *sendCtxt {
	for {
		c.sendMu.Lock()
		if c.sendClosed {
			c.sendMu.Unlock()
			return nil
		}
		if len(c.sendFree) == 0 && c.sendsMade < len(c.sends) {
			s := &sendCtxt{idx: c.sendsMade}
			c.sends[c.sendsMade].Store(s)
			c.sendsMade++
			c.sendFree = append(c.sendFree, s)
		}
		if n := len(c.sendFree); n > 0 {
			s := c.sendFree[n-1]
			c.sendFree = c.sendFree[:n-1]
			more := n > 1
			c.sendMu.Unlock()
			if more {
				c.sendWake.signal()
			}
			if s.buf == nil && !c.sendBuf(s, wait) {
				c.putSend(s)
				return nil
			}
			s.begin()
			return s
		}
		c.sendMu.Unlock()
		if !wait {
			return nil
		}
		select {
		case <-c.sendWake:
		case <-c.dead:
			return nil
		}
	}
}

// sendAt is the send context of a work request index (nil: none made).
func (c *ResponderConn) sendAt(idx int) *sendCtxt {
	if idx >= len(c.sends) {
		return nil
	}
	return c.sends[idx].Load()
}

// sendBuf gives s its header buffer, waiting (when wait) while the pool
// is exhausted: replies free memory, so a reply must not be lost for want
// of it. false when there is none (or the connection ended).
func (c *ResponderConn) sendBuf(s *sendCtxt, wait bool) bool {
	pause := time.Millisecond
	for {
		b, err := c.pool.Get(c.sendBufSize)
		if err == nil {
			s.buf = b
			return true
		}
		if !wait || !errors.Is(err, ErrPoolExhausted) {
			return false
		}
		select {
		case <-time.After(pause):
		case <-c.dead:
			return false
		}
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// unsendable closes the connection because the answer to xid cannot be
// sent (RFC 8166 §4.5.4): the requester then retransmits on a new
// connection at once instead of waiting for its RPC timeout.
func (c *ResponderConn) unsendable(xid uint32, what string) error {
	c.met.Dropped(DropNoResources)
	c.log.Warn("closing connection: "+what+" cannot be sent, no send resources", "peer", c.RemoteAddr(), "xid", xid)
	err := fmt.Errorf("%w: %s for xid 0x%08x", ErrReplyUnsendable, what, xid)
	c.fail(err)
	return err
}

// CloseUnsendable closes the connection because the handler cannot
// build the answer to xid (what names it for the log): RFC 8166 §4.5.4,
// as for a reply the engine cannot send. Serve then returns
// ErrReplyUnsendable.
func (c *ResponderConn) CloseUnsendable(xid uint32, what string) {
	if !c.isDead() {
		c.unsendable(xid, what)
	}
}

func (c *ResponderConn) putSend(s *sendCtxt) {
	s.releaseBufs()
	c.sendMu.Lock()
	if c.sendClosed && s.buf != nil {
		s.buf.Release()
		s.buf = nil
	}
	c.sendFree = append(c.sendFree, s)
	c.sendMu.Unlock()
	c.sendWake.signal()
}

// sendDone retires a chain whose Send completed (or flushed): its
// unsignaled Writes are complete too, so its slots and every buffer it
// used go back. Serve goroutine.
func (c *ResponderConn) sendDone(s *sendCtxt) {
	s.posted.Store(0)
	c.sq.put(s.slots)
	s.slots = 0
	c.inFlight.Add(-1)
	c.putSend(s)
}

// post posts a built chain. The RDMA Writes come first and the Send last
// on one reliable-connected queue pair: RC ordering makes the Writes'
// data visible at the requester before the Send is delivered (as Linux
// svcrdma relies on), so only the Send is signaled, and the buffers the
// Writes read from are released when the Send completes.
func (c *ResponderConn) post(s *sendCtxt) error {
	s.link()
	return c.postChain(s, c.outstanding.Load() == 0)
}

// postChain posts s, linked, and settles now or not (endpoint.settle).
func (c *ResponderConn) postChain(s *sendCtxt, now bool) error {
	c.inFlight.Add(1)
	if c.cfg.ReplyTimeout > 0 {
		s.posted.Store(time.Now().UnixNano())
	}
	err := c.qp.PostSend(&s.wrs[0])
	if err != nil {
		s.posted.Store(0)
		c.inFlight.Add(-1)
		c.sq.put(s.slots)
		s.slots = 0
		c.putSend(s)
		return c.postFailed("reply", err)
	}
	c.settle(now) // s may be retired from here on
	return nil
}

// answerError sends RDMA_ERROR for a message in receive r and reposts the
// receive. Serve goroutine: it never waits, so without a free send
// context or send-queue slot it closes the connection (unsendable).
func (c *ResponderConn) answerError(r *recvCtxt, code ErrorCode, xid, vers, credit uint32) {
	s := c.getSend(false)
	if s == nil || !c.sq.tryTake(1) {
		if s != nil {
			c.putSend(s)
		}
		c.repost(r)
		if !c.isDead() {
			c.unsendable(xid, "RDMA_ERROR "+code.String())
		}
		return
	}
	c.repost(r)
	c.buildError(s, code, xid, vers, credit)
	sent := s.sendLen()
	kind := ReplyError
	if code == ErrCodeGarbageArgs {
		kind = ReplyInline
	}
	if c.post(s) == nil {
		c.met.ErrorSent(code)
		c.met.ReplySent(kind, sent, 0)
	}
}

// buildError makes s an RDMA_ERROR answer: ERR_VERS with low = high = 1
// echoing the XID and version, or ERR_CHUNK; or, for ErrCodeGarbageArgs,
// the RDMA_MSG carrying a GARBAGE_ARGS reply (responder_garbage.go).
func (c *ResponderConn) buildError(s *sendCtxt, code ErrorCode, xid, vers, credit uint32) {
	s.begin()
	var n int
	switch code {
	case ErrCodeVers:
		low, high := c.versRange()
		n, _ = EncodeErrVers(s.buf.Bytes, xid, vers, credit, low, high)
	case ErrCodeGarbageArgs:
		n = encodeGarbageArgs(s.buf.Bytes, xid, credit)
	default:
		n, _ = EncodeErrChunk(s.buf.Bytes, xid, Version, credit)
	}
	s.single(n)
}

// single makes the built s one signaled Send of the first n bytes of its
// buffer (an answer rather than a reply).
func (s *sendCtxt) single(n int) {
	s.sges = append(s.sges, s.buf.SGE(0, n))
	s.addWR(wrSend|uint64(s.idx), verbs.OpSend, 0, 0, 0)
	s.wrs[0].Signal = true
	s.slots = 1
}

// Reply sends msg as the reply to the call. Item pieces pair in order
// with the call's Write chunks (RFC 8267 §6.4.1): the k-th item goes into
// the k-th Write chunk, without XDR pad; an item whose chunk is absent or
// offers no room goes inline; a chunk the reply has no item for is
// returned with zero length. The rest of the reply goes inline when it
// fits the inline threshold, else into the Reply chunk with RDMA_NOMSG;
// when neither fits, or an item is larger than its Write chunk, the
// requester gets RDMA_ERROR / ERR_CHUNK instead. All of that is decided
// before any RDMA Write is posted.
//
// Reply takes ownership of msg's Buffers: they are released after the
// Send completes. Replying with the call's own Msg hands its Read chunk
// buffers over; a different message that points into the call's buffers
// must hold its own reference (Buffer.Ref). Pieces without a Buffer are
// copied (inline content into the Send buffer; DDP items and Reply chunk
// content into a staging pool buffer).
//
// Reply returns an error only when the reply could not be queued: the
// connection has ended (ErrConnClosed), the call was already answered, or
// (ErrNoResources) a Reply from within ServeCall found no send resources
// free; the call's resources are released either way.
func (call *Call) Reply(msg *Message) error {
	c := call.conn
	if !call.state.CompareAndSwap(callHandler, callDone) {
		return errCallAnswered
	}
	// Inside ServeCall we are on the goroutine that frees send contexts
	// and send-queue slots: waiting for one there would never end.
	wait := c.delivering.Load() != call
	s := c.getSend(wait)
	if s == nil {
		c.disown(call, msg)
		c.endCall(call)
		if c.isDead() {
			return c.closedErr()
		}
		return fmt.Errorf("%w: %w", ErrNoResources, c.unsendable(call.hdr.XID, "reply"))
	}
	kind, written := c.buildAnswer(s, call, msg)
	if !c.sq.takeOrTry(s.slots, wait, c.dead) {
		c.putSend(s)
		c.endCall(call)
		if c.isDead() {
			return c.closedErr()
		}
		return fmt.Errorf("%w: %w", ErrNoResources, c.unsendable(call.hdr.XID, "reply"))
	}
	// Version two: the Sends count against the peer's credit, which
	// postV2 waits for. Inside ServeCall, where waiting would stall the
	// goroutine that brings the credit, a reply that finds too little of
	// it is posted by a goroutine of its own (rare: a peer granting less
	// than a reply needs).
	async := call.v2 && !wait && c.v2Take(s.sends, 0, false, false) == 0
	// The receive goes back before the reply leaves, so the requester,
	// which may send its next call as soon as it sees this reply, always
	// finds one posted.
	c.endCall(call)
	w := s.work()
	r := replyReport{kind: kind, sent: w.sendBytes, written: written, v2: call.v2, // s may be recycled once posted
		inv: s.wrs[len(s.wrs)-1].Op == verbs.OpSendInv, sends: s.sends, v2err: s.v2err, work: w}
	if async {
		go func() {
			if c.postV2(s) == nil {
				c.reportReply(r)
			}
		}()
		return nil
	}
	var err error
	if call.v2 && wait {
		err = c.postV2(s)
	} else { // version one, or version two with its credit taken above
		err = c.post(s)
	}
	if err != nil {
		return err
	}
	c.reportReply(r)
	return nil
}

// buildAnswer builds the reply into s, or, when it cannot be built, the
// error answer that replaces it: ERR_CHUNK in version one, the draft's
// RDMA2_ERROR in version two.
func (c *ResponderConn) buildAnswer(s *sendCtxt, call *Call, msg *Message) (ReplyKind, int) {
	kind, written, err := c.buildReply(s, call, msg)
	if err == nil {
		return kind, written
	}
	if call.v2 {
		c.buildV2ReplyError(s, call, err)
	} else {
		c.log.Warn("reply replaced by ERR_CHUNK", "peer", c.RemoteAddr(), "xid", call.hdr.XID, "reason", err)
		c.buildError(s, ErrCodeChunk, call.hdr.XID, Version, c.grantFor(call.hdr.Credit))
	}
	return ReplyError, 0
}

// replyReport is what the metrics say of a reply once it is posted.
type replyReport struct {
	kind          ReplyKind
	sent, written int
	v2, inv       bool
	sends         int
	v2err         V2ErrCode
	work          replyWork
}

func (c *ResponderConn) reportReply(r replyReport) {
	switch {
	case r.kind == ReplyError && r.v2:
		c.v2.met.V2ErrorSent(r.v2err)
	case r.kind == ReplyError:
		c.met.ErrorSent(ErrCodeChunk)
	case r.sends > 1:
		c.v2.met.V2Continued(false, r.sends)
	}
	c.met.ReplySent(r.kind, r.sent, r.written)
	r.work.report(c.work)
	if r.inv {
		c.met.SendInvalidated()
	}
}

// Drop ends the call without a reply (the backend gave up on it, say):
// the call's buffers and credit are released. The requester's RPC layer
// will time out and retransmit.
func (call *Call) Drop() {
	if call.state.CompareAndSwap(callHandler, callDone) {
		call.conn.endCall(call)
	}
}

// disown releases msg's buffers when no reply will carry them.
func (c *ResponderConn) disown(call *Call, msg *Message) {
	if msg == &call.Msg {
		return // the call's own buffers: endCall releases them
	}
	msg.ReleaseBuffers()
}

func (c *ResponderConn) closedErr() error {
	if err := c.Err(); err != nil {
		return err
	}
	return ErrConnClosed
}

// takeOwnership moves the references msg holds into s.
func (s *sendCtxt) takeOwnership(call *Call, msg *Message) {
	if msg == &call.Msg {
		if call.contBuf != nil {
			s.own(call.contBuf)
			call.contBuf = nil
		}
		for i, b := range call.chunkBufs {
			if b != nil {
				s.own(b)
			}
			call.chunkBufs[i] = nil
		}
		call.chunkBufs = call.chunkBufs[:0]
		return
	}
	for i := range msg.Pieces {
		if b := msg.Pieces[i].Buf; b != nil {
			s.own(b)
		}
	}
}

// buildReply fills s with the reply's chain. It returns the reply kind and
// the bytes RDMA-written, or an error that calls for ERR_CHUNK; s owns
// msg's buffers either way. The steps: pair items with Write chunks
// (pairReply, the one place the RFC 8267 rule is applied), choose inline
// or the Reply chunk (placeReply), take staging memory for unregistered
// data, emit the Writes into Write chunks and, for a Long reply, into the
// Reply chunk, then the header and inline content and the Send.
func (c *ResponderConn) buildReply(s *sendCtxt, call *Call, msg *Message) (ReplyKind, int, error) {
	ch := &call.hdr
	s.takeOwnership(call, msg)
	h := &s.hdr
	credit := c.grantFor(ch.Credit)
	if call.v2 {
		credit = c.v2Grant()
	}
	initReplyHeader(h, ch, credit)
	l, err := s.pairReply(ch, msg)
	if err != nil {
		return 0, 0, err
	}
	if err := c.placeReply(h, ch, &l, call.v2); err != nil {
		return 0, 0, err
	}
	st, err := c.stage(s, l.staging())
	if err != nil {
		return 0, 0, err
	}
	written := s.appendItemWrites(ch, h, msg, &st, c.maxSGE)
	s.itemWRs = len(s.wrs)
	if l.longReply {
		s.appendReplyChunkWrites(ch, h, msg, &st, c.maxSGE)
		written += l.inline
	}
	if l.continued {
		return c.appendContinued(s, call, msg, h, &l, written)
	}
	if len(s.wrs)+1 > c.sqDepth {
		return 0, 0, errTooManyWRs
	}
	hlen, err := encodeReplyHeader(s.buf.Bytes, h, call.v2)
	if err != nil {
		return 0, 0, err
	}
	sendLen := hlen
	if !l.longReply {
		sendLen = s.copyInline(msg, hlen)
	}
	c.appendSend(s, sendLen, call)
	if l.longReply {
		return ReplyReplyChunk, written, nil
	}
	return ReplyInline, written, nil
}

// replyLayout is the sizes of a reply once its items are paired.
type replyLayout struct {
	// inline is the RPC reply less the items placed in Write chunks (an
	// item that stays inline counts with its XDR pad): what goes inline,
	// or into the Reply chunk.
	inline int
	// ddpCopy is the bytes of items bound for Write chunks that have no
	// registered Buffer; inlineCopy those of the inline part (every
	// inline item counted with its pad) that must be staged when the
	// reply goes into the Reply chunk.
	ddpCopy, inlineCopy int
	// longReply: the reply goes into the Reply chunk (RDMA_NOMSG).
	longReply bool
	// continued: a version-two reply goes by continuation, in several
	// Sends (responder_v2reply.go).
	continued bool
}

// staging is the staging memory the layout needs: inline content of an
// inline reply is copied into the Send buffer instead.
func (l *replyLayout) staging() int {
	if l.longReply {
		return l.ddpCopy + l.inlineCopy
	}
	return l.ddpCopy
}

// initReplyHeader starts the reply header: RDMA_MSG, the call's Write
// list echoed with every segment length zero (the Writes fill them in).
func initReplyHeader(h *Header, ch *Header, credit uint32) {
	h.Init(ch.XID, credit, ProcMsg)
	for k := range ch.Writes {
		h.AppendWriteChunk(ch.Writes[k]...)
		for i := range h.Writes[k] {
			h.Writes[k][i].Length = 0
		}
	}
}

// pairReply applies RFC 8267 §6.4.1 once: the k-th item of msg goes into
// the k-th Write chunk when the call offered one with room, else inline.
// s.chunk[i] records the Write chunk of piece i (-1: not DDP'd); every
// later step reads it. An item larger than its chunk is an error.
func (s *sendCtxt) pairReply(ch *Header, msg *Message) (replyLayout, error) {
	var l replyLayout
	s.chunk = s.chunk[:0]
	item := 0
	for i := range msg.Pieces {
		p := &msg.Pieces[i]
		k := -1
		if p.Item {
			var err error
			if k, err = itemChunk(ch, item, len(p.Data)); err != nil {
				return l, err
			}
			item++
		}
		if p.Written < 0 || p.Written > 0 && (k < 0 || p.Written > len(p.Data)) {
			return l, fmt.Errorf("%w: piece %d says %d bytes of %d were written ahead into Write chunk %d",
				errWrittenAhead, i, p.Written, len(p.Data), k)
		}
		s.chunk = append(s.chunk, k)
		switch n := len(p.Data); {
		case k >= 0:
			if p.Buf == nil {
				l.ddpCopy += n - p.Written
			}
		case p.Item:
			l.inline += n + padLen(n)
			l.inlineCopy += n + padLen(n)
		default:
			l.inline += n
			if p.Buf == nil {
				l.inlineCopy += n
			}
		}
	}
	return l, nil
}

// placeReply decides between an inline reply and the Reply chunk
// (RDMA_NOMSG, the Reply chunk echoed with zero lengths into h); neither
// fitting is an error, except in version two, where the reply then goes
// by continuation.
func (c *ResponderConn) placeReply(h *Header, ch *Header, l *replyLayout, v2 bool) error {
	sendMax := c.replyMax(v2)
	if replyHeaderLen(h, v2)+l.inline <= sendMax {
		return nil
	}
	if !ch.HasReply || ch.Reply.Len() < uint64(l.inline) {
		if v2 {
			l.continued = true // the draft's SHOULD; appendContinued may still refuse
			return nil
		}
		return fmt.Errorf("%w: %d bytes inline, threshold %d, Reply chunk %d",
			errReplyTooLarge, l.inline, sendMax, ch.Reply.Len())
	}
	h.Proc = ProcNoMsg
	h.SetReplyChunk(ch.Reply...)
	for i := range h.Reply {
		h.Reply[i].Length = 0
	}
	if n := replyHeaderLen(h, v2); n > sendMax {
		return fmt.Errorf("%w: the reply header alone is %d bytes", errReplyTooLarge, n)
	}
	l.longReply = true
	return nil
}

// stage takes a staging buffer of n bytes (none for 0), owned by s.
func (c *ResponderConn) stage(s *sendCtxt, n int) (stager, error) {
	if n == 0 {
		return stager{}, nil
	}
	if n > c.pool.MaxSize() {
		return stager{}, errStagingTooLarge
	}
	b, err := c.pool.Get(n)
	if err != nil {
		return stager{}, fmt.Errorf("staging buffer: %w", err)
	}
	s.own(b)
	return stager{b: b}, nil
}

// appendItemWrites emits the RDMA Writes of the items paired with Write
// chunks and returns the bytes they write.
func (s *sendCtxt) appendItemWrites(ch, h *Header, msg *Message, st *stager, maxSGE int) int {
	written := 0
	for i := range msg.Pieces {
		p := &msg.Pieces[i]
		k := s.chunk[i]
		if k < 0 || len(p.Data) == 0 {
			continue
		}
		s.src = s.src[:0]
		if p.Written < len(p.Data) {
			rest := *p
			rest.Data = p.Data[p.Written:]
			s.src = append(s.src, st.sge(&rest))
		}
		s.appendWrites(s.src, ch.Writes[k], h.Writes[k], p.Written, maxSGE)
		written += len(p.Data)
	}
	return written
}

// appendReplyChunkWrites emits the Writes of a Long reply: the reply with
// DDP'd items left out (their length words stay), gathered from
// registered pieces and the staging buffer, into the Reply chunk.
func (s *sendCtxt) appendReplyChunkWrites(ch, h *Header, msg *Message, st *stager, maxSGE int) {
	s.src = s.src[:0]
	for i := range msg.Pieces {
		if s.chunk[i] < 0 {
			s.src = st.appendSGEs(s.src, &msg.Pieces[i])
		}
	}
	s.appendWrites(s.src, ch.Reply, h.Reply, 0, maxSGE)
}

// copyInline copies the inline part of the reply (items not DDP'd with
// their XDR pad) into the Send buffer after the off bytes of header and
// returns the Send's length.
func (s *sendCtxt) copyInline(msg *Message, off int) int {
	for i := range msg.Pieces {
		if s.chunk[i] < 0 {
			off += msg.Pieces[i].copyTo(s.buf.Bytes[off:])
		}
	}
	return off
}

// appendSend ends the chain with the signaled Send of the first sendLen
// bytes of s.buf, with Invalidate when the call allows (responder_inv.go).
func (c *ResponderConn) appendSend(s *sendCtxt, sendLen int, call *Call) {
	start := len(s.sges)
	s.sges = append(s.sges, s.buf.SGE(0, sendLen))
	s.addWR(wrSend|uint64(s.idx), verbs.OpSend, start, 0, 0)
	s.wrs[len(s.wrs)-1].Signal = true
	s.slots = len(s.wrs)
	c.setInvalidate(&s.wrs[len(s.wrs)-1], call)
}

// stager hands out local scatter/gather elements for reply pieces:
// registered pieces as they are, the rest copied into one staging buffer
// (consecutive copies coalesce into one element).
type stager struct {
	b   *Buffer
	off int
}

func (st *stager) sge(p *Piece) verbs.SGE {
	if p.Buf != nil {
		return verbs.SGE{Buf: p.Data, LKey: p.Buf.LKey()}
	}
	start := st.off
	st.off += copy(st.b.Bytes[st.off:], p.Data)
	return st.b.SGE(start, st.off-start)
}

// appendSGEs appends p (and, for an inline item, its XDR pad).
func (st *stager) appendSGEs(dst []verbs.SGE, p *Piece) []verbs.SGE {
	if len(p.Data) > 0 {
		if p.Buf != nil {
			dst = append(dst, verbs.SGE{Buf: p.Data, LKey: p.Buf.LKey()})
		} else {
			dst = st.appendCopy(dst, p.Data)
		}
	}
	if p.Item {
		if n := padLen(len(p.Data)); n > 0 {
			dst = st.appendCopy(dst, zeroPad[:n])
		}
	}
	return dst
}

func (st *stager) appendCopy(dst []verbs.SGE, b []byte) []verbs.SGE {
	start := st.off
	st.off += copy(st.b.Bytes[st.off:], b)
	if n := len(dst); n > 0 && st.off > start {
		last := &dst[n-1]
		// Extend the previous element when it ends where this copy began.
		if last.LKey == st.b.LKey() && len(last.Buf) > 0 && start > 0 &&
			&last.Buf[len(last.Buf)-1] == &st.b.Bytes[start-1] {
			last.Buf = st.b.Bytes[start-len(last.Buf) : st.off]
			return dst
		}
	}
	return append(dst, st.b.SGE(start, st.off-start))
}
