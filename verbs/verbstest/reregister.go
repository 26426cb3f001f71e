package verbstest

import (
	"testing"

	"github.com/rdmagw/rdmagw/verbs"
)

// testReregister deregisters a region a peer has used and registers the
// same memory again, as a requester does per RPC: the new rkey differs
// from the retired one, the new one works, and the retired one is refused
// with StatusRemoteAccess without touching the memory, although the same
// bytes are registered again. A key that came back to life would let a
// late or replayed RDMA from an earlier RPC into memory offered to a later
// one.
func testReregister(t *testing.T, c config) {
	const size = 8192
	e := newEnv(t, c)
	p := e.connect(t, nil, nil)
	all := verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite
	mem := e.srv.memory(t, size)
	src := e.cli.region(t, size, verbs.AccessLocalWrite)
	note := e.srv.region(t, 8, verbs.AccessLocalWrite)

	// writeAndNotify RDMA Writes src into (addr, rkey), then Sends so the
	// server knows the data is placed.
	writeAndNotify := func(rem remote, seed uint64) {
		t.Helper()
		fill(src.Bytes(), seed)
		postRecv(t, p.srv.conn, recvWR(seed, note.sge(0, 8)))
		post(t, p.cli.conn, chain(
			rdmaWR(1, verbs.OpRDMAWrite, rem, src.sge(0, size)),
			sendWR(2, src.sge(0, 8)),
		))
		wcs := e.waitWCs(t, p.cli.scq, 2)
		mustWC(t, wcs[0], 1, verbs.OpRDMAWrite, verbs.StatusSuccess, p.cli.conn)
		mustWC(t, wcs[1], 2, verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
		mustWC(t, e.waitOne(t, p.srv.rcq), seed, verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
		same(t, "registered memory after an RDMA Write", mem.Bytes()[:size], src.Bytes())
	}

	first, err := e.srv.pd.Register(mem.Bytes()[:size], all)
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	old := remote{addr: first.Addr(), rkey: first.RKey()}
	writeAndNotify(old, 91)
	if err := first.Deregister(); err != nil {
		t.Fatalf("Deregister: %v", err)
	}

	second, err := e.srv.pd.Register(mem.Bytes()[:size], all)
	if err != nil {
		t.Fatalf("second Register of the same memory: %v", err)
	}
	t.Cleanup(func() {
		if err := second.Deregister(); err != nil {
			t.Errorf("Deregister: %v", err)
		}
	})
	if second.RKey() == old.rkey {
		t.Fatalf("re-registration reused the retired rkey %#x", old.rkey)
	}
	t.Logf("rkey %#x retired, re-registration has rkey %#x", old.rkey, second.RKey())
	writeAndNotify(remote{addr: second.Addr(), rkey: second.RKey()}, 92)

	// The retired key is refused (this breaks the queue pair, so last).
	before := append([]byte(nil), mem.Bytes()[:size]...)
	fill(src.Bytes(), 93)
	post(t, p.cli.conn, rdmaWR(3, verbs.OpRDMAWrite, old, src.sge(0, 64)))
	if c.Quirks.CompleteOnTransmit {
		e.refusedOnTransmit(t, p, 3, verbs.OpRDMAWrite)
	} else {
		mustWC(t, e.waitOne(t, p.cli.scq), 3, verbs.OpRDMAWrite, verbs.StatusRemoteAccess, p.cli.conn)
	}
	same(t, "memory after an RDMA Write with the retired rkey", mem.Bytes()[:size], before)
	if !second.Valid() {
		t.Error("the new registration turned invalid after a peer used the retired rkey")
	}
}
