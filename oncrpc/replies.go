package oncrpc

// Error replies the gateway sends on its own account, when a call cannot
// be forwarded. Each returns a ReplyHeader to Encode; none has results.
// The verifier is AUTH_NONE: the gateway holds no GSS context, so for an
// RPCSEC_GSS call only the denied replies below are well-formed answers
// (RFC 2203 §5.3.3.4 lets a server reply MSG_DENIED without a verifier).

// AcceptedReply is an accepted reply with stat and a null verifier.
func AcceptedReply(xid uint32, stat AcceptStat) ReplyHeader {
	return ReplyHeader{XID: xid, Stat: MsgAccepted, Verf: NullAuth, AcceptStat: stat}
}

// GarbageArgsReply answers a call whose arguments could not be decoded.
func GarbageArgsReply(xid uint32) ReplyHeader { return AcceptedReply(xid, GarbageArgs) }

// ProgUnavailReply answers a call to a program the server does not export.
func ProgUnavailReply(xid uint32) ReplyHeader { return AcceptedReply(xid, ProgUnavail) }

// ProcUnavailReply answers a call to a procedure the program lacks.
func ProcUnavailReply(xid uint32) ReplyHeader { return AcceptedReply(xid, ProcUnavail) }

// SystemErrReply answers a call the server failed to process (for the
// gateway: the backend could not be reached or a resource ran out).
func SystemErrReply(xid uint32) ReplyHeader { return AcceptedReply(xid, SystemErr) }

// ProgMismatchReply answers a call for a program version outside
// [low, high].
func ProgMismatchReply(xid, low, high uint32) ReplyHeader {
	h := AcceptedReply(xid, ProgMismatch)
	h.Low, h.High = low, high
	return h
}

// RPCMismatchReply answers a call whose rpcvers is not 2 (low = high = 2).
func RPCMismatchReply(xid uint32) ReplyHeader {
	return ReplyHeader{XID: xid, Stat: MsgDenied, RejectStat: RPCMismatch, Low: RPCVersion, High: RPCVersion}
}

// AuthErrorReply denies a call for an authentication reason, e.g.
// AuthBadCred for a credential over 400 bytes.
func AuthErrorReply(xid uint32, stat AuthStat) ReplyHeader {
	return ReplyHeader{XID: xid, Stat: MsgDenied, RejectStat: AuthError, AuthStat: stat}
}
