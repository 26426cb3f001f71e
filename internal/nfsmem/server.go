package nfsmem

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/xdr"
)

// Config configures a Server. The zero value is usable.
type Config struct {
	// MaxBytes bounds the file data held in memory (default 4 GiB);
	// writes beyond it get NFS3ERR_NOSPC.
	MaxBytes int64
	Logger   hclog.Logger
}

// Server is the memory NFSv3 + MOUNT v3 server.
type Server struct {
	fs       *fs
	instance uint64 // boot verifier: in handles, write and cookie verifiers
	log      hclog.Logger

	mu    sync.Mutex
	ls    []net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	done  bool
}

// maxRecord bounds a call: a 1 MiB WRITE (the FSINFO wtmax) plus headers,
// with room for clients that send a little more.
const maxRecord = 4 << 20

// New returns a server with an empty root directory.
func New(cfg Config) *Server {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 4 << 30
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Server{
		fs:       newFS(cfg.MaxBytes),
		instance: uint64(time.Now().UnixNano()),
		log:      cfg.Logger,
		conns:    make(map[net.Conn]struct{}),
	}
}

// Listen starts serving on addr ("127.0.0.1:0" for a free port) and
// returns the listener's address. MOUNT and NFS share the port.
func (s *Server) Listen(addr string) (net.Addr, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		l.Close()
		return nil, net.ErrClosed
	}
	s.ls = append(s.ls, l)
	s.wg.Add(1)
	s.mu.Unlock()
	go s.acceptLoop(l)
	return l.Addr(), nil
}

func (s *Server) acceptLoop(l net.Listener) {
	defer s.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.done {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// Close stops the listeners, closes every connection and waits for them.
func (s *Server) Close() error {
	s.mu.Lock()
	s.done = true
	for _, l := range s.ls {
		l.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// serveConn answers the calls of one connection in order.
func (s *Server) serveConn(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
		s.wg.Done()
	}()
	rr := tcprpc.NewRecordReader(c, &tcprpc.ReaderConfig{MaxRecord: maxRecord})
	rw := tcprpc.NewRecordWriter(c, nil)
	var in, out []byte
	for {
		var err error
		in, err = rr.ReadRecord(in)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Debug("connection ends", "peer", c.RemoteAddr(), "err", err)
			}
			return
		}
		var reply []byte
		reply, out = s.answer(in, out)
		if reply == nil {
			continue
		}
		if err := rw.WriteRecord(reply, nil, nil); err != nil {
			return
		}
	}
}

// replyHeaderLen is an accepted reply header with a null verifier.
const replyHeaderLen = 24

// answer answers one call record. It returns the reply (nil: none) and
// the buffer to reuse for the next one.
func (s *Server) answer(call, buf []byte) (reply, next []byte) {
	var h oncrpc.CallHeader
	n, err := h.Decode(call)
	if err != nil {
		if errors.Is(err, oncrpc.ErrBadRPCVersion) {
			return s.headerOnly(buf, oncrpc.RPCMismatchReply(h.XID)), buf
		}
		// Not a call we can answer (no XID, or a reply): drop it, as
		// RFC 5531 servers do with records they cannot parse.
		return nil, buf
	}
	proc, ok := s.lookupProc(&h)
	if !ok {
		return s.headerOnly(buf, s.rejectFor(&h)), buf
	}
	args := nfsproto.NewDec(call[n:])
	size := replyHeaderLen + proc.maxReply(args)
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	e := xdr.NewEncoder(buf)
	hdr := oncrpc.AcceptedReply(h.XID, oncrpc.Success)
	_ = hdr.Encode(&e)
	err = proc.run(s, nfsproto.NewDec(call[n:]), &e)
	if err == nil {
		err = e.Err()
	}
	if err != nil {
		if errors.Is(err, xdr.ErrOverflow) {
			s.log.Error("reply overflow", "prog", h.Prog, "proc", h.Proc, "err", err)
			return s.headerOnly(buf, oncrpc.SystemErrReply(h.XID)), buf
		}
		s.log.Debug("garbage arguments", "prog", h.Prog, "proc", h.Proc, "err", err)
		return s.headerOnly(buf, oncrpc.GarbageArgsReply(h.XID)), buf
	}
	return e.Bytes(), buf
}

func (s *Server) headerOnly(buf []byte, h oncrpc.ReplyHeader) []byte {
	if cap(buf) < 64 {
		buf = make([]byte, 64)
	}
	e := xdr.NewEncoder(buf[:cap(buf)])
	_ = h.Encode(&e)
	return e.Bytes()
}

// procedure is one RPC procedure: run decodes the arguments from d and
// encodes the results into e (after the reply header). A decode failure
// returned by run becomes GARBAGE_ARGS. maxReply bounds the results'
// size from the (undecoded) arguments.
type procedure struct {
	run      func(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error
	maxReply func(d *nfsproto.Dec) int
}

// smallReply is enough for every result but READ, READLINK and READDIR*.
const smallReply = 1024

func fixedReply(*nfsproto.Dec) int { return smallReply }

// lookupProc finds the procedure of a call.
func (s *Server) lookupProc(h *oncrpc.CallHeader) (procedure, bool) {
	var table []procedure
	switch {
	case h.Prog == nfsproto.ProgNFS && h.Vers == nfsproto.NFSVers3:
		table = nfs3Procs[:]
	case h.Prog == nfsproto.ProgMount && h.Vers == nfsproto.MountVers3:
		table = mountProcs[:]
	default:
		return procedure{}, false
	}
	if h.Proc >= uint32(len(table)) || table[h.Proc].run == nil {
		return procedure{}, false
	}
	return table[h.Proc], true
}

// rejectFor is the reply to a call lookupProc did not find.
func (s *Server) rejectFor(h *oncrpc.CallHeader) oncrpc.ReplyHeader {
	switch h.Prog {
	case nfsproto.ProgNFS:
		if h.Vers != nfsproto.NFSVers3 {
			return oncrpc.ProgMismatchReply(h.XID, 3, 3)
		}
	case nfsproto.ProgMount:
		if h.Vers != nfsproto.MountVers3 {
			return oncrpc.ProgMismatchReply(h.XID, 3, 3)
		}
	default:
		return oncrpc.ProgUnavailReply(h.XID)
	}
	return oncrpc.ProcUnavailReply(h.XID)
}
