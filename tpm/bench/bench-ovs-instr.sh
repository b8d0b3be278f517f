#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Instructions per packet of ovs-vswitchd's PMD thread, counted by
# valgrind's callgrind: the monitor's cost inside Open vSwitch in
# instructions, which do not depend on the host's load or clock (the
# timed runs of the same workload: docs/benchmarks.md, section 4).
#
#   sh tests/bootstrap.sh build && make -C build ovs ovs-stock
#   tpm/bench/bench-ovs-instr.sh [--seconds S] [--rule FLOW] ...  (as root)
#
# The workload of tpm/bench/bench-ovs.sh (its daemons, pcap, rule and
# events, through tpm/bench/bench-lib.sh and tpm/bench/bench-ovs.py), its
# three configurations run in order, one run each (A B C):
#   A  stock OVS 3.1.0 (build/ovs-stock)
#   B  the patched OVS (build/ovs), no event installed
#   C  the patched OVS with the events (--prefixes x --per-prefix)
# ovs-vswitchd runs under valgrind --tool=callgrind (not detached: valgrind
# follows no fork it need not), DPDK in plain memory (--no-huge -m 1024),
# with --toggle-collect=pmd_thread_main: only the PMD thread's work is
# counted (the main, handler and revalidator threads are not).  Once the
# PMD receives and after --warmup seconds, the counters are zeroed
# (callgrind_control -z) and dpif-netdev/pmd-stats-clear sent; after
# --seconds, the counters are dumped (callgrind_control -d) and
# pmd-stats-show and pmd-perf-show read.  Ir per packet = the dump's
# instructions / the packets of its window, which callgrind counts
# itself: dp_netdev_input() is called once per received batch and every
# batch is full (32: net_pcap's infinite_rx; checked, pmd-perf-show's Rx
# packets are 32 per iteration), so packets = 32 x its calls.  OVS's
# count (pmd-stats-show; its window a few ms off callgrind's) is printed
# too, and used if the batches were not all full.
#
# From the dump (tpm/bench/bench-ovs-instr.py): the monitor's part, its
# functions' own Ir and what they call (libc, OVS helpers), which equals
# the calls from OVS into it (in the PMD: tpm_ovs_rx() per received
# batch, tpm_ovs_pmd_iteration() per loop); its functions and source
# files; the two hooks' callees.  Of the monitor's part, the epoch work
# (the sweep, tpm_sweep_step(), and what tpm_advance() calls when the
# epoch changes) is done per epoch of wall-clock time, and valgrind's PMD
# receives ~50 times fewer packets per epoch than at full speed: per
# packet that work is ~50 times more.  It is given apart, per packet
# and per epoch (tpm/stats' epochs), and the headline is Ir per packet
# without it.  Other work is per flow and epoch (a statistics line's
# first update in an epoch) and, with thousands of flows each sending
# every few epochs, flows retire and are matched again: under valgrind
# that too is per packet more than at full speed (300 flows: ~4.5 Ir;
# 8000 flows: ~50 Ir).  --dilate 50 lengthens the monitor's times
# (epoch, the events' interval, the sweep's step budget and gap) 50
# times, so that a PMD under valgrind sees about as many packets per
# epoch as one at full speed: its monitor's Ir per packet, and the
# epoch work per packet, are then those of full speed (and one step
# sweeps a whole epoch: the 10 us budget under valgrind cuts the sweep
# into ~18 steps per epoch: 385 k Ir per epoch against 374 k).  The
# table at the end: the configurations side by side, C - B (the
# monitor) and C - A (the patch and the monitor), and the functions
# outside the monitor whose Ir per packet differ between configurations
# (pmd_perf_end_iteration's histograms and, on the EMC path with many
# flows, the EMC's random insertion vary by 1-3 Ir between runs).
#
# valgrind's options: --tool=callgrind --toggle-collect=pmd_thread_main
# --fair-sched=yes (the busy-polling PMD would starve the main thread)
# --skip-plt=no (see vg_args below).
#
# --cache-sim: callgrind's cache simulation as well (--cache-sim=yes,
# 32 KB 8-way L1s and a 32 MB 16-way LL unless --caches says otherwise):
# I1, D1 and LL misses (reads and writes) per packet.  The simulator has
# two levels; --caches with the L2's size as the LL (1 MB 16-way on a
# Zen 4 or 5) counts the lines that leave the core's own caches, where
# a 32 MB LL counts those that leave the L3.  (cachegrind itself cannot
# zero its counters or restrict itself to one thread.)  With
# --valgrind-arg --branch-sim=yes, callgrind's branch simulation too
# (the dump's Bcm and Bim: conditional and indirect mispredictions).
#
# Everything is started in a private network namespace and a work
# directory that mktemp makes under /tmp (tpm-bench-ovs-instr.*),
# stopped by PID (only if its command line names that directory) and
# removed on exit, as bench-ovs.sh does.  Other benchmarks running
# meanwhile change the time a run takes, not its counts (--wait waits for
# them anyway).
set -euo pipefail

usage() {
    cat <<EOF
usage: $0 [OPTIONS]   (as root)
  --configs LIST  which configurations, in order (ABC)
  --seconds S     counted window per run (40)
  --warmup S      seconds after the PMD starts receiving, before the
                  window (15)
  --flows N       flows in the pcap (300)
  --prefixes N    nw_dst/24 prefixes with events, config C (512)
  --per-prefix N  events per prefix = events per packet, config C (8)
  --interval I    the events' interval (10ms)
  --rule FLOW     the OpenFlow rule (in_port=1,actions=output:2; e.g.
                  ip,in_port=1,nw_dst=10.0.0.0/8,actions=output:2: the
                  EMC path)
  --set KEY=VAL   also set other_config:KEY=VAL (repeatable; a later
                  value of a key replaces an earlier one)
  --set-c KEY=VAL only in config C (repeatable)
  --dilate F      the monitor's times F times longer: tpm-epoch, the
                  events' interval, tpm-sweep-budget and tpm-sweep-gap
                  (10ms, 10ms, 10us, 500us by default); with F about
                  valgrind's slowdown (~50), the PMD sees about as many
                  packets per epoch as at full speed (--set and
                  --interval still apply over it)
  --cache-sim     simulate the caches as well (I1, D1, LL misses)
  --caches I1/D1/LL  their geometries, valgrind's SIZE,ASSOC,LINE each
                  (32768,8,64/32768,8,64/33554432,16,64; e.g.
                  32768,8,64/49152,12,64/1048576,16,64 for a Zen 5
                  core's L1s and L2)
  --mem MODE      DPDK memory: nohuge (default) or huge (bench-lib.sh's
                  huge pages; not tried under valgrind)
  --top N         monitor functions listed per run (15)
  --results FILE  also write the per-run JSON lines to FILE
  --valgrind-arg A  another valgrind option (repeatable; e.g.
                  --dump-instr=yes, --separate-threads=yes)
  --keep          keep the work directory (logs, callgrind dumps)
  --wait          wait for other benchmarks to finish first
Environment: BUILD_DIR (default: build next to this script's tree),
PYTHON3, VALGRIND (valgrind), CALLGRIND_CONTROL (callgrind_control).
EOF
}

configs=ABC
seconds=40
warmup=15
flows=300
prefixes=512
per_prefix=8
interval=10ms
rule=in_port=1,actions=output:2
cache_sim=false
caches=32768,8,64/32768,8,64/33554432,16,64
mem=nohuge
top_n=15
results_out=
keep=false
wait_quiet=false
# The PMD under valgrind answers a command ~50 times later than at full
# speed: a longer wait for its answers than the 1 s default, or installing
# thousands of events fails (a --set replaces it).
settings=(tpm-epoch=10ms tpm-command-timeout=60s)
settings_c=()
vg_extra=()
dilate=
interval_set=false
while [ $# -gt 0 ]; do
    case $1 in
    --configs) configs=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --warmup) warmup=$2; shift ;;
    --flows) flows=$2; shift ;;
    --prefixes) prefixes=$2; shift ;;
    --per-prefix) per_prefix=$2; shift ;;
    --interval) interval=$2; interval_set=true; shift ;;
    --dilate) dilate=$2; shift ;;
    --rule) rule=$2; shift ;;
    --set|--set-c)
        case $2 in
            *=*) ;;
            *) echo "$0: $1 takes KEY=VALUE" >&2; exit 2 ;;
        esac
        if [ "$1" = --set ]; then settings+=("$2"); else settings_c+=("$2"); fi
        shift ;;
    --cache-sim) cache_sim=true ;;
    --caches) caches=$2; shift ;;
    --mem) mem=$2; shift ;;
    --top) top_n=$2; shift ;;
    --results) results_out=$2; shift ;;
    --valgrind-arg) vg_extra+=("$2"); shift ;;
    --keep) keep=true ;;
    --wait) wait_quiet=true ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$0: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
case $configs in
    *[!ABC]*|'') echo "$0: --configs takes letters A, B, C" >&2; exit 2 ;;
esac
geom='[1-9][0-9]*,[1-9][0-9]*,[1-9][0-9]*'
if ! [[ $caches =~ ^($geom)/($geom)/($geom)$ ]]; then
    echo "$0: --caches takes I1/D1/LL, each SIZE,ASSOC,LINE" >&2
    exit 2
fi
if [ -n "$dilate" ]; then
    case $dilate in
        ''|*[!0-9]*|0) echo "$0: --dilate takes a positive integer" >&2
                       exit 2 ;;
    esac
    # Before the --set values, which replace them.
    settings=("tpm-epoch=$((10 * dilate))ms"
              "tpm-sweep-budget=$((10 * dilate))us"
              "tpm-sweep-gap=$((500 * dilate))us" "${settings[@]:1}")
    $interval_set || interval=$((10 * dilate))ms
fi
case $mem in
    nohuge|huge) ;;
    *) echo "$0: --mem takes nohuge or huge" >&2; exit 2 ;;
esac

BENCH_NAME=bench-ovs-instr
# shellcheck source=tpm/bench/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
instr_helper=$top/tpm/bench/bench-ovs-instr.py
VALGRIND=${VALGRIND:-valgrind}
CALLGRIND_CONTROL=${CALLGRIND_CONTROL:-callgrind_control}

# Under valgrind ovs-vswitchd is ~50 times slower: longer timeouts than
# bench-lib.sh's for the commands that wait for it.
vsctl() { "$RUN_BIN/utilities/ovs-vsctl" --db="unix:$RUN_DIR/db.sock" \
              --timeout=600 "$@"; }
appctl() { "$RUN_BIN/utilities/ovs-appctl" --timeout=300 -t "$CTL" "$@"; }

trees=()
[[ $configs == *A* ]] && trees+=(ovs-stock)
[[ $configs == *[BC]* ]] && trees+=(ovs)
bench_check_root
bench_check_builds "$build" "${trees[@]}"
command -v "$PY" >/dev/null || die "$PY not found"
command -v "$VALGRIND" >/dev/null || die "$VALGRIND not found (valgrind)"
command -v "$CALLGRIND_CONTROL" >/dev/null \
    || die "$CALLGRIND_CONTROL not found (valgrind)"

# The valgrind process of the current run (our child), for the cleanup
# if it dies before writing its pidfile.
VG_PID=
bench_on_exit() {
    vg_kill
}
# vg_ours PID: bench-lib.sh's "ours", quiet once the process is gone.
vg_ours() {
    [ -r "/proc/$1/cmdline" ] && ours "$1" 2>/dev/null
}
# vg_kill: stops the current run's valgrind'ed ovs-vswitchd (through its
# control socket, then SIGTERM, then SIGKILL; only while its command line
# names the run directory) and reaps it.
vg_kill() {
    local i
    [ -n "$VG_PID" ] || return 0
    if [ -n "$RUN_DIR" ] && vg_ours "$VG_PID"; then
        if [ -s "$RUN_DIR/ovs-vswitchd.pid" ]; then
            stop_daemon ovs-vswitchd exit --cleanup 2>/dev/null
        fi
        if vg_ours "$VG_PID"; then
            kill "$VG_PID" 2>/dev/null || true
            for i in $(seq 100); do vg_ours "$VG_PID" || break; sleep 0.1; done
            if vg_ours "$VG_PID"; then
                kill -9 "$VG_PID" 2>/dev/null || true
            fi
        fi
    fi
    wait "$VG_PID" 2>/dev/null || true
    VG_PID=
}

bench_trap
wait_quiet

bench_mkwork tpm-bench-ovs-instr
bench_copy_bins "$build" "${trees[@]}"
built=
for tree in "${trees[@]}"; do
    built+="${built:+, }$build/$tree (built $(date -r \
        "$build/$tree/vswitchd/ovs-vswitchd" '+%F %T'))"
done
log "binaries: $built; source tree" \
    "$(git -C "$top" describe --always --dirty 2>/dev/null || echo '?')"
for tree in "${trees[@]}"; do
    log "  $tree/vswitchd/ovs-vswitchd sha256" \
        "$(sha256sum "$WORK/bin/$tree/vswitchd/ovs-vswitchd" | cut -c1-16)"
done
results=$WORK/results.jsonl
: >"$results"
# Huge pages only if asked (the script then may reserve and mount them,
# undone on exit, as bench-ovs.sh).
bench_hugepages

pcap=$WORK/traffic.pcap
"$PY" "$helper" pcap "$pcap" --flows "$flows" --size 64 \
    --prefixes "$prefixes"
traffic="$flows UDP/IPv4 flows, 64-byte frames, round-robin"
log "traffic: $pcap, $traffic"

# --skip-plt=no: with callgrind's default (yes), runs whose main thread
# is busy (config C) had phantom costs, up to 250 Ir per packet and
# different in every run, charged to the call instructions of calls
# through the PLT (time_timespec__'s calls of pthread_once() and
# clock_gettime(), equal at both).  With --skip-plt=no there are none,
# and each PLT stub (one jump) is counted as a function of its own,
# which callgrind's output names by the stub's address and the tag PLT,
# as in "fn=(176) 0x0000000004001010 [PLT]" (seen with valgrind 3.19).
vg_args=(--tool=callgrind --toggle-collect=pmd_thread_main --fair-sched=yes
         --skip-plt=no "--vgdb-prefix=$WORK/vgdb")
vg_args+=("${vg_extra[@]}")
if $cache_sim; then
    IFS=/ read -r i1 d1 ll <<< "$caches"
    vg_args+=(--cache-sim=yes "--I1=$i1" "--D1=$d1" "--LL=$ll")
fi

# instr_start OUT TAG TREE [KEY=VALUE...]: bench-lib.sh's bench_start,
# with ovs-vswitchd under valgrind in the background (not --detach).
instr_start() {
    local out=$1
    bench_prepare "$@"
    # "ip netns exec" execs valgrind: $! is valgrind's (and so
    # ovs-vswitchd's) PID.
    ip netns exec "$NS" "$VALGRIND" "${vg_args[@]}" \
        "--log-file=$out/valgrind.log" \
        "--callgrind-out-file=$out/callgrind.out" \
        "$RUN_BIN/vswitchd/ovs-vswitchd" -vconsole:off \
        "unix:$out/db.sock" --pidfile="$out/ovs-vswitchd.pid" \
        --no-chdir --log-file="$out/vswitchd.log" \
        </dev/null >"$out/vswitchd.stdout" 2>&1 &
    VG_PID=$!
    OUR_PIDS+="$VG_PID "
    wait_for 120 test -s "$out/ovs-vswitchd.pid" \
        || die "$RUN_LABEL: no pidfile from ovs-vswitchd under valgrind" \
               "after 120 s: $(tail -n 5 "$out/valgrind.log")"
    VSWITCHD_PID=$(cat "$out/ovs-vswitchd.pid")
    [ "$VSWITCHD_PID" = "$VG_PID" ] \
        || die "$RUN_LABEL: pidfile $VSWITCHD_PID, valgrind $VG_PID"
    CTL=$out/ovs-vswitchd.$VSWITCHD_PID.ctl
    wait_for 120 test -S "$CTL" \
        || die "$RUN_LABEL: no control socket $CTL after 120 s"
}

# last_wins KEY=VAL...: one KEY=VAL per key, the last given, in the
# order of the keys' first appearance (one "ovs-vsctl set" takes each
# key once).
last_wins() {
    local kv k i
    local -a keys=() vals=()
    for kv in "$@"; do
        k=${kv%%=*}
        for ((i = 0; i < ${#keys[@]}; i++)); do
            [ "${keys[i]}" = "$k" ] && break
        done
        keys[i]=$k
        vals[i]=$kv
    done
    printf '%s\n' "${vals[@]}"
}

cg_control() {
    "$CALLGRIND_CONTROL" "--vgdb-prefix=$WORK/vgdb" "$@"
}

# run_one CONFIG
run_one() {
    local cfg=$1 tree out br=br0 tag t0 t1 dump
    case $cfg in
        A) tree=ovs-stock ;;
        *) tree=ovs ;;
    esac
    out=$WORK/$cfg
    mkdir -p "$out"
    tag=tpmbi$$$cfg
    RUN_LABEL=$cfg
    local sets=("${settings[@]}")
    [ "$cfg" != C ] || sets+=("${settings_c[@]}")
    mapfile -t sets < <(last_wins "${sets[@]}")
    t0=$SECONDS
    instr_start "$out" "$tag" "$tree" "${sets[@]}"
    log "  $cfg: ovs-vswitchd under callgrind, pid $VSWITCHD_PID;" \
        "other_config ${sets[*]}"

    bench_add_output $br "$rule"
    if [ "$cfg" != A ]; then
        wait_for 300 tpm_pmd_ready || die "$cfg: no monitor on PMD core 1"
    fi
    if [ "$cfg" = C ]; then
        # The events over 16 connections (one command at a time,
        # ovs-vswitchd under valgrind takes ~0.3 s each).
        "$PY" "$helper" events "$CTL" --prefixes "$prefixes" \
            --per-prefix "$per_prefix" --interval "$interval" --jobs 16 \
            --timeout 600 \
            >"$out/events.log" \
            || die "$cfg: installing events failed: $(cat "$out/events.log")"
        log "  $(cat "$out/events.log")"
    fi
    vsctl add-port $br p1 -- set Interface p1 type=dpdk \
        "options:dpdk-devargs=net_pcap0,rx_pcap=$pcap,infinite_rx=1" \
        ofport_request=1
    bench_port_errors p1 p2
    wait_for 300 pmd_receiving || die "$cfg: PMD not receiving after 300 s"
    log "  $cfg: receiving $((SECONDS - t0)) s after the start;" \
        "warm-up $warmup s"
    sleep "$warmup"

    # The window: callgrind's counters and the PMD's, opened and closed
    # in the same order.
    [ "$cfg" = A ] || appctl tpm/stats >"$out/tpm0.txt"
    cg_control -z "$VSWITCHD_PID" >"$out/cg-zero.txt" 2>&1 \
        || die "$cfg: callgrind_control -z: $(cat "$out/cg-zero.txt")"
    appctl dpif-netdev/pmd-stats-clear >/dev/null
    sleep "$seconds"
    cg_control -d "$VSWITCHD_PID" >"$out/cg-dump.txt" 2>&1 \
        || die "$cfg: callgrind_control -d: $(cat "$out/cg-dump.txt")"
    appctl dpif-netdev/pmd-stats-show >"$out/stats.txt"
    appctl dpif-netdev/pmd-perf-show >"$out/perf.txt"
    [ "$cfg" = A ] || appctl tpm/stats >"$out/tpm1.txt"
    dump=$out/callgrind.out.1
    wait_for 60 test -s "$dump" || die "$cfg: no dump $dump"
    t1=$SECONDS
    vg_kill
    run_down

    local tpm_args=()
    [ "$cfg" = A ] || tpm_args=(--tpm0 "$out/tpm0.txt" --tpm1 "$out/tpm1.txt")
    "$PY" "$instr_helper" analyze "$dump" --config "$cfg" \
        --stats "$out/stats.txt" --perf "$out/perf.txt" "${tpm_args[@]}" \
        --seconds "$seconds" --top "$top_n" --run-seconds $((t1 - t0)) \
        >>"$results" || die "$cfg: analysing $dump failed"
    "$PY" "$instr_helper" show <(tail -n 1 "$results") | sed 's/^/    /' >&2
    # The dumps are large; kept with --keep only.
    $keep || rm -f "$out"/callgrind.out*
}

log "rule $rule; configs $configs; warm-up $warmup s, window $seconds s;" \
    "valgrind ${vg_args[*]}; work directory $WORK"
for ((ci = 0; ci < ${#configs}; ci++)); do
    cfg=${configs:ci:1}
    wait_quiet
    log "config $cfg"
    run_one "$cfg"
done

if [ -n "$results_out" ]; then
    cp "$results" "$results_out"
fi
also_c=
if [ ${#settings_c[@]} -gt 0 ]; then
    also_c="; C also ${settings_c[*]}"
fi
echo
echo "Machine: $(nproc) CPUs, $(awk -F': ' '/^model name/ { print $2; exit }' \
    /proc/cpuinfo); $("$VALGRIND" --version); DPDK memory: $mem"
echo "Traffic: $traffic; rule $rule; C: $((prefixes * per_prefix))" \
    "events ($prefixes prefixes x $per_prefix), interval $interval;" \
    "other_config ${settings[*]}$also_c"
"$PY" "$instr_helper" table "$results"
