#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Peers that try to stall the TEM through descriptors, connections or
# alert output (docs/operations.md, "Descriptors and connections"), on
# loopback, no root needed; tests/tem-limits.py plays the peers.
#
#   1. Descriptors: a TEM whose limits are 64 (soft) and 128 (hard) raises
#      its soft limit to 128 and keeps 32 (--fd-reserve); for 4 s, 150
#      idle TCP connections to its hosts' port, each opened again within
#      250 ms of its closing, are refused at accept or closed after
#      --handshake-timeout=1s, while tem-ctl status answers within 100 ms
#      every 200 ms and the TEM uses little CPU; a real host (tpm-replay
#      h1, CURVE) connects once they are gone; no abort.
#   2. Metrics server: 16 connections from 127.0.0.2 that trickle their
#      headers and never end them, and 2 from 127.0.0.3: at most 4 per
#      address are kept (--metrics-per-ip), those kept are shut down at
#      their deadline (--metrics-timeout=2s), and scrapes from 127.0.0.1
#      succeed within 1 s throughout.
#   3. Alert output: the TEM's standard output is a fifo nobody reads,
#      and a subscriber connects to the alerts socket (a queue of 512
#      alerts, --peer-memory / 16384) and reads nothing for 3 s, while a host raises 3000
#      alerts, then 100 more once the subscriber has read what it could:
#      tem-ctl status answers within 100 ms throughout, every alert is
#      raised, the alerts dropped on standard output are counted
#      (stdout_dropped), and those the subscriber missed too: the TEM's
#      pub_dropped equals raised - delivered, and the subscriber sees
#      them as gaps in the alerts' seq numbers.
#
# Every process started here is killed by PID and the work directory
# removed at exit, failure or not.  Automake test protocol: 0 pass,
# 1 fail, 77 skip (python3-zmq missing).
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=tests/tem-lib.sh
. "$top_srcdir/tests/tem-lib.sh"
tem_test_init tem-limits
export PYTHONPATH=$top_srcdir/tests
LIMITS=$top_srcdir/tests/tem-limits.py

K=$tmp/k
tem_keys "$K" h1
KEYS=(--key-file="$K/tem.key" --allow-file="$K/allow")

# ctl_fast WHAT: tem-ctl status must answer within 100 ms; the longest
# answer (tem-ctl's own start included) in max_us.
ctl_fast() {
    local t0 us
    t0=$(date +%s%N)
    ctl --timeout=100ms status >/dev/null 2>&1 \
        || fail "tem-ctl status got no answer within 100 ms ($1)"
    us=$((($(date +%s%N) - t0) / 1000))
    [ "$us" -le "${max_us:-0}" ] || max_us=$us
}

# ctl_fast_while PID WHAT: ctl_fast every 200 ms while process PID runs;
# sets n to the number of answers, max_us to the longest.
ctl_fast_while() {
    n=0 max_us=0
    while kill -0 "$1" 2>/dev/null; do
        kill -0 "$tem_pid" 2>/dev/null || fail "the TEM died ($2)"
        ctl_fast "$2"
        n=$((n + 1))
        sleep 0.2
    done
}

# cpu_ticks: user + system clock ticks of the TEM so far.
cpu_ticks() {
    awk '{print $14 + $15}' "/proc/$tem_pid/stat"
}

# --- 1. Descriptors ------------------------------------------------------
REAL_TEM=$TEM
TEM=$tmp/tem-limited
cat >"$TEM" <<EOF
#!/bin/bash
ulimit -Sn 64 && ulimit -Hn 128 && exec "$REAL_TEM" "\$@"
EOF
chmod +x "$TEM"
tem_start "${KEYS[@]}" --listen=tcp://127.0.0.1:0 --pub=tcp://127.0.0.1:0 \
    --state-file="$tmp/events.json" --no-alerts-stdout --heartbeat=200ms \
    --fd-reserve=32 --handshake-timeout=1s
TEM=$REAL_TEM
limits=$(status '"%d %d %d" % (s["descriptors"]["limit_at_start"], s["descriptors"]["limit"], s["descriptors"]["reserve"])')
[ "$limits" = "64 128 32" ] \
    || fail "descriptor limit at start, now, reserve: $limits, expected 64 128 32"
grep -q "soft limit raised from 64 to 128" "$tmp/tem.log" \
    || fail "the raised limit is not logged"
listen=$(status 's["endpoints"]["listen"]')

"$PY" "$LIMITS" idle "${listen#tcp://}" 150 4 >"$tmp/idle.out" &
idle_pid=$!
pids+=($idle_pid)
ticks0=$(cpu_ticks)
t0=$(date +%s%N)
ctl_fast_while $idle_pid "150 idle TCP connections"
cpu=$(( ($(cpu_ticks) - ticks0) * 1000000000 / $(getconf CLK_TCK) * 100
        / ($(date +%s%N) - t0) ))
wait $idle_pid
read -r _ opened _ closed <"$tmp/idle.out"
[ "$closed" -ge 150 ] \
    || fail "idle connections: $(cat "$tmp/idle.out"), expected 150 closed"
[ "$cpu" -lt 30 ] || fail "the TEM used $cpu% CPU under the idle connections"
refused=$(status 's["descriptors"]["refused_reserve"]')
[ "$refused" -ge 1 ] || fail "no connection refused at the reserve"

"$PY" "$top_srcdir/tests/tem-trace.py" --out "$tmp/h.pcap" --epochs 10 \
    --per-epoch 1 --size 100 --src 10.99.1.1 >/dev/null
"$REPLAY" --controller "$listen" --host-id h1 --tem-key "$K/tem.key.pub" \
    --host-key-file "$K/h1.key" --prefix 10.99.0.0/24 --require-controller \
    --linger 60s "$tmp/h.pcap" >"$tmp/h1.out" 2>"$tmp/h1.err" &
pids+=($!)
wait_for 'status "s[\"hosts_connected\"]"' 1 "h1 connected" 15
kill -0 "$tem_pid" || fail "the TEM died"
echo "PASS: descriptors 64/128 raised to 128, 32 kept: 150 idle TCP" \
     "connections ($(cat "$tmp/idle.out"), $refused refused at the" \
     "reserve); tem-ctl answered within 100 ms $n times (longest" \
     "$((max_us / 1000)).$((max_us % 1000 / 100)) ms); TEM CPU $cpu%;" \
     "h1 connected after"
tem_stop

# --- 2. Metrics server ---------------------------------------------------
tem_start "${KEYS[@]}" --listen="ipc://$tmp/tem" --pub="ipc://$tmp/pub" \
    --state-file="$tmp/events.json" --no-alerts-stdout \
    --metrics=127.0.0.1:0 --metrics-timeout=2s
maddr=$(status 's["endpoints"]["metrics"]')
"$PY" "$LIMITS" trickle "$maddr" 16 5 --src 127.0.0.2 >"$tmp/trickle2.out" &
t2=$!
pids+=($t2)
"$PY" "$LIMITS" trickle "$maddr" 2 5 --src 127.0.0.3 >"$tmp/trickle3.out" &
t3=$!
pids+=($t3)
sleep 0.5
n=0
while kill -0 $t2 2>/dev/null || kill -0 $t3 2>/dev/null; do
    "$PY" "$LIMITS" scrape "http://$maddr/metrics" 1 >"$tmp/scrape.out" \
        || fail "scrape with slow clients: $(cat "$tmp/scrape.out")"
    n=$((n + 1))
    sleep 0.3
done
wait $t2 $t3
read -r _ opened2 _ closed2 _ _ <"$tmp/trickle2.out"
read -r _ opened3 _ closed3 _ first3 <"$tmp/trickle3.out"
[ "$opened2" = 16 ] && [ "$closed2" = 16 ] \
    || fail "127.0.0.2: $(cat "$tmp/trickle2.out"), expected 16 closed"
[ "$opened3" = 2 ] && [ "$closed3" = 2 ] \
    || fail "127.0.0.3: $(cat "$tmp/trickle3.out"), expected 2 closed"
case $first3 in
    1.[5-9]|2.*|3.*) ;;
    *) fail "127.0.0.3's trickling connections closed after $first3 s, expected 2 s" ;;
esac
timeouts=$(status 's["metrics"]["timeouts"]')
[ "$timeouts" -ge 6 ] || fail "$timeouts connections timed out, expected 6"
echo "PASS: metrics: $n scrapes within 1 s while 16 (127.0.0.2) and 2" \
     "(127.0.0.3) connections trickled headers: $(cat "$tmp/trickle2.out");" \
     "$(cat "$tmp/trickle3.out"); $timeouts shut down at their deadline"
tem_stop

# --- 3. Alert output -----------------------------------------------------
# A fifo that a process holds open and never reads (killed first at
# exit: the TEM then writes to no reader).
mkfifo "$tmp/fifo"
sleep 120 <>"$tmp/fifo" &
pids+=($!)
tem_start --insecure-plaintext --listen="ipc://$tmp/tem" \
    --pub="ipc://$tmp/pub" --state-file="$tmp/events3.json" \
    --alert-buffer=65536 >"$tmp/fifo"
ctl event-add flood "filter=udp,nw_dst=10.99.0.0/24 interval=10ms" \
    group=nw_dst 'predicate=sum(volume) > 1' across=sum >/dev/null
"$PY" "$LIMITS" sub "ipc://$tmp/pub" 3 1 >"$tmp/sub.out" &
sub_pid=$!
pids+=($sub_pid)
wait_for "head -n 1 $tmp/sub.out" ready "subscriber ready"
"$PY" "$LIMITS" host "ipc://$tmp/tem" 3000 100 >"$tmp/host.out" &
host_pid=$!
pids+=($host_pid)
n=0
while ! grep -q drained "$tmp/sub.out"; do
    kill -0 $sub_pid || fail "the subscriber exited: $(cat "$tmp/sub.out")"
    ctl_fast "alerts to a full pipe and a slow subscriber"
    n=$((n + 1))
    sleep 0.2
done
kill -USR1 $host_pid
n0=$n
ctl_fast_while $sub_pid "alerts to a full pipe and a slow subscriber"
n=$((n + n0))
wait $sub_pid
read -r _ delivered _ gaps < <(tail -n 1 "$tmp/sub.out")
out=$(status '"%d %d %d %d %d" % (s["counters"]["alerts"], s["alert_output"]["stdout_lines"], s["alert_output"]["stdout_dropped"], s["alert_output"]["pub_sent"], s["alert_output"]["pub_dropped"])')
read -r raised lines dropped pub_sent pub_dropped <<<"$out"
[ "$raised" = 3100 ] || fail "$raised alerts raised, expected 3100"
[ "$dropped" -ge 1 ] && [ "$lines" -lt "$raised" ] \
    || fail "stdout: $lines written, $dropped dropped of $raised"
[ "$pub_dropped" -ge 1 ] \
    && [ "$pub_dropped" = $((raised - delivered)) ] \
    && [ "$pub_sent" = "$delivered" ] \
    || fail "alerts socket: $pub_sent sent, $pub_dropped dropped; the" \
            "subscriber got $delivered of $raised"
[ "$gaps" = "$pub_dropped" ] \
    || fail "the subscriber's seq gaps: $gaps, $pub_dropped dropped"
kill -0 "$tem_pid" || fail "the TEM died"
echo "PASS: alert output: $raised alerts with standard output blocked" \
     "($lines written, $dropped dropped) and a slow subscriber ($delivered" \
     "delivered, $pub_dropped dropped = raised - delivered, $gaps in seq" \
     "gaps); tem-ctl answered within 100 ms $n times (longest" \
     "$((max_us / 1000)).$((max_us % 1000 / 100)) ms)"
tem_stop
