package gateway_test

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// A reply whose RPC message fits the 4096-byte inline threshold but not
// once the server's RPC-over-RDMA header (28 bytes) is in front of it
// needs a Reply chunk (RFC 8166 §3.3.2). knfsd's READDIR fills count
// bytes of directory list after the fixed part of the results, so with
// count 3948..3972 the reply is 4072..4096 bytes: the reverse gateway
// must offer a Reply chunk for every such call, or the server answers
// ERR_CHUNK (the fake server does, as knfsd does) and the TCP client gets
// SYSTEM_ERR.
func TestReverseReplyChunkCountsTransportHeader(t *testing.T) {
	noLeaks(t, func(t *testing.T) {
		readdirBody := func(count uint32) []byte {
			// status, post_op_attr (84 bytes of fattr3), cookieverf, one
			// entry whose name fills the list to count bytes, eof.
			n := (int(count) - 32) &^ 3
			b := be32(nil, 0, 1)
			b = append(b, make([]byte, 84+8)...)
			b = be32(b, 1, 0, 7)
			b = xdrOpaque(b, bytes.Repeat([]byte{'d'}, n))
			b = be32(b, 0, 1, 0, 1)
			return b
		}
		srv := startFakeServer(t, 32, func(c *fakeCall) (fakeAction, []byte) {
			if c.prog == progNFS && c.vers == 3 && c.proc == 16 {
				count := binary.BigEndian.Uint32(c.rpc[len(c.rpc)-4:])
				return fakeAnswer, rpcAccepted(c.xid, readdirBody(count))
			}
			return defaultFakeHandler(c)
		})
		rev, _ := startReverseLogged(t, srv.addr(), nil)
		cl := dialRaw(t, rev.Addr().String())
		fh := bytes.Repeat([]byte{0xfe}, 32)
		for count := uint32(3940); count <= 3972; count++ {
			xid := 0x7000 + count
			args := xdrOpaque(nil, fh)
			args = be32(args, 0, 0, 0, 0, count)
			if err := cl.send(rpcCall(xid, progNFS, 3, 16, args)); err != nil {
				t.Fatal(err)
			}
			r, err := cl.recv(20 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if want := rpcAccepted(xid, readdirBody(count)); !bytes.Equal(r, want) {
				head := r[:min(len(r), 24)]
				t.Fatalf("READDIR count %d: reply of %d bytes %x..., want the server's %d bytes", count, len(r), head, len(want))
			}
		}
		srv.mu.Lock()
		tooBig := srv.tooBig
		srv.mu.Unlock()
		if tooBig != 0 {
			t.Fatalf("%d replies fitted neither inline nor the Reply chunk", tooBig)
		}
	})
}
