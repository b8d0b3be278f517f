#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# vhost-user test bed: the Trumpet packet monitor inside Open vSwitch on
# virtual machines' ports, without a hypervisor.  Each "VM" is a
# dpdk-testpmd process whose only port is a virtio-user device (DPDK
# net_virtio_user, the guest side of vhost-user, in server mode) on a
# unix socket; OVS connects to it as a dpdkvhostuserclient port, the way
# DPDK and OVS test vhost-user without qemu.
#
#  netns $TB_NS1 ("phy")       netns $TB_NSSW (ovs-vswitchd)
#  10.99.0.1 $TB_IF1 ==veth== $TB_HIF1: port phy (DPDK af_packet), ofport 1
#                             bridge $TB_BR, fail-mode=secure, one PMD on
#                             core 1
#  testpmd vm1 (core 0)       port vm1 (dpdkvhostuserclient), ofport 2
#   virtio-user 02:99:00:00:00:0a "10.99.0.10"  <-- $TB_DIR/vm1.sock
#  testpmd vm2 (core 0)       port vm2 (dpdkvhostuserclient), ofport 3
#   virtio-user 02:99:00:00:00:0b "10.99.0.11"  <-- $TB_DIR/vm2.sock
#
# OpenFlow rules (nothing else is forwarded): in_port=phy -> vm1,
# in_port=vm1 -> phy, in_port=vm2 -> vm1; phase 4 replaces them with a
# security group (below).  Each testpmd runs interactively (-i), driven
# through a FIFO on its stdin; its port
# statistics ("show port stats 0", cleared before each phase) are the
# VM's counters.  Its forwarding lcore and main lcore share CPU 0 (OVS's
# PMD has core 1); its memory is plain (--no-huge, which DPDK backs with
# a memfd that the vhost-user backend can map), so no huge page is
# needed for the VMs; OVS's memory is tests/testbed.sh's choice.
#
# Events of the monitor, installed before any traffic, each a pair of
# sum(packets) and sum(bytes) > 0, 10 ms:
#   vh-pk, vh-bt       filter=any, group=5tuple: every flow;
#   vh-port-pk, -bt    group=in_port: one group per interface, named by
#                      it ("in_port": "vm1");
#   vh-p5-*            group=in_port,5tuple: each flow with its interface;
#   vh-vm1-*           filter=any,in_port=vm1: the flows vm1 sends;
#   vh-vm2-*           filter=any,in_port=vm2, added before port vm2
#                      exists (accepted with a note): counts from the
#                      moment the port is added.
# A flow's interface is where it enters the switch, told by its source
# address (10.99.0.1: phy, vm1's, vm2's).  Phases, each with other
# 5-tuples:
#   1 phy -> VM   tests/udp-send.py in $TB_NS1 sends three UDP flows to
#                 vm1 (10.99.0.1 -> 10.99.0.10, payloads of 0 to 1472
#                 bytes, 450 datagrams), captured by tcpdump on $TB_IF1
#                 (outgoing); vm1 in rxonly.  Truth: the capture, per
#                 5-tuple (packets, wire bytes), which must agree with
#                 what udp-send.py says it sent; vm1's RX-packets and
#                 RX-bytes must equal the capture's totals.
#   2 VM -> phy   vm1 sends a fixed number of frames: 3 rounds (VH_ROUNDS)
#                 of "start tx_first 15" (the txonly engine, 15 bursts of
#                 16 frames of 200 bytes, then rxonly) and "stop" once its
#                 TX counter settles: 720 frames of one 5-tuple
#                 (10.99.0.10:4001 -> 10.99.0.99:4002 given by
#                 --tx-ip/--tx-udp, to $TB_IF1's MAC by --eth-peer; the
#                 namespace does not own 10.99.0.99 and does not forward,
#                 so it drops them without an ICMP answer), captured by
#                 tcpdump on $TB_IF1 (incoming).  Truth: the capture;
#                 vm1's TX-packets and TX-bytes must equal its totals.
#   3 VM -> VM    vm2 sends 720 frames of 300 bytes the same way
#                 (10.99.0.11:4003 -> 10.99.0.10:4004) to vm1 (rxonly).
#                 Truth: vm2's TX counters, which must equal vm1's RX.
#   4 conntrack   a security group between phy and vm1, as on a VM's port
#                 (OVS's system-traffic.at idiom), zone 5, cookies 0xc*:
#                   table=0 ip,ct_state=-trk        ct(table=1,zone=5)
#                   table=1 ip,+trk+new,in_port=phy,udp,tp_dst=7001
#                                                   ct(commit,zone=5),vm1
#                           ip,+trk+est,in_port=phy vm1
#                           ip,+trk+est,in_port=vm1 phy
#                           ip,+trk (anything else) drop  (the ACL's)
#                 No ARP rule: the namespace has a permanent neighbour
#                 entry and testpmd sends none.  udp-send.py sends two
#                 allowed flows to port 7001 (200 and 150 datagrams) and
#                 one the ACL drops (100 to port 7002); vm1 answers with
#                 the 5tswap engine (MACs, addresses and ports swapped, the
#                 same length), the replies return as +est.  Each frame
#                 passes the datapath twice (recirculation after ct()).
#                 Truth: one capture on $TB_IF1 of both directions (the
#                 sender's flows as udp-send.py says, the replies equal to
#                 vm1's TX counters and mirroring the requests; vm1's RX
#                 equal to the allowed flows only), the denied flow
#                 included: the monitor counts what arrives at the switch,
#                 the drop comes after.  Then, from OVS: pmd-stats-show's
#                 "packets received" and "packet recirculations" both equal
#                 the phase's frames (every frame recirculated once, and
#                 counted by the monitor once); dpctl/dump-flows holds the
#                 recirc_id(0) flow ending in ct(zone=5),recirc(0x..) and
#                 flows of the recirculation; the rules' n_packets and
#                 n_bytes: table 0 every frame, "new" plus "established"
#                 from phy the allowed requests (each at least once), the
#                 reply rule the replies, the drop rule exactly the denied
#                 flow; dpctl/dump-conntrack zone=5 the two allowed
#                 connections only.
# After each phase the sums of the monitor's reports per group, over all
# epochs so far, must equal every phase's truth exactly, and no other
# group may be reported (tests/vhost-check.py); each interface's frames
# must equal what OVS counted received on its port (ovs-ofctl
# dump-ports); tpm/stats must count exactly the frames of all phases
# (packets and bytes), none unparsed, no lost data, no report dropped, no
# sweep unfinished.
#   5 VM gone     vm2 sends continuously (txonly) and is killed with
#                 SIGKILL in the middle: OVS sees its link go down (and
#                 loses the port's counters, which the vhost library
#                 kept); what OVS received from it before, which phase
#                 4's security group dropped (the drop rule's n_packets
#                 grow by exactly those frames once OVS's revalidators
#                 settle), must be counted, exactly, in every event.
# At the end port vm2 is deleted: tpm/event-show says
# the in_port=vm2 events see no port now, the log says they count
# nothing more, and their reports stay.
#
# What is compared: bytes are Ethernet frame lengths without CRC
# everywhere.  The monitor counts the frame as OVS received it (an
# af_packet frame from the veth, or the vhost-user descriptor chain
# without its virtio-net header), tcpdump's wire length is the frame the
# veth carried, and testpmd's virtio-user RX-bytes and TX-bytes are the
# mbufs' packet lengths, again without the virtio-net header and with no
# CRC (a virtio device has none).  Frames shorter than 60 bytes (UDP with
# up to 17 bytes of payload) are not padded on a veth, so they count as
# they are: 42 bytes for an empty datagram.  The monitor receives every
# frame at the port where it enters OVS: phy's rx in phase 1, vm1's and
# vm2's rx (OVS dequeuing from the VM's tx ring) in phases 2 and 3, and
# once only however often OVS recirculates it (phase 4).
#
# Rings: each virtio-user queue has 1024 descriptors (queue_size=1024,
# not the default 256), more than any phase sends a VM (450 frames in
# phases 1 and 4), so OVS finds room in vm1's receive ring even when
# testpmd does not poll for a while: CPU 0 is shared with udp-send.py,
# which busy-waits between its sends, and with whatever else runs on the
# machine; with 256, OVS dropped frames to vm1 (ovs_tx_failure_drops).
# tx_first does not retry a burst that finds the ring full (testpmd's
# retry is not offered with the rxonly engine), so a round sends at most
# 240 frames and the next round starts once OVS took them all.  Should
# frames still be refused (OVS's PMD descheduled for long), testpmd's TX
# counter (the frames the ring took) is the truth and a note says so.
#
# Teardown on any exit: each testpmd is asked to quit through its FIFO,
# then killed by PID; its DPDK runtime directory is removed; then
# tests/testbed.sh's teardown (daemons, namespaces, work directory with
# the sockets).
#
# Automake test protocol: exit 0 pass, 1 fail, 77 skip (not root, OVS not
# built, dpdk-testpmd or other tools missing).  Environment: top_srcdir,
# top_builddir (the build tree, holding ovs/), PYTHON3, TESTPMD (default
# dpdk-testpmd, package dpdk-dev); TB_KEEP=1 keeps the work directory;
# VH_ROUNDS=N rounds of 240 frames per VM sender (default 3).  Run by hand:
#   top_srcdir=$PWD top_builddir=$PWD/build bash tests/ovs-vhost.sh
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=$(cd "${top_builddir:-$top_srcdir/build}" && pwd)
# shellcheck source=tests/testbed.sh
. "$top_srcdir/tests/testbed.sh"

SEND=$top_srcdir/tests/udp-send.py
CHECK=$top_srcdir/tests/vhost-check.py
TESTPMD=${TESTPMD:-dpdk-testpmd}

VM1_MAC=02:99:00:00:00:0a
VM1_IP=10.99.0.10
VM2_MAC=02:99:00:00:00:0b
VM2_IP=10.99.0.11
SINK_IP=10.99.0.99              # Not the namespace's: dropped silently.
BURST=16
BURSTS=15                       # 240 frames a round,
RING=1024                       # in a ring of RING descriptors.
ROUNDS=${VH_ROUNDS:-3}
SEND_N=$((ROUNDS * BURSTS * BURST))
CT_ZONE=5                       # Phase 4's conntrack zone, the UDP
CT_ALLOWED=7001                 # port its ACL allows and one it drops.
CT_DENIED=7002
EV_PK=vh-pk
EV_BT=vh-bt
# Per-port events: NAME -> "GROUP FILTER" (vhost-check.py --group, the
# filter=): each installed as NAME-pk and NAME-bt.
declare -A PORT_EVS=(
    [vh-port]="in_port any"
    [vh-p5]="in_port,5tuple any"
    [vh-vm1]="5tuple any,in_port=vm1"
    [vh-vm2]="5tuple any,in_port=vm2"
)

declare -A VM_FD=() VM_PID=()
EXPECT=()                       # --flow arguments of vhost-check.py.
PORT_FLOWS=()                   # The same flows as PORT@FLOW.
declare -A PORT_PK=([phy]=0 [vm1]=0 [vm2]=0)    # Frames each port
                                                # received, by the truth.
TOTAL_PK=0                      # Frames of every phase so far.
TOTAL_BT=0

# A write to the FIFO of a testpmd that died fails (and set -e fails the
# test) instead of killing the shell.
trap '' PIPE

# vm_start NAME SOCKET MAC TESTPMD-APP-ARGS...: starts testpmd NAME
# (interactive, its stdin the FIFO $TB_DIR/NAME.in, held open by this
# shell; output in $TB_DIR/NAME.out) with a virtio-user port in server
# mode on SOCKET.  testpmd waits for OVS to connect before its prompt.
vm_start() {
    local name=$1 sock=$2 mac=$3 fifo=$TB_DIR/$1.in fd
    shift 3
    mkfifo "$fifo"
    stdbuf -o0 -e0 "$TESTPMD" --lcores=0@0,1@0 --no-huge -m 256 \
        --no-pci "--file-prefix=${TB_TAG}$name" \
        "--vdev=net_virtio_user0,path=$sock,server=1,queues=1,queue_size=$RING,mac=$mac" \
        -- -i --no-mlockall --total-num-mbufs=8192 "--burst=$BURST" \
        "--rxd=$RING" "--txd=$RING" \
        --forward-mode=rxonly "$@" <"$fifo" >"$TB_DIR/$name.out" 2>&1 &
    VM_PID[$name]=$!
    exec {fd}>"$fifo"
    VM_FD[$name]=$fd
    tb_wait_for 30 test -S "$sock" \
        || tb_fail "$name: testpmd made no socket $sock:" \
                   "$(tail -n 20 "$TB_DIR/$name.out")"
}

# vm_cmd NAME COMMAND: one command to testpmd NAME.
vm_cmd() {
    printf '%s\n' "$2" 1>&"${VM_FD[$1]}"
}

# vm_blocks NAME: the number of "show port stats" outputs of testpmd NAME
# so far (each ends with a line of '#' only).
vm_blocks() {
    grep -c '^ *#\+ *$' "$TB_DIR/$1.out" || true
}

vm_blocks_over() {
    [ "$(vm_blocks "$1")" -gt "$2" ]
}

# vm_stats NAME: testpmd NAME's port counters into VM_RXP, VM_RXB,
# VM_TXP, VM_TXB.
vm_stats() {
    local n
    n=$(vm_blocks "$1")
    vm_cmd "$1" "show port stats 0"
    tb_wait_for 10 vm_blocks_over "$1" "$n" \
        || tb_fail "$1: no answer to 'show port stats 0':" \
                   "$(tail -n 20 "$TB_DIR/$1.out")"
    read -r VM_RXP VM_RXB VM_TXP VM_TXB < <(awk '
        /NIC statistics for port/ { rxp = rxb = txp = txb = "" }
        /RX-packets:/ { rxp = $2; rxb = $6 }
        /TX-packets:/ { txp = $2; txb = $6 }
        /^ *#+ *$/ { last = rxp " " rxb " " txp " " txb }
        END { print last }' "$TB_DIR/$1.out")
    [ -n "${VM_TXB:-}" ] \
        || tb_fail "$1: cannot read 'show port stats 0':" \
                   "$(tail -n 20 "$TB_DIR/$1.out")"
}

# vm_settle NAME FIELD: waits until FIELD (VM_RXP or VM_TXP) of testpmd
# NAME keeps its value for 0.5 s (10 s at most).
vm_settle() {
    local last=-1 i
    for i in $(seq 20); do
        vm_stats "$1"
        [ "${!2}" = "$last" ] && return 0
        last=${!2}
        sleep 0.5
    done
    tb_log "  note: $1's $2 still changing after 10 s"
}

# vm_down: stops every testpmd (quit through its FIFO, then SIGKILL by
# PID after 10 s) and removes its DPDK runtime directory.
vm_down() {
    local name pid
    for name in "${!VM_FD[@]}"; do
        printf 'stop\nquit\n' 2>/dev/null 1>&"${VM_FD[$name]}" || true
        eval "exec ${VM_FD[$name]}>&-"
    done
    VM_FD=()
    for name in "${!VM_PID[@]}"; do
        pid=${VM_PID[$name]}
        if ! tb_wait_pid_gone "$pid" 100; then
            tb_log "warning: testpmd $name (pid $pid) did not quit; SIGKILL"
            kill -9 "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
        rm -rf "/var/run/dpdk/${TB_TAG}$name"
    done
    VM_PID=()
}

# vh_down: the EXIT trap: the VMs, then tests/testbed.sh's teardown (with
# the exit status kept).
vh_down() {
    local rc=$?
    set +eE
    trap - ERR
    vm_down
    (exit "$rc")
    tb_down
}

vm_ready() {
    grep -q 'testpmd> ' "$TB_DIR/$1.out"
}

port_up() {
    [ "$(tb_vsctl get Interface "$1" link_state 2>/dev/null)" = up ]
}

# vm_port NAME OFPORT: adds the dpdkvhostuserclient port NAME to testpmd
# NAME's socket; returns when testpmd has its prompt and OVS sees the
# link up.
vm_port() {
    tb_vsctl add-port "$TB_BR" "$1" -- set Interface "$1" \
        type=dpdkvhostuserclient \
        "options:vhost-server-path=$TB_DIR/$1.sock" "ofport_request=$2"
    tb_port_ok "$1"
    tb_wait_for 30 vm_ready "$1" \
        || tb_fail "$1: no testpmd prompt within 30 s:" \
                   "$(tail -n 20 "$TB_DIR/$1.out")"
    tb_wait_for 30 port_up "$1" \
        || tb_fail "$1: link not up in OVS within 30 s:" \
                   "$(tb_vsctl get Interface "$1" status)"
}

# vh_up: the switch, the phy namespace and port, both VMs and their ports,
# the rules; then the monitor's events.
vh_up() {
    tb_switch_up
    tb_netns_setup "$TB_NS1" "$TB_IF1" "$TB_HIF1" "$TB_MAC1" "$TB_IP1" \
        "$VM1_IP" "$VM1_MAC"
    tb_vsctl add-br "$TB_BR" -- set bridge "$TB_BR" datapath_type=netdev \
        fail-mode=secure \
        -- add-port "$TB_BR" phy -- set Interface phy type=dpdk \
           "options:dpdk-devargs=net_af_packet0,iface=$TB_HIF1" \
           ofport_request=1
    tb_port_ok phy
    tb_wait_for 30 tb_pmd_ready \
        || tb_fail "no PMD thread with a monitor in tpm/stats after 30 s"

    vm_start vm1 "$TB_DIR/vm1.sock" "$VM1_MAC" "--eth-peer=0,$TB_MAC1" \
        "--tx-ip=$VM1_IP,$SINK_IP" --tx-udp=4001,4002 --txpkts=200
    vm_port vm1 2
    # An event on an interface not added yet: accepted, with a note.
    port_events vh-vm2
    grep -q "note: no interface is named vm2 now" <<<"$EV_OUT" \
        || tb_fail "tpm/event-add in_port=vm2 before vm2 exists: no note:" \
                   "$EV_OUT"
    tb_log "  $EV_OUT"
    vm_start vm2 "$TB_DIR/vm2.sock" "$VM2_MAC" "--eth-peer=0,$VM1_MAC" \
        "--tx-ip=$VM2_IP,$VM1_IP" --tx-udp=4003,4004 --txpkts=300
    vm_port vm2 3

    tb_ofctl add-flow "$TB_BR" in_port=1,actions=output:2
    tb_ofctl add-flow "$TB_BR" in_port=2,actions=output:1
    tb_ofctl add-flow "$TB_BR" in_port=3,actions=output:2

    tb_event_add "$EV_PK" filter=any "predicate=sum(packets) > 0" \
        group=5tuple interval=10ms
    tb_event_add "$EV_BT" filter=any "predicate=sum(bytes) > 0" \
        group=5tuple interval=10ms
    port_events vh-port vh-p5 vh-vm1
    tb_log "test bed up: phy (af_packet), vm1 and vm2 (vhost-user," \
           "testpmd virtio-user), $TB_DPDK_MODE memory for OVS"
}

# port_events NAME...: installs the pairs of PORT_EVS NAME; the last
# reply in EV_OUT.
port_events() {
    local name group filter m tag
    for name in "$@"; do
        read -r group filter <<<"${PORT_EVS[$name]}"
        for m in packets bytes; do
            tag=pk
            [ "$m" = packets ] || tag=bt
            EV_OUT=$(tb_appctl tpm/event-add "$name-$tag" \
                     "filter=$filter" "predicate=sum($m) > 0" \
                     "group=$group" interval=10ms 2>&1) \
                || tb_fail "tpm/event-add $name-$tag: $EV_OUT"
        done
    done
}

tcpdump_listening() {
    grep -qs 'listening on' "$1"
}

# capture NAME DIRECTION: tcpdump on $TB_IF1 (in $TB_NS1), frames in
# DIRECTION (in, out), to $TB_DIR/NAME.pcap; PID in CAP_PID.
capture() {
    tb_bg "$TB_DIR/$1.tcpdump" ip netns exec "$TB_NS1" tcpdump -Z root \
        -n -U --immediate-mode "${TB_TCPDUMP_RING[@]}" -Q "$2" -i "$TB_IF1" \
        -w "$TB_DIR/$1.pcap"
    CAP_PID=$TB_BG_PID
    tb_wait_for 10 tcpdump_listening "$TB_DIR/$1.tcpdump.err" \
        || tb_fail "$1: tcpdump did not start:" \
                   "$(cat "$TB_DIR/$1.tcpdump.err")"
}

# capture_end NAME: stops the capture and reads its flows into FLOWS (one
# --flow spec each), their totals into CAP_PK, CAP_BT.
capture_end() {
    tb_tcpdump_stop "$CAP_PID" "$TB_DIR/$1.pcap" "$TB_DIR/$1.tcpdump.err"
    "$TB_PY" "$CHECK" flows "$TB_DIR/$1.pcap" >"$TB_DIR/$1.flows" \
        2>"$TB_DIR/$1.flows.err" \
        || tb_fail "$1: cannot read the capture:" \
                   "$(cat "$TB_DIR/$1.flows.err")"
    grep -q '^0 frames not IPv4' "$TB_DIR/$1.flows.err" \
        || tb_fail "$1: the capture holds other frames:" \
                   "$(cat "$TB_DIR/$1.flows.err")"
    mapfile -t FLOWS <"$TB_DIR/$1.flows"
    CAP_PK=0 CAP_BT=0
    local f
    for f in "${FLOWS[@]}"; do
        tb_log "    captured $f"
        IFS=: read -r _ _ _ _ _ p b <<<"$f"
        CAP_PK=$((CAP_PK + p)) CAP_BT=$((CAP_BT + b))
    done
}

# flow_port SRC: the interface the flows of source address SRC enter by.
flow_port() {
    case $1 in
    "$TB_IP1") echo phy ;;
    "$VM1_IP") echo vm1 ;;
    "$VM2_IP") echo vm2 ;;
    *) tb_fail "no port sends from $1" ;;
    esac
}

# expect FLOW...: adds flows (SRC:SPORT:DST:DPORT:PROTO:PACKETS:BYTES) to
# what the monitor must have reported, and to the totals.
expect() {
    local f src p b port
    for f in "$@"; do
        EXPECT+=(--flow "$f")
        IFS=: read -r src _ _ _ _ p b <<<"$f"
        port=$(flow_port "$src")
        PORT_FLOWS+=("$port@$f")
        PORT_PK[$port]=$((PORT_PK[$port] + p))
        TOTAL_PK=$((TOTAL_PK + p)) TOTAL_BT=$((TOTAL_BT + b))
    done
}

# port_check_args NAME: vhost-check.py check's arguments for the pair
# of per-port events NAME (PORT_EVS).
port_check_args() {
    local group filter f only=
    read -r group filter <<<"${PORT_EVS[$1]}"
    [[ $filter == *in_port=* ]] && only=${filter##*in_port=}
    PC_ARGS=(--pk "$1-pk" --bt "$1-bt" --group "$group")
    for f in "${PORT_FLOWS[@]}"; do
        if [ -z "$only" ]; then
            PC_ARGS+=(--flow "$f")
        elif [ "${f%%@*}" = "$only" ]; then
            PC_ARGS+=(--flow "${f#*@}")
        fi
    done
}

# port_rx PORT: the frames OVS received on PORT (ovs-ofctl dump-ports).
port_rx() {
    local ofp
    ofp=$(tb_vsctl get Interface "$1" ofport)
    tb_ofctl dump-ports "$TB_BR" "$ofp" \
        | sed -n 's/.*rx pkts=\([0-9]*\),.*/\1/p'
}

# rule_settled COOKIE: true if the packets of rule COOKIE are the same as
# at the last call (RULE_LAST), which it stores; OVS's revalidators bring
# the datapath's counts to the rules every 500 ms.
rule_settled() {
    local n
    n=$(rule_stats "$1")
    n=${n%% *}
    [ "$n" = "${RULE_LAST:-}" ] && return 0
    RULE_LAST=$n
    sleep 0.6
    return 1
}

# ports_check PHASE: each per-port event against the truth, and each
# interface's frames against OVS's own count of what the port received.
ports_check() {
    local name rc port ofp rx
    for name in vh-port vh-p5 vh-vm1 vh-vm2; do
        port_check_args "$name"
        rc=0
        "$TB_PY" "$CHECK" check "${PC_ARGS[@]}" \
            <"$TB_DIR/reports-$1.json" >"$TB_DIR/check-$1-$name.txt" 2>&1 \
            || rc=$?
        [ "$rc" = 0 ] \
            || tb_fail "$1: per-port events $name-*: reports differ from" \
                       "the truth:" "$(cat "$TB_DIR/check-$1-$name.txt")"
    done
    tb_log "    per-port events (group=in_port, in_port,5tuple," \
           "in_port=vm1, in_port=vm2): every group exact"
    tb_ofctl dump-ports "$TB_BR" >"$TB_DIR/ports-$1.txt"
    for port in phy vm1 vm2; do
        ofp=$(tb_vsctl get Interface "$port" ofport)
        rx=$(port_rx "$port")
        if [ -z "$rx" ] && [ -z "${VM_PID[$port]:-}" ] \
           && [ "$port" != phy ]; then
            continue            # Its VM is gone, and its counters.
        fi
        [ "$rx" = "${PORT_PK[$port]}" ] \
            || tb_fail "$1: OVS received $rx frames on $port (ofport $ofp)," \
                       "the truth says ${PORT_PK[$port]}:" \
                       "$(cat "$TB_DIR/ports-$1.txt")"
    done
    tb_log "    per port, truth = OVS's rx counters (dump-ports): phy" \
           "${PORT_PK[phy]}, vm1 ${PORT_PK[vm1]}, vm2 ${PORT_PK[vm2]}"
}

check_quiet() {
    tb_appctl tpm/reports 2>/dev/null \
        | "$TB_PY" "$CHECK" check --pk "$EV_PK" --bt "$EV_BT" \
            "${EXPECT[@]}" --quiet
}

# monitor_check PHASE: the reports (summed over all epochs so far) equal
# every phase's truth, and tpm/stats counts exactly the frames sent.
monitor_check() {
    local rc=0 st line
    tb_wait_for 5 check_quiet || true
    tb_appctl tpm/reports >"$TB_DIR/reports-$1.json"
    "$TB_PY" "$CHECK" check --pk "$EV_PK" --bt "$EV_BT" "${EXPECT[@]}" \
        <"$TB_DIR/reports-$1.json" >"$TB_DIR/check-$1.txt" 2>&1 || rc=$?
    sed 's/^/    /' "$TB_DIR/check-$1.txt"
    [ "$rc" = 0 ] \
        || tb_fail "$1: the monitor's reports differ from the truth" \
                   "(expected = truth, got = sum of reports)"
    ports_check "$1"
    st=$(tb_appctl tpm/stats)
    line=$(grep '^  packets:' <<<"$st")
    [ "$line" = "  packets: $TOTAL_PK (non-IP 0), bytes: $TOTAL_BT" ] \
        || tb_fail "$1: tpm/stats: '$line', expected $TOTAL_PK packets" \
                   "(non-IP 0), $TOTAL_BT bytes"
    grep -q '^  not parsed: 0 (' <<<"$st" \
        || tb_fail "$1: tpm/stats: frames not parsed:" \
                   "$(grep 'not parsed' <<<"$st")"
    grep -q '^  lost data: none$' <<<"$st" \
        || tb_fail "$1: tpm/stats: $(grep 'lost data' <<<"$st")"
    grep -q 'reports: [0-9]*, dropped 0;' <<<"$st" \
        || tb_fail "$1: tpm/stats: $(grep '  reports:' <<<"$st")"
    tb_check_sweeps "$1"
    tb_log "PASS: $1: monitor = truth for every 5-tuple; tpm/stats:" \
           "$TOTAL_PK frames, $TOTAL_BT bytes, all parsed, nothing lost"
}

# captured SPEC: true if FLOWS (capture_end's) holds SPEC.
captured() {
    local f
    for f in "${FLOWS[@]}"; do
        [ "$f" = "$1" ] && return 0
    done
    return 1
}

# sent_check PHASE JSON SENT: udp-send.py's output JSON says it sent SENT
# ("PACKETS/ERRORS" per flow, in order), and FLOWS (the capture) holds
# each of its flows with exactly its packets and wire bytes (42 bytes of
# headers a datagram).  SENT_FLOWS: those flows, as --flow specs.
sent_check() {
    local sent f
    sent=$(tb_json "$2" \
        "' '.join('%d/%d' % (f['packets'], f['errors']) for f in d['flows'])")
    [ "$sent" = "$3" ] \
        || tb_fail "$1: udp-send.py sent (packets/errors) $sent, not $3"
    read -r -a SENT_FLOWS < <(tb_json "$2" \
        "' '.join('$TB_IP1:%d:$VM1_IP:%d:17:%d:%d' % (f['sport'], f['dport'], f['packets'], f['packets'] * 42 + f['payload']) for f in d['flows'])")
    for f in "${SENT_FLOWS[@]}"; do
        captured "$f" \
            || tb_fail "$1: udp-send.py sent $f; captured: ${FLOWS[*]}"
    done
}

# phase_phy_to_vm: see the top (phase 1).
phase_phy_to_vm() {
    local t0=$SECONDS pid
    tb_log "phase 1: phy -> VM (udp-send.py in $TB_NS1 -> vm1, rxonly)"
    vm_cmd vm1 "clear port stats all"
    vm_cmd vm1 start
    capture phy-to-vm out
    tb_bg "$TB_DIR/send1.json" ip netns exec "$TB_NS1" "$TB_PY" "$SEND" \
        --src "$TB_IP1" --dst "$VM1_IP" --linger-ms 300 \
        --flow 5001:6001:200:0,18,100,1472:200 \
        --flow 5002:6002:150:r1-1400:200 \
        --flow 5003:6003:100:17,60:300
    pid=$TB_BG_PID
    tb_bg_wait "$pid" \
        || tb_fail "phase 1: udp-send.py failed: $(cat "$TB_DIR/send1.json.err")"
    sleep 0.2
    capture_end phy-to-vm
    [ "${#FLOWS[@]}" = 3 ] \
        || tb_fail "phase 1: ${#FLOWS[@]} flows captured, expected 3"
    sent_check "phase 1" "$TB_DIR/send1.json" "200/0 150/0 100/0"
    vm_settle vm1 VM_RXP
    vm_cmd vm1 stop
    tb_log "  vm1 (testpmd): RX-packets $VM_RXP, RX-bytes $VM_RXB;" \
           "capture: $CAP_PK frames, $CAP_BT bytes"
    [ "$VM_RXP $VM_RXB" = "$CAP_PK $CAP_BT" ] \
        || tb_fail "phase 1: vm1 received $VM_RXP frames, $VM_RXB bytes;" \
                   "the capture holds $CAP_PK, $CAP_BT (OVS port vm1:" \
                   "$(tb_vsctl get Interface vm1 statistics))"
    expect "${FLOWS[@]}"
    monitor_check "phase 1"
    tb_log "  phase 1 took $((SECONDS - t0)) s"
}

# vm_send NAME: testpmd NAME sends ROUNDS x BURSTS bursts of BURST frames
# (per round "start tx_first BURSTS", then rxonly until its TX counter
# settles, then "stop"); VM_TXP, VM_TXB.
vm_send() {
    local r
    vm_cmd "$1" "clear port stats all"
    for ((r = 0; r < ROUNDS; r++)); do
        vm_cmd "$1" "start tx_first $BURSTS"
        vm_settle "$1" VM_TXP
        vm_cmd "$1" stop
    done
    if [ "$VM_TXP" != "$SEND_N" ]; then
        tb_log "  note: $1 sent $VM_TXP frames of $SEND_N (ring full):" \
               "its TX counter is the truth"
    fi
}

# phase_vm_to_phy: see the top (phase 2).
phase_vm_to_phy() {
    local t0=$SECONDS
    tb_log "phase 2: VM -> phy (vm1 txonly, $SEND_N frames, -> capture" \
           "on $TB_IF1)"
    capture vm-to-phy in
    vm_send vm1
    sleep 0.3
    capture_end vm-to-phy
    tb_log "  vm1 (testpmd): TX-packets $VM_TXP, TX-bytes $VM_TXB;" \
           "capture: $CAP_PK frames, $CAP_BT bytes"
    [ "${FLOWS[*]}" = "$VM1_IP:4001:$SINK_IP:4002:17:$VM_TXP:$VM_TXB" ] \
        || tb_fail "phase 2: captured ${FLOWS[*]}, vm1 sent" \
                   "$VM1_IP:4001:$SINK_IP:4002:17:$VM_TXP:$VM_TXB" \
                   "(OVS port phy: $(tb_vsctl get Interface phy statistics))"
    expect "${FLOWS[@]}"
    monitor_check "phase 2"
    tb_log "  phase 2 took $((SECONDS - t0)) s"
}

# phase_vm_to_vm: see the top (phase 3).
phase_vm_to_vm() {
    local t0=$SECONDS
    tb_log "phase 3: VM -> VM (vm2 txonly, $SEND_N frames, -> vm1 rxonly)"
    vm_cmd vm1 "clear port stats all"
    vm_cmd vm1 start
    vm_send vm2
    local txp=$VM_TXP txb=$VM_TXB
    vm_settle vm1 VM_RXP
    vm_cmd vm1 stop
    tb_log "  vm2 (testpmd): TX-packets $txp, TX-bytes $txb; vm1:" \
           "RX-packets $VM_RXP, RX-bytes $VM_RXB"
    [ "$VM_RXP $VM_RXB" = "$txp $txb" ] \
        || tb_fail "phase 3: vm2 sent $txp frames, $txb bytes; vm1" \
                   "received $VM_RXP, $VM_RXB (OVS port vm1:" \
                   "$(tb_vsctl get Interface vm1 statistics))"
    expect "$VM2_IP:4003:$VM1_IP:4004:17:$txp:$txb"
    monitor_check "phase 3"
    tb_log "  phase 3 took $((SECONDS - t0)) s"
}

# rule_stats COOKIE: "N_PACKETS N_BYTES" of the OpenFlow rule with COOKIE.
rule_stats() {
    tb_ofctl dump-flows "$TB_BR" "cookie=$1/-1" \
        | sed -n 's/.* n_packets=\([0-9]*\), n_bytes=\([0-9]*\),.*/\1 \2/p'
}

# rule_packets_are COOKIE N: true once rule COOKIE counted N packets (the
# revalidators push the datapath's statistics to the rules periodically).
rule_packets_are() {
    local st
    st=$(rule_stats "$1")
    [ "${st%% *}" = "$2" ]
}

# sg_rules: phase 4's security group between phy (ofport 1) and vm1
# (ofport 2) replaces every rule; cookies name the rules for rule_stats.
sg_rules() {
    local z=zone=$CT_ZONE
    tb_ofctl del-flows "$TB_BR"
    printf '%s\n' \
        "cookie=0xc0,table=0,priority=100,ip,ct_state=-trk,actions=ct(table=1,$z)" \
        "cookie=0xc1,table=1,priority=100,ip,ct_state=+trk+new,in_port=1,udp,tp_dst=$CT_ALLOWED,actions=ct(commit,$z),output:2" \
        "cookie=0xc2,table=1,priority=90,ip,ct_state=+trk+est,in_port=1,actions=output:2" \
        "cookie=0xc3,table=1,priority=90,ip,ct_state=+trk+est,in_port=2,actions=output:1" \
        "cookie=0xcd,table=1,priority=10,ip,ct_state=+trk,actions=drop" \
        >"$TB_DIR/sg.flows"
    tb_ofctl add-flows "$TB_BR" "$TB_DIR/sg.flows"
}

# phase_conntrack: see the top (phase 4).
phase_conntrack() {
    local t0=$SECONDS pid f k p b n_pk=0 ok_pk=0 ok_bt=0 rp_pk=0 rp_bt=0
    local st new est back drop
    local -A want=()
    tb_log "phase 4: conntrack security group phy <-> vm1 (UDP to port" \
           "$CT_ALLOWED allowed, to $CT_DENIED dropped; vm1 answers with" \
           "5tswap)"
    sg_rules
    # Carried out by the PMD itself at its next iteration, long before
    # the first frame (the capture takes a while to start).
    tb_appctl dpif-netdev/pmd-stats-clear >/dev/null
    vm_cmd vm1 "clear port stats all"
    vm_cmd vm1 "set fwd 5tswap"
    vm_cmd vm1 start
    capture conntrack inout
    # --linger-ms: the sockets stay bound while the replies come back, so
    # the namespace sends no ICMP port unreachable.
    tb_bg "$TB_DIR/send4.json" ip netns exec "$TB_NS1" "$TB_PY" "$SEND" \
        --src "$TB_IP1" --dst "$VM1_IP" --linger-ms 500 \
        --flow "5101:$CT_ALLOWED:200:0,18,100,1472:200" \
        --flow "5102:$CT_ALLOWED:150:r1-1400:200" \
        --flow "5103:$CT_DENIED:100:17,60:300"
    pid=$TB_BG_PID
    tb_bg_wait "$pid" \
        || tb_fail "phase 4: udp-send.py failed: $(cat "$TB_DIR/send4.json.err")"
    vm_settle vm1 VM_TXP
    vm_cmd vm1 stop
    vm_cmd vm1 "set fwd rxonly"
    sleep 0.2
    capture_end conntrack
    sent_check "phase 4" "$TB_DIR/send4.json" "200/0 150/0 100/0"

    # The requests (allowed and denied) and, for each allowed one, its
    # reply (5tswap's mirror image, of the same lengths): five flows.
    [ "${#FLOWS[@]}" = 5 ] \
        || tb_fail "phase 4: ${#FLOWS[@]} flows captured, expected 5:" \
                   "${FLOWS[*]}"
    for f in "${SENT_FLOWS[@]}"; do
        IFS=: read -r _ k _ _ _ _ _ <<<"$f"
        want[$k]=$f
    done
    for f in "${FLOWS[@]}"; do
        IFS=: read -r _ _ _ _ _ p b <<<"$f"
        n_pk=$((n_pk + p))
        case $f in
        "$TB_IP1":*:"$VM1_IP":"$CT_ALLOWED":*)
            ok_pk=$((ok_pk + p)) ok_bt=$((ok_bt + b)) ;;
        "$VM1_IP":"$CT_ALLOWED":"$TB_IP1":*)
            rp_pk=$((rp_pk + p)) rp_bt=$((rp_bt + b)) ;;
        esac
    done
    tb_log "  vm1 (testpmd 5tswap): RX-packets $VM_RXP, RX-bytes $VM_RXB," \
           "TX-packets $VM_TXP, TX-bytes $VM_TXB; capture: allowed" \
           "$ok_pk frames, $ok_bt bytes; replies $rp_pk, $rp_bt"
    [ "$VM_RXP $VM_RXB" = "$ok_pk $ok_bt" ] \
        || tb_fail "phase 4: vm1 received $VM_RXP frames, $VM_RXB bytes;" \
                   "the allowed flows' capture holds $ok_pk, $ok_bt (OVS" \
                   "port vm1: $(tb_vsctl get Interface vm1 statistics))"
    [ "$VM_TXP $VM_TXB" = "$rp_pk $rp_bt" ] \
        || tb_fail "phase 4: vm1 sent $VM_TXP frames, $VM_TXB bytes; the" \
                   "capture of its replies holds $rp_pk, $rp_bt (OVS port" \
                   "phy: $(tb_vsctl get Interface phy statistics))"
    if [ "$VM_TXP" = "$VM_RXP" ]; then
        for k in 5101 5102; do
            IFS=: read -r _ _ _ _ _ p b <<<"${want[$k]}"
            captured "$VM1_IP:$CT_ALLOWED:$TB_IP1:$k:17:$p:$b" \
                || tb_fail "phase 4: no reply mirroring ${want[$k]}:" \
                           "${FLOWS[*]}"
        done
    else
        tb_log "  note: vm1 answered $VM_TXP of $VM_RXP frames (ring" \
               "full): its TX counters are the replies' truth"
    fi
    expect "${FLOWS[@]}"
    monitor_check "phase 4"

    # Counted once although each frame went through the datapath twice:
    # OVS received n_pk frames and recirculated each once (ct(table=1)),
    # and the datapath's flows show both passes.
    st=$(tb_appctl dpif-netdev/pmd-stats-show | awk '
        /^  packets received:/ { rx += $3 }
        /^  packet recirculations:/ { rc += $3 }
        END { print rx + 0, rc + 0 }')
    [ "$st" = "$n_pk $n_pk" ] \
        || tb_fail "phase 4: pmd-stats-show: received and recirculated" \
                   "$st, expected $n_pk $n_pk:" \
                   "$(tb_appctl dpif-netdev/pmd-stats-show)"
    tb_appctl dpctl/dump-flows >"$TB_DIR/conntrack.dpflows"
    grep -q "recirc_id(0),.*actions:ct(zone=$CT_ZONE),recirc(0x" \
        "$TB_DIR/conntrack.dpflows" \
        || tb_fail "phase 4: no datapath flow recirculating after ct():" \
                   "$(cat "$TB_DIR/conntrack.dpflows")"
    grep -q "recirc_id(0x[0-9a-f]*[1-9a-f][0-9a-f]*)" \
        "$TB_DIR/conntrack.dpflows" \
        || tb_fail "phase 4: no datapath flow of a recirculation:" \
                   "$(cat "$TB_DIR/conntrack.dpflows")"
    tb_log "  OVS: $n_pk frames received, $n_pk recirculations" \
           "(pmd-stats-show); datapath flows (dpctl/dump-flows):"
    sed -e 's/,packet_type([^)]*)//' -e 's/eth([^)]*),//' \
        -e 's/ packets:.* actions:/ actions:/' -e 's/^/    /' \
        "$TB_DIR/conntrack.dpflows"

    # What the security group did, by its rules' counters: table 0 took
    # every frame; the allowed requests went through the "new" rule
    # (committed) and then the "established" one once vm1 had answered;
    # the replies through "established" back to phy; the denied flow's
    # frames, counted by the monitor as received, were dropped by the
    # ACL and left no connection.
    IFS=: read -r _ _ _ _ _ p b <<<"${want[5103]}"
    tb_wait_for 10 rule_packets_are 0xc0 "$n_pk" \
        || tb_fail "phase 4: table 0 did not count $n_pk frames:" \
                   "$(tb_ofctl dump-flows "$TB_BR")"
    tb_wait_for 10 rule_packets_are 0xcd "$p" \
        || tb_fail "phase 4: the drop rule did not count $p frames:" \
                   "$(tb_ofctl dump-flows "$TB_BR")"
    new=$(rule_stats 0xc1) est=$(rule_stats 0xc2) back=$(rule_stats 0xc3)
    drop=$(rule_stats 0xcd)
    tb_log "  rules (packets bytes): ct $(rule_stats 0xc0), new $new," \
           "established $est, replies $back, dropped $drop"
    [ "$drop" = "$p $b" ] \
        || tb_fail "phase 4: the drop rule counted $drop; the denied flow" \
                   "is ${want[5103]}"
    if [ "${new%% *}" -lt 2 ] || [ "${est%% *}" -lt 1 ] \
       || [ $((${new%% *} + ${est%% *})) != "$ok_pk" ] \
       || [ $((${new##* } + ${est##* })) != "$ok_bt" ]; then
        tb_fail "phase 4: new ($new) then established ($est) should add" \
                "up to the allowed requests ($ok_pk $ok_bt), new at least" \
                "once per flow"
    fi
    [ "$back" = "$rp_pk $rp_bt" ] \
        || tb_fail "phase 4: the replies' rule counted $back, expected" \
                   "$rp_pk $rp_bt"
    tb_appctl dpctl/dump-conntrack "zone=$CT_ZONE" >"$TB_DIR/conntrack.ct"
    tb_log "  connections (dpctl/dump-conntrack zone=$CT_ZONE):"
    sed 's/^/    /' "$TB_DIR/conntrack.ct"
    for k in 5101 5102; do
        grep -q "^udp,orig=(src=$TB_IP1,dst=$VM1_IP,sport=$k,dport=$CT_ALLOWED),reply=(src=$VM1_IP,dst=$TB_IP1,sport=$CT_ALLOWED,dport=$k),zone=$CT_ZONE" \
            "$TB_DIR/conntrack.ct" \
            || tb_fail "phase 4: no connection $k -> $CT_ALLOWED in zone" \
                       "$CT_ZONE"
    done
    ! grep -q "dport=$CT_DENIED" "$TB_DIR/conntrack.ct" \
        || tb_fail "phase 4: the denied flow has a connection"
    [ "$(wc -l <"$TB_DIR/conntrack.ct")" = 2 ] \
        || tb_fail "phase 4: connections other than the allowed two"
    tb_log "PASS: phase 4: every frame counted once despite ct()'s" \
           "recirculation; the ACL's $p dropped frames counted as received"
    tb_log "  phase 4 took $((SECONDS - t0)) s"
}

# phase_vm_gone: see the top (phase 5).
phase_vm_gone() {
    local t0=$SECONDS before n pid
    tb_log "phase 5: vm2 killed (SIGKILL) while it sends"
    before=$(rule_stats 0xcd)
    before=${before%% *}
    vm_cmd vm2 "set fwd txonly"
    vm_cmd vm2 start
    sleep 0.3
    pid=${VM_PID[vm2]}
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    eval "exec ${VM_FD[vm2]}>&-"
    unset 'VM_FD[vm2]' 'VM_PID[vm2]'
    rm -rf "/var/run/dpdk/${TB_TAG}vm2"
    tb_wait_for 10 eval '! port_up vm2' \
        || tb_fail "phase 5: OVS still sees vm2's link up after its VM died"
    RULE_LAST=
    tb_wait_for 10 rule_settled 0xcd \
        || tb_fail "phase 5: the drop rule's counter still moves after" \
                   "vm2's VM died"
    n=$((RULE_LAST - before))
    [ "$n" -gt 0 ] \
        || tb_fail "phase 5: vm2 sent nothing before it was killed"
    tb_log "  OVS dropped $n frames from vm2 (the security group's drop" \
           "rule) before its VM went away; its port's counters went with it"
    expect "$VM2_IP:4003:$VM1_IP:4004:17:$n:$((n * 300))"
    monitor_check "phase 5"
    tb_log "  phase 5 took $((SECONDS - t0)) s"
}

# port_removed: port vm2 deleted; the in_port=vm2 events see no port, say
# so, and keep their reports.
port_removed() {
    local show n
    tb_vsctl del-port "$TB_BR" vm2
    show=$(tb_appctl tpm/event-show vh-vm2-pk)
    grep -q "ports seen: vm2, which no port has now" <<<"$show" \
        || tb_fail "tpm/event-show after vm2 was deleted: $show"
    tb_wait_for 10 grep -q "vm2: port .* removed: 2 event(s)" \
        "$TB_DIR/vswitchd.log" \
        || tb_fail "no log line for the removal of vm2 (2 events name it)"
    n=$(tb_appctl tpm/reports | grep -c '"event":"vh-vm2-pk"' || true)
    [ "$n" -gt 0 ] \
        || tb_fail "the in_port=vm2 event's reports are gone after vm2"
    tb_log "PASS: vm2 deleted: tpm/event-show and the log say so, its" \
           "events' $n reports kept"
}

main() {
    local t0=$SECONDS
    tb_init
    command -v "$TESTPMD" >/dev/null 2>&1 \
        || tb_skip "$TESTPMD not found (package dpdk-dev)"
    command -v stdbuf >/dev/null 2>&1 \
        || tb_skip "stdbuf not found (package coreutils)"
    trap vh_down EXIT
    vh_up
    tb_log "  set-up took $((SECONDS - t0)) s"
    phase_phy_to_vm
    phase_vm_to_phy
    phase_vm_to_vm
    phase_conntrack
    phase_vm_gone
    port_removed
    tb_log "PASS: phy -> VM, VM -> phy, VM -> VM and a conntrack security" \
           "group over vhost-user counted exactly, in $((SECONDS - t0)) s"
}

main "$@"
