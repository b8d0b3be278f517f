#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The monitor's feasibility region inside an OVS-DPDK PMD (the paper's
# Fig. 13; docs/benchmarks.md, section 7).
#
#   tpm/bench/bench-feasibility.sh [--repeats N] [--per-flow "4 8 16"] ...
#       (as root)
#
# For every configuration (triggers per flow k, time interval T, active
# flows F): the highest packet rate R at which the PMD keeps the rate and
# finishes every sweep.  One PMD on core 1 polls a net_pcap port replaying
# F UDP/IPv4 flows of 64-byte frames round-robin (infinite_rx=1, burst 1)
# and forwards every packet to a net_null port.  tpm-epoch = T; events as
# bench-ovs.sh's config C: P nw_dst/24 prefixes x k events, interval T,
# flow i in prefix i % P, so every flow matches exactly k events (P x k
# events in all).
#
# Rate: OVS's ingress policer on the input port (Interface
# ingress_policing_rate/ingress_policing_burst; netdev-dpdk meters every
# received batch with an rte_meter srTCM in netdev_dpdk_rxq_recv, before
# dpif-netdev and so before the monitor's hook, counting the frame's bytes
# without its 14-byte Ethernet header).  For R packets/s of 64-byte frames:
# rate = R x 50 x 8 / 1000 kbps.  The burst (--burst-pkts, default 2048
# frames, a NIC's rx ring) absorbs a sweep step or a descheduling.
# net_pcap offers 32 frames at every poll; what the policer drops still
# costs the PMD its rx (copy, meter, free): the rates found are lower
# bounds of what the PMD would sustain from a NIC.
#
# Per configuration and repeat, one switch: after a warm-up, a probe
# without the policer (U, the unpoliced maximum), then a bisection on R
# between 0 and U x 1.05 (first probe at U / 2, --steps probes in all),
# each probe: set the policer, wait --settle, clear pmd-perf stats, take
# tpm/stats and the ports' counters (dpctl/show -s), wait --seconds, take
# them again.  Feasible at R: the PMD forwarded >= 98% of R (pmd-perf-show
# Rx, after the policer) and sweeps done > 0 with none unfinished in the
# window.  The boundary is the highest feasible probe (its measured rate,
# not its target).  The median over --repeats is reported.
#
# Baseline (config B, no event): per F, one unpoliced probe per repeat.
set -euo pipefail

usage() {
    cat <<EOF
usage: $0 [OPTIONS]   (as root)
  --per-flow LIST   triggers per flow ("4 8 16")
  --intervals LIST  time intervals = epochs, ms ("5 10 20")
  --flows LIST      active flows ("300 600")
  --prefixes N      nw_dst/24 prefixes with events (512)
  --repeats N       bisections per configuration, median reported (3)
  --steps N         probes per bisection (6)
  --seconds S       window per probe (2)
  --settle S        after a policer change, before the window (0.5)
  --warmup S        after the PMD starts receiving (2)
  --burst-pkts N    policer burst in 64-byte frames (2048)
  --pmd-nice N      nice value of the PMD thread (-20; "" leaves it)
  --max-other PCT   an infeasible probe during which other processes used
                    more than PCT % of a CPU is repeated, up to twice (30)
  --no-baseline     skip the config B (no event) probes
  --knob KEY=VALUE  an other_config knob for every switch, e.g.
                    tpm-sweep-catchup=0 (repeatable)
  --results FILE    keep the JSON lines (one per probe) in FILE
  --table-out FILE  also write the markdown table to FILE
  --plot FILE       write the plot (PNG, python3-matplotlib)
  --mem MODE        DPDK memory: huge, nohuge or auto (auto)
  --keep            keep the work directory
  --no-wait         do not wait for other benchmarks to finish
Environment: BUILD_DIR (default: build next to this script's tree),
PYTHON3.
EOF
}

per_flow_list="4 8 16"
intervals="5 10 20"
flows_list="300 600"
prefixes=512
repeats=3
steps=6
seconds=2
settle=0.5
warmup=2
burst_pkts=2048
pmd_nice=-20
max_other=30
baseline=true
results_out=
knobs=()
table_out=
plot=
mem=auto
keep=false
wait_quiet=true
while [ $# -gt 0 ]; do
    case $1 in
    --per-flow) per_flow_list=$2; shift ;;
    --intervals) intervals=$2; shift ;;
    --flows) flows_list=$2; shift ;;
    --prefixes) prefixes=$2; shift ;;
    --repeats) repeats=$2; shift ;;
    --steps) steps=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --settle) settle=$2; shift ;;
    --warmup) warmup=$2; shift ;;
    --burst-pkts) burst_pkts=$2; shift ;;
    --pmd-nice) pmd_nice=$2; shift ;;
    --max-other) max_other=$2; shift ;;
    --no-baseline) baseline=false ;;
    --results) results_out=$2; shift ;;
    --knob) knobs+=("$2"); shift ;;
    --table-out) table_out=$2; shift ;;
    --plot) plot=$2; shift ;;
    --mem) mem=$2; shift ;;
    --keep) keep=true ;;
    --no-wait) wait_quiet=false ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$0: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
for k in $per_flow_list; do
    [ "$k" -ge 1 ] && [ "$k" -le 16 ] \
        || { echo "$0: triggers per flow: 1 to 16" >&2; exit 2; }
done

BENCH_NAME=bench-feasibility
# shellcheck source=tpm/bench/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"

bench_check_root
bench_check_builds "$build" ovs
command -v "$PY" >/dev/null || die "$PY not found"

bench_trap
wait_quiet
bench_mkwork tpm-bench-feas
bench_copy_bins "$build" ovs
log "binaries: $build/ovs (built $(date -r "$build/ovs/vswitchd/ovs-vswitchd" \
    '+%F %T')); source tree" \
    "$(git -C "$top" describe --always --dirty 2>/dev/null || echo '?')"
results=$WORK/results.jsonl
: >"$results"
bench_hugepages

for f in $flows_list; do
    "$PY" "$helper" pcap "$WORK/flows$f.pcap" --flows "$f" --size 64 \
        --prefixes "$prefixes"
done

# 64-byte frames: the meter counts 50 bytes of each.
frame_metered=50
burst_kb=$(( (burst_pkts * frame_metered * 8 + 999) / 1000 ))

# port_stats PORT: the port's counters (dpctl/show -s, read from the
# driver now; the Interface statistics column is refreshed only every 5 s)
# as KEY=VALUE lines: rx_packets, rx_dropped (policed), tx_packets...
port_stats() {
    appctl dpctl/show -s | awk -v port="$1" '
        $1 == "port" { on = ($3 == port) ; next }
        on { pre = "";
             for (i = 1; i <= NF; i++) {
                 if ($i == "RX" || $i == "TX") { pre = tolower($i); continue }
                 n = split($i, kv, ":");
                 if (n == 2 && kv[2] != "") print pre "_" kv[1] "=" kv[2]
             } }'
}

# set_rate PPS: the policer on p1 for PPS 64-byte frames/s (0: none).
set_rate() {
    local kbps=$(( ($1 * frame_metered * 8 + 500) / 1000 ))
    if [ "$1" = 0 ]; then
        vsctl set Interface p1 ingress_policing_rate=0 \
            ingress_policing_burst=0
    else
        vsctl set Interface p1 ingress_policing_rate="$kbps" \
            ingress_policing_burst="$burst_kb"
    fi
}

# probe PPS KEY=VALUE...: one window at PPS (0: unpoliced); appends a JSON
# line to the results; returns 0 if feasible.  An infeasible window during
# which other processes used more than --max-other % of a CPU (another
# benchmark, a build) is taken again, at most twice, after wait_quiet.
probe() {
    local st=0 i
    for i in 1 2 3; do
        st=0
        probe__ "$@" || st=$?
        [ "$st" = 3 ] || return "$st"
        log "  busy machine during the window; again"
        wait_quiet
    done
    return 1
}
probe__() {
    local pps=$1 d=$RUN_DIR/probe t0 t1 steal other
    shift
    set_rate "$pps"
    sleep "$settle"
    appctl tpm/stats >"$d.tpm0" 2>/dev/null || : >"$d.tpm0"
    port_stats p1 >"$d.p0"
    port_stats p2 >"$d.o0"
    appctl dpif-netdev/pmd-stats-clear >/dev/null
    t0=$(cpu_snapshot "$VSWITCHD_PID")
    sleep "$seconds"
    appctl dpif-netdev/pmd-perf-show -nh >"$d.perf"
    t1=$(cpu_snapshot "$VSWITCHD_PID")
    appctl tpm/stats >"$d.tpm1" 2>/dev/null || : >"$d.tpm1"
    port_stats p1 >"$d.p1"
    port_stats p2 >"$d.o1"
    read -r steal other < <(cpu_load "$t0" "$t1")
    "$PY" "$helper" probe --perf "$d.perf" --tpm-before "$d.tpm0" \
        --tpm-after "$d.tpm1" --port-before "$d.p0" --port-after "$d.p1" \
        --out-before "$d.o0" --out-after "$d.o1" --steal "$steal" \
        --other-load "$other" --set target_pps="$pps" \
        --set policer_kbps=$(( (pps * frame_metered * 8 + 500) / 1000 )) \
        --set burst_kb="$burst_kb" --set "knobs=${knobs[*]}" \
        "${@/#/--set=}" >>"$results"
    tail -n 1 "$results" | "$PY" -c 'import json, sys
max_other = float(sys.argv[1])
r = json.loads(sys.stdin.read())
t = r.get("tpm", {})
ok = r.get("rate_kept", True) and r.get("sweeps_ok", True)
print("%-10s target %6.2f Mpps: %6.2f Mpps, %s cyc/pkt, sweeps %s unfinished"
      " %s, sweep p99 %s us: %s" % (r.get("kind"), r["target_pps"] / 1e6,
      r.get("pps", 0) / 1e6, r.get("cpp"), t.get("sweeps_done"),
      t.get("sweeps_unfinished"), (t.get("sweep_ns") or [0, 0])[1] // 1000,
      "ok" if ok else "INFEASIBLE"))
noisy = r.get("other_load_pct", 0) > max_other
if noisy and r.get("kind") in ("unpoliced", "baseline"):
    sys.exit(3)
sys.exit(0 if ok else 3 if noisy else 1)' "$max_other" >&2
}

# start_switch TAG EPOCH_MS FLOWS: a switch with the input port replaying
# FLOWS flows, events installed before (when PER_FLOW > 0).
start_switch() {
    local tag=$1 epoch=$2 nflows=$3 k=$4 out
    out=$WORK/$tag
    mkdir -p "$out"
    RUN_LABEL=$tag
    bench_start "$out" "tpmbf$$$tag" ovs tpm-epoch="${epoch}ms" \
        "${knobs[@]}"
    bench_add_output br0 in_port=1,actions=output:2
    wait_for 30 tpm_pmd_ready || die "$tag: no monitor on PMD core 1"
    [ -z "$pmd_nice" ] || bench_pmd_nice "$pmd_nice"
    if [ "$k" -gt 0 ]; then
        "$PY" "$helper" events "$CTL" --prefixes "$prefixes" \
            --per-prefix "$k" --interval "${epoch}ms" >"$out/events.log" \
            || die "$tag: installing events failed: $(cat "$out/events.log")"
        log "  $(cat "$out/events.log")"
    fi
    local devargs=net_pcap0,rx_pcap=$WORK/flows$nflows.pcap,infinite_rx=1
    vsctl add-port br0 p1 -- set Interface p1 type=dpdk \
        "options:dpdk-devargs=$devargs" ofport_request=1
    bench_port_errors p1 p2
    wait_for 60 pmd_receiving || die "$tag: PMD not receiving after 60 s"
    sleep "$warmup"
}

# bisect REP FLOWS EPOCH K: the boundary of one configuration.
bisect() {
    local rep=$1 nflows=$2 epoch=$3 k=$4 tag u lo hi mid i best
    local cfg=(rep="$rep" flows="$nflows" interval_ms="$epoch" per_flow="$k"
               triggers_total=$((prefixes * k)))
    tag=r$rep-f$nflows-t$epoch-k$k
    wait_quiet
    log "repeat $rep: $nflows flows, interval $epoch ms, $k triggers per" \
        "flow ($((prefixes * k)) events)"
    start_switch "$tag" "$epoch" "$nflows" "$k"
    probe 0 "${cfg[@]}" kind=unpoliced || true
    u=$(tail -n 1 "$results" | "$PY" -c 'import json, sys
print(int(json.loads(sys.stdin.read()).get("pps", 0)))')
    [ "$u" -gt 0 ] || die "$tag: nothing forwarded unpoliced"
    lo=0
    hi=$((u * 105 / 100))
    best=
    for i in $(seq "$steps"); do
        mid=$(( (lo + hi) / 2 ))
        if probe "$mid" "${cfg[@]}" kind=probe; then
            lo=$mid
            best=$(tail -n 1 "$results")
        else
            hi=$mid
        fi
    done
    if [ -n "$best" ]; then
        echo "$best" | sed 's/"kind": "probe"/"kind": "boundary"/' \
            >>"$results"
    else
        log "  $tag: no feasible rate found above $hi pps"
    fi
    run_down
}

baseline_run() {
    local rep=$1 nflows=$2 tag=b-r$1-f$2
    wait_quiet
    log "repeat $rep: baseline (no event), $nflows flows"
    start_switch "$tag" 10 "$nflows" 0
    probe 0 rep="$rep" flows="$nflows" kind=baseline || true
    run_down
}

log "per flow {$per_flow_list} x intervals {$intervals} ms x flows" \
    "{$flows_list}, $repeats repeats, $steps probes each, window" \
    "$seconds s; policer burst $burst_pkts frames ($burst_kb kb); work" \
    "directory $WORK"
t_start=$SECONDS
for rep in $(seq "$repeats"); do
    for f in $flows_list; do
        if $baseline; then
            baseline_run "$rep" "$f"
        fi
        for epoch in $intervals; do
            for k in $per_flow_list; do
                bisect "$rep" "$f" "$epoch" "$k"
            done
        done
    done
done
el=$((SECONDS - t_start))
log "done in $((el / 60)) min $((el % 60)) s"

if [ -n "$results_out" ]; then
    cp "$results" "$results_out"
fi
echo
echo "Machine: $(nproc) CPUs, $(awk -F': ' '/^model name/ { print $2; exit }' \
    /proc/cpuinfo); DPDK memory: $mem; load average now:" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
echo
"$PY" "$helper" feas-table "$results" | tee "${table_out:-/dev/null}"
if [ -n "$plot" ]; then
    # matplotlib may be Debian's (python3-matplotlib) while $PY is another
    # python3.
    plot_py=$PY
    for p in "$PY" /usr/bin/python3; do
        if "$p" -c 'import matplotlib' 2>/dev/null; then
            plot_py=$p
            break
        fi
    done
    "$plot_py" "$helper" feas-plot "$results" "$plot" \
        || log "no plot: see the message above"
fi
