#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Helper of tests/ovs-exact.sh (python3 standard library only).

  gen PCAP TRUTH      writes a finite pcap of many flows (IPv4 and IPv6,
                      UDP and TCP, 802.1Q-tagged IPv4, a few ARP frames)
                      and the generator's own ground truth per 5-tuple
                      (packets, frame bytes, L4 payload bytes) as JSON;
                      with --flows N, N flows all active at once instead
                      (see cmd_gen_many)
  read PCAP           re-reads the pcap with a parser of its own (nothing
                      shared with the generator) and prints the same
                      ground truth as JSON
  check ...           one OVS run: the generator's and the reader's truth
                      agree, every 5-tuple's reports summed over all
                      epochs equal its truth exactly, and the switch's and
                      the monitor's counters are whole (see cmd_check)

Flows and frames are built so that a parser taking shortcuts would go
wrong: TCP and UDP flows with identical addresses and ports, flows in both
directions, IPv6 addresses that differ only outside their first or last 32
bits, IPv4 addresses equal to the low 32 bits of IPv6 ones, IPv4 options,
TCP options, Ethernet padding (frames shorter than 60 bytes padded, so
that frame bytes and payload disagree), unpadded 54-byte TCP frames,
802.1Q tags, ports 0 and 65535, and every frame size from the smallest to
1514 (1518 tagged).  Each flow's packets come either all consecutively,
one by one interleaved with the others, or in bursts of random length.
"""

import argparse
import importlib.util
import ipaddress
import json
import os
import random
import re
import struct
import sys

ETH_IP, ETH_IPV6, ETH_ARP, ETH_VLAN = 0x0800, 0x86DD, 0x0806, 0x8100
TCP, UDP = 6, 17
PATTERN = bytes(range(251)) * 8          # payload bytes


def bench_helper():
    """tpm/bench/bench-ovs.py as a module (its pmd-perf-show and tpm/stats
    parsers, its IPv4 checksum)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                        "tpm", "bench", "bench-ovs.py")
    spec = importlib.util.spec_from_file_location("bench_ovs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def flow_name(k):
    """A readable name of a canonical key (ipver, proto, src, dst, sport,
    dport)."""
    v, p, s, d, sp, dp = k
    proto = {TCP: "tcp", UDP: "udp"}.get(p, str(p))
    if v == 6:
        return "%s6 [%s]:%d -> [%s]:%d" % (proto, s, sp, d, dp)
    return "%s %s:%d -> %s:%d" % (proto, s, sp, d, dp)


def key_str(k):
    return "%d/%d/%s/%s/%d/%d" % k


def str_key(s):
    v, p, a, b, sp, dp = s.split("/")
    return (int(v), int(p), a, b, int(sp), int(dp))


# --- Generator ---------------------------------------------------------

class Flow:
    def __init__(self, ipver, proto, src, dst, sport, dport, **kw):
        self.ipver, self.proto = ipver, proto
        self.src, self.dst = src, dst          # ipaddress objects
        self.sport, self.dport = sport, dport
        self.vlan = kw.get("vlan")             # VLAN id, or None
        self.ip_opts = kw.get("ip_opts", False)    # IPv4 IHL 6
        self.tcp_opts = kw.get("tcp_opts", False)  # TCP data offset 8
        self.pad = kw.get("pad", True)         # pad frames to 60 bytes
        self.packets = 0
        self.bytes = 0
        self.volume = 0
        self.seq = 1000

    def key(self):
        return (self.ipver, self.proto, self.src.compressed,
                self.dst.compressed, self.sport, self.dport)

    def l4_hlen(self):
        if self.proto == UDP:
            return 8
        return 32 if self.tcp_opts else 20

    def headers_len(self):
        l3 = 40 if self.ipver == 6 else (24 if self.ip_opts else 20)
        return 14 + (4 if self.vlan is not None else 0) + l3 + self.l4_hlen()

    def max_payload(self):
        return 1514 + (4 if self.vlan is not None else 0) \
            - self.headers_len()

    def frame(self, payload, ip_checksum):
        """One frame with 'payload' L4 payload bytes; counts it."""
        if self.proto == UDP:
            l4 = struct.pack("!HHHH", self.sport, self.dport, 8 + payload, 0)
        else:
            doff = 8 if self.tcp_opts else 5
            l4 = struct.pack("!HHIIBBHHH", self.sport, self.dport,
                             self.seq & 0xffffffff, 1, doff << 4, 0x18,
                             65535, 0, 0)
            if self.tcp_opts:          # NOP NOP timestamps
                l4 += bytes((1, 1, 8, 10)) + struct.pack("!II", 7, 9)
            self.seq += payload
        o = payload % 251
        l4 += PATTERN[o:o + payload]
        if self.ipver == 4:
            opts = bytes((0x94, 4, 0, 0)) if self.ip_opts else b""
            ihl = 5 + len(opts) // 4
            ip = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0,
                             ihl * 4 + len(l4), self.packets & 0xffff, 0x4000,
                             64, self.proto, 0, self.src.packed,
                             self.dst.packed) + opts
            ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
            etype = ETH_IP
        else:
            ip = struct.pack("!IHBB16s16s", 6 << 28, len(l4), self.proto, 64,
                             self.src.packed, self.dst.packed)
            etype = ETH_IPV6
        eth = bytes.fromhex("020000000002" "020000000001")
        if self.vlan is not None:
            eth += struct.pack("!HH", ETH_VLAN, self.vlan)
        f = eth + struct.pack("!H", etype) + ip + l4
        if self.pad and len(f) < 60:
            f += bytes(60 - len(f))
        self.packets += 1
        self.bytes += len(f)
        self.volume += payload
        return f


def make_flows(rng, per_class):
    """per_class flows of each of IPv4 UDP, IPv4 TCP, IPv6 UDP, IPv6 TCP,
    with deliberate look-alikes; a few 802.1Q-tagged IPv4 UDP flows."""
    flows = []
    v4 = lambda a, b, c: ipaddress.IPv4Address(bytes((10, a, b, c)))
    v6 = lambda a, b: ipaddress.IPv6Address(
        bytes((0xfd, 0, 0, a)) + bytes(8) + struct.pack("!I", b))

    def port(i):
        return (0, 65535, 53, 80, 443)[i] if i < 5 \
            else rng.randrange(1, 65536)

    for proto in (UDP, TCP):
        for i in range(per_class):
            src, dst = v4(1, i // 200, 1 + i % 200), v4(2, i % 7, 1 + i % 200)
            f = Flow(4, proto, src, dst, port(i), port((i * 3) % per_class),
                     ip_opts=(i % 23 == 5), tcp_opts=(i % 5 == 1),
                     pad=(i % 4 != 3))
            flows.append(f)
    # Same addresses and ports, the other protocol: TCP flow i of the
    # first 20 takes UDP flow i's 5-tuple; TCP flows 20..29 are the
    # reverse of TCP flows 0..9.
    udp4 = flows[:per_class]
    tcp4 = flows[per_class:]
    for i in range(min(20, per_class)):
        t, u = tcp4[i], udp4[i]
        t.src, t.dst, t.sport, t.dport = u.src, u.dst, u.sport, u.dport
    for i in range(min(10, per_class - 30)):
        r, t = tcp4[20 + i], tcp4[i]
        r.src, r.dst, r.sport, r.dport = t.dst, t.src, t.dport, t.sport
    for proto in (UDP, TCP):
        for i in range(per_class):
            # Addresses fd00:0:0:A::B: distinct only in word 0 for some,
            # only in word 3 for others.
            src = v6(i % 4, 0x0a010000 + i)
            dst = v6(1 + i % 3, 0x0a020001)
            f = Flow(6, proto, src, dst, port(i), port((i * 7) % per_class),
                     tcp_opts=(i % 5 == 2), pad=(i % 3 != 0))
            flows.append(f)
    # IPv6 look-alikes of UDP flows 0..4 (same ports): the source address
    # differs in bits 64..79 only (flows 20..24), in bits 0..15 only
    # (25..29), in the last byte only (30..34); the destination in bits
    # 48..55 only (35..39).
    udp6 = flows[2 * per_class:3 * per_class]
    for base, side, byte in ((20, "src", 9), (25, "src", 1), (30, "src", 15),
                             (35, "dst", 6)):
        for j in range(5 if per_class >= 40 else 0):
            f, u = udp6[base + j], udp6[j]
            f.src, f.dst, f.sport, f.dport = u.src, u.dst, u.sport, u.dport
            b = bytearray(getattr(u, side).packed)
            b[byte] ^= 1
            setattr(f, side, ipaddress.IPv6Address(bytes(b)))
    # IPv6 look-alikes: the low 32 bits of an IPv4 flow's addresses, same
    # ports and protocol (fd00::a01:x and 10.1.x.y).
    for i in range(min(5, per_class)):
        u = udp4[i]
        f = flows[2 * per_class + 10 + i]
        f.src = ipaddress.IPv6Address(bytes((0xfd,)) + bytes(11) + u.src.packed)
        f.dst = ipaddress.IPv6Address(bytes((0xfd,)) + bytes(11) + u.dst.packed)
        f.sport, f.dport = u.sport, u.dport
    # 802.1Q: IPv4 UDP of their own addresses, and one with the 5-tuple of
    # an untagged flow (a tag does not make another 5-tuple).
    n_vlan = max(2, per_class // 12)
    for i in range(n_vlan):
        f = Flow(4, UDP, v4(3, 0, 1 + i), v4(4, 0, 1 + i), 7000 + i, 9000,
                 vlan=100 + i)
        flows.append(f)
    keys = [f.key() for f in flows]
    assert len(set(keys)) == len(keys), "duplicate 5-tuple in the generator"
    return flows


def packet_count(rng):
    r = rng.random()
    if r < 0.10:
        return 1
    if r < 0.50:
        return rng.randint(2, 10)
    if r < 0.90:
        return rng.randint(11, 100)
    return rng.randint(101, 300)


def payload_size(rng, f):
    r = rng.random()
    top = f.max_payload()
    if r < 0.12:
        return 0
    if r < 0.30:
        return rng.randint(1, 40)
    if r < 0.35:
        return top
    return rng.randint(41, top)


def arp_frame(i):
    eth = bytes.fromhex("ffffffffffff" "020000000001") \
        + struct.pack("!H", ETH_ARP)
    arp = struct.pack("!HHBBH6s4s6s4s", 1, ETH_IP, 6, 4, 1,
                      bytes.fromhex("020000000001"), bytes((10, 9, 0, 1)),
                      bytes(6), bytes((10, 9, 0, 2 + i)))
    return eth + arp + bytes(60 - len(eth) - len(arp))


def cmd_gen(a):
    if a.flows:
        cmd_gen_many(a)
        return
    rng = random.Random(a.seed)
    ip_checksum = bench_helper().ip_checksum
    flows = make_flows(rng, a.per_class)
    # Segments: a flow sends all its packets at once (consecutive), one
    # packet at a time (interleaved), or bursts of 2..40; the segments of
    # all flows are shuffled together.
    segs = []
    modes = {"consecutive": 0, "interleaved": 0, "bursts": 0}
    for fi, f in enumerate(flows):
        n = packet_count(rng)
        r = rng.random()
        if r < 0.25:
            modes["consecutive"] += 1
            segs.append((fi, n))
        elif r < 0.6:
            modes["interleaved"] += 1
            segs += [(fi, 1)] * n
        else:
            modes["bursts"] += 1
            while n:
                k = min(n, rng.randint(2, 40))
                segs.append((fi, k))
                n -= k
    rng.shuffle(segs)
    n_arp = a.arp
    arp_at = sorted(rng.randrange(len(segs) + 1) for _ in range(n_arp))
    frames = 0
    total_bytes = 0
    with open(a.pcap, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))

        def put(p):
            nonlocal frames, total_bytes
            out.write(struct.pack("<IIII", 1, frames, len(p), len(p)))
            out.write(p)
            frames += 1
            total_bytes += len(p)

        ai = 0
        for si, (fi, k) in enumerate(segs):
            while ai < n_arp and arp_at[ai] == si:
                put(arp_frame(ai))
                ai += 1
            for _ in range(k):
                put(flows[fi].frame(payload_size(rng, flows[fi]),
                                    ip_checksum))
        while ai < n_arp:
            put(arp_frame(ai))
            ai += 1
    truth = {
        "source": "generator",
        "frames": frames,
        "bytes": total_bytes,
        "non_ip": n_arp,
        "flows": {key_str(f.key()): [f.packets, f.bytes, f.volume]
                  for f in flows},
    }
    with open(a.truth, "w") as out:
        json.dump(truth, out, sort_keys=True)
    sizes = [f.packets for f in flows]
    print("%d frames (%d bytes): %d flows (IPv4 UDP/TCP, IPv6 UDP/TCP %d "
          "each, %d 802.1Q), %d to %d packets per flow (%d consecutive, %d "
          "interleaved, %d in bursts), %d ARP"
          % (frames, total_bytes, len(flows), a.per_class,
             len(flows) - 4 * a.per_class, min(sizes), max(sizes),
             modes["consecutive"], modes["interleaved"], modes["bursts"],
             n_arp))


def cmd_gen_many(a):
    """--flows N: N IPv4 flows (UDP, and TCP for one in four), every one
    active at once: the pcap sends --rounds rounds, each one packet of
    every flow in an order shuffled again each round, so that all N flow
    entries live in the monitor's table together and each flow's packets
    are spread over the whole file.  Destinations in 10.0.0.0/8 (one
    megaflow for all), frames of 60 to 200 bytes (the file stays small
    and is read fast), no ARP."""
    rng = random.Random(a.seed)
    ip_checksum = bench_helper().ip_checksum
    flows = []
    for i in range(a.flows):
        src = ipaddress.IPv4Address(bytes((10, 64 + (i >> 16) % 64,
                                           (i >> 8) & 255, i & 255)))
        dst = ipaddress.IPv4Address(bytes((10, 200, i % 7, 1 + i % 250)))
        flows.append(Flow(4, TCP if i % 4 == 3 else UDP, src, dst,
                          1024 + i % 60000, 80 + i % 13, pad=(i % 5 != 0)))
    keys = [f.key() for f in flows]
    assert len(set(keys)) == len(keys), "duplicate 5-tuple in the generator"
    order = list(range(len(flows)))
    frames = total_bytes = 0
    with open(a.pcap, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for _ in range(a.rounds):
            rng.shuffle(order)
            for fi in order:
                f = flows[fi]
                p = f.frame(rng.randint(0, 200 - f.headers_len()),
                            ip_checksum)
                out.write(struct.pack("<IIII", 1, frames, len(p), len(p)))
                out.write(p)
                frames += 1
                total_bytes += len(p)
    truth = {
        "source": "generator",
        "frames": frames,
        "bytes": total_bytes,
        "non_ip": 0,
        "flows": {key_str(f.key()): [f.packets, f.bytes, f.volume]
                  for f in flows},
    }
    with open(a.truth, "w") as out:
        json.dump(truth, out, sort_keys=True)
    print("%d frames (%d bytes): %d IPv4 flows (UDP, TCP one in four), all "
          "active at once: %d rounds of one packet each, shuffled"
          % (frames, total_bytes, len(flows), a.rounds))


# --- Independent reader ------------------------------------------------
# Shares nothing with the generator above: its own parsing of the pcap
# file, byte by byte.

def read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        raise ValueError("%s: no pcap header" % path)
    magic = int.from_bytes(data[0:4], "little")
    if magic == 0xa1b2c3d4:
        end = "little"
    elif magic == 0xd4c3b2a1:
        end = "big"
    else:
        raise ValueError("%s: not a pcap file (magic %#x)" % (path, magic))
    if int.from_bytes(data[20:24], end) != 1:
        raise ValueError("%s: link type is not Ethernet" % path)
    off = 24
    while off < len(data):
        if off + 16 > len(data):
            raise ValueError("%s: truncated record header at %d"
                             % (path, off))
        incl = int.from_bytes(data[off + 8:off + 12], end)
        orig = int.from_bytes(data[off + 12:off + 16], end)
        if incl != orig:
            raise ValueError("%s: frame at %d captured in part (%d of %d)"
                             % (path, off, incl, orig))
        off += 16
        if off + incl > len(data):
            raise ValueError("%s: truncated frame at %d" % (path, off))
        yield data[off:off + incl]
        off += incl


def be16(b, i):
    return b[i] << 8 | b[i + 1]


def classify(fr):
    """(canonical key, payload bytes) of an IP frame, None otherwise."""
    i = 12
    et = be16(fr, i)
    while et in (0x8100, 0x88a8):
        i += 4
        et = be16(fr, i)
    i += 2
    if et == 0x0800:
        ihl = (fr[i] & 15) * 4
        total = be16(fr, i + 2)
        proto = fr[i + 9]
        src = str(ipaddress.ip_address(fr[i + 12:i + 16]))
        dst = str(ipaddress.ip_address(fr[i + 16:i + 20]))
        l4, l4len, ver = i + ihl, total - ihl, 4
    elif et == 0x86dd:
        l4len = be16(fr, i + 4)
        proto = fr[i + 6]
        src = ipaddress.ip_address(fr[i + 8:i + 24]).compressed
        dst = ipaddress.ip_address(fr[i + 24:i + 40]).compressed
        l4, ver = i + 40, 6
    else:
        return None
    sport, dport = be16(fr, l4), be16(fr, l4 + 2)
    if proto == 17:
        payload = min(be16(fr, l4 + 4), l4len) - 8
    elif proto == 6:
        payload = l4len - (fr[l4 + 12] >> 4) * 4
    else:
        raise ValueError("unexpected IP protocol %d" % proto)
    return (ver, proto, src, dst, sport, dport), payload


def pcap_truth(path):
    flows = {}
    frames = total = non_ip = 0
    for fr in read_pcap(path):
        frames += 1
        total += len(fr)
        c = classify(fr)
        if c is None:
            non_ip += 1
            continue
        t = flows.setdefault(key_str(c[0]), [0, 0, 0])
        t[0] += 1
        t[1] += len(fr)
        t[2] += c[1]
    return {"source": "pcap", "frames": frames, "bytes": total,
            "non_ip": non_ip, "flows": flows}


def cmd_read(a):
    json.dump(pcap_truth(a.pcap), sys.stdout, sort_keys=True)
    print()


# --- One run's check ---------------------------------------------------

def report_key(group):
    """The canonical key of a 5-tuple report group."""
    if "ipv6_src" in group:
        return (6, group["nw_proto"],
                ipaddress.IPv6Address(group["ipv6_src"]).compressed,
                ipaddress.IPv6Address(group["ipv6_dst"]).compressed,
                group["tp_src"], group["tp_dst"])
    return (4, group["nw_proto"], group["nw_src"], group["nw_dst"],
            group["tp_src"], group["tp_dst"])


def pmd_stats(text):
    """pmd-stats-show of the PMD on core 1: {label: number}."""
    m = re.search(r"core_id 1:\n((?:[ \t].*\n?)*)", text)
    if not m:
        return {}
    out = {}
    for label, v in re.findall(r"^[ \t]+([a-z. -]+?):[ \t]+([\d.]+)[ \t]*$",
                               m.group(1), re.M):
        out[label] = float(v) if "." in v else int(v)
    return out


def dpctl_rx(text, port):
    """(RX packets, RX bytes) of 'port' in dpctl/show -s."""
    m = re.search(r"port \d+: %s \(.*?\n\s+RX packets:(\d+).*?"
                  r"\n\s+RX bytes:(\d+)" % re.escape(port), text, re.S)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def cmd_check(a):
    bench = bench_helper()
    fails = []
    notes = []

    def fail(msg):
        fails.append(msg)

    gen = json.load(open(a.truth))
    pcap = pcap_truth(a.pcap)
    # 1. The generator's own accounting and the independent reading of
    # the file agree (else the ground truth itself is wrong).
    for k in ("frames", "bytes", "non_ip"):
        if gen[k] != pcap[k]:
            fail("ground truth: %s: generator %d, pcap re-read %d"
                 % (k, gen[k], pcap[k]))
    for k in sorted(set(gen["flows"]) | set(pcap["flows"])):
        g, p = gen["flows"].get(k), pcap["flows"].get(k)
        if g != p:
            fail("ground truth: flow %s: generator (packets, bytes, "
                 "volume) %s, pcap re-read %s" % (flow_name(str_key(k)), g, p))
    # The file is read once per input port.
    n = len(a.ports)
    truth = {k: [n * x for x in v] for k, v in pcap["flows"].items()}
    frames, nbytes, non_ip = (n * pcap["frames"], n * pcap["bytes"],
                              n * pcap["non_ip"])

    # 2. Reports: every 5-tuple's values summed over all epochs.
    events = dict(e.split("=", 1) for e in a.event)   # name -> column
    cols = {"packets": 0, "bytes": 1, "volume": 2}
    sums = {name: {} for name in events}
    n_reports = partial = 0
    epochs = set()
    for line in open(a.reports):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if r.get("event") not in events:
            continue
        n_reports += 1
        partial += bool(r.get("partial"))
        epochs.add(r["epoch"])
        k = key_str(report_key(r["group"]))
        v = r["value"]
        # count() and sum(bytes) of a flow's interval are at least 1 and
        # 42; sum(volume) may be 0 (payload-less packets).
        if v != int(v) or v < 0 \
           or (v == 0 and events[r["event"]] != "volume"):
            fail("%s: event %s: report of %s in epoch %d with value %r"
                 % (a.label, r["event"], flow_name(str_key(k)), r["epoch"],
                    v))
        s = sums[r["event"]]
        s[k] = s.get(k, 0) + v
    if n_reports >= a.report_log:
        fail("%s: %d reports, tpm-report-log keeps %d: some may be lost; "
             "raise it" % (a.label, n_reports, a.report_log))
    for name, col in events.items():
        s = sums[name]
        bad = []
        for k in sorted(set(truth) | set(s)):
            want = truth[k][cols[col]] if k in truth else 0
            got = s.get(k, 0)
            if got != want:
                bad.append("%s: flow %s: reported %s %d, pcap %d (%+d)"
                           % (a.label, flow_name(str_key(k)), col, got,
                              want, got - want))
        if bad:
            fails.extend(bad[:a.max_lines])
            if len(bad) > a.max_lines:
                fail("%s: event %s: %d more flows miscounted"
                     % (a.label, name, len(bad) - a.max_lines))
            fail("%s: event %s (%s per 5-tuple): %d of %d flows miscounted"
                 % (a.label, name, col, len(bad), len(truth)))

    # 3. The monitor's own counters (tpm/stats of PMD core 1): every frame
    # seen, nothing lost.
    st = open(a.tpm_stats).read()
    t = bench.tpm_delta("", st)
    m = re.search(r"packets: \d+ \(non-IP (\d+)\)", bench.pmd1(st))
    t["non_ip"] = int(m.group(1)) if m else None
    m = re.search(r"reuses (\d+),", bench.pmd1(st))
    t["flow_reuses"] = int(m.group(1)) if m else None
    want = {"packets": frames, "bytes": nbytes, "non_ip": non_ip,
            "reports_dropped": 0, "sweeps_unfinished": 0,
            "flow_evictions": 0, "dos_skipped": 0}
    for k, v in sorted(want.items()):
        if t.get(k) != v:
            fail("%s: tpm/stats %s: %s, expected %d"
                 % (a.label, k, t.get(k), v))
    for label, rx in (("over max_matches", r"over max_matches (\d+)"),
                      ("out of summary slots", r"out of summary slots (\d+)"),
                      ("triggers refused", r"triggers: .*refused (\d+)"),
                      ("chunks exhausted", r"chunks exhausted (\d+)")):
        m = re.search(rx, st)
        if not m or int(m.group(1)) != 0:
            fail("%s: tpm/stats %s: %s, expected 0"
                 % (a.label, label, m.group(1) if m else "missing"))
    if t.get("sweeps_done", 0) < 1:
        fail("%s: tpm/stats: no sweep done" % a.label)

    # 4. The switch: received every frame of the pcap once per input
    # port, on the intended classification path.
    ps = pmd_stats(open(a.pmd_stats).read())
    recv = ps.get("packets received")
    if recv != frames:
        fail("%s: pmd-stats-show packets received %s, expected %d (%d "
             "pcap frames x %d ports)" % (a.label, recv, frames,
                                          pcap["frames"], n))
    dp = open(a.dpctl).read()
    for port in a.ports:
        rx = dpctl_rx(dp, port)
        if rx != (pcap["frames"], pcap["bytes"]):
            fail("%s: dpctl/show -s %s RX packets %s, bytes %s; pcap %d "
                 "frames, %d bytes" % (a.label, port, rx[0], rx[1],
                                       pcap["frames"], pcap["bytes"]))
    hits = {k: ps.get(k + " hits") for k in
            ("phwol", "mfex opt", "simple match", "emc", "smc", "megaflow")}
    upcalls = ps.get("miss with success upcall")
    lost = ps.get("miss with failed upcall")
    if None in hits.values() or upcalls is None or lost is None \
       or recv is None:
        fail("%s: pmd-stats-show: cannot read the hit counters" % a.label)
        hits = {k: v or 0 for k, v in hits.items()}
    else:
        if sum(hits.values()) + upcalls + lost != recv:
            notes.append("hits + misses (%d) != packets received (%d)"
                         % (sum(hits.values()) + upcalls + lost, recv))
        if lost:
            # Packets dropped by the switch when their upcall failed
            # (when a pcap port is added, its first batches can arrive
            # before ofproto knows the port).  The monitor counts them:
            # it sees every received packet.
            notes.append("%d packets lost by OVS (miss with failed upcall),"
                         " counted by the monitor" % lost)
        main = {"simple": "simple match", "emc": "emc",
                "dpcls": "megaflow"}[a.path]
        # The intended path takes at least 3/4 of the packets not lost
        # (the first packets of each datapath flow go through an upcall,
        # those of each new EMC entry through the megaflow cache), and
        # the other caches are not used where they must not be.
        if hits[main] * 4 < (recv - lost) * 3:
            fail("%s: pmd-stats-show: %s hits %d of %d packets (%d lost): "
                 "the intended path took less than 3/4 of the packets"
                 % (a.label, main, hits[main], recv, lost))
        forbidden = {"simple": ("emc", "smc"), "emc": ("simple match",),
                     "dpcls": ("emc", "smc", "simple match")}[a.path]
        for k in forbidden + ("phwol", "mfex opt"):
            if hits[k]:
                fail("%s: pmd-stats-show: %s hits %d, expected 0 on the %s "
                     "path" % (a.label, k, hits[k], a.path))
    summary = ("%s: %d flows, %d frames (%d non-IP), %d bytes (pcap read "
               "%d times); %d reports over %d epochs%s; switch: received "
               "%s, %s, upcalls %s, lost %s; monitor: %s flow inserts, "
               "%s reuses, %s sweeps"
               % (a.label, len(truth), frames, non_ip, nbytes, n, n_reports,
                  len(epochs), " (%d partial)" % partial if partial else "",
                  recv, ", ".join("%s hits %d" % (k, v)
                                  for k, v in hits.items() if v),
                  upcalls, lost, t.get("flow_inserts"),
                  t.get("flow_reuses"), t.get("sweeps_done")))
    for note in notes:
        print("note: %s: %s" % (a.label, note))
    for f in fails:
        print("FAIL: %s" % f)
    if fails:
        print("FAIL: %s" % summary)
        sys.exit(1)
    print("PASS: %s; every flow's packets, bytes and payload exact"
          % summary)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("gen")
    p.add_argument("pcap")
    p.add_argument("truth")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--per-class", type=int, default=100)
    p.add_argument("--arp", type=int, default=20)
    p.add_argument("--flows", type=int, default=0,
                   help="N flows all active at once (cmd_gen_many)")
    p.add_argument("--rounds", type=int, default=4,
                   help="with --flows: packets per flow")
    p = sub.add_parser("read")
    p.add_argument("pcap")
    p = sub.add_parser("check")
    p.add_argument("--label", required=True)
    p.add_argument("--path", required=True, choices=("simple", "emc",
                                                      "dpcls"))
    p.add_argument("--pcap", required=True)
    p.add_argument("--truth", required=True)
    p.add_argument("--reports", required=True)
    p.add_argument("--event", action="append", required=True,
                   metavar="NAME=packets|bytes|volume")
    p.add_argument("--report-log", type=int, required=True)
    p.add_argument("--tpm-stats", required=True)
    p.add_argument("--pmd-stats", required=True)
    p.add_argument("--dpctl", required=True)
    p.add_argument("--ports", required=True, type=lambda s: s.split(","),
                   help="the input ports, each reading the pcap once")
    p.add_argument("--max-lines", type=int, default=20)
    a = ap.parse_args()
    {"gen": cmd_gen, "read": cmd_read, "check": cmd_check}[a.cmd](a)


if __name__ == "__main__":
    main()
