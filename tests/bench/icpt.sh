#!/bin/bash
# Interception benchmark: sluiced intercepting TLS (one intercept rule that
# passes the host), side by side with TLS-terminating reverse proxies that
# set one header and re-encrypt to the upstream over verified TLS -- nginx,
# haproxy (http mode) and mitmproxy (mitmdump, reverse mode) -- and with no
# proxy at all, in one run, against one local TLS upstream (nginx serving a
# small answer and a large file).  Not a test: it prints a results block
# with absolute figures and ratios to nginx (and bulk to direct).
#
# usage: tests/bench/icpt.sh [BUILDDIR]     (root; BUILDDIR holds sluiced)
# env:   SLUICED ($BUILDDIR/sluiced; use a build without sanitizers)
#        ICPT_SECONDS (5)  length of each rate run (the first second is
#                          warm-up, not counted)
#        ICPT_CONNS (32)   concurrent connections of the rate runs
#        ICPT_MIB (256)    size of the bulk file
#        ICPT_PEERS ("direct sluice nginx haproxy mitmproxy"; add
#                          sluice-inject for the cost of injection and
#                          redaction)
#        ICPT_PROXY_CPU (1), ICPT_CLIENT_CPU (0)
#        ICPT_LOAD_MAX (1.0), ICPT_LOAD_WAIT (600): before measuring, wait
#                          (at most ICPT_LOAD_WAIT s) until the 1-minute load
#                          average is below ICPT_LOAD_MAX
#        ICPT_QUIET_WAIT (60): before each peer, wait (at most that many s)
#                          until both cores were less than 15% busy for a
#                          second (the load average lags: it cannot tell)
#        ICPT_FOREIGN_MAX (10): a rate run in which other jobs took more
#                          than that % of either core is run once more
#        ICPT_KEEP (unset): copy the work directory there at the end
#        ICPT_H2 (unset): 1 measures HTTP/2 instead: h2load (nghttp2-client)
#                          for ICPT_SECONDS over ICPT_H2_CONNS (8)
#                          connections with 1, then 100 concurrent streams
#                          each, through sluice (h2 by default) and nginx
#                          (listen ... http2); the upstream stays HTTP/1.1
#                          for both
#        ICPT_PERF (unset): with ICPT_H2, a path prefix: perf record -g each
#                          h2load run into PREFIX.NAME.KEY (perturbs the
#                          CPU figures: for profiles only; ICPT_PERF_CG is
#                          its --call-graph, fp by default, ICPT_PERF_RECORD
#                          more of its options (-e probe_libc:malloc); with
#                          ICPT_PERF_TRACE=1, perf trace -s counts the
#                          system calls into PREFIX.NAME.KEY.syscalls, and
#                          slows them a lot); ICPT_PERF_EVENTS: perf stat
#                          -e those events (uprobes, say) into
#                          PREFIX.NAME.KEY.stat instead)
#        ICPT_AUDIT_FSYNC (batch), ICPT_AUDIT_DIR (the work directory, a
#                          tmpfs): sluiced's audit.fsync and where its trail
#                          goes (a directory on disk to measure the disk)
#
# CPU budget: every proxy runs pinned (taskset) to ICPT_PROXY_CPU with one
# worker (sluiced workers: 1, nginx worker_processes 1, haproxy nbthread 1,
# mitmdump is one Python process); the client (tests/bench/icpt_load.c,
# compiled into the work directory), the upstream nginx and dnsmasq are
# pinned to ICPT_CLIENT_CPU.  "direct" is what that client core manages
# against the upstream alone: a proxy that reaches it is not the limit.
#
# Measured per peer: keep-alive requests/s and latency percentiles of a
# small GET over ICPT_CONNS connections; new TLS connections/s with one
# request each, full handshakes and resumed ones (the client offers the
# latest ticket it received; "resumed" says how many were); bulk MB/s
# of one ICPT_MIB download (curl, median of three); proxy CPU time per
# request, connection or MB (the figures least disturbed by other jobs); busy
# share of both cores, and the share other jobs took of each (core time
# in user/system mode less the CPU time of our processes there).
#
# Peers' configurations (each as it would be run for this job):
#   sluice-inject  as sluice, but the rule injects X-Bench from a sealed
#             secret: a request record before each request goes up, and
#             every answer (bulk included) through the redactor,
#             re-framed as chunked.
#   sluice    policy: one intercept rule {host: allowed.test, action: pass};
#             upstream_ca the test CA; audit to tmpfs, fsync batch (one
#             hash-chained record per request); one upstream TLS connection
#             per intercepted connection (upstream sessions resumed).
#   nginx     ssl on the listener, proxy_pass https with proxy_ssl_verify on,
#             proxy_set_header X-Bench, upstream keepalive pool (64),
#             proxy_buffers 16x64k, no temp files.
#   haproxy   mode http, bind ssl crt, http-request set-header X-Bench,
#             server ssl verify required ca-file, sni, default http-reuse.
#   mitmproxy mitmdump --mode reverse:https://allowed.test, -q,
#             ssl_verify_upstream_trusted_ca, stream_large_bodies 1m, an
#             addon of one line that sets X-Bench.
# All traffic of the sandbox reaches each proxy through the same nftables
# redirect (contrib/sluice.nft with its port changed).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top}
SLUICED=${SLUICED:-$build/sluiced}
secs=${ICPT_SECONDS:-5}
conns=${ICPT_CONNS:-32}
mib=${ICPT_MIB:-256}
peers=${ICPT_PEERS:-direct sluice nginx haproxy mitmproxy}
PCPU=${ICPT_PROXY_CPU:-1}
CCPU=${ICPT_CLIENT_CPU:-0}
load_max=${ICPT_LOAD_MAX:-1.0}
load_wait=${ICPT_LOAD_WAIT:-600}
fmax=${ICPT_FOREIGN_MAX:-10}
WORLD_SRCDIR=$top
. "$top/tests/integ/lib.sh"

die() { echo "icpt-bench: $*" >&2; exit 1; }
note() { echo "icpt-bench: $*" >&2; }

[ "$(id -u)" = 0 ] || die "run as root"
[ -x "$SLUICED" ] || die "no $SLUICED (set SLUICED or give BUILDDIR)"
for t in nginx haproxy curl cc openssl taskset nft ip dnsmasq; do
	command -v $t >/dev/null || die "$t not found (tests/bench/install-deps.sh)"
done
MITMDUMP=$(command -v mitmdump)
case " $peers " in
*" mitmproxy "*)
	[ -n "$MITMDUMP" ] || { note "mitmdump not found (Debian package mitmproxy): mitmproxy skipped"
		peers=$(echo "$peers" | sed 's/mitmproxy//'); } ;;
esac
if nm -D "$SLUICED" 2>/dev/null | grep -q __asan_init; then
	note "warning: $SLUICED is built with ASan; its figures mean little"
fi
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

tmp=$(mktemp -d /dev/shm/sluice-icpt.XXXXXX)
AUD=${ICPT_AUDIT_DIR:-$tmp}
chmod 755 "$tmp"	# nginx workers read the files as an unprivileged user
world_init icpt$$
cleanup() {
	world_down
	[ -n "${ICPT_KEEP:-}" ] && cp -r "$tmp" "$ICPT_KEEP" && rm -f "$ICPT_KEEP/www/big" && note "work directory copied to $ICPT_KEEP"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cc -O2 -Wall -o "$tmp/icpt_load" "$top/tests/bench/icpt_load.c" -lssl -lcrypto ||
    die "compiling icpt_load.c failed (libssl-dev)"

world_up || die "world_up failed"
# The names: the client and the peers in gw find allowed.test in hosts files;
# nothing in gw asks the host's resolver.
printf '198.18.1.10 allowed.test\n' > "/etc/netns/$NS_SB/hosts"
mkdir -p "/etc/netns/$NS_GW"
printf '198.18.1.10 allowed.test\n' > "/etc/netns/$NS_GW/hosts"
printf 'nameserver 198.18.1.2\n' > "/etc/netns/$NS_GW/resolv.conf"
# Tens of thousands of short connections: wide port ranges, TIME_WAIT reuse.
for ns in "$NS_SB" "$NS_GW"; do
	in_ns "$ns" sysctl -qw net.ipv4.ip_local_port_range="1024 65535" \
	    net.ipv4.tcp_tw_reuse=1 >/dev/null
done
in_ns "$NS_GW" sysctl -qw net.netfilter.nf_conntrack_tcp_timeout_time_wait=5 >/dev/null 2>&1

pki=$tmp/pki
sh "$top/certs/mkpki.sh" "$pki" allowed.test >/dev/null 2>&1 || die "mkpki.sh failed"
cat "$pki/allowed.test.chain.pem" "$pki/allowed.test.key" > "$tmp/allowed.full.pem"

# The upstream: nginx serving a small answer, a large file, and /hdr, which
# echoes the X-Bench header a proxy set.
mkdir -p "$tmp/www" "$tmp/up"
head -c $((mib * 1048576)) /dev/zero > "$tmp/www/big"
printf 'ok\n' > "$tmp/www/small"
cat > "$tmp/up/nginx.conf" <<NGX
worker_processes 1;
pid $tmp/up/nginx.pid;
error_log $tmp/up/error.log;
events { worker_connections 20000; }
http {
	access_log off;
	sendfile on;
	keepalive_requests 1000000;
	client_body_temp_path $tmp/up; proxy_temp_path $tmp/up;
	fastcgi_temp_path $tmp/up; uwsgi_temp_path $tmp/up; scgi_temp_path $tmp/up;
	server {
		listen 198.18.1.10:443 ssl reuseport backlog=4096;
		ssl_certificate $pki/allowed.test.pem;
		ssl_certificate_key $pki/allowed.test.key;
		ssl_protocols TLSv1.2 TLSv1.3;	# nginx 1.22 has no 1.3 by default
		root $tmp/www;
		location = /hdr { default_type text/plain; return 200 "x-bench=\$http_x_bench\n"; }
	}
}
NGX
world_spawn "$NS_UP" "$tmp/up/out.log" taskset -c "$CCPU" nginx -c "$tmp/up/nginx.conf" -g 'daemon off;'
upid=$SPAWNED
world_wait_listen "$NS_UP" 443 || { cat "$tmp/up/error.log"; die "upstream nginx did not start"; }
world_start_dns "$tmp" || die "dnsmasq did not start"
taskset -pc "$CCPU" "$WORLD_DNS_PID" >/dev/null
UPPIDS="$upid $(pgrep -P "$upid") $WORLD_DNS_PID"	# ours on the client core

# --- the peers' configurations ---
mkdir -p "$tmp/pol"
cp "$top/policy.d/default.yaml" "$tmp/pol/"
cat > "$tmp/pol/icpt.yaml" <<POL
name: icpt
egress:
  default: deny
intercept:
  - name: bench-pass
    match: {host: allowed.test}
    action: pass
POL
cat > "$tmp/sluiced.yaml" <<CFG
listen: {transparent: ["0.0.0.0:15001", "[::]:15001"], control: $tmp/control.sock}
resolvers: ["198.18.1.2:53"]
policy_dir: $tmp/pol
state_dir: $tmp/sbstate
upstream_ca: $pki/ca.pem
audit: {path: $AUD/audit.jsonl, fsync: ${ICPT_AUDIT_FSYNC:-batch}}
workers: 1
limits: {connections: 100000}
sandboxes:
  - {id: bench, sources: ["198.18.0.2"], policy: icpt}
CFG
# sluice-inject: the same, but the rule injects a header from a sealed
# secret, so every answer goes through the redactor (bulk: redaction on)
SLUICECTL=${SLUICECTL:-$(dirname "$SLUICED")/sluicectl}
case " $peers " in
*" sluice-inject "*)
	mkdir -p "$tmp/pol-inj" "$tmp/sec" && cp "$top/policy.d/default.yaml" "$tmp/pol-inj/" &&
	"$SLUICECTL" keygen --out "$tmp/keys" >/dev/null &&
	head -c 24 /dev/urandom | base64 | tr -d '\n' |
	    "$SLUICECTL" seal --pub "$tmp/keys/gateway.pub" --name bench --host allowed.test \
	    > "$tmp/sec/bench.sealed" 2>/dev/null || die "cannot make the secret for sluice-inject"
	sed -e 's/name: bench-pass/name: bench-inject/' \
	    -e 's/    action: pass/    inject: {set: {x-bench: "sluice {{secret:bench}}"}}/' \
	    "$tmp/pol/icpt.yaml" > "$tmp/pol-inj/icpt.yaml"
	sed -e "s|policy_dir: .*|policy_dir: $tmp/pol-inj\nsecret_dir: $tmp/sec\ngateway_key: $tmp/keys/gateway.key|" \
	    -e "s|audit.jsonl|audit-inject.jsonl|" "$tmp/sluiced.yaml" > "$tmp/sluiced-inject.yaml"
	;;
esac

mkdir -p "$tmp/ngx"
cat > "$tmp/ngx/nginx.conf" <<NGX
worker_processes 1;
pid $tmp/ngx/nginx.pid;
error_log $tmp/ngx/error.log;
events { worker_connections 20000; }
http {
	access_log off;
	keepalive_requests 1000000;
	client_body_temp_path $tmp/ngx; proxy_temp_path $tmp/ngx;
	fastcgi_temp_path $tmp/ngx; uwsgi_temp_path $tmp/ngx; scgi_temp_path $tmp/ngx;
	upstream up {
		server 198.18.1.10:443;
		keepalive $([ -n "${ICPT_H2:-}" ] && echo 1024 || echo 64);
		keepalive_requests 1000000;
	}
	server {
		listen 15003 ssl $([ -n "${ICPT_H2:-}" ] && echo http2) reuseport backlog=4096;
		ssl_certificate $pki/allowed.test.chain.pem;
		ssl_certificate_key $pki/allowed.test.key;
		ssl_protocols TLSv1.2 TLSv1.3;
		location / {
			proxy_pass https://up;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header Host allowed.test;
			proxy_set_header X-Bench nginx;
			proxy_ssl_verify on;
			proxy_ssl_trusted_certificate $pki/ca.pem;
			proxy_ssl_name allowed.test;
			proxy_ssl_server_name on;
			proxy_ssl_session_reuse on;
			proxy_ssl_protocols TLSv1.2 TLSv1.3;
			proxy_buffer_size 64k;
			proxy_buffers 16 64k;
			proxy_max_temp_file_size 0;
		}
	}
}
NGX

cat > "$tmp/haproxy.cfg" <<HAP
global
	maxconn 8000
	nbthread 1
	tune.ssl.default-dh-param 2048
defaults
	mode http
	timeout connect 10s
	timeout client 300s
	timeout server 300s
	timeout http-keep-alive 300s
frontend fe
	bind :15002 ssl crt $tmp/allowed.full.pem
	http-request set-header X-Bench haproxy
	default_backend be
backend be
	server s1 198.18.1.10:443 ssl verify required ca-file $pki/ca.pem sni str(allowed.test) verifyhost allowed.test
HAP

mkdir -p "$tmp/mitm"
printf 'def request(flow): flow.request.headers["X-Bench"] = "mitmproxy"\n' > "$tmp/mitm/addon.py"

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

# --- measuring ---
sb() { in_ns "$NS_SB" taskset -c "$CCPU" "$@"; }
url=https://allowed.test

cpu_ticks() {	# summed utime+stime (clock ticks) of pids and their threads
	local t=0 p v
	for p in "$@"; do
		v=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13}')
		t=$((t + ${v:-0}))
	done
	echo $t
}
core_busy() {	# "busy idle task" jiffies of cpu N from /proc/stat (task: user+nice+system)
	awk -v c="cpu$1" '$1 == c { b = $2 + $3 + $4 + $7 + $8 + $9; print b, $5 + $6, $2 + $3 + $4 }' /proc/stat
}
pct() {	# BEFORE AFTER [OURS_TICKS]: busy %, or with OURS the % of the core's
	# time that tasks other than ours used (other jobs on the machine)
	awk -v a="$1" -v b="$2" -v o="${3:-}" 'BEGIN { split(a, x, " "); split(b, y, " ");
	    t = (y[1] - x[1]) + (y[2] - x[2]); if (t <= 0) { print "-"; exit }
	    if (o == "") printf "%.0f", 100 * (y[1] - x[1]) / t
	    else { f = (y[3] - x[3]) - o; if (f < 0) f = 0; printf "%.0f", 100 * f / t } }'
}
quiet() {	# wait (ICPT_QUIET_WAIT s, 60) until both cores are idle for a second
	local n=0 max=${ICPT_QUIET_WAIT:-60} a b c d pb cb
	while :; do
		a=$(core_busy "$PCPU") c=$(core_busy "$CCPU")
		sleep 1
		b=$(core_busy "$PCPU") d=$(core_busy "$CCPU")
		pb=$(pct "$a" "$b") cb=$(pct "$c" "$d")
		case $pb in ''|*[!0-9]*) pb=0 ;; esac
		case $cb in ''|*[!0-9]*) cb=0 ;; esac
		if [ "$pb" -lt 15 ] && [ "$cb" -lt 15 ]; then break; fi
		n=$((n + 1))
		[ $n -ge "$max" ] && { note "cores still busy ($pb%, $cb%) after ${max}s; measuring anyway"; break; }
	done
	QUIET="$pb/$cb% after ${n}s"
}
load1() { cut -d' ' -f1 /proc/loadavg; }

declare -A R
# run_load NAME KEY MODE PATH: one icpt_load run; fills R[NAME,KEY.*]
run_load() {
	local name=$1 key=$2 m=$3 path=$4 out t0 t1 u0 u1 p0 p1 c0 c1 kv hz lg
	hz=$(getconf CLK_TCK)
	t0=$(cpu_ticks $PIDS) u0=$(cpu_ticks $UPPIDS)
	p0=$(core_busy "$PCPU") c0=$(core_busy "$CCPU")
	out=$(sb "$tmp/icpt_load" "$m" 198.18.1.10 443 allowed.test "$path" "$conns" "$secs" "$tmp/trust.pem" 2>"$tmp/load.err")
	t1=$(cpu_ticks $PIDS) u1=$(cpu_ticks $UPPIDS)
	p1=$(core_busy "$PCPU") c1=$(core_busy "$CCPU")
	[ -s "$tmp/load.err" ] && sed "s/^/icpt-bench: $name $key: /" "$tmp/load.err" | head -5 >&2
	for kv in $out; do R[$name,$key.${kv%%=*}]=${kv#*=}; done
	: "${R[$name,$key.rps]:=0}" "${R[$name,$key.reqs]:=0}"
	R[$name,$key.cpu_us]=$(awk -v a="$t0" -v b="$t1" -v n="${R[$name,$key.reqs]}" -v s="$secs" -v hz="$(getconf CLK_TCK)" \
	    'BEGIN { if (n == 0 || a == b && a == 0) print "-"; else printf "%.0f", (b - a) / hz * 1e6 / (n * s / (s - (s >= 5 ? 1 : s * 0.2))) }')
	R[$name,$key.pbusy]=$(pct "$p0" "$p1")
	R[$name,$key.cbusy]=$(pct "$c0" "$c1")
	# foreign: what other jobs took of each core during the run
	R[$name,$key.pfor]=$(pct "$p0" "$p1" $((t1 - t0)))
	lg=$(echo "$out" | sed -n 's/.*cpu_us=\([0-9]*\).*/\1/p' | awk -v hz="$hz" '{printf "%d", $1 * hz / 1e6}')
	R[$name,$key.cfor]=$(pct "$c0" "$c1" $((u1 - u0 + ${lg:-0})))
	note "$name $key: $out (proxy cpu ${R[$name,$key.cpu_us]} us/req, core$PCPU ${R[$name,$key.pbusy]}% busy ${R[$name,$key.pfor]}% foreign, core$CCPU ${R[$name,$key.cbusy]}% busy ${R[$name,$key.cfor]}% foreign)"
}
# run_rate NAME KEY MODE PATH: run_load, once more (after quiet) when other
# jobs took more than ICPT_FOREIGN_MAX % of either core; the run they
# disturbed less is kept
run_rate() {
	local f g k
	run_load "$1" "$2" "$3" "$4"
	f=$(foreign "$1" "$2")
	R[$1,$2.tries]=1
	[ "$f" -le "$fmax" ] && return
	note "$1 $2: other jobs took $f% of a core; once more"
	quiet
	run_load "$1" "$2.b" "$3" "$4"
	R[$1,$2.tries]=2
	g=$(foreign "$1" "$2.b")
	[ "$g" -lt "$f" ] || return
	for k in reqs rps p50_us p90_us p99_us max_us errors reconnects resumed tickets cpu_us pbusy cbusy pfor cfor; do
		R[$1,$2.$k]=${R[$1,$2.b.$k]:-}
	done
}
foreign() {	# NAME KEY: the larger foreign share of the two cores (integer)
	awk -v a="${R[$1,$2.pfor]:-0}" -v b="${R[$1,$2.cfor]:-0}" -v d="$([ "$1" = direct ] && echo 1)" \
	    'BEGIN { a += 0; b += 0; if (d) a = 0; print (a > b ? a : b) }'
}
bulk() {	# NAME: median MB/s of three downloads of /big (a failed one counts
	# 0); proxy CPU us per MB, other jobs' share of the proxy core
	local i t0 t1 p0 p1 hz
	hz=$(getconf CLK_TCK)
	t0=$(cpu_ticks $PIDS) p0=$(core_busy "$PCPU")
	R[$1,bulk]=$(for i in 1 2 3; do
		sb curl --http1.1 --cacert "$tmp/trust.pem" -s -f -o /dev/null --max-time 120 \
		    -w '%{speed_download}\n' "$url/big" || echo 0
	done | sort -n | sed -n 2p | awk '{printf "%.0f", $1 / 1e6}')
	t1=$(cpu_ticks $PIDS) p1=$(core_busy "$PCPU")
	R[$1,bulk.cpu]=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v m="$mib" \
	    'BEGIN { if (b - a <= 0) print "-"; else printf "%.0f", (b - a) / hz * 1e6 / (3 * m * 1.048576) }')
	R[$1,bulk.pfor]=$(pct "$p0" "$p1" $((t1 - t0)))
	[ "$1" = direct ] && R[$1,bulk.pfor]=-
}
check() {	# NAME: one request answers 200 and shows the header set
	local h
	h=$(sb curl --http1.1 --cacert "$tmp/trust.pem" -s -f --max-time 10 "$url/hdr") ||
	    { note "$1: GET /hdr through it failed"; return 1; }
	R[$1,hdr]=${h#x-bench=}
	[ -n "${R[$1,hdr]}" ] || R[$1,hdr]=-
}
# run_h2 NAME KEY STREAMS: h2load for secs over ICPT_H2_CONNS connections of
# STREAMS concurrent streams each; fills R[NAME,KEY.*] (rps, reqs, cpu_us)
run_h2() {
	local name=$1 key=$2 m=$3 out t0 t1 hz p0 p1 perfpid tracepid
	hz=$(getconf CLK_TCK)
	t0=$(cpu_ticks $PIDS) p0=$(core_busy "$PCPU")
	if [ -n "${ICPT_PERF:-}" ]; then
		perf record -q ${ICPT_PERF_RECORD:-} --call-graph "${ICPT_PERF_CG:-fp}" -F 1999 -o "$ICPT_PERF.$name.$key" -p "$(echo $PIDS | tr ' ' ,)" 2>/dev/null &
		perfpid=$!
		tracepid=""
		if [ -n "${ICPT_PERF_EVENTS:-}" ]; then
			perf stat -e "$ICPT_PERF_EVENTS" -o "$ICPT_PERF.$name.$key.stat" -p "$(echo $PIDS | tr ' ' ,)" >/dev/null 2>&1 &
			tracepid=$!
		elif [ -n "${ICPT_PERF_TRACE:-}" ]; then
			perf trace -s -o "$ICPT_PERF.$name.$key.syscalls" -p "$(echo $PIDS | tr ' ' ,)" >/dev/null 2>&1 &
			tracepid=$!
		fi
	fi
	out=$(sb h2load -D "$secs" -c "${ICPT_H2_CONNS:-8}" -m "$m" "$url/small" 2>&1)
	[ -n "${ICPT_PERF:-}" ] && { kill -INT $perfpid $tracepid; wait $perfpid $tracepid; }
	t1=$(cpu_ticks $PIDS) p1=$(core_busy "$PCPU")
	R[$name,$key.reqs]=$(sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p' <<<"$out")
	R[$name,$key.rps]=$(sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out" | awk '{printf "%.0f", $1}')
	R[$name,$key.proto]=$(sed -n 's/^Application protocol: //p' <<<"$out")
	R[$name,$key.errors]=$(sed -n 's/^requests: .* \([0-9]*\) errored.*/\1/p' <<<"$out")
	R[$name,$key.cpu_us]=$(awk -v a="$t0" -v b="$t1" -v n="${R[$name,$key.reqs]:-0}" -v hz="$hz" \
	    'BEGIN { if (n + 0 == 0) print "-"; else printf "%.1f", (b - a) / hz * 1e6 / n }')
	R[$name,$key.pbusy]=$(pct "$p0" "$p1")
	note "$name $key: ${R[$name,$key.rps]} req/s (${R[$name,$key.proto]}), ${R[$name,$key.reqs]} ok, ${R[$name,$key.errors]} errored, proxy cpu ${R[$name,$key.cpu_us]} us/req, core$PCPU ${R[$name,$key.pbusy]}% busy"
}
measure() {	# NAME
	local l0
	if [ -n "${ICPT_H2:-}" ]; then
		check "$1" || return 1
		quiet
		R[$1,quiet]=$QUIET
		run_h2 "$1" m1 1
		quiet
		run_h2 "$1" m100 100
		return
	fi
	check "$1" || return 1
	quiet
	R[$1,quiet]=$QUIET
	l0=$(load1)
	run_rate "$1" ka ka /small
	run_rate "$1" new new /small
	run_rate "$1" res resume /small
	bulk "$1"
	R[$1,load]="$l0-$(load1)"
	note "$1 bulk: ${R[$1,bulk]} MB/s, proxy cpu ${R[$1,bulk.cpu]} us/MB, ${R[$1,bulk.pfor]}% foreign; load ${R[$1,load]}"
}
alive_or_report() {	# NAME PID LOG
	if ! kill -0 "$2" 2>/dev/null; then
		wait "$2"; note "$1 DIED during the run (status $?); log tail:"
		tail -20 "$3" >&2
		R[$1,died]=1
	fi
}

# The client trusts the test CA; sluice's leaves come from the sandbox's CA,
# fetched from the control API once sluiced runs (trust.pem grows then).
cp "$pki/ca.pem" "$tmp/trust.pem"

# Wait for a quiet machine before any measurement.
waited=0
while awk -v m="$load_max" '{ exit !($1 >= m) }' /proc/loadavg; do
	[ $waited -ge "$load_wait" ] && { note "load still $(load1) after ${load_wait}s; measuring anyway"; break; }
	[ $waited = 0 ] && note "waiting for the 1-minute load average ($(load1)) to fall below $load_max"
	sleep 5; waited=$((waited + 5))
done
note "load average at start: $(cat /proc/loadavg) (waited ${waited}s)"
start_load=$(load1)
t_start=$(date +%s)

for p in $peers; do
	PIDS=""
	case $p in
	direct)
		redirect_to ""
		measure direct
		;;
	sluice|sluice-inject)
		redirect_to 15001
		cfg=$tmp/sluiced.yaml
		[ "$p" = sluice-inject ] && cfg=$tmp/sluiced-inject.yaml
		world_spawn "$NS_GW" "$tmp/$p.log" taskset -c "$PCPU" "$SLUICED" -c "$cfg"
		pid=$SPAWNED
		world_wait_listen "$NS_GW" 15001 || { cat "$tmp/$p.log" >&2; die "sluiced did not start"; }
		curl -s -f --unix-socket "$tmp/control.sock" http://x/v1/sandboxes/bench/ca.pem > "$tmp/sbca.pem" &&
		    grep -q 'BEGIN CERTIFICATE' "$tmp/sbca.pem" || die "no CA for sandbox bench from the control API"
		cat "$pki/ca.pem" "$tmp/sbca.pem" > "$tmp/trust.pem"
		# the monitor, its worker and the worker's keys process
		kids=$(pgrep -P "$pid")
		PIDS="$pid $kids $(for w in $kids; do pgrep -P "$w"; done)"
		measure "$p"
		alive_or_report "$p" "$pid" "$tmp/$p.log"
		R[$p,rss]=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null)
		world_stop "$pid"
		R[$p,exit]=$WORLD_STOP_STATUS
		;;
	nginx)
		redirect_to 15003
		world_spawn "$NS_GW" "$tmp/ngx.log" taskset -c "$PCPU" nginx -c "$tmp/ngx/nginx.conf" -g 'daemon off;'
		pid=$SPAWNED
		world_wait_listen "$NS_GW" 15003 || { cat "$tmp/ngx.log" "$tmp/ngx/error.log" >&2; die "nginx did not start"; }
		sleep 0.2
		PIDS="$pid $(pgrep -P "$pid")"
		measure nginx
		alive_or_report nginx "$pid" "$tmp/ngx/error.log"
		world_stop "$pid"
		;;
	haproxy)
		redirect_to 15002
		world_spawn "$NS_GW" "$tmp/haproxy.log" taskset -c "$PCPU" haproxy -db -f "$tmp/haproxy.cfg"
		pid=$SPAWNED
		world_wait_listen "$NS_GW" 15002 || { cat "$tmp/haproxy.log" >&2; die "haproxy did not start"; }
		PIDS="$pid $(pgrep -P "$pid")"
		measure haproxy
		alive_or_report haproxy "$pid" "$tmp/haproxy.log"
		world_stop "$pid"
		;;
	mitmproxy)
		redirect_to 15004
		world_spawn "$NS_GW" "$tmp/mitm.log" taskset -c "$PCPU" "$MITMDUMP" -q \
		    --mode reverse:https://allowed.test:443 --listen-port 15004 \
		    --set confdir="$tmp/mitm" --certs "*=$tmp/allowed.full.pem" \
		    --set ssl_verify_upstream_trusted_ca="$pki/ca.pem" \
		    --set stream_large_bodies=1m --set keep_host_header=true \
		    -s "$tmp/mitm/addon.py"
		pid=$SPAWNED
		world_wait_listen "$NS_GW" 15004 150 || { cat "$tmp/mitm.log" >&2; die "mitmdump did not start"; }
		PIDS=$pid
		measure mitmproxy
		alive_or_report mitmproxy "$pid" "$tmp/mitm.log"
		world_stop "$pid"
		;;
	*) die "unknown peer $p" ;;
	esac
done
t_run=$(( $(date +%s) - t_start ))

# --- sluice's own account of the run ---
if [ -f "$tmp/sluice.log" ]; then
	sl_warn=$(grep -ciE 'error|warn|crit|fatal|abort' "$tmp/sluice.log")
	sl_req=$(grep -c '"type": *"request"' "$AUD/audit.jsonl" 2>/dev/null)
	sl_conn=$(grep -c '"type": *"conn"' "$AUD/audit.jsonl" 2>/dev/null)
	sl_deny=$(grep '"type": *"request"' "$AUD/audit.jsonl" 2>/dev/null | grep -vc '"action": *"pass"')
fi

# --- results ---
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }
v() { local x=${R[$1]:-}; echo "${x:--}"; }
ref=nginx
case " $peers " in *" nginx "*) ;; *) ref=direct ;; esac
if [ -n "${ICPT_H2:-}" ]; then
	{
	printf '\n=== sluice HTTP/2 interception benchmark (%s) ===\n' "$(date -u +%FT%TZ)"
	printf 'h2load -D %s -c %s, GET /small, upstream HTTP/1.1 (nginx); proxies on cpu %s, client on cpu %s\n' \
	    "$secs" "${ICPT_H2_CONNS:-8}" "$PCPU" "$CCPU"
	printf '%-13s | %8s %5s %7s %5s | %8s %5s %7s %5s | %s\n' peer "m1 req/s" "/$ref" "us/req" "/$ref" \
	    "m100 r/s" "/$ref" "us/req" "/$ref" "protocol, errors"
	for p in $peers; do
		printf '%-13s | %8s %5s %7s %5s | %8s %5s %7s %5s | %s %s/%s\n' "$p" \
		    "$(v "$p,m1.rps")" "$(ratio "$(v "$p,m1.rps")" "$(v "$ref,m1.rps")")" \
		    "$(v "$p,m1.cpu_us")" "$(ratio "$(v "$p,m1.cpu_us")" "$(v "$ref,m1.cpu_us")")" \
		    "$(v "$p,m100.rps")" "$(ratio "$(v "$p,m100.rps")" "$(v "$ref,m100.rps")")" \
		    "$(v "$p,m100.cpu_us")" "$(ratio "$(v "$p,m100.cpu_us")" "$(v "$ref,m100.cpu_us")")" \
		    "$(v "$p,m1.proto")" "$(v "$p,m1.errors")" "$(v "$p,m100.errors")"
	done
	printf 'header seen upstream (X-Bench):'
	for p in $peers; do printf ' %s=%s' "$p" "$(v "$p,hdr")"; done
	printf '\n'
	} | tee "$tmp/results.txt"
	exit 0
fi
{
printf '\n=== sluice interception benchmark (%s) ===\n' "$(date -u +%FT%TZ)"
printf 'proxies pinned to cpu %s, one worker each; client+upstream+dns pinned to cpu %s\n' "$PCPU" "$CCPU"
printf 'keep-alive: %s conns x %ss GET /small (3 B); new: %s concurrent, 1 req/conn; bulk: %s MiB, median of 3\n' \
    "$conns" "$secs" "$conns" "$mib"
printf 'load average (1 min): %s at start, %s at end; run %ss; sluiced %s\n\n' \
    "$start_load" "$(load1)" "$t_run" "$SLUICED"
printf '%-13s %8s %5s %7s %7s %6s %4s | %7s %5s %6s %6s | %7s %5s %7s %6s | %6s %5s %5s\n' \
    peer "ka req/s" "/$ref" "p50 us" "p99 us" "us/req" "core" \
    "new c/s" "/$ref" "p99 us" "us/c" "res c/s" "/$ref" "resumed" "us/c" "bulk MB/s" "/dir" "us/MB"
for p in $peers; do
	printf '%-13s %8s %5s %7s %7s %6s %3s%% | %7s %5s %6s %6s | %7s %5s %7s %6s | %9s %5s %5s\n' "$p" \
	    "$(v "$p,ka.rps")" "$(ratio "$(v "$p,ka.rps")" "$(v "$ref,ka.rps")")" \
	    "$(v "$p,ka.p50_us")" "$(v "$p,ka.p99_us")" "$(v "$p,ka.cpu_us")" "$(v "$p,ka.pbusy")" \
	    "$(v "$p,new.rps")" "$(ratio "$(v "$p,new.rps")" "$(v "$ref,new.rps")")" \
	    "$(v "$p,new.p99_us")" "$(v "$p,new.cpu_us")" \
	    "$(v "$p,res.rps")" "$(ratio "$(v "$p,res.rps")" "$(v "$ref,res.rps")")" \
	    "$(awk -v r="$(v "$p,res.resumed")" -v n="$(v "$p,res.reqs")" 'BEGIN { if (n + 0 == 0) print "-"; else printf "%.0f%%", 100 * r / n }')" \
	    "$(v "$p,res.cpu_us")" \
	    "$(v "$p,bulk")" "$(ratio "$(v "$p,bulk")" "$(v direct,bulk)")" "$(v "$p,bulk.cpu")"
done
printf '\n(us/req, us/c, us/MB: proxy CPU time per request, connection or MB; core: busy share of the proxy core in the keep-alive run)\n'
printf 'client core busy in keep-alive runs:'
for p in $peers; do printf ' %s %s%%' "$p" "$(v "$p,ka.cbusy")"; done
printf '\nerrors (ka/new/resume):'
for p in $peers; do printf ' %s %s/%s/%s' "$p" "$(v "$p,ka.errors")" "$(v "$p,new.errors")" "$(v "$p,res.errors")"; done
printf '\nsession tickets received per connection (new/resume):'
for p in $peers; do printf ' %s %s/%s' "$p" \
    "$(awk -v t="$(v "$p,new.tickets")" -v n="$(v "$p,new.reqs")" -v s="$secs" 'BEGIN { if (n + 0 == 0) print "-"; else printf "%.1f", t / (n * s / (s - (s >= 5 ? 1 : s * 0.2))) }')" \
    "$(awk -v t="$(v "$p,res.tickets")" -v n="$(v "$p,res.reqs")" -v s="$secs" 'BEGIN { if (n + 0 == 0) print "-"; else printf "%.1f", t / (n * s / (s - (s >= 5 ? 1 : s * 0.2))) }')"; done
printf '\nkeep-alive reconnects:'
for p in $peers; do printf ' %s %s' "$p" "$(v "$p,ka.reconnects")"; done
printf '\nheader seen upstream (X-Bench):'
for p in $peers; do printf ' %s=%s' "$p" "$(v "$p,hdr")"; done
printf '\nother jobs'"'"' share of proxy core / client core, ka new res, bulk proxy core (%%; *: the run was repeated):'
for p in $peers; do printf ' %s %s/%s%s %s/%s%s %s/%s%s %s' "$p" \
    "$(v "$p,ka.pfor")" "$(v "$p,ka.cfor")" "$([ "$(v "$p,ka.tries")" = 2 ] && echo '*')" \
    "$(v "$p,new.pfor")" "$(v "$p,new.cfor")" "$([ "$(v "$p,new.tries")" = 2 ] && echo '*')" \
    "$(v "$p,res.pfor")" "$(v "$p,res.cfor")" "$([ "$(v "$p,res.tries")" = 2 ] && echo '*')" \
    "$(v "$p,bulk.pfor")"; done
printf '\nidle probe before each peer (busy %% of proxy/client core, wait):'
for p in $peers; do printf ' %s %s;' "$p" "$(v "$p,quiet")"; done
printf '\nload during each peer (1-min avg, before-after):'
for p in $peers; do printf ' %s %s' "$p" "$(v "$p,load")"; done
printf '\n'
if [ -f "$tmp/sluice.log" ]; then
	printf 'sluiced: exit %s, peak RSS %s KiB, %s warning/error log lines, audit %s request records (%s not pass), %s conn records%s\n' \
	    "$(v sluice,exit)" "$(v sluice,rss)" "$sl_warn" "$sl_req" "$sl_deny" "$sl_conn" \
	    "$([ -n "$(v sluice,died | grep -v -- -)" ] && echo ', DIED DURING THE RUN')"
	if [ "$sl_warn" -gt 0 ]; then
		printf 'sluiced log (first warning/error lines):\n'
		grep -iE 'error|warn|crit|fatal|abort' "$tmp/sluice.log" | sort | uniq -c | sort -rn | head -8
	fi
fi
} | tee "$tmp/results.txt"
exit 0
