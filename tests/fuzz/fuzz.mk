# SPDX-License-Identifier: Apache-2.0
# The libFuzzer targets (tests/fuzz/fuzz-*.c), built with clang apart from
# the gcc build: GNU make, run by tests/fuzz/fuzz.sh as
#
#   make -f tests/fuzz/fuzz.mk top=SRCDIR out=OUTDIR proto=BUILD/proto
#
# Every library source the targets need is compiled again here with
# clang, libFuzzer's coverage instrumentation and AddressSanitizer and
# UndefinedBehaviorSanitizer (any finding aborts), into OUTDIR, with the
# protobuf-c code that the gcc build generated into BUILD/proto.

top ?= .
out ?= fuzz-out
proto ?= build/proto
CLANG ?= clang
PKG_CONFIG ?= pkg-config

# COV: source-based coverage instead of the sanitizers (fuzz.sh coverage
# builds with SAN= COV='-fprofile-instr-generate -fcoverage-mapping').
SAN = -fsanitize=address,undefined -fno-sanitize-recover=all
COV =
FUZZ_CFLAGS = -std=gnu11 -g -O1 -fno-omit-frame-pointer $(SAN) $(COV)
WARN = -Wall -Wextra -Wno-unused-parameter -Wno-unused-function
PKGS = json-c libprotobuf-c libzmq libmicrohttpd libcurl
# $(proto)/..: the build's config.h (tem-etcd.c includes it).
FUZZ_CPPFLAGS = -I$(top)/lib -I$(top)/tpm -I$(top)/tem -I$(proto) \
	-I$(proto)/.. $(shell $(PKG_CONFIG) --cflags $(PKGS))
FUZZ_LIBS = $(shell $(PKG_CONFIG) --libs $(PKGS)) -lpthread -lm

TARGETS = fuzz-event fuzz-packet fuzz-proto fuzz-tem-ctl fuzz-tem-host

# Library code under test: lib/ (without the host agent), libtpm, the
# TEM's core, state file, keys and metrics, its Alertmanager sender and
# its cluster member with its etcd client (tem.c, which fuzz-tem-ctl.c
# includes, calls them), and the generated protocol code.
LIB_SRCS = \
	lib/cli.c lib/clock.c lib/curve.c lib/decision.c lib/event.c \
	lib/hugealloc.c \
	lib/json-number.c lib/packet.c lib/prefix.c lib/sbuf.c lib/spsc.c \
	lib/tproto.c \
	lib/util.c \
	tpm/dos-model.c tpm/flow-table.c tpm/report-json.c tpm/sweep.c \
	tpm/match-scatter.c tpm/tcp-state.c tpm/tenants.c tpm/tpm.c \
	tpm/triggers.c tpm/trig-index.c \
	tem/tem-alert.c tem/tem-auth.c tem/tem-core.c tem/tem-decide.c \
	tem/tem-event.c tem/tem-fd.c tem/tem-host.c tem/tem-http.c \
	tem/tem-log.c tem/tem-metrics.c tem/tem-options.c tem/tem-out.c \
	tem/tem-sink.c tem/tem-state.c tem/tem-view.c tem/tem-warn.c \
	tem/tem-am.c tem/tem-am-json.c \
	tem/tem-cluster.c tem/tem-probe.c tem/tem-etcd.c tem/tem-etcd-json.c
LIB_OBJS = $(patsubst %.c,$(out)/obj/%.o,$(LIB_SRCS)) \
	$(out)/obj/trumpet.pb-c.o

all: $(addprefix $(out)/,$(TARGETS))

# -MMD: each object's dependencies on headers in a .d beside it (read
# below), so that a changed header, such as tem/tem-core-private.h's
# structures, rebuilds every object that includes it (the harnesses' too:
# a struct of tem/tem-core.h that grows must not meet a harness built for
# the old one); a changed fuzz.mk (flags, sources) rebuilds them all.
$(out)/obj/%.o: $(top)/%.c $(proto)/trumpet.pb-c.h $(top)/tests/fuzz/fuzz.mk
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(FUZZ_CPPFLAGS) \
	    -MMD -MP -w -c $< -o $@

$(out)/obj/trumpet.pb-c.o: $(proto)/trumpet.pb-c.c $(proto)/trumpet.pb-c.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(FUZZ_CPPFLAGS) \
	    -w -c $< -o $@

$(out)/libfuzzdeps.a: $(LIB_OBJS)
	rm -f $@
	ar rcs $@ $^

# The harness and its shared helpers; fuzz-tem-ctl.c includes
# tem/tem.c (the daemon's control dispatch is static there).
$(out)/obj/fuzz-%.o: $(top)/tests/fuzz/fuzz-%.c $(top)/tests/fuzz/fuzz-util.h \
		$(top)/tests/fuzz/fuzz-tem-util.h $(top)/tem/tem.c \
		$(proto)/trumpet.pb-c.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(FUZZ_CPPFLAGS) $(WARN) \
	    -MMD -MP -c $< -o $@

$(out)/obj/fuzz-tem-util.o: $(top)/tests/fuzz/fuzz-tem-util.c \
		$(top)/tests/fuzz/fuzz-tem-util.h $(top)/tests/fuzz/fuzz-util.h \
		$(proto)/trumpet.pb-c.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(FUZZ_CPPFLAGS) $(WARN) \
	    -MMD -MP -c $< -o $@

$(out)/fuzz-tem-ctl $(out)/fuzz-tem-host: $(out)/obj/fuzz-tem-util.o

$(out)/fuzz-%: $(out)/obj/fuzz-%.o $(out)/libfuzzdeps.a
	$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $(filter %.o,$^) \
	    $(out)/libfuzzdeps.a $(FUZZ_LIBS)

.PHONY: all
.SECONDARY:

-include $(LIB_OBJS:.o=.d)
-include $(patsubst %,$(out)/obj/%.d,$(TARGETS) fuzz-tem-util)
