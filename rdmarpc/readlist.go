package rdmarpc

import (
	"iter"

	"github.com/rdmagw/rdmagw/xdr"
)

// ReadSegment is one Read list entry (struct rpcrdma1_read_segment): a
// segment plus the Position in the Payload stream where its chunk goes.
type ReadSegment struct {
	Position uint32
	Segment
}

// readSegmentSize is the XDR size of a ReadSegment ("PHLOO").
const readSegmentSize = 4 + segmentSize

// ReadList is the Read list in wire order. After Decode its segments are
// grouped into Read chunks: the segments of one chunk share a Position and
// are consecutive, and chunks appear in ascending Position order.
type ReadList []ReadSegment

// ReadChunk is the run of Read segments that share one Position: one XDR
// item (or, at Position zero, a whole RPC call) pulled with RDMA Read.
type ReadChunk struct {
	Position uint32
	Segments ReadList
}

// Len is the chunk's length in bytes: the sum of its segment lengths.
// It excludes XDR padding, which a requester need not send (rfc5666bis
// §4.4.5.1); the receiver supplies the round-up.
func (c ReadChunk) Len() uint64 { return c.Segments.Bytes() }

// Bytes is the sum of the lengths of all segments in l.
func (l ReadList) Bytes() uint64 {
	var n uint64
	for i := range l {
		n += uint64(l[i].Length)
	}
	return n
}

// NextChunk returns the Read chunk that starts at l[i] and the index of the
// segment after it. When i is past the end it returns an empty chunk and
// len(l). Typical loop:
//
//	for i := 0; i < len(h.Reads); {
//		var c rdmarpc.ReadChunk
//		c, i = h.Reads.NextChunk(i)
//		...
//	}
func (l ReadList) NextChunk(i int) (ReadChunk, int) {
	if i < 0 || i >= len(l) {
		return ReadChunk{}, len(l)
	}
	pos := l[i].Position
	j := i + 1
	for j < len(l) && l[j].Position == pos {
		j++
	}
	return ReadChunk{Position: pos, Segments: l[i:j:j]}, j
}

// Chunks iterates over the Read chunks of l in order.
func (l ReadList) Chunks() iter.Seq[ReadChunk] {
	return func(yield func(ReadChunk) bool) {
		for i := 0; i < len(l); {
			var c ReadChunk
			c, i = l.NextChunk(i)
			if !yield(c) {
				return
			}
		}
	}
}

// ChunkCount is the number of Read chunks (runs of equal Position) in l.
func (l ReadList) ChunkCount() int {
	n := 0
	for i := range l {
		if i == 0 || l[i].Position != l[i-1].Position {
			n++
		}
	}
	return n
}

// PositionZero returns the Position-Zero Read chunk, which carries a whole
// RPC call (a Long call, RDMA_NOMSG). Decode puts it first in the list.
func (l ReadList) PositionZero() (ReadChunk, bool) {
	if !l.hasPositionZero() {
		return ReadChunk{}, false
	}
	c, _ := l.NextChunk(0)
	return c, true
}

func (l ReadList) hasPositionZero() bool { return len(l) > 0 && l[0].Position == 0 }

// DataChunks returns the Read segments that follow the Position-Zero Read
// chunk: the DDP-eligible items (all of l when there is no Long call).
func (l ReadList) DataChunks() ReadList {
	if !l.hasPositionZero() {
		return l
	}
	_, i := l.NextChunk(0)
	return l[i:]
}

func (l ReadList) encodedLen() int { return len(l)*(4+readSegmentSize) + 4 }

// AppendReadSegment adds one Read segment at Position pos. Segments of one
// Read chunk must be appended one after another and chunks in ascending
// Position order, or the peer (and Decode) rejects the header.
func (h *Header) AppendReadSegment(pos uint32, s Segment) {
	h.Reads = append(h.Reads, ReadSegment{Position: pos, Segment: s})
}

// AppendReadChunk adds a Read chunk at Position pos made of segs, in order.
// Position 0 makes it the Position-Zero Read chunk of a Long call.
func (h *Header) AppendReadChunk(pos uint32, segs ...Segment) {
	for _, s := range segs {
		h.AppendReadSegment(pos, s)
	}
}

// The Read list on the wire is an XDR linked list (optional-data): each
// entry is preceded by 1, and the list ends with 0.
//
//	1 | Position | Handle | Length | Offset (2 words) | 1 | ... | 0
func (h *Header) decodeReadList(d *xdr.Decoder, lim *Limits) error {
	var (
		prev      uint32 // Position of the previous segment
		chunks    int    // Read chunks seen so far
		chunkSegs int    // segments in the current chunk
		chunkLen  uint64 // bytes in the current chunk
	)
	for i := 0; ; i++ {
		more, err := d.Optional()
		if err != nil {
			return h.truncated(InReadList, d.Offset(), i, err)
		}
		if !more {
			return nil
		}
		off := d.Offset()
		if i >= lim.MaxReadSegments {
			return h.chunkError(ReasonTooManySegments, InReadList, off, i, uint64(i)+1, uint64(lim.MaxReadSegments), nil)
		}
		if d.Len() < readSegmentSize {
			return h.truncated(InReadList, off, i, d.Skip(readSegmentSize))
		}
		pos, _ := d.Uint32()
		seg, _ := decodeSegment(d)
		if seg.wraps() {
			return h.chunkError(ReasonSegmentWraps, InReadList, off, i, seg.Offset, 0, nil)
		}
		if pos&3 != 0 {
			return h.chunkError(ReasonBadPosition, InReadList, off, i, uint64(pos), 0, nil)
		}
		if i == 0 || pos != prev {
			if i > 0 && pos < prev {
				return h.chunkError(ReasonPositionOrder, InReadList, off, i, uint64(pos), 0, nil)
			}
			chunks++
			if chunks > lim.MaxReadChunks {
				return h.chunkError(ReasonTooManyChunks, InReadList, off, i, uint64(chunks), uint64(lim.MaxReadChunks), nil)
			}
			chunkSegs, chunkLen = 0, 0
		}
		chunkSegs++
		if chunkSegs > lim.MaxSegmentsPerChunk {
			return h.chunkError(ReasonTooManySegments, InReadList, off, i, uint64(chunkSegs), uint64(lim.MaxSegmentsPerChunk), nil)
		}
		chunkLen += uint64(seg.Length)
		if chunkLen > lim.MaxChunkBytes {
			return h.chunkError(ReasonChunkTooLarge, InReadList, off, i, chunkLen, lim.MaxChunkBytes, nil)
		}
		h.Reads = append(h.Reads, ReadSegment{Position: pos, Segment: seg})
		prev = pos
	}
}

// encodeReadList writes l as an XDR linked list (version one's Read list,
// version two's Read list and Call chunk).
func encodeReadList(e *xdr.Encoder, l ReadList) {
	for i := range l {
		e.PutOptional(true)
		e.PutUint32(l[i].Position)
		encodeSegment(e, l[i].Segment)
	}
	e.PutOptional(false)
}
