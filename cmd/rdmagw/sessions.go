package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
)

func init() {
	register("sessions", "list a running gateway's clients and backend connections (sessions -s /run/rdmagw/admin.sock)", sessions)
	register("drain", "drain a running gateway and make it exit, as SIGTERM does (drain -s /run/rdmagw/admin.sock)", drain)
}

// adminFlags are how the admin subcommands find the gateway: its admin
// socket, its metrics URL (for sessions, with metrics.sessions on), or
// its config file, which names either.
type adminFlags struct {
	socket, url, config *string
}

func newAdminFlags(fs *flag.FlagSet, withURL bool) *adminFlags {
	a := &adminFlags{
		socket: fs.String("s", "", "the gateway's admin socket (admin.socket)"),
		config: fs.String("c", "", "the gateway's config file: use its admin.socket (or metrics.listen with metrics.sessions)"),
	}
	if withURL {
		a.url = fs.String("u", "", "the gateway's metrics URL (http://host:port) with metrics.sessions on")
	} else {
		a.url = new(string)
	}
	return a
}

// client returns an HTTP client and the base URL to reach the gateway.
func (a *adminFlags) client() (*http.Client, string, error) {
	sock, url := *a.socket, strings.TrimSuffix(*a.url, "/")
	if sock == "" && url == "" && *a.config != "" {
		cfg, err := gateway.LoadConfig(*a.config)
		if err != nil {
			return nil, "", err
		}
		switch {
		case cfg.Admin.Socket != "":
			sock = cfg.Admin.Socket
		case a.url != nil && cfg.Metrics.Sessions && cfg.Metrics.Listen != "":
			url = "http://" + cfg.Metrics.Listen
		default:
			return nil, "", fmt.Errorf("%s: neither admin.socket nor metrics.sessions is set", *a.config)
		}
	}
	switch {
	case sock != "":
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}
		return &http.Client{Transport: tr, Timeout: 30 * time.Second}, "http://admin", nil
	case url != "":
		return &http.Client{Timeout: 30 * time.Second}, url, nil
	}
	return nil, "", errors.New("say where the gateway is: -s SOCKET, -u URL or -c CONFIG")
}

// sessions prints the live view: a table, or the JSON with -json.
func sessions(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sessions", flag.ContinueOnError)
	fs.SetOutput(stderr)
	af := newAdminFlags(fs, true)
	asJSON := fs.Bool("json", false, "print the JSON as the gateway serves it")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	hc, base, err := af.client()
	if err != nil {
		fmt.Fprintf(stderr, "rdmagw sessions: %v\n", err)
		return 2
	}
	resp, err := hc.Get(base + gateway.SessionsPath)
	if err != nil {
		fmt.Fprintf(stderr, "rdmagw sessions: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "rdmagw sessions: %s: %s %v\n", resp.Status, strings.TrimSpace(string(body)), errText(err))
		return 1
	}
	if *asJSON {
		stdout.Write(body)
		return 0
	}
	var s gateway.Sessions
	if err := json.Unmarshal(body, &s); err != nil {
		fmt.Fprintf(stderr, "rdmagw sessions: %v\n", err)
		return 1
	}
	printSessions(stdout, &s)
	return 0
}

// printSessions writes the live view as a table, one client a line.
func printSessions(w io.Writer, s *gateway.Sessions) {
	state := ""
	if s.Draining {
		state = ", draining"
	}
	fmt.Fprintf(w, "%s gateway on %s, backend %s: %d clients%s\n", s.Mode, s.Listen, s.Backend, len(s.Clients), state)
	defer printParked(w, s.Backends)
	if len(s.Clients) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENT\tCREDITS USED/GRANTED\tINLINE RECV/SEND\tCALLS\tBYTES IN\tBYTES OUT\tAGE\tIDLE\tBACKEND LOCAL -> REMOTE")
	for _, c := range s.Clients {
		flag := ""
		if c.Draining {
			flag = " (draining)"
		}
		fmt.Fprintf(tw, "%s%s\t%d/%d\t%d/%d\t%d\t%s\t%s\t%s\t%s\t%s %s -> %s\n", c.Peer, flag,
			c.CreditsInUse, c.CreditsGranted, c.InlineRecv, c.InlineSend, c.CallsInFlight,
			humanBytes(c.BytesIn), humanBytes(c.BytesOut), roundDur(c.AgeSeconds), roundDur(c.IdleSeconds),
			c.Backend.Transport, orDash(c.Backend.Local), c.Backend.Remote)
	}
	tw.Flush()
}

// printParked lists the backend connections kept for clients gone.
func printParked(w io.Writer, bs []gateway.BackendConnInfo) {
	n := 0
	for _, b := range bs {
		if b.State != "parked" {
			continue
		}
		if n == 0 {
			fmt.Fprintln(w, "parked backend connections (kept for their client's reconnection):")
		}
		n++
		fmt.Fprintf(w, "  client %s: %s %s -> %s\n", b.Client, b.Transport, b.Local, b.Remote)
	}
}

func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f%ciB", v, "KMGT"[i])
}

func roundDur(sec float64) string {
	return (time.Duration(sec * float64(time.Second))).Round(time.Second).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// drain asks the gateway to drain and exit, then waits until it has
// (its admin socket stops answering), up to -wait.
func drain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("drain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	af := newAdminFlags(fs, false)
	wait := fs.Duration("wait", 0, "wait this long for the gateway to finish (0: return once the drain has begun)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *af.socket == "" && *af.config == "" {
		fmt.Fprintln(stderr, "rdmagw drain: the drain is only on the admin socket: -s SOCKET or -c CONFIG")
		return 2
	}
	hc, base, err := af.client()
	if err != nil {
		fmt.Fprintf(stderr, "rdmagw drain: %v\n", err)
		return 2
	}
	resp, err := hc.Post(base+drainPath, "", nil)
	if err != nil {
		fmt.Fprintf(stderr, "rdmagw drain: %v\n", err)
		return 1
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		fmt.Fprintf(stderr, "rdmagw drain: %s: %s\n", resp.Status, strings.TrimSpace(string(body)))
		return 1
	}
	fmt.Fprintf(stdout, "draining: %s\n", strings.TrimSpace(string(body)))
	for deadline := time.Now().Add(*wait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		r, err := hc.Get(base + gateway.SessionsPath)
		if err != nil {
			fmt.Fprintln(stdout, "gateway stopped")
			return 0
		}
		r.Body.Close()
	}
	if *wait > 0 {
		fmt.Fprintf(stderr, "rdmagw drain: gateway still running after %v\n", *wait)
		return 1
	}
	return 0
}
