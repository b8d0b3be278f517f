#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A cluster of three TEMs on etcd (trumpet-tem --etcd, tem/tem-cluster.h,
# docs/tem.md "Past one TEM"), with two tpm-replay hosts connected to
# every TEM (--controller three times), against a real etcd
# (Debian's etcd-server) on loopback, lease TTL 2 s:
#
#   1. Membership and placement: t1, t2, t3 register and elect one
#      leader; six events added through different TEMs get ids 1..6 from
#      /trumpet/next-id and are spread by rendezvous hashing: each owned
#      by exactly one TEM, every one owned, every TEM owning one at
#      least, /trumpet/assign/ (read with etcdctl) saying the same; a
#      name taken is refused; an event deleted through one TEM leaves
#      every TEM.
#   2. Takeover: h1 (80 KB per 100 ms interval) and h2 (50 KB) replay 13
#      s of traffic whose volume per interval is known exactly
#      (tests/tem-trace.py).  2.5 s in, the TEM that owns the most events
#      (not the leader) is killed -9; 4 s later the leader is.  Each
#      time the dead TEM's events move to a live one within TTL + 1 s
#      (measured from the kill to the new owner's install, printed), the
#      new owner installs them on both hosts, and alerts resume.
#   4. etcd killed -9 for 3 s (past the lease's TTL) and started again:
#      the last TEM answers tem-ctl throughout (each status under 1 s),
#      keeps its events, loses its lease, registers again on a new one,
#      leads again, and its views are read and watched again.
#   3. Exactness: for every event, every interval in which a live TEM
#      owned it (from 100 ms after its install to 250 ms before its
#      death) has exactly one alert, from that TEM, equal to the ground
#      truth (sum: 130000 = h1 80000 + h2 50000; max: 80000; atleast:2:
#      2 hosts; the event above the total: none), or, for one in twenty
#      at most, decided at --poll-deadline without a host that did not
#      answer in time (a loaded machine), naming it missing and exact
#      for the host that answered; no interval is
#      alerted twice; an alert outside those intervals (a partial
#      interval around an install) is flagged incomplete or exact.  The
#      last leader counts the takeover and the events it moved.
#      The hosts keep the events taken over (the same definition), with
#      their history (--history 40: 4 s, more than TTL + 1 s), and hand
#      over to the new owner what they had sent the dead TEM and it never
#      confirmed: every interval of each takeover window (from 250 ms
#      before the kill to 100 ms after the new owner's install) is
#      alerted (80% at least: a late decision waits --poll-deadline, 1 s
#      here, for the other host, which a loaded machine may still miss:
#      at 200 ms a whole takeover's polls of one host went unanswered
#      once while the test suite ran), by the dead TEM
#      before it died or late by the new owner, every late alert exact;
#      handed_over = handed_resent + handed_dropped on each host.
#      Alertmanager: every TEM is given the same --alertmanager, a real
#      Prometheus Alertmanager (Debian's prometheus-alertmanager) on
#      loopback: it holds exactly one alert per alerting event although
#      two or three TEMs raised it, with the annotations of the newest
#      alert (the last owner's: its value exact, its epoch, its TEM id)
#      and startsAt of the first one; c_quiet has none.  (Without
#      Alertmanager installed this check alone is skipped.)
#
# The TEM without --etcd is covered by every other TEM test.  Every
# process started here is killed by PID at exit, failure or not.
# (Member keys and the hosts' keys in etcd: tests/tem-cluster-keys.sh.)
# Automake test protocol: 0 pass, 1 fail, 77 skip (no etcd, etcdctl or
# python3-zmq).
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=tests/tem-lib.sh
. "$top_srcdir/tests/tem-lib.sh"
ETCD=${ETCD:-$(command -v etcd || true)}
ETCDCTL=${ETCDCTL:-$(command -v etcdctl || true)}
if [ -z "$ETCD" ] || [ -z "$ETCDCTL" ]; then
    echo "SKIP: no etcd or etcdctl (apt-get install etcd-server etcd-client)"
    exit 77
fi
tem_test_init tem-cluster
TTL=2
ALERTMANAGER=${ALERTMANAGER:-/usr/bin/prometheus-alertmanager}
# libcurl would send loopback requests through a proxy of the environment.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY

# On failure, the end of every log first.
cluster_cleanup() {
    local rc=$? f
    if [ $rc != 0 ]; then
        for f in "$tmp"/t?.log "$tmp"/h?.err "$tmp/etcd.log" "$tmp/am.log"; do
            [ -f "$f" ] || continue
            echo "--- $f:"
            tail -n 20 "$f"
        done
    fi
    set +e
    (exit $rc)
    tem_test_cleanup
}
trap cluster_cleanup EXIT

cport=$(free_port)
pport=$(free_port)
EP=http://127.0.0.1:$cport

etcdctl() {
    ETCDCTL_API=3 "$ETCDCTL" --endpoints="127.0.0.1:$cport" \
        --dial-timeout=1s --command-timeout=3s "$@"
}

# etcd_start: etcd on the work directory's data directory, until healthy.
etcd_start() {
    "$ETCD" --name tem-cluster-test --data-dir "$tmp/etcd" \
        --listen-client-urls "$EP" --advertise-client-urls "$EP" \
        --listen-peer-urls "http://127.0.0.1:$pport" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
        --initial-cluster "tem-cluster-test=http://127.0.0.1:$pport" \
        >>"$tmp/etcd.log" 2>&1 &
    etcd_pid=$!
    pids+=($!)
    local i
    for ((i = 0; i < 100; i++)); do
        etcdctl endpoint health >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    fail "etcd not healthy after 10 s"
}
etcd_start

# Alertmanager on loopback, one for every TEM (as tests/tem-alertmanager.sh
# starts it), if installed.
AMOPT=()
if [ -x "$ALERTMANAGER" ]; then
    amport=$(free_port)
    AMURL=http://127.0.0.1:$amport
    printf 'route:\n  receiver: "null"\nreceivers:\n  - name: "null"\n' \
        >"$tmp/am.yml"
    "$ALERTMANAGER" --config.file="$tmp/am.yml" \
        --storage.path="$tmp/am-data" \
        --web.listen-address="127.0.0.1:$amport" \
        --cluster.listen-address= >>"$tmp/am.log" 2>&1 &
    pids+=($!)
    for ((i = 0; i < 100; i++)); do
        "$PY" -c "import urllib.request
urllib.request.urlopen('$AMURL/-/ready', timeout=1)" 2>/dev/null && break
        sleep 0.1
    done
    AMOPT=(--alertmanager="$AMURL" --alertmanager-backoff=300ms)
fi

K=$tmp/keys
tem_keys "$K" h1 h2

# The three TEMs share a key pair and an allow-list.
declare -A tpid
start_member() {
    "$TEM" --key-file="$K/tem.key" --allow-file="$K/allow" \
        --etcd="$EP" --etcd-ttl=${TTL}s --tem-id="$1" \
        --listen="ipc://$tmp/$1" --pub="ipc://$tmp/$1.pub" \
        --ctl="ipc://$tmp/$1.ctl" --state-file="$tmp/$1.json" \
        --alert-file="$tmp/$1.alerts" --no-alerts-stdout \
        --heartbeat=200ms --poll-deadline=1s ${AMOPT[@]+"${AMOPT[@]}"} \
        2>>"$tmp/$1.log" &
    tpid[$1]=$!
    pids+=($!)
}

# --- 1. Membership and placement -----------------------------------------
start_member t1
until_ok 10 '[ "$(cstat t1 "c[\"is_leader\"]")" = True ]' \
    || fail "t1 alone did not become the leader"
start_member t2
start_member t3
for t in t1 t2 t3; do
    until_ok 10 '[ "$(cstat $t "len(c[\"members\"])")" = 3 ]' \
        || fail "$t does not see 3 members: $(cstat $t 'c')"
done
[ "$(etcdctl get --print-value-only /trumpet/leader)" = t1 ] \
    || fail "leader in etcd: $(etcdctl get --print-value-only /trumpet/leader)"

f="filter=udp,nw_dst=10.99.0.2 interval=100ms group=nw_dst"
i=0
while read -r name def; do
    t=t$(( i % 3 + 1 ))
    out=$(cctl $t event-add "$name" "$f $def") \
        || fail "event-add $name through $t: $out"
    i=$((i + 1))
    [ "$out" = "event $name added (id $i)" ] || fail "event-add: '$out'"
done <<'EOF'
c_sum predicate=sum(volume) > 120KB across=sum
c_sum2 predicate=sum(volume) > 100KB across=sum
c_max predicate=sum(volume) > 70KB across=max
c_max2 predicate=sum(volume) > 45KB across=max
c_both predicate=sum(volume) > 40KB across=atleast:2
c_quiet predicate=sum(volume) > 140KB across=sum
EOF
rc=0
cctl t2 event-add c_sum "$f predicate=sum(volume) > 1KB" \
    >/dev/null 2>"$tmp/err" || rc=$?
[ $rc = 1 ] && grep -q 'already exists' "$tmp/err" \
    || fail "a name taken: status $rc, '$(cat "$tmp/err")'"
rc=0
cctl t2 event-add c_bad "$f predicate=sum(volume) >" \
    >/dev/null 2>"$tmp/err" || rc=$?
[ $rc = 1 ] && grep -q 'predicate' "$tmp/err" \
    || fail "a bad definition: status $rc, '$(cat "$tmp/err")'"

# owned: "t1=[...] t2=[...] t3=[...]" as each TEM says.
owned() {
    local t
    for t in t1 t2 t3; do
        echo -n "$t=$(cstat $t 'sorted(c["events_owned"])') "
    done
}
placed() {
    "$PY" - "$(owned)" "$(etcdctl get --prefix /trumpet/assign/)" <<'PYEOF'
import re, sys
owned = {}
for t, ids in re.findall(r"(t\d)=\[([^]]*)\]", sys.argv[1]):
    for i in ids.split(","):
        if i.strip():
            owned.setdefault(int(i), []).append(t)
lines = sys.argv[2].split()
assign = {int(k.rsplit("/", 1)[1]): v for k, v in zip(lines[::2], lines[1::2])}
ok = (sorted(owned) == list(range(1, 7))
      and all(len(v) == 1 for v in owned.values())
      and assign == {i: v[0] for i, v in owned.items()})
sys.exit(0 if ok else 1)
PYEOF
}
until_ok 10 placed || fail "events not placed: $(owned); etcd: \
$(etcdctl get --prefix /trumpet/assign/ | tr '\n' ' ')"
for t in t1 t2 t3; do
    [ "$(cstat $t 'len(c["events_owned"])')" -ge 1 ] \
        || fail "$t owns no event: $(owned)"
    n=$(cctl $t --json event-list | "$PY" -c \
        'import json,sys; print(len(json.load(sys.stdin)["events"]))')
    [ "$n" = "$(cstat $t 'len(c["events_owned"])')" ] \
        || fail "$t lists $n events, owns $(cstat $t 'c["events_owned"]')"
done
echo "PASS: 3 members, leader t1; 6 events spread: $(owned)"

cctl t3 event-add c_tmp "$f predicate=sum(volume) > 1KB" >/dev/null
until_ok 5 '[ -n "$(etcdctl get --print-value-only /trumpet/assign/7)" ]' \
    || fail "c_tmp not assigned"
cctl t1 event-del c_tmp >/dev/null
gone() {
    for t in t1 t2 t3; do
        [ "$(cstat $t '7 in c["events_owned"]')" = False ] || return 1
    done
    [ -z "$(etcdctl get /trumpet/assign/7)" ]
}
until_ok 5 gone || fail "c_tmp (id 7) still owned after event-del: $(owned)"
echo "PASS: a name taken and a bad definition refused; an event deleted" \
     "through t1 left every TEM and its assignment"

# --- 2. Takeover during traffic -------------------------------------------
"$PY" "$top_srcdir/tests/tem-trace.py" --out "$tmp/h1.pcap" --epochs 1300 \
    --per-epoch 8 --size 1000 --src 10.99.1.1 >/dev/null
"$PY" "$top_srcdir/tests/tem-trace.py" --out "$tmp/h2.pcap" --epochs 1300 \
    --per-epoch 5 --size 1000 --src 10.99.2.1 >/dev/null
# The most events, not the leader; then the leader.
victim=$(for t in t2 t3; do
             echo "$(cstat $t 'len(c["events_owned"])') $t"
         done | sort -rn | head -n 1 | cut -d' ' -f2)
start=$(( ($(date +%s%N) / 100000000 + 15) * 100000000 ))
hpids=()
for h in h1 h2; do
    "$REPLAY" --controller "ipc://$tmp/t1" --controller "ipc://$tmp/t2" \
        --controller "ipc://$tmp/t3" --host-id $h \
        --tem-key "$K/tem.key.pub" --host-key-file "$K/$h.key" \
        --prefix 10.99.0.0/24 --realtime --start-at $start \
        --require-controller --history 40 --stats "$tmp/$h.pcap" \
        >"$tmp/$h.out" 2>"$tmp/$h.err" &
    pids+=($!)
    hpids+=($!)
done
sleep_until() {
    local ms=$(( ($1 - $(date +%s%N)) / 1000000 ))
    [ $ms -le 0 ] || sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
}
sleep_until $((start + 2500000000))
kill1=$(date +%s%N)
kill -9 "${tpid[$victim]}"
wait "${tpid[$victim]}" 2>/dev/null || true
sleep_until $((kill1 + 4000000000))
kill2=$(date +%s%N)
kill -9 "${tpid[t1]}"
wait "${tpid[t1]}" 2>/dev/null || true
for p in "${hpids[@]}"; do
    rc=0
    wait "$p" || rc=$?
    # 3: reports the dead TEMs never confirmed (expected).
    [ $rc = 0 ] || [ $rc = 3 ] \
        || fail "a tpm-replay host failed ($rc): $(tail -n 5 "$tmp"/h?.err)"
done
last=$(echo t1 t2 t3 | tr ' ' '\n' | grep -v -e t1 -e "$victim")
cctl $last --json status >"$tmp/last.json"

# --- 3. Exactness ----------------------------------------------------------
"$PY" - "$tmp" "$start" "$victim:$kill1" "t1:$kill2" "$last" "$TTL" \
    <<'PYEOF' || exit 1
import calendar, json, re, sys, time
tmp, start = sys.argv[1], int(sys.argv[2])
kills = {}
for a in sys.argv[3:5]:
    t, ns = a.split(":")
    kills[t] = int(ns)
last, ttl = sys.argv[5], int(sys.argv[6])
IV = 100_000_000
END = start + 1300 * 10_000_000
def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)

# Installs: "TIME|tem|INFO|cluster: event NAME (id N) assigned to this
# member: installing it".
pat = re.compile(r"^(\S+)Z\|tem\|INFO\|cluster: event (\S+) \(id \d+\) "
                 r"assigned to this member")
installs = {}                   # name -> [(ns, tem)]
for t in ("t1", "t2", "t3"):
    for line in open("%s/%s.log" % (tmp, t)):
        m = pat.match(line)
        if m:
            sec, ms = m.group(1).split(".")
            ns = (calendar.timegm(time.strptime(sec, "%Y-%m-%dT%H:%M:%S"))
                  * 10**9 + int(ms) * 10**6)
            installs.setdefault(m.group(2), []).append((ns, t))
alerts = {}
for t in ("t1", "t2", "t3"):
    for line in open("%s/%s.alerts" % (tmp, t)):
        a = json.loads(line)
        a["tem"] = t
        alerts.setdefault(a["event"], []).append(a)

truth = {
    "c_sum": (130000, {"h1": 80000, "h2": 50000}, None),
    "c_sum2": (130000, {"h1": 80000, "h2": 50000}, None),
    "c_max": (80000, {"h1": 80000, "h2": 50000}, ["h1"]),
    "c_max2": (80000, {"h1": 80000, "h2": 50000}, ["h1", "h2"]),
    "c_both": (2, None, ["h1", "h2"]),
    "c_quiet": None,
}
def exact(a):
    t = truth[a["event"]]
    return (t is not None and a["value"] == t[0] and not a["missing"]
            and not a["incomplete"] and not a["deadline"]
            and (t[1] is None or a["hosts"] == t[1])
            and (t[2] is None or sorted(a.get("holding", [])) == t[2]))

def check_named(name, a, what):
    """An alert that names missing hosts: each host it names holds its
    ground truth, and its value is that of those hosts."""
    t = truth[name]
    if t[1] is None:
        return
    for h, v in a["hosts"].items():
        if t[1].get(h) != v:
            fail("%s: %s, host %s: %s, truth %s"
                 % (name, what, h, v, t[1].get(h)))
    named = list(a["hosts"].values())
    want = max(named) if name.startswith("c_max") else sum(named)
    if a["value"] != want:
        fail("%s: %s's value %s is not that of its hosts: %s"
             % (name, what, a["value"], json.dumps(a)))

def deadline_flagged(name, a):
    """Decided at --poll-deadline without a host's answer, and says so:
    the host named missing, the others exact."""
    if truth[name] is None or not a["deadline"] or not a["missing"]:
        return False
    check_named(name, a, "alert decided at the deadline")
    return True

late = {"exact": 0, "partial": 0, "window": 0, "window_alerted": 0}
late_epochs = {}                # name -> epochs alerted late
def check_late(name, a):
    late_epochs.setdefault(name, set()).add(a["epoch"])
    t = truth[name]
    if t is None or a["tem"] not in [x[1] for x in sorted(installs[name])[1:]]:
        fail("%s: late alert from a TEM that took nothing over: %s"
             % (name, json.dumps(a)))
    check_named(name, a, "late alert")
    if exact(a):
        late["exact"] += 1
    elif a["missing"]:
        late["partial"] += 1
    else:
        fail("%s: late alert neither exact nor naming missing hosts: %s"
             % (name, json.dumps(a)))

takeover = {}                   # dead TEM -> worst ms to install
n_checked = 0
deadline = []                   # owners' intervals decided at the deadline
for name, t in truth.items():
    ins = sorted(installs.get(name, []))
    if not ins:
        fail("%s: never installed" % name)
    # Ownership segments [install + 100 ms, death - 250 ms or the end),
    # and the takeover windows between them.
    segs = []
    windows = []
    for i, (ns, tem) in enumerate(ins):
        until = kills.get(tem, END + IV)
        if i + 1 < len(ins):
            nxt_ns, nxt = ins[i + 1]
            if tem not in kills or kills[tem] > nxt_ns:
                fail("%s: %s took it from a live %s" % (name, nxt, tem))
            ms = (nxt_ns - kills[tem]) / 1e6
            takeover[tem] = max(takeover.get(tem, 0), ms)
            if t is not None:
                windows.append((kills[tem] - 250_000_000,
                                nxt_ns + 100_000_000))
        segs.append((max(ns + IV, start), until - 250_000_000, tem))
    if ins[-1][1] in kills:
        fail("%s: never taken over from %s" % (name, ins[-1][1]))
    al = alerts.get(name, [])
    seen = {}
    for a in al:
        if a.get("late"):
            # Decided by a new owner from a satisfaction the dead TEM's
            # agent handed over: an interval of the takeover's window,
            # possibly alerted by the dead TEM already (it decided, the
            # host had no confirmation yet).  Exact for the hosts it
            # names; hosts whose history had expired are named missing.
            check_late(name, a)
            continue
        if a["epoch"] in seen:
            fail("%s: interval %d alerted twice (%s, %s)"
                 % (name, a["epoch"], seen[a["epoch"]]["tem"], a["tem"]))
        seen[a["epoch"]] = a
        if (not exact(a) and not a["incomplete"]
                and not deadline_flagged(name, a)):
            fail("%s: alert not exact: %s" % (name, json.dumps(a)))
    for lo, hi, tem in segs:
        first = (lo + IV - 1) // IV
        for iv in range(first, min(hi, END) // IV):
            ep = iv * 10 + 9
            a = seen.get(ep)
            if t is None:
                if a:
                    fail("%s alerted: %s" % (name, json.dumps(a)))
                continue
            if not a:
                fail("%s: no alert for interval %d (owner %s)"
                     % (name, iv, tem))
            if a["tem"] != tem:
                fail("%s: interval %d: %s" % (name, iv, json.dumps(a)))
            if not exact(a):
                if not deadline_flagged(name, a):
                    fail("%s: interval %d: %s" % (name, iv, json.dumps(a)))
                deadline.append("%s:%d" % (name, ep))
            n_checked += 1
    # What the takeover windows kept: the intervals wholly inside one,
    # alerted (by the dead TEM before it died, or late by the new owner
    # from the satisfactions handed over) or not.
    for lo, hi in windows:
        for iv in range((lo + IV - 1) // IV, hi // IV):
            ep = iv * 10 + 9
            late["window"] += 1
            if ep in seen or ep in late_epochs.get(name, ()):
                late["window_alerted"] += 1
            else:
                late.setdefault("missed", []).append("%s:%d" % (name, ep))
# A host that does not answer a poll within --poll-deadline (the suite
# runs two tests at once on two cores) leaves its owner to decide without
# it: the alert names the host missing and is exact for the others.  One
# in twenty of the owners' intervals at most.
if len(deadline) > max(2, n_checked // 20):
    fail("%d of %d owners' intervals decided at the poll deadline: %s"
         % (len(deadline), n_checked, " ".join(deadline)))
for tem, ms in takeover.items():
    if ms > (ttl + 1) * 1000:
        fail("%s's events moved %.0f ms after its kill (TTL %d s + 1 s)"
             % (tem, ms, ttl))
if set(takeover) != set(kills):
    fail("takeovers of %s, kills of %s" % (sorted(takeover), sorted(kills)))
st = json.load(open("%s/last.json" % tmp))["cluster"]
if not st["is_leader"] or st["takeovers"] < 1 or st["events_moved"] < 1:
    fail("%s status: %s" % (last, st))
for h in ("h1", "h2"):
    s = [json.loads(l) for l in open("%s/%s.err" % (tmp, h))
         if l.startswith("{")][-1]
    taken = sum(x["taken_over"] for x in s["tems"])
    kept = sum(x["taken_over_kept"] for x in s["tems"])
    if len(s["tems"]) != 3 or taken < 1 or kept != taken:
        fail("%s: no event taken over, or one not kept: %s" % (h, s["tems"]))
    handed = sum(x["handed_over"] for x in s["tems"])
    resent = sum(x["handed_resent"] for x in s["tems"])
    dropped = sum(x["handed_dropped"] for x in s["tems"])
    if handed != resent + dropped:
        fail("%s: handed over %d, re-sent %d + dropped %d"
             % (h, handed, resent, dropped))
    late.setdefault("handed", 0)
    late["handed"] += resent
# Without the hand-over none of them would be.  A late satisfaction is
# decided against the other host's answer within --poll-deadline; on a
# loaded machine a few are not answered in time and are counted
# undecidable (the TEM logs them), so 80% must be alerted, not all.
if late["window_alerted"] < 0.8 * late["window"]:
    fail("intervals of the takeover windows not alerted: %d of %d (%s)"
         % (late["window"] - late["window_alerted"], late["window"],
            " ".join(late["missed"])))
if not late["handed"] or not late["exact"] or late["partial"]:
    # With --history 40 (4 s of 100 ms intervals, more than TTL + 1 s),
    # every host still has the history of the epochs handed over.
    fail("satisfactions handed over: %s" % late)
print("PASS: takeovers: %s (TTL %d s); %d intervals alerted exactly by "
      "their owner (%d of them at the poll deadline, naming the host "
      "missing), none twice; %s leads: takeovers %d, events moved %d; "
      "%d satisfactions handed over to the new owners, which alerted "
      "%d intervals late and exact; of the %d intervals of the takeover "
      "windows, %d alerted"
      % (", ".join("%s killed -> events reinstalled in %.0f ms" % kv
                   for kv in sorted(takeover.items())), ttl, n_checked,
         len(deadline), last, st["takeovers"], st["events_moved"], late["handed"],
         late["exact"], late["window"], late["window_alerted"]))
PYEOF

# Alertmanager: one alert per event, the newest's annotations.
if [ ${#AMOPT[@]} != 0 ]; then
    am_check() {
        "$PY" - "$tmp" "$AMURL" <<'PYEOF'
import datetime, json, re, sys, urllib.request
tmp, url = sys.argv[1], sys.argv[2]
am = json.loads(urllib.request.urlopen(url + "/api/v2/alerts",
                                       timeout=5).read())
def ms(t):
    d, frac = t.rstrip("Z").split(".")
    dt = datetime.datetime.fromisoformat(d).replace(
        tzinfo=datetime.timezone.utc)
    return int(dt.timestamp()) * 1000 + int(frac[:3].ljust(3, "0"))
lines = {}                      # event -> [(epoch, tem, line)]
for t in ("t1", "t2", "t3"):
    for line in open("%s/%s.alerts" % (tmp, t)):
        a = json.loads(line)
        lines.setdefault(a["event"], []).append((a["epoch"], t, line))
truth = {"c_sum": "130000", "c_sum2": "130000", "c_max": "80000",
         "c_max2": "80000", "c_both": "2"}
by_tems = 0
for ev, want in truth.items():
    mine = sorted(lines[ev])
    by_tems = max(by_tems, len({t for _, t, _ in mine}))
    first, last = json.loads(mine[0][2]), json.loads(mine[-1][2])
    got = [a for a in am if a["labels"].get("event") == ev]
    if len(got) != 1:
        sys.exit("%s: %d alerts in Alertmanager" % (ev, len(got)))
    n = got[0]["annotations"]
    raw = re.search(r'"value":([^,}]+)', mine[-1][2]).group(1)
    if (n.get("value") != want or raw != want
            or n.get("epoch") != str(last["epoch"])
            or n.get("tem") != mine[-1][1]):
        sys.exit("%s: annotations %s, the newest alert (%s) %s"
                 % (ev, n, mine[-1][1], mine[-1][2]))
    start = ((first["epoch"] + 1) * 10_000_000 - first["interval_ns"]) \
        // 1_000_000
    if ms(got[0]["startsAt"]) != start:
        sys.exit("%s: startsAt %s, the first interval started at %d ms"
                 % (ev, got[0]["startsAt"], start))
if len(am) != len(truth) or by_tems < 2:
    sys.exit("%d alerts in Alertmanager, expected %d; at most %d TEMs "
             "raised one event" % (len(am), len(truth), by_tems))
print("PASS: Alertmanager holds %d alerts, one per event (raised by up to "
      "%d TEMs each), with the newest's exact value, epoch and TEM, and "
      "the first's start" % (len(am), by_tems))
PYEOF
    }
    until_ok 10 am_check || { am_check || true; fail "Alertmanager"; }
    am_check
fi

# --- 4. etcd away -----------------------------------------------------------
before=$(cstat $last 'sorted(c["events_owned"])')
kill -9 "$etcd_pid"
wait "$etcd_pid" 2>/dev/null || true
worst=0
end=$(( $(date +%s%N) + 3000000000 ))
while [ "$(date +%s%N)" -lt $end ]; do
    t0=$(date +%s%N)
    cctl $last status >/dev/null || fail "$last did not answer with etcd away"
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    [ $ms -le $worst ] || worst=$ms
    sleep 0.1
done
[ $worst -lt 1000 ] || fail "$last answered status in $worst ms with etcd away"
[ "$(cstat $last 'sorted(c["events_owned"])')" = "$before" ] \
    || fail "$last lost its events with etcd away: $(cstat $last 'c')"
etcd_start
until_ok 20 '[ "$(cstat $last "c[\"registered\"] and c[\"is_leader\"] and c[\"synced\"] and c[\"leases\"] >= 2")" = True ]' \
    || fail "$last after etcd came back: $(cstat $last 'c')"
[ "$(cstat $last 'sorted(c["events_owned"])')" = "$before" ] \
    || fail "$last events after etcd came back: $(cstat $last 'c')"
echo "PASS: etcd killed for 3 s: $last kept its events $before, answered" \
     "status in $worst ms at most, then registered on a new lease" \
     "($(cstat $last 'c["leases_lost"]') lost) and leads again"
