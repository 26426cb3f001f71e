package forward_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/verbs"
	_ "github.com/rdmagw/rdmagw/verbs/iwarp"
	"github.com/rdmagw/rdmagw/xdr"
)

// A deliberately small RPC client for the gateway tests: it builds calls
// by hand (AUTH_SYS root), sends them over RPC-over-RDMA with the
// requester engine (WRITE data as an Item piece, so it travels in a Read
// chunk; Write and Reply chunks offered from ulb.EstimateReply), and
// splices Write chunk data back into the reply with a ulb.Walker. A fuller
// NFS client lives in internal/nfsclient.

var testXID atomic.Uint32

func init() { testXID.Store(uint32(time.Now().UnixNano())) }

// rdmaClient is an RPC client on a requester connection.
type rdmaClient struct {
	t    testing.TB
	pool *rdmarpc.Pool
	rq   *rdmarpc.RequesterConn
	// inlineRecv is our receive size: a reply estimated larger gets a
	// Reply chunk.
	inlineRecv int
	// lastKind is how the last reply came (inline or Reply chunk);
	// lastChunks the Write chunk bytes it carried. Tests call from
	// several goroutines at once: lastMu guards them.
	lastMu     sync.Mutex
	lastKind   rdmarpc.ReplyKind
	lastChunks int
}

// newClientDevice opens a client-side iWARP device and pool, released at
// the test's end.
func newClientDevice(t testing.TB) (verbs.Device, *rdmarpc.Pool) {
	t.Helper()
	dev := nfstest.OpenIWARP(t, "127.0.0.1")
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	pool, err := rdmarpc.NewPool(pd, rdmarpc.PoolConfig{MaxBytes: 64 << 20, Access: verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Close()
		pd.Close()
	})
	return dev, pool
}

func dialRDMA(t testing.TB, addr string) *rdmaClient {
	t.Helper()
	return dialRDMAWith(t, addr, nil)
}

// dialRDMAWith is dialRDMA with the requester's configuration edited.
func dialRDMAWith(t testing.TB, addr string, edit func(*rdmarpc.RequesterConfig)) *rdmaClient {
	t.Helper()
	dev, pool := newClientDevice(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := rdmarpc.RequesterConfig{Pool: pool, Credits: 32}
	if edit != nil {
		edit(&cfg)
	}
	rq, err := rdmarpc.DialRequester(ctx, dev, addr, cfg)
	if err != nil {
		t.Fatalf("dial gateway %s: %v", addr, err)
	}
	c := &rdmaClient{t: t, pool: pool, rq: rq, inlineRecv: 4096}
	t.Cleanup(c.close)
	return c
}

func (c *rdmaClient) close() {
	if c.rq != nil {
		c.rq.Close()
		c.rq = nil
	}
}

// call sends one RPC. data, if not nil, is the body of the call's
// DDP-eligible item (WRITE data), which must come right after args and
// is followed by its XDR pad; after is what follows the item. It returns
// the whole reply, spliced back into one byte stream.
func (c *rdmaClient) call(ctx context.Context, prog, vers, proc uint32, args []byte, data []byte, after []byte) ([]byte, error) {
	xid := testXID.Add(1)
	head := gwtest.EncodeCall(xid, prog, vers, proc, args)
	var msg rdmarpc.Message
	msg.Reset()
	msg.XID = xid
	hb, err := c.pool.Get(len(head))
	if err != nil {
		return nil, err
	}
	defer hb.Release()
	copy(hb.Bytes, head)
	msg.Append(rdmarpc.Piece{Data: hb.Bytes, Buf: hb})
	if data != nil {
		db, err := c.pool.Get(max(len(data), 1))
		if err != nil {
			return nil, err
		}
		defer db.Release()
		copy(db.Bytes, data)
		msg.Append(rdmarpc.Piece{Data: db.Bytes[:len(data)], Item: true, Buf: db})
	}
	if len(after) > 0 {
		ab, err := c.pool.Get(len(after))
		if err != nil {
			return nil, err
		}
		defer ab.Release()
		copy(ab.Bytes, after)
		msg.Append(rdmarpc.Piece{Data: ab.Bytes, Buf: ab})
	}

	// The argument bytes the estimator sees: everything after the RPC
	// header, with the item inline (it only reads the fixed arguments).
	plan := rdmarpc.ReplyPlan{}
	est, err := ulb.EstimateReply(prog, vers, proc, args)
	if err == nil {
		for i := 0; i < est.NItems; i++ {
			plan.WriteChunks = append(plan.WriteChunks, est.ItemMax[i])
		}
		if est.Inline > c.inlineRecv || est.Unpredictable {
			plan.ReplyChunk = max(est.Inline, 64<<10)
		}
	} else {
		plan.ReplyChunk = 64 << 10
	}
	var r rdmarpc.Result
	if err := c.rq.Call(ctx, &msg, &plan, &r); err != nil {
		return nil, err
	}
	defer r.Release()
	chunks := 0
	for _, ch := range r.Chunks {
		chunks += len(ch)
	}
	c.lastMu.Lock()
	c.lastKind, c.lastChunks = r.Kind, chunks
	c.lastMu.Unlock()
	return spliceReply(r.Inline, r.Chunks, prog, vers, proc)
}

// spliceReply puts Write chunk data back into the reduced reply: the
// walker finds each item's length word; when its Write chunk holds the
// body, the body (and its pad) go after the length word.
func spliceReply(inline []byte, chunks [][]byte, prog, vers, proc uint32) ([]byte, error) {
	var h oncrpc.ReplyHeader
	n, err := h.Decode(inline)
	if err != nil {
		return nil, fmt.Errorf("reply header: %w", err)
	}
	if h.Stat != oncrpc.MsgAccepted || h.AcceptStat != oncrpc.Success || !ulb.Supported(prog, vers) {
		return append([]byte(nil), inline...), nil
	}
	out := append([]byte(nil), inline[:n]...)
	rest := inline[n:]
	var w ulb.Walker
	if err := w.Reset(ulb.Reply, prog, vers, proc); err != nil {
		return nil, err
	}
	for {
		st, err := w.Next(rest)
		if err != nil {
			return nil, fmt.Errorf("walk reply: %w", err)
		}
		if st.Kind != ulb.StepItem {
			break
		}
		it := st.Item
		out = append(out, rest[:it.Offset]...)
		rest = rest[it.Offset:]
		if it.Index < len(chunks) && len(chunks[it.Index]) == it.Length && it.Length > 0 {
			out = append(out, chunks[it.Index]...)
			out = append(out, make([]byte, it.Pad)...)
		} else {
			// The body came inline.
			out = append(out, rest[:it.Length+it.Pad]...)
			rest = rest[it.Length+it.Pad:]
		}
	}
	return append(out, rest...), nil
}

// tcpCall sends one call over plain TCP (MOUNT straight to the server)
// and returns the reply record.
func tcpCall(t testing.TB, addr string, prog, vers, proc uint32, args []byte) []byte {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tcprpc.NewRecordWriter(c, nil).WriteRecord(gwtest.EncodeCall(testXID.Add(1), prog, vers, proc, args), nil, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := tcprpc.NewRecordReader(c, nil).ReadRecord(nil)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// results checks an accepted SUCCESS reply and returns a decoder over
// its results.
func results(t testing.TB, reply []byte) *xdr.Decoder {
	t.Helper()
	var h oncrpc.ReplyHeader
	n, err := h.Decode(reply)
	if err != nil {
		t.Fatalf("reply header: %v", err)
	}
	if h.Stat != oncrpc.MsgAccepted || h.AcceptStat != oncrpc.Success {
		t.Fatalf("reply not SUCCESS: %+v", h)
	}
	d := xdr.NewDecoder(reply[n:])
	return &d
}

// callRaw sends raw as the RPC message (whatever it holds) and returns
// the reply as it came.
func (c *rdmaClient) callRaw(ctx context.Context, xid uint32, raw []byte) ([]byte, error) {
	var msg rdmarpc.Message
	msg.Reset()
	msg.XID = xid
	b, err := c.pool.Get(len(raw))
	if err != nil {
		return nil, err
	}
	defer b.Release()
	copy(b.Bytes, raw)
	msg.Append(rdmarpc.Piece{Data: b.Bytes, Buf: b})
	var r rdmarpc.Result
	if err := c.rq.Call(ctx, &msg, &rdmarpc.ReplyPlan{}, &r); err != nil {
		return nil, err
	}
	defer r.Release()
	return append([]byte(nil), r.Inline...), nil
}
