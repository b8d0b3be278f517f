#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The cost of the Trumpet packet monitor inside Open vSwitch's PMD, at full
# speed and without a NIC (docs/benchmarks.md, section 4; with --pvp,
# section 11).
#
#   sh tests/bootstrap.sh build && make -C build ovs ovs-stock
#   tpm/bench/bench-ovs.sh [--rounds N] [--seconds S] ...     (as root)
#   tpm/bench/bench-ovs.sh --pvp [--rounds N] ...      (and dpdk-testpmd)
#
# Three configurations, each run with fresh daemons, alternately
# (A B C A B C ...):
#   A  stock OVS 3.1.0 (build/ovs-stock: same tarball, configure arguments
#      and libraries, no patch and no glue: ovs-patches/stock.mk)
#   B  the patched OVS (build/ovs), no event installed
#   C  the patched OVS with 4096 events (512 nw_dst/24 prefixes x 8), every
#      packet's flow matching exactly 8 of them, 10 ms epochs
# One PMD thread on core 1 (pmd-cpu-mask=0x2) polls a DPDK net_pcap port
# replaying a generated pcap from memory forever (infinite_rx=1: 300
# UDP/IPv4 flows of 64-byte frames, round-robin) and forwards every packet
# (one OpenFlow rule in_port=1,actions=2) to a net_null port that discards
# it.  After a warm-up, dpif-netdev/pmd-stats-clear, S seconds, then
# dpif-netdev/pmd-perf-show: Kpps and cycles/pkt.  The table at the end
# gives every run, the medians and their ratios to stock.
#
# --vxlan: the same 300 inner flows (and events), each 64-byte frame in
# VXLAN (114 bytes: outer Ethernet, IPv4 10.99.0.2 -> 10.99.0.1, UDP to
# 4789 from a source port per inner flow, VNI 5001; --vnis N spreads the
# flows over N VNIs), and OVS's native tunnelling as on a hypervisor: the
# net_pcap port p1 on an underlay bridge br-phy (its MAC and its address
# 10.99.0.1/24 are the frames' outer destination, one rule
# actions=NORMAL), and the integration bridge br0 with a VXLAN port vx
# (remote_ip=flow, key=flow, OpenFlow port 1) and net_null p2 (the rule,
# in_port=1,actions=output:2).  Every packet thus takes two datapath
# passes: tnl_pop on br-phy's flow, then recirculation as if received on
# vx, and output to p2.  The monitor counts it once, on receipt, under its
# inner 5-tuple and tenant, having decapsulated it in its own parser
# (docs/operations.md, "Tenants in overlays").  Every run checks, and
# fails loudly otherwise: a datapath flow with tnl_pop and one from the
# tunnel (dpctl/dump-flows), about 2 datapath passes per packet
# (pmd-perf-show), p2 transmitted what p1 received (dpctl/show -s), and
# in C the monitor decapsulated every packet (tpm/stats, "tunnels:
# decapsulated") and its events matched (they match inner nw_dst).  (In
# B, with no event, the monitor does not look at the packets.)
#
# The daemons run in a network namespace of their own (the bridge's tap
# and the datapath's "ovs-netdev" tap live there) with a private directory
# /tmp/tpm-bench-ovs.XXXXXX (so "pgrep -f tpm-bench" sees them) and a
# unique DPDK --file-prefix.  No packet leaves the process: the addresses
# exist only in the pcap file.  Everything started is stopped on exit.
#
# PVP (--pvp): physical -> OVS -> VM -> OVS -> physical, the path of a
# hypervisor's switch.  The "VM" is a dpdk-testpmd (TESTPMD, package
# dpdk-dev) on core 0 whose only port is a virtio-user device (net_virtio_user,
# server mode, plain memory: --no-huge -m 256) in io forwarding with the
# loop topology (it sends every frame back on the port it came from,
# untouched), driven through a FIFO on its stdin as tests/ovs-vhost.sh
# does.  OVS reaches it through the dpdkvhostuserclient port vm (ofport 3)
# and forwards with two rules: in_port=1,actions=output:3 (net_pcap -> VM)
# and in_port=3,actions=output:2 (VM -> net_null).  The same PMD on core 1
# polls both rxqs (net_pcap's and vm's), so each packet passes OVS twice
# and the monitor sees it twice (at p1's rx and at vm's rx).  The VM is
# slower than OVS (it shares core 0 with everything else), so OVS drops
# part of the pcap port's packets at the VM's full ring (counted as the
# vm port's Tx drops); the PMD is busy all the time, and the ratios
# compare pmd-perf-show's Rx rate over both ports, i.e. TSC Hz over the
# busy cycles per Rx.  The table also gives the pcap port's rate, the
# round trips' rate (net_null's Tx) and their share.  Every run checks,
# over its window (one dpctl/show -s snapshot before and one after it),
# that every pcap packet went to the VM or was dropped at its full ring,
# that what came back from the VM reached net_null, that pmd-perf-show's
# Rx is the two ports' and that at least --pvp-min-round-trip percent made
# the round trip; after the window, with the input dropped by a rule of
# priority 100 and the loop drained, that OVS's, testpmd's and net_null's
# totals agree (net_null = OVS from vm within 0.1%: the drop rule's
# revalidation loses a few; testpmd within 0.5%: its own drops); in C
# also that tpm/stats counts every packet of both ports (bracketed by the
# totals read just before and after it) and that every flow matched its 8
# events.  A run failing a check is marked FAILED in
# the table, left out of the medians, and the script exits 1 at the end.
# --churn and --profile are not offered with --pvp.
#
# Before measuring, the script waits (every 30 s, up to 20 min) until no
# other benchmark or ovs-vswitchd runs ("pgrep -f tpm-bench", "pgrep -f
# ovs-vswitchd"); --no-wait skips that.
set -euo pipefail

usage() {
    cat <<EOF
usage: $0 [OPTIONS]   (as root)
  --rounds N      rounds of A B C (3)
  --seconds S     measurement window per run (5)
  --warmup S      seconds after the PMD starts receiving, before the
                  window (3)
  --configs LIST  which configurations, in order per round (ABC)
  --flows N       flows in the pcap (300; at most 65536); flow i goes to
                  prefix i mod --prefixes
  --prefixes N    nw_dst/24 prefixes with events, config C (512)
  --per-prefix N  events per prefix = events per packet, config C (8)
  --interval I    the events' interval (10ms); a multiple of the epoch,
                  e.g. with --set tpm-epoch=50ms
  --rule FLOW     the OpenFlow rule (in_port=1,actions=output:2: OVS's
                  "simple match" path; e.g. ip,in_port=1,nw_dst=10.0.0.0/8,
                  actions=output:2 takes the miniflow/EMC path); with
                  --vxlan the integration bridge's, port 1 the VXLAN port
  --vxlan         VXLAN-encapsulated input, OVS's native tunnelling
                  (tnl_pop and recirculation; above)
  --vnis N        with --vxlan: inner flow i in VNI 5001 + i mod N (1)
  --mem MODE      DPDK memory: huge, nohuge or auto (auto: huge pages if
                  1024 can be had; the script may raise vm.nr_hugepages to
                  1024 and mount hugetlbfs on /dev/hugepages, and undoes
                  both on exit)
  --set KEY=VAL   also set other_config:KEY=VAL in every configuration
                  (repeatable; e.g. emc-insert-inv-prob=0 keeps the EMC
                  empty, so every packet takes the megaflow classifier;
                  stock ignores the tpm-* keys)
  --profile       after each run's window, perf record the PMD core for
                  3 s (outside the window) and keep the top symbols
  --churn         config C, after its window: delete every event and add
                  it again with the traffic running, one command at a
                  time, while perf records the poll() calls of
                  ovs-vswitchd's main thread: the commands' latencies and
                  the main loop's busy time per iteration
  --pvp           PVP: pcap -> OVS -> testpmd VM (vhost-user, io
                  forwarding) -> OVS -> null (see the top of this script)
  --pvp-min-round-trip P  PVP: the smallest share of the pcap port's
                  packets, in percent, that must make the round trip
                  (the rest dropped by OVS at the VM's full ring) for the
                  run to count (10)
  --results FILE  also write the per-run JSON lines to FILE
  --keep          keep the work directory (logs, outputs)
  --no-wait       do not wait for other benchmarks to finish
Environment: BUILD_DIR (default: build next to this script's tree),
PYTHON3, TESTPMD (--pvp; default dpdk-testpmd).
EOF
}

rounds=3
seconds=5
warmup=3
configs=ABC
flows=300
prefixes=512
per_prefix=8
interval=10ms
mem=auto
rule=
pvp=false
pvp_min_rt=10
profile=false
churn=false
results_out=
vxlan=false
vnis=1
keep=false
wait_quiet=true
settings=(tpm-epoch=10ms)
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --warmup) warmup=$2; shift ;;
    --configs) configs=$2; shift ;;
    --flows) flows=$2; shift ;;
    --prefixes) prefixes=$2; shift ;;
    --per-prefix) per_prefix=$2; shift ;;
    --interval) interval=$2; shift ;;
    --mem) mem=$2; shift ;;
    --rule) rule=$2; shift ;;
    --pvp) pvp=true ;;
    --pvp-min-round-trip) pvp_min_rt=$2; shift ;;
    --set)
        case $2 in
            *=*) settings+=("$2") ;;
            *) echo "$0: --set takes KEY=VALUE" >&2; exit 2 ;;
        esac
        shift ;;
    --profile) profile=true ;;
    --churn) churn=true ;;
    --results) results_out=$2; shift ;;
    --vxlan) vxlan=true ;;
    --vnis) vnis=$2; shift ;;
    --keep) keep=true ;;
    --no-wait) wait_quiet=false ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$0: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
case $configs in
    *[!ABC]*|'') echo "$0: --configs takes letters A, B, C" >&2; exit 2 ;;
esac
if $pvp && $vxlan; then
    echo "$0: --pvp and --vxlan exclude each other" >&2
    exit 2
fi
if $pvp; then
    [ -z "$rule" ] || { echo "$0: --rule and --pvp exclude each other" >&2
                        exit 2; }
    # net_pcap (1) -> vm (3); vm (3) -> net_null (2).
    rule=in_port=1,actions=output:3
    rule2=in_port=3,actions=output:2
else
    rule=${rule:-in_port=1,actions=output:2}
fi
TESTPMD=${TESTPMD:-dpdk-testpmd}

BENCH_NAME=bench-ovs
# shellcheck source=tpm/bench/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"

# The builds the configurations need: A runs build/ovs-stock, B and C
# build/ovs.
trees=()
[[ $configs == *A* ]] && trees+=(ovs-stock)
[[ $configs == *[BC]* ]] && trees+=(ovs)
bench_check_root
bench_check_builds "$build" "${trees[@]}"
command -v "$PY" >/dev/null || die "$PY not found"
if $pvp; then
    command -v "$TESTPMD" >/dev/null \
        || die "--pvp needs $TESTPMD (package dpdk-dev)"
    command -v stdbuf >/dev/null || die "--pvp needs stdbuf (coreutils)"
fi
if $profile || $churn; then
    command -v perf >/dev/null \
        || die "--profile and --churn need perf (linux-perf)"
fi

bench_trap
wait_quiet

bench_mkwork tpm-bench-ovs
bench_copy_bins "$build" "${trees[@]}"
built=
for tree in "${trees[@]}"; do
    built+="${built:+, }$build/$tree (built $(date -r \
        "$build/$tree/vswitchd/ovs-vswitchd" '+%F %T'))"
done
log "binaries: $built; source tree" \
    "$(git -C "$top" describe --always --dirty 2>/dev/null || echo '?')"
results=$WORK/results.jsonl
: >"$results"

bench_hugepages

# --vxlan: the underlay.  The remote VTEP (VX_PEER, VX_PEER_MAC) exists
# only in the pcap file; the switch's address VX_IP is br-phy's, whose
# MAC is VX_MAC.
VX_IP=10.99.0.1
VX_PEER=10.99.0.2
VX_MAC=02:99:00:00:00:01
VX_PEER_MAC=02:99:00:00:00:02

pcap=$WORK/traffic.pcap
pcap_args=()
traffic="$flows UDP/IPv4 flows, 64-byte frames, round-robin"
if $vxlan; then
    pcap_args=(--vxlan --vnis "$vnis" --outer-src "$VX_PEER"
               --outer-dst "$VX_IP" --outer-src-mac "$VX_PEER_MAC"
               --outer-dst-mac "$VX_MAC")
    traffic="$flows UDP/IPv4 inner flows of 64-byte frames in VXLAN (114"
    traffic+=" bytes, $VX_PEER -> $VX_IP port 4789, $vnis VNI(s) from"
    traffic+=" 5001), round-robin; native tunnelling, tnl_pop"
fi
"$PY" "$helper" pcap "$pcap" --flows "$flows" --size 64 \
    --prefixes "$prefixes" "${pcap_args[@]}"
log "traffic: $pcap, $traffic"

# vxlan_up BR: the VXLAN port vx (OpenFlow port 1) on the integration
# bridge BR and the underlay bridge br-phy (MAC VX_MAC, address VX_IP,
# actions=NORMAL), then waits until OVS listens on VX_IP port 4789.
vxlan_up() {
    local br=$1
    vsctl add-port "$br" vx -- set Interface vx type=vxlan \
            options:remote_ip=flow options:key=flow ofport_request=1 \
        -- add-br br-phy -- set bridge br-phy datapath_type=netdev \
            fail_mode=secure "other_config:hwaddr=$VX_MAC"
    ofctl del-flows br-phy
    ofctl add-flow br-phy actions=NORMAL
    ip -n "$NS" addr add "$VX_IP/24" dev br-phy
    ip -n "$NS" link set br-phy up
    wait_for 30 vxlan_listening \
        || die "$RUN_LABEL: OVS does not listen on $VX_IP port 4789 after" \
               "30 s: $(appctl tnl/ports/show -v 2>&1 | tr '\n' ' ')"
}
vxlan_listening() {
    appctl tnl/ports/show -v 2>/dev/null \
        | grep -q "dst=$VX_IP,.*udp(dst=4789)"
}

# vxlan_check OUT CFG: the packets of the run took tnl_pop and reached
# p2; in C the monitor decapsulated them (dies otherwise).
vxlan_check() {
    local out=$1 cfg=$2 passes rx tx dec pk m
    appctl dpctl/dump-flows --names >"$out/dpflows.txt" 2>&1 \
        || appctl dpctl/dump-flows >"$out/dpflows.txt"
    grep -q 'actions:.*tnl_pop(' "$out/dpflows.txt" \
        || die "$cfg: no datapath flow with tnl_pop ($out/dpflows.txt:" \
               "$(head -c 600 "$out/dpflows.txt"))"
    grep -q '^tunnel(' "$out/dpflows.txt" \
        || die "$cfg: no datapath flow from the tunnel ($out/dpflows.txt)"
    passes=$(awk '/Datapath passes:/ { gsub(/[(]/, "", $4); print $4 }' \
             "$out/perf.txt")
    awk -v p="${passes:-0}" 'BEGIN { exit !(p >= 1.9) }' \
        || die "$cfg: ${passes:-no} datapath passes per packet, not 2" \
               "(tnl_pop and recirculation)"
    appctl dpctl/show -s >"$out/dpshow.txt"
    read -r rx tx < <(awk '
        / port [0-9]+: / { name = $3 }
        /RX packets:/ { split($2, a, ":"); if (name == "p1") rx = a[2] }
        /TX packets:/ { split($2, a, ":"); if (name == "p2") tx = a[2] }
        END { print rx + 0, tx + 0 }' "$out/dpshow.txt")
    awk -v rx="$rx" -v tx="$tx" 'BEGIN { exit !(rx > 0 && tx >= 0.99 * rx) }' \
        || die "$cfg: p1 received $rx packets, p2 sent $tx: not every" \
               "packet reached net_null through the tunnel"
    if [ "$cfg" = C ]; then
        read -r pk dec m < <(awk '
            /^  packets: / { p += $2 }
            /^  tunnels: decapsulated / { sub(",", "", $3); d += $3 }
            /^  matches: / { sub(",", "", $2); m += $2 }
            END { print p + 0, d + 0, m + 0 }' "$out/tpm.txt")
        awk -v p="$pk" -v d="$dec" 'BEGIN { exit !(d > 0 && d >= 0.99 * p) }' \
            || die "$cfg: the monitor decapsulated $dec of $pk packets" \
                   "(tpm/stats, $out/tpm.txt)"
        if [ "$m" = 0 ]; then
            die "$cfg: no event matched the inner flows (tpm/stats" \
                "matches: 0, $out/tpm.txt)"
        fi
    fi
    log "  tunnel: $passes passes/pkt, p1 rx $rx, p2 tx $tx" \
        "$([ "$cfg" != C ] || echo "; monitor: $dec of $pk packets" \
           "decapsulated, matches $m")"
}

# churn_one OUT PID: with the traffic running, deletes every event and
# adds it again through the control socket while perf records the poll()
# calls of ovs-vswitchd's main thread (PID); logs the phases' times, the
# commands' latencies, the main loop's busy time per iteration and the
# "Unreasonably long poll interval" warnings logged meanwhile.
churn_one() {
    local out=$1 vpid=$2 ppid lines0
    log "  before churning: $(appctl tpm/stats | grep '^main thread')"
    lines0=$(wc -l <"$out/vswitchd.log")
    perf record -q -e syscalls:sys_enter_poll -e syscalls:sys_exit_poll \
        -t "$vpid" -o "$out/loop.data" >/dev/null 2>&1 &
    ppid=$!
    PERF_PID=$ppid
    sleep 1
    "$PY" "$helper" churn "$CTL" --prefixes "$prefixes" \
        --per-prefix "$per_prefix" --interval "$interval" \
        >"$out/churn.json" \
        || die "C: churn failed: $(cat "$out/churn.json")"
    kill -INT "$ppid"
    wait "$ppid" || true
    PERF_PID=
    perf script -i "$out/loop.data" 2>/dev/null \
        | "$PY" "$helper" loop-gaps >"$out/loop.json"
    $keep || rm -f "$out/loop.data"
    log "  churn: $(cat "$out/churn.json")"
    log "  main loop while churning: $(cat "$out/loop.json");" \
        "\"Unreasonably long\" warnings meanwhile:" \
        "$(tail -n +$((lines0 + 1)) "$out/vswitchd.log" \
           | grep -c 'Unreasonably long' || true)"
    log "  $(appctl tpm/stats | grep '^main thread')"
}

# The PVP mode's VM: dpdk-testpmd with a virtio-user port in server mode
# on OUT/vm.sock, interactive, its stdin the FIFO OUT/vm.in (held open on
# VM_FD), its output in OUT/vm.out; its DPDK runtime directory is removed
# when it is stopped.
VM_PID=
VM_FD=
VM_OUT=
VM_PREFIX=
# A write to the FIFO of a testpmd that died fails instead of killing
# the script.
if $pvp; then
    trap '' PIPE
fi
vm_start() {
    local out=$1 tag=$2
    VM_OUT=$out/vm.out
    VM_PREFIX=${tag}vm
    mkfifo "$out/vm.in"
    stdbuf -o0 -e0 "$TESTPMD" --lcores=0@0,1@0 --no-huge -m 256 --no-pci \
        "--file-prefix=$VM_PREFIX" \
        "--vdev=net_virtio_user0,path=$out/vm.sock,server=1,queues=1" \
        -- -i --no-mlockall --total-num-mbufs=8192 --forward-mode=io \
        --port-topology=loop <"$out/vm.in" >"$VM_OUT" 2>&1 &
    VM_PID=$!
    exec {VM_FD}>"$out/vm.in"
    wait_for 30 test -S "$out/vm.sock" \
        || die "$RUN_LABEL: testpmd made no socket: $(tail -n 20 "$VM_OUT")"
}
vm_cmd() {
    printf '%s\n' "$1" 1>&"$VM_FD"
}
vm_ready() {
    grep -q 'testpmd> ' "$VM_OUT"
}
vm_blocks() {
    grep -c '^ *#\+ *$' "$VM_OUT" || true
}
vm_blocks_over() {
    [ "$(vm_blocks)" -gt "$1" ]
}
# vm_stats FILE: testpmd's port counters "RX-packets TX-packets" to FILE.
vm_stats() {
    local n
    n=$(vm_blocks)
    vm_cmd "show port stats 0"
    wait_for 10 vm_blocks_over "$n" \
        || die "$RUN_LABEL: testpmd: no answer to 'show port stats 0'"
    awk '/RX-packets:/ { rxp = $2 } /TX-packets:/ { txp = $2 }
         /^ *#+ *$/ { last = rxp " " txp } END { print last }' \
        "$VM_OUT" >"$1"
}
vm_down() {
    local i
    [ -n "$VM_PID" ] || return 0
    if [ -n "$VM_FD" ]; then
        printf 'stop\nquit\n' 2>/dev/null 1>&"$VM_FD" || true
        exec {VM_FD}>&-
        VM_FD=
    fi
    for i in $(seq 100); do
        kill -0 "$VM_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$VM_PID" 2>/dev/null; then
        log "warning: testpmd (pid $VM_PID) did not quit; SIGKILL"
        kill -9 "$VM_PID" 2>/dev/null || true
    fi
    wait "$VM_PID" 2>/dev/null || true
    rm -rf "/var/run/dpdk/$VM_PREFIX"
    VM_PID=
}
bench_on_exit() {
    vm_down
}
vm_link_up() {
    [ "$(vsctl get Interface vm link_state 2>/dev/null)" = up ]
}
# pvp_vm OUT TAG BR: the VM, its port vm (ofport 3) and io forwarding.
pvp_vm() {
    vm_start "$1" "$2"
    vsctl add-port "$3" vm -- set Interface vm type=dpdkvhostuserclient \
        "options:vhost-server-path=$1/vm.sock" ofport_request=3
    bench_port_errors vm
    wait_for 30 vm_ready \
        || die "$RUN_LABEL: no testpmd prompt: $(tail -n 20 "$VM_OUT")"
    wait_for 30 vm_link_up \
        || die "$RUN_LABEL: vm link not up in OVS:" \
               "$(vsctl get Interface vm status)"
    vm_cmd start
}

vm_port_tx() {
    appctl dpctl/show -s | awk '/port [0-9]+: vm / { f = 1; next }
        f && /TX packets:/ { sub(/.*TX packets:/, ""); print $1; exit }'
}
# pvp_drain OUT BR: ends the traffic into the VM (a rule of priority 100
# drops what the pcap port receives), waits until OVS's Tx to vm stops
# moving, then reads the totals of the ports (OUT/dp-end.txt) and
# testpmd's (OUT/vm-end.txt): after the drain, what OVS sent the VM,
# what testpmd received and sent back and what reached net_null must
# agree exactly.
pvp_drain() {
    local out=$1 br=$2 a b i
    ofctl add-flow "$br" priority=100,in_port=1,actions=drop
    b=$(vm_port_tx)
    for i in $(seq 50); do
        sleep 0.2
        a=$b
        b=$(vm_port_tx)
        [ "$a" != "$b" ] || break
    done
    sleep 0.2
    appctl dpctl/show -s >"$out/dp-end.txt"
    vm_stats "$out/vm-end.txt"
}

# run_one ROUND CONFIG
run_one() {
    local round=$1 cfg=$2 tree out br=br0 tag
    case $cfg in
        A) tree=ovs-stock ;;
        *) tree=ovs ;;
    esac
    out=$WORK/r$round-$cfg
    mkdir -p "$out"
    tag=tpmbo$$r$round$cfg
    RUN_LABEL=$cfg
    # The tpm-* knobs are ignored by stock OVS; the same settings for all.
    bench_start "$out" "$tag" "$tree" "${settings[@]}"

    # Output port and the rule first; the input port last, so traffic
    # starts with everything (events included) in place.
    bench_add_output $br "$rule"
    local inbr=$br ports=(p1 p2)
    if $vxlan; then
        vxlan_up $br
        inbr="br-phy"
        ports+=(vx)
    fi
    if $pvp; then
        ofctl add-flow $br "$rule2"
    fi
    if [ "$cfg" != A ]; then
        wait_for 30 tpm_pmd_ready || die "$cfg: no monitor on PMD core 1"
    fi
    if [ "$cfg" = C ]; then
        "$PY" "$helper" events "$CTL" --prefixes "$prefixes" \
            --per-prefix "$per_prefix" --interval "$interval" \
            >"$out/events.log" \
            || die "$cfg: installing events failed: $(cat "$out/events.log")"
        log "  $(cat "$out/events.log")"
    fi
    if $pvp; then
        pvp_vm "$out" "$tag" $br
    fi
    vsctl add-port $inbr p1 -- set Interface p1 type=dpdk \
        "options:dpdk-devargs=net_pcap0,rx_pcap=$pcap,infinite_rx=1" \
        ofport_request=1
    bench_port_errors "${ports[@]}"
    wait_for 60 pmd_receiving || die "$cfg: PMD not receiving after 60 s"
    sleep "$warmup"

    local f0 f1 t0 t1 vpid
    vpid=$(cat "$out/ovs-vswitchd.pid")
    f0=$(foreign_pids | wc -l)
    appctl dpif-netdev/pmd-stats-clear >/dev/null
    if [ "$cfg" != A ]; then
        # The window's own sweeps: tpm/stats counts from the start.
        appctl tpm/stats >"$out/tpm0.txt"
    fi
    if $pvp; then
        appctl dpctl/show -s >"$out/dp0.txt"
        vm_stats "$out/vm0.txt"
    fi
    t0=$(cpu_snapshot "$vpid")
    sleep "$seconds"
    appctl dpif-netdev/pmd-perf-show -nh >"$out/perf.txt"
    t1=$(cpu_snapshot "$vpid")
    if $pvp; then
        appctl dpctl/show -s >"$out/dp1.txt"
        vm_stats "$out/vm1.txt"
    fi
    appctl dpif-netdev/pmd-stats-show >"$out/stats.txt"
    f1=$(foreign_pids | wc -l)
    local tpm_args=()
    if [ "$cfg" != A ]; then
        # PVP: the ports' totals (counted since they were added) just
        # before and after, to bracket what tpm/stats counts.
        if $pvp; then
            appctl dpctl/show -s >"$out/dp-tpm0.txt"
        fi
        appctl tpm/stats >"$out/tpm.txt"
        tpm_args=(--tpm "$out/tpm.txt")
        if $pvp; then
            appctl dpctl/show -s >"$out/dp-tpm1.txt"
            tpm_args+=(--dp-tpm0 "$out/dp-tpm0.txt"
                       --dp-tpm1 "$out/dp-tpm1.txt")
        fi
    fi
    if $pvp; then
        pvp_drain "$out" $br
        "$PY" "$helper" pvp-check --config "$cfg" --perf "$out/perf.txt" \
            --dp0 "$out/dp0.txt" --dp1 "$out/dp1.txt" \
            --vm0 "$out/vm0.txt" --vm1 "$out/vm1.txt" \
            --dp-end "$out/dp-end.txt" --vm-end "$out/vm-end.txt" \
            "${tpm_args[@]}" --min-round-trip "$pvp_min_rt" \
            --flows "$flows" --per-prefix "$per_prefix" \
            >"$out/pvp.json" || die "$cfg: pvp-check failed"
        tpm_args=(--tpm "$out/tpm.txt" --pvp "$out/pvp.json")
        [ "$cfg" != A ] || tpm_args=(--pvp "$out/pvp.json")
    fi
    [ "$cfg" = A ] || tpm_args+=(--tpm0 "$out/tpm0.txt")
    # Steal on CPU 1 (% of its time) and what ran besides ovs-vswitchd
    # (% of one CPU; the PMD itself keeps one CPU busy).
    local steal other
    read -r steal other < <(cpu_load "$t0" "$t1")
    "$PY" "$helper" parse --round "$round" --config "$cfg" --mem "$mem" \
        --perf "$out/perf.txt" --stats "$out/stats.txt" "${tpm_args[@]}" \
        --steal "$steal" --other-load "$other" \
        --foreign $((f0 > f1 ? f0 : f1)) >>"$results"
    if $vxlan; then
        vxlan_check "$out" "$cfg"
    fi
    log "  $(tail -n 1 "$results" | "$PY" -c 'import json, sys
r = json.loads(sys.stdin.read())
print("%s: %s Kpps, %s cycles/pkt" % (r["config"], r.get("kpps"),
                                      r.get("cpp")))
if "pvp" in r:
    p = r["pvp"]
    print("  PVP: pcap %.0f Kpps, %.0f cycles per pcap packet, round trip "
          "%.3f%%, testpmd fwd %d of %d; %s" % (
              p["pcap_kpps"], p["cpp_pcap"], 100 * p["round_trip"],
              p["vm_tx"], p["vm_rx"], "; ".join(p["notes"])))
    for e in p["errors"]:
        print("  FAILED: " + e)')"

    if $churn && [ "$cfg" = C ] && ! $pvp; then
        churn_one "$out" "$vpid"
    fi
    if $profile && ! $pvp; then
        perf record -q -C 1 -o "$out/perf.data" -- sleep 3 \
            >/dev/null 2>&1 &
        PERF_PID=$!
        wait "$PERF_PID" || true
        PERF_PID=
        perf report -i "$out/perf.data" --no-children --sort symbol \
            --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' \
            | head -40 >"$out/profile.txt" || true
        $keep || rm -f "$out/perf.data"
    fi
    if [ "$cfg" = C ]; then
        appctl tpm/reports >"$out/reports.txt" || true
    fi
    vm_down
    run_down
}

rules=$rule
if $vxlan; then
    rules+=" (integration bridge; br-phy: actions=NORMAL)"
fi
if $pvp; then
    rules+=" and $rule2 (PVP)"
fi
log "rule $rules; configs $configs x $rounds rounds, warm-up $warmup s," \
    "window $seconds s; work directory $WORK"
for round in $(seq "$rounds"); do
    for ((ci = 0; ci < ${#configs}; ci++)); do
        cfg=${configs:ci:1}
        wait_quiet
        log "round $round, config $cfg"
        run_one "$round" "$cfg"
    done
done

if [ -n "$results_out" ]; then
    cp "$results" "$results_out"
fi
if $profile; then
    for ((ci = 0; ci < ${#configs}; ci++)); do
        cfg=${configs:ci:1}
        echo
        echo "perf top symbols of PMD core 1, config $cfg, round 1:"
        head -25 "$WORK/r1-$cfg/profile.txt" 2>/dev/null | sed 's/^/    /'
    done
fi
echo
echo "Machine: $(nproc) CPUs, $(awk -F': ' '/^model name/ { print $2; exit }' \
    /proc/cpuinfo); DPDK memory: $mem; load average now:" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
echo "Traffic: $traffic; rule $rule"
table_args=()
if $pvp; then
    table_args=(--pvp --target-b 0.99 --target-c 0.95)
fi
"$PY" "$helper" table "$results" --events $((prefixes * per_prefix)) \
    "${table_args[@]}" || die "some runs failed their checks (FAILED above)"
