package forward

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestPendingHandOff runs the writer's and the reader's sides of the
// answer hand-off (session.go: who owns a call) against each other: the
// reply handled while the writer is inside its writev, after it, and at
// whatever moment the scheduler picks. Every call is answered exactly
// once, and never while the writer is still inside its writev (run with
// -race too).
func TestPendingHandOff(t *testing.T) {
	const calls = 3000
	var pc pendingCall
	var inWritev atomic.Bool
	var answered, byWriter, early atomic.Int64
	answer := func() {
		if inWritev.Load() {
			early.Add(1)
		}
		answered.Add(1)
	}
	for i := range calls {
		var wg sync.WaitGroup
		sent, readerDone, writerDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
		wg.Add(2)
		go func() { // writer
			defer wg.Done()
			pc.writing()
			inWritev.Store(true)
			close(sent) // the call is on the wire: its reply may come now
			if i%3 == 0 {
				<-readerDone // the reply is handled before writev returns
			}
			inWritev.Store(false)
			if pc.written() {
				byWriter.Add(1)
				answer()
			}
			close(writerDone)
		}()
		go func() { // reader
			defer wg.Done()
			<-sent
			if i%3 == 1 {
				<-writerDone // the reply is handled after writev returned
			}
			if !pc.handOff() {
				answer()
			}
			close(readerDone)
		}()
		wg.Wait()
		if got := answered.Load(); got != int64(i+1) {
			t.Fatalf("call %d: %d answers in all, want %d", i, got, i+1)
		}
		if pc.wire.Load() != wireIdle {
			t.Fatalf("call %d: wire state %d after both sides", i, pc.wire.Load())
		}
	}
	if early.Load() != 0 {
		t.Errorf("%d calls answered while the writer was inside writev", early.Load())
	}
	if n := byWriter.Load(); n < calls/3 {
		t.Errorf("%d answers handed to the writer, want at least %d", n, calls/3)
	}
}
