package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/internal/version"

	// The pure-Go provider is always linked; ibverbs comes with the
	// ibverbs build tag (provider_ibverbs.go).
	_ "github.com/rdmagw/rdmagw/verbs/iwarp"
)

func init() {
	register("serve", "run the gateway (serve -c configs/forward.yaml)", serve)
}

// serve runs the gateway described by a config file until SIGINT or
// SIGTERM, then shuts down gracefully: it stops accepting, disconnects
// clients (abandoning calls still at the backend; clients retransmit
// after reconnecting) and releases every resource.
func serve(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("c", "configs/forward.yaml", "configuration file (YAML, see configs/forward.yaml)")
	check := fs.Bool("check", false, "validate the configuration and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "rdmagw serve: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cfg, err := gateway.LoadConfig(*path)
	if err != nil {
		fmt.Fprintf(stderr, "rdmagw serve: %v\n", err)
		return 1
	}
	if *check {
		fmt.Fprintf(stdout, "%s: ok\n", *path)
		return 0
	}
	log := gateway.NewLogger(cfg.Log, stderr)
	log.Info("starting", "version", version.String(), "config", *path, "mode", cfg.Mode)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	gw, err := startGateway(cfg, log)
	if err != nil {
		log.Error("cannot start", "error", err)
		return 1
	}
	serveErr := gw.Serve(ctx)
	if err := gw.Close(); err != nil {
		log.Warn("shutdown", "error", err)
	}
	if serveErr != nil {
		log.Error("stopped", "error", serveErr)
		return 1
	}
	log.Info("stopped")
	return 0
}

// gatewayRunner is what serve runs: a forward or a reverse gateway.
type gatewayRunner interface {
	Serve(ctx context.Context) error
	Close() error
}

// startGateway builds the gateway of cfg.Mode.
func startGateway(cfg *gateway.Config, log hclog.Logger) (gatewayRunner, error) {
	if cfg.Mode == "reverse" {
		return gateway.NewReverse(cfg, log)
	}
	return gateway.NewForward(cfg, log)
}
