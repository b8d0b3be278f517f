#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# An allowed host that misbehaves (docs/tem.md, "Hostile hosts"): two fake
# hosts h1 and h2 with valid CURVE keys, at the wire level (tests/pbwire.py,
# the helpers of tests/tem-wire.py), on loopback TCP.  No root needed.
#
#   1. h1 sends one frame of 50 satisfactions for an epoch 116 days ahead:
#      h2 gets no poll, the TEM counts 50 in epoch_refused; a satisfaction
#      of the current epoch then polls h2 (the path works).
#   2. h1 says Bye with a reason holding a newline and a forged log line:
#      the TEM's log has one line for it, escaped ("\n"), and no line
#      starting with the forged text.
#   3. Throughout, "status" on the control socket answers within 100 ms
#      (measured by a client polling it all along).
#
# Automake test protocol: 0 pass, 1 fail, 77 skip (python3-zmq missing).
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=tests/tem-lib.sh
. "$top_srcdir/tests/tem-lib.sh"
tem_test_init tem-hostile

K=$tmp/keys
tem_keys "$K" h1 h2

tem_start --key-file="$K/tem.key" --allow-file="$K/allow" \
    --listen=tcp://127.0.0.1:0 --pub=tcp://127.0.0.1:0 \
    --state-file="$tmp/events.json" --no-alerts-stdout
listen=$(status 's["endpoints"]["listen"]')
ctl event-add net_sum filter=udp,nw_dst=10.99.0.0/24 group=nw_dst \
    'predicate=sum(volume) > 120KB' >/dev/null

PYTHONPATH=$top_srcdir/tests "$PY" - "$listen" "ipc://$tmp/ctl" "$K" \
    "$top_srcdir/tests/tem-wire.py" <<'PYEOF' || fail "fake hosts"
import importlib.util, json, struct, sys, threading, time
import zmq
from pbwire import field_bytes, field_varint, frame, varint

listen, ctl_ep, keys, wire_py = sys.argv[1:5]
spec = importlib.util.spec_from_file_location("tem_wire", wire_py)
tw = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tw)
ctx = zmq.Context()
EPOCH_NS = 10_000_000


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def host(name, instance):
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.curve_serverkey = tw.read_key(keys + "/tem.key.pub", "public-key")
    s.curve_publickey = tw.read_key("%s/%s.key" % (keys, name), "public-key")
    s.curve_secretkey = tw.read_key("%s/%s.key" % (keys, name), "secret-key")
    s.connect(listen)
    s.send(frame(3, tw.hello(1, 3, name, EPOCH_NS, instance)))
    welcomed = installed = False
    deadline = time.time() + 10
    while not (welcomed and installed) and time.time() < deadline:
        for num, f in tw.answers(s, 500) or []:
            if num == 2:                        # Welcome
                welcomed = True
            elif num == 4:                      # Install: ack it
                installed = True
                s.send(frame(3, field_bytes(6, field_varint(1, f[1][0])
                                            + field_varint(2, f[2][0]))))
    if not (welcomed and installed):
        fail("%s: no Welcome and Install" % name)
    return s


def sat(epoch, last, value=200000.0):
    key = (field_varint(1, 4) + field_bytes(2, bytes([10, 99, 1, 1]))
           + field_bytes(3, bytes([10, 99, 0, last])) + field_varint(4, 1)
           + field_varint(5, 2) + field_varint(6, 17))
    return field_bytes(8, field_varint(1, 1) + field_varint(2, epoch)
                       + field_bytes(3, key) + varint(4 << 3 | 1)
                       + struct.pack("<d", value))


def polls(s, ms):
    """Polls (Poll, PollBatch) that 's' receives within 'ms'."""
    n, end = 0, time.time() + ms / 1000
    while time.time() < end:
        for num, f in tw.answers(s, 50) or []:
            n += num == 9 or num == 14
    return n


# The control socket, measured all along.
worst, stop = [0.0], threading.Event()


def status_loop():
    c = ctx.socket(zmq.REQ)
    c.setsockopt(zmq.LINGER, 0)
    c.connect(ctl_ep)
    while not stop.is_set():
        t = time.monotonic()
        c.send(b'{"command":"status"}')
        if not c.poll(2000):
            worst[0] = 99.0
            return
        json.loads(c.recv())
        worst[0] = max(worst[0], time.monotonic() - t)
        time.sleep(0.005)


th = threading.Thread(target=status_loop)
th.start()
try:
    h1, h2 = host("h1", 11), host("h2", 12)
    now = time.time_ns() // EPOCH_NS
    ahead = now + 116 * 86400 * 100
    h1.send(frame(3, *[sat(ahead, i) for i in range(50)]))
    n = polls(h2, 1000)
    if n:
        fail("h2 was polled %d times for an epoch 116 days ahead" % n)
    h1.send(frame(3, sat(time.time_ns() // EPOCH_NS - 1, 200)))
    if polls(h2, 2000) != 1:
        fail("a satisfaction of the current epoch did not poll h2")
    h1.send(frame(3, field_bytes(12, field_bytes(
        1, "bye\n2026-01-01T00:00:00.000Z|tem|ERR|forged by h1"))))
    time.sleep(0.3)
finally:
    stop.set()
    th.join()
if worst[0] >= 0.1:
    fail("status took %.0f ms" % (worst[0] * 1000))
print("ok: no poll for the far epoch, h2 polled for the current one, "
      "status at most %.1f ms" % (worst[0] * 1000))
PYEOF

c=$(status '"%d %d %d" % (s["counters"]["epoch_refused"], s["counters"]["satisfactions"], s["counters"]["decisions"])')
[ "$c" = "50 51 1" ] \
    || fail "epoch_refused satisfactions decisions: $c, expected 50 51 1"
echo "PASS: 50 satisfactions 116 days ahead refused and counted, no poll"

grep -q '^2026-01-01T00:00:00.000Z|tem|ERR|forged' "$tmp/tem.log" \
    && fail "a Bye reason forged a log line"
n=$(grep -c 'said Bye (bye\\n2026-01-01T00:00:00.000Z|tem|ERR|forged by h1)' \
    "$tmp/tem.log" || true)
[ "$n" = 1 ] || fail "the Bye's log line, escaped, $n times: $(grep -a Bye "$tmp/tem.log")"
echo "PASS: a Bye with a newline is one escaped log line"
tem_stop
