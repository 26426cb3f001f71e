package tcprpc

import (
	"bytes"
	"io"
	"testing"

	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/xdr"
)

// getattrCall is an NFSv3 GETATTR call (an AUTH_SYS credential of 32
// bytes, an 8-byte file handle), encoded by package oncrpc.
func getattrCall(tb testing.TB) []byte {
	h := oncrpc.CallHeader{XID: 0x12345678, RPCVers: oncrpc.RPCVersion, Prog: 100003, Vers: 3, Proc: 1,
		Cred: oncrpc.OpaqueAuth{Flavor: oncrpc.AuthSys, Body: seq(1, 32)}}
	b := make([]byte, h.EncodedLen()+12)
	e := xdr.NewEncoder(b)
	if err := h.Encode(&e); err != nil {
		tb.Fatal(err)
	}
	e.PutOpaque([]byte("FHFHFHFH"))
	return e.Bytes()
}

// BenchmarkRecordHeadParse is the per-call front of the data path: start a
// record, peek its head, decode the RPC call header, skip the rest.
func BenchmarkRecordHeadParse(b *testing.B) {
	nfs3GetattrCall := getattrCall(b)
	var stream []byte
	for range 256 {
		stream = append(stream, frag(true, nfs3GetattrCall)...)
	}
	br := bytes.NewReader(stream)
	rr := NewRecordReader(br, nil)
	var h oncrpc.CallHeader
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

// BenchmarkRecordBatchTCP sends small records (a 120-byte RPC call) over
// loopback TCP, 8 at a time: one=each with its own WriteRecordv (one
// writev per record), batch=8 AppendRecordv and one Flush. ns/op is per
// record.
func BenchmarkRecordBatchTCP(b *testing.B) {
	rec := [][]byte{getattrCall(b)}
	for _, batched := range []bool{false, true} {
		name := "one"
		if batched {
			name = "batch"
		}
		b.Run(name, func(b *testing.B) {
			client, server := tcpPair(b)
			go drain(server)
			rw := NewRecordWriter(client, nil)
			b.ReportAllocs()
			b.SetBytes(int64(len(rec[0])))
			for i := 0; b.Loop(); i++ {
				var err error
				if batched {
					if err = rw.AppendRecordv(rec); err == nil && i%8 == 7 {
						err = rw.Flush()
					}
				} else {
					err = rw.WriteRecordv(rec)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			if err := rw.Flush(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
