package nfsmem

import (
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/xdr"
)

var nfs3Procs = [nfsproto.NFS3NumProcs]procedure{
	nfsproto.NFS3Null:        {run: nfs3Null, maxReply: fixedReply},
	nfsproto.NFS3Getattr:     {run: nfs3Getattr, maxReply: fixedReply},
	nfsproto.NFS3Setattr:     {run: nfs3Setattr, maxReply: fixedReply},
	nfsproto.NFS3Lookup:      {run: nfs3Lookup, maxReply: fixedReply},
	nfsproto.NFS3Access:      {run: nfs3Access, maxReply: fixedReply},
	nfsproto.NFS3Readlink:    {run: nfs3Readlink, maxReply: readlinkReply},
	nfsproto.NFS3Read:        {run: nfs3Read, maxReply: readReply},
	nfsproto.NFS3Write:       {run: nfs3Write, maxReply: fixedReply},
	nfsproto.NFS3Create:      {run: nfs3Create, maxReply: fixedReply},
	nfsproto.NFS3Mkdir:       {run: nfs3Mkdir, maxReply: fixedReply},
	nfsproto.NFS3Symlink:     {run: nfs3Symlink, maxReply: fixedReply},
	nfsproto.NFS3Mknod:       {run: nfs3Mknod, maxReply: fixedReply},
	nfsproto.NFS3Remove:      {run: nfs3Remove, maxReply: fixedReply},
	nfsproto.NFS3Rmdir:       {run: nfs3Rmdir, maxReply: fixedReply},
	nfsproto.NFS3Rename:      {run: nfs3Rename, maxReply: fixedReply},
	nfsproto.NFS3Link:        {run: nfs3Link, maxReply: fixedReply},
	nfsproto.NFS3Readdir:     {run: nfs3Readdir, maxReply: readdirReply},
	nfsproto.NFS3Readdirplus: {run: nfs3Readdirplus, maxReply: readdirplusReply},
	nfsproto.NFS3Fsstat:      {run: nfs3Fsstat, maxReply: fixedReply},
	nfsproto.NFS3Fsinfo:      {run: nfs3Fsinfo, maxReply: fixedReply},
	nfsproto.NFS3Pathconf:    {run: nfs3Pathconf, maxReply: fixedReply},
	nfsproto.NFS3Commit:      {run: nfs3Commit, maxReply: fixedReply},
}

// Transfer sizes advertised by FSINFO and enforced on READ.
const (
	rtmax  = 1 << 20
	wtmax  = 1 << 20
	dtpref = 64 << 10
)

func nfs3Null(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error { return nil }

// putStatus writes an nfsstat3.
func putStatus(e *xdr.Encoder, st nfsproto.Status) { e.PutUint32(uint32(st)) }

// putAttr writes post_op_attr for n (none when n is nil).
func (s *Server) putAttr(e *xdr.Encoder, n *node) {
	if n == nil {
		nfsproto.PutPostOpAttr(e, nil)
		return
	}
	a := s.fs.attr(n)
	nfsproto.PutPostOpAttr(e, &a)
}

// putStatusAttr writes a status followed by post_op_attr: the shape of
// every failure result that carries only the object's attributes.
func (s *Server) putStatusAttr(e *xdr.Encoder, st nfsproto.Status, n *node) {
	putStatus(e, st)
	s.putAttr(e, n)
}

// onObject answers a procedure about one object, fh, whose arguments the
// caller has decoded from d (their error is checked here): under the
// read lock it finds the object, applies check (nil, or what the
// procedure demands of the object), writes the status and the object's
// post_op_attr and, on success, what body writes.
func (s *Server) onObject(d *nfsproto.Dec, e *xdr.Encoder, fh []byte, check func(*node) nfsproto.Status, body func(*node)) error {
	if err := d.Err(); err != nil {
		return err
	}
	s.fs.mu.RLock()
	defer s.fs.mu.RUnlock()
	n, st := s.node(fh)
	if st == nfsproto.NFS3OK && check != nil {
		st = check(n)
	}
	s.putStatusAttr(e, st, n)
	if st == nfsproto.NFS3OK {
		body(n)
	}
	return nil
}

// changeObject answers a procedure that changes one object, fh, whose
// arguments the caller has decoded from d (their error is checked here):
// under the write lock it finds the object, applies change, writes its
// status with the object's wcc_data and, on success, what body (if any)
// writes.
func (s *Server) changeObject(d *nfsproto.Dec, e *xdr.Encoder, fh []byte, change func(*node) nfsproto.Status, body func(*node)) error {
	if err := d.Err(); err != nil {
		return err
	}
	s.fs.mu.Lock()
	defer s.fs.mu.Unlock()
	n, st := s.node(fh)
	if st != nfsproto.NFS3OK {
		s.putStatusWcc(e, st, nil, nil)
		return nil
	}
	before := wccBefore(n)
	st = change(n)
	s.putStatusWcc(e, st, before, n)
	if st == nfsproto.NFS3OK && body != nil {
		body(n)
	}
	return nil
}

// putStatusWcc writes a status and wcc_data (empty when before is nil and
// n is nil).
func (s *Server) putStatusWcc(e *xdr.Encoder, st nfsproto.Status, before *nfsproto.WccAttr, n *node) {
	putStatus(e, st)
	if n == nil {
		(&nfsproto.Wcc{}).Encode(e)
		return
	}
	w := s.fs.wcc(before, n)
	w.Encode(e)
}
