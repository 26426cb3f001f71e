package nfstest

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfstest/ganesha"
)

// Ganesha is a running nfs-ganesha (see package internal/nfstest/ganesha,
// which starts it and which tests of packages that internal/nfstest
// imports, such as gateway/auxrelay, use directly).
type Ganesha = ganesha.Server

// StartGanesha starts a private nfs-ganesha serving NFS and MOUNT v3 over
// TCP for the test (stopped at its cleanup), or skips the test, saying
// why, when ganesha cannot run here. With
// RDMAGW_GANESHA="nfsaddr,mountaddr,export" set it uses that server
// instead.
func StartGanesha(t testing.TB) *Ganesha {
	t.Helper()
	if env := os.Getenv("RDMAGW_GANESHA"); env != "" {
		f := strings.Split(env, ",")
		if len(f) != 3 {
			t.Fatalf("RDMAGW_GANESHA=%q: want nfsaddr,mountaddr,export", env)
		}
		return &Ganesha{NFSAddr: f[0], MountAddr: f[1], Export: f[2]}
	}
	return ganesha.Start(t, ganesha.Options{})
}

// FreePorts returns n distinct loopback TCP ports that were free a moment
// ago.
func FreePorts(t testing.TB, n int) []int { return ganesha.FreePorts(t, n, false) }

// MountRoot mounts export at the MOUNT v3 server at mountAddr and returns
// its root file handle, failing t if it cannot.
func MountRoot(t testing.TB, ctx context.Context, mountAddr, export string) []byte {
	t.Helper()
	root, err := nfsclient.MountRoot(ctx, mountAddr, export)
	if err != nil {
		t.Fatal(err)
	}
	return root
}
