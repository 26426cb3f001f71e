package forward_test

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsmem"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/verbs/iwarp"
)

// rdma.send_completion decides whether the gateway's pure-Go provider
// sends a zero-length RDMA Read (a fence proving placement) after its
// replies: read off the wire between a client and the gateway, counting
// the untagged RDMA Read Requests the gateway sends. The client completes
// on transmit (as Linux siw does) and so sends no fences of its own.
func TestForwardSendCompletion(t *testing.T) {
	mem := nfsmem.New(nfsmem.Config{})
	addr, err := mem.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	const calls = 20
	for _, v := range []string{gateway.SendCompletionPlacement, gateway.SendCompletionTransmit} {
		gw := startGateway(t, addr.String(), func(c *gateway.Config) { c.RDMA.SendCompletion = v })
		var reads atomic.Int64
		counted := make(chan struct{}) // the gateway's side read to its end
		var once sync.Once
		proxy := startTCPServer(t, func(c net.Conn) {
			up, err := net.Dial("tcp", gw.Addr().String())
			if err != nil {
				c.Close()
				return
			}
			// The client's end is passed on as a half-close, so that the
			// count reads what the gateway sent to its last byte (a fence
			// after the last reply may follow it) before the gateway closes.
			go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite() }()
			go func() {
				countReadRequests(up, c, &reads)
				c.Close()
				up.Close()
				once.Do(func() { close(counted) })
			}()
		})
		ctx := nfstest.Ctx(t)
		dev, err := iwarp.New(iwarp.Config{CompleteOnTransmit: true}).Open("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		tr, err := nfsclient.DialRDMA(ctx, dev, proxy.ln.Addr().String(), rdmarpc.RequesterConfig{Credits: 8})
		if err != nil {
			t.Fatal(err)
		}
		for range calls {
			if _, err := tr.Call(ctx, ulb.ProgNFS, 3, 0, nil); err != nil {
				t.Fatalf("send_completion %s: NFS NULL: %v", v, err)
			}
		}
		tr.Close()
		dev.Close()
		select {
		case <-counted:
		case <-time.After(10 * time.Second):
			t.Fatalf("send_completion %s: the gateway's side of the connection did not end", v)
		}
		n := reads.Load()
		if v == gateway.SendCompletionTransmit && n != 0 {
			t.Errorf("send_completion transmit: the gateway sent %d RDMA Read Requests for %d calls, want none", n, calls)
		}
		if v == gateway.SendCompletionPlacement && n < calls {
			t.Errorf("send_completion placement: the gateway sent %d RDMA Read Requests for %d calls, want a fence after each reply", n, calls)
		}
	}
}

// countReadRequests copies the gateway's side of an MPA connection from
// src to dst and counts the untagged RDMA Read Requests in it: after the
// MPA Reply (20 bytes and its private data), FPDUs of a 2-byte ULPDU
// length, the DDP/RDMAP header, padding to 4 bytes and a 4-byte CRC
// (the gateway asks for CRCs; markers are never used).
func countReadRequests(src io.Reader, dst io.Writer, reads *atomic.Int64) {
	var rep [20]byte
	if _, err := io.ReadFull(src, rep[:]); err != nil {
		return
	}
	pd := make([]byte, binary.BigEndian.Uint16(rep[18:]))
	if _, err := io.ReadFull(src, pd); err != nil {
		return
	}
	dst.Write(rep[:])
	dst.Write(pd)
	buf := make([]byte, 1<<17)
	for {
		if _, err := io.ReadFull(src, buf[:2]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(buf))
		rest := (2+n+3)&^3 - 2 + 4
		if _, err := io.ReadFull(src, buf[2:2+rest]); err != nil {
			return
		}
		// DDP control: T (tagged) is the top bit; RDMAP opcode: the low
		// nibble of the next byte (1: Read Request).
		if n >= 2 && buf[2]&0x80 == 0 && buf[3]&0x0f == 1 {
			reads.Add(1)
		}
		if _, err := dst.Write(buf[:2+rest]); err != nil {
			return
		}
	}
}
