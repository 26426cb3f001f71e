package rdmarpc

import (
	"bytes"
	"errors"
	"testing"
)

// fuzzSeeds are the f.Add seeds; testdata/fuzz holds more.
func fuzzSeeds() [][]byte {
	return [][]byte{
		typicalWire(),
		append(fixed(1, 1, 128, ProcMsg).u32(0, 0, 0).bytes(), nullCall(1)...),
		fixed(7, 1, 32, ProcNoMsg).read(0, seg(0)).read(0, seg(1)).read(200, seg(3)).u32(0).u32(0).u32(1).chunk(seg(4)).bytes(),
		fixed(2, 1, 1, ProcError).u32(1, 1, 1).bytes(),
		fixed(2, 1, 1, ProcError).u32(2).bytes(),
		fixed(3, 1, 1, ProcMsgP).u32(64, 512, 0, 0, 0).bytes(),
		fixed(4, 1, 1, ProcDone).bytes(),
		fixed(5, 2, 1, ProcMsg).u32(0, 0, 0).bytes(),
		{0, 0, 0, 1},
	}
}

// FuzzDecodeHeader: Decode never panics, fails only with the documented
// errors, and whatever it accepts re-encodes to exactly the bytes it read
// and decodes again to the same Header.
func FuzzDecodeHeader(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	tight := Limits{MaxReadSegments: 5, MaxReadChunks: 2, MaxWriteChunks: 2, MaxSegmentsPerChunk: 3, MaxChunkBytes: 1 << 20}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, lim := range []Limits{{}, tight} {
			var h Header
			n, derr := h.Decode(in, lim)
			var ce *ChunkError
			reserved := errors.As(derr, &ce) && ce.Reason == ReasonReservedProc
			if err := derr; err != nil && !reserved {
				if n != 0 {
					t.Fatalf("n = %d with error %v", n, err)
				}
				if !errors.Is(err, ErrShort) && !errors.Is(err, ErrVersion) && !errors.Is(err, ErrChunk) {
					t.Fatalf("undocumented error %T: %v", err, err)
				}
				_ = err.Error()
				continue
			}
			if n < FixedHeaderSize || n > len(in) {
				t.Fatalf("header length %d of %d bytes", n, len(in))
			}
			if h.EncodedLen() != n {
				t.Fatalf("EncodedLen %d != decoded length %d", h.EncodedLen(), n)
			}
			out := make([]byte, n)
			m, err := h.Encode(out)
			if err != nil || m != n || !bytes.Equal(out, in[:n]) {
				t.Fatalf("re-encode:\n got %x (%v)\nwant %x", out[:m], err, in[:n])
			}
			var g Header
			k, err2 := g.Decode(out, lim)
			if k != n || (err2 == nil) != (derr == nil) || !g.Equal(&h) {
				t.Fatalf("second decode differs: %v (%v) vs %v", &g, err2, &h)
			}
			var c Header
			c.CopyFrom(&h)
			if !c.Equal(&h) {
				t.Fatal("CopyFrom differs")
			}
		}
	})
}

// FuzzPrivateData: parsing never panics; a recognised block re-encodes to
// the same magic, version and sizes, with only the defined flag kept.
func FuzzPrivateData(f *testing.F) {
	f.Add(linuxPrivateData)
	f.Add([]byte{0xf6, 0xab, 0x0e, 0x18, 1, 0, 0, 255, 0, 0, 0})
	f.Add([]byte{0xf6, 0xab, 0x0e, 0x18, 2, 1, 3, 3})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		p, ok := ParsePrivateData(in)
		recognised := len(in) >= 8 && bytes.Equal(in[:5], linuxPrivateData[:5])
		if ok != recognised {
			t.Fatalf("ParsePrivateData(%x) ok = %v", in, ok)
		}
		if !ok {
			if p != (PrivateData{}) {
				t.Fatalf("absent block parsed as %+v", p)
			}
			return
		}
		out := p.Append(nil)
		want := []byte{in[0], in[1], in[2], in[3], in[4], in[5] & 1, in[6], in[7]}
		if !bytes.Equal(out, want) {
			t.Fatalf("re-encode = %x, want %x", out, want)
		}
		if q, ok := ParsePrivateData(out); !ok || q != p {
			t.Fatalf("second parse = %+v, %v", q, ok)
		}
	})
}
