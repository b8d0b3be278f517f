#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Who may join a cluster of TEMs on etcd, and which hosts every member
# accepts (docs/tem.md, "Past one TEM": member keys, hosts in etcd),
# against a real etcd (Debian's etcd-server) on loopback:
#
#   1. Member keys: t1 and t2 share a key pair (--cluster-keys left to its
#      default: their own key).  Three members that must get nothing
#      join too, with ids chosen so that rendezvous hashing would give
#      each of them events: a rogue TEM with a key pair of its own, a
#      member key written with etcdctl with the cluster's public key but
#      an endpoint where nobody listens, and one with the cluster's key
#      and t2's endpoint under another id (t2 answers the check with its
#      own id).  Eight events: every one assigned to t1 or t2, nothing
#      to the three (in /trumpet/assign/ too), each refused and counted
#      (members_refused 3, the reason of each in status, the metric);
#      the rogue follows no assignment of a leader it refuses
#      (leader_refused).  A host connected to t1, t2 and the rogue with
#      the cluster's public key gets sessions with t1 and t2 only: the
#      rogue has no host to install anything on.
#   2. Hosts in etcd: h3's key is in no --allow-file; h3 is refused by t1
#      and t2 until its key is put in /trumpet/hosts/h3 with etcdctl,
#      then connects to both without a restart; values that are not keys
#      are counted (hosts_bad) and ignored; h3's key deleted from etcd
#      revokes its sessions at once.
#
# Every process started here is killed by PID at exit, failure or not.
# Automake test protocol: 0 pass, 1 fail, 77 skip (no etcd, etcdctl or
# python3-zmq).
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=tests/tem-lib.sh
. "$top_srcdir/tests/tem-lib.sh"
ETCD=${ETCD:-$(command -v etcd || true)}
ETCDCTL=${ETCDCTL:-$(command -v etcdctl || true)}
if [ -z "$ETCD" ] || [ -z "$ETCDCTL" ]; then
    echo "SKIP: no etcd or etcdctl (apt-get install etcd-server etcd-client)"
    exit 77
fi
tem_test_init tem-cluster-keys

keys_cleanup() {
    local rc=$? f
    if [ $rc != 0 ]; then
        for f in "$tmp"/*.log "$tmp"/h?.err; do
            [ -f "$f" ] || continue
            echo "--- $f:"
            tail -n 15 "$f"
        done
    fi
    set +e
    (exit $rc)
    tem_test_cleanup
}
trap keys_cleanup EXIT

cport=$(free_port)
pport=$(free_port)
EP=http://127.0.0.1:$cport
etcdctl() {
    ETCDCTL_API=3 "$ETCDCTL" --endpoints="127.0.0.1:$cport" \
        --dial-timeout=1s --command-timeout=3s "$@"
}
"$ETCD" --name tem-cluster-keys --data-dir "$tmp/etcd" \
    --listen-client-urls "$EP" --advertise-client-urls "$EP" \
    --listen-peer-urls "http://127.0.0.1:$pport" \
    --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
    --initial-cluster "tem-cluster-keys=http://127.0.0.1:$pport" \
    >>"$tmp/etcd.log" 2>&1 &
pids+=($!)
for ((i = 0; i < 100; i++)); do
    etcdctl endpoint health >/dev/null 2>&1 && break
    sleep 0.1
done
etcdctl endpoint health >/dev/null 2>&1 || fail "etcd not healthy after 10 s"

K=$tmp/keys
tem_keys "$K" h1 h3
"$CTL" keygen "$K/rogue.key" >/dev/null 2>&1
# h3's key is for etcd only.
grep -v '^h3 ' "$K/allow" >"$tmp/allow"
key_of() {
    sed -n 's/^public-key = "\(.*\)"$/\1/p' "$1"
}
TEMKEY=$(key_of "$K/tem.key.pub")
H3KEY=$(key_of "$K/h3.key")
[ ${#TEMKEY} = 40 ] && [ ${#H3KEY} = 40 ] || fail "keys: '$TEMKEY' '$H3KEY'"

# Ids for the rogue, the member with no one behind it and the copy of
# t2: the first of each kind that rendezvous hashing (tem_cluster_hash())
# would give one of events 1..8 at least, with t1 and t2 and the others.
read -r ROGUE GHOST COPY < <("$PY" - <<'PYEOF'
M = (1 << 64) - 1
def mix(x):
    x ^= x >> 30; x = (x * 0xbf58476d1ce4e5b9) & M
    x ^= x >> 27; x = (x * 0x94d049bb133111eb) & M
    x ^= x >> 31
    return x
def h(e, m):
    v = 0xcbf29ce484222325
    for c in m.encode():
        v = ((v ^ c) * 0x100000001b3) & M
    return mix(v ^ mix(e + 1))
def winners(members):
    return {max(members, key=lambda m: (h(e, m), m)) for e in range(1, 9)}
for n in range(1000):
    ids = ["rogue%d" % n, "ghost%d" % n, "copy%d" % n]
    if set(ids) <= winners(["t1", "t2"] + ids):
        print(*ids)
        break
PYEOF
)
[ -n "$COPY" ] || fail "no member ids found"

declare -A tpid
# start_member ID KEY-FILE: a TEM of the cluster, lease TTL 2 s.
start_member() {
    "$TEM" --key-file="$2" --allow-file="$tmp/allow" \
        --etcd="$EP" --etcd-ttl=2s --tem-id="$1" \
        --listen="ipc://$tmp/$1" --pub="ipc://$tmp/$1.pub" \
        --ctl="ipc://$tmp/$1.ctl" --state-file="$tmp/$1.json" \
        --alert-file="$tmp/$1.alerts" --no-alerts-stdout \
        --metrics=127.0.0.1:0 --heartbeat=200ms 2>>"$tmp/$1.log" &
    tpid[$1]=$!
    pids+=($!)
}
# sessions TEM: "HOST:STATE ..." of the hosts TEM knows.
sessions() {
    cctl "$1" --json hosts | "$PY" -c 'import json,sys
print(" ".join("%s:%s" % (h["host"], h["state"])
               for h in sorted(json.load(sys.stdin)["hosts"],
                               key=lambda h: h["host"])))'
}

# --- 1. Member keys --------------------------------------------------------
start_member t1 "$K/tem.key"
until_ok 10 '[ "$(cstat t1 "c[\"is_leader\"]")" = True ]' \
    || fail "t1 alone did not become the leader"
start_member t2 "$K/tem.key"
start_member "$ROGUE" "$K/rogue.key"
member() {
    printf '{"id":"%s","listen":"%s","pub":"%s","public_key":"%s","standby":false}' \
        "$1" "$2" "$2.pub" "$TEMKEY"
}
etcdctl put -- "/trumpet/members/$GHOST" \
    "$(member "$GHOST" "ipc://$tmp/nowhere")" >/dev/null
etcdctl put -- "/trumpet/members/$COPY" "$(member "$COPY" "ipc://$tmp/t2")" \
    >/dev/null
want_refused="{'$ROGUE': 'its public key is not in --cluster-keys', \
'$GHOST': 'no answer over CURVE', '$COPY': 'its endpoint answers as another member'}"
refused_ok() {
    local t expr="len(c['members']), c['members_refused'],
all(w in c['refused'].get(m, '') for m, w in $want_refused.items())"
    for t in t1 t2; do
        [ "$(cstat $t "$expr")" = "5 3 True" ] || return 1
    done
}
until_ok 15 refused_ok || fail "members refused: t1 \
$(cstat t1 'c["refused"]'), t2 $(cstat t2 'c["refused"]')"

f="filter=udp,nw_dst=10.99.0.2 interval=100ms group=nw_dst"
for i in 1 2 3 4 5 6 7 8; do
    cctl t$(( i % 2 + 1 )) event-add "k$i" "$f predicate=sum(volume) > ${i}KB" \
        >/dev/null || fail "event-add k$i"
done
placed() {
    "$PY" - "$(cstat t1 'c["events_owned"]')" "$(cstat t2 'c["events_owned"]')" \
        "$(etcdctl get --prefix /trumpet/assign/)" <<'PYEOF'
import json, sys
t1, t2 = json.loads(sys.argv[1]), json.loads(sys.argv[2])
lines = sys.argv[3].split()
assign = {int(k.rsplit("/", 1)[1]): v for k, v in zip(lines[::2], lines[1::2])}
want = {**{i: "t1" for i in t1}, **{i: "t2" for i in t2}}
sys.exit(0 if sorted(t1 + t2) == list(range(1, 9)) and assign == want else 1)
PYEOF
}
until_ok 10 placed || fail "events not placed on t1 and t2 alone: t1 \
$(cstat t1 'c["events_owned"]') t2 $(cstat t2 'c["events_owned"]'); \
etcd: $(etcdctl get --prefix /trumpet/assign/ | tr '\n' ' ')"
sleep 1
placed || fail "events moved after placement"
[ "$(cstat "$ROGUE" 'c["events_owned"], c["leader"], c["leader_refused"] >= 1')" \
    = "[] t1 True" ] || fail "the rogue: $(cstat "$ROGUE" 'c')"
! grep -q 'assigned to this member' "$tmp/$ROGUE.log" \
    || fail "the rogue installed an event"
metrics=$(cstat t1 's["endpoints"]["metrics"]')
# Read whole before grep (grep -q would close the pipe on the first match,
# and the writer's broken pipe fail the pipeline).
metrics=$("$PY" -c "import urllib.request
print(urllib.request.urlopen('http://$metrics/metrics', timeout=5).read().decode())") \
    || fail "cannot read t1's metrics"
grep -q '^trumpet_tem_cluster_members_refused 3$' <<<"$metrics" \
    || fail "metric trumpet_tem_cluster_members_refused is not 3"

# A host connected to every member, pinning the cluster's key.
"$PY" "$top_srcdir/tests/tem-trace.py" --out "$tmp/h.pcap" --epochs 10 \
    --per-epoch 1 --size 100 --src 10.99.1.1 >/dev/null
"$REPLAY" --controller "ipc://$tmp/t1" --controller "ipc://$tmp/t2" \
    --controller "ipc://$tmp/$ROGUE" --host-id h1 \
    --tem-key "$K/tem.key.pub" --host-key-file "$K/h1.key" \
    --prefix 10.99.0.0/24 --linger 60s "$tmp/h.pcap" \
    >"$tmp/h1.out" 2>"$tmp/h1.err" &
pids+=($!)
until_ok 10 '[ "$(sessions t1)" = h1:connected ] && [ "$(sessions t2)" = h1:connected ]' \
    || fail "h1 not connected to t1 and t2: '$(sessions t1)' '$(sessions t2)'"
sleep 1
[ -z "$(sessions "$ROGUE")" ] || fail "the rogue has hosts: $(sessions "$ROGUE")"
echo "PASS: a rogue TEM ($ROGUE, its own key pair), a member key with the" \
     "cluster's key and no TEM behind it ($GHOST) and one copying t2's" \
     "endpoint ($COPY) are refused and assigned none of 8 events" \
     "(t1 $(cstat t1 'c["events_owned"]'), t2 $(cstat t2 'c["events_owned"]'));" \
     "h1 has sessions with t1 and t2 only"

# --- 2. Hosts in etcd --------------------------------------------------------
refused0=$(cstat t1 's["security"]["zap_refused"]')
"$REPLAY" --controller "ipc://$tmp/t1" --controller "ipc://$tmp/t2" \
    --host-id h3 --tem-key "$K/tem.key.pub" --host-key-file "$K/h3.key" \
    --prefix 10.99.0.0/24 --linger 60s "$tmp/h.pcap" \
    >"$tmp/h3.out" 2>"$tmp/h3.err" &
pids+=($!)
until_ok 10 '[ "$(cstat t1 "s[\"security\"][\"zap_refused\"]")" -gt "$refused0" ]' \
    || fail "h3 not refused by t1 without its key"
[ "$(sessions t1)" = h1:connected ] || fail "t1 hosts: $(sessions t1)"
# '--': a Z85 key may begin with '-', which etcdctl would take for a
# flag (a random key did, once in a run).
etcdctl put -- /trumpet/hosts/h3 "$H3KEY" >/dev/null
# both_sessions WANT: t1 and t2 both know their hosts as WANT.
both_sessions() {
    [ "$(sessions t1)" = "$1" ] && [ "$(sessions t2)" = "$1" ]
}
until_ok 10 'both_sessions "h1:connected h3:connected"' \
    || fail "h3 not connected after its key was put in etcd:" \
            "'$(sessions t1)' '$(sessions t2)'"
etcdctl put -- /trumpet/hosts/h4 "not-a-key" >/dev/null
etcdctl put -- '/trumpet/hosts/bad id' "$H3KEY" >/dev/null
until_ok 5 '[ "$(cstat t1 "c[\"hosts_bad\"], c[\"hosts_in_etcd\"]")" = "2 1" ]' \
    || fail "garbage in /trumpet/hosts/: $(cstat t1 'c["hosts_bad"], c["hosts_in_etcd"]')"
etcdctl del /trumpet/hosts/h3 >/dev/null
until_ok 10 'both_sessions "h1:connected h3:gone"' \
    || fail "h3 not revoked after its key left etcd:" \
            "'$(sessions t1)' '$(sessions t2)'"
[ "$(cstat t1 's["counters"]["revoked"] >= 1')" = True ] \
    || fail "t1 did not count h3's revocation"
echo "PASS: h3's key in /trumpet/hosts/ only: refused, then accepted by t1" \
     "and t2 once put with etcdctl, revoked once deleted; 2 bad values" \
     "counted"
