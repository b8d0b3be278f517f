#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# bench-tem-instr.sh: the TEM core's instructions per latency epoch,
# counted by callgrind (docs/benchmarks.md, section 5): a figure that a
# shared, noisy machine does not move.
#
# usage: tem/bench/bench-tem-instr.sh [--build=DIR] [--compare=DIR]
#            [--hosts="8 64"] [--epochs="10 40"] [--runs=1]
#
# For each build (--build's "A", then --compare's "B" if given), each
# host count and each run: trumpet-tem runs under callgrind, counting
# only inside tem_core_input_auth() (a frame from a host: decoding,
# satisfactions, replies, decisions, alerts), tem_core_flush() (encoding
# and handing each host's frame to ZeroMQ) and tem_core_run() (timers),
# not the loop's waits, ZeroMQ's reads or its I/O thread, whose share
# depends on how many idle turns the loop makes; tem-bench --mode=latency
# runs against it twice, E1 then E2 epochs (--epochs="E1 E2"), a
# fresh TEM each), and the TEM's instructions per epoch are
# (Ir(E2) - Ir(E1)) / (E2 - E1): the start, the installs and the removal
# of the events cancel out.  Each epoch is 256 events satisfied by one
# host, the others polled, every key alerting.  The TEM runs with a poll
# deadline of 10 s so that callgrind's slowness (~50x) never turns a
# decision into a deadline one; tem-bench waits for every alert of an
# epoch before the next, so the work per epoch is the same as at full
# speed.  Needs valgrind; prints one line per build and host
# count, and B / A.
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
build=build
compare=
hosts="8 64"
epochs="10 40"
runs=1

for arg; do
    case $arg in
    --build=*) build=${arg#*=} ;;
    --compare=*) compare=${arg#*=} ;;
    --hosts=*) hosts=${arg#*=} ;;
    --epochs=*) epochs=${arg#*=} ;;
    --runs=*) runs=${arg#*=} ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'
               exit 0 ;;
    *) echo "bench-tem-instr: unexpected argument '$arg' (try --help)" >&2
       exit 2 ;;
    esac
done
command -v valgrind >/dev/null || {
    echo "bench-tem-instr: needs valgrind" >&2
    exit 1
}
case $build in /*) ;; *) build=$top/$build ;; esac
case $compare in ''|/*) ;; *) compare=$top/$compare ;; esac
set -- $epochs
e1=$1
e2=$2

. "$top/tem/bench/bench-lib.sh"
bench_setup "$build" tem/trumpet-tem tem/tem-ctl tem/bench/tem-bench
mv "$bin/trumpet-tem" "$bin/trumpet-tem.a"
if [ -n "$compare" ]; then
    make -C "$compare" -s tem/trumpet-tem
    cp "$compare/tem/trumpet-tem" "$bin/trumpet-tem.b"
fi

# instr LABEL HOSTS EPOCHS: the TEM's instructions for one run.
instr() {
    name=$1.$2.$3
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$name" \
        --toggle-collect=tem_core_input_auth --toggle-collect=tem_core_flush \
        --toggle-collect=tem_core_run \
        "$bin/trumpet-tem.$1" --insecure-plaintext \
        --listen='tcp://127.0.0.1:*' --pub='tcp://127.0.0.1:*' \
        --ctl="ipc://$tmp/ctl.$name" --state-file="$tmp/events.$name.json" \
        --no-alerts-stdout --poll-deadline=10s \
        2>>"$tmp/tem.$name.log" &
    tem_pid=$!
    pids="$pids $tem_pid"
    tries=0
    until "$bin/tem-ctl" --ctl="ipc://$tmp/ctl.$name" --timeout=1s \
            status >/dev/null 2>&1; do
        tries=$((tries + 1))
        if [ $tries -ge 60 ] || ! kill -0 "$tem_pid" 2>/dev/null; then
            echo "bench-tem-instr: the TEM did not start" >&2
            tail -n 5 "$tmp/tem.$name.log" >&2
            exit 1
        fi
    done
    "$bin/tem-bench" --ctl="ipc://$tmp/ctl.$name" --mode=latency \
        --hosts="$2" --epochs="$3" --timeout=60s --json \
        >"$tmp/bench.$name.json" 2>>"$tmp/bench.log" || {
        echo "bench-tem-instr: tem-bench failed:" >&2
        tail -n 5 "$tmp/bench.log" >&2
        exit 1
    }
    kill "$tem_pid"
    wait "$tem_pid" || true
    sed -n 's/^summary: //p' "$tmp/cg.$name"
}

labels=a
[ -z "$compare" ] || labels="a b"
echo "bench-tem-instr: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for h in $hosts; do
    r=1
    while [ "$r" -le "$runs" ]; do
        for l in $labels; do
            i1=$(instr $l "$h" "$e1")
            i2=$(instr $l "$h" "$e2")
            echo "$l $h $r $(( (i2 - i1) / (e2 - e1) ))" >>"$tmp/instr.txt"
        done
        r=$((r + 1))
    done
done

python3 - "$tmp/instr.txt" <<'EOF'
import statistics, sys
from collections import defaultdict
v = defaultdict(list)
for line in open(sys.argv[1]):
    l, h, r, ir = line.split()
    v[(l, int(h))].append(int(ir))
print("\nTEM instructions per latency epoch (256 keys; medians of runs)")
print("%6s %6s %14s %s" % ("build", "hosts", "Ir / epoch", "runs"))
for (l, h) in sorted(v, key=lambda k: (k[1], k[0])):
    print("%6s %6d %14d %s" % (l.upper(), h, statistics.median(v[(l, h)]),
                               v[(l, h)]))
    if l == "b" and ("a", h) in v:
        print("%6s %6d %14.3f" % ("B / A", h,
                                  statistics.median(v[("b", h)])
                                  / statistics.median(v[("a", h)])))
EOF
