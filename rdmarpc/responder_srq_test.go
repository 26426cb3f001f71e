package rdmarpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
	"github.com/rdmagw/rdmagw/verbs/iwarp"
)

// srqMetrics counts the SharedRecv events.
type srqMetrics struct{ low, empty atomic.Int64 }

func (m *srqMetrics) SRQLowWater() { m.low.Add(1) }
func (m *srqMetrics) SRQEmpty()    { m.empty.Add(1) }

// srqFixture is one responder device whose connections share a
// SharedRecv, served by one toyHandler, and the requesters dialed to it
// from another device.
type srqFixture struct {
	t        *testing.T
	srv, cli *engineSide
	shared   *SharedRecv
	smet     *srqMetrics
	rmet     *countMetrics
	h        *toyHandler
	addr     string
	mu       sync.Mutex
	resps    []*ResponderConn
	served   chan error
	reqs     []*RequesterConn
}

func newSRQFixture(t *testing.T, depth, low, credits int) *srqFixture {
	return newSRQFixtureV(t, depth, low, credits, false)
}

// newSRQFixtureV is newSRQFixture with version two served too (v2).
func newSRQFixtureV(t *testing.T, depth, low, credits int, v2 bool) *srqFixture {
	t.Helper()
	prov := iwarp.New(iwarp.Config{})
	f := &srqFixture{t: t, srv: newEngineSide(t, prov), cli: newEngineSide(t, prov), smet: &srqMetrics{},
		rmet: newCountMetrics(), served: make(chan error, 4096)}
	var err error
	f.shared, err = NewSharedRecv(f.srv.pool, SharedRecvConfig{Depth: depth, LowWater: low, Metrics: f.smet})
	if err != nil {
		t.Fatal(err)
	}
	f.h = newToyHandler(t, f.srv.pool, 4)
	ln, err := f.srv.dev.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	go func() {
		for {
			req, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			rc, err := AcceptResponder(req, f.srv.dev, ResponderConfig{Pool: f.srv.pool, SharedRecv: f.shared,
				Credits: credits, Metrics: f.rmet, V2: v2})
			if err != nil {
				f.h.fail("accept: %v", err)
				continue
			}
			f.mu.Lock()
			f.resps = append(f.resps, rc)
			f.mu.Unlock()
			go func() { f.served <- rc.Serve(context.Background(), f.h) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for _, q := range f.reqs {
			q.Close()
		}
		f.mu.Lock()
		resps := f.resps
		f.mu.Unlock()
		for _, rc := range resps {
			rc.Close()
		}
		f.h.releaseHeld(true)
		f.h.stop()
		if errs := f.h.errors(); len(errs) > 0 {
			t.Errorf("handler: %v", errs)
		}
		f.shared.Close()
	})
	return f
}

func (f *srqFixture) dial(n, credits int) { f.dialV(n, credits, VersionV1) }

// dialV dials n requesters speaking version mode v.
func (f *srqFixture) dialV(n, credits int, v VersionMode) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range n {
		q, err := DialRequester(ctx, f.cli.dev, f.addr, RequesterConfig{Pool: f.cli.pool, Credits: credits, Version: v})
		if err != nil {
			f.t.Fatal(err)
		}
		f.reqs = append(f.reqs, q)
	}
	waitFor(f.t, 10*time.Second, "responders accepted", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.resps) == len(f.reqs)
	})
}

// call makes one call on requester i and returns its result.
func (f *srqFixture) call(i int, m *Message, plan *ReplyPlan) (*Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := new(Result)
	return r, f.reqs[i].Call(ctx, m, plan, r)
}

func holdMsg(xid uint32) *Message {
	return &Message{XID: xid, Pieces: []Piece{{Data: put32s(xid, opHold)}}}
}

// TestSharedRecvManyConnections: 48 connections share an SRQ of 128
// receives (each connection granted 8 credits, 384 in all, but making 2
// calls at once: the SRQ is sized for the calls in flight) and make
// calls of every kind concurrently: inline, READ through a Write chunk,
// WRITE through Read chunks. Every reply is checked byte for byte, no
// call is dropped, and when all are answered every receive is posted
// again; connections ending (half of them) do not take shared receives
// with them.
func TestSharedRecvManyConnections(t *testing.T) {
	const conns, perConn, depth = 48, 12, 128
	f := newSRQFixture(t, depth, 4, 8)
	f.dial(conns, 8)
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- f.drive(i, perConn)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		return
	}
	if n := f.rmet.get("call_inline") + f.rmet.get("call_read_chunk"); n != conns*perConn {
		t.Errorf("%d calls received, want %d", n, conns*perConn)
	}
	if d := f.rmet.get("drop_credit_overrun") + f.rmet.get("drop_no_resources"); d != 0 {
		t.Errorf("%d calls dropped", d)
	}
	waitFor(t, 5*time.Second, "every shared receive posted again", func() bool { return f.shared.Posted() == depth })
	// Half the clients leave; the others still get through.
	for i := range conns / 2 {
		f.reqs[i].Close()
	}
	waitFor(t, 10*time.Second, "the departed connections served", func() bool { return len(f.served) == conns/2 })
	for i := conns / 2; i < conns; i++ {
		r, err := f.call(i, readCallMsg(uint32(9000+i), 100), nil)
		if err != nil {
			t.Fatal(err)
		}
		checkRead(t, r, uint32(9000+i), 100, false)
		r.Release()
	}
	waitFor(t, 5*time.Second, "shared receives posted after the disconnects", func() bool { return f.shared.Posted() == depth })
	if f.smet.empty.Load() != 0 {
		t.Errorf("the SRQ ran dry %d times with %d receives for at most %d calls", f.smet.empty.Load(), depth, conns*2)
	}
}

// drive makes n calls on connection i, up to 2 at once, of three kinds.
func (f *srqFixture) drive(i, n int) error {
	sem := make(chan struct{}, 2)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for k := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs <- f.driveOne(i, uint32(i*1000+k), k%3)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (f *srqFixture) driveOne(i int, xid uint32, kind int) error {
	switch kind {
	case 0:
		r, err := f.call(i, readCallMsg(xid, 200), nil)
		if err != nil {
			return fmt.Errorf("conn %d inline READ: %w", i, err)
		}
		defer r.Release()
		if err := readReplyErr(r, xid, 200, false); err != nil {
			return fmt.Errorf("conn %d xid %d: %w", i, xid, err)
		}
	case 1:
		r, err := f.call(i, readCallMsg(xid, 9000), &ReplyPlan{WriteChunks: []int{9000}})
		if err != nil {
			return fmt.Errorf("conn %d READ by Write chunk: %w", i, err)
		}
		defer r.Release()
		if err := readReplyErr(r, xid, 9000, true); err != nil {
			return fmt.Errorf("conn %d xid %d: %w", i, xid, err)
		}
	default:
		r, err := f.call(i, writeCallMsg(f.t, f.cli.pool, xid, 6000), nil)
		if err != nil {
			return fmt.Errorf("conn %d WRITE by Read chunk: %w", i, err)
		}
		defer r.Release()
		want := put32s(xid, 0, sum32(patterned(6000, int(xid))))
		if string(r.Inline) != string(want) {
			return fmt.Errorf("conn %d xid %d: WRITE reply % x, want % x", i, xid, r.Inline, want)
		}
	}
	return nil
}

// TestSharedRecvRunsLowAndDry: an SRQ of 6 receives, low-water mark 3,
// three connections holding calls at the handler. Taking the receives
// counts one low-water event; the SRQ running dry is counted, and the
// next message on it finds no buffer: its connection ends with an error
// at both ends (the iWARP provider's Terminate), never a silent drop,
// while the other connections and the held calls are unharmed; once the
// held calls are answered the SRQ is full again and new connections are
// served.
func TestSharedRecvRunsLowAndDry(t *testing.T) {
	f := newSRQFixture(t, 6, 3, 4)
	f.dial(3, 4)
	// Each requester learns its grant (4) first.
	for i := range 3 {
		r, err := f.call(i, readCallMsg(uint32(i+1), 8), nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	var wg sync.WaitGroup
	held := make(chan error, 6)
	for k := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := f.call(k%2, holdMsg(uint32(100+k)), nil) // connections 0 and 1
			if err == nil {
				r.Release()
			}
			held <- err
		}()
	}
	waitFor(t, 10*time.Second, "6 held calls", func() bool {
		f.h.mu.Lock()
		defer f.h.mu.Unlock()
		return len(f.h.held) == 6
	})
	if f.shared.Posted() != 0 || f.smet.low.Load() != 1 || f.smet.empty.Load() != 1 {
		t.Fatalf("posted %d, low-water events %d, empty events %d; want 0, 1, 1",
			f.shared.Posted(), f.smet.low.Load(), f.smet.empty.Load())
	}
	// Connection 2 sends into the empty SRQ.
	_, err := f.call(2, readCallMsg(200, 8), nil)
	if err == nil || !errors.Is(err, ErrConnClosed) {
		t.Fatalf("call into an empty SRQ: %v, want the connection closed", err)
	}
	var te *iwarp.TerminateError
	var ce *verbs.CompletionError
	if !errors.As(err, &te) && !(errors.As(err, &ce) && ce.Status == verbs.StatusRNR) {
		t.Errorf("call into an empty SRQ: %v, want the provider's Terminate or receiver not ready", err)
	}
	select {
	case serr := <-f.served:
		if serr == nil {
			t.Errorf("the connection that found no buffer ended without an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the responder of the connection that found no buffer did not end")
	}
	// The held calls complete.
	f.h.releaseHeld(false)
	wg.Wait()
	close(held)
	for err := range held {
		if err != nil {
			t.Errorf("held call: %v", err)
		}
	}
	waitFor(t, 5*time.Second, "the SRQ full again", func() bool { return f.shared.Posted() == 6 })
	f.dial(1, 4)
	for _, i := range []int{0, 1, 3} {
		r, err := f.call(i, readCallMsg(uint32(300+i), 64), nil)
		if err != nil {
			t.Fatalf("conn %d after the SRQ refilled: %v", i, err)
		}
		checkRead(t, r, uint32(300+i), 64, false)
		r.Release()
	}
	if f.smet.low.Load() != 1 {
		t.Errorf("%d low-water events, want 1 (one per crossing)", f.smet.low.Load())
	}
}

// TestSharedRecvMismatch: a connection whose InlineRecv differs from the
// SharedRecv's buffers, or whose pool is on another PD, is refused.
func TestSharedRecvMismatch(t *testing.T) {
	prov := iwarp.New(iwarp.Config{})
	srv, other := newEngineSide(t, prov), newEngineSide(t, prov)
	s, err := NewSharedRecv(srv.pool, SharedRecvConfig{Depth: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, cfg := range map[string]ResponderConfig{
		"inline_recv": {Pool: srv.pool, SharedRecv: s, InlineRecv: 8192},
		"pd":          {Pool: other.pool, SharedRecv: s},
	} {
		ln, err := srv.dev.Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			req, err := ln.Accept(context.Background())
			if err == nil {
				_, err = AcceptResponder(req, srv.dev, cfg)
			}
			got <- err
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if q, err := DialRequester(ctx, other.dev, ln.Addr().String(), RequesterConfig{Pool: other.pool}); err == nil {
			q.Close()
		}
		cancel()
		if err := <-got; err == nil {
			t.Errorf("%s mismatch accepted", name)
		}
		ln.Close()
	}
	if s.Posted() != 4 {
		t.Errorf("posted %d after refused connections, want 4", s.Posted())
	}
}

// TestSharedRecvVersionTwo: version-one and version-two connections share
// one SRQ; every kind of call is answered byte for byte on both, and all
// receives are posted again afterwards.
func TestSharedRecvVersionTwo(t *testing.T) {
	const depth = 64
	f := newSRQFixtureV(t, depth, 4, 8, true)
	f.dialV(4, 8, VersionV1)
	f.dialV(4, 8, VersionV2)
	var wg sync.WaitGroup
	errs := make(chan error, len(f.reqs))
	for i := range f.reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- f.drive(i, 9)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if v := f.reqs[len(f.reqs)-1].Version(); v != 2 {
		t.Errorf("version-two requester speaks version %d", v)
	}
	waitFor(t, 5*time.Second, "every shared receive posted again", func() bool { return f.shared.Posted() == depth })
}
