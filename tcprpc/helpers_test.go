package tcprpc

import (
	"encoding/binary"
	"io"
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
func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// frag builds one fragment by hand: header word then data.
func frag(last bool, data []byte) []byte {
	h := uint32(len(data))
	if last {
		h |= 1 << 31
	}
	return cat(be(h), data)
}

// seq returns n bytes counting up from start, so misplaced bytes show.
func seq(start byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = start + byte(i*7+i/251)
	}
	return b
}

// readCall is one Read on a countingReader.
type readCall struct {
	ptr   *byte // &p[0]
	len   int   // len(p)
	n     int   // bytes returned
	inDst bool  // p lies within the watched destination buffer
}

// countingReader records every Read and whether it went into dst.
type countingReader struct {
	r     io.Reader
	dst   []byte
	calls []readCall
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	call := readCall{len: len(p), n: n}
	if len(p) > 0 {
		call.ptr = &p[0]
		call.inDst = within(p, c.dst)
	}
	c.calls = append(c.calls, call)
	return n, err
}

// within reports whether p is a sub-slice of dst's memory.
func within(p, dst []byte) bool {
	if len(p) == 0 || len(dst) == 0 {
		return false
	}
	for i := range dst {
		if &dst[i] == &p[0] {
			return i+len(p) <= len(dst)
		}
	}
	return false
}
