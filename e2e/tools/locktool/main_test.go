package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The lab trusts locktool's exit codes to judge NFS locking, so they are
// checked here on a local file, where the kernel's own lock semantics are
// known: a holder excludes other processes, and they get the lock after it
// lets go; a blocked waiter is woken by the release.
func TestLocktool(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "locktool")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	file := filepath.Join(dir, "f")
	for _, kind := range []string{"fcntl", "flock"} {
		t.Run(kind, func(t *testing.T) {
			if rc := run(t, bin, "try", kind, file); rc != 0 {
				t.Fatalf("try on a free file: rc %d, want 0", rc)
			}
			ready := filepath.Join(dir, kind+".ready")
			hold := exec.Command(bin, "hold", kind, file, ready) // stdin: /dev/null, as in a script
			if err := hold.Start(); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(ready); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("holder never reported the lock held")
				}
			}
			if rc := run(t, bin, "try", kind, file); rc != exitBusy {
				t.Fatalf("try while held: rc %d, want %d", rc, exitBusy)
			}
			wait := exec.Command(bin, "wait", kind, file)
			var out syncBuf // written by exec's copying goroutine while we look
			wait.Stdout = &out
			if err := wait.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
			if out.String() != "" {
				t.Fatalf("waiter got the lock while held: %q", out.String())
			}
			hold.Process.Signal(syscall.SIGTERM) // the holder lets go
			if err := hold.Wait(); err != nil {
				t.Fatalf("holder: %v", err)
			}
			if err := wait.Wait(); err != nil || !strings.Contains(out.String(), "acquired after") {
				t.Fatalf("waiter: %v, %q", err, out.String())
			}
			if rc := run(t, bin, "try", kind, file); rc != 0 {
				t.Fatalf("try after release: rc %d, want 0", rc)
			}
		})
	}
	if rc := run(t, bin, "try", "lockf", file); rc != 1 {
		t.Fatalf("unknown lock kind: rc %d, want 1", rc)
	}
}

func run(t *testing.T, bin string, args ...string) int {
	t.Helper()
	err := exec.Command(bin, args...).Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// syncBuf is a strings.Builder safe to read while a process writes to it.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
