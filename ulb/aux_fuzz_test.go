package ulb

import (
	"fmt"
	"testing"
)

type auxSeed struct {
	which uint8 // index into auxVersions
	reply bool
	proc  uint32
	msg   []byte
}

func auxSeeds() []auxSeed {
	return []auxSeed{
		{2, false, mountMnt, newXmsg().str("/export").bytes()},
		{2, true, mountMnt, newXmsg().u32(0).opaque(nfs3Fh28).u32(1).u32(1).bytes()},
		{5, false, nlmLock, newXmsg().opaque([]byte{1}).boolean(false).boolean(true).str("c").opaque(nil).opaque(nil).u32(1).u64(0).u64(0).boolean(false).u32(1).bytes()},
		{6, false, nsmMon, newXmsg().str("host").str("me").u32(100021).u32(4).u32(16).zeros(16).bytes()},
		{8, false, aclGetacl, newXmsg().opaque(nfs3Fh28).u32(15).bytes()},
		{8, true, aclGetacl, newXmsg().u32(0).boolean(false).u32(15).u32(0).u32(0).u32(0).u32(0).bytes()},
	}
}

func TestWriteAuxCorpus(t *testing.T) {
	for i, s := range auxSeeds() {
		writeCorpus(t, "FuzzAuxWalk", fmt.Sprintf("seed-%02d", i), s.which, s.reply, s.proc, s.msg)
	}
}

// FuzzAuxWalk: the auxiliary programs' walkers end at once whatever the
// bytes, and their estimates never fail or go below the floor.
func FuzzAuxWalk(f *testing.F) {
	for _, s := range auxSeeds() {
		f.Add(s.which, s.reply, s.proc, s.msg)
	}
	f.Fuzz(func(t *testing.T, which uint8, reply bool, proc uint32, msg []byte) {
		pv := auxVersions[int(which)%len(auxVersions)]
		proc %= 32
		if len(msg) > 512 {
			msg = msg[:512]
		}
		dir := Call
		if reply {
			dir = Reply
		}
		r := checkSplits(t, walkTarget{dir, pv.prog, pv.vers, proc}, msg)
		if r.end != "done" || len(r.items) != 0 {
			t.Fatalf("%v", r)
		}
		e, err := EstimateReply(pv.prog, pv.vers, proc, msg)
		if err != nil || e.Inline < v23MinReply || e.NItems != 0 {
			t.Fatalf("EstimateReply: %+v, %v", e, err)
		}
	})
}
