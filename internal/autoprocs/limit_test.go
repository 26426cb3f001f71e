package autoprocs

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A tree with the files CPULimit reads, as a machine's cgroup layouts
// have them.
type cgTree struct {
	cgroup, mountinfo string
	files             map[string]string // path under the tree: contents
}

func (tr cgTree) build(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{"proc/self/cgroup": tr.cgroup, "proc/self/mountinfo": tr.mountinfo}
	for p, c := range tr.files {
		files[p] = c
	}
	for p, c := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const (
	// cgroup v2 alone, the process in a namespace's root (a container).
	v2Cgroup = "0::/\n"
	v2Mounts = "24 1 0:22 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
	// A hybrid host (this project's CI machine): v1 controllers, cpu
	// among them, and an empty unified hierarchy.
	hybridCgroup = "9:name=systemd:/\n4:memory:/job/42\n1:cpu,cpuacct:/job/42\n0::/\n"
	hybridMounts = "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
		"31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n" +
		"33 30 0:30 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"35 30 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
)

func TestCPULimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		tree cgTree
		cpus int
		want int
	}{
		{"v2 3.5 CPUs", cgTree{v2Cgroup, v2Mounts, map[string]string{"sys/fs/cgroup/cpu.max": "350000 100000\n"}}, 16, 4},
		{"v2 no limit", cgTree{v2Cgroup, v2Mounts, map[string]string{"sys/fs/cgroup/cpu.max": "max 100000\n"}}, 16, 16},
		{"v2 half a CPU counts 2", cgTree{v2Cgroup, v2Mounts, map[string]string{"sys/fs/cgroup/cpu.max": "50000 100000\n"}}, 16, 2},
		{"v2 limit above the affinity mask", cgTree{v2Cgroup, v2Mounts, map[string]string{"sys/fs/cgroup/cpu.max": "800000 100000\n"}}, 3, 3},
		{"v2 one CPU in the mask", cgTree{v2Cgroup, v2Mounts, map[string]string{"sys/fs/cgroup/cpu.max": "50000 100000\n"}}, 1, 1},
		{"v2 nested path", cgTree{"0::/kubepods/pod7/c1\n", v2Mounts,
			map[string]string{"sys/fs/cgroup/kubepods/pod7/c1/cpu.max": "200000 100000\n", "sys/fs/cgroup/cpu.max": "max 100000\n"}}, 16, 2},
		{"v2 mount of a subtree", cgTree{"0::/kubepods/pod7/c1\n",
			"24 1 0:22 /kubepods/pod7 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
			map[string]string{"sys/fs/cgroup/c1/cpu.max": "600000 100000\n"}}, 16, 6},
		{"v1 hybrid 2.2 CPUs", cgTree{hybridCgroup, hybridMounts, map[string]string{
			"sys/fs/cgroup/cpu,cpuacct/job/42/cpu.cfs_quota_us":  "220000\n",
			"sys/fs/cgroup/cpu,cpuacct/job/42/cpu.cfs_period_us": "100000\n",
			"sys/fs/cgroup/unified/cpu.max":                      "100000 100000\n"}}, 16, 3},
		{"v1 no limit", cgTree{hybridCgroup, hybridMounts, map[string]string{
			"sys/fs/cgroup/cpu,cpuacct/job/42/cpu.cfs_quota_us":  "-1\n",
			"sys/fs/cgroup/cpu,cpuacct/job/42/cpu.cfs_period_us": "100000\n"}}, 16, 16},
		{"mount point with a space", cgTree{v2Cgroup, `24 1 0:22 / /sys/fs/c\040g rw - cgroup2 cgroup2 rw` + "\n",
			map[string]string{"sys/fs/c g/cpu.max": "400000 100000\n"}}, 16, 4},
		{"malformed cpu.max", cgTree{v2Cgroup, v2Mounts, map[string]string{"sys/fs/cgroup/cpu.max": "lots\n"}}, 16, 16},
		{"no cpu.max", cgTree{v2Cgroup, v2Mounts, nil}, 16, 16},
		{"no cgroup mounted", cgTree{v2Cgroup, "", nil}, 16, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cpuLimit(tc.tree.build(t), tc.cpus); got != tc.want {
				t.Fatalf("cpuLimit = %d, want %d", got, tc.want)
			}
		})
	}
	lim := CPULimit()
	for range limitRefind + 1 { // finding the cgroup, and reusing it
		if n := lim(); n < 1 || n > runtime.NumCPU() {
			t.Fatalf("CPULimit() = %d on a machine of %d CPUs", n, runtime.NumCPU())
		}
	}
}

// The limiter keeps the cgroup's directory between readings (a changed
// limit is seen at once) and finds it again when its files went (the
// process moved to another cgroup).
func TestLimiterFollowsChanges(t *testing.T) {
	root := cgTree{"0::/a\n", v2Mounts, map[string]string{"sys/fs/cgroup/a/cpu.max": "400000 100000\n"}}.build(t)
	write := func(p, c string) {
		t.Helper()
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := limiter{root: root}
	check := func(want int, what string) {
		t.Helper()
		if got := l.limit(16); got != want {
			t.Fatalf("%s: limit %d, want %d", what, got, want)
		}
	}
	check(4, "first")
	write("sys/fs/cgroup/a/cpu.max", "300000 100000\n")
	check(3, "the limit lowered")
	write("proc/self/cgroup", "0::/b\n")
	write("sys/fs/cgroup/b/cpu.max", "600000 100000\n")
	check(3, "moved, the old cgroup still there (seen at the next refind)")
	if err := os.RemoveAll(filepath.Join(root, "sys/fs/cgroup/a")); err != nil {
		t.Fatal(err)
	}
	check(6, "the old cgroup gone")
	write("sys/fs/cgroup/b/cpu.max", "max 100000\n")
	check(16, "the limit lifted")
}

// The Controller follows a change of the CPUs the process may use: a
// lower limit takes the count down at once (why Limit), a higher one
// lets the policy go up to it under load.
func TestControllerFollowsLimit(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(before)
	var limit atomic.Int64
	limit.Store(2)
	pol := DefaultPolicy(2)
	pol.DownAfter = 1 << 30 // only the limit takes it down here
	var mu sync.Mutex
	var changes []Why
	procs := make(chan int, 64)
	asked := make(chan struct{}, 1) // Run took its baseline
	c := New(Config{Policy: pol, Interval: 10 * time.Millisecond, LimitEvery: 1,
		Limit: func() int {
			select {
			case asked <- struct{}{}:
			default:
			}
			return int(limit.Load())
		},
		OnChange: func(from, to int, why Why, s Sample) {
			mu.Lock()
			changes = append(changes, why)
			mu.Unlock()
			procs <- to
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor := procsWaiter(t, procs)
	<-asked
	limit.Store(1)
	waitFor(1, "limit lowered")

	limit.Store(3)
	stop := spin(3)
	defer stop()
	waitFor(2, "limit raised, busy")
	waitFor(3, "busy up to the new limit")
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(changes) != 3 || changes[0] != Limit || changes[1] == Limit || changes[2] == Limit {
		t.Fatalf("changes %v, want limit, then busy (or waiting) twice", changes)
	}
}
