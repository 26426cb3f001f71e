// Package ganesha starts a private nfs-ganesha for tests: FSAL VFS over a
// temporary directory, on free loopback ports, stopped when the test ends.
// It imports nothing of rdmagw, so any package's tests can use it
// (internal/nfstest wraps it for tests that also need a gateway).
//
// Several test binaries may start servers at once (go test runs packages
// in parallel). Each server has its own ports and directories; the one
// thing they share is rpcbind, with which ganesha must register at start
// (ganesha 4.3 exits with "Cannot register NFS V3 on TCP" otherwise). A
// starting ganesha first unregisters its programs and then registers
// them, so two starting at once can take each other's registration away
// and one of them exits. Start therefore holds an exclusive file lock
// (LockPath) from the rpcbind check until the server reports itself
// initialized. A running server never talks to rpcbind again, so the
// registrations it leaves behind (or that a later start removes) do not
// matter.
package ganesha

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Options selects server features beyond the NFS and MOUNT v3 over TCP
// that every server has.
type Options struct {
	// NLM enables the NLM v4 lock manager (Enable_NLM) on its own port,
	// reported in Server.NLMAddr. This ganesha has no statd it can reach,
	// so it may refuse locks with NLM4_DENIED_NOLOCKS.
	NLM bool
	// UDP serves every enabled program over UDP as well (Enable_UDP), on
	// the same port numbers as TCP.
	UDP bool
	// Delegations turns NFSv4 delegations on (NFSV4 { Delegations = true; }
	// and the export's Delegations = readwrite) and logs the state and
	// callback components at FULL_DEBUG (Server.Log). Whether a delegation
	// is then granted is up to the FSAL: in ganesha 4.3 VFS answers every
	// request with "Delegation type not supported".
	Delegations bool
	// NFSACL serves the NFSACL program (100227, GETACL/SETACL of POSIX
	// ACLs; Enable_NFSACL) on the NFS port.
	NFSACL bool
}

// Server is a running nfs-ganesha.
type Server struct {
	NFSAddr   string // "127.0.0.1:port" of NFS (v3 and v4.x)
	MountAddr string // "127.0.0.1:port" of MOUNT v3
	NLMAddr   string // "127.0.0.1:port" of NLM v4; empty unless Options.NLM
	Export    string // the v3 mount path / v4 pseudo path ("/vfs")
	Dir       string // the exported directory on the local file system
	Log       string // ganesha's log file
	// Pid is the ganesha process, for tests that stop it (SIGSTOP);
	// 0 for a server the test did not start.
	Pid int

	attempts int // servers started to get this one (see Start)
}

// LockPath is the file whose exclusive lock serialises server starts
// across test processes.
var LockPath = filepath.Join(os.TempDir(), "rdmagw-nfstest-ganesha.lock")

const conf = `NFS_CORE_PARAM {
    Bind_Addr = 127.0.0.1;
    NFS_Port = %d;
    MNT_Port = %d;
    NLM_Port = %d;
    Rquota_Port = %d;
    Protocols = 3, 4;
    Enable_NLM = %t;
    Enable_RQUOTA = false;
    Enable_UDP = %t;
    Enable_NFSACL = %t;
    Mount_Path_Pseudo = true;
}
NFSV4 {
    Graceless = true;
    Minor_Versions = 0, 1, 2;
    Lease_Lifetime = 15;
    RecoveryBackend = fs;
    RecoveryRoot = "%s";
    Allow_Numeric_Owners = true;
    Only_Numeric_Owners = true;
    Delegations = %t;
}
NFS_KRB5 { Active_krb5 = false; }
EXPORT_DEFAULTS { Squash = No_Root_Squash; SecType = sys; }
EXPORT {
    Export_Id = 1;
    Path = "%s";
    Pseudo = /vfs;
    Access_Type = RW;
    Protocols = 3, 4;
    Transports = %s;
    Delegations = %s;
    FSAL { Name = VFS; }
}
LOG { Default_Log_Level = EVENT;%s }
`

// Start starts a private nfs-ganesha for the test (stopped at its
// cleanup). It skips the test, saying why, when nfs-ganesha is not
// installed, when the test does not run as root (FSAL VFS needs
// open_by_handle_at), or when no rpcbind can be had; any other failure
// fails the test.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin, err := exec.LookPath("ganesha.nfsd")
	if err != nil {
		t.Skip("nfs-ganesha not installed (scripts/install-deps.sh --test)")
	}
	if os.Geteuid() != 0 {
		t.Skip("nfs-ganesha needs root here (FSAL VFS open_by_handle_at)")
	}
	dir := t.TempDir()
	export := filepath.Join(dir, "export")
	recov := filepath.Join(dir, "recov")
	for _, d := range []string{export, recov} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	unlock := lock(t)
	defer unlock()
	ensureRPCBind(t)
	// A port that was free when probed can be taken before ganesha binds
	// it; a server that exits during start is retried on new ports.
	var why string
	for attempt := range 3 {
		s, stop, msg := try(t, bin, o, filepath.Join(dir, fmt.Sprintf("try%d", attempt)), export, recov)
		if s != nil {
			s.attempts = attempt + 1
			t.Cleanup(stop)
			return s
		}
		why = msg
		t.Logf("ganesha start attempt %d failed, retrying on new ports: %s", attempt+1, firstLine(msg))
	}
	t.Fatalf("ganesha did not start:\n%s", why)
	return nil
}

// try starts one server and waits for it to come up, returning it and
// the function that stops it; on failure it returns why, with the server
// stopped.
func try(t testing.TB, bin string, o Options, dir, export, recov string) (*Server, func(), string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ports := FreePorts(t, 4, o.UDP)
	cf := writeConf(t, o, dir, export, recov, ports)
	logf := filepath.Join(dir, "ganesha.log")
	cmd := exec.Command(bin, "-F", "-f", cf, "-L", logf, "-p", filepath.Join(dir, "ganesha.pid"))
	// Pdeathsig: a test binary killed by a timeout takes ganesha with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start ganesha: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s := &Server{
		NFSAddr:   fmt.Sprintf("127.0.0.1:%d", ports[0]),
		MountAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		Export:    "/vfs",
		Dir:       export,
		Log:       logf,
	}
	want := []string{s.NFSAddr, s.MountAddr}
	if o.NLM {
		s.NLMAddr = fmt.Sprintf("127.0.0.1:%d", ports[2])
		want = append(want, s.NLMAddr)
	}
	if why := waitUp(cmd, exited, &out, logf, want); why != "" {
		return nil, nil, why
	}
	s.Pid = cmd.Process.Pid
	return s, func() { _ = cmd.Process.Kill(); <-exited }, ""
}

// writeConf writes ganesha.conf for o into dir, on ports; its path.
func writeConf(t testing.TB, o Options, dir, export, recov string, ports []int) string {
	transports := "TCP"
	if o.UDP {
		transports = "TCP, UDP"
	}
	delegs, logComps := "none", ""
	if o.Delegations {
		delegs, logComps = "readwrite", " COMPONENTS { STATE = FULL_DEBUG; NFS_CB = FULL_DEBUG; }"
	}
	text := fmt.Sprintf(conf, ports[0], ports[1], ports[2], ports[3], o.NLM, o.UDP, o.NFSACL, recov, o.Delegations, export, transports, delegs, logComps)
	cf := filepath.Join(dir, "ganesha.conf")
	if err := os.WriteFile(cf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return cf
}

// waitUp waits up to 30 s for the ganesha started as cmd to say it is up
// in its log (logf) and to listen on every address in want. It returns
// "" once it is, else why not (having stopped ganesha if it still runs).
func waitUp(cmd *exec.Cmd, exited chan struct{}, out *bytes.Buffer, logf string, want []string) string {
	up := func() bool {
		log, _ := os.ReadFile(logf)
		if !bytes.Contains(log, []byte("NFS SERVER INITIALIZED")) {
			return false
		}
		for _, a := range want {
			if !listening(a) {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if up() {
			return ""
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logf)
			return fmt.Sprintf("exited: %v\n%s\n%s", cmd.ProcessState, out.String(), tail(log, 3000))
		case <-time.After(100 * time.Millisecond):
		}
	}
	_ = cmd.Process.Kill()
	<-exited
	log, _ := os.ReadFile(logf)
	return fmt.Sprintf("not up after 30s\n%s\n%s", out.String(), tail(log, 3000))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
