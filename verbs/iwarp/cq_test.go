package iwarp

import (
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// TestCQGrowsToDepth: a CQ starts with a small ring and grows as
// completions arrive unpolled, keeping their order across the growth
// (also when the ring has wrapped), holding exactly depth before a
// producer waits, and the waiting producer goes on once one is polled.
func TestCQGrowsToDepth(t *testing.T) {
	const depth = 3*cqInitialRing + 5 // not a power of two: the last growth stops at depth
	d := &device{}
	q, err := d.CreateCQ(depth)
	if err != nil {
		t.Fatal(err)
	}
	c := q.(*cq)
	defer c.Close()
	if len(c.ring) != cqInitialRing {
		t.Fatalf("ring starts at %d entries, want %d", len(c.ring), cqInitialRing)
	}
	// Wrap the small ring first: push and poll half of it.
	next, polled := uint64(0), uint64(0)
	push := func(n int) {
		for range n {
			if !c.push1(&verbs.WC{ID: next}) {
				t.Fatal("push on an open CQ failed")
			}
			next++
		}
	}
	wcs := make([]verbs.WC, depth+1)
	poll := func(max int) int {
		k := c.Poll(wcs[:max])
		for _, wc := range wcs[:k] {
			if wc.ID != polled {
				t.Fatalf("polled ID %d, want %d (order lost)", wc.ID, polled)
			}
			polled++
		}
		return k
	}
	push(cqInitialRing / 2)
	poll(cqInitialRing / 2)
	push(depth) // grows 32 -> 64 -> 101 on the way, from a wrapped head
	if len(c.ring) != depth {
		t.Fatalf("ring is %d entries holding %d, want %d", len(c.ring), c.n, depth)
	}
	pushed := make(chan struct{})
	go func() { push(1); close(pushed) }()
	select {
	case <-pushed:
		t.Fatal("a push into a CQ holding depth completions did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	if k := poll(1); k != 1 {
		t.Fatalf("polled %d", k)
	}
	<-pushed
	if k := poll(depth + 1); k != depth {
		t.Fatalf("polled %d after the waiting push, want %d", k, depth)
	}
	if len(c.ring) != depth {
		t.Fatalf("ring shrank to %d", len(c.ring))
	}
}

// TestCQTryPushAllOrNone: tryPush grows the ring for what it adds, adds
// none of a batch the ring at depth has no room for, and discards into a
// closed CQ without failing; unpolled (read without the CQ's lock) follows
// every change.
func TestCQTryPushAllOrNone(t *testing.T) {
	const depth = cqInitialRing + 3
	q, err := (&device{}).CreateCQ(depth)
	if err != nil {
		t.Fatal(err)
	}
	c := q.(*cq)
	defer c.Close()
	if c.unpolled() {
		t.Fatal("a new CQ has completions unpolled")
	}
	wcs := make([]verbs.WC, depth+1)
	for i := range wcs {
		wcs[i].ID = uint64(i)
	}
	if !c.tryPush(wcs[:depth-2]) || !c.unpolled() {
		t.Fatal("tryPush beyond the initial ring, with room at depth, failed or left nothing unpolled")
	}
	if c.tryPush(wcs[depth-2:]) { // 3 completions, room for 2
		t.Fatal("tryPush of more than the room left at depth succeeded")
	}
	got := make([]verbs.WC, depth+1)
	k := c.Poll(got)
	if k != depth-2 {
		t.Fatalf("polled %d, want %d (a failed tryPush added some)", k, depth-2)
	}
	for i, wc := range got[:k] {
		if wc.ID != uint64(i) {
			t.Fatalf("polled ID %d at %d", wc.ID, i)
		}
	}
	if c.unpolled() {
		t.Fatal("unpolled after polling everything")
	}
	c.Close()
	if !c.tryPush(wcs[:1]) || c.unpolled() {
		t.Fatal("tryPush into a closed CQ failed, or added")
	}
}
