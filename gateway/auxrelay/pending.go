package auxrelay

import (
	"math/rand/v2"
	"sync"
	"time"
)

// replySink is where a relayed reply goes: the connection or UDP peer
// the call came from.
type replySink interface {
	sendReply(msg []byte) error
	// id names the peer (transport and address) for retransmission
	// matching and logs.
	id() string
}

// pendingCall is a call forwarded and awaiting its reply.
type pendingCall struct {
	sink       replySink
	origXID    uint32
	prog, vers uint32
	proc       uint32
	direction  string
	dest       string
	started    time.Time
}

type originXID struct {
	sink string
	xid  uint32
}

// pendingTable maps relay XIDs to the calls they stand for. Every call
// forwarded gets a fresh XID from one counter, so XIDs never collide
// across clients sharing a connection to the filer, and the XID alone
// finds the caller whichever connection or socket the reply comes back on.
type pendingTable struct {
	mu       sync.Mutex
	next     uint32
	byXID    map[uint32]*pendingCall
	byOrigin map[originXID]uint32
}

func newPendingTable() *pendingTable {
	return &pendingTable{
		next:     rand.Uint32(), // unlike a restarted relay's, so a filer's DRC does not confuse them
		byXID:    map[uint32]*pendingCall{},
		byOrigin: map[originXID]uint32{},
	}
}

// add records pc and returns its relay XID. A call the same peer already
// sent with the same XID and still pending (a retransmission) keeps its
// relay XID, so the filer's duplicate request cache recognises it.
func (t *pendingTable) add(pc *pendingCall) (xid uint32, retransmit bool) {
	k := originXID{pc.sink.id(), pc.origXID}
	t.mu.Lock()
	defer t.mu.Unlock()
	if x, ok := t.byOrigin[k]; ok {
		if old := t.byXID[x]; old != nil {
			old.sink = pc.sink // a reconnected TCP client gets the reply
			return x, true
		}
	}
	for {
		t.next++
		if _, used := t.byXID[t.next]; !used {
			break
		}
	}
	t.byXID[t.next] = pc
	t.byOrigin[k] = t.next
	return t.next, false
}

// take removes and returns the call with relay XID xid, or nil.
func (t *pendingTable) take(xid uint32) *pendingCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	pc := t.byXID[xid]
	if pc != nil {
		delete(t.byXID, xid)
		delete(t.byOrigin, originXID{pc.sink.id(), pc.origXID})
	}
	return pc
}

// expire removes and returns the calls started before deadline.
func (t *pendingTable) expire(deadline time.Time) []*pendingCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*pendingCall
	for x, pc := range t.byXID {
		if pc.started.Before(deadline) {
			delete(t.byXID, x)
			delete(t.byOrigin, originXID{pc.sink.id(), pc.origXID})
			out = append(out, pc)
		}
	}
	return out
}

func (t *pendingTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byXID)
}
