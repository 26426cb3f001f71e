package forward_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/forward"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/xdr"
)

// TestForwardInlineRecordsWhole: WRITE calls through the gateway reach
// the backend as one record each, byte for byte, whoever writes them.
// Sent one at a time, after the first few (inlineAfter) the engine
// writes them itself onto the idle backend connection (the test fails
// if it never does). Then 8 goroutines send calls at once on the same
// client connection, some of 256 KiB: the engine's writes and the
// writer goroutine's batches share the one connection and must not
// interleave bytes.
func TestForwardInlineRecordsWhole(t *testing.T) {
	var whole, cut atomic.Int32
	t.Cleanup(forward.SetInlineHook(func(w bool) {
		if w {
			whole.Add(1)
		} else {
			cut.Add(1)
		}
	})) // restored after the gateway's cleanup has stopped it
	be := startWriteBackend(t)
	gw := startGateway(t, be.addr(), nil)
	c := dialRDMA(t, gw.Addr().String())
	fh := bytes.Repeat([]byte{0xfe}, 32)
	size := func(i int) int {
		if i%4 == 3 {
			return 256<<10 + i
		}
		return 100 + i
	}
	args := func(i int) []byte {
		return new(enc).opaque(fh).u64(uint64(i)).u32(uint32(size(i))).u32(fileSync).u32(uint32(size(i))).b
	}
	send := func(i int) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.call(ctx, ulb.ProgNFS, 3, nfs3Write, args(i), pattern(size(i), byte(i)), nil); err != nil {
			t.Errorf("WRITE %d: %v", i, err)
		}
	}

	const serial, senders, each = 40, 8, 8
	for i := range serial {
		send(i)
	}
	if whole.Load()+cut.Load() == 0 {
		t.Errorf("%d calls one at a time: the engine wrote none of them to the idle backend itself", serial)
	}
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range each {
				send(serial + g*each + k)
			}
		}()
	}
	wg.Wait()

	const calls = serial + senders*each
	be.check(t, calls, fh, args, size)
	t.Logf("engine writes: %d whole, %d cut", whole.Load(), cut.Load())
}

// writeBackend is a backend that answers every call with NFS3ERR_IO
// and keeps, by XID, each record it read.
type writeBackend struct {
	*tcpServer
	mu  sync.Mutex
	got map[uint32][][]byte
}

func startWriteBackend(t *testing.T) *writeBackend {
	b := &writeBackend{got: map[uint32][][]byte{}}
	b.tcpServer = startTCPServer(t, func(c net.Conn) {
		go func() {
			defer c.Close()
			rr := tcprpc.NewRecordReader(c, &tcprpc.ReaderConfig{MaxRecord: 1 << 20})
			rw := tcprpc.NewRecordWriter(c, nil)
			for {
				rec, err := rr.ReadRecord(nil)
				if err != nil {
					return
				}
				var h oncrpc.CallHeader
				if _, err := h.Decode(rec); err != nil {
					t.Errorf("backend: a record that is no call (%d bytes): %v", len(rec), err)
					return
				}
				b.mu.Lock()
				b.got[h.XID] = append(b.got[h.XID], rec)
				b.mu.Unlock()
				if rw.WriteRecord(write3IOError(h.XID), nil, nil) != nil {
					return
				}
			}
		}()
	})
	return b
}

// reset closes the newest backend connection with an RST (SO_LINGER 0).
func (b *writeBackend) reset(t *testing.T) {
	b.tcpServer.mu.Lock()
	c := b.tcpServer.conns[len(b.tcpServer.conns)-1].(*net.TCPConn)
	b.tcpServer.mu.Unlock()
	if err := c.SetLinger(0); err != nil {
		t.Error(err)
	}
	c.Close()
}

// check: the backend read calls WRITEs (offsets 0..calls-1: the test's
// call index), each once and byte for byte as the client sent it.
func (b *writeBackend) check(t *testing.T, calls int, fh []byte, args func(int) []byte, size func(int) int) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.got) != calls {
		t.Fatalf("the backend read %d calls, want %d", len(b.got), calls)
	}
	seen := make([]bool, calls)
	for xid, recs := range b.got {
		if len(recs) != 1 {
			t.Errorf("xid %#x: the backend read it %d times", xid, len(recs))
		}
		rec := recs[0]
		i := callIndex(rec, len(gwtest.EncodeCall(xid, ulb.ProgNFS, 3, nfs3Write, nil))+len(fh)+4)
		if i < 0 || i >= calls || seen[i] {
			t.Fatalf("xid %#x: record of %d bytes names call %d", xid, len(rec), i)
		}
		seen[i] = true
		data := pattern(size(i), byte(i))
		want := bytes.Join([][]byte{gwtest.EncodeCall(xid, ulb.ProgNFS, 3, nfs3Write, args(i)), data, make([]byte, (4-len(data)%4)%4)}, nil)
		if !bytes.Equal(rec, want) {
			t.Errorf("call %d (xid %#x): the backend read %d bytes, not the %d the client sent", i, xid, len(rec), len(want))
		}
	}
}

// TestForwardInlineWriteAfterReset: an engine write that meets a backend
// connection the server has reset (RST) leaves its call to the writer
// goroutine, which reconnects and sends it again: the call is answered,
// and every call reaches the backend once and byte for byte. The server
// resets the connection in the moment before the engine's writev (the
// flush hook), so that writev itself meets the reset; the test fails if
// no engine write ever did.
func TestForwardInlineWriteAfterReset(t *testing.T) {
	be := startWriteBackend(t)
	var armed, resetDone atomic.Bool
	var cutAfterReset atomic.Int32
	t.Cleanup(forward.SetFlushHook(func() {
		if armed.CompareAndSwap(true, false) {
			be.reset(t)
			resetDone.Store(true)
		}
	}))
	t.Cleanup(forward.SetInlineHook(func(whole bool) {
		if resetDone.CompareAndSwap(true, false) && !whole {
			cutAfterReset.Add(1)
		}
	}))
	gw := startGateway(t, be.addr(), func(c *gateway.Config) {
		c.Backend.ReconnectInitial = 20 * time.Millisecond
	})
	c := dialRDMA(t, gw.Addr().String())
	fh := bytes.Repeat([]byte{0xfd}, 32)
	size := func(i int) int { return 200 + i }
	args := func(i int) []byte {
		return new(enc).opaque(fh).u64(uint64(i)).u32(uint32(size(i))).u32(fileSync).u32(uint32(size(i))).b
	}
	calls := 0
	send := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.call(ctx, ulb.ProgNFS, 3, nfs3Write, args(calls), pattern(size(calls), byte(calls)), nil); err != nil {
			t.Fatalf("WRITE %d: %v", calls, err)
		}
		calls++
	}
	for try := 0; try < 3 && cutAfterReset.Load() == 0; try++ {
		for range 20 { // one at a time: the engine writes them after inlineAfter
			send()
		}
		armed.Store(true)
		send()
	}
	if cutAfterReset.Load() == 0 {
		t.Fatal("no engine write met the reset connection (3 tries)")
	}
	send() // on the new connection
	be.check(t, calls, fh, args, size)
	if v := gwtest.Metric(t, gw.Metrics(), "rdmagw_backend_reconnects_total"); v < 1 {
		t.Errorf("reconnects = %v, want at least 1", v)
	}
}

// callIndex reads the WRITE offset (the test's call index) at off.
func callIndex(rec []byte, off int) int {
	if len(rec) < off+8 {
		return -1
	}
	return int(binary.BigEndian.Uint64(rec[off:]))
}

// write3IOError is a WRITE reply to xid: NFS3ERR_IO, no attributes.
func write3IOError(xid uint32) []byte {
	rh := oncrpc.AcceptedReply(xid, oncrpc.Success)
	b := make([]byte, rh.EncodedLen()+12)
	e := xdr.NewEncoder(b)
	if err := rh.Encode(&e); err != nil {
		panic(err)
	}
	n := len(e.Bytes())
	binary.BigEndian.PutUint32(b[n:], 5) // NFS3ERR_IO; wcc_data: no before, no after
	return b[:n+12]
}
