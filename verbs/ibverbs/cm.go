//go:build ibverbs && cgo

package ibverbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/rdmagw/rdmagw/verbs"
)

const (
	defaultQueue   = 128
	defaultMaxSGE  = 4
	defaultRdDepth = 16
	defaultTimeout = 20 * time.Second
	resolveTimeout = 5000 // ms, for rdma_resolve_addr/route
	backlog        = 128
)

// options are ConnOptions resolved to this provider's objects, with
// defaults applied and limits clamped to the device.
type options struct {
	verbs.ConnOptions
	pd       *pd
	scq, rcq *cq
	srq      *srq
}

func (d *device) options(o verbs.ConnOptions) (*options, error) {
	r := &options{ConnOptions: o}
	var ok bool
	if r.pd, ok = o.PD.(*pd); !ok || r.pd.dev.ctx != d.ctx {
		return nil, errors.New("ibverbs: ConnOptions.PD is not a PD of this device")
	}
	if r.scq, ok = o.SendCQ.(*cq); !ok || r.scq.dev.ctx != d.ctx {
		return nil, errors.New("ibverbs: ConnOptions.SendCQ is not a CQ of this device")
	}
	if r.rcq, ok = o.RecvCQ.(*cq); !ok || r.rcq.dev.ctx != d.ctx {
		return nil, errors.New("ibverbs: ConnOptions.RecvCQ is not a CQ of this device")
	}
	if o.SRQ != nil {
		if r.srq, ok = o.SRQ.(*srq); !ok || r.srq.pd != r.pd {
			return nil, errors.New("ibverbs: ConnOptions.SRQ is not an SRQ of ConnOptions.PD")
		}
	}
	def := func(v, d int) int {
		if v <= 0 {
			return d
		}
		return v
	}
	r.MaxSendWR = min(def(o.MaxSendWR, defaultQueue), d.caps.maxQPWR)
	r.MaxRecvWR = min(def(o.MaxRecvWR, defaultQueue), d.caps.maxQPWR)
	r.MaxSGE = min(def(o.MaxSGE, defaultMaxSGE), d.caps.maxSGE)
	r.InitiatorDepth = min(def(o.InitiatorDepth, defaultRdDepth), d.caps.maxInitRdAtom, 255)
	r.ResponderResources = min(def(o.ResponderResources, defaultRdDepth), d.caps.maxRdAtom, 255)
	r.RNRRetry = clamp(o.RNRRetry, 0, 7)
	r.Timeout = time.Duration(def(int(o.Timeout), int(defaultTimeout)))
	if len(o.PrivateData) > 255 {
		return nil, fmt.Errorf("ibverbs: %d bytes of private data (the CM carries at most 56 in a request, 196 in a reply)", len(o.PrivateData))
	}
	return r, nil
}

// waitSetup waits for the next event of a connecting id.
func (c *conn) waitSetup(ctx context.Context) (*cmEvent, error) {
	select {
	case ev := <-c.setup:
		return ev, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// connect sends the connect request (dialing) or the reply (accepting).
func (c *conn) connect(o *options, ird, ord int, accept bool) error {
	var p unsafe.Pointer
	if len(o.PrivateData) > 0 {
		p = C.CBytes(o.PrivateData)
		defer C.free(p)
	}
	acc := C.int(0)
	if accept {
		acc = 1
	}
	srq := C.int(0)
	if o.srq != nil {
		srq = 1
	}
	if rc, err := C.gw_connect(c.id, c.qp, srq, p, C.int(len(o.PrivateData)), C.int(ord), C.int(ird), C.int(o.RNRRetry), acc); rc != 0 {
		if accept {
			return wrap("rdma_accept", err)
		}
		return wrap("rdma_connect", err)
	}
	return nil
}

func (d *device) Dial(ctx context.Context, addr string, opts verbs.ConnOptions) (verbs.Conn, error) {
	o, err := d.options(opts)
	if err != nil {
		return nil, err
	}
	c, err := d.dialWith(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// dialWith is Dial with resolved options (tests set depths ConnOptions
// cannot express, such as the Linux NFS/RDMA client's initiator depth 0).
func (d *device) dialWith(ctx context.Context, addr string, o *options) (*conn, error) {
	ip, port, err := splitIPPort(ctx, addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	c := newConn(d)
	c.token = d.ev.register(c)
	if c.id, err = d.ev.createID(c.token); err != nil {
		d.ev.unregister(c.token)
		return nil, err
	}
	if err := c.dial(ctx, o, ip, port, addr); err != nil {
		c.mu.Lock()
		c.gone = true
		c.mu.Unlock()
		c.destroy()
		return nil, err
	}
	return c, nil
}

func (c *conn) dial(ctx context.Context, o *options, ip net.IP, port int, addr string) error {
	if err := c.resolve(ctx, ip, port, addr); err != nil {
		return err
	}
	// Receives posted in INIT are there before the peer can send.
	if err := c.createQP(o); err != nil {
		return err
	}
	if err := c.connect(o, o.ResponderResources, o.InitiatorDepth, false); err != nil {
		return err
	}
	ev, err := c.waitSetup(ctx)
	if err != nil {
		return fmt.Errorf("ibverbs: connecting to %s: %w", addr, err)
	}
	switch ev.typ {
	case C.RDMA_CM_EVENT_CONNECT_RESPONSE:
		c.private = ev.private
		return c.establish(o)
	case C.RDMA_CM_EVENT_ESTABLISHED:
		// iWARP: the kernel's iw_cm moved the QP to RTS itself when the
		// MPA Reply arrived (there is no RTU and no CONNECT_RESPONSE);
		// the INIT above already got the remote access the iWARP CM
		// grants (Remote Write and Read).
		c.private = ev.private
		c.finishSetup()
		return nil
	case C.RDMA_CM_EVENT_REJECTED:
		if ev.consumerReject {
			return &verbs.RejectError{Addr: addr, PrivateData: ev.private}
		}
		return fmt.Errorf("ibverbs: connect to %s: %w (%v)", addr, syscall.ECONNREFUSED, ev)
	}
	return fmt.Errorf("ibverbs: connect to %s: %v", addr, ev)
}

// resolve resolves the address and the route to ip:port (addr), which
// must be reached through c's own device.
func (c *conn) resolve(ctx context.Context, ip net.IP, port int, addr string) error {
	src := ipBytes(c.dev.ip)
	dst := ipBytes(ip)
	var srcp *C.uint8_t
	if len(src) > 0 {
		srcp = (*C.uint8_t)(unsafe.Pointer(&src[0]))
	}
	if rc, err := C.gw_resolve_addr(c.id, srcp, C.int(len(src)), (*C.uint8_t)(unsafe.Pointer(&dst[0])), C.int(len(dst)), C.int(port), resolveTimeout); rc != 0 {
		return wrap("rdma_resolve_addr "+addr, err)
	}
	if err := c.expect(ctx, C.RDMA_CM_EVENT_ADDR_RESOLVED, addr); err != nil {
		return err
	}
	if rc, err := C.rdma_resolve_route(c.id, resolveTimeout); rc != 0 {
		return wrap("rdma_resolve_route "+addr, err)
	}
	if err := c.expect(ctx, C.RDMA_CM_EVENT_ROUTE_RESOLVED, addr); err != nil {
		return err
	}
	if c.id.verbs != c.dev.ctx {
		return fmt.Errorf("ibverbs: %s is reached through another RDMA device than %s", addr, c.dev.name)
	}
	return nil
}

// establish answers the CONNECT_RESPONSE of an InfiniBand or RoCE
// connection. The provider owns the QP: bring it to RTS with our own RNR
// retry count, then send the RTU.
func (c *conn) establish(o *options) error {
	// INIT again first: the QP went to INIT before the CM had a
	// connection, with no remote access at all (the CM grants
	// Remote Write, and Remote Read when the peer takes Reads, only
	// from the reply on), so without this the peer could neither
	// RDMA Write nor RDMA Read our memory (what librdmacm and the
	// kernel's rdma_cm do as well). The CM's depths are the
	// accept's answer to our request.
	if err := c.modify(C.IBV_QPS_INIT, 0, -1); err != nil {
		return err
	}
	if err := c.modify(C.IBV_QPS_RTR, 0, -1); err != nil {
		return err
	}
	if err := c.modify(C.IBV_QPS_RTS, o.RNRRetry, -1); err != nil {
		return err
	}
	if rc, err := C.rdma_establish(c.id); rc != 0 {
		return wrap("rdma_establish", err)
	}
	c.finishSetup()
	return nil
}

// expect waits for one event type during setup.
func (c *conn) expect(ctx context.Context, want C.int, addr string) error {
	ev, err := c.waitSetup(ctx)
	if err != nil {
		return fmt.Errorf("ibverbs: connecting to %s: %w", addr, err)
	}
	if ev.typ != want {
		return fmt.Errorf("ibverbs: connecting to %s: %v", addr, ev)
	}
	return nil
}

func splitIPPort(ctx context.Context, addr string) (net.IP, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, 0, fmt.Errorf("ibverbs: address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return nil, 0, fmt.Errorf("ibverbs: address %q: bad port", addr)
	}
	if host == "" {
		return nil, port, nil
	}
	ip := net.ParseIP(host)
	if ip == nil {
		ips, err := net.DefaultResolver.LookupIP(ctx, "ip", host)
		if err != nil || len(ips) == 0 {
			return nil, 0, fmt.Errorf("ibverbs: address %q: %v", addr, err)
		}
		ip = ips[0]
	}
	return ip, port, nil
}

// ipBytes is the 4- or 16-byte form of ip (empty for nil).
func ipBytes(ip net.IP) []byte {
	if ip == nil {
		return nil
	}
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return ip.To16()
}

// listener is a listening rdma_cm id. Connect requests arrive on the
// device's event loop and wait in reqs for Accept.
type listener struct {
	dev   *device
	token uint64
	id    *C.struct_rdma_cm_id
	addr  net.Addr

	mu       sync.Mutex
	closed   bool
	closedCh chan struct{}
	reqs     chan *connRequest
}

func (d *device) Listen(addr string) (verbs.Listener, error) {
	ip, port, err := splitIPPort(context.Background(), addr)
	if err != nil {
		return nil, err
	}
	if ip == nil {
		ip = d.ip
	}
	l := &listener{dev: d, closedCh: make(chan struct{}), reqs: make(chan *connRequest, backlog)}
	l.token = d.ev.register(l)
	if l.id, err = d.ev.createID(l.token); err != nil {
		d.ev.unregister(l.token)
		return nil, err
	}
	b := ipBytes(ip)
	if len(b) == 0 {
		b = make([]byte, 4) // INADDR_ANY
	}
	if rc, err := C.gw_bind_addr(l.id, (*C.uint8_t)(unsafe.Pointer(&b[0])), C.int(len(b)), C.int(port)); rc != 0 {
		l.destroy()
		return nil, wrap("rdma_bind_addr "+addr, err)
	}
	if rc, err := C.rdma_listen(l.id, backlog); rc != 0 {
		l.destroy()
		return nil, wrap("rdma_listen "+addr, err)
	}
	l.addr = addrOf(C.rdma_get_local_addr(l.id))
	return l, nil
}

func (l *listener) destroy() {
	l.dev.ev.unregister(l.token)
	C.rdma_destroy_id(l.id)
}

func (l *listener) Addr() net.Addr { return l.addr }

// cmEvent: a listening id gets no events but connect requests (routed to
// request) and device removal.
func (l *listener) cmEvent(*cmEvent) {}

// request runs on the event loop for each connect request: the new id gets
// a conn of its own (so its later events find it) and waits for Accept.
func (l *listener) request(ev *cmEvent) {
	c := newConn(l.dev)
	c.id = ev.id
	c.token = l.dev.ev.register(c)
	C.gw_set_token(ev.id, C.uint64_t(c.token))
	// The CM reports a REQ from the listener's point of view (it swaps
	// the fields): initiator_depth is the peer's responder resources (how
	// many RDMA Reads we may have outstanding against it), and
	// responder_resources the peer's initiator depth (how many it will
	// have outstanding against us). The Linux NFS/RDMA client sends
	// initiator_depth 0, responder_resources max_qp_rd_atom, which arrives
	// here as 128/0 on rxe.
	req := &connRequest{c: c, private: ev.private, ord: ev.initiatorDepth, ird: ev.responderResources,
		laddr: addrOf(C.rdma_get_local_addr(ev.id)), raddr: addrOf(C.rdma_get_peer_addr(ev.id))}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		select {
		case l.reqs <- req:
			return
		default: // backlog full
		}
	}
	_ = req.Reject(nil)
}

func (l *listener) Accept(ctx context.Context) (verbs.ConnRequest, error) {
	select {
	case r := <-l.reqs:
		return r, nil
	case <-l.closedCh:
		return nil, verbs.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops listening and refuses requests not yet accepted; connections
// already accepted go on.
func (l *listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.closedCh)
	l.mu.Unlock()
	l.destroy()
	for {
		select {
		case r := <-l.reqs:
			_ = r.Reject(nil)
		default:
			return nil
		}
	}
}

// connRequest is a connect request waiting for an answer.
type connRequest struct {
	c            *conn
	private      []byte
	ird, ord     int // the peer's initiator depth (our IRD bound) and responder resources (our ORD bound)
	laddr, raddr net.Addr
	once         sync.Once
}

func (r *connRequest) PrivateData() []byte  { return r.private }
func (r *connRequest) RemoteAddr() net.Addr { return r.raddr }
func (r *connRequest) LocalAddr() net.Addr  { return r.laddr }

var errAnswered = errors.New("ibverbs: connect request already answered")

func (r *connRequest) Accept(opts verbs.ConnOptions) (verbs.Conn, error) {
	var c *conn
	var err error = errAnswered
	r.once.Do(func() { c, err = r.accept(opts) })
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (r *connRequest) accept(opts verbs.ConnOptions) (*conn, error) {
	c := r.c
	o, err := c.dev.options(opts)
	if err == nil && c.id.verbs != c.dev.ctx {
		err = fmt.Errorf("ibverbs: connect request arrived on another device than %s", c.dev.name)
	}
	// Reads we serve are bounded by what the peer will issue (its
	// initiator depth), the Reads we issue by what the peer will serve
	// (its responder resources). The QP gets the same depths as the
	// accept reply announces.
	var ird, ord int
	if err == nil {
		ird = min(o.ResponderResources, r.ird)
		ord = min(o.InitiatorDepth, r.ord)
		err = c.createQP(o)
	}
	if err == nil {
		err = c.modify(C.IBV_QPS_RTR, 0, ird)
	}
	if err == nil {
		err = c.modify(C.IBV_QPS_RTS, o.RNRRetry, ord)
	}
	if err != nil {
		C.rdma_reject(c.id, nil, 0)
		c.abandon()
		return nil, err
	}
	c.private = r.private
	if err := c.connect(o, ird, ord, true); err != nil {
		C.rdma_reject(c.id, nil, 0)
		c.abandon()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	ev, err := c.waitSetup(ctx)
	if err != nil {
		c.abandon()
		return nil, fmt.Errorf("ibverbs: accepting %v: %w", r.raddr, err)
	}
	if ev.typ != C.RDMA_CM_EVENT_ESTABLISHED {
		c.abandon()
		return nil, fmt.Errorf("ibverbs: accepting %v: %v", r.raddr, ev)
	}
	c.finishSetup()
	return c, nil
}

func (r *connRequest) Reject(privateData []byte) error {
	err := errAnswered
	r.once.Do(func() {
		var p unsafe.Pointer
		if len(privateData) > 0 {
			p = C.CBytes(privateData)
			defer C.free(p)
		}
		rc, e := C.rdma_reject(r.c.id, p, C.uint8_t(len(privateData)))
		err = nil
		if rc != 0 {
			err = wrap("rdma_reject", e)
		}
		r.c.abandon()
	})
	return err
}

// abandon destroys a connection that never became established.
func (c *conn) abandon() {
	c.mu.Lock()
	c.gone = true
	c.state.Store(stateEnded)
	c.mu.Unlock()
	c.destroy()
}
