package iwarp

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// DDP (RFC 5041) segments. Every ULPDU starts with a DDP header; the first
// byte is DDP's own control field, the second belongs to the ULP (RDMAP's
// control field, see rdmap.go).
//
// Tagged buffer model (RDMA Write, RDMA Read Response), 14 bytes:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|T|L| Resrv | DV|   RsvdULP     |            STag ...           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     ... STag                  |     Tagged Offset ...         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    ... Tagged Offset ...                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  ... Tagged Offset            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Untagged buffer model (Send, RDMA Read Request, Terminate), 18 bytes:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|T|L| Resrv | DV|   RsvdULP[0:7]| RsvdULP[8:39] (Invalidate STag)
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	 ...                            |            QN ...             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  ... QN                       |            MSN ...            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  ... MSN                      |            MO ...             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  ... MO                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// T: tagged, L: last segment of the message, DV: DDP version (1).

const (
	ddpTaggedLen   = 14
	ddpUntaggedLen = 18
	ddpFlagTagged  = 0x80
	ddpFlagLast    = 0x40
	ddpVersionMask = 0x03
	ddpVersion     = 1

	// Untagged queue numbers RDMAP uses (RFC 5040 section 5.1).
	qnSend      = 0
	qnReadReq   = 1
	qnTerminate = 2
)

// ErrDDP is the cause of DDP header decoding failures.
var ErrDDP = errors.New("iwarp: DDP")

// ddpHeader is a decoded DDP header including the RDMAP fields DDP
// carries for its ULP (the control byte and, untagged, the Invalidate
// STag).
type ddpHeader struct {
	Tagged  bool
	Last    bool
	Version uint8 // DV
	RDMAP   uint8 // RsvdULP[0:7]: the RDMAP control field
	// Tagged model.
	STag uint32
	TO   uint64
	// Untagged model.
	InvSTag uint32 // RsvdULP[8:39]
	QN      uint32
	MSN     uint32
	MO      uint32
}

// Len is the header's wire size.
func (h *ddpHeader) Len() int {
	if h.Tagged {
		return ddpTaggedLen
	}
	return ddpUntaggedLen
}

// put writes h into b, which must hold h.Len() bytes, and returns h.Len().
func (h *ddpHeader) put(b []byte) int {
	c := h.Version & ddpVersionMask
	if h.Tagged {
		c |= ddpFlagTagged
	}
	if h.Last {
		c |= ddpFlagLast
	}
	b[0] = c
	b[1] = h.RDMAP
	if h.Tagged {
		binary.BigEndian.PutUint32(b[2:6], h.STag)
		binary.BigEndian.PutUint64(b[6:14], h.TO)
		return ddpTaggedLen
	}
	binary.BigEndian.PutUint32(b[2:6], h.InvSTag)
	binary.BigEndian.PutUint32(b[6:10], h.QN)
	binary.BigEndian.PutUint32(b[10:14], h.MSN)
	binary.BigEndian.PutUint32(b[14:18], h.MO)
	return ddpUntaggedLen
}

// ddpHeaderLen tells from the first byte of a DDP header how long it is.
func ddpHeaderLen(ctrl byte) int {
	if ctrl&ddpFlagTagged != 0 {
		return ddpTaggedLen
	}
	return ddpUntaggedLen
}

// parse decodes a DDP header from b. It checks only what DDP itself
// defines as framing; version checks are the caller's (they need a
// Terminate, not a decoding error).
func (h *ddpHeader) parse(b []byte) error {
	if len(b) < 2 {
		return fmt.Errorf("%w: %d-byte ULPDU has no DDP header", ErrDDP, len(b))
	}
	c := b[0]
	h.Tagged = c&ddpFlagTagged != 0
	h.Last = c&ddpFlagLast != 0
	h.Version = c & ddpVersionMask
	if n := ddpHeaderLen(c); len(b) < n {
		return fmt.Errorf("%w: %d-byte ULPDU is shorter than its %d-byte header", ErrDDP, len(b), n)
	}
	h.RDMAP = b[1]
	if h.Tagged {
		h.STag = binary.BigEndian.Uint32(b[2:6])
		h.TO = binary.BigEndian.Uint64(b[6:14])
		h.InvSTag, h.QN, h.MSN, h.MO = 0, 0, 0, 0
		return nil
	}
	h.STag, h.TO = 0, 0
	h.InvSTag = binary.BigEndian.Uint32(b[2:6])
	h.QN = binary.BigEndian.Uint32(b[6:10])
	h.MSN = binary.BigEndian.Uint32(b[10:14])
	h.MO = binary.BigEndian.Uint32(b[14:18])
	return nil
}

func (h *ddpHeader) String() string {
	if h.Tagged {
		return fmt.Sprintf("DDP tagged L=%t DV=%d %s STag=%#x TO=%#x", h.Last, h.Version, rdmapOpcode(h.RDMAP&rdmapOpcodeMask), h.STag, h.TO)
	}
	return fmt.Sprintf("DDP untagged L=%t DV=%d %s QN=%d MSN=%d MO=%d", h.Last, h.Version, rdmapOpcode(h.RDMAP&rdmapOpcodeMask), h.QN, h.MSN, h.MO)
}
