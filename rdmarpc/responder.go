package rdmarpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/verbs"
)

// The responder engine: rdmagw as the RPC-over-RDMA server of one
// connection (forward mode). Like Linux svcrdma it is split by concern:
//
//	endpoint.go         the skeleton shared with the requester: the
//	                    completion loop, fail/Err, drain
//	responder.go        connection setup, completion dispatch, teardown
//	responder_recv.go   receive: header decode, error answers, Read chunk
//	                    pulling and reassembly of the call
//	responder_reply.go  reply: Write chunk pairing (pairReply), Reply chunk
//	                    (placeReply), ERR_CHUNK, one Write+Send chain
//	responder_ahead.go  cut-through: an item's Writes posted ahead of its
//	                    reply (WriteAhead), each a chain of its own
//
// One goroutine (Serve) owns the completion queue and everything that
// happens in reaction to completions; Reply, WriteAhead and Drop run on
// the handler's goroutines and touch only the send side (send contexts,
// send-queue slots) and the receive being answered.

// ResponderConfig configures a responder connection. Zero fields take the
// defaults.
type ResponderConfig struct {
	// Credits is the most calls the peer may have outstanding (default
	// 128). Never 0: a grant of 0 would stall a client forever (Linux
	// treats it as 1). Receives are posted for Credits plus a few more.
	Credits int
	// InlineRecv is the size of our receive buffers, the largest inline
	// call we accept (default 4096).
	InlineRecv int
	// InlineSend is the largest inline reply we send (default 4096),
	// further capped by the peer's RFC 8797 receive size, or 1024 when the
	// peer sent no private data.
	InlineSend int
	// MaxReadsOutstanding bounds the RDMA Reads in flight on the
	// connection (default 16, the Linux server's value).
	MaxReadsOutstanding int
	// Limits bound the chunk lists a call may carry.
	Limits Limits
	// Pool provides the registered buffers for receives, Read chunk data
	// and replies. Its PD is used for the connection. Nil: the connection
	// makes a pool of its own on a PD of its own.
	Pool *Pool
	// RecvPool, if set, provides the receive buffers instead of Pool (a
	// pool of its own, registered on the same PD, holding buffers of at
	// least InlineRecv bytes): receives are a fixed cost per connection,
	// and kept apart they never compete with calls and replies.
	RecvPool *Pool
	// SharedRecv, if set, is where the connection's calls arrive: one SRQ
	// and its buffers shared by many connections (responder_srq.go),
	// instead of Credits + a few receives of the connection's own. Its
	// PD must be Pool's and its buffers InlineRecv bytes. Credits are
	// still granted (and enforced) per connection.
	SharedRecv *SharedRecv
	Logger     hclog.Logger
	Metrics    ResponderMetrics
	// Backchannel enables backward-direction calls to the peer (RFC
	// 8167; backchannel.go). Zero: none.
	Backchannel ResponderBackchannel
	// MaxCallBytes bounds the pool bytes the connection's calls hold for
	// their Read chunks at once (0: no ceiling of its own); CallQuota, if
	// set, is a ceiling shared with other connections. A call that finds
	// no room waits, holding its receive, until replies free some: the
	// peer is slowed down, never answered with silence.
	MaxCallBytes int
	CallQuota    *Quota
	// ReplyTimeout closes the connection when a reply's Send has not
	// completed for this long: the peer takes no replies (its receive
	// queue stays full) and would otherwise pin their buffers for ever.
	// 0: no timeout.
	ReplyTimeout time.Duration
	// IdleTimeout closes the connection when no call has arrived for this
	// long and none is outstanding. 0: no timeout.
	IdleTimeout time.Duration
	// V2 serves RPC-over-RDMA version 2 (draft-ietf-nfsv4-rpcrdma-
	// version-two-07) besides version 1: the peer's first message decides
	// the connection's version (responder_v2.go). False (the default):
	// version 1 only, every other version answered with ERR_VERS 1..1.
	V2 bool
	// MaxReassembled bounds a version-two call reassembled from
	// continuation fragments, in bytes (0: the pool's largest buffer).
	MaxReassembled int
}

// Errors a responder connection ends with (Serve's result, Err) when the
// engine closes it; none wraps ErrConnClosed, which means the peer went.
var (
	// ErrReplyUnsendable: a reply or RDMA_ERROR answer found no send
	// resources; RFC 8166 §4.5.4 says a responder that cannot send a
	// reply closes the connection, so that the requester retransmits at
	// once instead of waiting for its timeout.
	ErrReplyUnsendable = errors.New("rdmarpc: a reply could not be sent; connection closed")
	// ErrReplyTimeout: a reply was not taken within ReplyTimeout.
	ErrReplyTimeout = errors.New("rdmarpc: the peer took no reply within the reply timeout; connection closed")
	// ErrIdleTimeout: no call within IdleTimeout.
	ErrIdleTimeout = errors.New("rdmarpc: connection idle past the idle timeout; closed")
)

func (c *ResponderConfig) setDefaults() {
	engineDefaults(&c.Credits, &c.InlineSend, &c.InlineRecv, &c.Limits, &c.Logger)
	if c.MaxReadsOutstanding <= 0 {
		c.MaxReadsOutstanding = 16
	}
	if c.Metrics == nil {
		c.Metrics = nopResponderMetrics{}
	}
}

// Receives is how many receive buffers a connection with this
// configuration posts: the credits, a few spare, and the backchannel's.
func (c ResponderConfig) Receives() int {
	c.setDefaults()
	return c.Credits + recvExtra + max(c.Backchannel.MaxCalls, 0)
}

// Handler receives the calls of a responder connection.
type Handler interface {
	// ServeCall is called from the connection's goroutine with each
	// complete call: RDMA_MSG inline, Read chunks pulled with RDMA Read
	// and spliced back at their Position (each chunk an Item piece in a
	// pool Buffer; the XDR round-up is added by AppendVec), Long calls
	// reassembled from the Position-Zero Read chunk. It must hand off
	// quickly and never block on the network. The handler later calls
	// exactly one of call.Reply or call.Drop, from any goroutine; after
	// that the Call and its Msg belong to the engine again. Before it,
	// the handler may post parts of a reply item with call.WriteAhead
	// (cut-through, responder_ahead.go), from the goroutine that will
	// Reply or hand the reply on. Reply from within ServeCall (say, to
	// reject garbage at once) works but never waits for send resources:
	// when none is free the connection is closed (RFC 8166 §4.5.4),
	// counted as a no_resources drop. Replies from other goroutines wait
	// for them. Drop is for calls that must get no reply (a
	// retransmission still in progress, teardown).
	//
	// ServeCall (and ServeBatchDone) may also run inside a Reply made
	// from another goroutine: on a provider that completes the reply's
	// Send as it writes it (iwarp with CompleteOnTransmit), the last
	// outstanding call's Reply takes that completion itself, and with it
	// any call that arrived meanwhile (endpoint.settlePosts); so may
	// ResponderConn.SendBackwardCall or WriteAhead, which post too (Drop
	// posts nothing). So a handler must not hold, while it calls Reply,
	// WriteAhead or SendBackwardCall, a lock that ServeCall takes.
	ServeCall(call *Call)
}

// BatchHandler is a Handler told when the calls of one poll of the
// completion queue have all been delivered: ServeBatchDone runs on the
// connection's goroutine after each poll (with or without calls), before
// the engine polls again or waits. A handler may leave the calls it got
// queued until then and hand them on together (one write to a backend
// for all of them). Like ServeCall it must not block on the network.
type BatchHandler interface {
	Handler
	ServeBatchDone()
}

// ResponderConn is one RPC-over-RDMA connection served by rdmagw.
type ResponderConn struct {
	endpoint // pool, cq, qp, the connection's life (endpoint.go)
	cfg      ResponderConfig
	met      ResponderMetrics
	work     WorkMetrics // cfg.Metrics as WorkMetrics, if it is one (metrics_work.go)
	pd       verbs.PD
	srq      verbs.SRQ   // the connection's own (nil with shared)
	shared   *SharedRecv // cfg.SharedRecv: receives shared with other connections

	sendMax int // inline threshold for replies, after RFC 8797
	// sendBufSize is the size of send buffers: sendMax, or the larger
	// version-two threshold when V2 is on.
	sendBufSize int
	recvMax     int
	remoteInv   bool // the peer takes Send With Invalidate
	maxSGE      int
	sqDepth     int

	// Receives. recvMu orders reposting (Reply/Drop) against teardown.
	recvs  []recvCtxt
	recvMu sync.Mutex
	// outstanding counts calls taken from a receive and not yet answered.
	outstanding atomic.Int32
	// callsSeen counts calls accepted, for the idle timeout.
	callsSeen atomic.Uint64
	callQuota *Quota

	// Send contexts: one per reply or error answer in flight, made on
	// first need (getSend) up to len(sends): a connection with few calls
	// in flight never pays for the rest (a context is half a KiB; 1,000
	// connections x 264 of them were 139 MB). Reused, never freed.
	sends      []atomic.Pointer[sendCtxt]
	sendsMade  int // guarded by sendMu
	sendMu     sync.Mutex
	sendFree   []*sendCtxt
	sendClosed bool // guarded by sendMu: buffers go back to the pool
	sendWake   notifier
	sq         sqSlots
	inFlight   atomic.Int32 // posted chains whose Send has not completed

	// Owned by the Serve goroutine.
	readQ    []*Call // calls with RDMA Reads still to issue, FIFO
	memQ     []*Call // calls waiting for Read chunk memory, FIFO
	memWait  time.Duration
	readsOut int
	// delivering is the call inside Handler.ServeCall right now: a Reply
	// to it runs on the Serve goroutine and must not wait for resources
	// that only this goroutine frees.
	delivering atomic.Pointer[Call]
	readWR     verbs.SendWR
	readSGE    [1]verbs.SGE
	// readsPeak is the most RDMA Reads ever in flight at once.
	readsPeak atomic.Int32
	handler   Handler
	batchDone BatchHandler // handler, when it is one
	bc        *bcState     // backward-direction calls (backchannel.go)
	v2        v2Responder  // version two (responder_v2.go)

	serving atomic.Bool
	served  chan struct{} // closed when Serve has returned
	closeMu sync.Mutex
	closed  bool
}

// AcceptResponder serves one connection request: it allocates the
// connection's resources, posts every receive on a shared receive queue
// (so none of the peer's calls can arrive before a receive is posted),
// accepts with RFC 8797 private data and returns the connection. Start it
// with Serve.
func AcceptResponder(req verbs.ConnRequest, dev verbs.Device, cfg ResponderConfig) (*ResponderConn, error) {
	cfg.setDefaults()
	c := &ResponderConn{cfg: cfg, met: cfg.Metrics, served: make(chan struct{}),
		sendWake: newNotifier(), maxSGE: defaultMaxSGE,
		callQuota: NewQuota(int64(cfg.MaxCallBytes), cfg.CallQuota)}
	c.endpoint.init("responder", cfg.Logger, cfg.Metrics, cfg.Pool, &c.recvMu, nil)
	c.bcInit()
	c.v2Init()
	c.work = workMetricsOf(cfg.Metrics)
	if err := c.setup(req, dev); err != nil {
		req.Reject(nil)
		c.release()
		return nil, err
	}
	c.met.ConnUp()
	if !cfg.V2 {
		versionSettled(c.met, Version, false) // version one from the start
	}
	return c, nil
}

func (c *ResponderConn) setup(req verbs.ConnRequest, dev verbs.Device) error {
	cfg := &c.cfg
	if err := c.setupPool(dev); err != nil {
		return err
	}
	c.pd = c.pool.pd

	local := PrivateData{MaxSendSize: cfg.InlineSend, MaxRecvSize: cfg.InlineRecv}
	peer, ok := ParsePrivateData(req.PrivateData())
	c.sendMax, c.recvMax = InlineThresholds(local, peer, ok)
	// InlineThresholds reports what the peer may send; our buffers are
	// InlineRecv regardless, and the send side can never exceed what we
	// configured.
	c.sendMax = min(c.sendMax, cfg.InlineSend)
	c.remoteInv = ok && peer.RemoteInvalidate
	if c.sendMax < MinHeaderSize+4 {
		return fmt.Errorf("rdmarpc: responder: inline send threshold %d is too small", c.sendMax)
	}
	c.v2Setup(ok)

	nrecv := cfg.Credits + recvExtra + c.bcRecvs()
	nsend := nrecv + cfg.Credits
	c.sqDepth = 4*nrecv + cfg.MaxReadsOutstanding
	c.sq.init(c.sqDepth)
	var err error
	if c.cq, err = dev.CreateCQ(c.sqDepth + nrecv + 16); err != nil {
		return fmt.Errorf("rdmarpc: responder: create CQ: %w", err)
	}
	c.settlePosts()
	srq, err := c.setupReceives(nrecv)
	if err != nil {
		return err
	}
	c.sends = make([]atomic.Pointer[sendCtxt], nsend)
	c.sendFree = make([]*sendCtxt, 0, nsend)
	c.readQ = make([]*Call, 0, nrecv)
	c.memQ = make([]*Call, 0, nrecv)

	var pdata [PrivateDataSize]byte
	local.Encode(pdata[:])
	c.qp, err = req.Accept(verbs.ConnOptions{PD: c.pd, SendCQ: c.cq, RecvCQ: c.cq, SRQ: srq,
		MaxSendWR: c.sqDepth, MaxRecvWR: nrecv, MaxSGE: c.maxSGE,
		InitiatorDepth: cfg.MaxReadsOutstanding, PrivateData: pdata[:]})
	if err != nil {
		return fmt.Errorf("rdmarpc: responder: accept %v: %w", req.RemoteAddr(), err)
	}
	c.log.Debug("rpc-over-rdma connection accepted", "peer", c.qp.RemoteAddr(),
		"private_data", ok, "inline_send", c.sendMax, "inline_recv", cfg.InlineRecv, "credits", cfg.Credits)
	return nil
}

// setupReceives gives the connection the SRQ its calls arrive on: the
// shared one (cfg.SharedRecv), whose receives are posted already, or one
// of its own with n receives. Receives first: credits are granted only in
// replies, and every receive that backs them is posted before the peer
// can send at all.
func (c *ResponderConn) setupReceives(n int) (verbs.SRQ, error) {
	if s := c.cfg.SharedRecv; s != nil {
		if s.pd != c.pd {
			return nil, errors.New("rdmarpc: responder: SharedRecv is on another PD than the pool")
		}
		if s.bufSize != c.cfg.InlineRecv {
			return nil, fmt.Errorf("rdmarpc: responder: SharedRecv buffers of %d bytes, InlineRecv %d", s.bufSize, c.cfg.InlineRecv)
		}
		c.shared, c.recvs = s, s.recvs
		return s.srq, nil
	}
	var err error
	if c.srq, err = c.pd.CreateSRQ(n); err != nil {
		return nil, fmt.Errorf("rdmarpc: responder: create SRQ: %w", err)
	}
	return c.srq, c.postReceives(n)
}

// postReceives gives the connection its n receives, each with a buffer
// of InlineRecv bytes from RecvPool (or the pool), posted on the SRQ.
func (c *ResponderConn) postReceives(n int) error {
	rp := c.cfg.RecvPool
	if rp == nil {
		rp = c.pool
	}
	c.recvs = make([]recvCtxt, n)
	for i := range c.recvs {
		r := &c.recvs[i]
		r.idx = i
		r.call.conn = c
		r.call.rc = r
		b, err := rp.Get(c.cfg.InlineRecv)
		if err != nil {
			return fmt.Errorf("rdmarpc: responder: receive buffer %d of %d: %w", i, n, err)
		}
		r.buf = b
		if err := c.postRecv(r); err != nil {
			return fmt.Errorf("rdmarpc: responder: post receive: %w", err)
		}
	}
	return nil
}

// Pool is the pool the connection takes its registered buffers from; a
// handler builds replies in its buffers.
func (c *ResponderConn) Pool() *Pool { return c.pool }

// InlineSend is the inline threshold for replies negotiated with the peer.
func (c *ResponderConn) InlineSend() int { return c.sendMax }

// RemoteAddr is the peer's address.
func (c *ResponderConn) RemoteAddr() string { return c.peer() }

// Outstanding is the number of calls received and not yet answered.
func (c *ResponderConn) Outstanding() int { return int(c.outstanding.Load()) }

// SendsInFlight is the number of replies posted whose Send has not
// completed yet: a drain waits for them before it disconnects.
func (c *ResponderConn) SendsInFlight() int { return int(c.inFlight.Load()) }

// Serve runs the connection until the peer disconnects, an RDMA operation
// fails, ctx is done or Close is called, and returns why (nil after
// Close). Calls still with the handler when it returns are answered with
// ErrConnClosed by Reply and released by Reply or Drop.
func (c *ResponderConn) Serve(ctx context.Context, h Handler) error {
	if !c.serving.CompareAndSwap(false, true) {
		return errors.New("rdmarpc: responder: Serve called twice")
	}
	defer close(c.served)
	c.handler = h
	c.batchDone, _ = h.(BatchHandler)
	if c.cfg.ReplyTimeout > 0 || c.cfg.IdleTimeout > 0 {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go c.watch(wctx)
	}
	c.run(ctx, c)
	c.drain()
	return c.Err()
}

// afterPoll retries calls waiting for memory, issues queued RDMA Reads
// and tells a BatchHandler the poll's calls are delivered (the engine
// interface). Serve goroutine only.
func (c *ResponderConn) afterPoll() {
	c.retryMemory()
	c.issueReads()
	if c.batchDone != nil {
		c.batchDone.ServeBatchDone()
	}
}

// waitTimeout: while calls wait for memory the wait ends now and then to
// retry them (the pool has no wake-up of its own; the interval backs off
// to 20 ms). Serve goroutine only.
func (c *ResponderConn) waitTimeout() time.Duration {
	if len(c.memQ) == 0 {
		return 0
	}
	d := c.memWait
	c.memWait = min(2*c.memWait, 20*time.Millisecond)
	return d
}

// watch enforces ReplyTimeout and IdleTimeout until the connection ends.
func (c *ResponderConn) watch(ctx context.Context) {
	tick := c.cfg.ReplyTimeout
	if tick <= 0 || (c.cfg.IdleTimeout > 0 && c.cfg.IdleTimeout < tick) {
		tick = c.cfg.IdleTimeout
	}
	t := time.NewTicker(max(tick/4, time.Millisecond))
	defer t.Stop()
	seen, idleSince := c.callsSeen.Load(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.dead:
			return
		case now := <-t.C:
			if to := c.cfg.ReplyTimeout; to > 0 {
				if s, age := c.oldestSend(now); s != nil && age > to {
					c.log.Warn("closing connection: the client takes no replies", "peer", c.RemoteAddr(),
						"waited", age.Round(time.Millisecond), "reply_timeout", to)
					c.fail(fmt.Errorf("%w (a Send waited %v)", ErrReplyTimeout, age.Round(time.Millisecond)))
					return
				}
			}
			if to := c.cfg.IdleTimeout; to > 0 {
				if n := c.callsSeen.Load(); n != seen || c.outstanding.Load() > 0 || c.inFlight.Load() > 0 {
					seen, idleSince = n, now
				} else if now.Sub(idleSince) >= to {
					c.log.Info("closing idle connection", "peer", c.RemoteAddr(), "idle_timeout", to)
					c.fail(ErrIdleTimeout)
					return
				}
			}
		}
	}
}

// oldestSend is the posted chain whose Send has waited longest.
func (c *ResponderConn) oldestSend(now time.Time) (*sendCtxt, time.Duration) {
	var old *sendCtxt
	var oldest int64
	for i := range c.sends {
		s := c.sends[i].Load()
		if s == nil {
			break // made in order
		}
		if p := s.posted.Load(); p != 0 && (old == nil || p < oldest) {
			old, oldest = s, p
		}
	}
	if old == nil {
		return nil, 0
	}
	return old, now.Sub(time.Unix(0, oldest))
}

// completion dispatches one work completion. Serve goroutine only.
func (c *ResponderConn) completion(wc *verbs.WC) {
	idx := int(wc.ID & wrIndexMask)
	switch wc.ID & wrKindMask {
	case wrRecv:
		if idx >= len(c.recvs) {
			return
		}
		if wc.Status != verbs.StatusSuccess {
			c.wcFailed(wc)
			if c.shared != nil { // consumed all the same: back to the SRQ
				c.shared.taken(c, &c.recvs[idx])
				c.repost(&c.recvs[idx])
			}
			return
		}
		c.received(&c.recvs[idx], wc.ByteLen)
	case wrRead:
		if idx >= len(c.recvs) {
			return
		}
		call := &c.recvs[idx].call
		c.readDone(call)
		if wc.Status != verbs.StatusSuccess {
			c.wcFailed(wc)
			return
		}
		if call.readsPending == 0 && call.nextSeg == len(call.hdr.Reads) && !c.isDead() {
			c.deliver(call)
		}
	case wrSend:
		s := c.sendAt(idx)
		if s == nil {
			return
		}
		if wc.Status != verbs.StatusSuccess {
			c.wcFailed(wc)
		}
		c.sendDone(s)
	case wrWrite:
		// Unsignaled: a completion means it failed or was flushed.
		if wc.Status != verbs.StatusSuccess {
			c.wcFailed(wc)
		}
	}
}

// drain waits for the queue pair to finish, collects the flushes of work
// requests still out, and returns to the pool every buffer the engine
// still holds: posted receives, calls that were still pulling Read
// chunks, and send contexts. Calls with the handler keep theirs until it
// answers them. Serve goroutine only.
func (c *ResponderConn) drain() {
	c.drainCQ(c, func() bool { return c.inFlight.Load() > 0 || c.readsOut > 0 })
	c.dropCont() // a continued call still arriving
	// Calls that were still reading never reached the handler.
	for _, call := range c.readQ {
		c.abortCall(call)
	}
	c.readQ = c.readQ[:0]
	for _, call := range c.memQ {
		c.abortCall(call)
	}
	clear(c.memQ)
	c.memQ = c.memQ[:0]
	c.abortReading()
	c.releaseRecvs(false)
	c.met.ConnDown(c.Err())
	// A client's own disconnect (an unmount) is routine: the layer above
	// logs it; anything else is a transport failure worth a warning.
	if err := c.Err(); errors.Is(err, ErrConnClosed) {
		c.log.Debug("rpc-over-rdma connection ended", "peer", c.RemoteAddr(), "error", err)
	} else if err != nil {
		c.log.Warn("rpc-over-rdma connection failed", "peer", c.RemoteAddr(), "error", err)
	}
}

// abortReading releases the calls still pulling Read chunks that never
// reached the handler (teardown): of a shared receive queue, only the
// connection's own. Serve goroutine only.
func (c *ResponderConn) abortReading() {
	for i := range c.recvs {
		r := &c.recvs[i]
		if c.shared != nil && !r.ownedBy(c, callReading) {
			continue
		}
		if r.call.state.Load() == callReading {
			c.abortCall(&r.call)
		}
	}
}

// releaseRecvs returns the buffers of the connection's own receives to
// the pool: the posted ones (after drain), or (final, at release) also
// those of idle or reading calls. A call being answered (callDone)
// reposts, and so frees, its own. Shared receives stay with the
// SharedRecv.
func (c *ResponderConn) releaseRecvs(final bool) {
	if c.shared != nil {
		return
	}
	c.recvMu.Lock()
	defer c.recvMu.Unlock()
	for i := range c.recvs {
		r := &c.recvs[i]
		st := r.call.state.Load()
		if r.buf != nil && (r.posted || final && (st == callIdle || st == callReading)) {
			r.posted = false
			r.buf.Release()
			r.buf = nil
		}
	}
}

// Close ends the connection: it disconnects, stops Serve and waits for
// it, and releases the queue pair, CQ, SRQ and every buffer the engine
// holds. Buffers of calls still with the handler return to the pool when
// it answers them.
func (c *ResponderConn) Close() error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.fail(nil) // also wakes Serve's wait (endpoint.run)
	if c.serving.Load() {
		<-c.served
	} else if !c.serving.CompareAndSwap(false, true) {
		<-c.served
	} else {
		// Never served: nothing else owns the completion queue.
		c.drain()
	}
	c.release()
	return nil
}

// release frees the connection's verbs resources (after drain).
func (c *ResponderConn) release() {
	if c.qp != nil {
		c.qp.Close()
	}
	// Free send contexts give back their header buffers now, the others
	// when they are put back (a Reply racing with Close). A chain that
	// never completed (drain timed out) keeps its buffers: the device
	// might still read them.
	c.sendMu.Lock()
	c.sendClosed = true
	for _, s := range c.sendFree {
		if s.buf != nil {
			s.buf.Release()
			s.buf = nil
		}
	}
	c.sendMu.Unlock()
	c.releaseRecvs(true)
	if c.srq != nil {
		c.srq.Close()
	}
	if c.cq != nil {
		c.cq.Close()
	}
	c.releasePool()
}
