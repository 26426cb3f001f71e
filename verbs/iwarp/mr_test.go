package iwarp

import (
	"testing"

	"github.com/rdmagw/rdmagw/verbs"
)

// Registering and deregistering in steady state (the requester does it per
// RPC) allocates nothing: the slot's object is reused with the next key,
// and the retired key never resolves, neither for lookups nor for local
// SGEs.
func TestRegisterReusesObject(t *testing.T) {
	s := newSide(t, New(Config{}))
	d := s.dev.(*device)
	mem, err := verbs.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Free()
	buf := mem.Bytes()[:4096]
	first, err := s.pd.Register(buf, allAccess)
	if err != nil {
		t.Fatal(err)
	}
	prev := first.LKey()
	first.Deregister()
	for i := range 300 { // past the 8-bit key's wrap
		m, err := s.pd.Register(buf, allAccess)
		if err != nil {
			t.Fatal(err)
		}
		if m != verbs.MR(first) {
			t.Fatalf("round %d: Register made a new object, want the retired one reused", i)
		}
		k := m.LKey()
		if k == prev || k>>8 != prev>>8 || m.RKey() != k {
			t.Fatalf("round %d: key %#x (rkey %#x) after retired %#x: want the same index with the next key", i, k, m.RKey(), prev)
		}
		if !s.pd.(*pd).checkSGE(&verbs.SGE{Buf: buf[:8], LKey: k}, true) || d.lookup(k) == nil {
			t.Fatalf("round %d: the live key %#x does not resolve", i, k)
		}
		if s.pd.(*pd).checkSGE(&verbs.SGE{Buf: buf[:8], LKey: prev}, false) || d.lookup(prev) != nil || d.acquire(prev) != nil {
			t.Fatalf("round %d: retired key %#x resolves", i, prev)
		}
		if !m.Valid() || len(m.Bytes()) != 4096 || m.Addr() != sgeAddr(&verbs.SGE{Buf: buf}) {
			t.Fatalf("round %d: reused region valid=%v len=%d", i, m.Valid(), len(m.Bytes()))
		}
		m.Deregister()
		m.Deregister() // twice before any Register: harmless
		prev = k
	}
	allocs := testing.AllocsPerRun(100, func() {
		m, err := s.pd.Register(buf, allAccess)
		if err != nil {
			t.Fatal(err)
		}
		m.Deregister()
	})
	if allocs != 0 {
		t.Fatalf("Register+Deregister: %v allocs, want 0", allocs)
	}
}

// A Read Request is checked when it arrives and answered later: if its
// source region is deregistered and the object reused by a new
// registration in between, the response must not be sent from the new
// region (nor may tx keep the object locked).
func TestReadResponseFromReusedRegion(t *testing.T) {
	cli, _ := pair(t, Config{}, "")
	c := cli.conn.(*conn)
	mem, err := verbs.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Free()
	m1, err := cli.pd.Register(mem.Bytes()[:4096], allAccess)
	if err != nil {
		t.Fatal(err)
	}
	ie := irqEntry{m: m1.(*mr), stag: m1.RKey(), n: 16}
	m1.Deregister()
	m2, err := cli.pd.Register(mem.Bytes()[:4096], allAccess)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Deregister()
	if m2.(*mr) != ie.m {
		t.Fatal("the object was not reused; the case tests nothing")
	}
	tx := &txState{}
	tx.init(c)
	if tx.holdMR(ie.m, ie.stag) {
		t.Fatal("holdMR accepted the retired STag of a reused object")
	}
	if len(tx.held) != 0 {
		t.Fatal("holdMR kept a region it refused")
	}
	if !tx.holdMR(ie.m, m2.RKey()) {
		t.Fatal("holdMR refused the live registration")
	}
	tx.release()
}

func BenchmarkRegisterDeregister(b *testing.B) {
	s := newSide(b, New(Config{}))
	mem, err := verbs.Alloc(1 << 20)
	if err != nil {
		b.Fatal(err)
	}
	defer mem.Free()
	buf := mem.Bytes()[:1<<20]
	b.ReportAllocs()
	for b.Loop() {
		m, err := s.pd.Register(buf, allAccess)
		if err != nil {
			b.Fatal(err)
		}
		m.Deregister()
	}
}
