package auxrelay

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/rdmagw/rdmagw/xdr"
)

func ganeshaConfig(g ganeshaPeer) Config {
	cfg := testConfig()
	cfg.Filer.MountPort, cfg.Filer.NLMPort = g.mount, g.nlm
	cfg.Filer.NSMPort = 1 // ganesha has no statd here; NSM is tested against the fake filer
	return cfg
}

// TestMountThroughRelayGanesha runs MNT, EXPORT, DUMP and UMNT (MOUNT v3)
// through the relay at nfs-ganesha over TCP and over UDP, and checks the
// file handle is the one ganesha hands out directly.
func TestMountThroughRelayGanesha(t *testing.T) {
	g := startGanesha(t)
	r := startRelay(t, ganeshaConfig(g))
	var path xdrWriter
	path.str("/vfs")

	direct := dialRPC(t, "tcp", "", ganeshaAddr(g.mount))
	want := direct.mustSucceed(t, progMount, 3, 1, path.b)

	for _, network := range []string{"tcp", "udp"} {
		c := dialRPC(t, network, "", r.Addr("mount", network))
		c.mustSucceed(t, progMount, 3, 0, nil)
		res := c.mustSucceed(t, progMount, 3, 1, path.b) // MNT
		d := xdr.NewDecoder(res)
		if st, _ := d.Uint32(); st != 0 {
			t.Fatalf("%s MNT /vfs: mountstat3 %d", network, st)
		}
		fh, _ := d.Opaque(64)
		if wfh := want[4 : 4+4+len(fh)]; string(wfh[4:]) != string(fh) {
			t.Errorf("%s MNT: handle %x differs from ganesha's own %x", network, fh, wfh[4:])
		}
		res = c.mustSucceed(t, progMount, 3, 5, nil) // EXPORT
		if !strings.Contains(string(res), "/vfs") {
			t.Errorf("%s EXPORT does not list /vfs: %q", network, res)
		}
		c.mustSucceed(t, progMount, 3, 3, path.b) // UMNT
		// ganesha serves MOUNT v3 only: its PROC_UNAVAIL for v1 MNT
		// comes back through the relay as it was sent.
		if h, _ := c.call(t, progMount, 1, 1, path.b); h.AcceptStat != 3 {
			t.Errorf("%s MNT v1: accept_stat %d, want ganesha's PROC_UNAVAIL", network, h.AcceptStat)
		}
		// A retransmitted UDP call (same XID) gets the reply too.
		if network == "udp" {
			msg := buildCall(0x5eed, progMount, 3, 0, nil)
			c.raw(t, msg)
			c.raw(t, msg)
		}
	}
}

func ganeshaAddr(port int) (ap addrPort) { return mustAddrPort(fmt.Sprintf("127.0.0.1:%d", port)) }

// TestMountLibnfsThroughRelay lets libnfs (nfs-ls), an independent
// client, mount through the relay's MOUNT port and list the export.
func TestMountLibnfsThroughRelay(t *testing.T) {
	nfsls := needTool(t, "nfs-ls")
	g := startGanesha(t)
	cfg := ganeshaConfig(g)
	cfg.UDP = false
	r := startRelay(t, cfg)
	url := fmt.Sprintf("nfs://127.0.0.1/vfs?nfsport=%d&mountport=%d", g.nfs, r.Addr("mount", "tcp").Port())
	out, err := exec.Command(nfsls, url).CombinedOutput()
	t.Logf("nfs-ls %s:\n%s", url, out)
	if err != nil {
		t.Fatalf("nfs-ls through the relay: %v", err)
	}
	if !strings.Contains(string(out), "auxrelay-hello.txt") {
		t.Errorf("nfs-ls does not list auxrelay-hello.txt")
	}
}
