package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDevices: `rdmagw devices` always lists the pure-Go device, with or
// without the ibverbs provider and RDMA hardware.
func TestDevices(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"devices"}, &out, &errb); rc != 0 {
		t.Fatalf("devices: rc %d, stderr %q", rc, errb.String())
	}
	if !strings.Contains(out.String(), "iwarp-go") {
		t.Fatalf("devices output lacks the iwarp device:\n%s", out.String())
	}
}
