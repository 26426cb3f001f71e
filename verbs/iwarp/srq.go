package iwarp

import (
	"sync"

	"github.com/rdmagw/rdmagw/verbs"
)

// recvEntry is a posted receive: the WR's ID and a copy of its SGL.
type recvEntry struct {
	id  uint64
	sgl []verbs.SGE // aliases the slot's own array
	len int
	bad bool // an SGE failed the lkey check at post time
}

// recvQueue is a fixed ring of posted receives, used as a Conn's own
// receive queue or as the body of an SRQ.
type recvQueue struct {
	mu     sync.Mutex
	ring   []recvEntry
	sges   []verbs.SGE // len(ring)*maxSGE
	maxSGE int
	head   int
	n      int
	closed bool
}

func newRecvQueue(depth, maxSGE int) *recvQueue {
	q := &recvQueue{ring: make([]recvEntry, depth), sges: make([]verbs.SGE, depth*maxSGE), maxSGE: maxSGE}
	return q
}

// post appends a chain of receives, all or nothing.
func (q *recvQueue) post(p *pd, wr *verbs.RecvWR) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return verbs.ErrClosed
	}
	k := 0
	for w := wr; w != nil; w = w.Next {
		if len(w.SGL) > q.maxSGE {
			return &sgeCountError{n: len(w.SGL), max: q.maxSGE}
		}
		k++
	}
	if q.n+k > len(q.ring) {
		return verbs.ErrQueueFull
	}
	for w := wr; w != nil; w = w.Next {
		i := (q.head + q.n) % len(q.ring)
		e := &q.ring[i]
		e.id = w.ID
		e.sgl = q.sges[i*q.maxSGE : i*q.maxSGE+len(w.SGL)]
		copy(e.sgl, w.SGL)
		e.len, e.bad = 0, false
		for j := range e.sgl {
			e.len += len(e.sgl[j].Buf)
			if !p.checkSGE(&e.sgl[j], true) {
				e.bad = true
			}
		}
		q.n++
	}
	return nil
}

// take removes the oldest receive into *out (whose sgl must have room for
// maxSGE entries). It reports false when none is posted.
func (q *recvQueue) take(out *recvEntry) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return false
	}
	e := &q.ring[q.head]
	out.id, out.len, out.bad = e.id, e.len, e.bad
	out.sgl = out.sgl[:len(e.sgl)]
	copy(out.sgl, e.sgl)
	clear(e.sgl)
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	return true
}

type srq struct {
	pd *pd
	q  *recvQueue
}

func (s *srq) PostRecv(wr *verbs.RecvWR) error { return s.q.post(s.pd, wr) }

func (s *srq) Close() error {
	s.q.mu.Lock()
	s.q.closed = true
	s.q.mu.Unlock()
	return nil
}

type sgeCountError struct{ n, max int }

func (e *sgeCountError) Error() string {
	return "iwarp: work request has " + itoa(e.n) + " SGEs, queue allows " + itoa(e.max)
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
