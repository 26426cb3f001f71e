package tcprpc

import (
	"bytes"
	"errors"
	"net"
	"testing"
)

func TestWriteRecordvOneFragment(t *testing.T) {
	var out bytes.Buffer
	rw := NewRecordWriter(&out, nil)
	vec := [][]byte{[]byte("HEAD"), nil, seq(0, 9), {0, 0, 0}, {}, []byte("TAIL")}
	if err := rw.WriteRecordv(vec); err != nil {
		t.Fatal(err)
	}
	want := cat([]byte{0x80, 0, 0, 20}, []byte("HEAD"), seq(0, 9), []byte{0, 0, 0}, []byte("TAIL"))
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("wire = %x\nwant   %x", out.Bytes(), want)
	}
}

func TestWriteRecordvEmpty(t *testing.T) {
	for _, vec := range [][][]byte{nil, {nil, {}}} {
		var out bytes.Buffer
		if err := NewRecordWriter(&out, nil).WriteRecordv(vec); err != nil {
			t.Fatal(err)
		}
		if want := []byte{0x80, 0, 0, 0}; !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("wire = %x; want %x", out.Bytes(), want)
		}
	}
}

// Fragment boundaries fall inside, between and exactly at the ends of the
// slices; the reader must get the concatenation back.
func TestWriteRecordvFragmentsRoundTrip(t *testing.T) {
	for _, maxFrag := range []int{1, 3, 4, 7, 1000} {
		var out bytes.Buffer
		rw := NewRecordWriter(&out, &WriterConfig{MaxFragment: maxFrag})
		var want [][]byte
		for i, sizes := range [][]int{{0}, {1}, {4, 0, 4}, {3, 10, 2, 1}, {999, 1, 1000}, {5, 0, 0, 7, 13}} {
			var vec [][]byte
			for j, n := range sizes {
				vec = append(vec, seq(byte(i*16+j), n))
			}
			if err := rw.WriteRecordv(vec); err != nil {
				t.Fatal(err)
			}
			want = append(want, cat(vec...))
		}
		rr := NewRecordReader(&out, nil)
		for i, w := range want {
			got, err := rr.ReadRecord(nil)
			if err != nil || !bytes.Equal(got, w) {
				t.Fatalf("maxFrag %d record %d: %d bytes, %v; want %d bytes", maxFrag, i, len(got), err, len(w))
			}
			if frags := max(1, (len(w)+maxFrag-1)/maxFrag); rr.Fragments() != frags {
				t.Fatalf("maxFrag %d record %d: %d fragments, want %d", maxFrag, i, rr.Fragments(), frags)
			}
		}
	}
}

// WriteRecordv and WriteRecord share the writer's storage and may be
// mixed on one stream.
func TestWriteRecordvMixesWithWriteRecord(t *testing.T) {
	var out bytes.Buffer
	rw := NewRecordWriter(&out, nil)
	if err := rw.WriteRecord([]byte("a"), []byte("b"), []byte("c")); err != nil {
		t.Fatal(err)
	}
	if err := rw.WriteRecordv([][]byte{[]byte("d"), []byte("e"), []byte("f"), []byte("g"), []byte("h")}); err != nil {
		t.Fatal(err)
	}
	rr := NewRecordReader(&out, nil)
	for _, w := range []string{"abc", "defgh"} {
		got, err := rr.ReadRecord(nil)
		if err != nil || string(got) != w {
			t.Fatalf("got %q, %v; want %q", got, err, w)
		}
	}
}

func TestWriteRecordvStickyError(t *testing.T) {
	c1, c2 := net.Pipe()
	c2.Close()
	rw := NewRecordWriter(c1, nil)
	err := rw.WriteRecordv([][]byte{[]byte("x")})
	if err == nil {
		t.Fatal("write to a closed pipe succeeded")
	}
	if err2 := rw.WriteRecordv(nil); !errors.Is(err2, err) {
		t.Fatalf("second write: %v; want the sticky %v", err2, err)
	}
}

// Over a real TCP connection the steady state allocates nothing.
func TestWriteRecordvNoAllocTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	rw := NewRecordWriter(c, nil)
	head, payload, pad, tail := seq(1, 120), seq(2, 4093), []byte{0, 0, 0}, seq(3, 8)
	vec := [][]byte{head, payload, pad, tail}
	if err := rw.WriteRecordv(vec); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := rw.WriteRecordv(vec); err != nil {
			t.Fatal(err)
		}
	})
	c.Close()
	<-done
	if allocs != 0 {
		t.Fatalf("WriteRecordv allocates %.1f times per record", allocs)
	}
}

// writeCounter records each Write call it gets.
type writeCounter struct {
	bytes.Buffer
	calls int
}

func (w *writeCounter) Write(p []byte) (int, error) { w.calls++; return w.Buffer.Write(p) }

// AppendRecordv writes nothing; Flush sends the queued records in order,
// the headers of earlier records intact although later ones made the
// header storage grow (many one-byte fragments), and the caller's slices
// are not referenced afterwards.
func TestAppendRecordvFlush(t *testing.T) {
	var out writeCounter
	rw := NewRecordWriter(&out, &WriterConfig{MaxFragment: 1})
	var want [][]byte
	for i, sizes := range [][]int{{3}, {0}, {5, 0, 2}, {40, 1}, {1, 1, 1, 1}} {
		var vec [][]byte
		for j, n := range sizes {
			vec = append(vec, seq(byte(i*16+j), n))
		}
		if err := rw.AppendRecordv(vec); err != nil {
			t.Fatal(err)
		}
		clear(vec) // the vector itself may be reused at once
		want = append(want, seqs(i, sizes))
	}
	if out.calls != 0 || rw.Queued() != len(want) {
		t.Fatalf("before Flush: %d writes, %d queued; want 0 writes, %d queued", out.calls, rw.Queued(), len(want))
	}
	if err := rw.Flush(); err != nil {
		t.Fatal(err)
	}
	if rw.Queued() != 0 {
		t.Fatalf("%d records queued after Flush", rw.Queued())
	}
	for i, b := range rw.iov[:cap(rw.iov)] {
		if b != nil {
			t.Fatalf("iovec %d still references %d caller bytes after Flush", i, len(b))
		}
	}
	calls := out.calls
	if err := rw.Flush(); err != nil || out.calls != calls {
		t.Fatalf("empty Flush: %v, %d more writes", err, out.calls-calls)
	}
	rr := NewRecordReader(&out.Buffer, nil)
	for i, w := range want {
		got, err := rr.ReadRecord(nil)
		if err != nil || !bytes.Equal(got, w) {
			t.Fatalf("record %d: %x, %v; want %x", i, got, err, w)
		}
	}
	if out.Len() != 0 {
		t.Fatalf("%d bytes after the last record", out.Len())
	}
}

func seqs(i int, sizes []int) []byte {
	var b []byte
	for j, n := range sizes {
		b = append(b, seq(byte(i*16+j), n)...)
	}
	return b
}

// WriteRecordv after AppendRecordv sends the queued records first, in the
// same write; Reset drops what is queued.
func TestAppendRecordvThenWriteRecordv(t *testing.T) {
	var out bytes.Buffer
	rw := NewRecordWriter(&out, nil)
	if err := rw.AppendRecordv([][]byte{[]byte("dropped")}); err != nil {
		t.Fatal(err)
	}
	rw.Reset(&out)
	for _, s := range []string{"one", "two"} {
		if err := rw.AppendRecordv([][]byte{[]byte(s)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rw.WriteRecordv([][]byte{[]byte("thr"), []byte("ee")}); err != nil {
		t.Fatal(err)
	}
	want := cat(frag(true, []byte("one")), frag(true, []byte("two")), frag(true, []byte("three")))
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("wire = %x\nwant   %x", out.Bytes(), want)
	}
}

// A write error during Flush is sticky for AppendRecordv and Flush.
func TestFlushStickyError(t *testing.T) {
	c1, c2 := net.Pipe()
	c2.Close()
	rw := NewRecordWriter(c1, nil)
	if err := rw.AppendRecordv([][]byte{[]byte("x")}); err != nil {
		t.Fatal(err)
	}
	err := rw.Flush()
	if err == nil {
		t.Fatal("flush to a closed pipe succeeded")
	}
	if err2 := rw.AppendRecordv(nil); !errors.Is(err2, err) {
		t.Fatalf("append after the error: %v; want the sticky %v", err2, err)
	}
	if err2 := rw.Flush(); !errors.Is(err2, err) {
		t.Fatalf("flush after the error: %v; want the sticky %v", err2, err)
	}
}

// Over a real TCP connection a batch of records allocates nothing in the
// steady state.
func TestAppendRecordvNoAllocTCP(t *testing.T) {
	client, server := tcpPair(t)
	go drain(server)
	rw := NewRecordWriter(client, nil)
	head, payload, pad := seq(1, 120), seq(2, 4093), []byte{0, 0, 0}
	vec := [][]byte{head, payload, pad}
	batch := func() {
		for range 8 {
			if err := rw.AppendRecordv(vec); err != nil {
				t.Fatal(err)
			}
		}
		if err := rw.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	batch()
	if allocs := testing.AllocsPerRun(100, batch); allocs != 0 {
		t.Fatalf("a batch of 8 records allocates %.1f times", allocs)
	}
}
