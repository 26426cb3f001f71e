package ulb

import (
	"errors"
	"fmt"
)

// Kind names what a DDP-eligible item is.
type Kind uint8

const (
	KindNone         Kind = iota
	KindWriteData         // NFSv2/v3 WRITE data, NFSv4 WRITE4args data (call)
	KindSymlinkPath       // NFSv2/v3 SYMLINK path, NFSv4 CREATE NF4LNK linkdata (call)
	KindReadData          // NFSv2/v3 READ data, NFSv4 READ4resok data (reply)
	KindReadlinkPath      // NFSv2/v3 READLINK path, NFSv4 READLINK4resok linkdata (reply)
)

func (k Kind) String() string {
	switch k {
	case KindWriteData:
		return "write-data"
	case KindSymlinkPath:
		return "symlink-path"
	case KindReadData:
		return "read-data"
	case KindReadlinkPath:
		return "readlink-path"
	}
	return "none"
}

// Item is one DDP-eligible XDR data item: a variable-length opaque (or
// string) whose body may travel in an RDMA chunk instead of inline.
//
//	... | length word | body (Length bytes) | pad (Pad bytes) | ...
//	    ^LenOffset    ^Offset
//
// Offsets are relative to the start of the slice handed to the Walker step
// that reported the item (see Walker.Next).
type Item struct {
	Kind      Kind
	LenOffset int // offset of the 4-byte length word
	Offset    int // offset of the first body byte (LenOffset + 4)
	Length    int // body length in bytes, without padding
	Pad       int // XDR pad bytes after the body (0..3)
	Op        int // NFSv4: index of the operation in the COMPOUND; else the procedure
	// Index counts reply items of READ class in message order (0, 1, ...):
	// Write chunk Index pairs with this item (RFC 8267 §4.3.1 / §6.4.1).
	// For call items it counts call items.
	Index int
}

// StepKind says what Walker.Next found.
type StepKind uint8

const (
	// StepItem: an eligible item starts here; Step.Item describes it.
	StepItem StepKind = iota + 1
	// StepNeedMore: the walker cannot make progress without more bytes.
	StepNeedMore
	// StepDone: the message holds no further eligible items.
	StepDone
)

// Step is the outcome of one Walker.Next call.
type Step struct {
	Kind StepKind
	// Consumed is how many bytes of the slice were parsed. On StepItem it
	// ends at Item.Offset (the body is not consumed: the caller lands or
	// skips Length+Pad bytes itself and passes what follows them to the next
	// Next call). On StepNeedMore it is 0: the walker state is unchanged and
	// the same bytes, extended, must be passed again.
	Consumed int
	// Need (StepNeedMore) is the minimum total length of the slice, counted
	// from its start, that lets the walker make progress.
	Need int
	Item Item
}

// FirstPeek is how many bytes of arguments or results a caller streaming
// a message should hand a Walker first: enough for the results before an
// NFSv3 READ's data or an NFSv4 SEQUENCE, PUTFH, READ reply, so the usual
// message is walked in one step. It is a starting size, not a bound: the
// walker asks for more with StepNeedMore.
const FirstPeek = 512

// Errors returned by walkers. Test with errors.Is.
var (
	// ErrGarbage: the bytes do not decode as the procedure's arguments or
	// results (a responder answers GARBAGE_ARGS for a call).
	ErrGarbage = errors.New("ulb: malformed arguments or results")
	// ErrUnsupported: no binding for this program/version.
	ErrUnsupported = errors.New("ulb: no upper-layer binding for program/version")
)

// WalkError wraps a decode failure with where it happened.
type WalkError struct {
	Prog, Vers, Proc uint32
	Op               int // NFSv4 operation index, -1 if none
	Offset           int // offset within the bytes walked so far (cumulative)
	Err              error
}

func (e *WalkError) Error() string {
	return fmt.Sprintf("ulb: prog %d vers %d proc %d op %d at offset %d: %v", e.Prog, e.Vers, e.Proc, e.Op, e.Offset, e.Err)
}

func (e *WalkError) Unwrap() error { return ErrGarbage }

// Direction of the message a Walker walks.
type Direction uint8

const (
	Call Direction = iota
	Reply
)
