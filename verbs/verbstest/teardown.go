package verbstest

import (
	"cmp"
	"slices"
	"testing"

	"github.com/rdmagw/rdmagw/verbs"
)

// testCloseWithoutDisconnect: Close on one end (no Disconnect first) ends
// the connection for the peer too: its Done closes and its outstanding
// receives are flushed. The closing end's own work requests may vanish
// without completions (ibv_destroy_qp discards them), so only the peer is
// checked.
func testCloseWithoutDisconnect(t *testing.T, c config) {
	const n = 4
	e := newEnv(t, c)
	p := e.connect(t, nil, nil)
	in := e.srv.region(t, n*64, verbs.AccessLocalWrite)
	for i := range n {
		postRecv(t, p.srv.conn, recvWR(uint64(i), in.sge(i*64, 64)))
	}
	if err := p.cli.conn.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	e.waitDone(t, p.srv.conn, "server after the client closed")
	for i, wc := range e.waitWCs(t, p.srv.rcq, n) {
		mustWC(t, wc, uint64(i), verbs.OpRecv, verbs.StatusFlushed, p.srv.conn)
	}
	_ = p.cli.conn.Close() // a second Close is harmless
}

// testDisconnectDuringTransfer disconnects while large RDMA Writes and
// Reads are in flight: every work request still completes exactly once,
// in order, with success or StatusFlushed (never a hang, never another
// status), and both ends finish.
func testDisconnectDuringTransfer(t *testing.T, c config) {
	const n, size = 8, 1 << 20
	e := newEnv(t, c)
	p := e.connect(t, nil, nil)
	all := verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite
	srvMem := e.srv.region(t, n*size, all)
	cliMem := e.cli.region(t, n*size, verbs.AccessLocalWrite)
	wrs := make([]*verbs.SendWR, n)
	for i := range n {
		op := verbs.OpRDMAWrite
		if i%2 == 1 {
			op = verbs.OpRDMARead
		}
		wrs[i] = rdmaWR(uint64(i), op, srvMem.at(i*size), cliMem.sge(i*size, size))
	}
	post(t, p.cli.conn, chain(wrs...))
	if err := p.cli.conn.Disconnect(); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	flushed := 0
	wcs := e.waitWCs(t, p.cli.scq, n)
	if c.Quirks.CompleteOnTransmit {
		// Writes complete when sent, Reads when answered: in id order,
		// a success may follow a flushed Read, never a flushed Write.
		slices.SortFunc(wcs, func(a, b verbs.WC) int { return cmp.Compare(a.ID, b.ID) })
		for i, wc := range wcs {
			if wc.ID != uint64(i) || (wc.Status != verbs.StatusSuccess && wc.Status != verbs.StatusFlushed) {
				t.Fatalf("completions after a Disconnect mid-transfer: %s, want id %d, success or flushed", describe1(wc), i)
			}
			if wc.Status == verbs.StatusFlushed {
				flushed++
			}
		}
		wcs = nil
	}
	for i, wc := range wcs {
		if wc.ID != uint64(i) || (wc.Status != verbs.StatusSuccess && wc.Status != verbs.StatusFlushed) {
			t.Fatalf("completion %d after a Disconnect mid-transfer: %s, want id %d, success or flushed", i, describe1(wc), i)
		}
		if wc.Status == verbs.StatusFlushed {
			flushed++
		} else if flushed > 0 {
			t.Fatalf("completion %d succeeded after an earlier one was flushed", i)
		}
	}
	t.Logf("%d of %d transfers flushed by the disconnect", flushed, n)
	e.waitDone(t, p.cli.conn, "client after its Disconnect")
	e.waitDone(t, p.srv.conn, "server after the peer's Disconnect")
}

// testListenerCloseKeepsConns: closing a listener ends no connection it
// accepted.
func testListenerCloseKeepsConns(t *testing.T, c config) {
	e := newEnv(t, c)
	ln := e.listen(t)
	p := e.connectVia(t, ln, nil, nil)
	if err := ln.Close(); err != nil {
		t.Errorf("Listener.Close: %v", err)
	}
	in := e.srv.region(t, 64, verbs.AccessLocalWrite)
	out := e.cli.region(t, 64, 0)
	fill(out.Bytes(), 111)
	postRecv(t, p.srv.conn, recvWR(1, in.sge(0, 64)))
	post(t, p.cli.conn, sendWR(2, out.sge(0, 64)))
	mustWC(t, e.waitOne(t, p.cli.scq), 2, verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
	mustWC(t, e.waitOne(t, p.srv.rcq), 1, verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
	same(t, "message after a listener closed", in.Bytes(), out.Bytes())
}
