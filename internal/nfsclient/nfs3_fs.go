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
	s = FSStat{TBytes: d.Uint64(), FBytes: d.Uint64(), ABytes: d.Uint64(),
		TFiles: d.Uint64(), FFiles: d.Uint64(), AFiles: d.Uint64(), InvarSec: d.Uint32()}
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
	s = FSInfo{RTMax: d.Uint32(), RTPref: d.Uint32(), RTMult: d.Uint32(),
		WTMax: d.Uint32(), WTPref: d.Uint32(), WTMult: d.Uint32(), DTPref: d.Uint32(),
		MaxFileSize: d.Uint64(), TimeDelta: d.Time(), Properties: d.Uint32()}
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
	p = PathConf{LinkMax: d.Uint32(), NameMax: d.Uint32(), NoTrunc: d.Bool(),
		ChownRestricted: d.Bool(), CaseInsensitive: d.Bool(), CasePreserving: d.Bool()}
	return p, d.Err()
}
