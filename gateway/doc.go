// Package gateway holds what the two gateway modes share: the
// configuration (Config: one YAML file for both modes, parsed and
// validated here), the Prometheus metrics (Metrics: one registry per
// gateway, every rdmagw_ series with the constant label mode), the logger
// and its rate-limited client events, and the runtime pieces both modes
// are built from: the RDMA stack (device, protection domain, registered
// buffer pool), the client table behind the live view, drain and
// liveness probe, reload, and the /metrics and /debug/sessions server.
//
// The modes are packages of their own:
//
//	gateway/forward    RDMA clients --RPC-over-RDMA--> gateway --ONC RPC/TCP--> NFS server
//	gateway/reverse    TCP clients  --ONC RPC/TCP-->   gateway --RPC-over-RDMA--> NFS server
//	gateway/auxrelay   forward mode's relay of rpcbind, MOUNT, NLM and NSM (TCP and UDP)
//
// Each doc.go draws its data path. The modes import this package and
// gateway/internal/..., never each other; cmd/rdmagw picks one by the
// config's mode. Below them:
//
//	gateway/internal/splitter   a TCP record streamed into registered pieces while its DDP-eligible items are found (forward replies, reverse calls)
//	gateway/internal/redial     the reconnect loop with backoff (forward: the TCP backend; reverse: the RDMA link)
//	gateway/internal/callback   an NFSv4.1 callback read whole from a record; the SYSTEM_ERR reply to one not delivered
//	gateway/internal/gwtest     test helpers both modes' tests use (metrics, logs, RPC messages)
//	gateway/internal/modetest   tests that run both modes together (reverse in front of forward)
//	gateway/metricname          every rdmagw_* metric name, spelled once
//
// File map:
//
//	config.go              Config and its sections, DefaultConfig, LoadConfig / ParseConfig (the YAML file)
//	config_validate.go     Validate: every field's bounds; FieldError ("config: <field>: <reason>")
//	config_conns.go        the connections section (limits per gateway, per address, idle and reply timeouts, call and reply memory)
//	config_backchannel.go  the backchannel section, and the engine's view of it
//	config_reverse.go      the reverse section's checks
//	config_ops.go          the shutdown and admin sections
//	config_runtime.go      the runtime section (runtime.procs: GOMAXPROCS of the process)
//	config_rdmaversion.go  rdma.versions (forward) and backend.rdma_version (reverse): RPC-over-RDMA version two
//	bytesize.go            ByteSize: "64KiB" in the YAML file
//	carry.go               CarryLimits: the transfer sizes advertised to clients in place of larger server limits
//	metrics.go             Metrics: the shared series, the engine's ResponderMetrics, per-procedure counters
//	metrics_forward.go     forward mode's backend connection series (pings, calls failed, parked connections)
//	metrics_reverse.go     ReverseMetrics: reverse mode's series and the engine's RequesterMetrics
//	metrics_backchannel.go the NFSv4.1 backchannel series, both modes
//	metrics_version.go     connections by the RPC-over-RDMA version they settled on, version fallbacks
//	metrics_work.go        RDMA work requests per path (rdmarpc.WorkMetrics), version-two events
//	metrics_srq.go         the forward receive pool and shared receive queue (rdma.srq_depth)
//	metrics_http.go        MetricsServer: /metrics, pprof, /debug/sessions
//	logging.go             NewLogger; client events logged at INFO, rate-limited and counted
//	ops.go                 ClientTable (live view, drain, liveness probe), ClientOps, Sessions and SessionInfo
//	ops_http.go            the /debug/sessions handler
//	reload.go              LiveConfig: what a reload changes, and when
//	rdmastack.go           RDMAStack: device, protection domain and pool; CloseGateway; Provider (the named provider, iwarp configured)
//
// Errors: the package's own errors start with "gateway: "; a bad
// configuration is a *FieldError, "config: <field>: <reason>" (Validate
// returns them all, joined).
package gateway
