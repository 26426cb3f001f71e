package ulb

import (
	"errors"
	"testing"
)

var nfs2Handle = filler(nfs2Fh)

func nfs2WriteCall(data []byte) *xmsg {
	return newXmsg().fixed(nfs2Handle).u32(0).u32(8192).u32(uint32(len(data))).opaque(data)
}

func nfs2SymlinkCall(name, path string) *xmsg {
	// sattr: mode, uid, gid, size, atime, mtime; -1 means "do not set".
	return newXmsg().fixed(nfs2Handle).str(name).str(path).
		u32(0o777).u32(^uint32(0)).u32(^uint32(0)).u32(^uint32(0)).u64(^uint64(0)).u64(^uint64(0))
}

func nfs2ReadReply(data []byte) *xmsg {
	return newXmsg().u32(0).zeros(nfs2Fattr).opaque(data)
}

func TestNFS2Walk(t *testing.T) {
	call := func(proc uint32) walkTarget { return walkTarget{Call, ProgNFS, 2, proc} }
	reply := func(proc uint32) walkTarget { return walkTarget{Reply, ProgNFS, 2, proc} }
	cases := []walkCase{
		{
			name:  "write",
			t:     call(nfs2Write),
			msg:   nfs2WriteCall(filler(8191)).bytes(),
			items: []Item{{Kind: KindWriteData, LenOffset: 44, Offset: 48, Length: 8191, Pad: 1, Op: nfs2Write}},
			end:   "done",
		},
		{
			name:  "write NFS_MAXDATA",
			t:     call(nfs2Write),
			msg:   nfs2WriteCall(filler(nfs2MaxData)).bytes(),
			items: []Item{{Kind: KindWriteData, LenOffset: 44, Offset: 48, Length: nfs2MaxData, Op: nfs2Write}},
			end:   "done",
		},
		{
			name: "write beyond NFS_MAXDATA",
			t:    call(nfs2Write),
			msg:  nfs2WriteCall(filler(nfs2MaxData + 1)).bytes(),
			end:  "error",
		},
		{
			name: "write truncated in the handle",
			t:    call(nfs2Write),
			msg:  nfs2Handle[:20],
			end:  "need 48",
		},
		{
			// sattr after the path is not looked at.
			name:  "symlink",
			t:     call(nfs2Symlink),
			msg:   nfs2SymlinkCall("l", "/a/b/c").bytes(),
			items: []Item{{Kind: KindSymlinkPath, LenOffset: 40, Offset: 44, Length: 6, Pad: 2, Op: nfs2Symlink}},
			end:   "done",
		},
		{
			name: "symlink name beyond NFS_MAXNAMLEN",
			t:    call(nfs2Symlink),
			msg:  nfs2SymlinkCall(string(filler(256)), "x").bytes(),
			end:  "error",
		},
		{
			name: "symlink path beyond NFS_MAXPATHLEN",
			t:    call(nfs2Symlink),
			msg:  nfs2SymlinkCall("l", string(filler(1025))).bytes(),
			end:  "error",
		},
		{
			name:  "read",
			t:     reply(nfs2Read),
			msg:   nfs2ReadReply(filler(1000)).bytes(),
			items: []Item{{Kind: KindReadData, LenOffset: 72, Offset: 76, Length: 1000, Op: nfs2Read}},
			end:   "done",
		},
		{
			name: "read NFSERR_ACCES",
			t:    reply(nfs2Read),
			msg:  newXmsg().u32(13).bytes(),
			end:  "done",
		},
		{
			name: "read truncated in fattr",
			t:    reply(nfs2Read),
			msg:  nfs2ReadReply(nil).bytes()[:30],
			end:  "need 76",
		},
		{
			name:  "readlink",
			t:     reply(nfs2Readlink),
			msg:   newXmsg().u32(0).str("x/y").bytes(),
			items: []Item{{Kind: KindReadlinkPath, LenOffset: 4, Offset: 8, Length: 3, Pad: 1, Op: nfs2Readlink}},
			end:   "done",
		},
		{
			name: "readlink beyond NFS_MAXPATHLEN",
			t:    reply(nfs2Readlink),
			msg:  newXmsg().u32(0).u32(2000).bytes(),
			end:  "error",
		},
		{name: "lookup call", t: call(nfs2Lookup), msg: nil, end: "done"},
		{name: "statfs reply", t: reply(nfs2Statfs), msg: []byte{0}, end: "done"},
		{name: "write reply", t: reply(nfs2Write), msg: nil, end: "done"},
	}
	runWalkCases(t, cases)
}

// Estimates are checked against the Linux client's reply sizes (fs/nfs/
// nfs2xdr.c NFS_*res_sz in words, without the page padding word).
func TestNFS2Estimate(t *testing.T) {
	const hdr = 24
	readArgs := newXmsg().fixed(nfs2Handle).u32(0).u32(4096).u32(0).bytes()
	bigRead := newXmsg().fixed(nfs2Handle).u32(0).u32(1 << 20).u32(0).bytes()
	readdirArgs := newXmsg().fixed(nfs2Handle).u32(0).u32(4096).bytes()
	cases := []struct {
		proc    uint32
		args    []byte
		inline  int
		kind    Kind
		itemMax int
	}{
		{nfs2Null, nil, 32, KindNone, 0},
		{nfs2Getattr, nil, hdr + 4*18, KindNone, 0},
		{nfs2Setattr, nil, hdr + 4*18, KindNone, 0},
		{nfs2Root, nil, 32, KindNone, 0},
		{nfs2Lookup, nil, hdr + 4*26, KindNone, 0},
		{nfs2Readlink, nil, hdr + 4*2, KindReadlinkPath, 1024},
		{nfs2Read, readArgs, hdr + 4*19, KindReadData, 4096},
		{nfs2Read, bigRead, hdr + 4*19, KindReadData, 8192},
		{nfs2Write, nil, hdr + 4*18, KindNone, 0},
		{nfs2Create, nil, hdr + 4*26, KindNone, 0},
		{nfs2Remove, nil, 32, KindNone, 0},
		{nfs2Symlink, nil, 32, KindNone, 0},
		{nfs2Mkdir, nil, hdr + 4*26, KindNone, 0},
		{nfs2Readdir, readdirArgs, hdr + 4*1 + 4096, KindNone, 0},
		{nfs2Statfs, nil, hdr + 4*6, KindNone, 0},
		{18, nil, 32, KindNone, 0},
	}
	for _, c := range cases {
		e, err := EstimateReply(ProgNFS, 2, c.proc, c.args)
		if err != nil {
			t.Fatalf("%s: %v", ProcName(ProgNFS, 2, c.proc), err)
		}
		wantN := 0
		if c.kind != KindNone {
			wantN = 1
		}
		if e.Inline != c.inline || e.Unpredictable || e.NItems != wantN || e.ItemKind[0] != c.kind || e.ItemMax[0] != c.itemMax {
			t.Errorf("%s: %+v, want inline %d, %d item %v max %d", ProcName(ProgNFS, 2, c.proc), e, c.inline, wantN, c.kind, c.itemMax)
		}
	}
	for _, proc := range []uint32{nfs2Read, nfs2Readdir} {
		if _, err := EstimateReply(ProgNFS, 2, proc, nfs2Handle); !errors.Is(err, ErrGarbage) {
			t.Errorf("%s with truncated args: error %v, want ErrGarbage", ProcName(ProgNFS, 2, proc), err)
		}
	}
}
