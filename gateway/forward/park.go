package forward

import (
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/rdmarpc"
)

// Backend connections kept across client reconnects.
//
// The Linux client reconnects after an RPC timeout and sends every
// outstanding call again, with the same XID. The server's duplicate
// request cache is keyed on the client's address and port (NFSv3,
// NFSv4.0): only a retransmission from the same source port finds the
// cached reply of a non-idempotent call that already executed. So when a
// client disconnects by itself, its session is parked: the backend
// goroutines stop between records (runBackend's pause), the connection
// stays open, and a client from the same IP address within
// backend.reconnect_grace takes the session over, connection, record
// reader and backoff state included. Parked sessions hold no goroutine
// and no pool memory; their calls were abandoned when the client left.
//
// Identity is the client's IP address (clientIdentity): RDMA reconnects
// come from a new port. A host has one transport per server, or nconnect
// of them; parked sessions of one address are handed out oldest first.

// parkedSessions holds the sessions waiting for their client.
type parkedSessions struct {
	mu   sync.Mutex
	byID map[string][]*parkedSession
	// leaving counts, per identity, the sessions whose client has gone
	// and which are stopping their backend goroutines to park: a client
	// reconnecting at once waits for them (claim).
	leaving map[string]int
	closed  bool
	met     *gateway.Metrics
	log     hclog.Logger
}

type parkedSession struct {
	s     *session
	conn  *net.TCPConn
	timer *time.Timer
}

// clientIdentity is the IP address of a client's transport address
// (host:port).
func clientIdentity(addr string) string {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return ap.Addr().Unmap().String()
	}
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// leave marks a session of id as on its way to park (done: it parked or
// gave up parking).
func (p *parkedSessions) leave(id string, delta int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.leaving == nil {
		p.leaving = make(map[string]int)
	}
	if p.leaving[id] += delta; p.leaving[id] <= 0 {
		delete(p.leaving, id)
	}
}

// claimWait bounds how long a client waits for a session of its address
// to finish parking: its goroutines stop within milliseconds, or once a
// call record being written to a slow server is out (pauseWriteGrace).
const claimWait = pauseWriteGrace + time.Second

// park keeps s and its open backend connection for grace.
func (p *parkedSessions) park(id string, s *session, conn *net.TCPConn, grace time.Duration) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		conn.Close()
		return
	}
	if p.byID == nil {
		p.byID = make(map[string][]*parkedSession)
	}
	ps := &parkedSession{s: s, conn: conn}
	p.byID[id] = append(p.byID[id], ps)
	ps.timer = time.AfterFunc(grace, func() {
		if p.remove(id, ps) {
			p.log.Info("backend connection closed: the client did not come back within backend.reconnect_grace",
				"client", id, "backend_local", localAddr(conn), "reconnect_grace", grace)
			conn.Close()
		}
	})
	p.mu.Unlock()
	p.met.ForwardBackend.Parked.Inc()
	p.log.Info("client gone; backend connection kept for its reconnect", "client", id,
		"backend_local", localAddr(conn), "reconnect_grace", grace)
}

// remove takes ps out if it is still parked.
func (p *parkedSessions) remove(id string, ps *parkedSession) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.removeLocked(id, ps)
}

// takeOldest takes out the oldest session parked for id, in the same
// critical section that finds it (nil if none), and says how many
// sessions of id are on their way to park.
func (p *parkedSessions) takeOldest(id string) (ps *parkedSession, leaving int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if list := p.byID[id]; len(list) > 0 {
		ps = list[0]
		p.removeLocked(id, ps)
	}
	return ps, p.leaving[id]
}

// removeLocked takes ps out of id's list; p.mu is held. No slice of
// the list leaves the lock (takeOldest reads its element under it), so
// the list is shortened in place.
func (p *parkedSessions) removeLocked(id string, ps *parkedSession) bool {
	list := p.byID[id]
	i := slices.Index(list, ps)
	if i < 0 {
		return false
	}
	if list = slices.Delete(list, i, i+1); len(list) == 0 {
		delete(p.byID, id)
	} else {
		p.byID[id] = list
	}
	p.met.ForwardBackend.Parked.Dec()
	return true
}

// claim returns the oldest session parked for id and its backend
// connection, or nil. While a session of id is still on its way to park
// (the client reconnected before the gateway finished with its old
// connection), it waits for it, up to claimWait. ending reports whether
// a session of id that is still being served has already lost its
// transport: the client's disconnect reached the provider, but the
// session has not yet noticed (its engine is draining). The Linux client
// disconnects before it reconnects, and one device's connection events
// arrive in order, so a connection request that finds such a session is
// that client's reconnect and waits for the session to park; without
// it, the reconnect would race the old session's teardown and get a new
// backend connection (a duplicate request cache miss).
func (p *parkedSessions) claim(id string, ending func() bool) (*session, *net.TCPConn) {
	deadline := time.Now().Add(claimWait)
	for {
		ps, leaving := p.takeOldest(id)
		if ps != nil {
			ps.timer.Stop() // its callback finds ps gone (remove) if it already fired
			return ps.s, ps.conn
		}
		if leaving == 0 && ending != nil && ending() {
			leaving = 1
		}
		if leaving == 0 || time.Now().After(deadline) {
			return nil, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closeAll closes every parked connection and parks no more (shutdown).
func (p *parkedSessions) closeAll() {
	p.mu.Lock()
	p.closed = true
	var all []*parkedSession
	for _, list := range p.byID {
		all = append(all, list...)
	}
	clear(p.byID)
	p.mu.Unlock()
	for _, ps := range all {
		ps.timer.Stop()
		ps.conn.Close()
		p.met.ForwardBackend.Parked.Dec()
	}
}

// attach gives a parked session its client's new connection. The
// session's goroutines are all stopped.
func (s *session) attach(rc *rdmarpc.ResponderConn, cfg *gateway.Config) {
	s.mu.Lock()
	s.rc, s.cfg, s.peer = rc, cfg, rc.RemoteAddr()
	s.closing, s.giveUp = false, false
	s.mu.Unlock()
	s.initBackchannel()
}
