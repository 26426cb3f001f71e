package verbs

import (
	"errors"
	"fmt"
)

var (
	ErrClosed          = errors.New("verbs: closed")
	ErrQueueFull       = errors.New("verbs: work queue full")
	ErrNotConnected    = errors.New("verbs: not connected")
	ErrSRQ             = errors.New("verbs: connection uses a shared receive queue")
	ErrInvalidSGE      = errors.New("verbs: scatter/gather entry outside a registered region")
	ErrUnknownProvider = errors.New("verbs: unknown provider")
	// ErrRejected is the cause of a *RejectError.
	ErrRejected = errors.New("verbs: connection rejected")
)

// RejectError is returned by Dial when the peer rejected the request.
type RejectError struct {
	Addr        string
	PrivateData []byte // what the peer sent with its reject, if anything
}

func (e *RejectError) Error() string {
	return fmt.Sprintf("verbs: connection to %s rejected (%d bytes of private data)", e.Addr, len(e.PrivateData))
}

func (e *RejectError) Unwrap() error { return ErrRejected }

// CompletionError turns a failed completion into an error for logs.
type CompletionError struct {
	Op     Opcode
	Status Status
	ID     uint64
}

func (e *CompletionError) Error() string {
	return fmt.Sprintf("verbs: %s work request %#x completed with %s", e.Op, e.ID, e.Status)
}
