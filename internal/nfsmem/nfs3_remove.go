package nfsmem

import (
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/xdr"
)

func nfs3Remove(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	return s.removeEntry(d, e, false)
}

func nfs3Rmdir(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	return s.removeEntry(d, e, true)
}

// removeEntry is REMOVE (wantDir false) and RMDIR (true).
func (s *Server) removeEntry(d *nfsproto.Dec, e *xdr.Encoder, wantDir bool) error {
	op := decodeDirOp(d)
	if err := d.Err(); err != nil {
		return err
	}
	s.fs.mu.Lock()
	defer s.fs.mu.Unlock()
	dir, st := s.dir(op)
	if st != nfsproto.NFS3OK {
		s.putStatusWcc(e, st, nil, nil)
		return nil
	}
	before := wccBefore(dir)
	name := string(op.name)
	var child *node
	switch name {
	case ".", "..":
		st = nfsproto.NFS3ErrInval
		if !wantDir {
			st = nfsproto.NFS3ErrIsDir
		}
	default:
		child, st = s.fs.lookup(dir, name)
	}
	if st == nfsproto.NFS3OK {
		isDir := child.typ == nfsproto.NF3Dir
		switch {
		case wantDir && !isDir:
			st = nfsproto.NFS3ErrNotDir
		case !wantDir && isDir:
			st = nfsproto.NFS3ErrIsDir
		case isDir && len(child.dir.entries) > 0:
			st = nfsproto.NFS3ErrNotEmpty
		default:
			s.fs.unlink(dir, name, child)
			s.fs.remove(child)
		}
	}
	s.putStatusWcc(e, st, before, dir)
	return nil
}

func nfs3Rename(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	from := decodeDirOp(d)
	to := decodeDirOp(d)
	if err := d.Err(); err != nil {
		return err
	}
	s.fs.mu.Lock()
	defer s.fs.mu.Unlock()
	fdir, st := s.dir(from)
	tdir, st2 := s.dir(to)
	if st == nfsproto.NFS3OK {
		st = st2
	}
	var fb, tb *nfsproto.WccAttr
	if st == nfsproto.NFS3OK {
		fb, tb = wccBefore(fdir), wccBefore(tdir)
		st = s.rename(fdir, string(from.name), tdir, string(to.name))
	} else {
		fdir, tdir = nil, nil
	}
	putStatus(e, st)
	for _, p := range [2]struct {
		b *nfsproto.WccAttr
		n *node
	}{{fb, fdir}, {tb, tdir}} {
		if p.n == nil {
			(&nfsproto.Wcc{}).Encode(e)
			continue
		}
		w := s.fs.wcc(p.b, p.n)
		w.Encode(e)
	}
	return nil
}

// rename moves fdir/fname to tdir/tname, replacing a compatible target
// (file over non-directory, directory over empty directory) as POSIX
// rename does.
func (s *Server) rename(fdir *node, fname string, tdir *node, tname string) nfsproto.Status {
	if fname == "." || fname == ".." {
		return nfsproto.NFS3ErrInval
	}
	if st := checkName([]byte(tname)); st != nfsproto.NFS3OK {
		return st
	}
	src, st := s.fs.lookup(fdir, fname)
	if st != nfsproto.NFS3OK {
		return st
	}
	if src.typ == nfsproto.NF3Dir && s.fs.isAncestor(src, tdir) {
		return nfsproto.NFS3ErrInval // into its own subtree
	}
	if dst, st := s.fs.lookup(tdir, tname); st == nfsproto.NFS3OK {
		if dst == src {
			return nfsproto.NFS3OK
		}
		switch {
		case src.typ == nfsproto.NF3Dir && dst.typ != nfsproto.NF3Dir:
			return nfsproto.NFS3ErrNotDir
		case src.typ != nfsproto.NF3Dir && dst.typ == nfsproto.NF3Dir:
			return nfsproto.NFS3ErrIsDir
		case dst.typ == nfsproto.NF3Dir && len(dst.dir.entries) > 0:
			return nfsproto.NFS3ErrNotEmpty
		}
		s.fs.unlink(tdir, tname, dst)
		s.fs.remove(dst)
	}
	s.fs.unlink(fdir, fname, src)
	s.fs.link(tdir, tname, src)
	src.ctime = s.fs.now()
	return nfsproto.NFS3OK
}
