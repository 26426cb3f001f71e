package rdmarpc

import (
	"errors"
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
	v2counted   int // version two: Sends counted as sent, not yet posted
	xid         uint32
	rep         *rrecv // the receive an inline reply lies in

	sendBuf *Buffer // transport header and inline call, InlineSend bytes
	hdr     Header
	h2      *V2Header // version two (nil on a VersionV1 connection)
	wr      verbs.SendWR
	sge     [1]verbs.SGE
	// Version two: a continued call's MIDDLE Sends (nfrags of them,
	// chained before wr) and where each Send's rdma_credit lies in
	// credBuf (ncred of them; the one of wr in sendBuf otherwise).
	frags   [contMaxFrags - 1]verbs.SendWR
	fsge    [contMaxFrags - 1][1]verbs.SGE
	nfrags  int
	credBuf *Buffer
	credAt  [contMaxFrags]int
	ncred   int

	regMu    sync.Mutex
	readMRs  []verbs.MR // expose the call's data: remote read
	writeMRs []verbs.MR // Write and Reply chunk room: remote write
	mrStore  [2 * maxInlineMRs]verbs.MR

	// remoteInv: the rkey the reply's Send With Invalidate revoked (0:
	// none); unregister skips its local invalidation.
	remoteInv uint32

	wbufs      []*Buffer // per Write chunk (nil for an empty one)
	rbuf       *Buffer   // Reply chunk room
	contBuf    *Buffer   // version two: a continued reply, reassembled
	stage      []*Buffer // copies of unregistered call data
	bstore     [maxInlineMRs]*Buffer
	sstore     [4]*Buffer
	segs       []ReadSegment         // scratch: data Read segments while marshaling
	segScratch [maxInlineMRs]Segment // exposeSegs
	sgstor     [inlineReadSegments]ReadSegment

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
	c := x.conn
	if !c.holdPD() {
		return Segment{}, fmt.Errorf("%w: register %d bytes for xid 0x%08x: its protection domain is closed", ErrConnClosed, len(b), x.hdr.XID)
	}
	mr, err := c.pd.Register(b, access)
	if err != nil {
		c.putPD()
		if errors.Is(err, verbs.ErrClosed) {
			// The connection was released under the call: a caller
			// that re-sends calls on a new connection does so.
			err = fmt.Errorf("%w: %w", ErrConnClosed, err)
		}
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

// exposeSegs is expose naming b in segments of at most the connection's
// maxSeg bytes (version two's Maximum Segment Size; one segment in
// version one), all of the one registration. The slice is x's scratch,
// valid until the next call.
func (x *reqCtxt) exposeSegs(b []byte, remote verbs.Access) ([]Segment, error) {
	seg, err := x.expose(b, remote)
	if err != nil {
		return nil, err
	}
	out := x.segScratch[:0]
	max := x.conn.maxSeg
	if max <= 0 || len(b) <= max {
		return append(out, seg), nil
	}
	for off := 0; off < len(b); off += max {
		out = append(out, Segment{Handle: seg.Handle, Length: uint32(min(max, len(b)-off)), Offset: seg.Offset + uint64(off)})
	}
	return out, nil
}

// segsFor is how many segments exposeSegs names n bytes with.
func (c *RequesterConn) segsFor(n int) int {
	if c.maxSeg <= 0 || n <= c.maxSeg {
		return 1
	}
	return (n + c.maxSeg - 1) / c.maxSeg
}

// invalidateReads revokes the responder's access to the call's own data
// (a caller that gives up may reuse it at once). The registrations of the
// Write and Reply chunk room stay until the reply comes: that memory is
// ours, and a responder still writing into it must not fail.
func (x *reqCtxt) invalidateReads() error {
	var errs []error
	x.regMu.Lock()
	for _, mr := range x.readMRs {
		x.conn.localInv.Add(1)
		if err := mr.Invalidate(); err != nil {
			errs = append(errs, err)
		}
	}
	x.regMu.Unlock()
	return errors.Join(errs...)
}

// unregister invalidates and deregisters every registration of the call.
func (x *reqCtxt) unregister() error {
	var errs []error
	x.regMu.Lock()
	for _, mrs := range [2][]verbs.MR{x.readMRs, x.writeMRs} {
		for i, mr := range mrs {
			switch {
			case x.remoteInv != 0 && mr.RKey() == x.remoteInv && !mr.Valid():
				x.conn.remoteInv.Add(1)
			case !mr.Valid():
				// Revoked already (invalidateReads of an abandoned call).
			default:
				x.conn.localInv.Add(1)
				if err := mr.Invalidate(); err != nil {
					errs = append(errs, err)
				}
			}
			if err := mr.Deregister(); err != nil {
				errs = append(errs, err)
			}
			mrs[i] = nil
			x.conn.putPD()
		}
	}
	x.readMRs, x.writeMRs = x.readMRs[:0], x.writeMRs[:0]
	x.remoteInv = 0
	x.regMu.Unlock()
	return errors.Join(errs...)
}

// InvalidateStats counts the call registrations the connection revoked
// itself (local, a LOCAL_INV in Linux's terms) and those the responder
// revoked with the Send of the reply (remote; RemoteInvalidate).
func (c *RequesterConn) InvalidateStats() (local, remote uint64) {
	return c.localInv.Load(), c.remoteInv.Load()
}

// RevokeError: a registration the requester exposed to the responder
// could not be invalidated or deregistered, so the responder may still
// reach that memory. The connection is closed (RFC 8166 §4.5.4) and the
// failure counted as a failed LOCAL_INV in RequesterMetrics.RDMAFailed.
type RevokeError struct {
	XID uint32
	Err error
}

func (e *RevokeError) Error() string {
	return fmt.Sprintf("rdmarpc: xid 0x%08x: revoking the responder's access failed: %v", e.XID, e.Err)
}

func (e *RevokeError) Unwrap() error { return e.Err }

// unregister revokes x's registrations; when that fails the connection
// is closed, counted and logged, and the error returned.
func (c *RequesterConn) unregister(x *reqCtxt) error {
	return c.revoked(x, x.unregister())
}

// invalidateReads is x.invalidateReads with the failure handling of
// unregister.
func (c *RequesterConn) invalidateReads(x *reqCtxt) error {
	return c.revoked(x, x.invalidateReads())
}

func (c *RequesterConn) revoked(x *reqCtxt, err error) error {
	if err == nil {
		return nil
	}
	re := &RevokeError{XID: x.hdr.XID, Err: err}
	c.met.RDMAFailed(verbs.OpLocalInv, verbs.StatusGeneral)
	c.log.Error("rpc-over-rdma connection closed: the responder's access to a call's memory could not be revoked", "xid", x.hdr.XID, "error", err)
	c.fail(fmt.Errorf("%w: %w", ErrConnClosed, re))
	return re
}

// ownPD gives a connection that shares a pool a protection domain of its
// own, with the pool's memory registered in it (PoolDomain): the
// per-RPC registrations made in it can be reached through this
// connection's queue pair only.
func (c *RequesterConn) ownPD(dev verbs.Device) error {
	pd, err := dev.AllocPD()
	if err != nil {
		return fmt.Errorf("rdmarpc: requester: allocate PD: %w", err)
	}
	dom, err := c.pool.Attach(pd)
	if err != nil {
		pd.Close()
		return fmt.Errorf("rdmarpc: requester: %w", err)
	}
	c.pd, c.dom = pd, dom
	c.pdRefs.Store(1) // the connection's; each registration adds one
	return nil
}

// holdPD takes a reference to the connection's own PD for a
// registration; false once the last one is gone and the PD closed (the
// connection was released while a call was on its way: a registration
// then must neither use the PD nor close it a second time). With an own
// pool (dom nil) there is nothing to count.
func (c *RequesterConn) holdPD() bool {
	if c.dom == nil {
		return true
	}
	for {
		n := c.pdRefs.Load()
		if n <= 0 {
			return false
		}
		if c.pdRefs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// putPD drops a reference to the connection's own PD; the last (the
// connection released and every registration gone) closes it. With an own
// pool (dom nil) the pool's PD is closed by release instead.
func (c *RequesterConn) putPD() {
	if c.dom == nil || c.pdRefs.Add(-1) != 0 {
		return
	}
	if err := c.dom.Close(); err != nil {
		c.log.Warn("deregistering the pool from a closed connection's PD failed", "error", err)
	}
	if err := c.pd.Close(); err != nil {
		c.log.Warn("closing a connection's PD failed", "error", err)
	}
}

// sge names b.Bytes[off:off+n] with the connection's key for it.
func (c *RequesterConn) sge(b *Buffer, off, n int) verbs.SGE {
	if c.dom != nil {
		return c.dom.SGE(b, off, n)
	}
	return b.SGE(off, n)
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
	if x.contBuf != nil {
		x.contBuf.Release()
		x.contBuf = nil
	}
}
