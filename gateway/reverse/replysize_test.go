package reverse_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfstest"
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
			b := gwtest.BE32(nil, 0, 1)
			b = append(b, make([]byte, 84+8)...)
			b = gwtest.BE32(b, 1, 0, 7)
			b = xdrOpaque(b, bytes.Repeat([]byte{'d'}, n))
			b = gwtest.BE32(b, 0, 1, 0, 1)
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
			args = gwtest.BE32(args, 0, 0, 0, 0, count)
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

// RFC 8267 §6.4.2: without knowledge of the server's limits a client
// SHOULD offer at most one Read chunk (besides a Position-Zero chunk)
// and one Write chunk per COMPOUND. The reverse gateway does by default
// (reverse.max_read_chunks, max_write_chunks); the second WRITE body
// travels in the Long Call and reaches the server intact.
func TestReverseOneChunkOfEachPerCompound(t *testing.T) {
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("max%d", n), func(t *testing.T) {
			noLeaks(t, func(t *testing.T) { reverseChunksPerCompound(t, n) })
		})
	}
}

func reverseChunksPerCompound(t *testing.T, n int) {
	srv := startFakeServer(t, 32, nil)
	rev, _ := startReverseLogged(t, srv.addr(), func(c *gateway.Config) {
		c.Reverse.MaxReadChunks, c.Reverse.MaxWriteChunks = n, n
	})
	cl := dialRaw(t, rev.Addr().String())
	fh := bytes.Repeat([]byte{0xfe}, 32)
	d1, d2 := nfstest.Pattern(9000, 1), nfstest.Pattern(7000, 2)
	compound := func(ops int, body func(b []byte) []byte) []byte {
		b := gwtest.BE32(nil, 0, 0, uint32(ops)) // tag "", minorversion 0
		b = gwtest.BE32(b, 22)                   // PUTFH
		b = xdrOpaque(b, fh)
		return body(b)
	}
	writes := compound(3, func(b []byte) []byte {
		for i, d := range [][]byte{d1, d2} {
			b = gwtest.BE32(b, 38)                     // WRITE
			b = append(b, make([]byte, 16)...)         // stateid
			b = gwtest.BE32(b, 0, uint32(i)*100000, 2) // offset, FILE_SYNC
			b = xdrOpaque(b, d)
		}
		return b
	})
	reads := compound(3, func(b []byte) []byte {
		for i := range 2 {
			b = gwtest.BE32(b, 25)             // READ
			b = append(b, make([]byte, 16)...) // stateid
			b = gwtest.BE32(b, 0, uint32(i)*100000, 8192)
		}
		return b
	})
	for i, args := range [][]byte{writes, reads} {
		xid := uint32(0x5100 + i)
		if err := cl.send(rpcCall(xid, progNFS, 4, 1, args)); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.recv(20 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	var got []fakeCall
	for _, c := range srv.seen() {
		if c.proc == 1 {
			got = append(got, c)
		}
	}
	if len(got) != 2 {
		t.Fatalf("server saw %d COMPOUNDs", len(got))
	}
	if got[0].readChunks != n || got[1].writeChunks != n {
		t.Errorf("max %d: WRITE COMPOUND offered %d Read chunks, READ COMPOUND %d Write chunks", n, got[0].readChunks, got[1].writeChunks)
	}
	// The server got both WRITE bodies, wherever they travelled.
	if !bytes.Contains(got[0].rpc, d1) || !bytes.Contains(got[0].rpc, d2) {
		t.Errorf("the WRITE bodies did not reach the server intact")
	}
}
