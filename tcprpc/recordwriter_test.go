package tcprpc

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
)

func TestRecordWriterOneFragment(t *testing.T) {
	var out bytes.Buffer
	rw := NewRecordWriter(&out, nil)
	head, payload, tail := []byte("HEAD"), seq(0, 9), []byte{0, 0, 0}
	if err := rw.WriteRecord(head, payload, tail); err != nil {
		t.Fatal(err)
	}
	want := cat([]byte{0x80, 0, 0, 16}, head, payload, tail)
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("wire = %x\nwant   %x", out.Bytes(), want)
	}
}

func TestRecordWriterEmptyRecord(t *testing.T) {
	var out bytes.Buffer
	if err := NewRecordWriter(&out, nil).WriteRecord(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if want := []byte{0x80, 0, 0, 0}; !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("wire = %x; want %x", out.Bytes(), want)
	}
}

func TestRecordWriterSplitsFragments(t *testing.T) {
	// 3 + 10 + 2 = 15 bytes in fragments of 4: 4,4,4,3. Headers cut
	// through head, payload and tail.
	var out bytes.Buffer
	rw := NewRecordWriter(&out, &WriterConfig{MaxFragment: 4})
	head, payload, tail := []byte("abc"), []byte("0123456789"), []byte("XY")
	if err := rw.WriteRecord(head, payload, tail); err != nil {
		t.Fatal(err)
	}
	want := cat(
		be(4), []byte("abc0"),
		be(4), []byte("1234"),
		be(4), []byte("5678"),
		be(0x80000003), []byte("9XY"),
	)
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("wire = %x\nwant   %x", out.Bytes(), want)
	}
	// Exactly a multiple of the fragment size: no empty trailing fragment.
	out.Reset()
	if err := rw.WriteRecord([]byte("abcd"), []byte("efgh"), nil); err != nil {
		t.Fatal(err)
	}
	want = cat(be(4), []byte("abcd"), be(0x80000004), []byte("efgh"))
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("wire = %x\nwant   %x", out.Bytes(), want)
	}
}

func TestRecordWriterRoundTrip(t *testing.T) {
	var out bytes.Buffer
	rw := NewRecordWriter(&out, &WriterConfig{MaxFragment: 1000})
	var want [][]byte
	for i, n := range []int{0, 1, 999, 1000, 1001, 4321} {
		h, p, tl := seq(byte(i), n%37), seq(byte(i+1), n), seq(byte(i+2), n%5)
		if err := rw.WriteRecord(h, p, tl); err != nil {
			t.Fatal(err)
		}
		want = append(want, cat(h, p, tl))
	}
	rr := NewRecordReader(&out, nil)
	for i, w := range want {
		got, err := rr.ReadRecord(nil)
		if err != nil || !bytes.Equal(got, w) {
			t.Fatalf("record %d: %d bytes, %v; want %d bytes", i, len(got), err, len(w))
		}
		if frags := max(1, (len(w)+999)/1000); rr.Fragments() != frags {
			t.Fatalf("record %d: %d fragments; want %d", i, rr.Fragments(), frags)
		}
	}
}

// failWriter accepts n bytes, then fails.
type failWriter struct {
	n   int
	err error
}

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) <= f.n {
		f.n -= len(p)
		return len(p), nil
	}
	n := f.n
	f.n = 0
	return n, f.err
}

func TestRecordWriterStickyError(t *testing.T) {
	boom := errors.New("broken pipe")
	rw := NewRecordWriter(&failWriter{n: 6, err: boom}, nil)
	if err := rw.WriteRecord([]byte("head"), []byte("payload"), nil); err != boom {
		t.Fatalf("WriteRecord = %v; want %v", err, boom)
	}
	if err := rw.WriteRecord(nil, nil, nil); err != boom {
		t.Fatalf("WriteRecord after error = %v; want %v", err, boom)
	}
	var out bytes.Buffer
	rw.Reset(&out)
	if err := rw.WriteRecord([]byte("ok"), nil, nil); err != nil || out.Len() != 6 {
		t.Fatalf("after Reset: %v, %d bytes", err, out.Len())
	}
}

func TestRecordWriterDropsCallerBuffers(t *testing.T) {
	rw := NewRecordWriter(io.Discard, nil)
	if err := rw.WriteRecord([]byte("a"), []byte("b"), []byte("c")); err != nil {
		t.Fatal(err)
	}
	for i, b := range rw.iov[:cap(rw.iov)] {
		if b != nil {
			t.Fatalf("iov[%d] still references a caller buffer", i)
		}
	}
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(tb testing.TB) (client, server *net.TCPConn) {
	tb.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Skipf("no loopback TCP: %v", err)
	}
	defer ln.Close()
	done := make(chan *net.TCPConn, 1)
	go func() {
		c, err := ln.AcceptTCP()
		if err != nil {
			done <- nil
			return
		}
		done <- c
	}()
	client, err = net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		tb.Fatal(err)
	}
	server = <-done
	if server == nil {
		tb.Fatal("accept failed")
	}
	tb.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestRecordWriterOverTCP(t *testing.T) {
	client, server := tcpPair(t)
	head := seq(1, 120)
	payload := seq(2, 1<<20)
	tail := seq(3, 4)
	errc := make(chan error, 1)
	go func() {
		rw := NewRecordWriter(client, &WriterConfig{MaxFragment: 300000})
		for range 3 {
			if err := rw.WriteRecord(head, payload, tail); err != nil {
				errc <- err
				return
			}
		}
		errc <- client.CloseWrite()
	}()
	rr := NewRecordReader(server, &ReaderConfig{MaxRecord: 2 << 20})
	dst := make([]byte, len(payload))
	for i := range 3 {
		if err := rr.Next(); err != nil {
			t.Fatal(err)
		}
		h, err := rr.Peek(len(head))
		if err != nil || !bytes.Equal(h, head) {
			t.Fatalf("record %d head: %v", i, err)
		}
		rr.Discard(len(head))
		clear(dst)
		if _, err := rr.ReadFull(dst); err != nil || !bytes.Equal(dst, payload) {
			t.Fatalf("record %d payload: %v", i, err)
		}
		var tl [4]byte
		if _, err := rr.ReadFull(tl[:]); err != nil || !bytes.Equal(tl[:], tail) {
			t.Fatalf("record %d tail: %v", i, err)
		}
		if rr.Fragments() != 4 { // 1048700 bytes in 300000-byte fragments
			t.Fatalf("record %d: %d fragments", i, rr.Fragments())
		}
	}
	if err := rr.Next(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestRecordWriterNoAllocsOverTCP(t *testing.T) {
	client, server := tcpPair(t)
	go func() { // drain with a buffer allocated up front
		buf := make([]byte, 256<<10)
		for {
			if _, err := server.Read(buf); err != nil {
				return
			}
		}
	}()
	rw := NewRecordWriter(client, nil)
	head, payload := make([]byte, 200), make([]byte, 64<<10)
	rw.WriteRecord(head, payload, nil) // warm up iovec caches
	allocs := testing.AllocsPerRun(50, func() {
		if err := rw.WriteRecord(head, payload, nil); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("WriteRecord over TCP: %v allocs/op; want 0", allocs)
	}
}
