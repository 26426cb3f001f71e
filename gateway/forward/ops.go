package forward

import (
	"context"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
)

// The forward gateway's side of ops.go: a session in the client table.

func (s *session) Info(now time.Time) gateway.SessionInfo {
	si := gateway.SessionInfo{Peer: s.peer, Mode: "forward",
		CreditsGranted: s.cfg.RDMA.Credits, CreditsInUse: s.rc.Outstanding(),
		InlineRecv: int(s.cfg.RDMA.InlineRecv), InlineSend: s.rc.InlineSend(),
		Backend: gateway.BackendConnInfo{Transport: "tcp", Client: s.peer, State: "serving"}}
	s.mu.Lock()
	si.CallsInFlight = len(s.pending.byXID)
	s.mu.Unlock()
	s.ops.Fill(&si, now)
	if s.dialer != nil {
		si.Backend.Remote = s.dialer.addr
		if a := s.dialer.last.Load(); a != nil {
			si.Backend.Local, si.Backend.Remote = a[0], a[1]
		}
	}
	return si
}

func (s *session) BeginDrain() { s.ops.Draining.Store(true) }

// InFlight counts calls the engine holds (with the backend or pulling
// their Read chunks) and replies whose Send has not completed.
func (s *session) InFlight() int { return s.rc.Outstanding() + s.rc.SendsInFlight() }

func (s *session) Probe(ctx context.Context) error {
	return gateway.LockWithin(ctx, &s.mu, "session "+s.peer)
}

// backends lists the parked backend connections.
func (p *parkedSessions) backends() []gateway.BackendConnInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []gateway.BackendConnInfo
	for id, list := range p.byID {
		for _, ps := range list {
			out = append(out, gateway.BackendConnInfo{Transport: "tcp", State: "parked", Client: id,
				Local: ps.conn.LocalAddr().String(), Remote: ps.conn.RemoteAddr().String()})
		}
	}
	return out
}
