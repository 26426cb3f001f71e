package rdmarpc

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// Version two on the responder, tested with a raw version-two requester
// built from the codec (rawClient sends what the test encodes).

// rawCredit is the rdma_credit of the bad-input messages: plenty (each
// is answered with one Send), so that the answers never wait for credit.
const rawCredit = 1 << 20

func v2Pair(t testing.TB, rcfg ResponderConfig, pdata []byte) (*enginePair, *rawClient) {
	t.Helper()
	rcfg.V2 = true
	p := newEnginePair(t, pairOpts{noRequester: true, rcfg: rcfg})
	c := dialRaw(t, p.rawAddr, pdata)
	if err := <-p.accepted; err != nil {
		t.Fatal(err)
	}
	return p, c
}

// v2Credit is the rdma_credit the raw requester writes: what it has
// received plus the receives it keeps posted, less a spare.
func (c *rawClient) v2Credit() uint32 { return V2Credit(c.recvd.Load(), rawRecvs-2) }

// v2Call is a CALL_INLINE without chunks carrying rpc.
func (c *rawClient) v2Call(xid uint32, rpc []byte) []byte {
	var h V2Header
	h.Init(xid, c.v2Credit(), HTypeCallInline)
	return contMsg(c.t, &h, rpc)
}

// grant sends RDMA2_GRANT with the raw requester's credit.
func (c *rawClient) grant() {
	var g V2Header
	g.Init(0, c.v2Credit(), HTypeGrant)
	c.sendOK(contMsg(c.t, &g, nil))
}

func (c *rawClient) sendOK(b []byte) {
	c.t.Helper()
	if st := c.send(b); st != verbs.StatusSuccess {
		c.t.Fatalf("send: %v", st)
	}
}

// expectV2 decodes the next message received.
func (c *rawClient) expectV2(d time.Duration) (*V2Header, []byte) {
	c.t.Helper()
	b := c.expect(d)
	if b == nil {
		c.t.Fatalf("no answer within %v", d)
	}
	h := new(V2Header)
	n, err := h.Decode(b, Limits{})
	if err != nil {
		c.t.Fatalf("answer does not decode: %v\n% x", err, b)
	}
	return h, b[n:]
}

// expectV2Error checks that the next message is an RDMA2_ERROR for xid
// with body want, its rdma_vers echoing vers (which may be another
// version's: the codec decodes it as if it were 2).
func (c *rawClient) expectV2Error(xid, vers uint32, want V2ErrorBody) {
	c.t.Helper()
	b := c.expect(5 * time.Second)
	if len(b) < V2PrefixSize {
		c.t.Fatalf("got % x, want RDMA2_ERROR xid 0x%x %v", b, xid, want)
	}
	got := binary.BigEndian.Uint32(b[4:])
	binary.BigEndian.PutUint32(b[4:], V2Version)
	var h V2Header
	if _, err := h.Decode(b, Limits{}); err != nil || got != vers || h.HType != HTypeError || h.XID != xid ||
		h.ErrBody.canonical() != want.canonical() {
		c.t.Fatalf("got %v (vers %d, %v), want RDMA2_ERROR xid 0x%x vers %d %v", &h, got, err, xid, vers, want)
	}
}

// expectV2Reply reassembles the next reply (continued or not) and returns
// its header, its Payload stream and the number of Sends it came in.
func (c *rawClient) expectV2Reply(xid uint32) (*V2Header, []byte, int) {
	c.t.Helper()
	r := Reassembler{Max: 8 << 20}
	var buf []byte
	for sends := 1; ; sends++ {
		b := c.expect(5 * time.Second)
		if b == nil {
			c.t.Fatalf("reply 0x%x: nothing after %d Sends", xid, sends-1)
		}
		h := new(V2Header)
		n, err := h.Decode(b, Limits{})
		if err != nil {
			c.t.Fatalf("reply does not decode: %v", err)
		}
		if h.HType == HTypeGrant {
			sends--
			continue
		}
		if sends%8 == 0 {
			c.grant() // room for the rest of a long continuation
		}
		if h.XID != xid || h.Vers != V2Version {
			c.t.Fatalf("got %v, want a reply to 0x%x", h, xid)
		}
		st := r.Offer(h, b[n:])
		switch st.Verdict {
		case ContPass:
			return h, b[n:], sends
		case ContStart:
			buf = make([]byte, st.Total)
			copy(buf, b[n:])
		case ContAppend:
			copy(buf[st.Off:], b[n:])
		case ContComplete:
			copy(buf[st.Off:], b[n:])
			return h, buf, sends
		default:
			c.t.Fatalf("reply fragment refused: %v %v", st.Verdict, st.Err)
		}
	}
}

// readReply is the toy READ reply with its item inline.
func readReply(xid uint32, n int) []byte {
	b := append(put32s(xid, uint32(n)), patterned(n, int(xid))...)
	b = append(b, make([]byte, padLen(n))...)
	return append(b, put32s(trailerWord)...)
}

// validV2Call sends a small READ and checks its REPLY_INLINE: the
// connection is still sane.
func (c *rawClient) validV2Call(xid uint32) {
	c.t.Helper()
	c.sendOK(c.v2Call(xid, put32s(xid, opRead, 8)))
	h, payload, sends := c.expectV2Reply(xid)
	if h.HType != HTypeReplyInline || sends != 1 || !bytes.Equal(payload, readReply(xid, 8)) {
		c.t.Fatalf("valid call 0x%x: %v in %d Sends, payload % x", xid, h, sends, payload)
	}
}

// TestV2ResponderDecidesVersion: a version-two first message makes the
// connection version two (REPLY_INLINE, the credit formula), after which
// version one is VERS_MISMATCH and version three VERS 1..2.
func TestV2ResponderDecidesVersion(t *testing.T) {
	p, c := v2Pair(t, ResponderConfig{}, linuxPrivateData)
	if v := p.resp.Version(); v != 0 {
		t.Fatalf("version %d before the first message", v)
	}
	c.sendOK(c.v2Call(1, put32s(1, opRead, 8)))
	h, payload, _ := c.expectV2Reply(1)
	if h.HType != HTypeReplyInline || len(h.Writes) != 0 || !bytes.Equal(payload, readReply(1, 8)) {
		t.Fatalf("reply %v payload % x", h, payload)
	}
	// One message received, the call still outstanding while its reply
	// is built: 1 + (128 - 1).
	if h.Credit != 128 {
		t.Fatalf("rdma_credit %d, want 128", h.Credit)
	}
	if v := p.resp.Version(); v != 2 {
		t.Fatalf("version %d", v)
	}
	c.sendOK(append(fixed(2, 1, 32, ProcMsg).u32(0, 0, 0).bytes(), put32s(2, opRead, 8)...))
	c.expectV2Error(2, 1, V2ErrorBody{Code: V2ErrVersMismatch})
	c.sendOK(fixed(3, 3, 32, ProcMsg).u32(0, 0, 0, 3).bytes())
	c.expectV2Error(3, 3, V2ErrorBody{Code: V2ErrVers, VersLow: 1, VersHigh: 2})
	c.validV2Call(4)
	if p.resp.Err() != nil || p.resp.Version() != 2 {
		t.Fatalf("after the errors: %v, version %d", p.resp.Err(), p.resp.Version())
	}
}

// TestV2ResponderUndecided: an unsupported first version gets ERR_VERS
// 1..2 and leaves the connection undecided; version two follows.
func TestV2ResponderUndecided(t *testing.T) {
	p, c := v2Pair(t, ResponderConfig{}, linuxPrivateData)
	c.sendOK(put32s(8, 2, 32)) // version 2, shorter than the prefix: discarded
	if b := c.expect(300 * time.Millisecond); b != nil || p.resp.Version() != 0 {
		t.Fatalf("short version-two message: answered % x, version %d", b, p.resp.Version())
	}
	c.sendOK(fixed(9, 7, 32, ProcMsg).u32(0, 0, 0, 9).bytes())
	got := c.expect(5 * time.Second)
	want := put32s(9, 7, 0, uint32(ProcError), uint32(ErrCodeVers), 1, 2)
	if len(got) != len(want) || !bytes.Equal(got[:8], want[:8]) || !bytes.Equal(got[12:], want[12:]) {
		t.Fatalf("got % x, want ERR_VERS 1..2 % x", got, want)
	}
	if v := p.resp.Version(); v != 0 {
		t.Fatalf("version %d after an unsupported one", v)
	}
	c.validV2Call(10)
}

// TestV2ResponderServesV1 with V2 on: a version-one first message keeps
// the connection version one, byte for byte as with V2 off, and a
// version-two message on it is ERR_VERS 1..1.
func TestV2ResponderServesV1(t *testing.T) {
	p, c := v2Pair(t, ResponderConfig{}, linuxPrivateData)
	c.validCall(1)
	if v := p.resp.Version(); v != 1 {
		t.Fatalf("version %d", v)
	}
	c.sendOK(c.v2Call(2, put32s(2, opRead, 8)))
	got := c.expect(5 * time.Second)
	want := put32s(2, 2, 0, uint32(ProcError), uint32(ErrCodeVers), 1, 1)
	if len(got) != len(want) || !bytes.Equal(got[:8], want[:8]) || !bytes.Equal(got[12:], want[12:]) {
		t.Fatalf("got % x, want ERR_VERS 1..1 % x", got, want)
	}
	c.validCall(3)
}

// TestV2ResponderV1Requester: the version-one requester engine against a
// responder with V2 on, through every reply path.
func TestV2ResponderV1Requester(t *testing.T) {
	p := newEnginePair(t, pairOpts{rcfg: ResponderConfig{V2: true}})
	r, err := p.call(readCallMsg(1, 100), &ReplyPlan{})
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, r, 1, 100, false)
	r.Release()
	r, err = p.call(readCallMsg(2, 70000), &ReplyPlan{ReplyChunk: 70100})
	if err != nil || r.Kind != ReplyReplyChunk {
		t.Fatalf("Reply chunk: %v", err)
	}
	checkRead(t, r, 2, 70000, false)
	r.Release()
	r, err = p.call(readCallMsg(3, 9000), &ReplyPlan{WriteChunks: []int{9000}})
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, r, 3, 9000, true)
	r.Release()
	if v := p.resp.Version(); v != 1 {
		t.Fatalf("version %d", v)
	}
}

// TestV2ResponderContinuedReply: a reply larger than the requester's
// receive size without a Reply chunk goes by continuation (version one
// answers ERR_CHUNK); with a large enough Reply chunk, REPLY_EXTERNAL.
func TestV2ResponderContinuedReply(t *testing.T) {
	p, c := v2Pair(t, ResponderConfig{}, linuxPrivateData)
	for i, n := range []int{4000, 4097, 10000, 65536 + 3, 300000} {
		xid := uint32(0x100 + i)
		c.sendOK(c.v2Call(xid, put32s(xid, opBig, uint32(n))))
		h, payload, sends := c.expectV2Reply(xid)
		want := append(put32s(xid, uint32(n)), patterned(n, int(xid))...)
		if h.HType != HTypeReplyInline || !bytes.Equal(payload, want) {
			t.Fatalf("BIG %d: %v, %d bytes", n, h, len(payload))
		}
		if wantSends := 1 + (n+8+V2ReplyInlineMinSize-1)/(4096-V2MiddleHeaderSize); n > 4000 && sends < 2 || sends > wantSends+1 {
			t.Fatalf("BIG %d in %d Sends", n, sends)
		}
	}
	// An item without a Write chunk goes inline, continued with the rest.
	c.sendOK(c.v2Call(0x200, put32s(0x200, opRead, 5001)))
	if _, payload, sends := c.expectV2Reply(0x200); sends < 2 || !bytes.Equal(payload, readReply(0x200, 5001)) {
		t.Fatalf("READ 5001 inline: %d Sends, %d bytes", sends, len(payload))
	}
	// A Reply chunk with room: REPLY_EXTERNAL, nothing inline.
	var h V2Header
	h.Init(0x201, c.v2Credit(), HTypeCallInline)
	h.SetReplyChunk(c.data(0, 20000, 0))
	c.sendOK(contMsg(t, &h, put32s(0x201, opBig, 10000)))
	rh, payload, sends := c.expectV2Reply(0x201)
	if rh.HType != HTypeReplyExternal || sends != 1 || len(payload) != 0 || rh.Reply.Len() != 10008 {
		t.Fatalf("Reply chunk: %v, %d Sends", rh, sends)
	}
	if want := append(put32s(0x201, 10000), patterned(10000, 0x201)...); !bytes.Equal(c.dataBytes(0, 10008), want) {
		t.Fatal("Reply chunk content differs")
	}
	if p.rmet.get("call_inline") < 7 {
		t.Fatalf("calls counted: %d", p.rmet.get("call_inline"))
	}
	c.validV2Call(0x202)
}

// TestV2ResponderContinuedCall: a call in MIDDLE fragments and a final
// CALL_INLINE reaches the Handler whole (ECHO replies with the call's
// own message, itself continued), with a Write chunk paired on the way.
func TestV2ResponderContinuedCall(t *testing.T) {
	p, c := v2Pair(t, ResponderConfig{}, linuxPrivateData)
	for i, n := range []int{5000, 20000, 100000} {
		xid := uint32(0x300 + i)
		rpc := append(put32s(xid, opEcho), patterned(n, i)...)
		var final V2Header
		final.Init(xid, c.v2Credit(), HTypeCallInline)
		frags := contFragments(t, &final, rpc, 4096)
		for _, f := range frags {
			c.sendOK(f)
		}
		h, payload, sends := c.expectV2Reply(xid)
		if h.HType != HTypeReplyInline || !bytes.Equal(payload, rpc) || sends < 2 {
			t.Fatalf("ECHO %d in %d fragments: %v, %d bytes in %d Sends", n, len(frags), h, len(payload), sends)
		}
	}
	// READ whose call is continued and whose item goes to a Write chunk.
	rpc := append(put32s(0x310, opRead, 3000), make([]byte, 6000)...)
	var final V2Header
	final.Init(0x310, c.v2Credit(), HTypeCallInline)
	final.AppendWriteChunk(c.data(65536, 4000, 0))
	for _, f := range contFragments(t, &final, rpc, 4096) {
		c.sendOK(f)
	}
	h, payload, _ := c.expectV2Reply(0x310)
	if len(h.Writes) != 1 || h.Writes[0].Len() != 3000 || !bytes.Equal(payload, put32s(0x310, 3000, trailerWord)) ||
		!bytes.Equal(c.dataBytes(65536, 3000), patterned(3000, 0x310)) {
		t.Fatalf("READ with a Write chunk: %v payload % x", h, payload)
	}
	if p.rmet.get("call_inline") != 4 {
		t.Fatalf("calls: %d", p.rmet.get("call_inline"))
	}
	c.validV2Call(0x311)
	if n := p.srv.pool.InUse(); n != 0 {
		waitFor(t, 2*time.Second, "pool back to idle", func() bool { return p.srv.pool.InUse() == p.idleServer() })
	}
}

// TestV2ResponderGrantZero: a requester that grants 0 credits gets its
// reply only after it sends RDMA2_GRANT.
func TestV2ResponderGrantZero(t *testing.T) {
	_, c := v2Pair(t, ResponderConfig{}, linuxPrivateData)
	var h V2Header
	h.Init(1, 0, HTypeCallInline)
	c.sendOK(contMsg(t, &h, put32s(1, opRead, 8)))
	if b := c.expect(300 * time.Millisecond); b != nil {
		t.Fatalf("reply sent without credit: % x", b)
	}
	var g V2Header
	g.Init(0, 1, HTypeGrant)
	c.sendOK(contMsg(t, &g, nil))
	rh, payload, _ := c.expectV2Reply(1)
	if rh.HType != HTypeReplyInline || !bytes.Equal(payload, readReply(1, 8)) {
		t.Fatalf("reply after GRANT: %v", rh)
	}
	c.validV2Call(2)
}

// TestV2ResponderGrants: with 4 credits, a call in 12 fragments sent as
// the credit allows is kept going by the responder's RDMA2_GRANTs.
func TestV2ResponderGrants(t *testing.T) {
	p, c := v2Pair(t, ResponderConfig{Credits: 4}, linuxPrivateData)
	c.validV2Call(1) // learn the first credit
	credit := uint32(1 + 4 - 1)
	sent := uint32(1)
	rpc := append(put32s(2, opEcho), patterned(12*4000, 2)...)
	var final V2Header
	final.Init(2, c.v2Credit(), HTypeCallInline)
	frags := contFragments(t, &final, rpc, 4096)
	grants := 0
	for _, f := range frags {
		for !V2MayPost(sent, credit) {
			h, _ := c.expectV2(5 * time.Second)
			if h.HType != HTypeGrant {
				t.Fatalf("waiting for credit, got %v", h)
			}
			credit = h.Credit
			grants++
		}
		c.sendOK(f)
		sent++
	}
	if _, payload, _ := c.expectV2Reply(2); !bytes.Equal(payload, rpc) {
		t.Fatal("echo differs")
	}
	if grants == 0 {
		t.Fatal("no RDMA2_GRANT")
	}
	t.Logf("%d fragments, %d grants", len(frags), grants)
	_ = p
}

// TestV2ResponderReplyResource: when continuation would take more Sends
// than the responder allows, RDMA2_ERR_REPLY_RESOURCE with the length.
func TestV2ResponderReplyResource(t *testing.T) {
	_, c := v2Pair(t, ResponderConfig{Credits: 4}, linuxPrivateData)
	c.sendOK(c.v2Call(1, put32s(1, opBig, 200000)))
	c.expectV2Error(1, 2, V2ErrorBody{Code: V2ErrReplyResource, LengthNeeded: 200008})
	c.validV2Call(2)
}

// TestV2ResponderRemoteInvalidate: a reply to a call whose rdma_inv_handle
// names its Write chunk's handle invalidates it (Send With Invalidate);
// a handle the call does not name is ignored.
func TestV2ResponderRemoteInvalidate(t *testing.T) {
	p, c := v2Pair(t, ResponderConfig{}, linuxPrivateData)
	var h V2Header
	h.Init(1, rawCredit, HTypeCallInline)
	w := c.data(0, 100, 0)
	h.AppendWriteChunk(w)
	h.InvHandle = w.Handle + 1 // not the call's
	c.sendOK(contMsg(t, &h, put32s(1, opRead, 50)))
	c.expectV2Reply(1)
	if !c.mr.Valid() || p.rmet.get("send_inv") != 0 {
		t.Fatal("a handle the call does not name was invalidated")
	}
	h.XID, h.InvHandle = 2, w.Handle
	c.sendOK(contMsg(t, &h, put32s(2, opRead, 50)))
	rh, _, _ := c.expectV2Reply(2)
	if rh.Writes[0].Len() != 50 || !bytes.Equal(c.dataBytes(0, 50), patterned(50, 2)) {
		t.Fatalf("reply %v", rh)
	}
	waitFor(t, 2*time.Second, "send_inv counted", func() bool { return p.rmet.get("send_inv") == 1 })
	if c.mr.Valid() {
		t.Fatal("the requester's handle is still valid after Send With Invalidate")
	}
}

// TestV2ResponderBadInput: every malformed version-two message gets its
// specified answer, and the connection serves a call afterwards.
func TestV2ResponderBadInput(t *testing.T) {
	check := goroutineBaseline(t)
	p, c := v2Pair(t, ResponderConfig{}, linuxPrivateData)
	c.validV2Call(1)

	v2 := func(xid uint32, t HType) *wire { return new(wire).u32(xid, V2Version, rawCredit, uint32(t)) }
	call := func(xid uint32) *wire { return v2(xid, HTypeCallInline).u32(0) } // + lists
	rpc := func(xid uint32, words ...uint32) []byte { return put32s(append([]uint32{xid}, words...)...) }
	seg := Segment{Handle: c.mr.RKey(), Length: 100, Offset: c.mr.Addr() + rawDataOff}
	manyWrites := call(0x31).u32(0)
	for range DefaultMaxWriteChunks + 1 {
		manyWrites.u32(1, 0)
	}
	manySegs := call(0x32).u32(0, 1, DefaultMaxSegmentsPerChunk+1)
	for range DefaultMaxSegmentsPerChunk + 1 {
		manySegs.seg(seg)
	}
	manyReads := call(0x33)
	for i := range DefaultMaxReadChunks + 1 {
		manyReads.read(uint32(12+4*i), Segment{Handle: seg.Handle, Length: 0, Offset: seg.Offset})
	}
	mid := func(xid, rem uint32, payload []byte) []byte {
		return append(v2(xid, HTypeCallMiddle).u32(rem).bytes(), payload...)
	}
	errAns := func(code V2ErrCode) *V2ErrorBody { return &V2ErrorBody{Code: code} }
	type tc struct {
		name  string
		msgs  [][]byte
		xid   uint32 // the answered XID
		vers  uint32 // its version (0: 2)
		err   *V2ErrorBody
		drop  bool
		check func(t *testing.T) // a reply, read by the case
	}
	one := func(b []byte) [][]byte { return [][]byte{b} }
	cases := []tc{
		{name: "12 bytes", msgs: one(put32s(0x10, 2, 32)), drop: true},
		{name: "unknown htype", msgs: one(v2(0x11, 99).bytes()), xid: 0x11, err: errAns(V2ErrInvalHType)},
		{name: "htype 3 (v1 RDMA_DONE)", msgs: one(v2(0x12, 3).bytes()), xid: 0x12, err: errAns(V2ErrInvalHType)},
		{name: "property value of 3 octets", msgs: one(v2(0, HTypeConnPropFinal).u32(1, uint32(PropRecvBufSize), 3, 0x01020300).bytes()), xid: 0, err: errAns(V2ErrBadPropVal)},
		{name: "Receive Buffer Size below 1024", msgs: one(v2(0, HTypeConnPropFinal).u32(1, uint32(PropRecvBufSize), 4, 512).bytes()), xid: 0, err: errAns(V2ErrBadPropVal)},
		{name: "CONNPROP_MIDDLE then a call", msgs: [][]byte{v2(0, HTypeConnPropMiddle).u32(0).bytes(), append(call(0x13).u32(0, 0, 0).bytes(), rpc(0x13, opRead, 8)...)}, xid: 0x13, err: errAns(V2ErrInvalCont)},
		{name: "CONNPROP_FINAL answered with ours", msgs: one(v2(0, HTypeConnPropFinal).u32(1, uint32(PropRecvBufSize), 4, 8192).bytes()),
			check: func(t *testing.T) {
				h, _ := c.expectV2(5 * time.Second)
				p := h.Properties()
				if h.HType != HTypeConnPropFinal || h.XID != 0 || p.RecvBufSize != 4096 || p.MaxSendSize != 4096 || p.ReverseDir != RvrsDirNone {
					t.Fatalf("got %v %+v", h, p)
				}
			}},
		{name: "CONNPROP_FINAL after the exchange", msgs: one(v2(0, HTypeConnPropFinal).u32(0).bytes()), xid: 0, err: errAns(V2ErrInvalCont)},
		{name: "REPLY_INLINE from the requester", msgs: one(append(v2(0x14, HTypeReplyInline).u32(0).bytes(), rpc(0x14, 1)...)), xid: 0x14, err: errAns(V2ErrInvalHType)},
		{name: "REPLY_EXTERNAL without Reply chunk", msgs: one(v2(0x15, HTypeReplyExternal).u32(0, 0).bytes()), xid: 0x15, err: errAns(V2ErrBadXDR)},
		{name: "RDMA2_ERROR from the requester", msgs: one(v2(0x16, HTypeError).u32(uint32(V2ErrSystem)).bytes()), drop: true},
		{name: "RDMA2_ERROR with unknown code", msgs: one(v2(0x17, HTypeError).u32(77).bytes()), drop: true},
		{name: "truncated RDMA2_ERROR", msgs: one(v2(0x18, HTypeError).u32(uint32(V2ErrVers), 1).bytes()), drop: true},
		{name: "GRANT", msgs: one(v2(0, HTypeGrant).bytes()), drop: true},
		{name: "version 1 on a version-two connection", msgs: one(append(fixed(0x19, 1, 32, ProcMsg).u32(0, 0, 0).bytes(), rpc(0x19, opRead, 8)...)), xid: 0x19, vers: 1, err: errAns(V2ErrVersMismatch)},
		{name: "version 0", msgs: one(fixed(0x1a, 0, 32, ProcMsg).bytes()), xid: 0x1a, vers: 0xffffffff, err: &V2ErrorBody{Code: V2ErrVers, VersLow: 1, VersHigh: 2}},
		{name: "CALL_INLINE without the RPC message", msgs: one(call(0x1b).u32(0, 0, 0).bytes()), xid: 0x1b, err: errAns(V2ErrBadXDR)},
		{name: "CALL_INLINE with a bad discriminator", msgs: one(append(call(0x1c).u32(2, 0, 0).bytes(), rpc(0x1c, opRead, 8)...)), xid: 0x1c, err: errAns(V2ErrBadXDR)},
		{name: "CALL_INLINE cut inside the Read list", msgs: one(call(0x1d).u32(1, 12, seg.Handle).bytes()), xid: 0x1d, err: errAns(V2ErrBadXDR)},
		{name: "CALL_EXTERNAL without a Call chunk", msgs: one(v2(0x1e, HTypeCallExternal).u32(0, 0, 0, 0, 0).bytes()), xid: 0x1e, err: errAns(V2ErrBadXDR)},
		{name: "Call chunk not at Position 0", msgs: one(v2(0x1f, HTypeCallExternal).u32(0).read(4, seg).u32(0, 0, 0, 0).bytes()), xid: 0x1f, err: errAns(V2ErrBadXDR)},
		{name: "data Read chunk at Position 0", msgs: one(append(call(0x20).read(0, seg).u32(0, 0, 0).bytes(), rpc(0x20, opRead, 8)...)), xid: 0x20, err: errAns(V2ErrBadXDR)},
		{name: "too many Write chunks", msgs: one(append(manyWrites.u32(0, 0).bytes(), rpc(0x31, opRead, 1)...)), xid: 0x31, err: &V2ErrorBody{Code: V2ErrWriteChunks, MaxChunks: DefaultMaxWriteChunks}},
		{name: "too many segments in a chunk", msgs: one(append(manySegs.u32(0, 0).bytes(), rpc(0x32, opRead, 1)...)), xid: 0x32, err: &V2ErrorBody{Code: V2ErrSegments, MaxSegments: DefaultMaxSegmentsPerChunk}},
		{name: "too many Read chunks", msgs: one(append(manyReads.u32(0, 0, 0).bytes(), rpc(0x33, opRead, 1)...)), xid: 0x33, err: &V2ErrorBody{Code: V2ErrReadChunks, MaxChunks: DefaultMaxReadChunks}},
		{name: "rdma_xid is not the RPC XID", msgs: one(append(call(0x34).u32(0, 0, 0).bytes(), rpc(0x35, opRead, 8)...)), xid: 0x34, err: errAns(V2ErrBadXDR)},
		{name: "Call chunk whose first word is not rdma_xid", msgs: one(v2(0x36, HTypeCallExternal).u32(0).read(0, c.rpcAt(16384, rpc(0x37, opRead, 8))).u32(0, 0, 0, 0).bytes()), xid: 0x36, err: errAns(V2ErrBadXDR)},
		{name: "Read chunk Position beyond the message", msgs: one(append(call(0x38).read(400, seg).u32(0, 0, 0).bytes(), rpc(0x38, opWrite, 100, trailerWord)...)), xid: 0x38,
			check: func(t *testing.T) {
				h, payload := c.expectV2(5 * time.Second)
				if h.HType != HTypeReplyInline || h.XID != 0x38 || !bytes.Equal(payload, rpc(0x38, 1, 0, 0, 0, 4)) {
					t.Fatalf("got %v % x, want GARBAGE_ARGS", h, payload)
				}
			}},
		{name: "Read chunk larger than any pool buffer", msgs: one(append(call(0x39).read(12, Segment{Handle: seg.Handle, Length: 2 << 20, Offset: seg.Offset}).u32(0, 0, 0).bytes(), rpc(0x39, opWrite, 2<<20)...)), xid: 0x39, err: errAns(V2ErrSystem)},
		{name: "Write chunk too small for the item", msgs: one(append(call(0x3a).u32(0, 1, 1).seg(Segment{Handle: seg.Handle, Length: 50, Offset: seg.Offset}).u32(0, 0).bytes(), rpc(0x3a, opRead, 100)...)), xid: 0x3a, err: &V2ErrorBody{Code: V2ErrWriteResource, ChunkIndex: 1, LengthNeeded: 100}},
		{name: "second Write chunk too small", msgs: one(append(call(0x3b).u32(0, 1, 1).seg(c.data(0, 64, 0)).u32(1, 1).seg(Segment{Handle: seg.Handle, Length: 10, Offset: seg.Offset + 4096}).u32(0, 0).bytes(), rpc(0x3b, opTwo, 8, 20)...)), xid: 0x3b, err: &V2ErrorBody{Code: V2ErrWriteResource, ChunkIndex: 2, LengthNeeded: 20}},
		{name: "interleaved continuation", msgs: [][]byte{mid(0x40, 8, rpc(0x40, opEcho)), append(call(0x41).u32(0, 0, 0).bytes(), rpc(0x41, opRead, 8)...)}, xid: 0x41,
			check: func(t *testing.T) {
				// Both the abandoned sequence and the message that broke it.
				c.expectV2Error(0x40, 2, V2ErrorBody{Code: V2ErrInvalCont})
				c.expectV2Error(0x41, 2, V2ErrorBody{Code: V2ErrInvalCont})
			}},
		{name: "continuation larger than the bound, rest discarded", msgs: [][]byte{mid(0x42, 64<<20, rpc(0x42, opEcho)), append(call(0x42).u32(0, 0, 0).bytes(), rpc(0x42, 1)...)}, xid: 0x42, err: errAns(V2ErrInvalCont)},
		{name: "rdma_remaining disagrees", msgs: [][]byte{mid(0x43, 100, rpc(0x43, opEcho)), append(call(0x43).u32(0, 0, 0).bytes(), rpc(0x43, 1)...)}, xid: 0x43, err: errAns(V2ErrInvalCont)},
		{name: "first fragment's word is not rdma_xid", msgs: [][]byte{mid(0x44, 8, rpc(0x45, opEcho)), append(call(0x44).u32(0, 0, 0).bytes(), rpc(0x44, 1)...)}, xid: 0x44, err: errAns(V2ErrBadXDR)},
		{name: "REPLY_MIDDLE in a call sequence", msgs: [][]byte{mid(0x46, 8, rpc(0x46, opEcho)), append(v2(0x46, HTypeReplyMiddle).u32(4).bytes(), rpc(1, 2)...)}, xid: 0x46, err: errAns(V2ErrInvalCont)},
		{name: "continued call completed", msgs: [][]byte{mid(0x47, 8, rpc(0x47, opEcho)), append(call(0x47).u32(0, 0, 0).bytes(), rpc(1, 2)...)}, xid: 0x47,
			check: func(t *testing.T) {
				if _, payload, _ := c.expectV2Reply(0x47); !bytes.Equal(payload, rpc(0x47, opEcho, 1, 2)) {
					t.Fatalf("echo % x", payload)
				}
			}},
		{name: "Long call through the Call chunk", msgs: one(v2(0x48, HTypeCallExternal).u32(0).read(0, c.rpcAt(20000, rpc(0x48, opRead, 8))).u32(0, 0, 0, 0).bytes()), xid: 0x48,
			check: func(t *testing.T) {
				if _, payload, _ := c.expectV2Reply(0x48); !bytes.Equal(payload, readReply(0x48, 8)) {
					t.Fatalf("reply % x", payload)
				}
			}},
	}
	if len(cases) < 25 {
		t.Fatalf("only %d cases", len(cases))
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, m := range tc.msgs {
				c.sendOK(m)
			}
			switch {
			case tc.drop:
				if got := c.expect(300 * time.Millisecond); got != nil {
					t.Fatalf("dropped message answered: % x", got)
				}
			case tc.check != nil:
				tc.check(t)
			default:
				vers := tc.vers
				if vers == 0 {
					vers = V2Version
				} else if vers == 0xffffffff {
					vers = 0
				}
				c.expectV2Error(tc.xid, vers, *tc.err)
			}
			// A discarded fragment is never answered.
			if got := c.expect(50 * time.Millisecond); got != nil {
				t.Fatalf("extra message: % x", got)
			}
			c.validV2Call(uint32(0x1000 + i))
			if err := p.resp.Err(); err != nil || p.resp.Version() != 2 {
				t.Fatalf("connection after the case: %v, version %d", err, p.resp.Version())
			}
		})
	}
	p.closeRaw(t, c)
	check()
}

// TestV2ResponderPropertyExchange: the requester's first message is its
// CONNPROP_FINAL; the responder answers with its own and then sends no
// message larger than the requester's Receive Buffer Size (2048 here:
// a 6000-byte reply goes in 3 Sends or more).
func TestV2ResponderPropertyExchange(t *testing.T) {
	p, c := v2Pair(t, ResponderConfig{}, nil)
	var h V2Header
	h.Init(0, 1, HTypeConnPropFinal)
	h.AppendPropUint32(PropRecvBufSize, 2048)
	h.AppendPropUint32(PropMaxSendSize, 4096)
	h.AppendProp(99, []byte{1, 2, 3, 4}) // unknown: ignored
	c.sendOK(contMsg(t, &h, nil))
	ans, _ := c.expectV2(5 * time.Second)
	if ans.HType != HTypeConnPropFinal || p.resp.Version() != 2 {
		t.Fatalf("answer %v, version %d", ans, p.resp.Version())
	}
	c.sendOK(c.v2Call(1, put32s(1, opBig, 6000)))
	rh, payload, sends := c.expectV2Reply(1)
	if rh.HType != HTypeReplyInline || sends < 3 || !bytes.Equal(payload, append(put32s(1, 6000), patterned(6000, 1)...)) {
		t.Fatalf("reply %v in %d Sends", rh, sends)
	}
	c.validV2Call(2)
}
