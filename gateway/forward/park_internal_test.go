package forward

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/gateway/metricname"
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
		sess[i] = &session{seq: uint64(i + 1)}
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
		p.arrived("10.0.0.1")
	}
	if s, c := p.claim("10.0.0.1", nil); s != nil || c != nil {
		t.Fatalf("third claim got session %p conn %v, want none: a parked session was handed out twice", s, localAddr(c))
	}
	if n := len(p.backends()); n != 1 {
		t.Fatalf("%d sessions still parked, want 1 (the other client's)", n)
	}
}

// The failure of lab case 21-drc-reconnect (gateway log of a CI run):
// a connection attempt of the kernel client claimed the parked session,
// the client moved on to its next attempt before that one was served,
// and the next attempt, finding nothing parked, dialed a new backend
// connection; the calls resent on it missed knfsd's reply cache. A
// claim made while another transport of the address is arriving waits
// for it, and gets what that one parks again (here: its accept failed).
func TestParkedSessionsClaimWaitsForArriving(t *testing.T) {
	p := &parkedSessions{met: gateway.NewMetrics(), log: hclog.NewNullLogger()}
	orig := &session{seq: 1}
	c1, c2 := tcpPair(t)
	t.Cleanup(func() { c1.Close(); c2.Close() })
	p.park("10.0.0.1", orig, c1, time.Minute)
	notEnding := func() bool { return false }
	if s, _ := p.claim("10.0.0.1", notEnding); s != orig {
		t.Fatalf("first claim got %p, want the parked session %p", s, orig)
	}
	got := make(chan *session, 1)
	go func() {
		s, _ := p.claim("10.0.0.1", notEnding)
		got <- s
	}()
	select {
	case s := <-got:
		t.Fatalf("a claim made while another transport of the address was arriving decided at once (session %p): it would dial a new backend connection", s)
	case <-time.After(100 * time.Millisecond):
	}
	p.park("10.0.0.1", orig, c1, time.Minute) // the first attempt's accept failed
	p.arrived("10.0.0.1")
	select {
	case s := <-got:
		if s != orig {
			t.Fatalf("the waiting claim got %p, want the session parked again %p", s, orig)
		}
	case <-time.After(2 * claimWait):
		t.Fatal("the waiting claim did not return")
	}
	p.arrived("10.0.0.1")
	if v := gwtest.Metric(t, p.met, metricname.BackendConnectionWaitsTotal, "outcome", "kept"); v != 1 {
		t.Errorf("%s{outcome=kept} = %v, want 1 (the claim that waited)", metricname.BackendConnectionWaitsTotal, v)
	}
	// With nothing parked and nothing in transit, transports of one
	// address decide at once, each dialing its own connection (nconnect).
	for i := range 3 {
		if s, _ := p.claim("10.0.0.1", notEnding); s != nil {
			t.Fatalf("claim %d with nothing parked got %p", i, s)
		}
	}
}

// A claim waits for a session of its address that is leaving even when
// another is parked, and then takes the oldest session, not the first
// parked: the newer one's backend connection never carried the calls
// the client sends again.
func TestParkedSessionsClaimTakesOldestAfterLeaving(t *testing.T) {
	p := &parkedSessions{met: gateway.NewMetrics(), log: hclog.NewNullLogger()}
	older, newer := &session{seq: 1}, &session{seq: 2}
	a1, a2 := tcpPair(t)
	b1, b2 := tcpPair(t)
	t.Cleanup(func() { a1.Close(); a2.Close(); b1.Close(); b2.Close() })
	p.park("10.0.0.1", newer, b1, time.Minute)
	p.leave("10.0.0.1", 1) // older's client has gone; it is stopping to park
	got := make(chan *session, 1)
	go func() {
		s, _ := p.claim("10.0.0.1", func() bool { return false })
		got <- s
	}()
	select {
	case s := <-got:
		t.Fatalf("the claim did not wait for the leaving session (got %p, the newer is %p)", s, newer)
	case <-time.After(100 * time.Millisecond):
	}
	p.park("10.0.0.1", older, a1, time.Minute)
	p.leave("10.0.0.1", -1)
	select {
	case s := <-got:
		if s != older {
			t.Fatalf("the claim got %p, want the older session %p (newer %p)", s, older, newer)
		}
		if v := gwtest.Metric(t, p.met, metricname.BackendConnectionWaitsTotal, "outcome", "kept"); v != 1 {
			t.Errorf("%s{outcome=kept} = %v, want 1", metricname.BackendConnectionWaitsTotal, v)
		}
	case <-time.After(2 * claimWait):
		t.Fatal("the claim did not return")
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
