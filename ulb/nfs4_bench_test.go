package ulb

import "testing"

// benchWalk4 walks the COMPOUND msg whole once per iteration: the item,
// then the rest.
func benchWalk4(b *testing.B, dir Direction, msg []byte, kind Kind) {
	benchWalk(b, dir, 4, nfs4ProcCompound, msg, kind)
}

// BenchmarkNFS4ReadReply locates the data of a SEQUENCE+PUTFH+READ reply
// of 1 MiB.
func BenchmarkNFS4ReadReply(b *testing.B) {
	msg := nfs4CompoundRes(0, "", sequenceRes4, putfhRes4, readRes4(false, filler(1<<20))).bytes()
	benchWalk4(b, Reply, msg, KindReadData)
}

// BenchmarkNFS4WriteCall locates the data of a SEQUENCE+PUTFH+WRITE+GETATTR
// call of 1 MiB, and walks the GETATTR after it.
func BenchmarkNFS4WriteCall(b *testing.B) {
	msg := nfs4Compound("", 1, sequenceArgs4, putfhArgs4, writeArgs4(filler(1<<20)), getattrArgs4).bytes()
	benchWalk4(b, Call, msg, KindWriteData)
}

// BenchmarkNFS4ReadReplyPieces has the COMPOUND straddle two socket reads:
// a StepNeedMore mid-SEQUENCE, then the item.
func BenchmarkNFS4ReadReplyPieces(b *testing.B) {
	msg := nfs4CompoundRes(0, "", sequenceRes4, putfhRes4, readRes4(false, filler(1<<16))).bytes()
	b.ReportAllocs()
	var w Walker
	for b.Loop() {
		_ = w.Reset(Reply, ProgNFS, 4, nfs4ProcCompound)
		st, err := w.Next(msg[:40])
		if err != nil || st.Kind != StepNeedMore {
			b.Fatalf("%+v %v", st, err)
		}
		st, err = w.Next(msg[:200])
		if err != nil || st.Kind != StepItem {
			b.Fatalf("%+v %v", st, err)
		}
	}
}

// BenchmarkNFS4ReaddirReply walks a READDIR reply of 100 entries with
// attributes: the biggest result a walker usually parses.
func BenchmarkNFS4ReaddirReply(b *testing.B) {
	entries := func(m *xmsg) {
		verifier4(m)
		for i := range 100 {
			m.boolean(true).u64(uint64(i + 3)).str("file-name-0000").then(fattr4)
		}
		m.boolean(false).boolean(true)
	}
	msg := nfs4CompoundRes(0, "", sequenceRes4, putfhRes4, resOp(opReaddir, 0, entries)).bytes()
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	var w Walker
	for b.Loop() {
		_ = w.Reset(Reply, ProgNFS, 4, nfs4ProcCompound)
		if st, err := w.Next(msg); err != nil || st.Kind != StepDone || st.Consumed != len(msg) {
			b.Fatalf("%+v %v", st, err)
		}
	}
}

// BenchmarkNFS4Estimate estimates a SEQUENCE+PUTFH+READ+GETATTR reply.
func BenchmarkNFS4Estimate(b *testing.B) {
	args := nfs4Compound("", 1, sequenceArgs4, putfhArgs4, readArgs4(1<<20), getattrArgs4).bytes()
	b.ReportAllocs()
	for b.Loop() {
		if e, err := EstimateReply(ProgNFS, 4, nfs4ProcCompound, args); err != nil || e.NItems != 1 {
			b.Fatalf("%+v %v", e, err)
		}
	}
}
