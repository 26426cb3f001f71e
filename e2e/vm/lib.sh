# lib.sh - helpers for the guest-side case scripts (source it; runs in the
# guest, where $OUT is the results share and $E2E_REPO the project).
#
# Results and timing
#   result NAME PASS|FAIL|SKIP SECS [msg]  print "RESULT NAME STATUS SECS msg"
#                                          (also appended to $OUT/results.txt)
#   check NAME cmd...        run cmd, time it, record PASS (rc 0) or FAIL;
#                            counts failures in $FAILS
#   tstep NAME cmd...        run cmd, print "TIMING NAME <secs>s rc=<rc>"
#   lab_fail msg             the lab itself is broken (rxe, knfsd did not come
#                            up): print "LABFAIL msg", exit 100 (run.sh retries)
#   bg NAME cmd... / stop_bg background daemons logging to $OUT/NAME.log
# RDMA and NFS
#   setup_rxe [dummy|veth]   rdma_rxe on a dummy (or veth) netdev with
#                            $RXE_IP/24; exports RXE_DEV RXE_NETDEV RXE_IP RXE_GID_IDX
#   setup_siw                soft-iWARP (siw.ko, built by build-guest.sh) on a
#                            veth pair: siw0 on veth0 with $SIW_IP in this
#                            namespace, veth1 with $SIW_PEER_IP in netns
#                            $SIW_NS (for a pure-Go peer whose TCP must cross
#                            a real netdev); exports SIW_DEV SIW_NETDEV
#   setup_knfsd [rdma]       knfsd exporting a tmpfs at $NFS_EXPORT (fsid=0) on
#                            TCP 2049 (+ RDMA 20049 with "rdma"); mountd on
#                            TCP/UDP $MOUNTD_PORT; nfsdcld (no grace), lease 10 s;
#                            starts rpcbind unless one already answers
#   setup_rpcbind_local      rpcbind on 127.0.0.1:111 (+ $RXE_IP:$CLIENT_RPCBIND_PORT)
#                            only, so the gateway's responder can own $RXE_IP:111
#   setup_statd              rpc.statd (NSM) for lockd, client and server side
#   drop_caches              sync and drop the guest's page/dentry/inode caches
#   nfs_suite PFX SRC OPTS   mount SRC with OPTS and run the data checks
#                            (64 MiB dd, fio pattern, file sizes, namespace
#                            ops, symlink, 2,000-entry directory); adds the
#                            payload bytes to NFS_BYTES_WRITTEN/NFS_BYTES_READ;
#                            $NFS_SUITE_SKIP ("fio dir2000 sizes") leaves those out
# Gateway
#   gw_binary                path of the host-built ibverbs gateway, or "" 
#   need_gateway RESULT      without it: RESULT SKIP and the case ends (exit 0)
#   start_gateway            ($GW_PROVIDER: the RDMA side's provider, default
#                            ibverbs; $GW_NETNS: run it in that netns;
#                            $GW_LISTEN_IP/$GW_BACKEND_IP/$GW_LOCAL_IP
#                            override the addresses below; $GW_NAME names
#                            a second gateway's log and config files)
#                            write a forward config and start the gateway on
#                            $RXE_IP:${GW_PORT:-20049} -> 127.0.0.1:2049, metrics on $GW_METRICS;
#                            $GW_EXTRA_CONF is appended to the config;
#                            rdma.versions from $GW_FW_RDMA_VERSIONS ("1, 2"),
#                            $GW_FW_RDMA_CONF more rdma: lines (indented)
#   gw_forward_conf          that config on stdout (to start a gateway elsewhere)
#   start_gateway_reverse    the same in reverse mode: TCP 127.0.0.1:2050 ->
#                            knfsd over RDMA (ibverbs, rxe) at $RXE_IP:20049;
#                            backend.rdma_version from $GW_RV_RDMA_VERSION (auto)
#   chk_rdma_version_v1 [fallback]  every RDMA connection settled on version 1
#   chk_chunk_bytes RDIR WDIR [RE]  Read/Write-chunk bytes match the suite's
#   gw_metric PATH DIR       rdmagw_bytes_total{path=PATH,direction=DIR}
#   metric_sum NAME [L=V..] [FILE]  a metric summed over its series with
#                            those labels (all series without any)

OUT=${OUT:-/tmp}
RXE_IP=${RXE_IP:-10.99.0.1}
NFS_EXPORT=${NFS_EXPORT:-/srv/nfs}
MOUNTD_PORT=${MOUNTD_PORT:-20048}
DATA_MIB=${E2E_DATA_MIB:-64}
FIO_MIB=${E2E_FIO_MIB:-16}
GW_METRICS=${GW_METRICS:-127.0.0.1:9464}
BG_PIDS=()
FAILS=0
NFS_BYTES_WRITTEN=0
NFS_BYTES_READ=0

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

result() {
    echo "RESULT $1 $2 ${3:-0} ${4:-}" | tee -a "$OUT/results.txt"
}

check() {
    local name=$1; shift
    local t0 rc; t0=$(now)
    "$@"; rc=$?
    if [ $rc = 0 ]; then result "$name" PASS "$(elapsed "$t0")"
    else result "$name" FAIL "$(elapsed "$t0")" "rc=$rc"; FAILS=$((FAILS + 1)); fi
    return $rc
}

tstep() {
    local name=$1; shift
    local t0 rc; t0=$(now)
    "$@"; rc=$?
    echo "TIMING $name $(elapsed "$t0")s rc=$rc"
    return $rc
}

lab_fail() {
    echo "LABFAIL $*" | tee -a "$OUT/results.txt"
    dmesg | tail -40
    stop_bg
    exit 100
}

bg() {
    local name=$1; shift
    "$@" > "$OUT/$name.log" 2>&1 &
    BG_PIDS+=($!)
    echo "bg: $name pid=$!"
}

stop_bg() {
    local p
    for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${BG_PIDS[@]}"; do wait "$p" 2>/dev/null; done
    BG_PIDS=()
}

# wait_for SECS cmd... : poll until cmd succeeds
wait_for() {
    local secs=$1; shift
    local end=$(( $(date +%s) + secs ))
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$end" ] || return 1
        sleep 0.2
    done
}

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }

sha() { sha256sum < "$1" | cut -c1-64; }

# ------------------------------------------------------------------ rxe ----
# GID table index of the RoCEv2 GID carrying IPv4 address $2 on device $1
# (1 on a dummy/veth). One grep over the 1024-entry table: a fork per entry
# takes 10-20 s under TCG.
rxe_gid_index() {
    local dev=$1 ip=$2 hex want f idx
    hex=$(printf '%02x%02x:%02x%02x' ${ip//./ })
    want="0000:0000:0000:0000:0000:ffff:$hex"
    for f in $(grep -l -x "$want" /sys/class/infiniband/"$dev"/ports/1/gids/* 2>/dev/null); do
        idx=${f##*/}
        if grep -q 'RoCE v2' "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/$idx" 2>/dev/null; then
            echo "$idx"; return 0
        fi
    done
    return 1
}

setup_rxe() {
    local kind=${1:-dummy}
    modprobe rdma_rxe || return 1
    case $kind in
        dummy)  # nothing leaves a dummy; rxe loops local traffic back itself
            modprobe dummy numdummies=0
            ip link add rdma0 type dummy || return 1 ;;
        veth)
            ip link add rdma0 type veth peer name rdma0p || return 1
            ip link set rdma0p mtu 9000; ip link set rdma0p up ;;
        *) echo "setup_rxe: bad kind $kind"; return 1 ;;
    esac
    RXE_NETDEV=rdma0
    ip link set "$RXE_NETDEV" mtu 9000
    ip addr add "$RXE_IP/24" dev "$RXE_NETDEV"
    ip link set "$RXE_NETDEV" up
    rdma link add rxe0 type rxe netdev "$RXE_NETDEV" || return 1
    RXE_DEV=rxe0
    wait_for 10 rxe_gid_index rxe0 "$RXE_IP" || { echo "no IPv4 RoCEv2 GID on rxe0"; return 1; }
    RXE_GID_IDX=$(rxe_gid_index rxe0 "$RXE_IP")
    export RXE_DEV RXE_NETDEV RXE_IP RXE_GID_IDX
    echo "rxe0 on $RXE_NETDEV ($kind) ip=$RXE_IP gid_index=$RXE_GID_IDX"
}

# ------------------------------------------------------------------ siw ----
SIW_IP=${SIW_IP:-10.99.1.1}
SIW_PEER_IP=${SIW_PEER_IP:-10.99.1.2}
SIW_NS=${SIW_NS:-siwpeer}
setup_siw() {
    modprobe siw || { echo "modprobe siw failed (siw.ko: e2e/vm/build-guest.sh)"; return 1; }
    ip link add veth0 type veth peer name veth1 || return 1
    ip netns add "$SIW_NS" || return 1
    ip link set veth1 netns "$SIW_NS" || return 1
    ip addr add "$SIW_IP/24" dev veth0
    ip link set veth0 up
    ip netns exec "$SIW_NS" ip addr add "$SIW_PEER_IP/24" dev veth1
    ip netns exec "$SIW_NS" ip link set veth1 up
    ip netns exec "$SIW_NS" ip link set lo up
    rdma link add siw0 type siw netdev veth0 || return 1
    SIW_DEV=siw0 SIW_NETDEV=veth0
    export SIW_DEV SIW_NETDEV SIW_IP SIW_PEER_IP SIW_NS
    wait_for 10 grep -qx 1 /sys/class/net/veth0/carrier || { echo "veth0 has no carrier"; return 1; }
    echo "siw0 on veth0 ip=$SIW_IP; peer veth1 ip=$SIW_PEER_IP in netns $SIW_NS"
}

# ---------------------------------------------------------------- knfsd ----
# The guest's / is an overlay over 9p, which knfsd cannot export, so mountd
# cannot build the NFSv4 pseudo-root from /: the tmpfs export is the
# pseudo-root itself (fsid=0). NFSv3 mounts $NFS_EXPORT, NFSv4 mounts /.
setup_knfsd() {
    local want_rdma=${1:-}
    modprobe nfsd || return 1
    mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd || return 1
    mountpoint -q /run/rpc_pipefs || mount -t rpc_pipefs rpc_pipefs /run/rpc_pipefs
    mkdir -p "$NFS_EXPORT"
    mount -t tmpfs -o size=1536m,mode=1777 tmpfs "$NFS_EXPORT"
    echo "$NFS_EXPORT *(rw,sync,no_root_squash,insecure,no_subtree_check,fsid=0)" > /etc/exports
    if ! rpcinfo -p 127.0.0.1 > /dev/null 2>&1; then
        mkdir -p /run/rpcbind
        bg rpcbind rpcbind -f
        wait_for 10 rpcinfo -p 127.0.0.1 || { echo "rpcbind did not come up"; return 1; }
    fi
    # nfsdcld lets knfsd skip the NFSv4 grace period when there is nothing
    # to reclaim; short lease/grace anyway in case it does not.
    mkdir -p /var/lib/nfs/nfsdcld
    bg nfsdcld nfsdcld -F
    echo 10 > /proc/fs/nfsd/nfsv4leasetime
    echo 10 > /proc/fs/nfsd/nfsv4gracetime
    # lockd's grace period (50 s by default) starts with nfsd; while it
    # lasts knfsd refuses NLM locks (GRACE) and grants no delegations
    modprobe lockd && echo 10 > /proc/sys/fs/nfs/nlm_grace_period
    exportfs -ra || return 1
    bg mountd rpc.mountd -F -p "$MOUNTD_PORT"
    rpc.nfsd 8 || return 1
    if [ "$want_rdma" = rdma ]; then
        modprobe rpcrdma || return 1
        echo "rdma 20049" > /proc/fs/nfsd/portlist || return 1
    fi
    echo "nfsd versions: $(cat /proc/fs/nfsd/versions)"
    echo "nfsd portlist: $(tr '\n' ' ' < /proc/fs/nfsd/portlist)"
    wait_for 10 rpcinfo -t 127.0.0.1 mountd 3 || { echo "mountd not registered"; return 1; }
    modprobe nfsv3; modprobe nfsv4
    [ "$want_rdma" = rdma ] || modprobe rpcrdma
    return 0
}

# setup_rpcbind_local: the guest's rpcbind, kept off $RXE_IP:111 where the
# gateway's rpcbind responder (aux relay) must listen. Debian 12's rpcbind
# binds TCP 111 on every address whatever -h says (and aborts on
# -h 127.0.0.1), so it is handed its sockets the way systemd would
# (e2e/tools/sockact): the local socket, 127.0.0.1:111 for the filer side
# (knfsd, mountd, statd register there; the relay asks it for the filer's
# ports) and $RXE_IP:$CLIENT_RPCBIND_PORT, where the relay asks for the
# client's NLM port when it forwards a callback: client, gateway and filer
# share one kernel and one address here, and port 111 on it is the relay's.
# The 127.0.0.1 sockets go last: rpcbind advertises itself at the last one.
CLIENT_RPCBIND_PORT=${CLIENT_RPCBIND_PORT:-1111}
setup_rpcbind_local() {
    local sockact=$E2E_REPO/bin/sockact
    [ -x "$sockact" ] || { echo "$sockact missing (e2e/run.sh builds it)"; return 1; }
    mkdir -p /run/rpcbind
    bg rpcbind "$sockact" unix:/run/rpcbind.sock \
        "tcp:$RXE_IP:$CLIENT_RPCBIND_PORT" "udp:$RXE_IP:$CLIENT_RPCBIND_PORT" \
        tcp:127.0.0.1:111 udp:127.0.0.1:111 -- rpcbind -f -w
    wait_for 10 rpcinfo -p 127.0.0.1 || { echo "rpcbind did not come up"; return 1; }
    ss -ltnu | grep -E ':(111|'"$CLIENT_RPCBIND_PORT"')\b'
}

# setup_statd: rpc.statd, which lockd needs on both sides: the client
# monitors the server it locks with, the server each client that locks.
setup_statd() {
    mkdir -p /var/lib/nfs/sm /var/lib/nfs/sm.bak
    bg statd rpc.statd -F --no-notify
    wait_for 10 rpcinfo -t 127.0.0.1 status 1 || { echo "statd not registered"; return 1; }
}

# --------------------------------------------------------- data checks ----
# make_src: the random source data, once per guest
make_src() {
    [ -s /tmp/src.dat ] || dd if=/dev/urandom of=/tmp/src.dat bs=1M count="$DATA_MIB" status=none
}

# srv_path FILE-ON-MOUNT: the same file seen on the server's tmpfs
srv_path() { echo "$NFS_EXPORT/${1#"$MNT"/}"; }

chk_data() {   # dd write DATA_MIB, drop caches, read back, sha256 both ends
    local f=$MNT/data.bin want got srv t0 w r
    want=$(sha /tmp/src.dat)
    t0=$(now)
    timeout 300 dd if=/tmp/src.dat of="$f" bs=1M conv=fsync status=none || { echo "write failed"; return 1; }
    w=$(elapsed "$t0")
    NFS_BYTES_WRITTEN=$((NFS_BYTES_WRITTEN + DATA_MIB * 1048576))
    drop_caches
    t0=$(now)
    got=$(timeout 300 cat "$f" | sha256sum | cut -c1-64)
    r=$(elapsed "$t0")
    NFS_BYTES_READ=$((NFS_BYTES_READ + DATA_MIB * 1048576))
    srv=$(sha "$(srv_path "$f")")
    echo "  ${DATA_MIB}MiB: write ${w}s read ${r}s sha256 src=${want:0:16} nfs=${got:0:16} server=${srv:0:16}"
    rm -f "$f"
    [ "$want" = "$got" ] && [ "$want" = "$srv" ]
}

chk_fio() {    # fio: mixed block sizes, random offsets, direct I/O, crc32c
    local f=$MNT/fio.bin args
    args=(--name=mix --filename="$f" --size="${FIO_MIB}M" --rw=randwrite
          --bssplit=4k/40:64k/30:1m/30 --ioengine=psync --direct=1
          --verify=crc32c --verify_fatal=1 --randrepeat=1 --fallocate=none --minimal)
    timeout 300 fio "${args[@]}" > "$OUT/fio-$PFX.txt" 2>&1 || { cat "$OUT/fio-$PFX.txt"; return 1; }
    drop_caches
    # a second pass, verify only, on a cold cache
    timeout 300 fio "${args[@]}" --verify_only >> "$OUT/fio-$PFX.txt" 2>&1 || { cat "$OUT/fio-$PFX.txt"; return 1; }
    NFS_BYTES_WRITTEN=$((NFS_BYTES_WRITTEN + FIO_MIB * 1048576))
    NFS_BYTES_READ=$((NFS_BYTES_READ + 2 * FIO_MIB * 1048576))
    rm -f "$f"
}

chk_sizes() {  # files of 0, 1, 4095, 4097, 1 MiB+3 bytes
    local s f ok=0
    for s in 0 1 4095 4097 1048579; do
        f=$MNT/size.$s
        head -c "$s" /tmp/src.dat > "$f" && sync || { echo "write $s failed"; ok=1; continue; }
        NFS_BYTES_WRITTEN=$((NFS_BYTES_WRITTEN + s))
    done
    drop_caches
    for s in 0 1 4095 4097 1048579; do
        f=$MNT/size.$s
        local want got sz
        want=$(head -c "$s" /tmp/src.dat | sha256sum | cut -c1-64)
        got=$(sha "$f"); sz=$(stat -c %s "$f")
        NFS_BYTES_READ=$((NFS_BYTES_READ + s))
        [ "$want" = "$got" ] && [ "$sz" = "$s" ] || { echo "size $s: got size $sz sha ${got:0:16} want ${want:0:16}"; ok=1; }
        [ "$(sha "$(srv_path "$f")")" = "$want" ] || { echo "size $s: server copy differs"; ok=1; }
    done
    rm -f "$MNT"/size.*
    return $ok
}

chk_namespace() {  # create, rename, remove (files and directories)
    local d=$MNT/ns
    mkdir "$d" && echo hello > "$d/a" && mkdir "$d/sub" || return 1
    mv "$d/a" "$d/b" && mv "$d/sub" "$d/sub2" || return 1
    drop_caches
    [ ! -e "$d/a" ] && [ "$(cat "$d/b")" = hello ] && [ -d "$d/sub2" ] && [ ! -e "$d/sub" ] || { ls -la "$d"; return 1; }
    [ -f "$NFS_EXPORT/ns/b" ] || { echo "rename not on the server"; return 1; }
    rm "$d/b" && rmdir "$d/sub2" && rmdir "$d" || return 1
    drop_caches
    [ ! -e "$d" ] && [ ! -e "$NFS_EXPORT/ns" ]
}

chk_symlink() {    # symlink, readlink over the wire (cold cache)
    local l=$MNT/link t="target/of/a/symlink-$(printf 'x%.0s' {1..200})"
    ln -s "$t" "$l" || return 1
    drop_caches
    [ "$(readlink "$l")" = "$t" ] || { echo "readlink: $(readlink "$l")"; return 1; }
    [ "$(readlink "$(srv_path "$l")")" = "$t" ] || { echo "server readlink differs"; return 1; }
    rm "$l"
}

chk_bigdir() {     # 2,000 entries, listed with ls -l on a cold cache
    local d=$MNT/big i n
    mkdir "$d" || return 1
    for ((i = 0; i < 2000; i++)); do : > "$d/file-with-a-longish-name-$i"; done
    drop_caches
    n=$(ls -l "$d" | wc -l)   # "total" line + 2,000 entries
    echo "  ls -l | wc -l = $n"
    rm -rf "$d"
    [ "$n" = 2001 ]
}

# nfs_suite PFX SERVER:PATH OPTS
nfs_suite() {
    PFX=$1; local src=$2 opts=$3
    MNT=/mnt/$PFX
    mkdir -p "$MNT"; make_src
    if ! check "${PFX}_mount" timeout 60 mount -t nfs -o "$opts" "$src" "$MNT"; then
        dmesg | tail -20; return 1
    fi
    grep " $MNT " /proc/mounts
    local want_proto; want_proto=$(echo "$opts" | sed -n 's/.*proto=\([a-z0-9]*\).*/\1/p')
    grep " $MNT " /proc/mounts | grep -q "proto=$want_proto" ||
        { result "${PFX}_proto" FAIL 0 "mounted without proto=$want_proto"; FAILS=$((FAILS + 1)); }
    check "${PFX}_data${DATA_MIB}m" chk_data
    if [[ " ${NFS_SUITE_SKIP:-} " == *" fio "* ]]; then :
    elif command -v fio >/dev/null; then check "${PFX}_fio" chk_fio
    else result "${PFX}_fio" SKIP 0 "fio not installed"; fi
    [[ " ${NFS_SUITE_SKIP:-} " == *" sizes "* ]] || check "${PFX}_sizes" chk_sizes
    check "${PFX}_namespace" chk_namespace
    check "${PFX}_symlink" chk_symlink
    [[ " ${NFS_SUITE_SKIP:-} " == *" dir2000 "* ]] || check "${PFX}_dir2000" chk_bigdir
    [ -z "${SUITE_BEFORE_UMOUNT:-}" ] || "$SUITE_BEFORE_UMOUNT"
    check "${PFX}_umount" timeout 60 umount "$MNT"
}

# xprt_rdma MNT: the mount's xprtrdma counters from /proc/self/mountstats
# (xprt_rdma_print_stats in net/sunrpc/xprtrdma/transport.c) as
# "rpcs_sent chunked_rpcs local_inv_needed": chunked = Read + Write +
# Reply chunk counts; local_inv_needed = replies after which the client
# still had to LOCAL_INV a registration (one a Send With Invalidate
# spares it), the third-last field.
xprt_rdma() {
    awk -v m=" mounted on $1 " '/^device / { on = index($0, m) > 0 }
        on && $1 == "xprt:" && $2 == "rdma" { print $8, $13 + $14 + $15, $(NF-2); exit }' /proc/self/mountstats
}

# -------------------------------------------------------------- gateway ----
gw_binary() {
    local b=${E2E_GW_BIN:-$E2E_REPO/bin/rdmagw-ibverbs}
    [ -x "$b" ] && "$b" help 2>/dev/null | grep -w serve > /dev/null && echo "$b"
}

# need_gateway RESULT: without a gateway binary that has a "serve"
# subcommand, report RESULT SKIP and end the case (exit 0)
need_gateway() {
    gw_binary > /dev/null && return 0
    result "$1" SKIP 0 "gateway not built (${E2E_GW_BIN:-$E2E_REPO/bin/rdmagw-ibverbs} missing or has no serve)"
    exit 0
}

start_gateway() {
    GW_BIN=$(gw_binary) || return 1
    GW_CONF=/tmp/${GW_NAME:+$GW_NAME-}forward.yaml
    gw_forward_conf > "$GW_CONF"
    cp "$GW_CONF" "$OUT/${GW_NAME:+$GW_NAME-}forward.yaml"
    gw_launch
}

# gw_forward_conf: start_gateway's forward config on stdout
gw_forward_conf() {
    cat <<EOC
mode: forward
listen:
  address: ${GW_LISTEN_IP:-$RXE_IP}
  port: ${GW_PORT:-20049}
  provider: ${GW_PROVIDER:-ibverbs}
backend:
  address: ${GW_BACKEND_IP:-127.0.0.1}
  port: 2049
rdma:
  versions: [${GW_FW_RDMA_VERSIONS:-1, 2}]
${GW_FW_RDMA_CONF:-}
metrics:
  listen: $GW_METRICS
log:
  level: ${E2E_GW_LOG:-info}
${GW_EXTRA_CONF:-}
EOC
}

# start_gateway_reverse: reverse config: TCP on $GW_RV_ADDR:$GW_RV_PORT
# (127.0.0.1:2050) -> knfsd over RDMA (ibverbs on rxe) at $RXE_IP:20049
start_gateway_reverse() {
    GW_BIN=$(gw_binary) || return 1
    GW_CONF=/tmp/reverse.yaml
    cat > "$GW_CONF" <<EOC
mode: reverse
listen:
  address: ${GW_RV_ADDR:-127.0.0.1}
  port: ${GW_RV_PORT:-2050}
backend:
  address: ${GW_BACKEND_IP:-$RXE_IP}
  port: 20049
  provider: ${GW_PROVIDER:-ibverbs}
  local_address: ${GW_LOCAL_IP:-$RXE_IP}
  rdma_version: ${GW_RV_RDMA_VERSION:-auto}
metrics:
  listen: $GW_METRICS
log:
  level: ${E2E_GW_LOG:-info}
EOC
    cp "$GW_CONF" "$OUT/reverse.yaml"
    gw_launch
}

# gw_launch: check $GW_CONF, start $GW_BIN on it, wait for /metrics; its
# output goes to $OUT/${GW_NAME:-gateway}.log (GW_NAME: a second gateway
# in the same case, e.g. 30-perf's gwp)
gw_launch() {
    local ns=() log=$OUT/${GW_NAME:-gateway}.log
    [ -z "${GW_NETNS:-}" ] || ns=(ip netns exec "$GW_NETNS")
    "$GW_BIN" serve -c "$GW_CONF" -check || { echo "gateway rejects its config"; return 1; }
    ulimit -l unlimited 2>/dev/null
    bg "${GW_NAME:-gateway}" "${ns[@]}" "$GW_BIN" serve -c "$GW_CONF"
    GW_PID=${BG_PIDS[-1]}
    if ! wait_for 30 curl -sf "http://$GW_METRICS/metrics"; then
        echo "gateway did not come up:"; tail -20 "$log"; return 1
    fi
    kill -0 "$GW_PID" 2>/dev/null || { tail -20 "$log"; return 1; }
    echo "gateway pid=$GW_PID up: $(head -c 300 "$log" | tr '\n' ' ')"
}

gw_scrape() { curl -sf "http://$GW_METRICS/metrics" > "$OUT/metrics${1:-}.txt"; }

# gw_metric PATH DIRECTION [file]: value of rdmagw_bytes_total (0 if absent)
gw_metric() { metric_sum rdmagw_bytes_total path="$1" direction="$2" ${3:+"$3"}; }

# chk_chunk_bytes RDIR WDIR [RE]: the gateway's /metrics account for the
# bytes the data suite moved: Read-chunk bytes (rdmagw_bytes_total
# path=read_chunk, direction RDIR) since $OUT/metrics.start.txt match
# $NFS_BYTES_WRITTEN, Write-chunk bytes (direction WDIR) $NFS_BYTES_READ,
# within -3 % (small WRITEs travel inline) .. +3 % + 1 MiB (READLINK
# results, XDR round-up); prints the series matching ^rdmagw_(RE)
# (default bytes_total).
chk_chunk_bytes() {
    local rdir=$1 wdir=$2 re=${3:-bytes_total} rd wr ok=0
    gw_scrape || { echo "scrape failed"; return 1; }
    rd=$(( $(gw_metric read_chunk "$rdir") - $(gw_metric read_chunk "$rdir" "$OUT/metrics.start.txt") ))
    wr=$(( $(gw_metric write_chunk "$wdir") - $(gw_metric write_chunk "$wdir" "$OUT/metrics.start.txt") ))
    inrange() { awk -v m="$1" -v e="$2" 'BEGIN{exit !(m >= e*0.97 - 65536 && m <= e*1.03 + 1048576)}'; }
    printf '  read_chunk  (%-3s) %s bytes; the case wrote %s\n' "$rdir" "$rd" "$NFS_BYTES_WRITTEN"
    printf '  write_chunk (%-3s) %s bytes; the case read  %s\n' "$wdir" "$wr" "$NFS_BYTES_READ"
    inrange "$rd" "$NFS_BYTES_WRITTEN" || { echo "  read_chunk bytes do not match the bytes written"; ok=1; }
    inrange "$wr" "$NFS_BYTES_READ" || { echo "  write_chunk bytes do not match the bytes read"; ok=1; }
    grep -E "^rdmagw_($re)" "$OUT/metrics.txt" | sed 's/^/  /'
    return $ok
}

# chk_rdma_version_v1 [fallback]: the gateway's RDMA connections all settled
# on RPC-over-RDMA version 1 (rdmagw_rdma_connections_by_version_total):
# at least one at version 1, none at version 2. With "fallback" (reverse,
# backend.rdma_version auto against a version-one server) at least one
# connection must have offered version 2 and fallen back on the server's
# ERR_VERS (rdmagw_rdma_version_fallbacks_total).
chk_rdma_version_v1() {
    gw_scrape .version || { echo "scrape failed"; return 1; }
    local f=$OUT/metrics.version.txt v1 v2 fb
    v1=$(metric_sum rdmagw_rdma_connections_by_version_total version=1 "$f")
    v2=$(metric_sum rdmagw_rdma_connections_by_version_total version=2 "$f")
    fb=$(metric_sum rdmagw_rdma_version_fallbacks_total "$f")
    echo "  RDMA connections: version 1 $v1, version 2 $v2; fallbacks to version 1: $fb"
    [ "${v1%.*}" -gt 0 ] && [ "${v2%.*}" = 0 ] || return 1
    [ "${1:-}" != fallback ] || [ "${fb%.*}" -gt 0 ]
}

# metric_sum NAME [LABEL=VALUE...] [FILE]: the series of NAME that carry
# every LABEL=VALUE given, summed (0 if none); FILE (an argument with a
# "/" and no "=") defaults to $OUT/metrics.txt
metric_sum() {
    local name=$1 file=$OUT/metrics.txt want=() a
    shift
    for a in "$@"; do
        case $a in
            *=*) want+=("${a%%=*}=\"${a#*=}\"") ;;
            */*) file=$a ;;
        esac
    done
    awk -v n="$name" -v want="${want[*]}" '
        BEGIN { k = split(want, w, " ") }
        $1 == n || index($1, n "{") == 1 {
            for (i = 1; i <= k; i++) if (!index($1, w[i])) next
            v += $2
        }
        END { printf "%.0f\n", v }' "$file"
}
