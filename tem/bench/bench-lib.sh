# SPDX-License-Identifier: Apache-2.0
#
# Shared by tem/bench/bench-tem-shards.sh and
# tem/bench/bench-tem-replay.sh (sourced, POSIX sh): a temporary
# directory removed on exit, INT or TERM with every process in $pids
# stopped, copies of the programs (so that a rebuild during the runs
# cannot mix binaries), and a TEM started on it.

# bench_setup BUILD PROGRAM...: makes PROGRAMs (paths in BUILD, e.g.
# tem/trumpet-tem) and copies them into $bin, under $tmp.
bench_setup() {
    bench_build=$1
    shift
    tmp=$(mktemp -d)
    pids=
    trap bench_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    make -C "$bench_build" -s "$@"
    bin=$tmp/bin
    mkdir "$bin"
    for p; do
        cp "$bench_build/$p" "$bin/"
    done
}

bench_cleanup() {
    status=$?
    for p in $pids; do
        kill "$p" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    rm -rf "$tmp"
    exit $status
}

# bench_start_tem NAME [OPTION...]: starts a plaintext TEM (its control
# socket ipc://$tmp/ctl.NAME, its event file and log in $tmp) with
# OPTIONs, waits until it answers, and sets $tem_pid.
bench_start_tem() {
    name=$1
    shift
    "$bin/trumpet-tem" --insecure-plaintext --ctl="ipc://$tmp/ctl.$name" \
        --state-file="$tmp/events.$name.json" --no-alerts-stdout "$@" \
        2>>"$tmp/tem.$name.log" &
    tem_pid=$!
    pids="$pids $tem_pid"
    tries=0
    until "$bin/tem-ctl" --ctl="ipc://$tmp/ctl.$name" --timeout=200ms \
            status >/dev/null 2>&1; do
        tries=$((tries + 1))
        if [ $tries -ge 50 ] || ! kill -0 "$tem_pid" 2>/dev/null; then
            echo "$(basename "$0"): TEM $name did not start:" >&2
            tail -n 5 "$tmp/tem.$name.log" >&2
            exit 1
        fi
    done
}
