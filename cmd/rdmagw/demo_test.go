package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDemo runs `rdmagw demo -size 4MiB`: nfsmem, the gateway on the
// pure-Go provider and the RDMA client, all in this process.
func TestDemo(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"demo", "-size", "4MiB"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d\nstdout:\n%s\nstderr:\n%s", rc, out.String(), errb.String())
	}
	o := out.String()
	t.Logf("\n%s", o)
	for _, want := range []string{"verified: 4.0 MiB read back byte for byte identical", "write_chunk", "read_chunk", "metrics: http://127.0.0.1:"} {
		if !strings.Contains(o, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestDemoBadFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"demo", "-size", "lots"}, &out, &errb); rc != 2 || !strings.Contains(errb.String(), "-size") {
		t.Fatalf("rc %d stderr %q", rc, errb.String())
	}
}
