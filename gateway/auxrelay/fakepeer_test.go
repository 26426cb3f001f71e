package auxrelay

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"

	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/tcprpc"
)

// fakePeer is a small real-protocol RPC server (TCP and UDP on one port)
// standing in for a filer's NLM or a client's lockd/statd/rpcbind. handle
// returns the results of a call, or nil for a void reply.
type fakePeer struct {
	addr  netip.AddrPort
	calls chan recvCall
}

type recvCall struct {
	h         oncrpc.CallHeader
	args      []byte
	transport string
	from      netip.AddrPort
}

func startFakePeer(t *testing.T, ip string, port int, handle func(c recvCall) []byte) *fakePeer {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.ParseIP(ip), Port: port})
	if err != nil {
		t.Fatalf("fake peer listen: %v", err)
	}
	bound := ln.Addr().(*net.TCPAddr).AddrPort()
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(bound))
	if err != nil {
		ln.Close()
		t.Fatalf("fake peer udp: %v", err)
	}
	p := &fakePeer{addr: bound, calls: make(chan recvCall, 64)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		pc.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	answer := func(msg []byte, transport string, from netip.AddrPort) []byte {
		var h oncrpc.CallHeader
		n, err := h.Decode(msg)
		if err != nil {
			return nil
		}
		c := recvCall{h: h, args: append([]byte(nil), msg[n:]...), transport: transport, from: from}
		res := handle(c)
		select {
		case p.calls <- c:
		default: // nobody is looking (rpcbind queries)
		}
		return successReply(h.XID, res)
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				rr := tcprpc.NewRecordReader(conn, nil)
				rw := tcprpc.NewRecordWriter(conn, nil)
				for {
					msg, err := rr.ReadRecord(nil)
					if err != nil {
						if !errors.Is(err, io.EOF) {
							conn.Close()
						}
						return
					}
					if reply := answer(msg, "tcp", conn.RemoteAddr().(*net.TCPAddr).AddrPort()); reply != nil {
						_ = rw.WriteRecord(reply, nil, nil)
					}
				}
			}()
		}
	}()
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			n, from, err := pc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if reply := answer(append([]byte(nil), buf[:n]...), "udp", from); reply != nil {
				_, _ = pc.WriteToUDPAddrPort(reply, from)
			}
		}
	}()
	return p
}

// fakeClient is an NFS client host at ip: an rpcbind on rpcbPort that
// knows its lockd/statd, and one listener playing both.
type fakeClient struct {
	ip      string
	service *fakePeer
	rpcbind *fakePeer
}

func startFakeClient(t *testing.T, ip string, rpcbPort int) *fakeClient {
	c := &fakeClient{ip: ip}
	c.service = startFakePeer(t, ip, 0, func(rc recvCall) []byte {
		if rc.h.Prog == progNLM && rc.h.Proc == nlmGranted {
			// nlm4_res { cookie, NLM4_GRANTED }: the client accepts.
			a, _ := decodeNLMArgs(rc.h.Vers, rc.h.Proc, rc.args, 0)
			var w xdrWriter
			w.opaque(a.Cookie)
			w.u32(nlm4Granted)
			return w.b
		}
		return nil
	})
	c.rpcbind = startFakePeer(t, ip, rpcbPort, func(rc recvCall) []byte {
		var w xdrWriter
		m, err := decodePmapMapping(rc.args)
		if rc.h.Prog == progRPCBind && rc.h.Vers == 2 && rc.h.Proc == 3 && err == nil &&
			(m.Prog == progNLM || m.Prog == progNSM) {
			w.u32(uint32(c.service.addr.Port()))
		} else {
			w.u32(0)
		}
		return w.b
	})
	return c
}
