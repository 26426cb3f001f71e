package nfstest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsproto"
)

// Sizes are the file sizes every data test writes and reads back:
// empty, one byte, either side of a 4 KiB page, and past 1 MiB by a
// non-multiple of 4 (the XDR pad).
var Sizes = []int{0, 1, 4095, 4097, 1<<20 + 3}

// Ctx is a context that ends with the test (or after two minutes).
func Ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Pattern is n deterministic pseudo-random bytes.
func Pattern(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// FirstDiff is the index of the first differing byte, or -1.
func FirstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// V3RoundTrip creates name, writes size bytes, checks the size attribute,
// reads the file back and compares byte for byte (and against the file
// on the server's disk when dir is known).
func V3RoundTrip(t *testing.T, ctx context.Context, c *nfsclient.V3, root []byte, name string, size int, stable uint32, dir string) {
	t.Helper()
	fh, err := c.Create(ctx, root, name, nfsproto.CreateUnchecked, nfsproto.Sattr3{SetMode: true, Mode: 0o644})
	if err != nil {
		t.Fatalf("CREATE: %v", err)
	}
	want := Pattern(size, uint64(stable))
	if err := c.WriteAll(ctx, fh, want, nfsclient.IOOptions{Chunk: 256 << 10, Concurrency: 3, Stable: stable}); err != nil {
		t.Fatal(err)
	}
	a, err := c.Getattr(ctx, fh)
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != uint64(size) || a.Type != nfsproto.NF3Reg {
		t.Fatalf("GETATTR: size %d type %d, want %d regular", a.Size, a.Type, size)
	}
	got, err := c.ReadAll(ctx, fh, int64(size), nfsclient.IOOptions{Chunk: 256 << 10, Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	if i := FirstDiff(got, want); i >= 0 {
		t.Fatalf("read back differs at byte %d", i)
	}
	// A READ past the end: no data, eof.
	data, eof, err := c.Read(ctx, fh, uint64(size), 100)
	if err != nil || len(data) != 0 || !eof {
		t.Fatalf("READ at EOF: %d bytes eof=%v err=%v", len(data), eof, err)
	}
	if dir != "" {
		disk, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if i := FirstDiff(disk, want); i >= 0 {
			t.Fatalf("file on the server's disk differs at byte %d", i)
		}
	}
}

// V3Namespace exercises the directory procedures against any server.
func V3Namespace(t *testing.T, ctx context.Context, c *nfsclient.V3, root []byte) {
	if err := c.Null(ctx); err != nil {
		t.Fatalf("NULL: %v", err)
	}
	dir, names := v3BigDir(t, ctx, c, root)
	v3Symlink(t, ctx, c, root, dir)
	v3EmptyDir(t, ctx, c, root, dir, names)
	v3Attrs(t, ctx, c, root)
}

// v3BigDir makes the directory d with enough entries that a small
// maxcount needs many READDIRPLUS calls, and checks that READDIRPLUS
// lists them all, with handles and attributes; d and the names.
func v3BigDir(t *testing.T, ctx context.Context, c *nfsclient.V3, root []byte) ([]byte, []string) {
	t.Helper()
	dir, err := c.Mkdir(ctx, root, "d", 0o755)
	if err != nil {
		t.Fatalf("MKDIR: %v", err)
	}
	if _, err := c.Mkdir(ctx, root, "d", 0o755); !errors.Is(err, nfsproto.NFS3ErrExist) {
		t.Fatalf("second MKDIR: %v, want NFS3ERR_EXIST", err)
	}
	const n = 300
	var want []string
	for i := range n {
		name := fmt.Sprintf("entry-with-a-longish-name-%04d", i)
		if _, err := c.Create(ctx, dir, name, nfsproto.CreateGuarded, nfsproto.Sattr3{SetMode: true, Mode: 0o600}); err != nil {
			t.Fatalf("CREATE %s: %v", name, err)
		}
		want = append(want, name)
	}
	if _, err := c.Create(ctx, dir, want[0], nfsproto.CreateGuarded, nfsproto.Sattr3{}); !errors.Is(err, nfsproto.NFS3ErrExist) {
		t.Fatalf("GUARDED CREATE of an existing name: %v", err)
	}
	ents, err := c.ReadDirPlus(ctx, dir, 4096)
	if err != nil {
		t.Fatalf("READDIRPLUS: %v", err)
	}
	var got []string
	for _, e := range ents {
		if e.Name == "." || e.Name == ".." {
			continue
		}
		if e.FH == nil || e.Attr == nil || e.Attr.FileID != e.FileID {
			t.Fatalf("entry %q: fh %x attr %+v fileid %d", e.Name, e.FH, e.Attr, e.FileID)
		}
		got = append(got, e.Name)
	}
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("READDIRPLUS listed %d names, want %d", len(got), len(want))
	}
	return dir, want
}

// v3Symlink makes a symlink in dir, reads it, and renames it to the root
// as moved-link.
func v3Symlink(t *testing.T, ctx context.Context, c *nfsclient.V3, root, dir []byte) {
	t.Helper()
	target := "../some/where/" + string(Pattern(1, 1)[:0]) + "target-of-3-bytes-pad"
	lnk, err := c.Symlink(ctx, dir, "link", target)
	if err != nil {
		t.Fatalf("SYMLINK: %v", err)
	}
	if got, err := c.Readlink(ctx, lnk); err != nil || got != target {
		t.Fatalf("READLINK: %q %v", got, err)
	}
	if err := c.Rename(ctx, dir, "link", root, "moved-link"); err != nil {
		t.Fatalf("RENAME: %v", err)
	}
	if _, _, err := c.Lookup(ctx, dir, "link"); !errors.Is(err, nfsproto.NFS3ErrNoEnt) {
		t.Fatalf("LOOKUP of renamed-away name: %v", err)
	}
	if fh, a, err := c.Lookup(ctx, root, "moved-link"); err != nil || a.Type != nfsproto.NF3Lnk || len(fh) == 0 {
		t.Fatalf("LOOKUP moved-link: %v type %d", err, a.Type)
	}
}

// v3EmptyDir checks that d cannot be removed while it has entries, then
// removes them (names), d and moved-link.
func v3EmptyDir(t *testing.T, ctx context.Context, c *nfsclient.V3, root, dir []byte, names []string) {
	t.Helper()
	if err := c.Rmdir(ctx, root, "d"); !errors.Is(err, nfsproto.NFS3ErrNotEmpty) {
		t.Fatalf("RMDIR of a non-empty directory: %v", err)
	}
	for _, name := range names {
		if err := c.Remove(ctx, dir, name); err != nil {
			t.Fatalf("REMOVE %s: %v", name, err)
		}
	}
	if err := c.Rmdir(ctx, root, "d"); err != nil {
		t.Fatalf("RMDIR: %v", err)
	}
	if err := c.Remove(ctx, root, "moved-link"); err != nil {
		t.Fatalf("REMOVE link: %v", err)
	}
}

// v3Attrs checks SETATTR, GETATTR, ACCESS, FSSTAT, FSINFO and PATHCONF,
// and that a bogus handle is refused.
func v3Attrs(t *testing.T, ctx context.Context, c *nfsclient.V3, root []byte) {
	t.Helper()
	f, err := c.Create(ctx, root, "attrs", nfsproto.CreateUnchecked, nfsproto.Sattr3{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Setattr(ctx, f, nfsproto.Sattr3{SetMode: true, Mode: 0o640, SetSize: true, Size: 12345}); err != nil {
		t.Fatalf("SETATTR: %v", err)
	}
	a, err := c.Getattr(ctx, f)
	if err != nil || a.Size != 12345 || a.Mode&0o777 != 0o640 {
		t.Fatalf("GETATTR after SETATTR: %+v %v", a, err)
	}
	if acc, err := c.Access(ctx, f, nfsproto.Access3Read|nfsproto.Access3Modify); err != nil || acc&nfsproto.Access3Read == 0 {
		t.Fatalf("ACCESS: %#x %v", acc, err)
	}
	if s, err := c.Fsstat(ctx, root); err != nil || s.TBytes == 0 {
		t.Fatalf("FSSTAT: %+v %v", s, err)
	}
	if s, err := c.Fsinfo(ctx, root); err != nil || s.RTMax == 0 || s.WTMax == 0 {
		t.Fatalf("FSINFO: %+v %v", s, err)
	}
	if _, err := c.Pathconf(ctx, root); err != nil {
		t.Fatalf("PATHCONF: %v", err)
	}
	if _, err := c.Getattr(ctx, []byte("not a handle")); err == nil {
		t.Fatal("GETATTR of a bogus handle succeeded")
	}
}
