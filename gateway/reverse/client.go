package reverse

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/internal/sockread"
	"github.com/rdmagw/rdmagw/tcprpc"
)

// revClient is one TCP client's session. Its reader goroutine reads one
// call record at a time into a free call slot (call.go) and hands
// the slot to the slot's worker goroutine, which runs the call over the
// RDMA link and writes the reply (reply.go). There are at most
// reverse.max_calls_per_client slots: when all are busy the reader stops
// reading the socket, so a client that sends faster than the server
// answers is held back by TCP flow control, not queued in memory.
type revClient struct {
	r    *Gateway
	conn *net.TCPConn
	link *rdmaLink
	log  hclog.Logger
	met  *gateway.ReverseMetrics
	peer string

	ctx    context.Context
	cancel context.CancelFunc

	rr *tcprpc.RecordReader

	// rw writes the replies (and callbacks) of all slots: replies ready
	// together go out in one vectored write; the first write error is
	// sticky and ends the session.
	rw *tcprpc.SharedRecordWriter

	free    chan *revSlot
	slots   []*revSlot
	busy    sync.WaitGroup // slots holding a call
	workers sync.WaitGroup

	ops   gateway.ClientOps // live view and drain (gateway/ops.go, ops.go)
	calls atomic.Int32      // calls read and not yet answered (busy's count)
}

// peekMax is the read-ahead of a client's record reader: the walker's
// window over the arguments before a WRITE payload, and how much of a
// payload one read() may pull in ahead of its buffer (to be copied once
// more): 16 KiB keeps that under 2% of a 1 MiB WRITE.
const revPeekMax = 16 << 10

func newRevClient(r *Gateway, conn *net.TCPConn, link *rdmaLink) *revClient {
	c := &revClient{r: r, conn: conn, link: link, log: r.log.Named("client"), met: r.met,
		peer: conn.RemoteAddr().String(),
		free: make(chan *revSlot, r.cfg.Reverse.MaxCallsPerClient)}
	c.ops.Init(time.Now())
	c.rr = tcprpc.NewRecordReader(countingReader{conn, &c.ops.In}, &tcprpc.ReaderConfig{MaxRecord: int(r.cfg.Reverse.MaxCallBytes), BufferSize: revPeekMax, SkipOversize: true})
	c.rw = tcprpc.NewSharedRecordWriter(conn, nil)
	return c
}

// run serves the client until it disconnects, ctx ends or the RDMA link
// is given up, and returns the reason for rdmagw_connections_closed_total.
func (c *revClient) run(parent context.Context) string {
	c.ctx, c.cancel = context.WithCancel(parent)
	defer c.cancel()
	c.link.bc.client.Store(c)
	defer c.link.bc.client.Store(nil)
	// A given-up link ends the session: unblock the reader.
	go func() {
		select {
		case <-c.ctx.Done():
		case <-c.link.dead:
			c.cancel()
		}
	}()
	stopOnCancel := context.AfterFunc(c.ctx, func() { c.conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stopOnCancel()

	reason := c.endReason(parent, c.readCalls())
	c.teardown()
	return reason
}

// endReason is why the client's session ends, after its reader stopped
// with err: the metric reason of the closed connection. A drain, or the
// client closing its side, lets the calls in flight finish first
// (bounded by the drain's deadline, or drainTimeout).
func (c *revClient) endReason(parent context.Context, err error) string {
	switch {
	case c.link.gone():
		return "backend_gone"
	case parent.Err() != nil:
		return "shutdown"
	case c.ops.Draining.Load():
		// A drain stopped the reader: let the calls in flight finish;
		// the drain ends parent at its deadline.
		select {
		case <-c.callsDone():
		case <-parent.Done():
		}
		return "shutdown"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF):
		// The client reset or dropped the connection mid-record: an
		// ordinary (if abrupt) disconnect, e.g. libnfs at exit.
		c.log.Debug("client connection reset", "peer", c.peer, "error", err)
	case errors.Is(err, io.EOF):
		// The client closed its side: let its calls finish, bounded.
		select {
		case <-c.callsDone():
		case <-time.After(drainTimeout):
		}
	case err != nil:
		c.log.Warn("client connection ended", "peer", c.peer, "error", err)
		return "error"
	}
	return "client"
}

// callsDone is closed once the client has no call in flight.
func (c *revClient) callsDone() <-chan struct{} {
	done := make(chan struct{})
	go func() { c.busy.Wait(); close(done) }()
	return done
}

// teardown ends the session: the connection closes, the calls in flight
// end, the slot workers stop and the slots give their memory back.
func (c *revClient) teardown() {
	c.cancel()
	c.conn.Close()
	c.busy.Wait()
	for _, s := range c.slots {
		close(s.work)
	}
	c.workers.Wait()
	for _, s := range c.slots {
		s.free()
	}
}

// drainTimeout bounds how long the replies to a departed client's last
// calls are waited for.
const drainTimeout = 30 * time.Second

// readCalls reads call records until the stream ends or fails. Calls
// that fit the record reader's buffer whole are taken inside one
// internal/sockread run (callPump): the socket is read with no read
// returning EAGAIN before each wait, one read per call at one call in
// flight where a net.Conn read loop makes two. A larger call (a WRITE's
// payload), an error, or the end of the run's wait is left to the
// ordinary reads of readCall.
func (c *revClient) readCalls() error {
	p := &callPump{c: c}
	if rc, err := c.conn.SyscallConn(); err == nil {
		p.sr.Init(rc, p, true)
	}
	if hook := testHookReader; hook != nil {
		hook(&p.sr) // tests: delay the first read; count the reads
	}
	for {
		if p.sr.Ready() {
			if stop, err := p.run(); stop {
				return err
			}
		}
		if stop, err := c.readCall(); stop {
			return err
		}
	}
}

// testHookReader, when set by a test before the gateway starts, runs as
// each client's reader starts, with its pump's sockread.Reader.
var testHookReader func(*sockread.Reader)

// clientResetCheck bounds how long a reset right behind the client's last
// bytes goes unseen when the gateway has nothing to write back that
// would fail on it (a call cut short, a callback's reply): the longest
// the call pump waits before it reads the socket anyway (one timer reset
// and one read a second per idle client; a variable for tests). See
// internal/sockread.
var clientResetCheck = time.Second

// callPump is the reader's internal/sockread consumer.
type callPump struct {
	c    *revClient
	sr   sockread.Reader
	stop bool  // readCall ended the reader inside the run
	err  error // ... with this
}

// run takes calls until one needs the ordinary reads; stop says the
// reader ends (with err). A wait that outlives clientResetCheck while
// the session goes on is run again (sockread.RunChecked): a run starts
// with a read, which finds a reset the wait could not see. Any other
// error of the wait (the deadline of a cancel or a drain, the connection
// closed) is left to the ordinary reads, which report it as before; they
// read with no deadline of the pump's (a large call may take its time).
func (p *callPump) run() (stop bool, err error) {
	c := p.c
	p.stop, p.err = false, nil
	werr := p.sr.RunChecked(clientResetCheck, c.setReadDeadline, c.live)
	if p.stop {
		return true, p.err
	}
	if werr != nil {
		c.rr.Filled(0, werr)
	}
	c.setReadDeadline(time.Time{})
	return false, nil
}

// live reports whether the session goes on: not cancelled, not draining
// (both stop the reader with a read deadline in the past).
func (c *revClient) live() bool { return c.ctx.Err() == nil && !c.ops.Draining.Load() }

// setReadDeadline sets the pump's read deadline t (zero: none) while the
// session is live, and reports whether it is; a cancel's or a drain's
// deadline, in the past, stays (set again if it came in between).
func (c *revClient) setReadDeadline(t time.Time) bool {
	if !c.live() {
		return false
	}
	c.conn.SetReadDeadline(t)
	if !c.live() {
		c.conn.SetReadDeadline(time.Unix(1, 0))
		return false
	}
	return true
}

// Next is the sockread.Consumer: it takes the calls the buffer holds
// whole, then returns where to read more, or nil to leave the run.
func (p *callPump) Next() ([]byte, []byte) {
	rr := p.c.rr
	for {
		if space, whole := rr.ReadAhead(); !whole {
			return space, nil
		}
		if stop, err := p.c.readCall(); stop {
			p.stop, p.err = true, err
			return nil, nil
		}
	}
}

// Got is the sockread.Consumer: n bytes (or err) from the socket.
func (p *callPump) Got(n int, err error) bool {
	p.c.ops.In.Add(uint64(n))
	p.c.rr.Filled(n, err)
	return err == nil
}

// readCall reads the next call record into a free slot and hands the
// slot to its worker; stop says the reader ends, with err.
func (c *revClient) readCall() (stop bool, err error) {
	s, err := c.slot()
	if err != nil {
		return true, err
	}
	if c.ops.Draining.Load() {
		c.free <- s
		return true, errDraining
	}
	ok, err := s.read(c)
	if err != nil {
		c.free <- s
		if errors.Is(err, io.EOF) {
			return true, io.EOF
		}
		if c.ctx.Err() != nil {
			return true, nil
		}
		return true, err
	}
	if !ok { // answered or dropped by the gateway itself
		c.free <- s
		return false, nil
	}
	if c.ops.Draining.Load() { // read as the drain began: not forwarded
		s.releaseItems()
		c.free <- s
		return true, errDraining
	}
	c.busy.Add(1)
	c.calls.Add(1)
	c.ops.Touch(s.received)
	s.work <- struct{}{}
	return false, nil
}

// slot returns a free call slot, making one while fewer than
// max_calls_per_client exist, else waiting for one (back-pressure).
func (c *revClient) slot() (*revSlot, error) {
	select {
	case s := <-c.free:
		return s, nil
	default:
	}
	if len(c.slots) < c.r.cfg.Reverse.MaxCallsPerClient {
		s := newRevSlot(c)
		c.slots = append(c.slots, s)
		c.workers.Add(1)
		go func() {
			defer c.workers.Done()
			for range s.work {
				s.serve()
				c.calls.Add(-1)
				c.busy.Done()
				c.free <- s
			}
		}()
		return s, nil
	}
	c.met.ClientStalls.Inc()
	select {
	case s := <-c.free:
		return s, nil
	case <-c.ctx.Done():
		return nil, c.ctx.Err()
	}
}

// writeReply sends vec as one record, in one vectored write with the
// other slots' replies ready at the same time. Any slot's goroutine.
func (c *revClient) writeReply(vec [][]byte) error {
	if err := c.rw.WriteRecordv(vec); err != nil {
		c.cancel()
		return err
	}
	c.ops.CountRecord(vec)
	return nil
}
