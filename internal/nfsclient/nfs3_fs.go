package nfsclient

import (
	"context"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
)

// FSStat is FSSTAT3resok without the attributes.
type FSStat struct {
	TBytes, FBytes, ABytes uint64
	TFiles, FFiles, AFiles uint64
	InvarSec               uint32
}

// Fsstat returns the file system's space and file counts.
func (c *V3) Fsstat(ctx context.Context, fh []byte) (FSStat, error) {
	var s FSStat
	d, err := c.callFH(ctx, nfsproto.NFS3Fsstat, fh)
	if err != nil {
		return s, err
	}
	if err := checkStatus(d); err != nil {
		return s, err
	}
	nfsproto.PostOpAttr(d)
	s = FSStat{TBytes: d.U64(), FBytes: d.U64(), ABytes: d.U64(),
		TFiles: d.U64(), FFiles: d.U64(), AFiles: d.U64(), InvarSec: d.U32()}
	return s, d.Err()
}

// FSInfo is FSINFO3resok without the attributes.
type FSInfo struct {
	RTMax, RTPref, RTMult uint32
	WTMax, WTPref, WTMult uint32
	DTPref                uint32
	MaxFileSize           uint64
	TimeDelta             nfsproto.Time
	Properties            uint32
}

// Fsinfo returns the server's transfer sizes and properties.
func (c *V3) Fsinfo(ctx context.Context, fh []byte) (FSInfo, error) {
	var s FSInfo
	d, err := c.callFH(ctx, nfsproto.NFS3Fsinfo, fh)
	if err != nil {
		return s, err
	}
	if err := checkStatus(d); err != nil {
		return s, err
	}
	nfsproto.PostOpAttr(d)
	s = FSInfo{RTMax: d.U32(), RTPref: d.U32(), RTMult: d.U32(),
		WTMax: d.U32(), WTPref: d.U32(), WTMult: d.U32(), DTPref: d.U32(),
		MaxFileSize: d.U64(), TimeDelta: d.Time(), Properties: d.U32()}
	return s, d.Err()
}

// PathConf is PATHCONF3resok without the attributes.
type PathConf struct {
	LinkMax, NameMax                                          uint32
	NoTrunc, ChownRestricted, CaseInsensitive, CasePreserving bool
}

// Pathconf returns fh's POSIX path configuration.
func (c *V3) Pathconf(ctx context.Context, fh []byte) (PathConf, error) {
	var p PathConf
	d, err := c.callFH(ctx, nfsproto.NFS3Pathconf, fh)
	if err != nil {
		return p, err
	}
	if err := checkStatus(d); err != nil {
		return p, err
	}
	nfsproto.PostOpAttr(d)
	p = PathConf{LinkMax: d.U32(), NameMax: d.U32(), NoTrunc: d.Bool(),
		ChownRestricted: d.Bool(), CaseInsensitive: d.Bool(), CasePreserving: d.Bool()}
	return p, d.Err()
}
