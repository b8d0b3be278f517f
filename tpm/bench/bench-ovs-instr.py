#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Helper of tpm/bench/bench-ovs-instr.sh (python3 standard library only):
reads the callgrind dump of ovs-vswitchd's PMD thread over one window.

  analyze DUMP --config C --stats F --perf F [--tpm0 F --tpm1 F] ...
                 one JSON line: the dump's instructions (and simulated
                 misses) per packet received, the monitor's part (every
                 call from OVS's code into the monitor, inclusive), its
                 sweep (tpm_sweep_step, inclusive), its functions (self)
                 and source files, and OVS's own functions
  show RESULTS   one run's lines, readable
  table RESULTS  the configurations side by side: Ir per packet, C - B,
                 C - A, the monitor's split, the functions that differ

The monitor's code is every function whose name starts with "tpm_" or
whose source file is one of the monitor's: under the tree's tpm/ or
lib/ (libtpm, libtpmcommon; not OVS's lib/) or the glue
(lib/tpm-ovs*.c in the OVS build).

  tpm/bench/bench-ovs-instr.py analyze callgrind.out.1 --config C \\
      --stats stats.txt --perf perf.txt --seconds 40
"""

import argparse
import importlib.util
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))


def bench_ovs():
    """tpm/bench/bench-ovs.py as a module (its tpm/stats parsers)."""
    spec = importlib.util.spec_from_file_location(
        "bench_ovs", os.path.join(HERE, "bench-ovs.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


# Callgrind's format (valgrind's docs, "Callgrind Format Specification"):
# name compression "(id) name", one table per kind; cost lines "POS...
# COST..." with relative positions; "calls=N TARGET" followed by the
# call's inclusive cost line.
NAME_RE = re.compile(r"^\((\d+)\)(?: (.*))?$")
FILE_KINDS = ("fl", "fi", "fe", "cfi", "cfl")
FN_KINDS = ("fn", "cfn")
OB_KINDS = ("ob", "cob")


class Dump:
    def __init__(self, path):
        self.events = []
        self.totals = None
        self.self_cost = {}     # (ob, fn) -> [costs]
        self.fn_file = {}       # (ob, fn) -> fl of its blocks
        self.file_cost = {}     # (ob, fn) -> {source file: [costs]}
        self.edges = {}         # ((ob, fn), (cob, cfn)) -> [calls, costs]
        self.header = {}
        self._read(path)

    def _add(self, acc, costs):
        n = len(self.events)
        for i, c in enumerate(costs[:n]):
            acc[i] += c

    def _zero(self):
        return [0] * len(self.events)

    def _read(self, path):
        names = {"file": {}, "fn": {}, "ob": {}}
        ob = fl = fi = fn = None
        cob = cfn = None
        pending = None
        npos = 1

        def name(kind, text):
            m = NAME_RE.match(text)
            if not m:
                return text
            table = names[kind]
            if m.group(2) is not None:
                table[m.group(1)] = m.group(2)
            return table.get(m.group(1), "?")

        with open(path, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line or line.startswith("#"):
                    continue
                c0 = line[0]
                if c0.isdigit() or c0 in "+-*":
                    parts = line.split()
                    try:
                        costs = [int(x) for x in parts[npos:]]
                    except ValueError:
                        continue
                    key = (ob, fn)
                    if pending is not None:
                        e = self.edges.setdefault(
                            (key, pending[0]), [0, self._zero()])
                        e[0] += pending[1]
                        self._add(e[1], costs)
                        pending = None
                    else:
                        acc = self.self_cost.setdefault(key, self._zero())
                        self._add(acc, costs)
                        fc = self.file_cost.setdefault(key, {})
                        self._add(fc.setdefault(fi, self._zero()), costs)
                    continue
                k, sep, v = line.partition("=")
                if sep and k in FILE_KINDS:
                    v = name("file", v)
                    if k == "fl":
                        fl = fi = v
                    elif k in ("fi", "fe"):
                        fi = v
                    continue
                if sep and k in FN_KINDS:
                    v = name("fn", v)
                    if k == "fn":
                        fn = v
                        fi = fl
                        cob = cfn = None
                        self.fn_file.setdefault((ob, fn), fl)
                    else:
                        cfn = v
                    continue
                if sep and k in OB_KINDS:
                    v = name("ob", v)
                    if k == "ob":
                        ob = v
                    else:
                        cob = v
                    continue
                if sep and k == "calls":
                    n = int(v.split()[0])
                    pending = ((cob if cob is not None else ob, cfn), n)
                    cob = None
                    continue
                if sep and k in ("jump", "jcnd"):
                    continue
                hk, hsep, hv = line.partition(":")
                if hsep:
                    hv = hv.strip()
                    if hk == "events":
                        self.events = hv.split()
                    elif hk == "positions":
                        npos = len(hv.split())
                    elif hk in ("totals", "summary"):
                        self.totals = [int(x) for x in hv.split()]
                    else:
                        self.header.setdefault(hk, hv)

    def inclusive(self, key, _seen=None):
        """Self plus the calls' costs, recursion left out."""
        acc = list(self.self_cost.get(key, self._zero()))
        for (caller, callee), (_, costs) in self.edges.items():
            if caller == key and callee != key:
                self._add(acc, costs)
        return acc

    def calls_to(self, fn_name):
        return sum(n for (_, callee), (n, _) in self.edges.items()
                   if callee[1] == fn_name)


def is_monitor(fn, path):
    if fn and (fn.startswith("tpm_") or fn.startswith("tpm-")):
        return True
    if not path:
        return False
    p = os.path.normpath(path)
    if os.path.basename(p).startswith("tpm-ovs"):
        return True
    for d in ("tpm", "lib"):
        if p.startswith(os.path.join(TOP, d) + os.sep):
            return True
    return False


def short(path):
    if not path:
        return "?"
    p = os.path.normpath(path)
    if p.startswith(TOP + os.sep):
        return os.path.relpath(p, TOP)
    return p


def grab_block(text, core="core_id 1:"):
    head, _, rest = text.partition(core)
    nxt = re.search(r"\n(pmd thread|main thread)", rest)
    return rest[:nxt.start()] if nxt else rest


def per(v, n):
    return v / n if n else float("nan")


def cmd_analyze(a):
    d = Dump(a.dump)
    ev = d.events
    ir = ev.index("Ir")
    # The instructions executed in the window: the sum of every
    # function's own cost (the dump's "totals:"; its "summary:" and the
    # inclusive cost of a call in progress when the counters were zeroed
    # can miss a few per thousand).
    total = [sum(c[i] for c in d.self_cost.values()) for i in range(len(ev))]
    stats = open(a.stats).read()
    pmd = grab_block(stats)
    m = re.search(r"packets received: (\d+)", pmd)
    packets = int(m.group(1)) if m else 0
    r = {"config": a.config, "dump": a.dump, "events": ev,
         "seconds": a.seconds, "run_seconds": a.run_seconds,
         "kpps": packets / a.seconds / 1e3}
    for k, rx in (("passes", r"avg. datapath passes per packet: ([\d.]+)"),
                  ("simple_hits", r"simple match hits: (\d+)"),
                  ("emc_hits", r"emc hits: (\d+)"),
                  ("smc_hits", r"smc hits: (\d+)"),
                  ("megaflow_hits", r"megaflow hits: (\d+)"),
                  ("upcalls", r"miss with success upcall: (\d+)"),
                  ("out_batch", r"avg. packets per output batch: ([\d.]+)")):
        m = re.search(rx, pmd)
        if m:
            r[k] = float(m.group(1)) if "." in m.group(1) else int(m.group(1))
    perf = open(a.perf).read() if a.perf else ""
    m = re.search(r"Iterations:\s+(\d+)", perf)
    r["iterations"] = int(m.group(1)) if m else None
    m = re.search(r"Rx packets:\s+(\d+)", perf)
    r["perf_rx"] = int(m.group(1)) if m else None

    # The packets of callgrind's own window: dp_netdev_input() is called
    # once per non-empty received batch, and net_pcap's infinite_rx fills
    # every batch: pmd-perf-show's Rx packets are 32 per iteration (each
    # iteration polls p1 once; p2 receives nothing).  Otherwise OVS's
    # count (pmd-stats-show, its window a few ms off callgrind's).
    batches = d.calls_to("dp_netdev_input")
    r["batches_cg"] = batches
    # (Read a moment apart: an iteration's packets may be counted and
    # its end not yet.)
    r["full_batches"] = bool(r["iterations"]) and \
        abs(r["perf_rx"] - 32 * r["iterations"]) <= 64
    r["packets_ovs"] = packets
    if r["full_batches"] and batches:
        packets = 32 * batches
        r["count"] = "callgrind"
    else:
        r["count"] = "ovs"
    r["packets"] = packets
    r["window_skew"] = (32 * batches / r["packets_ovs"] - 1
                        if r["packets_ovs"] else None)
    r["Ir"] = total[ir]
    r["Ir_pkt"] = per(total[ir], packets)
    r["Ir_pkt_ovs"] = per(total[ir], r["packets_ovs"])

    # The monitor: its functions' own cost and the calls they make to
    # others (libc, OVS helpers), which is what the calls from OVS into
    # the monitor cost inclusively (those edges are listed too).
    # A PLT stub (--skip-plt=no) is named after the function it jumps
    # to (its address changes from run to run); code without symbols
    # after its object.
    plt = {}
    for (caller, callee), (n, _) in d.edges.items():
        if caller[1] and caller[1].endswith("[PLT]"):
            if n >= plt.get(caller, ("", -1))[1]:
                plt[caller] = (callee[1], n)

    def name(k):
        if k in plt:
            return "PLT:%s" % plt[k][0]
        if k[1] and k[1].startswith("0x"):
            return "%s:%s" % (os.path.basename(k[0] or "?"), k[1])
        return k[1]
    mon = {k for k in set(d.self_cost) | set(d.fn_file)
           if is_monitor(k[1], d.fn_file.get(k))}
    entries = {}
    for (caller, callee), (n, costs) in d.edges.items():
        if callee in mon and caller not in mon:
            e = entries.setdefault("%s -> %s" % (name(caller), name(callee)),
                                   [0, [0] * len(ev)])
            e[0] += n
            for i, c in enumerate(costs):
                e[1][i] += c
    mon_incl = [0] * len(ev)
    for k in mon:
        for i, c in enumerate(d.self_cost.get(k, [])):
            mon_incl[i] += c
    mon_ext = {}
    for (caller, callee), (n, costs) in d.edges.items():
        if caller in mon and callee not in mon:
            e = mon_ext.setdefault(name(callee), [0, 0])
            e[0] += n
            e[1] += costs[ir]
            for i, c in enumerate(costs):
                mon_incl[i] += c
    sweep = [0] * len(ev)
    sweep_calls = 0
    for (caller, callee), (n, costs) in d.edges.items():
        if callee[1] == "tpm_sweep_step" and caller[1] != "tpm_sweep_step":
            sweep_calls += n
            for i, c in enumerate(costs):
                sweep[i] += c
    # The work per epoch of wall-clock time (under valgrind ~50 times as
    # much per packet as at full speed): the sweep and what tpm_advance()
    # calls when the epoch changes (the sweep's start, a forced sweep).
    epoch = list(sweep)
    advance_calls = 0
    for (caller, callee), (n, costs) in d.edges.items():
        if caller[1] == "tpm_advance" and callee[1] != "tpm_advance":
            advance_calls += n
            for i, c in enumerate(costs):
                epoch[i] += c
    r["epoch_Ir"] = epoch[ir]
    r["epoch_Ir_pkt"] = per(epoch[ir], packets)
    r["mon_perpkt_Ir_pkt"] = per(mon_incl[ir] - epoch[ir], packets)
    r["entries"] = {k: {"calls": n, "Ir_pkt": per(c[ir], packets)}
                    for k, (n, c) in sorted(entries.items())}
    # The two hooks of the PMD: their own cost and their callees'
    # (inclusive), e.g. tpm_process_batch (tpm-bench's phase 1).
    hooks = {}
    for k in mon:
        if k[1] in ("tpm_ovs_rx", "tpm_ovs_pmd_iteration"):
            h = hooks.setdefault(k[1], {"self": 0, "callees": {}})
            h["self"] += d.self_cost.get(k, [0])[ir]
            for (caller, callee), (n, costs) in d.edges.items():
                if caller == k:
                    c = h["callees"].setdefault(name(callee), [0, 0])
                    c[0] += n
                    c[1] += costs[ir]
                    # One level further (e.g. tpm_advance's epoch work).
                    for (c2, callee2), (n2, costs2) in d.edges.items():
                        if c2 == callee and callee2 != callee:
                            c = h["callees"].setdefault(
                                "%s > %s" % (name(callee), name(callee2)),
                                [0, 0])
                            c[0] += n2
                            c[1] += costs2[ir]
    r["hooks"] = {h: {"self_Ir_pkt": per(v["self"], packets),
                      "callees": [[c, n, per(x, packets)] for c, (n, x) in
                                  sorted(v["callees"].items(),
                                         key=lambda t: (
                                             -v["callees"][t[0].split(
                                                 " > ")[0]][1],
                                             " > " in t[0], -t[1][1]))
                                  if x >= 0.05 * packets
                                  or (" > " not in c and x >= 0.005 * packets)]}
                  for h, v in hooks.items()}
    r["mon_entries_Ir_pkt"] = per(sum(c[ir] for _, c in entries.values()),
                                  packets)
    r["mon_Ir"] = mon_incl[ir]
    r["mon_Ir_pkt"] = per(mon_incl[ir], packets)
    r["sweep_Ir"] = sweep[ir]
    r["sweep_calls"] = sweep_calls
    r["sweep_Ir_pkt"] = per(sweep[ir], packets)
    r["mon_nosweep_Ir_pkt"] = per(mon_incl[ir] - sweep[ir], packets)
    r["rest_Ir_pkt"] = per(total[ir] - mon_incl[ir], packets)

    # Per function (self), all of them above 0.005 Ir per packet.
    # Functions outside the monitor that it calls (directly or through a
    # PLT stub): marked in the lists.
    called = set()
    for (caller, callee), _ in d.edges.items():
        if caller in mon and callee not in mon:
            called.add(callee)
            if callee in plt:
                called.update(c for (a2, c) in d.edges if a2 == callee)
    merged = {}
    for k, c in d.self_cost.items():
        key = (name(k), os.path.basename(k[0] or "?"))
        f = merged.setdefault(key, {
            "fn": key[0], "ob": key[1], "file": short(d.fn_file.get(k)),
            "monitor": k in mon, "called_by_monitor": False, "Ir": 0})
        f["Ir"] += c[ir]
        f["called_by_monitor"] |= k in called
    fns = []
    for f in merged.values():
        if f["Ir"] >= 0.005 * packets:
            f["Ir_pkt"] = per(f.pop("Ir"), packets)
            fns.append(f)
    fns.sort(key=lambda x: -x["Ir_pkt"])
    r["functions"] = fns
    r["mon_external"] = [[k, n, per(v, packets)]
                         for k, (n, v) in sorted(mon_ext.items(),
                                                 key=lambda x: -x[1][1])
                         if v >= 0.005 * packets]
    # The monitor's functions' own Ir by source file (inlined code under
    # its file).
    files = {}
    for k in mon:
        for path, c in d.file_cost.get(k, {}).items():
            files[short(path)] = files.get(short(path), 0) + c[ir]
    r["mon_files"] = [[f, per(v, packets)]
                      for f, v in sorted(files.items(), key=lambda x: -x[1])
                      if v >= 0.005 * packets]
    if "D1mr" in ev:
        def misses(costs):
            g = dict(zip(ev, costs))
            return {"D1": per(g["D1mr"] + g["D1mw"], packets),
                    "D1r": per(g["D1mr"], packets),
                    "D1w": per(g["D1mw"], packets),
                    "LL": per(g["DLmr"] + g["DLmw"], packets),
                    "LLr": per(g["DLmr"], packets),
                    "LLw": per(g["DLmw"], packets),
                    "I1": per(g["I1mr"], packets),
                    "ILL": per(g["ILmr"], packets),
                    # With --branch-sim=yes: mispredicted conditional and
                    # indirect branches.
                    "Bcm": per(g["Bcm"], packets) if "Bcm" in g else None,
                    "Bim": per(g["Bim"], packets) if "Bim" in g else None}
        r["misses"] = misses(total)
        r["mon_misses"] = misses(mon_incl)
        # The switch's own: everything outside the monitor's calls.
        r["own_misses"] = misses([x - y for x, y in zip(total, mon_incl)])
        r["sweep_misses"] = misses(sweep)
        r["epoch_misses"] = misses(epoch)
        r["mon_perpkt_misses"] = misses([x - y for x, y in
                                         zip(mon_incl, epoch)])
    if a.tpm0 and a.tpm1:
        bo = bench_ovs()
        r["tpm"] = bo.tpm_delta(open(a.tpm0).read(), open(a.tpm1).read())
        sw = r["tpm"].get("sweeps_done", 0) + r["tpm"].get(
            "sweeps_unfinished", 0)
        r["sweep_Ir_epoch"] = per(sweep[ir], sw) if sw else None
        ep = r["tpm"].get("epochs", 0)
        r["epoch_Ir_epoch"] = per(epoch[ir], ep) if ep else None
        r["packets_epoch"] = per(packets, r["tpm"].get("epochs", 0))
    r["top"] = a.top
    print(json.dumps(r, sort_keys=True))


def load(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def fmt(v, p=1):
    if v is None or v != v:
        return "-"
    return "%.*f" % (p, v)


def show(r, out=sys.stdout):
    w = out.write
    w("%s: %d packets in %s s (%.1f Kpps under valgrind), counted by %s:"
      " %d batches of 32 in callgrind's window%s; pmd-stats-show %d"
      " (%+.3f%%)\n"
      % (r["config"], r["packets"], r["seconds"], r["kpps"], r["count"],
         r["batches_cg"],
         "" if r["full_batches"] else " (NOT all batches full)",
         r["packets_ovs"], 100 * (r["window_skew"] or 0)))
    w("  Ir/packet %s (by OVS's count %s), %s without the epoch work;"
      " monitor %s (the calls into it %s): per packet %s, epoch work %s"
      " (of it the sweep %s); the rest %s\n"
      % (fmt(r["Ir_pkt"], 2), fmt(r["Ir_pkt_ovs"], 2),
         fmt(r["Ir_pkt"] - r["epoch_Ir_pkt"], 2),
         fmt(r["mon_Ir_pkt"], 2), fmt(r["mon_entries_Ir_pkt"], 2),
         fmt(r["mon_perpkt_Ir_pkt"], 2), fmt(r["epoch_Ir_pkt"], 2),
         fmt(r["sweep_Ir_pkt"], 2), fmt(r["rest_Ir_pkt"], 2)))
    small = 0
    for k, e in r["entries"].items():
        if e["Ir_pkt"] < 0.005:
            small += 1
            continue
        w("  entry %s: %d calls, %s Ir/packet\n"
          % (k, e["calls"], fmt(e["Ir_pkt"], 2)))
    if small:
        w("  (and %d entries below 0.005 Ir/packet: the monitor's coverage"
          " counters, cleared by OVS)\n" % small)
    if r.get("tpm"):
        t = r["tpm"]
        w("  tpm/stats over the window: packets %s, matches %s, sweeps done"
          " %s, unfinished %s, epochs %s; sweep %s Ir per swept epoch (%d"
          " calls of tpm_sweep_step), epoch work %s Ir per epoch, %s"
          " packets per epoch\n"
          % (t.get("packets"), t.get("matches"), t.get("sweeps_done"),
             t.get("sweeps_unfinished"), t.get("epochs"),
             fmt(r.get("sweep_Ir_epoch"), 0), r["sweep_calls"],
             fmt(r.get("epoch_Ir_epoch"), 0),
             fmt(r.get("packets_epoch"), 0)))
    if "misses" in r:
        m, mm = r["misses"], r["mon_misses"]
        w("  misses/packet: D1 %s (r %s, w %s), LL %s, I1 %s; monitor: D1 %s,"
          " LL %s, I1 %s\n" % (fmt(m["D1"], 3), fmt(m["D1r"], 3),
                               fmt(m["D1w"], 3), fmt(m["LL"], 4),
                               fmt(m["I1"], 3), fmt(mm["D1"], 3),
                               fmt(mm["LL"], 4), fmt(mm["I1"], 3)))
        if m.get("Bcm") is not None:
            w("  mispredicted branches/packet (simulated): conditional %s,"
              " indirect %s; monitor: %s, %s\n"
              % (fmt(m["Bcm"], 3), fmt(m["Bim"], 3), fmt(mm["Bcm"], 3),
                 fmt(mm["Bim"], 3)))
    mf = [f for f in r["functions"] if f["monitor"]][:r.get("top", 15)]
    if mf:
        w("  monitor functions (self Ir/packet): %s\n" % ", ".join(
            "%s %s" % (f["fn"], fmt(f["Ir_pkt"], 2)) for f in mf))
        w("  monitor by source file: %s\n" % ", ".join(
            "%s %s" % (k, fmt(v, 2)) for k, v in r["mon_files"][:12]))
        w("  called by the monitor, not its own: %s\n" % (", ".join(
            "%s %s" % (k, fmt(v, 2)) for k, _, v in
            r["mon_external"][:8]) or "-"))
        for h, v in sorted(r.get("hooks", {}).items()):
            w("  %s: self %s, calls %s\n" % (h, fmt(v["self_Ir_pkt"], 2),
              ", ".join("%s (%d) %s" % (c, n, fmt(x, 2))
                        for c, n, x in v["callees"]) or "-"))
    of = [f for f in r["functions"] if not f["monitor"]][:12]
    w("  top other functions (self Ir/packet): %s\n" % ", ".join(
        "%s %s" % (f["fn"], fmt(f["Ir_pkt"], 2)) for f in of))


def cmd_show(a):
    for r in load(a.results):
        show(r)


def cmd_table(a):
    runs = {r["config"]: r for r in load(a.results)}
    cols = [c for c in "ABC" if c in runs]
    w = sys.stdout.write
    w("\n| | %s |%s%s\n" % (" | ".join(cols),
                            " C - B |" if "B" in runs and "C" in runs else "",
                            " C - A |" if "A" in runs and "C" in runs else ""))
    w("|---|%s\n" % ("---|" * (len(cols) + ("B" in runs and "C" in runs)
                               + ("A" in runs and "C" in runs))))

    def row(label, key, p=1, get=None):
        g = get or (lambda r: r.get(key))
        vals = {c: g(runs[c]) for c in cols}
        cells = [fmt(vals[c], p) for c in cols]
        if "B" in runs and "C" in runs:
            cells.append(fmt(vals["C"] - vals["B"], p)
                         if None not in (vals["C"], vals["B"]) else "-")
        if "A" in runs and "C" in runs:
            cells.append(fmt(vals["C"] - vals["A"], p)
                         if None not in (vals["C"], vals["A"]) else "-")
        w("| %s | %s |\n" % (label, " | ".join(cells)))

    row("**Ir per packet, without the epoch work**", None, 1,
        lambda r: r["Ir_pkt"] - r["epoch_Ir_pkt"])
    row("  OVS, DPDK, libc (not the monitor)", "rest_Ir_pkt", 1)
    row("  the monitor's work per packet", "mon_perpkt_Ir_pkt", 1)
    row("the monitor's epoch work, at this run's packets per epoch",
        "epoch_Ir_pkt", 1)
    row("  of it the sweep (tpm_sweep_step)", "sweep_Ir_pkt", 1)
    row("Ir per packet, all (the same packets per epoch)", "Ir_pkt", 1)
    row("  the same, OVS's packet count", "Ir_pkt_ovs", 1)
    row("  the monitor, inclusive", "mon_Ir_pkt", 1)
    row("  (the calls from OVS into the monitor)", "mon_entries_Ir_pkt", 1)
    if all("misses" in runs[c] for c in cols):
        for label, f in (("", lambda r: r["misses"]),
                         ("  the monitor's per packet, ",
                          lambda r: r["mon_perpkt_misses"]),
                         ("  the epoch work's, ",
                          lambda r: r["epoch_misses"])):
            row(label + "D1 misses per packet (r+w)", None, 3,
                lambda r, f=f: f(r)["D1"])
            row(label + "LL misses per packet (r+w)", None, 4,
                lambda r, f=f: f(r)["LL"])
        row("I1 misses per packet", None, 3, lambda r: r["misses"]["I1"])
        if all("own_misses" in runs[c] for c in cols):
            for k, label, p in (("D1", "D1 misses", 3), ("LL", "LL misses", 4),
                                ("I1", "I1 misses", 3)):
                row("  the switch's own (outside the monitor), " + label,
                    None, p, lambda r, k=k: r["own_misses"][k])
        if all(runs[c]["misses"].get("Bcm") is not None for c in cols):
            row("mispredicted conditional branches per packet", None, 3,
                lambda r: r["misses"]["Bcm"])
            if all("own_misses" in runs[c] for c in cols):
                row("  the switch's own", None, 3,
                    lambda r: r["own_misses"]["Bcm"])
    row("packets in the window", "packets", 0)
    row("Kpps under valgrind", "kpps", 1)
    if "C" in runs and runs["C"].get("tpm"):
        c = runs["C"]
        w("\nC: the epoch work %s Ir per epoch, of it the sweep %s per"
          " swept epoch (%s done, %s unfinished, %s epochs; %s calls of"
          " tpm_sweep_step); %s packets per epoch under valgrind\n"
          % (fmt(c.get("epoch_Ir_epoch"), 0),
             fmt(c.get("sweep_Ir_epoch"), 0), c["tpm"].get("sweeps_done"),
             c["tpm"].get("sweeps_unfinished"), c["tpm"].get("epochs"),
             c["sweep_calls"], fmt(c.get("packets_epoch"), 0)))
    if "C" in runs:
        c = runs["C"]
        mf = [f for f in c["functions"] if f["monitor"]][:c.get("top", 15)]
        w("\nC, the monitor's functions (self Ir per packet):\n")
        for f in mf:
            w("  %8s  %s (%s)\n" % (fmt(f["Ir_pkt"], 2), f["fn"], f["file"]))
        rest = c["mon_Ir_pkt"] - sum(f["Ir_pkt"] for f in c["functions"]
                                     if f["monitor"])
        w("  %8s  called by the monitor, not its own (%s)\n" % (
            fmt(rest, 2), ", ".join(
                "%s %s" % (k, fmt(v, 2)) for k, _, v in
                c["mon_external"][:6]) or "-"))
        w("C, the monitor by source file (its functions' own Ir, inlined"
          " code under its file):\n")
        for k, v in c["mon_files"][:15]:
            w("  %8s  %s\n" % (fmt(v, 2), k))
        w("C, the PMD's two hooks (self, and their callees inclusive):\n")
        for h, v in sorted(c.get("hooks", {}).items()):
            w("  %8s  %s itself\n" % (fmt(v["self_Ir_pkt"], 2), h))
            for cn, n, x in v["callees"]:
                w("  %8s    %s (%d calls)\n" % (fmt(x, 2), cn, n))
    # OVS's own functions that differ between configurations.
    pairs = [(x, y) for x, y in (("A", "B"), ("B", "C"), ("A", "C"))
             if x in runs and y in runs]
    for x, y in pairs:
        fx = {(f["fn"], f["ob"]): f["Ir_pkt"] for f in runs[x]["functions"]
              if not f["monitor"]}
        fy = {(f["fn"], f["ob"]): f["Ir_pkt"] for f in runs[y]["functions"]
              if not f["monitor"]}
        via = {(f["fn"], f["ob"]) for r in (runs[x], runs[y])
               for f in r["functions"] if f.get("called_by_monitor")}
        diffs = sorted(((fy.get(k, 0) - fx.get(k, 0), k)
                        for k in set(fx) | set(fy)),
                       key=lambda t: -abs(t[0]))
        diffs = [t for t in diffs if abs(t[0]) >= 0.05][:10]
        w("\n%s - %s, functions not the monitor's, self Ir per packet: %s\n"
          % (y, x, ", ".join("%s%s %+.2f" % (
              k[0], " (called by the monitor)" if k in via else "", v)
              for v, k in diffs) or "none differs by 0.05 or more"))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("analyze")
    p.add_argument("dump")
    p.add_argument("--config", required=True)
    p.add_argument("--stats", required=True)
    p.add_argument("--perf")
    p.add_argument("--tpm0")
    p.add_argument("--tpm1")
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--run-seconds", type=float)
    p.add_argument("--top", type=int, default=15)
    p = sub.add_parser("show")
    p.add_argument("results")
    p = sub.add_parser("table")
    p.add_argument("results")
    a = ap.parse_args()
    {"analyze": cmd_analyze, "show": cmd_show,
     "table": cmd_table}[a.cmd](a)


if __name__ == "__main__":
    main()
