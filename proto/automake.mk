# SPDX-License-Identifier: Apache-2.0
# The TPM <-> TEM protocol.  protoc-c generates proto/trumpet.pb-c.[ch]
# into the build tree from proto/trumpet.proto; the generated code is
# never committed.  lib/libtproto.la is that code, the validation and
# encoding layer (lib/tproto.h) and the host agent (lib/agent.h).
EXTRA_DIST += proto/trumpet.proto
PROTO_GEN = proto/trumpet.pb-c.c proto/trumpet.pb-c.h
BUILT_SOURCES += $(PROTO_GEN)
CLEANFILES += $(PROTO_GEN)

$(PROTO_GEN): $(srcdir)/proto/trumpet.proto
	@$(MKDIR_P) proto
	$(AM_V_GEN)$(PROTOC_C) --proto_path=$(srcdir)/proto --c_out=proto \
	    $(srcdir)/proto/trumpet.proto

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
