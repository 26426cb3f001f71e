package tcprelay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// The epoll relay (ModeEpoll). Every worker owns the connections it
// accepted: both sockets of a connection are in its epoll instance and
// only its thread touches them, so nothing is locked or handed off. The
// listening socket is in every worker's epoll (EPOLLEXCLUSIVE: one
// wakes per connection); an eventfd, also in every epoll, stops them.

// half is one socket of a relayed connection and the direction that
// reads from it.
type half struct {
	fd   int
	peer *half
	buf  []byte
	// pend is what was read from fd and the peer has not taken yet;
	// while it is set, fd is not read and the peer waits for EPOLLOUT.
	pend []byte
	// blocked: the epoll interest registered is the pending one
	// (no EPOLLIN on fd, EPOLLOUT on the peer).
	blocked bool
}

// worker is one epoll thread.
type worker struct {
	epfd, lfd, stopfd int
	backend           unix.Sockaddr
	fds               []*half // by descriptor number
	events            [128]unix.EpollEvent
}

func startEpoll(ctx context.Context, cfg Config) (*Relay, error) {
	la, err := sockaddr(cfg.Listen)
	if err != nil {
		return nil, err
	}
	ba, err := sockaddr(cfg.Backend)
	if err != nil {
		return nil, err
	}
	lfd, err := listenFD(la)
	if err != nil {
		return nil, fmt.Errorf("tcprelay: listen %s: %w", cfg.Listen, err)
	}
	bound, err := unix.Getsockname(lfd)
	if err != nil {
		unix.Close(lfd)
		return nil, fmt.Errorf("tcprelay: listen %s: %w", cfg.Listen, err)
	}
	stopfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(lfd)
		return nil, fmt.Errorf("tcprelay: eventfd: %w", err)
	}
	ws, err := newWorkers(workerCount(cfg), lfd, stopfd, ba)
	if err != nil {
		unix.Close(lfd)
		unix.Close(stopfd)
		return nil, err
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(ws))
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- w.run()
		}()
	}
	var once sync.Once
	stop := func() error {
		once.Do(func() { unix.Write(stopfd, []byte{1, 0, 0, 0, 0, 0, 0, 0}) })
		return nil
	}
	r := &Relay{addr: netAddr(bound), close: stop, done: make(chan error, 1)}
	unregister := context.AfterFunc(ctx, func() { stop() })
	go func() {
		defer unregister()
		wg.Wait()
		close(errs)
		unix.Close(lfd)
		unix.Close(stopfd)
		r.done <- firstError(errs)
	}()
	return r, nil
}

// newWorkers makes n workers, each with its epoll instance.
func newWorkers(n, lfd, stopfd int, backend unix.Sockaddr) ([]*worker, error) {
	ws := make([]*worker, n)
	for i := range ws {
		ws[i] = &worker{lfd: lfd, stopfd: stopfd, backend: backend}
		if err := ws[i].init(); err != nil {
			for _, w := range ws[:i] {
				unix.Close(w.epfd)
			}
			return nil, err
		}
	}
	return ws, nil
}

// firstError is the first error of the workers' that is not their
// being stopped.
func firstError(errs <-chan error) error {
	var first error
	for err := range errs {
		if err != nil && !errors.Is(err, errClosed) && first == nil {
			first = err
		}
	}
	return first
}

func (w *worker) init() error {
	var err error
	if w.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return fmt.Errorf("tcprelay: epoll_create1: %w", err)
	}
	if err := w.ctl(unix.EPOLL_CTL_ADD, w.lfd, unix.EPOLLIN|unix.EPOLLEXCLUSIVE); err != nil {
		unix.Close(w.epfd)
		return err
	}
	if err := w.ctl(unix.EPOLL_CTL_ADD, w.stopfd, unix.EPOLLIN); err != nil {
		unix.Close(w.epfd)
		return err
	}
	return nil
}

func (w *worker) ctl(op, fd int, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
	if err := unix.EpollCtl(w.epfd, op, fd, &ev); err != nil {
		return fmt.Errorf("tcprelay: epoll_ctl fd %d: %w", fd, err)
	}
	return nil
}

// run waits and handles events on this thread until stopped, then
// closes every connection it owns.
func (w *worker) run() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer w.closeAll()
	for {
		n, err := unix.EpollWait(w.epfd, w.events[:], -1)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return fmt.Errorf("tcprelay: epoll_wait: %w", err)
		}
		for i := range n {
			ev := w.events[i]
			switch fd := int(ev.Fd); fd {
			case w.stopfd:
				return errClosed
			case w.lfd:
				w.accept()
			default:
				w.handle(fd, ev.Events)
			}
		}
	}
}

// handle runs one socket's event to completion.
func (w *worker) handle(fd int, events uint32) {
	if fd >= len(w.fds) || w.fds[fd] == nil {
		return // closed earlier in this round
	}
	h := w.fds[fd]
	if events&unix.EPOLLOUT != 0 && h.peer.pend != nil {
		if !w.flush(h.peer) {
			return
		}
	}
	switch {
	case events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR) == 0:
	case h.pend == nil:
		w.read(h)
	case events&(unix.EPOLLHUP|unix.EPOLLERR) != 0:
		w.closePair(h) // gone while its data waited on the peer
	}
}

// read reads what h's socket has and sends it to the peer.
func (w *worker) read(h *half) {
	n, err := unix.Read(h.fd, h.buf)
	if err == unix.EAGAIN || err == unix.EINTR {
		return
	}
	if err != nil || n == 0 {
		w.closePair(h)
		return
	}
	h.pend = h.buf[:n]
	w.flush(h)
}

// flush sends h.pend to the peer; what the peer does not take waits for
// its EPOLLOUT, with h's reading off. It reports whether the pair is
// still open.
func (w *worker) flush(h *half) bool {
	for len(h.pend) > 0 {
		m, err := unix.Write(h.peer.fd, h.pend)
		if err == unix.EAGAIN {
			break
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			w.closePair(h)
			return false
		}
		h.pend = h.pend[m:]
	}
	blocked := len(h.pend) > 0
	if !blocked {
		h.pend = nil
	}
	// Only a change of state touches epoll: in the common case (all
	// sent, nothing pending before) there is no epoll_ctl.
	if blocked != h.blocked {
		h.blocked = blocked
		w.ctl(unix.EPOLL_CTL_MOD, h.fd, mask(h))
		w.ctl(unix.EPOLL_CTL_MOD, h.peer.fd, mask(h.peer))
	}
	return true
}

// mask is the epoll interest of h's socket: readable unless what was
// read from it waits on the peer, writable while the peer's data waits
// on it.
func mask(h *half) uint32 {
	var m uint32
	if h.pend == nil {
		m |= unix.EPOLLIN
	}
	if h.peer.pend != nil {
		m |= unix.EPOLLOUT
	}
	return m
}

// accept takes every pending connection, connects it to the backend and
// adds both sockets to this worker's epoll.
func (w *worker) accept() {
	for {
		cfd, _, err := unix.Accept4(w.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			return // EAGAIN: another worker took it, or none is left
		}
		bfd, err := dialFD(w.backend)
		if err != nil {
			unix.Close(cfd)
			continue
		}
		unix.SetsockoptInt(cfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		c := &half{fd: cfd, buf: make([]byte, bufSize)}
		b := &half{fd: bfd, buf: make([]byte, bufSize), peer: c}
		c.peer = b
		w.put(c)
		w.put(b)
		if w.ctl(unix.EPOLL_CTL_ADD, cfd, unix.EPOLLIN) != nil || w.ctl(unix.EPOLL_CTL_ADD, bfd, unix.EPOLLIN) != nil {
			w.closePair(c)
		}
	}
}

func (w *worker) put(h *half) {
	for h.fd >= len(w.fds) {
		w.fds = append(w.fds, nil)
	}
	w.fds[h.fd] = h
}

// closePair closes both sockets of h's connection (close removes them
// from the epoll).
func (w *worker) closePair(h *half) {
	for _, x := range []*half{h, h.peer} {
		if w.fds[x.fd] == x {
			w.fds[x.fd] = nil
			unix.Close(x.fd)
		}
	}
}

// closeAll closes every connection the worker owns, and its epoll.
func (w *worker) closeAll() {
	for _, h := range w.fds {
		if h != nil {
			w.closePair(h)
		}
	}
	unix.Close(w.epfd)
}

// sockaddr resolves host:port (IPv4 or IPv6).
func sockaddr(hostport string) (unix.Sockaddr, error) {
	a, err := net.ResolveTCPAddr("tcp", hostport)
	if err != nil {
		return nil, fmt.Errorf("tcprelay: %w", err)
	}
	if ip4 := a.IP.To4(); ip4 != nil || a.IP == nil {
		sa := &unix.SockaddrInet4{Port: a.Port}
		copy(sa.Addr[:], ip4)
		return sa, nil
	}
	sa := &unix.SockaddrInet6{Port: a.Port}
	copy(sa.Addr[:], a.IP.To16())
	return sa, nil
}

func family(sa unix.Sockaddr) int {
	if _, ok := sa.(*unix.SockaddrInet6); ok {
		return unix.AF_INET6
	}
	return unix.AF_INET
}

func netAddr(sa unix.Sockaddr) net.Addr {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
	case *unix.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
	}
	return nil
}

// listenFD is a non-blocking listening socket, outside Go's netpoller.
func listenFD(sa unix.Sockaddr) (int, error) {
	fd, err := unix.Socket(family(sa), unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Listen(fd, 1024); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// dialFD connects to sa (blocking: a diagnostic relay's connect on
// loopback), then makes the socket non-blocking.
func dialFD(sa unix.Sockaddr) (int, error) {
	fd, err := unix.Socket(family(sa), unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Connect(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}
