package rdmarpc

import (
	"fmt"
	"sync"

	"github.com/rdmagw/rdmagw/verbs"
)

// Per-RPC memory registration (the job of frwr_ops.c in Linux). The pool's
// own registration grants local access only; whatever a call exposes to
// the responder — the bytes of its Read chunks, the room of its Write and
// Reply chunks — is registered again, exactly those bytes, with remote
// access, for this one RPC. When the reply arrives every such
// registration is invalidated and deregistered before the caller sees the
// data, so the responder can touch only what one RPC offered, and only
// while that RPC is in flight.

// maxInlineMRs is how many registrations a call tracks without allocating.
const maxInlineMRs = 16

// reqCtxt is one call in flight and everything it holds.
type reqCtxt struct {
	idx  int
	conn *RequesterConn
	done chan struct{} // one token when the reply (or failure) is in

	// Guarded by conn.mu.
	state       int
	holdsCredit bool
	sendPending bool
	xid         uint32
	rep         *rrecv // the receive an inline reply lies in

	sendBuf *Buffer // transport header and inline call, InlineSend bytes
	hdr     Header
	wr      verbs.SendWR
	sge     [1]verbs.SGE

	regMu    sync.Mutex
	readMRs  []verbs.MR // expose the call's data: remote read
	writeMRs []verbs.MR // Write and Reply chunk room: remote write
	mrStore  [2 * maxInlineMRs]verbs.MR

	wbufs  []*Buffer // per Write chunk (nil for an empty one)
	rbuf   *Buffer   // Reply chunk room
	stage  []*Buffer // copies of unregistered call data
	bstore [maxInlineMRs]*Buffer
	sstore [4]*Buffer
	segs   []ReadSegment // scratch: data Read segments while marshaling
	sgstor [inlineReadSegments]ReadSegment

	// The reply.
	inline     []byte
	chunks     [][]byte
	chunkStore [inlineWriteChunks][]byte
	kind       ReplyKind
	err        error
}

func (x *reqCtxt) resetReg() {
	x.readMRs = x.mrStore[:0:maxInlineMRs]
	x.writeMRs = x.mrStore[maxInlineMRs:maxInlineMRs:len(x.mrStore)]
	x.wbufs = x.bstore[:0]
	x.stage = x.sstore[:0]
	x.rbuf = nil
	x.segs = x.sgstor[:0]
}

// expose registers b for this RPC with the given remote access and
// returns the segment that names it.
func (x *reqCtxt) expose(b []byte, remote verbs.Access) (Segment, error) {
	access := remote
	if remote == verbs.AccessRemoteWrite {
		access |= verbs.AccessLocalWrite
	}
	mr, err := x.conn.pd.Register(b, access)
	if err != nil {
		return Segment{}, fmt.Errorf("rdmarpc: register %d bytes for xid 0x%08x: %w", len(b), x.hdr.XID, err)
	}
	x.regMu.Lock()
	if remote == verbs.AccessRemoteRead {
		x.readMRs = append(x.readMRs, mr)
	} else {
		x.writeMRs = append(x.writeMRs, mr)
	}
	x.regMu.Unlock()
	return Segment{Handle: mr.RKey(), Length: uint32(len(b)), Offset: mr.Addr()}, nil
}

// invalidateReads revokes the responder's access to the call's own data
// (a caller that gives up may reuse it at once). The registrations of the
// Write and Reply chunk room stay until the reply comes: that memory is
// ours, and a responder still writing into it must not fail.
func (x *reqCtxt) invalidateReads() {
	x.regMu.Lock()
	for _, mr := range x.readMRs {
		mr.Invalidate()
	}
	x.regMu.Unlock()
}

// unregister invalidates and deregisters every registration of the call.
func (x *reqCtxt) unregister() {
	x.regMu.Lock()
	for i, mr := range x.readMRs {
		mr.Invalidate()
		mr.Deregister()
		x.readMRs[i] = nil
	}
	for i, mr := range x.writeMRs {
		mr.Invalidate()
		mr.Deregister()
		x.writeMRs[i] = nil
	}
	x.readMRs, x.writeMRs = x.readMRs[:0], x.writeMRs[:0]
	x.regMu.Unlock()
}

// releaseBufs returns the call's chunk room and staging copies.
func (x *reqCtxt) releaseBufs() {
	for i, b := range x.wbufs {
		if b != nil {
			b.Release()
		}
		x.wbufs[i] = nil
	}
	x.wbufs = x.wbufs[:0]
	for i, b := range x.stage {
		b.Release()
		x.stage[i] = nil
	}
	x.stage = x.stage[:0]
	if x.rbuf != nil {
		x.rbuf.Release()
		x.rbuf = nil
	}
}
