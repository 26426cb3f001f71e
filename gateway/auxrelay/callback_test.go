package auxrelay

import (
	"net"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/xdr"
)

// callbackSetup: a fake filer at 127.0.0.1 (NLM and NSM, TCP+UDP) that
// answers LOCK with BLOCKED when block is set, and two fake clients at
// 127.0.0.2 and 127.0.0.3 with their own rpcbind on a shared port.
type callbackSetup struct {
	relay *Relay
	filer *fakePeer
	a, b  *fakeClient
}

func startCallbackSetup(t *testing.T, callerName string) *callbackSetup {
	t.Helper()
	// One port number free on both client addresses for their rpcbind.
	var rpcbPort int
	for range 20 {
		l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.ParseIP("127.0.0.2")})
		if err != nil {
			t.Skipf("cannot bind 127.0.0.2: %v", err)
		}
		rpcbPort = l.Addr().(*net.TCPAddr).Port
		l.Close()
		if l2, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.ParseIP("127.0.0.3"), Port: rpcbPort}); err == nil {
			l2.Close()
			break
		}
	}
	s := &callbackSetup{}
	s.filer = startFakePeer(t, "127.0.0.1", 0, func(rc recvCall) []byte {
		if rc.h.Prog != progNLM {
			return nil
		}
		a, err := decodeNLMArgs(rc.h.Vers, rc.h.Proc, rc.args, 0)
		if err != nil {
			return nil
		}
		switch rc.h.Proc {
		case nlmTest, nlmLock, nlmCancel, nlmUnlock:
			var w xdrWriter
			w.opaque(a.Cookie)
			if rc.h.Proc == nlmLock && a.Block {
				w.u32(nlm4Blocked)
			} else {
				w.u32(nlm4Granted)
			}
			return w.b
		}
		return nil // *_MSG: void
	})
	s.a = startFakeClient(t, "127.0.0.2", rpcbPort)
	s.b = startFakeClient(t, "127.0.0.3", rpcbPort)
	cfg := testConfig()
	cfg.Filer.MountPort = 1
	cfg.Filer.NLMPort = int(s.filer.addr.Port())
	cfg.Filer.NSMPort = int(s.filer.addr.Port())
	cfg.ClientRPCBindPort = rpcbPort
	cfg.NLMCallerName = callerName
	s.relay = startRelay(t, cfg)
	return s
}

func (s *callbackSetup) filerCall(t *testing.T) recvCall {
	t.Helper()
	select {
	case c := <-s.filer.calls:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("the filer got no call")
	}
	return recvCall{}
}

func expectCall(t *testing.T, who string, p *fakePeer, proc uint32) recvCall {
	t.Helper()
	select {
	case c := <-p.calls:
		if c.h.Proc != proc {
			t.Fatalf("%s got %s, want %s", who, procLabel(c.h.Prog, c.h.Vers, c.h.Proc), procLabel(c.h.Prog, c.h.Vers, proc))
		}
		return c
	case <-time.After(5 * time.Second):
		t.Fatalf("%s got no %s", who, procLabel(progNLM, 4, proc))
	}
	return recvCall{}
}

func expectNothing(t *testing.T, who string, p *fakePeer) {
	t.Helper()
	select {
	case c := <-p.calls:
		t.Errorf("%s got an unexpected %s", who, procLabel(c.h.Prog, c.h.Vers, c.h.Proc))
	case <-time.After(200 * time.Millisecond):
	}
}

// TestNLMCallbackRouting: client B's blocked LOCK is GRANTED by the filer
// (synchronous NLM4_GRANTED over TCP and NLM4_GRANTED_MSG over UDP) and
// the relay delivers each to B, not A, with B's caller_name; B's answer
// goes back to the filer. Both with caller_name passed through (Linux
// lockd filers) and rewritten (nfs-ganesha filers).
func TestNLMCallbackRouting(t *testing.T) {
	for _, rewrite := range []string{"", "127.0.0.1"} {
		t.Run("caller_name="+rewrite, func(t *testing.T) {
			s := startCallbackSetup(t, rewrite)
			fh := []byte("filehandle-0001")
			oa := nlmOwner{"client-a", []byte("7@client-a"), 7}
			ob := nlmOwner{"client-b", []byte("7@client-b"), 7} // same svid as A on purpose
			a := dialRPC(t, "tcp", "127.0.0.2", s.relay.Addr("nlm", "tcp"))
			b := dialRPC(t, "tcp", "127.0.0.3", s.relay.Addr("nlm", "tcp"))

			if _, st := nlmStat(t, a.mustSucceed(t, progNLM, 4, nlmLock, nlm4LockArgs("a1", false, true, oa, fh, 0, 10))); st != nlm4Granted {
				t.Fatalf("A LOCK: %d", st)
			}
			s.filerCall(t)
			if _, st := nlmStat(t, b.mustSucceed(t, progNLM, 4, nlmLock, nlm4LockArgs("b1", true, true, ob, fh, 0, 10))); st != nlm4Blocked {
				t.Fatalf("B LOCK: %d, want BLOCKED", st)
			}
			lock := s.filerCall(t)
			la, _ := decodeNLMArgs(4, nlmLock, lock.args, 0)
			wantCaller := "client-b"
			if rewrite != "" {
				wantCaller = rewrite
			}
			if string(la.Lock.CallerName) != wantCaller {
				t.Errorf("filer saw caller_name %q, want %q", la.Lock.CallerName, wantCaller)
			}

			// The filer grants B's lock: synchronous GRANTED over TCP, as
			// the filer would after asking the relay's rpcbind for NLM.
			port, err := pmapGetPort(t.Context(), "tcp", s.relay.Addr("rpcbind", "tcp"), netipAddr("127.0.0.1"), progNLM, 4, time.Second)
			if err != nil || port != int(s.relay.Addr("nlm", "tcp").Port()) {
				t.Fatalf("filer's rpcbind lookup of the relay's NLM: %d, %v", port, err)
			}
			f := dialRPC(t, "tcp", "127.0.0.1", s.relay.Addr("nlm", "tcp"))
			var w xdrWriter
			w.str("srv-cookie-1")
			w.u32(1)
			nlm4Lock(&w, string(la.Lock.CallerName), la.Lock.FH, la.Lock.OH, la.Lock.Svid, 0, 10)
			c, st := nlmStat(t, f.mustSucceed(t, progNLM, 4, nlmGranted, w.b))
			if st != nlm4Granted || c != "srv-cookie-1" {
				t.Errorf("filer's GRANTED answered stat %d cookie %q, want B's GRANTED", st, c)
			}
			got := expectCall(t, "B", s.b.service, nlmGranted)
			ga, _ := decodeNLMArgs(4, nlmGranted, got.args, 0)
			if string(ga.Lock.CallerName) != "client-b" || string(ga.Lock.OH) != "7@client-b" {
				t.Errorf("B's GRANTED carries caller_name %q oh %q", ga.Lock.CallerName, ga.Lock.OH)
			}
			if got.from.Addr().String() != "127.0.0.1" {
				t.Errorf("GRANTED reached B from %s, want the relay's address", got.from)
			}
			expectNothing(t, "A", s.a.service)

			// Asynchronous GRANTED_MSG over UDP.
			fu := dialRPC(t, "udp", "127.0.0.1", s.relay.Addr("nlm", "udp"))
			fu.mustSucceed(t, progNLM, 4, nlmGrantedMsg, w.b)
			got = expectCall(t, "B", s.b.service, nlmGrantedMsg)
			if got.transport != "udp" {
				t.Errorf("GRANTED_MSG reached B over %s", got.transport)
			}
			expectNothing(t, "A", s.a.service)

			// A GRANTED for a lock nobody asked for is refused.
			var u xdrWriter
			u.str("srv-cookie-2")
			u.u32(1)
			nlm4Lock(&u, "nobody", []byte("other-fh"), []byte("1@nobody"), 1, 0, 1)
			if _, st := nlmStat(t, f.mustSucceed(t, progNLM, 4, nlmGranted, u.b)); st != nlm4Denied {
				t.Errorf("unroutable GRANTED: stat %d, want DENIED", st)
			}
		})
	}
}

// TestNLMAsyncCookieRouting: A and B send LOCK_MSG with the same cookie;
// the filer sees two different cookies, and each LOCK_RES it sends comes
// back to the right client with that client's own cookie.
func TestNLMAsyncCookieRouting(t *testing.T) {
	s := startCallbackSetup(t, "")
	fh := []byte("filehandle-0002")
	oa := nlmOwner{"client-a", []byte("9@client-a"), 9}
	ob := nlmOwner{"client-b", []byte("9@client-b"), 9}
	a := dialRPC(t, "udp", "127.0.0.2", s.relay.Addr("nlm", "udp"))
	b := dialRPC(t, "udp", "127.0.0.3", s.relay.Addr("nlm", "udp"))
	a.mustSucceed(t, progNLM, 4, nlmLockMsg, nlm4LockArgs("same", false, true, oa, fh, 0, 1))
	ca := s.filerCall(t)
	b.mustSucceed(t, progNLM, 4, nlmLockMsg, nlm4LockArgs("same", false, true, ob, fh, 0, 1))
	cb := s.filerCall(t)
	aa, _ := decodeNLMArgs(4, nlmLockMsg, ca.args, 0)
	ba, _ := decodeNLMArgs(4, nlmLockMsg, cb.args, 0)
	if string(aa.Cookie) == string(ba.Cookie) || string(aa.Cookie) == "same" {
		t.Fatalf("filer saw cookies %q and %q: not made unique", aa.Cookie, ba.Cookie)
	}
	f := dialRPC(t, "udp", "127.0.0.1", s.relay.Addr("nlm", "udp"))
	for _, tc := range []struct {
		cookie []byte
		who    string
		peer   *fakePeer
		other  *fakePeer
	}{{ba.Cookie, "B", s.b.service, s.a.service}, {aa.Cookie, "A", s.a.service, s.b.service}} {
		var w xdrWriter
		w.opaque(tc.cookie)
		w.u32(nlm4Granted)
		f.mustSucceed(t, progNLM, 4, nlmLockRes, w.b)
		got := expectCall(t, tc.who, tc.peer, nlmLockRes)
		if c, st := nlmStat(t, got.args); c != "same" || st != nlm4Granted {
			t.Errorf("%s LOCK_RES: cookie %q stat %d", tc.who, c, st)
		}
		expectNothing(t, "the other client", tc.other)
	}
}

// TestNSMRebootNotification: clients that used NLM through the relay are
// told when the filer reboots (SM_NOTIFY from the filer fanned out, with
// the gateway's name as mon_name); a client's SM_NOTIFY goes to the filer.
func TestNSMRebootNotification(t *testing.T) {
	s := startCallbackSetup(t, "")
	fh := []byte("filehandle-0003")
	for _, c := range []struct {
		ip string
		o  nlmOwner
	}{{"127.0.0.2", nlmOwner{"client-a", []byte("1@a"), 1}}, {"127.0.0.3", nlmOwner{"client-b", []byte("1@b"), 1}}} {
		cl := dialRPC(t, "tcp", c.ip, s.relay.Addr("nlm", "tcp"))
		cl.mustSucceed(t, progNLM, 4, nlmTest, nlm4TestArgs("t", true, c.o, fh, 0, 1))
		s.filerCall(t)
	}
	f := dialRPC(t, "udp", "127.0.0.1", s.relay.Addr("nsm", "udp"))
	var w xdrWriter
	w.str("filer.example")
	w.u32(7)
	f.mustSucceed(t, progNSM, 1, nsmNotify, w.b)
	for _, cl := range []*fakeClient{s.a, s.b} {
		got := expectCall(t, cl.ip, cl.service, nsmNotify)
		n, err := decodeSMNotify(got.args)
		if err != nil || string(n.MonName) != "127.0.0.1" || n.State != 7 {
			t.Errorf("%s SM_NOTIFY: %q state %d (%v), want mon_name 127.0.0.1 state 7", cl.ip, n.MonName, n.State, err)
		}
	}
	// The client's own reboot notice goes to the filer's statd.
	c := dialRPC(t, "udp", "127.0.0.2", s.relay.Addr("nsm", "udp"))
	var cw xdrWriter
	cw.str("client-a")
	cw.u32(9)
	c.mustSucceed(t, progNSM, 1, nsmNotify, cw.b)
	got := s.filerCall(t)
	if n, _ := decodeSMNotify(got.args); got.h.Prog != progNSM || string(n.MonName) != "client-a" {
		t.Errorf("filer got %s %q", procLabel(got.h.Prog, got.h.Vers, got.h.Proc), n.MonName)
	}
	_ = xdr.Decoder{}
}
