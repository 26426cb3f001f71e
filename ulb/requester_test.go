package ulb

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// v1HeaderMax is RPC-over-RDMA version 1's largest reply header for a
// call offering rooms (rdmarpc.ReplyPlan.ReplyHeaderMax, which the
// requesters pass): the 28-byte minimum, 8 bytes per Write chunk and a
// 16-byte segment per chunk with room.
func v1HeaderMax(rooms []int) int {
	n := 28
	for _, r := range rooms {
		n += 8
		if r > 0 {
			n += 16
		}
	}
	return n
}

const (
	nfs3ProcReadlink = 5
	nfs3ProcRead     = 6
	nfs3ProcGetattr  = 1
)

func nfs3ReadCall(count uint32) []byte {
	return newXmsg().opaque(nfs3Fh28).u64(0).u32(count).bytes()
}

// The policy's offers for known calls: which results get a Write chunk
// and of what room, and the Reply chunk.
func TestRequesterPlan(t *testing.T) {
	base := Requester{InlineRecv: 4096, MaxChunk: 1 << 20, HeaderMax: v1HeaderMax}
	one := base
	one.MaxWriteChunks = 1
	lookup := argOp(opLookup, str4("f"))
	readlink := argOp(opReadlink, nil)
	// GETATTR of the ACL attribute (word 0, bit 12): unbounded.
	getattrACL := argOp(opGetattr, words4(1, 1<<12))
	readlinkV4 := nfs4Compound("", 1, sequenceArgs4, putfhArgs4, readlink).bytes()
	readlinkV4Est := estimate4(t, readlinkV4)
	for _, c := range []struct {
		name       string
		pol        Requester
		call       CallInfo
		write      []int
		reply      int // -1: any non-zero room
		retryable  bool
		unestimate bool
	}{
		{name: "v3 READ 8k", pol: base,
			call:  CallInfo{Prog: ProgNFS, Vers: 3, Proc: nfs3ProcRead, Args: nfs3ReadCall(8192)},
			write: []int{8192}},
		{name: "v3 READ over MaxChunk", pol: base,
			call:  CallInfo{Prog: ProgNFS, Vers: 3, Proc: nfs3ProcRead, Args: nfs3ReadCall(4 << 20)},
			write: []int{1 << 20}},
		{name: "v3 READLINK keeps its Write chunk", pol: base,
			call:  CallInfo{Prog: ProgNFS, Vers: 3, Proc: nfs3ProcReadlink, Args: newXmsg().opaque(nfs3Fh28).bytes()},
			write: []int{readlinkMax}},
		{name: "v3 GETATTR inline", pol: base,
			call: CallInfo{Prog: ProgNFS, Vers: 3, Proc: nfs3ProcGetattr, Args: newXmsg().opaque(nfs3Fh28).bytes()}},
		{name: "v3 GETATTR GSS verifier still fits", pol: base,
			call: CallInfo{Prog: ProgNFS, Vers: 3, Proc: nfs3ProcGetattr, Args: newXmsg().opaque(nfs3Fh28).bytes(), Verifier: MaxVerifierBody}},
		// knfsd quirk: no Write chunk for an NFSv4 READLINK; the link is
		// sized into the Reply chunk instead.
		{name: "v4 READLINK: no Write chunk, Reply chunk", pol: base,
			call:  CallInfo{Prog: ProgNFS, Vers: 4, Proc: nfs4ProcCompound, Args: readlinkV4},
			reply: max(readlinkV4Est.Inline+readlinkMax, 2*(4096-28))},
		{name: "v4 READ then READLINK then READ: one chunk", pol: base,
			call: CallInfo{Prog: ProgNFS, Vers: 4, Proc: nfs4ProcCompound, Args: nfs4Compound("", 0,
				putfhArgs4, readArgs4(8192), putfhArgs4, lookup, readlink, putfhArgs4, readArgs4(13)).bytes()},
			write: []int{8192}, reply: -1},
		{name: "v4 two READs, one Write chunk allowed", pol: one,
			call: CallInfo{Prog: ProgNFS, Vers: 4, Proc: nfs4ProcCompound, Args: nfs4Compound("", 0,
				putfhArgs4, readArgs4(8192), putfhArgs4, readArgs4(100)).bytes()},
			write: []int{8192}},
		{name: "v4 two big READs, one Write chunk allowed", pol: one,
			call: CallInfo{Prog: ProgNFS, Vers: 4, Proc: nfs4ProcCompound, Args: nfs4Compound("", 0,
				putfhArgs4, readArgs4(8192), putfhArgs4, readArgs4(8192)).bytes()},
			write: []int{8192}, reply: -1},
		{name: "v4 GETATTR acl: unpredictable", pol: base,
			call:  CallInfo{Prog: ProgNFS, Vers: 4, Proc: nfs4ProcCompound, Args: nfs4Compound("", 1, sequenceArgs4, putfhArgs4, getattrACL).bytes()},
			reply: 2 * (4096 - 28), retryable: true},
		{name: "NFSACL GETACL", pol: base,
			call:  CallInfo{Prog: ProgNFSACL, Vers: 3, Proc: aclGetacl, Args: newXmsg().opaque(nfs3Fh28).u32(15).bytes()},
			reply: v23ReplyHeader + 4 + nfs3PostOpAttr + 4 + 2*nfsaclACL, retryable: true},
		{name: "wrapped", pol: base, unestimate: true,
			call:  CallInfo{Prog: ProgNFS, Vers: 3, Proc: nfs3ProcRead, Args: nfs3ReadCall(8192), Wrapped: true},
			reply: 1 << 20},
		{name: "no binding", pol: base, unestimate: true,
			call:  CallInfo{Prog: 100099, Vers: 1, Proc: 1},
			reply: 1 << 20},
		{name: "arguments that do not decode", pol: base, unestimate: true,
			call:  CallInfo{Prog: ProgNFS, Vers: 3, Proc: nfs3ProcRead, Args: []byte{0, 0}},
			reply: 1 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rooms [MaxItems]int
			o := c.pol.Plan(&c.call, rooms[:0])
			if !slices.Equal(o.WriteChunks, c.write) && len(o.WriteChunks)+len(c.write) > 0 {
				t.Errorf("Write chunks %v, want %v", o.WriteChunks, c.write)
			}
			if c.reply < 0 && o.ReplyChunk == 0 || c.reply >= 0 && o.ReplyChunk != c.reply {
				t.Errorf("Reply chunk %d, want %d", o.ReplyChunk, c.reply)
			}
			if o.Retryable != c.retryable || o.Estimated == c.unestimate {
				t.Errorf("retryable %v estimated %v, want %v %v", o.Retryable, o.Estimated, c.retryable, !c.unestimate)
			}
		})
	}
}

// The Reply chunk decision counts the transport header of the Write
// chunks offered: an estimate that fits the receive buffer only without
// that header gets a Reply chunk.
func TestRequesterPlanHeaderRoom(t *testing.T) {
	call := CallInfo{Prog: ProgNFS, Vers: 3, Proc: nfs3ProcRead, Args: nfs3ReadCall(8192)}
	est, err := EstimateReply(call.Prog, call.Vers, call.Proc, call.Args)
	if err != nil {
		t.Fatal(err)
	}
	hdr := v1HeaderMax([]int{8192}) // 52
	for _, c := range []struct {
		recv, want int
	}{
		{recv: est.Inline + hdr, want: 0},
		{recv: est.Inline + hdr - 1, want: 2 * (est.Inline - 1)},
	} {
		p := Requester{InlineRecv: c.recv, MaxChunk: 1 << 20, HeaderMax: v1HeaderMax}
		if o := p.Plan(&call, nil); o.ReplyChunk != c.want {
			t.Errorf("receive %d (estimate %d, header %d): Reply chunk %d, want %d", c.recv, est.Inline, hdr, o.ReplyChunk, c.want)
		}
	}
}

// GrowReplyChunk doubles, starts at twice the inline size and stops at
// MaxChunk.
func TestRequesterGrowReplyChunk(t *testing.T) {
	p := Requester{InlineRecv: 4096, MaxChunk: 64 << 10}
	for _, c := range []struct {
		room, want int
		ok         bool
	}{
		{0, 8192, true},
		{1000, 8192, true},
		{8192, 16384, true},
		{40 << 10, 64 << 10, true},
		{64 << 10, 64 << 10, false},
	} {
		if got, ok := p.GrowReplyChunk(c.room); got != c.want || ok != c.ok {
			t.Errorf("room %d: %d %v, want %d %v", c.room, got, ok, c.want, c.ok)
		}
	}
}

// SpliceReply puts a Write chunk's payload back after its length word,
// with the XDR pad, and leaves replies without chunk data whole.
func TestSpliceReply(t *testing.T) {
	data := []byte("hello")
	whole := nfs3ReadReply(false, data).bytes()
	reduced := nfs3ReadReplyReduced(len(data))
	join := func(vec [][]byte) []byte { return bytes.Join(vec, nil) }
	var w Walker
	t.Run("chunk", func(t *testing.T) {
		vec, spliced, err := SpliceReply(nil, &w, ProgNFS, 3, nfs3ProcRead, true, reduced, [][]byte{data}, []int{8192})
		if err != nil || !spliced || !bytes.Equal(join(vec), whole) {
			t.Fatalf("spliced %v err %v: %x, want %x", spliced, err, join(vec), whole)
		}
	})
	t.Run("inline despite chunk", func(t *testing.T) {
		vec, spliced, err := SpliceReply(nil, &w, ProgNFS, 3, nfs3ProcRead, true, whole, [][]byte{nil}, []int{8192})
		if err != nil || spliced || !bytes.Equal(join(vec), whole) {
			t.Fatalf("spliced %v err %v: %x, want %x", spliced, err, join(vec), whole)
		}
	})
	t.Run("chunk data without results", func(t *testing.T) {
		_, _, err := SpliceReply(nil, &w, ProgNFS, 3, nfs3ProcRead, false, reduced, [][]byte{data}, []int{8192})
		if !errors.Is(err, errChunksWithoutResults) {
			t.Fatalf("err %v, want errChunksWithoutResults", err)
		}
	})
	t.Run("chunk length differs", func(t *testing.T) {
		_, _, err := SpliceReply(nil, &w, ProgNFS, 3, nfs3ProcRead, true, reduced, [][]byte{data[:4]}, []int{8192})
		if !errors.Is(err, ErrGarbage) {
			t.Fatalf("err %v, want ErrGarbage", err)
		}
	})
}

// nfs3ReadReplyReduced is nfs3ReadReply(false, n bytes) as it arrives
// when the data went to a Write chunk: the length word, no body.
func nfs3ReadReplyReduced(n int) []byte {
	return newXmsg().u32(0).then(postOpAttr(false)).u32(uint32(n)).boolean(true).u32(uint32(n)).bytes()
}

// With message continuation (RPC-over-RDMA version two) the Reply chunk
// is the exception (draft-ietf-nfsv4-nfs-ulb-v2, Reply Size Estimation):
// none for a reply within ContinuedReplyFrags receives or one the binding
// cannot bound, the estimate without slack above that; Write chunks as
// in version one.
func TestRequesterPlanContinuation(t *testing.T) {
	p := Requester{InlineRecv: 4096, MaxChunk: 1 << 20, HeaderMax: v1HeaderMax, Continuation: true}
	v1 := p
	v1.Continuation = false
	readdirplus := func(maxcount uint32) CallInfo {
		return CallInfo{Prog: ProgNFS, Vers: 3, Proc: nfs3Readdirplus,
			Args: newXmsg().opaque(nfs3Fh28).u64(0).u64(0).u32(1024).u32(maxcount).bytes()}
	}
	big := readdirplus(512 << 10)
	bigEst, err := EstimateReply(big.Prog, big.Vers, big.Proc, big.Args)
	if err != nil {
		t.Fatal(err)
	}
	getacl := v23ReplyHeader + 4 + nfs3PostOpAttr + 4 + 2*nfsaclACL
	if getacl > ContinuedReplyFrags*4096 {
		getacl = min(getacl, 1<<20)
	} else {
		getacl = 0
	}
	readlinkV4 := nfs4Compound("", 1, sequenceArgs4, putfhArgs4, argOp(opReadlink, nil)).bytes()
	for _, c := range []struct {
		name      string
		call      CallInfo
		write     []int
		reply     int
		retryable bool
	}{
		{name: "v3 READ 8k", call: CallInfo{Prog: ProgNFS, Vers: 3, Proc: nfs3ProcRead, Args: nfs3ReadCall(8192)}, write: []int{8192}},
		{name: "v3 READDIRPLUS 32k: continued", call: readdirplus(32 << 10)},
		{name: "v3 READDIRPLUS 512k: Reply chunk of the estimate", call: big, reply: bigEst.Inline},
		{name: "v4 READLINK: continued", call: CallInfo{Prog: ProgNFS, Vers: 4, Proc: nfs4ProcCompound, Args: readlinkV4}},
		{name: "v4 GETATTR acl: continued", retryable: true,
			call: CallInfo{Prog: ProgNFS, Vers: 4, Proc: nfs4ProcCompound, Args: nfs4Compound("", 1, sequenceArgs4, putfhArgs4, argOp(opGetattr, words4(1, 1<<12))).bytes()}},
		{name: "NFSACL GETACL", retryable: true, reply: getacl,
			call: CallInfo{Prog: ProgNFSACL, Vers: 3, Proc: aclGetacl, Args: newXmsg().opaque(nfs3Fh28).u32(15).bytes()}},
		{name: "wrapped: as in version one", reply: 1 << 20,
			call: CallInfo{Prog: ProgNFS, Vers: 3, Proc: nfs3ProcRead, Args: nfs3ReadCall(8192), Wrapped: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := p.Plan(&c.call, nil)
			if !slices.Equal(o.WriteChunks, c.write) && len(o.WriteChunks)+len(c.write) > 0 {
				t.Errorf("Write chunks %v, want %v", o.WriteChunks, c.write)
			}
			if o.ReplyChunk != c.reply || o.Retryable != c.retryable {
				t.Errorf("Reply chunk %d retryable %v, want %d %v (version one offers %d)", o.ReplyChunk, o.Retryable,
					c.reply, c.retryable, v1.Plan(&c.call, nil).ReplyChunk)
			}
		})
	}
	// Version one over-provisions the medium replies continuation takes.
	if o := v1.Plan(&CallInfo{Prog: ProgNFS, Vers: 3, Proc: nfs3Readdirplus, Args: readdirplus(32 << 10).Args}, nil); o.ReplyChunk == 0 {
		t.Error("version one offers no Reply chunk for a 32 KiB READDIRPLUS")
	}
}

// ReplyResourceRoom offers what RDMA2_ERR_REPLY_RESOURCE said was needed,
// once, within MaxChunk.
func TestRequesterReplyResourceRoom(t *testing.T) {
	p := Requester{InlineRecv: 4096, MaxChunk: 64 << 10}
	for _, c := range []struct {
		room, need, want int
		ok               bool
	}{
		{0, 10000, 10000, true},
		{8192, 20000, 20000, true},
		{20000, 20000, 20000, false},
		{0, 64<<10 + 1, 0, false},
	} {
		if got, ok := p.ReplyResourceRoom(c.room, c.need); got != c.want || ok != c.ok {
			t.Errorf("room %d need %d: %d %v, want %d %v", c.room, c.need, got, ok, c.want, c.ok)
		}
	}
}
