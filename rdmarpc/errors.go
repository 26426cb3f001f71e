package rdmarpc

import (
	"errors"
	"fmt"
)

// Sentinel errors, one per answer a receiver gives (test with errors.Is):
//
//	ErrShort    too short to carry an XID and a version: drop it, count it.
//	ErrVersion  version other than 1: answer RDMA_ERROR / ERR_VERS.
//	ErrChunk    version 1 but the header is malformed, over a Limit, or a
//	            reserved procedure: answer RDMA_ERROR / ERR_CHUNK (unless
//	            it was itself an RDMA_ERROR, which is dropped to avoid an
//	            error loop, rfc5666bis §5.5).
var (
	ErrShort   = errors.New("rpcrdma: message too short for a transport header")
	ErrVersion = errors.New("rpcrdma: unsupported transport version")
	ErrChunk   = errors.New("rpcrdma: malformed transport header")
)

// ShortError reports a message shorter than the 8 bytes that hold rdma_xid
// and rdma_vers. Nothing can be answered: without the XID the requester
// could not match the answer to a call.
type ShortError struct {
	Len  int // bytes received
	Need int // bytes needed; 0 means 8 (version one's rdma_xid and rdma_vers)
}

func (e *ShortError) Error() string {
	need := e.Need
	if need == 0 {
		need = 8
	}
	return fmt.Sprintf("rpcrdma: message of %d bytes is too short for a transport header (need %d)", e.Len, need)
}

// Is reports whether target is ErrShort.
func (e *ShortError) Is(target error) bool { return target == ErrShort }

// VersionError reports an rdma_vers other than 1. It is returned before
// anything past the fixed header is read, so it carries what an ERR_VERS
// answer needs: the XID and the version to echo (rfc5666bis §5.5
// says the RDMA_ERROR carries the failing message's rdma_vers).
type VersionError struct {
	XID  uint32
	Vers uint32
	// Proc is the fourth fixed word (rdma_htype in every version), valid
	// only when Complete is set. A responder must not answer an RDMA_ERROR
	// of any version with another error.
	Proc     Proc
	Complete bool // all four fixed words were present
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("rpcrdma: xid 0x%08x: unsupported transport version %d (want %d)", e.XID, e.Vers, Version)
}

// Is reports whether target is ErrVersion.
func (e *VersionError) Is(target error) bool { return target == ErrVersion }

// Reason says what made a version-one header malformed. Every Reason maps
// to ERR_CHUNK.
type Reason uint8

const (
	// ReasonTruncated: the header ended in the middle of an item.
	ReasonTruncated Reason = iota + 1
	// ReasonBadDiscriminator: an optional-data discriminator (the "1" in
	// front of a list entry or the Reply chunk) was neither 0 nor 1.
	ReasonBadDiscriminator
	// ReasonBadProc: rdma_proc is not a version-one procedure.
	ReasonBadProc
	// ReasonReservedProc: RDMA_MSGP or RDMA_DONE. rfc5666bis §5.6:
	// senders MUST NOT send them; receivers SHOULD answer ERR_CHUNK.
	ReasonReservedProc
	// ReasonBadErrorCode: an RDMA_ERROR whose rdma_err is neither
	// ERR_VERS nor ERR_CHUNK. Such a message is silently discarded.
	ReasonBadErrorCode
	// ReasonTooManySegments: a chunk, or the whole Read list, holds more
	// segments than Limits allow.
	ReasonTooManySegments
	// ReasonTooManyChunks: more Read chunks (distinct Positions) or Write
	// chunks than Limits allow.
	ReasonTooManyChunks
	// ReasonChunkTooLarge: the sum of a chunk's segment lengths exceeds
	// Limits.MaxChunkBytes.
	ReasonChunkTooLarge
	// ReasonBadPosition: a Read segment's Position is not a multiple of
	// four; every XDR item starts on a 4-byte boundary (rfc5666bis
	// §4.4.5.1).
	ReasonBadPosition
	// ReasonPositionOrder: a Read segment's Position is lower than the one
	// before it. Segments of one Read chunk are consecutive in the list and
	// Read chunks appear in Payload stream order (see doc.go).
	ReasonPositionOrder
	// ReasonNoPayload: an RDMA_NOMSG with neither a Position-Zero Read
	// chunk nor a Reply chunk, so its Payload stream is nowhere
	// (rfc5666bis §5.5.2: "an RDMA_NOMSG message that has no chunk lists").
	ReasonNoPayload
	// ReasonSegmentWraps: a segment's Offset plus Length runs past 2^64.
	// No registration can describe such memory, so the segment is
	// malformed, not merely out of bounds.
	ReasonSegmentWraps
)

var reasonText = [...]string{
	ReasonTruncated:        "header truncated",
	ReasonBadDiscriminator: "optional-data discriminator not 0 or 1",
	ReasonBadProc:          "unknown procedure",
	ReasonReservedProc:     "reserved procedure",
	ReasonBadErrorCode:     "unknown RDMA_ERROR code",
	ReasonTooManySegments:  "too many segments",
	ReasonTooManyChunks:    "too many chunks",
	ReasonChunkTooLarge:    "chunk too large",
	ReasonBadPosition:      "Read segment Position not a multiple of 4",
	ReasonPositionOrder:    "Read segment Position out of order",
	ReasonNoPayload:        "RDMA_NOMSG without Position-Zero Read chunk or Reply chunk",
	ReasonSegmentWraps:     "segment Offset+Length wraps past 2^64",
}

func (r Reason) String() string {
	if s, ok := v2ReasonText[r]; ok {
		return s
	}
	if int(r) < len(reasonText) && reasonText[r] != "" {
		return reasonText[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Where names the part of the header a ChunkError was found in.
type Where uint8

const (
	InFixed Where = iota
	InReadList
	InWriteList
	InReplyChunk
	InErrorBody
	InPadded // rdma_align / rdma_thresh of RDMA_MSGP
)

var whereText = [...]string{
	InFixed:      "fixed header",
	InReadList:   "Read list",
	InWriteList:  "Write list",
	InReplyChunk: "Reply chunk",
	InErrorBody:  "RDMA_ERROR body",
	InPadded:     "RDMA_MSGP body",
}

func (w Where) String() string {
	if s, ok := v2WhereText[w]; ok {
		return s
	}
	if int(w) < len(whereText) {
		return whereText[w]
	}
	return fmt.Sprintf("Where(%d)", uint8(w))
}

// ChunkError reports a malformed version-one header. It carries the fixed
// fields so the caller can form the ERR_CHUNK answer from the error alone.
type ChunkError struct {
	XID    uint32
	Proc   Proc // rdma_proc as received (check it: never answer an RDMA_ERROR)
	Reason Reason
	Where  Where
	Offset int // byte offset of the offending item in the header
	// Index is the item's ordinal within Where: the Read segment, the
	// Write chunk, or the segment within the Reply chunk. -1 when not
	// applicable.
	Index int
	Value uint64 // the offending count, Position or byte total
	Limit uint64 // the limit it broke, when Reason is a limit
	Err   error  // the underlying *xdr.Error, if any
}

func (e *ChunkError) Error() string {
	s := fmt.Sprintf("rpcrdma: xid 0x%08x %v: %v: %v at offset %d", e.XID, e.Proc, e.Where, e.Reason, e.Offset)
	if e.Index >= 0 {
		s += fmt.Sprintf(" (entry %d)", e.Index)
	}
	switch e.Reason {
	case ReasonTooManySegments, ReasonTooManyChunks, ReasonChunkTooLarge:
		s += fmt.Sprintf(": %d > %d", e.Value, e.Limit)
	case ReasonBadProc, ReasonBadErrorCode, ReasonBadPosition, ReasonPositionOrder, ReasonBadDiscriminator:
		s += fmt.Sprintf(": value %d", e.Value)
	}
	if e.Err != nil && e.Reason == ReasonTruncated {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is ErrChunk.
func (e *ChunkError) Is(target error) bool { return target == ErrChunk }

// Unwrap returns the underlying XDR error, if any.
func (e *ChunkError) Unwrap() error { return e.Err }
