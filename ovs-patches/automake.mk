# SPDX-License-Identifier: Apache-2.0
# Open vSwitch with the Trumpet packet monitor.
#
# "make ovs" unpacks OVS_SOURCE (configure --with-ovs-source) into ovs/,
# applies the patch series of ovs-patches/series (call sites only, with
# --fuzz=0 so a patch that no longer fits fails loudly), links the glue
# (ovs-patches/tpm-ovs*.[ch]) into its lib/, configures it with DPDK
# against libtpm and libtproto (the host agent that talks to the TEM), and
# builds it: ovs/vswitchd/ovs-vswitchd.
#
# It is configured with the directories of Debian's Open vSwitch packages
# (prefix /usr, state in /var, configuration in /etc), whatever our own
# prefix: the patched ovs-vswitchd replaces Debian's (the package
# openvswitch-switch-trumpet, "make install" puts it in ovsvswitchddir) and
# must find the same database socket, run directory and logs as the
# ovsdb-server and ovs-ctl it runs with.  The tests give every daemon
# private directories (OVS_RUNDIR...), so the built-in ones do not matter
# to them.
OVS_PATCHES = \
	ovs-patches/0001-dpif-netdev-call-the-Trumpet-packet-monitor.patch
# The glue, linked into OVS's lib/ (tpm-ovs-private.h says which file
# does what).
OVS_GLUE = tpm-ovs.c tpm-ovs.h tpm-ovs-private.h tpm-ovs-agent.c \
	tpm-ovs-base.c tpm-ovs-dos.c tpm-ovs-event.c tpm-ovs-ports.c \
	tpm-ovs-request.c tpm-ovs-stats.c
EXTRA_DIST += ovs-patches/series $(OVS_PATCHES) \
	ovs-patches/tpm-ovs.c ovs-patches/tpm-ovs.h \
	ovs-patches/tpm-ovs-private.h ovs-patches/tpm-ovs-agent.c \
	ovs-patches/tpm-ovs-base.c ovs-patches/tpm-ovs-dos.c \
	ovs-patches/tpm-ovs-event.c ovs-patches/tpm-ovs-ports.c \
	ovs-patches/tpm-ovs-request.c \
	ovs-patches/tpm-ovs-stats.c

OVS_TREE = $(abs_builddir)/ovs
OVS_TPM_LIBS = $(abs_builddir)/tpm/.libs/libtpm.a \
	$(abs_builddir)/lib/.libs/libtproto.a \
	$(abs_builddir)/lib/.libs/libtpmcommon.a \
	$(ZMQ_LIBS) $(PROTOBUF_C_LIBS) -lpthread -lm
OVS_TPM_CPPFLAGS = -I$(abs_top_srcdir)/lib -I$(abs_top_srcdir)/tpm \
	-I$(abs_builddir)/proto $(ZMQ_CFLAGS) $(PROTOBUF_C_CFLAGS)
OVS_TPM_LTLIBS = tpm/libtpm.la lib/libtproto.la lib/libtpmcommon.la

# "make install" puts the patched switch beside the stock one, never over
# it: ovsvswitchddir/ovs-vswitchd-trumpet (configure
# --with-ovs-vswitchd-dir), with its man page; without the OVS source,
# nothing.  The Debian package openvswitch-switch-trumpet makes it the
# alternative for ovs-vswitchd.
install-exec-local: install-ovs-vswitchd
install-data-local: install-ovs-vswitchd-man
uninstall-local: uninstall-ovs-vswitchd
if HAVE_OVS_SOURCE
install-ovs-vswitchd: ovs
	$(MKDIR_P) '$(DESTDIR)$(ovsvswitchddir)'
	$(INSTALL_PROGRAM) ovs/vswitchd/ovs-vswitchd \
	    '$(DESTDIR)$(ovsvswitchddir)/ovs-vswitchd-trumpet'
install-ovs-vswitchd-man:
	$(install_edited) docs/man/ovs-vswitchd-trumpet.8.in '$(mandir)/man8' \
	    ovs-vswitchd-trumpet.8
uninstall-ovs-vswitchd:
	rm -f '$(DESTDIR)$(ovsvswitchddir)/ovs-vswitchd-trumpet' \
	    '$(DESTDIR)$(mandir)/man8/ovs-vswitchd-trumpet.8'
else
install-ovs-vswitchd:
install-ovs-vswitchd-man:
uninstall-ovs-vswitchd:
endif

if HAVE_OVS_SOURCE
ovs/.patched: $(srcdir)/ovs-patches/series $(OVS_PATCHES)
	rm -rf ovs ovs.tmp
	mkdir ovs.tmp
	if test -d '$(OVS_SOURCE)'; then \
	    cp -a '$(OVS_SOURCE)/.' ovs.tmp/; \
	else \
	    tar xzf '$(OVS_SOURCE)' -C ovs.tmp --strip-components=1; \
	fi
	for p in `cat $(srcdir)/ovs-patches/series`; do \
	    echo "applying $$p"; \
	    patch -d ovs.tmp -p1 --fuzz=0 --no-backup-if-mismatch -s \
	        < $(srcdir)/ovs-patches/$$p || exit 1; \
	done
	for f in $(OVS_GLUE); do \
	    ln -sf $(abs_top_srcdir)/ovs-patches/$$f ovs.tmp/lib/$$f; \
	done
	touch ovs.tmp/.patched
	mv ovs.tmp ovs

OVS_CONFIGURE_ARGS = --with-dpdk=shared --prefix=/usr --localstatedir=/var \
	--sysconfdir=/etc

# The options OVS was configured with: rewritten only when they change, so
# that a tree configured with other options is configured again.
ovs/.configure-args: ovs/.patched FORCE
	@echo '$(OVS_CONFIGURE_ARGS)' > $@.tmp
	@if cmp -s $@.tmp $@; then rm $@.tmp; else mv $@.tmp $@; fi
FORCE:
.PHONY: FORCE

# configure links its test programs with LIBS: the archives (and the
# generated protocol header) must exist first, but rebuilding them later
# must not reconfigure OVS.
ovs/Makefile: ovs/.configure-args
	$(MAKE) $(AM_MAKEFLAGS) $(BUILT_SOURCES)
	$(MAKE) $(AM_MAKEFLAGS) $(OVS_TPM_LTLIBS)
	cd ovs && ./configure --quiet $(OVS_CONFIGURE_ARGS) \
	    CPPFLAGS='$(OVS_TPM_CPPFLAGS)' LIBS='$(OVS_TPM_LIBS)'

# OVS's makefiles do not know our archives: relink when they change.
ovs/.tpm-libs: $(OVS_TPM_LTLIBS) ovs/Makefile
	rm -f ovs/vswitchd/ovs-vswitchd
	touch $@

ovs: ovs/.tpm-libs
	$(MAKE) -C ovs
.PHONY: ovs

clean-local: clean-ovs
clean-ovs:
	rm -rf ovs ovs.tmp
.PHONY: clean-ovs
endif
