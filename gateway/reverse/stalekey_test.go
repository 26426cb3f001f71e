package reverse_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/verbs"
)

// A "malicious server" on raw verbs: an RPC-over-RDMA responder that
// answers NFSv3 READ calls by RDMA-writing into the call's Write chunk,
// except that, once asked to, it aims one RDMA Write at the rkey of an
// earlier, finished RPC. The gateway registered that memory for the
// earlier RPC alone and invalidated it when its reply came: the Write
// must fail with a remote access error at the server, and nothing the
// client reads may contain the evil bytes.

type evilServer struct {
	t     *testing.T
	dev   verbs.Device
	ln    verbs.Listener
	evil  chan struct{} // closed: the next READ replays the stale rkey
	mu    sync.Mutex
	stale rdmarpc.Segment
	have  bool
	used  bool // the stale rkey was tried once; honest from then on
	// statuses of the stale Writes, one per attempt
	staleWC chan verbs.Status
}

var evilBytes = bytes.Repeat([]byte("EVIL"), 1024)

func startEvilServer(t *testing.T) *evilServer {
	s := &evilServer{t: t, evil: make(chan struct{}), staleWC: make(chan verbs.Status, 4)}
	s.dev, s.ln = startRDMAServer(t, func(req verbs.ConnRequest) func(context.Context) {
		return func(ctx context.Context) { s.serve(ctx, req) }
	})
	return s
}

// readData is what the honest READ returns: offset-dependent bytes.
func readData(off uint64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(off) + byte(i*7) + 1
	}
	return b
}

func (s *evilServer) serve(ctx context.Context, req verbs.ConnRequest) {
	const nrecv = 8
	pc, err := acceptPeer(s.dev, req, peerOptions{nrecv: nrecv, recvSize: 4096, extra: 2 * 65536})
	if err != nil {
		return
	}
	defer pc.close()
	conn, cq, mr, mem, recvs := pc.conn, pc.scq, pc.mr, pc.mem, pc.recvs
	sendBuf := pc.rest[:65536]
	dataBuf := pc.rest[65536:]
	var wcs [8]verbs.WC
	var h rdmarpc.Header
	wait := func(want verbs.Opcode) (verbs.WC, bool) {
		for {
			n := cq.Poll(wcs[:1])
			if n == 1 {
				if wcs[0].Op == want || wcs[0].Status != verbs.StatusSuccess {
					return wcs[0], true
				}
				continue
			}
			if err := cq.Wait(ctx); err != nil {
				return verbs.WC{}, false
			}
		}
	}
	for {
		wc, ok := wait(verbs.OpRecv)
		if !ok || wc.Status != verbs.StatusSuccess {
			return
		}
		idx := int(wc.ID)
		msg := mem[idx*4096 : idx*4096+wc.ByteLen]
		hlen, err := h.Decode(msg, rdmarpc.DefaultLimits())
		if err != nil {
			return
		}
		rpc := msg[hlen:]
		xid := binary.BigEndian.Uint32(rpc)
		proc := binary.BigEndian.Uint32(rpc[20:])
		// The reply: RPC accepted/success header.
		reply := gwtest.BE32(nil, xid, 1, 0, 0, 0, 0)
		var out rdmarpc.Header
		out.Init(xid, 16, rdmarpc.ProcMsg)
		if proc == 6 && len(h.Writes) == 1 { // READ with a Write chunk
			args := rpc[40:] // AUTH_NONE/AUTH_SYS: find the args after cred and verf
			credLen := binary.BigEndian.Uint32(rpc[28:])
			args = rpc[32+int(credLen+3)&^3+8:]
			fhLen := int(binary.BigEndian.Uint32(args))
			off := binary.BigEndian.Uint64(args[4+(fhLen+3)&^3:])
			count := int(binary.BigEndian.Uint32(args[4+(fhLen+3)&^3+8:]))
			seg := h.Writes[0][0]
			n := min(count, int(seg.Length))
			target, data := seg, readData(off, n)
			s.mu.Lock()
			select {
			case <-s.evil:
				if s.have && !s.used {
					s.used = true
					target, data = s.stale, evilBytes[:min(n, int(s.stale.Length))]
				}
			default:
			}
			s.mu.Unlock()
			copy(dataBuf, data)
			wr := verbs.SendWR{ID: 100, Op: verbs.OpRDMAWrite, SGL: []verbs.SGE{{Buf: dataBuf[:len(data)], LKey: mr.LKey()}},
				Signal: true, RemoteAddr: target.Offset, RKey: target.Handle}
			if err := conn.PostSend(&wr); err != nil {
				return
			}
			wc, ok := wait(verbs.OpRDMAWrite)
			if !ok {
				return
			}
			if target != seg {
				s.staleWC <- wc.Status
				return // the connection is terminated either way
			}
			if wc.Status != verbs.StatusSuccess {
				return
			}
			s.mu.Lock()
			s.stale, s.have = seg, true
			s.mu.Unlock()
			out.AppendWriteChunk(rdmarpc.Segment{Handle: seg.Handle, Length: uint32(n), Offset: seg.Offset})
			reply = gwtest.BE32(reply, 0, 0, uint32(n), 1, uint32(n)) // NFS3_OK, no attrs, count, eof, data length
		}
		hn, _ := out.Encode(sendBuf)
		m := hn + copy(sendBuf[hn:], reply)
		sw := verbs.SendWR{ID: 200, Op: verbs.OpSend, SGL: []verbs.SGE{{Buf: sendBuf[:m], LKey: mr.LKey()}}, Signal: true}
		// The receive goes back before the reply leaves.
		recvs[idx].Next = nil
		if conn.PostRecv(&recvs[idx]) != nil || conn.PostSend(&sw) != nil {
			return
		}
		if wc, ok := wait(verbs.OpSend); !ok || wc.Status != verbs.StatusSuccess {
			return
		}
	}
}

func TestReverseStaleRKeyRejected(t *testing.T) {
	srv := startEvilServer(t)
	rev := startReverse(t, srv.ln.Addr().String(), scriptedV1Peer)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tr, err := nfsclient.DialTCP(ctx, rev.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	c := &nfsclient.V3{T: tr}
	fh := []byte("a file handle")

	got, _, err := c.Read(ctx, fh, 0, 4096)
	if err != nil || !bytes.Equal(got, readData(0, 4096)) {
		t.Fatalf("honest READ: %d bytes, %v", len(got), err)
	}
	// The server now replays the first READ's rkey for the second READ.
	close(srv.evil)
	got, _, err = c.Read(ctx, fh, 8192, 4096)
	select {
	case st := <-srv.staleWC:
		if st != verbs.StatusRemoteAccess {
			t.Fatalf("RDMA Write with a stale rkey completed with %v, want %v", st, verbs.StatusRemoteAccess)
		}
	case <-ctx.Done():
		t.Fatal("the server never tried the stale rkey")
	}
	// The server terminated the connection; the gateway reconnected and
	// re-sent the READ, which the (now honest) server answered.
	if err != nil {
		t.Fatalf("READ after the attack: %v", err)
	}
	if bytes.Contains(got, []byte("EVIL")) || !bytes.Equal(got, readData(8192, 4096)) {
		t.Fatalf("READ after the attack returned wrong bytes (%q...)", got[:8])
	}
	if n := gwtest.Metric(t, rev.Metrics(), "rdmagw_backend_reconnects_total"); n < 1 {
		t.Errorf("reconnects = %v, want at least 1", n)
	}
}
