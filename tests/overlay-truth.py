#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Ground truth of an overlay test: tenants' UDP flows counted in captures.

Used by tests/ovs-overlay.sh, independently of the monitor: its own pcap
reader (tests/pcaplib.py; standard library only, no libtpm code).

    overlay-truth.py --vm-addr ADDR [--vm-addr ...] \
        --cap TENANT:TUN_ID:END:FILE [--cap ...] \
        [--sent TENANT:FILE ...] \
        [--underlay FILE:DST:PORT:FROM_NS:SURE_NS] --out TRUTH.json

Each --cap is a classic pcap file (Ethernet link type) taken at one END of
one tenant's overlay: "vm", the VM's interface on the switch (the inner
frames as the VM sends and receives them), or "remote", the remote
tenant's tunnel device (the inner frames as the remote end encapsulates
and decapsulates them).  Every tenant needs both.  The IPv4 and IPv6 UDP
datagrams of each capture are counted per 5-tuple: packets, bytes (the
captured frame's length on the wire: the whole inner Ethernet frame) and
payload (UDP length - 8).  A datagram whose source is a --vm-addr goes
from the VM to the remote end ("vm_tx", encapsulated by the switch), any
other from the remote end to the VM ("vm_rx", decapsulated by it).

Checks (each failure is a line on stderr, and exit status 1):
  * both ends of each tenant saw every 5-tuple with the same packets,
    bytes and payload (the test bed loses nothing, and the tunnel hands
    frames over unchanged);
  * with --sent (overlay-send.py's output, run in that tenant's
    namespace, either end), every flow sent was seen at both ends with
    the packets and payload the sender sent, and the sender had no
    errors;
  * no datagram is truncated or has a UDP length that disagrees with its
    IP length.

Writes TRUTH.json: {"flows": [{"tenant", "tun_id", "dir", "ipver", "src",
"dst", "sport", "dport", "proto", "packets", "bytes", "payload"}, ...]}
(addresses in their compressed text form), and prints the table on
stdout.

--underlay: a capture at the remote hypervisor's underlay port; the
tunnel's outer flows to the switch's address DST and tunnel port PORT,
each datagram counted with its whole frame's length, from SURE_NS on
(when the underlay events were installed) as "underlay" in TRUTH.json
(the same fields but tenant, tun_id, dir and payload).  Datagrams
captured between FROM_NS (before the events were added) and SURE_NS may
or may not have been counted: each flow carries them as "unsure_packets"
and "unsure_bytes", and "underlay_unsure" is their number.
"""
import argparse
import ipaddress
import json
import struct
import sys

from pcaplib import LINKTYPE_ETHERNET, ethernet_payload, records


def datagrams(path, errors):
    """Yields (time ns, (ipver, src, dst, sport, dport), wire length, UDP
    length) of the UDP datagrams of 'path'."""
    for ts, _, wirelen, data in records(path, (LINKTYPE_ETHERNET,),
                                        "link type %d, expected Ethernet",
                                        with_time=True):
        ethertype, off = ethernet_payload(data)
        ip = data[off:]
        if ethertype == b"\x08\x00" and len(ip) >= 20 and ip[0] >> 4 == 4:
            ihl = (ip[0] & 0x0f) * 4
            total = struct.unpack("!H", ip[2:4])[0]
            frag = struct.unpack("!H", ip[6:8])[0]
            if ip[9] != 17 or frag & 0x3fff:
                continue
            ipver, src, dst = 4, ip[12:16], ip[16:20]
            l4, iplen = ip[ihl:], total - ihl
        elif ethertype == b"\x86\xdd" and len(ip) >= 40 and ip[0] >> 4 == 6:
            if ip[6] != 17:         # No extension headers in these tests.
                continue
            ipver, src, dst = 6, ip[8:24], ip[24:40]
            l4, iplen = ip[40:], struct.unpack("!H", ip[4:6])[0]
        else:
            continue
        if len(l4) < 8:
            errors.append("%s: truncated UDP datagram" % path)
            continue
        sport, dport, ulen = struct.unpack("!HHH", l4[:6])
        if ulen < 8 or ulen != iplen:
            errors.append("%s: UDP length %d, IP says %d"
                          % (path, ulen, iplen))
        yield ts, (ipver, str(ipaddress.ip_address(src)),
                   str(ipaddress.ip_address(dst)), sport, dport), wirelen, \
            ulen


def count(path, errors):
    """Returns {(ipver, src, dst, sport, dport): [packets, bytes, payload]}
    for the UDP datagrams of 'path'."""
    out = {}
    for _, key, wirelen, ulen in datagrams(path, errors):
        c = out.setdefault(key, [0, 0, 0])
        c[0] += 1
        c[1] += wirelen
        c[2] += max(ulen - 8, 0)
    return out


def underlay(spec, errors):
    """The tunnel's outer flows to the switch: 'spec' is PATH:DST:PORT:
    FROM_NS:SURE_NS, a capture at the remote hypervisor's underlay port,
    the switch's underlay address DST and the tunnel's UDP port.  Returns
    a list of flows (packets, bytes of the whole frame) of the datagrams
    to DST:PORT captured at or after SURE_NS (when the underlay events
    were installed), each with the packets and bytes captured between
    FROM_NS (before they were) and SURE_NS, which may or may not have
    been counted, and the number of those."""
    path, rest = spec.split(":", 1)
    rest, from_ns, sure_ns = rest.rsplit(":", 2)
    dst, port = rest.rsplit(":", 1)
    dst = str(ipaddress.ip_address(dst))
    out, unsure = {}, 0
    for ts, key, wirelen, _ in datagrams(path, errors):
        if key[2] != dst or key[4] != int(port) or ts < int(from_ns):
            continue
        c = out.setdefault(key, [0, 0, 0, 0])
        i = 0 if ts >= int(sure_ns) else 2
        unsure += i == 2
        c[i] += 1
        c[i + 1] += wirelen
    flows = [{"ipver": k[0], "src": k[1], "dst": k[2], "sport": k[3],
              "dport": k[4], "proto": 17, "packets": c[0], "bytes": c[1],
              "unsure_packets": c[2], "unsure_bytes": c[3]}
             for k, c in sorted(out.items())]
    return flows, unsure


def tuple_text(ipver, src, dst, sport, dport):
    if ipver == 6:
        return "udp6 [%s]:%d > [%s]:%d" % (src, sport, dst, dport)
    return "udp %s:%d > %s:%d" % (src, sport, dst, dport)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vm-addr", action="append", required=True)
    ap.add_argument("--cap", action="append", required=True)
    ap.add_argument("--sent", action="append", default=[])
    ap.add_argument("--underlay")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    vm_addrs = {str(ipaddress.ip_address(a)) for a in args.vm_addr}

    errors = []
    caps = {}                   # tenant -> {"tun_id": V, "vm": {}, ...}
    for spec in args.cap:
        tenant, tun_id, end, path = spec.split(":", 3)
        if end not in ("vm", "remote"):
            raise ValueError("--cap %r: END is vm or remote" % spec)
        t = caps.setdefault(tenant, {"tun_id": int(tun_id)})
        t[end] = count(path, errors)

    flows = []
    for tenant in sorted(caps):
        t = caps[tenant]
        if "vm" not in t or "remote" not in t:
            raise ValueError("tenant %s: needs a vm and a remote capture"
                             % tenant)
        for key in sorted(set(t["vm"]) | set(t["remote"])):
            vm = t["vm"].get(key)
            remote = t["remote"].get(key)
            if vm != remote:
                errors.append("tenant %s, %s: the VM's end saw %s, the "
                              "remote end %s (packets, bytes, payload)"
                              % (tenant, tuple_text(*key), vm, remote))
            c = vm or remote
            flows.append({
                "tenant": tenant, "tun_id": t["tun_id"],
                "dir": "vm_tx" if key[1] in vm_addrs else "vm_rx",
                "ipver": key[0], "src": key[1], "dst": key[2],
                "sport": key[3], "dport": key[4], "proto": 17,
                "packets": c[0], "bytes": c[1], "payload": c[2]})

    for spec in args.sent:
        tenant, path = spec.split(":", 1)
        with open(path) as f:
            sent = json.load(f)
        for s in sent["flows"]:
            src = str(ipaddress.ip_address(s["src"]))
            dst = str(ipaddress.ip_address(s["dst"]))
            key = (ipaddress.ip_address(src).version, src, dst, s["sport"],
                   s["dport"])
            if s["errors"]:
                errors.append("tenant %s, %s: %d failed sends"
                              % (tenant, tuple_text(*key), s["errors"]))
            for end in ("vm", "remote"):
                c = caps.get(tenant, {}).get(end, {}).get(key)
                if c is None or c[0] != s["packets"] \
                        or c[2] != s["payload"]:
                    errors.append("tenant %s, %s: sent %d datagrams, %d B "
                                  "payload; the %s end saw %s"
                                  % (tenant, tuple_text(*key), s["packets"],
                                     s["payload"], end,
                                     "%d, %d B" % (c[0], c[2]) if c
                                     else "nothing"))

    result = {"flows": flows}
    if args.underlay:
        result["underlay"], result["underlay_unsure"] = underlay(
            args.underlay, errors)
        if not result["underlay"]:
            errors.append("--underlay: no datagram to the tunnel port")
    with open(args.out, "w") as f:
        json.dump(result, f, sort_keys=True, indent=1)
        f.write("\n")
    print("%-6s %-7s %-6s %-46s %7s %8s" % ("tenant", "tun_id", "dir",
                                             "inner 5-tuple", "packets",
                                             "bytes"))
    for r in flows:
        print("%-6s %-7d %-6s %-46s %7d %8d"
              % (r["tenant"], r["tun_id"], r["dir"],
                 tuple_text(r["ipver"], r["src"], r["dst"], r["sport"],
                            r["dport"]), r["packets"], r["bytes"]))
    for e in errors[:20]:
        sys.stderr.write("%s\n" % e)
    if len(errors) > 20:
        sys.stderr.write("(%d more errors)\n" % (len(errors) - 20))
    return 1 if errors else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError) as e:
        sys.stderr.write("overlay-truth.py: %s\n" % e)
        sys.exit(1)
