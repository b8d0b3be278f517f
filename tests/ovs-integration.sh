#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Integration test of the Trumpet packet monitor inside Open vSwitch
# (ovs-vswitchd with DPDK, userspace datapath): real traffic between two
# network namespaces through a bridge with two DPDK af_packet ports, events
# added with ovs-appctl tpm/event-add, reports read back with tpm/reports
# and checked against what the test sent and captured.  The test bed is
# tests/testbed.sh.
#
# Scenarios (each prints one PASS line, or FAIL with the reason):
#   1. 5-tuple threshold: a 200 x 1000 B UDP burst is reported with exactly
#      its 5-tuple, in the epochs of the burst; a concurrent low-rate flow
#      to the same port is never reported.
#   2. Aggregation: 5 flows to 10.99.0.2, each below the threshold, their
#      sum above: the group=nw_dst/24 event fires with group
#      {"nw_dst":"10.99.0.0/24"}, the 5-tuple event with the same
#      threshold never fires.
#   3. Volume: the sum of an always-true event's values over all intervals
#      equals, exactly, the UDP payload bytes of a tcpdump capture taken
#      in the receiving namespace.
#   4. tpm/event-del stops the reports; malformed definitions are refused
#      with a precise error and ovs-appctl fails.
#   5. Local TEM over two PMD threads (the switch reconfigured: p1 polled
#      by a PMD on core 0, p2 by one on core 1): "sum(volume) > 20000"
#      grouped by protocol, split 10000 per PMD, over the two directions
#      of one UDP conversation within one epoch: 12000 B each way gives
#      one report of exactly 24000 with "pmds":2; 16000 B and 2000 B (core
#      0 exceeds its share, core 1 polled) and 6000 B each way give none;
#      16000 B and 6000 B (only core 0 exceeds, core 1's part comes from
#      the poll) give one report of 22000 with "pmds":2.
#      A per-5-tuple, unsplit event gives each direction's volume per epoch
#      as counted; tpm/stats shows which PMD exceeded its share.
# Throughout (restarted after the reconfiguration for scenario 5): a
# background ping between the namespaces loses nothing, and after each
# scenario tpm/stats shows no unfinished sweep.
#
# Epochs: the monitor numbers epochs by wall clock (CLOCK_REALTIME ns /
# 10 ms), so the expected epochs follow from the senders' timestamps; a
# packet may be counted in the epoch next to that of its send timestamp
# (latency, a boundary in between), hence the +-1 epoch windows.
#
# Automake test protocol: exit 0 pass, 1 fail, 77 skip (not root, OVS not
# built, tools missing).  Environment: top_srcdir, top_builddir (the build
# tree, holding ovs/), PYTHON3; TB_KEEP=1 keeps the work directory.  Run by
# hand from the source tree:
#   top_srcdir=$PWD top_builddir=$PWD/build bash tests/ovs-integration.sh
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=$(cd "${top_builddir:-$top_srcdir/build}" && pwd)
# shellcheck source=tests/testbed.sh
. "$top_srcdir/tests/testbed.sh"

SEND=$top_srcdir/tests/udp-send.py
PCAP_VOLUME=$top_srcdir/tests/pcap-volume.py
CHECK_REPORTS=$top_srcdir/tests/tpm-reports.py

# Scenario 1 and 2 threshold on sum(volume), bytes in one 10 ms interval.
THRESHOLD=50000

# reports_check EVENT ARGS...: tpm-reports.py over the current reports
# (prints its summary; errors on stderr; non-zero if a check fails).
reports_check() {
    local ev=$1 reports
    shift
    reports=$(tb_appctl tpm/reports) || return 1
    "$TB_PY" "$CHECK_REPORTS" --event "$ev" "$@" <<<"$reports"
}

# reports_quiet EVENT ARGS...: the same, silent (for polling).
reports_quiet() {
    reports_check "$@" >/dev/null 2>&1
}

# wait_reports SECONDS LABEL EVENT ARGS...: polls until the reports of
# EVENT pass the checks ARGS, then checks once more, verbosely: fails the
# test with tpm-reports.py's messages if they still do not pass.  Sets
# SUMMARY to the summary line.
wait_reports() {
    local secs=$1 label=$2
    shift 2
    tb_wait_for "$secs" reports_quiet "$@" || true
    if ! SUMMARY=$(reports_check "$@" 2>"$TB_DIR/check.err"); then
        tb_fail "$label: $(cat "$TB_DIR/check.err") [$SUMMARY]"
    fi
}

# send OUTFILE LABEL ARGS...: runs udp-send.py ARGS in namespace 1 (from
# 10.99.0.1 to 10.99.0.2), its JSON output in OUTFILE.
send() {
    local out=$1 label=$2
    shift 2
    tb_ns1 "$TB_PY" "$SEND" --src "$TB_IP1" --dst "$TB_IP2" "$@" \
        >"$out" 2>"$out.err" \
        || tb_fail "$label: udp-send.py $* failed: $(cat "$out.err")"
}

# sent FILE EXPR: a value from udp-send.py's JSON output in FILE.
sent() {
    tb_json "$1" "$2"
}

# wait_past NS: sleeps until wall clock NS (nanoseconds) has passed.
wait_past() {
    local left_ms=$((($1 - $(tb_now_ns)) / 1000000))
    if [ "$left_ms" -gt 0 ]; then
        sleep "$((left_ms / 1000)).$(printf '%03d' $((left_ms % 1000)))"
    fi
}

# five_tuple SPORT DPORT [SRC DST]: the report group of a UDP flow from
# SRC (default 10.99.0.1) to DST (default 10.99.0.2) (keys sorted, as the
# monitor prints them).
five_tuple() {
    printf '{"nw_dst":"%s","nw_proto":17,"nw_src":"%s","tp_dst":%d,"tp_src":%d}' \
        "${4:-$TB_IP2}" "${3:-$TB_IP1}" "$2" "$1"
}

# burst_fits FILE FLOW: true if flow number FLOW of the sender output FILE
# sent everything within two adjacent epochs.  On a slow machine a burst
# that spreads over more epochs may stay below the threshold in each: the
# scenario is then retried rather than failed.
burst_fits() {
    local first last
    first=$(sent "$1" "d['flows'][$2]['t_first']")
    last=$(sent "$1" "d['flows'][$2]['t_last']")
    [ $(($(tb_epoch "$last") - $(tb_epoch "$first"))) -le 1 ]
}

# check_sent FILE FLOW PACKETS PAYLOAD: the sender sent all of flow FLOW.
check_sent() {
    local got
    got=$(sent "$1" "'%d %d %d' % (d['flows'][$2]['packets'], d['flows'][$2]['payload'], d['flows'][$2]['errors'])")
    [ "$got" = "$3 $4 0" ] \
        || tb_fail "sender: flow $2 sent packets/payload/errors $got," \
                   "expected $3 $4 0"
}

# --- Scenario 1: 5-tuple threshold -------------------------------------
scenario_threshold() {
    local out=$TB_DIR/s1.json attempt ev='' first last
    local filter="filter=udp,nw_src=$TB_IP1,nw_dst=$TB_IP2,tp_dst=5101"
    for attempt in 1 2 3; do
        ev=s1-heavy-$attempt
        tb_event_add "$ev" "$filter" "predicate=sum(volume) > $THRESHOLD" \
            group=5tuple interval=10ms
        # Flow 0: the burst, 200 x 1000 B back to back, 100 ms after the
        # start (0.5 ms into an epoch).  Flow 1: 100 B every 2 ms for
        # 200 ms (at most 600 B per epoch), around the burst.
        send "$out" "scenario 1" --align-us 500 \
            --flow 41001:5101:200:1000:0:100000 --flow 41002:5101:100:100:2000
        check_sent "$out" 0 200 200000
        check_sent "$out" 1 100 10000
        burst_fits "$out" 0 && break
        tb_log "note: burst spread over more than 2 epochs (slow machine);" \
               "retrying"
        tb_event_del "$ev"
        [ "$attempt" -lt 3 ] \
            || tb_fail "scenario 1: could not send 200 datagrams within" \
                       "20 ms in 3 attempts"
    done
    first=$(tb_epoch "$(sent "$out" "d['flows'][0]['t_first']")")
    last=$(tb_epoch "$(sent "$out" "d['flows'][0]['t_last']")")
    # Each report: the burst's 5-tuple (so never the low-rate flow, port
    # 41002), in the burst's epochs +-1, above the threshold, whole
    # datagrams of the burst; together at most the burst.  At least one
    # epoch holds half the burst (100000 > threshold): at least one report.
    wait_past $(($(sent "$out" "d['t_last']") + 50 * TB_EPOCH_NS))
    wait_reports 5 "scenario 1 (event $ev)" "$ev" \
        --group "$(five_tuple 41001 5101)" \
        --epoch-min $((first - 1)) --epoch-max $((last + 1)) \
        --value-gt "$THRESHOLD" --value-max 200000 --value-multiple 1000 \
        --sum-max 200000 --min-count 1
    local summary=$SUMMARY
    tb_event_del "$ev"
    tb_check_sweeps "scenario 1"
    tb_log "PASS: 1 5-tuple threshold: burst 41001->5101 reported" \
           "($summary; burst epochs $first..$last), low-rate flow" \
           "41002->5101 never"
}

# --- Scenario 2: aggregation over nw_dst/24 ----------------------------
scenario_aggregation() {
    local out=$TB_DIR/s2.json attempt agg per i flows first last
    # Destination ports 5200-5207.
    local filter="filter=udp,nw_src=$TB_IP1,nw_dst=10.99.0.0/24,tp_dst=5200/0xfff8"
    for attempt in 1 2 3; do
        agg=s2-agg-$attempt per=s2-5tuple-$attempt
        tb_event_add "$agg" "$filter" "predicate=sum(volume) > $THRESHOLD" \
            group=nw_dst/24 interval=10ms
        tb_event_add "$per" "$filter" "predicate=sum(volume) > $THRESHOLD" \
            group=5tuple interval=10ms
        # 5 flows of 30 x 1000 B (30000 each, below the threshold even if
        # all in one epoch), interleaved: 150000 in all, so one epoch
        # holds at least 75000 if the burst spans two.
        flows=()
        for i in 1 2 3 4 5; do
            flows+=(--flow "4200$i:520$i:30:1000:0")
        done
        send "$out" "scenario 2" --align-us 500 "${flows[@]}"
        for i in 0 1 2 3 4; do
            check_sent "$out" "$i" 30 30000
        done
        first=$(tb_epoch "$(sent "$out" "d['t_first']")")
        last=$(tb_epoch "$(sent "$out" "d['t_last']")")
        [ $((last - first)) -le 1 ] && break
        tb_log "note: burst spread over more than 2 epochs (slow machine);" \
               "retrying"
        tb_event_del "$agg"
        tb_event_del "$per"
        [ "$attempt" -lt 3 ] \
            || tb_fail "scenario 2: could not send 150 datagrams within" \
                       "20 ms in 3 attempts"
    done
    wait_past $(($(sent "$out" "d['t_last']") + 50 * TB_EPOCH_NS))
    wait_reports 5 "scenario 2 (event $agg)" "$agg" \
        --group '{"nw_dst":"10.99.0.0/24"}' \
        --epoch-min $((first - 1)) --epoch-max $((last + 1)) \
        --value-gt "$THRESHOLD" --value-max 150000 --value-multiple 1000 \
        --sum-max 150000 --min-count 1
    local summary=$SUMMARY
    # The 5-tuple event saw the same packets (same sweeps): none of its
    # groups crossed the threshold.
    wait_reports 0 "scenario 2 (event $per)" "$per" --max-count 0
    tb_event_del "$agg"
    tb_event_del "$per"
    tb_check_sweeps "scenario 2"
    tb_log "PASS: 2 aggregation: 5 flows of 30000 B to $TB_IP2 reported as" \
           "nw_dst 10.99.0.0/24 ($summary; epochs $first..$last)," \
           "5-tuple event with the same threshold never"
}

# --- Scenario 3: reported volume equals an independent capture ---------
pcap_count() {
    "$TB_PY" "$PCAP_VOLUME" --src "$TB_IP1" --dst "$TB_IP2" --dport 5301 \
        "$1" | "$TB_PY" -c 'import json, sys; print(json.load(sys.stdin)["packets"])'
}

pcap_has() {
    [ "$(pcap_count "$1" 2>/dev/null)" = "$2" ]
}

tcpdump_listening() {
    grep -q 'listening on' "$1"
}

scenario_volume() {
    local out=$TB_DIR/s3.json pcap=$TB_DIR/s3.pcap ev=s3-volume
    local n=300 tcpdump_pid sent_packets sent_payload cap cap_packets
    local cap_payload first last

    # Capture on the receiving side, in namespace 2: what ovs-vswitchd
    # forwarded.  -Z root: keep the right to write into the private
    # directory.  -U: write each packet at once.
    tb_bg "$TB_DIR/s3.tcpdump" ip netns exec "$TB_NS2" tcpdump -Z root -n \
        -U -i "$TB_IF2" -w "$pcap" "udp and dst port 5301"
    tcpdump_pid=$TB_BG_PID
    tb_wait_for 10 tcpdump_listening "$TB_DIR/s3.tcpdump.err" \
        || tb_fail "scenario 3: tcpdump did not start:" \
                   "$(cat "$TB_DIR/s3.tcpdump.err")"

    # Reports every interval in which the flow sent something.
    tb_event_add "$ev" \
        "filter=udp,nw_src=$TB_IP1,nw_dst=$TB_IP2,tp_dst=5301" \
        "predicate=sum(volume) >= 0" group=5tuple interval=10ms
    # 300 datagrams of 1 to 1472 B (seeded), one every 3.3 ms: about 1 s,
    # about 100 intervals (well within tpm-report-log).
    send "$out" "scenario 3" --seed 7 --flow "43001:5301:$n:r1-1472:3300"
    sent_packets=$(sent "$out" "d['flows'][0]['packets']")
    sent_payload=$(sent "$out" "d['flows'][0]['payload']")
    [ "$sent_packets" = "$n" ] \
        || tb_fail "scenario 3: sender sent $sent_packets datagrams of $n"

    tb_wait_for 5 pcap_has "$pcap" "$n" || true
    tb_bg_stop "$tcpdump_pid" INT \
        || tb_fail "scenario 3: tcpdump failed:" \
                   "$(cat "$TB_DIR/s3.tcpdump.err")"
    grep -q '^0 packets dropped by kernel' "$TB_DIR/s3.tcpdump.err" \
        || tb_fail "scenario 3: tcpdump dropped packets:" \
                   "$(cat "$TB_DIR/s3.tcpdump.err")"
    cap=$("$TB_PY" "$PCAP_VOLUME" --src "$TB_IP1" --dst "$TB_IP2" \
          --sport 43001 --dport 5301 "$pcap") \
        || tb_fail "scenario 3: cannot read the capture $pcap"
    cap_packets=$(tb_json <(echo "$cap") "d['packets']")
    cap_payload=$(tb_json <(echo "$cap") "d['payload']")
    [ "$(tb_json <(echo "$cap") "d['truncated'] + d['inconsistent']")" = 0 ] \
        || tb_fail "scenario 3: malformed datagrams in the capture: $cap"
    # The monitor counts at the switch's input, the capture at its output;
    # the veth path at this rate drops nothing, and if it did, the two
    # would differ: say so rather than compare apples and oranges.
    [ "$cap_packets" = "$sent_packets" ] \
        || tb_fail "scenario 3: captured $cap_packets datagrams" \
                   "($cap_payload B), sent $sent_packets ($sent_payload B):" \
                   "the test bed lost packets"

    # Exact, no tolerance: the intervals partition the packets, every
    # interval with traffic is reported (the predicate always holds) with
    # its payload bytes, and no report is lost: the PMD's report ring drops
    # none (tpm/stats "reports: N, dropped 0", checked below) and the
    # host's report log (other_config:tpm-report-log=100000, set before
    # the switch started) keeps far more than the ~100 reports of this
    # flow and the few of the other scenarios.
    first=$(tb_epoch "$(sent "$out" "d['t_first']")")
    last=$(tb_epoch "$(sent "$out" "d['t_last']")")
    wait_past $(($(sent "$out" "d['t_last']") + 5 * TB_EPOCH_NS))
    wait_reports 10 "scenario 3 (event $ev, capture $cap)" "$ev" \
        --group "$(five_tuple 43001 5301)" \
        --epoch-min $((first - 1)) --epoch-max $((last + 1)) \
        --min-count 2 --sum-eq "$cap_payload"
    local summary=$SUMMARY
    tb_event_del "$ev"
    local dropped
    dropped=$(tb_appctl tpm/stats | grep -o 'dropped [0-9]*;' | grep -v 'dropped 0;' || true)
    [ -z "$dropped" ] || tb_fail "scenario 3: tpm/stats: reports $dropped"
    tb_check_sweeps "scenario 3"
    tb_log "PASS: 3 volume: sum of reported values = captured UDP payload" \
           "= $cap_payload B in $cap_packets datagrams ($summary)"
}

# --- Scenario 4: deletion and bad definitions --------------------------
scenario_delete_and_errors() {
    local out=$TB_DIR/s4.json ev=s4-del keep=s4-keep sender t_before t_after
    local e_after filter="filter=udp,nw_src=$TB_IP1,nw_dst=$TB_IP2,tp_dst=5401"
    tb_event_add "$ev" "$filter" "predicate=sum(volume) >= 0" interval=10ms
    tb_event_add "$keep" "$filter" "predicate=sum(volume) >= 0" interval=10ms
    # 100 B every 2 ms until stopped.
    tb_bg "$out" ip netns exec "$TB_NS1" "$TB_PY" "$SEND" --src "$TB_IP1" \
        --dst "$TB_IP2" --flow 44001:5401:0:100:2000
    sender=$TB_BG_PID
    wait_reports 10 "scenario 4 (event $ev before its deletion)" "$ev" \
        --min-count 1

    t_before=$(tb_now_ns)
    tb_event_del "$ev"
    t_after=$(tb_now_ns)
    e_after=$(tb_epoch "$t_after")
    # The deletion took effect on the PMD between t_before and t_after:
    # epochs from e_after on ended after it, so none may be reported.
    # Keep the traffic going 30 epochs more; the twin event shows the
    # monitor saw and swept them.
    wait_reports 10 "scenario 4 (event $keep after the deletion)" "$keep" \
        --since $((e_after + 30)) --min-count 1
    tb_bg_stop "$sender" TERM \
        || tb_fail "scenario 4: sender failed: $(cat "$out.err")"
    [ "$(sent "$out" "d['flows'][0]['errors']")" = 0 ] \
        || tb_fail "scenario 4: sender: send errors: $(cat "$out")"
    wait_reports 0 "scenario 4 (event $ev after its deletion)" "$ev" \
        --since "$e_after" --max-count 0
    local summary
    summary=$(reports_check "$ev" --until $((e_after - 1)))
    tb_event_del "$keep"
    if tb_appctl tpm/event-list | grep -q "^$ev:"; then
        tb_fail "scenario 4: tpm/event-list still lists $ev"
    fi
    expect_error "event-del of a deleted event" "no event named $ev" \
        tpm/event-del "$ev"
    tb_log "PASS: 4a event-del: $ev reported before ($summary), not from" \
           "epoch $e_after on (deleted at $t_before..$t_after ns), while" \
           "$keep kept reporting the same traffic"

    # Bad definitions: refused, ovs-appctl exits non-zero, nothing added.
    # Columns count from 1 at the first character of the definition (the
    # arguments after the name, joined with spaces): nw_dest is at 12.
    expect_error "misspelled field" \
        "filter: column 12: unknown field 'nw_dest'" \
        tpm/event-add s4-bad-field "filter=udp,nw_dest=$TB_IP2" \
        "predicate=count() > 1"
    tb_event_add s4-dup "$filter" "predicate=count() > 1000"
    expect_error "duplicate name" "event s4-dup already exists" \
        tpm/event-add s4-dup "$filter" "predicate=count() > 5"
    expect_error "interval not a multiple of the epoch" \
        "interval 15ms is not a multiple of the epoch 10ms" \
        tpm/event-add s4-bad-interval "$filter" "predicate=count() > 1" \
        interval=15ms
    # TCP-state variables with no connection pool: refused, naming the knob.
    tb_vsctl set Open_vSwitch . other_config:tpm-tcp-state-pool=0
    expect_error "TCP-state predicate without a pool" \
        "other_config:tpm-tcp-state-pool is 0" \
        tpm/event-add s4-bad-tcp filter=tcp "predicate=sum(is_lost) > 1"
    # (An unset monitor knob keeps its last value: set the default back.)
    tb_vsctl set Open_vSwitch . other_config:tpm-tcp-state-pool=16384
    # A bad knob value is rejected and the previous one kept.
    tb_vsctl set Open_vSwitch . other_config:tpm-burst-gap=soon
    tb_wait_for 10 grep -q 'other_config:tpm-burst-gap="soon" rejected' \
        "$TB_DIR/vswitchd.log" \
        || tb_fail "scenario 4: tpm-burst-gap=soon not rejected in the log"
    tb_vsctl remove Open_vSwitch . other_config tpm-burst-gap
    expect_error "predicate syntax" "predicate: column 35: unexpected '>>'" \
        tpm/event-add s4-bad-syntax filter=ip "predicate=sum(volume) > >> 125KB"
    local list
    list=$(tb_appctl tpm/event-list)
    if grep -q '^s4-bad' <<<"$list"; then
        tb_fail "scenario 4: a refused event is listed: $list"
    fi
    if [ "$(grep -c '^s4-dup:' <<<"$list")" != 1 ] \
       || ! grep -q '^s4-dup: .*count() > 1000' <<<"$list"; then
        tb_fail "scenario 4: the duplicate add changed s4-dup: $list"
    fi
    tb_event_del s4-dup
    tb_check_sweeps "scenario 4"
    tb_log "PASS: 4b bad definitions refused (misspelled field with column," \
           "duplicate name, 15ms interval, TCP-state predicate with" \
           "tpm-tcp-state-pool=0, syntax, tpm-burst-gap=soon)," \
           "ovs-appctl exit status non-zero"
}

# expect_error LABEL MESSAGE APPCTL-ARGS...: ovs-appctl must fail and its
# error output contain MESSAGE.
expect_error() {
    local label=$1 msg=$2 err rc=0
    shift 2
    err=$(tb_appctl "$@" 2>&1) || rc=$?
    [ "$rc" != 0 ] \
        || tb_fail "scenario 4, $label: ovs-appctl $* succeeded: $err"
    grep -qF -- "$msg" <<<"$err" \
        || tb_fail "scenario 4, $label: error does not mention" \
                   "\"$msg\": $err"
}

# --- Scenario 6: DoS threshold, live ----------------------------------
# dos_counter FIELD: a counter of the "dos:" lines of tpm/stats, summed
# over the PMDs ("passed", "skipped").
dos_counter() {
    tb_appctl tpm/stats | awk -v f="$1" '/^  dos:/ {
        for (i = 1; i <= NF; i++) if ($i == f) { v = $(i + 1); sub(",", "",
            v); n += v } } END { print n + 0 }'
}

scenario_dos() {
    local out=$TB_DIR/s6.json ev=s6-dos th=5000 attempt p0 s0 p1 s1
    local filter="filter=udp,nw_src=$TB_IP1,nw_dst=$TB_IP2,tp_dst=5601"
    expect_error "bad threshold" "expected bytes, an integer" \
        tpm/dos-threshold 5kB
    expect_error "bad model option" "unknown option \"rate=1\"" \
        tpm/dos-model 1000 1000 rate=1
    tb_vsctl set Open_vSwitch . other_config:tpm-dos-clear=maybe
    tb_wait_for 10 grep -q 'other_config:tpm-dos-clear="maybe" rejected: expected true or false' \
        "$TB_DIR/vswitchd.log" \
        || tb_fail "scenario 6: tpm-dos-clear=maybe not rejected in the log"
    tb_vsctl remove Open_vSwitch . other_config tpm-dos-clear
    tb_appctl tpm/dos-threshold "$th" >/dev/null
    tb_appctl tpm/dos-threshold | grep -q "^DoS threshold: $th bytes (set by tpm/dos-threshold)" \
        || tb_fail "scenario 6: tpm/dos-threshold: $(tb_appctl tpm/dos-threshold)"
    tb_event_add "$ev" "$filter" "predicate=count() > 0" group=5tuple \
        interval=10ms
    # One event: every calibration flow feeds exactly one trigger.
    tb_appctl tpm/dos-profile 4096 3 | grep -q '^triggers_per_flow: 1.00$' \
        || tb_fail "scenario 6: tpm/dos-profile: $(tb_appctl tpm/dos-profile 4096 3)"
    tb_appctl tpm/dos-model 1000 1000 switch-pkt=100 switch-byte=0.5 \
        | grep -q '^switch_cycles_per_packet: 100.0 + 0.5000 per byte (given)$' \
        || tb_fail "scenario 6: tpm/dos-model switch-pkt=, switch-byte=:" \
                   "$(tb_appctl tpm/dos-model 1000 1000 switch-pkt=100)"
    # Frames of 1000-byte datagrams are 1042 bytes: the big flow passes
    # 5000 bytes at its 5th and is counted from there (96 of 100); the 20
    # small flows (3 x 142 bytes) never pass.  The filter table counts in
    # windows (tpm/stats names their length): if one ends before the big
    # flow's 5th packet (2 ms after its first, 500 us apart; 3 ms with
    # margin) its count restarts, so such an attempt is retried.
    local win
    win=$(tb_appctl tpm/stats | sed -n 's/.*, window \([0-9]*\) epochs.*/\1/p' \
          | head -1)
    [ -n "$win" ] || tb_fail "scenario 6: no filter-table window in tpm/stats"
    local flows=(--flow 46001:5601:100:1000:500)
    local i
    for i in $(seq 20); do
        flows+=(--flow "$((46100 + i)):5601:3:100:1000")
    done
    for attempt in 1 2 3; do
        p0=$(dos_counter passed)
        s0=$(dos_counter packets)
        send "$out" "scenario 6" "${flows[@]}"
        check_sent "$out" 0 100 100000
        local t0 w0 w1
        t0=$(sent "$out" "d['flows'][0]['t_first']")
        w0=$(($(tb_epoch "$t0") / win))
        w1=$(($(tb_epoch $((t0 + 3000000))) / win))
        [ "$w0" = "$w1" ] && break
        tb_log "note: the flow straddled a filter-table window; retrying"
        [ "$attempt" -lt 3 ] || tb_fail "scenario 6: 3 straddling attempts"
        sleep 1
        tb_appctl tpm/event-del "$ev" >/dev/null
        tb_event_add "$ev" "$filter" "predicate=count() > 0" group=5tuple \
            interval=10ms
    done
    wait_past $(($(sent "$out" "d['t_last']") + 30 * TB_EPOCH_NS))
    # (From the last attempt's first epoch: an attempt retried above may
    # have left reports of the event's earlier instance.)
    wait_reports 5 "scenario 6 (event $ev)" "$ev" --sum-eq 96 \
        --in-group "$(five_tuple 46001 5601)" --since "$(tb_epoch "$t0")"
    wait_reports 5 "scenario 6 (event $ev, all groups)" "$ev" --sum-eq 96 \
        --since "$(tb_epoch "$t0")"
    p1=$(dos_counter passed)
    s1=$(dos_counter packets)
    [ $((p1 - p0)) = 1 ] \
        || tb_fail "scenario 6: flows passed rose by $((p1 - p0)), expected 1"
    [ $((s1 - s0)) -ge $((20 * 3 + 4)) ] \
        || tb_fail "scenario 6: skipped packets rose by $((s1 - s0))," \
                   "expected at least 64"
    # The model: within its budget at the threshold it gives and over it
    # just below; or, if it finds none (on veth a busy iteration that
    # sends to the kernel costs the switch tens of microseconds), over it
    # at the largest threshold tried.
    local model th_m load
    model=$(tb_appctl tpm/dos-model 2000000 100000 attack=threshold)
    load=$(sed -n 's/^load: //p' <<<"$model")
    th_m=$(sed -n 's/^threshold: \([0-9]*\)$/\1/p' <<<"$model")
    if [ -z "$th_m" ]; then
        grep -q '^threshold: none' <<<"$model" \
            && awk -v l="$load" 'BEGIN { exit !(l > 1) }' \
            || tb_fail "scenario 6: tpm/dos-model: $model"
        th_m=none
    else
        awk -v l="$load" 'BEGIN { exit !(l <= 1) }' \
            || tb_fail "scenario 6: tpm/dos-model: $model"
        if [ "$th_m" -gt 0 ]; then
            load=$(tb_appctl tpm/dos-model 2000000 100000 attack=threshold \
                   "threshold=$((th_m - 1))" | sed -n 's/^load: //p')
            awk -v l="$load" 'BEGIN { exit !(l > 1) }' \
                || tb_fail "scenario 6: load $load at threshold $((th_m - 1))"
        fi
    fi
    tb_appctl tpm/dos-threshold 0 >/dev/null
    tb_event_del "$ev"
    tb_check_sweeps "scenario 6"
    tb_log "PASS: 6 DoS threshold $th set live: big flow reported from its" \
           "5th packet (96 of 100), 20 small flows never; flows passed +1," \
           "skipped +$((s1 - s0)); profile 1 trigger per flow; model" \
           "threshold $th_m for 2 Mpps threshold attack + 0.1 Mpps good"
}

# --- Scenario 5: local TEM over two PMD threads ------------------------
# Threshold of the split event: each PMD gets half.  Datagrams of 1000 B.
TEM_T=20000
TEM_SHARE=$((TEM_T / 2))

# pmd_reports: "R0 R1", the satisfactions queued so far by the monitors
# of the PMDs on cores 0 and 1 (tpm/stats "reports: N").
pmd_reports() {
    tb_appctl tpm/stats | awk '
        /^pmd core/ { c = $3; sub(":", "", c) }
        /^  reports:/ { r = $2; sub(",", "", r); n[c] = r }
        END { print n[0] + 0, n[1] + 0 }'
}

# two_way OUT N1 N2: N1 datagrams of 1000 B from 10.99.0.1:45001 to
# 10.99.0.2:45002 (in through p1, PMD core 0) and N2 back from
# 10.99.0.2:45002 to 10.99.0.1:45001 (in through p2, PMD core 1), back to
# back, both senders starting at the same time T0, 1 ms after an epoch
# boundary at least 0.5 s ahead (time to start both).  Sets T0; the
# senders' outputs are OUT.1 and OUT.2.
two_way() {
    local out=$1 n1=$2 n2=$3 pid2 e=$TB_EPOCH_NS
    T0=$((($(tb_now_ns) + 500000000) / e * e + e + 1000000))
    tb_bg "$out.2" ip netns exec "$TB_NS2" "$TB_PY" "$SEND" \
        --src "$TB_IP2" --dst "$TB_IP1" --start-ns "$T0" --linger-ms 30 \
        --flow "45002:45001:$n2:1000:0"
    pid2=$TB_BG_PID
    tb_ns1 "$TB_PY" "$SEND" --src "$TB_IP1" --dst "$TB_IP2" \
        --start-ns "$T0" --linger-ms 30 --flow "45001:45002:$n1:1000:0" \
        >"$out.1" 2>"$out.1.err" \
        || tb_fail "scenario 5: udp-send.py failed: $(cat "$out.1.err")"
    tb_bg_wait "$pid2" \
        || tb_fail "scenario 5: udp-send.py failed: $(cat "$out.2.err")"
    check_sent "$out.1" 0 "$n1" $((n1 * 1000))
    check_sent "$out.2" 0 "$n2" $((n2 * 1000))
}

# sent_in_epoch FILE EPOCH: the sender of FILE sent everything in EPOCH.
sent_in_epoch() {
    [ "$(tb_epoch "$(sent "$1" "d['t_first']")")" = "$2" ] \
        && [ "$(tb_epoch "$(sent "$1" "d['t_last']")")" = "$2" ]
}

# tem_events NAME DIAG: adds NAME, "sum(volume) > T" over UDP within
# 10.99.0.0/24 grouped by protocol (so both directions of a conversation
# are one group), and checks it was split over the two PMDs; and DIAG,
# the same traffic per 5-tuple, always true and not split (a negative
# threshold): every PMD reports its own direction's volume of each epoch
# with traffic, as it counted it.
tem_events() {
    local filter="filter=udp,nw_src=10.99.0.0/24,nw_dst=10.99.0.0/24" reply
    reply=$(tb_appctl tpm/event-add "$1" "$filter" \
            "predicate=sum(volume) > $TEM_T" group=nw_proto interval=10ms \
            2>&1) || tb_fail "scenario 5: tpm/event-add $1: $reply"
    [ "$reply" = "event $1 added on 2 PMD threads, threshold $TEM_T split $TEM_SHARE each" ] \
        || tb_fail "scenario 5: tpm/event-add $1 replied: $reply"
    reply=$(tb_appctl tpm/event-add "$2" "$filter" \
            "predicate=sum(volume) >= -1" group=5tuple interval=10ms 2>&1) \
        || tb_fail "scenario 5: tpm/event-add $2: $reply"
    [[ $reply == "event $2 added on 2 PMD threads (threshold not split"* ]] \
        || tb_fail "scenario 5: tpm/event-add $2 replied: $reply"
}

# diag_epoch EVENT GROUP: the epoch of EVENT's only report for GROUP, or
# nothing if it has not exactly one.
diag_epoch() {
    reports_check "$1" --in-group "$2" \
        | sed -n 's/^count=1 .* epochs=\([0-9]*\)\.\.\1 .*/\1/p'
}

# tem_case LABEL N1 N2: one case of scenario 5: N1 and N2 datagrams of
# 1000 B in the two directions within one epoch, with fresh events
# (tem_events; left installed, names in TEM_EV and TEM_DIAG).  Retries
# (3 attempts) when the burst is not within one epoch, as sent or as the
# monitor counted it.  Checks that each PMD whose direction exceeded the
# share reported (and only those), and that the split event reported
# exactly when the total exceeds T: one report, for that epoch, of the
# total of both directions, with "pmds":2.  Sets TEM_SUMMARY.
tem_case() {
    local label=$1 n1=$2 n2=$3 out=$TB_DIR/s5$1 attempt before after
    local g1 g2 e e1 e2 want0 want1 got0 got1
    g1=$(five_tuple 45001 45002 "$TB_IP1" "$TB_IP2")
    g2=$(five_tuple 45002 45001 "$TB_IP2" "$TB_IP1")
    for attempt in 1 2 3 4; do
        [ "$attempt" -lt 4 ] \
            || tb_fail "scenario 5$label: no burst within one epoch in 3" \
                       "attempts"
        TEM_EV=s5$label-tem-$attempt TEM_DIAG=s5$label-diag-$attempt
        tem_events "$TEM_EV" "$TEM_DIAG"
        before=$(pmd_reports)
        two_way "$out" "$n1" "$n2"
        e=$(tb_epoch "$T0")
        wait_past $((T0 + 30 * TB_EPOCH_NS))
        if ! sent_in_epoch "$out.1" "$e" || ! sent_in_epoch "$out.2" "$e"
        then
            tb_log "note: scenario 5$label: a burst was sent over two" \
                   "epochs (slow machine); retrying"
            tb_event_del "$TEM_EV"
            tb_event_del "$TEM_DIAG"
            continue
        fi
        # Each direction as the monitor counted it: all the bytes sent.
        wait_reports 5 "scenario 5$label (event $TEM_DIAG, forward)" \
            "$TEM_DIAG" --in-group "$g1" --sum-eq $((n1 * 1000))
        wait_reports 5 "scenario 5$label (event $TEM_DIAG, backward)" \
            "$TEM_DIAG" --in-group "$g2" --sum-eq $((n2 * 1000))
        # Both in one and the same epoch (a PMD descheduled across the
        # boundary counts its packets in the next).
        e1=$(diag_epoch "$TEM_DIAG" "$g1")
        e2=$(diag_epoch "$TEM_DIAG" "$g2")
        if [ -n "$e1" ] && [ "$e1" = "$e2" ]; then
            e=$e1
            break
        fi
        tb_log "note: scenario 5$label: sent in epoch $e, counted in" \
               "epochs $(reports_check "$TEM_DIAG" --in-group "$g1" \
               | sed 's/.*epochs=\([^ ]*\).*/\1/') and" \
               "$(reports_check "$TEM_DIAG" --in-group "$g2" \
               | sed 's/.*epochs=\([^ ]*\).*/\1/') (PMD scheduling);" \
               "retrying"
        tb_event_del "$TEM_EV"
        tb_event_del "$TEM_DIAG"
    done

    if [ $(((n1 + n2) * 1000)) -gt "$TEM_T" ]; then
        wait_reports 5 "scenario 5$label (event $TEM_EV)" "$TEM_EV" \
            --group '{"nw_proto":17}' --epoch-min "$e" --epoch-max "$e" \
            --min-count 1 --max-count 1 --sum-eq $(((n1 + n2) * 1000)) \
            --pmds 2
    else
        # A decision waits at most tpm-poll-timeout (100 ms); 300 ms
        # have passed since the burst.
        wait_reports 0 "scenario 5$label (event $TEM_EV)" "$TEM_EV" \
            --max-count 0
    fi

    # Each PMD queued one satisfaction of $TEM_DIAG (its direction, in
    # one epoch), and one of $TEM_EV if its direction exceeded the share.
    after=$(pmd_reports)
    want0=$((1 + (n1 * 1000 > TEM_SHARE)))
    want1=$((1 + (n2 * 1000 > TEM_SHARE)))
    got0=$((${after% *} - ${before% *}))
    got1=$((${after#* } - ${before#* }))
    [ "$got0 $got1" = "$want0 $want1" ] \
        || tb_fail "scenario 5$label: PMDs on cores 0 and 1 queued" \
                   "$got0 and $got1 satisfactions, expected $want0 and" \
                   "$want1 (tpm/stats reports: $before before, $after after)"
    TEM_SUMMARY="$((n1 * 1000)) B from core 0's port + $((n2 * 1000)) B"
    TEM_SUMMARY+=" from core 1's, both counted in epoch $e (attempt"
    TEM_SUMMARY+=" $attempt); PMDs over their share of $TEM_SHARE:"
    TEM_SUMMARY+=" $((want0 - 1)) + $((want1 - 1)); $TEM_EV: $SUMMARY"
}

scenario_local_tem() {
    local show stats bad
    tb_two_pmds
    ping_start

    # (a) 0.6 T each way: both PMDs exceed their share, one host report
    # of the total.
    tem_case a 12 12
    show=$(tb_appctl tpm/event-show "$TEM_EV") \
        || tb_fail "scenario 5: tpm/event-show $TEM_EV failed: $show"
    [ "$(grep -c '^  pmd core' <<<"$show")" = 2 ] \
        && [ "$(grep -c "^  pmd core [01]: threshold share $TEM_SHARE, [0-9]* trigger instances" <<<"$show")" = 2 ] \
        || tb_fail "scenario 5: tpm/event-show $TEM_EV: expected two" \
                   "\"pmd core\" lines, cores 0 and 1, share $TEM_SHARE:" \
                   "$show"
    tb_event_del "$TEM_EV"
    tb_event_del "$TEM_DIAG"
    tb_log "PASS: 5a local TEM, 0.6 T each way: $TEM_SUMMARY;" \
           "tpm/event-show: both PMDs with share $TEM_SHARE"

    # (b) 0.8 T and 0.1 T: core 0 exceeds its share and reports, core 1
    # is polled (0.1 T): 0.9 T < T, no host report.
    tem_case b 16 2
    tb_event_del "$TEM_EV"
    tb_event_del "$TEM_DIAG"
    tb_log "PASS: 5b local TEM, 0.8 T + 0.1 T: $TEM_SUMMARY"

    # (c) 0.3 T each way: no PMD exceeds its share, no report.
    tem_case c 6 6
    tb_event_del "$TEM_EV"
    tb_event_del "$TEM_DIAG"
    tb_log "PASS: 5c local TEM, 0.3 T each way: $TEM_SUMMARY"

    # (d) 0.8 T and 0.3 T: only core 0 exceeds its share; the poll of
    # core 1 must bring its 0.3 T: 1.1 T > T, one report of the total.
    tem_case d 16 6
    tb_event_del "$TEM_EV"
    tb_event_del "$TEM_DIAG"
    tb_log "PASS: 5d local TEM, 0.8 T + 0.3 T: $TEM_SUMMARY"

    stats=$(tb_appctl tpm/stats)
    bad=$(awk '/^pmd core/ { c = $0 }
               /^  packets:/ { if ($2 + 0 == 0) print c }' <<<"$stats")
    [ -z "$bad" ] && [ "$(grep -c '^pmd core [01]:$' <<<"$stats")" = 2 ] \
        || tb_fail "scenario 5: tpm/stats: expected PMDs on cores 0 and" \
                   "1, both with packets: $stats"
    tb_check_sweeps "scenario 5"
    # No local-TEM decision gave up waiting for a PMD ("missing").
    bad=$(tb_appctl coverage/show | grep 'tpm_poll_timeout' \
          | grep -v 'total: 0$' || true)
    [ -z "$bad" ] || tb_fail "scenario 5: local-TEM polls timed out: $bad"
    tb_log "PASS: 5 local TEM over PMDs on cores 0 and 1 (p1 on core 0, p2" \
           "on core 1): tpm/stats both PMDs with packets, no unfinished" \
           "sweep, no poll timeout"
}

# --- Ping throughout ----------------------------------------------------
# -O: a line "no answer yet for icmp_seq=N" for every request still
# unanswered when the next one goes out: each one is a loss.
ping_start() {
    tb_bg "$TB_DIR/ping.out" ip netns exec "$TB_NS1" ping -O -n -i 0.1 \
        "$TB_IP2"
    PING_PID=$TB_BG_PID
}

# ping_check [LABEL]: the background ping lost nothing.
ping_check() {
    local label=${1:-throughout}
    tb_bg_stop "$PING_PID" INT || true
    local out=$TB_DIR/ping.out tx rx lost
    tx=$(sed -n 's/^\([0-9]*\) packets transmitted.*/\1/p' "$out")
    rx=$(sed -n 's/.* \([0-9]*\) received.*/\1/p' "$out")
    lost=$(grep -c 'no answer yet' "$out" || true)
    if [ -z "$tx" ] || [ -z "$rx" ]; then
        tb_fail "background ping: no summary: $(tail -n 5 "$out")"
    fi
    # The last request may be in flight when ping is stopped.
    if [ "$lost" != 0 ] || [ "$rx" -lt $((tx - 1)) ] || [ "$rx" -lt 10 ]; then
        tb_fail "background ping lost packets: $lost unanswered," \
                "$rx of $tx received: $(tail -n 3 "$out")"
    fi
    local final
    final=$(tb_ns1 ping -n -q -c 5 -i 0.1 -W 1 "$TB_IP2" 2>&1) \
        || tb_fail "final ping failed: $final"
    grep -q ' 0% packet loss' <<<"$final" \
        || tb_fail "final ping: $final"
    tb_log "PASS: ping $TB_IP1 -> $TB_IP2 $label: $rx of $tx answered," \
           "none lost; final ping 0% loss"
}

main() {
    local t0=$SECONDS
    tb_init
    tb_up
    tb_log "test bed up in $((SECONDS - t0)) s (DPDK memory: $TB_DPDK_MODE," \
           "work directory $TB_DIR)"
    ping_start
    scenario_threshold
    scenario_aggregation
    scenario_volume
    scenario_delete_and_errors
    scenario_dos
    ping_check
    # Last: it reconfigures the switch to two PMD threads.
    scenario_local_tem
    ping_check "with two PMDs"
    tb_log "all scenarios passed in $((SECONDS - t0)) s"
}

main "$@"
