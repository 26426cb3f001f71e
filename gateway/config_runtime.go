package gateway

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// RuntimeConfig is the gateway process's use of the machine's CPUs, like
// nfsd's thread count or haproxy's nbthread. It is read at start only
// (a reload reports a change as needing a restart); `rdmagw serve`
// applies it (cmd/rdmagw/serve.go) and exports the value in force as
// go_sched_gomaxprocs_threads.
type RuntimeConfig struct {
	// Procs is how many OS threads run the gateway's Go code at once
	// (GOMAXPROCS): ProcsAuto ("auto", the default) follows the load
	// (internal/autoprocs), up to the CPUs the process may use; 0 is
	// Go's default, those CPUs all the time; N fixes it.
	// configs/forward.yaml gives the measured trade-off.
	Procs Procs `yaml:"procs"`
}

// Procs is runtime.procs: a thread count, 0 (Go's default) or ProcsAuto.
type Procs int

// ProcsAuto is runtime.procs: auto.
const ProcsAuto Procs = -1

// MaxRuntimeProcs bounds runtime.procs (far above any core count the
// gateway runs on; a typo, not a setting, beyond it).
const MaxRuntimeProcs = 1024

// ParseProcs reads a runtime.procs value: "auto" or a number.
func ParseProcs(s string) (Procs, error) {
	t := strings.TrimSpace(s)
	if t == "auto" {
		return ProcsAuto, nil
	}
	n, err := strconv.Atoi(t)
	if err != nil || n < 0 || n > MaxRuntimeProcs {
		return 0, fmt.Errorf("bad procs %q (want auto, 0 for Go's default, or a thread count up to %d)", s, MaxRuntimeProcs)
	}
	return Procs(n), nil
}

// UnmarshalYAML accepts auto or an integer. A negative number is refused
// here (it would read as auto); one too large is left to validation,
// which names the field.
func (p *Procs) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && strings.TrimSpace(n.Value) == "auto" {
		*p = ProcsAuto
		return nil
	}
	var v int
	if err := n.Decode(&v); err != nil || v < 0 {
		return fmt.Errorf("line %d: procs must be auto or a number of threads, 0 for Go's default (got %q)", n.Line, n.Value)
	}
	*p = Procs(v)
	return nil
}

// MarshalYAML writes auto as the word.
func (p Procs) MarshalYAML() (any, error) {
	if p == ProcsAuto {
		return "auto", nil
	}
	return int(p), nil
}

func (p Procs) String() string {
	if p == ProcsAuto {
		return "auto"
	}
	return strconv.Itoa(int(p))
}

func (c *Config) validateRuntime(bad func(string, string, ...any)) {
	if p := c.Runtime.Procs; p != ProcsAuto && (p < 0 || p > MaxRuntimeProcs) {
		bad("runtime.procs", "must be auto, 0 (Go's default) or a thread count up to %d (got %d)", MaxRuntimeProcs, p)
	}
}
