package tcprpc

import (
	"errors"
	"fmt"
)

// Sentinel causes. Errors returned by this package wrap one of these (or an
// I/O error, or an *xdr.Error for a truncated header); test with errors.Is.
var (
	// ErrRecordTooLarge: the fragments of one record add up to more than
	// the reader's MaxRecord.
	ErrRecordTooLarge = errors.New("record exceeds size limit")
	// ErrTooManyFragments: one record was split into more fragments than
	// the reader's MaxFragments (zero-length fragments count too).
	ErrTooManyFragments = errors.New("record has too many fragments")
	// ErrShortRecord: the record ended before the caller's buffer was
	// full or before the bytes asked to be discarded.
	ErrShortRecord = errors.New("record shorter than expected")
	// ErrPeekTooLarge: Peek asked for more than the read-ahead buffer holds.
	ErrPeekTooLarge = errors.New("peek larger than read-ahead buffer")

	// ErrNotCall: msg_type is not CALL where a call was expected.
	ErrNotCall = errors.New("message is not a call")
	// ErrNotReply: msg_type is not REPLY where a reply was expected.
	ErrNotReply = errors.New("message is not a reply")
	// ErrBadMsgType: msg_type is neither CALL nor REPLY.
	ErrBadMsgType = errors.New("unknown message type")
	// ErrBadRPCVersion: a call's rpcvers is not 2. The server's answer is
	// MSG_DENIED/RPC_MISMATCH (see RPCMismatchReply).
	ErrBadRPCVersion = errors.New("rpc version is not 2")
	// ErrAuthTooLong: an opaque_auth body is longer than MaxAuthBytes.
	ErrAuthTooLong = errors.New("auth body exceeds 400 bytes")
	// ErrBadReplyStat: reply_stat is neither MSG_ACCEPTED nor MSG_DENIED.
	ErrBadReplyStat = errors.New("unknown reply_stat")
	// ErrBadAcceptStat: accept_stat is not one RFC 5531 defines.
	ErrBadAcceptStat = errors.New("unknown accept_stat")
	// ErrBadRejectStat: reject_stat is neither RPC_MISMATCH nor AUTH_ERROR.
	ErrBadRejectStat = errors.New("unknown reject_stat")

	// ErrBadGSSVersion: rpc_gss_cred_t version is not RPCSEC_GSS_VERS_1.
	ErrBadGSSVersion = errors.New("unknown RPCSEC_GSS version")
	// ErrBadGSSProc: gss_proc is not DATA, INIT, CONTINUE_INIT or DESTROY.
	ErrBadGSSProc = errors.New("unknown RPCSEC_GSS procedure")
	// ErrBadGSSService: service is not none, integrity or privacy.
	ErrBadGSSService = errors.New("unknown RPCSEC_GSS service")
)

// FrameError reports a record-marking violation. The stream cannot be
// resynchronised after one, so the RecordReader returns it from every call
// that follows and the connection should be closed.
type FrameError struct {
	Record   int64 // index of the record on the stream, from 0
	Fragment int   // index of the offending fragment within the record, from 0
	Offset   int64 // stream offset of the offending fragment header
	Size     int64 // record bytes announced up to and including this fragment
	Limit    int64 // the limit that was exceeded (bytes or fragments)
	Err      error // ErrRecordTooLarge or ErrTooManyFragments
}

func (e *FrameError) Error() string {
	if e.Err == ErrTooManyFragments {
		return fmt.Sprintf("tcprpc: record %d, fragment header at stream offset %d: %v (limit %d)",
			e.Record, e.Offset, e.Err, e.Limit)
	}
	return fmt.Sprintf("tcprpc: record %d, fragment %d header at stream offset %d: %v (%d > %d bytes)",
		e.Record, e.Fragment, e.Offset, e.Err, e.Size, e.Limit)
}

func (e *FrameError) Unwrap() error { return e.Err }

// HeaderError reports an RPC message header that could not be decoded or
// encoded: which field, where in the message, and the offending value.
type HeaderError struct {
	Field  string // e.g. "msg_type", "cred", "accept_stat"
	Offset int    // byte offset of the field from the start of the message
	Value  uint32 // the value read (a length for auth bodies), if any
	Err    error  // a sentinel above, or an *xdr.Error for short input
}

func (e *HeaderError) Error() string {
	if _, isSentinel := sentinelValue[e.Err]; isSentinel {
		return fmt.Sprintf("tcprpc: %s at offset %d: %v (value %d)", e.Field, e.Offset, e.Err, e.Value)
	}
	return fmt.Sprintf("tcprpc: %s at offset %d: %v", e.Field, e.Offset, e.Err)
}

func (e *HeaderError) Unwrap() error { return e.Err }

// sentinelValue lists the causes for which HeaderError.Value is meaningful.
var sentinelValue = map[error]struct{}{
	ErrNotCall: {}, ErrNotReply: {}, ErrBadMsgType: {}, ErrBadRPCVersion: {},
	ErrAuthTooLong: {}, ErrBadReplyStat: {}, ErrBadAcceptStat: {}, ErrBadRejectStat: {},
	ErrBadGSSVersion: {}, ErrBadGSSProc: {}, ErrBadGSSService: {},
}
