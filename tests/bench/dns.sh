#!/bin/bash
# DNS filter benchmark: queries per second through sluiced's DNS filter for
# an allowed name (answered by the upstream resolver, dnsmasq, from its own
# records) and for a denied one (answered by sluice alone), side by side
# with dnsmasq asked directly, in one run.  Not a test.
#
# usage: tests/bench/dns.sh [BUILDDIR]      (root; BUILDDIR holds sluiced)
# env:   BENCH_SECONDS (8)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top}
SLUICED=$build/sluiced
secs=${BENCH_SECONDS:-8}
WORLD_SRCDIR=$top
. "$top/tests/integ/lib.sh"

command -v dnsperf >/dev/null || { echo "bench: dnsperf not found (tests/bench/install-deps.sh)"; exit 1; }
[ -x "$SLUICED" ] || { echo "bench: no $SLUICED"; exit 1; }
tmp=$(mktemp -d /dev/shm/sluice-dnsbench.XXXXXX)
world_init dnsb$$
trap 'world_down; rm -rf "$tmp"' EXIT INT TERM
world_up || exit 1
world_start_dns "$tmp" || exit 1
mkdir -p "$tmp/pol"
cp "$top/policy.d/default.yaml" "$tmp/pol/"
printf 'name: bench\negress:\n  allow:\n    - domain: allowed.test\n' > "$tmp/pol/bench.yaml"
cat > "$tmp/sluiced.yaml" <<CFG
listen: {transparent: ["0.0.0.0:15001"], dns: ["0.0.0.0:15053"], control: $tmp/control.sock}
resolvers: ["198.18.1.2:53"]
policy_dir: $tmp/pol
state_dir: $tmp/sbstate
audit: {path: $tmp/audit.jsonl, fsync: batch}
workers: 2
limits: {dns_qps: 1000000}
sandboxes:
  - {id: bench, sources: ["198.18.0.2"], policy: bench}
CFG
printf 'allowed.test A\n' > "$tmp/allowed.q"
printf 'denied.test A\n' > "$tmp/denied.q"

perf() {	# SERVER QUERYFILE -> queries per second
	in_ns "$NS_SB" dnsperf -q 2000 -c 20 -s "$1" -d "$2" -l "$secs" 2>/dev/null |
	    awk '/Queries per second/ {printf "%.0f", $4}'
}

world_forwarding 1
direct=$(perf 198.18.1.2 "$tmp/allowed.q")
world_forwarding 0
world_load_nft || exit 1
world_spawn "$NS_GW" "$tmp/sluiced.log" "$SLUICED" -c "$tmp/sluiced.yaml"
sl=$SPAWNED
sleep 1
allowed=$(perf 198.18.0.1 "$tmp/allowed.q")
denied=$(perf 198.18.0.1 "$tmp/denied.q")
rss=$(awk '/^VmRSS/ {print $2}' "/proc/$sl/status")
world_stop "$sl"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }
printf '\n%-32s %10s %10s\n' "path" "queries/s" "/dnsmasq"
printf '%-32s %10s %10s\n' "dnsmasq, asked directly" "$direct" 1.00
printf '%-32s %10s %10s\n' "sluice, allowed (asks dnsmasq)" "$allowed" "$(ratio "$allowed" "$direct")"
printf '%-32s %10s %10s\n' "sluice, denied (NXDOMAIN)" "$denied" "$(ratio "$denied" "$direct")"
printf '\nsluiced RSS after the run: %s KiB\n' "$rss"
