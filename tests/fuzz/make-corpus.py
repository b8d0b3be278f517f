#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/).

    make-corpus.py [DIR]        (default: tests/fuzz/corpus beside this)

Every seed is built here by hand, independently of the code under test:
event lines from tests/data/*.events and docs/event-language.md, Ethernet
frames byte by byte, protocol frames encoded as protobuf by hand
(following proto/trumpet.proto, as tests/tem-wire.py does), programs for
the TEM host-input target (tests/fuzz/fuzz-tem-host.c describes their
steps) and tem-ctl requests.  The output is deterministic: run it again
after changing the protocol or the targets' input formats, and commit
the result.
"""
import os
import re
import struct
import sys

TOP = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests"))
from pbwire import frame, varint  # noqa: E402
from pbwire import field_bytes as fb, field_varint as fv  # noqa: E402


def write(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---------------------------------------------------------------- events

EXTRA_EVENTS = [
    "v6 filter=ipv6,ipv6_dst=fd00::/8 predicate=sum(bytes) >= 1MiB "
    "group=ipv6_src/64,tp_dst interval=20ms",
    "ports filter=udp,tp_src=0x35/0xffff,tp_dst=1024/0xfc00 "
    "predicate=count() != 0 group=tp_src,tp_dst,nw_proto",
    "rtt filter=tcp predicate=max(rtt) > 500us || min(rwnd) < 1KiB",
    "mixed filter=ip,dl_type=0x0800,nw_proto=17 predicate=-(sum(ttl)) / 2 "
    "<= !count(ecn) * 3.5e2 group=nw_src/0 interval=1s",
    "prev filter=tcp predicate=prev(avg(ack - seq)) > 1.5 * "
    "avg(ack - seq) && rtt_lastepoch > 0 interval=100ms",
    "mask filter=ip,nw_src=10.0.0.0/255.255.0.255 predicate="
    "stddev(volume) > 10% group=nw_dst/16",
    "# a comment line",
    "tenant filter=udp6,tun_id=0xabcdef/0xffff00,tp_dst=53 predicate="
    "count() > 10 group=tun_id,ipv6_dst/64",
    "anytun filter=tun_id=0/0 predicate=sum(bytes) > 1GB group=tun_id",
    "badvni filter=ip,tun_id=16777216 predicate=count() > 0",
]


def events(out):
    lines = []
    for name in ("table2.events", "table2-tcp.events"):
        with open(os.path.join(TOP, "tests", "data", name)) as f:
            lines += [l.strip() for l in f
                      if l.strip() and not l.startswith("#")]
    with open(os.path.join(TOP, "docs", "event-language.md")) as f:
        n = 0
        for l in f:
            l = l.strip()
            if l.startswith("filter=") and "predicate=" in l:
                n += 1
                lines.append("doc%d %s" % (n, l))
    lines += EXTRA_EVENTS
    for i, l in enumerate(lines):
        write(out, "event", "%02d" % i, l)


# --------------------------------------------------------------- packets

def eth(ethertype, vlans=()):
    h = b"\x02\0\0\0\0\x01\x02\0\0\0\0\x02"
    for tpid, tci in vlans:
        h += struct.pack(">HH", tpid, tci)
    return h + struct.pack(">H", ethertype)


def ipv4(proto, payload_len, opts=b"", frag=0, tos=0, ttl=64, tot=None):
    ihl = 5 + len(opts) // 4
    if tot is None:
        tot = ihl * 4 + payload_len
    return (struct.pack(">BBHHHBBH4s4s", 0x40 | ihl, tos, tot, 1, frag,
                        ttl, proto, 0, bytes([10, 1, 0, 1]),
                        bytes([10, 0, 1, 2])) + opts)


def ipv6(nh, payload_len, tc=0):
    return (struct.pack(">IHBB", 0x60000000 | tc << 20, payload_len, nh, 64)
            + bytes([0xfd] + [0] * 14 + [1]) + bytes([0xfd] + [0] * 14 + [2]))


def tcp(flags=0x10, opts=b"", payload=b""):
    off = 5 + len(opts) // 4
    return struct.pack(">HHIIBBHHH", 33000, 80, 1000, 2000, off << 4, flags,
                       512, 0, 0) + opts + payload


def udp(payload=b""):
    return struct.pack(">HHHH", 53, 1024, 8 + len(payload), 0) + payload


def ether(l2, l3, l4):
    return l2 + l3 + l4


def udp_to(dport, payload):
    return struct.pack(">HHHH", 49152, dport, 8 + len(payload), 0) + payload


def vxlan(vni, inner, flags=0x08):
    return struct.pack(">BBHI", flags, 0, 0, vni << 8) + inner


def geneve(vni, inner, opts=b"", proto=0x6558, version=0):
    return struct.pack(">BBHI", version << 6 | len(opts) // 4, 0, proto,
                       vni << 8) + opts + inner


def tunnelled(tun, v6=False, vlans=()):
    """An outer IPv4 (IPv6) frame carrying 'tun' in UDP to the port of its
    type (fuzz-packet.c: VXLAN 4789, Geneve 6081)."""
    port, payload = tun
    u = udp_to(port, payload)
    if v6:
        return ether(eth(0x86dd, vlans), ipv6(17, len(u)), u)
    return ether(eth(0x0800, vlans), ipv4(17, len(u)), u)


def packets(out):
    pay = b"x" * 20
    t = tcp(payload=pay)
    syn = tcp(0x02, opts=b"\x02\x04\x05\xb4\x01\x03\x03\x07\x04\x02\0\0")
    u = udp(pay)
    icmp = b"\x08\0\0\0\0\x01\0\x01" + pay
    sctp = struct.pack(">HHII", 5000, 6000, 1, 0) + pay
    frames = {
        "ipv4-tcp": ether(eth(0x0800), ipv4(6, len(t)), t),
        "ipv4-tcp-syn": ether(eth(0x0800), ipv4(6, len(syn)), syn),
        "ipv4-udp": ether(eth(0x0800), ipv4(17, len(u)), u),
        "ipv4-icmp": ether(eth(0x0800), ipv4(1, len(icmp)), icmp),
        "ipv4-sctp": ether(eth(0x0800), ipv4(132, len(sctp)), sctp),
        "ipv4-gre": ether(eth(0x0800), ipv4(47, 4), b"\0\0\x08\0"),
        "ipv4-options": ether(eth(0x0800), ipv4(6, len(t), b"\x01" * 8),
                              t),
        "ipv4-first-fragment": ether(eth(0x0800),
                                     ipv4(17, len(u), frag=0x2000), u),
        "ipv4-later-fragment": ether(eth(0x0800),
                                     ipv4(17, len(u), frag=0x0010), u),
        "ipv4-ecn-ce": ether(eth(0x0800), ipv4(6, len(t), tos=3), t),
        "ipv4-tot-zero": ether(eth(0x0800), ipv4(6, len(t), tot=0), t),
        "ipv4-cut-tcp": ether(eth(0x0800), ipv4(6, len(t)), t[:10]),
        "vlan-ipv4-udp": ether(eth(0x0800, [(0x8100, 5)]),
                               ipv4(17, len(u)), u),
        "qinq-ipv6-tcp": ether(eth(0x86dd, [(0x88a8, 1), (0x8100, 2)]),
                               ipv6(6, len(t)), t),
        "ipv6-udp": ether(eth(0x86dd), ipv6(17, len(u)), u),
        "ipv6-tcp-syn": ether(eth(0x86dd), ipv6(6, len(syn), tc=3), syn),
        "ipv6-hop-frag-udp": ether(
            eth(0x86dd), ipv6(0, 8 + 8 + len(u)),
            b"\x2c\0" + b"\0" * 6 + b"\x11\0\0\0\0\0\0\x01" + u),
        "ipv6-icmp6": ether(eth(0x86dd), ipv6(58, 8), b"\x80\0\0\0\0\1\0\1"),
        "arp": eth(0x0806) + b"\0\x01\x08\0\x06\x04\0\x01" + b"\0" * 20,
        "runt": eth(0x0800)[:10],
    }
    # Tunnels: inner frames of the above in VXLAN and Geneve.
    in_tcp = frames["ipv4-tcp"]
    in_syn6 = frames["qinq-ipv6-tcp"]
    opt = struct.pack(">HBB", 0x0102, 0x80, 1) + b"\0\0\0\x07"
    frames.update({
        "vxlan-ipv4-tcp": tunnelled((4789, vxlan(100, in_tcp))),
        "vxlan6-qinq-ipv6-tcp": tunnelled((4789, vxlan(0xffffff, in_syn6)),
                                          v6=True),
        "vlan-vxlan-ipv6-syn": tunnelled(
            (4789, vxlan(7, frames["ipv6-tcp-syn"])), vlans=[(0x8100, 9)]),
        "vxlan-no-i-flag": tunnelled((4789, vxlan(1, in_tcp, flags=0))),
        "vxlan-inner-arp": tunnelled((4789, vxlan(2, frames["arp"]))),
        "vxlan-cut": tunnelled((4789, vxlan(3, in_tcp)))[:60],
        "geneve-ipv4-udp": tunnelled((6081, geneve(5, frames["ipv4-udp"]))),
        "geneve-options": tunnelled((6081, geneve(6, in_tcp, opts=opt))),
        "geneve6-options": tunnelled(
            (6081, geneve(6, in_syn6, opts=opt + opt)), v6=True),
        "geneve-raw-ipv4": tunnelled(
            (6081, geneve(8, in_tcp[14:], proto=0x0800))),
        "geneve-version-1": tunnelled(
            (6081, geneve(9, in_tcp, version=1))),
        "geneve-options-past": tunnelled(
            (6081, geneve(10, b"", opts=opt)))[:-4],
        "geneve-to-vxlan-port": tunnelled((4789, geneve(11, in_tcp))),
    })
    for name, f in sorted(frames.items()):
        # Two bytes of wire-length choice first (fuzz-packet.c): +4 (FCS).
        write(out, "packet", name, b"\x04\0" + f)


# -------------------------------------------------------------- protocol

def fd(num, value):
    return varint(num << 3 | 1) + struct.pack("<d", value)


def key(v6=False):
    a = bytes([0xfd] + [0] * 15) if v6 else bytes([10, 0, 1, 0])
    return (fv(1, 6 if v6 else 4) + fb(2, a) + fb(3, a) + fv(4, 1)
            + fv(5, 2) + fv(6, 17))


def prefix(ipver, addr, length, tun_id=None):
    return (fv(1, ipver) + fb(2, bytes(addr)) + fv(3, length)
            + (fv(4, tun_id) if tun_id is not None else b""))


HELLO = fb(1, fv(1, 1) + fv(2, 2) + fb(3, "host-1")
           + fb(4, prefix(4, [10, 0, 0, 0], 8))
           + fb(4, prefix(6, [0xfd] + [0] * 15, 8))
           + fv(5, 10000000) + fv(6, 1700000000000000000)
           + fv(7, 1) + fv(7, 3) + fb(8, "ovs 3.1.0"))
MESSAGES = {
    "hello": HELLO,
    "welcome": fb(2, fv(1, 2) + fb(2, "tem") + fv(3, 17) + fv(4, 1000)),
    "refuse": fb(3, fb(1, "no common version") + fv(2, 1) + fv(3, 2)),
    "install": fb(4, fv(1, 7) + fv(2, 1) + fb(3, "heavy")
                  + fb(4, "filter=ip predicate=sum(volume) > 100KB")
                  + fd(5, 50000.0)),
    "remove": fb(5, fv(1, 8) + fv(2, 1)),
    "ack": fb(6, fv(1, 7) + fv(2, 1)),
    "nack": fb(7, fv(1, 7) + fv(2, 1) + fb(3, "table full")),
    "satisfaction": fb(8, fv(1, 1) + fv(2, 170000000000) + fb(3, key())
                       + fd(4, 123456.5) + fv(5, 1) + fv(6, 2) + fv(7, 1)),
    "satisfaction-v6": fb(8, fv(1, 2) + fv(2, 5) + fb(3, key(True))
                          + fd(4, 0.0)),
    "poll": fb(9, fv(1, 9) + fv(2, 1) + fv(3, 5) + fb(4, key())),
    "heartbeat": fb(11, fv(1, 1700000000000000000) + fv(2, 3)),
    "bye": fb(12, fb(1, "shutting down")),
    "bye-empty": fb(12, b""),
    "configure": fb(13, fv(1, 10) + fv(2, 4000)),
    # Version 3: numbered, late reports; the TEM's confirmation; the
    # agent's run in Hello.
    "satisfaction-seq": fb(8, fv(1, 1) + fv(2, 170000000000) + fb(3, key())
                           + fd(4, 5.0) + fv(8, 42) + fv(9, 1)),
    "poll-reply-seq": fb(10, fv(1, 9) + fv(2, 1) + fv(3, 5) + fv(4, 2)
                         + fv(6, 43) + fv(7, 0)),
    "heartbeat-received": fb(11, fv(1, 1700000000000000000) + fv(2, 4)
                             + fv(4, 43)),
    "hello-instance": fb(1, fv(1, 1) + fv(2, 3) + fb(3, "host-2")
                         + fv(5, 10000000) + fv(6, 1700000000000000000)
                         + fv(9, 0x1234567890abcdef)),
}


def proto(out):
    for name, m in sorted(MESSAGES.items()):
        write(out, "proto", name, frame(2, m))
    for status in range(6):
        r = fb(10, fv(1, 9) + fv(2, 1) + fv(3, 5) + fv(4, status)
               + (fd(5, 42.0) if status in (0, 5) else b""))
        write(out, "proto", "poll-reply-%d" % status, frame(1, r))
    write(out, "proto", "batch",
          frame(1, MESSAGES["satisfaction"], MESSAGES["heartbeat"],
                 MESSAGES["ack"], MESSAGES["nack"]))
    write(out, "proto", "hello-version-99",
          frame(99, fb(1, fv(1, 99) + fv(2, 99) + fb(3, "future")
                        + fv(5, 10000000) + fv(6, 1))))
    write(out, "proto", "unknown-kind", frame(2, fb(99, b"\x08\x01")))
    # Bounds on wide integers: a port above 65535, an epoch of 2^62, a
    # heartbeat period of 0.
    wide = (fv(1, 4) + fb(2, bytes(4)) + fb(3, bytes(4)) + fv(4, 70000)
            + fv(5, 2) + fv(6, 300))
    write(out, "proto", "bounds",
          frame(2, fb(8, fv(1, 1) + fv(2, 5) + fb(3, wide) + fd(4, 1.0)),
                fb(9, fv(1, 9) + fv(2, 1) + fv(3, 1 << 62) + fb(4, key())),
                fb(10, fv(1, 9) + fv(2, 1) + fv(3, 1 << 62) + fv(4, 1)),
                fb(2, fv(1, 2) + fb(2, "tem") + fv(3, 17) + fv(4, 0))))
    # Bounds of version 3: seq 0, seq 2^62, late without seq, received
    # 2^62, instance 0.
    write(out, "proto", "bounds-seq",
          frame(3, fb(8, fv(1, 1) + fv(2, 5) + fb(3, key()) + fd(4, 1.0)
                      + fv(8, 0)),
                fb(8, fv(1, 1) + fv(2, 5) + fb(3, key()) + fd(4, 1.0)
                   + fv(8, 1 << 62)),
                fb(10, fv(1, 9) + fv(2, 1) + fv(3, 5) + fv(4, 2) + fv(7, 1)),
                fb(11, fv(1, 1) + fv(2, 1) + fv(4, 1 << 62)),
                fb(1, fv(1, 1) + fv(2, 3) + fb(3, "h") + fv(5, 10000000)
                   + fv(6, 1) + fv(9, 0))))
    # Version 4: tenants' groups (GroupKey.tun_id, PollBatch.tun_ids: 0
    # no tenant, VNI + 1 a tenant), and their bounds: a VNI of 2^24, an
    # entry of VNI 2^24, tun_ids not one per entry.
    tkey = key() + fv(7, 0xabcdef)
    rec = bytes([4, 10, 0, 1, 0, 10, 0, 1, 0, 0, 1, 0, 2, 17])
    packed = lambda *xs: b"".join(varint(x) for x in xs)
    write(out, "proto", "tenant",
          frame(4, fb(8, fv(1, 1) + fv(2, 170000000000) + fb(3, tkey)
                      + fd(4, 7.0) + fv(8, 44) + fv(9, 0)),
                fb(8, fv(1, 1) + fv(2, 170000000000)
                   + fb(3, key(True) + fv(7, 0)) + fd(4, 8.0)),
                fb(9, fv(1, 9) + fv(2, 1) + fv(3, 5) + fb(4, tkey)),
                fb(14, fv(1, 11) + fv(2, 5) + fb(3, packed(1, 2, 3))
                   + fb(4, rec * 3) + fb(5, packed(0, 1, 0x1000000)))))
    write(out, "proto", "bounds-tenant",
          frame(4, fb(8, fv(1, 1) + fv(2, 5) + fb(3, key() + fv(7, 1 << 24))
                      + fd(4, 1.0)),
                fb(9, fv(1, 9) + fv(2, 1) + fv(3, 5)
                   + fb(4, key() + fv(7, 1 << 24))),
                fb(14, fv(1, 11) + fv(2, 5) + fb(3, packed(1, 2))
                   + fb(4, rec * 2) + fb(5, packed(0, 0x1000001))),
                fb(14, fv(1, 11) + fv(2, 5) + fb(3, packed(1, 2))
                   + fb(4, rec * 2) + fb(5, packed(1)))))
    # Tags of 5 bytes (the most protobuf-c reads) and 6 (refused by both
    # decoders): field 1 of a satisfaction, padded with 0x80 bytes.
    sat_rest = fv(2, 5) + fb(3, key()) + fd(4, 1.0)
    write(out, "proto", "tag-5-bytes",
          frame(3, fb(8, b"\x88\x80\x80\x80\x00" + varint(1) + sat_rest)))
    write(out, "proto", "tag-6-bytes",
          frame(3, fb(8, b"\x88\x80\x80\x80\x80\x00" + varint(1)
                      + sat_rest)))
    write(out, "proto", "prefix-list", "10.0.0.0/8, fd00::/8 192.168.1.7")
    write(out, "proto", "prefix-list-tenant",
          "10.1.0.0/16, vni=5001:10.0.128.0/24 vni=0xffffff:fd00::/8")
    write(out, "proto", "hello-tenant",
          frame(4, fb(1, fv(1, 1) + fv(2, 4) + fb(3, "host-1")
                      + fb(4, prefix(4, [10, 0, 0, 0], 8))
                      + fb(4, prefix(4, [10, 0, 128, 0], 24, 5001))
                      + fv(5, 10000000) + fv(6, 1700000000000000000))))
    write(out, "proto", "bounds-prefix-tenant",
          frame(4, fb(1, fv(1, 1) + fv(2, 4) + fb(3, "host-1")
                      + fb(4, prefix(4, [10, 0, 128, 0], 24, 1 << 24))
                      + fv(5, 10000000) + fv(6, 1700000000000000000))))


# ------------------------------------------------------- TEM host input

def tem_host(out):
    # Steps (fuzz-tem-host.c): OP PEER ARGS...; OP bit 0x80 sends the
    # peer's frame.  Events: 1 heavy, 2 hh (standby), 3 wsplit, 4 maxttl,
    # 5 quorum, 6 v6, 7 tenant.
    def hello(peer, host, prefixes, pmds=1):
        # a: host id (a % 5), versions 1..2; c: prefix set, PMDs.
        return bytes([0x81, peer, 0x14 + host, prefixes | pmds << 6])

    def acks(peer, n):
        return b"".join(bytes([0x84, peer, i, 0]) for i in range(n))

    def sat(peer, event, key, value, back=1, flags=0):
        return bytes([0x82, peer, event - 1, back]) + key + bytes(
            [value, flags])

    def reply(peer, status, value, pick=0):
        return bytes([0x83, peer, pick, status, value])

    def hello3(peer, host, c):
        # Versions 3..3 (a >> 5 & 3 == 2), host id a % 5 == host; c: its
        # prefix set (c % 8), 0x10: an agent run (instance 1 + (c & 1)).
        a = next(a for a in range(0x40, 0x60) if a % 5 == host
                 and not a >> 4 & 1)
        return bytes([0x81, peer, a, c])

    def sat_seq(peer, event, key, value, seq, late):
        # Flags bit 1: numbered (the next byte is the seq - 1); bit 2:
        # late.
        return (bytes([0x82, peer, event - 1, 1]) + key
                + bytes([value, 2 | (4 if late else 0), seq - 1]))

    def time(ms):
        return bytes([0x08, 0, ms])

    k24 = b"\x00\x01"            # 10.0.1.0/24 (heavy's group)
    k5 = b"\x01\x05\x07\x02"     # a 5-tuple
    k6 = b"\x02\x01"             # an IPv6 /64
    hosts = hello(0, 0, 1) + hello(1, 1, 4) + hello(2, 2, 2) + hello(3, 3, 5)
    installed = hosts + acks(0, 6) + acks(1, 6) + acks(2, 6) + acks(3, 6)
    progs = {
        "hellos": hosts,
        "decision-alert-drilldown":
            installed + sat(0, 1, k24, 6) + reply(1, 0, 7)
            + reply(2, 3, 0) + reply(3, 1, 0) + time(2) + reply(3, 0, 7)
            + time(100) + acks(0, 3) + time(0x85),
        "deadline-missing": installed + sat(1, 3, k5, 7) + time(120),
        "weighted-rebalance":
            installed + sat(0, 3, k5, 7) + sat(1, 3, k5, 8)
            + reply(2, 0, 8) + reply(3, 0, 7) + time(0x8b)
            + sat(0, 3, k5, 2, back=0) + time(50),
        "quorum-v6": installed + sat(2, 5, k5, 4) + reply(3, 5, 4)
            + sat(3, 6, k6, 7) + time(120),
        "max-nack-bye":
            hosts + bytes([0x84, 1, 0, 1]) + sat(1, 4, k5, 3)
            + bytes([0x86, 2, 1]) + time(120),
        "replace-timeout":
            hosts + hello(1, 0, 3) + bytes([0x85, 0, 1]) + time(0x84),
        "dos-threshold":
            hosts + bytes([0x0a, 0, 0x80, 0x0a, 0, 0x01]) + acks(0, 4)
            + bytes([0x0a, 0, 0xc0]) + bytes([0x84, 1, 0, 1]),
        "event-del-add":
            installed + sat(0, 1, k24, 6) + bytes([0x09, 0, 0x80])
            + bytes([0x09, 0, 0x00]) + reply(1, 0, 7) + time(120),
        "sent-back": hosts + bytes([0x87, 0, 0, 0]) + bytes([0x87, 1, 3, 1]),
        "raw-garbage": hosts + bytes([0x00, 1, 6]) + b"\x08\x01\x12\x02\x62"
            b"\x00" + b"\x00",
        "bad-epoch-version": bytes([0x81, 0, 0x80, 0, 0x81, 1, 0x60, 0]),
        "v1-frame": hosts + bytes([0xc5, 0, 1]),
        # Version 3: peer 0 (10.0.0.0/8) and 1 (10.0.1.0/24) numbered:
        # late satisfactions, a duplicate, a gap, a numbered late poll
        # reply, a new session of the same run.
        "late-seq":
            hello3(0, 0, 0x55) + hello3(1, 1, 0x56) + acks(0, 6)
            + acks(1, 6) + sat_seq(0, 1, k24, 6, 1, True)
            + reply(1, 2, 0) + sat_seq(0, 1, k24, 6, 1, True)
            + sat_seq(0, 1, k24, 5, 4, True) + time(120)
            + sat_seq(1, 1, k24, 6, 1, False)
            + bytes([0x83, 0, 0, 0x62, 3, 0]) + time(2)
            + hello3(0, 0, 0x55) + sat_seq(0, 1, k24, 6, 4, True)
            + time(120),
    }
    for name, p in sorted(progs.items()):
        write(out, "tem-host", name, p)


# ------------------------------------------------------------- tem-ctl

def tem_ctl(out):
    def add(name, definition):
        return ('{"command":"event-add","name":"%s","definition":"%s"}'
                % (name, definition))
    reqs = {
        "add-show-del": [
            add("heavy", "filter=ip,nw_dst=10.0.0.0/8 predicate=sum(volume) "
                "> 100KB group=nw_dst/24 then=hh:500ms"),
            add("hh", "filter=ip predicate=sum(volume) > 10KB standby=yes"),
            '{"command":"event-show","name":"heavy"}',
            '{"command":"event-list"}',
            '{"command":"event-del","name":"hh"}',
            '{"command":"event-del","name":"nothere"}'],
        "split-scope": [
            add("svc-load", "filter=udp,nw_dst=10.99.0.0/16 predicate="
                "sum(volume) > 10MB group=nw_dst/24 split=weighted "
                "then=svc-hh:1s"),
            add("q", "filter=tcp6 predicate=avg(ecn) > 5% across=atleast:2 "
                "scope=10.1.0.0/16,fd00::/8 interval=20ms"),
            add("m", "filter=ip predicate=max(ttl) < 3 across=max "
                "scope=all"),
            '{"command":"hosts"}'],
        "errors": [
            add("bad", "filter=ip predicate=sum(volume) > >> 1"),
            add("bad2", "filter=ip predicate=avg(bytes) > 1 across=sum"),
            '{"command":"event-add","name":"x"}',
            '{"command":"nope"}', '{"name":"x"}', '[1,2]', 'not json',
            '{"command":"event-show"}'],
        "dos": [
            '{"command":"dos-threshold","bytes":4000}',
            '{"command":"dos-threshold","bytes":0,"host":"h0"}',
            '{"command":"dos-threshold","bytes":10,"host":"h1"}',
            '{"command":"dos-threshold","bytes":-1}',
            '{"command":"dos-threshold","bytes":1,"host":7}',
            '{"command":"hosts"}'],
        "tenants": [
            add("t", "filter=udp,tun_id=5001,nw_dst=10.0.0.0/8 predicate="
                "count() > 5 group=5tuple scope=vni=5001:10.0.0.0/8"),
            add("tm", "filter=udp,tun_id=0x1388/0xfffffc predicate="
                "count() > 5"),
            '{"command":"event-list","tun_id":5001}',
            '{"command":"hosts","tun_id":5002}',
            '{"command":"alerts","tun_id":5001,"count":5}',
            '{"command":"hosts","tun_id":16777216}',
            '{"command":"event-list","tun_id":"5001"}',
            '{"command":"event-show","name":"tm"}'],
        "status-alerts": [
            '{"command":"status"}', '{"command":"alerts","count":5}',
            '{"command":"alerts","event":"heavy","count":-3}'],
    }
    for name, lines in sorted(reqs.items()):
        write(out, "tem-ctl", name, "\n".join(lines) + "\n")
    write(out, "tem-ctl", "state-file",
          'state:{"format":1,"next_id":3,"events":[{"id":1,"name":"heavy",'
          '"definition":"filter=ip predicate=sum(volume) > 100KB '
          'then=hh:500ms","standby":false},{"id":2,"name":"hh","definition":'
          '"filter=ip predicate=sum(volume) > 10KB standby=yes","standby":'
          'true}]}\n{"command":"event-del","name":"hh"}\n'
          + add("hh", "filter=ip predicate=count() > 3 standby=yes") + "\n")
    # Ids wrap past 4294967295 (new ids must skip those in use).
    write(out, "tem-ctl", "state-id-wrap",
          'state:{"format":1,"events":[{"id":1,"name":"a","definition":'
          '"filter=ip predicate=count() > 1"},{"id":4294967295,"name":"b",'
          '"definition":"filter=ip predicate=count() > 2"}]}\n'
          + add("c", "filter=ip predicate=count() > 3") + "\n"
          + '{"command":"event-list"}\n')


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        TOP, "tests", "fuzz", "corpus")
    events(out)
    packets(out)
    proto(out)
    tem_host(out)
    tem_ctl(out)


if __name__ == "__main__":
    main()
