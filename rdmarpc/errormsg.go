package rdmarpc

import (
	"errors"
	"fmt"

	"github.com/rdmagw/rdmagw/xdr"
)

// ErrorCode is rdma_err, the body of an RDMA_ERROR message.
type ErrorCode uint32

const (
	// ErrCodeVers (ERR_VERS): the receiver does not support the message's
	// rdma_vers; the body names the range it does support.
	ErrCodeVers ErrorCode = 1
	// ErrCodeChunk (ERR_CHUNK, ERR_BADHEADER in drafts): the header could
	// not be parsed, or used a reserved procedure.
	ErrCodeChunk ErrorCode = 2
	// ErrCodeGarbageArgs is no rdma_err: it names, for ErrorSent, the
	// RPC reply (accepted, GARBAGE_ARGS) the responder makes itself for a
	// call whose chunks do not fit its Payload stream (RFC 8166 §4.5.2).
	ErrCodeGarbageArgs ErrorCode = 0x100
)

func (c ErrorCode) String() string {
	switch c {
	case ErrCodeVers:
		return "ERR_VERS"
	case ErrCodeChunk:
		return "ERR_CHUNK"
	case ErrCodeGarbageArgs:
		return "GARBAGE_ARGS"
	}
	return fmt.Sprintf("rdma_err(%d)", uint32(c))
}

// Sizes of the two RDMA_ERROR messages.
const (
	ErrVersSize  = FixedHeaderSize + 12 // rdma_err, rdma_vers_low, rdma_vers_high
	ErrChunkSize = FixedHeaderSize + 4  // rdma_err
)

// RDMA_ERROR body on the wire:
//
//	+---------+---------+---------+
//	| ERR_VERS|   low   |  high   |
//	+---------+---------+---------+
//	|ERR_CHUNK|
//	+---------+
func (h *Header) decodeErrorBody(d *xdr.Decoder) error {
	off := d.Offset()
	c, err := d.Uint32()
	if err != nil {
		return h.truncated(InErrorBody, off, -1, err)
	}
	h.ErrCode = ErrorCode(c)
	switch h.ErrCode {
	case ErrCodeVers:
		if d.Len() < 8 {
			return h.truncated(InErrorBody, d.Offset(), -1, d.Skip(8))
		}
		h.VersLow, _ = d.Uint32()
		h.VersHigh, _ = d.Uint32()
	case ErrCodeChunk:
	default:
		return h.chunkError(ReasonBadErrorCode, InErrorBody, off, -1, uint64(c), 0, nil)
	}
	return nil
}

func (h *Header) encodeErrorBody(e *xdr.Encoder) error {
	switch h.ErrCode {
	case ErrCodeVers:
		e.PutUint32(uint32(ErrCodeVers))
		e.PutUint32(h.VersLow)
		e.PutUint32(h.VersHigh)
	case ErrCodeChunk:
		e.PutUint32(uint32(ErrCodeChunk))
	default:
		return fmt.Errorf("rpcrdma: encode xid 0x%08x: unknown RDMA_ERROR code %d", h.XID, uint32(h.ErrCode))
	}
	return nil
}

// SetErrVers makes h an RDMA_ERROR / ERR_VERS advertising versions
// low..high (inclusive). The fixed fields are left as they are.
func (h *Header) SetErrVers(low, high uint32) {
	h.Proc, h.ErrCode, h.VersLow, h.VersHigh = ProcError, ErrCodeVers, low, high
}

// SetErrChunk makes h an RDMA_ERROR / ERR_CHUNK.
func (h *Header) SetErrChunk() { h.Proc, h.ErrCode = ProcError, ErrCodeChunk }

// EncodeErrVers writes an RDMA_ERROR / ERR_VERS answer into b (at least
// ErrVersSize bytes). rfc5666bis §5.5: rdma_xid and rdma_vers echo
// the failing message (the Linux server writes 1 into rdma_vers instead);
// low..high is the range supported here, 1..1 for this codec.
func EncodeErrVers(b []byte, xid, vers, credit, low, high uint32) (int, error) {
	e := xdr.NewEncoder(b)
	putFixed(&e, xid, vers, credit, ProcError)
	e.PutUint32(uint32(ErrCodeVers))
	e.PutUint32(low)
	e.PutUint32(high)
	return e.Len(), e.Err()
}

// EncodeErrChunk writes an RDMA_ERROR / ERR_CHUNK answer into b (at least
// ErrChunkSize bytes).
func EncodeErrChunk(b []byte, xid, vers, credit uint32) (int, error) {
	e := xdr.NewEncoder(b)
	putFixed(&e, xid, vers, credit, ProcError)
	e.PutUint32(uint32(ErrCodeChunk))
	return e.Len(), e.Err()
}

func putFixed(e *xdr.Encoder, xid, vers, credit uint32, p Proc) {
	e.PutUint32(xid)
	e.PutUint32(vers)
	e.PutUint32(credit)
	e.PutUint32(uint32(p))
}

// EncodeErrorAnswer writes into b the RDMA_ERROR a receiver owes for a
// Decode error, granting credit credits:
//
//	*VersionError  ERR_VERS 1..1, echoing the XID and version
//	*ChunkError    ERR_CHUNK, echoing the XID, version 1
//
// It writes nothing and returns 0, nil when no answer is due: for a
// *ShortError (no XID to answer), for an error about a received
// RDMA_ERROR (answering it could start an error loop; rfc5666bis §5.5
// says a malformed RDMA_ERROR is silently discarded), and for errors not
// from Decode.
func EncodeErrorAnswer(b []byte, err error, credit uint32) (int, error) {
	var ve *VersionError
	if errors.As(err, &ve) {
		if ve.Complete && ve.Proc == ProcError {
			return 0, nil
		}
		return EncodeErrVers(b, ve.XID, ve.Vers, credit, Version, Version)
	}
	var ce *ChunkError
	if errors.As(err, &ce) {
		if ce.Proc == ProcError {
			return 0, nil
		}
		return EncodeErrChunk(b, ce.XID, Version, credit)
	}
	return 0, nil
}
