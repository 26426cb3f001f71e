package sockread

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// pair returns both ends of a loopback TCP connection.
func pair(t *testing.T) (a, b *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ch := make(chan net.Conn, 1)
	go func() { c, _ := l.Accept(); ch <- c }()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-ch
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// msgConsumer takes fixed-size messages, acks each with one byte on
// ack, and keeps what it took.
type msgConsumer struct {
	buf    []byte
	r, w   int
	size   int
	ack    io.Writer
	got    bytes.Buffer
	msgs   int
	stop   int           // end Run after this many messages (0: at EOF)
	pause  time.Duration // sleep after each ack (data arrives meanwhile)
	err    error
	ackErr error
}

func (m *msgConsumer) Next() (p, tail []byte) {
	for m.w-m.r >= m.size {
		m.got.Write(m.buf[m.r : m.r+m.size])
		m.r += m.size
		m.msgs++
		if _, err := m.ack.Write([]byte{1}); err != nil {
			m.ackErr = err
		}
		if m.pause > 0 {
			time.Sleep(m.pause)
		}
		if m.stop > 0 && m.msgs == m.stop {
			return nil, nil
		}
	}
	if m.r == m.w {
		m.r, m.w = 0, 0
	} else if m.r+m.size > len(m.buf) {
		m.w = copy(m.buf, m.buf[m.r:m.w])
		m.r = 0
	}
	return m.buf[m.w:], nil
}

func (m *msgConsumer) Got(n int, err error) bool {
	m.err = err
	m.w += n
	return err == nil
}

func rawConn(t *testing.T, c *net.TCPConn) syscall.RawConn {
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// pingPong sends n messages of size bytes from peer, each after the ack
// of the one before, and returns what was sent.
func pingPong(peer net.Conn, n, size int, done chan<- error) []byte {
	var sent bytes.Buffer
	msg := make([]byte, size)
	for i := range n {
		for j := range msg {
			msg[j] = byte(i*7 + j)
		}
		sent.Write(msg)
	}
	go func() {
		ack := make([]byte, 1)
		b := sent.Bytes()
		for i := range n {
			if _, err := peer.Write(b[i*size : (i+1)*size]); err != nil {
				done <- err
				return
			}
			if _, err := io.ReadFull(peer, ack); err != nil {
				done <- err
				return
			}
		}
		done <- peer.(*net.TCPConn).CloseWrite()
	}()
	return sent.Bytes()
}

// TestOneReadPerMessage: a peer that sends one message and waits for the
// answer costs one read per message (a net.Conn read loop makes two: the
// second returns EAGAIN), and every byte arrives.
func TestOneReadPerMessage(t *testing.T) {
	for _, pause := range []time.Duration{0, 2 * time.Millisecond} {
		a, b := pair(t)
		const n, size = 200, 100
		done := make(chan error, 1)
		want := pingPong(b, n, size, done)
		m := &msgConsumer{buf: make([]byte, 4096), size: size, ack: a, pause: pause}
		var r Reader
		r.Init(rawConn(t, a), m, true)
		a.SetReadDeadline(time.Now().Add(time.Minute)) // a lost wake-up fails, not hangs
		if err := r.Run(); err != nil {
			t.Fatalf("pause %v: Run: %v", pause, err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if m.err != io.EOF || m.ackErr != nil {
			t.Fatalf("pause %v: consumer saw %v, ack %v; want io.EOF", pause, m.err, m.ackErr)
		}
		if !bytes.Equal(m.got.Bytes(), want) {
			t.Fatalf("pause %v: %d bytes arrived, differ from the %d sent", pause, m.got.Len(), len(want))
		}
		// One read per message, one for the end of stream, one that may
		// find the first message not there yet.
		if r.Reads() > n+2 {
			t.Errorf("pause %v: %d reads for %d messages; want at most %d", pause, r.Reads(), n, n+2)
		}
		t.Logf("pause %v: %d messages, %d reads, %d waits", pause, n, r.Reads(), r.Waits())
	}
}

// TestDeadlineEndsWait: a read deadline ends a Run that waits; a Run
// started with it past ends at once; clearing it lets reading go on where
// it stopped, byte for byte.
func TestDeadlineEndsWait(t *testing.T) {
	a, b := pair(t)
	m := &msgConsumer{buf: make([]byte, 64), size: 4, ack: io.Discard}
	var r Reader
	r.Init(rawConn(t, a), m, true)
	if _, err := b.Write([]byte("abcdef")); err != nil { // one message and a half
		t.Fatal(err)
	}
	a.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if err := r.Run(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Run with a deadline: %v; want a deadline error", err)
	}
	if m.msgs != 1 {
		t.Fatalf("%d messages before the deadline; want 1", m.msgs)
	}
	if err := r.Run(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Run with the deadline past: %v; want a deadline error", err)
	}
	a.SetReadDeadline(time.Time{})
	if _, err := b.Write([]byte("gh")); err != nil {
		t.Fatal(err)
	}
	b.CloseWrite()
	if err := r.Run(); err != nil || m.err != io.EOF {
		t.Fatalf("Run after the deadline was cleared: %v, consumer %v; want nil, io.EOF", err, m.err)
	}
	if got := m.got.String(); got != "abcdefgh" {
		t.Fatalf("got %q, want abcdefgh", got)
	}
}

// TestCloseEndsWait: closing the connection ends a Run that waits.
func TestCloseEndsWait(t *testing.T) {
	a, _ := pair(t)
	m := &msgConsumer{buf: make([]byte, 64), size: 4, ack: io.Discard}
	var r Reader
	r.Init(rawConn(t, a), m, true)
	ran := make(chan error, 1)
	go func() { ran <- r.Run() }()
	for r.Waits() == 0 {
		time.Sleep(time.Millisecond)
	}
	a.Close()
	if err := <-ran; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Run after Close: %v; want net.ErrClosed", err)
	}
}

// TestStopAndResume: Next returning nil ends Run with nil; the next Run
// goes on with the bytes already read.
func TestStopAndResume(t *testing.T) {
	a, b := pair(t)
	m := &msgConsumer{buf: make([]byte, 64), size: 4, ack: io.Discard, stop: 1}
	var r Reader
	r.Init(rawConn(t, a), m, true)
	b.Write([]byte("12345678"))
	b.CloseWrite()
	for m.err == nil {
		if err := r.Run(); err != nil {
			t.Fatal(err)
		}
		m.stop = m.msgs + 1
	}
	if m.err != io.EOF || m.got.String() != "12345678" {
		t.Fatalf("got %q, %v; want 12345678, io.EOF", m.got.String(), m.err)
	}
}

// splitConsumer reads records of a 4-byte length and a body: the body
// straight into its own slice (body), whatever comes behind it into the
// buffer in the same read (Next's tail), as verbs/iwarp reads a large
// payload into its registered region.
type splitConsumer struct {
	buf    []byte
	r, w   int
	body   []byte // the record body being read, nil between records
	filled int    // of body
	direct bool   // the last Next returned body
	bodies [][]byte
	tails  int // reads that brought bytes into the tail behind a body
	err    error
}

func (s *splitConsumer) Next() (p, tail []byte) {
	for {
		if s.body == nil {
			if s.w-s.r < 4 {
				break
			}
			n := int(s.buf[s.r])<<24 | int(s.buf[s.r+1])<<16 | int(s.buf[s.r+2])<<8 | int(s.buf[s.r+3])
			s.r += 4
			s.body, s.filled = make([]byte, n), 0
		}
		if s.filled == len(s.body) {
			s.bodies = append(s.bodies, s.body)
			s.body = nil
			continue
		}
		if s.r == s.w {
			s.r, s.w = 0, 0
			s.direct = true
			return s.body[s.filled:], s.buf
		}
		k := copy(s.body[s.filled:], s.buf[s.r:s.w])
		s.filled += k
		s.r += k
	}
	if s.r == s.w {
		s.r, s.w = 0, 0
	} else {
		s.w = copy(s.buf, s.buf[s.r:s.w])
		s.r = 0
	}
	s.direct = false
	return s.buf[s.w:], nil
}

func (s *splitConsumer) Got(n int, err error) bool {
	if err != nil {
		s.err = err
		return false
	}
	if s.direct {
		k := min(n, len(s.body)-s.filled)
		s.filled += k
		if n > k {
			s.tails++
		}
		s.w = n - k
		return true
	}
	s.w += n
	return true
}

// TestTail: bytes beyond what Next returned as p land in its tail in the
// same read (readv, or recvmsg with two vectors under TCP_INQ), byte for
// byte.
func TestTail(t *testing.T) {
	for _, inq := range []bool{false, true} {
		a, b := pair(t)
		var sent [][]byte
		var stream []byte
		for i := range 20 {
			body := make([]byte, 1000+i*517)
			for j := range body {
				body[j] = byte(i*13 + j)
			}
			sent = append(sent, body)
			n := len(body)
			stream = append(stream, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
			stream = append(stream, body...)
		}
		go func() {
			// Pieces that end inside bodies, with pauses: a direct
			// read into a body finds what follows it.
			for len(stream) > 0 {
				k := min(len(stream), 3000)
				b.Write(stream[:k])
				stream = stream[k:]
				time.Sleep(time.Millisecond)
			}
			b.CloseWrite()
		}()
		s := &splitConsumer{buf: make([]byte, 512)}
		r := runToEOF(t, a, s, inq, &s.err)
		if len(s.bodies) != len(sent) {
			t.Fatalf("inq %v: %d records, want %d", inq, len(s.bodies), len(sent))
		}
		for i := range sent {
			if !bytes.Equal(s.bodies[i], sent[i]) {
				t.Fatalf("inq %v: record %d differs", inq, i)
			}
		}
		if s.tails == 0 {
			t.Errorf("inq %v: no read brought bytes into the tail", inq)
		}
		t.Logf("inq %v: %d records, %d reads, %d brought a tail", inq, len(sent), r.Reads(), s.tails)
	}
}

// scatterConsumer reads a stream into consecutive pieces of sizes it
// picks (up to MaxPieces per read, Scatterer) and keeps what each read
// brought in order.
type scatterConsumer struct {
	sizes []int // of the next pieces, cycled
	at    int
	got   []byte
	cur   [][]byte // the pieces of the read in flight
	reads int
	most  int // pieces in one read
	err   error
}

func (s *scatterConsumer) Next() (p, tail []byte) { panic("Scatterer: Next not called") }

func (s *scatterConsumer) NextScatter(dst [][]byte) [][]byte {
	s.cur = s.cur[:0]
	for i := range MaxPieces {
		b := make([]byte, s.sizes[(s.at+i)%len(s.sizes)])
		s.cur = append(s.cur, b)
		dst = append(dst, b)
	}
	s.at++
	return dst
}

func (s *scatterConsumer) Got(n int, err error) bool {
	if err != nil {
		s.err = err
		return false
	}
	s.reads++
	k := 0
	for _, b := range s.cur {
		if n == 0 {
			break
		}
		m := min(n, len(b))
		s.got = append(s.got, b[:m]...)
		n -= m
		k++
	}
	s.most = max(s.most, k)
	return true
}

// TestScatter: a Scatterer's read fills its pieces in order (recvmsg or
// readv with up to MaxPieces vectors), byte for byte.
func TestScatter(t *testing.T) {
	for _, inq := range []bool{false, true} {
		a, b := pair(t)
		stream := make([]byte, 300000)
		for i := range stream {
			stream[i] = byte(i * 31 / 7)
		}
		go func() {
			b.Write(stream)
			b.CloseWrite()
		}()
		s := &scatterConsumer{sizes: []int{1, 17, 500, 3, 4096, 2}}
		runToEOF(t, a, s, inq, &s.err)
		if !bytes.Equal(s.got, stream) {
			t.Fatalf("inq %v: %d bytes read, differing from the %d sent", inq, len(s.got), len(stream))
		}
		if s.most < 3 {
			t.Fatalf("inq %v: at most %d pieces filled by one read in %d reads", inq, s.most, s.reads)
		}
	}
}

// runToEOF runs c on a until the peer's close, which c must have seen
// (*cerr, its error, io.EOF).
func runToEOF(t *testing.T, a *net.TCPConn, c Consumer, inq bool, cerr *error) *Reader {
	t.Helper()
	r := new(Reader)
	r.Init(rawConn(t, a), c, inq)
	a.SetReadDeadline(time.Now().Add(time.Minute))
	if err := r.Run(); err != nil {
		t.Fatalf("inq %v: Run: %v", inq, err)
	}
	if *cerr != io.EOF {
		t.Fatalf("inq %v: consumer saw %v, want io.EOF", inq, *cerr)
	}
	return r
}
