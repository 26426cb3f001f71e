package rdmarpc

import (
	"github.com/rdmagw/rdmagw/verbs"
	"github.com/rdmagw/rdmagw/xdr"
)

// garbageArgsSize is the RDMA_MSG answer made by answerGarbageArgs: a
// header with three empty chunk lists, then an RPC reply of six words.
const garbageArgsSize = MinHeaderSize + 6*4

// answerGarbageArgs answers a call whose header is well formed but whose
// Read chunks do not fit its Payload stream (a Position past its end or
// inside the chunk before): RFC 8166 §4.5.2 says the responder SHOULD
// return GARBAGE_ARGS, in an RDMA_MSG, rather than RDMA_ERROR. It is the
// one RPC message the engine makes itself, so it is spelled out here:
// xid, REPLY, MSG_ACCEPTED, an AUTH_NONE verifier, GARBAGE_ARGS.
// Counted as ErrorSent(ErrCodeGarbageArgs). Serve goroutine only.
func (c *ResponderConn) answerGarbageArgs(r *recvCtxt, xid, credit uint32) {
	s := c.getSend(false)
	if s == nil || !c.sq.tryTake(1) {
		if s != nil {
			c.putSend(s)
		}
		c.repost(r)
		if !c.isDead() {
			c.unsendable(xid, "GARBAGE_ARGS")
		}
		return
	}
	c.repost(r)
	s.begin()
	e := xdr.NewEncoder(s.buf.Bytes[:garbageArgsSize])
	putFixed(&e, xid, Version, credit, ProcMsg)
	for _, w := range [...]uint32{0, 0, 0, xid, 1, 0, 0, 0, 4} {
		e.PutUint32(w) // empty chunk lists; the RPC reply
	}
	s.sges = append(s.sges, s.buf.SGE(0, e.Len()))
	s.addWR(wrSend|uint64(s.idx), verbs.OpSend, 0, 0, 0)
	s.wrs[0].Signal = true
	s.slots = 1
	if c.post(s) == nil {
		c.met.ErrorSent(ErrCodeGarbageArgs)
		c.met.ReplySent(ReplyInline, garbageArgsSize, 0)
	}
}
