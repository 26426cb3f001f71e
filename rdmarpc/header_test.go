package rdmarpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/rdmagw/rdmagw/xdr"
)

// nullCall is an ONC RPC CALL of NFSv4 procedure 0 (NULL) with AUTH_NONE,
// what a Linux client sends first on a new NFSv4.1 mount.
func nullCall(xid uint32) []byte {
	return new(wire).u32(xid, 0 /*CALL*/, 2 /*rpcvers*/, 100003, 4, 0,
		0, 0, // cred AUTH_NONE, length 0
		0, 0, // verf AUTH_NONE, length 0
	).bytes()
}

func TestDecodeMsgEmptyListsThenRPCCall(t *testing.T) {
	rpc := nullCall(0x9a3c11f2)
	msg := append(fixed(0x9a3c11f2, 1, 128, ProcMsg).u32(0, 0, 0).bytes(), rpc...)

	var h Header
	n, err := h.Decode(msg, Limits{})
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if n != MinHeaderSize {
		t.Fatalf("header length %d, want %d", n, MinHeaderSize)
	}
	if !bytes.Equal(msg[n:], rpc) {
		t.Fatalf("payload after header = %x, want the RPC call %x", msg[n:], rpc)
	}
	if h.XID != 0x9a3c11f2 || h.Vers != 1 || h.Credit != 128 || h.Proc != ProcMsg {
		t.Fatalf("fixed header = %v", &h)
	}
	if len(h.Reads) != 0 || len(h.Writes) != 0 || h.HasReply {
		t.Fatalf("lists not empty: %v", &h)
	}
	// The RPC XID is the first word of the payload and matches rdma_xid.
	if got := binary.BigEndian.Uint32(msg[n:]); got != h.XID {
		t.Fatalf("RPC xid %#x != rdma_xid %#x", got, h.XID)
	}

	out := make([]byte, h.EncodedLen())
	m, err := h.Encode(out)
	if err != nil || m != n || !bytes.Equal(out, msg[:n]) {
		t.Fatalf("Encode = %x, %v; want %x", out[:m], err, msg[:n])
	}
}

// TestEncodeByteExact checks each message kind against a vector written
// out word by word.
func TestEncodeByteExact(t *testing.T) {
	tests := []struct {
		name  string
		build func(h *Header)
		want  []byte
	}{
		{
			name:  "typical RDMA_MSG",
			build: typicalHeader,
			want:  typicalWire(),
		},
		{
			name: "Long call: RDMA_NOMSG with 3-segment Position-Zero chunk and a data chunk",
			build: func(h *Header) {
				h.Init(7, 32, ProcNoMsg)
				h.AppendReadChunk(0, seg(0), seg(1), seg(2))
				h.AppendReadSegment(200, seg(3))
				h.SetReplyChunk(seg(4), seg(5))
			},
			want: fixed(7, 1, 32, ProcNoMsg).
				read(0, seg(0)).read(0, seg(1)).read(0, seg(2)).read(200, seg(3)).u32(0).
				u32(0).
				u32(1).chunk(seg(4), seg(5)).bytes(),
		},
		{
			name: "Long reply: RDMA_NOMSG with Reply chunk, unused Write chunk returned with zero lengths",
			build: func(h *Header) {
				h.Init(8, 64, ProcNoMsg)
				h.AppendWriteChunk(Segment{Handle: 1, Length: 0, Offset: 0x1000}, Segment{Handle: 2, Length: 0, Offset: 0x2000})
				h.SetReplyChunk(Segment{Handle: 3, Length: 812, Offset: 0x3000})
			},
			want: fixed(8, 1, 64, ProcNoMsg).u32(0).
				u32(1).chunk(Segment{1, 0, 0x1000}, Segment{2, 0, 0x2000}).u32(0).
				u32(1).chunk(Segment{3, 812, 0x3000}).bytes(),
		},
		{
			name: "two Write chunks, empty Write chunk, empty Reply chunk",
			build: func(h *Header) {
				h.Init(9, 1, ProcMsg)
				h.AppendWriteChunk(seg(0), seg(1), seg(2))
				h.AppendWriteChunk()
				h.AppendWriteChunk(seg(3), seg(4))
				h.SetReplyChunk()
			},
			want: fixed(9, 1, 1, ProcMsg).u32(0).
				u32(1).chunk(seg(0), seg(1), seg(2)).u32(1).chunk().u32(1).chunk(seg(3), seg(4)).u32(0).
				u32(1).chunk().bytes(),
		},
		{
			name:  "ERR_VERS",
			build: func(h *Header) { h.Init(10, 5, ProcMsg); h.SetErrVers(1, 1) },
			want:  fixed(10, 1, 5, ProcError).u32(1, 1, 1).bytes(),
		},
		{
			name:  "ERR_CHUNK",
			build: func(h *Header) { h.Init(11, 5, ProcMsg); h.SetErrChunk() },
			want:  fixed(11, 1, 5, ProcError).u32(2).bytes(),
		},
		{
			name:  "RDMA_DONE",
			build: func(h *Header) { h.Init(12, 0, ProcDone) },
			want:  fixed(12, 1, 0, ProcDone).bytes(),
		},
		{
			name: "RDMA_MSGP",
			build: func(h *Header) {
				h.Init(13, 2, ProcMsgP)
				h.Align, h.Thresh = 4096, 1024
				h.AppendWriteChunk(seg(0))
			},
			want: fixed(13, 1, 2, ProcMsgP).u32(4096, 1024).u32(0).u32(1).chunk(seg(0)).u32(0).u32(0).bytes(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Header
			tt.build(&h)
			if h.EncodedLen() != len(tt.want) {
				t.Fatalf("EncodedLen = %d, want %d", h.EncodedLen(), len(tt.want))
			}
			buf := make([]byte, len(tt.want))
			n, err := h.Encode(buf)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if !bytes.Equal(buf[:n], tt.want) {
				t.Fatalf("Encode:\n got %x\nwant %x", buf[:n], tt.want)
			}
			// One byte short must overflow, not truncate silently.
			if _, err := h.Encode(buf[:len(buf)-1]); !errors.Is(err, xdr.ErrOverflow) {
				t.Fatalf("Encode into short buffer: err = %v, want ErrOverflow", err)
			}

			// Decode the vector (with trailing payload) back.
			in := append(append([]byte(nil), tt.want...), 0xde, 0xad, 0xbe, 0xef)
			var g Header
			m, err := g.Decode(in, Limits{})
			if h.Proc == ProcMsgP || h.Proc == ProcDone {
				var ce *ChunkError
				if !errors.As(err, &ce) || ce.Reason != ReasonReservedProc {
					t.Fatalf("Decode reserved proc: err = %v, want ReasonReservedProc", err)
				}
			} else if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if m != len(tt.want) {
				t.Fatalf("Decode length %d, want %d", m, len(tt.want))
			}
			if !g.Equal(&h) {
				t.Fatalf("Decode = %v, want %v", &g, &h)
			}
		})
	}
}

func TestDecodeMalformed(t *testing.T) {
	small := Limits{MaxReadSegments: 3, MaxReadChunks: 2, MaxWriteChunks: 2, MaxSegmentsPerChunk: 2, MaxChunkBytes: 10000}
	big := func(n uint32) Segment { return Segment{Handle: 1, Length: n, Offset: 0} }
	msg := func() *wire { return fixed(0x42, 1, 8, ProcMsg) }
	nomsg := func() *wire { return fixed(0x42, 1, 8, ProcNoMsg) }

	type want struct {
		reason Reason
		where  Where
		offset int
		index  int
		value  uint64
		limit  uint64
	}
	tests := []struct {
		name string
		in   []byte
		lim  Limits
		want want
	}{
		{"12-byte header", new(wire).u32(0x42, 1, 8).bytes(), Limits{}, want{ReasonTruncated, InFixed, 8, -1, 0, 0}},
		{"unknown proc", fixed(0x42, 1, 8, 5).u32(0, 0, 0).bytes(), Limits{}, want{ReasonBadProc, InFixed, 12, -1, 5, 0}},
		{"unknown proc 0xffffffff", fixed(0x42, 1, 8, 0xffffffff).bytes(), Limits{}, want{ReasonBadProc, InFixed, 12, -1, 0xffffffff, 0}},
		{"no lists at all", msg().bytes(), Limits{}, want{ReasonTruncated, InReadList, 16, 0, 0, 0}},
		{"read discriminator 2", msg().u32(2).bytes(), Limits{}, want{ReasonBadDiscriminator, InReadList, 16, 0, 2, 0}},
		{"read segment cut short", msg().u32(1, 0, 1, 2).bytes(), Limits{}, want{ReasonTruncated, InReadList, 20, 0, 0, 0}},
		{"read list not terminated", msg().read(4, seg(0)).bytes(), Limits{}, want{ReasonTruncated, InReadList, 40, 1, 0, 0}},
		{"read segment wraps 2^64", msg().read(4, Segment{Handle: 1, Length: 16, Offset: 0xfffffffffffffff8}).u32(0, 0, 0).bytes(), Limits{}, want{ReasonSegmentWraps, InReadList, 20, 0, 0xfffffffffffffff8, 0}},
		{"reply segment wraps 2^64", msg().u32(0, 0, 1, 1).seg(Segment{Handle: 1, Length: 16, Offset: 0xfffffffffffffff8}).bytes(), Limits{}, want{ReasonSegmentWraps, InReplyChunk, 28, -1, 0xfffffffffffffff8, 0}},
		{"write list missing", msg().u32(0).bytes(), Limits{}, want{ReasonTruncated, InWriteList, 20, 0, 0, 0}},
		{"write discriminator 0x100", msg().u32(0, 0x100).bytes(), Limits{}, want{ReasonBadDiscriminator, InWriteList, 20, 0, 0x100, 0}},
		{"reply chunk missing", msg().u32(0, 0).bytes(), Limits{}, want{ReasonTruncated, InReplyChunk, 24, -1, 0, 0}},
		{"reply discriminator 7", msg().u32(0, 0, 7).bytes(), Limits{}, want{ReasonBadDiscriminator, InReplyChunk, 24, -1, 7, 0}},
		{"Position not a multiple of 4", msg().read(6, seg(0)).u32(0, 0, 0).bytes(), Limits{}, want{ReasonBadPosition, InReadList, 20, 0, 6, 0}},
		{"Positions decrease", msg().read(8, seg(0)).read(4, seg(1)).u32(0, 0, 0).bytes(), Limits{}, want{ReasonPositionOrder, InReadList, 44, 1, 4, 0}},
		{"Read chunk split", nomsg().read(0, seg(0)).read(8, seg(1)).read(0, seg(2)).u32(0, 0, 0).bytes(), Limits{}, want{ReasonPositionOrder, InReadList, 68, 2, 0, 0}},
		{"too many Read segments", msg().read(4, seg(0)).read(8, seg(1)).read(8, seg(2)).read(8, seg(3)).u32(0, 0, 0).bytes(), small, want{ReasonTooManySegments, InReadList, 92, 3, 4, 3}},
		{"too many Read chunks", msg().read(4, seg(0)).read(8, seg(1)).read(12, seg(2)).u32(0, 0, 0).bytes(), small, want{ReasonTooManyChunks, InReadList, 68, 2, 3, 2}},
		{"too many segments in a Read chunk", msg().read(4, seg(0)).read(4, seg(1)).read(4, seg(2)).u32(0, 0, 0).bytes(), small, want{ReasonTooManySegments, InReadList, 68, 2, 3, 2}},
		{"Read chunk too large", msg().read(4, big(6000)).read(4, big(4001)).u32(0, 0, 0).bytes(), small, want{ReasonChunkTooLarge, InReadList, 44, 1, 10001, 10000}},
		{"Read chunk too large, default limit", msg().read(4, big(5<<20)).read(4, big(5<<20)).u32(0, 0, 0).bytes(), Limits{}, want{ReasonChunkTooLarge, InReadList, 44, 1, 10 << 20, DefaultMaxChunkBytes}},
		{"Read chunk limit is per chunk", msg().read(4, big(6000)).read(8, big(6000)).u32(0, 0).u32(1).chunk(big(10001)).bytes(), small, want{ReasonChunkTooLarge, InReplyChunk, 76, -1, 10001, 10000}},
		{"too many Write chunks", msg().u32(0).u32(1).chunk(seg(0)).u32(1).chunk(seg(1)).u32(1).chunk(seg(2)).u32(0, 0).bytes(), small, want{ReasonTooManyChunks, InWriteList, 72, 2, 3, 2}},
		{"Write chunk segment count over limit", msg().u32(0).u32(1).chunk(seg(0), seg(1), seg(2)).u32(0, 0).bytes(), small, want{ReasonTooManySegments, InWriteList, 24, 0, 3, 2}},
		{"Write chunk count 0xffffffff", msg().u32(0, 1, 0xffffffff).bytes(), Limits{}, want{ReasonTooManySegments, InWriteList, 24, 0, 0xffffffff, DefaultMaxSegmentsPerChunk}},
		{"Write chunk count past the end", msg().u32(0).u32(1, 3).seg(seg(0)).seg(seg(1)).bytes(), Limits{}, want{ReasonTruncated, InWriteList, 28, 0, 0, 0}},
		{"Write chunk too large", msg().u32(0).u32(1).chunk(seg(0)).u32(1).chunk(big(9000), big(1001)).u32(0, 0).bytes(), small, want{ReasonChunkTooLarge, InWriteList, 48, 1, 10001, 10000}},
		{"Write list not terminated", msg().u32(0).u32(1).chunk(seg(0)).bytes(), Limits{}, want{ReasonTruncated, InWriteList, 44, 1, 0, 0}},
		{"Reply chunk segment count over limit", msg().u32(0, 0, 1).chunk(seg(0), seg(1), seg(2)).bytes(), small, want{ReasonTooManySegments, InReplyChunk, 28, -1, 3, 2}},
		{"Reply chunk cut short", msg().u32(0, 0, 1, 1).u32(1, 2).bytes(), Limits{}, want{ReasonTruncated, InReplyChunk, 32, -1, 0, 0}},
		{"Reply chunk too large", msg().u32(0, 0, 1).chunk(big(10001)).bytes(), small, want{ReasonChunkTooLarge, InReplyChunk, 28, -1, 10001, 10000}},
		{"RDMA_NOMSG without chunks", nomsg().u32(0, 0, 0).bytes(), Limits{}, want{ReasonNoPayload, InFixed, 12, -1, 0, 0}},
		{"RDMA_NOMSG with only a data Read chunk and a Write chunk", nomsg().read(8, seg(0)).u32(0).u32(1).chunk(seg(1)).u32(0).u32(0).bytes(), Limits{}, want{ReasonNoPayload, InFixed, 12, -1, 0, 0}},
		{"RDMA_MSGP body cut short", fixed(0x42, 1, 8, ProcMsgP).u32(4096).bytes(), Limits{}, want{ReasonTruncated, InPadded, 16, -1, 0, 0}},
		{"RDMA_MSGP chunk lists malformed", fixed(0x42, 1, 8, ProcMsgP).u32(4096, 1024, 0, 0, 9).bytes(), Limits{}, want{ReasonBadDiscriminator, InReplyChunk, 32, -1, 9, 0}},
		{"RDMA_ERROR without body", fixed(0x42, 1, 8, ProcError).bytes(), Limits{}, want{ReasonTruncated, InErrorBody, 16, -1, 0, 0}},
		{"RDMA_ERROR unknown code", fixed(0x42, 1, 8, ProcError).u32(3).bytes(), Limits{}, want{ReasonBadErrorCode, InErrorBody, 16, -1, 3, 0}},
		{"ERR_VERS without range", fixed(0x42, 1, 8, ProcError).u32(1, 1).bytes(), Limits{}, want{ReasonTruncated, InErrorBody, 20, -1, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Header
			n, err := h.Decode(tt.in, tt.lim)
			if n != 0 {
				t.Errorf("n = %d on error, want 0", n)
			}
			if !errors.Is(err, ErrChunk) || errors.Is(err, ErrVersion) || errors.Is(err, ErrShort) {
				t.Fatalf("err = %v, want only ErrChunk", err)
			}
			var ce *ChunkError
			if !errors.As(err, &ce) {
				t.Fatalf("err %T is not *ChunkError", err)
			}
			got := want{ce.Reason, ce.Where, ce.Offset, ce.Index, ce.Value, ce.Limit}
			if got != tt.want {
				t.Fatalf("ChunkError = %+v\n             want %+v\n(%v)", got, tt.want, err)
			}
			if ce.XID != 0x42 || h.XID != 0x42 {
				t.Fatalf("ChunkError.XID = %#x, Header.XID = %#x, want 0x42", ce.XID, h.XID)
			}
			if len(tt.in) >= 16 {
				want := Proc(binary.BigEndian.Uint32(tt.in[12:]))
				if ce.Proc != want {
					t.Fatalf("ChunkError.Proc = %v, want %v", ce.Proc, want)
				}
			}
			if ce.Reason == ReasonTruncated {
				if !errors.Is(err, xdr.ErrShort) {
					t.Fatalf("truncation does not unwrap to xdr.ErrShort: %v", err)
				}
			}
			if err.Error() == "" {
				t.Fatal("empty message")
			}
		})
	}
}

func TestDecodeShortAndVersion(t *testing.T) {
	var h Header
	for n := 0; n < 8; n++ {
		b := fixed(1, 1, 1, ProcMsg).u32(0, 0, 0).bytes()[:n]
		_, err := h.Decode(b, Limits{})
		var se *ShortError
		if !errors.As(err, &se) || se.Len != n || !errors.Is(err, ErrShort) || errors.Is(err, ErrChunk) {
			t.Fatalf("%d bytes: err = %v, want *ShortError", n, err)
		}
	}

	// Version is checked before anything else: an 8-byte message, a
	// message whose body would be garbage in version one, and a version-2
	// RDMA_ERROR.
	tests := []struct {
		name string
		in   []byte
		want VersionError
	}{
		{"xid and vers only", new(wire).u32(0xfeedface, 2).bytes(), VersionError{XID: 0xfeedface, Vers: 2}},
		{"12 bytes", new(wire).u32(0xfeedface, 0, 9).bytes(), VersionError{XID: 0xfeedface, Vers: 0}},
		{"v2 with garbage body", fixed(7, 2, 10, 9).u32(0xffffffff, 5).bytes(), VersionError{XID: 7, Vers: 2, Proc: 9, Complete: true}},
		{"v2 RDMA_ERROR", fixed(8, 2, 10, ProcError).u32(1, 2, 2).bytes(), VersionError{XID: 8, Vers: 2, Proc: ProcError, Complete: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := h.Decode(tt.in, Limits{})
			var ve *VersionError
			if n != 0 || !errors.As(err, &ve) || !errors.Is(err, ErrVersion) || errors.Is(err, ErrChunk) {
				t.Fatalf("Decode = %d, %v; want *VersionError", n, err)
			}
			if *ve != tt.want {
				t.Fatalf("VersionError = %+v, want %+v", *ve, tt.want)
			}
		})
	}
}

func TestReservedProcsDecodeFully(t *testing.T) {
	var h Header
	in := fixed(3, 1, 4, ProcMsgP).u32(64, 512).read(4, seg(0)).u32(0, 0, 0).bytes()
	in = append(in, 1, 2, 3, 4)
	n, err := h.Decode(in, Limits{})
	var ce *ChunkError
	if !errors.As(err, &ce) || ce.Reason != ReasonReservedProc || ce.Proc != ProcMsgP || ce.Value != 2 {
		t.Fatalf("err = %v, want ReasonReservedProc for RDMA_MSGP", err)
	}
	if n != len(in)-4 || h.Align != 64 || h.Thresh != 512 || len(h.Reads) != 1 || h.Reads[0].Segment != seg(0) {
		t.Fatalf("RDMA_MSGP not decoded: n=%d %v align %d thresh %d", n, &h, h.Align, h.Thresh)
	}

	n, err = h.Decode(fixed(4, 1, 4, ProcDone).bytes(), Limits{})
	if !errors.As(err, &ce) || ce.Reason != ReasonReservedProc || ce.Proc != ProcDone || n != 16 {
		t.Fatalf("RDMA_DONE: n=%d err=%v", n, err)
	}
}

// TestTruncatedPrefixes: every proper prefix of a valid header is
// reported as truncated (or short), never accepted and never a panic.
func TestTruncatedPrefixes(t *testing.T) {
	var h Header
	full := typicalWire()
	for n := 0; n < len(full); n++ {
		_, err := h.Decode(full[:n], Limits{})
		var ce *ChunkError
		switch {
		case n < 8:
			if !errors.Is(err, ErrShort) {
				t.Fatalf("prefix %d: err = %v, want ErrShort", n, err)
			}
		case !errors.As(err, &ce) || ce.Reason != ReasonTruncated:
			t.Fatalf("prefix %d: err = %v, want ReasonTruncated", n, err)
		}
	}
}

func TestDecodeReusesHeader(t *testing.T) {
	var h Header
	if _, err := h.Decode(typicalWire(), Limits{}); err != nil {
		t.Fatal(err)
	}
	// A second, smaller message must not keep anything of the first.
	in := fixed(99, 1, 3, ProcMsg).u32(0, 0, 0).bytes()
	if _, err := h.Decode(in, Limits{}); err != nil {
		t.Fatal(err)
	}
	var want Header
	want.Init(99, 3, ProcMsg)
	if !h.Equal(&want) || len(h.Reads) != 0 || len(h.Writes) != 0 || h.HasReply || h.Reply != nil {
		t.Fatalf("reused Header = %v", &h)
	}
}

func TestCopyFromIsDeep(t *testing.T) {
	var src, dst Header
	src.Init(1, 2, ProcNoMsg)
	for i := range 20 { // beyond the inline storage
		src.AppendReadSegment(0, seg(i))
	}
	for i := range 10 {
		src.AppendWriteChunk(seg(100+i), seg(200+i))
	}
	src.SetReplyChunk(seg(300), seg(301), seg(302))
	dst.CopyFrom(&src)
	if !dst.Equal(&src) {
		t.Fatalf("copy differs: %v vs %v", &dst, &src)
	}
	var keep Header
	keep.CopyFrom(&src)

	// Overwrite src in place; dst must not change.
	src.Init(5, 6, ProcMsg)
	src.AppendReadSegment(4, seg(999))
	src.AppendWriteChunk(seg(998))
	src.SetReplyChunk(seg(997))
	src.Reads[0].Length = 1
	if !dst.Equal(&keep) {
		t.Fatalf("copy changed when the source was reused")
	}
}

func TestAppendedSegmentsDoNotOverlap(t *testing.T) {
	var h Header
	h.Init(1, 1, ProcMsg)
	h.AppendWriteChunk(seg(0))
	h.AppendWriteChunk(seg(1))
	// Appending to the first chunk must not overwrite the second.
	h.Writes[0] = append(h.Writes[0], seg(2))
	if h.Writes[1][0] != seg(1) {
		t.Fatalf("append to Write chunk 0 overwrote chunk 1: %v", h.Writes[1])
	}
}

func TestEqual(t *testing.T) {
	var a, b Header
	typicalHeader(&a)
	typicalHeader(&b)
	if !a.Equal(&b) {
		t.Fatal("identical headers differ")
	}
	mut := []func(h *Header){
		func(h *Header) { h.XID++ },
		func(h *Header) { h.Credit++ },
		func(h *Header) { h.Reads[1].Position += 4 },
		func(h *Header) { h.Reads[0].Offset++ },
		func(h *Header) { h.Writes[0][1].Length-- },
		func(h *Header) { h.AppendWriteChunk() },
		func(h *Header) { h.Reply[0].Handle++ },
		func(h *Header) { h.ClearReplyChunk() },
		func(h *Header) { h.AppendReadSegment(200, seg(9)) },
	}
	for i, m := range mut {
		b.CopyFrom(&a)
		m(&b)
		if a.Equal(&b) || b.Equal(&a) {
			t.Errorf("mutation %d not detected", i)
		}
	}
	var e1, e2 Header
	e1.Init(1, 1, ProcError)
	e1.SetErrVers(1, 1)
	e2.CopyFrom(&e1)
	e2.VersHigh = 2
	if e1.Equal(&e2) {
		t.Error("ERR_VERS range difference not detected")
	}
}

func TestEncodeRejectsUnknown(t *testing.T) {
	var h Header
	h.Init(1, 1, 7)
	if _, err := h.Encode(make([]byte, 64)); err == nil {
		t.Fatal("encoded an unknown procedure")
	}
	h.Init(1, 1, ProcError)
	h.ErrCode = 9
	if _, err := h.Encode(make([]byte, 64)); err == nil {
		t.Fatal("encoded an unknown error code")
	}
}

func TestString(t *testing.T) {
	var h Header
	typicalHeader(&h)
	if got, want := h.String(), "xid 0x5eed0001 v1 credit 128 RDMA_MSG reads 1/2 writes 1 reply 1"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
	h.Init(2, 3, ProcError)
	h.SetErrVers(1, 1)
	if got, want := h.String(), "xid 0x00000002 v1 credit 3 RDMA_ERROR ERR_VERS 1-1"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
}
