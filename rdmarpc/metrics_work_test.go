package rdmarpc

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// workCount records what the responder reports of each reply: the RDMA
// Reads and Writes by path (WorkMetrics), the Send bytes (ReplySent) and
// the Sends of continued replies (ResponderV2Metrics).
type workCount struct {
	*countMetrics
	mu        sync.Mutex
	posted    [WorkPaths]int
	sendBytes int
	sends     int
	replies   int
}

func (m *workCount) Posted(p WorkPath, n int) {
	if n <= 0 {
		panic(fmt.Sprintf("Posted(%v, %d)", p, n))
	}
	m.mu.Lock()
	m.posted[p] += n
	m.mu.Unlock()
}

func (m *workCount) ReplySent(k ReplyKind, inline, written int) {
	m.mu.Lock()
	m.sendBytes += inline
	m.sends++
	m.replies++
	m.mu.Unlock()
	m.countMetrics.ReplySent(k, inline, written)
}

func (m *workCount) V2ErrorSent(c V2ErrCode) { m.add("v2_error_" + c.String()) }
func (m *workCount) V2GrantSent()            { m.add("v2_grant") }
func (m *workCount) V2Discarded()            { m.add("v2_discarded") }
func (m *workCount) V2Continued(received bool, sends int) {
	if !received {
		m.mu.Lock()
		m.sends += sends - 1
		m.mu.Unlock()
	}
}

// sent is the replies reported since the last take.
func (m *workCount) sent() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.replies
}

// take returns what was counted since the last take and starts again.
func (m *workCount) take() (posted [WorkPaths]int, sends, sendBytes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	posted, sends, sendBytes = m.posted, m.sends, m.sendBytes
	m.posted, m.sends, m.sendBytes, m.replies = [WorkPaths]int{}, 0, 0, 0
	return
}

// The responder reports each RPC's RDMA Reads and Writes by path, and
// the requester the registrations that exposed the chunks, in both
// versions: a WRITE's Read chunk, a READ's Write chunk, a Long call with
// its reply in the Reply chunk; and in version two a reply sent by
// continuation (no chunk, no registration) counts all its Sends and all
// their bytes.
func TestResponderWorkMetrics(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v2=%v", v2), func(t *testing.T) {
			met := &workCount{countMetrics: newCountMetrics()}
			qmet := &workCount{countMetrics: newCountMetrics()}
			mode := VersionV1
			if v2 {
				mode = VersionV2
			}
			p := newEnginePair(t, pairOpts{rcfg: ResponderConfig{V2: v2, Metrics: met},
				qcfg: RequesterConfig{Version: mode, VersionMemory: new(VersionMemory), Metrics: qmet}})
			met.take()
			qmet.take()
			// want: the responder's Reads and Writes, the requester's
			// registrations (WorkRegistration).
			check := func(what string, want [WorkPaths]int, wantSends int) {
				t.Helper()
				// The reply is reported after it is posted: the requester
				// may have it first.
				waitFor(t, 5*time.Second, what+" reported", func() bool { return met.sent() >= 1 })
				got, sends, _ := met.take()
				q, _, _ := qmet.take()
				got[WorkRegistration] = q[WorkRegistration]
				if got != want || sends != wantSends {
					t.Errorf("%s: posted %v in %d Sends, want %v in %d", what, got, sends, want, wantSends)
				}
			}

			r, err := p.call(readCallMsg(1, 70000), &ReplyPlan{WriteChunks: []int{70000}})
			if err != nil {
				t.Fatal(err)
			}
			checkRead(t, r, 1, 70000, true)
			r.Release()
			check("READ 70000 into a Write chunk", [WorkPaths]int{WorkWriteChunk: 1, WorkRegistration: 1}, 1)

			msg := writeCallMsg(t, nil, 2, 1<<20+3)
			if r, err = p.call(msg, nil); err != nil {
				t.Fatal(err)
			}
			r.Release()
			// Version two: the requester cuts chunks into segments of
			// at most the responder's Max Segment Size (1 MiB).
			reads := 1
			if v2 {
				reads = 2
			}
			check("WRITE 1 MiB+3 from a Read chunk", [WorkPaths]int{WorkReadChunk: reads, WorkRegistration: 1}, 1)

			echo := &Message{XID: 3}
			echo.Append(Piece{Data: append(put32s(3, opEcho), patterned(20000, 3)...)})
			if r, err = p.call(echo, &ReplyPlan{ReplyChunk: echo.Len() + 64}); err != nil {
				t.Fatal(err)
			}
			if r.Kind != ReplyReplyChunk {
				t.Errorf("ECHO 20008: reply kind %v", r.Kind)
			}
			r.Release()
			// Version two: the call goes as CALL_EXTERNAL (continuation
			// would take more than 4 Sends), its Call chunk pulled as
			// the Position-Zero chunk.
			check("ECHO 20008, Long call, Reply chunk", [WorkPaths]int{WorkLongCall: 1, WorkReplyChunk: 1, WorkRegistration: 2}, 1)
			if !v2 {
				return
			}
			const n = 70000
			if r, err = p.call(&Message{XID: 4, Pieces: []Piece{{Data: put32s(4, opBig, n)}}}, nil); err != nil {
				t.Fatal(err)
			}
			r.Release()
			frags := (n + 8 + 4095) / (4096 - V2MiddleHeaderSize)
			waitFor(t, 5*time.Second, "BIG reported", func() bool { return met.sent() >= 1 })
			got, sends, sendBytes := met.take()
			q, _, _ := qmet.take()
			got[WorkRegistration] = q[WorkRegistration]
			if got != [WorkPaths]int{} || sends < frags || sendBytes < n+8 {
				t.Errorf("BIG %d by continuation: posted %v, %d Sends of %d bytes, want none, at least %d Sends of %d bytes",
					n, got, sends, sendBytes, frags, n+8)
			}
		})
	}
}
