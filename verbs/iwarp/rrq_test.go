package iwarp

import (
	"fmt"
	"testing"

	"github.com/rdmagw/rdmagw/verbs"
)

// Read Request bodies live in per-batch storage (txState.rrq) that the
// iovecs of the batch point into. A flush in the middle of a batch (forced
// here by a tiny MaxFPDU: every FPDU of a Write is three iovecs, so the
// iovec capacity runs out after about 45 FPDUs) must not let a later Read
// Request reuse the storage of one that is still waiting to be written.
// Each round posts one chain: a Write of w FPDUs and then reads Reads, so
// over the rounds the flush lands on every position among the Reads; the
// Reads' data is checked byte for byte (with CRCs a corrupted request also
// ends the connection with a CRC Terminate; without them it would read the
// wrong memory).
func TestReadRequestsAcrossMidBatchFlush(t *testing.T) {
	for _, crc := range []bool{true, false} {
		t.Run(fmt.Sprintf("crc=%v", crc), func(t *testing.T) {
			cfg := Config{MaxFPDU: 128, DisableCRC: !crc}
			cli, srv := pair(t, cfg, "")
			c := cli.conn.(*conn)
			maxPay := c.maxULPDU - ddpTaggedLen
			const reads, rsize = 15, 40 // ORD 16: all Reads fit one batch
			const maxW = 60
			src := srv.mem(t, reads*rsize, allAccess)
			wdst := srv.mem(t, maxW*maxPay, allAccess)
			wsrc := cli.mem(t, maxW*maxPay, allAccess)
			sink := cli.mem(t, reads*rsize, allAccess)
			wrs := make([]verbs.SendWR, 1+reads)
			for w := 1; w <= maxW; w++ {
				fill(src.Bytes(), byte(w))
				fill(wsrc.Bytes(), byte(w)^0xa5)
				clear(sink.Bytes())
				wrs[0] = verbs.SendWR{ID: 1000, Op: verbs.OpRDMAWrite, Signal: true,
					SGL:        []verbs.SGE{{Buf: wsrc.Bytes()[:w*maxPay], LKey: wsrc.LKey()}},
					RemoteAddr: wdst.Addr(), RKey: wdst.RKey()}
				for i := range reads {
					wrs[1+i] = verbs.SendWR{ID: uint64(i), Op: verbs.OpRDMARead, Signal: true,
						SGL:        []verbs.SGE{{Buf: sink.Bytes()[i*rsize : (i+1)*rsize], LKey: sink.LKey()}},
						RemoteAddr: src.Addr() + uint64(i*rsize), RKey: src.RKey()}
				}
				for i := range wrs[:len(wrs)-1] {
					wrs[i].Next = &wrs[i+1]
				}
				if err := cli.conn.PostSend(&wrs[0]); err != nil {
					t.Fatalf("write of %d FPDUs: PostSend: %v", w, err)
				}
				for i := range wrs {
					wc := wait(t, cli.scq)
					if wc.ID != wrs[i].ID || wc.Status != verbs.StatusSuccess {
						t.Fatalf("write of %d FPDUs: completion %+v, want ID %d success (conn error: %v)",
							w, wc, wrs[i].ID, cli.conn.Err())
					}
				}
				sameBytes(t, sink.Bytes(), src.Bytes())
				sameBytes(t, wdst.Bytes()[:w*maxPay], wsrc.Bytes()[:w*maxPay])
			}
		})
	}
}
