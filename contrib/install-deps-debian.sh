#!/bin/sh
# install-deps-debian.sh: every package sluice's build, tests and fuzzers
# need on Debian 12 (bookworm); the benchmarks' peers are
# tests/bench/install-deps.sh's (Debian would start them as services).  Non-interactive and idempotent:
# when everything is installed already it changes nothing and needs no
# network; otherwise it runs apt-get update and installs what is missing.
# Run as root (or with sudo available).
#
# usage: sh contrib/install-deps-debian.sh [--force]   (--force: update and
#        install even when every package is present)
set -u

PKGS="
build-essential autoconf automake libtool pkg-config
libssl-dev libevent-dev libyaml-dev libsodium-dev libjansson-dev libidn2-dev
libseccomp-dev libnghttp2-dev libcmocka-dev node-llhttp
nftables iproute2 curl dnsutils openssl python3 dnsmasq-base socat jq systemd
python3-jwt python3-cryptography python3-yaml python3-botocore
nghttp2-client nghttp2-server python3-h2 python3-grpcio
clang libclang-rt-14-dev
debhelper lintian
"
# without its Recommends (a node exporter Debian would start)
PKGS_ALONE="prometheus"
# build        build-essential .. pkg-config, the -dev libraries (libseccomp-dev:
#              the workers' filters; libnghttp2-dev: HTTP/2), node-llhttp
#              (llhttp's C sources, compiled in when no libllhttp is found)
# unit tests   libcmocka-dev
# integration  nftables iproute2 curl dnsutils openssl python3 dnsmasq-base
#              socat jq (tests/integ, contrib/demo.sh); systemd (its
#              systemd-analyze rates contrib/systemd/); python3-yaml
#              (contrib/monitoring is checked); python3-jwt
#              python3-cryptography (the policy proxy of forward.sh);
#              python3-botocore (secrets.sh's upstream checks SigV4 with it);
#              nghttp2-client nghttp2-server python3-h2 python3-grpcio
#              (h2.sh: HTTP/2 clients and floods, an h2 upstream, gRPC)
# fuzzers      clang, libclang-rt-14-dev (libFuzzer, ASan/UBSan runtimes;
#              only a Recommends of clang, so named here)
# packaging    debhelper lintian (tests/integ/package.sh builds, lints and
#              installs the .deb); prometheus for its promtool only
#              (contrib/monitoring's rules are checked and tested): when
#              this script installs it, its service is masked first, so
#              Debian neither starts it now nor at boot
#              (systemctl unmask prometheus to use it)

force=0
case "${1:-}" in
--force) force=1 ;;
'') ;;
*) echo "usage: $0 [--force]" >&2; exit 2 ;;
esac

if [ "$(id -u)" = 0 ]; then
	SUDO=""
elif command -v sudo >/dev/null 2>&1; then
	SUDO="sudo"
else
	echo "install-deps-debian.sh: must run as root (or with sudo)" >&2
	exit 1
fi

missing=""
for p in $PKGS $PKGS_ALONE; do
	s=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)
	[ "$s" = installed ] || missing="$missing $p"
done

# sluiced's worker runs as the system user "sluice" (the default 'user';
# the Debian package creates it too): the demo and the tests need it.
if ! getent passwd sluice >/dev/null 2>&1; then
	$SUDO useradd --system --user-group --no-create-home \
	    --home-dir /nonexistent --shell /usr/sbin/nologin sluice ||
	    { echo "install-deps-debian.sh: cannot create the user sluice" >&2; exit 1; }
	echo "install-deps-debian.sh: created the system user sluice"
fi

if [ -z "$missing" ] && [ $force = 0 ]; then
	echo "install-deps-debian.sh: all packages present"
	exit 0
fi
[ -n "$missing" ] && echo "install-deps-debian.sh: installing:$missing"

export DEBIAN_FRONTEND=noninteractive
case " $missing " in
*" prometheus "*)
	$SUDO mkdir -p /etc/systemd/system &&
	    $SUDO ln -sf /dev/null /etc/systemd/system/prometheus.service ;;
esac
$SUDO apt-get update -q || { echo "install-deps-debian.sh: apt-get update failed" >&2; exit 1; }
# shellcheck disable=SC2086
$SUDO apt-get install -y -q \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    $PKGS || { echo "install-deps-debian.sh: apt-get install failed" >&2; exit 1; }
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    $PKGS_ALONE || { echo "install-deps-debian.sh: apt-get install failed" >&2; exit 1; }
echo "install-deps-debian.sh: done"
