package forward_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
)

// rdma.mpa_crc decides the C flag of the gateway's MPA reply to a client
// that asks for no CRCs (RFC 5044 §7.1: the flag is the OR of both
// sides' wishes), the pure-Go provider's answer read off the wire.
func TestForwardMPACRC(t *testing.T) {
	// A backend that accepts: the gateway connects to it before it answers.
	be, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := be.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	defer func() {
		be.Close()
		for c := range accepted {
			c.Close()
		}
	}()
	for _, crc := range []bool{true, false} {
		gw := startGateway(t, be.Addr().String(), func(c *gateway.Config) { c.RDMA.MPACRC = crc })
		c, err := net.Dial("tcp", gw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		// An MPA request, revision 1, C=0, no private data.
		req := append([]byte("MPA ID Req Frame"), 0, 1, 0, 0)
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		rep := make([]byte, 20)
		if _, err := io.ReadFull(c, rep); err != nil {
			t.Fatalf("mpa_crc %v: MPA reply: %v", crc, err)
		}
		c.Close()
		if string(rep[:16]) != "MPA ID Rep Frame" {
			t.Fatalf("mpa_crc %v: reply key %q", crc, rep[:16])
		}
		if got := rep[16]&0x40 != 0; got != crc {
			t.Errorf("mpa_crc %v: the reply's C flag is %v", crc, got)
		}
	}
}
