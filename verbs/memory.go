package verbs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Memory is a block of anonymous memory outside the Go heap, so the
// garbage collector never moves it and it can be registered with an RDMA
// device. It is page-aligned, zero-filled and locked against swapping when
// the process may lock memory.
type Memory struct {
	b        []byte
	HugePage bool // backed by huge pages
}

// Alloc maps size bytes (rounded up to a page). It tries 2 MiB huge pages
// first when size is a multiple of 2 MiB, and falls back to normal pages.
func Alloc(size int) (*Memory, error) {
	if size <= 0 {
		return nil, fmt.Errorf("verbs: alloc of %d bytes", size)
	}
	page := unix.Getpagesize()
	size = (size + page - 1) &^ (page - 1)
	const huge = 2 << 20
	if size%huge == 0 {
		b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE,
			unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_HUGETLB|unix.MAP_POPULATE)
		if err == nil {
			return &Memory{b: b, HugePage: true}, nil
		}
	}
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("verbs: mmap %d bytes: %w", size, err)
	}
	_ = unix.Mlock(b) // best effort: registration pins pages anyway on real HCAs
	return &Memory{b: b}, nil
}

// Bytes is the mapped memory.
func (m *Memory) Bytes() []byte { return m.b }

// Free unmaps the memory. Deregister every MR over it first.
func (m *Memory) Free() error {
	if m.b == nil {
		return nil
	}
	err := unix.Munmap(m.b)
	m.b = nil
	return err
}
