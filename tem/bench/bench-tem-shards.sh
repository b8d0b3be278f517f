#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# bench-tem-shards.sh: events partitioned over several TEMs, simulated
# (docs/tem.md, "Sizing, and more than one TEM").
#
# usage: tem/bench/bench-tem-shards.sh [--build=DIR] [--tems="1 2"]
#            [--runs=3] [--hosts=1024] [--events=256] [--event-hosts=16]
#            [--scenario=one-quiet] [--seconds=3s] [--timeout=10s]
#            [--results=FILE]
#
# For each K of --tems and each run: K trumpet-tem processes start, each
# with its own sockets and event file, and K tem-bench processes run at
# the same time, one per TEM, each simulating the same --hosts hosts (as
# every host would connect to every TEM) and defining its share of the
# events (--events/K, scoped to --event-hosts hosts each).  An event's
# decision involves only its own hosts, so the TEMs never talk to each
# other: the partition is exact, and what one TEM does for its share is
# what this measures.  The script prints, per K, the medians over runs of
# the sums over TEMs (decisions per wall second, TEM CPU used) and of the
# per-TEM rates (satisfactions per TEM CPU-second).
#
# --timeout is tem-bench's longest wait for the TEM (a loaded machine
# with many hosts needs more than the 10 s default to welcome them).
# On a machine with fewer free CPUs than 2K (TEMs and simulated hosts),
# the wall-clock sums measure the machine; the per-CPU-second rates still
# measure the TEM.  Runs are plaintext (--insecure-plaintext), as
# tem/bench/bench-tem.sh's.
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
build=build
tems="1 2"
runs=3
hosts=1024
events=256
event_hosts=16
scenario=one-quiet
seconds=3s
timeout=10s
results=

for arg; do
    case $arg in
    --build=*) build=${arg#*=} ;;
    --tems=*) tems=${arg#*=} ;;
    --runs=*) runs=${arg#*=} ;;
    --hosts=*) hosts=${arg#*=} ;;
    --events=*) events=${arg#*=} ;;
    --event-hosts=*) event_hosts=${arg#*=} ;;
    --scenario=*) scenario=${arg#*=} ;;
    --seconds=*) seconds=${arg#*=} ;;
    --timeout=*) timeout=${arg#*=} ;;
    --results=*) results=${arg#*=} ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'
               exit 0 ;;
    *) echo "bench-tem-shards: unexpected argument '$arg' (try --help)" >&2
       exit 2 ;;
    esac
done
case $build in /*) ;; *) build=$top/$build ;; esac

. "$top/tem/bench/bench-lib.sh"
bench_setup "$build" tem/trumpet-tem tem/tem-ctl tem/bench/tem-bench
out=$tmp/results.json
: >"$out"
echo "bench-tem-shards: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

# start_tem I: TEM number I, control socket ipc://$tmp/ctl.I.
start_tem() {
    bench_start_tem "$1" --max-hosts=$((hosts + 16)) \
        --listen='tcp://127.0.0.1:*' --pub='tcp://127.0.0.1:*'
    eval "tem_pid_$1=$tem_pid"
}

r=1
while [ "$r" -le "$runs" ]; do
    for k in $tems; do
        echo "bench-tem-shards: run $r, $k TEM(s)" >&2
        per=$((events / k))
        i=1
        while [ $i -le "$k" ]; do
            start_tem $i
            i=$((i + 1))
        done
        i=1
        bench_pids=
        while [ $i -le "$k" ]; do
            eval "tp=\$tem_pid_$i"
            "$bin/tem-bench" --ctl="ipc://$tmp/ctl.$i" --tem-pid="$tp" \
                --json --mode=throughput --scenario="$scenario" \
                --hosts="$hosts" --events="$per" \
                --event-hosts="$event_hosts" --seconds="$seconds" \
                --timeout="$timeout" \
                >"$tmp/bench.$i.json" 2>>"$tmp/bench.log" &
            bench_pids="$bench_pids $!"
            i=$((i + 1))
        done
        for p in $bench_pids; do
            if ! wait "$p"; then
                echo "bench-tem-shards: a tem-bench failed:" >&2
                tail -5 "$tmp/bench.log" >&2
                exit 1
            fi
        done
        i=1
        while [ $i -le "$k" ]; do
            eval "tp=\$tem_pid_$i"
            kill "$tp"
            wait "$tp" || true
            sed "s/}\$/,\"tems\":$k,\"tem\":$i,\"run\":$r}/" \
                "$tmp/bench.$i.json" >>"$out"
            i=$((i + 1))
        done
        pids=
    done
    r=$((r + 1))
done

if [ -n "$results" ]; then
    cp "$out" "$results"
fi

python3 - "$out" <<'EOF'
import json, statistics, sys
from collections import defaultdict

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = defaultdict(lambda: defaultdict(list))
for r in rows:
    by[r["tems"]][r["run"]].append(r)
print("\nEvents partitioned over K TEMs (medians over runs; sums over TEMs "
      "unless 'per TEM')")
print("%4s %6s %7s %12s %12s %16s %10s %8s" % (
    "K", "hosts", "events", "dec/s", "TEM CPUs", "sat/CPU-s per TEM",
    "other", "errors"))
for k in sorted(by):
    runs = by[k].values()
    dec = statistics.median(sum(x["decisions_per_s"] for x in rs)
                            for rs in runs)
    cpu = statistics.median(sum(x["tem_cpu_util"] for x in rs)
                            for rs in runs)
    per = statistics.median(x["sat_per_cpu_s"] for rs in runs for x in rs)
    other = statistics.median(max(x["other_cpu_util"] for x in rs)
                              for rs in runs)
    err = max(sum(x["errors"] for x in rs) for rs in runs)
    r0 = next(iter(runs))[0]
    print("%4d %6d %7d %11.3fM %12.2f %15.3fM %10.2f %8d" % (
        k, r0["hosts"], r0["events"] * k, dec / 1e6, cpu, per / 1e6,
        other, err))
EOF
