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
