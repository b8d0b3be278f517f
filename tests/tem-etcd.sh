#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The TEM's etcd client (tem/tem-etcd.h, docs/tem.md "etcd client")
# against a real etcd (Debian's etcd-server) on loopback, driven by
# tests/etcd-driver (a loop like the TEM's: zmq_poll on the client's
# descriptor), with etcdctl (etcd-client) as the independent truth:
#
#   1. put and range: what the driver writes etcdctl reads, and the other
#      way; a prefix deleted; a dead endpoint first in the list is
#      skipped for the next one.
#   2. The lease: /trumpet/members/ID on it stays past its TTL while
#      renewed, and vanishes within TTL + 1 s once renewals stop.
#   3. A watch of a prefix sees puts and deletes in order; etcd killed
#      (-9) and restarted on its data directory, changes made before the
#      watch reconnects: every change once, in revision order, none lost
#      or repeated; a watch from a compacted revision ends COMPACTED.
#   4. Election on /trumpet/leader between two drivers: exactly one
#      leader; the leader killed -9, the other leads within TTL + 1 s.
#   5. Two drivers allocating ids from /trumpet/next-id at once: no id
#      twice, the counter one past the largest.
#   6. etcd unreachable (a closed port), hanging (accepts, never
#      answers) or answering garbage: errors counted and answered, the
#      driver's loop never stalls (longest iteration under 100 ms), the
#      client stops at once.
#
# Every process started here is killed by PID at exit, failure or not.
# Automake test protocol: 0 pass, 1 fail, 77 skip (no etcd or etcdctl).
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir/build}
ETCD=${ETCD:-$(command -v etcd || true)}
ETCDCTL=${ETCDCTL:-$(command -v etcdctl || true)}
if [ -z "$ETCD" ] || [ -z "$ETCDCTL" ]; then
    echo "SKIP: no etcd or etcdctl (apt-get install etcd-server etcd-client)"
    exit 77
fi
PY=${PYTHON3:-python3}
DRIVER=$top_builddir/tests/etcd-driver
TTL=2

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tem-etcd.XXXXXX")
pids=()
etcd_pid=
cleanup() {
    local rc=$? p
    for p in "${pids[@]}" $etcd_pid; do
        kill -9 "$p" 2>/dev/null || true
    done
    for p in "${pids[@]}" $etcd_pid; do
        wait "$p" 2>/dev/null || true
    done
    if [ $rc != 0 ]; then
        for f in "$tmp"/*.err "$tmp/etcd.log"; do
            [ -f "$f" ] || continue
            echo "--- $f:"
            tail -n 15 "$f"
        done
    fi
    [ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"
    exit $rc
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*"
    exit 1
}

# free_port: a TCP port free on 127.0.0.1 now.
free_port() {
    "$PY" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

now_ms() {
    date +%s%3N
}

# wait_for FILE REGEX SECONDS: until a line of FILE matches.
wait_for() {
    local end=$(( $(now_ms) + $3 * 1000 ))
    while [ "$(now_ms)" -lt $end ]; do
        grep -qE "$2" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

cport=$(free_port)
pport=$(free_port)
EP=http://127.0.0.1:$cport

# etcd_start: etcd on the work directory's data directory, until healthy.
etcd_start() {
    "$ETCD" --name tem-etcd-test --data-dir "$tmp/etcd" \
        --listen-client-urls "$EP" --advertise-client-urls "$EP" \
        --listen-peer-urls "http://127.0.0.1:$pport" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
        --initial-cluster "tem-etcd-test=http://127.0.0.1:$pport" \
        >>"$tmp/etcd.log" 2>&1 &
    etcd_pid=$!
    local i
    for ((i = 0; i < 100; i++)); do
        ctl endpoint health >/dev/null 2>&1 && return 0
        kill -0 "$etcd_pid" 2>/dev/null || fail "etcd exited at start"
        sleep 0.1
    done
    fail "etcd not healthy after 10 s"
}

ctl() {
    ETCDCTL_API=3 "$ETCDCTL" --endpoints="127.0.0.1:$cport" \
        --dial-timeout=1s --command-timeout=3s "$@"
}

drv() {
    "$DRIVER" --endpoints="$EP" --ttl=$TTL "$@"
}

# bg NAME ARGS...: a driver in the background, output in $tmp/NAME.out
# and .err; its PID in $bg_pid.
bg() {
    local name=$1
    shift
    "$DRIVER" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    bg_pid=$!
    pids+=($bg_pid)
}

etcd_start

# --- 1. put and range ------------------------------------------------------
drv put /trumpet/events/1 'filter=udp "quoted" \ 100%' >/dev/null
[ "$(ctl get --print-value-only /trumpet/events/1)" = \
  'filter=udp "quoted" \ 100%' ] || fail "etcdctl reads another value"
ctl put /trumpet/events/2 'two' >/dev/null
ctl put /trumpet/eventsX 'not in the prefix' >/dev/null
drv get --prefix /trumpet/events/ >"$tmp/get.out"
printf '%s\n' '/trumpet/events/1=filter=udp "quoted" \ 100%' \
    '/trumpet/events/2=two' >"$tmp/get.want"
sed '$d' "$tmp/get.out" | diff -u "$tmp/get.want" - \
    || fail "get --prefix differs from what was put"
[ "$(drv del --prefix /trumpet/events/)" = "OK $(( $(tail -n 1 \
    "$tmp/get.out" | cut -d' ' -f2) + 1 )) 2" ] || fail "del --prefix"
[ -z "$(ctl get --prefix --keys-only /trumpet/events/)" ] \
    || fail "keys left after del --prefix"
[ "$(ctl get --print-value-only /trumpet/eventsX)" = 'not in the prefix' ] \
    || fail "del --prefix deleted past the prefix"
dead=$(free_port)
"$DRIVER" --endpoints="http://127.0.0.1:$dead,$EP" put /t/two-endpoints y \
    >/dev/null 2>"$tmp/two.err" || fail "put with a dead first endpoint"
grep -q 'switches 1 ' "$tmp/two.err" || fail "no switch to the second" \
    "endpoint: $(cat "$tmp/two.err")"
echo "PASS: put, get and del of a prefix agree with etcdctl; a dead" \
     "endpoint is skipped"

# --- 2. The lease --------------------------------------------------------
bg member --endpoints="$EP" --ttl=$TTL member m1
member=$bg_pid
wait_for "$tmp/member.out" '^MEMBER m1 ' 5 || fail "no membership"
lease=$(awk '/^MEMBER/ {print $3}' "$tmp/member.out")
ctl get /trumpet/members/m1 -w json | "$PY" -c '
import json, sys
kv = json.load(sys.stdin)["kvs"][0]
sys.exit(0 if kv["lease"] == int(sys.argv[1]) else 1)' "$lease" \
    || fail "/trumpet/members/m1 is not on lease $lease"
sleep $((TTL + 1))
[ "$(ctl get --print-value-only /trumpet/members/m1)" = m1 ] \
    || fail "the member key expired while its lease was renewed"
kill -USR1 $member
wait_for "$tmp/member.out" '^STOPPED' 2 || fail "renewals not stopped"
t0=$(now_ms)
while [ -n "$(ctl get --print-value-only /trumpet/members/m1)" ]; do
    [ $(( $(now_ms) - t0 )) -lt $(( (TTL + 1) * 1000 )) ] \
        || fail "the member key outlived its lease by more than 1 s"
    sleep 0.05
done
gone=$(( $(now_ms) - t0 ))
kill $member
wait $member || fail "the member driver exited $? on SIGTERM"
grep -qE 'keepalives [1-9]' "$tmp/member.err" || fail "no renewal counted"
echo "PASS: the member key lives on its renewed lease, vanishes $gone ms" \
     "after renewals stop (TTL $TTL s)"

# --- 3. A watch across an etcd restart -----------------------------------
rev=$(drv put /w/start x | cut -d' ' -f2)
# A long first backoff: the changes below are made before it reconnects.
bg watch --endpoints="$EP" --backoff-min=3000 --backoff-max=3000 \
    watch --prefix /w/ $((rev + 1))
watch=$bg_pid
wait_for "$tmp/watch.out" '^WATCHING' 5 || fail "the watch did not start"
ctl put /w/1 a >/dev/null
ctl put /w/2 b >/dev/null
ctl del /w/1 >/dev/null
wait_for "$tmp/watch.out" '^DEL /w/1 ' 5 || fail "the watch saw no delete"
kill -9 $etcd_pid
wait $etcd_pid 2>/dev/null || true
etcd_pid=
wait_for "$tmp/watch.err" 'watch down' 5 || fail "the watch saw no outage"
etcd_start
ctl put /w/3 c >/dev/null
ctl del /w/2 >/dev/null
ctl put /w/3 d >/dev/null
ctl put /w/4 e >/dev/null
wait_for "$tmp/watch.out" '^PUT /w/4 e ' 10 || fail "the watch did not" \
    "resume: $(cat "$tmp/watch.out")"
sleep 0.5
printf '%s\n' WATCHING 'PUT /w/1 a' 'PUT /w/2 b' 'DEL /w/1' 'PUT /w/3 c' \
    'DEL /w/2' 'PUT /w/3 d' 'PUT /w/4 e' >"$tmp/watch.want"
sed 's/ [0-9]*$//' "$tmp/watch.out" | diff -u "$tmp/watch.want" - \
    || fail "the watch's changes differ from what was done"
awk 'NR > 1 {if ($NF <= last) exit 1; last = $NF}' "$tmp/watch.out" \
    || fail "revisions out of order"
kill $watch
wait $watch || true
grep -qE 'reconnects [1-9]' "$tmp/watch.err" || fail "no reconnection"
# A watch from a compacted revision.
ctl compaction "$(drv put /w/5 f | cut -d' ' -f2)" >/dev/null
rc=0
drv watch --prefix /w/ $((rev + 1)) >"$tmp/compacted.out" \
    2>"$tmp/compacted.err" || rc=$?
[ $rc = 3 ] && grep -q '^COMPACTED [1-9]' "$tmp/compacted.out" \
    || fail "a compacted watch: exit $rc, $(cat "$tmp/compacted.out")"
echo "PASS: a watch sees 7 changes once each, in order, across etcd" \
     "killed and restarted; a compacted revision ends it"

# --- 4. Election ----------------------------------------------------------
bg e1 --endpoints="$EP" --ttl=$TTL elect e1
e1=$bg_pid
bg e2 --endpoints="$EP" --ttl=$TTL elect e2
e2=$bg_pid
wait_for "$tmp/e1.out" '^(LEADER|FOLLOWER)' 5 \
    && wait_for "$tmp/e2.out" '^(LEADER|FOLLOWER)' 5 \
    || fail "no election result"
sleep 0.5
n=$(cat "$tmp/e1.out" "$tmp/e2.out" | grep -c '^LEADER' || true)
[ "$n" = 1 ] || fail "$n leaders"
if grep -q '^LEADER' "$tmp/e1.out"; then
    leader=e1 lpid=$e1 other=e2 opid=$e2
else
    leader=e2 lpid=$e2 other=e1 opid=$e1
fi
[ "$(ctl get --print-value-only /trumpet/leader)" = $leader ] \
    || fail "etcd says $(ctl get --print-value-only /trumpet/leader)"
kill -9 $lpid
t0=$(now_ms)
wait $lpid 2>/dev/null || true
wait_for "$tmp/$other.out" '^LEADER' $((TTL + 2)) \
    || fail "$other did not take over"
took=$(( $(now_ms) - t0 ))
[ $took -le $(( (TTL + 1) * 1000 )) ] \
    || fail "$other took over after $took ms (TTL $TTL s)"
[ "$(ctl get --print-value-only /trumpet/leader)" = $other ] \
    || fail "etcd's leader is not $other"
kill $opid
wait $opid || true
echo "PASS: one leader of two; $leader killed -9, $other leads after" \
     "$took ms"

# --- 5. Id allocation -------------------------------------------------------
ctl del /trumpet/next-id >/dev/null
bg a1 --endpoints="$EP" alloc 150
a1=$bg_pid
bg a2 --endpoints="$EP" alloc 150
a2=$bg_pid
wait $a1 || fail "alloc 1 exited $?"
wait $a2 || fail "alloc 2 exited $?"
cat "$tmp/a1.out" "$tmp/a2.out" | awk '{print $2}' | sort -n >"$tmp/ids"
[ "$(wc -l <"$tmp/ids")" = 300 ] || fail "$(wc -l <"$tmp/ids") ids"
[ -z "$(uniq -d "$tmp/ids")" ] || fail "ids given twice: $(uniq -d \
    "$tmp/ids" | head -n 5 | tr '\n' ' ')"
next=$(ctl get --print-value-only /trumpet/next-id)
[ "$next" = $(( $(tail -n 1 "$tmp/ids") + 1 )) ] \
    || fail "/trumpet/next-id is $next, the largest id $(tail -n 1 \
    "$tmp/ids")"
echo "PASS: 300 ids from two drivers at once, none twice, up to" \
     "$(tail -n 1 "$tmp/ids")"

# --- 6. etcd unreachable, hanging, answering garbage ----------------------
for mode in hang garbage; do
    "$PY" "$top_srcdir/tests/etcd-fake.py" $mode >"$tmp/$mode.port" \
        2>"$tmp/fake-$mode.err" &
    pids+=($!)
done
for mode in hang garbage; do
    wait_for "$tmp/$mode.port" '^[0-9]+$' 5 || fail "no fake etcd ($mode)"
done
for target in closed:$(free_port) hang:$(cat "$tmp/hang.port") \
              garbage:$(cat "$tmp/garbage.port"); do
    mode=${target%%:*}
    t0=$(now_ms)
    "$DRIVER" --endpoints="http://127.0.0.1:${target#*:}" \
        --connect-timeout=200 --request-timeout=300 --ttl=$TTL stress 2 \
        >"$tmp/stress-$mode.out" 2>"$tmp/stress-$mode.err" \
        || fail "stress against $mode exited $?"
    took=$(( $(now_ms) - t0 ))
    "$PY" - "$mode" "$took" "$tmp/stress-$mode.out" <<'PYEOF' || exit 1
import sys
mode, took = sys.argv[1], int(sys.argv[2])
f = {}
for line in open(sys.argv[3]):
    w = line.split()
    f.update(zip(w[1::2], map(int, w[2::2])) if w[0] == "STRESS"
             else {w[0]: int(w[1])})
bad = []
if f["errors"] == 0 or f["answered"] == 0:
    bad.append("no error answered")
if f["max_gap_ms"] >= 100:
    bad.append("the loop stalled %d ms" % f["max_gap_ms"])
if f["leases_granted"]:
    bad.append("a lease granted")
if mode == "garbage" and f["bad_responses"] == 0:
    bad.append("no bad response counted")
if mode != "garbage" and f["transport_errors"] == 0:
    bad.append("no transport error counted")
if f["DESTROY_MS"] > 500 or took > 4000:
    bad.append("destroy took %d ms, the run %d ms" % (f["DESTROY_MS"], took))
if bad:
    print("FAIL: etcd %s: %s (%s)" % (mode, ", ".join(bad), f))
    sys.exit(1)
print("PASS: etcd %s: %d errors answered, %d transport errors, %d bad "
      "responses, %d loop iterations, the longest %d ms" % (
          mode, f["errors"], f["transport_errors"], f["bad_responses"],
          f["iterations"], f["max_gap_ms"]))
PYEOF
done
