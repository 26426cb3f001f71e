package ulb

import (
	"errors"
	"testing"
)

// nfs4FuzzSeeds are the COMPOUNDs of the table tests: every operation's
// arguments or results in front of a WRITE or READ.
func nfs4FuzzSeeds(dir Direction) [][]byte {
	var seeds [][]byte
	if dir == Call {
		for _, c := range nfs4ArgCases {
			seeds = append(seeds, nfs4Compound("", 1, argOp(c.op, c.args), writeArgs4(filler(5)), getattrArgs4).bytes())
		}
		return append(seeds,
			nfs4Compound("multi", 2, sequenceArgs4, putfhArgs4, writeArgs4(filler(3)), symlinkArgs4("l", "../t"), writeArgs4(filler(9))).bytes(),
			nfs4Compound("", 0).bytes())
	}
	for _, c := range nfs4ResCases {
		seeds = append(seeds, nfs4CompoundRes(c.status, "", resOp(c.op, c.status, c.res), readRes4(true, filler(6))).bytes())
	}
	return append(seeds,
		nfs4CompoundRes(0, "t", sequenceRes4, putfhRes4, readRes4(false, filler(11)), readlinkRes4("/x"), getattrRes4).bytes(),
		nfs4CompoundRes(10021, "").bytes())
}

// FuzzNFS4Call: no panic; the Walker contract at every step; the same
// items however the message is split; at most one item per operation, in
// operation order; and EstimateReply accepts exactly the arguments the
// walker walks to the end.
func FuzzNFS4Call(f *testing.F) {
	for _, s := range nfs4FuzzSeeds(Call) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		msg = msg[:min(len(msg), fuzzNFS4Max)]
		r := fuzzNFS4(t, nfs4CallTarget, msg)
		_, err := EstimateReply(ProgNFS, 4, nfs4ProcCompound, msg)
		if (err == nil) != (r.end == "done") {
			t.Fatalf("walk %v but estimate error %v", r, err)
		}
		checkEstimate4(t, msg)
	})
}

// FuzzNFS4Reply: as FuzzNFS4Call for COMPOUND results.
func FuzzNFS4Reply(f *testing.F) {
	for _, s := range nfs4FuzzSeeds(Reply) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		fuzzNFS4(t, nfs4ReplyTarget, msg)
	})
}

// fuzzNFS4Max cuts fuzz inputs: the split check is quadratic.
const fuzzNFS4Max = 2048

// fuzzNFS4 walks one input (cut to fuzzNFS4Max) and checks what it found.
func fuzzNFS4(t *testing.T, tg walkTarget, msg []byte) walkResult {
	msg = msg[:min(len(msg), fuzzNFS4Max)]
	r := checkSplits(t, tg, msg)
	prev := -1
	for _, it := range r.items {
		if it.Op <= prev {
			t.Fatalf("items out of operation order: %v", r)
		}
		prev = it.Op
		call := it.Kind == KindWriteData || it.Kind == KindSymlinkPath
		reply := it.Kind == KindReadData || it.Kind == KindReadlinkPath
		if tg.dir == Call && !call || tg.dir == Reply && !reply {
			t.Fatalf("item kind %v in a %v", it.Kind, tg)
		}
	}
	return r
}

// checkEstimate4: an estimate, when there is one, is sane.
func checkEstimate4(t *testing.T, args []byte) {
	e, err := EstimateReply(ProgNFS, 4, nfs4ProcCompound, args)
	if err != nil {
		var we *WalkError
		if !errors.Is(err, ErrGarbage) || !errors.As(err, &we) || we.Offset < 0 || we.Offset > len(args) {
			t.Fatalf("EstimateReply error %v", err)
		}
		return
	}
	if e.Inline < compoundResHeader || e.NItems < 0 || e.NItems > MaxItems {
		t.Fatalf("EstimateReply %+v", e)
	}
	for i := range e.NItems {
		if e.ItemKind[i] != KindReadData && e.ItemKind[i] != KindReadlinkPath || e.ItemMax[i] < 0 {
			t.Fatalf("EstimateReply %+v", e)
		}
	}
}
