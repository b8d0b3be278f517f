#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Open vSwitch's own autotests for the datapath, the PMD threads and the
# tunnels (tests/dpif-netdev.at, tests/pmd.at, tests/tunnel.at,
# tests/tunnel-push-pop.at and tests/tunnel-push-pop-ipv6.at: native
# tunnelling's tnl_pop and tnl_push in the netdev datapath, where the
# monitor parses tunnelled frames) on our patched build: the monitor
# hooks must not change OVS's behaviour.  The tunnel files add 42 tests
# and about two minutes on a 2-core machine.
#
#   tests/ovs-autotests.sh                 (make check) the patched build
#   tests/ovs-autotests.sh --compare-stock the same selection on the stock
#                                          build (make ovs-stock) too
#
# --compare-stock runs the selection on build/ovs-stock (the same OVS
# source and configure flags without the patch, ovs-patches/stock.mk),
# then on build/ovs, each with the same retry, and prints every test's
# final result per build (passed, failed, skipped), the counts and the
# times.  It fails if the patched build fails a test that stock passes;
# a test failing on both is listed, not a failure of ours.  Outputs:
# tests/ovs-autotests-stock.out and tests/ovs-autotests.out in the build
# directory (top_builddir, default build/ next to this script).
set -euo pipefail

compare=false
case ${1:-} in
    '') ;;
    --compare-stock)
        compare=true
        : "${top_builddir:=$(cd "$(dirname "$0")/.." && pwd)/build}" ;;
    *) echo "usage: $0 [--compare-stock]" >&2; exit 2 ;;
esac

: "${top_builddir:?}"
ovs="$top_builddir/ovs"
[ -x "$ovs/vswitchd/ovs-vswitchd" ] || {
    echo "SKIP: patched OVS not built (make ovs)"; exit 77;
}
stock="$top_builddir/ovs-stock"
if $compare && [ ! -x "$stock/vswitchd/ovs-vswitchd" ]; then
    echo "FAIL: stock OVS not built (make -C $top_builddir ovs-stock)"
    exit 1
fi

# Test numbers differ between OVS releases: select by file.
files='dpif-netdev|pmd|tunnel|tunnel-push-pop|tunnel-push-pop-ipv6'
# ovs_autotests_select TREE: the selection's test numbers in TREE.
ovs_autotests_select() {
    [ -x "$1/tests/testsuite" ] || make -C "$1" tests/testsuite >/dev/null
    "$1/tests/testsuite" -l |
        awk -v f="^($files)[.]at:" '$2 ~ f { sub(":", "", $1); print $1 }' |
        tr '\n' ' '
}
nums=$(ovs_autotests_select "$ovs")
[ -n "$nums" ] || { echo "FAIL: no dpif-netdev/pmd/tunnel autotests found"; exit 1; }
if $compare && [ "$(ovs_autotests_select "$stock")" != "$nums" ]; then
    echo "FAIL: the selection differs between $ovs and $stock"
    exit 1
fi
echo "running OVS autotests $nums"
# Every PMD thread's monitor asks for 2 MB huge pages (about 27 for its
# tables) and logs a warning when none are reserved; OVS's tests fail on
# any warning in ovs-vswitchd's log.  A deployment reserves huge pages
# (docs/operations.md); so does this test, for its duration, if it may
# (TPM_AUTOTEST_HUGEPAGES more, default 1024 = 2 GB), and gives them back.
pages=/proc/sys/vm/nr_hugepages
if [ -w "$pages" ]; then
    orig_pages=$(cat "$pages")
    trap 'echo "$orig_pages" > "$pages"' EXIT
    echo $((orig_pages + ${TPM_AUTOTEST_HUGEPAGES:-1024})) > "$pages"
    echo "huge pages reserved: $(cat "$pages") (were $orig_pages)"
fi

# OVS's PMD tests are timing-sensitive on a loaded 2-core machine; like
# OVS's own CI (RECHECK=yes), failed tests are run once more, alone.
# ovs_autotests_run TREE OUT PREFIX: the selection on TREE, output in
# OUT; fails if a test still fails after the retry.
ovs_autotests_run() {
    local tree=$1 out=$2 prefix=$3
    make -C "$tree" check TESTSUITEFLAGS="-j$(nproc) $nums" > "$out" 2>&1 ||
        { grep -E "FAILED" "$out" | sed "s/^/${prefix}first run: /";
          make -C "$tree" check TESTSUITEFLAGS="--recheck" >> "$out" 2>&1; }
}
# ovs_autotests_results OUT: "NUMBER STATUS" per test (ok, FAILED,
# skipped, xfail, xpass), its last result in OUT (after the retry).
ovs_autotests_results() {
    awk '/^ *[0-9]+: / {
            n = $1; sub(":", "", n);
            if ($0 ~ / ok$/) s = "ok";
            else if ($0 ~ / FAILED \(/) s = "FAILED";
            else if ($0 ~ / skipped \(/) s = "skipped";
            else if ($0 ~ / expected failure/) s = "xfail";
            else if ($0 ~ /UNEXPECTED PASS/) s = "xpass";
            else next;
            st[n] = s }
         END { for (n in st) print n, st[n] }' "$1" | sort -n
}
# ovs_autotests_list RESULTS STATUS: the numbers of the tests with STATUS.
ovs_autotests_list() {
    awk -v s="$2" '$2 == s { printf "%s%s", sep, $1; sep = " " }' "$1"
}

out="$top_builddir/tests/ovs-autotests.out"
if ! $compare; then
    if ! ovs_autotests_run "$ovs" "$out" ""; then
        tail -40 "$top_builddir/tests/ovs-autotests.out"
        find "$ovs/tests/testsuite.dir" -name testsuite.log -newer "$ovs/Makefile" \
            -exec tail -60 {} \; 2>/dev/null | head -200
        echo "FAIL: OVS autotests failed (log: tests/ovs-autotests.out)"
        exit 1
    fi
    grep -E "tests? (were|was) successful|tests? (were|was) skipped" \
        "$top_builddir/tests/ovs-autotests.out" | tail -2
    echo "PASS: OVS dpif-netdev, pmd and tunnel autotests on the patched build"
    exit 0
fi

# --compare-stock: stock first, then the patched build, one at a time.
stock_out="$top_builddir/tests/ovs-autotests-stock.out"
res_dir=$(mktemp -d)
trap 'rm -rf "$res_dir"; [ -z "${orig_pages:-}" ] ||
      echo "$orig_pages" > "$pages"' EXIT
for build in stock patched; do
    if [ $build = stock ]; then
        tree=$stock o=$stock_out
    else
        tree=$ovs o=$out
    fi
    t0=$SECONDS
    ovs_autotests_run "$tree" "$o" "$build: " || true
    ovs_autotests_results "$o" > "$res_dir/$build"
    n_all=$(wc -w <<<"$nums")
    n_ok=$(ovs_autotests_list "$res_dir/$build" ok | wc -w)
    n_fail=$(ovs_autotests_list "$res_dir/$build" FAILED | wc -w)
    n_skip=$(ovs_autotests_list "$res_dir/$build" skipped | wc -w)
    n_other=$((n_all - n_ok - n_fail - n_skip))
    echo
    echo "$build ($tree, output $o): $n_all tests in $((SECONDS - t0)) s:" \
         "$n_ok passed, $n_fail failed, $n_skip skipped," \
         "$n_other other (expected failures, no result)"
    echo "  passed:  $(ovs_autotests_list "$res_dir/$build" ok)"
    echo "  failed:  $(ovs_autotests_list "$res_dir/$build" FAILED)"
    echo "  skipped: $(ovs_autotests_list "$res_dir/$build" skipped)"
done

# Tests stock passes and the patched build does not pass.
worse=$(join <(awk '$2 == "ok" { print $1 }' "$res_dir/stock" | sort) \
              <(awk '$2 != "ok" { print $1 }' "$res_dir/patched" | sort) |
        sort -n | tr '\n' ' ')
missing=$(join -v1 <(awk '$2 == "ok" { print $1 }' "$res_dir/stock" |
                     sort) <(awk '{ print $1 }' "$res_dir/patched" | sort) |
          sort -n | tr '\n' ' ')
both=$(join <(awk '$2 == "FAILED" { print $1 }' "$res_dir/stock" | sort) \
            <(awk '$2 == "FAILED" { print $1 }' "$res_dir/patched" | sort) |
       sort -n | tr '\n' ' ')
better=$(join <(awk '$2 == "FAILED" { print $1 }' "$res_dir/stock" | sort) \
              <(awk '$2 == "ok" { print $1 }' "$res_dir/patched" | sort) |
         sort -n | tr '\n' ' ')
echo
echo "failed on both builds: ${both:-none}"
echo "failed on stock only: ${better:-none}"
if [ -n "$worse$missing" ]; then
    for n in $worse $missing; do
        "$ovs/tests/testsuite" -l | awk -v n="$n:" '$1 == n'
    done
    echo "FAIL: stock passes and the patched build does not:" \
         "${worse}${missing}(outputs: $stock_out, $out)"
    exit 1
fi
echo "PASS: the patched build passes every test of the selection that" \
     "stock passes"
