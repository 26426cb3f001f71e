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
	e := newEnv(t, c)
	r := &reregTest{e: e, p: e.connect(t, nil, nil)}
	r.mem = e.srv.memory(t, reregSize)
	r.src = e.cli.region(t, reregSize, verbs.AccessLocalWrite)
	r.note = e.srv.region(t, 8, verbs.AccessLocalWrite)

	first, err := e.srv.pd.Register(r.mem.Bytes()[:reregSize], reregAccess)
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	old := remote{addr: first.Addr(), rkey: first.RKey()}
	r.writeAndNotify(t, old, 91)
	if err := first.Deregister(); err != nil {
		t.Fatalf("Deregister: %v", err)
	}

	second, err := e.srv.pd.Register(r.mem.Bytes()[:reregSize], reregAccess)
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
	r.writeAndNotify(t, remote{addr: second.Addr(), rkey: second.RKey()}, 92)
	r.retiredRefused(t, old, second)
}

const (
	reregSize   = 8192
	reregAccess = verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite
)

// reregTest is testReregister's connection and memory: mem is registered,
// deregistered and registered again on the server; the client writes
// into it from src, and the server's note receive says when.
type reregTest struct {
	e         *env
	p         *pair
	mem       *verbs.Memory
	src, note *region
}

// writeAndNotify RDMA Writes src into (addr, rkey), then Sends so the
// server knows the data is placed.
func (r *reregTest) writeAndNotify(t *testing.T, rem remote, seed uint64) {
	t.Helper()
	e, p := r.e, r.p
	fill(r.src.Bytes(), seed)
	postRecv(t, p.srv.conn, recvWR(seed, r.note.sge(0, 8)))
	post(t, p.cli.conn, chain(
		rdmaWR(1, verbs.OpRDMAWrite, rem, r.src.sge(0, reregSize)),
		sendWR(2, r.src.sge(0, 8)),
	))
	wcs := e.waitWCs(t, p.cli.scq, 2)
	mustWC(t, wcs[0], 1, verbs.OpRDMAWrite, verbs.StatusSuccess, p.cli.conn)
	mustWC(t, wcs[1], 2, verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
	mustWC(t, e.waitOne(t, p.srv.rcq), seed, verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
	same(t, "registered memory after an RDMA Write", r.mem.Bytes()[:reregSize], r.src.Bytes())
}

// retiredRefused: a write with the retired key old is refused, changes
// nothing, and leaves the new registration valid. It breaks the queue
// pair, so it comes last.
func (r *reregTest) retiredRefused(t *testing.T, old remote, second verbs.MR) {
	e, p := r.e, r.p
	before := append([]byte(nil), r.mem.Bytes()[:reregSize]...)
	fill(r.src.Bytes(), 93)
	post(t, p.cli.conn, rdmaWR(3, verbs.OpRDMAWrite, old, r.src.sge(0, 64)))
	if e.c.Quirks.CompleteOnTransmit {
		e.refusedOnTransmit(t, p, 3, verbs.OpRDMAWrite)
	} else {
		mustWC(t, e.waitOne(t, p.cli.scq), 3, verbs.OpRDMAWrite, verbs.StatusRemoteAccess, p.cli.conn)
	}
	same(t, "memory after an RDMA Write with the retired rkey", r.mem.Bytes()[:reregSize], before)
	if !second.Valid() {
		t.Error("the new registration turned invalid after a peer used the retired rkey")
	}
}
