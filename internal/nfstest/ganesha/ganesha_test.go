package ganesha

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParallelStarts starts servers at the same moment, as test binaries
// of several packages do. Without the start lock some of them lose their
// rpcbind registration to another's and exit ("Cannot register NFS V3").
func TestParallelStarts(t *testing.T) {
	for _, o := range []Options{{}, {NLM: true}, {NLM: true, UDP: true}, {UDP: true}} {
		t.Run(fmt.Sprintf("nlm=%t,udp=%t", o.NLM, o.UDP), func(t *testing.T) {
			t.Parallel()
			s := Start(t, o)
			if s.attempts != 1 {
				t.Errorf("took %d starts (see the log above)", s.attempts)
			}
			addrs := []string{s.NFSAddr, s.MountAddr}
			if o.NLM {
				addrs = append(addrs, s.NLMAddr)
			} else if s.NLMAddr != "" {
				t.Errorf("NLMAddr %q without Options.NLM", s.NLMAddr)
			}
			for _, a := range addrs {
				c, err := net.DialTimeout("tcp", a, time.Second)
				if err != nil {
					t.Fatalf("%s: %v", a, err)
				}
				c.Close()
			}
			if o.UDP {
				// ganesha's UDP socket holds the port: binding it fails.
				if u, err := net.ListenPacket("udp", s.MountAddr); err == nil {
					u.Close()
					t.Errorf("nothing on udp %s", s.MountAddr)
				}
			}
			if err := os.WriteFile(filepath.Join(s.Dir, "f"), nil, 0o644); err != nil {
				t.Errorf("export dir: %v", err)
			}
		})
	}
}

// Options.Delegations turns delegations on in the NFSV4 block and the
// export; ganesha accepts the configuration (it exits on a bad one) and
// a server without the option keeps them off.
func TestDelegationsOption(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("delegations=%t", on), func(t *testing.T) {
			s := Start(t, Options{Delegations: on})
			conf, err := os.ReadFile(filepath.Join(filepath.Dir(s.Log), "ganesha.conf"))
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]bool{
				"Delegations = true;":      on,
				"Delegations = readwrite;": on,
				"Delegations = false;":     !on,
				"Delegations = none;":      !on,
				"NFS_CB = FULL_DEBUG;":     on,
			}
			for line, present := range want {
				if got := strings.Contains(string(conf), line); got != present {
					t.Errorf("ganesha.conf contains %q: %t, want %t", line, got, present)
				}
			}
			log, err := os.ReadFile(s.Log)
			if err != nil {
				t.Fatal(err)
			}
			// ganesha reports a bad parameter as "Config File (path:line):
			// ..." and may still start.
			if !strings.Contains(string(log), "Configuration file successfully parsed") || strings.Contains(string(log), "Config File (") {
				t.Errorf("ganesha did not take the configuration cleanly:\n%s", log)
			}
		})
	}
}
