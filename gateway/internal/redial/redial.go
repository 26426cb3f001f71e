// Package redial is the gateway's one reconnect-with-backoff loop: forward
// mode redials the NFS server over TCP (a session's backend connection),
// reverse mode redials the RDMA server (a TCP client's RDMA link). Both
// wait an exponential backoff between dials (backend.reconnect_backoff_*)
// and give up after backend.give_up_after; what differs is said by the
// caller (jitter, whether the first dial waits, what a failure counts).
//
// Files: redial.go (all of it); redial_test.go.
package redial

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Backoff is the wait schedule of a reconnection episode: Initial doubled
// per failure, capped at Max. With Jitter each wait is drawn from the
// upper half of that ("equal jitter"), so that the connections of many
// clients do not redial in step. The zero failure count starts an
// episode; Reset starts a new one.
type Backoff struct {
	Initial, Max time.Duration
	Jitter       bool
	failures     int
}

// Next is the wait before the next dial; it counts one more failure.
func (b *Backoff) Next() time.Duration {
	d := b.Max
	if b.failures < 32 {
		d = min(b.Initial<<b.failures, b.Max)
	}
	b.failures++
	if !b.Jitter {
		return d
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// Reset starts a new episode: the next wait is Initial again.
func (b *Backoff) Reset() { b.failures = 0 }

// Plan says how Dial goes about it.
type Plan struct {
	Backoff *Backoff
	// Immediate: the first dial does not wait (later ones do).
	Immediate bool
	// Deadline: no dial starts after it; Dial gives up (*GaveUpError).
	Deadline time.Time
	// Stop, if not nil, ends the waits between dials (ErrStopped).
	Stop <-chan struct{}
	// Failed, if not nil, hears of each failed dial: its attempt number
	// (from 1), the wait before the next one (bounded by the deadline)
	// and the error.
	Failed func(attempt int, next time.Duration, err error)
}

// ErrStopped: Plan.Stop closed while Dial waited.
var ErrStopped = errors.New("redial: stopped")

// GaveUpError: the deadline passed without a successful dial.
type GaveUpError struct {
	Dials int   // dials made
	Err   error // the last dial's error (nil if none was made)
}

func (e *GaveUpError) Error() string {
	return fmt.Sprintf("redial: gave up after %d dials: %v", e.Dials, e.Err)
}

func (e *GaveUpError) Unwrap() error { return e.Err }

// Dial calls dial, waiting p.Backoff.Next() before each call (but the
// first when p.Immediate), until a call succeeds; it returns the
// connection and the number of dials made. It returns early with
// ctx.Err() when ctx ends, ErrStopped when p.Stop closes, or a
// *GaveUpError once p.Deadline has passed (a wait is cut short at it,
// and one last dial made).
func Dial[C any](ctx context.Context, p Plan, dial func(context.Context) (C, error)) (C, int, error) {
	var zero C
	var wait time.Duration
	if !p.Immediate {
		wait = p.Backoff.Next()
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var last error
	for attempt := 1; ; attempt++ {
		left := time.Until(p.Deadline)
		if left <= 0 {
			return zero, attempt - 1, &GaveUpError{Dials: attempt - 1, Err: last}
		}
		if wait > 0 {
			timer.Reset(min(wait, left))
			select {
			case <-timer.C:
			case <-ctx.Done():
				return zero, attempt - 1, ctx.Err()
			case <-p.Stop:
				return zero, attempt - 1, ErrStopped
			}
		}
		c, err := dial(ctx)
		if err == nil {
			return c, attempt, nil
		}
		if ctx.Err() != nil {
			return zero, attempt, ctx.Err()
		}
		last = err
		wait = p.Backoff.Next()
		if p.Failed != nil {
			p.Failed(attempt, min(wait, max(time.Until(p.Deadline), 0)), err)
		}
	}
}
