package forward

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/tcprpc"
)

// TestWriteBatchOneWritev: the calls the backend writer finds queued
// together go out as one record each, all in one vectored write, in
// their order and byte for byte (each call's message in several pieces,
// a DDP item with its XDR pad among them). Before batching, the writer
// made one writev per call.
func TestWriteBatchOneWritev(t *testing.T) {
	const calls = 8
	c1, c2 := tcpPair(t)
	defer c1.Close()
	defer c2.Close()
	s := &session{met: gateway.NewMetrics()}
	var writes [][]uint32 // the XIDs of each vectored write
	testHookFlushCalls = func(pcs []*pendingCall) {
		var xids []uint32
		for _, pc := range pcs {
			xids = append(xids, pc.xid)
		}
		writes = append(writes, xids)
	}
	defer func() { testHookFlushCalls = nil }()

	batch := make([]*pendingCall, calls)
	want := make([][]byte, calls)
	for i := range batch {
		head := make([]byte, 40+i)
		binary.BigEndian.PutUint32(head, uint32(0x1000+i))
		for j := 4; j < len(head); j++ {
			head[j] = byte(i*7 + j)
		}
		item := bytes.Repeat([]byte{byte(0xa0 + i)}, 4093+i) // padded to a multiple of 4 on the wire
		tail := []byte{byte(i), 1, 2, 3}
		call := new(rdmarpc.Call)
		call.Msg.Reset()
		call.Msg.Append(rdmarpc.Piece{Data: head})
		call.Msg.Append(rdmarpc.Piece{Data: item, Item: true})
		call.Msg.Append(rdmarpc.Piece{Data: tail})
		batch[i] = &pendingCall{call: call, xid: uint32(0x1000 + i)}
		pad := make([]byte, (4-len(item)%4)%4)
		want[i] = bytes.Join([][]byte{head, item, pad, tail}, nil)
	}

	got := make(chan [][]byte, 1)
	go func() {
		rr := tcprpc.NewRecordReader(c2, nil)
		var recs [][]byte
		for range calls {
			if err := rr.Next(); err != nil {
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
	rw := tcprpc.NewRecordWriter(c1, nil)
	_, stop, err := s.writeBatch(rw, batch, nil, make(chan struct{}))
	if err != nil || stop {
		t.Fatalf("writeBatch: stop %v, %v", stop, err)
	}
	recs := <-got
	if len(recs) != calls {
		t.Fatalf("%d records received, want %d", len(recs), calls)
	}
	for i := range recs {
		if !bytes.Equal(recs[i], want[i]) {
			t.Errorf("record %d: %d bytes, want %d (the call's message as sent)", i, len(recs[i]), len(want[i]))
		}
	}
	if len(writes) != 1 || len(writes[0]) != calls {
		t.Fatalf("vectored writes (XIDs of each): %x; want one write of all %d calls", writes, calls)
	}
	for i, x := range writes[0] {
		if x != uint32(0x1000+i) {
			t.Fatalf("write order %x, want the batch's order", writes[0])
		}
	}
	for i, pc := range batch {
		if pc != nil {
			t.Fatalf("batch[%d] not cleared", i)
		}
	}
}
