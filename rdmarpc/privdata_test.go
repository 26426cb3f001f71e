package rdmarpc

import (
	"bytes"
	"testing"
)

// linuxPrivateData is what a Linux client (and server) sends: magic,
// version 1, Send With Invalidate OK, 4 KiB both ways.
var linuxPrivateData = []byte{0xf6, 0xab, 0x0e, 0x18, 0x01, 0x01, 0x03, 0x03}

func TestPrivateDataLinux(t *testing.T) {
	p, ok := ParsePrivateData(linuxPrivateData)
	want := PrivateData{RemoteInvalidate: true, MaxSendSize: 4096, MaxRecvSize: 4096}
	if !ok || p != want {
		t.Fatalf("ParsePrivateData = %+v, %v; want %+v", p, ok, want)
	}
	buf := make([]byte, PrivateDataSize)
	n, err := want.Encode(buf)
	if err != nil || n != PrivateDataSize || !bytes.Equal(buf, linuxPrivateData) {
		t.Fatalf("Encode = %x, %v; want %x", buf[:n], err, linuxPrivateData)
	}
	if got := want.Append([]byte{0xaa}); !bytes.Equal(got, append([]byte{0xaa}, linuxPrivateData...)) {
		t.Fatalf("Append = %x", got)
	}
	if _, err := want.Encode(buf[:7]); err == nil {
		t.Fatal("Encode into 7 bytes succeeded")
	}
}

func TestPrivateDataParse(t *testing.T) {
	padded := append(append([]byte(nil), linuxPrivateData...), make([]byte, 48)...) // CM pads to 56
	tests := []struct {
		name string
		in   []byte
		ok   bool
		want PrivateData
	}{
		{"CM padding ignored", padded, true, PrivateData{true, 4096, 4096}},
		{"no flags, 1 KiB and 256 KiB", []byte{0xf6, 0xab, 0x0e, 0x18, 1, 0, 0, 255}, true, PrivateData{false, 1024, 256 << 10}},
		{"reserved flag bits ignored", []byte{0xf6, 0xab, 0x0e, 0x18, 1, 0xfe, 7, 15}, true, PrivateData{false, 8192, 16384}},
		{"absent", nil, false, PrivateData{}},
		{"7 bytes", linuxPrivateData[:7], false, PrivateData{}},
		{"bad magic", []byte{0x18, 0x0e, 0xab, 0xf6, 1, 1, 3, 3}, false, PrivateData{}},
		{"version 2", []byte{0xf6, 0xab, 0x0e, 0x18, 2, 1, 3, 3}, false, PrivateData{}},
		{"version 0", []byte{0xf6, 0xab, 0x0e, 0x18, 0, 1, 3, 3}, false, PrivateData{}},
		{"all zero (CM padding only)", make([]byte, 56), false, PrivateData{}},
	}
	for _, tt := range tests {
		p, ok := ParsePrivateData(tt.in)
		if ok != tt.ok || p != tt.want {
			t.Errorf("%s: ParsePrivateData = %+v, %v; want %+v, %v", tt.name, p, ok, tt.want, tt.ok)
		}
	}
}

func TestInlineSizeEncoding(t *testing.T) {
	tests := []struct {
		size int
		v    uint8
	}{
		{1024, 0}, {4096, 3}, {4097, 3}, {8191, 6}, {65536, 63}, {256 << 10, 255},
		{0, 0}, {-5, 0}, {512, 0}, {1 << 20, 255}, // clamped
	}
	for _, tt := range tests {
		if got := EncodeInlineSize(tt.size); got != tt.v {
			t.Errorf("EncodeInlineSize(%d) = %d, want %d", tt.size, got, tt.v)
		}
	}
	for v := range 256 {
		size := DecodeInlineSize(uint8(v))
		if size != (v+1)*1024 || EncodeInlineSize(size) != uint8(v) || !InlineSizeExact(size) {
			t.Fatalf("size byte %d: decode %d, re-encode %d, exact %v", v, size, EncodeInlineSize(size), InlineSizeExact(size))
		}
	}
	// What a size byte cannot say exactly: rounded down or clamped.
	for _, size := range []int{0, 512, 1023, 4097, 8191, 256<<10 + 1024, 1 << 20} {
		if InlineSizeExact(size) {
			t.Errorf("InlineSizeExact(%d) = true, but it encodes as %d", size, DecodeInlineSize(EncodeInlineSize(size)))
		}
	}
}

func TestInlineThresholds(t *testing.T) {
	local := PrivateData{MaxSendSize: 4096, MaxRecvSize: 8192}
	tests := []struct {
		name       string
		peer       PrivateData
		ok         bool
		send, recv int
	}{
		{"Linux peer", PrivateData{true, 4096, 4096}, true, 4096, 4096},
		{"peer with larger buffers", PrivateData{false, 16384, 65536}, true, 4096, 8192},
		{"peer with smaller buffers", PrivateData{false, 2048, 1024}, true, 1024, 2048},
		{"no private data", PrivateData{}, false, 1024, 1024},
	}
	for _, tt := range tests {
		send, recv := InlineThresholds(local, tt.peer, tt.ok)
		if send != tt.send || recv != tt.recv {
			t.Errorf("%s: InlineThresholds = %d, %d; want %d, %d", tt.name, send, recv, tt.send, tt.recv)
		}
	}
}
