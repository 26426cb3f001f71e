package tcprpc

import (
	"encoding/binary"
	"errors"
	"io"
)

// errBadReadCount stands in for a misbehaving io.Reader that claims to
// have read more than it was given or a negative count.
var errBadReadCount = errors.New("tcprpc: underlying reader returned an invalid count")

// Reader defaults. DefaultMaxRecord fits an NFS READ or WRITE of 1 MiB
// with room to spare for the RPC and NFS headers around it.
const (
	DefaultMaxRecord    = 1<<20 + 64<<10
	DefaultMaxFragments = 8192
	DefaultBufferSize   = 8 << 10

	minBufferSize = 64
	// maxZeroReads bounds how often an io.Reader may return 0, nil in a
	// row before the reader gives up with io.ErrNoProgress.
	maxZeroReads = 100
)

// ReaderConfig tunes a RecordReader. Zero fields take the defaults.
type ReaderConfig struct {
	// MaxRecord is the largest record accepted, counting fragment data
	// only. A record announcing more is a FrameError(ErrRecordTooLarge)
	// raised at the header that crosses the limit, before its data is read.
	MaxRecord int
	// MaxFragments is the most fragments one record may have. It stops a
	// peer from holding a connection with an endless run of zero-length
	// fragments, and bounds per-record work.
	MaxFragments int
	// BufferSize is the size of the read-ahead buffer, and so the most
	// Peek can return (at least 64 bytes).
	BufferSize int
	// SkipOversize makes a record over MaxRecord no end of the stream:
	// its FrameError(ErrRecordTooLarge) is returned once, by the call
	// that met the header crossing the limit, after that header was
	// taken; the record stays readable (a server can Peek its RPC header
	// to answer it) and Next skips the rest of it, however long. Without
	// it the error is sticky.
	SkipOversize bool
}

// RecordReader splits a byte stream into RPC records.
//
// Between records, Next starts the next one. Within a record, Read,
// ReadFull, Peek and Discard see only the record's data: fragment headers
// are removed transparently, and the record's end reads as io.EOF.
//
// Reads go through a small read-ahead buffer so that headers and small
// records cost one system call each, but a read of at least the buffer's
// size that finds the buffer empty goes straight from the underlying
// reader into the caller's slice. The intended use on the data path:
//
//	rr.Next()
//	head, _ := rr.Peek(n)       // parse the RPC and NFS headers in place
//	rr.Discard(headLen)
//	rr.ReadFull(payload)        // the bulk data lands in the caller's memory
//	rr.ReadFull(tail)           // or Discard, whatever follows
//
// A RecordReader is not safe for concurrent use.
type RecordReader struct {
	rd   io.Reader
	buf  []byte // read-ahead; unread bytes are buf[r:w]
	r, w int
	rerr error // error from rd, returned once buf[r:w] is used up
	bad  error // framing error: sticky, returned by every call

	maxRecord int64
	maxFrags  int
	peekMax   int
	skipOver  bool
	oversize  bool // the current record crossed maxRecord (skipOver)

	// The current record. frag counts the bytes left before the next
	// fragment header; Peek may merge following fragments into it.
	inRecord bool
	last     bool // the fragment header that set frag had the last bit
	frag     int
	nfrags   int
	size     int64 // data bytes announced by the headers seen so far
	consumed int64 // data bytes handed to the caller or discarded

	records   int64 // records started on this stream
	recordOff int64 // stream offset of the current record's first header
}

// NewRecordReader returns a RecordReader over rd; c may be nil.
func NewRecordReader(rd io.Reader, c *ReaderConfig) *RecordReader {
	var cfg ReaderConfig
	if c != nil {
		cfg = *c
	}
	if cfg.MaxRecord <= 0 {
		cfg.MaxRecord = DefaultMaxRecord
	}
	if cfg.MaxFragments <= 0 {
		cfg.MaxFragments = DefaultMaxFragments
	}
	if cfg.BufferSize <= 0 {
		cfg.BufferSize = DefaultBufferSize
	}
	cfg.BufferSize = max(cfg.BufferSize, minBufferSize)
	rr := &RecordReader{
		// Four bytes of slack let Peek hold a full buffer of data plus
		// the header of the fragment that follows it.
		buf:       make([]byte, cfg.BufferSize+fragmentHeaderLen),
		maxRecord: int64(cfg.MaxRecord),
		maxFrags:  cfg.MaxFragments,
		peekMax:   cfg.BufferSize,
		skipOver:  cfg.SkipOversize,
	}
	rr.Reset(rd)
	return rr
}

// Reset discards all state and makes rr read a new stream from rd,
// keeping its buffer and limits.
func (rr *RecordReader) Reset(rd io.Reader) {
	buf, maxRecord, maxFrags, peekMax, skipOver := rr.buf, rr.maxRecord, rr.maxFrags, rr.peekMax, rr.skipOver
	*rr = RecordReader{rd: rd, buf: buf, maxRecord: maxRecord, maxFrags: maxFrags, peekMax: peekMax, skipOver: skipOver}
}

// Next skips whatever is left of the current record and reads the first
// fragment header of the next one. It returns io.EOF when the stream ends
// cleanly between records, io.ErrUnexpectedEOF when it ends inside a
// header or a record, and a *FrameError for a record over the limits.
func (rr *RecordReader) Next() error {
	if rr.bad != nil {
		return rr.bad
	}
	if rr.inRecord || rr.records > 0 {
		if err := rr.skipRest(); err != nil {
			return err
		}
		rr.recordOff += rr.size + int64(fragmentHeaderLen*rr.nfrags)
	}
	rr.inRecord, rr.last, rr.oversize = false, false, false
	rr.frag, rr.nfrags, rr.size, rr.consumed = 0, 0, 0, 0
	if err := rr.fill(fragmentHeaderLen); err != nil {
		if err == io.EOF && rr.r == rr.w {
			return io.EOF
		}
		return unexpected(err)
	}
	rr.records++
	rr.inRecord = true
	return rr.header(rr.r)
}

// header parses the fragment header at buf[at:at+4], removes it from the
// buffer and adds the fragment to the current record. at is rr.r (a new
// fragment) or rr.r+rr.frag (Peek merging the next fragment into the
// current one).
func (rr *RecordReader) header(at int) error {
	v := binary.BigEndian.Uint32(rr.buf[at:])
	off := rr.recordOff + rr.size + int64(fragmentHeaderLen*rr.nfrags)
	n := int(v & fragmentLenMask)
	rr.nfrags++
	rr.size += int64(n)
	var over error
	if rr.size > rr.maxRecord && !rr.oversize {
		fe := &FrameError{Record: rr.records - 1, Fragment: rr.nfrags - 1, Offset: off,
			Size: rr.size, Limit: rr.maxRecord, Err: ErrRecordTooLarge}
		if !rr.skipOver {
			return rr.fail(fe)
		}
		rr.oversize, over = true, fe
	}
	if rr.nfrags > rr.maxFrags {
		return rr.fail(&FrameError{Record: rr.records - 1, Fragment: rr.nfrags - 1, Offset: off,
			Size: rr.size, Limit: int64(rr.maxFrags), Err: ErrTooManyFragments})
	}
	if at == rr.r {
		rr.r += fragmentHeaderLen
	} else {
		copy(rr.buf[at:], rr.buf[at+fragmentHeaderLen:rr.w])
		rr.w -= fragmentHeaderLen
	}
	rr.frag += n
	rr.last = v&lastFragment != 0
	return over
}

func (rr *RecordReader) fail(err error) error {
	rr.bad = err
	rr.inRecord = false
	return err
}

// advance makes frag non-zero unless the record has ended, reading
// fragment headers (possibly zero-length ones) as needed. It reports
// whether record data remains.
func (rr *RecordReader) advance() (bool, error) {
	for rr.frag == 0 {
		if rr.last {
			rr.inRecord = false
			return false, nil
		}
		if err := rr.fill(fragmentHeaderLen); err != nil {
			return false, unexpected(err)
		}
		if err := rr.header(rr.r); err != nil {
			return false, err
		}
	}
	return true, nil
}

// fill reads from the stream until buf[r:w] holds at least min bytes
// (min <= len(buf)). Bytes that did arrive stay buffered on error.
func (rr *RecordReader) fill(min int) error {
	if rr.w-rr.r >= min {
		return nil
	}
	if rr.r == rr.w {
		rr.r, rr.w = 0, 0
	} else if len(rr.buf)-rr.r < min {
		rr.w = copy(rr.buf, rr.buf[rr.r:rr.w])
		rr.r = 0
	}
	for zero := 0; rr.w-rr.r < min; {
		if rr.rerr != nil {
			return rr.rerr
		}
		n, err := rr.rd.Read(rr.buf[rr.w:])
		if n < 0 || n > len(rr.buf)-rr.w {
			n, err = 0, errBadReadCount
		}
		rr.w += n
		rr.rerr = err
		if n == 0 && err == nil {
			if zero++; zero >= maxZeroReads {
				rr.rerr = io.ErrNoProgress
			}
		}
	}
	return nil
}

// unexpected turns a clean end of stream met inside a record into
// io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Read reads up to len(p) bytes of the current record. It returns io.EOF
// at the end of the record (and before the first Next).
func (rr *RecordReader) Read(p []byte) (int, error) {
	if rr.bad != nil {
		return 0, rr.bad
	}
	if !rr.inRecord {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	more, err := rr.advance()
	if err != nil {
		return 0, err
	}
	if !more {
		return 0, io.EOF
	}
	n := min(len(p), rr.frag)
	if rr.r == rr.w {
		if n >= rr.peekMax {
			return rr.readDirect(p[:n])
		}
		if err := rr.fill(1); err != nil {
			return 0, unexpected(err)
		}
	}
	n = copy(p[:n], rr.buf[rr.r:rr.w])
	rr.r += n
	rr.frag -= n
	rr.consumed += int64(n)
	return n, nil
}

// readDirect reads record data from the stream into p, bypassing the
// read-ahead buffer. p never extends past the current fragment, so no
// header or next-record byte can land in it.
func (rr *RecordReader) readDirect(p []byte) (int, error) {
	for zero := 0; ; {
		if rr.rerr != nil {
			return 0, unexpected(rr.rerr)
		}
		n, err := rr.rd.Read(p)
		if n < 0 || n > len(p) {
			n, err = 0, errBadReadCount
		}
		rr.rerr = err
		if n > 0 {
			rr.frag -= n
			rr.consumed += int64(n)
			return n, nil
		}
		if err == nil {
			if zero++; zero >= maxZeroReads {
				rr.rerr = io.ErrNoProgress
			}
		}
	}
}

// ReadFull fills p with the record's next len(p) bytes. If the record ends
// first it returns the count read and ErrShortRecord; if the stream ends
// first, io.ErrUnexpectedEOF.
func (rr *RecordReader) ReadFull(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := rr.Read(p[n:])
		n += m
		if err == io.EOF {
			return n, ErrShortRecord
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Peek returns the record's next n bytes without consuming them, as a
// slice of the read-ahead buffer that is valid until the next call on rr.
// It reads fragment headers that fall inside those n bytes and takes them
// out of the buffer, so the slice is contiguous record data. If the
// record has fewer than n bytes left, Peek returns all of them and io.EOF.
// n may not exceed the configured BufferSize (ErrPeekTooLarge).
func (rr *RecordReader) Peek(n int) ([]byte, error) {
	if rr.bad != nil {
		return nil, rr.bad
	}
	if n < 0 || n > rr.peekMax {
		return nil, ErrPeekTooLarge
	}
	if !rr.inRecord {
		return nil, io.EOF
	}
	for {
		if _, err := rr.advance(); err != nil {
			return nil, err
		}
		buffered := rr.w - rr.r
		if rr.frag >= n && buffered >= n {
			return rr.buf[rr.r : rr.r+n], nil
		}
		switch {
		case rr.frag > buffered:
			// More of this fragment is on its way.
			if err := rr.fill(min(n, rr.frag)); err != nil {
				return nil, unexpected(err)
			}
		case rr.last:
			return rr.buf[rr.r : rr.r+rr.frag], io.EOF
		default:
			// The fragment ends inside the wanted bytes: bring in the
			// next header and merge the fragment behind it. frag < n
			// <= peekMax, so frag+4 fits in the buffer's slack.
			if err := rr.fill(rr.frag + fragmentHeaderLen); err != nil {
				return nil, unexpected(err)
			}
			if err := rr.header(rr.r + rr.frag); err != nil {
				return nil, err
			}
		}
	}
}

// Discard skips the record's next n bytes. If the record ends first it
// returns the count skipped and ErrShortRecord.
func (rr *RecordReader) Discard(n int) (int, error) {
	if rr.bad != nil {
		return 0, rr.bad
	}
	done := 0
	for done < n {
		if !rr.inRecord {
			return done, ErrShortRecord
		}
		more, err := rr.advance()
		if err != nil {
			return done, err
		}
		if !more {
			return done, ErrShortRecord
		}
		if rr.r == rr.w {
			if err := rr.fill(1); err != nil {
				return done, unexpected(err)
			}
		}
		m := min(n-done, rr.frag, rr.w-rr.r)
		rr.r += m
		rr.frag -= m
		rr.consumed += int64(m)
		done += m
	}
	return done, nil
}

// skipRest discards the remainder of the current record.
func (rr *RecordReader) skipRest() error {
	for rr.inRecord {
		more, err := rr.advance()
		if err != nil {
			return err
		}
		if !more {
			break
		}
		if rr.r == rr.w {
			if err := rr.fill(1); err != nil {
				return unexpected(err)
			}
		}
		m := min(rr.frag, rr.w-rr.r)
		rr.r += m
		rr.frag -= m
		rr.consumed += int64(m)
	}
	return nil
}

// ReadRecord reads the whole next record into buf[:0], growing it only if
// the record does not fit in cap(buf) (up to MaxRecord), and returns it.
// It is the convenience path for small records such as replies to
// NULL or GETATTR; the data path uses Next, Peek and ReadFull instead.
func (rr *RecordReader) ReadRecord(buf []byte) ([]byte, error) {
	if err := rr.Next(); err != nil {
		return buf[:0], err
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := rr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// Remaining reports how many bytes of the current record are left to
// read. The count is exact (ok is true) once the last fragment's header has
// been read; before that it is the part of the current fragment still
// unread, a lower bound.
func (rr *RecordReader) Remaining() (n int, ok bool) {
	if !rr.inRecord {
		return 0, rr.records > 0 && rr.bad == nil
	}
	return rr.frag, rr.last
}

// Consumed is the number of bytes of the current record read or discarded
// so far (Peek does not count).
func (rr *RecordReader) Consumed() int64 { return rr.consumed }

// Fragments is the number of fragment headers of the current record read
// so far.
func (rr *RecordReader) Fragments() int { return rr.nfrags }

// Buffered is the number of stream bytes held in the read-ahead buffer.
func (rr *RecordReader) Buffered() int { return rr.w - rr.r }

// Records is the number of records started on the stream so far.
func (rr *RecordReader) Records() int64 { return rr.records }

// Unread returns the stream bytes read ahead but not yet consumed, valid
// until the next call on rr. After Next fails with a FrameError at a
// record's first fragment header, they start with that header: the caller
// can still see the beginning of the refused record (an RPC reply's XID)
// to report which call it answered.
func (rr *RecordReader) Unread() []byte { return rr.buf[rr.r:rr.w] }

// Resume forgets the error the underlying reader returned, such as an
// expired deadline the caller set to stop a blocked read, so that reading
// goes on where it stopped: bytes already buffered are kept, and a record
// left half read is skipped by the next Next. Framing errors stay sticky.
func (rr *RecordReader) Resume() { rr.rerr = nil }

// BufferedRecord looks at the read-ahead buffer for a caller that fills
// it itself (Space, Filled): whole says it holds the rest of the current
// record, if one is started, and all of the next one, so that Next,
// Peek, Read and Discard through the end of that record make no call to
// the underlying reader; need is the number of buffered bytes that takes
// (when whole), or a lower bound on it (not whole: it counts up to the
// first fragment header not yet buffered). A reader that failed answers
// whole, with need 0: its calls return the error without reading.
func (rr *RecordReader) BufferedRecord() (need int, whole bool) {
	if rr.bad != nil || rr.rerr != nil {
		return 0, true
	}
	at := rr.r
	if rr.inRecord {
		var ok bool
		if at, ok = rr.skipFragments(rr.r+rr.frag, rr.last); !ok {
			return at - rr.r, false
		}
	}
	at, ok := rr.skipFragments(at, false)
	return at - rr.r, ok && at <= rr.w
}

// skipFragments walks the buffered fragment headers from at (a header,
// unless last: the record ended there) to the end of the record; ok is
// false when a header is not buffered yet, at then counts up to its end.
func (rr *RecordReader) skipFragments(at int, last bool) (int, bool) {
	for !last {
		if at+fragmentHeaderLen > rr.w {
			return at + fragmentHeaderLen, false
		}
		v := binary.BigEndian.Uint32(rr.buf[at:])
		at += fragmentHeaderLen + int(v&fragmentLenMask)
		last = v&lastFragment != 0
	}
	return at, true
}

// Space makes room after the buffered bytes for at least need bytes
// counted from the first unread one (moving them to the buffer's start
// if needed) and returns the free part of the buffer, for the caller to
// read the stream into; Filled says what it read. need may not exceed
// Capacity. For a caller reading the socket itself (gateway/forward's
// reply reader, through internal/sockread).
func (rr *RecordReader) Space(need int) []byte {
	if rr.r == rr.w {
		rr.r, rr.w = 0, 0
	} else if rr.r+need > len(rr.buf) {
		rr.w = copy(rr.buf, rr.buf[rr.r:rr.w])
		rr.r = 0
	}
	return rr.buf[rr.w:]
}

// Filled adds n bytes read into the slice Space returned; err is the
// read's error, returned once the buffered bytes are used up (as from
// the underlying reader).
func (rr *RecordReader) Filled(n int, err error) {
	rr.w += n
	rr.rerr = err
}

// Capacity is the size of the read-ahead buffer: the most Space can make
// room for.
func (rr *RecordReader) Capacity() int { return len(rr.buf) }

// ReadAhead is the step of a caller that reads the socket into the
// read-ahead buffer itself, a record at a time (internal/sockread's
// Consumer.Next: gateway/forward's reply reader, gateway/reverse's call
// reader): whole says the next record is buffered (BufferedRecord) and
// can be taken; else space is where to read more of it (Space, then
// Filled), or nil when it cannot be buffered whole (longer than Capacity)
// or the reader failed: the caller then goes on with the ordinary calls,
// which read the rest themselves or return the error.
func (rr *RecordReader) ReadAhead() (space []byte, whole bool) {
	need, whole := rr.BufferedRecord()
	switch {
	case need == 0 || need > len(rr.buf):
		return nil, false
	case !whole:
		return rr.Space(need), false
	}
	return nil, true
}
