package iwarp

import (
	"context"
	"fmt"
	"sync"
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
}

func (d *device) CreateCQ(depth int) (verbs.CQ, error) {
	if depth <= 0 {
		return nil, fmt.Errorf("iwarp: CQ depth %d", depth)
	}
	c := &cq{ring: make([]verbs.WC, min(depth, cqInitialRing)), depth: depth, notify: make(chan struct{}, 1), done: make(chan struct{})}
	c.room = sync.NewCond(&c.mu)
	return c, nil
}

// push appends completions in order, waiting for room as needed. It
// returns false if the CQ was closed (the completions are discarded).
func (c *cq) push(wcs []verbs.WC) bool {
	c.mu.Lock()
	for i := range wcs {
		for c.n == len(c.ring) && !c.closed && !c.grow() {
			c.room.Wait()
		}
		if c.closed {
			c.mu.Unlock()
			return false
		}
		c.ring[(c.head+c.n)%len(c.ring)] = wcs[i]
		c.n++
	}
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
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
