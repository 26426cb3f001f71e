package rdmarpc

import (
	"errors"
	"testing"

	"github.com/rdmagw/rdmagw/verbs/iwarp"
)

// A Quota charges buffers to itself and its parent until they are
// released, admits one buffer whatever its size when nothing is in use,
// and refuses with an error that means "wait" (ErrPoolExhausted).
func TestPoolQuota(t *testing.T) {
	dev, err := iwarp.New(iwarp.Config{}).Open("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	pd, _ := dev.AllocPD()
	defer pd.Close()
	p, err := NewPool(pd, PoolConfig{MaxBytes: 8 << 20, Classes: []int{4096, 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	all := NewQuota(3<<20, nil)
	a, b := NewQuota(2<<20, all), NewQuota(512<<10, all)

	a1, err := p.GetQuota(1<<20, a)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := p.GetQuota(5000, a) // charged as its class, 1 MiB
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.GetQuota(1, a); !errors.Is(err, ErrQuotaExhausted) || !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("a third buffer over a's 2 MiB: %v, want ErrQuotaExhausted (an ErrPoolExhausted)", err)
	}
	// Nothing in use under b: one buffer larger than its ceiling passes.
	b1, err := p.GetQuota(1<<20, b)
	if err != nil {
		t.Fatalf("b's first buffer: %v", err)
	}
	if _, err := p.GetQuota(4096, b); !errors.Is(err, ErrQuotaExhausted) {
		t.Fatalf("b's second buffer: %v", err)
	}
	// The parent holds 3 MiB now: nothing more for a, even after a frees
	// room of its own... until the parent has room too.
	a2.Release()
	if a.Used() != 1<<20 || all.Used() != 2<<20 {
		t.Fatalf("after release: a %d, all %d", a.Used(), all.Used())
	}
	a3, err := p.GetQuota(1<<20, a)
	if err != nil {
		t.Fatalf("a's buffer after a release: %v", err)
	}
	if _, err := p.GetQuota(4096, a); !errors.Is(err, ErrQuotaExhausted) {
		t.Fatalf("over the parent: %v", err)
	}
	if a.Used() != 2<<20 || b.Used() != 1<<20 || all.Used() != 3<<20 {
		t.Fatalf("a refused buffer left a charge: a %d, b %d, all %d", a.Used(), b.Used(), all.Used())
	}
	for _, x := range []*Buffer{a1, a3, b1} {
		x.Release()
	}
	if a.Used() != 0 || b.Used() != 0 || all.Used() != 0 || p.InUse() != 0 {
		t.Fatalf("after releasing everything: a %d, b %d, all %d, pool %d", a.Used(), b.Used(), all.Used(), p.InUse())
	}
	// Unquoted buffers and RaiseMax.
	p.RaiseMax(16 << 20)
	if p.MaxBytes() != 16<<20 {
		t.Fatalf("MaxBytes %d after RaiseMax(16 MiB)", p.MaxBytes())
	}
	p.RaiseMax(1 << 20)
	if p.MaxBytes() != 16<<20 {
		t.Fatalf("RaiseMax lowered the ceiling to %d", p.MaxBytes())
	}
}
