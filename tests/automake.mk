# SPDX-License-Identifier: Apache-2.0
# Unit tests (Check), one suite per module, and the end-to-end test that
# replays generated pcaps against ground truth computed independently of
# libtpm (tests/gen-trace.py).
TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
TEST_LDADD = tpm/libtpm.la lib/libtpmcommon.la $(CHECK_LIBS) -lm

check_PROGRAMS += \
	tests/test-event \
	tests/test-packet \
	tests/test-spsc \
	tests/test-split \
	tests/test-flow-table \
	tests/test-trig-index \
	tests/test-tpm \
	tests/test-sched

tests_test_event_SOURCES = tests/test-event.c
tests_test_event_CFLAGS = $(TEST_CFLAGS)
tests_test_event_LDADD = $(TEST_LDADD)
tests_test_packet_SOURCES = tests/test-packet.c
tests_test_packet_CFLAGS = $(TEST_CFLAGS)
tests_test_packet_LDADD = $(TEST_LDADD)
tests_test_spsc_SOURCES = tests/test-spsc.c
tests_test_spsc_CFLAGS = $(TEST_CFLAGS)
tests_test_spsc_LDADD = $(TEST_LDADD) -lpthread
tests_test_split_SOURCES = tests/test-split.c
tests_test_split_CFLAGS = $(TEST_CFLAGS)
tests_test_split_LDADD = $(TEST_LDADD)
tests_test_flow_table_SOURCES = tests/test-flow-table.c
tests_test_flow_table_CFLAGS = $(TEST_CFLAGS)
tests_test_flow_table_LDADD = $(TEST_LDADD)
tests_test_trig_index_SOURCES = tests/test-trig-index.c
tests_test_trig_index_CFLAGS = $(TEST_CFLAGS)
tests_test_trig_index_LDADD = $(TEST_LDADD)
tests_test_tpm_SOURCES = tests/test-tpm.c
tests_test_tpm_CFLAGS = $(TEST_CFLAGS)
tests_test_tpm_LDADD = $(TEST_LDADD) -lpthread
tests_test_sched_SOURCES = tests/test-sched.c
tests_test_sched_CFLAGS = $(TEST_CFLAGS)
tests_test_sched_LDADD = $(TEST_LDADD)

TESTS += \
	tests/test-event \
	tests/test-packet \
	tests/test-spsc \
	tests/test-split \
	tests/test-flow-table \
	tests/test-trig-index \
	tests/test-tpm \
	tests/test-sched \
	tests/e2e-replay.sh

# tpm-replay's tables sized from the capture: 100000 flows under eight
# events with default options, exact against gen-trace.py's truth; a
# pipe (default tables), explicit sizes and the memory limit.
TESTS += tests/replay-sizing.sh

# tpm-replay on tunnelled captures (VXLAN on IPv4 and IPv6 underlays,
# Geneve with options): three tenants with identical inner 5-tuples, host
# traffic and malformed tunnels, every report and counter exact against
# gen-overlay.py's truth, with and without tunnel ports, and a tenant
# slot too few (exit status 3).  No root, a few seconds.
TESTS += tests/replay-overlay.sh

# The software prefetches of phase 1's and the sweep's loops are in the
# compiled objects (a helper GCC deems pure loses them silently).
TESTS += tests/prefetch-kept.sh
EXTRA_DIST += tests/prefetch-kept.sh

TESTS_ENVIRONMENT = \
	top_srcdir='$(top_srcdir)' top_builddir='$(abs_top_builddir)' \
	PYTHON3='$(PYTHON3)' OVS_SOURCE='$(OVS_SOURCE)'

# The OVS-DPDK tests: the patch series, OVS's own autotests on the patched
# build, and our integration tests on a veth-DPDK testbed.  "make check"
# builds the patched OVS first.
if HAVE_OVS_SOURCE
TESTS += tests/ovs-patch.sh tests/ovs-autotests.sh tests/ovs-integration.sh
# Both keep a PMD thread busy on core 1: never run them side by side.  (A
# variable names the target so that automake keeps its own recipe.)
OVS_INTEGRATION_LOG = tests/ovs-integration.sh.log
$(OVS_INTEGRATION_LOG): tests/ovs-autotests.sh.log
# The fuzz targets' smoke runs and the TEM's attack, limits and metrics
# tests keep both CPUs busy: the PMD tests (a PMD thread on core 0 in
# some) start after them.
OVS_AUTOTESTS_LOG = tests/ovs-autotests.sh.log
$(OVS_AUTOTESTS_LOG): tests/fuzz/fuzz.sh.log tests/tem-security.sh.log \
	tests/tem-limits.sh.log tests/tem-metrics.sh.log
check_DATA = check-ovs-build
check-ovs-build:
	$(MAKE) $(AM_MAKEFLAGS) ovs
.PHONY: check-ovs-build
endif
# ovs-autotests.sh keeps OVS's output there (--compare-stock: stock's too).
CLEANFILES += tests/ovs-autotests.out tests/ovs-autotests-stock.out
EXTRA_DIST += tests/ovs-patch.sh tests/ovs-autotests.sh \
	tests/ovs-integration.sh tests/testbed.sh tests/udp-send.py \
	tests/sendlib.py tests/pcap-volume.py tests/pcaplib.py \
	tests/tpm-reports.py
# Tenants behind VXLAN and Geneve tunnels (OVS native tunnelling), counted
# per inner 5-tuple and tunnel id against captures at both tunnel ends.
# A PMD test: after the others, before the packages.
if HAVE_OVS_SOURCE
TESTS += tests/ovs-overlay.sh
OVS_OVERLAY_LOG = tests/ovs-overlay.sh.log
$(OVS_OVERLAY_LOG): tests/demo-ovs.sh.log
endif
EXTRA_DIST += tests/ovs-overlay.sh tests/overlay-send.py \
	tests/overlay-truth.py tests/overlay-reports.py tests/geneve-peer.py
# Virtual machines without a hypervisor: dpdk-testpmd virtio-user devices
# on dpdkvhostuserclient ports; phy -> VM, VM -> phy and VM -> VM counted
# exactly against captures and the VMs' counters.  A PMD test (testpmd
# polls core 0 meanwhile): after the overlay test, before the packages.
if HAVE_OVS_SOURCE
TESTS += tests/ovs-vhost.sh
OVS_VHOST_LOG = tests/ovs-vhost.sh.log
$(OVS_VHOST_LOG): tests/ovs-overlay.sh.log
endif
EXTRA_DIST += tests/ovs-vhost.sh tests/vhost-check.py
# A VM's kernel TCP behind a vhost-user port (testpmd forwarding between
# a tap in a namespace and virtio-user), the VM's and the physical port
# on one PMD: both directions of each connection on one monitor, seq,
# ack, rtt, is_lost and rwnd against captures on both sides.  A PMD test:
# after the vhost-user test, before the packages.
if HAVE_OVS_SOURCE
TESTS += tests/ovs-vm-tcp.sh
OVS_VM_TCP_LOG = tests/ovs-vm-tcp.sh.log
$(OVS_VM_TCP_LOG): tests/ovs-vhost.sh.log
endif
EXTRA_DIST += tests/ovs-vm-tcp.sh tests/vm-tcp-check.py

EXTRA_DIST += tests/test-util.h tests/e2e-replay.sh tests/gen-trace.py tests/bootstrap.sh \
	tests/replay-lib.sh \
	tests/replay-check.py tests/replay-sizing.sh \
	tests/replay-overlay.sh tests/gen-overlay.py \
	tests/data/table2.events tests/data/table2-tcp.events

# The host agent (lib/agent.h) against a fake TEM.
check_PROGRAMS += tests/test-agent
tests_test_agent_SOURCES = tests/test-agent.c
tests_test_agent_CFLAGS = $(TEST_CFLAGS) $(PROTOBUF_C_CFLAGS) $(ZMQ_CFLAGS)
tests_test_agent_LDADD = lib/libtproto.la $(TEST_LDADD) $(PROTOBUF_C_LIBS) \
	$(ZMQ_LIBS) -lpthread
tests/test_agent-test-agent.$(OBJEXT): $(PROTO_GEN)
TESTS += tests/test-agent

# The TPM <-> TEM protocol layer (lib/tproto.h).
check_PROGRAMS += tests/test-proto
tests_test_proto_SOURCES = tests/test-proto.c
tests_test_proto_CFLAGS = $(TEST_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_test_proto_LDADD = lib/libtproto.la $(TEST_LDADD) $(PROTOBUF_C_LIBS) \
	$(ZMQ_LIBS)
tests/test_proto-test-proto.$(OBJEXT): $(PROTO_GEN)
TESTS += tests/test-proto

# The TEM's logic (tem/tem-core.h) with a fake clock and captured frames.
check_PROGRAMS += tests/test-tem
tests_test_tem_SOURCES = tests/test-tem.c
tests_test_tem_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/tem $(JSON_C_CFLAGS) \
	$(PROTOBUF_C_CFLAGS) $(ZMQ_CFLAGS)
tests_test_tem_LDADD = tem/libtemcore.la $(TEST_LDADD) $(JSON_C_LIBS) \
	$(PROTOBUF_C_LIBS) $(ZMQ_LIBS)
tests/test_tem-test-tem.$(OBJEXT): $(PROTO_GEN)
TESTS += tests/test-tem
EXTRA_DIST += tests/demo-tem.sh tests/tem-trace.py

# The TEM's alerts as Alertmanager alerts (tem/tem-am-json.h): labels,
# annotations, tenants, groups, escaping.
check_PROGRAMS += tests/test-am
tests_test_am_SOURCES = tests/test-am.c tem/tem-am-json.c tem/tem-am-json.h
tests_test_am_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/tem $(JSON_C_CFLAGS)
tests_test_am_LDADD = $(TEST_LDADD) $(JSON_C_LIBS)
TESTS += tests/test-am

# The TEM daemon and tem-ctl with tpm-replay hosts (no switch, no root):
# exit codes, the wire checked with hand-encoded protobuf, decisions
# against traces of known volume, persistence.
TESTS += tests/tem-replay.sh
EXTRA_DIST += tests/tem-replay.sh tests/tem-wire.py tests/pbwire.py \
	tests/tem-keys.sh tests/tem-lib.sh

# The TEM with two tpm-replay hosts on tunnelled captures (gen-overlay.py):
# network-wide sums of one tenant (tun_id= filter) exact against the
# truth, with no miss and no other tenant merged; tenant groups of a
# group=5tuple event counted at the hosts, never sent.
TESTS += tests/tem-overlay.sh
EXTRA_DIST += tests/tem-overlay.sh tests/tem-overlay.py

# Attacks on the TEM's control plane with two tpm-replay hosts: rogue
# peers without a key, with an unknown key, with another host's key;
# oversized frames and requests (RSS measured); key revocation; two TEMs
# on one state file; event ids at the end of their range.
TESTS += tests/tem-security.sh
EXTRA_DIST += tests/tem-security.sh
# Who may join a cluster of TEMs on a real etcd: a rogue TEM with its own
# key pair, a member key with no TEM behind it and one copying another
# member's endpoint are assigned nothing; the hosts' keys in
# /trumpet/hosts/ accepted and revoked by every member without a
# restart.  Skipped without etcd-server and etcd-client.
TESTS += tests/tem-cluster-keys.sh
EXTRA_DIST += tests/tem-cluster-keys.sh
# Every alert delivered to a real Prometheus Alertmanager on loopback
# (--alertmanager), read back through its API: labels, annotations,
# Alertmanager down (queued, retried, delivered), the queue's bound (drops
# counted exactly), two TEMs deduplicated.  Skipped without
# prometheus-alertmanager.
TESTS += tests/tem-alertmanager.sh
EXTRA_DIST += tests/tem-alertmanager.sh
# An allowed host that misbehaves: a frame of satisfactions 116 days
# ahead polls nobody (counted), a Bye with a newline is one escaped log
# line, the control socket answers within 100 ms all along.  No root.
TESTS += tests/tem-hostile.sh
EXTRA_DIST += tests/tem-hostile.sh

# Peers that try to stall the TEM: idle TCP connections at a low
# descriptor limit, metrics clients that trickle their headers, alert
# output nobody reads and a slow alert subscriber; tem-ctl must answer
# within 100 ms throughout and every drop must be counted.
TESTS += tests/tem-limits.sh
EXTRA_DIST += tests/tem-limits.sh tests/tem-limits.py

# The TEM stopped for 3 s (SIGSTOP) while a host's in-time answer waits
# in its socket: after SIGCONT it answers tem-ctl at once, drops no host
# and decides the event with the answer; the overrun is counted.
TESTS += tests/tem-stall.sh
EXTRA_DIST += tests/tem-stall.sh

# The TEM's metrics (--metrics) scraped by a real Prometheus on loopback
# while tpm-replay hosts raise alerts, read back through its HTTP API
# against the TEM's own counters; bad addresses; a full metrics server
# does not stall the TEM.  Skipped without prometheus.
TESTS += tests/tem-metrics.sh
EXTRA_DIST += tests/tem-metrics.sh

# The TEM's etcd client (tem/tem-etcd.h): its JSON and base64 against
# captured and malformed answers (tests/test-etcd), and against a real
# etcd on loopback driven by tests/etcd-driver (tests/tem-etcd.sh: the
# lease, its expiry, put and range, a watch across an etcd restart,
# election with the leader killed, concurrent id allocation, etcd
# unreachable or answering garbage).  Skipped without etcd.
check_PROGRAMS += tests/test-etcd tests/etcd-driver
tests_test_etcd_SOURCES = tests/test-etcd.c
tests_test_etcd_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/tem $(JSON_C_CFLAGS)
tests_test_etcd_LDADD = tem/libtemetcd.la $(TEST_LDADD) $(JSON_C_LIBS)
tests_etcd_driver_SOURCES = tests/etcd-driver.c
tests_etcd_driver_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir)/tem $(ZMQ_CFLAGS)
tests_etcd_driver_LDADD = tem/libtemetcd.la lib/libtpmcommon.la \
	$(ZMQ_LIBS) -lm
TESTS += tests/test-etcd tests/tem-etcd.sh
EXTRA_DIST += tests/tem-etcd.sh tests/etcd-fake.py

# A cluster of three TEMs on etcd (trumpet-tem --etcd) with two tpm-replay
# hosts connected to each: events spread by rendezvous hashing, each
# owned once; the owner of most events killed -9 mid-replay, then the
# leader: their events move within the lease's TTL + 1 s and every
# interval a live TEM owned is alerted exactly, by it, once; etcd killed
# past the lease's TTL and restarted: the last TEM keeps its events and
# answers, then registers again and leads.  Skipped without etcd.
TESTS += tests/tem-cluster.sh
EXTRA_DIST += tests/tem-cluster.sh

# Two TEMs on a three-member etcd cluster: one member killed -9 for three
# lease TTLs, the one the TEMs use first, then etcd's raft leader: no
# lease lost, no event moved, events still added.  Skipped without etcd.
TESTS += tests/tem-etcd-cluster.sh
EXTRA_DIST += tests/tem-etcd-cluster.sh
# The etcd tests one at a time: each runs etcd, TEMs and hosts whose
# timing (lease TTLs, poll deadlines) another beside it would upset.
TEM_ETCD_CLUSTER_LOG = tests/tem-etcd-cluster.sh.log
TEM_CLUSTER_LOG = tests/tem-cluster.sh.log
$(TEM_ETCD_CLUSTER_LOG): tests/tem-cluster.sh.log
$(TEM_CLUSTER_LOG): tests/tem-cluster-keys.sh.log

# The TEM with two hosts: the patched ovs-vswitchd on the veth-DPDK test
# bed and a tpm-replay (network-wide alerts checked against what was sent,
# no alert below the total, drill-down, TEM restart).  It keeps a PMD
# thread busy on core 1 like tests/ovs-integration.sh: run it after.
if HAVE_OVS_SOURCE
TESTS += tests/tem-integration.sh
TEM_INTEGRATION_LOG = tests/tem-integration.sh.log
$(TEM_INTEGRATION_LOG): tests/ovs-integration.sh.log
endif
EXTRA_DIST += tests/tem-integration.sh

# The patched ovs-vswitchd as a host of a TEM cluster: three TEMs on etcd,
# other_config:tpm-controller listing them (one agent each); events
# spread over them alert exactly from their owner; the owner of the most
# killed -9: its events owned on the switch by the survivors within the
# lease's TTL + 1 s, alerts exact again, takeovers counted; bad lists
# refused; an endpoint removed at run time stops only its agent.
# Skipped without etcd.  One PMD thread busy on core 1: after the TEM
# integration test.
if HAVE_OVS_SOURCE
TESTS += tests/ovs-tem-cluster.sh
OVS_TEM_CLUSTER_LOG = tests/ovs-tem-cluster.sh.log
$(OVS_TEM_CLUSTER_LOG): tests/tem-integration.sh.log
endif
EXTRA_DIST += tests/ovs-tem-cluster.sh

# The TCP per-flow state variables against the namespaces' kernel TCP
# (loss, RTT through a delay line, ECN, window) and the paper's TCP use
# cases, on the veth-DPDK test bed; after the TEM cluster test (one
# PMD thread busy on core 1 at a time).  tests/nfq-delay is its delay line
# (the kernel has no netem).
check_PROGRAMS += tests/nfq-delay
tests_nfq_delay_SOURCES = tests/nfq-delay.c
tests_nfq_delay_CFLAGS = $(AM_CFLAGS) $(NFQ_CFLAGS)
tests_nfq_delay_LDADD = lib/libtpmcommon.la $(NFQ_LIBS) -lm
if HAVE_OVS_SOURCE
TESTS += tests/tcp-kernel.sh
TCP_KERNEL_LOG = tests/tcp-kernel.sh.log
$(TCP_KERNEL_LOG): tests/ovs-tem-cluster.sh.log
endif
EXTRA_DIST += tests/tcp-kernel.sh tests/tcp-flow.py tests/pcap-tcp.py

# Exactness on each OVS classification path (simple match, EMC, dpcls
# with the EMC off): a generated pcap read by DPDK net_pcap ports of the
# patched ovs-vswitchd, every 5-tuple's reported packets, bytes and
# payload against the pcap's, exactly.  One PMD thread busy on core 1:
# after the TCP test.
if HAVE_OVS_SOURCE
TESTS += tests/ovs-exact.sh
OVS_EXACT_LOG = tests/ovs-exact.sh.log
$(OVS_EXACT_LOG): tests/tcp-kernel.sh.log
endif
EXTRA_DIST += tests/ovs-exact.sh tests/exact-pcap.py

# The README's main command inside Open vSwitch (tests/bootstrap.sh demo
# as root): it checks what it prints (the switch's reports and the TEM's
# alert against what was sent).  One PMD thread busy on core 1: after the
# exactness test.
if HAVE_OVS_SOURCE
TESTS += tests/demo-ovs.sh
DEMO_OVS_LOG = tests/demo-ovs.sh.log
$(DEMO_OVS_LOG): tests/ovs-exact.sh.log
endif
EXTRA_DIST += tests/demo-ovs.sh

# The Debian packages (make deb) installed into a root of their own (dpkg
# --root, never this machine): files, the user, the unit
# (systemd-analyze verify), the ovs-vswitchd alternative and the way back
# to the stock switch, man pages against the programs' options, the
# installed programs run (tpm-replay against ground truth, the TEM with
# the installed configuration and a host).  Root.  Its package build and
# stripping take the CPU for a few seconds: after the OVS tests, whose PMD
# timing it would disturb.
TESTS += tests/deb-packages.sh
EXTRA_DIST += tests/deb-packages.sh
if HAVE_OVS_SOURCE
DEB_PACKAGES_LOG = tests/deb-packages.sh.log
$(DEB_PACKAGES_LOG): tests/ovs-vm-tcp.sh.log
endif

# The fuzz targets (tests/fuzz/, docs/fuzzing.md): libFuzzer with ASan and
# UBSan, built with clang apart from this build by tests/fuzz/fuzz.sh.
# The suite runs each for a few seconds from its seed corpus (skipped
# without clang); "make fuzz-long" runs them long (FUZZ_SECONDS per
# target, or FUZZ_RUNS executions; FUZZ_TARGETS to choose).
TESTS += tests/fuzz/fuzz.sh
FUZZ_SRC = tests/fuzz/fuzz.sh tests/fuzz/fuzz.mk tests/fuzz/make-corpus.py \
	tests/fuzz/fuzz-util.h tests/fuzz/fuzz-tem-util.h \
	tests/fuzz/fuzz-tem-util.c tests/fuzz/fuzz-event.c \
	tests/fuzz/fuzz-packet.c tests/fuzz/fuzz-proto.c \
	tests/fuzz/fuzz-tem-ctl.c tests/fuzz/fuzz-tem-host.c \
	tests/fuzz/event.dict tests/fuzz/tem-ctl.dict
EXTRA_DIST += $(FUZZ_SRC) tests/fuzz/corpus
FUZZ_TARGETS =
fuzz-long: $(PROTO_GEN)
	top_srcdir='$(top_srcdir)' top_builddir='$(abs_top_builddir)' \
	FUZZ_SECONDS='$(FUZZ_SECONDS)' FUZZ_RUNS='$(FUZZ_RUNS)' \
	$(SHELL) $(top_srcdir)/tests/fuzz/fuzz.sh long $(FUZZ_TARGETS)
fuzz-build: $(PROTO_GEN)
	top_srcdir='$(top_srcdir)' top_builddir='$(abs_top_builddir)' \
	$(SHELL) $(top_srcdir)/tests/fuzz/fuzz.sh build
mostlyclean-local: clean-fuzz
clean-fuzz:
	rm -rf tests/fuzz/obj tests/fuzz/libfuzzdeps.a tests/fuzz/corpus-long
	rm -f tests/fuzz/fuzz-event tests/fuzz/fuzz-packet \
	    tests/fuzz/fuzz-proto tests/fuzz/fuzz-tem-ctl \
	    tests/fuzz/fuzz-tem-host tests/fuzz/*.smoke.log \
	    tests/fuzz/*.long.log
