#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The monitor's software prefetches are in its compiled code.
#
# GCC deems a function that only loads and prefetches "pure" and deletes a
# call of it whose result is unused, prefetches and all: the sweep's
# planned run went without its flow-entry lookahead that way, unnoticed by
# every functional test, and its 65536-instance sweep took 1.6 times as
# long (docs/benchmarks.md, "Sweep instructions").  This test
# disassembles libtpm's objects (binutils' objdump) and requires, in each
# function of the per-packet and per-instance loops, at least the
# prefetches its source issues on every pass:
#
#   process_batch__ (match-scatter.c)   frames, home buckets, statistics
#   sweep_planned_run__ (sweep.c)       line 0 ahead, flow entry, stats
#   sweep_fetching_run__ (sweep.c)      the same and the group key
#   sweep_skipping_run__ (sweep.c)      the same and the history slot,
#                                       for the instances it will visit
#   tpm_sweep_run__ (sweep.c)           the same for the general loop and
#                                       the step's start, the event, the
#                                       chunk, the history entry
#   planned_chunked__ (sweep.c)         a chunk's flow entries
#
# (Built without the fix, the planned run held 2 and the general loop 6;
# with it, 4 and 24 with Debian 12's GCC 12; the skipping run 10.)
#
# Automake test protocol: 0 pass, 1 fail, 77 skip (no objdump, or objects
# built elsewhere).
set -euo pipefail

top_builddir=${top_builddir:-.}
OBJDUMP=${OBJDUMP:-objdump}
if ! command -v "$OBJDUMP" >/dev/null; then
    echo "SKIP: no $OBJDUMP (apt-get install binutils)"
    exit 77
fi

# prefetches OBJECT: "function count" for each function of OBJECT that
# holds a prefetch instruction (clones such as .constprop.0 by their
# base name).
prefetches() {
    "$OBJDUMP" -d --no-show-raw-insn "$1" | awk '
        /^[0-9a-f]+ <[^>]+>:$/ {
            fn = substr($2, 2, length($2) - 3); sub(/\..*/, "", fn)
        }
        /\tprefetch/ { n[fn]++ }
        END { for (f in n) print f, n[f] }'
}

rc=0
# check OBJECT FUNCTION MIN
check() {
    local obj=$top_builddir/tpm/$1 have
    if [ ! -f "$obj" ]; then
        echo "SKIP: $obj not built here"
        exit 77
    fi
    have=$(prefetches "$obj" | awk -v f="$2" '$1 == f { s += $2 } END { print s + 0 }')
    if [ "$have" -ge "$3" ]; then
        echo "PASS: $2 ($1): $have prefetch instructions (>= $3)"
    else
        echo "FAIL: $2 ($1): $have prefetch instructions, expected >= $3"
        rc=1
    fi
}

check match-scatter.o process_batch__ 3
check sweep.o sweep_planned_run__ 3
check sweep.o sweep_fetching_run__ 4
check sweep.o sweep_skipping_run__ 4
check sweep.o tpm_sweep_run__ 8
check sweep.o planned_chunked__ 2
exit $rc
