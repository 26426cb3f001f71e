package rdmarpc

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// Captures from a real Linux 6.1 NFS/RDMA client over soft-RoCE, described
// field by field (as tshark decoded them) in testdata/golden/*.txt at the
// repository root.
func readCodecGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "golden", name))
	if os.IsNotExist(err) {
		t.Skipf("%s not present", name)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The first message of a vers=4.1 mount: RDMA_MSG, three empty lists, then
// an NFSv4 NULL call inline.
func TestCodecGoldenKernelClientFirstMsg(t *testing.T) {
	b := readCodecGolden(t, "kclient-first-msg.bin")
	var h Header
	n, err := h.Decode(b, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if n != 28 || h.XID != 0xd829c413 || h.Vers != 1 || h.Credit != 128 || h.Proc != ProcMsg {
		t.Fatalf("n=%d %v", n, &h)
	}
	if len(h.Reads) != 0 || len(h.Writes) != 0 || h.HasReply {
		t.Fatalf("lists not empty: %v", &h)
	}
	rpc := b[n:]
	if len(rpc) != 40 || binary.BigEndian.Uint32(rpc) != h.XID {
		t.Fatalf("RPC message %x", rpc)
	}
	// CALL, rpcvers 2, NFS (100003) version 4, NULL.
	for i, want := range []uint32{0, 2, 100003, 4, 0} {
		if got := binary.BigEndian.Uint32(rpc[4+4*i:]); got != want {
			t.Fatalf("RPC word %d = %d, want %d", i+1, got, want)
		}
	}
	out := make([]byte, h.EncodedLen())
	if m, err := h.Encode(out); err != nil || !bytes.Equal(out[:m], b[:n]) {
		t.Fatalf("re-encode %x, want %x (%v)", out, b[:n], err)
	}
}

// EXCHANGE_ID: RDMA_MSG offering a one-segment Reply chunk of 4240 bytes.
func TestCodecGoldenKernelClientExchangeID(t *testing.T) {
	b := readCodecGolden(t, "kclient-exchange-id-msg.bin")
	var h Header
	n, err := h.Decode(b, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if n != 48 || h.XID != 0xd929c413 || h.Credit != 128 || h.Proc != ProcMsg {
		t.Fatalf("n=%d %v", n, &h)
	}
	if !h.HasReply || len(h.Reply) != 1 || h.Reply[0] != (Segment{Handle: 0xd48, Length: 4240, Offset: 0xd929c41382bfa000}) {
		t.Fatalf("reply chunk %+v", h.Reply)
	}
	if len(h.Reads) != 0 || len(h.Writes) != 0 {
		t.Fatalf("unexpected Read or Write list: %v", &h)
	}
	rpc := b[n:]
	// XID, CALL, rpcvers 2, NFS version 4, COMPOUND.
	if len(rpc) != 240 || binary.BigEndian.Uint32(rpc) != h.XID || binary.BigEndian.Uint32(rpc[20:]) != 1 {
		t.Fatalf("RPC message is not the COMPOUND: %x", rpc[:24])
	}
	out := make([]byte, h.EncodedLen())
	if m, err := h.Encode(out); err != nil || !bytes.Equal(out[:m], b[:n]) {
		t.Fatalf("re-encode %x, want %x (%v)", out, b[:n], err)
	}
}

// The connect request's private data as librdmacm delivered it: the 8-byte
// RFC 8797 block (4096 both ways, Send With Invalidate OK) and 48 bytes of
// CM padding.
func TestCodecGoldenKernelClientPrivateData(t *testing.T) {
	b := readCodecGolden(t, "kclient-connect-privdata.bin")
	if len(b) != 56 {
		t.Fatalf("%d bytes", len(b))
	}
	p, ok := ParsePrivateData(b)
	if !ok || p.MaxSendSize != 4096 || p.MaxRecvSize != 4096 || !p.RemoteInvalidate {
		t.Fatalf("%+v %v", p, ok)
	}
	out := make([]byte, 8)
	if n, err := p.Encode(out); err != nil || n != 8 || !bytes.Equal(out, b[:8]) {
		t.Fatalf("re-encode %x (%v)", out, err)
	}
}
