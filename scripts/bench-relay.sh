#!/bin/bash
# bench-relay.sh - the gateway against haproxy, in front of one nfs-ganesha.
#
#   scripts/bench-relay.sh [rdmagw bench flags...]
#
# Starts a private nfs-ganesha (FSAL VFS, as the tests start it:
# internal/nfstest), then runs
#   rdmagw bench -spawn-gateway -relay haproxy -backend <ganesha> [flags]
# the gateway as its own process (pure-Go provider, loopback) and haproxy
# in TCP mode, both in front of that ganesha, and prints ops/s, p50, p99
# and each relay process's CPU per op. Needs root (ganesha's FSAL VFS) and
# the packages of scripts/install-deps.sh --test (haproxy, nfs-ganesha).
# Default flags: -duration 10s -concurrency 1,8
#   -ops getattr,read-4k,write-4k,read-1m,write-1m
# Examples:
#   scripts/bench-relay.sh -ops getattr -concurrency 8 -cpuprofile /tmp/gw.pprof  # absolute path
#   scripts/bench-relay.sh -burn 2            # with both cores kept busy
#   scripts/bench-relay.sh -rounds 3 -duration 4s # each workload 3 times per path (ABBA), median and spread of the ratios
#   scripts/bench-relay.sh -gateway-procs 1,2 # the gateway at runtime.procs 1 and 2 (GOMAXPROCS)
#   scripts/bench-relay.sh -gateway-bin /tmp/rdmagw-old,/tmp/rdmagw-new # two builds (absolute paths), each against haproxy
#   scripts/bench-relay.sh -anchors netpoll:2,epoll:2 # Go TCP relays beside haproxy (what the runtime costs)
set -euo pipefail
cd "$(dirname "$0")/.."
args="${*:--duration 10s -concurrency 1,8 -ops getattr,read-4k,write-4k,read-1m,write-1m}"
exec env RDMAGW_BENCH_ARGS="$args" go test ./cmd/rdmagw -run '^TestBenchRelay$' -count=1 -timeout 0 -v
