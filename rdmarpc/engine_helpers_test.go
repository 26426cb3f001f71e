package rdmarpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
	"github.com/rdmagw/rdmagw/verbs/iwarp"
)

// Test fixtures for the engines: a responder and a requester over the
// pure-Go iWARP provider on loopback, a toy RPC protocol the test handler
// speaks, and counting metrics.
//
// The toy protocol (all words big-endian; the XID is the transport XID):
//
//	call  READ   xid | 1 | n            reply xid | n | <item n> | trailer
//	call  WRITE  xid | 2 | n | <item n> | trailer
//	                                    reply xid | 0 | sum32(item)
//	call  BIG    xid | 3 | n | <n bytes inline>
//	                                    reply xid | n | <n bytes inline>
//	call  ECHO   xid | 4 | ...          reply: the call's own Msg
//	call  TWO    xid | 5 | a | b        reply xid | <item a> | <item b> | trailer
//	call  HOLD   xid | 6                held until the test releases it
const (
	opRead  = 1
	opWrite = 2
	opBig   = 3
	opEcho  = 4
	opTwo   = 5
	opHold  = 6

	trailerWord = 0xdeadbeef
)

// pattern fills b with bytes that depend on seed and position, so a
// misplaced, shifted or truncated copy shows.
func pattern(b []byte, seed int) {
	for i := range b {
		b[i] = byte(seed + i*7 + i>>8)
	}
}

func patterned(n, seed int) []byte {
	b := make([]byte, n)
	pattern(b, seed)
	return b
}

func sum32(b []byte) uint32 {
	var s uint32
	for i, v := range b {
		s = s*31 + uint32(v) + uint32(i)
	}
	return s
}

func be32(b []byte, off int) uint32 { return binary.BigEndian.Uint32(b[off:]) }

func put32s(vs ...uint32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.BigEndian.PutUint32(b[4*i:], v)
	}
	return b
}

// countMetrics counts every event by name; safe for concurrent use.
type countMetrics struct {
	mu sync.Mutex
	n  map[string]int
}

func newCountMetrics() *countMetrics { return &countMetrics{n: map[string]int{}} }

func (m *countMetrics) add(k string) { m.addN(k, 1) }

func (m *countMetrics) addN(k string, n int) {
	m.mu.Lock()
	m.n[k] += n
	m.mu.Unlock()
}

func (m *countMetrics) get(k string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[k]
}

func (m *countMetrics) CallReceived(k CallKind, _, _ int) { m.add("call_" + k.String()) }
func (m *countMetrics) ReplySent(k ReplyKind, _, _ int)   { m.add("reply_" + k.String()) }
func (m *countMetrics) ErrorSent(c ErrorCode)             { m.add("error_" + c.String()) }
func (m *countMetrics) Dropped(r DropReason)              { m.add("drop_" + r.String()) }
func (m *countMetrics) SendInvalidated()                  { m.add("send_inv") }
func (m *countMetrics) WrittenAhead(n int)                { m.addN("written_ahead", n) }
func (m *countMetrics) MemoryWait()                       { m.add("memory_wait") }
func (m *countMetrics) RDMAFailed(op verbs.Opcode, _ verbs.Status) {
	m.add("rdma_failed_" + op.String())
}
func (m *countMetrics) VersionSettled(v uint32, fellBack bool) {
	m.add(fmt.Sprintf("version_%d", v))
	if fellBack {
		m.add("fell_back")
	}
}
func (m *countMetrics) ConnUp()                             { m.add("up") }
func (m *countMetrics) ConnDown(error)                      { m.add("down") }
func (m *countMetrics) CallSent(k CallKind, _, _ int)       { m.add("sent_" + k.String()) }
func (m *countMetrics) ReplyReceived(k ReplyKind, _, _ int) { m.add("received_" + k.String()) }
func (m *countMetrics) ErrorReceived(c ErrorCode)           { m.add("error_received_" + c.String()) }

// toyHandler serves the toy protocol. ServeCall hands each call to
// worker goroutines, as a gateway would; Reply never runs on the Serve
// goroutine.
type toyHandler struct {
	t      testing.TB
	pool   *Pool
	calls  chan *Call
	mu     sync.Mutex
	held   []*Call
	errs   []string
	seen   int
	maxOut int // most calls with the handler at once
	out    int
	wg     sync.WaitGroup
	// writeHook, when set, sees every WRITE item before the checksum.
	writeHook func(item []byte)
	// inline: answer within ServeCall, on the engine's goroutine.
	inline bool
	flat   []byte
	msg    Message
}

func newToyHandler(t testing.TB, pool *Pool, workers int) *toyHandler {
	h := &toyHandler{t: t, pool: pool, calls: make(chan *Call, 1024)}
	for range workers {
		h.wg.Add(1)
		go h.worker()
	}
	return h
}

func (h *toyHandler) ServeCall(c *Call) {
	h.mu.Lock()
	h.out++
	h.maxOut = max(h.maxOut, h.out)
	h.mu.Unlock()
	if h.inline {
		h.serve(c, &h.flat, &h.msg)
		return
	}
	h.calls <- c
}

func (h *toyHandler) stop() {
	close(h.calls)
	h.wg.Wait()
}

func (h *toyHandler) fail(format string, args ...any) {
	for _, a := range args {
		if err, ok := a.(error); ok && errors.Is(err, ErrConnClosed) {
			return // the connection went down under the call: expected
		}
	}
	h.mu.Lock()
	h.errs = append(h.errs, fmt.Sprintf(format, args...))
	h.mu.Unlock()
}

func (h *toyHandler) errors() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.errs...)
}

// releaseHeld answers every held call with Drop (drop) or an empty reply.
func (h *toyHandler) releaseHeld(drop bool) int {
	h.mu.Lock()
	held := h.held
	h.held = nil
	h.mu.Unlock()
	for _, c := range held {
		if drop {
			c.Drop()
		} else {
			var m Message
			m.Append(Piece{Data: put32s(c.XID(), 0)})
			c.Reply(&m)
		}
	}
	return len(held)
}

func (h *toyHandler) worker() {
	defer h.wg.Done()
	var flat []byte
	var m Message
	for c := range h.calls {
		h.serve(c, &flat, &m)
	}
}

func (h *toyHandler) serve(c *Call, flatp *[]byte, mp *Message) {
	flat, m := *flatp, mp
	defer func() { *flatp = flat }()
	{
		n := c.Msg.Len()
		if cap(flat) < n {
			flat = make([]byte, n)
		}
		flat = flat[:c.Msg.Flatten(flat[:n])]
		h.mu.Lock()
		h.seen++
		h.out--
		h.mu.Unlock()
		if len(flat) < 8 || be32(flat, 0) != c.XID() {
			h.fail("call xid 0x%x: bad message of %d bytes", c.XID(), len(flat))
			c.Drop()
			return
		}
		m.Reset()
		switch op := be32(flat, 4); op {
		case opRead:
			cnt := int(be32(flat, 8))
			b, err := h.pool.Get(max(cnt, 1))
			if err != nil {
				h.fail("pool: %v", err)
				c.Drop()
				return
			}
			b.Bytes = b.Bytes[:cnt]
			pattern(b.Bytes, int(c.XID()))
			m.Append(Piece{Data: put32s(c.XID(), uint32(cnt))})
			m.Append(Piece{Data: b.Bytes, Item: true, Buf: b})
			m.Append(Piece{Data: put32s(trailerWord)})
			if err := c.Reply(m); err != nil {
				h.fail("reply: %v", err)
			}
		case opWrite:
			// The item must be a piece of its own, placed right after
			// the count, with the trailer after its round-up.
			cnt := int(be32(flat, 8))
			var item []byte
			items := 0
			for _, p := range c.Msg.Pieces {
				if p.Item {
					item = p.Data
					items++
				}
			}
			if items > 1 {
				h.fail("WRITE xid 0x%x: %d items", c.XID(), items)
			}
			if items == 0 {
				item = flat[12 : 12+cnt] // it came inline
			}
			if len(item) != cnt {
				h.fail("WRITE xid 0x%x: item of %d bytes, want %d", c.XID(), len(item), cnt)
			}
			end := 12 + cnt + padLen(cnt)
			if len(flat) != end+4 || be32(flat, end) != trailerWord {
				h.fail("WRITE xid 0x%x: stream of %d bytes, trailer misplaced", c.XID(), len(flat))
			}
			if !bytes.Equal(item, flat[12:12+cnt]) {
				h.fail("WRITE xid 0x%x: item differs from its place in the stream", c.XID())
			}
			if h.writeHook != nil {
				h.writeHook(item)
			}
			m.Append(Piece{Data: put32s(c.XID(), 0, sum32(item))})
			if err := c.Reply(m); err != nil {
				h.fail("reply: %v", err)
			}
		case opBig:
			cnt := int(be32(flat, 8))
			body := patterned(cnt, int(c.XID()))
			m.Append(Piece{Data: put32s(c.XID(), uint32(cnt))})
			m.Append(Piece{Data: body})
			if err := c.Reply(m); err != nil {
				h.fail("reply: %v", err)
			}
		case opEcho:
			if err := c.Reply(&c.Msg); err != nil {
				h.fail("reply: %v", err)
			}
		case opTwo:
			a, bn := int(be32(flat, 8)), int(be32(flat, 12))
			m.Append(Piece{Data: put32s(c.XID())})
			m.Append(Piece{Data: patterned(a, 1), Item: true})
			m.Append(Piece{Data: patterned(bn, 2), Item: true})
			m.Append(Piece{Data: put32s(trailerWord)})
			if err := c.Reply(m); err != nil {
				h.fail("reply: %v", err)
			}
		case opHold:
			h.mu.Lock()
			h.held = append(h.held, c)
			h.mu.Unlock()
		default:
			h.fail("xid 0x%x: unknown op %d", c.XID(), op)
			c.Drop()
		}
	}
}

// engineSide is one end's device, PD and pool.
type engineSide struct {
	dev  verbs.Device
	pool *Pool
}

func newEngineSide(t testing.TB, p verbs.Provider) *engineSide {
	t.Helper()
	d, err := p.Open("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	pd, err := d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	pool, err := NewPool(pd, PoolConfig{MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	s := &engineSide{dev: d, pool: pool}
	t.Cleanup(func() {
		pool.Close()
		pd.Close()
		d.Close()
	})
	return s
}

// enginePair is a requester connected to a responder served by a
// toyHandler.
type enginePair struct {
	t        testing.TB
	srv, cli *engineSide
	resp     *ResponderConn
	req      *RequesterConn
	h        *toyHandler
	rmet     *countMetrics
	qmet     *countMetrics
	served   chan error
	once     sync.Once
	rawFields
}

type pairOpts struct {
	rcfg    ResponderConfig
	qcfg    RequesterConfig
	workers int
	// noRequester: the test dials with a raw client (bad-input tests).
	noRequester bool
	// inline: the handler answers within ServeCall.
	inline bool
	// handler, if set, serves the calls instead of the toy handler.
	handler Handler
}

func newEnginePair(t testing.TB, o pairOpts) *enginePair {
	t.Helper()
	prov := iwarp.New(iwarp.Config{})
	p := &enginePair{t: t, srv: newEngineSide(t, prov), cli: newEngineSide(t, prov),
		rmet: newCountMetrics(), qmet: newCountMetrics(), served: make(chan error, 1)}
	if o.workers == 0 {
		o.workers = 4
	}
	p.h = newToyHandler(t, p.srv.pool, o.workers)
	p.h.inline = o.inline
	ln, err := p.srv.dev.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	o.rcfg.Pool = p.srv.pool
	if o.rcfg.Metrics == nil {
		o.rcfg.Metrics = p.rmet
	}
	accepted := make(chan error, 1)
	go func() {
		req, err := ln.Accept(context.Background())
		ln.Close()
		if err != nil {
			accepted <- err
			return
		}
		rc, err := AcceptResponder(req, p.srv.dev, o.rcfg)
		if err != nil {
			accepted <- err
			return
		}
		p.resp = rc
		accepted <- nil
		var h Handler = p.h
		if o.handler != nil {
			h = o.handler
		}
		p.served <- rc.Serve(context.Background(), h)
	}()
	if !o.noRequester {
		o.qcfg.Pool = p.cli.pool
		if o.qcfg.Metrics == nil {
			o.qcfg.Metrics = p.qmet
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.req, err = DialRequester(ctx, p.cli.dev, ln.Addr().String(), o.qcfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := <-accepted; err != nil {
			t.Fatal(err)
		}
	} else {
		p.rawAddr = ln.Addr().String()
		p.accepted = accepted
	}
	t.Cleanup(p.close)
	return p
}

// Fields used by the raw client tests.
type rawFields struct {
	rawAddr  string
	accepted chan error
}

func (p *enginePair) close() { p.once.Do(p.doClose) }

func (p *enginePair) doClose() {
	if p.req != nil {
		p.req.Close()
	}
	if p.resp != nil {
		p.resp.Close()
	}
	p.h.releaseHeld(true)
	p.h.stop()
	if errs := p.h.errors(); len(errs) > 0 {
		p.t.Errorf("handler: %v", errs)
	}
}

// goroutineBaseline returns a check that fails t when goroutines started
// since are still running a few seconds after it is called.
func goroutineBaseline(t testing.TB) func() {
	before := runtime.NumGoroutine()
	return func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutine leak: %d before, %d after\n%s", before, n, buf)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// waitFor polls cond until it holds or fails t after d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Requester-side builders.

func readCallMsg(xid uint32, n int) *Message {
	m := new(Message)
	m.XID = xid
	m.Append(Piece{Data: put32s(xid, opRead, uint32(n))})
	return m
}

// writeCallMsg builds WRITE with its item in a pool buffer (registered,
// exposed in place) or, when pool is nil, on the Go heap (the requester
// stages a copy).
func writeCallMsg(t testing.TB, pool *Pool, xid uint32, n int) *Message {
	m := new(Message)
	m.XID = xid
	m.Append(Piece{Data: put32s(xid, opWrite, uint32(n))})
	if pool != nil && n > 0 {
		b, err := pool.Get(n)
		if err != nil {
			t.Fatal(err)
		}
		pattern(b.Bytes, int(xid))
		m.Append(Piece{Data: b.Bytes, Item: true, Buf: b})
	} else {
		m.Append(Piece{Data: patterned(n, int(xid)), Item: true})
	}
	m.Append(Piece{Data: put32s(trailerWord)})
	return m
}

func (p *enginePair) call(msg *Message, plan *ReplyPlan) (*Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := new(Result)
	err := p.req.Call(ctx, msg, plan, r)
	return r, err
}

// checkRead verifies a READ reply of n bytes, DDP'd (ddp) or inline.
func checkRead(t testing.TB, r *Result, xid uint32, n int, ddp bool) {
	t.Helper()
	if err := readReplyErr(r, xid, n, ddp); err != nil {
		t.Fatal(err)
	}
}

// readReplyErr says how a READ reply of n bytes differs from the one
// expected (nil: it does not).
func readReplyErr(r *Result, xid uint32, n int, ddp bool) error {
	want := patterned(n, int(xid))
	if ddp {
		if len(r.Chunks) != 1 || !bytes.Equal(r.Chunks[0], want) {
			got := -1
			if len(r.Chunks) == 1 {
				got = len(r.Chunks[0])
			}
			return fmt.Errorf("READ %d: Write chunk holds %d bytes, not the pattern", n, got)
		}
		if !bytes.Equal(r.Inline, put32s(xid, uint32(n), trailerWord)) {
			return fmt.Errorf("READ %d: inline reply % x", n, r.Inline)
		}
		return nil
	}
	exp := append(put32s(xid, uint32(n)), want...)
	exp = append(exp, make([]byte, padLen(n))...)
	exp = append(exp, put32s(trailerWord)...)
	if !bytes.Equal(r.Inline, exp) {
		return fmt.Errorf("READ %d inline: reply of %d bytes differs from the %d expected", n, len(r.Inline), len(exp))
	}
	for i, c := range r.Chunks {
		if len(c) != 0 {
			return fmt.Errorf("READ %d inline: Write chunk %d returned %d bytes", n, i, len(c))
		}
	}
	return nil
}
