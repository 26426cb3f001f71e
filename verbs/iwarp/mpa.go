package iwarp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MPA (RFC 5044) frames the DDP segments on the TCP byte stream.
//
// Connection setup: the initiator (the dialing side) sends an MPA Request
// frame, the responder answers with an MPA Reply frame; both are 20 bytes
// plus private data:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+         Key (16 bytes containing "MPA ID Req Frame")          +
//	|      (4D 50 41 20 49 44 20 52 65 71 20 46 72 61 6D 65)        |
//	+         Or  (16 bytes containing "MPA ID Rep Frame")          +
//	|      (4D 50 41 20 49 44 20 52 65 70 20 46 72 61 6D 65)        |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|M|C|R|S| Res   |     Rev       |          PD_Length            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	~                                                               ~
//	~                   Private Data                                ~
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// M: markers (we never use them and reject a peer that requires them),
// C: CRC, R: reject, S: enhanced RDMA connection establishment (RFC 6581,
// the bit Linux siw and iw_cxgb4 set with Rev 2). With Rev 2 and S set the
// private data starts with the RFC 6581 IRD/ORD block:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|A|B|           IRD             |C|D|          ORD              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// A: peer-to-peer mode (a ready-to-receive message is exchanged), B: the
// RTR may be a zero-length Send, C: a zero-length RDMA Write, D: a
// zero-length RDMA Read. The ULP's own private data follows.
//
// Full operation: every DDP segment travels in one FPDU:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          ULPDU_Length         |                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//	~                  ULPDU (DDP header and payload)               ~
//	|                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                               |   PAD (0-3 bytes, zero)       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          CRC32c                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The CRC covers ULPDU_Length, ULPDU and PAD; it is zero when neither side
// asked for CRCs.

const (
	mpaKeyLen       = 16
	mpaHeaderLen    = 20 // key, flags, rev, PD_Length
	mpaMaxPD        = 512
	mpaEnhancedLen  = 4 // RFC 6581 IRD/ORD block
	mpaMaxULPDUData = 512 - mpaEnhancedLen

	mpaFlagMarkers  = 0x80
	mpaFlagCRC      = 0x40
	mpaFlagReject   = 0x20
	mpaFlagEnhanced = 0x10

	mpaRTRPeerToPeer = 0x8000 // A, in the IRD word
	mpaRTRZeroSend   = 0x4000 // B, in the IRD word
	mpaRTRZeroWrite  = 0x8000 // C, in the ORD word
	mpaRTRZeroRead   = 0x4000 // D, in the ORD word
	mpaIRDORDMask    = 0x3fff

	fpduLenField = 2
	fpduCRCLen   = 4
	// fpduMaxULPDU is the largest ULPDU the 16-bit length field can carry
	// with the FPDU still 4-byte aligned.
	fpduMaxULPDU = 65535 - 1
)

var (
	mpaKeyReq = [mpaKeyLen]byte{'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e'}
	mpaKeyRep = [mpaKeyLen]byte{'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e'}
)

// ErrMPA is the cause of every MPA negotiation failure.
var ErrMPA = errors.New("iwarp: MPA negotiation")

// mpaFrame is a decoded MPA Request or Reply frame.
type mpaFrame struct {
	Reply    bool
	Markers  bool
	CRC      bool
	Reject   bool
	Enhanced bool // S bit with Rev 2: the RFC 6581 IRD/ORD block is present
	Rev      uint8
	// RFC 6581 fields, valid when Enhanced.
	IRD, ORD   uint16 // 14 bits each
	PeerToPeer bool   // A
	RTRSend    bool   // B
	RTRWrite   bool   // C
	RTRRead    bool   // D
	// Private is the ULP private data (after the IRD/ORD block).
	Private []byte
}

// appendMPAFrame appends the wire form of f.
func appendMPAFrame(b []byte, f *mpaFrame) ([]byte, error) {
	pdLen := len(f.Private)
	if f.Enhanced {
		pdLen += mpaEnhancedLen
	}
	if pdLen > mpaMaxPD {
		return b, fmt.Errorf("%w: %d bytes of private data, MPA allows %d", ErrMPA, len(f.Private), mpaMaxPD-(pdLen-len(f.Private)))
	}
	if f.Reply {
		b = append(b, mpaKeyRep[:]...)
	} else {
		b = append(b, mpaKeyReq[:]...)
	}
	var flags byte
	if f.Markers {
		flags |= mpaFlagMarkers
	}
	if f.CRC {
		flags |= mpaFlagCRC
	}
	if f.Reject {
		flags |= mpaFlagReject
	}
	if f.Enhanced {
		flags |= mpaFlagEnhanced
	}
	b = append(b, flags, f.Rev)
	b = binary.BigEndian.AppendUint16(b, uint16(pdLen))
	if f.Enhanced {
		ird := f.IRD & mpaIRDORDMask
		ord := f.ORD & mpaIRDORDMask
		if f.PeerToPeer {
			ird |= mpaRTRPeerToPeer
		}
		if f.RTRSend {
			ird |= mpaRTRZeroSend
		}
		if f.RTRWrite {
			ord |= mpaRTRZeroWrite
		}
		if f.RTRRead {
			ord |= mpaRTRZeroRead
		}
		b = binary.BigEndian.AppendUint16(b, ird)
		b = binary.BigEndian.AppendUint16(b, ord)
	}
	return append(b, f.Private...), nil
}

// parseMPAHeader decodes the fixed 20-byte part of a Request or Reply
// frame and returns the private data length that follows.
func parseMPAHeader(h []byte, f *mpaFrame) (pdLen int, err error) {
	if len(h) < mpaHeaderLen {
		return 0, fmt.Errorf("%w: frame header is %d bytes, want %d", ErrMPA, len(h), mpaHeaderLen)
	}
	switch [mpaKeyLen]byte(h[:mpaKeyLen]) {
	case mpaKeyReq:
		f.Reply = false
	case mpaKeyRep:
		f.Reply = true
	default:
		return 0, fmt.Errorf("%w: bad key %q (want \"MPA ID Req Frame\" or \"MPA ID Rep Frame\")", ErrMPA, h[:mpaKeyLen])
	}
	flags := h[16]
	f.Markers = flags&mpaFlagMarkers != 0
	f.CRC = flags&mpaFlagCRC != 0
	f.Reject = flags&mpaFlagReject != 0
	f.Rev = h[17]
	f.Enhanced = f.Rev >= 2 && flags&mpaFlagEnhanced != 0
	if f.Rev != 1 && f.Rev != 2 {
		return 0, fmt.Errorf("%w: unsupported MPA revision %d", ErrMPA, f.Rev)
	}
	pdLen = int(binary.BigEndian.Uint16(h[18:20]))
	if pdLen > mpaMaxPD {
		return 0, fmt.Errorf("%w: PD_Length %d exceeds %d", ErrMPA, pdLen, mpaMaxPD)
	}
	if f.Enhanced && pdLen < mpaEnhancedLen {
		return 0, fmt.Errorf("%w: Rev 2 enhanced frame with %d bytes of private data, need the %d-byte IRD/ORD block", ErrMPA, pdLen, mpaEnhancedLen)
	}
	return pdLen, nil
}

// parseMPAPrivate decodes the private data of a frame whose header
// parseMPAHeader accepted. f.Private aliases pd.
func parseMPAPrivate(pd []byte, f *mpaFrame) {
	if f.Enhanced {
		ird := binary.BigEndian.Uint16(pd[0:2])
		ord := binary.BigEndian.Uint16(pd[2:4])
		f.IRD = ird & mpaIRDORDMask
		f.ORD = ord & mpaIRDORDMask
		f.PeerToPeer = ird&mpaRTRPeerToPeer != 0
		f.RTRSend = ird&mpaRTRZeroSend != 0
		f.RTRWrite = ord&mpaRTRZeroWrite != 0
		f.RTRRead = ord&mpaRTRZeroRead != 0
		pd = pd[mpaEnhancedLen:]
	}
	f.Private = pd
}

// decodeMPAFrame decodes a whole Request or Reply frame held in b and
// returns the number of bytes it used.
func decodeMPAFrame(b []byte, f *mpaFrame) (int, error) {
	pdLen, err := parseMPAHeader(b, f)
	if err != nil {
		return 0, err
	}
	if len(b) < mpaHeaderLen+pdLen {
		return 0, fmt.Errorf("%w: frame truncated: %d of %d private data bytes", ErrMPA, len(b)-mpaHeaderLen, pdLen)
	}
	parseMPAPrivate(b[mpaHeaderLen:mpaHeaderLen+pdLen], f)
	return mpaHeaderLen + pdLen, nil
}

// readMPAFrame reads one Request or Reply frame from r.
func readMPAFrame(r io.Reader, f *mpaFrame) error {
	var h [mpaHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return fmt.Errorf("%w: reading frame header: %w", ErrMPA, err)
	}
	pdLen, err := parseMPAHeader(h[:], f)
	if err != nil {
		return err
	}
	pd := make([]byte, pdLen)
	if _, err := io.ReadFull(r, pd); err != nil {
		return fmt.Errorf("%w: reading %d bytes of private data: %w", ErrMPA, pdLen, err)
	}
	parseMPAPrivate(pd, f)
	return nil
}

// fpduPad is the number of zero bytes after a ULPDU of n bytes so that the
// FPDU (length field, ULPDU, pad) is a multiple of 4.
func fpduPad(n int) int { return (4 - (fpduLenField+n)&3) & 3 }

// fpduSize is the wire size of an FPDU carrying a ULPDU of n bytes.
func fpduSize(n int) int { return fpduLenField + n + fpduPad(n) + fpduCRCLen }
