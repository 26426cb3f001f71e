package rdmarpc

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// v2fixed starts a version-two message: the four prefix words.
func v2fixed(xid, credit uint32, t HType) *wire {
	return new(wire).u32(xid, V2Version, credit, uint32(t))
}

// gseg are the segments the golden vectors use.
var (
	gsegA = Segment{Handle: 0xab000001, Length: 4096, Offset: 0x7f0000001000}
	gsegB = Segment{Handle: 0xab000002, Length: 8192, Offset: 0x7f0000003000}
	gsegC = Segment{Handle: 0xab000003, Length: 65536, Offset: 0x7f0000010000}
	gsegD = Segment{Handle: 0xab000004, Length: 4240, Offset: 0x7f0000020000}
)

func withLen(s Segment, n uint32) Segment { s.Length = n; return s }

// v2TypicalCall is the benchmark call: CALL_INLINE with a 2-segment Read
// chunk, a Write chunk and a Reply chunk (golden call-inline-chunks.txt).
func v2TypicalCall(h *V2Header) {
	h.Init(0x5eed0001, 128, HTypeCallInline)
	h.InvHandle = gsegC.Handle
	h.AppendReadChunk(148, gsegA, gsegB)
	h.AppendWriteChunk(gsegC)
	h.SetReplyChunk(gsegD)
}

// v2TypicalReply is the benchmark reply: REPLY_INLINE returning one Write
// chunk (golden reply-inline.txt).
func v2TypicalReply(h *V2Header) {
	h.Init(0x5eed0001, 128, HTypeReplyInline)
	h.AppendWriteChunk(withLen(gsegC, 1000))
}

func goldenMsg(t testing.TB, name string) []byte {
	for _, g := range loadV2Golden(t) {
		if g.name == name {
			return g.msg
		}
	}
	t.Fatalf("no golden vector %s", name)
	return nil
}

// TestV2BuildersMatchGolden: the builders produce the hand-written bytes.
func TestV2BuildersMatchGolden(t *testing.T) {
	tests := []struct {
		golden string
		build  func(h *V2Header)
	}{
		{"call-inline-empty.txt", func(h *V2Header) { h.Init(0x9a3c11f2, 32, HTypeCallInline) }},
		{"call-inline-chunks.txt", v2TypicalCall},
		{"call-external.txt", func(h *V2Header) {
			h.Init(0x00c0ffee, 16, HTypeCallExternal)
			h.AppendCallSegment(gsegA)
			h.AppendCallSegment(gsegB)
			h.AppendReadChunk(160, gsegC)
			h.SetReplyChunk(gsegD)
		}},
		{"call-middle.txt", func(h *V2Header) { h.Init(0x102, 8, HTypeCallMiddle); h.Remaining = 5000 }},
		{"reply-inline.txt", v2TypicalReply},
		{"reply-external.txt", func(h *V2Header) {
			h.Init(0x00c0ffee, 16, HTypeReplyExternal)
			h.SetReplyChunk(withLen(gsegD, 3000))
		}},
		{"reply-middle.txt", func(h *V2Header) { h.Init(0x103, 8, HTypeReplyMiddle); h.Remaining = 12 }},
		{"grant.txt", func(h *V2Header) { h.Init(0, 64, HTypeGrant) }},
		{"connprop-final.txt", func(h *V2Header) {
			h.Init(1, 1, HTypeConnPropFinal)
			h.AppendTransportProps(TransportProps{MaxSendSize: 4096, RecvBufSize: 8192, MaxSegmentSize: 1 << 20,
				MaxSegmentCount: 16, ReverseDir: RvrsDirSimple, HostAuth: []byte("abc")})
			h.AppendProp(99, []byte("xyz"))
		}},
		{"connprop-middle-default.txt", func(h *V2Header) {
			h.Init(1, 1, HTypeConnPropMiddle)
			h.AppendProp(PropRecvBufSize, nil)
		}},
		{"error-vers.txt", func(h *V2Header) {
			h.Init(0xabcd, 32, HTypeError)
			h.ErrBody = V2ErrorBody{Code: V2ErrVers, VersLow: 1, VersHigh: 2}
		}},
		{"error-write-resource.txt", func(h *V2Header) {
			h.Init(0xabcd, 32, HTypeGrant)
			h.SetError(V2ErrorBody{Code: V2ErrWriteResource, ChunkIndex: 1, LengthNeeded: 128 << 10})
		}},
		{"error-write-chunks.txt", func(h *V2Header) {
			h.Init(0xabcd, 32, HTypeError)
			h.ErrBody = V2ErrorBody{Code: V2ErrWriteChunks, MaxChunks: 0, MaxSegments: 99} // other arm ignored
		}},
	}
	for _, tc := range tests {
		var h V2Header
		tc.build(&h)
		want := goldenMsg(t, tc.golden)
		out := make([]byte, h.EncodedLen())
		n, err := h.Encode(out)
		if err != nil || n != len(out) || !bytes.HasPrefix(want, out) {
			t.Errorf("%s: Encode = %x (%v)\nwant prefix of %x", tc.golden, out[:n], err, want)
			continue
		}
		var d V2Header
		if m, err := d.Decode(want, Limits{}); err != nil || m != n || !d.Equal(&h) {
			t.Errorf("%s: decode of golden = %v (%v), n %d; built %v", tc.golden, &d, err, m, &h)
		}
	}
}

// TestV2DecodeErrors: each malformed header gets its answer and says what
// and where.
func TestV2DecodeErrors(t *testing.T) {
	tight := Limits{MaxReadSegments: 3, MaxReadChunks: 1, MaxWriteChunks: 1, MaxSegmentsPerChunk: 2, MaxChunkBytes: 1 << 20}
	call := func() *wire { return v2fixed(9, 4, HTypeCallInline).u32(0) }
	ext := func() *wire { return v2fixed(9, 4, HTypeCallExternal).u32(0) }
	rpc := []uint32{9, 0}
	big := Segment{Handle: 1, Length: 1<<20 + 1, Offset: 0}
	tests := []struct {
		name   string
		in     []byte
		lim    Limits
		code   V2ErrCode
		reason Reason
		where  Where
		off    int
		index  int
		max    uint32
	}{
		{"version 1", new(wire).u32(9, 1, 4, 0, 0, 0, 0).bytes(), Limits{}, V2ErrVers, ReasonBadVersion, InFixed, 4, -1, 0},
		{"htype 3", v2fixed(9, 4, 3).bytes(), Limits{}, V2ErrInvalHType, ReasonBadHType, InFixed, 12, -1, 0},
		{"htype 14", v2fixed(9, 4, 14).u32(0, 0, 0).bytes(), Limits{}, V2ErrInvalHType, ReasonBadHType, InFixed, 12, -1, 0},
		{"no inv handle", v2fixed(9, 4, HTypeCallInline).bytes(), Limits{}, V2ErrBadXDR, ReasonTruncated, InV2Body, 16, -1, 0},
		{"no rdma_remaining", v2fixed(9, 4, HTypeReplyMiddle).bytes(), Limits{}, V2ErrBadXDR, ReasonTruncated, InV2Body, 16, -1, 0},
		{"middle without message", v2fixed(9, 4, HTypeCallMiddle).u32(100).bytes(), Limits{}, V2ErrBadXDR, ReasonTruncated, InRPCMessage, 20, -1, 0},
		{"reply inline without message", v2fixed(9, 4, HTypeReplyInline).u32(0).bytes(), Limits{}, V2ErrBadXDR, ReasonTruncated, InRPCMessage, 20, -1, 0},
		{"truncated Read list", call().u32(1, 4).bytes(), Limits{}, V2ErrBadXDR, ReasonTruncated, InReadList, 24, 0, 0},
		{"discriminator 2", call().u32(2).bytes(), Limits{}, V2ErrBadXDR, ReasonBadDiscriminator, InReadList, 20, 0, 0},
		{"Position 6", call().read(6, gsegA).u32(0, 0, 0).u32(rpc...).bytes(), Limits{}, V2ErrBadXDR, ReasonBadPosition, InReadList, 24, 0, 0},
		{"Position order", call().read(8, gsegA).read(4, gsegB).u32(0, 0, 0).u32(rpc...).bytes(), Limits{}, V2ErrBadXDR, ReasonPositionOrder, InReadList, 48, 1, 0},
		{"Position zero data chunk", call().read(0, gsegA).u32(0, 0, 0).u32(rpc...).bytes(), Limits{}, V2ErrBadXDR, ReasonDataPositionZero, InReadList, 24, 0, 0},
		{"external: Position zero data chunk", ext().read(0, gsegA).u32(0).read(0, gsegB).u32(0, 0, 0).bytes(), Limits{}, V2ErrBadXDR, ReasonDataPositionZero, InReadList, 52, 0, 0},
		{"external: no Call chunk", ext().u32(0, 0, 0, 0).bytes(), Limits{}, V2ErrBadXDR, ReasonNoCallChunk, InCallChunk, 20, -1, 0},
		{"external: Call chunk Position 8", ext().read(0, gsegA).read(8, gsegB).u32(0, 0, 0, 0).bytes(), Limits{}, V2ErrBadXDR, ReasonCallPosition, InCallChunk, 48, 1, 0},
		{"external: Call chunk truncated", ext().u32(1, 0, 1).bytes(), Limits{}, V2ErrBadXDR, ReasonTruncated, InCallChunk, 24, 0, 0},
		{"reply external: no Reply chunk", v2fixed(9, 4, HTypeReplyExternal).u32(0, 0).bytes(), Limits{}, V2ErrBadXDR, ReasonNoReplyChunk, InReplyChunk, 20, -1, 0},
		{"too many Read chunks", call().read(8, gsegA).read(12, gsegB).u32(0, 0, 0).u32(rpc...).bytes(), tight, V2ErrReadChunks, ReasonTooManyChunks, InReadList, 48, 1, 1},
		{"too many Write chunks", call().u32(0, 1).chunk(gsegA).u32(1).chunk(gsegB).u32(0, 0).u32(rpc...).bytes(), tight, V2ErrWriteChunks, ReasonTooManyChunks, InWriteList, 52, 1, 1},
		{"too many segments in a Write chunk", call().u32(0, 1).chunk(gsegA, gsegB, gsegC).u32(0, 0).u32(rpc...).bytes(), tight, V2ErrSegments, ReasonTooManySegments, InWriteList, 28, 0, 2},
		{"too many Call chunk segments", ext().read(0, gsegA).read(0, gsegB).read(0, gsegC).u32(0, 0, 0, 0).bytes(), tight, V2ErrSegments, ReasonTooManySegments, InCallChunk, 72, 2, 2},
		{"Reply chunk over MaxChunkBytes", call().u32(0, 0, 1).chunk(big).u32(rpc...).bytes(), tight, V2ErrSystem, ReasonChunkTooLarge, InReplyChunk, 32, -1, 0},
		{"segment wraps", v2fixed(9, 4, HTypeReplyInline).u32(1).chunk(Segment{Handle: 1, Length: 2, Offset: ^uint64(0)}).u32(0).u32(rpc...).bytes(), Limits{}, V2ErrBadXDR, ReasonSegmentWraps, InWriteList, 20, 0, 0},
		{"error body truncated", v2fixed(9, 4, HTypeError).u32(1, 1).bytes(), Limits{}, V2ErrBadXDR, ReasonTruncated, InErrorBody, 20, -1, 0},
		{"error without rdma_err", v2fixed(9, 4, HTypeError).bytes(), Limits{}, V2ErrBadXDR, ReasonTruncated, InErrorBody, 16, -1, 0},
		{"prop count beyond message", v2fixed(9, 4, HTypeConnPropFinal).u32(3, 1, 0).bytes(), Limits{}, V2ErrBadXDR, ReasonTruncated, InProps, 20, -1, 0},
		{"prop data beyond message", v2fixed(9, 4, HTypeConnPropFinal).u32(1, 99, 100, 0).bytes(), Limits{}, V2ErrBadPropVal, ReasonTruncated, InProps, 20, 0, 0},
		{"SBSIZ of 8 bytes", v2fixed(9, 4, HTypeConnPropFinal).u32(2, 99, 0, 1, 8, 0, 4096).bytes(), Limits{}, V2ErrBadPropVal, ReasonBadPropVal, InProps, 28, 1, 0},
		{"BRS of 3 bytes", v2fixed(9, 4, HTypeConnPropMiddle).u32(1, 5, 3, 0).bytes(), Limits{}, V2ErrBadPropVal, ReasonBadPropVal, InProps, 20, 0, 0},
		{"HOSTAUTH opaque longer than data", v2fixed(9, 4, HTypeConnPropFinal).u32(1, 6, 8, 5, 0).bytes(), Limits{}, V2ErrBadPropVal, ReasonBadPropVal, InProps, 20, 0, 0},
		{"HOSTAUTH with trailing bytes", v2fixed(9, 4, HTypeConnPropFinal).u32(1, 6, 12, 1, 0, 0).bytes(), Limits{}, V2ErrBadPropVal, ReasonBadPropVal, InProps, 20, 0, 0},
	}
	for _, tc := range tests {
		var h V2Header
		n, err := h.Decode(tc.in, tc.lim)
		var ve *V2Error
		if !errors.As(err, &ve) || n != 0 {
			t.Errorf("%s: Decode = %d, %v; want a *V2Error", tc.name, n, err)
			continue
		}
		if ve.Code != tc.code || ve.Reason != tc.reason || ve.Where != tc.where || ve.Offset != tc.off || ve.Index != tc.index || ve.Max != tc.max {
			t.Errorf("%s: got %v / %v / %v off %d index %d max %d\n want %v / %v / %v off %d index %d max %d\n (%v)", tc.name,
				ve.Code, ve.Reason, ve.Where, ve.Offset, ve.Index, ve.Max, tc.code, tc.reason, tc.where, tc.off, tc.index, tc.max, err)
		}
		if ve.XID != 9 || ve.HType != HType(tc.in[15]) {
			t.Errorf("%s: error names xid %d %v", tc.name, ve.XID, ve.HType)
		}
		if !errors.Is(err, ErrV2Header) && !errors.Is(err, ErrVersion) {
			t.Errorf("%s: %v matches no sentinel", tc.name, err)
		}
		if errors.Is(err, ErrBadPropVal) != (tc.code == V2ErrBadPropVal) {
			t.Errorf("%s: ErrBadPropVal match wrong", tc.name)
		}
		if !strings.Contains(err.Error(), tc.code.String()) || !strings.Contains(err.Error(), tc.where.String()) {
			t.Errorf("%s: message %q lacks the answer or the place", tc.name, err)
		}
	}
}

// TestV2ShortPrefix: fewer than 16 octets is a ShortError, answered with
// nothing, whatever the version.
func TestV2ShortPrefix(t *testing.T) {
	for _, n := range []int{0, 4, 8, 15} {
		var h V2Header
		_, err := h.Decode(make([]byte, n), Limits{})
		var se *ShortError
		if !errors.As(err, &se) || se.Len != n || se.Need != V2PrefixSize {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if !strings.Contains(err.Error(), "need 16") {
			t.Fatalf("message %q", err)
		}
		var a V2Header
		if a.SetErrorAnswer(err, 1, 1, 2) {
			t.Fatalf("%d bytes: answered", n)
		}
	}
}

// TestV2ErrorAnswer: the RDMA2_ERROR owed for a decode error echoes the
// XID and version and carries the arm; an RDMA2_ERROR is never answered.
func TestV2ErrorAnswer(t *testing.T) {
	tight := Limits{MaxWriteChunks: 1}
	tests := []struct {
		name string
		in   []byte
		lim  Limits
		want []byte // nil: no answer
	}{
		{"version 3", v2fixed(7, 4, HTypeCallInline).bytes()[:4], Limits{}, nil}, // short
		{"version 3 call", new(wire).u32(7, 3, 4, 10).bytes(), Limits{}, new(wire).u32(7, 3, 32, 4, 1, 1, 2).bytes()},
		{"version 1 RDMA_ERROR", new(wire).u32(7, 1, 4, 4, 2).bytes(), Limits{}, nil},
		{"unknown htype", v2fixed(7, 4, 99).bytes(), Limits{}, v2fixed(7, 32, HTypeError).u32(4).bytes()},
		{"bad propval", v2fixed(7, 4, HTypeConnPropFinal).u32(1, 1, 1, 0).bytes(), Limits{}, v2fixed(7, 32, HTypeError).u32(3).bytes()},
		{"write chunks", v2fixed(7, 4, HTypeCallInline).u32(0, 0, 1, 0, 1, 0, 0, 0, 7).bytes(), tight, v2fixed(7, 32, HTypeError).u32(7, 1).bytes()},
		{"truncated error", v2fixed(7, 4, HTypeError).u32(9).bytes(), Limits{}, nil},
	}
	for _, tc := range tests {
		var h, a V2Header
		_, err := h.Decode(tc.in, tc.lim)
		if err == nil {
			t.Fatalf("%s: decoded", tc.name)
		}
		ok := a.SetErrorAnswer(err, 32, 1, 2)
		if ok != (tc.want != nil) {
			t.Errorf("%s: answered = %v (%v)", tc.name, ok, err)
			continue
		}
		if !ok {
			continue
		}
		out := make([]byte, a.EncodedLen())
		if n, err := a.Encode(out); err != nil || !bytes.Equal(out[:n], tc.want) {
			t.Errorf("%s: answer %x (%v), want %x", tc.name, out[:n], err, tc.want)
		}
	}
}

func TestV2Properties(t *testing.T) {
	var h V2Header
	if _, err := h.Decode(goldenMsg(t, "connprop-final.txt"), Limits{}); err != nil {
		t.Fatal(err)
	}
	p := h.Properties()
	want := TransportProps{MaxSendSize: 4096, RecvBufSize: 8192, MaxSegmentSize: 1 << 20, MaxSegmentCount: 16,
		ReverseDir: RvrsDirSimple, HostAuth: []byte("abc"), Present: 0x7e}
	if p.MaxSendSize != want.MaxSendSize || p.RecvBufSize != want.RecvBufSize || p.MaxSegmentSize != want.MaxSegmentSize ||
		p.MaxSegmentCount != want.MaxSegmentCount || p.ReverseDir != want.ReverseDir || !bytes.Equal(p.HostAuth, want.HostAuth) ||
		p.Present != want.Present {
		t.Fatalf("Properties = %+v, want %+v", p, want)
	}
	if !p.Has(PropHostAuth) || p.Has(99) {
		t.Fatal("Has")
	}

	// Unknown properties are kept whatever their length; a later known
	// property replaces an earlier one; empty data is the default.
	in := v2fixed(1, 1, HTypeConnPropMiddle).u32(4,
		2, 4, 9000,
		1234, 5, 1, 2, // unknown, 5 bytes
		2, 0, // RBSIZ default
		4, 4, 3, // RCSIZ 3
	).bytes()
	if _, err := h.Decode(in, Limits{}); err != nil {
		t.Fatal(err)
	}
	p = h.Properties()
	if p.RecvBufSize != DefaultPropRecvBufSize || p.MaxSegmentCount != 3 || p.MaxSendSize != DefaultPropMaxSendSize || p.Present != 1<<2|1<<4 {
		t.Fatalf("Properties = %+v", p)
	}
	if len(h.Props) != 4 || h.Props[1].Which != 1234 || len(h.Props[1].Data) != 5 {
		t.Fatalf("Props = %+v", h.Props)
	}
	if d := DefaultTransportProps(); d.MaxSegmentSize != 1048576 || d.ReverseDir != RvrsDirNone || d.HostAuth != nil {
		t.Fatalf("defaults %+v", d)
	}
}

// TestV2CopyFrom: the copy owns its storage, property data included.
func TestV2CopyFrom(t *testing.T) {
	for _, name := range []string{"call-external.txt", "call-inline-chunks.txt", "connprop-final.txt", "error-write-resource.txt"} {
		msg := bytes.Clone(goldenMsg(t, name))
		var h, c V2Header
		if _, err := h.Decode(msg, Limits{}); err != nil {
			t.Fatal(err)
		}
		c.CopyFrom(&h)
		if !c.Equal(&h) {
			t.Fatalf("%s: copy %v differs from %v", name, &c, &h)
		}
		var fresh V2Header
		fresh.CopyFrom(&h)
		for i := range msg {
			msg[i] ^= 0xff
		}
		var again V2Header
		again.Decode(goldenMsg(t, name), Limits{})
		if !c.Equal(&again) {
			t.Fatalf("%s: copy changed with the message buffer", name)
		}
	}
}

func TestV2Credit(t *testing.T) {
	tests := []struct {
		sent, received uint32
		ok             bool
	}{
		{0, V2InitialReceivedCredits, true}, // the first message
		{1, V2InitialReceivedCredits, false},
		{31, 32, true},
		{32, 32, false}, // the draft's literal "greater than" would allow this one
		{5, 0, false},   // a grant of zero
		{0xffffffff, 3, true},
		{2, 3, true},
		{3, 3, false},
	}
	for _, tc := range tests {
		if got := V2MayPost(tc.sent, tc.received); got != tc.ok {
			t.Errorf("V2MayPost(%d, %d) = %v", tc.sent, tc.received, got)
		}
	}
	if V2Credit(0xfffffff0, 0x20) != 0x10 {
		t.Error("V2Credit does not wrap")
	}
}

func TestV2InvHandleListed(t *testing.T) {
	var h V2Header
	v2TypicalCall(&h)
	for _, tc := range []struct {
		inv uint32
		ok  bool
	}{{0, true}, {gsegA.Handle, true}, {gsegC.Handle, true}, {gsegD.Handle, true}, {0x1234, false}} {
		h.InvHandle = tc.inv
		if h.InvHandleListed() != tc.ok {
			t.Errorf("inv %#x: listed = %v", tc.inv, !tc.ok)
		}
	}
}

func TestV2HTypeClasses(t *testing.T) {
	var calls, replies, control, payload, middle int
	for ht := HType(0); ht < 20; ht++ {
		if ht.IsCall() {
			calls++
		}
		if ht.IsReply() {
			replies++
		}
		if ht.IsControl() {
			control++
		}
		if ht.HasPayload() {
			payload++
		}
		if ht.IsMiddle() {
			middle++
		}
		if ht.Known() != strings.HasPrefix(ht.String(), "RDMA2_") {
			t.Errorf("%d: Known %v, String %s", ht, ht.Known(), ht)
		}
	}
	if calls != 3 || replies != 3 || control != 4 || payload != 4 || middle != 3 {
		t.Fatalf("classes %d %d %d %d %d", calls, replies, control, payload, middle)
	}
	if V2ErrCode(77).Known() || !V2ErrSystem.Known() || V2ErrSystem.String() != "RDMA2_ERR_SYSTEM" {
		t.Fatal("V2ErrCode")
	}
}

// TestV2DecodeAllocatesNothing: decoding and encoding calls and replies,
// building them, and decoding a property set allocate nothing.
func TestV2DecodeAllocatesNothing(t *testing.T) {
	var call, reply V2Header
	v2TypicalCall(&call)
	v2TypicalReply(&reply)
	for name, h := range map[string]*V2Header{"call": &call, "reply": &reply} {
		in := make([]byte, h.EncodedLen()+8) // room for the RPC message's first words
		if _, err := h.Encode(in); err != nil {
			t.Fatal(err)
		}
		var d V2Header
		var err error
		if a := testing.AllocsPerRun(200, func() { _, err = d.Decode(in, Limits{}) }); a != 0 || err != nil {
			t.Errorf("%s: Decode allocates %.1f (err %v)", name, a, err)
		}
		out := make([]byte, len(in))
		if a := testing.AllocsPerRun(200, func() { _, err = h.Encode(out) }); a != 0 || err != nil {
			t.Errorf("%s: Encode allocates %.1f (err %v)", name, a, err)
		}
	}
	var b V2Header
	if a := testing.AllocsPerRun(200, func() {
		v2TypicalCall(&b)
		v2TypicalReply(&b)
		b.Init(1, 1, HTypeConnPropFinal)
		b.AppendTransportProps(DefaultTransportProps())
		_ = b.Properties()
	}); a != 0 {
		t.Errorf("building allocates %.1f", a)
	}
	props := goldenMsg(t, "connprop-final.txt")
	if a := testing.AllocsPerRun(200, func() { b.Decode(props, Limits{}) }); a != 0 {
		t.Errorf("property set Decode allocates %.1f", a)
	}
}

// benchV2Decode measures Decode of the header build makes, followed by
// the first words of its RPC message.
func benchV2Decode(b *testing.B, build func(*V2Header)) {
	var h V2Header
	build(&h)
	in := make([]byte, h.EncodedLen()+8)
	h.Encode(in)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Decode(in, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchV2Encode measures the sender's path: build, then Encode.
func benchV2Encode(b *testing.B, build func(*V2Header)) {
	var h V2Header
	out := make([]byte, 256)
	b.ReportAllocs()
	for b.Loop() {
		build(&h)
		if _, err := h.Encode(out); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkV2DecodeCall(b *testing.B)  { benchV2Decode(b, v2TypicalCall) }
func BenchmarkV2EncodeCall(b *testing.B)  { benchV2Encode(b, v2TypicalCall) }
func BenchmarkV2DecodeReply(b *testing.B) { benchV2Decode(b, v2TypicalReply) }
func BenchmarkV2EncodeReply(b *testing.B) { benchV2Encode(b, v2TypicalReply) }
