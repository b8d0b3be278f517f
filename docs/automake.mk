# SPDX-License-Identifier: Apache-2.0
EXTRA_DIST += \
	docs/architecture.md \
	docs/contributing.md \
	docs/benchmarks.md \
	docs/event-language.md \
	docs/operations.md \
	docs/tem.md
