package autoprocs

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CPULimit returns a reader of how many CPUs the process may use now,
// counted as Go's runtime counts them for its default GOMAXPROCS (Go
// 1.25 and later): the CPUs of its affinity mask, capped by the bandwidth
// limit of its CPU cgroup (v2 cpu.max; v1 cpu.cfs_quota_us over
// cpu.cfs_period_us), a fraction rounded up and at least 2. The runtime
// follows changes of either (a container resized in place, a new cpuset)
// only while nothing set GOMAXPROCS; the Controller sets it, so it asks
// this instead (Config.Limit). The reader answers 0 when the affinity
// mask cannot be read. It finds the cgroup's directory (from
// /proc/self/cgroup and mountinfo, which is long on a host with many
// mounts) once every limitRefind calls, or after its files could not be
// read, and reads only the limit in between. One goroutine calls it.
func CPULimit() func() int {
	l := limiter{root: "/"}
	return func() int {
		var set unix.CPUSet
		if unix.SchedGetaffinity(0, &set) != nil {
			return 0
		}
		return l.limit(set.Count())
	}
}

// limitRefind is how many CPULimit calls reuse the cgroup's directory.
const limitRefind = 10

// limiter reads the CPU limit under root (a test's tree; "/" for the
// process's own), keeping where the cgroup's files are.
type limiter struct {
	root  string
	dir   string
	v2    bool
	found bool
	calls int
}

// limit is the CPU count for cpus CPUs in the affinity mask. An
// unreadable or malformed cgroup counts as no limit.
func (l *limiter) limit(cpus int) int {
	if !l.found || l.calls%limitRefind == 0 {
		l.find()
	}
	l.calls++
	q, ok, err := l.read()
	if err != nil { // moved to another cgroup, or it went: find it again
		l.find()
		q, ok, err = l.read()
	}
	if err != nil || !ok {
		return cpus
	}
	return min(cpus, max(2, int(math.Ceil(q))))
}

func (l *limiter) find() { l.dir, l.v2, l.found = cpuCgroupDir(l.root) }

// read reads the limit where find found it (none when it found nothing).
func (l *limiter) read() (float64, bool, error) {
	if !l.found {
		return 0, false, nil
	}
	return cgroupQuota(l.dir, l.v2)
}

// cpuLimit is one reading of the limit under root for cpus CPUs.
func cpuLimit(root string, cpus int) int {
	l := limiter{root: root}
	return l.limit(cpus)
}

// cgroupQuota is the CPU bandwidth limit of the CPU cgroup whose files
// are in dir (v2: the unified hierarchy's), in CPUs (quota over period),
// and whether there is one; err when a file cannot be read.
func cgroupQuota(dir string, v2 bool) (float64, bool, error) {
	if v2 {
		b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
		if err != nil {
			return 0, false, err
		}
		f := strings.Fields(string(b))
		if len(f) != 2 || f[0] == "max" {
			return 0, false, nil
		}
		q, ok := ratio(f[0], f[1])
		return q, ok, nil
	}
	quota, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
	if err != nil {
		return 0, false, err
	}
	period, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
	if err != nil {
		return 0, false, err
	}
	q, ok := ratio(strings.TrimSpace(string(quota)), strings.TrimSpace(string(period)))
	return q, ok, nil
}

// ratio is quota/period for a positive quota and period (v1 writes -1
// for no limit).
func ratio(quota, period string) (float64, bool) {
	q, err1 := strconv.ParseInt(quota, 10, 64)
	p, err2 := strconv.ParseInt(period, 10, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0, false
	}
	return float64(q) / float64(p), true
}

// cpuCgroupDir finds the directory of the process's CPU cgroup from
// /proc/self/cgroup (its path in each hierarchy) and /proc/self/mountinfo
// (where each hierarchy is mounted, and which part of it), both under
// root; v2 says it is on the unified hierarchy. A cpu controller on a v1
// hierarchy is the one in force (hybrid systems mount both); otherwise
// the unified hierarchy's.
func cpuCgroupDir(root string) (dir string, v2, ok bool) {
	cg, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return "", false, false
	}
	var path string
	found := false
	for line := range strings.Lines(string(cg)) {
		// hierarchy-ID:controller-list:cgroup-path
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			if !found {
				path, v2, found = f[2], true, true
			}
			continue
		}
		if hasOption(f[1], "cpu") {
			path, v2, found = f[2], false, true
		}
	}
	if !found {
		return "", false, false
	}
	mi, err := os.Open(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return "", false, false
	}
	defer mi.Close()
	sc := bufio.NewScanner(mi)
	for sc.Scan() {
		// id parent major:minor root mount-point options [optional...] - fstype source super-options
		pre, post, ok := bytes.Cut(sc.Bytes(), []byte(" - "))
		if !ok {
			continue
		}
		f, g := strings.Fields(string(pre)), strings.Fields(string(post))
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		switch {
		case v2 && g[0] == "cgroup2":
		case !v2 && g[0] == "cgroup" && hasOption(g[2], "cpu"):
		default:
			continue
		}
		// The mount shows its hierarchy from f[3] down: the cgroup's
		// path below that is where it lies under the mount point.
		mroot, mpoint := unescape(f[3]), unescape(f[4])
		rel, ok := strings.CutPrefix(path, mroot)
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/") && mroot != "/") {
			continue
		}
		return filepath.Join(root, mpoint, rel), v2, true
	}
	return "", false, false
}

// hasOption reports whether the comma-separated list opts (a cgroup's
// controllers, a mount's super options) holds o.
func hasOption(opts, o string) bool { return slices.Contains(strings.Split(opts, ","), o) }

// unescape undoes mountinfo's octal escapes (\040 for a space...).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
