package nfsproto

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/rdmagw/rdmagw/xdr"
)

// FuzzDec drives a Dec with a program (prog) over arbitrary bytes (in):
// no read may panic, the offset only moves forward and never past the
// input, and once a read has failed the error sticks: every later read
// returns its zero value without consuming anything, and Fail does not
// replace the first error.
func FuzzDec(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4}, []byte{0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 2, 'a', 'b', 0, 0})
	f.Add([]byte{3, 3, 0}, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1})
	f.Add([]byte{5, 6, 2, 0}, []byte{0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3})
	f.Add([]byte{7, 0, 0}, []byte{0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, prog, in []byte) {
		d := NewDec(in)
		var first error
		for i, op := range prog {
			before := d.Offset()
			failed := d.Err() != nil
			var zero bool
			switch op % 8 {
			case 0:
				zero = d.Uint32() == 0
			case 1:
				zero = d.Uint64() == 0
			case 2:
				zero = !d.Bool()
			case 3:
				zero = d.Opaque(-1) == nil
			case 4:
				zero = d.Opaque(int(op)) == nil
			case 5:
				zero = d.FixedOpaque(int(op>>3)) == nil
			case 6:
				zero = d.Time() == Time{}
			case 7:
				d.Fail(ErrBadEnum)
				zero = true
			}
			if d.Offset() < before || d.Offset() > len(in) || d.Offset()+d.Len() != len(in) {
				t.Fatalf("op %d (%d): offset %d -> %d, len %d of %d", i, op, before, d.Offset(), d.Len(), len(in))
			}
			if failed {
				if d.Offset() != before || !zero {
					t.Fatalf("op %d (%d) after a failure consumed bytes or returned a value", i, op)
				}
				if d.Err() != first {
					t.Fatalf("op %d (%d) replaced the first error %v with %v", i, op, first, d.Err())
				}
			}
			if first == nil {
				first = d.Err()
			}
		}
	})
}

// The shared NFSv3 types FuzzNFS3Types decodes (kind % nfs3Kinds).
const (
	kindFattr3 = iota
	kindSattr3
	kindWcc
	kindPostOpAttr
	kindPostOpFH
	kindFH
	nfs3Kinds
)

// decodeKind decodes one item of kind from in and returns it with the
// bytes consumed and the decode error.
func decodeKind(kind int, in []byte) (v any, n int, err error) {
	d := NewDec(in)
	switch kind {
	case kindFattr3:
		var a Fattr3
		a.Decode(d)
		v = a
	case kindSattr3:
		var s Sattr3
		s.Decode(d)
		v = s
	case kindWcc:
		var w Wcc
		w.Decode(d)
		v = w
	case kindPostOpAttr:
		a, ok := PostOpAttr(d)
		v = [2]any{a, ok}
	case kindPostOpFH:
		v = PostOpFH(d)
	case kindFH:
		v = FH(d)
	}
	return v, d.Offset(), d.Err()
}

// encodeKind encodes v (as decodeKind returned it).
func encodeKind(t *testing.T, kind int, v any) []byte {
	e := xdr.NewEncoder(make([]byte, 1024))
	switch kind {
	case kindFattr3:
		a := v.(Fattr3)
		a.Encode(&e)
	case kindSattr3:
		s := v.(Sattr3)
		s.Encode(&e)
	case kindWcc:
		w := v.(Wcc)
		w.Encode(&e)
	case kindPostOpAttr:
		p := v.([2]any)
		var a *Fattr3
		if p[1].(bool) {
			x := p[0].(Fattr3)
			a = &x
		}
		PutPostOpAttr(&e, a)
	case kindPostOpFH:
		PutPostOpFH(&e, v.([]byte))
	case kindFH:
		e.PutOpaque(v.([]byte))
	}
	if e.Err() != nil {
		t.Fatalf("encode %T: %v", v, e.Err())
	}
	return e.Bytes()
}

// FuzzNFS3Types decodes the shared NFSv3 structures (fattr3, sattr3,
// wcc_data, post_op_attr, post_op_fh3, nfs_fh3) from arbitrary bytes. A
// decode must not panic; every strict prefix of what a successful decode
// consumed must fail (truncation is an error, not zeros); and the decoded
// value must encode back to the same value (to the same bytes, for the
// types without opaque padding, whose encoding is canonical).
func FuzzNFS3Types(f *testing.F) {
	a := Fattr3{Type: NF3Reg, Mode: 0o644, Nlink: 1, Size: 13, Used: 4096, FSID: 7, FileID: 99,
		Atime: Time{1, 2}, Mtime: Time{3, 4}, Ctime: Time{5, 6}}
	seeds := []any{
		a,
		Sattr3{SetMode: true, Mode: 0o600, SetSize: true, Size: 1, Atime: SetToServerTime, Mtime: SetToClientTime, MtimeVal: Time{7, 8}},
		Wcc{Before: &WccAttr{Size: 1, Mtime: Time{2, 3}, Ctime: Time{4, 5}}, After: &a},
		[2]any{a, true},
		[]byte{1, 2, 3, 4, 5},
		[]byte{9, 8, 7},
	}
	for kind, v := range seeds {
		f.Add(uint8(kind), encodeKind(nil, kind, v))
	}
	f.Add(uint8(kindWcc), []byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint8(kindPostOpFH), []byte{0, 0, 0, 1, 0, 0, 0, 0})
	f.Add(uint8(kindFH), []byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, k uint8, in []byte) {
		kind := int(k) % nfs3Kinds
		v, n, err := decodeKind(kind, in)
		if n > len(in) {
			t.Fatalf("consumed %d of %d bytes", n, len(in))
		}
		if err != nil {
			return
		}
		for cut := 0; cut < n; cut++ {
			if _, _, err := decodeKind(kind, in[:cut]); err == nil {
				t.Fatalf("kind %d: %d of the %d bytes decode without error", kind, cut, n)
			}
		}
		if kind == kindFH || kind == kindPostOpFH {
			if fh := v.([]byte); len(fh) > FHSize {
				t.Fatalf("handle of %d bytes accepted", len(fh))
			}
		}
		enc := encodeKind(t, kind, v)
		v2, n2, err := decodeKind(kind, enc)
		if err != nil || n2 != len(enc) || !reflect.DeepEqual(v, v2) {
			t.Fatalf("kind %d round trip: %v (%d of %d bytes)\n got %#v\nwant %#v", kind, err, n2, len(enc), v2, v)
		}
		if kind != kindFH && kind != kindPostOpFH && !bytes.Equal(enc, in[:n]) {
			t.Fatalf("kind %d re-encodes differently:\n got %x\nwant %x", kind, enc, in[:n])
		}
	})
}

// FuzzAuthSys encodes arbitrary AUTH_SYS credentials: the body must be
// exactly the XDR of authsys_parms (RFC 5531 appendix A), which decodes
// back to the same credential with no byte left over.
func FuzzAuthSys(f *testing.F) {
	f.Add(uint32(1700000000), "rdmagw", uint32(0), uint32(0), []byte(nil))
	f.Add(uint32(1), "host.example", uint32(1000), uint32(100), []byte{0, 0, 0, 10, 0, 0, 0, 20})
	f.Add(uint32(0), "", uint32(0xffffffff), uint32(0xfffffffe), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, stamp uint32, name string, uid, gid uint32, gidBytes []byte) {
		a := AuthSys{Stamp: stamp, MachineName: name, UID: uid, GID: gid}
		for i := 0; i+4 <= len(gidBytes); i += 4 {
			a.GIDs = append(a.GIDs, binary.BigEndian.Uint32(gidBytes[i:]))
		}
		b := a.Encode()
		if len(b) != 20+xdr.RoundUp(len(name))+4*len(a.GIDs) {
			t.Fatalf("encoded %d bytes", len(b))
		}
		d := NewDec(b)
		got := AuthSys{Stamp: d.Uint32(), MachineName: string(d.Opaque(-1)), UID: d.Uint32(), GID: d.Uint32()}
		n := int(d.Uint32())
		if d.Err() == nil && n > d.Len()/4 {
			t.Fatalf("gid count %d for %d bytes", n, d.Len())
		}
		for i := 0; i < n && d.Err() == nil; i++ {
			got.GIDs = append(got.GIDs, d.Uint32())
		}
		if d.Err() != nil || d.Len() != 0 {
			t.Fatalf("decode: %v, %d bytes left", d.Err(), d.Len())
		}
		if got.Stamp != a.Stamp || got.MachineName != a.MachineName || got.UID != a.UID || got.GID != a.GID ||
			len(got.GIDs) != len(a.GIDs) || (len(a.GIDs) > 0 && !reflect.DeepEqual(got.GIDs, a.GIDs)) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, a)
		}
	})
}
