package tcprpc

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rdmagw/rdmagw/xdr"
)

// goldenDir holds captures of real nfs-ganesha, libnfs and Linux client
// traffic; its README.md lists the field values asserted here.
const goldenDir = "../testdata/golden"

func loadSidecar(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kv := make(map[string]string)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			kv[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return kv
}

// num parses a sidecar number (decimal or 0x hex); want says it must exist.
func num(t *testing.T, kv map[string]string, key string) uint32 {
	t.Helper()
	s, ok := kv[key]
	if !ok {
		t.Fatalf("sidecar has no %s", key)
	}
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		t.Fatalf("sidecar %s=%q: %v", key, s, err)
	}
	return uint32(v)
}

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

// checkPattern verifies a payload against the README's data patterns.
func checkPattern(t *testing.T, pattern string, data []byte) {
	t.Helper()
	switch {
	case pattern == "":
	case strings.HasPrefix(pattern, "hello13"):
		if string(data) != "Hello, RDMA!\n" {
			t.Fatalf("payload %q; want hello13", data)
		}
	case strings.HasPrefix(pattern, "mod251"):
		var off int
		if _, err := fmt.Sscanf(pattern[strings.LastIndex(pattern, "file_offset "):], "file_offset %d)", &off); err != nil {
			t.Fatalf("pattern %q: %v", pattern, err)
		}
		for i, b := range data {
			if int(b) != (off+i)%251 {
				t.Fatalf("payload byte %d = %#x; want %#x", i, b, (off+i)%251)
			}
		}
	default:
		t.Fatalf("unknown pattern %q", pattern)
	}
}

// TestGoldenTCPRecords reads every captured TCP record the way the gateway
// will: RecordReader, Peek the head, decode the RPC header, land the DDP
// payload in a buffer of its own, read the tail. Then it frames the record
// again with RecordWriter and compares with the capture byte for byte.
func TestGoldenTCPRecords(t *testing.T) {
	txts, _ := filepath.Glob(filepath.Join(goldenDir, "*.txt"))
	if len(txts) == 0 {
		t.Skip("no golden captures in " + goldenDir)
	}
	ran := 0
	for _, txt := range txts {
		name := strings.TrimSuffix(filepath.Base(txt), ".txt")
		t.Run(name, func(t *testing.T) {
			kv := loadSidecar(t, txt)
			if kv["record.includes_fraghdr"] != "1" {
				t.Skip("not a TCP record")
			}
			ran++
			bin, err := os.ReadFile(strings.TrimSuffix(txt, ".txt") + ".bin")
			if err != nil {
				t.Fatal(err)
			}
			if int(num(t, kv, "record.len")) != len(bin) {
				t.Fatalf("record.len %s, file %d bytes", kv["record.len"], len(bin))
			}
			body := bin[4:] // single fragment (record.fragments=1) in all captures
			if num(t, kv, "record.fragments") != 1 || num(t, kv, "rpc.fraglen") != uint32(len(body)) {
				t.Fatalf("unexpected framing in sidecar")
			}

			// A small read-ahead buffer so 4 KiB payloads take the
			// direct path.
			rr := NewRecordReader(bytes.NewReader(bin), &ReaderConfig{BufferSize: 256})
			if err := rr.Next(); err != nil {
				t.Fatal(err)
			}
			if n, ok := rr.Remaining(); !ok || n != len(body) {
				t.Fatalf("Remaining %d, %v; want %d", n, ok, len(body))
			}
			head, err := rr.Peek(min(256, len(body)))
			if err != nil {
				t.Fatal(err)
			}
			xid, mt, err := PeekMsgType(head)
			if err != nil || xid != num(t, kv, "rpc.xid") || mt != MsgType(num(t, kv, "rpc.msgtyp")) {
				t.Fatalf("PeekMsgType = %#x, %d, %v", xid, mt, err)
			}
			fl := flavors(t, kv)
			var hdrLen int
			var reencoded []byte
			buf := make([]byte, 512)
			e := xdr.NewEncoder(buf)
			if mt == Call {
				var h CallHeader
				if hdrLen, err = h.Decode(head); err != nil {
					t.Fatal(err)
				}
				if h.XID != xid || h.RPCVers != num(t, kv, "rpc.version") || h.Prog != num(t, kv, "rpc.program") ||
					h.Vers != num(t, kv, "rpc.programversion") || h.Proc != num(t, kv, "rpc.procedure") {
					t.Fatalf("call header %+v", h)
				}
				if len(fl) != 2 || h.Cred.Flavor != fl[0] || h.Verf.Flavor != fl[1] {
					t.Fatalf("flavors %d/%d; sidecar %v", h.Cred.Flavor, h.Verf.Flavor, fl)
				}
				if m, ok := kv["rpc.auth.machinename"]; ok && authSysMachine(t, h.Cred.Body) != m {
					t.Fatalf("machinename %q; want %q", authSysMachine(t, h.Cred.Body), m)
				}
				if w, err := GSSBodyWrapped(h.Cred); w || err != nil {
					t.Fatalf("GSSBodyWrapped on AUTH_SYS/NONE: %v %v", w, err)
				}
				err = h.Encode(&e)
			} else {
				var h ReplyHeader
				if hdrLen, err = h.Decode(head); err != nil {
					t.Fatal(err)
				}
				if h.XID != xid || h.Stat != ReplyStat(num(t, kv, "rpc.replystat")) ||
					h.AcceptStat != AcceptStat(num(t, kv, "rpc.state_accept")) || h.Verf.Flavor != fl[0] {
					t.Fatalf("reply header %+v", h)
				}
				err = h.Encode(&e)
			}
			reencoded = e.Bytes()
			if err != nil || !bytes.Equal(reencoded, body[:hdrLen]) {
				t.Fatalf("re-encoded header %x\ncaptured          %x (%v)", reencoded, body[:hdrLen], err)
			}

			// Land the payload (or, without one, the rest) in its own buffer.
			off, plen := len(body), 0
			if _, ok := kv["data.offset"]; ok {
				off = int(num(t, kv, "data.offset")) - 4
				plen = int(num(t, kv, "data.len"))
			}
			if off < hdrLen {
				t.Fatalf("payload at %d inside the RPC header (%d bytes)", off, hdrLen)
			}
			if n, err := rr.Discard(off); n != off || err != nil {
				t.Fatalf("Discard(%d) = %d, %v", off, n, err)
			}
			payload := make([]byte, plen)
			if _, err := rr.ReadFull(payload); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(payload, body[off:off+plen]) {
				t.Fatal("payload differs from capture")
			}
			checkPattern(t, kv["data.pattern"], payload)
			if text, ok := kv["data.text"]; ok && string(payload) != text {
				t.Fatalf("link text %q; want %q", payload, text)
			}
			tail, err := io.ReadAll(rr)
			if err != nil || !bytes.Equal(tail, body[off+plen:]) {
				t.Fatalf("tail %d bytes, %v", len(tail), err)
			}
			if rr.Consumed() != int64(len(body)) || rr.Fragments() != 1 {
				t.Fatalf("Consumed %d Fragments %d", rr.Consumed(), rr.Fragments())
			}
			if err := rr.Next(); err != io.EOF {
				t.Fatalf("after the record: %v", err)
			}

			// Frame it again: head, payload, tail in one vectored write.
			var out bytes.Buffer
			if err := NewRecordWriter(&out, nil).WriteRecord(body[:off], payload, body[off+plen:]); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), bin) {
				t.Fatal("re-framed record differs from capture")
			}
		})
	}
	if ran == 0 {
		t.Fatal("no TCP records found among the golden captures")
	}
}

// TestGoldenKernelClientCalls decodes the RPC calls the Linux 6.1
// NFS/RDMA client sent, found after the RPC-over-RDMA header.
func TestGoldenKernelClientCalls(t *testing.T) {
	for _, name := range []string{"kclient-first-msg", "kclient-exchange-id-msg"} {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join(goldenDir, name)
			if _, err := os.Stat(base + ".txt"); err != nil {
				t.Skip("no golden capture")
			}
			kv := loadSidecar(t, base+".txt")
			bin, err := os.ReadFile(base + ".bin")
			if err != nil {
				t.Fatal(err)
			}
			off, mlen := int(num(t, kv, "rpc_msg_offset")), int(num(t, kv, "rpc_msg_len"))
			if off+mlen != len(bin) {
				t.Fatalf("rpc_msg_offset %d + rpc_msg_len %d != %d", off, mlen, len(bin))
			}
			var h CallHeader
			n, err := h.Decode(bin[off:])
			if err != nil {
				t.Fatal(err)
			}
			if h.XID != num(t, kv, "rpc.xid") || h.RPCVers != num(t, kv, "rpc.version") ||
				h.Prog != num(t, kv, "rpc.program") || h.Vers != num(t, kv, "rpc.programversion") ||
				h.Proc != num(t, kv, "rpc.procedure") {
				t.Fatalf("call header %+v", h)
			}
			fl := flavors(t, kv)
			if h.Cred.Flavor != fl[0] || h.Verf.Flavor != fl[1] {
				t.Fatalf("flavors %d/%d; sidecar %v", h.Cred.Flavor, h.Verf.Flavor, fl)
			}
			if m, ok := kv["rpc.auth.machinename"]; ok && authSysMachine(t, h.Cred.Body) != m {
				t.Fatalf("machinename %q; want %q", authSysMachine(t, h.Cred.Body), m)
			}
			if h.Proc == 0 && n != mlen {
				t.Fatalf("NULL call header %d bytes; the message is %d", n, mlen)
			}
		})
	}
}
