package rdmarpc

import "github.com/rdmagw/rdmagw/xdr"

// garbageArgsSize is the RDMA_MSG made by encodeGarbageArgs: a header
// with three empty chunk lists, then an RPC reply of six words.
const garbageArgsSize = MinHeaderSize + 6*4

// encodeGarbageArgs writes into b the answer to a call whose header is
// well formed but whose Read chunks do not fit its Payload stream (a
// Position past its end or inside the chunk before): RFC 8166 §4.5.2
// says the responder SHOULD return GARBAGE_ARGS, in an RDMA_MSG, rather
// than RDMA_ERROR. It is the one RPC message the engine makes itself, so
// it is spelled out here: xid, REPLY, MSG_ACCEPTED, an AUTH_NONE
// verifier, GARBAGE_ARGS. answerError(ErrCodeGarbageArgs) sends it.
func encodeGarbageArgs(b []byte, xid, credit uint32) int {
	e := xdr.NewEncoder(b[:garbageArgsSize])
	putFixed(&e, xid, Version, credit, ProcMsg)
	for _, w := range [...]uint32{0, 0, 0, xid, 1, 0, 0, 0, 4} {
		e.PutUint32(w) // empty chunk lists; the RPC reply
	}
	return e.Len()
}

// v2GarbageArgsSize is the RDMA2_REPLY_INLINE made by
// encodeV2GarbageArgs: the prefix, an empty Write list, the same RPC
// reply.
const v2GarbageArgsSize = V2PrefixSize + 4 + 6*4

// encodeV2GarbageArgs is encodeGarbageArgs for a version-two call: the
// draft answers a call whose chunks do not fit its Payload stream with
// GARBAGE_ARGS "using an RDMA2_REPLY_INLINE message type".
func encodeV2GarbageArgs(b []byte, xid, credit uint32) int {
	e := xdr.NewEncoder(b[:v2GarbageArgsSize])
	putV2Prefix(&e, xid, V2Version, credit, HTypeReplyInline)
	for _, w := range [...]uint32{0, xid, 1, 0, 0, 0, 4} {
		e.PutUint32(w) // empty Write list; the RPC reply
	}
	return e.Len()
}
