# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Test bed for the OVS integration tests: the patched ovs-vswitchd with DPDK
# and the Trumpet packet monitor, two hosts, one switch.  Sourced by
# tests/ovs-integration.sh (bash, set -euo pipefail).
#
#   netns $TB_NS1                netns $TB_NSSW                netns $TB_NS2
#   $TB_IF1 10.99.0.1/24 ==veth== $TB_HIF1  [ovs-vswitchd]  $TB_HIF2 ==veth== $TB_IF2 10.99.0.2/24
#                                  bridge $TB_BR (netdev datapath, DPDK
#                                  net_af_packet ports, one PMD on core 1;
#                                  tb_two_pmds: PMDs on cores 0 and 1)
#
# ovs-vswitchd runs in a network namespace of its own: its bridge tap and
# the datapath's "ovs-netdev" tap (a fixed name) live there, so parallel
# runs cannot clash and deleting the namespace removes every device.  The
# daemons use a private directory (OVS_RUNDIR, OVS_DBDIR, OVS_LOGDIR,
# OVS_SYSCONFDIR) and a unique DPDK --file-prefix; every name carries
# "tpmt" and the PID of the test.  Only 10.99.0.0/24 inside these
# namespaces carries traffic.
#
# Usage:
#   . "$top_srcdir/tests/testbed.sh"
#   tb_init             # checks (exit 77 to skip), names, cleanup trap
#   tb_up               # daemons, namespaces, bridge, ports; ping works
#   tb_two_pmds         # optional: p1 polled by a PMD on core 0, p2 on 1
#   ...                 # tb_appctl, tb_ns1, tb_bg, tb_wait_for, tb_fail...
#   (teardown runs on exit, whatever the exit status)
#
# Environment: top_builddir (the build tree holding ovs/), top_srcdir,
# PYTHON3; TB_KEEP=1 keeps the work directory; TB_DPDK_MEM=huge|nohuge
# forces the DPDK memory mode (default: huge pages if 300 are free).

TB_EPOCH_NS=10000000            # other_config:tpm-epoch=10ms, set by tb_up.
TB_IP1=10.99.0.1
TB_IP2=10.99.0.2
TB_MAC1=02:99:00:00:00:01
TB_MAC2=02:99:00:00:00:02

# More other_config settings for tb_up, set before the switch starts (the
# monitor's shape, e.g. tpm-history, applies to PMDs created after it).
TB_OTHER_CONFIG=()

# Background processes started by the test (PIDs), stopped at teardown.
TB_BG_PIDS=()
# Namespaces made by tb_netns, deleted at teardown.
TB_EXTRA_NS=()
TB_UP=false
TB_DIR=

tb_log() {
    printf '%s\n' "$*"
}

# tb_skip MESSAGE: skip the test (automake exit status 77).
tb_skip() {
    tb_log "SKIP: $*"
    exit 77
}

# tb_fail MESSAGE...: prints the failure and diagnostics, exits 1 (the
# EXIT trap tears the test bed down).
tb_fail() {
    tb_log "FAIL: $*"
    if $TB_UP; then
        tb_log "--- tpm/stats:"
        tb_appctl tpm/stats 2>&1 | sed 's/^/    /' || true
        tb_log "--- tpm/event-list:"
        tb_appctl tpm/event-list 2>&1 | sed 's/^/    /' || true
    fi
    if [ -n "$TB_DIR" ] && [ -f "$TB_DIR/vswitchd.log" ]; then
        tb_log "--- last lines of $TB_DIR/vswitchd.log:"
        tail -n 25 "$TB_DIR/vswitchd.log" | sed 's/^/    /'
    fi
    # Again, last: a CI log often shows only its tail.
    tb_log "FAIL (repeated): $*"
    exit 1
}

# tb_init: checks the prerequisites (skips if not root or the binaries or
# tools are missing), sets the names and installs the teardown trap.
tb_init() {
    : "${top_builddir:=.}"
    OVS_BIN_VSWITCHD=$top_builddir/ovs/vswitchd/ovs-vswitchd
    OVS_BIN_SCHEMA=$top_builddir/ovs/vswitchd/vswitch.ovsschema
    OVS_BIN_TOOL=$top_builddir/ovs/ovsdb/ovsdb-tool
    OVS_BIN_SERVER=$top_builddir/ovs/ovsdb/ovsdb-server
    OVS_BIN_VSCTL=$top_builddir/ovs/utilities/ovs-vsctl
    OVS_BIN_APPCTL=$top_builddir/ovs/utilities/ovs-appctl

    if [ "$(id -u)" != 0 ]; then
        tb_skip "needs root (network namespaces, DPDK)"
    fi
    local f
    for f in "$OVS_BIN_VSWITCHD" "$OVS_BIN_TOOL" "$OVS_BIN_SERVER" \
             "$OVS_BIN_VSCTL" "$OVS_BIN_APPCTL"; do
        [ -x "$f" ] || tb_skip "$f not built (make ovs)"
    done
    [ -f "$OVS_BIN_SCHEMA" ] || tb_skip "$OVS_BIN_SCHEMA missing"
    for f in ip ethtool ping tcpdump "${PYTHON3:-python3}"; do
        command -v "$f" >/dev/null 2>&1 \
            || tb_skip "$f not found (packages iproute2, ethtool," \
                       "iputils-ping, tcpdump, python3)"
    done
    # The interpreter itself, not a wrapper, so that the PID of a
    # background "ip netns exec ... python3" is the script's.
    TB_PY=$("${PYTHON3:-python3}" -c 'import sys; print(sys.executable)')

    TB_TAG=tpmt$$
    # Root without the right to make namespaces (an unprivileged
    # container): nothing to test here.
    if ! ip netns add "${TB_TAG}probe" 2>/dev/null; then
        tb_skip "cannot create network namespaces (privileges?)"
    fi
    ip netns del "${TB_TAG}probe"
    TB_NS1=${TB_TAG}ns1
    TB_NS2=${TB_TAG}ns2
    TB_NSSW=${TB_TAG}sw
    TB_IF1=${TB_TAG}n1          # Interface names: at most 15 characters.
    TB_IF2=${TB_TAG}n2
    TB_HIF1=${TB_TAG}h1
    TB_HIF2=${TB_TAG}h2
    TB_BR=${TB_TAG}br

    TB_DIR=$(mktemp -d "${TMPDIR:-/tmp}/$TB_TAG.XXXXXX")
    export OVS_RUNDIR=$TB_DIR OVS_DBDIR=$TB_DIR OVS_LOGDIR=$TB_DIR \
           OVS_SYSCONFDIR=$TB_DIR
    TB_DB=unix:$TB_DIR/db.sock

    trap tb_down EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    # A command that fails unexpectedly (set -e) fails the test with a
    # message, and exit status 1 whatever its own (77 would mean "skip").
    set -E
    trap 'tb_err_trap $? "$BASH_COMMAND" "$LINENO"' ERR
}

# tb_err_trap STATUS COMMAND LINE: the ERR trap.  Only the main shell
# acts: a failure inside $(...) comes back to it as the substitution's
# status.
tb_err_trap() {
    if [ "$BASHPID" = "$$" ]; then
        trap - ERR
        tb_fail "unexpected exit status $1 of '$2'" \
                "(${BASH_SOURCE[1]##*/}:$3, in ${FUNCNAME[1]:-main})"
    fi
}

# tb_pid_alive PID: true if process PID exists.
tb_pid_alive() {
    kill -0 "$1" 2>/dev/null
}

# tb_wait_pid_gone PID TENTHS: waits up to TENTHS tenths of a second for
# PID to end.  Returns 1 if it did not.
tb_wait_pid_gone() {
    local i
    for ((i = 0; i < $2; i++)); do
        tb_pid_alive "$1" || return 0
        sleep 0.1
    done
    ! tb_pid_alive "$1"
}

# tb_ours PID: true if process PID is one of our daemons (its command
# line names our private directory), not a process that reused the PID.
tb_ours() {
    local cmdline
    cmdline=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) \
        && [[ $cmdline == *"$TB_DIR/"* ]]
}

# tb_stop_daemon NAME CTL_COMMAND...: asks daemon NAME (pidfile
# $TB_DIR/NAME.pid) to exit through its control socket, then SIGTERM and
# SIGKILL to that PID if it does not.
tb_stop_daemon() {
    local name=$1 pid
    shift
    pid=$(cat "$TB_DIR/$name.pid" 2>/dev/null) || return 0
    if [ -z "$pid" ] || ! tb_ours "$pid"; then
        return 0
    fi
    "$OVS_BIN_APPCTL" --timeout=10 -t "$TB_DIR/$name.$pid.ctl" "$@" \
        >/dev/null 2>&1 || true
    tb_wait_pid_gone "$pid" 100 && return 0
    tb_log "warning: $name (pid $pid) did not exit; sending SIGTERM"
    tb_ours "$pid" && kill "$pid" 2>/dev/null
    tb_wait_pid_gone "$pid" 30 && return 0
    tb_ours "$pid" && kill -9 "$pid" 2>/dev/null
    tb_wait_pid_gone "$pid" 30 || true
}

# tb_down: tears everything down (EXIT trap); safe to call more than once
# and after a partial tb_up.  Keeps the exit status.
tb_down() {
    local rc=$? pid
    set +eE
    trap - EXIT INT TERM ERR
    for pid in "${TB_BG_PIDS[@]}"; do
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    done
    TB_BG_PIDS=()
    if [ -n "$TB_DIR" ]; then
        # --cleanup: the datapath and its ports go away with the daemon.
        tb_stop_daemon ovs-vswitchd exit --cleanup
        tb_stop_daemon ovsdb-server exit
    fi
    # DPDK's runtime directory of the switch's --file-prefix (empty with
    # --no-shconf, but made all the same).
    if [ -n "${TB_TAG:-}" ]; then
        rm -rf "/var/run/dpdk/$TB_TAG"
    fi
    TB_UP=false
    # tb_netns's namespaces first (one may be $TB_NS1 or $TB_NS2, so the
    # list is read again before each).
    local ns all
    for ns in "${TB_EXTRA_NS[@]}" "${TB_NS1:-}" "${TB_NS2:-}" \
              "${TB_NSSW:-}"; do
        all=$(ip netns list 2>/dev/null)
        if [ -n "$ns" ] && grep -qw "^$ns" <<<"$all"; then
            ip netns del "$ns" || tb_log "warning: cannot delete netns $ns"
        fi
    done
    TB_EXTRA_NS=()
    if [ -n "$TB_DIR" ] && [ -d "$TB_DIR" ]; then
        if [ "${TB_KEEP:-0}" = 1 ]; then
            tb_log "kept $TB_DIR"
        else
            rm -rf "$TB_DIR"
        fi
    fi
    exit "$rc"
}

# tb_bg OUTFILE COMMAND...: runs COMMAND in the background with stdout in
# OUTFILE and stderr in OUTFILE.err; records its PID (in TB_BG_PID and
# for teardown).
tb_bg() {
    local out=$1
    shift
    "$@" >"$out" 2>"$out.err" &
    TB_BG_PID=$!
    TB_BG_PIDS+=("$TB_BG_PID")
}

# tb_bg_stop PID [SIGNAL]: stops background process PID (started by
# tb_bg) and waits for it.  Returns its exit status.
tb_bg_stop() {
    local pid=$1 sig=${2:-TERM} rc=0
    kill -"$sig" "$pid" 2>/dev/null || true
    wait "$pid" || rc=$?
    tb_bg_forget "$pid"
    return "$rc"
}

# tcpdump's ring for captures that are checked for completeness (with
# tb_tcpdump_stop()): with --immediate-mode libpcap uses TPACKET_V2, one
# ring slot per frame sized for the snapshot length, so tcpdump's default
# 262144 bytes leaves a 16 MB ring some 64 slots and a tcpdump starved of
# CPU drops frames after as many.  The checks read headers only (the
# frame's length is the record's wire length): 256 bytes hold Ethernet,
# IPv4 and TCP with options, or a VXLAN header and the inner ones.
TB_TCPDUMP_RING=(-s 256 -B 16384)

# tb_tcpdump_stop PID PCAP ERR: stops tcpdump PID (started by tb_bg with
# -U, writing PCAP, its stderr in ERR) once PCAP has stopped growing (a
# tcpdump starved of CPU still has frames in the kernel's buffer, which
# SIGINT would leave unwritten and uncounted as drops: at most 10 s),
# then requires that it wrote every frame its filter received and the
# kernel dropped none.
tb_tcpdump_stop() {
    local pid=$1 pcap=$2 err=$3 size last=-1 i captured received dropped
    for ((i = 0; i < 33; i++)); do
        sleep 0.3
        size=$(stat -c %s "$pcap" 2>/dev/null || echo 0)
        [ "$size" = "$last" ] && break
        last=$size
    done
    tb_bg_stop "$pid" INT || tb_fail "tcpdump failed: $(cat "$err")"
    captured=$(sed -n 's/^\([0-9]*\) packets\{0,1\} captured$/\1/p' "$err")
    received=$(sed -n \
               's/^\([0-9]*\) packets\{0,1\} received by filter$/\1/p' "$err")
    dropped=$(sed -n 's/^\([0-9]*\) packets\{0,1\} dropped by kernel$/\1/p' \
              "$err")
    [ -n "$captured" ] && [ "$captured" = "$received" ] \
        && [ "$dropped" = 0 ] \
        || tb_fail "tcpdump did not capture everything ($pcap):" \
                   "$(cat "$err")"
}

# tb_flow_server NS ADDR PORT [ARGS...]: a tests/tcp-flow.py server on
# ADDR:PORT in namespace NS, on the helpers' CPU; returns when it listens
# (its PID in SERVER_PID).
tb_flow_server() {
    local ns=$1 addr=$2 port=$3 out=$TB_DIR/server-$3
    shift 3
    tb_bg "$out" taskset -c "${TB_HELPER_CPU:-0}" ip netns exec "$ns" \
        "$TB_PY" "$top_srcdir/tests/tcp-flow.py" server --addr "$addr" \
        --port "$port" "$@"
    SERVER_PID=$TB_BG_PID
    tb_wait_for 10 grep -qs listening "$out.err" \
        || tb_fail "tcp-flow.py server on port $port: $(cat "$out.err")"
}

# tb_bg_forget PID: PID (waited for) is no longer ours to stop.
tb_bg_forget() {
    local p kept=()
    for p in "${TB_BG_PIDS[@]}"; do
        [ "$p" = "$1" ] || kept+=("$p")
    done
    TB_BG_PIDS=("${kept[@]}")
}

# tb_bg_wait PID: waits for background process PID to end by itself.
# Returns its exit status.
tb_bg_wait() {
    local rc=0
    wait "$1" || rc=$?
    tb_bg_forget "$1"
    return "$rc"
}

# tb_wait_for SECONDS COMMAND...: runs COMMAND every 50 ms until it
# succeeds.  Returns 1 if it did not within SECONDS.
tb_wait_for() {
    local deadline=$((SECONDS + $1))
    shift
    while ! "$@"; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.05
    done
}

tb_vsctl() {
    "$OVS_BIN_VSCTL" --db="$TB_DB" --timeout=30 "$@"
}

# tb_appctl ARGS...: ovs-appctl to ovs-vswitchd.
tb_appctl() {
    "$OVS_BIN_APPCTL" --timeout=30 -t "$TB_CTL" "$@"
}

tb_ns1() {
    ip netns exec "$TB_NS1" "$@"
}

tb_ns2() {
    ip netns exec "$TB_NS2" "$@"
}

# tb_now_ns: wall-clock (CLOCK_REALTIME) nanoseconds, the monitor's clock.
tb_now_ns() {
    date +%s%N
}

# tb_epoch NS: the monitor's epoch number of time NS.
tb_epoch() {
    echo $(($1 / TB_EPOCH_NS))
}

# tb_json FILE EXPR: evaluates Python expression EXPR over the JSON object
# in FILE (as "d") and prints it.
tb_json() {
    "$TB_PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(eval(sys.argv[2]))' "$1" "$2"
}

# tb_dpdk_memory: sets TB_DPDK_CONFIG to the other_config settings for
# DPDK's memory: huge pages when at least 300 are free (512 MB are used),
# else plain memory (--no-huge needs --legacy-mem, or OVS adds
# --in-memory, which conflicts).
tb_dpdk_memory() {
    local mode=${TB_DPDK_MEM:-auto} free size
    if [ "$mode" = auto ]; then
        free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)
        size=$(awk '/^Hugepagesize:/ { print $2 }' /proc/meminfo)
        mode=nohuge
        if grep -q hugetlbfs /proc/mounts && [ "${free:-0}" -ge 300 ] \
           && [ "${size:-0}" = 2048 ]; then
            mode=huge
        fi
    fi
    if [ "$mode" = huge ]; then
        TB_DPDK_CONFIG=(
            "other_config:dpdk-extra=--no-pci --file-prefix=$TB_TAG"
            other_config:dpdk-socket-mem=512)
    else
        TB_DPDK_CONFIG=("other_config:dpdk-extra=--no-pci --no-huge -m 1024 --legacy-mem --no-shconf --file-prefix=$TB_TAG")
    fi
    # shellcheck disable=SC2034  # Used by the test scripts.
    TB_DPDK_MODE=$mode
}

# tb_netns_setup NS IF HIF MAC IP PEER_IP PEER_MAC: creates namespace NS
# with veth IF (address IP/24, MAC) whose peer HIF is in the switch
# namespace; offloads off (else TCP and UDP checksums are left to a NIC
# that does not exist), no IPv6 (no stray traffic), a permanent neighbour
# entry for the peer (no ARP during the tests).
tb_netns_setup() {
    local ns=$1 if=$2 hif=$3 mac=$4 addr=$5 peer=$6 peer_mac=$7
    ip netns add "$ns"
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
        net.ipv6.conf.default.disable_ipv6=1
    ip link add "$if" netns "$ns" address "$mac" type veth \
        peer name "$hif" netns "$TB_NSSW"
    ip netns exec "$ns" ethtool -K "$if" tx off tso off gso off >/dev/null
    ip -n "$ns" addr add "$addr/24" dev "$if"
    ip -n "$ns" link set "$if" up
    ip -n "$ns" link set lo up
    ip -n "$ns" neigh replace "$peer" lladdr "$peer_mac" dev "$if" \
        nud permanent
    ip -n "$TB_NSSW" link set "$hif" up
}

tb_ping_once() {
    tb_ns1 ping -c 1 -W 1 -q "$TB_IP2" >/dev/null 2>&1
}

tb_pmd_ready() {
    tb_appctl tpm/stats 2>/dev/null | grep -q '^pmd core'
}

# tb_up: starts ovsdb-server and ovs-vswitchd (DPDK), builds the
# namespaces and the bridge; returns when a ping goes through and the
# monitor of the PMD thread is registered.
tb_up() {
    tb_switch_db__
    tb_netns_setup "$TB_NS1" "$TB_IF1" "$TB_HIF1" "$TB_MAC1" "$TB_IP1" \
        "$TB_IP2" "$TB_MAC2"
    tb_netns_setup "$TB_NS2" "$TB_IF2" "$TB_HIF2" "$TB_MAC2" "$TB_IP2" \
        "$TB_IP1" "$TB_MAC1"
    tb_switch_vswitchd__

    tb_vsctl add-br "$TB_BR" -- set bridge "$TB_BR" datapath_type=netdev \
        -- add-port "$TB_BR" p1 -- set Interface p1 type=dpdk \
           "options:dpdk-devargs=net_af_packet0,iface=$TB_HIF1" \
        -- add-port "$TB_BR" p2 -- set Interface p2 type=dpdk \
           "options:dpdk-devargs=net_af_packet1,iface=$TB_HIF2"
    tb_port_ok p1 p2
    tb_wait_for 30 tb_pmd_ready \
        || tb_fail "no PMD thread with a monitor in tpm/stats after 30 s"
    tb_wait_for 30 tb_ping_once \
        || tb_fail "no ping from $TB_IP1 to $TB_IP2 within 30 s"
}

# tb_event_add NAME DEFINITION-WORDS...: adds an event; fails the test if
# ovs-appctl does.
tb_event_add() {
    local out
    out=$(tb_appctl tpm/event-add "$@" 2>&1) \
        || tb_fail "tpm/event-add $*: $out"
}

tb_event_del() {
    local out
    out=$(tb_appctl tpm/event-del "$1" 2>&1) \
        || tb_fail "tpm/event-del $1: $out"
}

# tb_check_sweeps LABEL: every PMD's monitor finished every sweep
# ("unfinished 0" in tpm/stats).
tb_check_sweeps() {
    local stats n_pmd bad
    stats=$(tb_appctl tpm/stats) || tb_fail "$1: tpm/stats failed"
    n_pmd=$(grep -c '^pmd core' <<<"$stats" || true)
    [ "$n_pmd" -ge 1 ] || tb_fail "$1: tpm/stats lists no PMD: $stats"
    bad=$(grep 'sweeps:' <<<"$stats" | grep -v 'unfinished 0,' || true)
    [ -z "$bad" ] \
        || tb_fail "$1: sweeps left unfinished (tpm/stats):" "$bad"
}

# tb_rxq_layout: one line "CORE PORT" per rx queue in
# dpif-netdev/pmd-rxq-show, sorted.
tb_rxq_layout() {
    tb_appctl dpif-netdev/pmd-rxq-show \
        | awk '/core_id/ { c = $NF; sub(":", "", c) }
               /port:/ { print c, $2 }' | sort
}

# tb_pmd_cores: the cores of the PMDs in tpm/stats, sorted, one line.
tb_pmd_cores() {
    tb_appctl tpm/stats | sed -n 's/^pmd core \([0-9]*\):$/\1/p' \
        | sort -n | tr '\n' ' '
}

tb_two_pmds_ready() {
    [ "$(tb_pmd_cores 2>/dev/null)" = "0 1 " ] \
        && [ "$(tb_rxq_layout 2>/dev/null | tr '\n' ' ')" = "0 p1 1 p2 " ]
}

# tb_two_pmds: two PMD threads (pmd-cpu-mask=0x3: cores 0 and 1) instead
# of one, p1's rx queue pinned to the PMD on core 0 and p2's to the one on
# core 1 (pmd-rxq-affinity), so that each direction between the
# namespaces enters through a different PMD.  Returns when
# dpif-netdev/pmd-rxq-show shows that layout, tpm/stats lists both
# monitors and a ping goes through.  Both PMDs busy-poll: on a 2-CPU
# machine they take every CPU, so keep what follows short.
tb_two_pmds() {
    tb_vsctl set Open_vSwitch . other_config:pmd-cpu-mask=0x3 \
        -- set Interface p1 other_config:pmd-rxq-affinity=0:0 \
        -- set Interface p2 other_config:pmd-rxq-affinity=0:1
    tb_wait_for 30 tb_two_pmds_ready \
        || tb_fail "two PMDs: after 30 s, PMDs with a monitor (tpm/stats):" \
                   "$(tb_pmd_cores 2>&1); pmd-rxq-show:" \
                   "$(tb_appctl dpif-netdev/pmd-rxq-show 2>&1)"
    tb_wait_for 30 tb_ping_once \
        || tb_fail "two PMDs: no ping from $TB_IP1 to $TB_IP2 within 30 s"
}

# --- Test beds of another shape ------------------------------------------
# A test that builds its own topology (tests/ovs-overlay.sh) calls, after
# tb_init, tb_switch_up instead of tb_up (the daemons in $TB_NSSW, no
# bridge, no namespaces 1 and 2) and makes its further namespaces with
# tb_netns; tb_down, the EXIT trap, removes those namespaces too:
#   tb_init; tb_switch_up; tb_netns ...

# tb_netns NAME: creates namespace NAME with its loopback up; tb_down
# deletes it.
tb_netns() {
    ip netns add "$1"
    TB_EXTRA_NS+=("$1")
    ip -n "$1" link set lo up
}

# tb_switch_db__: the first half of tb_up and tb_switch_up: starts
# ovsdb-server, configures the switch (DPDK, one PMD on core 1, the
# monitor's epoch and report log, $TB_OTHER_CONFIG) and creates namespace
# $TB_NSSW (loopback up, no IPv6 on its devices unless the caller enables
# it on one: net.ipv6.conf.DEV.disable_ipv6=0).
tb_switch_db__() {
    local d=$TB_DIR
    "$OVS_BIN_TOOL" create "$d/conf.db" "$OVS_BIN_SCHEMA"
    "$OVS_BIN_SERVER" -vconsole:off --remote="punix:$d/db.sock" \
        --pidfile="$d/ovsdb-server.pid" --detach --no-chdir \
        --log-file="$d/ovsdb.log" "$d/conf.db"
    tb_vsctl --no-wait init
    tb_dpdk_memory
    # tpm-report-log: room for every report of the run (scenario 3 of
    # ovs-integration.sh alone makes about 100); the knob is read before
    # any event exists.
    tb_vsctl --no-wait set Open_vSwitch . other_config:dpdk-init=true \
        "${TB_DPDK_CONFIG[@]}" other_config:pmd-cpu-mask=0x2 \
        other_config:tpm-epoch=10ms other_config:tpm-report-log=100000 \
        "${TB_OTHER_CONFIG[@]}"

    ip netns add "$TB_NSSW"
    ip -n "$TB_NSSW" link set lo up
    ip netns exec "$TB_NSSW" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
        net.ipv6.conf.default.disable_ipv6=1
}

# tb_switch_vswitchd__: the second half of tb_up and tb_switch_up: starts
# ovs-vswitchd in $TB_NSSW; from then on tb_fail shows the monitor's
# state.
tb_switch_vswitchd__() {
    local d=$TB_DIR
    ip netns exec "$TB_NSSW" "$OVS_BIN_VSWITCHD" -vconsole:off "$TB_DB" \
        --pidfile="$d/ovs-vswitchd.pid" --detach --no-chdir \
        --log-file="$d/vswitchd.log"
    TB_CTL=$d/ovs-vswitchd.$(cat "$d/ovs-vswitchd.pid").ctl
    TB_UP=true
}

# tb_switch_up: starts ovsdb-server and ovs-vswitchd (DPDK, settings as
# tb_up's) in a new namespace $TB_NSSW whose devices get no IPv6 unless
# the caller enables it on one (net.ipv6.conf.DEV.disable_ipv6=0); no
# bridge.  Returns when ovs-vswitchd answers.
tb_switch_up() {
    tb_switch_db__
    tb_switch_vswitchd__
    tb_wait_for 30 tb_appctl version >/dev/null \
        || tb_fail "ovs-vswitchd does not answer"
}

# tb_port_ok PORT...: fails the test if an Interface has an error.
tb_port_ok() {
    local p err
    for p in "$@"; do
        err=$(tb_vsctl get Interface "$p" error) \
            || tb_fail "ovs-vsctl get Interface $p error failed"
        case $err in
        '[]'|'') ;;
        *) tb_fail "port $p: $err" ;;
        esac
    done
}

# tb_ofctl ARGS...: ovs-ofctl to a bridge of the switch (its management
# socket in OVS_RUNDIR).
tb_ofctl() {
    "$top_builddir/ovs/utilities/ovs-ofctl" "$@"
}
