#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The TCP per-flow state variables (is_lost, rtt, ecn, rwnd, is_burst, seq,
# ack, dup) inside Open vSwitch, validated against the real kernel TCP
# stacks of two network namespaces on the veth-DPDK test bed
# (tests/testbed.sh), and the paper's TCP use cases as scenarios.
#
# The test machines' kernel has no netem (nor red, fq, codel): loss, delay,
# CE marks and bottlenecks are made with netfilter (iptables), which the
# kernel has, and the delay line and the queueing bottleneck with NFQUEUE
# (tests/nfq-delay.c).  Every
# impairment sits in a namespace: loss and delay in the receiving one
# (after the switch, so the monitor sees both the original and the
# retransmission, as a monitor in the sender's hypervisor would), CE marks
# in the sending one (before the switch, so the monitor sees them).
#
# Scenarios (each prints one PASS line, or FAIL with the reason):
#   1. Loss: every 25th data segment dropped in the receiver.  The sum of
#      is_lost equals, exactly, the retransmissions in a capture of what
#      the switch received (tests/pcap-tcp.py, the same definition
#      computed independently), is at least the kernel's drop count, and
#      is within max(3, 10%) of the sender kernel's RetransSegs and of
#      `ss -ti`'s retrans count.
#   2. RTT: a 20 ms delay line on the data direction; request/response
#      traffic.  Every rtt the monitor reports is >= 20 ms and their
#      median is within 2 ms of 20 ms and of the `ss -ti` rtt.
#   3. ECN: ECN on in both namespaces, every 10th ECT(0) send buffer
#      marked CE by the sender's namespace: the sum of ecn equals, exactly,
#      the CE-marked packets of a capture of what the switch received.
#   4. Window: min(rwnd) and max(rwnd) of the receiver's ACKs equal the
#      capture's scaled windows (window scale from the SYNs), and every
#      reported value is a window the receiver advertised.
#   5. Burst and loss (paper Table 2): a bursty sender through a shallow
#      bottleneck (a token-bucket policer, no queue) makes
#      sum(is_lost && is_burst) > 10 fire; a paced sender of the same
#      average rate does not.
#   6. Congestion (paper Table 2): an application-limited TCP flow through
#      a bottleneck queue (tests/nfq-delay --rate); the congestion event
#      does not fire while the flow is alone, and fires (at least 10
#      times) once a UDP flow fills the queue.
#   7. Reachability loss (paper Table 2): 8 connections from 10.99.0.1 to
#      10.99.0.2; sum(is_lost) > 5 at nw_src,nw_dst granularity does not
#      fire while the path works and fires (with that group) once the
#      receiver drops everything.
# After each scenario tpm/stats shows no unfinished sweep.
#
# Test helpers run on CPU 0 (TB_HELPER_CPU), the PMD thread polls on
# CPU 1: on a 2-CPU machine, helpers on the PMD's CPU preempt it.
#
# Automake test protocol: exit 0 pass, 1 fail, 77 skip.  Environment:
# top_srcdir, top_builddir, PYTHON3; TB_KEEP=1 keeps the work directory.
# By hand: top_srcdir=$PWD top_builddir=$PWD/build bash tests/tcp-kernel.sh
# (TK_SCENARIOS="6 7" runs only those scenarios).
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=$(cd "${top_builddir:-$top_srcdir/build}" && pwd)
# shellcheck source=tests/testbed.sh
. "$top_srcdir/tests/testbed.sh"

FLOW=$top_srcdir/tests/tcp-flow.py
PCAP_TCP=$top_srcdir/tests/pcap-tcp.py
SEND=$top_srcdir/tests/udp-send.py
NFQ_DELAY=$top_builddir/tests/nfq-delay
TB_HELPER_CPU=${TB_HELPER_CPU:-0}

# "${IN_NS[@]}" NS COMMAND...: COMMAND in namespace NS, on the helpers'
# CPU (a command prefix, not a function, so that tb_bg records the PID of
# COMMAND itself: taskset and ip netns exec both exec).
IN_NS=(taskset -c "$TB_HELPER_CPU" ip netns exec)

# wire FIELD SRC SPORT DST DPORT PCAP: FIELD of tests/pcap-tcp.py's
# figures for that direction of a captured connection.
wire() {
    local field=$1
    shift
    "$TB_PY" "$PCAP_TCP" --src "$1" --sport "$2" --dst "$3" --dport "$4" \
        "$5" | "$TB_PY" -c 'import json, sys
print(json.dumps(json.load(sys.stdin)[sys.argv[1]]))' "$field"
}

# server PORT [ARGS...]: a tcp-flow.py server in namespace 2; returns when
# it listens (its PID in SERVER_PID).
server() {
    tb_flow_server "$TB_NS2" "$TB_IP2" "$@"
}

# client OUT LABEL ARGS...: a tcp-flow.py client in namespace 1.
client() {
    local out=$1 label=$2
    shift 2
    "${IN_NS[@]}" "$TB_NS1" "$TB_PY" "$FLOW" client --dst "$TB_IP2" "$@" \
        >"$out" 2>"$out.err" \
        || tb_fail "$label: tcp-flow.py client $* failed: $(cat "$out.err")"
}

# capture OUT FILTER...: tcpdump of what the switch receives, from both
# namespaces (-i any in the switch's namespace: the switch transmits
# bypassing the taps, so each packet appears once); returns when it
# listens (its PID in CAPTURE_PID).
capture() {
    local out=$1
    shift
    tb_bg "$out.log" "${IN_NS[@]}" \
        "$TB_NSSW" tcpdump -i any -U -n -s 128 -B 16384 \
        -w "$out" "$@"
    CAPTURE_PID=$TB_BG_PID
    tb_wait_for 10 grep -q 'listening on' "$out.log.err" \
        || tb_fail "tcpdump: $(cat "$out.log.err")"
}

# capture_stop OUT: stops the capture once it has read everything (the
# packets it captured are all those its filter received, none dropped).
capture_stop() {
    sleep 1
    tb_bg_stop "$CAPTURE_PID" INT || true
    tb_wait_for 5 grep -q 'dropped by kernel' "$1.log.err" || true
    local err=$1.log.err captured received dropped
    captured=$(sed -n 's/^\([0-9]*\) packets\{0,1\} captured$/\1/p' \
               "$err")
    received=$(sed -n \
               's/^\([0-9]*\) packets\{0,1\} received by filter$/\1/p' "$err")
    dropped=$(sed -n 's/^\([0-9]*\) packets\{0,1\} dropped by kernel$/\1/p' \
              "$err")
    [ -n "$captured" ] && [ "$captured" = "$received" ] \
        && [ "$dropped" = 0 ] \
        || tb_fail "tcpdump did not capture everything: $(cat "$err")"
}

# reports EVENT ARGS...: tests/tpm-reports.py over the switch's reports of
# EVENT (prints its summary "count=N sum=S ..."; fails if a check ARGS
# fails, with the reason on stderr).
reports() {
    local ev=$1
    shift
    tb_appctl tpm/reports | "$TB_PY" "$top_srcdir/tests/tpm-reports.py" \
        --event "$ev" "$@"
}

# values EVENT: the values of EVENT's reports, one per line.
values() {
    tb_appctl tpm/reports | "$TB_PY" -c 'import json, sys
for line in sys.stdin:
    if line.strip():
        r = json.loads(line)
        if r["event"] == sys.argv[1]:
            print(r["value"])' "$1"
}

# stat LIST EXPR: evaluates Python EXPR over "v", the numbers in LIST
# (one per line).
stat() {
    "$TB_PY" -c 'import statistics, sys
v = [float(x) for x in sys.argv[1].split()]
print(eval(sys.argv[2]))' "$1" "$2"
}

# ipt_count NS TABLE CHAIN: packet counter of the first rule of CHAIN.
ipt_count() {
    ip netns exec "$1" iptables -t "$2" -L "$3" -v -x -n \
        | awk 'NR == 3 { print $1 }'
}

# pin_stacks: the namespaces' receive processing on the helpers' CPU
# (RPS).  A veth delivers on the transmitting CPU: ACKs that the PMD
# (CPU 1) sends into namespace 1 would otherwise be processed there, and
# TCP would transmit from both CPUs at once (from the application on one,
# from the ACK's softirq on the other); the two CPUs' backlogs then
# reorder first transmissions on their way to the switch, which is_lost
# rightly counts but the sender's kernel does not.
pin_stacks() {
    local mask ns_if
    mask=$(printf '%x' $((1 << TB_HELPER_CPU)))
    for ns_if in "$TB_NS1 $TB_IF1" "$TB_NS2 $TB_IF2"; do
        set -- $ns_if
        ip netns exec "$1" \
            sh -c "echo $mask > /sys/class/net/$2/queues/rx-0/rps_cpus" \
            || tb_fail "cannot set RPS on $2 in $1"
    done
}

# --- Scenario 1: loss ------------------------------------------------------
scenario_loss() {
    local port=5001 out=$TB_DIR/s1.json pcap=$TB_DIR/s1.pcap
    tb_event_add s1-lost "filter=tcp,nw_src=$TB_IP1,tp_dst=$port" \
        "predicate=sum(is_lost) > 0" group=5tuple interval=10ms
    ip netns exec "$TB_NS2" iptables -A INPUT -s "$TB_IP1" -p tcp \
        --dport "$port" -m length --length 1000:65535 \
        -m statistic --mode nth --every 25 --packet 0 -j DROP
    server "$port"
    capture "$pcap" tcp port "$port"
    client "$out" "scenario 1" --port "$port" --bytes 4000000
    capture_stop "$pcap"
    tb_bg_stop "$SERVER_PID" || true
    sleep 0.1

    local tpm wire drops kernel ss sport
    tpm=$(stat "$(values s1-lost)" 'int(sum(v))')
    sport=$(tb_json "$out" "d['conns'][0]['sport']")
    wire=$(wire lost "$TB_IP1" "$sport" "$TB_IP2" "$port" "$pcap")
    drops=$(ipt_count "$TB_NS2" filter INPUT)
    kernel=$(tb_json "$out" "d['retrans_segs']")
    ss=$(tb_json "$out" "d['conns'][0]['ss']['retrans_total']")
    local summary
    summary="is_lost $tpm, capture $wire, receiver drops $drops,"
    summary="$summary sender RetransSegs $kernel, ss retrans $ss"
    [ "$drops" -ge 50 ] || tb_fail "scenario 1: only $drops drops: $summary"
    [ "$tpm" = "$wire" ] \
        || tb_fail "scenario 1: the monitor and the capture differ: $summary"
    [ "$tpm" -ge "$drops" ] \
        || tb_fail "scenario 1: fewer retransmissions than drops: $summary"
    local k
    for k in "$kernel" "$ss"; do
        local tol=$((k / 10 > 3 ? k / 10 : 3))
        [ $((tpm - k)) -le "$tol" ] && [ $((k - tpm)) -le "$tol" ] \
            || tb_fail "scenario 1: more than $tol from the kernel: $summary"
    done
    tb_event_del s1-lost
    tb_check_sweeps "scenario 1"
    tb_log "PASS: 1 loss: $summary"
}

# --- Scenario 2: RTT -------------------------------------------------------
scenario_rtt() {
    local port=5002 out=$TB_DIR/s2.json delay_ms=20
    tb_event_add s2-rtt "filter=tcp,nw_src=$TB_IP1,tp_dst=$port" \
        "predicate=max(rtt) > 0" group=5tuple interval=10ms
    ip netns exec "$TB_NS2" iptables -A INPUT -s "$TB_IP1" -p tcp \
        --dport "$port" -j NFQUEUE --queue-num 7
    tb_bg "$TB_DIR/nfq" "${IN_NS[@]}" "$TB_NS2" "$NFQ_DELAY" --queue 7 \
        --delay "${delay_ms}ms"
    local nfq=$TB_BG_PID
    tb_wait_for 10 grep -q 'nfq-delay: queue' "$TB_DIR/nfq.err" \
        || tb_fail "scenario 2: nfq-delay: $(cat "$TB_DIR/nfq.err")"
    server "$port" --request 100 --reply 1000
    client "$out" "scenario 2" --port "$port" --requests 50 \
        --request 100 --reply 1000 --nodelay
    tb_bg_stop "$SERVER_PID" || true
    tb_bg_stop "$nfq" || tb_fail "scenario 2: nfq-delay failed"
    ipt_clear "$TB_NS2"

    local v n median min ss
    v=$(values s2-rtt)
    n=$(stat "$v" 'len(v)')
    [ "$n" -ge 20 ] || tb_fail "scenario 2: $n rtt reports, expected >= 20"
    median=$(stat "$v" 'statistics.median(v) / 1e6')
    min=$(stat "$v" 'min(v) / 1e6')
    ss=$(tb_json "$out" "d['conns'][0]['ss']['rtt_ms']")
    local summary
    summary="median rtt $median ms, min $min ms over $n epochs;"
    summary="$summary ss rtt $ss ms; delay $delay_ms ms;"
    summary="$summary delay line: $(cat "$TB_DIR/nfq")"
    # The delay line holds each packet at least delay_ms; the 2 ms allow
    # for the veth legs and the PMD's batch times (a packet's time is its
    # rx batch's).  The kernel's smoothed rtt also averages in the delay
    # line's own lateness, which it measures (late_us_max): on a loaded
    # machine that can pass 2 ms, where the monitor's median does not
    # move.
    local late_ms
    late_ms=$(tb_json "$TB_DIR/nfq" "d['late_us_max'] / 1000")
    "$TB_PY" -c "import sys; m, lo, s, d, late = map(float, sys.argv[1:])
sys.exit(not (lo >= d and d <= m <= d + 2
              and abs(m - s) <= 2 + late))" \
        "$median" "$min" "$ss" "$delay_ms" "$late_ms" \
        || tb_fail "scenario 2: $summary"
    tb_event_del s2-rtt
    tb_check_sweeps "scenario 2"
    tb_log "PASS: 2 rtt: $summary"
}

# --- Scenario 3: ECN -------------------------------------------------------
scenario_ecn() {
    local port=5003 out=$TB_DIR/s3.json pcap=$TB_DIR/s3.pcap ns
    for ns in "$TB_NS1" "$TB_NS2"; do
        ip netns exec "$ns" sysctl -qw net.ipv4.tcp_ecn=1
    done
    tb_event_add s3-ce "filter=tcp,nw_src=$TB_IP1,tp_dst=$port" \
        "predicate=sum(ecn) > 0" group=5tuple interval=10ms
    ip netns exec "$TB_NS1" iptables -t mangle -A POSTROUTING \
        -d "$TB_IP2" -p tcp --dport "$port" -m ecn --ecn-ip-ect 2 \
        -m statistic --mode nth --every 10 --packet 0 -j ECN --ecn-ip-ect 3
    server "$port"
    capture "$pcap" tcp port "$port"
    client "$out" "scenario 3" --port "$port" --bytes 2000000
    capture_stop "$pcap"
    tb_bg_stop "$SERVER_PID" || true
    sleep 0.1

    local tpm marked wire sport
    tpm=$(stat "$(values s3-ce)" 'int(sum(v))')
    marked=$(ipt_count "$TB_NS1" mangle POSTROUTING)
    sport=$(tb_json "$out" "d['conns'][0]['sport']")
    wire=$(wire ce "$TB_IP1" "$sport" "$TB_IP2" "$port" "$pcap")
    local summary="sum(ecn) $tpm, CE in the capture $wire, sender's rule"
    summary="$summary fired $marked times"
    # The rule sees the sender's TCP segmentation-offload super-packets
    # (GSO is segmented below netfilter, as the device transmits): one
    # match marks every wire packet cut from that buffer, so the rule's
    # counter is a lower bound and the capture is the count.
    [ "$marked" -ge 1 ] && [ "$wire" -ge "$marked" ] && [ "$wire" -ge 20 ] \
        && [ "$tpm" = "$wire" ] \
        || tb_fail "scenario 3: $summary"
    for ns in "$TB_NS1" "$TB_NS2"; do
        ip netns exec "$ns" sysctl -qw net.ipv4.tcp_ecn=2
    done
    tb_event_del s3-ce
    tb_check_sweeps "scenario 3"
    tb_log "PASS: 3 ecn: $summary"
}

# --- Scenario 4: receive window ---------------------------------------------
scenario_rwnd() {
    local port=5004 out=$TB_DIR/s4.json pcap=$TB_DIR/s4.pcap
    local f="filter=tcp,nw_src=$TB_IP2,tp_src=$port"
    tb_event_add s4-max "$f" "predicate=max(rwnd) > 0" group=5tuple \
        interval=10ms
    tb_event_add s4-min "$f" "predicate=min(rwnd) >= 0" group=5tuple \
        interval=10ms
    server "$port"
    capture "$pcap" tcp port "$port"
    # Small writes with pauses: the receiver's window moves as its
    # application reads.
    client "$out" "scenario 4" --port "$port" --bytes 3000000 \
        --chunk 65536 --gap-ms 2
    capture_stop "$pcap"
    tb_bg_stop "$SERVER_PID" || true
    sleep 0.1

    local sport wire
    sport=$(tb_json "$out" "d['conns'][0]['sport']")
    wire=$(wire rwnd "$TB_IP2" "$port" "$TB_IP1" "$sport" "$pcap")
    local summary
    summary=$("$TB_PY" -c 'import json, sys
w = json.loads(sys.argv[1])
mx = [int(x) for x in sys.argv[2].split()]
mn = [int(x) for x in sys.argv[3].split()]
ok = mx and mn and max(mx) == max(w) and min(mn) == min(w) \
    and set(mx) <= set(w) and set(mn) <= set(w)
print("%s: reported max %s min %s over %d/%d epochs; capture: %d distinct"
      " windows %s..%s" % ("ok" if ok else "MISMATCH",
      max(mx or [0]), min(mn or [0]), len(mx), len(mn), len(w),
      min(w or [0]), max(w or [0])))' "$wire" "$(values s4-max)" \
        "$(values s4-min)")
    case $summary in
    ok:*) ;;
    *) tb_fail "scenario 4: $summary" ;;
    esac
    tb_event_del s4-max
    tb_event_del s4-min
    tb_check_sweeps "scenario 4"
    tb_log "PASS: 4 rwnd: ${summary#ok: }"
}

# policer NS RATE BURST MATCH...: a token-bucket policer with no queue (a
# shallow bottleneck) in NS's INPUT, shared by the traffic from 10.99.0.1
# that each MATCH (iptables match words) selects: RATE packets per
# second, BURST packets of bucket, the rest dropped.  One limit rule in
# one chain, so the matches share one bucket.
policer() {
    local ns=$1 rate=$2 burst=$3 match
    shift 3
    ip netns exec "$ns" iptables -N POLICER
    for match in "$@"; do
        # shellcheck disable=SC2086  # Words of the match.
        ip netns exec "$ns" iptables -A INPUT -s "$TB_IP1" $match -j POLICER
    done
    ip netns exec "$ns" iptables -A POLICER -m limit \
        --limit "$rate/second" --limit-burst "$burst" -j ACCEPT
    ip netns exec "$ns" iptables -A POLICER -j DROP
}

# ipt_clear NS: removes the test's iptables rules and chains from NS.
ipt_clear() {
    ip netns exec "$1" iptables -F
    ip netns exec "$1" iptables -X
}

# --- Scenario 5: burst and loss ---------------------------------------------
scenario_burst_loss() {
    local port=5005 run v count=()
    ip netns exec "$TB_NS1" sysctl -qw net.ipv4.tcp_slow_start_after_idle=0
    policer "$TB_NS2" 4000 40 "-p tcp --dport $port"
    server "$port"
    for run in bursty paced; do
        tb_event_add "s5-$run" "filter=tcp,nw_src=$TB_IP1,tp_dst=$port" \
            "predicate=sum(is_lost && is_burst) > 10" group=5tuple \
            interval=10ms
        if [ "$run" = bursty ]; then
            # 256 KB at once every 100 ms: 20 Mb/s on average, line-rate
            # bursts of 180 segments into a 40-packet bucket.
            client "$TB_DIR/s5-$run.json" "scenario 5" --port "$port" \
                --bytes 2621440 --chunk 262144 --gap-ms 100 --nodelay
        else
            # The same 20 Mb/s as one segment every 0.5 ms.
            client "$TB_DIR/s5-$run.json" "scenario 5" --port "$port" \
                --bytes 2621440 --chunk 1448 --gap-ms 0.5 --nodelay
        fi
        sleep 0.1
        v=$(values "s5-$run")
        count+=("$(stat "$v" 'len(v)')")
        tb_event_del "s5-$run"
    done
    tb_bg_stop "$SERVER_PID" || true
    ipt_clear "$TB_NS2"
    local summary="sum(is_lost && is_burst) > 10 fired in ${count[0]}"
    summary="$summary intervals with bursts, ${count[1]} when paced"
    summary="$summary (bursty sender: $(tb_json "$TB_DIR/s5-bursty.json" \
        "d['retrans_segs']") retransmissions)"
    [ "${count[0]}" -ge 1 ] && [ "${count[1]}" = 0 ] \
        || tb_fail "scenario 5: $summary"
    tb_check_sweeps "scenario 5"
    tb_log "PASS: 5 burst and loss: $summary"
}

# --- Scenario 6: congestion --------------------------------------------------
scenario_congestion() {
    local port=5006 udp_port=6006 out=$TB_DIR/s6.json
    # Table 2's congestion predicate, and a guard: with nothing outstanding
    # at the end of the last epoch the division is 0/0, which the language
    # defines as 0, so the paper's predicate alone holds for an idle flow.
    local pred="1 - (ack - ack_lastepoch + dup)"
    pred="$pred / (seq_lastepoch - ack_lastepoch) > 0.5"
    tb_event_add s6-congestion "filter=tcp,nw_src=$TB_IP1,tp_dst=$port" \
        "predicate=$pred && seq_lastepoch > ack_lastepoch" \
        group=5tuple interval=10ms
    # One bottleneck for both flows: a FIFO of 100 packets served at 1500
    # packets/s (at most 67 ms of queueing), tail drop.
    local match
    for match in "-p tcp --dport $port" "-p udp --dport $udp_port"; do
        # shellcheck disable=SC2086  # Words of the match.
        ip netns exec "$TB_NS2" iptables -A INPUT -s "$TB_IP1" $match \
            -j NFQUEUE --queue-num 8
    done
    tb_bg "$TB_DIR/s6-nfq" "${IN_NS[@]}" \
        "$TB_NS2" "$NFQ_DELAY" --queue 8 --rate 1500 --max-queued 100
    local nfq=$TB_BG_PID
    tb_wait_for 10 grep -q 'nfq-delay: queue' "$TB_DIR/s6-nfq.err" \
        || tb_fail "scenario 6: nfq-delay: $(cat "$TB_DIR/s6-nfq.err")"
    server "$port"
    # TCP: one segment every millisecond (at most 1000 packets/s, under
    # the policer's rate) for 4 s; UDP: 3000 datagrams/s for 2 s from
    # 1.5 s on, which leaves TCP about a quarter of the tokens.
    tb_bg "$TB_DIR/s6-tcp.json" "${IN_NS[@]}" \
        "$TB_NS1" "$TB_PY" "$FLOW" client --dst "$TB_IP2" \
        --port "$port" --duration 4 --chunk 1448 --gap-ms 1 --nodelay
    local tcp_pid=$TB_BG_PID t0
    t0=$(tb_now_ns)
    local t_udp=$((t0 + 1500000000))
    tb_bg "$TB_DIR/s6-udp.json" "${IN_NS[@]}" "$TB_NS1" "$TB_PY" "$SEND" \
        --src "$TB_IP1" --dst "$TB_IP2" \
        --flow "7006:$udp_port:6000:1000:333" --start-ns "$t_udp"
    local udp_pid=$TB_BG_PID
    tb_bg_wait "$udp_pid" || tb_fail "scenario 6: udp-send.py failed"
    tb_bg_wait "$tcp_pid" || tb_fail "scenario 6: tcp-flow.py failed:" \
        "$(cat "$TB_DIR/s6-tcp.json.err")"
    tb_bg_stop "$SERVER_PID" || true
    tb_bg_stop "$nfq" || tb_fail "scenario 6: nfq-delay failed"
    ipt_clear "$TB_NS2"

    local e_udp before after ok=true
    e_udp=$(tb_epoch "$(tb_json "$TB_DIR/s6-udp.json" "d['t_first']")")
    before=$(reports s6-congestion --until $((e_udp - 1)) --max-count 0) \
        || ok=false
    after=$(reports s6-congestion --since "$e_udp" --min-count 10) || ok=false
    local summary="congestion reports while alone: ${before%% *},"
    summary="$summary after the UDP flow started: ${after%% *}"
    summary="$summary (TCP retransmissions $(tb_json "$TB_DIR/s6-tcp.json" \
        "d['retrans_segs']"); bottleneck: $(cat "$TB_DIR/s6-nfq"))"
    $ok || tb_fail "scenario 6: $summary"
    tb_event_del s6-congestion
    tb_check_sweeps "scenario 6"
    tb_log "PASS: 6 congestion: $summary"
}

# --- Scenario 7: reachability loss -------------------------------------------
scenario_reachability() {
    local port=5007 group
    tb_event_add s7-reach "filter=tcp,nw_src=$TB_IP1,nw_dst=$TB_IP2" \
        "predicate=sum(is_lost) > 5" group=nw_src,nw_dst interval=500ms
    server "$port"
    tb_bg "$TB_DIR/s7.json" "${IN_NS[@]}" "$TB_NS1" "$TB_PY" "$FLOW" client \
        --dst "$TB_IP2" --port "$port" --conns 8 --duration 30 \
        --chunk 1000 --gap-ms 20 --nodelay
    local client_pid=$TB_BG_PID
    sleep 1.5
    local t_cut
    t_cut=$(tb_now_ns)
    ip netns exec "$TB_NS2" iptables -A INPUT -s "$TB_IP1" -p tcp \
        --dport "$port" -j DROP
    sleep 2.5
    tb_bg_stop "$client_pid" || true
    tb_bg_stop "$SERVER_PID" || true
    ipt_clear "$TB_NS2"

    group=$(printf '{"nw_dst":"%s","nw_src":"%s"}' "$TB_IP2" "$TB_IP1")
    local e_cut before after
    e_cut=$(tb_epoch "$t_cut")
    before=$(reports s7-reach --until $((e_cut - 1)) --max-count 0) \
        || tb_fail "scenario 7: reports before the cut: $before"
    after=$(reports s7-reach --since "$e_cut" --group "$group" \
            --value-gt 5 --min-count 1) \
        || tb_fail "scenario 7: no report after the cut: $after"
    tb_event_del s7-reach
    tb_check_sweeps "scenario 7"
    tb_log "PASS: 7 reachability loss: none before the cut; after: $after"
}

main() {
    local t0=$SECONDS
    tb_init
    [ -x "$NFQ_DELAY" ] || tb_skip "$NFQ_DELAY not built"
    local tool
    for tool in iptables taskset; do
        command -v "$tool" >/dev/null 2>&1 \
            || tb_skip "$tool not found (packages iptables, util-linux)"
    done
    tb_up
    pin_stacks
    tb_log "test bed up in $((SECONDS - t0)) s (DPDK memory: $TB_DPDK_MODE)"
    local i
    local all=(loss rtt ecn rwnd burst_loss congestion reachability)
    for i in ${TK_SCENARIOS:-1 2 3 4 5 6 7}; do
        "scenario_${all[i - 1]}"
    done
    tb_log "all scenarios passed in $((SECONDS - t0)) s"
}

main "$@"
