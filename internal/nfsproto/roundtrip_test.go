package nfsproto

import (
	"testing"

	"github.com/rdmagw/rdmagw/xdr"
)

// TestRoundTrip encodes and decodes every shared structure.
func TestRoundTrip(t *testing.T) {
	a := Fattr3{Type: NF3Reg, Mode: 0o644, Nlink: 1, UID: 2, GID: 3, Size: 1<<40 + 5, Used: 4096,
		RdevMajor: 7, RdevMinor: 8, FSID: 9, FileID: 10, Atime: Time{1, 2}, Mtime: Time{3, 4}, Ctime: Time{5, 6}}
	s := Sattr3{SetMode: true, Mode: 0o600, SetSize: true, Size: 99, Atime: SetToServerTime,
		Mtime: SetToClientTime, MtimeVal: Time{11, 12}}
	w := Wcc{Before: &WccAttr{Size: 1, Mtime: Time{2, 3}, Ctime: Time{4, 5}}, After: &a}
	buf := make([]byte, 1024)
	e := xdr.NewEncoder(buf)
	a.Encode(&e)
	s.Encode(&e)
	w.Encode(&e)
	PutPostOpFH(&e, []byte{1, 2, 3})
	PutPostOpFH(&e, nil)
	// fattr3, sattr3 (mode 8, uid 4, gid 4, size 12, atime 4, mtime 12),
	// wcc_data (4+24 + 4+84), two post_op_fh3 (4+4+4, 4).
	if e.Err() != nil || e.Len() != FattrSize+44+116+12+4 {
		t.Fatalf("encoded %d bytes, err %v", e.Len(), e.Err())
	}
	d := NewDec(e.Bytes())
	var a2 Fattr3
	a2.Decode(d)
	var s2 Sattr3
	s2.Decode(d)
	var w2 Wcc
	w2.Decode(d)
	fh := PostOpFH(d)
	none := PostOpFH(d)
	if d.Err() != nil || d.Len() != 0 {
		t.Fatalf("decode: %v, %d left", d.Err(), d.Len())
	}
	if a2 != a || s2 != s || *w2.Before != *w.Before || *w2.After != a || string(fh) != "\x01\x02\x03" || none != nil {
		t.Fatalf("round trip differs:\n%+v\n%+v\n%+v", a2, s2, w2)
	}
}

// TestSattrBadTimeHow: a time_how outside the enum fails the decode.
func TestSattrBadTimeHow(t *testing.T) {
	d := NewDec([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0})
	var s Sattr3
	s.Decode(d)
	if d.Err() == nil {
		t.Fatal("time_how 3 accepted")
	}
}
