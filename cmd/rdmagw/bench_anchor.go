package main

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/rdmagw/rdmagw/internal/tcprelay"
)

// Anchors (-anchors): minimal Go TCP relays (`rdmagw tcprelay`, package
// internal/tcprelay) in front of the same backend as haproxy, each its
// own process and its own path, measured like haproxy. A diagnostic:
// what Go's runtime costs the same relay, next to what the gateway
// costs.

// benchAnchor is one -anchors entry, and once started its process.
type benchAnchor struct {
	Path  string `json:"path"` // "tcprelay-netpoll-p1"
	Mode  string `json:"mode"`
	Procs int    `json:"procs"` // its GOMAXPROCS
	// Workers is the epoll mode's threads (0: one per proc).
	Workers int    `json:"workers,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Addr    string `json:"address,omitempty"`
}

// anchorPathPrefix starts the path name of every anchor.
const anchorPathPrefix = "tcprelay-"

func isAnchorPath(path string) bool { return strings.HasPrefix(path, anchorPathPrefix) }

// parseAnchors reads "netpoll:1,epoll:2,epoll:2:1": relay modes, each
// at a GOMAXPROCS, epoll optionally with fewer threads (WORKERS); ""
// is none.
func parseAnchors(s string) ([]benchAnchor, error) {
	if s == "" {
		return nil, nil
	}
	return parseList(s, func(f string) (benchAnchor, error) {
		a, err := parseAnchor(f)
		if err != nil {
			return a, fmt.Errorf("%q: want MODE:PROCS[:WORKERS] (MODE netpoll or epoll, PROCS 1 to 64, WORKERS epoll threads 1 to PROCS), separated by commas", s)
		}
		return a, nil
	})
}

func parseAnchor(f string) (benchAnchor, error) {
	parts := strings.Split(f, ":")
	bad := errors.New("bad anchor")
	if len(parts) < 2 || len(parts) > 3 || (parts[0] != string(tcprelay.ModeNetpoll) && parts[0] != string(tcprelay.ModeEpoll)) {
		return benchAnchor{}, bad
	}
	a := benchAnchor{Mode: parts[0]}
	var err error
	if a.Procs, err = strconv.Atoi(parts[1]); err != nil || a.Procs < 1 || a.Procs > 64 {
		return a, bad
	}
	a.Path = fmt.Sprintf("%s%s-p%d", anchorPathPrefix, a.Mode, a.Procs)
	if len(parts) == 3 {
		if a.Workers, err = strconv.Atoi(parts[2]); err != nil || a.Mode != string(tcprelay.ModeEpoll) || a.Workers < 1 || a.Workers > a.Procs {
			return a, bad
		}
		a.Path += fmt.Sprintf("-w%d", a.Workers)
	}
	return a, nil
}

// startAnchors starts one `rdmagw tcprelay` per anchor in front of
// backend.
func (st *benchStack) startAnchors(anchors []benchAnchor, backend string) error {
	exe, err := benchExecutable()
	if err != nil {
		return err
	}
	for i := range anchors {
		a := &anchors[i]
		port, err := freeTCPPort()
		if err != nil {
			return err
		}
		a.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		p, err := startBenchProc("rdmagw tcprelay", exec.Command(exe, "tcprelay", "-mode", a.Mode,
			"-listen", a.Addr, "-backend", backend, "-procs", strconv.Itoa(a.Procs), "-workers", strconv.Itoa(a.Workers)))
		if err != nil {
			return err
		}
		st.procs = append(st.procs, p)
		if err := p.waitListening(a.Addr, 10*time.Second); err != nil {
			return err
		}
		a.PID = p.pid()
	}
	return nil
}
