package tcprpc

import (
	"bytes"
	"io"
	"testing"

	"github.com/rdmagw/rdmagw/xdr"
)

// BenchmarkRecordHeadParse is the per-call front of the data path: start a
// record, peek its head, decode the RPC call header, skip the rest.
func BenchmarkRecordHeadParse(b *testing.B) {
	var stream []byte
	for range 256 {
		stream = append(stream, frag(true, nfs3GetattrCall)...)
	}
	br := bytes.NewReader(stream)
	rr := NewRecordReader(br, nil)
	var h CallHeader
	b.ReportAllocs()
	b.SetBytes(int64(len(nfs3GetattrCall)))
	for b.Loop() {
		if err := rr.Next(); err == io.EOF {
			br.Reset(stream)
			rr.Reset(br)
			if err = rr.Next(); err != nil {
				b.Fatal(err)
			}
		} else if err != nil {
			b.Fatal(err)
		}
		head, err := rr.Peek(len(nfs3GetattrCall))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.Decode(head); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCallDecode(b *testing.B) {
	var h CallHeader
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Decode(nfs3GetattrCall); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCallEncode(b *testing.B) {
	var h CallHeader
	if _, err := h.Decode(nfs3GetattrCall); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 128)
	var e xdr.Encoder
	b.ReportAllocs()
	for b.Loop() {
		e.Reset(buf)
		if err := h.Encode(&e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReplyDecode(b *testing.B) {
	msg := be(9, 1, 0, 0, 0, 0, 0xaa)
	var h ReplyHeader
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Decode(msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReplyEncode(b *testing.B) {
	buf := make([]byte, 64)
	var e xdr.Encoder
	b.ReportAllocs()
	for b.Loop() {
		e.Reset(buf)
		h := GarbageArgsReply(0x1234)
		if err := h.Encode(&e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGSSBodyWrapped(b *testing.B) {
	cred := OpaqueAuth{Flavor: RPCSecGSS, Body: be(1, 0, 77, 2, 4, 0x01020304)}
	b.ReportAllocs()
	for b.Loop() {
		if w, err := GSSBodyWrapped(cred); err != nil || !w {
			b.Fatal(w, err)
		}
	}
}

// drain reads c until it fails, with one buffer allocated up front.
func drain(r io.Reader) {
	buf := make([]byte, 256<<10)
	for {
		if _, err := r.Read(buf); err != nil {
			return
		}
	}
}

// BenchmarkRecordWriteTCP sends a 200-byte head and a 1 MiB payload as
// one record over loopback TCP.
func BenchmarkRecordWriteTCP(b *testing.B) {
	client, server := tcpPair(b)
	go drain(server)
	rw := NewRecordWriter(client, nil)
	head, payload := make([]byte, 200), make([]byte, 1<<20)
	b.ReportAllocs()
	b.SetBytes(int64(len(head) + len(payload)))
	for b.Loop() {
		if err := rw.WriteRecord(head, payload, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordReadPayloadTCP receives records of a 200-byte head and a
// 1 MiB payload over loopback TCP, the payload read into a caller buffer.
func BenchmarkRecordReadPayloadTCP(b *testing.B) {
	client, server := tcpPair(b)
	head, payload := make([]byte, 200), make([]byte, 1<<20)
	go func() {
		rw := NewRecordWriter(client, nil)
		for rw.WriteRecord(head, payload, nil) == nil {
		}
	}()
	rr := NewRecordReader(server, &ReaderConfig{MaxRecord: 2 << 20})
	dst := make([]byte, len(payload))
	b.ReportAllocs()
	b.SetBytes(int64(len(head) + len(payload)))
	for b.Loop() {
		if err := rr.Next(); err != nil {
			b.Fatal(err)
		}
		if _, err := rr.Discard(len(head)); err != nil {
			b.Fatal(err)
		}
		if _, err := rr.ReadFull(dst); err != nil {
			b.Fatal(err)
		}
	}
}
