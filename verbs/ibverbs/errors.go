//go:build ibverbs && cgo

package ibverbs

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/rdmagw/rdmagw/verbs"
)

// debug (RDMAGW_IBVERBS_DEBUG=1) logs device statuses that map to
// StatusGeneral.
var debug = os.Getenv("RDMAGW_IBVERBS_DEBUG") != ""

var (
	// ErrPeerDisconnected is Conn.Err after the peer disconnected.
	ErrPeerDisconnected = fmt.Errorf("ibverbs: peer disconnected: %w", verbs.ErrNotConnected)
	// ErrDeviceRemoved is Conn.Err after the device went away.
	ErrDeviceRemoved = fmt.Errorf("ibverbs: device removed: %w", verbs.ErrNotConnected)
)

// status maps a work completion status to the verbs one.
func status(s C.uint32_t) verbs.Status {
	switch s {
	case C.IBV_WC_SUCCESS:
		return verbs.StatusSuccess
	case C.IBV_WC_LOC_LEN_ERR:
		return verbs.StatusLocalLength
	case C.IBV_WC_LOC_PROT_ERR:
		return verbs.StatusLocalProtection
	case C.IBV_WC_REM_ACCESS_ERR:
		return verbs.StatusRemoteAccess
	case C.IBV_WC_RNR_RETRY_EXC_ERR:
		return verbs.StatusRNR
	case C.IBV_WC_WR_FLUSH_ERR:
		return verbs.StatusFlushed
	case C.IBV_WC_REM_INV_REQ_ERR:
		return verbs.StatusRemoteInvalidReq
	case C.IBV_WC_REM_OP_ERR:
		return verbs.StatusRemoteOp
	}
	if debug {
		fmt.Fprintf(os.Stderr, "ibverbs: completion status %d (%s) reported as general error\n", int(s), C.GoString(C.ibv_wc_status_str(uint32(s))))
	}
	return verbs.StatusGeneral
}

// postErr maps an ibv_post_* return value (an errno) to an error.
func postErr(what string, rc C.int) error {
	errno := syscall.Errno(rc)
	if errno == syscall.ENOMEM {
		return fmt.Errorf("ibverbs: %s: %w (device queue full)", what, verbs.ErrQueueFull)
	}
	return fmt.Errorf("ibverbs: %s: %w", what, errno)
}

func wrap(what string, err error) error {
	if err == nil {
		err = errors.New("failed")
	}
	return fmt.Errorf("ibverbs: %s: %w", what, err)
}
