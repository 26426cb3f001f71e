package xdr

import (
	"bytes"
	"errors"
	"math"
	"math/rand"
	"testing"
)

func TestRoundTripPrimitives(t *testing.T) {
	buf := make([]byte, 256)
	e := NewEncoder(buf)
	e.PutUint32(0xdeadbeef)
	e.PutInt32(-7)
	e.PutUint64(math.MaxUint64 - 1)
	e.PutInt64(math.MinInt64)
	e.PutBool(true)
	e.PutBool(false)
	e.PutEnum(3)
	e.PutOptional(true)
	e.PutOpaque([]byte{1, 2, 3, 4, 5})
	e.PutFixedOpaque([]byte{9, 8, 7})
	e.PutString("hello")
	if err := e.Err(); err != nil {
		t.Fatal(err)
	}
	want := []byte{
		0xde, 0xad, 0xbe, 0xef,
		0xff, 0xff, 0xff, 0xf9,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
		0x80, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 1,
		0, 0, 0, 0,
		0, 0, 0, 3,
		0, 0, 0, 1,
		0, 0, 0, 5, 1, 2, 3, 4, 5, 0, 0, 0,
		9, 8, 7, 0,
		0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o', 0, 0, 0,
	}
	if !bytes.Equal(e.Bytes(), want) {
		t.Fatalf("encoding:\n got %x\nwant %x", e.Bytes(), want)
	}

	d := NewDecoder(e.Bytes())
	mustU32 := func(want uint32) {
		t.Helper()
		v, err := d.Uint32()
		if err != nil || v != want {
			t.Fatalf("Uint32 = %#x, %v; want %#x", v, err, want)
		}
	}
	mustU32(0xdeadbeef)
	if v, err := d.Int32(); err != nil || v != -7 {
		t.Fatalf("Int32 = %d, %v", v, err)
	}
	if v, err := d.Uint64(); err != nil || v != math.MaxUint64-1 {
		t.Fatalf("Uint64 = %d, %v", v, err)
	}
	if v, err := d.Int64(); err != nil || v != math.MinInt64 {
		t.Fatalf("Int64 = %d, %v", v, err)
	}
	if v, err := d.Bool(); err != nil || !v {
		t.Fatalf("Bool = %v, %v", v, err)
	}
	if v, err := d.Bool(); err != nil || v {
		t.Fatalf("Bool = %v, %v", v, err)
	}
	if v, err := d.Enum(); err != nil || v != 3 {
		t.Fatalf("Enum = %d, %v", v, err)
	}
	if v, err := d.Optional(); err != nil || !v {
		t.Fatalf("Optional = %v, %v", v, err)
	}
	if v, err := d.Opaque(5); err != nil || !bytes.Equal(v, []byte{1, 2, 3, 4, 5}) {
		t.Fatalf("Opaque = %x, %v", v, err)
	}
	if v, err := d.FixedOpaque(3); err != nil || !bytes.Equal(v, []byte{9, 8, 7}) {
		t.Fatalf("FixedOpaque = %x, %v", v, err)
	}
	if v, err := d.String(255); err != nil || string(v) != "hello" {
		t.Fatalf("String = %q, %v", v, err)
	}
	if d.Len() != 0 || d.Offset() != len(want) {
		t.Fatalf("Len %d Offset %d after decoding everything", d.Len(), d.Offset())
	}
}

func TestDecodeErrorsNameOffset(t *testing.T) {
	// Every item after 6 good bytes fails with the offset of that item.
	in := []byte{0, 0, 0, 9, 0xaa, 0xbb}
	cases := []struct {
		name string
		op   func(d *Decoder) error
		want error
		at   int
	}{
		{"uint32 short", func(d *Decoder) error { _, err := d.Uint32(); return err }, ErrShort, 4},
		{"uint64 short", func(d *Decoder) error { _, err := d.Uint64(); return err }, ErrShort, 4},
		{"bool short", func(d *Decoder) error { _, err := d.Bool(); return err }, ErrShort, 4},
		{"fixed short", func(d *Decoder) error { _, err := d.FixedOpaque(2); return err }, ErrShort, 4},
		{"skip short", func(d *Decoder) error { return d.Skip(3) }, ErrShort, 4},
	}
	for _, c := range cases {
		d := NewDecoder(in)
		if _, err := d.Uint32(); err != nil {
			t.Fatal(err)
		}
		err := c.op(&d)
		var xe *Error
		if !errors.As(err, &xe) || !errors.Is(err, c.want) || xe.Offset != c.at {
			t.Errorf("%s: err = %v, want %v at offset %d", c.name, err, c.want, c.at)
		}
		if d.Offset() != 4 {
			t.Errorf("%s: a failed read moved the offset to %d", c.name, d.Offset())
		}
	}
}

func TestOpaqueLimitsAndTruncation(t *testing.T) {
	// Length 9 claims 12 bytes with padding; only 8 are present.
	d := NewDecoder([]byte{0, 0, 0, 9, 1, 2, 3, 4, 5, 6, 7, 8})
	if _, err := d.Opaque(-1); !errors.Is(err, ErrShort) {
		t.Fatalf("truncated opaque: %v", err)
	}
	if d.Offset() != 0 {
		t.Fatalf("offset moved to %d on error", d.Offset())
	}
	if _, err := d.Opaque(8); !errors.Is(err, ErrTooLong) {
		t.Fatalf("over-limit opaque: %v", err)
	}
	// A hostile 4 GiB length must fail, not overflow.
	d.Reset([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	if _, err := d.Opaque(-1); !errors.Is(err, ErrShort) {
		t.Fatalf("huge opaque: %v", err)
	}
	if _, err := d.String(1 << 20); !errors.Is(err, ErrTooLong) {
		t.Fatalf("huge string: %v", err)
	}
	// Data exactly at the end without room for padding is short too.
	d.Reset([]byte{0, 0, 0, 1, 7})
	if _, err := d.Opaque(-1); !errors.Is(err, ErrShort) {
		t.Fatalf("opaque missing padding: %v", err)
	}
}

func TestBadBool(t *testing.T) {
	d := NewDecoder([]byte{0, 0, 0, 2})
	_, err := d.Optional()
	if !errors.Is(err, ErrBadBool) {
		t.Fatalf("err = %v", err)
	}
	var xe *Error
	if !errors.As(err, &xe) || xe.Op != "optional" || xe.Want != 2 {
		t.Fatalf("error does not say what: %#v", err)
	}
}

func TestArrayLen(t *testing.T) {
	d := NewDecoder([]byte{0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3})
	if n, err := d.ArrayLen(3, 4); err != nil || n != 3 {
		t.Fatalf("ArrayLen = %d, %v", n, err)
	}
	d.Reset([]byte{0, 0, 0, 3, 0, 0, 0, 1})
	if _, err := d.ArrayLen(10, 4); !errors.Is(err, ErrShort) {
		t.Fatalf("count beyond input: %v", err)
	}
	d.Reset([]byte{0x7f, 0xff, 0xff, 0xff})
	if _, err := d.ArrayLen(-1, 8); !errors.Is(err, ErrShort) {
		t.Fatalf("hostile count: %v", err)
	}
	d.Reset([]byte{0, 0, 0, 4})
	if _, err := d.ArrayLen(3, 0); !errors.Is(err, ErrTooLong) {
		t.Fatalf("count over max: %v", err)
	}
}

func TestEncoderOverflowIsSticky(t *testing.T) {
	buf := make([]byte, 10)
	e := NewEncoder(buf)
	e.PutUint32(1)
	e.PutUint64(2) // needs 8, has 6
	e.PutUint32(3) // would fit, but the encoder already failed
	if !errors.Is(e.Err(), ErrOverflow) {
		t.Fatalf("Err = %v", e.Err())
	}
	if e.Len() != 4 {
		t.Fatalf("Len = %d after overflow, want 4", e.Len())
	}
	e.Reset(buf)
	e.PutOpaque(make([]byte, 7)) // 4 + 8 > 10
	if !errors.Is(e.Err(), ErrOverflow) || e.Len() != 0 {
		t.Fatalf("partial opaque written: Len %d err %v", e.Len(), e.Err())
	}
}

func TestPaddingIsZeroed(t *testing.T) {
	buf := bytes.Repeat([]byte{0xee}, 16)
	e := NewEncoder(buf)
	e.PutOpaque([]byte{1})
	e.PutString("ab")
	want := []byte{0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 2, 'a', 'b', 0, 0}
	if !bytes.Equal(e.Bytes(), want) {
		t.Fatalf("got %x want %x", e.Bytes(), want)
	}
}

func TestPadAndReserve(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 3, 2: 2, 3: 1, 4: 0, 4097: 3} {
		if Pad(n) != want || RoundUp(n) != n+want {
			t.Errorf("Pad(%d) = %d RoundUp = %d", n, Pad(n), RoundUp(n))
		}
	}
	buf := make([]byte, 12)
	e := NewEncoder(buf)
	l := e.Reserve(4)
	e.PutFixedOpaque([]byte{5, 6})
	l[3] = 2
	e.PutPad(1)
	if !bytes.Equal(e.Bytes(), []byte{0, 0, 0, 2, 5, 6, 0, 0, 0, 0, 0}) {
		t.Fatalf("got %x", e.Bytes())
	}
}

// TestRandomRoundTrip encodes random item sequences and decodes them back.
func TestRandomRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	buf := make([]byte, 64<<10)
	for iter := 0; iter < 2000; iter++ {
		type item struct {
			kind int
			u    uint64
			b    []byte
		}
		var items []item
		e := NewEncoder(buf)
		for i := r.Intn(20); i > 0; i-- {
			it := item{kind: r.Intn(4), u: r.Uint64()}
			switch it.kind {
			case 0:
				e.PutUint32(uint32(it.u))
			case 1:
				e.PutUint64(it.u)
			case 2, 3:
				it.b = make([]byte, r.Intn(50))
				r.Read(it.b)
				if it.kind == 2 {
					e.PutOpaque(it.b)
				} else {
					e.PutFixedOpaque(it.b)
				}
			}
			items = append(items, it)
		}
		if e.Err() != nil {
			t.Fatal(e.Err())
		}
		if e.Len()%4 != 0 {
			t.Fatalf("encoding of %d bytes is not XDR-aligned", e.Len())
		}
		d := NewDecoder(e.Bytes())
		for _, it := range items {
			switch it.kind {
			case 0:
				if v, err := d.Uint32(); err != nil || v != uint32(it.u) {
					t.Fatalf("uint32 %d %v", v, err)
				}
			case 1:
				if v, err := d.Uint64(); err != nil || v != it.u {
					t.Fatalf("uint64 %d %v", v, err)
				}
			case 2:
				if v, err := d.Opaque(-1); err != nil || !bytes.Equal(v, it.b) {
					t.Fatalf("opaque %x %v", v, err)
				}
			case 3:
				if v, err := d.FixedOpaque(len(it.b)); err != nil || !bytes.Equal(v, it.b) {
					t.Fatalf("fixed %x %v", v, err)
				}
			}
		}
		if d.Len() != 0 {
			t.Fatalf("%d bytes left over", d.Len())
		}
	}
}
