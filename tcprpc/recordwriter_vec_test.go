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
