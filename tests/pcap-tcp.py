#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Per-packet TCP facts of one direction of a captured connection.

Used by tests/tcp-kernel.sh (and tests/ovs-vm-tcp.sh) as the
independent computation that the monitor's is_lost, ecn and rwnd are
compared with.  Standard library only
(its own parser, no libtpm code); the definitions are those of
docs/event-language.md.

    pcap-tcp.py --src A --sport P --dst A --dport P FILE.pcap

FILE (Ethernet, or Linux cooked v1 or v2 from `tcpdump -i any`) holds
both directions (the window scale of each side comes from its SYN).
Prints one JSON object about the packets from --src:--sport to
--dst:--dport:

    {"packets": N, "lost": N, "ce": N, "rwnd": [W, ...]}

"lost": packets with a TCP segment length > 0 (payload, +1 for SYN, +1
for FIN) starting below the highest sequence number this direction sent
before (32-bit comparison modulo 2^32); "ce": packets whose IP ECN field
is 11; "rwnd": the sorted distinct advertised windows, shifted by the
direction's window scale when both SYNs carried the option and the packet
is not a SYN (RFC 7323).
"""
import argparse
import json
import socket
import struct
import sys

# Link type -> (header length, offset of the EtherType): Ethernet, Linux
# cooked v1 and v2 (tcpdump -i any).
LINK_HEADER = {1: (14, 12), 113: (16, 14), 276: (20, 0)}


def frames(path):
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24 or head[:4] not in (b"\xd4\xc3\xb2\xa1",
                                              b"\x4d\x3c\xb2\xa1"):
            raise ValueError("%s: not a little-endian classic pcap" % path)
        link = struct.unpack("<I", head[20:24])[0] & 0xffff
        if link not in LINK_HEADER:
            raise ValueError("%s: link type %d is neither Ethernet nor "
                             "Linux cooked (tcpdump -i any)" % (path, link))
        off, etype = LINK_HEADER[link]
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            caplen = struct.unpack("<IIII", rec)[2]
            data = f.read(caplen)
            # (EtherType, IP packet)
            yield data[etype:etype + 2], data[off:]


def wscale_option(opts):
    i = 0
    while i < len(opts):
        kind = opts[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(opts) or opts[i + 1] < 2:
            break
        if kind == 3 and opts[i + 1] == 3 and i + 2 < len(opts):
            return min(opts[i + 2], 14)
        i += opts[i + 1]
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--dst", required=True)
    ap.add_argument("--sport", type=int, required=True)
    ap.add_argument("--dport", type=int, required=True)
    ap.add_argument("pcap")
    args = ap.parse_args()
    fwd = (socket.inet_aton(args.src), socket.inet_aton(args.dst),
           args.sport, args.dport)
    rev = (fwd[1], fwd[0], fwd[3], fwd[2])
    wscale = {}                 # Direction -> scale of its SYN (or None).
    pkts = []                   # (window, is_syn) of the forward direction.
    out = {"packets": 0, "lost": 0, "ce": 0}
    high = None
    for ethertype, ip in frames(args.pcap):
        if ethertype != b"\x08\x00" or len(ip) < 20:
            continue
        ihl = (ip[0] & 0x0f) * 4
        if ip[9] != socket.IPPROTO_TCP or len(ip) < ihl + 20:
            continue
        total = struct.unpack("!H", ip[2:4])[0]
        tcp = ip[ihl:]
        sport, dport, seq = struct.unpack("!HHI", tcp[:8])
        doff = (tcp[12] >> 4) * 4
        flags = tcp[13]
        key = (ip[12:16], ip[16:20], sport, dport)
        if key not in (fwd, rev):
            continue
        if flags & 0x02:
            wscale[key] = wscale_option(tcp[20:doff])
        if key != fwd:
            continue
        out["packets"] += 1
        out["ce"] += (ip[1] & 3) == 3
        seglen = total - ihl - doff + bool(flags & 0x02) + bool(flags & 0x01)
        if seglen > 0:
            if high is not None and (seq - high) & 0xffffffff >= 1 << 31:
                out["lost"] += 1
            end = (seq + seglen) & 0xffffffff
            if high is None or (end - high) & 0xffffffff < 1 << 31:
                high = end
        pkts.append((struct.unpack("!H", tcp[14:16])[0], bool(flags & 2)))
    scale = wscale.get(fwd)
    scaled = scale is not None and wscale.get(rev) is not None
    out["rwnd"] = sorted({w << scale if scaled and not syn else w
                          for w, syn in pkts})
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError) as e:
        sys.stderr.write("pcap-tcp.py: %s\n" % e)
        sys.exit(1)
