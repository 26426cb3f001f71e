package nfsmem_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/internal/nfstest"
)

// libnfsURL names path on the server at addr for the libnfs tools: both
// ports given, so libnfs asks no portmapper. libnfs mounts the path's
// directory; for the root it mounts "", and its nested-export discovery
// (auto-traverse-mounts) refuses an empty export ("Export is empty"),
// whatever the server, so that is turned off.
func libnfsURL(addr, path string) string {
	_, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf("nfs://127.0.0.1/%s?nfsport=%s&mountport=%s&auto-traverse-mounts=0", strings.TrimPrefix(path, "/"), port, port)
}

func runTool(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, nfstest.LibNFSTool(t, name), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return out
}

// TestLibNFS copies files of every test size into the server with
// nfs-cp, reads them back with nfs-cat and nfs-cp, and compares byte for
// byte; then checks the listing with nfs-ls and the attributes with our
// client.
func TestLibNFS(t *testing.T) {
	nfstest.LibNFSTool(t, "nfs-cp")
	_, addr := start(t)
	dir := t.TempDir()
	for _, size := range append(nfstest.Sizes, 3<<20+1) {
		name := fmt.Sprintf("file-%d", size)
		want := nfstest.Pattern(size, 7)
		local := filepath.Join(dir, name)
		if err := os.WriteFile(local, want, 0o644); err != nil {
			t.Fatal(err)
		}
		runTool(t, "nfs-cp", local, libnfsURL(addr, name))
		if size > 0 { // nfs-cat of an empty file prints nothing either way
			got := runTool(t, "nfs-cat", libnfsURL(addr, name))
			if i := nfstest.FirstDiff(got, want); i >= 0 {
				t.Fatalf("%s: nfs-cat differs at byte %d (%d bytes back)", name, i, len(got))
			}
		}
		back := filepath.Join(dir, name+".back")
		runTool(t, "nfs-cp", libnfsURL(addr, name), back)
		got, err := os.ReadFile(back)
		if err != nil {
			t.Fatal(err)
		}
		if i := nfstest.FirstDiff(got, want); i >= 0 {
			t.Fatalf("%s: nfs-cp back differs at byte %d", name, i)
		}
	}
	ls := runTool(t, "nfs-ls", libnfsURL(addr, "/"))
	for _, size := range nfstest.Sizes {
		if !bytes.Contains(ls, []byte(fmt.Sprintf("file-%d", size))) {
			t.Fatalf("nfs-ls lacks file-%d:\n%s", size, ls)
		}
	}
	ctx := nfstest.Ctx(t)
	c, root := mount(t, ctx, addr)
	_, a, err := c.Lookup(ctx, root, "file-4097")
	if err != nil || a.Size != 4097 || a.Type != nfsproto.NF3Reg {
		t.Fatalf("LOOKUP file-4097: %+v %v", a, err)
	}
}

// TestLibNFSBigDirectory lists a directory that needs several
// READDIRPLUS calls with nfs-ls.
func TestLibNFSBigDirectory(t *testing.T) {
	nfstest.LibNFSTool(t, "nfs-ls")
	_, addr := start(t)
	ctx := nfstest.Ctx(t)
	c, root := mount(t, ctx, addr)
	d, err := c.Mkdir(ctx, root, "big", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	for i := range n {
		if _, err := c.Create(ctx, d, fmt.Sprintf("entry-%05d", i), nfsproto.CreateGuarded, nfsproto.Sattr3{}); err != nil {
			t.Fatal(err)
		}
	}
	// A subdirectory mount with libnfs's default nested-export discovery.
	_, port, _ := net.SplitHostPort(addr)
	ls := runTool(t, "nfs-ls", fmt.Sprintf("nfs://127.0.0.1/big?nfsport=%s&mountport=%s", port, port))
	got := bytes.Count(ls, []byte("entry-"))
	if got != n {
		t.Fatalf("nfs-ls listed %d entries, want %d", got, n)
	}
}
