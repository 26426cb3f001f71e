package nfsproto

// Program numbers and versions.
const (
	ProgNFS    = 100003
	ProgMount  = 100005
	NFSVers3   = 3
	NFSVers4   = 4
	MountVers3 = 3
)

// NFSv3 procedures (RFC 1813 §3).
const (
	NFS3Null        = 0
	NFS3Getattr     = 1
	NFS3Setattr     = 2
	NFS3Lookup      = 3
	NFS3Access      = 4
	NFS3Readlink    = 5
	NFS3Read        = 6
	NFS3Write       = 7
	NFS3Create      = 8
	NFS3Mkdir       = 9
	NFS3Symlink     = 10
	NFS3Mknod       = 11
	NFS3Remove      = 12
	NFS3Rmdir       = 13
	NFS3Rename      = 14
	NFS3Link        = 15
	NFS3Readdir     = 16
	NFS3Readdirplus = 17
	NFS3Fsstat      = 18
	NFS3Fsinfo      = 19
	NFS3Pathconf    = 20
	NFS3Commit      = 21
	NFS3NumProcs    = 22
)

// MOUNT v3 procedures (RFC 1813 §5).
const (
	MountNull    = 0
	MountMnt     = 1
	MountDump    = 2
	MountUmnt    = 3
	MountUmntall = 4
	MountExport  = 5
)

// MOUNT v3 status values.
const (
	MNT3OK           = 0
	MNT3ErrPerm      = 1
	MNT3ErrNoEnt     = 2
	MNT3ErrAcces     = 13
	MNT3ErrNotDir    = 20
	MNT3ErrInval     = 22
	MNT3ErrNotSupp   = 10004
	MNT3ErrServFault = 10006
)

// Limits of NFSv3 XDR types.
const (
	FHSize       = 64   // NFS3_FHSIZE
	MaxName      = 255  // the longest file name the server accepts
	MaxPath      = 4096 // nfspath3 bound used by Linux
	VerfSize     = 8    // cookieverf3, createverf3, writeverf3
	MountPathLen = 1024 // MNTPATHLEN
)

// File types (ftype3).
const (
	NF3Reg  = 1
	NF3Dir  = 2
	NF3Blk  = 3
	NF3Chr  = 4
	NF3Lnk  = 5
	NF3Sock = 6
	NF3Fifo = 7
)

// ACCESS bits.
const (
	Access3Read    = 0x01
	Access3Lookup  = 0x02
	Access3Modify  = 0x04
	Access3Extend  = 0x08
	Access3Delete  = 0x10
	Access3Execute = 0x20
	Access3All     = 0x3f
)

// stable_how of WRITE.
const (
	Unstable = 0
	DataSync = 1
	FileSync = 2
)

// createmode3 of CREATE.
const (
	CreateUnchecked = 0
	CreateGuarded   = 1
	CreateExclusive = 2
)

// time_how of sattr3.
const (
	DontChange      = 0
	SetToServerTime = 1
	SetToClientTime = 2
)

// FSINFO properties bits.
const (
	FSFLink        = 0x0001
	FSFSymlink     = 0x0002
	FSFHomogeneous = 0x0008
	FSFCanSetTime  = 0x0010
)
