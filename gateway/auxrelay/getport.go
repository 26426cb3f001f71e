package auxrelay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/xdr"
)

// errNotRegistered: the peer's rpcbind knows no such program/version.
var errNotRegistered = errors.New("program not registered with the peer's rpcbind")

// pmapGetPort asks the rpcbind at server (PMAP v2 GETPORT, which every
// rpcbind and portmapper answers) for prog/vers over network, querying
// over network too. local (may be invalid) is the source address.
func pmapGetPort(ctx context.Context, network string, server netip.AddrPort, local netip.Addr, prog, vers uint32, timeout time.Duration) (int, error) {
	prot := uint32(ipprotoTCP)
	if network == "udp" {
		prot = ipprotoUDP
	}
	var w xdrWriter
	xid := uint32(time.Now().UnixNano())
	h := oncrpc.CallHeader{XID: xid, RPCVers: oncrpc.RPCVersion, Prog: progRPCBind, Vers: 2, Proc: 3,
		Cred: oncrpc.NullAuth, Verf: oncrpc.NullAuth}
	call := make([]byte, h.EncodedLen())
	e := xdr.NewEncoder(call)
	_ = h.Encode(&e)
	w.b = call
	w.u32(prog)
	w.u32(vers)
	w.u32(prot)
	w.u32(0)

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := net.Dialer{}
	if local.IsValid() && !local.IsUnspecified() {
		if network == "udp" {
			d.LocalAddr = &net.UDPAddr{IP: local.AsSlice()}
		} else {
			d.LocalAddr = &net.TCPAddr{IP: local.AsSlice()}
		}
	}
	conn, err := d.DialContext(ctx, network, server.String())
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	var reply []byte
	if network == "udp" {
		reply, err = udpExchange(ctx, conn, w.b, xid)
	} else {
		rw := tcprpc.NewRecordWriter(conn, nil)
		if err = rw.WriteRecord(w.b, nil, nil); err == nil {
			reply, err = tcprpc.NewRecordReader(conn, &tcprpc.ReaderConfig{MaxRecord: 4096}).ReadRecord(nil)
		}
	}
	if err != nil {
		return 0, err
	}
	return parseGetPortReply(reply, xid)
}

// udpExchange sends call and waits for the reply with xid, resending
// every second (UDP may lose either).
func udpExchange(ctx context.Context, conn net.Conn, call []byte, xid uint32) ([]byte, error) {
	buf := make([]byte, 4096)
	for {
		if _, err := conn.Write(call); err != nil {
			return nil, err
		}
		wait := time.Now().Add(time.Second)
		if dl, ok := ctx.Deadline(); ok && dl.Before(wait) {
			wait = dl
		}
		_ = conn.SetReadDeadline(wait)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil {
					break // resend
				}
				return nil, err
			}
			if n >= 4 && getXID(buf) == xid {
				return buf[:n], nil
			}
		}
	}
}

func parseGetPortReply(reply []byte, xid uint32) (int, error) {
	var h oncrpc.ReplyHeader
	n, err := h.Decode(reply)
	if err != nil {
		return 0, err
	}
	if h.XID != xid {
		return 0, fmt.Errorf("rpcbind reply xid %#x, want %#x", h.XID, xid)
	}
	if h.Stat != oncrpc.MsgAccepted || h.AcceptStat != oncrpc.Success {
		return 0, fmt.Errorf("rpcbind GETPORT refused (reply_stat %d, accept_stat %d)", h.Stat, h.AcceptStat)
	}
	d := xdr.NewDecoder(reply[n:])
	port, err := d.Uint32()
	if err != nil {
		return 0, err
	}
	if port == 0 || port > 65535 {
		return 0, errNotRegistered
	}
	return int(port), nil
}

// portCache remembers looked-up ports for a while.
type portCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[portKey]portEntry
}

type portKey struct {
	ip         netip.Addr
	prog, vers uint32
	network    string
}

type portEntry struct {
	port int
	at   time.Time
}

func (c *portCache) get(k portKey, now time.Time) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || now.Sub(e.at) > c.ttl {
		return 0, false
	}
	return e.port, true
}

func (c *portCache) put(k portKey, port int, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) > 4096 { // clients come and go: start over rather than grow
		clear(c.m)
	}
	c.m[k] = portEntry{port, now}
}

func (c *portCache) forget(k portKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}
