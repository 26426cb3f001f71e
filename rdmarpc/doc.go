// Package rdmarpc implements RPC-over-RDMA: the transport header codec of
// version one (RFC 8166, drafted as draft-ietf-nfsv4-rfc5666bis), the
// RDMA-CM private data of RFC 8797, and, in files of their own, the
// responder and requester engines built on them.
//
// # Codec files
//
//	header.go      Header, Proc, Decode/Encode, fixed header
//	segment.go     Segment (HLOO)
//	readlist.go    Read list, Read chunks, Position-Zero chunk
//	writelist.go   Write list, Write chunks
//	replychunk.go  Reply chunk
//	errormsg.go    RDMA_ERROR body, ERR_VERS / ERR_CHUNK answers
//	errors.go      ShortError, VersionError, ChunkError and their sentinels
//	limits.go      Limits checked while decoding
//	privdata.go    RFC 8797 connection private data
//
// Memory: pool.go is the registered buffer pool; pool_domain.go registers
// it in further protection domains (a requester connection's own PD);
// requester_reg.go is the requester's per-RPC registration.
// pool_wait.go is the one way to wait for pool memory (GetWait, PoolWait).
//
// # Engine files
//
//	endpoint.go            the skeleton both engines embed: pool, CQ, queue
//	                       pair, fail/Err, the completion loop, drain;
//	                       work request IDs, send-queue slots, notifier
//	message.go             Message and Piece: an RPC message as pieces,
//	                       items (DDP-eligible) marked
//	metrics.go             ResponderMetrics, RequesterMetrics and their kinds
//	responder.go           responder connection setup, Serve, teardown
//	responder_recv.go      receive: decode, error answers, Read chunk pulls,
//	                       Call (XID, WriteChunks, WriteChunkLen)
//	responder_reply.go     reply: pairReply, placeReply, the Write+Send chain
//	responder_ahead.go     cut-through: a reply item's RDMA Writes posted
//	                       while the rest of the reply is still coming
//	                       (Call.WriteAhead, Piece.Written)
//	responder_inv.go       Send With Invalidate
//	responder_garbage.go   the GARBAGE_ARGS answer (both versions)
//	responder_srq.go       SharedRecv: receive buffers shared by responder
//	                       connections through one SRQ, and who owns them
//	responder_v2.go        version two on the responder (ResponderConfig.V2):
//	                       the version decided per connection, a v2 call
//	                       translated to the v1 Header the engine serves,
//	                       RDMA2_ERROR answers, credits and GRANT,
//	                       continued calls (Reassembler)
//	responder_v2reply.go   v2 reply headers (REPLY_INLINE/EXTERNAL), the
//	                       reply by continuation, WRITE/REPLY_RESOURCE,
//	                       posting as the peer's credit allows
//	requester.go           requester connection, credits, reply matching
//	requester_marshal.go   marshal (inline, Read chunks, Long call), reply
//	requester_reg.go       per-RPC registration and invalidation
//	requester_v2.go        version two: auto|1|2 at connect (VersionMode,
//	                       VersionMemory), CALL_INLINE/CALL_EXTERNAL,
//	                       REPLY_INLINE/EXTERNAL, RDMA2_ERROR both ways,
//	                       GRANT and the v2 credit (v2Link)
//	requester_v2cont.go    version two continuation: REPLY_MIDDLE
//	                       reassembly (Reassembler), CALL_MIDDLE sending
//	backchannel*.go        backward-direction calls (RFC 8167), both sides
//
// Both engines are one endpoint plus what differs:
//
//	ResponderConn ──┐                 ┌── completion(wc)  per work completion
//	                ├─ endpoint.run ──┼── afterPoll()     after every poll
//	RequesterConn ──┘  poll/dispatch  └── waitTimeout()   how long to park
//	                   /park until dead
//
// The loop's wait ends on a completion, the caller's context, fail (an
// AfterFunc on the endpoint's life context) or the queue pair's end, and
// the connection's error wraps the provider's (errors.As finds, say, an
// *iwarp.TerminateError).
//
// Run to completion: on a verbs.DirectCQ (the iwarp provider's) run
// installs endpoint.direct, which the provider calls on its own rx or tx
// goroutine after a batch of completions: it polls and dispatches there,
// so a small RPC's Recv and Send completions cost no wake-up of run's
// goroutine. endpoint.consumer (a TryLock for direct, which declines
// while run's goroutine holds it) serialises the two, so the engine's
// "Serve goroutine only" state is owned by whoever holds it. The engine
// never blocks while dispatching (memory and send-resource waits are
// queued and retried from afterPoll), which the provider's goroutine
// requires. The ibverbs provider has no DirectCQ: run parks in Wait.
//
// A reply is built in steps that read one pairing (RFC 8267 §6.4.1):
//
//	pairReply    item k -> Write chunk k when offered with room, else inline
//	placeReply   inline (RDMA_MSG) or Reply chunk (RDMA_NOMSG), else ERR_CHUNK
//	stage        one staging buffer for unregistered pieces
//	appendItemWrites, appendReplyChunkWrites, copyInline, appendSend
//	             -> [RDMA Write ...] Send, one chain, only the Send signaled
//
// With cut-through the handler has posted the leading parts of an item
// already (WriteAhead: the same pairing, checked before the first part,
// each part a chain whose last Write is signaled); the reply's Writes
// start where they ended (Piece.Written) and its Write list returns the
// whole item's length.
//
// # Wire format
//
// Every message starts with four fixed words. Version 1 is checked before
// anything else is read, because another version may lay out the rest
// differently; the answer to a wrong version is RDMA_ERROR / ERR_VERS.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      rdma_xid (RPC XID)                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        rdma_vers = 1                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|              rdma_credit (requested / granted)                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     rdma_proc: MSG 0, NOMSG 1, MSGP 2, DONE 3, ERROR 4        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// RDMA_MSG and RDMA_NOMSG continue with three optional-data lists, each
// ended or marked absent by a zero word; RDMA_MSG then carries the RPC
// message itself. With no chunks at all the header is 28 bytes:
//
//	+-----+---+--------+---------+-------+--------+-------+----------------
//	| xid | 1 | credit | MSG = 0 |   0   |   0    |   0   | RPC message ...
//	+-----+---+--------+---------+-------+--------+-------+----------------
//	                               reads   writes   reply
//
// The Read list is a linked list of Read segments, each preceded by a 1.
// Consecutive segments with the same Position form one Read chunk; a
// chunk at Position 0 (the Position-Zero Read chunk) carries a whole RPC
// call that did not fit inline (a Long call, sent as RDMA_NOMSG):
//
//	+---+----------+--------+--------+-------------------+
//	| 1 | Position | Handle | Length |  Offset (64 bits) |  segment 0
//	+---+----------+--------+--------+-------------------+
//	| 1 | Position | Handle | Length |  Offset (64 bits) |  segment 1
//	+---+----------+--------+--------+-------------------+
//	| 0 |                                                   end of list
//	+---+
//
// The Write list is a linked list of Write chunks, each a counted array
// of segments without Position (the responder fills them in order and
// returns them with the lengths it wrote):
//
//	+---+-------+------+------+---+-------+------+---+
//	| 1 | N = 2 | HLOO | HLOO | 1 | N = 1 | HLOO | 0 |
//	+---+-------+------+------+---+-------+------+---+
//	     \__ Write chunk 0 __/      \_ chunk 1 _/   end
//
// The Reply chunk is one optional counted array, room for a whole reply
// that does not fit inline (a Long reply):
//
//	+---+                         +---+-------+------+------+
//	| 0 |  absent                 | 1 | N = 2 | HLOO | HLOO |  present
//	+---+                         +---+-------+------+------+
//
// where HLOO is a segment: Handle (32), Length (32), Offset (64).
// RDMA_ERROR continues with rdma_err: ERR_VERS (1) followed by the lowest
// and highest supported versions, or ERR_CHUNK (2) alone.
//
// # What Decode accepts and rejects
//
// Where implementations have disagreed (see the implementation-experience
// draft, draft-cel-nfsv4-rpcrdma-v1-implementation-experience) the codec
// takes these positions:
//
//   - Read chunk ordering: the segments of one Read chunk must be
//     consecutive in the list and chunks must come in ascending Position
//     order, i.e. Positions never decrease. The spec reassembles "in list
//     order ... until there are no more segments at that Position", and a
//     responder streams the Payload from front to back. Every requester
//     known to us (the Linux client sends one Read chunk per call) obeys
//     this; the Linux server is laxer and sorts. A decreasing Position is
//     ReasonPositionOrder.
//   - A Position that is not a multiple of 4 is malformed (XDR alignment),
//     as in the Linux server.
//   - Multi-segment Read chunks, including a multi-segment Position-Zero
//     Read chunk, are accepted: one implementation refused them, which
//     the draft calls a bug.
//   - A Position-Zero Read chunk together with other Read chunks in an
//     RDMA_NOMSG call is accepted (draft section 3.5). A Position-Zero
//     Read chunk in an RDMA_MSG is accepted by the codec (early Linux
//     clients sent Long calls that way); what it means is the engine's
//     decision.
//   - An RDMA_NOMSG with neither a Position-Zero Read chunk nor a Reply
//     chunk has no Payload anywhere and is malformed.
//   - Zero-length segments are accepted everywhere: a reply returns unused
//     Write chunk segments with length zero (a MUST), and a zero-length
//     Read segment costs nothing.
//   - A Write chunk or Reply chunk with zero segments is accepted: one
//     server returns a failed NFS READ's Write chunk that way (draft
//     section 3.9); it simply offers no room.
//   - RDMA_MSGP and RDMA_DONE are decoded, then reported as
//     ReasonReservedProc: senders MUST NOT send them and a receiver SHOULD
//     answer ERR_CHUNK. (The Linux server drops RDMA_DONE instead; the
//     engine may check Reason and do the same.)
//   - An undecodable RDMA_ERROR is reported with Proc == ProcError so the
//     caller can discard it silently, as the spec requires.
//   - Limits bound segment and chunk counts and chunk byte totals.
//
// # Allocation
//
// A Header holds fixed-capacity storage for 16 Read segments, 8 Write
// chunks and 16 Write/Reply segments; decoding or building a header within
// that allocates nothing, and beyond it the slices grow on the heap, at
// most as far as Limits allow. Errors are allocated (they are rare).
//
// # Version two
//
// The version-two header codec (draft-ietf-nfsv4-rpcrdma-version-two-07)
// lives beside version one in this package, not in a subpackage: it reuses
// the unexported Read list, Write list and Reply chunk codecs, Segment and
// Limits, and the engines here will use it, so a subpackage would either
// import rdmarpc while rdmarpc imports it (a cycle) or force the v1 codec
// out of the package.
//
//	v2_header.go   V2Header, HType, Decode/Encode, V2MayPost and the
//	               constants that settle the draft's contradictions
//	v2_errors.go   V2ErrCode, V2ErrorBody (the RDMA2_ERROR union), V2Error
//	               and its mapping to the answer, SetErrorAnswer
//	v2_props.go    transport properties: PropVal, TransportProps, checks
//	v2_propx.go    the per-connection state both engines keep (v2Link):
//	               the property exchange after connect, the limits it
//	               sets, credit accounting; FuzzV2PropExchange
//	v2_cont.go     message continuation, shared by both engines:
//	               PlanContinuation splits an outgoing Payload stream into
//	               MIDDLE fragments and the final one, Reassembler checks
//	               an incoming sequence and places its fragments (the
//	               positions it takes are in the file's comment)
//	v2_*_test.go   golden vectors (testdata/v2/golden), errors, fuzz target
//	               FuzzDecodeV2Header
//	v2_judge_test.go  the independent judge: the draft's XDR
//	               (testdata/v2/rpcrdma-v2*.x, from scripts/extract-xdr.sh)
//	               compiled by rpcgen with testdata/v2/judge.c; a
//	               differential test against the codec and a test that every
//	               XDR constant has its Go twin
//
// A version-two message is the 16-octet prefix (xid, vers = 2, credit,
// rdma_htype) and the body rdma_htype selects: ERROR 4 (rdma_err and its
// arm), GRANT 5 (nothing), CONNPROP_MIDDLE/FINAL 6/7 (a property set),
// CALL_EXTERNAL 8 (rdma_inv_handle, Call chunk, Read list, provisional
// Write list and Reply chunk), CALL_MIDDLE 9 and REPLY_MIDDLE 12
// (rdma_remaining), CALL_INLINE 10 (as CALL_EXTERNAL without the Call
// chunk), REPLY_EXTERNAL 11 (Write list, Reply chunk), REPLY_INLINE 13
// (Write list). MIDDLE and INLINE types are followed by (part of) the RPC
// message. Lists and segments are laid out as in version one.
//
// Where draft -07 contradicts itself the codec follows its XDR, and each
// choice is one constant or function in v2_header.go:
//
//   - rdma_credit is one 32-bit count (XDR, Flow Control: the sender's
//     Sent message count plus its Advertised credits, below 2^31 - 1), not
//     "two 16-bit subfields" (the appendix on the first four words).
//     V2Credit, V2CreditLimit.
//   - The prefix is 16 octets, the four words of struct rpcrdma_common;
//     the Error Handling section's "20 octets" is not followed. A shorter
//     message is a *ShortError: discarded, unanswered. V2PrefixSize.
//   - The credit check counts the message about to be posted: a peer may
//     post while its Sent count is below the Received credits (modulo
//     2^32). The text's "MUST NOT post if Sent count is greater than
//     Received credits" would let one message more through, and a first
//     grant of 1 would allow two outstanding. V2MayPost.
//   - Header type descriptions mix up Call and Reply: CALL_EXTERNAL and
//     CALL_MIDDLE say rdma_xid is the XID of "the RPC Reply", REPLY_MIDDLE
//     counts rdma_remaining in "the RPC Call message payload". The codec
//     reads them by the type's name: a Call type carries the Call's XID, a
//     Reply type counts the Reply's bytes. The Reverse-Direction Support
//     constants are RDMA2_RVRSDIR_* as in the XDR (RDMA_RVRSDIR_* in the
//     prose).
//
// Further positions the codec takes (the draft is silent or loose):
//
//   - The XDR places rdma_rpc_first_word inside the MIDDLE and INLINE
//     structures: Decode requires those four bytes of RPC message
//     (ReasonTruncated, BAD_XDR) but returns the length before them.
//   - The Call chunk of CALL_EXTERNAL must have at least one segment and
//     every segment at Position 0; a call's Read list holds data item
//     chunks only, never at Position 0 (the draft says so of CALL_INLINE;
//     in CALL_EXTERNAL Position 0 is the Call chunk's). REPLY_EXTERNAL
//     must carry its Reply chunk. All BAD_XDR.
//   - Version one's rules for lists hold (ascending, 4-aligned Positions,
//     no wrapping segment); Limits apply to the Call chunk, Read list and
//     Write list each; over a limit is READ_CHUNKS, WRITE_CHUNKS or
//     SEGMENTS with the limit as the maximum, a chunk over MaxChunkBytes
//     (local policy, no code of its own) SYSTEM.
//   - A known property's rdma_data must be empty (the default) or exactly
//     the XDR encoding of its type: 4 octets for the uint32 properties, an
//     opaque<> filling it for HOSTAUTH; anything else, or data running
//     past the message, is BAD_PROPVAL. Unknown properties are kept as
//     they came; a later occurrence of a property replaces an earlier one;
//     any uint32 value is accepted (BRS values above GENL included).
//   - An RDMA2_ERROR with an unknown rdma_err decodes (the XDR's default
//     arm is void); V2ErrCode.Known says to discard it. GRANT's XID is not
//     checked. rdma_inv_handle is not checked against the chunk handles by
//     Decode; InvHandleListed does that for the engine.
//   - Decode answers a version other than 2 with RDMA2_ERR_VERS; whether
//     it should be VERS_MISMATCH (version fixed on the connection) is the
//     engine's knowledge.
//
// Positions the responder takes (responder_v2.go says more):
//
//   - The first message with a supported version fixes the connection's
//     version. Afterwards version one gets RDMA2_ERR_VERS_MISMATCH on a
//     version-two connection (echoing rdma_vers = 1, as every RDMA2_ERROR
//     echoes the version it answers), other versions RDMA2_ERR_VERS 1..2;
//     a version-one connection answers any other version ERR_VERS 1..1.
//   - rdma_credit = V2Credit(messages received, Credits - calls
//     outstanding): the draft's "Sent count + Advertised" in the lockstep
//     case, and still right when calls come in fragments or GRANTs flow.
//   - rdma_remaining counts the bytes after the fragment (v2_cont.go).
//   - RDMA2_GRANT and RDMA2_ERROR do not break a continuation sequence;
//     everything else does, and both the breaking message and the broken
//     sequence get RDMA2_ERR_INVAL_CONT.
//   - rdma_inv_handle is honoured only when it names one of the call's
//     handles (InvHandleListed); control messages never invalidate.
//
// # Private data (RFC 8797)
//
// ParsePrivateData and PrivateData.Encode handle the 8-byte block the
// Linux client sends with its connect request (4 KiB inline both ways,
// Send With Invalidate OK) and expects in the accept; InlineThresholds
// combines both sides' blocks, falling back to 1 KiB when the peer sent
// none.
package rdmarpc
