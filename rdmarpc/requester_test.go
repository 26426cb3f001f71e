package rdmarpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
	"github.com/rdmagw/rdmagw/verbs/iwarp"
)

// After the reply, nothing the call offered is reachable by the
// responder: an RDMA Write into the old Write chunk, or an RDMA Read of
// the old Read chunk, fails at the requester's side.
func TestRequesterInvalidatesAfterReply(t *testing.T) {
	for _, op := range []verbs.Opcode{verbs.OpRDMAWrite, verbs.OpRDMARead} {
		t.Run(op.String(), func(t *testing.T) {
			p := newEnginePair(t, pairOpts{})
			var seg Segment
			var r *Result
			var err error
			if op == verbs.OpRDMAWrite {
				r, err = p.call(readCallMsg(1, 5000), &ReplyPlan{WriteChunks: []int{5000}})
				if err == nil {
					seg = r.x.hdr.Writes[0][0]
				}
			} else {
				msg := writeCallMsg(t, p.cli.pool, 1, 5000)
				defer msg.ReleaseBuffers()
				r, err = p.call(msg, nil)
				if err == nil {
					seg = r.x.hdr.Reads[0].Segment
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			r.Release()
			b, err := p.srv.pool.Get(int(seg.Length))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Release()
			// Straight onto the responder's queue pair, as a rogue
			// responder would.
			err = p.resp.qp.PostSend(&verbs.SendWR{ID: wrWrite, Op: op, Signal: true,
				SGL: []verbs.SGE{b.SGE(0, len(b.Bytes))}, RemoteAddr: seg.Offset, RKey: seg.Handle})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-p.served:
				var ce *verbs.CompletionError
				if !errors.As(err, &ce) || ce.Status != verbs.StatusRemoteAccess {
					t.Fatalf("Serve: %v, want a remote access error", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the responder could still reach memory of a finished call")
			}
		})
	}
}

// A caller that gives up keeps its credit in use until the reply comes;
// then everything is returned.
func TestRequesterAbandon(t *testing.T) {
	p := newEnginePair(t, pairOpts{})
	r, err := p.call(readCallMsg(1, 1), nil) // learn the grant
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var res Result
	msg := writeCallMsg(t, p.cli.pool, 2, 50000)
	msg.store[0].Data = put32s(2, opHold)
	err = p.req.Call(ctx, msg, &ReplyPlan{WriteChunks: []int{1 << 20}, ReplyChunk: 10000}, &res)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("abandoned call: %v", err)
	}
	msg.ReleaseBuffers() // the caller may reuse its data at once
	p.req.mu.Lock()
	inflight := p.req.inflight
	p.req.mu.Unlock()
	if inflight != 1 {
		t.Fatalf("in flight %d after abandoning, want 1 (the credit stays used)", inflight)
	}
	waitFor(t, 5*time.Second, "held call", func() bool {
		p.h.mu.Lock()
		defer p.h.mu.Unlock()
		return len(p.h.held) == 1
	})
	p.h.releaseHeld(false)
	waitFor(t, 5*time.Second, "credit returned", func() bool {
		p.req.mu.Lock()
		defer p.req.mu.Unlock()
		return p.req.inflight == 0
	})
	r, err = p.call(readCallMsg(3, 100), &ReplyPlan{WriteChunks: []int{100}})
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, r, 3, 100, true)
	r.Release()
	waitFor(t, 5*time.Second, "client pool idle", func() bool { return p.cli.pool.InUse() == p.idleClient() })
}

// rawServer accepts one connection and answers calls with whatever its
// script says, to feed the requester what a broken responder might send.
type rawServer struct {
	conn verbs.Conn
	mr   verbs.MR
	mem  *verbs.Memory
	cq   verbs.CQ
	next int
}

func startRawServer(t *testing.T, script func(s *rawServer, xid uint32, call []byte)) string {
	prov := iwarp.New(iwarp.Config{})
	d, _ := prov.Open("127.0.0.1")
	pd, _ := d.AllocPD()
	cq, _ := d.CreateCQ(64)
	mem, _ := verbs.Alloc(1 << 20)
	mr, _ := pd.Register(mem.Bytes(), verbs.AccessLocalWrite)
	ln, err := d.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{mr: mr, mem: mem, cq: cq}
	done, ready := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		req, err := ln.Accept(context.Background())
		ln.Close()
		if err != nil {
			close(ready)
			return
		}
		s.conn, err = req.Accept(verbs.ConnOptions{PD: pd, SendCQ: cq, RecvCQ: cq, PrivateData: linuxPrivateData})
		close(ready)
		if err != nil {
			return
		}
		for i := range 8 {
			s.conn.PostRecv(&verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{{Buf: mem.Bytes()[i*8192 : (i+1)*8192], LKey: mr.LKey()}}})
		}
		wcs := make([]verbs.WC, 8)
		for {
			n := cq.Poll(wcs)
			for _, wc := range wcs[:n] {
				if wc.Op != verbs.OpRecv {
					continue
				}
				if wc.Status != verbs.StatusSuccess {
					return
				}
				i := int(wc.ID)
				b := bytes.Clone(mem.Bytes()[i*8192 : i*8192+wc.ByteLen])
				s.conn.PostRecv(&verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{{Buf: mem.Bytes()[i*8192 : (i+1)*8192], LKey: mr.LKey()}}})
				script(s, binary.BigEndian.Uint32(b), b)
			}
			if n == 0 && cq.Wait(context.Background()) != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-ready
		if s.conn != nil {
			s.conn.Close()
		}
		cq.Close()
		<-done
		mr.Deregister()
		mem.Free()
		d.Close()
	})
	return ln.Addr().String()
}

func (s *rawServer) send(b []byte) {
	// A buffer of its own per Send: the provider reads it when it
	// transmits, after PostSend has returned.
	s.next = (s.next + 1) % 16
	off := 512<<10 + s.next*8192
	buf := s.mem.Bytes()[off : off+len(b)]
	copy(buf, b)
	s.conn.PostSend(&verbs.SendWR{ID: 99, Op: verbs.OpSend, SGL: []verbs.SGE{{Buf: buf, LKey: s.mr.LKey()}}})
}

// The requester surfaces RDMA_ERROR as typed errors, rejects replies that
// claim more than was offered, drops replies for no call, and counts a
// grant of 0 as 1.
func TestRequesterRemoteErrors(t *testing.T) {
	addr := startRawServer(t, func(s *rawServer, xid uint32, call []byte) {
		ok := append(fixed(xid, 1, 4, ProcMsg).u32(0, 0, 0).bytes(), put32s(xid, 0)...)
		switch xid {
		case 1:
			s.send(fixed(1, 1, 4, ProcError).u32(uint32(ErrCodeVers), 2, 3).bytes())
		case 2:
			s.send(fixed(2, 1, 4, ProcError).u32(uint32(ErrCodeChunk)).bytes())
		case 3:
			s.send(append(fixed(999, 1, 4, ProcMsg).u32(0, 0, 0).bytes(), put32s(999)...)) // no such call
			s.send(ok)
		case 4:
			s.send(fixed(4, 1, 4, 9).bytes()) // bad proc
		case 5: // a Write chunk longer than offered
			s.send(append(fixed(5, 1, 4, ProcMsg).u32(0, 1, 1, 1, 5000, 0, 0, 0, 0).bytes(), put32s(5)...))
		case 6:
			s.send(append(fixed(6, 1, 0, ProcMsg).u32(0, 0, 0).bytes(), put32s(6, 0)...)) // grant 0
		case 8: // a one-segment Write chunk returned with two segments
			s.send(append(fixed(8, 1, 4, ProcMsg).u32(0, 1, 2, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0).bytes(), put32s(8)...))
		case 9: // an empty Write chunk returned with a segment
			s.send(append(fixed(9, 1, 4, ProcMsg).u32(0, 1, 1, 1, 0, 0, 0, 0, 0).bytes(), put32s(9)...))
		default:
			s.send(ok)
		}
	})
	met := newCountMetrics()
	cli := newEngineSide(t, iwarp.New(iwarp.Config{}))
	req, err := DialRequester(context.Background(), cli.dev, addr, RequesterConfig{Pool: cli.pool, Metrics: met})
	if err != nil {
		t.Fatal(err)
	}
	defer req.Close()
	call := func(xid uint32, plan *ReplyPlan) (*Result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r := new(Result)
		return r, req.Call(ctx, &Message{XID: xid, Pieces: []Piece{{Data: put32s(xid, 0)}}}, plan, r)
	}
	_, err = call(1, nil)
	var re *RemoteError
	if !errors.Is(err, ErrRemoteVersion) || !errors.As(err, &re) || re.VersLow != 2 || re.VersHigh != 3 {
		t.Fatalf("ERR_VERS: %v", err)
	}
	if _, err = call(2, nil); !errors.Is(err, ErrRemoteChunk) {
		t.Fatalf("ERR_CHUNK: %v", err)
	}
	r, err := call(3, nil)
	if err != nil || !bytes.Equal(r.Inline, put32s(3, 0)) {
		t.Fatalf("after an unmatched reply: %v % x", err, r.Inline)
	}
	r.Release()
	if met.get("drop_unmatched") != 1 {
		t.Errorf("unmatched reply not counted: %v", met.n)
	}
	if req.Granted() != 4 {
		t.Errorf("grant %d, want 4", req.Granted())
	}
	if _, err = call(4, nil); !errors.Is(err, ErrBadReply) {
		t.Fatalf("bad proc: %v", err)
	}
	if _, err = call(5, &ReplyPlan{WriteChunks: []int{100}}); !errors.Is(err, ErrBadReply) {
		t.Fatalf("overlong Write chunk: %v", err)
	}
	if _, err = call(8, &ReplyPlan{WriteChunks: []int{100}}); !errors.Is(err, ErrBadReply) {
		t.Fatalf("Write chunk with a segment added: %v", err)
	}
	if _, err = call(9, &ReplyPlan{WriteChunks: []int{0}}); !errors.Is(err, ErrBadReply) {
		t.Fatalf("empty Write chunk returned with a segment: %v", err)
	}
	r, err = call(6, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	if req.Granted() != 1 {
		t.Errorf("grant of 0 taken as %d, want 1", req.Granted())
	}
	r, err = call(7, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
}

// Calls the requester cannot marshal fail before anything is sent and
// leave nothing behind.
func TestRequesterMarshalErrors(t *testing.T) {
	p := newEnginePair(t, pairOpts{})
	r, err := p.call(readCallMsg(1, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	if _, err := p.call(readCallMsg(2, 1), &ReplyPlan{WriteChunks: []int{100, 8 << 20}}); err == nil {
		t.Error("Write chunk beyond the pool's largest buffer accepted")
	}
	if _, err := p.call(readCallMsg(3, 1), &ReplyPlan{WriteChunks: make([]int, 9)}); err == nil {
		t.Error("9 Write chunks accepted")
	}
	unaligned := &Message{XID: 4}
	unaligned.Append(Piece{Data: []byte{0, 0, 0, 4, 0, 0, 0}})
	unaligned.Append(Piece{Data: make([]byte, 5000), Item: true})
	if _, err := p.call(unaligned, nil); err == nil {
		t.Error("item at an unaligned stream offset accepted")
	}
	// Same XID twice in flight.
	held := make(chan error, 1)
	go func() {
		var r Result
		err := p.req.Call(context.Background(), &Message{XID: 5, Pieces: []Piece{{Data: put32s(5, opHold)}}}, nil, &r)
		if err == nil {
			r.Release()
		}
		held <- err
	}()
	waitFor(t, 5*time.Second, "held call", func() bool {
		p.h.mu.Lock()
		defer p.h.mu.Unlock()
		return len(p.h.held) == 1
	})
	if _, err := p.call(readCallMsg(5, 1), nil); !errors.Is(err, ErrXIDInUse) {
		t.Errorf("duplicate XID: %v", err)
	}
	p.h.releaseHeld(false)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "client pool idle", func() bool { return p.cli.pool.InUse() == p.idleClient() })
	r, err = p.call(readCallMsg(6, 10), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
}

// ReserveCredits keeps credits from ordinary calls for CallReserved.
func TestRequesterReservedCredits(t *testing.T) {
	p := newEnginePair(t, pairOpts{rcfg: ResponderConfig{Credits: 3}, qcfg: RequesterConfig{ReserveCredits: 1}})
	r, err := p.call(readCallMsg(1, 1), nil) // learn the grant: 3
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	done := make(chan error, 2)
	for i := range 2 {
		go func() {
			var r Result
			err := p.req.Call(context.Background(), &Message{XID: uint32(10 + i), Pieces: []Piece{{Data: put32s(uint32(10+i), opHold)}}}, nil, &r)
			if err == nil {
				r.Release()
			}
			done <- err
		}()
	}
	waitFor(t, 5*time.Second, "2 held calls", func() bool {
		p.h.mu.Lock()
		defer p.h.mu.Unlock()
		return len(p.h.held) == 2
	})
	// Ordinary calls are at grant - reserve = 2: a third waits...
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	var r2 Result
	err = p.req.Call(ctx, readCallMsg(20, 1), nil, &r2)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ordinary call past the reserve: %v", err)
	}
	// ...while a reserved one goes through.
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.req.CallReserved(ctx, readCallMsg(21, 1), nil, &r2); err != nil {
		t.Fatalf("reserved call: %v", err)
	}
	checkRead(t, &r2, 21, 1, false)
	r2.Release()
	p.h.releaseHeld(false)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
