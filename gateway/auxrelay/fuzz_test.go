package auxrelay

import (
	"net/netip"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/oncrpc"
)

// Every decoder of peer input is fuzzed: NLM arguments (all versions and
// procedures), SM_NOTIFY, the rpcbind argument types, universal and
// transport addresses, and the rpcbind responder as a whole.

func FuzzDecodeNLMArgs(f *testing.F) {
	o := nlmOwner{"client", []byte("1@client"), 1}
	f.Add(uint32(4), uint32(nlmLock), nlm4LockArgs("c", true, true, o, []byte("fh"), 0, 10))
	f.Add(uint32(4), uint32(nlmTest), nlm4TestArgs("c", true, o, []byte("fh"), 0, 10))
	f.Add(uint32(4), uint32(nlmUnlock), nlm4UnlockArgs("c", o, []byte("fh"), 0, 10))
	f.Add(uint32(1), uint32(nlmCancel), nlm4CancArgs("c", true, true, o, []byte("fh"), 0, 10))
	f.Add(uint32(3), uint32(nlmShare), []byte{0, 0, 0, 1, 'c', 0, 0, 0})
	f.Add(uint32(4), uint32(nlmLockRes), []byte{0, 0, 0, 1, 'c', 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, vers, proc uint32, args []byte) {
		a, err := decodeNLMArgs(vers, proc, args, 40)
		if err != nil {
			return
		}
		for _, s := range []span{a.CookieAt, a.Lock.CallerAt} {
			if s.From > s.To || s.To-40 > len(args) {
				t.Fatalf("span %+v outside %d bytes of args", s, len(args))
			}
		}
	})
}

func FuzzDecodeSMNotify(f *testing.F) {
	var w xdrWriter
	w.str("host")
	w.u32(3)
	f.Add(w.b)
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := decodeSMNotify(b)
		if err == nil && len(n.MonName) > maxNLMString {
			t.Fatal("mon_name over limit")
		}
	})
}

func FuzzRPCBindResponder(f *testing.F) {
	f.Add(uint32(2), uint32(3), getport(progMount, 3, ipprotoTCP))
	f.Add(uint32(4), uint32(3), rpcbArgsBytes(progNLM, 4, "tcp"))
	f.Add(uint32(3), uint32(8), []byte{0, 0, 0, 16, 0, 0, 0, 16, 2, 0, 0, 111, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint32(3), uint32(7), []byte{0, 0, 0, 11, '1', '.', '2', '.', '3', '.', '4', '.', '0', '.', '1', 0})
	f.Add(uint32(4), uint32(11), rpcbArgsBytes(progMount, 3, ""))
	t := &rpcbTable{now: time.Now, advertise: netip.MustParseAddr("192.0.2.1"), entries: []rpcbEntry{
		{progMount, 3, "tcp", 635}, {progNLM, 4, "udp", 4045}, {progNFS, 3, "rdma", 20049}, {progNSM, 1, "tcp6", 662}}}
	f.Fuzz(func(_ *testing.T, vers, proc uint32, args []byte) {
		h := oncrpc.CallHeader{Prog: progRPCBind, Vers: vers%3 + 2, Proc: proc}
		t.serve(&h, args, "tcp", netip.MustParseAddr("127.0.0.1"))
	})
}

func FuzzParseAddrs(f *testing.F) {
	f.Add("127.0.0.1.8.1", []byte{2, 0, 0, 111, 127, 0, 0, 1})
	f.Add("::1.0.111", []byte{10, 0, 0, 111, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, u string, taddr []byte) {
		if ap, err := parseUaddr(u); err == nil {
			if back, err := parseUaddr(uaddr(ap.Addr(), int(ap.Port()))); err != nil || back.Port() != ap.Port() {
				t.Fatalf("uaddr %q does not round-trip", u)
			}
		}
		if ap, err := parseTaddr(taddr); err == nil {
			if back, err := parseTaddr(taddrOf(ap)); err != nil || back != ap && back.Addr().Unmap() != ap.Addr().Unmap() {
				t.Fatalf("taddr %x does not round-trip", taddr)
			}
		}
	})
}

// FuzzHandleMessage feeds whole messages to the relay's dispatcher (with
// a filer that is never reached): any input gets an answer or is dropped,
// never a panic.
func FuzzHandleMessage(f *testing.F) {
	f.Add(buildCall(1, progNLM, 4, nlmLock, nlm4LockArgs("c", true, true, nlmOwner{"c", nil, 1}, nil, 0, 1)))
	f.Add(buildCall(1, progRPCBind, 2, 3, getport(progMount, 3, 6)))
	f.Add(buildCall(1, progNSM, 1, nsmNotify, []byte{0, 0, 0, 1, 'x', 0, 0, 0, 0, 0, 0, 1}))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0})
	cfg := testConfig()
	cfg.Enabled = true
	cfg.Filer.Address = "192.0.2.1" // never sent to: the sink below has no network
	cfg.Filer.MountPort, cfg.Filer.NLMPort, cfg.Filer.NSMPort = 1, 1, 1
	r, err := New(cfg, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	r.filerIPs = []netip.Addr{netip.MustParseAddr("203.0.113.1")} // unreachable: forwarding fails fast below
	r.table = r.buildTable()
	r.ctx = f.Context()
	r.closed = true // no socket may be opened: sends fail at once
	f.Fuzz(func(t *testing.T, msg []byte) {
		in := &inbound{sink: notifySink{"fuzz"}, transport: "tcp", remote: netip.MustParseAddrPort("127.0.0.2:1000"), local: netip.MustParseAddr("127.0.0.1")}
		r.handleMessage(msg, in)
	})
}
