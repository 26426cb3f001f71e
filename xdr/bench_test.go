package xdr

import "testing"

func BenchmarkDecode(b *testing.B) {
	buf := make([]byte, 128)
	e := NewEncoder(buf)
	e.PutUint32(1)
	e.PutUint64(2)
	e.PutOpaque(make([]byte, 32))
	e.PutString("filename")
	msg := e.Bytes()
	b.ReportAllocs()
	var d Decoder
	for b.Loop() {
		d.Reset(msg)
		d.Uint32()
		d.Uint64()
		d.Opaque(64)
		d.String(255)
	}
}

func BenchmarkEncode(b *testing.B) {
	buf := make([]byte, 128)
	data := make([]byte, 32)
	b.ReportAllocs()
	var e Encoder
	for b.Loop() {
		e.Reset(buf)
		e.PutUint32(1)
		e.PutUint64(2)
		e.PutOpaque(data)
		e.PutString("filename")
	}
}
