// Package golden reads the wire captures under testdata/golden (see its
// README.md) for the codec tests of several packages: a capture X is X.bin,
// the bytes, and X.txt, a tshark sidecar of key=value lines.
package golden

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Dir returns the absolute path of testdata/golden.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "golden")
}

// Sidecar reads the key=value lines of a .txt sidecar.
func Sidecar(tb testing.TB, path string) map[string]string {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	kv := make(map[string]string)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			kv[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return kv
}

// Num parses a sidecar number (decimal or 0x hex) that must be present.
func Num(tb testing.TB, kv map[string]string, key string) uint32 {
	tb.Helper()
	s, ok := kv[key]
	if !ok {
		tb.Fatalf("sidecar has no %s", key)
	}
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		tb.Fatalf("sidecar %s=%q: %v", key, s, err)
	}
	return uint32(v)
}

// TCPRecords runs check, as a subtest named for the capture, on every
// capture that is a whole TCP record (sidecar record.includes_fraghdr=1):
// its sidecar and its bytes, record mark included. It skips t when there
// are no captures and fails it when none of them is a TCP record.
func TCPRecords(t *testing.T, check func(t *testing.T, kv map[string]string, bin []byte)) {
	t.Helper()
	txts, _ := filepath.Glob(filepath.Join(Dir(), "*.txt"))
	if len(txts) == 0 {
		t.Skip("no golden captures in " + Dir())
	}
	ran := 0
	for _, txt := range txts {
		t.Run(strings.TrimSuffix(filepath.Base(txt), ".txt"), func(t *testing.T) {
			kv := Sidecar(t, txt)
			if kv["record.includes_fraghdr"] != "1" {
				t.Skip("not a TCP record")
			}
			ran++
			bin, err := os.ReadFile(strings.TrimSuffix(txt, ".txt") + ".bin")
			if err != nil {
				t.Fatal(err)
			}
			check(t, kv, bin)
		})
	}
	if ran == 0 {
		t.Fatal("no TCP records found among the golden captures")
	}
}
