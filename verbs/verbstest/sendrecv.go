package verbstest

import (
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

const slot = 4096 // receive buffer size of the messaging cases

// messageSize gives message i of the ordering case its size: every fifth
// one from a table of edge sizes, the rest spread over [0, slot].
func messageSize(i int) int {
	edges := []int{0, 1, 2, 3, 4, 7, 8, 63, 64, 65, 511, 512, 1023, 1024, 1025, 2048, 4095, 4096}
	if i%5 == 0 {
		return edges[(i/5)%len(edges)]
	}
	return (i*7919 + 13) % (slot + 1)
}

// message fills b with the bytes of message i; the first 4 (when there is
// room) carry i so a misdelivered message is named in the failure.
func message(b []byte, i int) {
	fill(b, uint64(i)+1000)
	if len(b) >= 4 {
		binary.BigEndian.PutUint32(b, uint32(i))
	}
}

// testSendOrdering sends 1000 messages of varied sizes in windows of 64
// receives: each receive completes in posting order with the message sent
// in the same position, byte for byte, and nothing beyond its length is
// touched.
func testSendOrdering(t *testing.T, c config) {
	const total, window = 1000, 64
	e := newEnv(t, c)
	p := e.connect(t, nil, nil)
	out := e.cli.region(t, window*slot, 0)
	in := e.srv.region(t, window*slot, verbs.AccessLocalWrite)
	want := make([]byte, slot)
	for base := 0; base < total; base += window {
		n := min(window, total-base)
		for j := range n {
			buf := in.Bytes()[j*slot : (j+1)*slot]
			for k := range buf {
				buf[k] = 0xee // a marker to see what the receive did not write
			}
			postRecv(t, p.srv.conn, recvWR(uint64(base+j), in.sge(j*slot, slot)))
		}
		// Post singly and in chains of up to four, to mix both paths.
		for j := 0; j < n; {
			k := min(1+(base/window+j)%4, n-j)
			wrs := make([]*verbs.SendWR, k)
			for m := range k {
				i := base + j + m
				size := messageSize(i)
				message(out.Bytes()[(j+m)*slot:(j+m)*slot+size], i)
				wrs[m] = sendWR(uint64(i), out.sge((j+m)*slot, size))
			}
			post(t, p.cli.conn, chain(wrs...))
			j += k
		}
		for j, wc := range e.waitWCs(t, p.cli.scq, n) {
			mustWC(t, wc, uint64(base+j), verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
		}
		for j, wc := range e.waitWCs(t, p.srv.rcq, n) {
			i := base + j
			size := messageSize(i)
			mustWC(t, wc, uint64(i), verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
			if wc.ByteLen != size || wc.Invalidated {
				t.Fatalf("message %d: receive %s, want length %d and no invalidation", i, describe1(wc), size)
			}
			message(want[:size], i)
			for k := size; k < slot; k++ {
				want[k] = 0xee
			}
			same(t, "message "+strconv.Itoa(i), in.Bytes()[j*slot:(j+1)*slot], want)
		}
	}
	expectQuiet(t, p.srv.rcq, 50*time.Millisecond, "server receive CQ after the last message")
}

// testUnsignalled posts 16 sends of which only the 8th and 16th ask for a
// completion: exactly those two complete at the sender, all 16 arrive.
func testUnsignalled(t *testing.T, c config) {
	e := newEnv(t, c)
	p := e.connect(t, nil, nil)
	out := e.cli.region(t, 16*64, 0)
	in := e.srv.region(t, 16*64, verbs.AccessLocalWrite)
	for i := range 16 {
		postRecv(t, p.srv.conn, recvWR(uint64(i), in.sge(i*64, 64)))
	}
	for i := range 16 {
		message(out.Bytes()[i*64:(i+1)*64], i)
		wr := sendWR(uint64(i), out.sge(i*64, 64))
		wr.Signal = i == 7 || i == 15
		post(t, p.cli.conn, wr)
	}
	wcs := e.waitWCs(t, p.cli.scq, 2)
	mustWC(t, wcs[0], 7, verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
	mustWC(t, wcs[1], 15, verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
	for i, wc := range e.waitWCs(t, p.srv.rcq, 16) {
		mustWC(t, wc, uint64(i), verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
	}
	same(t, "16 messages", in.Bytes(), out.Bytes())
	expectQuiet(t, p.cli.scq, 200*time.Millisecond, "sender CQ after unsignalled sends")
}

// testSendScatterGather gathers one message from three SGEs in two
// regions and scatters it into four receive SGEs in two regions: the bytes
// land in order across the SGEs and the unused tail is untouched.
func testSendScatterGather(t *testing.T, c config) {
	e := newEnv(t, c)
	p := e.connect(t, nil, nil)
	a := e.cli.region(t, 8192, 0)
	b := e.cli.region(t, 8192, 0)
	fill(a.Bytes(), 11)
	fill(b.Bytes(), 12)
	gather := []verbs.SGE{a.sge(5, 100), b.sge(4000, 2000), a.sge(8191, 1)}
	var msg []byte
	for _, s := range gather {
		msg = append(msg, s.Buf...)
	}
	x := e.srv.region(t, 8192, verbs.AccessLocalWrite)
	y := e.srv.region(t, 8192, verbs.AccessLocalWrite)
	for _, r := range []*region{x, y} {
		for i := range r.Bytes() {
			r.Bytes()[i] = 0xee
		}
	}
	scatter := []verbs.SGE{x.sge(1, 50), y.sge(3, 1000), x.sge(4000, 1000), y.sge(5000, 2000)}
	postRecv(t, p.srv.conn, recvWR(1, scatter...))
	post(t, p.cli.conn, sendWR(2, gather...))
	mustWC(t, e.waitOne(t, p.cli.scq), 2, verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
	wc := e.waitOne(t, p.srv.rcq)
	mustWC(t, wc, 1, verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
	if wc.ByteLen != len(msg) {
		t.Fatalf("receive length %d, want %d", wc.ByteLen, len(msg))
	}
	var got []byte
	for _, s := range scatter {
		got = append(got, s.Buf...)
	}
	want := append(append([]byte{}, msg...), make([]byte, len(got)-len(msg))...)
	for i := len(msg); i < len(want); i++ {
		want[i] = 0xee
	}
	same(t, "scattered receive", got, want)
	// Bytes around the SGEs stay as they were.
	if x.Bytes()[0] != 0xee || x.Bytes()[51] != 0xee || y.Bytes()[2] != 0xee || y.Bytes()[1003] != 0xee {
		t.Fatal("a receive wrote outside its SGEs")
	}
}

// testChain posts RDMA Write, RDMA Write, Send as one chain: the three
// complete in order, and when the Send's receive completes both Writes
// are visible at the receiver (RDMA ordering: placement before a later
// Send is delivered).
func testChain(t *testing.T, c config) {
	e := newEnv(t, c)
	p := e.connect(t, nil, nil)
	dst := e.srv.region(t, 3*slot, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	in := e.srv.region(t, 64, verbs.AccessLocalWrite)
	src := e.cli.region(t, 3*slot, 0)
	fill(src.Bytes(), 21)
	postRecv(t, p.srv.conn, recvWR(9, in.sge(0, 64)))
	post(t, p.cli.conn, chain(
		rdmaWR(1, verbs.OpRDMAWrite, dst.at(0), src.sge(0, slot)),
		rdmaWR(2, verbs.OpRDMAWrite, dst.at(slot+1), src.sge(slot, 5000)),
		sendWR(3, src.sge(0, 64)),
	))
	wcs := e.waitWCs(t, p.cli.scq, 3)
	mustWC(t, wcs[0], 1, verbs.OpRDMAWrite, verbs.StatusSuccess, p.cli.conn)
	mustWC(t, wcs[1], 2, verbs.OpRDMAWrite, verbs.StatusSuccess, p.cli.conn)
	mustWC(t, wcs[2], 3, verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
	mustWC(t, e.waitOne(t, p.srv.rcq), 9, verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
	same(t, "first write", dst.Bytes()[:slot], src.Bytes()[:slot])
	same(t, "second write", dst.Bytes()[slot+1:slot+1+5000], src.Bytes()[slot:slot+5000])
	same(t, "send", in.Bytes(), src.Bytes()[:64])
}

// testSendInvalidate: a Send with Invalidate reports the invalidated rkey
// in the receiver's completion, the receiver's MR turns invalid, and an
// RDMA Write with that rkey then fails with a remote access error without
// touching the memory. Under the NoRemoteInvalidate quirk the receive
// fails with StatusRemoteInvalidReq and the receiver's queue pair breaks.
func testSendInvalidate(t *testing.T, c config) {
	e := newEnv(t, c)
	p := e.connect(t, nil, nil)
	dst := e.srv.region(t, slot, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	in := e.srv.region(t, 64, verbs.AccessLocalWrite)
	src := e.cli.region(t, slot, 0)
	fill(src.Bytes(), 31)
	// The rkey works before it is invalidated.
	post(t, p.cli.conn, rdmaWR(1, verbs.OpRDMAWrite, dst.at(0), src.sge(0, slot)))
	mustWC(t, e.waitOne(t, p.cli.scq), 1, verbs.OpRDMAWrite, verbs.StatusSuccess, p.cli.conn)
	rkey := dst.RKey()
	postRecv(t, p.srv.conn, recvWR(2, in.sge(0, 64)))
	wr := sendWR(3, src.sge(0, 32))
	wr.Op, wr.InvalidateRKey = verbs.OpSendInv, rkey
	post(t, p.cli.conn, wr)
	if c.Quirks.NoRemoteInvalidate {
		// The receiver refuses to invalidate a region it cannot: its
		// receive fails and the connection is dead. What the sender sees
		// (success, or a remote invalid request NAK) is only logged.
		mustWC(t, e.waitOne(t, p.srv.rcq), 2, verbs.OpRecv, verbs.StatusRemoteInvalidReq, p.srv.conn)
		e.expectBroken(t, p.srv, in.sge(0, 64))
		var buf [2]verbs.WC
		for _, wc := range buf[:p.cli.scq.Poll(buf[:])] {
			t.Logf("sender completion %s", describe1(wc))
		}
		return
	}
	swc := e.waitOne(t, p.cli.scq)
	if swc.ID != 3 || swc.Status != verbs.StatusSuccess || (swc.Op != verbs.OpSend && swc.Op != verbs.OpSendInv) {
		t.Fatalf("Send with Invalidate completed %s, want id 0x3 SEND or SEND_INV success", describe1(swc))
	}
	wc := e.waitOne(t, p.srv.rcq)
	mustWC(t, wc, 2, verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
	switch {
	case c.Quirks.InvalidateUnreported && !wc.Invalidated && wc.ByteLen == 32:
		t.Logf("receive %s: the invalidation is not reported (Quirks.InvalidateUnreported)", describe1(wc))
	case !wc.Invalidated || wc.InvalidatedRKey != rkey || wc.ByteLen != 32:
		t.Fatalf("receive %s, want 32 bytes that invalidated rkey %#x", describe1(wc), rkey)
	}
	same(t, "Send with Invalidate payload", in.Bytes()[:32], src.Bytes()[:32])
	if dst.Valid() && !c.Quirks.InvalidateUnreported {
		t.Error("MR.Valid() is true after the peer invalidated its rkey")
	}
	before := append([]byte(nil), dst.Bytes()...)
	fill(src.Bytes(), 32)
	post(t, p.cli.conn, rdmaWR(4, verbs.OpRDMAWrite, dst.at(0), src.sge(0, slot)))
	if c.Quirks.CompleteOnTransmit {
		e.refusedOnTransmit(t, p, 4, verbs.OpRDMAWrite)
	} else {
		mustWC(t, e.waitOne(t, p.cli.scq), 4, verbs.OpRDMAWrite, verbs.StatusRemoteAccess, p.cli.conn)
	}
	same(t, "memory behind the invalidated rkey", dst.Bytes(), before)
}
