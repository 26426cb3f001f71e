package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/rdmagw/rdmagw/internal/tcprelay"
)

func init() {
	register("tcprelay", "diagnostic: a minimal Go TCP relay (bench -anchors), to measure what Go's runtime costs a relay", tcprelayCmd)
}

// tcprelayCmd is `rdmagw tcprelay -mode netpoll|epoll -listen A
// -backend B [-procs N]`: it relays until SIGINT or SIGTERM.
func tcprelayCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tcprelay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mode := fs.String("mode", "netpoll", "netpoll: a goroutine per direction on Go's netpoller; epoll: run to completion on locked threads, one epoll each (haproxy's design)")
	listen := fs.String("listen", "127.0.0.1:0", "where to listen (host:port)")
	backend := fs.String("backend", "", "where every connection is relayed to (host:port)")
	procs := fs.Int("procs", 0, "GOMAXPROCS (0: Go's default)")
	workers := fs.Int("workers", 0, "epoll mode: its threads (0: one per proc)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *backend == "" || *procs < 0 || *workers < 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: rdmagw tcprelay -mode netpoll|epoll -listen host:port -backend host:port [-procs N] [-workers N]")
		return 2
	}
	if *procs > 0 {
		runtime.GOMAXPROCS(*procs)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := tcprelay.Start(ctx, tcprelay.Config{Mode: tcprelay.Mode(*mode), Listen: *listen, Backend: *backend, Workers: *workers})
	if err != nil {
		fmt.Fprintf(stderr, "rdmagw tcprelay: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "rdmagw tcprelay: %s on %s -> %s, GOMAXPROCS %d\n", *mode, r.Addr(), *backend, runtime.GOMAXPROCS(0))
	<-ctx.Done()
	if err := r.Close(); err != nil {
		fmt.Fprintf(stderr, "rdmagw tcprelay: %v\n", err)
		return 1
	}
	return 0
}
