package verbstest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/rdmagw/rdmagw/verbs"
)

// Default queue sizes of the connections the suite makes. They are small
// enough for any device and large enough for every case's window.
const (
	defaultMaxWR   = 128
	defaultMaxSGE  = 4
	defaultRDDepth = 16
	cqDepth        = 512
)

// host is one end's device and protection domain. Each case opens two, a
// server and a client, so nothing is shared between the ends but the wire.
type host struct {
	dev verbs.Device
	pd  verbs.PD

	mu      sync.Mutex
	regions []*region       // freed after every connection of the case closed
	mems    []*verbs.Memory // unregistered (or self-registered) memory, freed last
}

// env is one test case's world: configuration and the two hosts.
type env struct {
	c        config
	srv, cli *host
}

// newEnv opens both hosts and arms the goroutine leak check, which runs
// after every other cleanup of the case.
func newEnv(t testing.TB, c config) *env {
	t.Helper()
	checkLeaks(t, c)
	return newEnvNoLeakCheck(t, c)
}

func newEnvNoLeakCheck(t testing.TB, c config) *env {
	t.Helper()
	e := &env{c: c}
	e.srv = e.openHost(t, "server", e.c.Provider)
	cli := e.c.Provider
	if e.c.Peer != nil {
		cli = e.c.Peer
	}
	e.cli = e.openHost(t, "client", cli)
	return e
}

func (e *env) openHost(t testing.TB, name string, p verbs.Provider) *host {
	t.Helper()
	dev, err := p.Open(e.c.host)
	if err != nil {
		t.Fatalf("%s: %s Open(%q): %v", name, p.Name(), e.c.host, err)
	}
	t.Cleanup(func() {
		if err := dev.Close(); err != nil {
			t.Errorf("%s: Device.Close: %v", name, err)
		}
	})
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatalf("%s: AllocPD: %v", name, err)
	}
	t.Cleanup(func() {
		if err := pd.Close(); err != nil {
			t.Errorf("%s: PD.Close: %v", name, err)
		}
	})
	h := &host{dev: dev, pd: pd}
	// Registered memory outlives every connection: connections are made
	// later in the case, so their Close cleanups run before this one and
	// no work request can still touch a region when it is unmapped (the
	// order a consumer must keep; a provider writing to an unmapped
	// region would kill the test binary with SIGSEGV).
	t.Cleanup(func() {
		h.mu.Lock()
		regions := h.regions
		h.regions = nil
		h.mu.Unlock()
		for _, r := range regions {
			if err := r.free(); err != nil {
				t.Errorf("%s: region cleanup: %v", name, err)
			}
		}
		for _, m := range h.mems {
			if err := m.Free(); err != nil {
				t.Errorf("%s: Memory.Free: %v", name, err)
			}
		}
	})
	return h
}

// memory allocates size bytes with verbs.Alloc, freed when the case ends
// after every connection closed.
func (h *host) memory(t testing.TB, size int) *verbs.Memory {
	t.Helper()
	m, err := verbs.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.mems = append(h.mems, m)
	h.mu.Unlock()
	return m
}

// cq creates a completion queue closed at the end of the case.
func (h *host) cq(t testing.TB, depth int) verbs.CQ {
	t.Helper()
	cq, err := h.dev.CreateCQ(depth)
	if err != nil {
		t.Fatalf("CreateCQ(%d): %v", depth, err)
	}
	t.Cleanup(func() { _ = cq.Close() })
	return cq
}

// region is registered memory from verbs.Alloc. Deregister and free are
// idempotent so a case may deregister early and cleanup still frees.
type region struct {
	verbs.MR
	mem      *verbs.Memory
	deregged bool
	mu       sync.Mutex
}

// newRegion allocates size bytes at offset off of a fresh mapping and
// registers exactly [off, off+size): the bytes around the region are
// mapped but not registered, which the protection cases rely on.
func newRegion(pd verbs.PD, off, size int, access verbs.Access) (*region, error) {
	mem, err := verbs.Alloc(off + size + 1)
	if err != nil {
		return nil, err
	}
	mr, err := pd.Register(mem.Bytes()[off:off+size], access)
	if err != nil {
		_ = mem.Free()
		return nil, fmt.Errorf("Register(%d bytes, access %#x): %w", size, access, err)
	}
	if got := len(mr.Bytes()); got != size {
		_ = mr.Deregister()
		_ = mem.Free()
		return nil, fmt.Errorf("MR.Bytes() has %d bytes, registered %d", got, size)
	}
	return &region{MR: mr, mem: mem}, nil
}

// region registers memory on h's PD for the rest of the case.
func (h *host) region(t testing.TB, size int, access verbs.Access) *region {
	t.Helper()
	return h.regionAt(t, 0, size, access)
}

func (h *host) regionAt(t testing.TB, off, size int, access verbs.Access) *region {
	t.Helper()
	r, err := newRegion(h.pd, off, size, access)
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.regions = append(h.regions, r)
	h.mu.Unlock()
	return r
}

// deregister deregisters the MR once.
func (r *region) deregister() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deregged {
		return nil
	}
	r.deregged = true
	return r.MR.Deregister()
}

// free deregisters (if not yet done) and unmaps.
func (r *region) free() error {
	err := r.deregister()
	return errors.Join(err, r.mem.Free())
}

// raw is the whole mapping behind the region, including the unregistered
// bytes around it.
func (r *region) raw() []byte { return r.mem.Bytes() }

// sge is the scatter/gather entry for r.Bytes()[off:off+n].
func (r *region) sge(off, n int) verbs.SGE {
	return verbs.SGE{Buf: r.Bytes()[off : off+n], LKey: r.LKey()}
}

// remote is what a peer needs to address part of a region.
type remote struct {
	addr uint64
	rkey uint32
}

func (r *region) at(off int) remote { return remote{addr: r.Addr() + uint64(off), rkey: r.RKey()} }

// end is one side of a connection with its own send and receive CQs.
type end struct {
	conn     verbs.Conn
	scq, rcq verbs.CQ
	h        *host
	name     string
}

// pair is a connected client (dialer) and server (acceptor).
type pair struct {
	cli, srv *end
	// cliPD and srvPD are the private data each side received.
	cliPD, srvPD []byte
}

// options are the ConnOptions the suite uses unless a case changes them,
// after the Factory's Tune.
func (e *env) options(h *host, scq, rcq verbs.CQ) verbs.ConnOptions {
	o := verbs.ConnOptions{
		PD: h.pd, SendCQ: scq, RecvCQ: rcq,
		MaxSendWR: defaultMaxWR, MaxRecvWR: defaultMaxWR, MaxSGE: defaultMaxSGE,
		InitiatorDepth: defaultRDDepth, ResponderResources: defaultRDDepth,
		RNRRetry: 7,
		Timeout:  e.c.Timeout,
	}
	if e.c.Tune != nil {
		e.c.Tune(&o)
		o.PD, o.SendCQ, o.RecvCQ = h.pd, scq, rcq
	}
	return o
}

// connect makes a connected pair over a fresh listener. cliMod and srvMod,
// when not nil, adjust each side's options before use.
func (e *env) connect(t testing.TB, cliMod, srvMod func(*verbs.ConnOptions)) *pair {
	t.Helper()
	return e.connectVia(t, e.listen(t), cliMod, srvMod)
}

// connectVia is connect over a given listener.
func (e *env) connectVia(t testing.TB, ln verbs.Listener, cliMod, srvMod func(*verbs.ConnOptions)) *pair {
	t.Helper()
	cli := &end{h: e.cli, name: "client", scq: e.cli.cq(t, cqDepth), rcq: e.cli.cq(t, cqDepth)}
	srv := &end{h: e.srv, name: "server", scq: e.srv.cq(t, cqDepth), rcq: e.srv.cq(t, cqDepth)}
	copts := e.options(e.cli, cli.scq, cli.rcq)
	sopts := e.options(e.srv, srv.scq, srv.rcq)
	if cliMod != nil {
		cliMod(&copts)
	}
	if srvMod != nil {
		srvMod(&sopts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.c.Timeout)
	defer cancel()
	acc := acceptOne(ctx, ln, func(req verbs.ConnRequest) (verbs.Conn, error) { return req.Accept(sopts) })
	conn, err := e.cli.dev.Dial(ctx, ln.Addr().String(), copts)
	if err != nil {
		cancel()
		<-acc
		t.Fatalf("Dial(%s): %v", ln.Addr(), err)
	}
	cli.conn = conn
	t.Cleanup(func() { _ = conn.Close() })
	a := <-acc
	if a.err != nil {
		t.Fatalf("accept: %v", a.err)
	}
	srv.conn = a.conn
	t.Cleanup(func() { _ = a.conn.Close() })
	return &pair{cli: cli, srv: srv, cliPD: conn.PrivateData(), srvPD: a.req.PrivateData()}
}

// listen opens a listener on the configured address for the rest of the
// case.
func (e *env) listen(t testing.TB) verbs.Listener {
	t.Helper()
	ln, err := e.srv.dev.Listen(e.c.Addr)
	if err != nil {
		t.Fatalf("Listen(%s): %v", e.c.Addr, err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

type accepted struct {
	req  verbs.ConnRequest
	conn verbs.Conn
	err  error
}

// acceptOne answers one connection request with decide in a goroutine.
// The channel yields exactly one result and the goroutine then exits.
func acceptOne(ctx context.Context, ln verbs.Listener, decide func(verbs.ConnRequest) (verbs.Conn, error)) <-chan accepted {
	ch := make(chan accepted, 1)
	go func() {
		req, err := ln.Accept(ctx)
		if err != nil {
			ch <- accepted{err: fmt.Errorf("Listener.Accept: %w", err)}
			return
		}
		conn, err := decide(req)
		ch <- accepted{req: req, conn: conn, err: err}
	}()
	return ch
}
