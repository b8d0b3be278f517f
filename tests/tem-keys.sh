# SPDX-License-Identifier: Apache-2.0
# Sourced by the TEM tests and the demo (POSIX sh): CURVE keys made with
# tem-ctl keygen ($CTL).
#
# tem_keys DIR HOST...: the TEM's key pair DIR/tem.key (public key in
# DIR/tem.key.pub), one key pair DIR/HOST.key per HOST, a control client's
# DIR/client.key, and the allow-list DIR/allow binding each HOST to its
# key ("HOST KEY") and the client ("client ctl KEY").
tem_keys() {
    local dir=$1 h
    shift
    mkdir -p "$dir"
    "$CTL" keygen "$dir/tem.key" >/dev/null 2>&1
    : >"$dir/allow"
    for h in "$@"; do
        echo "$h $("$CTL" keygen "$dir/$h.key" 2>/dev/null)" >>"$dir/allow"
    done
    echo "client ctl $("$CTL" keygen "$dir/client.key" 2>/dev/null)" \
        >>"$dir/allow"
}

