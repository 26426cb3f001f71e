package nfsclient

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/xdr"
)

// fuzzTransport answers every call with the same results (what follows
// the reply header), up to max calls; later calls fail.
type fuzzTransport struct {
	res   []byte
	calls int
	max   int
}

var errFuzzDone = errors.New("fuzz transport: no more replies")

func (t *fuzzTransport) Call(ctx context.Context, prog, vers, proc uint32, args []byte) ([]byte, error) {
	t.calls++
	if t.calls > t.max {
		return nil, errFuzzDone
	}
	return t.res, nil
}

func (t *fuzzTransport) Close() error { return nil }

// fuzzMaxCalls bounds the calls one decoder run makes (READDIRPLUS
// follows cookies, CREATE may LOOKUP, Setup runs three COMPOUNDs).
const fuzzMaxCalls = 3

// prefixCuts are the truncations of a reply each target tries.
func prefixCuts(n int) []int {
	cuts := []int{0, n / 2, n - 1, n - 4}
	out := cuts[:0]
	for _, c := range cuts {
		if c >= 0 && c < n {
			out = append(out, c)
		}
	}
	return out
}

// checkPrefixes runs decode over res and over truncations of it. The
// decoders read the reply front to back, so a truncated reply that still
// decodes must decode to exactly what the whole one does: a decoder that
// turns missing bytes into zeros (instead of an error) or reads ahead of
// what it checked shows up here.
func checkPrefixes(t *testing.T, name string, res []byte, decode func(res []byte) (any, error)) (any, error) {
	full, err := decode(res)
	for _, cut := range prefixCuts(len(res)) {
		got, perr := decode(res[:cut])
		if perr != nil {
			continue
		}
		if err != nil {
			t.Fatalf("%s: %d of %d bytes decode but the whole reply fails: %v", name, cut, len(res), err)
		}
		if !reflect.DeepEqual(got, full) {
			t.Fatalf("%s: %d of %d bytes decode differently:\n got %#v\nwant %#v", name, cut, len(res), got, full)
		}
	}
	return full, err
}

// v3Op is one NFSv3 or MOUNT client method under fuzz.
type v3Op struct {
	name string
	run  func(ctx context.Context, v3 *V3, m *Mount) (any, error)
}

var fuzzFH = []byte{1, 2, 3, 4, 5, 6, 7, 8}

var v3Ops = []v3Op{
	{"GETATTR", func(ctx context.Context, c *V3, _ *Mount) (any, error) { return c.Getattr(ctx, fuzzFH) }},
	{"SETATTR", func(ctx context.Context, c *V3, _ *Mount) (any, error) {
		return nil, c.Setattr(ctx, fuzzFH, nfsproto.Sattr3{SetMode: true, Mode: 0o600})
	}},
	{"LOOKUP", func(ctx context.Context, c *V3, _ *Mount) (any, error) {
		fh, a, err := c.Lookup(ctx, fuzzFH, "name")
		return []any{fh, a}, err
	}},
	{"ACCESS", func(ctx context.Context, c *V3, _ *Mount) (any, error) {
		return c.Access(ctx, fuzzFH, nfsproto.Access3All)
	}},
	{"READLINK", func(ctx context.Context, c *V3, _ *Mount) (any, error) { return c.Readlink(ctx, fuzzFH) }},
	{"READ", func(ctx context.Context, c *V3, _ *Mount) (any, error) {
		data, eof, err := c.Read(ctx, fuzzFH, 0, 4096)
		return []any{data, eof}, err
	}},
	{"WRITE", func(ctx context.Context, c *V3, _ *Mount) (any, error) {
		return c.Write(ctx, fuzzFH, 0, []byte("hello"), nfsproto.Unstable)
	}},
	{"COMMIT", func(ctx context.Context, c *V3, _ *Mount) (any, error) { return c.Commit(ctx, fuzzFH, 0, 0) }},
	{"CREATE", func(ctx context.Context, c *V3, _ *Mount) (any, error) {
		return c.Create(ctx, fuzzFH, "f", nfsproto.CreateGuarded, nfsproto.Sattr3{})
	}},
	{"MKDIR", func(ctx context.Context, c *V3, _ *Mount) (any, error) { return c.Mkdir(ctx, fuzzFH, "d", 0o755) }},
	{"SYMLINK", func(ctx context.Context, c *V3, _ *Mount) (any, error) { return c.Symlink(ctx, fuzzFH, "l", "target") }},
	{"REMOVE", func(ctx context.Context, c *V3, _ *Mount) (any, error) { return nil, c.Remove(ctx, fuzzFH, "f") }},
	{"RMDIR", func(ctx context.Context, c *V3, _ *Mount) (any, error) { return nil, c.Rmdir(ctx, fuzzFH, "d") }},
	{"RENAME", func(ctx context.Context, c *V3, _ *Mount) (any, error) {
		return nil, c.Rename(ctx, fuzzFH, "a", fuzzFH, "b")
	}},
	{"READDIRPLUS", func(ctx context.Context, c *V3, _ *Mount) (any, error) { return c.ReadDirPlus(ctx, fuzzFH, 0) }},
	{"FSSTAT", func(ctx context.Context, c *V3, _ *Mount) (any, error) { return c.Fsstat(ctx, fuzzFH) }},
	{"FSINFO", func(ctx context.Context, c *V3, _ *Mount) (any, error) { return c.Fsinfo(ctx, fuzzFH) }},
	{"PATHCONF", func(ctx context.Context, c *V3, _ *Mount) (any, error) { return c.Pathconf(ctx, fuzzFH) }},
	{"MNT", func(ctx context.Context, _ *V3, m *Mount) (any, error) {
		fh, flavors, err := m.Mnt(ctx, "/export")
		return []any{fh, flavors}, err
	}},
	{"EXPORT", func(ctx context.Context, _ *V3, m *Mount) (any, error) { return m.Exports(ctx) }},
	{"NULL", func(ctx context.Context, c *V3, _ *Mount) (any, error) { return nil, c.Null(ctx) }},
	{"UMNT", func(ctx context.Context, _ *V3, m *Mount) (any, error) { return nil, m.Umnt(ctx, "/export") }},
}

// v3OpIndex maps a golden capture's procedure to its v3Ops entry.
func v3OpIndex(name string) uint8 {
	for i, op := range v3Ops {
		if op.name == name {
			return uint8(i)
		}
	}
	panic(name)
}

// goldenResults reads a TCP capture from testdata/golden and returns the
// results after its record mark and accepted-SUCCESS reply header, as a
// Transport returns them.
func goldenResults(tb testing.TB, name string) []byte {
	b, err := readGolden(name)
	if err != nil {
		tb.Fatal(err)
	}
	var h oncrpc.ReplyHeader
	n, err := h.Decode(b[4:])
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return b[4+n:]
}

func readGolden(name string) ([]byte, error) {
	return os.ReadFile("../../testdata/golden/" + name)
}

// FuzzV3Reply feeds arbitrary results to every NFSv3 and MOUNT v3 reply
// decoder of the client (op selects the procedure). None may panic; the
// entries, flavors and exports a reply yields are bounded by its size
// (a count of 2^31 allocates nothing); and truncations of the reply
// either fail or decode identically (checkPrefixes).
func FuzzV3Reply(f *testing.F) {
	for _, g := range []struct{ file, op string }{
		{"nfs3-getattr-reply.bin", "GETATTR"},
		{"nfs3-read-reply.bin", "READ"},
		{"nfs3-read13-reply.bin", "READ"},
		{"nfs3-write-reply.bin", "WRITE"},
		{"nfs3-write13-reply.bin", "WRITE"},
		{"nfs3-commit-reply.bin", "COMMIT"},
		{"nfs3-readlink-reply.bin", "READLINK"},
		{"nfs3-symlink-reply.bin", "SYMLINK"},
		{"nfs3-readdirplus-reply.bin", "READDIRPLUS"},
		{"nfs3-null-reply.bin", "NULL"},
		{"mount3-mnt-reply.bin", "MNT"},
	} {
		f.Add(v3OpIndex(g.op), goldenResults(f, g.file))
	}
	// A READDIRPLUS reply claiming more entries than it holds, and a MNT
	// reply claiming 2^31 flavors.
	f.Add(v3OpIndex("READDIRPLUS"), []byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 1})
	f.Add(v3OpIndex("MNT"), []byte{0, 0, 0, 0, 0, 0, 0, 4, 1, 2, 3, 4, 0x80, 0, 0, 0, 0, 0, 0, 1})
	f.Add(v3OpIndex("EXPORT"), []byte{0, 0, 0, 1, 0, 0, 0, 1, '/', 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, '*', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, k uint8, res []byte) {
		op := v3Ops[int(k)%len(v3Ops)]
		decode := func(res []byte) (any, error) {
			ft := &fuzzTransport{res: res, max: fuzzMaxCalls}
			return op.run(context.Background(), &V3{T: ft}, &Mount{T: ft})
		}
		v, err := checkPrefixes(t, op.name, res, decode)
		if err != nil {
			return
		}
		// What a reply yields is bounded by its bytes, over all the calls.
		total := fuzzMaxCalls * len(res)
		switch op.name {
		case "READDIRPLUS":
			// entry: value_follows, fileid, name, cookie, two bools.
			if x := v.([]DirEntry); len(x) > total/32 {
				t.Fatalf("%d entries from %d bytes", len(x), len(res))
			}
		case "EXPORT":
			x := v.([]Export)
			n := len(x)
			for _, ex := range x {
				n += len(ex.Groups)
			}
			if n > total/8 {
				t.Fatalf("%d exports and groups from %d bytes", n, len(res))
			}
		case "MNT":
			x := v.([]any)
			if fh := x[0].([]byte); len(fh) > nfsproto.FHSize {
				t.Fatalf("handle of %d bytes", len(fh))
			}
			if fl := x[1].([]uint32); len(fl) > len(res)/4 {
				t.Fatalf("%d flavors from %d bytes", len(fl), len(res))
			}
		}
	})
}

// v4Op is one NFSv4.1 client operation under fuzz.
type v4Op struct {
	name string
	run  func(ctx context.Context, c *V4) (any, error)
}

var fuzzOpen = &Open4{FH: fuzzFH, Stateid: [stateidLen]byte{0, 0, 0, 1, 2, 3}}

var v4Ops = []v4Op{
	{"LOOKUPPATH", func(ctx context.Context, c *V4) (any, error) {
		fh, a, err := c.LookupPath(ctx, "a/b")
		return []any{fh, a}, err
	}},
	{"GETATTR", func(ctx context.Context, c *V4) (any, error) { return c.Getattr(ctx, fuzzFH) }},
	{"OPEN", func(ctx context.Context, c *V4) (any, error) { return c.Open(ctx, fuzzFH, "f", true) }},
	{"OPEN_DELEG", func(ctx context.Context, c *V4) (any, error) {
		f, dg, err := c.OpenReadDeleg(ctx, fuzzFH, "f")
		return []any{f, dg}, err
	}},
	{"WRITE", func(ctx context.Context, c *V4) (any, error) {
		return c.Write(ctx, fuzzOpen, 0, []byte("hello"), nfsproto.Unstable)
	}},
	{"READ", func(ctx context.Context, c *V4) (any, error) {
		data, eof, err := c.Read(ctx, fuzzOpen, 0, 4096)
		return []any{data, eof}, err
	}},
	{"COMMIT", func(ctx context.Context, c *V4) (any, error) { return c.Commit(ctx, fuzzOpen) }},
	{"CLOSE", func(ctx context.Context, c *V4) (any, error) { return nil, c.Close(ctx, fuzzOpen) }},
	{"REMOVE", func(ctx context.Context, c *V4) (any, error) { return nil, c.Remove(ctx, fuzzFH, "f") }},
	{"DELEGRETURN", func(ctx context.Context, c *V4) (any, error) {
		return nil, c.DelegReturn(ctx, &Delegation{FH: fuzzFH})
	}},
	{"EXCHANGE_ID", func(ctx context.Context, c *V4) (any, error) {
		seq, err := c.exchangeID(ctx)
		return []any{seq, c.clientID}, err
	}},
	{"CREATE_SESSION", func(ctx context.Context, c *V4) (any, error) {
		err := c.createSession(ctx, 1)
		return []any{c.session, c.nslots}, err
	}},
	{"DESTROY_SESSION", func(ctx context.Context, c *V4) (any, error) { return nil, c.DestroySession(ctx) }},
	{"SETUP", func(ctx context.Context, c *V4) (any, error) {
		err := c.Setup(ctx)
		return []any{c.clientID, c.session, c.nslots, c.SeqStatusFlags()}, err
	}},
}

func v4OpIndex(name string) uint8 {
	for i, op := range v4Ops {
		if op.name == name {
			return uint8(i)
		}
	}
	panic(name)
}

// FuzzV4Compound feeds arbitrary COMPOUND4res bodies to every NFSv4.1
// operation of the client (op selects it), on a client with a session
// of a few slots. Nothing may panic or block, the slot count taken from
// CREATE_SESSION stays within maxSlots, and truncations of the reply
// either fail or decode identically (checkPrefixes).
func FuzzV4Compound(f *testing.F) {
	for _, g := range []struct{ file, op string }{
		{"nfs41-getattr-compound-reply.bin", "GETATTR"},
		{"nfs41-open-compound-reply.bin", "OPEN"},
		{"nfs41-open-compound-reply.bin", "OPEN_DELEG"},
		{"nfs41-read-compound-reply.bin", "READ"},
		{"nfs41-read13-compound-reply.bin", "READ"},
		{"nfs41-write-compound-reply.bin", "WRITE"},
		{"nfs41-write13-compound-reply.bin", "WRITE"},
		{"nfs41-commit-compound-reply.bin", "COMMIT"},
		{"nfs41-exchange-id-reply.bin", "EXCHANGE_ID"},
		{"nfs41-create-session-reply.bin", "CREATE_SESSION"},
		{"nfs41-sequence-reply.bin", "CLOSE"},
		{"nfs41-reclaim-complete-reply.bin", "SETUP"},
		{"nfs41-readlink-compound-reply.bin", "LOOKUPPATH"},
	} {
		f.Add(v4OpIndex(g.op), goldenResults(f, g.file))
	}
	f.Fuzz(func(t *testing.T, k uint8, res []byte) {
		op := v4Ops[int(k)%len(v4Ops)]
		var last *V4
		decode := func(res []byte) (any, error) {
			c := &V4{T: &fuzzTransport{res: res, max: fuzzMaxCalls}, Owner: "fuzz", nslots: 2}
			c.slots = make(chan *slot, c.nslots)
			for i := range c.nslots {
				c.slots <- &slot{id: uint32(i), seq: 1}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			v, err := op.run(ctx, c)
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s blocked", op.name)
			}
			last = c
			return v, err
		}
		if _, err := checkPrefixes(t, op.name, res, decode); err != nil {
			return
		}
		if _, err := decode(res); err == nil && (last.nslots < 1 || last.nslots > maxSlots) {
			t.Fatalf("%d slots", last.nslots)
		}
	})
}

// encodeFattr4 writes a as a fattr4 with every attribute Attr4 holds.
func encodeFattr4(e *xdr.Encoder, a Attr4) {
	e.PutUint32(2)
	e.PutUint32(attr4Want[0])
	e.PutUint32(attr4Want[1])
	e.PutUint32(4 + 8 + 8 + 8 + 4 + 4 + 12)
	e.PutUint32(a.Type)
	e.PutUint64(a.Change)
	e.PutUint64(a.Size)
	e.PutUint64(a.FileID)
	e.PutUint32(a.Mode)
	e.PutUint32(a.NumLinks)
	e.PutUint64(uint64(a.Mtime.Sec))
	e.PutUint32(a.Mtime.Nsec)
}

// FuzzDecodeFattr4 decodes arbitrary fattr4s: no panic, a bitmap of
// more than 8 words or an attribute we did not ask for fails, values
// missing from attr_vals fail, and an encoded Attr4 decodes back.
func FuzzDecodeFattr4(f *testing.F) {
	seed := func(a Attr4) []byte {
		e := xdr.NewEncoder(make([]byte, 128))
		encodeFattr4(&e, a)
		return e.Bytes()
	}
	f.Add(seed(Attr4{Type: 1, Change: 2, Size: 3, FileID: 4, Mode: 0o644, NumLinks: 1, Mtime: nfsproto.Time{Sec: 5, Nsec: 6}}))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0x12, 0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		d := nfsproto.NewDec(in)
		a := decodeFattr4(d)
		if d.Err() != nil {
			return
		}
		for cut := range d.Offset() {
			d2 := nfsproto.NewDec(in[:cut])
			decodeFattr4(d2)
			if d2.Err() == nil {
				t.Fatalf("%d of %d bytes decode", cut, d.Offset())
			}
		}
		// What was decoded encodes (attributes absent being zero) and
		// decodes back.
		b := seed(a)
		d3 := nfsproto.NewDec(b)
		if got := decodeFattr4(d3); d3.Err() != nil || got != a || d3.Len() != 0 {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", d3.Err(), got, a)
		}
	})
}

// cbCall builds a callback RPC call (prog/vers/proc) with args.
func cbCall(vers, proc uint32, args []byte) []byte {
	h := oncrpc.CallHeader{XID: 7, RPCVers: oncrpc.RPCVersion, Prog: CBProgram, Vers: vers, Proc: proc,
		Cred: oncrpc.NullAuth, Verf: oncrpc.NullAuth}
	e := xdr.NewEncoder(make([]byte, 64+len(args)))
	_ = h.Encode(&e)
	return append(e.Bytes(), args...)
}

// fuzzSession is the session ID of the callback fuzz client.
var fuzzSession = [sessionIDLen]byte{0xa, 0xb, 0xc, 0xd, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}

// cbCompoundArgs builds CB_COMPOUND4args of a CB_SEQUENCE (slot 0,
// sequence seq) and, when recall, a CB_RECALL of the stateid other.
func cbCompoundArgs(seq uint32, recall bool, other []byte) []byte {
	e := xdr.NewEncoder(make([]byte, 512))
	e.PutString("tag")
	e.PutUint32(1) // minorversion
	e.PutUint32(0) // callback_ident
	n := uint32(1)
	if recall {
		n = 2
	}
	e.PutUint32(n)
	e.PutUint32(opCBSequence)
	e.PutFixedOpaque(fuzzSession[:])
	e.PutUint32(seq)
	e.PutUint32(0) // slot
	e.PutUint32(0) // highest slot
	e.PutBool(false)
	e.PutUint32(1) // one referring call list
	e.PutFixedOpaque(fuzzSession[:])
	e.PutUint32(1)
	e.PutUint32(1)
	e.PutUint32(0)
	if recall {
		e.PutUint32(opCBRecall)
		var st [stateidLen]byte
		copy(st[4:], other)
		e.PutFixedOpaque(st[:])
		e.PutBool(false)
		e.PutOpaque(fuzzFH)
	}
	return e.Bytes()
}

// cbSeqArgs returns the session, sequence and slot of the CB_SEQUENCE a
// callback call starts with (ok false when it does not).
func cbSeqArgs(call []byte) (sid string, seq, slot uint32, ok bool) {
	var h oncrpc.CallHeader
	n, err := h.Decode(call)
	if err != nil {
		return "", 0, 0, false
	}
	d := nfsproto.NewDec(call[n:])
	d.Opaque(opaqueLimit)
	d.Uint32()
	d.Uint32()
	if d.Uint32() == 0 || d.Uint32() != opCBSequence {
		return "", 0, 0, false
	}
	sid = string(d.FixedOpaque(sessionIDLen))
	seq, slot = d.Uint32(), d.Uint32()
	return sid, seq, slot, d.Err() == nil
}

// checkCBReply checks the reply to one callback call and reports
// whether it carries a successful CB_SEQUENCE.
func checkCBReply(t *testing.T, call, reply []byte) bool {
	if reply == nil {
		return false
	}
	var h oncrpc.ReplyHeader
	n, err := h.Decode(reply)
	if err != nil {
		t.Fatalf("reply header: %v", err)
	}
	var ch oncrpc.CallHeader
	if _, err := ch.Decode(call); err != nil {
		t.Fatalf("a call that does not decode was answered")
	}
	if h.XID != ch.XID {
		t.Fatalf("reply XID %#x to call %#x", h.XID, ch.XID)
	}
	if h.Stat != oncrpc.MsgAccepted || h.AcceptStat != oncrpc.Success || ch.Proc != 1 {
		return false
	}
	d := nfsproto.NewDec(reply[n:])
	d.Uint32() // status
	d.Opaque(opaqueLimit)
	nres := d.Uint32()
	if d.Err() != nil || nres > 64 {
		t.Fatalf("CB_COMPOUND4res: %v, %d results", d.Err(), nres)
	}
	seqOK := false
	for i := range nres {
		op, st := d.Uint32(), d.Uint32()
		if op == opCBSequence && st == uint32(NFS4OK) {
			body := d.FixedOpaque(sessionIDLen + 16)
			if i == 0 && d.Err() == nil {
				seqOK = true
				// The result names the request's session, sequence
				// and slot: a cached reply of another request would not.
				sid, seq, slot, ok := cbSeqArgs(call)
				if !ok || string(body[:sessionIDLen]) != sid ||
					binary.BigEndian.Uint32(body[16:]) != seq || binary.BigEndian.Uint32(body[20:]) != slot {
					t.Fatalf("CB_SEQUENCE result %x answers another request (seq %d slot %d)", body, seq, slot)
				}
			}
		}
	}
	if d.Err() != nil || d.Len() != 0 {
		t.Fatalf("CB_COMPOUND4res does not decode: %v, %d bytes left", d.Err(), d.Len())
	}
	return seqOK
}

// FuzzCallback feeds three arbitrary RPC calls, one after the other, to
// the NFSv4.1 callback service of one client (CB_NULL, CB_COMPOUND with
// CB_SEQUENCE, CB_RECALL, CB_GETATTR), then the third again. Nothing may
// panic; a reply is a whole RPC reply to that call's XID; a CB_COMPOUND
// answered SUCCESS carries a CB_COMPOUND4res that decodes, whose
// CB_SEQUENCE result is that of the call's own session, sequence and
// slot; and a retransmission gets the reply the slot cached.
func FuzzCallback(f *testing.F) {
	other := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	null := cbCall(1, 0, nil)
	seq1 := cbCall(1, 1, cbCompoundArgs(1, false, nil))
	seq2 := cbCall(1, 1, cbCompoundArgs(2, true, other))
	f.Add(null, seq1, seq2)
	f.Add(seq1, seq2, seq2)
	f.Add(seq1, seq1, cbCall(1, 1, cbCompoundArgs(5, true, []byte{9})))
	f.Add(cbCall(2, 1, nil), cbCall(1, 9, nil), null)
	// A CB_COMPOUND whose CB_SEQUENCE decodes but whose next operation
	// does not (GARBAGE_ARGS), then the same request whole: the slot
	// must not replay the reply cached for sequence 1.
	f.Add(seq1, seq2[:len(seq2)-3], seq2)
	f.Fuzz(func(t *testing.T, call1, call2, call3 []byte) {
		c := &V4{T: &fuzzTransport{max: 0}, session: fuzzSession}
		c.cbInit(2)
		dg := &Delegation{FH: fuzzFH}
		copy(dg.Stateid[4:], other)
		c.cb.delegs[[12]byte(other)] = dg
		checkCBReply(t, call1, c.serveCallback(call1))
		checkCBReply(t, call2, c.serveCallback(call2))
		reply := c.serveCallback(call3)
		seqOK := checkCBReply(t, call3, reply)
		again := c.serveCallback(call3)
		checkCBReply(t, call3, again)
		if seqOK && string(again) != string(reply) {
			t.Fatalf("retransmission answered differently:\n got %x\nwant %x", again, reply)
		}
	})
}

// FuzzParseReply decodes arbitrary reply records: an accepted SUCCESS
// gives the results as the tail of the record, anything else an error
// (an *RPCError for well-formed non-SUCCESS replies) — never a panic.
func FuzzParseReply(f *testing.F) {
	for _, name := range []string{"nfs3-getattr-reply.bin", "nfs3-readdirplus-reply.bin", "mount3-mnt-reply.bin",
		"nfs41-create-session-reply.bin"} {
		b, err := readGolden(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[4:])
	}
	for _, h := range []oncrpc.ReplyHeader{oncrpc.GarbageArgsReply(1), oncrpc.ProgMismatchReply(2, 3, 4),
		oncrpc.RPCMismatchReply(3), oncrpc.ProcUnavailReply(4)} {
		e := xdr.NewEncoder(make([]byte, 64))
		_ = h.Encode(&e)
		f.Add(e.Bytes())
	}
	f.Fuzz(func(t *testing.T, reply []byte) {
		res, err := parseReply(reply, nfsproto.ProgNFS, 3, 1)
		if err != nil {
			var re *RPCError
			if errors.As(err, &re) {
				_ = re.Error()
			}
			return
		}
		if len(res) > len(reply) || string(res) != string(reply[len(reply)-len(res):]) {
			t.Fatalf("results are not the record's tail")
		}
	})
}

// FuzzSpliceReply feeds arbitrary inline replies and Write chunk
// contents to spliceReply, which rebuilds the byte-stream reply of an
// RPC-over-RDMA READ or READLINK: no panic, and the result is bounded
// by what arrived (inline bytes plus chunk bytes plus padding).
func FuzzSpliceReply(f *testing.F) {
	for _, g := range []struct {
		file string
		proc uint8
	}{{"nfs3-read-reply.bin", nfsproto.NFS3Read}, {"nfs3-read13-reply.bin", nfsproto.NFS3Read},
		{"nfs3-readlink-reply.bin", nfsproto.NFS3Readlink}, {"nfs3-getattr-reply.bin", nfsproto.NFS3Getattr}} {
		b, err := readGolden(g.file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(g.proc, b[4:], []byte(nil))
	}
	// A READ reply reduced to its length word, the data in the chunk.
	inline := append(goldenHeader(), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 5)
	f.Add(uint8(nfsproto.NFS3Read), inline, []byte("hello"))
	f.Fuzz(func(t *testing.T, proc uint8, inline, chunk []byte) {
		res := rdmarpc.Result{Inline: inline}
		plan := rdmarpc.ReplyPlan{}
		if chunk != nil {
			res.Chunks = [][]byte{chunk}
			plan.WriteChunks = []int{len(chunk)}
		}
		out, err := spliceReply(&res, &plan, nfsproto.ProgNFS, 3, uint32(proc%nfsproto.NFS3NumProcs))
		if err != nil {
			return
		}
		if len(out) > len(inline)+len(chunk)+3 {
			t.Fatalf("%d bytes out of %d inline and %d in chunks", len(out), len(inline), len(chunk))
		}
	})
}

// goldenHeader is an accepted SUCCESS reply header (xid 1, AUTH_NONE).
func goldenHeader() []byte {
	h := oncrpc.AcceptedReply(1, oncrpc.Success)
	e := xdr.NewEncoder(make([]byte, 64))
	_ = h.Encode(&e)
	return e.Bytes()
}

// FuzzTCPStream feeds an arbitrary byte stream, as the server side of
// the connection, to the TCP transport while one call (XID 1) is in
// flight: record marking, reply matching and the reply header are
// parsed from peer bytes. The call must come back — with the matching
// reply's results or an error — once the stream ends, never hang.
func FuzzTCPStream(f *testing.F) {
	rec := func(parts ...[]byte) []byte {
		var body []byte
		for _, p := range parts {
			body = append(body, p...)
		}
		return append(binary.BigEndian.AppendUint32(nil, 1<<31|uint32(len(body))), body...)
	}
	g, err := readGolden("nfs3-getattr-reply.bin")
	if err != nil {
		f.Fatal(err)
	}
	withXID1 := append([]byte{}, g...)
	binary.BigEndian.PutUint32(withXID1[4:], 1)
	f.Add(withXID1)
	f.Add(append(rec(goldenHeader(), []byte{0, 0, 0, 0}), rec([]byte{0, 0, 0, 9})...))
	f.Add(append(rec(cbCall(1, 0, nil)), rec(goldenHeader())...))
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 1, 0x80, 0, 0, 0x18, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, stream []byte) {
		cc, sc := net.Pipe()
		tr := NewTCP(cc)
		tr.xids.next.Store(0) // the call below is XID 1
		go func() {
			go io.Copy(io.Discard, sc)
			sc.Write(stream)
			sc.Close()
		}()
		done := make(chan struct{})
		var res []byte
		var cerr error
		go func() {
			res, cerr = tr.Call(context.Background(), nfsproto.ProgNFS, 3, nfsproto.NFS3Getattr, fuzzFH)
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("call still pending after the stream ended")
		}
		tr.Close()
		if cerr == nil && len(res) > len(stream) {
			t.Fatalf("%d bytes of results from a %d-byte stream", len(res), len(stream))
		}
	})
}
