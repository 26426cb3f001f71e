package rdmarpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/verbs"
)

// Pieces shared by the responder and requester engines: the endpoint
// skeleton both embed (pool, completion queue, queue pair, the
// connection's life and the completion loop), work request identifiers,
// send-queue accounting and the wake-up primitive both use to wait for
// resources. (In Linux terms this is the part of verbs.c that is not
// specific to either side.)

// ErrConnClosed is returned by calls on an engine whose connection has
// ended; errors.Is finds it in the error that says why.
var ErrConnClosed = errors.New("rdmarpc: connection closed")

// Work request IDs carry the kind of request in the top byte and the index
// of its context below, so a completion finds its context without a map
// lookup.
const (
	wrRecv  uint64 = 1 << 56
	wrSend  uint64 = 2 << 56
	wrWrite uint64 = 3 << 56 // unsignaled: seen only when it fails or flushes
	wrRead  uint64 = 4 << 56

	wrKindMask  uint64 = 0xff << 56
	wrIndexMask uint64 = 1<<56 - 1
)

// Engine sizing that is not configuration.
const (
	// recvExtra receives are posted beyond the credit limit, so that a
	// message the peer sends beyond its grant (or an RDMA_DONE, or an
	// RDMA_ERROR) lands in a buffer and can be dropped and counted rather
	// than ending the connection with a receiver-not-ready error.
	recvExtra = 8
	// defaultMaxSGE is what both engines ask of the queue pair; the
	// iwarp provider and every RNIC we target allow at least 16.
	defaultMaxSGE = 16
	wcBatch       = 32
)

// notifier wakes goroutines waiting for a resource. signal never blocks
// and a signal sent while nobody waits is kept, so a waiter that checked
// under a lock, unlocked and then waits cannot miss it. A woken waiter
// that takes the resource passes the signal on when more is left
// (cascade), so one channel serves any number of waiters without
// allocating.
type notifier chan struct{}

func newNotifier() notifier { return make(notifier, 1) }

func (n notifier) signal() {
	select {
	case n <- struct{}{}:
	default:
	}
}

// sqSlots accounts for send-queue entries. A poster takes as many as its
// chain has work requests before PostSend and gives them back when the
// chain's signaled last request completes (the earlier, unsignaled ones
// are complete by then: a send queue completes in order). Without it a
// burst of replies would make PostSend fail with ErrQueueFull.
type sqSlots struct {
	mu    sync.Mutex
	avail int
	depth int
	wake  notifier
}

func (s *sqSlots) init(depth int) {
	s.avail, s.depth, s.wake = depth, depth, newNotifier()
}

func (s *sqSlots) tryTake(n int) bool {
	s.mu.Lock()
	ok := s.avail >= n
	if ok {
		s.avail -= n
	}
	more := s.avail > 0
	s.mu.Unlock()
	if ok && more {
		s.wake.signal()
	}
	return ok
}

// take waits for n slots until done is closed.
func (s *sqSlots) take(n int, done <-chan struct{}) bool {
	for {
		if s.tryTake(n) {
			return true
		}
		select {
		case <-s.wake:
		case <-done:
			return false
		}
	}
}

// takeOrTry takes n slots: waiting for them until done is closed if
// wait, else only if they are free at once (a caller on the Serve
// goroutine, which frees them, must not wait).
func (s *sqSlots) takeOrTry(n int, wait bool, done <-chan struct{}) bool {
	if wait {
		return s.take(n, done)
	}
	return s.tryTake(n)
}

func (s *sqSlots) put(n int) {
	s.mu.Lock()
	s.avail += n
	s.mu.Unlock()
	s.wake.signal()
}

func orNullLogger(l hclog.Logger) hclog.Logger {
	if l == nil {
		return hclog.NewNullLogger()
	}
	return l
}

// postRecv posts one receive of buf on q (a Conn or an SRQ).
type recvPoster interface {
	PostRecv(*verbs.RecvWR) error
}

// isFlush reports a completion that only says the queue pair has gone:
// the cause, if any, is reported by the connection, not by this request.
func isFlush(wc *verbs.WC) bool { return wc.Status == verbs.StatusFlushed }

// engineDefaults fills the sizing both engines share: 128 credits and
// 4 KiB inline both ways, Limits, a logger.
func engineDefaults(credits, inlineSend, inlineRecv *int, lim *Limits, log *hclog.Logger) {
	if *credits <= 0 {
		*credits = 128
	}
	if *inlineSend <= 0 {
		*inlineSend = 4096
	}
	if *inlineRecv <= 0 {
		*inlineRecv = 4096
	}
	*lim = lim.withDefaults()
	*log = orNullLogger(*log)
}

// rdmaFailedMetric is the one metric the skeleton reports itself.
type rdmaFailedMetric interface {
	RDMAFailed(op verbs.Opcode, status verbs.Status)
}

// endpoint is the skeleton of one engine connection, embedded by
// ResponderConn and RequesterConn: the registered pool (possibly its own,
// on a PD of its own), the completion queue and queue pair, the
// connection's life (fail, isDead, Err, the provider's reason in qpErr,
// failed work completions) and the completion loop that polls, dispatches
// and parks. What differs between the two sides is passed in as an
// engine.
type endpoint struct {
	side    string // "responder" or "requester": error prefixes
	log     hclog.Logger
	rdmaMet rdmaFailedMetric
	pool    *Pool
	ownPool bool
	cq      verbs.CQ
	qp      verbs.Conn

	// life is cancelled by fail: dead is its Done channel, closed while
	// deadLock (the engine's own lock over what must not race with the
	// end) is held. Waiters select on dead; the completion loop's wait
	// context follows life through context.AfterFunc, no goroutine.
	life     context.Context
	kill     context.CancelFunc
	dead     <-chan struct{}
	deadLock sync.Locker
	deadOnce sync.Once
	// nilErr is what a fail(nil) (a local Close) records: nil for the
	// responder (Serve returns nil after Close), ErrConnClosed for the
	// requester (calls must learn the connection is gone).
	nilErr error
	errMu  sync.Mutex
	err    error

	// consumer is held while completions are polled and dispatched: by
	// run's goroutine, or by a provider goroutine running direct
	// (verbs.DirectCQ). It makes the engine's state, "Serve goroutine
	// only" in its comments, owned by whoever holds it. directOff (under
	// consumer) turns direct away once run is ending.
	consumer  sync.Mutex
	directOff bool
	wcs       [wcBatch]verbs.WC

	// settler is the CQ when the endpoint settles after its posts
	// (settlePosts, verbs.PostSettledCQ); set before the first post.
	settler verbs.PostSettledCQ
}

// engine is what each side plugs into the endpoint's completion loop.
type engine interface {
	// completion handles one work completion.
	completion(wc *verbs.WC)
	// afterPoll runs after every poll, with or without completions
	// (the responder issues queued RDMA Reads there).
	afterPoll()
	// waitTimeout is how long run parks at most when the CQ is empty
	// (0: until a completion; the responder retries calls waiting for
	// memory now and then).
	waitTimeout() time.Duration
}

// All three run with endpoint.consumer held, on run's goroutine or, with a
// verbs.DirectCQ, on a provider goroutine (endpoint.direct). So none of
// them may block: whatever would (memory, send resources) is queued and
// retried from afterPoll, as it always was.

func (e *endpoint) init(side string, log hclog.Logger, met rdmaFailedMetric, pool *Pool, deadLock sync.Locker, nilErr error) {
	e.side, e.log, e.rdmaMet, e.pool, e.deadLock, e.nilErr = side, log, met, pool, deadLock, nilErr
	e.life, e.kill = context.WithCancel(context.Background())
	e.dead = e.life.Done()
}

// setupPool makes the connection a pool of its own on a PD of its own
// when it was given none.
func (e *endpoint) setupPool(dev verbs.Device) error {
	if e.pool != nil {
		return nil
	}
	pd, err := dev.AllocPD()
	if err != nil {
		return fmt.Errorf("rdmarpc: %s: allocate PD: %w", e.side, err)
	}
	if e.pool, err = NewPool(pd, PoolConfig{}); err != nil {
		pd.Close()
		return err
	}
	e.ownPool = true
	return nil
}

// releasePool closes a pool of the connection's own, once nothing is out
// of it: a buffer still held (by a handler, a Result) keeps it, and its
// mapping, alive.
func (e *endpoint) releasePool() {
	if e.ownPool && e.pool != nil && e.pool.InUse() == 0 {
		e.pool.Close()
		e.pool.pd.Close()
	}
}

// peer is the remote address for logs ("" before the connection exists).
func (e *endpoint) peer() string {
	if e.qp == nil {
		return ""
	}
	return e.qp.RemoteAddr().String()
}

// fail starts teardown once; err (or nilErr for nil) is what Err reports.
func (e *endpoint) fail(err error) {
	e.deadOnce.Do(func() {
		if err == nil {
			err = e.nilErr
		}
		e.deadLock.Lock()
		e.errMu.Lock()
		e.err = err
		e.errMu.Unlock()
		e.kill()
		e.deadLock.Unlock()
		if e.qp != nil {
			e.qp.Disconnect()
		}
	})
}

func (e *endpoint) isDead() bool {
	select {
	case <-e.dead:
		return true
	default:
		return false
	}
}

// TransportEnded reports whether the queue pair has ended: the peer
// disconnected or the transport failed. It turns true as soon as the
// provider sees the end, while Serve may still be draining; the gateway
// uses it to tell a client's reconnect from an additional connection.
func (e *endpoint) TransportEnded() bool {
	if e.qp == nil {
		return false
	}
	select {
	case <-e.qp.Done():
		return true
	default:
		return false
	}
}

// Err is why the connection ended (nil while it runs, and for a
// responder after Close).
func (e *endpoint) Err() error {
	e.errMu.Lock()
	defer e.errMu.Unlock()
	return e.err
}

// qpErr is why the queue pair ended, wrapping both ErrConnClosed and the
// provider's own error (errors.As finds, say, an *iwarp.TerminateError);
// nil while the queue pair has not ended.
func (e *endpoint) qpErr() error {
	if err := e.qp.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrConnClosed, err)
	}
	select {
	case <-e.qp.Done():
		return fmt.Errorf("%w: peer disconnected", ErrConnClosed)
	default:
		return nil
	}
}

// postFailed ends the connection after PostSend refused what (a reply, a
// call): the queue pair's own reason when it has one. It returns the
// error recorded for it.
func (e *endpoint) postFailed(what string, err error) error {
	if qe := e.qpErr(); qe != nil {
		err = qe
	} else {
		err = fmt.Errorf("%w: posting %s: %w", ErrConnClosed, what, err)
	}
	e.fail(err)
	return err
}

// wcFailed tears the connection down on a failed work request. Flushes
// after the connection has started going down are expected and quiet.
func (e *endpoint) wcFailed(wc *verbs.WC) {
	if isFlush(wc) && e.isDead() {
		return
	}
	e.rdmaMet.RDMAFailed(wc.Op, wc.Status)
	err := fmt.Errorf("%w: %w", ErrConnClosed, &verbs.CompletionError{Op: wc.Op, Status: wc.Status, ID: wc.ID})
	if isFlush(wc) {
		if qe := e.qpErr(); qe != nil {
			err = qe
		}
	}
	e.log.Warn("rpc-over-rdma connection torn down: work request failed", "peer", e.peer(),
		"op", wc.Op.String(), "status", wc.Status.String())
	e.fail(err)
}

// run owns the completion queue until the connection is dead: it polls a
// batch, hands each completion to the engine, lets it work after every
// poll, and parks in waitCQ when the queue is empty. The wait ends when a
// completion arrives, ctx ends (the connection then ends with
// ctx.Err()), the connection is failed (context.AfterFunc on life) or
// the queue pair ends (the connection ends with qpErr). verbs.Conn
// reports its end only as a channel, so that one watch is a goroutine;
// it lives as long as run.
func (e *endpoint) run(ctx context.Context, eng engine) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopLife := context.AfterFunc(e.life, cancel)
	defer stopLife()
	go func() {
		select {
		case <-e.qp.Done():
			cancel()
		case <-wctx.Done():
		}
	}()
	if d, ok := e.cq.(verbs.DirectCQ); ok {
		d.SetDirect(func() bool { return e.direct(eng) })
		if e.settler != nil {
			e.settler.SettlePosts(true)
		}
		defer e.stopDirect(d)
	}
	for {
		e.consumer.Lock()
		n := e.dispatch(eng)
		var wait time.Duration
		if n == 0 {
			wait = eng.waitTimeout()
		}
		e.consumer.Unlock()
		if n > 0 {
			continue
		}
		if e.isDead() {
			return
		}
		if err := e.waitCQ(wctx, wait); err != nil {
			if ctx.Err() != nil {
				e.fail(ctx.Err())
			} else {
				e.fail(e.qpErr())
			}
		}
	}
}

// dispatch polls a batch, hands each completion to the engine and lets
// it work (afterPoll); it returns how many it polled. Caller holds
// e.consumer.
func (e *endpoint) dispatch(eng engine) int {
	n := e.cq.Poll(e.wcs[:])
	for i := 0; i < n; i++ {
		eng.completion(&e.wcs[i])
	}
	eng.afterPoll()
	return n
}

// direct is the consumer run installs on a verbs.DirectCQ: the provider
// calls it on its own goroutine after adding completions, and it
// dispatches them there until the CQ is empty, with no wake-up of run's
// goroutine. It declines (false: the provider wakes run instead) while
// run's goroutine holds the consumer, and once the connection is dead or
// run is ending (run's goroutine sees the end). The engine never blocks
// while it holds the consumer (see engine), which is what the
// provider's goroutine requires.
func (e *endpoint) direct(eng engine) bool {
	if !e.consumer.TryLock() {
		return false
	}
	if e.directOff || e.isDead() {
		e.consumer.Unlock()
		return false
	}
	for e.dispatch(eng) > 0 {
	}
	e.consumer.Unlock()
	return true
}

// stopDirect removes direct when run ends; a direct already running
// finishes first, and none after it dispatches (the drain is run's
// goroutine's).
func (e *endpoint) stopDirect(d verbs.DirectCQ) {
	if e.settler != nil {
		e.settler.SettlePosts(false)
	}
	d.SetDirect(nil)
	e.consumer.Lock()
	e.directOff = true
	e.consumer.Unlock()
}

// settlePosts makes the endpoint settle after its posts when its CQ can
// take that promise (verbs.PostSettledCQ): a Send the provider completes
// inside PostSend (iwarp with CompleteOnTransmit: a reply written at
// once) is then consumed by direct on the posting goroutine, where the
// CQ would otherwise wake run's goroutine on another core for it (the
// forward gateway at GOMAXPROCS 2, one getattr at a time: 0.94 more
// parks per call in Wait, cotx.md). Every PostSend of the endpoint must
// then be followed by settle, with no lock held that the engine takes
// (the Handler contract says so for Reply). Only the responder promises
// it: the requester posts under its own lock (postCtlLocked) and keeps
// the CQ's wake-ups. Call before the first post.
func (e *endpoint) settlePosts() {
	e.settler, _ = e.cq.(verbs.PostSettledCQ)
}

// settle gives the engine the completions the post just made added (see
// settlePosts): now, consuming them on this goroutine (waking run if
// the consumer is taken), or, with !now, by waking run, for a poster
// with more work in hand whose next posts' completions run then takes
// together, and whose posts meanwhile see the completions unpolled
// (which the iwarp provider reads as pipelining and batches). Inside
// the engine (consumer held) either costs that wake-up only when a post
// completed something, which the engine's own polling then takes.
func (e *endpoint) settle(now bool) {
	if e.settler != nil {
		e.settler.Settle(now)
	}
}

// waitCQ parks until the CQ has a completion, ctx ends, or (d > 0) d
// passed, which is no error.
func (e *endpoint) waitCQ(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return e.cq.Wait(ctx)
	}
	tctx, cancel := context.WithTimeout(ctx, d)
	err := e.cq.Wait(tctx)
	cancel()
	if err != nil && ctx.Err() == nil && tctx.Err() != nil {
		return nil // d passed
	}
	return err
}

// drainCQ, after the connection is dead, waits for the queue pair to
// finish (10 s at most) and then dispatches the flushes of work requests
// still out until pending says none are left (5 s at most).
func (e *endpoint) drainCQ(eng engine, pending func() bool) {
	select {
	case <-e.qp.Done():
	case <-time.After(10 * time.Second):
		e.log.Warn("queue pair did not finish after disconnect", "peer", e.peer())
	}
	deadline := time.Now().Add(5 * time.Second)
	for pending() && time.Now().Before(deadline) {
		n := e.cq.Poll(e.wcs[:])
		for i := 0; i < n; i++ {
			eng.completion(&e.wcs[i])
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}
