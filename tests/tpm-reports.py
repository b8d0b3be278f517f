#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the output of `ovs-appctl tpm/reports` for one event.

Used by tests/ovs-integration.sh.  Reads the reports (one JSON object per
line) on stdin, keeps those of --event, checks each condition given and
prints a one-line summary on stdout:

    count=N sum=S epochs=FIRST..LAST values=V1,V2,...

Filters (optional): --since E and --until E keep only the reports with
an epoch >= E, <= E; --in-group JSON only those of that group.

Conditions (all optional):

  --group JSON          every report's group is exactly this object
  --epoch-min E, --epoch-max E
                        every report's epoch is within [E1, E2]
  --value-gt X          every value is > X
  --value-max X         every value is <= X
  --value-multiple M    every value is a whole multiple of M
  --sum-max X, --sum-eq X
                        the values add up to at most / exactly X
  --min-count N, --max-count N
                        number of reports
  --pmds N              every report has "pmds": N (the local TEM combined
                        N PMD threads) and no "missing"

Whatever the conditions, every line must be a JSON object with exactly
the keys epoch, event, group, value (plus pmds and missing, which a
single-PMD switch never prints), in sorted order, and no (epoch, group)
may be reported twice for the event.

Exit status 0 if every check passes; otherwise 1, with one line per
failed check on stderr (and the summary still on stdout).
"""
import argparse
import json
import sys

BASE_KEYS = ["epoch", "event", "group", "value"]


def num(v):
    """Formats a number exactly (integers without exponent)."""
    return str(int(v)) if v == int(v) else repr(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--event", required=True)
    ap.add_argument("--since", type=int)
    ap.add_argument("--until", type=int)
    ap.add_argument("--group")
    ap.add_argument("--in-group")
    ap.add_argument("--epoch-min", type=int)
    ap.add_argument("--epoch-max", type=int)
    ap.add_argument("--value-gt", type=float)
    ap.add_argument("--value-max", type=float)
    ap.add_argument("--value-multiple", type=int)
    ap.add_argument("--sum-max", type=float)
    ap.add_argument("--sum-eq", type=float)
    ap.add_argument("--min-count", type=int)
    ap.add_argument("--max-count", type=int)
    ap.add_argument("--pmds", type=int)
    args = ap.parse_args()
    group = json.loads(args.group) if args.group is not None else None
    in_group = (json.loads(args.in_group) if args.in_group is not None
                else None)

    errors = []
    reports = []
    for n, line in enumerate(sys.stdin, 1):
        line = line.strip()
        if not line:
            continue
        try:
            pairs = json.loads(line, object_pairs_hook=lambda p: p)
        except ValueError as e:
            errors.append("line %d is not JSON (%s): %s" % (n, e, line[:200]))
            continue
        keys = [k for k, _ in pairs] if isinstance(pairs, list) else None
        if keys is None or [k for k in keys
                            if k not in ("pmds", "missing")] != BASE_KEYS \
                or keys != sorted(keys):
            errors.append("line %d: keys %s, expected %s in sorted order: %s"
                          % (n, keys, BASE_KEYS, line[:200]))
            continue
        r = json.loads(line)
        e = r["epoch"]
        if not isinstance(e, int):
            errors.append("line %d: epoch is not an integer: %s"
                          % (n, line[:200]))
            continue
        if r["event"] == args.event \
                and (args.since is None or not e < args.since) \
                and (args.until is None or not e > args.until) \
                and (in_group is None or r["group"] == in_group):
            r["line"] = n
            reports.append(r)

    seen = set()
    for r in reports:
        where = "report %s" % json.dumps({k: r[k] for k in BASE_KEYS},
                                         sort_keys=True)
        g, v, e = r["group"], r["value"], r["epoch"]
        if not isinstance(e, int) or not isinstance(v, (int, float)) \
                or not isinstance(g, dict):
            errors.append("%s: bad types" % where)
            continue
        key = (e, json.dumps(g, sort_keys=True))
        if key in seen:
            errors.append("%s: epoch and group reported twice" % where)
        seen.add(key)
        if group is not None and g != group:
            errors.append("%s: group is not %s"
                          % (where, json.dumps(group, sort_keys=True)))
        if args.epoch_min is not None and e < args.epoch_min:
            errors.append("%s: epoch before %d" % (where, args.epoch_min))
        if args.epoch_max is not None and e > args.epoch_max:
            errors.append("%s: epoch after %d" % (where, args.epoch_max))
        if args.value_gt is not None and not v > args.value_gt:
            errors.append("%s: value not > %g" % (where, args.value_gt))
        if args.value_max is not None and v > args.value_max:
            errors.append("%s: value > %g" % (where, args.value_max))
        if args.pmds is not None and (r.get("pmds") != args.pmds
                                      or "missing" in r):
            errors.append("%s: \"pmds\": %s, \"missing\": %s, expected "
                          "\"pmds\": %d and no \"missing\""
                          % (where, r.get("pmds"), r.get("missing"),
                             args.pmds))
        if args.value_multiple and v % args.value_multiple:
            errors.append("%s: value not a multiple of %d"
                          % (where, args.value_multiple))

    total = sum(r["value"] for r in reports)
    if args.sum_max is not None and total > args.sum_max:
        errors.append("values add up to %s > %s"
                      % (num(total), num(args.sum_max)))
    if args.sum_eq is not None and total != args.sum_eq:
        errors.append("values add up to %s, expected exactly %s (difference "
                      "%s)" % (num(total), num(args.sum_eq),
                               num(total - args.sum_eq)))
    if args.min_count is not None and len(reports) < args.min_count:
        errors.append("%d reports of event %s, expected at least %d"
                      % (len(reports), args.event, args.min_count))
    if args.max_count is not None and len(reports) > args.max_count:
        errors.append("%d reports of event %s, expected at most %d%s"
                      % (len(reports), args.event, args.max_count,
                         "".join("\n  %s" % json.dumps(r, sort_keys=True)
                                 for r in reports[:5])))

    epochs = sorted(r["epoch"] for r in reports)
    print("count=%d sum=%s epochs=%s values=%s"
          % (len(reports), num(total),
             "%d..%d" % (epochs[0], epochs[-1]) if epochs else "-",
             ",".join(num(r["value"]) for r in reports[:20])
             + (",..." if len(reports) > 20 else "") or "-"))
    for e in errors[:5]:
        sys.stderr.write("%s\n" % e)
    if len(errors) > 5:
        sys.stderr.write("(%d more errors)\n" % (len(errors) - 5))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
