package auxrelay

import (
	"encoding/binary"

	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/xdr"
)

// Message helpers. The relay handles whole RPC messages as byte slices:
// auxiliary traffic is small, and forwarding verbatim (bar the XID and,
// for NLM, a spliced field) keeps the filer's bytes intact.

func getXID(msg []byte) uint32 { return binary.BigEndian.Uint32(msg) }

func setXID(msg []byte, xid uint32) { binary.BigEndian.PutUint32(msg, xid) }

// replyMsg builds a reply with header h followed by results.
func replyMsg(h oncrpc.ReplyHeader, results []byte) []byte {
	buf := make([]byte, h.EncodedLen()+len(results))
	e := xdr.NewEncoder(buf)
	if err := h.Encode(&e); err != nil {
		// Only reachable with an oversized verifier, which the relay
		// never builds.
		panic("auxrelay: encoding own reply header: " + err.Error())
	}
	n := copy(buf[e.Len():], results)
	return buf[:e.Len()+n]
}

// successReply is an accepted SUCCESS reply with results.
func successReply(xid uint32, results []byte) []byte {
	return replyMsg(oncrpc.AcceptedReply(xid, oncrpc.Success), results)
}

// splice returns msg with msg[from:to] replaced by repl.
func splice(msg []byte, from, to int, repl []byte) []byte {
	out := make([]byte, 0, len(msg)-(to-from)+len(repl))
	out = append(out, msg[:from]...)
	out = append(out, repl...)
	return append(out, msg[to:]...)
}

// xdrOpaque is the XDR encoding of variable-length opaque (or string) b.
func xdrOpaque(b []byte) []byte {
	out := make([]byte, 4+xdr.RoundUp(len(b)))
	binary.BigEndian.PutUint32(out, uint32(len(b)))
	copy(out[4:], b)
	return out
}

// xdrWriter appends XDR items to a growing slice, for the relay's own
// small replies (rpcbind answers).
type xdrWriter struct{ b []byte }

func (w *xdrWriter) u32(v uint32) { w.b = binary.BigEndian.AppendUint32(w.b, v) }
func (w *xdrWriter) u64(v uint64) { w.b = binary.BigEndian.AppendUint64(w.b, v) }
func (w *xdrWriter) str(s string) { w.b = append(w.b, xdrOpaque([]byte(s))...) }
func (w *xdrWriter) opaque(b []byte) {
	w.b = append(w.b, xdrOpaque(b)...)
}

func newArgDecoder(b []byte) xdr.Decoder { return xdr.NewDecoder(b) }
