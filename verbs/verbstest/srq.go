package verbstest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

const (
	srqConns   = 8
	srqPerConn = 50
	srqSlot    = 256
	srqSpare   = 8 // receives left on the SRQ after the traffic
)

// srqMessage fills b with message seq of client idx: both in the header,
// then a pattern unique to the pair.
func srqMessage(b []byte, idx, seq int) {
	fill(b, uint64(idx*1000+seq))
	binary.BigEndian.PutUint32(b, uint32(idx))
	binary.BigEndian.PutUint32(b[4:], uint32(seq))
}

func srqSize(idx, seq int) int { return 8 + (seq*31+idx*7)%(srqSlot-8) }

// testSRQ connects 8 clients to a server whose connections share one SRQ
// and one CQ (for sends and receives). Every message arrives exactly once
// in per-sender order, WC.Conn names the connection that carried it,
// sends on the shared CQ name theirs, Conn.PostRecv is refused with
// ErrSRQ, and one connection ending does not flush the shared receives.
func testSRQ(t *testing.T, c config) {
	st := &srqTest{e: newEnv(t, c)}
	st.setUp(t)
	if err := st.srv[0].PostRecv(recvWR(0, st.in.sge(0, 8))); !errors.Is(err, verbs.ErrSRQ) {
		t.Errorf("Conn.PostRecv on an SRQ connection: %v, want ErrSRQ", err)
	}

	// Clients send concurrently, each waiting for its sends and then for
	// the server's acknowledgement.
	ctx, cancel := context.WithTimeout(context.Background(), 2*c.Timeout)
	defer cancel()
	errs := st.startClients(t, ctx)
	st.checkMessages(t, cancel)
	st.acknowledge(t)
	for range srqConns {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		return
	}
	st.afterDisconnect(t)
}

// srqTest is testSRQ's state: the server's shared CQ and SRQ, the
// receive region the SRQ's receives land in, and the connections.
type srqTest struct {
	e    *env
	cq   verbs.CQ
	srq  verbs.SRQ
	in   *region
	srv  []verbs.Conn // the server's Conn for client i
	cli  []*end
	outs []*region // client i's messages
}

// setUp creates the shared CQ and SRQ, posts every receive (with
// srqSpare left over for afterDisconnect) and connects the clients.
func (st *srqTest) setUp(t *testing.T) {
	e := st.e
	st.cq = e.srv.cq(t, 4*srqConns*srqPerConn)
	srq, err := e.srv.pd.CreateSRQ(srqConns*srqPerConn + srqSpare)
	if err != nil {
		t.Fatalf("CreateSRQ: %v", err)
	}
	t.Cleanup(func() { _ = srq.Close() })
	st.srq = srq
	total := srqConns*srqPerConn + srqSpare
	st.in = e.srv.region(t, total*srqSlot, verbs.AccessLocalWrite)
	for i := range total {
		if err := srq.PostRecv(recvWR(uint64(i), st.in.sge(i*srqSlot, srqSlot))); err != nil {
			t.Fatalf("SRQ.PostRecv %d: %v", i, err)
		}
	}
	st.srv, st.cli = e.connectSRQ(t, st.cq, srq)
}

// startClients starts every client's srqClient; their results come on
// the channel.
func (st *srqTest) startClients(t *testing.T, ctx context.Context) chan error {
	st.outs = make([]*region, srqConns)
	acks := make([]*region, srqConns)
	for i, ce := range st.cli {
		st.outs[i] = st.e.cli.region(t, srqPerConn*srqSlot, 0)
		acks[i] = st.e.cli.region(t, 64, verbs.AccessLocalWrite)
		postRecv(t, ce.conn, recvWR(7, acks[i].sge(0, 64)))
	}
	errs := make(chan error, srqConns)
	for i, ce := range st.cli {
		go func() { errs <- srqClient(ctx, i, ce, st.outs[i], acks[i]) }()
	}
	return errs
}

// checkMessages takes every message off the shared CQ: each arrives once,
// in its sender's order, byte for byte, with WC.Conn naming its
// connection. On a failure it cancels the clients.
func (st *srqTest) checkMessages(t *testing.T, cancel context.CancelFunc) {
	next := make([]int, srqConns)
	want := make([]byte, srqSlot)
	for _, wc := range st.e.waitWCs(t, st.cq, srqConns*srqPerConn) {
		idx := indexOf(st.srv, wc.Conn)
		if wc.Status != verbs.StatusSuccess || wc.Op != verbs.OpRecv || idx < 0 {
			cancel()
			t.Fatalf("shared CQ completion %s (conn index %d), want a successful receive from a known conn", describe1(wc), idx)
		}
		msg := st.in.Bytes()[int(wc.ID)*srqSlot:][:wc.ByteLen]
		if len(msg) < 8 {
			t.Fatalf("message of %d bytes from conn %d", len(msg), idx)
		}
		from, seq := int(binary.BigEndian.Uint32(msg)), int(binary.BigEndian.Uint32(msg[4:]))
		if from != idx || seq != next[idx] {
			cancel()
			t.Fatalf("conn %d delivered message %d of client %d, want message %d of client %d", idx, seq, from, next[idx], idx)
		}
		srqMessage(want[:srqSize(idx, seq)], idx, seq)
		if d := diff(fmt.Sprintf("message %d of client %d", seq, idx), msg, want[:srqSize(idx, seq)]); d != "" {
			cancel()
			t.Fatal(d)
		}
		next[idx]++
	}
}

// acknowledge sends each client its index; each SEND completes once on
// the shared CQ with its own WC.Conn.
func (st *srqTest) acknowledge(t *testing.T) {
	ack := st.e.srv.region(t, 64, 0)
	for i, sc := range st.srv {
		binary.BigEndian.PutUint32(ack.Bytes()[i*4:], uint32(i))
		post(t, sc, sendWR(uint64(i), ack.sge(i*4, 4)))
	}
	seen := make([]bool, srqConns)
	for _, wc := range st.e.waitWCs(t, st.cq, srqConns) {
		if wc.Status != verbs.StatusSuccess || wc.Op != verbs.OpSend || wc.ID >= srqConns || seen[wc.ID] || wc.Conn != st.srv[wc.ID] {
			t.Fatalf("acknowledgement completion %s: want one successful SEND per conn, with its own WC.Conn", describe1(wc))
		}
		seen[wc.ID] = true
	}
}

// afterDisconnect: one connection leaving must not flush the SRQ's
// receives; another connection's next message still finds one.
func (st *srqTest) afterDisconnect(t *testing.T) {
	e, cli := st.e, st.cli
	if err := cli[0].conn.Disconnect(); err != nil {
		t.Fatal(err)
	}
	e.waitDone(t, st.srv[0], "server conn 0 after its client disconnected")
	expectQuiet(t, st.cq, 100*time.Millisecond, "shared CQ after one of its connections ended")
	last := st.outs[1]
	srqMessage(last.Bytes()[:16], 1, srqPerConn)
	post(t, cli[1].conn, sendWR(99, last.sge(0, 16)))
	mustWC(t, e.waitOne(t, cli[1].scq), 99, verbs.OpSend, verbs.StatusSuccess, cli[1].conn)
	wc := e.waitOne(t, st.cq)
	if wc.Status != verbs.StatusSuccess || wc.Conn != st.srv[1] || int(wc.ID) < srqConns*srqPerConn {
		t.Fatalf("message after a disconnect: %s, want a spare SRQ receive on conn 1", describe1(wc))
	}
	same(t, "message after a disconnect", st.in.Bytes()[int(wc.ID)*srqSlot:][:16], last.Bytes()[:16])
}

// connectSRQ dials srqConns clients, each naming its index in its private
// data; the server accepts each onto the shared SRQ and CQ. srv[i] is the
// server's Conn for client i.
func (e *env) connectSRQ(t *testing.T, cq verbs.CQ, srq verbs.SRQ) (srv []verbs.Conn, cli []*end) {
	ln := e.listen(t)
	ctx, cancel := context.WithTimeout(context.Background(), e.c.Timeout)
	defer cancel()
	srv = make([]verbs.Conn, srqConns)
	cli = make([]*end, srqConns)
	for i := range srqConns {
		acc := acceptOne(ctx, ln, func(req verbs.ConnRequest) (verbs.Conn, error) {
			o := e.options(e.srv, cq, cq)
			o.SRQ = srq
			return req.Accept(o)
		})
		ce := &end{h: e.cli, name: fmt.Sprintf("client %d", i), scq: e.cli.cq(t, cqDepth), rcq: e.cli.cq(t, cqDepth)}
		o := e.options(e.cli, ce.scq, ce.rcq)
		o.PrivateData = []byte{byte(i), 'S', 'R', 'Q'}
		conn, err := e.cli.dev.Dial(ctx, ln.Addr().String(), o)
		if err != nil {
			cancel()
			<-acc
			t.Fatalf("Dial %d: %v", i, err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		ce.conn = conn
		a := <-acc
		if a.err != nil {
			t.Fatalf("accept %d: %v", i, a.err)
		}
		t.Cleanup(func() { _ = a.conn.Close() })
		if pd := a.req.PrivateData(); len(pd) < 4 || pd[0] != byte(i) || string(pd[1:4]) != "SRQ" {
			t.Fatalf("accept %d: private data % x", i, pd)
		}
		srv[i], cli[i] = a.conn, ce
	}
	return srv, cli
}

// srqClient sends client idx's messages and waits for the server's ack.
func srqClient(ctx context.Context, idx int, ce *end, out, ack *region) error {
	wrs := make([]*verbs.SendWR, srqPerConn)
	for seq := range srqPerConn {
		b := out.Bytes()[seq*srqSlot:]
		srqMessage(b[:srqSize(idx, seq)], idx, seq)
		wrs[seq] = sendWR(uint64(seq), out.sge(seq*srqSlot, srqSize(idx, seq)))
	}
	// Post in chains of ten to mix chained and separate posts.
	for i := 0; i < srqPerConn; i += 10 {
		if err := ce.conn.PostSend(chain(wrs[i:min(i+10, srqPerConn)]...)); err != nil {
			return fmt.Errorf("client %d: PostSend: %w", idx, err)
		}
	}
	wcs, err := collect(ctx, ce.scq, srqPerConn)
	if err != nil {
		return fmt.Errorf("client %d sends: %w", idx, err)
	}
	for seq, wc := range wcs {
		if err := checkWC(wc, uint64(seq), verbs.OpSend, verbs.StatusSuccess, ce.conn); err != nil {
			return fmt.Errorf("client %d: %w", idx, err)
		}
	}
	wcs, err = collect(ctx, ce.rcq, 1)
	if err != nil {
		return fmt.Errorf("client %d ack: %w", idx, err)
	}
	if err := checkWC(wcs[0], 7, verbs.OpRecv, verbs.StatusSuccess, ce.conn); err != nil {
		return fmt.Errorf("client %d ack: %w", idx, err)
	}
	if got := binary.BigEndian.Uint32(ack.Bytes()); wcs[0].ByteLen != 4 || got != uint32(idx) {
		return fmt.Errorf("client %d got the ack for client %d (%d bytes)", idx, got, wcs[0].ByteLen)
	}
	return nil
}

func indexOf(conns []verbs.Conn, c verbs.Conn) int {
	for i, x := range conns {
		if x == c {
			return i
		}
	}
	return -1
}
