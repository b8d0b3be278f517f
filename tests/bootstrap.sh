#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs what the build needs (Debian 12 packages, idempotent), bootstraps
# autotools, configures into build/ and builds.  Then runs TARGET:
#
#   demo   the README's main command: as root, the monitor inside Open
#          vSwitch (tests/demo-ovs.sh: builds the patched ovs-vswitchd,
#          the veth-DPDK test bed, a TEM, a host and a network-wide event,
#          traffic, what the operator sees); otherwise replay a generated
#          trace through libtpm with the paper's Table 2 events, and the
#          TEM over two replay hosts
#   check  the whole test suite (the README's test command; CI runs it)
#   build  nothing more
#
# Environment: BUILD_DIR (default: build), JOBS (default: number of CPUs),
# SKIP_APT=1 to skip the package step (everything already installed).
set -eu

target=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
jobs=${JOBS:-$(nproc)}

# Build: autotools, libpcap and json-c for the tools, ZeroMQ and
# protobuf-c (with protoc-c) for the TPM <-> TEM protocol, python3-zmq for
# its test helpers, Check for the unit tests; Open vSwitch 3.1.0 source and
# DPDK 22.11 for the patched ovs-vswitchd (dpdk-dev also brings
# dpdk-testpmd, the VMs of tests/ovs-vhost.sh and tests/ovs-vm-tcp.sh);
# iproute2, ethtool, ping and tcpdump for the veth-DPDK testbed; iptables and libnetfilter-queue for
# the TCP test's impairments (loss, CE marks, policers, a delay line);
# libssl, libcap-ng and libunbound so that the patched ovs-vswitchd has the
# features of Debian's (SSL, --user, DNS names of remotes).  Packaging
# (make deb, tests/deb-packages.sh): debhelper and dpkg-dev build the
# packages; systemd (systemd-analyze, systemd-sysusers), man-db and
# binutils (strings) check them.  libmicrohttpd serves the TEM's
# metrics; Prometheus scrapes them in tests/tem-metrics.sh.  clang and
# its runtime libraries (libFuzzer, ASan, UBSan) for the fuzz targets
# (tests/fuzz/).  libcurl (OpenSSL flavour) is the TEM's etcd client
# (tem/tem-etcd.h); etcd's server and etcdctl run in tests/tem-etcd.sh.
# libcurl also carries the TEM's alerts to Prometheus Alertmanager
# (tem/tem-am.h), which tests/tem-alertmanager.sh runs.
packages="autoconf automake libtool pkg-config make gcc patch check
libpcap-dev libjson-c-dev libzmq3-dev libprotobuf-c-dev protobuf-c-compiler
python3 python3-zmq valgrind openvswitch-source libdpdk-dev
dpdk-dev iproute2 ethtool iputils-ping tcpdump iptables
libnetfilter-queue-dev util-linux libssl-dev libcap-ng-dev libunbound-dev
debhelper dpkg-dev systemd man-db binutils libmicrohttpd-dev prometheus
clang libclang-rt-14-dev libcurl4-openssl-dev etcd-server etcd-client
prometheus-alertmanager"

if [ "${SKIP_APT:-0}" != 1 ]; then
    missing=
    for p in $packages; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" \
            || missing="$missing $p"
    done
    if [ -n "$missing" ]; then
        echo "bootstrap: installing:$missing"
        if [ "$(id -u)" != 0 ]; then
            echo "bootstrap: need root to install packages (or SKIP_APT=1)" >&2
            exit 1
        fi
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        # shellcheck disable=SC2086
        apt-get install -y -qq --no-install-recommends $missing >/dev/null
    fi
fi

if [ ! -x "$top/configure" ] || [ "$top/configure.ac" -nt "$top/configure" ]; then
    (cd "$top" && autoreconf -fi >/dev/null)
fi
mkdir -p "$build"
if [ ! -f "$build/Makefile" ]; then
    (cd "$build" && "$top/configure" --quiet)
fi
make -C "$build" -j"$jobs" >/dev/null

case $target in
    build)
        ;;
    demo)
        # The monitor inside Open vSwitch (tests/demo-ovs.sh) needs root
        # (namespaces, DPDK) and the patched ovs-vswitchd; otherwise, or if
        # it cannot run here, the replay demo below.
        ovs_demo=77
        if [ "$(id -u)" = 0 ]; then
            echo "# Building the patched ovs-vswitchd (make ovs; the first" \
                 "time takes minutes)"
            make -C "$build" -j"$jobs" ovs >/dev/null
            ovs_demo=0
            top_srcdir=$top top_builddir=$build \
                bash "$top/tests/demo-ovs.sh" || ovs_demo=$?
            [ "$ovs_demo" = 77 ] || exit "$ovs_demo"
            echo "# The demo inside Open vSwitch cannot run here (above);"
        else
            echo "# The demo inside Open vSwitch needs root (network" \
                 "namespaces, DPDK);"
        fi
        echo "# running the offline demo instead: tpm-replay and the TEM."
        tmp=$(mktemp -d)
        trap 'rm -rf "$tmp"' EXIT
        python3 "$top/tests/gen-trace.py" --demo "$tmp/table2.pcap" >/dev/null
        echo "# Replaying a generated trace (tests/gen-trace.py --demo) with"
        echo "# the paper's Table 2 events (tests/data/table2.events):"
        grep -v '^#' "$top/tests/data/table2.events" | grep -v '^$' | sed 's/^/#   /'
        echo "# Satisfactions, one JSON line each:"
        "$build/tpm/tpm-replay" --stats -f "$top/tests/data/table2.events" \
            "$tmp/table2.pcap"
        echo "# The Table 2 events with TCP per-flow state variables, reports"
        echo "# per event (tests/data/table2-tcp.events):"
        "$build/tpm/tpm-replay" -f "$top/tests/data/table2-tcp.events" \
            "$tmp/table2.pcap" | python3 -c 'import json, sys, collections
c = collections.Counter(json.loads(l)["event"] for l in sys.stdin)
for e, n in sorted(c.items()):
    print("#   %-12s %d" % (e, n))'
        echo
        echo "# Network-wide: the TEM over two hosts (tests/demo-tem.sh)"
        sh "$top/tests/demo-tem.sh" "$build" "$top"
        ;;
    check)
        make -C "$build" -j"$jobs" check || {
            find "$build/tests" -name '*.log' -newer "$build/Makefile" \
                -exec grep -l -E '^(FAIL|ERROR)' {} + 2>/dev/null |
                while read -r log; do echo "=== $log"; tail -50 "$log"; done
            exit 1
        }
        ;;
    *)
        echo "usage: $0 [build|demo|check]" >&2
        exit 2
        ;;
esac
