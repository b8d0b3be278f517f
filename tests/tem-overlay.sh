#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The TEM with two tpm-replay hosts replaying tunnelled captures, no
# switch and no root needed: network-wide events over tenants whose inner
# 5-tuples are identical, against the ground truth of
# tests/gen-overlay.py.
#
# Each host replays its own capture (gen-overlay.py --epochs 20, seeds
# tem-h1 and tem-h2: the same tenants and inner flows, other volumes)
# with --tunnel-ports=vxlan,geneve, in real time from the same interval.
# The TEM's events, on a 10 ms interval (one epoch):
#   ten5001  filter=udp,tun_id=5001 predicate=sum(bytes) > T1 group=nw_dst
#   ten5002  filter=udp,tun_id=5002 predicate=sum(bytes) > T2 group=nw_dst
#       T chosen from the truth: neither host alone ever exceeds it, the
#       two hosts' total does in some intervals (so the TEM must poll the
#       host below its share and add the values), and in some interval a
#       host exceeds its share T/2 while the total does not (a poll that
#       ends without alert).  Every alert's value and per-host values are
#       the truth's bytes of that tenant, for that group and interval,
#       exactly (the other tenant's identical flows never in them), and
#       the alerted intervals are exactly those whose total exceeds T.
#   flows5   filter=udp predicate=sum(bytes) > T3 group=5tuple
#       The tenants' groups and the hosts' own untunnelled flows have the
#       same 5-tuples: every alert (with its "tun_id", or none) must equal
#       the truth of that tenant (or of the untunnelled traffic) alone,
#       over both hosts, in exactly the intervals whose total exceeds T3;
#       nothing is dropped at the hosts (tem.reports_tenant 0: the TEM
#       speaks protocol version 4).
#   ten70000 filter=udp,tun_id=70000,nw_dst=192.168.1.0/24
#            predicate=sum(bytes) > T4 group=nw_dst
#       Placement per tenant: both hosts serve the inner addresses in
#       tenants 5001 and 5002 and untunnelled (--prefix vni=5001:...,
#       ...), only h1 in tenant 70000.  The event is installed on h1 alone
#       (tem-ctl event-show, hosts --tun-id, event-list --tun-id say so
#       while both hosts are connected), its threshold whole there, and
#       its alerts are h1's values of the tenant exactly (h2's traffic of
#       tenant 70000, which h2 also carries, never in them).
#
# Automake test protocol: 0 pass, 1 fail (python3-zmq not needed).
# KEEP_TMP=1 keeps the work directory.
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=tests/tem-lib.sh
. "$top_srcdir/tests/tem-lib.sh"
tem_test_init tem-overlay no-zmq

ctl() {
    "$CTL" --ctl="ipc://$tmp/ctl" "$@"
}

K=$tmp/keys
tem_keys "$K" h1 h2
tem_start --key-file="$K/tem.key" --allow-file="$K/allow" \
    --listen="ipc://$tmp/tem" --pub="ipc://$tmp/pub" \
    --state-file="$tmp/events.json" --alert-file="$tmp/alerts.json" \
    --no-alerts-stdout --heartbeat=200ms --poll-deadline=1s

gen=$top_srcdir/tests/gen-overlay.py
for h in h1 h2; do
    "$PY" "$gen" gen --seed "tem-$h" --epochs 20 --out-dir "$tmp/$h" \
        --quiet || fail "gen-overlay.py --seed tem-$h"
done

# The thresholds, from the truth (tests/tem-overlay.py is this script's
# own half: the choice and the checks).
check=$top_srcdir/tests/tem-overlay.py
read -r t1 t2 t3 t4 < <("$PY" "$check" thresholds "$tmp/h1/truth.json" \
    "$tmp/h2/truth.json") || fail "no thresholds from the truth"
[ -n "$t4" ] || fail "no thresholds from the truth"
f="interval=10ms group=nw_dst"
ctl event-add ten5001 "filter=udp,tun_id=5001 $f" \
    "predicate=sum(bytes) > $t1" across=sum >/dev/null
ctl event-add ten5002 "filter=udp,tun_id=5002 $f" \
    "predicate=sum(bytes) > $t2" across=sum >/dev/null
ctl event-add flows5 "filter=udp interval=10ms group=5tuple" \
    "predicate=sum(bytes) > $t3" across=sum >/dev/null
ctl event-add ten70000 "filter=udp,tun_id=70000,nw_dst=192.168.1.0/24 $f" \
    "predicate=sum(bytes) > $t4" across=sum >/dev/null

# The prefixes the hosts serve: the inner addresses in tenants 5001 and
# 5002 and untunnelled on both, in tenant 70000 on h1 only.
inner="192.168.1.0/24 fd00::/64"
both=""
for p in $inner; do
    both="$both,vni=5001:$p,vni=5002:$p,$p"
done
prefixes_h1="vni=70000:192.168.1.0/24$both"
prefixes_h2="${both#,}"

# Both hosts start on the same 100 ms boundary, after their sessions are
# up: their first packets (in the first 10 ms of the captures, which start
# on an epoch boundary) are shifted by the same amount.
start=$(( ($(date +%s%N) / 100000000 + 15) * 100000000 ))
hpids=()
for h in h1 h2; do
    prefixes=prefixes_$h
    "$REPLAY" --controller "ipc://$tmp/tem" --host-id $h \
        --tem-key "$K/tem.key.pub" --host-key-file "$K/$h.key" \
        --prefix "${!prefixes}" \
        --tunnel-ports=vxlan,geneve --realtime --start-at $start \
        --require-controller --stats "$tmp/$h/overlay.pcap" \
        >"$tmp/$h.out" 2>"$tmp/$h.err" &
    pids+=($!)
    hpids+=($!)
done

# While both hosts are connected (before the captures start): ten70000 on
# h1 alone, in tem-ctl's views.
placed=""
while [ "$(date +%s%N)" -lt "$start" ]; do
    placed=$(ctl --json event-show ten70000 | "$PY" -c '
import json, sys
print(",".join(sorted(h["host"] for h in json.load(sys.stdin)["hosts"])))')
    connected=$(ctl --json hosts | "$PY" -c '
import json, sys
print(sum(h["state"] == "connected" for h in json.load(sys.stdin)["hosts"]))')
    [ "$placed" = h1 ] && [ "$connected" = 2 ] && break
    placed="$placed (connected: $connected)"
    sleep 0.05
done
[ "$placed" = h1 ] \
    || fail "ten70000 placed on '$placed', expected h1 alone, before" \
            "the start"
ctl hosts --tun-id=70000 >"$tmp/hosts-70000.txt"
[ "$(awk 'NR > 1 { print $1 }' "$tmp/hosts-70000.txt")" = h1 ] \
    || fail "tem-ctl hosts --tun-id=70000: $(cat "$tmp/hosts-70000.txt")"
ctl hosts --tun-id=5001 >"$tmp/hosts-5001.txt"
[ "$(awk 'NR > 1 { print $1 }' "$tmp/hosts-5001.txt" | sort | xargs)" \
    = "h1 h2" ] \
    || fail "tem-ctl hosts --tun-id=5001: $(cat "$tmp/hosts-5001.txt")"
ctl event-list --tun-id=70000 >"$tmp/events-70000.txt"
[ "$(awk 'NR > 1 { print $2 "/" $4 "/" $10 }' "$tmp/events-70000.txt")" \
    = ten70000/1/70000 ] \
    || fail "tem-ctl event-list --tun-id=70000: $(cat "$tmp/events-70000.txt")"
ctl event-show ten70000 | grep -q '^  tenant: *70000$' \
    || fail "tem-ctl event-show ten70000: no tenant line"
echo "PASS: ten70000 placed on h1 alone (tem-ctl event-show, hosts and" \
    "event-list --tun-id)"

for p in "${hpids[@]}"; do
    wait "$p" || fail "a tpm-replay host failed: $(tail -n 5 "$tmp"/h?.err)"
done
"$PY" "$check" check "$start" "$t1" "$t2" "$t3" "$t4" "$tmp/alerts.json" \
    "$tmp/h1/truth.json" "$tmp/h1.err" "$tmp/h2/truth.json" \
    "$tmp/h2.err" || exit 1
