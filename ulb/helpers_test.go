package ulb

// Shared test helpers: an XDR message builder, and a walk driver that
// feeds a message to a Walker the way a socket reader would, whole or in
// pieces, checking the Walker's contract at every step.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rdmagw/rdmagw/xdr"
)

// xmsg builds XDR bytes with the xdr package's encoder, growing its
// buffer as needed.
type xmsg struct {
	e xdr.Encoder
}

func newXmsg() *xmsg {
	m := &xmsg{}
	m.e = xdr.NewEncoder(make([]byte, 512))
	return m
}

// room makes sure n more bytes fit.
func (m *xmsg) room(n int) *xmsg {
	if m.e.Available() >= n {
		return m
	}
	old := m.e.Bytes()
	buf := make([]byte, 2*(len(old)+n))
	m.e = xdr.NewEncoder(buf)
	copy(m.e.Reserve(len(old)), old)
	return m
}

func (m *xmsg) u32(v uint32) *xmsg       { m.room(4).e.PutUint32(v); return m }
func (m *xmsg) u64(v uint64) *xmsg       { m.room(8).e.PutUint64(v); return m }
func (m *xmsg) boolean(v bool) *xmsg     { m.room(4).e.PutBool(v); return m }
func (m *xmsg) opaque(b []byte) *xmsg    { m.room(8 + len(b)).e.PutOpaque(b); return m }
func (m *xmsg) str(s string) *xmsg       { m.room(8 + len(s)).e.PutString(s); return m }
func (m *xmsg) fixed(b []byte) *xmsg     { m.room(4 + len(b)).e.PutFixedOpaque(b); return m }
func (m *xmsg) zeros(n int) *xmsg        { return m.fixed(make([]byte, n)) }
func (m *xmsg) raw(b []byte) *xmsg       { copy(m.room(len(b)).e.Reserve(len(b)), b); return m }
func (m *xmsg) len() int                 { return m.e.Len() }
func (m *xmsg) then(f func(*xmsg)) *xmsg { f(m); return m }

func (m *xmsg) bytes() []byte {
	if err := m.e.Err(); err != nil {
		panic(err)
	}
	return slices.Clone(m.e.Bytes())
}

// filler returns n bytes of a recognisable pattern.
func filler(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

// walkTarget names the message a walk is about.
type walkTarget struct {
	dir              Direction
	prog, vers, proc uint32
}

func (t walkTarget) String() string {
	d := "call"
	if t.dir == Reply {
		d = "reply"
	}
	return fmt.Sprintf("%s %d/%d/%s", d, t.prog, t.vers, ProcName(t.prog, t.vers, t.proc))
}

// walkResult is what walking one message found: its items with offsets
// made absolute (from the start of the message), and how the walk ended:
// "done", "need N" (absolute length the message falls short of), "body N"
// (an item's body runs past the message end, at N), or "error: ...".
type walkResult struct {
	items []Item
	end   string
}

func (r walkResult) String() string {
	var s strings.Builder
	for _, it := range r.items {
		fmt.Fprintf(&s, "%v@%d+%d(pad %d, op %d, #%d) ", it.Kind, it.LenOffset, it.Length, it.Pad, it.Op, it.Index)
	}
	return s.String() + r.end
}

func (r walkResult) equal(o walkResult) bool {
	return r.end == o.end && slices.Equal(r.items, o.items)
}

// walkPieces walks msg as a socket reader would: the bytes arrive in
// pieces ending at cuts (ascending, then the message end); on StepNeedMore
// the next piece is read; on StepItem the body is landed elsewhere (so the
// next slice starts after it, wherever the pieces were cut). It fails tb
// when a step breaks the Walker contract.
func walkPieces(tb testing.TB, t walkTarget, msg []byte, cuts []int) walkResult {
	tb.Helper()
	var w Walker
	if err := w.Reset(t.dir, t.prog, t.vers, t.proc); err != nil {
		tb.Fatalf("%v: Reset: %v", t, err)
	}
	var r walkResult
	start, avail := 0, 0
	nextPiece := func() bool {
		for _, c := range cuts {
			if c > avail && c <= len(msg) {
				avail = c
				return true
			}
		}
		if avail < len(msg) {
			avail = len(msg)
			return true
		}
		return false
	}
	nextPiece()
	for steps := 0; ; steps++ {
		if steps > 4*len(msg)+16 {
			tb.Fatalf("%v: walk does not end: %v", t, r)
		}
		b := msg[start:avail]
		st, err := w.Next(b)
		if err != nil {
			var we *WalkError
			if !errors.As(err, &we) || !errors.Is(err, ErrGarbage) {
				tb.Fatalf("%v: error %v is not a *WalkError wrapping ErrGarbage", t, err)
			}
			if we.Offset < start || we.Offset > avail {
				tb.Fatalf("%v: error offset %d outside the slice [%d,%d]", t, we.Offset, start, avail)
			}
			r.end = "error: " + err.Error()
			return r
		}
		if st.Consumed < 0 || st.Consumed > len(b) {
			tb.Fatalf("%v: consumed %d of a %d-byte slice", t, st.Consumed, len(b))
		}
		switch st.Kind {
		case StepDone:
			r.end = "done"
			if again, err := w.Next(msg[start+st.Consumed : avail]); err != nil || again.Kind != StepDone {
				tb.Fatalf("%v: Next after StepDone gave %+v, %v", t, again, err)
			}
			return r
		case StepNeedMore:
			if st.Consumed != 0 {
				tb.Fatalf("%v: StepNeedMore consumed %d", t, st.Consumed)
			}
			if st.Need <= len(b) {
				tb.Fatalf("%v: StepNeedMore needs %d with %d bytes at hand", t, st.Need, len(b))
			}
			if !nextPiece() {
				r.end = "need " + strconv.Itoa(start+st.Need)
				return r
			}
		case StepItem:
			it := st.Item
			if it.Offset != it.LenOffset+4 || it.Offset != st.Consumed || it.Offset > len(b) || it.LenOffset < 0 {
				tb.Fatalf("%v: item %+v inconsistent with consumed %d of %d", t, it, st.Consumed, len(b))
			}
			if it.Length < 0 || it.Pad != xdr.Pad(it.Length) {
				tb.Fatalf("%v: item %+v has a bad length or pad", t, it)
			}
			if it.Index != len(r.items) {
				tb.Fatalf("%v: item index %d, want %d", t, it.Index, len(r.items))
			}
			if got := binaryLen(b[it.LenOffset:]); got != it.Length {
				tb.Fatalf("%v: item length %d, but the length word says %d", t, it.Length, got)
			}
			it.LenOffset += start
			it.Offset += start
			r.items = append(r.items, it)
			start = it.Offset + it.Length + it.Pad
			if start > len(msg) {
				r.end = "body " + strconv.Itoa(start)
				return r
			}
			if w.Offset() != start {
				tb.Fatalf("%v: Walker.Offset %d, want %d", t, w.Offset(), start)
			}
			avail = max(avail, start)
		default:
			tb.Fatalf("%v: unknown step kind %d", t, st.Kind)
		}
	}
}

func binaryLen(b []byte) int {
	return int(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
}

// walkWhole walks msg handed over in one piece.
func walkWhole(tb testing.TB, t walkTarget, msg []byte) walkResult {
	tb.Helper()
	return walkPieces(tb, t, msg, nil)
}

// checkSplits is the restartability property: walking msg split at any
// one point, and byte by byte, finds what walking it whole finds.
func checkSplits(tb testing.TB, t walkTarget, msg []byte) walkResult {
	tb.Helper()
	whole := walkWhole(tb, t, msg)
	for cut := 0; cut <= len(msg); cut++ {
		if got := walkPieces(tb, t, msg, []int{cut}); !got.equal(whole) {
			tb.Fatalf("%v: split at %d:\n got %v\nwant %v", t, cut, got, whole)
		}
	}
	every := make([]int, len(msg)+1)
	for i := range every {
		every[i] = i
	}
	if got := walkPieces(tb, t, msg, every); !got.equal(whole) {
		tb.Fatalf("%v: byte by byte:\n got %v\nwant %v", t, got, whole)
	}
	return whole
}

// writeCorpus writes one seed file in the "go test fuzz v1" format under
// testdata/fuzz/<target>/ when the ULB_WRITE_CORPUS environment variable
// is set (how the committed seed files were made); otherwise it does
// nothing. Values may be bool, uint8, uint32 or []byte.
func writeCorpus(tb testing.TB, target, name string, values ...any) {
	tb.Helper()
	if os.Getenv("ULB_WRITE_CORPUS") == "" {
		return
	}
	var s strings.Builder
	s.WriteString("go test fuzz v1\n")
	for _, v := range values {
		switch v := v.(type) {
		case bool:
			fmt.Fprintf(&s, "bool(%v)\n", v)
		case uint8:
			fmt.Fprintf(&s, "byte(%q)\n", v)
		case uint32:
			fmt.Fprintf(&s, "uint32(%d)\n", v)
		case []byte:
			fmt.Fprintf(&s, "[]byte(%q)\n", v)
		default:
			tb.Fatalf("writeCorpus: unsupported %T", v)
		}
	}
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(s.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// goldenDir holds real captures (see its README): each X.bin is one ONC
// RPC record with its record-marking header, X.txt its tshark sidecar.
const goldenDir = "../testdata/golden"

// golden is one captured RPC message, split at the start of the
// procedure arguments or results (where a Walker starts).
type golden struct {
	name             string
	t                walkTarget
	msg              []byte // the RPC message, without record marking
	body             []byte // msg[bodyAt:]: arguments or results
	bodyAt           int    // offset of body in msg
	sidecar          map[string]string
	sidecarToMessage int // subtract from sidecar offsets (the .bin's record mark)
}

// sidecarInt returns an integer sidecar key, and whether it is there.
func (g *golden) sidecarInt(tb testing.TB, key string) (int, bool) {
	tb.Helper()
	v, ok := g.sidecar[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 0, 64)
	if err != nil {
		tb.Fatalf("%s: sidecar %s=%q: %v", g.name, key, v, err)
	}
	return int(n), true
}

// loadGolden reads testdata/golden/<name>.bin and .txt, skipping the test
// when the captures are absent. The RPC header is decoded here, by the
// xdr package, as RFC 5531 lays it out:
//
//	call:  xid, CALL(0), rpcvers, prog, vers, proc, cred, verf | args
//	reply: xid, REPLY(1), MSG_ACCEPTED(0), verf, SUCCESS(0)     | results
//
// where cred and verf are opaque_auth { flavor; opaque body<400> }.
// Replies carry no program or procedure: they come from the sidecar.
func loadGolden(tb testing.TB, name string) golden {
	tb.Helper()
	rec, err := os.ReadFile(filepath.Join(goldenDir, name+".bin"))
	if errors.Is(err, os.ErrNotExist) {
		tb.Skipf("golden capture %s not present", name)
	}
	if err != nil {
		tb.Fatal(err)
	}
	txt, err := os.ReadFile(filepath.Join(goldenDir, name+".txt"))
	if err != nil {
		tb.Fatal(err)
	}
	g := golden{name: name, sidecar: map[string]string{}, sidecarToMessage: 4}
	sc := bufio.NewScanner(bytes.NewReader(txt))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			g.sidecar[k] = v
		}
	}
	if len(rec) < 4 || int(binaryLen(rec)&0x7fffffff) != len(rec)-4 || rec[0]&0x80 == 0 {
		tb.Fatalf("%s: not one whole single-fragment record", name)
	}
	g.msg = rec[4:]
	d := xdr.NewDecoder(g.msg)
	words := func(n int) []uint32 {
		w := make([]uint32, n)
		for i := range w {
			v, err := d.Uint32()
			if err != nil {
				tb.Fatalf("%s: RPC header: %v", name, err)
			}
			w[i] = v
		}
		return w
	}
	auth := func() {
		words(1)
		if err := d.SkipOpaque(400); err != nil {
			tb.Fatalf("%s: RPC header auth: %v", name, err)
		}
	}
	h := words(2)
	switch h[1] {
	case 0:
		c := words(4)
		if c[0] != 2 {
			tb.Fatalf("%s: rpcvers %d", name, c[0])
		}
		g.t = walkTarget{Call, c[1], c[2], c[3]}
		auth()
		auth()
	case 1:
		if words(1)[0] != 0 {
			tb.Fatalf("%s: reply not MSG_ACCEPTED", name)
		}
		auth()
		if words(1)[0] != 0 {
			tb.Fatalf("%s: accept_stat not SUCCESS", name)
		}
		var pv [3]int
		for i, k := range []string{"rpc.program", "rpc.programversion", "rpc.procedure"} {
			n, ok := g.sidecarInt(tb, k)
			if !ok {
				tb.Fatalf("%s: sidecar lacks %s", name, k)
			}
			pv[i] = n
		}
		g.t = walkTarget{Reply, uint32(pv[0]), uint32(pv[1]), uint32(pv[2])}
	default:
		tb.Fatalf("%s: msg_type %d", name, h[1])
	}
	g.bodyAt = d.Offset()
	g.body = g.msg[g.bodyAt:]
	return g
}

// goldenNames lists the captures whose names start with prefix.
func goldenNames(tb testing.TB, prefix string) []string {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join(goldenDir, prefix+"*.bin"))
	if len(files) == 0 {
		tb.Skipf("no golden captures %s*", prefix)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".bin"))
	}
	return names
}

// checkGoldenItem checks that the walk r of capture g found exactly the
// item tshark found: its length word at lenAt (sidecar offset), of kind
// and in operation op, with the sidecar's length, pad and text.
func checkGoldenItem(t *testing.T, g golden, r walkResult, lenAt int, kind Kind, op int) {
	t.Helper()
	n, _ := g.sidecarInt(t, "data.len")
	pad, _ := g.sidecarInt(t, "data.pad")
	at := lenAt - g.sidecarToMessage - g.bodyAt
	want := Item{Kind: kind, LenOffset: at, Offset: at + 4, Length: n, Pad: pad, Op: op}
	if len(r.items) != 1 || r.items[0] != want {
		t.Fatalf("items %v, want %+v", r, want)
	}
	if text, ok := g.sidecar["data.text"]; ok {
		if got := string(g.body[want.Offset : want.Offset+n]); got != text {
			t.Fatalf("item body %q, want %q", got, text)
		}
	}
}

// checkGoldenEstimates checks each captured call among names (X-call,
// with its X-reply) against the reply the server really sent: the reply
// without its eligible items fits Inline, and each item fits its Write
// chunk.
func checkGoldenEstimates(t *testing.T, names []string) {
	for _, name := range names {
		base, ok := strings.CutSuffix(name, "-call")
		if !ok {
			continue
		}
		t.Run(base, func(t *testing.T) {
			call := loadGolden(t, name)
			reply := loadGolden(t, base+"-reply")
			e, err := EstimateReply(call.t.prog, call.t.vers, call.t.proc, call.body)
			if err != nil {
				t.Fatal(err)
			}
			r := walkWhole(t, reply.t, reply.body)
			inline := len(reply.msg)
			for _, it := range r.items {
				inline -= it.Length + it.Pad
			}
			if inline > e.Inline {
				t.Fatalf("reply holds %d bytes inline, estimate %d", inline, e.Inline)
			}
			if len(r.items) > e.NItems {
				t.Fatalf("reply has %d items, estimate %d", len(r.items), e.NItems)
			}
			for i, it := range r.items {
				if it.Kind != e.ItemKind[i] || it.Length > e.ItemMax[i] {
					t.Fatalf("item %+v, estimate %v of %d", it, e.ItemKind[i], e.ItemMax[i])
				}
			}
			t.Logf("%s: inline %d of estimated %d (unpredictable %v), items %v", base, inline, e.Inline, e.Unpredictable, r)
		})
	}
}
