package rdmarpc

import "github.com/rdmagw/rdmagw/verbs"

// Send With Invalidate on the reply (svc_rdma_get_inv_rkey in Linux's
// svcrdma). A requester that advertised "Send With Invalidate OK" in its
// RFC 8797 private data can have one of its rkeys invalidated by the
// Send that carries the reply, sparing it a LOCAL_INV before it may look
// at the reply. Like svcrdma the responder does so only when every
// segment of the call's Read list, Write list and Reply chunk names the
// same rkey (the requester registered the call's memory as one region):
// invalidating one of several would leave the others for the requester
// anyway, and an rkey the call did not name is never the responder's to
// invalidate. RDMA_ERROR answers go as plain Sends.

// invalidateRKey returns the one rkey every chunk segment of h names, or
// false when h has no chunk segments or names more than one.
func invalidateRKey(h *Header) (uint32, bool) {
	var rkey uint32
	seen := false
	same := func(s Segment) bool {
		if !seen {
			rkey, seen = s.Handle, true
			return true
		}
		return s.Handle == rkey
	}
	for i := range h.Reads {
		if !same(h.Reads[i].Segment) {
			return 0, false
		}
	}
	for _, w := range h.Writes {
		for _, s := range w {
			if !same(s) {
				return 0, false
			}
		}
	}
	if h.HasReply {
		for _, s := range h.Reply {
			if !same(s) {
				return 0, false
			}
		}
	}
	return rkey, seen
}

// setInvalidate turns the reply's Send wr into a Send With Invalidate of
// the call's rkey when the requester takes it and the call names one
// rkey only; it reports whether it did. A version-two call says which
// handle itself: its rdma_inv_handle, when it is one of the call's
// handles (0: none).
func (c *ResponderConn) setInvalidate(wr *verbs.SendWR, call *Call) bool {
	if call.v2 {
		if call.invHandle == 0 {
			return false
		}
		wr.Op, wr.InvalidateRKey = verbs.OpSendInv, call.invHandle
		return true
	}
	if !c.remoteInv {
		return false
	}
	rkey, ok := invalidateRKey(&call.hdr)
	if !ok {
		return false
	}
	wr.Op, wr.InvalidateRKey = verbs.OpSendInv, rkey
	return true
}
