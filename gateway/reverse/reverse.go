package reverse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/internal/crc32c"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/ulb"
)

// Gateway is the reverse gateway: it accepts NFS clients over TCP and
// bridges each to its own RPC-over-RDMA connection to the NFS server,
// as the requester (connection_policy per_client: XIDs pass through).
// Per call it moves WRITE/SYMLINK payloads into registered memory
// straight from the socket and offers them as Read chunks, offers Write
// chunks for READ/READLINK results and a Reply chunk when the reply may
// not fit inline, and splices the chunk data back into the TCP reply
// without copying it (call.go, reply.go). NFSv4.1
// callbacks from the server come back the same way, on the client's RDMA
// connection, and go to the client's TCP connection
// (backchannel.go). Create it with
// New, run it with Serve, release it with Close.
type Gateway struct {
	rdma    gateway.RDMAStack // device, protection domain, buffer pool
	cfg     *gateway.Config
	log     hclog.Logger
	met     *gateway.ReverseMetrics
	ln      *net.TCPListener
	backend string
	metrics *gateway.MetricsServer
	carry   ulb.IOLimits // advertised in place of larger server limits
	// versions remembers the server's RPC-over-RDMA version when
	// backend.rdma_version is auto and it answered ERR_VERS to version
	// two: the reconnections and the other clients' links start in
	// version one and do not negotiate again.
	versions rdmarpc.VersionMemory

	wg sync.WaitGroup // client sessions

	clients gateway.ClientTable // live clients: the live view, drain, liveness (gateway/ops.go, ops.go)
	reload  gateway.LiveConfig  // what a reload changes (gateway/reload.go, reload.go)
}

// New opens the RDMA provider's device, registers the buffer pool,
// listens for TCP clients and, if configured, serves /metrics. cfg must
// be a validated reverse configuration.
func New(cfg *gateway.Config, log hclog.Logger) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Mode != "reverse" {
		return nil, &gateway.FieldError{Field: "mode", Reason: `reverse.New needs mode "reverse"`}
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	r := &Gateway{cfg: cfg, log: log, met: gateway.NewReverseMetrics(),
		backend: net.JoinHostPort(cfg.Backend.Address, strconv.Itoa(cfg.Backend.Port)), carry: cfg.CarryLimits()}
	r.met.SetEventLogger(log)
	r.reload.Init(cfg)
	if err := r.open(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Gateway) open() error {
	cfg := r.cfg
	err := r.rdma.Open(cfg, "backend.provider", cfg.Backend.Provider, cfg.Backend.LocalAddress, r.met.Metrics)
	if err != nil {
		return err
	}
	listen := net.JoinHostPort(cfg.Listen.Address, strconv.Itoa(cfg.Listen.Port))
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen for TCP clients on %s: %w", listen, err)
	}
	r.ln = ln.(*net.TCPListener)
	var metricsURL string
	if r.metrics, metricsURL, err = gateway.StartMetrics(cfg, r.met.Metrics, r.log); err != nil {
		return err
	}
	r.metrics.ServeSessions(r.Sessions, cfg.Metrics.Sessions)
	r.log.Info("reverse gateway listening", "listen", r.ln.Addr().String(), "backend", r.backend,
		"provider", cfg.Backend.Provider, "device", r.rdma.Dev.Info().Name, "credits", cfg.RDMA.Credits,
		"inline_recv", int(cfg.RDMA.InlineRecv), "inline_send", int(cfg.RDMA.InlineSend),
		"ping_interval", cfg.Reverse.PingInterval, "mpa_crc", cfg.RDMA.MPACRC, "crc32c", crc32c.Impl(), "send_completion", cfg.RDMA.SendCompletion,
		"metrics", metricsURL)
	return nil
}

// Addr is the address TCP clients connect to.
func (r *Gateway) Addr() net.Addr { return r.ln.Addr() }

// MetricsAddr is where /metrics is served, or nil when it is off.
func (r *Gateway) MetricsAddr() net.Addr {
	if r.metrics == nil {
		return nil
	}
	return r.metrics.Addr()
}

// Metrics returns the gateway's metrics.
func (r *Gateway) Metrics() *gateway.Metrics { return r.met.Metrics }

// Serve accepts TCP clients until ctx ends, then disconnects every client
// and returns once all sessions are gone. It returns nil after a
// shutdown through ctx.
func (r *Gateway) Serve(ctx context.Context) error {
	defer r.wg.Wait()
	stop := context.AfterFunc(ctx, func() { r.ln.Close() })
	defer stop()
	r.clients.MarkReady()
	for {
		r.clients.AcceptBusy.Store(0)
		conn, err := r.ln.AcceptTCP()
		if err != nil {
			if ctx.Err() != nil {
				r.log.Info("reverse gateway shutting down")
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return nil // Close, or Drain (wg.Wait waits for it)
			}
			return fmt.Errorf("accept TCP connection: %w", err)
		}
		r.clients.AcceptBusy.Store(time.Now().UnixNano())
		if !r.reload.Allows(conn.RemoteAddr()) {
			r.met.Rejected("not_allowed")
			r.log.Warn("connection rejected: address not in listen.allowed_networks", "peer", conn.RemoteAddr().String())
			conn.Close()
			continue
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.serveClient(ctx, conn)
		}()
	}
}

// serveClient connects to the RDMA server first, so that a client is
// refused outright (its connection closed at once) while the server is
// down, then runs the client's session.
func (r *Gateway) serveClient(ctx context.Context, conn *net.TCPConn) {
	ctx, disconnect := context.WithCancel(ctx) // a drain's end disconnects the client
	defer disconnect()
	peer := conn.RemoteAddr().String()
	link := newRDMALink(r, peer)
	if err := link.connect(ctx); err != nil {
		r.met.Rejected("backend_unavailable")
		r.met.BackendError("connect")
		r.log.Error("client refused: RDMA server unreachable", "peer", peer, "backend", r.backend, "error", err)
		conn.Close()
		return
	}
	r.met.ResponderMetrics().ConnUp()
	r.log.Info("client connected", "peer", peer, "backend", r.backend,
		"granted", link.granted(), "inline_send", link.inlineSend())
	c := newRevClient(r, conn, link)
	if !r.clients.Add(c, disconnect) {
		c.BeginDrain() // connected as a drain began: read nothing
	}
	reason := c.run(ctx)
	r.clients.Remove(c)
	link.close()
	r.met.ResponderMetrics().ConnDown(nil)
	r.met.ConnClosed(reason)
	r.log.Info("client disconnected", "peer", peer, "reason", reason)
}

// Close releases the listener, the metrics endpoint, the pool and the
// device. Call it after Serve has returned.
func (r *Gateway) Close() error {
	var ln io.Closer
	if r.ln != nil {
		ln = r.ln
	}
	return gateway.CloseGateway(ln, r.metrics, r.wg.Wait, &r.rdma)
}
