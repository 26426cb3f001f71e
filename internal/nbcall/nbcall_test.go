package nbcall

import (
	"bytes"
	"os"
	"runtime"
	"sync/atomic"
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

// A small call keeps its goroutine's P for its whole length, and a bulk
// one gives it up: with one P, a goroutine that only counts runs during
// a long call (a read of /dev/zero, standing for a kernel copy) made as
// a bulk call, and not at all during such a call made as a small one.
func TestCallKeepsP(t *testing.T) {
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Skip(err)
	}
	defer zero.Close()
	buf := make([]byte, 64<<20)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var count atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				count.Add(1)
			}
		}
	}()
	for count.Load() == 0 {
		runtime.Gosched()
	}
	during := func(n int, b []byte, fresh bool) int64 {
		if fresh {
			// A goroutine that ran 10 ms without a break is preempted
			// as soon as it can be, which could be right after the call
			// and before the second count: start afresh.
			runtime.Gosched()
		}
		c0 := count.Load()
		if _, e := Call(n, unix.SYS_READ, zero.Fd(), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b))); e != 0 {
			t.Fatalf("read: %v", e)
		}
		return count.Load() - c0
	}
	var d int64
	for range 40 { // sysmon takes the P once it sees the call last (up to 10 ms)
		if d = during(RawMax+1, buf, false); d > 0 {
			break
		}
	}
	if d == 0 {
		t.Errorf("a bulk call kept the only P: the counter never ran during it")
	}
	for range 40 { // a call made the ordinary way would lose the P in some of them
		if d := during(1, buf[:8<<20], true); d != 0 { // a few ms: never preempted
			t.Fatalf("a small call gave up the only P: the counter ran %d times during it", d)
		}
	}
}
