#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Tunnelled captures with ground truth for tpm-replay (replay-overlay.sh).

    gen-overlay.py gen --seed N --out-dir DIR [--epochs E]
        writes DIR/overlay.pcap, DIR/overlay.events and DIR/truth.json.
    gen-overlay.py check TRUTH ACTUAL STDERR MODE LABEL
        compares tpm-replay's reports (ACTUAL, JSON lines) and its --stats
        line (the last JSON object on STDERR) with TRUTH, for a run in
        MODE: "tunnel" (--tunnel-ports=vxlan,geneve), "outer" (no tunnel
        ports) or "slots1" (--tunnel-ports=vxlan,geneve --tenant-slots=1).

The trace, on a 10 ms epoch, over 8 epochs (--epochs: E, a divisor of
2^10 * 5^10, such as 16 or 20) from an epoch (and 8- or E-epoch)
boundary; the seed alone decides the packets' counts, sizes and times,
so two seeds make two hosts' captures of the same tenants and flows
(tests/tem-overlay.sh):

  * three tenants whose VMs use the SAME inner flows: VXLAN VNI 5001 on
    an IPv4 underlay, VXLAN VNI 5002 on an IPv6 underlay, Geneve VNI
    70000 (with two options) on an IPv4 underlay.  Inner flows: UDP over
    IPv4, TCP over IPv4 with a VLAN tag in the inner frame, UDP over IPv6,
    and a UDP flow to port 4789 whose payload is itself a VXLAN header
    and frame (one level only is decapsulated: it is the tenant's flow).
    Each tenant has its own packet counts and sizes, per epoch;
  * the host's own untunnelled traffic with the same 5-tuples (but the
    one to port 4789, which would be a tunnel);
  * malformed tunnels, never monitored with tunnel ports: VXLAN and
    Geneve headers cut by the snap length (tun_truncated); VXLAN without
    its I flag, Geneve version 1, a VXLAN datagram too short for its
    header (tun_bad_header); ARP inside VXLAN (tun_inner_non_ip); an
    inner IPv4 header of length 16 and an inner IPv6 header cut by the
    snap length (tun_inner_malformed);
  * a Geneve frame of protocol type 0x0800 (IPv4 without Ethernet): not
    decapsulated, counted as its outer UDP flow (tun_not_decapsulated).

truth.json, written from the packets as they are built (never from
libtpm):

  "tunnel", "outer": what the monitor must count with and without tunnel
      ports: "flows", one row per (tun_id or null, inner or outer 5-tuple,
      epoch) with its packets and bytes (a tunnelled frame: its inner
      Ethernet frame's length; any other: its length on the wire), and
      "counters", the --stats counters;
  "tenants": per VNI, the packets and bytes of its decapsulated frames;
  "tenant_order": the VNIs in the order their first frame is met (the
      order tenant slots are taken);
  "events": each event of overlay.events, parsed (filter, group,
      variable, interval in epochs), for the checker.

The checker derives each event's reports from the rows (groups by the
event's fields; the IP version is part of a group only when it has an
address, so group=tun_id and group=tp_dst add up a tenant's or a port's
IPv4 and IPv6 packets), the totals per tenant from "tenants", and
compares them with what tpm-replay printed: the multisets of (event,
epoch, group with its keys in order) and every value exactly.

Only the Python standard library is used.
"""

import argparse
import ipaddress
import json
import os
import random
import struct
import sys

EPOCH_NS = 10_000_000
START_NS = 1_700_000_000 * 10**9        # A 2^10 * 5^10 epochs boundary.
EPOCHS = 8                              # By default; gen --epochs.
SNAPLEN = 65535
PCAP_MAGIC_NS = 0xa1b23c4d
VXLAN_PORT, GENEVE_PORT = 4789, 6081
UDP, TCP = 17, 6

MAC_VM1 = bytes.fromhex('020000000a01')
MAC_VM2 = bytes.fromhex('020000000a02')
MAC_HV1 = bytes.fromhex('020000000001')
MAC_HV2 = bytes.fromhex('020000000002')

# Tenants: (VNI, tunnel type, underlay IP version, source, destination).
TENANTS = [
    (5001, 'vxlan', 4, '10.0.0.1', '10.0.0.2'),
    (5002, 'vxlan', 6, 'fc00::1', 'fc00::2'),
    (70000, 'geneve', 4, '10.0.0.1', '10.0.0.3'),
]
# Packets per (tenant, flow, epoch) and L4 payload sizes, per tenant: no
# two tenants alike.  Index 3: the untunnelled traffic.
COUNTS = [(1, 2), (3, 4), (5, 6), (1, 3)]
SIZES = [(10, 200), (300, 600), (700, 1200), (20, 100)]

# Inner flows: (IP version, protocol, source, destination, source port,
# destination port, inner VLAN tag or None, untunnelled too).
FLOWS = [
    (4, UDP, '192.168.1.10', '192.168.1.20', 40000, 53, None, True),
    (4, TCP, '192.168.1.10', '192.168.1.20', 40001, 80, 100, True),
    (6, UDP, 'fd00::10', 'fd00::20', 40002, 443, None, True),
    (4, UDP, '192.168.1.10', '192.168.1.20', 40003, VXLAN_PORT, None,
     False),
]

# The events: name -> (filter text, structured filter, group, variable,
# interval in epochs).  A structured filter: (IP version or None,
# protocol or None, (VNI, mask) or None).
MASK_V, MASK_M = 0x1388, 0xfffffc       # 5000..5003: VNIs 5001 and 5002.


def make_events(epochs):
    """The events of a trace of 'epochs' epochs."""
    return [
        ('all_pk', 'any', (None, None, None), '5tuple', 'packets', 1),
        ('all_by', 'any', (None, None, None), '5tuple', 'bytes', 1),
    ] + [
        ('t%d_%s' % (v, short), 'any,tun_id=%d' % v,
         (None, None, (v, 0xffffff)), '5tuple', var, 1)
        for v, _, _, _, _ in TENANTS
        for var, short in (('packets', 'pk'), ('bytes', 'by'))
    ] + [
        ('ten_pk', 'any', (None, None, None), 'tun_id', 'packets', 1),
        ('ten_by', 'any', (None, None, None), 'tun_id', 'bytes', 1),
        ('dst_by', 'any', (None, None, None), 'tp_dst', 'bytes', 1),
        ('mask_by', 'any,tun_id=0x%x/0x%x' % (MASK_V, MASK_M),
         (None, None, (MASK_V, MASK_M)), 'tun_id,tp_dst', 'bytes', 1),
        ('tun_pk', 'udp,tun_id=0/0', (4, UDP, (0, 0)), 'tp_dst', 'packets', 1),
        ('g6_by', 'udp6,tun_id=0x11170', (6, UDP, (70000, 0xffffff)),
         '5tuple', 'bytes', 1),
        ('tot_pk', 'any', (None, None, None), 'tun_id', 'packets', epochs),
        ('tot_by', 'any', (None, None, None), 'tun_id', 'bytes', epochs),
    ]


EVENTS = make_events(EPOCHS)


def event_line(ev):
    name, ftext, _, group, var, ival = ev
    s = '%s filter=%s predicate=sum(%s) > 0 group=%s' % (name, ftext, var,
                                                          group)
    if ival != 1:
        s += ' interval=%dms' % (ival * EPOCH_NS // 1_000_000)
    return s


# ----------------------------------------------------------------------
# Frames, by hand.

def csum(data):
    if len(data) % 2:
        data += b'\0'
    s = sum(struct.unpack('!%dH' % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def addr(ver, text):
    return (ipaddress.IPv4Address(text) if ver == 4
            else ipaddress.IPv6Address(text)).packed


def eth(dst, src, ethertype, vlan=None):
    h = dst + src
    if vlan is not None:
        h += struct.pack('!HH', 0x8100, vlan)
    return h + struct.pack('!H', ethertype)


def ip_packet(ver, src, dst, proto, l4, ihl=5):
    """An IPv4 or IPv6 header for L4 segment 'l4' (checksummed by the
    caller's pseudo-header); 'ihl' below 5 makes a bad IPv4 header."""
    s, d = addr(ver, src), addr(ver, dst)
    if ver == 4:
        h = struct.pack('!BBHHHBBH4s4s', 0x40 | ihl, 0, 20 + len(l4), 0,
                        0, 64, proto, 0, s, d)
        h = h[:10] + struct.pack('!H', csum(h)) + h[12:]
        return h + l4
    return struct.pack('!IHBB16s16s', 0x60000000, len(l4), proto, 64, s,
                       d) + l4


def l4_segment(ver, src, dst, proto, sport, dport, payload, seq=0):
    s, d = addr(ver, src), addr(ver, dst)
    if proto == UDP:
        seg = struct.pack('!HHHH', sport, dport, 8 + len(payload), 0) \
            + payload
        off = 6
    else:
        seg = struct.pack('!HHIIBBHHH', sport, dport, seq, 1, 5 << 4,
                          0x18, 65535, 0, 0) + payload
        off = 16
    if ver == 4:
        pseudo = s + d + struct.pack('!BBH', 0, proto, len(seg))
    else:
        pseudo = s + d + struct.pack('!IxxxB', len(seg), proto)
    c = csum(pseudo + seg)
    if proto == UDP and c == 0:
        c = 0xffff
    return seg[:off] + struct.pack('!H', c) + seg[off + 2:]


def l2_frame(ver, src, dst, proto, sport, dport, payload, vlan=None,
             seq=0, ihl=5):
    """An Ethernet frame with an IP packet (a VM's, or the host's)."""
    l4 = l4_segment(ver, src, dst, proto, sport, dport, payload, seq)
    return eth(MAC_VM2, MAC_VM1, 0x0800 if ver == 4 else 0x86dd, vlan) \
        + ip_packet(ver, src, dst, proto, l4, ihl)


def vxlan_header(vni, flags=0x08):
    return struct.pack('!B3xI', flags, vni << 8)


GENEVE_OPTIONS = (struct.pack('!HBB', 0x0102, 0x80, 1) + b'\x11' * 4
                  + struct.pack('!HBB', 0xffff, 0x01, 2) + b'\x22' * 8)


def geneve_header(vni, proto=0x6558, version=0, options=GENEVE_OPTIONS):
    assert len(options) % 4 == 0
    return struct.pack('!BBHI', version << 6 | len(options) // 4, 0, proto,
                       vni << 8) + options


def tunnel_frame(tenant, sport, payload):
    """The outer frame of 'tenant' carrying UDP payload 'payload' (tunnel
    header and inner frame) from UDP port 'sport'; padded to 60 bytes."""
    _, kind, ver, src, dst = tenant
    dport = VXLAN_PORT if kind == 'vxlan' else GENEVE_PORT
    l4 = l4_segment(ver, src, dst, UDP, sport, dport, payload)
    f = eth(MAC_HV2, MAC_HV1, 0x0800 if ver == 4 else 0x86dd) \
        + ip_packet(ver, src, dst, UDP, l4)
    return f + bytes(max(0, 60 - len(f)))


def outer_len(tenant):
    """Bytes before the UDP payload in 'tenant''s outer frames."""
    return 14 + (20 if tenant[2] == 4 else 40) + 8


# ----------------------------------------------------------------------
# The trace and its truth.

class Trace:
    def __init__(self):
        self.frames = []        # (ts, bytes, caplen)
        self.tunnel = {}        # (tun, 5-tuple, epoch) -> [packets, bytes]
        self.outer = {}
        self.tenants = {}       # VNI -> [packets, bytes]
        self.order = []         # VNIs as first met (by time: see finish)
        self.decap_first = {}   # VNI -> first timestamp
        self.counters = dict.fromkeys(
            ('tun_decapsulated', 'tun_not_decapsulated', 'tun_truncated',
             'tun_bad_header', 'tun_inner_non_ip', 'tun_inner_malformed'),
            0)

    @staticmethod
    def count(table, key, nbytes):
        row = table.setdefault(key, [0, 0])
        row[0] += 1
        row[1] += nbytes

    def add(self, ts, frame, outer, inner=None, vni=None, inner_len=0,
            reason=None, caplen=None):
        """Frame 'frame' at 'ts'; 'outer': its outer 5-tuple.  With tunnel
        ports it is the tenant 'vni''s flow 'inner' (its frame being
        'inner_len' bytes), or not monitored for 'reason', or (neither)
        its outer flow."""
        caplen = len(frame) if caplen is None else caplen
        self.frames.append((ts, frame, caplen))
        epoch = ts // EPOCH_NS
        self.count(self.outer, (None, outer, epoch), len(frame))
        if inner is not None:
            self.count(self.tunnel, (vni, inner, epoch), inner_len)
            self.count(self.tenants, vni, inner_len)
            self.counters['tun_decapsulated'] += 1
            if vni not in self.decap_first or ts < self.decap_first[vni]:
                self.decap_first[vni] = ts
        elif reason is not None:
            self.counters[reason] += 1
        else:
            self.count(self.tunnel, (None, outer, epoch), len(frame))


def five(ver, proto, src, dst, sport, dport):
    return (ver, proto, src, dst, sport, dport)


def build(seed, epochs=EPOCHS):
    rng = random.Random('gen-overlay:%s' % seed)
    tr = Trace()
    used = set()

    def when(epoch):
        while True:
            ts = START_NS + epoch * EPOCH_NS + rng.randrange(
                1000, EPOCH_NS - 1000)
            if ts not in used:
                used.add(ts)
                return ts

    seq = 1
    for e in range(epochs):
        for ti, tenant in enumerate(TENANTS + [None]):
            for fi, (ver, proto, src, dst, sp, dp, vlan, host) in \
                    enumerate(FLOWS):
                if tenant is None and not host:
                    continue
                if (e + fi + ti) % 5 == 0:
                    continue            # No packet of this flow here.
                lo, hi = COUNTS[ti]
                for _ in range(rng.randint(lo, hi)):
                    size = rng.randint(*SIZES[ti])
                    if dp == VXLAN_PORT:
                        # A VXLAN header and a frame of VNI 9999: the
                        # tenant's payload, never decapsulated again.
                        payload = vxlan_header(9999) + l2_frame(
                            4, '172.16.0.1', '172.16.0.2', UDP, 1, 2,
                            bytes(size))
                    else:
                        payload = bytes(rng.randrange(256)
                                        for _ in range(min(size, 16))) \
                            + bytes(size - min(size, 16))
                    inner = l2_frame(ver, src, dst, proto, sp, dp, payload,
                                     vlan=vlan, seq=seq)
                    seq += len(payload)
                    key = five(ver, proto, src, dst, sp, dp)
                    ts = when(e)
                    if tenant is None:
                        tr.add(ts, inner, key)
                        continue
                    vni, kind, over, osrc, odst = tenant
                    hdr = (vxlan_header(vni) if kind == 'vxlan'
                           else geneve_header(vni))
                    osport = 49152 + 16 * ti + fi
                    frame = tunnel_frame(tenant, osport, hdr + inner)
                    odport = VXLAN_PORT if kind == 'vxlan' else GENEVE_PORT
                    tr.add(ts, frame, five(over, UDP, osrc, odst, osport,
                                           odport),
                           inner=key, vni=vni, inner_len=len(inner))

    # Malformed tunnels and the Geneve frame without Ethernet, each from
    # an outer source port of its own.
    a, b, c = TENANTS
    small = l2_frame(4, '192.168.1.10', '192.168.1.20', UDP, 40000, 53,
                     bytes(30))
    arp = eth(b'\xff' * 6, MAC_VM1, 0x0806) + bytes(28)
    bad_ip = l2_frame(4, '192.168.1.10', '192.168.1.20', UDP, 40000, 53,
                      bytes(30), ihl=4)
    v6 = l2_frame(6, 'fd00::10', 'fd00::20', UDP, 40002, 443, bytes(40))
    raw_ip = ip_packet(4, '192.168.1.10', '192.168.1.20', UDP, l4_segment(
        4, '192.168.1.10', '192.168.1.20', UDP, 40000, 53, bytes(30)))
    odd = [
        # (tenant, UDP payload, bytes captured after the UDP header or
        # None, reason)
        (a, vxlan_header(a[0]) + small, 4, 'tun_truncated'),
        (c, geneve_header(c[0]) + small, 12, 'tun_truncated'),
        (a, vxlan_header(a[0], flags=0x00) + small, None, 'tun_bad_header'),
        (c, geneve_header(c[0], version=1) + small, None, 'tun_bad_header'),
        (b, vxlan_header(b[0])[:4], None, 'tun_bad_header'),
        (a, vxlan_header(a[0]) + arp, None, 'tun_inner_non_ip'),
        (b, vxlan_header(b[0]) + bad_ip, None, 'tun_inner_malformed'),
        (c, geneve_header(c[0]) + v6, 8 + len(GENEVE_OPTIONS) + 14 + 20,
         'tun_inner_malformed'),
        (c, geneve_header(c[0], proto=0x0800) + raw_ip, None, None),
    ]
    for i, (t, payload, cap, reason) in enumerate(odd):
        sport = 60000 + i
        frame = tunnel_frame(t, sport, payload)
        caplen = None if cap is None else outer_len(t) + cap
        if reason is None:
            tr.counters['tun_not_decapsulated'] += 1
        dport = VXLAN_PORT if t[1] == 'vxlan' else GENEVE_PORT
        tr.add(when(1 + i % (epochs - 1)), frame,
               five(t[2], UDP, t[3], t[4], sport, dport), reason=reason,
               caplen=caplen)

    tr.frames.sort(key=lambda f: f[0])
    tr.order = sorted(tr.decap_first, key=tr.decap_first.get)
    return tr


def write_pcap(path, frames):
    out = bytearray(struct.pack('<IHHiIII', PCAP_MAGIC_NS, 2, 4, 0, 0,
                                SNAPLEN, 1))
    for ts, frame, caplen in frames:
        out += struct.pack('<IIII', ts // 10**9, ts % 10**9, caplen,
                           len(frame))
        out += frame[:caplen]
    with open(path, 'wb') as f:
        f.write(out)


def rows(table):
    out = []
    for (tun, key, epoch), (pk, by) in sorted(
            table.items(), key=lambda kv: repr(kv[0])):
        ver, proto, src, dst, sp, dp = key
        out.append({'tun_id': tun, 'ipver': ver, 'nw_proto': proto,
                    'src': src, 'dst': dst, 'tp_src': sp, 'tp_dst': dp,
                    'epoch': epoch, 'packets': pk, 'bytes': by})
    return out


def gen(args):
    if args.epochs < 2 or START_NS % (args.epochs * EPOCH_NS):
        print('gen-overlay.py: --epochs %d: not a divisor of %d above 1'
              % (args.epochs, START_NS // EPOCH_NS), file=sys.stderr)
        return 2
    events = make_events(args.epochs)
    tr = build(args.seed, args.epochs)
    os.makedirs(args.out_dir, exist_ok=True)
    write_pcap(os.path.join(args.out_dir, 'overlay.pcap'), tr.frames)
    with open(os.path.join(args.out_dir, 'overlay.events'), 'w') as f:
        f.write('# gen-overlay.py --seed %s\n' % args.seed)
        for ev in events:
            f.write(event_line(ev) + '\n')
    npk = len(tr.frames)
    nby = sum(len(f) for _, f, _ in tr.frames)
    bad = sum(tr.counters[k] for k in ('tun_truncated', 'tun_bad_header',
                                       'tun_inner_non_ip',
                                       'tun_inner_malformed'))
    common = {'packets': npk, 'bytes': nby, 'non_ip': 0,
              'l2_truncated': 0, 'too_many_tags': 0, 'l3_truncated': 0,
              'bad_ip_header': 0, 'ports_not_captured': 0,
              'l4_truncated': 0, 'ip_len_from_frame': 0,
              'tun_slots_full': 0}
    tunnel = dict(common, not_parsed=bad, tenants=len(tr.tenants),
                  **tr.counters)
    outer = dict(common, not_parsed=0, tenants=0,
                 **dict.fromkeys(tr.counters, 0))
    truth = {
        'epoch_ns': EPOCH_NS,
        'tunnel': {'flows': rows(tr.tunnel), 'counters': tunnel},
        'outer': {'flows': rows(tr.outer), 'counters': outer},
        'tenants': {str(v): {'packets': pk, 'bytes': by}
                    for v, (pk, by) in sorted(tr.tenants.items())},
        'tenant_order': tr.order,
        'events': [{'name': n, 'line': event_line(ev), 'ipver': f[0],
                    'nw_proto': f[1], 'tun': f[2], 'group': g, 'var': var,
                    'interval': ival}
                   for ev in events for n, _, f, g, var, ival in [ev]],
    }
    with open(os.path.join(args.out_dir, 'truth.json'), 'w') as f:
        json.dump(truth, f, indent=1)
        f.write('\n')
    if not args.quiet:
        print('gen-overlay.py: %d frames, %d tenants (%s), %d malformed, '
              '%d flows' % (npk, len(tr.tenants),
                            ','.join(map(str, tr.order)), bad,
                            len({(r[0], r[1]) for r in tr.tunnel})))
    return 0


# ----------------------------------------------------------------------
# The checker.

GROUP_ORDER = ['nw_proto', 'src', 'dst', 'tp_src', 'tp_dst', 'tun_id']


def expected_reports(truth, mode):
    """The reports of a run in 'mode': {(event, epoch, group): [values]}
    with 'group' a tuple of (key, value) in tpm-replay's order."""
    sect = truth['outer' if mode == 'outer' else 'tunnel']
    kept = None
    if mode == 'slots1':
        kept = set(truth['tenant_order'][:1])
    out = {}
    for ev in truth['events']:
        fields = (GROUP_ORDER if ev['group'] == '5tuple'
                  else ev['group'].split(','))
        m = ev['interval']
        sums = {}
        for r in sect['flows']:
            tun = r['tun_id']
            if kept is not None and tun is not None and tun not in kept:
                continue        # Not monitored: no tenant slot.
            if ev['tun'] is not None:
                v, mask = ev['tun']
                if tun is None or tun & mask != v & mask:
                    continue
            if ev['ipver'] not in (None, r['ipver']):
                continue
            if ev['nw_proto'] not in (None, r['nw_proto']):
                continue
            group = []
            for f in GROUP_ORDER:
                if f not in fields:
                    continue
                if f == 'tun_id':
                    if tun is not None:
                        group.append(('tun_id', tun))
                elif f in ('src', 'dst'):
                    group.append((('nw_' if r['ipver'] == 4 else 'ipv6_')
                                  + f, r[f]))
                else:
                    group.append((f, r[f]))
            # The IP version is part of a group that has an address
            # (without one, IPv4 and IPv6 packets of a port, protocol or
            # tenant are one group: lib/event.c, parse_group__()), and
            # the tenant of a group with tun_id (untunnelled packets: a
            # group of their own, {} for group=tun_id).
            ver = r['ipver'] if {'src', 'dst'} & set(fields) else 0
            k = r['epoch'] // m * m + m - 1
            key = (ev['name'], k, ver, tun if 'tun_id' in fields else 0,
                   tuple(group))
            sums[key] = sums.get(key, 0) + r[ev['var']]
        for (name, epoch, _, _, group), value in sums.items():
            out.setdefault((name, epoch, group), []).append(value)
    return out


def tenant_totals(truth, mode):
    """The values of tot_pk and tot_by per tenant, from "tenants" (not
    from the rows): {(event, group): value}."""
    if mode == 'outer':
        return {}
    order = truth['tenant_order']
    kept = order[:1] if mode == 'slots1' else order
    out = {}
    for v in kept:
        t = truth['tenants'][str(v)]
        out[('tot_pk', (('tun_id', v),))] = t['packets']
        out[('tot_by', (('tun_id', v),))] = t['bytes']
    return out


def check(args):
    with open(args.truth) as f:
        truth = json.load(f)
    mode, label = args.mode, args.label
    errors = []
    actual = {}
    n_lines = 0
    with open(args.actual) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            n_lines += 1
            try:
                pairs = json.loads(line, object_pairs_hook=lambda p: p)
            except ValueError:
                errors.append('line %d not JSON: %s' % (n, line[:200]))
                continue
            d = dict(pairs)
            if [k for k, _ in pairs] != ['event', 'epoch', 'group', 'value']:
                errors.append('line %d: keys %s' % (n, [k for k, _ in pairs]))
                continue
            group = tuple(d['group'])
            if mode == 'outer' and any(k == 'tun_id' for k, _ in group):
                errors.append('line %d: tun_id without tunnel ports: %s'
                              % (n, line.rstrip()))
            actual.setdefault((d['event'], d['epoch'], group),
                              []).append(d['value'])
    exp = expected_reports(truth, mode)
    n_exp = sum(len(v) for v in exp.values())
    if n_exp == 0:
        errors.append('nothing expected: the run tests nothing')
    missing, unexpected, wrong = [], [], []
    for key in sorted(set(exp) | set(actual), key=repr):
        e = sorted(exp.get(key, []))
        a = sorted(actual.get(key, []))
        if len(e) > len(a):
            missing.append('%s %s' % (key, e))
        elif len(a) > len(e):
            unexpected.append('%s %s' % (key, a))
        elif e != a:
            wrong.append('%s: expected %s, got %s' % (key, e, a))
    for title, lst in (('missing', missing), ('unexpected', unexpected),
                       ('wrong', wrong)):
        if lst:
            errors.append('%d %s (first 10):' % (len(lst), title))
            errors += ['    ' + s for s in lst[:10]]

    # The totals per tenant against the generator's own per-tenant sums.
    for (name, group), value in sorted(tenant_totals(truth, mode).items()):
        got = [v for (n, _, g), vs in actual.items()
               if n == name and g == group for v in vs]
        if got != [value]:
            errors.append('%s %s: total %s, expected [%s]'
                          % (name, dict(group), got, value))

    # Every event fires in a run with tunnel ports; an event fires in any
    # run exactly when the truth has reports for it (tun_id= events never
    # without tunnel ports, nor those of a tenant without a slot).
    fires = {k[0] for k in exp}
    names = {k[0] for k in actual}
    for ev in truth['events']:
        if mode == 'tunnel' and ev['name'] not in fires:
            errors.append('event %s: the trace does not make it fire'
                          % ev['name'])
        if (ev['name'] in fires) != (ev['name'] in names):
            errors.append('event %s %s' % (ev['name'], 'never fired'
                                           if ev['name'] in fires
                                           else 'fired, but should not'))
    seen = {v for (_, _, g) in actual for k, v in g if k == 'tun_id'}
    want = set() if mode == 'outer' else set(
        truth['tenant_order'][:1] if mode == 'slots1'
        else truth['tenant_order'])
    if seen != want:
        errors.append('tenants reported %s, expected %s' % (sorted(seen),
                                                            sorted(want)))

    # The --stats counters.
    stats = None
    with open(args.stderr) as f:
        for line in f:
            if line.startswith('{'):
                stats = json.loads(line)
    want_c = dict(truth['outer' if mode == 'outer' else 'tunnel']
                  ['counters'])
    if mode == 'slots1':
        first = truth['tenant_order'][0]
        want_c['tun_slots_full'] = sum(
            t['packets'] for v, t in truth['tenants'].items()
            if int(v) != first)
        want_c['tenants'] = 1
    if stats is None:
        errors.append('no --stats line on stderr')
    else:
        for k, v in sorted(want_c.items()):
            if stats.get(k) != v:
                errors.append('counter %s: %s, expected %s'
                              % (k, stats.get(k), v))

    if errors:
        print('FAIL: %s' % label)
        for e in errors:
            print('  ' + e)
        return 1
    print('PASS: %s: %d reports of %d events exact; %s' % (
        label, n_lines, len(names), ', '.join(
            '%s %d' % kv for kv in sorted(want_c.items())
            if kv[0] in ('packets', 'bytes')
            or (kv[1] and kv[0].startswith('tun')))))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    g = sub.add_parser('gen')
    g.add_argument('--seed', default='1')
    g.add_argument('--out-dir', required=True)
    g.add_argument('--epochs', type=int, default=EPOCHS)
    g.add_argument('--quiet', action='store_true')
    c = sub.add_parser('check')
    c.add_argument('truth')
    c.add_argument('actual')
    c.add_argument('stderr')
    c.add_argument('mode', choices=('tunnel', 'outer', 'slots1'))
    c.add_argument('label')
    args = ap.parse_args()
    return gen(args) if args.cmd == 'gen' else check(args)


if __name__ == '__main__':
    sys.exit(main())
