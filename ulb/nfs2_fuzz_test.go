package ulb

import (
	"fmt"
	"testing"
)

func nfs2Seeds() []fuzzSeed {
	return []fuzzSeed{
		{false, nfs2Write, nfs2WriteCall(filler(9)).bytes()},
		{false, nfs2Symlink, nfs2SymlinkCall("l", "/a/b").bytes()},
		{false, nfs2Read, newXmsg().fixed(nfs2Handle).u32(0).u32(8192).u32(0).bytes()},
		{false, nfs2Readdir, newXmsg().fixed(nfs2Handle).u32(0).u32(4096).bytes()},
		{true, nfs2Read, nfs2ReadReply(filler(31)).bytes()},
		{true, nfs2Read, newXmsg().u32(2).bytes()},
		{true, nfs2Readlink, newXmsg().u32(0).str("x").bytes()},
	}
}

func TestWriteNFS2Corpus(t *testing.T) {
	for i, s := range nfs2Seeds() {
		writeCorpus(t, "FuzzNFS2Walk", fmt.Sprintf("seed-%02d", i), s.reply, s.proc, s.msg)
	}
}

func FuzzNFS2Walk(f *testing.F) {
	for _, s := range nfs2Seeds() {
		f.Add(s.reply, s.proc, s.msg)
	}
	f.Fuzz(func(t *testing.T, reply bool, proc uint32, msg []byte) {
		fuzzV23(t, 2, reply, proc%20, msg)
	})
}
