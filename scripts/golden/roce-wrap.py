#!/usr/bin/env python3
"""roce-wrap.py - wrap RPC-over-RDMA messages (the payload of one RDMA Send
each) into a pcap of RoCEv2 packets (Ethernet/IPv4/UDP 4791/BTH SEND_ONLY/
payload/ICRC=0) so that tshark's infiniband + rpcrdma dissectors can decode
them. Only for checking field values; the ICRC is not computed.

    scripts/golden/roce-wrap.py OUT.pcap MSG.bin [MSG.bin...]
    tshark -r OUT.pcap -V      # RPC-over-RDMA + RPC + NFS decode
"""
import struct
import sys


def csum(b):
    if len(b) % 2:
        b += b'\0'
    s = sum(struct.unpack('>%dH' % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def packet(payload, psn):
    bth = struct.pack('>BBHII', 0x04, 0x40, 0xffff, 0x000011, psn & 0xffffff)  # RC SEND_ONLY, M=1; dest QP 0x11
    udp_pl = bth + payload + b'\0\0\0\0'
    udp = struct.pack('>HHHH', 49152, 4791, 8 + len(udp_pl), 0) + udp_pl
    ip = struct.pack('>BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), 1, 0x4000, 64, 17, 0,
                     bytes([10, 99, 0, 1]), bytes([10, 99, 0, 1]))
    ip = ip[:10] + struct.pack('>H', csum(ip)) + ip[12:]
    eth = b'\x02\0\0\0\0\x01' + b'\x02\0\0\0\0\x02' + b'\x08\x00'
    return eth + ip + udp


def main():
    out = sys.argv[1]
    with open(out, 'wb') as f:
        f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for i, p in enumerate(sys.argv[2:]):
            pkt = packet(open(p, 'rb').read(), i)
            f.write(struct.pack('<IIII', 1000000000 + i, 0, len(pkt), len(pkt)) + pkt)


if __name__ == '__main__':
    main()
