package sockwrite

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// Writev never waits: into a socket whose peer does not read it writes
// what fits and then reports 0 written, and every byte it said it wrote
// arrives, in order.
func TestWritevNeverWaits(t *testing.T) {
	c, peer, rc := pair(t, 4096)
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

// pair is both ends of a loopback TCP connection, c with a send buffer
// of wbuf bytes, and c's RawConn.
func pair(t *testing.T, wbuf int) (c, peer *net.TCPConn, rc syscall.RawConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	pc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close(); pc.Close() })
	c = cc.(*net.TCPConn)
	c.SetWriteBuffer(wbuf)
	if rc, err = c.SyscallConn(); err != nil {
		t.Fatal(err)
	}
	return c, pc.(*net.TCPConn), rc
}

// WriteAll writes everything, in order, across more slices than one
// writev takes (IOVMax) and across the socket filling up while the peer
// reads slowly, without touching the caller's slices; a write deadline
// ends a wait for a peer that reads nothing.
func TestWriteAll(t *testing.T) {
	c, peer, rc := pair(t, 8192)
	var want []byte
	var bufs [][]byte
	for i := range 3*IOVMax + 7 {
		b := make([]byte, 1+i%700)
		for j := range b {
			b[j] = byte(i*31 + j)
		}
		bufs = append(bufs, b, nil)
		want = append(want, b...)
	}
	keep := make([][]byte, len(bufs))
	copy(keep, bufs)
	got := make(chan []byte, 1)
	go func() {
		var all []byte
		p := make([]byte, 1000)
		for len(all) < len(want) {
			time.Sleep(50 * time.Microsecond) // slower than the writer
			n, err := peer.Read(p)
			if err != nil {
				break
			}
			all = append(all, p[:n]...)
		}
		got <- all
	}()
	var w Writer
	n, err := w.WriteAll(rc, bufs)
	if err != nil || n != int64(len(want)) {
		t.Fatalf("WriteAll: %d of %d, %v", n, len(want), err)
	}
	if g := <-got; !bytes.Equal(g, want) {
		t.Fatalf("peer got %d bytes, differing from the %d written (first at %d)", len(g), len(want), firstDiff(g, want))
	}
	for i := range bufs {
		if len(bufs[i]) != len(keep[i]) || len(bufs[i]) > 0 && &bufs[i][0] != &keep[i][0] {
			t.Fatalf("slice %d changed", i)
		}
	}
	if n, err := w.WriteAll(rc, [][]byte{nil, {}}); n != 0 || err != nil {
		t.Fatalf("empty slices: %d, %v", n, err)
	}

	// Nobody reads now: the socket fills and the deadline ends the wait.
	c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	big := make([]byte, 16<<20)
	n, err = w.WriteAll(rc, [][]byte{big})
	if !errors.Is(err, os.ErrDeadlineExceeded) || n <= 0 || n >= int64(len(big)) {
		t.Fatalf("WriteAll into a full socket past its deadline: %d of %d, %v", n, len(big), err)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
