package rdmarpc

import (
	"bytes"
	"errors"
	"testing"

	"github.com/rdmagw/rdmagw/xdr"
)

// v2WithZeroPads returns in[:n] with the XDR pad bytes of the property
// values of h zeroed: Encode writes pads as zero, Decode (like every XDR
// decoder) does not check them.
func v2WithZeroPads(h *V2Header, in []byte, n int) []byte {
	want := bytes.Clone(in[:n])
	if h.HType != HTypeConnPropMiddle && h.HType != HTypeConnPropFinal {
		return want
	}
	off := V2PrefixSize + 4
	for _, p := range h.Props {
		off += 8 + len(p.Data)
		pad := xdr.Pad(len(p.Data))
		clear(want[off : off+pad])
		off += pad
	}
	return want
}

// FuzzDecodeV2Header: Decode never panics and fails only with a
// *ShortError or a *V2Error naming a known answer; what it accepts
// re-encodes to exactly the bytes it read (pads of property values
// zeroed), decodes again to the same header, and copies; what it rejects
// gets an answer that is itself a well-formed RDMA2_ERROR.
func FuzzDecodeV2Header(f *testing.F) {
	for _, g := range loadV2Golden(f) {
		f.Add(g.msg)
	}
	f.Add(v2fixed(1, 1, HTypeCallExternal).u32(0, 1, 0, 1, 2, 3, 4, 0, 0, 0, 0).bytes())
	f.Add(v2fixed(1, 1, HTypeConnPropFinal).u32(2, 6, 5, 1, 0x41000000, 7, 0).bytes())
	tight := Limits{MaxReadSegments: 5, MaxReadChunks: 2, MaxWriteChunks: 2, MaxSegmentsPerChunk: 3, MaxChunkBytes: 1 << 20}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, lim := range []Limits{{}, tight} {
			var h V2Header
			n, err := h.Decode(in, lim)
			if err != nil {
				if n != 0 {
					t.Fatalf("n = %d with error %v", n, err)
				}
				var se *ShortError
				var ve *V2Error
				switch {
				case errors.As(err, &se):
					if len(in) >= V2PrefixSize {
						t.Fatalf("ShortError for %d bytes", len(in))
					}
				case errors.As(err, &ve):
					if !ve.Code.Known() || ve.XID != h.XID || ve.HType != h.HType {
						t.Fatalf("V2Error %+v for header %v", ve, &h)
					}
					var a V2Header
					if a.SetErrorAnswer(err, 5, 1, 2) != ve.Answerable() {
						t.Fatal("SetErrorAnswer disagrees with Answerable")
					}
					if ve.Answerable() {
						out := make([]byte, a.EncodedLen())
						if _, err := a.Encode(out); err != nil {
							t.Fatal(err)
						}
						var back V2Header
						if ve.Vers == V2Version {
							if _, err := back.Decode(out, Limits{}); err != nil || back.ErrBody.Code != ve.Code || back.XID != ve.XID {
								t.Fatalf("answer %x decodes as %v (%v)", out, &back, err)
							}
						}
					}
				default:
					t.Fatalf("undocumented error %T: %v", err, err)
				}
				_ = err.Error()
				continue
			}
			if n < V2PrefixSize || n > len(in) {
				t.Fatalf("header length %d of %d bytes", n, len(in))
			}
			if h.HType.HasPayload() && len(in)-n < 4 {
				t.Fatalf("%v accepted with %d bytes of RPC message", h.HType, len(in)-n)
			}
			if h.EncodedLen() != n {
				t.Fatalf("EncodedLen %d != decoded length %d", h.EncodedLen(), n)
			}
			out := make([]byte, n)
			m, err := h.Encode(out)
			if want := v2WithZeroPads(&h, in, n); err != nil || m != n || !bytes.Equal(out, want) {
				t.Fatalf("re-encode:\n got %x (%v)\nwant %x", out[:m], err, want)
			}
			var g V2Header
			if k, err := g.Decode(in[:n:n], lim); h.HType.HasPayload() {
				if err == nil {
					t.Fatal("header without its RPC message accepted")
				}
			} else if err != nil || k != n || !g.Equal(&h) {
				t.Fatalf("second decode differs: %v (%v) vs %v", &g, err, &h)
			}
			var c V2Header
			c.CopyFrom(&h)
			if !c.Equal(&h) {
				t.Fatal("CopyFrom differs")
			}
			_ = h.String()
			_ = h.Properties()
			_ = h.InvHandleListed()
		}
	})
}
