#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The network-wide part of the demo ("sh tests/bootstrap.sh demo"): a TEM
# and two hosts, each a tpm-replay process replaying a trace in real time
# (tests/tem-trace.py: constant UDP traffic to 10.99.0.2), both serving
# 10.99.0.0/24.  Three network-wide events show the TEM's decisions:
#
#   net_sum    sum over the hosts > 120 KB per 100 ms, split 60 KB each:
#              host h1 (80 KB) exceeds its share, the TEM polls h2 (50
#              KB), the total (130 KB) holds: an alert every interval,
#              and a drill-down (then=) installs net_flows on the hosts
#              for 300 ms.
#   net_quiet  the same with 140 KB: h1 still exceeds its share (70 KB)
#              and reports, but the total stays below: no alert.
#   net_both   at least 2 hosts over 40 KB each: both are, an alert.
#
# Usage: demo-tem.sh BUILD_DIR SRC_DIR.  Everything runs in a temporary
# directory (sockets, state file) that is removed at exit, with the
# processes it started.
set -eu
build=$1
top=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tem-demo.XXXXXX")
pids=
cleanup() {
    for p in $pids; do
        kill "$p" 2>/dev/null || true
    done
    for p in $pids; do
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ctl="ipc://$tmp/ctl"
tem_ctl() {
    "$build/tem/tem-ctl" --ctl="$ctl" "$@"
}

# CURVE keys (tem-ctl keygen) for the TEM and the hosts h1 and h2, and the
# TEM's allow-list binding each host id to its key.
CTL=$build/tem/tem-ctl
. "$top/tests/tem-keys.sh"
tem_keys "$tmp/keys" h1 h2

"$build/tem/trumpet-tem" --key-file="$tmp/keys/tem.key" \
    --allow-file="$tmp/keys/allow" \
    --listen="ipc://$tmp/tem" --pub="ipc://$tmp/pub" \
    --ctl="$ctl" --state-file="$tmp/events.json" \
    --alert-file="$tmp/alerts.json" --no-alerts-stdout \
    2>"$tmp/tem.log" &
pids="$pids $!"
i=0
until tem_ctl --timeout=200ms status >/dev/null 2>&1; do
    i=$((i + 1))
    if [ $i -ge 50 ]; then
        echo "demo: the TEM did not start:" >&2
        cat "$tmp/tem.log" >&2
        exit 1
    fi
done

echo "# Network-wide events on the TEM (tem-ctl event-add):"
add() {
    echo "#   $*"
    tem_ctl event-add "$@" >/dev/null
}
f="filter=udp,nw_dst=10.99.0.2 interval=100ms"
add net_flows "$f" 'predicate=sum(volume) > 20KB' group=5tuple standby=yes
f="$f group=nw_dst"
add net_sum "$f" 'predicate=sum(volume) > 120KB' across=sum \
    then=net_flows:300ms
add net_quiet "$f" 'predicate=sum(volume) > 140KB' across=sum
add net_both "$f" 'predicate=sum(volume) > 40KB' across=atleast:2

# Host h1: 8 x 1000 B per 10 ms epoch (80 KB per interval), 2 flows;
# host h2: 5 x 1000 B (50 KB), 1 flow.  One second of traffic each.
python3 "$top/tests/tem-trace.py" --out "$tmp/h1.pcap" --epochs 100 \
    --per-epoch 8 --size 1000 --src 10.99.1.1 --flows 2 >/dev/null
python3 "$top/tests/tem-trace.py" --out "$tmp/h2.pcap" --epochs 100 \
    --per-epoch 5 --size 1000 --src 10.99.2.1 >/dev/null
for h in h1 h2; do
    "$build/tpm/tpm-replay" --controller "ipc://$tmp/tem" --host-id $h \
        --tem-key "$tmp/keys/tem.key.pub" --host-key-file "$tmp/keys/$h.key" \
        --prefix 10.99.0.0/24 --realtime --require-controller \
        "$tmp/$h.pcap" >"$tmp/$h.out" 2>"$tmp/$h.err" &
    pids="$pids $!"
    eval "pid_$h=\$!"
done
# shellcheck disable=SC2154
for p in "$pid_h1" "$pid_h2"; do
    if ! wait "$p"; then
        echo "demo: a host failed:" >&2
        cat "$tmp/h1.err" "$tmp/h2.err" >&2
        exit 1
    fi
done

echo "# Host-level satisfactions sent to the TEM (tpm-replay's JSON lines):"
for h in h1 h2; do
    sed "s/^/$h: /" "$tmp/$h.out"
done
echo "# Network-wide alerts (JSON lines; tem-ctl alerts):"
cat "$tmp/alerts.json"
echo "# Hosts (tem-ctl hosts) and events (tem-ctl event-list):"
tem_ctl hosts | sed 's/^/#   /'
tem_ctl event-list | sed 's/^/#   /'
n_sum=$(grep -c '"event":"net_sum"' "$tmp/alerts.json" || true)
n_quiet=$(grep -c '"event":"net_quiet"' "$tmp/alerts.json" || true)
n_both=$(grep -c '"event":"net_both"' "$tmp/alerts.json" || true)
echo "# net_sum: $n_sum alerts (130 KB > 120 KB in each of the 10 intervals);" \
     "net_quiet: $n_quiet (130 KB < 140 KB although h1 exceeded its share);" \
     "net_both: $n_both (both hosts over 40 KB)."
