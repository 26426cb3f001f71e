package rdmarpc

import (
	"fmt"
	"slices"

	"github.com/rdmagw/rdmagw/xdr"
)

// Version is the RPC-over-RDMA version this codec speaks (rdma_vers).
const Version = 1

// Proc is rdma_proc, the message type in the fourth fixed word.
type Proc uint32

const (
	ProcMsg   Proc = 0 // RDMA_MSG: chunk lists, then the Payload stream inline
	ProcNoMsg Proc = 1 // RDMA_NOMSG: chunk lists only; the Payload is in a chunk
	ProcMsgP  Proc = 2 // RDMA_MSGP: reserved (was "padded"); answered with ERR_CHUNK
	ProcDone  Proc = 3 // RDMA_DONE: reserved (Read-Read model); answered with ERR_CHUNK
	ProcError Proc = 4 // RDMA_ERROR: rdma_err and, for ERR_VERS, a version range
)

var procText = [...]string{"RDMA_MSG", "RDMA_NOMSG", "RDMA_MSGP", "RDMA_DONE", "RDMA_ERROR"}

func (p Proc) String() string {
	if int(p) < len(procText) {
		return procText[p]
	}
	return fmt.Sprintf("rdma_proc(%d)", uint32(p))
}

// Sizes on the wire.
const (
	// FixedHeaderSize is rdma_xid, rdma_vers, rdma_credit, rdma_proc.
	FixedHeaderSize = 16
	// MinHeaderSize is an RDMA_MSG or RDMA_NOMSG with three empty chunk
	// lists (RPCRDMA_HDRLEN_MIN in Linux).
	MinHeaderSize = FixedHeaderSize + 12
)

// Capacity of the storage inside a Header. Decoding or building a header
// that fits allocates nothing; beyond it the slices grow on the heap,
// bounded by Limits.
const (
	inlineReadSegments = 16 // Read list entries
	inlineWriteChunks  = 8  // Write list entries
	inlineSegments     = 16 // segments of all Write chunks and the Reply chunk
)

// Header is one decoded (or to-be-encoded) RPC-over-RDMA version-one
// transport header.
//
// Reads, Writes and Reply point into storage inside the Header itself, so
// a Header must not be copied by value once it holds chunks: the copy's
// slices would still point into the original. Use CopyFrom. Decode and
// Reset reuse the storage, invalidating slices taken from an earlier
// message.
type Header struct {
	XID    uint32 // rdma_xid, a copy of the RPC message's XID
	Vers   uint32 // rdma_vers
	Credit uint32 // rdma_credit: credits requested (call) or granted (reply)
	Proc   Proc   // rdma_proc

	// Chunk lists of RDMA_MSG, RDMA_NOMSG (and RDMA_MSGP).
	Reads    ReadList     // Read list, in wire order
	Writes   []WriteChunk // Write list, in wire order
	Reply    WriteChunk   // Reply chunk, meaningful when HasReply
	HasReply bool         // the Reply chunk is present (it may have 0 segments)

	// RDMA_MSGP only: rdma_align and rdma_thresh.
	Align, Thresh uint32

	// RDMA_ERROR only.
	ErrCode  ErrorCode // rdma_err
	VersLow  uint32    // ERR_VERS: lowest version the sender supports
	VersHigh uint32    // ERR_VERS: highest version the sender supports

	nseg       int // segStore entries in use
	readStore  [inlineReadSegments]ReadSegment
	writeStore [inlineWriteChunks]WriteChunk
	segStore   [inlineSegments]Segment
}

// Reset empties h for reuse without releasing its storage.
func (h *Header) Reset() {
	h.XID, h.Vers, h.Credit, h.Proc = 0, 0, 0, 0
	h.Reads = h.readStore[:0]
	h.Writes = h.writeStore[:0]
	h.Reply, h.HasReply = nil, false
	h.Align, h.Thresh = 0, 0
	h.ErrCode, h.VersLow, h.VersHigh = 0, 0, 0
	h.nseg = 0
}

// Init resets h and sets the fixed header of a version-one message, ready
// for the Append builders.
func (h *Header) Init(xid, credit uint32, proc Proc) {
	h.Reset()
	h.XID, h.Vers, h.Credit, h.Proc = xid, Version, credit, proc
}

// allocSegs returns n segments from the Header's storage, or from the heap
// when the storage is used up. The slice's capacity is capped so that an
// append by the caller cannot overwrite the next chunk's segments.
func (h *Header) allocSegs(n int) []Segment { return carve(h.segStore[:], &h.nseg, n) }

// carve returns the next n elements of store, of which *used are taken,
// capacity capped at n, or n new elements from the heap when store has no
// room left.
func carve[T any](store []T, used *int, n int) []T {
	if n <= len(store)-*used {
		s := store[*used : *used+n : *used+n]
		*used += n
		return s
	}
	return make([]T, n)
}

// PositionZero returns the Position-Zero Read chunk (Long call), if any.
func (h *Header) PositionZero() (ReadChunk, bool) { return h.Reads.PositionZero() }

// Decode parses the transport header at the start of b under limits lim
// (the zero Limits means the defaults) and returns its length: for
// RDMA_MSG the RPC message starts at b[n:].
//
// On error h holds what was decoded so far (always the fixed fields when
// b is at least 16 bytes long) and the error is one of *ShortError,
// *VersionError or *ChunkError; see ErrShort, ErrVersion and ErrChunk.
// RDMA_MSGP and RDMA_DONE are decoded completely (n is valid) and then
// reported as a *ChunkError with ReasonReservedProc.
//
// Decode does not allocate unless the header holds more than 16 Read
// segments, 8 Write chunks or 16 Write and Reply segments, or it fails.
func (h *Header) Decode(b []byte, lim Limits) (int, error) {
	h.Reset()
	if len(b) < 8 {
		return 0, &ShortError{Len: len(b)}
	}
	d := xdr.NewDecoder(b)
	h.XID, _ = d.Uint32()
	h.Vers, _ = d.Uint32()
	if h.Vers != Version {
		// Checked before anything else: a later version may lay out
		// everything after the fixed header differently.
		e := &VersionError{XID: h.XID, Vers: h.Vers}
		if d.Len() >= 8 {
			h.Credit, _ = d.Uint32()
			p, _ := d.Uint32()
			h.Proc = Proc(p)
			e.Proc, e.Complete = h.Proc, true
		}
		return 0, e
	}
	if d.Len() < 8 {
		return 0, h.truncated(InFixed, d.Offset(), -1, d.Skip(8))
	}
	h.Credit, _ = d.Uint32()
	p, _ := d.Uint32()
	h.Proc = Proc(p)
	lim = lim.withDefaults()

	switch h.Proc {
	case ProcMsg, ProcNoMsg:
		if err := h.decodeChunks(&d, &lim); err != nil {
			return 0, err
		}
		if h.Proc == ProcNoMsg && !h.HasReply && !h.Reads.hasPositionZero() {
			return 0, h.chunkError(ReasonNoPayload, InFixed, 12, -1, 0, 0, nil)
		}
	case ProcMsgP:
		if d.Len() < 8 {
			return 0, h.truncated(InPadded, d.Offset(), -1, d.Skip(8))
		}
		h.Align, _ = d.Uint32()
		h.Thresh, _ = d.Uint32()
		if err := h.decodeChunks(&d, &lim); err != nil {
			return 0, err
		}
		return d.Offset(), h.chunkError(ReasonReservedProc, InFixed, 12, -1, uint64(h.Proc), 0, nil)
	case ProcDone:
		return d.Offset(), h.chunkError(ReasonReservedProc, InFixed, 12, -1, uint64(h.Proc), 0, nil)
	case ProcError:
		if err := h.decodeErrorBody(&d); err != nil {
			return 0, err
		}
	default:
		return 0, h.chunkError(ReasonBadProc, InFixed, 12, -1, uint64(h.Proc), 0, nil)
	}
	return d.Offset(), nil
}

// decodeChunks reads struct rpcrdma1_chunks: the three optional lists.
func (h *Header) decodeChunks(d *xdr.Decoder, lim *Limits) error {
	if err := h.decodeReadList(d, lim); err != nil {
		return err
	}
	if err := h.decodeWriteList(d, lim); err != nil {
		return err
	}
	return h.decodeReplyChunk(d, lim)
}

// Encode writes h into b and returns the number of bytes written. It does
// not check h against Limits or the rules Decode enforces, so tests can
// build malformed headers; encode what Decode would accept and
// Decode(Encode(h)) reproduces h.
func (h *Header) Encode(b []byte) (int, error) {
	e := xdr.NewEncoder(b)
	e.PutUint32(h.XID)
	e.PutUint32(h.Vers)
	e.PutUint32(h.Credit)
	e.PutUint32(uint32(h.Proc))
	switch h.Proc {
	case ProcMsg, ProcNoMsg:
		h.encodeChunks(&e)
	case ProcMsgP:
		e.PutUint32(h.Align)
		e.PutUint32(h.Thresh)
		h.encodeChunks(&e)
	case ProcDone:
	case ProcError:
		if err := h.encodeErrorBody(&e); err != nil {
			return 0, err
		}
	default:
		return 0, fmt.Errorf("rpcrdma: encode xid 0x%08x: unknown procedure %d", h.XID, uint32(h.Proc))
	}
	if err := e.Err(); err != nil {
		return 0, err
	}
	return e.Len(), nil
}

func (h *Header) encodeChunks(e *xdr.Encoder) {
	encodeReadList(e, h.Reads)
	encodeWriteList(e, h.Writes)
	encodeReplyChunk(e, h.HasReply, h.Reply)
}

// EncodedLen is the number of bytes Encode writes for h.
func (h *Header) EncodedLen() int {
	n := FixedHeaderSize
	switch h.Proc {
	case ProcMsgP:
		n += 8
		fallthrough
	case ProcMsg, ProcNoMsg:
		n += h.Reads.encodedLen() + writeListLen(h.Writes) + 4
		if h.HasReply {
			n += h.Reply.encodedLen()
		}
	case ProcError:
		n += 4
		if h.ErrCode == ErrCodeVers {
			n += 8
		}
	}
	return n
}

// CopyFrom makes h a deep copy of src, in h's own storage.
func (h *Header) CopyFrom(src *Header) {
	if h == src {
		return
	}
	h.Reset()
	h.XID, h.Vers, h.Credit, h.Proc = src.XID, src.Vers, src.Credit, src.Proc
	h.Align, h.Thresh = src.Align, src.Thresh
	h.ErrCode, h.VersLow, h.VersHigh = src.ErrCode, src.VersLow, src.VersHigh
	h.Reads = append(h.Reads, src.Reads...)
	for _, w := range src.Writes {
		h.AppendWriteChunk(w...)
	}
	if src.HasReply {
		h.SetReplyChunk(src.Reply...)
	}
}

// Equal reports whether h and o describe the same message: the same fixed
// fields and the same body for their procedure. Storage is not compared.
func (h *Header) Equal(o *Header) bool {
	if h.XID != o.XID || h.Vers != o.Vers || h.Credit != o.Credit || h.Proc != o.Proc {
		return false
	}
	switch h.Proc {
	case ProcMsgP:
		if h.Align != o.Align || h.Thresh != o.Thresh {
			return false
		}
		fallthrough
	case ProcMsg, ProcNoMsg:
		return h.chunksEqual(o)
	case ProcError:
		if h.ErrCode != o.ErrCode {
			return false
		}
		return h.ErrCode != ErrCodeVers || (h.VersLow == o.VersLow && h.VersHigh == o.VersHigh)
	}
	return true
}

// chunksEqual reports whether h and o have the same chunk lists.
func (h *Header) chunksEqual(o *Header) bool {
	return slices.Equal(h.Reads, o.Reads) && slices.EqualFunc(h.Writes, o.Writes, WriteChunk.equal) &&
		h.HasReply == o.HasReply && (!h.HasReply || h.Reply.equal(o.Reply))
}

// String summarises h for logs, e.g.
// "xid 0x1234abcd v1 credit 128 RDMA_MSG reads 1/2 writes 1 reply 1".
func (h *Header) String() string {
	s := fmt.Sprintf("xid 0x%08x v%d credit %d %v", h.XID, h.Vers, h.Credit, h.Proc)
	switch h.Proc {
	case ProcMsg, ProcNoMsg, ProcMsgP:
		s += fmt.Sprintf(" reads %d/%d writes %d", h.Reads.ChunkCount(), len(h.Reads), len(h.Writes))
		if h.HasReply {
			s += fmt.Sprintf(" reply %d", len(h.Reply))
		}
	case ProcError:
		s += " " + h.ErrCode.String()
		if h.ErrCode == ErrCodeVers {
			s += fmt.Sprintf(" %d-%d", h.VersLow, h.VersHigh)
		}
	}
	return s
}

// chunkError builds the *ChunkError for h's message.
func (h *Header) chunkError(r Reason, w Where, off, idx int, val, limit uint64, err error) error {
	return &ChunkError{XID: h.XID, Proc: h.Proc, Reason: r, Where: w, Offset: off, Index: idx, Value: val, Limit: limit, Err: err}
}

// truncated wraps an error from the xdr package: a short buffer, or a
// discriminator that is not 0 or 1.
func (h *Header) truncated(w Where, off, idx int, err error) error {
	r := ReasonTruncated
	var val uint64
	if xe, ok := err.(*xdr.Error); ok {
		off = xe.Offset
		if xe.Err == xdr.ErrBadBool {
			r, val = ReasonBadDiscriminator, uint64(uint32(xe.Want))
		}
	}
	return h.chunkError(r, w, off, idx, val, 0, err)
}
