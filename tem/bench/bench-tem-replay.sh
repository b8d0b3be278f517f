#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# bench-tem-replay.sh: detection latency with real hosts, as a sanity
# check of tem-bench's simulated ones (docs/benchmarks.md, section TEM).
#
# usage: tem/bench/bench-tem-replay.sh [--build=DIR] [--hosts=8]
#            [--events=64] [--epochs=30] [--runs=3]
#
# A TEM (plaintext, on loopback) and --hosts tpm-replay processes in
# controller mode, each replaying a capture of its own in real time from
# the same wall-clock instant (--start-at).  --events identical events
# "filter=udp,nw_dst=10.99.0.2 interval=10ms group=nw_dst
# predicate=sum(volume) > T across=sum" split over the hosts: host h1
# sends 8 x 1000 B to 10.99.0.2 per 10 ms epoch, every other host 5 x
# 1000 B, and T = hosts x 5000 B, so that h1 alone exceeds its share in
# every epoch (one satisfaction per event, in one frame after its sweep),
# the TEM polls every other host for every event in one PollBatch each,
# and every decision alerts (the total is T + 3000).  Prints, per run, the
# alerts counted against the hosts x epochs x events expected and the
# alerts' latency_us (the TEM's time from h1's satisfaction to the
# decision): average, p50, p99, max.  At most 64 events: a flow feeds at
# most 64 events (tpm.h's max_matches), and every event here matches the
# hosts' one flow.
#
# The hosts sweep and answer in their own processes, as real ones do, but
# here they share the machine's CPUs with the TEM and each other.
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
build=build
hosts=8
events=64
epochs=30
runs=3
PY=/usr/bin/python3

for arg; do
    case $arg in
    --build=*) build=${arg#*=} ;;
    --hosts=*) hosts=${arg#*=} ;;
    --events=*) events=${arg#*=} ;;
    --epochs=*) epochs=${arg#*=} ;;
    --runs=*) runs=${arg#*=} ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'
               exit 0 ;;
    *) echo "bench-tem-replay: unexpected argument '$arg' (try --help)" >&2
       exit 2 ;;
    esac
done
case $build in /*) ;; *) build=$top/$build ;; esac
if [ "$events" -lt 1 ] || [ "$events" -gt 64 ] || [ "$hosts" -lt 2 ]; then
    echo "bench-tem-replay: --events must be 1..64 and --hosts at least 2" >&2
    exit 2
fi

. "$top/tem/bench/bench-lib.sh"
bench_setup "$build" tem/trumpet-tem tem/tem-ctl tpm/tpm-replay

# The traces: epochs + 20 of traffic, the first 10 not measured (the
# sessions settle), the last 10 a margin.
h=1
while [ $h -le "$hosts" ]; do
    per=5
    [ $h = 1 ] && per=8
    "$PY" "$top/tests/tem-trace.py" --out "$tmp/h$h.pcap" \
        --epochs $((epochs + 20)) --per-epoch $per --size 1000 \
        --src "10.99.$h.1" >/dev/null
    h=$((h + 1))
done

echo "bench-tem-replay: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
r=1
while [ "$r" -le "$runs" ]; do
    rm -f "$tmp/events.r.json" "$tmp/alerts.json"
    bench_start_tem r --listen="ipc://$tmp/hosts" \
        --pub='tcp://127.0.0.1:*' --alert-file="$tmp/alerts.json"
    pids=$tem_pid
    e=0
    while [ $e -lt "$events" ]; do
        "$bin/tem-ctl" --ctl="ipc://$tmp/ctl.r" event-add "lat$e" \
            "filter=udp,nw_dst=10.99.0.2 interval=10ms group=nw_dst" \
            "predicate=sum(volume) > $((hosts * 5000))" across=sum \
            >/dev/null
        e=$((e + 1))
    done

    # Every host starts on the same epoch boundary, 1.5 s from now.
    start=$(( ($(date +%s%N) / 10000000 + 150) * 10000000 ))
    h=1
    hpids=
    while [ $h -le "$hosts" ]; do
        "$bin/tpm-replay" --controller "ipc://$tmp/hosts" --host-id "h$h" \
            --insecure-plaintext --prefix 10.99.0.0/24 --realtime \
            --start-at $start --require-controller "$tmp/h$h.pcap" \
            >/dev/null 2>"$tmp/h$h.err" &
        hpids="$hpids $!"
        pids="$pids $!"
        h=$((h + 1))
    done
    for p in $hpids; do
        wait "$p" || { echo "a tpm-replay host failed:" >&2;
                       for f in "$tmp"/h*.err; do tail -n 3 "$f"; done >&2;
                       exit 1; }
    done
    sleep 0.5
    kill "$tem_pid"
    wait "$tem_pid" || true
    pids=

    "$PY" - "$tmp/alerts.json" "$start" "$epochs" "$events" "$hosts" "$r" \
        <<'EOF'
import json, statistics, sys
path, start, epochs, events, hosts, run = sys.argv[1:]
start, epochs, events = int(start), int(epochs), int(events)
first = start // 10_000_000 + 10          # Skip 10 epochs of warm-up.
alerts = [json.loads(l) for l in open(path)]
lat = sorted(a["latency_us"] for a in alerts
             if first <= a["epoch"] < first + epochs)
expected = epochs * events
n = len(lat)
p = lambda q: lat[min(n - 1, int(q * n))] if n else float("nan")
print("run %s: %d hosts, %d alerts of %d expected in %d epochs; "
      "latency_us avg %.0f p50 %d p99 %d max %d"
      % (run, int(hosts), n, expected, epochs,
         statistics.mean(lat) if n else float("nan"), p(0.5), p(0.99),
         lat[-1] if n else -1))
EOF
    r=$((r + 1))
done
