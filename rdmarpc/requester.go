package rdmarpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/verbs"
)

// The requester engine: rdmagw as an RPC-over-RDMA client (reverse mode,
// tests, demo, bench). Split like Linux xprtrdma:
//
//	endpoint.go           the skeleton shared with the responder: the
//	                      completion loop, fail/Err, drain
//	requester.go          connection, credits, completion dispatch, reply
//	                      matching and Results
//	requester_marshal.go  building the call: inline, Read chunks, Long call,
//	                      Write and Reply chunks (rpc_rdma.c)
//	requester_reg.go      per-RPC registration and invalidation (frwr_ops.c)

// RequesterConfig configures a requester connection. Zero fields take the
// defaults.
type RequesterConfig struct {
	// Credits is the number of calls asked for in every call header
	// (default 128); the responder's grant, never above it, bounds the
	// calls in flight. Before the first reply the grant is 1.
	Credits int
	// InlineSend is the largest inline call we send (default 4096), capped
	// by the responder's RFC 8797 receive size (1024 without private data).
	InlineSend int
	// InlineRecv is the size of our receive buffers (default 4096).
	InlineRecv int
	// Pool provides registered buffers: receives, Send buffers, staging
	// copies, and the memory offered in Write and Reply chunks. Nil: the
	// connection makes a pool of its own.
	Pool    *Pool
	Limits  Limits
	Logger  hclog.Logger
	Metrics RequesterMetrics
	// ConnectTimeout bounds connection setup (default 10 s).
	ConnectTimeout time.Duration
	// ReserveCredits are kept from ordinary calls for CallReserved
	// (default 0): ordinary calls stop at the grant less this, though
	// they may always have one call in flight.
	ReserveCredits int
	// Backchannel configures backward-direction calls from the
	// responder (RFC 8167; backchannel_requester.go).
	Backchannel RequesterBackchannel
	// RemoteInvalidate advertises "Send With Invalidate OK" (RFC 8797):
	// the responder may invalidate a call's registration with the Send of
	// its reply, which then needs no local invalidation. Set it only on a
	// provider whose registrations a peer can invalidate (the pure-Go
	// provider; not ibverbs, see verbs.MR.Invalidate).
	RemoteInvalidate bool
	// Version selects the RPC-over-RDMA version (requester_v2.go):
	// VersionV1 (the zero value), VersionAuto (try two, fall back to
	// one and remember the server) or VersionV2.
	Version VersionMode
	// VersionMemory remembers what VersionAuto settled on per server
	// address (nil: DefaultVersionMemory).
	VersionMemory *VersionMemory
}

func (c *RequesterConfig) setDefaults() {
	engineDefaults(&c.Credits, &c.InlineSend, &c.InlineRecv, &c.Limits, &c.Logger)
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 10 * time.Second
	}
	if c.Metrics == nil {
		c.Metrics = nopResponderMetrics{}
	}
	if c.VersionMemory == nil {
		c.VersionMemory = DefaultVersionMemory
	}
}

// ReplyPlan says what to offer for the reply; a caller fills it from the
// ULB's reply size estimate.
type ReplyPlan struct {
	// WriteChunks is the room, in bytes, of each Write chunk, in the order
	// of the reply's DDP-eligible items. A room of 0 offers an empty chunk.
	WriteChunks []int
	// ReplyChunk is the room of the Reply chunk; 0 offers none.
	ReplyChunk int
}

// ReplyHeaderMax is the size of the largest RPC-over-RDMA header an
// inline reply (RDMA_MSG) to a call offering p's Write chunks can carry:
// MinHeaderSize plus the Write list the responder returns, every chunk
// with the segment count offered (RFC 8166 §3.4.6), which for
// RequesterConn is one segment per chunk with room, none for an empty
// one. The inline part of the reply must fit the receive buffer after
// this header; Linux reserves the same (rpcrdma_max_reply_header_size,
// for its largest Write list).
func (p *ReplyPlan) ReplyHeaderMax() int {
	n := MinHeaderSize
	for _, room := range p.WriteChunks {
		n += 8 // list discriminator, segment count
		if room > 0 {
			n += segmentSize
		}
	}
	return n
}

// Result is a reply received by RequesterConn.Call.
type Result struct {
	// Inline is the RPC reply as it came inline or through the Reply
	// chunk, with the bodies of items placed in Write chunks removed
	// (their length words remain).
	Inline []byte
	// Chunks holds, per offered Write chunk, the bytes the responder
	// wrote into it.
	Chunks [][]byte
	// Kind says whether the reply came inline or in the Reply chunk.
	Kind ReplyKind

	x *reqCtxt
}

// Release returns the reply's buffers and its credit. Inline and Chunks
// are invalid afterwards.
func (r *Result) Release() {
	if x := r.x; x != nil {
		r.x, r.Inline, r.Chunks = nil, nil, nil
		x.conn.finish(x)
	}
}

// Errors of the requester.
var (
	// ErrRemoteVersion: the responder answered RDMA_ERROR / ERR_VERS.
	ErrRemoteVersion = errors.New("rdmarpc: responder does not speak RPC-over-RDMA version 1 (ERR_VERS)")
	// ErrRemoteChunk: the responder answered RDMA_ERROR / ERR_CHUNK (a
	// malformed call, or a reply that fitted neither inline, the Write
	// chunks nor the Reply chunk).
	ErrRemoteChunk = errors.New("rdmarpc: responder rejected the call (ERR_CHUNK)")
	// ErrBadReply: the reply's transport header was malformed or claims
	// more than was offered.
	ErrBadReply = errors.New("rdmarpc: malformed reply")
	// ErrXIDInUse: a call with the same XID is already in flight.
	ErrXIDInUse = errors.New("rdmarpc: XID already in flight")
)

// RemoteError is an RDMA_ERROR answer to a call.
type RemoteError struct {
	XID               uint32
	Code              ErrorCode
	VersLow, VersHigh uint32 // ERR_VERS only
	// V2 is the RDMA2_ERROR body on a version-two connection (nil in
	// version one); Code is then the closest version-one code.
	V2 *V2ErrorBody
}

func (e *RemoteError) Error() string {
	if e.V2 != nil {
		return fmt.Sprintf("rdmarpc: xid 0x%08x: responder answered %v", e.XID, e.V2)
	}
	if e.Code == ErrCodeVers {
		return fmt.Sprintf("rdmarpc: xid 0x%08x: responder answered ERR_VERS (versions %d-%d)", e.XID, e.VersLow, e.VersHigh)
	}
	return fmt.Sprintf("rdmarpc: xid 0x%08x: responder answered %v", e.XID, e.Code)
}

// Is matches ErrRemoteVersion or ErrRemoteChunk by code; in version two
// also ErrRemoteResource (WRITE_RESOURCE, REPLY_RESOURCE) and
// ErrRemoteSystem (SYSTEM), every code but VERS and VERS_MISMATCH
// matching ErrRemoteChunk too.
func (e *RemoteError) Is(target error) bool {
	if e.V2 != nil {
		switch target {
		case ErrRemoteResource:
			return e.V2.Code == V2ErrWriteResource || e.V2.Code == V2ErrReplyResource
		case ErrRemoteSystem:
			return e.V2.Code == V2ErrSystem
		}
	}
	return (target == ErrRemoteVersion && e.Code == ErrCodeVers) ||
		(target == ErrRemoteChunk && e.Code == ErrCodeChunk)
}

// rrecv is one of the requester's receive buffers.
type rrecv struct {
	idx    int
	buf    *Buffer
	posted bool // guarded by conn.mu
	held   bool // a Result points into it
	wr     verbs.RecvWR
	sge    [1]verbs.SGE
	hdr    Header
	h2     *V2Header // version two (nil on a VersionV1 connection)
}

// reqCtxt states, guarded by conn.mu.
const (
	reqFree    = iota
	reqBusy    // taken by a Call that is marshaling it
	reqWaiting // sent, the caller waits for the reply
	reqReplied // the reply (or an error) is in; the caller holds it
	reqAbandon // the caller gave up; the loop finishes it when the reply comes
)

// RequesterConn is an RPC-over-RDMA client connection.
type RequesterConn struct {
	endpoint // pool, cq, qp, the connection's life (endpoint.go)
	cfg      RequesterConfig
	met      RequesterMetrics
	pd       verbs.PD    // the connection's own protection domain
	dom      *PoolDomain // the shared pool's keys in pd (nil with an own pool)
	pdRefs   atomic.Int64
	// Registrations revoked by the requester (LOCAL_INV in Linux) and by
	// the responder's Send With Invalidate (InvalidateStats).
	localInv, remoteInv atomic.Uint64

	sendMax int
	recvMax int

	mu       sync.Mutex
	granted  int
	inflight int // calls holding a credit
	free     []*reqCtxt
	reqs     []reqCtxt
	recvs    []rrecv
	wake     notifier // ordinary callers waiting for a credit
	wakeRes  notifier // CallReserved callers waiting for a credit
	wakeBC   notifier // version two: backward replies waiting for a credit
	sendsOut int      // Sends posted and not completed
	drained  bool     // the loop has failed the calls in flight; no more

	// Version two (requester_v2.go). vers is fixed before the loop runs.
	vers     uint32
	fellBack bool      // offered version two, continues in one (FellBack)
	link     v2Link    // guarded by mu
	ctls     []ctlSend // control-message slots (none in VersionV1)
	nposted  int       // receives posted, guarded by mu
	maxSeg   int       // largest segment offered (0: any; version one)
	cont     rqCont    // continued replies (requester_v2cont.go), loop goroutine
	v2met    ResponderV2Metrics
	work     WorkMetrics // cfg.Metrics as WorkMetrics, if it is one (metrics_work.go)

	loopDone chan struct{}
	closeMu  sync.Mutex
	closed   bool
	bc       *rqBC // backward-direction calls (backchannel_requester.go)
}

// DialRequester connects to an RPC-over-RDMA responder at addr, offering
// RFC 8797 private data, and posts its receives before the first call.
func DialRequester(ctx context.Context, dev verbs.Device, addr string, cfg RequesterConfig) (*RequesterConn, error) {
	cfg.setDefaults()
	c := &RequesterConn{cfg: cfg, met: cfg.Metrics, work: workMetricsOf(cfg.Metrics), granted: 1,
		wake: newNotifier(), wakeRes: newNotifier(), wakeBC: newNotifier(), loopDone: make(chan struct{})}
	c.endpoint.init("requester", cfg.Logger, cfg.Metrics, cfg.Pool, &c.mu, ErrConnClosed)
	c.bcInit()
	err := c.setup(ctx, dev, addr)
	if err == nil {
		err = c.v2Init()
	}
	if err == nil {
		err = c.negotiate(ctx, addr)
	}
	if err != nil {
		c.fail(err)
		close(c.loopDone)
		c.release()
		return nil, err
	}
	c.met.ConnUp()
	versionSettled(c.met, c.vers, c.fellBack)
	go c.loop()
	return c, nil
}

func (c *RequesterConn) setup(ctx context.Context, dev verbs.Device, addr string) error {
	cfg := &c.cfg
	if c.pool != nil {
		if err := c.ownPD(dev); err != nil {
			return err
		}
	} else if err := c.setupPool(dev); err != nil {
		return err
	} else {
		c.pd = c.pool.pd
	}
	nrecv := cfg.Credits + recvExtra + c.bc.credits
	nreq := 2 * cfg.Credits // a context waits for its Send completion after its reply
	var err error
	if c.cq, err = dev.CreateCQ(nreq + nrecv + c.bc.credits + 16); err != nil {
		return fmt.Errorf("rdmarpc: requester: create CQ: %w", err)
	}
	local := PrivateData{MaxSendSize: cfg.InlineSend, MaxRecvSize: cfg.InlineRecv, RemoteInvalidate: cfg.RemoteInvalidate}
	var pdata [PrivateDataSize]byte
	local.Encode(pdata[:])
	c.qp, err = dev.Dial(ctx, addr, verbs.ConnOptions{PD: c.pd, SendCQ: c.cq, RecvCQ: c.cq,
		MaxSendWR: nreq + 8 + c.bc.credits + c.contWRs(), MaxRecvWR: nrecv, MaxSGE: defaultMaxSGE,
		PrivateData: pdata[:], Timeout: cfg.ConnectTimeout})
	if err != nil {
		return fmt.Errorf("rdmarpc: requester: connect to %s: %w", addr, err)
	}
	peer, ok := ParsePrivateData(c.qp.PrivateData())
	c.sendMax, c.recvMax = InlineThresholds(local, peer, ok)
	c.sendMax = min(c.sendMax, cfg.InlineSend)
	// Receives before the first call: the responder answers only calls,
	// so posting them now, before Call can run, is in time.
	c.recvs = make([]rrecv, nrecv)
	for i := range c.recvs {
		r := &c.recvs[i]
		r.idx = i
		if r.buf, err = c.pool.Get(cfg.InlineRecv); err != nil {
			return fmt.Errorf("rdmarpc: requester: receive buffer: %w", err)
		}
		if err := c.postRecvLocked(r); err != nil {
			return fmt.Errorf("rdmarpc: requester: post receive: %w", err)
		}
	}
	c.reqs = make([]reqCtxt, nreq)
	c.free = make([]*reqCtxt, 0, nreq)
	for i := range c.reqs {
		x := &c.reqs[i]
		x.idx, x.conn, x.done = i, c, make(chan struct{}, 1)
		c.free = append(c.free, x)
	}
	c.log.Debug("rpc-over-rdma connection established", "peer", addr, "private_data", ok,
		"inline_send", c.sendMax, "inline_recv", cfg.InlineRecv)
	return nil
}

func (c *RequesterConn) postRecvLocked(r *rrecv) error {
	r.sge[0] = c.sge(r.buf, 0, len(r.buf.Bytes))
	r.wr = verbs.RecvWR{ID: wrRecv | uint64(r.idx), SGL: r.sge[:]}
	r.posted = true
	if err := c.qp.PostRecv(&r.wr); err != nil {
		r.posted = false
		return err
	}
	c.nposted++
	return nil
}

// repostLocked gives a receive back to the queue pair, or its buffer back
// to the pool once the connection is gone. Caller holds c.mu.
func (c *RequesterConn) repostLocked(r *rrecv) {
	r.held = false
	if r.buf == nil {
		return
	}
	if c.isDead() || c.postRecvLocked(r) != nil {
		r.buf.Release()
		r.buf = nil
	}
}

// Pool is the pool the connection takes registered buffers from.
func (c *RequesterConn) Pool() *Pool { return c.pool }

// InlineSend is the negotiated inline threshold for calls.
func (c *RequesterConn) InlineSend() int { return c.sendMax }

// LocalAddr and RemoteAddr are the connection's endpoints (for the
// gateway's session list); nil before setup.
func (c *RequesterConn) LocalAddr() net.Addr {
	if c.qp == nil {
		return nil
	}
	return c.qp.LocalAddr()
}

// RemoteAddr: see LocalAddr.
func (c *RequesterConn) RemoteAddr() net.Addr {
	if c.qp == nil {
		return nil
	}
	return c.qp.RemoteAddr()
}

// Granted is the responder's current credit grant; in version two, the
// calls its last rdma_credit lets be in flight (those in flight and
// those it still allows).
func (c *RequesterConn) Granted() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.vers == V2Version {
		return c.inflight + c.link.allowance()
	}
	return c.granted
}

// Outstanding is the number of calls holding a credit: sent and not yet
// answered, abandoned ones included (the responder still counts them).
func (c *RequesterConn) Outstanding() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inflight
}

// Done is closed when the connection has ended.
func (c *RequesterConn) Done() <-chan struct{} { return c.dead }

// acquire takes a credit and a context, waiting while the grant is used
// up, bounded by ctx.
// Ordinary calls may use the grant less ReserveCredits (but at least
// one credit); CallReserved may use all of it. Each kind of waiter has a
// notifier of its own, so a wake-up meant for one is never swallowed by
// the other.
func (c *RequesterConn) acquire(ctx context.Context, reserved bool) (*reqCtxt, error) {
	wake := c.wake
	if reserved {
		wake = c.wakeRes
	}
	for {
		c.mu.Lock()
		if c.isDead() {
			c.mu.Unlock()
			return nil, c.Err()
		}
		if c.mayCallLocked(reserved) {
			x := c.free[len(c.free)-1]
			c.free = c.free[:len(c.free)-1]
			c.inflight++
			x.holdsCredit = true
			x.state = reqBusy
			if c.vers == V2Version {
				c.link.posted() // taken back by putLocked if never sent
				x.v2counted = 1
			}
			more := c.mayCallLocked(reserved)
			c.mu.Unlock()
			if more {
				wake.signal()
			}
			return x, nil
		}
		c.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.dead:
		}
	}
}

// mayCallLocked reports whether a call may take a credit and a context
// now. Version one: the grant (less ReserveCredits for ordinary calls,
// which may always have one in flight). Version two: what the
// responder's rdma_credit still allows, likewise, within
// RequesterConfig.Credits calls in flight.
func (c *RequesterConn) mayCallLocked(reserved bool) bool {
	if len(c.free) == 0 {
		return false
	}
	if c.vers == V2Version {
		a := c.link.allowance()
		if c.inflight >= c.cfg.Credits || a == 0 {
			return false
		}
		return reserved || a > c.cfg.ReserveCredits || c.inflight == 0
	}
	limit := c.granted
	if !reserved {
		limit = max(c.granted-c.cfg.ReserveCredits, 1)
	}
	return c.inflight < limit
}

// signalCredit wakes both kinds of waiters after a credit or a context
// came free or the grant grew.
func (c *RequesterConn) signalCredit() {
	c.wake.signal()
	c.wakeRes.signal()
	c.wakeBC.signal()
}

// Call sends msg and waits for its reply, which it puts in r (release it
// with r.Release). Item pieces of msg become Read chunks at their XDR
// Position, registered for this RPC only; the whole call goes as a
// Position-Zero Read chunk (RDMA_NOMSG Long call) when its inline part
// does not fit the inline threshold. plan says which Write chunks and
// Reply chunk to offer; their memory is registered for this RPC only and
// invalidated before the reply is handed over.
//
// msg and its buffers must stay unchanged until Call returns; Call does
// not take ownership of them. An RDMA_ERROR answer is a *RemoteError
// (errors.Is ErrRemoteVersion or ErrRemoteChunk). When ctx ends first,
// Call invalidates the Read chunk registrations (the responder can no
// longer read msg) and returns ctx.Err(); the credit stays in use until
// the reply arrives or the connection ends.
func (c *RequesterConn) Call(ctx context.Context, msg *Message, plan *ReplyPlan, r *Result) error {
	return c.call(ctx, msg, plan, r, false)
}

// CallReserved is Call allowed to use the RequesterConfig.ReserveCredits
// credits ordinary calls leave free: for calls that must get through
// while the connection is busy (a keep-alive NULL ping, say).
func (c *RequesterConn) CallReserved(ctx context.Context, msg *Message, plan *ReplyPlan, r *Result) error {
	return c.call(ctx, msg, plan, r, true)
}

func (c *RequesterConn) call(ctx context.Context, msg *Message, plan *ReplyPlan, r *Result, reserved bool) error {
	if r.x != nil {
		return errors.New("rdmarpc: Call with a Result not yet released")
	}
	x, err := c.acquire(ctx, reserved)
	if err != nil {
		return err
	}
	var kind CallKind
	var inline, exposed int
	if c.vers == V2Version {
		kind, inline, exposed, err = c.marshalV2(x, msg, plan)
	} else {
		kind, inline, exposed, err = c.marshal(x, msg, plan)
	}
	if err == nil {
		err = c.enlist(x, msg.XID)
	}
	if err != nil {
		c.finish(x) // no reply yet: registrations, buffers, credit
		return err
	}
	wr := &x.wr
	if x.nfrags > 0 {
		wr = &x.frags[0] // a continued call: its MIDDLE Sends first
	}
	regs := x.registrations() // before the reply can release them
	if err := c.qp.PostSend(wr); err != nil {
		c.mu.Lock()
		x.sendPending = false
		c.sendsOut--
		c.mu.Unlock()
		c.postFailed("call", err)
	} else {
		c.met.CallSent(kind, inline, exposed)
		if regs > 0 {
			c.work.Posted(WorkRegistration, regs)
		}
		if x.nfrags > 0 {
			c.v2met.V2Continued(false, x.nfrags+1)
		}
	}
	return c.await(ctx, x, r)
}

// enlist makes x the call in flight for xid, its Send about to be
// posted; an XID already in flight, or a connection whose calls have
// already been failed, refuse it.
func (c *RequesterConn) enlist(x *reqCtxt, xid uint32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lookupLocked(xid) != nil {
		return fmt.Errorf("%w: 0x%08x", ErrXIDInUse, xid)
	}
	if c.drained {
		// The loop has already failed every call in flight; this one
		// would never hear back.
		return c.Err()
	}
	x.xid = xid
	x.state = reqWaiting
	x.sendPending = true
	if x.v2counted > 0 {
		// Counted when the credit was taken; the credit written is
		// what the receives posted now allow.
		x.v2counted = 0
		credit := c.link.creditFor(c.advertiseLocked())
		for _, at := range x.credAt[:x.ncred] {
			binary.BigEndian.PutUint32(x.credBuf.Bytes[at:], credit)
		}
	}
	c.sendsOut++
	return nil
}

// await waits for x's reply and hands it over in r, or gives up when ctx
// ends: the call is then abandoned (the loop finishes it when the reply
// comes) and its Read chunks invalidated at once.
func (c *RequesterConn) await(ctx context.Context, x *reqCtxt, r *Result) error {
	select {
	case <-x.done:
	case <-ctx.Done():
		c.mu.Lock()
		if x.state == reqWaiting {
			x.state = reqAbandon
			c.mu.Unlock()
			c.invalidateReads(x)
			return ctx.Err()
		}
		c.mu.Unlock()
		<-x.done // the reply won the race
	}
	if x.err != nil {
		err := x.err
		c.finish(x)
		return err
	}
	r.Inline, r.Chunks, r.Kind, r.x = x.inline, x.chunks, x.kind, x
	return nil
}

// finish ends a call's life after its reply was consumed, abandoned or
// failed: buffers back to the pool, the receive reposted, the credit
// returned. The context itself is free once its Send has completed too.
func (c *RequesterConn) finish(x *reqCtxt) {
	c.unregister(x)
	x.releaseBufs()
	c.mu.Lock()
	if r := x.rep; r != nil {
		x.rep = nil
		c.repostLocked(r)
	}
	c.putLocked(x)
	c.mu.Unlock()
}

// putLocked returns x's credit and, when its Send is done, x itself.
func (c *RequesterConn) putLocked(x *reqCtxt) {
	if x.state == reqFree && !x.holdsCredit {
		return
	}
	x.state = reqFree
	x.inline, x.chunks, x.err = nil, nil, nil
	for ; x.v2counted > 0; x.v2counted-- {
		c.link.unposted()
	}
	if x.holdsCredit {
		x.holdsCredit = false
		c.inflight--
	}
	if !x.sendPending {
		c.free = append(c.free, x)
		if c.isDead() && x.sendBuf != nil {
			x.sendBuf.Release()
			x.sendBuf = nil
		}
	}
	c.signalCredit()
}

// loop owns the completion queue: Send completions and replies.
func (c *RequesterConn) loop() {
	defer close(c.loopDone)
	c.run(context.Background(), c)
	c.drain()
}

// afterPoll and waitTimeout complete the engine interface (endpoint.go).
func (c *RequesterConn) afterPoll() {}

func (c *RequesterConn) waitTimeout() time.Duration { return 0 }

func (c *RequesterConn) completion(wc *verbs.WC) {
	idx := int(wc.ID & wrIndexMask)
	switch wc.ID & wrKindMask {
	case wrRecv:
		if idx < len(c.recvs) {
			c.recvDone(&c.recvs[idx], wc)
		}
	case wrSend:
		if idx < len(c.reqs) {
			c.sendDone(&c.reqs[idx], wc)
		}
	case wrBCSend:
		c.bcSendDone(wc)
	case wrContSend:
		if wc.Status != verbs.StatusSuccess {
			c.wcFailed(wc)
		}
	case wrCtlSend:
		if wc.Status != verbs.StatusSuccess {
			c.wcFailed(wc)
		}
		c.mu.Lock()
		c.ctlDoneLocked(idx)
		c.mu.Unlock()
	}
}

// recvDone takes a Receive's completion: a reply to decode, or a failed
// Receive to post again. Loop goroutine.
func (c *RequesterConn) recvDone(r *rrecv, wc *verbs.WC) {
	c.mu.Lock()
	r.posted = false
	c.nposted--
	c.mu.Unlock()
	if wc.Status != verbs.StatusSuccess {
		c.wcFailed(wc)
		c.mu.Lock()
		c.repostLocked(r)
		c.mu.Unlock()
		return
	}
	var inv uint32
	if wc.Invalidated {
		inv = wc.InvalidatedRKey
	}
	if c.vers == V2Version {
		c.replyV2(r, wc.ByteLen, inv)
	} else {
		c.reply(r, wc.ByteLen, inv)
	}
}

// sendDone retires a call's Send; a request already finished with no
// credit held goes back on the free list. Loop goroutine.
func (c *RequesterConn) sendDone(x *reqCtxt, wc *verbs.WC) {
	if wc.Status != verbs.StatusSuccess {
		c.wcFailed(wc)
	}
	c.mu.Lock()
	x.sendPending = false
	c.sendsOut--
	if x.state == reqFree && !x.holdsCredit {
		c.free = append(c.free, x)
		if c.isDead() && x.sendBuf != nil {
			x.sendBuf.Release()
			x.sendBuf = nil
		}
		c.mu.Unlock()
		c.signalCredit()
		return
	}
	c.mu.Unlock()
}

// drain fails every call still waiting, waits for the queue pair, and
// frees what no caller holds. Loop goroutine.
func (c *RequesterConn) drain() {
	c.met.ConnDown(c.Err())
	c.drainCQ(c, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.sendsOut > 0
	})
	err := c.Err()
	var abandoned []*reqCtxt
	c.mu.Lock()
	c.drained = true
	for i := range c.reqs {
		x := &c.reqs[i]
		switch x.state {
		case reqWaiting:
			x.err = err
			x.state = reqReplied
			x.done <- struct{}{}
		case reqAbandon:
			abandoned = append(abandoned, x)
		}
	}
	for i := range c.recvs {
		if r := &c.recvs[i]; r.buf != nil && !r.held {
			r.posted = false
			r.buf.Release()
			r.buf = nil
		}
	}
	c.mu.Unlock()
	for _, x := range abandoned {
		c.finish(x)
	}
}

// Close disconnects, fails the calls in flight, and releases the
// connection's resources. Results still held stay valid until released.
func (c *RequesterConn) Close() error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.fail(nil)
	<-c.loopDone
	c.release()
	return nil
}

func (c *RequesterConn) release() {
	if c.qp != nil {
		c.qp.Close()
	}
	c.mu.Lock()
	// Only contexts in the free list are idle; the others give their
	// buffer back when they are put back (putLocked, after the end).
	for _, x := range c.free {
		if x.sendBuf != nil {
			x.sendBuf.Release()
			x.sendBuf = nil
		}
	}
	for i := range c.recvs {
		if r := &c.recvs[i]; r.buf != nil && !r.held {
			r.buf.Release()
			r.buf = nil
		}
	}
	// The queue pair is closed: its control Send, if any, is over.
	if c.cont.buf != nil { // a continued reply cut off by the end
		c.cont.buf.Release()
		c.cont.buf = nil
	}
	for i := range c.ctls {
		if s := &c.ctls[i]; s.buf != nil {
			s.buf.Release()
			s.buf = nil
		}
	}
	c.mu.Unlock()
	c.bcRelease()
	if c.cq != nil {
		c.cq.Close()
	}
	c.releasePool()
	if c.dom != nil {
		c.putPD()
	}
}
