package rdmarpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
	"github.com/rdmagw/rdmagw/verbs/iwarp"
)

// A raw verbs client, no requester engine, feeding the responder what a
// broken or hostile peer might send.

type rawClient struct {
	t     testing.TB
	dev   verbs.Device
	pd    verbs.PD
	scq   verbs.CQ
	rcq   verbs.CQ
	conn  verbs.Conn
	mem   *verbs.Memory
	mr    verbs.MR // the whole region: local, remote read and write
	got   chan []byte
	recvd atomic.Uint32 // messages received
	// collecting: collect runs (and closes done when it ends).
	collecting atomic.Bool
	stopCh     chan struct{}
	done       chan struct{}
	once       sync.Once
}

const (
	rawRecvs    = 16
	rawRecvSize = 8192
	rawSendOff  = rawRecvs * rawRecvSize
	rawDataOff  = 1 << 20 // Read chunk sources and Write chunk targets
	rawMemSize  = 4 << 20
)

func dialRaw(t testing.TB, addr string, pdata []byte) *rawClient {
	t.Helper()
	c := dialRawConn(t, addr, pdata)
	c.collecting.Store(true)
	go c.collect()
	return c
}

// dialRawConn connects and posts the receives; the caller collects what
// arrives (collect, or polling rcq itself).
func dialRawConn(t testing.TB, addr string, pdata []byte) *rawClient {
	t.Helper()
	if len(pdata) >= PrivateDataSize {
		// One region serves all the raw client's calls, so it does not
		// offer Send With Invalidate: a reply would revoke it for good.
		pdata = bytes.Clone(pdata)
		pdata[5] &^= privFlagRemoteInvalidate
	}
	prov := iwarp.New(iwarp.Config{})
	d, err := prov.Open("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	c := &rawClient{t: t, dev: d, got: make(chan []byte, 64), stopCh: make(chan struct{}), done: make(chan struct{})}
	c.pd, _ = d.AllocPD()
	c.scq, _ = d.CreateCQ(256)
	c.rcq, _ = d.CreateCQ(256)
	if c.mem, err = verbs.Alloc(rawMemSize); err != nil {
		t.Fatal(err)
	}
	if c.mr, err = c.pd.Register(c.mem.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteRead|verbs.AccessRemoteWrite); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.conn, err = d.Dial(ctx, addr, verbs.ConnOptions{PD: c.pd, SendCQ: c.scq, RecvCQ: c.rcq,
		MaxSendWR: 64, MaxRecvWR: rawRecvs, PrivateData: pdata})
	if err != nil {
		t.Fatal(err)
	}
	for i := range rawRecvs {
		c.postRecv(i)
	}
	t.Cleanup(c.close)
	return c
}

func (c *rawClient) postRecv(i int) {
	b := c.mem.Bytes()[i*rawRecvSize : (i+1)*rawRecvSize]
	c.conn.PostRecv(&verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{{Buf: b, LKey: c.mr.LKey()}}})
}

func (c *rawClient) collect() {
	defer close(c.done)
	wcs := make([]verbs.WC, 16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		n := c.rcq.Poll(wcs)
		for _, wc := range wcs[:n] {
			if wc.Status != verbs.StatusSuccess {
				continue
			}
			i := int(wc.ID)
			c.got <- bytes.Clone(c.mem.Bytes()[i*rawRecvSize : i*rawRecvSize+wc.ByteLen])
			c.postRecv(i)
			c.recvd.Add(1)
		}
		if n == 0 && c.rcq.Wait(ctx) != nil {
			return
		}
	}
}

func (c *rawClient) close() { c.once.Do(c.doClose) }

func (c *rawClient) doClose() {
	c.conn.Close()
	close(c.stopCh)
	if c.collecting.Load() {
		<-c.done
	}
	c.mr.Deregister()
	c.mem.Free()
	c.scq.Close()
	c.rcq.Close()
	c.dev.Close()
}

// send posts one Send of b and waits for its completion.
func (c *rawClient) send(b []byte) verbs.Status {
	buf := c.mem.Bytes()[rawSendOff : rawSendOff+len(b)]
	copy(buf, b)
	if err := c.conn.PostSend(&verbs.SendWR{ID: 1, Op: verbs.OpSend, Signal: true,
		SGL: []verbs.SGE{{Buf: buf, LKey: c.mr.LKey()}}}); err != nil {
		c.t.Fatalf("post send: %v", err)
	}
	wcs := make([]verbs.WC, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for c.scq.Poll(wcs) == 0 {
		if err := c.scq.Wait(ctx); err != nil {
			c.t.Fatalf("send completion: %v", err)
		}
	}
	return wcs[0].Status
}

// expect returns the next message received, or nil after d.
func (c *rawClient) expect(d time.Duration) []byte {
	select {
	case b := <-c.got:
		return b
	case <-time.After(d):
		return nil
	}
}

// data returns a segment naming n bytes of the client's data area at off,
// filled with a pattern.
func (c *rawClient) data(off, n, seed int) Segment {
	b := c.mem.Bytes()[rawDataOff+off : rawDataOff+off+n]
	pattern(b, seed)
	return Segment{Handle: c.mr.RKey(), Length: uint32(n), Offset: c.mr.Addr() + uint64(rawDataOff+off)}
}

// rpcAt puts b at off in the data area and returns the segment naming it.
func (c *rawClient) rpcAt(off int, b []byte) Segment {
	copy(c.dataBytes(off, len(b)), b)
	return Segment{Handle: c.mr.RKey(), Length: uint32(len(b)), Offset: c.mr.Addr() + uint64(rawDataOff+off)}
}

func (c *rawClient) dataBytes(off, n int) []byte {
	return c.mem.Bytes()[rawDataOff+off : rawDataOff+off+n]
}

// validCall sends a small inline READ and checks its reply: the
// connection is still sane.
func (c *rawClient) validCall(xid uint32) {
	c.t.Helper()
	msg := append(fixed(xid, 1, 32, ProcMsg).u32(0, 0, 0).bytes(), put32s(xid, opRead, 8)...)
	if st := c.send(msg); st != verbs.StatusSuccess {
		c.t.Fatalf("valid call: send %v", st)
	}
	got := c.expect(5 * time.Second)
	want := append(fixed(xid, 1, 32, ProcMsg).u32(0, 0, 0).bytes(), put32s(xid, 8)...)
	want = append(append(want, patterned(8, int(xid))...), put32s(trailerWord)...)
	// The credit word is the grant: min(32, configured limit).
	if len(got) != len(want) || !bytes.Equal(got[:8], want[:8]) || !bytes.Equal(got[12:], want[12:]) {
		c.t.Fatalf("valid call after bad input:\n got % x\nwant % x", got, want)
	}
}

type answer int

const (
	ansDrop answer = iota
	ansVers
	ansChunk
	ansReply   // a normal reply, checked by the case
	ansGarbage // an RDMA_MSG with an RPC reply: accepted, GARBAGE_ARGS
)

// TestResponderBadInput: every malformed message gets its specified
// answer, and the connection stays usable; with version two enabled too,
// where a version-one client must see exactly the same.
func TestResponderBadInput(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "v1only", true: "v2enabled"}[v2], func(t *testing.T) { testResponderBadInput(t, v2) })
	}
}

func testResponderBadInput(t *testing.T, v2 bool) {
	check := goroutineBaseline(t)
	p := newEnginePair(t, pairOpts{noRequester: true, rcfg: ResponderConfig{V2: v2}})
	c := dialRaw(t, p.rawAddr, linuxPrivateData)
	if err := <-p.accepted; err != nil {
		t.Fatal(err)
	}
	c.validCall(1)

	msgHdr := func(xid uint32) *wire { return fixed(xid, 1, 32, ProcMsg) }
	body := func(xid uint32, words ...uint32) []byte { return put32s(append([]uint32{xid}, words...)...) }
	seg := Segment{Handle: c.mr.RKey(), Length: 100, Offset: c.mr.Addr() + rawDataOff}
	manyWriteChunks := msgHdr(0x31).u32(0)
	for range DefaultMaxWriteChunks + 1 {
		manyWriteChunks.u32(1, 0)
	}
	manySegs := msgHdr(0x32).u32(0, 1, DefaultMaxSegmentsPerChunk+1)
	for range DefaultMaxSegmentsPerChunk + 1 {
		manySegs.seg(seg)
	}

	cases := []struct {
		name   string
		msg    []byte
		want   answer
		xid    uint32
		metric string
		check  func(t *testing.T, got []byte)
	}{
		{name: "wrong version 2", msg: fixed(0x10, 2, 32, ProcMsg).u32(0, 0, 0).bytes(), want: ansVers, xid: 0x10, metric: "error_ERR_VERS"},
		{name: "wrong version 0, fixed words only", msg: fixed(0x11, 0, 32, ProcMsg).bytes(), want: ansVers, xid: 0x11},
		{name: "version 2 with 8 bytes", msg: put32s(0x12, 2), want: ansVers, xid: 0x12},
		{name: "4 bytes", msg: put32s(0x13), want: ansDrop, metric: "drop_short"},
		{name: "8 bytes, version 1 (<16)", msg: put32s(0x14, 1), want: ansChunk, xid: 0x14},
		{name: "12 bytes (<16)", msg: put32s(0x15, 1, 32), want: ansChunk, xid: 0x15},
		{name: "20 bytes RDMA_MSG (<28)", msg: msgHdr(0x16).u32(0).bytes(), want: ansChunk, xid: 0x16},
		{name: "bad proc 7", msg: fixed(0x17, 1, 32, 7).u32(0, 0, 0).bytes(), want: ansChunk, xid: 0x17, metric: "error_ERR_CHUNK"},
		{name: "RDMA_MSGP", msg: fixed(0x18, 1, 32, ProcMsgP).u32(4, 1024, 0, 0, 0).bytes(), want: ansChunk, xid: 0x18},
		{name: "RDMA_DONE", msg: fixed(0x19, 1, 32, ProcDone).bytes(), want: ansDrop, metric: "drop_rdma_done"},
		{name: "RDMA_ERROR ERR_CHUNK from client", msg: fixed(0x1a, 1, 32, ProcError).u32(2).bytes(), want: ansDrop, metric: "drop_rdma_error"},
		{name: "RDMA_ERROR with bad code", msg: fixed(0x1b, 1, 32, ProcError).u32(9).bytes(), want: ansDrop},
		{name: "RDMA_ERROR of version 2", msg: fixed(0x1c, 2, 32, ProcError).u32(1, 2, 2).bytes(), want: ansDrop},
		{name: "bad discriminator", msg: msgHdr(0x1d).u32(2, 0, 0).bytes(), want: ansChunk, xid: 0x1d},
		{name: "bad Reply chunk discriminator", msg: msgHdr(0x1e).u32(0, 0, 7).bytes(), want: ansChunk, xid: 0x1e},
		{name: "unterminated Read list", msg: msgHdr(0x1f).u32(1, 12, seg.Handle, 100).bytes(), want: ansChunk, xid: 0x1f},
		{name: "Read list without end", msg: msgHdr(0x20).read(12, seg).bytes(), want: ansChunk, xid: 0x20},
		{name: "Position not a multiple of 4", msg: append(msgHdr(0x21).read(14, seg).u32(0, 0, 0).bytes(), body(0x21, opWrite, 100, trailerWord)...), want: ansChunk, xid: 0x21},
		// RFC 8166 §4.5.2: chunks that do not fit the Payload stream get
		// GARBAGE_ARGS; an rdma_xid that is not the XID, ERR_CHUNK.
		{name: "Position beyond the message", msg: append(msgHdr(0x22).read(400, seg).u32(0, 0, 0).bytes(), body(0x22, opWrite, 100, trailerWord)...), want: ansGarbage, xid: 0x22, metric: "error_GARBAGE_ARGS"},
		{name: "rdma_xid is not the RPC XID", msg: append(msgHdr(0x40).u32(0, 0, 0).bytes(), body(0x41, opRead, 8)...), want: ansChunk, xid: 0x40},
		{name: "Long call whose rdma_xid is not the RPC XID", msg: fixed(0x42, 1, 32, ProcNoMsg).read(0, c.rpcAt(16384, put32s(0x43, opRead, 8))).u32(0, 0, 0).bytes(), want: ansChunk, xid: 0x42},
		{name: "Positions decreasing", msg: append(msgHdr(0x23).read(16, seg).read(12, seg).u32(0, 0, 0).bytes(), body(0x23, opWrite, 100, trailerWord)...), want: ansChunk, xid: 0x23},
		{name: "second chunk inside the first", msg: append(msgHdr(0x24).read(12, seg).read(16, seg).u32(0, 0, 0).bytes(), body(0x24, opWrite, 100, trailerWord)...), want: ansGarbage, xid: 0x24},
		{name: "Read segment of 4 GiB", msg: append(msgHdr(0x25).read(12, Segment{Handle: seg.Handle, Length: 0xffffffff, Offset: seg.Offset}).u32(0, 0, 0).bytes(), body(0x25, opWrite, 100, trailerWord)...), want: ansChunk, xid: 0x25},
		{name: "Write segment of 4 GiB", msg: append(msgHdr(0x26).u32(0, 1, 1).seg(Segment{Handle: seg.Handle, Length: 0xffffffff, Offset: seg.Offset}).u32(0, 0).bytes(), body(0x26, opRead, 10)...), want: ansChunk, xid: 0x26},
		{name: "Read chunk larger than any pool buffer", msg: append(msgHdr(0x27).read(12, Segment{Handle: seg.Handle, Length: 2 << 20, Offset: seg.Offset}).u32(0, 0, 0).bytes(), body(0x27, opWrite, 2<<20)...), want: ansChunk, xid: 0x27},
		{name: "too many Write chunks", msg: append(manyWriteChunks.u32(0, 0).bytes(), body(0x31, opRead, 1)...), want: ansChunk, xid: 0x31},
		{name: "too many segments in a chunk", msg: append(manySegs.u32(0, 0).bytes(), body(0x32, opRead, 1)...), want: ansChunk, xid: 0x32},
		{name: "Position-Zero Read chunk in RDMA_MSG", msg: append(msgHdr(0x33).read(0, seg).u32(0, 0, 0).bytes(), body(0x33, opRead, 1)...), want: ansChunk, xid: 0x33},
		{name: "RDMA_NOMSG with only a Reply chunk", msg: fixed(0x34, 1, 32, ProcNoMsg).u32(0, 0, 1, 1).seg(seg).bytes(), want: ansChunk, xid: 0x34},
		{name: "RDMA_MSG without an RPC message", msg: msgHdr(0x3c).u32(0, 0, 0).bytes(), want: ansChunk, xid: 0x3c},
		{name: "Long call with an empty Position-Zero chunk", msg: fixed(0x3d, 1, 32, ProcNoMsg).read(0, Segment{Handle: seg.Handle, Offset: seg.Offset}).u32(0, 0, 0).bytes(), want: ansChunk, xid: 0x3d},
		{name: "RDMA_NOMSG with no chunks", msg: fixed(0x35, 1, 32, ProcNoMsg).u32(0, 0, 0).bytes(), want: ansChunk, xid: 0x35},
		{name: "Write chunk too small for the reply", msg: append(msgHdr(0x36).u32(0, 1, 1).seg(Segment{Handle: seg.Handle, Length: 50, Offset: seg.Offset}).u32(0, 0).bytes(), body(0x36, opRead, 100)...), want: ansChunk, xid: 0x36},
		{name: "Reply chunk too small for the reply", msg: append(msgHdr(0x37).u32(0, 0, 1, 1).seg(Segment{Handle: seg.Handle, Length: 1000, Offset: seg.Offset}).bytes(), body(0x37, opBig, 5000)...), want: ansChunk, xid: 0x37},
		{name: "no Reply chunk for a long reply", msg: append(msgHdr(0x38).u32(0, 0, 0).bytes(), body(0x38, opBig, 5000)...), want: ansChunk, xid: 0x38},
		{
			name: "zero-length Read segment", want: ansReply,
			msg: append(msgHdr(0x39).read(12, Segment{Handle: 0xbad, Length: 0, Offset: 1}).u32(0, 0, 0).bytes(), body(0x39, opWrite, 0, trailerWord)...),
			check: func(t *testing.T, got []byte) {
				want := append(msgHdr(0x39).u32(0, 0, 0).bytes(), put32s(0x39, 0, sum32(nil))...)
				if !bytes.Equal(got, want) {
					t.Fatalf("got % x\nwant % x", got, want)
				}
			},
		},
		{
			name: "zero-length Write segments returned at zero", want: ansReply,
			msg: append(msgHdr(0x3a).u32(0, 1, 2).seg(Segment{Handle: seg.Handle, Length: 0, Offset: seg.Offset}).seg(c.data(8192, 64, 0xc5)).u32(0, 0).bytes(), body(0x3a, opRead, 10)...),
			check: func(t *testing.T, got []byte) {
				w := c.data(8192, 0, 0)
				w.Length = 10
				want := append(msgHdr(0x3a).u32(0, 1, 2).seg(Segment{Handle: seg.Handle, Offset: seg.Offset}).seg(w).u32(0, 0).bytes(), put32s(0x3a, 10, trailerWord)...)
				if !bytes.Equal(got, want) || !bytes.Equal(c.dataBytes(8192, 10), patterned(10, 0x3a)) {
					t.Fatalf("got % x\nwant % x", got, want)
				}
				// Bytes 10.. of the segment still hold what c.data put there.
				if b := c.dataBytes(8192+10, 2); !bytes.Equal(b, patterned(12, 0xc5)[10:]) {
					t.Fatalf("the responder wrote past the item (XDR pad?): % x", b)
				}
			},
		},
		{
			name: "valid WRITE through a Read chunk, unaligned length", want: ansReply,
			msg: append(msgHdr(0x3b).read(12, c.data(4096, 101, 0x3b)).u32(0, 0, 0).bytes(), body(0x3b, opWrite, 101, trailerWord)...),
			check: func(t *testing.T, got []byte) {
				want := append(msgHdr(0x3b).u32(0, 0, 0).bytes(), put32s(0x3b, 0, sum32(patterned(101, 0x3b)))...)
				if !bytes.Equal(got, want) {
					t.Fatalf("got % x\nwant % x", got, want)
				}
			},
		},
	}
	if len(cases) < 20 {
		t.Fatalf("only %d cases", len(cases))
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := p.rmet.get(tc.metric)
			if st := c.send(tc.msg); st != verbs.StatusSuccess {
				t.Fatalf("send: %v", st)
			}
			wait := 5 * time.Second
			if tc.want == ansDrop {
				wait = 300 * time.Millisecond
			}
			got := c.expect(wait)
			switch tc.want {
			case ansDrop:
				if got != nil {
					t.Fatalf("dropped message answered: % x", got)
				}
			case ansVers:
				want := put32s(tc.xid, binary.BigEndian.Uint32(tc.msg[4:]), 128, uint32(ProcError), uint32(ErrCodeVers), 1, 1)
				if len(got) != ErrVersSize || !bytes.Equal(got[:8], want[:8]) || !bytes.Equal(got[12:], want[12:]) {
					t.Fatalf("got % x, want ERR_VERS % x", got, want)
				}
			case ansChunk:
				want := put32s(tc.xid, 1, 0, uint32(ProcError), uint32(ErrCodeChunk))
				if len(got) != ErrChunkSize || !bytes.Equal(got[:8], want[:8]) || !bytes.Equal(got[12:], want[12:]) {
					t.Fatalf("got % x, want ERR_CHUNK % x", got, want)
				}
				if g := binary.BigEndian.Uint32(got[8:]); g == 0 {
					t.Fatalf("ERR_CHUNK grants 0 credits")
				}
			case ansGarbage:
				want := append(msgHdr(tc.xid).u32(0, 0, 0).bytes(), put32s(tc.xid, 1, 0, 0, 0, 4)...)
				if len(got) != len(want) || !bytes.Equal(got[:8], want[:8]) || !bytes.Equal(got[12:], want[12:]) {
					t.Fatalf("got % x, want GARBAGE_ARGS % x", got, want)
				}
			case ansReply:
				tc.check(t, got)
			}
			if tc.metric != "" {
				// Counted right after the answer is posted: it may trail
				// the answer's arrival by a moment.
				waitFor(t, 2*time.Second, "metric "+tc.metric, func() bool { return p.rmet.get(tc.metric) > before })
			}
			c.validCall(uint32(0x1000 + i))
		})
	}
	p.closeRaw(t, c)
	check()
}

// closeRaw ends a bad-input test: no call left outstanding, and after
// both ends are closed no responder pool memory in use.
func (p *enginePair) closeRaw(t *testing.T, c *rawClient) {
	t.Helper()
	if n := p.resp.Outstanding(); n != 0 {
		t.Errorf("%d calls outstanding after the cases", n)
	}
	p.close()
	c.close()
	if n := p.srv.pool.InUse(); n != 0 {
		t.Errorf("responder pool: %d bytes in use after close", n)
	}
}

// Without RFC 8797 private data the reply threshold is 1 KiB.
func TestResponderNoPrivateData(t *testing.T) {
	p := newEnginePair(t, pairOpts{noRequester: true})
	c := dialRaw(t, p.rawAddr, nil)
	if err := <-p.accepted; err != nil {
		t.Fatal(err)
	}
	if p.resp.InlineSend() != DefaultInlineSize {
		t.Fatalf("inline send %d", p.resp.InlineSend())
	}
	c.validCall(1)
	c.send(append(fixed(2, 1, 1, ProcMsg).u32(0, 0, 0).bytes(), put32s(2, opBig, 1000)...))
	if got := c.expect(5 * time.Second); len(got) != ErrChunkSize || binary.BigEndian.Uint32(got[16:]) != uint32(ErrCodeChunk) {
		t.Fatalf("a 1 KiB+ reply without a Reply chunk: got % x", got)
	}
	// The grant: what the client asked (1), never 0.
	c.send(append(fixed(3, 1, 0, ProcMsg).u32(0, 0, 0).bytes(), put32s(3, opRead, 1)...))
	if got := c.expect(5 * time.Second); len(got) < 16 || binary.BigEndian.Uint32(got[8:]) != 1 {
		t.Fatalf("credit request 0: reply % x", got)
	}
}

// Calls beyond the credit limit are dropped and counted; the connection
// survives and serves the calls within the limit.
func TestResponderCreditOverrun(t *testing.T) {
	p := newEnginePair(t, pairOpts{noRequester: true, rcfg: ResponderConfig{Credits: 2}})
	c := dialRaw(t, p.rawAddr, linuxPrivateData)
	if err := <-p.accepted; err != nil {
		t.Fatal(err)
	}
	hold := func(xid uint32) []byte {
		return append(fixed(xid, 1, 2, ProcMsg).u32(0, 0, 0).bytes(), put32s(xid, opHold)...)
	}
	for xid := uint32(1); xid <= 5; xid++ {
		c.send(hold(xid))
	}
	waitFor(t, 5*time.Second, "overrun counted", func() bool { return p.rmet.get("drop_credit_overrun") == 3 })
	if got := c.expect(200 * time.Millisecond); got != nil {
		t.Fatalf("overrun answered: % x", got)
	}
	if n := p.h.releaseHeld(false); n != 2 {
		t.Fatalf("%d calls reached the handler, credit limit 2", n)
	}
	for range 2 {
		got := c.expect(5 * time.Second)
		if len(got) < 28 || binary.BigEndian.Uint32(got[8:]) != 2 {
			t.Fatalf("reply % x", got)
		}
	}
	c.validCall(9)
}

// A Read chunk with a bad rkey makes the RDMA Read fail: the connection
// is torn down, counted and logged, and Serve returns why.
func TestResponderBadRKeyDisconnects(t *testing.T) {
	check := goroutineBaseline(t)
	p := newEnginePair(t, pairOpts{noRequester: true})
	c := dialRaw(t, p.rawAddr, linuxPrivateData)
	if err := <-p.accepted; err != nil {
		t.Fatal(err)
	}
	c.validCall(1)
	bad := Segment{Handle: c.mr.RKey() ^ 0x5500, Length: 100, Offset: c.mr.Addr() + rawDataOff}
	c.send(append(fixed(2, 1, 32, ProcMsg).read(12, bad).u32(0, 0, 0).bytes(), put32s(2, opWrite, 100, trailerWord)...))
	select {
	case err := <-p.served:
		if !errors.Is(err, ErrConnClosed) {
			t.Fatalf("Serve returned %v", err)
		}
		t.Logf("Serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("connection survived an RDMA Read with a bad rkey")
	}
	if p.rmet.get("rdma_failed_RDMA_READ") != 1 || p.rmet.get("down") != 1 {
		t.Errorf("metrics %v", p.rmet.n)
	}
	p.close()
	c.close()
	if n := p.srv.pool.InUse(); n != 0 {
		t.Errorf("responder pool: %d bytes in use", n)
	}
	check()
}

// A Send larger than the receive buffers fails at the transport: the
// connection ends cleanly.
func TestResponderOversizedSend(t *testing.T) {
	p := newEnginePair(t, pairOpts{noRequester: true})
	c := dialRaw(t, p.rawAddr, linuxPrivateData)
	if err := <-p.accepted; err != nil {
		t.Fatal(err)
	}
	c.send(append(fixed(2, 1, 32, ProcMsg).u32(0, 0, 0).bytes(), make([]byte, 6000)...))
	select {
	case err := <-p.served:
		if !errors.Is(err, ErrConnClosed) {
			t.Fatalf("Serve returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("connection survived an oversized Send")
	}
	p.close()
	if n := p.srv.pool.InUse(); n != 0 {
		t.Errorf("responder pool: %d bytes in use", n)
	}
}

// Multi-segment chunks both ways: a Read chunk gathered from many
// segments (with at most MaxReadsOutstanding Reads in flight), a Write
// chunk and a Reply chunk filled segment by segment.
func TestResponderMultiSegmentChunks(t *testing.T) {
	p := newEnginePair(t, pairOpts{noRequester: true, rcfg: ResponderConfig{MaxReadsOutstanding: 3}})
	c := dialRaw(t, p.rawAddr, linuxPrivateData)
	if err := <-p.accepted; err != nil {
		t.Fatal(err)
	}
	hdr := func(xid uint32) *wire { return fixed(xid, 1, 32, ProcMsg) }

	// WRITE: 40 segments of 100 bytes, scattered, one Read chunk.
	w := hdr(1)
	var item []byte
	for i := range 40 {
		s := c.data(i*256, 100, 1000+i)
		item = append(item, c.dataBytes(i*256, 100)...)
		w.read(12, s)
	}
	c.send(append(w.u32(0, 0, 0).bytes(), put32s(1, opWrite, 4000, trailerWord)...))
	got := c.expect(5 * time.Second)
	if want := append(hdr(1).u32(0, 0, 0).bytes(), put32s(1, 0, sum32(item))...); !bytes.Equal(got, want) {
		t.Fatalf("WRITE from 40 segments: got % x\nwant % x", got, want)
	}
	if peak := p.resp.readsPeak.Load(); peak != 3 {
		t.Errorf("RDMA Reads in flight peaked at %d, limit 3", peak)
	}

	// READ 300 into a Write chunk of 3 x 128.
	segs := []Segment{c.data(0x20000, 128, 7), c.data(0x20200, 128, 7), c.data(0x20400, 128, 7)}
	c.send(append(hdr(2).u32(0, 1, 3).seg(segs[0]).seg(segs[1]).seg(segs[2]).u32(0, 0).bytes(), put32s(2, opRead, 300)...))
	got = c.expect(5 * time.Second)
	segs[2].Length = 44
	if want := append(hdr(2).u32(0, 1, 3).seg(segs[0]).seg(segs[1]).seg(segs[2]).u32(0, 0).bytes(), put32s(2, 300, trailerWord)...); !bytes.Equal(got, want) {
		t.Fatalf("READ reply: got % x\nwant % x", got, want)
	}
	data := append(append(bytes.Clone(c.dataBytes(0x20000, 128)), c.dataBytes(0x20200, 128)...), c.dataBytes(0x20400, 44)...)
	if !bytes.Equal(data, patterned(300, 2)) {
		t.Fatal("READ data split across segments differs")
	}
	if !bytes.Equal(c.dataBytes(0x20400+44, 84), patterned(128, 7)[44:]) {
		t.Fatal("bytes past the item in the last segment were written")
	}

	// BIG 5000 into a Reply chunk of 3 x 2048: RDMA_NOMSG.
	rs := []Segment{c.data(0x30000, 2048, 9), c.data(0x31000, 2048, 9), c.data(0x32000, 2048, 9)}
	c.send(append(hdr(3).u32(0, 0, 1, 3).seg(rs[0]).seg(rs[1]).seg(rs[2]).bytes(), put32s(3, opBig, 5000)...))
	got = c.expect(5 * time.Second)
	rs[2].Length = 5008 - 4096
	if want := fixed(3, 1, 32, ProcNoMsg).u32(0, 0, 1, 3).seg(rs[0]).seg(rs[1]).seg(rs[2]).bytes(); !bytes.Equal(got, want) {
		t.Fatalf("Reply chunk reply: got % x\nwant % x", got, want)
	}
	reply := append(append(bytes.Clone(c.dataBytes(0x30000, 2048)), c.dataBytes(0x31000, 2048)...), c.dataBytes(0x32000, 912)...)
	if want := append(put32s(3, 5000), patterned(5000, 3)...); !bytes.Equal(reply, want) {
		t.Fatal("reply gathered from the Reply chunk differs")
	}
	c.validCall(4)
}
