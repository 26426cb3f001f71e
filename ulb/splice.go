package ulb

import (
	"errors"
	"fmt"
)

// Splicing a reply received over RPC-over-RDMA back into the byte stream
// it would be on TCP: the requester policy's second half (requester.go
// plans the reply room). The rules are the binding's, not a transport's,
// and they do not depend on rdmarpc types, so they live here.

// errChunksWithoutResults: a reply that is not an accepted SUCCESS has
// no results, so nothing of it can be in a Write chunk.
var errChunksWithoutResults = errors.New("ulb: data in Write chunks of a reply that has no results")

// SpliceReply rebuilds a reply received over RPC-over-RDMA as a TCP
// peer would send it: it appends to vec the slices that, written in
// order, are the results, each READ/READLINK body spliced back from the
// Write chunk it arrived in, with its XDR pad. It copies nothing.
//
// results is the reply after its RPC header (inline or from the Reply
// chunk), success whether the header is an accepted SUCCESS, chunks[k]
// what the responder wrote into Write chunk k and offered the rooms the
// call offered. spliced is false when no Write chunk holds data: vec then
// ends with results, whole. w is the caller's (Reset here), so a
// long-lived caller allocates nothing.
func SpliceReply(vec [][]byte, w *Walker, prog, vers, proc uint32, success bool, results []byte, chunks [][]byte, offered []int) (_ [][]byte, spliced bool, err error) {
	for _, ch := range chunks {
		spliced = spliced || len(ch) > 0
	}
	if !spliced {
		if len(results) > 0 {
			vec = append(vec, results)
		}
		return vec, false, nil
	}
	if !success {
		return vec, true, errChunksWithoutResults
	}
	if err := w.Reset(Reply, prog, vers, proc); err != nil {
		return vec, true, err
	}
	vec, err = AppendSplicedReply(vec, w, results, chunks, offered)
	return vec, true, err
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
