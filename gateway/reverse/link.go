package reverse

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmagw/rdmagw/gateway/internal/redial"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/xdr"
)

// rdmaLink is one TCP client's RPC-over-RDMA connection to the server,
// kept alive: when it fails (or a ping goes unanswered) it is dialed
// again with backoff and the calls waiting on it are sent again with
// their XIDs (the server's duplicate request cache sees ordinary
// retransmissions); after backend.give_up_after it is given up and the
// client disconnected.
//
// Credits: one layer, the requester engine's (rdmarpc.RequesterConn):
// it never has more calls in flight than the server granted, and it
// keeps one credit in reserve for the pings (RFC 8267 §6.7.2;
// RequesterConfig.ReserveCredits, CallReserved): data calls may use
// granted-1 (at least 1), so a ping always finds a credit even when the
// client keeps the connection busy. The link itself counts no credits.
// A second count here would add nothing and be wrong at times:
//
//   - the engine already waits for a credit bounded by ctx, and wakes on
//     the connection's end (the link then re-sends on the next one);
//   - it holds an abandoned call's credit until the reply or the end of
//     the connection (the server still counts it), and counts the pings,
//     which a link-side count of data calls did not;
//   - the backchannel (RFC 8167) has credits of its own (the server's
//     backward calls, rdmarpc RequesterBackchannel): forward credits have
//     nothing to reserve for it;
//   - there is no fairness between TCP clients to keep here: each client
//     has its own link and RDMA connection, and its calls in flight are
//     bounded before they get here (reverse.max_calls_per_client).
//
// What remains here is the wait for a usable connection while it is
// being re-established (usable).
type rdmaLink struct {
	r    *Gateway
	peer string
	bc   *revBackchannel // the server's callbacks (backchannel.go)

	mu       sync.Mutex
	conn     *rdmarpc.RequesterConn // nil while reconnecting
	up       chan struct{}          // closed while conn is usable; replaced when it breaks
	gaveUp   bool
	dead     chan struct{} // closed when the link is given up
	deadOnce sync.Once
	closed   bool
	stopPing chan struct{}
	pingDone chan struct{}

	// ctx ends when the link is closed: it bounds the reconnection,
	// which runs in a goroutine of its own (recon) that close waits for,
	// so no dial outlives the client's session.
	ctx    context.Context
	cancel context.CancelFunc
	recon  sync.WaitGroup

	lastReply atomic.Int64  // unix nanos of the last reply: pings only on idle links
	vers      atomic.Uint32 // NFS version of the client's latest call, for the ping
	rdmaVers  atomic.Uint32 // RPC-over-RDMA version of the latest connection (0: none yet)
	xids      atomic.Uint32 // the gateway's own XIDs (pings, retries)
}

// errGaveUp: the server stayed unreachable past give_up_after.
var errGaveUp = errors.New("reverse: RDMA server unreachable; gave up")

// maxConnLossesPerCall bounds how many connections may fail under one
// call before it is answered SYSTEM_ERR instead of being sent again. A
// call whose reply the requester cannot receive breaks every connection
// it is sent on: knfsd 6.1 sends a reply that does not fit the offered
// receive inline instead of answering ERR_CHUNK, the receive completes
// with a length error and the connection ends. Re-sending such a call
// forever would keep the link in a reconnect loop and its client
// without an answer. A server restart costs a call one loss; three in a
// row are the call's own doing (or a server that cannot stay up).
const maxConnLossesPerCall = 3

// errConnLostRepeatedly: the call was outstanding on
// maxConnLossesPerCall connections that all failed.
var errConnLostRepeatedly = fmt.Errorf("reverse: the RDMA connection to the server failed %d times while the call was outstanding", maxConnLossesPerCall)

// nullCallLen is an RPC call header with AUTH_NONE cred and verifier.
const nullCallLen = 6*4 + 2*8

func newRDMALink(r *Gateway, peer string) *rdmaLink {
	l := &rdmaLink{r: r, peer: peer, bc: newRevBackchannel(r.cfg, r.met.Backchannel()), up: make(chan struct{}), dead: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.xids.Store(rand.Uint32())
	l.vers.Store(3)
	return l
}

// dial opens one requester connection.
func (l *rdmaLink) dial(ctx context.Context) (*rdmarpc.RequesterConn, error) {
	cfg := l.r.cfg
	reserve := 0
	if cfg.Reverse.PingInterval > 0 {
		reserve = 1 // the pings' credit
	}
	return rdmarpc.DialRequester(ctx, l.r.rdma.Dev, l.r.backend, rdmarpc.RequesterConfig{
		Credits:        cfg.RDMA.Credits,
		InlineSend:     int(cfg.RDMA.InlineSend),
		InlineRecv:     int(cfg.RDMA.InlineRecv),
		Pool:           l.r.rdma.Pool,
		Limits:         cfg.RDMALimits(),
		Logger:         l.r.log.Named("rdma"),
		Metrics:        l.r.met,
		ConnectTimeout: cfg.Backend.ConnectTimeout,
		ReserveCredits: reserve,
		Backchannel:    l.bc.requesterConfig(),
		Version:        l.r.reload.Current().BackendVersionMode(), // a reload applies to the next dial
		VersionMemory:  &l.r.versions,
	})
}

// connect makes the first connection and starts the pinger on it. It
// pings at once: the grant is 1 until the first reply, so the first
// reply opens the window before the client's calls arrive.
func (l *rdmaLink) connect(ctx context.Context) error {
	conn, err := l.dial(ctx)
	if err != nil {
		return err
	}
	l.install(conn)
	l.ping(ctx, conn)
	return nil
}

// install makes conn the current connection and starts its pinger.
func (l *rdmaLink) install(conn *rdmarpc.RequesterConn) {
	l.r.log.Info("RDMA connection to the server up", "peer", l.peer, "backend", l.r.backend,
		"version", conn.Version(), "fallback", conn.FellBack())
	l.rdmaVers.Store(conn.Version())
	l.mu.Lock()
	l.conn = conn
	close(l.up)
	l.lastReply.Store(time.Now().UnixNano())
	if l.r.cfg.Reverse.PingInterval > 0 {
		l.stopPing, l.pingDone = make(chan struct{}), make(chan struct{})
		go l.pinger(conn, l.stopPing, l.pingDone)
	}
	l.mu.Unlock()
}

func (l *rdmaLink) granted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return 0
	}
	return l.conn.Granted()
}

func (l *rdmaLink) inlineSend() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return 0
	}
	return l.conn.InlineSend()
}

// usable waits for a usable connection, bounded by ctx and by the link
// giving up or closing. Credits are the connection's (see rdmaLink).
func (l *rdmaLink) usable(ctx context.Context) (*rdmarpc.RequesterConn, error) {
	for {
		l.mu.Lock()
		if l.gaveUp || l.closed {
			l.mu.Unlock()
			return nil, errGaveUp
		}
		conn, up := l.conn, l.up
		l.mu.Unlock()
		if conn != nil {
			return conn, nil
		}
		select {
		case <-up:
		case <-l.dead:
		case <-l.ctx.Done(): // closed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// call sends msg and waits for its reply in res, re-sending it on a new
// connection when the current one fails under it, up to
// maxConnLossesPerCall connections.
func (l *rdmaLink) call(ctx context.Context, msg *rdmarpc.Message, plan *rdmarpc.ReplyPlan, res *rdmarpc.Result) error {
	var memWait rdmarpc.PoolWait
	defer memWait.Stop()
	for losses := 0; ; {
		conn, err := l.usable(ctx)
		if err != nil {
			return err
		}
		err = conn.Call(ctx, msg, plan, res) // waits for a data credit
		if err == nil {
			l.lastReply.Store(time.Now().UnixNano())
			return nil
		}
		switch {
		case errors.Is(err, rdmarpc.ErrConnClosed):
			l.broken(conn, err)
			if losses++; losses >= maxConnLossesPerCall && ctx.Err() == nil {
				return fmt.Errorf("%w: %w", errConnLostRepeatedly, err)
			}
		case errors.Is(err, rdmarpc.ErrPoolExhausted):
			// Registered memory is short: wait for other calls to give
			// some back (the client is not read meanwhile).
			if err := memWait.Wait(ctx); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// broken handles the failure of conn: the first caller to notice starts
// the reconnection; the others wait on the new up channel. The calls in
// flight on conn fail with ErrConnClosed when it is closed here, and
// call sends them again, with their XIDs, on the next connection.
func (l *rdmaLink) broken(conn *rdmarpc.RequesterConn, why error) {
	l.mu.Lock()
	if l.conn != conn || l.closed {
		l.mu.Unlock()
		return
	}
	l.conn = nil
	l.up = make(chan struct{})
	stop, done := l.stopPing, l.pingDone
	l.stopPing, l.pingDone = nil, nil
	l.recon.Add(1)
	l.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	conn.Close()
	l.r.met.BackendError("lost")
	l.r.log.Warn("RDMA connection to the server lost; reconnecting", "peer", l.peer, "backend", l.r.backend, "error", why)
	go func() {
		defer l.recon.Done()
		l.reconnect(l.ctx)
	}()
}

// reconnect dials until it succeeds, the link is closed, or
// give_up_after has passed; then the link is given up. The first dial is
// at once, the next after reconnect_backoff_initial, doubling up to
// reconnect_backoff_max (no jitter).
func (l *rdmaLink) reconnect(ctx context.Context) {
	b := &l.r.cfg.Backend
	conn, attempts, err := redial.Dial(ctx, redial.Plan{
		Backoff:   &redial.Backoff{Initial: b.ReconnectInitial, Max: b.ReconnectMax},
		Immediate: true,
		Deadline:  time.Now().Add(b.GiveUpAfter),
		Failed: func(attempt int, next time.Duration, err error) {
			l.r.met.BackendError("connect")
			l.r.log.Debug("RDMA reconnection attempt failed", "peer", l.peer, "backend", l.r.backend,
				"attempt", attempt, "next_in", next, "error", err)
		}}, l.dial)
	if gu := (*redial.GaveUpError)(nil); errors.As(err, &gu) {
		l.r.met.BackendGiveUps.Inc()
		l.r.log.Error("RDMA server unreachable; giving up and disconnecting the client", "peer", l.peer,
			"backend", l.r.backend, "attempts", gu.Dials, "give_up_after", b.GiveUpAfter, "error", gu.Err)
	}
	if err != nil {
		l.giveUp()
		return
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		conn.Close()
		return
	}
	l.r.met.BackendReconnects.Inc()
	l.install(conn)
	l.r.log.Info("RDMA connection to the server re-established", "peer", l.peer, "backend", l.r.backend, "attempts", attempts)
}

func (l *rdmaLink) giveUp() {
	l.mu.Lock()
	l.gaveUp = true
	l.mu.Unlock()
	l.deadOnce.Do(func() { close(l.dead) })
}

// gone reports whether the link was given up.
func (l *rdmaLink) gone() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gaveUp
}

// close ends the link for good, and waits for a reconnection under way.
func (l *rdmaLink) close() {
	l.cancel()
	defer l.recon.Wait()
	l.mu.Lock()
	l.closed = true
	conn := l.conn
	l.conn = nil
	stop, done := l.stopPing, l.pingDone
	l.stopPing, l.pingDone = nil, nil
	l.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	if conn != nil {
		conn.Close()
	}
}

// nextXID is an XID of the gateway's own, for pings and for retries.
func (l *rdmaLink) nextXID() uint32 { return l.xids.Add(1) }

// pinger checks conn every ping_interval while it is idle.
func (l *rdmaLink) pinger(conn *rdmarpc.RequesterConn, stop, done chan struct{}) {
	defer close(done)
	every := l.r.cfg.Reverse.PingInterval
	t := time.NewTicker(every / 2)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-stop:
			return
		case <-conn.Done():
			go l.broken(conn, conn.Err())
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, l.lastReply.Load())) < every {
			continue
		}
		if !l.ping(ctx, conn) && ctx.Err() == nil {
			go l.broken(conn, errors.New("server did not answer a NULL ping"))
			return
		}
	}
}

// ping sends a NULL call on the reserve credit and reports whether the
// server answered within ping_timeout. Any RPC reply proves it alive.
func (l *rdmaLink) ping(parent context.Context, conn *rdmarpc.RequesterConn) bool {
	timeout := l.r.cfg.Reverse.PingTimeout
	if timeout <= 0 {
		timeout = l.r.cfg.Backend.ConnectTimeout
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	var msg rdmarpc.Message
	var res rdmarpc.Result
	// The header is the call's own: connect's first ping and the pinger
	// (started by install before it) can run at once.
	var hdr [nullCallLen]byte
	for range 4 { // a clash with a client XID in flight: take another
		h := oncrpc.CallHeader{XID: l.nextXID(), RPCVers: oncrpc.RPCVersion, Prog: ulb.ProgNFS,
			Vers: l.vers.Load(), Proc: 0, Cred: oncrpc.NullAuth, Verf: oncrpc.NullAuth}
		e := xdr.NewEncoder(hdr[:])
		if err := h.Encode(&e); err != nil {
			return false
		}
		msg.Reset()
		msg.XID = h.XID
		msg.Append(rdmarpc.Piece{Data: e.Bytes()})
		err := conn.CallReserved(ctx, &msg, nil, &res)
		if errors.Is(err, rdmarpc.ErrXIDInUse) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil && parent.Err() == nil {
				l.r.met.PingTimeout.Inc()
				l.r.log.Warn("RDMA server did not answer a NULL ping in time", "peer", l.peer, "backend", l.r.backend, "timeout", timeout)
			} else if parent.Err() == nil {
				l.r.met.PingError.Inc()
				l.r.log.Debug("NULL ping failed", "peer", l.peer, "error", err)
			}
			return false
		}
		res.Release()
		l.r.met.PingOK.Inc()
		l.lastReply.Store(time.Now().UnixNano())
		return true
	}
	l.r.met.PingError.Inc()
	return false
}

// String is for logs.
func (l *rdmaLink) String() string { return fmt.Sprintf("rdma link %s -> %s", l.peer, l.r.backend) }
