package iwarp

import (
	"encoding/binary"
	"fmt"
)

// RDMAP (RFC 5040) rides in DDP's RsvdULP fields. Its control field is the
// second byte of every DDP header:
//
//	 0 1 2 3 4 5 6 7
//	+-+-+-+-+-+-+-+-+
//	|RV |Rsv| OpCode|
//	+-+-+-+-+-+-+-+-+
//
// RV is the RDMAP version (1). An RDMA Read Request is an untagged message
// on QN 1 whose 28-byte payload names the sink and the source:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Data Sink STag                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  Data Sink Tagged Offset (64)                 |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  RDMA Read Message Size                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Data Source STag                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Data Source Tagged Offset (64)                |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+

type rdmapOpcode uint8

const (
	opWrite       rdmapOpcode = 0x0
	opReadReq     rdmapOpcode = 0x1
	opReadResp    rdmapOpcode = 0x2
	opSend        rdmapOpcode = 0x3
	opSendInv     rdmapOpcode = 0x4
	opSendSE      rdmapOpcode = 0x5
	opSendSEInv   rdmapOpcode = 0x6
	opTerminate   rdmapOpcode = 0x7
	rdmapVersion              = 1
	rdmapVerShift             = 6

	rdmapOpcodeMask = 0x0f
	readReqLen      = 28
)

var opcodeNames = [...]string{"RDMA Write", "RDMA Read Request", "RDMA Read Response", "Send",
	"Send with Invalidate", "Send with SE", "Send with SE and Invalidate", "Terminate"}

func (o rdmapOpcode) String() string {
	if int(o) < len(opcodeNames) {
		return opcodeNames[o]
	}
	return fmt.Sprintf("opcode %#x", uint8(o))
}

// tagged reports whether the opcode uses the tagged buffer model.
func (o rdmapOpcode) tagged() bool { return o == opWrite || o == opReadResp }

// rdmapCtrl builds the RDMAP control byte.
func rdmapCtrl(op rdmapOpcode) uint8 { return rdmapVersion<<rdmapVerShift | uint8(op) }

// readRequest is the payload of an RDMA Read Request.
type readRequest struct {
	SinkSTag uint32
	SinkTO   uint64
	Size     uint32
	SrcSTag  uint32
	SrcTO    uint64
}

func (r *readRequest) put(b []byte) {
	binary.BigEndian.PutUint32(b[0:4], r.SinkSTag)
	binary.BigEndian.PutUint64(b[4:12], r.SinkTO)
	binary.BigEndian.PutUint32(b[12:16], r.Size)
	binary.BigEndian.PutUint32(b[16:20], r.SrcSTag)
	binary.BigEndian.PutUint64(b[20:28], r.SrcTO)
}

func (r *readRequest) parse(b []byte) error {
	if len(b) != readReqLen {
		return fmt.Errorf("iwarp: RDMA Read Request payload is %d bytes, want %d", len(b), readReqLen)
	}
	r.SinkSTag = binary.BigEndian.Uint32(b[0:4])
	r.SinkTO = binary.BigEndian.Uint64(b[4:12])
	r.Size = binary.BigEndian.Uint32(b[12:16])
	r.SrcSTag = binary.BigEndian.Uint32(b[16:20])
	r.SrcTO = binary.BigEndian.Uint64(b[20:28])
	return nil
}
