package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCopyAndLog: the copy is byte for byte, one log line per write with
// increasing offsets, then "fsync".
func TestCopyAndLog(t *testing.T) {
	dir := t.TempDir()
	src, dst, lg := filepath.Join(dir, "src"), filepath.Join(dir, "dst"), filepath.Join(dir, "log")
	data := bytes.Repeat([]byte("0123456789abcdef"), 4*1024+7) // 4 writes of 16 KiB and 112 bytes
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(src, dst, 16384, false, lg); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("copy differs (err %v, %d bytes of %d)", err, len(got), len(data))
	}
	raw, _ := os.ReadFile(lg)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	want := []string{"16384", "32768", "49152", "65536", "65648"} // 16*(4*1024+7) = 65648
	if len(lines) != len(want)+1 || !strings.HasSuffix(lines[len(lines)-1], " fsync") {
		t.Fatalf("log:\n%s", raw)
	}
	for i, w := range want {
		if f := strings.Fields(lines[i]); len(f) != 2 || f[1] != w {
			t.Fatalf("line %d = %q, want offset %s", i, lines[i], w)
		}
	}
}

func TestBadUsage(t *testing.T) {
	if err := run("", "x", 1, false, ""); err == nil {
		t.Fatal("no error without -src")
	}
	if err := run(filepath.Join(t.TempDir(), "missing"), filepath.Join(t.TempDir(), "d"), 4096, false, ""); err == nil {
		t.Fatal("no error for a missing source")
	}
}
