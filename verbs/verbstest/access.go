package verbstest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

const (
	accessSize = 10000 // not a page multiple: bytes past the end are mapped but not registered
	accessLen  = 16
	badKeyBits = 0x5a5a5a00 // flipped into a key to make one no region has
)

// remoteAccessCase is one RDMA operation the server's memory must refuse.
type remoteAccessCase struct {
	name   string
	access verbs.Access // of the server's region
	op     verbs.Opcode
	// control, if set, is an operation on the same region that must
	// succeed first: proof that the refusal is about the one thing the
	// case changes.
	control func(r *region) (verbs.Opcode, remote, int)
	// prepare runs after the control and before the refused operation.
	prepare func(t *testing.T, e *env, p *pair, r *region)
	// target is where the refused operation goes and how long it is.
	target func(r *region) (remote, int)
	// otherPD registers the region on a second PD of the server's device,
	// not the one its connection uses.
	otherPD bool
}

// testRemoteAccess runs every remote access violation on a fresh
// connection (the error breaks it): the initiator sees
// StatusRemoteAccess, the target's memory is untouched, a Read's local
// buffer is untouched, and the initiator's queue pair is then broken.
func testRemoteAccess(t *testing.T, c config) {
	all := verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite
	start := func(r *region) (remote, int) { return r.at(0), accessLen }
	first := func(op verbs.Opcode) func(r *region) (verbs.Opcode, remote, int) {
		return func(r *region) (verbs.Opcode, remote, int) { return op, r.at(0), accessLen }
	}
	var cases []remoteAccessCase
	for _, op := range []verbs.Opcode{verbs.OpRDMAWrite, verbs.OpRDMARead} {
		cases = append(cases,
			remoteAccessCase{name: "BadRKey", access: all, op: op, control: first(op),
				target: func(r *region) (remote, int) {
					return remote{addr: r.Addr(), rkey: r.RKey() ^ badKeyBits}, accessLen
				}},
			remoteAccessCase{name: "PastEnd", access: all, op: op,
				control: func(r *region) (verbs.Opcode, remote, int) { return op, r.at(accessSize - 10), 10 },
				target:  func(r *region) (remote, int) { return r.at(accessSize - 10), 20 }},
			remoteAccessCase{name: "BeforeStart", access: all, op: op, control: first(op),
				target: func(r *region) (remote, int) {
					return remote{addr: r.Addr() - 1, rkey: r.RKey()}, accessLen
				}},
			remoteAccessCase{name: "NoRemoteAccess", access: verbs.AccessLocalWrite, op: op, target: start,
				prepare: func(t *testing.T, _ *env, _ *pair, r *region) {
					if r.RKey() != 0 {
						t.Errorf("MR without remote access has RKey %#x, want 0", r.RKey())
					}
				}},
			remoteAccessCase{name: "Invalidated", access: all, op: op, control: first(verbs.OpRDMAWrite),
				prepare: invalidateLocally, target: start},
			remoteAccessCase{name: "OtherPD", access: all, op: op, target: start, otherPD: true},
			remoteAccessCase{name: "Deregistered", access: all, op: op, control: first(verbs.OpRDMAWrite),
				prepare: func(t *testing.T, _ *env, _ *pair, r *region) {
					if err := r.deregister(); err != nil {
						t.Fatalf("Deregister: %v", err)
					}
				}, target: start},
		)
	}
	cases = append(cases,
		remoteAccessCase{name: "ReadOnly", access: verbs.AccessRemoteRead, op: verbs.OpRDMAWrite,
			control: first(verbs.OpRDMARead), target: start},
		remoteAccessCase{name: "WriteOnly", access: verbs.AccessLocalWrite | verbs.AccessRemoteWrite, op: verbs.OpRDMARead,
			control: first(verbs.OpRDMAWrite), target: start},
	)
	for _, tc := range cases {
		t.Run(tc.name+"/"+opName(tc.op), func(t *testing.T) {
			if c.Quirks.ReadPermissionUnchecked && tc.name == "WriteOnly" {
				t.Skip("the listener serves RDMA Reads without checking remote-read permission (Quirks.ReadPermissionUnchecked)")
			}
			runRemoteAccess(t, c, tc)
		})
	}
}

func opName(op verbs.Opcode) string {
	if op == verbs.OpRDMARead {
		return "Read"
	}
	return "Write"
}

func runRemoteAccess(t *testing.T, c config, tc remoteAccessCase) {
	e := newEnv(t, c)
	p := e.connect(t, nil, nil)
	h := e.srv
	if tc.otherPD {
		h = e.otherPD(t, e.srv)
	}
	r := h.region(t, accessSize, tc.access)
	fill(r.Bytes(), 71)
	local := e.cli.region(t, 4096, verbs.AccessLocalWrite)
	fill(local.Bytes(), 72)
	if tc.control != nil {
		op, rem, n := tc.control(r)
		post(t, p.cli.conn, rdmaWR(1, op, rem, local.sge(0, n)))
		mustWC(t, e.waitOne(t, p.cli.scq), 1, op, verbs.StatusSuccess, p.cli.conn)
		if op == verbs.OpRDMAWrite {
			// Order the check after placement (see testRDMASizes).
			note := e.srv.region(t, 8, verbs.AccessLocalWrite)
			postRecv(t, p.srv.conn, recvWR(2, note.sge(0, 8)))
			post(t, p.cli.conn, sendWR(3, local.sge(0, 8)))
			mustWC(t, e.waitOne(t, p.cli.scq), 3, verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
			mustWC(t, e.waitOne(t, p.srv.rcq), 2, verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
		}
	}
	if tc.prepare != nil {
		tc.prepare(t, e, p, r)
	}
	targetBefore := append([]byte(nil), r.Bytes()...)
	fill(local.Bytes(), 73)
	localBefore := append([]byte(nil), local.Bytes()...)
	rem, n := tc.target(r)
	post(t, p.cli.conn, rdmaWR(4, tc.op, rem, local.sge(0, n)))
	if c.Quirks.CompleteOnTransmit {
		e.refusedOnTransmit(t, p, 4, tc.op)
	} else {
		mustWC(t, e.waitOne(t, p.cli.scq), 4, tc.op, verbs.StatusRemoteAccess, p.cli.conn)
	}
	if !bytes.Equal(r.Bytes(), targetBefore) {
		t.Error(diff("target region after a refused "+tc.op.String(), r.Bytes(), targetBefore))
	}
	if !bytes.Equal(local.Bytes(), localBefore) {
		t.Error(diff("local buffer after a refused "+tc.op.String(), local.Bytes(), localBefore))
	}
	if !c.Quirks.CompleteOnTransmit {
		e.expectBroken(t, p.cli, local.sge(0, 8))
	}
}

// refusedOnTransmit checks a refused RDMA operation under the
// CompleteOnTransmit quirk: the dialer learns of the refusal only from the
// peer's Terminate, after a Write already completed as sent, so the Write
// completes with success or a remote access error, a Read with a remote
// access error or flushed, and the connection must end.
func (e *env) refusedOnTransmit(t *testing.T, p *pair, id uint64, op verbs.Opcode) {
	t.Helper()
	wc := e.waitOne(t, p.cli.scq)
	ok := wc.ID == id && wc.Op == op && (wc.Status == verbs.StatusRemoteAccess ||
		(op == verbs.OpRDMAWrite && wc.Status == verbs.StatusSuccess) ||
		(op == verbs.OpRDMARead && wc.Status == verbs.StatusFlushed))
	if !ok {
		t.Fatalf("refused %s completed %s, want id %#x remote access error (or as sent/flushed: Quirks.CompleteOnTransmit)", op, describe1(wc), id)
	}
	e.waitDone(t, p.cli.conn, "dialer after the peer refused its "+op.String())
}

// invalidateLocally invalidates the region with MR.Invalidate and checks
// what the contract says stays and goes: Valid turns false, a second
// Invalidate is not an error, and local use (a Send from the region) still
// works.
func invalidateLocally(t *testing.T, e *env, p *pair, r *region) {
	if !r.Valid() {
		t.Fatal("MR.Valid() is false before Invalidate")
	}
	if err := r.Invalidate(); err != nil {
		t.Fatalf("Invalidate: %v", err)
	}
	if r.Valid() {
		t.Fatal("MR.Valid() is true after Invalidate")
	}
	if err := r.Invalidate(); err != nil {
		t.Fatalf("second Invalidate: %v", err)
	}
	in := e.cli.region(t, 64, verbs.AccessLocalWrite)
	postRecv(t, p.cli.conn, recvWR(5, in.sge(0, 64)))
	post(t, p.srv.conn, sendWR(6, r.sge(0, 64)))
	mustWC(t, e.waitOne(t, p.srv.scq), 6, verbs.OpSend, verbs.StatusSuccess, p.srv.conn)
	mustWC(t, e.waitOne(t, p.cli.rcq), 5, verbs.OpRecv, verbs.StatusSuccess, p.cli.conn)
	same(t, "Send from an invalidated region", in.Bytes(), r.Bytes()[:64])
}

// localCase is one work request whose local SGE the provider must refuse,
// either at post time (ErrInvalidSGE) or with a StatusLocalProtection
// completion, as an HCA does when it fetches the WQE. Both are accepted.
type localCase struct {
	name string
	recv bool // the bad SGE is in a receive (no watch receive is posted)
	// run posts the bad work request.
	run func(t *testing.T, e *env, p *pair) localResult
}

// localResult is what a localCase posted: the post error, or where its
// completion will arrive.
type localResult struct {
	err  error
	cq   verbs.CQ
	id   uint64
	op   verbs.Opcode
	conn verbs.Conn
}

// testLocalProtection: a local SGE outside its region, under a wrong
// lkey, or in a region without local write used as a Read target or
// receive buffer, is refused and nothing is delivered to the peer.
func testLocalProtection(t *testing.T, c config) {
	for _, tc := range localCases {
		t.Run(tc.name, func(t *testing.T) { runLocalCase(t, c, tc) })
	}
}

// localCases are testLocalProtection's bad local SGEs.
var localCases = []localCase{
	{"UnregisteredBuffer", false, func(t *testing.T, e *env, p *pair) localResult {
		r := e.cli.region(t, 4096, 0)
		mem := e.cli.memory(t, 4096)
		wr := sendWR(1, verbs.SGE{Buf: mem.Bytes()[:64], LKey: r.LKey()})
		return localResult{p.cli.conn.PostSend(wr), p.cli.scq, 1, verbs.OpSend, p.cli.conn}
	}},
	{"WrongLKey", false, func(t *testing.T, e *env, p *pair) localResult {
		r := e.cli.region(t, 4096, 0)
		wr := sendWR(1, verbs.SGE{Buf: r.Bytes()[:64], LKey: r.LKey() ^ badKeyBits})
		return localResult{p.cli.conn.PostSend(wr), p.cli.scq, 1, verbs.OpSend, p.cli.conn}
	}},
	{"PastRegionEnd", false, func(t *testing.T, e *env, p *pair) localResult {
		r := e.cli.region(t, accessSize, 0)
		wr := sendWR(1, verbs.SGE{Buf: r.raw()[accessSize-10 : accessSize+10], LKey: r.LKey()})
		return localResult{p.cli.conn.PostSend(wr), p.cli.scq, 1, verbs.OpSend, p.cli.conn}
	}},
	{"BeforeRegionStart", false, func(t *testing.T, e *env, p *pair) localResult {
		r := e.cli.regionAt(t, 64, 4096, 0)
		wr := sendWR(1, verbs.SGE{Buf: r.raw()[60:100], LKey: r.LKey()})
		return localResult{p.cli.conn.PostSend(wr), p.cli.scq, 1, verbs.OpSend, p.cli.conn}
	}},
	{"OtherPD", false, func(t *testing.T, e *env, p *pair) localResult {
		r := e.otherPD(t, e.cli).region(t, 4096, 0)
		return localResult{p.cli.conn.PostSend(sendWR(1, r.sge(0, 64))), p.cli.scq, 1, verbs.OpSend, p.cli.conn}
	}},
	{"ReadIntoNoLocalWrite", false, func(t *testing.T, e *env, p *pair) localResult {
		src := e.srv.region(t, 4096, verbs.AccessRemoteRead)
		dst := e.cli.region(t, 4096, 0)
		wr := rdmaWR(1, verbs.OpRDMARead, src.at(0), dst.sge(0, 64))
		return localResult{p.cli.conn.PostSend(wr), p.cli.scq, 1, verbs.OpRDMARead, p.cli.conn}
	}},
	{"ReceiveOutsideRegion", true, func(t *testing.T, e *env, p *pair) localResult {
		r := e.srv.region(t, accessSize, verbs.AccessLocalWrite)
		return e.recvThenSend(t, p, verbs.SGE{Buf: r.raw()[accessSize-10 : accessSize+54], LKey: r.LKey()})
	}},
	{"ReceiveIntoNoLocalWrite", true, func(t *testing.T, e *env, p *pair) localResult {
		r := e.srv.region(t, 4096, 0)
		return e.recvThenSend(t, p, r.sge(0, 64))
	}},
}

// runLocalCase posts tc's bad SGE on a fresh connection: it is refused
// at post with ErrInvalidSGE or completes with StatusLocalProtection, and
// nothing reaches the peer.
func runLocalCase(t *testing.T, c config, tc localCase) {
	e := newEnv(t, c)
	p := e.connect(t, nil, nil)
	if !tc.recv {
		// The server has a receive waiting: it must not
		// complete with data.
		watch := e.srv.region(t, 4096, verbs.AccessLocalWrite)
		postRecv(t, p.srv.conn, recvWR(100, watch.sge(0, 4096)))
	}
	res := tc.run(t, e, p)
	if err := res.err; err != nil {
		if !errors.Is(err, verbs.ErrInvalidSGE) {
			t.Fatalf("bad SGE refused at post with %v, want ErrInvalidSGE", err)
		}
		t.Logf("refused at post: %v", err)
		return
	}
	mustWC(t, e.waitOne(t, res.cq), res.id, res.op, verbs.StatusLocalProtection, res.conn)
	if !tc.recv {
		expectNoDelivery(t, p.srv.rcq, 100*time.Millisecond)
	}
}

// recvThenSend posts the bad receive SGE on the server and, if that was
// accepted, sends 64 bytes into it from the client; the receive must then
// complete with StatusLocalProtection.
func (e *env) recvThenSend(t *testing.T, p *pair, bad verbs.SGE) localResult {
	if err := p.srv.conn.PostRecv(recvWR(1, bad)); err != nil {
		return localResult{err: err}
	}
	out := e.cli.region(t, 64, 0)
	post(t, p.cli.conn, sendWR(2, out.sge(0, 64)))
	return localResult{nil, p.srv.rcq, 1, verbs.OpRecv, p.srv.conn}
}

// otherPD allocates a second protection domain on h's device: its
// regions must not be usable with h's connections.
func (e *env) otherPD(t testing.TB, h *host) *host {
	t.Helper()
	pd, err := h.dev.AllocPD()
	if err != nil {
		t.Fatalf("second AllocPD: %v", err)
	}
	t.Cleanup(func() { _ = pd.Close() })
	return &host{dev: h.dev, pd: pd}
}

// expectNoDelivery fails if a receive on cq completes successfully within
// d; flushed or failed receives (the connection tearing down) are fine.
func expectNoDelivery(t testing.TB, cq verbs.CQ, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		var buf [8]verbs.WC
		for _, wc := range buf[:cq.Poll(buf[:])] {
			if wc.Status == verbs.StatusSuccess {
				t.Fatalf("peer received %s from a refused work request", describe1(wc))
			}
		}
		if cq.Wait(ctx) != nil {
			return
		}
	}
}
