package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmagw/rdmagw/gateway/metricname"
	"github.com/rdmagw/rdmagw/rdmarpc"
)

// Operations on a running gateway, the same in both modes: the table of
// live client connections behind `rdmagw sessions` (Sessions), the drain
// of a graceful stop (Drain), the liveness probe behind the systemd
// watchdog (Alive) and the one-line status (Status). Reload is
// Reconfigure (reload.go).

// SessionInfo is one client connection as `rdmagw sessions` and the
// /debug/sessions JSON show it. In forward mode the client speaks
// RPC-over-RDMA and the backend connection is TCP; in reverse mode the
// client speaks TCP and the backend connection is RPC-over-RDMA (then
// the credits and inline sizes are those of that RDMA connection).
type SessionInfo struct {
	Peer string `json:"peer"`
	Mode string `json:"mode"`
	// Credits: forward, granted to the client (rdma.credits) and held by
	// its calls not yet answered; reverse, granted by the RDMA server to
	// the gateway and held by the client's calls at the server.
	CreditsGranted int `json:"credits_granted"`
	CreditsInUse   int `json:"credits_in_use"`
	// InlineRecv is the largest message the gateway receives by Send on
	// the RDMA connection, InlineSend the largest it sends (negotiated
	// with the peer, RFC 8797).
	InlineRecv int `json:"inline_recv"`
	InlineSend int `json:"inline_send"`
	// CallsInFlight are the client's calls taken by the gateway and not
	// yet answered.
	CallsInFlight int `json:"calls_in_flight"`
	// BytesIn / BytesOut: from / to the client (forward: RPC-over-RDMA
	// messages and chunk payloads; reverse: TCP record bytes).
	BytesIn      uint64    `json:"bytes_in"`
	BytesOut     uint64    `json:"bytes_out"`
	ConnectedAt  time.Time `json:"connected_at"`
	AgeSeconds   float64   `json:"age_seconds"`
	LastActivity time.Time `json:"last_activity"`
	IdleSeconds  float64   `json:"idle_seconds"`
	Draining     bool      `json:"draining"`
	// Backend is the connection to the NFS server serving this client
	// (connection_policy per_client: one each).
	Backend BackendConnInfo `json:"backend"`
}

// BackendConnInfo is one backend connection.
type BackendConnInfo struct {
	Transport string `json:"transport"` // "tcp" (forward) or "rdma" (reverse)
	Local     string `json:"local"`     // "" while (re)connecting
	Remote    string `json:"remote"`
	Client    string `json:"client"` // the client connection it serves (parked: the client's IP)
	// State is "serving", or "parked": kept open for its client's
	// reconnection (backend.reconnect_grace, forward mode).
	State string `json:"state"`
}

// Sessions is the whole live view: every client connection and every
// backend connection.
type Sessions struct {
	Mode     string            `json:"mode"`
	Listen   string            `json:"listen"`
	Backend  string            `json:"backend"`
	Draining bool              `json:"draining"`
	Clients  []SessionInfo     `json:"clients"`
	Backends []BackendConnInfo `json:"backends"`
}

// DrainResult says how a drain ended.
type DrainResult struct {
	Clients   int  `json:"clients"`   // connected when the drain began
	Abandoned int  `json:"abandoned"` // calls still unanswered at the deadline
	TimedOut  bool `json:"timed_out"`
}

// LiveClient is one client connection in the table.
type LiveClient interface {
	Info(now time.Time) SessionInfo
	// BeginDrain stops taking new calls from the client; the calls it
	// already has go on. Calls that arrive later are not forwarded: the
	// client sends them again after reconnecting.
	BeginDrain()
	// InFlight is the calls taken and not yet answered (replies posted
	// but not yet completed count).
	InFlight() int
	// Probe takes the locks of the client's call path, within ctx.
	Probe(ctx context.Context) error
}

// ClientOps is what every client connection keeps for the live view.
type ClientOps struct {
	since    time.Time
	last     atomic.Int64 // unix nanos of the last call or reply
	In, Out  atomic.Uint64
	Draining atomic.Bool
}

func (o *ClientOps) Init(now time.Time) {
	o.since = now
	o.last.Store(now.UnixNano())
}

func (o *ClientOps) Touch(now time.Time) { o.last.Store(now.UnixNano()) }

// Fill sets the fields of si kept by clientOps.
func (o *ClientOps) Fill(si *SessionInfo, now time.Time) {
	last := time.Unix(0, o.last.Load())
	si.BytesIn, si.BytesOut = o.In.Load(), o.Out.Load()
	si.ConnectedAt, si.LastActivity = o.since, last
	si.AgeSeconds = now.Sub(o.since).Seconds()
	si.IdleSeconds = max(now.Sub(last).Seconds(), 0)
	si.Draining = o.Draining.Load()
}

// ClientTable is a gateway's live client connections. Each has its own
// context, ended to disconnect it at the end of a drain.
type ClientTable struct {
	mu       sync.Mutex
	clients  map[LiveClient]context.CancelFunc
	draining bool

	// AcceptBusy is when the accept loop took the request it is still
	// handling (unix nanos), 0 while it waits in Accept.
	AcceptBusy atomic.Int64

	readyOnce sync.Once
	ready     chan struct{} // closed once Serve accepts (readyChan)
}

// Ready is closed once every listener is up and Serve accepts.
func (t *ClientTable) Ready() chan struct{} {
	t.readyOnce.Do(func() { t.ready = make(chan struct{}) })
	return t.ready
}

func (t *ClientTable) MarkReady() {
	ch := t.Ready()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// Add registers c; false when the gateway is draining (c must go).
func (t *ClientTable) Add(c LiveClient, cancel context.CancelFunc) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.draining {
		return false
	}
	if t.clients == nil {
		t.clients = make(map[LiveClient]context.CancelFunc)
	}
	t.clients[c] = cancel
	return true
}

func (t *ClientTable) Remove(c LiveClient) {
	t.mu.Lock()
	delete(t.clients, c)
	t.mu.Unlock()
}

func (t *ClientTable) Draining() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.draining
}

// List returns the clients connected now.
func (t *ClientTable) List() []LiveClient {
	t.mu.Lock()
	defer t.mu.Unlock()
	cs := make([]LiveClient, 0, len(t.clients))
	for c := range t.clients {
		cs = append(cs, c)
	}
	return cs
}

// Any reports whether f is true of a client connected now. It copies
// nothing (a check on every accept stays cheap with 1,000 clients); f
// runs under the table's lock and must not call the table.
func (t *ClientTable) Any(f func(LiveClient) bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c := range t.clients {
		if f(c) {
			return true
		}
	}
	return false
}

func (t *ClientTable) cancelOf(c LiveClient) context.CancelFunc {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.clients[c]
}

// Snapshot builds the live view, clients oldest first, then the backend
// connections: those serving the clients, and parked (those of clients
// gone, kept for their reconnection).
func (t *ClientTable) Snapshot(s Sessions, parked ...BackendConnInfo) Sessions {
	now := time.Now()
	s.Draining = t.Draining()
	s.Clients = []SessionInfo{}
	s.Backends = []BackendConnInfo{}
	for _, c := range t.List() {
		s.Clients = append(s.Clients, c.Info(now))
	}
	slices.SortFunc(s.Clients, func(a, b SessionInfo) int { return a.ConnectedAt.Compare(b.ConnectedAt) })
	for _, c := range s.Clients {
		s.Backends = append(s.Backends, c.Backend)
	}
	s.Backends = append(s.Backends, parked...)
	return s
}

// drainPoll is how often a drain looks at the calls in flight.
const drainPoll = 10 * time.Millisecond

// Drain stops accepting (stopAccept), lets every client's calls in flight
// finish and disconnects each client as soon as it has none, until ctx
// ends; then it disconnects the rest, abandoning their calls. A second
// Drain while one runs waits for nothing and reports no clients.
func (t *ClientTable) Drain(ctx context.Context, stopAccept func(), met *Metrics) DrainResult {
	t.mu.Lock()
	if t.draining {
		t.mu.Unlock()
		return DrainResult{}
	}
	t.draining = true
	t.mu.Unlock()
	met.ops.draining.Set(1)
	stopAccept()
	left := t.List()
	res := DrainResult{Clients: len(left)}
	for _, c := range left {
		c.BeginDrain()
	}
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for timedOut := false; !timedOut; {
		left = slices.DeleteFunc(left, func(c LiveClient) bool {
			if c.InFlight() > 0 {
				return false
			}
			if cancel := t.cancelOf(c); cancel != nil {
				cancel() // idle: disconnect it now
			}
			return true
		})
		if len(left) == 0 {
			return res
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			timedOut = true
		}
	}
	res.TimedOut = true
	for _, c := range left {
		res.Abandoned += c.InFlight()
		if cancel := t.cancelOf(c); cancel != nil {
			cancel()
		}
	}
	met.ops.drainAbandoned.Add(float64(res.Abandoned))
	return res
}

// acceptStall is how long the accept loop may take over one connection
// request before the liveness probe calls it wedged. It only hands the
// request to a goroutine (or rejects it), so anything near this is a hang.
const acceptStall = 30 * time.Second

// Alive is the liveness probe: the accept loop is back in Accept (or
// only just left it), and the table's and every client's call-path locks
// can be taken within ctx.
func (t *ClientTable) Alive(ctx context.Context, extra func(context.Context) error) error {
	if b := t.AcceptBusy.Load(); b != 0 && time.Since(time.Unix(0, b)) > acceptStall {
		return fmt.Errorf("gateway: accept loop stuck for %v on one connection request", time.Since(time.Unix(0, b)).Round(time.Second))
	}
	done := make(chan []LiveClient, 1)
	go func() { done <- t.List() }()
	var cs []LiveClient
	select {
	case cs = <-done:
	case <-ctx.Done():
		return errors.New("gateway: client table lock not free")
	}
	for _, c := range cs {
		if err := c.Probe(ctx); err != nil {
			return err
		}
	}
	if extra != nil {
		return extra(ctx)
	}
	return nil
}

// LockWithin takes and releases mu, failing if ctx ends first (the
// goroutine left behind takes it whenever it is freed).
func LockWithin(ctx context.Context, mu sync.Locker, what string) error {
	done := make(chan struct{})
	go func() {
		mu.Lock()
		mu.Unlock() //nolint:staticcheck // only whether it can be taken
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("gateway: %s: lock held past the liveness deadline", what)
	}
}

// PoolAlive checks that the registered pool's lock answers within ctx
// (an exhausted pool is back-pressure, not a wedge: it is not asked for
// a buffer).
func PoolAlive(ctx context.Context, p *rdmarpc.Pool) error {
	if p == nil {
		return nil
	}
	done := make(chan struct{})
	go func() {
		p.Mapped()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return errors.New("gateway: liveness: the buffer pool's lock is held past the deadline")
	}
}

// Status is the one-line Status for systemd (STATUS=).
func (t *ClientTable) Status() string {
	cs := t.List()
	calls := 0
	for _, c := range cs {
		calls += c.InFlight()
	}
	state := "serving"
	if t.Draining() {
		state = "draining"
	}
	return fmt.Sprintf("%s: %d clients, %d calls in flight", state, len(cs), calls)
}

// opsMetrics are the series of drain and reload.
type opsMetrics struct {
	draining       prometheus.Gauge
	drainAbandoned prometheus.Counter
	reloads        *prometheus.CounterVec
	procsChanges   *prometheus.CounterVec
}

func newOpsMetrics(f factory) *opsMetrics {
	return &opsMetrics{
		draining: f.gauge(metricname.Draining, "1 while the gateway drains (SIGTERM or `rdmagw drain`): it accepts no new clients nor calls, and waits for the calls in flight up to shutdown.drain_timeout."),
		drainAbandoned: f.counter(metricname.DrainAbandonedCallsTotal,
			"Calls still unanswered when a drain reached shutdown.drain_timeout; their clients were disconnected and retransmit after reconnecting."),
		reloads: f.counterVec(metricname.ConfigReloadsTotal,
			"Configuration reloads (SIGHUP, systemctl reload), by result (applied; rejected: the file was invalid and nothing changed).", "result"),
		procsChanges: f.counterVec(metricname.RuntimeProcsChangesTotal,
			"Changes of the OS threads running Go code (GOMAXPROCS, go_sched_gomaxprocs_threads) under runtime.procs: auto, by reason (busy: up, the threads were three-quarters busy; waiting: up, goroutines waited a millisecond or more for a thread; idle: down by one, the load fitted one thread fewer; limit: the CPUs the process may use changed, its affinity or cgroup CPU limit, and the count was above the new number).", "reason"),
	}
}

// ProcsChanged counts a change of runtime.procs: auto and logs it (at
// debug: a load that comes and goes changes it every few seconds; a
// limit change, rare and the operator's doing, at info).
func (m *Metrics) ProcsChanged(log hclog.Logger, from, to int, reason string, cpuCores, waiting float64) {
	m.ops.procsChanges.WithLabelValues(reason).Inc()
	if reason == "limit" { // rare: the CPUs the process may use changed
		log.Info("CPU policy: the CPUs the process may use changed; threads changed", "from", from, "to", to, "reason", reason)
		return
	}
	log.Debug("CPU policy: threads changed", "from", from, "to", to, "reason", reason, "cpu_cores", cpuCores, "waiting", waiting)
}

// LogDrain logs how a drain ended.
func LogDrain(log hclog.Logger, res DrainResult) {
	if res.TimedOut {
		log.Warn("drain deadline reached; disconnecting clients with calls in flight",
			"clients", res.Clients, "abandoned_calls", res.Abandoned)
		return
	}
	log.Info("drained: every call in flight answered", "clients", res.Clients)
}

// CountRecord counts a reply record sent to a TCP client (its record
// marks included, one per MaxFragmentLen).
func (o *ClientOps) CountRecord(vec [][]byte) {
	n := 0
	for _, b := range vec {
		n += len(b)
	}
	o.Out.Add(uint64(n + 4 + n/(1<<31-1)*4))
	o.Touch(time.Now())
}
