//go:build ibverbs && cgo

package ibverbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rdmagw/rdmagw/verbs"
)

// Connection states; state changes happen under conn.mu, PostSend reads
// the atomic copy.
const (
	stateConnecting int32 = iota
	stateConnected
	stateDisconnecting // local Disconnect called, waiting for the CM
	stateEnded
)

// conn is an RC queue pair and its rdma_cm id.
type conn struct {
	dev   *device
	token uint64
	id    *C.struct_rdma_cm_id
	qp    *C.struct_ibv_qp
	qpNum uint32
	pd    *pd
	scq   *cq
	rcq   *cq
	srq   *srq

	private      []byte
	laddr, raddr net.Addr

	state atomic.Int32
	mu    sync.Mutex
	setup chan *cmEvent // events while connecting; nil once established
	err   error
	done  chan struct{}
	gone  bool // the id and QP are destroyed

	sq sendQueue
	rq recvQueue
}

func newConn(d *device) *conn {
	return &conn{dev: d, setup: make(chan *cmEvent, 16), done: make(chan struct{})}
}

// cmEvent routes the id's events: to the connecting goroutine until the
// connection is established, then to the state machine.
func (c *conn) cmEvent(ev *cmEvent) {
	c.mu.Lock()
	if c.setup != nil {
		select {
		case c.setup <- ev:
		default:
		}
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.established(ev)
}

// established handles an event of an established connection.
func (c *conn) established(ev *cmEvent) {
	switch ev.typ {
	case C.RDMA_CM_EVENT_ESTABLISHED, C.RDMA_CM_EVENT_TIMEWAIT_EXIT:
	case C.RDMA_CM_EVENT_DISCONNECTED:
		c.end(ErrPeerDisconnected)
	case C.RDMA_CM_EVENT_DEVICE_REMOVAL:
		c.end(ErrDeviceRemoved)
	default:
		c.end(fmt.Errorf("ibverbs: connection ended by %v: %w", ev, verbs.ErrNotConnected))
	}
}

// finishSetup marks the connection established and replays events that
// arrived meanwhile.
func (c *conn) finishSetup() {
	c.laddr, c.raddr = addrOf(C.rdma_get_local_addr(c.id)), addrOf(C.rdma_get_peer_addr(c.id))
	c.mu.Lock()
	c.state.Store(stateConnected)
	ch := c.setup
	c.setup = nil
	c.mu.Unlock()
	for {
		select {
		case ev := <-ch:
			c.established(ev)
		default:
			return
		}
	}
}

// end moves the connection to its final state: the QP goes to the error
// state (rdma_disconnect: every outstanding work request is flushed, and
// the peer's disconnect request is answered) and Done closes. After a
// local Disconnect, Err stays nil.
func (c *conn) end(why error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Load() == stateEnded {
		return
	}
	if c.state.Load() != stateDisconnecting {
		c.err = why
	}
	c.state.Store(stateEnded)
	if !c.gone {
		c.disconnectLocked()
	}
	close(c.done)
}

// disconnectLocked moves the QP to the error state, which flushes every
// outstanding work request (the provider owns the QP, so rdma_disconnect
// does not), and sends the CM disconnect request or reply.
func (c *conn) disconnectLocked() error {
	if c.qp != nil {
		C.gw_qp_error(c.qp)
	}
	if rc, err := C.rdma_disconnect(c.id); rc != 0 {
		return wrap("rdma_disconnect", err)
	}
	return nil
}

func (c *conn) PrivateData() []byte  { return c.private }
func (c *conn) LocalAddr() net.Addr  { return c.laddr }
func (c *conn) RemoteAddr() net.Addr { return c.raddr }
func (c *conn) Done() <-chan struct{} {
	return c.done
}

func (c *conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Disconnect flushes the queue pair and sends the disconnect request; Done
// closes when the CM reports the disconnect.
func (c *conn) Disconnect() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Load() != stateConnected || c.gone {
		return nil
	}
	c.state.Store(stateDisconnecting)
	return c.disconnectLocked()
}

// Close disconnects if needed and destroys the queue pair and the id.
// Work requests still queued vanish without completions.
func (c *conn) Close() error {
	c.mu.Lock()
	if c.gone {
		c.mu.Unlock()
		return nil
	}
	if s := c.state.Load(); s == stateConnected {
		_ = c.disconnectLocked()
	}
	if c.state.Load() != stateEnded {
		c.state.Store(stateEnded)
		close(c.done)
	}
	c.gone = true
	c.mu.Unlock()
	c.destroy()
	return nil
}

// destroy releases the QP, the id and the scratch memory. The caller has
// made sure no further CM call uses the id (gone, or never published).
func (c *conn) destroy() {
	c.dev.ev.unregister(c.token)
	c.stopPoster()
	if c.qp != nil {
		// Before taking the queue locks: Poll holds the CQ's conns lock
		// while it takes them.
		c.scq.delConn(c)
		c.rcq.delConn(c)
	}
	c.sq.mu.Lock()
	c.rq.mu.Lock()
	if c.qp != nil {
		C.ibv_destroy_qp(c.qp)
		c.qp = nil
	}
	if c.id != nil {
		C.rdma_destroy_id(c.id)
		c.id = nil
	}
	c.sq.free()
	c.rq.free()
	c.rq.mu.Unlock()
	c.sq.mu.Unlock()
}

// createQP creates the RC queue pair with the (normalised) options, moves
// it to INIT and posts the initial receives.
func (c *conn) createQP(o *options) error {
	c.pd, c.scq, c.rcq, c.srq = o.pd, o.scq, o.rcq, o.srq
	var srq *C.struct_ibv_srq
	if o.srq != nil {
		srq = o.srq.srq
	}
	qp, err := C.gw_create_qp(o.pd.pd, o.scq.cq, o.rcq.cq, srq, C.int(o.MaxSendWR), C.int(o.MaxRecvWR), C.int(o.MaxSGE))
	if qp == nil {
		return wrap("ibv_create_qp", err)
	}
	c.qp = qp
	c.qpNum = uint32(c.qp.qp_num)
	if err := c.modify(C.IBV_QPS_INIT, 0, -1); err != nil {
		return err
	}
	c.sq.init(o.MaxSendWR, o.MaxSGE)
	if o.srq == nil {
		c.rq.init(o.MaxRecvWR, o.MaxSGE)
	}
	c.scq.addConn(c)
	c.rcq.addConn(c)
	if o.InitialRecv != nil && o.srq == nil {
		return c.postRecv(o.InitialRecv)
	}
	return nil
}

// modify moves the QP to state with the CM's attributes (RNR retry
// count rnr in RTS). rd >= 0 overrides the CM's RDMA Read depth of the
// state: max_dest_rd_atomic (IRD) in RTR, max_rd_atomic (ORD) in RTS.
func (c *conn) modify(state C.int, rnr, rd int) error {
	if rc := C.gw_modify_qp(c.id, c.qp, state, C.int(rnr), C.int(rd)); rc != 0 {
		return fmt.Errorf("ibverbs: modify QP to state %d: %w", int(state), errno(rc))
	}
	return nil
}

func (c *conn) PostSend(wr *verbs.SendWR) error {
	q := &c.sq
	q.mu.Lock()
	defer q.mu.Unlock()
	if c.state.Load() != stateConnected || c.qp == nil {
		return verbs.ErrNotConnected
	}
	if q.failed != nil {
		return q.failed
	}
	n := 0
	for w := wr; w != nil; w = w.Next {
		n++
	}
	if n > q.size-int(q.head-q.tail) {
		return verbs.ErrQueueFull
	}
	moved, err := c.fillSend(wr)
	if err != nil {
		return err
	}
	first := q.head
	q.head += uint64(n)
	if (moved < softPostBytes || !c.dev.caps.softRoCE) && q.sent == first && q.postMu.TryLock() {
		// Nothing queued ahead and no post in progress: post here.
		// On rxe a chain moving a page or more goes to the poster:
		// the requester's work runs inside the post (post.go).
		// Elsewhere the post is a doorbell and nothing is queued.
		done, err := q.post(c.qp, first, q.head)
		q.sent = first + done
		q.head = q.sent // what the device did not take was not posted
		q.postMu.Unlock()
		return err
	}
	c.kickPoster()
	return nil
}

// fillSend writes the chain into the slots from head on and returns the
// bytes its SGEs move (post.go: softPostBytes); q.mu is held and the
// queue has room.
func (c *conn) fillSend(wr *verbs.SendWR) (int, error) {
	q := &c.sq
	ws := unsafe.Slice(q.wrs, q.size)
	sges := unsafe.Slice(q.sges, q.size*q.maxSGE)
	seq, moved := q.head, 0
	for w := wr; w != nil; w = w.Next {
		opcode, write, err := sendOpcode(w.Op)
		if err != nil {
			return 0, err
		}
		if len(w.SGL) > q.maxSGE {
			return 0, fmt.Errorf("%w: %d SGEs in one work request, MaxSGE is %d", verbs.ErrInvalidSGE, len(w.SGL), q.maxSGE)
		}
		if rd := c.dev.caps.maxSGERd; w.Op == verbs.OpRDMARead && rd > 0 && len(w.SGL) > rd {
			return 0, fmt.Errorf("%w: %d SGEs in one RDMA Read, the device (%s) scatters a Read into at most %d",
				verbs.ErrInvalidSGE, len(w.SGL), c.dev.name, rd)
		}
		slot := int(seq % uint64(q.size))
		x := &ws[slot]
		x.wr_id = C.uint64_t(tagSend<<tagShift | seq&seqMask)
		x.opcode = opcode
		x.flags = 0
		if w.Signal {
			x.flags = C.IBV_SEND_SIGNALED
		}
		x.remote_addr, x.rkey, x.inv_rkey = C.uint64_t(w.RemoteAddr), C.uint32_t(w.RKey), C.uint32_t(w.InvalidateRKey)
		off := slot * q.maxSGE
		x.sge_off = C.uint32_t(off)
		k, b, err := fillSGEs(c.pd, sges[off:off+q.maxSGE], w.SGL, write)
		if err != nil {
			return 0, err
		}
		x.num_sge = C.uint32_t(k)
		q.ring[slot] = sendSlot{id: w.ID, op: w.Op}
		seq++
		moved += b
	}
	return moved, nil
}

func sendOpcode(op verbs.Opcode) (C.uint32_t, bool, error) {
	switch op {
	case verbs.OpSend:
		return C.IBV_WR_SEND, false, nil
	case verbs.OpSendInv:
		return C.IBV_WR_SEND_WITH_INV, false, nil
	case verbs.OpRDMAWrite:
		return C.IBV_WR_RDMA_WRITE, false, nil
	case verbs.OpRDMARead:
		return C.IBV_WR_RDMA_READ, true, nil
	}
	return 0, false, fmt.Errorf("ibverbs: cannot post a %v work request", op)
}

// fillSGEs checks sgl against the PD and copies its non-empty entries into
// dst, returning how many it wrote and their bytes. (A zero-length SGE
// means 2 GiB to some devices, so empty entries are left out.)
func fillSGEs(p *pd, dst []C.struct_ibv_sge, sgl []verbs.SGE, write bool) (k, bytes int, err error) {
	for _, s := range sgl {
		if err := p.checkSGE(s, write); err != nil {
			return 0, 0, err
		}
		if len(s.Buf) == 0 {
			continue
		}
		dst[k].addr = C.uint64_t(uintptr(unsafe.Pointer(unsafe.SliceData(s.Buf))))
		dst[k].length = C.uint32_t(len(s.Buf))
		dst[k].lkey = C.uint32_t(s.LKey)
		k++
		bytes += len(s.Buf)
	}
	return k, bytes, nil
}

func (c *conn) PostRecv(wr *verbs.RecvWR) error {
	if c.srq != nil {
		return verbs.ErrSRQ
	}
	if c.state.Load() == stateEnded {
		return verbs.ErrNotConnected
	}
	return c.postRecv(wr)
}

func (c *conn) postRecv(wr *verbs.RecvWR) error {
	q := &c.rq
	q.mu.Lock()
	defer q.mu.Unlock()
	if c.qp == nil {
		return verbs.ErrNotConnected
	}
	n := 0
	for w := wr; w != nil; w = w.Next {
		n++
	}
	if n > q.size-int(q.head-q.tail) {
		return verbs.ErrQueueFull
	}
	ws := unsafe.Slice(q.wrs, q.size)
	sges := unsafe.Slice(q.sges, q.size*q.maxSGE)
	i, off := 0, 0
	for w := wr; w != nil; w = w.Next {
		if len(w.SGL) > q.maxSGE {
			return fmt.Errorf("%w: %d SGEs in one receive, MaxSGE is %d", verbs.ErrInvalidSGE, len(w.SGL), q.maxSGE)
		}
		k, _, err := fillSGEs(c.pd, sges[off:], w.SGL, true)
		if err != nil {
			return err
		}
		seq := q.head + uint64(i)
		ws[i] = C.struct_gw_rwr{wr_id: C.uint64_t(tagRecv<<tagShift | seq&seqMask), sge_off: C.uint32_t(off), num_sge: C.uint32_t(k)}
		q.ring[seq%uint64(q.size)] = w.ID
		off += k
		i++
	}
	rc := C.gw_post_recv(c.qp, nil, q.scratch, q.wrs, q.sges, C.int(n), q.posted)
	q.head += uint64(*q.posted)
	if rc != 0 {
		return postErr("ibv_post_recv", rc)
	}
	return nil
}

// addrOf converts a socket address from librdmacm.
func addrOf(sa *C.struct_sockaddr) net.Addr {
	if sa == nil {
		return nil
	}
	var ip [16]C.uint8_t
	var port C.int
	n := int(C.gw_sockaddr(sa, &ip[0], &port))
	if n == 0 {
		return nil
	}
	b := C.GoBytes(unsafe.Pointer(&ip[0]), C.int(n))
	return &net.TCPAddr{IP: net.IP(b), Port: int(port)}
}
