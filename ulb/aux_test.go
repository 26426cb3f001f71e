package ulb

import (
	"errors"
	"testing"
)

// auxVersions are the auxiliary program versions with a binding.
var auxVersions = []progVers{
	{ProgMount, 1}, {ProgMount, 2}, {ProgMount, 3},
	{ProgNLM, 1}, {ProgNLM, 3}, {ProgNLM, 4},
	{ProgNSM, 1},
	{ProgNFSACL, 2}, {ProgNFSACL, 3},
}

func TestAuxWalkEndsAtOnce(t *testing.T) {
	// An NLM LOCK call and a MOUNT MNT reply as real bytes would hold
	// them; the walkers must not look at them at all.
	nlmLock := newXmsg().opaque([]byte{1, 2, 3, 4}).boolean(true).boolean(true).
		str("client").opaque(filler(32)).opaque(filler(16)).u32(42).u32(0).u32(0).boolean(false).u32(1).bytes()
	for _, pv := range auxVersions {
		for proc := uint32(0); proc < 25; proc++ {
			for _, dir := range []Direction{Call, Reply} {
				for _, msg := range [][]byte{nil, nlmLock} {
					got := checkSplits(t, walkTarget{dir, pv.prog, pv.vers, proc}, msg)
					if got.end != "done" || len(got.items) != 0 {
						t.Fatalf("%d/%d proc %d: %v, want done at once", pv.prog, pv.vers, proc, got)
					}
				}
			}
		}
	}
}

func TestAuxUnsupportedVersions(t *testing.T) {
	for _, pv := range []progVers{{ProgMount, 4}, {ProgNLM, 2}, {ProgNLM, 5}, {ProgNSM, 2}, {ProgNFSACL, 1}, {ProgNFSACL, 4}, {100000, 2}} {
		if Supported(pv.prog, pv.vers) {
			t.Errorf("%d/%d is supported", pv.prog, pv.vers)
		}
		var w Walker
		if err := w.Reset(Call, pv.prog, pv.vers, 0); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%d/%d: Reset gave %v", pv.prog, pv.vers, err)
		}
		if _, err := EstimateReply(pv.prog, pv.vers, 0, nil); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%d/%d: EstimateReply gave %v", pv.prog, pv.vers, err)
		}
	}
	for _, pv := range auxVersions {
		if !Supported(pv.prog, pv.vers) {
			t.Errorf("%d/%d is not supported", pv.prog, pv.vers)
		}
	}
}

func TestAuxEstimate(t *testing.T) {
	const hdr = 24
	// One ACL at Linux's NFS_ACL_MAX_ENTRIES: two count words, 3 words an
	// entry (include/linux/nfsacl.h NFSACL_MAXWORDS is two of these).
	const acl = 4 * (2 + 3*1024)
	cases := []struct {
		prog, vers, proc uint32
		inline           int
		unpredictable    bool
	}{
		{ProgMount, 1, mountNull, 32, false},
		{ProgMount, 1, mountMnt, hdr + 4 + 32, false},
		{ProgMount, 1, mountDump, hdr + 64<<10, true},
		{ProgMount, 1, mountUmnt, 32, false},
		{ProgMount, 1, mountExport, hdr + 64<<10, true},
		{ProgMount, 1, mountExportall, hdr + 64<<10, true},
		{ProgMount, 1, mountPathconf, 32, false}, // not in version 1
		{ProgMount, 2, mountPathconf, hdr + 40, false},
		{ProgMount, 3, mountMnt, hdr + 4 + 68 + 4 + 4*12, true},
		{ProgMount, 3, mountExportall, 32, false}, // not in version 3
		{ProgNLM, 1, nlmTest, hdr + 1028 + 4 + 4 + 4 + 1028 + 8, false},
		{ProgNLM, 4, nlmTest, hdr + 1028 + 4 + 4 + 4 + 1028 + 16, false},
		{ProgNLM, 4, nlmLock, hdr + 1028 + 4, false},
		{ProgNLM, 3, nlmGranted, hdr + 1028 + 4, false},
		{ProgNLM, 4, nlmTestMsg, 32, false},
		{ProgNLM, 4, nlmGrantedRes, 32, false},
		{ProgNLM, 3, nlmShare, hdr + 1028 + 8, false},
		{ProgNLM, 1, nlmShare, 32, false}, // not in version 1
		{ProgNLM, 4, nlmNmLock, hdr + 1028 + 4, false},
		{ProgNLM, 4, nlmFreeAll, 32, false},
		{ProgNSM, 1, nsmStat, 32, false},
		{ProgNSM, 1, nsmMon, 32, false},
		{ProgNSM, 1, 6, 32, false},
		{ProgNFSACL, 2, aclGetacl, hdr + 4 + 68 + 4 + 2*acl, true},
		{ProgNFSACL, 2, aclSetacl, hdr + 4 + 68, false},
		{ProgNFSACL, 2, aclGetattr, hdr + 4 + 68, false},
		{ProgNFSACL, 2, aclAccess, hdr + 4 + 68 + 4, false},
		{ProgNFSACL, 3, aclGetacl, hdr + 4 + 88 + 4 + 2*acl, true},
		{ProgNFSACL, 3, aclSetacl, hdr + 4 + 88, false},
		{ProgNFSACL, 3, aclAccess, 32, false}, // not in version 3
	}
	for _, c := range cases {
		e, err := EstimateReply(c.prog, c.vers, c.proc, nil)
		if err != nil {
			t.Fatalf("%d/%d/%s: %v", c.prog, c.vers, ProcName(c.prog, c.vers, c.proc), err)
		}
		if e.Inline != c.inline || e.Unpredictable != c.unpredictable || e.NItems != 0 {
			t.Errorf("%d/%d/%s: %+v, want inline %d unpredictable %v", c.prog, c.vers, ProcName(c.prog, c.vers, c.proc), e, c.inline, c.unpredictable)
		}
	}
}

func TestProcName(t *testing.T) {
	for _, c := range []struct {
		prog, vers, proc uint32
		want             string
	}{
		{ProgNFS, 2, 0, "NULL"},
		{ProgNFS, 2, 7, "WRITECACHE"},
		{ProgNFS, 2, 17, "STATFS"},
		{ProgNFS, 2, 18, "proc18"},
		{ProgNFS, 3, 6, "READ"},
		{ProgNFS, 3, 17, "READDIRPLUS"},
		{ProgNFS, 3, 21, "COMMIT"},
		{ProgNFS, 3, 22, "proc22"},
		{ProgNFS, 4, 1, "COMPOUND"},
		{ProgNFS, 4, 2, "proc2"},
		{ProgNFS, 5, 0, "proc0"},
		{ProgMount, 1, 6, "EXPORTALL"},
		{ProgMount, 1, 7, "proc7"},
		{ProgMount, 2, 7, "PATHCONF"},
		{ProgMount, 3, 1, "MNT"},
		{ProgMount, 3, 6, "proc6"},
		{ProgNLM, 1, 15, "GRANTED_RES"},
		{ProgNLM, 1, 20, "proc20"},
		{ProgNLM, 3, 17, "proc17"},
		{ProgNLM, 4, 20, "SHARE"},
		{ProgNLM, 4, 23, "FREE_ALL"},
		{ProgNLM, 4, 24, "proc24"},
		{ProgNSM, 1, 6, "NOTIFY"},
		{ProgNSM, 1, 7, "proc7"},
		{ProgNFSACL, 2, 4, "ACCESS"},
		{ProgNFSACL, 3, 2, "SETACL"},
		{ProgNFSACL, 3, 3, "proc3"},
		{100000, 2, 3, "proc3"},
		{ProgNFS, 3, 1 << 31, "proc2147483648"},
	} {
		if got := ProcName(c.prog, c.vers, c.proc); got != c.want {
			t.Errorf("ProcName(%d, %d, %d) = %q, want %q", c.prog, c.vers, c.proc, got, c.want)
		}
	}
	// Every procedure an estimator knows has a name.
	for _, pv := range append(auxVersions, progVers{ProgNFS, 2}, progVers{ProgNFS, 3}) {
		for proc := uint32(0); proc < 24; proc++ {
			e, _ := EstimateReply(pv.prog, pv.vers, proc, make([]byte, 128))
			if e.Inline > 32 && procName(pv.prog, pv.vers, proc) == "" {
				t.Errorf("%d/%d proc %d has an estimate but no name", pv.prog, pv.vers, proc)
			}
		}
	}
}

// ProcName of a known procedure is a metrics label on every RPC: it must
// not allocate.
func TestProcNameAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = ProcName(ProgNFS, 3, nfs3Read) }); n != 0 {
		t.Fatalf("ProcName allocates %v times", n)
	}
}
