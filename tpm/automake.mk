# SPDX-License-Identifier: Apache-2.0
noinst_LTLIBRARIES += tpm/libtpm.la
tpm_libtpm_la_SOURCES = \
	tpm/dos-model.c tpm/dos-model.h \
	tpm/flow-table.c tpm/flow-table.h \
	tpm/match-scatter.c \
	tpm/sweep.c tpm/sweep-sched.h \
	tpm/tcp-state.c \
	tpm/tenants.c tpm/tenants.h \
	tpm/tpm.c tpm/tpm.h tpm/tpm-private.h \
	tpm/triggers.c \
	tpm/trig-index.c tpm/trig-index.h
tpm_libtpm_la_LIBADD = lib/libtpmcommon.la -lm

bin_PROGRAMS += tpm/tpm-replay
# tpm-bench is a benchmark of the development tree (docs/benchmarks.md),
# like tem/bench/tem-bench: built, not installed.
noinst_PROGRAMS += tpm/bench/tpm-bench
tpm_tpm_replay_SOURCES = tpm/tpm-replay.c tpm/replay-options.c \
	tpm/replay-options.h tpm/replay-sizing.c \
	tpm/replay-sizing.h
tpm_tpm_replay_CFLAGS = $(AM_CFLAGS) $(PCAP_CFLAGS) $(JSON_C_CFLAGS) \
	$(PROTOBUF_C_CFLAGS) $(ZMQ_CFLAGS)
tpm_tpm_replay_LDADD = tpm/libtpmjson.la tpm/libtpm.la lib/libtproto.la \
	$(PCAP_LIBS) $(JSON_C_LIBS) $(ZMQ_LIBS) $(PROTOBUF_C_LIBS) -lpthread
tpm/tpm_replay-tpm-replay.$(OBJEXT): $(PROTO_GEN)

noinst_LTLIBRARIES += tpm/libtpmjson.la
tpm_libtpmjson_la_SOURCES = tpm/report-json.c tpm/report-json.h
tpm_libtpmjson_la_CFLAGS = $(AM_CFLAGS) $(JSON_C_CFLAGS)
tpm_bench_tpm_bench_SOURCES = tpm/bench/tpm-bench.c \
	tpm/bench/bench-common.c tpm/bench/bench-common.h \
	tpm/bench/bench-workload.c tpm/bench/bench-match.c \
	tpm/bench/bench-table.c tpm/bench/cuckoo.c tpm/bench/cuckoo.h
tpm_bench_tpm_bench_LDADD = tpm/libtpm.la

# The OVS-DPDK experiment harness (docs/benchmarks.md, sections 4, 6 and
# 7):
# run by hand as root; dos-feeder.c is built by bench-dos.sh against
# libdpdk (pkg-config), like the OVS build, not by automake.
EXTRA_DIST += tpm/bench/bench-lib.sh tpm/bench/bench-dos.sh \
	tpm/bench/bench-feasibility.sh tpm/bench/dos-feeder.c \
	tpm/bench/bench-ovs.sh tpm/bench/bench-ovs.py \
	tpm/bench/bench-ovs-instr.sh tpm/bench/bench-ovs-instr.py
