#!/usr/bin/env python3
"""kclient-sidecar.py - sidecars for the kernel-client RDMA golden files.

    scripts/golden/kclient-sidecar.py msg MSG.bin [kdump.txt]  > MSG.txt
    scripts/golden/kclient-sidecar.py privdata PRIV.bin [kdump.txt] > PRIV.txt

msg: the message is wrapped into a RoCEv2 packet (roce-wrap.py) and decoded by
tshark (infiniband -> rpcordma -> rpc -> nfs); field values and positions come
from tshark's PDML; offsets are byte offsets into MSG.bin.
privdata: RFC 8797 struct rpcrdma_connect_private, decoded here (tshark has no
dissector for RDMA-CM private data carried outside a CM MAD).
"""
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import extract  # noqa: E402
from importlib.machinery import SourceFileLoader  # noqa: E402

roce = SourceFileLoader('roce', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'roce-wrap.py')).load_module()

PAYLOAD_START = 14 + 20 + 8 + 12   # eth + ipv4 + udp + BTH
FIELDS = """rpcordma.xid rpcordma.version rpcordma.flow_control rpcordma.msg_type rpcordma.reads_count
rpcordma.writes_count rpcordma.reply_count rpcordma.segment_count rpcordma.rdma_handle rpcordma.rdma_length
rpcordma.rdma_offset rpcordma.position
rpc.xid rpc.msgtyp rpc.version rpc.program rpc.programversion rpc.procedure rpc.auth.flavor
rpc.auth.machinename nfs.minorversion nfs.ops.count nfs.main_opcode nfs.exchange_id.call_flags
nfs.exchange_id.state_protect""".split()


def kdump_kv(path, binpath):
    """kdump.txt of the same guest run, plus uname.txt and mount.txt beside it."""
    d = {}
    if path and os.path.exists(path):
        for line in open(path):
            if '=' in line:
                k, v = line.rstrip('\n').split('=', 1)
                d[k] = v
        dr = os.path.dirname(path)
        for k, fn in (('_kernel', 'uname.txt'), ('_mount', 'mount.txt')):
            if os.path.exists(os.path.join(dr, fn)):
                d[k] = open(os.path.join(dr, fn)).read().strip()
    b = os.path.basename(binpath)
    if b.startswith('msg') and b.endswith('.bin'):
        d['_msgno'] = b[3:-4]
    return d


def msg(path, kdump):
    raw = open(path, 'rb').read()
    with tempfile.TemporaryDirectory() as td:
        pc = os.path.join(td, 'm.pcap')
        with open(pc, 'wb') as f:
            f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
            pkt = roce.packet(raw, 0)
            f.write(struct.pack('<IIII', 1000000000, 0, len(pkt), len(pkt)) + pkt)
        x = subprocess.run(['tshark', '-r', pc, '-T', 'pdml'], check=True,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
    import xml.etree.ElementTree as ET
    fields = []
    for proto in ET.fromstring(x).iter('proto'):
        if proto.get('name') in ('rpcordma', 'rpc', 'nfs'):
            extract._flatten(proto, fields, ())
    out = [('file', os.path.basename(path)), ('bin_len', len(raw)),
           ('bin_is', 'one RDMA Send payload as received (wc.byte_len bytes): RPC-over-RDMA header + RPC message, no record marking')]
    n = kdump.get('_msgno')
    if n:
        for k in ('byte_len', 'wc_opcode', 'wc_flags', 'answered'):
            if 'msg%s_%s' % (n, k) in kdump:
                out.append(('kdump.' + k, kdump['msg%s_%s' % (n, k)]))
    for name in FIELDS:
        v = [f['show'] for f in extract._all(fields, name)]
        if name.startswith('rpc.') and name not in ('rpc.auth.flavor',):
            v = v[:1]
        if v:
            out.append((name, ','.join(v)))
    ops = extract._all(fields, 'nfs.opcode')
    if ops:
        out.append(('v4.ops', ','.join(o['show'] for o in ops)))
    # offsets
    rx = extract._all(fields, 'rpc.xid')[0]
    rpc_off = rx['pos'] - PAYLOAD_START
    assert raw[rpc_off:rpc_off + 4] == raw[0:4]      # RPC xid == RPC-over-RDMA xid
    out += [('rpcrdma_header_len', rpc_off), ('rpc_msg_offset', rpc_off), ('rpc_msg_len', len(raw) - rpc_off)]
    for f in extract._all(fields, 'rpcordma.rdma_handle'):
        out.append(('rpcordma.rdma_handle.offset', f['pos'] - PAYLOAD_START))
    # plain decode of the v1 header discriminators (RFC 8166 section 4.2)
    w = lambda o: struct.unpack('>I', raw[o:o + 4])[0]   # noqa: E731
    out.append(('v1.read_list_first_discriminator', w(16)))
    out.append(('v1.write_list_first_discriminator', w(20)))
    out.append(('v1.reply_chunk_discriminator', w(24)))
    ver = subprocess.run(['tshark', '-v'], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode().split()[2]
    out.append(('decoded_by', 'tshark %s (RoCEv2 wrap by scripts/golden/roce-wrap.py; ICRC not computed)' % ver))
    return out + env(kdump)


def env(kdump):
    out = []
    for k in ('kernel', 'mount'):
        if '_' + k in kdump:
            out.append((k, kdump['_' + k]))
    return out


def privdata(path, kdump):
    raw = open(path, 'rb').read()
    magic, ver, flags, snd, rcv = struct.unpack('>IBBBB', raw[:8])
    out = [('file', os.path.basename(path)), ('bin_len', len(raw)),
           ('bin_is', 'RDMA_CM_EVENT_CONNECT_REQUEST param.conn.private_data exactly as librdmacm delivered it '
            '(private_data_len bytes); the RFC 8797 block is the first 8 bytes, the rest is zero padding'),
           ('magic', '0x%08x' % magic), ('version', ver), ('flags', '0x%02x' % flags),
           ('flag_send_with_invalidate_ok', flags & 1),
           ('max_send_size_encoded', snd), ('max_send_size', (snd + 1) * 1024),
           ('max_recv_size_encoded', rcv), ('max_recv_size', (rcv + 1) * 1024),
           ('padding_all_zero', int(raw[8:] == b'\0' * (len(raw) - 8)))]
    for k in ('connect_private_data_len', 'connect_responder_resources', 'connect_initiator_depth',
              'connect_flow_control', 'connect_retry_count', 'connect_rnr_retry_count', 'connect_srq'):
        if k in kdump:
            out.append((k, kdump[k]))
    return out + env(kdump)


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ('msg', 'privdata'):
        print(__doc__)
        sys.exit(2)
    kd = kdump_kv(sys.argv[3] if len(sys.argv) > 3 else None, sys.argv[2])
    for k, v in (msg if sys.argv[1] == 'msg' else privdata)(sys.argv[2], kd):
        print('%s=%s' % (k, v))


if __name__ == '__main__':
    main()
