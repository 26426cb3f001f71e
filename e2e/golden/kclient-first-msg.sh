#!/bin/bash
# kclient-first-msg.sh [KDUMP] - GUEST side (rdmavm QEMU lab): the Linux
# NFS/RDMA client (xprtrdma) connects to kdump (e2e/golden/kdump.c), a
# user-space rdma_cm listener on soft-RoCE rxe0, which saves the CM connect
# private data and the first RPC-over-RDMA message into $OUT (/rdmavm-out).
# kdump never replies, so the mount fails: expected.
#
# Host side:
#   scripts/install-deps.sh --lab
#   cp -r /work/shared/rdmavm /tmp/rdmavm && /tmp/rdmavm/build-initramfs.sh
#   gcc -O2 -Wall -o /tmp/kdump e2e/golden/kdump.c -libverbs -lrdmacm
#   /tmp/rdmavm/run-guest.sh -o /tmp/kdump-out -- $PWD/e2e/golden/kclient-first-msg.sh /tmp/kdump
# then: /tmp/kdump-out/{privdata.bin,msg1.bin,kdump.txt,kdump.log,uname.txt}
. "$RDMAVM/tests/lib.sh"
BIN=${1:-/tmp/kdump}; PORT=20050
MOUNTOPTS="vers=4.1,proto=rdma,port=$PORT,soft,timeo=30,retrans=1,retry=0"
uname -a > "$OUT/uname.txt"
tstep setup_rxe setup_rxe dummy || exit 1
modprobe rpcrdma && modprobe nfsv4
bg kdump timeout 60 "$BIN" "$RXE_IP" "$PORT" "$OUT" 50
sleep 1
mkdir -p /mnt/kdump
echo "mount -t nfs -o $MOUNTOPTS $RXE_IP:/ /mnt/kdump" | tee "$OUT/mount.txt"
timeout -s KILL 20 mount -t nfs -o "$MOUNTOPTS" "$RXE_IP:/" /mnt/kdump > /dev/null 2>&1
echo "mount rc=$? (failure expected)"
wait "${BG_PIDS[@]}"; src=$?; BG_PIDS=()
cat "$OUT/kdump.log" "$OUT/kdump.txt"
if [ $src = 0 ]; then result kclient_first_msg PASS
else result kclient_first_msg FAIL; exit 1; fi
