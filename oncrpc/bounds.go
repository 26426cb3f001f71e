package oncrpc

// Size bounds of the headers, for sizing a Peek or a scratch buffer that
// must hold any header Decode accepts.
const (
	// MaxCallHeader is the longest call header: six words (xid,
	// msg_type, rpcvers, prog, vers, proc) and two opaque_auths (flavor,
	// length, body of at most MaxAuthBytes). 856 bytes.
	MaxCallHeader = 6*4 + 2*(8+MaxAuthBytes)
	// MaxReplyHeader is the longest reply header: an accepted
	// PROG_MISMATCH reply, that is three words (xid, msg_type,
	// reply_stat), a verifier (flavor, length, body of at most
	// MaxAuthBytes), accept_stat, low and high. 432 bytes. Denied
	// replies are shorter (at most five words).
	MaxReplyHeader = 3*4 + (8 + MaxAuthBytes) + 3*4
)
