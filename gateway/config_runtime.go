package gateway

// RuntimeConfig is the gateway process's use of the machine's CPUs, like
// nfsd's thread count or haproxy's nbthread. It is read at start only
// (a reload reports a change as needing a restart); `rdmagw serve`
// applies it (cmd/rdmagw/serve.go) and exports the value in force as
// go_sched_gomaxprocs_threads.
type RuntimeConfig struct {
	// Procs is how many OS threads run the gateway's Go code at once
	// (GOMAXPROCS). 0: Go's default, the CPUs the process may use (its
	// CPU affinity, lowered to the cgroup's CPU limit). configs/forward.yaml
	// gives the measured trade-off.
	Procs int `yaml:"procs"`
}

// MaxRuntimeProcs bounds runtime.procs (far above any core count the
// gateway runs on; a typo, not a setting, beyond it).
const MaxRuntimeProcs = 1024

func (c *Config) validateRuntime(bad func(string, string, ...any)) {
	if p := c.Runtime.Procs; p < 0 || p > MaxRuntimeProcs {
		bad("runtime.procs", "must be between 0 (Go's default) and %d (got %d)", MaxRuntimeProcs, p)
	}
}
