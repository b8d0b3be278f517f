#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The TEM benchmark (docs/benchmarks.md, section "TEM"): throughput and
# detection latency of trumpet-tem with N simulated hosts on loopback.
#
# Builds tem/trumpet-tem, tem/tem-ctl and tem/bench/tem-bench with make in
# the build directory, then, for each run, for each configuration: starts a
# fresh trumpet-tem (ports chosen by the kernel, control socket and event
# file in a temporary directory), runs tem-bench against it and stops it
# (by its PID).  Runs alternate (run 1 of every configuration, then run 2,
# ...), so that a change of load on the machine touches every
# configuration alike.  Prints one table of medians over the runs.
#
# Usage: tem/bench/bench-tem.sh [OPTIONS]
#   --build=DIR        build directory (build)
#   --runs=R           runs of each configuration (3)
#   --hosts="1 8 64"   host counts
#   --scenarios="all one one-quiet"   throughput scenarios (tem-bench
#                      --scenario; one-quiet is skipped for 1 host)
#   --seconds=TIME     throughput measurement per run (3s)
#   --epochs=R         latency: epochs per run (20)
#   --no-throughput, --no-latency, --no-rtt   skip a part
#   --pin              TEM on CPU 0, tem-bench on CPU 1 (taskset)
#   --spin             keep every CPU busy with a spinning process at nice
#                      19 (in a VM, a wakeup on an idle vCPU costs tens of
#                      microseconds; spinners take ~1.5% of a CPU from a
#                      nice-0 thread)
#   --profile          run 1 of each configuration: perf record of the TEM
#                      during the measurement (throughput: the measured
#                      seconds; latency: from 1.2 s after the start, 80%
#                      of the epochs, give it --epochs=300 or more);
#                      prints the split of its
#                      samples by library and the top symbols, and for
#                      latency the top functions with what they call
#                      (DWARF call graphs: the build has no frame pointers)
#   --compare=DIR      A/B: also run every configuration with the TEM of
#                      build DIR ("B"), right after the same run with
#                      --build's ("A"), so that both see the same load;
#                      tem-bench and tem-ctl are --build's for both; the
#                      tables get a row per build and the ratios B / A
#   --results=FILE     also keep every run's JSON line in FILE
#   --keep             keep the temporary directory (logs)
#   Other options are passed to every tem-bench run (e.g. --batch=64).
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
build=build
runs=3
hosts="1 8 64"
scenarios="all one one-quiet"
seconds=3s
epochs=20
do_tput=yes
do_lat=yes
do_rtt=yes
pin=no
spin=no
spinners=
profile=no
compare=
results=
keep=no
extra=

for arg; do
    case $arg in
    --build=*) build=${arg#*=} ;;
    --runs=*) runs=${arg#*=} ;;
    --hosts=*) hosts=${arg#*=} ;;
    --scenarios=*) scenarios=${arg#*=} ;;
    --seconds=*) seconds=${arg#*=} ;;
    --epochs=*) epochs=${arg#*=} ;;
    --no-throughput) do_tput=no ;;
    --no-latency) do_lat=no ;;
    --no-rtt) do_rtt=no ;;
    --pin) pin=yes ;;
    --spin) spin=yes ;;
    --profile) profile=yes ;;
    --compare=*) compare=${arg#*=} ;;
    --results=*) results=${arg#*=} ;;
    --keep) keep=yes ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'
               exit 0 ;;
    --*) extra="$extra $arg" ;;
    *) echo "bench-tem: unexpected argument '$arg' (try --help)" >&2
       exit 2 ;;
    esac
done
case $build in /*) ;; *) build=$top/$build ;; esac
if [ ! -f "$build/Makefile" ]; then
    echo "bench-tem: $build/Makefile not found: configure a build there" \
         "first (see README.md) or give --build=DIR" >&2
    exit 2
fi
if [ $profile = yes ] && ! command -v perf >/dev/null; then
    echo "bench-tem: --profile needs perf" >&2
    exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-tem.XXXXXX")
tem_pid=
perf_pid=
cleanup() {
    status=$?
    for p in $perf_pid $tem_pid $spinners; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    if [ $keep = yes ]; then
        echo "bench-tem: kept $tmp" >&2
    else
        rm -rf "$tmp"
    fi
    exit $status
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

make -C "$build" -s tem/trumpet-tem tem/tem-ctl tem/bench/tem-bench
# Copies (the programs link only libtool convenience libraries, so they
# are plain executables), so that a rebuild during the runs cannot mix
# binaries.
bin=$tmp/bin
mkdir "$bin"
for p in tem/trumpet-tem tem/tem-ctl tem/bench/tem-bench; do
    cp "$build/$p" "$bin/"
done
# The TEM of each run: --build's ("A"), or --compare's ("B").
tem_bin=$bin
label=A
if [ -n "$compare" ]; then
    make -C "$compare" -s tem/trumpet-tem
    mkdir "$tmp/bin-b"
    cp "$compare/tem/trumpet-tem" "$tmp/bin-b/"
fi
tem_cpu=
bench_cpu=
if [ $pin = yes ]; then
    tem_cpu="taskset -c 0"
    bench_cpu="taskset -c 1"
fi
out=$tmp/results.json
: >"$out"
if [ $spin = yes ]; then
    for c in $(seq "$(nproc)"); do
        nice -n 19 sh -c 'while :; do :; done' &
        spinners="$spinners $!"
    done
fi

echo "bench-tem: $(nproc) CPUs, spinners: $spin, $(git -C "$top" log -1 --format='commit %h (%s)' 2>/dev/null || echo 'no git'), load $(cut -d' ' -f1-3 /proc/loadavg)"

# Starts a TEM into $tem_pid (taskset execs it: the PID is the TEM's); its
# control socket is $ctl.
start_tem() {
    ctl="ipc://$tmp/ctl"
    rm -f "$tmp/events.json"
    # Plaintext: tem-bench's simulated hosts have no keys (the benchmark
    # measures the TEM's logic, not CURVE).
    $tem_cpu "$tem_bin/trumpet-tem" --insecure-plaintext \
        --listen='tcp://127.0.0.1:*' --pub='tcp://127.0.0.1:*' --ctl="$ctl" \
        --state-file="$tmp/events.json" --no-alerts-stdout \
        2>>"$tmp/tem.log" &
    tem_pid=$!
    i=0
    until "$bin/tem-ctl" --ctl="$ctl" --timeout=200ms status \
            >/dev/null 2>&1; do
        i=$((i + 1))
        if [ $i -ge 50 ] || ! kill -0 $tem_pid 2>/dev/null; then
            echo "bench-tem: the TEM did not start:" >&2
            tail -5 "$tmp/tem.log" >&2
            exit 1
        fi
    done
}

stop_tem() {
    kill "$tem_pid"
    wait "$tem_pid" || true
    tem_pid=
}

# Runs tem-bench against a fresh TEM ($tem_bin's); appends its JSON line
# to $out with the run number, the build's label and the load average.
bench_one() {
    run=$1
    shift
    start_tem
    if [ $profile = yes ] && [ "$run" = 1 ] && [ "$1" = --mode=throughput ]
    then
        # tem-bench warms up for 1 s, then measures for --seconds.
        (sleep 1.2; exec perf record -q -g -p $tem_pid -o "$tmp/perf.data" \
            -- sleep 1.5) >/dev/null 2>&1 &
        perf_pid=$!
    elif [ $profile = yes ] && [ "$run" = 1 ]; then
        # Latency: the events are installed in the first second; the
        # profile then covers 80% of the epochs' time (10 ms each), not
        # the deletion of the events at the end.
        span=$(awk "BEGIN { print $epochs * 0.008 }")
        (sleep 1.2; exec perf record -q -F 2000 --call-graph=dwarf,16384 \
            -p $tem_pid -o "$tmp/perf.data" -- sleep "$span") \
            >/dev/null 2>&1 &
        perf_pid=$!
    fi
    if ! line=$($bench_cpu "$bin/tem-bench" --ctl="$ctl" --tem-pid=$tem_pid \
                --json "$@" $extra 2>>"$tmp/bench.log"); then
        echo "bench-tem: tem-bench $* failed:" >&2
        tail -5 "$tmp/bench.log" >&2
        exit 1
    fi
    if [ -n "$perf_pid" ]; then
        wait "$perf_pid" || true
        perf_pid=
        echo "== perf profile of the TEM: $*" >>"$tmp/profile.txt"
        perf report -i "$tmp/perf.data" --no-children -g none \
            --sort comm,dso 2>/dev/null | grep '%' | head -8 \
            >>"$tmp/profile.txt"
        perf report -i "$tmp/perf.data" --no-children -g none --sort sym \
            2>/dev/null | grep '%' | head -15 >>"$tmp/profile.txt"
        if [ "$1" != --mode=throughput ]; then
            echo "-- with what they call (user space):" >>"$tmp/profile.txt"
            perf report -i "$tmp/perf.data" --children -g none --sort sym \
                2>/dev/null | grep '%' | grep -v '\[k\]' \
                | grep -v ' 0x0000' | head -30 >>"$tmp/profile.txt"
        fi
    fi
    stop_tem
    tag="\"run\":$run,\"build\":\"$label\""
    echo "$line" | sed "s/}\$/,$tag,\"load1\":$(cut -d' ' -f1 \
        /proc/loadavg)}/" >>"$out"
}

# Runs one configuration with build A's TEM and, with --compare, at once
# with build B's (never profiled).
bench() {
    bench_one "$@"
    if [ -n "$compare" ]; then
        tem_bin=$tmp/bin-b label=B profile_b=$profile profile=no
        bench_one "$@"
        tem_bin=$bin label=A profile=$profile_b
    fi
}

r=1
while [ $r -le "$runs" ]; do
    echo "bench-tem: run $r of $runs" >&2
    if [ $do_rtt = yes ]; then
        line=$($bench_cpu "$bin/tem-bench" --mode=rtt --json)
        echo "$line" | sed "s/}\$/,\"run\":$r}/" >>"$out"
    fi
    if [ $do_tput = yes ]; then
        for s in $scenarios; do
            for n in $hosts; do
                if [ $s = one-quiet ] && [ $n -lt 2 ]; then
                    continue
                fi
                bench $r --mode=throughput --scenario=$s --hosts=$n \
                    --seconds=$seconds
            done
        done
    fi
    if [ $do_lat = yes ]; then
        for n in $hosts; do
            bench $r --mode=latency --hosts=$n --epochs=$epochs
        done
    fi
    r=$((r + 1))
done

if [ -n "$results" ]; then
    cp "$out" "$results"
fi
if [ -f "$tmp/profile.txt" ]; then
    cat "$tmp/profile.txt"
fi

python3 - "$out" <<'EOF'
import json, statistics, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
builds = sorted(set(r.get("build", "A") for r in rows if r["mode"] != "rtt"))
def med(rs, k):
    return statistics.median(r[k] for r in rs)
def groups(mode, key):
    g = {}
    for r in rows:
        if r["mode"] == mode:
            g.setdefault(key(r) + (r.get("build", "A"),), []).append(r)
    return g
def build_col(b):
    return " " + b if len(builds) > 1 else ""
def ratios(g, fields):
    """With --compare: B / A of each configuration's medians."""
    if len(builds) < 2:
        return
    print("B / A:")
    for k in sorted(set(k[:-1] for k in g)):
        a, b = g.get(k + ("A",)), g.get(k + ("B",))
        if a and b:
            print("  %-16s %s" % (" ".join(str(x) for x in k), "  ".join(
                "%s %.2fx" % (f, med(b, f) / med(a, f)) if med(a, f)
                else "%s -" % f for f in fields)))

g = groups("throughput", lambda r: (r["scenario"], r["hosts"]))
if g:
    print("\nThroughput (medians of %d runs; M = millions; CPU = the TEM's "
          "threads, main = its main thread)" % max(len(v) for v in g.values()))
    print("%-10s %5s %9s %9s %9s %9s %9s %8s %6s %6s %6s%s" % (
        "scenario", "hosts", "sat/CPU-s", "sat/main", "sat/s", "dec/s",
        "msg/CPU-s", "msg/s", "TEMcpu", "other", "errors",
        " build" if len(builds) > 1 else ""))
    for (s, n, b), rs in g.items():
        print("%-10s %5d %8.3fM %8.3fM %8.3fM %8.3fM %8.3fM %7.3fM %6.2f "
              "%6.2f %6d%s" % (
            s, n, med(rs, "sat_per_cpu_s") / 1e6,
            med(rs, "sat_per_main_cpu_s") / 1e6, med(rs, "sat_per_s") / 1e6,
            med(rs, "decisions_per_s") / 1e6,
            med(rs, "msgs_per_cpu_s") / 1e6, med(rs, "msgs_per_s") / 1e6,
            med(rs, "tem_cpu_util"), med(rs, "other_cpu_util"),
            sum(r["errors"] for r in rs), build_col(b)))
    ratios(g, ["sat_per_cpu_s", "sat_per_main_cpu_s"])

g = groups("latency", lambda r: (r["hosts"],))
if g:
    print("\nLatency, %d events satisfied per epoch (us; medians over runs "
          "of each run's figure)" % next(iter(g.values()))[0]["events"])
    print("%5s %8s %6s %6s %6s | %8s %6s | %9s %9s %9s %9s | %8s %8s | "
          "%5s %5s%s" % (
        "hosts", "avg", "p50", "p99", "max", "e2e avg", "e2e99",
        "1st poll", "polls", "replies", "to alert", "TEM cpu", "bench",
        "other", "dl", " build" if len(builds) > 1 else ""))
    for (n, b), rs in sorted(g.items()):
        print("%5d %8.1f %6.0f %6.0f %6.0f | %8.1f %6.0f | %9.1f %9.1f "
              "%9.1f %9.1f | %8.0f %8.0f | %5.2f %5d%s" % (
            n, med(rs, "avg_us"), med(rs, "p50_us"), med(rs, "p99_us"),
            med(rs, "max_us"), med(rs, "e2e_avg_us"), med(rs, "e2e_p99_us"),
            med(rs, "to_first_poll_us"), med(rs, "polls_us"),
            med(rs, "replies_us"), med(rs, "to_last_alert_us"),
            med(rs, "tem_cpu_per_epoch_us"),
            med(rs, "bench_cpu_per_epoch_us"), med(rs, "other_cpu_util"),
            sum(r["deadline"] + r["missing"] for r in rs), build_col(b)))
    ratios(g, ["avg_us", "p99_us", "tem_cpu_per_epoch_us"])

g = groups("rtt", lambda r: ())
if g:
    rs = next(iter(g.values()))
    print("\nZeroMQ loopback round trip without the TEM: avg %.1f us, p50 "
          "%.1f, p99 %.1f (medians of %d runs)" % (
          med(rs, "avg_us"), med(rs, "p50_us"), med(rs, "p99_us"), len(rs)))
EOF
