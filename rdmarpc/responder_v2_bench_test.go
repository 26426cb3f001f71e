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
	sendWR  verbs.SendWR
	sendSGE [1]verbs.SGE
	wcs     [rawRecvs]verbs.WC
	call    []byte // the call, in the send area
	recvd   uint32
	ctx     context.Context
}

func newV2BenchClient(b *testing.B, addr string, rpcLen int) *v2BenchClient {
	c := &v2BenchClient{rawClient: dialRawConn(b, addr, linuxPrivateData), ctx: context.Background()}
	var h V2Header
	h.Init(0, 0, HTypeCallInline)
	msg := contMsg(b, &h, put32s(0, opRead, 8))
	msg = append(msg, make([]byte, rpcLen)...)
	c.call = c.mem.Bytes()[rawSendOff : rawSendOff+len(msg)]
	copy(c.call, msg)
	c.sendSGE[0] = verbs.SGE{Buf: c.call, LKey: c.mr.LKey()}
	c.sendWR = verbs.SendWR{ID: 1, Op: verbs.OpSend, Signal: true, SGL: c.sendSGE[:]}
	for i := range rawRecvs {
		c.recvSGE[i][0] = verbs.SGE{Buf: c.mem.Bytes()[i*rawRecvSize : (i+1)*rawRecvSize], LKey: c.mr.LKey()}
		c.recvWR[i] = verbs.RecvWR{ID: uint64(i), SGL: c.recvSGE[i][:]}
	}
	return c
}

// roundTrip sends the call as xid and waits for the whole reply (MIDDLE
// fragments, GRANTs skipped); it returns the reply's Sends.
func (c *v2BenchClient) roundTrip(b *testing.B, xid uint32) int {
	binary.BigEndian.PutUint32(c.call[0:], xid)
	binary.BigEndian.PutUint32(c.call[8:], V2Credit(c.recvd, rawRecvs-2))
	binary.BigEndian.PutUint32(c.call[32:], xid) // the RPC XID
	if err := c.conn.PostSend(&c.sendWR); err != nil {
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
