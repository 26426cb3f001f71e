package auxrelay

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"github.com/rdmagw/rdmagw/tcprpc"
)

// outbound holds the relay's connections to the filer and to clients
// (callbacks): one TCP connection per destination, shared by every call
// to it, and one UDP socket for all UDP destinations. Replies come back
// on them and are matched by XID in the pending table; calls that arrive
// on them (a peer calling back on our connection) are handled like
// inbound calls.
type outbound struct {
	r *Relay

	mu  sync.Mutex
	tcp map[string]*tcpPeer
	udp *net.UDPConn
}

type tcpPeer struct {
	*tcpSink
	role string
	dest netip.AddrPort
}

func newOutbound(r *Relay) *outbound { return &outbound{r: r, tcp: map[string]*tcpPeer{}} }

// send delivers msg to dest over network ("tcp" or "udp"). role says who
// dest is ("filer" or "callback") for metrics and source-port policy.
// A TCP connection that fails on write is dropped and dialled once more.
func (o *outbound) send(ctx context.Context, network, role string, dest netip.AddrPort, msg []byte) error {
	if network == "udp" {
		pc, err := o.udpSocket(ctx, role)
		if err != nil {
			return err
		}
		_, err = pc.WriteToUDPAddrPort(msg, dest)
		return err
	}
	var err error
	for range 2 {
		var p *tcpPeer
		if p, err = o.tcpTo(ctx, role, dest); err != nil {
			return err
		}
		if err = p.sendReply(msg); err == nil {
			return nil
		}
		o.r.log.Debug("write to peer failed, redialling", "peer", dest.String(), "error", err)
	}
	return err
}

func (o *outbound) tcpTo(ctx context.Context, role string, dest netip.AddrPort) (*tcpPeer, error) {
	key := role + "/" + dest.String()
	o.mu.Lock()
	if p := o.tcp[key]; p != nil {
		o.mu.Unlock()
		return p, nil
	}
	o.mu.Unlock()
	// Dial unlocked: a dead client must not hold up calls to the filer.
	conn, err := o.dial(ctx, role, dest)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if p := o.tcp[key]; p != nil { // another call dialled meanwhile
		conn.Close()
		return p, nil
	}
	if !o.r.track(conn) {
		conn.Close()
		return nil, net.ErrClosed
	}
	p := &tcpPeer{role: role, dest: dest}
	p.tcpSink = newTCPSink(conn, func() { o.drop(key, p) })
	o.tcp[key] = p
	o.r.m.Connections(role, 1)
	o.r.log.Debug("connected", "role", role, "peer", dest.String(), "local", conn.LocalAddr().String())
	o.r.wg.Add(1)
	go o.readTCP(key, p)
	return p, nil
}

// drop forgets p and closes its connection.
func (o *outbound) drop(key string, p *tcpPeer) {
	o.mu.Lock()
	if o.tcp[key] == p {
		delete(o.tcp, key)
	}
	o.mu.Unlock()
	p.conn.Close()
}

func (o *outbound) readTCP(key string, p *tcpPeer) {
	defer o.r.wg.Done()
	defer o.r.untrack(p.conn)
	defer o.r.m.Connections(p.role, -1)
	defer o.drop(key, p)
	in := &inbound{sink: p, transport: "tcp", remote: p.dest, local: addrPortOf(p.conn.LocalAddr()).Addr().Unmap()}
	rr := tcprpc.NewRecordReader(p.conn, &tcprpc.ReaderConfig{MaxRecord: o.r.cfg.MaxRecord})
	for {
		msg, err := rr.ReadRecord(nil)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				o.r.m.Event(eventRecordError)
				o.r.log.Info("connection closed on error", "role", p.role, "peer", p.dest.String(), "error", err)
			}
			return
		}
		o.r.handleMessage(msg, in)
	}
}

func (o *outbound) udpSocket(ctx context.Context, role string) (*net.UDPConn, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.udp != nil {
		return o.udp, nil
	}
	var pc *net.UDPConn
	err := o.bindLocal(role, func(la netip.AddrPort) error {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(la))
		pc = c
		return err
	})
	if err != nil {
		return nil, err
	}
	if !o.r.track(pc) {
		pc.Close()
		return nil, net.ErrClosed
	}
	o.udp = pc
	in := &inbound{transport: "udp", local: addrPortOf(pc.LocalAddr()).Addr().Unmap()}
	o.r.wg.Add(1)
	go func() {
		defer o.r.wg.Done()
		defer o.r.untrack(pc)
		buf := make([]byte, 65536)
		for {
			n, peer, err := pc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			msg := append([]byte(nil), buf[:n]...)
			cin := *in
			cin.remote = peer
			cin.sink = &udpSink{pc: pc, peer: peer, name: "udp/" + peer.String()}
			o.r.handleMessage(msg, &cin)
		}
	}()
	return pc, nil
}

func (o *outbound) dial(ctx context.Context, role string, dest netip.AddrPort) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, o.r.cfg.ConnectTimeout)
	defer cancel()
	var conn net.Conn
	err := o.bindLocal(role, func(la netip.AddrPort) error {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(la)}
		if !la.IsValid() {
			d.LocalAddr = nil
		}
		c, err := d.DialContext(ctx, "tcp", dest.String())
		conn = c
		return err
	})
	return conn, err
}

// bindLocal calls try with the local address to use: the relay's listen
// IP (callbacks must come from the address clients know), port 0, or for
// the filer with ReservedSourcePort a port in 600..1023, tried in turn
// from a random start until one is free.
func (o *outbound) bindLocal(role string, try func(netip.AddrPort) error) error {
	ip := o.r.listenIP
	if !o.r.cfg.ReservedSourcePort || role != "filer" {
		if ip.IsUnspecified() {
			return try(netip.AddrPort{})
		}
		return try(netip.AddrPortFrom(ip, 0))
	}
	const lo, hi = 600, 1024
	start := lo + rand.IntN(hi-lo)
	var err error
	for i := range hi - lo {
		port := uint16(lo + (start-lo+i)%(hi-lo))
		if err = try(netip.AddrPortFrom(ip, port)); err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			return err
		}
	}
	return err
}
