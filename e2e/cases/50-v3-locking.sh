#!/bin/bash
# 50-v3-locking.sh - NFSv3 as a stock client mounts it, through the
# gateway's auxiliary relay (issue 6): `mount -o vers=3,proto=rdma gw:/export`
# with no port, mountport or nolock. mount.nfs asks rpcbind on the gateway's
# address for MOUNT, the kernel's lockd asks it for NLM; the relay answers
# and forwards MOUNT, NLM and NSM to knfsd's mountd/lockd/statd over TCP.
#
# Locks must be exclusive between two clients of the filer: one mount goes
# through the gateway (RDMA, the relay), the other straight to knfsd over
# TCP (127.0.0.1). Both are in this one guest, but knfsd's lockd sees two
# hosts: the relay's address and 127.0.0.1. For fcntl and flock (which the
# NFS client sends as whole-file NLM locks): a lock held on either side
# makes a non-blocking attempt on the other fail, and succeed once it is
# released. Then a blocking lock through the gateway waits on a lock held
# directly and is woken by knfsd's NLM_GRANTED_MSG, which must travel
# filer -> relay -> client (rdmagw_auxrelay_calls_total{direction="to_client"}).
#
# Lab wiring (lib.sh): rpcbind is kept to 127.0.0.1:111 and
# $RXE_IP:$CLIENT_RPCBIND_PORT (the relay's client_rpcbind_port), since the
# relay's rpcbind responder owns $RXE_IP:111 in this shared kernel.
# e2e-timeout: 600
. "$E2E_VM/lib.sh"
LOCKTOOL=$E2E_REPO/bin/locktool
need_gateway v3_locking
[ -x "$LOCKTOOL" ] || { result v3_locking FAIL 0 "$LOCKTOOL missing (e2e/run.sh builds it)"; exit 1; }
tstep setup_rxe setup_rxe dummy || lab_fail "setup_rxe"
tstep setup_rpcbind setup_rpcbind_local || lab_fail "setup_rpcbind_local"
tstep setup_knfsd setup_knfsd || lab_fail "setup_knfsd"
tstep setup_statd setup_statd || lab_fail "setup_statd"
rpcinfo -p 127.0.0.1

GW_EXTRA_CONF="aux_relay:
  enabled: true
  listen_address: $RXE_IP
  client_rpcbind_port: $CLIENT_RPCBIND_PORT
  reserved_source_port: true"
if ! check gw_start start_gateway; then stop_bg; exit 1; fi
gw_scrape .start

GW=/mnt/gw3 DIRECT=/mnt/direct3
mkdir -p "$GW" "$DIRECT"

chk_rpcbind() {   # the relay's responder, asked like mount.nfs does
    local out; out=$(rpcinfo -p "$RXE_IP") || { echo "rpcinfo -p $RXE_IP failed"; return 1; }
    echo "$out" | sed 's/^/  /'
    echo "$out" | grep -qw mountd && echo "$out" | grep -qw nlockmgr && echo "$out" | grep -qw status
}
check v3_relay_rpcbind chk_rpcbind

chk_mount_default() {
    timeout 60 mount -t nfs -o vers=3,proto=rdma "$RXE_IP:$NFS_EXPORT" "$GW" || return 1
    local line; line=$(grep " $GW " /proc/mounts); echo "  $line"
    # rdma to the gateway, MOUNT asked of the gateway's address at a port
    # its rpcbind gave (not knfsd's 20048), locking on (no nolock)
    echo "$line" | grep -q "proto=rdma" || { echo "  not proto=rdma"; return 1; }
    echo "$line" | grep -q "mountaddr=$RXE_IP" || { echo "  MOUNT not sent to the gateway"; return 1; }
    echo "$line" | grep -q "mountport=$MOUNTD_PORT" && { echo "  MOUNT went to knfsd's mountd port"; return 1; }
    echo "$line" | grep -q "local_lock=none" || { echo "  locking is not remote (nolock?)"; return 1; }
    return 0
}
check v3_mount_default chk_mount_default || { dmesg | tail -20; tail -20 "$OUT/gateway.log"; stop_bg; exit 1; }
check v3_mount_direct timeout 60 mount -t nfs -o vers=3,proto=tcp "127.0.0.1:$NFS_EXPORT" "$DIRECT"

chk_data() {      # a file written through the gateway, read back both ways
    head -c 3000001 /dev/urandom > /tmp/lock-data.bin
    cp /tmp/lock-data.bin "$GW/data.bin" && sync || return 1
    drop_caches
    cmp /tmp/lock-data.bin "$GW/data.bin" && cmp /tmp/lock-data.bin "$DIRECT/data.bin" &&
        cmp /tmp/lock-data.bin "$NFS_EXPORT/data.bin"
}
check v3_data chk_data

# hold KIND FILE: start a holder in the background, wait until it holds
HOLD_PID=
hold() {
    rm -f /tmp/held
    "$LOCKTOOL" hold "$1" "$2" /tmp/held > "$OUT/hold.log" 2>&1 &
    HOLD_PID=$!
    wait_for 60 test -e /tmp/held || { echo "  holder did not get $1 on $2"; cat "$OUT/hold.log"; return 1; }
}
release() { kill "$HOLD_PID"; wait "$HOLD_PID"; local rc=$?; HOLD_PID=; return $rc; }

# try KIND FILE WANT: a non-blocking attempt must end with WANT (0 got it, 3 busy)
try() {
    local out rc; out=$(timeout 60 "$LOCKTOOL" try "$1" "$2" 2>&1); rc=$?
    echo "  try $1 $2: $out (rc $rc, want $3)"
    [ "$rc" = "$3" ]
}

# excl KIND A B: a lock held through A excludes B and another process on A,
# and B gets it once it is released
excl() {
    local kind=$1 a=$2/lockme b=$3/lockme ok=0
    : > "$a"
    hold "$kind" "$a" || return 1
    try "$kind" "$b" 3 || ok=1
    try "$kind" "$a" 3 || ok=1
    release || { echo "  holder failed"; cat "$OUT/hold.log"; ok=1; }
    try "$kind" "$b" 0 || ok=1
    return $ok
}
for kind in fcntl flock; do
    check "v3_${kind}_gw_excludes_direct" excl "$kind" "$GW" "$DIRECT"
    check "v3_${kind}_direct_excludes_gw" excl "$kind" "$DIRECT" "$GW"
done

# relay_calls PROC DIRECTION [file]: NLM calls the relay handled
relay_calls() { metric_sum rdmagw_auxrelay_calls_total program=nlm procedure="$1" direction="$2" ${3:+"$3"}; }

chk_granted() {   # a blocked lock through the gateway, woken by the filer's GRANTED
    local f=$GW/blocking w0 w1 t0 wpid out
    : > "$f"
    gw_scrape .g0
    w0=$(( $(relay_calls GRANTED_MSG to_client "$OUT/metrics.g0.txt") + $(relay_calls GRANTED to_client "$OUT/metrics.g0.txt") ))
    hold fcntl "$DIRECT/blocking" || return 1
    "$LOCKTOOL" wait fcntl "$f" > "$OUT/wait.log" 2>&1 &
    wpid=$!
    sleep 3
    kill -0 "$wpid" 2>/dev/null || { echo "  the waiter did not block: $(cat "$OUT/wait.log")"; release; return 1; }
    t0=$(now)
    release || return 1
    # the client also re-polls a blocked lock every 30 s; GRANTED is quicker
    wait_for 60 sh -c "! kill -0 $wpid" || { echo "  the waiter never got the lock"; kill "$wpid"; return 1; }
    wait "$wpid" || { echo "  waiter failed: $(cat "$OUT/wait.log")"; return 1; }
    local after; after=$(elapsed "$t0")
    echo "  $(cat "$OUT/wait.log"); ${after}s after the release"
    gw_scrape
    w1=$(( $(relay_calls GRANTED_MSG to_client) + $(relay_calls GRANTED to_client) ))
    echo "  NLM GRANTED/GRANTED_MSG relayed to the client: $((w1 - w0))"
    [ $((w1 - w0)) -ge 1 ] || return 1
    # not the client's own re-poll, which comes 30 s after it blocked
    awk -v a="$after" 'BEGIN { exit !(a < 20) }' || { echo "  woken by the re-poll, not by GRANTED"; return 1; }
}
check v3_lock_granted chk_granted

chk_relay_metrics() {   # every program went through the relay, nothing went wrong
    gw_scrape || return 1
    grep -E '^rdmagw_auxrelay_(calls|events)_total' "$OUT/metrics.txt" | sed 's/^/  /'
    local ok=0 p
    for p in MNT LOCK UNLOCK; do
        [ "$(metric_sum rdmagw_auxrelay_calls_total procedure="$p" direction=to_filer)" -gt 0 ] ||
            { echo "  no $p relayed to the filer"; ok=1; }
    done
    # nothing lost on the way
    if grep -E '^rdmagw_auxrelay_events_total\{event="(garbage_args|call_timeout|filer_unreachable|client_unreachable|send_error|record_error|callback_unroutable)"[,}].* [1-9]' "$OUT/metrics.txt"; then
        ok=1
    fi
    return $ok
}
check v3_relay_metrics chk_relay_metrics

chk_umount() { timeout 60 umount "$GW" && timeout 60 umount "$DIRECT"; }
check v3_umount chk_umount
if dmesg | grep -E 'lockd: server .* not responding|statd: .* failed'; then
    result v3_kernel_log FAIL 0 "lockd/statd complained"; FAILS=$((FAILS + 1))
fi
kill -0 "$GW_PID" 2>/dev/null || { result gw_alive FAIL 0 "the gateway died"; FAILS=$((FAILS + 1)); }
[ "$FAILS" = 0 ] || { dmesg | tail -40; tail -n 40 "$OUT/gateway.log"; }
stop_bg
exit $((FAILS > 0))
