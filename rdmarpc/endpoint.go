package rdmarpc

import (
	"context"
	"errors"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/verbs"
)

// Pieces shared by the responder and requester engines: work request
// identifiers, send-queue accounting, the wake-up primitive both use to
// wait for resources, and the RFC 8797 exchange. (In Linux terms this is
// the part of verbs.c that is not specific to either side.)

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

func (s *sqSlots) put(n int) {
	s.mu.Lock()
	s.avail += n
	s.mu.Unlock()
	s.wake.signal()
}

// waitDone returns a context that is cancelled when parent is or when the
// connection ends, so a CQ Wait wakes for either. stop releases it.
func waitDone(parent context.Context, conn verbs.Conn) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-conn.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
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
