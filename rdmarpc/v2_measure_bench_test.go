package rdmarpc

import (
	"flag"
	"fmt"
	"testing"
	"time"
)

var mediumReps = flag.Int("v2reps", 1, "BenchmarkEngineMediumReply: repeats of every variant, alternating")

// A medium reply (8 to 64 KiB, no DDP-eligible item: a READDIR's, say)
// three ways, alternating size by size: version one through the Reply
// chunk (the only way it has), version two through the Reply chunk (what
// a requester offering one gets), and version two by message
// continuation (no Reply chunk: the draft's way). Per RPC it reports the
// responder's Sends and RDMA Writes, the requester's registrations and
// GRANTs; speeds compare within one run only.
//
//	go test ./rdmarpc -run '^$' -bench EngineMediumReply -benchtime 2000x -v2reps 3
func BenchmarkEngineMediumReply(b *testing.B) {
	type variant struct {
		name  string
		v2    bool
		chunk bool
	}
	variants := []variant{{"v1-reply-chunk", false, true}, {"v2-reply-chunk", true, true}, {"v2-continuation", true, false}}
	type side struct {
		p         *enginePair
		met, qmet *workCount
	}
	var sides [2]side
	for i, v2 := range []bool{false, true} {
		met := &workCount{countMetrics: newCountMetrics()}
		qmet := &workCount{countMetrics: newCountMetrics()}
		mode := VersionV1
		if v2 {
			mode = VersionV2
		}
		sides[i] = side{newEnginePair(b, pairOpts{rcfg: ResponderConfig{V2: v2, Metrics: met},
			qcfg: RequesterConfig{Version: mode, VersionMemory: new(VersionMemory), Metrics: qmet}}), met, qmet}
	}
	for rep := 1; rep <= *mediumReps; rep++ {
		for _, n := range []int{8 << 10, 16 << 10, 32 << 10, 64 << 10} {
			for _, v := range variants {
				s := sides[0]
				if v.v2 {
					s = sides[1]
				}
				b.Run(fmt.Sprintf("%dk/%s/r%d", n>>10, v.name, rep), func(b *testing.B) {
					var plan *ReplyPlan
					if v.chunk {
						plan = &ReplyPlan{ReplyChunk: n + 64}
					}
					msg := &Message{XID: 1, Pieces: []Piece{{Data: put32s(1, opBig, uint32(n))}}}
					call := func(xid uint32) {
						msg.XID = xid
						msg.Pieces[0].Data = put32s(xid, opBig, uint32(n))
						r, err := s.p.call(msg, plan)
						if err != nil {
							b.Fatal(err)
						}
						if len(r.Inline) != n+8 {
							b.Fatalf("reply of %d bytes, want %d", len(r.Inline), n+8)
						}
						r.Release()
					}
					call(1) // warm
					waitFor(b, 5*time.Second, "warm-up reply reported", func() bool { return s.met.sent() >= 1 })
					s.met.take()
					s.qmet.take()
					g0 := s.qmet.get("v2_grant")
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						call(uint32(i + 2))
					}
					b.StopTimer()
					waitFor(b, 5*time.Second, "replies reported", func() bool { return s.met.sent() >= b.N })
					posted, sends, sendBytes := s.met.take()
					per := func(x int) float64 { return float64(x) / float64(b.N) }
					b.ReportMetric(per(sends), "sends/rpc")
					b.ReportMetric(per(posted[WorkReplyChunk]), "writes/rpc")
					b.ReportMetric(per(s.qmet.get("v2_grant")-g0), "grants/rpc")
					b.ReportMetric(per(sendBytes), "sendB/rpc")
					q, _, _ := s.qmet.take()
					b.ReportMetric(per(q[WorkRegistration]), "regs/rpc")
				})
			}
		}
	}
}
