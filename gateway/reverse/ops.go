package reverse

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
)

// The reverse gateway's side of ops.go: a TCP client in the client
// table, and the Drain, Sessions, Alive and Status of Gateway.

// errDraining ends a client's reader when the gateway drains.
var errDraining = errors.New("reverse: draining")

func (c *revClient) Info(now time.Time) gateway.SessionInfo {
	si := gateway.SessionInfo{Peer: c.peer, Mode: "reverse", CallsInFlight: int(c.calls.Load()),
		InlineRecv: int(c.r.cfg.RDMA.InlineRecv),
		Backend:    gateway.BackendConnInfo{Transport: "rdma", Remote: c.r.backend, Client: c.peer, State: "serving"}}
	l := c.link
	l.mu.Lock()
	if l.conn != nil {
		si.CreditsGranted, si.InlineSend = l.conn.Granted(), l.conn.InlineSend()
		si.CreditsInUse = l.conn.Outstanding()
		if a := l.conn.LocalAddr(); a != nil {
			si.Backend.Local = a.String()
		}
		if a := l.conn.RemoteAddr(); a != nil {
			si.Backend.Remote = a.String()
		}
	}
	l.mu.Unlock()
	c.ops.Fill(&si, now)
	return si
}

// BeginDrain stops the reader: calls already read go on, the rest stay
// in the socket and the client sends them again after reconnecting.
func (c *revClient) BeginDrain() {
	c.ops.Draining.Store(true)
	c.conn.SetReadDeadline(time.Unix(1, 0))
}

func (c *revClient) InFlight() int { return int(c.calls.Load()) }

func (c *revClient) Probe(ctx context.Context) error {
	return gateway.LockWithin(ctx, &c.link.mu, "rdma link of "+c.peer)
}

// countingReader counts what a client sends.
type countingReader struct {
	r io.Reader
	n *atomic.Uint64
}

func (cr countingReader) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	cr.n.Add(uint64(n))
	return n, err
}

// Drain is forward.Gateway.Drain for TCP clients: the listener closes, each
// client's reader stops, and the client is disconnected once its calls
// at the RDMA server are answered (or at ctx's end).
func (r *Gateway) Drain(ctx context.Context) gateway.DrainResult {
	r.log.Info("draining: no new clients or calls; waiting for the calls in flight", "clients", len(r.clients.List()))
	res := r.clients.Drain(ctx, func() { r.ln.Close() }, r.met.Metrics)
	gateway.LogDrain(r.log, res)
	return res
}

// Sessions is the live view of the gateway's clients and RDMA
// connections.
func (r *Gateway) Sessions() gateway.Sessions {
	return r.clients.Snapshot(gateway.Sessions{Mode: "reverse", Listen: r.ln.Addr().String(), Backend: r.backend})
}

// Alive is the liveness probe behind the systemd watchdog (forward.Gateway.Alive).
func (r *Gateway) Alive(ctx context.Context) error {
	return r.clients.Alive(ctx, func(ctx context.Context) error { return gateway.PoolAlive(ctx, r.rdma.Pool) })
}

// Status is a one-line summary (clients, calls in flight) for systemd.
func (r *Gateway) Status() string { return r.clients.Status() }

// Ready is closed once Serve accepts clients (every listener is up).
func (r *Gateway) Ready() <-chan struct{} { return r.clients.Ready() }
