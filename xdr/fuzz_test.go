package xdr

import "testing"

// FuzzDecoder drives a Decoder with a program taken from the input's first
// bytes over the rest: whatever the bytes, no read may panic, read past the
// buffer, or move the offset backwards.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, []byte{0, 0, 0, 5, 1, 2, 3, 4, 5, 0, 0, 0})
	f.Add([]byte{4, 4, 5}, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1})
	f.Add([]byte{6, 7, 8}, []byte{0, 0, 0, 2, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, prog, in []byte) {
		d := NewDecoder(in)
		for _, op := range prog {
			before := d.Offset()
			var err error
			switch op % 10 {
			case 0:
				_, err = d.Uint32()
			case 1:
				_, err = d.Uint64()
			case 2:
				_, err = d.Bool()
			case 3:
				_, err = d.Optional()
			case 4:
				_, err = d.Opaque(-1)
			case 5:
				_, err = d.String(int(op))
			case 6:
				_, err = d.ArrayLen(-1, int(op%16))
			case 7:
				_, err = d.FixedOpaque(int(op))
			case 8:
				err = d.Skip(int(op % 9))
			case 9:
				err = d.SkipOpaque(int(op) * 3)
			}
			if d.Offset() < before || d.Offset() > len(in) {
				t.Fatalf("offset %d -> %d of %d", before, d.Offset(), len(in))
			}
			if err != nil && d.Offset() != before {
				t.Fatalf("failed read moved offset %d -> %d", before, d.Offset())
			}
		}
	})
}
