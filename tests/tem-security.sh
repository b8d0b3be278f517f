#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Attacks on the TEM's control plane (docs/operations.md, "Keys"), with two
# real hosts (tpm-replay h1 and h2 over CURVE, on loopback TCP) connected
# all along.  No root needed.
#
#   1. Rogue hosts: a plaintext peer (no key) and a CURVE peer with a key
#      not in the allow-list say Hello as h1 and send a Satisfaction of
#      9.99e12: no answer, refused during the handshake and counted
#      (failed_protocol, zap_refused and failed_auth); h2's key claiming
#      h1: Refuse naming the key's host id, counted (auth_mismatch).  h1
#      and h2 keep their one session each (nothing replaced, nobody
#      gone), no alert.
#   2. Oversized input: six 100 MB frames from a host with a valid key,
#      and a 100 MB control request: each connection is closed unread
#      (ZMQ_MAXMSGSIZE); the TEM's RSS, read from /proc, grows by less
#      than 32 MB; a flood of control requests of the largest size
#      accepted keeps the longest request under 200 ms and the hosts
#      connected.
#   3. Revocation: h2's key removed from the allow-list and reloaded
#      (tem-ctl allow-reload): h2's session ends (revoked) and it cannot
#      come back; restored with SIGHUP, it does.
#   4. One TEM per state file and control socket: a second TEM on the
#      same state file, or the same control socket, refuses to start and
#      leaves the first untouched; a stale temporary file of the state
#      file is removed at start; an event id of 4294967295 in the state
#      file: event-add refuses a new id instead of reusing one.
#
# Automake test protocol: 0 pass, 1 fail, 77 skip (python3-zmq missing).
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=tests/tem-lib.sh
. "$top_srcdir/tests/tem-lib.sh"
tem_test_init tem-security

K=$tmp/keys
tem_keys "$K" h1 h2
"$CTL" keygen "$K/rogue.key" >/dev/null 2>&1
cp "$K/allow" "$tmp/allow"
KEYS=(--key-file="$K/tem.key" --allow-file="$tmp/allow")

# host_sessions: "HOST:STATE:SESSIONS ..." of every host known.
host_sessions() {
    ctl --json hosts | "$PY" -c 'import json,sys
print(" ".join("%s:%s:%d" % (h["host"], h["state"], h["sessions"])
               for h in sorted(json.load(sys.stdin)["hosts"],
                               key=lambda h: h["host"])))'
}

rss_kb() {
    awk '/^VmRSS:/ {print $2}' "/proc/$tem_pid/status"
}

# start_tem: a TEM on the state file $tmp/events.json, kernel-chosen
# loopback ports.
start_tem() {
    tem_start "${KEYS[@]}" --listen=tcp://127.0.0.1:0 \
        --pub=tcp://127.0.0.1:0 --state-file="$tmp/events.json" \
        --alert-file="$tmp/alerts.json" --no-alerts-stdout --heartbeat=200ms
}

start_tem
listen=$(status 's["endpoints"]["listen"]')
ctl event-add net_sum filter=udp,nw_dst=10.99.0.2 interval=100ms \
    group=nw_dst 'predicate=sum(volume) > 120KB' across=sum >/dev/null

# The real hosts: a 1 s capture, then answering the TEM for 120 s (they
# are stopped at the end).
"$PY" "$top_srcdir/tests/tem-trace.py" --out "$tmp/h.pcap" --epochs 10 \
    --per-epoch 1 --size 100 --src 10.99.1.1 >/dev/null
for h in h1 h2; do
    "$REPLAY" --controller "$listen" --host-id $h \
        --tem-key "$K/tem.key.pub" --host-key-file "$K/$h.key" \
        --prefix 10.99.0.0/24 --require-controller --linger 120s \
        "$tmp/h.pcap" >"$tmp/$h.out" 2>"$tmp/$h.err" &
    pids+=($!)
done
wait_for host_sessions "h1:connected:1 h2:connected:1" "hosts"
rss0=$(rss_kb)

# --- 1. Rogue hosts ------------------------------------------------------
wire() {
    "$PY" "$top_srcdir/tests/tem-wire.py" "$listen" "$@"
}
out=$(wire silent --host-id h1) || fail "no key: $out"
out=$(wire silent --host-id h1 --server-key "$K/tem.key.pub" \
      --key-file "$K/rogue.key") || fail "unknown key: $out"
out=$(wire claim --host-id h1 --server-key "$K/tem.key.pub" \
      --key-file "$K/h2.key") || fail "h2 claiming h1: $out"
echo "$out"
# The plaintext peer retries its handshake until it stops: at least one.
# ZeroMQ's monitor reports it, as a protocol error (mechanism mismatch)
# or, when the peer hangs up first, without detail.
wait_for 'status "s[\"security\"][\"hosts_connections\"][\"failed_protocol\"] + s[\"security\"][\"hosts_connections\"][\"failed_other\"] >= 1"' \
    True "handshakes of the plaintext peer refused" 30
refused=$(status '"%d %d" % (s["security"]["zap_refused"], s["security"]["hosts_connections"]["failed_auth"])')
[ "$refused" = "1 1" ] \
    || fail "zap_refused, failed_auth: $refused, expected 1 1"
c=$(status 's["counters"]["auth_mismatch"], s["counters"]["replaced"], s["counters"]["hosts_gone"], s["counters"]["satisfactions"], s["counters"]["alerts"]')
[ "$c" = "1 0 0 0 0" ] \
    || fail "auth_mismatch replaced hosts_gone satisfactions alerts: $c, expected 1 0 0 0 0"
[ "$(host_sessions)" = "h1:connected:1 h2:connected:1" ] \
    || fail "the real hosts were disturbed: $(host_sessions)"
[ ! -s "$tmp/alerts.json" ] || fail "an alert: $(head -n 1 "$tmp/alerts.json")"
echo "PASS: no key, an unknown key, h2's key as h1: refused and counted" \
     "(failed_protocol >= 1, zap_refused 1, auth_mismatch 1); h1 and h2" \
     "undisturbed, no alert"

# --- 2. Oversized input --------------------------------------------------
closed0=$(status 's["security"]["hosts_connections"]["closed"]')
out=$(wire oversized --mb 100 --count 6 --server-key "$K/tem.key.pub" \
      --key-file "$K/h1.key") || fail "oversized: $out"
"$PY" - "ipc://$tmp/ctl" <<'PYEOF' || fail "oversized request"
import sys, time, zmq
s = zmq.Context().socket(zmq.REQ)
s.setsockopt(zmq.LINGER, 2000)
s.connect(sys.argv[1])
s.send(b'{"command":"event-add","name":"' + b"n" * (100 << 20) + b'"}')
if s.poll(2000):
    print("FAIL: the TEM answered a 100 MB request")
    sys.exit(1)
PYEOF
rss1=$(rss_kb)
[ $(( rss1 - rss0 )) -lt 32768 ] \
    || fail "RSS grew from $rss0 kB to $rss1 kB under 600 MB of frames"
closed=$(( $(status 's["security"]["hosts_connections"]["closed"]') - closed0 ))
[ "$closed" -ge 1 ] || fail "no host connection closed by the oversized frames"
[ "$(status 's["security"]["ctl_connections"]["closed"]')" -ge 1 ] \
    || fail "the 100 MB control request's connection was not closed"

# A flood of the largest requests accepted (64 KB: a definition of 8 KB
# padded with spaces in a 64 KB name field is refused, but parsed) from
# 4 clients for 3 s.
"$PY" - "ipc://$tmp/ctl" <<'PYEOF' || fail "request flood"
import json, sys, threading, time, zmq
ctx = zmq.Context()
def client(n):
    s = ctx.socket(zmq.REQ)
    s.connect(sys.argv[1])
    req = json.dumps({"command": "event-add", "name": "x" * 60000,
                      "definition": "filter=udp " * 400}).encode()
    assert len(req) < 65536, len(req)
    end = time.time() + 3
    while time.time() < end:
        s.send(req)
        r = json.loads(s.recv())
        assert not r["ok"] and "not a valid event name" in r["error"], r
        n[0] += 1
    s.close(0)
counts = [[0] for _ in range(4)]
ts = [threading.Thread(target=client, args=(c,)) for c in counts]
[t.start() for t in ts]
[t.join() for t in ts]
print("flood: %d requests of 64 KB answered in 3 s" % sum(c[0] for c in counts))
PYEOF
rss2=$(rss_kb)
loop=$(status '"%d %d" % (s["loop"]["ctl_max_ns"], s["loop"]["turn_max_ns"])')
read -r ctl_max turn_max <<<"$loop"
[ "$ctl_max" -lt 200000000 ] \
    || fail "a control request took $ctl_max ns on the TEM's loop"
[ "$(host_sessions)" = "h1:connected:1 h2:connected:1" ] \
    || fail "the hosts did not stay connected: $(host_sessions)"
echo "PASS: oversized: 6 x 100 MB frames and a 100 MB request closed" \
     "unread, RSS ${rss0} -> ${rss1} -> ${rss2} kB; longest control" \
     "request ${ctl_max} ns, longest loop turn ${turn_max} ns; hosts" \
     "connected"

# --- 3. Revocation -------------------------------------------------------
grep -v '^h2 ' "$K/allow" >"$tmp/allow"
ctl allow-reload >/dev/null
wait_for 'status "s[\"counters\"][\"revoked\"]"' 1 "h2's session revoked"
wait_for host_sessions "h1:connected:1 h2:gone:1" "h2 gone"
sleep 1
[ "$(host_sessions)" = "h1:connected:1 h2:gone:1" ] \
    || fail "h2 came back without a key: $(host_sessions)"
cp "$K/allow" "$tmp/allow"
kill -HUP "$tem_pid"
# A refused handshake ends ZeroMQ's socket for good: the agent opens a new
# one after its Hello timeout (3 s) and backoff maximum (5 s).
wait_for host_sessions "h1:connected:1 h2:connected:2" "h2 back" 20
echo "PASS: h2's key removed and reloaded: session revoked, refused;" \
     "restored (SIGHUP): back"

# --- 4. One TEM per state file -------------------------------------------
rc=0
"$TEM" "${KEYS[@]}" --listen=tcp://127.0.0.1:0 --pub=tcp://127.0.0.1:0 \
    --ctl="ipc://$tmp/ctl2" --state-file="$tmp/events.json" \
    2>"$tmp/second.err" || rc=$?
[ $rc = 1 ] || fail "a second TEM on the same state file: exit $rc"
grep -q "state file $tmp/events.json is in use by another trumpet-tem (pid $tem_pid" \
    "$tmp/second.err" || fail "second TEM: $(cat "$tmp/second.err")"
rc=0
"$TEM" "${KEYS[@]}" --listen=tcp://127.0.0.1:0 --pub=tcp://127.0.0.1:0 \
    --ctl="ipc://$tmp/ctl" --state-file="$tmp/events2.json" \
    2>"$tmp/third.err" || rc=$?
[ $rc = 1 ] || fail "a second TEM on the same control socket: exit $rc"
grep -q "socket ipc://$tmp/ctl is in use" "$tmp/third.err" \
    || fail "second TEM: $(cat "$tmp/third.err")"
[ "$(status 's["events"]')" = 1 ] && [ -S "$tmp/ctl" ] \
    || fail "the first TEM was disturbed"
echo "PASS: a second TEM refuses: $(cat "$tmp/second.err")"

tem_stop
"$PY" - "$tmp/events.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["events"][0]["id"] = 4294967295
json.dump(d, open(sys.argv[1], "w"))
open(sys.argv[1] + ".tmp.999999", "w").write("{half")
PYEOF
start_tem
[ ! -e "$tmp/events.json.tmp.999999" ] || fail "stale temporary file kept"
rc=0
ctl event-add e2 filter=udp 'predicate=sum(volume) > 1' >/dev/null \
    2>"$tmp/add.err" || rc=$?
[ $rc = 1 ] && grep -q "no event id left" "$tmp/add.err" \
    || fail "event-add past id 4294967295: rc $rc: $(cat "$tmp/add.err")"
tem_stop
start_tem       # On its own state file, with id 4294967295.
echo "PASS: stale temporary file removed; event-add past id 4294967295" \
     "refused ($(cat "$tmp/add.err")); the TEM restarts on its state file"
