package iwarp

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rdmagw/rdmagw/verbs"
)

// cq is a completion queue: a ring of WCs that holds up to depth.
// Producers (connection goroutines) wait for room when it is full, so no
// completion is ever dropped; Wait parks the consumer on a one-slot
// notification channel. The ring starts small and doubles when a push
// finds it full (grow), up to depth, and never shrinks: a CQ sized for
// every credit but mostly near empty (rdmarpc's 712 entries per
// connection) holds only what it has needed.
type cq struct {
	mu     sync.Mutex
	room   *sync.Cond
	ring   []verbs.WC
	depth  int
	head   int
	n      int
	notify chan struct{}
	done   chan struct{}
	closed bool

	// count is n, stored under mu wherever n changes, so that unpolled
	// (on PostSend's path) reads it without taking mu.
	count atomic.Int64

	// direct is the consumer SetDirect installed (verbs.DirectCQ);
	// owed says completions were added by pushLater and nobody has
	// settled them yet.
	direct atomic.Pointer[func() bool]
	owed   atomic.Bool
	// settles: the direct consumer settles after its own posts
	// (verbs.PostSettledCQ), so tryPush leaves its wake-up owed.
	settles atomic.Bool
}

func (d *device) CreateCQ(depth int) (verbs.CQ, error) {
	if depth <= 0 {
		return nil, fmt.Errorf("iwarp: CQ depth %d", depth)
	}
	c := &cq{ring: make([]verbs.WC, min(depth, cqInitialRing)), depth: depth, notify: make(chan struct{}, 1), done: make(chan struct{})}
	c.room = sync.NewCond(&c.mu)
	return c, nil
}

// push appends completions in order, waiting for room as needed, and
// wakes Wait. It returns false if the CQ was closed (the completions are
// discarded).
func (c *cq) push(wcs []verbs.WC) bool {
	if !c.add(wcs) {
		return false
	}
	c.wake()
	return true
}

// pushLater is push for a provider goroutine that calls settle at its
// next safe point (no lock of its own held, not inside a Post*): with a
// direct consumer installed the wake-up is left to settle, which runs
// the consumer on that goroutine instead (one per batch of completions).
func (c *cq) pushLater(wcs []verbs.WC) bool {
	if c.direct.Load() == nil {
		return c.push(wcs)
	}
	if !c.add(wcs) {
		return false
	}
	c.owed.Store(true)
	return true
}

// settle runs the direct consumer for completions pushLater added, or
// wakes Wait if it declines (or was removed meanwhile).
func (c *cq) settle() {
	if !c.owed.Load() || !c.owed.Swap(false) {
		return
	}
	if f := c.direct.Load(); f == nil || !(*f)() {
		c.wake()
	}
}

// directOwed reports whether settle would run a direct consumer now.
func (c *cq) directOwed() bool { return c.owed.Load() && c.direct.Load() != nil }

// SetDirect installs the consumer settle runs (verbs.DirectCQ).
func (c *cq) SetDirect(consume func() bool) {
	if consume == nil {
		c.direct.Store(nil)
		c.settle() // nobody may be left owed a wake-up
		return
	}
	c.direct.Store(&consume)
}

// SettlePosts records the consumer's promise to Settle after its posts
// (verbs.PostSettledCQ).
func (c *cq) SettlePosts(on bool) {
	c.settles.Store(on)
	if !on {
		c.settle() // nobody may be left owed a wake-up
	}
}

// Settle runs the direct consumer for completions left owed, or wakes
// Wait if it declines or consume is false (verbs.PostSettledCQ).
func (c *cq) Settle(consume bool) {
	if consume {
		c.settle()
	} else if c.owed.Load() && c.owed.Swap(false) {
		c.wake()
	}
}

func (c *cq) wake() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// unpolled reports whether completions wait for the consumer. It takes
// no lock: PostSend asks it on every post (conn.mayInline).
func (c *cq) unpolled() bool { return c.count.Load() > 0 }

// tryPush is push for a caller that must not wait (PostSend writing
// inline): it adds all of wcs and wakes Wait, or, if the ring has no room
// for all of them, adds none and returns false. With a direct consumer
// that settles after its posts (SettlePosts) the wake-up is owed
// instead: the poster's Settle runs the consumer on its own goroutine
// (or the rx or tx goroutine's next settle does), so a reply's
// completion does not wake a goroutine parked in Wait on another core.
func (c *cq) tryPush(wcs []verbs.WC) bool {
	c.mu.Lock()
	ok := c.putLocked(wcs, false) || c.closed // closed: discarded, as push does
	c.mu.Unlock()
	if !ok {
		return false
	}
	if c.settles.Load() && c.direct.Load() != nil {
		c.owed.Store(true)
	} else {
		c.wake()
	}
	return true
}

// add appends completions in order, waiting for room as needed (after
// waking the consumer, whose wake-up a pushLater may still owe); false if
// the CQ was closed.
func (c *cq) add(wcs []verbs.WC) bool {
	c.mu.Lock()
	ok := c.putLocked(wcs, true)
	c.mu.Unlock()
	return ok
}

// putLocked appends wcs to the ring in order, growing it up to depth as
// needed: the one implementation of add and tryPush. With wait, each
// completion that finds the ring full at depth wakes the consumer and
// waits for room; without, putLocked adds none of wcs unless all fit,
// and returns false. It returns false if the CQ is closed (what is left
// of wcs is discarded). Caller holds c.mu.
func (c *cq) putLocked(wcs []verbs.WC, wait bool) bool {
	for !wait && !c.closed && c.n+len(wcs) > len(c.ring) {
		if !c.grow() {
			return false
		}
	}
	for i := range wcs {
		for c.n == len(c.ring) && !c.closed && !c.grow() {
			c.count.Store(int64(c.n))
			c.wake()
			c.room.Wait()
		}
		if c.closed {
			c.count.Store(int64(c.n))
			return false
		}
		c.ring[(c.head+c.n)%len(c.ring)] = wcs[i]
		c.n++
	}
	c.count.Store(int64(c.n))
	return true
}

// cqInitialRing is the ring a CQ starts with.
const cqInitialRing = 32

// grow doubles a full ring, up to depth, keeping the completions in
// order; false if it is at depth already. Caller holds c.mu.
func (c *cq) grow() bool {
	if len(c.ring) >= c.depth {
		return false
	}
	r := make([]verbs.WC, min(2*len(c.ring), c.depth))
	for i := range c.n {
		r[i] = c.ring[(c.head+i)%len(c.ring)]
	}
	c.ring, c.head = r, 0
	return true
}

func (c *cq) push1(wc *verbs.WC) bool { return c.push(unsafe.Slice(wc, 1)) }

func (c *cq) Poll(wcs []verbs.WC) int {
	c.mu.Lock()
	k := 0
	for k < len(wcs) && c.n > 0 {
		wcs[k] = c.ring[c.head]
		c.ring[c.head] = verbs.WC{}
		c.head = (c.head + 1) % len(c.ring)
		c.n--
		k++
	}
	if k > 0 {
		c.count.Store(int64(c.n))
		c.room.Broadcast()
	}
	c.mu.Unlock()
	return k
}

func (c *cq) Wait(ctx context.Context) error {
	for {
		c.mu.Lock()
		n, closed := c.n, c.closed
		c.mu.Unlock()
		if n > 0 {
			return nil
		}
		if closed {
			return verbs.ErrClosed
		}
		select {
		case <-c.notify:
		case <-c.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *cq) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.done)
		c.room.Broadcast()
	}
	c.mu.Unlock()
	return nil
}
