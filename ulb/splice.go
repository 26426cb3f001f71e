package ulb

import "fmt"

// Splicing a reply received over RPC-over-RDMA back into the byte stream
// it would be on TCP, and provisioning the reply room of a call. Shared
// by every requester on top of rdmarpc (the reverse gateway, the Go NFS
// client): the rules are the binding's, not a transport's, and they do
// not depend on rdmarpc types, so they live here.

// WriteRooms appends to dst, per expected DDP-eligible result, the room
// of the Write chunk to offer for it (RFC 8267 §4.3.1, §6.4.1: one chunk
// per READ/READLINK result, in reply order), and returns it.
func (e *Estimate) WriteRooms(dst []int) []int {
	for k := range e.NItems {
		dst = append(dst, e.ItemMax[k])
	}
	return dst
}

// MaxVerifierBody is the largest verifier body an RPC reply may carry
// (RFC 5531 §8.2: opaque_auth bodies are at most 400 bytes). Estimates
// assume an empty one, what servers return to AUTH_NONE and AUTH_SYS
// callers; a requester whose call uses another flavor (RPCSEC_GSS: the
// reply verifier is a MIC) passes this as ReplyChunkRoom's verifier.
const MaxVerifierBody = 400

// ReplyChunkRoom is the room of the Reply chunk to offer, or 0 for none:
// one is needed when the inline part of the reply may exceed inlineRoom
// or cannot be bounded.
//
// inlineRoom is what of the requester's receive buffer an inline reply
// can use: the receive size less the largest RPC-over-RDMA header the
// responder may put before the reply (RFC 8166 §3.3.2: the transport
// header counts against the inline threshold; Linux subtracts
// rpcrdma_max_reply_header_size the same way). verifier is the reply
// verifier's body beyond the empty one the estimate assumes (0, or
// MaxVerifierBody). The room is the estimate with the verifier, at least
// twice inlineRoom (slack for estimates that are guesses), at most
// maxRoom (the largest buffer).
func (e *Estimate) ReplyChunkRoom(inlineRoom, verifier, maxRoom int) int {
	need := e.Inline + verifier
	if need <= inlineRoom && !e.Unpredictable {
		return 0
	}
	return min(max(need, 2*inlineRoom), maxRoom)
}

// zeroPad supplies the XDR round-up of spliced item bodies.
var zeroPad [4]byte

// AppendSplicedReply rebuilds an RPC reply whose READ/READLINK bodies
// travelled in Write chunks: it appends to vec the slices that, written
// in order, are the reply as a TCP peer would send it, and returns vec.
// It copies nothing: the slices point into results, chunks and a shared
// zero pad.
//
// w must be Reset for the reply of the call (Dir Reply). results is the
// reply after its RPC header, as received inline or in the Reply chunk:
// each item placed in a chunk keeps its length word but has no body.
// chunks[k] holds what the responder wrote into Write chunk k and
// offered[k] the room that chunk had (0: an empty chunk was offered, so
// the item is inline). An item whose chunk came back empty while the
// reply announces a body was sent inline instead (RFC 8267 §4.3.1 lets a
// responder do so) and is taken from results.
func AppendSplicedReply(vec [][]byte, w *Walker, results []byte, chunks [][]byte, offered []int) ([][]byte, error) {
	b := results
	for {
		st, err := w.Next(b)
		if err != nil {
			return vec, err
		}
		switch st.Kind {
		case StepDone:
			if len(b) > 0 {
				vec = append(vec, b)
			}
			return vec, nil
		case StepNeedMore:
			return vec, fmt.Errorf("%w: reply truncated (walker needs %d bytes, %d left)", ErrGarbage, st.Need, len(b))
		}
		it := st.Item
		k := it.Index
		inChunk := k < len(offered) && offered[k] > 0 && k < len(chunks) &&
			(len(chunks[k]) > 0 || it.Length == 0)
		if !inChunk {
			end := it.Offset + it.Length + it.Pad
			if end > len(b) {
				return vec, fmt.Errorf("%w: reply item %d of %d bytes is neither inline nor in a Write chunk", ErrGarbage, k, it.Length)
			}
			vec = append(vec, b[:end])
			b = b[end:]
			continue
		}
		data := chunks[k]
		if len(data) != it.Length {
			return vec, fmt.Errorf("%w: Write chunk %d holds %d bytes, the reply says %d", ErrGarbage, k, len(data), it.Length)
		}
		if it.Offset > 0 {
			vec = append(vec, b[:it.Offset])
		}
		if len(data) > 0 {
			vec = append(vec, data)
		}
		if it.Pad > 0 {
			vec = append(vec, zeroPad[:it.Pad])
		}
		b = b[it.Offset:]
	}
}
