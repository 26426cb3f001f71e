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
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/forward"
	"github.com/rdmagw/rdmagw/gateway/reverse"
	"github.com/rdmagw/rdmagw/internal/autoprocs"
	"github.com/rdmagw/rdmagw/internal/sdnotify"
	"github.com/rdmagw/rdmagw/internal/version"
	// The pure-Go provider is always linked; ibverbs comes with the
	// ibverbs build tag (provider_ibverbs.go).
	_ "github.com/rdmagw/rdmagw/verbs/iwarp"
)

func init() {
	register("serve", "run the gateway (serve -c configs/forward.yaml)", serve)
}

// serve runs the gateway described by a config file. It tells systemd
// (Type=notify) when every listener is up, keeps its status line and
// watchdog fed, reloads the file on SIGHUP, and on SIGTERM or SIGINT (or
// `rdmagw drain`) drains: it stops accepting, lets the calls in flight
// finish up to shutdown.drain_timeout, disconnects the clients and
// releases every resource. A second SIGTERM during a drain disconnects
// at once.
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
	autoMax, autoFollow := applyRuntime(cfg.Runtime, log)
	sd, err := sdnotify.FromEnv()
	if err != nil {
		log.Warn("systemd notification socket unusable; not notifying", "error", err)
	}
	// Signals are caught before anything is started: a SIGHUP or SIGTERM
	// during start-up waits for the main loop instead of killing us.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	gw, err := startGateway(cfg, log)
	if err != nil {
		log.Error("cannot start", "error", err)
		sd.Status("cannot start: " + err.Error())
		return 1
	}
	d := &daemon{gw: gw, path: *path, log: log, sd: sd, sigs: sigs, drainReq: make(chan struct{}, 1), autoMax: autoMax, autoFollow: autoFollow}
	return d.run(cfg)
}

// applyRuntime puts runtime.procs in force (GOMAXPROCS; 0 keeps Go's
// default) and logs what runs; the value in force is exported as
// go_sched_gomaxprocs_threads. For auto it returns the most threads the
// controller may set (Go's default: the CPUs the process may use), which
// the daemon starts it with (runProcs), and whether that most follows
// the CPUs the process may use later (not when the GOMAXPROCS environment
// variable set it); otherwise 0.
func applyRuntime(rc gateway.RuntimeConfig, log hclog.Logger) (max int, follow bool) {
	switch {
	case rc.Procs == gateway.ProcsAuto:
		max, follow = runtime.GOMAXPROCS(0), os.Getenv("GOMAXPROCS") == ""
		from := "the CPUs the process may use (affinity, cgroup CPU limit), followed"
		if !follow {
			from = "GOMAXPROCS environment variable"
		}
		log.Info("CPU policy", "procs", "auto", "max", max, "max_from", from, "cpus", runtime.NumCPU())
		return max, follow
	case rc.Procs > 0:
		runtime.GOMAXPROCS(int(rc.Procs))
		log.Info("CPU policy", "procs", runtime.GOMAXPROCS(0), "from", "runtime.procs", "cpus", runtime.NumCPU())
	default:
		log.Info("CPU policy", "procs", runtime.GOMAXPROCS(0), "from", "go default", "cpus", runtime.NumCPU())
	}
	return 0, false
}

// runProcs sizes GOMAXPROCS to the load (runtime.procs: auto) until ctx
// ends: internal/autoprocs, counted and logged by the gateway's metrics.
func (d *daemon) runProcs(ctx context.Context) {
	met := d.gw.Metrics()
	cfg := autoprocs.Config{
		Policy: autoprocs.DefaultPolicy(d.autoMax),
		OnChange: func(from, to int, why autoprocs.Why, s autoprocs.Sample) {
			met.ProcsChanged(d.log, from, to, why.String(), s.CPU, s.Waiting)
		},
	}
	if d.autoFollow {
		cfg.Limit = autoprocs.CPULimit()
	}
	autoprocs.New(cfg).Run(ctx)
}

// gatewayRunner is what serve runs: a forward or a reverse gateway.
type gatewayRunner interface {
	Serve(ctx context.Context) error
	Close() error
	Ready() <-chan struct{}
	Drain(ctx context.Context) gateway.DrainResult
	Sessions() gateway.Sessions
	Alive(ctx context.Context) error
	Status() string
	Reconfigure(next *gateway.Config) (gateway.ReloadResult, error)
	Config() *gateway.Config
	Metrics() *gateway.Metrics
}

// startGateway builds the gateway of cfg.Mode.
func startGateway(cfg *gateway.Config, log hclog.Logger) (gatewayRunner, error) {
	if cfg.Mode == "reverse" {
		return reverse.New(cfg, log)
	}
	return forward.New(cfg, log)
}

// daemon is a running `rdmagw serve`: the gateway, its systemd
// notifications and its admin socket.
type daemon struct {
	gw       gatewayRunner
	path     string
	log      hclog.Logger
	sd       *sdnotify.Notifier // nil outside systemd
	sigs     chan os.Signal
	drainReq chan struct{} // `rdmagw drain` on the admin socket
	autoMax  int           // runtime.procs: auto, up to this many threads (0: not auto)
	// autoFollow: autoMax follows the CPUs the process may use.
	autoFollow bool
}

// statusEvery is how often the STATUS= line is refreshed.
const statusEvery = 5 * time.Second

// livenessHook, when set (tests), runs before every liveness probe: a
// test stalls it to play a wedged gateway.
var livenessHook func(ctx context.Context)

// event is something the daemon did that an operator reads in its log,
// as a value: tests wait for these instead of for log wording.
type event struct {
	kind   eventKind
	err    error                // evLivenessFailed, evReloadRejected
	reload gateway.ReloadResult // evReloaded
	drain  gateway.DrainResult  // evDrained
}

type eventKind int

const (
	evReady          eventKind = iota + 1 // every listener up, READY=1 sent
	evLivenessFailed                      // a liveness probe failed: the watchdog was not fed
	evReloaded                            // the file was reloaded and applied (event.reload)
	evReloadRejected                      // the file did not load or apply; nothing changed (event.err)
	evStopRequested                       // a stop signal or `rdmagw drain`: the drain begins
	evDrained                             // the drain ended (event.drain)
)

// eventHook, when set (tests), is given every event as it happens.
var eventHook func(event)

func (d *daemon) emit(e event) {
	if eventHook != nil {
		eventHook(e)
	}
}

func (d *daemon) run(cfg *gateway.Config) int {
	ctx, stopServe := context.WithCancel(context.Background())
	defer stopServe()
	serveDone := make(chan error, 1)
	go func() { serveDone <- d.gw.Serve(ctx) }()

	admin, ok := d.start(cfg, stopServe, serveDone)
	if !ok {
		return 1
	}
	if admin != nil {
		defer admin.close()
	}
	bg, stopBG := context.WithCancel(ctx)
	defer stopBG()
	if d.autoMax > 0 {
		procsDone := make(chan struct{})
		go func() { d.runProcs(bg); close(procsDone) }()
		// Runs after stopBG: serve returns with the GOMAXPROCS it found.
		defer func() { stopBG(); <-procsDone }()
	}
	d.ready(bg)
	return d.loop(serveDone, stopBG)
}

// start brings up the admin socket and waits until every listener of the
// gateway is up. If something cannot start it logs why, closes the
// gateway and reports false.
func (d *daemon) start(cfg *gateway.Config, stopServe context.CancelFunc, serveDone <-chan error) (*adminServer, bool) {
	var admin *adminServer
	if cfg.Admin.Socket != "" {
		var err error
		if admin, err = startAdmin(cfg.Admin.Socket, d.gw, d.drainReq, d.log); err != nil {
			d.log.Error("cannot start", "error", err)
			stopServe()
			<-serveDone
			d.closeGateway()
			return nil, false
		}
	}
	select {
	case <-d.gw.Ready():
		return admin, true
	case err := <-serveDone: // a listener could not be bound
		d.log.Error("cannot start", "error", err)
		d.sd.Status("cannot start: " + errText(err))
		d.closeGateway()
		if admin != nil {
			admin.close()
		}
		return nil, false
	}
}

// ready tells systemd every listener (clients, metrics, relay, admin
// socket) is up, and feeds its watchdog and status line until bg ends.
func (d *daemon) ready(bg context.Context) {
	d.notify(d.sd.Ready())
	d.notify(d.sd.Status(d.gw.Status()))
	wd := sdnotify.WatchdogInterval()
	d.log.Info("ready", "watchdog", wd)
	if d.sd != nil {
		go sdnotify.RunWatchdog(bg, d.sd, wd, d.probe, func(err error) {
			d.log.Error("liveness probe failed; systemd watchdog not fed", "error", err)
			d.emit(event{kind: evLivenessFailed, err: err})
		})
		go d.statusLoop(bg)
	}
	d.emit(event{kind: evReady})
}

// loop serves signals and drain requests until the gateway's Serve
// returns; its result is serve's exit code.
func (d *daemon) loop(serveDone <-chan error, stopBG context.CancelFunc) int {
	var drainDone chan gateway.DrainResult // not nil once draining
	drained := false                       // its result is reported
	var stopDrain context.CancelFunc = func() {}
	defer func() { stopDrain() }()
	for {
		select {
		case sig := <-d.sigs:
			switch {
			case sig == syscall.SIGHUP:
				d.reload()
			case drainDone != nil:
				d.log.Warn("second stop signal during the drain: disconnecting now", "signal", sig.String())
				stopDrain()
			default:
				d.log.Info("stop requested", "signal", sig.String())
				drainDone, stopDrain = d.drain()
			}
		case <-d.drainReq:
			if drainDone == nil {
				d.log.Info("stop requested", "by", "admin socket")
				drainDone, stopDrain = d.drain()
			}
		case res := <-drainDone:
			d.emit(event{kind: evDrained, drain: res})
			drained = true // Serve returns next
		case serveErr := <-serveDone:
			if drainDone != nil && !drained {
				// The drain's end and Serve's return can be ready
				// at once and select picks either: report the drain
				// first (nothing is left for it to wait for).
				stopDrain()
				d.emit(event{kind: evDrained, drain: <-drainDone})
			}
			stopBG()
			return d.stopped(serveErr, drainDone != nil)
		}
	}
}

// stopped closes the gateway once Serve has returned serveErr; the exit
// code.
func (d *daemon) stopped(serveErr error, drained bool) int {
	if !drained { // Serve ended by itself
		d.notify(d.sd.Stopping())
	}
	if err := d.closeGateway(); err != nil {
		d.log.Warn("shutdown", "error", err)
	}
	if serveErr != nil {
		d.log.Error("stopped", "error", serveErr)
		return 1
	}
	d.log.Info("stopped")
	return 0
}

// drain tells systemd the service is stopping and drains the gateway in
// the background, bounded by shutdown.drain_timeout (as last reloaded).
func (d *daemon) drain() (chan gateway.DrainResult, context.CancelFunc) {
	d.emit(event{kind: evStopRequested})
	d.notify(d.sd.Stopping())
	timeout := d.gw.Config().Shutdown.DrainTimeout
	d.notify(d.sd.Status(fmt.Sprintf("draining (up to %v): %s", timeout, d.gw.Status())))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	done := make(chan gateway.DrainResult, 1)
	go func() { done <- d.gw.Drain(ctx) }()
	return done, cancel
}

// reload re-reads the config file and applies it (Reconfigure); a file
// that does not load changes nothing.
func (d *daemon) reload() {
	d.log.Info("reloading configuration", "config", d.path)
	d.notify(d.sd.Reloading())
	next, err := gateway.LoadConfig(d.path)
	var res gateway.ReloadResult
	if err != nil {
		d.gw.Metrics().ReloadRejected(d.log, err)
	} else {
		res, err = d.gw.Reconfigure(next) // logged and counted by Reconfigure
	}
	if err != nil {
		d.emit(event{kind: evReloadRejected, err: err})
	} else {
		d.emit(event{kind: evReloaded, reload: res})
	}
	d.notify(d.sd.Ready())
	d.notify(d.sd.Status(d.gw.Status()))
}

// probe is the watchdog's liveness probe.
func (d *daemon) probe(ctx context.Context) error {
	if livenessHook != nil {
		livenessHook(ctx)
	}
	return d.gw.Alive(ctx)
}

func (d *daemon) statusLoop(ctx context.Context) {
	t := time.NewTicker(statusEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.notify(d.sd.Status(d.gw.Status()))
		}
	}
}

func (d *daemon) closeGateway() error { return d.gw.Close() }

// notify logs a failed notification (once systemd has gone away, say).
func (d *daemon) notify(err error) {
	if err != nil {
		d.log.Warn("systemd notification failed", "error", err)
	}
}

func errText(err error) string {
	if err == nil {
		return "stopped"
	}
	return err.Error()
}
