package rdmarpc

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/rdmagw/rdmagw/verbs"
)

// Steady-state cost of the version-two responder: a raw requester that
// allocates nothing itself (one pre-encoded call, its own receive and
// send requests) against a responder answering from benchHandler, so
// allocs/op is the responder's.

type v2BenchClient struct {
	*rawClient
	recvWR  [rawRecvs]verbs.RecvWR
	recvSGE [rawRecvs][1]verbs.SGE
	sendWR  []verbs.SendWR
	sendSGE [][1]verbs.SGE
	wcs     [rawRecvs]verbs.WC
	frags   [][]byte // the call's Sends, in the send area
	xidOff  int      // where the RPC XID is in frags[0]
	recvd   uint32
	ctx     context.Context
}

// newV2BenchClient prepares a call whose RPC message is 12 + rpcLen bytes,
// continued when that exceeds the responder's 4 KiB receive.
func newV2BenchClient(b *testing.B, addr string, rpcLen int) *v2BenchClient {
	c := &v2BenchClient{rawClient: dialRawConn(b, addr, linuxPrivateData), ctx: context.Background()}
	var h V2Header
	h.Init(0, 0, HTypeCallInline)
	rpc := append(put32s(0, opRead, 8), make([]byte, rpcLen)...)
	off := rawSendOff
	for _, f := range contFragments(b, &h, rpc, 4096) {
		buf := c.mem.Bytes()[off : off+len(f)]
		copy(buf, f)
		off += len(f)
		c.frags = append(c.frags, buf)
		c.sendSGE = append(c.sendSGE, [1]verbs.SGE{{Buf: buf, LKey: c.mr.LKey()}})
	}
	c.xidOff = V2CallInlineMinSize
	if len(c.frags) > 1 {
		c.xidOff = V2MiddleHeaderSize
	}
	c.sendWR = make([]verbs.SendWR, len(c.frags))
	for i := range c.sendWR {
		c.sendWR[i] = verbs.SendWR{ID: uint64(i), Op: verbs.OpSend, SGL: c.sendSGE[i][:]}
		if i > 0 {
			c.sendWR[i-1].Next = &c.sendWR[i]
		}
	}
	c.sendWR[len(c.sendWR)-1].Signal = true
	for i := range rawRecvs {
		c.recvSGE[i][0] = verbs.SGE{Buf: c.mem.Bytes()[i*rawRecvSize : (i+1)*rawRecvSize], LKey: c.mr.LKey()}
		c.recvWR[i] = verbs.RecvWR{ID: uint64(i), SGL: c.recvSGE[i][:]}
	}
	return c
}

// roundTrip sends the call as xid and waits for the whole reply (MIDDLE
// fragments, GRANTs skipped); it returns the reply's Sends.
func (c *v2BenchClient) roundTrip(b *testing.B, xid uint32) int {
	for i, f := range c.frags {
		binary.BigEndian.PutUint32(f[0:], xid)
		binary.BigEndian.PutUint32(f[8:], V2Credit(c.recvd, rawRecvs-2))
		if i == 0 { // the RPC XID, after a MIDDLE or a CALL_INLINE header
			binary.BigEndian.PutUint32(f[c.xidOff:], xid)
		}
	}
	if err := c.conn.PostSend(&c.sendWR[0]); err != nil {
		b.Fatal(err)
	}
	for c.scq.Poll(c.wcs[:1]) == 0 {
		if err := c.scq.Wait(c.ctx); err != nil {
			b.Fatal(err)
		}
	}
	sends := 0
	for {
		n := c.rcq.Poll(c.wcs[:])
		if n == 0 {
			if err := c.rcq.Wait(c.ctx); err != nil {
				b.Fatal(err)
			}
			continue
		}
		done := false
		for _, wc := range c.wcs[:n] {
			if wc.Status != verbs.StatusSuccess {
				b.Fatalf("receive %v", wc.Status)
			}
			i := int(wc.ID)
			m := c.mem.Bytes()[i*rawRecvSize:]
			if binary.BigEndian.Uint32(m[0:]) == xid {
				sends++
				done = done || HType(binary.BigEndian.Uint32(m[12:])) == HTypeReplyInline
			}
			c.recvd++
			if err := c.conn.PostRecv(&c.recvWR[i]); err != nil {
				b.Fatal(err)
			}
		}
		if done {
			return sends
		}
	}
}

func benchV2Responder(b *testing.B, payload, rpcLen int) {
	h := &benchHandler{calls: make(chan *Call, 256), done: make(chan struct{})}
	p := newEnginePair(b, pairOpts{noRequester: true, handler: h,
		rcfg: ResponderConfig{V2: true, Metrics: nopResponderMetrics{}}}) // countMetrics allocates
	if payload > 0 {
		var err error
		if h.payload, err = p.srv.pool.Get(payload); err != nil {
			b.Fatal(err)
		}
		pattern(h.payload.Bytes, 1)
	}
	go h.run()
	c := newV2BenchClient(b, p.rawAddr, rpcLen)
	if err := <-p.accepted; err != nil {
		b.Fatal(err)
	}
	for i := range 20 {
		c.roundTrip(b, uint32(i+1))
	}
	b.ReportAllocs()
	b.ResetTimer()
	sends := 0
	for i := 0; i < b.N; i++ {
		sends += c.roundTrip(b, uint32(100+i))
	}
	b.StopTimer()
	b.ReportMetric(float64(sends)/float64(b.N), "sends/op")
	p.close()
	close(h.calls)
	<-h.done
	if h.payload != nil {
		h.payload.Release()
	}
}

// BenchmarkV2ResponderInline: a small CALL_INLINE, a small REPLY_INLINE.
func BenchmarkV2ResponderInline(b *testing.B) { benchV2Responder(b, 0, 0) }

// BenchmarkV2ResponderContinued16K: a 16 KiB reply item without a Write
// or Reply chunk, sent by continuation (5 Sends).
func BenchmarkV2ResponderContinued16K(b *testing.B) { benchV2Responder(b, 16384, 0) }

// BenchmarkV2ResponderContinuedCall16K: a 16 KiB call in 5 Sends,
// reassembled, and a small reply.
func BenchmarkV2ResponderContinuedCall16K(b *testing.B) { benchV2Responder(b, 0, 16384) }
