package gateway

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rdmagw/rdmagw/rdmarpc"
)

func TestRDMAVersionDefaults(t *testing.T) {
	for _, mode := range []string{"forward", "reverse"} {
		cfg, err := ParseConfig([]byte("mode: " + mode + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cfg.RDMA.Versions, []int{1, 2}) || !cfg.ServesV2() {
			t.Errorf("%s: rdma.versions %v, want [1 2] served", mode, cfg.RDMA.Versions)
		}
		if cfg.Backend.RDMAVersion != "auto" || cfg.BackendVersionMode() != rdmarpc.VersionAuto {
			t.Errorf("%s: backend.rdma_version %q, want auto", mode, cfg.Backend.RDMAVersion)
		}
	}
	// The default list is not shared between configurations.
	a, b := DefaultConfig(), DefaultConfig()
	a.RDMA.Versions[1] = 7
	if b.RDMA.Versions[1] != 2 || DefaultVersions[1] != 2 {
		t.Fatal("DefaultConfig shares its rdma.versions slice")
	}
}

func TestRDMAVersionParse(t *testing.T) {
	cases := []struct {
		yaml     string
		versions []int
		v2       bool
		mode     rdmarpc.VersionMode
	}{
		{"rdma:\n  versions: [1]\n", []int{1}, false, rdmarpc.VersionAuto},
		{"rdma:\n  versions: [2, 1]\n", []int{2, 1}, true, rdmarpc.VersionAuto},
		{"mode: reverse\nbackend:\n  rdma_version: 1\n", []int{1, 2}, true, rdmarpc.VersionV1}, // a YAML int
		{"mode: reverse\nbackend:\n  rdma_version: \"2\"\n", []int{1, 2}, true, rdmarpc.VersionV2},
		{"mode: reverse\nbackend:\n  rdma_version: AUTO\n", []int{1, 2}, true, rdmarpc.VersionAuto},
	}
	for _, c := range cases {
		cfg, err := ParseConfig([]byte(c.yaml))
		if err != nil {
			t.Fatalf("%q: %v", c.yaml, err)
		}
		if !slices.Equal(cfg.RDMA.Versions, c.versions) || cfg.ServesV2() != c.v2 || cfg.BackendVersionMode() != c.mode {
			t.Errorf("%q: versions %v v2 %v mode %v; want %v %v %v", c.yaml, cfg.RDMA.Versions, cfg.ServesV2(),
				cfg.BackendVersionMode(), c.versions, c.v2, c.mode)
		}
	}
}

// Bad values name their field.
func TestRDMAVersionRejects(t *testing.T) {
	cases := []struct{ yaml, field, reason string }{
		{"rdma:\n  versions: [1, 3]\n", "rdma.versions[1]", "must be 1 or 2"},
		{"rdma:\n  versions: [0]\n", "rdma.versions[0]", "must be 1 or 2"},
		{"rdma:\n  versions: [1, 1]\n", "rdma.versions[1]", "listed twice"},
		{"rdma:\n  versions: [2]\n", "rdma.versions", "must include 1"},
		{"rdma:\n  versions: []\n", "rdma.versions", "must include 1"},
		{"mode: reverse\nbackend:\n  rdma_version: 3\n", "backend.rdma_version", `"auto", "1" or "2"`},
		{"mode: reverse\nbackend:\n  rdma_version: v2\n", "backend.rdma_version", `got "v2"`},
		{"mode: reverse\nbackend:\n  rdma_version: \"\"\n", "backend.rdma_version", "must be"},
	}
	for _, c := range cases {
		_, err := ParseConfig([]byte(c.yaml))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%q: err %v; want field %s saying %q", c.yaml, err, c.field, c.reason)
		}
	}
	// backend.rdma_version is read in reverse mode only.
	if _, err := ParseConfig([]byte("backend:\n  rdma_version: 3\n")); err != nil {
		t.Errorf("forward mode checks backend.rdma_version: %v", err)
	}
}
