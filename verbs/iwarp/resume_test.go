package iwarp

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// The receive side is one state machine that can stop anywhere in the
// stream and resume there (rx.go): inside a header, a payload (also
// between the SGEs it scatters over, and in a payload read straight into
// its destination), a trailer. TestReceiveResumesAnywhere feeds the same
// stream, every opcode the receiver places, cut into pieces in several
// ways (one byte at a time, seeded random sizes, one write), and checks
// that every byte lands where it belongs and every completion and
// answer is the same.
func TestReceiveResumesAnywhere(t *testing.T) {
	for _, cut := range []struct {
		name string
		// sizes returns the next piece's length (at most left).
		sizes func(r *rand.Rand, done, left int) int
	}{
		{"whole", func(_ *rand.Rand, _, left int) int { return left }},
		// Every boundary of the small FPDUs at the front, byte by byte,
		// then pieces of 1,000.
		{"bytes", func(_ *rand.Rand, done, left int) int {
			if done < 300 {
				return 1
			}
			return min(left, 1000)
		}},
		{"random", func(r *rand.Rand, _, left int) int {
			if r.IntN(8) == 0 {
				return min(left, 1+r.IntN(40000))
			}
			return min(left, 1+r.IntN(300))
		}},
	} {
		for _, crc := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/crc=%v", cut.name, crc), func(t *testing.T) {
				testReceiveResumes(t, crc, cut.sizes)
			})
		}
	}
}

func testReceiveResumes(t *testing.T, crc bool, sizes func(r *rand.Rand, done, left int) int) {
	cli, c, peer := dialRawConfig(t, Config{DisableCRC: !crc})
	reg := cli.mem(t, 256<<10, allAccess)
	src := reg.Bytes()[200<<10:]
	fill(src, 0x3c)
	in1 := cli.mem(t, 100, verbs.AccessLocalWrite)
	in2 := cli.mem(t, 25000, verbs.AccessLocalWrite)
	if err := c.PostRecv(&verbs.RecvWR{ID: 1, SGL: []verbs.SGE{{Buf: in1.Bytes(), LKey: in1.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	// Receive 2 scatters over two SGEs; its first segment spans both.
	if err := c.PostRecv(&verbs.RecvWR{ID: 2, SGL: []verbs.SGE{
		{Buf: in2.Bytes()[:5000], LKey: in2.LKey()}, {Buf: in2.Bytes()[5000:], LKey: in2.LKey()}}}); err != nil {
		t.Fatal(err)
	}

	// The peer's stream: the small FPDUs first (cut byte by byte in
	// "bytes"), each with pad bytes before its CRC.
	var stream []byte
	fpdu := func(h ddpHeader, payload []byte) { stream = appendFPDU(stream, h, payload, crc) }
	data := make([]byte, 120100)
	fill(data, 0x5a)
	// W1: 101 bytes at offset 0.
	h := tagged(opWrite, reg.RKey(), reg.Addr())
	h.Last = true
	fpdu(h, data[:101])
	// A zero-length Write (as the RFC 6581 RTR), whose STag is not
	// looked at.
	h = tagged(opWrite, 0, 0)
	h.Last = true
	fpdu(h, nil)
	// RR: a Read Request for 3,000 bytes of the region.
	h = untagged(opReadReq, qnReadReq, 1)
	h.Last = true
	var rrb [readReqLen]byte
	(&readRequest{SinkSTag: 0x1234, SinkTO: 0x10000, Size: 3000, SrcSTag: reg.RKey(), SrcTO: reg.Addr() + 200<<10}).put(rrb[:])
	fpdu(h, rrb[:])
	// S1: 50 bytes.
	h = untagged(opSend, qnSend, 1)
	h.Last = true
	msg1 := data[:50]
	fpdu(h, msg1)
	// W2: 100,000 bytes at offset 1,000, in a 60,001- and a 39,999-byte
	// segment (payloads read straight into the region).
	h = tagged(opWrite, reg.RKey(), reg.Addr()+1000)
	fpdu(h, data[100:60101])
	h.TO += 60001
	h.Last = true
	fpdu(h, data[60101:100100])
	// S2: a 20,000-byte message in three segments.
	msg2 := data[100100:120100]
	for mo := 0; mo < len(msg2); mo += 7999 {
		h = untagged(opSend, qnSend, 2)
		h.MO = uint32(mo)
		end := min(mo+7999, len(msg2))
		h.Last = end == len(msg2)
		fpdu(h, msg2[mo:end])
	}

	r := rand.New(rand.NewPCG(1, uint64(len(stream))))
	// feed writes the stream in pieces; its error is the test's to
	// report (after a failure the connection is closed under it).
	feed := func(stream []byte) error {
		for done := 0; done < len(stream); {
			n := max(1, sizes(r, done, len(stream)-done))
			if _, err := peer.nc.Write(stream[done : done+n]); err != nil {
				return fmt.Errorf("raw peer: %w", err)
			}
			done += n
			if n < 8 {
				// Apart on the wire, and most likely apart in the
				// receiver's reads.
				time.Sleep(200 * time.Microsecond)
			}
		}
		return nil
	}
	fed := make(chan error, 1)
	go func() { fed <- feed(stream) }()

	// The Read Request's answer, as the peer reads it.
	var got []byte
	for len(got) < 3000 {
		rh, pl := peer.read()
		if op := rdmapOpcode(rh.RDMAP & rdmapOpcodeMask); op != opReadResp || rh.STag != 0x1234 || rh.TO != 0x10000+uint64(len(got)) {
			t.Fatalf("raw peer: got %s, want the Read Response at TO %#x (conn err %v)", &rh, 0x10000+len(got), c.Err())
		}
		got = append(got, pl...)
	}
	sameBytes(t, got, src[:3000])
	for _, want := range []struct {
		id  uint64
		msg []byte
		in  []byte
	}{{1, msg1, in1.Bytes()}, {2, msg2, in2.Bytes()}} {
		wc := wait(t, cli.rcq)
		if wc.ID != want.id || wc.Status != verbs.StatusSuccess || wc.ByteLen != len(want.msg) {
			t.Fatalf("receive %+v (conn err %v), want ID %d success with %d bytes", wc, c.Err(), want.id, len(want.msg))
		}
		sameBytes(t, want.in[:len(want.msg)], want.msg)
	}
	// The Writes came before the Sends: placed by now.
	sameBytes(t, reg.Bytes()[:101], data[:101])
	sameBytes(t, reg.Bytes()[1000:101000], data[100:100100])
	if err := <-fed; err != nil {
		t.Fatal(err)
	}

	// An RDMA Read of ours, its 70,000-byte answer in two segments
	// scattered over two SGEs of different regions.
	x, y := cli.mem(t, 30000, allAccess), cli.mem(t, 40000, allAccess)
	if err := c.PostSend(&verbs.SendWR{ID: 3, Op: verbs.OpRDMARead, Signal: true, RemoteAddr: 0x20000, RKey: 0x4321,
		SGL: []verbs.SGE{{Buf: x.Bytes(), LKey: x.LKey()}, {Buf: y.Bytes(), LKey: y.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	rh, pl := peer.read()
	var rr readRequest
	if op := rdmapOpcode(rh.RDMAP & rdmapOpcodeMask); op != opReadReq || rr.parse(pl) != nil || rr.Size != 70000 {
		t.Fatalf("raw peer: got %s %x, want a 70,000-byte Read Request", &rh, pl)
	}
	stream = stream[:0]
	h = tagged(opReadResp, rr.SinkSTag, rr.SinkTO)
	resp := make([]byte, 70000)
	fill(resp, 0x77)
	fpdu(h, resp[:65000])
	h.TO += 65000
	h.Last = true
	fpdu(h, resp[65000:])
	if err := feed(stream); err != nil {
		t.Fatal(err)
	}
	if wc := wait(t, cli.scq); wc.ID != 3 || wc.Status != verbs.StatusSuccess {
		t.Fatalf("Read %+v (conn err %v), want ID 3 success", wc, c.Err())
	}
	sameBytes(t, x.Bytes(), resp[:30000])
	sameBytes(t, y.Bytes(), resp[30000:])
	if err := c.Err(); err != nil {
		t.Fatalf("connection ended: %v", err)
	}
}

// FuzzReceiveStream feeds any bytes to a connection as the peer's stream
// (after the MPA exchange, with CRCs), in two pieces cut where the input
// says, then closes the peer's side. Whatever the bytes, the receiver
// must not panic and the connection must end (EOF, or the Terminate the
// bytes earned): never hang inside the state machine. The seeds are
// well-formed streams (Sends of one and of several segments, a
// zero-length Write, a Terminate) for the fuzzer to bend.
func FuzzReceiveStream(f *testing.F) {
	var seed []byte
	put := func(h ddpHeader, payload []byte) { seed = appendFPDU(seed, h, payload, true) }
	h := untagged(opSend, qnSend, 1)
	h.Last = true
	put(h, []byte("hello"))
	f.Add(uint16(3), append([]byte(nil), seed...))
	h = tagged(opWrite, 0, 0)
	h.Last = true
	put(h, nil)
	for mo := 0; mo < 300; mo += 100 {
		h = untagged(opSend, qnSend, 2)
		h.MO, h.Last = uint32(mo), mo == 200
		put(h, make([]byte, 100))
	}
	f.Add(uint16(40), append([]byte(nil), seed...))
	tm := terminate{Layer: LayerDDP, EType: DDPUntaggedBuffer, Code: DDPUntaggedNoBuffer, HaveDDP: true, SegLen: 20, DDP: untagged(opSend, qnSend, 5)}
	var tb [termMaxLen]byte
	h = untagged(opTerminate, qnTerminate, 1)
	h.Last = true
	put(h, tb[:tm.put(tb[:])])
	f.Add(uint16(len(seed)-3), seed)
	f.Fuzz(func(t *testing.T, cut uint16, stream []byte) {
		cli, c, peer := dialRawShared(t)
		in := cli.mem(t, 4096, verbs.AccessLocalWrite)
		for i := range 4 {
			if err := c.PostRecv(&verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{
				{Buf: in.Bytes()[i*1024 : i*1024+500], LKey: in.LKey()}, {Buf: in.Bytes()[i*1024+500 : (i+1)*1024], LKey: in.LKey()}}}); err != nil {
				t.Fatal(err)
			}
		}
		go io.Copy(io.Discard, peer.nc) // what the provider answers
		k := min(int(cut), len(stream))
		peer.nc.Write(stream[:k])
		peer.nc.Write(stream[k:])
		peer.nc.(*net.TCPConn).CloseWrite()
		waitDone(t, c)
	})
}
