#!/bin/bash
# 51-v4-delegation.sh - NFSv4 callbacks through the gateway (issue 6): knfsd
# must see client A's callback path up, grant it a read delegation, and
# take it back with CB_RECALL when another client writes. For NFSv4.1 and
# 4.2 the callback travels the gateway's backchannel (RFC 8167): knfsd
# sends CB_RECALL on the gateway's TCP connection (the session's back
# channel) and the gateway carries it to A as a backward-direction
# RPC-over-RDMA call. For NFSv4.0 knfsd connects to the callback address A
# gave (its RDMA-side IP) itself, past the gateway: what the README
# promises for 4.0 (delegations work when the filer reaches that address).
#
# Client A mounts through the gateway (RDMA). Client B mounts knfsd
# directly over TCP from a UTS namespace with another host name, so knfsd
# sees a second client ("Linux NFSv4.x labclient-b"), not a trunked A.
# For each version (E2E_DELEG_VERSIONS, default "4.1 4.2 4.0"):
#  1. B creates a file; A opens it read-only and keeps it open: knfsd lists
#     a read delegation for A in /proc/fs/nfsd/clients/*/states.
#  2. B overwrites it: knfsd recalls A's delegation (4.1+: through the
#     gateway: rdmagw_backchannel_calls_total and _replies_total grow; 4.0:
#     they do not), no rdmagw_backchannel_errors_total, A returns it
#     (DELEGRETURN in A's mountstats, no errors), knfsd no longer lists it.
#  3. A reads the file again, without dropping caches: the new data, byte
#     for byte.
#  4. Neither client's mountstats shows an errored SEQUENCE or DELEGRETURN,
#     A never had to send BIND_CONN_TO_SESSION (the client's answer to
#     SEQ4_STATUS_CB_PATH_DOWN), knfsd still says "callback state: UP" for A
#     and logged no callback trouble. (knfsd 6.1 says UP and grants the
#     delegation even when every callback fails: only 2-4 tell. A run with
#     `backchannel: disabled: true` fails 2, 3 and 4.)
# Then the same through the reverse gateway (E2E_DELEG_REVERSE_VERSIONS,
# default "4.1"): the forward gateway stops, knfsd listens on RDMA too,
# and client A mounts over TCP through rdmagw reverse, which talks
# RPC-over-RDMA to knfsd. A's session binds the back channel through the
# gateway, so knfsd sends CB_NULL and CB_RECALL as backward-direction calls
# on the gateway's RDMA connection (RFC 8167), which relays them to A's TCP
# connection and A's replies back; the same checks, 1-4 (a gateway that drops
# them fails 2: knfsd 6.1 grants the delegation and says UP all the same).
# E2E_DELEG_VERSIONS="" or E2E_DELEG_REVERSE_VERSIONS="" skips a part.
# e2e-timeout: 720
. "$E2E_VM/lib.sh"
need_gateway v4_delegation
tstep setup_rxe setup_rxe dummy || lab_fail "setup_rxe"
tstep setup_knfsd setup_knfsd || lab_fail "setup_knfsd"

# nfsd_client A|B: knfsd's /proc/fs/nfsd/clients/<id> of client A or B of
# version $V ("Linux NFSv4.1 e2evm", "Linux NFSv4.0 labclient-b/..."); a
# 4.0 client lingers after its unmount (no DESTROY_CLIENTID), hence the
# version in the pattern and a file name per version
nfsd_client() {
    local d b
    for d in /proc/fs/nfsd/clients/*; do
        [ -f "$d/info" ] || continue
        grep -q "^name: \"Linux NFSv$V " "$d/info" || continue
        grep -q "^name: .*labclient-b" "$d/info"; b=$?
        { [ "$1" = A ] && [ $b = 1 ]; } || { [ "$1" = B ] && [ $b = 0 ]; } || continue
        echo "$d"; return 0
    done
    return 1
}
# deleg_of DIR: the delegations knfsd lists for that client on $F
deleg_of() { grep 'type: deleg' "$1/states" 2>/dev/null | grep "$F"; }
# mstat MNT OP FIELD: from /proc/self/mountstats, per-op counter FIELD
# (1 ops, 2 transmissions, ..., 9 errors) of OP on the mount at MNT
mstat() {
    awk -v m=" $1 " -v op="$2:" -v f="$3" '
        /^device / { on = index($0, m) > 0 } on && $1 == op { v = $(f + 1) } END { print v + 0 }' /proc/self/mountstats
}

HOLD=
chk_granted() {
    head -c 262147 /dev/urandom > /tmp/d1.bin
    cp /tmp/d1.bin "$B/$F" && sync || return 1
    cmp /tmp/d1.bin "$A/$F" || { echo "  A reads other bytes than B wrote"; return 1; }
    local ca cb i
    ca=$(nfsd_client A); cb=$(nfsd_client B)
    [ -n "$ca" ] && [ -n "$cb" ] && [ "$ca" != "$cb" ] || { echo "  knfsd does not see two clients"; return 1; }
    CA=$ca
    # A opens it read-only and keeps it open. knfsd decides on a delegation
    # at OPEN and grants none while the grace period lasts (10 s after
    # nfsd started, lib.sh), so A reopens until one is granted.
    for ((i = 0; i < 20; i++)); do
        sleep 600 < "$A/$F" &
        HOLD=$!
        wait_for 2 deleg_of "$ca" && break
        kill "$HOLD"; wait "$HOLD" 2>/dev/null; HOLD=
    done
    for d in /proc/fs/nfsd/clients/*; do echo "  $d:"; sed 's/^/    /' "$d/info" "$d/states"; done
    [ -n "$HOLD" ] || { echo "  no delegation for A after $i opens (callback path down?)"; return 1; }
    grep -q '^callback state: UP' "$ca/info" || { echo "  knfsd reports A's callback path not UP"; return 1; }
    echo "  A holds, after $((i + 1)) open(s): $(deleg_of "$ca")"
}

chk_recall() {
    local c0 r0 d0 c1 r1 e1 d1 t0
    gw_scrape .r0
    c0=$(metric_sum rdmagw_backchannel_calls_total "$OUT/metrics.r0.txt")
    r0=$(metric_sum rdmagw_backchannel_replies_total "$OUT/metrics.r0.txt")
    d0=$(mstat "$A" DELEGRETURN 1)
    head -c 300007 /dev/urandom > /tmp/d2.bin
    t0=$(now)
    timeout 120 dd if=/tmp/d2.bin of="$B/$F" bs=64k conv=fsync status=none || { echo "  B's write failed"; return 1; }
    echo "  B's overwrite took $(elapsed "$t0")s (a recall that is not answered would take a lease or more)"
    gw_scrape
    c1=$(metric_sum rdmagw_backchannel_calls_total)
    r1=$(metric_sum rdmagw_backchannel_replies_total)
    e1=$(metric_sum rdmagw_backchannel_errors_total)
    d1=$(mstat "$A" DELEGRETURN 1)
    echo "  gateway backchannel: calls +$((c1 - c0)) replies +$((r1 - r0)) errors total $e1; A's DELEGRETURN +$((d1 - d0))"
    grep -E '^rdmagw_backchannel' "$OUT/metrics.txt" | sed 's/^/  /'
    [ "$e1" = 0 ] && [ $((d1 - d0)) -ge 1 ] || return 1
    if [ "$V" = 4.0 ]; then   # knfsd's own connection to A, not the gateway
        [ $((c1 - c0)) = 0 ] || { echo "  a 4.0 callback went through the gateway"; return 1; }
    else
        [ $((c1 - c0)) -ge 1 ] && [ $((r1 - r0)) -ge 1 ] || return 1
    fi
    if deleg_of "$CA"; then echo "  knfsd still lists A's delegation"; return 1; fi
    return 0
}
chk_new_data() {   # no drop_caches: A must have let go of its cached copy
    cmp /tmp/d2.bin "$A/$F" || { echo "  A reads stale data"; return 1; }
    cmp /tmp/d2.bin "$NFS_EXPORT/$F"
}
chk_cb_stats() {
    local m e ok=0
    nfsstat -c 2>&1 | sed 's/^/  /' | head -30
    for m in "$A" "$B"; do
        e=$(mstat "$m" SEQUENCE 9)
        echo "  $m: SEQUENCE ops $(mstat "$m" SEQUENCE 1) errors $e; DELEGRETURN ops $(mstat "$m" DELEGRETURN 1) errors $(mstat "$m" DELEGRETURN 9)"
        [ "$e" = 0 ] && [ "$(mstat "$m" DELEGRETURN 9)" = 0 ] || ok=1
    done
    grep -A3 "^device .* mounted on $A " /proc/self/mountstats | sed 's/^/  /'
    # A callback path knfsd finds down is flagged in every SEQUENCE reply
    # (SEQ4_STATUS_CB_PATH_DOWN) and the client answers with
    # BIND_CONN_TO_SESSION; knfsd's own view must still be UP after the recall.
    e=$(mstat "$A" BIND_CONN_TO_SESSION 1)
    echo "  $A: BIND_CONN_TO_SESSION ops $e; knfsd: $(grep '^callback state' "$CA/info")"
    [ "$e" = 0 ] || { echo "  A had to rebind its callback path"; ok=1; }
    grep -q '^callback state: UP' "$CA/info" || ok=1
    if dmesg | grep -iE 'nfsd.*callback|cb_path_down|NFSD: client .* (failed|down)'; then
        echo "  knfsd logged a callback problem"; ok=1
    fi
    return $ok
}
chk_umount() { timeout 60 umount "$A" && timeout 60 umount "$B"; }

# deleg_suite V: mount A and B with NFS version V and run the checks
deleg_suite() {
    V=$1; local p=v${1/./}
    [ "$VIA" = reverse ] && p=rv_$p
    A=/mnt/gw$p B=/mnt/direct$p F=deleg-$p.bin
    mkdir -p "$A" "$B"
    if [ "$VIA" = reverse ]; then   # A: TCP to the reverse gateway (soft: a stuck gateway FAILs)
        check "${p}_mount_gw" timeout 60 mount -t nfs -o "vers=$V,proto=tcp,port=$GW_RV_PORT,soft,timeo=150,retrans=2" \
            "$GW_RV_ADDR:/" "$A" || { dmesg | tail -20; return 1; }
    else
        check "${p}_mount_gw" timeout 60 mount -t nfs -o "vers=$V,proto=rdma,port=20049" "$RXE_IP:/" "$A" ||
            { dmesg | tail -20; return 1; }
    fi
    check "${p}_mount_direct_other_client" timeout 60 unshare -u sh -c \
        "hostname labclient-b && mount -t nfs -o vers=$V,proto=tcp 127.0.0.1:/ $B" || { umount "$A"; return 1; }
    check "${p}_read_delegation_granted" chk_granted
    check "${p}_delegation_recalled" chk_recall
    check "${p}_recall_new_data" chk_new_data
    [ -n "$HOLD" ] && { kill "$HOLD"; wait "$HOLD" 2>/dev/null; HOLD=; }
    check "${p}_no_callback_errors" chk_cb_stats
    check "${p}_umount" chk_umount
}

gw_alive() {
    kill -0 "$GW_PID" 2>/dev/null || { result "${1}gw_alive" FAIL 0 "the gateway died"; FAILS=$((FAILS + 1)); }
}
FW_VERSIONS=${E2E_DELEG_VERSIONS-4.1 4.2 4.0}
RV_VERSIONS=${E2E_DELEG_REVERSE_VERSIONS-4.1}
VIA=forward
if [ -n "${FW_VERSIONS// /}" ]; then
    if ! check gw_start start_gateway; then stop_bg; exit 1; fi
    for v in $FW_VERSIONS; do deleg_suite "$v"; done
    gw_alive
    kill "$GW_PID"; wait "$GW_PID" 2>/dev/null
    mv "$OUT/gateway.log" "$OUT/gateway-forward.log"
fi
if [ -n "${RV_VERSIONS// /}" ]; then
    VIA=reverse GW_RV_ADDR=127.0.0.1 GW_RV_PORT=2050
    modprobe rpcrdma && echo "rdma 20049" > /proc/fs/nfsd/portlist || lab_fail "knfsd: no RDMA listener"
    if ! check rv_gw_start start_gateway_reverse; then stop_bg; exit 1; fi
    for v in $RV_VERSIONS; do deleg_suite "$v"; done
    gw_alive rv_
fi
[ "$FAILS" = 0 ] || { dmesg | tail -40; tail -n 40 "$OUT/gateway.log"; }
stop_bg
exit $((FAILS > 0))
