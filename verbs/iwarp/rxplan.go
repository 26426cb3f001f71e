package iwarp

import (
	"bytes"
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/rdmagw/rdmagw/internal/sockread"
)

// Read Response scatter: the FPDUs of a large RDMA Read Response read
// straight into the Read's sink, several in one system call.
//
// A read into rx's buffer takes whatever the socket holds, so in a
// stream of large Read Responses it brought the next FPDUs there, and
// their payloads were copied out into the sink: 99.8% of the bytes of
// BenchmarkRead1M, 12% of the gateway's CPU at write-1m (it pulls a WRITE's
// data with RDMA Reads). The payload of one FPDU was read straight into
// its destination only when the buffer happened to hold none of it.
//
// A Read Response's FPDUs are predictable: each segment's STag is the
// Read's sink STag, its TO continues where the last one ended (begin
// checks both), the peer cuts the message into segments of one size
// but the last, and the Read says how many bytes are still to come. So
// when a full-size segment that does not end its Read is placed straight
// (Next's straight branch), planScatter lays out the next ones behind it
// in the same readv (sockread.Scatterer), up to maxPlan:
//
//	seg (rest of this payload) | s1 | d1 | s2 | d2 | ... | sK | dK | sK+1
//
// each s a scratch piece for the pad and CRC of the FPDU before it and
// the length and tagged header of the next (the header it predicts is in
// hdr), each d the next payload's place in the sink (same SGE), sK+1 the
// last trailer and the header after it. Nothing is taken on trust: each
// s goes through the state machine as if read into the buffer (trailer
// and CRC checked, header parsed and checked by begin), and its d is
// accounted (placed, its CRC taken) only when that header is byte for
// byte the predicted one and begin put the payload where d is
// (takePending). A header that is not (the peer sent another message in
// between, or cut the segments otherwise) ends the plan: what the read
// put in the pieces from there on is copied into the buffer in stream
// order (gather), and the state machine goes on from there as after any
// buffered read. The sink bytes a mispredicted d overwrote are bytes of
// the same Read not placed yet, which its later segments overwrite; the
// Read has not completed, so nobody reads them meanwhile. The layout is
// capped so that whatever gather copies fits the buffer.
//
// Ownership: the rx goroutine only, like the rest of rxState.

// maxPlan is how many FPDUs a plan lays out behind the current one: a
// readv of the current payload and two pieces each, and the last trailer.
const maxPlan = (sockread.MaxPieces - 2) / 2

// planMinSeg is the smallest segment payload read straight: below it
// (links of a 1500-byte MTU cut segments of about 1.4 KiB) a plan of
// maxPlan segments would read about 21 KiB per system call where the
// buffer reads 128 KiB, and the copy out of the buffer is the cheaper
// side. A connection learns it from the non-final segments of the
// peer's Read Responses (bigSegs).
const planMinSeg = 4096

// scratchLen fits a trailer (pad, CRC) and a tagged header: the most
// toNextPayload says.
const scratchLen = 3 + fpduCRCLen + fpduLenField + ddpTaggedLen

// toNextPayload is how many stream bytes lie between the end of a
// payload, of an FPDU of ulen ULPDU bytes, and the next FPDU's payload
// when that FPDU is tagged: pad, CRC, length field, tagged header.
func toNextPayload(ulen int) int { return fpduPad(ulen) + fpduCRCLen + fpduLenField + ddpTaggedLen }

type rxPlan struct {
	armed  bool // laid out for the read Next returned; Got takes it
	n      int  // pieces laid out
	idx    int  // the next piece the read's bytes are accounted from
	left   int  // the read's bytes not accounted yet
	pieces [2*maxPlan + 1][]byte
	hdr    [maxPlan][fpduLenField + ddpTaggedLen]byte
	s      [maxPlan + 1][scratchLen]byte
	// pend: a predicted payload piece the read filled pendN bytes of,
	// taken when the state machine reaches its segment.
	pend  []byte
	pendN int
	// For tests and benchmarks: payloads placed from a plan, and plans
	// a header other than the predicted one ended (gather).
	scattered, gathered atomic.Uint64
}

// planScatter lays out the FPDUs behind the current one (see above) when
// it is a full-size Read Response segment placed into an SGE with room
// for more, and reports whether it did.
func (x *rxState) planScatter() bool {
	if x.op != opReadResp || x.drop || x.h.Last || x.plen < planMinSeg || len(x.seg) != x.left || x.segBuf == nil || !x.c.live.Load() {
		return false
	}
	p, o := &x.plan, x.o
	rest := o.length - o.got - x.plen // the Read's bytes after this segment
	size, at, to := x.plen, x.segEnd, x.h.TO+uint64(x.plen)
	ulen, used, k := x.ulen, 0, 0
	for rest > 0 && k < maxPlan {
		n := min(size, rest)
		s := toNextPayload(ulen)
		if at+n > len(x.segBuf) || used+s+n+scratchLen > len(x.buf) {
			break
		}
		h := x.h
		h.TO, h.Last = to, n == rest
		binary.BigEndian.PutUint16(p.hdr[k][:], uint16(ddpTaggedLen+n))
		h.put(p.hdr[k][fpduLenField:])
		p.pieces[2*k] = p.s[k][:s]
		p.pieces[2*k+1] = x.segBuf[at : at+n]
		used, at, to, rest = used+s+n, at+n, to+uint64(n), rest-n
		ulen = ddpTaggedLen + n
		k++
	}
	if k == 0 {
		return false
	}
	p.pieces[2*k] = p.s[k][:toNextPayload(ulen)]
	p.n, p.idx, p.left, p.armed = 2*k+1, 0, 0, true
	return true
}

// headerSpace is where the next read goes when the buffer holds less
// than a header: room for the whole next FPDU, read ahead with whatever
// follows, except while a large Read awaits its Response from a peer
// that cuts large segments (bigSegs): then only the header, so that a
// Response segment's payload is read straight (and a plan laid out
// behind it) instead of into the buffer. A message that comes first
// costs a read more.
func (x *rxState) headerSpace() []byte {
	b := x.space(x.nextFPDULen())
	if avail := x.w - x.r; x.bigSegs && x.bigReadNext() {
		b = b[:min(len(b), fpduLenField+ddpTaggedLen-avail)]
	}
	return b
}

// bigRead reports whether the current segment is a Response to a Read
// of ours of rxBufLen or more, from a peer that cuts Responses into
// segments of planMinSeg or more (bigSegs): its payload is read straight
// whatever its size, so that a read straight into the sink that ended
// inside a segment does not go on into the buffer with the rest of the
// Read.
func (x *rxState) bigRead() bool {
	return x.bigSegs && x.op == opReadResp && !x.drop && x.o.big()
}

// noteReadSeg learns from a Read Response segment that does not end its
// Read whether the peer's segments are large enough to read straight
// (planMinSeg). Called by begin, for a segment that carries data.
func (x *rxState) noteReadSeg() {
	if !x.h.Last {
		x.bigSegs = x.plen >= planMinSeg
	}
}

// straightTail is how much of the buffer a straight read without a plan
// fills behind the payload: in a large Read's Response, when the payload
// ends the segment, only its trailer and the next header (the next
// segment, or the next Read's first); else all of it.
func (x *rxState) straightTail() int {
	if !x.bigRead() || len(x.seg) < x.left {
		return len(x.buf)
	}
	return min(len(x.buf), toNextPayload(x.ulen))
}

// trailerSpace is where the next read goes when the buffer holds less
// than the current FPDU's trailer: room for it and whatever follows,
// except in a large Read's Response (bigRead): then only the trailer
// and the next header (a read straight into the payload ended where its
// pad or CRC was still to come).
func (x *rxState) trailerSpace() []byte {
	avail := x.w - x.r
	b := x.space(fpduPad(x.ulen) + fpduCRCLen)
	if x.bigRead() {
		b = b[:min(len(b), toNextPayload(x.ulen)-avail)]
	}
	return b
}

// big reports whether o is a Read of ours of rxBufLen or more: one whose
// Response rx reads straight (conn.bigReads counts them outstanding).
func (o *orqEntry) big() bool { return o.user && o.length >= rxBufLen }

// bigReadNext reports whether a Read of ours of rxBufLen or more is
// outstanding (conn.bigReads: no lock taken per header read).
func (x *rxState) bigReadNext() bool { return x.c.bigReads.Load() > 0 }

// NextScatter is the receive run's sockread.Scatterer: Next's read, with
// a plan's pieces behind the payload when Next laid one out.
func (x *rxState) NextScatter(dst [][]byte) [][]byte {
	p, tail := x.Next()
	if p == nil {
		return dst
	}
	dst = append(dst, p)
	if x.plan.armed {
		return append(dst, x.plan.pieces[:x.plan.n]...)
	}
	return append(dst, tail)
}

// planGot accounts a planned read's n bytes beyond the current payload
// (the buffer is drained).
func (x *rxState) planGot(n int) {
	x.plan.armed = false
	x.plan.left = n
	x.planFeed()
}

// planFeed takes the read's next bytes: a scratch piece into the buffer,
// for the state machine, and, when it holds the predicted header, the
// payload piece after it as pending. The buffer is drained.
func (x *rxState) planFeed() {
	p := &x.plan
	x.r, x.w = 0, 0
	for p.left > 0 && p.idx < p.n {
		b := p.pieces[p.idx]
		if p.idx%2 == 1 { // a payload, behind its predicted header
			p.pend, p.pendN = b, min(p.left, len(b))
			p.left -= p.pendN
			p.idx++
			return
		}
		k := min(p.left, len(b))
		x.w += copy(x.buf[x.w:], b[:k])
		p.left -= k
		p.idx++
		if k < len(b) || p.idx == p.n {
			break
		}
		if !bytes.Equal(b[len(b)-len(p.hdr[0]):], p.hdr[p.idx/2][:]) {
			x.gather()
			return
		}
	}
	x.planEnd()
}

// takePending accounts the pending payload piece when the state machine
// reached its segment with the buffer drained: placed where begin put
// the segment, if that is where the read put it, else copied into the
// buffer with what followed it (gather).
func (x *rxState) takePending() {
	p := &x.plan
	n := p.pendN
	p.pendN = 0
	if len(x.seg) < n || unsafe.SliceData(x.seg) != unsafe.SliceData(p.pend) {
		x.r, x.w = 0, 0
		x.w += copy(x.buf, p.pend[:n])
		p.pend = nil
		x.gather()
		return
	}
	p.pend = nil
	x.placed(n)
	p.scattered.Add(1)
	if len(x.seg) > 0 {
		x.straight = true // the read ended inside this payload
	}
	if p.left > 0 {
		x.planFeed()
		return
	}
	x.planEnd()
}

// gather copies what the read put in the pieces after the current one
// into the buffer, in stream order, and ends the plan.
func (x *rxState) gather() {
	p := &x.plan
	for ; p.left > 0 && p.idx < p.n; p.idx++ {
		k := min(p.left, len(p.pieces[p.idx]))
		x.w += copy(x.buf[x.w:], p.pieces[p.idx][:k])
		p.left -= k
	}
	p.gathered.Add(1)
	x.planEnd()
}

// planEnd forgets the plan once its bytes are all accounted.
func (x *rxState) planEnd() {
	p := &x.plan
	if p.pendN > 0 {
		return
	}
	clear(p.pieces[:p.n])
	p.n, p.idx, p.left, p.pend = 0, 0, 0, nil
}
