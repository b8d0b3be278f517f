#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The cost of the Trumpet packet monitor inside Open vSwitch's PMD, at full
# speed and without a NIC (docs/benchmarks.md, section 4).
#
#   sh tests/bootstrap.sh build && make -C build ovs ovs-stock
#   tpm/bench/bench-ovs.sh [--rounds N] [--seconds S] ...     (as root)
#
# Three configurations, each run with fresh daemons, alternately
# (A B C A B C ...):
#   A  stock OVS 3.1.0 (build/ovs-stock: same tarball and configure flags,
#      no patch, no libtpm)
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
  --results FILE  also write the per-run JSON lines to FILE
  --keep          keep the work directory (logs, outputs)
  --no-wait       do not wait for other benchmarks to finish
Environment: BUILD_DIR (default: build next to this script's tree),
PYTHON3.
EOF
}

rounds=3
seconds=5
warmup=3
configs=ABC
flows=300
prefixes=512
per_prefix=8
mem=auto
rule=in_port=1,actions=output:2
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
    --mem) mem=$2; shift ;;
    --rule) rule=$2; shift ;;
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
        --per-prefix "$per_prefix" >"$out/churn.json" \
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
    if [ "$cfg" != A ]; then
        wait_for 30 tpm_pmd_ready || die "$cfg: no monitor on PMD core 1"
    fi
    if [ "$cfg" = C ]; then
        "$PY" "$helper" events "$CTL" --prefixes "$prefixes" \
            --per-prefix "$per_prefix" >"$out/events.log" \
            || die "$cfg: installing events failed: $(cat "$out/events.log")"
        log "  $(cat "$out/events.log")"
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
    t0=$(cpu_snapshot "$vpid")
    sleep "$seconds"
    appctl dpif-netdev/pmd-perf-show -nh >"$out/perf.txt"
    t1=$(cpu_snapshot "$vpid")
    appctl dpif-netdev/pmd-stats-show >"$out/stats.txt"
    f1=$(foreign_pids | wc -l)
    local tpm_args=()
    if [ "$cfg" != A ]; then
        appctl tpm/stats >"$out/tpm.txt"
        tpm_args=(--tpm "$out/tpm.txt")
    fi
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
                                      r.get("cpp")))')"

    if $churn && [ "$cfg" = C ]; then
        churn_one "$out" "$vpid"
    fi
    if $profile; then
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
    run_down
}

log "rule $rule$($vxlan && echo " (integration bridge; br-phy:" \
    "actions=NORMAL)"); configs $configs x $rounds rounds, warm-up $warmup s, window" \
    "$seconds s; work directory $WORK"
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
"$PY" "$helper" table "$results" --events $((prefixes * per_prefix))
