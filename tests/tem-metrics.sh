#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The TEM's metrics (--metrics, docs/tem.md "Metrics") scraped by a real
# Prometheus (Debian's package), and read back through Prometheus's HTTP
# API, against the TEM's own counters (tem-ctl --json status, hosts) and
# the alerts it wrote:
#
#   1. --metrics: a bad address is refused (exit 2, nothing started), an
#      address in use stops the TEM at start with a message (exit 1).
#   2. A scrape by hand: every line of the text is Prometheus exposition
#      format (HELP and TYPE before the samples, names, labels, values).
#   3. Prometheus on loopback (free port, its storage in the work
#      directory) scrapes the TEM every second while two tpm-replay hosts
#      raise 10 alerts of net_sum (as in tests/tem-replay.sh) and 40 idle
#      HTTP connections hold the metrics server at its connection limit:
#      the TEM goes on (10 alerts, tem-ctl answers).
#   4. Prometheus's values: alerts, satisfactions, polls, replies,
#      decisions, hosts gone, per-event and per-host counters equal the
#      TEM's own; the detection latency histogram counts the 10 alerts and
#      its sum is the sum of their latency_us; up is 1.
#
# Every process started here is killed by PID and the work directory
# removed at exit, failure or not.  Automake test protocol: 0 pass,
# 1 fail, 77 skip (no prometheus, no python3-zmq).
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
PROMETHEUS=${PROMETHEUS:-$(command -v prometheus || true)}
if [ -z "$PROMETHEUS" ]; then
    echo "SKIP: no prometheus (apt-get install prometheus) to scrape the TEM"
    exit 77
fi
# shellcheck source=tests/tem-lib.sh
. "$top_srcdir/tests/tem-lib.sh"
tem_test_init tem-metrics

ctl() {
    "$CTL" --ctl="ipc://$tmp/ctl" "$@"
}

# (Not "keys": tpm-replay takes a --tem-key path of exactly 40 Z85
# characters for a key, and "$tmp/keys/tem.key.pub" has 40 here.)
K=$tmp/k
tem_keys "$K" h1 h2
KEYS=(--key-file="$K/tem.key" --allow-file="$K/allow")
COMMON=(--listen="ipc://$tmp/tem" --pub="ipc://$tmp/pub"
        --state-file="$tmp/events.json" --alert-file="$tmp/alerts.json"
        --no-alerts-stdout --heartbeat=200ms --poll-deadline=1s)

# free_port: a TCP port free on 127.0.0.1 now.
free_port() {
    "$PY" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# --- 1. Bad addresses ----------------------------------------------------
for bad in 127.0.0.1:99999 localhost:9464 '[::1' 1.2.3:80 ''; do
    rc=0
    "$TEM" "${KEYS[@]}" "${COMMON[@]}" --ctl="ipc://$tmp/ctl" \
        --metrics="$bad" >/dev/null 2>"$tmp/err" || rc=$?
    [ $rc = 2 ] || fail "--metrics='$bad': exit $rc, expected 2"
    grep -qF -- "--metrics: '$bad' is not" "$tmp/err" \
        || fail "--metrics='$bad': message '$(cat "$tmp/err")'"
done
[ ! -e "$tmp/events.json" ] || fail "a bad --metrics wrote the state file"
# An address in use: taken by a listening Python socket.
"$PY" -c 'import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print(s.getsockname()[1], flush=True)
time.sleep(30)' >"$tmp/busy" &
busy_pid=$!
pids+=($busy_pid)
for ((i = 0; i < 50; i++)); do
    [ -s "$tmp/busy" ] && break
    sleep 0.1
done
rc=0
"$TEM" "${KEYS[@]}" "${COMMON[@]}" --ctl="ipc://$tmp/ctl" \
    --metrics="127.0.0.1:$(cat "$tmp/busy")" >/dev/null 2>"$tmp/err" || rc=$?
[ $rc = 1 ] || fail "--metrics on a port in use: exit $rc, expected 1"
grep -q 'refusing to start: --metrics: cannot serve' "$tmp/err" \
    || fail "--metrics on a port in use: message '$(cat "$tmp/err")'"
kill "$busy_pid"
wait "$busy_pid" 2>/dev/null || true
echo "PASS: bad --metrics addresses refused (exit 2), a port in use" \
     "stops the TEM at start (exit 1)"

# --- 2. A scrape by hand ---------------------------------------------------
tem_start "${KEYS[@]}" "${COMMON[@]}" --metrics=127.0.0.1:0
maddr=$(ctl --json status | "$PY" -c \
    'import json, sys; print(json.load(sys.stdin)["endpoints"]["metrics"])')
case $maddr in
    127.0.0.1:[1-9]*) ;;
    *) fail "status endpoints.metrics is '$maddr'" ;;
esac
"$PY" - "http://$maddr/metrics" <<'PYEOF' || exit 1
import re, sys, urllib.request
r = urllib.request.urlopen(sys.argv[1], timeout=5)
ctype = r.headers["Content-Type"]
if not ctype.startswith("text/plain; version=0.0.4"):
    print("FAIL: Content-Type %s" % ctype)
    sys.exit(1)
text = r.read().decode()
name = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
value = r"(-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?|[-+]Inf|NaN)"
sample = re.compile(r"^(%s)(\{[a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\]|\\[\\\"n])*\""
                    r"(,[a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\]|\\[\\\"n])*\")*\})?"
                    r" %s$" % (name, value))
help_ = re.compile(r"^# HELP (%s) .+$" % name)
type_ = re.compile(r"^# TYPE (%s) (counter|gauge|histogram)$" % name)
types, n = {}, 0
for line in text.rstrip("\n").split("\n"):
    m = help_.match(line) or type_.match(line)
    if m:
        if line.startswith("# TYPE"):
            types[m.group(1)] = m.group(2)
        continue
    m = sample.match(line)
    if not m:
        print("FAIL: not Prometheus text: %r" % line)
        sys.exit(1)
    fam = re.sub(r"_(bucket|sum|count)$", "", m.group(1))
    if m.group(1) not in types and types.get(fam) != "histogram":
        print("FAIL: sample without TYPE: %r" % line)
        sys.exit(1)
    n += 1
bad = [f for f, t in types.items() if not f.startswith("trumpet_tem_")
       or (t == "counter") != f.endswith("_total")]
if bad:
    print("FAIL: names against the conventions: %s" % bad)
    sys.exit(1)
print("PASS: a scrape: %d families, %d samples, every line Prometheus "
      "text" % (len(types), n))
PYEOF

# --- 3. Prometheus scraping while hosts raise alerts ----------------------
pport=$(free_port)
mkdir -p "$tmp/prom"
cat >"$tmp/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: trumpet-tem
    static_configs:
      - targets: ['$maddr']
YML
"$PROMETHEUS" --config.file="$tmp/prometheus.yml" \
    --storage.tsdb.path="$tmp/prom" --web.listen-address="127.0.0.1:$pport" \
    >"$tmp/prom.log" 2>&1 &
pids+=($!)
prom_pid=$!

ctl event-add net_sum "filter=udp,nw_dst=10.99.0.2 interval=100ms" \
    group=nw_dst 'predicate=sum(volume) > 120KB' across=sum >/dev/null
"$PY" "$top_srcdir/tests/tem-trace.py" --out "$tmp/h1.pcap" --epochs 100 \
    --per-epoch 8 --size 1000 --src 10.99.1.1 --flows 2 >/dev/null
"$PY" "$top_srcdir/tests/tem-trace.py" --out "$tmp/h2.pcap" --epochs 100 \
    --per-epoch 5 --size 1000 --src 10.99.2.1 >/dev/null

# 40 idle connections to the metrics server while the hosts run.
"$PY" - "$maddr" >"$tmp/idle.out" 2>&1 <<'PYEOF' &
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
socks = []
for i in range(40):
    s = socket.socket()
    s.settimeout(0.5)
    try:
        s.connect((host, int(port)))
        s.send(b"GET /metrics HTTP/1.1\r\n")
    except OSError:
        pass
    socks.append(s)
print("open", flush=True)
time.sleep(4)
PYEOF
idle_pid=$!
pids+=($idle_pid)

start=$(( ($(date +%s%N) / 100000000 + 15) * 100000000 ))
hpids=()
for h in h1 h2; do
    "$REPLAY" --controller "ipc://$tmp/tem" --host-id $h \
        --tem-key "$K/tem.key.pub" --host-key-file "$K/$h.key" \
        --prefix 10.99.0.0/24 --realtime --start-at $start \
        --require-controller "$tmp/$h.pcap" \
        >"$tmp/$h.out" 2>"$tmp/$h.err" &
    pids+=($!)
    hpids+=($!)
done
for p in "${hpids[@]}"; do
    wait "$p" || fail "a tpm-replay host failed: $(cat "$tmp"/h?.err)"
done
ctl --timeout=1s status >/dev/null \
    || fail "tem-ctl got no answer with the metrics server full"
n=$(wc -l <"$tmp/alerts.json")
[ "$n" = 10 ] || fail "$n alerts with the metrics server full, expected 10"
wait "$idle_pid" 2>/dev/null || true
echo "PASS: 10 alerts and tem-ctl answers with 40 idle connections on" \
     "the metrics server"

# --- 4. Prometheus's values against the TEM's --------------------------
kill -0 "$prom_pid" 2>/dev/null \
    || fail "prometheus exited: $(tail -n 5 "$tmp/prom.log")"
ctl --json status >"$tmp/status.json"
ctl --json hosts >"$tmp/hosts.json"
"$PY" - "127.0.0.1:$pport" "$tmp/status.json" "$tmp/hosts.json" \
    "$tmp/alerts.json" <<'PYEOF' || exit 1
import json, sys, time, urllib.parse, urllib.request
prom, status, hosts, alerts = sys.argv[1:]
c = json.load(open(status))["counters"]
h = {x["host"]: x for x in json.load(open(hosts))["hosts"]}
al = [json.loads(l) for l in open(alerts)]
lat = sum(a["latency_us"] for a in al) / 1e6

def query(q):
    url = "http://%s/api/v1/query?%s" % (prom, urllib.parse.urlencode(
        {"query": q}))
    r = json.load(urllib.request.urlopen(url, timeout=5))
    if r["status"] != "success":
        raise RuntimeError("query %s: %s" % (q, r))
    res = r["data"]["result"]
    return float(res[0]["value"][1]) if len(res) == 1 else None

want = {
    'up{job="trumpet-tem"}': 1,
    "trumpet_tem_alerts_total": c["alerts"],
    'trumpet_tem_event_alerts_total{event="net_sum"}': 10,
    "trumpet_tem_satisfactions_total": c["satisfactions"],
    "trumpet_tem_polls_sent_total": c["polls_sent"],
    "trumpet_tem_poll_replies_total": c["poll_replies"],
    "trumpet_tem_decisions_total": c["decisions"],
    "trumpet_tem_poll_timeouts_total": c["missing_parts"],
    "trumpet_tem_invalid_frames_total": c["invalid_frames"],
    "trumpet_tem_frames_received_total": c["frames_in"],
    "trumpet_tem_tenant_old_hosts_total": c["tenant_old_hosts"],
    "trumpet_tem_satisfactions_tenants_full_total": c["sat_tenants_full"],
    'trumpet_tem_hosts{state="gone"}': 2,
    'trumpet_tem_hosts{state="connected"}': 0,
    "trumpet_tem_events": 1,
    "trumpet_tem_detection_latency_seconds_count": len(al),
    'trumpet_tem_detection_latency_seconds_bucket{le="+Inf"}': len(al),
}
for host in ("h1", "h2"):
    want['trumpet_tem_host_satisfactions_total{host="%s"}' % host] = \
        h[host]["satisfactions"]
    want['trumpet_tem_host_poll_replies_total{host="%s"}' % host] = \
        h[host]["poll_replies"]
    want['trumpet_tem_host_connected{host="%s"}' % host] = 0
if c["alerts"] != 10:
    print("FAIL: the TEM counts %d alerts, expected 10" % c["alerts"])
    sys.exit(1)
# Until Prometheus has scraped the TEM since the hosts finished.
deadline = time.time() + 20
while True:
    got, bad = {}, []
    try:
        for q, v in want.items():
            got[q] = query(q)
            if got[q] != v:
                bad.append("%s = %s, TEM %s" % (q, got[q], v))
        s = query("trumpet_tem_detection_latency_seconds_sum")
        if s is None or abs(s - lat) > 1e-3:
            bad.append("latency sum %s, alerts' latency_us %s" % (s, lat))
    except OSError as e:
        bad.append("prometheus: %s" % e)
    if not bad:
        break
    if time.time() > deadline:
        print("FAIL: Prometheus against the TEM:\n  " + "\n  ".join(bad))
        sys.exit(1)
    time.sleep(0.5)
# The hosts' own monitor counters, from their heartbeats (sent once a
# second: the last may predate the last packets).  h1's trace holds 800
# frames of 1042 bytes, h2's 500.
mon = {}
for host, frames in (("h1", 800), ("h2", 500)):
    n = query('trumpet_tem_host_monitor_packets_total{host="%s"}' % host)
    b = query('trumpet_tem_host_monitor_bytes_total{host="%s"}' % host)
    if n is None or not 0 < n <= frames or b is None or b < n * 1000:
        print("FAIL: %s's monitor counters from its heartbeats: packets "
              "%s, bytes %s (trace: %d frames)" % (host, n, b, frames))
        sys.exit(1)
    mon[host] = n
print("PASS: the hosts' monitor counters through their heartbeats: "
      "packets h1 %d of 800, h2 %d of 500" % (mon["h1"], mon["h2"]))
print("PASS: Prometheus's values equal the TEM's: %d alerts, %d "
      "satisfactions, %d polls, %d replies, %d decisions, hosts, latency "
      "histogram (%d, sum %.3f s)" % (c["alerts"], c["satisfactions"],
                                      c["polls_sent"], c["poll_replies"],
                                      c["decisions"], len(al), lat))
PYEOF
tem_stop
