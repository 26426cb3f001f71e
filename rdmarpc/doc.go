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
// # Private data (RFC 8797)
//
// ParsePrivateData and PrivateData.Encode handle the 8-byte block the
// Linux client sends with its connect request (4 KiB inline both ways,
// Send With Invalidate OK) and expects in the accept; InlineThresholds
// combines both sides' blocks, falling back to 1 KiB when the peer sent
// none.
package rdmarpc
