package tcprpc

import (
	"errors"
	"fmt"
)

// Sentinel causes. Errors returned by this package wrap one of these or an
// I/O error; test with errors.Is.
var (
	// ErrRecordTooLarge: the fragments of one record add up to more than
	// the reader's MaxRecord.
	ErrRecordTooLarge = errors.New("record exceeds size limit")
	// ErrTooManyFragments: one record was split into more fragments than
	// the reader's MaxFragments (zero-length fragments count too).
	ErrTooManyFragments = errors.New("record has too many fragments")
	// ErrShortRecord: the record ended before the caller's buffer was
	// full or before the bytes asked to be discarded.
	ErrShortRecord = errors.New("record shorter than expected")
	// ErrPeekTooLarge: Peek asked for more than the read-ahead buffer holds.
	ErrPeekTooLarge = errors.New("peek larger than read-ahead buffer")
)

// FrameError reports a record-marking violation. The stream cannot be
// resynchronised after one, so the RecordReader returns it from every call
// that follows and the connection should be closed.
type FrameError struct {
	Record   int64 // index of the record on the stream, from 0
	Fragment int   // index of the offending fragment within the record, from 0
	Offset   int64 // stream offset of the offending fragment header
	Size     int64 // record bytes announced up to and including this fragment
	Limit    int64 // the limit that was exceeded (bytes or fragments)
	Err      error // ErrRecordTooLarge or ErrTooManyFragments
}

func (e *FrameError) Error() string {
	if e.Err == ErrTooManyFragments {
		return fmt.Sprintf("tcprpc: record %d, fragment header at stream offset %d: %v (limit %d)",
			e.Record, e.Offset, e.Err, e.Limit)
	}
	return fmt.Sprintf("tcprpc: record %d, fragment %d header at stream offset %d: %v (%d > %d bytes)",
		e.Record, e.Fragment, e.Offset, e.Err, e.Size, e.Limit)
}

func (e *FrameError) Unwrap() error { return e.Err }
