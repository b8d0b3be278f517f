# SPDX-License-Identifier: Apache-2.0
# Stock Open vSwitch, the baseline of tpm/bench/bench-ovs.sh.
#
# "make ovs-stock" unpacks the same OVS_SOURCE as "make ovs" into
# ovs-stock/, with no patch and no glue, configures it exactly as "make
# ovs" does (OVS_CONFIGURE_ARGS, and the same CPPFLAGS and LIBS: the
# archives of libtpm are given to the linker, which pulls in nothing of
# them, and OVS links with --as-needed, so the shared libraries only the
# monitor uses are not loaded) and builds it:
# ovs-stock/vswitchd/ovs-vswitchd.  Both trees are built from one source
# with one compiler, the same configure arguments and flags; they differ
# only by the patch (the call sites) and the glue, so that a difference
# between the stock switch and the patched one without events is the
# monitor's, not the build's.
EXTRA_DIST += tpm/bench/bench-ovs.sh tpm/bench/bench-ovs.py

if HAVE_OVS_SOURCE
ovs-stock/.unpacked:
	rm -rf ovs-stock ovs-stock.tmp
	mkdir ovs-stock.tmp
	if test -d '$(OVS_SOURCE)'; then \
	    cp -a '$(OVS_SOURCE)/.' ovs-stock.tmp/; \
	else \
	    tar xzf '$(OVS_SOURCE)' -C ovs-stock.tmp --strip-components=1; \
	fi
	touch ovs-stock.tmp/.unpacked
	mv ovs-stock.tmp ovs-stock

# As ovs/.configure-args: configured again when the arguments change.
ovs-stock/.configure-args: ovs-stock/.unpacked FORCE
	@echo '$(OVS_CONFIGURE_ARGS) $(OVS_TPM_CPPFLAGS) $(OVS_TPM_LIBS)' \
	    > $@.tmp
	@if cmp -s $@.tmp $@; then rm $@.tmp; else mv $@.tmp $@; fi

ovs-stock/Makefile: ovs-stock/.configure-args
	$(MAKE) $(AM_MAKEFLAGS) $(BUILT_SOURCES)
	$(MAKE) $(AM_MAKEFLAGS) $(OVS_TPM_LTLIBS)
	cd ovs-stock && ./configure --quiet $(OVS_CONFIGURE_ARGS) \
	    CPPFLAGS='$(OVS_TPM_CPPFLAGS)' LIBS='$(OVS_TPM_LIBS)'

ovs-stock: ovs-stock/Makefile
	$(MAKE) -C ovs-stock
.PHONY: ovs-stock

clean-local: clean-ovs-stock
clean-ovs-stock:
	rm -rf ovs-stock ovs-stock.tmp
.PHONY: clean-ovs-stock
endif
