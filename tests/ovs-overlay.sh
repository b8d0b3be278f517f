#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Overlay test of the Trumpet packet monitor inside Open vSwitch (DPDK,
# userspace datapath, native tunnelling): two tenants with the same inner
# addresses behind VXLAN and Geneve tunnels, their UDP flows counted by
# the monitor under the INNER 5-tuple and the tunnel id (VNI), compared
# exactly with captures taken at both ends of each tenant's overlay.
#
#  netns VM A         netns switch (ovs-vswitchd)              netns remote hv
#  10.0.0.1 fd00::1   bridge br-int (fail-mode=secure):        10.99.1.2
#  veth ==== vma      vma <-> tun, tun_id VNI A                fc00:99::2
#                     vmb <-> tun, tun_id VNI B                  veth ====+
#  netns VM B         tun: vxlan or geneve, key=flow,                     |
#  10.0.0.1 fd00::1   remote_ip 10.99.1.2 or fc00:99::2         phy0 ==== +
#  veth ==== vmb      bridge br-phy: phy0 (DPDK af_packet),    kernel VXLAN
#                     internal port 10.99.1.1, fc00:99::1      devices (or
#                     (the tunnel's source: OVS routes)        geneve-peer.py
#                                                              TAPs), moved to:
#  netns remote A: 10.0.0.2 fd00::2 on the VNI A device
#  netns remote B: 10.0.0.2 fd00::2 on the VNI B device
#
# The VM ports and the underlay port are DPDK net_af_packet ports on
# veths; the remote tunnel ends are kernel VXLAN devices created in the
# remote hypervisor's namespace (their UDP socket stays there) and moved
# into one namespace per remote tenant.  This kernel may have no Geneve
# device: the remote Geneve end is then tests/geneve-peer.py, a
# user-space endpoint with one TAP device per tenant (used in any case,
# so the test does not depend on the kernel's configuration).
#
# Phases, one tunnel at a time (port "tun" in br-int and the remote
# devices re-created for each):
#   vxlan4   VXLAN over IPv4, VNIs 5001 (A) and 5002 (B)
#   geneve4  Geneve over IPv4, VNIs 6001 and 6002
#   vxlan6   VXLAN over IPv6, VNIs 5101 and 5102
#   geneve6  Geneve over IPv6, VNIs 6101 and 6102
# Each phase: ping over both tenants' overlays, both ways, IPv4 and IPv6
# inside; then the monitor's events, and traffic in both directions at
# once (VM -> remote: OVS pushes the header; remote -> VM: it arrives
# encapsulated on phy0, OVS pops it): per tenant, direction and inner IP
# version two UDP flows, with the SAME 5-tuples in both tenants but other
# packet counts and sizes (tenant A 30 x 200 B, B 45 x 300 B, the other
# direction 33 x 220 B and 48 x 320 B, each second flow one more packet
# and 10 B more).  tcpdump on both VMs' interfaces and both remote tunnel
# devices gives the ground truth (tests/overlay-truth.py): per tenant,
# inner 5-tuple and direction, packets and bytes (the inner Ethernet
# frame); both ends of every flow must agree and match what was sent.
#
# The monitor (tests/overlay-reports.py compares, exactly, the sum of each
# event's reports per group with the truth): per phase
#   A-pk, A-bt   filter=nw_proto=17,tun_id=VNI_A, sum(packets) or
#                sum(bytes) > 0, group=5tuple: tenant A's 5-tuples, each
#                group {..., "tun_id": VNI_A}
#   B-pk, B-bt   the same for tenant B
#   all-pk, all-bt   no tun_id in the filter, group=5tuple: every 5-tuple
#                once per tenant, told apart by "tun_id" (never merged);
#                groups of the underlay (outer headers) are not compared
#   tun-pk, tun-bt   group=tun_id: {"tun_id": VNI}, each tenant's total
#   ul-pk, ul-bt     filter=nw_proto=17,tp_dst=TUNNEL_PORT,underlay,
#                group=5tuple: the tunnel's outer flows from the remote
#                hypervisor (whole frames, no tenant), against a capture
#                on its underlay port (every datagram to the tunnel port
#                after the events were installed; one captured while
#                they were being added may or may not have been counted,
#                so its flow's sum must lie between the two)
# The VM -> remote direction is counted when the VM's port receives the
# frame, before the push: its tenant is the port's
# other_config:tpm-tun-id, set here on both VM ports.
#
# Automake test protocol: exit 0 pass, 1 fail, 77 skip (not root, OVS not
# built, tools missing).  Environment: top_srcdir, top_builddir (the build
# tree, holding ovs/), PYTHON3; TB_KEEP=1 keeps the work directory;
# OVL_PHASES="vxlan4 geneve4 vxlan6 geneve6" chooses the phases.  Run by hand:
#   top_srcdir=$PWD top_builddir=$PWD/build bash tests/ovs-overlay.sh
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=$(cd "${top_builddir:-$top_srcdir/build}" && pwd)
# shellcheck source=tests/testbed.sh
. "$top_srcdir/tests/testbed.sh"

SEND=$top_srcdir/tests/overlay-send.py
GENEVE_PEER=$top_srcdir/tests/geneve-peer.py
TRUTH=$top_srcdir/tests/overlay-truth.py
COMPARE=$top_srcdir/tests/overlay-reports.py

UL4_SW=10.99.1.1
UL4_RH=10.99.1.2
UL6_SW=fc00:99::1
UL6_RH=fc00:99::2
IN4_VM=10.0.0.1
IN4_RT=10.0.0.2
IN6_VM=fd00::1
IN6_RT=fd00::2
MAC_PHY=02:99:01:00:00:01       # br-phy's internal port.
MAC_RH=02:99:01:00:00:02        # The remote hypervisor's underlay veth.
MAC_VM=02:99:00:00:01:01        # Both VMs (the tenants overlap in L2 too).
MAC_RT=02:99:00:00:01:02        # Both remote tenant devices.
TENANT_MTU=1400
TUN_OFPORT=10
# Traffic: packets, payload bytes of each tenant's first flow per
# direction; the second flow sends one more packet, 10 B more each.
TX_A=(30 200) RX_A=(33 220) TX_B=(45 300) RX_B=(48 320)
GAP_US=2000

MONITOR_FAILED=()               # Phases whose monitor comparison failed.

ovl_names() {
    NS_VMA=$TB_NS1
    NS_VMB=$TB_NS2
    NS_RH=${TB_TAG}rh
    NS_RTA=${TB_TAG}ra
    NS_RTB=${TB_TAG}rb
    IF_VMA=${TB_TAG}va
    IF_VMB=${TB_TAG}vb
    HIF_VMA=${TB_TAG}ha
    HIF_VMB=${TB_TAG}hb
    IF_UL=${TB_TAG}ur
    HIF_UL=${TB_TAG}us
    DEV_A=${TB_TAG}xa
    DEV_B=${TB_TAG}xb
    BR_PHY=${TB_TAG}bp
    BR_INT=${TB_TAG}bi
}

# ns_ipv6 NS: IPv6 on in NS, without stray traffic: no link-local address
# (so no router solicitation), no DAD, no RA.
ns_ipv6() {
    ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=0 \
        net.ipv6.conf.default.disable_ipv6=0 \
        net.ipv6.conf.default.addr_gen_mode=1 \
        net.ipv6.conf.default.accept_dad=0 \
        net.ipv6.conf.default.accept_ra=0 \
        net.ipv6.conf.default.router_solicitations=0
}

# dev_addrs NS DEV ADDR4 ADDR6 PEER4 PEER6 PEER_MAC: ADDR4/24 and
# ADDR6/64 (no DAD) on DEV in NS, DEV up, permanent neighbour entries for
# PEER4 and PEER6 at PEER_MAC (no ARP or ND during the test).
dev_addrs() {
    local ns=$1 dev=$2 addr4=$3 addr6=$4 peer4=$5 peer6=$6 peer_mac=$7
    ip -n "$ns" addr add "$addr4/24" dev "$dev"
    ip -n "$ns" addr add "$addr6/64" dev "$dev" nodad
    ip -n "$ns" link set "$dev" up
    ip -n "$ns" neigh replace "$peer4" lladdr "$peer_mac" dev "$dev" \
        nud permanent
    ip -n "$ns" neigh replace "$peer6" lladdr "$peer_mac" dev "$dev" \
        nud permanent
}

# host_up NS IF MAC MTU HIF ADDR4 ADDR6 PEER4 PEER6 PEER_MAC: namespace NS
# (tb_netns, IPv6 on) and its veth IF (MAC; MTU, or the default if empty)
# to HIF in the switch's namespace, offloads off at both ends (else
# checksums are left to a NIC that does not exist), dev_addrs on IF, HIF
# up.
host_up() {
    local ns=$1 if=$2 mac=$3 mtu=$4 hif=$5
    tb_netns "$ns"
    ns_ipv6 "$ns"
    ip link add "$if" netns "$ns" address "$mac" ${mtu:+mtu "$mtu"} \
        type veth peer name "$hif" netns "$TB_NSSW"
    ip netns exec "$ns" ethtool -K "$if" tx off tso off gso off >/dev/null
    ip netns exec "$TB_NSSW" ethtool -K "$hif" tx off tso off gso off \
        >/dev/null
    dev_addrs "$ns" "$if" "${@:6}"
    ip -n "$TB_NSSW" link set "$hif" up
}

# vm_up NS IF HIF: a VM namespace, its veth IF (inner addresses, MTU
# 1400, offloads off) to HIF in the switch's namespace, static neighbours.
vm_up() {
    host_up "$1" "$2" "$MAC_VM" "$TENANT_MTU" "$3" "$IN4_VM" "$IN6_VM" \
        "$IN4_RT" "$IN6_RT" "$MAC_RT"
}

route_known() {
    local routes
    routes=$(tb_appctl ovs/route/show 2>/dev/null) || return 1
    grep -q "10.99.1.0/24 dev $BR_PHY" <<<"$routes" \
        && grep -q "fc00:99::/64 dev $BR_PHY" <<<"$routes"
}

underlay_ping() {
    ip netns exec "$NS_RH" ping -c 1 -W 1 -q "$UL4_SW" >/dev/null 2>&1 \
        && ip netns exec "$NS_RH" ping -6 -c 1 -W 1 -q "$UL6_SW" \
            >/dev/null 2>&1
}

# ovl_up: the daemons, the namespaces, both bridges, the underlay (ping
# from the remote hypervisor to br-phy's addresses works).
ovl_up() {
    tb_switch_up
    vm_up "$NS_VMA" "$IF_VMA" "$HIF_VMA"
    vm_up "$NS_VMB" "$IF_VMB" "$HIF_VMB"
    tb_netns "$NS_RTA"
    ns_ipv6 "$NS_RTA"
    tb_netns "$NS_RTB"
    ns_ipv6 "$NS_RTB"

    # The underlay: the remote hypervisor's veth, static neighbours.
    host_up "$NS_RH" "$IF_UL" "$MAC_RH" "" "$HIF_UL" "$UL4_RH" "$UL6_RH" \
        "$UL4_SW" "$UL6_SW" "$MAC_PHY"

    tb_vsctl add-br "$BR_PHY" -- set bridge "$BR_PHY" datapath_type=netdev \
            "other_config:hwaddr=$MAC_PHY" \
        -- add-port "$BR_PHY" phy0 -- set Interface phy0 type=dpdk \
           "options:dpdk-devargs=net_af_packet0,iface=$HIF_UL" \
        -- add-br "$BR_INT" -- set bridge "$BR_INT" datapath_type=netdev \
            fail-mode=secure \
        -- add-port "$BR_INT" vma -- set Interface vma type=dpdk \
           "options:dpdk-devargs=net_af_packet1,iface=$HIF_VMA" \
           ofport_request=1 \
        -- add-port "$BR_INT" vmb -- set Interface vmb type=dpdk \
           "options:dpdk-devargs=net_af_packet2,iface=$HIF_VMB" \
           ofport_request=2
    tb_port_ok phy0 vma vmb
    # The tunnel's source: br-phy's internal port (a tap in the switch's
    # namespace), whose addresses and connected routes OVS learns.
    ip netns exec "$TB_NSSW" sysctl -qw \
        "net.ipv6.conf.$BR_PHY.disable_ipv6=0" \
        "net.ipv6.conf.$BR_PHY.addr_gen_mode=1" \
        "net.ipv6.conf.$BR_PHY.accept_dad=0"
    ip -n "$TB_NSSW" addr add "$UL4_SW/24" dev "$BR_PHY"
    ip -n "$TB_NSSW" addr add "$UL6_SW/64" dev "$BR_PHY" nodad
    ip -n "$TB_NSSW" link set "$BR_PHY" up
    tb_wait_for 30 route_known \
        || tb_fail "OVS learnt no route to 10.99.1.0/24 and fc00:99::/64" \
                   "via $BR_PHY: $(tb_appctl ovs/route/show 2>&1)"
    # The remote end's MAC for the pushed headers (no ARP or ND needed).
    tb_appctl tnl/neigh/set "$BR_PHY" "$UL4_RH" "$MAC_RH" >/dev/null
    tb_appctl tnl/neigh/set "$BR_PHY" "$UL6_RH" "$MAC_RH" >/dev/null
    tb_wait_for 30 tb_pmd_ready \
        || tb_fail "no PMD thread with a monitor in tpm/stats after 30 s"
    tb_wait_for 30 underlay_ping \
        || tb_fail "underlay: no ping from $UL4_RH to $UL4_SW and from" \
                   "$UL6_RH to $UL6_SW within 30 s"
}

# tenant_dev NS DEV: configures a remote tenant's tunnel device DEV,
# already in NS.
tenant_dev() {
    local ns=$1 dev=$2
    ip -n "$ns" link set "$dev" address "$MAC_RT" mtu "$TENANT_MTU"
    ip netns exec "$ns" ethtool -K "$dev" tx off >/dev/null 2>&1 || true
    dev_addrs "$ns" "$dev" "$IN4_RT" "$IN6_RT" "$IN4_VM" "$IN6_VM" "$MAC_VM"
}

peer_ready() {
    grep -q '^ready$' "$1"
}

# remote_up: the remote hypervisor's tunnel ends for the phase, one per
# tenant, moved into the remote tenants' namespaces.
remote_up() {
    PEER_PID=
    case $TYPE in
    vxlan)
        local csum=udpcsum
        [ "$UL_VER" = 4 ] || csum=
        ip -n "$NS_RH" link add "$DEV_A" type vxlan id "$VNI_A" \
            dstport 4789 remote "$UL_SW" local "$UL_RH" nolearning $csum
        ip -n "$NS_RH" link add "$DEV_B" type vxlan id "$VNI_B" \
            dstport 4789 remote "$UL_SW" local "$UL_RH" nolearning $csum
        ;;
    geneve)
        tb_bg "$P/geneve-peer.out" ip netns exec "$NS_RH" "$TB_PY" \
            "$GENEVE_PEER" --local "$UL_RH" --remote "$UL_SW" \
            --tap "$DEV_A:$VNI_A" --tap "$DEV_B:$VNI_B"
        PEER_PID=$TB_BG_PID
        tb_wait_for 10 peer_ready "$P/geneve-peer.out" \
            || tb_fail "$PHASE: geneve-peer.py did not start:" \
                       "$(cat "$P/geneve-peer.out.err")"
        ;;
    esac
    ip -n "$NS_RH" link set "$DEV_A" netns "$NS_RTA"
    ip -n "$NS_RH" link set "$DEV_B" netns "$NS_RTB"
    tenant_dev "$NS_RTA" "$DEV_A"
    tenant_dev "$NS_RTB" "$DEV_B"
}

# remote_down: the phase's remote tunnel ends go (geneve-peer.py's TAPs
# with it).
remote_down() {
    if [ -n "$PEER_PID" ]; then
        tb_bg_stop "$PEER_PID" TERM \
            || tb_fail "$PHASE: geneve-peer.py failed:" \
                       "$(cat "$P/geneve-peer.out.err")"
        PEER_PID=
        tb_log "  geneve-peer.py: $(tail -n 1 "$P/geneve-peer.out")"
    fi
    ip -n "$NS_RTA" link del "$DEV_A" 2>/dev/null || true
    ip -n "$NS_RTB" link del "$DEV_B" 2>/dev/null || true
}

# ping_ok NS ADDR: one ping (IPv4 or IPv6) from NS to ADDR answered.
ping_ok() {
    ip netns exec "$1" ping -c 1 -W 1 -q "$2" >/dev/null 2>&1
}

# overlay_pings: the overlay works for both tenants, both ways, IPv4 and
# IPv6 inside.
overlay_pings() {
    local ns addr
    for ns in "$NS_VMA" "$NS_VMB"; do
        for addr in "$IN4_RT" "$IN6_RT"; do
            tb_wait_for 15 ping_ok "$ns" "$addr" \
                || tb_fail "$PHASE: no ping from $ns to $addr over the" \
                           "tunnel within 15 s"
        done
    done
    for ns in "$NS_RTA" "$NS_RTB"; do
        for addr in "$IN4_VM" "$IN6_VM"; do
            tb_wait_for 5 ping_ok "$ns" "$addr" \
                || tb_fail "$PHASE: no ping from $ns to $addr over the" \
                           "tunnel within 5 s"
        done
    done
}

# event_add NAME DEFINITION...: adds a monitor event; a refusal is noted
# (REFUSED, for the comparison), not fatal: the build may not know
# tun_id yet.
event_add() {
    local name=$1 out
    shift
    if out=$(tb_appctl tpm/event-add "$name" "$@" 2>&1); then
        EVENTS_ADDED+=("$name")
    else
        out=$(grep -v '^ovs-appctl: ' <<<"$out" | tr '\n' ' ')
        REFUSED+=(--refused "$name=${out% }")
        tb_log "  note: tpm/event-add $name refused: $out"
    fi
}

# phase_events: the phase's events (see the top of the file); sets
# EVENT_SPECS for overlay-reports.py.
phase_events() {
    local e=ovl-$PHASE m tag vni
    EVENTS_ADDED=() REFUSED=() EVENT_SPECS=()
    for m in packets bytes; do
        tag=pk
        [ "$m" = packets ] || tag=bt
        for vni in "$VNI_A" "$VNI_B"; do
            event_add "$e-$vni-$tag" "filter=nw_proto=17,tun_id=$vni" \
                "predicate=sum($m) > 0" group=5tuple interval=10ms
            EVENT_SPECS+=(--event "$e-$vni-$tag:$m:$vni")
        done
        event_add "$e-all-$tag" "filter=nw_proto=17" \
            "predicate=sum($m) > 0" group=5tuple interval=10ms
        EVENT_SPECS+=(--event "$e-all-$tag:$m:all")
        event_add "$e-tun-$tag" "filter=nw_proto=17" \
            "predicate=sum($m) > 0" group=tun_id interval=10ms
        EVENT_SPECS+=(--event "$e-tun-$tag:$m:tun")
        event_add "$e-ul-$tag" \
            "filter=nw_proto=17,tp_dst=$TUN_PORT,underlay" \
            "predicate=sum($m) > 0" group=5tuple interval=10ms
        EVENT_SPECS+=(--event "$e-ul-$tag:$m:underlay")
    done
}

tcpdump_listening() {
    grep -qs 'listening on' "$1"
}

# capture NAME NS IF: tcpdump of IF's UDP in NS to $P/NAME.pcap (in the
# background; PID appended to CAP_PIDS).
capture() {
    tb_bg "$P/$1.tcpdump" ip netns exec "$2" tcpdump -Z root -n -U \
        -i "$3" -w "$P/$1.pcap" udp
    CAP_PIDS+=("$TB_BG_PID")
    tb_wait_for 10 tcpdump_listening "$P/$1.tcpdump.err" \
        || tb_fail "$PHASE: tcpdump on $3 did not start:" \
                   "$(cat "$P/$1.tcpdump.err")"
}

# sender NAME NS T0 SRC4 DST4 SRC6 DST6 SPORT DPORT COUNT SIZE: starts
# overlay-send.py in namespace NS at time T0 (output $P/send-NAME.json,
# PID appended to SEND_PIDS) with, per IP version, flow 1 (COUNT x SIZE
# B, SPORT -> DPORT) and flow 2 (COUNT + 1 x SIZE + 10 B, SPORT + 1 ->
# DPORT + 1).
sender() {
    local name=$1 ns=$2 t0=$3 k v src dst flows=()
    shift 3
    for v in 4 6; do
        if [ "$v" = 4 ]; then src=$1 dst=$2; else src=$3 dst=$4; fi
        for k in 0 1; do
            flows+=(--flow "$src,$(($5 + k)),$dst,$(($6 + k))")
            flows[-1]+=",$(($7 + k)),$(($8 + 10 * k)),$GAP_US"
        done
    done
    tb_bg "$P/send-$name.json" ip netns exec "$ns" "$TB_PY" "$SEND" \
        --start-ns "$t0" --linger-ms 500 "${flows[@]}"
    SEND_PIDS+=("$TB_BG_PID")
}

# traffic: the four senders at once (both tenants, both directions),
# captured at both ends of each tenant's overlay.
traffic() {
    local t0 pid name
    capture vmA "$NS_VMA" "$IF_VMA"
    capture vmB "$NS_VMB" "$IF_VMB"
    capture rtA "$NS_RTA" "$DEV_A"
    capture rtB "$NS_RTB" "$DEV_B"
    t0=$(($(tb_now_ns) + 1000000000))
    SEND_PIDS=()
    sender vmA "$NS_VMA" "$t0" "$IN4_VM" "$IN4_RT" "$IN6_VM" "$IN6_RT" \
        7001 8001 "${TX_A[@]}"
    sender vmB "$NS_VMB" "$t0" "$IN4_VM" "$IN4_RT" "$IN6_VM" "$IN6_RT" \
        7001 8001 "${TX_B[@]}"
    sender rtA "$NS_RTA" "$t0" "$IN4_RT" "$IN4_VM" "$IN6_RT" "$IN6_VM" \
        8001 7001 "${RX_A[@]}"
    sender rtB "$NS_RTB" "$t0" "$IN4_RT" "$IN4_VM" "$IN6_RT" "$IN6_VM" \
        8001 7001 "${RX_B[@]}"
    for pid in "${SEND_PIDS[@]}"; do
        tb_bg_wait "$pid" \
            || tb_fail "$PHASE: overlay-send.py failed:" \
                       "$(cat "$P"/send-*.json.err)"
    done
    local i=0
    for name in ul vmA vmB rtA rtB; do      # In the order of CAP_PIDS.
        tb_tcpdump_stop "${CAP_PIDS[i++]}" "$P/$name.pcap" \
            "$P/$name.tcpdump.err"
    done
}

# truth: the ground truth of the phase's captures ($P/truth.json).
truth() {
    if ! "$TB_PY" "$TRUTH" --vm-addr "$IN4_VM" --vm-addr "$IN6_VM" \
            --cap "A:$VNI_A:vm:$P/vmA.pcap" \
            --cap "A:$VNI_A:remote:$P/rtA.pcap" \
            --cap "B:$VNI_B:vm:$P/vmB.pcap" \
            --cap "B:$VNI_B:remote:$P/rtB.pcap" \
            --sent "A:$P/send-vmA.json" --sent "A:$P/send-rtA.json" \
            --sent "B:$P/send-vmB.json" --sent "B:$P/send-rtB.json" \
            --underlay "$P/ul.pcap:$UL_SW:$TUN_PORT:$UL_FROM:$UL_SURE" \
            --out "$P/truth.json" >"$P/truth.txt" 2>"$P/truth.err"; then
        sed 's/^/    /' "$P/truth.txt"
        tb_fail "$PHASE: the captures disagree (test bed, not monitor):" \
                "$(cat "$P/truth.err")"
    fi
    local n
    n=$(tb_json "$P/truth.json" "len(d['flows'])")
    [ "$n" = 16 ] \
        || tb_fail "$PHASE: the captures hold $n flows, expected 16:" \
                   "$(cat "$P/truth.txt")"
    tb_log "  ground truth (both ends agree, as sent):"
    sed 's/^/    /' "$P/truth.txt"
    n=$(tb_json "$P/truth.json" "d['underlay_unsure']")
    [ "$n" = 0 ] \
        || tb_log "  note: $n underlay datagrams captured while the events" \
                  "were added: their flows' underlay sums may or may not" \
                  "include them"
}

compare_quiet() {
    tb_appctl tpm/reports 2>/dev/null \
        | "$TB_PY" "$COMPARE" --truth "$P/truth.json" "${EVENT_SPECS[@]}" \
            "${REFUSED[@]}" --ignore-net 10.99.0.0/16 \
            --ignore-net fc00:99::/64 --quiet
}

# compare: the monitor's reports against the truth; a difference marks
# the phase failed (the test goes on with the next phase).
compare() {
    local rc=0
    [ "${#EVENTS_ADDED[@]}" = 0 ] || tb_wait_for 5 compare_quiet || true
    tb_appctl tpm/reports >"$P/reports.json"
    "$TB_PY" "$COMPARE" --truth "$P/truth.json" "${EVENT_SPECS[@]}" \
        "${REFUSED[@]}" --ignore-net 10.99.0.0/16 \
        --ignore-net fc00:99::/64 <"$P/reports.json" >"$P/compare.txt" \
        2>&1 || rc=$?
    sed 's/^/    /' "$P/compare.txt"
    local dropped
    dropped=$(tb_appctl tpm/stats | grep -o 'dropped [0-9]*;' \
              | grep -v 'dropped 0;' || true)
    if [ -n "$dropped" ]; then
        tb_log "  tpm/stats: reports $dropped"
        rc=1
    fi
    if [ "$rc" = 0 ]; then
        tb_log "PASS: $PHASE monitor: every event's sums per group equal" \
               "the captures exactly"
    else
        tb_log "FAIL: $PHASE monitor: reports differ from the captures" \
               "(table above: expected = captures, got = sum of reports)"
        MONITOR_FAILED+=("$PHASE")
    fi
}

# phase NAME: one tunnel type over one underlay (see the top).
phase() {
    PHASE=$1
    local t0=$SECONDS ev
    case $PHASE in
    vxlan4)  TYPE=vxlan  UL_VER=4 VNI_A=5001 VNI_B=5002 ;;
    geneve4) TYPE=geneve UL_VER=4 VNI_A=6001 VNI_B=6002 ;;
    vxlan6)  TYPE=vxlan  UL_VER=6 VNI_A=5101 VNI_B=5102 ;;
    geneve6) TYPE=geneve UL_VER=6 VNI_A=6101 VNI_B=6102 ;;
    *) tb_fail "unknown phase $PHASE" ;;
    esac
    TUN_PORT=4789
    [ "$TYPE" = vxlan ] || TUN_PORT=6081
    if [ "$UL_VER" = 4 ]; then
        UL_SW=$UL4_SW UL_RH=$UL4_RH
    else
        UL_SW=$UL6_SW UL_RH=$UL6_RH
    fi
    P=$TB_DIR/$PHASE
    mkdir -p "$P"
    tb_log "--- $PHASE: $TYPE over IPv$UL_VER ($UL_SW <-> $UL_RH)," \
           "tenant A VNI $VNI_A, tenant B VNI $VNI_B"

    # The switch: the tunnel port (csum: real outer UDP checksums, also
    # over IPv6, where a zero one is dropped), the VM ports' tenants, the
    # OpenFlow rules VM port <-> tunnel id.
    tb_vsctl add-port "$BR_INT" tun -- set Interface tun type="$TYPE" \
            "options:remote_ip=$UL_RH" options:key=flow options:csum=true \
            ofport_request=$TUN_OFPORT \
        -- set Interface vma "other_config:tpm-tun-id=$VNI_A" \
        -- set Interface vmb "other_config:tpm-tun-id=$VNI_B"
    tb_port_ok tun
    tb_ofctl del-flows "$BR_INT"
    tb_ofctl add-flow "$BR_INT" \
        "in_port=1,actions=set_field:$VNI_A->tun_id,output:$TUN_OFPORT"
    tb_ofctl add-flow "$BR_INT" \
        "in_port=2,actions=set_field:$VNI_B->tun_id,output:$TUN_OFPORT"
    tb_ofctl add-flow "$BR_INT" \
        "in_port=$TUN_OFPORT,tun_id=$VNI_A,actions=output:1"
    tb_ofctl add-flow "$BR_INT" \
        "in_port=$TUN_OFPORT,tun_id=$VNI_B,actions=output:2"
    remote_up
    overlay_pings
    tb_log "  ping over both tenants' overlays, both ways, IPv4 and IPv6:" \
           "OK"

    CAP_PIDS=()
    capture ul "$NS_RH" "$IF_UL"
    UL_FROM=$(tb_now_ns)
    phase_events
    UL_SURE=$(tb_now_ns)
    traffic
    truth
    tb_log "PASS: $PHASE test bed: 16 flows, both ends of each agree" \
           "and match the senders"
    compare

    for ev in "${EVENTS_ADDED[@]}"; do
        tb_event_del "$ev"
    done
    remote_down
    tb_vsctl del-port "$BR_INT" tun
    tb_log "  ($PHASE: $((SECONDS - t0)) s)"
}

main() {
    local t0=$SECONDS ph
    tb_init
    ovl_names
    ovl_up
    tb_log "test bed up in $((SECONDS - t0)) s (DPDK memory:" \
           "$TB_DPDK_MODE, work directory $TB_DIR)"
    for ph in ${OVL_PHASES:-vxlan4 geneve4 vxlan6 geneve6}; do
        phase "$ph"
    done
    if [ "${#MONITOR_FAILED[@]}" != 0 ]; then
        tb_fail "the monitor's reports differ from the captures in" \
                "phase(s) ${MONITOR_FAILED[*]} (tables above)"
    fi
    tb_log "all phases passed in $((SECONDS - t0)) s"
}

main "$@"
