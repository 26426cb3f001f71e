package iwarp

import (
	"encoding/binary"

	"github.com/rdmagw/rdmagw/internal/crc32c"
)

// crcUpdate continues the MPA CRC (RFC 5044 section 6.5: CRC32c, the
// polynomial of iSCSI) over p. internal/crc32c folds with AVX-512
// carry-less multiplies where the CPU has them (about 20 GB/s on a
// payload no longer in cache, against hash/crc32's 9) and is hash/crc32
// elsewhere; checking a placed 64 KiB segment costs a few microseconds.
func crcUpdate(crc uint32, p []byte) uint32 { return crc32c.Update(crc, p) }

// putCRC stores an MPA CRC the way Linux siw and cxgb4 put it on the wire:
// the final (inverted) CRC32c value, least significant byte first.
func putCRC(b []byte, crc uint32) { binary.LittleEndian.PutUint32(b, crc) }

// getCRC reads an MPA CRC field.
func getCRC(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
