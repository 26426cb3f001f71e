#!/bin/bash
# 70-siw.sh - the pure-Go iWARP provider against another iWARP stack, the
# Linux kernel's soft-iWARP (siw.ko, built out of tree for the guest kernel
# by e2e/vm/build-guest.sh from Debian's linux-source and linux-headers),
# with the kernel's NFS client and server as the peers (issue #17).
#
# Wire: siw0 sits on veth0 ($SIW_IP) in the guest's namespace; the gateway
# runs in netns $SIW_NS on the other end of the veth pair ($SIW_PEER_IP), so
# every iWARP byte crosses a real netdev, where tcpdump sees it.
#
#   forward   the kernel NFS client over siw (proto=rdma) -> rdmagw forward,
#             listen.provider iwarp, on $SIW_PEER_IP:20049 -> knfsd over TCP
#             at $SIW_IP:2049: the data suite (E2E_SIW_DATA_MIB, default 8)
#             for each of E2E_SIW_VERSIONS (default "4.1 4.2"); the
#             gateway's Read/Write-chunk byte counters must have moved.
#   reverse   the kernel NFS client over TCP -> rdmagw reverse on
#             $SIW_PEER_IP:2050 (backend.provider iwarp) -> knfsd over
#             RPC-over-RDMA on siw0 (svcrdma, $SIW_IP:20049): the data suite,
#             NFSv4.1.
#   pcap      while the forward mount is up, a small file written and read
#             back through the gateway with tcpdump on veth0 (port 20049,
#             whole frames); tshark's iwarp_mpa/iwarp_ddp_rdmap dissectors
#             must decode FPDUs from both sides (siw and the gateway), the
#             MPA Request and Reply, and find no bad CRC and no malformed
#             frame.
#   terminate siw logged no Terminate from the gateway (dmesg "got TERMINATE").
# Without a gateway binary that has a "serve" subcommand: RESULT siw SKIP.
# e2e-timeout: 900
. "$E2E_VM/lib.sh"
VERSIONS=${E2E_SIW_VERSIONS:-4.1 4.2}
# the data suite's checks left out: 2,000 creates take over 4 minutes on
# siw under TCG (dir2000 passed for 4.1: E2E_SIW_SKIP="" runs it); fio
# runs on the first forward mount only (E2E_SIW_SKIP2)
SKIP1=${E2E_SIW_SKIP-dir2000}
SKIP2=${E2E_SIW_SKIP2-fio dir2000}
DATA_MIB=${E2E_SIW_DATA_MIB:-8}
FIO_MIB=${E2E_SIW_FIO_MIB:-4}
# Opt-in (E2E_SIW=1): about 7 minutes under TCG (two segments per FPDU,
# every CRC in software) would take `make e2e` past CI's 45-minute budget,
# and the interop and reverse parts are not proven yet (issue #17).
if [ "${E2E_SIW:-0}" != 1 ]; then
    result siw SKIP 0 "opt-in: E2E_SIW=1 e2e/run.sh 70-siw"
    exit 0
fi
if ! gw_binary > /dev/null; then
    result siw SKIP 0 "gateway not built (${E2E_GW_BIN:-$E2E_REPO/bin/rdmagw-ibverbs} missing or has no serve)"
    exit 0
fi
tstep setup_siw setup_siw || lab_fail "setup_siw (siw.ko: see e2e/vm/build-guest.sh)"
tstep setup_knfsd setup_knfsd rdma || lab_fail "setup_knfsd"
echo "rdma links: $(rdma link | tr '\n' ' ')"
GW_PROVIDER=iwarp GW_NETNS=$SIW_NS GW_METRICS=$SIW_PEER_IP:9464
GW_LISTEN_IP=$SIW_PEER_IP GW_RV_ADDR=$SIW_PEER_IP GW_LOCAL_IP=$SIW_PEER_IP GW_BACKEND_IP=$SIW_IP
make_src

# ---- interop: the verbs conformance suite, one end on each stack ----------
# bin/iwarp-siw.test (run.sh builds it: go test -c -tags ibverbs ./verbs/iwarp)
# runs TestSiwInterop: the pure-Go provider against siw through the ibverbs
# provider (libsiw), both ways round, MPA CRC on and off.
SIW_TEST=${E2E_SIW_TEST:-$E2E_REPO/bin/iwarp-siw.test}
chk_interop() {
    ulimit -l unlimited
    RDMAGW_VERBS_ADDR=$SIW_IP RDMAGW_VERBS_CONNS=4 timeout 300 "$SIW_TEST" -test.v \
        -test.run "${E2E_SIW_INTEROP_RUN:-TestSiwInterop}" -test.timeout 290s > "$OUT/interop.log" 2>&1
    local rc=$?
    grep -E -- '--- (PASS|FAIL|SKIP)' "$OUT/interop.log" | sed 's/ (.*//' | sort | uniq -c | sort -rn | head -60
    return $rc
}
if [ "${E2E_SIW_INTEROP:-0}" != 1 ]; then result siw_interop SKIP 0 "E2E_SIW_INTEROP=1 runs it"
elif [ -x "$SIW_TEST" ]; then check siw_interop chk_interop
else result siw_interop SKIP 0 "$SIW_TEST not built"; fi

# ---- forward: kernel client over siw -> pure-Go provider -> knfsd/TCP ------
if check siw_fw_start start_gateway; then
    gw_scrape .start
    first=1
    for v in $VERSIONS; do
        opts="vers=$v,proto=rdma,port=20049,${E2E_FW_OPTS:-soft,timeo=150,retrans=2}"
        if [ $first = 1 ] && ! command -v tcpdump > /dev/null; then
            first=0; result siw_tshark SKIP 0 "tcpdump not installed"
        fi
        if [ $first = 1 ]; then
            first=0
            # ---- pcap: a short exchange, whole frames, decoded by tshark
            mkdir -p /mnt/siwcap
            tcpdump -i veth0 -s 0 -U -w "$OUT/siw.pcap" tcp port 20049 > "$OUT/tcpdump.log" 2>&1 &
            TD=$!
            sleep 2
            chk_cap() {
                timeout 60 mount -t nfs -o "$opts" "$SIW_PEER_IP:/" /mnt/siwcap || return 1
                head -c 300000 /tmp/src.dat > /mnt/siwcap/cap.bin && sync && drop_caches &&
                    cmp <(head -c 300000 /tmp/src.dat) /mnt/siwcap/cap.bin
                local rc=$?
                rm -f /mnt/siwcap/cap.bin
                timeout 60 umount /mnt/siwcap
                return $rc
            }
            check siw_cap_io chk_cap
            sleep 2; kill -INT $TD; wait $TD
            chk_tshark() {   # (RPC-over-RDMA's dissector off: iWARP is judged here)
                local t=$OUT/tshark.txt fp good badcrc bad
                tshark -r "$OUT/siw.pcap" --disable-protocol rpcordma -V > "$t" 2> "$OUT/tshark.err" ||
                    { cat "$OUT/tshark.err"; return 1; }
                fp=$(tshark -r "$OUT/siw.pcap" --disable-protocol rpcordma -Y iwarp_ddp -T fields -e ip.src 2> /dev/null | sort | uniq -c)
                echo "  frames with DDP segments per sender:"; echo "$fp" | sed 's/^/    /'
                good=$(grep -c '(Good CRC32)' "$t"); badcrc=$(grep -c 'Bad CRC32' "$t")
                bad=$(grep -c 'Expert Info (Error\|Malformed Packet' "$t")
                echo "  $good FPDUs with a good CRC, $badcrc bad, $bad errors"
                grep -q 'Request frame header' "$t" && grep -q 'Reply frame header' "$t" ||
                    { echo "  no MPA Request/Reply decoded"; return 1; }
                [ "$(echo "$fp" | awk 'NF==2' | wc -l)" = 2 ] && [ "$good" -gt 0 ] && [ "$badcrc" = 0 ] && [ "$bad" = 0 ]
            }
            if command -v tshark > /dev/null; then check siw_tshark chk_tshark
            else result siw_tshark SKIP 0 "tshark not installed"; fi
        fi
        NFS_SUITE_SKIP=$SKIP2
        [ "$v" = "${VERSIONS%% *}" ] && NFS_SUITE_SKIP=$SKIP1
        nfs_suite "siw_fw_v${v/./}" "$SIW_PEER_IP:/" "$opts"
    done
    chk_fw_metrics() {
        gw_scrape || return 1
        local rd wr
        rd=$(( $(gw_metric read_chunk in) - $(gw_metric read_chunk in "$OUT/metrics.start.txt") ))
        wr=$(( $(gw_metric write_chunk out) - $(gw_metric write_chunk out "$OUT/metrics.start.txt") ))
        echo "  read_chunk (RDMA Read from the siw client) $rd bytes, wrote $NFS_BYTES_WRITTEN"
        echo "  write_chunk (RDMA Write to the siw client) $wr bytes, read $NFS_BYTES_READ"
        [ "$rd" -ge $((NFS_BYTES_WRITTEN / 2)) ] && [ "$wr" -ge $((NFS_BYTES_READ / 2)) ]
    }
    check siw_fw_metrics chk_fw_metrics
    kill "$GW_PID"; wait "$GW_PID" 2> /dev/null
    cp "$OUT/gateway.log" "$OUT/gateway-forward.log"
fi

# ---- reverse: kernel client over TCP -> pure-Go provider -> knfsd on siw ---
if [ "${E2E_SIW_REVERSE:-0}" != 1 ]; then result siw_reverse SKIP 0 "E2E_SIW_REVERSE=1 runs it"
elif check siw_rv_start start_gateway_reverse; then
    for v in ${E2E_SIW_RV_VERSIONS:-4.1}; do
        NFS_SUITE_SKIP=$SKIP2 nfs_suite "siw_rv_v${v/./}" "$SIW_PEER_IP:/" "vers=$v,proto=tcp,port=2050,soft,timeo=150,retrans=2"
    done
    kill "$GW_PID"; wait "$GW_PID" 2> /dev/null
fi

chk_no_terminate() {
    local n; n=$(dmesg | grep -c 'siw: got TERMINATE')
    echo "  siw received $n Terminates"
    dmesg | grep 'siw: got TERMINATE' | sort | uniq -c | head -5
    [ "$n" = 0 ]
}
check siw_no_terminate chk_no_terminate
stop_bg
[ $FAILS = 0 ]
