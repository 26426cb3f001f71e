package oncrpc

import (
	"errors"
	"fmt"
)

// Sentinel causes. Errors returned by this package are a *HeaderError
// wrapping one of these or an *xdr.Error for a truncated header; test with
// errors.Is and errors.As.
var (
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
		return fmt.Sprintf("oncrpc: %s at offset %d: %v (value %d)", e.Field, e.Offset, e.Err, e.Value)
	}
	return fmt.Sprintf("oncrpc: %s at offset %d: %v", e.Field, e.Offset, e.Err)
}

func (e *HeaderError) Unwrap() error { return e.Err }

// sentinelValue lists the causes for which HeaderError.Value is meaningful.
var sentinelValue = map[error]struct{}{
	ErrNotCall: {}, ErrNotReply: {}, ErrBadMsgType: {}, ErrBadRPCVersion: {},
	ErrAuthTooLong: {}, ErrBadReplyStat: {}, ErrBadAcceptStat: {}, ErrBadRejectStat: {},
	ErrBadGSSVersion: {}, ErrBadGSSProc: {}, ErrBadGSSService: {},
}
