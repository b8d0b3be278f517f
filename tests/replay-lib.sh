# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# What the offline replay tests (e2e-replay.sh, replay-sizing.sh,
# replay-overlay.sh) share: the environment, the python3 and tpm-replay
# checks, the work directory and the failure count.  Sourced after
# "set -euo pipefail".
#
#   replay_test_init NAME KEEP   sets top_srcdir, top_builddir, PYTHON3,
#                                replay (TPM_REPLAY or the built tool) and
#                                tmp (a new directory tpm-NAME.XXXXXX,
#                                removed on exit unless KEEP is 1); skips
#                                (77) without python3, fails without the
#                                tool
#   fail MESSAGE...              prints a failure and counts it in
#                                $failures

replay_test_init() {
    local name=$1 keep=$2
    PYTHON3=${PYTHON3:-python3}
    if ! command -v "$PYTHON3" >/dev/null 2>&1; then
        echo "SKIP: python3 not found (PYTHON3=$PYTHON3)"
        exit 77
    fi
    replay=${TPM_REPLAY:-$top_builddir/tpm/tpm-replay}
    if [ ! -x "$replay" ]; then
        echo "FAIL: $replay not built"
        exit 1
    fi
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/tpm-$name.XXXXXX")
    if [ "$keep" = 1 ]; then
        echo "keeping $tmp"
    else
        # shellcheck disable=SC2064
        trap "rm -rf '$tmp'" EXIT
    fi
    failures=0
}

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}
