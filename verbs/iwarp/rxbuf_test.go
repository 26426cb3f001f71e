package iwarp

import (
	"testing"

	"github.com/rdmagw/rdmagw/verbs"
)

// The receive buffer stays small on a connection that carries only small
// messages and grows to its bulk size with the first large payload;
// everything placed across the change, and through the buffer and the
// direct reads that follow (FPDU boundaries anywhere in a read), arrives
// byte for byte.
func TestRxBufferGrowsOnBulk(t *testing.T) {
	cli, srv := pair(t, Config{}, "")
	sx, cx := &srv.conn.(*conn).rx, &cli.conn.(*conn).rx
	remote := srv.mem(t, 3<<20, allAccess)
	rbuf := srv.mem(t, 64<<10, verbs.AccessLocalWrite)
	local := cli.mem(t, 4<<20, allAccess)
	fill(local.Bytes(), 0x3c)
	send := func(n int) { // its completion orders what rx did before it
		t.Helper()
		if err := srv.conn.PostRecv(&verbs.RecvWR{ID: 7, SGL: []verbs.SGE{{Buf: rbuf.Bytes(), LKey: rbuf.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		if err := cli.conn.PostSend(&verbs.SendWR{ID: 7, Op: verbs.OpSend, Signal: true,
			SGL: []verbs.SGE{{Buf: local.Bytes()[:n], LKey: local.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		expectStatus(t, wait(t, cli.scq), verbs.OpSend, verbs.StatusSuccess)
		wc := wait(t, srv.rcq)
		expectStatus(t, wc, verbs.OpRecv, verbs.StatusSuccess)
		if wc.ByteLen != n {
			t.Fatalf("received %d bytes, sent %d", wc.ByteLen, n)
		}
		sameBytes(t, rbuf.Bytes()[:n], local.Bytes()[:n])
	}
	for range 8 {
		send(1000)
	}
	if sx.bulk.Load() {
		t.Fatal("the receive buffer grew for small Sends")
	}

	// One burst: Writes of odd sizes around a 1 MiB one, and Sends.
	var first *verbs.SendWR
	next := &first
	off := 0
	for i, n := range []int{1, 4093, 70001, 1 << 20, 3, 65536 + 17, 16<<10 - 1, 16 << 10, 131073} {
		wr := &verbs.SendWR{ID: uint64(i), Op: verbs.OpRDMAWrite, Signal: true,
			SGL:        []verbs.SGE{{Buf: local.Bytes()[off : off+n], LKey: local.LKey()}},
			RemoteAddr: remote.Addr() + uint64(off), RKey: remote.RKey()}
		*next, next = wr, &wr.Next
		off += n
	}
	if err := cli.conn.PostSend(first); err != nil {
		t.Fatal(err)
	}
	for wr := first; wr != nil; wr = wr.Next {
		expectStatus(t, wait(t, cli.scq), verbs.OpRDMAWrite, verbs.StatusSuccess)
	}
	sameBytes(t, remote.Bytes()[:off], local.Bytes()[:off])
	send(60 << 10)
	if !sx.bulk.Load() {
		t.Fatal("the receive buffer did not grow for a 1 MiB Write")
	}
	send(5)

	// And Read Responses into the requester's buffer.
	const readLen, at = 1<<20 + 5, 7
	sink := local.Bytes()[2<<20 : 2<<20+readLen]
	if err := cli.conn.PostSend(&verbs.SendWR{ID: 99, Op: verbs.OpRDMARead, Signal: true,
		SGL: []verbs.SGE{{Buf: sink, LKey: local.LKey()}}, RemoteAddr: remote.Addr() + at, RKey: remote.RKey()}); err != nil {
		t.Fatal(err)
	}
	expectStatus(t, wait(t, cli.scq), verbs.OpRDMARead, verbs.StatusSuccess)
	sameBytes(t, sink, local.Bytes()[at:at+readLen])
	if !cx.bulk.Load() {
		t.Fatal("the requester's receive buffer did not grow for a 1 MiB Read")
	}

	// Back to small messages: the bulk buffer goes back after
	// rxShrinkAfter small reads in a row (each send is a round trip, so
	// by its completion rx has made the read of the one before).
	for i := range rxShrinkAfter + 2 {
		if !sx.bulk.Load() {
			t.Logf("shrank after %d small Sends", i)
			break
		}
		send(100 + i)
	}
	if sx.bulk.Load() {
		t.Fatalf("the receive buffer is still the bulk one after %d small Sends", rxShrinkAfter+2)
	}
	// And grows again for the next bulk transfer, byte for byte.
	fill(local.Bytes()[:1<<20], 0x5a)
	if err := cli.conn.PostSend(&verbs.SendWR{ID: 100, Op: verbs.OpRDMAWrite, Signal: true,
		SGL: []verbs.SGE{{Buf: local.Bytes()[:1<<20], LKey: local.LKey()}}, RemoteAddr: remote.Addr(), RKey: remote.RKey()}); err != nil {
		t.Fatal(err)
	}
	expectStatus(t, wait(t, cli.scq), verbs.OpRDMAWrite, verbs.StatusSuccess)
	send(5)
	sameBytes(t, remote.Bytes()[:1<<20], local.Bytes()[:1<<20])
	if !sx.bulk.Load() {
		t.Fatal("the receive buffer did not grow again for a 1 MiB Write")
	}
}

// A read that filled the small buffer grows it only when the buffer
// drains on an FPDU boundary (space): with small messages in flight most
// full reads end inside an FPDU, and growing there cost write-4k at 8 in
// flight 0.8 context switches and 25% more CPU per op.
func TestRxBufferGrowsOnlyAtFPDUBoundary(t *testing.T) {
	c := &conn{rcq: &cq{}, scq: &cq{}}
	x := &rxState{c: c, small: make([]byte, rxBufLen)}
	x.buf = x.small
	t.Cleanup(func() {
		if x.big != nil {
			rxBulkPool.Put(x.big)
		}
	})
	// A full read drained inside an FPDU's payload.
	x.phase = rxPayload
	x.r, x.w = rxBufLen, rxBufLen
	if p := x.space(0); len(p) != rxBufLen || x.bulk.Load() {
		t.Fatalf("drained inside an FPDU: %d bytes to read into, bulk %v; want the small buffer", len(p), x.bulk.Load())
	}
	// The same at an FPDU boundary.
	x.phase = rxHeader
	x.r, x.w = rxBufLen, rxBufLen
	if p := x.space(fpduLenField + ddpTaggedLen); len(p) != rxBulkLen || !x.bulk.Load() {
		t.Fatalf("drained on an FPDU boundary: %d bytes to read into, bulk %v; want the bulk buffer", len(p), x.bulk.Load())
	}
}
