package iwarp

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// TestTshark captures a conversation on loopback and has Wireshark's
// iwarp_mpa and iwarp_ddp_rdmap dissectors check it: every FPDU's CRC,
// and the opcodes, STags, offsets and lengths we sent.
func TestTshark(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	for _, tool := range []string{"tshark", "tcpdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	if d := os.Getenv("IWARP_PCAP_DIR"); d != "" {
		dir = d
	}
	pcap := filepath.Join(dir, "iwarp.pcap")
	port := freePort(t)
	dump := exec.Command("tcpdump", "--immediate-mode", "-i", "lo", "-U", "-n", "-s", "0", "-w", pcap, "tcp", "port", strconv.Itoa(port))
	stderr, _ := dump.StderrPipe()
	if err := dump.Start(); err != nil {
		t.Skipf("tcpdump: %v", err)
	}
	started := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		ok := false
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on") && !ok {
				ok = true
				started <- true
			}
		}
		if !ok {
			started <- false
		}
	}()
	select {
	case ok := <-started:
		if !ok {
			dump.Wait()
			t.Skip("tcpdump could not capture on lo")
		}
	case <-time.After(10 * time.Second):
		dump.Process.Kill()
		t.Skip("tcpdump did not start")
	}

	const fpdu = 1024
	cli, srv := pair(t, Config{MaxFPDU: fpdu}, fmt.Sprintf("127.0.0.1:%d", port))
	exposed := srv.mem(t, 8192, allAccess)
	rbuf := srv.mem(t, 8192, verbs.AccessLocalWrite)
	lbuf := cli.mem(t, 8192, allAccess)
	fill(exposed.Bytes(), 0x5a)
	fill(lbuf.Bytes(), 0xa5)
	srv.conn.PostRecv(&verbs.RecvWR{ID: 1, SGL: []verbs.SGE{{Buf: rbuf.Bytes()[:4096], LKey: rbuf.LKey()}}})
	srv.conn.PostRecv(&verbs.RecvWR{ID: 2, SGL: []verbs.SGE{{Buf: rbuf.Bytes()[4096:], LKey: rbuf.LKey()}}})
	const sendLen, writeLen, readLen = 100, 3000, 2500
	wr := &verbs.SendWR{ID: 1, Op: verbs.OpSend, Signal: true, SGL: []verbs.SGE{{Buf: lbuf.Bytes()[:sendLen], LKey: lbuf.LKey()}}}
	wr.Next = &verbs.SendWR{ID: 2, Op: verbs.OpRDMAWrite, Signal: true, SGL: []verbs.SGE{{Buf: lbuf.Bytes()[:writeLen], LKey: lbuf.LKey()}},
		RemoteAddr: exposed.Addr() + 8, RKey: exposed.RKey()}
	wr.Next.Next = &verbs.SendWR{ID: 3, Op: verbs.OpRDMARead, Signal: true, SGL: []verbs.SGE{{Buf: lbuf.Bytes()[4096 : 4096+readLen], LKey: lbuf.LKey()}},
		RemoteAddr: exposed.Addr() + 4000, RKey: exposed.RKey()}
	wr.Next.Next.Next = &verbs.SendWR{ID: 4, Op: verbs.OpSendInv, Signal: true, InvalidateRKey: exposed.RKey(), SGL: []verbs.SGE{{Buf: lbuf.Bytes()[:7], LKey: lbuf.LKey()}}}
	if err := cli.conn.PostSend(wr); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if wc := wait(t, cli.scq); wc.Status != verbs.StatusSuccess || wc.ID != uint64(i+1) {
			t.Fatalf("completion %+v", wc)
		}
	}
	wait(t, srv.rcq)
	wait(t, srv.rcq)
	cli.conn.Disconnect()
	waitDone(t, cli.conn)
	waitDone(t, srv.conn)
	time.Sleep(1500 * time.Millisecond) // let libpcap hand over its last block
	dump.Process.Signal(os.Interrupt)
	dump.Wait()

	// Decode. The MPA dissector is heuristic (4.x has no Decode As entry
	// for it); RPC-over-RDMA's heuristic is turned off because our test
	// payloads are not RPC-over-RDMA messages.
	base := []string{"-r", pcap, "--disable-protocol", "rpcordma"}
	run := func(args ...string) string {
		out, err := exec.Command("tshark", append(append([]string{}, base...), args...)...).Output()
		if err != nil {
			t.Fatalf("tshark %v: %v", args, err)
		}
		return string(out)
	}
	if bad := strings.TrimSpace(run("-Y", "_ws.malformed or _ws.expert.severity >= 0x00800000")); bad != "" {
		t.Errorf("frames with errors:\n%s\n%s", bad, run("-V", "-Y", "_ws.malformed or _ws.expert.severity >= 0x00800000"))
	}
	verbose := run("-V")
	good, badCRC := strings.Count(verbose, "(Good CRC32)"), strings.Count(verbose, "Bad CRC32")
	if !strings.Contains(verbose, "MPA Request Frame") && !strings.Contains(verbose, "Request frame header") {
		t.Fatalf("tshark did not see the MPA Request:\n%s", run())
	}

	fields := []string{"iwarp_rdma.opcode", "iwarp_mpa.ulpdulength", "iwarp_ddp.last_flag", "iwarp_ddp.stag", "iwarp_ddp.tagged_offset",
		"iwarp_ddp.qn", "iwarp_ddp.msn", "iwarp_ddp.mo", "iwarp_rdma.inval_stag",
		"iwarp_rdma.sinkstag", "iwarp_rdma.sinkto", "iwarp_rdma.rdmardsz", "iwarp_rdma.srcstag", "iwarp_rdma.srcto"}
	args := []string{"-Y", "iwarp_rdma.opcode", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=;", "-E", "separator=|"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	type seg struct {
		op, ulen, stag, qn, msn, mo, inv uint64
		to                               uint64
		last                             bool
		rr                               readRequest
	}
	var segs []seg
	for _, line := range strings.Split(strings.TrimSpace(run(args...)), "\n") {
		cols := strings.Split(line, "|")
		lists := make([][]string, len(cols))
		for i, c := range cols {
			if c != "" {
				lists[i] = strings.Split(c, ";")
			}
		}
		pop := func(i int) uint64 {
			if len(lists[i]) == 0 {
				t.Fatalf("tshark line %q: field %s missing", line, fields[i])
			}
			v := lists[i][0]
			lists[i] = lists[i][1:]
			if v == "True" || v == "1" && fields[i] == "iwarp_ddp.last_flag" {
				return 1
			}
			if v == "False" {
				return 0
			}
			n, err := strconv.ParseUint(v, 0, 64)
			if err != nil {
				t.Fatalf("field %s value %q: %v", fields[i], v, err)
			}
			return n
		}
		for len(lists[0]) > 0 {
			s := seg{op: pop(0), ulen: pop(1), last: pop(2) == 1}
			switch rdmapOpcode(s.op) {
			case opWrite, opReadResp:
				s.stag, s.to = pop(3), pop(4)
			default:
				s.qn, s.msn, s.mo = pop(5), pop(6), pop(7)
			}
			if rdmapOpcode(s.op) == opSendInv {
				s.inv = pop(8)
			}
			if rdmapOpcode(s.op) == opReadReq {
				s.rr = readRequest{SinkSTag: uint32(pop(9)), SinkTO: pop(10), Size: uint32(pop(11)), SrcSTag: uint32(pop(12)), SrcTO: pop(13)}
			}
			segs = append(segs, s)
		}
	}
	if good != len(segs) || badCRC != 0 {
		t.Errorf("%d good and %d bad CRCs for %d FPDUs", good, badCRC, len(segs))
	}
	// Walk the stream: Send, Write (segmented), Read Request, Send with
	// Invalidate, then fence Reads and the Read Responses.
	var writeBytes, respBytes int
	var sawSend, sawInv, sawRead bool
	nextTO := exposed.Addr() + 8
	nextSink := sgeAddr(&verbs.SGE{Buf: lbuf.Bytes()[4096:]})
	for _, s := range segs {
		if s.ulen > fpdu {
			t.Errorf("FPDU with a %d-byte ULPDU, limit %d", s.ulen, fpdu)
		}
		switch rdmapOpcode(s.op) {
		case opSend:
			sawSend = s.qn == qnSend && s.msn == 1 && s.mo == 0 && s.ulen == ddpUntaggedLen+sendLen && s.last
		case opSendInv:
			sawInv = s.qn == qnSend && s.msn == 2 && s.inv == uint64(exposed.RKey()) && s.ulen == ddpUntaggedLen+7
		case opWrite:
			if s.stag != uint64(exposed.RKey()) || s.to != nextTO {
				t.Errorf("Write segment STag %#x TO %#x, want %#x %#x", s.stag, s.to, exposed.RKey(), nextTO)
			}
			n := int(s.ulen) - ddpTaggedLen
			writeBytes += n
			nextTO += uint64(n)
			if s.last != (writeBytes == writeLen) {
				t.Errorf("Write segment Last=%v after %d bytes", s.last, writeBytes)
			}
		case opReadReq:
			if s.qn != qnReadReq {
				t.Errorf("Read Request on QN %d", s.qn)
			}
			if s.rr.Size == readLen {
				sawRead = s.rr.SrcSTag == exposed.RKey() && s.rr.SrcTO == exposed.Addr()+4000 &&
					s.rr.SinkSTag == lbuf.LKey() && s.rr.SinkTO == nextSink
			} else if s.rr.Size != 0 {
				t.Errorf("unexpected Read Request %+v", s.rr)
			}
		case opReadResp:
			if s.ulen == ddpTaggedLen {
				continue // a fence's zero-length response
			}
			if s.stag != uint64(lbuf.LKey()) || s.to != nextSink {
				t.Errorf("Read Response STag %#x TO %#x, want %#x %#x", s.stag, s.to, lbuf.LKey(), nextSink)
			}
			n := int(s.ulen) - ddpTaggedLen
			respBytes += n
			nextSink += uint64(n)
		}
	}
	if !sawSend || !sawInv || !sawRead || writeBytes != writeLen || respBytes != readLen {
		t.Errorf("send %v, send-inv %v, read request %v, %d write bytes (want %d), %d read response bytes (want %d)\n%s",
			sawSend, sawInv, sawRead, writeBytes, writeLen, respBytes, readLen, run())
	}
	t.Logf("tshark checked %d FPDUs, all CRCs good", len(segs))
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
