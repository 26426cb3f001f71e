package rdmarpc

import (
	"encoding/binary"
	"fmt"
)

// The responder's backward direction on a version-two connection
// (draft-ietf-nfsv4-rpcrdma-version-two-07, Reverse-Direction Operation;
// the requester's side is in backchannel_requester.go): a backward call
// goes as RDMA2_CALL_INLINE with no chunks and rdma_inv_handle 0, only to
// a requester that announced Reverse-Direction Support SIMPLE or more in
// its transport properties (the rdmagw requester does when it has
// backward credits); its reply comes as RDMA2_REPLY_INLINE with an empty
// Write list. Both travel in the connection's one credit flow: the call's
// Send takes a credit of the requester's rdma_credit (v2Take), the reply
// is a message received like any other. What is shared with version one
// (credits for the calls outstanding, their timeout, OnReply and the
// metrics) is backchannel.go's.

// backwardHeaderSizeV2 is the RDMA2_CALL_INLINE header of a backward
// call: the 16-octet prefix, rdma_inv_handle, an empty Read list and
// Write list, no Reply chunk.
const backwardHeaderSizeV2 = V2PrefixSize + 4*4

// v2PeerBackward reports whether the requester on this version-two
// connection takes backward calls.
func (c *ResponderConn) v2PeerBackward() bool {
	c.v2.mu.Lock()
	defer c.v2.mu.Unlock()
	return c.v2.link.peer.ReverseDir >= RvrsDirSimple
}

// backwardRoom is the largest backward call, RPC message only, that the
// peer receives inline on this connection's version.
func (c *ResponderConn) backwardRoom() int {
	if c.Version() == V2Version {
		return int(c.v2.sendMax.Load()) - backwardHeaderSizeV2
	}
	return c.sendMax - BackwardHeaderSize
}

// postBackwardV2 posts backward call msg (n bytes, XID xid) on a
// version-two connection; s is a send context and one send queue slot
// taken for it. It waits for the requester's credit until the
// connection ends.
func (c *ResponderConn) postBackwardV2(s *sendCtxt, xid uint32, msg [][]byte, n int) error {
	if c.v2Take(1, 0, false, true) == 0 {
		return c.closedErr()
	}
	var h V2Header
	h.Init(xid, c.v2Grant(), HTypeCallInline)
	hl, err := h.Encode(s.buf.Bytes)
	if err != nil {
		c.v2Untake(1)
		return fmt.Errorf("rdmarpc: backward call header: %w", err)
	}
	return c.postBackwardSend(s, hl, msg, n)
}

// backwardReplyV2 takes an RDMA2_REPLY_INLINE from the requester: the
// reply to one of our backward calls. One that cannot be (the connection
// has no backward direction, the reply carries Write chunks or its RPC
// XID is not rdma_xid) is answered RDMA2_ERR_INVAL_HTYPE, as any reply
// type from a requester. Serve goroutine.
func (c *ResponderConn) backwardReplyV2(r *recvCtxt, v *V2Header, payload []byte) {
	if !c.bcOn() || len(v.Writes) != 0 || len(payload) < 8 ||
		binary.BigEndian.Uint32(payload) != v.XID || binary.BigEndian.Uint32(payload[4:]) != rpcReply {
		c.invalHType(r, v)
		return
	}
	c.bcTakeReply(r, v.XID, c.cfg.Backchannel.MaxCalls, payload)
}
