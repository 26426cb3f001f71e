package rdmarpc

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs/iwarp"
)

func newWaitPool(t *testing.T, cfg PoolConfig) *Pool {
	t.Helper()
	dev, err := iwarp.New(iwarp.Config{}).Open("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pd.Close() })
	p, err := NewPool(pd, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// GetWait waits while the pool's memory or the caller's quota is used
// up, and returns the buffer once another user releases one; it gives up
// when its context ends, leaving no charge behind.
func TestPoolGetWait(t *testing.T) {
	p := newWaitPool(t, PoolConfig{MaxBytes: 2 << 20, SlabBytes: 1 << 20, Classes: []int{4096, 1 << 20}})
	ctx := context.Background()

	// The pool's byte limit: two 1 MiB buffers and nothing more.
	a, err := p.GetWait(ctx, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.GetWait(ctx, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(1 << 20); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("third 1 MiB buffer: %v, want ErrPoolExhausted", err)
	}
	var released atomic.Bool
	got := make(chan error, 1)
	go func() {
		c, err := p.GetWait(ctx, 1<<20, nil)
		if err == nil {
			if !released.Load() {
				err = errors.New("GetWait returned a buffer before any was released")
			}
			c.Release()
		}
		got <- err
	}()
	released.Store(true)
	a.Release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}

	// A quota: b's owner holds its whole share; the next GetWait under
	// that quota waits for b, whatever the pool has free.
	q := NewQuota(1<<20, nil)
	b.Release()
	qa, err := p.GetWait(ctx, 1<<20, q)
	if err != nil {
		t.Fatal(err)
	}
	released.Store(false)
	go func() {
		c, err := p.GetWait(ctx, 1<<20, q)
		if err == nil {
			if !released.Load() {
				err = errors.New("GetWait passed a used-up quota")
			}
			c.Release()
		}
		got <- err
	}()
	released.Store(true)
	qa.Release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if q.Used() != 0 || p.InUse() != 0 {
		t.Fatalf("after the waits: quota %d, pool %d bytes in use", q.Used(), p.InUse())
	}

	// The context ends while waiting: ctx.Err(), and no charge is left.
	qa, err = p.GetWait(ctx, 1<<20, q)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := p.GetWait(cctx, 1<<20, q)
		got <- err
	}()
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("GetWait after cancel: %v, want context.Canceled", err)
	}
	if q.Used() != 1<<20 {
		t.Fatalf("a cancelled GetWait left %d bytes charged to the quota (want only the held 1 MiB)", q.Used()-1<<20)
	}
	qa.Release()

	// Errors that waiting cannot cure come back at once.
	if _, err := p.GetWait(ctx, 2<<20, nil); err == nil || errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("a buffer above the largest class: %v", err)
	}
}

// PoolWait's pauses start at PoolWaitFirst and double up to PoolWaitMax;
// Stop starts it over.
func TestPoolWaitPacing(t *testing.T) {
	var w PoolWait
	defer w.Stop()
	want := []time.Duration{1, 2, 4, 8, 16, 32, 50, 50}
	for i, ms := range want {
		if err := w.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if w.next != ms*time.Millisecond {
			t.Fatalf("pause %d: %v, want %v", i, w.next, ms*time.Millisecond)
		}
	}
	w.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on an ended context: %v", err)
	}
	if err := w.Wait(context.Background()); err != nil || w.next != PoolWaitFirst {
		t.Fatalf("after Stop: %v, pause %v, want %v", err, w.next, PoolWaitFirst)
	}
}
