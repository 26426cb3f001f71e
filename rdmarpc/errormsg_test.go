package rdmarpc

import (
	"bytes"
	"errors"
	"testing"
)

func TestEncodeErrVersAndErrChunk(t *testing.T) {
	buf := make([]byte, ErrVersSize)
	n, err := EncodeErrVers(buf, 0x01020304, 2, 64, 1, 1)
	want := fixed(0x01020304, 2, 64, ProcError).u32(1, 1, 1).bytes()
	if err != nil || n != ErrVersSize || !bytes.Equal(buf[:n], want) {
		t.Fatalf("EncodeErrVers = %x, %v; want %x", buf[:n], err, want)
	}
	if _, err := EncodeErrVers(buf[:ErrVersSize-1], 1, 2, 3, 1, 1); err == nil {
		t.Fatal("EncodeErrVers into a short buffer succeeded")
	}

	n, err = EncodeErrChunk(buf, 0xa0b0c0d0, 1, 32)
	want = fixed(0xa0b0c0d0, 1, 32, ProcError).u32(2).bytes()
	if err != nil || n != ErrChunkSize || !bytes.Equal(buf[:n], want) {
		t.Fatalf("EncodeErrChunk = %x, %v; want %x", buf[:n], err, want)
	}
	if _, err := EncodeErrChunk(buf[:ErrChunkSize-1], 1, 1, 1); err == nil {
		t.Fatal("EncodeErrChunk into a short buffer succeeded")
	}

	// What the encoders write, Decode reads back as RDMA_ERROR.
	var h Header
	if _, err := h.Decode(want, Limits{}); err != nil || h.Proc != ProcError || h.ErrCode != ErrCodeChunk {
		t.Fatalf("Decode ERR_CHUNK = %v, %v", &h, err)
	}
}

// TestEncodeErrorAnswer walks the receiver's decision table: which decode
// failures get which RDMA_ERROR, and which get none.
func TestEncodeErrorAnswer(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want []byte // nil: no answer
	}{
		{"version 2 call", fixed(0x11, 2, 5, ProcMsg).u32(0, 0, 0).bytes(),
			fixed(0x11, 2, 30, ProcError).u32(1, 1, 1).bytes()},
		{"version 0, 8 bytes", new(wire).u32(0x12, 0).bytes(),
			fixed(0x12, 0, 30, ProcError).u32(1, 1, 1).bytes()},
		{"version 2 RDMA_ERROR: no answer", fixed(0x13, 2, 5, ProcError).u32(1, 2, 2).bytes(), nil},
		{"bad position", fixed(0x14, 1, 5, ProcMsg).read(2, seg(0)).u32(0, 0, 0).bytes(),
			fixed(0x14, 1, 30, ProcError).u32(2).bytes()},
		{"RDMA_MSGP", fixed(0x15, 1, 5, ProcMsgP).u32(0, 0, 0, 0, 0).bytes(),
			fixed(0x15, 1, 30, ProcError).u32(2).bytes()},
		{"RDMA_DONE", fixed(0x16, 1, 5, ProcDone).bytes(),
			fixed(0x16, 1, 30, ProcError).u32(2).bytes()},
		{"unknown proc", fixed(0x17, 1, 5, 77).bytes(),
			fixed(0x17, 1, 30, ProcError).u32(2).bytes()},
		{"truncated fixed header", new(wire).u32(0x18, 1, 5).bytes(),
			fixed(0x18, 1, 30, ProcError).u32(2).bytes()},
		{"malformed RDMA_ERROR: silently dropped", fixed(0x19, 1, 5, ProcError).u32(9).bytes(), nil},
		{"short: no XID to answer", []byte{1, 2, 3, 4, 5}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Header
			_, derr := h.Decode(tt.in, Limits{})
			if derr == nil {
				t.Fatal("Decode succeeded")
			}
			buf := make([]byte, 64)
			n, err := EncodeErrorAnswer(buf, derr, 30)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf[:n], tt.want) {
				t.Fatalf("answer = %x, want %x", buf[:n], tt.want)
			}
		})
	}
	if n, err := EncodeErrorAnswer(make([]byte, 64), errors.New("other"), 1); n != 0 || err != nil {
		t.Fatalf("foreign error answered: %d, %v", n, err)
	}
}
