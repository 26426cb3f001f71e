package nfsmem

import (
	"sync"
	"time"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
)

// fsid is the file system id every attribute carries ("rdma").
const fsid = 0x72646d61

// node is one file, directory or symbolic link.
type node struct {
	id                  uint64
	typ                 uint32 // nfsproto.NF3Reg, NF3Dir, NF3Lnk
	mode, uid, gid      uint32
	atime, mtime, ctime time.Time
	parent              uint64 // directories: the parent's id (root: itself)

	data   []byte // regular files
	target string // symbolic links
	dir    *dirData
	// createVerf is the verifier of an EXCLUSIVE CREATE, so a retried
	// CREATE with the same verifier succeeds.
	createVerf [nfsproto.VerfSize]byte
}

// fs is the whole tree. One lock guards it: operations are short memory
// copies, and a single lock keeps every attribute consistent.
type fs struct {
	mu       sync.RWMutex
	nodes    map[uint64]*node
	nextID   uint64
	used     int64 // bytes of file data held
	maxBytes int64
	now      func() time.Time
}

const rootID = 1

func newFS(maxBytes int64) *fs {
	f := &fs{nodes: make(map[uint64]*node), nextID: rootID, maxBytes: maxBytes, now: time.Now}
	root := f.newNode(nfsproto.NF3Dir, 0o777)
	root.parent = root.id
	return f
}

// newNode adds a node of type typ; the caller links it into a directory.
func (f *fs) newNode(typ, mode uint32) *node {
	now := f.now()
	n := &node{id: f.nextID, typ: typ, mode: mode & 0o7777, atime: now, mtime: now, ctime: now}
	f.nextID++
	if typ == nfsproto.NF3Dir {
		n.dir = newDirData()
	}
	f.nodes[n.id] = n
	return n
}

// attr returns n's fattr3.
func (f *fs) attr(n *node) nfsproto.Fattr3 {
	a := nfsproto.Fattr3{
		Type: n.typ, Mode: n.mode, Nlink: 1, UID: n.uid, GID: n.gid,
		FSID: fsid, FileID: n.id,
		Atime: nfsproto.TimeOf(n.atime), Mtime: nfsproto.TimeOf(n.mtime), Ctime: nfsproto.TimeOf(n.ctime),
	}
	switch n.typ {
	case nfsproto.NF3Reg:
		a.Size = uint64(len(n.data))
	case nfsproto.NF3Lnk:
		a.Size = uint64(len(n.target))
	case nfsproto.NF3Dir:
		a.Nlink = 2 + uint32(n.dir.subdirs)
		a.Size = 4096
	}
	a.Used = (a.Size + 4095) &^ 4095
	return a
}

// wccBefore is the pre-operation part of wcc_data.
func wccBefore(n *node) *nfsproto.WccAttr {
	size := uint64(len(n.data))
	if n.typ == nfsproto.NF3Dir {
		size = 4096
	}
	return &nfsproto.WccAttr{Size: size, Mtime: nfsproto.TimeOf(n.mtime), Ctime: nfsproto.TimeOf(n.ctime)}
}

// wcc builds wcc_data from a pre-operation snapshot and n as it is now.
func (f *fs) wcc(before *nfsproto.WccAttr, n *node) nfsproto.Wcc {
	a := f.attr(n)
	return nfsproto.Wcc{Before: before, After: &a}
}

// touch marks n modified now (data or entries).
func (f *fs) touch(n *node) {
	now := f.now()
	n.mtime, n.ctime = now, now
}

// setSize truncates or extends a regular file, accounting for the memory.
func (f *fs) setSize(n *node, size uint64) nfsproto.Status {
	if n.typ != nfsproto.NF3Reg {
		return nfsproto.NFS3ErrInval
	}
	grow := int64(size) - int64(len(n.data))
	if size > uint64(f.maxBytes) || f.used+grow > f.maxBytes {
		return nfsproto.NFS3ErrNoSpc
	}
	if size <= uint64(cap(n.data)) {
		old := len(n.data)
		n.data = n.data[:size]
		if int(size) > old {
			clear(n.data[old:])
		}
	} else {
		nd := make([]byte, size, growCap(cap(n.data), int(size)))
		copy(nd, n.data)
		n.data = nd
	}
	f.used += grow
	return nfsproto.NFS3OK
}

// growCap doubles capacity so that a file written sequentially in chunks
// is copied O(log n) times, not once per chunk.
func growCap(old, need int) int {
	c := max(old*2, 64<<10)
	return max(c, need)
}

// write stores data at off, extending the file.
func (f *fs) write(n *node, off uint64, data []byte) nfsproto.Status {
	end := off + uint64(len(data))
	if end < off {
		return nfsproto.NFS3ErrFBig
	}
	if end > uint64(len(n.data)) {
		if st := f.setSize(n, end); st != nfsproto.NFS3OK {
			return st
		}
	}
	copy(n.data[off:], data)
	f.touch(n)
	return nfsproto.NFS3OK
}

// remove drops n from the node table once it is unlinked.
func (f *fs) remove(n *node) {
	if n.typ == nfsproto.NF3Reg {
		f.used -= int64(len(n.data))
	}
	delete(f.nodes, n.id)
}
