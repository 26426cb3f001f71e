package forward

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/redial"
	"github.com/rdmagw/rdmagw/internal/sockread"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/xdr"
)

// runBackend keeps the session's backend connection alive: it runs a
// writer, a reader and a watchdog (NULL pings, watchBackend) on each
// connection, and when one fails, closes it, reconnects with exponential
// backoff and jitter (from the same local port where the OS allows) and
// re-queues every call still waiting for a reply. A failure episode
// starts at the first failure of any kind (a refused dial, a broken or
// hung connection, a reply that cannot be carried); it ends when a
// connection has carried a reply and lived reconnect_backoff_max. If an
// episode lasts give_up_after, the RDMA client is disconnected. It
// returns when ctx ends (the client is gone) or after giving up (nil),
// or when s.be.pause closes: then it returns the connection, open, with
// its goroutines stopped between records (park.go), or nil if it had none
// or could not stop it cleanly.
func (s *session) runBackend(ctx context.Context, conn *net.TCPConn, d *backendDialer) *net.TCPConn {
	b := &s.cfg.Backend
	for {
		up := time.Now()
		err := s.serveBackend(ctx, conn)
		if errors.Is(err, errPaused) {
			return conn
		}
		if ctx.Err() != nil || s.pausing() {
			if s.pausing() && err != nil {
				s.log.Info("backend connection not kept for the client's reconnect", "peer", s.peer,
					"backend_local", localAddr(conn), "error", err)
			}
			return nil
		}
		now := time.Now()
		if s.be.gotReply.Load() && now.Sub(up) >= b.ReconnectMax {
			s.be.backoff.Reset() // the last episode is over
			s.be.since = time.Time{}
		}
		if s.be.since.IsZero() {
			s.be.since = now
		}
		s.log.Warn("backend connection lost; reconnecting", "peer", s.peer,
			"backend", d.addr, "local", localAddr(conn), "error", err)
		conn = s.reconnect(ctx, d)
		if conn == nil {
			return nil
		}
		s.met.BackendReconnects.Inc()
		if !d.samePort {
			s.portChanged(d)
		}
		s.resetBackchannel()
		n := s.requeueAll()
		s.log.Info("backend reconnected", "peer", s.peer, "backend", d.addr,
			"local", localAddr(conn), "same_port", d.samePort, "resent_calls", n)
	}
}

// beState is a session's backend connection health. The backend loop
// (runBackend, reconnect) owns failures and since; the ping fields are
// guarded by the session's mutex.
type beState struct {
	backoff redial.Backoff // the waits of the current episode: each failure doubles the next
	since   time.Time      // the episode's first failure; zero while healthy

	// Per connection, reset by serveBackend.
	gotReply atomic.Bool  // a reply to a call or a ping arrived
	lastRecv atomic.Int64 // when the last record from the server started, or the reader last waited on our side (Unix ns)
	// localWait: the reader is held up on the gateway's side (waiting for
	// pool memory within the connection's share, or for the client to
	// take replies), so silence from the server proves nothing.
	localWait atomic.Bool

	pingDue  bool   // the writer is to send a NULL ping
	pingOut  bool   // a ping is on the wire, unanswered
	pingXID  uint32 // its XID, unlike any outstanding call's
	pingProg uint32 // the program and version of the last call sent
	pingVers uint32 // (writer only)

	// Parking (park.go): pause closes when the client has gone and the
	// connection is to be kept; paused is set once serveBackend is
	// stopping the connection's goroutines for that.
	pause  chan struct{}
	paused atomic.Bool
	// onLeave is called (by run) when the client has gone and the
	// connection is about to be paused for parking.
	onLeave func()
	// rr reads rrConn; kept across a pause so that the bytes it has read
	// ahead and its place in the record stream are not lost.
	rr     *tcprpc.RecordReader
	rrConn *net.TCPConn
}

// pauseWriteGrace bounds how long parking waits for a call record being
// written to the backend to finish (serveBackend).
const pauseWriteGrace = 3 * time.Second

// errPaused: the connection's goroutines stopped for parking.
var errPaused = errors.New("backend connection paused for a reconnecting client")

// pausing reports whether s.be.pause has closed.
func (s *session) pausing() bool { return stopped(s.be.pause) }

// maxReplyBreaks: a call during whose reply the backend connection broke
// this many times is answered SYSTEM_ERR instead of being sent again.
const maxReplyBreaks = 3

// reconnect waits out the backoff, dials, and repeats until a dial
// succeeds, ctx ends, or the failure episode has lasted give_up_after;
// then it disconnects the client and returns nil. Every dial waits
// first, the first one included, reconnect_backoff_initial doubled per
// failure of the episode up to reconnect_backoff_max, with jitter.
func (s *session) reconnect(ctx context.Context, d *backendDialer) *net.TCPConn {
	b := &s.cfg.Backend
	bo := &s.be.backoff
	bo.Initial, bo.Max, bo.Jitter = b.ReconnectInitial, b.ReconnectMax, true
	conn, _, err := redial.Dial(ctx, redial.Plan{Backoff: bo, Deadline: s.be.since.Add(b.GiveUpAfter), Stop: s.be.pause,
		Failed: func(attempt int, _ time.Duration, err error) {
			s.met.BackendError("connect")
			s.log.Debug("backend connect failed", "peer", s.peer, "backend", d.addr, "attempt", attempt, "error", err)
		}}, d.dial)
	if gu := (*redial.GaveUpError)(nil); errors.As(err, &gu) {
		s.giveUpBackend(d, gu.Dials, gu.Err)
	}
	return conn
}

// portChanged counts and logs a reconnect that could not keep the previous
// source port: the server's duplicate request cache, keyed on the client's
// address and port, will not recognise the calls sent again on it.
func (s *session) portChanged(d *backendDialer) {
	s.met.ForwardBackend.PortChanges.Inc()
	s.log.Warn("backend reconnected from another source port; the server's duplicate request cache will not recognise resent calls",
		"peer", s.peer, "backend", d.addr, "local", d.lastLocal.String(), "error", d.portErr)
}

// giveUpBackend disconnects the client after give_up_after of failures.
func (s *session) giveUpBackend(d *backendDialer, dials int, err error) {
	s.giveUp = true
	s.met.BackendGiveUps.Inc()
	s.log.Error("backend failing for give_up_after; giving up and disconnecting the client", "peer", s.peer,
		"backend", d.addr, "failing_since", s.be.since.Format(time.RFC3339Nano), "failed_dials", dials,
		"give_up_after", s.cfg.Backend.GiveUpAfter, "error", err)
	s.rc.Close()
}

// requeueAll makes the writer send every outstanding call again, in the
// order the client sent them, and returns how many.
func (s *session) requeueAll() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sendQ = s.sendQ[:0]
	for _, pc := range s.pending.byXID {
		pc.onWire.Store(false) // not on the new connection yet
		s.sendQ = append(s.sendQ, pc)
	}
	slices.SortFunc(s.sendQ, func(a, b *pendingCall) int { return cmp.Compare(a.seq, b.seq) })
	if len(s.sendQ) > 0 {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return len(s.sendQ)
}

// serveBackend runs the writer, the reader and the watchdog on conn
// until one fails or ctx ends; it closes conn and returns the first error.
func (s *session) serveBackend(ctx context.Context, conn *net.TCPConn) error {
	s.be.gotReply.Store(false)
	s.be.lastRecv.Store(time.Now().UnixNano())
	s.mu.Lock()
	s.be.pingDue, s.be.pingOut = false, false
	s.mu.Unlock()
	// rctx ends with done: the reader's waits for pool memory end with
	// the connection.
	rctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := &connStop{conn: conn, done: make(chan struct{}), cancel: cancel}
	var wg sync.WaitGroup
	wg.Add(3)
	var werr error
	go func() {
		defer wg.Done()
		werr = s.writeCalls(conn, st.done)
		st.stop(werr)
	}()
	go func() {
		defer wg.Done()
		st.stop(s.readReplies(rctx, conn, st.done))
	}()
	go func() {
		defer wg.Done()
		if err := s.watchBackend(st.done); err != nil {
			st.stop(err)
		}
	}()
	select {
	case <-ctx.Done():
		st.stop(ctx.Err())
	case <-st.done:
	case <-s.be.pause:
		return s.pauseConn(st, &wg, &werr)
	}
	wg.Wait()
	return st.first
}

// connStop ends the goroutines of one backend connection once: the first
// error is kept, done closes, the reader's context ends and the
// connection closes (unless it is being parked).
type connStop struct {
	conn   *net.TCPConn
	done   chan struct{}
	cancel context.CancelFunc
	once   sync.Once
	first  error
}

func (c *connStop) stop(err error) {
	c.once.Do(func() {
		c.first = err
		close(c.done)
		c.cancel()
		if err != errPaused { // never a connection being parked
			c.conn.Close()
		}
	})
}

// pauseConn stops the connection's goroutines (wg; werr is the writer's
// error) without closing it, for park.go: the read deadline wakes a
// blocked read (the record reader resumes where it stopped); the writer
// stops between records, and a record it is writing may finish for up to
// pauseWriteGrace (the client's reconnect waits that long in claim): cut,
// it would spoil the stream, and the connection could not be kept. A
// writer blocked by a slow server is the common case when a client
// reconnects after a timeout. It returns errPaused with the connection
// open, or the error that closed it.
func (s *session) pauseConn(st *connStop, wg *sync.WaitGroup, werr *error) error {
	conn := st.conn
	// done first: a goroutine woken by the deadline must find the stop
	// taken (its own stop would close conn).
	st.once.Do(func() { st.first = errPaused; close(st.done); st.cancel() })
	s.be.paused.Store(true)
	conn.SetReadDeadline(time.Now())
	conn.SetWriteDeadline(time.Now().Add(pauseWriteGrace))
	wg.Wait()
	s.be.paused.Store(false)
	switch {
	case st.first != errPaused:
		conn.Close()
		return st.first
	case *werr != nil: // not errPaused: nothing to keep
		conn.Close()
		return fmt.Errorf("backend connection not kept: a record was cut by the pause: %w", *werr)
	}
	conn.SetDeadline(time.Time{})
	return errPaused
}

// stopped reports whether done has closed.
func stopped(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// errBackendSilent: a ping went unanswered for ping_timeout.
var errBackendSilent = errors.New("backend silent: NULL ping unanswered within backend.ping_timeout")

// watchBackend pings a connection from which nothing arrived for
// ping_interval, whether idle or with calls outstanding, and returns
// errBackendSilent when nothing arrives within ping_timeout of a ping
// being queued (a hung server, or one stalled inside a reply). It
// returns nil when done closes.
func (s *session) watchBackend(done <-chan struct{}) error {
	iv, to := s.cfg.Backend.PingInterval, s.cfg.Backend.PingTimeout
	if iv <= 0 {
		return nil
	}
	t := time.NewTimer(iv)
	defer t.Stop()
	var pingAt time.Time // when the unanswered ping was queued
	for {
		select {
		case <-done:
			return nil
		case <-t.C:
		}
		now := time.Now()
		if s.be.localWait.Load() {
			// The reader is held up by the client or the connection's
			// memory share; the server may be waiting for us to read.
			pingAt = time.Time{}
			s.be.lastRecv.Store(now.UnixNano())
		}
		last := time.Unix(0, s.be.lastRecv.Load())
		if !pingAt.IsZero() && last.After(pingAt) {
			pingAt = time.Time{} // the server spoke
		}
		switch {
		case pingAt.IsZero() && now.Sub(last) >= iv:
			pingAt = now
			s.mu.Lock()
			s.be.pingDue = true
			s.mu.Unlock()
			s.wakeWriter()
			t.Reset(to)
		case pingAt.IsZero():
			t.Reset(iv - now.Sub(last))
		case now.Sub(pingAt) >= to:
			s.met.ForwardBackend.PingTimeout.Inc()
			s.met.BackendError("ping_timeout")
			s.log.Warn("backend silent: NULL ping unanswered; reconnecting", "peer", s.peer,
				"silent_for", now.Sub(last).Round(time.Millisecond), "ping_timeout", to)
			return errBackendSilent
		default:
			t.Reset(to - now.Sub(pingAt))
		}
	}
}

// wakeWriter tells the backend writer there is work.
func (s *session) wakeWriter() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// writePing sends the NULL ping the watchdog asked for, if any (writer).
func (s *session) writePing(rw *tcprpc.RecordWriter, buf []byte) error {
	s.mu.Lock()
	if !s.be.pingDue {
		s.mu.Unlock()
		return nil
	}
	s.be.pingDue = false
	xid := rand.Uint32()
	for s.pending.byXID[xid] != nil {
		xid++
	}
	s.be.pingXID, s.be.pingOut = xid, true
	s.mu.Unlock()
	prog, vers := s.be.pingProg, s.be.pingVers
	if prog == 0 {
		prog, vers = ulb.ProgNFS, 3
	}
	h := oncrpc.CallHeader{XID: xid, RPCVers: oncrpc.RPCVersion, Prog: prog, Vers: vers, Proc: 0,
		Cred: oncrpc.NullAuth, Verf: oncrpc.NullAuth}
	e := xdr.NewEncoder(buf)
	if err := h.Encode(&e); err != nil {
		return fmt.Errorf("encode ping: %w", err)
	}
	if err := rw.WriteRecord(e.Bytes(), nil, nil); err != nil {
		s.met.BackendError("write")
		return fmt.Errorf("write ping: %w", err)
	}
	return nil
}

// pingReply reports whether xid answers the outstanding ping (reader).
func (s *session) pingReply(xid uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.be.pingOut || xid != s.be.pingXID || s.pending.byXID[xid] != nil {
		return false
	}
	s.be.pingOut = false
	s.met.ForwardBackend.PingOK.Inc()
	return true
}

// failCall answers pc with SYSTEM_ERR instead of its reply, which the
// gateway cannot carry (RFC 5531: the server could not process the
// call): an NFS status would need a per-procedure result body, and the
// Linux client turns SYSTEM_ERR into EIO for that one call. The call is
// not sent again. Reader only.
func (s *session) failCall(pc *pendingCall, reason string, cause error) {
	if !s.takeAnswered(pc) {
		return
	}
	pc.answer, pc.failReason, pc.failCause = answerFail, reason, cause
	s.answerOrHandOff(pc)
}

// sendFailure is failCall's answer (finishAnswer).
func (s *session) sendFailure(pc *pendingCall) {
	pc.reply.ReleaseBuffers()
	pc.reply.Reset()
	s.met.ForwardBackend.CallsFailed.WithLabelValues(pc.failReason).Inc()
	s.log.Warn("backend reply cannot be carried; call answered SYSTEM_ERR", "peer", s.peer, "xid", pc.xid,
		"program", pc.prog, "version", pc.vers, "procedure", pc.proc, "reason", pc.failReason, "error", pc.failCause)
	rh := oncrpc.SystemErrReply(pc.xid)
	if err := s.replyWithHeader(pc.call, &rh); err != nil {
		s.log.Debug("SYSTEM_ERR not sent", "peer", s.peer, "xid", pc.xid, "error", err)
		s.drop(pc.call, "client_gone")
	} else {
		s.met.Observe(s.met.CallLatency, pc.received)
		pc.stats.Reply(s.met, gateway.StatusSystemErr).Inc()
	}
	s.mu.Lock()
	s.pending.put(pc)
	s.mu.Unlock()
}

// takeAnswered removes pc, about to be answered, from the pending table:
// the reader owns the answer from here (session.go). False if pc is no
// longer outstanding.
func (s *session) takeAnswered(pc *pendingCall) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending.byXID[pc.xid] != pc {
		return false
	}
	delete(s.pending.byXID, pc.xid)
	return true
}

// sentCall returns the outstanding call xid answers, nil if none (or if
// it has not been sent on this connection).
func (s *session) sentCall(xid uint32) (*pendingCall, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pc := s.pending.byXID[xid]
	if pc == nil || pc.sent.IsZero() || !pc.onWire.Load() {
		return nil, time.Time{} // not (yet) written on this connection: see session.go
	}
	return pc, pc.sent
}

// replyTooLarge handles a record refused at its first header for being
// above max_reply_bytes: the call it answers (its XID follows the
// header, if already read) is failed so that it is not sent again.
func (s *session) replyTooLarge(rr *tcprpc.RecordReader, err error) {
	var fe *tcprpc.FrameError
	if !errors.As(err, &fe) || fe.Err != tcprpc.ErrRecordTooLarge || fe.Fragment != 0 {
		return
	}
	if u := rr.Unread(); len(u) >= 8 {
		if pc, _ := s.sentCall(binary.BigEndian.Uint32(u[4:])); pc != nil {
			s.failCall(pc, failTooLarge, err)
		}
	}
}

// replyBroken handles a connection that failed inside pc's reply: a
// record too large fails the call at once; a connection broken there
// maxReplyBreaks times fails it too (re-sending it breaks it again).
func (s *session) replyBroken(pc *pendingCall, done <-chan struct{}, err error) {
	if errors.Is(err, tcprpc.ErrRecordTooLarge) {
		s.failCall(pc, failTooLarge, err)
		return
	}
	select {
	case <-done:
		return // closed by the gateway (writer failure, silent backend)
	default:
	}
	if pc.breaks++; pc.breaks >= maxReplyBreaks {
		s.failCall(pc, failBroken, err)
	}
}

// writeCalls sends queued calls, each as one record with one vectored
// write straight from the pieces the engine delivered (a WRITE payload
// goes from the registered buffer its RDMA Read filled).
// The engine writes calls itself onto an idle connection
// (backend_inline.go); a round of this goroutine holds s.w.wmu.
func (s *session) writeCalls(conn *net.TCPConn, done <-chan struct{}) (err error) {
	rw := tcprpc.NewRecordWriter(conn, nil)
	vec := make([][]byte, 0, 16)
	var ping [oncrpc.MaxCallHeader]byte
	s.attachInline(conn, rw)
	defer func() {
		if derr := s.detachInline(); err == nil {
			err = derr
		}
	}()
	for {
		select {
		case <-s.wake:
		case <-done:
			return nil
		}
		if hook := testHookWriterWoken; hook != nil {
			hook()
		}
		s.w.wmu.Lock()
		var stop bool
		vec, stop, err = s.writeRound(rw, vec, ping[:], done)
		s.w.wmu.Unlock()
		if err != nil || stop {
			return err
		}
	}
}

// writeRound is one round of the writer goroutine (s.w.wmu held): what
// an inline write left, the queued calls, callback replies and a ping.
// stop: pausing, the batch's last record is out; no more.
func (s *session) writeRound(rw *tcprpc.RecordWriter, vec [][]byte, ping []byte, done <-chan struct{}) (_ [][]byte, stop bool, err error) {
	if err = s.finishInline(); err != nil {
		return vec, true, err
	}
	if vec, stop, err = s.writeBatch(rw, s.takeBatch(), vec, done); err != nil {
		return vec, true, err
	}
	if stop || stopped(done) {
		return vec, true, nil
	}
	if err := s.writeBackchannelReplies(rw); err != nil {
		return vec, true, fmt.Errorf("write callback reply: %w", err)
	}
	return vec, false, s.writePing(rw, ping)
}

// takeBatch takes the calls queued for the writer, stamped as sent now.
func (s *session) takeBatch() []*pendingCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takeBatchLocked()
}

// takeBatchLocked is takeBatch with s.mu held.
func (s *session) takeBatchLocked() []*pendingCall {
	batch := s.sendQ
	s.sendQ = s.spareQ[:0]
	now := time.Now()
	for _, pc := range batch {
		pc.sent = now // guarded by s.mu: the reader reads it
	}
	return batch
}

// writeBatch writes the batch's calls in order, as one record each and
// all of them with one vectored write (vec is the vector to reuse,
// returned grown), and gives the batch's storage back. It stops early
// (stop) when done closes between two records, or on a write error,
// leaving the calls not written pending.
func (s *session) writeBatch(rw *tcprpc.RecordWriter, batch []*pendingCall, vec [][]byte, done <-chan struct{}) (_ [][]byte, stop bool, err error) {
	n := 0 // batch[:n] are queued in rw
	for i, pc := range batch {
		if i > 0 && stopped(done) {
			// Pausing (or failing): what is left stays pending, for
			// teardown or the next connection, instead of being cut
			// by the pause's deadline mid-record.
			stop = true
			break
		}
		vec = pc.call.Msg.AppendVec(vec[:0])
		if err = rw.AppendRecordv(vec); err != nil {
			stop = true
			break
		}
		s.be.pingProg, s.be.pingVers = pc.prog, pc.vers
		n++
	}
	if ferr := s.flushCalls(rw, batch[:n]); err == nil {
		err = ferr
	}
	clear(vec[:cap(vec)])
	clear(batch)
	s.giveBackBatch(batch)
	if err != nil {
		s.met.BackendError("write")
		return vec, true, err
	}
	return vec, stop, nil
}

// flushCalls writes the records of calls, queued in rw, with one
// vectored write. A call is not touched after the writev unless its
// answer was handed to the writer (session.go): the reader may recycle
// it at once.
func (s *session) flushCalls(rw *tcprpc.RecordWriter, calls []*pendingCall) error {
	if len(calls) == 0 {
		return rw.Flush()
	}
	for _, pc := range calls {
		pc.writing()
	}
	if hook := testHookFlushCalls; hook != nil {
		hook(calls)
	}
	return s.flushWritten(calls, rw.Flush())
}

// flushWritten ends the writing of calls once their writev returned err:
// the answers the reader handed over meanwhile are sent (session.go).
func (s *session) flushWritten(calls []*pendingCall, err error) error {
	first := calls[0].xid
	for _, pc := range calls {
		if pc.written() {
			// The reply came back before writev returned: the reader
			// left the answer to us.
			s.answerHeld(pc)
		}
	}
	switch {
	case err == nil:
		return nil
	case len(calls) == 1:
		return fmt.Errorf("write call xid %#x: %w", first, err)
	}
	return fmt.Errorf("write calls xid %#x and %d after it: %w", first, len(calls)-1, err)
}

// answerHeld sends an answer the reader handed over (writer goroutine).
// Reply may wait for the client to take replies, as on the reader.
func (s *session) answerHeld(pc *pendingCall) {
	held := !s.be.localWait.Swap(true)
	s.finishAnswer(pc)
	if held {
		s.be.localWait.Store(false)
	}
}

// testHookFlushCalls, when set by a test, sees the calls of each
// vectored write just before it is made.
var testHookFlushCalls func(calls []*pendingCall)

// giveBackBatch returns the writer's batch storage for the next swap.
func (s *session) giveBackBatch(batch []*pendingCall) {
	s.mu.Lock()
	s.spareQ = batch[:0]
	s.mu.Unlock()
}

// replyPeekMax is the read-ahead of a backend connection's record
// reader: the walker's window, and also how much of a READ payload one
// read() may pull in ahead of its buffer (to be copied once more): 16 KiB
// keeps that under 2% of a 1 MiB READ.
const replyPeekMax = 16 << 10

// readReplies reads reply records, matches them to calls by XID and
// delivers them: those that fit the record reader's buffer through
// replyPump, the larger ones (and errors) here.
// ctx ends when done closes.
func (s *session) readReplies(ctx context.Context, conn *net.TCPConn, done <-chan struct{}) error {
	rr := s.replyReader(conn)
	lim := s.cfg.CarryLimits()
	rb := newReplyBuilder(ctx, rr, s.pool, s.replyQuota, &s.be.localWait, replyPeekMax, &lim, int(s.cfg.RDMA.CutThrough))
	p := &replyPump{s: s, rr: rr, rb: rb, done: done}
	if rc, err := conn.SyscallConn(); err == nil {
		p.sr.Init(rc, p, true) // a reset behind a reply is seen by the next write or ping
	}
	for {
		if err := p.run(); err != nil {
			return err
		}
		head, at, err := s.nextReply(rr, done)
		if err != nil {
			return err
		}
		if err := s.takeReply(rr, p.rb, head, at, &p.rh, done); err != nil {
			return err
		}
	}
}

// replyPump takes the replies that fit the record reader's buffer whole
// inside one internal/sockread run on the connection: the socket is read
// with no read returning EAGAIN before each wait (one read per reply at
// one call in flight, where a net.Conn read loop makes two). It leaves
// the run for a record larger than the buffer (its payload read straight
// into the reply's buffers), an error, or done, which the reads in
// readReplies then handle as before.
type replyPump struct {
	s    *session
	rr   *tcprpc.RecordReader
	rb   *replyBuilder
	rh   oncrpc.ReplyHeader
	done <-chan struct{}
	err  error
	sr   sockread.Reader
}

// run processes replies until one needs the ordinary reads; an error of
// the wait (a deadline, the connection closed) is left to them as a read
// error, so that it is reported as before (errPaused during a pause).
func (p *replyPump) run() error {
	if p.sr.Ready() {
		p.err = nil
		if err := p.sr.Run(); err != nil {
			p.rr.Filled(0, err)
		}
	}
	return p.err
}

// Next is the sockread.Consumer: it takes the replies the buffer holds
// whole, then returns where to read more, or nil to leave the run.
func (p *replyPump) Next() ([]byte, []byte) {
	for !stopped(p.done) {
		if space, whole := p.rr.ReadAhead(); !whole {
			return space, nil
		}
		head, at, err := p.s.nextReplyOnce(p.rr, p.done)
		if err == nil && head != nil {
			err = p.s.takeReply(p.rr, p.rb, head, at, &p.rh, p.done)
		}
		if err != nil {
			p.err = err
			return nil, nil
		}
	}
	return nil, nil
}

// Got is the sockread.Consumer: n bytes (or err) from the socket.
func (p *replyPump) Got(n int, err error) bool {
	p.rr.Filled(n, err)
	return err == nil
}

// replyReader is conn's record reader: the one kept while the connection
// was paused (park.go), or a new one.
func (s *session) replyReader(conn *net.TCPConn) *tcprpc.RecordReader {
	if rr := s.be.rr; rr != nil && s.be.rrConn == conn {
		rr.Resume() // the connection was paused
		return rr
	}
	rr := tcprpc.NewRecordReader(conn, &tcprpc.ReaderConfig{MaxRecord: int(s.cfg.Backend.MaxReplyBytes), BufferSize: replyPeekMax})
	s.be.rr, s.be.rrConn = rr, conn
	return rr
}

// nextReply starts the next record and peeks at its head (up to the
// largest RPC reply header), and says when the record started; a record
// too short for an RPC reply is skipped. An error ends the connection.
func (s *session) nextReply(rr *tcprpc.RecordReader, done <-chan struct{}) ([]byte, time.Time, error) {
	for {
		head, at, err := s.nextReplyOnce(rr, done)
		if err != nil || head != nil {
			return head, at, err
		}
	}
}

// nextReplyOnce is nextReply for one record: the head is nil when the
// record was too short (and is skipped by the next call).
func (s *session) nextReplyOnce(rr *tcprpc.RecordReader, done <-chan struct{}) ([]byte, time.Time, error) {
	if err := rr.Next(); err != nil {
		if s.be.paused.Load() {
			return nil, time.Time{}, errPaused
		}
		if errors.Is(err, io.EOF) {
			return nil, time.Time{}, errors.New("backend closed the connection")
		}
		s.met.BackendReadFailed(err)
		s.replyTooLarge(rr, err)
		return nil, time.Time{}, fmt.Errorf("read reply: %w", err)
	}
	at := time.Now()
	s.be.lastRecv.Store(at.UnixNano())
	head, err := rr.Peek(oncrpc.MaxReplyHeader)
	if err != nil && err != io.EOF {
		if s.be.paused.Load() {
			return nil, time.Time{}, errPaused
		}
		s.met.BackendReadFailed(err)
		if u := rr.Unread(); len(u) >= 4 { // the record's start, still buffered
			if pc, _ := s.sentCall(binary.BigEndian.Uint32(u)); pc != nil {
				s.replyBroken(pc, done, err)
			}
		}
		return nil, time.Time{}, fmt.Errorf("read reply: %w", err)
	}
	if len(head) >= 4 {
		return head, at, nil
	}
	s.met.BackendError("protocol")
	s.log.Warn("backend sent a record too short for an RPC reply; skipped", "peer", s.peer, "bytes", len(head))
	return nil, at, nil
}

// takeReply handles the record whose head nextReply peeked at: a
// callback from the server, the reply to a ping, or the reply to a call
// (relayReply); a reply for no call is dropped. An error ends the
// connection.
func (s *session) takeReply(rr *tcprpc.RecordReader, rb *replyBuilder, head []byte, at time.Time, rh *oncrpc.ReplyHeader, done <-chan struct{}) error {
	// The server's callbacks (NFSv4.1 backchannel) share the
	// connection: a CALL goes to the client, not to a pending call.
	if xid, mt, perr := oncrpc.PeekMsgType(head); perr == nil && mt == oncrpc.Call {
		if err := s.readBackchannelCall(rr, xid); err != nil {
			return fmt.Errorf("read callback: %w", err)
		}
		return nil
	}
	hdrLen, herr := rh.Decode(head)
	pc, sent := s.sentCall(rh.XID)
	if pc == nil && s.pingReply(rh.XID) {
		s.be.gotReply.Store(true)
		return nil
	}
	if pc == nil {
		s.met.UnknownXIDReplies.Inc()
		s.log.Debug("backend reply for an unknown XID dropped", "peer", s.peer, "xid", rh.XID)
		return nil
	}
	s.met.BackendLatency.Observe(at.Sub(sent).Seconds())
	return s.relayReply(rb, pc, rh, hdrLen, herr, done)
}

// relayReply builds pc's reply from the record (its header decoded into
// rh, hdrLen bytes, or herr) and hands it to the client. An error ends
// the connection.
func (s *session) relayReply(rb *replyBuilder, pc *pendingCall, rh *oncrpc.ReplyHeader, hdrLen int, herr error, done <-chan struct{}) error {
	st := gateway.StatusUnparsable
	walk := false
	if herr != nil {
		// Forward it as it came: the client's RPC layer judges it.
		s.met.BackendError("protocol")
		s.log.Warn("backend reply header does not decode; forwarded as is", "peer", s.peer, "xid", rh.XID, "error", herr)
		hdrLen = 0
	} else {
		st = gateway.ReplyStatusOf(rh)
		walk = st == gateway.StatusSuccess && pc.ddp && ulb.Supported(pc.prog, pc.vers)
	}
	if err := rb.build(pc, hdrLen, walk); err != nil {
		if errors.Is(err, errConnGoing) {
			return err
		}
		if s.be.paused.Load() {
			return errPaused
		}
		s.met.BackendReadFailed(err)
		s.replyBroken(pc, done, err)
		return fmt.Errorf("read reply xid %#x: %w", rh.XID, err)
	}
	s.be.gotReply.Store(true)
	if rb.refused != nil {
		s.failCall(pc, failNoDDP, rb.refused)
		return nil
	}
	if rb.fallback {
		s.met.DDPFallbacks.Inc()
		s.log.Debug("reply results sent inline instead of by DDP", "peer", s.peer, "xid", rh.XID,
			"program", pc.prog, "version", pc.vers, "procedure", pc.proc)
	}
	s.be.localWait.Store(true) // Reply may wait for the client to take replies
	s.deliver(pc, st)
	s.be.localWait.Store(false)
	return nil
}
