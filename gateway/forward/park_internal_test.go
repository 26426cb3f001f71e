package forward

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
)

// Two sessions of one address parked (nconnect, or a client whose
// reconnect outran its old connection's teardown): two reconnects take
// them oldest first, each exactly once, and a third finds none. Before
// claim took the oldest out under the lock, it took the oldest out of
// the map but returned the slice's shifted first element, the newer
// session, which stayed parked: the next reconnect got it a second time
// and two clients ran one session (the gateway panicked in session.run,
// lab case 70-siw), while the oldest session's connection leaked.
func TestParkedSessionsClaimEachOnceOldestFirst(t *testing.T) {
	p := &parkedSessions{met: gateway.NewMetrics(), log: hclog.NewNullLogger()}
	var sess [2]*session
	var conns [2]*net.TCPConn
	for i := range sess {
		sess[i] = &session{}
		c1, c2 := tcpPair(t)
		conns[i] = c1
		t.Cleanup(func() { c1.Close(); c2.Close() })
		p.park("10.0.0.1", sess[i], conns[i], time.Minute)
	}
	p.park("10.0.0.2", &session{}, conns[0], time.Minute) // another client's: not handed out
	for i := range sess {
		s, c := p.claim("10.0.0.1", nil)
		if s != sess[i] || c != conns[i] {
			t.Fatalf("claim %d: got session %p conn %v, want the session parked %d-th (%p, %v)", i, s, localAddr(c), i, sess[i], localAddr(conns[i]))
		}
	}
	if s, c := p.claim("10.0.0.1", nil); s != nil || c != nil {
		t.Fatalf("third claim got session %p conn %v, want none: a parked session was handed out twice", s, localAddr(c))
	}
	if n := len(p.backends()); n != 1 {
		t.Fatalf("%d sessions still parked, want 1 (the other client's)", n)
	}
}

// tcpPair is a connected loopback TCP pair.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c1, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	c2, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	return c1, c2
}
