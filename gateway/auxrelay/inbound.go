package auxrelay

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"

	"github.com/rdmagw/rdmagw/tcprpc"
)

// inbound describes where a call came from.
type inbound struct {
	sink      replySink
	transport string // "tcp" or "udp"
	remote    netip.AddrPort
	local     netip.Addr
}

// netid is the rpcbind netid of the call's transport.
func (in *inbound) netid() string {
	if in.local.Is4() || in.local.Is4In6() {
		return in.transport
	}
	return in.transport + "6"
}

// tcpSink writes records to one TCP connection; several goroutines may
// reply on it at once.
type tcpSink struct {
	conn  net.Conn
	name  string
	mu    sync.Mutex
	w     *tcprpc.RecordWriter
	onErr func()
}

func newTCPSink(conn net.Conn, onErr func()) *tcpSink {
	return &tcpSink{conn: conn, name: "tcp/" + conn.RemoteAddr().String(), w: tcprpc.NewRecordWriter(conn, nil), onErr: onErr}
}

func (s *tcpSink) id() string { return s.name }

func (s *tcpSink) sendReply(msg []byte) error {
	s.mu.Lock()
	err := s.w.WriteRecord(msg, nil, nil)
	s.mu.Unlock()
	if err != nil && s.onErr != nil {
		s.onErr()
	}
	return err
}

// udpSink answers one UDP peer from the socket the call arrived on.
type udpSink struct {
	pc   *net.UDPConn
	peer netip.AddrPort
	name string
}

func (s *udpSink) id() string { return s.name }

func (s *udpSink) sendReply(msg []byte) error {
	_, err := s.pc.WriteToUDPAddrPort(msg, s.peer)
	return err
}

func addrPortOf(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.AddrPort()
	case *net.UDPAddr:
		return a.AddrPort()
	}
	return netip.AddrPort{}
}

// serveTCP accepts client connections on ln until it is closed.
func (r *Relay) serveTCP(ctx context.Context, ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				r.log.Warn("accept failed", "listener", ln.Addr().String(), "error", err)
			}
			return
		}
		if !r.track(conn) {
			conn.Close()
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer r.untrack(conn)
			r.m.Connections("client", 1)
			defer r.m.Connections("client", -1)
			r.readCalls(conn)
		}()
	}
}

// readCalls reads records from a client connection and handles each.
func (r *Relay) readCalls(conn net.Conn) {
	sink := newTCPSink(conn, func() { conn.Close() })
	in := &inbound{sink: sink, transport: "tcp", remote: addrPortOf(conn.RemoteAddr()), local: addrPortOf(conn.LocalAddr()).Addr().Unmap()}
	rr := tcprpc.NewRecordReader(conn, &tcprpc.ReaderConfig{MaxRecord: r.cfg.MaxRecord})
	r.log.Debug("client connected", "peer", in.remote.String(), "local", conn.LocalAddr().String())
	for {
		msg, err := rr.ReadRecord(nil)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				r.m.Event(eventRecordError)
				r.log.Info("client connection closed on error", "peer", in.remote.String(), "error", err)
			} else {
				r.log.Debug("client disconnected", "peer", in.remote.String())
			}
			return
		}
		r.handleMessage(msg, in)
	}
}

// maxUDPInFlight bounds the goroutines handling UDP calls at once (a call
// may wait for a port lookup or a TCP connect to the filer).
const maxUDPInFlight = 64

// serveUDP reads datagrams from pc until it is closed.
func (r *Relay) serveUDP(ctx context.Context, pc *net.UDPConn) {
	local := addrPortOf(pc.LocalAddr()).Addr().Unmap()
	sem := make(chan struct{}, maxUDPInFlight)
	buf := make([]byte, 65536)
	for {
		n, peer, err := pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				r.log.Warn("udp read failed", "listener", pc.LocalAddr().String(), "error", err)
			}
			return
		}
		msg := append([]byte(nil), buf[:n]...)
		in := &inbound{sink: &udpSink{pc: pc, peer: peer, name: "udp/" + peer.String()}, transport: "udp", remote: peer, local: local}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer func() { <-sem }()
			r.handleMessage(msg, in)
		}()
	}
}
