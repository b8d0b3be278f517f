#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The TEM's alert delivery to a real Prometheus Alertmanager (Debian's
# prometheus-alertmanager, API v2) on loopback (docs/tem.md,
# "Alertmanager"; docs/benchmarks.md, section 5):
#
#   throughput  a flood host (tests/tem-limits.py host, no keys) makes the
#               TEM raise COUNT alerts at once; the time from the first
#               alert queued to the last one answered 2xx by Alertmanager
#               (tem-ctl status, polled every 20 ms), in alerts a second,
#               with the requests (batches) and failures the sender
#               counted, and the longest tem-ctl status meanwhile;
#   latency     two tpm-replay hosts make 2 events alert every 100 ms
#               for --seconds; a poller reads Alertmanager's alerts every
#               10 ms and, for each alert's epoch (an annotation), takes
#               Alertmanager's updatedAt (when it received that alert)
#               minus the TEM's decision time (the alert's time_ns):
#               median, p99 and max over all alerts, and how many never
#               arrived.
#
# Repeated --runs times; medians.  Everything started is killed by PID at
# exit.  Usage: tem/bench/bench-tem-am.sh [--build=DIR] [--runs=N]
# [--count=N] [--seconds=S]
set -euo pipefail

top_srcdir=$(cd "$(dirname "$0")/../.." && pwd)
build=$top_srcdir/build
runs=3
count=5000
seconds=5
for a in "$@"; do
    case $a in
        --build=*) build=${a#--build=} ;;
        --runs=*) runs=${a#--runs=} ;;
        --count=*) count=${a#--count=} ;;
        --seconds=*) seconds=${a#--seconds=} ;;
        -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-tem-am.sh: unknown option $a" >&2; exit 1 ;;
    esac
done
ALERTMANAGER=${ALERTMANAGER:-/usr/bin/prometheus-alertmanager}
[ -x "$ALERTMANAGER" ] || { echo "no $ALERTMANAGER" >&2; exit 1; }
top_builddir=$build
# shellcheck source=tests/tem-lib.sh
. "$top_srcdir/tests/tem-lib.sh"
tem_test_init bench-tem-am
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY

am_pid=
bench_cleanup() {
    local rc=$?
    [ -z "$am_pid" ] || { kill "$am_pid" 2>/dev/null; wait "$am_pid" 2>/dev/null; }
    (exit $rc)
    tem_test_cleanup
}
trap bench_cleanup EXIT

amport=$("$PY" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
AMURL=http://127.0.0.1:$amport
printf 'route:\n  receiver: "null"\nreceivers:\n  - name: "null"\n' \
    >"$tmp/am.yml"

am_start() {
    rm -rf "$tmp/am-data"
    "$ALERTMANAGER" --config.file="$tmp/am.yml" \
        --storage.path="$tmp/am-data" \
        --web.listen-address="127.0.0.1:$amport" \
        --cluster.listen-address= >>"$tmp/am.log" 2>&1 &
    am_pid=$!
    for ((i = 0; i < 100; i++)); do
        "$PY" -c "import urllib.request
urllib.request.urlopen('$AMURL/-/ready', timeout=1)" 2>/dev/null && return 0
        sleep 0.1
    done
    fail "Alertmanager is not ready after 10 s"
}

am_stop() {
    kill "$am_pid"
    wait "$am_pid" 2>/dev/null || true
    am_pid=
}

# sender KEY: the Alertmanager sender's KEY in tem-ctl status.
sender() {
    ctl --json status | "$PY" -c "import json, sys
print(json.load(sys.stdin)['alertmanager']['urls'][0]['$1'])"
}

K=$tmp/keys
tem_keys "$K" h1 h2
"$PY" "$top_srcdir/tests/tem-trace.py" --out "$tmp/h1.pcap" \
    --epochs $((seconds * 100)) --per-epoch 8 --size 1000 \
    --src 10.99.1.1 >/dev/null
"$PY" "$top_srcdir/tests/tem-trace.py" --out "$tmp/h2.pcap" \
    --epochs $((seconds * 100)) --per-epoch 5 --size 1000 \
    --src 10.99.2.1 >/dev/null

: >"$tmp/results"
for ((r = 1; r <= runs; r++)); do
    # --- Throughput -----------------------------------------------------
    am_start
    tem_start --insecure-plaintext --listen="ipc://$tmp/tem" \
        --pub="ipc://$tmp/pub" --state-file="$tmp/events-t$r.json" \
        --alert-file="$tmp/alerts-t$r.json" --no-alerts-stdout \
        --alertmanager="$AMURL" --alertmanager-queue=$((count * 2))
    ctl event-add flood "filter=udp,nw_dst=10.99.0.0/24 interval=10ms" \
        group=nw_dst 'predicate=sum(volume) > 1' across=sum >/dev/null
    "$PY" "$top_srcdir/tests/tem-limits.py" host "ipc://$tmp/tem" \
        "$count" 10 >"$tmp/flood.out" &
    flood=$!
    pids+=($flood)
    t0= worst=0
    end=$(( $(date +%s) + 120 ))
    while [ "$(date +%s)" -lt $end ]; do
        a=$(date +%s%N)
        st=$(ctl --json status | "$PY" -c "import json, sys
u = json.load(sys.stdin)['alertmanager']['urls'][0]
print(u['queued'], u['sent'], u['requests'], u['failures'], u['dropped'])")
        b=$(date +%s%N)
        ms=$(( (b - a) / 1000000 ))
        [ $ms -le $worst ] || worst=$ms
        read -r queued sent requests failures dropped <<<"$st"
        [ -n "$t0" ] || [ "$queued" = 0 ] || t0=$a
        [ "$sent" -lt "$count" ] || break
        sleep 0.02
    done
    t1=$(date +%s%N)
    kill "$flood" 2>/dev/null || true
    wait "$flood" 2>/dev/null || true
    tem_stop
    am_stop
    [ "$sent" -ge "$count" ] \
        || fail "run $r: $sent of $count alerts sent in 120 s ($st)"
    echo "throughput $r $count $(( (t1 - t0) / 1000 )) $requests $failures" \
         "$dropped $worst" >>"$tmp/results"

    # --- Latency ----------------------------------------------------------
    am_start
    tem_start --key-file="$K/tem.key" --allow-file="$K/allow" \
        --listen="ipc://$tmp/tem" --pub="ipc://$tmp/pub" \
        --state-file="$tmp/events-l$r.json" \
        --alert-file="$tmp/alerts-l$r.json" --no-alerts-stdout \
        --alertmanager="$AMURL"
    f="filter=udp,nw_dst=10.99.0.2 interval=100ms group=nw_dst"
    ctl event-add l_sum "$f" 'predicate=sum(volume) > 120KB' \
        across=sum >/dev/null
    ctl event-add l_max "$f" 'predicate=sum(volume) > 70KB' \
        across=max >/dev/null
    "$PY" - "$AMURL" "$tmp/seen-$r.json" $((seconds + 4)) <<'PYEOF' &
import json, sys, time, urllib.request
url, out, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
seen = {}
end = time.time() + secs
while time.time() < end:
    for a in json.loads(urllib.request.urlopen(url + "/api/v2/alerts",
                                               timeout=2).read()):
        k = "%s %s" % (a["labels"]["event"], a["annotations"]["epoch"])
        seen.setdefault(k, a["updatedAt"])
    time.sleep(0.01)
json.dump(seen, open(out, "w"))
PYEOF
    poller=$!
    pids+=($poller)
    start=$(( ($(date +%s%N) / 100000000 + 15) * 100000000 ))
    hp=()
    for h in h1 h2; do
        "$REPLAY" --controller "ipc://$tmp/tem" --host-id $h \
            --tem-key "$K/tem.key.pub" --host-key-file "$K/$h.key" \
            --prefix 10.99.0.0/24 --realtime --start-at $start \
            --require-controller "$tmp/$h.pcap" \
            >"$tmp/$h.out" 2>"$tmp/$h.err" &
        pids+=($!)
        hp+=($!)
    done
    for p in "${hp[@]}" $poller; do
        wait "$p" || true
    done
    tem_stop
    am_stop
    "$PY" - "$tmp/alerts-l$r.json" "$tmp/seen-$r.json" "$r" \
        >>"$tmp/results" <<'PYEOF'
import datetime, json, sys
alerts = [json.loads(l) for l in open(sys.argv[1])]
seen = json.load(open(sys.argv[2]))
def ns(t):
    d, frac = t.rstrip("Z").split(".")
    dt = datetime.datetime.fromisoformat(d).replace(
        tzinfo=datetime.timezone.utc)
    return int(dt.timestamp()) * 10**9 + int(frac[:9].ljust(9, "0"))
lat, missing = [], 0
for a in alerts:
    k = "%s %d" % (a["event"], a["epoch"])
    if k in seen:
        lat.append((ns(seen[k]) - a["time_ns"]) / 1e6)
    else:
        missing += 1
lat.sort()
def q(p):
    return lat[min(len(lat) - 1, int(p * len(lat)))] if lat else -1
# Missing: overwritten in Alertmanager by the next alert of the same
# event within the poller's 10 ms, or never delivered.
print("latency %s %d %.2f %.2f %.2f %d" % (sys.argv[3], len(alerts),
                                             q(0.5), q(0.99),
                                             lat[-1] if lat else -1,
                                             missing))
PYEOF
done

"$PY" - "$tmp/results" <<'PYEOF'
import statistics, sys
t, l = [], []
for line in open(sys.argv[1]):
    f = line.split()
    (t if f[0] == "throughput" else l).append(f[1:])
print("throughput (alerts raised at once -> answered 2xx by Alertmanager):")
for r in t:
    n, us = int(r[1]), int(r[2])
    print("  run %s: %d alerts in %.3f s: %.0f alerts/s, %s requests, %s "
          "failures, %s dropped; tem-ctl status at most %s ms"
          % (r[0], n, us / 1e6, n / (us / 1e6), r[3], r[4], r[5], r[6]))
print("  median %.0f alerts/s" % statistics.median(
    int(r[1]) / (int(r[2]) / 1e6) for r in t))
print("latency (TEM decision -> Alertmanager received it), ms:")
for r in l:
    print("  run %s: %s alerts, p50 %s, p99 %s, max %s, not seen %s"
          % tuple(r))
print("  medians: p50 %.2f, p99 %.2f, max %.2f ms" % tuple(
    statistics.median(float(r[i]) for r in l) for i in (2, 3, 4)))
PYEOF
