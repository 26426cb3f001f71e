package xdr

import (
	"bytes"
	"errors"
	"testing"
)

// readerStep is what one program step of FuzzReader saw.
type readerStep struct {
	off   int    // offset after the step
	value uint64 // the number read, or a body's length
	body  []byte // the sub-slice read, if any
}

// runReader runs prog over in with a Reader, stopping at the first stop,
// and returns what each step read, the index of the step that stopped it
// (len(prog) if none) and the Reader.
func runReader(t *testing.T, prog, in []byte) ([]readerStep, int, *Reader) {
	r := NewReader(in)
	var steps []readerStep
	for i, op := range prog {
		before := r.Offset()
		var s readerStep
		zero := true
		switch op % 9 {
		case 0:
			s.value = uint64(r.Uint32())
		case 1:
			s.value = r.Uint64()
		case 2:
			if r.Bool() {
				s.value = 1
			}
		case 3:
			s.body = r.Opaque(-1)
			zero = s.body == nil
		case 4:
			s.body = r.Opaque(int(op >> 3))
			zero = s.body == nil
		case 5:
			s.body = r.FixedOpaque(int(op >> 3))
			zero = s.body == nil
		case 6:
			s.value = uint64(r.ArrayLen(int(op>>4)-1, int(op&7)))
		case 7:
			s.value = uint64(r.Length(int(op >> 3)))
		case 8:
			r.Skip(int(op>>4) - 2)
		}
		s.off = r.Offset()
		if s.off < before || s.off > len(in) || s.off+r.Len() != len(in) {
			t.Fatalf("step %d (%d): offset %d -> %d, len %d of %d", i, op, before, s.off, r.Len(), len(in))
		}
		if !r.OK() {
			if s.off != before || s.value != 0 || !zero {
				t.Fatalf("step %d (%d) stopped but consumed bytes or returned a value", i, op)
			}
			return steps, i, &r
		}
		steps = append(steps, s)
	}
	return steps, len(prog), &r
}

// FuzzReader drives a Reader with a program (prog) over the whole input
// and over a prefix of it (the part of a message that has arrived), and
// checks the contract written at the type:
//
//   - no read panics, the offset only moves forward within the slice;
//   - the first stop sticks: later reads return zero, consume nothing,
//     and Err stays the same error;
//   - a shortfall needs more than the slice holds, and with that much the
//     program gets past the step that ran short;
//   - a limit is judged on the length word alone: the prefix and the whole
//     input agree step for step until the prefix runs short, and a
//     malformation (a length over its limit, a bad bool) is found at the
//     same step in both, however little of the body the prefix holds.
func FuzzReader(f *testing.F) {
	f.Add([]byte{0, 3, 4 | 5<<3, 6 | 2<<4, 7 | 9<<3}, []byte{0, 0, 0, 5, 0, 0, 0, 2, 'h', 'i', 0, 0, 0, 0, 0, 3, 'a', 'b', 'c', 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 7}, uint16(10))
	f.Add([]byte{4 | 1<<3, 3}, []byte{0, 0, 0, 200, 1, 2}, uint16(6))
	f.Add([]byte{3}, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1}, uint16(3))
	f.Add([]byte{2, 2, 0}, []byte{0, 0, 0, 1, 0, 0, 0, 2}, uint16(8))
	f.Add([]byte{6 | 15<<4 | 7, 8 | 1<<4}, []byte{0, 0, 0, 3, 0, 0, 0, 0}, uint16(5))
	f.Fuzz(func(t *testing.T, prog, in []byte, cut uint16) {
		full, fullStop, fr := runReader(t, prog, in)
		if fullStop < len(prog) {
			err := fr.Err()
			if err == nil || fr.Err() != err {
				t.Fatalf("stopped with Err %v, then %v", err, fr.Err())
			}
			var xe *Error
			if !errors.As(err, &xe) || xe.Offset != fr.Offset() {
				t.Fatalf("stop error %v is not an *Error at offset %d", err, fr.Offset())
			}
			if n := fr.Need(); n > 0 && (n <= len(in) || !errors.Is(err, ErrShort)) {
				t.Fatalf("Need %d with %d bytes in hand (%v)", n, len(in), err)
			}
			before := fr.Offset()
			if fr.Uint32() != 0 || fr.Opaque(-1) != nil || fr.ArrayLen(-1, 0) != 0 || fr.Offset() != before || fr.Err() != err {
				t.Fatal("a stopped Reader read on")
			}
			fr.Fail(errors.New("later"))
			if fr.Err() != err {
				t.Fatal("Fail replaced the first stop")
			}
			if n := fr.Need(); n > 0 && n-len(in) <= 1<<16 {
				// Given the bytes it asked for (zeros), the step goes through.
				grown := append(bytes.Clone(in), make([]byte, n-len(in))...)
				if _, stop, r2 := runReader(t, prog, grown); stop == fullStop && r2.Need() > 0 && r2.Need() <= n {
					t.Fatalf("step %d still short with the %d bytes it needed", fullStop, n)
				}
			}
		}
		k := int(cut) % (len(in) + 1)
		part, partStop, pr := runReader(t, prog, in[:k])
		for i := range part {
			if i >= len(full) || part[i].off != full[i].off || part[i].value != full[i].value || !bytes.Equal(part[i].body, full[i].body) {
				t.Fatalf("step %d: the prefix of %d bytes read %+v, the whole input %+v", i, k, part[i], full[min(i, len(full)-1)])
			}
		}
		switch {
		case partStop == len(prog):
			if fullStop != len(prog) {
				t.Fatalf("the prefix ran the whole program, the whole input stopped at step %d", fullStop)
			}
		case pr.Need() > 0:
			if pr.Need() <= k || partStop > fullStop {
				t.Fatalf("prefix of %d bytes: Need %d at step %d (whole input stopped at %d)", k, pr.Need(), partStop, fullStop)
			}
			if partStop == fullStop && fr.Need() == 0 && pr.Need() > pr.Offset()+4 {
				t.Fatalf("step %d: length word in hand, the prefix waits for %d bytes; the whole input says %v", partStop, pr.Need(), fr.Err())
			}
		default: // malformed in the prefix: malformed at the same step in the whole
			if partStop != fullStop || fr.Need() > 0 || !errors.Is(fr.Err(), errors.Unwrap(pr.Err())) {
				t.Fatalf("prefix of %d bytes malformed at step %d (%v); whole input: step %d (%v)", k, partStop, pr.Err(), fullStop, fr.Err())
			}
		}
	})
}
