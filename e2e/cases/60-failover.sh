#!/bin/bash
# 60-failover.sh - two forward gateways in front of one filer behind one
# client-facing address (VIP) moved by keepalived (VRRP), and what a mounted
# client sees when the active gateway is killed (issue 16, item 5).
#
# One guest kernel plays every host. soft-RoCE (rxe) in Linux 6.1 works in
# the initial network namespace only (its UDP socket and route lookups are
# init_net's), so the two "gateway hosts" are two ends of a veth pair in the
# root namespace: fo0 (node A, rxe0, 10.99.0.11) and fo1 (node B, rxe1,
# 10.99.0.12). A keepalived per node runs VRRP (multicast 224.0.0.18) over
# that link and puts the VIP 10.99.0.100/32 on its own end when it is
# MASTER; the VIP's RoCE GID moves with it from rxe0 to rxe1. The client
# (the guest's NFS client) mounts VIP:/ with proto=rdma, hard. Each gateway
# reaches knfsd over TCP on 127.0.0.1:2049.
#
# One kernel is one RDMA-CM port space: two listeners on VIP:20049 cannot
# coexist, and a listener needs its address to be local. So here each
# node's gateway is started by keepalived's notify_master (the node took the
# VIP) and supervised: when it exits, the node's vrrp_track_file says so
# and keepalived drops the VIP at once (FAULT, priority 0 to the peer). On
# separate hosts (deploy/keepalived/) both gateways run all the time,
# listening on 0.0.0.0, and a check script polls /metrics.
#
# For each version (E2E_FO_VERSIONS, default "4.1 4.2 3"; only those also
# in E2E_VERSIONS when that is set):
#  1. mount VIP:/ (v3: VIP:/srv/nfs) hard; bin/progwrite (e2e/tools)
#     writes E2E_FO_MIB (default E2E_DATA_MIB, else 32) MiB of random data
#     in 1 MiB O_DIRECT writes, then fsync, logging when each write
#     returned.
#  2. at a quarter of the file, kill -9 the active gateway: its node goes
#     FAULT and drops the VIP, the other node becomes MASTER, adds the VIP
#     and starts its gateway; the client's RDMA transport reconnects to it
#     and retransmits.
#  3. the write completes; the stall (kill -> the next write() that
#     returned) is printed; the VIP is on the other node; SHA-256 of the
#     source, of the NFS read-back after drop_caches and of the server's
#     file agree.
#  4. exactly-once: no WRITE or COMMIT ended in error (mountstats), the client's
#     retransmissions and knfsd's WRITE count are printed; for NFSv4.1/4.2
#     knfsd executed no more WRITEs than the client sent (sent again after
#     NFS4ERR_RETRY_UNCACHED_REP counts as sent: WRITE replies are not
#     cached, the lab saw one WRITE executed twice that way).
#     NFSv3 has no sessions: knfsd's duplicate request cache keys on the
#     client address and port, which is now the other gateway's TCP
#     connection, so a retransmitted WRITE may run twice (harmless for a
#     WRITE of the same bytes). The v3 numbers are recorded, not judged.
#  5. the killed node is "repaired" (its track_file back to 0) and rejoins
#     as BACKUP (nopreempt): the next version fails over the other way.
# e2e-timeout: 600
# e2e-retry-on-hang: the guest kernel's RDMA CM sometimes leaves a reconnect REQ to the moved VIP unanswered until its ~100 s timeout
#   (seen in 3 of 5 failovers on 2026-11-26, A to B and B to A alike: xprtrdma_connect rc=-101 ~103 s after
#   xprtrdma_op_connect, the new gateway listening 2 s after the kill; once a v4.2 part got no reconnect in
#   7 min). One kernel plays both nodes and both RoCE devices here; on separate hosts both gateways listen
#   all the time. Not understood yet: see the session notes.
. "$E2E_VM/lib.sh"
VIP=10.99.0.100
FO=/run/rdmagw-fo
FO_MIB=${E2E_FO_MIB:-${E2E_DATA_MIB:-32}}
VERSIONS=
for v in ${E2E_FO_VERSIONS:-4.1 4.2 3}; do
    [ -z "${E2E_VERSIONS:-}" ] || [[ " $E2E_VERSIONS " == *" $v "* ]] && VERSIONS="$VERSIONS $v"
done
need_gateway failover
if ! command -v keepalived > /dev/null; then
    result failover FAIL 0 "keepalived not installed (scripts/install-deps.sh --lab)"
    exit 1
fi

# node N (A|B): its link end, rxe device, address, VRRP priority, metrics
node_if() { [ "$1" = A ] && echo fo0 || echo fo1; }
node_rxe() { [ "$1" = A ] && echo rxe0 || echo rxe1; }
node_ip() { [ "$1" = A ] && echo 10.99.0.11 || echo 10.99.0.12; }
node_metrics() { [ "$1" = A ] && echo 127.0.0.1:9464 || echo 127.0.0.1:9465; }
other() { [ "$1" = A ] && echo B || echo A; }

setup_link() {
    local n i
    modprobe rdma_rxe || return 1
    ip link add fo0 type veth peer name fo1 || return 1
    # VRRP adverts from node A reach node B's socket in the same namespace:
    # their source is a local address (accept_local) on another interface
    sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
    for n in A B; do
        i=$(node_if $n)
        sysctl -qw "net.ipv4.conf.$i.accept_local=1" "net.ipv4.conf.$i.rp_filter=0"
        ip link set "$i" mtu 9000
        ip addr add "$(node_ip $n)/24" dev "$i"
        ip link set "$i" up
        rdma link add "$(node_rxe $n)" type rxe netdev "$i" || return 1
    done
    for n in A B; do
        wait_for 10 rxe_gid_index "$(node_rxe $n)" "$(node_ip $n)" || { echo "no RoCEv2 GID for node $n"; return 1; }
    done
    rdma link show
}

# the scripts keepalived runs (root-owned directory: enable_script_security)
write_scripts() {
    local n
    mkdir -p "$FO" && chmod 755 "$FO"
    GW_BIN=$(gw_binary)
    for n in A B; do   # each node's gateway config, checked once here
        RXE_IP=$VIP GW_METRICS=$(node_metrics $n) gw_forward_conf > "$FO/gw-$n.yaml"
        cp "$FO/gw-$n.yaml" "$OUT/gw-$n.yaml"
        "$GW_BIN" serve -c "$FO/gw-$n.yaml" -check || return 1
        echo 0 > "$FO/down-$n"
    done
    # notify_master: this node holds the VIP now: start its gateway there
    # (once the VIP's GID reached the node's rxe device) and supervise it:
    # when it exits, say so in the node's track_file, which keepalived
    # watches with inotify (FAULT at once, no polling)
    cat > "$FO/start-gw" <<EOS
#!/bin/bash
# (bash builtins where it can: every fork costs on a loaded TCG guest)
N=\$1 dev=\$2
ev() { echo "\$EPOCHREALTIME node \$N \$*" >> $OUT/failover-events.log; }
ev notify_master
[ -e $FO/gw-\$N.pid ] && kill -0 "\$(< $FO/gw-\$N.pid)" 2>/dev/null && exit 0
# the VIP's GID on this node's rxe device (among the first entries)
gid=0000:0000:0000:0000:0000:ffff:$(printf '%02x%02x:%02x%02x' ${VIP//./ })
for ((i = 0; i < 100; i++)); do
    grep -qx "\$gid" /sys/class/infiniband/\$dev/ports/1/gids/{0..15} 2>/dev/null && break
    [ \$i = 99 ] && { ev "no GID for the VIP: gateway not started"; exit 0; }
    sleep 0.1
done
ev "VIP GID ready"
mkdir -p $OUT/gw-\$N
ulimit -l unlimited
$GW_BIN serve -c $FO/gw-\$N.yaml >> $OUT/gw-\$N/gateway.log 2>&1 &
pid=\$!
echo \$pid > $FO/gw-\$N.pid
ev "gateway pid \$pid started"
wait \$pid
rc=\$?
echo 1 > $FO/down-\$N
ev "gateway pid \$pid exited rc=\$rc"
EOS
    # notify: record every VRRP state change (keepalived appends
    # INSTANCE <name> <state> <priority>)
    cat > "$FO/state" <<EOS
#!/bin/sh
echo "\$4" > $FO/state-\$1
echo "\$(date +%s.%N) node \$1 \$4" >> $OUT/failover-events.log
EOS
    chmod 755 "$FO"/start-gw "$FO"/state
}

# keepalived_conf N: both BACKUP with nopreempt (a repaired node does not
# take the VIP back), A preferred (priority 150 vs 100). Health: the
# node's track_file, 1 once its gateway exited. (A forked check script,
# deploy/keepalived/'s way, took over 10 s per run on the loaded 2-core
# CI host under TCG and made the lab flap.)
keepalived_conf() {
    local n=$1 prio=100; [ "$n" = A ] && prio=150
    cat <<EOC
global_defs {
    router_id rdmagw-$n
    script_user root
    enable_script_security
}
vrrp_track_file gw_down {
    file $FO/down-$n
    weight 0
}
vrrp_instance rdmagw {
    state BACKUP
    nopreempt
    interface $(node_if "$n")
    virtual_router_id 51
    priority $prio
    advert_int 1
    virtual_ipaddress {
        $VIP/32 dev $(node_if "$n")
    }
    track_file {
        gw_down
    }
    notify_master "/usr/bin/setsid -f $FO/start-gw $n $(node_rxe "$n")"
    notify "$FO/state $n"
}
EOC
}

start_keepalived() {
    local n=$1
    keepalived_conf "$n" > "$FO/keepalived-$n.conf"
    cp "$FO/keepalived-$n.conf" "$OUT/keepalived-$n.conf"
    keepalived -t -f "$FO/keepalived-$n.conf" || { echo "keepalived rejects its config"; return 1; }
    bg "keepalived-$n" keepalived -n -l -G -D -P -f "$FO/keepalived-$n.conf" \
        -p "$FO/ka-$n.pid" -r "$FO/ka-$n-vrrp.pid" -c "$FO/ka-$n-chk.pid" -i "rdmagw-$n"
}

vip_on() { ip -4 addr show dev "$(node_if "$1")" | grep -q " $VIP/"; }
gw_up() {
    local p; p=$(cat "$FO/gw-$1.pid" 2>/dev/null) && kill -0 "$p" &&
        curl -sf "http://$(node_metrics "$1")/metrics" > /dev/null
}
active_node() { vip_on A && { echo A; return; }; vip_on B && echo B; }

start_pair() {
    write_scripts
    start_keepalived A || return 1
    wait_for 30 vip_on A || { echo "node A never took the VIP"; return 1; }
    wait_for 40 gw_up A || { echo "gateway A did not come up"; cat "$OUT"/gw-A/*.log; return 1; }
    start_keepalived B || return 1
    wait_for 10 grep -qx BACKUP "$FO/state-B" || { echo "node B is not BACKUP"; return 1; }
    echo "node A MASTER with gateway pid $(cat "$FO/gw-A.pid"), node B BACKUP"
}

# mstat OP FIELD: mountstats counter FIELD (1 ops, 2 transmissions,
# 3 timeouts, ..., 9 errors) of OP on $MNT
mstat() {
    awk -v m=" $MNT " -v op="$1:" -v f="$2" '
        /^device / { on = index($0, m) > 0 } on && $1 == op { v = $(f + 1) } END { print v + 0 }' /proc/self/mountstats
}
mstat_errors() {   # errors over every op of $MNT
    awk -v m=" $MNT " '/^device / { on = index($0, m) > 0 }
        on && /^[ \t]*[A-Z_0-9]+: / && NF >= 10 { e += $10 } END { print e + 0 }' /proc/self/mountstats
}
# srv_writes V: WRITEs knfsd executed (v3: proc3 WRITE; v4: proc4ops WRITE, op 38)
srv_writes() {
    if [ "$1" = 3 ]; then awk '$1 == "proc3" { print $10 }' /proc/net/rpc/nfsd
    else awk '$1 == "proc4ops" { print $41 }' /proc/net/rpc/nfsd; fi
}

# the client's transport, traced: connect attempts with their backoff
# delay (xprtrdma_op_connect), their outcome, and every RDMA-CM event
TR=/sys/kernel/tracing
trace_on() {
    mountpoint -q $TR || mount -t tracefs nodev $TR || return 0
    local e
    for e in rpcrdma/xprtrdma_op_connect rpcrdma/xprtrdma_connect rpcrdma/xprtrdma_disconnect \
             rdma_cma/cm_event_handler; do
        { echo 1 > "$TR/events/$e/enable"; } 2>/dev/null
    done
    echo > $TR/trace
}
trace_mark() { echo "$*" > $TR/trace_marker 2>/dev/null; }
trace_save() {   # trace_save FILE: the trace since the last save
    cat $TR/trace > "$1" 2>/dev/null; echo > $TR/trace 2>/dev/null
    grep -E 'op_connect|xprtrdma_connect|trace_marker|tracing_mark' "$1" | grep -v '^#' | sed 's/^ *//' | cut -c1-160 | tail -12 | sed 's/^/    trace: /'
}

# timeline X Y TK STALL: when, after the kill at TK, X's gateway had
# exited, Y took the VIP, Y's gateway was started and listening, the client
# reconnected and the write moved again (TIMELINE, seconds)
TIMELINE=
timeline() {
    local x=$1 y=$2 tk=$3 ex ma st li co
    ex=$(awk -v n="$x" '$3 == n && /gateway pid .* exited/ { t = $1 } END { print t }' "$OUT/failover-events.log")
    ma=$(awk -v n="$y" '$3 == n && $4 == "MASTER" { t = $1 } END { print t }' "$OUT/failover-events.log")
    st=$(awk -v n="$y" '$3 == n && /gateway pid .* started/ { t = $1 } END { print t }' "$OUT/failover-events.log")
    read -r li co < <(awk '/gateway listening/ { l = $1; c = "" } /client connected/ && l != "" && c == "" { c = $1 }
        END { print l, c }' "$OUT/gw-$y/gateway.log")
    li=$(date -d "$li" +%s.%N 2>/dev/null); co=$(date -d "$co" +%s.%N 2>/dev/null)
    TIMELINE=$(awk -v tk="$tk" -v ex="$ex" -v ma="$ma" -v st="$st" -v li="$li" -v co="$co" -v s="$4" '
        function d(t) { return t == "" ? "?" : sprintf("%.1f", t - tk) }
        BEGIN { printf "exited=+%s vip=+%s started=+%s listening=+%s reconnected=+%s resumed=+%s", d(ex), d(ma), d(st), d(li), d(co), s }')
    echo "  after the kill: $x's gateway exited, VIP on $y (MASTER), $y's gateway started, listening, client reconnected, write resumed:"
    echo "    $TIMELINE"
}

# failover_round V: one write, one kill, one failover
failover_round() {
    V=$1; local p=v${1/./} opts path x y want got srv t0 tk pk stall dd_rc
    opts="vers=$V,proto=rdma,port=20049,hard${E2E_FO_OPTS:+,$E2E_FO_OPTS}"; path=/
    [ "$V" = 3 ] && { opts="$opts,nolock,mountport=$MOUNTD_PORT,mountproto=tcp"; path=$NFS_EXPORT; }
    MNT=/mnt/fo$p; mkdir -p "$MNT"
    x=$(active_node); y=$(other "$x")
    [ -n "$x" ] && gw_up "$x" || { result "${p}_failover" FAIL 0 "no active gateway"; FAILS=$((FAILS + 1)); return 1; }
    check "${p}_mount_vip" timeout 60 mount -t nfs -o "$opts" "$VIP:$path" "$MNT" || return 1
    grep " $MNT " /proc/mounts
    local f=$MNT/fo.bin w0 s0 r0
    w0=$(mstat WRITE 1); s0=$(srv_writes "$V"); r0=$(mstat WRITE 2)
    want=$(sha /tmp/fo-src.bin)
    t0=$(now)
    local plog=$OUT/progress-$p.txt
    "$E2E_REPO/bin/progwrite" -src /tmp/fo-src.bin -dst "$f" -bs 1048576 -direct -log "$plog" &
    local wpid=$!
    # kill the active gateway once a quarter of the file is written
    local quarter=$((FO_MIB * 1048576 / 4)) end=$(( ${EPOCHREALTIME%.*} + 120 )) o last=0
    while [ "$last" -lt "$quarter" ] && kill -0 "$wpid" 2>/dev/null && [ "${EPOCHREALTIME%.*}" -lt "$end" ]; do
        sleep 0.1
        while read -r _ o; do [[ $o == [0-9]* ]] && last=$o; done < "$plog"
    done
    local gpid; gpid=$(cat "$FO/gw-$x.pid")
    kill -9 "$gpid"; tk=$EPOCHREALTIME   # the builtin: no fork between them
    trace_mark "kill -9 gateway $x at $tk"
    pk=$(awk -v tk="$tk" '$1 <= tk { o = $2 } END { print o + 0 }' "$plog")
    echo "  $(date +%T) killed gateway $x (pid $(cat "$FO/gw-$x.pid")) at offset $pk of $((FO_MIB * 1048576)) after $(elapsed "$t0")s"
    echo "$tk kill -9 gateway $x at offset $pk ($p)" >> "$OUT/failover-events.log"
    # hard mount: the write waits for the other gateway; bounded here so
    # that a hang is a FAIL with logs, not the guest's time limit
    local waited=0
    while kill -0 "$wpid" 2>/dev/null && [ $waited -lt 2400 ]; do sleep 0.1; waited=$((waited + 1)); done
    kill -0 "$wpid" 2>/dev/null && { echo "  write still blocked after 240 s"; dmesg | tail -20; }
    wait "$wpid"; dd_rc=$?
    local tw; tw=$(elapsed "$t0")
    # stall: from the kill to the first write (or the fsync) that returned
    # after the longest pause since the kill (a write whose reply was on
    # its way when the gateway died may still return at once)
    stall=$(awk -v tk="$tk" '$1 > tk { g = $1 - (p > tk ? p : tk); if (g > m) { m = g; s = $1 - tk } } { p = $1 }
        END { if (m) printf "%.1f", s; else print "none" }' "$plog")
    [ "$pk" -lt $((FO_MIB * 1048576)) ] 2>/dev/null || { echo "  the kill came after the last write"; dd_rc=2; }
    echo "  write rc=$dd_rc in ${tw}s; stall after the kill ${stall}s; VIP on node $(active_node)"
    # One kernel plays every host: right after the kill the VIP is still
    # local to the client's own kernel, and the client's reconnect to it
    # can fail there with -EINVAL (xprtrdma_connect rc=-22, before the
    # other gateway listens), which the RPC layer takes as fatal and hands
    # to the write (EINVAL; seen once in 2026-11-27's CI, v4.1). Not the
    # gateway's doing, and a client on its own host never connects from
    # the VIP: the round is done once more, and said so.
    if [ "$dd_rc" != 0 ] && [ -z "${FO_AGAIN:-}" ] && grep -q 'xprtrdma_connect: .* rc=-22 ' $TR/trace 2>/dev/null; then
        echo "  lab: the client's own reconnect failed with -EINVAL (xprtrdma_connect rc=-22): the round once more"
        trace_save "$OUT/trace-$p.einval.txt"
        result "${p}_lab_client_einval" SKIP 0 "the client's reconnect to the VIP local to its own kernel failed with rc=-22; round done again"
        rm -f "$f"; timeout 60 umount "$MNT"
        repair_node "$x"
        return 2
    fi
    echo "  events:"; sort -n "$OUT/failover-events.log" | tail -7 | sed 's/^/    /'
    timeline "$x" "$y" "$tk" "$stall"
    check "${p}_write_completes" test "$dd_rc" = 0
    trace_save "$OUT/trace-$p.txt"
    local vok=0; vip_on "$y" && ! vip_on "$x" && gw_up "$y" || vok=1
    check "${p}_vip_moved_${x}_to_${y}" test $vok = 0
    drop_caches
    got=$(timeout 120 cat "$f" | sha256sum | cut -c1-64)
    srv=$(sha "$(srv_path "$f")")
    echo "  sha256 src=${want:0:16} nfs=${got:0:16} server=${srv:0:16}"
    local bytes; bytes=$(stat -c %s "$(srv_path "$f")")
    local ok=0; [ "$want" = "$got" ] && [ "$want" = "$srv" ] || ok=1
    result "${p}_failover" "$([ $ok = 0 ] && [ "$dd_rc" = 0 ] && echo PASS || echo FAIL)" "$tw" \
        "stall=${stall}s verified=${bytes}B killed=$x active=$(active_node) $TIMELINE"
    [ $ok = 0 ] && [ "$dd_rc" = 0 ] || FAILS=$((FAILS + 1))
    # exactly-once: client ops and retransmissions vs. knfsd's executions
    # (errors: WRITE and COMMIT; all ops' errors are printed, a LOOKUP of
    # a name not there yet counts as one)
    local w1 s1 r1 e; w1=$(mstat WRITE 1); r1=$(mstat WRITE 2); s1=$(srv_writes "$V")
    e=$(( $(mstat WRITE 9) + $(mstat COMMIT 9) ))
    local cw=$((w1 - w0)) ct=$((r1 - r0)) sw=$((s1 - s0))
    echo "  client WRITE ops $cw transmissions $ct (retransmitted $((ct - cw))); knfsd executed $sw WRITEs; WRITE/COMMIT errors $e, all ops' errors $(mstat_errors)"
    grep -A1 "^device $VIP:$path mounted on $MNT " /proc/self/mountstats | sed 's/^/  /'
    awk -v m=" $MNT " '/^device / { on = index($0, m) > 0 } on && /xprt:|^[ \t]*(WRITE|COMMIT|SEQUENCE|BIND_CONN_TO_SESSION):/' /proc/self/mountstats | sed 's/^/  /'
    echo "${p} stall=${stall}s $TIMELINE bytes=$bytes client_writes=$cw transmissions=$ct server_writes=$sw errors=$e" >> "$OUT/failover.txt"
    if [ "$V" = 3 ]; then
        # no sessions: measured and documented (README), not judged
        result "${p}_exactly_once" PASS 0 "info: retransmitted=$((ct - cw)) executed=$sw of $cw errors=$e"
    else
        # knfsd runs no call more often than the client sent it (errors:
        # a WRITE whose reply knfsd did not cache comes back as
        # NFS4ERR_RETRY_UNCACHED_REP and is sent again as a new call)
        check "${p}_exactly_once" test "$sw" -le "$cw"
    fi
    rm -f "$f"
    check "${p}_umount" timeout 60 umount "$MNT"
    repair_node "$x"
}

# repair_node N: the killed node's check passes again and it rejoins as
# BACKUP
repair_node() {
    rm -f "$FO/gw-$1.pid"; echo 0 > "$FO/down-$1"
    wait_for 15 grep -qx BACKUP "$FO/state-$1" || { echo "  node $1 did not rejoin as BACKUP"; cat "$FO/state-$1"; }
}

tstep setup_link setup_link || lab_fail "setup_link (veth + two rxe)"
tstep setup_knfsd setup_knfsd || lab_fail "setup_knfsd"
trace_on
dd if=/dev/urandom of=/tmp/fo-src.bin bs=1M count="$FO_MIB" status=none
if ! check pair_start start_pair; then
    tail -30 "$OUT"/keepalived-*.log; stop_bg; exit 1
fi
for v in $VERSIONS; do
    failover_round "$v"
    [ $? = 2 ] && FO_AGAIN=1 failover_round "$v"
done
[ -s "$OUT/failover.txt" ] && { echo "== failover"; cat "$OUT/failover.txt"; }
[ "$FAILS" = 0 ] || { dmesg | tail -40; tail -n 20 "$OUT"/gw-*/gateway.log "$OUT"/keepalived-*.log; }
for n in A B; do p=$(cat "$FO/gw-$n.pid" 2>/dev/null) && kill "$p" 2>/dev/null; done
stop_bg
exit $((FAILS > 0))
