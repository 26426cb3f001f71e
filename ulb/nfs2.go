package ulb

// NFS version 2 (RFC 1094). RFC 8267 §4 makes four items DDP-eligible:
//
//	WRITE     call   writeargs.data
//	SYMLINK   call   symlinkargs.to
//	READ      reply  readres.reply.data
//	READLINK  reply  readlinkres.data
//
// Every other procedure walks straight to StepDone.

func init() {
	register(ProgNFS, 2, &binding{call: nfs2Call, reply: nfs2Reply, estimate: nfs2Estimate})
}

// NFSv2 procedure numbers.
const (
	nfs2Null       = 0
	nfs2Getattr    = 1
	nfs2Setattr    = 2
	nfs2Root       = 3
	nfs2Lookup     = 4
	nfs2Readlink   = 5
	nfs2Read       = 6
	nfs2Writecache = 7
	nfs2Write      = 8
	nfs2Create     = 9
	nfs2Remove     = 10
	nfs2Rename     = 11
	nfs2Link       = 12
	nfs2Symlink    = 13
	nfs2Mkdir      = 14
	nfs2Rmdir      = 15
	nfs2Readdir    = 16
	nfs2Statfs     = 17
)

// Sizes of NFSv2 XDR types in bytes (maxima for variable ones).
const (
	nfs2MaxData = 8192 // NFS_MAXDATA: nfsdata is opaque<NFS_MAXDATA>
	nfs2MaxPath = 1024 // NFS_MAXPATHLEN: path is string<NFS_MAXPATHLEN>
	nfs2MaxName = 255  // NFS_MAXNAMLEN: filename is string<NFS_MAXNAMLEN>

	nfs2Fh         = 32     // fhandle: opaque[NFS_FHSIZE]
	nfs2Fattr      = 17 * 4 // fattr
	nfs2Attrstat   = 4 + nfs2Fattr
	nfs2Diropres   = 4 + nfs2Fh + nfs2Fattr
	nfs2DirTrailer = 2 * 4 // final entry pointer FALSE, eof
)

// nfs2Call finds the eligible item in the arguments of WRITE and SYMLINK.
func nfs2Call(w *Walker, b []byte) (Step, error) {
	if w.v23.stage != v23BeforeItem {
		return Step{Kind: StepDone}, nil
	}
	var p xr
	p.Reset(b)
	switch w.Proc {
	case nfs2Write:
		// struct writeargs {
		//	fhandle  file;
		//	unsigned beginoffset;
		//	unsigned offset;
		//	unsigned totalcount;
		//	nfsdata  data;          <- eligible
		// };
		p.Has(nfs2Fh + 4*4) // ask for all of it at once
		p.Skip(nfs2Fh + 3*4)
		return w.v23Item(&p, KindWriteData, nfs2MaxData)
	case nfs2Symlink:
		// struct symlinkargs {
		//	diropargs from;         fhandle dir; filename name
		//	path      to;           <- eligible
		//	sattr     attributes;
		// };
		//
		// The sattr after the path holds no item; the walk ends at the
		// path and does not look at it.
		p.Skip(nfs2Fh)
		p.Opaque(nfs2MaxName)
		return w.v23Item(&p, KindSymlinkPath, nfs2MaxPath)
	}
	return w.v23Done(0)
}

// nfs2Reply finds the eligible item in the results of READ and READLINK.
// A reply whose status is not NFS_OK carries no item.
func nfs2Reply(w *Walker, b []byte) (Step, error) {
	if w.v23.stage != v23BeforeItem {
		return Step{Kind: StepDone}, nil
	}
	var p xr
	p.Reset(b)
	switch w.Proc {
	case nfs2Read, nfs2Readlink:
		status := p.Uint32()
		if !p.OK() {
			return w.v23Stopped(&p)
		}
		if status != 0 {
			return w.v23Done(p.Offset())
		}
		if w.Proc == nfs2Readlink {
			// union readlinkres switch (stat status) {
			// case NFS_OK: path data;     <- eligible
			// default:     void;
			// };
			return w.v23Item(&p, KindReadlinkPath, nfs2MaxPath)
		}
		// union readres switch (stat status) {
		// case NFS_OK: fattr attributes; nfsdata data;   <- eligible
		// default:     void;
		// };
		p.Has(nfs2Fattr + 4)
		p.Skip(nfs2Fattr)
		return w.v23Item(&p, KindReadData, nfs2MaxData)
	}
	return w.v23Done(0)
}

// nfs2ReplyBody is the largest result of each procedure without its
// eligible item (whose length word stays counted). READDIR adds its count
// from the call.
var nfs2ReplyBody = [...]int{
	nfs2Null:       0,
	nfs2Getattr:    nfs2Attrstat,
	nfs2Setattr:    nfs2Attrstat,
	nfs2Root:       0,
	nfs2Lookup:     nfs2Diropres,
	nfs2Readlink:   4 + 4,
	nfs2Read:       4 + nfs2Fattr + 4,
	nfs2Writecache: 0,
	nfs2Write:      nfs2Attrstat,
	nfs2Create:     nfs2Diropres,
	nfs2Remove:     4,
	nfs2Rename:     4,
	nfs2Link:       4,
	nfs2Symlink:    4,
	nfs2Mkdir:      nfs2Diropres,
	nfs2Rmdir:      4,
	nfs2Readdir:    4,
	nfs2Statfs:     4 + 5*4, // tsize, bsize, blocks, bfree, bavail
}

// nfs2Estimate sizes the reply to an NFSv2 call (RFC 8267 §4.1): READ data
// goes to a Write chunk of the call's count (at most NFS_MAXDATA), the
// READLINK path to one of NFS_MAXPATHLEN bytes, READDIR's count bounds its
// entries (the Linux server reserves at least the 8-byte trailer), and
// everything else is fixed by the XDR definition.
func nfs2Estimate(proc uint32, args []byte) (Estimate, error) {
	if proc >= uint32(len(nfs2ReplyBody)) {
		return v23Fixed(0), nil
	}
	body := nfs2ReplyBody[proc]
	switch proc {
	case nfs2Read:
		// readargs: fhandle file; unsigned offset; unsigned count;
		// unsigned totalcount.
		count, err := nfs2ArgCount(args, nfs2Fh+4)
		if err != nil {
			return Estimate{}, v23ArgsError(ProgNFS, 2, proc, err)
		}
		return v23OneItem(body, KindReadData, int(min(count, nfs2MaxData))), nil
	case nfs2Readlink:
		return v23OneItem(body, KindReadlinkPath, nfs2MaxPath), nil
	case nfs2Readdir:
		// readdirargs: fhandle dir; nfscookie cookie; unsigned count.
		count, err := nfs2ArgCount(args, nfs2Fh+4)
		if err != nil {
			return Estimate{}, v23ArgsError(ProgNFS, 2, proc, err)
		}
		return v23Fixed(body + max(int(count), nfs2DirTrailer)), nil
	}
	return v23Fixed(body), nil
}

// nfs2ArgCount reads the unsigned at offset skip of the arguments.
func nfs2ArgCount(args []byte, skip int) (uint32, error) {
	var p xr
	p.Reset(args)
	p.Skip(skip)
	count := p.Uint32()
	return count, p.Err()
}
