package iwarp

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/rdmagw/rdmagw/verbs"
	"golang.org/x/sys/unix"
)

// conn is a queue pair on an established MPA connection. Two goroutines
// run it: tx (tx.go) owns writing to the socket, rx (rx.go) owns reading
// it, placing data and receive completions. PostSend only queues work for
// tx. Send-queue completions are delivered in posting order by whoever
// retires them, serialised by cqMu.

// sqEntry is a posted send work request.
type sqEntry struct {
	id         uint64
	op         verbs.Opcode
	signal     bool
	sgl        []verbs.SGE // aliases the slot's own array
	length     int
	remoteAddr uint64
	rkey       uint32
	invRKey    uint32
	localErr   verbs.Status // non-zero: failed its local checks at post time
	msn        uint32       // Send: QN 0 MSN; Read: QN 1 MSN
	sent       bool         // transmission started
	wrote      bool         // all of it was handed to TCP
	done       bool
}

// orqEntry is an RDMA Read we issued (ORD bounds how many): a user Read or
// a zero-length fence/RTR Read. When its response completes, every send
// queue entry up to cover is complete too.
type orqEntry struct {
	cover    uint64 // SQ sequence numbers < cover are proven done
	user     bool
	seq      uint64 // the user Read's SQ sequence number
	sinkSTag uint32
	sinkTO   uint64
	length   int
	got      int
	stale    int // bytes a peer sent for this zero-length Read (dropped; see rx.readResponse)
}

// irqEntry is a Read Request from the peer we still have to answer (IRD
// bounds how many).
type irqEntry struct {
	sinkSTag uint32
	sinkTO   uint64
	m        *mr
	stag     uint32 // m's STag when the request was checked (m may be reused since)
	off, n   int
}

const (
	stateLive = iota
	stateError
)

type conn struct {
	dev     *device
	pd      *pd
	tc      *net.TCPConn
	rc      syscall.RawConn // tc's, for the non-blocking inline writes
	scq     *cq
	rcq     *cq
	srq     *srq
	rq      *recvQueue
	private []byte
	neg     negotiated
	maxSGE  int
	self    verbs.Conn // what WC.Conn carries

	crc        bool
	maxULPDU   int
	fence      bool // Send/Write completion waits for placement proof
	completeTx bool
	txMode     TxMode // who writes (txinline.go)

	mu    sync.Mutex
	state int
	err   error
	// The send queue: sqDepth slots (ConnOptions.MaxSendWR), slot
	// seq % sqDepth in chunk sq[slot/sqChunkLen]. A chunk is attached to
	// its place when a request first lands in it and goes back to the
	// spare list sqSpare once every entry has left it (sqRecycle), so a
	// connection holds the chunks its requests in flight span plus a
	// spare or two, not the whole ring: the slot advances with every
	// work request, and keeping every chunk once made had each
	// connection that carried sqDepth requests hold all of them, about
	// 78 KB at rdmarpc's 560 slots (1,000 connections: 78 MB more heap,
	// RSS 251 MiB instead of 170 after 30 s, and one allocation per call
	// for the first 25 s).
	//
	// Ownership: entries of live sequence numbers [sqHead, sqTail) never
	// move, so a *sqEntry of one stays valid. tx reads the entries of
	// the round it writes, and the chunk pointers leading to them,
	// without c.mu (writeBatch), and an answer to a Read in that round
	// may retire them before tx is done with the round; so a chunk is
	// detached, and its entries reused elsewhere, only once its entries
	// are below both sqHead (retired) and sqReleased, which tx raises
	// under c.mu after each round (markWritten): that lock orders tx's
	// reads before the reuse. rx reads a user Read's SGE list without
	// c.mu while it places the response; the Read is live until then.
	// The queue flushes (flushSQ) only once tx is done.
	sq      []*sqChunk
	sqSpare *sqChunk // chunks detached from sq, linked by next
	// sqReleased: tx reads no entry < sqReleased without c.mu any more.
	// sqFreed: the chunks of entries < sqFreed were recycled (or, the
	// tail having wrapped into them again, kept); a chunk's first seq.
	sqReleased uint64
	sqFreed    uint64
	sqDepth    uint64
	sqHead     uint64 // oldest unretired
	sqSent     uint64 // next to transmit
	sqTail     uint64 // next free
	covered    uint64 // entries < covered have a Read issued after them
	// uncovered is the payload sent since the last Read that covers it:
	// past fenceBytes a fence goes out although the queue has not drained.
	uncovered int
	orq       []orqEntry
	orqHead   uint64
	orqTail   uint64
	irq       []irqEntry
	irqHead   uint64
	irqTail   uint64
	txMSN     [3]uint32
	failSeq   uint64 // the entry a received Terminate names (valid if failSet)
	failSet   bool
	failStat  verbs.Status
	term      *terminate // to send before closing
	termSent  bool
	rtrSeen   bool

	txBusy bool // a caller is transmitting inline (txinline.go)
	// rxConsuming: the rx goroutine is running the CQs' direct
	// consumers; a PostSend meanwhile leaves its work to rx (rxOwed),
	// which transmits it later (rxState.consume).
	rxConsuming, rxOwed bool
	// wcOwed: an inline round's completions (CompleteOnTransmit) found
	// cqMu or the send CQ's room taken; they wait in wcTmp (or in the
	// queue, retired by the next complete) for the tx goroutine.
	wcOwed atomic.Bool
	postN  uint64 // entries the PostSend now in startTx added (mayInline)
	// pipelined counts down the posts that still go to the tx goroutine
	// after one found the connection pipelined (txinline.go).
	pipelined uint8

	live   atomic.Bool
	txIdle atomic.Bool // tx is parked (or about to park) waiting for a kick
	txKick chan struct{}
	dying  chan struct{}
	txDone chan struct{}
	done   chan struct{}

	cqMu  sync.Mutex
	wcTmp []verbs.WC

	// bigReads counts the outstanding Reads of ours of rxBufLen or more
	// (rx reads their Responses straight: rxplan.go), for rx to ask
	// without c.mu; changed under c.mu.
	bigReads atomic.Int32

	tx txState
	rx rxState
}

// newConn starts the queue pair on an established stream. rq is its own
// receive queue (nil with an SRQ), already holding ConnOptions.InitialRecv.
func newConn(d *device, tc *net.TCPConn, o *verbs.ConnOptions, neg *negotiated, rq *recvQueue) (*conn, error) {
	c := &conn{dev: d, pd: o.PD.(*pd), tc: tc, scq: o.SendCQ.(*cq), rcq: o.RecvCQ.(*cq),
		private: neg.private, neg: *neg, maxSGE: o.MaxSGE, crc: neg.crc,
		txKick: make(chan struct{}, 1), dying: make(chan struct{}), txDone: make(chan struct{}), done: make(chan struct{})}
	c.self = c
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil, err
	}
	c.rc = rc
	if o.SRQ != nil {
		c.srq = o.SRQ.(*srq)
	} else {
		c.rq = rq
	}
	c.sqDepth = uint64(o.MaxSendWR)
	c.sq = make([]*sqChunk, (o.MaxSendWR+sqChunkLen-1)/sqChunkLen)
	c.orq = make([]orqEntry, max(neg.ord, 1))
	c.irq = make([]irqEntry, max(neg.ird, 1))
	// c.wcTmp grows with the largest batch of completions retired at
	// once (append), then is reused: steady state allocates nothing.
	c.txMSN = [3]uint32{1, 1, 1}
	c.completeTx = d.cfg.CompleteOnTransmit
	c.txMode = d.cfg.TxMode
	c.fence = !c.completeTx && neg.ord > 0
	c.maxULPDU = c.pickULPDU()
	tc.SetNoDelay(true)
	c.rtrSeen = !neg.awaitRTR
	c.live.Store(true)
	c.tx.init(c)
	c.rx.init(c)
	go c.txLoop()
	go c.rxLoop()
	return c, nil
}

// pickULPDU derives the largest ULPDU we send from Config.MaxFPDU or the
// TCP MSS (RFC 5044 section 5: MULPDU = EMSS - framing).
func (c *conn) pickULPDU() int {
	fpdu := c.dev.cfg.MaxFPDU
	if fpdu == 0 {
		fpdu = 65535
		if rc, err := c.tc.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) {
				if mss, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG); err == nil && mss > 0 {
					fpdu = mss
				}
			})
		}
	}
	fpdu = max(fpdu, minFPDU)
	n := fpdu - fpduLenField - fpduCRCLen - 3
	return min(n, 65535)
}

func (c *conn) PrivateData() []byte   { return c.private }
func (c *conn) LocalAddr() net.Addr   { return c.tc.LocalAddr() }
func (c *conn) RemoteAddr() net.Addr  { return c.tc.RemoteAddr() }
func (c *conn) Done() <-chan struct{} { return c.done }

// kick wakes tx if it is parked. tx parks only after finding nothing to
// do under c.mu, so work added under c.mu before kick is never missed; a
// busy tx sees it on its next round without a wake-up.
func (c *conn) kick() {
	if !c.txIdle.CompareAndSwap(true, false) {
		return
	}
	c.tx.kicks.Add(1)
	select {
	case c.txKick <- struct{}{}:
	default:
	}
}

// sqChunkLen is how many send queue slots a chunk holds.
const sqChunkLen = 16

// sqChunk is sqChunkLen send queue slots and their SGE arrays: sgl[i] is
// slot i's own, made when the slot first holds a request with that many
// SGEs (not MaxSendWR x MaxSGE up front) and reused, also when the chunk
// serves another place in the ring.
type sqChunk struct {
	e    [sqChunkLen]sqEntry
	sgl  [sqChunkLen][]verbs.SGE
	next *sqChunk // on the spare list
}

// sqAt is the entry of a live sequence number (sqHead <= seq < sqTail).
func (c *conn) sqAt(seq uint64) *sqEntry {
	i := seq % c.sqDepth
	return &c.sq[i/sqChunkLen].e[i%sqChunkLen]
}

// sqSlot makes seq's slot ready for a request of nsge SGEs and returns
// it with its SGE storage: its chunk is attached from the spare list, or
// made, if the slot has none. Caller holds c.mu.
func (c *conn) sqSlot(seq uint64, nsge int) (*sqEntry, []verbs.SGE) {
	i := seq % c.sqDepth
	ch := c.sq[i/sqChunkLen]
	if ch == nil {
		if ch = c.sqSpare; ch != nil {
			c.sqSpare, ch.next = ch.next, nil
		} else {
			ch = new(sqChunk)
		}
		c.sq[i/sqChunkLen] = ch
	}
	j := i % sqChunkLen
	if cap(ch.sgl[j]) < nsge {
		ch.sgl[j] = make([]verbs.SGE, nsge)
	}
	return &ch.e[j], ch.sgl[j][:nsge]
}

// sqRecycle moves to the spare list the chunks every entry has left:
// below sqHead and sqReleased, and not reached again by a tail that
// wrapped around the ring (a chunk it has reached stays where it is, in
// use). Caller holds c.mu.
func (c *conn) sqRecycle() {
	lim := min(c.sqHead, c.sqReleased)
	for {
		i := c.sqFreed % c.sqDepth // the first slot of its chunk
		end := c.sqFreed + min(sqChunkLen, c.sqDepth-i)
		if end > lim {
			return
		}
		if c.sqTail <= c.sqFreed+c.sqDepth {
			k := i / sqChunkLen
			ch := c.sq[k]
			c.sq[k] = nil
			ch.next = c.sqSpare
			c.sqSpare = ch
		}
		c.sqFreed = end
	}
}

func (c *conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *conn) PostRecv(wr *verbs.RecvWR) error {
	if c.rq == nil {
		return verbs.ErrSRQ
	}
	if !c.live.Load() {
		return verbs.ErrNotConnected
	}
	return c.rq.post(c.pd, wr)
}

func (c *conn) PostSend(wr *verbs.SendWR) error {
	k := 0
	for w := wr; w != nil; w = w.Next {
		if len(w.SGL) > c.maxSGE {
			return &sgeCountError{n: len(w.SGL), max: c.maxSGE}
		}
		switch w.Op {
		case verbs.OpSend, verbs.OpSendInv, verbs.OpRDMAWrite, verbs.OpRDMARead:
		default:
			return errors.New("iwarp: PostSend with opcode " + w.Op.String())
		}
		k++
	}
	c.mu.Lock()
	if c.state != stateLive {
		c.mu.Unlock()
		return verbs.ErrNotConnected
	}
	if c.sqTail-c.sqHead+uint64(k) > c.sqDepth {
		c.mu.Unlock()
		return verbs.ErrQueueFull
	}
	for w := wr; w != nil; w = w.Next {
		seq := c.sqTail
		e, sgl := c.sqSlot(seq, len(w.SGL))
		*e = sqEntry{id: w.ID, op: w.Op, signal: w.Signal, sgl: sgl,
			remoteAddr: w.RemoteAddr, rkey: w.RKey, invRKey: w.InvalidateRKey}
		copy(e.sgl, w.SGL)
		for j := range e.sgl {
			e.length += len(e.sgl[j].Buf)
			if !c.pd.checkSGE(&e.sgl[j], w.Op == verbs.OpRDMARead) {
				e.localErr = verbs.StatusLocalProtection
			}
		}
		if w.Op == verbs.OpRDMARead && c.neg.ord == 0 && e.localErr == 0 {
			e.localErr = verbs.StatusGeneral // the peer granted no RDMA Read resources
		}
		if uint64(e.length) > 1<<32-1 {
			e.localErr = verbs.StatusLocalLength
		}
		c.sqTail++
	}
	c.postN = uint64(k)
	c.startTx(true)
	return nil
}

// Disconnect ends the connection: outstanding work requests flush, Done
// closes, Err stays nil.
func (c *conn) Disconnect() error {
	c.fail(nil, nil)
	return nil
}

func (c *conn) Close() error {
	c.Disconnect()
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		c.tc.Close()
		<-c.done
	}
	return nil
}

// fail moves the QP to the error state once: err is what Err reports, t a
// Terminate to send first (nil for none).
func (c *conn) fail(err error, t *terminate) {
	c.mu.Lock()
	if c.state != stateLive {
		c.mu.Unlock()
		return
	}
	c.state = stateError
	c.err = err
	c.term = t
	c.live.Store(false)
	c.mu.Unlock()
	close(c.dying)
	// A tx goroutine stuck writing to a peer that stopped reading gets
	// two seconds to finish its FPDU and the Terminate.
	now := time.Now()
	c.tc.SetWriteDeadline(now.Add(2 * time.Second))
	c.tc.SetReadDeadline(now.Add(3 * time.Second))
	c.kick()
}

// failTerminate sends a Terminate for a violation by the peer.
func (c *conn) failTerminate(t *terminate, reason string) {
	te := &TerminateError{Sent: true, Layer: t.Layer, EType: t.EType, Code: t.Code, Reason: reason}
	c.fail(te, t)
}

// markCovered records that Read completion proved all entries < cover done
// and retires what it can. Caller holds c.mu.
func (c *conn) markCoveredLocked(cover uint64) {
	for s := c.sqHead; s < cover && s < c.sqTail; s++ {
		c.sqAt(s).done = true
	}
}

// retireLocked moves done entries from the head into c.wcTmp. Caller
// holds c.mu and c.cqMu.
func (c *conn) retireLocked() {
	for c.sqHead < c.sqTail {
		e := c.sqAt(c.sqHead)
		if !e.done {
			break
		}
		if e.signal {
			c.wcTmp = append(c.wcTmp, verbs.WC{ID: e.id, Op: e.op, Status: verbs.StatusSuccess, ByteLen: e.length, Conn: c.self})
		}
		clear(e.sgl)
		c.sqHead++
	}
	c.sqRecycle()
}

// deliver pushes c.wcTmp to the send CQ (later: with cq.pushLater, the
// caller settles). Caller holds c.cqMu, not c.mu.
func (c *conn) deliver(later bool) {
	if len(c.wcTmp) > 0 {
		if later {
			c.scq.pushLater(c.wcTmp)
		} else {
			c.scq.push(c.wcTmp)
		}
		clear(c.wcTmp)
		c.wcTmp = c.wcTmp[:0]
	}
}

// complete retires and delivers whatever is done. later says the caller
// is the rx or tx goroutine, which calls settleCQs at its next safe point
// (cq.pushLater: the direct consumer then runs there, with no wake-up).
func (c *conn) complete(later bool) {
	c.cqMu.Lock()
	c.mu.Lock()
	c.retireLocked()
	c.mu.Unlock()
	c.deliver(later)
	c.cqMu.Unlock()
}

// completeInline completes, for a caller that wrote a round inline and
// must not wait (PostSend; rx), the entries it handed to TCP without
// placement proof (CompleteOnTransmit), in posting order on the send CQ
// like complete. If cqMu is held (rx or tx completing, perhaps waiting
// for room) or the CQ has no room, it leaves them to the tx goroutine
// (wcOwed; startTx kicks it): whatever is retired stays in c.wcTmp, ahead
// of anything retired later. Caller holds no lock.
func (c *conn) completeInline() {
	if !c.cqMu.TryLock() {
		c.wcOwed.Store(true)
		return
	}
	c.mu.Lock()
	c.retireLocked()
	c.mu.Unlock()
	if len(c.wcTmp) > 0 {
		if c.scq.tryPush(c.wcTmp) {
			clear(c.wcTmp)
			c.wcTmp = c.wcTmp[:0]
		} else {
			c.wcOwed.Store(true)
		}
	}
	c.cqMu.Unlock()
}

// settleCQs settles what the calling rx or tx goroutine pushed with
// pushLater (cq.settle): at a safe point, holding no lock.
func (c *conn) settleCQs() {
	c.rcq.settle()
	c.scq.settle()
}

// flushSQ completes every unretired entry after the QP left RTS: the one
// a Terminate named gets its error; Sends and Writes handed to TCP before
// it (or all of them, when no Terminate named one) succeed, because the
// peer processes the stream in order and would have answered a violation
// with a Terminate; everything else (unsent entries, Reads without their
// response) flushes.
func (c *conn) flushSQ() {
	c.cqMu.Lock()
	c.mu.Lock()
	c.retireLocked()
	// Completions stay in order: once one entry fails or flushes, every
	// later one flushes, even a Write a fence already proved (it may
	// follow a Read whose response never came).
	failed := false
	for ; c.sqHead < c.sqTail; c.sqHead++ {
		s := c.sqHead
		e := c.sqAt(s)
		st := verbs.StatusFlushed
		switch {
		case failed:
		case e.done:
			st = verbs.StatusSuccess
		case c.failSet && s == c.failSeq:
			st = c.failStat
		case e.wrote && e.op != verbs.OpRDMARead && (!c.failSet || s < c.failSeq):
			st = verbs.StatusSuccess
		}
		failed = failed || st != verbs.StatusSuccess
		if st != verbs.StatusSuccess || e.signal {
			n := e.length
			if st != verbs.StatusSuccess {
				n = 0
			}
			c.wcTmp = append(c.wcTmp, verbs.WC{ID: e.id, Op: e.op, Status: st, ByteLen: n, Conn: c.self})
		}
		clear(e.sgl)
	}
	c.mu.Unlock()
	c.deliver(false)
	c.cqMu.Unlock()
}

// sgeAddr is the virtual address of an SGE's first byte.
func sgeAddr(s *verbs.SGE) uint64 {
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(s.Buf))))
}
