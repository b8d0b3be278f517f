#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# DoS resilience of the monitor inside an OVS-DPDK PMD (the paper's
# Fig. 11; docs/benchmarks.md, section 6).
#
#   tpm/bench/bench-dos.sh [--thresholds "0 64 ..."] \
#       [--attacks "syn threshold"]
#                    [--line-rate BITS] [--patterns N] ...     (as root)
#
# For every DoS threshold T and attack type: the largest fraction f of the
# line's bytes that an attack may take while the PMD stays feasible, found
# by bisection on f.  Traffic (tpm/bench/dos-feeder.c, a DPDK process of
# its own on core 0, paced by the TSC; see there why not a pcap): the attack's
# 64-byte frames
# (syn: one packet per flow; threshold: flows of ceil(T/64) packets) and
# legitimate flows of 10 frames of 1500 bytes, burst 1, at --line-rate
# bits/s counting 20 bytes of preamble and gap per frame.  The feeder
# transmits on a virtio-user port into the switch's dpdkvhostuser port p1;
# a full virtio ring drops (a NIC's rx ring of 1024 descriptors).
#
# Events: --patterns events with pairwise different filter patterns, each
# covering all the attack traffic (sum(volume) > 1000GB per nw_dst/24:
# never satisfied), and per legitimate /24 prefix one event
# sum(volume) > --legit-bytes per nw_dst/24, satisfied every epoch while
# its flows get through.  tpm-epoch and intervals 10 ms; the threshold is
# tpm-dos-threshold, set before the ports (a switch per threshold).
#
# Feasible at f: in the window, the ring dropped <= 2% of what the feeder
# offered (the PMD kept up), no sweep was unfinished, and every
# legitimate event was reported in >= 95% of the window's epochs
# (tpm/reports: epochs after the latest report before the window, up to
# the latest after it).  An infeasible probe is taken again (at most
# twice) if the feeder itself fell behind its schedule by more than 5%
# (core 0 busy) or other processes used more than --max-other % of a CPU.
#
# Beside each boundary: the model's prediction (ovs-appctl tpm/dos-model
# RATE_DOS RATE_GOOD attack=A threshold=T ...: the largest f with
# load <= 1, by bisection), when the build has the command.
set -euo pipefail

usage() {
    cat <<EOF
usage: $0 [OPTIONS]   (as root)
  --thresholds LIST  DoS thresholds, bytes
                     ("0 64 128 256 384 512 832 1024 1500")
  --attacks LIST     attack types ("syn threshold")
  --line-rate BITS   line rate, bits/s with 20 bytes of preamble and gap
                     per frame (10e9)
  --patterns N       attack filter patterns = events per attack flow (8)
  --legit-prefixes N legitimate /24 prefixes, one event each (4)
  --legit-bytes N    their predicate: sum(volume) > N (1000)
  --steps N          probes per bisection on f after f=0 (6)
  --f-max F          upper end of the bisection on f (1)
  --seconds S        window per probe (2)
  --warmup S         from the feeder's start to the window (1)
  --pool-size N      flows sent in turn (burst 1) per kind (256)
  --max-other PCT    an infeasible probe during which other processes
                     (besides ovs-vswitchd and the feeder) used more than
                     PCT % of a CPU is repeated, up to twice (30)
  --knob KEY=VALUE   an other_config knob for every switch, e.g.
                     tpm-dos-window=100, tpm-dos-clear=false,
                     tpm-sweep-catchup=0 (repeatable; recorded in the
                     results)
  --results FILE     keep the JSON lines (one per probe) in FILE
  --table-out FILE   also write the markdown table to FILE
  --keep             keep the work directory
  --no-wait          do not wait for other benchmarks to finish
Environment: BUILD_DIR (default: build next to this script's tree),
PYTHON3, CC.  Needs 2 MB huge pages (for ovs-vswitchd and the feeder,
whose virtio-user memory the switch maps) and libdpdk-dev (pkg-config
libdpdk) to build the feeder.
EOF
}

thresholds="0 64 128 256 384 512 832 1024 1500"
attacks="syn threshold"
line_rate=10e9
patterns=8
legit_prefixes=4
legit_bytes=1000
steps=6
f_max=1
seconds=2
warmup=1
pool_size=256
max_other=30
knobs=()
results_out=
table_out=
keep=false
wait_quiet=true
while [ $# -gt 0 ]; do
    case $1 in
    --thresholds) thresholds=$2; shift ;;
    --attacks) attacks=$2; shift ;;
    --line-rate) line_rate=$2; shift ;;
    --patterns) patterns=$2; shift ;;
    --legit-prefixes) legit_prefixes=$2; shift ;;
    --legit-bytes) legit_bytes=$2; shift ;;
    --steps) steps=$2; shift ;;
    --f-max) f_max=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --warmup) warmup=$2; shift ;;
    --pool-size) pool_size=$2; shift ;;
    --max-other) max_other=$2; shift ;;
    --knob) knobs+=("$2"); shift ;;
    --results) results_out=$2; shift ;;
    --table-out) table_out=$2; shift ;;
    --keep) keep=true ;;
    --no-wait) wait_quiet=false ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$0: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

BENCH_NAME=bench-dos
# shellcheck source=tpm/bench/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
mem=huge

bench_check_root
bench_check_builds "$build" ovs
command -v "$PY" >/dev/null || die "$PY not found"
pkg-config --exists libdpdk \
    || die "the feeder needs libdpdk-dev (pkg-config libdpdk)"

FEEDER_PID=
bench_on_exit() {
    if [ -n "$FEEDER_PID" ]; then
        kill "$FEEDER_PID" 2>/dev/null || true
        wait "$FEEDER_PID" 2>/dev/null || true
        FEEDER_PID=
    fi
}
bench_trap
wait_quiet
bench_mkwork tpm-bench-dos
bench_copy_bins "$build" ovs
log "binaries: $build/ovs (built $(date -r "$build/ovs/vswitchd/ovs-vswitchd" \
    '+%F %T')); source tree" \
    "$(git -C "$top" describe --always --dirty 2>/dev/null || echo '?')"
feeder=$WORK/dos-feeder
# shellcheck disable=SC2046
${CC:-cc} -O2 -Wall $(pkg-config --cflags libdpdk) -o "$feeder" \
    "$top/tpm/bench/dos-feeder.c" $(pkg-config --libs libdpdk) \
    || die "cannot build the feeder"
results=$WORK/results.jsonl
: >"$results"
bench_hugepages
[ "$mem" = huge ] || die "needs 300 free 2 MB huge pages"

tag=
# start_switch T: a switch with DoS threshold T, the events, the ring port.
start_switch() {
    local th=$1 out=$WORK/t$1
    mkdir -p "$out"
    tag=tpmbd$$t$th
    RUN_LABEL=t$th
    bench_start "$out" "$tag" ovs tpm-epoch=10ms tpm-dos-threshold="$th" \
        tpm-report-log=65536 "${knobs[@]}"
    bench_add_output br0 in_port=1,actions=output:2
    wait_for 30 tpm_pmd_ready || die "t$th: no monitor on PMD core 1"
    bench_pmd_nice -20
    "$PY" "$helper" dos-events "$CTL" --patterns "$patterns" \
        --legit-prefixes "$legit_prefixes" --legit-bytes "$legit_bytes" \
        >"$out/events.log" \
        || die "t$th: installing events failed: $(cat "$out/events.log")"
    log "  $(cat "$out/events.log")"
    vsctl add-port br0 p1 -- set Interface p1 type=dpdkvhostuser \
        ofport_request=1
    bench_port_errors p1 p2
    appctl list-commands >"$out/commands.txt"
}

# rates F: "RATE_DOS RATE_GOOD PKT_FRACTION" in packets/s for byte
# fraction F of the line.
rates() {
    awk -v f="$1" -v r="$line_rate" 'BEGIN {
        d = f * r / 8 / 84; g = (1 - f) * r / 8 / 1520;
        p = (d + g > 0) ? d / (d + g) : 0;
        printf "%.0f %.0f %.4f\n", d, g, p }'
}

# model_fraction T ATTACK: the model's largest feasible f (empty if the
# build has no tpm/dos-model).
model_fraction() {
    local th=$1 attack=$2 lo=0 hi=1 mid i rd rg pf load
    grep -q 'tpm/dos-model' "$RUN_DIR/commands.txt" || return 0
    for i in $(seq 12); do
        mid=$(awk -v a="$lo" -v b="$hi" 'BEGIN { printf "%.5f", (a + b) / 2 }')
        read -r rd rg pf < <(rates "$mid")
        load=$(appctl tpm/dos-model "$rd" "$rg" attack="$attack" \
               dos-bytes=64 good-bytes=1500 pkts-per-flow=10 \
               threshold="$th" 2>/dev/null \
               | awk '$1 == "load:" { print $2 }')
        [ -n "$load" ] || return 0
        if awk -v l="$load" 'BEGIN { exit !(l <= 1) }'; then
            lo=$mid
        else
            hi=$mid
        fi
    done
    echo "$lo"
}

# jiffies PID: its utime + stime.
jiffies() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# probe T ATTACK F [KEY=VALUE...]: one window at byte fraction F; appends
# a JSON line; returns 0 if feasible, 1 if not, 2 if the feeder fell
# behind, 3 if infeasible while other processes were busy.
probe() {
    local th=$1 attack=$2 f=$3 d=$RUN_DIR/probe secs rd rg pf st
    local t0 t1 j0 j1 steal other
    shift 3
    read -r rd rg pf < <(rates "$f")
    secs=$(awk -v w="$warmup" -v s="$seconds" 'BEGIN { print w + s + 2 }')
    rm -f "$d.feeder"
    # The feeder: a DPDK process of its own on core 0, its virtio-user
    # port connected to p1's vhost-user socket (the switch is the server).
    "$feeder" --no-pci --in-memory --single-file-segments -m 256 \
        --file-prefix="${tag}f" --lcores=0@0 --log-level=error \
        "--vdev=net_virtio_user0,path=$RUN_DIR/p1,queue_size=1024" \
        -- rate="$line_rate" \
        fraction="$f" attack="$attack" threshold="$th" seconds="$secs" \
        legit-prefixes="$legit_prefixes" pool-size="$pool_size" \
        stats="$d.feeder" 2>"$d.feeder.log" &
    FEEDER_PID=$!
    wait_for 30 test -s "$d.feeder" \
        || die "feeder did not start: $(cat "$d.feeder.log")"
    sleep "$warmup"
    appctl tpm/reports 1 >"$d.rep0"
    appctl tpm/stats >"$d.tpm0"
    cp "$d.feeder" "$d.fd0"
    appctl dpif-netdev/pmd-stats-clear >/dev/null
    t0=$(cpu_snapshot "$VSWITCHD_PID")
    j0=$(jiffies "$FEEDER_PID")
    sleep "$seconds"
    appctl dpif-netdev/pmd-perf-show -nh >"$d.perf"
    cp "$d.feeder" "$d.fd1"
    t1=$(cpu_snapshot "$VSWITCHD_PID")
    j1=$(jiffies "$FEEDER_PID")
    read -r steal other < <(cpu_load "$t0" "$t1")
    # Less the feeder's own CPU (a whole one).
    other=$(echo "$t0 $t1 $j0 $j1 $other" | awk -v ncpu="$(nproc)" '{
        d = $7 - $2; f = d > 0 ? ncpu * 100 * ($12 - $11) / d : 0;
        printf "%.1f\n", $13 - f }')
    appctl tpm/stats >"$d.tpm1"
    appctl tpm/reports >"$d.rep1"
    kill "$FEEDER_PID" 2>/dev/null || true
    wait "$FEEDER_PID" 2>/dev/null || true
    FEEDER_PID=
    "$PY" "$helper" dos-probe --perf "$d.perf" --tpm-before "$d.tpm0" \
        --tpm-after "$d.tpm1" --feeder-before "$d.fd0" \
        --feeder-after "$d.fd1" --reports-before "$d.rep0" \
        --reports-after "$d.rep1" --legit-prefixes "$legit_prefixes" \
        --set threshold="$th" --set attack="$attack" --set fraction="$f" \
        --set pkt_fraction="$pf" --set rate_dos="$rd" --set rate_good="$rg" \
        --set line_rate="$line_rate" --set patterns="$patterns" \
        --set steal_pct="$steal" --set other_load_pct="$other" \
        "${@/#/--set=}" >>"$results"
    tail -n 1 "$results" | "$PY" -c 'import json, sys
max_other = float(sys.argv[1])
r = json.loads(sys.stdin.read())
t = r.get("tpm", {})
print("  T %4d %-9s f %.4f (pkts %.3f): %5.2f Mpps fwd, ring drops %d, "
      "unfinished %s, legit min %.2f, passed %s, matches %s, other %s%%: %s"
      % (r["threshold"], r["attack"], r["fraction"], r["pkt_fraction"],
         r.get("pps", 0) / 1e6, r["feeder"]["ring_drops"],
         t.get("sweeps_unfinished"), r["legit_min"],
         t.get("dos_flows_passed", "?"), t.get("matches"),
         r["other_load_pct"], "ok" if r["feasible"] else "INFEASIBLE"
         + ("" if r["feeder_ok"] else " (feeder late)")))
if r["feasible"]:
    sys.exit(0)
sys.exit(2 if not r["feeder_ok"] else 3 if r["other_load_pct"] > max_other
         else 1)' "$max_other" >&2 && return 0
    st=$?
    return "$st"
}

# save_results: the JSON lines so far into --results (an interrupted run
# keeps what it measured).
save_results() {
    [ -z "$results_out" ] || cp "$results" "$results_out"
}

# probe_retry ...: probe, repeated (at most twice) if the feeder fell
# behind or other processes were busy.
probe_retry() {
    local st i
    for i in 1 2 3; do
        st=0
        probe "$@" || st=$?
        save_results
        case $st in
        2) log "  the feeder fell behind its schedule; again" ;;
        3) log "  busy machine during the window; again"; wait_quiet ;;
        *) return "$st" ;;
        esac
    done
    return 1
}

log "thresholds {$thresholds} x attacks {$attacks}, line rate $line_rate" \
    "b/s, $patterns patterns, $legit_prefixes legitimate prefixes, window" \
    "$seconds s; work directory $WORK"
t_start=$SECONDS
for th in $thresholds; do
    wait_quiet
    log "threshold $th"
    start_switch "$th"
    for attack in $attacks; do
        lo=
        best=
        if probe_retry "$th" "$attack" 0 kind=probe; then
            lo=0
            best=$(tail -n 1 "$results")
        fi
        if [ -z "$lo" ]; then
            mf=$(model_fraction "$th" "$attack")
            log "  infeasible even without attack at $line_rate b/s"
            echo "{\"kind\": \"boundary\", \"threshold\": $th," \
                 "\"attack\": \"$attack\", \"none_feasible\": true," \
                 "\"why\": \"f=0 infeasible\"" \
                 "${mf:+, \"model_fraction\": $mf}}" \
                >>"$results"
            save_results
            continue
        fi
        hi=$f_max
        for i in $(seq "$steps"); do
            mid=$(awk -v a="$lo" -v b="$hi" \
                  'BEGIN { printf "%.4f", (a + b) / 2 }')
            if probe_retry "$th" "$attack" "$mid" kind=probe; then
                lo=$mid
                best=$(tail -n 1 "$results")
            else
                hi=$mid
            fi
        done
        # The model, once the probes have shown the switch frames of
        # several mean sizes at saturation (its switch term is a line in
        # the frame size, fitted on them; the monitor's terms are profiled
        # apart, and nothing is fitted on feasibility).
        mf=$(model_fraction "$th" "$attack")
        sw=$(appctl tpm/dos-model 1 1 2>/dev/null \
             | sed -n 's/^switch_cycles_per_packet: //p')
        # The model's terms at the boundary's own rates, beside the PMD's
        # sampled cycles in the results (tpm.sampled_cpp).
        read -r rd rg pf < <(rates "$lo")
        appctl tpm/dos-model "$rd" "$rg" attack="$attack" dos-bytes=64 \
            good-bytes=1500 pkts-per-flow=10 threshold="$th" \
            >"$RUN_DIR/model-$attack.txt" 2>&1 || true
        log "  $attack: model's largest feasible fraction: ${mf:-n/a}" \
            "(switch cycles per packet: ${sw:-n/a})"
        echo "$best" | "$PY" -c 'import json, sys
r = json.loads(sys.stdin.read())
r["kind"] = "boundary"
if sys.argv[1]:
    r["model_fraction"] = float(sys.argv[1])
if sys.argv[2]:
    r["model_switch"] = sys.argv[2]
r["model_at_boundary"] = dict(
    line.split(": ", 1) for line in open(sys.argv[3]).read().splitlines()
    if ": " in line)
r["knobs"] = sys.argv[4:]
print(json.dumps(r, sort_keys=True))' "${mf:-}" "${sw:-}" \
            "$RUN_DIR/model-$attack.txt" "${knobs[@]}" >>"$results"
        save_results
    done
    run_down
done
el=$((SECONDS - t_start))
log "done in $((el / 60)) min $((el % 60)) s"

save_results
echo
echo "Machine: $(nproc) CPUs, $(awk -F': ' '/^model name/ { print $2; exit }' \
    /proc/cpuinfo); load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
"$PY" "$helper" dos-table "$results" | tee "${table_out:-/dev/null}"
