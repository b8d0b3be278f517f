#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end test of tpm-replay on tunnelled captures (VXLAN, Geneve),
# against the ground truth of tests/gen-overlay.py, without root.
#
# For a few seeds, gen-overlay.py writes a capture of three tenants (VXLAN
# VNI 5001 on an IPv4 underlay, VXLAN VNI 5002 on IPv6, Geneve VNI 70000
# with options on IPv4) whose inner flows have identical 5-tuples (IPv4
# and IPv6, one with an inner VLAN tag, one to UDP port 4789 itself), the
# host's own traffic on the same 5-tuples, malformed tunnels and a Geneve
# frame without Ethernet, with its events (per-tenant tun_id= filters,
# group=5tuple without tun_id, group=tun_id, a masked tun_id, tun_id=0/0,
# sum(packets) and sum(bytes), per epoch and over the whole capture) and
# its truth.  Then tpm-replay --stats runs:
#   1. with --tunnel-ports=vxlan,geneve: exit status 0, every report
#      (event, epoch, group with its keys in order, value) exactly the
#      truth's per tenant, inner flow and epoch, each tenant's totals, and
#      the --stats counters (tun_decapsulated, tun_truncated,
#      tun_bad_header, tun_inner_non_ip, tun_inner_malformed,
#      tun_not_decapsulated, tenants, packets, bytes, ...);
#   2. without tunnel ports, and with ports no frame is sent to
#      (vxlan:8472,geneve:6082): exit status 0, the outer flows counted
#      instead, no tun_id in any group, no tun_id= event firing;
#   3. with --tenant-slots=1: the first tenant met is reported exactly,
#      the other tenants' frames are counted in tun_slots_full and never
#      reported, and the run exits with status 3 (docs/operations.md,
#      "Exit status": the output misses data), naming the counter.
# The comparisons are gen-overlay.py check's.
#
# Automake test protocol: exit 0 pass, 1 fail, 77 skip.  Environment (set
# by TESTS_ENVIRONMENT in tests/automake.mk): top_srcdir, top_builddir,
# PYTHON3.  OVL_SEEDS overrides the seeds, OVL_KEEP=1 keeps the work
# directory for debugging.
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-.}
seeds=${OVL_SEEDS:-"1 2"}

. "$top_srcdir/tests/replay-lib.sh"
replay_test_init overlay "${OVL_KEEP:-0}"

gen=$top_srcdir/tests/gen-overlay.py

# run DIR NAME MODE WANT_STATUS [OPTIONS...]: replays DIR's capture with
# OPTIONS, checks the exit status and compares with the truth of MODE.
run() {
    local dir=$1 name=$2 mode=$3 want=$4 status=0
    shift 4
    "$replay" --stats "$@" -f "$dir/overlay.events" "$dir/overlay.pcap" \
        >"$dir/$name.out" 2>"$dir/$name.err" || status=$?
    if [ "$status" -ne "$want" ]; then
        fail "$dir $name ($*): exit status $status, expected $want"
        grep -v '^{' "$dir/$name.err" | head -n 10
        return 0
    fi
    if ! "$PYTHON3" "$gen" check "$dir/truth.json" "$dir/$name.out" \
            "$dir/$name.err" "$mode" "seed $seed $name ($*)"; then
        failures=$((failures + 1))
    fi
}

for seed in $seeds; do
    dir=$tmp/seed-$seed
    if ! "$PYTHON3" "$gen" gen --seed "$seed" --out-dir "$dir"; then
        fail "gen-overlay.py gen --seed $seed"
        continue
    fi
    run "$dir" tunnel tunnel 0 --tunnel-ports=vxlan,geneve
    run "$dir" outer outer 0
    run "$dir" other-ports outer 0 --tunnel-ports=vxlan:8472,geneve:6082
    run "$dir" slots1 slots1 3 --tunnel-ports=vxlan,geneve --tenant-slots=1
    if [ -f "$dir/slots1.err" ] \
            && ! grep -Eq 'tenant slots full.*: [1-9]' "$dir/slots1.err"; then
        fail "seed $seed slots1: stderr does not name the tenant slots:" \
            "$(grep -v '^{' "$dir/slots1.err" | head -c 300)"
    fi
done

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
exit 0
