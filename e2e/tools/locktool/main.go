// Command locktool takes and tests file locks for the kernel lab's NFSv3
// locking case (e2e/cases/50-v3-locking.sh): the lab needs a process that
// holds an exclusive lock until told to let go, a non-blocking attempt
// whose answer is an exit code, and a blocking wait, for both fcntl (POSIX
// byte-range, NLM on NFSv3) and flock (BSD, which the Linux NFS client
// turns into a whole-file NLM lock). Shell tools cannot hold an fcntl lock.
//
//	locktool hold  fcntl|flock FILE READY   lock, create READY, keep the lock until SIGTERM or SIGINT
//	locktool try   fcntl|flock FILE         exit 0: acquired (and released), 3: held by someone else
//	locktool wait  fcntl|flock FILE         block until acquired, print the seconds waited, release
//
// Exit 1 is any other error (the message says which system call failed).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const exitBusy = 3

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: locktool hold|try|wait fcntl|flock FILE [READY]")
		os.Exit(1)
	}
	cmd, kind, path := os.Args[1], os.Args[2], os.Args[3]
	if kind != "fcntl" && kind != "flock" {
		fail(fmt.Errorf("lock kind %q: want fcntl or flock", kind))
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		fail(err)
	}
	fd := int(f.Fd())
	switch cmd {
	case "try":
		err := lock(fd, kind, false)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EWOULDBLOCK) {
			fmt.Printf("%s %s: busy\n", kind, path)
			os.Exit(exitBusy)
		}
		if err != nil {
			fail(err)
		}
		fmt.Printf("%s %s: acquired\n", kind, path)
		unlockOrFail(fd, kind)
	case "wait":
		t0 := time.Now()
		if err := lock(fd, kind, true); err != nil {
			fail(err)
		}
		fmt.Printf("%s %s: acquired after %.2fs\n", kind, path, time.Since(t0).Seconds())
		unlockOrFail(fd, kind)
	case "hold":
		if len(os.Args) < 5 {
			fail(errors.New("hold needs a READY file"))
		}
		if err := lock(fd, kind, true); err != nil {
			fail(err)
		}
		if err := os.WriteFile(os.Args[4], []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o644); err != nil {
			fail(err)
		}
		fmt.Printf("%s %s: held\n", kind, path)
		// Only a signal ends it: a shell starts background jobs with
		// stdin from /dev/null, so stdin cannot be the leash.
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		unlockOrFail(fd, kind)
		fmt.Printf("%s %s: released\n", kind, path)
	default:
		fail(fmt.Errorf("unknown command %q", cmd))
	}
}

// lock takes an exclusive lock on the whole file.
func lock(fd int, kind string, block bool) error {
	if kind == "flock" {
		how := unix.LOCK_EX
		if !block {
			how |= unix.LOCK_NB
		}
		return wrap("flock", unix.Flock(fd, how))
	}
	cmd := unix.F_SETLK
	if block {
		cmd = unix.F_SETLKW
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	return wrap("fcntl", unix.FcntlFlock(uintptr(fd), cmd, &lk))
}

func unlockOrFail(fd int, kind string) {
	var err error
	if kind == "flock" {
		err = wrap("flock(LOCK_UN)", unix.Flock(fd, unix.LOCK_UN))
	} else {
		lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: io.SeekStart}
		err = wrap("fcntl(F_UNLCK)", unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &lk))
	}
	if err != nil {
		fail(err)
	}
}

func wrap(call string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", call, err)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "locktool:", err)
	os.Exit(1)
}
