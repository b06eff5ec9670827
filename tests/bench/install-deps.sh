#!/bin/sh
# install-deps.sh: the peers and load tools tests/bench runs (haproxy,
# nginx with its stream module, wrk, dnsperf) on Debian 12, on top of
# contrib/install-deps-debian.sh.  Debian starts haproxy and nginx as
# services when they are installed; they are installed here without
# being started (policy-rc.d), since the benchmarks start their own.
# Run as root.  Idempotent.
set -u
PKGS="haproxy nginx-light libnginx-mod-stream wrk dnsperf"

[ "$(id -u)" = 0 ] || { echo "install-deps.sh: must run as root" >&2; exit 1; }
missing=""
for p in $PKGS; do
	s=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)
	[ "$s" = installed ] || missing="$missing $p"
done
[ -n "$missing" ] || { echo "install-deps.sh: all packages present"; exit 0; }
echo "install-deps.sh: installing:$missing"
made=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && made=1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q && apt-get install -y -q $missing
status=$?
[ $made = 1 ] && rm -f /usr/sbin/policy-rc.d
[ $status = 0 ] || { echo "install-deps.sh: apt-get failed" >&2; exit 1; }
echo "install-deps.sh: done"
