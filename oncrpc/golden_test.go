package oncrpc

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rdmagw/rdmagw/internal/golden"
	"github.com/rdmagw/rdmagw/xdr"
)

// flavors splits rpc.auth.flavor ("1,0": credential, verifier).
func flavors(t *testing.T, kv map[string]string) []AuthFlavor {
	var out []AuthFlavor
	for _, f := range strings.Split(kv["rpc.auth.flavor"], ",") {
		v, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			t.Fatalf("rpc.auth.flavor %q", kv["rpc.auth.flavor"])
		}
		out = append(out, AuthFlavor(v))
	}
	return out
}

// authSysMachine returns the machinename of an AUTH_SYS body.
func authSysMachine(t *testing.T, body []byte) string {
	d := xdr.NewDecoder(body)
	if _, err := d.Uint32(); err != nil { // stamp
		t.Fatal(err)
	}
	name, err := d.String(255)
	if err != nil {
		t.Fatal(err)
	}
	return string(name)
}

// checkCall compares a decoded call header with the capture's sidecar.
func checkCall(t *testing.T, kv map[string]string, h *CallHeader) {
	t.Helper()
	num := func(key string) uint32 { return golden.Num(t, kv, key) }
	if h.XID != num("rpc.xid") || h.RPCVers != num("rpc.version") || h.Prog != num("rpc.program") ||
		h.Vers != num("rpc.programversion") || h.Proc != num("rpc.procedure") {
		t.Fatalf("call header %+v", h)
	}
	fl := flavors(t, kv)
	if len(fl) != 2 || h.Cred.Flavor != fl[0] || h.Verf.Flavor != fl[1] {
		t.Fatalf("flavors %d/%d; sidecar %v", h.Cred.Flavor, h.Verf.Flavor, fl)
	}
	if m, ok := kv["rpc.auth.machinename"]; ok && authSysMachine(t, h.Cred.Body) != m {
		t.Fatalf("machinename %q; want %q", authSysMachine(t, h.Cred.Body), m)
	}
}

// TestGoldenTCPHeaders decodes the RPC header of every captured TCP record
// (nfs-ganesha, libnfs), checks it against tshark's sidecar, and encodes
// it again byte for byte. The payload (sidecar data.offset) must start
// after the header.
func TestGoldenTCPHeaders(t *testing.T) {
	golden.TCPRecords(t, func(t *testing.T, kv map[string]string, bin []byte) {
		body := bin[4:] // single fragment (record.fragments=1) in all captures
		xid, mt, err := PeekMsgType(body)
		if err != nil || xid != golden.Num(t, kv, "rpc.xid") || mt != MsgType(golden.Num(t, kv, "rpc.msgtyp")) {
			t.Fatalf("PeekMsgType = %#x, %d, %v", xid, mt, err)
		}
		var hdrLen int
		buf := make([]byte, 512)
		e := xdr.NewEncoder(buf)
		if mt == Call {
			var h CallHeader
			if hdrLen, err = h.Decode(body); err != nil {
				t.Fatal(err)
			}
			checkCall(t, kv, &h)
			if w, err := GSSBodyWrapped(h.Cred); w || err != nil {
				t.Fatalf("GSSBodyWrapped on AUTH_SYS/NONE: %v %v", w, err)
			}
			err = h.Encode(&e)
		} else {
			var h ReplyHeader
			if hdrLen, err = h.Decode(body); err != nil {
				t.Fatal(err)
			}
			if h.XID != xid || h.Stat != ReplyStat(golden.Num(t, kv, "rpc.replystat")) ||
				h.AcceptStat != AcceptStat(golden.Num(t, kv, "rpc.state_accept")) ||
				h.Verf.Flavor != flavors(t, kv)[0] {
				t.Fatalf("reply header %+v", h)
			}
			err = h.Encode(&e)
		}
		if err != nil || !bytes.Equal(e.Bytes(), body[:hdrLen]) {
			t.Fatalf("re-encoded header %x\ncaptured          %x (%v)", e.Bytes(), body[:hdrLen], err)
		}
		if _, ok := kv["data.offset"]; ok {
			if off := int(golden.Num(t, kv, "data.offset")) - 4; off < hdrLen {
				t.Fatalf("payload at %d inside the RPC header (%d bytes)", off, hdrLen)
			}
		}
	})
}

// TestGoldenKernelClientCalls decodes the RPC calls the Linux 6.1
// NFS/RDMA client sent, found after the RPC-over-RDMA header.
func TestGoldenKernelClientCalls(t *testing.T) {
	for _, name := range []string{"kclient-first-msg", "kclient-exchange-id-msg"} {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join(golden.Dir(), name)
			if _, err := os.Stat(base + ".txt"); err != nil {
				t.Skip("no golden capture")
			}
			kv := golden.Sidecar(t, base+".txt")
			bin, err := os.ReadFile(base + ".bin")
			if err != nil {
				t.Fatal(err)
			}
			off, mlen := int(golden.Num(t, kv, "rpc_msg_offset")), int(golden.Num(t, kv, "rpc_msg_len"))
			if off+mlen != len(bin) {
				t.Fatalf("rpc_msg_offset %d + rpc_msg_len %d != %d", off, mlen, len(bin))
			}
			var h CallHeader
			n, err := h.Decode(bin[off:])
			if err != nil {
				t.Fatal(err)
			}
			checkCall(t, kv, &h)
			if h.Proc == 0 && n != mlen {
				t.Fatalf("NULL call header %d bytes; the message is %d", n, mlen)
			}
		})
	}
}
