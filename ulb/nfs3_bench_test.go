package ulb

import "testing"

// benchWalk walks msg, an NFS message of version vers and procedure
// proc, whole once per iteration: the item (checked), then the rest.
func benchWalk(b *testing.B, dir Direction, vers, proc uint32, msg []byte, kind Kind) {
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	var w Walker
	for b.Loop() {
		_ = w.Reset(dir, ProgNFS, vers, proc)
		st, err := w.Next(msg)
		if err != nil || st.Kind != StepItem || st.Item.Kind != kind {
			b.Fatalf("%+v %v", st, err)
		}
		it := st.Item
		st, err = w.Next(msg[it.Offset+it.Length+it.Pad:])
		if err != nil || st.Kind != StepDone {
			b.Fatalf("%+v %v", st, err)
		}
	}
}

// BenchmarkNFS3ReadReply locates the data of a 1 MiB READ reply.
func BenchmarkNFS3ReadReply(b *testing.B) {
	benchWalk(b, Reply, 3, nfs3Read, nfs3ReadReply(true, filler(1<<20)).bytes(), KindReadData)
}

// BenchmarkNFS3WriteCall locates the data of a 1 MiB WRITE call.
func BenchmarkNFS3WriteCall(b *testing.B) {
	benchWalk(b, Call, 3, nfs3Write, nfs3WriteCall(nfs3Fh28, filler(1<<20)).bytes(), KindWriteData)
}

// BenchmarkNFS3SymlinkCall parses the longest v3 prefix: a sattr3.
func BenchmarkNFS3SymlinkCall(b *testing.B) {
	benchWalk(b, Call, 3, nfs3Symlink, nfs3SymlinkCall("a-link-name", "some/where/else").bytes(), KindSymlinkPath)
}

// BenchmarkNFS3ReadReplyPieces has the header straddle two reads: a
// StepNeedMore, then the item.
func BenchmarkNFS3ReadReplyPieces(b *testing.B) {
	msg := nfs3ReadReply(true, filler(1<<16)).bytes()
	b.ReportAllocs()
	var w Walker
	for b.Loop() {
		_ = w.Reset(Reply, ProgNFS, 3, nfs3Read)
		st, err := w.Next(msg[:50])
		if err != nil || st.Kind != StepNeedMore {
			b.Fatalf("%+v %v", st, err)
		}
		st, err = w.Next(msg[:st.Need])
		if err != nil || st.Kind != StepItem {
			b.Fatalf("%+v %v", st, err)
		}
	}
}

func BenchmarkNFS3EstimateRead(b *testing.B) {
	args := newXmsg().opaque(nfs3Fh28).u64(0).u32(1 << 20).bytes()
	b.ReportAllocs()
	for b.Loop() {
		e, err := EstimateReply(ProgNFS, 3, nfs3Read, args)
		if err != nil || e.ItemMax[0] != 1<<20 {
			b.Fatalf("%+v %v", e, err)
		}
	}
}
