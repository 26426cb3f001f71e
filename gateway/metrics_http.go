package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsServer serves /metrics for Prometheus from the gateway's own
// registry.
type metricsServer struct {
	ln  net.Listener
	srv *http.Server
}

func startMetricsServer(addr string, m *Metrics, log hclog.Logger) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{
		ErrorLog: log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "rdmagw: metrics at /metrics")
	})
	ms := &metricsServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := ms.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics endpoint stopped", "listen", addr, "error", err)
		}
	}()
	return ms, nil
}

func (ms *metricsServer) addr() net.Addr { return ms.ln.Addr() }

func (ms *metricsServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return ms.srv.Shutdown(ctx)
}
