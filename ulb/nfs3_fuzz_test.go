package ulb

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// nfs3Seeds are well-formed and broken NFSv3 messages for the fuzzer.
func nfs3Seeds() []fuzzSeed {
	return []fuzzSeed{
		{false, nfs3Write, nfs3WriteCall(nfs3Fh28, filler(13)).bytes()},
		{false, nfs3Write, nfs3WriteCall(filler(64), nil).bytes()},
		{false, nfs3Symlink, nfs3SymlinkCall("lnk", "../target").bytes()},
		{false, nfs3Symlink, newXmsg().opaque(nfs3Fh28).str("l").u32(0).u32(0).u32(0).u32(0).u32(2).u64(1).u32(2).u64(2).str("t").bytes()},
		{false, nfs3Read, newXmsg().opaque(nfs3Fh28).u64(0).u32(65536).bytes()},
		{false, nfs3Readdirplus, newXmsg().opaque(nfs3Fh28).u64(0).u64(0).u32(1024).u32(32768).bytes()},
		{true, nfs3Read, nfs3ReadReply(true, filler(100)).bytes()},
		{true, nfs3Read, nfs3ReadReply(false, nil).bytes()},
		{true, nfs3Read, newXmsg().u32(5).then(postOpAttr(true)).bytes()},
		{true, nfs3Readlink, newXmsg().u32(0).then(postOpAttr(true)).str("/x/y/z").bytes()},
		{true, nfs3Getattr, newXmsg().u32(0).then(fattr3).bytes()},
	}
}

// goldenSeeds returns the bodies of the real captures whose names start
// with prefix (none when the captures are absent).
func goldenSeeds(tb testing.TB, prefix string) []fuzzSeed {
	files, _ := filepath.Glob(filepath.Join(goldenDir, prefix+"*.bin"))
	var seeds []fuzzSeed
	for _, f := range files {
		g := loadGolden(tb, strings.TrimSuffix(filepath.Base(f), ".bin"))
		seeds = append(seeds, fuzzSeed{g.t.dir == Reply, g.t.proc, g.body})
	}
	return seeds
}

type fuzzSeed struct {
	reply bool
	proc  uint32
	msg   []byte
}

func TestWriteNFS3Corpus(t *testing.T) {
	for i, s := range nfs3Seeds() {
		writeCorpus(t, "FuzzNFS3Walk", fmt.Sprintf("seed-%02d", i), s.reply, s.proc, s.msg)
	}
	for i, s := range goldenSeeds(t, "nfs3-") {
		writeCorpus(t, "FuzzNFS3Walk", fmt.Sprintf("golden-%02d", i), s.reply, s.proc, s.msg)
	}
}

// FuzzNFS3Walk: no panic, the Walker contract at every step, the same
// items however the message is split, and sane estimates.
func FuzzNFS3Walk(f *testing.F) {
	for _, s := range append(nfs3Seeds(), goldenSeeds(f, "nfs3-")...) {
		f.Add(s.reply, s.proc, s.msg)
	}
	f.Fuzz(func(t *testing.T, reply bool, proc uint32, msg []byte) {
		fuzzV23(t, 3, reply, proc%24, msg)
	})
}

// fuzzV23 checks one NFSv2/v3 input (cut to 2 KiB: the split check is
// quadratic, and nothing past the eligible item is looked at).
func fuzzV23(t *testing.T, vers uint32, reply bool, proc uint32, msg []byte) {
	if len(msg) > 2048 {
		msg = msg[:2048]
	}
	dir := Call
	if reply {
		dir = Reply
	}
	r := checkSplits(t, walkTarget{dir, ProgNFS, vers, proc}, msg)
	if len(r.items) > 1 {
		t.Fatalf("%d items in one NFSv%d message", len(r.items), vers)
	}
	checkEstimate(t, ProgNFS, vers, proc, msg)
}

// checkEstimate: no panic, a typed error or an estimate within bounds.
func checkEstimate(t *testing.T, prog, vers, proc uint32, args []byte) {
	e, err := EstimateReply(prog, vers, proc, args)
	if err != nil {
		var we *WalkError
		if !errors.Is(err, ErrGarbage) || !errors.As(err, &we) || we.Offset < 0 || we.Offset > len(args) {
			t.Fatalf("EstimateReply error %v", err)
		}
		return
	}
	if e.Inline < v23MinReply || e.NItems < 0 || e.NItems > 1 {
		t.Fatalf("EstimateReply %+v", e)
	}
	for i := range e.NItems {
		if e.ItemKind[i] != KindReadData && e.ItemKind[i] != KindReadlinkPath || e.ItemMax[i] < 0 {
			t.Fatalf("EstimateReply %+v", e)
		}
	}
}
