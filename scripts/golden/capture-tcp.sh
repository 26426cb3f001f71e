#!/bin/bash
# capture-tcp.sh - capture the golden NFS-over-TCP traffic on loopback.
#
#   scripts/golden/capture-tcp.sh [OUTDIR]      (default /tmp/golden-cap)
#
# Needs: scripts/install-deps.sh --test; /work/shared/nfspeers copied to
# /tmp/nfspeers; rpcbind and the VFS ganesha already running:
#   cp -r /work/shared/nfspeers /tmp/nfspeers && cd /tmp/nfspeers &&
#   ./peers.sh start-rpcbind && ./peers.sh start-ganesha
# Writes OUTDIR/nfs3.pcap, nfs40.pcap, nfs41-proxy.pcap. The third one starts
# and stops the PROXY_V4 ganesha (13049/13050) itself and captures only its
# NFSv4.1 client leg towards 127.0.0.1:12049.
# For byte-identical contents across runs start from an empty export:
#   ./peers.sh stop; rm -rf /tmp/nfspeers/ganesha/vfs-export/* ; start again.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-/tmp/golden-cap}
P=/tmp/nfspeers
mkdir -p "$OUT"
gcc -O2 -Wall -o "$OUT/nfsgolden" "$HERE/nfsgolden.c" $(pkg-config --cflags --libs libnfs)

cap() { # pcap filter -- command...
    local pcap=$1 filt=$2; shift 3
    tcpdump -i lo -s 0 -U -n -w "$pcap" "$filt" 2>"$pcap.tcpdump.log" & local tp=$!
    sleep 1
    "$@"
    sleep 1
    kill -INT $tp; wait $tp || true
}

V3='nfs://127.0.0.1/vfs?nfsport=12049&mountport=12050'
V40='nfs://127.0.0.1/vfs?version=4&nfsport=12049'
PX='nfs://127.0.0.1/proxy?nfsport=13049&mountport=13050'

cap "$OUT/nfs3.pcap"  'tcp port 12049 or tcp port 12050' -- "$OUT/nfsgolden" "$V3"
cap "$OUT/nfs40.pcap" 'tcp port 12049' -- "$OUT/nfsgolden" "$V40" 2048

proxy_leg() {
    mkdir -p $P/ganesha/recov-proxy
    (cd $P && ./peers.sh start-ganesha $P/ganesha/proxy.conf ganesha-proxy)
    "$OUT/nfsgolden" "$PX"
    sleep 12      # Lease_Lifetime 15 s: PROXY_V4 renews with a SEQUENCE-only COMPOUND
    kill "$(cat $P/run/ganesha-proxy.pid)"; rm -f $P/run/ganesha-proxy.pid
    sleep 2
}
cap "$OUT/nfs41-proxy.pcap" 'tcp port 12049' -- proxy_leg
ls -l "$OUT"/*.pcap
