package rdmarpc

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/rdmagw/rdmagw/verbs"
)

// The requester as backward-direction responder (RFC 8167): the server
// end of the connection sends RPC calls (NFSv4.1 callbacks) as RDMA_MSG
// with no chunks; the requester tells them from forward replies by
// msg_type, hands them to a BackwardHandler on a goroutine of their own,
// and sends each reply back the same way, granting its fixed backward
// credit in rdma_credit (as the Linux client does with
// RPCRDMA_BACKWARD_WRS / 2 = 16).

// wrBCSend identifies the Send of a backward reply.
const wrBCSend uint64 = 5 << 56

// BackwardHandler serves backward-direction calls on a requester.
type BackwardHandler interface {
	// ServeBackward is called on a goroutine of its own with one whole
	// RPC call message (the caller's copy, the handler may keep it) and
	// returns the whole RPC reply message, or nil to send none.
	ServeBackward(call []byte) (reply []byte)
}

// BackwardHandlerFunc adapts a function to BackwardHandler.
type BackwardHandlerFunc func(call []byte) []byte

// ServeBackward implements BackwardHandler.
func (f BackwardHandlerFunc) ServeBackward(call []byte) []byte { return f(call) }

// RequesterBackchannel configures the backward direction of a requester
// (RequesterConfig.Backchannel).
type RequesterBackchannel struct {
	// Credits is the backward calls the requester serves at once: the
	// extra receives it posts for them (rfc5666bis §7.2.2.1) and the
	// grant in every backward reply. 0 takes the default, 8; negative
	// posts none (a backward call may then cost the connection).
	Credits int
	// Handler serves the calls; it can also be set later with
	// SetBackwardHandler. Without one, messages are not looked at for
	// backward calls (as in Linux without a bc_serv): a backward call
	// is then dropped as a reply that matches no call.
	Handler BackwardHandler
	Metrics BackchannelMetrics
}

// rqBC is the requester's backward-responder state.
type rqBC struct {
	credits int
	handler atomic.Pointer[BackwardHandler]
	met     BackchannelMetrics
	active  atomic.Int32 // calls with the handler or whose reply is being sent
	sends   []bcSend     // guarded by conn.mu
	free    []*bcSend
}

// bcSend is one backward reply in flight.
type bcSend struct {
	idx     int
	buf     *Buffer
	wr      verbs.SendWR
	sge     [1]verbs.SGE
	pending bool
}

func (c *RequesterConn) bcInit() {
	b := &c.cfg.Backchannel
	n := b.Credits
	if n == 0 {
		n = 8
	}
	n = max(n, 0)
	c.bc = &rqBC{credits: n, met: b.Metrics}
	if c.bc.met == nil {
		c.bc.met = nopBackchannelMetrics{}
	}
	if b.Handler != nil {
		h := b.Handler
		c.bc.handler.Store(&h)
	}
	c.bc.sends = make([]bcSend, n)
	for i := range c.bc.sends {
		c.bc.sends[i].idx = i
		c.bc.free = append(c.bc.free, &c.bc.sends[i])
	}
}

// SetBackwardHandler sets (or, with nil, removes) the handler of
// backward-direction calls.
func (c *RequesterConn) SetBackwardHandler(h BackwardHandler) {
	if h == nil {
		c.bc.handler.Store(nil)
		return
	}
	c.bc.handler.Store(&h)
}

// BackwardCredits is the backward credit the requester grants (the
// number of backward calls it serves at once); an NFSv4.1 client
// advertises it as the back channel's ca_maxrequests.
func (c *RequesterConn) BackwardCredits() int { return c.bc.credits }

// BackwardMax is the largest backward message, RPC message only, that
// fits both directions' inline sizes; an NFSv4.1 client advertises it as
// the back channel's ca_maxrequestsize and ca_maxresponsesize.
func (c *RequesterConn) BackwardMax() int {
	if c.vers == V2Version {
		// A call comes as CALL_INLINE with three empty lists, its reply
		// goes as REPLY_INLINE with an empty Write list.
		return min(c.sendMax-V2ReplyInlineMinSize, c.cfg.InlineRecv-V2CallInlineMinSize)
	}
	return min(c.sendMax, c.cfg.InlineRecv) - BackwardHeaderSize
}

// backwardCall takes a received message that is a backward call: it
// copies the call out, reposts the receive and serves it. Loop goroutine.
// false: not a backward call.
func (c *RequesterConn) backwardCall(r *rrecv, payload []byte) bool {
	if backwardMsgType(&r.hdr, payload) != rpcCall {
		return false
	}
	return c.serveBackward(r, r.hdr.XID, payload)
}

// serveBackward serves the backward call payload (xid) received in r,
// of either version: false when no handler is set (r is left alone).
func (c *RequesterConn) serveBackward(r *rrecv, xid uint32, payload []byte) bool {
	b := c.bc
	hp := b.handler.Load()
	if hp == nil {
		// No backchannel service: like Linux (rpcrdma_is_bcall wants a
		// bc_serv) the message goes down the reply path, which drops it
		// as unmatched unless its XID is a forward call's.
		return false
	}
	call := append([]byte(nil), payload...)
	c.mu.Lock()
	c.repostLocked(r)
	c.mu.Unlock()
	switch {
	case int(b.active.Add(1)) > b.credits:
		b.active.Add(-1)
		b.met.BackwardError("no_credit")
		c.log.Warn("backward-direction call beyond the backward credit dropped", "xid", xid, "credits", b.credits)
		return true
	}
	b.met.BackwardCall(len(call))
	go func() {
		defer b.active.Add(-1)
		reply := (*hp).ServeBackward(call)
		if reply == nil {
			return
		}
		if err := c.sendBackwardReply(reply); err != nil {
			c.log.Warn("backward-direction reply not sent", "xid", xid, "error", err)
		}
	}()
	return true
}

// sendBackwardReply sends the whole RPC reply message reply inline.
func (c *RequesterConn) sendBackwardReply(reply []byte) error {
	b := c.bc
	if len(reply) < 8 {
		return fmt.Errorf("rdmarpc: backward reply of %d bytes is no RPC reply", len(reply))
	}
	hdrLen := BackwardHeaderSize
	if c.vers == V2Version {
		hdrLen = V2ReplyInlineMinSize
	}
	if hdrLen+len(reply) > c.sendMax {
		b.met.BackwardError("too_big")
		return fmt.Errorf("%w: %d bytes, the peer receives %d inline", ErrBackchannelTooBig, len(reply), c.sendMax)
	}
	xid := binary.BigEndian.Uint32(reply)
	if err := c.bcCreditV2(); err != nil {
		b.met.BackwardError("closed")
		return err
	}
	s, err := c.bcTakeSend()
	if err != nil {
		return err
	}
	fail := func(err error) error {
		c.bcReturnSend(s)
		return err
	}
	if s.buf == nil {
		buf, err := c.pool.Get(c.sendMax)
		if err != nil {
			return fail(err)
		}
		s.buf = buf
	}
	if c.vers == V2Version {
		c.mu.Lock()
		credit := c.link.creditFor(c.advertiseLocked())
		c.mu.Unlock()
		putV2ReplyHeader(s.buf.Bytes, xid, credit)
	} else {
		putBackwardHeader(s.buf.Bytes, xid, uint32(b.credits))
	}
	n := hdrLen + copy(s.buf.Bytes[hdrLen:], reply)
	s.sge[0] = c.sge(s.buf, 0, n)
	s.wr = verbs.SendWR{ID: wrBCSend | uint64(s.idx), Op: verbs.OpSend, SGL: s.sge[:], Signal: true}
	if err := c.qp.PostSend(&s.wr); err != nil {
		b.met.BackwardError("closed")
		return fail(fmt.Errorf("%w: posting backward reply: %w", ErrConnClosed, err))
	}
	b.met.BackwardReply(len(reply))
	return nil
}

// bcTakeSend takes a free backward-reply Send slot for a reply counted
// by bcCreditV2 (uncounting it if there is none).
func (c *RequesterConn) bcTakeSend() (*bcSend, error) {
	b := c.bc
	c.mu.Lock()
	if c.isDead() {
		c.mu.Unlock()
		b.met.BackwardError("closed")
		return nil, c.Err()
	}
	if len(b.free) == 0 {
		// More replies than credits cannot be: active bounds them.
		b.met.BackwardError("no_credit")
		c.bcUncountLocked()
		c.mu.Unlock()
		return nil, ErrBackchannelCredit
	}
	s := b.free[len(b.free)-1]
	b.free = b.free[:len(b.free)-1]
	s.pending = true
	c.sendsOut++
	c.mu.Unlock()
	return s, nil
}

// bcReturnSend gives back a slot bcTakeSend took for a reply that was
// not posted.
func (c *RequesterConn) bcReturnSend(s *bcSend) {
	c.mu.Lock()
	c.bcUncountLocked()
	s.pending = false
	c.sendsOut--
	c.bc.free = append(c.bc.free, s)
	c.mu.Unlock()
}

// bcSendDone retires a backward reply's Send. Loop goroutine.
func (c *RequesterConn) bcSendDone(wc *verbs.WC) {
	idx := int(wc.ID & wrIndexMask)
	if idx >= len(c.bc.sends) {
		return
	}
	if wc.Status != verbs.StatusSuccess {
		c.wcFailed(wc)
	}
	s := &c.bc.sends[idx]
	c.mu.Lock()
	if s.pending {
		s.pending = false
		c.sendsOut--
		if c.isDead() && s.buf != nil {
			s.buf.Release()
			s.buf = nil
		}
		c.bc.free = append(c.bc.free, s)
	}
	c.mu.Unlock()
}

// bcRelease frees the buffers of backward replies not in flight.
func (c *RequesterConn) bcRelease() {
	if c.bc == nil {
		return
	}
	c.mu.Lock()
	for i := range c.bc.sends {
		if s := &c.bc.sends[i]; !s.pending && s.buf != nil {
			s.buf.Release()
			s.buf = nil
		}
	}
	c.mu.Unlock()
}

// Version two (requester_v2.go): a backward call comes as CALL_INLINE
// with no chunks (Reverse-Direction Support SIMPLE, which the requester
// announces when it has backward credits), its reply goes as
// REPLY_INLINE with an empty Write list, and the reply's Send takes a
// credit of the connection's one flow (v2Link) like any message.

// putV2ReplyHeader writes the 20-byte REPLY_INLINE header of a backward
// reply.
func putV2ReplyHeader(b []byte, xid, credit uint32) {
	binary.BigEndian.PutUint32(b[0:], xid)
	binary.BigEndian.PutUint32(b[4:], V2Version)
	binary.BigEndian.PutUint32(b[8:], credit)
	binary.BigEndian.PutUint32(b[12:], uint32(HTypeReplyInline))
	binary.BigEndian.PutUint32(b[16:], 0)
}

// bcCreditV2 waits, on a version-two connection, until the responder's
// credit allows one more Send and counts it (bcUncountLocked gives it
// back if the reply is not posted after all).
func (c *RequesterConn) bcCreditV2() error {
	if c.vers != V2Version {
		return nil
	}
	for {
		c.mu.Lock()
		if c.isDead() {
			c.mu.Unlock()
			return c.Err()
		}
		if c.link.mayPost() {
			c.link.posted()
			more := c.link.mayPost()
			c.mu.Unlock()
			if more {
				c.wakeBC.signal()
			}
			return nil
		}
		c.mu.Unlock()
		select {
		case <-c.wakeBC:
		case <-c.dead:
		}
	}
}

func (c *RequesterConn) bcUncountLocked() {
	if c.vers == V2Version {
		c.link.unposted()
	}
}

// backwardCallV2 takes a version-two message that may be a backward
// call. Loop goroutine. A CALL_INLINE without chunks whose RPC message
// is a CALL with its XID is served; one with chunks is answered
// READ_CHUNKS or WRITE_CHUNKS with a maximum of 0 (no chunks in the
// reverse direction), other call types INVAL_HTYPE (CONT is not
// announced), and a call with no handler to take it SYSTEM.
func (c *RequesterConn) backwardCallV2(r *rrecv, h *V2Header, payload []byte) {
	ans := V2ErrorBody{Code: V2ErrInvalHType}
	switch {
	case h.HType != HTypeCallInline:
	case len(h.Reads) > 0:
		ans = V2ErrorBody{Code: V2ErrReadChunks}
	case len(h.Writes) > 0 || h.HasReply:
		ans = V2ErrorBody{Code: V2ErrWriteChunks}
	case len(payload) < 8 || binary.BigEndian.Uint32(payload) != h.XID || binary.BigEndian.Uint32(payload[4:]) != rpcCall:
		ans = V2ErrorBody{Code: V2ErrBadXDR}
	case c.bc.credits > 0 && c.serveBackward(r, h.XID, payload):
		return
	default:
		ans = V2ErrorBody{Code: V2ErrSystem}
		c.bc.met.BackwardError("no_handler")
	}
	c.repost(r)
	c.met.Dropped(DropMalformed)
	c.log.Warn("version-two backward call not taken", "peer", c.peer(), "xid", h.XID, "type", h.HType.String(), "answer", ans.String())
	c.sendErrorV2(h.XID, ans)
}
