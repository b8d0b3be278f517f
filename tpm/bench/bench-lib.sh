# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Shared daemon management of the OVS-DPDK benchmarks (tpm/bench/bench-ovs.sh,
# tpm/bench/bench-feasibility.sh, tpm/bench/bench-dos.sh).  Sourced, not
# run; bash.
#
# The caller sets, before sourcing:
#   BENCH_NAME   tag of the log lines ("bench-ovs")
# and may set, before or after (defaults in brackets):
#   keep         true: keep the work directory on exit [false]
#   wait_quiet   false: do not wait for other benchmarks [true]
#   mem          DPDK memory: auto, huge or nohuge [auto]
# and, per run, RUN_LABEL (prefix of the errors of bench_add_output and
# bench_port_errors, e.g. the configuration's name).  It sets top (the
# source tree), build (BUILD_DIR, default build/ in it), PY (PYTHON3,
# default python3) and helper (tpm/bench/bench-ovs.py).
#
# What it gives:
#   log, die                  messages on stderr
#   bench_check_root, bench_check_builds DIR TREE...
#   bench_trap                installs the cleanup on EXIT, INT and TERM:
#                             stops the daemons, deletes the namespace,
#                             undoes the huge page changes, removes WORK
#                             (unless keep); bench_on_exit, if defined, runs
#                             first
#   wait_quiet                waits until no other benchmark or
#                             ovs-vswitchd runs (foreign_pids)
#   bench_mkwork PREFIX       WORK=/tmp/PREFIX.XXXXXX
#   bench_copy_bins DIR TREE...  copies TREE's programs to WORK/bin/TREE
#   bench_hugepages           sets up huge pages (mem=auto|huge), sets mem
#   bench_prepare OUT TAG TREE [KEY=VALUE...]
#                             bench_start up to ovs-vswitchd: the
#                             database, its settings, the namespace
#   bench_start OUT TAG TREE [KEY=VALUE...]
#                             ovsdb-server and ovs-vswitchd with their
#                             files in OUT, in network namespace TAG, DPDK
#                             --file-prefix=TAG, the other_config settings
#                             given (pmd-cpu-mask=0x2 and
#                             pmd-perf-metrics=true always); sets RUN_DIR,
#                             RUN_BIN, NS, CTL, VSWITCHD_PID
#   bench_add_output BR RULE  netdev bridge BR with p2 = net_null0 and the
#                             OpenFlow rule RULE, waits for PMD core 1
#   bench_port_errors PORT... dies on an Interface error
#   bench_pmd_nice N          renices the current run's PMD threads
#   run_down                  stops the current run's daemons and netns
#   vsctl, appctl, ofctl      on the current run's daemons
#   wait_for SECONDS CMD...   polls CMD every 0.1 s
#   pmd_exists, pmd_receiving, tpm_pmd_ready
#   cpu_snapshot PID, cpu_load SNAP0 SNAP1 (steal % on CPU 1, other load)
#
# Every daemon is started with its files under WORK (so "pgrep -f
# tpm-bench" sees it) and is stopped only if its command line names its
# run directory: nothing not started here is ever signalled.

: "${BENCH_NAME:=bench}"
: "${keep:=false}" "${wait_quiet:=true}" "${mem:=auto}"
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD_DIR:-$top/build}
PY=${PYTHON3:-python3}
helper=$top/tpm/bench/bench-ovs.py

# State for the cleanup.
WORK=
NS=
RUN_DIR=
RUN_BIN=
CTL=
VSWITCHD_PID=
HP_OLD=
HP_MOUNTED=false
PERF_PID=
OUR_PIDS=" "

log() {
    printf '[%s %s] %s\n' "$BENCH_NAME" "$(date +%H:%M:%S)" "$*" >&2
}
die() {
    log "error: $*"
    exit 1
}

bench_check_root() {
    [ "$(id -u)" = 0 ] \
        || die "needs root (DPDK, huge pages, network namespaces)"
    command -v ip >/dev/null || die "ip not found (package iproute2)"
}

# bench_check_builds DIR TREE...: the programs the runs need are built.
bench_check_builds() {
    local dir=$1 tree f
    shift
    for tree in "$@"; do
        for f in vswitchd/ovs-vswitchd ovsdb/ovsdb-server ovsdb/ovsdb-tool \
                 utilities/ovs-vsctl utilities/ovs-appctl \
                 utilities/ovs-ofctl; do
            [ -x "$dir/$tree/$f" ] \
                || die "$dir/$tree/$f not built (make -C $dir $tree)"
        done
    done
}

# ours PID: the PID's command line names the current run directory.
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
# stop_daemon NAME COMMAND...: stops daemon NAME of the current run
# (pidfile RUN_DIR/NAME.pid) through its control socket (COMMAND), then
# SIGTERM, then SIGKILL, only while the PID's command line names our
# directory.
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

bench_cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM
    if declare -F bench_on_exit >/dev/null; then
        bench_on_exit
    fi
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
bench_trap() {
    trap bench_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

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

# bench_mkwork PREFIX: the work directory, /tmp/PREFIX.XXXXXX.
bench_mkwork() {
    WORK=$(mktemp -d "/tmp/$1.XXXXXX")
    chmod 755 "$WORK"
}

# bench_copy_bins DIR TREE...: a copy of the builds' programs (linked
# statically against OVS's own libraries), so that a rebuild during the
# runs cannot mix binaries.
bench_copy_bins() {
    local dir=$1 tree f
    shift
    for tree in "$@"; do
        for f in vswitchd/ovs-vswitchd vswitchd/vswitch.ovsschema \
                 ovsdb/ovsdb-server ovsdb/ovsdb-tool utilities/ovs-vsctl \
                 utilities/ovs-appctl utilities/ovs-ofctl; do
            mkdir -p "$WORK/bin/$tree/${f%/*}"
            cp -p "$dir/$tree/$f" "$WORK/bin/$tree/$f"
        done
    done
}

# bench_hugepages: DPDK memory.  mem=auto or huge: 2 MB huge pages if 300
# are free, raising vm.nr_hugepages to 1024 and mounting hugetlbfs on
# /dev/hugepages if needed (both undone on exit); else mem=nohuge (auto)
# or die (huge).
hp_free() { awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo; }
bench_hugepages() {
    local size total
    if [ "$mem" = auto ] || [ "$mem" = huge ]; then
        size=$(awk '/^Hugepagesize:/ { print $2 }' /proc/meminfo)
        if [ "${size:-0}" = 2048 ]; then
            total=$(cat /proc/sys/vm/nr_hugepages)
            if [ "$(hp_free)" -lt 1024 ] && [ "$total" -lt 1024 ]; then
                HP_OLD=$total
                echo 1024 >/proc/sys/vm/nr_hugepages || true
            fi
            if ! grep -q '^[^ ]* /dev/hugepages hugetlbfs' /proc/mounts
            then
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
}

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
# cpu_load SNAP0 SNAP1: "steal other": steal on CPU 1 (% of its time) and
# what ran besides ovs-vswitchd (% of one CPU; the PMD itself keeps one CPU
# busy).
cpu_load() {
    echo "$1 $2" | awk -v ncpu="$(nproc)" '{
        st = ($9 - $4) > 0 ? 100 * ($8 - $3) / ($9 - $4) : 0;
        d = $7 - $2; o = ($6 - $1) - ($10 - $5);
        ot = d > 0 ? ncpu * 100 * o / d : 0;
        printf "%.2f %.1f\n", st, ot }'
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

vsctl() { "$RUN_BIN/utilities/ovs-vsctl" --db="unix:$RUN_DIR/db.sock" \
              --timeout=60 "$@"; }
appctl() { "$RUN_BIN/utilities/ovs-appctl" --timeout=60 -t "$CTL" "$@"; }
ofctl() { "$RUN_BIN/utilities/ovs-ofctl" "$@"; }

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

# bench_prepare OUT TAG TREE [KEY=VALUE...]: what bench_start does
# before it starts ovs-vswitchd: a fresh ovsdb-server of WORK/bin/TREE
# with its files in OUT, the database's DPDK and PMD settings, and the
# network namespace TAG with its loopback up.
bench_prepare() {
    local out=$1 tag=$2 tree=$3 dpdk kv
    shift 3
    RUN_BIN=$WORK/bin/$tree
    RUN_DIR=$out
    NS=$tag
    export OVS_RUNDIR=$out OVS_DBDIR=$out OVS_LOGDIR=$out \
           OVS_SYSCONFDIR=$out

    "$RUN_BIN/ovsdb/ovsdb-tool" create "$out/conf.db" \
        "$RUN_BIN/vswitchd/vswitch.ovsschema"
    "$RUN_BIN/ovsdb/ovsdb-server" -vconsole:off \
        --remote="punix:$out/db.sock" --pidfile="$out/ovsdb-server.pid" \
        --detach --no-chdir --log-file="$out/ovsdb.log" "$out/conf.db"
    vsctl --no-wait init
    if [ "$mem" = huge ]; then
        dpdk=("other_config:dpdk-extra=--no-pci --file-prefix=$tag"
              other_config:dpdk-socket-mem=512)
    else
        dpdk=("other_config:dpdk-extra=--no-pci --no-huge -m 1024 --legacy-mem --no-shconf --file-prefix=$tag")
    fi
    for kv in "$@"; do
        dpdk+=("other_config:$kv")
    done
    vsctl --no-wait set Open_vSwitch . other_config:dpdk-init=true \
        other_config:pmd-cpu-mask=0x2 other_config:pmd-perf-metrics=true \
        "${dpdk[@]}"

    ip netns add "$NS"
    ip -n "$NS" link set lo up
}

# bench_start OUT TAG TREE [KEY=VALUE...]: fresh ovsdb-server and
# ovs-vswitchd of WORK/bin/TREE with their files in OUT, ovs-vswitchd in
# the new network namespace TAG (its taps live there), DPDK
# --file-prefix=TAG, one PMD on core 1 with perf metrics, and the
# other_config settings KEY=VALUE.
bench_start() {
    local out=$1
    bench_prepare "$@"
    ip netns exec "$NS" "$RUN_BIN/vswitchd/ovs-vswitchd" -vconsole:off \
        "unix:$out/db.sock" --pidfile="$out/ovs-vswitchd.pid" --detach \
        --no-chdir --log-file="$out/vswitchd.log"
    VSWITCHD_PID=$(cat "$out/ovs-vswitchd.pid")
    CTL=$out/ovs-vswitchd.$VSWITCHD_PID.ctl
    OUR_PIDS+="$VSWITCHD_PID "
}

# pmd_tids: the thread ids of the current ovs-vswitchd's PMD threads.
pmd_tids() {
    local t
    for t in /proc/"$VSWITCHD_PID"/task/*; do
        case $(cat "$t/comm" 2>/dev/null) in
        pmd*) echo "${t##*/}" ;;
        esac
    done
}
# bench_pmd_nice N: gives the current run's PMD threads nice value N (the
# PMD owns its core as in a deployment with isolated cores: another process
# that lands on core 1 takes little from it).  Only our threads.
bench_pmd_nice() {
    local t
    for t in $(pmd_tids); do
        renice -n "$1" -p "$t" >/dev/null \
            || log "warning: cannot renice PMD thread $t"
    done
}

# bench_add_output BR RULE: a netdev bridge BR (fail_mode=secure) with the
# output port p2 (net_null0, discards) and the single OpenFlow rule RULE;
# waits until the PMD on core 1 exists.
bench_add_output() {
    local br=$1 rule=$2
    vsctl add-br "$br" -- set bridge "$br" datapath_type=netdev \
            fail_mode=secure \
        -- add-port "$br" p2 -- set Interface p2 type=dpdk \
           "options:dpdk-devargs=net_null0,no-rx=1" ofport_request=2
    ofctl del-flows "$br"
    ofctl add-flow "$br" "$rule"
    wait_for 60 pmd_exists \
        || die "${RUN_LABEL:+$RUN_LABEL: }no PMD on core 1 after 60 s"
}

# bench_port_errors PORT...: dies if an Interface reports an error.
bench_port_errors() {
    local p err
    for p in "$@"; do
        err=$(vsctl get Interface "$p" error)
        case $err in
        '[]'|'') ;;
        *) die "${RUN_LABEL:+$RUN_LABEL: }port $p: $err" ;;
        esac
    done
}
