// Package metricname names the gateway's Prometheus metrics: the one
// place the names are spelled, for the gateway that registers them and
// for what reads them back (internal/gwstats, the demo and bench
// summaries, tests). What each counts is in its help text, where it is
// registered (gateway/metrics.go and its neighbours). The auxrelay's
// rdmagw_auxrelay_* metrics are named in gateway/auxrelay.
package metricname

// The gateway's metric names.
const (
	BackchannelCallsTotal            = "rdmagw_backchannel_calls_total"
	BackchannelErrorsTotal           = "rdmagw_backchannel_errors_total"
	BackchannelRepliesTotal          = "rdmagw_backchannel_replies_total"
	BackendCallsFailedTotal          = "rdmagw_backend_calls_failed_total"
	BackendConnectionsKeptTotal      = "rdmagw_backend_connections_kept_total"
	BackendConnectionsParked         = "rdmagw_backend_connections_parked"
	BackendConnectionWaitsTotal      = "rdmagw_backend_connection_waits_total"
	BackendErrorsTotal               = "rdmagw_backend_errors_total"
	BackendGiveUpsTotal              = "rdmagw_backend_give_ups_total"
	BackendLatencySeconds            = "rdmagw_backend_latency_seconds"
	BackendPingsTotal                = "rdmagw_backend_pings_total"
	BackendRDMAConnections           = "rdmagw_backend_rdma_connections"
	BackendReconnectsTotal           = "rdmagw_backend_reconnects_total"
	BackendReconnectPortChangesTotal = "rdmagw_backend_reconnect_port_changes_total"
	BackendUnknownXIDRepliesTotal    = "rdmagw_backend_unknown_xid_replies_total"
	BytesTotal                       = "rdmagw_bytes_total"
	CallLatencySeconds               = "rdmagw_call_latency_seconds"
	CallsDroppedTotal                = "rdmagw_calls_dropped_total"
	CallsTotal                       = "rdmagw_calls_total"
	ClientBackpressureTotal          = "rdmagw_client_backpressure_total"
	ConfigReloadsTotal               = "rdmagw_config_reloads_total"
	Connections                      = "rdmagw_connections"
	ConnectionsClosedTotal           = "rdmagw_connections_closed_total"
	ConnectionsRejectedTotal         = "rdmagw_connections_rejected_total"
	ConnectionsTotal                 = "rdmagw_connections_total"
	CreditsGranted                   = "rdmagw_credits_granted"
	CreditsInUse                     = "rdmagw_credits_in_use"
	DDPFallbacksTotal                = "rdmagw_ddp_fallbacks_total"
	DrainAbandonedCallsTotal         = "rdmagw_drain_abandoned_calls_total"
	Draining                         = "rdmagw_draining"
	GatewayErrorRepliesTotal         = "rdmagw_gateway_error_replies_total"
	LogEventsTotal                   = "rdmagw_log_events_total"
	PoolBytesInUse                   = "rdmagw_pool_bytes_in_use"
	PoolBytesMax                     = "rdmagw_pool_bytes_max"
	PoolBytesRegistered              = "rdmagw_pool_bytes_registered"
	RDMAErrorsReceivedTotal          = "rdmagw_rdma_errors_received_total"
	RecvPoolBytesRegistered          = "rdmagw_recv_pool_bytes_registered"
	SRQDepth                         = "rdmagw_srq_depth"
	SRQEventsTotal                   = "rdmagw_srq_events_total"
	SRQPosted                        = "rdmagw_srq_posted"
	RDMAErrorsSentTotal              = "rdmagw_rdma_errors_sent_total"
	RDMAConnectionsByVersionTotal    = "rdmagw_rdma_connections_by_version_total"
	RDMAVersionFallbacksTotal        = "rdmagw_rdma_version_fallbacks_total"
	RDMAMemoryWaitsTotal             = "rdmagw_rdma_memory_waits_total"
	RDMAMessagesDroppedTotal         = "rdmagw_rdma_messages_dropped_total"
	RDMAOperationsTotal              = "rdmagw_rdma_operations_total"
	RDMAWorkRequestsTotal            = "rdmagw_rdma_work_requests_total"
	RepliesSendInvalidateTotal       = "rdmagw_replies_send_invalidate_total"
	ReplyBytesWrittenAheadTotal      = "rdmagw_reply_bytes_written_ahead_total"
	RepliesTotal                     = "rdmagw_replies_total"
	ReplyChunkRetriesTotal           = "rdmagw_reply_chunk_retries_total"
	RuntimeProcsChangesTotal         = "rdmagw_runtime_procs_changes_total"
)

// All lists every name above.
var All = []string{
	BackchannelCallsTotal,
	BackchannelErrorsTotal,
	BackchannelRepliesTotal,
	BackendCallsFailedTotal,
	BackendConnectionsKeptTotal,
	BackendConnectionsParked,
	BackendConnectionWaitsTotal,
	BackendErrorsTotal,
	BackendGiveUpsTotal,
	BackendLatencySeconds,
	BackendPingsTotal,
	BackendRDMAConnections,
	BackendReconnectsTotal,
	BackendReconnectPortChangesTotal,
	BackendUnknownXIDRepliesTotal,
	BytesTotal,
	CallLatencySeconds,
	CallsDroppedTotal,
	CallsTotal,
	ClientBackpressureTotal,
	ConfigReloadsTotal,
	Connections,
	ConnectionsClosedTotal,
	ConnectionsRejectedTotal,
	ConnectionsTotal,
	CreditsGranted,
	CreditsInUse,
	DDPFallbacksTotal,
	DrainAbandonedCallsTotal,
	Draining,
	GatewayErrorRepliesTotal,
	LogEventsTotal,
	PoolBytesInUse,
	PoolBytesMax,
	PoolBytesRegistered,
	RDMAErrorsReceivedTotal,
	RecvPoolBytesRegistered,
	SRQDepth,
	SRQEventsTotal,
	SRQPosted,
	RDMAErrorsSentTotal,
	RDMAConnectionsByVersionTotal,
	RDMAVersionFallbacksTotal,
	RDMAMemoryWaitsTotal,
	RDMAMessagesDroppedTotal,
	RDMAOperationsTotal,
	RDMAWorkRequestsTotal,
	RepliesSendInvalidateTotal,
	ReplyBytesWrittenAheadTotal,
	RepliesTotal,
	ReplyChunkRetriesTotal,
	RuntimeProcsChangesTotal,
}

// Known reports whether name is one of the gateway's metric names.
func Known(name string) bool {
	for _, n := range All {
		if n == name {
			return true
		}
	}
	return false
}
