package iwarp

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/rdmagw/rdmagw/verbs"
)

// sqChunks counts the send queue's chunks: attached to the ring and
// spare. It fails the test if one chunk serves two places.
func sqChunks(t *testing.T, c *conn) (attached, spare int) {
	t.Helper()
	seen := map[*sqChunk]bool{}
	for _, ch := range c.sq {
		if ch != nil {
			if seen[ch] {
				t.Fatal("a chunk is attached at two places of the ring")
			}
			seen[ch] = true
			attached++
		}
	}
	for ch := c.sqSpare; ch != nil; ch = ch.next {
		if seen[ch] {
			t.Fatal("a chunk is both attached and spare")
		}
		seen[ch] = true
		spare++
	}
	return attached, spare
}

// A connection that carries many times its send queue's depth with two
// requests in flight holds the chunks those span, not the whole ring
// (rdmarpc's 560 slots: 35 chunks, about 78 KB, kept for good before).
func TestSendQueueHoldsWhatIsInFlight(t *testing.T) {
	const depth, window, size = 560, 2, 64
	p := New(benchCfg)
	cli, srv := newSide(t, p), newSide(t, p)
	cli.sqWR = depth
	connectSides(t, cli, srv, "")
	wrs, local, remote := windowWRsMem(t, cli, srv, verbs.OpRDMAWrite, size, window)
	c := cli.conn.(*conn)
	const total = 3 * depth
	runWindow(t, cli, wrs, make([]verbs.WC, window), total, func(posted int, w *verbs.SendWR) {
		for j := range w.SGL[0].Buf {
			w.SGL[0].Buf[j] = byte(posted + j)
		}
	})
	// The last window's bytes landed where they were sent.
	if !bytes.Equal(remote.Bytes()[:size*window], local.Bytes()[:size*window]) {
		t.Fatal("written bytes differ from the source")
	}
	c.mu.Lock()
	attached, spare := sqChunks(t, c)
	c.mu.Unlock()
	// Two in flight span at most two chunks; one more may wait as spare.
	if attached+spare > 3 {
		t.Fatalf("after %d Writes, %d in flight: %d chunks attached, %d spare of a %d-chunk ring; want at most 3 in all",
			total, window, attached, spare, len(c.sq))
	}
}

// The ring's chunks under random load, with tx letting go of entries
// (sqReleased) behind or ahead of their retirement: entries of live
// sequence numbers keep what was posted into them while chunks are
// detached and attached elsewhere, also when the tail wraps into a chunk
// not yet recycled; retired entries tx still holds keep theirs too (the
// ownership rule in qp.go, which -race alone would otherwise guard); no
// chunk serves two places; and once the load is shallow again the chunks
// made stay what they were.
func TestSendQueueChunksUnderRandomLoad(t *testing.T) {
	for _, depth := range []uint64{7, 16, 40, 560} {
		c := &conn{sqDepth: depth, sq: make([]*sqChunk, (depth+sqChunkLen-1)/sqChunkLen)}
		rng := rand.New(rand.NewPCG(depth, 1))
		made := 0
		for step := 0; step < 20000; step++ {
			// Phases: mostly shallow, sometimes up to a full queue.
			limit := uint64(2)
			if step/2000%2 == 1 {
				limit = depth
			}
			for k := rng.IntN(4); k > 0 && c.sqTail-c.sqHead < limit; k-- {
				seq := c.sqTail
				i := seq % depth
				if c.sq[i/sqChunkLen] == nil && c.sqSpare == nil {
					made++
				}
				e, sgl := c.sqSlot(seq, 1+int(seq%3))
				*e = sqEntry{id: seq, sgl: sgl}
				for j := range sgl {
					sgl[j].LKey = uint32(seq)
				}
				c.sqTail++
			}
			for s := c.sqHead; s < c.sqTail; s++ {
				e := c.sqAt(s)
				if e.id != s || len(e.sgl) != 1+int(s%3) || e.sgl[0].LKey != uint32(s) {
					t.Fatalf("depth %d step %d: entry %d holds id %d (%d SGEs); head %d tail %d",
						depth, step, s, e.id, len(e.sgl), c.sqHead, c.sqTail)
				}
			}
			// Retired entries tx has not let go of (it may still read its
			// round without c.mu) keep their place and their request,
			// unless a post has wrapped into their slot since.
			for s := max(c.sqReleased, c.sqTail-min(c.sqTail, depth)); s < c.sqHead; s++ {
				i := s % depth
				if ch := c.sq[i/sqChunkLen]; ch == nil || ch.e[i%sqChunkLen].id != s {
					t.Fatalf("depth %d step %d: entry %d, retired but not released by tx (released below %d), lost its chunk or its request",
						depth, step, s, c.sqReleased)
				}
			}
			// tx lets go of the entries it wrote, at its own pace.
			if c.sqReleased < c.sqTail && rng.IntN(2) == 0 {
				c.sqReleased += 1 + uint64(rng.IntN(int(c.sqTail-c.sqReleased)))
				c.sqRecycle()
			}
			for k := rng.IntN(4); k > 0 && c.sqHead < c.sqTail; k-- {
				c.sqAt(c.sqHead + uint64(rng.IntN(int(c.sqTail-c.sqHead)))).done = true
				c.retireLocked()
			}
			attached, spare := sqChunks(t, c)
			if attached+spare != made {
				t.Fatalf("depth %d: %d chunks made, %d attached and %d spare", depth, made, attached, spare)
			}
		}
		// Shallow again after a full queue: nothing more is made.
		before := made
		for range 4 * depth {
			e, sgl := c.sqSlot(c.sqTail, 1)
			*e = sqEntry{id: c.sqTail, sgl: sgl, done: true}
			c.sqTail++
			c.sqReleased = c.sqTail
			c.retireLocked()
		}
		if attached, spare := sqChunks(t, c); attached+spare != before || attached > 1 {
			t.Fatalf("depth %d: one at a time after the full phase: %d attached, %d spare; want %d in all, at most 1 attached",
				depth, attached, spare, before)
		}
	}
}
