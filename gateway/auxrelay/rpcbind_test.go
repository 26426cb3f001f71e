package auxrelay

import (
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/xdr"
)

func rpcbArgsBytes(prog, vers uint32, netid string) []byte {
	var w xdrWriter
	w.u32(prog)
	w.u32(vers)
	w.str(netid)
	w.str("")
	w.str("")
	return w.b
}

func getport(prog, vers, prot uint32) []byte {
	var w xdrWriter
	w.u32(prog)
	w.u32(vers)
	w.u32(prot)
	w.u32(0)
	return w.b
}

// TestRPCBindAnswersRelayPorts asks the responder what mount.nfs and the
// kernel ask (PMAP v2 GETPORT over TCP and UDP; RPCBIND v4/v3 GETADDR)
// and checks the answers are the relay's own ports, and NFS over rdma is
// the gateway's 20049.
func TestRPCBindAnswersRelayPorts(t *testing.T) {
	cfg := testConfig()
	cfg.Filer.MountPort, cfg.Filer.NLMPort, cfg.Filer.NSMPort = 1, 2, 3 // never called here
	r := startRelay(t, cfg)
	mount, nlm, nsm := r.Addr("mount", "tcp").Port(), r.Addr("nlm", "tcp").Port(), r.Addr("nsm", "tcp").Port()

	for _, network := range []string{"tcp", "udp"} {
		c := dialRPC(t, network, "", r.Addr("rpcbind", network))
		c.mustSucceed(t, progRPCBind, 2, 0, nil)
		for _, q := range []struct {
			prog, vers, prot uint32
			want             uint16
		}{
			{progMount, 3, ipprotoTCP, mount}, {progMount, 1, ipprotoUDP, mount},
			{progNLM, 4, ipprotoTCP, nlm}, {progNLM, 1, ipprotoUDP, nlm},
			{progNSM, 1, ipprotoUDP, nsm}, {progNFS, 3, ipprotoTCP, 0}, {999999, 1, ipprotoTCP, 0},
		} {
			res := c.mustSucceed(t, progRPCBind, 2, 3, getport(q.prog, q.vers, q.prot))
			if got := u32At(res, 0); got != uint32(q.want) {
				t.Errorf("%s GETPORT %s v%d prot %d = %d, want %d", network, progLabel(q.prog), q.vers, q.prot, got, q.want)
			}
		}
		for _, vers := range []uint32{3, 4} {
			for _, q := range []struct {
				prog, vers uint32
				netid      string
				want       string
			}{
				{progMount, 3, "tcp", uaddr(netip.MustParseAddr("127.0.0.1"), int(mount))},
				{progNLM, 4, "udp", uaddr(netip.MustParseAddr("127.0.0.1"), int(nlm))},
				{progNFS, 3, "rdma", "127.0.0.1.78.81"}, // 20049 = 78*256+81
				{progNFS, 3, "tcp", ""},
			} {
				res := c.mustSucceed(t, progRPCBind, vers, 3, rpcbArgsBytes(q.prog, q.vers, q.netid))
				d := xdr.NewDecoder(res)
				got, err := d.String(1024)
				if err != nil || string(got) != q.want {
					t.Errorf("%s v%d GETADDR %s %s = %q (%v), want %q", network, vers, progLabel(q.prog), q.netid, got, err, q.want)
				}
			}
		}
		// DUMP lists the relayed programs.
		res := c.mustSucceed(t, progRPCBind, 2, 4, nil)
		if len(res) < 24 {
			t.Errorf("PMAP DUMP too short: %d bytes", len(res))
		}
		res = c.mustSucceed(t, progRPCBind, 4, 6, nil) // GETTIME
		if d := int64(u32At(res, 0)) - time.Now().Unix(); d < -5 || d > 5 {
			t.Errorf("GETTIME off by %ds", d)
		}
		// SET is refused: the table is the relay's.
		res = c.mustSucceed(t, progRPCBind, 2, 1, getport(12345, 1, ipprotoTCP))
		if u32At(res, 0) != 0 {
			t.Error("PMAP SET accepted")
		}
	}
}

// TestRPCBindUaddrTaddr round-trips a universal address through
// UADDR2TADDR and TADDR2UADDR.
func TestRPCBindUaddrTaddr(t *testing.T) {
	cfg := testConfig()
	cfg.Filer.MountPort, cfg.Filer.NLMPort, cfg.Filer.NSMPort = 1, 2, 3
	r := startRelay(t, cfg)
	c := dialRPC(t, "tcp", "", r.Addr("rpcbind", "tcp"))
	var w xdrWriter
	w.str("10.1.2.3.8.1")
	res := c.mustSucceed(t, progRPCBind, 3, 7, w.b)
	res = c.mustSucceed(t, progRPCBind, 3, 8, res) // netbuf in, string out
	d := xdr.NewDecoder(res)
	if s, _ := d.String(100); string(s) != "10.1.2.3.8.1" {
		t.Errorf("uaddr round trip = %q", s)
	}
	h, _ := c.call(t, progRPCBind, 4, 5, nil) // CALLIT/BCAST: not served
	if h.AcceptStat != oncrpc.ProcUnavail {
		t.Errorf("CALLIT: accept_stat %d, want PROC_UNAVAIL", h.AcceptStat)
	}
	h, _ = c.call(t, progRPCBind, 5, 0, nil)
	if h.AcceptStat != oncrpc.ProgMismatch || h.Low != 2 || h.High != 4 {
		t.Errorf("rpcbind v5: %+v, want PROG_MISMATCH 2..4", h)
	}
}

// TestRPCBindWithRpcinfo runs the relay's responder on port 111 of
// 127.0.0.9 (rpcinfo cannot be pointed at another port) and lets
// rpcinfo, an independent client, list it and ping MOUNT through the
// relay at ganesha.
func TestRPCBindWithRpcinfo(t *testing.T) {
	rpcinfo := needTool(t, "rpcinfo")
	ln, err := net.Listen("tcp", "127.0.0.9:111")
	if err != nil {
		t.Skipf("cannot bind 127.0.0.9:111: %v", err)
	}
	ln.Close()
	g := startGanesha(t)
	cfg := testConfig()
	cfg.ListenAddress = "127.0.0.9"
	cfg.RPCBindPort = 111
	cfg.Filer.MountPort, cfg.Filer.NLMPort = g.mount, g.nlm
	cfg.Filer.NSMPort = 1
	r := startRelay(t, cfg)
	_ = r
	out, err := exec.Command(rpcinfo, "-p", "127.0.0.9").CombinedOutput()
	t.Logf("rpcinfo -p 127.0.0.9:\n%s", out)
	if err != nil {
		t.Fatalf("rpcinfo -p: %v", err)
	}
	for _, want := range []string{"mountd", "nlockmgr", "status", "portmapper"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("rpcinfo -p lacks %s", want)
		}
	}
	out, err = exec.Command(rpcinfo, "127.0.0.9").CombinedOutput() // RPCBIND v4 DUMP
	t.Logf("rpcinfo 127.0.0.9:\n%s", out)
	if err != nil || !strings.Contains(string(out), "rdma") {
		t.Errorf("rpcinfo (v4 dump): %v, want an rdma entry for NFS", err)
	}
	for _, args := range [][]string{{"-T", "tcp", "127.0.0.9", "100005", "3"}, {"-T", "udp", "127.0.0.9", "100005", "3"},
		{"-t", "127.0.0.9", "mountd", "1"}, {"-u", "127.0.0.9", "mountd", "3"}, {"-T", "tcp", "127.0.0.9", "nlockmgr", "4"}} {
		out, err := exec.Command(rpcinfo, args...).CombinedOutput()
		t.Logf("rpcinfo %s: %s", strings.Join(args, " "), out)
		if err != nil || !strings.Contains(string(out), "ready and waiting") {
			t.Errorf("rpcinfo %s: %v", strings.Join(args, " "), err)
		}
	}
}
