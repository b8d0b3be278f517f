#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compares the monitor's overlay reports with the captures' ground truth.

Used by tests/ovs-overlay.sh.  Reads `ovs-appctl tpm/reports` (one JSON
object per line) on stdin and the ground truth of overlay-truth.py, adds
up each event's values per group over all its reports, and compares them
EXACTLY with the truth:

    overlay-reports.py --truth TRUTH.json \
        --event NAME:METRIC:SCOPE [--event ...] \
        [--refused NAME=MESSAGE ...] [--ignore-net CIDR ...] [--quiet]

METRIC is "packets" (the event's predicate is sum(packets) > 0) or
"bytes" (sum(bytes) > 0: the inner Ethernet frame's length).  SCOPE says
which groups the event must report and with which values:

  VNI    a tenant's event (filter tun_id=VNI, group=5tuple): each inner
         5-tuple of that tenant, once, the group carrying "tun_id": VNI;
  all    an event without tun_id (group=5tuple): each inner 5-tuple of
         every tenant, once per tenant ("tun_id" tells them apart, so two
         tenants' equal 5-tuples are never merged);
  tun    group=tun_id: one group {"tun_id": VNI} per tenant, the total of
         its flows;
  underlay  an underlay event (group=5tuple): each outer 5-tuple of the
         truth's "underlay" list, without "tun_id", with the packets or
         bytes (the whole frame) captured on the underlay; --ignore-net
         does not apply to it.  A flow's datagrams captured while the
         events were being added ("unsure_packets", "unsure_bytes") may or
         may not be counted: its sum must lie between the sure value and
         the sure value plus those.

A report's group is read field by field: "nw_src"/"ipv6_src" and
"nw_dst"/"ipv6_dst" are addresses (compared as addresses, so any text
form of an IPv6 address does), "tp_src", "tp_dst", "nw_proto" and
"tun_id" numbers.  Groups whose addresses fall in an --ignore-net (the
underlay: the outer headers of the tunnel packets, which an event without
tun_id may count too) are listed, not compared.  --refused names an event
that tpm/event-add refused (the message is shown; all its groups are
missing).

Checks, per event: every expected group is reported with exactly the
expected sum; no other group (outside --ignore-net) is reported; no
(epoch, group) is reported twice.  Prints a table per event (OK, DIFF,
MISSING, EXTRA lines) unless --quiet; exit status 0 if every check
passes, else 1.
"""
import argparse
import ipaddress
import json
import sys

ADDR_FIELDS = {"nw_src": "src", "ipv6_src": "src",
               "nw_dst": "dst", "ipv6_dst": "dst"}


def norm_addr(text):
    if "/" in text:
        return str(ipaddress.ip_network(text, strict=False))
    return str(ipaddress.ip_address(text))


def canon(group):
    """A hashable, comparable form of a report's group object."""
    items = []
    for k, v in group.items():
        if k in ADDR_FIELDS:
            items.append((ADDR_FIELDS[k], norm_addr(v)))
        else:
            items.append((k, v))
    return tuple(sorted(items))


def expected_group(flow, with_tun):
    g = {"nw_src" if flow["ipver"] == 4 else "ipv6_src": flow["src"],
         "nw_dst" if flow["ipver"] == 4 else "ipv6_dst": flow["dst"],
         "tp_src": flow["sport"], "tp_dst": flow["dport"],
         "nw_proto": flow["proto"]}
    if with_tun:
        g["tun_id"] = flow["tun_id"]
    return canon(g)


def show(key):
    d = dict(key)
    if "src" in d and "tp_src" in d:
        v6 = ":" in d["src"]
        fmt = "[%s]:%s > [%s]:%s" if v6 else "%s:%s > %s:%s"
        text = ("udp6 " if v6 else "udp ") + fmt % (
            d["src"], d["tp_src"], d["dst"], d["tp_dst"])
        rest = {k: v for k, v in d.items()
                if k not in ("src", "dst", "tp_src", "tp_dst", "tun_id")
                and not (k == "nw_proto" and v == 17)}
        text += "".join(" %s=%s" % kv for kv in sorted(rest.items()))
    else:
        text = " ".join("%s=%s" % kv for kv in key if kv[0] != "tun_id")
    tun = ("tun_id=%s" % d["tun_id"]) if "tun_id" in d else "no tun_id"
    return "%-13s %s" % (tun, text)


def in_nets(key, nets):
    for k, v in key:
        if k in ("src", "dst"):
            a = ipaddress.ip_network(v, strict=False)
            if any(a.version == n.version and a.subnet_of(n) for n in nets):
                return True
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--truth", required=True)
    ap.add_argument("--event", action="append", required=True)
    ap.add_argument("--refused", action="append", default=[])
    ap.add_argument("--ignore-net", action="append", default=[])
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    with open(args.truth) as f:
        truth = json.load(f)
    flows, underlay = truth["flows"], truth.get("underlay", [])
    nets = [ipaddress.ip_network(n) for n in args.ignore_net]
    refused = dict(r.split("=", 1) for r in args.refused)

    events = {}
    for spec in args.event:
        name, metric, scope = spec.split(":")
        if metric not in ("packets", "bytes"):
            ap.error("--event %r: METRIC is packets or bytes" % spec)
        expect = {}
        slack = {}
        if scope == "underlay":
            for fl in underlay:
                key = expected_group(fl, False)
                expect[key] = expect.get(key, 0) + fl[metric]
                slack[key] = slack.get(key, 0) + fl.get("unsure_" + metric,
                                                        0)
        for fl in flows if scope != "underlay" else []:
            if scope == "tun":
                key = canon({"tun_id": fl["tun_id"]})
            elif scope == "all" or int(scope) == fl["tun_id"]:
                key = expected_group(fl, True)
            else:
                continue
            expect[key] = expect.get(key, 0) + fl[metric]
        events[name] = {"metric": metric, "scope": scope, "expect": expect,
                        "slack": slack, "got": {}, "seen": set(), "dups": 0,
                        "reports": 0}

    bad_lines = []
    for n, line in enumerate(sys.stdin, 1):
        line = line.strip()
        if not line:
            continue
        try:
            r = json.loads(line)
            ev = events.get(r["event"])
            if ev is None:
                continue
            key = canon(r["group"])
            value = r["value"]
            epoch = r["epoch"]
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            bad_lines.append("line %d (%s): %s" % (n, e, line[:200]))
            continue
        ev["reports"] += 1
        if (epoch, key) in ev["seen"]:
            ev["dups"] += 1
        ev["seen"].add((epoch, key))
        ev["got"][key] = ev["got"].get(key, 0) + value

    failed = bool(bad_lines)
    out = []
    for line in bad_lines[:5]:
        out.append("unreadable report %s" % line)
    for name, ev in events.items():
        scope = {"all": "no tun_id, group=5tuple",
                 "tun": "group=tun_id",
                 "underlay": "underlay, group=5tuple"}.get(ev["scope"],
                                            "tun_id=%s, group=5tuple"
                                            % ev["scope"])
        head = "event %s (%s, sum(%s)): " % (name, scope, ev["metric"])
        rows = []
        ok = 0
        if name in refused:
            rows.append("  REFUSED by tpm/event-add: %s" % refused[name])
        for key in sorted(set(ev["expect"]) | set(ev["got"])):
            want = ev["expect"].get(key)
            got = ev["got"].get(key)
            slack = ev["slack"].get(key, 0)
            if slack and want == 0 and got is None:
                ok += 1
                rows.append("  OK      %s  nothing (0 sure, up to %d "
                            "unsure)" % (show(key), slack))
            elif slack and got is not None and want <= got <= want + slack:
                ok += 1
                rows.append("  OK      %s  %s (%d sure, up to %d unsure)"
                            % (show(key), got, want, slack))
            elif want is None and in_nets(key, nets) \
                    and ev["scope"] != "underlay":
                rows.append("  ignored %s  got %s (underlay)"
                            % (show(key), got))
            elif want is None:
                rows.append("  EXTRA   %s  expected nothing, got %s"
                            % (show(key), got))
            elif got is None:
                rows.append("  MISSING %s  expected %s, got nothing"
                            % (show(key), want))
            elif got != want:
                rows.append("  DIFF    %s  expected %s, got %s (%+d)"
                            % (show(key), want, got, got - want))
            else:
                ok += 1
                rows.append("  OK      %s  %s" % (show(key), got))
        if ev["dups"]:
            rows.append("  %d (epoch, group) pairs reported twice"
                        % ev["dups"])
        bad = [r for r in rows if not r.startswith(("  OK", "  ignored"))]
        failed = failed or bool(bad)
        out.append(head + ("PASS" if not bad else "FAIL")
                   + " (%d of %d groups exact, %d reports)"
                   % (ok, len(ev["expect"]), ev["reports"]))
        out.extend(rows)
    if not args.quiet:
        print("\n".join(out))
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError) as e:
        sys.stderr.write("overlay-reports.py: %s\n" % e)
        sys.exit(1)
