// Package nbcall makes the system calls of non-blocking socket I/O
// (internal/sockread, internal/sockwrite, verbs/iwarp's reads): a small
// one as a raw system call, which the Go runtime does not see, and a
// bulk one as an ordinary system call, which it does.
//
// An ordinary system call (syscall.Syscall) enters and leaves the
// runtime's syscall state: the goroutine's P is marked as in a system
// call, and sysmon takes it from a call that lasts over about 20 µs
// (retake), hands it to another thread (waking one, a futex), and on
// return exitsyscall finds its P gone: the thread parks and the goroutine
// waits for a P. A write to a loopback socket runs the receiver's TCP
// processing inside the call and often lasts that long, so one RPC
// through the gateway paid context switches for nothing: the calls here
// never block (the sockets are non-blocking), so there is no P to hand
// over. A raw call (syscall.RawSyscall) keeps the P. Measured on the
// forward gateway in front of nfs-ganesha, one call at a time (rdmagw
// bench -relay haproxy, 2 cores), the gateway's context switches per
// GETATTR went from 4.7 to 2.0 (haproxy's: 2.0) and per 4 KiB WRITE from
// 8.7 to 3.1, its CPU per call by 20% and 40%.
//
// What a raw call costs is that its P runs nothing else while the kernel
// copies: nothing for a message, about as long as sysmon lets an ordinary
// call keep it for a copy up to RawMax, and a parallelism loss for a bulk
// copy of a megabyte (a 1 MiB READ's body, a WRITE's call), which
// therefore stays an ordinary call so that the P serves other goroutines
// meanwhile.
//
// RawMax covers the pure-Go provider's receive reads: a 64 KiB FPDU
// payload read straight into its destination with the 128 KiB bulk buffer
// behind it (verbs/iwarp, rx.go), 20-40 µs of copying. As ordinary calls
// (RawMax was 64 KiB) each of them entered the syscall state, and in a
// gateway whose Ps had been idle (one call at a time) entering it woke
// sysmon from its deep sleep (a futex) every time: a 1 MiB WRITE, whose
// data the gateway receives as RDMA Read Responses, paid 16 context
// switches per op; at 256 KiB 9.5, and 22% less gateway CPU per op
// (rdmagw bench -relay haproxy, write-1m at 1 in flight, 1,136 -> 881 µs,
// three rounds; read-1m, whose bodies the backend reads take in
// megabyte calls, unchanged).
package nbcall

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// RawMax is the most bytes a call moves as a raw system call.
const RawMax = 256 << 10

// Call makes system call trap, which moves at most n bytes on a
// non-blocking descriptor and never waits: raw when n <= RawMax.
func Call(n int, trap, a1, a2, a3 uintptr) (uintptr, syscall.Errno) {
	if n <= RawMax {
		r, _, e := unix.RawSyscall(trap, a1, a2, a3)
		return r, e
	}
	r, _, e := unix.Syscall(trap, a1, a2, a3)
	return r, e
}
