package reverse_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/verbs"
)

// A hostile RDMA server on raw verbs (pure-Go iWARP) with four reverse
// gateway connections, one per TCP client. It holds client B's READ and
// WRITE calls and, through each of the other three connections, aims one
// attack at the rkeys B's calls exposed: an RDMA Write into B's READ
// buffer, an RDMA Read of B's WRITE payload, and a Send With Invalidate
// naming B's READ rkey. With one protection domain per connection (RFC
// 8166 §8.1.1) each attack fails at the gateway; B's calls then complete
// with exactly their own bytes.

type crossServer struct {
	t        *testing.T
	dev      verbs.Device
	ln       verbs.Listener
	mu       sync.Mutex
	accepted int
	victim   chan crossVictim // B's exposed segments, once both calls are in
	attacks  [3]chan verbs.Status
	done     chan struct{} // closed when every attack has run: B is answered
	written  chan []byte   // what B's WRITE carried, read honestly
}

type crossVictim struct {
	readSeg  rdmarpc.Segment // B's READ Write chunk (remote write)
	writeSeg rdmarpc.Segment // B's WRITE Read chunk (remote read)
}

const (
	crossAttackers = 3
	crossReadLen   = 4096
)

func startCrossServer(t *testing.T) *crossServer {
	s := &crossServer{t: t, victim: make(chan crossVictim, 1), done: make(chan struct{}), written: make(chan []byte, 1)}
	for i := range s.attacks {
		s.attacks[i] = make(chan verbs.Status, 1)
	}
	s.dev, s.ln = startRDMAServer(t, func(req verbs.ConnRequest) func(context.Context) {
		s.mu.Lock()
		idx := s.accepted
		s.accepted++
		s.mu.Unlock()
		return func(ctx context.Context) { s.serve(ctx, req, idx) }
	})
	return s
}

func (s *crossServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// crossConn is one accepted connection and its buffers.
type crossConn struct {
	conn    verbs.Conn
	cq      verbs.CQ
	mr      verbs.MR
	mem     []byte
	recvs   []verbs.RecvWR
	sendBuf []byte
	dataBuf []byte
	wcs     [1]verbs.WC
}

const crossRecvs = 8

func (s *crossServer) serve(ctx context.Context, req verbs.ConnRequest, idx int) {
	pc, err := acceptPeer(s.dev, req, peerOptions{nrecv: crossRecvs, recvSize: 4096, extra: 65536 + (1 << 20)})
	if err != nil {
		return
	}
	defer pc.close()
	c := &crossConn{conn: pc.conn, cq: pc.scq, mr: pc.mr, mem: pc.mem, recvs: pc.recvs, sendBuf: pc.rest[:65536], dataBuf: pc.rest[65536:]}
	if idx < crossAttackers {
		s.attacker(ctx, c, idx)
	} else {
		s.victimConn(ctx, c)
	}
}

// next waits for the next completion (polling: an attacker also watches
// its channel). ok is false when ctx ends.
func (c *crossConn) next(ctx context.Context, stop <-chan struct{}) (verbs.WC, bool) {
	for {
		if c.cq.Poll(c.wcs[:]) == 1 {
			return c.wcs[0], true
		}
		select {
		case <-ctx.Done():
			return verbs.WC{}, false
		case <-stop:
			return verbs.WC{}, false
		case <-time.After(time.Millisecond):
		}
	}
}

// wait returns the completion of op (skipping others), or the first error.
func (c *crossConn) wait(ctx context.Context, op verbs.Opcode) (verbs.WC, bool) {
	for {
		wc, ok := c.next(ctx, nil)
		if !ok || wc.Op == op || wc.Status != verbs.StatusSuccess {
			return wc, ok
		}
	}
}

// message decodes received message idx: its header and RPC XID/proc.
func (c *crossConn) message(wc verbs.WC, h *rdmarpc.Header) (rpc []byte, xid, proc uint32, ok bool) {
	msg := c.mem[int(wc.ID)*4096 : int(wc.ID)*4096+wc.ByteLen]
	hlen, err := h.Decode(msg, rdmarpc.DefaultLimits())
	if err != nil || len(msg) < hlen+24 {
		return nil, 0, 0, false
	}
	rpc = msg[hlen:]
	return rpc, binary.BigEndian.Uint32(rpc), binary.BigEndian.Uint32(rpc[20:]), true
}

// reply reposts receive idx and sends an RDMA_MSG reply of rpc with h's
// Write list.
func (c *crossConn) reply(ctx context.Context, idx uint64, out *rdmarpc.Header, rpc []byte) bool {
	hn, _ := out.Encode(c.sendBuf)
	m := hn + copy(c.sendBuf[hn:], rpc)
	sw := verbs.SendWR{ID: 200, Op: verbs.OpSend, SGL: []verbs.SGE{{Buf: c.sendBuf[:m], LKey: c.mr.LKey()}}, Signal: true}
	c.recvs[idx].Next = nil
	if c.conn.PostRecv(&c.recvs[idx]) != nil || c.conn.PostSend(&sw) != nil {
		return false
	}
	wc, ok := c.wait(ctx, verbs.OpSend)
	return ok && wc.Status == verbs.StatusSuccess
}

// attacker answers pings until B's segments are known, then runs attack
// number idx once and reports its completion status.
func (s *crossServer) attacker(ctx context.Context, c *crossConn, idx int) {
	var h rdmarpc.Header
	for {
		select {
		case v := <-s.victim:
			s.victim <- v // for the other attackers
			s.attacks[idx] <- s.attack(ctx, c, idx, v)
			return
		default:
		}
		wc, ok := c.next(ctx, s.victimReady())
		if !ok {
			continue
		}
		if wc.Status != verbs.StatusSuccess {
			return
		}
		if wc.Op != verbs.OpRecv {
			continue
		}
		_, xid, _, ok := c.message(wc, &h)
		if !ok {
			return
		}
		var out rdmarpc.Header
		out.Init(xid, 16, rdmarpc.ProcMsg)
		if !c.reply(ctx, wc.ID, &out, gwtest.BE32(nil, xid, 1, 0, 0, 0, 0)) { // NULL: accepted, success
			return
		}
	}
}

// victimReady is a channel closed once B's segments are known.
func (s *crossServer) victimReady() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for len(s.victim) == 0 {
			time.Sleep(time.Millisecond)
		}
		close(ch)
	}()
	return ch
}

func (s *crossServer) attack(ctx context.Context, c *crossConn, idx int, v crossVictim) verbs.Status {
	var wr verbs.SendWR
	switch idx {
	case 0: // write forged bytes into B's READ buffer
		n := copy(c.dataBuf, bytes.Repeat([]byte("EVIL"), crossReadLen/4))
		wr = verbs.SendWR{ID: 300, Op: verbs.OpRDMAWrite, SGL: []verbs.SGE{{Buf: c.dataBuf[:n], LKey: c.mr.LKey()}},
			Signal: true, RemoteAddr: v.readSeg.Offset, RKey: v.readSeg.Handle}
	case 1: // read B's WRITE payload
		wr = verbs.SendWR{ID: 300, Op: verbs.OpRDMARead, SGL: []verbs.SGE{{Buf: c.dataBuf[:v.writeSeg.Length], LKey: c.mr.LKey()}},
			Signal: true, RemoteAddr: v.writeSeg.Offset, RKey: v.writeSeg.Handle}
	case 2: // invalidate B's READ rkey
		var out rdmarpc.Header
		out.Init(0x0bad0bad, 16, rdmarpc.ProcMsg)
		hn, _ := out.Encode(c.sendBuf)
		m := hn + copy(c.sendBuf[hn:], gwtest.BE32(nil, 0x0bad0bad, 1, 0, 0, 0, 0))
		wr = verbs.SendWR{ID: 300, Op: verbs.OpSendInv, SGL: []verbs.SGE{{Buf: c.sendBuf[:m], LKey: c.mr.LKey()}},
			Signal: true, InvalidateRKey: v.readSeg.Handle}
	}
	if err := c.conn.PostSend(&wr); err != nil {
		return verbs.StatusGeneral
	}
	wc, ok := c.wait(ctx, wr.Op)
	if !ok {
		return verbs.StatusGeneral
	}
	if idx == 2 && wc.Status == verbs.StatusSuccess {
		// A Send completes when it has left; whether the gateway took the
		// invalidation shows in whether the connection survives it.
		select {
		case <-c.conn.Done():
			return verbs.StatusRemoteInvalidReq
		case <-time.After(500 * time.Millisecond):
		}
	}
	return wc.Status
}

// victimConn holds B's READ and WRITE until the attacks have run, then
// answers them honestly.
func (s *crossServer) victimConn(ctx context.Context, c *crossConn) {
	type held struct {
		recv      uint64
		xid, proc uint32
		seg       rdmarpc.Segment
		off       uint64
	}
	var calls []held
	var h rdmarpc.Header
	var v crossVictim
	for len(calls) < 2 {
		wc, ok := c.wait(ctx, verbs.OpRecv)
		if !ok || wc.Status != verbs.StatusSuccess {
			return
		}
		rpc, xid, proc, ok := c.message(wc, &h)
		if !ok {
			return
		}
		switch {
		case proc == 6 && len(h.Writes) == 1: // READ
			credLen := int(binary.BigEndian.Uint32(rpc[28:]))
			args := rpc[32+(credLen+3)&^3+8:]
			fhLen := int(binary.BigEndian.Uint32(args))
			off := binary.BigEndian.Uint64(args[4+(fhLen+3)&^3:])
			v.readSeg = h.Writes[0][0]
			calls = append(calls, held{wc.ID, xid, proc, v.readSeg, off})
		case proc == 7 && len(h.Reads) == 1: // WRITE, payload in one Read segment
			v.writeSeg = h.Reads[0].Segment
			calls = append(calls, held{recv: wc.ID, xid: xid, proc: proc, seg: v.writeSeg})
		default: // a ping
			var out rdmarpc.Header
			out.Init(xid, 16, rdmarpc.ProcMsg)
			if !c.reply(ctx, wc.ID, &out, gwtest.BE32(nil, xid, 1, 0, 0, 0, 0)) {
				return
			}
		}
	}
	s.victim <- v
	select {
	case <-s.done:
	case <-ctx.Done():
		return
	}
	for _, call := range calls {
		var out rdmarpc.Header
		out.Init(call.xid, 16, rdmarpc.ProcMsg)
		reply := gwtest.BE32(nil, call.xid, 1, 0, 0, 0, 0)
		if call.proc == 6 {
			data := readData(call.off, crossReadLen)
			copy(c.dataBuf, data)
			wr := verbs.SendWR{ID: 100, Op: verbs.OpRDMAWrite, SGL: []verbs.SGE{{Buf: c.dataBuf[:len(data)], LKey: c.mr.LKey()}},
				Signal: true, RemoteAddr: call.seg.Offset, RKey: call.seg.Handle}
			if c.conn.PostSend(&wr) != nil {
				return
			}
			if wc, ok := c.wait(ctx, verbs.OpRDMAWrite); !ok || wc.Status != verbs.StatusSuccess {
				s.t.Errorf("honest RDMA Write into B's READ buffer: %v", wc.Status)
				return
			}
			out.AppendWriteChunk(rdmarpc.Segment{Handle: call.seg.Handle, Length: uint32(len(data)), Offset: call.seg.Offset})
			reply = gwtest.BE32(reply, 0, 0, uint32(len(data)), 1, uint32(len(data)))
		} else {
			wr := verbs.SendWR{ID: 101, Op: verbs.OpRDMARead, SGL: []verbs.SGE{{Buf: c.dataBuf[:call.seg.Length], LKey: c.mr.LKey()}},
				Signal: true, RemoteAddr: call.seg.Offset, RKey: call.seg.Handle}
			if c.conn.PostSend(&wr) != nil {
				return
			}
			if wc, ok := c.wait(ctx, verbs.OpRDMARead); !ok || wc.Status != verbs.StatusSuccess {
				s.t.Errorf("honest RDMA Read of B's WRITE payload: %v", wc.Status)
				return
			}
			s.written <- bytes.Clone(c.dataBuf[:call.seg.Length])
			// NFS3_OK, wcc_data (no pre, no post), count, FILE_SYNC, verifier.
			reply = gwtest.BE32(reply, 0, 0, 0, call.seg.Length, 2, 0, 0)
		}
		if !c.reply(ctx, call.recv, &out, reply) {
			return
		}
	}
	// Keep answering pings until the test ends.
	for {
		wc, ok := c.wait(ctx, verbs.OpRecv)
		if !ok || wc.Status != verbs.StatusSuccess {
			return
		}
		_, xid, _, ok := c.message(wc, &h)
		if !ok {
			return
		}
		var out rdmarpc.Header
		out.Init(xid, 16, rdmarpc.ProcMsg)
		if !c.reply(ctx, wc.ID, &out, gwtest.BE32(nil, xid, 1, 0, 0, 0, 0)) {
			return
		}
	}
}

func TestReverseConnectionsCannotTouchEachOthersMemory(t *testing.T) {
	srv := startCrossServer(t)
	rev := startReverse(t, srv.ln.Addr().String(), scriptedV1Peer)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The attackers' clients first, one RDMA connection each, in order.
	for i := 0; i < crossAttackers; i++ {
		tr, err := nfsclient.DialTCP(ctx, rev.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		gwtest.WaitFor(t, 10*time.Second, "the attacker's RDMA connection", func() bool { return srv.count() == i+1 })
	}
	tr, err := nfsclient.DialTCP(ctx, rev.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	b := &nfsclient.V3{T: tr}
	fh := []byte("B's file")
	payload := make([]byte, 64<<10)
	for i := range payload {
		payload[i] = byte(i*13 + 5)
	}
	type readRes struct {
		data []byte
		err  error
	}
	readDone := make(chan readRes, 1)
	writeDone := make(chan error, 1)
	go func() {
		d, _, err := b.Read(ctx, fh, 8192, crossReadLen)
		readDone <- readRes{d, err}
	}()
	go func() {
		_, err := b.Write(ctx, fh, 0, payload, 2)
		writeDone <- err
	}()

	names := [crossAttackers]string{"RDMA Write into B's READ buffer", "RDMA Read of B's WRITE payload", "Send With Invalidate of B's rkey"}
	for i := range srv.attacks {
		select {
		case st := <-srv.attacks[i]:
			if st == verbs.StatusSuccess {
				t.Errorf("%s from another connection succeeded", names[i])
			} else {
				t.Logf("%s from another connection: %v", names[i], st)
			}
		case <-ctx.Done():
			t.Fatalf("%s never ran", names[i])
		}
	}
	close(srv.done)

	r := <-readDone
	if r.err != nil {
		t.Fatalf("B's READ: %v", r.err)
	}
	if bytes.Contains(r.data, []byte("EVIL")) || !bytes.Equal(r.data, readData(8192, crossReadLen)) {
		t.Errorf("B's READ returned wrong bytes (%q...)", r.data[:8])
	}
	if err := <-writeDone; err != nil {
		t.Fatalf("B's WRITE: %v", err)
	}
	select {
	case got := <-srv.written:
		if !bytes.Equal(got, payload) {
			t.Errorf("B's WRITE payload arrived changed")
		}
	default:
		t.Error("the server never read B's WRITE payload")
	}
}
