# SPDX-License-Identifier: Apache-2.0
# Debian packages: "make deb" builds trumpet-tem (the TEM, tem-ctl,
# tpm-replay) and openvswitch-switch-trumpet (the patched ovs-vswitchd, an
# alternative for ovs-vswitchd) into deb/ of the build tree, with Debian's
# tools (dpkg-buildpackage, debhelper).
#
# The packaging (ovs-patches/debian/) is made for this build tree, not for
# a fresh build: the tree is built first (with Open vSwitch and DPDK when
# the OVS source is there), then deb/trumpet-VERSION/ is assembled (the
# debian/ directory and the documents it installs) and
# dpkg-buildpackage -b runs there; its debian/rules only installs this
# tree with Debian's directories (make install DESTDIR=...), so nothing is
# compiled twice.  Without the OVS source, only trumpet-tem is built
# (build profile pkg.trumpet.noovs).
DEB_FILES = \
	ovs-patches/debian/changelog \
	ovs-patches/debian/control \
	ovs-patches/debian/copyright \
	ovs-patches/debian/openvswitch-switch-trumpet.README.Debian \
	ovs-patches/debian/openvswitch-switch-trumpet.alternatives \
	ovs-patches/debian/openvswitch-switch-trumpet.install \
	ovs-patches/debian/rules \
	ovs-patches/debian/source/format \
	ovs-patches/debian/trumpet-tem.install \
	ovs-patches/debian/trumpet-tem.postinst \
	ovs-patches/debian/trumpet-tem.postrm
EXTRA_DIST += $(DEB_FILES)

DEB_TREE = deb/trumpet-$(PACKAGE_VERSION)
if HAVE_OVS_SOURCE
DEB_OVS_TARGET = ovs
DEB_PROFILES =
else
DEB_OVS_TARGET =
DEB_PROFILES = pkg.trumpet.noovs
endif

# (deb/ is a directory: the target is remade every time, through a
# prerequisite that never exists.)
deb: $(DEB_FILES:%=$(srcdir)/%) deb-always
deb-always:
	@v=`dpkg-parsechangelog -l '$(srcdir)/ovs-patches/debian/changelog' \
	        -S Version`; \
	if test "$$v" != '$(PACKAGE_VERSION)'; then \
	    echo "ovs-patches/debian/changelog: version $$v, but configure.ac" \
	         "says $(PACKAGE_VERSION): add a changelog entry" >&2; \
	    exit 1; \
	fi
	$(MAKE) $(AM_MAKEFLAGS) all
	test -z '$(DEB_OVS_TARGET)' || $(MAKE) $(AM_MAKEFLAGS) $(DEB_OVS_TARGET)
	rm -rf deb
	$(MKDIR_P) $(DEB_TREE)
	cp -R '$(srcdir)/ovs-patches/debian' $(DEB_TREE)/debian
	cd $(DEB_TREE) && TRUMPET_BUILDDIR='$(abs_builddir)' \
	    DEB_BUILD_PROFILES='$(DEB_PROFILES)' \
	    dpkg-buildpackage -b -nc --no-sign
	@echo "packages:"; ls deb/*.deb

mostlyclean-local: clean-deb
clean-deb:
	rm -rf deb
