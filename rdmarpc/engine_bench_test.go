package rdmarpc

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/rdmagw/rdmagw/verbs/iwarp"
)

// benchHandler answers every call from one worker goroutine without
// allocating: a small inline reply, or (payload set) a reply whose item
// is payload, handed to Reply with a fresh reference each time.
type benchHandler struct {
	calls   chan *Call
	payload *Buffer
	done    chan struct{}
}

func (h *benchHandler) ServeCall(c *Call) { h.calls <- c }

func (h *benchHandler) run() {
	defer close(h.done)
	var m Message
	var head [8]byte
	trailer := put32s(trailerWord)
	for c := range h.calls {
		m.Reset()
		binary.BigEndian.PutUint32(head[:], c.XID())
		if h.payload == nil {
			m.Append(Piece{Data: head[:]})
		} else {
			binary.BigEndian.PutUint32(head[4:], uint32(len(h.payload.Bytes)))
			h.payload.Ref()
			m.Append(Piece{Data: head[:]})
			m.Append(Piece{Data: h.payload.Bytes, Item: true, Buf: h.payload})
			m.Append(Piece{Data: trailer})
		}
		c.Reply(&m)
	}
}

func benchPair(b *testing.B, payload int) (*RequesterConn, *engineSide, func()) {
	return benchPairShared(b, payload, 0)
}

// benchPairShared is benchPair with the responder's receives on a
// SharedRecv of srqDepth receives (0: its own).
func benchPairShared(b *testing.B, payload, srqDepth int) (*RequesterConn, *engineSide, func()) {
	prov := iwarp.New(iwarp.Config{})
	srv, cli := newEngineSide(b, prov), newEngineSide(b, prov)
	var shared *SharedRecv
	if srqDepth > 0 {
		var err error
		if shared, err = NewSharedRecv(srv.pool, SharedRecvConfig{Depth: srqDepth}); err != nil {
			b.Fatal(err)
		}
	}
	h := &benchHandler{calls: make(chan *Call, 256), done: make(chan struct{})}
	if payload > 0 {
		var err error
		if h.payload, err = srv.pool.Get(payload); err != nil {
			b.Fatal(err)
		}
		pattern(h.payload.Bytes, 1)
	}
	go h.run()
	ln, err := srv.dev.Listen("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	respCh := make(chan *ResponderConn, 1)
	go func() {
		req, err := ln.Accept(context.Background())
		ln.Close()
		if err != nil {
			respCh <- nil
			return
		}
		rc, err := AcceptResponder(req, srv.dev, ResponderConfig{Pool: srv.pool, SharedRecv: shared})
		respCh <- rc
		if err == nil {
			rc.Serve(context.Background(), h)
		}
	}()
	req, err := DialRequester(context.Background(), cli.dev, ln.Addr().String(), RequesterConfig{Pool: cli.pool})
	if err != nil {
		b.Fatal(err)
	}
	resp := <-respCh
	return req, cli, func() {
		req.Close()
		if resp != nil {
			resp.Close()
		}
		close(h.calls)
		<-h.done
		if h.payload != nil {
			h.payload.Release()
		}
		if shared != nil {
			shared.Close()
		}
	}
}

// BenchmarkEngineInline4K: one 4 KiB call inline, a small inline reply;
// /srq with the receive from a SharedRecv (both 0 allocs/op).
func BenchmarkEngineInline4K(b *testing.B) {
	b.Run("own", func(b *testing.B) { benchInline4K(b, 0) })
	b.Run("srq", func(b *testing.B) { benchInline4K(b, 256) })
}

func benchInline4K(b *testing.B, srqDepth int) {
	req, _, stop := benchPairShared(b, 0, srqDepth)
	defer stop()
	body := make([]byte, 4096-MinHeaderSize)
	var m Message
	var r Result
	ctx := context.Background()
	call := func(xid uint32) {
		m.Reset()
		m.XID = xid
		binary.BigEndian.PutUint32(body, xid)
		m.Append(Piece{Data: body})
		if err := req.Call(ctx, &m, nil, &r); err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
	for i := range 200 { // learn the grant, warm the pools
		call(uint32(i))
	}
	xid := uint32(1 << 20)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		xid++
		call(xid)
	}
}

// BenchmarkEngineWriteChunk1M: a small call, a 1 MiB reply item RDMA
// Written into the requester's Write chunk.
func BenchmarkEngineWriteChunk1M(b *testing.B) {
	const n = 1 << 20
	req, _, stop := benchPair(b, n)
	defer stop()
	var m Message
	var r Result
	var head [12]byte
	plan := &ReplyPlan{WriteChunks: []int{n}}
	ctx := context.Background()
	call := func(xid uint32) {
		m.Reset()
		m.XID = xid
		binary.BigEndian.PutUint32(head[:], xid)
		binary.BigEndian.PutUint32(head[4:], opRead)
		binary.BigEndian.PutUint32(head[8:], n)
		m.Append(Piece{Data: head[:]})
		if err := req.Call(ctx, &m, plan, &r); err != nil {
			b.Fatal(err)
		}
		if len(r.Chunks) != 1 || len(r.Chunks[0]) != n {
			b.Fatalf("chunk of %d bytes", len(r.Chunks[0]))
		}
		r.Release()
	}
	for i := range 20 {
		call(uint32(i))
	}
	xid := uint32(1 << 20)
	b.SetBytes(n)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		xid++
		call(xid)
	}
}

// BenchmarkEngineReadChunk1M: a call whose 1 MiB item the responder pulls
// from the requester's Read chunk by RDMA Read (an NFS WRITE).
func BenchmarkEngineReadChunk1M(b *testing.B) {
	const n = 1 << 20
	req, cli, stop := benchPair(b, 0)
	defer stop()
	item, err := cli.pool.Get(n)
	if err != nil {
		b.Fatal(err)
	}
	defer item.Release()
	pattern(item.Bytes, 3)
	var m Message
	var r Result
	var head [12]byte
	trailer := put32s(trailerWord)
	ctx := context.Background()
	call := func(xid uint32) {
		m.Reset()
		m.XID = xid
		binary.BigEndian.PutUint32(head[:], xid)
		binary.BigEndian.PutUint32(head[4:], opWrite)
		binary.BigEndian.PutUint32(head[8:], n)
		m.Append(Piece{Data: head[:]})
		m.Append(Piece{Data: item.Bytes, Item: true, Buf: item})
		m.Append(Piece{Data: trailer})
		if err := req.Call(ctx, &m, nil, &r); err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
	for i := range 20 {
		call(uint32(i))
	}
	xid := uint32(1 << 20)
	b.SetBytes(n)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		xid++
		call(xid)
	}
}
