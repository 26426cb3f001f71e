package iwarp

import (
	"bytes"
	"encoding/hex"
	"hash/crc32"
	"testing"
)

func TestMPAFrameRoundTrip(t *testing.T) {
	f := mpaFrame{CRC: true, Rev: 2, Enhanced: true, IRD: 16, ORD: 8, PeerToPeer: true, RTRWrite: true,
		Private: []byte{0xf6, 0xab, 0x0e, 0x18, 1, 1, 3, 3}}
	b, err := appendMPAFrame(nil, &f)
	if err != nil {
		t.Fatal(err)
	}
	want := "4d504120494420526571204672616d65" + // "MPA ID Req Frame"
		"50" + "02" + "000c" + // C|S, Rev 2, PD_Length 12
		"8010" + "8008" + // A|IRD 16, C|ORD 8
		"f6ab0e1801010303"
	if hex.EncodeToString(b) != want {
		t.Fatalf("encoded\n%x\nwant\n%s", b, want)
	}
	var g mpaFrame
	n, err := decodeMPAFrame(b, &g)
	if err != nil || n != len(b) {
		t.Fatal(n, err)
	}
	if g.Reply || !g.CRC || g.Markers || g.Reject || !g.Enhanced || g.Rev != 2 || g.IRD != 16 || g.ORD != 8 ||
		!g.PeerToPeer || !g.RTRWrite || g.RTRRead || g.RTRSend || !bytes.Equal(g.Private, f.Private) {
		t.Fatalf("decoded %+v", g)
	}
	rep := mpaFrame{Reply: true, Reject: true, Rev: 1, Private: []byte("no")}
	b, _ = appendMPAFrame(nil, &rep)
	if hex.EncodeToString(b) != "4d504120494420526570204672616d65"+"20"+"01"+"0002"+"6e6f" {
		t.Fatalf("reject frame %x", b)
	}
}

func TestMPAFrameErrors(t *testing.T) {
	good, _ := appendMPAFrame(nil, &mpaFrame{Rev: 1})
	for name, b := range map[string][]byte{
		"short":                  good[:10],
		"bad key":                append([]byte("MPA ID Xxx Frame"), good[16:]...),
		"rev 3":                  append(append([]byte{}, good[:17]...), 3, 0, 0),
		"pd 513":                 append(append([]byte{}, good[:18]...), 2, 1),
		"truncated":              append(append([]byte{}, good[:18]...), 0, 4, 1),
		"enhanced without block": append(append([]byte{}, good[:16]...), mpaFlagEnhanced, 2, 0, 2, 0, 0),
	} {
		var f mpaFrame
		if _, err := decodeMPAFrame(b, &f); err == nil {
			t.Errorf("%s: decoded %+v", name, f)
		}
	}
	if _, err := appendMPAFrame(nil, &mpaFrame{Rev: 2, Enhanced: true, Private: make([]byte, 509)}); err == nil {
		t.Error("509 bytes of ULP private data with the IRD/ORD block accepted")
	}
}

func TestFPDUPadding(t *testing.T) {
	for n, pad := range map[int]int{14: 0, 15: 3, 16: 2, 17: 1, 18: 0, 46: 0} {
		if got := fpduPad(n); got != pad || fpduSize(n)%4 != 0 {
			t.Errorf("ULPDU %d: pad %d (want %d), FPDU %d", n, got, pad, fpduSize(n))
		}
	}
}

func TestCRC32c(t *testing.T) {
	// RFC 3720 B.4 test vector: 32 bytes of zeros.
	if got := crcUpdate(0, make([]byte, 32)); got != 0x8a9136aa {
		t.Fatalf("CRC32c(32 zeros) = %#x", got)
	}
	var b [4]byte
	putCRC(b[:], 0x8a9136aa)
	if b != [4]byte{0xaa, 0x36, 0x91, 0x8a} || getCRC(b[:]) != 0x8a9136aa {
		t.Fatalf("wire form %x", b)
	}
	if got := crcUpdate(0, []byte("123456789")); got != 0xe3069283 {
		t.Fatalf("CRC32c(123456789) = %#x: not Castagnoli", got)
	}
	// A 64 KiB FPDU's worth, long enough for internal/crc32c's fold.
	big := make([]byte, 65536)
	for i := range big {
		big[i] = byte(i * 7)
	}
	if got, want := crcUpdate(0, big), crc32.Checksum(big, crc32.MakeTable(crc32.Castagnoli)); got != want {
		t.Fatalf("CRC32c(64 KiB) = %#x, hash/crc32 says %#x", got, want)
	}
}

func TestDDPHeaders(t *testing.T) {
	h := tagged(opWrite, 0x01020304, 0x1122334455667788)
	h.Last = true
	b := make([]byte, ddpUntaggedLen)
	n := h.put(b)
	if hex.EncodeToString(b[:n]) != "c1"+"40"+"01020304"+"1122334455667788" {
		t.Fatalf("tagged %x", b[:n])
	}
	var g ddpHeader
	if err := g.parse(b[:n]); err != nil || g != h {
		t.Fatalf("%+v %v", g, err)
	}
	u := untagged(opSendInv, qnSend, 7)
	u.InvSTag, u.MO = 0xabcdef00, 4096
	n = u.put(b)
	if hex.EncodeToString(b[:n]) != "01"+"44"+"abcdef00"+"00000000"+"00000007"+"00001000" {
		t.Fatalf("untagged %x", b[:n])
	}
	if err := g.parse(b[:n]); err != nil || g != u {
		t.Fatalf("%+v %v", g, err)
	}
	if err := g.parse(b[:n-1]); err == nil {
		t.Fatal("short untagged header parsed")
	}
	if err := g.parse([]byte{0x81}); err == nil {
		t.Fatal("one-byte header parsed")
	}
}

func TestReadRequestAndTerminate(t *testing.T) {
	rr := readRequest{SinkSTag: 1, SinkTO: 2, Size: 3, SrcSTag: 4, SrcTO: 5}
	var b [termMaxLen]byte
	rr.put(b[:])
	var g readRequest
	if err := g.parse(b[:readReqLen]); err != nil || g != rr {
		t.Fatal(g, err)
	}
	if g.parse(b[:27]) == nil {
		t.Fatal("27-byte Read Request parsed")
	}
	tm := terminate{Layer: LayerRDMAP, EType: RDMAPRemoteProtection, Code: RDMAPBaseBounds, HaveDDP: true, SegLen: 46,
		DDP: untagged(opReadReq, qnReadReq, 9), HaveRDMA: true, RDMA: rr}
	tm.DDP.Last = true
	n := tm.put(b[:])
	if n != termMaxLen || hex.EncodeToString(b[:4]) != "0101e000" {
		t.Fatalf("terminate %d bytes, control %x", n, b[:4])
	}
	var tg terminate
	if err := tg.parse(b[:n]); err != nil || tg != tm {
		t.Fatalf("%+v %v", tg, err)
	}
	te := &TerminateError{Layer: tg.Layer, EType: tg.EType, Code: tg.Code}
	if te.status().String() != "remote access error" || te.Error() == "" {
		t.Fatal(te.status(), te)
	}
	for _, bad := range [][]byte{b[:3], b[:5], b[:4+2+10]} {
		if tg.parse(bad) == nil {
			t.Errorf("%d-byte terminate parsed", len(bad))
		}
	}
}
