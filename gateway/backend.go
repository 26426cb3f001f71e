package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/ulb"
)

// runBackend keeps the session's backend connection alive: it runs a
// writer and a reader on each connection, and when either fails, closes
// it, reconnects with exponential backoff (from the same local port where
// the OS allows) and re-queues every call still waiting for a reply. If
// the backend stays unreachable for give_up_after, it disconnects the RDMA
// client. It returns when ctx ends (the client is gone) or after giving up.
func (s *session) runBackend(ctx context.Context, conn *net.TCPConn, d *backendDialer) {
	for {
		err := s.serveBackend(ctx, conn)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("backend connection lost; reconnecting", "peer", s.peer,
			"backend", d.addr, "local", localAddr(conn), "error", err)
		conn = s.reconnect(ctx, d)
		if conn == nil {
			return
		}
		s.met.reconnects.Inc()
		s.resetBackchannel()
		n := s.requeueAll()
		s.log.Info("backend reconnected", "peer", s.peer, "backend", d.addr,
			"local", localAddr(conn), "same_port", d.samePort, "resent_calls", n)
	}
}

// reconnect dials until it succeeds, ctx ends, or give_up_after has passed
// since the failure; then it disconnects the client and returns nil.
func (s *session) reconnect(ctx context.Context, d *backendDialer) *net.TCPConn {
	b := &s.cfg.Backend
	deadline := time.Now().Add(b.GiveUpAfter)
	wait := b.ReconnectInitial
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for attempt := 1; ; attempt++ {
		conn, err := d.dial(ctx)
		if err == nil {
			return conn
		}
		if ctx.Err() != nil {
			return nil
		}
		s.met.backendError("connect")
		left := time.Until(deadline)
		if left <= 0 {
			s.giveUp = true
			s.met.giveUps.Inc()
			s.log.Error("backend unreachable; giving up and disconnecting the client", "peer", s.peer,
				"backend", d.addr, "attempts", attempt, "give_up_after", b.GiveUpAfter, "error", err)
			s.rc.Close()
			return nil
		}
		s.log.Debug("backend connect failed", "peer", s.peer, "backend", d.addr, "attempt", attempt, "retry_in", wait, "error", err)
		timer.Reset(min(wait, left))
		select {
		case <-timer.C:
		case <-ctx.Done():
			return nil
		}
		wait = min(2*wait, b.ReconnectMax)
	}
}

// requeueAll makes the writer send every outstanding call again, in the
// order the client sent them, and returns how many.
func (s *session) requeueAll() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sendQ = s.sendQ[:0]
	for _, pc := range s.pending.byXID {
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

// serveBackend runs the writer and the reader on conn until one fails or
// ctx ends; it closes conn and returns the first error.
func (s *session) serveBackend(ctx context.Context, conn *net.TCPConn) error {
	done := make(chan struct{})
	var once sync.Once
	var first error
	stop := func(err error) {
		once.Do(func() {
			first = err
			close(done)
			conn.Close()
		})
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		stop(s.writeCalls(conn, done))
	}()
	go func() {
		defer wg.Done()
		stop(s.readReplies(conn, done))
	}()
	select {
	case <-ctx.Done():
		stop(ctx.Err())
	case <-done:
	}
	wg.Wait()
	return first
}

// maxReplyHeader is the longest RPC reply header: five words, a verifier
// of at most 400 bytes, and a version range.
const maxReplyHeader = 7*4 + 4 + tcprpc.MaxAuthBytes

// writeCalls sends queued calls, each as one record with one vectored
// write straight from the pieces the engine delivered (a WRITE payload
// goes from the registered buffer its RDMA Read filled).
func (s *session) writeCalls(conn *net.TCPConn, done <-chan struct{}) error {
	rw := tcprpc.NewRecordWriter(conn, nil)
	vec := make([][]byte, 0, 16)
	for {
		select {
		case <-s.wake:
		case <-done:
			return nil
		}
		s.mu.Lock()
		batch := s.sendQ
		s.sendQ = s.spareQ[:0]
		now := time.Now()
		for _, pc := range batch {
			pc.sent = now // guarded by s.mu: the reader reads it
		}
		s.mu.Unlock()
		for i, pc := range batch {
			pc.writing.Store(true)
			vec = pc.call.Msg.AppendVec(vec[:0])
			err := rw.WriteRecordv(vec)
			pc.writing.Store(false)
			batch[i] = nil
			if err != nil {
				clear(batch)
				s.giveBackBatch(batch)
				s.met.backendError("write")
				return fmt.Errorf("write call xid %#x: %w", pc.xid, err)
			}
		}
		clear(vec[:cap(vec)])
		s.giveBackBatch(batch)
		if err := s.writeBackchannelReplies(rw); err != nil {
			return fmt.Errorf("write callback reply: %w", err)
		}
	}
}

// giveBackBatch returns the writer's batch storage for the next swap.
func (s *session) giveBackBatch(batch []*pendingCall) {
	s.mu.Lock()
	s.spareQ = batch[:0]
	s.mu.Unlock()
}

// readReplies reads reply records, matches them to calls by XID and
// delivers them.
func (s *session) readReplies(conn *net.TCPConn, done <-chan struct{}) error {
	// The read-ahead is the walker's window and also how much of a READ
	// payload one read() may pull in ahead of its buffer (to be copied
	// once more): 16 KiB keeps that under 2% of a 1 MiB READ.
	const peekMax = 16 << 10
	rr := tcprpc.NewRecordReader(conn, &tcprpc.ReaderConfig{MaxRecord: int(s.cfg.Backend.MaxReplyBytes), BufferSize: peekMax})
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	rb := replyBuilder{rr: rr, pool: s.pool, peekMax: peekMax, done: done, timer: timer}
	var rh tcprpc.ReplyHeader
	for {
		if err := rr.Next(); err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("backend closed the connection")
			}
			s.met.backendError("read")
			return fmt.Errorf("read reply: %w", err)
		}
		head, err := rr.Peek(maxReplyHeader)
		if err != nil && err != io.EOF {
			s.met.backendError("read")
			return fmt.Errorf("read reply: %w", err)
		}
		if len(head) < 4 {
			s.met.backendError("protocol")
			s.log.Warn("backend sent a record too short for an RPC reply; skipped", "peer", s.peer, "bytes", len(head))
			continue
		}
		// The server's callbacks (NFSv4.1 backchannel) share the
		// connection: a CALL goes to the client, not to a pending call.
		if xid, mt, perr := tcprpc.PeekMsgType(head); perr == nil && mt == tcprpc.Call {
			if err := s.readBackchannelCall(rr, xid); err != nil {
				return fmt.Errorf("read callback: %w", err)
			}
			continue
		}
		hdrLen, herr := rh.Decode(head)
		s.mu.Lock()
		pc := s.pending.byXID[rh.XID]
		var sent time.Time
		if pc != nil {
			sent = pc.sent
		}
		s.mu.Unlock()
		if pc == nil || sent.IsZero() {
			s.met.unknownXID.Inc()
			s.log.Debug("backend reply for an unknown XID dropped", "peer", s.peer, "xid", rh.XID)
			continue
		}
		s.met.observe(s.met.backendLatency, sent)
		st := statusUnparsable
		walk := false
		if herr != nil {
			// Forward it as it came: the client's RPC layer judges it.
			s.met.backendError("protocol")
			s.log.Warn("backend reply header does not decode; forwarded as is", "peer", s.peer, "xid", rh.XID, "error", herr)
			hdrLen = 0
		} else {
			st = replyStatusOf(&rh)
			walk = st == statusSuccess && pc.ddp && ulb.Supported(pc.prog, pc.vers)
		}
		if err := rb.build(pc, hdrLen, walk); err != nil {
			if errors.Is(err, errConnGoing) {
				return err
			}
			s.met.backendError("read")
			return fmt.Errorf("read reply xid %#x: %w", rh.XID, err)
		}
		if rb.fallback {
			s.met.ddpFallbacks.Inc()
			s.log.Debug("reply results sent inline instead of by DDP", "peer", s.peer, "xid", rh.XID,
				"program", pc.prog, "version", pc.vers, "procedure", pc.proc)
		}
		s.deliver(pc, st)
	}
}
