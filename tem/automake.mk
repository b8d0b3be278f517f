# SPDX-License-Identifier: Apache-2.0
# The TEM (controller) and its client: see tem/ and docs/tem.md.
#
# tem/libtemcore.la is the TEM's logic without sockets (tem-core.h, one
# file per job, top to bottom: tem-core the core's life and timers,
# tem-host sessions and input, tem-decide decisions, tem-alert alerts and
# drill-down, tem-event events and placement, tem-out the host table and
# outgoing batches, tem-log the rate-limited log; tem-view JSON views and
# metrics; tem-state: the event file), shared by the daemon and
# tests/test-tem.
noinst_LTLIBRARIES += tem/libtemcore.la
tem_libtemcore_la_SOURCES = \
	tem/tem-core.c tem/tem-core.h tem/tem-core-private.h \
	tem/tem-host.c tem/tem-decide.c tem/tem-alert.c tem/tem-event.c \
	tem/tem-out.c tem/tem-log.c \
	tem/tem-view.c \
	tem/tem-state.c tem/tem-state.h \
	tem/tem-auth.c tem/tem-auth.h \
	tem/tem-metrics.c tem/tem-metrics.h
tem_libtemcore_la_CFLAGS = $(AM_CFLAGS) $(JSON_C_CFLAGS) \
	$(PROTOBUF_C_CFLAGS) $(ZMQ_CFLAGS)
tem_libtemcore_la_LIBADD = tpm/libtpmjson.la lib/libtproto.la \
	tpm/libtpm.la lib/libtpmcommon.la $(JSON_C_LIBS) -lm

# The etcd client of a cluster of TEMs (tem-etcd.h, docs/tem.md "etcd
# client"): etcd's v3 JSON gateway over libcurl from a thread of its own;
# tem-etcd-json the request bodies and the parsers, without I/O.  Used
# by tests/test-etcd, tests/etcd-driver and the daemon (tem-cluster.c).
noinst_LTLIBRARIES += tem/libtemetcd.la
tem_libtemetcd_la_SOURCES = \
	tem/tem-etcd.c tem/tem-etcd.h \
	tem/tem-etcd-json.c tem/tem-etcd-json.h
tem_libtemetcd_la_CFLAGS = $(AM_CFLAGS) $(JSON_C_CFLAGS) $(CURL_CFLAGS)
tem_libtemetcd_la_LIBADD = lib/libtpmcommon.la $(CURL_LIBS) \
	$(JSON_C_LIBS) -lpthread

# The daemon in sbin (it is started by its unit), the client in bin (any
# member of the group trumpet may run it).
sbin_PROGRAMS += tem/trumpet-tem
bin_PROGRAMS += tem/tem-ctl
# Its metrics server (tem-http.c) is libmicrohttpd's, run from the
# daemon's loop; tem-fd keeps its descriptor budget (it defines accept4()
# for every library of the process), tem-sink writes its alert outputs
# without blocking, tem-warn rate-limits their warnings; tem-am sends
# the alerts to Prometheus Alertmanager with libcurl from threads of its
# own (tem-am-json makes their JSON); tem-cluster makes it a member of a
# cluster of TEMs on etcd (--etcd), tem-probe checks that another
# member holds the key it advertises.
tem_trumpet_tem_SOURCES = tem/tem.c tem/tem-options.c tem/tem-options.h \
	tem/tem-http.c tem/tem-http.h tem/tem-fd.c tem/tem-fd.h \
	tem/tem-sink.c tem/tem-sink.h tem/tem-warn.c tem/tem-warn.h \
	tem/tem-am.c tem/tem-am.h tem/tem-am-json.c tem/tem-am-json.h \
	tem/tem-cluster.c tem/tem-cluster.h tem/tem-probe.c tem/tem-probe.h
tem_trumpet_tem_CFLAGS = $(AM_CFLAGS) $(JSON_C_CFLAGS) $(ZMQ_CFLAGS) \
	$(PROTOBUF_C_CFLAGS) $(MHD_CFLAGS) $(CURL_CFLAGS)
tem_trumpet_tem_LDADD = tem/libtemcore.la tem/libtemetcd.la $(ZMQ_LIBS) \
	$(JSON_C_LIBS) $(MHD_LIBS) $(CURL_LIBS) -lpthread

tem_tem_ctl_SOURCES = tem/tem-ctl.c
tem_tem_ctl_CFLAGS = $(AM_CFLAGS) $(JSON_C_CFLAGS) $(ZMQ_CFLAGS)
tem_tem_ctl_LDADD = lib/libtproto.la lib/libtpmcommon.la $(ZMQ_LIBS) \
	$(JSON_C_LIBS)
tem/libtemcore_la-tem-core.lo tem/libtemcore_la-tem-host.lo \
tem/libtemcore_la-tem-event.lo tem/libtemcore_la-tem-decide.lo \
tem/libtemcore_la-tem-alert.lo tem/libtemcore_la-tem-view.lo \
tem/libtemcore_la-tem-state.lo tem/libtemcore_la-tem-auth.lo \
tem/libtemcore_la-tem-metrics.lo tem/libtemcore_la-tem-out.lo \
tem/libtemcore_la-tem-log.lo \
tem/trumpet_tem-tem.$(OBJEXT) tem/trumpet_tem-tem-options.$(OBJEXT): \
	$(PROTO_GEN)

# tem-bench: throughput and latency of a running TEM with simulated hosts
# (docs/benchmarks.md, section TEM).  The TEM's benchmarks are in
# tem/bench/, as libtpm's are in tpm/bench/: bench-tem.sh runs the
# matrix, bench-tem-shards.sh events partitioned over several TEMs,
# bench-tem-replay.sh the latency with tpm-replay hosts,
# bench-tem-instr.sh the TEM's instructions per latency epoch under
# callgrind, bench-tem-takeover.sh a cluster's takeover on a real etcd,
# bench-tem-am.sh the alerts' delivery to a real Alertmanager; they
# source bench-lib.sh (bench-tem-am.sh: tests/tem-lib.sh).
noinst_PROGRAMS += tem/bench/tem-bench
tem_bench_tem_bench_SOURCES = tem/bench/tem-bench.c
tem_bench_tem_bench_CFLAGS = $(AM_CFLAGS) $(JSON_C_CFLAGS) $(ZMQ_CFLAGS) \
	$(PROTOBUF_C_CFLAGS)
tem_bench_tem_bench_LDADD = lib/libtproto.la $(ZMQ_LIBS) $(JSON_C_LIBS) \
	-lpthread -lm
tem/bench/tem_bench-tem-bench.$(OBJEXT): $(PROTO_GEN)

# The TEM as a system service: its systemd unit, its configuration (the
# options the unit passes, an EnvironmentFile) and its system user
# (sysusers.d).  Made from their .in at install time (see install_edited
# in Makefile.am); an existing configuration file is kept.
EXTRA_DIST += tem/trumpet-tem.service.in tem/trumpet-tem.conf.in \
	tem/trumpet-tem.sysusers
install-data-local: install-tem-service
install-tem-service:
	$(install_edited) tem/trumpet-tem.service.in \
	    '$(systemdsystemunitdir)' trumpet-tem.service
	$(install_edited) tem/trumpet-tem.sysusers '$(sysusersdir)' \
	    trumpet-tem.conf
	@if test -f '$(DESTDIR)$(sysconfdir)/trumpet/trumpet-tem.conf'; then \
	    echo "keeping $(DESTDIR)$(sysconfdir)/trumpet/trumpet-tem.conf"; \
	else \
	    $(install_edited) tem/trumpet-tem.conf.in \
	        '$(sysconfdir)/trumpet' trumpet-tem.conf; \
	fi
uninstall-local: uninstall-tem-service
uninstall-tem-service:
	rm -f '$(DESTDIR)$(systemdsystemunitdir)/trumpet-tem.service' \
	    '$(DESTDIR)$(sysusersdir)/trumpet-tem.conf' \
	    '$(DESTDIR)$(sysconfdir)/trumpet/trumpet-tem.conf'
