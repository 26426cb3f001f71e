package reverse_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/gateway/reverse"
	"github.com/rdmagw/rdmagw/gateway/reverse/reversetest"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/verbs"
)

// A scriptable RPC-over-RDMA responder on raw verbs (pure-Go iWARP), for
// the reverse gateway's paths a real server cannot be made to take on
// demand: ERR_CHUNK, a server that stops answering but keeps its
// connection, one that refuses connections, replies held back to build
// up calls in flight. It speaks the protocol with rdmarpc's exported
// codec: it pulls Read chunks (and Long calls) with RDMA Read, answers
// inline when the reply fits 4 KiB, else through the offered Reply chunk
// with RDMA Write, else with ERR_CHUNK, as RFC 8166 §3.5.4 wants.

// fakeCall is one call as the server received it.
type fakeCall struct {
	conn             int    // which connection (1, 2, ...) it came on
	xid              uint32 // the RPC XID
	prog, vers, proc uint32
	rpc              []byte // the whole RPC call, chunk data spliced in
	replyRoom        uint64 // the offered Reply chunk's length (0: none)
	hasReply         bool
	readChunks       int // Read chunks at a non-zero Position
	writeChunks      int // Write chunks offered
}

// fakeAction is the handler's decision about a call.
type fakeAction int

const (
	fakeAnswer   fakeAction = iota // reply with the handler's bytes
	fakeErrChunk                   // answer RDMA_ERROR / ERR_CHUNK
	fakeHold                       // keep until fakeServer.release
	fakeIgnore                     // never answer (a hung server)
)

type fakeHandler func(c *fakeCall) (fakeAction, []byte)

type fakeServer struct {
	t   testing.TB
	dev verbs.Device
	ln  verbs.Listener

	grant   uint32 // credits granted in every reply
	nrecv   int    // receives posted per connection
	handler atomic.Pointer[fakeHandler]
	refuse  atomic.Bool // reject new connection requests
	batch   time.Duration

	mu        sync.Mutex
	calls     []fakeCall
	conns     int
	attempts  []time.Time // every connection request, accepted or not
	inflight  int         // non-NULL calls received and not answered
	maxInfl   int
	allInfl   int // every call, pings included
	maxAll    int
	tooBig    int // replies that fitted neither inline nor the Reply chunk
	errVers   int // ERR_VERS answers (to version-two messages)
	live      map[int]*fakeConn
	releaseCh []chan struct{}
}

// rpcAccepted is an accepted, successful RPC reply header for xid with an
// AUTH_NONE verifier, followed by body.
func rpcAccepted(xid uint32, body []byte) []byte {
	return append(gwtest.BE32(nil, xid, 1, 0, 0, 0, 0), body...)
}

// defaultFakeHandler answers every call with SUCCESS and no results.
func defaultFakeHandler(c *fakeCall) (fakeAction, []byte) { return fakeAnswer, rpcAccepted(c.xid, nil) }

func startFakeServer(t testing.TB, grant uint32, h fakeHandler) *fakeServer {
	t.Helper()
	s := &fakeServer{t: t, grant: grant, nrecv: 160, live: map[int]*fakeConn{}}
	if h == nil {
		h = defaultFakeHandler
	}
	s.setHandler(h)
	s.dev, s.ln = startRDMAServer(t, func(req verbs.ConnRequest) func(context.Context) {
		s.mu.Lock()
		s.attempts = append(s.attempts, time.Now())
		s.mu.Unlock()
		if s.refuse.Load() {
			req.Reject(nil)
			return nil
		}
		return func(ctx context.Context) { s.serve(ctx, req) }
	})
	return s
}

func (s *fakeServer) setHandler(h fakeHandler) { s.handler.Store(&h) }

func (s *fakeServer) addr() string { return s.ln.Addr().String() }

// release answers every held call.
func (s *fakeServer) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.releaseCh {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// seen returns a copy of the calls received so far.
func (s *fakeServer) seen() []fakeCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *fakeServer) stats() (inflight, maxData, maxAll, conns int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight, s.maxInfl, s.maxAll, s.conns
}

// closeConns breaks every live connection (as a crashed server would).
func (s *fakeServer) closeConns() {
	s.mu.Lock()
	var cs []*fakeConn
	for _, c := range s.live {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.qp.Disconnect()
	}
}

type fakeConn struct {
	s    *fakeServer
	id   int
	qp   verbs.Conn
	mr   verbs.MR
	mem  []byte
	scq  verbs.CQ
	send []byte // the Send buffer
	data []byte // RDMA Read target and RDMA Write source
	wcs  [1]verbs.WC
}

const (
	fakeRecvSize = 4096
	fakeDataSize = 2 << 20
)

type fakeMsg struct {
	b []byte
}

type fakeHeld struct {
	call fakeCall
	hdr  *rdmarpc.Header
	data []byte
	all  bool
}

func (s *fakeServer) serve(ctx context.Context, req verbs.ConnRequest) {
	pc, err := acceptPeer(s.dev, req, peerOptions{nrecv: s.nrecv, recvSize: fakeRecvSize, extra: fakeRecvSize + fakeDataSize, splitCQ: true, depth: 16})
	if err != nil {
		return
	}
	defer pc.close()
	qp, rcq, scq, mr, mem, recvs := pc.conn, pc.rcq, pc.scq, pc.mr, pc.mem, pc.recvs
	off := s.nrecv * fakeRecvSize
	c := &fakeConn{s: s, qp: qp, mr: mr, mem: mem, scq: scq, send: mem[off : off+fakeRecvSize], data: mem[off+fakeRecvSize:]}
	rel := make(chan struct{}, 1)
	s.mu.Lock()
	s.conns++
	c.id = s.conns
	s.live[c.id] = c
	s.releaseCh = append(s.releaseCh, rel)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.live, c.id)
		s.mu.Unlock()
	}()

	// The receive side: copy each message out and give the buffer back.
	msgs := make(chan fakeMsg, s.nrecv)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer close(msgs)
		var wcs [16]verbs.WC
		for {
			n := rcq.Poll(wcs[:])
			for _, wc := range wcs[:n] {
				if wc.Status != verbs.StatusSuccess {
					return
				}
				i := int(wc.ID)
				b := slices.Clone(mem[i*fakeRecvSize : i*fakeRecvSize+wc.ByteLen])
				recvs[i].Next = nil
				if qp.PostRecv(&recvs[i]) != nil {
					return
				}
				msgs <- fakeMsg{b: b}
			}
			if n == 0 && rcq.Wait(cctx) != nil {
				return
			}
		}
	}()

	var held []fakeHeld
	var idle <-chan time.Time
	flush := func() bool {
		for _, h := range held {
			if !c.answer(&h.call, h.hdr, fakeAnswer, h.data, h.all) {
				return false
			}
		}
		held = held[:0]
		return true
	}
	for {
		if s.batch > 0 && len(held) > 0 && idle == nil {
			idle = time.After(s.batch)
		}
		select {
		case m, ok := <-msgs:
			if !ok {
				return
			}
			h := new(rdmarpc.Header)
			hlen, err := h.Decode(m.b, rdmarpc.DefaultLimits())
			if len(m.b) >= 8 && binary.BigEndian.Uint32(m.b[4:]) != rdmarpc.Version {
				// A version-one server, as Linux knfsd: ERR_VERS 1..1
				// to the gateway's version-two transport properties
				// (backend.rdma_version auto falls back).
				if !c.errVers(m.b) {
					return
				}
				continue
			}
			if err != nil {
				s.t.Errorf("fake server: bad call header: %v", err)
				return
			}
			call, ok := c.pull(h, m.b[hlen:])
			if !ok {
				return
			}
			all := call.prog == 100003 && call.proc == 0
			s.mu.Lock()
			s.calls = append(s.calls, call)
			s.allInfl++
			s.maxAll = max(s.maxAll, s.allInfl)
			if !all {
				s.inflight++
				s.maxInfl = max(s.maxInfl, s.inflight)
			}
			s.mu.Unlock()
			act, reply := (*s.handler.Load())(&call)
			switch act {
			case fakeHold:
				held = append(held, fakeHeld{call: call, hdr: h, data: reply, all: all})
				if s.batch > 0 {
					idle = time.After(s.batch)
				}
			case fakeIgnore:
			default:
				if !c.answer(&call, h, act, reply, all) {
					return
				}
			}
		case <-rel:
			if !flush() {
				return
			}
		case <-idle:
			idle = nil
			if !flush() {
				return
			}
		case <-qp.Done():
			return
		case <-ctx.Done():
			return
		}
	}
}

// wait waits for the completion of the one work request in flight.
func (c *fakeConn) wait() bool {
	for {
		if c.scq.Poll(c.wcs[:]) == 1 {
			return c.wcs[0].Status == verbs.StatusSuccess
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.scq.Wait(ctx)
		cancel()
		if err != nil {
			return false
		}
	}
}

func (c *fakeConn) post(wr *verbs.SendWR) bool {
	wr.Signal = true
	return c.qp.PostSend(wr) == nil && c.wait()
}

// pull builds the whole RPC call: the inline part (or the Position-Zero
// chunk of a Long call) with every other Read chunk's data spliced in at
// its position, the XDR round-up supplied.
func (c *fakeConn) pull(h *rdmarpc.Header, inline []byte) (fakeCall, bool) {
	var rest []byte
	data := c.data
	read := func(ch rdmarpc.ReadChunk) ([]byte, bool) {
		n := 0
		for _, seg := range ch.Segments {
			if n+int(seg.Length) > len(data) {
				c.s.t.Errorf("fake server: Read chunk larger than %d bytes", len(data))
				return nil, false
			}
			if seg.Length > 0 && !c.post(&verbs.SendWR{Op: verbs.OpRDMARead, SGL: []verbs.SGE{{Buf: data[n : n+int(seg.Length)], LKey: c.mr.LKey()}},
				RemoteAddr: seg.Offset, RKey: seg.Handle}) {
				return nil, false
			}
			n += int(seg.Length)
		}
		b := slices.Clone(data[:n])
		return b, true
	}
	chunks := []rdmarpc.ReadChunk{}
	for ch := range h.Reads.Chunks() {
		chunks = append(chunks, ch)
	}
	if h.Proc == rdmarpc.ProcNoMsg {
		if len(chunks) == 0 || chunks[0].Position != 0 {
			c.s.t.Errorf("fake server: RDMA_NOMSG call without a Position-Zero chunk")
			return fakeCall{}, false
		}
		var ok bool
		if inline, ok = read(chunks[0]); !ok {
			return fakeCall{}, false
		}
		chunks = chunks[1:]
	}
	nread := len(chunks)
	for _, ch := range chunks {
		b, ok := read(ch)
		if !ok {
			return fakeCall{}, false
		}
		need := int(ch.Position) - len(rest)
		if need < 0 || need > len(inline) {
			c.s.t.Errorf("fake server: Read chunk position %d out of the call", ch.Position)
			return fakeCall{}, false
		}
		rest = append(rest, inline[:need]...)
		inline = inline[need:]
		rest = append(rest, b...)
		rest = append(rest, make([]byte, -len(b)&3)...)
	}
	rpc := append(rest, inline...)
	if len(rpc) < 24 {
		c.s.t.Errorf("fake server: call of %d bytes", len(rpc))
		return fakeCall{}, false
	}
	u := func(i int) uint32 { return binary.BigEndian.Uint32(rpc[4*i:]) }
	return fakeCall{conn: c.id, xid: u(0), prog: u(3), vers: u(4), proc: u(5), rpc: rpc,
		replyRoom: h.Reply.Len(), hasReply: h.HasReply, readChunks: nread, writeChunks: len(h.Writes)}, true
}

// errVers answers a message of another version with ERR_VERS 1..1,
// echoing its XID and version as Linux svc_rdma does.
func (c *fakeConn) errVers(msg []byte) bool {
	s := c.s
	s.mu.Lock()
	s.errVers++
	s.mu.Unlock()
	n, err := rdmarpc.EncodeErrVers(c.send, binary.BigEndian.Uint32(msg), binary.BigEndian.Uint32(msg[4:]), s.grant, rdmarpc.Version, rdmarpc.Version)
	if err != nil {
		s.t.Errorf("fake server: encode ERR_VERS: %v", err)
		return false
	}
	return c.post(&verbs.SendWR{Op: verbs.OpSend, SGL: []verbs.SGE{{Buf: c.send[:n], LKey: c.mr.LKey()}}})
}

// answer sends the reply (or ERR_CHUNK) for call.
func (c *fakeConn) answer(call *fakeCall, h *rdmarpc.Header, act fakeAction, reply []byte, all bool) bool {
	s := c.s
	var out rdmarpc.Header
	out.Init(call.xid, s.grant, rdmarpc.ProcMsg)
	inline := reply
	if act == fakeAnswer && rdmarpc.MinHeaderSize+len(reply) > fakeRecvSize {
		// Through the Reply chunk, if it has room.
		inline = nil
		if !h.HasReply || h.Reply.Len() < uint64(len(reply)) || len(reply) > len(c.data) {
			s.mu.Lock()
			s.tooBig++
			s.mu.Unlock()
			act = fakeErrChunk
		} else {
			copy(c.data, reply)
			left := reply
			var used []rdmarpc.Segment
			src := c.data
			for _, seg := range h.Reply {
				n := min(len(left), int(seg.Length))
				if n == 0 {
					break
				}
				if !c.post(&verbs.SendWR{Op: verbs.OpRDMAWrite, SGL: []verbs.SGE{{Buf: src[:n], LKey: c.mr.LKey()}},
					RemoteAddr: seg.Offset, RKey: seg.Handle}) {
					return false
				}
				used = append(used, rdmarpc.Segment{Handle: seg.Handle, Length: uint32(n), Offset: seg.Offset})
				left, src = left[n:], src[n:]
			}
			out.Proc = rdmarpc.ProcNoMsg
			out.SetReplyChunk(used...)
		}
	}
	// Answered: the call no longer holds a credit at the server.
	s.mu.Lock()
	s.allInfl--
	if !all {
		s.inflight--
	}
	s.mu.Unlock()
	var n int
	var err error
	if act == fakeErrChunk {
		n, err = rdmarpc.EncodeErrChunk(c.send, call.xid, rdmarpc.Version, s.grant)
	} else {
		n, err = out.Encode(c.send)
		if err == nil {
			n += copy(c.send[n:], inline)
		}
	}
	if err != nil {
		s.t.Errorf("fake server: encode reply: %v", err)
		return false
	}
	return c.post(&verbs.SendWR{Op: verbs.OpSend, SGL: []verbs.SGE{{Buf: c.send[:n], LKey: c.mr.LKey()}}})
}

// scriptedV1Peer is startReverse's edit for the scripted peers
// (rdmapeer_test.go) that speak version one and close the connection on
// anything else instead of answering ERR_VERS: the gateway speaks
// version one to them from the first message.
func scriptedV1Peer(c *gateway.Config) { c.Backend.RDMAVersion = "1" }

// startReverseLogged is startReverse with the gateway's JSON log (at
// debug) also kept in a buffer, for logged.
func startReverseLogged(t testing.TB, backend string, edit func(*gateway.Config)) (*reverse.Gateway, *gwtest.SyncBuffer) {
	t.Helper()
	buf := &gwtest.SyncBuffer{}
	r := reversetest.StartWith(t, backend, func(c *gateway.Config) {
		c.Log.Level, c.Log.Format = "debug", "json"
		c.Pool.MaxBytes = 64 << 20
		if edit != nil {
			edit(c)
		}
	}, io.MultiWriter(gwtest.TestLog(t), buf))
	return r, buf
}

// rawClient speaks ONC RPC over TCP to the gateway with calls built by
// the test, so that it can pipeline, retransmit and stall at will.
type rawClient struct {
	t    testing.TB
	conn *net.TCPConn
	wmu  sync.Mutex
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, conn: c.(*net.TCPConn)}
}

// send writes rpc as one record (one fragment).
func (c *rawClient) send(rpc []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	rec := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(rpc)), 1<<31|uint32(len(rpc)))
	_, err := c.conn.Write(append(rec, rpc...))
	return err
}

// recv reads one reply record.
func (c *rawClient) recv(d time.Duration) ([]byte, error) {
	c.conn.SetReadDeadline(time.Now().Add(d))
	var out []byte
	for {
		var m [4]byte
		if _, err := io.ReadFull(c.conn, m[:]); err != nil {
			return nil, err
		}
		w := binary.BigEndian.Uint32(m[:])
		frag := make([]byte, w&^(1<<31))
		if _, err := io.ReadFull(c.conn, frag); err != nil {
			return nil, err
		}
		out = append(out, frag...)
		if w&(1<<31) != 0 {
			return out, nil
		}
	}
}

// rpcCall is an RPC call header with AUTH_NONE, then args.
func rpcCall(xid, prog, vers, proc uint32, args []byte) []byte {
	return append(gwtest.BE32(nil, xid, 0, 2, prog, vers, proc, 0, 0, 0, 0), args...)
}

// xdrOpaque appends a variable-length opaque.
func xdrOpaque(b, v []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	b = append(b, v...)
	return append(b, make([]byte, -len(v)&3)...)
}

// startReverse runs a reverse gateway on a free loopback port in front of
// the RPC-over-RDMA server at backend, logging warnings to the test.
func startReverse(t testing.TB, backend string, edit func(*gateway.Config)) *reverse.Gateway {
	t.Helper()
	return reversetest.StartWith(t, backend, func(c *gateway.Config) {
		c.Log.Level = "warn"
		if edit != nil {
			edit(c)
		}
	}, gwtest.TestLog(t))
}
