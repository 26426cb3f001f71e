package ulb

import (
	"errors"
	"strings"
	"testing"
)

// nfs3Fh28 is a 28-byte file handle, the size the Linux server hands out
// for ext4 files.
var nfs3Fh28 = filler(28)

func fattr3(m *xmsg) { m.zeros(nfs3Fattr) }

func postOpAttr(present bool) func(*xmsg) {
	return func(m *xmsg) {
		m.boolean(present)
		if present {
			fattr3(m)
		}
	}
}

// sattr3 builds a sattr3 with mode set, uid/gid/size unset, atime set to
// the client's time and mtime to the server's.
func sattr3(m *xmsg) {
	m.boolean(true).u32(0o777)
	m.boolean(false).boolean(false).boolean(false)
	m.u32(2).u32(1700000000).u32(5) // SET_TO_CLIENT_TIME
	m.u32(1)                        // SET_TO_SERVER_TIME
}

func nfs3WriteCall(fh, data []byte) *xmsg {
	return newXmsg().opaque(fh).u64(4096).u32(uint32(len(data))).u32(2).opaque(data)
}

func nfs3SymlinkCall(name, path string) *xmsg {
	return newXmsg().opaque(nfs3Fh28).str(name).then(sattr3).str(path)
}

func nfs3ReadReply(attrs bool, data []byte) *xmsg {
	return newXmsg().u32(0).then(postOpAttr(attrs)).u32(uint32(len(data))).boolean(true).opaque(data)
}

type walkCase struct {
	name  string
	t     walkTarget
	msg   []byte
	items []Item // absolute offsets; Op and Index are checked too
	end   string // "done", "need N", "error" (prefix), "body N"
}

func runWalkCases(t *testing.T, cases []walkCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := checkSplits(t, c.t, c.msg)
			if c.end == "error" {
				if !strings.HasPrefix(got.end, "error: ") {
					t.Fatalf("end %q, want an error", got.end)
				}
			} else if got.end != c.end {
				t.Fatalf("end %q, want %q", got.end, c.end)
			}
			if len(got.items) != len(c.items) {
				t.Fatalf("items %v, want %v", got, walkResult{items: c.items, end: c.end})
			}
			for i := range c.items {
				if got.items[i] != c.items[i] {
					t.Fatalf("item %d: %+v, want %+v", i, got.items[i], c.items[i])
				}
			}
		})
	}
}

func TestNFS3Walk(t *testing.T) {
	call := func(proc uint32) walkTarget { return walkTarget{Call, ProgNFS, 3, proc} }
	reply := func(proc uint32) walkTarget { return walkTarget{Reply, ProgNFS, 3, proc} }
	// WRITE: fh (4+28) offset (8) count (4) stable (4) -> length word at 48.
	const wAt = 4 + 28 + 8 + 4 + 4
	// SYMLINK: fh (32), name "lnk" (8), sattr3 (8+4+4+4+4+8+4) -> 76.
	const sAt = 32 + 8 + 36
	// READ: status, post_op_attr with fattr3, count, eof -> 4+88+8 = 100.
	const rAt = 4 + 4 + 84 + 4 + 4
	cases := []walkCase{
		{
			name:  "write",
			t:     call(nfs3Write),
			msg:   nfs3WriteCall(nfs3Fh28, filler(5)).bytes(),
			items: []Item{{Kind: KindWriteData, LenOffset: wAt, Offset: wAt + 4, Length: 5, Pad: 3, Op: nfs3Write}},
			end:   "done",
		},
		{
			name:  "write empty",
			t:     call(nfs3Write),
			msg:   nfs3WriteCall(nfs3Fh28, nil).bytes(),
			items: []Item{{Kind: KindWriteData, LenOffset: wAt, Offset: wAt + 4, Op: nfs3Write}},
			end:   "done",
		},
		{
			name:  "write 64-byte handle",
			t:     call(nfs3Write),
			msg:   nfs3WriteCall(filler(64), filler(8)).bytes(),
			items: []Item{{Kind: KindWriteData, LenOffset: 68 + 16, Offset: 68 + 20, Length: 8, Op: nfs3Write}},
			end:   "done",
		},
		{
			name: "write 65-byte handle",
			t:    call(nfs3Write),
			msg:  nfs3WriteCall(filler(65), filler(8)).bytes(),
			end:  "error",
		},
		{
			name: "write truncated before data length",
			t:    call(nfs3Write),
			msg:  nfs3WriteCall(nfs3Fh28, filler(8)).bytes()[:wAt+2],
			end:  "need 52",
		},
		{
			// Only the length word is needed: the caller lands the body.
			name:  "write body not yet here",
			t:     call(nfs3Write),
			msg:   nfs3WriteCall(nfs3Fh28, filler(100)).bytes()[:wAt+4],
			items: []Item{{Kind: KindWriteData, LenOffset: wAt, Offset: wAt + 4, Length: 100, Op: nfs3Write}},
			end:   "body 152",
		},
		{
			name:  "symlink",
			t:     call(nfs3Symlink),
			msg:   nfs3SymlinkCall("lnk", "target/of/link").bytes(),
			items: []Item{{Kind: KindSymlinkPath, LenOffset: sAt, Offset: sAt + 4, Length: 14, Pad: 2, Op: nfs3Symlink}},
			end:   "done",
		},
		{
			name: "symlink bad time_how",
			t:    call(nfs3Symlink),
			msg: newXmsg().opaque(nfs3Fh28).str("lnk").
				boolean(false).boolean(false).boolean(false).boolean(false).u32(3).u32(0).str("t").bytes(),
			end: "error",
		},
		{
			name: "symlink bad set_it bool",
			t:    call(nfs3Symlink),
			msg:  newXmsg().opaque(nfs3Fh28).str("lnk").u32(2).zeros(64).bytes(),
			end:  "error",
		},
		{
			name: "symlink path too long",
			t:    call(nfs3Symlink),
			msg:  nfs3SymlinkCall("lnk", string(filler(nfs3MaxPath+1))).bytes(),
			end:  "error",
		},
		{
			name: "symlink name longer than the message",
			t:    call(nfs3Symlink),
			msg:  newXmsg().opaque(nfs3Fh28).u32(1 << 30).bytes(),
			end:  "need 1073741860", // handle 32, then the name: 4 + 2^30
		},
		{
			name:  "read",
			t:     reply(nfs3Read),
			msg:   nfs3ReadReply(true, filler(4093)).bytes(),
			items: []Item{{Kind: KindReadData, LenOffset: rAt, Offset: rAt + 4, Length: 4093, Pad: 3, Op: nfs3Read}},
			end:   "done",
		},
		{
			name:  "read without attributes",
			t:     reply(nfs3Read),
			msg:   nfs3ReadReply(false, filler(3)).bytes(),
			items: []Item{{Kind: KindReadData, LenOffset: 16, Offset: 20, Length: 3, Pad: 1, Op: nfs3Read}},
			end:   "done",
		},
		{
			name: "read NFS3ERR_IO",
			t:    reply(nfs3Read),
			msg:  newXmsg().u32(5).then(postOpAttr(true)).bytes(),
			end:  "done",
		},
		{
			name: "read bad eof",
			t:    reply(nfs3Read),
			msg:  newXmsg().u32(0).boolean(false).u32(3).u32(7).opaque(filler(3)).bytes(),
			end:  "error",
		},
		{
			name: "read bad attributes_follow",
			t:    reply(nfs3Read),
			msg:  newXmsg().u32(0).u32(0xffffffff).bytes(),
			end:  "error",
		},
		{
			name: "read empty",
			t:    reply(nfs3Read),
			msg:  nil,
			end:  "need 4",
		},
		{
			name:  "readlink",
			t:     reply(nfs3Readlink),
			msg:   newXmsg().u32(0).then(postOpAttr(true)).str("../x").bytes(),
			items: []Item{{Kind: KindReadlinkPath, LenOffset: 92, Offset: 96, Length: 4, Op: nfs3Readlink}},
			end:   "done",
		},
		{
			name: "readlink NFS3ERR_STALE",
			t:    reply(nfs3Readlink),
			msg:  newXmsg().u32(70).then(postOpAttr(false)).bytes(),
			end:  "done",
		},
		{
			name: "readlink path too long",
			t:    reply(nfs3Readlink),
			msg:  newXmsg().u32(0).then(postOpAttr(false)).u32(nfs3MaxPath + 1).bytes(),
			end:  "error",
		},
		// No eligible items: the walk ends at once, whatever the bytes.
		{name: "getattr call", t: call(nfs3Getattr), msg: newXmsg().opaque(nfs3Fh28).bytes(), end: "done"},
		{name: "read call", t: call(nfs3Read), msg: nil, end: "done"},
		{name: "write reply", t: reply(nfs3Write), msg: []byte{1, 2, 3}, end: "done"},
		{name: "symlink reply", t: reply(nfs3Symlink), msg: nil, end: "done"},
		{name: "unknown proc", t: call(99), msg: nil, end: "done"},
	}
	runWalkCases(t, cases)
}

// TestNFS3WalkOffsets checks that error offsets are cumulative over the
// steps of a walk, so they point into the message, not into one slice.
func TestNFS3WalkErrorOffset(t *testing.T) {
	var w Walker
	if err := w.Reset(Call, ProgNFS, 3, nfs3Symlink); err != nil {
		t.Fatal(err)
	}
	msg := newXmsg().opaque(nfs3Fh28).str("lnk").u32(7).zeros(64).bytes()
	_, err := w.Next(msg)
	var we *WalkError
	if !errors.As(err, &we) || !errors.Is(err, ErrGarbage) {
		t.Fatalf("error %v, want a *WalkError", err)
	}
	if we.Offset != 40 || we.Op != -1 || we.Proc != nfs3Symlink {
		t.Fatalf("error %+v, want offset 40, op -1, proc SYMLINK", we)
	}
}

// Estimates are checked against the Linux client's reply sizes (fs/nfs/
// nfs3xdr.c NFS3_*res_sz, in 4-byte words, without the page padding word)
// plus the 24-byte reply header.
func TestNFS3Estimate(t *testing.T) {
	const hdr = 24
	readArgs := newXmsg().opaque(nfs3Fh28).u64(1 << 40).u32(1 << 20).bytes()
	readdirArgs := newXmsg().opaque(nfs3Fh28).u64(0).u64(0).u32(8192).bytes()
	readdirplusArgs := newXmsg().opaque(nfs3Fh28).u64(0).u64(0).u32(1024).u32(32768).bytes()
	tiny := newXmsg().opaque(nfs3Fh28).u64(0).u64(0).u32(0).bytes()
	cases := []struct {
		proc    uint32
		args    []byte
		inline  int
		kind    Kind
		itemMax int
	}{
		{nfs3Null, nil, 32, KindNone, 0}, // the PROG_MISMATCH floor
		{nfs3Getattr, nil, hdr + 4*22, KindNone, 0},
		{nfs3Setattr, nil, hdr + 4*30, KindNone, 0},
		{nfs3Lookup, nil, hdr + 4*62, KindNone, 0},
		{nfs3Access, nil, hdr + 4*24, KindNone, 0},
		{nfs3Readlink, nil, hdr + 4*24, KindReadlinkPath, 4096},
		{nfs3Read, readArgs, hdr + 4*26, KindReadData, 1 << 20},
		{nfs3Write, nil, hdr + 4*34, KindNone, 0},
		{nfs3Create, nil, hdr + 4*70, KindNone, 0},
		{nfs3Mkdir, nil, hdr + 4*70, KindNone, 0},
		{nfs3Symlink, nil, hdr + 4*70, KindNone, 0},
		{nfs3Mknod, nil, hdr + 4*70, KindNone, 0},
		{nfs3Remove, nil, hdr + 4*30, KindNone, 0},
		{nfs3Rmdir, nil, hdr + 4*30, KindNone, 0},
		{nfs3Rename, nil, hdr + 4*59, KindNone, 0},
		{nfs3Link, nil, hdr + 4*52, KindNone, 0},
		{nfs3Readdir, readdirArgs, hdr + 4*25 + 8192, KindNone, 0},
		{nfs3Readdir, tiny, hdr + 4*25 + 8, KindNone, 0},
		{nfs3Readdirplus, readdirplusArgs, hdr + 4*25 + 32768, KindNone, 0},
		{nfs3Fsstat, nil, hdr + 4*36, KindNone, 0},
		{nfs3Fsinfo, nil, hdr + 4*35, KindNone, 0},
		{nfs3Pathconf, nil, hdr + 4*29, KindNone, 0},
		{nfs3Commit, nil, hdr + 4*32, KindNone, 0},
		{22, nil, 32, KindNone, 0},
		{1 << 31, nil, 32, KindNone, 0},
	}
	for _, c := range cases {
		e, err := EstimateReply(ProgNFS, 3, c.proc, c.args)
		if err != nil {
			t.Fatalf("%s: %v", ProcName(ProgNFS, 3, c.proc), err)
		}
		if e.Inline != c.inline || e.Unpredictable {
			t.Errorf("%s: inline %d unpredictable %v, want %d", ProcName(ProgNFS, 3, c.proc), e.Inline, e.Unpredictable, c.inline)
		}
		wantN := 0
		if c.kind != KindNone {
			wantN = 1
		}
		if e.NItems != wantN || e.ItemKind[0] != c.kind || e.ItemMax[0] != c.itemMax {
			t.Errorf("%s: items %d %v %d, want %d %v %d", ProcName(ProgNFS, 3, c.proc), e.NItems, e.ItemKind[0], e.ItemMax[0], wantN, c.kind, c.itemMax)
		}
	}
}

func TestNFS3EstimateBadArgs(t *testing.T) {
	for _, c := range []struct {
		name string
		proc uint32
		args []byte
	}{
		{"read truncated", nfs3Read, newXmsg().opaque(nfs3Fh28).u64(0).bytes()},
		{"read no args", nfs3Read, nil},
		{"read huge handle", nfs3Read, newXmsg().opaque(filler(65)).u64(0).u32(1).bytes()},
		{"readdir truncated", nfs3Readdir, newXmsg().opaque(nfs3Fh28).u64(0).u64(0).bytes()},
		{"readdirplus missing maxcount", nfs3Readdirplus, newXmsg().opaque(nfs3Fh28).u64(0).u64(0).u32(1).bytes()},
	} {
		_, err := EstimateReply(ProgNFS, 3, c.proc, c.args)
		var we *WalkError
		if !errors.Is(err, ErrGarbage) || !errors.As(err, &we) || we.Prog != ProgNFS || we.Vers != 3 || we.Proc != c.proc {
			t.Errorf("%s: error %v, want a *WalkError for NFSv3 proc %d", c.name, err, c.proc)
		}
	}
}

// v23ItemKind is the kind of the eligible item of an NFSv2/v3 message.
func v23ItemKind(t walkTarget) Kind {
	switch {
	case t.dir == Call && (t.vers == 3 && t.proc == nfs3Write || t.vers == 2 && t.proc == nfs2Write):
		return KindWriteData
	case t.dir == Call && (t.vers == 3 && t.proc == nfs3Symlink || t.vers == 2 && t.proc == nfs2Symlink):
		return KindSymlinkPath
	case t.dir == Reply && (t.vers == 3 && t.proc == nfs3Read || t.vers == 2 && t.proc == nfs2Read):
		return KindReadData
	case t.dir == Reply && (t.vers == 3 && t.proc == nfs3Readlink || t.vers == 2 && t.proc == nfs2Readlink):
		return KindReadlinkPath
	}
	return KindNone
}

// TestNFS3Golden walks real NFSv3 and MOUNT messages (nfs-ganesha server,
// libnfs client) whole and split everywhere, and finds exactly the item
// tshark found.
func TestNFS3Golden(t *testing.T) {
	names := append(goldenNames(t, "nfs3-"), goldenNames(t, "mount3-")...)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			g := loadGolden(t, name)
			r := checkSplits(t, g.t, g.body)
			if r.end != "done" {
				t.Fatalf("walk ended %q", r.end)
			}
			lenAt, ok := g.sidecarInt(t, "data.len_word_offset")
			if !ok {
				if len(r.items) != 0 {
					t.Fatalf("items %v in a message without eligible data", r)
				}
				return
			}
			checkGoldenItem(t, g, r, lenAt, v23ItemKind(g.t), int(g.t.proc))
		})
	}
}

// TestNFS3GoldenEstimate checks each captured call's estimate against the
// reply the server really sent: the reply without its eligible items fits
// Inline, and each item fits its Write chunk.
func TestNFS3GoldenEstimate(t *testing.T) {
	checkGoldenEstimates(t, append(goldenNames(t, "nfs3-"), goldenNames(t, "mount3-")...))
}
