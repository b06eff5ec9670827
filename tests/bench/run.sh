#!/bin/bash
# Pass-through benchmarks: sluiced side by side with haproxy (tcp mode, SNI
# routing) and nginx (stream, ssl_preread), and with no proxy at all, in one
# run on one machine, against one local TLS upstream (nginx).  Not a test:
# it prints a table with ratios to direct and to haproxy.
#
# usage: tests/bench/run.sh [BUILDDIR]      (root; BUILDDIR holds sluiced)
# env:   BENCH_SECONDS (8), BENCH_MIB (512), BENCH_IDLE (1000)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top}
SLUICED=$build/sluiced
ulimit -n 65536 2>/dev/null
secs=${BENCH_SECONDS:-8}
mib=${BENCH_MIB:-512}
idle_n=${BENCH_IDLE:-1000}
WORLD_SRCDIR=$top
. "$top/tests/integ/lib.sh"

for t in nginx haproxy wrk curl python3; do
	command -v $t >/dev/null || { echo "bench: $t not found (tests/bench/install-deps.sh)"; exit 1; }
done
[ -x "$SLUICED" ] || { echo "bench: no $SLUICED"; exit 1; }

tmp=$(mktemp -d /dev/shm/sluice-bench.XXXXXX)
chmod 755 "$tmp"	# nginx workers read the files as an unprivileged user
world_init bench$$
cleanup() { world_down; rm -rf "$tmp" "/etc/netns/$NS_SB"; }
trap cleanup EXIT INT TERM
world_up || exit 1
printf '198.18.1.10 allowed.test\n' > "/etc/netns/$NS_SB/hosts"
sh "$top/certs/mkpki.sh" "$tmp/pki" allowed.test >/dev/null || exit 1

# The upstream: nginx serving a large and a small file over TLS.
mkdir -p "$tmp/www" "$tmp/up"
head -c $((mib * 1048576)) /dev/zero > "$tmp/www/big"
printf 'ok\n' > "$tmp/www/small"
cat > "$tmp/up/nginx.conf" <<NGX
worker_processes 1;
pid $tmp/up/nginx.pid;
error_log $tmp/up/error.log;
events { worker_connections 8192; }
http {
	access_log off;
	sendfile on;
	keepalive_requests 1000000;
	client_body_temp_path $tmp/up; proxy_temp_path $tmp/up;
	fastcgi_temp_path $tmp/up; uwsgi_temp_path $tmp/up; scgi_temp_path $tmp/up;
	server {
		listen 198.18.1.10:443 ssl reuseport backlog=4096;
		ssl_certificate $tmp/pki/allowed.test.pem;
		ssl_certificate_key $tmp/pki/allowed.test.key;
		root $tmp/www;
	}
}
NGX
world_spawn "$NS_UP" "$tmp/up/out.log" nginx -c "$tmp/up/nginx.conf" -g 'daemon off;'
world_wait_listen "$NS_UP" 443 || { cat "$tmp/up/error.log"; exit 1; }

# The peers, each on its own port in gw; the ruleset redirects there.
cat > "$tmp/haproxy.cfg" <<HAP
global
	maxconn 8000
defaults
	mode tcp
	timeout connect 10s
	timeout client 300s
	timeout server 300s
frontend sni
	bind :15002
	tcp-request inspect-delay 5s
	tcp-request content accept if { req_ssl_hello_type 1 }
	use_backend allowed if { req_ssl_sni -i allowed.test }
backend allowed
	server s1 198.18.1.10:443
HAP
mkdir -p "$tmp/ngx"
cat > "$tmp/ngx/nginx.conf" <<NGX
load_module /usr/lib/nginx/modules/ngx_stream_module.so;
worker_processes 2;
pid $tmp/ngx/nginx.pid;
error_log $tmp/ngx/error.log;
events { worker_connections 20000; }
stream {
	map \$ssl_preread_server_name \$backend { allowed.test 198.18.1.10:443; }
	server { listen 15003 reuseport; ssl_preread on; proxy_pass \$backend; }
}
NGX
mkdir -p "$tmp/pol"
cp "$top/policy.d/default.yaml" "$tmp/pol/"
cat > "$tmp/pol/bench.yaml" <<POL
name: bench
egress:
  allow:
    - domain: allowed.test
POL
cat > "$tmp/sluiced.yaml" <<CFG
listen: {transparent: ["0.0.0.0:15001", "[::]:15001"], control: $tmp/control.sock}
resolvers: ["198.18.1.2:53"]
policy_dir: $tmp/pol
state_dir: $tmp/sbstate
audit: {path: $tmp/audit.jsonl, fsync: batch}
workers: 2
limits: {connections: 100000}
sandboxes:
  - {id: bench, sources: ["198.18.0.2"], policy: bench}
CFG
world_start_dns "$tmp" || exit 1

redirect_to() {	# PORT, or "" for no proxy (direct routing)
	world_flush_nft
	if [ -z "$1" ]; then
		world_forwarding 1
	else
		world_forwarding 0
		sed "s/^define TRANSPARENT_PORT = .*/define TRANSPARENT_PORT = $1/" \
		    "$top/contrib/sluice.nft" > "$tmp/nft" && world_load_nft "$tmp/nft"
	fi
}

sb() { in_ns "$NS_SB" "$@"; }
url=https://allowed.test
curlo="--cacert $tmp/pki/ca.pem -s -o /dev/null"

bulk() {	# median MB/s of three downloads (a failed one counts 0)
	for i in 1 2 3; do
		sb curl $curlo -f -w '%{speed_download}\n' "$url/big" || echo 0
	done | sort -n | sed -n 2p | awk '{printf "%.0f", $1 / 1e6}'
}
newconn() {	# new TLS connections per second (non-2xx answers make it fail)
	sb curl $curlo -f "$url/small" || { echo 0; return; }
	sb wrk -t2 -c32 -d"${secs}s" -H 'Connection: close' "$url/small" 2>/dev/null |
	    awk '/Requests\/sec/ {printf "%.0f", $2}'
}
p99() {		# keep-alive request p99, microseconds
	sb wrk -t1 -c8 -d"${secs}s" --latency "$url/small" 2>/dev/null |
	    awk '$1 == "99%" { v = $2; u = 1;
		if (v ~ /us$/) u = 1; else if (v ~ /ms$/) u = 1000; else if (v ~ /s$/) u = 1000000;
		sub(/[a-z]+$/, "", v); printf "%.0f", v * u }'
}
rss_kib() {	# summed VmRSS of pids
	local t=0 p
	for p in "$@"; do
		t=$((t + $(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)))
	done
	echo $t
}
idle_per_conn() {	# KiB of RSS per idle pass-through connection
	local pids=$1 before after
	before=$(rss_kib $pids)
	sb python3 - "$idle_n" "$tmp/pki/ca.pem" "$tmp/idle.ready" <<'PY' &
import socket, ssl, sys, time
n, ca, ready = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context(cafile=ca)
held = []
for i in range(n):
    s = socket.create_connection(("198.18.1.10", 443), timeout=10)
    held.append(ctx.wrap_socket(s, server_hostname="allowed.test"))
open(ready, "w").close()
time.sleep(30)
PY
	local cl=$! w=0
	while [ ! -e "$tmp/idle.ready" ] && [ $w -lt 600 ]; do sleep 0.1; w=$((w + 1)); done
	sleep 1
	after=$(rss_kib $pids)
	kill $cl 2>/dev/null; wait $cl 2>/dev/null
	rm -f "$tmp/idle.ready"
	awk -v a="$after" -v b="$before" -v n="$idle_n" 'BEGIN {printf "%.1f", (a - b) / n}'
}

declare -A R
measure() {	# NAME PIDS
	R[$1,bulk]=$(bulk)
	R[$1,conn]=$(newconn)
	R[$1,p99]=$(p99)
	if [ -n "$2" ]; then R[$1,idle]=$(idle_per_conn "$2"); else R[$1,idle]=-; fi
	echo "bench: $1 done: ${R[$1,bulk]} MB/s, ${R[$1,conn]} conn/s, p99 ${R[$1,p99]} us, ${R[$1,idle]} KiB/idle conn" >&2
}

redirect_to ""
measure direct ""

redirect_to 15001
world_spawn "$NS_GW" "$tmp/sluiced.log" "$SLUICED" -c "$tmp/sluiced.yaml"
sl=$SPAWNED
world_wait_listen "$NS_GW" 15001 || { cat "$tmp/sluiced.log"; exit 1; }
measure sluice "$sl"
world_stop "$sl"

redirect_to 15002
world_spawn "$NS_GW" "$tmp/haproxy.log" haproxy -db -f "$tmp/haproxy.cfg"
hp=$SPAWNED
world_wait_listen "$NS_GW" 15002 || { cat "$tmp/haproxy.log"; exit 1; }
measure haproxy "$(pgrep -P "$hp") $hp"
world_stop "$hp"

redirect_to 15003
world_spawn "$NS_GW" "$tmp/ngx.log" nginx -c "$tmp/ngx/nginx.conf" -g 'daemon off;'
ng=$SPAWNED
world_wait_listen "$NS_GW" 15003 || { cat "$tmp/ngx.log" "$tmp/ngx/error.log"; exit 1; }
measure nginx "$(pgrep -P "$ng") $ng"
world_stop "$ng"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0 || a == "-") print "-"; else printf "%.2f", a / b }'; }
printf '\n%-8s %10s %8s %8s %10s %8s %9s %10s\n' peer "bulk MB/s" "/direct" "/haproxy" "new conn/s" "/haproxy" "p99 us" "KiB/idle"
for p in direct sluice haproxy nginx; do
	printf '%-8s %10s %8s %8s %10s %8s %9s %10s\n' "$p" "${R[$p,bulk]}" \
	    "$(ratio "${R[$p,bulk]}" "${R[direct,bulk]}")" \
	    "$(ratio "${R[$p,bulk]}" "${R[haproxy,bulk]}")" \
	    "${R[$p,conn]}" "$(ratio "${R[$p,conn]}" "${R[haproxy,conn]}")" \
	    "${R[$p,p99]}" "${R[$p,idle]}"
done
printf '\nadded p99 (us) over direct: sluice %s, haproxy %s, nginx %s\n' \
    $((R[sluice,p99] - R[direct,p99])) $((R[haproxy,p99] - R[direct,p99])) $((R[nginx,p99] - R[direct,p99]))
