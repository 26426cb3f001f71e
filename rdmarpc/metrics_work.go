package rdmarpc

import "github.com/rdmagw/rdmagw/verbs"

// WorkPath names the path of the RDMA Reads and Writes the responder
// posts for one RPC message (WorkMetrics). A message's Sends are counted
// by ResponderMetrics.ReplySent (one each) and, for version-two
// continuation, ResponderV2Metrics.V2Continued (the whole count).
type WorkPath uint8

const (
	WorkReadChunk  WorkPath = iota // RDMA Reads of data item Read chunks
	WorkLongCall                   // RDMA Reads of the Position-Zero Read chunk (version two: the Call chunk)
	WorkWriteChunk                 // RDMA Writes into Write chunks
	WorkReplyChunk                 // RDMA Writes into the Reply chunk
	// WorkRegistration (requester): memory registrations made to expose
	// one call's chunks to the responder (Read chunk data, Write and
	// Reply chunk room), each revoked when the reply comes; with FRWR
	// hardware each is a registration work request and an invalidation.
	WorkRegistration
	workPaths
)

// WorkPaths is the number of WorkPath values, for arrays indexed by them.
const WorkPaths = int(workPaths)

func (p WorkPath) String() string {
	switch p {
	case WorkReadChunk:
		return "read_chunk"
	case WorkLongCall:
		return "long_call"
	case WorkWriteChunk:
		return "write_chunk"
	case WorkReplyChunk:
		return "reply_chunk"
	case WorkRegistration:
		return "registration"
	}
	return "unknown"
}

// WorkMetrics is implemented by ResponderMetrics and RequesterMetrics
// that also count the work requests behind the bytes: a chunk of several
// segments takes one RDMA Read or Write per segment, or more when a
// segment gathers more local pieces than one request holds. The engines
// look for it once per connection, as for ResponderV2Metrics.
type WorkMetrics interface {
	// Posted: n work requests of path p were posted for one RPC
	// message (responder: the Reads when the call is complete, the
	// Writes when its reply is posted; requester: the registrations
	// when the call is sent); never called with n = 0.
	Posted(p WorkPath, n int)
}

type nopWorkMetrics struct{}

func (nopWorkMetrics) Posted(WorkPath, int) {}

// workMetricsOf is m's WorkMetrics, or one that counts nothing.
func workMetricsOf(m any) WorkMetrics {
	if w, ok := m.(WorkMetrics); ok {
		return w
	}
	return nopWorkMetrics{}
}

// reportReads reports the RDMA Reads issueReads posted for a call's Read
// list: one per segment with data, Position-Zero ones as WorkLongCall.
func reportReads(w WorkMetrics, reads ReadList) {
	var long, data int
	for i := range reads {
		switch {
		case reads[i].Length == 0:
		case reads[i].Position == 0:
			long++
		default:
			data++
		}
	}
	if long > 0 {
		w.Posted(WorkLongCall, long)
	}
	if data > 0 {
		w.Posted(WorkReadChunk, data)
	}
}

// replyWork is a reply chain's RDMA Writes by path and the bytes of all
// its Sends (every fragment of a continued reply), taken before posting.
type replyWork struct {
	writeChunk, replyChunk int
	sendBytes              int
}

// work counts s's chain: the Writes before itemWRs went into Write
// chunks (appendItemWrites comes first), the later ones into the Reply
// chunk.
func (s *sendCtxt) work() replyWork {
	var w replyWork
	for i := range s.wrs {
		switch s.wrs[i].Op {
		case verbs.OpRDMAWrite:
			if i < s.itemWRs {
				w.writeChunk++
			} else {
				w.replyChunk++
			}
		case verbs.OpSend, verbs.OpSendInv:
			r := s.rng[i]
			for _, g := range s.sges[r[0]:r[1]] {
				w.sendBytes += len(g.Buf)
			}
		}
	}
	return w
}

// report hands w's Writes to the metrics.
func (w replyWork) report(m WorkMetrics) {
	if w.writeChunk > 0 {
		m.Posted(WorkWriteChunk, w.writeChunk)
	}
	if w.replyChunk > 0 {
		m.Posted(WorkReplyChunk, w.replyChunk)
	}
}

// registrations is how many registrations x holds for its call.
func (x *reqCtxt) registrations() int {
	x.regMu.Lock()
	defer x.regMu.Unlock()
	return len(x.readMRs) + len(x.writeMRs)
}
