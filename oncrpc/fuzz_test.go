package oncrpc

import (
	"bytes"
	"errors"
	"testing"

	"github.com/rdmagw/rdmagw/xdr"
)

// FuzzDecodeCall checks that CallHeader.Decode never panics, stays within
// its input, keeps auth bodies within 400 bytes, and that whatever it
// accepts encodes back to the same length and decodes to the same header.
func FuzzDecodeCall(f *testing.F) {
	f.Add(nfs3GetattrCall)
	f.Add(be(1, 0, 2, 100003, 4, 1, 6, 24, 1, 0, 5, 2, 4, 0xdeadbeef, 6, 0))
	f.Add(be(1, 0, 3))
	f.Add(be(1, 1, 0))
	f.Add(be(1, 0, 2, 100003, 3, 0, 1, 401))
	f.Fuzz(func(t *testing.T, data []byte) {
		var h CallHeader
		n, err := h.Decode(data)
		wrapped, gssErr := GSSBodyWrapped(h.Cred)
		if h.Cred.Flavor != RPCSecGSS && (wrapped || gssErr != nil) {
			t.Fatal("non-GSS credential looked into")
		}
		if err != nil {
			var he *HeaderError
			if n != 0 || !errors.As(err, &he) || he.Offset < 0 || he.Offset > len(data) {
				t.Fatalf("bad error %d %v", n, err)
			}
			return
		}
		if n > len(data) || n < 36 || len(h.Cred.Body) > MaxAuthBytes || len(h.Verf.Body) > MaxAuthBytes {
			t.Fatalf("n %d len %d cred %d verf %d", n, len(data), len(h.Cred.Body), len(h.Verf.Body))
		}
		buf := make([]byte, n)
		e := xdr.NewEncoder(buf)
		if err := h.Encode(&e); err != nil || e.Len() != n || h.EncodedLen() != n {
			t.Fatalf("re-encode: %v, %d bytes of %d", err, e.Len(), n)
		}
		var back CallHeader
		if m, err := back.Decode(buf); err != nil || m != n || back.XID != h.XID || back.Prog != h.Prog ||
			back.Vers != h.Vers || back.Proc != h.Proc || back.Cred.Flavor != h.Cred.Flavor ||
			!bytes.Equal(back.Cred.Body, h.Cred.Body) || !bytes.Equal(back.Verf.Body, h.Verf.Body) {
			t.Fatalf("round trip: %v %+v vs %+v", err, back, h)
		}
	})
}

// FuzzDecodeReply is FuzzDecodeCall for replies.
func FuzzDecodeReply(f *testing.F) {
	f.Add(be(9, 1, 0, 0, 0, 0, 0xaa))
	f.Add(be(9, 1, 0, 6, 4, 0xabcdef01, 2, 2, 4))
	f.Add(be(9, 1, 1, 0, 2, 2))
	f.Add(be(9, 1, 1, 1, 13))
	f.Add(be(9, 1, 0, 0, 0, 7))
	f.Fuzz(func(t *testing.T, data []byte) {
		var h ReplyHeader
		n, err := h.Decode(data)
		if err != nil {
			var he *HeaderError
			if n != 0 || !errors.As(err, &he) || he.Offset < 0 || he.Offset > len(data) {
				t.Fatalf("bad error %d %v", n, err)
			}
			return
		}
		if n > len(data) || n < 20 || len(h.Verf.Body) > MaxAuthBytes {
			t.Fatalf("n %d len %d", n, len(data))
		}
		buf := make([]byte, n)
		e := xdr.NewEncoder(buf)
		if err := h.Encode(&e); err != nil || e.Len() != n || h.EncodedLen() != n {
			t.Fatalf("re-encode: %v, %d bytes of %d", err, e.Len(), n)
		}
		var back ReplyHeader
		if m, err := back.Decode(buf); err != nil || m != n || !sameReply(&back, &h) {
			t.Fatalf("round trip: %v %+v vs %+v", err, back, h)
		}
	})
}

// FuzzParseGSSCred checks the RPCSEC_GSS credential parser.
func FuzzParseGSSCred(f *testing.F) {
	f.Add(be(1, 0, 77, 2, 4, 0x01020304))
	f.Add(be(1, 1, 0, 3, 0))
	f.Add(be(1, 0, 77, 9, 0))
	f.Add(be(1, 0, 77, 1, 100))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseGSSCred(data)
		if err != nil {
			var he *HeaderError
			if !errors.As(err, &he) || he.Offset > len(data) {
				t.Fatalf("bad error %v", err)
			}
			return
		}
		if c.Version != 1 || c.Proc > GSSProcDestroy || c.Service < GSSServiceNone || c.Service > GSSServicePrivacy ||
			20+len(c.Handle) > len(data) {
			t.Fatalf("accepted %+v from %d bytes", c, len(data))
		}
		if c.BodyWrapped() != (c.Proc == GSSProcData && c.Service != GSSServiceNone) {
			t.Fatal("BodyWrapped wrong")
		}
	})
}
