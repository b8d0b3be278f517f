# SPDX-License-Identifier: Apache-2.0
# Stock Open vSwitch, the baseline of tpm/bench/bench-ovs.sh.
#
# "make ovs-stock" unpacks the same OVS_SOURCE as "make ovs" into
# ovs-stock/, with no patch, no glue and no libtpm, configures it with the
# same DPDK flag (--with-dpdk=shared) and builds it:
# ovs-stock/vswitchd/ovs-vswitchd.  Both trees are thus built from one
# source with one compiler and one set of flags; they differ only by the
# monitor.
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

ovs-stock/Makefile: ovs-stock/.unpacked
	cd ovs-stock && ./configure --quiet --with-dpdk=shared

ovs-stock: ovs-stock/Makefile
	$(MAKE) -C ovs-stock
.PHONY: ovs-stock

clean-local: clean-ovs-stock
clean-ovs-stock:
	rm -rf ovs-stock ovs-stock.tmp
.PHONY: clean-ovs-stock
endif
