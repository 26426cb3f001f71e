// Package oncrpc is the ONC RPC message codec of RFC 5531 (§8, §9) and the
// RPCSEC_GSS credential of RFC 2203 (§5), independent of the transport:
// the same headers travel in a TCP record (package tcprpc) and in an
// RPC-over-RDMA message (package rdmarpc).
//
// # Files
//
//	msg_call.go    CallHeader, MsgType, PeekMsgType
//	msg_reply.go   ReplyHeader, ReplyStat, AcceptStat, RejectStat, AuthStat
//	auth.go        OpaqueAuth and flavors, GSSCred, GSSBodyWrapped
//	replies.go     the error replies a gateway sends on its own account
//	bounds.go      MaxCallHeader, MaxReplyHeader
//	errors.go      HeaderError and its sentinels
//
// # Wire format
//
// A call header is six words and two opaque_auths; the procedure's
// arguments follow it:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                              xid                              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       msg_type = CALL (0)                     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          rpcvers = 2                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 prog      |      vers      |      proc        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| cred flavor | cred length n | cred body (n <= 400) + pad      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| verf flavor | verf length m | verf body (m <= 400) + pad      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     procedure arguments ...                   |
//
// (prog, vers and proc are one word each.) A reply header is three words,
// then either an accepted body (verifier, accept_stat, and for
// PROG_MISMATCH the supported version range) or a denied body
// (reject_stat, then the RPC version range or an auth_stat):
//
//	+-----+-----------+-----------------+----------+-------------+
//	| xid | REPLY (1) | MSG_ACCEPTED (0)| verf     | accept_stat | SUCCESS (0): results follow
//	+-----+-----------+-----------------+----------+-------------+ PROG_MISMATCH (2): + low, high
//	                                                               1, 3, 4, 5: nothing
//	+-----+-----------+-----------------+-------------+
//	| xid | REPLY (1) | MSG_DENIED (1)  | reject_stat | RPC_MISMATCH (0): + low, high
//	+-----+-----------+-----------------+-------------+ AUTH_ERROR (1):   + auth_stat
//
// MaxCallHeader (856 bytes) and MaxReplyHeader (432) bound both; a reader
// that peeks that much holds any header Decode accepts.
//
// # What Decode accepts and rejects
//
//   - msg_type must be what was asked for (ErrNotCall, ErrNotReply);
//     PeekMsgType tells the two apart first and rejects anything else
//     (ErrBadMsgType).
//   - A call's rpcvers must be 2 (ErrBadRPCVersion). RPCVers and XID are
//     set on that error so the caller can answer RPCMismatchReply.
//   - prog, vers and proc are not checked: which programs exist is the
//     caller's business.
//   - An opaque_auth body longer than 400 bytes is rejected
//     (ErrAuthTooLong, Value holds the length) before its length is
//     trusted; a caller answers AuthErrorReply(xid, AuthBadCred). Flavors
//     are not checked, and credential bodies are not looked into, except
//     by ParseGSSCred on request.
//   - reply_stat, accept_stat and reject_stat must be values RFC 5531
//     defines (ErrBadReplyStat, ErrBadAcceptStat, ErrBadRejectStat);
//     auth_stat is taken as it comes (RFC 5531 says more may be defined).
//   - A header cut short is an *xdr.Error (xdr.ErrShort) inside the
//     HeaderError: the caller may Peek more and decode again.
//   - Pad bytes after an auth body are skipped, not checked (package xdr).
//   - ParseGSSCred accepts version 1 only, gss_proc DATA to DESTROY and
//     service none, integrity or privacy.
//
// Every error is a *HeaderError naming the field and its byte offset
// from the start of the message.
//
// Encode refuses, writing nothing, what a peer could not parse: an auth
// body over 400 bytes and stat values outside RFC 5531.
//
// # Allocation
//
// Decode and Encode work in caller-owned buffers through package xdr and
// allocate nothing on success: credential and verifier bodies (and a GSS
// handle) are sub-slices of the input. Errors are allocated; they are rare.
// Nothing here keeps state, so values may be used from any goroutine the
// caller likes, one at a time.
package oncrpc
