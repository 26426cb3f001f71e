package nfsproto

import "fmt"

// Status is nfsstat3.
type Status uint32

const (
	NFS3OK             Status = 0
	NFS3ErrPerm        Status = 1
	NFS3ErrNoEnt       Status = 2
	NFS3ErrIO          Status = 5
	NFS3ErrNXIO        Status = 6
	NFS3ErrAcces       Status = 13
	NFS3ErrExist       Status = 17
	NFS3ErrXDev        Status = 18
	NFS3ErrNoDev       Status = 19
	NFS3ErrNotDir      Status = 20
	NFS3ErrIsDir       Status = 21
	NFS3ErrInval       Status = 22
	NFS3ErrFBig        Status = 27
	NFS3ErrNoSpc       Status = 28
	NFS3ErrROFS        Status = 30
	NFS3ErrMLink       Status = 31
	NFS3ErrNameTooLong Status = 63
	NFS3ErrNotEmpty    Status = 66
	NFS3ErrDQuot       Status = 69
	NFS3ErrStale       Status = 70
	NFS3ErrRemote      Status = 71
	NFS3ErrBadHandle   Status = 10001
	NFS3ErrNotSync     Status = 10002
	NFS3ErrBadCookie   Status = 10003
	NFS3ErrNotSupp     Status = 10004
	NFS3ErrTooSmall    Status = 10005
	NFS3ErrServerFault Status = 10006
	NFS3ErrBadType     Status = 10007
	NFS3ErrJukebox     Status = 10008
)

var statusNames = map[Status]string{
	NFS3OK: "NFS3_OK", NFS3ErrPerm: "NFS3ERR_PERM", NFS3ErrNoEnt: "NFS3ERR_NOENT",
	NFS3ErrIO: "NFS3ERR_IO", NFS3ErrNXIO: "NFS3ERR_NXIO", NFS3ErrAcces: "NFS3ERR_ACCES",
	NFS3ErrExist: "NFS3ERR_EXIST", NFS3ErrXDev: "NFS3ERR_XDEV", NFS3ErrNoDev: "NFS3ERR_NODEV",
	NFS3ErrNotDir: "NFS3ERR_NOTDIR", NFS3ErrIsDir: "NFS3ERR_ISDIR", NFS3ErrInval: "NFS3ERR_INVAL",
	NFS3ErrFBig: "NFS3ERR_FBIG", NFS3ErrNoSpc: "NFS3ERR_NOSPC", NFS3ErrROFS: "NFS3ERR_ROFS",
	NFS3ErrMLink: "NFS3ERR_MLINK", NFS3ErrNameTooLong: "NFS3ERR_NAMETOOLONG",
	NFS3ErrNotEmpty: "NFS3ERR_NOTEMPTY", NFS3ErrDQuot: "NFS3ERR_DQUOT", NFS3ErrStale: "NFS3ERR_STALE",
	NFS3ErrRemote: "NFS3ERR_REMOTE", NFS3ErrBadHandle: "NFS3ERR_BADHANDLE",
	NFS3ErrNotSync: "NFS3ERR_NOT_SYNC", NFS3ErrBadCookie: "NFS3ERR_BAD_COOKIE",
	NFS3ErrNotSupp: "NFS3ERR_NOTSUPP", NFS3ErrTooSmall: "NFS3ERR_TOOSMALL",
	NFS3ErrServerFault: "NFS3ERR_SERVERFAULT", NFS3ErrBadType: "NFS3ERR_BADTYPE",
	NFS3ErrJukebox: "NFS3ERR_JUKEBOX",
}

func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("nfsstat3(%d)", uint32(s))
}

// Error makes a non-OK status usable as an error (errors.As / ==).
func (s Status) Error() string { return "nfs: " + s.String() }
