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

// The many-connections case runs this exchange on every connection at
// once, each end in its own goroutine with its own CQs:
//
//	client                         server
//	  Send hello(i)      ──────>   check i
//	                     <──────   Send key(addr, rkey of a 64 KiB region)
//	  RDMA Read region, check
//	  RDMA Write region + Send written ──> check region
//	                     <──────   Send verified
//	  16 × Send ping(k)  ──────>   Send it back as an echo
//	  Disconnect                   sees Done
const (
	manyRegion = 64 << 10
	manySlot   = 1024
	manyRecvs  = 4
	manyPings  = 16
)

const (
	kindHello byte = 'H' + iota
	kindKey
	kindWritten
	kindVerified
	kindPing
	kindEcho
)

// manyEnd is one end of one connection, used from one goroutine.
type manyEnd struct {
	ctx      context.Context
	name     string
	conn     verbs.Conn
	scq, rcq verbs.CQ
	in, out  *region
}

// initialRecvs is the chain of receives each end has posted before its
// connection is established (ConnOptions.InitialRecv), so the peer's first
// Send finds one however early it comes.
func (x *manyEnd) initialRecvs() *verbs.RecvWR {
	var head *verbs.RecvWR
	for k := manyRecvs - 1; k >= 0; k-- {
		wr := recvWR(uint64(k), x.in.sge(k*manySlot, manySlot))
		wr.Next = head
		head = wr
	}
	return head
}

// do posts wr and waits for its signalled completion.
func (x *manyEnd) do(wr *verbs.SendWR, last uint64, op verbs.Opcode) error {
	if err := x.conn.PostSend(wr); err != nil {
		return fmt.Errorf("%s: PostSend %s: %w", x.name, wr.Op, err)
	}
	wcs, err := collect(x.ctx, x.scq, 1)
	if err != nil {
		return fmt.Errorf("%s: %w", x.name, err)
	}
	if err := checkWC(wcs[0], last, op, verbs.StatusSuccess, x.conn); err != nil {
		return fmt.Errorf("%s: %w", x.name, err)
	}
	return nil
}

// send sends kind and body as one message from the out buffer.
func (x *manyEnd) send(kind byte, body []byte) error {
	b := x.out.Bytes()
	b[0] = kind
	n := 1 + copy(b[1:manySlot], body)
	return x.do(sendWR(uint64(kind), x.out.sge(0, n)), uint64(kind), verbs.OpSend)
}

// recv waits for the next message, checks its kind, returns a copy of its
// body and reposts the receive.
func (x *manyEnd) recv(kind byte) ([]byte, error) {
	wcs, err := collect(x.ctx, x.rcq, 1)
	if err != nil {
		return nil, fmt.Errorf("%s: waiting for %q: %w", x.name, kind, err)
	}
	wc := wcs[0]
	if err := checkWC(wc, wc.ID, verbs.OpRecv, verbs.StatusSuccess, x.conn); err != nil || wc.ID >= manyRecvs || wc.ByteLen < 1 {
		return nil, fmt.Errorf("%s: waiting for %q: completion %s", x.name, kind, describe1(wc))
	}
	msg := x.in.Bytes()[int(wc.ID)*manySlot:][:wc.ByteLen]
	if msg[0] != kind {
		return nil, fmt.Errorf("%s: message %q, want %q", x.name, msg[0], kind)
	}
	body := append([]byte(nil), msg[1:]...)
	if err := x.conn.PostRecv(recvWR(wc.ID, x.in.sge(int(wc.ID)*manySlot, manySlot))); err != nil {
		return nil, fmt.Errorf("%s: repost: %w", x.name, err)
	}
	return body, nil
}

// testManyConnections opens Conns connections at once (dials all
// concurrently) and runs the exchange above on all of them in parallel.
func testManyConnections(t *testing.T, c config) {
	n := c.Conns
	e := newEnv(t, c)
	ln := e.listen(t)
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout*time.Duration(2+n/16))
	defer cancel()
	errs := make(chan error, 2*n+1)
	go func() { errs <- manyAcceptor(ctx, e, ln, n, errs) }()
	for i := range n {
		go func() { errs <- manyClient(ctx, e, ln.Addr().String(), i) }()
	}
	failed := 0
	for range 2*n + 1 {
		if err := <-errs; err != nil {
			if failed == 0 {
				cancel() // the first failure stops the rest
			}
			if failed < 10 && !errors.Is(err, context.Canceled) {
				t.Error(err)
			}
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d goroutines failed", failed, 2*n+1)
	}
}

// manyAcceptor accepts n connections and starts a server goroutine for
// each, which reports on errs. It returns after the n-th accept.
func manyAcceptor(ctx context.Context, e *env, ln verbs.Listener, n int, errs chan<- error) error {
	started := make([]bool, n)
	// On failure, stand in for the servers that will never start.
	fail := func(err error) error {
		for i := range n {
			if !started[i] {
				started[i] = true
				errs <- nil
			}
		}
		return err
	}
	for range n {
		req, err := ln.Accept(ctx)
		if err != nil {
			return fail(fmt.Errorf("Accept: %w", err))
		}
		pd := req.PrivateData()
		if len(pd) < 4 || int(binary.BigEndian.Uint32(pd)) >= n || started[binary.BigEndian.Uint32(pd)] {
			_ = req.Reject(nil)
			return fail(fmt.Errorf("connect request with private data % x", pd))
		}
		i := int(binary.BigEndian.Uint32(pd))
		started[i] = true
		go func() { errs <- manyServer(ctx, e, req, i) }()
	}
	return nil
}

// open creates an end's CQs and message buffers; release frees them.
func (x *manyEnd) open(h *host) error {
	var err error
	if x.scq, err = h.dev.CreateCQ(16); err != nil {
		return err
	}
	if x.rcq, err = h.dev.CreateCQ(16); err != nil {
		return err
	}
	if x.in, err = newRegion(h.pd, 0, manyRecvs*manySlot, verbs.AccessLocalWrite); err != nil {
		return err
	}
	x.out, err = newRegion(h.pd, 0, manySlot, 0)
	return err
}

func (x *manyEnd) release() {
	if x.conn != nil {
		_ = x.conn.Close()
	}
	for _, r := range []*region{x.in, x.out} {
		if r != nil {
			_ = r.free()
		}
	}
	for _, cq := range []verbs.CQ{x.scq, x.rcq} {
		if cq != nil {
			_ = cq.Close()
		}
	}
}

func manyServer(ctx context.Context, e *env, req verbs.ConnRequest, i int) error {
	x := &manyEnd{ctx: ctx, name: fmt.Sprintf("server %d", i)}
	defer x.release()
	if err := x.open(e.srv); err != nil {
		_ = req.Reject(nil)
		return fmt.Errorf("%s: %w", x.name, err)
	}
	mem, err := newRegion(e.srv.pd, 0, manyRegion, verbs.AccessLocalWrite|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	if err != nil {
		_ = req.Reject(nil)
		return fmt.Errorf("%s: %w", x.name, err)
	}
	defer mem.free()
	fill(mem.Bytes(), uint64(5000+i))
	o := e.options(e.srv, x.scq, x.rcq)
	o.InitialRecv = x.initialRecvs()
	if x.conn, err = req.Accept(o); err != nil {
		return fmt.Errorf("%s: Accept: %w", x.name, err)
	}
	body, err := x.recv(kindHello)
	if err != nil {
		return err
	}
	if len(body) != 4 || int(binary.BigEndian.Uint32(body)) != i {
		return fmt.Errorf("%s: hello % x on the connection of client %d", x.name, body, i)
	}
	var key [12]byte
	binary.BigEndian.PutUint64(key[:], mem.Addr())
	binary.BigEndian.PutUint32(key[8:], mem.RKey())
	if err := x.send(kindKey, key[:]); err != nil {
		return err
	}
	if _, err := x.recv(kindWritten); err != nil {
		return err
	}
	if d := diff(x.name+": region after the client's RDMA Write", mem.Bytes(), pattern(manyRegion, uint64(6000+i))); d != "" {
		return errors.New(d)
	}
	if err := x.send(kindVerified, nil); err != nil {
		return err
	}
	for range manyPings {
		body, err := x.recv(kindPing)
		if err != nil {
			return err
		}
		if err := x.send(kindEcho, body); err != nil {
			return err
		}
	}
	select {
	case <-x.conn.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: client never disconnected: %w", x.name, ctx.Err())
	}
}

func manyClient(ctx context.Context, e *env, addr string, i int) error {
	x := &manyEnd{ctx: ctx, name: fmt.Sprintf("client %d", i)}
	defer x.release()
	if err := x.open(e.cli); err != nil {
		return fmt.Errorf("%s: %w", x.name, err)
	}
	local, err := newRegion(e.cli.pd, 0, manyRegion, verbs.AccessLocalWrite)
	if err != nil {
		return fmt.Errorf("%s: %w", x.name, err)
	}
	defer local.free()
	o := e.options(e.cli, x.scq, x.rcq)
	o.PrivateData = binary.BigEndian.AppendUint32(nil, uint32(i))
	// Both ends' receives are posted before the connection is
	// established, so the hello may go out at once: no out-of-band wait
	// for the server.
	o.InitialRecv = x.initialRecvs()
	if x.conn, err = e.cli.dev.Dial(ctx, addr, o); err != nil {
		return fmt.Errorf("%s: Dial: %w", x.name, err)
	}
	if err := x.send(kindHello, binary.BigEndian.AppendUint32(nil, uint32(i))); err != nil {
		return err
	}
	if err := x.readWrite(local, i); err != nil {
		return err
	}
	if err := x.pings(i); err != nil {
		return err
	}
	if err := x.conn.Disconnect(); err != nil {
		return fmt.Errorf("%s: Disconnect: %w", x.name, err)
	}
	select {
	case <-x.conn.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: Done not closed after Disconnect: %w", x.name, ctx.Err())
	}
}

// readWrite takes the server's region key, reads the region (checking
// client i's pattern), writes it with another and says so; the server
// verifies.
func (x *manyEnd) readWrite(local *region, i int) error {
	key, err := x.recv(kindKey)
	if err != nil {
		return err
	}
	if len(key) != 12 {
		return fmt.Errorf("%s: key message of %d bytes", x.name, len(key))
	}
	rem := remote{addr: binary.BigEndian.Uint64(key), rkey: binary.BigEndian.Uint32(key[8:])}
	if err := x.do(rdmaWR(1, verbs.OpRDMARead, rem, local.sge(0, manyRegion)), 1, verbs.OpRDMARead); err != nil {
		return err
	}
	if d := diff(x.name+": RDMA Read of the server's region", local.Bytes(), pattern(manyRegion, uint64(5000+i))); d != "" {
		return errors.New(d)
	}
	fill(local.Bytes(), uint64(6000+i))
	w := rdmaWR(2, verbs.OpRDMAWrite, rem, local.sge(0, manyRegion))
	w.Signal = false
	x.out.Bytes()[0] = kindWritten
	if err := x.do(chain(w, sendWR(3, x.out.sge(0, 1))), 3, verbs.OpSend); err != nil {
		return err
	}
	_, err = x.recv(kindVerified)
	return err
}

// pings sends client i's pings and checks each echo.
func (x *manyEnd) pings(i int) error {
	for k := range manyPings {
		ping := pattern(16+(k*97+i*13)%(manySlot-17), uint64(i<<8|k))
		if err := x.send(kindPing, ping); err != nil {
			return err
		}
		echo, err := x.recv(kindEcho)
		if err != nil {
			return err
		}
		if d := diff(fmt.Sprintf("%s: echo %d", x.name, k), echo, ping); d != "" {
			return errors.New(d)
		}
	}
	return nil
}
