package rdmarpc

import "testing"

func BenchmarkDecodeHeader(b *testing.B) {
	in := typicalWire()
	var h Header
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := h.Decode(in, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeHeader(b *testing.B) {
	var h Header
	typicalHeader(&h)
	out := make([]byte, h.EncodedLen())
	b.ReportAllocs()
	b.SetBytes(int64(len(out)))
	for b.Loop() {
		if _, err := h.Encode(out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildEncodeHeader is the requester's path: build the header
// with the Append builders, then encode it.
func BenchmarkBuildEncodeHeader(b *testing.B) {
	var h Header
	out := make([]byte, 256)
	b.ReportAllocs()
	for b.Loop() {
		typicalHeader(&h)
		if _, err := h.Encode(out); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeEmptyMsg(b *testing.B) {
	in := append(fixed(1, 1, 128, ProcMsg).u32(0, 0, 0).bytes(), nullCall(1)...)
	var h Header
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Decode(in, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParsePrivateData(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ParsePrivateData(linuxPrivateData); !ok {
			b.Fatal("not parsed")
		}
	}
}
