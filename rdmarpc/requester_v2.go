package rdmarpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/rdmagw/rdmagw/verbs"
)

// The requester's version two (draft-ietf-nfsv4-rpcrdma-version-two-07):
// choosing the version at connect, the calls (CALL_INLINE with data item
// Read chunks, CALL_EXTERNAL with a Call chunk), the replies
// (REPLY_INLINE, REPLY_EXTERNAL), RDMA2_ERROR answers both ways, GRANT and
// the v2 credit (v2Link, v2_propx.go).
//
// Connect, for RequesterConfig.Version:
//
//	VersionV1    version one as before, nothing extra on the wire
//	VersionV2    send CONNPROP_FINAL first and wait for the responder's
//	             answer; an ERR_VERS answer fails the dial
//	VersionAuto  as VersionV2, but an ERR_VERS answer naming version 1
//	             (RDMA_ERROR of version one, or RDMA2_ERROR / RDMA2_ERR_VERS)
//	             or no answer within the connect timeout continues in
//	             version one on the same connection, and the server's
//	             address is remembered (VersionMemory): the next dial to it
//	             starts in version one and does not negotiate again
//
// In version two a call holds a credit from acquire until its Send is
// posted (v2Link counts it) and the responder's rdma_credit, on every
// message it sends, bounds the Sends; a call still waits for a context
// (RequesterConfig.Credits bounds the calls in flight in both versions).

// VersionMode selects the RPC-over-RDMA version a requester speaks.
type VersionMode uint8

const (
	// VersionV1 speaks version one only (the zero value: nothing changes
	// for existing users).
	VersionV1 VersionMode = iota
	// VersionAuto tries version two and falls back to version one.
	VersionAuto
	// VersionV2 speaks version two only.
	VersionV2
)

func (m VersionMode) String() string {
	switch m {
	case VersionV1:
		return "1"
	case VersionAuto:
		return "auto"
	case VersionV2:
		return "2"
	}
	return fmt.Sprintf("VersionMode(%d)", uint8(m))
}

// ParseVersionMode reads "auto", "1" or "2" (as in a configuration file).
func ParseVersionMode(s string) (VersionMode, error) {
	switch strings.TrimSpace(strings.ToLower(s)) {
	case "auto":
		return VersionAuto, nil
	case "1":
		return VersionV1, nil
	case "2":
		return VersionV2, nil
	}
	return 0, fmt.Errorf("rdmarpc: RPC-over-RDMA version %q: want auto, 1 or 2", s)
}

// VersionMemory remembers, per server address, the version a VersionAuto
// requester settled on, so a reconnect does not negotiate again (the
// draft's "avoid a version negotiation loop"). Safe for concurrent use;
// the zero value is empty.
type VersionMemory struct {
	mu sync.Mutex
	m  map[string]uint32
}

// DefaultVersionMemory is used when RequesterConfig.VersionMemory is nil.
var DefaultVersionMemory = new(VersionMemory)

// Lookup returns the version remembered for addr, 0 if none.
func (m *VersionMemory) Lookup(addr string) uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[addr]
}

// Remember records version v for addr.
func (m *VersionMemory) Remember(addr string, v uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[string]uint32)
	}
	m.m[addr] = v
}

// Forget drops what is remembered for addr (the server may have been
// upgraded: the next VersionAuto dial negotiates again).
func (m *VersionMemory) Forget(addr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, addr)
}

// Errors of version two.
var (
	// ErrRemoteResource: the responder answered RDMA2_ERR_WRITE_RESOURCE
	// or RDMA2_ERR_REPLY_RESOURCE: the Write chunks or Reply chunk
	// offered were too small (RemoteError.V2.LengthNeeded says how much
	// was needed). It also matches ErrRemoteChunk, so a caller that
	// retries with more room on ERR_CHUNK does so here too.
	ErrRemoteResource = errors.New("rdmarpc: responder needs more reply room (RDMA2_ERR_WRITE_RESOURCE/REPLY_RESOURCE)")
	// ErrRemoteSystem: the responder answered RDMA2_ERR_SYSTEM.
	ErrRemoteSystem = errors.New("rdmarpc: responder failed the call (RDMA2_ERR_SYSTEM)")
	// ErrVersionNegotiation: connection setup could not settle on a
	// version (VersionV2 against a version-one responder, or an answer
	// naming no version this requester speaks).
	ErrVersionNegotiation = errors.New("rdmarpc: RPC-over-RDMA version negotiation failed")
)

// wrCtlSend identifies the Send of a version-two control message
// (CONNPROP, RDMA2_ERROR answer).
const wrCtlSend uint64 = 6 << 56

// ctlSlots is how many control messages may be in flight at once: an
// answer to a message that broke a continued reply, and the answer to the
// reply it broke, say.
const ctlSlots = 2

// ctlSend is one control-message slot of the requester.
type ctlSend struct {
	idx  int
	buf  *Buffer
	wr   verbs.SendWR
	sge  [1]verbs.SGE
	busy bool // guarded by conn.mu
	hdr  V2Header
}

// Version is the RPC-over-RDMA version the connection speaks (1 or 2).
func (c *RequesterConn) Version() uint32 { return c.vers }

// FellBack reports whether the connection offered version two and
// continues in version one (VersionAuto: the responder answered ERR_VERS,
// or did not answer within ConnectTimeout). A dial that found version
// one remembered (VersionMemory) offers nothing and did not fall back.
func (c *RequesterConn) FellBack() bool { return c.fellBack }

// v2Init prepares what version two needs when cfg may speak it: a
// version-two header per receive and per call context, the control slot.
func (c *RequesterConn) v2Init() error {
	// Version-two events go to the metrics when they implement
	// ResponderV2Metrics (the same events, the roles swapped: a call
	// left, a reply arrived, in several Sends).
	c.v2met = nopV2Metrics{}
	if m, ok := c.cfg.Metrics.(ResponderV2Metrics); ok {
		c.v2met = m
	}
	if c.cfg.Version == VersionV1 {
		return nil
	}
	h2s := make([]V2Header, len(c.recvs)+len(c.reqs))
	for i := range c.recvs {
		c.recvs[i].h2 = &h2s[i]
	}
	for i := range c.reqs {
		c.reqs[i].h2 = &h2s[len(c.recvs)+i]
	}
	c.ctls = make([]ctlSend, ctlSlots)
	for i := range c.ctls {
		b, err := c.pool.Get(V2FirstMessageMax)
		if err != nil {
			return fmt.Errorf("rdmarpc: requester: control buffer: %w", err)
		}
		c.ctls[i] = ctlSend{idx: i, buf: b}
	}
	return nil
}

// negotiate settles the connection's version before any call (Dial,
// before the loop runs: it polls the CQ itself).
func (c *RequesterConn) negotiate(ctx context.Context, addr string) error {
	c.vers = Version
	mode := c.cfg.Version
	mem := c.cfg.VersionMemory
	if mode == VersionV1 || (mode == VersionAuto && mem.Lookup(addr) == Version) {
		return nil
	}
	lim := localProps(c.cfg.InlineSend, c.cfg.InlineRecv, c.pool.MaxSize(), 0, c.bcLevel())
	c.mu.Lock()
	c.link.init(lim)
	s := &c.ctls[0]
	c.link.buildProps(&s.hdr, c.advertiseLocked())
	err := c.postCtlLocked(s)
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("rdmarpc: requester: sending transport properties: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
	defer cancel()
	v, err := c.awaitFirst(ctx)
	switch {
	case err != nil && mode == VersionAuto && ctx.Err() != nil:
		c.log.Info("no answer to version-two transport properties: continuing in version one", "peer", addr)
		v, err = Version, nil
	case err != nil:
		return err
	}
	if v == Version && mode == VersionV2 {
		return fmt.Errorf("%w: %s answered ERR_VERS to version two", ErrVersionNegotiation, addr)
	}
	c.vers, c.fellBack = v, v == Version
	if mode == VersionAuto {
		mem.Remember(addr, v)
	}
	if v == V2Version {
		c.mu.Lock()
		lim := c.link.limits()
		c.mu.Unlock()
		c.sendMax = min(lim.SendMax, c.cfg.InlineSend)
		c.maxSeg = lim.MaxSegmentSize
	}
	return nil
}

// awaitFirst polls for the responder's answer to the properties: the
// version it implies. Version one on ERR_VERS naming it; version two once
// the responder's CONNPROP_FINAL (or, short of properties, any other
// version-two message but an ERR_VERS) has come.
func (c *RequesterConn) awaitFirst(ctx context.Context) (uint32, error) {
	for {
		n := c.cq.Poll(c.wcs[:])
		for i := 0; i < n; i++ {
			wc := &c.wcs[i]
			if wc.Status != verbs.StatusSuccess {
				return 0, fmt.Errorf("rdmarpc: requester: version negotiation: %w",
					&verbs.CompletionError{Op: wc.Op, Status: wc.Status, ID: wc.ID})
			}
			switch wc.ID & wrKindMask {
			case wrCtlSend:
				c.mu.Lock()
				c.ctlDoneLocked(int(wc.ID & wrIndexMask))
				c.mu.Unlock()
			case wrRecv:
				r := &c.recvs[int(wc.ID&wrIndexMask)]
				v, done, err := c.firstAnswer(r.buf.Bytes[:wc.ByteLen], r)
				c.mu.Lock()
				r.posted = false
				c.nposted--
				c.repostLocked(r)
				c.mu.Unlock()
				if err != nil || done {
					return v, err
				}
			}
		}
		if n == 0 {
			if err := c.cq.Wait(ctx); err != nil {
				return 0, err
			}
		}
	}
}

// firstAnswer reads one message received during negotiation.
func (c *RequesterConn) firstAnswer(b []byte, r *rrecv) (v uint32, done bool, err error) {
	if len(b) < V2PrefixSize {
		return 0, false, nil // discarded, as any short message
	}
	low, high, isVers := errVersRange(b)
	if isVers {
		if low <= Version && Version <= high {
			c.log.Info("responder speaks RPC-over-RDMA version one: continuing in version one",
				"peer", c.peer(), "versions", fmt.Sprintf("%d-%d", low, high))
			return Version, true, nil
		}
		return 0, true, fmt.Errorf("%w: responder speaks versions %d-%d", ErrVersionNegotiation, low, high)
	}
	if binary.BigEndian.Uint32(b[4:]) != V2Version {
		return 0, true, fmt.Errorf("%w: first answer is version %d", ErrVersionNegotiation, binary.BigEndian.Uint32(b[4:]))
	}
	h := r.h2
	_, derr := h.Decode(b, c.cfg.Limits)
	c.mu.Lock()
	if derr != nil {
		c.link.recvCredit(binary.BigEndian.Uint32(b[8:]))
	} else {
		err = c.link.recv(h)
	}
	final := c.link.peerFinal
	c.mu.Unlock()
	if derr != nil || err != nil {
		// A bad answer to our properties: keep the defaults, answer
		// what is owed, go on in version two.
		c.answerV2(firstErr(derr, err))
		return V2Version, true, nil
	}
	if h.HType == HTypeError {
		c.log.Warn("responder answered the transport properties with an error", "peer", c.peer(), "error", h.ErrBody.String())
	}
	return V2Version, final || !h.HType.IsControl() || h.HType == HTypeError, nil
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// errVersRange recognises an ERR_VERS answer of either version (the
// layouts are the same: word 3 is 4, word 4 is 1): RDMA_ERROR with
// rdma_vers 1, or RDMA2_ERROR echoing our 2 (rdmagw's own version-one
// responder echoes it too).
func errVersRange(b []byte) (low, high uint32, ok bool) {
	if len(b) < 28 || binary.BigEndian.Uint32(b[12:]) != uint32(ProcError) || binary.BigEndian.Uint32(b[16:]) != uint32(ErrCodeVers) {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(b[20:]), binary.BigEndian.Uint32(b[24:]), true
}

// bcLevel is the Reverse-Direction Support the requester announces.
func (c *RequesterConn) bcLevel() uint32 {
	if c.bc != nil && c.bc.credits > 0 {
		return RvrsDirSimple
	}
	return RvrsDirNone
}

// advertiseLocked is how many more messages the requester can take: its
// receives posted, less the one kept for a GRANT.
func (c *RequesterConn) advertiseLocked() int { return max(c.nposted-1, 0) }

// freeCtlLocked returns a free control slot, nil if none (or the
// connection is gone, or no credit allows a Send).
func (c *RequesterConn) freeCtlLocked() *ctlSend {
	if c.isDead() || !c.link.mayPost() {
		return nil
	}
	for i := range c.ctls {
		if s := &c.ctls[i]; !s.busy && s.buf != nil {
			return s
		}
	}
	return nil
}

// postCtlLocked posts slot s's header (built by the caller). Caller
// holds c.mu.
func (c *RequesterConn) postCtlLocked(s *ctlSend) error {
	n, err := s.hdr.Encode(s.buf.Bytes)
	if err != nil {
		return err
	}
	s.sge[0] = c.sge(s.buf, 0, n)
	s.wr = verbs.SendWR{ID: wrCtlSend | uint64(s.idx), Op: verbs.OpSend, SGL: s.sge[:], Signal: true}
	s.busy = true
	c.sendsOut++
	if err := c.qp.PostSend(&s.wr); err != nil {
		s.busy = false
		c.sendsOut--
		return err
	}
	c.link.posted()
	return nil
}

func (c *RequesterConn) ctlDoneLocked(idx int) {
	if idx < len(c.ctls) && c.ctls[idx].busy {
		c.ctls[idx].busy = false
		c.sendsOut--
	}
}

// answerV2 sends the RDMA2_ERROR owed for err (a decode or property
// error), when one is owed and the control slot and a credit are free;
// otherwise the answer is dropped and counted.
func (c *RequesterConn) answerV2(err error) {
	c.met.Dropped(DropMalformed)
	c.log.Warn("bad version-two message from the responder", "peer", c.peer(), "error", err)
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.freeCtlLocked()
	if s == nil {
		return
	}
	var ve *V2Error
	if errors.As(err, &ve) && ve.Code == V2ErrVers {
		// The version is fixed on this connection.
		ve.Code = V2ErrVersMismatch
	}
	if !s.hdr.SetErrorAnswer(err, c.link.creditFor(c.advertiseLocked()), V2Version, V2Version) {
		return
	}
	c.postAnswerLocked(s)
}

// grantIfDue sends an RDMA2_GRANT when the responder is running out of
// the credit last written (a continued reply in many fragments, say), if
// the control slot and a credit of ours are free; a later message tries
// again otherwise.
func (c *RequesterConn) grantIfDue() {
	c.mu.Lock()
	defer c.mu.Unlock()
	adv := c.advertiseLocked()
	if !c.link.grantDue(adv) {
		return
	}
	s := c.freeCtlLocked()
	if s == nil {
		return
	}
	s.hdr.Init(0, c.link.creditFor(adv), HTypeGrant)
	if err := c.postCtlLocked(s); err != nil {
		c.log.Warn("RDMA2_GRANT not sent", "peer", c.peer(), "error", err)
		return
	}
	c.v2met.V2GrantSent()
}

// sendErrorV2 sends the RDMA2_ERROR body for xid, when the control slot
// and a credit are free.
func (c *RequesterConn) sendErrorV2(xid uint32, body V2ErrorBody) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.freeCtlLocked()
	if s == nil {
		return
	}
	s.hdr.Init(xid, c.link.creditFor(c.advertiseLocked()), HTypeError)
	s.hdr.ErrBody = body
	c.postAnswerLocked(s)
}

func (c *RequesterConn) postAnswerLocked(s *ctlSend) {
	if err := c.postCtlLocked(s); err != nil {
		c.log.Warn("RDMA2_ERROR answer not sent", "peer", c.peer(), "error", err)
		return
	}
	c.v2met.V2ErrorSent(s.hdr.ErrBody.Code)
}

// beginV2 starts x's version-two header: prefix (the credit is written
// when the Send is enlisted), the reply room beginCall put in x.hdr.
func (x *reqCtxt) beginV2(xid uint32) *V2Header {
	h := x.h2
	h.Init(xid, 0, HTypeCallInline)
	for _, w := range x.hdr.Writes {
		h.AppendWriteChunk(w...)
	}
	if x.hdr.HasReply {
		h.SetReplyChunk(x.hdr.Reply...)
	}
	return h
}

// marshalV2 is marshal for version two: CALL_INLINE with the whole
// message, CALL_INLINE with data item Read chunks, or CALL_EXTERNAL with
// the rest in the Call chunk.
func (c *RequesterConn) marshalV2(x *reqCtxt, msg *Message, plan *ReplyPlan) (kind CallKind, inline, exposed int, err error) {
	if err := c.beginCall(x, msg, plan); err != nil {
		return 0, 0, 0, err
	}
	h := x.beginV2(msg.XID)
	if h.EncodedLen()+msg.Len() <= c.sendMax {
		n, err := x.sendV2(msg, false)
		return CallInline, n, 0, err
	}
	rest, exposed, err := c.exposeItems(x, msg)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, s := range x.segs {
		h.AppendReadSegment(s.Position, s.Segment)
	}
	if h.EncodedLen()+rest <= c.sendMax {
		n, err := x.sendV2(msg, true)
		return CallReadChunk, n, exposed, err
	}
	if n, ok, err := c.sendContinuedV2(x, msg, rest); ok {
		kind := CallInline
		if exposed > 0 {
			kind = CallReadChunk
		}
		return kind, n, exposed, err
	}
	b, err := c.stageRest(x, msg, rest)
	if err != nil {
		return 0, 0, 0, err
	}
	segs, err := x.exposeSegs(b, verbs.AccessRemoteRead)
	if err != nil {
		return 0, 0, 0, err
	}
	h.HType = HTypeCallExternal
	for _, s := range segs {
		h.AppendCallSegment(s)
	}
	n, err := x.sendV2(nil, true)
	return CallLong, n, exposed + rest, err
}

// sendV2 encodes x's header, then msg (all of it, or without its Read
// items when reduced; nothing for nil) into the Send buffer.
func (x *reqCtxt) sendV2(msg *Message, reduced bool) (int, error) {
	h := x.h2
	c := x.conn
	if err := x.sealV2(); err != nil {
		return 0, err
	}
	n := h.EncodedLen()
	if n > c.sendMax {
		return 0, fmt.Errorf("rdmarpc: xid 0x%08x: transport header of %d bytes exceeds the inline threshold %d", h.XID, n, c.sendMax)
	}
	if _, err := h.Encode(x.sendBuf.Bytes[:n]); err != nil {
		return 0, err
	}
	switch {
	case msg == nil:
	case reduced:
		n += copyRest(x.sendBuf.Bytes[n:], msg)
	default:
		n += msg.Flatten(x.sendBuf.Bytes[n:])
	}
	x.setSend(n)
	return n, nil
}

// sealV2 completes x's call header: rdma_inv_handle, and the check of its
// segments against the responder's Maximum Segment Count.
func (x *reqCtxt) sealV2() error {
	h, c := x.h2, x.conn
	if c.cfg.RemoteInvalidate {
		h.InvHandle = x.invHandle()
	}
	c.mu.Lock()
	l := c.link.limits()
	c.mu.Unlock()
	if n := len(h.Call) + len(h.Reads) + segCount(h); n > l.MaxSegmentCount {
		return fmt.Errorf("rdmarpc: xid 0x%08x: %d segments in the call's header, the responder takes %d", h.XID, n, l.MaxSegmentCount)
	}
	return nil
}

func segCount(h *V2Header) int {
	n := len(h.Reply)
	for _, w := range h.Writes {
		n += len(w)
	}
	return n
}

// invHandle names one of the call's registrations for Send With
// Invalidate: the first Write or Reply chunk's, else the first Read's.
func (x *reqCtxt) invHandle() uint32 {
	x.regMu.Lock()
	defer x.regMu.Unlock()
	for _, mrs := range [2][]verbs.MR{x.writeMRs, x.readMRs} {
		if len(mrs) > 0 {
			return mrs[0].RKey()
		}
	}
	return 0
}

// replyV2 handles one received version-two message. Loop goroutine.
func (c *RequesterConn) replyV2(r *rrecv, n int, inv uint32) {
	b := r.buf.Bytes[:n]
	h := r.h2
	hlen, err := h.Decode(b, c.cfg.Limits)
	if _, short := err.(*ShortError); short {
		c.met.Dropped(DropMalformed)
		c.repost(r)
		return
	}
	c.mu.Lock()
	before := c.link.allowance()
	if err != nil {
		c.link.recvCredit(h.Credit)
	} else {
		err = c.link.recv(h)
	}
	if c.link.allowance() > before {
		c.signalCredit()
	}
	c.mu.Unlock()
	if err != nil {
		c.repost(r)
		c.answerV2(err)
		c.failNamed(h, err)
		return
	}
	defer c.grantIfDue() // once r is reposted or held
	if c.reasmV2(r, h, b[hlen:]) {
		return
	}
	switch h.HType {
	case HTypeGrant, HTypeConnPropMiddle, HTypeConnPropFinal:
		c.repost(r)
	case HTypeError:
		c.errorV2(r, h)
	case HTypeReplyInline, HTypeReplyExternal:
		if h.HType == HTypeReplyInline && binary.BigEndian.Uint32(b[hlen:]) != h.XID {
			c.repost(r)
			c.failNamed(h, fmt.Errorf("rdmarpc: xid 0x%08x: the reply's RPC XID is 0x%08x", h.XID, binary.BigEndian.Uint32(b[hlen:])))
			return
		}
		c.completeV2(r, h, b[hlen:], inv, nil)
	case HTypeCallInline, HTypeCallMiddle, HTypeCallExternal:
		c.backwardCallV2(r, h, b[hlen:])
	default:
		// REPLY_MIDDLE (continuation) is not taken on this connection.
		c.repost(r)
		c.answerV2(&V2Error{XID: h.XID, Vers: h.Vers, HType: h.HType, Code: V2ErrInvalHType,
			Reason: ReasonBadHType, Where: InFixed, Offset: 12, Index: -1, Value: uint64(h.HType)})
		c.failNamed(h, fmt.Errorf("rdmarpc: xid 0x%08x: %v not supported by this requester", h.XID, h.HType))
	}
}

func (c *RequesterConn) repost(r *rrecv) {
	c.mu.Lock()
	c.repostLocked(r)
	c.mu.Unlock()
}

// failNamed fails the call in flight that h names, if any, with
// ErrBadReply wrapping err.
func (c *RequesterConn) failNamed(h *V2Header, err error) {
	if h.HType.IsReply() || h.HType == HTypeError {
		c.failXID(h.XID, err)
	}
}

// failXID fails the call in flight for xid, if any, with ErrBadReply
// wrapping err.
func (c *RequesterConn) failXID(xid uint32, err error) {
	c.mu.Lock()
	x := c.lookupLocked(xid)
	c.mu.Unlock()
	if x == nil {
		return
	}
	if uerr := c.unregister(x); uerr != nil {
		err = uerr
	}
	x.err = fmt.Errorf("%w: %w", ErrBadReply, err)
	c.deliver(x)
}

// errorV2 ends the call an RDMA2_ERROR names with a *RemoteError; an
// unknown code, or one naming no call, is discarded.
func (c *RequesterConn) errorV2(r *rrecv, h *V2Header) {
	if !h.ErrBody.Code.Known() {
		c.repost(r)
		c.met.Dropped(DropMalformed)
		return
	}
	x := c.replyFor(r, h.XID, 0)
	if x == nil {
		c.log.Warn("RDMA2_ERROR for no call in flight", "peer", c.peer(), "xid", h.XID, "error", h.ErrBody.String())
		return
	}
	c.repost(r)
	body := h.ErrBody.canonical()
	c.met.ErrorReceived(v1Code(body.Code))
	if x.err == nil {
		x.err = &RemoteError{XID: h.XID, Code: v1Code(body.Code), VersLow: body.VersLow, VersHigh: body.VersHigh, V2: &body}
	}
	c.deliver(x)
}

// v1Code is the version-one code closest to a version-two one (for
// metrics and RemoteError.Code).
func v1Code(c V2ErrCode) ErrorCode {
	if c == V2ErrVers || c == V2ErrVersMismatch {
		return ErrCodeVers
	}
	return ErrCodeChunk
}

// completeV2 hands a REPLY_INLINE or REPLY_EXTERNAL to its call, as reply
// does for version one. cont, when not nil, holds the reassembled Payload
// stream of a continued reply (payload lies in it): the call takes it.
func (c *RequesterConn) completeV2(r *rrecv, h *V2Header, payload []byte, inv uint32, cont *Buffer) {
	x := c.replyFor(r, h.XID, inv)
	if x == nil {
		if cont != nil {
			cont.Release()
		}
		return
	}
	keep := false
	x.contBuf = cont
	if x.err == nil {
		if h.HType == HTypeReplyInline {
			x.inline, x.kind, keep = payload, ReplyInline, cont == nil
		} else if l := h.Reply.Len(); x.rbuf == nil || l > uint64(len(x.rbuf.Bytes)) {
			x.err = fmt.Errorf("%w: xid 0x%08x: RDMA2_REPLY_EXTERNAL with %d bytes in a Reply chunk of %d", ErrBadReply, h.XID, l, len(x.rbufBytes()))
		} else {
			x.inline, x.kind = x.rbuf.Bytes[:l], ReplyReplyChunk
		}
	}
	c.handOver(x, r, keep, h.XID, h.Writes)
}
