#!/bin/bash
# 21-drc-reconnect.sh - issue #14 item 4: a kernel NFSv3 client over RDMA
# reconnects in the middle of non-idempotent calls and sends them again;
# the gateway keeps its backend TCP connection for the reconnecting client
# (backend.reconnect_grace), so knfsd's duplicate request cache (keyed on
# address and port) answers the retransmissions with the first results
# instead of running REMOVE/RENAME/MKDIR twice (spurious ENOENT/EEXIST).
#
# How: netem delays the calls to knfsd (TCP port 2049 on lo) by 2.5 s; the
# client (timeo=10: 1 s) times out, and xprtrdma drops the connection at
# every RPC timeout (xprt_rdma_timer) and resends every outstanding call
# on the new one. Checks: no operation failed, every effect is there once,
# the gateway's backend connection has the same source port before and
# after (ss), the gateway handed it over (kept_total) and knfsd's reply
# cache answered (reply_cache_stats "cache hits").
# e2e-timeout: 300  (run.sh: limit for this case's guest)
. "$E2E_VM/lib.sh"
N=${E2E_DRC_OPS:-12}
DELAY=${E2E_DRC_DELAY:-2500ms}
need_gateway drc_reconnect
tstep setup_rxe setup_rxe dummy || lab_fail "setup_rxe"
tstep setup_knfsd setup_knfsd || lab_fail "setup_knfsd"
modprobe sch_netem && modprobe sch_prio && modprobe cls_u32 || lab_fail "netem modules"
if ! check gw_start start_gateway; then stop_bg; exit 1; fi

MNT=/mnt/drc
mkdir -p "$MNT"
opts="vers=3,proto=rdma,port=20049,nolock,mountport=$MOUNTD_PORT,mountproto=tcp,hard,timeo=10,retrans=3"
if ! check drc_mount mount -t nfs -o "$opts" "$RXE_IP:$NFS_EXPORT" "$MNT"; then stop_bg; exit 1; fi
# one directory per worker: the VFS serialises namespace changes in one
# directory, and the point is many non-idempotent calls outstanding at once
for i in $(seq "$N"); do mkdir "$MNT/d$i"; echo "$i" > "$MNT/d$i/rm"; echo "$i" > "$MNT/d$i/mv"; done
sync
ls -l "$MNT"/d*/ > /dev/null   # warm dentries and attributes: no LOOKUP before the calls

# backend_port: the gateway's source port towards knfsd (one connection)
backend_port() { ss -Htn state established '( dport = :2049 )' | awk '{n = split($3, a, ":"); print a[n]}' | sort -u | tr '\n' ' '; }
cache_hits() { awk -F: '/cache hits/ {print $2 + 0}' /proc/fs/nfsd/reply_cache_stats; }
port0=$(backend_port); hits0=$(cache_hits)
echo "backend source port before: $port0; knfsd reply cache hits: $hits0"

slow_filer() {   # delay only what goes to knfsd's port: calls, not replies
    tc qdisc add dev lo root handle 1: prio &&
    tc qdisc add dev lo parent 1:3 handle 30: netem delay "$DELAY" &&
    tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip dport 2049 0xffff flowid 1:3
}
kept_once() { gw_scrape && [ "$(metric_sum rdmagw_backend_connections_kept_total)" -ge 1 ]; }
chk_reconnect() {
    gw_scrape .before || return 1
    slow_filer || { echo "tc netem failed"; return 1; }
    local i pids=()
    for i in $(seq "$N"); do
        ( rm "$MNT/d$i/rm" || echo "FAILED rm $i"
          mv "$MNT/d$i/mv" "$MNT/d$i/moved" || echo "FAILED mv $i"
          mkdir "$MNT/d$i/new" || echo "FAILED mkdir $i" ) >> "$OUT/drc-ops.log" 2>&1 &
        pids+=($!)
    done
    # the client times out, reconnects and resends; then the filer speeds up
    wait_for 90 kept_once
    local kept_rc=$?
    sleep 2
    tc qdisc del dev lo root
    wait "${pids[@]}"
    gw_scrape
    local kept ok=0
    kept=$(metric_sum rdmagw_backend_connections_kept_total)
    echo "  client reconnects served with the kept backend connection: $kept (rc $kept_rc)"
    grep -E '^rdmagw_backend_(connection|reconnect)' "$OUT/metrics.txt" | sed 's/^/  /'
    [ "$kept" -ge 1 ] || { echo "  the client did not reconnect, or its backend connection was not kept"; ok=1; }
    if grep -q FAILED "$OUT/drc-ops.log"; then echo "  operations failed:"; sed 's/^/    /' "$OUT/drc-ops.log"; ok=1; fi
    local moved made left p sent=0
    moved=$(ls -d "$NFS_EXPORT"/d*/moved | wc -l); made=$(ls -d "$NFS_EXPORT"/d*/new | wc -l)
    left=$(ls "$NFS_EXPORT"/d*/rm "$NFS_EXPORT"/d*/mv 2>/dev/null | wc -l)
    for p in REMOVE RENAME MKDIR; do
        sent=$((sent + $(metric_sum rdmagw_calls_total procedure=$p) - $(metric_sum rdmagw_calls_total procedure=$p "$OUT/metrics.before.txt")))
    done
    echo "  REMOVE/RENAME/MKDIR calls through the gateway: $sent for $((3 * N)) operations (the rest: resent after a reconnect)"
    [ "$sent" -gt $((3 * N)) ] || { echo "  no non-idempotent call was resent: the case did not test the cache"; ok=1; }
    echo "  on the server: $moved moved, $made made, $left left of the removed/renamed (want $N $N 0)"
    [ "$moved" = "$N" ] && [ "$made" = "$N" ] && [ "$left" = 0 ] || ok=1
    return $ok
}
check drc_reconnect chk_reconnect
tc qdisc del dev lo root 2>/dev/null

port1=$(backend_port); hits1=$(cache_hits)
echo "backend source port after: $port1; knfsd reply cache hits: $hits1"
chk_same_port() { [ -n "$port0" ] && [ "$port0" = "$port1" ]; }
check drc_same_backend_port chk_same_port
chk_cache_hits() { [ "$hits1" -gt "$hits0" ]; }
check drc_server_cache_hits chk_cache_hits
dmesg | grep -iE 'rpcrdma|nfs:' | tail -10
umount "$MNT"
kill -0 "$GW_PID" 2>/dev/null || { result gw_alive FAIL 0 "the gateway died"; FAILS=$((FAILS + 1)); }
[ "$FAILS" = 0 ] || tail -n 40 "$OUT/gateway.log"
stop_bg
exit $((FAILS > 0))
