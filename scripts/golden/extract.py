#!/usr/bin/env python3
"""extract.py - cut whole ONC RPC records out of loopback pcaps (TCP, record
marking) and write them as golden test vectors with tshark-derived sidecars.

    scripts/golden/extract.py list    PCAP [PORT...]     # one line per record
    scripts/golden/extract.py extract CAPDIR OUTDIR      # the SELECT table below

PORTs (default 12049 12050) are decoded as RPC by tshark (-d tcp.port==P,rpc).

Each written NAME.bin is exactly one whole RPC record as it was on the wire,
INCLUDING its 4-byte record-marking fragment header(s) (RFC 5531 section 11).
NAME.txt holds key=value lines:
  * tshark field values of that RPC (PDML of the frame that completes the
    record; several occurrences of one field are joined with ','), keyed by
    the tshark field name (rpc.xid, nfs.count3, nfs.opcode, ...)
  * derived values: record.*, v4.*, data.* (offsets are byte offsets into the
    .bin file, i.e. counted from the first fragment header byte), computed from
    tshark's field positions and checked against the bytes of the .bin.
Only the Python standard library and tshark are needed.
"""
import os
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET

# ----------------------------------------------------------------- pcap/TCP --


def read_pcap(path):
    """Yield (frame_number, linktype, packet_bytes) from a classic pcap file."""
    with open(path, 'rb') as f:
        data = f.read()
    magic = data[:4]
    if magic in (b'\xd4\xc3\xb2\xa1', b'\x4d\x3c\xb2\xa1'):
        e = '<'
    elif magic in (b'\xa1\xb2\xc3\xd4', b'\xa1\xb2\x3c\x4d'):
        e = '>'
    else:
        raise SystemExit('%s: not a classic pcap file (use tcpdump -w)' % path)
    linktype = struct.unpack(e + 'I', data[20:24])[0]
    off, n = 24, 0
    while off + 16 <= len(data):
        _, _, incl, orig = struct.unpack(e + 'IIII', data[off:off + 16])
        off += 16
        n += 1
        if incl != orig:
            raise SystemExit('%s: frame %d truncated by snaplen' % (path, n))
        yield n, linktype, data[off:off + incl]
        off += incl


def tcp_segments(path):
    """Yield (frame, flow, seq, flags, payload) for the TCP segments."""
    for n, lt, pkt in read_pcap(path):
        if lt == 1:           # Ethernet
            et, p = struct.unpack('>H', pkt[12:14])[0], 14
        elif lt == 113:       # Linux cooked v1
            et, p = struct.unpack('>H', pkt[14:16])[0], 16
        elif lt == 276:       # Linux cooked v2
            et, p = struct.unpack('>H', pkt[0:2])[0], 20
        else:
            raise SystemExit('unsupported linktype %d' % lt)
        if et == 0x0800:
            ihl = (pkt[p] & 15) * 4
            if pkt[p + 9] != 6:
                continue
            tot = struct.unpack('>H', pkt[p + 2:p + 4])[0]
            src, dst = pkt[p + 12:p + 16], pkt[p + 16:p + 20]
            t, end = p + ihl, p + tot
        elif et == 0x86dd:
            if pkt[p + 6] != 6:
                continue          # no extension headers on loopback
            plen = struct.unpack('>H', pkt[p + 4:p + 6])[0]
            src, dst = pkt[p + 8:p + 24], pkt[p + 24:p + 40]
            t, end = p + 40, p + 40 + plen
        else:
            continue
        sport, dport, seq = struct.unpack('>HHI', pkt[t:t + 8])
        doff = (pkt[t + 12] >> 4) * 4
        flags = pkt[t + 13]
        yield n, (src, sport, dst, dport), seq, flags, pkt[t + doff:end]


class Stream:
    def __init__(self):
        self.next = None      # next expected sequence number
        self.buf = bytearray()
        self.seg = []         # (stream offset of first byte, frame)


def reassemble(path):
    """Return {flow: Stream} with the in-order byte stream of each direction."""
    streams = {}
    for n, flow, seq, flags, pl in tcp_segments(path):
        s = streams.setdefault(flow, Stream())
        if flags & 0x02:      # SYN
            s.next = (seq + 1) & 0xffffffff
            continue
        if not pl:
            continue
        if s.next is None:
            s.next = seq
        d = (seq - s.next) & 0xffffffff
        if d >= 0x80000000:   # retransmission / overlap: keep only new bytes
            skip = (s.next - seq) & 0xffffffff
            if skip >= len(pl):
                continue
            pl, seq = pl[skip:], s.next
        elif d:
            raise SystemExit('%s frame %d: gap of %d bytes in a TCP stream' % (path, n, d))
        s.seg.append((len(s.buf), n))
        s.buf += pl
        s.next = (seq + len(pl)) & 0xffffffff
    return streams


def frame_of(stream, off):
    """Frame that carried stream byte `off`."""
    fr = None
    for start, n in stream.seg:
        if start > off:
            break
        fr = n
    return fr


def records(path):
    """Yield dicts describing every complete RPC record of every stream."""
    out = []
    for flow, s in reassemble(path).items():
        off, b = 0, bytes(s.buf)
        while off + 4 <= len(b):
            start, frags, body = off, [], bytearray()
            while True:
                if off + 4 > len(b):
                    frags = None
                    break
                h = struct.unpack('>I', b[off:off + 4])[0]
                ln = h & 0x7fffffff
                if off + 4 + ln > len(b):
                    frags = None
                    break
                frags.append(ln)
                body += b[off + 4:off + 4 + ln]
                off += 4 + ln
                if h & 0x80000000:
                    break
            if frags is None:
                break         # incomplete tail (connection cut)
            if len(body) < 8:
                continue
            xid, mt = struct.unpack('>II', body[:8])
            out.append(dict(flow=flow, start=start, raw=b[start:off], frags=frags,
                            xid=xid, msgtyp=mt, first_frame=frame_of(s, start),
                            frame=frame_of(s, off - 1)))
    out.sort(key=lambda r: (r['frame'], r['first_frame'], r['start']))
    return out

# -------------------------------------------------------------------- tshark --


def pdml(path, ports):
    cmd = ['tshark', '-r', path, '-T', 'pdml']
    for p in ports:
        cmd += ['-d', 'tcp.port==%d,rpc' % p]
    x = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
    groups = {}   # (frame, xid, msgtyp) -> list of (name, show, pos, size, value, depth_path)
    for pkt in ET.fromstring(x).iter('packet'):
        num, cur = None, None
        for proto in pkt.findall('proto'):
            if proto.get('name') == 'geninfo':
                for f in proto.iter('field'):
                    if f.get('name') == 'num':
                        num = int(f.get('show'))
            if proto.get('name') == 'rpc':
                cur = []
                _flatten(proto, cur, ())
                xid = int(_first(cur, 'rpc.xid'), 16)
                mt = int(_first(cur, 'rpc.msgtyp'))
                groups[(num, xid, mt)] = cur
            elif cur is not None and proto.get('name') not in ('tcp', 'ip', 'eth', 'frame', 'geninfo'):
                _flatten(proto, cur, ())
    return groups


def _flatten(el, out, parents):
    for f in el.findall('field'):
        name = f.get('name')
        out.append(dict(name=name, show=f.get('show'), pos=int(f.get('pos') or 0),
                        size=int(f.get('size') or 0), value=f.get('value'), parents=parents))
        _flatten(f, out, parents + (name,))


def _first(fields, name):
    for f in fields:
        if f['name'] == name:
            return f['show']
    return None


def _all(fields, name):
    return [f for f in fields if f['name'] == name]


SCALARS = """
rpc.xid rpc.msgtyp rpc.version rpc.program rpc.programversion rpc.procedure rpc.replystat
rpc.state_accept rpc.repframe rpc.lastfrag rpc.fraglen rpc.auth.flavor rpc.auth.machinename
mount.procedure_v3 mount.status mount.path mount.flavors
nfs.procedure_v3 nfs.procedure_v4 nfs.status3 nfs.fh.length nfs.fh.hash nfs.name
nfs.offset3 nfs.count3 nfs.write.stable nfs.write.committed nfs.read.eof
nfs.cookie3 nfs.count3_dircount nfs.count3_maxcount nfs.readdir.eof nfs.readdirplus.entry.name
nfs.tag nfs.minorversion nfs.ops.count nfs.main_opcode nfs.offset4 nfs.count4 nfs.stable_how4
nfs.eof nfs.read.data_length nfs.write.data_length nfs.session_id4 nfs.seqid nfs.slotid
nfs.high_slotid nfs.target_high_slotid nfs.cachethis4 nfs.clientid nfs.exchange_id.call_flags
nfs.exchange_id.reply_flags nfs.exchange_id.state_protect nfs.create_session_flags
nfs.maxreqsize4 nfs.maxrespsize4 nfs.maxrespsizecached4 nfs.maxops4 nfs.maxreqs4 nfs.padsize4
nfs.nfs_ftype4 nfs.cookie4 nfs.dircount nfs.maxcount nfs.dirlist4.eof nfs.entry_name
nfs.stateid.seqid nfs.stateid.other nfs.pathname.component nfs.majorid4 nfs.scope
nfs.reclaim_one_fs4 nfs.protocol_violation
""".split()
FIRST_ONLY = {'rpc.xid', 'rpc.msgtyp', 'rpc.version', 'rpc.program', 'rpc.programversion', 'rpc.procedure'}
# opaque items whose payload offset is reported (the DDP-eligible ones and link names)
DATA = ['nfs.data', 'nfs.readlink.data', 'nfs.symlink.to', 'nfs.symlink.linktext']

HELLO = b'Hello, RDMA!\n'


CALL_KEYS = ['nfs.offset3', 'nfs.count3', 'nfs.offset4', 'nfs.count4', 'nfs.write.stable', 'v4.ops']


def describe(rec, fields, call=None):
    """Sidecar lines (list of (key, value)) for one record + its tshark fields.
    call: the describe() dict of the matching call, for a reply."""
    raw = rec['raw']
    kv = []
    fh = _all(fields, 'rpc.lastfrag')
    base = fh[0]['pos']
    kv += [('record.len', len(raw)), ('record.includes_fraghdr', 1),
           ('record.fragments', len(rec['frags'])),
           ('record.frag_lens', ','.join(map(str, rec['frags']))),
           ('record.tcp_ports', '%d->%d' % (rec['flow'][1], rec['flow'][3])),
           ('record.first_frame', rec['first_frame']), ('record.frame', rec['frame'])]
    # check: tshark's first fragment header == our first 4 bytes
    assert bytes.fromhex(fh[0]['value'].rjust(8, '0')) == raw[:4] or \
        struct.unpack('>I', raw[:4])[0] & 0x7fffffff == int(_first(fields, 'rpc.fraglen'))
    for name in SCALARS:
        vals = [f['show'] for f in _all(fields, name)]
        if name in FIRST_ONLY:
            vals = vals[:1]       # tshark repeats these in the NFS/MOUNT tree
        if vals:
            kv.append((name, ','.join(vals)))
    ops = _all(fields, 'nfs.opcode')
    if ops:
        kv.append(('v4.ops', ','.join(o['show'] for o in ops)))
        if rec['msgtyp'] == 1:
            st = [f for f in _all(fields, 'nfs.nfsstat4') if not f['parents']]
            if st:
                kv.append(('v4.status', st[0]['show']))
            per = []
            for o in ops:
                s = [f['show'] for f in fields if f['name'] == 'nfs.nfsstat4'
                     and f['parents'] and f['parents'][-1] == 'nfs.opcode' and f['pos'] == o['pos'] + 4]
                per.append(s[0] if s else '?')
            kv.append(('v4.op_status', ','.join(per)))
    if call:
        kv.append(('call.frame', call['record.frame']))
        for k in CALL_KEYS:
            if k in call:
                kv.append(('call.' + k, call[k]))
    nd = 0
    proc = _first(fields, 'rpc.procedure')
    for name in DATA:
        for f in _all(fields, name):
            if name == 'nfs.data':
                # only READ/WRITE payloads (tshark also calls other opaques nfs.data)
                prev = [o for o in ops if o['pos'] < f['pos']]
                if ops and (not prev or prev[-1]['show'] not in ('25', '38')):
                    continue
                if not ops and proc not in ('6', '7'):
                    continue
            off = f['pos'] - base
            got = raw[off:off + f['size']]
            if f['value'] is not None:
                assert got == bytes.fromhex(f['value']), (rec, name)
            # the XDR length word just before the bytes
            assert struct.unpack('>I', raw[off - 4:off])[0] == f['size'], (name, off)
            pad = (4 - f['size'] % 4) % 4
            assert raw[off + f['size']:off + f['size'] + pad] == b'\0' * pad
            kv += [('data.item', name), ('data.offset', off), ('data.len', f['size']),
                   ('data.len_word_offset', off - 4), ('data.pad', pad),
                   ('data.end', off + f['size'] + pad),
                   ('data.verified', 'bytes at data.offset equal tshark field %s' % name)]
            if name == 'nfs.data':
                fo = _first(fields, 'nfs.offset3') or _first(fields, 'nfs.offset4')
                if fo is None and call:
                    fo = call.get('call.nfs.offset3', call.get('nfs.offset3', call.get('nfs.offset4')))
                if got == HELLO[int(fo or 0):int(fo or 0) + len(got)] and len(got) <= 13:
                    kv.append(('data.pattern', 'hello13 ("Hello, RDMA!\\n" from file offset %s)' % fo))
                elif fo is not None and all(b == (int(fo) + i) % 251 for i, b in enumerate(got)):
                    kv.append(('data.pattern', 'mod251 (byte = (file_offset + i) %% 251, file_offset %s)' % fo))
                else:
                    kv.append(('data.pattern', 'unknown'))
            else:
                kv.append(('data.text', got.decode('ascii', 'replace')))
            nd += 1
    if nd > 1:
        kv.append(('data.note', 'several data.* groups: one per opaque item, in wire order'))
    return kv


def summary(rec, fields):
    d = dict(describe(rec, fields))
    s = '%5d %s xid=%08x %-5s prog=%s v=%s proc=%s' % (
        rec['frame'], d['record.tcp_ports'], rec['xid'], 'CALL' if rec['msgtyp'] == 0 else 'REPLY',
        d.get('rpc.program'), d.get('rpc.programversion'), d.get('rpc.procedure'))
    for k in ('v4.ops', 'nfs.count3', 'nfs.count4', 'data.len', 'v4.status', 'nfs.status3'):
        if k in d:
            s += ' %s=%s' % (k, d[k])
    return s + ' len=%d' % len(rec['raw'])

# ------------------------------------------------------------------ selection --


# (pcap, name, kind, {tshark field or derived key: exact value}, nth match (0-based))
# kind 'call': the call matching; 'reply': the reply to the call matching.
W3 = {'rpc.program': '100003', 'rpc.programversion': '3'}
V4 = {'rpc.program': '100003', 'rpc.programversion': '4'}
SELECT = [
    ('nfs3.pcap', 'mount3-mnt-call', 'call', {'rpc.program': '100005', 'rpc.procedure': '1'}, 0),
    ('nfs3.pcap', 'mount3-mnt-reply', 'reply', {'rpc.program': '100005', 'rpc.procedure': '1'}, 0),
    ('nfs3.pcap', 'nfs3-null-call', 'call', dict(W3, **{'rpc.procedure': '0'}), 0),
    ('nfs3.pcap', 'nfs3-null-reply', 'reply', dict(W3, **{'rpc.procedure': '0'}), 0),
    ('nfs3.pcap', 'nfs3-write-call', 'call', dict(W3, **{'rpc.procedure': '7', 'nfs.count3': '4097'}), 0),
    ('nfs3.pcap', 'nfs3-write-reply', 'reply', dict(W3, **{'rpc.procedure': '7', 'nfs.count3': '4097'}), 0),
    ('nfs3.pcap', 'nfs3-write13-call', 'call', dict(W3, **{'rpc.procedure': '7', 'nfs.count3': '13'}), 0),
    ('nfs3.pcap', 'nfs3-write13-reply', 'reply', dict(W3, **{'rpc.procedure': '7', 'nfs.count3': '13'}), 0),
    ('nfs3.pcap', 'nfs3-read-call', 'call', dict(W3, **{'rpc.procedure': '6', 'nfs.count3': '4097'}), 0),
    ('nfs3.pcap', 'nfs3-read-reply', 'reply', dict(W3, **{'rpc.procedure': '6', 'nfs.count3': '4097'}), 0),
    ('nfs3.pcap', 'nfs3-read13-call', 'call', dict(W3, **{'rpc.procedure': '6', 'nfs.count3': '13'}), 0),
    ('nfs3.pcap', 'nfs3-read13-reply', 'reply', dict(W3, **{'rpc.procedure': '6', 'nfs.count3': '13'}), 0),
    ('nfs3.pcap', 'nfs3-commit-call', 'call', dict(W3, **{'rpc.procedure': '21'}), 0),
    ('nfs3.pcap', 'nfs3-commit-reply', 'reply', dict(W3, **{'rpc.procedure': '21'}), 0),
    ('nfs3.pcap', 'nfs3-symlink-call', 'call', dict(W3, **{'rpc.procedure': '10'}), 0),
    ('nfs3.pcap', 'nfs3-symlink-reply', 'reply', dict(W3, **{'rpc.procedure': '10'}), 0),
    ('nfs3.pcap', 'nfs3-readlink-call', 'call', dict(W3, **{'rpc.procedure': '5'}), 0),
    ('nfs3.pcap', 'nfs3-readlink-reply', 'reply', dict(W3, **{'rpc.procedure': '5'}), 0),
    ('nfs3.pcap', 'nfs3-readdirplus-call', 'call', dict(W3, **{'rpc.procedure': '17'}), 0),
    ('nfs3.pcap', 'nfs3-readdirplus-reply', 'reply', dict(W3, **{'rpc.procedure': '17'}), 0),
    ('nfs3.pcap', 'nfs3-getattr-call', 'call', dict(W3, **{'rpc.procedure': '1'}), 0),
    ('nfs3.pcap', 'nfs3-getattr-reply', 'reply', dict(W3, **{'rpc.procedure': '1'}), 0),
    # NFSv4.0, libnfs 4.0.0 client (writes split in 2048-byte WRITEs, see nfsgolden.c)
    ('nfs40.pcap', 'nfs40-null-call', 'call', dict(V4, **{'rpc.procedure': '0'}), 0),
    ('nfs40.pcap', 'nfs40-null-reply', 'reply', dict(V4, **{'rpc.procedure': '0'}), 0),
    ('nfs40.pcap', 'nfs40-setclientid-call', 'call', dict(V4, **{'v4.ops': '35'}), 0),
    ('nfs40.pcap', 'nfs40-setclientid-reply', 'reply', dict(V4, **{'v4.ops': '35'}), 0),
    ('nfs40.pcap', 'nfs40-write1-compound-call', 'call', dict(V4, **{'nfs.minorversion': '0', 'nfs.offset4': '4096'}), 0),
    ('nfs40.pcap', 'nfs40-write1-compound-reply', 'reply', dict(V4, **{'nfs.minorversion': '0', 'nfs.offset4': '4096'}), 0),
    ('nfs40.pcap', 'nfs40-write-compound-call', 'call', dict(V4, **{'nfs.minorversion': '0', 'nfs.offset4': '2048'}), 0),
    ('nfs40.pcap', 'nfs40-write-compound-reply', 'reply', dict(V4, **{'nfs.minorversion': '0', 'nfs.offset4': '2048'}), 0),
    ('nfs40.pcap', 'nfs40-read-compound-call', 'call', dict(V4, **{'nfs.minorversion': '0', 'nfs.main_opcode': '25', 'nfs.count4': '4097'}), 0),
    ('nfs40.pcap', 'nfs40-read-compound-reply', 'reply', dict(V4, **{'nfs.minorversion': '0', 'nfs.main_opcode': '25', 'nfs.count4': '4097'}), 0),
    ('nfs40.pcap', 'nfs40-create-symlink-compound-call', 'call', dict(V4, **{'nfs.main_opcode': '6', 'nfs.nfs_ftype4': '5'}), 0),
    ('nfs40.pcap', 'nfs40-create-symlink-compound-reply', 'reply', dict(V4, **{'nfs.main_opcode': '6', 'nfs.nfs_ftype4': '5'}), 0),
    ('nfs40.pcap', 'nfs40-readlink-compound-call', 'call', dict(V4, **{'v4.ops': '22,15,9,27'}), 0),
    ('nfs40.pcap', 'nfs40-readlink-compound-reply', 'reply', dict(V4, **{'v4.ops': '22,15,9,27'}), 0),
    ('nfs40.pcap', 'nfs40-readdir-compound-call', 'call', dict(V4, **{'nfs.main_opcode': '26'}), 0),
    ('nfs40.pcap', 'nfs40-readdir-compound-reply', 'reply', dict(V4, **{'nfs.main_opcode': '26'}), 0),
    # NFSv4.1, nfs-ganesha FSAL PROXY_V4 (client) -> nfs-ganesha VFS (server)
    ('nfs41-proxy.pcap', 'nfs41-exchange-id-call', 'call', dict(V4, **{'nfs.main_opcode': '42'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-exchange-id-reply', 'reply', dict(V4, **{'nfs.main_opcode': '42'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-create-session-call', 'call', dict(V4, **{'nfs.main_opcode': '43'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-create-session-reply', 'reply', dict(V4, **{'nfs.main_opcode': '43'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-reclaim-complete-call', 'call', dict(V4, **{'nfs.main_opcode': '58'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-reclaim-complete-reply', 'reply', dict(V4, **{'nfs.main_opcode': '58'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-write-compound-call', 'call', dict(V4, **{'nfs.main_opcode': '38', 'nfs.write.data_length': '4097'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-write-compound-reply', 'reply', dict(V4, **{'nfs.main_opcode': '38', 'nfs.write.data_length': '4097'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-write13-compound-call', 'call', dict(V4, **{'nfs.main_opcode': '38', 'nfs.write.data_length': '13'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-write13-compound-reply', 'reply', dict(V4, **{'nfs.main_opcode': '38', 'nfs.write.data_length': '13'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-read-compound-call', 'call', dict(V4, **{'nfs.main_opcode': '25', 'nfs.count4': '4097'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-read-compound-reply', 'reply', dict(V4, **{'nfs.main_opcode': '25', 'nfs.count4': '4097'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-read13-compound-call', 'call', dict(V4, **{'nfs.main_opcode': '25', 'nfs.count4': '13'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-read13-compound-reply', 'reply', dict(V4, **{'nfs.main_opcode': '25', 'nfs.count4': '13'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-commit-compound-call', 'call', dict(V4, **{'nfs.main_opcode': '5'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-commit-compound-reply', 'reply', dict(V4, **{'nfs.main_opcode': '5'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-create-symlink-compound-call', 'call', dict(V4, **{'nfs.main_opcode': '6', 'nfs.nfs_ftype4': '5'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-create-symlink-compound-reply', 'reply', dict(V4, **{'nfs.main_opcode': '6', 'nfs.nfs_ftype4': '5'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-readlink-compound-call', 'call', dict(V4, **{'nfs.main_opcode': '27'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-readlink-compound-reply', 'reply', dict(V4, **{'nfs.main_opcode': '27'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-readdir-compound-call', 'call', dict(V4, **{'nfs.main_opcode': '26'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-readdir-compound-reply', 'reply', dict(V4, **{'nfs.main_opcode': '26'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-open-compound-call', 'call', dict(V4, **{'nfs.main_opcode': '18'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-open-compound-reply', 'reply', dict(V4, **{'nfs.main_opcode': '18'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-getattr-compound-call', 'call', dict(V4, **{'nfs.main_opcode': '9', 'nfs.minorversion': '1'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-getattr-compound-reply', 'reply', dict(V4, **{'nfs.main_opcode': '9', 'nfs.minorversion': '1'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-sequence-call', 'call', dict(V4, **{'v4.ops': '53'}), 0),
    ('nfs41-proxy.pcap', 'nfs41-sequence-reply', 'reply', dict(V4, **{'v4.ops': '53'}), 0),
]
PORTS = [12049, 12050]


def load(path, ports=PORTS):
    recs = records(path)
    groups = pdml(path, ports)
    out = []
    for r in recs:
        g = groups.get((r['frame'], r['xid'], r['msgtyp']))
        if g is None:
            raise SystemExit('%s: tshark shows no RPC xid %08x in frame %d' % (path, r['xid'], r['frame']))
        out.append((r, g, dict(describe(r, g))))
    return out


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == 'list':
        ports = [int(p) for p in sys.argv[3:]] or PORTS
        for r, g, d in load(sys.argv[2], ports):
            print(summary(r, g))
        return
    if len(sys.argv) != 4 or sys.argv[1] != 'extract':
        print(__doc__)
        sys.exit(2)
    capdir, outdir = sys.argv[2], sys.argv[3]
    os.makedirs(outdir, exist_ok=True)
    cache, missing = {}, []
    for pcap, name, kind, match, nth in SELECT:
        if pcap not in cache:
            cache[pcap] = load(os.path.join(capdir, pcap))
        recs = cache[pcap]
        calls = [(r, g, d) for r, g, d in recs if r['msgtyp'] == 0 and
                 all(d.get(k) == v for k, v in match.items())]
        if len(calls) <= nth:
            missing.append(name)
            continue
        r, g, d = calls[nth]
        if kind == 'reply':
            reps = [(r2, g2, d2) for r2, g2, d2 in recs if r2['msgtyp'] == 1 and r2['xid'] == r['xid']
                    and r2['flow'][1] == r['flow'][3] and r2['flow'][3] == r['flow'][1]]
            if not reps:
                missing.append(name)
                continue
            r, g, _ = reps[0]
            d = dict(describe(r, g, d))
        with open(os.path.join(outdir, name + '.bin'), 'wb') as f:
            f.write(r['raw'])
        with open(os.path.join(outdir, name + '.txt'), 'w') as f:
            f.write('file=%s.bin\nsource_pcap=pcap/%s\n' % (name, pcap))
            for k, v in d.items():
                f.write('%s=%s\n' % (k, v))
        print('%-40s %s' % (name, summary(r, g)))
    if missing:
        print('NOT FOUND: ' + ' '.join(missing))
        sys.exit(1)


if __name__ == '__main__':
    main()
