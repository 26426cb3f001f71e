package tcprpc

import (
	"bytes"
	"io"
	"testing"
)

// TestBufferedRecord feeds a stream through Space and Filled a few bytes
// at a time (no underlying reader: one that is called fails the test)
// and checks that BufferedRecord says whole exactly when the records read
// so far, and the next one, are buffered; the records then read back byte
// for byte without a call to the underlying reader.
func TestBufferedRecord(t *testing.T) {
	stream := bytes.Join([][]byte{
		frag(true, []byte("one")),
		frag(false, []byte("tw")), frag(false, []byte("")), frag(true, []byte("o!")),
		frag(true, []byte("")),
		frag(true, []byte("three3")),
	}, nil)
	want := []string{"one", "two!", "", "three3"}
	for _, step := range []int{1, 3, 7, len(stream)} {
		rr := NewRecordReader(failReader{t}, &ReaderConfig{BufferSize: 64})
		in, got := stream, []string(nil)
		for len(got) < len(want) {
			need, whole := rr.BufferedRecord()
			if !whole {
				if need <= rr.Buffered() || need > rr.Capacity() {
					t.Fatalf("step %d: need %d with %d buffered", step, need, rr.Buffered())
				}
				n := copy(rr.Space(need), in[:min(step, len(in))])
				rr.Filled(n, nil)
				in = in[n:]
				continue
			}
			if need > rr.Buffered() {
				t.Fatalf("step %d: whole, need %d > %d buffered", step, need, rr.Buffered())
			}
			got = takeRecord(t, rr, step, got)
		}
		sameRecords(t, step, got, want)
		rr.Filled(0, io.EOF)
		if _, whole := rr.BufferedRecord(); !whole {
			t.Fatalf("step %d: after EOF not whole", step)
		}
		if err := rr.Next(); err != io.EOF {
			t.Fatalf("step %d: Next at the end: %v", step, err)
		}
	}
}

type failReader struct{ t *testing.T }

func (f failReader) Read([]byte) (int, error) {
	f.t.Fatal("the underlying reader was called")
	return 0, io.EOF
}

// TestReadAhead drives the same stream through ReadAhead, as the
// gateway's socket pumps do: space until a record is whole, then the
// record, byte for byte, with no call to the underlying reader; nil
// space (go on with the ordinary calls) for a record longer than the
// buffer and once the reader failed.
func TestReadAhead(t *testing.T) {
	stream := bytes.Join([][]byte{
		frag(true, []byte("one")),
		frag(false, []byte("tw")), frag(false, []byte("")), frag(true, []byte("o!")),
		frag(true, []byte("three3")),
	}, nil)
	want := []string{"one", "two!", "three3"}
	for _, step := range []int{1, 5, len(stream)} {
		rr := NewRecordReader(failReader{t}, &ReaderConfig{BufferSize: 64})
		in, got := stream, []string(nil)
		for len(got) < len(want) {
			space, whole := rr.ReadAhead()
			if !whole {
				if len(space) == 0 {
					t.Fatalf("step %d: no space and not whole, %d buffered", step, rr.Buffered())
				}
				n := copy(space, in[:min(step, len(in))])
				rr.Filled(n, nil)
				in = in[n:]
				continue
			}
			got = takeRecord(t, rr, step, got)
		}
		sameRecords(t, step, got, want)
		rr.Filled(0, io.EOF)
		if space, whole := rr.ReadAhead(); space != nil || whole {
			t.Fatalf("step %d: after EOF: %d bytes of space, whole %v; want nil, false", step, len(space), whole)
		}
	}

	// A record longer than the buffer: its first fragment header says so.
	rr := NewRecordReader(failReader{t}, &ReaderConfig{BufferSize: 64})
	long := frag(true, make([]byte, 100))
	rr.Filled(copy(rr.Space(8), long[:8]), nil)
	if space, whole := rr.ReadAhead(); space != nil || whole {
		t.Fatalf("100-byte record, 64-byte buffer: %d bytes of space, whole %v; want nil, false", len(space), whole)
	}
}

// takeRecord reads the next record, which must be buffered whole, and
// appends it to got.
func takeRecord(t *testing.T, rr *RecordReader, step int, got []string) []string {
	t.Helper()
	rec, err := rr.ReadRecord(nil)
	if err != nil {
		t.Fatalf("step %d: record %d: %v", step, len(got), err)
	}
	return append(got, string(rec))
}

// sameRecords fails unless got holds the records of want.
func sameRecords(t *testing.T, step int, got, want []string) {
	t.Helper()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("step %d: record %d is %q, want %q", step, i, got[i], want[i])
		}
	}
}
