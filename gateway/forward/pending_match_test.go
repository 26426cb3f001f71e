package forward

import (
	"testing"
	"time"
)

// A backend reply is matched only to a call the writer has begun to
// write on the current connection. On a backend connection kept across
// a client's reconnect, the reply to the old client's call can arrive
// while the new client's re-send of the same XID still waits in the
// writer's batch (its sent time set when the writer took the batch);
// matching it there let the reader recycle a call the writer then wrote
// (lab 21-drc-reconnect: nil pointer in writeCalls, the gateway died).
func TestReplyMatchesOnlyACallOnTheWire(t *testing.T) {
	s := &session{pending: newPendingTable(4), wake: make(chan struct{}, 1)}
	pc := s.pending.get()
	pc.xid = 7
	if !s.pending.add(pc) {
		t.Fatal("add")
	}
	pc.sent = time.Now() // the writer took it into its batch
	if got, _ := s.sentCall(7); got != nil {
		t.Fatal("a reply matched a call still waiting in the writer's batch: it answers an earlier send of the XID")
	}
	pc.writing()
	if got, _ := s.sentCall(7); got != pc {
		t.Fatalf("a reply for a call inside its writev: matched %p, want %p", got, pc)
	}
	if pc.written() {
		t.Fatal("written reported a hand-off nobody made")
	}
	if got, _ := s.sentCall(7); got != pc {
		t.Fatalf("a reply for a written call: matched %p, want %p", got, pc)
	}
	// Queued again for a new backend connection: not on that one yet.
	if n := s.requeueAll(); n != 1 {
		t.Fatalf("requeued %d calls, want 1", n)
	}
	if got, _ := s.sentCall(7); got != nil {
		t.Fatal("a reply matched a re-queued call before it was written on the new connection")
	}
	// Recycled calls start off the wire.
	s.pending.put(pc)
	if s.pending.get().onWire.Load() {
		t.Fatal("a recycled call is marked on the wire")
	}
}
