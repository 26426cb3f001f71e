package ulb

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rdmagw/rdmagw/xdr"
)

// Real NFSv4.0 (libnfs -> nfs-ganesha) and NFSv4.1 (nfs-ganesha PROXY_V4
// -> nfs-ganesha) COMPOUNDs: the walker must parse every operation to the
// last byte, and find the items where tshark found them.

// goldenOps is a sidecar's list of COMPOUND operation numbers.
func goldenOps(tb testing.TB, g golden, key string) []uint32 {
	tb.Helper()
	var ops []uint32
	for _, s := range strings.Split(g.sidecar[key], ",") {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			tb.Fatalf("%s: %s=%q", g.name, key, g.sidecar[key])
		}
		ops = append(ops, uint32(n))
	}
	return ops
}

func TestNFS4Golden(t *testing.T) {
	names := append(goldenNames(t, "nfs40-"), goldenNames(t, "nfs41-")...)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			g := loadGolden(t, name)
			r := checkSplits(t, g.t, g.body)
			if r.end != "done" {
				t.Fatalf("walk ended %q", r.end)
			}
			if g.t.proc == nfs4ProcCompound && len(g.body) <= 1024 {
				target := "FuzzNFS4Call"
				if g.t.dir == Reply {
					target = "FuzzNFS4Reply"
				}
				writeCorpus(t, target, "golden-"+name, g.body)
			}
			// The walk ends at the last byte of the message: every
			// operation was skipped exactly.
			var w Walker
			_ = w.Reset(g.t.dir, g.t.prog, g.t.vers, g.t.proc)
			for off := 0; ; {
				st, err := w.Next(g.body[off:])
				if err != nil {
					t.Fatal(err)
				}
				if st.Kind == StepDone {
					break
				}
				off += st.Item.Offset + st.Item.Length + st.Item.Pad
			}
			if w.Offset() != len(g.body) {
				t.Fatalf("walk ended at %d of %d bytes", w.Offset(), len(g.body))
			}

			lenAt, ok := g.sidecarInt(t, "data.len_word_offset")
			if !ok {
				if len(r.items) != 0 {
					t.Fatalf("items %v in a message without eligible data", r)
				}
				return
			}
			if g.t.proc == nfs4ProcNull {
				t.Fatal("NULL with an item")
			}
			ops := goldenOps(t, g, "v4.ops")
			var kind Kind
			var op uint32
			switch g.sidecar["data.item"] + "/" + strconv.Itoa(int(g.t.dir)) {
			case "nfs.data/0":
				kind, op = KindWriteData, opWrite
			case "nfs.data/1":
				kind, op = KindReadData, opRead
			case "nfs.symlink.linktext/0":
				kind, op = KindSymlinkPath, opCreate
			case "nfs.symlink.linktext/1":
				kind, op = KindReadlinkPath, opReadlink
			default:
				t.Fatalf("data.item %q", g.sidecar["data.item"])
			}
			checkGoldenItem(t, g, r, lenAt, kind, slices.Index(ops, op))
		})
	}
}

// TestNFS4GoldenEstimate: each captured reply fits its call's estimate.
func TestNFS4GoldenEstimate(t *testing.T) {
	checkGoldenEstimates(t, append(goldenNames(t, "nfs40-"), goldenNames(t, "nfs41-")...))
}

// TestNFS4GoldenKernelExchangeID walks the EXCHANGE_ID the Linux 6.1
// NFS/RDMA client sent (an RDMA_MSG: 48-byte RPC-over-RDMA header, then
// the RPC call).
func TestNFS4GoldenKernelExchangeID(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(goldenDir, "kclient-exchange-id-msg.bin"))
	if err != nil {
		t.Skip(err)
	}
	d := xdr.NewDecoder(b[48:])
	hdr := make([]uint32, 6) // xid, CALL, rpcvers, prog, vers, proc
	for i := range hdr {
		hdr[i], _ = d.Uint32()
	}
	for range 2 { // cred, verifier4
		_, _ = d.Uint32()
		if err := d.SkipOpaque(400); err != nil {
			t.Fatal(err)
		}
	}
	if hdr[3] != ProgNFS || hdr[4] != 4 || hdr[5] != nfs4ProcCompound {
		t.Fatalf("RPC header %v", hdr)
	}
	args := d.Rest()
	tg := walkTarget{Call, ProgNFS, 4, nfs4ProcCompound}
	if r := checkSplits(t, tg, args); r.end != "done" || len(r.items) != 0 {
		t.Fatalf("walk: %v", r)
	}
	var w Walker
	_ = w.Reset(Call, ProgNFS, 4, nfs4ProcCompound)
	if st, err := w.Next(args); err != nil || st.Consumed != len(args) {
		t.Fatalf("%+v %v: %d bytes of arguments", st, err, len(args))
	}
	e, err := EstimateReply(ProgNFS, 4, nfs4ProcCompound, args)
	if err != nil || e.NItems != 0 {
		t.Fatalf("estimate %+v %v", e, err)
	}
	// The client offered a 4240-byte Reply chunk for this reply.
	t.Logf("EXCHANGE_ID reply estimate %d bytes (the kernel offered a 4240-byte Reply chunk)", e.Inline)
	writeCorpus(t, "FuzzNFS4Call", "golden-kclient-exchange-id", args)
}
