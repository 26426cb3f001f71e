package ulb

import (
	"errors"
	"strings"
	"testing"

	"github.com/rdmagw/rdmagw/xdr"
)

var (
	nfs4CallTarget  = walkTarget{Call, ProgNFS, 4, nfs4ProcCompound}
	nfs4ReplyTarget = walkTarget{Reply, ProgNFS, 4, nfs4ProcCompound}
)

// allNFS4Ops is every operation number some minor version defines.
func allNFS4Ops() []uint32 {
	var ops []uint32
	for op := uint32(opAccess); op <= opRemoveXattr; op++ {
		ops = append(ops, op)
	}
	return append(ops, opIllegal)
}

// TestNFS4TablesCoverEveryOp: the argument and result tables below test
// every operation of every minor version.
func TestNFS4TablesCoverEveryOp(t *testing.T) {
	args := map[uint32]bool{}
	for _, c := range nfs4ArgCases {
		args[c.op] = true
	}
	res := map[uint32]bool{}
	for _, c := range nfs4ResCases {
		res[c.op] = true
	}
	for _, op := range allNFS4Ops() {
		if !args[op] {
			t.Errorf("no argument case for %s (%d)", OpName(op), op)
		}
		if !res[op] {
			t.Errorf("no result case for %s (%d)", OpName(op), op)
		}
	}
}

// item4At is the item whose length word is at lenOff.
func item4At(kind Kind, lenOff, length, op, index int) Item {
	return Item{Kind: kind, LenOffset: lenOff, Offset: lenOff + 4, Length: length, Pad: xdr.Pad(length), Op: op, Index: index}
}

// TestNFS4CallSkipsEveryOp puts each operation's arguments in front of a
// WRITE and behind a GETATTR: the WRITE data is found where it was
// written only if the arguments were skipped to the byte, however the
// message is split. Every prefix of the message is a shortfall, never
// an error or an early end.
func TestNFS4CallSkipsEveryOp(t *testing.T) {
	data := filler(10)
	for _, c := range nfs4ArgCases {
		t.Run(c.name, func(t *testing.T) {
			op := argOp(c.op, c.args)
			start := nfs4Compound("tag", 1).len()
			argsEnd := nfs4Compound("tag", 1, op).len()
			msg := nfs4Compound("tag", 1, op, writeArgs4(data), getattrArgs4).bytes()

			var want []Item
			switch {
			case c.op == opWrite: // its own data comes first
				want = append(want, item4At(KindWriteData, start+4+stateidSize+12, 13, 0, 0))
			}
			want = append(want, item4At(KindWriteData, argsEnd+4+stateidSize+12, len(data), 1, len(want)))
			got := checkSplits(t, nfs4CallTarget, msg)
			if got.end != "done" || !equalItems4(got.items, want) {
				t.Fatalf("got %v\nwant %v done", got, walkResult{items: want})
			}
			checkPrefixesShort(t, nfs4CallTarget, msg)
			writeCorpus(t, "FuzzNFS4Call", "args-"+corpusName4(c.name), msg)
		})
	}
}

// TestNFS4ReplySkipsEveryOp does the same for results: each result in
// front of a READ. A result with an error status ends the COMPOUND, so
// the READ after it must not be reported, and the walk must end right
// after the error's own arm (LOCK4denied, SETATTR's attrsset, ...).
func TestNFS4ReplySkipsEveryOp(t *testing.T) {
	data := filler(7)
	for _, c := range nfs4ResCases {
		t.Run(c.name, func(t *testing.T) {
			op := resOp(c.op, c.status, c.res)
			start := nfs4CompoundRes(0, "tag").len()
			resEnd := nfs4CompoundRes(0, "tag", op).len()
			msg := nfs4CompoundRes(c.status, "tag", op, readRes4(true, data)).bytes()

			var want []Item
			switch {
			case c.status != nfs4OK:
			case c.op == opRead:
				want = append(want, item4At(KindReadData, start+8+4, 21, 0, 0))
			case c.op == opReadlink:
				want = append(want, item4At(KindReadlinkPath, start+8, len("../target/x"), 0, 0))
			}
			if c.status == nfs4OK {
				want = append(want, item4At(KindReadData, resEnd+8+4, len(data), 1, len(want)))
			}
			got := checkSplits(t, nfs4ReplyTarget, msg)
			if got.end != "done" || !equalItems4(got.items, want) {
				t.Fatalf("got %v\nwant %v done", got, walkResult{items: want})
			}
			if c.status != nfs4OK {
				// The walk stops after the failed operation's results.
				var w Walker
				_ = w.Reset(Reply, ProgNFS, 4, nfs4ProcCompound)
				st, err := w.Next(msg)
				if err != nil || st.Kind != StepDone || st.Consumed != resEnd || w.Offset() != resEnd {
					t.Fatalf("failed op: %+v %v offset %d, want done at %d", st, err, w.Offset(), resEnd)
				}
			}
			end := len(msg)
			if c.status != nfs4OK {
				end = resEnd // what follows the failed result is never read
			}
			checkPrefixesShort(t, nfs4ReplyTarget, msg[:end])
			writeCorpus(t, "FuzzNFS4Reply", "res-"+corpusName4(c.name), msg)
		})
	}
}

func equalItems4(a, b []Item) bool {
	return walkResult{items: a}.equal(walkResult{items: b})
}

func corpusName4(s string) string {
	return strings.ToLower(strings.NewReplacer(" ", "-", "_", "-").Replace(s))
}

// checkPrefixesShort: every strict prefix of msg is a truncated message,
// never garbage and never complete.
func checkPrefixesShort(t *testing.T, tg walkTarget, msg []byte) {
	t.Helper()
	for n := range len(msg) {
		r := walkWhole(t, tg, msg[:n])
		if !strings.HasPrefix(r.end, "need ") && !strings.HasPrefix(r.end, "body ") {
			t.Fatalf("prefix of %d/%d bytes: %v", n, len(msg), r)
		}
	}
}

// TestNFS4Items: the COMPOUNDs of RFC 8267 §6.4, items in order with their
// operation index, however the message is split.
func TestNFS4Items(t *testing.T) {
	d1, d2, d3 := filler(4096), filler(1), filler(4099)
	tests := []struct {
		name string
		tg   walkTarget
		msg  *xmsg
		want func() []Item
	}{{
		name: "SEQUENCE PUTFH WRITE GETATTR",
		tg:   nfs4CallTarget,
		msg:  nfs4Compound("", 1, sequenceArgs4, putfhArgs4, writeArgs4(d1), getattrArgs4),
		want: func() []Item {
			at := nfs4Compound("", 1, sequenceArgs4, putfhArgs4).len() + 4 + 28
			return []Item{item4At(KindWriteData, at, len(d1), 2, 0)}
		},
	}, {
		name: "two WRITEs and a symlink",
		tg:   nfs4CallTarget,
		msg:  nfs4Compound("multi", 2, sequenceArgs4, putfhArgs4, writeArgs4(d2), symlinkArgs4("lnk", "../some/where"), writeArgs4(d3), getattrArgs4),
		want: func() []Item {
			a := nfs4Compound("multi", 2, sequenceArgs4, putfhArgs4).len() + 4 + 28
			b := nfs4Compound("multi", 2, sequenceArgs4, putfhArgs4, writeArgs4(d2)).len() + 8
			c := nfs4Compound("multi", 2, sequenceArgs4, putfhArgs4, writeArgs4(d2), symlinkArgs4("lnk", "../some/where")).len() + 4 + 28
			return []Item{
				item4At(KindWriteData, a, len(d2), 2, 0),
				item4At(KindSymlinkPath, b, len("../some/where"), 3, 1),
				item4At(KindWriteData, c, len(d3), 4, 2),
			}
		},
	}, {
		name: "symlink last",
		tg:   nfs4CallTarget,
		msg:  nfs4Compound("", 0, putfhArgs4, symlinkArgs4("l", "t")),
		want: func() []Item {
			return []Item{item4At(KindSymlinkPath, nfs4Compound("", 0, putfhArgs4).len()+8, 1, 1, 0)}
		},
	}, {
		name: "no operations",
		tg:   nfs4CallTarget,
		msg:  nfs4Compound("empty", 0),
		want: func() []Item { return nil },
	}, {
		name: "SEQUENCE PUTFH READ",
		tg:   nfs4ReplyTarget,
		msg:  nfs4CompoundRes(0, "", sequenceRes4, putfhRes4, readRes4(false, d3)),
		want: func() []Item {
			at := nfs4CompoundRes(0, "", sequenceRes4, putfhRes4).len() + 12
			return []Item{item4At(KindReadData, at, len(d3), 2, 0)}
		},
	}, {
		name: "RFC 8267 6.4.3: READ READLINK READ",
		tg:   nfs4ReplyTarget,
		msg: nfs4CompoundRes(0, "t", putfhRes4, resOp(opLookup, 0, nil), readRes4(false, d1),
			putfhRes4, resOp(opLookup, 0, nil), readlinkRes4("/a/b"),
			putfhRes4, resOp(opLookup, 0, nil), readRes4(true, d2)),
		want: func() []Item {
			p := nfs4CompoundRes(0, "t", putfhRes4, resOp(opLookup, 0, nil))
			a := p.len() + 12
			readRes4(false, d1)(p)
			putfhRes4(p)
			resOp(opLookup, 0, nil)(p)
			b := p.len() + 8
			readlinkRes4("/a/b")(p)
			putfhRes4(p)
			resOp(opLookup, 0, nil)(p)
			c := p.len() + 12
			return []Item{
				item4At(KindReadData, a, len(d1), 2, 0),
				item4At(KindReadlinkPath, b, 4, 5, 1),
				item4At(KindReadData, c, len(d2), 8, 2),
			}
		},
	}, {
		name: "READ failed: COMPOUND ends",
		tg:   nfs4ReplyTarget,
		msg:  nfs4CompoundRes(nfs4ErrIO, "", sequenceRes4, putfhRes4, resOp(opRead, nfs4ErrIO, nil)),
		want: func() []Item { return nil },
	}, {
		name: "MINOR_VERS_MISMATCH: no results",
		tg:   nfs4ReplyTarget,
		msg:  nfs4CompoundRes(10021, "t"),
		want: func() []Item { return nil },
	}, {
		name: "READ_PLUS is never eligible",
		tg:   nfs4ReplyTarget,
		msg:  nfs4CompoundRes(0, "", putfhRes4, resOp(opReadPlus, 0, all4(bool4(true), words4(1, 0), hypers4(0), opaque4(100)))),
		want: func() []Item { return nil },
	}, {
		name: "empty READ",
		tg:   nfs4ReplyTarget,
		msg:  nfs4CompoundRes(0, "", putfhRes4, readRes4(true, nil), getattrRes4),
		want: func() []Item {
			return []Item{item4At(KindReadData, nfs4CompoundRes(0, "", putfhRes4).len()+12, 0, 1, 0)}
		},
	}}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := tt.msg.bytes()
			got := checkSplits(t, tt.tg, msg)
			if want := tt.want(); got.end != "done" || !equalItems4(got.items, want) {
				t.Fatalf("got %v\nwant %v done", got, walkResult{items: want})
			}
			name := "FuzzNFS4Call"
			if tt.tg.dir == Reply {
				name = "FuzzNFS4Reply"
			}
			if len(msg) <= fuzzNFS4Max {
				writeCorpus(t, name, "compound-"+string(rune('a'+i)), msg)
			}
		})
	}
}

// TestNFS4Null: NULL has no arguments and no results.
func TestNFS4Null(t *testing.T) {
	for _, dir := range []Direction{Call, Reply} {
		var w Walker
		if err := w.Reset(dir, ProgNFS, 4, nfs4ProcNull); err != nil {
			t.Fatal(err)
		}
		st, err := w.Next(nil)
		if err != nil || st.Kind != StepDone || st.Consumed != 0 {
			t.Fatalf("%v: %+v %v", dir, st, err)
		}
	}
}

// TestNFS4Garbage: malformed COMPOUNDs are errors at the right operation
// and offset, not misplaced items.
func TestNFS4Garbage(t *testing.T) {
	fhTooLong := argOp(opPutFH, opaque4(129))
	tests := []struct {
		name   string
		tg     walkTarget
		msg    *xmsg
		op     int
		offset int // of the offending word, from the message start
		cause  string
	}{
		{"unknown op", nfs4CallTarget, nfs4Compound("", 1, putfhArgs4, argOp(76, nil), writeArgs4(filler(4))), 1, 16 + 32, "unknown operation 76"},
		{"op 2 is not an op", nfs4CallTarget, nfs4Compound("", 1, argOp(2, nil)), 0, 12, "unknown operation 2"},
		{"file handle over 128", nfs4CallTarget, nfs4Compound("", 0, fhTooLong), 0, 16, "length exceeds limit"},
		{"bad open claim", nfs4CallTarget, nfs4Compound("", 1, argOp(opOpen, all4(openPrefix4, words4(0), words4(7)))), 0, 12 + 4 + 12 + 8 + 16 + 4, "open_claim4 has no arm 7"},
		{"bad createhow", nfs4CallTarget, nfs4Compound("", 1, argOp(opOpen, all4(openPrefix4, words4(1, 4)))), 0, 12 + 4 + 12 + 8 + 16 + 4, "createhow4 has no arm 4"},
		{"bad locker bool", nfs4CallTarget, nfs4Compound("", 1, argOp(opLock, all4(words4(1, 0), hypers4(0, 1), words4(2)))), 0, 12 + 4 + 24, "boolean not 0 or 1"},
		{"bad netloc", nfs4CallTarget, nfs4Compound("", 2, argOp(opCopyNotify, all4(stateid4, words4(4)))), 0, 12 + 4 + 16, "netloc4 has no arm 4"},
		{"bad cb_secflavor", nfs4CallTarget, nfs4Compound("", 1, argOp(opBackchannelCtl, words4(1, 1, 3))), 0, 12 + 12, "callback_sec_parms4 has no arm 3"},
		{"bad state_protect4_a", nfs4CallTarget, nfs4Compound("", 1, argOp(opExchangeID, all4(verifier4, opaque4(4), words4(0, 3)))), 0, 12 + 4 + 8 + 8 + 4, "state_protect4_a has no arm 3"},
		{"bad deleg_claim4", nfs4CallTarget, nfs4Compound("", 1, argOp(opWantDelegation, words4(0, 0))), 0, 12 + 8, "deleg_claim4 has no arm 0"},
		{"two impl ids", nfs4CallTarget, nfs4Compound("", 1, argOp(opExchangeID, all4(verifier4, opaque4(4), words4(0, 0), words4(2)))), 0, 12 + 4 + 8 + 8 + 8, "length exceeds limit"},
		{"unknown result op", nfs4ReplyTarget, nfs4CompoundRes(0, "", putfhRes4, resOp(99, 0, nil)), 1, 12 + 8, "unknown operation 99"},
		{"unknown failed result op", nfs4ReplyTarget, nfs4CompoundRes(0, "", resOp(99, 5, nil)), 0, 12, "unknown operation 99"},
		{"bad delegation type", nfs4ReplyTarget, nfs4CompoundRes(0, "", resOp(opWantDelegation, 0, words4(4))), 0, 12 + 8, "open_delegation4 has no arm 4"},
		{"bad space limit", nfs4ReplyTarget, nfs4CompoundRes(0, "", resOp(opWantDelegation, 0, all4(words4(2), stateid4, words4(0, 3)))), 0, 12 + 8 + 4 + 16 + 4, "nfs_space_limit4 has no arm 3"},
		{"bad readdir entry bool", nfs4ReplyTarget, nfs4CompoundRes(0, "", resOp(opReaddir, 0, all4(verifier4, words4(2)))), 0, 12 + 8 + 8, "boolean not 0 or 1"},
		{"bad GDD status", nfs4ReplyTarget, nfs4CompoundRes(0, "", resOp(opGetDirDelegation, 0, words4(2))), 0, 12 + 8, "GET_DIR_DELEGATION4res_non_fatal has no arm 2"},
		{"bad state_protect4_r", nfs4ReplyTarget, nfs4CompoundRes(0, "", resOp(opExchangeID, 0, all4(hypers4(1), words4(1, 1), words4(9)))), 0, 12 + 8 + 16, "state_protect4_r has no arm 9"},
		{"osr_complete<1> with 2", nfs4ReplyTarget, nfs4CompoundRes(0, "", resOp(opOffloadStatus, 0, all4(hypers4(1), words4(2, 0, 0)))), 0, 12 + 8 + 8, "length exceeds limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := tt.msg.bytes()
			var w Walker
			_ = w.Reset(tt.tg.dir, tt.tg.prog, tt.tg.vers, tt.tg.proc)
			var err error
			for off := 0; err == nil; {
				var st Step
				st, err = w.Next(msg[off:])
				if err == nil && st.Kind != StepItem {
					t.Fatalf("walk ended %+v without an error", st)
				}
				off += st.Item.Offset + st.Item.Length + st.Item.Pad
			}
			var we *WalkError
			if !errors.As(err, &we) || !errors.Is(err, ErrGarbage) {
				t.Fatalf("error %v: not a WalkError wrapping ErrGarbage", err)
			}
			if we.Op != tt.op || we.Offset != tt.offset || !strings.Contains(we.Err.Error(), tt.cause) {
				t.Fatalf("error %v: want op %d offset %d cause %q", err, tt.op, tt.offset, tt.cause)
			}
			// Split anywhere, the walk fails the same way.
			whole := checkSplits(t, tt.tg, msg)
			if !strings.HasPrefix(whole.end, "error") {
				t.Fatalf("split walk: %v", whole)
			}
			name := "FuzzNFS4Call"
			if tt.tg.dir == Reply {
				name = "FuzzNFS4Reply"
			}
			writeCorpus(t, name, "bad-"+corpusName4(tt.name), msg)
		})
	}
}

// TestNFS4BadProc: NFSv4 has only NULL and COMPOUND.
func TestNFS4BadProc(t *testing.T) {
	for _, dir := range []Direction{Call, Reply} {
		var w Walker
		_ = w.Reset(dir, ProgNFS, 4, 2)
		if _, err := w.Next(nil); !errors.Is(err, ErrGarbage) {
			t.Fatalf("%v: proc 2 walked: %v", dir, err)
		}
	}
	if _, err := EstimateReply(ProgNFS, 4, 2, nil); !errors.Is(err, ErrGarbage) {
		t.Fatalf("proc 2 estimated: %v", err)
	}
}

// TestNFS4NeedMore: a step short of bytes says how many would let it go
// on, changes nothing, and the same step with those bytes succeeds.
func TestNFS4NeedMore(t *testing.T) {
	msg := nfs4Compound("a-tag", 1, sequenceArgs4, putfhArgs4, writeArgs4(filler(100))).bytes()
	var w Walker
	_ = w.Reset(Call, ProgNFS, 4, nfs4ProcCompound)
	n := 0
	for {
		st, err := w.Next(msg[:n])
		if err != nil {
			t.Fatal(err)
		}
		if st.Kind == StepItem {
			if st.Item.LenOffset != len(msg)-4-100 {
				t.Fatalf("item %+v", st.Item)
			}
			break
		}
		if st.Kind != StepNeedMore || st.Need <= n || st.Need > len(msg) {
			t.Fatalf("at %d: %+v", n, st)
		}
		n = st.Need
	}
}

// TestOpName names every operation and does not allocate.
func TestOpName(t *testing.T) {
	for _, op := range allNFS4Ops() {
		if name := OpName(op); name == "unknown" || name == "" {
			t.Errorf("op %d has no name", op)
		}
	}
	for op, want := range map[uint32]string{25: "READ", 38: "WRITE", 53: "SEQUENCE", 68: "READ_PLUS", 75: "REMOVEXATTR", 10044: "ILLEGAL", 0: "unknown", 2: "unknown", 76: "unknown", 1 << 31: "unknown"} {
		if got := OpName(op); got != want {
			t.Errorf("OpName(%d) = %q, want %q", op, got, want)
		}
	}
	if a := testing.AllocsPerRun(100, func() { _ = OpName(53) }); a != 0 {
		t.Errorf("OpName allocates %v", a)
	}
}

// TestNFS4WalkAllocs: walking a READ reply and a WRITE call, whole or
// with a shortfall, allocates nothing.
func TestNFS4WalkAllocs(t *testing.T) {
	reply := nfs4CompoundRes(0, "", sequenceRes4, putfhRes4, readRes4(true, filler(64))).bytes()
	call := nfs4Compound("", 1, sequenceArgs4, putfhArgs4, writeArgs4(filler(64)), getattrArgs4).bytes()
	var w Walker
	a := testing.AllocsPerRun(100, func() {
		_ = w.Reset(Reply, ProgNFS, 4, 1)
		_, _ = w.Next(reply[:30]) // NeedMore
		_, _ = w.Next(reply)
		_ = w.Reset(Call, ProgNFS, 4, 1)
		st, _ := w.Next(call)
		_, _ = w.Next(call[st.Item.Offset+64:])
	})
	if a != 0 {
		t.Fatalf("%v allocations", a)
	}
}
