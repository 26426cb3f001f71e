package nfsclient_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/internal/nfstest"
)

// mountV3 mounts export over TCP and returns the NFSv3 client and root.
func mountV3(t *testing.T, ctx context.Context, nfsAddr, mountAddr, export string) (*nfsclient.V3, []byte) {
	t.Helper()
	root := nfstest.MountRoot(t, ctx, mountAddr, export)
	nt, err := nfsclient.DialTCP(ctx, nfsAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nt.Close() })
	return &nfsclient.V3{T: nt}, root
}

func TestV3GaneshaFiles(t *testing.T) {
	g := nfstest.StartGanesha(t)
	ctx := nfstest.Ctx(t)
	c, root := mountV3(t, ctx, g.NFSAddr, g.MountAddr, g.Export)
	for _, stable := range []uint32{nfsproto.Unstable, nfsproto.FileSync} {
		for _, size := range nfstest.Sizes {
			name := fmt.Sprintf("f-%d-%d", stable, size)
			t.Run(name, func(t *testing.T) { nfstest.V3RoundTrip(t, ctx, c, root, name, size, stable, g.Dir) })
		}
	}
}

func TestV3GaneshaNamespace(t *testing.T) {
	g := nfstest.StartGanesha(t)
	ctx := nfstest.Ctx(t)
	mt, err := nfsclient.DialTCP(ctx, g.MountAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer mt.Close()
	m := &nfsclient.Mount{T: mt}
	exports, err := m.Exports(ctx)
	if err != nil || len(exports) == 0 || exports[0].Dir != g.Export {
		t.Fatalf("EXPORT: %+v %v", exports, err)
	}
	c, root := mountV3(t, ctx, g.NFSAddr, g.MountAddr, g.Export)
	nfstest.V3Namespace(t, ctx, c, root)
	if err := m.Umnt(ctx, g.Export); err != nil {
		t.Fatalf("UMNT: %v", err)
	}
}
