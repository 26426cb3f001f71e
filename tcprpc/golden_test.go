package tcprpc

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/rdmagw/rdmagw/internal/golden"
)

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
// does: RecordReader, Peek the head, land the DDP payload in a buffer of
// its own, read the tail. Then it frames the record again with
// RecordWriter and compares with the capture byte for byte. (The RPC
// header of the same records is checked by oncrpc's TestGoldenTCPHeaders.)
func TestGoldenTCPRecords(t *testing.T) {
	golden.TCPRecords(t, func(t *testing.T, kv map[string]string, bin []byte) {
		if int(golden.Num(t, kv, "record.len")) != len(bin) {
			t.Fatalf("record.len %s, file %d bytes", kv["record.len"], len(bin))
		}
		body := bin[4:] // single fragment (record.fragments=1) in all captures
		if golden.Num(t, kv, "record.fragments") != 1 || golden.Num(t, kv, "rpc.fraglen") != uint32(len(body)) {
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
		if err != nil || !bytes.Equal(head, body[:len(head)]) {
			t.Fatalf("Peek: %d bytes, %v", len(head), err)
		}

		// Land the payload (or, without one, the rest) in its own buffer.
		off, plen := len(body), 0
		if _, ok := kv["data.offset"]; ok {
			off = int(golden.Num(t, kv, "data.offset")) - 4
			plen = int(golden.Num(t, kv, "data.len"))
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
