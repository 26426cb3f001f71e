package tcprpc

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"
	"testing/iotest"
	"time"
)

func TestRecordReaderSingleFragment(t *testing.T) {
	rec := seq(1, 10)
	stream := frag(true, rec)
	rr := NewRecordReader(bytes.NewReader(stream), nil)
	if err := rr.Next(); err != nil {
		t.Fatal(err)
	}
	if n, ok := rr.Remaining(); n != 10 || !ok {
		t.Fatalf("Remaining = %d, %v; want 10, true", n, ok)
	}
	got, err := io.ReadAll(rr)
	if err != nil || !bytes.Equal(got, rec) {
		t.Fatalf("ReadAll = %x, %v; want %x", got, err, rec)
	}
	if rr.Consumed() != 10 || rr.Fragments() != 1 {
		t.Fatalf("Consumed %d Fragments %d", rr.Consumed(), rr.Fragments())
	}
	if err := rr.Next(); err != io.EOF {
		t.Fatalf("Next at end of stream = %v; want io.EOF", err)
	}
}

func TestRecordReaderMultiFragment(t *testing.T) {
	// Three records: split 3+0+5, whole, and an empty record.
	a, b := seq(10, 8), seq(50, 4)
	stream := cat(
		frag(false, a[:3]), frag(false, nil), frag(true, a[3:]),
		frag(true, b),
		frag(true, nil),
	)
	rr := NewRecordReader(bytes.NewReader(stream), nil)
	for i, want := range [][]byte{a, b, {}} {
		got, err := rr.ReadRecord(nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("record %d = %x, %v; want %x", i, got, err, want)
		}
	}
	if got, err := rr.ReadRecord(nil); err != io.EOF || len(got) != 0 {
		t.Fatalf("after last record: %x, %v; want io.EOF", got, err)
	}
	if rr.Records() != 3 {
		t.Fatalf("Records = %d", rr.Records())
	}
}

func TestRecordReaderRemainingUnknownUntilLast(t *testing.T) {
	stream := cat(frag(false, seq(0, 4)), frag(true, seq(4, 6)))
	rr := NewRecordReader(iotest.OneByteReader(bytes.NewReader(stream)), &ReaderConfig{BufferSize: 64})
	if err := rr.Next(); err != nil {
		t.Fatal(err)
	}
	if n, ok := rr.Remaining(); n != 4 || ok {
		t.Fatalf("Remaining in first fragment = %d, %v; want 4, false", n, ok)
	}
	var p [4]byte
	if _, err := rr.ReadFull(p[:]); err != nil {
		t.Fatal(err)
	}
	var one [1]byte
	if _, err := rr.ReadFull(one[:]); err != nil {
		t.Fatal(err)
	}
	if n, ok := rr.Remaining(); n != 5 || !ok {
		t.Fatalf("Remaining in last fragment = %d, %v; want 5, true", n, ok)
	}
}

func TestRecordReaderNextSkipsUnreadRest(t *testing.T) {
	stream := cat(frag(false, seq(0, 100)), frag(true, seq(100, 50)), frag(true, []byte("next")))
	rr := NewRecordReader(bytes.NewReader(stream), &ReaderConfig{BufferSize: 64})
	if err := rr.Next(); err != nil {
		t.Fatal(err)
	}
	var p [3]byte
	if _, err := rr.ReadFull(p[:]); err != nil {
		t.Fatal(err)
	}
	got, err := rr.ReadRecord(nil)
	if err != nil || string(got) != "next" {
		t.Fatalf("second record = %q, %v", got, err)
	}
}

func TestRecordReaderEOF(t *testing.T) {
	tests := []struct {
		name   string
		stream []byte
		want   error
	}{
		{"empty stream", nil, io.EOF},
		{"half a header", []byte{0x80, 0}, io.ErrUnexpectedEOF},
		{"short data", cat(be(0x80000008), seq(0, 5)), io.ErrUnexpectedEOF},
		{"missing last fragment", frag(false, seq(0, 4)), io.ErrUnexpectedEOF},
		{"half of second header", cat(frag(false, seq(0, 4)), []byte{0x80}), io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rr := NewRecordReader(bytes.NewReader(tt.stream), nil)
			_, err := rr.ReadRecord(nil)
			if err != tt.want {
				t.Fatalf("ReadRecord error = %v; want %v", err, tt.want)
			}
		})
	}
}

func TestRecordReaderTooLarge(t *testing.T) {
	// Second record: 600 + 500 > 1000. The error names the second
	// fragment header, at stream offset 4+10 (first record) + 4+600.
	stream := cat(frag(true, seq(0, 10)), frag(false, seq(0, 600)), frag(true, seq(0, 500)))
	rr := NewRecordReader(bytes.NewReader(stream), &ReaderConfig{MaxRecord: 1000})
	if _, err := rr.ReadRecord(nil); err != nil {
		t.Fatal(err)
	}
	_, err := rr.ReadRecord(nil)
	var fe *FrameError
	if !errors.As(err, &fe) || !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("error = %v; want FrameError(ErrRecordTooLarge)", err)
	}
	want := FrameError{Record: 1, Fragment: 1, Offset: 14 + 604, Size: 1100, Limit: 1000, Err: ErrRecordTooLarge}
	if *fe != want {
		t.Fatalf("FrameError = %+v; want %+v", *fe, want)
	}
	// Sticky: the stream is out of sync.
	if err2 := rr.Next(); err2 != err {
		t.Fatalf("Next after FrameError = %v", err2)
	}
	if _, err2 := rr.Read(make([]byte, 4)); err2 != err {
		t.Fatalf("Read after FrameError = %v", err2)
	}
}

func TestRecordReaderTooLargeBeforeData(t *testing.T) {
	// A header announcing 2 GiB must fail before anything is read behind it.
	cr := &countingReader{r: bytes.NewReader(be(0xffffffff))}
	rr := NewRecordReader(cr, nil)
	err := rr.Next()
	if !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("Next = %v", err)
	}
	t.Log(err)
}

func TestRecordReaderZeroFragmentFlood(t *testing.T) {
	var stream []byte
	for range 100 {
		stream = append(stream, 0, 0, 0, 0)
	}
	rr := NewRecordReader(bytes.NewReader(stream), &ReaderConfig{MaxFragments: 16})
	_, err := rr.ReadRecord(nil)
	var fe *FrameError
	if !errors.As(err, &fe) || fe.Err != ErrTooManyFragments || fe.Fragment != 16 || fe.Offset != 64 {
		t.Fatalf("error = %v (%+v); want ErrTooManyFragments at fragment 16, offset 64", err, fe)
	}
	// Exactly at the limit is fine.
	stream = cat(bytes.Repeat(be(0), 15), frag(true, []byte("ok")))
	rr = NewRecordReader(bytes.NewReader(stream), &ReaderConfig{MaxFragments: 16})
	if got, err := rr.ReadRecord(nil); err != nil || string(got) != "ok" {
		t.Fatalf("16 fragments: %q, %v", got, err)
	}
}

func TestRecordReaderPeekAcrossFragments(t *testing.T) {
	data := seq(3, 40)
	// Fragments of 5, 0, 7, 28 bytes.
	stream := cat(frag(false, data[:5]), frag(false, nil), frag(false, data[5:12]), frag(true, data[12:]), frag(true, []byte("zz")))
	for _, r := range []io.Reader{bytes.NewReader(stream), iotest.OneByteReader(bytes.NewReader(stream)), iotest.HalfReader(bytes.NewReader(stream))} {
		rr := NewRecordReader(r, &ReaderConfig{BufferSize: 64})
		if err := rr.Next(); err != nil {
			t.Fatal(err)
		}
		p, err := rr.Peek(20)
		if err != nil || !bytes.Equal(p, data[:20]) {
			t.Fatalf("Peek(20) = %x, %v; want %x", p, err, data[:20])
		}
		if rr.Consumed() != 0 {
			t.Fatalf("Peek consumed %d", rr.Consumed())
		}
		if n, err := rr.Discard(6); n != 6 || err != nil {
			t.Fatalf("Discard = %d, %v", n, err)
		}
		p, err = rr.Peek(64)
		if err != io.EOF || !bytes.Equal(p, data[6:]) {
			t.Fatalf("Peek past end = %x, %v; want %x, EOF", p, err, data[6:])
		}
		rest := make([]byte, 34)
		if n, err := rr.ReadFull(rest); n != 34 || err != nil || !bytes.Equal(rest, data[6:]) {
			t.Fatalf("ReadFull = %d, %v", n, err)
		}
		if n, ok := rr.Remaining(); n != 0 || !ok {
			t.Fatalf("Remaining at end = %d, %v", n, ok)
		}
		got, err := rr.ReadRecord(nil)
		if err != nil || string(got) != "zz" {
			t.Fatalf("next record = %q, %v", got, err)
		}
	}
}

func TestRecordReaderPeekTooLarge(t *testing.T) {
	rr := NewRecordReader(bytes.NewReader(frag(true, seq(0, 200))), &ReaderConfig{BufferSize: 64})
	if err := rr.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := rr.Peek(65); err != ErrPeekTooLarge {
		t.Fatalf("Peek(65) = %v", err)
	}
	if p, err := rr.Peek(64); err != nil || !bytes.Equal(p, seq(0, 64)) {
		t.Fatalf("Peek(64) = %x, %v", p, err)
	}
}

func TestRecordReaderShortRecord(t *testing.T) {
	rr := NewRecordReader(bytes.NewReader(cat(frag(true, seq(0, 6)), frag(true, seq(9, 9)))), nil)
	if err := rr.Next(); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 8)
	if n, err := rr.ReadFull(p); n != 6 || err != ErrShortRecord {
		t.Fatalf("ReadFull = %d, %v; want 6, ErrShortRecord", n, err)
	}
	if err := rr.Next(); err != nil {
		t.Fatal(err)
	}
	if n, err := rr.Discard(10); n != 9 || err != ErrShortRecord {
		t.Fatalf("Discard = %d, %v; want 9, ErrShortRecord", n, err)
	}
}

// TestRecordReaderPayloadDirect checks the data-path contract: after the
// head is parsed from the read-ahead buffer, the payload is copied from
// that buffer only as far as it already holds, and the rest is read from
// the stream straight into the caller's buffer.
func TestRecordReaderPayloadDirect(t *testing.T) {
	const bufSize = 8 << 10
	head := seq(1, 200)
	payload := seq(2, 1<<20)
	tail := seq(3, 12)
	stream := frag(true, cat(head, payload, tail))

	dst := make([]byte, len(payload))
	cr := &countingReader{r: bytes.NewReader(stream), dst: dst}
	rr := NewRecordReader(cr, &ReaderConfig{BufferSize: bufSize, MaxRecord: 2 << 20})
	if err := rr.Next(); err != nil {
		t.Fatal(err)
	}
	h, err := rr.Peek(len(head))
	if err != nil || !bytes.Equal(h, head) {
		t.Fatalf("Peek head: %v", err)
	}
	if _, err := rr.Discard(len(head)); err != nil {
		t.Fatal(err)
	}
	buffered := rr.Buffered()
	if n, err := rr.ReadFull(dst); n != len(dst) || err != nil {
		t.Fatalf("ReadFull payload = %d, %v", n, err)
	}
	if !bytes.Equal(dst, payload) {
		t.Fatal("payload corrupted")
	}
	var tl [12]byte
	if _, err := rr.ReadFull(tl[:]); err != nil || !bytes.Equal(tl[:], tail) {
		t.Fatalf("tail %x, %v", tl, err)
	}

	// Every byte of the payload not already buffered came through Read
	// calls that wrote into dst itself.
	direct := 0
	for _, c := range cr.calls {
		if c.inDst {
			direct += c.n
		}
	}
	if copied := len(payload) - direct; copied != buffered || copied > bufSize {
		t.Fatalf("payload bytes copied through the read-ahead buffer: %d (buffered before: %d, buffer %d)",
			copied, buffered, bufSize)
	}
	t.Logf("%d underlying reads; %d payload bytes direct, %d copied from read-ahead", len(cr.calls), direct, buffered)
}

func TestRecordReaderDirectStopsAtFragmentEnd(t *testing.T) {
	// Two 100-byte fragments read with a 64-byte buffer: the direct read
	// must never swallow the second header.
	data := seq(5, 200)
	stream := cat(frag(false, data[:100]), frag(true, data[100:]), frag(true, []byte("r2")))
	dst := make([]byte, 200)
	cr := &countingReader{r: bytes.NewReader(stream), dst: dst}
	rr := NewRecordReader(cr, &ReaderConfig{BufferSize: 64})
	// Start the record without buffering past the first header.
	rr.buf = rr.buf[:4+4] // the header and 4 data bytes on the first fill
	if err := rr.Next(); err != nil {
		t.Fatal(err)
	}
	rr.buf = rr.buf[:cap(rr.buf)]
	if _, err := rr.ReadFull(dst); err != nil || !bytes.Equal(dst, data) {
		t.Fatalf("ReadFull: %v, equal %v", err, bytes.Equal(dst, data))
	}
	got, err := rr.ReadRecord(nil)
	if err != nil || string(got) != "r2" {
		t.Fatalf("next record %q, %v", got, err)
	}
	sawDirect := false
	for _, c := range cr.calls {
		sawDirect = sawDirect || c.inDst
	}
	if !sawDirect {
		t.Fatal("no direct read happened")
	}
}

// errReader returns data, then err.
type errReader struct {
	data []byte
	err  error
}

func (e *errReader) Read(p []byte) (int, error) {
	if len(e.data) == 0 {
		return 0, e.err
	}
	n := copy(p, e.data)
	e.data = e.data[n:]
	return n, nil
}

func TestRecordReaderPassesIOErrors(t *testing.T) {
	boom := errors.New("connection reset")
	rr := NewRecordReader(&errReader{data: cat(frag(true, seq(0, 4)), be(0x80000010), seq(0, 3)), err: boom}, nil)
	if got, err := rr.ReadRecord(nil); err != nil || len(got) != 4 {
		t.Fatalf("first record: %x, %v", got, err)
	}
	if _, err := rr.ReadRecord(nil); err != boom {
		t.Fatalf("second record error = %v; want %v", err, boom)
	}
}

// zeroReader always returns 0, nil: a broken io.Reader.
type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestRecordReaderNoProgress(t *testing.T) {
	rr := NewRecordReader(zeroReader{}, nil)
	if err := rr.Next(); err != io.ErrNoProgress {
		t.Fatalf("Next = %v; want io.ErrNoProgress", err)
	}
	rr = NewRecordReader(io.MultiReader(bytes.NewReader(be(0x80010000)), zeroReader{}), nil)
	if err := rr.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := rr.ReadFull(make([]byte, 0x10000)); err != io.ErrNoProgress {
		t.Fatalf("direct ReadFull = %v; want io.ErrNoProgress", err)
	}
}

// TestRecordReaderProperty frames random records with random
// fragmentation, reads them back with random read patterns and chunked
// underlying reads, and checks every byte.
func TestRecordReaderProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 300 {
		var stream []byte
		var records [][]byte
		for range 1 + rng.IntN(5) {
			rec := make([]byte, rng.IntN(3000))
			for i := range rec {
				rec[i] = byte(rng.Uint32())
			}
			records = append(records, rec)
			rest := rec
			for {
				n := len(rest)
				if rng.IntN(3) == 0 {
					n = rng.IntN(len(rest) + 1) // may be a zero-length fragment
				}
				last := n == len(rest)
				stream = append(stream, frag(last, rest[:n])...)
				rest = rest[n:]
				if last {
					break
				}
			}
		}
		bufSize := 64 + rng.IntN(300)
		rr := NewRecordReader(&chunkReader{b: stream, rng: rng}, &ReaderConfig{BufferSize: bufSize})
		for i, want := range records {
			if err := rr.Next(); err != nil {
				t.Fatalf("iter %d record %d: Next: %v", iter, i, err)
			}
			var got []byte
			for {
				switch rng.IntN(4) {
				case 0:
					if p, err := rr.Peek(rng.IntN(bufSize + 1)); err != nil && err != io.EOF {
						t.Fatalf("Peek: %v", err)
					} else if !bytes.Equal(p, want[len(got):len(got)+len(p)]) {
						t.Fatalf("iter %d record %d: Peek at %d mismatch", iter, i, len(got))
					}
				case 1:
					n := rng.IntN(100)
					m, err := rr.Discard(n)
					got = append(got, want[len(got):len(got)+m]...)
					if err == ErrShortRecord {
						goto done
					}
					if err != nil {
						t.Fatal(err)
					}
				default:
					p := make([]byte, rng.IntN(2*bufSize))
					m, err := rr.Read(p)
					got = append(got, p[:m]...)
					if err == io.EOF {
						goto done
					}
					if err != nil {
						t.Fatal(err)
					}
				}
			}
		done:
			if !bytes.Equal(got, want) {
				t.Fatalf("iter %d record %d: got %d bytes, want %d; mismatch", iter, i, len(got), len(want))
			}
			if rr.Consumed() != int64(len(want)) {
				t.Fatalf("Consumed %d want %d", rr.Consumed(), len(want))
			}
		}
		if err := rr.Next(); err != io.EOF {
			t.Fatalf("iter %d: end: %v", iter, err)
		}
	}
}

// chunkReader returns its bytes in random-sized pieces.
type chunkReader struct {
	b   []byte
	rng *rand.Rand
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.b), 1+c.rng.IntN(500))
	copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

// After a record refused at its first header, Unread still shows the
// header and the start of the record behind it.
func TestRecordReaderUnreadAfterTooLarge(t *testing.T) {
	stream := frag(true, seq(0, 2000))
	rr := NewRecordReader(bytes.NewReader(stream), &ReaderConfig{MaxRecord: 1000})
	if err := rr.Next(); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("Next = %v; want ErrRecordTooLarge", err)
	}
	u := rr.Unread()
	if len(u) < 8 || !bytes.Equal(u[:8], stream[:8]) {
		t.Fatalf("Unread = %x...; want the refused header and data %x", u[:min(len(u), 8)], stream[:8])
	}
}

// A read stopped by a deadline resumes where it stopped: the record it
// was in is skipped by Next and the next one reads whole.
func TestRecordReaderResumeAfterDeadline(t *testing.T) {
	client, server := tcpPair(t)
	rr := NewRecordReader(server, nil)
	rec1, rec2 := seq(1, 1000), seq(2, 300)
	stream := cat(frag(true, rec1), frag(true, rec2))
	if _, err := client.Write(stream[:500]); err != nil {
		t.Fatal(err)
	}
	if err := rr.Next(); err != nil {
		t.Fatal(err)
	}
	server.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := rr.ReadFull(make([]byte, 1000)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadFull past the deadline = %v", err)
	}
	server.SetReadDeadline(time.Time{})
	rr.Resume()
	if _, err := client.Write(stream[500:]); err != nil {
		t.Fatal(err)
	}
	got, err := rr.ReadRecord(nil)
	if err != nil || !bytes.Equal(got, rec2) {
		t.Fatalf("record after resuming = %d bytes, %v; want the second record", len(got), err)
	}
}

// SkipOversize: an oversize record is reported once, stays readable, and
// Next skips the rest of it; the records after it read as usual, whether
// the limit is crossed by the first fragment or a later one.
func TestRecordReaderSkipOversize(t *testing.T) {
	stream := cat(frag(true, seq(0, 10)),
		frag(true, seq(1, 3000)),                                                    // over at its first header
		frag(false, seq(2, 600)), frag(false, seq(3, 500)), frag(true, seq(4, 900)), // over at the second
		frag(true, seq(5, 20)))
	rr := NewRecordReader(iotest.OneByteReader(bytes.NewReader(stream)), &ReaderConfig{MaxRecord: 1000, BufferSize: 256, SkipOversize: true})
	if got, err := rr.ReadRecord(nil); err != nil || !bytes.Equal(got, seq(0, 10)) {
		t.Fatalf("first record: %v", err)
	}
	if err := rr.Next(); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("Next on the oversize record = %v", err)
	}
	if p, err := rr.Peek(8); err != nil || !bytes.Equal(p, seq(1, 8)) {
		t.Fatalf("Peek of the oversize record = %x, %v", p, err)
	}
	if err := rr.Next(); err != nil {
		t.Fatalf("Next after the oversize record = %v", err)
	}
	p, err := rr.Peek(8)
	if err != nil || !bytes.Equal(p, seq(2, 8)) {
		t.Fatalf("Peek = %x, %v", p, err)
	}
	if _, err := rr.Discard(600); err != nil {
		t.Fatal(err)
	}
	if _, err := rr.Read(make([]byte, 10)); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("Read across the crossing header = %v", err)
	}
	if _, err := rr.Read(make([]byte, 10)); err != nil {
		t.Fatalf("Read after the report = %v", err)
	}
	if got, err := rr.ReadRecord(nil); err != nil || !bytes.Equal(got, seq(5, 20)) {
		t.Fatalf("record after the oversize ones: %x, %v", got, err)
	}
	if err := rr.Next(); err != io.EOF {
		t.Fatalf("Next at the end = %v", err)
	}
}
