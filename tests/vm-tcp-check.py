#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The monitor's TCP variables of one connection against two captures,
for tests/ovs-vm-tcp.sh.  Standard library only (the captures are read
with tests/pcaplib.py, no libtpm code).

    vm-tcp-check.py --client A:P --server A:P --near PCAP --far PCAP
        --epoch-ns N --seq EVENT --ack EVENT [--rtt EVENT ...]
        [--lost EVENT ...] --wmax EVENT --wmin EVENT --wire JSON JSON
        [--drops N N] < REPORTS

The connection crosses the switch between two capture points: NEAR, on
the client's side (the client's frames captured before the switch
receives them, the server's after the switch sent them), and FAR, on
the server's side (the other way round).  Both captures are taken with
nanosecond time stamps on the same machine, so that each frame's time
at the switch (the monitor's time of its rx batch) lies between its two
capture times: for a client frame between NEAR and FAR, for a server
frame between FAR and NEAR.  EPSILON_NS allows for the monitor's
microsecond clock.

Checks, each failure printed on stderr:

  frames   each direction holds the same frames in both captures, in the
           same order (sequence and acknowledgement numbers, flags,
           window, lengths): nothing lost or changed between them
  epochs   the reports of each event (max(seq), max(ack), max(rtt), all
           with predicates that always hold) come exactly from the
           epochs where the monitor received a frame of that direction:
           every epoch that certainly holds one (both capture times
           inside it) has a report, no report is outside the epochs
           that may hold one
  seq      each report's value is the highest sequence number sent
           (segment end, unwrapped as the monitor does) after a frame
           that may be in the epoch, at least the value after every frame
           certainly in it, and the last report's value is the
           direction's final one
  ack      each report's value lies between the highest acknowledgement
           of the other direction that certainly came before a frame that
           may be in the epoch and the highest that may have come before
           it (by the capture times), at least the lower bound of every
           frame certainly in it; the last report's value is the
           highest acknowledgement the other direction sent before this
           direction's last frame (both captures must agree on it)
  rtt      (with --rtt) the samples are computed from each capture's
           order of frames by docs/event-language.md's definition (a
           segment that is not a retransmission starts one when none is
           in flight, the first acknowledgement at or beyond its end
           completes it, a retransmission cancels it); both orders must
           give the same samples (the test's request/response traffic
           has no race between the directions).  A sample's value at the
           switch lies between the one measured at the receiver's side
           and the one at the sender's side.  Each report's value is
           within those bounds of the latest sample before a frame that
           may be in the epoch (0 if none), and at least the lower bound
           of every frame certainly in it.
  lost     the sum of is_lost (the events --lost) of each direction
           equals the
           retransmissions of tests/pcap-tcp.py's figures for it (--wire:
           its output for the client's direction, then the server's, on
           the near capture), and is at least the receiver's --drops
  rwnd     every reported max(rwnd) (--wmax) and min(rwnd) (--wmin) is a
           window of those figures (scaled by both SYNs' shifts), and
           the largest and smallest are the capture's (as
           tests/tcp-kernel.sh's scenario 4)

Prints two summary lines per direction.  Exit status 0 if every check
passes, else 1.
"""
import argparse
import bisect
import json
import socket
import struct
import sys

from pcaplib import LINKTYPE_ETHERNET, ethernet_payload, records

EPSILON_NS = 20000
WRAP = 1 << 32


def endpoint(text):
    addr, port = text.rsplit(":", 1)
    return socket.inet_aton(addr), int(port)


def unwrap(ref, raw):
    """'raw' (32 bits) unwrapped to the 64-bit value nearest 'ref'."""
    d = (raw - ref) % WRAP
    if d >= 1 << 31:
        d -= WRAP
    return max(ref + d, 0)


def read_capture(path, client, server):
    """The connection's frames in capture order: dicts with d (0: client
    to server, 1: back), i (index within the direction), t, seq, ack,
    flags, seglen, win, wirelen."""
    out = []
    n = [0, 0]
    for t, _, wirelen, data in records(path, (LINKTYPE_ETHERNET,),
                                       "link type %d is not Ethernet",
                                       with_time=True):
        ethertype, off = ethernet_payload(data)
        if ethertype != b"\x08\x00" or len(data) < off + 20:
            continue
        ip = data[off:]
        ihl = (ip[0] & 0x0f) * 4
        if ip[9] != socket.IPPROTO_TCP or len(ip) < ihl + 20:
            continue
        total = struct.unpack("!H", ip[2:4])[0]
        tcp = ip[ihl:]
        sport, dport, seq, ack = struct.unpack("!HHII", tcp[:12])
        doff = (tcp[12] >> 4) * 4
        flags = tcp[13]
        src, dst = (ip[12:16], sport), (ip[16:20], dport)
        if (src, dst) == (client, server):
            d = 0
        elif (src, dst) == (server, client):
            d = 1
        else:
            continue
        seglen = total - ihl - doff + bool(flags & 0x02) + bool(flags & 0x01)
        out.append({"d": d, "i": n[d], "t": t, "seq": seq, "ack": ack,
                    "flags": flags, "seglen": seglen,
                    "win": struct.unpack("!H", tcp[14:16])[0],
                    "wirelen": wirelen})
        n[d] += 1
    return out


def replay(order):
    """Follows the monitor's per-connection state along 'order' (frames
    of both directions).  Sets, per frame, "seq_after" (this direction's
    highest sequence sent, unwrapped), "acked" (the unwrapped
    acknowledgement it carries, or None), "ack_after" (the highest
    acknowledgement this direction received so far, 0 if none) and
    "latest" (the index of this direction's latest completed rtt sample
    before it, or None).  Returns the samples: (direction, index of the
    starting frame, index of the completing frame in the other
    direction)."""
    snd_max = [None, None]
    ack = [None, None]
    sampling = [None, None]     # (end, index of the starting frame)
    done = [[], []]
    res = {}
    for p in order:
        d, o = p["d"], 1 - p["d"]
        if snd_max[d] is not None:
            seq = unwrap(snd_max[d], p["seq"])
        elif ack[d] is not None:
            seq = unwrap(ack[d], p["seq"])
        else:
            seq = p["seq"]
        end = seq + p["seglen"]
        lost = p["seglen"] and snd_max[d] is not None and seq < snd_max[d]
        if lost:
            sampling[d] = None
        elif p["seglen"] and sampling[d] is None:
            sampling[d] = (end, p["i"])
        if snd_max[d] is None or end > snd_max[d]:
            snd_max[d] = end
        acked = None
        if p["flags"] & 0x10:
            ref = snd_max[o] if snd_max[o] is not None else ack[o]
            acked = unwrap(ref, p["ack"]) if ref is not None else p["ack"]
            if ack[o] is None or acked > ack[o]:
                ack[o] = acked
            if sampling[o] is not None and acked >= sampling[o][0]:
                done[o].append((o, sampling[o][1], p["i"]))
                sampling[o] = None
        res[(d, p["i"])] = {
            "seq_after": snd_max[d], "acked": acked,
            "ack_after": ack[d] if ack[d] is not None else 0,
            "latest": len(done[d]) - 1 if done[d] else None}
    return res, done[0] + done[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--client", required=True, type=endpoint)
    ap.add_argument("--server", required=True, type=endpoint)
    ap.add_argument("--near", required=True)
    ap.add_argument("--far", required=True)
    ap.add_argument("--epoch-ns", required=True, type=int)
    ap.add_argument("--seq", required=True)
    ap.add_argument("--ack", required=True)
    ap.add_argument("--rtt", action="append", default=[])
    ap.add_argument("--lost", action="append", default=[])
    ap.add_argument("--wmax", required=True)
    ap.add_argument("--wmin", required=True)
    ap.add_argument("--wire", nargs=2, required=True)
    ap.add_argument("--drops", nargs=2, type=int, default=[0, 0])
    args = ap.parse_args()
    errors = []
    E, eps = args.epoch_ns, EPSILON_NS

    near = read_capture(args.near, args.client, args.server)
    far = read_capture(args.far, args.client, args.server)
    frames = [[], []]           # Per direction: (near frame, far frame).
    for d in (0, 1):
        a = [p for p in near if p["d"] == d]
        b = [p for p in far if p["d"] == d]
        keys = ("seq", "ack", "flags", "seglen", "win", "wirelen")
        for k, (x, y) in enumerate(zip(a, b)):
            if any(x[f] != y[f] for f in keys):
                errors.append("direction %d, frame %d differs: near %s, far "
                              "%s" % (d, k, {f: x[f] for f in keys},
                                      {f: y[f] for f in keys}))
                break
        if len(a) != len(b):
            errors.append("direction %d: %d frames near, %d far"
                          % (d, len(a), len(b)))
        frames[d] = list(zip(a, b))
    if not frames[0] or not frames[1]:
        errors.append("a direction has no frame (near %d/%d, far %d/%d)"
                      % (len([p for p in near if p["d"] == 0]),
                         len([p for p in near if p["d"] == 1]),
                         len([p for p in far if p["d"] == 0]),
                         len([p for p in far if p["d"] == 1])))
    if errors:
        for e in errors:
            sys.stderr.write("error: %s\n" % e)
        return 1

    st_near, smp_near = replay(near)
    st_far, smp_far = replay(far)

    # The switch's time of each frame: within [lo, hi] (client frames
    # reach the near capture first, server frames the far one).
    def window(d, k):
        x, y = frames[d][k]
        lo, hi = (x["t"], y["t"]) if d == 0 else (y["t"], x["t"])
        if lo > hi:
            errors.append("direction %d, frame %d: captured %d ns earlier "
                          "on the receiving side" % (d, k, lo - hi))
        return lo - eps, hi + eps

    win = [[window(d, k) for k in range(len(frames[d]))] for d in (0, 1)]

    # Samples: the same in both orders; the switch's value of each is
    # between the receiving side's (shortest) and the sending side's.
    samples = {}
    if args.rtt:
        if sorted(smp_near) != sorted(smp_far):
            errors.append("the captures' orders give different rtt "
                          "samples: near %s, far %s" % (smp_near, smp_far))
        for n, (d, s, c) in enumerate(sorted(smp_near)):
            o = 1 - d
            t = {}
            for side, col in (("near", 0), ("far", 1)):
                t[side] = frames[o][c][col]["t"] - frames[d][s][col]["t"]
            lo, hi = ((t["far"], t["near"]) if d == 0
                      else (t["near"], t["far"]))
            samples.setdefault(d, []).append((lo - eps, hi + eps))

    # ack: per direction, the other direction's acknowledgements by the
    # latest and by the earliest time the switch may have received them,
    # with running maxima, to find those that certainly and those that
    # possibly came before a time.
    acks = {}
    for d in (0, 1):
        o = 1 - d
        got = [(win[o][j], st_near[(o, j)]["acked"])
               for j in range(len(frames[o]))
               if st_near[(o, j)]["acked"] is not None]
        acks[d] = []
        for col in (1, 0):
            ts = sorted((w[col], a) for w, a in got)
            run, m = [], 0
            for _, a in ts:
                m = max(m, a)
                run.append(m)
            acks[d].append(([t for t, _ in ts], run))

    def ack_before(d, which, t):
        times, run = acks[d][which]
        n = bisect.bisect_left(times, t)
        return run[n - 1] if n else 0

    # Per frame: the values the switch may have read at it (a closed
    # interval) and the least of them.
    memo = {}

    def allowed(ev, d, k):
        key = (ev, d, k)
        if key not in memo:
            memo[key] = allowed__(ev, d, k)
        return memo[key]

    def allowed__(ev, d, k):
        if ev == "seq":
            v = st_near[(d, k)]["seq_after"]
            return (v, v), v
        if ev == "ack":
            lo_t, hi_t = win[d][k]
            sure = ack_before(d, 0, lo_t)
            return (sure, ack_before(d, 1, hi_t)), sure
        # rtt: the latest sample before the frame, in either order.
        lows, highs = [], []
        for st in (st_near, st_far):
            n = st[(d, k)]["latest"]
            lo, hi = (0, 0) if n is None else samples[d][n]
            lows.append(lo)
            highs.append(hi)
        return (min(lows), max(highs)), min(lows)

    reports = {}
    for line in sys.stdin:
        line = line.strip()
        if line:
            r = json.loads(line)
            reports.setdefault(r["event"], []).append(r)

    names = {"seq": [args.seq], "ack": [args.ack]}
    if args.rtt:
        names["rtt"] = args.rtt
    ends = {0: (args.client, args.server), 1: (args.server, args.client)}
    for d in (0, 1):
        (sa, sp), (da, dp) = ends[d]
        group = {"nw_dst": socket.inet_ntoa(da), "nw_proto": 6,
                 "nw_src": socket.inet_ntoa(sa), "tp_dst": dp, "tp_src": sp}
        label = "%s:%d -> %s:%d" % (group["nw_src"], sp, group["nw_dst"], dp)
        maybe_ep, sure_ep = {}, {}
        for k, (lo, hi) in enumerate(win[d]):
            for e in range(lo // E, hi // E + 1):
                maybe_ep.setdefault(e, []).append(k)
            if lo // E == hi // E:
                sure_ep.setdefault(lo // E, []).append(k)
        summary = []
        for ev, evs in sorted(names.items()):
            rs = sorted((r for name in evs for r in reports.get(name, [])
                         if r["group"] == group), key=lambda r: r["epoch"])
            got = {r["epoch"]: r["value"] for r in rs}
            if len(got) != len(rs):
                errors.append("%s %s: an epoch reported twice" % (label, ev))
            for e in sorted(set(sure_ep) - set(got)):
                errors.append("%s %s: no report in epoch %d, which holds "
                              "frames %s" % (label, ev, e, sure_ep[e]))
            for e in sorted(set(got) - set(maybe_ep)):
                errors.append("%s %s: report in epoch %d, which cannot "
                              "hold a frame" % (label, ev, e))
            bad = 0
            for e, v in sorted(got.items()):
                cand = maybe_ep.get(e, [])
                ok = any(lo <= v <= hi for lo, hi in
                         (allowed(ev, d, k)[0] for k in cand))
                least = max((allowed(ev, d, k)[1]
                             for k in sure_ep.get(e, [])), default=0)
                if not ok or v < least:
                    bad += 1
                    if bad <= 3:
                        errors.append(
                            "%s %s: epoch %d reported %d; allowed by frames "
                            "%s: %s, at least %d" % (
                                label, ev, e, v, cand,
                                [allowed(ev, d, k)[0] for k in cand], least))
            if ev in ("seq", "ack") and rs:
                last = len(frames[d]) - 1
                want = {st[(d, last)][ev + "_after"]
                        for st in (st_near, st_far)}
                if len(want) != 1:
                    errors.append("%s %s: the captures' orders disagree on "
                                  "the final value: %s" % (label, ev,
                                                           sorted(want)))
                elif rs[-1]["value"] not in want:
                    errors.append("%s %s: last report %d, final value %d"
                                  % (label, ev, rs[-1]["value"],
                                     want.pop()))
            summary.append("%s %d reports%s" % (
                ev, len(rs), ", %d bad" % bad if bad else ""))
        extra = ""
        if args.rtt and d in samples:
            vals = [r["value"] for name in args.rtt
                    for r in reports.get(name, [])
                    if r["group"] == group and r["value"]]
            extra = "; %d rtt samples, reported %s..%s us" % (
                len(samples[d]), min(vals) // 1000 if vals else "-",
                max(vals) // 1000 if vals else "-")
        print("%s: %d frames, in epochs %d..%d; %s%s"
              % (label, len(frames[d]), min(maybe_ep), max(maybe_ep),
                 ", ".join(summary), extra))

        # is_lost and rwnd against tests/pcap-tcp.py's figures.
        with open(args.wire[d]) as f:
            wire = json.load(f)

        def values(evs):
            return [r["value"] for name in evs for r in reports.get(name, [])
                    if r["group"] == group]

        lost = sum(values(args.lost))
        if lost != wire["lost"] or lost < args.drops[d]:
            errors.append("%s: sum(is_lost) %d, the capture's "
                          "retransmissions %d, the receiver's drops %d"
                          % (label, lost, wire["lost"], args.drops[d]))
        w, mx, mn = wire["rwnd"], values([args.wmax]), values([args.wmin])
        if not (mx and mn and max(mx) == max(w) and min(mn) == min(w)
                and set(mx) <= set(w) and set(mn) <= set(w)):
            errors.append("%s: rwnd: reported max %s, min %s (not a "
                          "window of the capture: %s); the capture's %s..%s"
                          % (label, max(mx or [0]), min(mn or [0]),
                             sorted(set(mx + mn) - set(w))[:5],
                             min(w or [0]), max(w or [0])))
        print("  sum(is_lost) %d (capture %d, receiver's drops %d); rwnd "
              "max %s min %s over %d/%d epochs, the capture's %d windows "
              "%s..%s" % (lost, wire["lost"], args.drops[d], max(mx or [0]),
                          min(mn or [0]), len(mx), len(mn), len(w),
                          min(w or [0]), max(w or [0])))
    for e in errors:
        sys.stderr.write("error: %s\n" % e)
    return 1 if errors else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError) as e:
        sys.stderr.write("vm-tcp-check.py: %s\n" % e)
        sys.exit(1)
