package iwarp

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rdmagw/rdmagw/verbs"
)

// A Terminate (RFC 5040 section 4.8) is an untagged message on QN 2 that
// reports the error which ends the stream. Its payload:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Layer | EType |  Error Code   |M|D|R|       Reserved          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  DDP Segment Length (if D)    |                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//	~        Terminated DDP Header (if D; 14 or 18 bytes)           ~
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	~        Terminated RDMA Header (if R; the 28-byte Read Request)~
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// M: the DDP Segment Length is valid, D: the DDP header of the offending
// segment follows, R: its RDMA header (Read Request payload) follows.

// Layer of a Terminate.
const (
	LayerRDMAP = 0
	LayerDDP   = 1
	LayerLLP   = 2 // MPA
)

// Error types and codes (RFC 5040 section 4.8, RFC 5041 section 7.2,
// RFC 5044 section 8).
const (
	// RDMAP layer.
	RDMAPLocalCatastrophic = 0
	RDMAPRemoteProtection  = 1
	RDMAPRemoteOperation   = 2

	RDMAPInvalidSTag      = 0x00
	RDMAPBaseBounds       = 0x01
	RDMAPAccessRights     = 0x02
	RDMAPSTagNotAssoc     = 0x03
	RDMAPTOWrap           = 0x04
	RDMAPBadVersion       = 0x05
	RDMAPBadOpcode        = 0x06
	RDMAPCatastrophicQP   = 0x07
	RDMAPCannotInvalidate = 0x09
	RDMAPUnspecified      = 0xff

	// DDP layer.
	DDPLocalCatastrophic = 0
	DDPTaggedBuffer      = 1
	DDPUntaggedBuffer    = 2

	DDPTaggedInvalidSTag = 0x00
	DDPTaggedBaseBounds  = 0x01
	DDPTaggedSTagNotAsso = 0x02
	DDPTaggedTOWrap      = 0x03
	DDPTaggedBadVersion  = 0x04

	DDPUntaggedInvalidQN  = 0x01
	DDPUntaggedNoBuffer   = 0x02
	DDPUntaggedMSNRange   = 0x03
	DDPUntaggedInvalidMO  = 0x04
	DDPUntaggedTooLong    = 0x05
	DDPUntaggedBadVersion = 0x06

	// LLP (MPA) layer, error type 0.
	MPAStreamLost    = 0x01
	MPACRCError      = 0x02
	MPAFPDUStart     = 0x03
	MPAInvalidReqRep = 0x04
)

const (
	termFlagM = 0x8000
	termFlagD = 0x4000
	termFlagR = 0x2000

	termCtrlLen = 4
	// termMaxLen is the largest Terminate payload: control, segment
	// length, untagged DDP header and Read Request.
	termMaxLen = termCtrlLen + 2 + ddpUntaggedLen + readReqLen
)

// Linux siw (6.1, drivers/infiniband/sw/siw/iwarp.h) declares the
// Terminate Control field as C bit-fields, which a little-endian host lays
// out from the low bits: on x86 its first byte holds the error type in the
// high nibble and the layer in the low one (RFC 5040 6.10: the other way
// round), and M, D and R are the three low bits of the third byte instead
// of its three high bits. siw reads its own layout back, so only a
// different peer notices: without this its Terminates name no header (D
// looks clear) and the Write a Terminate refuses would complete as sent.
const (
	siwFlagM = 0x0100
	siwFlagD = 0x0200
	siwFlagR = 0x0400
)

// fromSiwLayout returns a Terminate Control field in RFC 5040 order: a
// field in siw's little-endian layout (flags in the third byte's low bits,
// which RFC 5040 reserves, and none in its high bits) is converted; any
// other is returned as it is. A siw Terminate without any header (M, D, R
// clear) cannot be told apart; its layer and type are left as sent.
func fromSiwLayout(ctrl uint32) uint32 {
	const stdFlags, siwFlags = termFlagM | termFlagD | termFlagR, siwFlagM | siwFlagD | siwFlagR
	if ctrl&stdFlags != 0 || ctrl&siwFlags == 0 || ctrl&(0xffff&^siwFlags) != 0 {
		return ctrl
	}
	layer, etype := (ctrl>>24)&0xf, (ctrl>>28)&0xf
	out := layer<<28 | etype<<24 | ctrl&0x00ff0000
	for _, f := range [...][2]uint32{{siwFlagM, termFlagM}, {siwFlagD, termFlagD}, {siwFlagR, termFlagR}} {
		if ctrl&f[0] != 0 {
			out |= f[1]
		}
	}
	return out
}

// ErrTerminated is the cause of every *TerminateError.
var ErrTerminated = errors.New("iwarp: stream terminated")

// TerminateError is what Conn.Err reports after a Terminate was sent or
// received.
type TerminateError struct {
	Sent   bool // we sent it (the peer violated the protocol)
	Layer  uint8
	EType  uint8
	Code   uint8
	Header []byte // the terminated DDP (and RDMA) header, if any
	Reason string // local detail, for the sender's own logs
}

func (e *TerminateError) Error() string {
	dir := "received"
	if e.Sent {
		dir = "sent"
	}
	s := fmt.Sprintf("iwarp: Terminate %s: %s", dir, termDescription(e.Layer, e.EType, e.Code))
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

func (e *TerminateError) Unwrap() error { return ErrTerminated }

func termDescription(layer, etype, code uint8) string {
	switch layer {
	case LayerRDMAP:
		t := map[uint8]string{RDMAPLocalCatastrophic: "local catastrophic", RDMAPRemoteProtection: "remote protection error", RDMAPRemoteOperation: "remote operation error"}[etype]
		c := map[uint8]string{RDMAPInvalidSTag: "invalid STag", RDMAPBaseBounds: "base or bounds violation",
			RDMAPAccessRights: "access rights violation", RDMAPSTagNotAssoc: "STag not associated with RDMAP stream",
			RDMAPTOWrap: "TO wrap", RDMAPBadVersion: "invalid RDMAP version", RDMAPBadOpcode: "unexpected opcode",
			RDMAPCatastrophicQP: "catastrophic error localized to RDMAP stream", RDMAPCannotInvalidate: "STag cannot be invalidated",
			RDMAPUnspecified: "unspecified"}[code]
		return fmt.Sprintf("RDMAP layer, %s (type %d), %s (code %#x)", t, etype, c, code)
	case LayerDDP:
		t, c := "", ""
		switch etype {
		case DDPLocalCatastrophic:
			t = "local catastrophic"
		case DDPTaggedBuffer:
			t = "tagged buffer error"
			c = map[uint8]string{DDPTaggedInvalidSTag: "invalid STag", DDPTaggedBaseBounds: "base or bounds violation",
				DDPTaggedSTagNotAsso: "STag not associated with DDP stream", DDPTaggedTOWrap: "TO wrap", DDPTaggedBadVersion: "invalid DDP version"}[code]
		case DDPUntaggedBuffer:
			t = "untagged buffer error"
			c = map[uint8]string{DDPUntaggedInvalidQN: "invalid QN", DDPUntaggedNoBuffer: "invalid MSN - no buffer available",
				DDPUntaggedMSNRange: "invalid MSN - MSN range", DDPUntaggedInvalidMO: "invalid MO",
				DDPUntaggedTooLong: "DDP message too long for available buffer", DDPUntaggedBadVersion: "invalid DDP version"}[code]
		}
		return fmt.Sprintf("DDP layer, %s (type %d), %s (code %#x)", t, etype, c, code)
	case LayerLLP:
		c := map[uint8]string{MPAStreamLost: "TCP stream lost", MPACRCError: "received MPA CRC does not match",
			MPAFPDUStart: "FPDU start not aligned", MPAInvalidReqRep: "invalid MPA request/reply"}[code]
		return fmt.Sprintf("MPA layer (type %d), %s (code %#x)", etype, c, code)
	}
	return fmt.Sprintf("layer %d type %d code %#x", layer, etype, code)
}

// status is the completion status the requester reports for the work
// request a received Terminate names.
func (e *TerminateError) status() verbs.Status {
	switch e.Layer {
	case LayerRDMAP:
		switch e.EType {
		case RDMAPRemoteProtection:
			return verbs.StatusRemoteAccess
		case RDMAPRemoteOperation:
			switch e.Code {
			case RDMAPBadVersion, RDMAPBadOpcode, RDMAPCannotInvalidate:
				return verbs.StatusRemoteInvalidReq
			}
			return verbs.StatusRemoteOp
		}
		return verbs.StatusRemoteOp
	case LayerDDP:
		switch e.EType {
		case DDPTaggedBuffer:
			if e.Code == DDPTaggedBadVersion {
				return verbs.StatusRemoteInvalidReq
			}
			return verbs.StatusRemoteAccess
		case DDPUntaggedBuffer:
			if e.Code == DDPUntaggedNoBuffer {
				return verbs.StatusRNR
			}
			return verbs.StatusRemoteInvalidReq
		}
		return verbs.StatusRemoteOp
	}
	return verbs.StatusGeneral
}

// terminate is a Terminate to build: the error and the header of the
// segment that caused it.
type terminate struct {
	Layer, EType, Code uint8
	HaveDDP            bool
	SegLen             uint16 // ULPDU length of the offending segment
	DDP                ddpHeader
	HaveRDMA           bool
	RDMA               readRequest
}

// put writes the Terminate payload into b (termMaxLen bytes) and returns
// its length.
func (t *terminate) put(b []byte) int {
	ctrl := uint32(t.Layer&0xf)<<28 | uint32(t.EType&0xf)<<24 | uint32(t.Code)<<16
	n := termCtrlLen
	if t.HaveDDP {
		ctrl |= termFlagM | termFlagD
		binary.BigEndian.PutUint16(b[n:], t.SegLen)
		n += 2
		n += t.DDP.put(b[n:])
	}
	if t.HaveRDMA {
		ctrl |= termFlagR
		t.RDMA.put(b[n:])
		n += readReqLen
	}
	binary.BigEndian.PutUint32(b[0:4], ctrl)
	return n
}

// parse decodes a received Terminate payload.
func (t *terminate) parse(b []byte) error {
	if len(b) < termCtrlLen {
		return fmt.Errorf("iwarp: Terminate payload is %d bytes, need at least %d", len(b), termCtrlLen)
	}
	ctrl := fromSiwLayout(binary.BigEndian.Uint32(b[0:4]))
	t.Layer = uint8(ctrl >> 28)
	t.EType = uint8(ctrl>>24) & 0xf
	t.Code = uint8(ctrl >> 16)
	t.HaveDDP, t.HaveRDMA = false, false
	b = b[termCtrlLen:]
	if ctrl&termFlagD != 0 {
		if len(b) < 2+2 {
			return fmt.Errorf("iwarp: Terminate has D set but only %d more bytes", len(b))
		}
		t.SegLen = binary.BigEndian.Uint16(b)
		b = b[2:]
		if err := t.DDP.parse(b); err != nil {
			return fmt.Errorf("iwarp: Terminate's terminated header: %w", err)
		}
		b = b[t.DDP.Len():]
		t.HaveDDP = true
	}
	if ctrl&termFlagR != 0 {
		if len(b) < readReqLen {
			return fmt.Errorf("iwarp: Terminate has R set but only %d more bytes", len(b))
		}
		_ = t.RDMA.parse(b[:readReqLen])
		t.HaveRDMA = true
	}
	return nil
}
