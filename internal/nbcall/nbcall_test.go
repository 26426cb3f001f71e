package nbcall

import (
	"bytes"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Call moves bytes both ways, raw (small) or not (bulk), and returns a
// non-blocking descriptor's EAGAIN as its errno.
func TestCall(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	for _, size := range []int{1, RawMax, RawMax + 1} {
		in := make([]byte, min(size, 4096))
		for i := range in {
			in[i] = byte(i*13 + size)
		}
		out := make([]byte, len(in))
		// size is what the call may move: the raw choice follows it.
		n, e := Call(size, unix.SYS_WRITE, uintptr(fds[0]), uintptr(unsafe.Pointer(&in[0])), uintptr(len(in)))
		if e != 0 || int(n) != len(in) {
			t.Fatalf("size %d: write %d, %v", size, n, e)
		}
		n, e = Call(size, unix.SYS_READ, uintptr(fds[1]), uintptr(unsafe.Pointer(&out[0])), uintptr(len(out)))
		if e != 0 || int(n) != len(in) || !bytes.Equal(in, out) {
			t.Fatalf("size %d: read %d, %v, equal %v", size, n, e, bytes.Equal(in, out))
		}
		if n, e = Call(size, unix.SYS_READ, uintptr(fds[1]), uintptr(unsafe.Pointer(&out[0])), uintptr(len(out))); e != unix.EAGAIN {
			t.Fatalf("size %d: read of an empty socket: %d, %v; want EAGAIN", size, n, e)
		}
	}
}
