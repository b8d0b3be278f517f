#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Open vSwitch's own autotests for the datapath, the PMD threads and the
# tunnels (tests/dpif-netdev.at, tests/pmd.at, tests/tunnel.at,
# tests/tunnel-push-pop.at and tests/tunnel-push-pop-ipv6.at: native
# tunnelling's tnl_pop and tnl_push in the netdev datapath, where the
# monitor parses tunnelled frames) on our patched build: the monitor
# hooks must not change OVS's behaviour.  The tunnel files add 42 tests
# and about two minutes on a 2-core machine.
set -euo pipefail

: "${top_builddir:?}"
ovs="$top_builddir/ovs"
[ -x "$ovs/vswitchd/ovs-vswitchd" ] || {
    echo "SKIP: patched OVS not built (make ovs)"; exit 77;
}

# Test numbers differ between OVS releases: select by file.
files='dpif-netdev|pmd|tunnel|tunnel-push-pop|tunnel-push-pop-ipv6'
nums=$("$ovs/tests/testsuite" -l |
       awk -v f="^($files)[.]at:" '$2 ~ f { sub(":", "", $1); print $1 }' |
       tr '\n' ' ')
[ -n "$nums" ] || { echo "FAIL: no dpif-netdev/pmd/tunnel autotests found"; exit 1; }
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
out="$top_builddir/tests/ovs-autotests.out"
if ! make -C "$ovs" check TESTSUITEFLAGS="-j$(nproc) $nums" > "$out" 2>&1 &&
   ! { grep -E "FAILED" "$out" | sed 's/^/first run: /';
       make -C "$ovs" check TESTSUITEFLAGS="--recheck" >> "$out" 2>&1; }; then
    tail -40 "$top_builddir/tests/ovs-autotests.out"
    find "$ovs/tests/testsuite.dir" -name testsuite.log -newer "$ovs/Makefile" \
        -exec tail -60 {} \; 2>/dev/null | head -200
    echo "FAIL: OVS autotests failed (log: tests/ovs-autotests.out)"
    exit 1
fi
grep -E "tests? (were|was) successful|tests? (were|was) skipped" \
    "$top_builddir/tests/ovs-autotests.out" | tail -2
echo "PASS: OVS dpif-netdev, pmd and tunnel autotests on the patched build"
