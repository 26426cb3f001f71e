package rdmarpc

import "github.com/rdmagw/rdmagw/verbs"

// The engines report what they do through these interfaces, which the
// gateway implements with Prometheus counters (nil means none). Every
// method is called on the data path: implementations must be cheap and
// must not block. The kinds have String methods meant as label values.

// CallKind says how a call's RPC message reached the responder.
type CallKind uint8

const (
	CallInline    CallKind = iota // RDMA_MSG, no Read chunks
	CallReadChunk                 // RDMA_MSG with Read chunks pulled by RDMA Read
	CallLong                      // RDMA_NOMSG with a Position-Zero Read chunk
)

func (k CallKind) String() string {
	switch k {
	case CallInline:
		return "inline"
	case CallReadChunk:
		return "read_chunk"
	case CallLong:
		return "long"
	}
	return "unknown"
}

// ReplyKind says how a reply left the responder (or reached the requester).
type ReplyKind uint8

const (
	ReplyInline     ReplyKind = iota // RDMA_MSG, possibly with Write chunks
	ReplyReplyChunk                  // RDMA_NOMSG, the RPC reply RDMA-written into the Reply chunk
	ReplyError                       // RDMA_ERROR
)

func (k ReplyKind) String() string {
	switch k {
	case ReplyInline:
		return "inline"
	case ReplyReplyChunk:
		return "reply_chunk"
	case ReplyError:
		return "error"
	}
	return "unknown"
}

// DropReason says why a received message got no answer.
type DropReason uint8

const (
	DropShort         DropReason = iota // too short to hold an XID and a version
	DropClientDone                      // RDMA_DONE from the peer (Linux drops it too)
	DropClientError                     // RDMA_ERROR from the peer, or one we could not decode
	DropCreditOverrun                   // a call beyond the credits granted
	DropNoResources                     // no registered buffer or send context for the answer
	DropUnmatched                       // requester: a reply whose XID matches no call in flight
	DropMalformed                       // requester: a reply header that does not decode
)

func (r DropReason) String() string {
	switch r {
	case DropShort:
		return "short"
	case DropClientDone:
		return "rdma_done"
	case DropClientError:
		return "rdma_error"
	case DropCreditOverrun:
		return "credit_overrun"
	case DropNoResources:
		return "no_resources"
	case DropUnmatched:
		return "unmatched"
	case DropMalformed:
		return "malformed"
	}
	return "unknown"
}

// VersionMetrics is implemented by ResponderMetrics and RequesterMetrics
// that want the RPC-over-RDMA version each connection settles on
// (optional: the engines check with a type assertion, once per
// connection).
type VersionMetrics interface {
	// VersionSettled: the connection speaks version v (1 or 2) from now
	// on. The responder reports it when the first message decides it
	// (at accept without ResponderConfig.V2: version one from the
	// start); the requester when DialRequester returns, with fellBack
	// true when it offered version two and continues in version one
	// (the responder answered ERR_VERS, or nothing, VersionAuto).
	VersionSettled(v uint32, fellBack bool)
}

// versionSettled reports v to met if it takes it.
func versionSettled(met any, v uint32, fellBack bool) {
	if m, ok := met.(VersionMetrics); ok {
		m.VersionSettled(v, fellBack)
	}
}

// ResponderMetrics receives the responder's events.
type ResponderMetrics interface {
	// CallReceived: a complete call handed to the Handler; inline is the
	// bytes that arrived by Send, chunk the bytes pulled by RDMA Read.
	CallReceived(kind CallKind, inline, chunk int)
	// ReplySent: a reply (or RDMA_ERROR) posted; inline is the bytes sent
	// by Send, written the bytes RDMA-written into Write and Reply chunks.
	ReplySent(kind ReplyKind, inline, written int)
	// ErrorSent: an RDMA_ERROR answer of the given code was posted.
	ErrorSent(code ErrorCode)
	// SendInvalidated: the reply just counted by ReplySent went as Send
	// With Invalidate of the requester's rkey (responder_inv.go).
	SendInvalidated()
	// WrittenAhead: n bytes of a reply's item were RDMA-written into its
	// Write chunk before the reply (Call.WriteAhead); ReplySent counts
	// them again with the reply, among its written bytes.
	WrittenAhead(n int)
	// Dropped: a received message was dropped without an answer.
	Dropped(reason DropReason)
	// MemoryWait: calls began to wait for registered memory for their
	// Read chunks (once per episode, not per call).
	MemoryWait()
	// RDMAFailed: a work request completed with an error status; the
	// connection is torn down.
	RDMAFailed(op verbs.Opcode, status verbs.Status)
	// ConnUp / ConnDown bracket a connection's life; err says why it
	// ended (nil for a local close).
	ConnUp()
	ConnDown(err error)
}

// RequesterMetrics receives the requester's events.
type RequesterMetrics interface {
	// CallSent: kind is CallInline, CallReadChunk or CallLong; inline the
	// bytes sent by Send, exposed the bytes offered in Read chunks.
	CallSent(kind CallKind, inline, exposed int)
	// ReplyReceived: inline the bytes of RPC reply that came by Send or
	// through the Reply chunk, written the bytes placed in Write chunks.
	ReplyReceived(kind ReplyKind, inline, written int)
	// ErrorReceived: the responder answered with RDMA_ERROR.
	ErrorReceived(code ErrorCode)
	Dropped(reason DropReason)
	RDMAFailed(op verbs.Opcode, status verbs.Status)
	ConnUp()
	ConnDown(err error)
}

type nopResponderMetrics struct{}

func (nopResponderMetrics) CallReceived(CallKind, int, int)       {}
func (nopResponderMetrics) ReplySent(ReplyKind, int, int)         {}
func (nopResponderMetrics) ErrorSent(ErrorCode)                   {}
func (nopResponderMetrics) SendInvalidated()                      {}
func (nopResponderMetrics) WrittenAhead(int)                      {}
func (nopResponderMetrics) Dropped(DropReason)                    {}
func (nopResponderMetrics) MemoryWait()                           {}
func (nopResponderMetrics) RDMAFailed(verbs.Opcode, verbs.Status) {}
func (nopResponderMetrics) ConnUp()                               {}
func (nopResponderMetrics) ConnDown(error)                        {}
func (nopResponderMetrics) CallSent(CallKind, int, int)           {}
func (nopResponderMetrics) ReplyReceived(ReplyKind, int, int)     {}
func (nopResponderMetrics) ErrorReceived(ErrorCode)               {}
