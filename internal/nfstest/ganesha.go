package nfstest

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

// Ganesha is a running nfs-ganesha.
type Ganesha struct {
	NFSAddr   string // "127.0.0.1:port" of NFS (v3 and v4.x)
	MountAddr string // "127.0.0.1:port" of MOUNT v3
	Export    string // the v3 mount path / v4 pseudo path ("/vfs")
	Dir       string // the exported directory on the local file system
}

const ganeshaConf = `NFS_CORE_PARAM {
    Bind_Addr = 127.0.0.1;
    NFS_Port = %d;
    MNT_Port = %d;
    NLM_Port = %d;
    Rquota_Port = %d;
    Protocols = 3, 4;
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Enable_UDP = false;
    Mount_Path_Pseudo = true;
}
NFSV4 {
    Graceless = true;
    Minor_Versions = 0, 1, 2;
    Lease_Lifetime = 15;
    RecoveryBackend = fs;
    RecoveryRoot = %s;
    Allow_Numeric_Owners = true;
    Only_Numeric_Owners = true;
}
NFS_KRB5 { Active_krb5 = false; }
EXPORT_DEFAULTS { Squash = No_Root_Squash; SecType = sys; }
EXPORT {
    Export_Id = 1;
    Path = %s;
    Pseudo = /vfs;
    Access_Type = RW;
    Protocols = 3, 4;
    Transports = TCP;
    FSAL { Name = VFS; }
}
LOG { Default_Log_Level = EVENT; }
`

// StartGanesha starts a private nfs-ganesha for the test (stopped at its
// cleanup) or skips the test when ganesha cannot run here. With
// RDMAGW_GANESHA="nfsaddr,mountaddr,export" set it uses that server instead.
func StartGanesha(t testing.TB) *Ganesha {
	t.Helper()
	if env := os.Getenv("RDMAGW_GANESHA"); env != "" {
		f := strings.Split(env, ",")
		if len(f) != 3 {
			t.Fatalf("RDMAGW_GANESHA=%q: want nfsaddr,mountaddr,export", env)
		}
		return &Ganesha{NFSAddr: f[0], MountAddr: f[1], Export: f[2]}
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
	export := filepath.Join(dir, "export")
	recov := filepath.Join(dir, "recov")
	for _, d := range []string{export, recov} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ports := FreePorts(t, 4)
	conf := filepath.Join(dir, "ganesha.conf")
	text := fmt.Sprintf(ganeshaConf, ports[0], ports[1], ports[2], ports[3], recov, export)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	logf := filepath.Join(dir, "ganesha.log")
	cmd := exec.Command(bin, "-F", "-f", conf, "-L", logf, "-p", filepath.Join(dir, "ganesha.pid"))
	// Pdeathsig: a test binary killed by a timeout takes ganesha with it.
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
	g := &Ganesha{
		NFSAddr:   fmt.Sprintf("127.0.0.1:%d", ports[0]),
		MountAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		Export:    "/vfs",
		Dir:       export,
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		log, _ := os.ReadFile(logf)
		if bytes.Contains(log, []byte("NFS SERVER INITIALIZED")) && listening(g.NFSAddr) && listening(g.MountAddr) {
			return g
		}
		if cmd.ProcessState != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	log, _ := os.ReadFile(logf)
	t.Fatalf("ganesha did not start:\n%s\n%s", out.String(), tail(log, 2000))
	return nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// FreePorts returns n distinct loopback TCP ports that were free a moment
// ago.
func FreePorts(t testing.TB, n int) []int {
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
