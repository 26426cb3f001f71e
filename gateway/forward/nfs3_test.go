package forward_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/xdr"
)

// The few NFSv3 and MOUNT v3 calls the gateway tests need, hand-built.

const (
	nfs3Null        = 0
	nfs3Getattr     = 1
	nfs3Read        = 6
	nfs3Write       = 7
	nfs3Create      = 8
	nfs3Remove      = 12
	nfs3Readdirplus = 17
	nfs3Commit      = 21
	fattr3Len       = 84
	fileSync        = 2
)

// enc builds XDR arguments.
type enc struct{ b []byte }

func (e *enc) u32(v uint32) *enc {
	e.b = append(e.b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	return e
}
func (e *enc) u64(v uint64) *enc { return e.u32(uint32(v >> 32)).u32(uint32(v)) }
func (e *enc) opaque(b []byte) *enc {
	e.u32(uint32(len(b)))
	e.b = append(e.b, b...)
	e.b = append(e.b, make([]byte, xdr.RoundUp(len(b))-len(b))...)
	return e
}
func (e *enc) str(s string) *enc { return e.opaque([]byte(s)) }

// mount3 returns the root file handle of export from the server's MOUNT
// service, called directly over TCP (MOUNT is not what the tests exercise).
func mount3(t testing.TB, mountAddr, export string) []byte {
	t.Helper()
	return nfstest.MountRoot(t, context.Background(), mountAddr, export)
}

// nfs3 is an NFSv3 client over the gateway.
type nfs3 struct {
	c *rdmaClient
	t testing.TB
}

func (n *nfs3) call(proc uint32, args, data, after []byte) *xdr.Decoder {
	n.t.Helper()
	rep, err := n.c.call(context.Background(), ulb.ProgNFS, 3, proc, args, data, after)
	if err != nil {
		n.t.Fatalf("NFSv3 %s: %v", ulb.ProcName(ulb.ProgNFS, 3, proc), err)
	}
	return results(n.t, rep)
}

func status(t testing.TB, d *xdr.Decoder, what string) {
	t.Helper()
	st, err := d.Uint32()
	if err != nil || st != 0 {
		t.Fatalf("%s: nfsstat3 %d (%v)", what, st, err)
	}
}

func skipPostOpAttr(d *xdr.Decoder) {
	if ok, _ := d.Bool(); ok {
		d.Skip(fattr3Len)
	}
}

func skipWcc(d *xdr.Decoder) {
	if ok, _ := d.Bool(); ok {
		d.Skip(24)
	}
	skipPostOpAttr(d)
}

// getattrSize returns the file's size.
func (n *nfs3) getattrSize(fh []byte) uint64 {
	d := n.call(nfs3Getattr, new(enc).opaque(fh).b, nil, nil)
	status(n.t, d, "GETATTR")
	d.Skip(20) // type, mode, nlink, uid, gid
	size, _ := d.Uint64()
	return size
}

// create makes (or truncates) a regular file and returns its handle.
func (n *nfs3) create(dir []byte, name string) []byte {
	args := new(enc).opaque(dir).str(name).
		u32(0).            // UNCHECKED
		u32(1).u32(0o644). // mode
		u32(0).u32(0).     // uid, gid
		u32(1).u64(0).     // size 0
		u32(0).u32(0).b    // atime, mtime DONT_CHANGE
	d := n.call(nfs3Create, args, nil, nil)
	status(n.t, d, "CREATE "+name)
	if ok, _ := d.Bool(); !ok {
		n.t.Fatalf("CREATE %s: no file handle", name)
	}
	fh, err := d.Opaque(64)
	if err != nil {
		n.t.Fatal(err)
	}
	return append([]byte(nil), fh...)
}

// write writes data at off, FILE_SYNC, the data as a DDP item.
func (n *nfs3) write(fh []byte, off uint64, data []byte) {
	args := new(enc).opaque(fh).u64(off).u32(uint32(len(data))).u32(fileSync).u32(uint32(len(data))).b
	d := n.call(nfs3Write, args, data, nil)
	status(n.t, d, "WRITE")
	skipWcc(d)
	cnt, _ := d.Uint32()
	if int(cnt) != len(data) {
		n.t.Fatalf("WRITE of %d bytes at %d wrote %d", len(data), off, cnt)
	}
}

// read reads up to count bytes at off.
func (n *nfs3) read(fh []byte, off uint64, count int) (data []byte, eof bool) {
	d := n.call(nfs3Read, new(enc).opaque(fh).u64(off).u32(uint32(count)).b, nil, nil)
	status(n.t, d, "READ")
	skipPostOpAttr(d)
	d.Uint32()
	eof, _ = d.Bool()
	data, err := d.Opaque(-1)
	if err != nil {
		n.t.Fatalf("READ data: %v", err)
	}
	return append([]byte(nil), data...), eof
}

func (n *nfs3) commit(fh []byte) {
	d := n.call(nfs3Commit, new(enc).opaque(fh).u64(0).u32(0).b, nil, nil)
	status(n.t, d, "COMMIT")
}

func (n *nfs3) remove(dir []byte, name string) {
	d := n.call(nfs3Remove, new(enc).opaque(dir).str(name).b, nil, nil)
	status(n.t, d, "REMOVE "+name)
}

// readdirplus reads one batch of a directory and returns the names.
func (n *nfs3) readdirplus(dir []byte, maxcount int) []string {
	args := new(enc).opaque(dir).u64(0).u64(0).u32(uint32(maxcount)).u32(uint32(maxcount)).b
	d := n.call(nfs3Readdirplus, args, nil, nil)
	status(n.t, d, "READDIRPLUS")
	skipPostOpAttr(d)
	d.Skip(8) // cookieverf
	var names []string
	for {
		more, err := d.Bool()
		if err != nil {
			n.t.Fatalf("READDIRPLUS entries: %v", err)
		}
		if !more {
			break
		}
		d.Skip(8) // fileid
		name, _ := d.String(255)
		names = append(names, string(name))
		d.Skip(8) // cookie
		skipPostOpAttr(d)
		if ok, _ := d.Bool(); ok {
			d.SkipOpaque(64)
		}
	}
	return names
}

// writeFile writes data in WRITEs of at most chunk bytes.
func (n *nfs3) writeFile(fh []byte, data []byte, chunk int) {
	for off := 0; off < len(data) || off == 0; off += chunk {
		end := min(off+chunk, len(data))
		n.write(fh, uint64(off), data[off:end])
		if end == len(data) {
			break
		}
	}
}

// readFile reads the whole file in READs of at most chunk bytes.
func (n *nfs3) readFile(fh []byte, chunk int) []byte {
	var out []byte
	for {
		b, eof := n.read(fh, uint64(len(out)), chunk)
		out = append(out, b...)
		if eof || len(b) == 0 {
			return out
		}
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed) + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}

func sizeName(n int) string { return fmt.Sprintf("f%d", n) }
