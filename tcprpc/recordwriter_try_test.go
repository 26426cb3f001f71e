package tcprpc

import (
	"bytes"
	"io"
	"testing"
)

// TestTryFlushWholeAndCut: TryFlush sends queued records at once when the
// socket takes them; when the socket's buffer fills (the peer is not
// reading) it returns false at once instead of waiting, and Flush then
// writes the rest, a record cut in the middle included, so the peer reads
// every record whole, byte for byte and in order. No allocation once
// grown.
func TestTryFlushWholeAndCut(t *testing.T) {
	c1, c2 := tcpPair(t)
	defer c1.Close()
	defer c2.Close()
	if err := c1.SetWriteBuffer(4096); err != nil {
		t.Fatal(err)
	}
	raw, err := c1.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rw := NewRecordWriter(c1, nil)
	small := [][]byte{[]byte("abcd"), nil, []byte("efgh")}
	if err := rw.AppendRecordv(small); err != nil {
		t.Fatal(err)
	}
	if !rw.TryFlush(raw) || rw.Queued() != 0 {
		t.Fatalf("a small record on an idle socket not sent whole (queued %d)", rw.Queued())
	}
	// Records until the socket refuses more: the peer reads nothing yet.
	var want [][]byte
	want = append(want, []byte("abcdefgh"))
	cut := false
	for i := 0; i < 4096 && !cut; i++ {
		rec := bytes.Repeat([]byte{byte(i)}, 64<<10+i)
		want = append(want, rec)
		if err := rw.AppendRecordv([][]byte{rec[:100], rec[100:]}); err != nil {
			t.Fatal(err)
		}
		cut = !rw.TryFlush(raw)
	}
	if !cut {
		t.Fatal("TryFlush never found the socket full")
	}
	got := make(chan [][]byte, 1)
	go func() {
		rr := NewRecordReader(c2, &ReaderConfig{MaxRecord: 1 << 20})
		var recs [][]byte
		for range want {
			if rr.Next() != nil {
				break
			}
			b, err := io.ReadAll(rr)
			if err != nil {
				break
			}
			recs = append(recs, b)
		}
		got <- recs
	}()
	if err := rw.Flush(); err != nil {
		t.Fatal(err)
	}
	recs := <-got
	if len(recs) != len(want) {
		t.Fatalf("%d records read, want %d", len(recs), len(want))
	}
	for i := range want {
		if !bytes.Equal(recs[i], want[i]) {
			t.Fatalf("record %d: %d bytes differ from the %d sent", i, len(recs[i]), len(want[i]))
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		rw.AppendRecordv(small)
		rw.TryFlush(raw)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per TryFlush", allocs)
	}
}
