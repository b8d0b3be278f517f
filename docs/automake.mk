# SPDX-License-Identifier: Apache-2.0
EXTRA_DIST += \
	docs/architecture.md \
	docs/benchmarks.md \
	docs/event-language.md \
	docs/fuzzing.md \
	docs/operations.md \
	docs/tem.md
