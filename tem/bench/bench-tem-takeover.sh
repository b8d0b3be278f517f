#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# bench-tem-takeover.sh: how long a TEM cluster on etcd takes to move a
# killed member's events, and what the hosts lose meanwhile
# (docs/benchmarks.md, section 5, "TEM cluster: takeover"; docs/tem.md,
# "Past one TEM").
#
# usage: tem/bench/bench-tem-takeover.sh [--build=DIR] [--ttl="3 2"]
#            [--kills=20] [--hosts=2] [--events=16] [--settle=4]
#            [--results=FILE] [--keep]
#
#   --build=DIR    build directory (build)
#   --ttl="3 2"    lease TTLs to measure, seconds (--etcd-ttl)
#   --kills=K      kills per TTL (20)
#   --hosts=N      tpm-replay hosts, each connected to every TEM (2)
#   --events=E     events, each satisfied by every host in every 10 ms
#                  epoch (16)
#   --settle=S     seconds of each kill's cycle after the TTL (4): the
#                  cycle is TTL + S seconds, kill at its start
#   --results=FILE also write one JSON line per kill to FILE
#   --keep         keep the temporary directory (logs)
#
# For each TTL: a real etcd (Debian's etcd-server) on loopback with a
# fresh data directory, three TEMs with --etcd and that --etcd-ttl (t1
# and t2 active, t3 --standby; one key pair and allow-list), E events
# added through t1 and spread by the leader over t1 and t2 (the standby
# gets a lost member's events: it stands in for it), and N tpm-replay hosts
# (--controller three times) replaying in real time a constant-rate UDP
# trace (tests/tem-trace.py) that puts every host over its share of every
# event in every epoch.  Then K cycles of TTL + S seconds: the active
# member whose turn it is (t1, t2, t1, ...) is killed -9 at the cycle's
# start; its takeover time is from the kill to the last of its events'
# installs by the new owner, read from the owner's log line "cluster:
# event NAME (id N) assigned to this member" (as tests/tem-cluster.sh
# measures it; millisecond timestamps); it is started again (same id) as
# soon as its events have moved, and the events it hashes to move back to
# it.  Printed per TTL: the takeover time's median, p90 and max (and
# apart, the kills of the leader: its successor must be elected first).
#
# What the takeover loses, counted by the hosts (tpm-replay --stats, each
# host's links to t1 and t2): the reports (satisfactions, and poll
# replies) sent to a TEM that never confirmed them before it died.  The
# agent keeps them for that TEM's session and sends them again, flagged
# late, to the restarted member ('late_sent'), which no longer decides
# those epochs; none reaches the new owner.  Printed: their sum
# ('late_sent' + 'unconfirmed' + 'dropped_outage'), per kill, against the
# hosts' reports per second.
#
# Every process started here is stopped by its PID at exit, failure or
# not.  Needs etcd and etcdctl (apt-get install etcd-server etcd-client)
# and python3.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
build=build
ttls="3 2"
kills=20
nhosts=2
nevents=16
settle=4
results=
keep=no

for arg; do
    case $arg in
    --build=*) build=${arg#*=} ;;
    --ttl=*) ttls=${arg#*=} ;;
    --kills=*) kills=${arg#*=} ;;
    --hosts=*) nhosts=${arg#*=} ;;
    --events=*) nevents=${arg#*=} ;;
    --settle=*) settle=${arg#*=} ;;
    --results=*) results=${arg#*=} ;;
    --keep) keep=yes ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
               exit 0 ;;
    *) echo "bench-tem-takeover: unexpected argument '$arg' (try --help)" >&2
       exit 2 ;;
    esac
done
case $build in /*) ;; *) build=$top/$build ;; esac
ETCD=${ETCD:-$(command -v etcd || true)}
ETCDCTL=${ETCDCTL:-$(command -v etcdctl || true)}
if [ -z "$ETCD" ] || [ -z "$ETCDCTL" ]; then
    echo "bench-tem-takeover: needs etcd and etcdctl" \
         "(apt-get install etcd-server etcd-client)" >&2
    exit 1
fi

. "$top/tem/bench/bench-lib.sh"
bench_setup "$build" tem/trumpet-tem tem/tem-ctl tpm/tpm-replay
# At exit: every process of $pids killed -9 (a TEM given SIGTERM would
# give its lease back to an etcd that may be gone) and reaped.
takeover_cleanup() {
    local rc=$? p
    for p in $pids; do
        kill -9 "$p" 2>/dev/null || true
    done
    for p in $pids; do
        wait "$p" 2>/dev/null || true
    done
    if [ $keep = yes ]; then
        echo "bench-tem-takeover: kept $tmp" >&2
    else
        rm -rf "$tmp"
    fi
    exit $rc
}
trap takeover_cleanup EXIT
CTL=$bin/tem-ctl
# shellcheck source=tests/tem-keys.sh
. "$top/tests/tem-keys.sh"
etcd_pid=
out=$tmp/kills.json
: >"$out"
echo "bench-tem-takeover: $(nproc) CPUs, load" \
     "$(cut -d' ' -f1-3 /proc/loadavg)"

free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# stop PID: SIGKILL to one of our processes, and reap it.
stop() {
    kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    pids=$(echo "$pids" | tr ' ' '\n' | grep -vx "$1" | tr '\n' ' ')
}

cctl() {
    local t=$1
    shift
    "$CTL" --ctl="ipc://$run/$t.ctl" --timeout=2s "$@"
}

# cstat TEM EXPR: a value of TEM's status "cluster" (Python on 'c').
cstat() {
    cctl "$1" --json status 2>/dev/null | python3 -c \
        "import json,sys; c=json.load(sys.stdin)['cluster']; print($2)"
}

# until_ok SECONDS SHELL-CODE
until_ok() {
    local end=$(( $(date +%s%N) + $1 * 1000000000 ))
    while ! eval "$2" >/dev/null 2>&1; do
        [ "$(date +%s%N)" -lt $end ] || return 1
        sleep 0.05
    done
}

declare -A tpid
# start_member ID [--standby]
start_member() {
    local t=$1
    shift
    "$bin/trumpet-tem" --key-file="$K/tem.key" --allow-file="$K/allow" \
        --etcd="$EP" --etcd-ttl="${ttl}s" --tem-id="$t" \
        --listen="ipc://$run/$t" --pub="ipc://$run/$t.pub" \
        --ctl="ipc://$run/$t.ctl" --state-file="$run/$t.json" \
        --no-alerts-stdout --heartbeat=200ms "$@" 2>>"$run/$t.log" &
    tpid[$t]=$!
    pids="$pids $!"
}

# installs_after TEM-LIST MS IDS: prints the latest first install time
# (ms since the epoch) after MS of each of IDS (comma-separated) by any
# of TEM-LIST, or nothing if one of them is not installed yet.
installs_after() {
    python3 - "$run" "$1" "$2" "$3" <<'EOF'
import calendar, re, sys, time
run, tems, after, ids = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), \
    {int(i) for i in sys.argv[4].split(",") if i}
pat = re.compile(r"^(\S+)Z\|tem\|INFO\|cluster: event \S+ \(id (\d+)\) "
                 r"assigned to this member")
first = {}
for t in tems:
    for line in open("%s/%s.log" % (run, t)):
        m = pat.match(line)
        if not m or int(m.group(2)) not in ids:
            continue
        sec, ms = m.group(1).split(".")
        t_ms = (calendar.timegm(time.strptime(sec, "%Y-%m-%dT%H:%M:%S"))
                * 1000 + int(ms))
        i = int(m.group(2))
        if t_ms >= after and (i not in first or t_ms < first[i]):
            first[i] = t_ms
if set(first) == ids:
    print(max(first.values()))
EOF
}

for ttl in $ttls; do
    run=$tmp/ttl$ttl
    mkdir -p "$run"
    K=$run/keys
    hids=
    for ((i = 1; i <= nhosts; i++)); do
        hids="$hids h$i"
    done
    # shellcheck disable=SC2086
    tem_keys "$K" $hids

    cport=$(free_port)
    pport=$(free_port)
    EP=http://127.0.0.1:$cport
    "$ETCD" --name bench --data-dir "$run/etcd" \
        --listen-client-urls "$EP" --advertise-client-urls "$EP" \
        --listen-peer-urls "http://127.0.0.1:$pport" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
        --initial-cluster "bench=http://127.0.0.1:$pport" \
        >>"$run/etcd.log" 2>&1 &
    etcd_pid=$!
    pids="$pids $etcd_pid"
    until_ok 10 'ETCDCTL_API=3 "$ETCDCTL" --endpoints=127.0.0.1:$cport \
        --dial-timeout=1s endpoint health' \
        || { echo "bench-tem-takeover: etcd not healthy" >&2; exit 1; }

    start_member t1
    until_ok 10 '[ "$(cstat t1 "c[\"is_leader\"]")" = True ]' \
        || { echo "bench-tem-takeover: t1 not leader" >&2; exit 1; }
    start_member t2
    start_member t3 --standby
    for t in t1 t2 t3; do
        until_ok 10 '[ "$(cstat $t "len(c[\"members\"])")" = 3 ]' \
            || { echo "bench-tem-takeover: $t sees no 3 members" >&2
                 exit 1; }
    done
    f="filter=udp,nw_dst=10.99.0.2 interval=10ms group=nw_dst"
    for ((i = 0; i < nevents; i++)); do
        cctl t1 event-add "k$i" \
            "$f predicate=sum(volume) > $((nhosts * 1000)) across=sum" \
            >/dev/null
    done
    spread='[ $(( $(cstat t1 "len(c[\"events_owned\"])") + $(cstat t2 "len(c[\"events_owned\"])") )) = '$nevents' ] && [ "$(cstat t3 "len(c[\"events_owned\"])")" = 0 ]'
    until_ok 10 "$spread" \
        || { echo "bench-tem-takeover: events not spread" >&2; exit 1; }

    # The hosts replay a 10 s trace (4 packets of 1000 bytes per 10 ms
    # epoch: 4000 bytes, over the share of every event) as many times as
    # the cycles need.
    cycle=$((ttl + settle))
    total=$((3 + kills * cycle + 2))
    loops=$(( (total + 9) / 10 ))
    start=$(( ($(date +%s%N) / 100000000 + 20) * 100000000 ))
    hpids=
    for h in $hids; do
        n=${h#h}
        python3 "$top/tests/tem-trace.py" --out "$run/$h.pcap" \
            --epochs 1000 --per-epoch 4 --size 1000 \
            --src "10.99.$n.1" >/dev/null
        "$bin/tpm-replay" --controller "ipc://$run/t1" \
            --controller "ipc://$run/t2" --controller "ipc://$run/t3" \
            --host-id "$h" --tem-key "$K/tem.key.pub" \
            --host-key-file "$K/$h.key" --prefix 10.99.0.0/24 --realtime \
            --start-at "$start" --loop "$loops" \
            --stats "$run/$h.pcap" >"$run/$h.out" 2>"$run/$h.err" &
        hpids="$hpids $!"
        pids="$pids $!"
    done
    echo "bench-tem-takeover: TTL $ttl s: $kills kills, a cycle of" \
         "$cycle s, $nhosts hosts, $nevents events" >&2

    t0=$((start + 3000000000))
    for ((k = 0; k < kills; k++)); do
        v=t$((k % 2 + 1))
        o=t$(((k + 1) % 2 + 1))
        cyc=$((t0 + k * cycle * 1000000000))
        now=$(date +%s%N)
        if [ "$now" -lt "$cyc" ]; then
            ms=$(( (cyc - now) / 1000000 ))
            sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
        fi
        ids=$(cstat $v '",".join(str(i) for i in c["events_owned"])')
        leader=$(cstat $v 'c["is_leader"]')
        kill_ns=$(date +%s%N)
        stop "${tpid[$v]}"
        kill_ms=$((kill_ns / 1000000))
        done_ms=
        if [ -n "$ids" ]; then
            end=$((kill_ns + (ttl + 10) * 1000000000))
            while [ "$(date +%s%N)" -lt $end ]; do
                done_ms=$(installs_after "$o t3" $kill_ms "$ids")
                [ -z "$done_ms" ] || break
                sleep 0.05
            done
        fi
        ms=null
        [ -z "$done_ms" ] || ms=$((done_ms - kill_ms))
        echo "{\"ttl\":$ttl,\"kill\":$((k + 1)),\"victim\":\"$v\"," \
             "\"leader\":$( [ "$leader" = True ] && echo true || echo false)," \
             "\"events\":$(echo "$ids" | tr ',' '\n' | grep -c .)," \
             "\"takeover_ms\":$ms}" | tr -d ' ' >>"$out"
        echo "bench-tem-takeover: TTL $ttl s, kill $((k + 1)): $v" \
             "(leader $leader, events $ids) -> moved in $ms ms" >&2
        start_member "$v"
        until_ok $((ttl + settle)) \
            '[ "$(cstat $v "len(c[\"events_owned\"]) > 0")" = True ]' \
            || echo "bench-tem-takeover: $v owns nothing again" >&2
    done
    for p in $hpids; do
        rc=0
        wait "$p" || rc=$?
        # 3: reports the dead TEMs never confirmed (expected).
        [ $rc = 0 ] || [ $rc = 3 ] \
            || echo "bench-tem-takeover: a host exited with $rc" >&2
    done
    python3 - "$run" "$ttl" $hids >>"$run/hosts.json" <<'EOF'
import json, sys
run, ttl, hosts = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
lost = reports = late = unconf = drop = taken = 0
for h in hosts:
    s = [json.loads(l) for l in open("%s/%s.err" % (run, h))
         if l.startswith("{")][-1]
    for i, t in enumerate(s["tems"]):
        reports += t["agent_reports"]
        taken += t["taken_over"]
        if i < 2:
            late += t["late_sent"]
            unconf += t["unconfirmed"]
            drop += t["dropped_outage"]
print(json.dumps({"ttl": ttl, "reports": reports, "late_sent": late,
                  "unconfirmed": unconf, "dropped_outage": drop,
                  "taken_over": taken}))
EOF
    cat "$run/hosts.json" >>"$out"
    for t in t1 t2 t3; do
        stop "${tpid[$t]}"
    done
    stop "$etcd_pid"
done

[ -z "$results" ] || cp "$out" "$results"

python3 - "$out" "$kills" "$settle" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
kills, settle = int(sys.argv[2]), int(sys.argv[3])
def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]
print("\nTakeover: kill -9 of a member -> its last event installed by the "
      "new owner (ms)")
print("%4s %6s %7s %7s %7s %7s   %s" % ("TTL", "kills", "median", "p90",
                                     "max", "failed", "leader killed: "
                                     "median / max (n)"))
for ttl in sorted({r["ttl"] for r in rows}, reverse=True):
    ks = [r for r in rows if r["ttl"] == ttl and "kill" in r]
    ms = [r["takeover_ms"] for r in ks if r["takeover_ms"] is not None]
    ld = [r["takeover_ms"] for r in ks
          if r["leader"] and r["takeover_ms"] is not None]
    print("%3ds %6d %7d %7d %7d %7d   %s" % (
        ttl, len(ks), statistics.median(ms), pct(ms, 90), max(ms),
        len(ks) - len(ms),
        "%d / %d (%d)" % (statistics.median(ld), max(ld), len(ld))
        if ld else "-"))
print("\nLost to the takeover, counted by the hosts (reports sent to a TEM "
      "that died before confirming them)")
print("%4s %10s %10s %10s %10s %12s" % ("TTL", "reports", "per s",
                                        "lost", "per kill", "late/unconf/drop"))
for h in (r for r in rows if "reports" in r):
    ks = [r for r in rows if r["ttl"] == h["ttl"] and "kill" in r]
    secs = 3 + len(ks) * (h["ttl"] + settle)
    lost = h["late_sent"] + h["unconfirmed"] + h["dropped_outage"]
    print("%3ds %10d %10.0f %10d %10.0f %5d/%d/%d" % (
        h["ttl"], h["reports"], h["reports"] / secs, lost,
        lost / max(1, len(ks)), h["late_sent"], h["unconfirmed"],
        h["dropped_outage"]))
EOF
