#!/usr/bin/env python3
"""Helper of tpm/bench-ovs.sh (python3 standard library only).

  pcap FILE            writes the traffic: N UDP/IPv4 flows of 64-byte
                       frames, round-robin (one packet per flow in turn)
  events CTL           installs the monitor's events through the
                       ovs-vswitchd control socket CTL (JSON-RPC, the
                       protocol of ovs-appctl, one connection for all)
  parse ...            turns one run's outputs into one JSON line
  table RESULTS        prints the per-run table, medians and ratios

Addresses are only written into the pcap file and into event filters;
nothing is sent anywhere.
"""

import argparse
import json
import re
import socket
import statistics
import struct
import sys
import time


# Flow i goes to 10.(100 + i // 256).(i % 256).D, i.e. prefix i of the
# events' 512 nw_dst/24 prefixes (flows and prefixes: the same numbering).
def prefix(k):
    return "10.%d.%d.0/24" % (100 + k // 256, k % 256)


def flow_addrs(i):
    src = bytes((10, 1, i // 200, 1 + i % 200))
    dst = bytes((10, 100 + i // 256, i % 256, 1 + (i * 7) % 250))
    return src, dst, 10000 + i, 20000 + i % 1000


def ip_checksum(hdr):
    s = sum(struct.unpack("!%dH" % (len(hdr) // 2), hdr))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff


def frame(i, size):
    src, dst, sport, dport = flow_addrs(i)
    ip_len = size - 14
    udp_len = ip_len - 20
    eth = bytes.fromhex("020000000002" "020000000001" "0800")
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, i & 0xffff, 0, 64,
                     17, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
    udp = struct.pack("!HHHH", sport, dport, udp_len, 0)
    return eth + ip + udp + bytes(udp_len - 8)


def cmd_pcap(a):
    if a.flows > 65536 or a.size < 60:
        sys.exit("bench-ovs.py: at most 65536 flows, frames of >= 60 bytes")
    with open(a.file, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for r in range(a.repeat):
            for i in range(a.flows):
                p = frame(i, a.size)
                f.write(struct.pack("<IIII", 0, r * a.flows + i, len(p),
                                    len(p)))
                f.write(p)


# The 8 events of one prefix P: count(), sum(volume) and max(ttl), per
# 5-tuple and per nw_dst/24, with thresholds no 10 ms of this traffic
# reaches (so reports stay out of the measurement).
EVENT_KINDS = [
    ("c5", "ip", "count() > 1000000000", "5tuple"),
    ("cd", "ip", "count() > 1000000000", "nw_dst/24"),
    ("v5", "ip", "sum(volume) > 1000GB", "5tuple"),
    ("vd", "ip", "sum(volume) > 1000GB", "nw_dst/24"),
    ("t5", "ip", "max(ttl) > 255", "5tuple"),
    ("td", "ip", "max(ttl) > 255", "nw_dst/24"),
    ("uc5", "udp", "count() > 1000000000", "5tuple"),
    ("uvd", "udp", "sum(volume) > 1000GB", "nw_dst/24"),
]


def event_defs(n_prefixes, per_prefix):
    if per_prefix > len(EVENT_KINDS):
        sys.exit("bench-ovs.py: at most %d events per prefix"
                 % len(EVENT_KINDS))
    for k in range(n_prefixes):
        for name, proto, pred, group in EVENT_KINDS[:per_prefix]:
            yield ("p%d_%s" % (k, name),
                   ["filter=%s,nw_dst=%s" % (proto, prefix(k)),
                    "predicate=%s" % pred, "group=%s" % group,
                    "interval=10ms"])


class Unixctl:
    """Minimal JSON-RPC client of an OVS unixctl socket."""

    def __init__(self, path, timeout=60):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = ""
        self.dec = json.JSONDecoder()
        self.id = 0

    def call(self, method, params):
        self.id += 1
        msg = {"method": method, "params": params, "id": self.id}
        self.s.sendall(json.dumps(msg).encode())
        while True:
            text = self.buf.lstrip()
            if text:
                try:
                    obj, end = self.dec.raw_decode(text)
                except ValueError:
                    obj = None
                if obj is not None:
                    self.buf = text[end:]
                    if obj.get("id") != self.id:
                        continue
                    return obj.get("result"), obj.get("error")
            data = self.s.recv(65536)
            if not data:
                raise OSError("connection closed by ovs-vswitchd")
            self.buf += data.decode()


def cmd_events(a):
    c = Unixctl(a.ctl)
    t0 = time.monotonic()
    n = 0
    for name, words in event_defs(a.prefixes, a.per_prefix):
        result, error = c.call("tpm/event-add", [name] + words)
        if error:
            sys.exit("tpm/event-add %s %s: %s"
                     % (name, " ".join(words), error))
        n += 1
    print("%d events installed in %.1f s" % (n, time.monotonic() - t0))


# pmd-perf-show (OVS 3.1 lib/dpif-netdev-perf.c, pmd_perf_format_overall_stats)
PERF_RE = {
    "duration_s": r"Measurement duration:\s+([\d.]+) s",
    "iterations": r"Iterations:\s+(\d+)\s+\(([\d.]+) us/it\)",
    "used_tsc_pct": r"Used TSC cycles:\s+\d+\s+\(\s*([\d.]+) % of total",
    "idle_it": r"idle iterations:\s+(\d+)\s+\(\s*([\d.]+) % of used",
    "busy_it": r"busy iterations:\s+(\d+)\s+\(\s*([\d.]+) % of used",
    "rx": r"Rx packets:\s+(\d+)\s+\((\d+) Kpps, (\d+) cycles/pkt\)",
    "emc_pct": r"EMC hits:\s+\d+\s+\(\s*([\d.]+) %\)",
    "smc_pct": r"SMC hits:\s+\d+\s+\(\s*([\d.]+) %\)",
    "megaflow_pct": r"Megaflow hits:\s+\d+\s+\(\s*([\d.]+) %",
    "upcalls": r"Upcalls:\s+(\d+)",
    "tx": r"Tx packets:\s+(\d+)\s+\((\d+) Kpps\)",
    "tx_batch": r"Tx batches:\s+\d+\s+\(([\d.]+) pkts/batch\)",
}

# pmd-stats-show
STATS_RE = {
    "proc_cycles_pct": r"processing cycles:\s+\d+\s+\(([\d.]+)%\)",
    "proc_cpp": r"avg processing cycles per packet:\s+([\d.]+)",
    "cycles_per_it": r"avg cycles per iteration:\s+([\d.]+)",
}

# tpm/stats (ovs-patches/tpm-ovs.c, tpm_unixctl_stats)
TPM_RE = {
    "tpm_packets": r"packets: (\d+) \(non-IP (\d+)\)",
    "tpm_flows_live": r"flows: (\d+) live",
    "tpm_matches": r"matches: (\d+), over max_matches (\d+), out of "
                   r"summary slots (\d+)",
    "tpm_triggers": r"triggers: (\d+) instances",
    "tpm_sweeps": r"sweeps: done (\d+), unfinished (\d+), forced (\d+); "
                  r"steps idle (\d+), steps while saturated (\d+)",
    "tpm_sweep_ns": r"sweep time: p50 (\d+) ns, p99 (\d+) ns, max (\d+) ns",
    "tpm_reports": r"reports: (\d+), dropped (\d+); epochs (\d+), "
                   r"skipped (\d+)",
    "tpm_events": r"events: (\d+),",
}


def grab(text, table):
    out = {}
    for key, rx in table.items():
        m = re.search(rx, text)
        if m:
            v = [float(g) if "." in g else int(g) for g in m.groups()]
            out[key] = v[0] if len(v) == 1 else v
    return out


def cmd_parse(a):
    perf = open(a.perf).read()
    r = {"round": a.round, "config": a.config, "mem": a.mem}
    p = grab(perf, PERF_RE)
    if "rx" not in p:
        r["error"] = "no Rx packets line in pmd-perf-show"
    else:
        r["rx_packets"], r["kpps"], r["cpp"] = p["rx"]
        r["us_per_it"] = p["iterations"][1]
        r["iterations"] = p["iterations"][0]
        r["busy_pct"] = p["busy_it"][1]
        r["duration_s"] = p.get("duration_s")
        for k in ("emc_pct", "smc_pct", "megaflow_pct", "upcalls",
                  "used_tsc_pct", "tx_batch"):
            r[k] = p.get(k)
        r["tx_kpps"] = p["tx"][1] if "tx" in p else 0
    if a.stats:
        r.update(grab(open(a.stats).read(), STATS_RE))
    if a.tpm:
        r["tpm"] = grab(open(a.tpm).read(), TPM_RE)
    if a.steal is not None:
        r["steal_pct"] = a.steal
    if a.other_load is not None:
        r["other_load_pct"] = a.other_load
    if a.foreign is not None:
        r["foreign"] = a.foreign
    print(json.dumps(r, sort_keys=True))


def med(v):
    return statistics.median(v) if v else float("nan")


def cmd_table(a):
    runs = [json.loads(l) for l in open(a.results) if l.strip()]
    names = {"A": "stock", "B": "patched, no events",
             "C": "patched, %s events" % a.events}
    print()
    print("Per run (pmd-perf-show over the measurement window; cycles/pkt "
          "= busy-iteration TSC cycles / Rx packets):")
    print()
    hdr = ("round", "cfg", "Mpps", "cyc/pkt", "us/it", "steal%",
           "other%", "foreign", "tpm")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for r in runs:
        if "error" in r:
            print("| %s | %s | error: %s |" % (r["round"], r["config"],
                                               r["error"]))
            continue
        t = r.get("tpm") or {}
        tinfo = ""
        if t:
            m = t.get("tpm_matches", [0, 0, 0])
            sw = t.get("tpm_sweeps", [0, 0, 0, 0, 0])
            ns = t.get("tpm_sweep_ns", [0, 0, 0])
            tinfo = ("events %s, flows %s, matches %s, sweeps %s "
                     "unfinished %s, sweep p50/p99 %.0f/%.0f us"
                     % (t.get("tpm_events", "?"),
                        t.get("tpm_flows_live", "?"), m[0], sw[0], sw[1],
                        ns[0] / 1000, ns[1] / 1000))
        print("| %s | %s | %.2f | %s | %.2f | %s | %s | %s | %s |"
              % (r["round"], r["config"], r["kpps"] / 1000, r["cpp"],
                 r["us_per_it"],
                 "%.1f" % r["steal_pct"] if "steal_pct" in r else "?",
                 "%.0f" % r["other_load_pct"] if "other_load_pct" in r
                 else "?",
                 r.get("foreign", "?"), tinfo))
    ok = [r for r in runs if "error" not in r]
    stock = [r for r in ok if r["config"] == "A"]
    sk = med([r["kpps"] for r in stock])
    sc = med([r["cpp"] for r in stock])
    print()
    print("Medians (ratios of medians to stock):")
    print()
    print("| config | runs | Mpps | vs stock | cycles/pkt | vs stock "
          "| target (rate) |")
    print("|---|---|---|---|---|---|---|")
    targets = {"B": 0.97, "C": 0.85}
    for c in ("A", "B", "C"):
        rs = [r for r in ok if r["config"] == c]
        if not rs:
            continue
        k = med([r["kpps"] for r in rs])
        cp = med([r["cpp"] for r in rs])
        tgt = ""
        if c in targets and sk == sk:
            t = targets[c]
            tgt = ">= %.0f%%: %s" % (100 * t,
                                     "met" if k / sk >= t else
                                     "MISSED by %.1f points"
                                     % (100 * (t - k / sk)))
        print("| %s %s | %d | %.2f | %.3f | %.0f | %.3f | %s |"
              % (c, names[c], len(rs), k / 1000, k / sk, cp, cp / sc, tgt))
    cs = [r for r in ok if r["config"] == "C" and r.get("tpm")]
    if cs:
        print()
        p50 = med([r["tpm"]["tpm_sweep_ns"][0] for r in cs]) / 1000
        p99 = med([r["tpm"]["tpm_sweep_ns"][1] for r in cs]) / 1000
        unf = sum(r["tpm"]["tpm_sweeps"][1] for r in cs)
        done = sum(r["tpm"]["tpm_sweeps"][0] for r in cs)
        print("C: sweep time (tpm/stats) median p50 %.0f us, p99 %.0f us; "
              "sweeps done %d, unfinished %d (all C runs)"
              % (p50, p99, done, unf))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pcap")
    p.add_argument("file")
    p.add_argument("--flows", type=int, default=300)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--repeat", type=int, default=1,
                   help="rounds of the flows written (1)")
    p = sub.add_parser("events")
    p.add_argument("ctl")
    p.add_argument("--prefixes", type=int, default=512)
    p.add_argument("--per-prefix", type=int, default=8)
    p = sub.add_parser("parse")
    p.add_argument("--round", type=int, required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--mem", default="?")
    p.add_argument("--perf", required=True)
    p.add_argument("--stats")
    p.add_argument("--tpm")
    p.add_argument("--steal", type=float)
    p.add_argument("--other-load", type=float)
    p.add_argument("--foreign", type=int)
    p = sub.add_parser("table")
    p.add_argument("results")
    p.add_argument("--events", default="4096")
    a = ap.parse_args()
    {"pcap": cmd_pcap, "events": cmd_events, "parse": cmd_parse,
     "table": cmd_table}[a.cmd](a)


if __name__ == "__main__":
    main()
