#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The Debian packages, built with "make deb" and installed into a root of
# their own (dpkg --root, maintainer scripts run as on a host, on that
# root), never into this machine:
#
#   1. trumpet-tem and openvswitch-switch-trumpet are built; the switch
#      depends on an openvswitch-switch of its Open vSwitch release.
#   2. Installed beside openvswitch-switch (a stand-in of Debian's package:
#      its files here are a stub, its postinst registers the stock
#      ovs-vswitchd alternative, priority 100, exactly as Debian's does):
#      every file in place, the configuration a conffile, the user trumpet
#      created, the unit enabled and valid (systemd-analyze verify, with
#      its man pages found; ExecReload sends SIGHUP), the postinst's key
#      pair (owner trumpet, 0600, its public half 0644) and allow-list
#      (root:trumpet 0640, no host allowed).
#   3. The alternative: ovs-vswitchd is the patched switch (auto, 200 over
#      100), update-alternatives --set gives the stock one back, --auto
#      the monitor again, and removing the package returns to the stock
#      switch.
#   4. The installed programs run: ovs-vswitchd-trumpet is Open vSwitch of
#      that release with DPDK, the monitor's commands and knobs (each one
#      in its man page), Debian's directories; every option of
#      trumpet-tem, tem-ctl and tpm-replay is in its man page, and the
#      pages have no groff warning; tpm-replay's reports match the ground
#      truth of generated captures (tests/e2e-replay.sh); the TEM started
#      as the user trumpet with the options of the installed configuration
#      (the postinst's key pair and allow-list) and the unit's umask
#      answers tem-ctl on a group-writable socket, refuses a host that the
#      allow-list lacks, takes it once its key is added and the unit's
#      ExecReload run, raises the expected alerts from that tpm-replay
#      host (--tem-key, --host-key-file), keeps its key, allow-list and
#      events across a reinstall (the postinst again) and a restart.
#   5. Purge removes the package's files, configuration, keys and
#      allow-list.
#
# Without the Open vSwitch source only trumpet-tem is built and checked.
# Needs root (dpkg); the machine is left as it was (checked: dpkg's and
# update-alternatives' logs and databases, the user, the unit's links).
# Automake test protocol: 0 pass, 1 fail, 77 skip.
set -euo pipefail

: "${top_srcdir:?}" "${top_builddir:?}"
top_srcdir=$(cd "$top_srcdir" && pwd)
PY=${PYTHON3:-python3}

if [ "$(id -u)" != 0 ]; then
    echo "SKIP: installing packages into a root needs root"
    exit 77
fi
for tool in dpkg-buildpackage dh systemd-analyze systemd-sysusers man \
            setpriv; do
    command -v $tool >/dev/null || {
        echo "SKIP: $tool missing (tests/bootstrap.sh installs it)"
        exit 77
    }
done
have_ovs=false
if [ -n "${OVS_SOURCE:-}" ] && [ -e "$OVS_SOURCE" ]; then
    have_ovs=true
fi

# What this test could change on the machine, and must not: its packages
# in dpkg's database and log, the alternative, the user, the unit's links
# (other engineers' apt runs meanwhile do not count).
logs="/var/log/dpkg.log /var/log/alternatives.log"
log_sizes=$(for f in $logs; do stat -c %s "$f" 2>/dev/null || echo 0; done)
host_state() {
    local f size
    set -- $log_sizes
    for f in $logs; do
        size=$1
        shift
        tail -c +$((size + 1)) "$f" 2>/dev/null |
            grep -E 'trumpet|openvswitch-switch|dpdk' || true
    done
    grep -E '^Package: (trumpet-tem|openvswitch-switch(-trumpet)?|dpdk)$' \
        /var/lib/dpkg/status || true
    readlink /etc/alternatives/ovs-vswitchd || true
    grep '^trumpet:' /etc/passwd /etc/group || true
    ls /etc/systemd/system/*/trumpet-tem.service 2>/dev/null || true
}
state_before=$(host_state)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/deb-packages.XXXXXX")
root=$tmp/root
pids=()
cleanup() {
    local rc=$? p
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null || true
    done
    for p in "${pids[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    if [ $rc != 0 ]; then
        for f in "$tmp"/tem*.log; do
            [ -s "$f" ] && { echo "--- $f:"; tail -n 20 "$f"; }
        done
    fi
    rm -rf "$tmp"
    if [ "$(host_state)" != "$state_before" ]; then
        echo "FAIL: the machine's dpkg, alternatives, users or units changed:"
        diff <(echo "$state_before") <(host_state) || true
        rc=1
    fi
    exit $rc
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*"
    exit 1
}

# --- 1. Build ------------------------------------------------------------
t0=$(date +%s)
make -C "$top_builddir" deb >"$tmp/deb.log" 2>&1 || {
    tail -n 40 "$tmp/deb.log"
    fail "make deb"
}
version=$(dpkg-parsechangelog -l "$top_srcdir/ovs-patches/debian/changelog" \
              -S Version)
arch=$(dpkg --print-architecture)
tem_deb=$top_builddir/deb/trumpet-tem_${version}_$arch.deb
sw_deb=$top_builddir/deb/openvswitch-switch-trumpet_${version}_$arch.deb
[ -f "$tem_deb" ] || fail "no $tem_deb"
debs=$tem_deb
if $have_ovs; then
    [ -f "$sw_deb" ] || fail "no $sw_deb"
    debs="$debs $sw_deb"
    # The switch is of the release of openvswitch-source, whose Debian
    # version is that of the openvswitch-switch it replaces.
    ovs_deb_version=$(dpkg-query -W -f='${Version}' openvswitch-source)
    deps=$(dpkg-deb -f "$sw_deb" Depends)
    for rel in $(echo "$deps" | tr ',' '\n' |
                 sed -n 's/^ *openvswitch-switch (\(.*\) \(.*\))$/\1:\2/p'); do
        dpkg --compare-versions "$ovs_deb_version" "${rel%%:*}" "${rel#*:}" \
            || fail "openvswitch-switch $ovs_deb_version does not satisfy" \
                    "'${rel%%:*} ${rel#*:}' (Depends: $deps)"
    done
    grep -q 'openvswitch-switch (<<' <<<"$deps" \
        || fail "no upper bound on openvswitch-switch in Depends: $deps"
    grep -Eq '(^|, )dpdk(,|$)' <<<"$deps" || fail "no dpdk in Depends: $deps"
fi
echo "PASS: make deb built $(echo $debs | wc -w) packages in" \
     "$(( $(date +%s) - t0 ))s"

# --- 2. Install into a root ------------------------------------------------
# dpkg runs the maintainer scripts on this machine with DPKG_ROOT=$root
# (--force-script-chrootless): update-alternatives, systemd-sysusers and
# deb-systemd-helper act on the root.  policy-rc.d forbids starting
# services; where systemd runs, /run/systemd is hidden from the scripts
# (so that they do not reload or start anything on the machine).
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" \
    "$root/var/lib/dpkg/triggers" "$root/var/lib/dpkg/alternatives" \
    "$root/etc/alternatives" "$root/var/log" "$root/usr/sbin" \
    "$root/usr/lib/systemd/system"
: >"$root/var/lib/dpkg/status"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
rdpkg() {
    local cmd=(dpkg --root="$root" --log="$root/var/log/dpkg.log"
               --force-script-chrootless "$@")
    if [ -d /run/systemd/system ]; then
        unshare --mount --propagation private sh -c \
            'mount -t tmpfs none /run/systemd && exec "$@"' sh "${cmd[@]}"
    else
        "${cmd[@]}"
    fi
}
rquery() {
    dpkg-query --admindir="$root/var/lib/dpkg" "$@"
}

# The packages' dependencies are those of this machine (the libraries the
# build linked), recorded as installed in the root; openvswitch-switch and
# dpdk, which this machine lacks, are stand-ins built here.
stub() {                        # stub NAME VERSION [POSTINST PRERM]
    local d=$tmp/stub-$1
    mkdir -p "$d/DEBIAN"
    cat >"$d/DEBIAN/control" <<EOF
Package: $1
Version: $2
Architecture: $arch
Maintainer: Trumpet tests <eng@example.invalid>
Description: stand-in for the test of the Trumpet packages
EOF
    if [ -n "${3:-}" ]; then
        printf '#!/bin/sh\nset -e\n%s\n' "$3" >"$d/DEBIAN/postinst"
        printf '#!/bin/sh\nset -e\n%s\n' "$4" >"$d/DEBIAN/prerm"
        chmod 755 "$d/DEBIAN/postinst" "$d/DEBIAN/prerm"
    fi
    dpkg-deb -b --root-owner-group "$d" "$tmp/$1.deb" >/dev/null
}
stock=/usr/lib/openvswitch-switch/ovs-vswitchd
if $have_ovs; then
    mkdir -p "$tmp/stub-openvswitch-switch${stock%/*}"
    printf '#!/bin/sh\necho stock ovs-vswitchd\n' \
        >"$tmp/stub-openvswitch-switch$stock"
    chmod 755 "$tmp/stub-openvswitch-switch$stock"
    # As Debian's openvswitch-switch postinst and prerm.
    stub openvswitch-switch "$ovs_deb_version" \
        "[ \"\$1\" = configure ] && update-alternatives --install /usr/sbin/ovs-vswitchd ovs-vswitchd $stock 100; exit 0" \
        "[ \"\$1\" = remove ] && update-alternatives --remove ovs-vswitchd $stock; exit 0"
    stub dpdk "$(dpkg-query -W -f='${Version}' libdpdk-dev)"
fi
for deb in $debs; do
    dpkg-deb -f "$deb" Depends | tr ',|' '\n\n' | sed 's/(.*//; s/ //g'
done | sort -u | while read -r p; do
    case $p in
        openvswitch-switch|dpdk|'') ;;
        *)  if dpkg-query -s "$p" >"$tmp/stanza" 2>/dev/null; then
                cat "$tmp/stanza" >>"$root/var/lib/dpkg/status"
                echo >>"$root/var/lib/dpkg/status"
                : >"$root/var/lib/dpkg/info/$(dpkg-query -W \
                    -f='${binary:Package}' "$p").list"
            fi ;;
    esac
done
if $have_ovs; then
    rdpkg -i "$tmp/openvswitch-switch.deb" "$tmp/dpdk.deb" \
        >"$tmp/dpkg-stubs.log" 2>&1 || {
        cat "$tmp/dpkg-stubs.log"; fail "installing the stand-ins"; }
fi
# shellcheck disable=SC2086
rdpkg -i $debs >"$tmp/dpkg-install.log" 2>&1 || {
    cat "$tmp/dpkg-install.log"; fail "dpkg -i $debs (dependencies checked)"; }

for p in trumpet-tem $($have_ovs && echo openvswitch-switch-trumpet); do
    [ "$(rquery -W -f='${Status}' $p)" = "install ok installed" ] \
        || fail "$p is not installed: $(rquery -W -f='${Status}' $p)"
done
files="/usr/sbin/trumpet-tem /usr/bin/tem-ctl /usr/bin/tpm-replay
/etc/trumpet/trumpet-tem.conf /lib/systemd/system/trumpet-tem.service
/usr/lib/sysusers.d/trumpet-tem.conf /usr/share/man/man8/trumpet-tem.8.gz
/usr/share/man/man8/tem-ctl.8.gz /usr/share/man/man1/tpm-replay.1.gz
/usr/share/doc/trumpet-tem/copyright /usr/share/doc/trumpet-tem/tem.md.gz
/usr/share/doc/trumpet-tem/operations.md.gz
/usr/share/doc/trumpet-tem/event-language.md.gz"
sw=/usr/lib/openvswitch-switch-trumpet/ovs-vswitchd-trumpet
if $have_ovs; then
    files="$files $sw /usr/share/man/man8/ovs-vswitchd-trumpet.8.gz
/usr/share/doc/openvswitch-switch-trumpet/README.Debian"
fi
for f in $files; do
    [ -f "$root$f" ] || fail "$f not installed"
done
for f in /usr/sbin/trumpet-tem /usr/bin/tem-ctl /usr/bin/tpm-replay \
         $($have_ovs && echo $sw); do
    [ -x "$root$f" ] || fail "$f not executable"
done
grep -q '^ /etc/trumpet/trumpet-tem.conf ' \
    <<<"$(rquery -W -f='${Conffiles}\n' trumpet-tem)" \
    || fail "/etc/trumpet/trumpet-tem.conf is not a conffile"
grep -Eq '^trumpet:x:[0-9]+:[0-9]+:[^:]*:/var/lib/trumpet:/usr/sbin/nologin$' \
    "$root/etc/passwd" \
    || fail "no system user trumpet in the root: $(cat "$root/etc/passwd" 2>&1)"
grep -q '^trumpet:' "$root/etc/group" || fail "no group trumpet"
uid=$(awk -F: '$1 == "trumpet" { print $3 }' "$root/etc/passwd")
gid=$(awk -F: '$1 == "trumpet" { print $3 }' "$root/etc/group")
[ "$uid" -lt 1000 ] || fail "trumpet has uid $uid, not a system uid"
# The postinst's files: the TEM's key pair, the service user's (the user
# of the root's passwd and group files), and an allow-list that allows no
# host, which the service reads through its group.
etc=$root/etc/trumpet
while read -r f owner mode; do
    [ -f "$etc/$f" ] && [ ! -L "$etc/$f" ] \
        || fail "the postinst made no /etc/trumpet/$f"
    [ "$(stat -c '%u:%g %a' "$etc/$f")" = "$owner $mode" ] \
        || fail "/etc/trumpet/$f is $(stat -c '%u:%g %a' "$etc/$f")," \
                "not $owner $mode"
done <<EOF
tem.key $uid:$gid 600
tem.key.pub $uid:$gid 644
tem-allow 0:$gid 640
EOF
key_of() { sed -n 's/^public-key = "\(.*\)"$/\1/p' "$1"; }
tem_pub=$(key_of "$etc/tem.key.pub")
[ ${#tem_pub} = 40 ] && [ "$(key_of "$etc/tem.key")" = "$tem_pub" ] \
    && grep -q '^secret-key = ".\{40\}"$' "$etc/tem.key" \
    || fail "the postinst's key pair: $(cat "$etc/tem.key.pub")"
! grep -v '^#' "$etc/tem-allow" | grep -q '[^[:space:]]' \
    || fail "the postinst's allow-list allows keys: $(cat "$etc/tem-allow")"
# keys_state: what a configure run must keep.
keys_state() {
    (cd "$etc" && sha256sum tem.key tem.key.pub tem-allow &&
     stat -c '%n %u:%g %a' tem.key tem.key.pub tem-allow)
}
wants=$root/etc/systemd/system/multi-user.target.wants/trumpet-tem.service
[ "$(readlink "$wants")" = /lib/systemd/system/trumpet-tem.service ] \
    || fail "trumpet-tem.service not enabled: $(ls -l "$wants" 2>&1)"
# The unit in the root: its targets from this machine's systemd, the kill
# of its ExecReload from this machine's procps, its man pages from the
# root.
cp /usr/lib/systemd/system/*.target "$root/usr/lib/systemd/system/"
mkdir -p "$root/bin"
cp /bin/kill "$root/bin/kill"
MANPATH=$root/usr/share/man systemd-analyze verify --root="$root" \
    /lib/systemd/system/trumpet-tem.service >"$tmp/verify.log" 2>&1 \
    || { cat "$tmp/verify.log"; fail "systemd-analyze verify"; }
[ ! -s "$tmp/verify.log" ] \
    || { cat "$tmp/verify.log"; fail "systemd-analyze verify warns"; }
unit=$root/lib/systemd/system/trumpet-tem.service
for want in 'User=trumpet' 'StateDirectory=trumpet' 'RuntimeDirectory=trumpet' \
            'MemoryMax=4G' \
            'EnvironmentFile=/etc/trumpet/trumpet-tem.conf' \
            'ExecStart=/usr/sbin/trumpet-tem $TEM_OPTIONS' \
            'ExecReload=/bin/kill -HUP $MAINPID' 'ProtectSystem=strict' \
            'ConfigurationDirectory=trumpet$' \
            'NoNewPrivileges=yes' 'CapabilityBoundingSet=$'; do
    grep -q "^$want" "$unit" || fail "the unit lacks $want"
done
echo "PASS: installed$($have_ovs && echo " beside openvswitch-switch"):" \
     "files, conffile, user trumpet (uid $uid), unit enabled and verified;" \
     "the TEM's key pair (trumpet, 0600, .pub 0644), an allow-list of no" \
     "host (root:trumpet 0640)"

# --- 3. The alternative ------------------------------------------------------
# alt_value: what /usr/sbin/ovs-vswitchd of the root resolves to (its
# links are absolute, for the root).
alt_value() {
    local l1 l2
    l1=$(readlink "$root/usr/sbin/ovs-vswitchd") || return 0
    [ "$l1" = /etc/alternatives/ovs-vswitchd ] || { echo "bad:$l1"; return; }
    l2=$(readlink "$root/etc/alternatives/ovs-vswitchd") || return 0
    echo "$l2"
}
alt_query() {
    update-alternatives --root "$root" --query ovs-vswitchd \
        | sed -n "s/^$1: //p"
}
if $have_ovs; then
    [ "$(alt_value)" = $sw ] && [ "$(alt_query Value)" = $sw ] \
        && [ "$(alt_query Status)" = auto ] \
        || fail "ovs-vswitchd is $(alt_value) ($(alt_query Status)), not $sw"
    prios=$(update-alternatives --root "$root" --query ovs-vswitchd |
            awk '/^Alternative:/ { a = $2 } /^Priority:/ { print a, $2 }' |
            sort)
    [ "$prios" = "$(printf '%s 100\n%s 200\n' $stock $sw | sort)" ] \
        || fail "alternatives and priorities: $prios"
    # What openvswitch-switch would start (ovs-ctl runs the link, so the
    # program is named ovs-vswitchd, as its pidfile and control socket).
    (exec -a /usr/sbin/ovs-vswitchd "$root$(alt_value)" --version) \
        >"$tmp/version" 2>&1 \
        || fail "$(alt_value) --version: $(cat "$tmp/version")"
    (exec -a /usr/sbin/ovs-vswitchd "$root$(alt_value)" --help) \
        >"$tmp/help" 2>&1 || true
    update-alternatives --root "$root" --set ovs-vswitchd $stock >/dev/null
    [ "$(alt_value)" = $stock ] && [ "$(alt_query Status)" = manual ] \
        && [ "$("$root$(alt_value)")" = "stock ovs-vswitchd" ] \
        || fail "--set: ovs-vswitchd is $(alt_value), not $stock"
    update-alternatives --root "$root" --auto ovs-vswitchd >/dev/null
    [ "$(alt_value)" = $sw ] || fail "--auto: ovs-vswitchd is $(alt_value)"
    echo "PASS: alternative ovs-vswitchd: $sw (auto, 200 over the stock 100)," \
         "--set gives the stock switch back, --auto the monitor"
fi

# --- 4. The installed programs -------------------------------------------------
# man_text PAGE: the page as text, groff warnings in $tmp/man.err.
man_text() {
    zcat "$root/usr/share/man/$1" >"$tmp/page"
    LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 \
        "$tmp/page" 2>"$tmp/man.err" | col -b
}
# check_options PROGRAM PAGE: every option of PROGRAM --help is in PAGE,
# and every option of PAGE's OPTIONS section is one of PROGRAM's.
check_options() {
    local prog=$1 page=$2 text opts doc o
    text=$(man_text "$page")
    [ ! -s "$tmp/man.err" ] || fail "$page: groff warns: $(cat "$tmp/man.err")"
    opts=$( { "$root$prog" --help; echo --help; } | grep -oE -- '--[a-z][a-z-]+' |
          sort -u)
    [ -n "$opts" ] || fail "$prog --help lists no option"
    for o in $opts; do
        grep -qE -- "(^|[^a-z-])$o([^a-z-]|$)" <<<"$text" \
            || fail "$page does not document $o"
    done
    doc=$(echo "$text" | sed -n '/^OPTIONS/,/^[A-Z][A-Z ]*$/p' |
          grep -oE -- '--[a-z][a-z-]+' | sort -u)
    for o in $doc; do
        grep -qx -- "$o" <<<"$opts" \
            || fail "$page documents $o, which $prog does not take"
    done
}
check_options /usr/sbin/trumpet-tem man8/trumpet-tem.8.gz
check_options /usr/bin/tem-ctl man8/tem-ctl.8.gz
check_options /usr/bin/tpm-replay man1/tpm-replay.1.gz
if $have_ovs; then
    text=$(man_text man8/ovs-vswitchd-trumpet.8.gz)
    [ ! -s "$tmp/man.err" ] || fail "ovs-vswitchd-trumpet.8: groff warns"
    grep -q "^ovs-vswitchd (Open vSwitch) $(sed -n \
        's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$top_builddir/ovs/config.h")$" \
        "$tmp/version" && grep -q '^DPDK ' "$tmp/version" \
        || fail "ovs-vswitchd-trumpet --version: $(cat "$tmp/version")"
    grep -q 'unix:/var/run/openvswitch/db.sock' "$tmp/help" \
        && grep -q '/var/run/openvswitch/ovs-vswitchd.pid' "$tmp/help" \
        && grep -q '/var/log/openvswitch/ovs-vswitchd.log' "$tmp/help" \
        || fail "ovs-vswitchd-trumpet does not use Debian's directories:" \
                "$(grep -i default "$tmp/help")"
    # The monitor's knobs and commands are the binary's own strings.
    knobs=$(strings "$root$sw" | grep -E '^tpm-[a-z-]+$' | sort -u)
    cmds=$(strings "$root$sw" | grep -E '^tpm/[a-z-]+$' | sort -u)
    [ "$(echo "$knobs" | wc -l)" -ge 20 ] && [ "$(echo "$cmds" | wc -l)" -ge 10 ] \
        || fail "not the patched switch: knobs '$knobs', commands '$cmds'"
    for k in $knobs $cmds; do
        grep -qE -- "(^|[^a-z-])$k([^a-z-]|$)" <<<"$text" \
            || fail "ovs-vswitchd-trumpet.8 lacks $k"
    done
    # (The synopsis names them in general: tpm/command, tpm-key.)
    for k in $(sed '/^SYNOPSIS/,/^DESCRIPTION/d' <<<"$text" |
               grep -oE '(tpm-[a-z]+(-[a-z]+)*|tpm/[a-z-]+)' |
               grep -vx tpm-replay | sort -u); do
        grep -qx -- "$k" <<<"$knobs"$'\n'"$cmds" \
            || fail "ovs-vswitchd-trumpet.8 documents $k, which the switch lacks"
    done
    echo "PASS: ovs-vswitchd-trumpet: $(head -n 1 "$tmp/version"), $(sed -n 2p \
        "$tmp/version"), Debian's directories, $(echo $knobs | wc -w) knobs" \
        "and $(echo $cmds | wc -w) commands, each in its man page"
fi
echo "PASS: every option of trumpet-tem, tem-ctl and tpm-replay in its man" \
     "page, no groff warning"

# tpm-replay against ground truth.
TPM_REPLAY=$root/usr/bin/tpm-replay E2E_SEEDS=1 E2E_SCENARIOS="agg table2 tcp" \
    bash "$top_srcdir/tests/e2e-replay.sh" >"$tmp/e2e.log" 2>&1 \
    || { cat "$tmp/e2e.log"; fail "the installed tpm-replay (e2e-replay.sh)"; }
echo "PASS: the installed tpm-replay: $(grep -c '^PASS' "$tmp/e2e.log") checks" \
     "of tests/e2e-replay.sh against ground truth"

# The TEM with the installed configuration's options, as the unit passes
# them (EnvironmentFile: TEM_OPTIONS, split on white space), its sockets
# and state moved into $tmp (later options win), its key pair and
# allow-list those the postinst made in the root, run as the unit runs it:
# as the user trumpet (its ids in the root), with the unit's umask.
# shellcheck disable=SC1090,SC1091
TEM_OPTIONS=$(. "$root/etc/trumpet/trumpet-tem.conf" && echo "$TEM_OPTIONS")
opt() { echo "$TEM_OPTIONS" | tr ' ' '\n' | sed -n "s|^--$1=||p"; }
[ "$(opt ctl)" = ipc:///run/trumpet/tem.ctl ] \
    || fail "the configuration's --ctl is $(opt ctl), not tem-ctl's default" \
            "in the unit's RuntimeDirectory"
case $(opt state-file) in
    /var/lib/trumpet/*) ;;
    *) fail "the configuration's --state-file $(opt state-file) is not in" \
            "the unit's StateDirectory" ;;
esac
[ "$(opt key-file)" = /etc/trumpet/tem.key ] \
    && [ "$(opt allow-file)" = /etc/trumpet/tem-allow ] \
    || fail "the configuration's --key-file $(opt key-file) and" \
            "--allow-file $(opt allow-file) are not the postinst's files"
! grep -q -- '--insecure' <<<"$TEM_OPTIONS" \
    || fail "the configuration runs the TEM without keys: $TEM_OPTIONS"
TEM=$root/usr/sbin/trumpet-tem
CTL=$root/usr/bin/tem-ctl
# The TEM's own directory (as StateDirectory and RuntimeDirectory), in
# $tmp, which the user trumpet may cross.
run=$tmp/run
chmod 711 "$tmp"
mkdir -m 750 "$run"
chown "$uid:$gid" "$run"
ctl() { "$CTL" --ctl="ipc://$run/tem.ctl" "$@"; }
umask=$(sed -n 's/^UMask=//p' "$unit")
start_tem() {
    # shellcheck disable=SC2086
    (umask "$umask"
     exec setpriv --reuid="$uid" --regid="$gid" --clear-groups -- \
        "$TEM" $TEM_OPTIONS --listen='tcp://127.0.0.1:*' \
        --pub='tcp://127.0.0.1:*' --ctl="ipc://$run/tem.ctl" \
        --state-file="$run/state/tem-events.json" \
        --key-file="$root$(opt key-file)" \
        --allow-file="$root$(opt allow-file)") \
        >>"$tmp/tem-alerts.json" 2>>"$tmp/tem.log" &
    tem_pid=$!
    pids+=($tem_pid)
    for _ in $(seq 100); do
        ctl --timeout=100ms status >/dev/null 2>&1 && return 0
        kill -0 $tem_pid 2>/dev/null || fail "the TEM exited at start"
    done
    fail "the TEM does not answer tem-ctl"
}
stop_tem() {
    kill $tem_pid
    wait $tem_pid || fail "the TEM exited with status $? on SIGTERM"
}
status_field() {
    ctl --json status | "$PY" -c "import json, sys
d = json.load(sys.stdin)
for k in '$1'.split('.'):
    d = d[k]
print(d)"
}
start_tem
# The group trumpet may use the control socket.
[ "$(stat -c '%A %g' "$run/tem.ctl")" = "srw-rw---- $gid" ] \
    || fail "control socket $(stat -c '%A %g' "$run/tem.ctl") under" \
            "UMask=$umask, not srw-rw---- of the group trumpet ($gid)"
[ "$(status_field epoch_ns)" = 10000000 ] \
    || fail "TEM epoch $(status_field epoch_ns) ns, the configuration's is 10ms"
[ "$(status_field security.mode)" = curve ] \
    && [ "$(status_field security.public_key)" = "$tem_pub" ] \
    && [ "$(status_field security.hosts_allowed)" = 0 ] \
    || fail "the TEM's keys: $(ctl --json status)"
out=$(ctl event-add pkg_sum filter=udp,nw_dst=10.99.0.2 \
          'predicate=sum(volume) > 40KB' group=nw_dst interval=100ms across=sum)
[ "$out" = "event pkg_sum added (id 1)" ] || fail "event-add: $out"
listen=$(status_field endpoints.listen)
# One host, 5 datagrams of 1000 bytes per 10 ms epoch: 50000 bytes per
# 100 ms interval, over the 40 KB threshold in each of 3 intervals.
"$PY" "$top_srcdir/tests/tem-trace.py" --out "$tmp/h.pcap" --epochs 30 \
    --per-epoch 5 --size 1000 --src 10.99.1.1 >/dev/null
# The test host: its key pair (the installed tem-ctl keygen) and the TEM's
# public key, as an operator copies it from the TEM's machine.
host_pub=$("$CTL" keygen "$tmp/host.key" 2>/dev/null)
host() {
    "$root/usr/bin/tpm-replay" --controller "$listen" --host-id pkg-host \
        --tem-key "$etc/tem.key.pub" --host-key-file "$tmp/host.key" \
        --prefix 10.99.0.0/24 --require-controller "$@"
}
# Not in the allow-list yet: refused.
if host --connect-timeout 1s "$tmp/h.pcap" >"$tmp/host.out" \
        2>"$tmp/tem-host.log"; then
    fail "a host that the allow-list lacks reached the TEM"
fi
[ "$(status_field security.zap_refused)" -ge 1 ] \
    || fail "the TEM counts no refused key: $(ctl --json status)"
# Allowed as the configuration says: a line in the allow-list and
# systemctl reload (the unit's ExecReload, $MAINPID the TEM).
echo "pkg-host $host_pub" >>"$etc/tem-allow"
reload=$(sed -n 's/^ExecReload=//p' "$unit")
${reload//\$MAINPID/$tem_pid}
for _ in $(seq 50); do
    [ "$(status_field security.allow_reloads)" = 1 ] && break
    sleep 0.1
done
[ "$(status_field security.allow_reloads)" = 1 ] \
    && [ "$(status_field security.hosts_allowed)" = 1 ] \
    || fail "ExecReload ($reload) did not reload the allow-list:" \
            "$(ctl --json status)"
start=$(( ($(date +%s%N) / 100000000 + 15) * 100000000 ))
host --realtime --start-at $start "$tmp/h.pcap" >"$tmp/host.out" \
    2>"$tmp/tem-host.log" \
    || fail "the tpm-replay host failed: $(cat "$tmp/tem-host.log")"
for _ in $(seq 50); do
    [ "$(status_field counters.alerts)" -ge 3 ] && break
    sleep 0.1
done
"$PY" - "$tmp/tem-alerts.json" <<'PYEOF' || fail "the TEM's alerts"
import json, sys
alerts = [json.loads(l) for l in open(sys.argv[1])]
if len(alerts) != 3 or len({a["epoch"] for a in alerts}) != 3:
    sys.exit("%d alerts, expected 3 in 3 intervals: %s" % (len(alerts), alerts))
for a in alerts:
    if (a["event"] != "pkg_sum" or a["value"] != 50000
            or a["hosts"] != {"pkg-host": 50000} or a["missing"]):
        sys.exit("alert %s" % json.dumps(a))
PYEOF
stop_tem
# The postinst again (a reinstall): the key pair and the allow-list, with
# its new line, are kept as they are.
keys_before=$(keys_state)
rdpkg -i "$tem_deb" >"$tmp/dpkg-reinstall.log" 2>&1 \
    || { cat "$tmp/dpkg-reinstall.log"; fail "dpkg -i $tem_deb again"; }
[ "$(keys_state)" = "$keys_before" ] \
    || fail "a second configure changed the keys or the allow-list:" \
            "$(diff <(echo "$keys_before") <(keys_state))"
start_tem
grep -q '^ *1 *pkg_sum ' <<<"$(ctl event-list)" \
    || fail "after a restart: $(ctl event-list)"
[ "$(status_field security.public_key)" = "$tem_pub" ] \
    && [ "$(status_field security.hosts_allowed)" = 1 ] \
    || fail "after a reinstall and a restart: $(ctl --json status)"
stop_tem
echo "PASS: the installed TEM as the user trumpet with the configuration's" \
     "options, the postinst's keys and the unit's umask: tem-ctl (socket" \
     "srw-rw----), a host refused until in the allow-list and the unit's" \
     "ExecReload run, then 3 alerts of 50000 on stdout; keys, allow-list" \
     "and events kept across a reinstall and a restart"

# --- 5. Remove and purge ---------------------------------------------------------
if $have_ovs; then
    rdpkg -r openvswitch-switch-trumpet >"$tmp/dpkg-remove.log" 2>&1 \
        || { cat "$tmp/dpkg-remove.log"; fail "dpkg -r openvswitch-switch-trumpet"; }
    [ ! -e "$root$sw" ] || fail "$sw left after removal"
    [ "$(alt_value)" = $stock ] && [ "$(alt_query Status)" = auto ] \
        || fail "after removal ovs-vswitchd is $(alt_value), not $stock"
fi
# A key the administrator provided beside the package's: purge keeps it,
# and the allow-list edited above (pkg-host), and removes the key pair the
# package made, unchanged.
"$CTL" keygen "$etc/admin.key" >/dev/null 2>&1
rdpkg -P trumpet-tem >"$tmp/dpkg-purge.log" 2>&1 \
    || { cat "$tmp/dpkg-purge.log"; fail "dpkg -P trumpet-tem"; }
for f in /usr/sbin/trumpet-tem /etc/trumpet/trumpet-tem.conf "${wants#$root}" \
         /etc/trumpet/tem.key /etc/trumpet/tem.key.pub \
         /var/lib/trumpet-tem; do
    [ ! -e "$root$f" ] && [ ! -L "$root$f" ] || fail "$f left after purge"
done
for f in admin.key admin.key.pub tem-allow; do
    [ -f "$etc/$f" ] || fail "purge removed /etc/trumpet/$f, not the package's"
done
grep -q '^pkg-host ' "$etc/tem-allow" \
    || fail "purge changed the edited allow-list"
grep -q 'keeping /etc/trumpet/tem-allow' "$tmp/dpkg-purge.log" \
    || fail "purge did not say it keeps the edited allow-list"
rm -f "$etc/admin.key" "$etc/admin.key.pub" "$etc/tem-allow"
rmdir "$etc"
$have_ovs && echo "PASS: removing the switch's package returns ovs-vswitchd" \
                  "to the stock switch"
echo "PASS: purge removes the TEM's files, configuration, the key pair" \
     "it made and unit link, and keeps the administrator's key and the" \
     "edited allow-list"
