package forward

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/auxrelay"
	"github.com/rdmagw/rdmagw/internal/crc32c"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/verbs"
)

// Gateway is the forward gateway: it accepts RPC-over-RDMA connections
// from NFS clients and bridges each to its own TCP connection to the NFS
// server. Create it with New, run it with Serve, release it with
// Close.
type Gateway struct {
	rdma    gateway.RDMAStack // device, protection domain, buffer pool
	cfg     *gateway.Config
	log     hclog.Logger
	met     *gateway.Metrics
	ln      verbs.Listener
	backend string
	metrics *gateway.MetricsServer
	relay   *auxrelay.Relay // nil unless aux_relay.enabled
	parked  parkedSessions  // backend connections kept for reconnecting clients (park.go)
	// recvPool holds the connections' receive buffers; callQuota bounds
	// the Read chunk memory of all calls together (responder.go).
	recvPool    *rdmarpc.Pool
	recvPerConn int                 // receive bytes of one connection (0 with sharedRecv)
	sharedRecv  *rdmarpc.SharedRecv // rdma.srq_depth > 0: one SRQ for every connection
	callQuota   *rdmarpc.Quota
	conns       connCounter

	wg sync.WaitGroup // sessions and connection setups

	clients gateway.ClientTable // live sessions: the live view, drain, liveness (gateway/ops.go, ops.go)
	reload  gateway.LiveConfig  // what a reload changes (gateway/reload.go, reload.go)
}

// New opens the provider's device, registers the buffer pool,
// starts listening for RDMA clients and, if configured, serves /metrics.
// cfg must have been validated (LoadConfig and ParseConfig do it).
func New(cfg *gateway.Config, log hclog.Logger) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	f := &Gateway{cfg: cfg, log: log, met: gateway.NewMetrics(),
		backend: net.JoinHostPort(cfg.Backend.Address, strconv.Itoa(cfg.Backend.Port))}
	f.met.SetEventLogger(log)
	f.reload.Init(cfg)
	f.parked.met, f.parked.log = f.met, log
	if err := f.open(); err != nil {
		f.Close()
		return nil, err
	}
	if cfg.AuxRelay.Enabled {
		// The relay's collectors join the gateway's registry, with the
		// same constant mode label as every other rdmagw_ series.
		am, err := auxrelay.NewPrometheusMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"mode": "forward"}, f.met.Registry))
		if err == nil {
			f.relay, err = auxrelay.New(cfg.AuxRelayConfig(), log, am)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("aux_relay: %w", err)
		}
	}
	return f, nil
}

// AuxRelay is the auxiliary-protocol relay (rpcbind, MOUNT, NLM, NSM),
// or nil when aux_relay is off. Its listeners are bound once Serve has
// started it (Ready).
func (f *Gateway) AuxRelay() *auxrelay.Relay { return f.relay }

// startRelay runs the relay until ctx ends and waits until it has bound
// its listeners; the returned function waits for it to stop.
func (f *Gateway) startRelay(ctx context.Context) (wait func() error, err error) {
	if f.relay == nil {
		return func() error { return nil }, nil
	}
	done := make(chan error, 1)
	go func() { done <- f.relay.Run(ctx) }()
	select {
	case <-f.relay.Ready():
		return func() error { return <-done }, nil
	case err := <-done: // a listener could not be bound
		return nil, err
	}
}

func (f *Gateway) open() error {
	cfg := f.cfg
	listen := net.JoinHostPort(cfg.Listen.Address, strconv.Itoa(cfg.Listen.Port))
	err := f.rdma.Open(cfg, "listen.provider", cfg.Listen.Provider, listen, f.met)
	if err != nil {
		return err
	}
	if err := f.openRecvPool(); err != nil {
		return fmt.Errorf("receive pool: %w", err)
	}
	if f.ln, err = f.rdma.Dev.Listen(listen); err != nil {
		return fmt.Errorf("listen for RDMA clients on %s: %w", listen, err)
	}
	var metricsURL string
	if f.metrics, metricsURL, err = gateway.StartMetrics(cfg, f.met, f.log); err != nil {
		return err
	}
	f.metrics.ServeSessions(f.Sessions, cfg.Metrics.Sessions)
	f.log.Info("forward gateway listening", "listen", f.ln.Addr().String(), "provider", cfg.Listen.Provider,
		"device", f.rdma.Dev.Info().Name, "backend", f.backend, "credits", cfg.RDMA.Credits,
		"inline_recv", int(cfg.RDMA.InlineRecv), "inline_send", int(cfg.RDMA.InlineSend), "srq_depth", cfg.RDMA.SRQDepth,
		"mpa_crc", cfg.RDMA.MPACRC, "crc32c", crc32c.Impl(), "send_completion", cfg.RDMA.SendCompletion, "metrics", metricsURL)
	return nil
}

// Addr is the address RDMA clients connect to.
func (f *Gateway) Addr() net.Addr { return f.ln.Addr() }

// MetricsAddr is where /metrics is served, or nil when it is off.
func (f *Gateway) MetricsAddr() net.Addr {
	if f.metrics == nil {
		return nil
	}
	return f.metrics.Addr()
}

// Metrics returns the gateway's metrics (its Registry can be gathered
// in-process, as the demo does).
func (f *Gateway) Metrics() *gateway.Metrics { return f.met }

// Serve accepts clients until ctx ends, then disconnects every client,
// abandons their outstanding calls and returns once all sessions are
// gone. It returns nil after a shutdown through ctx.
func (f *Gateway) Serve(ctx context.Context) (err error) {
	defer f.parked.closeAll() // after the sessions, which may park theirs
	defer f.wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waitRelay, err := f.startRelay(ctx)
	if err != nil {
		return err
	}
	defer func() {
		cancel()
		if rerr := waitRelay(); rerr != nil && err == nil {
			err = rerr
		}
	}()
	f.clients.MarkReady()
	for {
		f.clients.AcceptBusy.Store(0)
		req, err := f.ln.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				f.log.Info("forward gateway shutting down")
				return nil
			}
			if f.clients.Draining() {
				// Drain closed the listener; it ends the sessions
				// (cancelling ctx here first would cut their calls).
				f.wg.Wait()
				return nil
			}
			return fmt.Errorf("accept RDMA connection: %w", err)
		}
		f.clients.AcceptBusy.Store(time.Now().UnixNano())
		if !f.reload.Allows(req.RemoteAddr()) {
			f.met.Rejected("not_allowed")
			f.log.Warn("connection request rejected: address not in listen.allowed_networks", "peer", req.RemoteAddr().String())
			req.Reject(nil)
			continue
		}
		ip := peerIP(req.RemoteAddr())
		lim := f.reload.Current().Connections
		f.recvPool.RaiseMax(lim.Max * f.recvPerConn) // after a reload that raised it (no-op with sharedRecv)
		if reason := f.conns.admit(ip, lim.Max, lim.MaxPerAddress); reason != "" {
			f.met.Rejected(reason)
			// A connection storm must not flood the log: a rate-limited
			// client event (gateway/logging.go).
			f.met.ClientEvent("connection_refused_"+reason, "connection request rejected: connection limit reached",
				req.RemoteAddr().String(), "reason", reason, "max", lim.Max, "max_per_address", lim.MaxPerAddress)
			req.Reject(nil)
			continue
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.conns.leave(ip)
			f.serveClient(ctx, req)
		}()
	}
}

// serveClient connects the backend first, so that a client is refused
// outright (and its mount fails fast) while the server is down, then
// accepts the RDMA connection and runs its session.
func (f *Gateway) serveClient(ctx context.Context, req verbs.ConnRequest) {
	ctx, disconnect := context.WithCancel(ctx) // a drain's end disconnects the client
	defer disconnect()
	peer := req.RemoteAddr().String()
	cfg := f.reload.Current() // a reload applies to the connections made after it
	id := clientIdentity(peer)
	s, conn, d, err := f.backendFor(ctx, id, cfg)
	if err != nil {
		f.met.Rejected("backend_unavailable")
		f.met.BackendError("connect")
		f.log.Error("connection request rejected: backend unreachable", "peer", peer, "backend", f.backend, "error", err)
		req.Reject(nil)
		return
	}
	ops := new(gateway.ClientOps)                                                                                                                                   // the session's, counted from the accept on
	rc, err := rdmarpc.AcceptResponder(req, f.rdma.Dev, f.responderConfig(cfg, f.met.ForConn(peer, newSessionMetrics(f.met.ResponderMetrics(), ops, f.log, peer)))) // + client events (gateway/logging.go)
	if err != nil {
		if s != nil {
			// The client gave this attempt up (the Linux client can move
			// on to its next connection before the gateway accepts): the
			// session it claimed waits for that one.
			f.parked.park(id, s, conn, cfg.Backend.ReconnectGrace)
			f.parked.arrived(id)
		} else {
			conn.Close()
		}
		f.met.Rejected("accept_failed")
		f.log.Error("RDMA accept failed", "peer", peer, "error", err, "backend_kept", s != nil)
		return
	}
	f.log.Info("client connected", "peer", peer, "credits", cfg.RDMA.Credits,
		"inline_send", rc.InlineSend(), "inline_recv", int(cfg.RDMA.InlineRecv),
		"backend", f.backend, "backend_local", localAddr(conn), "backend_kept", s != nil)
	f.met.CreditsGranted.Add(float64(cfg.RDMA.Credits))
	defer f.met.CreditsGranted.Sub(float64(cfg.RDMA.Credits))
	claimed := s != nil
	s = f.startSession(s, rc, cfg, ops, d, disconnect)
	if claimed {
		f.parked.arrived(id) // in the client table: transportEnding sees it from now on
	}
	leaving := false
	s.be.onLeave = func() { leaving = true; f.parked.leave(id, 1) }
	kept := s.run(ctx, conn, d)
	// Out of the client table before parking: a reconnect may claim the
	// parked session at once, attach its new transport (s.rc, s.peer)
	// and enter it in the table again. Removed after parking, this
	// transport's Remove could take the new one's entry out, and
	// transportEnding could read s.rc while attach writes it. A
	// reconnect in between waits on leaving (onLeave ran before run
	// returned a connection to keep).
	f.clients.Remove(s)
	if kept != nil {
		f.parked.park(id, s, kept, cfg.Backend.ReconnectGrace)
		if hook := testHookParked; hook != nil {
			hook() // tests: widen the window between parking and leaving
		}
	}
	if leaving {
		f.parked.leave(id, -1)
	}
}

// backendFor is the backend connection for a new transport of client
// id: the session and connection its last transport left parked, or a
// new connection (s nil); d dials it again when it fails. A transport
// given a parked session counts as arriving for id (park.go) until the
// caller calls f.parked.arrived(id): once the session is in the client
// table, or parked again when the transport failed.
func (f *Gateway) backendFor(ctx context.Context, id string, cfg *gateway.Config) (s *session, conn *net.TCPConn, d *backendDialer, err error) {
	var ending func() bool // a reconnect waits for its old session to park
	if cfg.Backend.ReconnectGrace > 0 {
		ending = func() bool { return f.transportEnding(id) }
	}
	s, conn = f.parked.claim(id, ending) // the backend connection of its last transport
	if s != nil {
		return s, conn, s.dialer, nil
	}
	d = &backendDialer{addr: f.backend, timeout: cfg.Backend.ConnectTimeout, reserved: cfg.Backend.ReservedSourcePort}
	conn, err = d.dial(ctx)
	return nil, conn, d, err
}

// startSession attaches the accepted connection rc to the parked session
// s, or to a new one (s nil), and enters it in the client table
// (disconnect ends it at a drain's end). It returns the session.
func (f *Gateway) startSession(s *session, rc *rdmarpc.ResponderConn, cfg *gateway.Config, ops *gateway.ClientOps, d *backendDialer, disconnect context.CancelFunc) *session {
	if s != nil {
		s.attach(rc, cfg)
		f.met.ForwardBackend.Kept.Inc()
	} else {
		s = newSession(rc, cfg, f.log.Named("session"), f.met, f.rdma.Pool)
	}
	ops.Init(time.Now())
	s.ops = ops
	s.dialer = d
	if !f.clients.Add(s, disconnect) {
		// Accepted as a drain began: nothing was forwarded yet.
		s.ops.Draining.Store(true)
		disconnect()
	}
	return s
}

// transportEnding reports whether a session of client id is still
// served although its RDMA transport has ended (park.go: claim).
func (f *Gateway) transportEnding(id string) bool {
	return f.clients.Any(func(c gateway.LiveClient) bool {
		s, ok := c.(*session)
		return ok && s.rc.TransportEnded() && clientIdentity(s.peer) == id
	})
}

// peerIP is a connection request's source IP (the zero Addr if it has
// none).
func peerIP(a net.Addr) netip.Addr {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// connCounter counts the client connections being set up or served, in
// all and per source address, for connections.max and max_per_address.
type connCounter struct {
	mu     sync.Mutex
	total  int
	byAddr map[netip.Addr]int
}

// admit counts one more connection from ip, or returns the reason it is
// refused ("too_many", "too_many_from_address").
func (c *connCounter) admit(ip netip.Addr, max, perAddr int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total >= max {
		return "too_many"
	}
	if perAddr > 0 && c.byAddr[ip] >= perAddr {
		return "too_many_from_address"
	}
	if c.byAddr == nil {
		c.byAddr = make(map[netip.Addr]int)
	}
	c.total++
	c.byAddr[ip]++
	return ""
}

func (c *connCounter) leave(ip netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if c.byAddr[ip]--; c.byAddr[ip] <= 0 {
		delete(c.byAddr, ip)
	}
}

// Close releases the listener, the metrics endpoint, the pool and the
// device. Call it after Serve has returned.
func (f *Gateway) Close() error {
	wait := func() {
		f.wg.Wait()
		if f.sharedRecv != nil {
			f.sharedRecv.Close() // its buffers back to recvPool
		}
		if f.recvPool != nil {
			f.recvPool.Close() // before the PD it is registered on
		}
	}
	return gateway.CloseGateway(f.ln, f.metrics, wait, &f.rdma) // a nil interface stays nil
}

// Drain stops accepting clients, lets the calls in flight finish and
// disconnects each client once it has none; when ctx ends (the
// shutdown.drain_timeout deadline) it disconnects the rest, abandoning
// their calls (counted in rdmagw_drain_abandoned_calls_total). Calls
// arriving during the drain are not forwarded: the clients send them
// again after reconnecting (to this gateway once restarted, or to its
// failover peer). Serve returns once the drain is over. A gateway does
// not serve again after a drain.
func (f *Gateway) Drain(ctx context.Context) gateway.DrainResult {
	f.log.Info("draining: no new clients or calls; waiting for the calls in flight", "clients", len(f.clients.List()))
	res := f.clients.Drain(ctx, func() { f.ln.Close() }, f.met)
	gateway.LogDrain(f.log, res)
	return res
}

// Sessions is the live view of the gateway's clients and backend
// connections.
func (f *Gateway) Sessions() gateway.Sessions {
	return f.clients.Snapshot(gateway.Sessions{Mode: "forward", Listen: f.ln.Addr().String(), Backend: f.backend}, f.parked.backends()...)
}

// Alive is the liveness probe behind the systemd watchdog: the accept
// loop is not stuck, every session's call path can be locked, and the
// registered pool's lock answers, all within ctx.
func (f *Gateway) Alive(ctx context.Context) error {
	return f.clients.Alive(ctx, func(ctx context.Context) error { return gateway.PoolAlive(ctx, f.rdma.Pool) })
}

// Status is a one-line summary (clients, calls in flight) for systemd.
func (f *Gateway) Status() string { return f.clients.Status() }

// Ready is closed once Serve accepts clients: the RDMA listener, the
// metrics endpoint and the auxiliary relay are all up.
func (f *Gateway) Ready() <-chan struct{} { return f.clients.Ready() }
