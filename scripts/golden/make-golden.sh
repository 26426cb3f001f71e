#!/bin/bash
# make-golden.sh - (re)build testdata/golden/ from captures.
#
#   scripts/golden/make-golden.sh CAPDIR [KDUMPDIR]
#
# CAPDIR:   output of scripts/golden/capture-tcp.sh (nfs3.pcap, nfs40.pcap,
#           nfs41-proxy.pcap)
# KDUMPDIR: the -o directory of the rdmavm guest run of
#           e2e/golden/kclient-first-msg.sh (privdata.bin, msg1.bin, msg2.bin,
#           kdump.txt, uname.txt, mount.txt)
# Writes testdata/golden/*.bin + *.txt and testdata/golden/pcap/*.pcap.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
G=$ROOT/testdata/golden
CAP=${1:?usage: make-golden.sh CAPDIR [KDUMPDIR]}
KD=${2:-}
mkdir -p "$G/pcap"
for p in nfs3 nfs40 nfs41-proxy; do cp "$CAP/$p.pcap" "$G/pcap/$p.pcap"; done
python3 "$HERE/extract.py" extract "$G/pcap" "$G"
if [ -n "$KD" ]; then
    cp "$KD/privdata.bin" "$G/kclient-connect-privdata.bin"
    cp "$KD/msg1.bin" "$G/kclient-first-msg.bin"
    cp "$KD/msg2.bin" "$G/kclient-exchange-id-msg.bin"
    python3 "$HERE/kclient-sidecar.py" privdata "$KD/privdata.bin" "$KD/kdump.txt" > "$G/kclient-connect-privdata.txt"
    python3 "$HERE/kclient-sidecar.py" msg "$KD/msg1.bin" "$KD/kdump.txt" | sed 's/^file=msg1.bin/file=kclient-first-msg.bin/' > "$G/kclient-first-msg.txt"
    python3 "$HERE/kclient-sidecar.py" msg "$KD/msg2.bin" "$KD/kdump.txt" | sed 's/^file=msg2.bin/file=kclient-exchange-id-msg.bin/' > "$G/kclient-exchange-id-msg.txt"
    python3 "$HERE/roce-wrap.py" "$G/pcap/kclient-roce-wrapped.pcap" "$G/kclient-first-msg.bin" "$G/kclient-exchange-id-msg.bin"
fi
(cd "$G" && sha256sum *.bin pcap/*.pcap > SHA256SUMS)
ls "$G" | wc -l
