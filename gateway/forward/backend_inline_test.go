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
	var mu sync.Mutex
	got := map[uint32][]byte{} // record by XID, as the backend read it
	srv := startTCPServer(t, func(c net.Conn) {
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
				mu.Lock()
				got[h.XID] = rec
				mu.Unlock()
				if rw.WriteRecord(write3IOError(h.XID), nil, nil) != nil {
					return
				}
			}
		}()
	})
	gw := startGateway(t, srv.addr(), nil)
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
	mu.Lock()
	defer mu.Unlock()
	if len(got) != calls {
		t.Fatalf("the backend read %d calls, want %d", len(got), calls)
	}
	seen := make([]bool, calls)
	for xid, rec := range got {
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
	t.Logf("engine writes: %d whole, %d cut", whole.Load(), cut.Load())
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
