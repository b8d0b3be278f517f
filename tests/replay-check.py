#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compares what tpm-replay printed with the ground truth of
tests/gen-trace.py (tests/e2e-replay.sh, tests/replay-sizing.sh).

    replay-check.py reports EXPECTED ACTUAL EVENTS LABEL
        The reports: the multisets of (event, epoch, group) of EXPECTED and
        ACTUAL (one JSON object per line) are equal, every line has the
        keys event, epoch, group, value in that order (a group keeps its
        key order, so a misordered group counts as another group), values
        agree to a relative 1e-9, EXPECTED is not empty and every event of
        EVENTS fires in it.

    replay-check.py counters EXPECTED STDERR LABEL [SECTION]
        The --stats line of tpm-replay (the last JSON object on its
        stderr, or its object SECTION, such as "sizing") holds every
        counter of EXPECTED (a JSON object) with the same value.

Prints one summary line (PASS or FAIL, then the differences); exit status
0 if equal, 1 otherwise.
"""
import json
import math
import sys

KEYS = ["event", "epoch", "group", "value"]


def load(path, what, errors):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line, object_pairs_hook=lambda p: p)
            except ValueError as e:
                errors.append("%s line %d: not JSON (%s): %s"
                              % (what, n, e, line.rstrip()[:200]))
                continue
            keys = [k for k, _ in obj]
            if keys != KEYS:
                errors.append("%s line %d: keys %s, expected %s"
                              % (what, n, keys, KEYS))
                continue
            d = dict(obj)
            group = d["group"]
            if not isinstance(group, list) or not isinstance(d["value"],
                                                             (int, float)):
                errors.append("%s line %d: bad group or value: %s"
                              % (what, n, line.rstrip()[:200]))
                continue
            rows.append(((d["event"], d["epoch"], tuple(group)), d["value"],
                         line.rstrip()))
    return rows


def index(rows):
    d = {}
    for key, value, line in rows:
        d.setdefault(key, []).append((value, line))
    return d


def reports(exp_path, act_path, events_path, label):
    errors = []
    exp = load(exp_path, "expected", errors)
    act = load(act_path, "actual", errors)
    if not exp:
        errors.append("expected output is empty: the scenario tests nothing")
    names = set()
    with open(events_path) as f:
        for line in f:
            if line.strip() and not line.lstrip().startswith("#"):
                names.add(line.split()[0])
    silent = names - {k[0] for k, _, _ in exp}
    if silent:
        errors.append("events that never fire in expected: %s"
                      % sorted(silent))

    ei, ai = index(exp), index(act)
    missing, unexpected, wrong = [], [], []
    for key in sorted(set(ei) | set(ai), key=repr):
        e, a = ei.get(key, []), ai.get(key, [])
        missing += [line for _, line in e[len(a):]]
        unexpected += [line for _, line in a[len(e):]]
        for (ev, el), (av, al) in zip(e, a):
            if not math.isclose(ev, av, rel_tol=1e-9, abs_tol=1e-12):
                wrong.append("expected %s\n      got %s" % (el, al))

    for title, lines in (("missing", missing), ("unexpected", unexpected),
                         ("wrong value", wrong)):
        if lines:
            errors.append("%d %s reports%s:" % (len(lines), title,
                          " (first 20)" if len(lines) > 20 else ""))
            errors += ["    " + line for line in lines[:20]]
    if errors:
        print("FAIL: %s" % label)
        for e in errors:
            print("  " + e)
        return 1
    print("PASS: %s: %d reports matched" % (label, len(exp)))
    return 0


def counters(exp_path, err_path, label, section=None):
    with open(exp_path) as f:
        exp = json.load(f)
    stats = None
    with open(err_path) as f:
        for line in f:
            if line.startswith("{"):
                stats = json.loads(line)
    if stats is None:
        print("FAIL: %s: no --stats line" % label)
        return 1
    if section is not None:
        stats = stats.get(section)
        if not isinstance(stats, dict):
            print("FAIL: %s: no \"%s\" object in the --stats line"
                  % (label, section))
            return 1
    wrong = ["%s: %s, expected %s" % (k, stats.get(k), v)
             for k, v in sorted(exp.items()) if stats.get(k) != v]
    what = section or "counters"
    if wrong:
        print("FAIL: %s: %s: %s" % (label, what, "; ".join(wrong)))
        return 1
    print("PASS: %s: %s %s" % (label, what, ", ".join(
        "%s %d" % (k, v) for k, v in sorted(exp.items()) if v)))
    return 0


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "reports":
        return reports(*sys.argv[2:])
    if len(sys.argv) in (5, 6) and sys.argv[1] == "counters":
        return counters(*sys.argv[2:])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
