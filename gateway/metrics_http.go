package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsServer serves /metrics for Prometheus from the gateway's own
// registry, and with metrics.pprof Go's profiler under /debug/pprof/.
type MetricsServer struct {
	ln  net.Listener
	srv *http.Server
	mux *http.ServeMux // more endpoints join it (ops_http.go)

	sessionsOn atomic.Bool // metrics.sessions: /debug/sessions answers
}

// StartMetrics serves /metrics on cfg.Metrics.Listen unless it is empty,
// and returns the server (nil when off) and its URL for the start-up log.
func StartMetrics(cfg *Config, met *Metrics, log hclog.Logger) (*MetricsServer, string, error) {
	if cfg.Metrics.Listen == "" {
		return nil, "off", nil
	}
	ms, err := startMetricsServer(cfg.Metrics.Listen, cfg.Metrics.Pprof, met, log)
	if err != nil {
		return nil, "", err
	}
	return ms, "http://" + ms.Addr().String() + "/metrics", nil
}

func startMetricsServer(addr string, pprofOn bool, m *Metrics, log hclog.Logger) (*MetricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{
		ErrorLog: log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}))
	if pprofOn {
		// Registered explicitly: importing net/http/pprof would also put
		// them on http.DefaultServeMux.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "rdmagw: metrics at /metrics")
	})
	ms := &MetricsServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, mux: mux}
	go func() {
		if err := ms.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics endpoint stopped", "listen", addr, "error", err)
		}
	}()
	return ms, nil
}

func (ms *MetricsServer) Addr() net.Addr { return ms.ln.Addr() }

func (ms *MetricsServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return ms.srv.Shutdown(ctx)
}
