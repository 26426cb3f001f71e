package ulb

// NFS version 3 (RFC 1813). RFC 8267 §4 makes four items DDP-eligible:
//
//	WRITE     call   WRITE3args.data
//	SYMLINK   call   SYMLINK3args.symlink.symlink_data
//	READ      reply  READ3resok.data
//	READLINK  reply  READLINK3resok.data
//
// Every other procedure walks straight to StepDone.

func init() {
	register(ProgNFS, 3, &binding{call: nfs3Call, reply: nfs3Reply, estimate: nfs3Estimate})
}

// NFSv3 procedure numbers.
const (
	nfs3Null        = 0
	nfs3Getattr     = 1
	nfs3Setattr     = 2
	nfs3Lookup      = 3
	nfs3Access      = 4
	nfs3Readlink    = 5
	nfs3Read        = 6
	nfs3Write       = 7
	nfs3Create      = 8
	nfs3Mkdir       = 9
	nfs3Symlink     = 10
	nfs3Mknod       = 11
	nfs3Remove      = 12
	nfs3Rmdir       = 13
	nfs3Rename      = 14
	nfs3Link        = 15
	nfs3Readdir     = 16
	nfs3Readdirplus = 17
	nfs3Fsstat      = 18
	nfs3Fsinfo      = 19
	nfs3Pathconf    = 20
	nfs3Commit      = 21
)

// Sizes of NFSv3 XDR types in bytes (maxima for variable ones).
const (
	nfs3FhSize = 64 // NFS3_FHSIZE
	// nfs3MaxPath bounds nfspath3, which RFC 1813 leaves unbounded. Linux
	// defines NFS3_MAXPATHLEN as PATH_MAX (4096), sizes its READLINK reply
	// buffer by it, and its server rejects longer SYMLINK paths.
	nfs3MaxPath = 4096

	nfs3Fh         = 4 + nfs3FhSize  // nfs_fh3: opaque data<NFS3_FHSIZE>
	nfs3Fattr      = 21 * 4          // fattr3
	nfs3PostOpAttr = 4 + nfs3Fattr   // post_op_attr: bool + fattr3
	nfs3WccAttr    = 8 + 8 + 8       // wcc_attr: size3, mtime, ctime
	nfs3PreOpAttr  = 4 + nfs3WccAttr // pre_op_attr: bool + wcc_attr
	nfs3WccData    = nfs3PreOpAttr + nfs3PostOpAttr
	nfs3PostOpFh   = 4 + nfs3Fh         // post_op_fh3: bool + nfs_fh3
	nfs3Verf       = 8                  // cookieverf3, writeverf3, createverf3
	nfs3Time       = 8                  // nfstime3: seconds, nseconds
	nfs3DirTrailer = 2 * 4              // dirlist3: final value_follows FALSE, eof
	nfs3DirHead    = 4 + nfs3PostOpAttr // status, dir_attributes
)

// nfs3Call finds the eligible item in the arguments of WRITE and SYMLINK.
func nfs3Call(w *Walker, b []byte) (Step, error) {
	if w.v23.stage != v23BeforeItem {
		return Step{Kind: StepDone}, nil
	}
	var p xr
	p.Reset(b)
	switch w.Proc {
	case nfs3Write:
		// struct WRITE3args {
		//	nfs_fh3    file;
		//	offset3    offset;      uint64
		//	count3     count;       uint32
		//	stable_how stable;      enum
		//	opaque     data<>;      <- eligible
		// };
		p.Opaque(nfs3FhSize)
		p.Has(8 + 4 + 4 + 4) // ask for the rest of it at once
		p.Skip(8 + 4 + 4)
		return w.v23Item(&p, KindWriteData, -1)
	case nfs3Symlink:
		// struct SYMLINK3args {
		//	diropargs3   where;     nfs_fh3 dir; filename3 name
		//	symlinkdata3 symlink;   sattr3 symlink_attributes;
		//	                        nfspath3 symlink_data   <- eligible
		// };
		//
		// filename3 is string<> without a bound of its own: a bogus
		// length shows as a Need beyond the message, which the caller,
		// who knows the message length, rejects.
		p.Opaque(nfs3FhSize)
		p.Opaque(-1)
		p.Has(6*4 + 4) // the smallest sattr3, then the path length
		nfs3SkipSattr(&p)
		return w.v23Item(&p, KindSymlinkPath, nfs3MaxPath)
	}
	return w.v23Done(0)
}

// nfs3SkipSattr passes over a sattr3, whose size depends on its discriminants:
//
//	struct sattr3 {
//		set_mode3 mode;   bool set_it; [uint32]
//		set_uid3  uid;    bool set_it; [uint32]
//		set_gid3  gid;    bool set_it; [uint32]
//		set_size3 size;   bool set_it; [uint64]
//		set_atime atime;  time_how set_it; [nfstime3 if SET_TO_CLIENT_TIME]
//		set_mtime mtime;  time_how set_it; [nfstime3 if SET_TO_CLIENT_TIME]
//	};
func nfs3SkipSattr(p *xr) {
	for range 3 { // mode, uid, gid
		if p.Bool() {
			p.Skip(4)
		}
	}
	if p.Bool() {
		p.Skip(8)
	}
	for range 2 { // atime, mtime
		if !p.Has(4) {
			return
		}
		switch how := p.Uint32(); how {
		case 0, 1: // DONT_CHANGE, SET_TO_SERVER_TIME
		case 2: // SET_TO_CLIENT_TIME
			p.Skip(nfs3Time)
		default:
			p.bad("time_how", how)
		}
	}
}

// nfs3Reply finds the eligible item in the results of READ and READLINK.
// A reply whose status is not NFS3_OK carries no item.
func nfs3Reply(w *Walker, b []byte) (Step, error) {
	if w.v23.stage != v23BeforeItem {
		return Step{Kind: StepDone}, nil
	}
	var p xr
	p.Reset(b)
	switch w.Proc {
	case nfs3Read, nfs3Readlink:
		status := p.Uint32()
		if !p.OK() {
			return w.v23Stopped(&p)
		}
		if status != 0 {
			return w.v23Done(p.Offset())
		}
		// What follows the attributes up to the item's body: READ's
		// count, eof and data length, or READLINK's path length. Asking
		// for it with the attributes saves a round of StepNeedMore.
		tail := 4 + 4 + 4
		if w.Proc == nfs3Readlink {
			tail = 4
		}
		if p.Bool() { // post_op_attr.attributes_follow
			p.Has(nfs3Fattr + tail)
			p.Skip(nfs3Fattr)
		}
		if w.Proc == nfs3Readlink {
			// struct READLINK3resok {
			//	post_op_attr symlink_attributes;
			//	nfspath3     data;          <- eligible
			// };
			return w.v23Item(&p, KindReadlinkPath, nfs3MaxPath)
		}
		// struct READ3resok {
		//	post_op_attr file_attributes;
		//	count3       count;
		//	bool         eof;
		//	opaque       data<>;        <- eligible
		// };
		p.Has(tail)
		p.Skip(4)
		p.Bool()
		return w.v23Item(&p, KindReadData, -1)
	}
	return w.v23Done(0)
}

// nfs3ReplyBody is the largest result of each procedure without its
// eligible item (whose length word stays counted), over both arms of the
// result union. READDIR and READDIRPLUS add their count from the call.
var nfs3ReplyBody = [...]int{
	nfs3Null:        0,
	nfs3Getattr:     4 + nfs3Fattr,
	nfs3Setattr:     4 + nfs3WccData,
	nfs3Lookup:      4 + nfs3Fh + 2*nfs3PostOpAttr,
	nfs3Access:      4 + nfs3PostOpAttr + 4,
	nfs3Readlink:    4 + nfs3PostOpAttr + 4,
	nfs3Read:        4 + nfs3PostOpAttr + 4 + 4 + 4, // count, eof, data length
	nfs3Write:       4 + nfs3WccData + 4 + 4 + nfs3Verf,
	nfs3Create:      4 + nfs3PostOpFh + nfs3PostOpAttr + nfs3WccData,
	nfs3Mkdir:       4 + nfs3PostOpFh + nfs3PostOpAttr + nfs3WccData,
	nfs3Symlink:     4 + nfs3PostOpFh + nfs3PostOpAttr + nfs3WccData,
	nfs3Mknod:       4 + nfs3PostOpFh + nfs3PostOpAttr + nfs3WccData,
	nfs3Remove:      4 + nfs3WccData,
	nfs3Rmdir:       4 + nfs3WccData,
	nfs3Rename:      4 + 2*nfs3WccData,
	nfs3Link:        4 + nfs3PostOpAttr + nfs3WccData,
	nfs3Readdir:     nfs3DirHead + nfs3Verf,
	nfs3Readdirplus: nfs3DirHead + nfs3Verf,
	nfs3Fsstat:      4 + nfs3PostOpAttr + 6*8 + 4,
	nfs3Fsinfo:      4 + nfs3PostOpAttr + 7*4 + 8 + nfs3Time + 4,
	nfs3Pathconf:    4 + nfs3PostOpAttr + 6*4,
	nfs3Commit:      4 + nfs3WccData + nfs3Verf,
}

// nfs3Estimate sizes the reply to an NFSv3 call (RFC 8267 §4.1):
//
//   - READ: the data goes to a Write chunk of the call's count bytes;
//   - READLINK: the path goes to a Write chunk of NFS3_MAXPATHLEN bytes;
//   - READDIR, READDIRPLUS: count (maxcount) bounds the directory list.
//     RFC 1813 says it bounds the whole resok, but the Linux server spends
//     it on the entries and trailer alone (nfsd3_init_dirlist_pages, at
//     least 8 bytes), so the head is added on top;
//   - everything else is fixed by the XDR definition.
//
// A procedure the program lacks gets PROC_UNAVAIL: header only. The
// caller clamps counts to what it negotiated with the server.
func nfs3Estimate(proc uint32, args []byte) (Estimate, error) {
	if proc >= uint32(len(nfs3ReplyBody)) {
		return v23Fixed(0), nil
	}
	body := nfs3ReplyBody[proc]
	switch proc {
	case nfs3Read:
		// READ3args: nfs_fh3 file; offset3 offset; count3 count.
		count, err := nfs3ArgCount(args, 8)
		if err != nil {
			return Estimate{}, v23ArgsError(ProgNFS, 3, proc, err)
		}
		return v23OneItem(body, KindReadData, int(count)), nil
	case nfs3Readlink:
		return v23OneItem(body, KindReadlinkPath, nfs3MaxPath), nil
	case nfs3Readdir, nfs3Readdirplus:
		// READDIR3args: nfs_fh3 dir; cookie3 cookie; cookieverf3
		// cookieverf; count3 count. READDIRPLUS3args has count3 dircount
		// before count3 maxcount.
		skip := 8 + nfs3Verf
		if proc == nfs3Readdirplus {
			skip += 4
		}
		count, err := nfs3ArgCount(args, skip)
		if err != nil {
			return Estimate{}, v23ArgsError(ProgNFS, 3, proc, err)
		}
		return v23Fixed(body + max(int(count), nfs3DirTrailer)), nil
	}
	return v23Fixed(body), nil
}

// nfs3ArgCount reads the count3 that follows an nfs_fh3 and skip bytes.
func nfs3ArgCount(args []byte, skip int) (uint32, error) {
	var p xr
	p.Reset(args)
	p.Opaque(nfs3FhSize)
	p.Skip(skip)
	count := p.Uint32()
	return count, p.Err()
}
