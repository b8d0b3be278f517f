#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Ground truth and comparison for tests/ovs-vhost.sh, standard library only.

    vhost-check.py flows PCAP
        prints one line per IPv4 5-tuple of the capture, in the form
        --flow takes below: SRC:SPORT:DST:DPORT:PROTO:PACKETS:BYTES, where
        BYTES is the sum of the frames' wire lengths (the Ethernet frame
        without CRC, as the monitor counts it); then, on stderr, the number
        of frames that are not IPv4 (none is expected).  Reads the file
        with tests/pcaplib.py, no libtpm code.

    vhost-check.py check --pk EVENT --bt EVENT [--group GROUP]
        --flow F [--flow F ...] [--quiet] < REPORTS
        reads `ovs-appctl tpm/reports` (one JSON object per line) and sums,
        per group, the values of event --pk (sum(packets)) and of event
        --bt (sum(bytes)), over every epoch.  Each --flow is a 5-tuple
        with its exact packets and bytes, [PORT@]SRC:SPORT:DST:DPORT:PROTO:
        PACKETS:BYTES, PORT the interface it entered the switch on.  The
        events group by GROUP: 5tuple (the default), in_port (the expected
        group of a port is the sum of its flows) or in_port,5tuple.  Every
        expected group must be reported with exactly its sums, and no
        other group by either event; no (epoch, group) may come twice.
        Prints a table (OK, DIFF, MISSING, EXTRA lines) unless --quiet.
        Exit status 0 if everything matches, else 1.
"""
import argparse
import json
import struct
import sys

from pcaplib import LINKTYPE_ETHERNET, ethernet_payload, records


def flow_key(src, sport, dst, dport, proto):
    return (src, int(sport), dst, int(dport), int(proto))


def key_text(k):
    if len(k) == 1:
        return "in_port %s" % k
    if len(k) == 6:
        return "in_port %s: %s" % (k[0], key_text(k[1:]))
    return "%s:%d -> %s:%d proto %d" % (k[0], k[1], k[2], k[3], k[4])


def cmd_flows(args):
    flows = {}
    other = 0
    for _, wirelen, data in records(args.pcap, (LINKTYPE_ETHERNET,),
                                    "link type %d is not Ethernet"):
        ethertype, off = ethernet_payload(data)
        if ethertype != b"\x08\x00" or len(data) < off + 20:
            other += 1
            continue
        ihl = (data[off] & 0x0f) * 4
        proto = data[off + 9]
        src = ".".join(str(b) for b in data[off + 12:off + 16])
        dst = ".".join(str(b) for b in data[off + 16:off + 20])
        sport = dport = 0
        if proto in (6, 17) and len(data) >= off + ihl + 4:
            sport, dport = struct.unpack("!HH", data[off + ihl:off + ihl + 4])
        k = flow_key(src, sport, dst, dport, proto)
        f = flows.setdefault(k, [0, 0])
        f[0] += 1
        f[1] += wirelen
    for k in sorted(flows):
        print("%s:%d:%s:%d:%d:%d:%d" % (k + tuple(flows[k])))
    sys.stderr.write("%d frames not IPv4\n" % other)
    return 0


def group_key(group, port, flow):
    """The key of an expected or reported group: 'flow' (a flow_key())
    and/or 'port', as 'group' says."""
    if group == "in_port":
        return (port,)
    if group == "in_port,5tuple":
        return (port,) + flow
    return flow


def cmd_check(args):
    expect = {}
    for spec in args.flow:
        port, _, spec = spec.rpartition("@")
        p = spec.split(":")
        if len(p) != 7 or (args.group != "5tuple" and not port):
            sys.exit("--flow wants [PORT@]SRC:SPORT:DST:DPORT:PROTO:PACKETS:"
                     "BYTES (PORT with --group %s), got %r"
                     % (args.group, spec))
        k = group_key(args.group, port, flow_key(*p[:5]))
        e = expect.get(k, (0, 0))
        expect[k] = (e[0] + int(p[5]), e[1] + int(p[6]))
    got = {}
    seen = set()
    errors = []
    for n, line in enumerate(sys.stdin, 1):
        line = line.strip()
        if not line:
            continue
        r = json.loads(line)
        ev = r["event"]
        if ev not in (args.pk, args.bt):
            continue
        g = r["group"]
        k = group_key(args.group, g.get("in_port"),
                      flow_key(g.get("nw_src"), g.get("tp_src", 0),
                               g.get("nw_dst"), g.get("tp_dst", 0),
                               g.get("nw_proto", 0)))
        if (ev, r["epoch"], k) in seen:
            errors.append("%s: epoch %d, group %s reported twice"
                          % (ev, r["epoch"], key_text(k)))
        seen.add((ev, r["epoch"], k))
        v = got.setdefault(k, [0, 0])
        v[0 if ev == args.pk else 1] += r["value"]
    lines = []
    for k in sorted(set(expect) | set(got), key=str):
        e = expect.get(k)
        g = got.get(k)
        if e is None:
            lines.append("EXTRA    %s: packets %d, bytes %d"
                         % (key_text(k), g[0], g[1]))
            errors.append("extra group %s" % key_text(k))
        elif g is None:
            lines.append("MISSING  %s: expected packets %d, bytes %d"
                         % (key_text(k), e[0], e[1]))
            errors.append("missing group %s" % key_text(k))
        elif tuple(g) != e:
            lines.append("DIFF     %s: expected packets %d, bytes %d; got "
                         "packets %d, bytes %d"
                         % (key_text(k), e[0], e[1], g[0], g[1]))
            errors.append("wrong sums for %s" % key_text(k))
        else:
            lines.append("OK       %s: packets %d, bytes %d"
                         % (key_text(k), e[0], e[1]))
    if not args.quiet:
        for line in lines:
            print(line)
        for e in errors:
            print("error: " + e)
    return 1 if errors else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("flows")
    p.add_argument("pcap")
    p = sub.add_parser("check")
    p.add_argument("--pk", required=True)
    p.add_argument("--bt", required=True)
    p.add_argument("--group", default="5tuple",
                   choices=("5tuple", "in_port", "in_port,5tuple"))
    p.add_argument("--flow", action="append", default=[])
    p.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    return cmd_flows(args) if args.cmd == "flows" else cmd_check(args)


if __name__ == "__main__":
    sys.exit(main())
