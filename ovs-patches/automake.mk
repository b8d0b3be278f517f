# Open vSwitch with the Trumpet packet monitor.
#
# "make ovs" unpacks OVS_SOURCE (configure --with-ovs-source) into ovs/,
# applies the patch series of ovs-patches/series (call sites only, with
# --fuzz=0 so a patch that no longer fits fails loudly), links the glue
# (ovs-patches/tpm-ovs.[ch]) into its lib/, configures it with DPDK
# against libtpm, and builds it: ovs/vswitchd/ovs-vswitchd.
OVS_PATCHES = \
	ovs-patches/0001-dpif-netdev-call-the-Trumpet-packet-monitor.patch
EXTRA_DIST += ovs-patches/series $(OVS_PATCHES) \
	ovs-patches/tpm-ovs.c ovs-patches/tpm-ovs.h

OVS_TREE = $(abs_builddir)/ovs
OVS_TPM_LIBS = $(abs_builddir)/tpm/.libs/libtpm.a \
	$(abs_builddir)/lib/.libs/libtpmcommon.a -lm

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
	ln -sf $(abs_top_srcdir)/ovs-patches/tpm-ovs.c ovs.tmp/lib/tpm-ovs.c
	ln -sf $(abs_top_srcdir)/ovs-patches/tpm-ovs.h ovs.tmp/lib/tpm-ovs.h
	touch ovs.tmp/.patched
	mv ovs.tmp ovs

ovs/Makefile: ovs/.patched
	cd ovs && ./configure --quiet --with-dpdk=shared \
	    CPPFLAGS='-I$(abs_top_srcdir)/lib -I$(abs_top_srcdir)/tpm' \
	    LIBS='$(OVS_TPM_LIBS)'

# OVS's makefiles do not know our archives: relink when they change.
ovs/.tpm-libs: tpm/libtpm.la lib/libtpmcommon.la ovs/Makefile
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
