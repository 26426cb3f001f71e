package forward

import (
	"net"
	"slices"
	"sync"
	"syscall"

	"github.com/rdmagw/rdmagw/tcprpc"
)

// Inline writes (issue 12: one goroutine hand-off less per call at one
// call in flight). When the backend connection is idle, no call written
// and unanswered, ServeCall does not wake the writer goroutine: the
// engine writes the calls of its poll itself in ServeBatchDone (the
// engine calls it after each poll of its completion queue) with one
// writev that never waits (tcprpc TryFlush). With calls in flight
// ServeCall wakes the writer at once, as before: the writer gathers the
// calls that come in meanwhile into one writev, which costs fewer system
// calls per call than one writev per poll (session 7, fwdcpu.md).
//
// wmu owns the connection's RecordWriter: the writer goroutine holds it
// for a round (its wait for work is outside), an inline write takes it
// only with TryLock. What an inline write cannot finish it leaves to the
// writer goroutine under wmu and wakes it: a record the socket did not
// take whole (carry: its calls, whose rest Flush writes before anything
// else), answers the reader handed over during the writev (handed;
// Call.Reply must not wait on the engine's goroutine), calls not queued
// after a sticky write error (back at the head of sendQ). The writer
// leaving a connection finishes them too (detachInline), so a pause
// never keeps a cut record.

// inlineState is a session's inline-write state. wmu guards it except
// where noted.
type inlineState struct {
	wmu    sync.Mutex
	rw     *tcprpc.RecordWriter // the connection's writer; nil while no writer goroutine runs
	raw    syscall.RawConn      // rw's connection, for TryFlush
	carry  []*pendingCall       // an inline write's calls whose bytes did not all go out
	handed []*pendingCall       // answers handed over during an inline write
	vec    [][]byte             // AppendRecordv's vector

	// Engine goroutine only.
	hooked  bool // the engine calls ServeBatchDone
	idleRun int  // calls in a row that found the connection idle (queueIdle)
	queued  int  // calls ServeCall left to ServeBatchDone since its last run
}

// queueCall queues pc for the backend (s.mu held, engine goroutine) and
// reports whether the writer goroutine is to be woken: not when calls
// already queued have had their wake-up (or are left to ServeBatchDone),
// since the writer takes pc with them (waking it again cost a round with
// nothing to write: 0.18 per call at 8 in flight), nor when pc is left
// to ServeBatchDone.
func (s *session) queueCall(pc *pendingCall) bool {
	woken := len(s.sendQ) > 0
	s.sendQ = append(s.sendQ, pc)
	return !s.queueIdle() && !woken
}

// queueIdle reports whether ServeCall leaves pc, just queued, to
// ServeBatchDone (s.mu held, engine goroutine): the engine calls that,
// and the connection was idle (no call written and unanswered) when
// this call and the inlineAfter calls before it came: the client sends
// one call at a time. A client with several calls in flight finds the
// connection idle now and then too, and its calls written by the engine
// cost a writev each, where the writer goroutine, woken, gathers the
// calls that come meanwhile into one.
func (s *session) queueIdle() bool {
	if !s.w.hooked || len(s.pending.byXID) > len(s.sendQ) {
		s.w.idleRun = 0
		return false
	}
	if s.w.idleRun < inlineAfter {
		s.w.idleRun++
		return false
	}
	s.w.queued++
	return true
}

// inlineAfter is how many calls in a row must find the backend
// connection idle before the engine writes calls itself. Measured at 8
// in flight (relay bench, getattr): with 1 (this call and the one
// before) the engine still wrote 19% of the calls, 1.9 calls per
// writev, against 4 per writev of the writer goroutine, and the
// gateway made +0.1 writev per call.
const inlineAfter = 16

// ServeBatchDone implements rdmarpc.BatchHandler: after a poll, write
// the calls ServeCall left queued for it onto the idle connection, or
// wake the writer goroutine when it cannot.
func (s *session) ServeBatchDone() {
	s.w.hooked = true
	if s.w.queued == 0 {
		return
	}
	s.w.queued = 0
	if !s.w.wmu.TryLock() {
		s.wakeWriter() // the writer goroutine is in a round
		return
	}
	s.mu.Lock()
	if len(s.sendQ) == 0 { // the writer goroutine took them
		s.mu.Unlock()
		s.w.wmu.Unlock()
		return
	}
	// A cut record's rest (carry) goes first, and only Flush writes it.
	if s.w.rw == nil || len(s.w.carry) > 0 || s.be.pingDue || s.closing {
		s.mu.Unlock()
		s.w.wmu.Unlock()
		s.wakeWriter()
		return
	}
	batch := s.takeBatchLocked()
	s.mu.Unlock()
	wake := s.writeInline(batch)
	s.w.wmu.Unlock()
	if wake {
		s.wakeWriter()
	}
}

// writeInline writes batch with one writev that does not wait (wmu
// held) and reports whether it left work to the writer goroutine.
func (s *session) writeInline(batch []*pendingCall) (wake bool) {
	rw, vec := s.w.rw, s.w.vec
	n := 0
	for _, pc := range batch {
		vec = pc.call.Msg.AppendVec(vec[:0])
		if rw.AppendRecordv(vec) != nil {
			break // a sticky error: the writer goroutine meets it
		}
		s.be.pingProg, s.be.pingVers = pc.prog, pc.vers
		n++
	}
	clear(vec[:cap(vec)])
	s.w.vec = vec[:0]
	calls := batch[:n]
	for _, pc := range calls {
		pc.writing()
	}
	if hook := testHookFlushCalls; hook != nil && n > 0 {
		hook(calls)
	}
	whole := rw.TryFlush(s.w.raw)
	if hook := testHookInline; hook != nil {
		hook(whole)
	}
	if whole {
		for _, pc := range calls {
			if pc.written() {
				s.w.handed = append(s.w.handed, pc)
			}
		}
	} else {
		s.w.carry = append(s.w.carry, calls...)
	}
	s.mu.Lock()
	if n < len(batch) { // not queued: first in line for the writer
		s.sendQ = slices.Insert(s.sendQ, 0, batch[n:]...)
	}
	clear(batch)
	s.spareQ = batch[:0]
	s.mu.Unlock()
	return !whole || n < len(batch) || len(s.w.handed) > 0
}

// attachInline lets the engine write on conn through rw (writer
// goroutine, starting on a connection).
func (s *session) attachInline(conn *net.TCPConn, rw *tcprpc.RecordWriter) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return // no inline writes on this connection
	}
	s.w.wmu.Lock()
	s.w.rw, s.w.raw = rw, raw
	s.w.wmu.Unlock()
}

// finishInline writes the rest of a cut inline write and sends the
// answers handed over (writer goroutine, wmu held). It returns the
// write's error.
func (s *session) finishInline() error {
	var err error
	if len(s.w.carry) > 0 {
		err = s.flushWritten(s.w.carry, s.w.rw.Flush())
		clear(s.w.carry)
		s.w.carry = s.w.carry[:0]
	}
	for i, pc := range s.w.handed {
		s.w.handed[i] = nil
		s.answerHeld(pc)
	}
	s.w.handed = s.w.handed[:0]
	if err != nil {
		s.met.BackendError("write")
	}
	return err
}

// detachInline ends inline writes on the connection the writer
// goroutine leaves, after finishing what the last one left.
func (s *session) detachInline() error {
	s.w.wmu.Lock()
	defer s.w.wmu.Unlock()
	if s.w.rw == nil {
		return nil
	}
	err := s.finishInline()
	s.w.rw, s.w.raw = nil, nil
	return err
}

// testHookWriterWoken, when set by a test, runs when the writer
// goroutine is woken, before its round.
var testHookWriterWoken func()

// testHookInline, when set by a test, sees whether each engine write
// went out whole.
var testHookInline func(whole bool)
