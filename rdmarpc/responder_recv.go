package rdmarpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// The receive side of the responder (svc_rdma_recvfrom.c and the Read
// half of svc_rdma_rw.c in Linux): decode the transport header, answer
// what is malformed, pull Read chunks with RDMA Read and reassemble the
// call for the Handler.

// Call states.
const (
	callIdle    uint32 = iota // its receive is posted (or free)
	callReading               // pulling Read chunks
	callHandler               // with the Handler
	callDone                  // answered; waiting to be reposted
)

// recvCtxt is one receive buffer and the call that arrives in it. The
// call lives in its receive context, so receiving allocates nothing; the
// receive is reposted when the call is answered.
type recvCtxt struct {
	idx    int
	buf    *Buffer // InlineRecv bytes; guarded by recvMu once posted
	posted bool    // guarded by recvMu
	wr     verbs.RecvWR
	sge    [1]verbs.SGE
	call   Call
	// owner is the connection holding a shared receive (SharedRecv) from
	// its completion until it is reposted; nil while posted.
	owner atomic.Pointer[ResponderConn]
}

// inlineChunks is how many Read chunks a Call tracks without allocating.
const inlineChunks = 16

// Call is one RPC call received on a ResponderConn.
type Call struct {
	// hdr is the transport header as received; the handler reads what
	// it needs of it through XID, WriteChunks and WriteChunkLen.
	hdr Header
	// Msg is the RPC call message.
	Msg Message

	conn  *ResponderConn
	rc    *recvCtxt
	state atomic.Uint32
	kind  CallKind

	inline    []byte    // RDMA_MSG payload in the receive buffer
	chunkBufs []*Buffer // per Read chunk (Position-Zero first); nil for empty chunks
	chunkLens []int
	chunkOffs []int // data chunk j: its offset in the inline payload
	bufStore  [inlineChunks]*Buffer
	lenStore  [inlineChunks]int
	offStore  [inlineChunks]int
	hasPZ     bool
	chunkSum  int

	// Version two (responder_v2.go): the call came in version two;
	// invHandle is its rdma_inv_handle when it names one of its handles;
	// contBuf holds the Payload stream reassembled from continuation.
	v2        bool
	invHandle uint32
	contBuf   *Buffer

	// Read progress (Serve goroutine only).
	nextSeg      int
	curChunk     int
	segOff       int
	readsPending int
}

// XID is the call's transport XID (the RPC XID).
func (c *Call) XID() uint32 { return c.hdr.XID }

// WriteChunks is how many Write chunks the call offered for its reply.
func (c *Call) WriteChunks() int { return len(c.hdr.Writes) }

// WriteChunkLen is the room, in bytes, of the call's k-th Write chunk (0
// for an empty chunk or k beyond the Write list): RFC 8267 pairs the
// reply's k-th DDP-eligible item with it when the room is not 0.
func (c *Call) WriteChunkLen(k int) uint64 {
	if k < 0 || k >= len(c.hdr.Writes) {
		return 0
	}
	return c.hdr.Writes[k].Len()
}

// Reasons the engine answers ERR_CHUNK for a call the codec accepted.
var (
	errPZInMsg       = errors.New("Position-Zero Read chunk in an RDMA_MSG call")
	errNoPZ          = errors.New("RDMA_NOMSG call without a Position-Zero Read chunk")
	errChunkTooBig   = errors.New("Read chunk larger than the largest registered buffer")
	errPositionOrder = errors.New("Read chunk Positions decrease")
	errNoRPC         = errors.New("no RPC message: fewer than 4 bytes, not even an XID")
	errXIDMismatch   = errors.New("rdma_xid differs from the RPC message's XID")
)

// Reasons the engine answers GARBAGE_ARGS: the header is well formed but
// its chunks do not fit the Payload stream, so the RPC arguments cannot
// be put together (RFC 8166 §4.5.2: "mismatches between chunk sizes or
// offsets and the contents of the Payload stream").
var (
	errPositionPast = errors.New("Read chunk Position beyond the inline payload")
	errPositionBack = errors.New("Read chunk Position inside the previous chunk")
)

func (c *ResponderConn) postRecv(r *recvCtxt) error { return postRecvOn(c.srq, r) }

// repost puts a receive back on the SRQ, or returns its buffer to the
// pool when the connection is going down. A shared receive goes back to
// the shared SRQ either way (responder_srq.go).
func (c *ResponderConn) repost(r *recvCtxt) {
	r.call.state.Store(callIdle)
	if c.shared != nil {
		c.shared.repost(r)
		return
	}
	c.recvMu.Lock()
	defer c.recvMu.Unlock()
	if r.buf == nil {
		return
	}
	if c.isDead() {
		r.buf.Release()
		r.buf = nil
		return
	}
	if err := c.postRecv(r); err != nil {
		r.buf.Release()
		r.buf = nil
		c.log.Warn("repost of receive failed", "peer", c.RemoteAddr(), "error", err)
	}
}

// grantFor is the credit grant for a peer that asked for req: what it
// asked, at least 1 (0 would stall it), at most the configured limit.
func (c *ResponderConn) grantFor(req uint32) uint32 {
	return min(max(req, 1), uint32(c.cfg.Credits))
}

// received handles one inbound message. Serve goroutine only.
func (c *ResponderConn) received(r *recvCtxt, n int) {
	if c.shared != nil {
		c.shared.taken(c, r)
	} else {
		c.recvMu.Lock()
		r.posted = false
		c.recvMu.Unlock()
	}
	if c.isDead() {
		// Collected while draining: no answer could be sent.
		c.repost(r)
		return
	}
	call := &r.call
	data := r.buf.Bytes[:n]
	if c.cfg.V2 && c.routeV2(r, data) {
		return
	}
	call.v2 = false
	hlen, err := call.hdr.Decode(data, c.cfg.Limits)
	if err != nil {
		c.badHeader(r, err)
		return
	}
	if call.hdr.Proc == ProcError {
		// rfc5666bis §5.5: never answer an RDMA_ERROR; a requester has
		// no business sending one at all.
		c.met.Dropped(DropClientError)
		c.log.Debug("RDMA_ERROR from requester dropped", "peer", c.RemoteAddr(), "header", call.hdr.String())
		c.repost(r)
		return
	}
	// A backward-direction reply (RFC 8167) is no call: it takes no
	// forward credit and goes to the backchannel.
	if c.backwardReply(r, data[hlen:]) {
		return
	}
	c.acceptCall(r, data, hlen)
}

// acceptCall takes a decoded call (either version; data[hlen:] its
// Payload stream) through the credit check and prepareCall to the
// Handler, directly or after its RDMA Reads. Serve goroutine only.
func (c *ResponderConn) acceptCall(r *recvCtxt, data []byte, hlen int) {
	call := &r.call
	// Credit overrun: more calls than we ever grant. Linux servers get an
	// RNR on the QP; we have spare receives, so the call is dropped and
	// counted and the connection survives. (A peer that keeps going
	// beyond the spare receives ends the connection at the transport.)
	if int(c.outstanding.Load()) >= c.cfg.Credits {
		c.met.Dropped(DropCreditOverrun)
		c.log.Warn("call beyond the credit limit dropped", "peer", c.RemoteAddr(),
			"xid", call.hdr.XID, "credits", c.cfg.Credits)
		call.releaseAll()
		c.repost(r)
		return
	}
	if err := c.prepareCall(call, data, hlen); err != nil {
		c.rejectCall(r, err)
		return
	}
	c.outstanding.Add(1)
	c.callsSeen.Add(1)
	if len(call.hdr.Reads) == 0 {
		c.deliver(call)
		return
	}
	c.startReads(call)
}

// rejectCall answers a call prepareCall refused: GARBAGE_ARGS for a Read
// chunk Position outside the RPC message, ERR_CHUNK for the rest.
func (c *ResponderConn) rejectCall(r *recvCtxt, err error) {
	h := &r.call.hdr
	r.call.releaseAll()
	if r.call.v2 {
		c.log.Debug("version-two call refused", "peer", c.RemoteAddr(), "xid", h.XID, "reason", err)
		if errors.Is(err, errPositionPast) || errors.Is(err, errPositionBack) {
			c.answerV2Garbage(r, h.XID)
			return
		}
		c.answerV2(r, h.XID, V2Version, v2Answer(err))
		return
	}
	if errors.Is(err, errPositionPast) || errors.Is(err, errPositionBack) {
		c.log.Debug("call answered with GARBAGE_ARGS", "peer", c.RemoteAddr(), "xid", h.XID, "reason", err)
		c.answerError(r, ErrCodeGarbageArgs, h.XID, Version, c.grantFor(h.Credit))
		return
	}
	c.log.Debug("call answered with ERR_CHUNK", "peer", c.RemoteAddr(), "xid", h.XID, "reason", err)
	c.answerError(r, ErrCodeChunk, h.XID, Version, c.grantFor(h.Credit))
}

// startReads queues a call with Read chunks for its RDMA Reads, or for
// memory when there is none for its chunks yet.
func (c *ResponderConn) startReads(call *Call) {
	call.state.Store(callReading)
	// Read chunk memory, in arrival order: while one call waits for it,
	// the calls behind it wait too (calls without chunks go on).
	if len(c.memQ) == 0 {
		if err := c.takeChunks(call); err == nil {
			c.readQ = append(c.readQ, call)
			return
		} else if !errors.Is(err, ErrPoolExhausted) {
			c.fail(fmt.Errorf("rdmarpc: responder: Read chunk buffers: %w", err))
			return
		}
	}
	c.waitMemory(call)
}

// waitMemory parks a call whose Read chunks find no registered memory
// (the pool, or the connection's share of it, is used up): it keeps its
// receive, so the peer gets no new receive and, holding its credits, can
// send no more than it already has (the back-pressure svcrdma applies by
// not reposting receives). retryMemory resumes it when memory frees; the
// call is never dropped. Serve goroutine only.
func (c *ResponderConn) waitMemory(call *Call) {
	if len(c.memQ) == 0 {
		c.memWait = time.Millisecond
		c.met.MemoryWait()
		c.log.Debug("calls wait for registered memory", "peer", c.RemoteAddr(), "xid", call.hdr.XID,
			"pool_in_use", c.pool.InUse(), "conn_call_bytes", c.callQuota.Used())
	}
	c.memQ = append(c.memQ, call)
}

// retryMemory gives waiting calls their Read chunk buffers, in order, as
// far as memory allows. Serve goroutine only.
func (c *ResponderConn) retryMemory() {
	for len(c.memQ) > 0 && !c.isDead() {
		call := c.memQ[0]
		if err := c.takeChunks(call); err != nil {
			if !errors.Is(err, ErrPoolExhausted) {
				c.fail(fmt.Errorf("rdmarpc: responder: Read chunk buffers: %w", err))
			}
			return
		}
		copy(c.memQ, c.memQ[1:])
		c.memQ[len(c.memQ)-1] = nil
		c.memQ = c.memQ[:len(c.memQ)-1]
		c.readQ = append(c.readQ, call)
	}
}

// badHeader answers a header Decode rejected.
func (c *ResponderConn) badHeader(r *recvCtxt, err error) {
	var ve *VersionError
	var ce *ChunkError
	switch {
	case errors.As(err, &ve):
		if ve.Complete && ve.Proc == ProcError {
			c.met.Dropped(DropClientError)
			c.repost(r)
			return
		}
		c.log.Debug("ERR_VERS", "peer", c.RemoteAddr(), "xid", ve.XID, "vers", ve.Vers)
		c.answerError(r, ErrCodeVers, ve.XID, ve.Vers, uint32(c.cfg.Credits))
	case errors.As(err, &ce):
		switch {
		case ce.Proc == ProcError:
			c.met.Dropped(DropClientError)
			c.repost(r)
		case ce.Proc == ProcDone && ce.Reason == ReasonReservedProc:
			// Linux drops RDMA_DONE; the Read-Read model is gone.
			c.met.Dropped(DropClientDone)
			c.repost(r)
		default:
			c.log.Debug("ERR_CHUNK", "peer", c.RemoteAddr(), "error", err)
			c.answerError(r, ErrCodeChunk, ce.XID, Version, c.grantFor(r.call.hdr.Credit))
		}
	default:
		c.met.Dropped(DropShort)
		c.log.Debug("message too short for a transport header dropped", "peer", c.RemoteAddr(), "error", err)
		c.repost(r)
	}
}

// placeChunks checks the data Read chunks' Positions against the inline
// payload of inlineLen bytes and records each chunk's offset in it and
// its length. Positions count bytes of the whole XDR stream, earlier
// chunks and their round-up included; the inline payload holds neither.
// So a chunk's place in the inline payload is its Position less what the
// chunks before it occupy in the stream, returned as consumed.
func (call *Call) placeChunks(inlineLen int, maxBuf uint64) (consumed int64, err error) {
	var prevOff int64
	var prevPos uint32
	for ch := range call.hdr.Reads.DataChunks().Chunks() {
		l := ch.Len()
		if l > maxBuf {
			return 0, errChunkTooBig
		}
		off := int64(ch.Position) - consumed
		switch {
		case ch.Position < prevPos:
			return 0, errPositionOrder
		case off < prevOff:
			return 0, errPositionBack
		case off > int64(inlineLen):
			return 0, errPositionPast
		}
		call.chunkOffs = append(call.chunkOffs, int(off))
		call.chunkLens = append(call.chunkLens, int(l))
		consumed += int64(l) + int64(padLen(int(l)))
		prevOff, prevPos = off, ch.Position
	}
	return consumed, nil
}

// prepareCall checks a decoded call against what the engine can do; its
// errors are answered with ERR_CHUNK. All are checked before any buffer
// is taken or RDMA Read issued.
func (c *ResponderConn) prepareCall(call *Call, data []byte, hlen int) error {
	h := &call.hdr
	call.inline = nil
	call.chunkBufs = call.bufStore[:0]
	call.chunkLens = call.lenStore[:0]
	call.chunkOffs = call.offStore[:0]
	call.nextSeg, call.curChunk, call.segOff, call.readsPending, call.chunkSum = 0, -1, 0, 0, 0
	pz, hasPZ := h.PositionZero()
	call.hasPZ = hasPZ
	maxBuf := uint64(c.pool.MaxSize())
	var inlineLen int
	switch h.Proc {
	case ProcMsg:
		if hasPZ {
			return errPZInMsg
		}
		call.inline = data[hlen:]
		inlineLen = len(call.inline)
		call.kind = CallInline
		if len(h.Reads) > 0 {
			call.kind = CallReadChunk
		}
	case ProcNoMsg:
		if !hasPZ {
			return errNoPZ
		}
		if pz.Len() > maxBuf {
			return errChunkTooBig
		}
		inlineLen = int(pz.Len())
		call.chunkLens = append(call.chunkLens, inlineLen)
		call.kind = CallLong
	default:
		return fmt.Errorf("procedure %v in a call", h.Proc)
	}
	consumed, err := call.placeChunks(inlineLen, maxBuf)
	if err != nil {
		return err
	}
	if int64(inlineLen)+consumed < 4 {
		return errNoRPC
	}
	// RFC 8166 §4.5.2: rdma_xid must be the RPC XID (a Long Call's is
	// checked once its Position-Zero chunk is in: deliver).
	if h.Proc == ProcMsg && (len(call.inline) < 4 || binary.BigEndian.Uint32(call.inline) != h.XID) {
		return errXIDMismatch
	}
	return nil
}

// takeChunks takes the buffers the call's Read chunks go into, charged to
// the connection's share of the pool: all of them or none.
func (c *ResponderConn) takeChunks(call *Call) error {
	for _, l := range call.chunkLens {
		var b *Buffer
		if l > 0 {
			var err error
			if b, err = c.pool.GetQuota(l, c.callQuota); err != nil {
				call.releaseChunks()
				call.chunkSum = 0
				return err
			}
		}
		call.chunkBufs = append(call.chunkBufs, b)
		call.chunkSum += l
	}
	return nil
}

// releaseAll releases the call's Read chunk buffers and its reassembled
// Payload stream.
func (call *Call) releaseAll() {
	if call.contBuf != nil {
		call.contBuf.Release()
		call.contBuf = nil
	}
	call.releaseChunks()
}

func (call *Call) releaseChunks() {
	for i, b := range call.chunkBufs {
		if b != nil {
			b.Release()
		}
		call.chunkBufs[i] = nil
	}
	call.chunkBufs = call.chunkBufs[:0]
}

// issueReads posts RDMA Reads for queued calls, in arrival order, while
// fewer than MaxReadsOutstanding are in flight. Serve goroutine only.
func (c *ResponderConn) issueReads() {
	for len(c.readQ) > 0 && c.readsOut < c.cfg.MaxReadsOutstanding && !c.isDead() {
		call := c.readQ[0]
		reads := call.hdr.Reads
		if call.nextSeg == len(reads) {
			// Every Read is posted: the call leaves the queue now, so
			// exactly one of here and the last Read's completion delivers.
			copy(c.readQ, c.readQ[1:])
			c.readQ = c.readQ[:len(c.readQ)-1]
			if call.readsPending == 0 {
				c.deliver(call) // every segment was empty
			}
			continue
		}
		s := &reads[call.nextSeg]
		if call.nextSeg == 0 || s.Position != reads[call.nextSeg-1].Position {
			call.curChunk++
			call.segOff = 0
		}
		if s.Length == 0 {
			call.nextSeg++
			continue
		}
		if !c.sq.tryTake(1) {
			return // a completion will give slots back and call us again
		}
		b := call.chunkBufs[call.curChunk]
		l := int(s.Length)
		// One request and SGE reused for every Read: the provider keeps
		// neither after PostSend returns, and a local would escape.
		c.readSGE[0] = b.SGE(call.segOff, l)
		c.readWR = verbs.SendWR{ID: wrRead | uint64(call.rc.idx), Op: verbs.OpRDMARead, SGL: c.readSGE[:],
			Signal: true, RemoteAddr: s.Offset, RKey: s.Handle}
		err := c.qp.PostSend(&c.readWR)
		c.settle(false) // inside the engine, whose polling takes them
		if err != nil {
			c.sq.put(1)
			c.postFailed("RDMA Read", err)
			return
		}
		c.readsOut++
		if int32(c.readsOut) > c.readsPeak.Load() {
			c.readsPeak.Store(int32(c.readsOut))
		}
		call.readsPending++
		call.segOff += l
		call.nextSeg++
		if call.nextSeg == len(reads) {
			copy(c.readQ, c.readQ[1:])
			c.readQ = c.readQ[:len(c.readQ)-1]
		}
	}
}

// readDone accounts for a completed RDMA Read. Serve goroutine only.
func (c *ResponderConn) readDone(call *Call) {
	c.readsOut--
	call.readsPending--
	c.sq.put(1)
}

// deliver assembles the call's message and hands it to the Handler.
func (c *ResponderConn) deliver(call *Call) {
	h := &call.hdr
	m := &call.Msg
	m.Reset()
	m.XID = h.XID
	src, srcBuf := call.inline, call.contBuf
	bufs, lens := call.chunkBufs, call.chunkLens
	if call.hasPZ {
		if srcBuf = bufs[0]; srcBuf != nil {
			src = srcBuf.Bytes[:lens[0]]
		}
		bufs, lens = bufs[1:], lens[1:]
		if len(src) < 4 || binary.BigEndian.Uint32(src) != h.XID {
			// RFC 8166 §4.5.2: the Long Call's rdma_xid is not its XID.
			c.log.Debug("call answered with ERR_CHUNK", "peer", c.RemoteAddr(), "xid", h.XID, "reason", errXIDMismatch)
			call.state.Store(callDone)
			call.releaseAll()
			c.outstanding.Add(-1)
			if call.v2 {
				c.answerV2(call.rc, h.XID, V2Version, V2ErrorBody{Code: V2ErrBadXDR})
				return
			}
			c.answerError(call.rc, ErrCodeChunk, h.XID, Version, c.grantFor(h.Credit))
			return
		}
	}
	prev := 0
	for j, off := range call.chunkOffs {
		m.Append(Piece{Data: src[prev:off], Buf: srcBuf})
		var item []byte
		if bufs[j] != nil {
			item = bufs[j].Bytes[:lens[j]]
		}
		m.Append(Piece{Data: item, Item: true, Buf: bufs[j]})
		prev = off
	}
	m.Append(Piece{Data: src[prev:], Buf: srcBuf})
	call.state.Store(callHandler)
	c.met.CallReceived(call.kind, len(call.inline), call.chunkSum)
	reportReads(c.work, call.hdr.Reads)
	c.delivering.Store(call)
	c.handler.ServeCall(call)
	c.delivering.Store(nil)
}

// abortCall releases a call that never reached the handler (teardown).
func (c *ResponderConn) abortCall(call *Call) {
	if !call.state.CompareAndSwap(callReading, callDone) {
		return
	}
	call.releaseAll()
	c.outstanding.Add(-1)
	c.repost(call.rc)
}

// endCall releases what a call holds after Reply or Drop and reposts its
// receive, which also returns the call's credit.
func (c *ResponderConn) endCall(call *Call) {
	call.releaseAll()
	call.Msg.Reset()
	c.outstanding.Add(-1)
	c.repost(call.rc)
}
