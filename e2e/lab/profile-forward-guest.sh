#!/bin/bash
# profile-forward-guest.sh - the guest side of profile-forward.sh.
. "$E2E_VM/lib.sh"
setup_rxe dummy || lab_fail "setup_rxe"
setup_knfsd || lab_fail "setup_knfsd"
GW_EXTRA_CONF=""
start_gateway || exit 1
# the same config with the profiler on (start_gateway's has it off)
kill "$GW_PID"; wait "$GW_PID" 2>/dev/null
sed -i 's|^  listen: \(.*:9464\)$|  listen: \1\n  pprof: true|' "$GW_CONF"
gw_launch || exit 1
mkdir -p /mnt/gw
mount -t nfs -o vers=4.1,proto=rdma,port=20049 "$RXE_IP:/" /mnt/gw || exit 1
fio --name=prep --filename=/mnt/gw/f --size=64M --rw=write --bs=1M --direct=1 --ioengine=psync > /dev/null || exit 1
fio --name=load --filename=/mnt/gw/f --size=64M --rw="$FIO_RW" --bs="$FIO_BS" --direct=1 \
    --ioengine=libaio --iodepth="$FIO_DEPTH" --time_based --runtime="$FIO_SECS" --group_reporting > "$OUT/fio.txt" 2>&1 &
fio_pid=$!
sleep 3
curl -sf "http://$GW_METRICS/debug/pprof/profile?seconds=$PROFILE_SECS" > "$OUT/cpu.pprof" || echo "profile fetch failed"
wait "$fio_pid"
umount /mnt/gw
stop_bg
