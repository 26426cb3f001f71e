package tcprpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// refRecords is a plain reading of RFC 5531 §11: it frames data into
// records under the same limits, as the oracle for FuzzRecordReader.
// partial is the data of a record cut short by err.
func refRecords(data []byte, maxRecord, maxFrags int) (records [][]byte, partial []byte, err error) {
	for {
		if len(data) == 0 {
			return records, nil, io.EOF
		}
		var rec []byte
		for nfrags := 1; ; nfrags++ {
			if len(data) < 4 {
				return records, rec, io.ErrUnexpectedEOF
			}
			h := binary.BigEndian.Uint32(data)
			n := int(h & 0x7fffffff)
			data = data[4:]
			if len(rec)+n > maxRecord {
				return records, rec, ErrRecordTooLarge
			}
			if nfrags > maxFrags {
				return records, rec, ErrTooManyFragments
			}
			if len(data) < n {
				return records, append(rec, data...), io.ErrUnexpectedEOF
			}
			rec = append(rec, data[:n]...)
			data = data[n:]
			if h&0x80000000 != 0 {
				break
			}
		}
		records = append(records, rec)
	}
}

// FuzzRecordReader feeds arbitrary streams through a RecordReader driven
// by a pseudo-random mix of Read, ReadFull, Peek and Discard, and checks it
// against refRecords: same records, byte for byte, none over the limit,
// the same kind of error at the end, and no byte lost or invented.
func FuzzRecordReader(f *testing.F) {
	f.Add([]byte{}, uint16(1000), uint8(4), uint64(1))
	f.Add(frag(true, []byte("hello")), uint16(1000), uint8(4), uint64(2))
	f.Add(cat(frag(false, seq(0, 70)), frag(false, nil), frag(true, seq(9, 90)), frag(true, nil)), uint16(500), uint8(3), uint64(3))
	f.Add(cat(frag(false, seq(0, 10)), frag(true, seq(0, 10))), uint16(15), uint8(8), uint64(4))
	f.Add(bytes.Repeat(be(0), 40), uint16(100), uint8(16), uint64(5))
	f.Add(cat(be(0x80000010), seq(0, 7)), uint16(100), uint8(16), uint64(6))
	f.Fuzz(func(t *testing.T, data []byte, maxRecord uint16, maxFrags uint8, seed uint64) {
		maxR := int(maxRecord)%4096 + 1
		maxF := int(maxFrags)%32 + 1
		wantRecs, wantPartial, wantErr := refRecords(data, maxR, maxF)

		rng := rand.New(rand.NewPCG(seed, uint64(len(data))))
		bufSize := minBufferSize + int(seed%200)
		rr := NewRecordReader(&chunkReader{b: data, rng: rng}, &ReaderConfig{MaxRecord: maxR, MaxFragments: maxF, BufferSize: bufSize})
		var got [][]byte
		var gotSeen [][]bool
		var rec []byte
		var seen []bool // per byte of rec: read (true) or discarded (false)
		keep := func(b []byte, wasSeen bool) {
			rec = append(rec, b...)
			for range b {
				seen = append(seen, wasSeen)
			}
		}
		var err error
		scratch := make([]byte, 3*bufSize)
	records:
		for {
			rec, seen = nil, nil
			if err = rr.Next(); err != nil {
				break
			}
			for {
				var n int
				var opErr error
				switch rng.IntN(5) {
				case 0:
					var p []byte
					p, opErr = rr.Peek(rng.IntN(bufSize + 1))
					want := len(rec) + len(p)
					if opErr == nil || opErr == io.EOF {
						// Peeked bytes must be what reading returns next;
						// check once they are read below.
						if len(p) > maxR {
							t.Fatalf("Peek returned %d bytes, limit %d", len(p), maxR)
						}
						peeked := append([]byte(nil), p...)
						m, e := rr.ReadFull(scratch[:len(p)])
						if m != len(p) || e != nil || !bytes.Equal(scratch[:m], peeked) {
							t.Fatalf("Peek %x then ReadFull %x, %v", peeked, scratch[:m], e)
						}
						keep(peeked, true)
						if len(rec) != want {
							t.Fatal("bookkeeping")
						}
						if opErr == io.EOF {
							if _, e := rr.Read(scratch[:1]); e != io.EOF {
								t.Fatalf("Peek said EOF, Read says %v", e)
							}
							got, gotSeen = append(got, rec), append(gotSeen, seen)
							continue records
						}
						continue
					}
				case 1:
					n, opErr = rr.Discard(rng.IntN(2 * bufSize))
					keep(make([]byte, n), false)
				case 2:
					n, opErr = rr.ReadFull(scratch[:rng.IntN(len(scratch))])
					keep(scratch[:n], true)
				default:
					n, opErr = rr.Read(scratch[:rng.IntN(len(scratch))])
					keep(scratch[:n], true)
				}
				if len(rec) > maxR {
					t.Fatalf("record grew to %d bytes, limit %d", len(rec), maxR)
				}
				if rem, ok := rr.Remaining(); ok && len(rec)+rem > maxR {
					t.Fatalf("Remaining %d + read %d exceeds limit %d", rem, len(rec), maxR)
				}
				switch opErr {
				case nil:
				case io.EOF, ErrShortRecord:
					got, gotSeen = append(got, rec), append(gotSeen, seen)
					continue records
				default:
					err = opErr
					break records
				}
			}
		}

		if len(got) != len(wantRecs) {
			t.Fatalf("got %d records, want %d (err %v, want %v)", len(got), len(wantRecs), err, wantErr)
		}
		for i := range got {
			if !sameSeen(got[i], gotSeen[i], wantRecs[i]) {
				t.Fatalf("record %d differs:\n got %x\nwant %x", i, got[i], wantRecs[i])
			}
		}
		if err != io.EOF {
			if len(rec) > len(wantPartial) || !sameSeen(rec, seen, wantPartial[:len(rec)]) {
				t.Fatalf("partial record %x not a prefix of %x", rec, wantPartial)
			}
		}
		switch wantErr {
		case ErrRecordTooLarge, ErrTooManyFragments:
			var fe *FrameError
			if !errors.As(err, &fe) || fe.Err != wantErr {
				t.Fatalf("error %v; want %v", err, wantErr)
			}
		default:
			if err != wantErr {
				t.Fatalf("error %v; want %v", err, wantErr)
			}
		}
	})
}

// sameSeen compares the bytes the caller saw (seen[i]) with the oracle;
// discarded bytes were never seen and match anything.
func sameSeen(got []byte, seen []bool, want []byte) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if seen[i] && got[i] != want[i] {
			return false
		}
	}
	return true
}

// refSkipOversize frames data as refRecords does, but a record over
// maxRecord is no end: it is reported as nil (oversize), at the header
// that crosses the limit, and skipped.
// end is the error the stream ends with (io.EOF when clean).
func refSkipOversize(data []byte, maxRecord, maxFrags int) (records [][]byte, end error) {
	for {
		if len(data) == 0 {
			return records, io.EOF
		}
		var rec []byte
		over := false
		for nfrags := 1; ; nfrags++ {
			if len(data) < 4 {
				return records, io.ErrUnexpectedEOF
			}
			h := binary.BigEndian.Uint32(data)
			n := int(h & 0x7fffffff)
			data = data[4:]
			if nfrags > maxFrags {
				return records, ErrTooManyFragments
			}
			if len(rec)+n > maxRecord && !over {
				over = true // reported at the header that crosses the limit
				records = append(records, nil)
			}
			if len(data) < n {
				return records, io.ErrUnexpectedEOF
			}
			rec = append(rec, data[:n]...)
			data = data[n:]
			if h&0x80000000 != 0 {
				break
			}
		}
		if over {
			continue
		}
		if rec == nil {
			rec = []byte{}
		}
		records = append(records, rec)
	}
}

// FuzzRecordReaderSkipOversize: with SkipOversize, every record within
// the limit reads byte for byte as refSkipOversize frames it, every one
// over it is reported once (ErrRecordTooLarge) and skipped, and the
// stream ends with the same kind of error.
func FuzzRecordReaderSkipOversize(f *testing.F) {
	f.Add(cat(frag(true, seq(0, 10)), frag(true, seq(1, 300)), frag(true, seq(2, 5))), uint16(100), uint8(4), uint16(64))
	f.Add(cat(frag(false, seq(0, 60)), frag(false, seq(1, 60)), frag(true, seq(2, 60)), frag(true, nil)), uint16(100), uint8(8), uint16(64))
	f.Add(cat(frag(true, seq(0, 500)), be(0x80000010), seq(0, 7)), uint16(100), uint8(8), uint16(100))
	f.Fuzz(func(t *testing.T, data []byte, maxRecord uint16, maxFrags uint8, buf uint16) {
		mr, mf := int(maxRecord)+1, int(maxFrags)+1
		want, wantEnd := refSkipOversize(data, mr, mf)
		rr := NewRecordReader(bytes.NewReader(data), &ReaderConfig{MaxRecord: mr, MaxFragments: mf, BufferSize: int(buf%512) + 64, SkipOversize: true})
		var got [][]byte
		var end error
		for {
			err := rr.Next()
			if errors.Is(err, ErrRecordTooLarge) {
				got = append(got, nil)
				continue
			}
			if err != nil {
				end = err
				break
			}
			rec, err := io.ReadAll(rr)
			if errors.Is(err, ErrRecordTooLarge) {
				got = append(got, nil)
				continue
			}
			if err != nil {
				end = err
				break
			}
			if rec == nil {
				rec = []byte{}
			}
			got = append(got, rec)
		}
		if !errors.Is(end, wantEnd) {
			t.Fatalf("stream ended with %v, want %v", end, wantEnd)
		}
		// A record cut short by the stream's end is in neither, unless it
		// was reported oversize first.
		if len(got) != len(want) {
			t.Fatalf("%d records, want %d", len(got), len(want))
		}
		for i := range want {
			if (want[i] == nil) != (got[i] == nil) || !bytes.Equal(got[i], want[i]) {
				t.Fatalf("record %d: got %d bytes (oversize %v), want %d (oversize %v)", i, len(got[i]), got[i] == nil, len(want[i]), want[i] == nil)
			}
		}
	})
}
