// Package callback holds what both gateway modes do alike with an NFSv4.1
// callback (an RPC call from the server on the client's bound
// connection, RFC 8167): read one whole from a TCP record up to the size
// the other side can take, and make the SYSTEM_ERR reply that tells the
// server a callback could not be delivered.
package callback

import (
	"io"

	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/xdr"
)

// ReadRecord reads the rest of the current record of rr into a new
// buffer if it holds at most limit bytes (whole); a longer record is
// skipped to its end and whole is false. The error is the connection's.
func ReadRecord(rr *tcprpc.RecordReader, limit int) (buf []byte, whole bool, err error) {
	buf = make([]byte, 0, min(limit+1, 64<<10))
	for {
		if len(buf) == cap(buf) {
			if len(buf) > limit {
				break
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := rr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return buf, false, err
		}
	}
	if len(buf) <= limit {
		return buf, true, nil
	}
	if _, err := io.Copy(io.Discard, rr); err != nil {
		return buf, false, err
	}
	return buf, false, nil
}

// ErrorReply is the SYSTEM_ERR reply to a callback the gateway
// could not deliver.
func ErrorReply(xid uint32) []byte {
	rh := oncrpc.SystemErrReply(xid)
	e := xdr.NewEncoder(make([]byte, rh.EncodedLen()))
	if rh.Encode(&e) != nil {
		return nil
	}
	return e.Bytes()
}
