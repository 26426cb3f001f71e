package auxrelay

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"time"
)

// routes is what the relay remembers to send the filer's calls to the
// right client: who owns which lock (for NLM_GRANTED), which client an
// asynchronous *_MSG cookie belongs to (for the *_RES), and which clients
// have used NLM or NSM at all (for SM_NOTIFY after a filer reboot).
type routes struct {
	ttl time.Duration
	max int

	mu       sync.Mutex
	locks    map[lockKey]lockRoute
	byCaller map[string]lockRoute
	cookies  map[string]cookieRoute
	clients  map[netip.Addr]time.Time
	next     uint64
}

// lockKey identifies a lock owner on a file: the NLM owner handle and
// svid are the client's, unique per process per host.
type lockKey struct {
	fh, oh string
	svid   int32
}

type lockRoute struct {
	client     netip.Addr
	callerName string // as the client sent it
	seen       time.Time
}

type cookieRoute struct {
	client netip.Addr
	orig   []byte
	seen   time.Time
}

func newRoutes(ttl time.Duration, max int) *routes {
	return &routes{ttl: ttl, max: max, locks: map[lockKey]lockRoute{}, byCaller: map[string]lockRoute{},
		cookies: map[string]cookieRoute{}, clients: map[netip.Addr]time.Time{}}
}

func keyOf(l *nlmLockArg) lockKey { return lockKey{string(l.FH), string(l.OH), l.Svid} }

// recordLock remembers that client owns l. It reports false when the
// table is full (the call is still forwarded; a GRANTED for it will not
// be routable).
func (t *routes) recordLock(l *nlmLockArg, client netip.Addr, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := keyOf(l)
	r := lockRoute{client: client, callerName: string(l.CallerName), seen: now}
	if _, ok := t.locks[k]; !ok && len(t.locks) >= t.max {
		return false
	}
	t.locks[k] = r
	if _, ok := t.byCaller[r.callerName]; ok || len(t.byCaller) < t.max {
		t.byCaller[r.callerName] = r
	}
	return true
}

// lookupLock finds the client owning l: by owner and file, else (when
// caller_names are not rewritten) by caller_name.
func (t *routes) lookupLock(l *nlmLockArg, byName bool) (lockRoute, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.locks[keyOf(l)]; ok {
		return r, true
	}
	if byName {
		r, ok := t.byCaller[string(l.CallerName)]
		return r, ok
	}
	return lockRoute{}, false
}

// newCookie records orig (a client's *_MSG cookie) and returns the
// relay-unique cookie to send to the filer instead: clients number their
// cookies alike (Linux from the same counter start), the filer echoes
// them in *_RES, and only the relay's own cookie says whose result it is.
func (t *routes) newCookie(orig []byte, client netip.Addr, now time.Time) ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.cookies) >= t.max {
		return nil, false
	}
	t.next++
	c := binary.BigEndian.AppendUint64([]byte("gw"), t.next)
	t.cookies[string(c)] = cookieRoute{client: client, orig: append([]byte(nil), orig...), seen: now}
	return c, true
}

// takeCookie returns and forgets the route of a relay cookie.
func (t *routes) takeCookie(c []byte) (cookieRoute, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.cookies[string(c)]
	delete(t.cookies, string(c))
	return r, ok
}

// seenClient notes a client that uses NLM or NSM through the relay.
func (t *routes) seenClient(ip netip.Addr, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.clients[ip]; ok || len(t.clients) < t.max {
		t.clients[ip] = now
	}
}

// knownClients lists the clients to notify when the filer reboots.
func (t *routes) knownClients() []netip.Addr {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]netip.Addr, 0, len(t.clients))
	for ip := range t.clients {
		out = append(out, ip)
	}
	return out
}

// expire forgets everything not used for ttl.
func (t *routes) expire(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, r := range t.locks {
		if now.Sub(r.seen) > t.ttl {
			delete(t.locks, k)
		}
	}
	for k, r := range t.byCaller {
		if now.Sub(r.seen) > t.ttl {
			delete(t.byCaller, k)
		}
	}
	for k, r := range t.cookies {
		if now.Sub(r.seen) > t.ttl {
			delete(t.cookies, k)
		}
	}
	for k, seen := range t.clients {
		if now.Sub(seen) > t.ttl {
			delete(t.clients, k)
		}
	}
}
