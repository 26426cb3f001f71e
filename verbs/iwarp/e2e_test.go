package iwarp

import (
	"testing"

	"github.com/rdmagw/rdmagw/verbs"
)

func TestPrivateDataAndSendRecv(t *testing.T) {
	cli, srv := pair(t, Config{}, "")
	if string(cli.conn.PrivateData()) != "server-pd" || string(srv.conn.PrivateData()) != "client-pd" {
		t.Fatalf("private data: client got %q, server got %q", cli.conn.PrivateData(), srv.conn.PrivateData())
	}
	rbuf := srv.mem(t, 8192, verbs.AccessLocalWrite)
	sbuf := cli.mem(t, 8192, verbs.AccessLocalWrite)
	for i, n := range []int{0, 1, 3, 4096, 8192} {
		if err := srv.conn.PostRecv(&verbs.RecvWR{ID: uint64(100 + i), SGL: []verbs.SGE{{Buf: rbuf.Bytes(), LKey: rbuf.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		fill(sbuf.Bytes()[:n], byte(i))
		if err := cli.conn.PostSend(&verbs.SendWR{ID: uint64(i), Op: verbs.OpSend, Signal: true, SGL: []verbs.SGE{{Buf: sbuf.Bytes()[:n], LKey: sbuf.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		wc := wait(t, srv.rcq)
		expectStatus(t, wc, verbs.OpRecv, verbs.StatusSuccess)
		if wc.ID != uint64(100+i) || wc.ByteLen != n || wc.Conn != srv.conn {
			t.Fatalf("recv completion %+v for a %d-byte send", wc, n)
		}
		sameBytes(t, rbuf.Bytes()[:n], sbuf.Bytes()[:n])
		wc = wait(t, cli.scq)
		expectStatus(t, wc, verbs.OpSend, verbs.StatusSuccess)
		if wc.ID != uint64(i) || wc.ByteLen != n {
			t.Fatalf("send completion %+v", wc)
		}
	}
}

func TestRDMAWriteRead(t *testing.T) {
	for _, cfg := range []Config{{}, {MaxFPDU: 1024}, {DisableCRC: true}, {MPARevision: 1}, {PeerToPeer: true}, {CompleteOnTransmit: true}, {TxMode: TxGreedy}, {TxMode: TxGoroutine}} {
		cli, srv := pair(t, cfg, "")
		const max = 8 << 20
		remote := srv.mem(t, max, allAccess)
		local := cli.mem(t, max, allAccess)
		back := cli.mem(t, max, allAccess)
		for i, n := range []int{1, 13, 4096, 65536 + 3, 1 << 20, max} {
			if cfg.MaxFPDU != 0 && n > 1<<20 {
				continue
			}
			off := i * 8 % 64
			if n+off > max {
				off = 0
			}
			fill(local.Bytes()[:n], byte(i+1))
			err := cli.conn.PostSend(&verbs.SendWR{ID: 1, Op: verbs.OpRDMAWrite, Signal: true,
				SGL:        []verbs.SGE{{Buf: local.Bytes()[:n], LKey: local.LKey()}},
				RemoteAddr: remote.Addr() + uint64(off), RKey: remote.RKey()})
			if err != nil {
				t.Fatal(err)
			}
			expectStatus(t, wait(t, cli.scq), verbs.OpRDMAWrite, verbs.StatusSuccess)
			if !cfg.CompleteOnTransmit {
				sameBytes(t, remote.Bytes()[off:off+n], local.Bytes()[:n])
			}
			// Read it back in two SGEs.
			h := n / 2
			err = cli.conn.PostSend(&verbs.SendWR{ID: 2, Op: verbs.OpRDMARead, Signal: true,
				SGL:        []verbs.SGE{{Buf: back.Bytes()[:h], LKey: back.LKey()}, {Buf: back.Bytes()[h:n], LKey: back.LKey()}},
				RemoteAddr: remote.Addr() + uint64(off), RKey: remote.RKey()})
			if err != nil {
				t.Fatal(err)
			}
			wc := wait(t, cli.scq)
			expectStatus(t, wc, verbs.OpRDMARead, verbs.StatusSuccess)
			if wc.ByteLen != n {
				t.Fatalf("read completion %+v, want %d bytes", wc, n)
			}
			sameBytes(t, back.Bytes()[:n], local.Bytes()[:n])
		}
		cli.conn.Close()
		srv.conn.Close()
	}
}
