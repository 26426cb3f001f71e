package oncrpc

import (
	"bytes"
	"errors"
	"testing"

	"github.com/rdmagw/rdmagw/xdr"
)

// nfs3GetattrCall is an NFSv3 GETATTR call built by hand from RFC 5531 and
// RFC 1813, with an AUTH_SYS credential (RFC 5531 appendix A).
var nfs3GetattrCall = cat(
	be(0x12345678, 0, 2, 100003, 3, 1), // xid, CALL, rpcvers, NFS, v3, GETATTR
	be(1, 32),                          // cred: AUTH_SYS, 32 bytes
	be(0x5f5e0f00),                     //   stamp
	be(3), []byte("box\x00"),           //   machinename "box" + pad
	be(1000, 100),             //   uid, gid
	be(2, 10, 20),             //   gids<16>: 10, 20
	be(0, 0),                  // verf: AUTH_NONE, empty
	be(8), []byte("FHFHFHFH"), // args: nfs_fh3
)

const nfs3GetattrHeaderLen = 24 + 8 + 32 + 8

func TestCallDecodeAuthSys(t *testing.T) {
	var h CallHeader
	n, err := h.Decode(nfs3GetattrCall)
	if err != nil {
		t.Fatal(err)
	}
	if n != nfs3GetattrHeaderLen {
		t.Fatalf("header length %d; want %d", n, nfs3GetattrHeaderLen)
	}
	if h.XID != 0x12345678 || h.RPCVers != 2 || h.Prog != 100003 || h.Vers != 3 || h.Proc != 1 {
		t.Fatalf("header %+v", h)
	}
	if h.Cred.Flavor != AuthSys || !bytes.Equal(h.Cred.Body, nfs3GetattrCall[32:64]) {
		t.Fatalf("cred %v %x", h.Cred.Flavor, h.Cred.Body)
	}
	if h.Verf.Flavor != AuthNone || len(h.Verf.Body) != 0 {
		t.Fatalf("verf %+v", h.Verf)
	}
	if args := nfs3GetattrCall[n:]; !bytes.Equal(args, cat(be(8), []byte("FHFHFHFH"))) {
		t.Fatalf("args %x", args)
	}
	// The body is a sub-slice of the input, not a copy.
	if &h.Cred.Body[0] != &nfs3GetattrCall[32] {
		t.Fatal("cred body was copied")
	}
	// A prefix holding just the header decodes the same.
	var h2 CallHeader
	if n2, err := h2.Decode(nfs3GetattrCall[:n]); err != nil || n2 != n {
		t.Fatalf("prefix decode: %d, %v", n2, err)
	}
}

func TestCallEncodeRoundTrip(t *testing.T) {
	var h CallHeader
	if _, err := h.Decode(nfs3GetattrCall); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 200)
	e := xdr.NewEncoder(buf)
	if err := h.Encode(&e); err != nil {
		t.Fatal(err)
	}
	if e.Len() != h.EncodedLen() || !bytes.Equal(e.Bytes(), nfs3GetattrCall[:nfs3GetattrHeaderLen]) {
		t.Fatalf("encoded %x\nwant    %x", e.Bytes(), nfs3GetattrCall[:nfs3GetattrHeaderLen])
	}
	// Odd-length bodies get zero padding.
	h = CallHeader{XID: 7, RPCVers: 2, Prog: 100005, Vers: 3, Proc: 0,
		Cred: OpaqueAuth{Flavor: 9, Body: []byte{0xaa, 0xbb, 0xcc, 0xdd, 0xee}}, Verf: NullAuth}
	e.Reset(buf)
	if err := h.Encode(&e); err != nil {
		t.Fatal(err)
	}
	want := cat(be(7, 0, 2, 100005, 3, 0, 9, 5), []byte{0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0, 0, 0}, be(0, 0))
	if !bytes.Equal(e.Bytes(), want) || e.Len() != h.EncodedLen() {
		t.Fatalf("encoded %x\nwant    %x", e.Bytes(), want)
	}
	var back CallHeader
	if n, err := back.Decode(e.Bytes()); err != nil || n != len(want) || back.Cred.Flavor != 9 ||
		!bytes.Equal(back.Cred.Body, h.Cred.Body) {
		t.Fatalf("decode back: %d, %v, %+v", n, err, back)
	}
}

func TestCallEncodeErrors(t *testing.T) {
	buf := make([]byte, 1000)
	e := xdr.NewEncoder(buf)
	h := CallHeader{RPCVers: 2, Cred: OpaqueAuth{Flavor: AuthSys, Body: make([]byte, 401)}}
	if err := h.Encode(&e); !errors.Is(err, ErrAuthTooLong) || e.Len() != 0 {
		t.Fatalf("oversized cred: %v, wrote %d", err, e.Len())
	}
	h.Cred.Body = h.Cred.Body[:400] // the maximum is allowed
	if err := h.Encode(&e); err != nil {
		t.Fatal(err)
	}
	e = xdr.NewEncoder(buf[:30])
	if err := h.Encode(&e); !errors.Is(err, xdr.ErrOverflow) {
		t.Fatalf("small buffer: %v", err)
	}
}

func TestCallDecodeErrors(t *testing.T) {
	long := cat(be(1, 0, 2, 100003, 3, 0, 1, 401), make([]byte, 404), be(0, 0))
	tests := []struct {
		name   string
		msg    []byte
		want   error
		field  string
		offset int
		value  uint32
	}{
		{"empty", nil, xdr.ErrShort, "xid", 0, 0},
		{"reply", be(1, 1, 0), ErrNotCall, "msg_type", 4, 1},
		{"bad msg_type", be(1, 7, 2), ErrNotCall, "msg_type", 4, 7},
		{"rpcvers 3", be(1, 0, 3, 100003, 3, 0, 0, 0, 0, 0), ErrBadRPCVersion, "rpcvers", 8, 3},
		{"truncated proc", be(1, 0, 2, 100003, 3), xdr.ErrShort, "proc", 20, 0},
		{"cred too long", long, ErrAuthTooLong, "cred", 28, 401},
		{"verf too long", cat(be(1, 0, 2, 100003, 3, 0, 0, 0, 6, 0xffffffff)), ErrAuthTooLong, "verf", 36, 0xffffffff},
		{"cred body short", be(1, 0, 2, 100003, 3, 0, 1, 8, 0), xdr.ErrShort, "cred", 28, 0},
		{"verf missing", be(1, 0, 2, 100003, 3, 0, 0, 0), xdr.ErrShort, "verf", 32, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h CallHeader
			n, err := h.Decode(tt.msg)
			checkHeaderError(t, n, err, tt.want, tt.field, tt.offset, tt.value)
			if len(tt.msg) >= 4 && h.XID != 1 {
				t.Fatalf("XID not kept on error: %d", h.XID)
			}
			t.Log(err)
		})
	}
}

func TestRPCMismatchKeepsVersion(t *testing.T) {
	var h CallHeader
	_, err := h.Decode(be(0xabc, 0, 3))
	if !errors.Is(err, ErrBadRPCVersion) || h.XID != 0xabc || h.RPCVers != 3 {
		t.Fatalf("%v %+v", err, h)
	}
}

func TestReplyDecode(t *testing.T) {
	gssVerf := cat(be(6, 6), []byte("MICMIC\x00\x00"))
	tests := []struct {
		name string
		msg  []byte
		want ReplyHeader
		n    int
	}{
		{"success", cat(be(9, 1, 0, 0, 0, 0), be(0xaaaa)), ReplyHeader{XID: 9, Stat: MsgAccepted, Verf: NullAuth, AcceptStat: Success}, 24},
		{"success gss verf", cat(be(9, 1, 0), gssVerf, be(0)), ReplyHeader{XID: 9, Stat: MsgAccepted,
			Verf: OpaqueAuth{Flavor: RPCSecGSS, Body: []byte("MICMIC")}, AcceptStat: Success}, 32},
		{"prog_unavail", be(9, 1, 0, 0, 0, 1), ReplyHeader{XID: 9, Verf: NullAuth, AcceptStat: ProgUnavail}, 24},
		{"prog_mismatch", be(9, 1, 0, 0, 0, 2, 2, 4), ReplyHeader{XID: 9, Verf: NullAuth, AcceptStat: ProgMismatch, Low: 2, High: 4}, 32},
		{"proc_unavail", be(9, 1, 0, 0, 0, 3), ReplyHeader{XID: 9, Verf: NullAuth, AcceptStat: ProcUnavail}, 24},
		{"garbage_args", be(9, 1, 0, 0, 0, 4), ReplyHeader{XID: 9, Verf: NullAuth, AcceptStat: GarbageArgs}, 24},
		{"system_err", be(9, 1, 0, 0, 0, 5), ReplyHeader{XID: 9, Verf: NullAuth, AcceptStat: SystemErr}, 24},
		{"rpc_mismatch", be(9, 1, 1, 0, 2, 2), ReplyHeader{XID: 9, Stat: MsgDenied, RejectStat: RPCMismatch, Low: 2, High: 2}, 24},
		{"auth_error", be(9, 1, 1, 1, 5), ReplyHeader{XID: 9, Stat: MsgDenied, RejectStat: AuthError, AuthStat: AuthTooWeak}, 20},
		{"auth_error gss ctx", be(9, 1, 1, 1, 14), ReplyHeader{XID: 9, Stat: MsgDenied, RejectStat: AuthError, AuthStat: RPCSecGSSCtxProblem}, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h ReplyHeader
			n, err := h.Decode(tt.msg)
			if err != nil || n != tt.n {
				t.Fatalf("Decode = %d, %v; want %d", n, err, tt.n)
			}
			if !sameReply(&h, &tt.want) {
				t.Fatalf("got  %+v\nwant %+v", h, tt.want)
			}
			// Encode gives back the same bytes.
			buf := make([]byte, 64)
			e := xdr.NewEncoder(buf)
			if err := h.Encode(&e); err != nil || !bytes.Equal(e.Bytes(), tt.msg[:n]) || h.EncodedLen() != n {
				t.Fatalf("re-encode %x, %v; want %x (EncodedLen %d)", e.Bytes(), err, tt.msg[:n], h.EncodedLen())
			}
		})
	}
}

func sameReply(a, b *ReplyHeader) bool {
	return a.XID == b.XID && a.Stat == b.Stat && a.Verf.Flavor == b.Verf.Flavor &&
		bytes.Equal(a.Verf.Body, b.Verf.Body) && a.AcceptStat == b.AcceptStat &&
		a.RejectStat == b.RejectStat && a.Low == b.Low && a.High == b.High && a.AuthStat == b.AuthStat
}

func TestReplyDecodeErrors(t *testing.T) {
	tests := []struct {
		name   string
		msg    []byte
		want   error
		field  string
		offset int
		value  uint32
	}{
		{"short xid", []byte{1, 2}, xdr.ErrShort, "xid", 0, 0},
		{"call", be(9, 0, 2), ErrNotReply, "msg_type", 4, 0},
		{"reply_stat 2", be(9, 1, 2), ErrBadReplyStat, "reply_stat", 8, 2},
		{"accept_stat 6", be(9, 1, 0, 0, 0, 6), ErrBadAcceptStat, "accept_stat", 20, 6},
		{"reject_stat 2", be(9, 1, 1, 2), ErrBadRejectStat, "reject_stat", 12, 2},
		{"verf too long", be(9, 1, 0, 6, 500), ErrAuthTooLong, "verf", 16, 500},
		{"prog_mismatch short", be(9, 1, 0, 0, 0, 2, 2), xdr.ErrShort, "prog_mismatch", 24, 0},
		{"rpc_mismatch short", be(9, 1, 1, 0), xdr.ErrShort, "rpc_mismatch", 16, 0},
		{"auth_stat missing", be(9, 1, 1, 1), xdr.ErrShort, "auth_stat", 16, 0},
		{"accept_stat missing", be(9, 1, 0, 0, 0), xdr.ErrShort, "accept_stat", 20, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h ReplyHeader
			n, err := h.Decode(tt.msg)
			checkHeaderError(t, n, err, tt.want, tt.field, tt.offset, tt.value)
			t.Log(err)
		})
	}
}

func TestErrorReplies(t *testing.T) {
	tests := []struct {
		name string
		h    ReplyHeader
		want []byte
	}{
		{"garbage_args", GarbageArgsReply(0x1f), be(0x1f, 1, 0, 0, 0, 4)},
		{"prog_unavail", ProgUnavailReply(0x1f), be(0x1f, 1, 0, 0, 0, 1)},
		{"proc_unavail", ProcUnavailReply(0x1f), be(0x1f, 1, 0, 0, 0, 3)},
		{"system_err", SystemErrReply(0x1f), be(0x1f, 1, 0, 0, 0, 5)},
		{"prog_mismatch", ProgMismatchReply(0x1f, 3, 4), be(0x1f, 1, 0, 0, 0, 2, 3, 4)},
		{"rpc_mismatch", RPCMismatchReply(0x1f), be(0x1f, 1, 1, 0, 2, 2)},
		{"auth_error", AuthErrorReply(0x1f, AuthBadCred), be(0x1f, 1, 1, 1, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf := make([]byte, 64)
			e := xdr.NewEncoder(buf)
			if err := tt.h.Encode(&e); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(e.Bytes(), tt.want) || tt.h.EncodedLen() != len(tt.want) {
				t.Fatalf("encoded %x; want %x", e.Bytes(), tt.want)
			}
		})
	}
}

func TestReplyEncodeRefusesInvalid(t *testing.T) {
	buf := make([]byte, 64)
	for _, h := range []ReplyHeader{
		{Stat: 2},
		{Stat: MsgAccepted, AcceptStat: 6},
		{Stat: MsgDenied, RejectStat: 2},
		{Stat: MsgAccepted, Verf: OpaqueAuth{Body: make([]byte, 401)}},
	} {
		e := xdr.NewEncoder(buf)
		var he *HeaderError
		if err := h.Encode(&e); !errors.As(err, &he) || e.Len() != 0 {
			t.Fatalf("%+v: Encode = %v, wrote %d", h, err, e.Len())
		}
	}
}

func TestPeekMsgType(t *testing.T) {
	if xid, mt, err := PeekMsgType(be(5, 1)); xid != 5 || mt != Reply || err != nil {
		t.Fatal(xid, mt, err)
	}
	if xid, mt, err := PeekMsgType(nfs3GetattrCall); xid != 0x12345678 || mt != Call || err != nil {
		t.Fatal(xid, mt, err)
	}
	if _, _, err := PeekMsgType(be(5, 2)); !errors.Is(err, ErrBadMsgType) {
		t.Fatal(err)
	}
	if _, _, err := PeekMsgType(be(5)); !errors.Is(err, xdr.ErrShort) {
		t.Fatal(err)
	}
}

func TestGSSCred(t *testing.T) {
	handle := []byte{1, 2, 3, 4, 5}
	body := func(vers, proc, seq, svc uint32) []byte {
		return cat(be(vers, proc, seq, svc, uint32(len(handle))), handle, []byte{0, 0, 0})
	}
	tests := []struct {
		name    string
		body    []byte
		wrapped bool
		err     error
	}{
		{"krb5 data", body(1, 0, 77, 1), false, nil},
		{"krb5i data", body(1, 0, 77, 2), true, nil},
		{"krb5p data", body(1, 0, 77, 3), true, nil},
		{"krb5p init", body(1, 1, 0, 3), false, nil},
		{"krb5i destroy", body(1, 3, 9, 2), false, nil},
		{"version 2", body(2, 0, 77, 2), false, ErrBadGSSVersion},
		{"proc 4", body(1, 4, 77, 2), false, ErrBadGSSProc},
		{"service 0", body(1, 0, 77, 0), false, ErrBadGSSService},
		{"service 4", body(1, 0, 77, 4), false, ErrBadGSSService},
		{"truncated handle", body(1, 0, 77, 2)[:22], false, xdr.ErrShort},
		{"empty", nil, false, xdr.ErrShort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wrapped, err := GSSBodyWrapped(OpaqueAuth{Flavor: RPCSecGSS, Body: tt.body})
			if !errors.Is(err, tt.err) || wrapped != tt.wrapped {
				t.Fatalf("GSSBodyWrapped = %v, %v; want %v, %v", wrapped, err, tt.wrapped, tt.err)
			}
			if tt.err != nil {
				return
			}
			c, _ := ParseGSSCred(tt.body)
			if c.Version != 1 || !bytes.Equal(c.Handle, handle) || c.SeqNum != be32(tt.body[8:]) {
				t.Fatalf("%+v", c)
			}
		})
	}
	if w, err := GSSBodyWrapped(OpaqueAuth{Flavor: AuthSys, Body: []byte("junk")}); w || err != nil {
		t.Fatalf("AUTH_SYS: %v, %v", w, err)
	}
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// TestHeaderBounds checks MaxCallHeader and MaxReplyHeader against the
// longest headers Encode writes (and so Decode accepts).
func TestHeaderBounds(t *testing.T) {
	full := OpaqueAuth{Flavor: RPCSecGSS, Body: make([]byte, MaxAuthBytes)}
	c := CallHeader{RPCVers: RPCVersion, Cred: full, Verf: full}
	if n := c.EncodedLen(); n != MaxCallHeader {
		t.Fatalf("longest call header %d bytes; MaxCallHeader %d", n, MaxCallHeader)
	}
	longest := 0
	for _, r := range []ReplyHeader{
		{Stat: MsgAccepted, Verf: full, AcceptStat: ProgMismatch},
		{Stat: MsgAccepted, Verf: full, AcceptStat: Success},
		RPCMismatchReply(1), AuthErrorReply(1, AuthTooWeak),
	} {
		buf := make([]byte, MaxReplyHeader+4)
		e := xdr.NewEncoder(buf)
		if err := r.Encode(&e); err != nil {
			t.Fatal(err)
		}
		var back ReplyHeader
		if n, err := back.Decode(e.Bytes()); err != nil || n != e.Len() {
			t.Fatalf("decode %d bytes: %d, %v", e.Len(), n, err)
		}
		longest = max(longest, e.Len())
	}
	if longest != MaxReplyHeader {
		t.Fatalf("longest reply header %d bytes; MaxReplyHeader %d", longest, MaxReplyHeader)
	}
}

// checkHeaderError checks that a Decode that read n bytes failed with a
// HeaderError wrapping want at field, offset and value.
func checkHeaderError(t *testing.T, n int, err, want error, field string, offset int, value uint32) {
	t.Helper()
	var he *HeaderError
	if !errors.As(err, &he) || !errors.Is(err, want) || n != 0 {
		t.Fatalf("Decode = %d, %v; want HeaderError(%v)", n, err, want)
	}
	if he.Field != field || he.Offset != offset || he.Value != value {
		t.Fatalf("HeaderError %+v; want field %s offset %d value %d", *he, field, offset, value)
	}
}
