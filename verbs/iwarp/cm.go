package iwarp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// Connection management: TCP connect/accept, then the MPA Request/Reply
// exchange (mpa.go) that carries CRC and RFC 6581 IRD/ORD negotiation and
// the ULP's private data (for RPC-over-RDMA the RFC 8797 block).

// negotiated is what connection setup decided.
type negotiated struct {
	crc       bool
	ird, ord  int
	private   []byte // the peer's ULP private data
	sendRTR   uint8  // initiator: 0, rtrWrite or rtrRead
	awaitRTR  bool   // responder in peer-to-peer mode
	initiator bool
}

const (
	rtrWrite = 1
	rtrRead  = 2
)

func depthOr(v int) int {
	if v <= 0 {
		return defaultDepth
	}
	if v > mpaIRDORDMask {
		return mpaIRDORDMask
	}
	return v
}

func (d *device) Dial(ctx context.Context, addr string, opts verbs.ConnOptions) (verbs.Conn, error) {
	if err := checkOptions(&opts); err != nil {
		return nil, err
	}
	// Receives go on before the MPA Request leaves: the responder may
	// send as soon as it has answered.
	rq, err := initialRecv(&opts)
	if err != nil {
		return nil, err
	}
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	var nd net.Dialer
	if d.local != nil {
		nd.LocalAddr = &net.TCPAddr{IP: d.local}
	}
	nc, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("iwarp: dial %s: %w", addr, err)
	}
	tc := nc.(*net.TCPConn)
	stop := context.AfterFunc(ctx, func() { tc.SetDeadline(time.Unix(1, 0)) })
	neg, err := d.initiate(tc, addr, &opts)
	if !stop() {
		err = errors.Join(err, ctx.Err())
	}
	if err != nil {
		tc.Close()
		return nil, err
	}
	tc.SetDeadline(time.Time{})
	return newConn(d, tc, &opts, neg, rq)
}

func (d *device) initiate(tc *net.TCPConn, addr string, opts *verbs.ConnOptions) (*negotiated, error) {
	ird, ord := depthOr(opts.ResponderResources), depthOr(opts.InitiatorDepth)
	req := mpaFrame{CRC: !d.cfg.DisableCRC, Rev: uint8(d.cfg.MPARevision), Private: opts.PrivateData}
	if req.Rev >= 2 {
		req.Enhanced = true
		req.IRD, req.ORD = uint16(ird), uint16(ord)
		if d.cfg.PeerToPeer {
			req.PeerToPeer, req.RTRWrite, req.RTRRead = true, true, true
		}
	}
	b, err := appendMPAFrame(nil, &req)
	if err != nil {
		return nil, err
	}
	if _, err := tc.Write(b); err != nil {
		return nil, fmt.Errorf("iwarp: sending MPA Request to %s: %w", addr, err)
	}
	var rep mpaFrame
	if err := readMPAFrame(tc, &rep); err != nil {
		return nil, fmt.Errorf("iwarp: MPA Reply from %s: %w", addr, err)
	}
	if !rep.Reply {
		return nil, fmt.Errorf("%w: %s answered with a Request frame", ErrMPA, addr)
	}
	if rep.Reject {
		return nil, &verbs.RejectError{Addr: addr, PrivateData: append([]byte(nil), rep.Private...)}
	}
	if rep.Markers {
		return nil, fmt.Errorf("%w: %s requires MPA markers, which this provider does not send", ErrMPA, addr)
	}
	if rep.Rev > req.Rev {
		return nil, fmt.Errorf("%w: %s replied with revision %d to our %d", ErrMPA, addr, rep.Rev, req.Rev)
	}
	neg := &negotiated{crc: req.CRC || rep.CRC, ird: ird, ord: ord, initiator: true,
		private: append([]byte(nil), rep.Private...)}
	if rep.Enhanced {
		neg.ord = min(ord, int(rep.IRD))
		if req.PeerToPeer && rep.PeerToPeer {
			switch {
			case rep.RTRWrite:
				neg.sendRTR = rtrWrite
			case rep.RTRRead && neg.ord > 0:
				neg.sendRTR = rtrRead
			default:
				return nil, fmt.Errorf("%w: %s chose no ready-to-receive message we offered", ErrMPA, addr)
			}
		}
	}
	return neg, nil
}

// initialRecv creates a connection's own receive queue (none with an SRQ)
// and posts o.InitialRecv on it, before the connection exists, so the
// peer's first Send always finds a receive.
func initialRecv(o *verbs.ConnOptions) (*recvQueue, error) {
	if o.SRQ != nil {
		return nil, nil
	}
	q := newRecvQueue(o.MaxRecvWR, o.MaxSGE)
	if o.InitialRecv != nil {
		if err := q.post(o.PD.(*pd), o.InitialRecv); err != nil {
			return nil, fmt.Errorf("iwarp: posting ConnOptions.InitialRecv: %w", err)
		}
	}
	return q, nil
}

func checkOptions(o *verbs.ConnOptions) error {
	if o.PD == nil || o.SendCQ == nil || o.RecvCQ == nil {
		return errors.New("iwarp: ConnOptions needs PD, SendCQ and RecvCQ")
	}
	if _, ok := o.PD.(*pd); !ok {
		return fmt.Errorf("iwarp: PD %T is not from the iwarp provider", o.PD)
	}
	if _, ok := o.SendCQ.(*cq); !ok {
		return fmt.Errorf("iwarp: SendCQ %T is not from the iwarp provider", o.SendCQ)
	}
	if _, ok := o.RecvCQ.(*cq); !ok {
		return fmt.Errorf("iwarp: RecvCQ %T is not from the iwarp provider", o.RecvCQ)
	}
	if o.SRQ != nil {
		s, ok := o.SRQ.(*srq)
		if !ok {
			return fmt.Errorf("iwarp: SRQ %T is not from the iwarp provider", o.SRQ)
		}
		if s.pd != o.PD.(*pd) {
			return errors.New("iwarp: SRQ belongs to another PD")
		}
	}
	if len(o.PrivateData) > mpaMaxULPDUData {
		return fmt.Errorf("iwarp: %d bytes of private data, at most %d fit", len(o.PrivateData), mpaMaxULPDUData)
	}
	if o.MaxSendWR <= 0 {
		o.MaxSendWR = defaultQueue
	}
	if o.MaxRecvWR <= 0 {
		o.MaxRecvWR = defaultQueue
	}
	if o.MaxSGE <= 0 {
		o.MaxSGE = defaultMaxSGE
	}
	return nil
}

// listener accepts TCP connections and runs the responder's half of the
// MPA exchange on each before handing it to Accept.
type listener struct {
	d     *device
	ln    *net.TCPListener
	reqs  chan *connRequest
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	errMu sync.Mutex
	err   error
}

func (d *device) Listen(addr string) (verbs.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("iwarp: listen %s: %w", addr, err)
	}
	l := &listener{d: d, ln: ln.(*net.TCPListener), reqs: make(chan *connRequest, 64), done: make(chan struct{})}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

func (l *listener) acceptLoop() {
	defer l.wg.Done()
	for {
		nc, err := l.ln.AcceptTCP()
		if err != nil {
			l.errMu.Lock()
			l.err = err
			l.errMu.Unlock()
			l.Close()
			return
		}
		l.wg.Add(1)
		go l.handshake(nc)
	}
}

func (l *listener) handshake(tc *net.TCPConn) {
	defer l.wg.Done()
	tc.SetDeadline(time.Now().Add(l.d.cfg.HandshakeTimeout))
	var f mpaFrame
	if err := readMPAFrame(tc, &f); err != nil || f.Reply {
		tc.Close()
		return
	}
	r := &connRequest{l: l, tc: tc, req: f}
	select {
	case l.reqs <- r:
	case <-l.done:
		tc.Close()
	}
}

func (l *listener) Accept(ctx context.Context) (verbs.ConnRequest, error) {
	select {
	case r := <-l.reqs:
		return r, nil
	case <-l.done:
		return nil, verbs.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *listener) Addr() net.Addr { return l.ln.Addr() }

func (l *listener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.ln.Close()
		for {
			select {
			case r := <-l.reqs:
				r.tc.Close()
				continue
			default:
			}
			break
		}
	})
	return nil
}

// connRequest is a received MPA Request not yet answered.
type connRequest struct {
	l        *listener
	tc       *net.TCPConn
	req      mpaFrame
	mu       sync.Mutex
	answered bool
}

func (r *connRequest) PrivateData() []byte  { return r.req.Private }
func (r *connRequest) RemoteAddr() net.Addr { return r.tc.RemoteAddr() }
func (r *connRequest) LocalAddr() net.Addr  { return r.tc.LocalAddr() }

func (r *connRequest) answer() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.answered {
		return errors.New("iwarp: connection request already answered")
	}
	r.answered = true
	return nil
}

func (r *connRequest) Reject(privateData []byte) error {
	if err := r.answer(); err != nil {
		return err
	}
	defer r.tc.Close()
	rep := mpaFrame{Reply: true, Reject: true, Rev: min(r.req.Rev, uint8(r.l.d.cfg.MPARevision)), Private: privateData}
	if rep.Rev >= 2 && r.req.Enhanced {
		rep.Enhanced = true
	}
	b, err := appendMPAFrame(nil, &rep)
	if err != nil {
		return err
	}
	if _, err := r.tc.Write(b); err != nil {
		return fmt.Errorf("iwarp: sending MPA reject to %s: %w", r.tc.RemoteAddr(), err)
	}
	return nil
}

func (r *connRequest) Accept(opts verbs.ConnOptions) (verbs.Conn, error) {
	if err := checkOptions(&opts); err != nil {
		r.Reject(nil)
		return nil, err
	}
	// Receives go on before the MPA Reply leaves: the initiator may send
	// as soon as it has read it.
	rq, err := initialRecv(&opts)
	if err != nil {
		r.Reject(nil)
		return nil, err
	}
	if err := r.answer(); err != nil {
		return nil, err
	}
	cfg := &r.l.d.cfg
	ird, ord := depthOr(opts.ResponderResources), depthOr(opts.InitiatorDepth)
	rep := mpaFrame{Reply: true, CRC: r.req.CRC || !cfg.DisableCRC, Rev: min(r.req.Rev, uint8(cfg.MPARevision)), Private: opts.PrivateData}
	neg := &negotiated{crc: rep.CRC, ird: ird, ord: ord, private: append([]byte(nil), r.req.Private...)}
	if r.req.Markers {
		rep.Reject = true
	}
	if rep.Rev >= 2 && r.req.Enhanced {
		rep.Enhanced = true
		neg.ord = min(ord, int(r.req.IRD))
		rep.IRD, rep.ORD = uint16(ird), uint16(neg.ord)
		if r.req.PeerToPeer {
			switch {
			case r.req.RTRWrite:
				rep.PeerToPeer, rep.RTRWrite, neg.awaitRTR = true, true, true
			case r.req.RTRRead:
				rep.PeerToPeer, rep.RTRRead, neg.awaitRTR = true, true, true
			}
		}
	}
	b, err := appendMPAFrame(nil, &rep)
	if err == nil {
		r.tc.SetDeadline(time.Now().Add(cfg.HandshakeTimeout))
		_, err = r.tc.Write(b)
	}
	if err == nil && rep.Reject {
		err = fmt.Errorf("%w: %s requires MPA markers, which this provider does not send", ErrMPA, r.tc.RemoteAddr())
	}
	if err != nil {
		r.tc.Close()
		return nil, fmt.Errorf("iwarp: accepting %s: %w", r.tc.RemoteAddr(), err)
	}
	r.tc.SetDeadline(time.Time{})
	return newConn(r.l.d, r.tc, &opts, neg, rq)
}
