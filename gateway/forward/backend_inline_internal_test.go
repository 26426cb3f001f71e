package forward

import (
	"bytes"
	"encoding/binary"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/tcprpc"
)

// TestInlineWriteCarry: the engine writes the calls of each poll itself
// (ServeBatchDone); when the backend's socket does not take a batch
// whole, the writer goroutine finishes the cut record, and every later
// batch waits behind it (the engine does not write while a cut record
// is left). The server reads every call whole, byte for byte and in the
// order the client sent them, and the writer goroutine stops cleanly
// with nothing left.
func TestInlineWriteCarry(t *testing.T) {
	const batches, perBatch = 12, 3
	c1, c2 := tcpPair(t)
	defer c1.Close()
	defer c2.Close()
	if err := c1.SetWriteBuffer(4096); err != nil {
		t.Fatal(err)
	}
	s := &session{met: gateway.NewMetrics(), wake: make(chan struct{}, 1), pending: newPendingTable(4)}
	var whole, cut atomic.Int32
	testHookInline = func(w bool) {
		if w {
			whole.Add(1)
		} else {
			cut.Add(1)
		}
	}
	// The writer goroutine's rounds wait until every batch is queued:
	// the engine meets its own cut record and must leave the batches
	// after it to the writer.
	release := make(chan struct{})
	testHookWriterWoken = func() { <-release }
	defer func() { testHookInline, testHookWriterWoken = nil, nil }()
	done := make(chan struct{})
	werr := make(chan error, 1)
	go func() { werr <- s.writeCalls(c1, done) }()
	for attached := false; !attached; {
		s.w.wmu.Lock()
		attached = s.w.rw != nil
		s.w.wmu.Unlock()
	}

	var want [][]byte
	for b := range batches {
		s.mu.Lock()
		for i := range perBatch {
			xid := uint32(b*perBatch + i)
			head := make([]byte, 40)
			binary.BigEndian.PutUint32(head, xid)
			size := 100 + int(xid) // the first batch fits the socket
			if b > 0 {
				size += 64 << 10
			}
			item := bytes.Repeat([]byte{byte(xid)}, size)
			call := new(rdmarpc.Call)
			call.Msg.Reset()
			call.Msg.Append(rdmarpc.Piece{Data: head})
			call.Msg.Append(rdmarpc.Piece{Data: item, Item: true})
			pad := make([]byte, (4-len(item)%4)%4)
			want = append(want, bytes.Join([][]byte{head, item, pad}, nil))
			s.sendQ = append(s.sendQ, &pendingCall{call: call, xid: xid})
		}
		s.mu.Unlock()
		s.w.queued += perBatch
		s.ServeBatchDone() // the engine's poll is over
	}
	close(release)

	c2.SetReadDeadline(time.Now().Add(time.Minute)) // a lost record fails, not hangs
	rr := tcprpc.NewRecordReader(c2, &tcprpc.ReaderConfig{MaxRecord: 1 << 20})
	for i := range want {
		if err := rr.Next(); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		b, err := io.ReadAll(rr)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !bytes.Equal(b, want[i]) {
			t.Fatalf("record %d (xid %d): %d bytes, not the %d of call %d", i, binary.BigEndian.Uint32(b), len(b), len(want[i]), i)
		}
	}
	close(done)
	if err := <-werr; err != nil {
		t.Fatalf("writer: %v", err)
	}
	if whole.Load() != 1 || cut.Load() != 1 {
		t.Fatalf("engine writes: %d whole, %d cut; want 1 and 1 (the first batch fits the socket, the second does not, the rest wait behind it)", whole.Load(), cut.Load())
	}
	s.w.wmu.Lock()
	defer s.w.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w.rw != nil || len(s.w.carry) > 0 || len(s.w.handed) > 0 || len(s.sendQ) > 0 {
		t.Fatalf("after the writer stopped: attached %v, carry %d, handed %d, queued %d", s.w.rw != nil, len(s.w.carry), len(s.w.handed), len(s.sendQ))
	}
}
