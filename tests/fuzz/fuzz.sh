#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The libFuzzer targets of tests/fuzz/ (docs/fuzzing.md).
#
#   fuzz.sh [smoke]           build, then run every target for a few
#                             seconds from its seed corpus: the test
#                             suite's run (skipped, exit 77, without clang
#                             and libFuzzer)
#   fuzz.sh build             build only
#   fuzz.sh coverage [TARGET...]  line coverage of the code under test by
#                             each target's corpus (the long runs' and the
#                             seeds), from a build with clang's
#                             source-based coverage (needs llvm-cov)
#   fuzz.sh long [TARGET...]  run each target (default: all), one after
#                             the other, niced, on a corpus kept in the
#                             build tree (BUILD/tests/fuzz/corpus-long),
#                             and print its executions
#
# The targets are built with clang (tests/fuzz/fuzz.mk) into
# BUILD/tests/fuzz/, apart from the gcc build, whose generated protocol
# code (BUILD/proto) they use: run "make" (or tests/bootstrap.sh build)
# first.  Any crash, sanitizer finding, leak or broken invariant fails
# the run; libFuzzer leaves the input in BUILD/tests/fuzz/crash-*.
#
# Environment: top_srcdir and top_builddir (set by "make check"; default
# this tree and its build/), FUZZ_SMOKE_SECONDS (smoke: seconds per
# target, 10), FUZZ_SECONDS (long: seconds per target, 600), FUZZ_RUNS
# (long: stop a target after this many executions instead, e.g.
# 10000000), FUZZ_OPTIONS (more libFuzzer options, e.g. -max_len=1024),
# ASAN_OPTIONS (long: malloc_context_size=5 unless set), CLANG (clang).
set -eu

mode=${1:-smoke}
[ $# -gt 0 ] && shift
top=$(cd "${top_srcdir:-$(dirname "$0")/../..}" && pwd)
builddir=$(cd "${top_builddir:-$top/build}" && pwd)
out=$builddir/tests/fuzz
clang=${CLANG:-clang}
targets="event packet proto tem-ctl tem-host"
nice=

skip() {
    echo "SKIP: $*"
    exit 77
}

# libFuzzer comes with clang's runtime libraries (Debian: libclang-rt-14-dev).
check_clang() {
    command -v "$clang" >/dev/null 2>&1 \
        || skip "no $clang: the fuzz targets need clang and libFuzzer" \
                "(apt-get install clang libclang-rt-14-dev)"
    tmp=$(mktemp -d)
    printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
        'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
        'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)' \
        '{ (void) d; (void) n; return 0; }' > "$tmp/t.c"
    if ! "$clang" -fsanitize=fuzzer,address,undefined "$tmp/t.c" \
            -o "$tmp/t" >/dev/null 2>&1; then
        rm -rf "$tmp"
        skip "$clang cannot link libFuzzer with ASan and UBSan" \
             "(apt-get install libclang-rt-14-dev)"
    fi
    rm -rf "$tmp"
}

build() {
    check_clang
    [ -f "$builddir/proto/trumpet.pb-c.c" ] \
        || make -C "$builddir" proto/trumpet.pb-c.c proto/trumpet.pb-c.h \
            >/dev/null
    # Not a sub-make of "make check": its own jobs, its own output.
    MAKEFLAGS= nice -n 10 make -s -j"${JOBS:-2}" \
        -f "$top/tests/fuzz/fuzz.mk" top="$top" out="$out" \
        proto="$builddir/proto" CLANG="$clang"
}

# run TARGET CORPUS LOG [libFuzzer options...]: runs TARGET from CORPUS
# and its seeds; prints its summary line; returns its status.
run() {
    t=$1 corpus=$2 log=$3
    shift 3
    dict=
    [ -f "$top/tests/fuzz/$t.dict" ] && dict=-dict=$top/tests/fuzz/$t.dict
    mkdir -p "$corpus"
    status=0
    $nice "$out/fuzz-$t" -print_final_stats=1 -timeout=20 -rss_limit_mb=2048 \
        -artifact_prefix="$out/crash-$t-" $dict ${FUZZ_OPTIONS:-} "$@" \
        "$corpus" "$top/tests/fuzz/corpus/$t" >"$log" 2>&1 || status=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    cov=$(grep -E '^#[0-9]+.*(DONE|INITED)' "$log" | tail -1 \
          | sed -n 's/.*cov: \([0-9]*\).*ft: \([0-9]*\).*/cov \1 ft \2/p')
    if [ $status = 0 ]; then
        echo "fuzz-$t: ${execs:-?} executions, ${rate:-?}/s, ${cov:-?}," \
             "0 crashes, 0 leaks"
    else
        echo "fuzz-$t: FAILED (status $status) after ${execs:-?}" \
             "executions: $log"
        grep -E 'ERROR|invariant|SUMMARY|Test unit written' "$log" \
            | head -20
    fi
    return $status
}

case $mode in
    build)
        build
        ;;
    smoke)
        build
        secs=${FUZZ_SMOKE_SECONDS:-10}
        nice="nice -n 10"       # Beside the tests that keep a core busy.
        tmp=$(mktemp -d)
        trap 'rm -rf "$tmp"' EXIT
        failed=0
        for t in $targets; do
            run "$t" "$tmp/$t" "$out/fuzz-$t.smoke.log" \
                -max_total_time="$secs" || failed=1
        done
        exit $failed
        ;;
    long)
        build
        [ $# -gt 0 ] && targets="$*"
        nice="nice -n 19"
        # Shorter allocation stacks: about a fifth more executions; a
        # finding's input, run again alone, gives the full stacks.
        ASAN_OPTIONS=${ASAN_OPTIONS:-malloc_context_size=5}
        export ASAN_OPTIONS
        failed=0
        for t in $targets; do
            set -- -max_total_time="${FUZZ_SECONDS:-600}"
            [ -n "${FUZZ_RUNS:-}" ] && set -- -runs="$FUZZ_RUNS"
            run "$t" "$out/corpus-long/$t" "$out/fuzz-$t.long.log" "$@" \
                || failed=1
        done
        exit $failed
        ;;
    coverage)
        check_clang
        llvm_cov=$(command -v llvm-cov || command -v llvm-cov-14) \
            || skip "no llvm-cov (apt-get install llvm)"
        llvm_profdata=$(command -v llvm-profdata \
                        || command -v llvm-profdata-14)
        cov=$out/cov
        MAKEFLAGS= make -s -j"${JOBS:-2}" -f "$top/tests/fuzz/fuzz.mk" \
            top="$top" out="$cov" proto="$builddir/proto" CLANG="$clang" SAN= \
            COV="-fprofile-instr-generate -fcoverage-mapping"
        [ $# -gt 0 ] && targets="$*"
        tem_core="tem/tem-core.c tem/tem-host.c tem/tem-decide.c
                  tem/tem-alert.c tem/tem-event.c tem/tem-out.c
                  tem/tem-log.c tem/tem-view.c"
        for t in $targets; do
            rm -f "$cov/$t".prof*
            mkdir -p "$out/corpus-long/$t"
            LLVM_PROFILE_FILE="$cov/$t.profraw" "$cov/fuzz-$t" -runs=0 \
                "$out/corpus-long/$t" "$top/tests/fuzz/corpus/$t" \
                >"$cov/$t.log" 2>&1
            "$llvm_profdata" merge -o "$cov/$t.profdata" "$cov/$t.profraw"
            case $t in
                event) files="lib/event.c" ;;
                packet) files="lib/packet.c" ;;
                proto) files="lib/tproto.c" ;;
                tem-ctl) files="tem/tem.c $tem_core tem/tem-state.c" ;;
                tem-host) files="$tem_core lib/tproto.c" ;;
            esac
            echo "fuzz-$t ($(ls "$out/corpus-long/$t" | wc -l) inputs" \
                 "in the long runs' corpus): line coverage"
            for f in $files; do
                "$llvm_cov" report "$cov/fuzz-$t" \
                    -instr-profile="$cov/$t.profdata" "$top/$f" \
                    | awk -v f="$f" '$1 == "TOTAL" {
                        print "    " f ": " $(NF-3) " of lines (" \
                              $(NF-6) " of functions)" }'
            done
        done
        ;;
    *)
        echo "usage: $0 [smoke|build|coverage|long [TARGET...]]" >&2
        exit 2
        ;;
esac
