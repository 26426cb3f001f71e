package iwarp

import (
	"encoding/binary"
	"errors"
	"slices"
	"sync/atomic"

	"github.com/rdmagw/rdmagw/internal/sockwrite"
	"github.com/rdmagw/rdmagw/verbs"
)

// The transmit side: one goroutine per connection turns work into FPDUs
// and writes them with writev: each round gathers everything that is
// ready (Read Responses owed to the peer, a run of send-queue entries, the
// zero-length Read that proves their placement) into one batch, so a
// burst of small messages costs one system call, not one per message. Payload bytes go from the caller's
// registered memory straight into the kernel: each FPDU is an iovec list
// of a preallocated header, the SGL pieces and a preallocated pad+CRC
// trailer, the CRC computed over the pieces in place.

const (
	batchFPDUs = 64
	batchBytes = 512 << 10
	batchWRs   = 32 // send-queue entries (and Read Responses) gathered into one batch
	// fenceBytes bounds the payload a fence Read proves at once. A long
	// stream of large Writes then completes as it goes (like the ACKs of
	// an InfiniBand RC queue) instead of all at its end: the requester
	// recycles buffers and posts more while earlier bytes are still being
	// placed and checksummed on the far side, so the pipe never drains.
	fenceBytes = 1 << 20
)

var (
	errStopped         = errors.New("iwarp: connection left RTS")
	errLocalProtection = errors.New("iwarp: local protection error")
)

type txState struct {
	c     *conn
	iov   []([]byte) // the batch's gather list (fixed capacity)
	hdr   [batchFPDUs][fpduLenField + ddpUntaggedLen]byte
	trl   [batchFPDUs][3 + fpduCRCLen]byte
	nf    int
	bytes int
	held  []*mr // regions of the batch being sent, held against Deregister
	rrq   [batchWRs + 2][readReqLen]byte
	nrr   int
	resp  [batchWRs]irqEntry // Read Responses taken for the batch
	nresp int
	rnext int // resp[rnext:nresp] are not on the wire yet
	term  [termMaxLen]byte
	// The stream is not at an FPDU/message boundary: a writev failed or a
	// multi-segment message was cut off when the QP left RTS.
	broken   bool
	draining bool // answerReads: keep going although the QP left RTS

	// Inline transmission (txinline.go).
	inline       bool         // the batch is built for one non-blocking write
	pending      pendingPhase // what the goroutine must finish of an inline round
	pendingRound txRound
	raw          sockwrite.Writer // the batch's writes: flushNow's never wait, flush's do

	// Rounds written by the goroutine and inline (for tests: a wake-up
	// per message shows as goroutine rounds).
	goRounds, inlineRounds atomic.Uint64
	handoffs               atomic.Uint64 // inline rounds left to the goroutine
	kicks                  atomic.Uint64 // wake-ups of the parked goroutine

	// onLoop: the tx goroutine is writing a round (markWritten may then
	// complete with pushLater: txLoop settles). Only the goroutine owning
	// transmit (txinline.go) touches it.
	onLoop bool
}

func (t *txState) init(c *conn) {
	t.c = c
	t.iov = make([][]byte, 0, batchFPDUs*2+c.maxSGE+8)
	t.held = make([]*mr, 0, batchWRs*(c.maxSGE+1))
}

// flush writes the batched FPDUs (in an inline round without waiting:
// flushNow).
func (t *txState) flush() error {
	if t.nf == 0 {
		return nil
	}
	if t.inline {
		return t.flushNow()
	}
	_, err := t.raw.WriteAll(t.c.rc, t.iov)
	t.iov = t.iov[:0]
	t.nf, t.bytes, t.nrr = 0, 0, 0
	if err != nil {
		t.broken = true
	}
	return err
}

// full reports whether the batch has no room for one more FPDU.
func (t *txState) full() bool {
	return t.nf == batchFPDUs || len(t.iov)+t.c.maxSGE+3 > cap(t.iov) || t.bytes >= batchBytes
}

// makeRoom flushes the batch if it has no room for one more FPDU.
func (t *txState) makeRoom() error {
	if !t.full() {
		return nil
	}
	if err := t.flushMid(); err != nil {
		return err
	}
	if !t.draining && !t.c.live.Load() {
		return errStopped
	}
	return nil
}

// flushMid writes the batch to make room in the middle of a round. An
// inline round writes once, at its end: it fails with errInlineFull
// instead (nothing was written; the goroutine does the round).
func (t *txState) flushMid() error {
	if t.inline {
		return errInlineFull
	}
	return t.flush()
}

// send segments one DDP message into FPDUs. h is the first segment's
// header (TO or MO advance per segment); the payload is either the SGL or
// payload. It flushes the batch whenever it is full, also before the
// first segment; a payload in per-batch storage (t.rrq, reset by flush)
// must therefore fit one FPDU and be taken only after makeRoom, or a
// later message of the new batch could overwrite it before it is written.
func (t *txState) send(h ddpHeader, sgl []verbs.SGE, payload []byte, total int) error {
	maxPay := t.c.maxULPDU - h.Len()
	cur := sglCursor{sgl: sgl}
	for mo, first := 0, true; first || mo < total; first = false {
		if err := t.makeRoom(); err != nil {
			if !first && !errors.Is(err, errInlineFull) {
				t.broken = true // the message is cut off
			}
			return err
		}
		n := min(total-mo, maxPay)
		seg := h
		if seg.Tagged {
			seg.TO = h.TO + uint64(mo)
		} else {
			seg.MO = h.MO + uint32(mo)
		}
		seg.Last = mo+n == total
		crc := t.appendHeader(&seg, n)
		if payload != nil {
			crc = t.appendPiece(crc, payload[mo:mo+n])
		} else {
			crc = cur.appendTo(t, crc, n)
		}
		t.appendTrailer(crc, seg.Len()+n)
		mo += n
	}
	return nil
}

// appendHeader adds an FPDU's length and DDP header for a segment of n
// payload bytes and returns the CRC over them.
func (t *txState) appendHeader(seg *ddpHeader, n int) uint32 {
	hl := seg.Len()
	fh := t.hdr[t.nf][:fpduLenField+hl]
	binary.BigEndian.PutUint16(fh, uint16(hl+n))
	seg.put(fh[fpduLenField:])
	t.iov = append(t.iov, fh)
	if t.c.crc {
		return crcUpdate(0, fh)
	}
	return 0
}

// appendPiece adds payload bytes p (skipped if empty) and continues the
// CRC over them.
func (t *txState) appendPiece(crc uint32, p []byte) uint32 {
	if len(p) == 0 {
		return crc
	}
	t.iov = append(t.iov, p)
	if t.c.crc {
		crc = crcUpdate(crc, p)
	}
	return crc
}

// appendTrailer ends an FPDU of ulen ULPDU bytes with its pad and CRC.
func (t *txState) appendTrailer(crc uint32, ulen int) {
	pad := fpduPad(ulen)
	tr := t.trl[t.nf][:pad+fpduCRCLen]
	clear(tr[:pad])
	if t.c.crc {
		crc = crcUpdate(crc, tr[:pad])
	}
	putCRC(tr[pad:], crc)
	t.iov = append(t.iov, tr)
	t.nf++
	t.bytes += fpduSize(ulen)
}

// sglCursor walks an SGL segment by segment.
type sglCursor struct {
	sgl      []verbs.SGE
	idx, off int
}

// appendTo adds the next n bytes of the SGL to t's batch.
func (s *sglCursor) appendTo(t *txState, crc uint32, n int) uint32 {
	for n > 0 {
		b := s.sgl[s.idx].Buf[s.off:]
		take := min(len(b), n)
		crc = t.appendPiece(crc, b[:take])
		s.off += take
		n -= take
		if s.off == len(s.sgl[s.idx].Buf) {
			s.idx++
			s.off = 0
		}
	}
	return crc
}

func untagged(op rdmapOpcode, qn, msn uint32) ddpHeader {
	return ddpHeader{Version: ddpVersion, RDMAP: rdmapCtrl(op), QN: qn, MSN: msn}
}

func tagged(op rdmapOpcode, stag uint32, to uint64) ddpHeader {
	return ddpHeader{Tagged: true, Version: ddpVersion, RDMAP: rdmapCtrl(op), STag: stag, TO: to}
}

// sendReadRequest sends an RDMA Read Request (the RFC 6581 RTR) at once.
func (t *txState) sendReadRequest(msn uint32, rr *readRequest) error {
	if err := t.queueReadRequest(msn, rr); err != nil {
		return err
	}
	return t.flush()
}

// queueReadRequest adds an RDMA Read Request to the batch, its body in a
// buffer of its own that stays put until the batch is written. The slot
// is taken after any flush the request needs (send then does not flush:
// the request is one FPDU and the batch has room for it), so it belongs to
// the batch that carries it.
func (t *txState) queueReadRequest(msn uint32, rr *readRequest) error {
	if t.nrr == len(t.rrq) {
		if err := t.flushMid(); err != nil {
			return err
		}
	}
	if err := t.makeRoom(); err != nil {
		return err
	}
	b := t.rrq[t.nrr][:]
	t.nrr++
	rr.put(b)
	return t.send(untagged(opReadReq, qnReadReq, msn), nil, b, readReqLen)
}

// holdMR read-locks m for the rest of the batch (once), so it cannot be
// deregistered (or reused) while its bytes are being sent; false if it is
// no longer the live registration stag names. A region that fails is not
// held: a Register reusing its object must not wait for this batch.
func (t *txState) holdMR(m *mr, stag uint32) bool {
	if slices.Contains(t.held, m) {
		return !m.dead && m.stag == stag // held: stable
	}
	if t.inline {
		// An inline round never waits: a Deregister in progress sends the
		// round to the goroutine (writeInline).
		if !m.use.TryRLock() {
			return false
		}
	} else {
		m.use.RLock()
	}
	if m.dead || m.stag != stag {
		m.use.RUnlock()
		return false
	}
	t.held = append(t.held, m)
	return true
}

// hold holds the regions of an SGL; false if one is already gone.
func (t *txState) hold(sgl []verbs.SGE) bool {
	for i := range sgl {
		if len(sgl[i].Buf) == 0 {
			continue
		}
		m := t.c.dev.lookup(sgl[i].LKey)
		if m == nil || !t.holdMR(m, sgl[i].LKey) {
			return false
		}
	}
	return true
}

func (t *txState) release() {
	for _, m := range t.held {
		m.use.RUnlock()
	}
	clear(t.held)
	t.held = t.held[:0]
}

// queueReadResponse adds the answer to a peer's Read Request.
func (t *txState) queueReadResponse(ie *irqEntry) error {
	h := tagged(opReadResp, ie.sinkSTag, ie.sinkTO)
	if ie.n == 0 {
		return t.send(h, nil, nil, 0)
	}
	if !t.holdMR(ie.m, ie.stag) {
		return errors.New("iwarp: region deregistered while an RDMA Read Response was sent from it")
	}
	return t.send(h, nil, ie.m.b[ie.off:ie.off+ie.n], ie.n)
}

// queueWR adds one send-queue entry.
func (t *txState) queueWR(e *sqEntry) error {
	if !t.hold(e.sgl) {
		return errLocalProtection
	}
	var h ddpHeader
	switch e.op {
	case verbs.OpSend:
		h = untagged(opSend, qnSend, e.msn)
	case verbs.OpSendInv:
		h = untagged(opSendInv, qnSend, e.msn)
		h.InvSTag = e.invRKey
	case verbs.OpRDMAWrite:
		h = tagged(opWrite, e.rkey, e.remoteAddr)
	case verbs.OpRDMARead:
		rr := readRequest{Size: uint32(e.length), SrcSTag: e.rkey, SrcTO: e.remoteAddr}
		if len(e.sgl) > 0 && e.length > 0 {
			rr.SinkSTag, rr.SinkTO = e.sgl[0].LKey, sgeAddr(&e.sgl[0])
		}
		return t.queueReadRequest(e.msn, &rr)
	}
	return t.send(h, e.sgl, nil, e.length)
}

// writeBatch writes what gather took: the Read Responses, the send-queue
// entries [r.from, r.to) and, if r.fence, a zero-length Read Request, all
// in as few writev calls as the batch limits allow. It returns the end of
// the run of entries that were handed to TCP in full. The regions stay
// held (t.release) until the caller accounted for the round.
func (t *txState) writeBatch(r *txRound) (uint64, error) {
	c := t.c
	for i := range t.resp[:t.nresp] {
		t.rnext = i // a failure at a boundary leaves this one unsent
		if err := t.queueReadResponse(&t.resp[i]); err != nil {
			return r.from, err
		}
	}
	t.rnext = t.nresp
	for seq := r.from; seq < r.to; seq++ {
		if err := t.queueWR(c.sqAt(seq)); err != nil {
			if errors.Is(err, errLocalProtection) && !t.inline {
				// What went before it still goes out.
				if ferr := t.flush(); ferr != nil {
					return r.from, ferr
				}
				return seq, err
			}
			return r.from, err
		}
	}
	if r.fence {
		if err := t.queueReadRequest(r.fenceMSN, &readRequest{}); err != nil {
			return r.from, err
		}
	}
	clear(t.resp[:t.nresp])
	t.nresp, t.rnext = 0, 0
	return r.handed(t.flush())
}

// handed is the end of the run of r's entries handed to TCP in full when
// the round's last write ended with err: all of them, or (a failed or
// partial write) none the caller may count as written.
func (r *txRound) handed(err error) (uint64, error) {
	if err != nil {
		return r.from, err
	}
	return r.to, nil
}

// idle parks tx until a kick (or the end). Caller holds c.mu and has
// found nothing to do; kick only signals a parked tx.
func (c *conn) idle() {
	c.txIdle.Store(true)
	c.mu.Unlock()
	select {
	case <-c.txKick:
	case <-c.dying:
	}
}

// waitInline parks tx while a caller transmits inline; the caller kicks
// when it lets go with work left or the connection ending. Caller holds
// c.mu.
func (c *conn) waitInline() {
	c.txIdle.Store(true)
	c.mu.Unlock()
	<-c.txKick
}

// txRound is what one gather took from the queues for one writeBatch:
// the Read Responses in txState.resp, the send-queue entries [from, to)
// and, if fence, a zero-length Read Request with MSN fenceMSN.
type txRound struct {
	from, to uint64
	fence    bool
	fenceMSN uint32
}

func (r *txRound) empty(t *txState) bool { return t.nresp == 0 && r.from == r.to && !r.fence }

// txLoop is the transmit goroutine: after the RFC 6581 ready-to-receive
// exchange, rounds of gather (under c.mu) and writeBatch (without it),
// parking when there is nothing to do.
func (c *conn) txLoop() {
	defer c.txExit()
	if !c.awaitRTR() {
		return
	}
	c.tx.sendRTR()
	for {
		if c.wcOwed.Swap(false) {
			c.complete(true) // what an inline round could not deliver
		}
		c.settleCQs() // what the last round completed (pushLater)
		c.mu.Lock()
		c.txIdle.Store(false) // running: no caller may take over (txinline.go)
		if c.txBusy {
			c.waitInline()
			continue
		}
		if c.tx.pending != pendingNone {
			c.tx.onLoop = true
			ok := c.finishPending()
			c.tx.onLoop = false
			if !ok {
				return
			}
			continue
		}
		if c.state != stateLive {
			c.mu.Unlock()
			return
		}
		r, bad := c.gather()
		if bad != nil {
			c.mu.Unlock()
			c.failLocalCheck(bad, r.from, bad.localErr)
			return
		}
		if r.empty(&c.tx) {
			c.idle()
			continue
		}
		c.mu.Unlock()
		c.tx.goRounds.Add(1)
		c.tx.onLoop = true
		ok := c.writeRound(&r)
		c.tx.onLoop = false
		if !ok {
			return
		}
	}
}

// awaitRTR waits until tx may send: in RFC 6581 peer-to-peer mode the
// responder sends nothing before the initiator's ready-to-receive message
// arrived. False if the connection ended first.
func (c *conn) awaitRTR() bool {
	for {
		c.mu.Lock()
		if c.state != stateLive {
			c.mu.Unlock()
			return false
		}
		if c.rtrSeen {
			c.mu.Unlock()
			return true
		}
		c.idle()
	}
}

// sendRTR sends the RFC 6581 ready-to-receive message the initiator owes.
func (t *txState) sendRTR() {
	c := t.c
	switch c.neg.sendRTR {
	case rtrWrite:
		if err := t.send(tagged(opWrite, 0, 0), nil, nil, 0); err == nil {
			t.flush()
		}
	case rtrRead:
		c.mu.Lock()
		c.pushORQ(orqEntry{cover: c.sqSent})
		msn := c.nextMSN(qnReadReq)
		c.mu.Unlock()
		t.sendReadRequest(msn, &readRequest{})
	}
}

// pushORQ records an RDMA Read we issue. Caller holds c.mu and has
// checked there is room.
func (c *conn) pushORQ(o orqEntry) {
	c.orq[c.orqTail%uint64(len(c.orq))] = o
	c.orqTail++
}

func (c *conn) orqFull() bool { return c.orqTail-c.orqHead >= uint64(len(c.orq)) }

// nextMSN takes the next message sequence number of queue qn. Caller
// holds c.mu.
func (c *conn) nextMSN(qn int) uint32 {
	msn := c.txMSN[qn]
	c.txMSN[qn]++
	return msn
}

// gather takes everything that is ready for one round. Caller holds c.mu.
// Read Responses first: the peer is waiting on them. Then a run of
// send-queue entries, and the fence that proves them. bad is an entry at
// the head of the run that failed its local checks (nothing else is
// taken then): it ends the connection.
func (c *conn) gather() (r txRound, bad *sqEntry) {
	c.takeReadResponses(c.irqTail)
	r.from = c.sqSent
	if e := c.gatherSQ(); e != nil && c.sqSent == r.from && c.tx.nresp == 0 {
		return r, e
	}
	r.to = c.sqSent
	r.fence, r.fenceMSN = c.planFence(r.to)
	return r, nil
}

// takeReadResponses moves queued Read Requests, up to sequence number
// end, into the batch's Read Responses. They are popped before they are
// sent: once the last byte is out the peer may complete the Read and
// issue the next one at once. Caller holds c.mu.
func (c *conn) takeReadResponses(end uint64) {
	t := &c.tx
	for c.irqHead < end && t.nresp < len(t.resp) {
		i := c.irqHead % uint64(len(c.irq))
		t.resp[t.nresp] = c.irq[i]
		c.irq[i] = irqEntry{}
		c.irqHead++
		t.nresp++
	}
}

// gatherSQ advances sqSent over a run of send-queue entries (at most
// batchWRs of them, batchBytes of payload), stopping at one that failed its
// local checks (returned: it ends the connection once everything before
// it is out) and at a Read the ORD has no room for. Caller holds c.mu.
func (c *conn) gatherSQ() (bad *sqEntry) {
	from, bytes := c.sqSent, 0
	for c.sqSent < c.sqTail && c.sqSent-from < batchWRs && bytes < batchBytes {
		e := c.sqAt(c.sqSent)
		if e.localErr != 0 {
			return e
		}
		if !c.takeSQEntry(c.sqSent, e) {
			return nil
		}
		c.sqSent++
		bytes += e.length
	}
	return nil
}

// takeSQEntry assigns entry seq its MSN (and a Read its ORQ slot: its
// response proves everything before it placed too); false if it is a Read
// the ORD has no room for. Caller holds c.mu.
func (c *conn) takeSQEntry(seq uint64, e *sqEntry) bool {
	switch e.op {
	case verbs.OpRDMARead:
		if c.orqFull() {
			return false
		}
		e.msn = c.nextMSN(qnReadReq)
		o := orqEntry{cover: seq + 1, user: true, seq: seq, length: e.length}
		if o.big() {
			c.bigReads.Add(1)
		}
		if len(e.sgl) > 0 && e.length > 0 {
			o.sinkSTag, o.sinkTO = e.sgl[0].LKey, sgeAddr(&e.sgl[0])
		}
		c.pushORQ(o)
		c.covered = seq + 1
		c.uncovered = 0
	case verbs.OpSend, verbs.OpSendInv:
		e.msn = c.nextMSN(qnSend)
		c.uncovered += e.length
	default:
		c.uncovered += e.length
	}
	e.sent = true
	return true
}

// planFence decides whether a zero-length Read goes after the entries
// < to, proving the placement of everything sent and not yet covered, and
// takes its ORQ slot and MSN. Caller holds c.mu.
func (c *conn) planFence(to uint64) (bool, uint32) {
	if !c.fenceDue(to) {
		return false, 0
	}
	c.pushORQ(orqEntry{cover: to})
	c.covered = to
	c.uncovered = 0
	return true, c.nextMSN(qnReadReq)
}

// fenceDue reports whether the entries < to need a fence now. A fence
// waits until the send queue has drained, so a burst of small messages
// larger than one batch still gets one, after its last entry; a burst
// carrying more than fenceBytes gets one per fenceBytes. (One fence out
// at a time, messages posted one by one sharing the next, cost 20% more
// CPU per 4 KiB Write at 16 in flight: completions came later, in bigger
// groups, and the pipeline drained.) Caller holds c.mu.
func (c *conn) fenceDue(to uint64) bool {
	if !c.fence || c.covered >= to || c.orqFull() {
		return false
	}
	return c.uncovered >= fenceBytes || c.sqSent == c.sqTail
}

// writeRound writes what gather took and accounts for it; false if the
// connection is to end.
func (c *conn) writeRound(r *txRound) bool {
	wrote, err := c.tx.writeBatch(r)
	return c.finishRound(r, wrote, err)
}

// finishRound accounts for a round whose entries before wrote were handed
// to TCP and whose writing ended with err; false if the connection is to
// end.
func (c *conn) finishRound(r *txRound, wrote uint64, err error) bool {
	c.tx.release()
	if wrote > r.from {
		c.markWritten(r.from, wrote)
	}
	if err == nil {
		return true
	}
	if errors.Is(err, errLocalProtection) {
		c.failLocalCheck(c.sqAt(wrote), wrote, verbs.StatusLocalProtection)
		return false
	}
	c.txFailed(err)
	return false
}

// markWritten records that the entries [from, to) were handed to TCP in
// full; without placement proof (CompleteOnTransmit) that completes them.
func (c *conn) markWritten(from, to uint64) {
	c.mu.Lock()
	// tx is done reading these entries (qp.go, the send queue's
	// ownership): their chunks may be recycled once retired.
	c.sqReleased = max(c.sqReleased, to)
	// A fast fence answer may have retired (and a new post reused) the
	// slots of entries before sqHead already.
	for s := max(from, c.sqHead); s < to; s++ {
		if e := c.sqAt(s); e.op != verbs.OpRDMARead {
			e.wrote = true
			e.done = e.done || !c.fence
		}
	}
	c.sqRecycle()
	c.mu.Unlock()
	switch {
	case c.fence:
	case c.tx.onLoop:
		c.complete(true)
	default:
		c.completeInline() // an inline round (txinline.go)
	}
}

// failLocalCheck ends the connection on send-queue entry seq, which
// failed a local check with status st.
func (c *conn) failLocalCheck(e *sqEntry, seq uint64, st verbs.Status) {
	c.mu.Lock()
	c.failSet, c.failSeq, c.failStat = true, seq, st
	op, id := e.op, e.id
	c.mu.Unlock()
	c.fail(&verbs.CompletionError{Op: op, Status: st, ID: id},
		&terminate{Layer: LayerRDMAP, EType: RDMAPLocalCatastrophic, Code: RDMAPUnspecified})
}

func (c *conn) txFailed(err error) {
	if errors.Is(err, errStopped) {
		return
	}
	c.fail(&streamError{op: "write", err: err}, nil)
}

// txExit sends a pending Terminate, flushes the send queue and half-closes
// the stream.
func (c *conn) txExit() {
	c.fail(nil, nil) // no-op unless the loop ended on its own
	c.mu.Lock()
	term := c.term
	orderly := c.err == nil && term == nil && c.rtrSeen
	c.mu.Unlock()
	t := &c.tx
	t.iov = t.iov[:0]
	t.nf, t.bytes, t.nrr = 0, 0, 0
	t.release()
	if orderly && !t.broken {
		t.answerReads()
	}
	if term != nil {
		n := term.put(t.term[:])
		if err := t.send(untagged(opTerminate, qnTerminate, 1), nil, t.term[:n], n); err == nil {
			t.flush()
		}
	}
	c.flushSQ()
	c.settleCQs() // what the last round completed (pushLater)
	c.tc.CloseWrite()
	close(c.txDone)
}

// answerReads sends, on an orderly disconnect, the Read Responses owed
// for the Read Requests received so far (the peer's zero-length fence
// Reads among them: like an InfiniBand ACK, they tell the peer its Sends
// and Writes were placed, which they were). Requests arriving meanwhile
// are left unanswered. Best effort: the write deadline fail set bounds it.
func (t *txState) answerReads() {
	c := t.c
	c.mu.Lock()
	end := c.irqTail
	c.mu.Unlock()
	t.draining = true
	defer func() { t.draining = false; t.release() }()
	for {
		for i := t.rnext; i < t.nresp; i++ {
			if t.queueReadResponse(&t.resp[i]) != nil {
				// Region gone (what is queued still goes) or stream
				// failed (broken: nothing more goes).
				if !t.broken {
					t.flush()
				}
				return
			}
		}
		clear(t.resp[:t.nresp])
		t.nresp, t.rnext = 0, 0
		c.mu.Lock()
		c.takeReadResponses(end)
		c.mu.Unlock()
		if t.nresp == 0 {
			break
		}
	}
	t.flush()
}

type streamError struct {
	op  string
	err error
}

func (e *streamError) Error() string {
	return "iwarp: TCP stream " + e.op + " failed: " + e.err.Error()
}

func (e *streamError) Unwrap() []error { return []error{verbs.ErrNotConnected, e.err} }
