package iwarp

import (
	"errors"

	"github.com/rdmagw/rdmagw/verbs"
)

// Transmitting inline (run to completion). Whoever queues work for tx
// (PostSend; rx queueing a Read Response or freeing an ORQ slot) calls
// startTx. If mayInline allows it (Config.TxMode; by default
// TxIdleInline: the connection is idle and not pipelined, the round
// small) the caller takes the transmit side
// itself, gathers and writes the round with a non-blocking writev, and
// lets go: no wake-up, no goroutine hand-off, the bytes leave on the
// caller's own time slice. Otherwise it kicks the tx goroutine. What the
// socket does not take at once, the goroutine finishes (it is kicked and
// picks the round up from txState.pending), so a caller never waits for
// the peer: PostSend and rx stay non-blocking. With CompleteOnTransmit
// the caller also completes the Sends and Writes its round handed to TCP
// in full (markWritten, conn.completeInline), in order on the send CQ,
// without waiting: if the CQ lock or room is not free at once they are
// left to the goroutine (conn.wcOwed), which startTx kicks.
//
// Ownership of txState and of the socket's write side: the tx goroutine
// while it runs; otherwise the caller that set c.txBusy (under c.mu, only
// while c.txIdle says the goroutine is parked). The goroutine does not
// run a round while txBusy is set; the holder looks for work again under
// c.mu when it lets go and kicks the goroutine if some is left (or the
// connection is ending), so nothing queued meanwhile is missed.

// maxInlineRounds bounds the rounds one caller transmits before it leaves
// the rest to the goroutine.
const maxInlineRounds = 4

// idleInlineBytes bounds a round written inline with TxIdleInline: a
// small message (an RPC, a 4 KiB page, Read Responses for them) goes out
// in one non-blocking writev, while the caller computing CRCs over and
// writing a bulk transfer would only delay its own work (rx: reading).
const idleInlineBytes = 64 << 10

var (
	errInlineFull    = errors.New("iwarp: inline round does not fit one batch")
	errInlinePartial = errors.New("iwarp: socket took part of an inline batch")
)

// pendingPhase says what the goroutine must finish of an inline round.
type pendingPhase uint8

const (
	pendingNone  pendingPhase = iota
	pendingBuild              // nothing written: redo the round
	pendingFlush              // built and partly written: write the rest
)

// startTx gets the work the caller just queued transmitted: by the tx
// goroutine, or inline (mayInline). Caller holds c.mu; startTx releases
// it. post says the caller is PostSend (else it is rx, answering Read
// Requests or freeing an ORQ slot).
func (c *conn) startTx(post bool) { c.transmit(post, false) }

// transmit is startTx; owed says the caller is rx transmitting a direct
// consumer's posts before it waits (rxState.consume): inline whenever
// the tx goroutine is parked (mayInline).
func (c *conn) transmit(post, owed bool) {
	if !owed && (post && c.rxConsuming || !post && c.rxOwed) {
		// rx transmits it with the direct consumer's posts
		// (rxState.consume), its own work (!post) included.
		c.rxOwed = true
		c.mu.Unlock()
		return
	}
	if c.txBusy {
		c.mu.Unlock() // the holder looks for work before it lets go
		return
	}
	if c.state == stateLive && c.tx.pending == pendingNone && !c.txWork() {
		// Nothing to send (rx took a fence's answer that freed no
		// waiting Read): waking the goroutine would only park it again.
		c.mu.Unlock()
		return
	}
	if !c.mayInline(post, owed) {
		c.mu.Unlock()
		c.kick()
		return
	}
	c.txBusy = true
	rounds := maxInlineRounds
	if c.txMode == TxIdleInline {
		rounds = 1 // more work meanwhile: the goroutine batches it
	}
	c.transmitInline(rounds)
	c.txBusy = false
	more := c.state != stateLive || c.tx.pending != pendingNone || c.txWork() || c.wcOwed.Load()
	c.mu.Unlock()
	if more {
		c.kick()
	}
}

// pipelineMemory is how many posts go to the tx goroutine after one found
// the connection pipelined, before PostSend writes inline again.
const pipelineMemory = 8

// mayInline reports whether the caller of startTx writes the queued work
// itself. Never while the tx goroutine runs (a batch in progress gathers
// it) or has an inline round to finish.
//
// With TxIdleInline (the default; the way Linux siw writes from the
// posting context when its send queue is idle) only while the connection
// is idle and not pipelined: a PostSend that finds a Read or fence
// awaiting its answer, or the goroutine running with work posted before
// it still unsent, marks the connection pipelined for the next
// pipelineMemory posts, and meanwhile everything goes to the goroutine,
// which, woken once, gathers all that was posted in the meantime into one
// writev behind one fence (and the peer reads it in as few calls). The
// goroutine running with only Read Responses (rx's answer to a fence)
// marks nothing: the post joins its round, and one call at a time stays
// inline. One call at a time (each PostSend finding the connection
// quiescent) then costs no goroutine wake-up on either side, while
// several in flight keep their batching. Without fences
// (CompleteOnTransmit) no Read awaits an answer, so a post that finds
// completions on the send CQ its consumer has not polled yet marks the
// connection pipelined instead (the consumer is behind: several in
// flight). rx writes only its Read
// Responses, when the send queue holds nothing unsent: work posted by
// others is the goroutine's, so rx goes back to reading instead of
// carrying the engine's batches; except (owed) what a direct consumer
// posted while rx ran it, which rx writes whenever the goroutine is
// parked, before it waits (rxState.consume).
//
// With TxGreedy PostSend writes inline whenever the connection is
// quiescent and rx whenever the goroutine is parked. Caller holds c.mu.
func (c *conn) mayInline(post, owed bool) bool {
	if c.txMode == TxGoroutine || c.state != stateLive || !c.rtrSeen || c.tx.pending != pendingNone {
		return false
	}
	idle, quiescent := c.txIdle.Load(), c.orqHead == c.orqTail
	if owed {
		return idle // a direct consumer's posts, rx about to wait (rxState.consume)
	}
	if c.txMode == TxGreedy {
		return idle && (quiescent || !post)
	}
	if post && (!quiescent || !idle && c.sqSent+c.postN < c.sqTail || !c.fence && c.scq.unpolled()) {
		c.pipelined = pipelineMemory
		return false
	}
	if c.pipelined > 0 {
		if post {
			c.pipelined--
		}
		return false
	}
	return idle && (post || c.sqSent == c.sqTail)
}

// txWork reports whether tx has something it can send now. Caller holds
// c.mu.
func (c *conn) txWork() bool {
	if c.irqHead < c.irqTail {
		return true
	}
	if c.sqSent < c.sqTail && (c.sqAt(c.sqSent).op != verbs.OpRDMARead || !c.orqFull()) {
		return true
	}
	return c.fenceDue(c.sqSent)
}

// transmitInline runs rounds for startTx. Caller holds c.mu (released
// while writing).
func (c *conn) transmitInline(rounds int) {
	for range rounds {
		r, bad := c.gather()
		if bad != nil || r.empty(&c.tx) {
			return // a bad entry is the goroutine's to fail
		}
		if !c.fitsInline(&r) {
			c.tx.handoffs.Add(1)
			c.tx.pending, c.tx.pendingRound = pendingBuild, r
			return
		}
		c.mu.Unlock()
		ok := c.writeInline(&r)
		c.mu.Lock()
		if !ok {
			return
		}
	}
}

// fitsInline reports whether round r is one batch's worth: an inline
// round writes once, at its end, so a larger one goes to the goroutine
// before anything (a CRC) is computed for it. Caller holds c.mu.
func (c *conn) fitsInline(r *txRound) bool {
	t := &c.tx
	maxPay := c.maxULPDU - ddpUntaggedLen
	fpdus, bytes := 1, fpduSize(ddpUntaggedLen+readReqLen) // the fence
	for i := range t.resp[:t.nresp] {
		fpdus += t.resp[i].n/maxPay + 1
		bytes += t.resp[i].n + ddpUntaggedLen + 8
	}
	for seq := r.from; seq < r.to; seq++ {
		n := c.sqAt(seq).length
		if c.sqAt(seq).op == verbs.OpRDMARead {
			n = readReqLen
		}
		fpdus += n/maxPay + 1
		bytes += n + ddpUntaggedLen + 8
	}
	limit := batchBytes
	if c.txMode == TxIdleInline {
		limit = idleInlineBytes
	}
	return fpdus <= batchFPDUs && bytes < limit
}

// writeInline writes one round without waiting for the socket: true if
// it went out whole. Otherwise the round is left in t.pending for the
// goroutine (or the connection failed).
func (c *conn) writeInline(r *txRound) bool {
	t := &c.tx
	t.inlineRounds.Add(1)
	t.inline = true
	wrote, err := t.writeBatch(r)
	t.inline = false
	switch {
	case err == nil:
		return c.finishRound(r, wrote, nil)
	case t.broken:
		c.finishRound(r, wrote, err)
		return false
	case errors.Is(err, errInlinePartial):
		t.handoffs.Add(1)
		t.pending, t.pendingRound = pendingFlush, *r
	default:
		// Nothing was written: the goroutine does the round again, with
		// the flushes (or the local error) it needs.
		t.abort()
		t.handoffs.Add(1)
		t.pending, t.pendingRound = pendingBuild, *r
	}
	return false
}

// finishPending completes what an inline round left: true if the loop
// goes on. Caller holds c.mu; finishPending releases it.
func (c *conn) finishPending() bool {
	t := &c.tx
	p, r := t.pending, t.pendingRound
	t.pending = pendingNone
	live := c.state == stateLive
	c.mu.Unlock()
	switch {
	case p == pendingFlush:
		// The stream is inside the batch: finish it even when ending.
		wrote, err := r.handed(t.flush())
		return c.finishRound(&r, wrote, err)
	case live:
		return c.writeRound(&r)
	}
	return true // ending: the Read Responses stay in t.resp for answerReads
}

// abort forgets a batch nothing of which was written.
func (t *txState) abort() {
	clear(t.iov)
	t.iov = t.iov[:0]
	t.nf, t.bytes, t.nrr, t.rnext = 0, 0, 0, 0
	t.release()
}

// flushNow writes as much of the batch as the socket takes without
// waiting: nil if all of it, errInlinePartial if some is left (the batch
// then holds the rest).
func (t *txState) flushNow() error {
	for len(t.iov) > 0 {
		n, tried, err := t.raw.Writev(t.c.rc, t.iov)
		if err != nil {
			t.broken = true
			return err
		}
		t.consume(n)
		if n < tried {
			return errInlinePartial
		}
	}
	t.nf, t.bytes, t.nrr = 0, 0, 0
	return nil
}

// consume drops n written bytes from the front of the batch, moving what
// is left to the front of its storage (flush then writes it as usual).
func (t *txState) consume(n int) {
	k := 0
	for k < len(t.iov) && n >= len(t.iov[k]) {
		n -= len(t.iov[k])
		k++
	}
	if k < len(t.iov) {
		t.iov[k] = t.iov[k][n:]
	}
	m := copy(t.iov, t.iov[k:])
	clear(t.iov[m:])
	t.iov = t.iov[:m]
}
