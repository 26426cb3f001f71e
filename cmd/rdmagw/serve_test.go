package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestServeCheck(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"serve", "-check", "-c", "../../configs/forward.yaml"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d, stderr %q", rc, errb.String())
	}
	if !strings.Contains(out.String(), "ok") {
		t.Fatalf("stdout %q", out.String())
	}
}

// An invalid config stops serve at start with the field and the reason.
func TestServeBadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(path, []byte("backend:\n  port: 0\n"), 0o644)
	var out, errb bytes.Buffer
	if rc := run([]string{"serve", "-c", path}, &out, &errb); rc != 1 {
		t.Fatalf("rc %d, want 1", rc)
	}
	if !strings.Contains(errb.String(), "backend.port: must be between 1 and 65535") {
		t.Fatalf("stderr %q", errb.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the logger and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serve runs, serves /metrics and shuts down cleanly on SIGTERM.
func TestServeRunsAndStopsOnSIGTERM(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gw.yaml")
	os.WriteFile(path, []byte(`
listen: {address: 127.0.0.1, port: 0}
backend: {address: 127.0.0.1, port: 1}
pool: {max_bytes: 16MiB}
metrics: {listen: "127.0.0.1:0"}
log: {format: json}
`), 0o644)
	var out io.Writer = io.Discard
	errb := &syncBuffer{}
	rc := make(chan int, 1)
	go func() { rc <- run([]string{"serve", "-c", path}, out, errb) }()
	re := regexp.MustCompile(`http://127\.0\.0\.1:\d+/metrics`)
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == ""; {
		if time.Now().After(deadline) {
			t.Fatalf("no metrics URL logged:\n%s", errb.String())
		}
		url = re.FindString(errb.String())
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "rdmagw_connections_total") {
		t.Fatalf("/metrics lacks rdmagw_connections_total:\n%.500s", body)
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	select {
	case code := <-rc:
		if code != 0 {
			t.Fatalf("rc %d after SIGTERM:\n%s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
	if !strings.Contains(errb.String(), `"@message":"stopped"`) {
		t.Fatalf("no clean stop logged:\n%s", errb.String())
	}
}
