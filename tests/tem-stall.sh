#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The TEM stopped for 3 s (SIGSTOP, then SIGCONT) while a host's answer,
# sent in time, waits in its socket (docs/tem.md, "The loop and its
# clock").  Two fake hosts (h1, h2: CURVE keys, protocol version 1,
# encoded and decoded by hand with tests/pbwire.py) heartbeat every 100
# ms against a TEM with 200 ms heartbeats (a host silent for 600 ms is
# gone) and a poll deadline of 1 s.  An event sum(volume) > 100 over both; h1
# reports 70; as soon as h2 gets the TEM's Poll, the TEM is stopped, and
# h2 sends 2000 heartbeats (more than the TEM reads in a turn, --batch
# 256) and then its answer, 50, in time; both hosts go on heartbeating
# into the stopped TEM for 3 s.  After SIGCONT:
#
#   - tem-ctl --timeout=100ms status answers;
#   - no host was dropped (hosts_gone 0, one session each, both
#     connected);
#   - the event was decided exactly: one alert, value 120 with both
#     hosts, nothing missing, not at the deadline (decided_complete 1,
#     decided_deadline 0, missing_parts 0);
#   - the overrun was counted (overruns >= 1, overrun_max_ns >= 2.5 s)
#     and logged.
#
# A TEM that runs its timers before reading what is queued decides
# without h2's answer, which waits behind the heartbeats: no alert.
#
# Automake test protocol: 0 pass, 1 fail, 77 skip (python3-zmq missing).
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=tests/tem-lib.sh
. "$top_srcdir/tests/tem-lib.sh"
tem_test_init tem-stall

# A stopped TEM ignores SIGTERM until continued: continue it first, then
# clean up with the test's exit status in $?.
stall_cleanup() {
    local rc=$?
    set +e
    [ -z "$tem_pid" ] || kill -CONT "$tem_pid" 2>/dev/null
    (exit $rc)
    tem_test_cleanup
}
trap stall_cleanup EXIT

K=$tmp/keys
tem_keys "$K" h1 h2

tem_start --key-file="$K/tem.key" --allow-file="$K/allow" \
    --listen=tcp://127.0.0.1:0 --pub=tcp://127.0.0.1:0 \
    --state-file="$tmp/events.json" --alert-file="$tmp/alerts.json" \
    --no-alerts-stdout --heartbeat=200ms --poll-deadline=1s
listen=$(status 's["endpoints"]["listen"]')
ctl event-add stall 'filter=ip predicate=sum(volume) > 100 group=nw_dst' \
    >/dev/null

"$PY" - "$listen" "$K" "$tem_pid" "$CTL" "ipc://$tmp/ctl" \
    "$top_srcdir/tests" <<'PYEOF' || fail "the stall (above)"
import json
import os
import signal
import struct
import subprocess
import sys
import time

import zmq

listen, keys, tem_pid, ctl, ctl_ep, tests = sys.argv[1:7]
tem_pid = int(tem_pid)
sys.path.insert(0, tests)
from pbwire import (field_bytes, field_varint, frame, parse,  # noqa: E402
                    varint)

EPOCH_NS = 10_000_000
HB_S = 0.1                      # The hosts' heartbeat period.
STOP_S = 3.0
FLOOD = 2000                    # h2's heartbeats before its answer.
ADDR = bytes([10, 99, 0, 2])


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def key(path, name):
    for line in open(path):
        k, _, v = line.partition("=")
        if k.strip() == name:
            return v.strip().strip('"').encode()
    fail("no %s in %s" % (name, path))


def double(num, v):
    return varint(num << 3 | 1) + struct.pack("<d", v)


def group_key():
    return (field_varint(1, 4) + field_bytes(2, ADDR) + field_bytes(3, ADDR)
            + field_varint(4, 1) + field_varint(5, 2) + field_varint(6, 17))


class Host:
    """A host of protocol version 1 on a CURVE DEALER socket."""

    def __init__(self, ctx, name):
        self.name, self.seq = name, 0
        self.polls, self.installs = [], []
        self.welcomed = self.bye = False
        s = self.sock = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.SNDHWM, 100000)
        s.curve_serverkey = key(keys + "/tem.key.pub", "public-key")
        s.curve_publickey = key("%s/%s.key" % (keys, name), "public-key")
        s.curve_secretkey = key("%s/%s.key" % (keys, name), "secret-key")
        s.connect(listen)
        prefix = (field_varint(1, 4) + field_bytes(2, bytes([10, 99, 0, 0]))
                  + field_varint(3, 24))
        hello = (field_varint(1, 1) + field_varint(2, 1)
                 + field_bytes(3, name) + field_bytes(4, prefix)
                 + field_varint(5, EPOCH_NS) + field_varint(6, time.time_ns()))
        self.send(field_bytes(1, hello))

    def send(self, *messages):
        self.sock.send(frame(1, *messages), zmq.DONTWAIT)

    def heartbeat(self):
        self.seq += 1
        self.send(field_bytes(11, field_varint(1, time.time_ns())
                              + field_varint(2, self.seq)))

    def read(self):
        """Takes in every frame the TEM sent: Welcome, Install (acked),
        Poll, Bye."""
        while self.sock.poll(0):
            for m in parse(self.sock.recv()).get(2, []):
                (num, vals), = parse(m).items()
                f = parse(vals[0])
                if num == 2:
                    self.welcomed = True
                elif num == 4:          # Install: Ack it.
                    self.installs.append(f)
                    self.send(field_bytes(6, field_varint(1, f[1][0])
                                          + field_varint(2, f[2][0])))
                elif num == 9:
                    self.polls.append(f)
                elif num == 12:
                    self.bye = True


def run(hosts, seconds, until=None):
    """Heartbeats every HB_S and reads, for 'seconds' or until 'until()'."""
    end = time.monotonic() + seconds
    next_hb = 0
    while time.monotonic() < end:
        if time.monotonic() >= next_hb:
            for h in hosts:
                h.heartbeat()
            next_hb = time.monotonic() + HB_S
        for h in hosts:
            h.read()
        if until and until():
            return True
        time.sleep(0.002)
    return False


def status():
    out = subprocess.run([ctl, "--ctl=" + ctl_ep, "--json", "status"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


ctx = zmq.Context()
h1, h2 = Host(ctx, "h1"), Host(ctx, "h2")
hosts = [h1, h2]
if not run(hosts, 10, lambda: all(h.welcomed and h.installs for h in hosts)):
    fail("no Welcome and Install for both hosts within 10 s")
run(hosts, 0.5)
event_id = h1.installs[0][2][0]

# h1 reports 70 for the current epoch; as soon as h2 is polled, the TEM
# stops, and h2 sends FLOOD heartbeats, then answers 50, well within the
# poll deadline (1 s).
epoch = time.time_ns() // EPOCH_NS
sat = (field_varint(1, event_id) + field_varint(2, epoch)
       + field_bytes(3, group_key()) + double(4, 70.0))
t_sat = time.monotonic()
h1.send(field_bytes(8, sat))
if not run(hosts, 5, lambda: h2.polls):
    fail("h2 was not polled within 5 s")
os.kill(tem_pid, signal.SIGSTOP)
try:
    poll = h2.polls[0]
    for _ in range(FLOOD):
        h2.heartbeat()
    h2.send(field_bytes(10, field_varint(1, poll[1][0])
                        + field_varint(2, poll[2][0])
                        + field_varint(3, poll[3][0])
                        + field_varint(4, 0) + double(5, 50.0)))
    in_time = time.monotonic() - t_sat
    if in_time > 0.5:
        fail("the machine is too slow: h2 answered %.3f s after h1's "
             "report (the deadline is 1 s)" % in_time)
    print("h2 answered %.3f s after h1's report, behind %d heartbeats; "
          "the TEM is stopped" % (in_time, FLOOD))
    run(hosts, STOP_S)
finally:
    os.kill(tem_pid, signal.SIGCONT)
t_cont = time.monotonic()
r = subprocess.run([ctl, "--ctl=" + ctl_ep, "--timeout=100ms", "status"],
                   capture_output=True, text=True)
answered = time.monotonic() - t_cont
if r.returncode:
    fail("tem-ctl --timeout=100ms status after SIGCONT: exit %d: %s"
         % (r.returncode, r.stderr.strip()))
print("tem-ctl status answered %.3f s after SIGCONT (tem-ctl's own start "
      "included)" % answered)

# The hosts go on heartbeating while the TEM catches up and decides.
s = None
def decided():
    global s
    s = status()
    return s["counters"]["decisions"] and not s["decisions_pending"]
run(hosts, 3, decided)
run(hosts, 0.5)
s = status()
c = s["counters"]
got = {k: c.get(k, 0) for k in ("hosts_gone", "sessions", "replaced",
                                "decided_complete", "decided_deadline",
                                "missing_parts", "alerts", "overruns",
                                "overrun_max_ns")}
print("counters: " + " ".join("%s=%d" % kv for kv in got.items()))
if any(h.bye for h in hosts):
    fail("the TEM said Bye to a host")
if (got["hosts_gone"], got["sessions"], got["replaced"],
        s["hosts_connected"]) != (0, 2, 0, 2):
    fail("hosts dropped: hosts_gone %d, sessions %d, replaced %d, "
         "connected %d (expected 0 2 0 2)"
         % (got["hosts_gone"], got["sessions"], got["replaced"],
            s["hosts_connected"]))
if (got["decided_complete"], got["decided_deadline"], got["missing_parts"],
        got["alerts"]) != (1, 0, 0, 1):
    fail("the event was not decided with h2's answer: decided_complete "
         "%d, decided_deadline %d, missing_parts %d, alerts %d (expected "
         "1 0 0 1)" % (got["decided_complete"], got["decided_deadline"],
                       got["missing_parts"], got["alerts"]))
if got["overruns"] < 1 or got["overrun_max_ns"] < 2.5e9:
    fail("the overrun was not counted: overruns %d, overrun_max_ns %d"
         % (got["overruns"], got["overrun_max_ns"]))
print("ok")
PYEOF

# The alert, with both values.
"$PY" - "$tmp/alerts.json" <<'PYEOF' || fail "the alert"
import json, sys
alerts = [json.loads(l) for l in open(sys.argv[1])]
if len(alerts) != 1:
    print("FAIL: %d alerts, expected 1" % len(alerts))
    sys.exit(1)
a = alerts[0]
if (a["value"], a["hosts"], a["missing"], a["deadline"]) \
        != (120, {"h1": 70, "h2": 50}, [], False):
    print("FAIL: alert %s" % json.dumps(a))
    sys.exit(1)
print("alert: value %s, hosts %s, latency %d us"
      % (a["value"], a["hosts"], a["latency_us"]))
PYEOF
grep -q "the loop ran its timers [0-9.]* s late" "$tmp/tem.log" \
    || fail "the overrun was not logged"
ctl status | grep -E "overrun" || true
tem_stop
echo "PASS: the TEM stopped 3 s with h2's answer queued: status answered" \
     "after SIGCONT, no host dropped, the event decided with both values" \
     "(120), the overrun counted and logged"
