package rdmarpc

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/verbs"
)

// SharedRecv: receive buffers shared by many responder connections
// through one verbs SRQ (ResponderConfig.SharedRecv), so that registered
// receive memory is sized for the calls in flight across the gateway
// rather than for connections x credits.
//
// # Ownership of a shared receive
//
//   - Posted: the receive context and its buffer belong to the SRQ (and
//     so to the device). No connection may touch them. s.posted counts
//     them; s.mu guards the posted flag and the buffer pointer.
//   - Received: the connection whose queue pair completed the receive
//     (its CQ, hence its Serve goroutine, sees the completion; WC.ID
//     indexes s.recvs) owns the context from then on: it records itself
//     as owner, sets call.conn, and the receive goes through that
//     connection's engine exactly as a per-connection receive does
//     (reading, with the handler, answered). Read completions of the call
//     carry the same index and arrive on the same connection's CQ.
//   - Answered (Reply, Drop, an error answer, a drop, abortCall): the
//     owning connection reposts the context on the SRQ, even when that
//     connection has died meanwhile: the buffer belongs to the pool of
//     all connections, not to the one that used it last. Only Close
//     returns buffers to the registered pool.
//
// A connection's end never touches posted shared receives (the provider
// does not flush them either: verbstest checks that), and its drain
// aborts only the calls it owns (owner == itself, checked after the
// call's state so a context another connection took since is skipped).
//
// # Credits and depth (RFC 8166 §3.3.1, §4.3)
//
// Every connection still grants its own Credits, as without an SRQ: a
// client may have that many calls outstanding and the engine drops and
// counts calls beyond them (DropCreditOverrun). The SRQ is sized for the
// calls expected in flight across all connections at once (Depth), not
// for the sum of the grants: 1,000 clients x 128 credits is 128,000
// receives (500 MiB of 4 KiB buffers) that in practice never fill at
// once. A receive is reposted the moment its call is answered, so the
// SRQ refills at the rate calls complete. When fewer than LowWater
// receives remain posted, SRQLowWater is counted and logged once per
// crossing; when none remain a message that arrives finds no buffer: the
// provider ends that connection loudly (iWARP: a Terminate "no buffer
// available", the sender's Send completes with StatusRNR; InfiniBand and
// RoCE: RNR NAKs, retried as the client's rnr_retry allows, then the
// same). SRQEmpty counts the moments the SRQ ran dry. Nothing is dropped
// silently; size Depth above the calls the backend can have in flight
// (forward mode: connections.max x backend calls per client, or what the
// backend can take) and watch the low-water counter.
//
// # Linux, for comparison
//
// svcrdma posts per connection (sc_max_requests, 64 by default, plus the
// backchannel's and one for the drain) and reposts in batches as
// credits are consumed; it uses no SRQ. Our per-connection mode (no
// SharedRecv) does the same with Credits + recvExtra receives.

// SharedRecvConfig sizes a SharedRecv. Zero fields take the defaults.
type SharedRecvConfig struct {
	// Depth is the number of receives posted on the SRQ (required).
	Depth int
	// BufSize is the size of each receive buffer: the responder's
	// InlineRecv (default 4096). Every connection using the SharedRecv
	// must have the same InlineRecv.
	BufSize int
	// LowWater: fewer receives posted than this counts a low-water event
	// (default Depth/8, at least 1).
	LowWater int
	// Metrics, if set, sees the low-water and empty events.
	Metrics SharedRecvMetrics
	// Logger for the low-water warnings (default: none).
	Logger hclog.Logger
}

// SharedRecvMetrics sees what happens to a SharedRecv's SRQ. Called
// under the SharedRecv's lock: must be cheap and must not block.
type SharedRecvMetrics interface {
	// SRQLowWater: the posted receives fell below the low-water mark.
	SRQLowWater()
	// SRQEmpty: the last posted receive was taken; the next message on
	// any connection finds no buffer.
	SRQEmpty()
}

// SharedRecv is a shared receive queue with its buffers, for many
// responder connections of one protection domain.
type SharedRecv struct {
	srq     verbs.SRQ
	pd      verbs.PD
	bufSize int
	low     int
	met     SharedRecvMetrics
	log     hclog.Logger

	mu     sync.Mutex
	recvs  []recvCtxt
	posted int
	below  bool // guarded by mu: below the low-water mark since the last event
	closed bool

	lowEvents   atomic.Uint64
	emptyEvents atomic.Uint64
}

// NewSharedRecv creates the SRQ on pool's protection domain and posts
// cfg.Depth receives, each with a buffer of cfg.BufSize bytes from pool.
func NewSharedRecv(pool *Pool, cfg SharedRecvConfig) (*SharedRecv, error) {
	if cfg.Depth <= 0 {
		return nil, fmt.Errorf("rdmarpc: shared receive queue depth %d", cfg.Depth)
	}
	if cfg.BufSize <= 0 {
		cfg.BufSize = 4096
	}
	if cfg.LowWater <= 0 {
		cfg.LowWater = max(cfg.Depth/8, 1)
	}
	q, err := pool.pd.CreateSRQ(cfg.Depth)
	if err != nil {
		return nil, fmt.Errorf("rdmarpc: create shared receive queue of %d: %w", cfg.Depth, err)
	}
	s := &SharedRecv{srq: q, pd: pool.pd, bufSize: cfg.BufSize, low: cfg.LowWater, met: cfg.Metrics,
		log: orNullLogger(cfg.Logger), recvs: make([]recvCtxt, cfg.Depth)}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.recvs {
		r := &s.recvs[i]
		r.idx = i
		r.call.rc = r
		if r.buf, err = pool.Get(cfg.BufSize); err == nil {
			err = s.postLocked(r)
		}
		if err != nil {
			s.closeLocked()
			return nil, fmt.Errorf("rdmarpc: shared receive %d of %d: %w", i, cfg.Depth, err)
		}
	}
	return s, nil
}

// Depth is the number of receives the SRQ holds when none is in use.
func (s *SharedRecv) Depth() int { return len(s.recvs) }

// Posted is the number of receives posted on the SRQ now.
func (s *SharedRecv) Posted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posted
}

// LowWaterEvents and EmptyEvents count the events SharedRecvMetrics saw.
func (s *SharedRecv) LowWaterEvents() uint64 { return s.lowEvents.Load() }
func (s *SharedRecv) EmptyEvents() uint64    { return s.emptyEvents.Load() }

// Close closes the SRQ and returns the buffers of the posted receives to
// their pool; the others go back when their calls are answered. Close
// the connections using it first.
func (s *SharedRecv) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
	return nil
}

func (s *SharedRecv) closeLocked() {
	if s.closed {
		return
	}
	s.closed = true
	for i := range s.recvs {
		if r := &s.recvs[i]; r.posted && r.buf != nil {
			r.posted = false
			r.buf.Release()
			r.buf = nil
		}
	}
	s.posted = 0
	s.srq.Close()
}

func (s *SharedRecv) postLocked(r *recvCtxt) error {
	if err := postRecvOn(s.srq, r); err != nil {
		return err
	}
	s.posted++
	if s.below && s.posted >= s.low {
		s.below = false
	}
	return nil
}

// taken records that connection c completed receive r. Its Serve
// goroutine only.
func (s *SharedRecv) taken(c *ResponderConn, r *recvCtxt) {
	r.call.conn = c
	r.owner.Store(c)
	s.mu.Lock()
	r.posted = false
	s.posted--
	low := !s.below && s.posted < s.low
	if low {
		s.below = true
		s.lowEvents.Add(1)
		if s.met != nil {
			s.met.SRQLowWater()
		}
	}
	empty := s.posted == 0
	if empty {
		s.emptyEvents.Add(1)
		if s.met != nil {
			s.met.SRQEmpty()
		}
	}
	posted := s.posted
	s.mu.Unlock()
	if low {
		s.log.Warn("shared receive queue below its low-water mark: calls in flight approach srq_depth",
			"posted", posted, "depth", len(s.recvs), "low_water", s.low)
	}
}

// repost puts receive r back on the SRQ (whichever connection used it,
// alive or not), or returns its buffer to the pool after Close.
func (s *SharedRecv) repost(r *recvCtxt) {
	r.owner.Store(nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.buf == nil {
		return
	}
	if s.closed {
		r.buf.Release()
		r.buf = nil
		return
	}
	if err := s.postLocked(r); err != nil {
		// Only a closed or broken SRQ refuses: the receive is lost to
		// the pool, which Posted shows.
		r.buf.Release()
		r.buf = nil
		if !errors.Is(err, verbs.ErrClosed) {
			s.log.Warn("repost on the shared receive queue failed", "error", err)
		}
	}
}

// ownedBy reports whether c owns receive r in state: the state is read first,
// so a context that another connection took since (and set the state of)
// shows that connection as owner.
func (r *recvCtxt) ownedBy(c *ResponderConn, state uint32) bool {
	return r.call.state.Load() == state && r.owner.Load() == c
}

// postRecvOn posts receive r (its buffer, whole) on q with its index as
// the work request ID. The caller holds the lock guarding r.posted.
func postRecvOn(q recvPoster, r *recvCtxt) error {
	r.sge[0] = r.buf.SGE(0, len(r.buf.Bytes))
	r.wr = verbs.RecvWR{ID: wrRecv | uint64(r.idx), SGL: r.sge[:]}
	r.posted = true
	if err := q.PostRecv(&r.wr); err != nil {
		r.posted = false
		return err
	}
	return nil
}
