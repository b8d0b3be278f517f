#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Generate pcap traces, event files and ground truth for tpm-replay.

This is the oracle of the end-to-end test (tests/e2e-replay.sh).  For each
scenario it builds a list of packets in memory, writes them as a classic
pcap (nanosecond magic 0xa1b23c4d, so timestamps are exact), writes the
scenario's events, and computes what tpm-replay must print from the packet
list in pure Python, never using libtpm:

    OUT/NAME.pcap       the trace
    OUT/NAME.events     the events, in the event language (lib/event.h)
    OUT/NAME.expected   one JSON line per satisfied trigger, as tpm-replay
                        prints them
    OUT/NAME.counters   the parser's counters tpm-replay --stats must show
    OUT/NAME.census     what tpm-replay must count in the capture to size
                        its tables (census())

Modes:
    gen-trace.py --scenario all --seed 1 --out-dir DIR
        every scenario but "flows" (100000 flows and 140000 reports, some
        seconds to generate: name it, and --flows N to change its size)
    gen-trace.py --verify PCAP EVENTS EXPECTED
        re-reads PCAP with a parser of its own (independent of the frame
        builder below), checks every IP and L4 checksum and length,
        recomputes the ground truth from the bytes and compares it with
        EXPECTED: a cross-check of the generator.
    gen-trace.py --truth PCAP EVENTS
        prints the ground truth for any pcap and events file (handy when
        debugging tpm-replay by hand).
    gen-trace.py --demo PCAP
        writes the "table2" trace (tests/data/table2.events) to PCAP.

Semantics implemented by the ground truth (the contract tpm-replay honours):
  * epoch number of a packet = floor(timestamp_ns / epoch_ns); an event
    with interval I has m = I / epoch epochs per interval, and interval k
    covers epochs [k*m, k*m + m - 1]; a report carries epoch k*m + m - 1.
  * a group exists in an interval only if at least one packet matching the
    filter fell in it; groups without packets are never evaluated.
  * per-packet variables: packets = 1; bytes = pcap orig_len; volume = L4
    payload from the IP/L4 headers (TCP: IP total length - IHL*4 - data
    offset*4; UDP: UDP length - 8; IPv6 TCP: payload length - data offset;
    other protocols: IP payload length; ICMP appears only in noise that
    no filter matches, so its volume is never compared), never from
    caplen, so Ethernet padding does not matter;
    ttl = TTL / hop limit;
  * frames cut by the snap length (docs/operations.md, "What the capture
    must hold"): a frame is monitored only if its VLAN tags (at most 4, of
    TPIDs 0x8100, 0x88a8, 0x9100), IP header (with options) and, for TCP
    and UDP, its ports (ICMP: type and code) were captured; other frames
    match no filter.  TCP fields not captured read 0 (sequence number:
    8 bytes of TCP header, acknowledgement 12, flags 14, window 16, SYN
    options only whole); when the data offset (byte 12) was not captured
    the TCP header counts as 20 bytes, so the volume of a segment with
    options includes them.  The counters tpm-replay --stats must show are
    computed from the packet fields (parse_counters()) and written to
    NAME.counters.
    ecn = 1 iff the ECN bits are 11 (CE).
  * variables that need per-flow state (state_vars(), exactly as
    docs/event-language.md defines them): a flow has state from its first
    packet that matches an event using one of them, and a TCP flow shares
    it with its reverse direction, whose packets feed it from then on.
    Per packet of direction h (the other is o), at the packet's capture
    time: is_burst = a previous packet of h was seen and the gap is at most
    20 us (burst_gap_ns); for TCP, with seglen = payload + SYN + FIN and
    sequence numbers unwrapped to 64 bits: is_lost = seglen > 0 and the
    segment starts below h's highest sequence end; seq = h's highest
    sequence end; an ACK advancing o's highest ack by n lowers o's dup by
    n (floor 0), an ACK repeating it (no payload, no SYN/FIN, same raw
    window as h's previous packet, o has data outstanding) adds the MSS
    option of h's SYN (1460 without) to o's dup; ack = h's highest ack
    received (0 before any), dup = h's dup; rtt = h's latest sample: a
    segment with seglen > 0 that is not a retransmission starts a sample
    when none is in flight, a retransmission cancels it (Karn), the first
    ACK of o at or beyond its end completes it; rwnd = raw window << h's
    SYN window scale when both SYNs carried the option and the packet is
    not a SYN, else the raw window.  Other protocols: is_burst only, the
    rest 0.
  * aggregates: sum, count() (packets), count(t) (packets with t != 0),
    avg, min, max, stddev (population); a bare variable is its last value
    in the interval, VAR_lastepoch and prev(e) are evaluated over the
    group's previous interval (0 when it had no packets).  Division by
    zero yields 0.
  * reported value = left operand of the leftmost comparison of the
    predicate (pre-order, not descending into aggregate terms).

Every scenario asserts, while generating, that each of its events fires at
least once and also fails for at least one (interval, group) that had
packets, and that hand-made near-threshold cases (exactly at a '>'
threshold: silent; one above: fires) come out as designed.  Comparisons
whose operands are floating point must not be within 1e-7 relative of each
other (so libtpm's different summation order cannot flip them); if random
traffic produces such a near-tie the scenario is regenerated with the next
attempt number, deterministically.

Only the Python standard library is used.
"""

import argparse
import heapq
import ipaddress
import json
import math
import os
import random
import re
import struct
import sys
import time

EPOCH_NS = 10_000_000           # tpm-replay's default --epoch (10 ms).
START_NS = 1_700_000_000 * 10**9
YEAR_NS = 365 * 86400 * 10**9
MSS = 1460                      # TCP payload of a 1514-byte frame.
MIN_FRAME = 60                  # Ethernet minimum without FCS.
PCAP_MAGIC_NS = 0xa1b23c4d
PCAP_MAGIC_US = 0xa1b2c3d4

ETH_IP4, ETH_IP6, ETH_ARP, ETH_VLAN, ETH_LLDP = 0x0800, 0x86DD, 0x0806, \
    0x8100, 0x88CC
VLAN_TPIDS = (0x8100, 0x88a8, 0x9100)
VLAN_MAX = 4                    # Tags libtpm parses (lib/packet.h).
ICMP, TCP, UDP = 1, 6, 17

MAC_A = bytes.fromhex('020000000001')
MAC_B = bytes.fromhex('020000000002')
MAC_LLDP = bytes.fromhex('0180c200000e')
MAC_BCAST = b'\xff' * 6


class Retry(Exception):
    """Random traffic was unlucky (near-tie, an event that never fires):
    regenerate the scenario with the next attempt number."""


# ----------------------------------------------------------------------
# Packets in memory.

class Flow:
    """The header fields shared by all packets of a unidirectional flow."""

    __slots__ = ('ipver', 'src', 'dst', 'proto', 'sport', 'dport', 'ttl',
                 'tos', 'rwnd', 'vlans', 'ip_opts', 'tcp_opts', 'noise',
                 'seq', 'ack')

    def __init__(self, ipver, src, dst, proto, sport=0, dport=0, ttl=64,
                 tos=0, rwnd=65535, vlans=(), ip_opts=0, tcp_opts=0,
                 noise=False):
        self.ipver = ipver
        self.src = int(ipaddress.ip_address(src)) if isinstance(src, str) \
            else src
        self.dst = int(ipaddress.ip_address(dst)) if isinstance(dst, str) \
            else dst
        self.proto = proto
        self.sport = sport
        self.dport = dport
        self.ttl = ttl
        self.tos = tos              # Whole TOS / traffic class byte.
        self.rwnd = rwnd
        self.vlans = tuple(vlans)   # VLAN IDs (TPID 0x8100) or (TPID,
                                    # ID) pairs, outermost first.
        self.ip_opts = ip_opts      # IPv4 option bytes (multiple of 4).
        self.tcp_opts = tcp_opts    # TCP option bytes (0 or 12).
        self.noise = noise          # Must never match any event filter.
        self.seq = 1000
        self.ack = 0x5eed

    def reverse(self):
        """The opposite direction (for pure ACKs)."""
        return Flow(self.ipver, self.dst, self.src, self.proto, self.dport,
                    self.sport, self.ttl, 0, self.rwnd, self.vlans,
                    noise=self.noise)

    def group5(self):
        """The 5-tuple group as tpm-replay prints it."""
        v6 = self.ipver == 6
        return {'nw_proto': self.proto,
                'ipv6_src' if v6 else 'nw_src': fmt_addr(self.ipver,
                                                         self.src),
                'ipv6_dst' if v6 else 'nw_dst': fmt_addr(self.ipver,
                                                         self.dst),
                'tp_src': self.sport, 'tp_dst': self.dport}


class Pkt:
    """One frame: 'kind' is 'ip', 'arp' or 'lldp'."""

    __slots__ = ('ts', 'kind', 'ipver', 'src', 'dst', 'proto', 'sport',
                 'dport', 'payload', 'ttl', 'tos', 'rwnd', 'vlans',
                 'ip_opts', 'tcp_opts', 'flags', 'seq', 'noise', 'ack',
                 'syn_opt')

    def offsets(self):
        """(L3 offset, L4 offset, L4 header length) of an IP packet."""
        l3 = 14 + 4 * len(self.vlans)
        l4 = l3 + (20 + self.ip_opts if self.ipver == 4 else 40)
        if self.proto == TCP:
            hlen = 20 + self.tcp_opts + (8 if self.syn_opt else 0)
        else:
            hlen = 8                # UDP, ICMP echo.
        return l3, l4, hlen

    def parse_outcome(self, snaplen):
        """What libtpm's parser must make of this frame captured at
        'snaplen' bytes (docs/operations.md): a tpm-replay --stats counter
        name, or None for a frame parsed whole."""
        wire = self.record()[R_BYTES]
        cap = min(wire, snaplen)
        l3 = 14 + 4 * len(self.vlans)
        if len(self.vlans) > VLAN_MAX:
            return 'too_many_tags'
        if cap < l3:
            return 'l2_truncated'
        if self.kind != 'ip':
            return 'non_ip'
        _, l4, hlen = self.offsets()
        if cap < l4:
            return 'l3_truncated'
        if cap - l4 < (2 if self.proto == ICMP else 4):
            return 'ports_not_captured'
        if cap - l4 < min(hlen, 20):
            return 'l4_truncated'
        return None

    def record(self, snaplen=None):
        """The ground-truth view of this packet, derived from the fields
        (not from the frame bytes: read_pcap() derives the same tuple from
        the bytes, and --verify checks they agree), as captured at
        'snaplen' bytes (None: whole)."""
        if snaplen is not None:
            whole = self.record()
            cap = min(whole[R_BYTES], snaplen)
            outcome = self.parse_outcome(snaplen)
            if outcome not in (None, 'l4_truncated'):
                return (self.ts, 0, 0, 0, 0, 0, 0, whole[R_BYTES], 0, 0, 0,
                        0) + NO_TCP
            _, l4, hlen = self.offsets()
            if outcome is None and self.proto == TCP and cap - l4 < hlen \
                    and self.syn_opt and self.flags & SYN:
                # SYN options cut: each one read only whole (MSS at bytes
                # 20-23, window scale at 25-27).
                r = list(whole)
                r[R_MSS] = r[R_MSS] if cap - l4 >= 24 else 0
                r[R_WSCALE] = r[R_WSCALE] if cap - l4 >= 28 else -1
                return tuple(r)
            if outcome is None or self.proto != TCP:
                return whole
            # TCP header cut: each field as far as captured.
            _, l4, hlen = self.offsets()
            avail = cap - l4
            r = list(whole)
            if avail < 13:
                r[R_VOLUME] = max(0, hlen + self.payload - 20)
            r[R_SEQ] = r[R_SEQ] if avail >= 8 else 0
            r[R_ACK] = r[R_ACK] if avail >= 12 else 0
            r[R_FLAGS] = r[R_FLAGS] if avail >= 14 else 0
            r[R_RWND] = r[R_RWND] if avail >= 16 else 0
            r[R_WSCALE], r[R_MSS] = -1, 0   # Options: beyond 20 bytes.
            return tuple(r)
        if self.kind != 'ip':
            size = 28 if self.kind == 'arp' else LLDP_LEN
            wire = max(MIN_FRAME, 14 + 4 * len(self.vlans) + size)
            return (self.ts, 0, 0, 0, 0, 0, 0, wire, 0, 0, 0, 0) + NO_TCP
        if self.proto == TCP:
            l4 = 20 + self.tcp_opts + (8 if self.syn_opt else 0)
        else:
            l4 = 8                  # UDP, ICMP echo.
        if self.ipver == 4:
            iplen = 20 + self.ip_opts + l4 + self.payload
        else:
            iplen = 40 + l4 + self.payload
        wire = max(MIN_FRAME, 14 + 4 * len(self.vlans) + iplen)
        volume = self.payload if self.proto in (TCP, UDP) \
            else l4 + self.payload
        tcp = NO_TCP
        if self.proto == TCP:
            wscale, mss = -1, 0
            if self.syn_opt and self.flags & SYN:
                mss = self.syn_opt[0]
                if self.syn_opt[1] is not None:
                    wscale = min(self.syn_opt[1], 14)
            tcp = (self.seq & 0xffffffff, self.ack & 0xffffffff, self.flags,
                   wscale, mss)
        return (self.ts, self.ipver, self.proto, self.src, self.dst,
                self.sport, self.dport, wire, volume, self.ttl,
                1 if self.tos & 3 == 3 else 0,
                self.rwnd if self.proto == TCP else 0) + tcp


# Indexes into a record tuple: what a packet's bytes say.  R_RWND is the
# raw window; R_WSCALE and R_MSS are the options of a SYN (-1 and 0 when
# absent or not a SYN).
(R_TS, R_VER, R_PROTO, R_SRC, R_DST, R_SPORT, R_DPORT, R_BYTES, R_VOLUME,
 R_TTL, R_ECN, R_RWND, R_SEQ, R_ACK, R_FLAGS, R_WSCALE, R_MSS) = range(17)
RECORD_FIELDS = ('ts', 'ipver', 'proto', 'src', 'dst', 'sport', 'dport',
                 'bytes', 'volume', 'ttl', 'ecn', 'rwnd', 'seq', 'ack',
                 'flags', 'wscale', 'mss')
NO_TCP = (0, 0, 0, -1, 0)
FIN, SYN, ACK = 0x01, 0x02, 0x10
# compute_truth() appends the per-flow state variables to each record.
(S_RWND, S_IS_LOST, S_IS_BURST, S_RTT, S_SEQ, S_ACK, S_DUP) = range(17, 24)


# ----------------------------------------------------------------------
# Frame construction and the pcap writer.

def inet_csum(data):
    """RFC 1071 checksum of 'data' (0 when a filled-in checksum is
    right)."""
    if len(data) & 1:
        data += b'\0'
    s = sum(struct.unpack('!%dH' % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


LLDP_TLVS = (b'\x02\x07\x04' + MAC_A + b'\x04\x07\x03' + MAC_A
             + b'\x06\x02\x00\x78' + b'\x00\x00')
LLDP_LEN = len(LLDP_TLVS)


def eth_header(dst, src, vlans, ethertype):
    h = dst + src
    for tag in vlans:
        tpid, vid = tag if isinstance(tag, tuple) else (ETH_VLAN, tag)
        h += struct.pack('!HH', tpid, vid)
    return h + struct.pack('!H', ethertype)


def build_headers(p, ipid):
    """Returns (headers, rest): the frame is 'headers' followed by 'rest'
    zero bytes (L4 payload, then Ethernet padding).  L4 checksums are
    computed over the headers only: an all-zero payload adds nothing to a
    ones'-complement sum."""
    if p.kind == 'arp':
        body = struct.pack('!HHBBH6s4s6s4s', 1, ETH_IP4, 6, 4, 1, MAC_A,
                           p.src.to_bytes(4, 'big'), b'\0' * 6,
                           p.dst.to_bytes(4, 'big'))
        hdr = eth_header(MAC_BCAST, MAC_A, p.vlans, ETH_ARP) + body
        return hdr, max(0, MIN_FRAME - len(hdr))
    if p.kind == 'lldp':
        hdr = eth_header(MAC_LLDP, MAC_A, p.vlans, ETH_LLDP) + LLDP_TLVS
        return hdr, max(0, MIN_FRAME - len(hdr))

    v6 = p.ipver == 6
    alen = 16 if v6 else 4
    src = p.src.to_bytes(alen, 'big')
    dst = p.dst.to_bytes(alen, 'big')
    if p.proto == TCP:
        opts = b''
        if p.syn_opt:               # MSS, then NOP + window scale or NOPs.
            mss, ws = p.syn_opt
            opts += struct.pack('!BBH', 2, 4, mss)
            opts += b'\x01\x01\x01\x01' if ws is None else \
                struct.pack('!BBBB', 1, 3, 3, ws)
        if p.tcp_opts:
            opts += b'\x01\x01\x08\x0a' + struct.pack('!II', p.seq & 0xffff,
                                                      ipid)
        doff = (20 + len(opts)) // 4
        l4 = struct.pack('!HHIIBBHHH', p.sport, p.dport, p.seq & 0xffffffff,
                         p.ack & 0xffffffff, doff << 4, p.flags, p.rwnd, 0,
                         0) + opts
    elif p.proto == UDP:
        l4 = struct.pack('!HHHH', p.sport, p.dport, 8 + p.payload, 0)
    else:                           # ICMP echo request (type 8, code 0).
        l4 = struct.pack('!BBHHH', p.sport, p.dport, 0, ipid & 0xffff, 1)
    l4len = len(l4) + p.payload
    if p.proto == ICMP and not v6:
        csum = inet_csum(l4)
    elif v6:
        csum = inet_csum(src + dst + struct.pack('!IxxxB', l4len, p.proto)
                         + l4)
    else:
        csum = inet_csum(src + dst + struct.pack('!xBH', p.proto, l4len)
                         + l4)
    if p.proto == UDP and csum == 0:
        csum = 0xffff
    coff = 16 if p.proto == TCP else 6 if p.proto == UDP else 2
    l4 = l4[:coff] + struct.pack('!H', csum) + l4[coff + 2:]

    if v6:
        ip = struct.pack('!IHBB', (6 << 28) | (p.tos << 20) | (ipid & 0xfffff),
                         l4len, p.proto, p.ttl) + src + dst
        ethertype = ETH_IP6
    else:
        ihl = 5 + p.ip_opts // 4
        ip = struct.pack('!BBHHHBBH', 0x40 | ihl, p.tos, ihl * 4 + l4len,
                         ipid & 0xffff, 0x4000, p.ttl, p.proto, 0) + src + dst
        ip += b'\x94\x04\x00\x00' * (p.ip_opts // 4)   # Router Alert.
        ip = ip[:10] + struct.pack('!H', inet_csum(ip)) + ip[12:]
        ethertype = ETH_IP4
    hdr = eth_header(MAC_B, MAC_A, p.vlans, ethertype) + ip + l4
    return hdr, max(p.payload, MIN_FRAME - len(hdr))


def write_pcap(path, pkts, snaplen):
    """Writes 'pkts' (sorted by time) as a nanosecond pcap, truncating
    frames to 'snaplen' bytes (orig_len keeps the wire length)."""
    out = bytearray(struct.pack('<IHHiIII', PCAP_MAGIC_NS, 2, 4, 0, 0,
                                snaplen, 1))
    zeros = bytes(65536)
    for i, p in enumerate(pkts):
        hdr, rest = build_headers(p, i)
        wire = len(hdr) + rest
        cap = min(wire, snaplen)
        out += struct.pack('<IIII', p.ts // 10**9, p.ts % 10**9, cap, wire)
        if cap <= len(hdr):
            out += hdr[:cap]
        else:
            out += hdr
            out += zeros[:cap - len(hdr)]
    with open(path, 'wb') as f:
        f.write(out)


def parse_counters(pkts, snaplen):
    """The parser's counters tpm-replay --stats must show for 'pkts'
    captured at 'snaplen' bytes, from the packet fields."""
    c = dict.fromkeys(('non_ip', 'l2_truncated', 'too_many_tags',
                       'l3_truncated', 'bad_ip_header', 'ports_not_captured',
                       'l4_truncated', 'ip_len_from_frame'), 0)
    for p in pkts:
        outcome = p.parse_outcome(snaplen)
        if outcome:
            c[outcome] += 1
    c['not_parsed'] = sum(v for k, v in c.items()
                          if k not in ('l4_truncated', 'ip_len_from_frame'))
    c['packets'] = len(pkts)
    return c


# ----------------------------------------------------------------------
# Independent pcap reader (for --verify and --truth).

def read_pcap(path, errors):
    """Parses a pcap into record tuples, straight from the bytes, with the
    definitions of the variables given in the module docstring.  Appends a
    message to 'errors' for every malformed frame (bad checksum, length
    mismatch)."""
    with open(path, 'rb') as f:
        data = f.read()
    magic_le = struct.unpack_from('<I', data, 0)[0]
    magic_be = struct.unpack_from('>I', data, 0)[0]
    if magic_le in (PCAP_MAGIC_NS, PCAP_MAGIC_US):
        endian, magic = '<', magic_le
    elif magic_be in (PCAP_MAGIC_NS, PCAP_MAGIC_US):
        endian, magic = '>', magic_be
    else:
        raise ValueError('%s: not a pcap file' % path)
    scale = 1 if magic == PCAP_MAGIC_NS else 1000
    linktype = struct.unpack_from(endian + 'I', data, 20)[0]
    if linktype != 1:
        raise ValueError('%s: link type %d, not Ethernet' % (path, linktype))
    recs = []
    off = 24
    hdr = struct.Struct(endian + 'IIII')
    while off < len(data):
        sec, frac, caplen, wire = hdr.unpack_from(data, off)
        off += 16
        frame = data[off:off + caplen]
        off += caplen
        ts = sec * 10**9 + frac * scale
        recs.append(parse_frame(frame, wire, ts, len(recs) + 1, errors))
    return recs


def parse_frame(frame, wire, ts, num, errors):
    def err(msg):
        errors.append('frame %d: %s' % (num, msg))

    non_ip = (ts, 0, 0, 0, 0, 0, 0, wire, 0, 0, 0, 0) + NO_TCP
    if len(frame) < 14:
        return non_ip
    ethertype = struct.unpack_from('!H', frame, 12)[0]
    o = 14
    tags = 0
    while ethertype in VLAN_TPIDS:
        if tags == VLAN_MAX or len(frame) < o + 4:
            return non_ip           # Not monitored.
        ethertype = struct.unpack_from('!H', frame, o + 2)[0]
        o += 4
        tags += 1
    if ethertype == ETH_IP4:
        if len(frame) < o + 20 or len(frame) < o + (frame[o] & 15) * 4:
            return non_ip           # IP header cut: not monitored.
        vihl, tos, total, _, _, ttl, proto, _ = \
            struct.unpack_from('!BBHHHBBH', frame, o)
        ihl = (vihl & 15) * 4
        if vihl >> 4 != 4 or ihl < 20:
            err('bad IPv4 version/IHL')
        if inet_csum(frame[o:o + ihl]) != 0:
            err('bad IPv4 header checksum')
        src, dst = struct.unpack_from('!II', frame, o + 12)
        l4, l4len, ip_end = o + ihl, total - ihl, o + total
        pseudo = frame[o + 12:o + 20] + struct.pack('!xBH', proto, l4len)
    elif ethertype == ETH_IP6:
        if len(frame) < o + 40:
            return non_ip
        vtf, l4len, proto, ttl = struct.unpack_from('!IHBB', frame, o)
        if vtf >> 28 != 6:
            err('bad IPv6 version')
        tos = (vtf >> 20) & 0xff
        src = int.from_bytes(frame[o + 8:o + 24], 'big')
        dst = int.from_bytes(frame[o + 24:o + 40], 'big')
        l4, ip_end = o + 40, o + 40 + l4len
        pseudo = frame[o + 8:o + 40] + struct.pack('!IxxxB', l4len, proto)
    else:
        if wire < MIN_FRAME:
            err('runt frame')
        return non_ip

    if wire != max(MIN_FRAME, ip_end):
        err('wire length %d, but IP ends at %d' % (wire, ip_end))
    sport = dport = rwnd = 0
    tcp = NO_TCP
    avail = len(frame) - l4         # L4 bytes captured.
    if proto in (TCP, UDP, ICMP) and avail < (2 if proto == ICMP else 4):
        return non_ip               # Ports not captured: not monitored.

    def field(fmt, off, absent=0):
        """A TCP/UDP header field at 'off', or 'absent' if not
        captured."""
        n = struct.calcsize(fmt)
        return struct.unpack_from(fmt, frame, l4 + off)[0] \
            if avail >= off + n else absent

    if proto == TCP:
        sport, dport = struct.unpack_from('!HH', frame, l4)
        seq, ack = field('!I', 4), field('!I', 8)
        doff = field('!B', 12, 5 << 4)     # Not captured: 20 bytes.
        flags, rwnd = field('!B', 13), field('!H', 14)
        volume = max(0, l4len - (doff >> 4) * 4) if avail < 13 \
            else l4len - (doff >> 4) * 4
        wscale, mss = -1, 0
        if flags & SYN:
            hlen = (doff >> 4) * 4
            opts = frame[l4 + 20:l4 + hlen]
            cut = len(opts) < hlen - 20
            k = 0
            while k < len(opts) and opts[k] != 0:
                if opts[k] == 1:
                    k += 1
                    continue
                if k + 1 >= len(opts) or opts[k + 1] < 2 \
                        or k + opts[k + 1] > len(opts):
                    if not cut:
                        err('malformed TCP option')
                    break
                if opts[k] == 2 and opts[k + 1] == 4:
                    mss = struct.unpack_from('!H', opts, k + 2)[0]
                elif opts[k] == 3 and opts[k + 1] == 3:
                    wscale = min(opts[k + 2], 14)
                k += opts[k + 1]
        tcp = (seq, ack, flags, wscale, mss)
    elif proto == UDP:
        sport, dport = struct.unpack_from('!HH', frame, l4)
        ulen = field('!H', 4, l4len)
        if ulen != l4len:
            err('UDP length %d != IP payload %d' % (ulen, l4len))
        volume = ulen - 8
    else:
        if proto == ICMP:
            sport, dport = frame[l4], frame[l4 + 1]
        volume = l4len
    # Verify the L4 checksum when the whole segment was captured.
    if ip_end <= len(frame) and proto in (TCP, UDP, ICMP):
        seg = frame[l4:ip_end]
        if proto == ICMP:
            ok = inet_csum(seg) == 0
        elif proto == UDP and seg[6:8] == b'\0\0':
            ok = True               # No checksum.
        else:
            ok = inet_csum(pseudo + seg) == 0
        if not ok:
            err('bad L4 checksum')
    ver = 4 if ethertype == ETH_IP4 else 6
    return (ts, ver, proto, src, dst, sport, dport, wire, volume, ttl,
            1 if tos & 3 == 3 else 0, rwnd) + tcp


# ----------------------------------------------------------------------
# The event language (the subset the ground truth evaluates).

CLAUSE_RE = re.compile(r'(?:^|\s)(filter|predicate|group|interval)=')
TIME_UNITS = {'ns': 1, 'us': 10**3, 'ms': 10**6, 's': 10**9}
NUM_UNITS = {'KB': 10**3, 'MB': 10**6, 'GB': 10**9, 'KiB': 2**10,
             'MiB': 2**20, 'GiB': 2**30, 'ns': 1, 'us': 10**3, 'ms': 10**6,
             's': 10**9}
TOKEN_RE = re.compile(
    r'\s*(?:(?P<num>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)'
    r'(?P<unit>KiB|MiB|GiB|KB|MB|GB|%|ns|us|ms|s)?(?![A-Za-z0-9_])'
    r'|(?P<id>[A-Za-z_][A-Za-z0-9_]*)'
    r'|(?P<op><=|>=|==|!=|&&|\|\||[-+*/()<>!]))')
AGGS = ('sum', 'count', 'avg', 'min', 'max', 'stddev')
VARS = {'packets': None, 'bytes': R_BYTES, 'volume': R_VOLUME, 'ttl': R_TTL,
        'ecn': R_ECN, 'rwnd': S_RWND, 'is_lost': S_IS_LOST,
        'is_burst': S_IS_BURST, 'rtt': S_RTT, 'seq': S_SEQ, 'ack': S_ACK,
        'dup': S_DUP}
# Variables that need per-flow state (see state_vars()).
STATE_VARS = ('rwnd', 'is_lost', 'is_burst', 'rtt', 'seq', 'ack', 'dup')
BURST_GAP_NS = 20_000           # libtpm's default burst_gap_ns.
DUP_MSS = 1460                  # dup's increment without an MSS option.
COMPARISONS = ('<', '<=', '>', '>=', '==', '!=')
PROTO_SHORTHANDS = {'ip': (4, None), 'ipv6': (6, None), 'tcp': (4, TCP),
                    'udp': (4, UDP), 'icmp': (4, ICMP), 'sctp': (4, 132),
                    'tcp6': (6, TCP), 'udp6': (6, UDP), 'icmp6': (6, 58),
                    'sctp6': (6, 132)}
# Group fields in output order; addresses are 'src'/'dst' here and get
# their nw_/ipv6_ name from the packet's IP version.
GROUP_ORDER = ('nw_proto', 'src', 'dst', 'tp_src', 'tp_dst')


class Event:
    """A parsed event: name, filter (match function), group fields,
    interval and predicate AST.  'unsupported' names what the ground truth
    cannot evaluate (nothing, now); 'needs_state' tells whether the
    predicate uses a variable that needs per-flow state."""

    def __init__(self, name, text):
        self.name = name
        self.text = text
        self.unsupported = None
        self.needs_state = False
        clauses = {'filter': '', 'predicate': None, 'group': '5tuple',
                   'interval': '10ms'}
        marks = list(CLAUSE_RE.finditer(text))
        if not marks or text[:marks[0].start()].strip():
            raise ValueError('%s: expected clauses' % name)
        for m, nxt in zip(marks, marks[1:] + [None]):
            end = nxt.start() if nxt else len(text)
            clauses[m.group(1)] = text[m.end():end].strip()
        if clauses['predicate'] is None:
            raise ValueError('%s: no predicate' % name)
        self.match = parse_filter(clauses['filter'])
        self.group = parse_group(clauses['group'])
        self.interval_ns = parse_time(clauses['interval'])
        self.pred = PredParser(clauses['predicate'], self).parse()
        self.value_node = leftmost_comparison(self.pred)
        self.threshold = None
        if self.value_node is not self.pred:
            cmp = find_comparison(self.pred)
            if cmp[3][0] == 'num':
                self.threshold = cmp[3][1]
        self.aggs = []
        collect_aggs(self.pred, self.aggs)
        self.terms = [(node, compile_term(node[2]) if node[2] else None)
                      for node in self.aggs]


def parse_event_line(line):
    """Returns an Event, or None for blank and comment lines."""
    line = line.strip()
    if not line or line.startswith('#'):
        return None
    name, _, text = line.partition(' ')
    if not re.fullmatch(r'[A-Za-z0-9_.-]{1,63}', name):
        raise ValueError('bad event name %r' % name)
    return Event(name, text.strip())


def parse_event_file(path):
    with open(path) as f:
        return [e for e in map(parse_event_line, f) if e]


def parse_time(s):
    m = re.fullmatch(r'(\d+)(ns|us|ms|s)', s.strip())
    if not m:
        raise ValueError('bad time %r' % s)
    return int(m.group(1)) * TIME_UNITS[m.group(2)]


def parse_filter(text):
    """Returns a function record -> bool."""
    ipver = proto = None
    addr = {}                       # 'src'/'dst' -> (ver, value, mask)
    ports = {}                      # R_SPORT/R_DPORT -> (value, mask)
    for tok in filter(None, (t.strip() for t in text.split(','))):
        key, eq, val = tok.partition('=')
        if not eq:
            if tok == 'any':
                continue
            ipver, proto = PROTO_SHORTHANDS[tok]
        elif key in ('nw_src', 'nw_dst', 'ipv6_src', 'ipv6_dst'):
            net = ipaddress.ip_network(val, strict=False)
            ver = 4 if key.startswith('nw') else 6
            assert net.version == ver, tok
            ipver = ver
            addr[key.split('_')[1]] = (ver, int(net.network_address),
                                       int(net.netmask))
        elif key in ('tp_src', 'tp_dst'):
            v, _, m = val.partition('/')
            ports[R_SPORT if key == 'tp_src' else R_DPORT] = \
                (int(v, 0), int(m, 0) if m else 0xffff)
        elif key == 'nw_proto':
            proto = int(val, 0)
        elif key == 'dl_type':
            ipver = {0x0800: 4, 0x86dd: 6}[int(val, 0)]
        else:
            raise ValueError('unknown filter field %r' % key)
    checks = []
    if ipver:
        checks.append(lambda r: r[R_VER] == ipver)
    if proto is not None:
        checks.append(lambda r: r[R_PROTO] == proto)
    for side, (ver, value, mask) in addr.items():
        idx = R_SRC if side == 'src' else R_DST
        checks.append(lambda r, i=idx, v=value, m=mask: r[i] & m == v)
    for idx, (value, mask) in ports.items():
        checks.append(lambda r, i=idx, v=value & mask, m=mask:
                      r[i] & m == v)

    def match(r):
        return r[R_VER] != 0 and all(c(r) for c in checks)
    return match


def parse_group(text):
    """Returns [(field, prefix or None)] in output order."""
    if text.strip() == '5tuple':
        return [(f, None) for f in GROUP_ORDER]
    fields = {}
    for tok in text.split(','):
        name, _, plen = tok.strip().partition('/')
        field = {'nw_src': 'src', 'nw_dst': 'dst', 'ipv6_src': 'src',
                 'ipv6_dst': 'dst'}.get(name, name)
        if field not in GROUP_ORDER:
            raise ValueError('unknown group field %r' % name)
        fields[field] = int(plen) if plen else None
    return [(f, fields[f]) for f in GROUP_ORDER if f in fields]


_addr_cache = {}


def fmt_addr(ver, value, plen=None):
    """An address as tpm-replay prints it: masked, with "/len" only when
    shorter than the full address."""
    key = (ver, value, plen)
    s = _addr_cache.get(key)
    if s is None:
        bits = 32 if ver == 4 else 128
        if plen is None or plen >= bits:
            s = str(ipaddress.ip_address(value) if ver == 4
                    else ipaddress.IPv6Address(value))
        else:
            mask = ((1 << plen) - 1) << (bits - plen)
            a = value & mask
            s = '%s/%d' % (ipaddress.IPv4Address(a) if ver == 4
                           else ipaddress.IPv6Address(a), plen)
        _addr_cache[key] = s
    return s


def group_key(group, r):
    """The group of record 'r' as a tuple of (json key, value) pairs.  An
    address of prefix length 0 selects no bit, so it is no field of the
    group (a catch-all group prints as {})."""
    out = []
    v6 = r[R_VER] == 6
    for field, plen in group:
        if field == 'nw_proto':
            out.append(('nw_proto', r[R_PROTO]))
        elif field in ('src', 'dst') and plen == 0:
            continue
        elif field in ('src', 'dst'):
            name = ('ipv6_' if v6 else 'nw_') + field
            out.append((name, fmt_addr(r[R_VER], r[R_SRC if field == 'src'
                                                     else R_DST], plen)))
        else:
            out.append((field, r[R_SPORT if field == 'tp_src'
                                 else R_DPORT]))
    return tuple(out)


class PredParser:
    """Recursive descent, C precedence: || < && < == != < < <= > >= <
    + - < * / < unary ! -.  Nodes: ('num', v), ('var', name),
    ('agg', fn, term|None), ('prev', a), ('neg', a), ('not', a),
    ('bin', op, a, b).  Outside an aggregate, a bare variable V is
    ('agg', 'last', ('var', V)) (its last value in the interval) and
    V_lastepoch is ('prev', ('agg', 'last', ('var', V)))."""

    LEVELS = (('||',), ('&&',), ('==', '!='), ('<', '<=', '>', '>='),
              ('+', '-'), ('*', '/'))

    def __init__(self, text, event):
        self.text = text
        self.event = event
        self.toks = []
        self.in_term = False        # Inside an aggregate's term.
        pos = 0
        while pos < len(text):
            m = TOKEN_RE.match(text, pos)
            if not m or m.end() == pos:
                if text[pos:].strip() == '':
                    break
                raise ValueError('%s: cannot parse predicate at %r'
                                 % (event.name, text[pos:]))
            pos = m.end()
            if m.group('num'):
                lit, unit = m.group('num'), m.group('unit')
                v = int(lit) if lit.isdigit() else float(lit)
                if unit == '%':
                    v = v / 100
                elif unit:
                    v = v * NUM_UNITS[unit]
                self.toks.append(('num', v))
            elif m.group('id'):
                self.toks.append(('id', m.group('id')))
            else:
                self.toks.append(('op', m.group('op')))
        self.i = 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self, op=None):
        t = self.peek()
        if op is not None and t != ('op', op):
            raise ValueError('%s: expected %r in predicate %r'
                             % (self.event.name, op, self.text))
        self.i += 1
        return t

    def parse(self):
        e = self.binary(0)
        if self.i != len(self.toks):
            raise ValueError('%s: trailing tokens in %r'
                             % (self.event.name, self.text))
        return e

    def binary(self, level):
        if level == len(self.LEVELS):
            return self.unary()
        a = self.binary(level + 1)
        while self.peek()[0] == 'op' and self.peek()[1] in self.LEVELS[level]:
            op = self.take()[1]
            a = ('bin', op, a, self.binary(level + 1))
        return a

    def unary(self):
        kind, v = self.peek()
        if (kind, v) == ('op', '!'):
            self.take()
            return ('not', self.unary())
        if (kind, v) == ('op', '-'):
            self.take()
            return ('neg', self.unary())
        if (kind, v) == ('op', '('):
            self.take()
            e = self.binary(0)
            self.take(')')
            return e
        if kind == 'num':
            self.take()
            return ('num', v)
        if kind == 'id':
            self.take()
            if v in AGGS or v == 'prev':
                if self.in_term:
                    raise ValueError('%s: %s() inside an aggregate'
                                     % (self.event.name, v))
                self.take('(')
                arg = None
                self.in_term = v != 'prev'
                if self.peek() != ('op', ')'):
                    arg = self.binary(0)
                self.in_term = False
                self.take(')')
                if v == 'prev':
                    return ('prev', arg)
                if arg is None and v != 'count':
                    raise ValueError('%s() needs a term' % v)
                return ('agg', v, arg)
            base = v[:-len('_lastepoch')] if v.endswith('_lastepoch') else v
            if base not in VARS:
                raise ValueError('%s: unknown variable %r'
                                 % (self.event.name, v))
            if base in STATE_VARS:
                self.event.needs_state = True
            if self.in_term:
                if base != v:
                    raise ValueError('%s: %s inside an aggregate'
                                     % (self.event.name, v))
                return ('var', v)
            last = ('agg', 'last', ('var', base))
            return ('prev', last) if base != v else last
        raise ValueError('%s: unexpected %r in predicate %r'
                         % (self.event.name, v, self.text))


def find_comparison(node):
    """The leftmost comparison node (pre-order, left first, not inside
    aggregate terms), or None."""
    if node[0] == 'bin':
        if node[1] in COMPARISONS:
            return node
        return find_comparison(node[2]) or find_comparison(node[3])
    if node[0] in ('not', 'neg'):
        return find_comparison(node[1])
    return None


def leftmost_comparison(pred):
    cmp = find_comparison(pred)
    return cmp[2] if cmp else pred


def collect_aggs(node, out):
    if node[0] == 'agg':
        if node not in out:
            out.append(node)
    elif node[0] == 'bin':
        collect_aggs(node[2], out)
        collect_aggs(node[3], out)
    elif node[0] in ('not', 'neg', 'prev'):
        if node[1] is not None:
            collect_aggs(node[1], out)


def div(a, b):
    return a / b if b else 0


BINOPS = {
    '+': lambda a, b: a + b, '-': lambda a, b: a - b,
    '*': lambda a, b: a * b, '/': div,
    '<': lambda a, b: int(a < b), '<=': lambda a, b: int(a <= b),
    '>': lambda a, b: int(a > b), '>=': lambda a, b: int(a >= b),
    '==': lambda a, b: int(a == b), '!=': lambda a, b: int(a != b),
    '&&': lambda a, b: int(bool(a) and bool(b)),
    '||': lambda a, b: int(bool(a) or bool(b)),
}


def compile_term(node):
    """Compiles a per-packet term into a function record -> number."""
    kind = node[0]
    if kind == 'num':
        v = node[1]
        return lambda r: v
    if kind == 'var':
        idx = VARS.get(node[1])
        if node[1] == 'packets':
            return lambda r: 1
        return lambda r: r[idx]
    if kind == 'neg':
        a = compile_term(node[1])
        return lambda r: -a(r)
    if kind == 'not':
        a = compile_term(node[1])
        return lambda r: int(not a(r))
    if kind == 'bin':
        a, b, op = compile_term(node[2]), compile_term(node[3]), \
            BINOPS[node[1]]
        return lambda r: op(a(r), b(r))
    raise ValueError('aggregate inside a per-packet term')


def aggregate(fn, values):
    """Aggregate 'fn' over the per-packet term values of one group."""
    n = len(values)
    if fn == 'count':               # count() has no term: values are None.
        return n if values[0] is None else sum(1 for v in values if v != 0)
    if fn == 'sum':
        return sum(values) if all(isinstance(v, int) for v in values) \
            else math.fsum(values)
    if fn == 'avg':
        return sum(values) / n
    if fn == 'min':
        return min(values)
    if fn == 'max':
        return max(values)
    if fn == 'stddev':
        mean = math.fsum(values) / n
        return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / n)
    if fn == 'last':                # Values are in time order.
        return values[-1]
    raise ValueError(fn)


class NearTie(Exception):
    pass


def uses_stddev(node):
    if node[0] == 'agg':
        return node[1] == 'stddev'
    if node[0] == 'bin':
        return uses_stddev(node[2]) or uses_stddev(node[3])
    if node[0] in ('not', 'neg', 'prev'):
        return uses_stddev(node[1])
    return False


def eval_pred(node, aggv, strict, prev=False):
    """Evaluates an interval-level expression; 'aggv' maps (aggregate
    node, under prev()) to their values.  With 'strict', raises NearTie
    for a comparison with a stddev() operand within 1e-7 relative of the
    other operand: libtpm may
    compute a standard deviation with different rounding (sum of squares),
    whereas sums, counts, min, max of integers and quotients of them are
    exact or correctly rounded in both implementations."""
    kind = node[0]
    if kind == 'num':
        return node[1]
    if kind == 'agg':
        return aggv[(node, prev)]
    if kind == 'prev':
        return eval_pred(node[1], aggv, strict, True)
    if kind == 'neg':
        return -eval_pred(node[1], aggv, strict, prev)
    if kind == 'not':
        return int(not eval_pred(node[1], aggv, strict, prev))
    if kind == 'bin':
        a = eval_pred(node[2], aggv, strict, prev)
        b = eval_pred(node[3], aggv, strict, prev)
        if (strict and node[1] in COMPARISONS
                and (uses_stddev(node[2]) or uses_stddev(node[3]))
                and abs(a - b) <= 1e-7 * max(abs(a), abs(b), 1)):
            raise NearTie('%r vs %r' % (a, b))
        return BINOPS[node[1]](a, b)
    raise ValueError('cannot evaluate %r outside a term' % (node,))


def unwrap(ref, raw):
    """The 64-bit sequence number nearest to 'ref' whose low 32 bits are
    'raw' (never below 0)."""
    d = (raw - ref) % 2**32
    if d >= 2**31:
        d -= 2**32
    return max(0, ref + d)


class Half:
    """The state of one direction of a connection (docs/event-language.md,
    "Variables that need per-flow state")."""

    def __init__(self):
        self.seen = False           # A packet of this direction was seen.
        self.last_ts = 0
        self.win = 0                # Raw window of the previous packet.
        self.snd_max = None         # Highest sequence end sent.
        self.ack = None             # Highest ack received for our data.
        self.sample = None          # (sequence end, time sent).
        self.rtt = 0
        self.dup = 0
        self.wscale = -1            # From our SYN.
        self.mss = 0


def state_vars(recs, events, gap_ns=BURST_GAP_NS):
    """Returns, for every record, the values (rwnd, is_lost, is_burst, rtt,
    seq, ack, dup) of the variables that need per-flow state, or None for
    records of flows without state.  A flow has state from its first
    packet that matches an event using one of them; a TCP flow shares it
    with the reverse direction, whose packets feed it from then on
    (whether or not they match an event themselves)."""
    filters = [ev.match for ev in events if ev.needs_state]
    conns = {}
    out = []
    for r in recs:
        if not filters or r[R_VER] == 0:
            out.append(None)
            continue
        fkey = (r[R_VER], r[R_PROTO], r[R_SRC], r[R_DST], r[R_SPORT],
                r[R_DPORT])
        tcp = r[R_PROTO] == TCP
        rkey = (r[R_VER], r[R_PROTO], r[R_DST], r[R_SRC], r[R_DPORT],
                r[R_SPORT]) if tcp else None
        conn = conns.get(fkey)
        if conn is None:
            if not any(m(r) for m in filters):
                out.append(None)
                continue
            conn = {fkey: Half()}
            conns[fkey] = conn
            if tcp:
                # A 5-tuple that is its own reverse (a connection to
                # itself) is one direction; the other half stays unseen.
                conn[rkey if rkey != fkey else None] = Half()
                conns[rkey] = conn
        h = conn[fkey]
        ts = r[R_TS]
        burst = int(h.seen and ts - h.last_ts <= gap_ns)
        h.last_ts = ts
        if not tcp:
            h.seen = True
            out.append((0, 0, burst, 0, 0, 0, 0))
            continue
        o = conn[rkey if rkey != fkey else None]
        flags = r[R_FLAGS]
        seglen = r[R_VOLUME] + bool(flags & SYN) + bool(flags & FIN)
        if flags & SYN:
            h.wscale, h.mss = r[R_WSCALE], r[R_MSS]
            # A SYN-ACK with the option: the SYN had it (RFC 7323 2.2),
            # with a shift unseen (-2) if it came before the state.
            if flags & ACK and r[R_WSCALE] >= 0 and o.wscale == -1:
                o.wscale = -2
        # Our data.
        if h.snd_max is not None:
            seq = unwrap(h.snd_max, r[R_SEQ])
        elif h.ack is not None:
            seq = unwrap(h.ack, r[R_SEQ])
        else:
            seq = r[R_SEQ]
        end = seq + seglen
        lost = seglen > 0 and h.snd_max is not None and seq < h.snd_max
        if lost:
            h.sample = None         # Karn's rule.
        elif seglen and h.sample is None:
            h.sample = (end, ts)
        h.snd_max = end if h.snd_max is None else max(h.snd_max, end)
        # The other direction's data, acknowledged by this packet.
        if flags & ACK:
            if o.snd_max is not None:
                a = unwrap(o.snd_max, r[R_ACK])
            elif o.ack is not None:
                a = unwrap(o.ack, r[R_ACK])
            else:
                a = r[R_ACK]
            if o.ack is None:
                o.ack = a
            elif a > o.ack:
                o.dup = max(0, o.dup - (a - o.ack))
                o.ack = a
            elif (a == o.ack and seglen == 0 and h.seen
                  and r[R_RWND] == h.win and o.snd_max is not None
                  and o.snd_max > a):
                o.dup = min(2**32 - 1, o.dup + (h.mss or DUP_MSS))
            if o.sample is not None and a >= o.sample[0]:
                o.rtt = max(0, ts - o.sample[1])
                o.sample = None
        h.win = r[R_RWND]
        h.seen = True
        shift = h.wscale if (not flags & SYN and h.wscale >= 0
                             and o.wscale != -1) else 0
        out.append((r[R_RWND] << shift, int(lost), burst, h.rtt, h.snd_max,
                    h.ack if h.ack is not None else 0, h.dup))
    return out


def compute_truth(recs, events, epoch_ns=EPOCH_NS, strict=False):
    """Returns {(event name, report epoch, group key): (fired, value)} for
    every (event, interval, group) that had at least one matching
    packet."""
    evals = {}
    states = state_vars(recs, events)
    recs = [r + (st or (0,) * 7) for r, st in zip(recs, states)]
    for ev in events:
        if ev.unsupported:
            raise ValueError('%s: ground truth cannot evaluate %s'
                             % (ev.name, ev.unsupported))
        if ev.interval_ns % epoch_ns:
            raise ValueError('%s: interval not a multiple of the epoch'
                             % ev.name)
        m = ev.interval_ns // epoch_ns
        span = m * epoch_ns
        match, group, terms = ev.match, ev.group, ev.terms
        buckets = {}
        for r in recs:
            if not match(r):
                continue
            k = (r[R_TS] // span, group_key(group, r))
            acc = buckets.get(k)
            if acc is None:
                acc = buckets[k] = [[] for _ in terms]
            for lst, (node, fn) in zip(acc, terms):
                lst.append(fn(r) if fn else None)
        for (interval, gkey), acc in buckets.items():
            aggv = {(node, False): aggregate(node[1], lst)
                    for (node, _), lst in zip(terms, acc)}
            # prev(): the previous interval of the group, 0 if it had no
            # packets.
            pacc = buckets.get((interval - 1, gkey))
            for i, (node, _) in enumerate(terms):
                aggv[(node, True)] = aggregate(node[1], pacc[i]) \
                    if pacc else 0
            fired = bool(eval_pred(ev.pred, aggv, strict))
            value = eval_pred(ev.value_node, aggv, False)
            evals[(ev.name, interval * m + m - 1, gkey)] = (fired, value)
    return evals


def census(recs, events):
    """What tpm-replay counts in the capture to size its tables from it
    (--stats "sizing", tpm/replay-sizing.h): the distinct flows of the
    monitored frames, the trigger instances (an event's distinct groups
    among the flows its filter matches; a group is of one IP version
    whatever its fields, as the monitor's group masks always keep it),
    and the flows matched by an event that needs per-flow state."""
    flows, groups, state = set(), set(), set()
    for r in recs:
        key = (r[R_VER], r[R_PROTO], r[R_SRC], r[R_DST], r[R_SPORT],
               r[R_DPORT])
        if not r[R_VER] or key in flows:
            continue
        flows.add(key)
        for ev in events:
            if ev.match(r):
                groups.add((ev.name, r[R_VER], group_key(ev.group, r)))
                if ev.needs_state:
                    state.add(key)
    return {'capture_flows': len(flows), 'capture_instances': len(groups),
            'capture_state_flows': len(state)}


def json_value(v):
    """Numbers as %.17g would show them: integral values without '.0'."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    return v


def report_lines(evals, events):
    """The expected tpm-replay output, sorted by epoch, event, group."""
    order = {ev.name: i for i, ev in enumerate(events)}
    rows = sorted((k for k, (fired, _) in evals.items() if fired),
                  key=lambda k: (k[1], order[k[0]], json.dumps(k[2])))
    return [json.dumps({'event': name, 'epoch': epoch, 'group': dict(g),
                        'value': json_value(evals[(name, epoch, g)][1])},
                       separators=(',', ':'))
            for name, epoch, g in rows]


# ----------------------------------------------------------------------
# Trace building.

class TraceBuilder:
    """Packets on a timeline of epochs relative to a random start.  Epoch
    'rel' r is absolute epoch base + r; epoch 0 begins at the (unaligned)
    start time."""

    def __init__(self, rng, epoch_ns=EPOCH_NS):
        self.rng = rng
        self.E = epoch_ns
        self.start = START_NS + rng.randrange(YEAR_NS)
        self.base = self.start // epoch_ns
        self.pkts = []
        self.checks = []            # (event, report epoch, group, fires)
        self.sentinel = True        # finish() appends one (see there).
        self.ports = set()

    def abs(self, rel):
        return self.base + rel

    def epoch_start(self, rel):
        """First nanosecond of epoch 'rel' (ignores the start time)."""
        return (self.base + rel) * self.E

    def span(self, rel):
        lo = self.epoch_start(rel)
        return max(lo, self.start), lo + self.E

    def rand_ts(self, rel, n):
        lo, hi = self.span(rel)
        return sorted(self.rng.randrange(lo, hi) for _ in range(n))

    def port(self):
        """A fresh ephemeral port (unique within the scenario)."""
        while True:
            p = self.rng.randrange(32768, 61000)
            if p not in self.ports:
                self.ports.add(p)
                return p

    def add(self, flow, ts, payload=0, flags=None, **over):
        """Appends one packet of 'flow'; 'over' overrides header fields
        (ttl, tos, rwnd, ip_opts, tcp_opts)."""
        p = Pkt()
        p.ts = ts
        p.kind = 'ip'
        for k in ('ipver', 'src', 'dst', 'proto', 'sport', 'dport', 'ttl',
                  'tos', 'rwnd', 'vlans', 'ip_opts', 'tcp_opts', 'noise',
                  'seq', 'ack'):
            setattr(p, k, getattr(flow, k))
        p.syn_opt = None
        for k, v in over.items():
            setattr(p, k, v)
        p.payload = payload
        p.flags = flags if flags is not None else \
            (0x18 if payload else 0x10)      # PSH|ACK or ACK.
        if p.ipver == 6:
            p.ip_opts = 0
        flow.seq += payload
        self.pkts.append(p)
        return p

    def add_l2(self, kind, ts, vlans=(), src='10.97.0.1', dst='10.97.0.2'):
        """An ARP request or LLDP frame (never IP, never matched)."""
        p = Pkt()
        p.ts, p.kind, p.vlans, p.noise = ts, kind, tuple(vlans), True
        p.syn_opt = None
        p.src = int(ipaddress.IPv4Address(src))
        p.dst = int(ipaddress.IPv4Address(dst))
        p.ipver = p.proto = p.sport = p.dport = p.payload = 0
        self.pkts.append(p)
        return p

    def send(self, flow, rel, volume, min_pkts=1, mss=MSS, **over):
        """Sends exactly 'volume' payload bytes of 'flow' at random times
        within epoch 'rel', in at least 'min_pkts' packets.  Returns the
        number of packets."""
        n = max(min_pkts, -(-volume // mss))
        if n * mss == volume or -(-volume // mss) < n:
            sizes = [volume // n + (i < volume % n) for i in range(n)]
        else:                       # Full segments and a remainder.
            sizes = [mss] * (n - 1) + [volume - mss * (n - 1)]
        for ts, size in zip(self.rand_ts(rel, n), sizes):
            self.add(flow, ts, size, **over)
        return n

    def acks(self, flow, rel, n):
        """'n' pure ACKs in the reverse direction of TCP 'flow'."""
        rev = flow.reverse()
        for ts in self.rand_ts(rel, n):
            self.add(rev, ts, 0)

    def check(self, event, epoch, group, fires):
        """Asserts later that 'event' fires (or not) for 'group' in the
        interval whose report epoch is absolute 'epoch'."""
        self.checks.append((event, epoch, tuple(group.items()), fires))

    def noise(self, n, rels):
        """'n' frames that no scenario's filter may match: ARP, LLDP,
        IPv4 and IPv6 TCP/UDP/ICMP between prefixes no event names, on
        ports 20000-29999."""
        rng = self.rng
        for _ in range(n):
            rel = rng.choice(rels)
            ts = self.rand_ts(rel, 1)[0]
            x = rng.random()
            vlans = (rng.choice((10, 20)),) if rng.random() < 0.1 else ()
            if x < 0.15:
                self.add_l2('arp', ts, vlans,
                            '10.99.1.%d' % rng.randrange(1, 255),
                            '10.99.1.%d' % rng.randrange(1, 255))
            elif x < 0.2:
                self.add_l2('lldp', ts, vlans)
            elif x < 0.8:
                src = rng.choice(('192.168.%d.%d', '172.16.%d.%d',
                                  '10.97.%d.%d')) % (rng.randrange(256),
                                                     rng.randrange(1, 255))
                dst = rng.choice(('192.168.%d.%d', '172.20.%d.%d',
                                  '10.97.%d.%d')) % (rng.randrange(256),
                                                     rng.randrange(1, 255))
                proto = rng.choice((TCP, UDP, ICMP))
                ports = (rng.randrange(20000, 30000),
                         rng.randrange(20000, 30000)) \
                    if proto != ICMP else (8, 0)
                f = Flow(4, src, dst, proto, *ports, vlans=vlans,
                         ttl=rng.randrange(1, 256), tos=rng.randrange(256),
                         noise=True)
                self.add(f, ts, rng.randrange(0, MSS))
            else:
                f = Flow(6, 'fd00:aa::%x' % rng.randrange(1, 65536),
                         'fd00:aa:%x::1' % rng.randrange(1, 65536),
                         rng.choice((TCP, UDP)), rng.randrange(20000, 30000),
                         rng.randrange(20000, 30000), vlans=vlans,
                         ttl=rng.randrange(256), noise=True)
                self.add(f, ts, rng.randrange(0, MSS))

    def finish(self, events, min_gap=3):
        """Sorts the packets, checks that the trace has a gap of at least
        'min_gap' empty epochs, and appends a sentinel: an IP packet that
        matches no filter, two epochs after the end of the last interval
        of every event, so that tpm-replay has swept every interval with
        traffic whether or not it flushes at the end of the file (a
        scenario whose events match every IP packet clears
        'self.sentinel': its last intervals are then evaluated only by
        tpm-replay's flush at the end of the capture)."""
        self.pkts.sort(key=lambda p: p.ts)
        epochs = sorted({p.ts // self.E for p in self.pkts})
        gap = max(b - a - 1 for a, b in zip(epochs, epochs[1:]))
        assert gap >= min_gap, 'no gap of %d empty epochs' % min_gap
        if not self.sentinel:
            return
        last = epochs[-1]
        end = max((last // m) * m + m - 1
                  for m in (ev.interval_ns // self.E for ev in events))
        self.add_l2('arp', (end + 1) * self.E + self.rng.randrange(self.E))
        sentinel = Flow(4, '198.51.100.1', '192.0.2.1', UDP, 9, 9, noise=True)
        self.add(sentinel, (end + 2) * self.E + self.rng.randrange(self.E), 0)


# ----------------------------------------------------------------------
# Scenarios.  Each takes (TraceBuilder, {name: Event}) and adds packets and
# near-threshold checks; the events come from SCENARIOS below.

def scen_heavy(tb, ev):
    """5-tuple heavy hitters among ~50 TCP and UDP flows to 10.99.1.0/24,
    plus a packet-count event on TCP port 80."""
    rng = tb.rng
    X = ev['heavy'].threshold
    N = ev['web'].threshold
    gaps = set(range(12, 16)) | set(range(22, 25))
    active = [e for e in range(32) if e not in gaps]
    for i in range(50):
        proto = TCP if i < 35 else UDP
        dport = rng.choice((80, 80, 443, 8080, 22)) if proto == TCP \
            else rng.choice((53, 5005, 5001))
        f = Flow(4, '10.99.0.%d' % (1 + i % 40),
                 '10.99.1.%d' % rng.randrange(1, 200), proto, tb.port(),
                 dport, ttl=rng.choice((62, 63, 64)),
                 vlans=(100,) if i % 10 == 7 else ())
        if i % 8 == 0:
            lo, hi, p = X + 5000, 3 * X, 0.7       # Clearly above.
        elif i % 3 == 0:
            lo, hi, p = X // 3, X * 3 // 2, 0.6    # Around the threshold.
        else:
            lo, hi, p = 200, X // 4, 0.5           # Clearly below.
        for e in active:
            if rng.random() < p:
                n = tb.send(f, e, rng.randint(lo, hi))
                if proto == TCP:
                    tb.acks(f, e, max(1, n // 4))

    # Exactly at the '>' threshold: silent; one byte above: fires.
    fx = Flow(4, '10.99.0.250', '10.99.1.250', TCP, 41000, 443)
    tb.send(fx, 3, X)
    tb.send(fx, 4, X + 1)
    tb.check('heavy', tb.abs(3), fx.group5(), False)
    tb.check('heavy', tb.abs(4), fx.group5(), True)
    # Epoch boundary: the last nanosecond of epoch 7 holds 1000 bytes that
    # make it fire; epoch 8 starts with a packet at its first nanosecond
    # and stays exactly at the threshold.
    b8 = tb.epoch_start(8)
    tb.send(fx, 7, X + 1 - 1000)
    tb.add(fx, b8 - 1, 1000)
    tb.add(fx, b8, 1000)
    tb.send(fx, 8, X - 1000)
    tb.check('heavy', tb.abs(7), fx.group5(), True)
    tb.check('heavy', tb.abs(8), fx.group5(), False)
    # count() >= N: exactly N packets fire, N - 1 do not.
    fw = Flow(4, '10.99.0.251', '10.99.1.251', TCP, 42000, 80)
    tb.send(fw, 6, N * 100, min_pkts=N)
    tb.send(fw, 9, (N - 1) * 100, min_pkts=N - 1)
    tb.check('web', tb.abs(6), fw.group5(), True)
    tb.check('web', tb.abs(9), fw.group5(), False)
    return active


def scen_agg(tb, ev):
    """Flows that are each small but whose /24 (and src/24-dst/24 pair)
    sums cross the thresholds."""
    rng = tb.rng
    T = ev['dst24'].threshold
    per_flow_max = 30000
    assert per_flow_max < T
    gaps = set(range(9, 13))
    active = [e for e in range(26) if e not in gaps]
    weights = {2: 10, 3: 6, 4: 4, 5: 2, 6: 1, 7: 1}
    nets = [n for n, w in weights.items() for _ in range(w)]
    for i in range(80):
        tcp = rng.random() < 0.6
        vlans = ((100,) if i % 10 == 3 else (100, 200) if i % 20 == 9
                 else ())
        f = Flow(4, '10.98.%d.%d' % (rng.randrange(1, 4),
                                     rng.randrange(1, 255)),
                 '10.99.%d.%d' % (rng.choice(nets), rng.randrange(1, 255)),
                 TCP if tcp else UDP, tb.port(),
                 rng.choice((80, 443, 8080) if tcp else (53, 123, 5353)),
                 vlans=vlans)
        for e in active:
            if rng.random() < 0.6:
                n = tb.send(f, e, rng.randint(2000, per_flow_max),
                            mss=MSS if tcp else rng.choice((500, 1000,
                                                            1400)))
                if tcp:
                    tb.acks(f, e, max(1, n // 3))

    # Ten flows into 10.99.9.0/24, none near the threshold alone: their
    # sum is exactly T in epoch 2 (silent) and T + 1 in epoch 3 (fires).
    flows = [Flow(4, '10.98.9.%d' % (i + 1), '10.99.9.%d' % (i + 1), TCP,
                  tb.port(), 80) for i in range(10)]
    for rel, total in ((2, T), (3, T + 1)):
        share = [total // 10] * 10
        share[-1] += total - sum(share)
        for f, v in zip(flows, share):
            assert v < T
            tb.send(f, rel, v)
    net = {'nw_dst': '10.99.9.0/24'}
    tb.check('dst24', tb.abs(2), net, False)
    tb.check('dst24', tb.abs(3), net, True)
    return active


def scen_interval(tb, ev):
    """Intervals of 50 ms (and 20 ms) over 10 ms epochs: sums span epochs
    and reports come only at interval-end epochs."""
    rng = tb.rng
    T = ev['win50'].threshold
    m = ev['win50'].interval_ns // tb.E
    k0 = next(r for r in range(1, m + 1) if tb.abs(r) % m == 0)

    def rel(i, j=0):                # Epoch j of interval i (after k0).
        return k0 + i * m + j

    def report(i):
        return tb.abs(rel(i, m - 1))
    # Interval 3 is empty, and so are two epochs inside interval 5.
    gaps = set(range(rel(3), rel(4))) | {rel(5, 1), rel(5, 2)}
    active = [e for e in range(rel(8)) if e not in gaps]

    for i in range(20):
        udp = i < 12
        f = Flow(4, '10.99.2.%d' % (i + 1), '10.99.3.%d' % (i % 7 + 1),
                 UDP if udp else TCP, tb.port(),
                 5000 + i % 3 if udp else 80)
        for e in active:
            if rng.random() < 0.7:
                if udp:
                    tb.send(f, e, rng.randint(10000, 2 * T // m),
                            mss=1000)
                else:
                    n = rng.randint(5, 45)
                    tb.send(f, e, n * 200, min_pkts=n)

    # A: below T in every epoch, above over the interval.
    fa = Flow(4, '10.99.2.100', '10.99.3.100', UDP, 6000, 6000)
    for j in range(m):
        tb.send(fa, rel(1, j), (T + 50000) // m)
    tb.check('win50', report(1), fa.group5(), True)
    # B: above T only across the boundary between intervals 1 and 2.
    fb = Flow(4, '10.99.2.101', '10.99.3.101', UDP, 6001, 6001)
    tb.send(fb, rel(1, m - 1), T * 2 // 3)
    tb.send(fb, rel(2, 0), T * 2 // 3)
    tb.check('win50', report(1), fb.group5(), False)
    tb.check('win50', report(2), fb.group5(), False)
    # C: exactly T in interval 4 (silent), T + 1 in interval 6 (fires).
    fc = Flow(4, '10.99.2.102', '10.99.3.102', UDP, 6002, 6002)
    for i, total in ((4, T), (6, T + 1)):
        for j, v in zip((0, 2, 4), (T // 3, T // 3, total - 2 * (T // 3))):
            tb.send(fc, rel(i, j), v)
    tb.check('win50', report(4), fc.group5(), False)
    tb.check('win50', report(6), fc.group5(), True)
    return active


def scen_ipv6(tb, ev):
    """TCP and UDP over IPv6 into three /64s of fd00:99::/48."""
    rng = tb.rng
    X = ev['v6flow'].threshold
    gaps = set(range(8, 12))
    active = [e for e in range(24) if e not in gaps]
    dst_nets = ['fd00:99::', 'fd00:99::', 'fd00:99::', 'fd00:99:0:1::',
                'fd00:99:0:1::', 'fd00:99:0:2::']
    for i in range(30):
        tcp = i % 3 != 0
        f = Flow(6, 'fd00:98:0:%x::%x' % (i % 4 == 0, 0x10 + i),
                 rng.choice(dst_nets) + '%x:%x' % (rng.randrange(1, 16),
                                                   rng.randrange(1, 0xffff)),
                 TCP if tcp else UDP, tb.port(),
                 rng.choice((443, 443, 80)) if tcp else rng.choice((53,
                                                                    5005)),
                 ttl=rng.choice((64, 255, 1)), tos=rng.randrange(256))
        for e in active:
            if rng.random() < 0.6:
                if tcp:
                    n = tb.send(f, e, rng.randint(1000, X * 3 // 2),
                                mss=1440)
                    tb.acks(f, e, max(1, n // 4))
                else:
                    tb.send(f, e, rng.randint(100, X), mss=1200)
    # IPv4 traffic that no IPv6 filter may match.
    for i in range(5):
        f = Flow(4, '10.99.0.%d' % (i + 1), '10.99.1.%d' % (i + 1), TCP,
                 tb.port(), 443, noise=True)
        for e in active:
            tb.send(f, e, rng.randint(1000, 20000))

    fx = Flow(6, 'fd00:98::beef', 'fd00:99::1:5', UDP, 7000, 7000,
              ttl=64, tos=0x03)
    tb.send(fx, 2, X, mss=1200)
    tb.send(fx, 3, X + 1, mss=1200)
    tb.check('v6flow', tb.abs(2), fx.group5(), False)
    tb.check('v6flow', tb.abs(3), fx.group5(), True)
    return active


def scen_vars(tb, ev):
    """Per-packet variables other than volume: ttl, bytes, ecn, rwnd, and
    shape statistics (stddev, count of a comparison, a compound value).
    Frames carry IP options, TCP timestamps, VLAN tags and Ethernet
    padding, which the variables must see through."""
    rng = tb.rng
    gaps = set(range(10, 14))
    active = [e for e in range(28) if e not in gaps]
    for i in range(24):
        tcp = i < 16
        f = Flow(4, '10.99.4.%d' % (i + 1), '10.99.5.%d' % (i % 9 + 1),
                 TCP if tcp else UDP, tb.port(),
                 rng.choice((80, 443)) if tcp else 5000 + i % 4,
                 ttl=rng.choice((64, 64, 64, 32, 128)),
                 rwnd=rng.choice((65535, 29200, 8192, 2048)),
                 vlans=(7,) if i % 6 == 5 else (),
                 tcp_opts=12 if tcp and i % 2 else 0,
                 ip_opts=4 if i % 5 == 2 else 0)
        ecn_mode = rng.choice(('none', 'ect', 'ce'))
        sizes = rng.choice(('const', 'bimodal', 'random', 'small'))
        ttl_bump = rng.random() < 0.3
        win_dips = tcp and rng.random() < 0.4
        for e in active:
            if rng.random() >= 0.6:
                continue
            n = rng.randint(1, 14)
            bump = ttl_bump and rng.random() < 0.3
            dip = win_dips and rng.random() < 0.3
            for k, ts in enumerate(tb.rand_ts(e, n)):
                payload = {'const': 1000,
                           'bimodal': rng.choice((200, 1400)),
                           'random': rng.randrange(0, MSS + 1),
                           'small': rng.randrange(0, 300)}[sizes]
                ecn = {'none': 0, 'ect': rng.choice((1, 2)),
                       'ce': 3 if rng.random() < 0.1 else 2}[ecn_mode]
                tb.add(f, ts, payload,
                       ttl=f.ttl + 1 if bump and k == 0 else f.ttl,
                       tos=rng.choice((0, 0x28, 0xb8)) | ecn,
                       rwnd=rng.randrange(0, 1000) if dip and k == n - 1
                       else f.rwnd)

    def flow(i, proto=TCP, **kw):
        return Flow(4, '10.99.4.%d' % (100 + i), '10.99.5.%d' % (100 + i),
                    proto, 43000 + i, 80 if proto == TCP else 5000, **kw)

    # max(ttl) > 64: TTL 64 is silent, one packet with 65 fires.
    f64, f65 = flow(0, ttl=64), flow(1, ttl=64)
    tb.send(f64, 2, 5000)
    tb.send(f65, 2, 5000)
    tb.add(f65, tb.rand_ts(2, 1)[0], 100, ttl=65)
    tb.check('ttlmax', tb.abs(2), f64.group5(), False)
    tb.check('ttlmax', tb.abs(2), f65.group5(), True)
    # ECN: ECT(0)/ECT(1) with DSCP bits set count 0; one CE packet counts.
    fect, fce = flow(2), flow(3)
    for tos in (0x01, 0x02, 0xb9, 0xba, 0xfe):
        tb.add(fect, tb.rand_ts(3, 1)[0], 500, tos=tos)
        tb.add(fce, tb.rand_ts(3, 1)[0], 500, tos=tos)
    tb.add(fce, tb.rand_ts(3, 1)[0], 500, tos=0xbb)
    tb.check('ce', tb.abs(3), fect.group5(), False)
    tb.check('ce', tb.abs(3), fce.group5(), True)
    # min(rwnd) < 1000: exactly 1000 is silent; 999 and 0 fire.
    for i, low, fires in ((4, 1000, False), (5, 999, True), (6, 0, True)):
        f = flow(i, rwnd=30000)
        tb.send(f, 4, 8000)
        tb.add(f, tb.rand_ts(4, 1)[0], 10, rwnd=low)
        tb.check('smallwin', tb.abs(4), f.group5(), fires)
    # count(volume > 1000) > 5: six packets of 1001 fire; five of 1001
    # plus seven of exactly 1000 do not.
    fbig, fedge = flow(7, UDP), flow(8, UDP)
    for ts in tb.rand_ts(5, 6):
        tb.add(fbig, ts, 1001)
    for k, ts in enumerate(tb.rand_ts(5, 12)):
        tb.add(fedge, ts, 1001 if k < 5 else 1000)
    tb.check('bigpkts', tb.abs(5), fbig.group5(), True)
    tb.check('bigpkts', tb.abs(5), fedge.group5(), False)
    # Ethernet padding counts in bytes, not in volume: five full frames
    # (1514) and one pure ACK padded from 54 to 60 bytes average
    # 1271.67 (1270.67 if padding were ignored).
    fpad = flow(9)
    for ts in tb.rand_ts(6, 5):
        tb.add(fpad, ts, MSS)
    tb.add(fpad, tb.rand_ts(6, 1)[0], 0)
    tb.check('avgbytes', tb.abs(6), fpad.group5(), True)
    # Constant sizes have no deviation; 200/1400 alternating deviate 600.
    fconst, falt = flow(10, UDP), flow(11, UDP)
    for k, ts in enumerate(tb.rand_ts(7, 8)):
        tb.add(fconst, ts, 700)
        tb.add(falt, ts, 200 if k % 2 else 1400)
    tb.check('jitter', tb.abs(7), fconst.group5(), False)
    tb.check('jitter', tb.abs(7), falt.group5(), True)
    # The compound predicate: the big UDP flow qualifies on size but not
    # on TTL (128 is not < 100).
    fhi = flow(12, UDP, ttl=128)
    tb.send(fhi, 8, 12000, mss=1200)
    tb.check('udpmix', tb.abs(8), fhi.group5(), False)
    tb.check('udpmix', tb.abs(7), falt.group5(), False)   # 800 is not > 800
    return active


def tcp_pkt(tb, flow, ts, seq, ack, flags, payload=0, **over):
    """One TCP segment of 'flow' with explicit sequence and ack numbers."""
    return tb.add(flow, ts, payload, flags, seq=seq & 0xffffffff,
                  ack=ack & 0xffffffff, **over)


def sim_tcp(tb, c, s, epochs, rtt, straddle):
    """A TCP connection seen at the client's host: client 'c' sends data in
    rounds (bursts of back-to-back segments or paced ones) in 'epochs',
    the server's ACKs come back 'rtt' ns after each segment.  Segments are
    dropped at random (the server then repeats its ACK: duplicate ACKs; the
    third one triggers a fast retransmit), the rest are retransmitted at
    the next round (a timeout); some carry a CE mark.  Both SYNs may carry
    a window scale; the client's initial sequence number is sometimes just
    below the 2^32 wrap.  'straddle' holds epochs whose rounds may run
    into the next epoch."""
    rng = tb.rng
    E = tb.E
    ws_c = rng.choice((None, 0, 7, 7))
    ws_s = rng.choice((None, 3, 9, 9))
    mss_s = rng.choice((1460, 1460, 1400))
    isn_c = rng.randrange(2**32) if rng.random() < 0.6 \
        else 2**32 - rng.randrange(1, 30000)
    isn_s = rng.randrange(2**32)

    t = tb.span(epochs[0])[0] + rng.randrange(E // 2)
    tcp_pkt(tb, c, t, isn_c, 0, SYN, rwnd=64240, syn_opt=(1460, ws_c))
    tcp_pkt(tb, s, t + rtt, isn_s, isn_c + 1, SYN | ACK, rwnd=65160,
            syn_opt=(mss_s, ws_s))
    snd = isn_c + 1
    ack_s = isn_s + 1               # What the client acknowledges.
    tcp_pkt(tb, c, t + rtt + 15_000, snd, ack_s, ACK, rwnd=502)
    una = snd
    pending = []                    # Lost segments not yet repaired.
    sent = {}                       # Segment start -> end.
    recv = {}                       # Delivered: start -> end.
    last_ack_t = t + rtt

    for e in epochs[1:]:
        lo, _ = tb.span(e)
        room = E - (1_000_000 if e in straddle else 4_000_000)
        for T in sorted(lo + rng.randrange(room)
                        for _ in range(rng.randint(1, 3))):
            T = max(T, last_ack_t + 1000)
            paced = rng.random() < 0.4
            gap = rng.randrange(25_000, 90_000) if paced \
                else rng.randrange(500, 3000)
            segs = []               # (start, end, time sent, dropped)
            tt = T
            for start, end in pending:      # Timeout retransmissions.
                tcp_pkt(tb, c, tt, start, ack_s, 0x18, end - start,
                        rwnd=502)
                segs.append((start, end, tt, False))
                tt += gap
            pending = []
            for _ in range(rng.randint(1, 8)):
                size = min(MSS, mss_s) if rng.random() < 0.8 \
                    else rng.randrange(1, min(MSS, mss_s))
                tcp_pkt(tb, c, tt, snd, ack_s, 0x18, size, rwnd=502,
                        tos=3 if rng.random() < 0.12 else 0)
                segs.append((snd, snd + size, tt, rng.random() < 0.12))
                sent[snd] = snd + size
                snd += size
                tt += gap
            # The server's ACKs, in the order they come back.
            win = rng.choice((80, 600, 3000))
            heap = [(st + rtt + rng.randrange(0, rtt // 10 + 1), a, b)
                    for a, b, st, dropped in segs if not dropped]
            heapq.heapify(heap)
            dups = 0
            fast = set()
            ta = T
            while heap:
                ta, a, b = heapq.heappop(heap)
                ta = max(ta, last_ack_t + 1)
                last_ack_t = ta
                recv[a] = b
                before = una
                while una in recv:
                    una = recv[una]
                if rng.random() < 0.1:
                    win = rng.choice((80, 600, 3000))
                tcp_pkt(tb, s, ta, ack_s, una, ACK, rwnd=win)
                if una == before and una < snd:
                    dups += 1
                    if dups == 3 and una not in fast:
                        fast.add(una)
                        tcp_pkt(tb, c, ta + 2000, una, ack_s, 0x18,
                                sent[una] - una, rwnd=502)
                        heapq.heappush(heap, (ta + 2000 + rtt, una,
                                              sent[una]))
                else:
                    dups = 0
            pending = sorted((a, b) for a, b in sent.items()
                             if a >= una and a not in recv)
    # Close: FIN from the client, FIN-ACK from the server, last ACK.
    lo, _ = tb.span(epochs[-1])
    t = max(lo + E - 2_000_000, last_ack_t + 1000)
    tcp_pkt(tb, c, t, snd, ack_s, FIN | ACK, rwnd=502)
    tcp_pkt(tb, s, t + rtt, ack_s, snd + 1, FIN | ACK, rwnd=600)
    tcp_pkt(tb, c, t + rtt + 10_000, snd + 1, ack_s + 1, ACK, rwnd=502)


def scen_tcp(tb, ev):
    """TCP connections from a rack (10.0.128.0/24) to a service
    (10.20.93.0/24) and elsewhere, for the variables that need per-flow
    state: losses (fast retransmits, timeouts after 4 silent epochs),
    bursts, RTT samples from the reverse ACKs, duplicate ACKs, window
    scaling, ECN CE marks, a sequence-number wrap, and the paper's Table 2
    congestion and loss events."""
    rng = tb.rng
    gaps = set(range(8, 12))
    active = [e for e in range(18) if e not in gaps]
    straddle = {e for e in active if e + 1 in active}
    for i in range(10):
        dst = '10.20.93.%d' % (1 + i % 3) if i < 7 else '10.30.0.%d' % i
        c = Flow(4, '10.0.128.%d' % (10 + i), dst, TCP, tb.port(), 5001)
        s = Flow(4, dst, '10.0.128.%d' % (10 + i), TCP, 5001, c.sport)
        start = rng.randrange(0, 4)
        epochs = [e for e in active if e >= start]
        sim_tcp(tb, c, s, epochs, rng.randrange(100_000, 700_000), straddle)

    # max(rtt) > 400us: a handshake whose SYN-ACK comes back after exactly
    # 400 us is silent, 1 ns more fires (the ACK carries the sample).
    for i, rtt, fires in ((0, 400_000, False), (1, 400_001, True)):
        c = Flow(4, '10.0.128.%d' % (200 + i), '10.20.93.200', TCP,
                 44000 + i, 5001)
        s = Flow(4, '10.20.93.200', '10.0.128.%d' % (200 + i), TCP, 5001,
                 44000 + i)
        t = tb.span(5)[0] + 100_000
        tcp_pkt(tb, c, t, 7, 0, SYN, rwnd=1000, syn_opt=(1460, None))
        tcp_pkt(tb, s, t + rtt, 70, 8, SYN | ACK, rwnd=1000,
                syn_opt=(1460, None))
        tcp_pkt(tb, c, t + rtt + 10_000, 8, 71, ACK, rwnd=1000)
        tb.check('slowrtt', tb.abs(5), c.group5(), fires)
    return active


def scen_noise(tb, ev):
    """A little real traffic drowned in near-misses that must never match:
    wrong protocol, port, direction, prefix, IP version, and non-IP."""
    rng = tb.rng
    gaps = set(range(7, 11))
    active = [e for e in range(20) if e not in gaps]
    web = [Flow(4, '10.99.0.%d' % (i + 1), '10.99.1.%d' % (i + 1), TCP,
                tb.port(), 80) for i in range(8)]
    dns_src = ['10.98.%d.%d' % (rng.randrange(1, 4), rng.randrange(1, 255))
               for _ in range(12)]
    mdns = [Flow(6, 'fd00:98::%x' % (i + 1), 'ff02::fb', UDP, 5353, 5353,
                 ttl=255) for i in range(2)]
    for e in active:
        for f in web:
            if rng.random() < 0.6:
                n = rng.randint(1, 8)
                tb.send(f, e, n * 300, min_pkts=n)
        for s in dns_src:
            if rng.random() < 0.5:
                f = Flow(4, s, '10.53.0.1', UDP, tb.port(), 53)
                for ts in tb.rand_ts(e, rng.randint(1, 4)):
                    tb.add(f, ts, rng.randint(40, 300))
        for f in mdns:
            for ts in tb.rand_ts(e, rng.randint(0, 2)):
                tb.add(f, ts, rng.randint(20, 200))

    # Near misses (all tagged noise, so finish-time checks prove that no
    # filter matches them).
    near = [
        Flow(4, '10.99.0.1', '10.99.1.1', UDP, 40000, 80),       # proto
        Flow(4, '10.99.0.1', '10.99.1.1', TCP, 40001, 81),       # port
        Flow(4, '10.99.0.1', '10.99.1.1', TCP, 40002, 8080),
        Flow(4, '10.99.1.1', '10.99.0.1', TCP, 80, 40003),       # reverse
        Flow(4, '10.99.0.1', '10.99.0.255', TCP, 40004, 80),     # prefix
        Flow(4, '10.99.0.1', '10.99.2.0', TCP, 40005, 80),
        Flow(6, 'fd00::1', 'a63:105::1', TCP, 40006, 80),        # IPv6 with
        Flow(6, 'fd00::1', 'fd00::a63:105', TCP, 40007, 80),     # IPv4 bits
        Flow(4, '10.98.1.1', '10.53.0.1', TCP, 40008, 53),       # proto
        Flow(4, '10.98.1.1', '10.53.0.1', UDP, 40009, 54),       # port
        Flow(4, '10.98.1.1', '10.53.0.1', UDP, 53, 40010),       # swapped
        Flow(4, '10.97.1.1', '10.53.0.1', UDP, 40011, 53),       # prefix
        Flow(4, '10.53.0.1', '10.98.1.1', UDP, 53, 40012),       # reverse
        Flow(6, 'a62:101::1', '::a35:1', UDP, 40013, 53),        # IPv6
        Flow(6, 'fd00:98:0:1::1', 'ff02::fb', UDP, 5353, 5353),  # /64
        Flow(6, 'fd00:98::1', 'ff02::fb', TCP, 5353, 5353),      # proto
        Flow(6, 'fd00:98::1', 'ff02::fb', UDP, 5354, 5353),      # port
        Flow(4, '10.99.0.1', '10.99.1.1', ICMP, 8, 0),           # ICMP
    ]
    for f in near:
        f.noise = True
        for e in active:
            for ts in tb.rand_ts(e, rng.randint(2, 8)):
                tb.add(f, ts, rng.randint(0, 1000))
            if rng.random() < 0.3:
                tb.add_l2('arp', tb.rand_ts(e, 1)[0], (30,), '10.99.0.1',
                          '10.99.1.1')

    # count() > 3: three packets are silent, four fire.
    f3, f4 = (Flow(4, '10.99.0.200', '10.99.1.200', TCP, 45000 + i, 80)
              for i in range(2))
    tb.send(f3, 2, 900, min_pkts=3)
    tb.send(f4, 2, 1200, min_pkts=4)
    tb.check('n_tcp80', tb.abs(2), f3.group5(), False)
    tb.check('n_tcp80', tb.abs(2), f4.group5(), True)
    # sum(volume) > 1KB over a source /24: exactly 1000 and 1001.
    for rel, total, fires in ((3, 1000, False), (4, 1001, True)):
        for i, v in enumerate((400, 300, total - 700)):
            tb.add(Flow(4, '10.98.7.%d' % (i + 1), '10.53.0.1', UDP,
                        46000 + i, 53), tb.rand_ts(rel, 1)[0], v)
        tb.check('n_dns', tb.abs(rel), {'nw_src': '10.98.7.0/24'}, fires)
    return active


def scen_table2(tb, ev):
    """Traffic for the runnable rows of the paper's Table 2
    (tests/data/table2.events): a rack 10.0.128.0/24 inside a pod
    10.0.128.0/20, and destinations outside it.  Addresses are written
    only to the pcap."""
    rng = tb.rng
    T1 = ev['heavy-to-rack'].threshold
    T4 = ev['load-spike'].threshold
    T6 = ev['service-deps'].threshold
    n_epochs = 240
    gaps = set(range(60, 65)) | set(range(150, 180))
    active = [e for e in range(n_epochs) if e not in gaps]
    spikes = set(rng.sample(active[5:], 10))
    # Epochs left free of random port-80 traffic to the rack, for exact
    # load-spike checks.
    quiet80 = {active[-20], active[-19]}

    def run(flows, p, lo, hi, spike=None):
        for f in flows:
            for e in active:
                if f.dport == 80 and f.dst >> 8 == 0x0a0080 \
                        and e in quiet80:
                    continue
                if spike and e in spikes:
                    v = rng.randint(*spike)
                elif rng.random() < p:
                    v = rng.randint(lo, hi)
                else:
                    continue
                n = tb.send(f, e, v)
                if f.proto == TCP:
                    tb.acks(f, e, max(1, n // 8))

    pod_a = [Flow(4, '10.0.129.%d' % (10 + i), '10.20.93.%d' % (5 + i), TCP,
                  tb.port(), 443) for i in range(3)]
    pod_b = [Flow(4, '10.0.130.%d' % (10 + i), '10.30.1.%d' % (5 + i), UDP,
                  tb.port(), 5005) for i in range(3)]
    rack_c = [Flow(4, '10.0.131.%d' % (10 + i), '10.0.128.%d' % (1 + i), TCP,
                   tb.port(), 80 if i < 4 else 443) for i in range(6)]
    rack_d = [Flow(4, '10.0.144.%d' % (10 + i), '10.0.128.%d' % (20 + i),
                   TCP, tb.port(), 80) for i in range(4)]
    run(pod_a, 0.9, 25000, 45000)                  # ~9 MB/s: above T6
    run(pod_b, 0.8, 5000, 10000)                   # ~1.8 MB/s: below
    run(rack_c[:4], 0.6, 5000, 35000, spike=(T1 - 25000, T1 + 40000))
    run(rack_c[4:], 0.6, 5000, 60000)
    run(rack_d, 0.5, 5000, 30000)

    # heavy-to-rack: exactly T1 is silent, T1 + 1 fires.
    fe = Flow(4, '10.0.129.50', '10.0.128.50', TCP, 47000, 8080)
    tb.send(fe, 10, T1)
    tb.send(fe, 11, T1 + 1)
    tb.check('heavy-to-rack', tb.abs(10), fe.group5(), False)
    tb.check('heavy-to-rack', tb.abs(11), fe.group5(), True)
    # load-spike: the rack's port-80 total exactly T4 (silent), T4 + 1.
    rack = {'nw_dst': '10.0.128.0/24'}
    for e, total, fires in ((min(quiet80), T4, False),
                            (max(quiet80), T4 + 1, True)):
        flows = rack_c[:4]
        share = [total // 4] * 4
        share[-1] += total - sum(share)
        for f, v in zip(flows, share):
            tb.send(f, e, v)
        tb.check('load-spike', tb.abs(e), rack, fires)
    # service-deps: one pair sends exactly T6 in one second (silent) and
    # T6 + 1 in the next (fires), spread over the active epochs of each.
    ff = Flow(4, '10.0.132.1', '10.40.0.1', UDP, 48000, 9000)
    m = ev['service-deps'].interval_ns // tb.E
    seconds = {}
    for e in active:
        seconds.setdefault(tb.abs(e) // m, []).append(e)
    busiest = sorted(seconds, key=lambda s: -len(seconds[s]))[:2]
    for s, total, fires in zip(sorted(busiest), (T6, T6 + 1), (False, True)):
        eps = seconds[s]
        share = [total // len(eps)] * len(eps)
        share[-1] += total - sum(share)
        for e, v in zip(eps, share):
            tb.send(ff, e, v)
        tb.check('service-deps', s * m + m - 1,
                 {'nw_src': '10.0.132.0/24', 'nw_dst': '10.40.0.0/24'}, fires)
    return active


def scen_snap64(tb, ev):
    """A capture cut at 64 bytes: TCP and UDP over IPv4 and IPv6 with VLAN
    tags and IP and TCP options, so that the TCP header is whole, cut after
    its data offset, cut before it, or cut before the ports."""
    rng = tb.rng
    X = ev['cut_vol'].threshold
    V6 = ev['cut_v6'].threshold
    gaps = set(range(8, 12))
    active = [e for e in range(24) if e not in gaps]
    # (VLAN tags, IPv4 option bytes, TCP option bytes): L4 bytes captured
    # 30, 30 (options cut), 18 (header cut after the data offset), 10
    # (data offset cut, no options: exact), 10 (options counted as
    # payload), 2 (ports cut: not monitored).
    shapes4 = [((), 0, 0), ((), 0, 12), ((7,), 8, 12), ((7, 8), 12, 0),
               ((7, 8), 12, 12), ((7, 8), 20, 0)]
    for i in range(24):
        vlans, ip_opts, tcp_opts = shapes4[i % len(shapes4)]
        tcp = i % 4 != 3
        f = Flow(4, '10.98.7.%d' % (1 + i), '10.99.7.%d' % (1 + i % 12),
                 TCP if tcp else UDP, tb.port(), 80 if tcp else 53,
                 vlans=vlans, ip_opts=ip_opts, tcp_opts=tcp_opts)
        lo, hi = (X // 2, X * 3 // 2) if i % 5 == 0 else (1000, 40000)
        for e in active:
            if rng.random() < 0.5:
                n = tb.send(f, e, rng.randint(lo, hi),
                            mss=rng.choice((MSS, 1000, 536)))
                if tcp:
                    tb.acks(f, e, max(1, n // 4))
    # IPv6: 10 L4 bytes captured untagged (data offset cut), 6 with a tag,
    # 2 with two (ports cut: not monitored).
    for i in range(12):
        vlans = ((), (5,), (5, 6))[i % 3]
        tcp = i % 2 == 0
        f = Flow(6, 'fd00:98::%x' % (i + 1), 'fd00:97::%x' % (i % 5 + 1),
                 TCP if tcp else UDP, tb.port(), 443 if tcp else 5353,
                 vlans=vlans, tcp_opts=12 if i % 4 == 0 else 0)
        for e in active:
            if rng.random() < 0.6:
                tb.send(f, e, rng.randint(V6 // 3, V6 * 2), mss=1200)

    # The TCP header cut after the data offset (18 bytes of it captured):
    # exactly 125KB in 1000-byte segments is silent, one byte more fires.
    fx = Flow(4, '10.98.7.200', '10.99.7.200', TCP, 41000, 80, vlans=(7,),
              ip_opts=8, tcp_opts=12)
    tb.send(fx, 3, X, mss=1000)
    tb.send(fx, 4, X + 1, mss=1000)
    tb.check('cut_vol', tb.abs(3), fx.group5(), False)
    tb.check('cut_vol', tb.abs(4), fx.group5(), True)
    # The data offset not captured, no TCP options: exact as well.
    fy = Flow(4, '10.98.7.201', '10.99.7.201', TCP, 41001, 80,
              vlans=(7, 8), ip_opts=12)
    tb.send(fy, 5, X, mss=1000)
    tb.send(fy, 6, X + 1, mss=1000)
    tb.check('cut_vol', tb.abs(5), fy.group5(), False)
    tb.check('cut_vol', tb.abs(6), fy.group5(), True)
    # Ports not captured: never seen, however much it sends (a report
    # for it would be unexpected).
    fz = Flow(4, '10.98.7.202', '10.99.7.202', TCP, 41002, 80,
              vlans=(7, 8), ip_opts=20)
    for e in active[:4]:
        tb.send(fz, e, 2 * X)
    return active


def scen_vlan3(tb, ev):
    """Frames with one to four VLAN tags of the three TPIDs (802.1Q
    0x8100, 802.1ad 0x88a8, 0x9100), and with five (not monitored)."""
    rng = tb.rng
    X = ev['v3flow'].threshold
    gaps = set(range(8, 12))
    active = [e for e in range(24) if e not in gaps]
    stacks = [
        ((0x88a8, 100), (0x8100, 200), (0x9100, 300)),
        ((0x8100, 1), (0x8100, 2), (0x8100, 3)),
        ((0x9100, 10), (0x88a8, 20), (0x8100, 30), (0x8100, 40)),
        ((0x88a8, 5),),
        (),
    ]
    for i in range(30):
        vlans = stacks[i % len(stacks)]
        tcp = i % 3 != 0
        f = Flow(4 if i % 5 != 4 else 6,
                 '10.98.8.%d' % (i + 1) if i % 5 != 4
                 else 'fd00:98:8::%x' % (i + 1),
                 '10.99.8.%d' % (1 + i % 10) if i % 5 != 4
                 else 'fd00:99:8::%x' % (1 + i % 10),
                 TCP if tcp else UDP, tb.port(), 80 if tcp else 53,
                 vlans=vlans, tcp_opts=12 if i % 2 else 0)
        for e in active:
            if rng.random() < 0.6:
                n = tb.send(f, e, rng.randint(X // 3, X * 3 // 2),
                            mss=rng.choice((MSS, 1000)))
                if tcp:
                    tb.acks(f, e, max(1, n // 4))

    # Three tags, one of each TPID: exactly at the threshold is silent,
    # one byte more fires.
    fx = Flow(4, '10.98.8.200', '10.99.8.200', UDP, 7000, 53,
              vlans=stacks[0])
    tb.send(fx, 3, X, mss=1000)
    tb.send(fx, 4, X + 1, mss=1000)
    tb.check('v3flow', tb.abs(3), fx.group5(), False)
    tb.check('v3flow', tb.abs(4), fx.group5(), True)
    # Five tags: beyond the limit, never seen.
    fz = Flow(4, '10.98.8.201', '10.99.8.201', UDP, 7001, 53,
              vlans=stacks[2] + ((0x8100, 50),))
    for e in active[:4]:
        tb.send(fz, e, 2 * X)
    return active


def scen_flows(tb, ev):
    """Many distinct flows at once (--flows, 100000 by default; a twentieth
    IPv6), under eight events: four per 5-tuple (one of them on a
    variable that needs per-flow TCP state) and four coarser, down to one
    group for all of IPv4.  More flows, trigger instances and TCP states
    than tpm-replay's default tables hold: it must size them from the
    capture to stay exact (tests/replay-sizing.sh)."""
    rng = tb.rng
    X = ev['f_vol'].threshold
    busy = [1, 2, 3, 4]
    quiet = 9                       # After a gap: the coarse groups fail.
    tb.sentinel = False             # 'f_any' would match it.
    flows = []
    for i in range(tb.n_flows):
        # Distinct 5-tuples: the source host and port are unique together.
        s, sp = i % 4096, 1024 + i // 4096
        d = (i * 7919) % 1000
        proto = UDP if i % 3 == 0 else TCP
        if i % 20 == 19:
            f = Flow(6, (0xfd000064 << 96) | s, (0xfd000099 << 96) | d, proto,
                     sp, (53, 443, 8080)[i % 3])
        else:
            f = Flow(4, 0x0a400000 | s, 0x0a630000 | (d >> 8) << 8 | d & 255,
                     proto, sp, (53, 80, 443, 5001, 8080)[i % 5])
        flows.append(f)
        # In one of the busy epochs, one packet or two (a burst, within
        # 20 us, for one flow in eleven), and a seventh of the flows again
        # in the next epoch: 5-tuple values on both sides of the
        # thresholds, most flows recent at once.
        e = busy[i % len(busy)]
        for rel in (e, e + 1) if i % 7 == 0 else (e,):
            if i % 11 == 0:
                t = tb.rand_ts(rel, 1)[0]
                times = (t, min(t + rng.randrange(1000, 15000),
                                tb.epoch_start(rel + 1) - 1))
            else:
                times = tb.rand_ts(rel, 1 + (i // 4) % 2)
            for ts in times:
                tb.add(f, ts, rng.randrange(0, X + 1))
    for f in flows[:300]:
        tb.add(f, tb.rand_ts(quiet, 1)[0], rng.randrange(0, 100))

    # Exactly at the '>' threshold: silent; one above: fires.
    fx = Flow(4, '10.65.0.1', '10.99.1.1', UDP, 40000, 53)
    fy = Flow(4, '10.65.0.2', '10.99.1.1', UDP, 40000, 53)
    tb.add(fx, tb.rand_ts(quiet, 1)[0], X)
    tb.add(fy, tb.rand_ts(quiet, 1)[0], X + 1)
    tb.check('f_vol', tb.abs(quiet), fx.group5(), False)
    tb.check('f_vol', tb.abs(quiet), fy.group5(), True)
    return busy + [quiet]


# name -> (builder, snaplen, noise packets, events or None for a file)
SCENARIOS = {
    'heavy': (scen_heavy, 256, 1.0, [
        'heavy filter=ip,nw_dst=10.99.1.0/24 predicate=sum(volume) > 50KB '
        'group=5tuple interval=10ms',
        'web filter=tcp,tp_dst=80 predicate=count() >= 20 group=5tuple '
        'interval=10ms',
    ]),
    'agg': (scen_agg, 128, 1.0, [
        'dst24 filter=ip,nw_dst=10.99.0.0/16 predicate=sum(volume) > 200KB '
        'group=nw_dst/24 interval=10ms',
        'pair24 filter=ip,nw_src=10.98.0.0/16,nw_dst=10.99.0.0/16 '
        'predicate=sum(bytes) > 100KB group=nw_src/24,nw_dst/24 '
        'interval=10ms',
        'port24 filter=udp,nw_dst=10.99.0.0/16 predicate=count() > 30 '
        'group=nw_dst/24,tp_dst interval=10ms',
    ]),
    'interval': (scen_interval, 128, 1.0, [
        'win50 filter=udp,nw_dst=10.99.3.0/24 predicate=sum(volume) > 300KB '
        'group=5tuple interval=50ms',
        'pkts50 filter=tcp,nw_dst=10.99.3.0/24 predicate=count() > 120 '
        'group=nw_dst interval=50ms',
        'win20 filter=ip,nw_dst=10.99.3.0/24 predicate=sum(volume) > 120KB '
        'group=5tuple interval=20ms',
    ]),
    'ipv6': (scen_ipv6, 65535, 1.0, [
        'v6flow filter=ipv6,ipv6_dst=fd00:99::/64 predicate=sum(volume) > '
        '20KB group=5tuple interval=10ms',
        'v6net filter=ipv6,ipv6_dst=fd00:99::/48 predicate=sum(volume) > '
        '80KB group=ipv6_dst/64 interval=10ms',
        'v6web filter=tcp6,ipv6_dst=fd00:99::/48,tp_dst=443 '
        'predicate=count() > 40 group=ipv6_src/64,tp_dst interval=10ms',
    ]),
    'vars': (scen_vars, 65535, 1.0, [
        'ttlmax filter=ip,nw_dst=10.99.5.0/24 predicate=max(ttl) > 64 '
        'group=5tuple interval=10ms',
        'avgbytes filter=ip,nw_dst=10.99.5.0/24 predicate=avg(bytes) > 1000 '
        'group=5tuple interval=10ms',
        'ce filter=ip,nw_dst=10.99.5.0/24 predicate=sum(ecn) >= 1 '
        'group=5tuple interval=10ms',
        'smallwin filter=tcp,nw_dst=10.99.5.0/24 predicate=min(rwnd) < 1000 '
        'group=5tuple interval=10ms',
        'jitter filter=ip,nw_dst=10.99.5.0/24 predicate=stddev(volume) > 400 '
        'group=5tuple interval=10ms',
        'bigpkts filter=ip,nw_dst=10.99.5.0/24 '
        'predicate=count(volume > 1000) > 5 group=5tuple interval=10ms',
        'udpmix filter=udp,nw_dst=10.99.5.0/24 '
        'predicate=sum(volume) / count() > 800 && max(ttl) < 100 '
        'group=5tuple interval=10ms',
    ]),
    'tcp': (scen_tcp, 65535, 1.0, [
        'lossburst filter=tcp,nw_src=10.0.128.0/24 '
        'predicate=avg(is_lost && is_burst) > 10% group=5tuple '
        'interval=10ms',
        'congestion filter=tcp,nw_src=10.0.128.0/24 predicate=1 - (ack - '
        'ack_lastepoch + dup) / (seq_lastepoch - ack_lastepoch) > 0.5 '
        'group=5tuple interval=10ms',
        'slowrtt filter=tcp,nw_src=10.0.128.0/24 predicate=max(rtt) > 400us '
        'group=5tuple interval=10ms',
        'reachability filter=tcp,nw_src=10.0.128.0/24,nw_dst=10.20.93.0/24 '
        'predicate=count(is_lost) > 2 group=nw_src,nw_dst interval=20ms',
        'ecnloss filter=tcp,nw_src=10.0.128.0/24 '
        'predicate=count(ecn) + prev(count(is_lost)) >= 3 group=5tuple '
        'interval=10ms',
        'smallwin filter=tcp,nw_dst=10.0.128.0/24 predicate=min(rwnd) < '
        '300KB group=5tuple interval=10ms',
        'ackburst filter=tcp,nw_dst=10.0.128.0/24 predicate=count(is_burst) '
        '> 4 group=nw_dst interval=10ms',
    ]),
    'noise': (scen_noise, 65535, 2.0, [
        'n_tcp80 filter=tcp,nw_dst=10.99.1.0/24,tp_dst=80 '
        'predicate=count() > 3 group=5tuple interval=10ms',
        'n_dns filter=udp,nw_src=10.98.0.0/16,tp_dst=53 '
        'predicate=sum(volume) > 1KB group=nw_src/24 interval=10ms',
        'n_v6 filter=udp6,ipv6_src=fd00:98::/64,tp_src=5353 '
        'predicate=count() >= 2 group=ipv6_src/64 interval=10ms',
    ]),
    'table2': (scen_table2, 128, 1.0, None),
    'snap64': (scen_snap64, 64, 1.0, [
        'cut_vol filter=ip,nw_dst=10.99.7.0/24 predicate=sum(volume) > 125KB '
        'group=5tuple interval=10ms',
        'cut_web filter=tcp,nw_dst=10.99.7.0/24,tp_dst=80 '
        'predicate=count() > 60 group=nw_dst interval=10ms',
        'cut_dns filter=udp,nw_dst=10.99.7.0/24,tp_dst=53 '
        'predicate=sum(bytes) > 40KB group=nw_dst interval=10ms',
        'cut_v6 filter=ipv6,ipv6_dst=fd00:97::/48 predicate=sum(volume) > '
        '20KB group=5tuple interval=10ms',
    ]),
    'vlan3': (scen_vlan3, 128, 1.0, [
        'v3flow filter=ip,nw_dst=10.99.8.0/24 predicate=sum(volume) > 40KB '
        'group=5tuple interval=10ms',
        'v3dns filter=udp,nw_dst=10.99.8.0/24 predicate=count() > 30 '
        'group=nw_dst/24 interval=10ms',
        'v3v6 filter=ipv6,ipv6_dst=fd00:99:8::/48 predicate=sum(volume) > '
        '40KB group=ipv6_dst interval=10ms',
    ]),
    'flows': (scen_flows, 96, 0, [
        'f_vol filter=ip predicate=sum(volume) > 1000 group=5tuple '
        'interval=10ms',
        'f_udp2 filter=udp predicate=count() >= 2 group=5tuple '
        'interval=10ms',
        'f_burst filter=tcp,nw_dst=10.99.0.0/23 predicate=count(is_burst) '
        '>= 1 group=5tuple interval=20ms',
        'f_any filter=any predicate=sum(bytes) > 400 group=5tuple '
        'interval=20ms',
        'f_src24 filter=ip predicate=sum(volume) > 500KB group=nw_src/24 '
        'interval=10ms',
        'f_dst filter=tcp predicate=count() > 16 group=nw_dst '
        'interval=10ms',
        'f_port filter=ip predicate=sum(bytes) > 1MB group=nw_proto,tp_dst '
        'interval=20ms',
        'f_total filter=ip predicate=count() > 1000 group=nw_src/0 '
        'interval=10ms',
    ]),
}


def default_table2_events():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data',
                        'table2.events')


def scenario_events(name, args):
    lines = SCENARIOS[name][3]
    if lines is None:
        with open(args.table2_events) as f:
            lines = f.read().splitlines()
    events = [e for e in map(parse_event_line, lines) if e]
    return lines, events


def build_scenario(name, seed, args):
    """Builds scenario 'name' and checks it.  Returns (TraceBuilder, event
    lines, events, evals, attempt)."""
    builder, _, noise_scale, _ = SCENARIOS[name]
    lines, events = scenario_events(name, args)
    by_name = {e.name: e for e in events}
    for attempt in range(50):
        rng = random.Random('%s:%s:%d' % (seed, name, attempt))
        tb = TraceBuilder(rng, args.epoch_ns)
        tb.n_flows = args.flows
        active = builder(tb, by_name)
        tb.noise(int(args.packets * noise_scale), active)
        tb.finish(events)
        recs = tb.recs = [p.record(scenario_snaplen(name, args))
                          for p in tb.pkts]
        try:
            evals = compute_truth(recs, events, args.epoch_ns, strict=True)
        except NearTie:
            continue
        try:
            check_scenario(name, tb, recs, events, evals)
        except Retry:
            continue
        return tb, lines, events, evals, attempt
    raise SystemExit('%s: no usable trace in 50 attempts' % name)


def check_scenario(name, tb, recs, events, evals):
    """The meaningfulness checks (see the module docstring)."""
    for p, r in zip(tb.pkts, recs):
        if p.noise:
            for ev in events:
                assert not ev.match(r), \
                    '%s: noise packet %r matches %s' % (name, r, ev.name)
    assert all(a[R_TS] <= b[R_TS] for a, b in zip(recs, recs[1:]))
    for ev, epoch, group, fires in tb.checks:
        got = evals.get((ev, epoch, group))
        assert got is not None, '%s: check %s epoch %d %s: no packets' % (
            name, ev, epoch, dict(group))
        assert got[0] == fires, '%s: check %s epoch %d %s: fired=%s, ' \
            'value %r' % (name, ev, epoch, dict(group), got[0], got[1])
    for ev in events:
        outcomes = {fired for (n, _, _), (fired, _) in evals.items()
                    if n == ev.name}
        if outcomes != {True, False}:
            raise Retry('%s: %s never %s' % (name, ev.name,
                                              'fails' if True in outcomes
                                              else 'fires'))


def scenario_snaplen(name, args):
    return args.snaplen or SCENARIOS[name][1]


def write_scenario(name, seed, args):
    t0 = time.time()
    tb, lines, events, evals, attempt = build_scenario(name, seed, args)
    snaplen = scenario_snaplen(name, args)
    os.makedirs(args.out_dir, exist_ok=True)
    base = os.path.join(args.out_dir, name)
    write_pcap(base + '.pcap', tb.pkts, snaplen)
    with open(base + '.events', 'w') as f:
        f.write('# gen-trace.py --scenario %s --seed %s\n' % (name, seed))
        f.write('\n'.join(lines) + '\n')
    reports = report_lines(evals, events)
    assert reports
    with open(base + '.expected', 'w') as f:
        f.write('\n'.join(reports) + '\n')
    with open(base + '.counters', 'w') as f:
        f.write(json.dumps(parse_counters(tb.pkts, snaplen)) + '\n')
    with open(base + '.census', 'w') as f:
        f.write(json.dumps(census(tb.recs, events)) + '\n')
    if args.self_check:
        # Re-read the pcap we just wrote and compare record by record.
        errors = []
        recs = read_pcap(base + '.pcap', errors)
        mem = [p.record(snaplen) for p in tb.pkts]
        assert not errors, errors[:10]
        assert len(recs) == len(mem), (len(recs), len(mem))
        for i, (a, b) in enumerate(zip(recs, mem)):
            if a != b:
                raise AssertionError('frame %d: pcap %s != memory %s' % (
                    i + 1, dict(zip(RECORD_FIELDS, a)),
                    dict(zip(RECORD_FIELDS, b))))
    if not args.quiet:
        print('%-8s seed %s: %6d packets, %4d reports, %d events, '
              'attempt %d, %.2fs' % (name, seed, len(tb.pkts), len(reports),
                                     len(events), attempt, time.time() - t0))
    return base


# ----------------------------------------------------------------------
# Modes.

def verify(pcap, events_path, expected_path, epoch_ns):
    """--verify: recompute the truth from the pcap bytes and compare."""
    errors = []
    recs = read_pcap(pcap, errors)
    if errors:
        print('%s: %d malformed frames:' % (pcap, len(errors)))
        for e in errors[:20]:
            print('  ' + e)
        return 1
    events = parse_event_file(events_path)
    got = report_lines(compute_truth(recs, events, epoch_ns), events)
    with open(expected_path) as f:
        want = [line.rstrip('\n') for line in f if line.strip()]
    if got != want:
        print('%s: ground truth recomputed from the pcap differs from %s'
              % (pcap, expected_path))
        for line in sorted(set(want) - set(got))[:20]:
            print('  only in expected: ' + line)
        for line in sorted(set(got) - set(want))[:20]:
            print('  only in pcap:     ' + line)
        return 1
    print('%s: verified, %d frames, %d reports' % (os.path.basename(pcap),
                                                   len(recs), len(got)))
    return 0


def main():
    ap = argparse.ArgumentParser(
        description='Generate pcaps, events and ground truth for '
        'tpm-replay (see the module docstring).')
    ap.add_argument('--scenario', default='all',
                    help='one of %s, or "all" (all but "flows")'
                    % ', '.join(SCENARIOS))
    ap.add_argument('--seed', default='1')
    ap.add_argument('--out-dir', default='.')
    ap.add_argument('--flows', type=int, default=100000,
                    help='distinct flows of the "flows" scenario (default '
                    '100000)')
    ap.add_argument('--packets', type=int, default=500,
                    help='noise frames added to each scenario (default '
                    '500)')
    ap.add_argument('--snaplen', type=int, default=0,
                    help='override the scenario snap length (default: '
                    'per scenario, 128 to 65535)')
    ap.add_argument('--epoch', default='10ms',
                    help='epoch length the truth assumes (default 10ms, '
                    "tpm-replay's default)")
    ap.add_argument('--table2-events', default=default_table2_events())
    ap.add_argument('--no-self-check', dest='self_check',
                    action='store_false',
                    help='skip re-reading each pcap after writing it')
    ap.add_argument('--quiet', action='store_true')
    ap.add_argument('--list', action='store_true', help='list scenarios')
    ap.add_argument('--verify', nargs=3,
                    metavar=('PCAP', 'EVENTS', 'EXPECTED'))
    ap.add_argument('--truth', nargs=2, metavar=('PCAP', 'EVENTS'))
    ap.add_argument('--demo', metavar='PCAP',
                    help='write the table2 trace to PCAP')
    args = ap.parse_args()
    args.epoch_ns = parse_time(args.epoch)

    if args.list:
        for name, spec in SCENARIOS.items():
            print('%-9s %s' % (name, spec[0].__doc__.split('\n')[0]))
        return 0
    if args.verify:
        return verify(*args.verify, args.epoch_ns)
    if args.truth:
        errors = []
        recs = read_pcap(args.truth[0], errors)
        for e in errors:
            print('warning: ' + e, file=sys.stderr)
        events = parse_event_file(args.truth[1])
        for line in report_lines(compute_truth(recs, events, args.epoch_ns),
                                 events):
            print(line)
        return 0
    if args.demo:
        tb = build_scenario('table2', args.seed, args)[0]
        write_pcap(args.demo, tb.pkts, args.snaplen or SCENARIOS['table2'][1])
        print('%s: %d packets over %.2f s (events: %s)' % (
            args.demo, len(tb.pkts), (tb.pkts[-1].ts - tb.pkts[0].ts) / 1e9,
            args.table2_events))
        return 0

    names = [n for n in SCENARIOS if n != 'flows'] \
        if args.scenario == 'all' else args.scenario.split(',')
    for name in names:
        if name not in SCENARIOS:
            ap.error('unknown scenario %r' % name)
    t0 = time.time()
    for name in names:
        write_scenario(name, args.seed, args)
    if not args.quiet and len(names) > 1:
        print('total %.2fs' % (time.time() - t0))
    return 0


if __name__ == '__main__':
    sys.exit(main())
