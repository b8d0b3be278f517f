#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Counts the UDP datagrams of a capture and their payload bytes.

Used by tests/ovs-integration.sh as the independent measurement that the
monitor's sum(volume) is compared with.  Standard library only (its own
pcap parser in tests/pcaplib.py; no libtpm code).

    pcap-volume.py [--src A] [--dst A] [--sport P] [--dport P] FILE.pcap

Reads a classic pcap file (microsecond or nanosecond timestamps, either
byte order; link types Ethernet and Linux cooked v1), keeps the IPv4 UDP
datagrams that match the given addresses and ports, and prints one JSON
object:

    {"packets": N, "payload": BYTES, "truncated": N, "inconsistent": N}

"payload" is the sum of UDP length - 8 (the monitor's "volume" of a UDP
packet).  "truncated" counts matching frames too short to hold their
headers; "inconsistent" counts datagrams whose UDP length disagrees with
the IP total length.  Fragments other than the first are skipped (the
tests never fragment).
"""
import argparse
import json
import socket
import struct
import sys

from pcaplib import LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, \
    ethernet_payload, records


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src")
    ap.add_argument("--dst")
    ap.add_argument("--sport", type=int)
    ap.add_argument("--dport", type=int)
    ap.add_argument("pcap")
    args = ap.parse_args()
    want_src = socket.inet_aton(args.src) if args.src else None
    want_dst = socket.inet_aton(args.dst) if args.dst else None

    out = {"packets": 0, "payload": 0, "truncated": 0, "inconsistent": 0}
    for linktype, _, data in records(args.pcap, (LINKTYPE_ETHERNET,
                                                 LINKTYPE_LINUX_SLL),
                                     "unsupported link type %d"):
        if linktype == LINKTYPE_ETHERNET:
            ethertype, off = ethernet_payload(data)
        else:
            off, ethertype = 16, data[14:16]
        if ethertype != b"\x08\x00" or len(data) < off + 20:
            continue
        ip = data[off:]
        ihl = (ip[0] & 0x0f) * 4
        total = struct.unpack("!H", ip[2:4])[0]
        frag = struct.unpack("!H", ip[6:8])[0]
        if ip[0] >> 4 != 4 or ip[9] != socket.IPPROTO_UDP or frag & 0x1fff:
            continue
        if (want_src and ip[12:16] != want_src) or \
                (want_dst and ip[16:20] != want_dst):
            continue
        if len(ip) < ihl + 8:
            out["truncated"] += 1
            continue
        sport, dport, ulen = struct.unpack("!HHH", ip[ihl:ihl + 6])
        if (args.sport is not None and sport != args.sport) or \
                (args.dport is not None and dport != args.dport):
            continue
        if ulen < 8 or ulen != total - ihl:
            out["inconsistent"] += 1
        out["packets"] += 1
        out["payload"] += max(ulen - 8, 0)
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError) as e:
        sys.stderr.write("pcap-volume.py: %s\n" % e)
        sys.exit(1)
