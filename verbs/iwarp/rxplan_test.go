package iwarp

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// TestReadResponseScatter: a large RDMA Read's Response from a raw peer,
// cut into segments as the shape says, with or without a Send of the
// peer's between two of its segments, written whole or in random pieces
// with pauses (so that reads end anywhere: inside a payload, a trailer,
// a predicted header). Whatever the rx plans lay out (rxplan.go), the
// Read must complete with the sink holding the Response byte for byte
// and nothing around it touched, and the Send must arrive intact. Where
// the stream is written whole the counters must show the path taken:
// payloads placed from plans, and for the shapes a plan cannot predict,
// plans ended by a header that was not the predicted one.
func TestReadResponseScatter(t *testing.T) {
	const total = 300000
	regular := func(size int) []int {
		var s []int
		for left := total; left > 0; left -= size {
			s = append(s, min(size, left))
		}
		return s
	}
	for _, shape := range []struct {
		name       string
		segs       []int
		sendAfter  int  // a Send after this many segments (0: none)
		mispredict bool // plans must meet an unexpected header
	}{
		{"regular", regular(32000), 0, false},
		{"odd", regular(65001), 0, false},
		{"irregular", []int{40000, 40000, 20000, 40000, 40000, 1000, 40000, 39000, 40000}, 0, true},
		{"send-between", regular(32000), 2, true},
	} {
		for _, cut := range []string{"whole", "pieces"} {
			for _, crc := range []bool{true, false} {
				if cut == "whole" && !crc {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/crc=%v", shape.name, cut, crc), func(t *testing.T) {
					cli, c, peer := dialRawConfig(t, Config{DisableCRC: !crc})
					x := &c.(*conn).rx
					scattered, gathered := x.plan.scattered.Load(), x.plan.gathered.Load()
					sink := cli.mem(t, total+2000, allAccess)
					fill(sink.Bytes(), 0xee)
					before := append([]byte(nil), sink.Bytes()...)
					in := cli.mem(t, 200, verbs.AccessLocalWrite)
					if err := c.PostRecv(&verbs.RecvWR{ID: 7, SGL: []verbs.SGE{{Buf: in.Bytes(), LKey: in.LKey()}}}); err != nil {
						t.Fatal(err)
					}
					if err := c.PostSend(&verbs.SendWR{ID: 3, Op: verbs.OpRDMARead, Signal: true, RemoteAddr: 0x20000, RKey: 0x4321,
						SGL: []verbs.SGE{{Buf: sink.Bytes()[1000 : 1000+total], LKey: sink.LKey()}}}); err != nil {
						t.Fatal(err)
					}
					rh, pl := peer.read()
					var rr readRequest
					if op := rdmapOpcode(rh.RDMAP & rdmapOpcodeMask); op != opReadReq || rr.parse(pl) != nil || rr.Size != total {
						t.Fatalf("raw peer: got %s %x, want a %d-byte Read Request", &rh, pl, total)
					}
					resp := make([]byte, total)
					fill(resp, 0x61)
					msg := []byte("a Send between two segments of a Read Response")
					var stream []byte
					off := 0
					for i, n := range shape.segs {
						h := tagged(opReadResp, rr.SinkSTag, rr.SinkTO+uint64(off))
						h.Last = off+n == total
						stream = appendFPDU(stream, h, resp[off:off+n], crc)
						off += n
						if i+1 == shape.sendAfter {
							sh := untagged(opSend, qnSend, 1)
							sh.Last = true
							stream = appendFPDU(stream, sh, msg, crc)
						}
					}
					r := rand.New(rand.NewPCG(uint64(len(shape.segs)), uint64(len(shape.name))))
					fed := make(chan error, 1)
					go func() {
						for done := 0; done < len(stream); {
							n := len(stream) - done
							if cut == "pieces" {
								n = min(n, 1+r.IntN(70000))
							}
							if _, err := peer.nc.Write(stream[done : done+n]); err != nil {
								fed <- err
								return
							}
							done += n
							if cut == "pieces" && r.IntN(2) == 0 {
								time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
							}
						}
						fed <- nil
					}()
					if wc := wait(t, cli.scq); wc.ID != 3 || wc.Status != verbs.StatusSuccess {
						t.Fatalf("Read %+v (conn err %v), want ID 3 success", wc, c.Err())
					}
					if err := <-fed; err != nil {
						t.Fatal(err)
					}
					sameBytes(t, sink.Bytes()[1000:1000+total], resp)
					sameBytes(t, sink.Bytes()[:1000], before[:1000])
					sameBytes(t, sink.Bytes()[1000+total:], before[1000+total:])
					if shape.sendAfter > 0 {
						wc := wait(t, cli.rcq)
						if wc.ID != 7 || wc.Status != verbs.StatusSuccess || wc.ByteLen != len(msg) {
							t.Fatalf("receive %+v, want ID 7 with %d bytes", wc, len(msg))
						}
						sameBytes(t, in.Bytes()[:len(msg)], msg)
					}
					if err := c.Err(); err != nil {
						t.Fatalf("connection ended: %v", err)
					}
					if n := c.(*conn).bigReads.Load(); n != 0 {
						t.Errorf("%d large Reads counted outstanding after the only one completed", n)
					}
					sc, ga := x.plan.scattered.Load()-scattered, x.plan.gathered.Load()-gathered
					t.Logf("payloads placed from plans %d, plans ended by another header %d", sc, ga)
					if cut == "whole" && (sc == 0 || shape.mispredict != (ga > 0)) {
						t.Errorf("placed from plans %d, ended by another header %d: want some placed and %v", sc, ga,
							map[bool]string{true: "some ended", false: "none ended"}[shape.mispredict])
					}
				})
			}
		}
	}
}
