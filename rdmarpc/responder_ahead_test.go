package rdmarpc

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// aheadHandler answers the toy READ (engine_helpers_test.go) as a
// cut-through handler does: the item's leading parts of step bytes are
// written ahead with WriteAhead, the rest goes with Reply. tail, if set,
// is an inline tail of that many bytes after the item (too large for the
// inline threshold without a Reply chunk: ERR_CHUNK after the Writes).
type aheadHandler struct {
	t    testing.TB
	pool *Pool
	step int
	tail int
	// claim, if set, is a Written the reply claims without any Write
	// ahead (a handler bug Reply must refuse, not act on).
	claim int

	mu    sync.Mutex
	errs  []error // what WriteAhead returned, in order
	ahead int     // bytes WriteAhead took
	done  int     // calls answered
}

func (h *aheadHandler) ServeCall(c *Call) { go h.serve(c) }

// answered waits until n calls were answered.
func (h *aheadHandler) answered(t testing.TB, n int) {
	t.Helper()
	waitFor(t, 5*time.Second, "the handler's answers", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.done >= n
	})
}

func (h *aheadHandler) serve(c *Call) {
	defer func() {
		h.mu.Lock()
		h.done++
		h.mu.Unlock()
	}()
	flat := make([]byte, c.Msg.Len())
	flat = flat[:c.Msg.Flatten(flat)]
	if len(flat) < 12 || be32(flat, 4) != opRead {
		c.Drop()
		return
	}
	n := int(be32(flat, 8))
	h.mu.Lock()
	pool, tail := h.pool, h.tail
	h.mu.Unlock()
	b, err := pool.Get(n)
	if err != nil {
		h.t.Errorf("pool: %v", err)
		c.Drop()
		return
	}
	pattern(b.Bytes, int(c.XID()))
	written := h.claim
	for off := 0; h.claim == 0 && off+h.step < n; off += h.step {
		err := c.WriteAhead(0, n, off, b.Bytes[off:off+h.step], b)
		h.mu.Lock()
		h.errs = append(h.errs, err)
		h.mu.Unlock()
		if err != nil {
			break
		}
		written = off + h.step
	}
	h.mu.Lock()
	h.ahead += written
	h.mu.Unlock()
	// The reply's item is another copy whose bytes written ahead are
	// zeros: Reply must not write them again (the Writes ahead may still
	// be reading b, which holds the pattern, so it is left alone).
	item := b
	if written > 0 && h.claim == 0 {
		if item, err = pool.Get(n); err != nil {
			h.t.Errorf("pool: %v", err)
			c.Drop()
			return
		}
		copy(item.Bytes, b.Bytes)
		clear(item.Bytes[:written])
		b.Release()
	}
	var m Message
	m.Append(Piece{Data: put32s(c.XID(), uint32(n))})
	m.Append(Piece{Data: item.Bytes, Item: true, Buf: item, Written: written})
	if tail > 0 {
		m.Append(Piece{Data: make([]byte, tail)})
	} else {
		m.Append(Piece{Data: put32s(trailerWord)})
	}
	if err := c.Reply(&m); err != nil {
		h.t.Errorf("reply: %v", err)
	}
}

// set sets the item pool and the tail for the calls to come.
func (h *aheadHandler) set(pool *Pool, tail int) {
	h.mu.Lock()
	h.pool, h.tail = pool, tail
	h.mu.Unlock()
}

func itemPoolOf(h *aheadHandler) *Pool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pool
}

func (h *aheadHandler) results() ([]error, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.errs...), h.ahead
}

// itemPool is a pool of its own for the handler's items, in the engine's
// protection domain, so that InUse shows the items' buffers alone (the
// engine's pool also holds receives and send buffers).
func itemPool(t testing.TB, p *enginePair) *Pool {
	pool, err := NewPool(p.srv.pool.pd, PoolConfig{MaxBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return pool
}

// A READ whose data was written ahead in parts arrives whole, byte for
// byte, and the reply's Write list says the whole item was written; the
// Writes ahead are counted, and every buffer comes back.
func TestWriteAheadRead(t *testing.T) {
	for _, c := range []struct{ n, step int }{
		{1 << 20, 256 << 10}, // 3 parts ahead, the last 256 KiB with the reply
		{1 << 20, 100 << 10}, // parts that do not divide the item
		{9001, 4096},         // an odd length: the pad is the engine's
	} {
		t.Run(fmt.Sprintf("%d-%d", c.n, c.step), func(t *testing.T) {
			h := &aheadHandler{t: t, step: c.step}
			p := newEnginePair(t, pairOpts{handler: h})
			h.set(itemPool(t, p), 0)
			for i := range 3 {
				xid := uint32(0x700 + i)
				r, err := p.call(readCallMsg(xid, c.n), &ReplyPlan{WriteChunks: []int{c.n + padLen(c.n)}})
				if err != nil {
					t.Fatal(err)
				}
				checkRead(t, r, xid, c.n, true)
				r.Release()
			}
			h.answered(t, 3)
			errs, ahead := h.results()
			parts := (c.n - 1) / c.step
			if len(errs) != 3*parts {
				t.Fatalf("%d WriteAhead calls, want %d: %v (%d answered)", len(errs), 3*parts, errs, h.answeredCount())
			}
			for _, err := range errs {
				if err != nil {
					t.Fatalf("WriteAhead: %v", err)
				}
			}
			if want := 3 * parts * c.step; ahead != want || p.rmet.get("written_ahead") != want {
				t.Errorf("written ahead: handler %d, metrics %d, want %d", ahead, p.rmet.get("written_ahead"), want)
			}
			waitFor(t, 2*time.Second, "buffers back", func() bool { return itemPoolOf(h).InUse() == 0 })
		})
	}
}

// WriteAhead refuses, posting nothing, an item the reply would not put
// in a Write chunk: none offered, an empty one, one too small (the reply
// is then ERR_CHUNK before any byte of the item is written).
func TestWriteAheadRefused(t *testing.T) {
	const n = 64 << 10
	for _, c := range []struct {
		name   string
		chunks []int
	}{
		{"no chunk", nil},
		{"empty chunk", []int{0}},
		{"chunk too small", []int{n - 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &aheadHandler{t: t, step: 16 << 10}
			p := newEnginePair(t, pairOpts{handler: h})
			h.set(itemPool(t, p), 0)
			_, err := p.call(readCallMsg(0x31, n), &ReplyPlan{WriteChunks: c.chunks, ReplyChunk: n + 64})
			h.answered(t, 1)
			errs, ahead := h.results()
			if len(errs) != 1 || !errors.Is(errs[0], ErrNotAhead) || ahead != 0 {
				t.Fatalf("WriteAhead returned %v (%d bytes ahead), want ErrNotAhead once", errs, ahead)
			}
			if p.rmet.get("written_ahead") != 0 {
				t.Errorf("%d bytes counted as written ahead", p.rmet.get("written_ahead"))
			}
			var re *RemoteError
			if tooSmall := len(c.chunks) == 1 && c.chunks[0] > 0; tooSmall != (errors.As(err, &re) && re.Code == ErrCodeChunk) {
				t.Fatalf("reply: %v (ERR_CHUNK expected: %v)", err, tooSmall)
			}
			waitFor(t, 2*time.Second, "buffers back", func() bool { return itemPoolOf(h).InUse() == 0 })
		})
	}
}

// A reply found unsendable after parts of its item were written ahead (its
// inline tail fits neither the inline threshold nor a Reply chunk) is
// answered ERR_CHUNK like any other; the connection carries on, and the
// Writes ahead give back their buffer and send-queue slots.
func TestWriteAheadThenErrChunk(t *testing.T) {
	const n = 256 << 10
	h := &aheadHandler{t: t, step: 64 << 10}
	p := newEnginePair(t, pairOpts{handler: h})
	h.set(itemPool(t, p), 8<<10)
	_, err := p.call(readCallMsg(0x41, n), &ReplyPlan{WriteChunks: []int{n}})
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != ErrCodeChunk || re.XID != 0x41 {
		t.Fatalf("got %v, want ERR_CHUNK for xid 0x41", err)
	}
	h.answered(t, 1)
	if _, ahead := h.results(); ahead != 3*(64<<10) {
		t.Fatalf("%d bytes written ahead, want %d", ahead, 3*(64<<10))
	}
	waitFor(t, 2*time.Second, "buffers back", func() bool { return itemPoolOf(h).InUse() == 0 })
	h.set(itemPoolOf(h), 0)
	r, err := p.call(readCallMsg(0x42, n), &ReplyPlan{WriteChunks: []int{n}})
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, r, 0x42, n, true)
	r.Release()
}

// A reply whose item claims bytes written ahead where the reply does not
// put it (no Write chunk for it) is refused with ERR_CHUNK, as a reply
// that cannot be built, rather than sent with a Write list that lies.
func TestWriteAheadClaimRefused(t *testing.T) {
	const n = 64 << 10
	h := &aheadHandler{t: t, step: 16 << 10, claim: 16 << 10}
	p := newEnginePair(t, pairOpts{handler: h})
	h.set(itemPool(t, p), 0)
	_, err := p.call(readCallMsg(0x61, n), &ReplyPlan{ReplyChunk: n + 64})
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != ErrCodeChunk || re.XID != 0x61 {
		t.Fatalf("got %v, want ERR_CHUNK for xid 0x61", err)
	}
	waitFor(t, 2*time.Second, "buffers back", func() bool { return itemPoolOf(h).InUse() == 0 })
}

// appendWrites with skip: the Writes of the parts ahead (no header copy)
// and of the rest (with it) cover every byte of a chunk of several
// segments once, each from its place in the item, at most maxSGE local
// elements a request, and the header's segment lengths are those of the
// whole item.
func TestAppendWritesSkip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := range 500 {
		nseg := 1 + rng.IntN(4)
		room := make(WriteChunk, nseg)
		total := 0
		for k := range room {
			room[k] = Segment{Handle: uint32(k + 1), Length: uint32(1 + rng.IntN(5000)), Offset: uint64(1 << 20 * (k + 1))}
			total += int(room[k].Length)
		}
		n := 1 + rng.IntN(total)
		item := patterned(n, iter)
		// Cut points: the parts ahead, then the rest.
		cuts := []int{0}
		for c := 0; ; {
			c += 1 + rng.IntN(n)
			if c >= n {
				break
			}
			cuts = append(cuts, c)
		}
		maxSGE := 1 + rng.IntN(3)
		chunk := make([][]byte, nseg)
		for k := range room {
			chunk[k] = make([]byte, room[k].Length)
		}
		apply := func(s *sendCtxt) {
			s.link()
			for i := range s.wrs {
				w := &s.wrs[i]
				if len(w.SGL) > maxSGE {
					t.Fatalf("iter %d: %d SGEs, max %d", iter, len(w.SGL), maxSGE)
				}
				k := int(w.RKey - 1)
				at := int(w.RemoteAddr - room[k].Offset)
				for _, g := range w.SGL {
					if at+len(g.Buf) > len(chunk[k]) {
						t.Fatalf("iter %d: Write past segment %d", iter, k)
					}
					at += copy(chunk[k][at:], g.Buf)
				}
			}
		}
		for i, c := range cuts {
			s := new(sendCtxt)
			s.begin()
			end := n
			if i+1 < len(cuts) {
				end = cuts[i+1]
			}
			src := []verbs.SGE{{Buf: item[c:end]}}
			var out WriteChunk
			if i == len(cuts)-1 {
				out = append(WriteChunk(nil), room...)
				for k := range out {
					out[k].Length = 0
				}
			}
			s.appendWrites(src, room, out, c, maxSGE)
			apply(s)
			if out == nil {
				continue
			}
			left := n
			for k := range out {
				if want := min(left, int(room[k].Length)); int(out[k].Length) != want {
					t.Fatalf("iter %d: segment %d returned %d bytes, want %d", iter, k, out[k].Length, want)
				}
				left -= int(out[k].Length)
			}
		}
		var got []byte
		for k := range chunk {
			got = append(got, chunk[k]...)
		}
		if !bytes.Equal(got[:n], item) {
			t.Fatalf("iter %d: chunk differs from the item (%d segments, cuts %v)", iter, nseg, cuts)
		}
	}
}

func (h *aheadHandler) answeredCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.done
}
