package rdmarpc

import (
	"errors"
	"fmt"

	"github.com/rdmagw/rdmagw/xdr"
)

// V2ErrCode is rdma_err of an RDMA2_ERROR (rpcrdma2_errcode).
type V2ErrCode uint32

// Error codes (the XDR's RDMA2_ERR_*). The draft's section on each says
// when it is sent; the arm each one carries is in V2ErrorBody.
const (
	V2ErrVers          V2ErrCode = 1   // rdma_vers not supported: VersLow..VersHigh
	V2ErrBadXDR        V2ErrCode = 2   // the header cannot be parsed
	V2ErrBadPropVal    V2ErrCode = 3   // a known transport property is malformed
	V2ErrInvalHType    V2ErrCode = 4   // unknown or unsupported rdma_htype
	V2ErrInvalCont     V2ErrCode = 5   // a continuation sequence broken
	V2ErrReadChunks    V2ErrCode = 6   // too many Read chunks: MaxChunks
	V2ErrWriteChunks   V2ErrCode = 7   // too many Write chunks: MaxChunks
	V2ErrSegments      V2ErrCode = 8   // a chunk with too many segments: MaxSegments
	V2ErrWriteResource V2ErrCode = 9   // a Write chunk too short: ChunkIndex, LengthNeeded
	V2ErrReplyResource V2ErrCode = 10  // the Reply chunk too short: LengthNeeded
	V2ErrVersMismatch  V2ErrCode = 11  // rdma_vers differs from the connection's
	V2ErrSystem        V2ErrCode = 100 // anything else
)

var v2ErrText = map[V2ErrCode]string{
	V2ErrVers:          "RDMA2_ERR_VERS",
	V2ErrBadXDR:        "RDMA2_ERR_BAD_XDR",
	V2ErrBadPropVal:    "RDMA2_ERR_BAD_PROPVAL",
	V2ErrInvalHType:    "RDMA2_ERR_INVAL_HTYPE",
	V2ErrInvalCont:     "RDMA2_ERR_INVAL_CONT",
	V2ErrReadChunks:    "RDMA2_ERR_READ_CHUNKS",
	V2ErrWriteChunks:   "RDMA2_ERR_WRITE_CHUNKS",
	V2ErrSegments:      "RDMA2_ERR_SEGMENTS",
	V2ErrWriteResource: "RDMA2_ERR_WRITE_RESOURCE",
	V2ErrReplyResource: "RDMA2_ERR_REPLY_RESOURCE",
	V2ErrVersMismatch:  "RDMA2_ERR_VERS_MISMATCH",
	V2ErrSystem:        "RDMA2_ERR_SYSTEM",
}

func (c V2ErrCode) String() string {
	if s, ok := v2ErrText[c]; ok {
		return s
	}
	return fmt.Sprintf("rdma_err(%d)", uint32(c))
}

// Known reports whether c is an error code of the base protocol. A
// receiver MUST silently discard an RDMA2_ERROR with an unknown code.
func (c V2ErrCode) Known() bool { _, ok := v2ErrText[c]; return ok }

// V2ErrorBody is union rpcrdma2_hdr_error: rdma_err and the arm it
// selects. Fields of other arms are ignored (and left zero by Decode).
type V2ErrorBody struct {
	Code              V2ErrCode
	VersLow, VersHigh uint32 // VERS: rdma_vrange
	MaxChunks         uint32 // READ_CHUNKS, WRITE_CHUNKS: rdma_max_chunks
	MaxSegments       uint32 // SEGMENTS: rdma_max_segments
	ChunkIndex        uint32 // WRITE_RESOURCE: rdma_chunk_index, 1-based, 0 = unknown
	LengthNeeded      uint32 // WRITE_RESOURCE, REPLY_RESOURCE: rdma_length_needed
}

// canonical returns b with the fields of other arms zeroed.
func (b V2ErrorBody) canonical() V2ErrorBody {
	c := V2ErrorBody{Code: b.Code}
	switch b.Code {
	case V2ErrVers:
		c.VersLow, c.VersHigh = b.VersLow, b.VersHigh
	case V2ErrReadChunks, V2ErrWriteChunks:
		c.MaxChunks = b.MaxChunks
	case V2ErrSegments:
		c.MaxSegments = b.MaxSegments
	case V2ErrWriteResource:
		c.ChunkIndex, c.LengthNeeded = b.ChunkIndex, b.LengthNeeded
	case V2ErrReplyResource:
		c.LengthNeeded = b.LengthNeeded
	}
	return c
}

func (b V2ErrorBody) String() string {
	s := b.Code.String()
	switch b.Code {
	case V2ErrVers:
		s += fmt.Sprintf(" %d-%d", b.VersLow, b.VersHigh)
	case V2ErrReadChunks, V2ErrWriteChunks:
		s += fmt.Sprintf(" max %d", b.MaxChunks)
	case V2ErrSegments:
		s += fmt.Sprintf(" max %d", b.MaxSegments)
	case V2ErrWriteResource:
		s += fmt.Sprintf(" chunk %d needs %d", b.ChunkIndex, b.LengthNeeded)
	case V2ErrReplyResource:
		s += fmt.Sprintf(" needs %d", b.LengthNeeded)
	}
	return s
}

// armWords is the number of words after rdma_err for code c.
func (c V2ErrCode) armWords() int {
	switch c {
	case V2ErrVers, V2ErrWriteResource:
		return 2
	case V2ErrReadChunks, V2ErrWriteChunks, V2ErrSegments, V2ErrReplyResource:
		return 1
	}
	return 0
}

func (b V2ErrorBody) encodedLen() int { return 4 + 4*b.Code.armWords() }

func (b V2ErrorBody) encode(e *xdr.Encoder) {
	e.PutUint32(uint32(b.Code))
	switch b.Code {
	case V2ErrVers:
		e.PutUint32(b.VersLow)
		e.PutUint32(b.VersHigh)
	case V2ErrReadChunks, V2ErrWriteChunks:
		e.PutUint32(b.MaxChunks)
	case V2ErrSegments:
		e.PutUint32(b.MaxSegments)
	case V2ErrWriteResource:
		e.PutUint32(b.ChunkIndex)
		e.PutUint32(b.LengthNeeded)
	case V2ErrReplyResource:
		e.PutUint32(b.LengthNeeded)
	}
}

func (h *V2Header) decodeErrorBody(d *xdr.Decoder) error {
	c, err := d.Uint32()
	if err != nil {
		return h.truncated(InErrorBody, err)
	}
	b := &h.ErrBody
	b.Code = V2ErrCode(c)
	if d.Len() < 4*b.Code.armWords() {
		return h.truncated(InErrorBody, d.Skip(4*b.Code.armWords()))
	}
	switch b.Code {
	case V2ErrVers:
		b.VersLow, _ = d.Uint32()
		b.VersHigh, _ = d.Uint32()
	case V2ErrReadChunks, V2ErrWriteChunks:
		b.MaxChunks, _ = d.Uint32()
	case V2ErrSegments:
		b.MaxSegments, _ = d.Uint32()
	case V2ErrWriteResource:
		b.ChunkIndex, _ = d.Uint32()
		b.LengthNeeded, _ = d.Uint32()
	case V2ErrReplyResource:
		b.LengthNeeded, _ = d.Uint32()
	}
	return nil
}

// Reasons and places that only version two has (they continue Reason and
// Where with values of their own).
const (
	// ReasonBadVersion: rdma_vers is not 2 (answer RDMA2_ERR_VERS, or
	// RDMA2_ERR_VERS_MISMATCH once the connection's version is fixed:
	// the engine knows which).
	ReasonBadVersion Reason = 32 + iota
	// ReasonBadHType: rdma_htype unknown (RDMA2_ERR_INVAL_HTYPE).
	ReasonBadHType
	// ReasonBadPropVal: a known property's rdma_data is not the XDR
	// encoding of its type (RDMA2_ERR_BAD_PROPVAL).
	ReasonBadPropVal
	// ReasonNoCallChunk: an RDMA2_CALL_EXTERNAL without a Call chunk
	// ("one or more Read segments").
	ReasonNoCallChunk
	// ReasonCallPosition: a Call chunk segment with a Position other
	// than zero (the Call chunk is the body chunk, at Position zero).
	ReasonCallPosition
	// ReasonDataPositionZero: a Position-zero Read chunk in the Read list
	// of a version-two call (it holds data item chunks only).
	ReasonDataPositionZero
	// ReasonNoReplyChunk: an RDMA2_REPLY_EXTERNAL without its Reply
	// chunk ("MUST contain exactly one Reply chunk").
	ReasonNoReplyChunk
)

var v2ReasonText = map[Reason]string{
	ReasonBadVersion:       "unsupported transport version",
	ReasonBadHType:         "unknown header type",
	ReasonBadPropVal:       "malformed transport property value",
	ReasonNoCallChunk:      "RDMA2_CALL_EXTERNAL without a Call chunk",
	ReasonCallPosition:     "Call chunk segment Position not zero",
	ReasonDataPositionZero: "Position-zero Read chunk in the Read list",
	ReasonNoReplyChunk:     "RDMA2_REPLY_EXTERNAL without a Reply chunk",
}

const (
	// InCallChunk: the Call chunk of RDMA2_CALL_EXTERNAL.
	InCallChunk Where = 32 + iota
	// InProps: the transport property set of RDMA2_CONNPROP_*.
	InProps
	// InV2Body: rdma_inv_handle or rdma_remaining.
	InV2Body
	// InRPCMessage: the RPC message after the header (its first word).
	InRPCMessage
)

var v2WhereText = map[Where]string{
	InCallChunk:  "Call chunk",
	InProps:      "transport properties",
	InV2Body:     "header body",
	InRPCMessage: "RPC message",
}

// Sentinels for version-two decoding errors (errors.Is); a *V2Error with
// Code V2ErrVers also matches ErrVersion.
var (
	ErrV2Header   = errors.New("rpcrdma: malformed version-two transport header")
	ErrBadPropVal = errors.New("rpcrdma: malformed transport property")
)

// V2Error reports a version-two header that cannot be accepted. Code is
// the RDMA2_ERROR answer it calls for (with Max for READ_CHUNKS,
// WRITE_CHUNKS and SEGMENTS); Reason, Where, Offset and Index say what was
// wrong and where. Answerable says whether an answer is due at all.
//
// Mapping: ReasonBadVersion is V2ErrVers; ReasonBadHType V2ErrInvalHType;
// ReasonBadPropVal V2ErrBadPropVal; a Limits breach V2ErrReadChunks,
// V2ErrWriteChunks or V2ErrSegments with the limit as Max, except
// ReasonChunkTooLarge (a chunk over Limits.MaxChunkBytes, a local policy
// the draft has no code for), which is V2ErrSystem; every other Reason
// V2ErrBadXDR.
type V2Error struct {
	XID    uint32
	Vers   uint32
	HType  HType     // rdma_htype as received
	Code   V2ErrCode // the answer owed
	Max    uint32    // READ_CHUNKS, WRITE_CHUNKS: max chunks; SEGMENTS: max segments
	Reason Reason
	Where  Where
	Offset int    // byte offset of the offending item
	Index  int    // entry within Where (segment, chunk, property); -1 if none
	Value  uint64 // the offending value (count, Position, propid, version)
	Limit  uint64 // the limit broken, for limit Reasons
	Err    error  // underlying *xdr.Error, if any
}

func (e *V2Error) Error() string {
	s := fmt.Sprintf("rpcrdma: xid 0x%08x v%d %v: %v: %v at offset %d", e.XID, e.Vers, e.HType, e.Where, e.Reason, e.Offset)
	if e.Index >= 0 {
		s += fmt.Sprintf(" (entry %d)", e.Index)
	}
	switch e.Reason {
	case ReasonTooManySegments, ReasonTooManyChunks, ReasonChunkTooLarge:
		s += fmt.Sprintf(": %d > %d", e.Value, e.Limit)
	case ReasonTruncated:
		if e.Err != nil {
			s += ": " + e.Err.Error()
		}
	case ReasonNoCallChunk, ReasonNoReplyChunk:
	default:
		s += fmt.Sprintf(": value %d", e.Value)
	}
	return s + " (" + e.Code.String() + ")"
}

// Is matches ErrVersion (Code V2ErrVers), ErrBadPropVal (Code
// V2ErrBadPropVal) and ErrV2Header (every other Code).
func (e *V2Error) Is(target error) bool {
	switch target {
	case ErrVersion:
		return e.Code == V2ErrVers
	case ErrBadPropVal:
		return e.Code == V2ErrBadPropVal
	case ErrV2Header:
		return e.Code != V2ErrVers
	}
	return false
}

// Unwrap returns the underlying XDR error, if any.
func (e *V2Error) Unwrap() error { return e.Err }

// Answerable reports whether the receiver owes the sender an RDMA2_ERROR
// for e: never for a received RDMA2_ERROR (of any version: the fourth
// word is 4 in both), which could start an error loop.
func (e *V2Error) Answerable() bool { return e.HType != HTypeError }

// Body is the RDMA2_ERROR body answering e; versLow..versHigh is the
// range the receiver supports (used for V2ErrVers).
func (e *V2Error) Body(versLow, versHigh uint32) V2ErrorBody {
	b := V2ErrorBody{Code: e.Code}
	switch e.Code {
	case V2ErrVers:
		b.VersLow, b.VersHigh = versLow, versHigh
	case V2ErrReadChunks, V2ErrWriteChunks:
		b.MaxChunks = e.Max
	case V2ErrSegments:
		b.MaxSegments = e.Max
	}
	return b
}

// SetErrorAnswer makes h the RDMA2_ERROR owed for err, a Decode error,
// echoing its XID and version and granting credit. It returns false, and
// leaves h alone, when nothing is owed: a *ShortError, an error about a
// received RDMA2_ERROR, or an error not from V2Header.Decode.
func (h *V2Header) SetErrorAnswer(err error, credit, versLow, versHigh uint32) bool {
	var ve *V2Error
	if !errors.As(err, &ve) || !ve.Answerable() {
		return false
	}
	h.Init(ve.XID, credit, HTypeError)
	h.Vers = ve.Vers
	h.ErrBody = ve.Body(versLow, versHigh)
	return true
}

// fail builds the *V2Error for h's message.
func (h *V2Header) fail(c V2ErrCode, r Reason, w Where, off, idx int, val, limit uint64, err error) error {
	return &V2Error{XID: h.XID, Vers: h.Vers, HType: h.HType, Code: c, Reason: r, Where: w,
		Offset: off, Index: idx, Value: val, Limit: limit, Err: err}
}

// truncated wraps an error from the xdr package.
func (h *V2Header) truncated(w Where, err error) error {
	off := 0
	if xe, ok := err.(*xdr.Error); ok {
		off = xe.Offset
	}
	return h.fail(V2ErrBadXDR, ReasonTruncated, w, off, -1, 0, 0, err)
}

// wrap turns a *ChunkError from the version-one list decoders into a
// *V2Error, placing it in w when w is not zero.
func (h *V2Header) wrap(err error, w Where) error {
	ce, ok := err.(*ChunkError)
	if !ok {
		return h.fail(V2ErrBadXDR, ReasonTruncated, InFixed, 0, -1, 0, 0, err)
	}
	ve := &V2Error{XID: h.XID, Vers: h.Vers, HType: h.HType, Code: V2ErrBadXDR, Reason: ce.Reason, Where: ce.Where,
		Offset: ce.Offset, Index: ce.Index, Value: ce.Value, Limit: ce.Limit, Err: ce.Err}
	if w != 0 {
		ve.Where = w
	}
	switch ce.Reason {
	case ReasonTooManyChunks:
		ve.Code = V2ErrReadChunks
		if ce.Where == InWriteList {
			ve.Code = V2ErrWriteChunks
		}
		ve.Max = uint32(ce.Limit)
	case ReasonTooManySegments:
		ve.Code, ve.Max = V2ErrSegments, uint32(ce.Limit)
	case ReasonChunkTooLarge:
		ve.Code = V2ErrSystem
	}
	return ve
}
