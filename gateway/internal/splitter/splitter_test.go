package splitter

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/verbs/iwarp"
)

const (
	testWindow   = 16 << 10
	testMaxClass = 64 << 10
)

func newPool(t testing.TB, maxBytes int) *rdmarpc.Pool {
	t.Helper()
	dev, err := iwarp.New(iwarp.Config{}).Open("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pd.Close() })
	p, err := rdmarpc.NewPool(pd, rdmarpc.PoolConfig{MaxBytes: maxBytes, Classes: []int{4096, testMaxClass}, SlabBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// be is a big-endian XDR appender for building test records.
type be []byte

func (b be) u32(v uint32) be { return binary.BigEndian.AppendUint32(b, v) }
func (b be) opaque(d []byte) be {
	b = b.u32(uint32(len(d)))
	b = append(b, d...)
	return append(b, make([]byte, -len(d)&3)...)
}

const (
	progNFS  = 100003
	procRead = 6 // NFSv3
	procWrt  = 7
	procRdl  = 5
)

// replyHeader is an accepted, successful RPC reply header (24 bytes).
func replyHeader(xid uint32) be { return be(nil).u32(xid).u32(1).u32(0).u32(0).u32(0).u32(0) }

// callHeader is an RPC call header with AUTH_NONE (40 bytes).
func callHeader(xid, proc uint32) be {
	return be(nil).u32(xid).u32(0).u32(2).u32(progNFS).u32(3).u32(proc).u32(0).u32(0).u32(0).u32(0)
}

// read3Reply is an NFSv3 READ reply carrying data.
func read3Reply(xid uint32, data []byte) []byte {
	return replyHeader(xid).u32(0).u32(0).u32(uint32(len(data))).u32(1).opaque(data)
}

// readlink3Reply is an NFSv3 READLINK reply carrying path.
func readlink3Reply(xid uint32, path []byte) []byte {
	return replyHeader(xid).u32(0).u32(0).opaque(path)
}

// write3Call is an NFSv3 WRITE call carrying data.
func write3Call(xid uint32, data []byte) []byte {
	fh := bytes.Repeat([]byte{0xfe}, 28)
	return callHeader(xid, procWrt).opaque(fh).u32(0).u32(4096).u32(uint32(len(data))).u32(2).opaque(data)
}

// frame puts rec on a stream as record-marked fragments of random sizes
// (at least one; empty fragments included now and then).
func frame(rng *rand.Rand, stream, rec []byte) []byte {
	for {
		n := len(rec)
		if n > 0 && rng.IntN(2) == 0 {
			n = rng.IntN(len(rec) + 1)
		}
		last := n == len(rec)
		h := uint32(n)
		if last {
			h |= 1 << 31
		}
		stream = binary.BigEndian.AppendUint32(stream, h)
		stream = append(stream, rec[:n]...)
		rec = rec[n:]
		if last {
			return stream
		}
	}
}

// choppy hands its data out in reads of random sizes, as TCP may.
type choppy struct {
	data []byte
	rng  *rand.Rand
	max  int
}

func (c *choppy) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.data), 1+c.rng.IntN(c.max))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// testRecord is one record of a stream and how to split it.
type testRecord struct {
	rec  []byte
	dir  ulb.Direction
	proc uint32
	// want is the item bodies a full walk finds, in order (nil entries:
	// the walk is expected to stop before them).
	want [][]byte
}

// splitAll splits every record of recs, streamed with random
// fragmentation and random read sizes, and checks each message
// reassembles (pieces plus the XDR pad after each item) to its record
// byte for byte, that every item piece is a body in a buffer of its own,
// and that releasing the messages gives every byte back to the pool.
func splitAll(t *testing.T, rng *rand.Rand, pool *rdmarpc.Pool, mode Inline, recs []testRecord) {
	t.Helper()
	var stream []byte
	for _, r := range recs {
		stream = frame(rng, stream, r.rec)
	}
	rr := tcprpc.NewRecordReader(&choppy{data: stream, rng: rng, max: 1 + rng.IntN(8192)},
		&tcprpc.ReaderConfig{BufferSize: testWindow, MaxRecord: 8 << 20})
	sp := New(Config{Pool: pool, Window: testWindow, Inline: mode})
	var msg rdmarpc.Message
	for i, r := range recs {
		if err := rr.Next(); err != nil {
			t.Fatalf("record %d: Next: %v", i, err)
		}
		hdr := 24
		if r.dir == ulb.Call {
			hdr = 40
		}
		hdr = min(hdr, len(r.rec))
		out, err := sp.Split(context.Background(), rr, &msg, Record{XID: uint32(i), Dir: r.dir, Prog: progNFS, Vers: 3, Proc: r.proc, HdrLen: hdr, Walk: true})
		if err != nil {
			t.Fatalf("record %d: Split: %v", i, err)
		}
		if err := reassembles(&msg, r.rec); err != nil {
			t.Fatalf("record %d (stop %v): %v", i, out.Stop, err)
		}
		var items [][]byte
		for _, p := range msg.Pieces {
			if p.Item {
				items = append(items, p.Data)
				if len(p.Data) > 0 && (p.Buf == nil || &p.Buf.Bytes[0] != &p.Data[0]) {
					t.Fatalf("record %d: item piece not at the start of a buffer of its own", i)
				}
			} else if mode == Registered && p.Buf == nil {
				t.Fatalf("record %d: inline piece outside registered memory", i)
			}
		}
		if out.Stop == Walked {
			if len(items) != len(r.want) {
				t.Fatalf("record %d: %d items, want %d", i, len(items), len(r.want))
			}
			for k := range items {
				if !bytes.Equal(items[k], r.want[k]) {
					t.Fatalf("record %d: item %d differs", i, k)
				}
			}
		}
		if mode == Scratch {
			// Scratch holds the record without item bodies and pads, and
			// each item's length word ends at its At.
			if len(sp.Items()) != len(items) {
				t.Fatalf("record %d: Items() has %d, message %d", i, len(sp.Items()), len(items))
			}
			for k, it := range sp.Items() {
				if binary.BigEndian.Uint32(sp.Scratch()[it.At-4:]) != uint32(it.N) || it.N != len(items[k]) {
					t.Fatalf("record %d: item %d: the length word before At does not match", i, k)
				}
			}
		}
		msg.ReleaseBuffers()
		msg.Reset()
		sp.Forget()
		if pool.InUse() != 0 {
			t.Fatalf("record %d: %d pool bytes still in use after release", i, pool.InUse())
		}
	}
	if err := rr.Next(); err != io.EOF {
		t.Fatalf("after the last record: %v, want io.EOF", err)
	}
}

// reassembles checks that m's pieces, each item followed by its XDR pad,
// are rec byte for byte, except that a pad the sender filled with
// non-zero bytes comes out zero (RFC 4506 §3: pads are zero; the item's
// pad is not kept, the engine adds zeros).
func reassembles(m *rdmarpc.Message, rec []byte) error {
	off := 0
	for k, p := range m.Pieces {
		if off+len(p.Data) > len(rec) || !bytes.Equal(p.Data, rec[off:off+len(p.Data)]) {
			return fmt.Errorf("piece %d (%d bytes at %d) differs from the %d-byte record", k, len(p.Data), off, len(rec))
		}
		off += len(p.Data)
		if p.Item {
			off += -len(p.Data) & 3
		}
	}
	if off != len(rec) {
		return fmt.Errorf("pieces cover %d bytes of the %d-byte record", off, len(rec))
	}
	got := make([]byte, m.Len())
	if n := m.Flatten(got); n != len(rec) {
		return fmt.Errorf("flattened to %d bytes, record %d", n, len(rec))
	}
	return nil
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// randRecords makes a mix of records: READ and READLINK replies (or
// WRITE calls) with bodies of random sizes (empty, odd, above the
// largest pool buffer), and garbage after a valid header.
func randRecords(rng *rand.Rand, mode Inline, n int) []testRecord {
	var recs []testRecord
	for i := range n {
		xid := uint32(i)
		size := rng.IntN(3 * testWindow)
		switch rng.IntN(8) {
		case 0:
			size = 0
		case 1:
			size = testMaxClass + 1 + rng.IntN(100)
		}
		data := randBytes(rng, size)
		var r testRecord
		switch {
		case rng.IntN(6) == 0:
			// Garbage results: walks fail somewhere; all inline.
			hdr := replyHeader(xid)
			dir, proc := ulb.Reply, uint32(procRead)
			if mode == Scratch {
				hdr, dir, proc = callHeader(xid, procWrt), ulb.Call, procWrt
			}
			r = testRecord{rec: append(hdr, randBytes(rng, rng.IntN(200))...), dir: dir, proc: proc}
		case mode == Scratch:
			r = testRecord{rec: write3Call(xid, data), dir: ulb.Call, proc: procWrt, want: [][]byte{data}}
		case rng.IntN(4) == 0:
			path := data[:min(len(data), 1024)]
			r = testRecord{rec: readlink3Reply(xid, path), dir: ulb.Reply, proc: procRdl, want: [][]byte{path}}
		default:
			r = testRecord{rec: read3Reply(xid, data), dir: ulb.Reply, proc: procRead, want: [][]byte{data}}
		}
		recs = append(recs, r)
	}
	return recs
}

// Property: whatever the fragmentation of the records and the sizes of
// the socket reads, the pieces and items of every split reassemble to
// the record byte for byte, the items are the bodies the walker finds,
// and no buffer is left behind.
func TestSplitReassembles(t *testing.T) {
	pool := newPool(t, 16<<20)
	for _, mode := range []Inline{Registered, Scratch} {
		for seed := range uint64(40) {
			rng := rand.New(rand.NewPCG(seed, uint64(mode)))
			splitAll(t, rng, pool, mode, randRecords(rng, mode, 6))
		}
	}
}

// atRecord returns a reader at the start of rec, framed in fragments
// drawn from seed.
func atRecord(t *testing.T, seed uint64, rec []byte) *tcprpc.RecordReader {
	t.Helper()
	rr := tcprpc.NewRecordReader(bytes.NewReader(frame(rand.New(rand.NewPCG(seed, seed)), nil, rec)),
		&tcprpc.ReaderConfig{BufferSize: testWindow})
	if err := rr.Next(); err != nil {
		t.Fatal(err)
	}
	return rr
}

// An item larger than the largest pool buffer stops the walk (TooLarge)
// and goes inline; Item and Length name it.
func TestSplitTooLarge(t *testing.T) {
	pool := newPool(t, 4<<20)
	data := randBytes(rand.New(rand.NewPCG(1, 2)), testMaxClass+1)
	rr := atRecord(t, 3, read3Reply(7, data))
	var msg rdmarpc.Message
	out, err := New(Config{Pool: pool, Window: testWindow}).Split(context.Background(), rr, &msg,
		Record{XID: 7, Dir: ulb.Reply, Prog: progNFS, Vers: 3, Proc: procRead, HdrLen: 24, Walk: true})
	if err != nil {
		t.Fatal(err)
	}
	defer msg.ReleaseBuffers()
	if out.Stop != TooLarge || out.Item != 0 || out.Length != len(data) || msg.Items() != 0 {
		t.Fatalf("outcome %+v, %d items; want TooLarge of item 0, %d bytes, no items", out, msg.Items(), len(data))
	}
}

// write4Call is an NFSv4.0 COMPOUND of PUTFH and one WRITE per body.
func write4Call(xid uint32, bodies ...[]byte) []byte {
	b := be(nil).u32(xid).u32(0).u32(2).u32(progNFS).u32(4).u32(1).u32(0).u32(0).u32(0).u32(0)
	b = b.opaque(nil).u32(0).u32(uint32(1 + len(bodies)))
	b = b.u32(22).opaque(bytes.Repeat([]byte{0xfe}, 28)) // PUTFH
	for _, d := range bodies {
		b = b.u32(38).u32(0).u32(0).u32(0).u32(0) // WRITE, stateid
		b = b.u32(0).u32(0).u32(2).opaque(d)      // offset, FILE_SYNC4, data
	}
	return b
}

// MaxBodies stops the walk before the item past the limit: the second
// WRITE's data goes inline.
func TestSplitBodyLimit(t *testing.T) {
	pool := newPool(t, 4<<20)
	one, two := []byte("first body"), []byte("second")
	rec := write4Call(9, one, two)
	rr := atRecord(t, 5, rec)
	var msg rdmarpc.Message
	sp := New(Config{Pool: pool, Window: testWindow, Inline: Scratch, MaxBodies: 1})
	out, err := sp.Split(context.Background(), rr, &msg, Record{XID: 9, Dir: ulb.Call, Prog: progNFS, Vers: 4, Proc: 1, HdrLen: 40, Walk: true})
	if err != nil {
		t.Fatal(err)
	}
	defer msg.ReleaseBuffers()
	if out.Stop != BodyLimit || out.Item != 1 || msg.Items() != 1 || len(sp.Items()) != 1 || !bytes.Equal(msg.Pieces[1].Data, one) {
		t.Fatalf("outcome %+v, %d items; want BodyLimit at item 1 and the first body as the one item", out, msg.Items())
	}
	got := make([]byte, msg.Len())
	if !bytes.Equal(got[:msg.Flatten(got)], rec) {
		t.Fatal("reassembled message differs from the record")
	}
}

// While the pool is used up Split waits; when its context ends it
// returns the context's error and holds nothing.
func TestSplitWaitCancelled(t *testing.T) {
	pool := newPool(t, 256<<10) // one slab: four 64 KiB buffers
	var held []*rdmarpc.Buffer
	for {
		b, err := pool.Get(testMaxClass)
		if err != nil {
			break
		}
		held = append(held, b)
	}
	inUse := pool.InUse()
	rr := atRecord(t, 7, read3Reply(3, make([]byte, 1000)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var msg rdmarpc.Message
	_, err := New(Config{Pool: pool, Window: testWindow}).Split(ctx, rr, &msg,
		Record{XID: 3, Dir: ulb.Reply, Prog: progNFS, Vers: 3, Proc: procRead, HdrLen: 24, Walk: true})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Split with the pool used up and its context ended: %v, want context.Canceled", err)
	}
	if len(msg.Pieces) != 0 || pool.InUse() != inUse {
		t.Fatalf("after a failed split: %d pieces, pool in use %d (was %d)", len(msg.Pieces), pool.InUse(), inUse)
	}
	for _, b := range held {
		b.Release()
	}
}

// FuzzSplit: any results after a valid header, in any fragmentation,
// split without error and reassemble to the record.
func FuzzSplit(f *testing.F) {
	f.Add(uint64(1), false, read3Reply(1, []byte("data"))[24:])
	f.Add(uint64(2), true, write3Call(1, []byte("data!"))[40:])
	f.Add(uint64(3), false, readlink3Reply(1, []byte("/a/b"))[24:])
	f.Add(uint64(4), false, []byte{0, 0, 0, 0, 0, 0, 0, 1})
	pool := newPool(f, 16<<20)
	f.Fuzz(func(t *testing.T, seed uint64, call bool, body []byte) {
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		r := testRecord{rec: append(replyHeader(1), body...), dir: ulb.Reply, proc: procRead}
		mode := Registered
		if call {
			r = testRecord{rec: append(callHeader(1, procWrt), body...), dir: ulb.Call, proc: procWrt}
			mode = Scratch
		} else if seed&1 == 1 {
			r.proc = procRdl
		}
		// Items are not known here: only the reassembly is checked.
		splitAllLoose(t, rng, pool, mode, r)
	})
}

// splitAllLoose is splitAll for one record whose items are unknown.
func splitAllLoose(t *testing.T, rng *rand.Rand, pool *rdmarpc.Pool, mode Inline, r testRecord) {
	t.Helper()
	rr := tcprpc.NewRecordReader(&choppy{data: frame(rng, nil, r.rec), rng: rng, max: 1 + rng.IntN(512)},
		&tcprpc.ReaderConfig{BufferSize: testWindow, MaxRecord: 8 << 20})
	if err := rr.Next(); err != nil {
		t.Fatal(err)
	}
	hdr := 24
	if r.dir == ulb.Call {
		hdr = 40
	}
	var msg rdmarpc.Message
	cfg := Config{Pool: pool, Window: testWindow, Inline: mode}
	// Half the time with cut-through: Ahead takes parts at random and,
	// as a Write posted ahead does, holds the buffer until "its Writes
	// complete" (after the split, success or not).
	var held []*rdmarpc.Buffer
	if rng.IntN(2) == 0 {
		cfg.AheadMin = 1 + rng.IntN(256)
		cfg.Ahead = func(_, done, got int, buf *rdmarpc.Buffer) int {
			if rng.IntN(2) == 0 {
				return done
			}
			buf.Ref()
			held = append(held, buf)
			return got
		}
	}
	sp := New(cfg)
	_, err := sp.Split(context.Background(), rr, &msg, Record{Dir: r.dir, Prog: progNFS, Vers: 3, Proc: r.proc, HdrLen: hdr, Walk: true})
	for _, b := range held {
		b.Release()
	}
	if err != nil {
		// An item whose length runs past the record's end: the record
		// is broken (the caller drops the connection, as before the
		// splitter); nothing may be held.
		if !errors.Is(err, tcprpc.ErrShortRecord) {
			t.Fatal(err)
		}
		if len(msg.Pieces) != 0 || pool.InUse() != 0 {
			t.Fatalf("failed split holds %d pieces, %d pool bytes", len(msg.Pieces), pool.InUse())
		}
		return
	}
	defer func() {
		msg.ReleaseBuffers()
		if pool.InUse() != 0 {
			t.Fatalf("%d pool bytes left in use", pool.InUse())
		}
	}()
	if err := reassembles(&msg, r.rec); err != nil {
		t.Fatal(err)
	}
	for i, p := range msg.Pieces {
		if p.Written != 0 && (!p.Item || p.Written >= len(p.Data) || p.Written < cfg.AheadMin) {
			t.Fatalf("piece %d (item %v, %d bytes) says %d written ahead (parts of at least %d)", i, p.Item, len(p.Data), p.Written, cfg.AheadMin)
		}
	}
}

// Config.Ahead sees an item body as it arrives: in order, after reads
// that leave at least AheadMin bytes untaken and the body incomplete,
// with the bytes received so far already in the buffer; the piece's
// Written is what it took in all (a declined offer leaves the bytes to the next
// one). A Scratch splitter never offers.
func TestSplitAhead(t *testing.T) {
	const aheadMin = 4096
	totalTaken := 0
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 77))
		pool := newPool(t, 4<<20)
		data := randBytes(rng, 1+rng.IntN(testMaxClass))
		rec := read3Reply(9, data)
		rr := tcprpc.NewRecordReader(&choppy{data: frame(rng, nil, rec), rng: rng, max: 1 + rng.IntN(3*aheadMin)},
			&tcprpc.ReaderConfig{BufferSize: testWindow})
		if err := rr.Next(); err != nil {
			t.Fatal(err)
		}
		mode := Registered
		if seed%8 == 7 {
			mode = Scratch
		}
		taken, offers := 0, 0
		ahead := func(item, done, got int, buf *rdmarpc.Buffer) int {
			offers++
			switch {
			case item != 0 || done != taken || got-done < aheadMin || got >= len(data):
				t.Fatalf("seed %d: Ahead(%d, %d, %d) of a %d-byte body, %d taken before", seed, item, done, got, len(data), taken)
			case !bytes.Equal(buf.Bytes[:got], data[:got]) || len(buf.Bytes) != len(data):
				t.Fatalf("seed %d: Ahead(%d, %d): the buffer does not hold the body received", seed, done, got)
			}
			if rng.IntN(3) > 0 {
				taken = got
			}
			return taken
		}
		var msg rdmarpc.Message
		sp := New(Config{Pool: pool, Window: testWindow, Inline: mode, Ahead: ahead, AheadMin: aheadMin})
		if _, err := sp.Split(context.Background(), rr, &msg, Record{XID: 9, Dir: ulb.Reply, Prog: progNFS, Vers: 3, Proc: procRead, HdrLen: 24, Walk: true}); err != nil {
			t.Fatal(err)
		}
		if mode == Scratch {
			if offers != 0 {
				t.Fatalf("seed %d: a Scratch splitter offered %d parts", seed, offers)
			}
			sp.Forget()
			msg.ReleaseBuffers()
			continue
		}
		if err := reassembles(&msg, rec); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var item *rdmarpc.Piece
		for i := range msg.Pieces {
			if msg.Pieces[i].Item {
				item = &msg.Pieces[i]
			}
		}
		if item == nil || item.Written != taken || (len(data) < 2*aheadMin && offers > 0) {
			t.Fatalf("seed %d: item piece %+v, %d bytes taken in %d offers (body %d)", seed, item != nil, taken, offers, len(data))
		}
		totalTaken += taken
		msg.ReleaseBuffers()
		if pool.InUse() != 0 {
			t.Fatalf("seed %d: %d pool bytes in use", seed, pool.InUse())
		}
	}
	if totalTaken == 0 {
		t.Fatal("no body was taken ahead in any of the records")
	}
	t.Logf("%d bytes taken ahead", totalTaken)
}
