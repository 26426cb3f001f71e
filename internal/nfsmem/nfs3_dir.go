package nfsmem

import (
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/xdr"
)

// dirOp is decoded diropargs3.
type dirOp struct {
	fh   []byte
	name []byte
}

func decodeDirOp(d *nfsproto.Dec) dirOp {
	return dirOp{fh: d.Opaque(nfsproto.FHSize), name: d.Opaque(-1)}
}

// dir resolves op's directory.
func (s *Server) dir(op dirOp) (*node, nfsproto.Status) {
	n, st := s.node(op.fh)
	if st == nfsproto.NFS3OK && n.typ != nfsproto.NF3Dir {
		return n, nfsproto.NFS3ErrNotDir
	}
	return n, st
}

func nfs3Lookup(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	op := decodeDirOp(d)
	if err := d.Err(); err != nil {
		return err
	}
	s.fs.mu.RLock()
	defer s.fs.mu.RUnlock()
	dir, st := s.dir(op)
	var child *node
	if st == nfsproto.NFS3OK {
		child, st = s.fs.lookup(dir, string(op.name))
	}
	putStatus(e, st)
	if st != nfsproto.NFS3OK {
		s.putAttr(e, dir)
		return nil
	}
	e.PutOpaque(s.handle(child.id))
	s.putAttr(e, child)
	s.putAttr(e, dir)
	return nil
}

// readlinkReply bounds READLINK by the longest target we store.
func readlinkReply(*nfsproto.Dec) int { return smallReply + nfsproto.MaxPath }

func nfs3Readlink(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	return s.onObject(d, e, d.Opaque(nfsproto.FHSize), symlink, func(n *node) { e.PutString(n.target) })
}

// symlink is READLINK's demand: the object is a symbolic link.
func symlink(n *node) nfsproto.Status {
	if n.typ != nfsproto.NF3Lnk {
		return nfsproto.NFS3ErrInval
	}
	return nfsproto.NFS3OK
}

// newObject is the common part of CREATE, MKDIR and SYMLINK: check the
// directory and the name, then make the node with make (called with the
// lock held) and link it. It writes the whole result.
func (s *Server) newObject(e *xdr.Encoder, op dirOp, make func(dir *node) (*node, nfsproto.Status)) {
	s.fs.mu.Lock()
	defer s.fs.mu.Unlock()
	dir, st := s.dir(op)
	if st != nfsproto.NFS3OK {
		if st == nfsproto.NFS3ErrNotDir {
			s.putStatusWcc(e, st, wccBefore(dir), dir)
		} else {
			s.putStatusWcc(e, st, nil, nil)
		}
		return
	}
	before := wccBefore(dir)
	if st = checkName(op.name); st != nfsproto.NFS3OK {
		s.putStatusWcc(e, st, before, dir)
		return
	}
	n, st := make(dir)
	if st != nfsproto.NFS3OK {
		s.putStatusWcc(e, st, before, dir)
		return
	}
	putStatus(e, st)
	nfsproto.PutPostOpFH(e, s.handle(n.id))
	s.putAttr(e, n)
	w := s.fs.wcc(before, dir)
	w.Encode(e)
}

func nfs3Create(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	op := decodeDirOp(d)
	how := d.Uint32()
	var sa nfsproto.Sattr3
	var verf []byte
	switch how {
	case nfsproto.CreateUnchecked, nfsproto.CreateGuarded:
		sa.Decode(d)
	case nfsproto.CreateExclusive:
		verf = d.FixedOpaque(nfsproto.VerfSize)
	default:
		d.Fail(nfsproto.ErrBadEnum)
	}
	if err := d.Err(); err != nil {
		return err
	}
	s.newObject(e, op, func(dir *node) (*node, nfsproto.Status) {
		name := string(op.name)
		if id, ok := dir.dir.byName[name]; ok {
			n := s.fs.nodes[id]
			switch {
			case how == nfsproto.CreateGuarded:
				return nil, nfsproto.NFS3ErrExist
			case how == nfsproto.CreateExclusive:
				if n.typ == nfsproto.NF3Reg && string(n.createVerf[:]) == string(verf) {
					return n, nfsproto.NFS3OK // a retransmitted CREATE
				}
				return nil, nfsproto.NFS3ErrExist
			case n.typ != nfsproto.NF3Reg:
				return nil, nfsproto.NFS3ErrExist
			}
			// UNCHECKED on an existing file: apply the attributes
			// (typically a truncation to 0) and return it.
			return n, s.applySattr(n, &sa)
		}
		n := s.fs.newNode(nfsproto.NF3Reg, 0o644)
		if how == nfsproto.CreateExclusive {
			copy(n.createVerf[:], verf)
		} else if st := s.applySattr(n, &sa); st != nfsproto.NFS3OK {
			s.fs.remove(n)
			return nil, st
		}
		s.fs.link(dir, name, n)
		return n, nfsproto.NFS3OK
	})
	return nil
}

func nfs3Mkdir(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	op := decodeDirOp(d)
	var sa nfsproto.Sattr3
	sa.Decode(d)
	if err := d.Err(); err != nil {
		return err
	}
	s.newObject(e, op, func(dir *node) (*node, nfsproto.Status) {
		if _, ok := dir.dir.byName[string(op.name)]; ok {
			return nil, nfsproto.NFS3ErrExist
		}
		n := s.fs.newNode(nfsproto.NF3Dir, 0o755)
		sa.SetSize = false
		s.applySattr(n, &sa)
		s.fs.link(dir, string(op.name), n)
		return n, nfsproto.NFS3OK
	})
	return nil
}

func nfs3Symlink(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	op := decodeDirOp(d)
	var sa nfsproto.Sattr3
	sa.Decode(d)
	target := d.Opaque(-1)
	if err := d.Err(); err != nil {
		return err
	}
	s.newObject(e, op, func(dir *node) (*node, nfsproto.Status) {
		if len(target) > nfsproto.MaxPath {
			return nil, nfsproto.NFS3ErrNameTooLong
		}
		if _, ok := dir.dir.byName[string(op.name)]; ok {
			return nil, nfsproto.NFS3ErrExist
		}
		n := s.fs.newNode(nfsproto.NF3Lnk, 0o777)
		n.target = string(target)
		sa.SetSize = false
		s.applySattr(n, &sa)
		s.fs.link(dir, string(op.name), n)
		return n, nfsproto.NFS3OK
	})
	return nil
}

// nfs3Mknod decodes MKNOD's arguments (so that garbage is still
// GARBAGE_ARGS) and answers NFS3ERR_NOTSUPP: no device or special files.
func nfs3Mknod(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	decodeDirOp(d)
	var sa nfsproto.Sattr3
	switch d.Uint32() {
	case nfsproto.NF3Chr, nfsproto.NF3Blk:
		sa.Decode(d)
		d.Uint32()
		d.Uint32()
	case nfsproto.NF3Sock, nfsproto.NF3Fifo:
		sa.Decode(d)
	case nfsproto.NF3Reg, nfsproto.NF3Dir, nfsproto.NF3Lnk:
	default:
		d.Fail(nfsproto.ErrBadEnum)
	}
	if err := d.Err(); err != nil {
		return err
	}
	s.putStatusWcc(e, nfsproto.NFS3ErrNotSupp, nil, nil)
	return nil
}

// nfs3Link answers NFS3ERR_NOTSUPP: the tree has no hard links
// (PATHCONF says linkmax 1, FSINFO does not claim FSF_LINK).
func nfs3Link(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	d.Opaque(nfsproto.FHSize)
	decodeDirOp(d)
	if err := d.Err(); err != nil {
		return err
	}
	putStatus(e, nfsproto.NFS3ErrNotSupp)
	nfsproto.PutPostOpAttr(e, nil)
	(&nfsproto.Wcc{}).Encode(e)
	return nil
}
