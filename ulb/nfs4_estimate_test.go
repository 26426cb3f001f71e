package ulb

import (
	"errors"
	"testing"
)

func estimate4(t *testing.T, args []byte) Estimate {
	t.Helper()
	e, err := EstimateReply(ProgNFS, 4, nfs4ProcCompound, args)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// compoundResHeader is a COMPOUND4res header with an empty tag, after an
// AUTH_NONE reply header.
const compoundResHeader = nfs4ReplyHeader + 4 + 4 + 4

func TestNFS4EstimateRead(t *testing.T) {
	e := estimate4(t, nfs4Compound("", 1, sequenceArgs4, putfhArgs4, readArgs4(1<<20)).bytes())
	// SEQUENCE4resok is 36 bytes; PUTFH only a status; READ4resok's eof and
	// data length word stay inline.
	want := compoundResHeader + (8 + sessionIDSize + 20) + 8 + (8 + 4 + 4)
	if e.Inline != want || e.Unpredictable || e.NItems != 1 || e.ItemKind[0] != KindReadData || e.ItemMax[0] != 1<<20 {
		t.Fatalf("%+v, want inline %d and one 1 MiB read-data item", e, want)
	}
}

func TestNFS4EstimateTagEchoed(t *testing.T) {
	short := estimate4(t, nfs4Compound("", 0, putfhArgs4).bytes())
	long := estimate4(t, nfs4Compound("a-17-byte-tag-xyz", 0, putfhArgs4).bytes())
	if long.Inline-short.Inline != 20 {
		t.Fatalf("tag of 17 bytes adds %d, want 20", long.Inline-short.Inline)
	}
}

func TestNFS4EstimateItems(t *testing.T) {
	// RFC 8267 §6.4.3: PUTFH LOOKUP READ PUTFH LOOKUP READLINK PUTFH LOOKUP READ.
	lookup := argOp(opLookup, str4("f"))
	readlink := argOp(opReadlink, nil)
	e := estimate4(t, nfs4Compound("", 0, putfhArgs4, lookup, readArgs4(8192), putfhArgs4, lookup, readlink, putfhArgs4, lookup, readArgs4(13)).bytes())
	wantKind := []Kind{KindReadData, KindReadlinkPath, KindReadData}
	wantMax := []int{8192, readlinkMax, 13}
	if e.NItems != 3 {
		t.Fatalf("%+v", e)
	}
	for i := range 3 {
		if e.ItemKind[i] != wantKind[i] || e.ItemMax[i] != wantMax[i] {
			t.Fatalf("item %d: %v of %d, want %v of %d", i, e.ItemKind[i], e.ItemMax[i], wantKind[i], wantMax[i])
		}
	}
	want := compoundResHeader + 6*8 + (8 + 8) + (8 + 4) + (8 + 8)
	if e.Inline != want {
		t.Fatalf("inline %d, want %d", e.Inline, want)
	}
}

// More READs than an Estimate holds: the rest come back inline.
func TestNFS4EstimateTooManyReads(t *testing.T) {
	var ops []nfs4Field
	for range MaxItems + 2 {
		ops = append(ops, readArgs4(1001))
	}
	e := estimate4(t, nfs4Compound("", 0, ops...).bytes())
	if e.NItems != MaxItems {
		t.Fatalf("%d items", e.NItems)
	}
	want := compoundResHeader + (MaxItems+2)*(8+8) + 2*1004
	if e.Inline != want {
		t.Fatalf("inline %d, want %d", e.Inline, want)
	}
}

// WRITE data is skipped, not counted; WRITE4resok is 16 bytes.
func TestNFS4EstimateWrite(t *testing.T) {
	e := estimate4(t, nfs4Compound("", 1, sequenceArgs4, putfhArgs4, writeArgs4(filler(5000)), symlinkArgs4("l", "target")).bytes())
	want := compoundResHeader + (8 + 36) + 8 + (8 + 16) + (8 + changeInfoSize + bitmapMax)
	if e.Inline != want || e.NItems != 0 || e.Unpredictable {
		t.Fatalf("%+v, want inline %d", e, want)
	}
}

func TestNFS4EstimateGetattr(t *testing.T) {
	// type, change, size, fsid, fileid, mode, numlinks, owner, owner_group,
	// space_used, time_access, time_metadata, time_modify: all bounded.
	fixed := argOp(opGetattr, words4(2, 1<<1|1<<3|1<<4|1<<8|1<<20, 1<<(33-32)|1<<(35-32)|1<<(36-32)|1<<(37-32)|1<<(45-32)|1<<(47-32)|1<<(52-32)|1<<(53-32)))
	e := estimate4(t, nfs4Compound("", 0, putfhArgs4, fixed).bytes())
	attrs := 4 + 8 + 8 + 16 + 8 + 4 + 4 + 2*nameMax + 8 + 3*12
	want := compoundResHeader + 8 + 8 + bitmapMax + 4 + attrs
	if e.Inline != want || e.Unpredictable {
		t.Fatalf("%+v, want inline %d", e, want)
	}
	for _, attr := range []int{12, 24, 32, 58, 59, 61, 62, 63, 64, 67, 68, 80, 83, 200} {
		ga := argOp(opGetattr, func(m *xmsg) {
			words := attr/32 + 1
			m.u32(uint32(words))
			for w := range words {
				if w == attr/32 {
					m.u32(1 << (attr % 32))
				} else {
					m.u32(0)
				}
			}
		})
		if e := estimate4(t, nfs4Compound("", 0, putfhArgs4, ga).bytes()); !e.Unpredictable {
			t.Errorf("GETATTR of attribute %d: %+v, want unpredictable", attr, e)
		}
	}
}

func TestNFS4EstimateBoundedByArgs(t *testing.T) {
	tests := []struct {
		name          string
		op            nfs4Field
		result        int
		unpredictable bool
	}{
		{"READDIR maxcount", argOp(opReaddir, all4(hypers4(0), verifier4, words4(4096, 32768), bitmap4)), 32768 + verifierSize, false},
		{"LISTXATTRS maxcount", argOp(opListXattrs, all4(hypers4(0), words4(65536))), 65536 + 16, false},
		{"LAYOUTGET maxcount", argOp(opLayoutGet, all4(bool4(false), words4(1, 2), hypers4(0, 1, 1), stateid4, words4(3000))), 4 + stateidSize + 3000, false},
		{"LAYOUTGET no maxcount", argOp(opLayoutGet, all4(bool4(false), words4(1, 2), hypers4(0, 1, 1), stateid4, words4(0))), 4 + stateidSize + 4096, true},
		{"GETDEVICEINFO maxcount", argOp(opGetDeviceInfo, all4(deviceid4, words4(1, 2000), bitmap4)), 8 + 2000 + bitmapMax, false},
		{"GETDEVICELIST", argOp(opGetDeviceList, all4(words4(1, 10), hypers4(0), verifier4)), 8 + 8 + 4 + 160 + 4, false},
		{"TEST_STATEID", argOp(opTestStateID, all4(words4(3), stateid4, stateid4, stateid4)), 4 + 12, false},
		{"GETXATTR", argOp(opGetXattr, str4("user.x")), 4 + 65536, true},
		{"READ_PLUS", argOp(opReadPlus, all4(stateid4, hypers4(0), words4(4095))), 24 + 4096, true},
		{"LOCK", argOp(opLock, all4(words4(1), bool4(false), hypers4(0, 1), bool4(false), stateid4, words4(1))), lockDeniedMax, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := estimate4(t, nfs4Compound("", 0, tt.op).bytes())
			if want := compoundResHeader + 8 + tt.result; e.Inline != want || e.Unpredictable != tt.unpredictable || e.NItems != 0 {
				t.Fatalf("%+v, want inline %d unpredictable %v", e, want, tt.unpredictable)
			}
		})
	}
}

// TestNFS4EstimateCoversResults: for each operation, every result the
// tables encode (error arms included) fits the estimate for a COMPOUND
// of that operation, unless the estimate says it is unpredictable.
func TestNFS4EstimateCoversResults(t *testing.T) {
	for _, rc := range nfs4ResCases {
		for _, ac := range nfs4ArgCases {
			if ac.op != rc.op {
				continue
			}
			e := estimate4(t, nfs4Compound("", 2, argOp(ac.op, ac.args)).bytes())
			if e.Unpredictable {
				continue
			}
			reply := nfs4ReplyHeader + nfs4CompoundRes(rc.status, "", resOp(rc.op, rc.status, rc.res)).len()
			r := walkWhole(t, nfs4ReplyTarget, nfs4CompoundRes(rc.status, "", resOp(rc.op, rc.status, rc.res)).bytes())
			for _, it := range r.items {
				reply -= it.Length + it.Pad
				if it.Length > e.ItemMax[it.Index] {
					t.Errorf("%s after %s: item of %d > %d", rc.name, ac.name, it.Length, e.ItemMax[it.Index])
				}
			}
			if reply > e.Inline {
				t.Errorf("%s after %s: %d bytes inline > estimate %d", rc.name, ac.name, reply, e.Inline)
			}
		}
	}
}

func TestNFS4EstimateNull(t *testing.T) {
	e, err := EstimateReply(ProgNFS, 4, nfs4ProcNull, nil)
	if err != nil || e.Inline != nfs4MinReply || e.NItems != 0 || e.Unpredictable {
		t.Fatalf("%+v %v", e, err)
	}
}

// Arguments that do not decode, cut short or malformed, are an error
// naming the operation.
func TestNFS4EstimateBadArgs(t *testing.T) {
	good := nfs4Compound("t", 1, sequenceArgs4, putfhArgs4, writeArgs4(filler(9)), getattrArgs4).bytes()
	for n := range len(good) {
		_, err := EstimateReply(ProgNFS, 4, nfs4ProcCompound, good[:n])
		var we *WalkError
		if !errors.As(err, &we) || !errors.Is(err, ErrGarbage) || we.Offset < 0 || we.Offset > n {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
	_, err := EstimateReply(ProgNFS, 4, nfs4ProcCompound, nfs4Compound("", 1, putfhArgs4, argOp(80, nil)).bytes())
	var we *WalkError
	if !errors.As(err, &we) || we.Op != 1 || we.Offset != 12+36 {
		t.Fatalf("unknown op: %v", err)
	}
}

func TestNFS4EstimateAllocs(t *testing.T) {
	args := nfs4Compound("", 1, sequenceArgs4, putfhArgs4, readArgs4(1<<20), getattrArgs4).bytes()
	if a := testing.AllocsPerRun(100, func() { _, _ = EstimateReply(ProgNFS, 4, 1, args) }); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}
