package rdmarpc

import "github.com/rdmagw/rdmagw/xdr"

// WriteChunk is a counted array of segments (struct rpcrdma1_write_chunk):
// one Write chunk of the Write list, or the Reply chunk. Segments have no
// Position; a responder fills them in array order and returns the chunk
// with each Length rewritten to the bytes it wrote (zero when unused).
type WriteChunk []Segment

// Len is the chunk's length in bytes: the sum of its segment lengths. In a
// call it is the room offered; in a reply, the bytes written.
func (w WriteChunk) Len() uint64 {
	var n uint64
	for i := range w {
		n += uint64(w[i].Length)
	}
	return n
}

func (w WriteChunk) equal(o WriteChunk) bool {
	if len(w) != len(o) {
		return false
	}
	for i := range w {
		if w[i] != o[i] {
			return false
		}
	}
	return true
}

// encodedLen is the size of the counted array (not the discriminator).
func (w WriteChunk) encodedLen() int { return 4 + len(w)*segmentSize }

func writeListLen(ws []WriteChunk) int {
	n := 4
	for _, w := range ws {
		n += 4 + w.encodedLen()
	}
	return n
}

// AppendWriteChunk adds a Write chunk made of segs to the Write list. The
// segments are copied into h.
func (h *Header) AppendWriteChunk(segs ...Segment) {
	w := WriteChunk(h.allocSegs(len(segs)))
	copy(w, segs)
	h.Writes = append(h.Writes, w)
}

// The Write list on the wire is an XDR linked list of counted arrays:
//
//	1 | N | HLOO x N | 1 | M | HLOO x M | 0
//
// A Write chunk with zero segments is accepted: one server implementation
// answers a failed NFS READ with such a chunk (implementation-experience
// draft, section 3.9), and in a call it merely offers no room.
func (h *Header) decodeWriteList(d *xdr.Decoder, lim *Limits) error {
	for i := 0; ; i++ {
		more, err := d.Optional()
		if err != nil {
			return h.truncated(InWriteList, d.Offset(), i, err)
		}
		if !more {
			return nil
		}
		if i >= lim.MaxWriteChunks {
			return h.chunkError(ReasonTooManyChunks, InWriteList, d.Offset(), i, uint64(i)+1, uint64(lim.MaxWriteChunks), nil)
		}
		w, err := h.decodeWriteChunk(d, lim, InWriteList, i)
		if err != nil {
			return err
		}
		h.Writes = append(h.Writes, w)
	}
}

// decodeWriteChunk reads one counted array of segments. idx names the
// chunk in errors.
func (h *Header) decodeWriteChunk(d *xdr.Decoder, lim *Limits, where Where, idx int) (WriteChunk, error) {
	off := d.Offset()
	n, err := d.ArrayLen(lim.MaxSegmentsPerChunk, segmentSize)
	if err != nil {
		if xe, ok := err.(*xdr.Error); ok && xe.Err == xdr.ErrTooLong {
			return nil, h.chunkError(ReasonTooManySegments, where, off, idx, uint64(uint32(xe.Want)), uint64(lim.MaxSegmentsPerChunk), nil)
		}
		return nil, h.truncated(where, off, idx, err)
	}
	// ArrayLen has checked that n segments fit in what is left, so the
	// reads below cannot fail.
	w := WriteChunk(h.allocSegs(n))
	var total uint64
	for i := range w {
		w[i], _ = decodeSegment(d)
		if w[i].wraps() {
			return nil, h.chunkError(ReasonSegmentWraps, where, off, idx, w[i].Offset, 0, nil)
		}
		total += uint64(w[i].Length)
	}
	if total > lim.MaxChunkBytes {
		return nil, h.chunkError(ReasonChunkTooLarge, where, off, idx, total, lim.MaxChunkBytes, nil)
	}
	return w, nil
}

func encodeWriteChunk(e *xdr.Encoder, w WriteChunk) {
	e.PutUint32(uint32(len(w)))
	for i := range w {
		encodeSegment(e, w[i])
	}
}

func encodeWriteList(e *xdr.Encoder, ws []WriteChunk) {
	for _, w := range ws {
		e.PutOptional(true)
		encodeWriteChunk(e, w)
	}
	e.PutOptional(false)
}
