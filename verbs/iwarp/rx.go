package iwarp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rdmagw/rdmagw/internal/sockread"
	"github.com/rdmagw/rdmagw/verbs"
)

// The receive side: one goroutine per connection reads the stream through
// a receive buffer, several FPDUs per system call, inside one
// internal/sockread run for as long as the connection lives (Next and
// Got below). The run is a resumable state machine over the stream,
// with no other place that reads or waits:
//
//	rxHeader   the MPA length and the DDP/RDMAP header, parsed and
//	           checked where they lie in the buffer; the opcode's begin
//	           step checks the segment against its target and sets the
//	           payload's destination
//	rxPayload  the payload, copied from the buffer into its destination
//	           (the registered region an STag names, the SGL of a posted
//	           receive or of an RDMA Read, a control buffer, or nowhere)
//	           with the CRC run over the placed bytes; a destination of
//	           rxBufLen or more that the buffer has nothing for is read
//	           straight from the socket (once begun, to its end), the
//	           buffer behind it in the same readv (the trailer and the
//	           next FPDUs land there); a large Read's Response segments
//	           are all read straight, the ones that follow laid out
//	           behind the current one in the same readv (rxplan.go)
//	rxTrailer  pad and CRC, checked; the opcode's end step completes
//	           what the FPDU finished (a receive, a Read, a queued Read
//	           Request)
//
// Every step runs on the bytes already read, and the run waits only when
// the current step needs more: so the stream can stop anywhere (inside a
// header, a payload, a trailer) and resume there, which is what an event
// loop needs of it. Any violation is answered with a Terminate naming the
// offending segment. A read that leaves the socket empty (TCP_INQ 0) is
// followed by a wait, not by the read that would return EAGAIN
// (sockread): one system call fewer per message received alone, -12%
// time per op for a 4 KiB RDMA Read or Write (BenchmarkRead4K,
// BenchmarkWrite4K at one proc). The one thing no read's answer tells, a
// reset right behind the last data, raises no edge to wake the wait, and
// a client connection may have nothing more to write that would fail on
// it; so every wait ends after rxResetCheck, and the run looks with a
// read (rxLoop).
//
// Ownership: rxState belongs to the receive goroutine. A region it places
// into is held (m.use read-locked) from the start of that SGE's bytes to
// their end, across waits, so a Deregister waits for the placement or
// makes it fail; rxExit lets go of one a failed run still held.

// The receive buffer starts at rxBufLen and grows to rxBulkLen when the
// stream shows bulk traffic (a payload of rxBufLen or more, or a read that
// filled the buffer up to an FPDU boundary: space). Bulk reads then take
// what the socket holds, several 64 KiB FPDUs per system call, instead of
// stopping at each payload's end: every read the receiver makes sends the
// peer a window update, whose processing transmits the peer's queued data
// in the receiver's system call, so fewer, larger reads cost the pair less
// kernel time per byte (BenchmarkRead1MNoCRC and Write1MNoCRC: 35 reads
// per MiB became 10, CPU per op -10%) than the one copy out of the buffer
// they add. A large RDMA Read's Response keeps the few reads without the
// copy: rxplan.go lays several of its segments out in one readv, each
// payload in its place. A connection that only carries small messages
// keeps the small buffer. The bulk buffer goes back (to rxBulkPool, for
// the next connection that grows) after rxShrinkAfter reads in a row
// brought less than rxBufLen each: a gateway whose 1,000 clients each once
// did a 1 MiB I/O does not keep 128 MiB of receive buffers.
const (
	rxBufLen      = 16 << 10
	rxBulkLen     = 128 << 10
	rxShrinkAfter = 64
)

var rxBulkPool = sync.Pool{New: func() any { return new([rxBulkLen]byte) }}

// rxResetCheck bounds how long a reset right behind the peer's last data
// goes unseen on a connection that writes nothing after it: the longest
// a receive run waits before it reads the socket anyway (one read and a
// timer reset a second per connection; a variable for tests).
var rxResetCheck = time.Second

var errStop = errors.New("iwarp: receive stopped")

// rxPhase is where the receive state machine is within the current FPDU.
type rxPhase uint8

const (
	rxHeader  rxPhase = iota // the MPA length and DDP header are next
	rxPayload                // placing the payload into x.seg and on
	rxTrailer                // pad and CRC are next
)

type rxState struct {
	c     *conn
	buf   []byte // small, or bulk (grow) until shrink
	small []byte // the rxBufLen buffer, kept while bulk is in use
	big   *[rxBulkLen]byte
	// smallReads counts the reads in a row that brought less than
	// rxBufLen (shrink).
	smallReads int
	r, w       int
	ctl        [termMaxLen + 64]byte
	junk       []byte    // scratch for payload that is dropped (allocated on first use)
	msn        [3]uint32 // next expected MSN per queue
	cur        recvEntry // receive the current Send is placed into
	curOn      bool
	rtr        bool
	// wantTx: this goroutine queued Read Responses; startTx hands them
	// over before it next waits.
	wantTx bool
	// owedReads counts the reads a direct consumer's posts have waited
	// (consume).
	owedReads int

	// The current FPDU.
	phase rxPhase
	h     ddpHeader
	op    rdmapOpcode
	ulen  int // its ULPDU length (DDP header and payload)
	plen  int // its payload length
	crc   uint32
	// Where its payload goes: seg, the rest of the current destination
	// (held, its region while bytes go into it); then the SGL sgl from
	// SGE sgi at offset off; left is what is still to be placed, and
	// discard says it goes nowhere (junk).
	seg     []byte
	held    *mr
	sgl     []verbs.SGE
	sgi     int
	off     int
	left    int
	discard bool
	// segBuf is the SGE buffer nextSeg took seg from, segEnd where seg
	// ends in it (planScatter lays out what follows from there).
	segBuf []byte
	segEnd int
	plan   rxPlan
	// bigSegs: the peer's last non-final Read Response segment was
	// planMinSeg or more (noteReadSeg).
	bigSegs bool
	// straight: seg is read from the socket straight into it, the buffer
	// behind it, once begun to its end (also the last part under
	// rxBufLen). While it is set the buffer is drained, so every read
	// goes there: Got tells a straight read by it.
	straight bool
	// The opcode's state from begin to end.
	o      *orqEntry // Read Response: the Read it answers
	drop   bool      // Read Response: stale data for a zero-length Read
	msgEnd int       // Send: the message's length once this segment is placed

	// pump runs the state machine inside one RawConn.Read (sockread,
	// skipping the EAGAIN read: see rxLoop); pumpErr is what ended it.
	pump    sockread.Reader
	pumpErr error
	// staleCRC counts FPDUs of stale data for our zero-length Reads whose
	// CRC did not match (dropped all the same; see readResponse).
	staleCRC atomic.Uint64
	bulk     atomic.Bool // the buffer is the bulk one (for tests: buf is rx's own)
}

func (x *rxState) init(c *conn) {
	x.c = c
	x.small = make([]byte, rxBufLen)
	x.buf = x.small
	x.msn = [3]uint32{1, 1, 1}
	x.cur.sgl = make([]verbs.SGE, 0, c.maxSGE+defaultMaxSGE)
	x.rtr = !c.neg.awaitRTR
	x.pump.Init(c.rc, x, true) // rxLoop bounds the reset case
}

// grow gives the buffer its bulk size. Called only with the buffer
// drained.
func (x *rxState) grow() {
	x.smallReads = 0
	if x.big == nil {
		x.big = rxBulkPool.Get().(*[rxBulkLen]byte)
		x.buf = x.big[:]
		x.bulk.Store(true)
	}
}

// shrink gives the bulk buffer back once the stream went back to small
// messages. Called only with the buffer drained.
func (x *rxState) shrink() {
	if x.big != nil && x.smallReads >= rxShrinkAfter {
		rxBulkPool.Put(x.big)
		x.big, x.buf = nil, x.small
		x.bulk.Store(false)
	}
}

func (c *conn) rxLoop() {
	x := &c.rx
	for c.live.Load() {
		x.pumpErr = nil
		// A wait ended by rxResetCheck's deadline, not fail's (which
		// ends live first), is run again, and that run's first read
		// sees a reset no edge announced.
		err := x.pump.RunChecked(rxResetCheck, func(t time.Time) bool { c.tc.SetReadDeadline(t); return true }, c.live.Load)
		if err == nil {
			err = x.pumpErr
		}
		if err != nil {
			if !errors.Is(err, errStop) {
				c.fail(&streamError{op: "read", err: err}, nil)
			}
			break
		}
	}
	c.rxExit()
}

// Next is the receive run's sockread.Consumer: it carries the state
// machine as far as the buffered bytes go and returns where the next
// read goes (the buffer; or the payload's destination with the buffer
// behind it), or nil to end the run (not live, an error in pumpErr).
func (x *rxState) Next() (p, tail []byte) {
	for x.c.live.Load() {
		var err error
		avail := x.w - x.r
		switch x.phase {
		case rxHeader:
			if avail < fpduLenField+ddpTaggedLen {
				return x.headerSpace(), nil
			}
			var more bool
			if more, err = x.header(); err == nil && more {
				return x.space(x.nextFPDULen()), nil
			}
		case rxPayload:
			if x.left == 0 {
				x.phase = rxTrailer
				continue
			}
			if len(x.seg) == 0 {
				if err = x.nextSeg(); err != nil {
					break
				}
			}
			if x.plan.pendN > 0 && avail == 0 {
				x.takePending()
				continue
			}
			if avail > 0 {
				n := copy(x.seg, x.buf[x.r:x.w])
				x.r += n
				x.placed(n)
				continue
			}
			if len(x.seg) >= rxBufLen || x.straight || x.bigRead() {
				// Straight into the destination: the buffer is drained.
				x.grow()
				x.r, x.w = 0, 0
				x.startTx(true)
				x.straight = true
				if x.planScatter() {
					return x.seg, nil
				}
				return x.seg, x.buf[:x.straightTail()]
			}
			return x.space(0), nil
		case rxTrailer:
			if avail < fpduPad(x.ulen)+fpduCRCLen {
				return x.trailerSpace(), nil
			}
			if err = x.trailer(); err == nil {
				err = x.end()
				x.phase = rxHeader
			}
		}
		if err != nil {
			x.pumpErr = err
			return nil, nil
		}
	}
	return nil, nil
}

// space returns the free part of the buffer to read into, with room for
// want more bytes behind the unprocessed ones when the buffer can hold
// them (the rest of a small FPDU arrives in one read): a drained buffer
// starts over (growing if the last read filled it, shrinking after a
// run of small reads), a part at its end moves to its start. It hands tx
// the queued Read Responses first: the run waits after it.
func (x *rxState) space(want int) []byte {
	if x.r == x.w {
		if x.w == len(x.buf) && x.phase == rxHeader {
			// The last read filled it, ending on an FPDU boundary.
			// Not inside an FPDU: with small messages in flight
			// (write-4k at 8) most reads fill the small buffer and
			// end inside one, and growing there cost 0.8 context
			// switches and 25% more CPU per op.
			x.grow()
		}
		x.shrink()
		x.r, x.w = 0, 0
	} else if x.r+min(want, len(x.buf)) > len(x.buf) {
		x.w = copy(x.buf, x.buf[x.r:x.w])
		x.r = 0
	}
	x.startTx(true)
	return x.buf[x.w:]
}

// Got is the receive run's sockread.Consumer: n bytes arrived, into the
// payload's destination first when Next returned it.
func (x *rxState) Got(n int, err error) bool {
	if err != nil {
		if errors.Is(err, io.EOF) && x.phase == rxHeader && x.w-x.r < fpduLenField+ddpTaggedLen {
			err = fmt.Errorf("peer closed the connection: %w", err)
		}
		x.pumpErr = err
		return false
	}
	if x.straight {
		k := min(n, len(x.seg))
		x.placed(k)
		x.smallReads = 0
		if x.plan.armed {
			x.planGot(n - k)
			return true
		}
		x.w = n - k
		return true
	}
	x.w += n
	if n < rxBufLen {
		x.smallReads++
	} else {
		x.smallReads = 0
	}
	return true
}

// nextFPDULen is how many bytes the next FPDU takes in the stream: its
// MPA length, DDP header, payload, pad and CRC, and at least the part of
// the header header() reads first.
func (x *rxState) nextFPDULen() int {
	need := fpduLenField + ddpTaggedLen
	if x.w-x.r >= fpduLenField {
		ulen := int(binary.BigEndian.Uint16(x.buf[x.r:]))
		need = max(need, fpduSize(ulen))
	}
	return need
}

// header parses and checks the FPDU header at the buffer's read position
// (at least fpduLenField+ddpTaggedLen bytes are there) and begins the
// opcode: more says an untagged header's last bytes are still to come.
func (x *rxState) header() (more bool, err error) {
	b := x.buf[x.r:x.w]
	x.ulen = int(binary.BigEndian.Uint16(b))
	hl := ddpHeaderLen(b[fpduLenField])
	if x.ulen < hl {
		x.c.failTerminate(&terminate{Layer: LayerLLP, Code: MPAFPDUStart},
			fmt.Sprintf("ULPDU_Length %d is shorter than the %d-byte DDP header", x.ulen, hl))
		return false, errStop
	}
	if len(b) < fpduLenField+hl {
		return true, nil
	}
	x.r += fpduLenField + hl
	x.h.parse(b[fpduLenField : fpduLenField+hl])
	x.crc = 0
	if x.c.crc {
		x.crc = crcUpdate(0, b[:fpduLenField+hl])
	}
	x.plen = x.ulen - hl
	if x.op, err = x.checkHeader(); err != nil {
		return false, err
	}
	x.phase = rxPayload
	x.seg, x.held, x.sgl, x.left, x.discard = nil, nil, nil, 0, false
	return false, x.begin()
}

// begin checks the segment against what it targets and says where its
// payload goes (x.seg, or x.sgl from x.off; x.left bytes).
func (x *rxState) begin() error {
	switch x.op {
	case opWrite:
		return x.beginWrite()
	case opReadResp:
		return x.beginReadResponse()
	case opReadReq:
		return x.beginReadRequest()
	case opTerminate:
		if x.plen > len(x.ctl) {
			return x.terminate(LayerDDP, DDPUntaggedBuffer, DDPUntaggedTooLong, nil, fmt.Sprintf("%d-byte Terminate", x.plen))
		}
		x.seg, x.left = x.ctl[:x.plen], x.plen
		return nil
	default:
		return x.beginSend()
	}
}

// end finishes the FPDU whose trailer checked: the opcode's completion.
func (x *rxState) end() error {
	var err error
	switch x.op {
	case opWrite:
	case opReadResp:
		err = x.endReadResponse()
	case opReadReq:
		err = x.endReadRequest()
	case opTerminate:
		err = x.terminateReceived()
	default:
		err = x.endSend()
	}
	if err == nil && !x.rtr {
		x.rtrReceived()
	}
	return err
}

// nextSeg sets seg to the next destination of the payload: the SGE the
// offset is in (its region held while bytes go into it), or scratch when
// the payload is dropped.
func (x *rxState) nextSeg() error {
	if x.discard {
		if x.junk == nil {
			x.junk = make([]byte, 4096)
		}
		x.seg = x.junk[:min(x.left, len(x.junk))]
		return nil
	}
	for ; x.sgi < len(x.sgl); x.sgi++ {
		b := x.sgl[x.sgi].Buf
		if x.off >= len(b) {
			x.off -= len(b)
			continue
		}
		m := x.c.dev.acquire(x.sgl[x.sgi].LKey)
		if m == nil {
			return x.lostRegion()
		}
		x.held = m
		x.seg = b[x.off : x.off+min(len(b)-x.off, x.left)]
		x.segBuf, x.segEnd = b, x.off+len(x.seg)
		x.off = 0
		x.sgi++
		return nil
	}
	// begin checked the length against the SGL's.
	x.c.failTerminate(&terminate{Layer: LayerRDMAP, EType: RDMAPLocalCatastrophic, Code: RDMAPUnspecified},
		fmt.Sprintf("%s: %d payload bytes beyond the SGL", &x.h, x.left))
	return errStop
}

// placed accounts for n bytes copied into the front of seg: the CRC runs
// over them, and a finished SGE's region is let go.
func (x *rxState) placed(n int) {
	if x.c.crc {
		x.crc = crcUpdate(x.crc, x.seg[:n])
	}
	x.seg = x.seg[n:]
	x.left -= n
	if len(x.seg) == 0 {
		x.straight = false
		x.release()
	}
}

// release lets go of the region being placed into, if any.
func (x *rxState) release() {
	if x.held != nil {
		x.held.use.RUnlock()
		x.held = nil
	}
}

// lostRegion ends the connection after a region of the SGL being placed
// into was deregistered.
func (x *rxState) lostRegion() error {
	if x.op == opReadResp {
		return x.c.localProtection(x.o.seq, x.o.user, "RDMA Read Response")
	}
	err := x.c.localProtection(0, false, "Send")
	x.completeRecv(verbs.StatusLocalProtection, 0, 0)
	return err
}

// localProtection ends the connection after a local region vanished
// under a placement: seq (if user) is the send-queue entry that fails.
func (c *conn) localProtection(seq uint64, user bool, what string) error {
	c.mu.Lock()
	if user {
		c.failSet, c.failSeq, c.failStat = true, seq, verbs.StatusLocalProtection
	}
	c.mu.Unlock()
	c.fail(fmt.Errorf("iwarp: %s: local region deregistered during placement: %w", what, errLocalProtection),
		&terminate{Layer: LayerRDMAP, EType: RDMAPLocalCatastrophic, Code: RDMAPUnspecified})
	return errStop
}

// trailer takes pad and CRC from the buffer and checks the CRC; one that
// does not match ends the connection with a Terminate, except for the
// stale data of a zero-length Read (x.drop), where it is only counted.
// That is for one FPDU only: data Linux siw sends for our queued
// zero-length Read (readResponse). siw sends the memory of an earlier
// work request there, zero-copy, and that memory can change between
// siw's CRC and the wire (seen once in four lab runs against siw, at
// shutdown, after the bytes had passed every header check). The bytes
// address no buffer of ours and are discarded; the header they came with
// was checked (the Read's sink STag, TO continuity, length within the
// FPDU), and a length that lied would break the framing of the next FPDU,
// which is checked strictly.
func (x *rxState) trailer() error {
	pad := fpduPad(x.ulen)
	b := x.buf[x.r : x.r+pad+fpduCRCLen]
	x.r += len(b)
	if !x.c.crc {
		return nil
	}
	crc := crcUpdate(x.crc, b[:pad])
	got := getCRC(b[pad:])
	switch {
	case got == crc:
	case x.op == opReadResp && x.drop:
		x.staleCRC.Add(1)
	default:
		x.c.failTerminate(&terminate{Layer: LayerLLP, Code: MPACRCError},
			fmt.Sprintf("FPDU (%s) CRC %#08x, computed %#08x", &x.h, got, crc))
		return errStop
	}
	return nil
}

// terminate answers the current segment with a Terminate and stops.
func (x *rxState) terminate(layer, etype, code uint8, rr *readRequest, reason string) error {
	t := &terminate{Layer: layer, EType: etype, Code: code, HaveDDP: true, SegLen: uint16(x.ulen), DDP: x.h}
	if rr != nil {
		t.HaveRDMA, t.RDMA = true, *rr
	}
	x.c.failTerminate(t, fmt.Sprintf("%s: %s", &x.h, reason))
	return errStop
}

// checkHeader checks the DDP and RDMAP versions, the opcode against the
// tagged flag and an untagged message's queue number.
func (x *rxState) checkHeader() (rdmapOpcode, error) {
	h := &x.h
	if h.Version != ddpVersion {
		if h.Tagged {
			return 0, x.terminate(LayerDDP, DDPTaggedBuffer, DDPTaggedBadVersion, nil, "bad DDP version")
		}
		return 0, x.terminate(LayerDDP, DDPUntaggedBuffer, DDPUntaggedBadVersion, nil, "bad DDP version")
	}
	if h.RDMAP>>rdmapVerShift != rdmapVersion {
		return 0, x.terminate(LayerRDMAP, RDMAPRemoteOperation, RDMAPBadVersion, nil, "bad RDMAP version")
	}
	op := rdmapOpcode(h.RDMAP & rdmapOpcodeMask)
	if op > opTerminate || op.tagged() != h.Tagged {
		return 0, x.terminate(LayerRDMAP, RDMAPRemoteOperation, RDMAPBadOpcode, nil, "unexpected opcode")
	}
	if !h.Tagged {
		want := uint32(qnSend)
		switch op {
		case opReadReq:
			want = qnReadReq
		case opTerminate:
			want = qnTerminate
		}
		if h.QN != want {
			return 0, x.terminate(LayerDDP, DDPUntaggedBuffer, DDPUntaggedInvalidQN, nil, fmt.Sprintf("%s on QN %d", op, h.QN))
		}
	}
	return op, nil
}

// rtrReceived notes the first complete message from the peer (in RFC 6581
// peer-to-peer mode the responder's tx waits for it).
func (x *rxState) rtrReceived() {
	x.rtr = true
	c := x.c
	c.mu.Lock()
	c.rtrSeen = true
	c.mu.Unlock()
	c.kick()
}

// beginWrite checks an RDMA Write segment against the region its STag
// names, which is held until the payload is placed.
func (x *rxState) beginWrite() error {
	c, h := x.c, &x.h
	if x.plen == 0 {
		// A zero-length RDMA Write (the RFC 6581 RTR) touches no memory:
		// its STag is not validated.
		return nil
	}
	// Held from the checks to the end of the placement: neither
	// Deregister nor a reuse of the object can come in between.
	m := c.dev.acquire(h.STag)
	if m == nil {
		return x.terminate(LayerDDP, DDPTaggedBuffer, DDPTaggedInvalidSTag, nil, "invalid STag")
	}
	var err error
	switch {
	case !m.remote.Load():
		err = x.terminate(LayerDDP, DDPTaggedBuffer, DDPTaggedInvalidSTag, nil, "invalid STag")
	case m.pd != c.pd:
		err = x.terminate(LayerDDP, DDPTaggedBuffer, DDPTaggedSTagNotAsso, nil, "STag of another protection domain")
	case m.access&verbs.AccessRemoteWrite == 0:
		err = x.terminate(LayerRDMAP, RDMAPRemoteProtection, RDMAPAccessRights, nil, "region is not remote-writable")
	}
	if err != nil {
		m.use.RUnlock()
		return err
	}
	off, code, ok := m.rangeCheck(h.TO, x.plen)
	if !ok {
		lo, hi := m.addr, m.addr+uint64(len(m.b))
		m.use.RUnlock()
		return x.terminate(LayerDDP, DDPTaggedBuffer, code, nil, fmt.Sprintf("%d bytes at TO %#x outside [%#x, %#x)", x.plen, h.TO, lo, hi))
	}
	x.held, x.seg, x.left = m, m.b[off:off+x.plen], x.plen
	return nil
}

// beginReadResponse checks an RDMA Read Response segment against the
// oldest outstanding Read, whose SGL it is placed into.
func (x *rxState) beginReadResponse() error {
	c, h, plen := x.c, &x.h, x.plen
	c.mu.Lock()
	if c.orqHead == c.orqTail {
		c.mu.Unlock()
		return x.terminate(LayerRDMAP, RDMAPRemoteOperation, RDMAPBadOpcode, nil, "RDMA Read Response without an outstanding Read")
	}
	o := &c.orq[c.orqHead%uint64(len(c.orq))]
	var sgl []verbs.SGE
	if o.user {
		sgl = c.sqAt(o.seq).sgl
	}
	c.mu.Unlock()
	x.o = o
	x.drop = plen > 0 && !o.user && o.length == 0
	switch {
	case x.drop:
		// Stale data for one of our zero-length Reads (a fence or the
		// RTR). Linux siw sends it when the Read Request waits in its
		// inbound read queue behind other work: siw_activate_tx leaves
		// the previous work request's SGE in place for a zero-length
		// response, so siw sends that memory (6.1; it then also answers
		// with the right STag and TO). No buffer of ours is addressed,
		// so the bytes are checked (STag, TO continuity, CRC) and
		// dropped instead of ending the connection over the peer's bug.
		if h.STag != o.sinkSTag || h.TO != o.sinkTO+uint64(o.stale) {
			return x.terminate(LayerDDP, DDPTaggedBuffer, DDPTaggedBaseBounds, nil,
				fmt.Sprintf("%d bytes at STag %#x TO %#x for a zero-length Read (STag %#x TO %#x)", plen, h.STag, h.TO, o.sinkSTag, o.sinkTO+uint64(o.stale)))
		}
		x.discard, x.left = true, plen
	case plen > 0:
		if h.STag != o.sinkSTag {
			return x.terminate(LayerDDP, DDPTaggedBuffer, DDPTaggedInvalidSTag, nil, fmt.Sprintf("sink STag is %#x, want %#x", o.sinkSTag, h.STag))
		}
		if h.TO != o.sinkTO+uint64(o.got) || o.got+plen > o.length {
			return x.terminate(LayerDDP, DDPTaggedBuffer, DDPTaggedBaseBounds, nil,
				fmt.Sprintf("%d bytes at TO %#x, the Read expects %d more at %#x", plen, h.TO, o.length-o.got, o.sinkTO+uint64(o.got)))
		}
		x.sgl, x.sgi, x.off, x.left = sgl, 0, o.got, plen
		x.noteReadSeg()
	}
	return nil
}

// endReadResponse counts a placed Read Response segment and retires the
// Read with its last one.
func (x *rxState) endReadResponse() error {
	o := x.o
	if x.drop {
		o.stale += x.plen
	} else {
		o.got += x.plen
	}
	if !x.h.Last {
		return nil
	}
	if o.got != o.length {
		return x.terminate(LayerRDMAP, RDMAPRemoteOperation, RDMAPUnspecified, nil, fmt.Sprintf("Read Response of %d bytes for a %d-byte Read", o.got, o.length))
	}
	x.readDone(o)
	return nil
}

// beginReadRequest checks a peer's RDMA Read Request segment, whose
// payload goes into ctl.
func (x *rxState) beginReadRequest() error {
	h := &x.h
	if h.MSN != x.msn[qnReadReq] {
		return x.terminate(LayerDDP, DDPUntaggedBuffer, DDPUntaggedMSNRange, nil, fmt.Sprintf("expected MSN %d", x.msn[qnReadReq]))
	}
	if h.MO != 0 || !h.Last || x.plen != readReqLen {
		return x.terminate(LayerDDP, DDPUntaggedBuffer, DDPUntaggedInvalidMO, nil, fmt.Sprintf("RDMA Read Request of %d bytes at MO %d", x.plen, h.MO))
	}
	x.seg, x.left = x.ctl[:readReqLen], readReqLen
	return nil
}

// endReadRequest queues the answer to a peer's RDMA Read Request.
func (x *rxState) endReadRequest() error {
	c := x.c
	x.msn[qnReadReq]++
	var rr readRequest
	rr.parse(x.ctl[:readReqLen])
	ie := irqEntry{sinkSTag: rr.SinkSTag, sinkTO: rr.SinkTO, n: int(rr.Size)}
	if rr.Size > 0 {
		if err := x.checkReadSource(&rr, &ie); err != nil {
			return err
		}
	}
	c.mu.Lock()
	if c.irqTail-c.irqHead >= uint64(len(c.irq)) || c.neg.ird == 0 {
		c.mu.Unlock()
		return x.terminate(LayerDDP, DDPUntaggedBuffer, DDPUntaggedMSNRange, &rr, fmt.Sprintf("more than IRD=%d RDMA Reads outstanding", c.neg.ird))
	}
	c.irq[c.irqTail%uint64(len(c.irq))] = ie
	c.irqTail++
	c.mu.Unlock()
	x.wantTx = true
	return nil
}

// beginSend checks a Send segment against the current receive (taking
// the next posted one for a message's first segment), into whose SGL it
// is placed.
func (x *rxState) beginSend() error {
	h := &x.h
	if !x.curOn {
		if err := x.startRecv(); err != nil {
			return err
		}
	} else if h.MSN != x.msn[qnSend] {
		return x.terminate(LayerDDP, DDPUntaggedBuffer, DDPUntaggedMSNRange, nil, fmt.Sprintf("message %d is in progress", x.msn[qnSend]))
	}
	x.msgEnd = int(h.MO) + x.plen
	if x.msgEnd > x.cur.len {
		err := x.terminate(LayerDDP, DDPUntaggedBuffer, DDPUntaggedTooLong, nil, fmt.Sprintf("%d bytes for a %d-byte receive", x.msgEnd, x.cur.len))
		x.completeRecv(verbs.StatusLocalLength, 0, 0)
		return err
	}
	x.sgl, x.sgi, x.off, x.left = x.cur.sgl, 0, int(h.MO), x.plen
	return nil
}

// endSend completes the receive with a message's last segment.
func (x *rxState) endSend() error {
	h := &x.h
	if !h.Last {
		return nil
	}
	x.msn[qnSend]++
	if x.op == opSendInv || x.op == opSendSEInv {
		return x.invalidate(x.msgEnd)
	}
	x.completeRecv(verbs.StatusSuccess, x.msgEnd, 0)
	return nil
}

// readDone retires the oldest outstanding Read, whose response has fully
// arrived: it and every send-queue entry it covers are complete.
func (x *rxState) readDone(o *orqEntry) {
	c := x.c
	c.mu.Lock()
	c.markCoveredLocked(o.cover)
	if o.big() {
		c.bigReads.Add(-1)
	}
	*o = orqEntry{}
	c.orqHead++
	x.wantTx = false // the round takes the queued Read Responses too
	c.startTx(false) // a Read or fence may have waited for the ORQ slot
	c.complete(true)
}

// startTx hands tx the Read Responses this goroutine queued, before it
// waits (for the socket, or for room in a CQ): the answers to all the
// requests one read brought go out in one round (written inline when the
// connection is idle, Config.TxMode and txinline.go).
//
// It is also where this goroutine settles the completions it pushed
// (conn.settleCQs: a direct consumer runs here) and transmits what the
// consumer posted meanwhile (consume). readNext: the caller's next step
// is a read of data the socket already holds, not a wait.
func (x *rxState) startTx(readNext bool) {
	if x.wantTx {
		x.wantTx = false
		x.c.mu.Lock()
		x.c.startTx(false)
	}
	x.consume(readNext && x.pump.Queued())
}

// rxOwedReads bounds the reads a direct consumer's posts wait for rx to
// transmit them (consume).
const rxOwedReads = 4

// consume runs the CQs' direct consumers (verbs.DirectCQ: the gateway's
// engine) and transmits what they posted: all of it in one round, by rx
// itself, instead of each PostSend kicking the tx goroutine (when Reads
// are outstanding, pipelined). A kick readies a goroutine, and on every
// ready the runtime wakes an idle thread for an idle P (wakep): at
// GOMAXPROCS 2 that cost 0.45 futex calls and 0.5 context switches per
// 4 KiB Read or Write, and 3 to 3.5 times the CPU per op
// (BenchmarkRead4KDirect 23.4 µs against 6.5 at one proc,
// Write4KDirect 18.5 against 6.3; now 6.5 and 6.3 at both). With more
// data already in the socket (readNext) the posts wait for the next
// reads' (up to rxOwedReads reads), so that one round carries them all,
// as the tx goroutine's did; writing after every read cost 0.25 more
// writev per op. Before rx waits, the round is written inline when the
// tx goroutine is parked (transmit's owed), else handed to it.
func (x *rxState) consume(readNext bool) {
	c := x.c
	direct := c.rcq.directOwed() || c.scq.directOwed()
	if !direct && x.owedReads == 0 {
		c.settleCQs() // wakes Wait, if anything: no consumer here posts
		return
	}
	c.mu.Lock()
	c.rxConsuming = direct
	c.mu.Unlock()
	c.settleCQs()
	c.mu.Lock()
	c.rxConsuming = false
	if !c.rxOwed {
		c.mu.Unlock()
		return
	}
	if readNext && x.owedReads < rxOwedReads {
		x.owedReads++
		c.mu.Unlock()
		return
	}
	x.owedReads = 0
	c.rxOwed = false
	c.transmit(true, !readNext)
	// What that round completed on transmit (CompleteOnTransmit) is
	// owed to a settle when the consumer promised to settle after its
	// posts (cq.tryPush): it posted before the round, so this is that
	// settle; rx may wait next.
	c.settleCQs()
}

// checkReadSource validates the source of a Read Request and records the
// region in ie (tx checks again that it is the same registration when it
// sends the response).
func (x *rxState) checkReadSource(rr *readRequest, ie *irqEntry) error {
	c := x.c
	m := c.dev.acquire(rr.SrcSTag)
	if m == nil {
		return x.terminate(LayerRDMAP, RDMAPRemoteProtection, RDMAPInvalidSTag, rr, "invalid source STag")
	}
	defer m.use.RUnlock()
	switch {
	case !m.remote.Load():
		return x.terminate(LayerRDMAP, RDMAPRemoteProtection, RDMAPInvalidSTag, rr, "invalid source STag")
	case m.pd != c.pd:
		return x.terminate(LayerRDMAP, RDMAPRemoteProtection, RDMAPSTagNotAssoc, rr, "source STag of another protection domain")
	case m.access&verbs.AccessRemoteRead == 0:
		return x.terminate(LayerRDMAP, RDMAPRemoteProtection, RDMAPAccessRights, rr, "region is not remote-readable")
	}
	off, code, ok := m.rangeCheck(rr.SrcTO, int(rr.Size))
	if !ok {
		c := uint8(RDMAPBaseBounds)
		if code == DDPTaggedTOWrap {
			c = RDMAPTOWrap
		}
		return x.terminate(LayerRDMAP, RDMAPRemoteProtection, c, rr, fmt.Sprintf("%d bytes at TO %#x outside [%#x, %#x)", rr.Size, rr.SrcTO, m.addr, m.addr+uint64(len(m.b))))
	}
	ie.m, ie.stag, ie.off = m, rr.SrcSTag, off
	return nil
}

// startRecv checks the first segment of a Send message (MSN, MO 0) and
// takes the posted receive it is placed into.
func (x *rxState) startRecv() error {
	c, h := x.c, &x.h
	if h.MSN != x.msn[qnSend] {
		return x.terminate(LayerDDP, DDPUntaggedBuffer, DDPUntaggedMSNRange, nil, fmt.Sprintf("expected MSN %d", x.msn[qnSend]))
	}
	if h.MO != 0 {
		return x.terminate(LayerDDP, DDPUntaggedBuffer, DDPUntaggedInvalidMO, nil, "first segment of a message")
	}
	var ok bool
	if c.srq != nil {
		ok = c.srq.q.take(&x.cur)
	} else {
		ok = c.rq.take(&x.cur)
	}
	if !ok {
		return x.terminate(LayerDDP, DDPUntaggedBuffer, DDPUntaggedNoBuffer, nil, "no receive posted")
	}
	x.curOn = true
	if x.cur.bad {
		c.failTerminate(&terminate{Layer: LayerRDMAP, EType: RDMAPLocalCatastrophic, Code: RDMAPUnspecified}, "receive SGE outside its region")
		x.completeRecv(verbs.StatusLocalProtection, 0, 0)
		return errStop
	}
	return nil
}

// invalidate carries out a Send with Invalidate whose n bytes were
// placed: the STag it names loses its remote access and the receive
// completes saying so; an STag that is not ours ends the connection.
func (x *rxState) invalidate(n int) error {
	c, h := x.c, &x.h
	m := c.dev.acquire(h.InvSTag)
	if m != nil && m.pd != c.pd {
		m.use.RUnlock()
		m = nil
	}
	if m == nil {
		c.failTerminate(&terminate{Layer: LayerRDMAP, EType: RDMAPRemoteOperation, Code: RDMAPCannotInvalidate, HaveDDP: true, SegLen: uint16(x.ulen), DDP: x.h},
			fmt.Sprintf("Send with Invalidate of unknown STag %#x", h.InvSTag))
		x.completeRecv(verbs.StatusRemoteInvalidReq, 0, 0)
		return errStop
	}
	m.remote.Store(false)
	m.use.RUnlock()
	x.completeRecv(verbs.StatusSuccess, n, h.InvSTag)
	return nil
}

// completeRecv delivers the current receive's completion. An error status
// is only ever delivered after fail: by the time a consumer can see it the
// queue pair has left RTS, as on an HCA, so nothing posted afterwards can
// still succeed.
func (x *rxState) completeRecv(st verbs.Status, n int, inv uint32) {
	x.startTx(false) // the push may wait for room
	wc := verbs.WC{ID: x.cur.id, Op: verbs.OpRecv, Status: st, ByteLen: n, Conn: x.c.self,
		Invalidated: inv != 0, InvalidatedRKey: inv}
	x.curOn = false
	clear(x.cur.sgl)
	x.c.rcq.pushLater(unsafe.Slice(&wc, 1))
}

// terminateReceived handles the peer's Terminate: the work request it
// names completes with the matching error, the rest flush.
func (x *rxState) terminateReceived() error {
	c := x.c
	p := x.ctl[:x.plen]
	var t terminate
	if err := t.parse(p); err != nil {
		c.fail(&TerminateError{Layer: LayerLLP, Reason: err.Error()}, nil)
		return errStop
	}
	te := &TerminateError{Layer: t.Layer, EType: t.EType, Code: t.Code, Header: append([]byte(nil), p[termCtrlLen:]...)}
	c.mu.Lock()
	if t.HaveDDP {
		th := &t.DDP
		top := rdmapOpcode(th.RDMAP & rdmapOpcodeMask)
		for s := c.sqHead; s < c.sqSent; s++ {
			e := c.sqAt(s)
			var match bool
			switch {
			case !th.Tagged && th.QN == qnSend:
				match = (e.op == verbs.OpSend || e.op == verbs.OpSendInv) && e.msn == th.MSN
			case !th.Tagged && th.QN == qnReadReq:
				match = e.op == verbs.OpRDMARead && e.msn == th.MSN
			case th.Tagged && top == opWrite:
				match = e.op == verbs.OpRDMAWrite && e.rkey == th.STag && th.TO >= e.remoteAddr && th.TO <= e.remoteAddr+uint64(e.length)
			}
			if match {
				c.failSet, c.failSeq, c.failStat = true, s, te.status()
				break
			}
		}
	}
	c.mu.Unlock()
	c.fail(te, nil)
	return errStop
}

// rxExit waits for tx, drains and closes the socket, flushes the receive
// queue and ends the connection.
func (c *conn) rxExit() {
	c.settleCQs()
	c.fail(nil, nil)
	<-c.txDone
	c.tc.SetReadDeadline(time.Now().Add(2 * time.Second))
	io.Copy(io.Discard, c.tc)
	c.tc.Close()
	x := &c.rx
	x.release() // a run that failed inside a placement
	if x.curOn {
		x.completeRecv(verbs.StatusFlushed, 0, 0)
	}
	if c.rq != nil {
		c.rq.mu.Lock()
		c.rq.closed = true
		c.rq.mu.Unlock()
		for c.rq.take(&x.cur) {
			wc := verbs.WC{ID: x.cur.id, Op: verbs.OpRecv, Status: verbs.StatusFlushed, Conn: c}
			c.rcq.push1(&wc)
		}
	}
	c.flushSQ()
	if x.big != nil {
		rxBulkPool.Put(x.big)
		x.big, x.buf = nil, x.small
	}
	close(c.done)
}
