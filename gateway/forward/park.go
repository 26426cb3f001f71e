package forward

import (
	"cmp"
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
// of them; parked sessions of one address are handed out oldest first,
// by the order the sessions were created (session.seq): the oldest
// backend connection is the one that carried the client's calls before
// its transports came and went.
//
// A reconnect decides only when the client's address has no session in
// transit: none stopping to park (leaving) and none that claimed a
// parked session before it and is not yet served (arriving: accepting
// its transport). Transports that dial a new connection do not wait for
// each other (nconnect, or many clients behind one address). The Linux client can have a
// connection attempt accepted by the gateway after it has moved on to
// the next one (lab case 21-drc-reconnect: a transport that lived 10 ms
// with no call held the parked session while the next reconnect, finding
// none, dialed a new backend connection; the calls resent on it missed
// knfsd's reply cache). Waiting for the one in transit, then taking the
// oldest, hands the original connection to whichever transport comes
// last. The wait is bounded by claimWait.

// parkedSessions holds the sessions waiting for their client.
type parkedSessions struct {
	mu   sync.Mutex
	byID map[string][]*parkedSession
	// leaving counts, per identity, the sessions whose client has gone
	// and which are stopping their backend goroutines to park; arriving,
	// the transports that claimed a parked session and are not yet
	// served or given up (arrived). A reconnect waits for both (claim).
	leaving  map[string]int
	arriving map[string]int
	closed   bool
	met      *gateway.Metrics
	log      hclog.Logger
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

// leave marks a session of id as on its way to park (delta 1), or done
// (-1: it parked or gave up parking).
func (p *parkedSessions) leave(id string, delta int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	addCount(&p.leaving, id, delta)
}

// arrived ends the transit of a transport that claimed a parked
// session: the session is in the client table, or the transport failed
// and the session is parked again.
func (p *parkedSessions) arrived(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	addCount(&p.arriving, id, -1)
}

// addCount adds delta to (*m)[id], deleting the entry at zero; p.mu is
// held.
func addCount(m *map[string]int, id string, delta int) {
	if *m == nil {
		*m = make(map[string]int)
	}
	if (*m)[id] += delta; (*m)[id] <= 0 {
		delete(*m, id)
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
	list := p.byID[id]
	i, _ := slices.BinarySearchFunc(list, s.seq, func(e *parkedSession, seq uint64) int { return cmp.Compare(e.s.seq, seq) })
	p.byID[id] = slices.Insert(list, i, ps) // oldest session first
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

// takeOldest decides for a transport of id, unless a session of id is
// in transit (leaving or arriving) and force is false: it takes out the
// oldest session parked for id (nil if none) and counts the transport
// as arriving if it took one, in one critical section. decided is false
// when it must wait.
func (p *parkedSessions) takeOldest(id string, force bool) (ps *parkedSession, decided bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !force && p.leaving[id]+p.arriving[id] > 0 {
		return nil, false
	}
	if list := p.byID[id]; len(list) > 0 {
		ps = list[0]
		p.removeLocked(id, ps)
		addCount(&p.arriving, id, 1)
	}
	return ps, true
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
// connection, or nil (dial a new one). It waits, up to claimWait, while
// a session of id is in transit (leaving or arriving) or has lost its
// transport without having noticed yet: ending reports that (the
// client's disconnect reached the provider, but the session's engine is
// still draining). The Linux client disconnects before it reconnects,
// and one device's connection events arrive in order, so a connection
// request that finds such a session is that client's reconnect; without
// the wait it would race the old session's teardown and get a new
// backend connection (a duplicate request cache miss). ending nil (no
// reconnect_grace) decides at once. A caller given a session counts as
// arriving until it calls arrived.
func (p *parkedSessions) claim(id string, ending func() bool) (*session, *net.TCPConn) {
	deadline := time.Now().Add(claimWait)
	for waited := false; ; waited = true {
		late := ending != nil && time.Now().After(deadline)
		force := ending == nil || late
		if force || !ending() {
			if ps, decided := p.takeOldest(id, force); decided {
				switch {
				case late:
					p.met.ForwardBackend.WaitTimeout.Inc()
					// A client event (rate-limited: a connection storm
					// from one address must not flood the log).
					p.met.ClientEvent("backend_wait_timeout", "reconnect did not wait longer for a connection of its address in transit; deciding without it",
						id, "waited", claimWait, "backend_kept", ps != nil)
				case waited && ps != nil:
					p.met.ForwardBackend.WaitKept.Inc()
				case waited:
					p.met.ForwardBackend.WaitNew.Inc()
				}
				if ps == nil {
					return nil, nil
				}
				ps.timer.Stop() // its callback finds ps gone (remove) if it already fired
				return ps.s, ps.conn
			}
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
