package rdmarpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
	"github.com/rdmagw/rdmagw/verbs/iwarp"
)

// v2Peer is a scripted version-two responder built from the codec: it
// accepts one connection, decodes every message with V2Header.Decode and
// hands it to the test's script, and can RDMA Read and Write the
// requester's chunks. Its Sends and RDMA operations complete on a CQ of
// their own, so the script can wait for a Read while receives queue up.
type v2Peer struct {
	t      *testing.T
	conn   verbs.Conn
	mr     verbs.MR
	mem    *verbs.Memory
	scq    verbs.CQ
	mu     sync.Mutex // one sender at a time (script or test)
	next   int
	recvd  uint32 // messages received
	adv    uint32 // credits advertised beyond recvd
	got    []V2Header
	gotRaw [][]byte
	// lean: record nothing, decode into lh, allocate nothing per message
	// (the allocation test counts every goroutine's allocations).
	lean    bool
	lh      V2Header
	wcs     [1]verbs.WC
	enc     [256]byte
	out     V2Header
	wr      verbs.SendWR
	sge     [1]verbs.SGE
	pending []byte // a continued call's fragments so far
	rwr     [16]verbs.RecvWR
	rsge    [16][1]verbs.SGE
}

const v2PeerSlot = 16384

func startV2Peer(t *testing.T, script func(p *v2Peer, h *V2Header, b []byte)) (*v2Peer, string) {
	return startV2PeerOpt(t, false, script)
}

func startV2PeerOpt(t *testing.T, lean bool, script func(p *v2Peer, h *V2Header, b []byte)) (*v2Peer, string) {
	prov := iwarp.New(iwarp.Config{})
	d, _ := prov.Open("127.0.0.1")
	pd, _ := d.AllocPD()
	rcq, _ := d.CreateCQ(64)
	scq, _ := d.CreateCQ(64)
	mem, _ := verbs.Alloc(4 << 20)
	mr, _ := pd.Register(mem.Bytes(), verbs.AccessLocalWrite)
	ln, err := d.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &v2Peer{t: t, mr: mr, mem: mem, scq: scq, adv: 16, lean: lean}
	done, ready := make(chan struct{}), make(chan struct{})
	post := func(i int) {
		p.rsge[i][0] = verbs.SGE{Buf: mem.Bytes()[i*v2PeerSlot : (i+1)*v2PeerSlot], LKey: mr.LKey()}
		p.rwr[i] = verbs.RecvWR{ID: uint64(i), SGL: p.rsge[i][:]}
		p.conn.PostRecv(&p.rwr[i])
	}
	go func() {
		defer close(done)
		req, err := ln.Accept(context.Background())
		ln.Close()
		if err != nil {
			close(ready)
			return
		}
		p.conn, err = req.Accept(verbs.ConnOptions{PD: pd, SendCQ: scq, RecvCQ: rcq, MaxSendWR: 32, MaxRecvWR: 16, MaxSGE: 4})
		close(ready)
		if err != nil {
			return
		}
		for i := range 16 {
			post(i)
		}
		var wcs [8]verbs.WC
		for {
			n := rcq.Poll(wcs[:])
			for _, wc := range wcs[:n] {
				if wc.Status != verbs.StatusSuccess {
					return
				}
				i := int(wc.ID)
				if p.lean {
					b := mem.Bytes()[i*v2PeerSlot : i*v2PeerSlot+wc.ByteLen]
					p.mu.Lock()
					p.recvd++
					p.mu.Unlock()
					p.lh.Decode(b, Limits{})
					script(p, &p.lh, b)
					post(i)
					continue
				}
				b := bytes.Clone(mem.Bytes()[i*v2PeerSlot : i*v2PeerSlot+wc.ByteLen])
				post(i)
				p.mu.Lock()
				p.recvd++
				p.mu.Unlock()
				h := new(V2Header)
				h.Decode(b, Limits{})
				p.mu.Lock()
				p.got = append(p.got, V2Header{})
				p.got[len(p.got)-1].CopyFrom(h)
				p.gotRaw = append(p.gotRaw, b)
				p.mu.Unlock()
				script(p, h, b)
			}
			if n == 0 && rcq.Wait(context.Background()) != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-ready
		if p.conn != nil {
			p.conn.Close()
		}
		rcq.Close()
		<-done
		scq.Close()
		mr.Deregister()
		mem.Free()
		d.Close()
	})
	return p, ln.Addr().String()
}

// credit is what the peer writes: its received count plus its advertised
// credits (v2Link's reading).
func (p *v2Peer) credit() uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recvd + p.adv
}

func (p *v2Peer) setAdv(n uint32) {
	p.mu.Lock()
	p.adv = n
	p.mu.Unlock()
}

// scratch is the peer's staging area for Sends and RDMA (above the
// receive slots).
func (p *v2Peer) scratch(n int) []byte {
	p.next = (p.next + 1) % 32
	off := 16*v2PeerSlot + p.next*v2PeerSlot
	if n > v2PeerSlot {
		off = 2 << 20 // one large area for big transfers
	}
	return p.mem.Bytes()[off : off+n]
}

// op posts one signaled work request on buf and waits for it.
func (p *v2Peer) op(o verbs.Opcode, buf []byte, remote Segment) {
	p.sge[0] = verbs.SGE{Buf: buf, LKey: p.mr.LKey()}
	p.wr = verbs.SendWR{Op: o, SGL: p.sge[:], RemoteAddr: remote.Offset, RKey: remote.Handle, Signal: true}
	wr := &p.wr
	if err := p.conn.PostSend(wr); err != nil {
		p.t.Errorf("v2 peer: post %v: %v", wr.Op, err)
		return
	}
	for {
		if p.scq.Poll(p.wcs[:]) == 1 {
			if p.wcs[0].Status != verbs.StatusSuccess {
				p.t.Errorf("v2 peer: %v: %v", p.wcs[0].Op, p.wcs[0].Status)
			}
			return
		}
		if p.scq.Wait(context.Background()) != nil {
			p.t.Errorf("v2 peer: %v timed out", wr.Op)
			return
		}
	}
}

func (p *v2Peer) send(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	buf := p.scratch(len(b))
	copy(buf, b)
	p.op(verbs.OpSend, buf, Segment{})
}

// sendHdr encodes h, then payload, and sends them.
func (p *v2Peer) sendHdr(h *V2Header, payload ...[]byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hn, err := h.Encode(p.enc[:])
	if err != nil {
		p.t.Errorf("v2 peer: encode: %v", err)
	}
	n := hn
	for _, q := range payload {
		n += len(q)
	}
	buf := p.scratch(n)
	m := copy(buf, p.enc[:hn])
	for _, q := range payload {
		m += copy(buf[m:], q)
	}
	p.op(verbs.OpSend, buf, Segment{})
}

func (p *v2Peer) write(s Segment, data []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	buf := p.scratch(len(data))
	copy(buf, data)
	p.op(verbs.OpRDMAWrite, buf, s)
}

func (p *v2Peer) read(s Segment) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	buf := p.scratch(int(s.Length))
	p.op(verbs.OpRDMARead, buf, s)
	return bytes.Clone(buf)
}

// answerProps answers the requester's CONNPROP_FINAL with the peer's.
func (p *v2Peer) answerProps(props TransportProps) {
	var a V2Header
	a.Init(0, p.credit(), HTypeConnPropFinal)
	a.AppendTransportProps(props)
	p.sendHdr(&a)
}

// reply answers h with REPLY_INLINE carrying msg.
func (p *v2Peer) reply(xid uint32, writes []WriteChunk, msg []byte) {
	var a V2Header
	a.Init(xid, p.credit(), HTypeReplyInline)
	for _, w := range writes {
		a.AppendWriteChunk(w...)
	}
	p.sendHdr(&a, msg)
}

func (p *v2Peer) sendError(xid uint32, body V2ErrorBody) {
	var a V2Header
	a.Init(xid, p.credit(), HTypeError)
	a.ErrBody = body
	p.sendHdr(&a)
}

func (p *v2Peer) received() []V2Header {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.got
}

// v2CountMetrics counts the version-two events too.
type v2CountMetrics struct{ *countMetrics }

func (m v2CountMetrics) V2ErrorSent(c V2ErrCode) { m.add("v2_error_" + c.String()) }
func (m v2CountMetrics) V2GrantSent()            { m.add("v2_grant") }
func (m v2CountMetrics) V2Discarded()            { m.add("v2_discarded") }
func (m v2CountMetrics) V2Continued(received bool, sends int) {
	if received {
		m.add("v2_continued_received")
	} else {
		m.add("v2_continued_sent")
	}
}

func dialV2(t *testing.T, addr string, cfg RequesterConfig) (*RequesterConn, *countMetrics, *engineSide) {
	t.Helper()
	met := newCountMetrics()
	cli := newEngineSide(t, iwarp.New(iwarp.Config{}))
	cfg.Pool = cli.pool
	if cfg.Metrics == nil {
		cfg.Metrics = v2CountMetrics{met}
	}
	if cfg.VersionMemory == nil {
		cfg.VersionMemory = new(VersionMemory)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	req, err := DialRequester(context.Background(), cli.dev, addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { req.Close() })
	return req, met, cli
}

func callCtx(req *RequesterConn, msg *Message, plan *ReplyPlan, d time.Duration) (*Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	r := new(Result)
	return r, req.Call(ctx, msg, plan, r)
}

// A version-two requester against a scripted version-two responder: the
// first message is its CONNPROP_FINAL (<= 1024 octets, xid 0), nothing
// else before the answer; calls go as CALL_INLINE, CALL_INLINE with a
// data item Read chunk, and CALL_EXTERNAL with a Call chunk; replies come
// back REPLY_INLINE with a Write chunk and REPLY_EXTERNAL; the credit the
// requester writes is its received count plus its free receives.
func TestRequesterV2Calls(t *testing.T) {
	// Segments of at most 4 KiB: chunks go as several.
	peerProps := localProps(8192, 8192, 4096, 0, RvrsDirNone)
	p, addr := startV2Peer(t, func(p *v2Peer, h *V2Header, b []byte) {
		switch h.HType {
		case HTypeConnPropFinal:
			p.answerProps(peerProps)
		case HTypeCallMiddle:
			n, _ := new(V2Header).Decode(b, Limits{})
			p.pending = append(p.pending, b[n:]...)
		case HTypeCallInline, HTypeCallExternal:
			var msg []byte
			if h.HType == HTypeCallExternal {
				for _, s := range h.Call {
					msg = append(msg, p.read(s.Segment)...)
				}
			} else {
				n, _ := new(V2Header).Decode(b, Limits{})
				msg = append(p.pending, b[n:]...)
				p.pending = nil
			}
			// Splice the data item Read chunks back at their Position.
			for i := len(h.Reads) - 1; i >= 0; i-- {
				s := h.Reads[i]
				item := p.read(s.Segment)
				pos := int(s.Position)
				msg = append(msg[:pos], append(append(item, make([]byte, padLen(len(item)))...), msg[pos:]...)...)
			}
			xid := h.XID
			switch {
			case len(h.Writes) == 1:
				w := h.Writes[0]
				data := patterned(int(w.Len())-3, int(xid))
				ret := make(WriteChunk, len(w))
				off := 0
				for i, s := range w {
					n := min(int(s.Length), len(data)-off)
					if n > 0 {
						p.write(s, data[off:off+n])
					}
					ret[i], ret[i].Length = s, uint32(n)
					off += n
				}
				p.reply(xid, []WriteChunk{ret}, put32s(xid, uint32(len(data)), sum32(msg)))
			case h.HasReply:
				body := append(put32s(xid, sum32(msg)), patterned(6000, int(xid))...)
				p.write(h.Reply[0], body)
				var a V2Header
				a.Init(xid, p.credit(), HTypeReplyExternal)
				r := h.Reply[0]
				r.Length = uint32(len(body))
				a.SetReplyChunk(r)
				p.sendHdr(&a)
			default:
				p.reply(xid, nil, put32s(xid, uint32(len(msg)), sum32(msg)))
			}
		}
	})
	req, met, cli := dialV2(t, addr, RequesterConfig{Version: VersionV2, InlineSend: 8192, Credits: 8})
	if req.Version() != 2 {
		t.Fatalf("version %d", req.Version())
	}
	first := &p.received()[0]
	p.mu.Lock()
	firstLen := len(p.gotRaw[0])
	p.mu.Unlock()
	if first.HType != HTypeConnPropFinal || first.XID != 0 || firstLen > V2FirstMessageMax {
		t.Fatalf("first message %v, %d bytes", first, firstLen)
	}
	if props := first.Properties(); props.MaxSendSize != 8192 || props.RecvBufSize != 4096 || props.ReverseDir != RvrsDirSimple {
		t.Fatalf("announced %+v", props)
	}
	// The requester has 8 + recvExtra + 8 backchannel receives, keeps one.
	if want := uint32(8 + recvExtra + 8 - 1); first.Credit != want {
		t.Errorf("first credit %d, want %d", first.Credit, want)
	}
	if req.InlineSend() != 8192 {
		t.Errorf("inline send %d after the exchange, want 8192", req.InlineSend())
	}

	// Inline.
	small := &Message{XID: 11, Pieces: []Piece{{Data: put32s(11, 1, 2, 3)}}}
	r, err := callCtx(req, small, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Inline, put32s(11, 16, sum32(put32s(11, 1, 2, 3)))) || r.Kind != ReplyInline {
		t.Fatalf("inline reply % x", r.Inline)
	}
	r.Release()
	// A data item Read chunk and a Write chunk.
	wmsg := writeCallMsg(t, cli.pool, 12, 9000)
	var flat bytes.Buffer
	for _, pc := range wmsg.Pieces {
		flat.Write(pc.Data)
	}
	r, err = callCtx(req, wmsg, &ReplyPlan{WriteChunks: []int{9003}}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Chunks[0], patterned(9000, 12)) || !bytes.Equal(r.Inline, put32s(12, 9000, sum32(flat.Bytes()))) {
		t.Fatalf("Write chunk reply: %d bytes, inline % x", len(r.Chunks[0]), r.Inline)
	}
	r.Release()
	wmsg.Pieces[1].Buf.Release()
	// Too long for inline even reduced: continued in 3 Sends, or, for
	// more than 4, CALL_EXTERNAL; the reply in the Reply chunk.
	for _, c := range []struct {
		xid uint32
		n   int
	}{{13, 20000}, {14, 50000}} {
		big := &Message{XID: c.xid, Pieces: []Piece{{Data: put32s(c.xid)}, {Data: patterned(c.n/2, 5)}, {Data: patterned(c.n/2, 6)}}}
		var flat []byte
		for _, pc := range big.Pieces {
			flat = append(flat, pc.Data...)
		}
		r, err = callCtx(req, big, &ReplyPlan{ReplyChunk: 8192}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		want := append(put32s(c.xid, sum32(flat)), patterned(6000, int(c.xid))...)
		if !bytes.Equal(r.Inline, want) || r.Kind != ReplyReplyChunk {
			t.Fatalf("Reply chunk reply of %d bytes differs", len(r.Inline))
		}
		r.Release()
	}
	got := p.received()
	if len(got) != 7 || got[1].HType != HTypeCallInline || len(got[1].Reads) != 0 ||
		got[2].HType != HTypeCallInline || len(got[2].Reads) != 3 || got[2].Reads[2].Position != 12 ||
		readListLen(got[2].Reads) != 9000 || len(got[2].Writes) != 1 || len(got[2].Writes[0]) != 3 ||
		got[3].HType != HTypeCallMiddle || got[4].HType != HTypeCallMiddle || got[5].HType != HTypeCallInline ||
		got[3].Remaining != 20004-8172 || got[4].Remaining != 20004-2*8172 ||
		got[6].HType != HTypeCallExternal || len(got[6].Call) != 13 || readListLen(got[6].Call) != 50004 {
		for i := range got {
			t.Logf("message %d: %v", i, &got[i])
		}
		t.Fatal("calls not in the expected forms")
	}
	for i := 1; i < 4; i++ {
		// Received: CONNPROP + the replies so far; free receives less one.
		if want := uint32(i + 8 + recvExtra + 8 - 1); got[i].Credit != want {
			t.Errorf("call %d credit %d, want %d", i, got[i].Credit, want)
		}
	}
	if met.get("sent_inline") != 2 || met.get("sent_read_chunk") != 1 || met.get("sent_long") != 1 || met.get("v2_continued_sent") != 1 ||
		met.get("received_inline") != 2 || met.get("received_reply_chunk") != 2 {
		t.Errorf("metrics %v", met.n)
	}
	waitFor(t, 5*time.Second, "client pool idle", func() bool { return cli.pool.InUse() == idleBuffers(req) })
}

// idleBuffers is what a requester holds from the pool while idle: its
// receives, the Send buffers its contexts kept, the control buffer.
func idleBuffers(c *RequesterConn) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for i := range c.recvs {
		if b := c.recvs[i].buf; b != nil {
			n += cap(b.Bytes)
		}
	}
	for i := range c.reqs {
		if b := c.reqs[i].sendBuf; b != nil {
			n += cap(b.Bytes)
		}
	}
	for i := range c.ctls {
		if b := c.ctls[i].buf; b != nil {
			n += cap(b.Bytes)
		}
	}
	return int64(n)
}

// Credits: the responder's answer to the properties grants 1 call; its
// reply grants 0 more; a call then waits until a GRANT comes.
func TestRequesterV2GrantZeroThenGrant(t *testing.T) {
	p, addr := startV2Peer(t, func(p *v2Peer, h *V2Header, b []byte) {
		switch h.HType {
		case HTypeConnPropFinal:
			p.setAdv(1) // one call: credit = 1 received + 1
			p.answerProps(DefaultTransportProps())
		case HTypeCallInline:
			p.setAdv(0) // a grant of 0: credit = received, no more calls
			p.reply(h.XID, nil, put32s(h.XID, 0))
		}
	})
	req, _, _ := dialV2(t, addr, RequesterConfig{Version: VersionV2, Credits: 8})
	if g := req.Granted(); g != 1 {
		t.Fatalf("granted %d after the properties, want 1", g)
	}
	r, err := callCtx(req, &Message{XID: 1, Pieces: []Piece{{Data: put32s(1, 0)}}}, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	if g := req.Granted(); g != 0 {
		t.Fatalf("granted %d after a grant of 0", g)
	}
	done := make(chan error, 1)
	go func() {
		r, err := callCtx(req, &Message{XID: 2, Pieces: []Piece{{Data: put32s(2, 0)}}}, nil, 10*time.Second)
		if err == nil {
			r.Release()
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if n := len(p.received()); n != 2 {
		t.Fatalf("a call was sent on a grant of 0 (%d messages)", n)
	}
	var g V2Header
	g.Init(0, p.credit()+2, HTypeGrant)
	p.sendHdr(&g)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(p.received()); n != 3 {
		t.Fatalf("%d messages after the GRANT", n)
	}
}

// Every RDMA2_ERROR answer ends its call with a typed error; an unknown
// code is discarded; malformed replies fail their call and are answered;
// messages the requester does not take are answered INVAL_HTYPE, a
// version-one message VERS_MISMATCH.
func TestRequesterV2ErrorAnswers(t *testing.T) {
	cases := []struct {
		body   V2ErrorBody
		target error
	}{
		{V2ErrorBody{Code: V2ErrVersMismatch}, ErrRemoteVersion},
		{V2ErrorBody{Code: V2ErrVers, VersLow: 2, VersHigh: 2}, ErrRemoteVersion},
		{V2ErrorBody{Code: V2ErrBadXDR}, ErrRemoteChunk},
		{V2ErrorBody{Code: V2ErrInvalHType}, ErrRemoteChunk},
		{V2ErrorBody{Code: V2ErrInvalCont}, ErrRemoteChunk},
		{V2ErrorBody{Code: V2ErrReadChunks, MaxChunks: 0}, ErrRemoteChunk},
		{V2ErrorBody{Code: V2ErrWriteChunks, MaxChunks: 1}, ErrRemoteChunk},
		{V2ErrorBody{Code: V2ErrSegments, MaxSegments: 4}, ErrRemoteChunk},
		{V2ErrorBody{Code: V2ErrWriteResource, ChunkIndex: 1, LengthNeeded: 9000}, ErrRemoteResource},
		{V2ErrorBody{Code: V2ErrReplyResource, LengthNeeded: 70000}, ErrRemoteResource},
		{V2ErrorBody{Code: V2ErrSystem}, ErrRemoteSystem},
	}
	const (
		xidUnknownCode = 100 + iota
		xidBadHeader
		xidWrongRPCXID
		xidStrayType
		xidV1Message
		xidOverlongReply
		xidGood
	)
	p, addr := startV2Peer(t, func(p *v2Peer, h *V2Header, b []byte) {
		switch {
		case h.HType == HTypeConnPropFinal:
			p.answerProps(DefaultTransportProps())
		case !h.HType.IsCall():
		case int(h.XID) < len(cases):
			p.sendError(h.XID, cases[h.XID].body)
		case h.XID == xidUnknownCode:
			p.sendError(h.XID, V2ErrorBody{Code: 77})
			p.reply(h.XID, nil, put32s(h.XID, 0))
		case h.XID == xidBadHeader: // a REPLY_INLINE whose Write list runs off the end
			p.send(put32s(h.XID, 2, p.credit(), uint32(HTypeReplyInline), 1, 5))
		case h.XID == xidWrongRPCXID:
			p.reply(h.XID, nil, put32s(h.XID+1, 0))
		case h.XID == xidStrayType: // an unknown header type, then the reply
			p.send(put32s(h.XID, 2, p.credit(), 99, 0))
			p.reply(h.XID, nil, put32s(h.XID, 0))
		case h.XID == xidV1Message:
			p.send(append(fixed(h.XID, 1, p.credit(), ProcMsg).u32(0, 0, 0).bytes(), put32s(h.XID)...))
			p.reply(h.XID, nil, put32s(h.XID, 0))
		case h.XID == xidGood:
			p.reply(h.XID, nil, put32s(h.XID, 0))
		case h.XID == xidOverlongReply:
			var a V2Header
			a.Init(h.XID, p.credit(), HTypeReplyExternal)
			a.SetReplyChunk(Segment{Handle: h.Reply[0].Handle, Length: h.Reply[0].Length + 1, Offset: h.Reply[0].Offset})
			p.sendHdr(&a)
		}
	})
	req, met, _ := dialV2(t, addr, RequesterConfig{Version: VersionV2, Credits: 8})
	call := func(xid uint32, plan *ReplyPlan) (*Result, error) {
		return callCtx(req, &Message{XID: xid, Pieces: []Piece{{Data: put32s(xid, 0)}}}, plan, 5*time.Second)
	}
	for i, c := range cases {
		_, err := call(uint32(i), nil)
		var re *RemoteError
		if !errors.Is(err, c.target) || !errors.As(err, &re) || re.V2 == nil || *re.V2 != c.body {
			t.Errorf("%v: got %v", c.body.Code, err)
		}
		if c.target == ErrRemoteResource && !errors.Is(err, ErrRemoteChunk) {
			t.Errorf("%v does not match ErrRemoteChunk (the gateway's retry)", c.body.Code)
		}
	}
	r, err := call(xidUnknownCode, nil)
	if err != nil {
		t.Fatalf("after an unknown error code: %v", err)
	}
	r.Release()
	if _, err := call(xidBadHeader, nil); !errors.Is(err, ErrBadReply) {
		t.Errorf("malformed reply header: %v", err)
	}
	if _, err := call(xidWrongRPCXID, nil); !errors.Is(err, ErrBadReply) {
		t.Errorf("reply with another RPC XID: %v", err)
	}
	r, err = call(xidStrayType, nil)
	if err != nil {
		t.Fatalf("after an unknown header type: %v", err)
	}
	r.Release()
	r, err = call(xidV1Message, nil)
	if err != nil {
		t.Fatalf("after a version-one message: %v", err)
	}
	r.Release()
	if _, err := call(xidOverlongReply, &ReplyPlan{ReplyChunk: 100}); !errors.Is(err, ErrBadReply) {
		t.Errorf("Reply chunk overrun: %v", err)
	}
	// What the requester answered.
	answers := map[V2ErrCode]int{}
	waitFor(t, 5*time.Second, "the requester's answers", func() bool {
		clear(answers)
		// Raw: the VERS_MISMATCH answer echoes the offending version 1,
		// which the version-two codec does not decode.
		p.mu.Lock()
		for _, b := range p.gotRaw {
			if len(b) >= 20 && be32(b, 12) == uint32(HTypeError) {
				answers[V2ErrCode(be32(b, 16))]++
			}
		}
		p.mu.Unlock()
		ok := answers[V2ErrBadXDR] == 1 && answers[V2ErrInvalHType] == 1 && answers[V2ErrVersMismatch] == 1
		if !ok {
			t.Logf("answers so far %v", answers)
		}
		return ok
	})
	if len(answers) != 3 {
		t.Errorf("answers %v", answers)
	}
	if met.get("drop_malformed") < 4 {
		t.Errorf("metrics %v", met.n)
	}
	// The connection is still good.
	r, err = call(xidGood, nil)
	if err != nil {
		t.Fatalf("after the bad messages: %v", err)
	}
	r.Release()
}

// The version memory: a VersionAuto requester against rdmagw's
// version-one responder falls back to version one on the ERR_VERS answer
// (one, counted at the responder), calls then work byte for byte, and a
// second dial to the same address starts in version one without
// negotiating (no second ERR_VERS). VersionV2 against it fails the dial;
// VersionV1 sends nothing extra.
func TestRequesterV2FallbackRemembered(t *testing.T) {
	rmet := newCountMetrics()
	srv := newEngineSide(t, iwarp.New(iwarp.Config{}))
	h := newToyHandler(t, srv.pool, 2)
	defer h.stop()
	ln, err := srv.dev.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	var resps []*ResponderConn
	var rmu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			cr, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			rc, err := AcceptResponder(cr, srv.dev, ResponderConfig{Pool: srv.pool, Metrics: rmet})
			if err != nil {
				continue
			}
			rmu.Lock()
			resps = append(resps, rc)
			rmu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); rc.Serve(context.Background(), h) }()
		}
	}()
	defer func() {
		ln.Close()
		rmu.Lock()
		for _, rc := range resps {
			rc.Close()
		}
		rmu.Unlock()
		wg.Wait()
	}()
	addr := ln.Addr().String()
	mem := new(VersionMemory)
	cli := newEngineSide(t, iwarp.New(iwarp.Config{}))
	dial := func(mode VersionMode) (*RequesterConn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return DialRequester(ctx, cli.dev, addr, RequesterConfig{Pool: cli.pool, Version: mode, VersionMemory: mem})
	}
	check := func(req *RequesterConn, xid uint32) {
		t.Helper()
		r, err := callCtx(req, readCallMsg(xid, 3000), &ReplyPlan{WriteChunks: []int{3000}}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		checkRead(t, r, xid, 3000, true)
		r.Release()
	}
	req, err := dial(VersionV1)
	if err != nil {
		t.Fatal(err)
	}
	check(req, 1)
	req.Close()
	if n := rmet.get("error_ERR_VERS"); n != 0 {
		t.Fatalf("a version-one dial drew %d ERR_VERS", n)
	}
	req, err = dial(VersionAuto)
	if err != nil {
		t.Fatal(err)
	}
	if req.Version() != 1 || mem.Lookup(addr) != 1 || !req.FellBack() {
		t.Fatalf("auto against version one: version %d, remembered %d, fell back %v", req.Version(), mem.Lookup(addr), req.FellBack())
	}
	check(req, 2)
	check(req, 3)
	req.Close()
	if n := rmet.get("error_ERR_VERS"); n != 1 {
		t.Fatalf("%d ERR_VERS answers, want 1", n)
	}
	req, err = dial(VersionAuto)
	if err != nil {
		t.Fatal(err)
	}
	check(req, 4)
	if req.FellBack() {
		t.Fatal("a dial that found version one remembered reports a fallback")
	}
	req.Close()
	if n := rmet.get("error_ERR_VERS"); n != 1 {
		t.Fatalf("the reconnect negotiated again: %d ERR_VERS answers", n)
	}
	if _, err := dial(VersionV2); !errors.Is(err, ErrVersionNegotiation) {
		t.Fatalf("version two against version one: %v", err)
	}
	mem.Forget(addr)
	req, err = dial(VersionAuto)
	if err != nil {
		t.Fatal(err)
	}
	check(req, 5)
	req.Close()
	if n := rmet.get("error_ERR_VERS"); n != 3 {
		t.Fatalf("after Forget: %d ERR_VERS answers, want 3", n)
	}
}

func TestParseVersionMode(t *testing.T) {
	for s, want := range map[string]VersionMode{"auto": VersionAuto, "1": VersionV1, " 2 ": VersionV2, "AUTO": VersionAuto} {
		if got, err := ParseVersionMode(s); err != nil || got != want {
			t.Errorf("%q: %v %v", s, got, err)
		}
	}
	if _, err := ParseVersionMode("3"); err == nil {
		t.Error("3 accepted")
	}
	if VersionAuto.String() != "auto" || VersionV2.String() != "2" {
		t.Error("String")
	}
}

// In the steady state a version-two call allocates nothing: inline,
// continued, and with a Write chunk (the peer allocates nothing either: the count is of
// every goroutine).
func TestRequesterV2CallAllocs(t *testing.T) {
	data := patterned(1000, 9)
	_, addr := startV2PeerOpt(t, true, func(p *v2Peer, h *V2Header, b []byte) {
		a := &p.out
		switch h.HType {
		case HTypeConnPropFinal:
			a.Init(0, p.credit(), HTypeConnPropFinal)
		case HTypeCallInline:
			a.Init(h.XID, p.credit(), HTypeReplyInline)
			if len(h.Writes) == 1 {
				w := h.Writes[0][0]
				p.write(w, data)
				w.Length = uint32(len(data))
				a.AppendWriteChunk(w)
			}
		default:
			return
		}
		p.sendHdr(a, b[len(b)-8:]) // the call's last 8 bytes: xid, op
	})
	req, _, _ := dialV2(t, addr, RequesterConfig{Version: VersionV2, Credits: 8, Metrics: nopResponderMetrics{}})
	var m Message
	var r Result
	var head [8]byte
	pad := make([]byte, 6000)
	plans := [2]*ReplyPlan{nil, {WriteChunks: []int{1000}}}
	ctx := context.Background()
	xid := uint32(0)
	call := func() {
		xid++
		m.Reset()
		m.XID = xid
		binary.BigEndian.PutUint32(head[:], xid)
		if xid%3 == 0 {
			m.Append(Piece{Data: pad}) // continued: 2 Sends
		}
		m.Append(Piece{Data: head[:]})
		plan := plans[xid%2]
		if err := req.Call(ctx, &m, plan, &r); err != nil {
			t.Fatal(err)
		}
		if be32(r.Inline, 0) != xid || (plan != nil && !bytes.Equal(r.Chunks[0], data)) {
			t.Fatalf("reply % x", r.Inline)
		}
		r.Release()
	}
	for range 50 {
		call()
	}
	if n := testing.AllocsPerRun(200, call); n != 0 {
		t.Errorf("%.2f allocations per version-two call", n)
	}
}

func readListLen(l ReadList) uint64 {
	n := uint64(0)
	for _, s := range l {
		n += uint64(s.Length)
	}
	return n
}

// Reverse direction in version two: the requester announces SIMPLE,
// serves a CALL_INLINE without chunks and answers REPLY_INLINE (20-byte
// header, a credit of the one flow); a backward call with a Read chunk is
// answered READ_CHUNKS 0, with a Reply chunk WRITE_CHUNKS 0, a CALL_MIDDLE
// INVAL_HTYPE, and one arriving with no handler set SYSTEM.
func TestRequesterV2Backward(t *testing.T) {
	p, addr := startV2Peer(t, func(p *v2Peer, h *V2Header, b []byte) {
		if h.HType == HTypeConnPropFinal {
			p.answerProps(DefaultTransportProps())
		}
	})
	req, _, _ := dialV2(t, addr, RequesterConfig{Version: VersionV2, Credits: 8})
	bcall := func(xid uint32, build func(h *V2Header)) {
		var h V2Header
		h.Init(xid, p.credit(), HTypeCallInline)
		if build != nil {
			build(&h)
		}
		p.sendHdr(&h, put32s(xid, rpcCall, 0xcafe))
	}
	waitMsg := func(xid uint32) []byte {
		var got []byte
		waitFor(t, 5*time.Second, "the requester's answer", func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, b := range p.gotRaw {
				if be32(b, 0) == xid {
					got = b
					return true
				}
			}
			return false
		})
		return got
	}
	bcall(0x70, nil) // no handler yet
	if b := waitMsg(0x70); be32(b, 12) != uint32(HTypeError) || be32(b, 16) != uint32(V2ErrSystem) {
		t.Fatalf("no handler: answered % x", b)
	}
	req.SetBackwardHandler(BackwardHandlerFunc(func(call []byte) []byte {
		return append(put32s(be32(call, 0), rpcReply), call[8:]...)
	}))
	bcall(0x71, nil)
	b := waitMsg(0x71)
	if !bytes.Equal(b[16:], put32s(0, 0x71, rpcReply, 0xcafe)) || be32(b, 4) != 2 || be32(b, 12) != uint32(HTypeReplyInline) {
		t.Fatalf("backward reply % x", b)
	}
	bcall(0x72, func(h *V2Header) { h.AppendReadSegment(8, Segment{Handle: 1, Length: 4}) })
	if b := waitMsg(0x72); be32(b, 16) != uint32(V2ErrReadChunks) || be32(b, 20) != 0 {
		t.Fatalf("backward call with a Read chunk: % x", b)
	}
	bcall(0x73, func(h *V2Header) { h.SetReplyChunk(Segment{Handle: 1, Length: 4}) })
	if b := waitMsg(0x73); be32(b, 16) != uint32(V2ErrWriteChunks) || be32(b, 20) != 0 {
		t.Fatalf("backward call with a Reply chunk: % x", b)
	}
	bcall(0x74, func(h *V2Header) { h.HType, h.Remaining = HTypeCallMiddle, 4 })
	if b := waitMsg(0x74); be32(b, 16) != uint32(V2ErrInvalHType) {
		t.Fatalf("CALL_MIDDLE: % x", b)
	}
	if max := req.BackwardMax(); max != 4096-V2CallInlineMinSize {
		t.Errorf("BackwardMax %d", max)
	}
}

// The requester refreshes the responder's credit with RDMA2_GRANT once
// half of what it last granted is used up and it has sent nothing since
// (as while a reply arrives in many fragments).
func TestRequesterV2SendsGrant(t *testing.T) {
	p, addr := startV2Peer(t, func(p *v2Peer, h *V2Header, b []byte) {
		if h.HType == HTypeConnPropFinal {
			p.answerProps(DefaultTransportProps())
		}
	})
	_, met, _ := dialV2(t, addr, RequesterConfig{Version: VersionV2, Credits: 8})
	adv := uint32(8 + recvExtra + 8 - 1) // the first message's credit
	if c := p.received()[0].Credit; c != adv {
		t.Fatalf("first credit %d", c)
	}
	var g V2Header
	sent := uint32(1) // the properties
	for range 20 {
		g.Init(0, p.credit(), HTypeGrant)
		p.sendHdr(&g)
		sent++
		if int(adv)-int(sent) <= int(adv)/2 {
			break
		}
	}
	var grant *V2Header
	defer func() {
		if n := met.get("v2_grant"); n != 1 {
			t.Errorf("%d GRANTs counted", n)
		}
	}()
	waitFor(t, 5*time.Second, "the requester's GRANT", func() bool {
		for _, h := range p.received() {
			if h.HType == HTypeGrant {
				grant = &h
				return true
			}
		}
		return false
	})
	if grant.XID != 0 || grant.Credit != sent+adv {
		t.Fatalf("GRANT %v, want credit %d", grant, sent+adv)
	}
	time.Sleep(50 * time.Millisecond)
	n := 0
	for _, h := range p.received() {
		if h.HType == HTypeGrant {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d GRANTs", n)
	}
}
