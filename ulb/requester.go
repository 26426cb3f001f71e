package ulb

// The requester policy for NFS over RPC-over-RDMA: what a requester
// offers for the reply to each call (which results get a Write chunk,
// how big the Reply chunk is), when it may retry with more room, and how
// it puts a reply's Write-chunk payloads back into the XDR stream. One
// policy for every requester in the project, the reverse gateway and
// internal/nfsclient: the rules come from the binding (RFC 8267) and from
// what real servers do, not from either caller.
//
//	call ──► Requester.Plan ──► ReplyOffer{WriteChunks, ReplyChunk} ──► transport
//	reply ◄── SpliceReply ◄── inline/Reply-chunk results + Write-chunk payloads
//
// Server quirks the policy works around are written at the rule that
// does so (see noWriteChunkFrom).

// Requester holds what a requester's reply policy depends on. It is a
// value: build it where the settings are read, it allocates nothing.
type Requester struct {
	// InlineRecv is the size of the requester's receive buffers: an
	// inline reply, transport header included, must fit one.
	InlineRecv int
	// MaxChunk is the most room one chunk may offer (the largest
	// registered buffer the requester can provide).
	MaxChunk int
	// MaxWriteChunks caps the Write chunks one call offers (0: no cap).
	// RFC 8267 §6.4.2: without knowledge of the server's limits a
	// requester SHOULD offer at most one; results past the cap come
	// inline or in the Reply chunk, which is sized for them.
	MaxWriteChunks int
	// HeaderMax is the size of the largest transport header the responder
	// can put before an inline reply to a call offering these Write
	// chunk rooms (rdmarpc: ReplyPlan.ReplyHeaderMax). RFC 8166 §3.3.2:
	// the transport header counts against the inline threshold. Nil: 0.
	HeaderMax func(writeChunks []int) int
	// Continuation says the transport carries a reply longer than
	// InlineRecv in several Sends (message continuation: RPC-over-RDMA
	// version two). The NFS binding for version two
	// (draft-ietf-nfsv4-nfs-ulb-v2 "Reply Size Estimation") has the
	// requester rely on it instead of provisioning a Reply chunk: one is
	// offered only for a reply the binding bounds above
	// ContinuedReplyFrags receive buffers, sized to the estimate without
	// slack; none for a reply it cannot bound (the responder continues
	// it, or answers REPLY_RESOURCE with the room it needs:
	// ReplyResourceRoom).
	Continuation bool
}

// ContinuedReplyFrags bounds the Sends of a reply a version-two
// requester leaves to continuation (16: 64 KiB at 4 KiB receives); a
// longer bounded reply gets a Reply chunk, one RDMA Write instead of many
// Sends, and stays within what responders continue (rdmagw's continues up
// to a quarter of its send queue, at least 21 Sends at any credit count).
const ContinuedReplyFrags = 16

// CallInfo is what the policy needs to know of one call.
type CallInfo struct {
	Prog, Vers, Proc uint32
	// Args are the call's arguments after the RPC call header, as they
	// would be on TCP. The estimators read no WRITE or SYMLINK body, so a
	// caller holding those elsewhere may pass their length words zeroed.
	Args []byte
	// Verifier is the reply verifier room beyond the empty one estimates
	// assume: 0 for AUTH_NONE and AUTH_SYS calls, MaxVerifierBody for
	// any other flavor.
	Verifier int
	// Wrapped says RPCSEC_GSS integrity or privacy wraps the arguments
	// and results: nothing in them is DDP-eligible (RFC 8267 §4.4 does
	// not reach into a wrapped body), and the size is not estimated.
	Wrapped bool
}

// ReplyOffer is what a requester offers for one call's reply, and what
// it was planned from.
type ReplyOffer struct {
	// WriteChunks is the room of each Write chunk, in the order of the
	// reply's DDP-eligible results (0: an empty chunk).
	WriteChunks []int
	// ReplyChunk is the room of the Reply chunk; 0 offers none.
	ReplyChunk int
	// Est is the binding's estimate of the reply, adjusted for the
	// results the policy moved inline; valid when Estimated.
	Est       Estimate
	Estimated bool
	// Retryable says a short Reply chunk may be retried with more room
	// (GrowReplyChunk): the binding cannot bound the reply (RFC 8267
	// §6.5.3), or it is NFSACL GETACL (RFC 8267 §4.4). Other calls are
	// not retried: an underestimate there is a bug to fix, and a retry
	// could execute a non-idempotent call twice.
	Retryable bool
}

// Plan returns the offer for the reply to call. Write chunk rooms are
// appended to rooms (caller storage, so planning allocates nothing).
//
// A call without an estimate (no binding, arguments the server will
// refuse, a wrapped body) gets no Write chunk and a Reply chunk of
// MaxChunk, so its reply cannot fail for lack of room. Otherwise each
// expected READ/READLINK result gets a Write chunk sized from the call,
// at most MaxChunk, and the Reply chunk holds what may not fit inline.
func (p *Requester) Plan(call *CallInfo, rooms []int) ReplyOffer {
	var o ReplyOffer
	if !call.Wrapped {
		var err error
		o.Est, err = EstimateReply(call.Prog, call.Vers, call.Proc, call.Args)
		o.Estimated = err == nil
	}
	if !o.Estimated {
		o.ReplyChunk = p.MaxChunk
		return o
	}
	o.Retryable = o.Est.Unpredictable || (call.Prog == ProgNFSACL && call.Proc == aclGetacl)
	n := min(o.Est.NItems, noWriteChunkFrom(call, &o.Est))
	if p.MaxWriteChunks > 0 {
		n = min(n, p.MaxWriteChunks)
	}
	for j := n; j < o.Est.NItems; j++ {
		// RFC 8267 §6.4.2 (and the quirk): results without a Write
		// chunk come inline or in the Reply chunk, sized for them here.
		o.Est.Inline += (o.Est.ItemMax[j] + 3) &^ 3
	}
	for k := range n {
		rooms = append(rooms, min(o.Est.ItemMax[k], p.MaxChunk))
	}
	o.WriteChunks = rooms
	if p.Continuation {
		o.ReplyChunk = o.Est.continuedReplyChunk(call.Verifier, ContinuedReplyFrags*p.InlineRecv, p.MaxChunk)
		return o
	}
	inlineRoom := p.InlineRecv
	if p.HeaderMax != nil {
		inlineRoom -= p.HeaderMax(rooms)
	}
	o.ReplyChunk = o.Est.ReplyChunkRoom(inlineRoom, call.Verifier, p.MaxChunk)
	return o
}

// noWriteChunkFrom is the index of the first expected result that must
// not get a Write chunk (nor any result after it), or NItems.
//
// Linux knfsd, NFSv4 READLINK: nfsd4_encode_readlink (5.11 on) registers
// the result payload at the link's length word instead of its bytes, so
// a Write chunk gets the word and all but the link's last four bytes,
// which arrive inline in place of the word. The Linux client never
// offers one for READLINK (a Reply chunk or inline), and neither do we.
// NFSv3 READLINK is unaffected (nfsd3 registers the link bytes).
func noWriteChunkFrom(call *CallInfo, est *Estimate) int {
	if call.Prog != ProgNFS || call.Vers != 4 {
		return est.NItems
	}
	for k := range est.NItems {
		if est.ItemKind[k] == KindReadlinkPath {
			return k
		}
	}
	return est.NItems
}

// GrowReplyChunk is the Reply chunk room to offer when retrying a call
// whose Reply chunk of room bytes was too short (RFC 8267 §3.1): twice
// as much, at least twice the inline size, at most MaxChunk. ok is false
// when room was MaxChunk already (no retry can do better).
func (p *Requester) GrowReplyChunk(room int) (next int, ok bool) {
	if room >= p.MaxChunk {
		return room, false
	}
	return min(max(2*room, 2*p.InlineRecv), p.MaxChunk), true
}

// ReplyResourceRoom is the Reply chunk room to offer when retrying a
// call whose responder answered RDMA2_ERR_REPLY_RESOURCE needing need
// bytes (version two) with room offered: need, if more than room and at
// most MaxChunk (ok false otherwise: no retry can do better).
func (p *Requester) ReplyResourceRoom(room, need int) (next int, ok bool) {
	if need <= room || need > p.MaxChunk {
		return room, false
	}
	return need, true
}

// continuedReplyChunk is the Reply chunk room under message continuation
// (Requester.Continuation): none for a reply within continued bytes or
// one the binding cannot bound, else the estimate, at most maxRoom.
func (e *Estimate) continuedReplyChunk(verifier, continued, maxRoom int) int {
	need := e.Inline + verifier
	if e.Unpredictable || need <= continued {
		return 0
	}
	return min(need, maxRoom)
}

// MaxVerifierBody is the largest verifier body an RPC reply may carry
// (RFC 5531 §8.2: opaque_auth bodies are at most 400 bytes). Estimates
// assume an empty one, what servers return to AUTH_NONE and AUTH_SYS
// callers; a requester whose call uses another flavor (RPCSEC_GSS: the
// reply verifier is a MIC) passes this as ReplyChunkRoom's verifier.
const MaxVerifierBody = 400

// ReplyChunkRoom is the room of the Reply chunk to offer, or 0 for none:
// one is needed when the inline part of the reply may exceed inlineRoom
// or cannot be bounded.
//
// inlineRoom is what of the requester's receive buffer an inline reply
// can use: the receive size less the largest RPC-over-RDMA header the
// responder may put before the reply (RFC 8166 §3.3.2: the transport
// header counts against the inline threshold; Linux subtracts
// rpcrdma_max_reply_header_size the same way). verifier is the reply
// verifier's body beyond the empty one the estimate assumes (0, or
// MaxVerifierBody). The room is the estimate with the verifier, at least
// twice inlineRoom (slack for estimates that are guesses), at most
// maxRoom (the largest buffer).
func (e *Estimate) ReplyChunkRoom(inlineRoom, verifier, maxRoom int) int {
	need := e.Inline + verifier
	if need <= inlineRoom && !e.Unpredictable {
		return 0
	}
	return min(max(need, 2*inlineRoom), maxRoom)
}
