// Command progwrite copies a file in fixed-size writes, optionally with
// O_DIRECT, fsyncs it, and logs the time each write returned, so that a
// case can see exactly when a write stalled and when it moved again.
//
//	progwrite -src /tmp/src.bin -dst /mnt/nfs/f.bin -bs 1048576 -direct -log /tmp/progress.txt
//
// Every line of -log is "UNIXTIME OFFSET" (seconds with microseconds, the
// file offset reached), written and flushed after each write returns;
// the last line is "UNIXTIME fsync" once fsync returned. The exit status
// is 0 when every byte was written and fsync succeeded, 1 otherwise (the
// error on stderr). The kernel lab's failover case (60-failover) kills the
// active gateway when the log passes a quarter of the file and measures
// the stall from the kill to the next line.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

func main() {
	src := flag.String("src", "", "file to copy")
	dst := flag.String("dst", "", "file to create (truncated)")
	bs := flag.Int("bs", 1<<20, "bytes per write")
	direct := flag.Bool("direct", false, "open dst with O_DIRECT")
	logPath := flag.String("log", "", "progress log (default stdout)")
	flag.Parse()
	if err := run(*src, *dst, *bs, *direct, *logPath); err != nil {
		fmt.Fprintln(os.Stderr, "progwrite:", err)
		os.Exit(1)
	}
}

func run(src, dst string, bs int, direct bool, logPath string) error {
	if src == "" || dst == "" || bs <= 0 {
		return fmt.Errorf("usage: progwrite -src FILE -dst FILE [-bs N] [-direct] [-log FILE]")
	}
	logw := os.Stdout
	if logPath != "" {
		f, err := os.Create(logPath)
		if err != nil {
			return err
		}
		defer f.Close()
		logw = f
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if direct {
		flags |= syscall.O_DIRECT
	}
	out, err := os.OpenFile(dst, flags, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	// page-aligned, as O_DIRECT wants on most file systems
	buf, err := syscall.Mmap(-1, 0, bs, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return err
	}
	defer syscall.Munmap(buf)
	var off int64
	for {
		n, rerr := io.ReadFull(in, buf)
		if n > 0 {
			if _, err := out.Write(buf[:n]); err != nil {
				return fmt.Errorf("write at offset %d: %w", off, err)
			}
			off += int64(n)
			logLine(logw, fmt.Sprint(off))
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if err := out.Sync(); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	logLine(logw, "fsync")
	return out.Close()
}

// logLine writes "UNIXTIME WHAT" in one write(2): a reader polling the
// file sees whole lines.
func logLine(w io.Writer, what string) {
	now := time.Now()
	fmt.Fprintf(w, "%d.%06d %s\n", now.Unix(), now.Nanosecond()/1000, what)
}
