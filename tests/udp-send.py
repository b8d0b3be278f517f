#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Sends UDP datagrams on a schedule and says exactly what it sent.

Used by tests/ovs-integration.sh, run inside the sending network
namespace.  Standard library only; its schedule is tests/sendlib.py's,
shared with tests/overlay-send.py.

    udp-send.py --src 10.99.0.1 --dst 10.99.0.2 \
        --flow SPORT:DPORT:COUNT:SIZES:GAP_US[:START_US] [--flow ...] \
        [--align-us US | --start-ns NS] [--epoch-ns NS] [--seed N] \
        [--linger-ms MS]

Each --flow sends COUNT datagrams (0: until SIGTERM or SIGINT) from port
SPORT to port DPORT, one every GAP_US microseconds (0: back to back),
starting START_US microseconds after the common start time.  SIZES is the
UDP payload size in bytes: N, a list N,N,... used in turn, or rA-B for
sizes drawn uniformly from [A, B] (seeded by --seed, so reproducible).
Datagrams due at the same time are interleaved round-robin over the
flows.

--align-us makes the common start time the next epoch boundary (wall
clock, multiples of --epoch-ns, as the monitor counts epochs) plus US
microseconds, at least 20 ms from now, so a short burst falls within one
epoch.  --start-ns gives the common start time instead, as wall-clock
nanoseconds: senders started separately (in two namespaces) then send at
the same time; one started too late sends at once (its timestamps say
so).

--linger-ms makes it sleep MS milliseconds after the last send before it
prints and exits: on a machine whose CPUs the switch's polling threads
fill, the sender's exit would otherwise delay them while they receive
the burst.

Prints one JSON object on stdout: wall-clock (CLOCK_REALTIME, the
monitor's clock) nanoseconds just before the first and just after the
last successful send, overall and per flow, with the number of datagrams
and payload bytes sent successfully and the number of failed sends
("errors").
"""
import argparse
import json
import random
import signal
import socket
import sys
import time

from sendlib import send_flows


def parse_sizes(text, rng):
    if text.startswith("r"):
        lo, hi = (int(x) for x in text[1:].split("-"))
        if not 0 <= lo <= hi <= 65507:
            raise ValueError("bad size range %r" % text)
        return lambda k: rng.randint(lo, hi)
    sizes = [int(x) for x in text.split(",")]
    if not sizes or any(not 0 <= s <= 65507 for s in sizes):
        raise ValueError("bad sizes %r" % text)
    return lambda k: sizes[k % len(sizes)]


def parse_flow(spec, rng, dst):
    parts = spec.split(":")
    if len(parts) not in (5, 6):
        raise ValueError("--flow wants SPORT:DPORT:COUNT:SIZES:GAP_US"
                         "[:START_US], got %r" % spec)
    if int(parts[2]) < 0 or int(parts[4]) < 0:
        raise ValueError("negative count or gap in %r" % spec)
    return {
        "dst": dst,
        "sport": int(parts[0]),
        "dport": int(parts[1]),
        "count": int(parts[2]),         # 0: until a signal
        "size": parse_sizes(parts[3], rng),
        "gap_ns": int(parts[4]) * 1000,
        "start_ns": int(parts[5]) * 1000 if len(parts) == 6 else 0,
        "packets": 0,
        "payload": 0,
        "errors": 0,
        "t_first": None,
        "t_last": None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--dst", required=True)
    ap.add_argument("--flow", action="append", required=True)
    ap.add_argument("--epoch-ns", type=int, default=10000000)
    ap.add_argument("--align-us", type=int)
    ap.add_argument("--start-ns", type=int)
    ap.add_argument("--linger-ms", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    try:
        flows = [parse_flow(f, rng, args.dst) for f in args.flow]
    except ValueError as e:
        ap.error(str(e))

    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(True))

    socks = []
    for f in flows:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        s.bind((args.src, f["sport"]))
        socks.append(s)

    if args.align_us is not None and args.start_ns is not None:
        ap.error("--align-us and --start-ns exclude each other")
    now = time.time_ns()
    if args.start_ns is not None:
        t0 = args.start_ns
    elif args.align_us is not None:
        e = args.epoch_ns
        t0 = ((now + 20000000) // e + 1) * e + args.align_us * 1000
    else:
        t0 = now + 1000000

    t_first, t_last = send_flows(flows, socks, t0, stop)

    if args.linger_ms > 0 and not stop:
        time.sleep(args.linger_ms / 1000)

    out = {
        "t_first": t_first,
        "t_last": t_last,
        "flows": [{key: f[key] for key in ("sport", "dport", "packets",
                                             "payload", "errors", "t_first",
                                             "t_last")}
                  for f in flows],
    }
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
