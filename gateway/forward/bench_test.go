package forward_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/xdr"
)

// BenchmarkForwardAllocs measures what the forward gateway allocates per
// RPC in the steady state. Both ends are allocation-free themselves, so
// allocs/op is the gateway's (plus the rdmarpc engines and the iWARP
// provider, which BenchmarkEngine* show to be allocation-free):
//
//   - the client is the rdmarpc requester engine driven directly, with
//     pre-encoded NFSv3 calls in registered buffers (only the XID is
//     patched per call), a reused Message, ReplyPlan and Result;
//   - the backend is a fake NFSv3 server over TCP that reads each record
//     into a reused buffer and answers GETATTR, READ and WRITE with canned
//     replies from reused buffers.
//
// Each sub-benchmark checks, before its timer starts, that the bytes
// really flow: READ data placed in the client's Write chunk equals the
// server's (XID-stamped) data, and a WRITE payload pulled by RDMA Read
// reaches the server byte for byte. In the timed loop every READ chunk
// and WRITE payload carries the call's XID, checked at the other end.
func BenchmarkForwardAllocs(b *testing.B) {
	const ioSize = 1 << 20
	srv := startFakeNFS3(b, ioSize)
	gw := startGateway(b, srv.addr(), func(c *gateway.Config) { c.Log.Level = "info" })
	dev, pool := newClientDevice(b)
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	rq, err := rdmarpc.DialRequester(dctx, dev, gw.Addr().String(), rdmarpc.RequesterConfig{Pool: pool, Credits: 32})
	dcancel()
	if err != nil {
		b.Fatalf("dial gateway: %v", err)
	}
	b.Cleanup(func() { rq.Close() })

	fh := bytes.Repeat([]byte{0xfb}, 32)
	c := &benchClient{b: b, rq: rq, pool: pool, srv: srv}

	b.Run("getattr", func(b *testing.B) {
		bc := c.prepare(b, nfs3Getattr, new(enc).opaque(fh).b, nil)
		defer bc.release()
		bc.check = func(x uint32, r *rdmarpc.Result) error {
			if len(r.Inline) != fakeGetattrReplyLen || len(r.Chunks) != 0 {
				return fmt.Errorf("GETATTR reply of %d bytes, %d chunks", len(r.Inline), len(r.Chunks))
			}
			return nil
		}
		// Verify once, thoroughly.
		bc.do(b, func(r *rdmarpc.Result) {
			d := results(b, r.Inline)
			status(b, d, "GETATTR")
			if typ, _ := d.Uint32(); typ != 1 {
				b.Fatalf("GETATTR type %d, want NF3REG", typ)
			}
		})
		bc.run(b, 0)
	})

	b.Run("read-1MiB", func(b *testing.B) {
		bc := c.prepare(b, nfs3Read, new(enc).opaque(fh).u64(0).u32(ioSize).b, nil)
		defer bc.release()
		if len(bc.plan.WriteChunks) != 1 || bc.plan.WriteChunks[0] != ioSize || bc.plan.ReplyChunk != 0 {
			b.Fatalf("READ reply plan %+v, want one 1 MiB Write chunk", *bc.plan)
		}
		bc.check = func(x uint32, r *rdmarpc.Result) error {
			if r.Kind != rdmarpc.ReplyInline || len(r.Chunks) != 1 || len(r.Chunks[0]) != ioSize {
				return fmt.Errorf("READ reply %v with %d chunks", r.Kind, len(r.Chunks))
			}
			if got := binary.BigEndian.Uint32(r.Chunks[0]); got != x {
				return fmt.Errorf("READ chunk stamped with xid %#x, want %#x", got, x)
			}
			return nil
		}
		bc.do(b, func(r *rdmarpc.Result) {
			// Inline: reply header, READ3resok up to the data length word
			// (the body went to the Write chunk).
			d := results(b, r.Inline)
			status(b, d, "READ")
			if follows, _ := d.Uint32(); follows != 1 {
				b.Fatal("READ: no post-op attributes")
			}
			d.Skip(fattr3Len)
			count, _ := d.Uint32()
			eof, _ := d.Uint32()
			dlen, err := d.Uint32()
			if err != nil || count != ioSize || eof != 1 || dlen != ioSize || d.Len() != 0 {
				b.Fatalf("READ3resok count %d eof %d data length %d, %d bytes after (%v)", count, eof, dlen, d.Len(), err)
			}
			want := append([]byte(nil), srv.readData...)
			binary.BigEndian.PutUint32(want, bc.lastXID)
			if !bytes.Equal(r.Chunks[0], want) {
				b.Fatalf("READ data in the Write chunk differs from the server's (first diff at %d)", firstDiff(r.Chunks[0], want))
			}
		})
		bc.run(b, ioSize)
		// With rdma.cut_through (the default) the data went out in
		// parts while the reply arrived: that path is the one measured.
		if v := gwtest.Metric(b, gw.Metrics(), "rdmagw_reply_bytes_written_ahead_total"); v == 0 {
			b.Fatal("no READ data was written ahead of its reply (rdma.cut_through)")
		}
	})

	b.Run("write-1MiB", func(b *testing.B) {
		payload := pattern(ioSize, 9)
		bc := c.prepare(b, nfs3Write, new(enc).opaque(fh).u64(0).u32(ioSize).u32(fileSync).u32(ioSize).b, payload)
		defer bc.release()
		if len(bc.plan.WriteChunks) != 0 || bc.plan.ReplyChunk != 0 {
			b.Fatalf("WRITE reply plan %+v, want none", *bc.plan)
		}
		bc.check = func(x uint32, r *rdmarpc.Result) error {
			if len(r.Inline) != fakeWriteReplyLen {
				return fmt.Errorf("WRITE reply of %d bytes", len(r.Inline))
			}
			return nil
		}
		srv.capture(true)
		bc.do(b, func(r *rdmarpc.Result) {
			d := results(b, r.Inline)
			status(b, d, "WRITE")
			d.Skip(8) // wcc_data: no pre-op, no post-op attributes
			count, _ := d.Uint32()
			committed, err := d.Uint32()
			if err != nil || count != ioSize || committed != fileSync {
				b.Fatalf("WRITE3resok count %d committed %d (%v)", count, committed, err)
			}
		})
		got := srv.captured()
		srv.capture(false)
		want := append([]byte(nil), payload...)
		binary.BigEndian.PutUint32(want, bc.lastXID)
		if !bytes.Equal(got, want) {
			b.Fatalf("WRITE payload at the server (%d bytes) differs from the client's (%d; first diff at %d)", len(got), len(want), firstDiff(got, want))
		}
		if v := gwtest.Metric(b, gw.Metrics(), "rdmagw_bytes_total", "path", "read_chunk"); v < ioSize {
			b.Fatalf("read_chunk bytes = %v: the WRITE payload did not come by RDMA Read", v)
		}
		bc.run(b, ioSize)
	})
}

// benchClient sends pre-encoded NFSv3 calls on a requester connection.
type benchClient struct {
	b    testing.TB
	rq   *rdmarpc.RequesterConn
	pool *rdmarpc.Pool
	srv  *fakeNFS3
	xid  uint32
}

// benchCall is one pre-encoded call: its RPC header and arguments (up to
// and including the length word of the WRITE data) in a registered
// buffer, and the WRITE data, if any, in another, sent as an Item piece.
type benchCall struct {
	c       *benchClient
	proc    uint32
	head    *rdmarpc.Buffer
	data    *rdmarpc.Buffer
	plan    *rdmarpc.ReplyPlan
	msg     rdmarpc.Message
	res     rdmarpc.Result
	ctx     context.Context
	cancel  context.CancelFunc
	lastXID uint32
	check   func(xid uint32, r *rdmarpc.Result) error
}

func (c *benchClient) prepare(b *testing.B, proc uint32, args, data []byte) *benchCall {
	bc := &benchCall{c: c, proc: proc}
	call := gwtest.EncodeCall(0, ulb.ProgNFS, 3, proc, args)
	var err error
	if bc.head, err = c.pool.Get(len(call)); err != nil {
		b.Fatal(err)
	}
	copy(bc.head.Bytes, call)
	if data != nil {
		if bc.data, err = c.pool.Get(len(data)); err != nil {
			b.Fatal(err)
		}
		copy(bc.data.Bytes, data)
	}
	// The reply plan, as a client makes it from the ULB's estimate.
	bc.plan = &rdmarpc.ReplyPlan{}
	est, err := ulb.EstimateReply(ulb.ProgNFS, 3, proc, args)
	if err != nil {
		b.Fatal(err)
	}
	for i := range est.NItems {
		bc.plan.WriteChunks = append(bc.plan.WriteChunks, est.ItemMax[i])
	}
	if est.Inline > 4096 {
		bc.plan.ReplyChunk = est.Inline
	}
	// One deadline for the whole sub-benchmark (a context per call would
	// allocate): a server or gateway fault fails the run instead of
	// hanging it.
	bc.ctx, bc.cancel = context.WithTimeout(context.Background(), 3*time.Minute)
	return bc
}

func (bc *benchCall) release() {
	bc.cancel()
	bc.head.Release()
	if bc.data != nil {
		bc.data.Release()
	}
}

// call sends the call once with a fresh XID, which it also stamps into
// the first word of the WRITE data; the caller releases bc.res.
func (bc *benchCall) call() error {
	bc.c.xid++
	x := bc.c.xid
	bc.lastXID = x
	binary.BigEndian.PutUint32(bc.head.Bytes, x)
	m := &bc.msg
	m.Reset()
	m.XID = x
	m.Append(rdmarpc.Piece{Data: bc.head.Bytes, Buf: bc.head})
	if bc.data != nil {
		binary.BigEndian.PutUint32(bc.data.Bytes, x)
		m.Append(rdmarpc.Piece{Data: bc.data.Bytes, Item: true, Buf: bc.data})
	}
	if err := bc.c.rq.Call(bc.ctx, m, bc.plan, &bc.res); err != nil {
		return err
	}
	if got := binary.BigEndian.Uint32(bc.res.Inline); got != x {
		return fmt.Errorf("reply xid %#x to call %#x", got, x)
	}
	return bc.check(x, &bc.res)
}

func (bc *benchCall) fail(b *testing.B, err error) {
	b.Helper()
	if serr := bc.c.srv.failure(); serr != nil {
		b.Fatalf("%v (fake server: %v)", err, serr)
	}
	b.Fatal(err)
}

// do makes one call and lets verify look at the reply.
func (bc *benchCall) do(b *testing.B, verify func(*rdmarpc.Result)) {
	b.Helper()
	if err := bc.call(); err != nil {
		bc.fail(b, err)
	}
	verify(&bc.res)
	bc.res.Release()
}

// run warms the pools up, then times b.N calls and checks that each one
// reached the server.
func (bc *benchCall) run(b *testing.B, bytesPerOp int64) {
	b.Helper()
	for range 100 {
		if err := bc.call(); err != nil {
			bc.fail(b, err)
		}
		bc.res.Release()
	}
	srv := bc.c.srv
	before := srv.calls[bc.proc].Load()
	if bytesPerOp > 0 {
		b.SetBytes(bytesPerOp)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := bc.call(); err != nil {
			bc.fail(b, err)
		}
		bc.res.Release()
	}
	b.StopTimer()
	if n := srv.calls[bc.proc].Load() - before; n != int64(b.N) {
		b.Fatalf("the server saw %d calls of procedure %d, want %d", n, bc.proc, b.N)
	}
	if err := srv.failure(); err != nil {
		b.Fatalf("fake server: %v", err)
	}
}

// ---- the fake NFSv3 server ----

const (
	fakeGetattrReplyLen = 24 + 4 + fattr3Len                 // header, status, fattr3
	fakeReadHeadLen     = 24 + 4 + 4 + fattr3Len + 4 + 4 + 4 // ... post_op_attr, count, eof, data length
	fakeWriteReplyLen   = 24 + 4 + 4 + 4 + 4 + 4 + 8         // header, status, wcc_data, count, committed, verf
	fakeMaxRecord       = 1<<20 + 64<<10
	fakeRecvBuf         = fakeMaxRecord
	fakeReplyHeadBufLen = 256
)

// fakeNFS3 answers NFSv3 GETATTR, READ and WRITE over TCP with canned
// replies, allocating nothing per call. READ data is readData with the
// call's XID in its first word; a WRITE's data must carry its call's XID
// in its first word too (a mismatch is a failure).
type fakeNFS3 struct {
	*tcpServer
	readData []byte // canned READ payload (the server's own copy is stamped per call)

	calls [32]atomic.Int64 // per procedure

	capMu   sync.Mutex
	capOn   bool
	capBuf  []byte
	capLen  int
	failMu  sync.Mutex
	failErr error
}

func startFakeNFS3(b testing.TB, ioSize int) *fakeNFS3 {
	s := &fakeNFS3{readData: pattern(ioSize, 5), capBuf: make([]byte, fakeMaxRecord)}
	s.tcpServer = startTCPServer(b, func(c net.Conn) { go s.serve(c) })
	return s
}

func (s *fakeNFS3) setFailure(err error) {
	s.failMu.Lock()
	if s.failErr == nil {
		s.failErr = err
	}
	s.failMu.Unlock()
}

func (s *fakeNFS3) failure() error {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	return s.failErr
}

func (s *fakeNFS3) capture(on bool) {
	s.capMu.Lock()
	s.capOn, s.capLen = on, -1
	s.capMu.Unlock()
}

// captured returns a copy of the data of the last WRITE received while
// capturing was on.
func (s *fakeNFS3) captured() []byte {
	s.capMu.Lock()
	defer s.capMu.Unlock()
	if s.capLen < 0 {
		return nil
	}
	return append([]byte(nil), s.capBuf[:s.capLen]...)
}

var errFakeProto = errors.New("malformed call")

func (s *fakeNFS3) serve(c net.Conn) {
	defer c.Close()
	rr := tcprpc.NewRecordReader(c, &tcprpc.ReaderConfig{MaxRecord: fakeMaxRecord})
	rw := tcprpc.NewRecordWriter(c, nil)
	buf := make([]byte, 0, fakeRecvBuf)
	head := make([]byte, fakeReplyHeadBufLen)
	data := append([]byte(nil), s.readData...) // stamped per READ
	var pad [4]byte
	for {
		rec, err := rr.ReadRecord(buf[:0])
		if err != nil {
			return // the gateway went away
		}
		buf = rec
		if err := s.answer(rw, rec, head, data, pad[:]); err != nil {
			s.setFailure(err)
			return
		}
	}
}

// answer parses one call record and sends its canned reply.
func (s *fakeNFS3) answer(rw *tcprpc.RecordWriter, rec, head, data, pad []byte) error {
	be := binary.BigEndian
	if len(rec) < 40 {
		return errFakeProto
	}
	xid := be.Uint32(rec)
	if be.Uint32(rec[4:]) != 0 || be.Uint32(rec[12:]) != ulb.ProgNFS || be.Uint32(rec[16:]) != 3 {
		return errFakeProto
	}
	proc := be.Uint32(rec[20:])
	// Skip the credential and the verifier.
	off := 28
	off += 4 + xdr.RoundUp(int(be.Uint32(rec[off:])))
	if off+8 > len(rec) {
		return errFakeProto
	}
	off += 4
	off += 4 + xdr.RoundUp(int(be.Uint32(rec[off:])))
	if off+4 > len(rec) {
		return errFakeProto
	}
	args := rec[off:]
	// All three procedures start with a file handle.
	fhEnd := 4 + xdr.RoundUp(int(be.Uint32(args)))
	if fhEnd > len(args) {
		return errFakeProto
	}

	// The accepted-SUCCESS reply header and NFS3_OK.
	clear(head)
	be.PutUint32(head[0:], xid)
	be.PutUint32(head[4:], 1) // REPLY
	// head[8:24]: MSG_ACCEPTED, AUTH_NONE verifier, SUCCESS; head[24:28] NFS3_OK.
	switch proc {
	case nfs3Getattr:
		putFattr3(head[28:], uint64(len(data)))
		s.calls[proc].Add(1)
		return rw.WriteRecord(head[:fakeGetattrReplyLen], nil, nil)
	case nfs3Read:
		a := args[fhEnd:]
		if len(a) < 12 {
			return errFakeProto
		}
		offset := be.Uint64(a)
		count := int(be.Uint32(a[8:]))
		if offset != 0 || count < 4 || count > len(data) {
			return fmt.Errorf("READ at %d of %d bytes", offset, count)
		}
		be.PutUint32(head[28:], 1) // attributes follow
		putFattr3(head[32:], uint64(len(data)))
		be.PutUint32(head[116:], uint32(count))
		if count == len(data) {
			be.PutUint32(head[120:], 1) // eof
		}
		be.PutUint32(head[124:], uint32(count))
		be.PutUint32(data, xid)
		s.calls[proc].Add(1)
		return rw.WriteRecord(head[:fakeReadHeadLen], data[:count], pad[:xdr.RoundUp(count)-count])
	case nfs3Write:
		a := args[fhEnd:]
		if len(a) < 20 {
			return errFakeProto
		}
		count := be.Uint32(a[8:])
		dlen := int(be.Uint32(a[16:]))
		body := a[20:]
		if uint32(dlen) != count || dlen < 4 || len(body) != xdr.RoundUp(dlen) {
			return fmt.Errorf("WRITE of count %d with %d data bytes in %d", count, dlen, len(body))
		}
		body = body[:dlen]
		if got := be.Uint32(body); got != xid {
			return fmt.Errorf("WRITE data stamped %#x in call %#x", got, xid)
		}
		s.capMu.Lock()
		if s.capOn {
			s.capLen = copy(s.capBuf, body)
		}
		s.capMu.Unlock()
		// wcc_data: no pre-op, no post-op attributes.
		be.PutUint32(head[36:], count)
		be.PutUint32(head[40:], fileSync)
		copy(head[44:52], "verifier")
		s.calls[proc].Add(1)
		return rw.WriteRecord(head[:fakeWriteReplyLen], nil, nil)
	}
	return fmt.Errorf("procedure %d not served", proc)
}

// putFattr3 writes a regular file's fattr3 (84 bytes).
func putFattr3(b []byte, size uint64) {
	be := binary.BigEndian
	clear(b[:fattr3Len])
	be.PutUint32(b[0:], 1)     // NF3REG
	be.PutUint32(b[4:], 0o644) // mode
	be.PutUint32(b[8:], 1)     // nlink
	be.PutUint64(b[20:], size) // size
	be.PutUint64(b[28:], size) // used
	be.PutUint64(b[44:], 42)   // fsid
	be.PutUint64(b[52:], 4242) // fileid
}
