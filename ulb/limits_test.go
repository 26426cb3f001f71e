package ulb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

var testLimits = IOLimits{MaxRead: 1 << 20, MaxWrite: 1 << 20, MaxRequest: 1<<20 + 4096, MaxResponse: 1<<20 + 4096}

// fsinfo3Res is FSINFO3resok with attributes, the given rt/wt values.
func fsinfo3Res(rtmax, rtpref, wtmax, wtpref uint32) []byte {
	m := newXmsg().u32(0).boolean(true).raw(filler(84))
	m.u32(rtmax).u32(rtpref).u32(4096).u32(wtmax).u32(wtpref).u32(4096).u32(8192)
	return m.u64(1 << 62).u32(0).u32(1).u32(0x1b).bytes()
}

// getattrLimits4 is a GETATTR result holding every attribute up to
// maxwrite that has a variable size (acl, filehandle, fs_locations) and
// a few fixed ones, then mode (33, in the second word).
func getattrLimits4(maxread, maxwrite uint64) nfs4Field {
	vals := newXmsg()
	vals.u32(1)                                    // type
	vals.u64(7)                                    // size
	vals.u32(1).u32(0).u32(0).u32(6).str("OWNER@") // acl: one ace
	vals.opaque(filler(28))                        // filehandle
	vals.u32(2).str("exp").str("x")                // fs_root
	vals.u32(1).u32(1).str("srv").u32(1).str("r")  // one location
	vals.u64(maxread).u64(maxwrite).u32(0o644)     // maxread, maxwrite, mode
	mask0 := uint32(1<<1 | 1<<4 | 1<<12 | 1<<19 | 1<<24 | 1<<attrMaxRead | 1<<attrMaxWrite)
	body := vals.bytes()
	return resOp(opGetattr, 0, func(m *xmsg) { m.u32(2).u32(mask0).u32(1 << 1).opaque(body) })
}

func createSessionRes4(req, resp uint32) nfs4Field {
	return resOp(opCreateSession, 0, func(m *xmsg) {
		m.zeros(16).u32(1).u32(0)
		m.u32(0).u32(req).u32(resp).u32(resp).u32(16).u32(64).u32(0) // fore
		m.u32(0).u32(4096).u32(4096).u32(0).u32(2).u32(16).u32(0)    // back
	})
}

func TestCapLimits(t *testing.T) {
	big := uint64(64 << 20)
	for _, c := range []struct {
		name       string
		vers, proc uint32
		in, want   []byte
		n          int
	}{
		{"fsinfo3", 3, nfs3Fsinfo, fsinfo3Res(64<<20, 64<<20, 64<<20, 1<<20+1), fsinfo3Res(1<<20, 1<<20, 1<<20, 1<<20), 4},
		{"fsinfo3 small", 3, nfs3Fsinfo, fsinfo3Res(32768, 32768, 65536, 4096), fsinfo3Res(32768, 32768, 65536, 4096), 0},
		{"fsinfo3 error", 3, nfs3Fsinfo, newXmsg().u32(70).boolean(false).bytes(), newXmsg().u32(70).boolean(false).bytes(), 0},
		{"getattr4", 4, 1,
			nfs4CompoundRes(0, "t", sequenceRes4, putfhRes4, getattrLimits4(big, big)).bytes(),
			nfs4CompoundRes(0, "t", sequenceRes4, putfhRes4, getattrLimits4(1<<20, 1<<20)).bytes(), 2},
		{"getattr4 after a READ", 4, 1,
			nfs4CompoundRes(0, "", putfhRes4, readRes4(false, filler(9)), getattrLimits4(big, 4096)).bytes(),
			nfs4CompoundRes(0, "", putfhRes4, readRes4(false, filler(9)), getattrLimits4(1<<20, 4096)).bytes(), 1},
		{"getattr4 other attributes", 4, 1,
			nfs4CompoundRes(0, "", putfhRes4, getattrRes4).bytes(),
			nfs4CompoundRes(0, "", putfhRes4, getattrRes4).bytes(), 0},
		{"create_session", 4, 1,
			nfs4CompoundRes(0, "", createSessionRes4(64<<20, 64<<20)).bytes(),
			nfs4CompoundRes(0, "", createSessionRes4(1<<20+4096, 1<<20+4096)).bytes(), 3},
		{"failed op ends", 4, 1,
			nfs4CompoundRes(2, "", resOp(opPutFH, 2, nil), getattrLimits4(big, big)).bytes(),
			nfs4CompoundRes(2, "", resOp(opPutFH, 2, nil), getattrLimits4(big, big)).bytes(), 0},
		{"read3 untouched", 3, nfs3Read, fsinfo3Res(64<<20, 0, 0, 0), fsinfo3Res(64<<20, 0, 0, 0), 0},
	} {
		b := bytes.Clone(c.in)
		n, err := CapLimits(ProgNFS, c.vers, c.proc, b, &testLimits)
		if err != nil || n != c.n || !bytes.Equal(b, c.want) {
			t.Errorf("%s: %d lowered (%v), want %d; equal %v", c.name, n, err, c.n, bytes.Equal(b, c.want))
		}
		if n, err := CapLimits(ProgNFS, c.vers, c.proc, b, &testLimits); n != 0 || err != nil {
			t.Errorf("%s: second pass lowered %d (%v)", c.name, n, err)
		}
	}
	// Truncated and garbage replies: an error, nothing out of bounds.
	full := nfs4CompoundRes(0, "", getattrLimits4(big, big)).bytes()
	for i := range len(full) {
		if _, err := CapLimits(ProgNFS, 4, 1, bytes.Clone(full[:i]), &testLimits); !errors.Is(err, ErrGarbage) {
			t.Fatalf("truncated at %d: %v", i, err)
		}
	}
	if n := testing.AllocsPerRun(100, func() { CapLimits(ProgNFS, 4, 1, full, &testLimits) }); n != 0 {
		t.Errorf("CapLimits allocates %v times", n)
	}
}

// FuzzCapLimits: no panic, nothing but the advertised values changes
// (same length; a second pass lowers nothing), and a value is only ever
// lowered.
func FuzzCapLimits(f *testing.F) {
	big := uint64(64 << 20)
	f.Add(uint8(3), fsinfo3Res(64<<20, 64<<20, 64<<20, 64<<20))
	f.Add(uint8(4), nfs4CompoundRes(0, "t", sequenceRes4, putfhRes4, getattrLimits4(big, big)).bytes())
	f.Add(uint8(4), nfs4CompoundRes(0, "", createSessionRes4(64<<20, 64<<20), readRes4(true, filler(6))).bytes())
	for _, s := range nfs4FuzzSeeds(Reply) {
		f.Add(uint8(4), s)
	}
	f.Fuzz(func(t *testing.T, vers uint8, msg []byte) {
		v, proc := uint32(4), uint32(nfs4ProcCompound)
		if vers&1 == 1 {
			v, proc = 3, nfs3Fsinfo
		}
		b := bytes.Clone(msg)
		n, err := CapLimits(ProgNFS, v, proc, b, &testLimits)
		if err != nil && !errors.Is(err, ErrGarbage) {
			t.Fatalf("error %v does not wrap ErrGarbage", err)
		}
		if len(b) != len(msg) {
			t.Fatalf("length changed")
		}
		changed := 0
		for i := 0; i+4 <= len(b); i += 4 {
			if o, w := binary.BigEndian.Uint32(msg[i:]), binary.BigEndian.Uint32(b[i:]); o != w {
				changed++
				if w > o {
					// A uint64's low word may grow when the high word drops.
					if i < 4 || binary.BigEndian.Uint32(b[i-4:]) >= binary.BigEndian.Uint32(msg[i-4:]) {
						t.Fatalf("word %d raised from %d to %d", i/4, o, w)
					}
				}
			}
		}
		if n == 0 && changed != 0 {
			t.Fatalf("%d words changed, none reported", changed)
		}
		if err == nil {
			if n2, err2 := CapLimits(ProgNFS, v, proc, b, &testLimits); n2 != 0 || err2 != nil {
				t.Fatalf("second pass lowered %d (%v)", n2, err2)
			}
		}
	})
}
