#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tpm-replay's tables sized from the capture (tpm/replay-sizing.h): a
# default run stays exact with more flows, trigger instances and TCP
# states than the default tables hold, and a table that is still too
# small is named and the run exits with status 3.
#
#   1. gen-trace.py --scenario flows writes a capture of 100000 distinct
#      flows (SIZING_FLOWS) under eight events (four per 5-tuple, one of
#      them on is_burst, which needs TCP state; four coarser, down to one
#      group for all of IPv4), the reports they must give, computed in
#      Python, and what tpm-replay must count in the capture;
#   2. tpm-replay with its default options must exit 0 and print exactly
#      the expected reports (tests/replay-check.py), having counted the
#      capture as gen-trace.py did and sized every table above its
#      default;
#   3. the same capture from a pipe keeps the default tables: exit status
#      3, and stderr names the flow table, the trigger instances and the
#      TCP state pool with the option that raises each;
#   4. reading the file, explicit sizes win (the others are still sized
#      from the capture): a --max-triggers and a --max-chunks too small
#      are named, exit status 3;
#   5. a capture whose tables would exceed --max-table-memory is refused
#      (exit status 1, nothing on stdout).
#
# Automake test protocol: exit 0 pass, 1 fail, 77 skip.  Environment (set
# by TESTS_ENVIRONMENT in tests/automake.mk): top_srcdir, top_builddir,
# PYTHON3.  SIZING_SEED, SIZING_FLOWS; SIZING_KEEP=1 keeps the work
# directory.
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-.}
seed=${SIZING_SEED:-1}
flows=${SIZING_FLOWS:-100000}

. "$top_srcdir/tests/replay-lib.sh"
replay_test_init sizing "${SIZING_KEEP:-0}"
gen=$top_srcdir/tests/gen-trace.py
check=$top_srcdir/tests/replay-check.py

# sizing STDERR EXPR...: the --stats line's "sizing" object (as 'z', and
# the whole line as 's') satisfies every Python expression; prints them.
sizing() {
    "$PYTHON3" - "$@" <<'PY'
import json, sys
err, exprs = sys.argv[1], sys.argv[2:]
s = None
for line in open(err):
    if line.startswith("{"):
        s = json.loads(line)
if s is None:
    sys.exit("no --stats line in %s" % err)
z = s["sizing"]
bad = [e for e in exprs if not eval(e, {"z": z, "s": s})]
if bad:
    sys.exit("not true: %s; sizing %s" % ("; ".join(bad), json.dumps(z)))
PY
}

# 1. The capture and its truth.
base=$tmp/flows
if ! "$PYTHON3" "$gen" --scenario flows --flows "$flows" --seed "$seed" \
        --out-dir "$tmp"; then
    echo "FAIL: gen-trace.py --scenario flows"
    exit 1
fi

# 2. Default options: exact.
status=0
"$replay" --stats -f "$base.events" "$base.pcap" >"$base.actual" \
    2>"$base.stderr" || status=$?
if [ "$status" -ne 0 ]; then
    fail "default run: exit status $status, expected 0"
    grep -v '^{' "$base.stderr" | head -n 20
else
    "$PYTHON3" "$check" reports "$base.expected" "$base.actual" \
        "$base.events" "$flows flows, default options" \
        || failures=$((failures + 1))
    "$PYTHON3" "$check" counters "$base.census" "$base.stderr" \
        "$flows flows, census" sizing || failures=$((failures + 1))
    # Every table sized above its default (so the test shows the
    # sizing), within the memory limit; the flow table at least twice
    # the flows; no loss of any kind (the exit status says it too).
    if sizing "$base.stderr" 'z["from_capture"]' \
            'z["flow_table_size"] >= 2 * z["capture_flows"]' \
            'z["flow_table_size"] & (z["flow_table_size"] - 1) == 0' \
            'z["longest_cluster"] <= z["probe_limit"]' \
            'z["flow_table_size"] > 65536' \
            'z["max_triggers"] >= z["capture_instances"] > 131072' \
            'z["max_children"] == z["max_triggers"]' \
            'z["tcp_state_pool"] >= z["capture_state_flows"] > 16384' \
            'z["max_chunks"] >= z["capture_chunks"]' \
            'z["table_memory"] <= z["max_table_memory"]' \
            's["tcp_states"] == z["capture_state_flows"]' \
            'not (s["flow_evictions"] or s["children_dropped"]
                  or s["chunks_exhausted"] or s["tcp_state_exhausted"])'
    then
        echo "PASS: $flows flows, default options: tables sized from the" \
            "capture: $("$PYTHON3" -c 'import json, sys
z = [json.loads(l) for l in open(sys.argv[1]) if l[0] == "{"][-1]["sizing"]
print("%d flows -> flow table %d (longest cluster %d), %d instances, "
      "%d chunks, %d TCP states, %.0f MiB" % (
      z["capture_flows"], z["flow_table_size"], z["longest_cluster"],
      z["max_triggers"], z["max_chunks"], z["tcp_state_pool"],
      z["table_memory"] / 2**20))' "$base.stderr")"
    else
        fail "default run: table sizes"
    fi
fi

# 3. From a pipe: the default tables, too small; each named with its
# option, exit status 3.
status=0
cat "$base.pcap" | "$replay" --stats -f "$base.events" - \
    >"$tmp/pipe.out" 2>"$tmp/pipe.err" || status=$?
if [ "$status" -ne 3 ]; then
    fail "pipe: exit status $status, expected 3"
elif ! sizing "$tmp/pipe.err" 'not z["from_capture"]' \
        'z["flow_table_size"] == 65536' 'z["max_triggers"] == 131072'; then
    fail "pipe: not the default tables"
else
    # The summary's lines, and the early warning.
    missing=
    for what in \
        'evictions \(flow table full\): [1-9].*--flow-table-size, now 65536' \
        'trigger instances refused.*: [1-9].*--max-triggers, now 131072' \
        'without TCP state.*: [1-9].*--tcp-state-pool, now 16384' \
        '^tpm-replay: flow evictions .*after [0-9]+ packets.*--flow-table-size'
    do
        grep -Eq -- "$what" "$tmp/pipe.err" || missing="$missing '$what'"
    done
    if [ -n "$missing" ]; then
        fail "pipe: stderr lacks$missing:"
        grep -v '^{' "$tmp/pipe.err" | head -n 20
    else
        echo "PASS: pipe, default tables: exit status 3, stderr:"
        grep -E '^  .*raise' "$tmp/pipe.err"
    fi
fi

# 4. Explicit sizes win, and the other tables are still sized.
status=0
"$replay" --stats --max-triggers 100000 --max-chunks 64 -f "$base.events" \
    "$base.pcap" >"$tmp/small.out" 2>"$tmp/small.err" || status=$?
if [ "$status" -ne 3 ]; then
    fail "explicit sizes: exit status $status, expected 3"
elif ! sizing "$tmp/small.err" 'z["from_capture"]' \
        'z["max_triggers"] == z["max_children"] == 100000' \
        'z["max_chunks"] == 64' 'z["flow_table_size"] > 65536' \
        's["flow_evictions"] == 0' 's["tcp_state_exhausted"] == 0'; then
    fail "explicit sizes: not the sizes given, or the others not sized"
elif ! grep -Eq 'instances refused.*: [1-9].*--max-triggers, now 100000' \
        "$tmp/small.err" \
        || ! grep -Eq 'chunk pool empty.*: [1-9].*--max-chunks, now 64' \
        "$tmp/small.err"; then
    fail "explicit sizes: stderr does not name both tables:" \
        "$(grep -v '^{' "$tmp/small.err" | head -c 600)"
else
    echo "PASS: explicit --max-triggers and --max-chunks win, named when" \
        "too small, exit status 3"
fi

# 5. Over the memory limit: refused before the replay.
status=0
"$replay" --max-table-memory 64MiB -f "$base.events" "$base.pcap" \
    >"$tmp/limit.out" 2>"$tmp/limit.err" || status=$?
if [ "$status" -ne 1 ]; then
    fail "memory limit: exit status $status, expected 1"
elif [ -s "$tmp/limit.out" ]; then
    fail "memory limit: output on stdout"
elif ! grep -q 'raise --max-table-memory (now 64MiB)' "$tmp/limit.err"; then
    fail "memory limit: stderr does not name the limit:" \
        "$(head -c 600 "$tmp/limit.err")"
else
    echo "PASS: over --max-table-memory 64MiB: refused, exit status 1"
fi

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
exit 0
