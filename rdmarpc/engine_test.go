package rdmarpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Requester <-> responder over the pure-Go iWARP provider on loopback.

var engineSizes = []int{0, 1, 4095, 4097, 1<<20 + 3}

func TestEngineWriteThroughReadChunks(t *testing.T) {
	p := newEnginePair(t, pairOpts{})
	for i, n := range engineSizes {
		for _, registered := range []bool{true, false} {
			t.Run(fmt.Sprintf("%d/registered=%v", n, registered), func(t *testing.T) {
				xid := uint32(0x100 + 2*i)
				pool := p.cli.pool
				if !registered {
					pool, xid = nil, xid+1
				}
				msg := writeCallMsg(t, pool, xid, n)
				defer msg.ReleaseBuffers()
				r, err := p.call(msg, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Release()
				if !bytes.Equal(r.Inline, put32s(xid, 0, sum32(patterned(n, int(xid))))) {
					t.Fatalf("reply % x", r.Inline)
				}
			})
		}
	}
	// Which paths were taken: small calls inline, the rest by Read chunk.
	if p.rmet.get("call_inline") == 0 || p.rmet.get("call_read_chunk") == 0 {
		t.Errorf("paths: %v", p.rmet.n)
	}
}

func TestEngineReadThroughWriteChunks(t *testing.T) {
	p := newEnginePair(t, pairOpts{})
	for i, n := range engineSizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			xid := uint32(0x200 + i)
			r, err := p.call(readCallMsg(xid, n), &ReplyPlan{WriteChunks: []int{n + padLen(n)}})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			// A 0-byte item has a chunk with no room: it goes inline.
			checkRead(t, r, xid, n, n > 0)
		})
	}
}

// With no Write chunk offered, READ data comes inline when it fits and
// through the Reply chunk when it does not; with neither, ERR_CHUNK.
func TestEngineReplyChunk(t *testing.T) {
	p := newEnginePair(t, pairOpts{})
	r, err := p.call(readCallMsg(1, 100), &ReplyPlan{})
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, r, 1, 100, false)
	if r.Kind != ReplyInline {
		t.Errorf("kind %v", r.Kind)
	}
	r.Release()

	for _, n := range []int{4097, 70000, 1 << 20} {
		r, err := p.call(readCallMsg(uint32(n), n), &ReplyPlan{ReplyChunk: n + 64})
		if err != nil {
			t.Fatal(err)
		}
		checkRead(t, r, uint32(n), n, false)
		if r.Kind != ReplyReplyChunk {
			t.Errorf("%d: kind %v", n, r.Kind)
		}
		r.Release()
	}
	// BIG: a reply of unregistered (heap) bytes through the Reply chunk.
	big := uint32(0xb16)
	r, err = p.call(&Message{XID: big, Pieces: []Piece{{Data: put32s(big, opBig, 9000)}}}, &ReplyPlan{ReplyChunk: 9100})
	if err != nil {
		t.Fatal(err)
	}
	if want := append(put32s(big, 9000), patterned(9000, int(big))...); !bytes.Equal(r.Inline, want) || r.Kind != ReplyReplyChunk {
		t.Fatalf("BIG reply: %d bytes, kind %v", len(r.Inline), r.Kind)
	}
	r.Release()

	// Too big for inline, no Reply chunk: ERR_CHUNK, connection survives.
	_, err = p.call(readCallMsg(7, 5000), &ReplyPlan{})
	if !errors.Is(err, ErrRemoteChunk) {
		t.Fatalf("no Reply chunk: %v", err)
	}
	// Reply chunk too small.
	_, err = p.call(readCallMsg(8, 5000), &ReplyPlan{ReplyChunk: 4000})
	if !errors.Is(err, ErrRemoteChunk) {
		t.Fatalf("small Reply chunk: %v", err)
	}
	r, err = p.call(readCallMsg(9, 10), nil)
	if err != nil {
		t.Fatalf("after ERR_CHUNK: %v", err)
	}
	checkRead(t, r, 9, 10, false)
	r.Release()
}

// Calls whose inline part exceeds the inline threshold go as Long calls,
// alone or with a data Read chunk.
func TestEngineLongCall(t *testing.T) {
	p := newEnginePair(t, pairOpts{})
	p.h.writeHook = func([]byte) {}
	for _, c := range []struct {
		pad, item int
	}{{8000, 0}, {8000, 100000}, {60000, 5}, {5000, 1<<20 + 3}} {
		t.Run(fmt.Sprintf("pad%d/item%d", c.pad, c.item), func(t *testing.T) {
			xid := uint32(c.pad + c.item)
			// An ECHO carrying a large inline blob and an item: the
			// reply is the call itself, which the test compares.
			msg := &Message{XID: xid}
			head := append(put32s(xid, opEcho), patterned(c.pad, 3)...)
			msg.Append(Piece{Data: head})
			var b *Buffer
			if c.item > 0 {
				var err error
				if b, err = p.cli.pool.Get(c.item); err != nil {
					t.Fatal(err)
				}
				pattern(b.Bytes, 5)
				msg.Append(Piece{Data: b.Bytes, Item: true, Buf: b})
				defer b.Release()
			}
			msg.Append(Piece{Data: put32s(trailerWord)})
			want := make([]byte, msg.Len())
			msg.Flatten(want)
			plan := &ReplyPlan{ReplyChunk: len(want) - c.item + 64}
			if c.item > 0 {
				plan.WriteChunks = []int{c.item}
			}
			r, err := p.call(msg, plan)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			// Splice the Write chunk back to compare the whole stream.
			got := r.Inline
			if c.item > 0 {
				if len(r.Chunks) != 1 || !bytes.Equal(r.Chunks[0], b.Bytes) {
					t.Fatalf("echoed item differs")
				}
				got = append(append(append([]byte(nil), r.Inline[:len(head)]...), r.Chunks[0]...), make([]byte, padLen(c.item))...)
				got = append(got, r.Inline[len(head):]...)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("echo of %d bytes came back as %d differing bytes", len(want), len(got))
			}
		})
	}
	if p.qmet.get("sent_long") != 4 || p.rmet.get("call_long") != 4 {
		t.Errorf("Long calls: sent %d received %d", p.qmet.get("sent_long"), p.rmet.get("call_long"))
	}
}

func TestEngineWriteChunkTooSmall(t *testing.T) {
	p := newEnginePair(t, pairOpts{})
	_, err := p.call(readCallMsg(0x51, 9000), &ReplyPlan{WriteChunks: []int{8000}})
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != ErrCodeChunk || re.XID != 0x51 || !errors.Is(err, ErrRemoteChunk) {
		t.Fatalf("got %v, want ERR_CHUNK for xid 0x51", err)
	}
	waitFor(t, 2*time.Second, "ERR_CHUNK counted", func() bool { return p.rmet.get("error_ERR_CHUNK") == 1 })
	r, err := p.call(readCallMsg(0x52, 9000), &ReplyPlan{WriteChunks: []int{9000}})
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, r, 0x52, 9000, true)
	r.Release()
}

// RFC 8267 §6.4.1 pairing: the k-th item goes into the k-th Write chunk;
// an empty chunk or no chunk sends it inline; a chunk without an item
// comes back with length zero.
func TestEnginePairing(t *testing.T) {
	p := newEnginePair(t, pairOpts{})
	two := func(xid uint32, a, b int) *Message {
		return &Message{XID: xid, Pieces: []Piece{{Data: put32s(xid, opTwo, uint32(a), uint32(b))}}}
	}
	inline := func(n, seed int) []byte {
		return append(patterned(n, seed), make([]byte, padLen(n))...)
	}
	cases := []struct {
		name       string
		plan       ReplyPlan
		a, b       int
		wantChunks [][]byte
		wantInline []byte
	}{
		{"two chunks", ReplyPlan{WriteChunks: []int{100, 100}}, 10, 30,
			[][]byte{patterned(10, 1), patterned(30, 2)}, nil},
		{"one chunk: second item inline", ReplyPlan{WriteChunks: []int{100}}, 10, 30,
			[][]byte{patterned(10, 1)}, inline(30, 2)},
		{"empty first chunk: first item inline", ReplyPlan{WriteChunks: []int{0, 100}}, 11, 30,
			[][]byte{nil, patterned(30, 2)}, inline(11, 1)},
		{"no chunks: both inline", ReplyPlan{}, 5, 6, nil, append(inline(5, 1), inline(6, 2)...)},
		{"third chunk unused", ReplyPlan{WriteChunks: []int{100, 100, 100}}, 1, 2,
			[][]byte{patterned(1, 1), patterned(2, 2), {}}, nil},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			xid := uint32(0x700 + i)
			r, err := p.call(two(xid, c.a, c.b), &c.plan)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			want := append(put32s(xid), c.wantInline...)
			want = append(want, put32s(trailerWord)...)
			if !bytes.Equal(r.Inline, want) {
				t.Errorf("inline % x, want % x", r.Inline, want)
			}
			if len(r.Chunks) != len(c.wantChunks) {
				t.Fatalf("%d chunks, want %d", len(r.Chunks), len(c.wantChunks))
			}
			for k := range c.wantChunks {
				if !bytes.Equal(r.Chunks[k], c.wantChunks[k]) {
					t.Errorf("chunk %d: % x, want % x", k, r.Chunks[k], c.wantChunks[k])
				}
			}
		})
	}
}

// The requester starts with one credit and learns the grant from replies:
// never more calls in flight than granted.
func TestEngineCredits(t *testing.T) {
	p := newEnginePair(t, pairOpts{rcfg: ResponderConfig{Credits: 3}, qcfg: RequesterConfig{Credits: 8}})
	if g := p.req.Granted(); g != 1 {
		t.Fatalf("initial grant %d, want 1", g)
	}
	r, err := p.call(readCallMsg(1, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	if g := p.req.Granted(); g != 3 {
		t.Fatalf("grant %d after the first reply, want min(3, 8)", g)
	}
	// Six callers hold their calls at the handler: three get through.
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var r Result
			m := &Message{XID: uint32(100 + i), Pieces: []Piece{{Data: put32s(uint32(100+i), opHold)}}}
			if err := p.req.Call(ctx, m, nil, &r); err != nil {
				errs <- err
				return
			}
			r.Release()
		}()
	}
	waitFor(t, 5*time.Second, "3 held calls", func() bool {
		p.h.mu.Lock()
		defer p.h.mu.Unlock()
		return len(p.h.held) == 3
	})
	time.Sleep(50 * time.Millisecond)
	if n := p.resp.Outstanding(); n != 3 {
		t.Fatalf("%d calls at the responder, grant is 3", n)
	}
	// A caller bounded by its context gives up while waiting for credit.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	var r2 Result
	err = p.req.Call(ctx, readCallMsg(999, 1), nil, &r2)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting caller: %v", err)
	}
	for done := 0; done < 6; {
		done += p.h.releaseHeld(false)
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if p.rmet.get("drop_credit_overrun") != 0 {
		t.Errorf("the requester overran its credits")
	}
	if p.h.maxOut > 3 {
		t.Errorf("%d calls reached the handler at once", p.h.maxOut)
	}
}

func TestEngineConcurrency(t *testing.T) {
	p := newEnginePair(t, pairOpts{workers: 8})
	const goroutines, perG = 64, 40
	var wg sync.WaitGroup
	var failed atomic.Int32
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				xid := uint32(g<<16 | i)
				n := []int{0, 1, 100, 4095, 4097, 70000}[(g+i)%6]
				var r *Result
				var err error
				if (g+i)%2 == 0 {
					msg := writeCallMsg(t, p.cli.pool, xid, n)
					r, err = p.call(msg, nil)
					msg.ReleaseBuffers()
					if err == nil && !bytes.Equal(r.Inline, put32s(xid, 0, sum32(patterned(n, int(xid))))) {
						err = fmt.Errorf("WRITE %d: reply % x", n, r.Inline)
					}
				} else {
					r, err = p.call(readCallMsg(xid, n), &ReplyPlan{WriteChunks: []int{n}})
					if err == nil && n > 0 && !bytes.Equal(r.Chunks[0], patterned(n, int(xid))) {
						err = fmt.Errorf("READ %d: data differs", n)
					}
				}
				if err != nil {
					if failed.Add(1) < 5 {
						t.Errorf("%v (requester: %v; responder: %v)", err, p.req.Err(), p.resp.Err())
					}
					return
				}
				r.Release()
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		return
	}
	if g := p.req.Granted(); g != 128 {
		t.Errorf("grant %d", g)
	}
	waitFor(t, 5*time.Second, "pools idle", func() bool {
		return p.cli.pool.InUse() == p.idleClient() && p.srv.pool.InUse() == p.idleServer()
	})
}

// idleServer / idleClient: what a connection holds at rest (receives,
// and send buffers it keeps), so leaks above it show.
func (p *enginePair) idleServer() int64 {
	n := int64(0)
	if c := p.resp; c != nil {
		c.recvMu.Lock()
		for i := range c.recvs {
			if b := c.recvs[i].buf; b != nil {
				n += int64(cap(b.Bytes))
			}
		}
		c.recvMu.Unlock()
		c.sendMu.Lock()
		for _, s := range c.sendFree {
			if b := s.buf; b != nil {
				n += int64(cap(b.Bytes))
			}
		}
		c.sendMu.Unlock()
	}
	return n
}

func (p *enginePair) idleClient() int64 {
	n := int64(0)
	if p.req != nil {
		p.req.mu.Lock()
		defer p.req.mu.Unlock()
		for i := range p.req.recvs {
			if b := p.req.recvs[i].buf; b != nil {
				n += int64(cap(b.Bytes))
			}
		}
		for i := range p.req.reqs {
			if b := p.req.reqs[i].sendBuf; b != nil {
				n += int64(cap(b.Bytes))
			}
		}
	}
	return n
}

// A disconnect with calls in every state frees everything: pools back to
// zero, no goroutine left.
func TestEngineDisconnectMidFlight(t *testing.T) {
	check := goroutineBaseline(t)
	p := newEnginePair(t, pairOpts{})
	r0, err := p.call(readCallMsg(0xf, 1), nil) // learn the grant
	if err != nil {
		t.Fatal(err)
	}
	r0.Release()
	var wg sync.WaitGroup
	results := make(chan error, 20)
	for i := range 10 {
		wg.Add(2)
		go func() { // held at the handler
			defer wg.Done()
			var r Result
			m := &Message{XID: uint32(i + 1), Pieces: []Piece{{Data: put32s(uint32(i+1), opHold)}}}
			results <- p.req.Call(context.Background(), m, &ReplyPlan{WriteChunks: []int{1 << 20}, ReplyChunk: 8192}, &r)
		}()
		go func() { // WRITE with a big Read chunk, in flight
			defer wg.Done()
			msg := writeCallMsg(t, p.cli.pool, uint32(1000+i), 1<<20)
			var r Result
			err := p.req.Call(context.Background(), msg, nil, &r)
			if err == nil {
				r.Release()
			}
			msg.ReleaseBuffers()
		}()
	}
	waitFor(t, 10*time.Second, "held calls", func() bool {
		p.h.mu.Lock()
		defer p.h.mu.Unlock()
		return len(p.h.held) >= 5
	})
	// One Result still held by the application across the disconnect.
	var kept Result
	if err := p.req.Call(context.Background(), readCallMsg(0x4e1d, 300), &ReplyPlan{WriteChunks: []int{300}}, &kept); err != nil {
		t.Fatal(err)
	}
	p.req.Close()
	wg.Wait()
	close(results)
	for err := range results {
		if !errors.Is(err, ErrConnClosed) {
			t.Errorf("held call ended with %v, want ErrConnClosed", err)
		}
	}
	select {
	case err := <-p.served:
		t.Logf("Serve returned %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the peer disconnected")
	}
	checkRead(t, &kept, 0x4e1d, 300, true) // still readable
	kept.Release()
	// The handler answers the held calls late: Reply says the connection
	// is gone and frees the call.
	p.h.mu.Lock()
	held := p.h.held
	p.h.held = nil
	p.h.mu.Unlock()
	for i, c := range held {
		var m Message
		if i%2 == 0 {
			m.Append(Piece{Data: put32s(c.XID())})
			if err := c.Reply(&m); !errors.Is(err, ErrConnClosed) {
				t.Errorf("late Reply: %v", err)
			}
		} else {
			c.Drop()
		}
	}
	p.resp.Close()
	// Calls delivered just before the disconnect may still be with the
	// handler's workers; they answer them, and the pools drain.
	deadline := time.Now().Add(5 * time.Second)
	for p.srv.pool.InUse() != 0 || p.cli.pool.InUse() != 0 {
		p.h.releaseHeld(true) // HOLD calls delivered just before the end
		if time.Now().After(deadline) {
			t.Fatalf("pools still in use: responder %d bytes, requester %d bytes\n%s", p.srv.pool.InUse(), p.cli.pool.InUse(), p.resp.debugState())
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.close()
	check()
}

// Replying with the call's own message hands its Read chunk buffers to the
// reply (no double release, no copy).
func TestEngineEchoOwnMessage(t *testing.T) {
	p := newEnginePair(t, pairOpts{})
	for _, n := range []int{3, 5000, 300000} {
		msg := writeCallMsg(t, p.cli.pool, uint32(n), n)
		msg.store[0].Data = put32s(uint32(n), opEcho, uint32(n)) // same layout, ECHO op
		want := make([]byte, msg.Len())
		msg.Flatten(want)
		r, err := p.call(msg, &ReplyPlan{WriteChunks: []int{n}})
		msg.ReleaseBuffers()
		if err != nil {
			t.Fatal(err)
		}
		if n < 100 {
			// The call went inline, item and all; so does the echo.
			if !bytes.Equal(r.Inline, want) || len(r.Chunks[0]) != 0 {
				t.Fatalf("echo %d differs", n)
			}
		} else if !bytes.Equal(r.Chunks[0], want[12:12+n]) || !bytes.Equal(r.Inline, append(put32s(uint32(n), opEcho, uint32(n)), put32s(trailerWord)...)) {
			t.Fatalf("echo %d differs", n)
		}
		r.Release()
	}
	waitFor(t, 5*time.Second, "server pool idle", func() bool { return p.srv.pool.InUse() == p.idleServer() })
}

// debugState describes what the responder still holds.
func (c *ResponderConn) debugState() string {
	var b strings.Builder
	fmt.Fprintf(&b, "inFlight %d outstanding %d readsOut %d readQ %d\n", c.inFlight.Load(), c.outstanding.Load(), c.readsOut, len(c.readQ))
	c.recvMu.Lock()
	for i := range c.recvs {
		r := &c.recvs[i]
		if r.buf != nil {
			fmt.Fprintf(&b, "recv %d: posted %v state %d\n", i, r.posted, r.call.state.Load())
		}
	}
	c.recvMu.Unlock()
	c.sendMu.Lock()
	free := map[*sendCtxt]bool{}
	for _, s := range c.sendFree {
		free[s] = true
	}
	for i := range c.sends {
		s := c.sends[i].Load()
		if s == nil {
			continue // never made
		}
		if s.buf != nil || len(s.bufs) > 0 || !free[s] {
			fmt.Fprintf(&b, "send %d: free %v buf %v bufs %d\n", i, free[s], s.buf != nil, len(s.bufs))
		}
	}
	c.sendMu.Unlock()
	return b.String()
}

// A handler that answers within ServeCall, on the engine's goroutine,
// under load: Reply never waits there, and with the default sizing every
// reply finds its resources.
func TestEngineReplyInsideServeCall(t *testing.T) {
	p := newEnginePair(t, pairOpts{inline: true})
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				xid := uint32(g<<16 | i)
				n := []int{1, 100, 5000, 70000}[(g+i)%4]
				r, err := p.call(readCallMsg(xid, n), &ReplyPlan{WriteChunks: []int{n}})
				if err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(r.Chunks[0], patterned(n, int(xid))) {
					t.Errorf("READ %d: data differs", n)
				}
				r.Release()
			}
		}()
	}
	wg.Wait()
	if n := p.rmet.get("drop_no_resources"); n != 0 {
		t.Errorf("%d replies dropped for want of resources", n)
	}
}
