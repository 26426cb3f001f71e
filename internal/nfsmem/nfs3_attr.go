package nfsmem

import (
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/xdr"
)

func nfs3Getattr(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	fh := d.Opaque(nfsproto.FHSize)
	if err := d.Err(); err != nil {
		return err
	}
	s.fs.mu.RLock()
	defer s.fs.mu.RUnlock()
	n, st := s.node(fh)
	putStatus(e, st)
	if st == nfsproto.NFS3OK {
		a := s.fs.attr(n)
		a.Encode(e)
	}
	return nil
}

func nfs3Setattr(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	fh := d.Opaque(nfsproto.FHSize)
	var sa nfsproto.Sattr3
	sa.Decode(d)
	guard := d.Bool()
	var guardCtime nfsproto.Time
	if guard {
		guardCtime = d.Time()
	}
	return s.changeObject(d, e, fh, func(n *node) nfsproto.Status {
		if guard && nfsproto.TimeOf(n.ctime) != guardCtime {
			return nfsproto.NFS3ErrNotSync
		}
		return s.applySattr(n, &sa)
	}, nil)
}

// applySattr sets the attributes sa asks for. The size goes first: it is
// the only change that can fail, and a failed SETATTR changes nothing.
func (s *Server) applySattr(n *node, sa *nfsproto.Sattr3) nfsproto.Status {
	now := s.fs.now()
	if sa.SetSize {
		if n.typ == nfsproto.NF3Dir {
			return nfsproto.NFS3ErrIsDir
		}
		if uint64(len(n.data)) != sa.Size {
			if st := s.fs.setSize(n, sa.Size); st != nfsproto.NFS3OK {
				return st
			}
			n.mtime = now
		}
	}
	if sa.SetMode {
		n.mode = sa.Mode & 0o7777
	}
	if sa.SetUID {
		n.uid = sa.UID
	}
	if sa.SetGID {
		n.gid = sa.GID
	}
	switch sa.Atime {
	case nfsproto.SetToServerTime:
		n.atime = now
	case nfsproto.SetToClientTime:
		n.atime = sa.AtimeVal.Go()
	}
	switch sa.Mtime {
	case nfsproto.SetToServerTime:
		n.mtime = now
	case nfsproto.SetToClientTime:
		n.mtime = sa.MtimeVal.Go()
	}
	n.ctime = now
	return nfsproto.NFS3OK
}

// nfs3Access grants everything asked: every caller is treated as the
// owner of a file system that exists for one demo or test.
func nfs3Access(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	fh := d.Opaque(nfsproto.FHSize)
	mask := d.Uint32()
	return s.onObject(d, e, fh, nil, func(n *node) {
		if n.typ != nfsproto.NF3Dir {
			mask &^= nfsproto.Access3Lookup | nfsproto.Access3Delete
		}
		e.PutUint32(mask & nfsproto.Access3All)
	})
}

func nfs3Fsstat(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	return s.onObject(d, e, d.Opaque(nfsproto.FHSize), nil, func(*node) {
		total := uint64(s.fs.maxBytes)
		free := total - uint64(s.fs.used)
		const files = 1 << 20
		e.PutUint64(total)
		e.PutUint64(free)
		e.PutUint64(free)
		e.PutUint64(files)
		e.PutUint64(files - uint64(len(s.fs.nodes)))
		e.PutUint64(files - uint64(len(s.fs.nodes)))
		e.PutUint32(0) // invarsec: the values change at any time
	})
}

func nfs3Fsinfo(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	return s.onObject(d, e, d.Opaque(nfsproto.FHSize), nil, func(*node) {
		e.PutUint32(rtmax)
		e.PutUint32(rtmax)
		e.PutUint32(4096) // rtmult
		e.PutUint32(wtmax)
		e.PutUint32(wtmax)
		e.PutUint32(4096) // wtmult
		e.PutUint32(dtpref)
		e.PutUint64(uint64(s.fs.maxBytes))
		nfsproto.PutTime(e, nfsproto.Time{Nsec: 1})
		e.PutUint32(nfsproto.FSFSymlink | nfsproto.FSFHomogeneous | nfsproto.FSFCanSetTime)
	})
}

func nfs3Pathconf(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	return s.onObject(d, e, d.Opaque(nfsproto.FHSize), nil, func(*node) {
		e.PutUint32(1) // linkmax: no hard links
		e.PutUint32(nfsproto.MaxName)
		e.PutBool(true)  // no_trunc: long names are refused, not cut
		e.PutBool(false) // chown_restricted
		e.PutBool(false) // case_insensitive
		e.PutBool(true)  // case_preserving
	})
}
