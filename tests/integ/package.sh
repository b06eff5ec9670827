#!/bin/sh
# package.sh: what an operator installs (issue 20).  The dist tree (make
# distdir: every file the build needs is in it) builds the Debian package
# with dpkg-buildpackage, lintian finds no error in it, and installed on
# this host it creates the user, folders and keys, and its own
# configuration starts sluiced as that user; purged, it leaves nothing.
# make install puts the same files under a prefix.
#
#   deb_builds       dpkg-buildpackage -us -uc -b on the dist tree
#   deb_lintian      lintian --fail-on error
#   deb_contents     both programs, man pages, the configuration, policy,
#                    ruleset, unit and logrotate snippet; /etc files are
#                    conffiles
#   deb_installs     dpkg -i: the user sluice (system, no shell), the
#                    state, secret, audit and key folders with their owners
#                    and modes, the keys 0600
#   deb_check        sluiced --check of the installed configuration, as
#                    the user sluice
#   deb_runs         the installed sluiced on that configuration, as sluice,
#                    in a namespace with loopback only: it answers sluicectl,
#                    takes a secret sealed to the installed key, writes an
#                    audit trail that verifies with the installed key
#   deb_unit         the installed unit: systemd-analyze security <= 2.0
#   deb_purge        dpkg --purge removes programs, configuration, keys,
#                    state and audit; the user stays
#   make_install     make install DESTDIR: the same files, paths following
#                    the prefix; a second install keeps an edited
#                    configuration
# Output: "ok NAME" or "FAIL NAME: why" per check, then "N passed, N failed".

# shellcheck source=tests/integ/check.sh
. "$(dirname "$0")/check.sh"

check_needs dpkg-buildpackage dh lintian dpkg-deb runuser setpriv make jq
check_work package
WORLD_PIDS="" WORLD_CREATED=""
short() { printf "%s" "$1" | tr "\n" " " | head -c 600; }
NS=sluice-pkg-$$ INSTALLED=0

dpkg-query -W -f='${db:Status-Status}' sluice 2>/dev/null | grep -qx installed &&
    setup_fail "a sluice package is installed on this host; this test would replace it"
[ -e /run/sluice ] && setup_fail "/run/sluice exists: a sluiced runs here?"

cleanup_more() {
	[ -n "${PKG_PID:-}" ] && kill "$PKG_PID" 2>/dev/null
	ip netns del "$NS" 2>/dev/null
	[ "$INSTALLED" = 1 ] && dpkg --purge sluice >/dev/null 2>&1
	rm -rf /run/sluice
}

VER=$(sed -n 's/^PACKAGE_VERSION = //p' "$top_builddir/Makefile")
TREE=$WORK/src/sluice-$VER
mkdir -p "$WORK/src" && make -s -C "$top_builddir" distdir distdir="$TREE" >"$WORK/dist.log" 2>&1 ||
    setup_fail "make distdir: $(tail -3 "$WORK/dist.log" | tr '\n' ' ')"
DEB=$WORK/src/sluice_${VER}_$(dpkg --print-architecture).deb

deb_builds() {
	(cd "$TREE" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" \
	    dpkg-buildpackage -us -uc -b) >"$WORK/build.log" 2>&1 ||
	    { why="dpkg-buildpackage: $(grep -m3 -E 'error|Error' "$WORK/build.log" | tr '\n' ' ')"; return 1; }
	[ -f "$DEB" ] || { why="no $DEB"; return 1; }
}
deb_lintian() {
	out=$(lintian --fail-on error "$DEB" 2>&1) ||
	    { why="lintian: $(grep '^E:' <<<"$out" | short "$(cat)")"; return 1; }
}
deb_contents() {
	local f c
	c=$(dpkg-deb -c "$DEB" | awk '{print $6}' | sed 's|^\./|/|')
	for f in /usr/sbin/sluiced /usr/bin/sluicectl /etc/sluice/sluiced.yaml \
	    /etc/sluice/policy.d/default.yaml /etc/sluice/sluice.nft \
	    /lib/systemd/system/sluiced.service /etc/logrotate.d/sluice \
	    /usr/share/man/man8/sluiced.8.gz /usr/share/man/man8/sluicectl.8.gz \
	    /usr/share/man/man5/sluice-policy.5.gz /usr/share/man/man5/sluiced.yaml.5.gz \
	    /usr/share/doc/sluice/audit-format.md.gz /usr/share/doc/sluice/examples/sluice.rules.yml; do
		grep -qxF "$f" <<<"$c" || { why="the package lacks $f"; return 1; }
	done
	c=$(dpkg-deb -f "$DEB" Depends)
	grep -q adduser <<<"$c" && grep -q libssl3 <<<"$c" || { why="Depends: $c"; return 1; }
	c=$(dpkg-deb --info "$DEB" conffiles)
	for f in /etc/sluice/sluiced.yaml /etc/sluice/policy.d/default.yaml /etc/logrotate.d/sluice; do
		grep -qxF "$f" <<<"$c" || { why="$f is not a conffile: $(short "$c")"; return 1; }
	done
}
# mode_is PATH MODE OWNER
mode_is() {
	local m
	m=$(stat -c '%a %U' "$1" 2>/dev/null)
	[ "$m" = "$2 $3" ] || { why="$1: '$m', want '$2 $3'"; return 1; }
}
deb_installs() {
	local pw
	dpkg -i "$DEB" >"$WORK/install.log" 2>&1 ||
	    { why="dpkg -i: $(tail -3 "$WORK/install.log" | tr '\n' ' ')"; return 1; }
	INSTALLED=1
	pw=$(getent passwd sluice) || { why="no user sluice"; return 1; }
	[ "$(cut -d: -f3 <<<"$pw")" -lt 1000 ] && [ "$(cut -d: -f7 <<<"$pw")" = /usr/sbin/nologin ] ||
	    { why="user sluice: $pw"; return 1; }
	mode_is /var/lib/sluice 750 sluice && mode_is /var/lib/sluice/state 700 sluice &&
	mode_is /var/lib/sluice/secrets 700 sluice && mode_is /var/log/sluice 750 sluice &&
	mode_is /etc/sluice/keys 700 sluice && mode_is /etc/sluice/keys/gateway.key 600 sluice &&
	mode_is /etc/sluice/keys/signing.key 600 sluice && mode_is /etc/sluice/keys/gateway.pub 644 root
}
deb_check() {
	out=$(runuser -u sluice -- /usr/sbin/sluiced -c /etc/sluice/sluiced.yaml --check 2>&1) ||
	    { why="sluiced --check as sluice: $(short "$out")"; return 1; }
}
deb_runs() {
	local i v
	ip netns add "$NS" && ip -n "$NS" link set lo up || { why="cannot make the namespace"; return 1; }
	# what the unit's RuntimeDirectory= makes
	install -d -m 0755 -o sluice -g sluice /run/sluice
	printf 'pkg-secret' | sluicectl seal --pub /etc/sluice/keys/gateway.pub --name tok --secret-version 1 \
	    --host api.example.test >"$WORK/tok.sealed" 2>"$WORK/seal.log" &&
	    install -m 0600 -o sluice "$WORK/tok.sealed" /var/lib/sluice/secrets/tok.sealed ||
	    { why="sealing to the installed key: $(cat "$WORK/seal.log")"; return 1; }
	ip netns exec "$NS" setpriv --reuid=sluice --regid=sluice --init-groups -- \
	    /usr/sbin/sluiced -c /etc/sluice/sluiced.yaml >"$WORK/sluiced.log" 2>&1 &
	PKG_PID=$!
	world_wait_file /run/sluice/control.sock 100 ||
	    { why="no control socket: $(tail -3 "$WORK/sluiced.log" | tr '\n' ' ')"; return 1; }
	out=$(sluicectl --json secret ls 2>&1)
	v=$(jq -r '.secrets[] | select(.name == "tok") | .version' <<<"$out" 2>/dev/null)
	[ "$v" = 1 ] || { why="secret ls: $(short "$out")"; return 1; }
	[ "$(stat -c %U "/proc/$PKG_PID")" = sluice ] || { why="sluiced does not run as sluice"; return 1; }
	kill -TERM "$PKG_PID"
	for i in $(seq 50); do kill -0 "$PKG_PID" 2>/dev/null || break; sleep 0.1; done
	wait "$PKG_PID" || { why="sluiced exit status $?: $(tail -3 "$WORK/sluiced.log" | tr '\n' ' ')"; return 1; }
	PKG_PID=""
	mode_is /var/log/sluice/audit.jsonl 640 sluice || return 1
	out=$(sluicectl audit verify /var/log/sluice/audit.jsonl --pub /etc/sluice/keys/signing.pub 2>&1) ||
	    { why="audit verify: $(short "$out")"; return 1; }
}
deb_unit() {
	local score
	out=$(systemd-analyze security --offline=yes /lib/systemd/system/sluiced.service 2>&1)
	score=$(sed -n 's/.*Overall exposure level for sluiced.service: \([0-9.]*\).*/\1/p' <<<"$out")
	[ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' ||
	    { why="exposure '$score': $(short "$(tail -3 <<<"$out")")"; return 1; }
	grep -q '^ExecStart=/usr/sbin/sluiced -c /etc/sluice/sluiced.yaml$' /lib/systemd/system/sluiced.service ||
	    { why="ExecStart: $(grep ExecStart= /lib/systemd/system/sluiced.service)"; return 1; }
}
deb_purge() {
	local f
	dpkg --purge sluice >"$WORK/purge.log" 2>&1 ||
	    { why="dpkg --purge: $(tail -3 "$WORK/purge.log" | tr '\n' ' ')"; return 1; }
	INSTALLED=0
	for f in /usr/sbin/sluiced /etc/sluice /var/lib/sluice /var/log/sluice /lib/systemd/system/sluiced.service; do
		[ ! -e "$f" ] || { why="$f is left after purge"; return 1; }
	done
	getent passwd sluice >/dev/null || { why="the user went with the package"; return 1; }
}
check deb_builds deb_builds
check deb_lintian deb_lintian
check deb_contents deb_contents
check deb_installs deb_installs
check deb_check deb_check
check deb_runs deb_runs
check deb_unit deb_unit
check deb_purge deb_purge

make_install() {
	local d=$WORK/inst p u
	make -s -C "$top_builddir" install DESTDIR="$d" prefix=/opt/sl >"$WORK/inst.log" 2>&1 ||
	    { why="make install: $(tail -3 "$WORK/inst.log" | tr '\n' ' ')"; return 1; }
	for p in sbin/sluiced bin/sluicectl etc/sluice/sluiced.yaml etc/sluice/policy.d/default.yaml \
	    etc/sluice/sluice.nft etc/logrotate.d/sluice lib/systemd/system/sluiced.service \
	    share/man/man8/sluiced.8 share/doc/sluice/trust.md; do
		[ -f "$d/opt/sl/$p" ] || { why="make install lacks /opt/sl/$p"; return 1; }
	done
	u=$d/opt/sl/lib/systemd/system/sluiced.service
	grep -q '^ExecStart=/opt/sl/sbin/sluiced -c /opt/sl/etc/sluice/sluiced.yaml$' "$u" ||
	    { why="the unit's paths: $(grep ExecStart= "$u")"; return 1; }
	grep -q '^policy_dir: /opt/sl/etc/sluice/policy.d$' "$d/opt/sl/etc/sluice/sluiced.yaml" ||
	    { why="the configuration's paths: $(grep policy_dir "$d/opt/sl/etc/sluice/sluiced.yaml")"; return 1; }
	echo "# edited" >>"$d/opt/sl/etc/sluice/sluiced.yaml"
	make -s -C "$top_builddir" install DESTDIR="$d" prefix=/opt/sl >>"$WORK/inst.log" 2>&1 &&
	    grep -q '^# edited$' "$d/opt/sl/etc/sluice/sluiced.yaml" ||
	    { why="a second make install replaced the edited configuration"; return 1; }
}
check make_install make_install

check_done
