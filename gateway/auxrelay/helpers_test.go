package auxrelay

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/internal/nfstest/ganesha"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/xdr"
)

// rpcClient is a minimal ONC RPC client for the tests, over TCP or UDP,
// optionally bound to a local IP (so tests can play several clients on
// 127.0.0.x).
type rpcClient struct {
	network string
	conn    net.Conn
	rr      *tcprpc.RecordReader
	rw      *tcprpc.RecordWriter
	xid     uint32
}

func dialRPC(t *testing.T, network, localIP string, addr netip.AddrPort) *rpcClient {
	t.Helper()
	d := net.Dialer{Timeout: 3 * time.Second}
	if localIP != "" {
		if network == "udp" {
			d.LocalAddr = &net.UDPAddr{IP: net.ParseIP(localIP)}
		} else {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(localIP)}
		}
	}
	conn, err := d.Dial(network, addr.String())
	if err != nil {
		t.Fatalf("dial %s %s: %v", network, addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &rpcClient{network: network, conn: conn, xid: uint32(time.Now().UnixNano())}
	if network == "tcp" {
		c.rr = tcprpc.NewRecordReader(conn, nil)
		c.rw = tcprpc.NewRecordWriter(conn, nil)
	}
	return c
}

// authSys is an AUTH_SYS credential for uid/gid 0.
func authSys() oncrpc.OpaqueAuth {
	var w xdrWriter
	w.u32(uint32(time.Now().Unix()))
	w.str("auxrelay-test")
	w.u32(0)
	w.u32(0)
	w.u32(0)
	return oncrpc.OpaqueAuth{Flavor: oncrpc.AuthSys, Body: w.b}
}

func buildCall(xid, prog, vers, proc uint32, args []byte) []byte {
	h := oncrpc.CallHeader{XID: xid, RPCVers: oncrpc.RPCVersion, Prog: prog, Vers: vers, Proc: proc, Cred: authSys(), Verf: oncrpc.NullAuth}
	b := make([]byte, h.EncodedLen())
	e := xdr.NewEncoder(b)
	if err := h.Encode(&e); err != nil {
		panic(err)
	}
	return append(b, args...)
}

// raw sends msg and returns the reply message.
func (c *rpcClient) raw(t *testing.T, msg []byte) []byte {
	t.Helper()
	_ = c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if c.network == "tcp" {
		if err := c.rw.WriteRecord(msg, nil, nil); err != nil {
			t.Fatalf("write: %v", err)
		}
		reply, err := c.rr.ReadRecord(nil)
		if err != nil {
			t.Fatalf("read reply: %v", err)
		}
		return reply
	}
	buf := make([]byte, 65536)
	for try := 0; try < 5; try++ {
		if _, err := c.conn.Write(msg); err != nil {
			t.Fatalf("write: %v", err)
		}
		_ = c.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := c.conn.Read(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			continue
		}
		if err != nil {
			t.Fatalf("read reply: %v", err)
		}
		if n >= 4 && getXID(buf) == getXID(msg) {
			return append([]byte(nil), buf[:n]...)
		}
	}
	t.Fatalf("no UDP reply")
	return nil
}

// call makes one call and returns the reply header and results.
func (c *rpcClient) call(t *testing.T, prog, vers, proc uint32, args []byte) (oncrpc.ReplyHeader, []byte) {
	t.Helper()
	c.xid++
	reply := c.raw(t, buildCall(c.xid, prog, vers, proc, args))
	var h oncrpc.ReplyHeader
	n, err := h.Decode(reply)
	if err != nil {
		t.Fatalf("decode reply: %v", err)
	}
	if h.XID != c.xid {
		t.Fatalf("reply xid %#x, want %#x", h.XID, c.xid)
	}
	return h, reply[n:]
}

// mustSucceed calls and fails the test unless the reply is SUCCESS.
func (c *rpcClient) mustSucceed(t *testing.T, prog, vers, proc uint32, args []byte) []byte {
	t.Helper()
	h, res := c.call(t, prog, vers, proc, args)
	if h.Stat != oncrpc.MsgAccepted || h.AcceptStat != oncrpc.Success {
		t.Fatalf("%s %s: reply stat %d accept %d", progLabel(prog), procLabel(prog, vers, proc), h.Stat, h.AcceptStat)
	}
	return res
}

func u32At(b []byte, i int) uint32 { return binary.BigEndian.Uint32(b[4*i:]) }

// startRelay runs a relay with cfg until the test ends.
func startRelay(t *testing.T, cfg Config) *Relay {
	t.Helper()
	cfg.Enabled = true
	log := hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Debug, Output: testWriter{t}})
	m, err := NewPrometheusMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(cfg, log, m)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-r.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("relay not ready")
	}
	return r
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

// testConfig is a relay on 127.0.0.1 with ephemeral ports.
func testConfig() Config {
	c := DefaultConfig()
	c.ListenAddress = "127.0.0.1"
	c.RPCBindPort = 0
	c.Filer.Address = "127.0.0.1"
	c.CallTimeout = 5 * time.Second
	c.ConnectTimeout = 2 * time.Second
	return c
}

// ganeshaPeer is a private nfs-ganesha for a test (internal/nfstest/ganesha:
// free loopback ports, FSAL VFS over a temporary directory) serving NFS,
// MOUNT and NLM over TCP and UDP, with auxrelay-hello.txt in its export.
// The test is skipped, saying why, only when ganesha is not installed or
// the test is not root.
type ganeshaPeer struct {
	nfs, mount, nlm int
}

func startGanesha(t *testing.T) ganeshaPeer {
	t.Helper()
	s := ganesha.Start(t, ganesha.Options{NLM: true, UDP: true})
	if err := os.WriteFile(filepath.Join(s.Dir, "auxrelay-hello.txt"), []byte("hello through the relay\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := func(a string) int { return int(netip.MustParseAddrPort(a).Port()) }
	return ganeshaPeer{nfs: port(s.NFSAddr), mount: port(s.MountAddr), nlm: port(s.NLMAddr)}
}

func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed", name)
	}
	return p
}

type addrPort = netip.AddrPort

func mustAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func netipAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
