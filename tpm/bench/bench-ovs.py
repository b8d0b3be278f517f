#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Helper of tpm/bench/bench-ovs.sh and tpm/bench/bench-feasibility.sh (python3
standard library only).

  pcap FILE            writes the traffic: N UDP/IPv4 flows of 64-byte
                       frames, round-robin (one packet per flow in turn);
                       --vxlan: each frame in VXLAN (outer Ethernet,
                       IPv4, UDP to port 4789 and VXLAN headers, from a
                       remote VTEP to the switch's underlay address)
  events CTL           installs the monitor's events through the
                       ovs-vswitchd control socket CTL (JSON-RPC, the
                       protocol of ovs-appctl, one connection for all)
  churn CTL            deletes the events of "events" one by one, then
                       adds them again (one connection): a JSON line with
                       the time of each phase and the commands' latencies
  loop-gaps            reads "perf script" of the main thread's poll()
                       entries and exits on stdin: a JSON line with the
                       busy time of its loop iterations (from poll()'s
                       return to the next poll()), median, p99 and max
  parse ...            turns one run's outputs into one JSON line
  pvp-check ...        bench-ovs.sh --pvp: one run's round-trip checks
                       and per-port rates, a JSON line (errors in it)
  table RESULTS        prints the per-run table, medians and ratios
  probe ...            one rate probe of bench-feasibility.sh: a JSON
                       line from pmd-perf-show and tpm/stats before/after
  feas-table RESULTS   bench-feasibility.sh's table (medians of repeats)
  feas-plot RESULTS PNG  its plot (python3-matplotlib)
  dos-events CTL       installs bench-dos.sh's events (attack patterns and
                       the legitimate prefixes' events)
  dos-probe ...        one probe of bench-dos.sh: a JSON line
  dos-table RESULTS    bench-dos.sh's table

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
import threading
import time


# Flow i goes to 10.(100 + k // 256).(k % 256).D with k = i % prefixes,
# i.e. prefix k of the events' nw_dst/24 prefixes (flows and prefixes: the
# same numbering while flows <= prefixes).

def config_medians(a, runs, sk, percent):
    """Yields, for each configuration A, B, C with runs among 'runs':
    (config, its runs, median Kpps, median cycles, the target column
    against stock's median Kpps 'sk')."""
    targets = {"B": a.target_b, "C": a.target_c}
    for c in ("A", "B", "C"):
        rs = [r for r in runs if r["config"] == c]
        if not rs:
            continue
        k = med([r["kpps"] for r in rs])
        tgt = ""
        if c in targets and sk == sk:
            tgt = target_text(targets[c], k / sk, percent)
        yield c, rs, k, med([r["cpp"] for r in rs]), tgt


def target_text(target, ratio, percent):
    """The target column: '>= 97%: met' or '>= 0.95: MISSED by 1.2
    points' (percent: the target as a percentage)."""
    head = ">= %.0f%%" % (100 * target) if percent else ">= %.2f" % target
    return "%s: %s" % (head, "met" if ratio >= target else
                       "MISSED by %.1f points" % (100 * (target - ratio)))

def prefix(k):
    return "10.%d.%d.0/24" % (100 + k // 256, k % 256)


def flow_addrs(i, prefixes=65536):
    k = i % prefixes
    src = bytes((10, 1 + i // 51200, i // 200 % 256, 1 + i % 200))
    dst = bytes((10, 100 + k // 256, k % 256, 1 + (i * 7) % 250))
    return src, dst, 10000 + i % 50000, 20000 + i % 1000


def ip_checksum(hdr):
    s = sum(struct.unpack("!%dH" % (len(hdr) // 2), hdr))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff


def frame(i, size, prefixes=65536):
    src, dst, sport, dport = flow_addrs(i, prefixes)
    ip_len = size - 14
    udp_len = ip_len - 20
    eth = bytes.fromhex("020000000002" "020000000001" "0800")
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, i & 0xffff, 0, 64,
                     17, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
    udp = struct.pack("!HHHH", sport, dport, udp_len, 0)
    return eth + ip + udp + bytes(udp_len - 8)


# VXLAN (RFC 7348) around inner frame i: outer Ethernet from the remote
# VTEP's MAC to the switch's (br-phy's) MAC, outer IPv4 from the VTEP's
# address to the switch's (checksummed: OVS's tnl_pop verifies it), UDP
# from a source port per inner flow (as a VTEP's hash of the inner
# headers spreads them) to 4789 with a zero checksum, VXLAN with the I
# flag and VNI vni_base + i % vnis.  50 bytes more than the inner frame.
def vxlan_frame(inner, i, a):
    vni = a.vni_base + i % a.vnis
    vxlan = struct.pack("!II", 0x08000000, vni << 8)
    udp_len = 8 + len(vxlan) + len(inner)
    udp = struct.pack("!HHHH", 49152 + (i * 37) % 16384, 4789, udp_len, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, i & 0xffff,
                     0x4000, 64, 17, 0, socket.inet_aton(a.outer_src),
                     socket.inet_aton(a.outer_dst))
    ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
    eth = (bytes.fromhex(a.outer_dst_mac.replace(":", ""))
           + bytes.fromhex(a.outer_src_mac.replace(":", "")) + b"\x08\x00")
    return eth + ip + udp + vxlan + inner


def cmd_pcap(a):
    if a.flows > 65536 or a.size < 60:
        sys.exit("bench-ovs.py: at most 65536 flows, frames of >= 60 bytes")
    if a.vnis < 1 or a.vni_base + a.vnis > 1 << 24:
        sys.exit("bench-ovs.py: VNIs out of 0 .. 16777215")
    with open(a.file, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for r in range(a.repeat):
            for i in range(a.flows):
                p = frame(i, a.size, a.prefixes)
                if a.vxlan:
                    p = vxlan_frame(p, i, a)
                f.write(struct.pack("<IIII", 0, r * a.flows + i, len(p),
                                    len(p)))
                f.write(p)


# The events of one prefix P (the first --per-prefix of these): count(),
# sum(volume) and max(ttl) (three summaries per flow in all), per 5-tuple,
# nw_dst/24, nw_src/24 and nw_dst, with thresholds no interval of this
# traffic reaches (so reports stay out of the measurement).  bench-ovs.sh
# uses the first 8, bench-feasibility.sh up to 16.
EVENT_KINDS = [
    ("c5", "ip", "count() > 1000000000", "5tuple"),
    ("cd", "ip", "count() > 1000000000", "nw_dst/24"),
    ("v5", "ip", "sum(volume) > 1000GB", "5tuple"),
    ("vd", "ip", "sum(volume) > 1000GB", "nw_dst/24"),
    ("t5", "ip", "max(ttl) > 255", "5tuple"),
    ("td", "ip", "max(ttl) > 255", "nw_dst/24"),
    ("uc5", "udp", "count() > 1000000000", "5tuple"),
    ("uvd", "udp", "sum(volume) > 1000GB", "nw_dst/24"),
    ("cs", "ip", "count() > 1000000000", "nw_src/24"),
    ("vs", "ip", "sum(volume) > 1000GB", "nw_src/24"),
    ("ts", "ip", "max(ttl) > 255", "nw_src/24"),
    ("c32", "ip", "count() > 1000000000", "nw_dst"),
    ("v32", "ip", "sum(volume) > 1000GB", "nw_dst"),
    ("uv5", "udp", "sum(volume) > 1000GB", "5tuple"),
    ("ucd", "udp", "count() > 1000000000", "nw_dst/24"),
    ("utd", "udp", "max(ttl) > 255", "nw_dst/24"),
]


def event_defs(n_prefixes, per_prefix, interval="10ms"):
    if per_prefix > len(EVENT_KINDS):
        sys.exit("bench-ovs.py: at most %d events per prefix"
                 % len(EVENT_KINDS))
    for k in range(n_prefixes):
        for name, proto, pred, group in EVENT_KINDS[:per_prefix]:
            yield ("p%d_%s" % (k, name),
                   ["filter=%s,nw_dst=%s" % (proto, prefix(k)),
                    "predicate=%s" % pred, "group=%s" % group,
                    "interval=%s" % interval])


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
    """Installs the events over '--jobs' connections, each adding its
    share one command at a time (several in flight: an ovs-vswitchd under
    valgrind takes ~0.3 s a command)."""
    defs = list(event_defs(a.prefixes, a.per_prefix, a.interval))
    errors = []

    def job(part):
        try:
            c = Unixctl(a.ctl, timeout=a.timeout)
            for name, words in part:
                result, error = c.call("tpm/event-add", [name] + words)
                if error:
                    errors.append("tpm/event-add %s %s: %s"
                                  % (name, " ".join(words), error))
                    return
        except OSError as e:
            errors.append("%s: %s" % (a.ctl, e))

    t0 = time.monotonic()
    jobs = max(1, a.jobs)
    ts = [threading.Thread(target=job, args=(defs[i::jobs],))
          for i in range(jobs)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        sys.exit("\n".join(errors[:5]))
    print("%d events installed in %.1f s%s"
          % (len(defs), time.monotonic() - t0,
             " (%d connections)" % jobs if jobs > 1 else ""))


def quantiles(v):
    v = sorted(v)
    if not v:
        return {}
    return {"n": len(v), "median": v[len(v) // 2],
            "p99": v[min(len(v) - 1, (len(v) * 99) // 100)], "max": v[-1]}


def cmd_churn(a):
    c = Unixctl(a.ctl)
    defs = list(event_defs(a.prefixes, a.per_prefix, a.interval))
    out = {}
    for phase, method in (("del", "tpm/event-del"), ("add", "tpm/event-add")):
        lat = []
        t0 = time.monotonic()
        for name, words in defs:
            t = time.monotonic()
            params = [name] if method == "tpm/event-del" else [name] + words
            result, error = c.call(method, params)
            if error:
                sys.exit("%s %s: %s" % (method, name, error))
            lat.append((time.monotonic() - t) * 1e6)
        out[phase] = {"events": len(defs),
                      "seconds": round(time.monotonic() - t0, 3),
                      "latency_us": {k: round(v, 1) if isinstance(v, float)
                                     else v
                                     for k, v in quantiles(lat).items()}}
    print(json.dumps(out))


def cmd_loop_gaps(a):
    # "perf script" lines: COMM TID [CPU] TIME: syscalls:sys_exit_poll: ...
    line_re = re.compile(r"\s(\d+\.\d+):\s+syscalls:sys_(enter|exit)_poll")
    busy = []
    last_exit = None
    for line in sys.stdin:
        m = line_re.search(line)
        if not m:
            continue
        t = float(m.group(1))
        if m.group(2) == "exit":
            last_exit = t
        elif last_exit is not None:
            busy.append((t - last_exit) * 1e6)
            last_exit = None
    q = quantiles(busy)
    print(json.dumps({"iterations": q.get("n", 0),
                      "busy_us": {k: round(v, 1) for k, v in q.items()
                                  if k != "n"}}))


# pmd-perf-show (OVS 3.1 lib/dpif-netdev-perf.c, pmd_perf_format_overall_stats)
PERF_RE = {
    "duration_s": r"Measurement duration:\s+([\d.]+) s",
    "iterations": r"Iterations:\s+(\d+)\s+\(([\d.]+) us/it\)",
    "used_tsc_pct": r"Used TSC cycles:\s+\d+\s+\(\s*([\d.]+) % of total",
    "idle_it": r"idle iterations:\s+(\d+)\s+\(\s*([\d.]+) % of used",
    "busy_it": r"busy iterations:\s+(\d+)\s+\(\s*([\d.]+) % of used",
    "rx": r"Rx packets:\s+(\d+)\s+\((\d+) Kpps, (\d+) cycles/pkt\)",
    "passes": r"Datapath passes:\s+(\d+)\s+\(([\d.]+) passes/pkt\)",
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
    "tpm_tun_decap": r"tunnels: decapsulated (\d+)",
    "tpm_cpp": r"cycles per packet \(sampled busy iterations\): "
               r"switch ([\d.]+), monitor ([\d.]+) \(packets ([\d.]+), "
               r"sweeps and commands ([\d.]+)\)",
}


def grab(text, table):
    out = {}
    for key, rx in table.items():
        m = re.search(rx, text)
        if m:
            v = [float(g) if "." in g else int(g) for g in m.groups()]
            out[key] = v[0] if len(v) == 1 else v
    return out


# dpctl/show -s: per port name, its RX and TX packets and TX drops.
DPCTL_PORT_RE = re.compile(r"^\s*port \d+: (\S+)")
DPCTL_RX_RE = re.compile(r"RX packets:(\d+)")
DPCTL_TX_RE = re.compile(r"TX packets:(\d+) errors:\S+ dropped:(\d+)")


def dpctl_ports(path):
    ports = {}
    cur = None
    for line in open(path):
        m = DPCTL_PORT_RE.match(line)
        if m:
            cur = ports.setdefault(m.group(1), {"rx": 0, "tx": 0,
                                                "tx_dropped": 0})
            continue
        if cur is None:
            continue
        m = DPCTL_RX_RE.search(line)
        if m:
            cur["rx"] = int(m.group(1))
        m = DPCTL_TX_RE.search(line)
        if m:
            cur["tx"], cur["tx_dropped"] = int(m.group(1)), int(m.group(2))
    return ports


def near(a, b, rel=0.01, slack=4096):
    """a and b agree within rel of the larger, plus slack packets (frames
    in the rings and in testpmd's burst while the counters are read)."""
    return abs(a - b) <= rel * max(a, b) + slack


def cmd_pvp_check(a):
    """The round trip pcap (p1) -> vm -> testpmd -> vm -> null (p2).
    Over the window, from dpctl/show -s before (dp0) and after (dp1) it
    (one snapshot of every port each) and testpmd's "RX TX" counters (vm0,
    vm1): the rates and the accounting of OVS's ports.  After the drain
    (dp-end, vm-end, totals since the ports were added): exact equality
    along the loop.  B, C: tpm/stats between the totals read just before
    and after it."""
    d0, d1, de = (dpctl_ports(a.dp0), dpctl_ports(a.dp1),
                  dpctl_ports(a.dp_end))
    errors, notes = [], []
    for name in ("p1", "p2", "vm"):
        if any(name not in d for d in (d0, d1, de)):
            sys.exit("bench-ovs.py pvp-check: no port %s in dpctl/show"
                     % name)

    def delta(port, key):
        return d1[port][key] - d0[port][key]

    def vm_counters(path):
        try:
            rx, tx = (int(x) for x in open(path).read().split())
            return rx, tx
        except ValueError:
            errors.append("cannot read testpmd's port counters (%s)" % path)
            return 0, 0
    pcap_rx, vm_tx, vm_tx_drop = (delta("p1", "rx"), delta("vm", "tx"),
                                  delta("vm", "tx_dropped"))
    vm_rx, null_tx = delta("vm", "rx"), delta("p2", "tx")
    v0, v1, ve = (vm_counters(a.vm0), vm_counters(a.vm1),
                  vm_counters(a.vm_end))
    perf = grab(open(a.perf).read(), PERF_RE)
    rx_all = perf["rx"][0] if "rx" in perf else 0
    dur = perf.get("duration_s") or 0
    busy = (perf["rx"][2] * rx_all) if "rx" in perf else 0
    r = {"pcap_rx": pcap_rx, "vm_ovs_tx": vm_tx, "vm_ovs_tx_dropped":
         vm_tx_drop, "vm_ovs_rx": vm_rx, "null_tx": null_tx,
         "vm_rx": v1[0] - v0[0], "vm_tx": v1[1] - v0[1], "pmd_rx": rx_all,
         "end": {"vm_ovs_tx": de["vm"]["tx"], "vm_rx": ve[0],
                 "vm_tx": ve[1], "vm_ovs_rx": de["vm"]["rx"],
                 "null_tx": de["p2"]["tx"]}}
    r["pcap_kpps"] = pcap_rx / dur / 1e3 if dur else 0
    r["rt_kpps"] = null_tx / dur / 1e3 if dur else 0
    r["cpp_pcap"] = busy / pcap_rx if pcap_rx else 0
    r["round_trip"] = null_tx / pcap_rx if pcap_rx else 0
    if pcap_rx <= 0 or null_tx <= 0 or r["vm_rx"] <= 0:
        errors.append("no traffic: pcap rx %d, testpmd rx %d, null tx %d"
                      % (pcap_rx, r["vm_rx"], null_tx))
    if r["round_trip"] < a.min_round_trip / 100:
        errors.append("round trip: null tx %d of pcap rx %d (%.1f%%)"
                      % (null_tx, pcap_rx, 100 * r["round_trip"]))
    # One snapshot: only a burst or two in flight inside OVS.
    if not near(pcap_rx, vm_tx + vm_tx_drop, 0.001):
        errors.append("window: pcap rx %d, OVS to vm %d + dropped at its "
                      "full ring %d" % (pcap_rx, vm_tx, vm_tx_drop))
    if not near(null_tx, vm_rx, 0.001):
        errors.append("window: null tx %d, vm rx %d" % (null_tx, vm_rx))
    if not near(rx_all, pcap_rx + vm_rx, 0.05):
        errors.append("pmd-perf-show Rx %d, pcap rx + vm rx %d"
                      % (rx_all, pcap_rx + vm_rx))
    e = r["end"]
    # OVS's vhost counters and testpmd's differ by ~0.1% on this machine
    # (testpmd's drops at OVS's full ring among them): 0.5% allowed;
    # net_null's Tx against OVS's Rx from vm: 0.1% (the drop rule's
    # revalidation sends packets of the loop to upcalls, some lost).
    if not (near(e["vm_ovs_tx"], e["vm_rx"], 0.005)
            and near(e["vm_ovs_rx"], e["vm_tx"], 0.005)
            and near(e["null_tx"], e["vm_ovs_rx"], 0.001)
            and e["vm_tx"] > 0):
        errors.append("after the drain: OVS to vm %d, testpmd rx %d tx %d, "
                      "OVS from vm %d, null tx %d (do not agree)"
                      % (e["vm_ovs_tx"], e["vm_rx"], e["vm_tx"],
                         e["vm_ovs_rx"], e["null_tx"]))
    notes.append("drained: OVS -> testpmd %d, testpmd forwarded %d "
                 "(dropped %d), OVS -> null %d"
                 % (e["vm_ovs_tx"], e["vm_tx"], e["vm_rx"] - e["vm_tx"],
                    e["null_tx"]))
    if a.tpm:
        t = grab(open(a.tpm).read(), TPM_RE)
        b0, b1 = dpctl_ports(a.dp_tpm0), dpctl_ports(a.dp_tpm1)
        lo = b0["p1"]["rx"] + b0["vm"]["rx"]
        hi = b1["p1"]["rx"] + b1["vm"]["rx"]
        pk = t.get("tpm_packets", [0, 0])[0]
        m = t.get("tpm_matches", [0, 0, 0])
        r["tpm_packets"], r["ports_rx_total"] = pk, [lo, hi]
        p1 = b1["p1"]["rx"]
        r["tpm_per_pcap"] = pk / p1 if p1 else 0
        r["tpm_per_rt"] = (pk / (b1["p1"]["rx"] + b1["vm"]["rx"])
                           if p1 else 0)
        r["tpm_matches"], r["tpm_flows"] = m[0], t.get("tpm_flows_live")
        notes.append("tpm/stats %d packets (pcap rx + vm rx %d..%d; "
                     "%.4f x pcap rx), %d matches, %s flows"
                     % (pk, lo, hi, r["tpm_per_pcap"], m[0],
                        t.get("tpm_flows_live")))
        if a.config == "C":
            if not lo - 4096 <= pk <= hi + 4096:
                errors.append("tpm/stats counts %d packets, pcap rx + vm "
                              "rx %d..%d" % (pk, lo, hi))
            if m[0] < a.flows * a.per_prefix or m[1] or m[2]:
                errors.append("tpm/stats matches %s (over max_matches, out "
                              "of slots), expected >= %d x %d"
                              % (m, a.flows, a.per_prefix))
    r["errors"], r["notes"] = errors, notes
    print(json.dumps(r, sort_keys=True))


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
        if "passes" in p:
            r["passes_per_pkt"] = p["passes"][1]
    if a.stats:
        r.update(grab(open(a.stats).read(), STATS_RE))
    if a.tpm:
        r["tpm"] = grab(open(a.tpm).read(), TPM_RE)
    if a.tpm0:
        r["tpm0"] = grab(open(a.tpm0).read(), TPM_RE)
    if a.pvp:
        r["pvp"] = json.load(open(a.pvp))
    if a.steal is not None:
        r["steal_pct"] = a.steal
    if a.other_load is not None:
        r["other_load_pct"] = a.other_load
    if a.foreign is not None:
        r["foreign"] = a.foreign
    print(json.dumps(r, sort_keys=True))


def window_sweeps(r):
    """The sweeps done and unfinished in run 'r''s measurement window
    (tpm/stats at its end less at its start), or (None, None) without the
    start's: the totals count from the daemon's start, warm-up
    included."""
    t, t0 = r.get("tpm") or {}, r.get("tpm0") or {}
    if "tpm_sweeps" not in t or "tpm_sweeps" not in t0:
        return None, None
    return (t["tpm_sweeps"][0] - t0["tpm_sweeps"][0],
            t["tpm_sweeps"][1] - t0["tpm_sweeps"][1])


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
    hdr = ("round", "cfg", "Mpps", "cyc/pkt", "passes/pkt", "us/it",
           "steal%", "other%", "foreign", "tpm")
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
            wd, wu = window_sweeps(r)
            if wd is not None:
                tinfo += " (in the window: %d of %d unfinished)" % (wu, wd)
            if t.get("tpm_tun_decap"):
                tinfo += ", decapsulated %s" % t["tpm_tun_decap"]
        print("| %s | %s | %.2f | %s | %s | %.2f | %s | %s | %s | %s |"
              % (r["round"], r["config"], r["kpps"] / 1000, r["cpp"],
                 r.get("passes_per_pkt", "?"), r["us_per_it"],
                 "%.1f" % r["steal_pct"] if "steal_pct" in r else "?",
                 "%.0f" % r["other_load_pct"] if "other_load_pct" in r
                 else "?",
                 r.get("foreign", "?"), tinfo))
    ok = [r for r in runs if "error" not in r]
    if a.pvp:
        return pvp_table(a, runs, names)
    stock = [r for r in ok if r["config"] == "A"]
    sk = med([r["kpps"] for r in stock])
    sc = med([r["cpp"] for r in stock])
    print()
    print("Medians (ratios of medians to stock):")
    print()
    print("| config | runs | Mpps | vs stock | cycles/pkt | vs stock "
          "| target (rate) |")
    print("|---|---|---|---|---|---|---|")
    for c, rs, k, cp, tgt in config_medians(a, ok, sk, True):
        print("| %s %s | %d | %.2f | %.3f | %.0f | %.3f | %s |"
              % (c, names[c], len(rs), k / 1000, k / sk, cp, cp / sc, tgt))
    added = []
    for c in ("B", "C"):
        rs = [r for r in ok if r["config"] == c]
        if rs and stock:
            added.append("%s - A %+.0f" % (c, med([r["cpp"] for r in rs])
                                          - sc))
    bs = [r for r in ok if r["config"] == "B"]
    cs = [r for r in ok if r["config"] == "C"]
    if bs and cs:
        # The monitor on and off in the same build: C against B does not
        # depend on how the stock build compares with the patched one.
        bk, bc = med([r["kpps"] for r in bs]), med([r["cpp"] for r in bs])
        ck, cc = med([r["kpps"] for r in cs]), med([r["cpp"] for r in cs])
        added.append("C - B %+.0f" % (cc - bc))
        print()
        print("C / B (the monitor on and off in one build): rate %.3f, "
              "cycles/pkt %.3f" % (ck / bk, cc / bc))
    if added:
        print()
        print("The monitor's cycles per packet (medians): %s"
              % ", ".join(added))
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
        cpp = [r["tpm"]["tpm_cpp"] for r in cs if "tpm_cpp" in r["tpm"]]
        if cpp:
            print("C: sampled cycles per packet (tpm/stats, medians since "
                  "the start): switch %.1f, monitor %.1f: packets %.1f, "
                  "sweeps and commands %.1f"
                  % tuple(med([c[i] for c in cpp]) for i in range(4)))
        ws = [window_sweeps(r) for r in cs]
        if all(w[0] is not None for w in ws):
            print("C: in the measured windows (after the warm-up): sweeps "
                  "done %d, unfinished %d"
                  % (sum(w[0] for w in ws), sum(w[1] for w in ws)))


def pvp_table(a, runs, names):
    """bench-ovs.sh --pvp: per run and medians.  The rate compared is the
    PMD's Rx over both ports (pcap and vm) per second, i.e. TSC Hz over
    the busy cycles per Rx (the PMD is always busy); the pcap port's rate,
    the round trips' rate (net_null's Tx) and their share beside it.
    Returns 3 if a run failed its checks."""
    print()
    print("PVP per run (Rx Mpps and cyc/rx: pmd-perf-show, both ports; "
          "pcap, rt: packets received on the pcap port and reaching "
          "net_null, Mpps; rt %: their ratio (the rest dropped by OVS at "
          "the VM's full ring); cyc/pcap: busy cycles per pcap packet; "
          "tpm/pcap: tpm/stats packets / pcap Rx since the start):")
    print()
    hdr = ("round", "cfg", "Rx Mpps", "cyc/rx", "pcap", "rt", "rt %",
           "cyc/pcap", "testpmd rx/tx (M)", "tpm/pcap", "matches",
           "checks")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    good, failed = [], 0
    for r in runs:
        p = r.get("pvp")
        if "error" in r or not p:
            failed += 1
            print("| %s | %s | error: %s |" % (r["round"], r["config"],
                                               r.get("error", "no PVP data")))
            continue
        if p["errors"]:
            failed += 1
        else:
            good.append(r)
        print("| %s | %s | %.3f | %s | %.3f | %.3f | %.1f | %.0f "
              "| %.2f / %.2f | %s | %s | %s |"
              % (r["round"], r["config"], r["kpps"] / 1000, r["cpp"],
                 p["pcap_kpps"] / 1000, p["rt_kpps"] / 1000,
                 100 * p["round_trip"], p["cpp_pcap"],
                 p["vm_rx"] / 1e6, p["vm_tx"] / 1e6,
                 "%.4f" % p["tpm_per_pcap"] if "tpm_per_pcap" in p else "-",
                 p.get("tpm_matches", "-"),
                 "FAILED: " + "; ".join(p["errors"]) if p["errors"]
                 else "ok"))
    stock = [r for r in good if r["config"] == "A"]
    sk = med([r["kpps"] for r in stock])
    sc = med([r["cpp"] for r in stock])
    print()
    print("PVP medians of the runs that passed (ratios of medians to "
          "stock):")
    print()
    print("| config | runs | Rx Mpps (both ports) | vs stock | cycles/Rx "
          "| vs stock | pcap Mpps | round trips Mpps | round trip % "
          "| target (Rx rate) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for c, rs, k, cx, tgt in config_medians(a, good, sk, False):
        print("| %s %s | %d | %.3f | %.3f | %.0f | %.3f | %.3f | %.3f "
              "| %.1f | %s |"
              % (c, names[c], len(rs), k / 1000, k / sk, cx, cx / sc,
                 med([r["pvp"]["pcap_kpps"] for r in rs]) / 1000,
                 med([r["pvp"]["rt_kpps"] for r in rs]) / 1000,
                 100 * med([r["pvp"]["round_trip"] for r in rs]), tgt))
    if failed:
        print()
        print("%d run(s) FAILED their checks or had no data (above)"
              % failed)
        return 3
    return 0


# tpm/stats counters that bench-feasibility.sh and bench-dos.sh take
# differences of (the counters are cumulative since the PMD started).
TPM_DELTA_RE = {
    "packets": r"packets: (\d+) \(non-IP \d+\)",
    "bytes": r"packets: \d+ \(non-IP \d+\), bytes: (\d+)",
    "matches": r"matches: (\d+),",
    "flow_inserts": r"inserts (\d+),",
    "flow_evictions": r"evictions (\d+),",
    "sweeps_done": r"sweeps: done (\d+),",
    "sweeps_unfinished": r"sweeps: done \d+, unfinished (\d+),",
    "sweeps_forced": r"unfinished \d+, forced (\d+);",
    "steps_idle": r"steps idle (\d+),",
    "steps_saturated": r"steps while saturated (\d+)",
    "steps_catchup": r"steps while saturated \d+ \(catch-up (\d+)\)",
    "reports": r"reports: (\d+),",
    "reports_dropped": r"reports: \d+, dropped (\d+);",
    "epochs": r"; epochs (\d+),",
    "epochs_skipped": r"; epochs \d+, skipped (\d+)",
    "dos_flows_passed": r"dos: .*flows passed (\d+)",
    "dos_skipped": r"dos: .*skipped packets (\d+)",
    "dos_removed_collision": r"dos: .*removed on collision (\d+)",
    "dos_removed_sweep": r"dos: .*removed by sweep (\d+)",
}
# tpm/stats values that are not counters (taken at the end).
TPM_LEVEL_RE = {
    "flows_live": r"flows: (\d+) live",
    "triggers": r"triggers: (\d+) instances",
    "sweep_ns": r"sweep time: p50 (\d+) ns, p99 (\d+) ns, max (\d+) ns",
    "events": r"events: (\d+),",
    "dos_threshold": r"dos: threshold (\d+) bytes",
    "sampled_cpp": r"cycles per packet \(sampled busy iterations\): "
                   r"switch ([\d.]+), monitor ([\d.]+)",
}


def pmd1(text):
    """The part of tpm/stats about PMD core 1 (and the header lines)."""
    head, _, rest = text.partition("pmd core 1:")
    return head + rest


def tpm_delta(before, after):
    b, a = pmd1(before), pmd1(after)
    out = {}
    for key, rx in TPM_DELTA_RE.items():
        mb, ma = re.search(rx, b), re.search(rx, a)
        if ma:
            out[key] = int(ma.group(1)) - (int(mb.group(1)) if mb else 0)
    lv = grab(a, TPM_LEVEL_RE)
    out.update(lv)
    return out


def iface_stats(text):
    """ovs-vsctl get Interface P statistics: {k=v, ...} into a dict."""
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", text)}


def sets(kvs):
    """--set K=V pairs as a dict, values as numbers where they parse."""
    r = {}
    for kv in kvs or []:
        k, _, v = kv.partition("=")
        try:
            r[k] = int(v)
        except ValueError:
            try:
                r[k] = float(v)
            except ValueError:
                r[k] = v
    return r


def cmd_probe(a):
    """One probe: a JSON line with the configuration (--set K=V, numbers
    where they parse), pmd-perf-show over the window, tpm/stats and the
    input port's statistics as differences."""
    r = sets(a.set)
    p = grab(open(a.perf).read(), PERF_RE)
    if "rx" not in p:
        r["error"] = "no Rx packets line in pmd-perf-show"
    else:
        r["rx_packets"], r["kpps"], r["cpp"] = p["rx"]
        r["duration_s"] = p.get("duration_s")
        r["us_per_it"] = p["iterations"][1]
        r["busy_it_pct"] = p["busy_it"][1]
        r["used_tsc_pct"] = p.get("used_tsc_pct")
        if r["duration_s"]:
            r["pps"] = r["rx_packets"] / r["duration_s"]
    if a.tpm_before and a.tpm_after:
        r["tpm"] = tpm_delta(open(a.tpm_before).read(),
                             open(a.tpm_after).read())
    if a.port_before and a.port_after:
        b = iface_stats(open(a.port_before).read())
        e = iface_stats(open(a.port_after).read())
        r["port"] = {k: e[k] - b.get(k, 0) for k in e}
    if a.out_before and a.out_after:
        b = iface_stats(open(a.out_before).read())
        e = iface_stats(open(a.out_after).read())
        r["out"] = {k: e[k] - b.get(k, 0) for k in e
                    if k in ("tx_packets", "tx_bytes", "tx_dropped")}
    if a.steal is not None:
        r["steal_pct"] = a.steal
    if a.other_load is not None:
        r["other_load_pct"] = a.other_load
    target = r.get("target_pps")
    t = r.get("tpm", {})
    if "pps" in r and target:
        r["rate_kept"] = r["pps"] >= a.keep_ratio * target
    if t.get("events"):
        r["sweeps_ok"] = (t.get("sweeps_unfinished", 0) == 0
                          and t.get("sweeps_done", 0) > 0)
    print(json.dumps(r, sort_keys=True))


def load(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def cmd_feas_table(a):
    runs = load(a.results)
    bounds = [r for r in runs if r.get("kind") == "boundary"]
    unpol = [r for r in runs if r.get("kind") == "unpoliced"]
    base = [r for r in runs if r.get("kind") == "baseline"]
    keys = sorted({(r["flows"], r["interval_ms"], r["per_flow"])
                   for r in bounds})
    print("| active flows | interval (ms) | triggers per flow | triggers "
          "| feasible Mpps (median) | runs (Mpps) | unpoliced Mpps (median)"
          " | cycles/pkt at boundary | sweep p50 / p99 / max (us) "
          "| sweep steps idle / saturated per s | matches per s "
          "| sampled cycles/pkt switch / monitor |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key in keys:
        rs = [r for r in bounds
              if (r["flows"], r["interval_ms"], r["per_flow"]) == key]
        us = [r for r in unpol
              if (r["flows"], r["interval_ms"], r["per_flow"]) == key]
        ok = [r for r in rs if "pps" in r]
        m = med([r["pps"] for r in ok]) / 1e6 if ok else float("nan")
        # The repeat whose boundary is the median (or the nearest).
        rep = min(ok, key=lambda r: abs(r["pps"] / 1e6 - m)) if ok else {}
        t = rep.get("tpm", {})
        ns = t.get("sweep_ns", [0, 0, 0])
        d = rep.get("duration_s") or 1
        sc = t.get("sampled_cpp")
        print("| %d | %s | %d | %d | **%.2f** | %s | %.2f | %s "
              "| %.0f / %.0f / %.0f | %.0f / %.0f | %.2fM | %s |"
              % (key[0], key[1], key[2], rep.get("triggers_total", 0), m,
                 ", ".join("%.2f" % (r["pps"] / 1e6) for r in ok),
                 med([r["pps"] for r in us if "pps" in r]) / 1e6,
                 rep.get("cpp", "?"), ns[0] / 1e3, ns[1] / 1e3,
                 ns[2] / 1e3, t.get("steps_idle", 0) / d,
                 t.get("steps_saturated", 0) / d,
                 t.get("matches", 0) / d / 1e6,
                 "%.0f / %.0f" % tuple(sc) if sc else "n/a"))
    if base:
        print()
        print("No events (config B), unpoliced: " + "; ".join(
            "%d flows: %.2f Mpps, %s cycles/pkt"
            % (f, med([r["pps"] for r in base if r["flows"] == f]) / 1e6,
               med([r["cpp"] for r in base if r["flows"] == f]))
            for f in sorted({r["flows"] for r in base})))


def cmd_feas_plot(a):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("bench-ovs.py feas-plot: matplotlib is missing: "
                 "apt-get install -y python3-matplotlib; no plot written")
    runs = [r for r in load(a.results)
            if r.get("kind") == "boundary" and "pps" in r]
    flows = sorted({r["flows"] for r in runs})
    fig, axes = plt.subplots(1, len(flows), figsize=(5 * len(flows), 4),
                             sharey=True, squeeze=False)
    for ax, f in zip(axes[0], flows):
        for iv in sorted({r["interval_ms"] for r in runs}):
            ks = sorted({r["per_flow"] for r in runs
                         if r["flows"] == f and r["interval_ms"] == iv})
            ys = [med([r["pps"] for r in runs if r["flows"] == f
                       and r["interval_ms"] == iv and r["per_flow"] == k])
                  / 1e6 for k in ks]
            ax.plot(ks, ys, marker="o", label="%s ms" % iv)
        ax.set_title("%d active flows" % f)
        ax.set_xlabel("triggers per flow")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks)
        ax.set_xticklabels([str(k) for k in ks])
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("highest feasible rate (Mpps, median)")
    axes[0][0].legend(title="time interval")
    fig.suptitle("TPM feasibility region in an OVS-DPDK PMD (64 B frames)")
    fig.tight_layout()
    fig.savefig(a.png, dpi=100)
    print("wrote %s" % a.png)


# bench-dos.sh's attack filters: each a different pattern (fields and
# masks), each covering all the attack traffic of tpm/bench/dos-feeder.c
# (UDP 10.64.0.0/10 -> 10.50.0.0/16 port 9) and none of the legitimate
# traffic (10.1.0.0/16 -> 10.200.0.0/16 port 5001).
DOS_PATTERNS = [
    "ip,nw_dst=10.50.0.0/16",
    "udp,nw_src=10.64.0.0/10",
    "ip,nw_src=10.64.0.0/10,nw_dst=10.50.0.0/16",
    "udp,tp_dst=9",
    "udp,nw_dst=10.50.0.0/16,tp_dst=9",
    "ip,nw_dst=10.48.0.0/12",
    "udp,nw_src=10.64.0.0/10,tp_dst=9",
    "ip,nw_dst=10.50.0.0/15",
    "udp,nw_src=10.64.0.0/10,nw_dst=10.50.0.0/16,tp_dst=9",
    "ip,nw_dst=10.50.0.0/14",
    "udp,nw_dst=10.48.0.0/12",
    "udp,nw_dst=10.50.0.0/15,tp_dst=9",
    "ip,nw_src=10.64.0.0/11",
    "udp,nw_src=10.64.0.0/11,nw_dst=10.48.0.0/12",
    "ip,nw_src=10.64.0.0/10,nw_dst=10.48.0.0/12",
    "udp,nw_src=10.64.0.0/10,nw_dst=10.50.0.0/15",
]


def dos_event_defs(a):
    if a.patterns > len(DOS_PATTERNS):
        sys.exit("bench-ovs.py: at most %d patterns" % len(DOS_PATTERNS))
    for j in range(a.patterns):
        yield ("dos%d" % j, ["filter=%s" % DOS_PATTERNS[j],
                             "predicate=sum(volume) > 1000GB",
                             "group=nw_dst/24", "interval=%s" % a.interval])
    for k in range(a.legit_prefixes):
        yield ("legit%d" % k, ["filter=ip,nw_dst=10.200.%d.0/24" % k,
                               "predicate=sum(volume) > %d" % a.legit_bytes,
                               "group=nw_dst/24",
                               "interval=%s" % a.interval])


def cmd_dos_events(a):
    c = Unixctl(a.ctl)
    n = 0
    for name, words in dos_event_defs(a):
        result, error = c.call("tpm/event-add", [name] + words)
        if error:
            sys.exit("tpm/event-add %s %s: %s"
                     % (name, " ".join(words), error))
        n += 1
    print("%d events installed (%d attack patterns, %d legitimate prefixes)"
          % (n, a.patterns, a.legit_prefixes))


def feeder_stats(path):
    v = [int(x) for x in open(path).read().split()]
    keys = ("tsc", "hz", "offered", "sent", "ring_drops",
            "late_skipped", "alloc_fail")
    return dict(zip(keys, v))


def legit_detection(before, after, names):
    """Per legitimate event: the share of the window's epochs with a
    report.  The window's epochs: after the latest report before it, up to
    the latest report after it."""
    def parse(text):
        out = []
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out
    b, e = parse(before), parse(after)
    e0 = max([r["epoch"] for r in b], default=None)
    win = [r for r in e if e0 is None or r["epoch"] > e0]
    if not win:
        return {n: 0.0 for n in names}, 0
    lo = min(r["epoch"] for r in win) if e0 is None else e0 + 1
    hi = max(r["epoch"] for r in win)
    n_ep = hi - lo + 1
    out = {}
    for n in names:
        eps = {r["epoch"] for r in win if r.get("event") == n}
        out[n] = len(eps) / n_ep
    return out, n_ep


def cmd_dos_probe(a):
    r = sets(a.set)
    p = grab(open(a.perf).read(), PERF_RE)
    if "rx" in p:
        r["rx_packets"], r["kpps"], r["cpp"] = p["rx"]
        r["duration_s"] = p.get("duration_s")
        r["pps"] = r["rx_packets"] / r["duration_s"]
    else:
        r["error"] = "no Rx packets line in pmd-perf-show"
    r["tpm"] = tpm_delta(open(a.tpm_before).read(),
                         open(a.tpm_after).read())
    f0, f1 = feeder_stats(a.feeder_before), feeder_stats(a.feeder_after)
    dt = (f1["tsc"] - f0["tsc"]) / f1["hz"]
    fd = {k: f1[k] - f0[k] for k in f1 if k not in ("tsc", "hz")}
    fd["seconds"] = dt
    r["feeder"] = fd
    r["offered_pps"] = fd["offered"] / dt if dt > 0 else 0
    names = ["legit%d" % k for k in range(a.legit_prefixes)]
    det, n_ep = legit_detection(open(a.reports_before).read(),
                                open(a.reports_after).read(), names)
    r["legit_detect"] = det
    r["window_epochs"] = n_ep
    r["legit_min"] = min(det.values()) if det else 0
    # The measured mix, from the monitor's counters over the window:
    # packets n = nd + ng, bytes b = 64 nd + 1500 ng.
    t = r["tpm"]
    n, b = t.get("packets", 0), t.get("bytes", 0)
    ng = max(0.0, (b - 64 * n) / (1500 - 64)) if n else 0
    nd = n - ng
    if n:
        r["dos_pkt_frac"] = nd / n
        wire_d, wire_g = nd * 84, ng * 1520
        r["dos_byte_frac"] = wire_d / (wire_d + wire_g)
        # tpm/stats was read just around the feeder's two readings.
        r["wire_gbps"] = (wire_d + wire_g) * 8 / dt / 1e9 if dt > 0 else 0
    fed = fd["offered"]
    r["rate_kept"] = (fd["ring_drops"] <= (1 - a.keep_ratio) * fed
                      and "pps" in r)
    r["feeder_ok"] = fd["late_skipped"] <= 0.05 * max(fed, 1)
    r["sweeps_ok"] = (t.get("sweeps_unfinished", 0) == 0
                      and t.get("sweeps_done", 0) > 0)
    r["legit_ok"] = r["legit_min"] >= a.detect
    r["feasible"] = (r["rate_kept"] and r["sweeps_ok"] and r["legit_ok"])
    print(json.dumps(r, sort_keys=True))


def cmd_dos_table(a):
    runs = load(a.results)
    bounds = [r for r in runs if r.get("kind") == "boundary"]
    print("| threshold (B) | attack | max DoS fraction, bytes "
          "| max DoS fraction, packets | model prediction (bytes) "
          "| measured rate: Mpps, Gb/s on the wire | ring drops "
          "| unfinished sweeps | legit detected (min) "
          "| dos: skipped pkts / flows passed / removed collision / "
          "removed sweep (per s) | matches per s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(bounds, key=lambda r: (r["attack"], r["threshold"])):
        t = r.get("tpm", {})
        d = r.get("duration_s") or 1
        model = r.get("model_fraction")
        if r.get("none_feasible"):
            print("| %d | %s | none feasible (f=0 failed: %s) | | %s "
                  "| | | | | | |"
                  % (r["threshold"], r["attack"], r.get("why", "?"),
                     "%.3f" % model if model is not None else "n/a"))
            continue
        dos = ("%.2fM / %.0fk / %.0fk / %.0fk"
               % (t.get("dos_skipped", t.get("dos_skipped_pkts", 0))
                  / d / 1e6, t.get("dos_flows_passed", 0) / d / 1e3,
                  t.get("dos_removed_collision", 0) / d / 1e3,
                  t.get("dos_removed_sweep", 0) / d / 1e3)
               if "dos_flows_passed" in t else
               "%.2fM skipped / n/a" % (t.get("dos_skipped_pkts", 0)
                                        / d / 1e6))
        print("| %d | %s | **%.3f** (offered %.3f) | %.3f (offered %.3f) "
              "| %s | %.2f, %.2f | %d | %d | %.2f | %s | %.2fM |"
              % (r["threshold"], r["attack"], r.get("dos_byte_frac", 0),
                 r["fraction"], r.get("dos_pkt_frac", 0),
                 r.get("pkt_fraction", 0),
                 "%.3f" % model if model is not None else "n/a",
                 r.get("pps", 0) / 1e6, r.get("wire_gbps", 0),
                 r["feeder"]["ring_drops"],
                 t.get("sweeps_unfinished", 0), r.get("legit_min", 0),
                 dos, t.get("matches", 0) / d / 1e6))


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
    p.add_argument("--prefixes", type=int, default=65536,
                   help="flow i goes to prefix i %% PREFIXES")
    p.add_argument("--vxlan", action="store_true",
                   help="each frame in VXLAN (--size: the inner frame's)")
    p.add_argument("--vnis", type=int, default=1,
                   help="flow i in VNI VNI_BASE + i %% VNIS (1)")
    p.add_argument("--vni-base", type=int, default=5001)
    p.add_argument("--outer-src", default="10.99.0.2",
                   help="the remote VTEP's address (10.99.0.2)")
    p.add_argument("--outer-dst", default="10.99.0.1",
                   help="the switch's underlay address (10.99.0.1)")
    p.add_argument("--outer-src-mac", default="02:99:00:00:00:02")
    p.add_argument("--outer-dst-mac", default="02:99:00:00:00:01")
    p = sub.add_parser("events")
    p.add_argument("ctl")
    p.add_argument("--prefixes", type=int, default=512)
    p.add_argument("--per-prefix", type=int, default=8)
    p.add_argument("--interval", default="10ms")
    p.add_argument("--jobs", type=int, default=1,
                   help="connections adding events side by side (1)")
    p.add_argument("--timeout", type=float, default=60,
                   help="seconds a command may take (60)")
    p = sub.add_parser("churn")
    p.add_argument("ctl")
    p.add_argument("--prefixes", type=int, default=512)
    p.add_argument("--per-prefix", type=int, default=8)
    p.add_argument("--interval", default="10ms")
    p = sub.add_parser("loop-gaps")
    p = sub.add_parser("parse")
    p.add_argument("--tpm0", help="tpm/stats at the measurement window's "
                   "start (its sweeps are counted apart)")
    p.add_argument("--round", type=int, required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--mem", default="?")
    p.add_argument("--perf", required=True)
    p.add_argument("--stats")
    p.add_argument("--tpm")
    p.add_argument("--steal", type=float)
    p.add_argument("--other-load", type=float)
    p.add_argument("--foreign", type=int)
    p.add_argument("--pvp")
    p = sub.add_parser("pvp-check")
    p.add_argument("--config", required=True)
    p.add_argument("--perf", required=True)
    p.add_argument("--dp0", required=True)
    p.add_argument("--dp1", required=True)
    p.add_argument("--vm0", required=True)
    p.add_argument("--vm1", required=True)
    p.add_argument("--dp-end", required=True)
    p.add_argument("--vm-end", required=True)
    p.add_argument("--tpm")
    p.add_argument("--dp-tpm0")
    p.add_argument("--dp-tpm1")
    p.add_argument("--min-round-trip", type=float, default=10.0)
    p.add_argument("--flows", type=int, default=300)
    p.add_argument("--per-prefix", type=int, default=8)
    p = sub.add_parser("table")
    p.add_argument("results")
    p.add_argument("--events", default="4096")
    p.add_argument("--pvp", action="store_true",
                   help="bench-ovs.sh --pvp: rates and cycles per packet "
                        "received on the pcap port")
    p.add_argument("--target-b", type=float, default=0.97)
    p.add_argument("--target-c", type=float, default=0.85)
    p = sub.add_parser("probe")
    p.add_argument("--set", action="append", metavar="KEY=VALUE")
    p.add_argument("--perf", required=True)
    p.add_argument("--tpm-before")
    p.add_argument("--tpm-after")
    p.add_argument("--port-before")
    p.add_argument("--port-after")
    p.add_argument("--out-before")
    p.add_argument("--out-after")
    p.add_argument("--steal", type=float)
    p.add_argument("--other-load", type=float)
    p.add_argument("--keep-ratio", type=float, default=0.98)
    p = sub.add_parser("feas-table")
    p.add_argument("results")
    p = sub.add_parser("feas-plot")
    p.add_argument("results")
    p.add_argument("png")
    p = sub.add_parser("dos-events")
    p.add_argument("ctl")
    p.add_argument("--patterns", type=int, default=8)
    p.add_argument("--legit-prefixes", type=int, default=4)
    p.add_argument("--legit-bytes", type=int, default=1000)
    p.add_argument("--interval", default="10ms")
    p = sub.add_parser("dos-probe")
    p.add_argument("--set", action="append", metavar="KEY=VALUE")
    p.add_argument("--perf", required=True)
    p.add_argument("--tpm-before", required=True)
    p.add_argument("--tpm-after", required=True)
    p.add_argument("--feeder-before", required=True)
    p.add_argument("--feeder-after", required=True)
    p.add_argument("--reports-before", required=True)
    p.add_argument("--reports-after", required=True)
    p.add_argument("--legit-prefixes", type=int, default=4)
    p.add_argument("--keep-ratio", type=float, default=0.98)
    p.add_argument("--detect", type=float, default=0.95)
    p = sub.add_parser("dos-table")
    p.add_argument("results")
    a = ap.parse_args()
    sys.exit({"dos-events": cmd_dos_events, "dos-probe": cmd_dos_probe,
              "dos-table": cmd_dos_table, "pcap": cmd_pcap,
              "events": cmd_events, "parse": cmd_parse,
              "pvp-check": cmd_pvp_check, "churn": cmd_churn,
              "loop-gaps": cmd_loop_gaps, "table": cmd_table,
              "probe": cmd_probe, "feas-table": cmd_feas_table,
              "feas-plot": cmd_feas_plot}[a.cmd](a))


if __name__ == "__main__":
    main()
