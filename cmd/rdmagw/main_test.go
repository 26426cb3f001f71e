package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"version"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d, stderr %q", rc, errb.String())
	}
	if !strings.HasPrefix(out.String(), "rdmagw ") {
		t.Fatalf("version output %q", out.String())
	}
}

func TestUnknownSubcommand(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"frobnicate"}, &out, &errb); rc != 2 {
		t.Fatalf("rc %d, want 2", rc)
	}
	if !strings.Contains(errb.String(), `unknown subcommand "frobnicate"`) {
		t.Fatalf("stderr %q", errb.String())
	}
}
