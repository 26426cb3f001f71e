package nfsclient

import (
	"bytes"
	"context"
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/rdmarpc"
)

// writeChecker is a Transport that checks, during the call, that each
// WRITE's arguments end with the data the test is writing (and its XDR
// pad), and answers
// with a WRITE3resok. It stands where a transport takes the arguments.
type writeChecker struct {
	t    *testing.T
	data []byte
	bufs map[*byte]int // the argument buffers seen, by first byte
}

func (w *writeChecker) Call(_ context.Context, _, _, proc uint32, args []byte) ([]byte, error) {
	pad := (4 - len(w.data)%4) % 4
	if proc != nfsproto.NFS3Write || len(args) < len(w.data)+pad || !bytes.Equal(args[len(args)-pad-len(w.data):len(args)-pad], w.data) {
		w.t.Fatalf("call %d: the arguments do not end with the data written", proc)
	}
	w.bufs[&args[0]]++
	// status, pre_op_attr and post_op_attr absent, count, committed, verf.
	res := make([]byte, 20+nfsproto.VerfSize)
	binary.BigEndian.PutUint32(res[12:], uint32(len(w.data)))
	return res, nil
}

func (w *writeChecker) Close() error { return nil }

// TestWriteArgsRecycled: a 1 MiB WRITE's arguments go into a recycled
// buffer, not a new megabyte per call (bulkArgs).
func TestWriteArgsRecycled(t *testing.T) {
	w := &writeChecker{t: t, data: make([]byte, 1<<20), bufs: map[*byte]int{}}
	for i := range w.data {
		w.data[i] = byte(i * 7)
	}
	c := &V3{T: w}
	fh := []byte("handle")
	write := func() {
		if r, err := c.Write(t.Context(), fh, 4096, w.data, nfsproto.Unstable); err != nil || int(r.Count) != len(w.data) {
			t.Fatalf("WRITE: %+v, %v", r, err)
		}
	}
	write() // the first buffer
	const calls = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		write()
	}
	runtime.ReadMemStats(&after)
	// One megabyte per call would be 50 MiB. The race detector drops a
	// quarter of what goes back to a sync.Pool, hence the margin.
	if got := after.TotalAlloc - before.TotalAlloc; got > calls<<20/2 {
		t.Errorf("%d WRITEs of 1 MiB allocated %d bytes; %d argument buffers for %d calls", calls, got, len(w.bufs), calls+1)
	}
}

// TestSplitCallNoCopy: the RDMA transport's call pieces point into the
// header and arguments it was given, those of the arguments name the
// registered buffer they lie in (so the requester sends them from there),
// the WRITE data is the one Item piece, and together they are the call as
// it goes on a byte stream.
func TestSplitCallNoCopy(t *testing.T) {
	data := append(bytes.Repeat([]byte("0123456789abcde"), 1000), 'x', 'y') // 15002 bytes: an XDR pad of 2
	w := &writeChecker{t: t, data: data, bufs: map[*byte]int{}}
	var args []byte
	c := &V3{T: transportFunc(func(ctx context.Context, prog, vers, proc uint32, a []byte) ([]byte, error) {
		args = bytes.Clone(a)
		return w.Call(ctx, prog, vers, proc, a)
	})}
	if _, err := c.Write(t.Context(), []byte("fh"), 0, data, nfsproto.FileSync); err != nil {
		t.Fatal(err)
	}
	var hb [maxCallHeader]byte
	head, err := encodeCallHeader(hb[:], 1, nfsproto.ProgNFS, nfsproto.NFSVers3, nfsproto.NFS3Write)
	if err != nil {
		t.Fatal(err)
	}
	var msg rdmarpc.Message
	msg.Reset()
	reg := &rdmarpc.Buffer{Bytes: args} // as if args were in the requester's pool
	if err := splitCall(&msg, head, args, reg, nfsproto.ProgNFS, nfsproto.NFSVers3, nfsproto.NFS3Write); err != nil {
		t.Fatal(err)
	}
	items := 0
	for _, p := range msg.Pieces {
		if len(p.Data) == 0 {
			continue
		}
		inHead := &p.Data[0] == &head[0]
		at := -1
		for i := range args {
			if &args[i] == &p.Data[0] {
				at = i
			}
		}
		if !inHead && at < 0 {
			t.Errorf("a piece of %d bytes is a copy, not the header or the arguments", len(p.Data))
		}
		if want := map[bool]*rdmarpc.Buffer{true: nil, false: reg}[inHead]; p.Buf != want {
			t.Errorf("a piece of %d bytes (header %v) names buffer %p, want %p", len(p.Data), inHead, p.Buf, want)
		}
		if p.Item {
			items++
			if !bytes.Equal(p.Data, data) {
				t.Errorf("the Item piece is %d bytes, not the %d written", len(p.Data), len(data))
			}
		}
	}
	if items != 1 {
		t.Errorf("%d Item pieces, want the WRITE data", items)
	}
	var stream []byte
	for _, v := range msg.AppendVec(nil) {
		stream = append(stream, v...)
	}
	if want := append(bytes.Clone(head), args...); !bytes.Equal(stream, want) {
		t.Errorf("the pieces make %d bytes, not the call's %d", len(stream), len(want))
	}
}

// transportFunc is a Transport made of a function.
type transportFunc func(ctx context.Context, prog, vers, proc uint32, args []byte) ([]byte, error)

func (f transportFunc) Call(ctx context.Context, prog, vers, proc uint32, args []byte) ([]byte, error) {
	return f(ctx, prog, vers, proc, args)
}

func (transportFunc) Close() error { return nil }
