package rdmarpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// Bi-directional RPC-over-RDMA (RFC 8167, drafted as section 7 of
// rfc5666bis): ONC RPC calls that travel from the RPC-over-RDMA
// responder (the server end of the connection) to the requester, and
// their replies back. NFSv4.1 callbacks (CB_NULL, CB_SEQUENCE, CB_RECALL,
// ...) use it when the client binds its RDMA connection as the session's
// back channel (RFC 8267 §6.5.2).
//
// The wire rules, the same in both directions:
//
//   - a backward-direction message is RDMA_MSG with all three chunk lists
//     empty: no Read, Write or Reply chunks and so no Long messages, which
//     is what the Linux client and server send and accept;
//   - the RPC message follows the 28-byte header at once and its XID
//     equals the transport header's rdma_xid; its msg_type (CALL or REPLY)
//     is what tells a backward call from a forward reply at the requester
//     and a backward reply from a forward call at the responder
//     (rpcrdma_is_bcall / svc_rdma_is_reverse_direction_reply in Linux);
//   - the XID spaces of the two directions are independent, so a
//     backward reply is matched only against backward calls;
//   - credits are counted apart from the forward ones: the backward
//     requester (here the responder engine) has at most as many calls
//     outstanding as the backward responder last granted in rdma_credit
//     of a backward reply (1 until the first reply), and never more than
//     it posted receives for; rdma_credit is never 0;
//   - a message must fit the peer's inline receive size: the responder
//     checks the RFC 8797 size it negotiated and fails the call with
//     ErrBackchannelTooBig rather than send what the peer would have to
//     drop with the connection (rfc5666bis §7.3.3).
//
// Files: this one (the responder as backward requester, the shared
// header check), backchannel_requester.go (the requester as backward
// responder).

// BackwardHeaderSize is the transport header of every backward-direction
// message: xid, version, credit, RDMA_MSG and three empty chunk lists.
const BackwardHeaderSize = 28

// Errors of backward-direction operation.
var (
	// ErrBackchannelTooBig: the message does not fit the peer's inline
	// receive size (backward messages are always inline).
	ErrBackchannelTooBig = errors.New("rdmarpc: backward-direction message larger than the peer's inline receive size")
	// ErrBackchannelOff: the connection was set up without backward
	// direction resources.
	ErrBackchannelOff = errors.New("rdmarpc: no backchannel on this connection")
	// ErrBackchannelCredit: every backward credit is in use (TrySend).
	ErrBackchannelCredit = errors.New("rdmarpc: no backchannel credit free")
	// ErrBackchannelXID: a backward call with that XID is outstanding.
	ErrBackchannelXID = errors.New("rdmarpc: backward call XID already outstanding")
)

// RPC msg_type values (RFC 5531).
const (
	rpcCall  = 0
	rpcReply = 1
)

// backwardMsgType reports whether a decoded header with its payload is a
// backward-direction candidate: RDMA_MSG, no chunks, and an RPC message
// whose XID equals rdma_xid. It returns the RPC msg_type (or -1 when the
// message is not of that shape).
func backwardMsgType(h *Header, payload []byte) int {
	if h.Proc != ProcMsg || len(h.Reads) != 0 || len(h.Writes) != 0 || h.HasReply || len(payload) < 8 {
		return -1
	}
	if binary.BigEndian.Uint32(payload) != h.XID {
		return -1
	}
	switch binary.BigEndian.Uint32(payload[4:]) {
	case rpcCall:
		return rpcCall
	case rpcReply:
		return rpcReply
	}
	return -1
}

// putBackwardHeader writes the 28-byte backward-direction header.
func putBackwardHeader(b []byte, xid, credit uint32) {
	binary.BigEndian.PutUint32(b[0:], xid)
	binary.BigEndian.PutUint32(b[4:], Version)
	binary.BigEndian.PutUint32(b[8:], max(credit, 1))
	binary.BigEndian.PutUint32(b[12:], uint32(ProcMsg))
	clear(b[16:28])
}

// BackchannelMetrics receives the events of backward-direction operation
// on either engine. Implementations must be cheap and must not block.
type BackchannelMetrics interface {
	// BackwardCallSent: a backward call was posted (responder) or a
	// backward call was received and handed to the handler (requester).
	BackwardCall(bytes int)
	// BackwardReply: a backward reply was received and handed on
	// (responder) or sent (requester).
	BackwardReply(bytes int)
	// BackwardError counts a failure by reason: "too_big", "no_credit",
	// "unmatched" (a reply for no outstanding call), "timeout" (a call
	// whose reply never came; its credit is taken back), "no_handler",
	// "closed" (the connection went first).
	BackwardError(reason string)
}

type nopBackchannelMetrics struct{}

func (nopBackchannelMetrics) BackwardCall(int)     {}
func (nopBackchannelMetrics) BackwardReply(int)    {}
func (nopBackchannelMetrics) BackwardError(string) {}

// ResponderBackchannel configures backward-direction calls on a responder
// connection (ResponderConfig.Backchannel).
type ResponderBackchannel struct {
	// MaxCalls is the most backward calls outstanding at once whatever
	// the peer grants, and the receives posted beyond the forward
	// credits for their replies (rfc5666bis §7.2.2.2). 0 takes the
	// default, 8; negative: no backchannel.
	MaxCalls int
	// OnReply is called, on the connection's completion goroutine, with
	// each backward reply: the whole RPC reply message, valid only during
	// the call (copy it). It must not block. It can also be set with
	// SetBackchannel before Serve. While it is nil, received messages are
	// not looked at for backward replies (as a Linux server without a
	// backchannel transport), and SendBackwardCall fails.
	OnReply func(xid uint32, reply []byte)
	// Timeout is how long a backward call holds its credit waiting for
	// its reply (default 2 minutes); after it the credit is taken back
	// and a late reply is dropped as unmatched.
	Timeout time.Duration
	Metrics BackchannelMetrics
}

// bcState is the responder's backward-requester side.
type bcState struct {
	cfg     ResponderBackchannel // OnReply and Metrics: set before Serve
	mu      sync.Mutex
	granted int                  // the peer's last grant, capped by MaxCalls
	out     map[uint32]time.Time // outstanding backward calls by XID: deadline
	wake    notifier
}

func (c *ResponderConn) bcInit() {
	b := &c.cfg.Backchannel
	if b.MaxCalls == 0 {
		b.MaxCalls = 8
	}
	if b.Metrics == nil {
		b.Metrics = nopBackchannelMetrics{}
	}
	if b.Timeout <= 0 {
		b.Timeout = 2 * time.Minute
	}
	c.bc = &bcState{cfg: *b, granted: 1, out: make(map[uint32]time.Time), wake: newNotifier()}
}

// SetBackchannel enables backward-direction calls with the reply handler
// onReply and metrics met (nil: none); call it before Serve.
func (c *ResponderConn) SetBackchannel(onReply func(xid uint32, reply []byte), met BackchannelMetrics) {
	if met == nil {
		met = nopBackchannelMetrics{}
	}
	c.bc.mu.Lock()
	c.bc.cfg.OnReply, c.bc.cfg.Metrics = onReply, met
	c.bc.mu.Unlock()
}

func (c *ResponderConn) bcOn() bool {
	// A version-two connection has the backward direction when the
	// requester announced it (backchannel_v2.go).
	return c.bc != nil && c.cfg.Backchannel.MaxCalls > 0 && c.bc.cfg.OnReply != nil &&
		(c.Version() != V2Version || c.v2PeerBackward())
}

// bcRecvs is how many receives the backchannel adds.
func (c *ResponderConn) bcRecvs() int { return max(c.cfg.Backchannel.MaxCalls, 0) }

// BackchannelMax is the largest backward call, RPC message only, that the
// peer's inline receive size admits (0: no backchannel).
func (c *ResponderConn) BackchannelMax() int {
	if !c.bcOn() {
		return 0
	}
	return c.backwardRoom()
}

// BackchannelOutstanding is the number of backward calls awaiting replies.
func (c *ResponderConn) BackchannelOutstanding() int {
	if c.bc == nil {
		return 0
	}
	c.bc.mu.Lock()
	defer c.bc.mu.Unlock()
	return len(c.bc.out)
}

// expireLocked takes back the credits of calls whose reply is overdue.
func (b *bcState) expireLocked(now time.Time) {
	for xid, dl := range b.out {
		if now.After(dl) {
			delete(b.out, xid)
			b.cfg.Metrics.BackwardError("timeout")
		}
	}
}

// take reserves a credit for xid, waiting (unless !wait) until one is
// free, ctx ends or the connection does.
func (c *ResponderConn) bcTake(ctx context.Context, xid uint32, wait bool) error {
	b := c.bc
	for {
		b.mu.Lock()
		b.expireLocked(time.Now())
		if _, dup := b.out[xid]; dup {
			b.mu.Unlock()
			return fmt.Errorf("%w: 0x%08x", ErrBackchannelXID, xid)
		}
		if len(b.out) < min(b.granted, b.cfg.MaxCalls) {
			b.out[xid] = time.Now().Add(b.cfg.Timeout)
			b.mu.Unlock()
			return nil
		}
		b.mu.Unlock()
		if !wait {
			return ErrBackchannelCredit
		}
		// Overdue calls expire on their own: look again now and then.
		t := time.NewTimer(time.Second)
		select {
		case <-b.wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-c.dead:
			t.Stop()
			return c.closedErr()
		}
		t.Stop()
	}
}

func (c *ResponderConn) bcRelease(xid uint32) bool {
	b := c.bc
	b.mu.Lock()
	_, ok := b.out[xid]
	delete(b.out, xid)
	b.mu.Unlock()
	if ok {
		b.wake.signal()
	}
	return ok
}

// SendBackwardCall sends the RPC call message msg (its XID in the first
// word) to the peer as a backward-direction call: RDMA_MSG, inline, no
// chunks. It waits for a backchannel credit while all are in use (bounded
// by ctx) unless wait is false, when it fails with ErrBackchannelCredit.
// A message larger than the peer's inline receive size fails with
// ErrBackchannelTooBig before anything is sent. The reply comes to
// ResponderBackchannel.OnReply. Safe from any goroutine but the one
// running Serve (which frees the send resources it would wait for).
func (c *ResponderConn) SendBackwardCall(ctx context.Context, msg [][]byte, wait bool) error {
	if !c.bcOn() {
		return ErrBackchannelOff
	}
	met := c.bc.cfg.Metrics
	n := 0
	for _, p := range msg {
		n += len(p)
	}
	if n < 8 {
		return fmt.Errorf("rdmarpc: backward call of %d bytes is no RPC call", n)
	}
	if room := c.backwardRoom(); n > room {
		met.BackwardError("too_big")
		return fmt.Errorf("%w: %d bytes, the peer receives %d of RPC message inline",
			ErrBackchannelTooBig, n, room)
	}
	var w [8]byte
	copyFrom(w[:], msg)
	xid := binary.BigEndian.Uint32(w[:])
	if binary.BigEndian.Uint32(w[4:]) != rpcCall {
		return errors.New("rdmarpc: backward call message is not an RPC CALL")
	}
	if err := c.bcTake(ctx, xid, wait); err != nil {
		if errors.Is(err, ErrBackchannelCredit) {
			met.BackwardError("no_credit")
		} else if errors.Is(err, ErrConnClosed) {
			met.BackwardError("closed")
		}
		return err
	}
	s := c.getSend(true)
	if s == nil || !c.sq.take(1, c.dead) {
		if s != nil {
			c.putSend(s)
		}
		c.bcRelease(xid)
		met.BackwardError("closed")
		return c.closedErr()
	}
	if err := c.postBackward(s, xid, msg, n); err != nil {
		c.bcRelease(xid)
		met.BackwardError("closed")
		return err
	}
	met.BackwardCall(n)
	return nil
}

// postBackward posts backward call msg (n bytes) in the connection's
// version on the send context s.
func (c *ResponderConn) postBackward(s *sendCtxt, xid uint32, msg [][]byte, n int) error {
	if c.Version() == V2Version {
		return c.postBackwardV2(s, xid, msg, n)
	}
	putBackwardHeader(s.buf.Bytes, xid, uint32(c.cfg.Backchannel.MaxCalls))
	return c.postBackwardSend(s, BackwardHeaderSize, msg, n)
}

// postBackwardSend posts, in either version, a backward call whose
// transport header (hl bytes) is already in s's buffer: msg (n bytes)
// follows it in one signalled Send.
func (c *ResponderConn) postBackwardSend(s *sendCtxt, hl int, msg [][]byte, n int) error {
	copyFrom(s.buf.Bytes[hl:], msg)
	s.begin()
	s.sges = append(s.sges, s.buf.SGE(0, hl+n))
	s.addWR(wrSend|uint64(s.idx), verbs.OpSend, 0, 0, 0)
	s.wrs[0].Signal = true
	s.slots = 1
	return c.post(s)
}

// AbandonBackwardCall gives back the credit of a backward call whose
// reply will not be waited for; a late reply is dropped as unmatched.
func (c *ResponderConn) AbandonBackwardCall(xid uint32) {
	if c.bc != nil {
		c.bcRelease(xid)
	}
}

func copyFrom(dst []byte, src [][]byte) int {
	n := 0
	for _, p := range src {
		n += copy(dst[n:], p)
		if n == len(dst) {
			break
		}
	}
	return n
}

// backwardReply handles a message that has the shape of a backward reply.
// Serve goroutine. It reports false when the message is not one (so the
// forward path takes it).
func (c *ResponderConn) backwardReply(r *recvCtxt, payload []byte) bool {
	h := &r.call.hdr
	if backwardMsgType(h, payload) != rpcReply {
		return false
	}
	xid := h.XID
	if !c.bcOn() {
		// No backchannel: the forward path answers it as what it is, a
		// message that is no RPC call (the gateway drops it as not_rpc).
		return false
	}
	// The grant rides on every backward reply; 0 counts as 1.
	c.bcTakeReply(r, xid, int(h.Credit), payload)
	return true
}

// bcTakeReply hands the reply to backward call xid to OnReply, or drops
// it as unmatched, and reposts r; grant is the peer's backward credit
// (version one: on every backward reply; version two: the connection's
// one credit flow bounds the calls, so the configured maximum).
func (c *ResponderConn) bcTakeReply(r *recvCtxt, xid uint32, grant int, payload []byte) {
	b := c.bc
	b.mu.Lock()
	_, ok := b.out[xid]
	delete(b.out, xid)
	if ok {
		b.granted = min(max(grant, 1), b.cfg.MaxCalls)
	}
	b.mu.Unlock()
	if !ok {
		b.cfg.Metrics.BackwardError("unmatched")
		c.log.Warn("backward-direction reply for no outstanding backward call dropped", "peer", c.RemoteAddr(), "xid", xid)
		c.repost(r)
		return
	}
	b.wake.signal()
	b.cfg.Metrics.BackwardReply(len(payload))
	if b.cfg.OnReply != nil {
		b.cfg.OnReply(xid, payload)
	}
	c.repost(r)
}
