package rdmarpc

import (
	"context"
	"errors"
	"time"
)

// Waiting for pool memory.
//
// A Pool (or a Quota) that is used up is a normal state under load: the
// user stops reading its source (TCP back-pressure) and tries again once
// other users have released buffers. The pool does not signal releases,
// so a waiting user polls: first after PoolWaitFirst, each wait doubling
// up to PoolWaitMax. This file is the one way to wait for pool memory:
// GetWait for a buffer, PoolWait for an operation that takes buffers
// itself (a requester Call) and failed with ErrPoolExhausted.

const (
	// PoolWaitFirst is the first wait after an exhausted Get.
	PoolWaitFirst = time.Millisecond
	// PoolWaitMax caps the wait between two tries.
	PoolWaitMax = 50 * time.Millisecond
)

// GetWait is GetQuota that waits while the pool or q (or one of its
// parents) is exhausted, trying again with PoolWait's pacing, until it
// gets the buffer or ctx ends (then it returns ctx.Err()). Quota rules are
// GetQuota's: a quota with nothing in use admits one buffer of any size,
// so a waiting user with nothing in use is never stuck on its own quota.
// Errors other than exhaustion (a size over MaxSize, a closed pool, a
// failed registration) are returned at once. The fast path allocates
// nothing; waiting allocates one timer.
func (p *Pool) GetWait(ctx context.Context, n int, q *Quota) (*Buffer, error) {
	b, err := p.GetQuota(n, q)
	if err == nil || !errors.Is(err, ErrPoolExhausted) {
		return b, err
	}
	var w PoolWait
	defer w.Stop()
	for {
		if err := w.Wait(ctx); err != nil {
			return nil, err
		}
		b, err = p.GetQuota(n, q)
		if err == nil || !errors.Is(err, ErrPoolExhausted) {
			return b, err
		}
	}
}

// PoolWait paces the retries of an operation that failed with
// ErrPoolExhausted: each Wait sleeps PoolWaitFirst, then twice as long,
// up to PoolWaitMax. The zero value is ready; Stop releases its timer.
// A PoolWait is used by one goroutine.
type PoolWait struct {
	next  time.Duration
	timer *time.Timer
}

// Wait sleeps the next pause, or until ctx ends (returning ctx.Err()).
func (w *PoolWait) Wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.next = min(max(2*w.next, PoolWaitFirst), PoolWaitMax)
	if w.timer == nil {
		w.timer = time.NewTimer(w.next)
	} else {
		w.timer.Reset(w.next)
	}
	select {
	case <-w.timer.C:
		return nil
	case <-ctx.Done():
		w.timer.Stop()
		return ctx.Err()
	}
}

// Stop releases the timer; the PoolWait can be used again (from the
// first pause).
func (w *PoolWait) Stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.next = 0
}
