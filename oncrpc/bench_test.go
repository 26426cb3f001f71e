package oncrpc

import (
	"testing"

	"github.com/rdmagw/rdmagw/xdr"
)

func BenchmarkCallDecode(b *testing.B) {
	var h CallHeader
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Decode(nfs3GetattrCall); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCallEncode(b *testing.B) {
	var h CallHeader
	if _, err := h.Decode(nfs3GetattrCall); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 128)
	var e xdr.Encoder
	b.ReportAllocs()
	for b.Loop() {
		e.Reset(buf)
		if err := h.Encode(&e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReplyDecode(b *testing.B) {
	msg := be(9, 1, 0, 0, 0, 0, 0xaa)
	var h ReplyHeader
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Decode(msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReplyEncode(b *testing.B) {
	buf := make([]byte, 64)
	var e xdr.Encoder
	b.ReportAllocs()
	for b.Loop() {
		e.Reset(buf)
		h := GarbageArgsReply(0x1234)
		if err := h.Encode(&e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGSSBodyWrapped(b *testing.B) {
	cred := OpaqueAuth{Flavor: RPCSecGSS, Body: be(1, 0, 77, 2, 4, 0x01020304)}
	b.ReportAllocs()
	for b.Loop() {
		if w, err := GSSBodyWrapped(cred); err != nil || !w {
			b.Fatal(w, err)
		}
	}
}

// drain reads c until it fails, with one buffer allocated up front.
