#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The thresholds and the checks of tests/tem-overlay.sh.

    tem-overlay.py thresholds TRUTH1 TRUTH2
        prints T1 T2 T3 T4: the thresholds of ten5001, ten5002 (sum(bytes)
        of udp,tun_id=V by nw_dst), flows5 (sum(bytes) of udp by 5tuple,
        the tenants' groups apart) and ten70000 (as ten5001, on h1 alone:
        only h1 serves tenant 70000's prefix), chosen from the two hosts'
        truths (gen-overlay.py).
    tem-overlay.py check START T1 T2 T3 T4 ALERTS TRUTH1 STDERR1 TRUTH2
                         STDERR2
        compares the TEM's alerts (JSON lines) and each host's --stats
        line (the last JSON object of STDERRn) with the truths, for hosts
        h1 and h2 started with --start-at START.

A capture's epoch e is the wall-clock epoch e + (START - first) / epoch
(gen-overlay.py's captures start on an epoch boundary and tpm-replay
shifts them by a whole number of intervals: both hosts alike).

Only the Python standard library is used.
"""

import ipaddress
import json
import sys

HOSTS = ('h1', 'h2')
TENANTS = (5001, 5002)
ONE_HOST = 70000                        # Its prefix on h1 only.
START_NS = 1_700_000_000 * 10**9        # gen-overlay.py's.
UDP = 17


def load(path):
    with open(path) as f:
        return json.load(f)


def udp4(truth):
    """The IPv4 UDP rows of the run with tunnel ports."""
    return [r for r in truth['tunnel']['flows']
            if r['ipver'] == 4 and r['nw_proto'] == UDP]


def by_dst(truth, vni):
    """{(epoch, nw_dst): bytes} of tenant 'vni' (group=nw_dst)."""
    out = {}
    for r in udp4(truth):
        if r['tun_id'] == vni:
            k = (r['epoch'], r['dst'])
            out[k] = out.get(k, 0) + r['bytes']
    return out


def five(r):
    return (r['src'], r['dst'], r['tp_src'], r['tp_dst'])


def by_flow(truth, tenant):
    """{(epoch, 5-tuple): bytes} of the untunnelled rows, or with
    'tenant' of the tenants' rows ((epoch, tun_id, 5-tuple))."""
    out = {}
    for r in udp4(truth):
        if (r['tun_id'] is not None) != tenant:
            continue
        k = ((r['epoch'], r['tun_id'], five(r)) if tenant
             else (r['epoch'], five(r)))
        out[k] = out.get(k, 0) + r['bytes']
    return out


def group_key(g):
    """A 5-tuple group (an alert's "group", or built from a truth row) as
    a canonical string: addresses normalized, "tun_id" for a tenant's."""
    out = {}
    for f, v in g.items():
        out[f] = (str(ipaddress.ip_address(v))
                  if f.endswith('_src') and not f.startswith('tp')
                  or f.endswith('_dst') and not f.startswith('tp') else v)
    return json.dumps(out, sort_keys=True)


def by_group(truth):
    """{(epoch, group_key): bytes} of the IPv4 UDP rows (the filter
    "udp" is IPv4's, as in OVS), the tenants' with their tun_id: what
    group=5tuple reports."""
    out = {}
    for r in udp4(truth):
        g = {'nw_proto': UDP, 'nw_src': r['src'], 'nw_dst': r['dst'],
             'tp_src': r['tp_src'], 'tp_dst': r['tp_dst']}
        if r['tun_id'] is not None:
            g['tun_id'] = r['tun_id']
        k = (r['epoch'], group_key(g))
        out[k] = out.get(k, 0) + r['bytes']
    return out


def totals(per_host):
    keys = set().union(*per_host)
    return {k: sum(h.get(k, 0) for h in per_host) for k in keys}


def choose(per_host):
    """An even threshold T that no host alone exceeds, that the total
    exceeds in some intervals and not in others, with some interval where
    a host exceeds T / 2 and the total stays at most T; or None."""
    tot = totals(per_host)
    single = max(v for h in per_host for v in h.values())
    above = sorted(v for v in tot.values() if v > single)
    for cand in above[:len(above) // 2 + 1][::-1]:
        t = max(single, cand - 1)
        t += t % 2
        if not [v for v in tot.values() if v > t]:
            continue
        if not [k for k, v in tot.items() if v <= t
                and any(h.get(k, 0) > t // 2 for h in per_host)]:
            continue
        return t
    return None


def thresholds(args):
    truths = [load(p) for p in args]
    ts = [choose([by_dst(t, v) for t in truths]) for v in TENANTS]
    # flows5: the untunnelled flows' median total, so that some intervals
    # alert and the tenants' (larger) groups cross the shares.
    untun = sorted(totals([by_flow(t, False) for t in truths]).values())
    t3 = untun[len(untun) // 2]
    t3 += t3 % 2
    # ten70000: h1's median, so that some of its intervals alert.
    one = sorted(by_dst(truths[0], ONE_HOST).values())
    if None in ts or not untun or not one:
        print('tem-overlay.py: no threshold fits the captures %s'
              % ts, file=sys.stderr)
        return 1
    print(*ts, t3, one[len(one) // 2])
    return 0


def stats(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.startswith('{')][-1]


def check(args):
    start, t1, t2, t3, t4 = map(int, args[:5])
    alerts_path = args[5]
    truths = [load(args[6]), load(args[8])]
    errs = [args[7], args[9]]
    epoch_ns = truths[0]['epoch_ns']
    offset = (start - START_NS) // epoch_ns     # Wall minus capture.
    errors = []
    with open(alerts_path) as f:
        alerts = [json.loads(x) for x in f if x.strip()]
    summary = []

    for vni, t in zip(TENANTS, (t1, t2)):
        name = 'ten%d' % vni
        per_host = [by_dst(tr, vni) for tr in truths]
        other = [by_dst(tr, TENANTS[1 - TENANTS.index(vni)])
                 for tr in truths]
        tot = totals(per_host)
        want = {k for k, v in tot.items() if v > t}
        got = set()
        for a in (a for a in alerts if a['event'] == name):
            e = a['epoch'] - offset
            g = a['group']
            k = (e, g.get('nw_dst'))
            if g != {'nw_dst': k[1]}:
                errors.append('%s: group %s' % (name, g))
                continue
            if k in got:
                errors.append('%s: two alerts for %s' % (name, k))
            got.add(k)
            hv = {h: per_host[i].get(k, 0) for i, h in enumerate(HOSTS)}
            ov = sum(o.get(k, 0) for o in other)
            if (a['value'] != tot.get(k, 0) or a['missing']
                    or a['deadline'] or a['late'] or a['incomplete']
                    or a['threshold'] != t
                    or {h: a['hosts'].get(h, 0) for h in HOSTS} != hv):
                errors.append('%s alert %s: expected value %d (hosts %s, '
                              'the other tenant: %d more)'
                              % (name, json.dumps(a), tot.get(k, 0), hv,
                                 ov))
        for k in sorted(want - got):
            errors.append('%s: no alert for capture epoch %d group %s '
                          '(total %d > %d)' % (name, k[0], k[1], tot[k], t))
        for k in sorted(got - want):
            errors.append('%s: alert for capture epoch %d group %s of '
                          'total %d <= %d' % (name, k[0], k[1],
                                              tot.get(k, 0), t))
        # What the threshold was chosen for.
        if any(v > t for h in per_host for v in h.values()):
            errors.append('%s: a host alone exceeds %d' % (name, t))
        polled = [k for k, v in tot.items() if v <= t
                  and any(h.get(k, 0) > t // 2 for h in per_host)]
        if not want or not polled:
            errors.append('%s: T=%d tests nothing (%d intervals over, %d '
                          'over a share only)' % (name, t, len(want),
                                                  len(polled)))
        summary.append('%s %d alerts of %d intervals (T=%d, %d polled '
                       'below)' % (name, len(got), len(tot), t,
                                   len(polled)))

    # flows5: every UDP 5-tuple group over both hosts, the tenants' apart
    # (the protocol carries the tenant: nothing dropped at the hosts).
    for i, h in enumerate(HOSTS):
        got = stats(errs[i])['tem']['reports_tenant']
        if got != 0:
            errors.append('%s: tem.reports_tenant %s, expected 0 (a TEM of '
                          'protocol version 4 takes tenants)' % (h, got))
    per_host = [by_group(tr) for tr in truths]
    tot = totals(per_host)
    want = {k for k, v in tot.items() if v > t3}
    got = set()
    for a in (a for a in alerts if a['event'] == 'flows5'):
        k = (a['epoch'] - offset, group_key(a['group']))
        if k in got:
            errors.append('flows5: two alerts for %s' % (k,))
        got.add(k)
        hv = {h: per_host[j].get(k, 0) for j, h in enumerate(HOSTS)}
        if (a['value'] != tot.get(k, 0) or a['missing'] or a['deadline']
                or {h: a['hosts'].get(h, 0) for h in HOSTS} != hv):
            errors.append('flows5 alert %s: expected %d (hosts %s): a '
                          'tenant merged?'
                          % (json.dumps(a), tot.get(k, 0), hv))
    for k in sorted(want - got):
        errors.append('flows5: no alert for capture epoch %d group %s '
                      '(total %d > %d)' % (k[0], k[1], tot[k], t3))
    for k in sorted(got - want):
        errors.append('flows5: alert for capture epoch %d group %s of '
                      'total %d <= %d' % (k[0], k[1], tot.get(k, 0), t3))
    tenants = {json.loads(k[1]).get('tun_id') for k in got}
    if not {None, TENANTS[0], TENANTS[1]} <= tenants:
        errors.append('flows5: alerts of tenants %s only: T=%d tests too '
                      'little' % (sorted(map(str, tenants)), t3))
    summary.append('flows5 %d alerts of tenants %s and untunnelled (T=%d)'
                   % (len(got), sorted(t for t in tenants if t), t3))

    # ten70000: placed on h1 alone (only h1 serves the tenant's prefix),
    # so its threshold is not split and its alerts are h1's values of the
    # tenant exactly, h2's traffic of the tenant never in them.
    mine = by_dst(truths[0], ONE_HOST)
    want = {k for k, v in mine.items() if v > t4}
    got = set()
    for a in (a for a in alerts if a['event'] == 'ten%d' % ONE_HOST):
        k = (a['epoch'] - offset, a['group'].get('nw_dst'))
        if k in got:
            errors.append('ten%d: two alerts for %s' % (ONE_HOST, k))
        got.add(k)
        if (a['value'] != mine.get(k, 0) or a['missing'] or a['deadline']
                or a['threshold'] != t4
                or a['hosts'] != {'h1': mine.get(k, 0)}):
            errors.append('ten%d alert %s: expected h1 alone, value %d'
                          % (ONE_HOST, json.dumps(a), mine.get(k, 0)))
    for k in sorted(want - got):
        errors.append('ten%d: no alert for capture epoch %d group %s (h1 '
                      '%d > %d)' % (ONE_HOST, k[0], k[1], mine[k], t4))
    for k in sorted(got - want):
        errors.append('ten%d: alert for capture epoch %d group %s of %d '
                      '<= %d' % (ONE_HOST, k[0], k[1], mine.get(k, 0), t4))
    if not want:
        errors.append('ten%d: T=%d tests nothing' % (ONE_HOST, t4))
    summary.append('ten%d %d alerts, h1 alone (T=%d)'
                   % (ONE_HOST, len(got), t4))

    names = {a['event'] for a in alerts} - {'ten5001', 'ten5002', 'flows5',
                                            'ten%d' % ONE_HOST}
    if names:
        errors.append('alerts of unknown events %s' % sorted(names))
    if errors:
        print('FAIL: tem-overlay')
        for e in errors[:30]:
            print('  ' + e)
        return 1
    print('PASS: ' + '; '.join(summary))
    return 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == 'thresholds':
        return thresholds(sys.argv[2:])
    if len(sys.argv) == 12 and sys.argv[1] == 'check':
        return check(sys.argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main())
