package nfsmem

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/xdr"
)

// fuzzInstance is the boot verifier of the fuzz servers, so that their
// handles are the same from one server to the next.
const fuzzInstance = 0x1122334455667788

// fuzzServer is a fresh server holding /f (13 bytes), /d (a directory
// with d/g in it), /l (a symbolic link) and /e (an empty directory). Its
// handles and clock are fixed.
func fuzzServer() *Server {
	s := New(Config{MaxBytes: 1 << 20})
	s.instance = fuzzInstance
	t0 := time.Unix(1700000000, 0)
	s.fs.now = func() time.Time { return t0 }
	root := s.fs.nodes[rootID]
	f := s.fs.newNode(nfsproto.NF3Reg, 0o644)
	s.fs.link(root, "f", f)
	s.fs.write(f, 0, []byte("hello, world\n"))
	d := s.fs.newNode(nfsproto.NF3Dir, 0o755)
	s.fs.link(root, "d", d)
	g := s.fs.newNode(nfsproto.NF3Reg, 0o600)
	s.fs.link(d, "g", g)
	l := s.fs.newNode(nfsproto.NF3Lnk, 0o777)
	l.target = "f"
	s.fs.link(root, "l", l)
	e := s.fs.newNode(nfsproto.NF3Dir, 0o700)
	s.fs.link(root, "e", e)
	return s
}

// fuzzProcs is every procedure the server runs: NFSv3 0..21, then
// MOUNT v3 0..5.
func fuzzProc(sel uint8) (procedure, bool) {
	n := int(sel) % (len(nfs3Procs) + len(mountProcs))
	if n < len(nfs3Procs) {
		return nfs3Procs[n], true
	}
	return mountProcs[n-len(nfs3Procs)], false
}

// fuzzHandle is the opaque nfs_fh3 the fuzz input may start with: none
// (0), or that of the root, /f, /d, /l or /e.
func fuzzHandle(sel uint8) []byte {
	ids := []uint64{0, rootID, 2, 3, 5, 6}
	id := ids[int(sel)%len(ids)]
	if id == 0 {
		return nil
	}
	s := Server{instance: fuzzInstance}
	return append([]byte{0, 0, 0, handleLen}, s.handle(id)...)
}

// runProc runs p over args on a fresh fuzz server and returns the
// results it encoded, the argument bytes it consumed and its error.
func runProc(t *testing.T, p procedure, args []byte) (res []byte, used int, err error) {
	s := fuzzServer()
	size := p.maxReply(nfsproto.NewDec(args))
	if size > smallReply+max(rtmax, maxDirReply, nfsproto.MaxPath) {
		t.Fatalf("maxReply %d", size)
	}
	e := xdr.NewEncoder(make([]byte, size))
	d := nfsproto.NewDec(args)
	err = p.run(s, d, &e)
	if err == nil && e.Err() != nil {
		// The server turns this into SYSTEM_ERR: maxReply is wrong.
		t.Fatalf("results overflow maxReply %d: %v", size, e.Err())
	}
	if err != nil && errors.Is(err, xdr.ErrOverflow) {
		t.Fatalf("results overflow maxReply %d: %v", size, err)
	}
	return e.Bytes(), d.Offset(), err
}

// goldenArgs reads a TCP call capture from testdata/golden and returns
// the procedure's arguments (after the record mark and call header).
func goldenArgs(tb testing.TB, name string) []byte {
	b, err := os.ReadFile("../../testdata/golden/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	var h oncrpc.CallHeader
	n, err := h.Decode(b[4:])
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return b[4+n:]
}

// FuzzProcArgs decodes arbitrary arguments with each procedure of the
// server directly (proc selects it; fh optionally prefixes a valid handle
// of the fuzz tree, so the fuzzer gets past the handle check): no panic,
// results that fit the procedure's maxReply (an overflow would be a
// SYSTEM_ERR reply), and arguments cut short of what a successful decode
// consumed must be GARBAGE_ARGS, not decoded as zeros.
func FuzzProcArgs(f *testing.F) {
	for _, g := range []struct {
		file string
		proc uint8
	}{
		{"nfs3-getattr-call.bin", nfsproto.NFS3Getattr},
		{"nfs3-read-call.bin", nfsproto.NFS3Read},
		{"nfs3-read13-call.bin", nfsproto.NFS3Read},
		{"nfs3-write-call.bin", nfsproto.NFS3Write},
		{"nfs3-write13-call.bin", nfsproto.NFS3Write},
		{"nfs3-commit-call.bin", nfsproto.NFS3Commit},
		{"nfs3-readlink-call.bin", nfsproto.NFS3Readlink},
		{"nfs3-symlink-call.bin", nfsproto.NFS3Symlink},
		{"nfs3-readdirplus-call.bin", nfsproto.NFS3Readdirplus},
		{"nfs3-null-call.bin", nfsproto.NFS3Null},
		{"mount3-mnt-call.bin", nfsproto.NFS3NumProcs + nfsproto.MountMnt},
	} {
		f.Add(g.proc, uint8(0), goldenArgs(f, g.file))
	}
	put := func(fn func(e *xdr.Encoder)) []byte {
		e := xdr.NewEncoder(make([]byte, 512))
		fn(&e)
		return e.Bytes()
	}
	sattr := func(e *xdr.Encoder) {
		(&nfsproto.Sattr3{SetMode: true, Mode: 0o640, SetSize: true, Size: 3, Mtime: nfsproto.SetToClientTime}).Encode(e)
	}
	const hRoot, hFile, hDir, hLink, hEmpty = 1, 2, 3, 4, 5
	seeds := []struct {
		proc, fh uint8
		args     []byte
	}{
		{nfsproto.NFS3Getattr, hFile, nil},
		{nfsproto.NFS3Setattr, hFile, put(func(e *xdr.Encoder) { sattr(e); e.PutBool(false) })},
		{nfsproto.NFS3Lookup, hRoot, put(func(e *xdr.Encoder) { e.PutString("f") })},
		{nfsproto.NFS3Access, hDir, put(func(e *xdr.Encoder) { e.PutUint32(nfsproto.Access3All) })},
		{nfsproto.NFS3Readlink, hLink, nil},
		{nfsproto.NFS3Read, hFile, put(func(e *xdr.Encoder) { e.PutUint64(2); e.PutUint32(100) })},
		{nfsproto.NFS3Write, hFile, put(func(e *xdr.Encoder) {
			e.PutUint64(5)
			e.PutUint32(3)
			e.PutUint32(nfsproto.FileSync)
			e.PutString("abc")
		})},
		{nfsproto.NFS3Create, hRoot, put(func(e *xdr.Encoder) { e.PutString("n"); e.PutUint32(nfsproto.CreateGuarded); sattr(e) })},
		{nfsproto.NFS3Create, hRoot, put(func(e *xdr.Encoder) {
			e.PutString("x")
			e.PutUint32(nfsproto.CreateExclusive)
			e.PutUint64(42)
		})},
		{nfsproto.NFS3Mkdir, hRoot, put(func(e *xdr.Encoder) { e.PutString("m"); sattr(e) })},
		{nfsproto.NFS3Symlink, hDir, put(func(e *xdr.Encoder) { e.PutString("s"); sattr(e); e.PutString("../f") })},
		{nfsproto.NFS3Mknod, hRoot, put(func(e *xdr.Encoder) {
			e.PutString("c")
			e.PutUint32(nfsproto.NF3Chr)
			sattr(e)
			e.PutUint32(1)
			e.PutUint32(2)
		})},
		{nfsproto.NFS3Remove, hRoot, put(func(e *xdr.Encoder) { e.PutString("f") })},
		{nfsproto.NFS3Rmdir, hRoot, put(func(e *xdr.Encoder) { e.PutString("e") })},
		{nfsproto.NFS3Rename, hRoot, put(func(e *xdr.Encoder) {
			e.PutString("f")
			e.PutOpaque(fuzzHandle(hDir)[4:])
			e.PutString("f2")
		})},
		{nfsproto.NFS3Link, hFile, put(func(e *xdr.Encoder) { e.PutOpaque(fuzzHandle(hRoot)[4:]); e.PutString("h") })},
		{nfsproto.NFS3Readdir, hRoot, put(func(e *xdr.Encoder) { e.PutUint64(0); e.PutUint64(0); e.PutUint32(4096) })},
		{nfsproto.NFS3Readdirplus, hDir, put(func(e *xdr.Encoder) {
			e.PutUint64(0)
			e.PutUint64(0)
			e.PutUint32(512)
			e.PutUint32(4096)
		})},
		{nfsproto.NFS3Fsstat, hRoot, nil},
		{nfsproto.NFS3Fsinfo, hRoot, nil},
		{nfsproto.NFS3Pathconf, hFile, nil},
		{nfsproto.NFS3Commit, hFile, put(func(e *xdr.Encoder) { e.PutUint64(0); e.PutUint32(0) })},
		{nfsproto.NFS3NumProcs + nfsproto.MountMnt, 0, put(func(e *xdr.Encoder) { e.PutString("/d") })},
		{nfsproto.NFS3NumProcs + nfsproto.MountUmnt, 0, put(func(e *xdr.Encoder) { e.PutString("/") })},
		{nfsproto.NFS3NumProcs + nfsproto.MountExport, 0, nil},
	}
	for _, s := range seeds {
		f.Add(s.proc, s.fh, s.args)
	}
	f.Fuzz(func(t *testing.T, procSel, fhSel uint8, rest []byte) {
		p, _ := fuzzProc(procSel)
		args := append(fuzzHandle(fhSel), rest...)
		_, used, err := runProc(t, p, args)
		if used > len(args) {
			t.Fatalf("consumed %d of %d bytes", used, len(args))
		}
		if err != nil {
			return
		}
		for _, cut := range []int{0, used / 2, used - 1, used - 4} {
			if cut < 0 || cut >= used {
				continue
			}
			if _, _, err := runProc(t, p, args[:cut]); err == nil {
				t.Fatalf("proc %d: %d of the %d argument bytes it reads decode without error", procSel, cut, used)
			}
		}
	})
}
