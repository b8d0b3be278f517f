#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Sends UDP flows over IPv4 and IPv6 on a schedule; says what it sent.

Used by tests/ovs-overlay.sh, run inside a tenant's network namespace.
Standard library only; its schedule is tests/sendlib.py's, shared with
tests/udp-send.py.

    overlay-send.py --flow SRC,SPORT,DST,DPORT,COUNT,SIZE,GAP_US [--flow ...]
                    [--start-ns NS] [--linger-ms MS]

Each --flow sends COUNT datagrams of SIZE payload bytes from SRC:SPORT to
DST:DPORT (IPv4 or IPv6 addresses; a flow's two addresses are of one
family), one every GAP_US microseconds, from the common start time
(--start-ns, wall-clock nanoseconds, so that senders in several
namespaces run together; default: 1 ms from now).  Datagrams due at the
same time go out round-robin over the flows.

Every flow's socket stays bound to SRC:SPORT until the program exits,
--linger-ms after its last send: a peer that sends the reverse 5-tuple at
the same time then finds a bound socket (its datagrams queue there, never
read) rather than a closed port and its ICMP errors.

Prints one JSON object on stdout: per flow, the addresses and ports, the
datagrams and payload bytes sent successfully and the failed sends
("errors"), and overall the wall-clock nanoseconds of the first and last
successful send.
"""
import argparse
import ipaddress
import json
import socket
import sys
import time

from sendlib import send_flows


def parse_flow(spec):
    parts = spec.split(",")
    if len(parts) != 7:
        raise ValueError("--flow wants SRC,SPORT,DST,DPORT,COUNT,SIZE,GAP_US,"
                         " got %r" % spec)
    src = ipaddress.ip_address(parts[0])
    dst = ipaddress.ip_address(parts[2])
    if src.version != dst.version:
        raise ValueError("--flow %r mixes IPv4 and IPv6" % spec)
    count, size, gap = int(parts[4]), int(parts[5]), int(parts[6])
    if count < 1 or gap < 0 or not 0 <= size <= 65507:
        raise ValueError("bad count, size or gap in %r" % spec)
    return {
        "src": str(src), "sport": int(parts[1]),
        "dst": str(dst), "dport": int(parts[3]),
        "family": socket.AF_INET if src.version == 4 else socket.AF_INET6,
        "count": count, "size": lambda k: size, "gap_ns": gap * 1000,
        "start_ns": 0, "packets": 0, "payload": 0, "errors": 0,
        "t_first": None, "t_last": None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--flow", action="append", required=True)
    ap.add_argument("--start-ns", type=int)
    ap.add_argument("--linger-ms", type=int, default=0)
    args = ap.parse_args()
    try:
        flows = [parse_flow(f) for f in args.flow]
    except ValueError as e:
        ap.error(str(e))

    socks = []
    for f in flows:
        s = socket.socket(f["family"], socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        s.bind((f["src"], f["sport"]))
        socks.append(s)

    t0 = args.start_ns if args.start_ns is not None else time.time_ns() \
        + 1000000
    t_first, t_last = send_flows(flows, socks, t0)

    if args.linger_ms > 0:
        time.sleep(args.linger_ms / 1000)
    out = {
        "t_first": t_first,
        "t_last": t_last,
        "flows": [{key: f[key] for key in ("src", "sport", "dst", "dport",
                                             "packets", "payload",
                                             "errors")}
                  for f in flows],
    }
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
