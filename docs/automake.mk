# SPDX-License-Identifier: Apache-2.0
EXTRA_DIST += \
	docs/architecture.md \
	docs/contributing.md \
	docs/benchmarks.md \
	docs/event-language.md \
	docs/fuzzing.md \
	docs/operations.md \
	docs/tem.md

# The operator's documents, installed in docdir; the man pages name them.
dist_doc_DATA = README.md docs/event-language.md docs/operations.md \
	docs/tem.md

# Man pages (mdoc), written at install time from docs/man/*.in with the
# directories of that install (install_edited in Makefile.am).  The page
# of the patched ovs-vswitchd is installed with it (ovs-patches/automake.mk).
EXTRA_DIST += docs/man/trumpet-tem.8.in docs/man/tem-ctl.8.in \
	docs/man/tpm-replay.1.in docs/man/ovs-vswitchd-trumpet.8.in
install-data-local: install-man-pages
install-man-pages:
	$(install_edited) docs/man/trumpet-tem.8.in '$(mandir)/man8' \
	    trumpet-tem.8
	$(install_edited) docs/man/tem-ctl.8.in '$(mandir)/man8' tem-ctl.8
	$(install_edited) docs/man/tpm-replay.1.in '$(mandir)/man1' \
	    tpm-replay.1
uninstall-local: uninstall-man-pages
uninstall-man-pages:
	rm -f '$(DESTDIR)$(mandir)/man8/trumpet-tem.8' \
	    '$(DESTDIR)$(mandir)/man8/tem-ctl.8' \
	    '$(DESTDIR)$(mandir)/man1/tpm-replay.1'
