package gateway_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A private nfs-ganesha for the gateway tests (FSAL VFS over a temporary
// directory, free loopback ports), so these tests depend on no other
// package's test helpers. RDMAGW_GANESHA="nfsaddr,mountaddr,export" uses a
// running server instead.

type ganesha struct {
	NFSAddr, MountAddr, Export, Dir string
}

const ganeshaConf = `NFS_CORE_PARAM {
    Bind_Addr = 127.0.0.1;
    NFS_Port = %d; MNT_Port = %d; NLM_Port = %d; Rquota_Port = %d;
    Protocols = 3, 4;
    Enable_NLM = false; Enable_RQUOTA = false; Enable_UDP = false;
    Mount_Path_Pseudo = true;
}
NFSV4 { Graceless = true; Minor_Versions = 0, 1, 2; RecoveryBackend = fs; RecoveryRoot = %s; }
NFS_KRB5 { Active_krb5 = false; }
EXPORT_DEFAULTS { Squash = No_Root_Squash; SecType = sys; }
EXPORT {
    Export_Id = 1; Path = %s; Pseudo = /vfs; Access_Type = RW;
    Protocols = 3, 4; Transports = TCP;
    FSAL { Name = VFS; }
}
LOG { Default_Log_Level = EVENT; }
`

func startGanesha(t testing.TB) *ganesha {
	t.Helper()
	if env := os.Getenv("RDMAGW_GANESHA"); env != "" {
		f := strings.Split(env, ",")
		if len(f) != 3 {
			t.Fatalf("RDMAGW_GANESHA=%q: want nfsaddr,mountaddr,export", env)
		}
		return &ganesha{NFSAddr: f[0], MountAddr: f[1], Export: f[2]}
	}
	bin, err := exec.LookPath("ganesha.nfsd")
	if err != nil {
		t.Skip("nfs-ganesha not installed (scripts/install-deps.sh --test)")
	}
	if os.Geteuid() != 0 {
		t.Skip("nfs-ganesha needs root here (FSAL VFS open_by_handle)")
	}
	ensureRPCBind(t)
	dir := t.TempDir()
	export, recov := filepath.Join(dir, "export"), filepath.Join(dir, "recov")
	for _, d := range []string{export, recov} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ports := freePorts(t, 4)
	conf := filepath.Join(dir, "ganesha.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(ganeshaConf, ports[0], ports[1], ports[2], ports[3], recov, export)), 0o644); err != nil {
		t.Fatal(err)
	}
	logf := filepath.Join(dir, "ganesha.log")
	cmd := exec.Command(bin, "-F", "-f", conf, "-L", logf, "-p", filepath.Join(dir, "ganesha.pid"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start ganesha: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	g := &ganesha{NFSAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]), MountAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]), Export: "/vfs", Dir: export}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		log, _ := os.ReadFile(logf)
		if bytes.Contains(log, []byte("NFS SERVER INITIALIZED")) && listening(g.NFSAddr) && listening(g.MountAddr) {
			return g
		}
	}
	log, _ := os.ReadFile(logf)
	t.Fatalf("ganesha did not start:\n%s\n%s", out.String(), log)
	return nil
}

// ensureRPCBind: ganesha refuses to start unless it can register with
// rpcbind; one in an empty network namespace takes the registration on
// its Unix socket and is reachable by nobody.
func ensureRPCBind(t testing.TB) {
	t.Helper()
	const sock = "/run/rpcbind.sock"
	up := func() bool {
		c, err := net.DialTimeout("unix", sock, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	if up() {
		return
	}
	unshare, err1 := exec.LookPath("unshare")
	rpcbind, err2 := exec.LookPath("rpcbind")
	if err1 != nil || err2 != nil {
		t.Skip("rpcbind not running and cannot be started")
	}
	cmd := exec.Command(unshare, "-n", rpcbind, "-f")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Skipf("start rpcbind: %v", err)
	}
	go func() { _ = cmd.Wait() }()
	for range 50 {
		if up() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Skip("rpcbind did not come up on " + sock)
}

func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}
