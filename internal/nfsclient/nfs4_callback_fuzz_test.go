package nfsclient

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/xdr"
)

// The callback decoder under fuzzing: cbCompound, which reads
// CB_COMPOUND4args (tag, minorversion, callback_ident, the operations:
// CB_SEQUENCE, CB_RECALL, CB_GETATTR, anything else is ILLEGAL) and
// writes CB_COMPOUND4res. FuzzCallback (decode_fuzz_test.go) drives whole
// RPC calls through serveCallback and the slot table across calls; this
// one looks at one CB_COMPOUND's arguments byte by byte.

// cbfSession and cbfOther are the fuzz client's session ID and the
// "other" part of the stateid of the delegation it holds.
var (
	cbfSession = [sessionIDLen]byte{0x5e, 0x55, 0x10, 0x4e, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	cbfOther   = [12]byte{0xde, 0x1e, 0x9a, 0x7e, 1, 2, 3, 4, 5, 6, 7, 8}
	cbfFH      = []byte{0xf, 0xe, 0xd, 0xc, 0xb, 0xa, 9, 8}
)

// errCBFNoServer fails every fore-channel call of the fuzz client (the
// DELEGRETURN after an accepted CB_RECALL).
var errCBFNoServer = errors.New("cb fuzz: no server")

type cbfTransport struct{}

func (cbfTransport) Call(context.Context, uint32, uint32, uint32, []byte) ([]byte, error) {
	return nil, errCBFNoServer
}
func (cbfTransport) Close() error { return nil }

// cbfClient is a client with a fresh two-slot back channel; with deleg it
// holds the delegation cbfOther names.
func cbfClient(deleg bool) *V4 {
	c := &V4{T: cbfTransport{}, session: cbfSession}
	c.cbInit(2)
	if deleg {
		dg := &Delegation{FH: cbfFH}
		copy(dg.Stateid[4:], cbfOther[:])
		c.cb.delegs[cbfOther] = dg
	}
	return c
}

// cbfRun decodes args on a fresh client and returns whether they decoded
// and the CB_COMPOUND4res written.
func cbfRun(args []byte) (bool, []byte) {
	c := cbfClient(false)
	e := xdr.NewEncoder(make([]byte, 4096))
	ok := c.cbCompound(args, &e)
	return ok, e.Bytes()
}

// CB_COMPOUND4args builders for the seeds (testdata/fuzz/FuzzCBCompoundArgs
// holds their output; TestCallbackFuzzSeeds checks it is current).

type cbfArgs struct{ e xdr.Encoder }

func newCBFArgs(tag string, minor, nops uint32) *cbfArgs {
	a := &cbfArgs{e: xdr.NewEncoder(make([]byte, 2048))}
	a.e.PutString(tag)
	a.e.PutUint32(minor)
	a.e.PutUint32(0) // callback_ident
	a.e.PutUint32(nops)
	return a
}

func (a *cbfArgs) sequence(sid []byte, seq, slot uint32, referring bool) *cbfArgs {
	a.e.PutUint32(opCBSequence)
	a.e.PutFixedOpaque(sid)
	a.e.PutUint32(seq)
	a.e.PutUint32(slot)
	a.e.PutUint32(1) // highest slot
	a.e.PutBool(true)
	if !referring {
		a.e.PutUint32(0)
		return a
	}
	a.e.PutUint32(1) // one referring_call_list4
	a.e.PutFixedOpaque(sid)
	a.e.PutUint32(2) // two referring_call4
	a.e.PutUint32(7)
	a.e.PutUint32(0)
	a.e.PutUint32(8)
	a.e.PutUint32(1)
	return a
}

func (a *cbfArgs) recall(other []byte) *cbfArgs {
	a.e.PutUint32(opCBRecall)
	var st [stateidLen]byte
	binary.BigEndian.PutUint32(st[:], 1)
	copy(st[4:], other)
	a.e.PutFixedOpaque(st[:])
	a.e.PutBool(false)
	a.e.PutOpaque(cbfFH)
	return a
}

func (a *cbfArgs) getattr() *cbfArgs {
	a.e.PutUint32(opCBGetattr)
	a.e.PutOpaque(cbfFH)
	a.e.PutUint32(2) // bitmap4 of two words
	a.e.PutUint32(1 << 3)
	a.e.PutUint32(1 << 1)
	return a
}

func (a *cbfArgs) op(op uint32, body ...uint32) *cbfArgs {
	a.e.PutUint32(op)
	for _, w := range body {
		a.e.PutUint32(w)
	}
	return a
}

func (a *cbfArgs) bytes() []byte { return bytes.Clone(a.e.Bytes()) }

// cbfSeeds are the seed corpus: each branch of the decoder once.
func cbfSeeds() map[string][]byte {
	sid := cbfSession[:]
	other := cbfOther[:]
	full := newCBFArgs("recall", 1, 2).sequence(sid, 1, 0, true).recall(other).bytes()
	return map[string][]byte{
		"sequence":              newCBFArgs("", 1, 1).sequence(sid, 1, 0, false).bytes(),
		"sequence-referring":    newCBFArgs("t", 2, 1).sequence(sid, 1, 1, true).bytes(),
		"sequence-recall":       full,
		"sequence-recall-stale": newCBFArgs("stale", 1, 2).sequence(sid, 1, 0, false).recall(make([]byte, 12)).bytes(),
		"sequence-getattr":      newCBFArgs("getattr", 1, 2).sequence(sid, 1, 0, false).getattr().bytes(),
		"sequence-unknown-op":   newCBFArgs("", 1, 3).sequence(sid, 1, 0, false).op(99, 1, 2, 3).recall(other).bytes(),
		"layoutrecall-unknown":  newCBFArgs("layout", 1, 2).sequence(sid, 1, 0, false).op(5, 1, 0, 0).bytes(),
		"recall-not-in-session": newCBFArgs("", 1, 1).recall(other).bytes(),
		"sequence-twice":        newCBFArgs("", 1, 2).sequence(sid, 1, 0, false).sequence(sid, 2, 1, false).bytes(),
		"minor-version-0":       newCBFArgs("v40", 0, 1).recall(other).bytes(),
		"bad-session":           newCBFArgs("", 1, 1).sequence(make([]byte, sessionIDLen), 1, 0, false).bytes(),
		"bad-slot":              newCBFArgs("", 1, 1).sequence(sid, 1, 9, false).bytes(),
		"retry-uncached":        newCBFArgs("", 1, 1).sequence(sid, 0, 0, false).bytes(),
		"misordered":            newCBFArgs("", 1, 1).sequence(sid, 5, 0, false).bytes(),
		"truncated-recall":      full[:len(full)-6],
		"too-many-ops":          newCBFArgs("", 1, 65).bytes(),
		"huge-tag":              {0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1},
		"huge-referring-lists": newCBFArgs("", 1, 1).op(opCBSequence).op(binary.BigEndian.Uint32(sid[0:]),
			binary.BigEndian.Uint32(sid[4:]), binary.BigEndian.Uint32(sid[8:]), binary.BigEndian.Uint32(sid[12:]),
			1, 0, 1, 0, 0xffffffff).bytes(),
		"huge-bitmap": newCBFArgs("", 1, 2).sequence(sid, 1, 0, false).op(opCBGetattr, 0, 0xffffffff).bytes(),
		"empty":       {},
	}
}

// cbfMaxAlloc bounds what decoding one CB_COMPOUND may allocate, however
// long its operations say they are: the results of at most 64 operations
// and a CB_SEQUENCE result. The arguments themselves are never copied.
const cbfMaxAlloc = 16 << 10

// FuzzCBCompoundArgs decodes arbitrary CB_COMPOUND4args. Nothing may
// panic; one decode allocates at most cbfMaxAlloc bytes; the arguments
// that decode give a well-formed CB_COMPOUND4res echoing the tag; and
// the decoder reads front to back without inventing bytes: there is a
// length L such that every prefix shorter than L fails (GARBAGE_ARGS)
// and every prefix from L on decodes to exactly the reply of the whole.
// The whole call through serveCallback gets that same result.
func FuzzCBCompoundArgs(f *testing.F) {
	// The seeds are testdata/fuzz/FuzzCBCompoundArgs (cbfSeeds).
	f.Fuzz(func(t *testing.T, args []byte) {
		// Allocation, on a client made beforehand.
		c := cbfClient(false)
		e := xdr.NewEncoder(make([]byte, 4096))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ok := c.cbCompound(args, &e)
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > cbfMaxAlloc {
			t.Fatalf("decoding %d bytes of arguments allocated %d bytes", len(args), n)
		}
		res := bytes.Clone(e.Bytes())
		if ok {
			cbfCheckRes(t, args, res)
		}

		// Truncation.
		L := -1
		if ok {
			lo, hi := 0, len(args) // the first ok prefix is in [lo, hi]
			for lo < hi {
				mid := (lo + hi) / 2
				if okm, _ := cbfRun(args[:mid]); okm {
					hi = mid
				} else {
					lo = mid + 1
				}
			}
			L = lo
		}
		cuts := []int{0, len(args) / 2, len(args) - 1}
		for p := 4; p < min(len(args), 160); p += 4 {
			cuts = append(cuts, p)
		}
		if L >= 0 {
			cuts = append(cuts, L-1, L, L+1)
		}
		for _, p := range cuts {
			if p < 0 || p > len(args) {
				continue
			}
			okp, resp := cbfRun(args[:p])
			switch {
			case okp && !ok:
				t.Fatalf("the first %d of %d bytes decode but the whole does not", p, len(args))
			case okp && p < L:
				t.Fatalf("%d bytes decode but the first decoding prefix is %d", p, L)
			case !okp && ok && p >= L:
				t.Fatalf("%d bytes do not decode, %d did", p, L)
			case okp && !bytes.Equal(resp, res):
				t.Fatalf("the first %d of %d bytes decode to\n%x\nthe whole to\n%x", p, len(args), resp, res)
			}
		}

		// The whole call through serveCallback: the same result.
		call := cbfCall(args)
		reply := cbfClient(false).serveCallback(call)
		n := cbfReplyHeader(t, reply)
		if ok != (n > 0) || ok && !bytes.Equal(reply[n:], res) {
			t.Fatalf("serveCallback answered %x to arguments that decode %t to %x", reply, ok, res)
		}

		// And on a client that holds the delegation: a CB_RECALL of it
		// succeeds, so decoding goes on past it and may fail where the
		// first stopped.
		cd := cbfClient(true)
		reply = cd.serveCallback(call)
		if n := cbfReplyHeader(t, reply); n > 0 {
			cbfCheckRes(t, args, reply[n:])
		}
		cd.cb.mu.Lock()
		recalled := len(cd.cb.delegs) == 0
		cd.cb.mu.Unlock()
		if recalled {
			// The DELEGRETURN goroutine fails at once (no session);
			// wait for it so that no goroutine outlives the input.
			select {
			case r := <-cd.Recalls():
				if r.Err == nil {
					t.Fatal("DELEGRETURN without a server succeeded")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no recall reported after an accepted CB_RECALL")
			}
		}
	})
}

// cbfReplyHeader checks the RPC reply to cbfCall and returns the offset
// of CB_COMPOUND4res (SUCCESS) or 0 (GARBAGE_ARGS).
func cbfReplyHeader(t *testing.T, reply []byte) int {
	t.Helper()
	var rh oncrpc.ReplyHeader
	n, err := rh.Decode(reply)
	switch {
	case err != nil || rh.XID != 0xcb || rh.Stat != oncrpc.MsgAccepted:
		t.Fatalf("reply %x: %v", reply, err)
	case rh.AcceptStat == oncrpc.GarbageArgs && n == len(reply):
		return 0
	case rh.AcceptStat != oncrpc.Success:
		t.Fatalf("reply %x: accept status %v", reply, rh.AcceptStat)
	}
	return n
}

// cbfCall wraps CB_COMPOUND arguments in an RPC call.
func cbfCall(args []byte) []byte {
	h := oncrpc.CallHeader{XID: 0xcb, RPCVers: oncrpc.RPCVersion, Prog: CBProgram, Vers: 1, Proc: 1,
		Cred: oncrpc.NullAuth, Verf: oncrpc.NullAuth}
	e := xdr.NewEncoder(make([]byte, 64+len(args)))
	_ = h.Encode(&e)
	return append(e.Bytes(), args...)
}

// cbfCheckRes checks a CB_COMPOUND4res against the arguments it answers:
// the tag echoed, no more results than operations, the status that of
// the last result (or MINOR_VERS_MISMATCH with none), every result but
// the last NFS4_OK, a successful CB_SEQUENCE only first and carrying the
// request's session, sequence and slot, and nothing after the results.
func cbfCheckRes(t *testing.T, args, res []byte) {
	t.Helper()
	da := nfsproto.NewDec(args)
	tag := da.Opaque(opaqueLimit)
	minor := da.Uint32()
	da.Uint32()
	nops := da.Uint32()
	var seqSID []byte
	var seq, slot uint32
	if da.Uint32() == opCBSequence {
		seqSID = da.FixedOpaque(sessionIDLen)
		seq, slot = da.Uint32(), da.Uint32()
	}

	d := nfsproto.NewDec(res)
	status := d.Uint32()
	if got := d.Opaque(opaqueLimit); d.Err() != nil || !bytes.Equal(got, tag) {
		t.Fatalf("tag %q, want %q (%v)", got, tag, d.Err())
	}
	nres := d.Uint32()
	if d.Err() != nil || nres > nops {
		t.Fatalf("%d results for %d operations (%v)", nres, nops, d.Err())
	}
	if minor != 1 && minor != 2 {
		if status != nfs4ErrMinorVers || nres != 0 {
			t.Fatalf("minor version %d: status %d, %d results", minor, status, nres)
		}
	}
	last := uint32(NFS4OK)
	for i := range nres {
		if last != uint32(NFS4OK) {
			t.Fatalf("result %d follows a failed one (%d)", i, last)
		}
		op, st := d.Uint32(), d.Uint32()
		if op == opCBSequence && st == uint32(NFS4OK) {
			if i != 0 {
				t.Fatalf("CB_SEQUENCE succeeded at position %d", i)
			}
			body := d.FixedOpaque(sessionIDLen + 16)
			if d.Err() != nil || !bytes.Equal(body[:sessionIDLen], seqSID) ||
				binary.BigEndian.Uint32(body[16:]) != seq || binary.BigEndian.Uint32(body[20:]) != slot {
				t.Fatalf("CB_SEQUENCE result %x for session %x seq %d slot %d", body, seqSID, seq, slot)
			}
		}
		last = st
	}
	if d.Err() != nil || d.Len() != 0 {
		t.Fatalf("CB_COMPOUND4res: %v, %d bytes left", d.Err(), d.Len())
	}
	if nres > 0 && status != last {
		t.Fatalf("status %d, last result %d", status, last)
	}
}

// cbfSeedsFailing are the seeds that must not decode.
var cbfSeedsFailing = map[string]bool{"truncated-recall": true, "too-many-ops": true, "huge-tag": true,
	"huge-referring-lists": true, "huge-bitmap": true, "empty": true}

// The seed corpus on disk is what cbfSeeds builds (CBF_UPDATE=1 writes
// it), and each seed decodes or fails as its name says.
func TestCallbackFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzCBCompoundArgs")
	for name, b := range cbfSeeds() {
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", string(b))
		path := filepath.Join(dir, name)
		if os.Getenv("CBF_UPDATE") != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Errorf("%s is not what cbfSeeds builds (%v); run with CBF_UPDATE=1", path, err)
		}
		if ok, _ := cbfRun(b); ok == cbfSeedsFailing[name] {
			t.Errorf("seed %s: decodes %t", name, ok)
		}
	}
}
