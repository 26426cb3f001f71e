package nfstest

import (
	"os/exec"
	"testing"
)

// LibNFSTool returns the path of a libnfs-utils tool (nfs-cp, nfs-cat,
// nfs-ls) or skips the test.
func LibNFSTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed (apt-get install libnfs-utils)", name)
	}
	return p
}
