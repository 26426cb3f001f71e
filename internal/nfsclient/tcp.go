package nfsclient

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/rdmagw/rdmagw/tcprpc"
)

// TCP is a Transport over one ONC RPC/TCP connection (record marking).
// Calls are written whole under a lock; one goroutine reads replies and
// hands each to the call waiting for its XID.
type TCP struct {
	conn net.Conn
	xids *xidSource

	wmu sync.Mutex // serialises records on the stream
	rw  *tcprpc.RecordWriter

	mu      sync.Mutex
	pending map[uint32]chan tcpReply
	err     error // why the connection ended; set once
	done    chan struct{}

	cb atomic.Pointer[func([]byte) []byte] // callback service (nfs4_callback.go)
}

type tcpReply struct {
	b   []byte
	err error
}

// DialTCP connects to an RPC server at addr ("host:port").
func DialTCP(ctx context.Context, addr string) (*TCP, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return NewTCP(c), nil
}

// NewTCP runs a transport over an established connection.
func NewTCP(c net.Conn) *TCP {
	t := &TCP{
		conn:    c,
		xids:    newXIDSource(),
		rw:      tcprpc.NewRecordWriter(c, nil),
		pending: make(map[uint32]chan tcpReply),
		done:    make(chan struct{}),
	}
	go t.readLoop()
	return t
}

// Call implements Transport.
func (t *TCP) Call(ctx context.Context, prog, vers, proc uint32, args []byte) ([]byte, error) {
	xid := t.xids.get()
	var hb [maxCallHeader]byte
	head, err := encodeCallHeader(hb[:], xid, prog, vers, proc)
	if err != nil {
		return nil, err
	}
	ch := make(chan tcpReply, 1)
	t.mu.Lock()
	if t.err != nil {
		t.mu.Unlock()
		return nil, t.err
	}
	t.pending[xid] = ch
	t.mu.Unlock()

	t.wmu.Lock()
	err = t.rw.WriteRecord(head, args, nil)
	t.wmu.Unlock()
	if err != nil {
		t.fail(fmt.Errorf("nfsclient: send: %w", err))
		// fail answered every pending call, ours included.
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		return parseReply(r.b, prog, vers, proc)
	case <-ctx.Done():
		t.mu.Lock()
		delete(t.pending, xid)
		t.mu.Unlock()
		return nil, ctx.Err()
	}
}

// readLoop reads replies until the connection ends.
func (t *TCP) readLoop() {
	rr := tcprpc.NewRecordReader(t.conn, &tcprpc.ReaderConfig{MaxRecord: 4 << 20})
	for {
		if err := rr.Next(); err != nil {
			t.fail(err)
			return
		}
		var rec []byte
		if n, exact := rr.Remaining(); exact {
			rec = make([]byte, n)
			if _, err := rr.ReadFull(rec); err != nil {
				t.fail(err)
				return
			}
		} else {
			b, err := io.ReadAll(rr)
			if err != nil {
				t.fail(err)
				return
			}
			rec = b
		}
		if len(rec) < 4 {
			continue // not even an XID: nothing to match it to
		}
		if t.callbackRecord(rec) {
			continue // a call from the server (NFSv4.1 back channel)
		}
		xid := binary.BigEndian.Uint32(rec)
		t.mu.Lock()
		ch, ok := t.pending[xid]
		delete(t.pending, xid)
		t.mu.Unlock()
		if ok {
			ch <- tcpReply{b: rec}
		}
	}
}

// fail ends the transport with err, answering every pending call.
func (t *TCP) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return
	}
	if err == io.EOF || err == net.ErrClosed {
		err = ErrClosed
	}
	t.err = fmt.Errorf("%w: %v", ErrClosed, err)
	if err == ErrClosed {
		t.err = ErrClosed
	}
	for xid, ch := range t.pending {
		ch <- tcpReply{err: t.err}
		delete(t.pending, xid)
	}
	close(t.done)
	t.conn.Close()
}

// Close implements Transport.
func (t *TCP) Close() error {
	t.fail(ErrClosed)
	return nil
}
