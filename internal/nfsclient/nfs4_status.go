package nfsclient

import "fmt"

// Status4 is a non-OK nfsstat4 of an NFSv4 operation.
type Status4 uint32

// nfsstat4 values the client names; others print as numbers.
const (
	NFS4OK            Status4 = 0
	NFS4ErrNoEnt      Status4 = 2
	NFS4ErrExist      Status4 = 17
	NFS4ErrNotSupp    Status4 = 10004
	NFS4ErrBadSession Status4 = 10052
	NFS4ErrBadSlot    Status4 = 10053
	NFS4ErrSeqMisord  Status4 = 10063
	NFS4ErrGrace      Status4 = 10013
	NFS4ErrDelay      Status4 = 10008
)

var status4Names = map[Status4]string{
	NFS4OK: "NFS4_OK", NFS4ErrNoEnt: "NFS4ERR_NOENT", NFS4ErrExist: "NFS4ERR_EXIST",
	NFS4ErrNotSupp: "NFS4ERR_NOTSUPP", NFS4ErrBadSession: "NFS4ERR_BADSESSION",
	NFS4ErrBadSlot: "NFS4ERR_BADSLOT", NFS4ErrSeqMisord: "NFS4ERR_SEQ_MISORDERED",
	NFS4ErrGrace: "NFS4ERR_GRACE", NFS4ErrDelay: "NFS4ERR_DELAY",
}

func (s Status4) Error() string {
	if n, ok := status4Names[s]; ok {
		return "nfs4: " + n
	}
	return fmt.Sprintf("nfs4: nfsstat4 %d", uint32(s))
}

// OpError says which operation of a COMPOUND failed.
type OpError struct {
	Op     uint32
	Status Status4
}

func (e *OpError) Error() string { return fmt.Sprintf("nfs4 op %d: %v", e.Op, e.Status) }
func (e *OpError) Unwrap() error { return e.Status }
