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
// plans ended by a header that was not the predicted one; and segments
// under planMinSeg (a 1500-byte MTU's) must go through the buffer.
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
		{"small", regular(1400), 0, false},
	} {
		for _, cut := range []string{"whole", "pieces"} {
			for _, crc := range []bool{true, false} {
				if cut == "whole" && !crc {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/crc=%v", shape.name, cut, crc), func(t *testing.T) {
					cli, c, peer := dialRawConfig(t, Config{DisableCRC: !crc})
					r := rand.New(rand.NewPCG(uint64(len(shape.segs)), uint64(len(shape.name))))
					pieces := func(left int) int { return left }
					if cut == "pieces" {
						pieces = func(left int) int { return min(left, 1+r.IntN(70000)) }
					}
					sc, ga, reads := readResponseScatter(t, cli, c, peer, shape.segs, shape.sendAfter, crc, pieces,
						func() time.Duration { return time.Duration(r.IntN(2)*r.IntN(300)) * time.Microsecond })
					t.Logf("payloads placed from plans %d, plans ended by another header %d, %d reads for %d segments", sc, ga, reads, len(shape.segs))
					if small := shape.segs[0] < planMinSeg; small && (sc+ga > 0 || cut == "whole" && reads > uint64(len(shape.segs)/4)) {
						t.Errorf("segments of %d bytes: placed from plans %d, ended by another header %d, %d reads for %d segments: want no plans, reads of many segments",
							shape.segs[0], sc, ga, reads, len(shape.segs))
					} else if cut == "whole" && !small && (sc == 0 || shape.mispredict != (ga > 0)) {
						t.Errorf("placed from plans %d, ended by another header %d: want some placed and %v", sc, ga,
							map[bool]string{true: "some ended", false: "none ended"}[shape.mispredict])
					}
				})
			}
		}
	}
}

// readResponseScatter has the raw peer answer a Read of sum(segs) bytes
// with segments of those sizes (a Send after sendAfter of them, if not
// 0), its stream written in pieces of the sizes pieces returns with the
// pauses pause returns, and checks the Read, the sink and around it
// byte for byte, the Send, and the connection. It returns how many
// payloads plans placed and how many plans another header ended.
func readResponseScatter(t *testing.T, cli *side, c verbs.Conn, peer *rawPeer, segs []int, sendAfter int, crc bool,
	pieces func(left int) int, pause func() time.Duration) (scattered, gathered, reads uint64) {
	t.Helper()
	total := 0
	for _, n := range segs {
		total += n
	}
	x := &c.(*conn).rx
	sc0, ga0, rd0 := x.plan.scattered.Load(), x.plan.gathered.Load(), x.pump.Reads()
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
	if op := rdmapOpcode(rh.RDMAP & rdmapOpcodeMask); op != opReadReq || rr.parse(pl) != nil || int(rr.Size) != total {
		t.Fatalf("raw peer: got %s %x, want a %d-byte Read Request", &rh, pl, total)
	}
	resp := make([]byte, total)
	fill(resp, 0x61)
	msg := []byte("a Send between two segments of a Read Response")
	var stream []byte
	off := 0
	for i, n := range segs {
		h := tagged(opReadResp, rr.SinkSTag, rr.SinkTO+uint64(off))
		h.Last = off+n == total
		stream = appendFPDU(stream, h, resp[off:off+n], crc)
		off += n
		if i+1 == sendAfter {
			sh := untagged(opSend, qnSend, 1)
			sh.Last = true
			stream = appendFPDU(stream, sh, msg, crc)
		}
	}
	fed := make(chan error, 1)
	go func() {
		for done := 0; done < len(stream); {
			n := max(1, pieces(len(stream)-done))
			if _, err := peer.nc.Write(stream[done : done+n]); err != nil {
				fed <- err
				return
			}
			done += n
			if d := pause(); d > 0 {
				time.Sleep(d)
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
	if sendAfter > 0 {
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
	return x.plan.scattered.Load() - sc0, x.plan.gathered.Load() - ga0, x.pump.Reads() - rd0
}

// FuzzReadResponseScatter: any segmentation of a Read Response (sizes
// from the input, a Send between two segments or not), its stream cut
// where the input says, must place the Response byte for byte
// (readResponseScatter's checks), whatever the rx plans predicted.
func FuzzReadResponseScatter(f *testing.F) {
	f.Add([]byte{0, 0x7d, 0x00, 0x7d, 0x00, 0x7d, 0x00}, []byte{})
	f.Add([]byte{2, 0x9c, 0x40, 0x4e, 0x20, 0x9c, 0x40, 0x00, 0x10}, []byte{0x30, 0x00, 0x00, 0x05})
	f.Fuzz(func(t *testing.T, shape, cuts []byte) {
		if len(shape) == 0 {
			return
		}
		const total = 150000
		var segs []int
		const most = 65535 - ddpTaggedLen // the ULPDU length is 16 bits
		for left, i := total, 1; left > 0; i += 2 {
			n := min(left, most)
			if i+1 < len(shape) {
				n = min(n, 1+int(shape[i])<<8|int(shape[i+1]))
			}
			segs = append(segs, n)
			left -= n
		}
		sendAfter := int(shape[0]) % (len(segs) + 1)
		if sendAfter == len(segs) {
			sendAfter = 0 // a Send after the last segment is not between two
		}
		ci, last := 0, 0
		pieces := func(left int) int {
			last = left
			if ci+1 < len(cuts) {
				last = min(left, 1+int(cuts[ci])<<8|int(cuts[ci+1]))
				ci += 2
			}
			return last
		}
		pause := func() time.Duration {
			if last < 64 { // apart on the wire, likely apart in the reads
				return 100 * time.Microsecond
			}
			return 0
		}
		cli, c, peer := dialRawShared(t)
		readResponseScatter(t, cli, c, peer, segs, sendAfter, true, pieces, pause)
	})
}
