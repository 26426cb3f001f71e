package reverse_test

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
)

// A call whose every attempt breaks the RDMA connection (knfsd 6.1 sends
// a reply too large for the receive inline, the receive fails with a
// length error and the connection ends) is sent on at most three
// connections, then answered SYSTEM_ERR: the reverse gateway does not
// loop reconnecting and resending forever, and the link recovers for
// the next call.
func TestReversePoisonCallAnsweredAfterThreeConnectionLosses(t *testing.T) {
	noLeaks(t, func(t *testing.T) {
		var srv *fakeServer
		srv = startFakeServer(t, 32, func(c *fakeCall) (fakeAction, []byte) {
			if c.prog == progNFS && c.vers == 3 && c.proc == 1 { // the poison: GETATTR
				go srv.closeConns()
				return fakeIgnore, nil
			}
			return defaultFakeHandler(c)
		})
		rev, _ := startReverseLogged(t, srv.addr(), func(c *gateway.Config) {
			c.Backend.ReconnectInitial = 10 * time.Millisecond
		})
		cl := dialRaw(t, rev.Addr().String())
		const xid = 0x50150001
		if err := cl.send(rpcCall(xid, progNFS, 3, 1, xdrOpaque(nil, []byte("fh")))); err != nil {
			t.Fatal(err)
		}
		rep, err := cl.recv(30 * time.Second)
		if err != nil {
			t.Fatalf("no answer to a call that breaks every connection: %v", err)
		}
		// xid, REPLY, MSG_ACCEPTED, AUTH_NONE verifier, SYSTEM_ERR (5)
		if len(rep) < 24 || binary.BigEndian.Uint32(rep) != xid || binary.BigEndian.Uint32(rep[20:]) != 5 {
			t.Fatalf("answer % x, want SYSTEM_ERR for xid %#x", rep, xid)
		}
		sent := 0
		for _, c := range srv.seen() {
			if c.xid == xid {
				sent++
			}
		}
		if sent != 3 {
			t.Errorf("the server got the call %d times, want 3 (one per connection)", sent)
		}
		if v := gwtest.Metric(t, rev.Metrics(), "rdmagw_gateway_error_replies_total", "reason", "connection_lost"); v != 1 {
			t.Errorf("error replies (connection_lost) = %v, want 1", v)
		}
		// The link recovers: a NULL call is answered.
		const xid2 = 0x50150002
		if err := cl.send(rpcCall(xid2, progNFS, 3, 0, nil)); err != nil {
			t.Fatal(err)
		}
		rep, err = cl.recv(30 * time.Second)
		if err != nil {
			t.Fatalf("NULL after the poison call: %v", err)
		}
		if want := rpcAccepted(xid2, nil); !bytes.Equal(rep, want) {
			t.Errorf("NULL after the poison call: % x, want % x", rep, want)
		}
	})
}
