# SPDX-License-Identifier: Apache-2.0
# The TPM <-> TEM protocol.  protoc-c generates proto/trumpet.pb-c.[ch]
# into the build tree from proto/trumpet.proto; the generated code is
# never committed.  lib/automake.mk builds it into lib/libtproto.la.
EXTRA_DIST += proto/trumpet.proto
PROTO_GEN = proto/trumpet.pb-c.c proto/trumpet.pb-c.h
BUILT_SOURCES += $(PROTO_GEN)
CLEANFILES += $(PROTO_GEN)

$(PROTO_GEN): $(srcdir)/proto/trumpet.proto
	@$(MKDIR_P) proto
	$(AM_V_GEN)$(PROTOC_C) --proto_path=$(srcdir)/proto --c_out=proto \
	    $(srcdir)/proto/trumpet.proto
