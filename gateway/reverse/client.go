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

// readCalls reads call records until the stream ends or fails.
func (c *revClient) readCalls() error {
	for {
		s, err := c.slot()
		if err != nil {
			return err
		}
		if c.ops.Draining.Load() {
			c.free <- s
			return errDraining
		}
		ok, err := s.read(c)
		if err != nil {
			c.free <- s
			if errors.Is(err, io.EOF) {
				return io.EOF
			}
			if c.ctx.Err() != nil {
				return nil
			}
			return err
		}
		if !ok { // answered or dropped by the gateway itself
			c.free <- s
			continue
		}
		if c.ops.Draining.Load() { // read as the drain began: not forwarded
			s.releaseItems()
			c.free <- s
			return errDraining
		}
		c.busy.Add(1)
		c.calls.Add(1)
		c.ops.Touch(s.received)
		s.work <- struct{}{}
	}
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
