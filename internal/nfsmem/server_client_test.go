package nfsmem_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsmem"
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/internal/nfstest"
)

// start runs a server on a free loopback port for the test.
func start(t *testing.T) (*nfsmem.Server, string) {
	t.Helper()
	s := nfsmem.New(nfsmem.Config{})
	addr, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, addr.String()
}

// dial connects our client to the server at addr over TCP, until the
// test ends.
func dial(t *testing.T, ctx context.Context, addr string) *nfsclient.TCP {
	t.Helper()
	tr, err := nfsclient.DialTCP(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// mount mounts "/" of the server at addr with our client.
func mount(t *testing.T, ctx context.Context, addr string) (*nfsclient.V3, []byte) {
	t.Helper()
	tr := dial(t, ctx, addr)
	root, flavors, err := (&nfsclient.Mount{T: tr}).Mnt(ctx, "/")
	if err != nil || len(flavors) == 0 {
		t.Fatalf("MNT: %v %v", flavors, err)
	}
	return &nfsclient.V3{T: tr}, root
}

func TestOwnClientFiles(t *testing.T) {
	_, addr := start(t)
	ctx := nfstest.Ctx(t)
	c, root := mount(t, ctx, addr)
	for _, stable := range []uint32{nfsproto.Unstable, nfsproto.FileSync} {
		for _, size := range nfstest.Sizes {
			name := fmt.Sprintf("f-%d-%d", stable, size)
			t.Run(name, func(t *testing.T) { nfstest.V3RoundTrip(t, ctx, c, root, name, size, stable, "") })
		}
	}
}

func TestOwnClientNamespace(t *testing.T) {
	_, addr := start(t)
	ctx := nfstest.Ctx(t)
	tr := dial(t, ctx, addr)
	exports, err := (&nfsclient.Mount{T: tr}).Exports(ctx)
	if err != nil || len(exports) != 1 || exports[0].Dir != "/" {
		t.Fatalf("EXPORT: %+v %v", exports, err)
	}
	c, root := mount(t, ctx, addr)
	nfstest.V3Namespace(t, ctx, c, root)
}

// TestAttributes checks what the server promises about attributes: sizes
// follow writes, mtime/ctime move on change, file ids are distinct and
// stable, and a removed file's handle is stale.
func TestAttributes(t *testing.T) {
	_, addr := start(t)
	ctx := nfstest.Ctx(t)
	c, root := mount(t, ctx, addr)
	a, err := c.Create(ctx, root, "a", nfsproto.CreateUnchecked, nfsproto.Sattr3{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Create(ctx, root, "b", nfsproto.CreateUnchecked, nfsproto.Sattr3{})
	if err != nil {
		t.Fatal(err)
	}
	aa, _ := c.Getattr(ctx, a)
	ba, _ := c.Getattr(ctx, b)
	if aa.FileID == ba.FileID || aa.Size != 0 || aa.Nlink != 1 {
		t.Fatalf("attrs %+v %+v", aa, ba)
	}
	if _, err := c.Write(ctx, a, 10, []byte("hello"), nfsproto.FileSync); err != nil {
		t.Fatal(err)
	}
	a2, _ := c.Getattr(ctx, a)
	if a2.Size != 15 || a2.FileID != aa.FileID || !a2.Mtime.Go().After(aa.Mtime.Go()) && a2.Mtime != aa.Mtime {
		t.Fatalf("after write: %+v", a2)
	}
	data, eof, err := c.Read(ctx, a, 0, 100)
	if err != nil || !eof || string(data) != "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00hello" {
		t.Fatalf("READ %q %v %v", data, eof, err)
	}
	ra, _ := c.Getattr(ctx, root)
	if ra.Type != nfsproto.NF3Dir || ra.Nlink < 2 {
		t.Fatalf("root attrs %+v", ra)
	}
	if err := c.Remove(ctx, root, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Getattr(ctx, a); err != nfsproto.NFS3ErrStale {
		t.Fatalf("GETATTR of a removed file: %v", err)
	}
	if _, _, err := c.Lookup(ctx, root, ".."); err != nil {
		t.Fatalf("LOOKUP ..: %v", err)
	}
	// EXCLUSIVE create: a retransmission with the same verifier succeeds.
	if _, err := c.Create(ctx, root, "x", nfsproto.CreateGuarded, nfsproto.Sattr3{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, root, "x", nfsproto.CreateGuarded, nfsproto.Sattr3{}); err != nfsproto.NFS3ErrExist {
		t.Fatalf("GUARDED over existing: %v", err)
	}
}

// TestReaddir lists a directory with plain READDIR in small replies,
// following cookies, and checks every name comes exactly once.
func TestReaddir(t *testing.T) {
	_, addr := start(t)
	ctx := nfstest.Ctx(t)
	c, root := mount(t, ctx, addr)
	want := map[string]bool{".": true, "..": true}
	for i := range 100 {
		name := fmt.Sprintf("n%03d", i)
		want[name] = true
		if _, err := c.Create(ctx, root, name, nfsproto.CreateGuarded, nfsproto.Sattr3{}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	var cookie uint64
	var verf [nfsproto.VerfSize]byte
	for calls := 0; ; calls++ {
		p, err := c.ReadDir(ctx, root, cookie, verf, 512)
		if err != nil {
			t.Fatal(err)
		}
		if p.Size > 512 {
			t.Fatalf("READDIR count 512: %d-byte reply", p.Size)
		}
		verf = p.Verf
		for _, ent := range p.Entries {
			seen[ent.Name]++
			cookie = ent.Cookie
		}
		eof := p.EOF
		if eof {
			if calls < 3 {
				t.Fatalf("a 512-byte count listed 102 entries in %d calls", calls+1)
			}
			break
		}
	}
	for name := range want {
		if seen[name] != 1 {
			t.Errorf("%s listed %d times", name, seen[name])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("listed %d names, want %d", len(seen), len(want))
	}
}
