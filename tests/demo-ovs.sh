#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The main demo ("sh tests/bootstrap.sh demo", as root): the monitor inside
# Open vSwitch.  It brings up the test bed of tests/testbed.sh (the patched
# ovs-vswitchd with DPDK, one PMD thread, two network namespaces joined by
# a bridge), starts a TEM with two hosts (the switch, "hv1", and a
# tpm-replay process, "replay1", replaying a constant trace of 8000 B per
# 10 ms epoch to 10.99.0.2:9000, as a second hypervisor would see it),
# then:
#
#   1. installs a host event on the switch with ovs-appctl tpm/event-add:
#      a UDP 5-tuple above 20000 B in 10 ms;
#   2. installs a network-wide event with tem-ctl: the hosts' sum to
#      10.99.0.2:9000 above 40000 B in 10 ms (split 20000 per host);
#   3. sends 35 datagrams of 1000 B from one namespace to the other within
#      one epoch;
#   4. prints what an operator looks at: the switch's tpm/reports (the
#      host event and its share of the network event, both 35000 B), the
#      TEM's alert (35000 B from hv1 + 8000 B from replay1, polled),
#      excerpts of tpm/stats and tpm/controller-show, tem-ctl hosts.
#
# It fails (exit 1) if the reports or the alert do not say what was sent.
# Everything it started is stopped and removed on exit (the test bed's
# teardown: daemons, namespaces, huge pages it reserved).  Exit 77 (with
# the reason) when it cannot run here: not root, ovs-vswitchd not built,
# tools missing.
#
# By hand: top_srcdir=$PWD top_builddir=$PWD/build bash tests/demo-ovs.sh
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=$(cd "${top_builddir:-$top_srcdir/build}" && pwd)
# shellcheck source=tests/testbed.sh
. "$top_srcdir/tests/testbed.sh"
# shellcheck source=tests/tem-keys.sh
. "$top_srcdir/tests/tem-keys.sh"

TEM_BIN=$top_builddir/tem/trumpet-tem
TEM_CTL_BIN=$top_builddir/tem/tem-ctl
REPLAY_BIN=$top_builddir/tpm/tpm-replay

say() {
    printf '\n# %s\n' "$*"
}

temctl() {
    "$TEM_CTL_BIN" --ctl="ipc://$TB_DIR/tem-ctl.sock" --timeout=5s "$@"
}

hosts_connected() {
    [ "$(temctl --json hosts 2>/dev/null | "$TB_PY" -c 'import json, sys
d = json.load(sys.stdin)
print(sorted(h["host"] for h in d["hosts"] if h["state"] == "connected"))')" \
      = "['hv1', 'replay1']" ]
}

acked_by_both() {
    [ "$(temctl --json event-show "$1" 2>/dev/null | "$TB_PY" -c '
import json, sys
d = json.load(sys.stdin)
print(sorted((h["host"], h["state"]) for h in d["hosts"]))')" \
      = "[('hv1', 'acked'), ('replay1', 'acked')]" ]
}

# alert_for EPOCH: the TEM's net_heavy alert for EPOCH, if any.
alert_for() {
    grep "^{\"event\":\"net_heavy\",\"id\":[0-9]*,\"epoch\":$1," \
        "$TB_DIR/alerts.jsonl" 2>/dev/null | head -n 1
}

# report_for EVENT EPOCH: the switch's report of EVENT for EPOCH, if any.
report_for() {
    tb_appctl tpm/reports | grep -F "{\"epoch\":$2,\"event\":\"$1\"," \
        | head -n 1
}

tb_init
for f in "$TEM_BIN" "$TEM_CTL_BIN" "$REPLAY_BIN"; do
    [ -x "$f" ] || tb_skip "$f not built (make)"
done

say "Test bed: ovs-vswitchd (DPDK, one PMD thread on core 1) between" \
    "namespaces 10.99.0.1 and 10.99.0.2"
tb_up
tb_log "up: $(tb_appctl dpif-netdev/pmd-rxq-show | grep -c 'port:') rx" \
       "queues on PMD core 1; ping works; work directory $TB_DIR"

say "TEM on local sockets, CURVE keys (tem-ctl keygen) for the TEM and" \
    "both hosts; host replay1 replays 8000 B per 10 ms epoch"
KEYS=$TB_DIR/keys
CTL=$TEM_CTL_BIN tem_keys "$KEYS" hv1 replay1
"$TB_PY" "$top_srcdir/tests/tem-trace.py" --out "$TB_DIR/trace.pcap" \
    --epochs 100 --per-epoch 8 --size 1000 --flows 2 --sport 7000 \
    >"$TB_DIR/trace.json"
tb_bg "$TB_DIR/tem.out" "$TEM_BIN" \
    --listen="ipc://$TB_DIR/tem-hosts.sock" \
    --pub="ipc://$TB_DIR/tem-pub.sock" \
    --ctl="ipc://$TB_DIR/tem-ctl.sock" \
    --state-file="$TB_DIR/tem-events.json" \
    --key-file="$KEYS/tem.key" --allow-file="$KEYS/allow" \
    --alert-file="$TB_DIR/alerts.jsonl" --no-alerts-stdout \
    --poll-deadline=1s
tb_wait_for 5 temctl status >/dev/null \
    || tb_fail "the TEM does not answer: $(cat "$TB_DIR/tem.out.err")"
tb_vsctl set Open_vSwitch . \
    "other_config:tpm-controller=unix:$TB_DIR/tem-hosts.sock" \
    "other_config:tpm-controller-key=$KEYS/tem.key.pub" \
    "other_config:tpm-host-key-file=$KEYS/hv1.key" \
    other_config:tpm-host-id=hv1 other_config:tpm-prefixes=10.99.0.0/24 \
    other_config:tpm-poll-timeout=500ms
tb_bg "$TB_DIR/replay.out" "$REPLAY_BIN" \
    --controller "ipc://$TB_DIR/tem-hosts.sock" --host-id replay1 \
    --tem-key "$KEYS/tem.key.pub" --host-key-file "$KEYS/replay1.key" \
    --prefix 10.99.0.0/24 --realtime --loop 1000 --history 128 \
    --require-controller "$TB_DIR/trace.pcap"
tb_wait_for 15 hosts_connected \
    || tb_fail "hosts not connected: $(temctl hosts 2>&1)"
tb_log "\$ tem-ctl hosts"
temctl hosts | sed 's/^/  /'

say "1. A host event, on the switch only"
cmd=(tpm/event-add big_flow filter=udp,nw_dst=10.99.0.2
     "predicate=sum(volume) > 20000" group=5tuple interval=10ms)
tb_log "\$ ovs-appctl ${cmd[*]}"
tb_appctl "${cmd[@]}" | sed 's/^/  /'

say "2. A network-wide event, through the TEM"
cmd=(event-add net_heavy filter=udp,nw_dst=10.99.0.2,tp_dst=9000
     "predicate=sum(volume) > 40000" group=nw_dst interval=10ms across=sum)
tb_log "\$ tem-ctl ${cmd[*]}"
temctl "${cmd[@]}" | sed 's/^/  /'
tb_wait_for 10 acked_by_both net_heavy \
    || tb_fail "net_heavy not installed on both hosts:" \
               "$(temctl event-show net_heavy 2>&1)"
tb_log "installed on hv1 and replay1, threshold 20000 each:"
tb_appctl tpm/event-list | sed 's/^/  /'
sleep 0.2       # A few whole epochs with the event everywhere.

say "3. Traffic: 35 x 1000 B from 10.99.0.1:41001 to 10.99.0.2:9000 in" \
    "one epoch"
epoch=
for attempt in 1 2 3; do
    tb_ns1 "$TB_PY" "$top_srcdir/tests/udp-send.py" --src "$TB_IP1" \
        --dst "$TB_IP2" --align-us 500 --linger-ms 20 \
        --flow 41001:9000:35:1000:0 >"$TB_DIR/send.json"
    first=$(tb_epoch "$(tb_json "$TB_DIR/send.json" "d['t_first']")")
    last=$(tb_epoch "$(tb_json "$TB_DIR/send.json" "d['t_last']")")
    if [ "$first" = "$last" ] \
       && tb_wait_for 5 report_for big_flow "$first" >/dev/null \
       && [ "$(report_for big_flow "$first" | tb_json /dev/stdin \
               "d['value']")" = 35000 ]; then
        epoch=$first
        break
    fi
    tb_log "(the burst straddled two epochs; again)"
done
[ -n "$epoch" ] || tb_fail "no burst counted within one epoch in 3 tries"
tb_log "sent in epoch $epoch: $(tb_json "$TB_DIR/send.json" \
       "'%d datagrams, %d B of payload' % (d['flows'][0]['packets'], d['flows'][0]['payload'])")"

say "4. What the operator sees"
tb_log "\$ ovs-appctl tpm/reports   (the switch, epoch $epoch)"
tb_wait_for 5 report_for tem:net_heavy "$epoch" >/dev/null \
    || tb_fail "no tem:net_heavy report for epoch $epoch"
tb_appctl tpm/reports | grep -F "{\"epoch\":$epoch," | sed 's/^/  /'
[ "$(report_for tem:net_heavy "$epoch" | tb_json /dev/stdin \
     "d['value']")" = 35000 ] \
    || tb_fail "tem:net_heavy for epoch $epoch: $(report_for \
               tem:net_heavy "$epoch")"

tb_log "\$ tem-ctl alerts   (the TEM: hv1's 35000 B + replay1's 8000 B," \
       "polled)"
tb_wait_for 5 alert_for "$epoch" >/dev/null \
    || tb_fail "no TEM alert for epoch $epoch: $(temctl status 2>&1)"
alert_for "$epoch" | sed 's/^/  /'
[ "$(alert_for "$epoch" | tb_json /dev/stdin \
     "(d['value'], sorted(d['hosts'].items()))")" \
  = "(43000, [('hv1', 35000), ('replay1', 8000)])" ] \
    || tb_fail "alert for epoch $epoch: $(alert_for "$epoch")"

tb_log "\$ ovs-appctl tpm/stats   (excerpt)"
tb_appctl tpm/stats | grep -E '^(events|main thread|pmd core|  (lost data|packets|sweeps|reports))' \
    | cut -c1-160 | sed 's/^/  /'
tb_log "\$ ovs-appctl tpm/controller-show   (excerpt)"
tb_appctl tpm/controller-show | head -n 8 | sed 's/^/  /'
tb_check_sweeps "demo"

say "Done: the host event and the network-wide event saw exactly what" \
    "was sent; tearing down"
