package oncrpc

import (
	"bytes"
	"encoding/binary"
)

// be builds big-endian XDR words.
func be(words ...uint32) []byte {
	b := make([]byte, 4*len(words))
	for i, w := range words {
		binary.BigEndian.PutUint32(b[4*i:], w)
	}
	return b
}

// cat concatenates byte slices.
func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
