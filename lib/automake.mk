# SPDX-License-Identifier: Apache-2.0
noinst_LTLIBRARIES += lib/libtpmcommon.la
lib_libtpmcommon_la_SOURCES = \
	lib/cli.c lib/cli.h \
	lib/clock.c lib/clock.h \
	lib/decision.c lib/decision.h \
	lib/event.c lib/event.h \
	lib/hugealloc.c lib/hugealloc.h \
	lib/json-number.c lib/json-number.h \
	lib/packet.c lib/packet.h \
	lib/prefix.c lib/prefix.h \
	lib/sbuf.c lib/sbuf.h \
	lib/spsc.c lib/spsc.h \
	lib/tpm-log.h \
	lib/tpm-parse.h \
	lib/util.c lib/util.h
lib_libtpmcommon_la_LIBADD = -lm

# lib/libtproto.la: the protocol code that protoc-c generates
# (proto/automake.mk), the validation and encoding layer (lib/tproto.h),
# the host agent (lib/agent.h) and the CURVE keys (lib/curve.h).
noinst_LTLIBRARIES += lib/libtproto.la
nodist_lib_libtproto_la_SOURCES = $(PROTO_GEN)
lib_libtproto_la_SOURCES = \
	lib/agent.c lib/agent.h \
	lib/curve.c lib/curve.h \
	lib/tproto.c lib/tproto.h
lib_libtproto_la_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS) $(ZMQ_CFLAGS)
lib_libtproto_la_LIBADD = lib/libtpmcommon.la $(PROTOBUF_C_LIBS) \
	$(ZMQ_LIBS) -lpthread

# Objects that include the generated header (BUILT_SOURCES covers "make"
# and "make all" only, not "make lib/libtproto.la" in a fresh tree).
lib/libtproto_la-tproto.lo lib/libtproto_la-agent.lo \
lib/libtproto_la-curve.lo: $(PROTO_GEN)
