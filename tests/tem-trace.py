#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes a constant-rate UDP trace for a tpm-replay "host" of the TEM tests.

    tem-trace.py --out PCAP --epochs N --per-epoch K --size BYTES \
        [--src 10.99.1.1] [--dst 10.99.0.2] [--sport 7000] [--dport 9000]
        [--flows F] [--epoch-ns 10000000] [--offset-us 3000]
        [--spread-us 2000]

Every epoch of the trace carries exactly K datagrams of BYTES bytes of UDP
payload (F flows in turn, source ports SPORT..SPORT+F-1), all within
[OFFSET, OFFSET + SPREAD) microseconds of the epoch's start, so a replay
that starts on an epoch boundary (tpm-replay --realtime shifts the trace by
a whole number of epochs) counts them in that epoch even when it runs a
few milliseconds late.  Timestamps start at 0 (epoch 0).

Prints one JSON object: the epochs, the payload bytes per epoch and per
flow per epoch ("volume" as the monitor counts it: UDP length - 8).
Standard library only; nanosecond pcap.
"""
import argparse
import ipaddress
import json
import struct
import sys


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def udp_frame(src, dst, sport, dport, size, ident):
    payload = bytes((ident + i) & 0xFF for i in range(size))
    udp_len = 8 + size
    s, d = ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed
    pseudo = s + d + struct.pack("!BBH", 0, 17, udp_len)
    udp = struct.pack("!HHHH", sport, dport, udp_len, 0) + payload
    c = csum(pseudo + udp) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", c) + udp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, ident & 0xFFFF,
                     0x4000, 64, 17, 0, s, d)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    eth = bytes.fromhex("029900000002" "029901000001") + b"\x08\x00"
    return eth + ip + udp


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, required=True)
    ap.add_argument("--per-epoch", type=int, required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--src", default="10.99.1.1")
    ap.add_argument("--dst", default="10.99.0.2")
    ap.add_argument("--sport", type=int, default=7000)
    ap.add_argument("--dport", type=int, default=9000)
    ap.add_argument("--flows", type=int, default=1)
    ap.add_argument("--epoch-ns", type=int, default=10_000_000)
    ap.add_argument("--offset-us", type=int, default=3000)
    ap.add_argument("--spread-us", type=int, default=2000)
    a = ap.parse_args()
    if not (0 < a.size <= 1472 and a.per_epoch > 0 and a.epochs > 0
            and a.flows > 0):
        sys.exit("tem-trace.py: sizes and counts must be positive "
                 "(size <= 1472)")
    if (a.offset_us + a.spread_us) * 1000 > a.epoch_ns:
        sys.exit("tem-trace.py: offset + spread exceed the epoch")

    per_flow = {}
    with open(a.out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        n = 0
        for e in range(a.epochs):
            for k in range(a.per_epoch):
                t = (e * a.epoch_ns + a.offset_us * 1000
                     + k * a.spread_us * 1000 // a.per_epoch)
                fl = n % a.flows
                frame = udp_frame(a.src, a.dst, a.sport + fl, a.dport,
                                  a.size, n)
                f.write(struct.pack("<IIII", t // 10**9, t % 10**9,
                                    len(frame), len(frame)))
                f.write(frame)
                key = "%d" % (a.sport + fl)
                per_flow[key] = per_flow.get(key, 0) + a.size
                n += 1
    json.dump({"epochs": a.epochs, "packets": n,
               "volume_per_epoch": a.per_epoch * a.size,
               "volume_per_flow_total": per_flow,
               "src": a.src, "dst": a.dst, "dport": a.dport}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
