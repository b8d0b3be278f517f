#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end test of tpm-replay: replay generated pcaps and compare its
# reports with ground truth computed independently by tests/gen-trace.py.
#
# For every scenario of gen-trace.py and a few seeds:
#   1. gen-trace.py writes NAME.pcap, NAME.events and NAME.expected;
#   2. gen-trace.py --verify re-reads the pcap with its own parser and
#      recomputes the truth (cross-checks the generator);
#   3. tpm-replay -f NAME.events NAME.pcap, with its default options, must
#      exit 0 and print exactly the expected reports: the multisets of
#      (event, epoch, group) are equal, key order is as specified, and the
#      values agree to a relative 1e-9;
#   4. the parser's counters of tpm-replay --stats (frames not parsed, by
#      reason; L4 headers cut) equal NAME.counters, which gen-trace.py
#      computes from the packet fields and the snap length (scenarios
#      snap64, cut at 64 bytes, and vlan3, with up to five VLAN tags, are
#      about exactly that);
#   5. what tpm-replay counted in the capture to size its tables (--stats
#      "sizing": distinct flows, trigger instances, flows with TCP state)
#      equals NAME.census, which gen-trace.py counts from the packets.
# The comparisons are tests/replay-check.py's.  Then it checks that a
# malformed event is rejected cleanly, and that a run that loses data (a
# trigger repository too small for the capture) says so on stderr and
# exits with status 3.
#
# Automake test protocol: exit 0 pass, 1 fail, 77 skip.  Environment (set
# by TESTS_ENVIRONMENT in tests/automake.mk): top_srcdir, top_builddir,
# PYTHON3.  E2E_SEEDS overrides the seeds, E2E_SCENARIOS the scenarios,
# E2E_KEEP=1 keeps the work directory for debugging.
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-.}
seeds=${E2E_SEEDS:-"1 2 3"}
scenarios=${E2E_SCENARIOS:-"heavy agg interval ipv6 vars tcp noise table2 \
snap64 vlan3"}

. "$top_srcdir/tests/replay-lib.sh"
replay_test_init e2e "${E2E_KEEP:-0}"

gen=$top_srcdir/tests/gen-trace.py
# The comparisons (reports, counters): tests/replay-check.py.
check=$top_srcdir/tests/replay-check.py

for seed in $seeds; do
    dir=$tmp/seed-$seed
    # shellcheck disable=SC2086
    if ! "$PYTHON3" "$gen" --seed "$seed" --out-dir "$dir" --quiet \
            --scenario "$(echo $scenarios | tr ' ' ,)" \
            --table2-events "$top_srcdir/tests/data/table2.events"; then
        fail "gen-trace.py --seed $seed"
        continue
    fi
    for scen in $scenarios; do
        base=$dir/$scen
        label="$scen seed $seed"
        if ! "$PYTHON3" "$gen" --verify "$base.pcap" "$base.events" \
                "$base.expected" >"$base.verify" 2>&1; then
            cat "$base.verify"
            fail "$label: gen-trace.py --verify"
            continue
        fi
        status=0
        "$replay" --stats -f "$base.events" "$base.pcap" \
            >"$base.actual" 2>"$base.stderr" || status=$?
        if [ "$status" -ne 0 ]; then
            fail "$label: tpm-replay exited with status $status"
            head -n 20 "$base.stderr"
            continue
        fi
        if ! "$PYTHON3" "$check" reports "$base.expected" "$base.actual" \
                "$base.events" "$label"; then
            failures=$((failures + 1))
            if [ -s "$base.stderr" ]; then
                echo "  tpm-replay stderr:"
                head -n 10 "$base.stderr" | sed 's/^/    /'
            fi
        fi
        if ! "$PYTHON3" "$check" counters "$base.counters" "$base.stderr" \
                "$label"; then
            failures=$((failures + 1))
        fi
        # What tpm-replay counted to size its tables from the capture.
        if ! "$PYTHON3" "$check" counters "$base.census" "$base.stderr" \
                "$label" sizing; then
            failures=$((failures + 1))
        fi
    done
done

# A malformed event: non-zero exit (1), an error naming the bad field and
# its column on stderr, nothing on stdout.  The column is 12 counted in
# the definition (lib/event.h), or 17 if counted in the whole -e string.
pcap=
for f in "$tmp"/seed-*/*.pcap; do
    [ -e "$f" ] && pcap=$f
    break
done
if [ -z "$pcap" ]; then             # Generation failed: an empty pcap.
    pcap=$tmp/empty.pcap
    "$PYTHON3" -c 'import struct, sys
sys.stdout.buffer.write(struct.pack("<IHHiIII", 0xa1b23c4d, 2, 4, 0, 0,
                                    65535, 1))' >"$pcap"
fi
status=0
"$replay" --sweep-budget 0 \
    -e 'bad filter=tcp,nw_dest=1.2.3.4 predicate=count() > 1' "$pcap" \
    >"$tmp/bad.out" 2>"$tmp/bad.err" || status=$?
if [ "$status" -ne 1 ]; then
    fail "malformed event: exit status $status, expected 1"
elif [ -s "$tmp/bad.out" ]; then
    fail "malformed event: output on stdout: $(head -c 200 "$tmp/bad.out")"
elif ! grep -q 'nw_dest' "$tmp/bad.err"; then
    fail "malformed event: stderr does not name nw_dest:" \
        "$(head -c 300 "$tmp/bad.err")"
elif ! grep -Eq 'column (12|17)([^0-9]|$)' "$tmp/bad.err"; then
    fail "malformed event: stderr lacks 'column 12':" \
        "$(head -c 300 "$tmp/bad.err")"
else
    echo "PASS: malformed event rejected: $(head -n 1 "$tmp/bad.err")"
fi

# The same capture as pcapng (nanosecond timestamps in the interface
# description): the same reports as the expected ones.
base=$tmp/seed-1/table2
if [ -f "$base.pcap" ]; then
    "$PYTHON3" - "$base.pcap" "$base.pcapng" <<'PY'
import struct, sys
src, dst = sys.argv[1:3]
d = open(src, "rb").read()
magic, _, _, _, _, snaplen, linktype = struct.unpack("<IHHiIII", d[:24])
scale = 1 if magic == 0xa1b23c4d else 1000     # to nanoseconds
def block(btype, body):
    body += bytes(-len(body) % 4)
    n = 12 + len(body)
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)
out = [block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)),
       # if_tsresol (option 9) = 9: nanoseconds; then opt_endofopt.
       block(1, struct.pack("<HHI", linktype, 0, snaplen)
                + struct.pack("<HHB3x", 9, 1, 9) + struct.pack("<HH", 0, 0))]
off = 24
while off < len(d):
    sec, frac, caplen, wirelen = struct.unpack("<IIII", d[off:off + 16])
    data = d[off + 16:off + 16 + caplen]
    off += 16 + caplen
    ts = sec * 10**9 + frac * scale
    out.append(block(6, struct.pack("<IIIII", 0, ts >> 32, ts & 0xffffffff,
                                    caplen, wirelen) + data))
open(dst, "wb").write(b"".join(out))
PY
    status=0
    "$replay" -f "$base.events" "$base.pcapng" >"$base.ng.actual" \
        2>"$base.ng.stderr" || status=$?
    if [ "$status" -ne 0 ]; then
        fail "pcapng: tpm-replay exited with status $status:" \
            "$(head -c 300 "$base.ng.stderr")"
    elif ! "$PYTHON3" "$check" reports "$base.expected" "$base.ng.actual" \
            "$base.events" "table2 seed 1 as pcapng"; then
        failures=$((failures + 1))
    fi
fi

# Many flows with default options: 6000 UDP flows, one packet each per
# 10 ms epoch for 8 epochs, and three events that always hold per 5-tuple:
# 144000 reports, far more per epoch than the report ring holds (4096),
# every one of them printed, exit status 0.  The truth is the generator's.
"$PYTHON3" - "$tmp/many.pcap" <<'PY'
import struct, sys
flows, epochs = 6000, 8
t0 = 1700000000 * 10**9         # ns, on an epoch boundary
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xa1b23c4d, 2, 4, 0, 0, 65535, 1))
    for e in range(epochs):
        for i in range(flows):
            t = t0 + e * 10**7 + i * 1000
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28, 0, 0, 64, 17, 0,
                             bytes((10, 1, i // 250, 1 + i % 250)),
                             bytes((10, 2, 0, 1)))
            frame = (bytes(6) + bytes(6) + b"\x08\x00" + ip
                     + struct.pack("!HHHH", 1000 + i % 50000, 53, 8, 0))
            f.write(struct.pack("<IIII", t // 10**9, t % 10**9, len(frame),
                                len(frame)))
            f.write(frame)
PY
status=0
"$replay" -e 'm1 filter=udp predicate=count() >= 0 group=5tuple' \
    -e 'm2 filter=udp predicate=sum(bytes) >= 0 group=5tuple' \
    -e 'm3 filter=ip predicate=max(ttl) >= 0 group=5tuple' \
    "$tmp/many.pcap" >"$tmp/many.out" 2>"$tmp/many.err" || status=$?
lines=$(wc -l <"$tmp/many.out")
if [ "$status" -ne 0 ] || [ "$lines" -ne 144000 ]; then
    fail "many flows: exit status $status, $lines reports of 144000:" \
        "$(head -c 300 "$tmp/many.err")"
elif ! "$PYTHON3" -c 'import collections, json, sys
c = collections.Counter()
for line in open(sys.argv[1]):
    r = json.loads(line)
    want = {"m1": 1, "m2": 42, "m3": 64}[r["event"]]
    if r["value"] != want or r.get("partial"):
        sys.exit("wrong report: " + line)
    c[r["event"], r["group"]["tp_src"], r["group"]["nw_src"]] += 1
if len(c) != 3 * 6000 or set(c.values()) != {8}:
    sys.exit("not every (event, flow) reported in each of the 8 epochs")
' "$tmp/many.out"; then
    fail "many flows: the reports differ from the generated truth"
else
    echo "PASS: many flows, default options: 144000 of 144000 reports," \
        "every value exact, exit status 0"
fi

# Loss is never silent: room for one trigger instance where the capture
# needs more.  Exit status 3, the counter named on stderr.
status=0
"$replay" --max-triggers 1 -f "$tmp/seed-1/agg.events" "$tmp/seed-1/agg.pcap" \
    >"$tmp/loss.out" 2>"$tmp/loss.err" || status=$?
if [ "$status" -ne 3 ]; then
    fail "forced loss: exit status $status, expected 3"
elif ! grep -q 'incomplete' "$tmp/loss.err" \
        || ! grep -Eq 'trigger instances refused.*: [1-9]' "$tmp/loss.err"; then
    fail "forced loss: stderr does not name the refused instances:" \
        "$(head -c 300 "$tmp/loss.err")"
else
    echo "PASS: forced loss reported, exit status 3:" \
        "$(grep 'trigger instances' "$tmp/loss.err" | sed 's/^ *//')"
fi

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
exit 0
