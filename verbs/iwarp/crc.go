package iwarp

import (
	"encoding/binary"
	"hash/crc32"
)

// castagnoli is the CRC32c table MPA uses (RFC 5044 section 6.5, the same
// polynomial as iSCSI). hash/crc32 picks the SSE4.2/ARMv8 instructions for
// it, so checking a placed 64 KiB segment costs a few microseconds.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcUpdate continues a CRC32c over p.
func crcUpdate(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }

// putCRC stores an MPA CRC the way Linux siw and cxgb4 put it on the wire:
// the final (inverted) CRC32c value, least significant byte first.
func putCRC(b []byte, crc uint32) { binary.LittleEndian.PutUint32(b, crc) }

// getCRC reads an MPA CRC field.
func getCRC(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
