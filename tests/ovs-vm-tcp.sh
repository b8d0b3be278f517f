#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A virtual machine's kernel TCP behind a vhost-user port, and both
# directions of its connections on one monitor: the TCP state variables
# that need both directions (ack and rtt are learnt from the other
# direction's packets, rwnd's scale from both SYNs) checked against
# captures on both sides of the switch.
#
#  netns $TB_NS1 ("phy")       netns $TB_NSSW (ovs-vswitchd)
#  10.99.0.1 $TB_IF1 ==veth== $TB_HIF1: port phy (DPDK af_packet), ofport 1
#                             bridge $TB_BR, fail-mode=secure, one PMD on
#                             core 1 polling both ports' rx queues
#                             (pmd-rxq-affinity=0:1 on both)
#  netns $VM_NS ("the VM")
#  10.99.0.10 $VM_TAP (kernel TCP)
#    = testpmd (core 0, io forwarding): port 0 net_tap (iface=$VM_TAP),
#      port 1 net_virtio_user (server mode) <-- $TB_DIR/vm1.sock
#                             port vm1 (dpdkvhostuserclient), ofport 2
#
# testpmd cannot run TCP, so the "VM" is its forwarding between a kernel
# tap device (DPDK net_tap, created by testpmd inside $VM_NS: the test
# runs testpmd there, so the tap never exists in another namespace) and
# the virtio-user device that OVS's vhost-user port serves, as a guest's
# virtio-net device would be.  Rules: in_port=phy -> vm1, in_port=vm1 ->
# phy; nothing else.  No IPv6 and permanent neighbour entries on both
# sides: only the test's TCP frames cross the switch.
#
# Events, installed before any traffic, all group=5tuple, 10 ms: on
# filter=tcp sum(packets) > 0, sum(bytes) > 0, max(seq) >= 0,
# max(ack) >= 0, max(rwnd) > 0, min(rwnd) >= 0; max(rtt) >= 0 on
# connection 1's port, sum(is_lost) > 0 on connection 2's (one event per
# direction each: a flow has room for 7 summaries).  The predicates are
# tests/tcp-kernel.sh's; ">= 0" reports every epoch in which the
# direction sent a frame.
#
# Two connections (tests/tcp-flow.py; client in $TB_NS1, server in the
# VM), each captured with nanosecond time stamps on both sides of the
# switch: "near" on $TB_IF1 and "far" on $VM_TAP inside the VM.
#   1 rr     40 requests of 100 bytes, each answered with 1000 bytes (one
#            segment each way), 12 ms apart, TCP_NODELAY: no frame of one
#            direction races one of the other, so both captures order the
#            rtt samples as the switch does.
#   2 bulk   two requests of 200 kB each answered with 600 kB, every 25th
#            data segment dropped by the receiver after the switch
#            (iptables, in the VM for the client's data and in $TB_NS1
#            for the VM's), so the monitor sees originals and
#            retransmissions in both directions.
# After each connection:
#   - the captures hold the same frames in each direction, in the same
#     order (tests/vm-tcp-check.py);
#   - sum(packets) and sum(bytes) per 5-tuple, over all epochs, equal the
#     captures' (tests/vhost-check.py, as tests/ovs-vhost.sh), and
#     testpmd's counters equal them: net_tap's RX (what the VM's kernel
#     sent) the VM's direction, virtio-user's RX (what OVS gave the VM)
#     the client's, and each port's TX the other's RX (io forwarding);
#   - sum(is_lost) of each direction equals the capture's
#     retransmissions (tests/pcap-tcp.py, as tcp-kernel.sh's scenario 1),
#     at least the receiver's drops in connection 2; every reported
#     max(rwnd) and min(rwnd) is a window the direction advertised
#     (scaled by the SYNs' shifts) and their extremes are the capture's
#     (as scenario 4);
#   - max(seq), max(ack) and, for connection 1, max(rtt) of each
#     direction against the captures (tests/vm-tcp-check.py): reported
#     in exactly the epochs the captures' times allow, seq the highest
#     segment end after a frame of that epoch and the final one at the
#     end, ack between the acknowledgements that certainly and that
#     possibly reached the switch before such a frame and the final one
#     at the end, rtt within the bounds of the latest sample before such
#     a frame: a sample as the switch measures it lies between the same
#     sample measured on the receiver's side and on the sender's side;
#   - tpm/stats counts exactly the frames of both connections, none
#     unparsed, nothing lost, no unfinished sweep.
# Without the VM's port on the monitor's PMD, ack and rtt would stay 0
# and rwnd unscaled: this is what a compute node needs for its VMs
# (docs/operations.md, "Running on a compute node with VMs").
#
# Helpers run on CPU 0 with the namespaces' receive processing steered
# there (RPS), as in tests/tcp-kernel.sh, and testpmd's lcores share
# CPU 0; OVS's PMD has CPU 1.
#
# Teardown on any exit: testpmd is asked to quit through its FIFO, then
# killed by PID, its DPDK runtime directory removed (the tap goes with
# it); then tests/testbed.sh's teardown (daemons, namespaces, work
# directory).
#
# Automake test protocol: exit 0 pass, 1 fail, 77 skip (not root, OVS not
# built, dpdk-testpmd or other tools missing).  Environment: top_srcdir,
# top_builddir (the build tree, holding ovs/), PYTHON3, TESTPMD (default
# dpdk-testpmd, package dpdk-dev); TB_KEEP=1 keeps the work directory.
# Run by hand:
#   top_srcdir=$PWD top_builddir=$PWD/build bash tests/ovs-vm-tcp.sh
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=$(cd "${top_builddir:-$top_srcdir/build}" && pwd)
# shellcheck source=tests/testbed.sh
. "$top_srcdir/tests/testbed.sh"

FLOW=$top_srcdir/tests/tcp-flow.py
PCAP_TCP=$top_srcdir/tests/pcap-tcp.py
VHOST_CHECK=$top_srcdir/tests/vhost-check.py
CHECK=$top_srcdir/tests/vm-tcp-check.py
TESTPMD=${TESTPMD:-dpdk-testpmd}
TB_HELPER_CPU=${TB_HELPER_CPU:-0}
IN_NS=(taskset -c "$TB_HELPER_CPU" ip netns exec)

VM_MAC=02:99:00:00:00:0a
VM_IP=10.99.0.10
RING=1024

VM_FD=
VM_PID=
EXPECT=()                       # --flow arguments of vhost-check.py.
TOTAL_PK=0
TOTAL_BT=0

trap '' PIPE

# vm_start: testpmd in $VM_NS (interactive, its stdin the FIFO
# $TB_DIR/vm1.in, output in $TB_DIR/vm1.out): port 0 the tap $VM_TAP,
# port 1 a virtio-user device in server mode on $TB_DIR/vm1.sock, io
# forwarding between them.  Returns once the socket exists.
vm_start() {
    local fifo=$TB_DIR/vm1.in fd virtio
    virtio=net_virtio_user0,path=$TB_DIR/vm1.sock,server=1,queues=1
    virtio=$virtio,queue_size=$RING
    mkfifo "$fifo"
    ip netns exec "$VM_NS" stdbuf -o0 -e0 "$TESTPMD" --lcores=0@0,1@0 \
        --no-huge -m 256 --no-pci "--file-prefix=${TB_TAG}vm1" \
        "--vdev=net_tap0,iface=$VM_TAP,mac=$VM_MAC" \
        "--vdev=$virtio" \
        -- -i --no-mlockall --total-num-mbufs=8192 "--rxd=$RING" \
        "--txd=$RING" --forward-mode=io \
        <"$fifo" >"$TB_DIR/vm1.out" 2>&1 &
    VM_PID=$!
    exec {fd}>"$fifo"
    VM_FD=$fd
    tb_wait_for 30 test -S "$TB_DIR/vm1.sock" \
        || tb_fail "testpmd made no socket:" \
                   "$(tail -n 20 "$TB_DIR/vm1.out")"
}

vm_cmd() {
    printf '%s\n' "$1" 1>&"$VM_FD"
}

vm_blocks() {
    grep -c '^ *#\+ *$' "$TB_DIR/vm1.out" || true
}

vm_blocks_over() {
    [ "$(vm_blocks)" -gt "$1" ]
}

# vm_stats: testpmd's counters of both ports: P0_RXP P0_RXB P0_TXP P0_TXB
# (the tap) and P1_* (virtio-user).
vm_stats() {
    local n
    n=$(vm_blocks)
    vm_cmd "show port stats all"
    tb_wait_for 10 vm_blocks_over $((n + 1)) \
        || tb_fail "no answer to 'show port stats all':" \
                   "$(tail -n 20 "$TB_DIR/vm1.out")"
    read -r P0_RXP P0_RXB P0_TXP P0_TXB P1_RXP P1_RXB P1_TXP P1_TXB < <(
        awk '
        /NIC statistics for port/ { port = $(NF - 1) + 0 }
        /RX-packets:/ { s[port] = $2 " " $6 }
        /TX-packets:/ { s[port] = s[port] " " $2 " " $6 }
        END { print s[0], s[1] }' "$TB_DIR/vm1.out")
    [ -n "${P1_TXB:-}" ] \
        || tb_fail "cannot read 'show port stats all':" \
                   "$(tail -n 20 "$TB_DIR/vm1.out")"
}

# vm_down: stops testpmd (quit through its FIFO, then SIGKILL by PID
# after 10 s) and removes its DPDK runtime directory.
vm_down() {
    if [ -n "$VM_FD" ]; then
        printf 'stop\nquit\n' 2>/dev/null 1>&"$VM_FD" || true
        eval "exec $VM_FD>&-"
        VM_FD=
    fi
    if [ -n "$VM_PID" ]; then
        if ! tb_wait_pid_gone "$VM_PID" 100; then
            tb_log "warning: testpmd (pid $VM_PID) did not quit; SIGKILL"
            kill -9 "$VM_PID" 2>/dev/null || true
        fi
        wait "$VM_PID" 2>/dev/null || true
        rm -rf "/var/run/dpdk/${TB_TAG}vm1"
        VM_PID=
    fi
}

vt_down() {
    local rc=$?
    set +eE
    trap - ERR
    vm_down
    (exit "$rc")
    tb_down
}

vm_ready() {
    grep -q 'testpmd> ' "$TB_DIR/vm1.out"
}

port_up() {
    [ "$(tb_vsctl get Interface vm1 link_state 2>/dev/null)" = up ]
}

one_pmd_both_ports() {
    [ "$(tb_rxq_layout 2>/dev/null | tr '\n' ' ')" = "1 phy 1 vm1 " ]
}

# rps NS DEV: DEV's receive processing in NS on the helpers' CPU.
rps() {
    local mask
    mask=$(printf '%x' $((1 << TB_HELPER_CPU)))
    ip netns exec "$1" \
        sh -c "echo $mask > /sys/class/net/$2/queues/rx-0/rps_cpus" \
        || tb_fail "cannot set RPS on $2 in $1"
}

# vt_up: the switch, the phy namespace and port, the VM (namespace,
# testpmd, its tap configured) and its port, both rx queues on the one
# PMD, the rules, the events.
vt_up() {
    VM_NS=${TB_TAG}vm
    VM_TAP=${TB_TAG}t0
    tb_switch_up
    tb_netns_setup "$TB_NS1" "$TB_IF1" "$TB_HIF1" "$TB_MAC1" "$TB_IP1" \
        "$VM_IP" "$VM_MAC"
    rps "$TB_NS1" "$TB_IF1"
    tb_vsctl add-br "$TB_BR" -- set bridge "$TB_BR" datapath_type=netdev \
        fail-mode=secure \
        -- add-port "$TB_BR" phy -- set Interface phy type=dpdk \
           "options:dpdk-devargs=net_af_packet0,iface=$TB_HIF1" \
           ofport_request=1 other_config:pmd-rxq-affinity=0:1
    tb_port_ok phy
    tb_wait_for 30 tb_pmd_ready \
        || tb_fail "no PMD thread with a monitor in tpm/stats after 30 s"

    # The VM's namespace has no IPv6 before its tap exists.
    tb_netns "$VM_NS"
    ip netns exec "$VM_NS" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
        net.ipv6.conf.default.disable_ipv6=1
    vm_start
    tb_vsctl add-port "$TB_BR" vm1 -- set Interface vm1 \
        type=dpdkvhostuserclient \
        "options:vhost-server-path=$TB_DIR/vm1.sock" ofport_request=2 \
        other_config:pmd-rxq-affinity=0:1
    tb_port_ok vm1
    tb_wait_for 30 vm_ready \
        || tb_fail "no testpmd prompt within 30 s:" \
                   "$(tail -n 20 "$TB_DIR/vm1.out")"
    tb_wait_for 30 port_up \
        || tb_fail "vm1: link not up in OVS within 30 s:" \
                   "$(tb_vsctl get Interface vm1 status)"
    ip -n "$VM_NS" link show "$VM_TAP" >/dev/null 2>&1 \
        || tb_fail "testpmd's tap $VM_TAP is not in $VM_NS:" \
                   "$(tail -n 20 "$TB_DIR/vm1.out")"
    ip netns exec "$VM_NS" ethtool -K "$VM_TAP" tx off tso off gso off \
        >/dev/null 2>&1 || true
    ip -n "$VM_NS" link set "$VM_TAP" address "$VM_MAC"
    ip -n "$VM_NS" addr add "$VM_IP/24" dev "$VM_TAP"
    ip -n "$VM_NS" link set "$VM_TAP" up
    ip -n "$VM_NS" neigh replace "$TB_IP1" lladdr "$TB_MAC1" \
        dev "$VM_TAP" nud permanent
    rps "$VM_NS" "$VM_TAP"

    tb_wait_for 30 one_pmd_both_ports \
        || tb_fail "phy and vm1 not both on the PMD of core 1:" \
                   "$(tb_appctl dpif-netdev/pmd-rxq-show)"
    tb_log "  rx queues (dpif-netdev/pmd-rxq-show):"
    tb_appctl dpif-netdev/pmd-rxq-show | sed 's/^/    /'

    tb_ofctl add-flow "$TB_BR" in_port=1,actions=output:2
    tb_ofctl add-flow "$TB_BR" in_port=2,actions=output:1

    local f="filter=tcp" g="group=5tuple" i="interval=10ms"
    tb_event_add vt-pk "$f" "predicate=sum(packets) > 0" "$g" "$i"
    tb_event_add vt-bt "$f" "predicate=sum(bytes) > 0" "$g" "$i"
    tb_event_add vt-seq "$f" "predicate=max(seq) >= 0" "$g" "$i"
    tb_event_add vt-ack "$f" "predicate=max(ack) >= 0" "$g" "$i"
    tb_event_add vt-wmax "$f" "predicate=max(rwnd) > 0" "$g" "$i"
    tb_event_add vt-wmin "$f" "predicate=min(rwnd) >= 0" "$g" "$i"
    # Per connection, one event per direction (a flow has room for 7
    # summaries: both would make 8).
    tb_event_add vt-rtt-c "$f,tp_dst=5101" "predicate=max(rtt) >= 0" "$g" "$i"
    tb_event_add vt-rtt-s "$f,tp_src=5101" "predicate=max(rtt) >= 0" "$g" "$i"
    tb_event_add vt-lost-c "$f,tp_dst=5102" "predicate=sum(is_lost) > 0" \
        "$g" "$i"
    tb_event_add vt-lost-s "$f,tp_src=5102" "predicate=sum(is_lost) > 0" \
        "$g" "$i"
    vm_cmd start
    tb_log "test bed up: phy (af_packet) and vm1 (vhost-user; testpmd" \
           "io forwarding to a tap in $VM_NS) on one PMD, $TB_DPDK_MODE" \
           "memory for OVS"
}

# capture NAME NS DEV: tcpdump of DEV in NS (both directions, nanosecond
# time stamps) to $TB_DIR/NAME.pcap; returns when it listens; PID in
# CAP_PIDS[NAME].
declare -A CAP_PIDS=()
capture() {
    tb_bg "$TB_DIR/$1.tcpdump" "${IN_NS[@]}" "$2" tcpdump -Z root -n -U \
        --immediate-mode --time-stamp-precision=nano "${TB_TCPDUMP_RING[@]}" \
        -Q inout -i "$3" -w "$TB_DIR/$1.pcap"
    CAP_PIDS[$1]=$TB_BG_PID
    tb_wait_for 10 grep -qs 'listening on' "$TB_DIR/$1.tcpdump.err" \
        || tb_fail "$1: tcpdump did not start:" \
                   "$(cat "$TB_DIR/$1.tcpdump.err")"
}

# capture_end NAME: stops the capture; everything its filter received
# must be in the file.
capture_end() {
    tb_tcpdump_stop "${CAP_PIDS[$1]}" "$TB_DIR/$1.pcap" \
        "$TB_DIR/$1.tcpdump.err"
}

# flows NAME: the capture's 5-tuples as vhost-check.py --flow specs, one
# per line.
flows() {
    "$TB_PY" "$VHOST_CHECK" flows "$TB_DIR/$1.pcap" 2>"$TB_DIR/$1.flows.err" \
        || tb_fail "cannot read $1.pcap: $(cat "$TB_DIR/$1.flows.err")"
}

# server PORT ARGS...: tcp-flow.py server in the VM; SERVER_PID.
server() {
    tb_flow_server "$VM_NS" "$VM_IP" "$@"
}

reports() {
    tb_appctl tpm/reports
}

check_sums_quiet() {
    reports | "$TB_PY" "$VHOST_CHECK" check --pk vt-pk --bt vt-bt \
        "${EXPECT[@]}" --quiet
}

# conn_check NAME PORT SPORT DROPS_TO_VM DROPS_FROM_VM [rtt]: the checks
# listed at the top, for connection NAME (client port SPORT, server port
# PORT), rtt's with a 6th argument.
conn_check() {
    local name=$1 port=$2 sport=$3 drops_in=${4:-0} drops_out=${5:-0}
    local rtt=${6:-} near far f p b pk0=0 bt0=0 pk1=0 bt1=0 rc=0
    near=$(flows "$name-near")
    far=$(flows "$name-far")
    [ "$near" = "$far" ] \
        || tb_fail "$name: the captures differ: near $near; far $far"
    for f in $near; do
        IFS=: read -r _ _ _ _ _ p b <<<"$f"
        case $f in
        "$TB_IP1":*) pk0=$((pk0 + p)) bt0=$((bt0 + b)) ;;
        *) pk1=$((pk1 + p)) bt1=$((bt1 + b)) ;;
        esac
        EXPECT+=(--flow "$f")
        TOTAL_PK=$((TOTAL_PK + p)) TOTAL_BT=$((TOTAL_BT + b))
        tb_log "    captured $f"
    done
    [ "$(wc -w <<<"$near")" = 2 ] \
        || tb_fail "$name: expected the 2 directions of one connection:" \
                   "$near"

    # testpmd: port 0 (tap) RX is what the VM sent, port 1 (virtio-user)
    # RX what OVS gave it.
    vm_stats
    tb_log "  testpmd: tap RX $P0_RXP/$P0_RXB TX $P0_TXP/$P0_TXB;" \
           "virtio-user RX $P1_RXP/$P1_RXB TX $P1_TXP/$P1_TXB" \
           "(packets/bytes)"
    [ "$P1_RXP $P1_RXB $P0_RXP $P0_RXB" = "$pk0 $bt0 $pk1 $bt1" ] \
        || tb_fail "$name: testpmd's RX counters differ from the capture" \
                   "($pk0/$bt0 to the VM, $pk1/$bt1 from it)"
    [ "$P0_TXP $P0_TXB $P1_TXP $P1_TXB" = "$P1_RXP $P1_RXB $P0_RXP $P0_RXB" ] \
        || tb_fail "$name: testpmd did not forward everything it received"

    # The monitor's packets and bytes per 5-tuple, over all epochs.
    tb_wait_for 5 check_sums_quiet || true
    reports >"$TB_DIR/reports"
    "$TB_PY" "$VHOST_CHECK" check --pk vt-pk --bt vt-bt "${EXPECT[@]}" \
        <"$TB_DIR/reports" >"$TB_DIR/check-$name.txt" 2>&1 || rc=$?
    sed 's/^/    /' "$TB_DIR/check-$name.txt"
    [ "$rc" = 0 ] \
        || tb_fail "$name: sum(packets), sum(bytes) differ from the capture"

    # seq, ack (and rtt) against both captures; is_lost and rwnd against
    # tests/pcap-tcp.py's figures of the near capture.
    "$TB_PY" "$PCAP_TCP" --src "$TB_IP1" --sport "$sport" --dst "$VM_IP" \
        --dport "$port" "$TB_DIR/$name-near.pcap" >"$TB_DIR/$name-c.json"
    "$TB_PY" "$PCAP_TCP" --src "$VM_IP" --sport "$port" --dst "$TB_IP1" \
        --dport "$sport" "$TB_DIR/$name-near.pcap" >"$TB_DIR/$name-s.json"
    rc=0
    "$TB_PY" "$CHECK" --client "$TB_IP1:$sport" --server "$VM_IP:$port" \
        --near "$TB_DIR/$name-near.pcap" --far "$TB_DIR/$name-far.pcap" \
        --epoch-ns "$TB_EPOCH_NS" --seq vt-seq --ack vt-ack \
        ${rtt:+--rtt vt-rtt-c --rtt vt-rtt-s} --lost vt-lost-c \
        --lost vt-lost-s --wmax vt-wmax --wmin vt-wmin \
        --wire "$TB_DIR/$name-c.json" "$TB_DIR/$name-s.json" \
        --drops "$drops_in" "$drops_out" <"$TB_DIR/reports" \
        >"$TB_DIR/tcp-$name.txt" 2>&1 || rc=$?
    sed 's/^/  /' "$TB_DIR/tcp-$name.txt"
    [ "$rc" = 0 ] \
        || tb_fail "$name: the TCP variables differ from the captures"

    local st line
    st=$(tb_appctl tpm/stats)
    line=$(grep '^  packets:' <<<"$st")
    [ "$line" = "  packets: $TOTAL_PK (non-IP 0), bytes: $TOTAL_BT" ] \
        || tb_fail "$name: tpm/stats: '$line', expected $TOTAL_PK packets" \
                   "(non-IP 0), $TOTAL_BT bytes"
    grep -q '^  not parsed: 0 (' <<<"$st" \
        || tb_fail "$name: tpm/stats: $(grep 'not parsed' <<<"$st")"
    grep -q '^  lost data: none$' <<<"$st" \
        || tb_fail "$name: tpm/stats: $(grep 'lost data' <<<"$st")"
    tb_check_sweeps "$name"
}

# conn NAME PORT SERVER-ARGS -- CLIENT-ARGS: one connection between the
# namespace's client and the VM's server, captured on both sides; its
# client port in SPORT.
conn() {
    local name=$1 port=$2 sargs=() cargs=()
    shift 2
    while [ "$1" != -- ]; do sargs+=("$1"); shift; done
    shift
    cargs=("$@")
    vm_cmd "clear port stats all"
    server "$port" "${sargs[@]}"
    capture "$name-near" "$TB_NS1" "$TB_IF1"
    capture "$name-far" "$VM_NS" "$VM_TAP"
    "${IN_NS[@]}" "$TB_NS1" "$TB_PY" "$FLOW" client --dst "$VM_IP" \
        --port "$port" "${cargs[@]}" >"$TB_DIR/$name.json" \
        2>"$TB_DIR/$name.json.err" \
        || tb_fail "$name: tcp-flow.py client failed:" \
                   "$(cat "$TB_DIR/$name.json.err")"
    sleep 0.5
    capture_end "$name-near"
    capture_end "$name-far"
    tb_bg_stop "$SERVER_PID" || true
    SPORT=$(tb_json "$TB_DIR/$name.json" "d['conns'][0]['sport']")
}

ipt_count() {
    ip netns exec "$1" iptables -L INPUT -v -x -n | awk 'NR == 3 { print $1 }'
}

phase_rr() {
    local t0=$SECONDS
    tb_log "connection 1 (rr): 40 requests of 100 bytes, replies of 1000," \
           "12 ms apart"
    conn rr 5101 --request 100 --reply 1000 -- --requests 40 \
        --request 100 --reply 1000 --gap-ms 12 --nodelay
    conn_check rr 5101 "$SPORT" 0 0 rtt
    tb_log "PASS: connection 1: packets, bytes, is_lost, rwnd, seq, ack" \
           "and rtt of both directions against the captures" \
           "($((SECONDS - t0)) s)"
}

phase_bulk() {
    local t0=$SECONDS in out
    tb_log "connection 2 (bulk): 2 requests of 200 kB answered with" \
           "600 kB, every 25th data segment dropped by each receiver"
    ip netns exec "$VM_NS" iptables -A INPUT -s "$TB_IP1" -p tcp \
        --dport 5102 -m length --length 1000:65535 \
        -m statistic --mode nth --every 25 --packet 0 -j DROP
    ip netns exec "$TB_NS1" iptables -A INPUT -s "$VM_IP" -p tcp \
        --sport 5102 -m length --length 1000:65535 \
        -m statistic --mode nth --every 25 --packet 0 -j DROP
    conn bulk 5102 --request 200000 --reply 600000 -- --requests 2 \
        --request 200000 --reply 600000
    in=$(ipt_count "$VM_NS")
    out=$(ipt_count "$TB_NS1")
    [ "$in" -ge 5 ] && [ "$out" -ge 5 ] \
        || tb_fail "bulk: too few drops ($in to the VM, $out from it)"
    conn_check bulk 5102 "$SPORT" "$in" "$out"
    tb_log "PASS: connection 2: packets, bytes, is_lost, rwnd, seq and" \
           "ack of both directions against the captures" \
           "($((SECONDS - t0)) s)"
}

main() {
    local t0=$SECONDS tool
    tb_init
    for tool in "$TESTPMD" stdbuf iptables taskset; do
        command -v "$tool" >/dev/null 2>&1 \
            || tb_skip "$tool not found (packages dpdk-dev, coreutils," \
                       "iptables, util-linux)"
    done
    [ -c /dev/net/tun ] || tb_skip "no /dev/net/tun for DPDK's net_tap"
    trap vt_down EXIT
    vt_up
    tb_log "  set-up took $((SECONDS - t0)) s"
    phase_rr
    phase_bulk
    tb_log "PASS: TCP between a namespace and a VM's kernel over" \
           "vhost-user, both directions on one PMD, in $((SECONDS - t0)) s"
}

main "$@"
