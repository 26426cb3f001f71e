package redial

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The waits double from Initial up to Max; with jitter each lies in the
// upper half of its unjittered value; Reset starts over.
func TestBackoff(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, ms := range want {
		if got := b.Next(); got != ms*time.Millisecond {
			t.Fatalf("wait %d: %v, want %v", i, got, ms*time.Millisecond)
		}
	}
	b.Reset()
	if got := b.Next(); got != 100*time.Millisecond {
		t.Fatalf("after Reset: %v", got)
	}
	j := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Jitter: true}
	for i, ms := range want {
		d := ms * time.Millisecond
		if got := j.Next(); got < d/2 || got > d {
			t.Fatalf("jittered wait %d: %v, want within [%v, %v]", i, got, d/2, d)
		}
	}
	for range 100 { // far past the shift's range
		j.Next()
	}
	if got := j.Next(); got < 500*time.Millisecond || got > time.Second {
		t.Fatalf("late wait %v", got)
	}
}

var errRefused = errors.New("refused")

// Dial redials until a dial succeeds, telling Failed of each failure;
// Immediate decides whether the first dial waits.
func TestDialSucceeds(t *testing.T) {
	for _, immediate := range []bool{true, false} {
		calls, failed := 0, 0
		bo := &Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond}
		c, n, err := Dial(context.Background(), Plan{Backoff: bo, Immediate: immediate, Deadline: time.Now().Add(time.Hour),
			Failed: func(attempt int, next time.Duration, err error) {
				failed++
				if attempt != failed || next <= 0 || !errors.Is(err, errRefused) {
					t.Errorf("Failed(%d, %v, %v) after %d failures", attempt, next, err, failed-1)
				}
			}}, func(context.Context) (string, error) {
			if calls++; calls < 3 {
				return "", errRefused
			}
			return "conn", nil
		})
		if err != nil || c != "conn" || n != 3 || failed != 2 {
			t.Fatalf("immediate %v: %q, %d dials, %v, %d failures; want conn after 3 dials", immediate, c, n, err, failed)
		}
		// The waits drawn: one per failure, plus the first unless immediate.
		want := 2
		if !immediate {
			want = 3
		}
		if bo.failures != want {
			t.Fatalf("immediate %v: %d waits drawn, want %d", immediate, bo.failures, want)
		}
	}
}

// Past the deadline Dial gives up with the last dial's error; an ended
// context or a closed Stop ends it too.
func TestDialEnds(t *testing.T) {
	refuse := func(context.Context) (int, error) { return 0, errRefused }
	bo := &Backoff{Initial: time.Millisecond, Max: time.Millisecond}
	_, n, err := Dial(context.Background(), Plan{Backoff: bo, Immediate: true, Deadline: time.Now().Add(20 * time.Millisecond)}, refuse)
	var gu *GaveUpError
	if !errors.As(err, &gu) || gu.Dials != n || n < 1 || !errors.Is(err, errRefused) {
		t.Fatalf("past the deadline: %d dials, %v; want a GaveUpError wrapping the dial error", n, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Dial(ctx, Plan{Backoff: bo, Deadline: time.Now().Add(time.Hour)}, refuse); !errors.Is(err, context.Canceled) {
		t.Fatalf("ended context: %v", err)
	}
	stop := make(chan struct{})
	close(stop)
	slow := &Backoff{Initial: time.Hour, Max: time.Hour}
	if _, _, err := Dial(context.Background(), Plan{Backoff: slow, Deadline: time.Now().Add(2 * time.Hour), Stop: stop}, refuse); !errors.Is(err, ErrStopped) {
		t.Fatalf("closed Stop: %v", err)
	}
}
