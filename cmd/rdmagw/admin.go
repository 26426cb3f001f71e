package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
)

// The admin socket (admin.socket): HTTP on a Unix socket only its owner
// can open (0600), for `rdmagw sessions` (GET /debug/sessions) and
// `rdmagw drain` (POST /drain). The drain is not offered on the metrics
// listener, which any host on the network may reach.

// drainPath is the admin socket's drain command.
const drainPath = "/drain"

type adminServer struct {
	path string
	srv  *http.Server
}

// startAdmin serves the admin socket at path. A stale socket file left
// by a crash is replaced; a live one (another gateway) is an error.
func startAdmin(path string, gw gatewayRunner, drain chan<- struct{}, log hclog.Logger) (*adminServer, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("admin.socket %s: another process is serving it", path)
		}
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin.socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin.socket %s: %w", path, err)
	}
	mux := http.NewServeMux()
	mux.Handle(gateway.SessionsPath, gateway.SessionsHandler(gw.Sessions))
	mux.HandleFunc(drainPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		select {
		case drain <- struct{}{}:
		default: // one already asked for
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		json.NewEncoder(w).Encode(map[string]any{ //nolint:errcheck // the client went away
			"draining":      true,
			"drain_timeout": gw.Config().Shutdown.DrainTimeout.String(),
		})
	})
	a := &adminServer{path: path, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin socket stopped", "socket", path, "error", err)
		}
	}()
	log.Info("admin socket listening", "socket", path)
	return a, nil
}

func (a *adminServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	a.srv.Shutdown(ctx) //nolint:errcheck // exiting
	os.Remove(a.path)
}
