package nfsmem_test

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/oncrpc"
)

// TestRPCErrors checks the RPC-level answers: unknown program, version,
// procedure, undecodable arguments, and the NOTSUPP procedures.
func TestRPCErrors(t *testing.T) {
	_, addr := start(t)
	ctx := nfstest.Ctx(t)
	tr := dial(t, ctx, addr)
	cases := []struct {
		name             string
		prog, vers, proc uint32
		args             []byte
		want             oncrpc.AcceptStat
	}{
		{"unknown program", 100099, 1, 0, nil, oncrpc.ProgUnavail},
		{"NFSv2", nfsproto.ProgNFS, 2, 0, nil, oncrpc.ProgMismatch},
		{"MOUNT v1", nfsproto.ProgMount, 1, 0, nil, oncrpc.ProgMismatch},
		{"NFSv3 proc 22", nfsproto.ProgNFS, 3, 22, nil, oncrpc.ProcUnavail},
		{"NFSv3 proc 1<<31", nfsproto.ProgNFS, 3, 1 << 31, nil, oncrpc.ProcUnavail},
		{"MOUNT proc 6", nfsproto.ProgMount, 3, 6, nil, oncrpc.ProcUnavail},
		{"GETATTR without args", nfsproto.ProgNFS, 3, nfsproto.NFS3Getattr, nil, oncrpc.GarbageArgs},
		{"GETATTR handle too long", nfsproto.ProgNFS, 3, nfsproto.NFS3Getattr, []byte{0, 0, 0, 65}, oncrpc.GarbageArgs},
		{"READ truncated", nfsproto.ProgNFS, 3, nfsproto.NFS3Read, []byte{0, 0, 0, 16, 1, 2, 3}, oncrpc.GarbageArgs},
		{"WRITE bad stable_how", nfsproto.ProgNFS, 3, nfsproto.NFS3Write,
			append(append([]byte{0, 0, 0, 0}, make([]byte, 12)...), 0, 0, 0, 7, 0, 0, 0, 0), oncrpc.GarbageArgs},
		{"CREATE bad mode", nfsproto.ProgNFS, 3, nfsproto.NFS3Create, []byte{0, 0, 0, 0, 0, 0, 0, 1, 'a', 0, 0, 0, 0, 0, 0, 9}, oncrpc.GarbageArgs},
		{"MNT path too long", nfsproto.ProgMount, 3, nfsproto.MountMnt, []byte{0, 0, 0x10, 0}, oncrpc.GarbageArgs},
	}
	for _, c := range cases {
		_, err := tr.Call(ctx, c.prog, c.vers, c.proc, c.args)
		got, ok := nfsclient.AcceptStat(err)
		if !ok || got != c.want {
			t.Errorf("%s: %v, want accept_stat %d", c.name, err, c.want)
		}
		var re *nfsclient.RPCError
		if c.want == oncrpc.ProgMismatch && errors.As(err, &re) && (re.Reply.Low != 3 || re.Reply.High != 3) {
			t.Errorf("%s: mismatch range %d-%d, want 3-3", c.name, re.Reply.Low, re.Reply.High)
		}
	}

	c, root := mount(t, ctx, addr)
	fh, err := c.Create(ctx, root, "f", nfsproto.CreateUnchecked, nfsproto.Sattr3{})
	if err != nil {
		t.Fatal(err)
	}
	// MKNOD of a FIFO and LINK: NFS3ERR_NOTSUPP.
	mknod := append(append(append([]byte{0, 0, 0, 16}, root...), 0, 0, 0, 1, 'p', 0, 0, 0, 0, 0, 0, nfsproto.NF3Fifo), make([]byte, 6*4)...)
	res, err := tr.Call(ctx, nfsproto.ProgNFS, 3, nfsproto.NFS3Mknod, mknod)
	if err != nil || status(res) != nfsproto.NFS3ErrNotSupp {
		t.Fatalf("MKNOD: %x %v", res, err)
	}
	link := append(append(append(append([]byte{0, 0, 0, 16}, fh...), 0, 0, 0, 16), root...), 0, 0, 0, 1, 'l', 0, 0, 0)
	res, err = tr.Call(ctx, nfsproto.ProgNFS, 3, nfsproto.NFS3Link, link)
	if err != nil || status(res) != nfsproto.NFS3ErrNotSupp {
		t.Fatalf("LINK: %x %v", res, err)
	}
}

// status is the nfsstat3 that starts results.
func status(res []byte) nfsproto.Status {
	if len(res) < 4 {
		return 0xffffffff
	}
	return nfsproto.Status(binary.BigEndian.Uint32(res))
}

// TestRandomArguments sends every procedure random and truncated
// arguments: each call gets an answer (results or GARBAGE_ARGS), the
// connection survives, and the server still works afterwards.
func TestRandomArguments(t *testing.T) {
	_, addr := start(t)
	ctx := nfstest.Ctx(t)
	c, root := mount(t, ctx, addr)
	fh, err := c.Create(ctx, root, "victim", nfsproto.CreateUnchecked, nfsproto.Sattr3{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for proc := uint32(0); proc < nfsproto.NFS3NumProcs; proc++ {
		for i := range 200 {
			var args []byte
			if i%2 == 0 { // a valid handle, then noise: gets past the first field
				args = append([]byte{0, 0, 0, byte(len(fh))}, fh...)
			}
			for range r.IntN(120) {
				args = append(args, byte(r.Uint32()>>(8*r.IntN(4))))
			}
			_, err := c.T.Call(ctx, nfsproto.ProgNFS, 3, proc, args)
			if err != nil {
				if st, ok := nfsclient.AcceptStat(err); !ok || st != oncrpc.GarbageArgs {
					t.Fatalf("proc %d args %x: %v", proc, args, err)
				}
			}
		}
	}
	for proc := uint32(0); proc <= nfsproto.MountExport; proc++ {
		for range 50 {
			args := make([]byte, r.IntN(40))
			for i := range args {
				args[i] = byte(r.Uint32())
			}
			if _, err := c.T.Call(ctx, nfsproto.ProgMount, 3, proc, args); err != nil {
				if st, ok := nfsclient.AcceptStat(err); !ok || st != oncrpc.GarbageArgs {
					t.Fatalf("mount proc %d: %v", proc, err)
				}
			}
		}
	}
	if _, err := c.Getattr(ctx, root); err != nil {
		t.Fatalf("server unusable after random arguments: %v", err)
	}
}
