package sockwrite

import (
	"bytes"
	"io"
	"net"
	"testing"
)

// Writev never waits: into a socket whose peer does not read it writes
// what fits and then reports 0 written, and every byte it said it wrote
// arrives, in order.
func TestWritevNeverWaits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	c.(*net.TCPConn).SetWriteBuffer(4096)
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var w Writer
	var sent []byte
	chunk := make([]byte, 1000)
	for i := 0; ; i++ {
		if i == 10000 {
			t.Fatal("the socket never filled")
		}
		for j := range chunk {
			chunk[j] = byte(i*7 + j)
		}
		bufs := [][]byte{chunk[:300], nil, chunk[300:]}
		n, tried, err := w.Writev(rc, bufs)
		if err != nil {
			t.Fatal(err)
		}
		if tried != len(chunk) {
			t.Fatalf("tried %d, want %d", tried, len(chunk))
		}
		sent = append(sent, chunk[:n]...)
		if n < tried {
			break // full: it returned instead of waiting
		}
	}
	c.Close()
	got, err := io.ReadAll(peer)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent) {
		t.Fatalf("peer got %d bytes, differing from the %d written", len(got), len(sent))
	}
	if n, tried, err := w.Writev(rc, [][]byte{{1}}); err == nil {
		t.Fatalf("Writev on a closed connection: %d of %d, no error", n, tried)
	}
	if n, tried, err := w.Writev(rc, [][]byte{nil, {}}); n != 0 || tried != 0 || err != nil {
		t.Fatalf("empty slices: %d, %d, %v", n, tried, err)
	}
}
