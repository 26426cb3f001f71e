package main

import (
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
	PID   int    `json:"pid,omitempty"`
	Addr  string `json:"address,omitempty"`
}

// anchorPathPrefix starts the path name of every anchor.
const anchorPathPrefix = "tcprelay-"

func isAnchorPath(path string) bool { return strings.HasPrefix(path, anchorPathPrefix) }

// parseAnchors reads "netpoll:1,epoll:2": relay modes, each at a
// GOMAXPROCS; "" is none.
func parseAnchors(s string) ([]benchAnchor, error) {
	if s == "" {
		return nil, nil
	}
	var out []benchAnchor
	for _, f := range strings.Split(s, ",") {
		mode, p, _ := strings.Cut(strings.TrimSpace(f), ":")
		procs, err := strconv.Atoi(p)
		if (mode != string(tcprelay.ModeNetpoll) && mode != string(tcprelay.ModeEpoll)) || err != nil || procs < 1 || procs > 64 {
			return nil, fmt.Errorf("%q: want MODE:PROCS (MODE netpoll or epoll, PROCS 1 to 64), separated by commas", s)
		}
		out = append(out, benchAnchor{Path: fmt.Sprintf("%s%s-p%d", anchorPathPrefix, mode, procs), Mode: mode, Procs: procs})
	}
	return out, nil
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
			"-listen", a.Addr, "-backend", backend, "-procs", strconv.Itoa(a.Procs)))
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
