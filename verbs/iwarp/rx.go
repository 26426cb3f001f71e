package iwarp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rdmagw/rdmagw/internal/nbcall"
	"github.com/rdmagw/rdmagw/internal/sockread"
	"github.com/rdmagw/rdmagw/verbs"
	"golang.org/x/sys/unix"
)

// The receive side: one goroutine per connection reads the stream through
// a receive buffer, several FPDUs per system call: each FPDU's length and
// DDP header is checked, its payload copied into its destination (the
// registered region an STag names, the SGL of a posted receive or of an
// RDMA Read), then the CRC is checked over the placed bytes. A payload the
// buffer does not hold is read straight from the socket into its
// destination, with the buffer behind it in the same readv. Any violation
// is answered with a Terminate naming the offending segment. The FPDUs
// of up to rxBufLen bytes (every one, on a connection that carries small
// messages) are processed inside one internal/sockread run (pumpRun):
// each wait is preceded by the read that returns EAGAIN: a reset right
// behind data would otherwise go unseen until our next write, and a
// client connection may not have one (sockread's package doc).

// The receive buffer starts at rxBufLen and grows to rxBulkLen when
// the stream shows bulk traffic (a payload of rxBufLen or more, or a read
// that filled the buffer). Bulk reads then take what the socket holds,
// several 64 KiB FPDUs per system call, instead of stopping at each
// payload's end: every read the receiver makes sends the peer a window
// update, whose processing transmits the peer's queued data in the
// receiver's system call, so fewer, larger reads cost the pair less
// kernel time per byte (Read/Write 1 MiB without CRC: 35 reads per MiB
// became 10, CPU per op -10%; wire.md) than the one copy out of the buffer
// they add. A connection that only carries small messages keeps the small
// buffer. The bulk buffer goes back (to rxBulkPool, for the next
// connection that grows) after rxShrinkAfter reads in a row brought less
// than rxBufLen each: a gateway whose 1,000 clients each once did a 1 MiB
// I/O does not keep 128 MiB of receive buffers.
const (
	rxBufLen      = 16 << 10
	rxBulkLen     = 128 << 10
	rxShrinkAfter = 64
)

var rxBulkPool = sync.Pool{New: func() any { return new([rxBulkLen]byte) }}

var errStop = errors.New("iwarp: receive stopped")

// errPumpRead: an FPDU taken as whole in the buffer wanted more (a bug;
// reading the socket there would deadlock on its read lock).
var errPumpRead = errors.New("iwarp: internal error: FPDU read past the buffered bytes")

type rxState struct {
	c     *conn
	buf   []byte // small, or bulk (grow) until shrink
	small []byte // the rxBufLen buffer, kept while bulk is in use
	big   *[rxBulkLen]byte
	// smallReads counts the pump's reads in a row that brought less
	// than rxBufLen (shrink).
	smallReads int
	r, w       int
	hdr        [fpduLenField + ddpUntaggedLen]byte
	trl        [3 + fpduCRCLen]byte
	ctl        [termMaxLen + 64]byte
	junk       []byte // scratch for payload that is dropped (allocated on first use)
	h          ddpHeader
	ulen       int
	crc        uint32
	msn        [3]uint32 // next expected MSN per queue
	cur        recvEntry // receive the current Send is placed into
	curOn      bool
	rtr        bool
	// wantTx: this goroutine queued Read Responses; startTx hands them
	// over before it next waits.
	wantTx bool
	// readDirect's readv: the destination and the buffer.
	iov     [2]unix.Iovec
	rawN    int
	rawErr  error
	rawRead func(fd uintptr) bool // readvRaw, bound once
	// pump runs the FPDUs that fit the buffer inside one RawConn.Read
	// (sockread, with the EAGAIN read kept: see init); pumpErr is
	// what ended it; pumping says readFull must not touch the socket.
	pump    sockread.Reader
	pumpErr error
	pumping bool
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
	x.rawRead = x.readvRaw
	x.pump.Init(c.rc, x, false) // a reset behind data must not go unseen (sockread)
}

// readFull fills p from the buffer and then from the socket: the rest of
// a p of rxBufLen or more straight into p (readDirect), a shorter one
// through the buffer.
func (x *rxState) readFull(p []byte) error {
	n := copy(p, x.buf[x.r:x.w])
	x.r += n
	p = p[n:]
	if len(p) > 0 && x.pumping {
		return errPumpRead
	}
	if len(p) >= rxBufLen {
		x.grow()
		return x.readDirect(p)
	}
	for len(p) > 0 {
		x.startTx()
		if x.w == len(x.buf) {
			x.grow() // the last read filled it (the buffer is drained here)
		}
		m, err := x.readBuf()
		x.smallReads = 0
		x.w = m
		k := copy(p, x.buf[:m])
		x.r = k
		p = p[k:]
		if err != nil && len(p) > 0 {
			return err
		}
	}
	return nil
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

// readBuf reads into the whole buffer as tc.Read would (waiting on the
// poller; io.EOF once the peer closed), through readv.
func (x *rxState) readBuf() (int, error) { return x.readv(x.buf, nil) }

// readDirect fills p, which the buffer has nothing more for, with readv
// calls into p and the buffer: what the socket holds beyond p (the
// trailer, the next FPDUs) lands in the buffer in the same call.
func (x *rxState) readDirect(p []byte) error {
	x.r, x.w = 0, 0
	for len(p) > 0 {
		x.startTx()
		x.smallReads = 0
		n, err := x.readv(p, x.buf)
		if err != nil {
			return err
		}
		if n > len(p) {
			x.w = n - len(p)
			n = len(p)
		}
		p = p[n:]
	}
	return nil
}

// readv makes one readv into a and then b (either may be empty) through
// the raw connection, waiting on the poller while the socket is empty: a
// small read is a raw system call (internal/nbcall). It returns the
// bytes read (n > 0), io.EOF once the peer closed, or the failure.
func (x *rxState) readv(a, b []byte) (int, error) {
	x.iov[0] = unix.Iovec{Base: unsafe.SliceData(a)}
	x.iov[0].SetLen(len(a))
	x.iov[1] = unix.Iovec{Base: unsafe.SliceData(b)}
	x.iov[1].SetLen(len(b))
	x.rawN, x.rawErr = 0, nil
	err := x.c.rc.Read(x.rawRead)
	clear(x.iov[:]) // keep no reference to the caller's buffer
	switch {
	case err != nil:
		return 0, err
	case x.rawErr != nil:
		return 0, x.rawErr
	case x.rawN == 0:
		return 0, io.EOF
	}
	return x.rawN, nil
}

// readvRaw is readv's RawConn.Read callback: false (wait for the
// socket) on EAGAIN.
func (x *rxState) readvRaw(fd uintptr) bool {
	for {
		n, e := nbcall.Call(int(x.iov[0].Len+x.iov[1].Len), unix.SYS_READV, fd, uintptr(unsafe.Pointer(&x.iov[0])), uintptr(len(x.iov)))
		switch e {
		case 0:
			x.rawN = int(n)
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			x.rawErr = os.NewSyscallError("readv", e)
		}
		return true
	}
}

// place reads n payload bytes into b and runs the CRC over them.
func (x *rxState) place(b []byte) error {
	if err := x.readFull(b); err != nil {
		return err
	}
	if x.c.crc {
		x.crc = crcUpdate(x.crc, b)
	}
	return nil
}

// scatter places n payload bytes at offset off of a local SGL. Each
// region is held while bytes go into it, so a Deregister either waits for
// the placement or makes it fail: ok is false when an SGE's region is gone
// (a local protection error).
func (x *rxState) scatter(sgl []verbs.SGE, off, n int) (ok bool, err error) {
	for i := 0; i < len(sgl) && n > 0; i++ {
		b := sgl[i].Buf
		if off >= len(b) {
			off -= len(b)
			continue
		}
		take := min(len(b)-off, n)
		m := x.c.dev.acquire(sgl[i].LKey)
		if m == nil {
			return false, nil
		}
		err := x.place(b[off : off+take])
		m.use.RUnlock()
		if err != nil {
			return true, err
		}
		n -= take
		off = 0
	}
	return true, nil
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

// trailer reads pad and CRC and checks the CRC.
func (x *rxState) trailer() error { return x.trailerCheck(true) }

// trailerCheck reads pad and CRC; a CRC that does not match ends the
// connection with a Terminate when strict, and is only counted when not.
// Not strict is for one FPDU only: data Linux siw sends for our queued
// zero-length Read (dropStale). siw sends the memory of an earlier work
// request there, zero-copy, and that memory can change between siw's CRC
// and the wire (seen once in four lab runs against siw, at shutdown, after
// the bytes had passed every header check). The bytes address no buffer
// of ours and are discarded; the header they came with was checked (the
// Read's sink STag, TO continuity, length within the FPDU), and a length
// that lied would break the framing of the next FPDU, which is checked
// strictly.
func (x *rxState) trailerCheck(strict bool) error {
	pad := fpduPad(x.ulen)
	b := x.trl[:pad+fpduCRCLen]
	if err := x.readFull(b); err != nil {
		return err
	}
	if !x.c.crc {
		return nil
	}
	crc := crcUpdate(x.crc, b[:pad])
	got := getCRC(b[pad:])
	switch {
	case got == crc:
	case !strict:
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

func (c *conn) rxLoop() {
	x := &c.rx
	for c.live.Load() {
		err := x.pumpRun()
		if err == nil && c.live.Load() {
			err = x.one() // an FPDU larger than the small buffer
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

// pumpRun processes the FPDUs of up to rxBufLen bytes (all of them on a
// connection with small messages) inside one sockread.Reader run, which
// reads the socket without the read that returns EAGAIN before each wait.
// It returns nil, with the buffer holding the start of a larger FPDU,
// for one() to place through readFull (and readDirect), or when the
// connection is no longer live.
func (x *rxState) pumpRun() error {
	x.pumpErr = nil
	x.pumping = true
	err := x.pump.Run()
	x.pumping = false
	if err != nil {
		return err
	}
	return x.pumpErr
}

// Next is pumpRun's sockread.Consumer: it processes the FPDUs the buffer
// holds whole and returns the free part of the buffer to read into, or
// nil to leave the pump (not live, an error, an FPDU over rxBufLen).
func (x *rxState) Next() []byte {
	for x.c.live.Load() {
		need := x.nextFPDULen()
		if need > rxBufLen {
			return nil
		}
		if x.w-x.r >= need {
			if err := x.one(); err != nil {
				x.pumpErr = err
				return nil
			}
			continue
		}
		if x.r == x.w {
			if x.w == len(x.buf) {
				x.grow() // the last read filled it
			}
			x.shrink()
			x.r, x.w = 0, 0
		} else if x.r+need > len(x.buf) {
			x.w = copy(x.buf, x.buf[x.r:x.w])
			x.r = 0
		}
		x.startTx()
		return x.buf[x.w:]
	}
	return nil
}

// Got is pumpRun's sockread.Consumer: n bytes arrived in the buffer.
func (x *rxState) Got(n int, err error) bool {
	if err != nil {
		if errors.Is(err, io.EOF) && x.w-x.r < fpduLenField+ddpTaggedLen {
			err = fmt.Errorf("peer closed the connection: %w", err) // as readHeader says it
		}
		x.pumpErr = err
		return false
	}
	x.w += n
	if n < rxBufLen {
		x.smallReads++
	} else {
		x.smallReads = 0
	}
	return true
}

// nextFPDULen is how many bytes the next FPDU takes in the stream (what
// one() reads for it): its MPA length, DDP header, payload, pad and CRC,
// and at least the part of the header readHeader reads first.
func (x *rxState) nextFPDULen() int {
	need := fpduLenField + ddpTaggedLen
	if x.w-x.r >= fpduLenField {
		ulen := int(binary.BigEndian.Uint16(x.buf[x.r:]))
		need = max(need, fpduLenField+ulen+fpduPad(ulen)+fpduCRCLen)
	}
	return need
}

// one processes one FPDU: its header is read and checked, then the
// opcode's handler places the payload and checks the trailer.
func (x *rxState) one() error {
	plen, err := x.readHeader()
	if err != nil {
		return err
	}
	op, err := x.checkHeader()
	if err != nil {
		return err
	}
	switch op {
	case opWrite:
		err = x.write(plen)
	case opReadResp:
		err = x.readResponse(plen)
	case opReadReq:
		err = x.readRequest(plen)
	case opTerminate:
		err = x.terminateReceived(plen)
	default:
		err = x.send(op, plen)
	}
	if err == nil && !x.rtr {
		x.rtrReceived()
	}
	return err
}

// readHeader reads the MPA length and the DDP header into x.h (starting
// the CRC over them) and returns the payload length.
func (x *rxState) readHeader() (plen int, err error) {
	c := x.c
	b := x.hdr[:]
	if err := x.readFull(b[:fpduLenField+ddpTaggedLen]); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("peer closed the connection: %w", err)
		}
		return 0, err
	}
	x.ulen = int(binary.BigEndian.Uint16(b))
	hl := ddpHeaderLen(b[fpduLenField])
	if x.ulen < hl {
		c.failTerminate(&terminate{Layer: LayerLLP, Code: MPAFPDUStart},
			fmt.Sprintf("ULPDU_Length %d is shorter than the %d-byte DDP header", x.ulen, hl))
		return 0, errStop
	}
	if hl == ddpUntaggedLen {
		if err := x.readFull(b[fpduLenField+ddpTaggedLen : fpduLenField+ddpUntaggedLen]); err != nil {
			return 0, err
		}
	}
	x.h.parse(b[fpduLenField : fpduLenField+hl])
	x.crc = 0
	if c.crc {
		x.crc = crcUpdate(0, b[:fpduLenField+hl])
	}
	return x.ulen - hl, nil
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

// write places an RDMA Write segment into the region its STag names.
func (x *rxState) write(plen int) error {
	c, h := x.c, &x.h
	if plen == 0 {
		// A zero-length RDMA Write (the RFC 6581 RTR) touches no memory:
		// its STag is not validated.
		return x.trailer()
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
	off, code, ok := m.rangeCheck(h.TO, plen)
	if !ok {
		lo, hi := m.addr, m.addr+uint64(len(m.b))
		m.use.RUnlock()
		return x.terminate(LayerDDP, DDPTaggedBuffer, code, nil, fmt.Sprintf("%d bytes at TO %#x outside [%#x, %#x)", plen, h.TO, lo, hi))
	}
	err = x.place(m.b[off : off+plen])
	m.use.RUnlock()
	if err != nil {
		return err
	}
	return x.trailer()
}

// readResponse places an RDMA Read Response segment into the SGL of the
// oldest outstanding Read.
func (x *rxState) readResponse(plen int) error {
	c := x.c
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
	drop := plen > 0 && !o.user && o.length == 0
	var err error
	if drop {
		err = x.dropStale(o, plen)
	} else if plen > 0 {
		err = x.placeResponse(o, sgl, plen)
	}
	if err != nil {
		return err
	}
	if err := x.trailerCheck(!drop); err != nil {
		return err
	}
	if !drop {
		o.got += plen
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

// dropStale checks and drops data for one of our zero-length Reads (a
// fence or the RTR). Linux siw sends it when the Read Request waits in
// its inbound read queue behind other work: siw_activate_tx leaves the
// previous work request's SGE in place for a zero-length response, so siw
// sends that memory (6.1; it then also answers with the right STag and
// TO). No buffer of ours is addressed, so the bytes are checked (STag, TO
// continuity, CRC) and dropped instead of ending the connection over the
// peer's bug.
func (x *rxState) dropStale(o *orqEntry, plen int) error {
	h := &x.h
	if h.STag != o.sinkSTag || h.TO != o.sinkTO+uint64(o.stale) {
		return x.terminate(LayerDDP, DDPTaggedBuffer, DDPTaggedBaseBounds, nil,
			fmt.Sprintf("%d bytes at STag %#x TO %#x for a zero-length Read (STag %#x TO %#x)", plen, h.STag, h.TO, o.sinkSTag, o.sinkTO+uint64(o.stale)))
	}
	if err := x.discard(plen); err != nil {
		return err
	}
	o.stale += plen
	return nil
}

// placeResponse checks a Read Response segment against the Read it
// answers (sink STag, TO continuity, length) and places it into the
// Read's SGL.
func (x *rxState) placeResponse(o *orqEntry, sgl []verbs.SGE, plen int) error {
	h := &x.h
	if h.STag != o.sinkSTag {
		return x.terminate(LayerDDP, DDPTaggedBuffer, DDPTaggedInvalidSTag, nil, fmt.Sprintf("sink STag is %#x, want %#x", o.sinkSTag, h.STag))
	}
	if h.TO != o.sinkTO+uint64(o.got) || o.got+plen > o.length {
		return x.terminate(LayerDDP, DDPTaggedBuffer, DDPTaggedBaseBounds, nil,
			fmt.Sprintf("%d bytes at TO %#x, the Read expects %d more at %#x", plen, h.TO, o.length-o.got, o.sinkTO+uint64(o.got)))
	}
	if ok, err := x.scatter(sgl, o.got, plen); err != nil {
		return err
	} else if !ok {
		return x.c.localProtection(o.seq, o.user, "RDMA Read Response")
	}
	return nil
}

// readDone retires the oldest outstanding Read, whose response has fully
// arrived: it and every send-queue entry it covers are complete.
func (x *rxState) readDone(o *orqEntry) {
	c := x.c
	c.mu.Lock()
	c.markCoveredLocked(o.cover)
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
// (conn.settleCQs: a direct consumer runs here).
func (x *rxState) startTx() {
	if x.wantTx {
		x.wantTx = false
		x.c.mu.Lock()
		x.c.startTx(false)
	}
	x.c.settleCQs()
}

// discard reads n payload bytes (CRC included) that go nowhere.
func (x *rxState) discard(n int) error {
	if x.junk == nil {
		x.junk = make([]byte, 4096)
	}
	for n > 0 {
		k := min(n, len(x.junk))
		if err := x.place(x.junk[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
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

// readRequest queues the answer to a peer's RDMA Read Request.
func (x *rxState) readRequest(plen int) error {
	c, h := x.c, &x.h
	if h.MSN != x.msn[qnReadReq] {
		return x.terminate(LayerDDP, DDPUntaggedBuffer, DDPUntaggedMSNRange, nil, fmt.Sprintf("expected MSN %d", x.msn[qnReadReq]))
	}
	if h.MO != 0 || !h.Last || plen != readReqLen {
		return x.terminate(LayerDDP, DDPUntaggedBuffer, DDPUntaggedInvalidMO, nil, fmt.Sprintf("RDMA Read Request of %d bytes at MO %d", plen, h.MO))
	}
	p := x.ctl[:readReqLen]
	if err := x.place(p); err != nil {
		return err
	}
	if err := x.trailer(); err != nil {
		return err
	}
	x.msn[qnReadReq]++
	var rr readRequest
	rr.parse(p)
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

// send places a Send segment into the current receive.
func (x *rxState) send(op rdmapOpcode, plen int) error {
	c, h := x.c, &x.h
	if !x.curOn {
		if err := x.startRecv(); err != nil {
			return err
		}
	} else if h.MSN != x.msn[qnSend] {
		return x.terminate(LayerDDP, DDPUntaggedBuffer, DDPUntaggedMSNRange, nil, fmt.Sprintf("message %d is in progress", x.msn[qnSend]))
	}
	end := int(h.MO) + plen
	if end > x.cur.len {
		err := x.terminate(LayerDDP, DDPUntaggedBuffer, DDPUntaggedTooLong, nil, fmt.Sprintf("%d bytes for a %d-byte receive", end, x.cur.len))
		x.completeRecv(verbs.StatusLocalLength, 0, 0)
		return err
	}
	if ok, err := x.scatter(x.cur.sgl, int(h.MO), plen); err != nil {
		return err
	} else if !ok {
		err := c.localProtection(0, false, "Send")
		x.completeRecv(verbs.StatusLocalProtection, 0, 0)
		return err
	}
	if err := x.trailer(); err != nil {
		return err
	}
	if !h.Last {
		return nil
	}
	x.msn[qnSend]++
	if op == opSendInv || op == opSendSEInv {
		return x.invalidate(end)
	}
	x.completeRecv(verbs.StatusSuccess, end, 0)
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
	x.startTx() // the push may wait for room
	wc := verbs.WC{ID: x.cur.id, Op: verbs.OpRecv, Status: st, ByteLen: n, Conn: x.c.self,
		Invalidated: inv != 0, InvalidatedRKey: inv}
	x.curOn = false
	clear(x.cur.sgl)
	x.c.rcq.pushLater(unsafe.Slice(&wc, 1))
}

// terminateReceived handles the peer's Terminate: the work request it
// names completes with the matching error, the rest flush.
func (x *rxState) terminateReceived(plen int) error {
	c := x.c
	if plen > len(x.ctl) {
		return x.terminate(LayerDDP, DDPUntaggedBuffer, DDPUntaggedTooLong, nil, fmt.Sprintf("%d-byte Terminate", plen))
	}
	p := x.ctl[:plen]
	if err := x.place(p); err != nil {
		return err
	}
	if err := x.trailer(); err != nil {
		return err
	}
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
