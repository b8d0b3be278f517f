#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The TEM's alerts delivered to a real Prometheus Alertmanager (Debian's
# prometheus-alertmanager, API v2) on loopback, read back through its
# API (GET /api/v2/alerts) against what the TEM's own alert file says
# (docs/tem.md, "Alertmanager"):
#
#   1. Two tpm-replay hosts (as in tests/tem-replay.sh) raise 10 alerts of
#      net_sum and 10 of net_both: Alertmanager holds exactly two alerts,
#      one per event and group, with exactly the labels alertname, event,
#      group and severity, and the annotations of the newest alert (value
#      and threshold as the TEM printed them, per-host values, epoch,
#      time, the TEM's id); startsAt is the first interval's start, endsAt
#      the last one's plus the resolve time.  The TEM's counters (status
#      and /metrics): 20 queued, 20 sent, nothing failed or dropped.
#   2. Alertmanager stopped, the hosts raise 20 more: they wait in the
#      queue, the failed requests are counted and go on (backoff capped at
#      300 ms), tem-ctl status answers within 100 ms throughout;
#      Alertmanager started again on the same port (an empty one: it keeps
#      alerts in memory) receives all 20: startsAt from the first of them,
#      annotations from the last.
#   3. Alertmanager down, a TEM with a queue of 50 (batch 5) raises 300
#      alerts (tests/tem-limits.py's flood host): exactly 250 dropped, 50
#      delivered once Alertmanager is back, the newest among them; then
#      10 more with Alertmanager down and the TEM stopped: it exits within
#      its --alertmanager-flush and says the 10 were dropped.
#   4. Two TEMs (ids c1 and c2), each with its own host, raise alerts of
#      the same event and groups: Alertmanager holds one alert per group,
#      not two (its deduplication by labels), whichever TEM sent last.
#
# Every process started here (Alertmanager, TEMs, hosts) is killed by PID
# and the work directory removed at exit, failure or not.  Loopback only.
# Automake test protocol: 0 pass, 1 fail, 77 skip (no Alertmanager, no
# python3-zmq).
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
ALERTMANAGER=${ALERTMANAGER:-/usr/bin/prometheus-alertmanager}
if [ ! -x "$ALERTMANAGER" ]; then
    echo "SKIP: no $ALERTMANAGER (apt-get install prometheus-alertmanager)"
    exit 77
fi
# shellcheck source=tests/tem-lib.sh
. "$top_srcdir/tests/tem-lib.sh"
tem_test_init tem-alertmanager
export PYTHONPATH=$top_srcdir/tests
# libcurl would send loopback requests through a proxy of the environment.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY

am_pid=
# At exit: Alertmanager first (its log on failure), then tem-lib.sh's
# cleanup.
am_cleanup() {
    local rc=$?
    if [ -n "$am_pid" ]; then
        kill "$am_pid" 2>/dev/null || true
        wait "$am_pid" 2>/dev/null || true
    fi
    if [ $rc != 0 ] && [ -f "$tmp/am.log" ]; then
        echo "--- Alertmanager log:"
        tail -n 20 "$tmp/am.log"
    fi
    (exit $rc)
    tem_test_cleanup
}
trap am_cleanup EXIT

amport=$("$PY" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
AMURL=http://127.0.0.1:$amport
cat >"$tmp/am.yml" <<'YML'
route:
  receiver: "null"
receivers:
  - name: "null"
YML

# am_start: Alertmanager on 127.0.0.1:$amport, no cluster; returns once
# it is ready.  am_stop: killed by its PID.
am_start() {
    "$ALERTMANAGER" --config.file="$tmp/am.yml" \
        --storage.path="$tmp/am-data" \
        --web.listen-address="127.0.0.1:$amport" \
        --cluster.listen-address= >>"$tmp/am.log" 2>&1 &
    am_pid=$!
    local i
    for ((i = 0; i < 100; i++)); do
        "$PY" -c "import urllib.request
urllib.request.urlopen('$AMURL/-/ready', timeout=1)" 2>/dev/null && return 0
        kill -0 "$am_pid" 2>/dev/null || fail "Alertmanager exited at start"
        sleep 0.1
    done
    fail "Alertmanager is not ready after 10 s"
}

am_stop() {
    kill "$am_pid"
    wait "$am_pid" 2>/dev/null || true
    am_pid=
}

# am_alerts FILE: Alertmanager's alerts (GET /api/v2/alerts) into FILE.
am_alerts() {
    "$PY" -c "import urllib.request
print(urllib.request.urlopen('$AMURL/api/v2/alerts', timeout=5).read().decode())" \
        >"$1"
}

# am_counter KEY [CTL]: the first URL's KEY in "tem-ctl status".
am_counter() {
    "$CTL" --ctl="ipc://$tmp/${2:-ctl}" --json status | "$PY" -c \
        "import json, sys
print(json.load(sys.stdin)['alertmanager']['urls'][0]['$1'])"
}

# ctl_fast WHAT: tem-ctl status must answer within 100 ms.
ctl_fast() {
    ctl --timeout=100ms status >/dev/null 2>&1 \
        || fail "tem-ctl status got no answer within 100 ms ($1)"
}

# replay: h1 (80 KB per 100 ms) and h2 (50 KB) for 10 intervals,
# started together; tem-ctl status within 100 ms every 100 ms meanwhile
# (n: how many times).
replay() {
    local start h p hpids=()
    start=$(( ($(date +%s%N) / 100000000 + 15) * 100000000 ))
    for h in h1 h2; do
        "$REPLAY" --controller "ipc://$tmp/tem" --host-id $h \
            --tem-key "$K/tem.key.pub" --host-key-file "$K/$h.key" \
            --prefix 10.99.0.0/24 --realtime --start-at $start \
            --require-controller "$tmp/$h.pcap" \
            >"$tmp/$h.out" 2>"$tmp/$h.err" &
        pids+=($!)
        hpids+=($!)
    done
    n=0
    while kill -0 "${hpids[0]}" 2>/dev/null \
            || kill -0 "${hpids[1]}" 2>/dev/null; do
        ctl_fast "$1"
        n=$((n + 1))
        sleep 0.1
    done
    for p in "${hpids[@]}"; do
        wait "$p" || fail "a tpm-replay host failed: $(cat "$tmp"/h?.err)"
    done
}

# check_replay ALERTS FIRST: Alertmanager's alerts (file ALERTS) are
# exactly those of net_sum and net_both on nw_dst=10.99.0.2, as the TEM's
# alert file says from its line FIRST on.
check_replay() {
    am_alerts "$tmp/am.json"
    "$PY" - "$tmp/am.json" "$tmp/alerts.json" "$1" <<'PYEOF' || exit 1
import datetime, json, re, sys
am = json.load(open(sys.argv[1]))
lines = open(sys.argv[2]).read().splitlines()[int(sys.argv[3]):]
def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)
def ms(t):
    """Milliseconds of RFC 3339 time 't' (Alertmanager's or ours)."""
    d, frac = t.rstrip("Z").split(".")
    dt = datetime.datetime.fromisoformat(d).replace(
        tzinfo=datetime.timezone.utc)
    return int(dt.timestamp()) * 1000 + int(frac[:3].ljust(3, "0"))
def raw(line, key):
    """The text the TEM wrote for 'key' (a number or null)."""
    return re.search(r'"%s":([^,}]+)' % key, line).group(1)
if len(am) != 2:
    fail("%d alerts in Alertmanager, expected 2: %s" % (len(am), am))
for ev in ("net_sum", "net_both"):
    mine = [l for l in lines if json.loads(l)["event"] == ev]
    if len(mine) != 10:
        fail("%s: %d alerts in the TEM's file, expected 10" % (ev, len(mine)))
    first, last = json.loads(mine[0]), json.loads(mine[-1])
    a = [x for x in am if x["labels"].get("event") == ev]
    if len(a) != 1:
        fail("%s: %d alerts in Alertmanager" % (ev, len(a)))
    a = a[0]
    want = {"alertname": "trumpet", "event": ev, "group": "nw_dst=10.99.0.2",
            "severity": "warning"}
    if a["labels"] != want:
        fail("%s: labels %s, expected %s" % (ev, a["labels"], want))
    n = a["annotations"]
    exp = {"value": raw(mine[-1], "value"),
           "threshold": raw(mine[-1], "threshold"),
           "across": last["across"], "epoch": str(last["epoch"]),
           "time": last["time"], "tem": "tem-a"}
    for k, v in exp.items():
        if n.get(k) != v:
            fail("%s: annotation %s %r, expected %r (%s)" % (ev, k, n.get(k),
                                                              v, n))
    if json.loads(n["hosts"]) != last["hosts"]:
        fail("%s: hosts %s, the TEM's %s" % (ev, n["hosts"], last["hosts"]))
    if "missing" in n:
        fail("%s: hosts missing: %s" % (ev, n["missing"]))
    def start(x):
        return ((x["epoch"] + 1) * 10_000_000 - x["interval_ns"]) // 1_000_000
    if ms(a["startsAt"]) != start(first):
        fail("%s: startsAt %s, the first interval started at %d ms" %
             (ev, a["startsAt"], start(first)))
    if ms(a["endsAt"]) != start(last) + 300_000:
        fail("%s: endsAt %s, expected the last interval's start + 300 s" %
             (ev, a["endsAt"]))
    if a["status"]["state"] != "active":
        fail("%s: state %s" % (ev, a["status"]))
print("PASS: Alertmanager: net_sum (value %s) and net_both (value %s), one "
      "alert each, labels and annotations as the TEM wrote them" %
      tuple(x["annotations"]["value"] for x in
            sorted(am, key=lambda x: x["labels"]["event"], reverse=True)))
PYEOF
}

# --- 1. Alerts delivered --------------------------------------------------
K=$tmp/k
tem_keys "$K" h1 h2
am_start
tem_start --key-file="$K/tem.key" --allow-file="$K/allow" \
    --listen="ipc://$tmp/tem" --pub="ipc://$tmp/pub" \
    --state-file="$tmp/events.json" --alert-file="$tmp/alerts.json" \
    --no-alerts-stdout --heartbeat=200ms --poll-deadline=1s --tem-id=tem-a \
    --metrics=127.0.0.1:0 --alertmanager="$AMURL/" \
    --alertmanager-backoff=300ms
f="filter=udp,nw_dst=10.99.0.2 interval=100ms group=nw_dst"
ctl event-add net_sum "$f" 'predicate=sum(volume) > 120KB' across=sum \
    >/dev/null
ctl event-add net_both "$f" 'predicate=sum(volume) > 40KB' \
    across=atleast:2 >/dev/null
ctl event-add net_quiet "$f" 'predicate=sum(volume) > 140KB' across=sum \
    >/dev/null
"$PY" "$top_srcdir/tests/tem-trace.py" --out "$tmp/h1.pcap" --epochs 100 \
    --per-epoch 8 --size 1000 --src 10.99.1.1 >/dev/null
"$PY" "$top_srcdir/tests/tem-trace.py" --out "$tmp/h2.pcap" --epochs 100 \
    --per-epoch 5 --size 1000 --src 10.99.2.1 >/dev/null
[ "$(status 's["alertmanager"]["urls"][0]["url"]')" = "$AMURL" ] \
    || fail "the URL's trailing slash was kept"
replay "alerts delivered"
[ "$(wc -l <"$tmp/alerts.json")" = 20 ] \
    || fail "$(wc -l <"$tmp/alerts.json") alerts raised, expected 20"
wait_for 'am_counter sent' 20 "alerts sent to Alertmanager"
check_replay 0
out=$(status '" ".join(str(s["alertmanager"]["urls"][0][k]) for k in ("queued", "sent", "failures", "dropped", "rejected", "pending"))')
[ "$out" = "20 20 0 0 0 0" ] \
    || fail "queued sent failures dropped rejected pending: $out"
maddr=$(status 's["endpoints"]["metrics"]')
"$PY" - "http://$maddr/metrics" "$AMURL" <<'PYEOF' || exit 1
import sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()
want = {"queued_total": 20, "sent_total": 20, "failures_total": 0,
        "dropped_total": 0, "rejected_total": 0, "pending": 0}
for k, v in want.items():
    line = 'trumpet_tem_alertmanager_%s{url="%s"} %d' % (k, sys.argv[2], v)
    if line not in text.splitlines():
        print("FAIL: no line '%s' in /metrics" % line)
        sys.exit(1)
PYEOF
echo "PASS: 20 alerts queued and sent, counters in status and /metrics;" \
     "tem-ctl answered within 100 ms $n times"

# --- 2. Alertmanager down, then back -------------------------------------
am_stop
replay "Alertmanager down"
n0=$n
[ "$(wc -l <"$tmp/alerts.json")" = 40 ] \
    || fail "$(wc -l <"$tmp/alerts.json") alerts raised, expected 40"
wait_for 'am_counter pending' 20 "alerts waiting for Alertmanager"
f1=$(am_counter failures)
for ((i = 0; i < 10; i++)); do
    ctl_fast "Alertmanager down"
    n0=$((n0 + 1))
    sleep 0.1
done
f2=$(am_counter failures)
[ "$f1" -ge 1 ] && [ "$f2" -gt "$f1" ] \
    || fail "failed requests $f1, then $f2 1 s later: no retries counted"
[ "$(am_counter sent)" = 20 ] || fail "alerts sent with Alertmanager down"
am_start
wait_for 'am_counter sent' 40 "queued alerts sent once Alertmanager is back"
check_replay 20
out=$(status '" ".join(str(s["alertmanager"]["urls"][0][k]) for k in ("queued", "dropped", "pending"))')
[ "$out" = "40 0 0" ] || fail "queued dropped pending: $out"
grep -q "alertmanager $AMURL: delivering again, after" "$tmp/tem.log" \
    || fail "the recovery is not logged"
echo "PASS: Alertmanager down: 20 alerts queued, $(am_counter failures)" \
     "failed requests retried ($f1, then $f2 a second later), tem-ctl" \
     "answered within 100 ms $n0 times; all 20 delivered when it came back"
tem_stop

# --- 3. The queue's bound -------------------------------------------------
am_stop
tem_start --insecure-plaintext --listen="ipc://$tmp/tem3" \
    --pub="ipc://$tmp/pub3" --state-file="$tmp/events3.json" \
    --alert-file="$tmp/alerts3.json" --no-alerts-stdout \
    --alertmanager="$AMURL" --alertmanager-queue=50 --alertmanager-batch=5 \
    --alertmanager-backoff=200ms --alertmanager-flush=500ms
ctl event-add flood "filter=udp,nw_dst=10.99.0.0/24 interval=10ms" \
    group=nw_dst 'predicate=sum(volume) > 1' across=sum >/dev/null
"$PY" "$top_srcdir/tests/tem-limits.py" host "ipc://$tmp/tem3" 300 10 \
    >"$tmp/flood.out" &
flood_pid=$!
pids+=($flood_pid)
wait_for 'status "s[\"counters\"][\"alerts\"]"' 300 "flood alerts raised"
out=$(status '" ".join(str(s["alertmanager"]["urls"][0][k]) for k in ("queued", "dropped", "pending", "sent"))')
[ "$out" = "300 250 50 0" ] \
    || fail "queue of 50, 300 alerts: queued dropped pending sent $out," \
            "expected 300 250 50 0"
grep -q "alertmanager $AMURL: 50 alerts queued (--alertmanager-queue): the oldest dropped" \
    "$tmp/tem.log" || fail "the drops are not logged"
am_start
wait_for 'am_counter sent' 50 "the 50 queued alerts sent"
am_alerts "$tmp/am.json"
"$PY" - "$tmp/am.json" "$tmp/alerts3.json" <<'PYEOF' || exit 1
import json, sys
am = [a for a in json.load(open(sys.argv[1]))
      if a["labels"]["event"] == "flood"]
last = json.loads(open(sys.argv[2]).read().splitlines()[-1])
group = "nw_dst=" + last["group"]["nw_dst"]
# 50 delivered: the 5 being sent when the queue filled and the 45 newest,
# one alert per group in Alertmanager.
if not 45 <= len(am) <= 50:
    print("FAIL: %d flood alerts in Alertmanager, expected 45 to 50" % len(am))
    sys.exit(1)
newest = [a for a in am if a["labels"]["group"] == group]
if not newest or newest[0]["annotations"]["epoch"] != str(last["epoch"]):
    print("FAIL: the newest alert (%s, epoch %d) is not in Alertmanager: %s"
          % (group, last["epoch"], newest))
    sys.exit(1)
PYEOF
out=$(status '" ".join(str(s["alertmanager"]["urls"][0][k]) for k in ("queued", "dropped", "pending", "sent"))')
[ "$out" = "300 250 0 50" ] \
    || fail "queued dropped pending sent after delivery: $out"
echo "PASS: a queue of 50: 300 alerts with Alertmanager down, 250 dropped" \
     "(oldest first), 50 delivered when it came back, the newest among them"
# 10 more with Alertmanager down, then the TEM stopped: dropped at its
# --alertmanager-flush.
am_stop
kill -USR1 "$flood_pid"
wait_for 'status "s[\"counters\"][\"alerts\"]"' 310 "10 more flood alerts"
wait_for 'am_counter pending' 10 "10 alerts waiting"
t0=$(date +%s%N)
tem_stop
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$ms" -lt 2500 ] || fail "the TEM took $ms ms to stop (--alertmanager-flush=500ms)"
grep -q "alertmanager $AMURL: 10 alerts not delivered within --alertmanager-flush: dropped" \
    "$tmp/tem.log" || fail "the alerts dropped at exit are not logged"
kill "$flood_pid"
wait "$flood_pid" 2>/dev/null || true
echo "PASS: 10 alerts waiting at exit: the TEM stopped in $ms ms" \
     "(--alertmanager-flush=500ms) and logged them dropped"

# --- 4. Two TEMs, one alert per group ------------------------------------
am_start
tem_start --insecure-plaintext --listen="ipc://$tmp/tem4a" \
    --pub="ipc://$tmp/pub4a" --state-file="$tmp/events4a.json" \
    --no-alerts-stdout --tem-id=c1 --alertmanager="$AMURL"
"$TEM" --insecure-plaintext --listen="ipc://$tmp/tem4b" \
    --pub="ipc://$tmp/pub4b" --state-file="$tmp/events4b.json" \
    --ctl="ipc://$tmp/ctl4b" --no-alerts-stdout --tem-id=c2 \
    --alertmanager="$AMURL" 2>>"$tmp/tem.log" &
pids+=($!)
tem2_pid=$!
wait_for '"$CTL" --ctl="ipc://$tmp/ctl4b" --timeout=100ms status >/dev/null && echo up' \
    up "the second TEM answering"
for c in ctl ctl4b; do
    "$CTL" --ctl="ipc://$tmp/$c" event-add dup \
        "filter=udp,nw_dst=10.99.0.0/24 interval=10ms" group=nw_dst \
        'predicate=sum(volume) > 1' across=sum >/dev/null
done
for t in tem4a tem4b; do
    "$PY" "$top_srcdir/tests/tem-limits.py" host "ipc://$tmp/$t" 20 0 \
        >/dev/null &
    pids+=($!)
done
wait_for 'am_counter sent' 20 "the first TEM's 20 alerts sent"
wait_for 'am_counter sent ctl4b' 20 "the second TEM's 20 alerts sent"
am_alerts "$tmp/am.json"
"$PY" - "$tmp/am.json" <<'PYEOF' || exit 1
import json, sys
am = [a for a in json.load(open(sys.argv[1]))
      if a["labels"]["event"] == "dup"]
groups = sorted(a["labels"]["group"] for a in am)
want = sorted("nw_dst=10.99.0.%d" % i for i in range(20))
if groups != want:
    print("FAIL: dup alerts in Alertmanager: %s, expected one per group %s"
          % (groups, want))
    sys.exit(1)
tems = {a["annotations"]["tem"] for a in am}
if not tems <= {"c1", "c2"}:
    print("FAIL: tem annotations %s" % tems)
    sys.exit(1)
print("PASS: two TEMs sent 20 alerts each of the same groups: 20 alerts in "
      "Alertmanager (last sent by %s)" % ", ".join(sorted(tems)))
PYEOF
kill "$tem2_pid"
wait "$tem2_pid" || fail "the second TEM exited with status $? on SIGTERM"
tem_stop
