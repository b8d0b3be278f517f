#!/bin/bash
# The cost of the Trumpet packet monitor inside Open vSwitch's PMD, at full
# speed and without a NIC (docs/benchmarks.md, section 4).
#
#   sh tests/bootstrap.sh build && make -C build ovs ovs-stock
#   tpm/bench-ovs.sh [--rounds N] [--seconds S] ...     (as root)
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
  --flows N       flows in the pcap (300)
  --prefixes N    nw_dst/24 prefixes with events, config C (512)
  --per-prefix N  events per prefix = events per packet, config C (8)
  --rule FLOW     the OpenFlow rule (in_port=1,actions=output:2: OVS's
                  "simple match" path; e.g. ip,in_port=1,nw_dst=10.0.0.0/8,
                  actions=output:2 takes the miniflow/EMC path)
  --mem MODE      DPDK memory: huge, nohuge or auto (auto: huge pages if
                  1024 can be had; the script may raise vm.nr_hugepages to
                  1024 and mount hugetlbfs on /dev/hugepages, and undoes
                  both on exit)
  --profile       after each run's window, perf record the PMD core for
                  3 s (outside the window) and keep the top symbols
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
results_out=
keep=false
wait_quiet=true
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
    --profile) profile=true ;;
    --results) results_out=$2; shift ;;
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
if [ "$flows" -gt "$prefixes" ] && [[ $configs == *C* ]]; then
    echo "$0: each flow needs a prefix of its own: --flows <= --prefixes" >&2
    exit 2
fi

top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
PY=${PYTHON3:-python3}
helper=$top/tpm/bench-ovs.py

log() {
    printf '[bench-ovs %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2
}
die() {
    log "error: $*"
    exit 1
}

[ "$(id -u)" = 0 ] || die "needs root (DPDK, huge pages, network namespaces)"
for tree in ovs ovs-stock; do
    for f in vswitchd/ovs-vswitchd ovsdb/ovsdb-server ovsdb/ovsdb-tool \
             utilities/ovs-vsctl utilities/ovs-appctl utilities/ovs-ofctl; do
        [ -x "$build/$tree/$f" ] \
            || die "$build/$tree/$f not built (make -C $build ovs ovs-stock)"
    done
done
command -v ip >/dev/null || die "ip not found (package iproute2)"
command -v "$PY" >/dev/null || die "$PY not found"
if $profile; then
    command -v perf >/dev/null || die "--profile needs perf (linux-perf)"
fi

# State for the cleanup.
WORK=
NS=
RUN_DIR=
RUN_BIN=
HP_OLD=
HP_MOUNTED=false
PERF_PID=
OUR_PIDS=" "

# Stops daemon NAME of the current run (pidfile RUN_DIR/NAME.pid): through
# its control socket, then SIGTERM, then SIGKILL, only if the PID's command
# line names our directory.
ours() {
    local cmdline
    cmdline=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) \
        && [[ $cmdline == *"$RUN_DIR/"* ]]
}
# pid_running PID: the process exists and is not a zombie (a detached
# daemon's zombie waits for init to reap it).
pid_running() {
    local state
    state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$state" ] && [ "$state" != Z ]
}
stop_daemon() {
    local name=$1 pid i
    shift
    pid=$(cat "$RUN_DIR/$name.pid" 2>/dev/null) || return 0
    [ -n "$pid" ] && ours "$pid" || return 0
    "$RUN_BIN/utilities/ovs-appctl" --timeout=10 \
        -t "$RUN_DIR/$name.$pid.ctl" "$@" >/dev/null 2>&1 || true
    for i in $(seq 100); do ours "$pid" || break; sleep 0.1; done
    if ours "$pid"; then
        log "warning: $name (pid $pid) did not exit; SIGTERM"
        kill "$pid" 2>/dev/null || true
        for i in $(seq 30); do ours "$pid" || break; sleep 0.1; done
        ours "$pid" && kill -9 "$pid" 2>/dev/null
    fi
    # An exiting process loses its command line before it is gone (DPDK
    # unmaps its memory meanwhile): wait for the PID itself, bounded.
    for i in $(seq 100); do
        pid_running "$pid" || return 0
        sleep 0.1
    done
    log "warning: $name (pid $pid) still exiting"
}

run_down() {
    if [ -n "$PERF_PID" ]; then
        kill -INT "$PERF_PID" 2>/dev/null || true
        wait "$PERF_PID" 2>/dev/null || true
        PERF_PID=
    fi
    if [ -n "$RUN_DIR" ]; then
        stop_daemon ovs-vswitchd exit --cleanup
        stop_daemon ovsdb-server exit
    fi
    if [ -n "$NS" ] && ip netns list | grep -qw "^$NS"; then
        ip netns del "$NS" || log "warning: cannot delete netns $NS"
    fi
    NS=
    RUN_DIR=
}

cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM
    run_down
    if [ -n "$HP_OLD" ]; then
        echo "$HP_OLD" >/proc/sys/vm/nr_hugepages
    fi
    if $HP_MOUNTED; then
        umount /dev/hugepages
    fi
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        if $keep; then
            log "kept $WORK"
        else
            rm -rf "$WORK"
        fi
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Processes of others that would disturb (or be disturbed by) the
# measurement: benchmarks and ovs-vswitchd not started by this script.
foreign_pids() {
    local p cmdline
    for p in $(pgrep -f 'tpm-bench|ovs-vswitchd' || true); do
        [ "$p" = $$ ] && continue
        [[ $OUR_PIDS == *" $p "* ]] && continue
        cmdline=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) || continue
        [ -n "$WORK" ] && [[ $cmdline == *"$WORK"* ]] && continue
        echo "$p"
    done
}

# wait_quiet: waits (every 30 s, up to 20 min) until foreign_pids is
# empty; called before every run, so no run overlaps another benchmark.
wait_quiet() {
    local i others
    $wait_quiet || return 0
    for i in $(seq 41); do
        others=$(foreign_pids | tr '\n' ' ')
        [ -z "$others" ] && return 0
        [ "$i" = 41 ] && die "other benchmarks or ovs-vswitchd still" \
            "running after 20 min (PIDs $others); try later or --no-wait"
        log "waiting: other benchmark or ovs-vswitchd running (PIDs" \
            "$others); next check in 30 s"
        sleep 30
    done
}
wait_quiet

WORK=$(mktemp -d /tmp/tpm-bench-ovs.XXXXXX)
chmod 755 "$WORK"

# A copy of both builds' programs (linked statically against OVS's own
# libraries), so that a rebuild during the runs cannot mix binaries.
for tree in ovs ovs-stock; do
    for f in vswitchd/ovs-vswitchd vswitchd/vswitch.ovsschema \
             ovsdb/ovsdb-server ovsdb/ovsdb-tool utilities/ovs-vsctl \
             utilities/ovs-appctl utilities/ovs-ofctl; do
        mkdir -p "$WORK/bin/$tree/${f%/*}"
        cp -p "$build/$tree/$f" "$WORK/bin/$tree/$f"
    done
done
log "binaries: $build/ovs (built $(date -r "$build/ovs/vswitchd/ovs-vswitchd" \
    '+%F %T')), $build/ovs-stock (built $(date -r \
    "$build/ovs-stock/vswitchd/ovs-vswitchd" '+%F %T')); source tree" \
    "$(git -C "$top" describe --always --dirty 2>/dev/null || echo '?')"
results=$WORK/results.jsonl
: >"$results"

# DPDK memory.
hp_free() { awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo; }
if [ "$mem" = auto ] || [ "$mem" = huge ]; then
    size=$(awk '/^Hugepagesize:/ { print $2 }' /proc/meminfo)
    if [ "${size:-0}" = 2048 ]; then
        total=$(cat /proc/sys/vm/nr_hugepages)
        if [ "$(hp_free)" -lt 1024 ] && [ "$total" -lt 1024 ]; then
            HP_OLD=$total
            echo 1024 >/proc/sys/vm/nr_hugepages || true
        fi
        if ! grep -q '^[^ ]* /dev/hugepages hugetlbfs' /proc/mounts; then
            mkdir -p /dev/hugepages
            mount -t hugetlbfs -o pagesize=2M nodev /dev/hugepages \
                && HP_MOUNTED=true
        fi
    fi
    if [ "${size:-0}" = 2048 ] && [ "$(hp_free)" -ge 300 ] \
       && grep -q ' /dev/hugepages hugetlbfs' /proc/mounts; then
        mem=huge
    elif [ "$mem" = huge ]; then
        die "--mem huge: fewer than 300 free 2 MB huge pages"
    else
        mem=nohuge
    fi
fi
log "DPDK memory: $mem ($(hp_free) huge pages free)"

pcap=$WORK/traffic.pcap
"$PY" "$helper" pcap "$pcap" --flows "$flows" --size 64
log "traffic: $pcap, $flows UDP/IPv4 flows, 64-byte frames, round-robin"

# cpu_snapshot PID: jiffies "all-CPU-busy all-CPU-total cpu1-steal
# cpu1-total PID-utime+stime", to tell how much else ran during a window.
cpu_snapshot() {
    local vsw
    vsw=$(awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0)
    awk -v vsw="$vsw" '
        $1 == "cpu" { t = 0; for (i = 2; i <= NF; i++) t += $i;
                      busy = t - $5 - $6; all = t }
        $1 == "cpu1" { t = 0; for (i = 2; i <= NF; i++) t += $i;
                       steal = $9; t1 = t }
        END { print busy, all, steal, t1, vsw }' /proc/stat
}

# wait_for SECONDS COMMAND...: every 0.1 s until COMMAND succeeds.
wait_for() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.1
    done
}

pmd_exists() {
    appctl dpif-netdev/pmd-stats-show 2>/dev/null | grep -q 'core_id 1:'
}
pmd_receiving() {
    local n
    n=$(appctl dpif-netdev/pmd-stats-show 2>/dev/null \
        | awk '/packets received:/ { print $3; exit }')
    [ "${n:-0}" -gt 0 ]
}
tpm_pmd_ready() {
    appctl tpm/stats 2>/dev/null | grep -q '^pmd core 1'
}

vsctl() { "$RUN_BIN/utilities/ovs-vsctl" --db="unix:$RUN_DIR/db.sock" \
              --timeout=60 "$@"; }
appctl() { "$RUN_BIN/utilities/ovs-appctl" --timeout=60 -t "$CTL" "$@"; }

# run_one ROUND CONFIG
run_one() {
    local round=$1 cfg=$2 tree out br=br0 tag
    case $cfg in
        A) tree=ovs-stock ;;
        *) tree=ovs ;;
    esac
    RUN_BIN=$WORK/bin/$tree
    out=$WORK/r$round-$cfg
    mkdir -p "$out"
    RUN_DIR=$out
    tag=tpmbo$$r$round$cfg
    NS=$tag
    export OVS_RUNDIR=$out OVS_DBDIR=$out OVS_LOGDIR=$out \
           OVS_SYSCONFDIR=$out

    "$RUN_BIN/ovsdb/ovsdb-tool" create "$out/conf.db" \
        "$RUN_BIN/vswitchd/vswitch.ovsschema"
    "$RUN_BIN/ovsdb/ovsdb-server" -vconsole:off \
        --remote="punix:$out/db.sock" --pidfile="$out/ovsdb-server.pid" \
        --detach --no-chdir --log-file="$out/ovsdb.log" "$out/conf.db"
    vsctl --no-wait init
    local dpdk
    if [ "$mem" = huge ]; then
        dpdk=("other_config:dpdk-extra=--no-pci --file-prefix=$tag"
              other_config:dpdk-socket-mem=512)
    else
        dpdk=("other_config:dpdk-extra=--no-pci --no-huge -m 1024 --legacy-mem --no-shconf --file-prefix=$tag")
    fi
    # The tpm-* knobs are ignored by stock OVS; the same settings for all.
    vsctl --no-wait set Open_vSwitch . other_config:dpdk-init=true \
        "${dpdk[@]}" other_config:pmd-cpu-mask=0x2 \
        other_config:pmd-perf-metrics=true other_config:tpm-epoch=10ms

    ip netns add "$NS"
    ip -n "$NS" link set lo up
    ip netns exec "$NS" "$RUN_BIN/vswitchd/ovs-vswitchd" -vconsole:off \
        "unix:$out/db.sock" --pidfile="$out/ovs-vswitchd.pid" --detach \
        --no-chdir --log-file="$out/vswitchd.log"
    CTL=$out/ovs-vswitchd.$(cat "$out/ovs-vswitchd.pid").ctl
    OUR_PIDS+="$(cat "$out/ovs-vswitchd.pid") "

    # Output port and the rule first; the input port last, so traffic
    # starts with everything (events included) in place.
    vsctl add-br $br -- set bridge $br datapath_type=netdev \
            fail_mode=secure \
        -- add-port $br p2 -- set Interface p2 type=dpdk \
           "options:dpdk-devargs=net_null0,no-rx=1" ofport_request=2
    "$RUN_BIN/utilities/ovs-ofctl" del-flows $br
    "$RUN_BIN/utilities/ovs-ofctl" add-flow $br "$rule"
    wait_for 60 pmd_exists || die "$cfg: no PMD on core 1 after 60 s"
    if [ "$cfg" != A ]; then
        wait_for 30 tpm_pmd_ready || die "$cfg: no monitor on PMD core 1"
    fi
    if [ "$cfg" = C ]; then
        "$PY" "$helper" events "$CTL" --prefixes "$prefixes" \
            --per-prefix "$per_prefix" >"$out/events.log" \
            || die "$cfg: installing events failed: $(cat "$out/events.log")"
        log "  $(cat "$out/events.log")"
    fi
    vsctl add-port $br p1 -- set Interface p1 type=dpdk \
        "options:dpdk-devargs=net_pcap0,rx_pcap=$pcap,infinite_rx=1" \
        ofport_request=1
    local p err
    for p in p1 p2; do
        err=$(vsctl get Interface $p error)
        case $err in
        '[]'|'') ;;
        *) die "$cfg: port $p: $err" ;;
        esac
    done
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
    read -r steal other < <(echo "$t0 $t1" | awk -v ncpu="$(nproc)" '{
        st = ($9 - $4) > 0 ? 100 * ($8 - $3) / ($9 - $4) : 0;
        d = $7 - $2; o = ($6 - $1) - ($10 - $5);
        ot = d > 0 ? ncpu * 100 * o / d : 0;
        printf "%.2f %.1f\n", st, ot }')
    "$PY" "$helper" parse --round "$round" --config "$cfg" --mem "$mem" \
        --perf "$out/perf.txt" --stats "$out/stats.txt" "${tpm_args[@]}" \
        --steal "$steal" --other-load "$other" \
        --foreign $((f0 > f1 ? f0 : f1)) >>"$results"
    log "  $(tail -n 1 "$results" | "$PY" -c 'import json, sys
r = json.loads(sys.stdin.read())
print("%s: %s Kpps, %s cycles/pkt" % (r["config"], r.get("kpps"),
                                      r.get("cpp")))')"

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

log "rule $rule; configs $configs x $rounds rounds, warm-up $warmup s, window" \
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
"$PY" "$helper" table "$results" --events $((prefixes * per_prefix))
