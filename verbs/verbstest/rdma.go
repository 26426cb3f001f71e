package verbstest

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/rdmagw/rdmagw/verbs"
)

// rdmaSizes are the transfer sizes of the RDMA cases: the page edges and
// sizes past the 64 KiB and 1 MiB marks where providers split messages.
var rdmaSizes = []int{0, 1, 3, 4095, 4096, 4097, 65537, 1 << 20, 8 << 20}

const rdmaSpan = 8<<20 + 2*4096 // room for the largest size at any offset below a page

// testRDMASizes writes and reads every size at unaligned offsets inside
// both regions. A Write is followed by a Send so the target knows the
// data is placed (on iWARP a Write's completion only frees the source
// buffer); a Read's completion means the data is placed locally. The
// whole region is compared each time, so a stray byte anywhere fails.
func testRDMASizes(t *testing.T, c config) {
	e := newEnv(t, c)
	p := e.connect(t, nil, nil)
	all := verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite
	srvMem := e.srv.region(t, rdmaSpan, all)
	cliMem := e.cli.region(t, rdmaSpan, verbs.AccessLocalWrite)
	note := e.srv.region(t, 64, verbs.AccessLocalWrite)
	for k, size := range rdmaSizes {
		if size == 0 && c.Quirks.NoZeroLengthRDMA {
			continue
		}
		lo, ro := (k*37+1)%4096, (k*101+7)%4096
		t.Run(fmt.Sprintf("%d", size), func(t *testing.T) {
			// The Write pushes client bytes into the middle of a patterned server region.
			fill(srvMem.Bytes(), uint64(100+k))
			want := append([]byte(nil), srvMem.Bytes()...)
			fill(cliMem.Bytes(), uint64(200+k))
			copy(want[ro:ro+size], cliMem.Bytes()[lo:lo+size])
			postRecv(t, p.srv.conn, recvWR(uint64(k), note.sge(0, 64)))
			post(t, p.cli.conn, chain(
				rdmaWR(1, verbs.OpRDMAWrite, srvMem.at(ro), sgl(cliMem, lo, size)...),
				sendWR(2, cliMem.sge(0, 8)),
			))
			wcs := e.waitWCs(t, p.cli.scq, 2)
			mustWC(t, wcs[0], 1, verbs.OpRDMAWrite, verbs.StatusSuccess, p.cli.conn)
			mustWC(t, wcs[1], 2, verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
			mustWC(t, e.waitOne(t, p.srv.rcq), uint64(k), verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
			same(t, "server region after RDMA Write", srvMem.Bytes(), want)

			// The Read pulls fresh server bytes into the middle of a patterned client region.
			fill(srvMem.Bytes(), uint64(300+k))
			fill(cliMem.Bytes(), uint64(400+k))
			want = append(want[:0], cliMem.Bytes()...)
			copy(want[lo:lo+size], srvMem.Bytes()[ro:ro+size])
			post(t, p.cli.conn, rdmaWR(3, verbs.OpRDMARead, srvMem.at(ro), sgl(cliMem, lo, size)...))
			mustWC(t, e.waitOne(t, p.cli.scq), 3, verbs.OpRDMARead, verbs.StatusSuccess, p.cli.conn)
			same(t, "client region after RDMA Read", cliMem.Bytes(), want)
		})
		if t.Failed() {
			return
		}
	}
}

// testRDMAToDialer: the accepting side RDMA-Writes into and RDMA-Reads
// from the dialing side's memory (the other cases only target the
// acceptor). A provider that moves the dialing side's QP to INIT before
// the CM has a connection must refresh its access flags once the reply
// arrives, or the dialer's memory is out of reach (the reverse gateway
// dials NFS/RDMA servers, which do exactly this to it).
func testRDMAToDialer(t *testing.T, c config) {
	e := newEnv(t, c)
	p := e.connect(t, nil, nil)
	const size = 4097
	all := verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite
	cliMem := e.cli.region(t, 2*size, all)
	srvMem := e.srv.region(t, 2*size, verbs.AccessLocalWrite)
	note := e.cli.region(t, 64, verbs.AccessLocalWrite)
	fill(cliMem.Bytes(), 51)
	fill(srvMem.Bytes(), 52)
	want := append([]byte(nil), cliMem.Bytes()...)
	copy(want[3:3+size], srvMem.Bytes()[:size])
	postRecv(t, p.cli.conn, recvWR(1, note.sge(0, 64)))
	post(t, p.srv.conn, chain(
		rdmaWR(2, verbs.OpRDMAWrite, cliMem.at(3), srvMem.sge(0, size)),
		sendWR(3, srvMem.sge(0, 8)),
	))
	wcs := e.waitWCs(t, p.srv.scq, 2)
	mustWC(t, wcs[0], 2, verbs.OpRDMAWrite, verbs.StatusSuccess, p.srv.conn)
	mustWC(t, wcs[1], 3, verbs.OpSend, verbs.StatusSuccess, p.srv.conn)
	mustWC(t, e.waitOne(t, p.cli.rcq), 1, verbs.OpRecv, verbs.StatusSuccess, p.cli.conn)
	same(t, "dialer's region after the acceptor's RDMA Write", cliMem.Bytes(), want)

	fill(cliMem.Bytes(), 53)
	want = append(want[:0], srvMem.Bytes()...)
	copy(want[size:2*size], cliMem.Bytes()[5:5+size])
	post(t, p.srv.conn, rdmaWR(4, verbs.OpRDMARead, cliMem.at(5), srvMem.sge(size, size)))
	mustWC(t, e.waitOne(t, p.srv.scq), 4, verbs.OpRDMARead, verbs.StatusSuccess, p.srv.conn)
	same(t, "acceptor's region after its RDMA Read", srvMem.Bytes(), want)
}

// sgl is one SGE for n bytes at off, or no SGE at all for n == 0: an SGE of
// length 0 means 2 GiB to some HCAs, so zero-length work requests carry an
// empty list.
func sgl(r *region, off, n int) []verbs.SGE {
	if n == 0 {
		return nil
	}
	return []verbs.SGE{r.sge(off, n)}
}

// testRDMAScatterGather gathers an RDMA Write from three SGEs in two
// regions and scatters an RDMA Read into four SGEs in two regions; the
// remote side of an RDMA operation is always one contiguous range.
func testRDMAScatterGather(t *testing.T, c config) {
	e := newEnv(t, c)
	p := e.connect(t, nil, nil)
	all := verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite
	srvMem := e.srv.region(t, 3*slot, all)
	note := e.srv.region(t, 64, verbs.AccessLocalWrite)
	a := e.cli.region(t, 3*slot, verbs.AccessLocalWrite)
	b := e.cli.region(t, 3*slot, verbs.AccessLocalWrite)

	fill(a.Bytes(), 51)
	fill(b.Bytes(), 52)
	fill(srvMem.Bytes(), 53)
	gather := []verbs.SGE{a.sge(3, 1000), b.sge(4095, 4097), a.sge(3*slot-3, 3)}
	want := append([]byte(nil), srvMem.Bytes()...)
	at := 17
	for _, s := range gather {
		at += copy(want[at:], s.Buf)
	}
	postRecv(t, p.srv.conn, recvWR(1, note.sge(0, 64)))
	w := rdmaWR(2, verbs.OpRDMAWrite, srvMem.at(17), gather...)
	w.Signal = false
	post(t, p.cli.conn, chain(w, sendWR(3, a.sge(0, 4))))
	mustWC(t, e.waitOne(t, p.cli.scq), 3, verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
	mustWC(t, e.waitOne(t, p.srv.rcq), 1, verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
	same(t, "server region after a gathered RDMA Write", srvMem.Bytes(), want)

	fill(srvMem.Bytes(), 54)
	type piece struct {
		r      *region
		off, n int
	}
	pieces := []piece{{b, 0, 1}, {a, 1, 4095}, {b, slot + 5, 4000}, {a, 2 * slot, 904}}
	wantA := append([]byte(nil), a.Bytes()...)
	wantB := append([]byte(nil), b.Bytes()...)
	scatter := make([]verbs.SGE, len(pieces))
	src := srvMem.Bytes()[100:]
	for i, pc := range pieces {
		scatter[i] = pc.r.sge(pc.off, pc.n)
		dst := wantA
		if pc.r == b {
			dst = wantB
		}
		src = src[copy(dst[pc.off:pc.off+pc.n], src):]
	}
	if c.Quirks.MaxReadSGE > 0 && len(scatter) > c.Quirks.MaxReadSGE {
		// The device cannot scatter a Read: the post must say so rather
		// than place the response somewhere else.
		err := p.cli.conn.PostSend(rdmaWR(4, verbs.OpRDMARead, srvMem.at(100), scatter...))
		if !errors.Is(err, verbs.ErrInvalidSGE) {
			t.Fatalf("RDMA Read into %d SGEs (the device takes %d): PostSend = %v, want ErrInvalidSGE", len(scatter), c.Quirks.MaxReadSGE, err)
		}
		t.Logf("scattered Read refused at post: %v", err)
		return
	}
	post(t, p.cli.conn, rdmaWR(4, verbs.OpRDMARead, srvMem.at(100), scatter...))
	mustWC(t, e.waitOne(t, p.cli.scq), 4, verbs.OpRDMARead, verbs.StatusSuccess, p.cli.conn)
	same(t, "first client region after a scattered RDMA Read", a.Bytes(), wantA)
	same(t, "second client region after a scattered RDMA Read", b.Bytes(), wantB)
}

// testRDMAPipeline keeps 64 RDMA Reads and 64 RDMA Writes outstanding at
// once, four times the negotiated read depth: the provider must queue
// Reads beyond the peer's IRD rather than fail them, and everything
// completes in posting order with the right bytes.
func testRDMAPipeline(t *testing.T, c config) {
	const n, size = 64, 4096
	e := newEnv(t, c)
	p := e.connect(t, nil, nil)
	all := verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite
	srvMem := e.srv.region(t, 2*n*size, all)
	cliMem := e.cli.region(t, 2*n*size, verbs.AccessLocalWrite)
	note := e.srv.region(t, 64, verbs.AccessLocalWrite)
	// Reads pull the first half of the server region into the client's
	// first half; Writes push the client's second half into the server's.
	fill(srvMem.Bytes(), 61)
	fill(cliMem.Bytes(), 62)
	wantSrv := append([]byte(nil), srvMem.Bytes()...)
	copy(wantSrv[n*size:], cliMem.Bytes()[n*size:])
	wantCli := append([]byte(nil), cliMem.Bytes()...)
	copy(wantCli[:n*size], srvMem.Bytes()[:n*size])
	wrs := make([]*verbs.SendWR, 0, 2*n)
	for i := range n {
		wrs = append(wrs,
			rdmaWR(uint64(2*i), verbs.OpRDMARead, srvMem.at(i*size), cliMem.sge(i*size, size)),
			rdmaWR(uint64(2*i+1), verbs.OpRDMAWrite, srvMem.at((n+i)*size), cliMem.sge((n+i)*size, size)))
	}
	postRecv(t, p.srv.conn, recvWR(1, note.sge(0, 64)))
	post(t, p.cli.conn, chain(wrs...))
	wcs := e.waitWCs(t, p.cli.scq, 2*n)
	if c.Quirks.CompleteOnTransmit {
		slices.SortFunc(wcs, func(a, b verbs.WC) int { return cmp.Compare(a.ID, b.ID) })
	}
	for i, wc := range wcs {
		op := verbs.OpRDMARead
		if i%2 == 1 {
			op = verbs.OpRDMAWrite
		}
		mustWC(t, wc, uint64(i), op, verbs.StatusSuccess, p.cli.conn)
	}
	post(t, p.cli.conn, sendWR(999, cliMem.sge(0, 4)))
	mustWC(t, e.waitOne(t, p.cli.scq), 999, verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
	mustWC(t, e.waitOne(t, p.srv.rcq), 1, verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
	same(t, "client region after 64 RDMA Reads", cliMem.Bytes(), wantCli)
	same(t, "server region after 64 RDMA Writes", srvMem.Bytes(), wantSrv)
}

// testRDMAWriteThenSend: a large RDMA Write and a Send posted right after
// it in a separate PostSend reach the peer in that order, round after
// round: the Send's receive completion means the Write's data is placed.
// A provider that hands large work requests to another thread (ibverbs
// does, post.go) must not let the small Send overtake them.
func testRDMAWriteThenSend(t *testing.T, c config) {
	const rounds, size = 8, 1 << 20
	e := newEnv(t, c)
	p := e.connect(t, nil, nil)
	all := verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite
	srvMem := e.srv.region(t, size, all)
	cliMem := e.cli.region(t, size, verbs.AccessLocalWrite)
	note := e.srv.region(t, 64, verbs.AccessLocalWrite)
	for r := range rounds {
		fill(srvMem.Bytes(), uint64(500+r))
		fill(cliMem.Bytes(), uint64(600+r))
		want := append([]byte(nil), cliMem.Bytes()...)
		postRecv(t, p.srv.conn, recvWR(uint64(r), note.sge(0, 64)))
		w := rdmaWR(1, verbs.OpRDMAWrite, srvMem.at(0), cliMem.sge(0, size))
		w.Signal = false
		post(t, p.cli.conn, w)
		post(t, p.cli.conn, sendWR(2, cliMem.sge(0, 8)))
		mustWC(t, e.waitOne(t, p.srv.rcq), uint64(r), verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
		same(t, fmt.Sprintf("server region when round %d's Send arrived", r), srvMem.Bytes(), want)
		mustWC(t, e.waitOne(t, p.cli.scq), 2, verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
		if t.Failed() {
			return
		}
	}
}
