# SPDX-License-Identifier: Apache-2.0
# Sourced by the bash TEM tests with tpm-replay hosts: their common start,
# tem-ctl helpers (ctl, status, wait_for), and tem_keys
# (tests/tem-keys.sh).

# shellcheck source=tests/tem-keys.sh
. "$top_srcdir/tests/tem-keys.sh"

# tem_test_init NAME [no-zmq] (bash): the tests' programs (TEM, CTL,
# REPLAY, PY), skips (77) without python3-zmq (unless no-zmq: a test whose
# Python never speaks to the TEM), makes the work directory $tmp, and at
# exit kills the processes of $pids and $tem_pid, shows the end of
# $tmp/tem.log on failure and removes $tmp (kept with KEEP_TMP=1).  fail
# MESSAGE: FAIL, exit 1.
tem_test_init() {
    top_builddir=${top_builddir:-$top_srcdir/build}
    PY=${PYTHON3:-python3}
    TEM=$top_builddir/tem/trumpet-tem
    CTL=$top_builddir/tem/tem-ctl
    REPLAY=$top_builddir/tpm/tpm-replay
    [ "${2:-}" = no-zmq ] || "$PY" -c 'import zmq' 2>/dev/null \
        || { echo "SKIP: python3-zmq not available to $PY"; exit 77; }
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
    pids=()
    tem_pid=
    trap tem_test_cleanup EXIT
}

tem_test_cleanup() {
    local rc=$? p
    for p in "${pids[@]}" $tem_pid; do
        kill "$p" 2>/dev/null || true
    done
    for p in "${pids[@]}" $tem_pid; do
        wait "$p" 2>/dev/null || true
    done
    if [ $rc != 0 ] && [ -f "$tmp/tem.log" ]; then
        echo "--- TEM log:"
        tail -n 40 "$tmp/tem.log"
    fi
    # Once more after the logs: a CI report shows the end of the output.
    [ -z "${fail_msg:-}" ] || echo "FAIL (above the logs): $fail_msg"
    [ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"
    exit $rc
}

fail() {
    fail_msg="$*"
    echo "FAIL: $*"
    exit 1
}

# tem_start ARGS...: starts "$TEM ARGS..." as $tem_pid, its log in
# $tmp/tem.log, with the control socket ipc://$tmp/ctl; returns once it
# answers tem-ctl.  tem_stop: SIGTERM, and it must exit 0.
tem_start() {
    "$TEM" "$@" --ctl="ipc://$tmp/ctl" 2>>"$tmp/tem.log" &
    tem_pid=$!
    local i
    for ((i = 0; i < 100; i++)); do
        "$CTL" --ctl="ipc://$tmp/ctl" --timeout=100ms status >/dev/null \
            2>&1 && return 0
        kill -0 "$tem_pid" 2>/dev/null || fail "the TEM exited at start"
    done
    fail "the TEM does not answer tem-ctl"
}

tem_stop() {
    kill "$tem_pid"
    wait "$tem_pid" || fail "the TEM exited with status $? on SIGTERM"
    tem_pid=
}

# ctl ARGS...: tem-ctl on the control socket of tem_start.
ctl() {
    "$CTL" --ctl="ipc://$tmp/ctl" "$@"
}

# status EXPR: a value of "tem-ctl --json status" (Python expression on
# 's').
status() {
    ctl --json status | "$PY" -c "import json,sys; s=json.load(sys.stdin); print($1)"
}

# wait_for COMMAND VALUE WHAT [SECONDS]: polls COMMAND until it prints
# VALUE (within SECONDS, 10 by default).
wait_for() {
    local i out
    for ((i = 0; i < ${4:-10} * 10; i++)); do
        out=$(eval "$1" 2>/dev/null || true)
        [ "$out" = "$2" ] && return 0
        sleep 0.1
    done
    fail "$3: '$out', expected '$2'"
}

# Shared by the tests of a TEM cluster on etcd (tem-cluster.sh,
# tem-cluster-keys.sh, tem-etcd-cluster.sh).

# free_port: a free TCP port on 127.0.0.1.
free_port() {
    "$PY" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# cctl TEM ARGS...: tem-ctl on member TEM (control socket ipc://$tmp/TEM.ctl).
cctl() {
    local t=$1
    shift
    "$CTL" --ctl="ipc://$tmp/$t.ctl" --timeout=2s "$@"
}

# cstat TEM EXPR: Python EXPR on TEM's status ('s') and its "cluster"
# ('c').
cstat() {
    cctl "$1" --json status | "$PY" -c \
        "import json,sys; s=json.load(sys.stdin); c=s['cluster']; print($2)"
}

# until_ok SECONDS SHELL-CODE: until SHELL-CODE (evaluated each time)
# succeeds; false after SECONDS.
until_ok() {
    local end=$(( $(date +%s) + $1 ))
    while ! eval "$2" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt $end ] || return 1
        sleep 0.1
    done
}
