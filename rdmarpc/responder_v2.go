package rdmarpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rdmagw/rdmagw/xdr"
)

// Version two on the responder (draft-ietf-nfsv4-rpcrdma-version-two-07),
// enabled by ResponderConfig.V2. The version is decided per connection
// by the first message whose version is supported:
//
//	first message   vers 1  -> version 1 for good: the v1 path, unchanged
//	                vers 2  -> version 2 for good (a prefix of 16 octets
//	                           at least; shorter is discarded silently,
//	                           the connection still undecided)
//	                other   -> ERR_VERS 1..2 (wire-identical in both
//	                           versions), still undecided
//	v1 connection   vers 2 or other -> ERR_VERS 1..1: version 1 has no
//	                           VERS_MISMATCH, and 1..1 is what this
//	                           connection speaks
//	v2 connection   vers 1  -> RDMA2_ERR_VERS_MISMATCH (supported, not
//	                           this connection's)
//	                other   -> RDMA2_ERR_VERS 1..2
//
// A version-two call is translated into the version-one Header the
// engine already serves: the Call chunk of RDMA2_CALL_EXTERNAL becomes
// the Position-Zero Read chunk (an RDMA_NOMSG Long call), the Read list,
// provisional Write list and Reply chunk are copied as they are, and a
// continued call's reassembled Payload stream becomes its inline part.
// So Read chunk pulling, memory waits, Write chunk pairing and the
// Handler contract are the same code for both versions; what differs is
// how the headers and answers are encoded (buildReply, answer), how
// credits are counted and what a reply too large for the Reply chunk
// does (continuation, responder_v2reply.go).
//
// Credits. Every version-two message we send carries
//
//	rdma_credit = V2Credit(messages received, Credits - calls outstanding)
//
// the count of messages the peer may have sent in all when it reads it.
// With one reply per call this is the draft's "Sent count + Advertised
// credits" (our sends are the replies to the calls no longer
// outstanding); unlike that literal reading it stays right when a call
// came in several fragments or we sent GRANTs. Receives are posted for
// Credits plus recvExtra, so one is always left for the peer's GRANT.
// While a continued call's fragments use up half of what we granted and
// no reply is due, we send RDMA2_GRANT. Our own Sends are counted against
// the peer's last rdma_credit (V2MayPost); a reply waits for credit, an
// answer on the completion goroutine that finds none closes the
// connection (it could not be sent), and one GRANT may go beyond it (the
// draft has every receiver keep a receive for one).
//
// Not served on version two (answered RDMA2_ERR_INVAL_HTYPE): reverse-
// direction traffic (REPLY_* types from the requester; the Backchannel
// is version one only) and, until the transport-property exchange
// (v2_propx) is wired in, CONNPROP_*.

// v2Responder is the version-two state of one responder connection.
type v2Responder struct {
	// vers is the connection's version: 0 until decided, then 1 or 2.
	vers atomic.Uint32
	// link is the state both engines keep (v2_propx.go): the property
	// exchange and the Sent and Received message counts and the peer's
	// last rdma_credit and the last one we wrote. Replies
	// are built on handler goroutines, so mu guards them.
	mu     sync.Mutex
	link   v2Link
	credit broadcast // the peer's credit changed
	// sendMax is the inline threshold for version-two replies: 4096 or
	// the peer's RFC 8797 receive size, then its Receive Buffer Size.
	sendMax atomic.Int32
	met     ResponderV2Metrics

	// Serve goroutine only.
	hdr     V2Header // the message being received
	reasm   Reassembler
	contBuf *Buffer // storage of the continued message in progress
	frags   int     // its fragments so far
}

// ResponderV2Metrics is implemented by ResponderMetrics that also count
// version-two events (optional: the engine checks with a type assertion).
type ResponderV2Metrics interface {
	// V2ErrorSent: an RDMA2_ERROR of the given code was posted.
	V2ErrorSent(code V2ErrCode)
	// V2GrantSent: an RDMA2_GRANT was posted.
	V2GrantSent()
	// V2Continued: a reply left in sends Sends (MIDDLE fragments and the
	// final one), or a call arrived in sends fragments (received true).
	V2Continued(received bool, sends int)
	// V2Discarded: a continuation fragment was dropped silently (its
	// sequence had been answered already).
	V2Discarded()
}

type nopV2Metrics struct{}

func (nopV2Metrics) V2ErrorSent(V2ErrCode) {}
func (nopV2Metrics) V2GrantSent()          {}
func (nopV2Metrics) V2Continued(bool, int) {}
func (nopV2Metrics) V2Discarded()          {}

// broadcast wakes every waiter at once: waiters take the channel before
// they check their condition, and signal closes it. It allocates only
// when somebody waits.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) signal() {
	b.mu.Lock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
	b.mu.Unlock()
}

// v2Setup settles the version-two inline threshold for replies: the
// peer's RFC 8797 receive size when it sent one, else the draft's
// default of 4096 (V2DefaultInline), never above InlineSend; the send
// buffers hold the larger of the two versions' thresholds.
func (c *ResponderConn) v2Setup(privateData bool) {
	c.sendBufSize = c.sendMax
	if !c.cfg.V2 {
		return
	}
	sendMax := c.sendMax
	if !privateData {
		sendMax = min(c.cfg.InlineSend, V2DefaultInline)
	}
	c.v2.sendMax.Store(int32(sendMax))
	c.sendBufSize = max(c.sendMax, sendMax)
	c.v2.link.init(localProps(c.sendBufSize, c.cfg.InlineRecv, 0, c.cfg.Limits.MaxSegmentsPerChunk, RvrsDirNone))
}

// replyMax is the inline threshold for a reply of version two (v2) or one.
func (c *ResponderConn) replyMax(v2 bool) int {
	if v2 {
		return int(c.v2.sendMax.Load())
	}
	return c.sendMax
}

func (c *ResponderConn) v2Init() {
	c.v2.met = nopV2Metrics{}
	if m, ok := c.cfg.Metrics.(ResponderV2Metrics); ok {
		c.v2.met = m
	}
}

// Version is the RPC-over-RDMA version the call came in (1 or 2).
func (c *Call) Version() uint32 {
	if c.v2 {
		return V2Version
	}
	return Version
}

// Version is the connection's RPC-over-RDMA version: 1 or 2, 0 while no
// message has decided it (always 1 without ResponderConfig.V2).
func (c *ResponderConn) Version() int {
	if !c.cfg.V2 {
		return Version
	}
	return int(c.v2.vers.Load())
}

// versRange is the version range an ERR_VERS answer reports: 1..2 while a
// V2 connection is undecided, else 1..1 (a version-one connection cannot
// switch).
func (c *ResponderConn) versRange() (uint32, uint32) {
	if c.cfg.V2 && c.v2.vers.Load() == 0 {
		return Version, V2Version
	}
	return Version, Version
}

// routeV2 decides the connection's version (see the table above) and
// takes the messages of a version-two connection; false sends r down the
// version-one path. Serve goroutine only.
func (c *ResponderConn) routeV2(r *recvCtxt, data []byte) bool {
	switch c.v2.vers.Load() {
	case Version:
		return false
	case V2Version:
		c.receivedV2(r, data)
		return true
	}
	if len(data) < 8 {
		return false
	}
	switch binary.BigEndian.Uint32(data[4:]) {
	case Version:
		c.v2.vers.Store(Version)
		versionSettled(c.met, Version, false)
	case V2Version:
		if len(data) < V2PrefixSize {
			// The draft: a message shorter than the prefix is discarded
			// without an answer; the version stays undecided.
			c.met.Dropped(DropShort)
			c.repost(r)
			return true
		}
		c.v2.vers.Store(V2Version)
		versionSettled(c.met, V2Version, false)
		c.log.Debug("rpc-over-rdma connection speaks version 2", "peer", c.RemoteAddr())
		c.receivedV2(r, data)
		return true
	}
	return false
}

// v2Grant is the rdma_credit of a message we send now.
func (c *ResponderConn) v2Grant() uint32 {
	adv := c.cfg.Credits - int(c.outstanding.Load())
	c.v2.mu.Lock()
	g := c.v2.link.creditFor(adv)
	c.v2.mu.Unlock()
	return g
}

// v2Take takes Sends against the peer's credit, beyond it by beyond (1
// for a GRANT): n of them, or (some) as many as there is credit for, up
// to n; with wait it waits for credit until the connection ends. It
// returns the Sends taken, 0 for none.
func (c *ResponderConn) v2Take(n, beyond int, some, wait bool) int {
	var ch <-chan struct{}
	for {
		c.v2.mu.Lock()
		l := &c.v2.link
		avail := int(int32(l.credit-l.sent)) + beyond
		k := n
		if some {
			k = min(n, avail)
		}
		if k > 0 && avail >= k {
			l.sent += uint32(k)
			c.v2.mu.Unlock()
			return k
		}
		c.v2.mu.Unlock()
		if !wait {
			return 0
		}
		if ch == nil {
			ch = c.v2.credit.wait() // then check again before waiting
			continue
		}
		select {
		case <-ch:
			ch = nil
		case <-c.dead:
			return 0
		}
	}
}

// v2Untake gives back n Sends taken but never posted.
func (c *ResponderConn) v2Untake(n int) {
	c.v2.mu.Lock()
	c.v2.link.sent -= uint32(n)
	c.v2.mu.Unlock()
}

// receivedV2 handles one message on a version-two connection. Serve
// goroutine only.
func (c *ResponderConn) receivedV2(r *recvCtxt, data []byte) {
	v := &c.v2.hdr
	if c.v2.reasm.Max == 0 {
		c.v2.reasm.Max = c.pool.MaxSize()
		if m := c.cfg.MaxReassembled; m > 0 {
			c.v2.reasm.Max = min(m, c.v2.reasm.Max)
		}
	}
	hlen, err := v.Decode(data, c.cfg.Limits)
	c.v2.mu.Lock()
	if err != nil {
		c.v2.link.received++ // counted, its credit not trusted
		c.v2.mu.Unlock()
		c.badV2Header(r, err)
		return
	}
	err = c.v2.link.recv(v) // counts it, takes its credit and properties
	c.v2.mu.Unlock()
	c.v2.credit.signal()
	if err != nil {
		c.dropCont()
		c.badV2Header(r, err) // BAD_PROPVAL, INVAL_CONT of a property sequence
		return
	}
	payload := data[hlen:]
	st := c.v2.reasm.Offer(v, payload)
	switch st.Verdict {
	case ContStart, ContAppend:
		c.contFragment(r, st, payload)
		return
	case ContComplete:
		data, hlen = c.contFinal(st, payload), 0
	case ContDiscard:
		c.v2.met.V2Discarded()
		c.repost(r)
		return
	case ContReject:
		c.contRejected(r, st)
		return
	}
	switch v.HType {
	case HTypeCallInline, HTypeCallExternal:
		c.callV2(r, v, data, hlen)
	case HTypeGrant, HTypeConnPropMiddle:
		c.repost(r) // the credit and properties are taken above
	case HTypeConnPropFinal:
		c.answerProps(r)
	case HTypeReplyInline:
		c.backwardReplyV2(r, v, data[hlen:]) // or INVAL_HTYPE
	case HTypeError:
		// Never answered (no error loops); a requester has no call of
		// ours to fail.
		c.met.Dropped(DropClientError)
		c.log.Debug("RDMA2_ERROR from requester dropped", "peer", c.RemoteAddr(), "header", v.String())
		c.repost(r)
	default:
		c.invalHType(r, v)
	}
}

// invalHType answers a message of a type the responder does not take.
func (c *ResponderConn) invalHType(r *recvCtxt, v *V2Header) {
	c.dropCont()
	c.log.Debug("RDMA2_ERR_INVAL_HTYPE", "peer", c.RemoteAddr(), "header", v.String())
	c.answerV2(r, v.XID, V2Version, V2ErrorBody{Code: V2ErrInvalHType})
}

// badV2Header answers a message V2Header.Decode refused on a version-two
// connection.
func (c *ResponderConn) badV2Header(r *recvCtxt, err error) {
	var ve *V2Error
	if !errors.As(err, &ve) || !ve.Answerable() {
		if ve != nil {
			c.met.Dropped(DropClientError) // an RDMA2_ERROR that does not decode
		} else {
			c.met.Dropped(DropShort)
		}
		c.repost(r)
		return
	}
	body := ve.Body(Version, V2Version)
	if ve.Code == V2ErrVers && ve.Vers == Version {
		body = V2ErrorBody{Code: V2ErrVersMismatch}
	}
	c.log.Debug("version-two header refused", "peer", c.RemoteAddr(), "error", err)
	c.answerV2(r, ve.XID, ve.Vers, body)
}

// callV2 translates a version-two call into the call's version-one
// Header and sends it down the common path; data[hlen:] is its Payload
// stream (the reassembled one of a continued call, in c.v2.contBuf's
// place: the call owns it now).
func (c *ResponderConn) callV2(r *recvCtxt, v *V2Header, data []byte, hlen int) {
	call := &r.call
	call.v2, call.invHandle = true, 0
	call.contBuf, c.v2.contBuf = c.v2.contBuf, nil
	if v.InvHandleListed() {
		call.invHandle = v.InvHandle
	}
	h := &call.hdr
	proc := ProcMsg
	if v.HType == HTypeCallExternal {
		proc = ProcNoMsg
	}
	h.Init(v.XID, v.Credit, proc)
	for i := range v.Call {
		h.AppendReadSegment(0, v.Call[i].Segment)
	}
	h.Reads = append(h.Reads, v.Reads...)
	for _, w := range v.Writes {
		h.AppendWriteChunk(w...)
	}
	if v.HasReply {
		h.SetReplyChunk(v.Reply...)
	}
	c.acceptCall(r, data, hlen)
}

// v2Answer maps why the engine refused a version-two call to its answer.
func v2Answer(err error) V2ErrorBody {
	switch {
	case errors.Is(err, errChunkTooBig):
		return V2ErrorBody{Code: V2ErrSystem}
	default: // no RPC message, rdma_xid not the RPC XID
		return V2ErrorBody{Code: V2ErrBadXDR}
	}
}

// contFragment takes one MIDDLE fragment: storage for the sequence at its
// start, the copy, the receive back at once (a fragment holds no call),
// and a GRANT when the peer is running out of credit for the rest. A
// sequence that finds no pool memory for its whole size (taken at its
// first fragment, charged like Read chunk memory) is refused with
// RDMA2_ERR_SYSTEM and the rest of it discarded: unlike a call waiting
// for Read chunk memory it cannot hold its receive while the requester
// keeps sending fragments.
func (c *ResponderConn) contFragment(r *recvCtxt, st ContStep, payload []byte) {
	if st.Verdict == ContStart {
		b, err := c.pool.GetQuota(st.Total, c.callQuota)
		if err != nil {
			// No memory for the sequence: it is refused as a whole.
			xid, _ := c.v2.reasm.InProgress()
			c.v2.reasm.Abort()
			c.log.Debug("continued message refused: no memory", "peer", c.RemoteAddr(), "xid", xid, "bytes", st.Total, "error", err)
			c.answerV2(r, xid, V2Version, V2ErrorBody{Code: V2ErrSystem})
			return
		}
		c.v2.contBuf, c.v2.frags = b, 0
	}
	copy(c.v2.contBuf.Bytes[st.Off:], payload)
	c.v2.frags++
	c.repost(r)
	c.maybeGrant()
}

// contFinal copies the final fragment and returns the whole Payload
// stream; its storage stays in c.v2.contBuf until callV2 hands it to the
// call (or dropCont releases it).
func (c *ResponderConn) contFinal(st ContStep, payload []byte) []byte {
	b := c.v2.contBuf
	copy(b.Bytes[st.Off:], payload)
	c.v2.met.V2Continued(true, c.v2.frags+1)
	return b.Bytes[:st.Total]
}

// contRejected answers a continuation the Reassembler refused.
func (c *ResponderConn) contRejected(r *recvCtxt, st ContStep) {
	if st.Abandoned {
		c.dropCont()
		if st.AbandonedXID != st.Err.XID {
			c.answerV2Only(st.AbandonedXID, V2Version, V2ErrorBody{Code: V2ErrInvalCont})
		}
	}
	c.log.Debug("continuation refused", "peer", c.RemoteAddr(), "error", st.Err)
	c.answerV2(r, st.Err.XID, V2Version, V2ErrorBody{Code: st.Err.Code()})
}

// dropCont releases the storage of a sequence in progress (it was broken,
// or the connection ends).
func (c *ResponderConn) dropCont() {
	if c.v2.contBuf != nil {
		c.v2.contBuf.Release()
		c.v2.contBuf = nil
	}
	if _, ok := c.v2.reasm.InProgress(); ok {
		c.v2.reasm.Reset()
	}
}

// maybeGrant sends RDMA2_GRANT when the peer has used up half of the
// credit we last granted and a fresh grant gives it more. Serve
// goroutine.
func (c *ResponderConn) maybeGrant() {
	adv := c.cfg.Credits - int(c.outstanding.Load())
	c.v2.mu.Lock()
	due := c.v2.link.grantDue(adv)
	c.v2.mu.Unlock()
	if !due {
		return
	}
	s := c.takeControlSend(1)
	if s == nil {
		return // the peer gets credit with the next reply
	}
	c.sendV2Control(s, 0, V2Version, HTypeGrant, nil)
	if c.post(s) == nil {
		c.v2.met.V2GrantSent()
	}
}

// sendV2Control makes s one signaled Send of a version-two control
// message of type t (GRANT, or ERROR with body), credit granted now.
func (c *ResponderConn) sendV2Control(s *sendCtxt, xid, vers uint32, t HType, body *V2ErrorBody) {
	s.begin()
	e := xdr.NewEncoder(s.buf.Bytes[:V2ErrorMaxSize])
	putV2Prefix(&e, xid, vers, c.v2Grant(), t)
	if t == HTypeError {
		body.encode(&e)
	}
	s.single(e.Len())
}

// answerV2 sends an RDMA2_ERROR for the message in receive r and reposts
// the receive; answerV2Only sends one for xid alone (a sequence
// abandoned by another message). Serve goroutine: they never wait; with
// no send context, send-queue slot or peer credit the connection closes.
func (c *ResponderConn) answerV2(r *recvCtxt, xid, vers uint32, body V2ErrorBody) {
	c.repost(r)
	c.answerV2Only(xid, vers, body)
}

func (c *ResponderConn) answerV2Only(xid, vers uint32, body V2ErrorBody) {
	s := c.takeControlSend(0)
	if s == nil {
		if !c.isDead() {
			c.unsendable(xid, "RDMA2_ERROR "+body.Code.String())
		}
		return
	}
	c.sendV2Control(s, xid, vers, HTypeError, &body)
	sent := s.sendLen()
	if c.post(s) == nil {
		c.v2.met.V2ErrorSent(body.Code)
		c.met.ReplySent(ReplyError, sent, 0)
	}
}

// takeControlSend takes, without waiting, a send context, a send-queue
// slot and a Send's worth of the peer's credit (beyond it by beyond):
// all of them or nothing.
func (c *ResponderConn) takeControlSend(beyond int) *sendCtxt {
	s := c.getSend(false)
	if s == nil {
		return nil
	}
	if c.v2Take(1, beyond, false, false) == 0 {
		c.putSend(s)
		return nil
	}
	if !c.sq.tryTake(1) {
		c.v2Untake(1)
		c.putSend(s)
		return nil
	}
	return s
}

// answerProps answers the requester's RDMA2_CONNPROP_FINAL with ours (xid
// 0, as v2Link builds it) and takes the reply threshold the two property
// sets allow. The exchange is the requester's to start: a responder never
// sends properties unasked, so a version-one client never sees them.
func (c *ResponderConn) answerProps(r *recvCtxt) {
	c.repost(r)
	s := c.takeControlSend(0)
	if s == nil {
		if !c.isDead() {
			c.unsendable(0, "RDMA2_CONNPROP_FINAL")
		}
		return
	}
	var h V2Header
	adv := c.cfg.Credits - int(c.outstanding.Load())
	c.v2.mu.Lock()
	c.v2.link.buildProps(&h, adv)
	lim := c.v2.link.limits()
	c.v2.mu.Unlock()
	c.v2.sendMax.Store(int32(min(lim.SendMax, c.sendBufSize)))
	s.begin()
	n, err := h.Encode(s.buf.Bytes)
	if err != nil {
		c.putSend(s)
		c.v2Untake(1)
		c.sq.put(1)
		c.fail(fmt.Errorf("rdmarpc: responder: transport properties: %w", err))
		return
	}
	s.single(n)
	c.log.Debug("transport properties exchanged", "peer", c.RemoteAddr(), "inline_send", lim.SendMax,
		"inline_recv", lim.RecvMax)
	c.post(s)
}
