#!/bin/bash
# hostile.sh: what a hostile sandbox tries against one real sluiced, in the
# namespace world of tests/integ/lib.sh: the holes of issue 13, each a check
# that failed before its fix.
#
# usage: tests/integ/hostile.sh [-k] [-v]
#   -k  keep the work directory (always kept when something fails)
#   -v  print the last client output and sluiced's log tail on each failure
# Environment: top_srcdir, top_builddir (set by make check), SLUICED,
# SLUICECTL, PYTHON.
# Exit: 0 all passed, 1 something failed, 77 skipped (not root, no ip netns
# or nft, a tool missing).  Needs root: it creates namespaces.
#
# The sandbox "box" (sb) has the policy "hostile": allowed.test is
# intercepted (/reflect gets a sealed credential, the rest passes),
# dropsyn.test is intercepted and its upstream drops every SYN, other.test
# and *.wild.test are allowed by name, denied.test and *.bad.test are
# denied.  sluiced's resolver is tests/integ/dnsbad.py in up, which logs
# every query it gets, answers the test names, REFUSED under refused.test,
# SERVFAIL under servfail.test and nothing under silent.test.
#
#   crash_*   remote crashes: a refused answer with bytes still coming on a
#             pipelined connection, an upstream that drops SYNs
#   abort_*   an upstream that resets mid-answer: the sandbox is reset too,
#             intercepted and passed through (issue 15, fault 6)
#   noanswer_504  an upstream that never answers gets a 504 (fault 7)
#   upgrade_h2c_refused  only websocket upgrades pass (fault 9)
#   private_intercepted  address rules apply to intercepted names (fault 12)
#   half_close_answered  a sandbox that half-closes after its requests
#             gets their answers (fault 5)
#   half_close_refused  the same, a refusal held behind a slow answer
#   mem_slow_reader  a sandbox that does not read its answer holds sluiced
#             to the bound, not the answer's size (fault 3)
#   mem_refused_flood  a flood behind a held refusal is not read
#   deadline_*  ClientHellos and later heads sent a byte at a time are cut
#             timeouts.handshake after their first byte (fault 4)
#   pre_*     the explicit proxy judges names and addresses before any
#             resolution or 200: CONNECT, absolute form, every refused kind
#   dnsq_*    no query ever reaches the resolver for a name the policy does
#             not allow, whichever way it arrived
#   res_*     a resolver that times out and refuses hundreds of names does
#             not stop allowed names resolving; no query for google.com
#   fmt_*     an unparseable DNS question is answered FORMERR at once
#   daemon_*  the same sluiced throughout, and a clean end
# Output: "ok NAME" or "FAIL NAME: why" per check, then "N passed, N failed".

# shellcheck source=tests/integ/check.sh
. "$(dirname "$0")/check.sh"

check_needs curl openssl dig timeout jq
check_work hostile
[ -x "$SLUICECTL" ] || setup_fail "$SLUICECTL not built"
PKI=$WORK/pki CA=$WORK/pki/ca.pem STATE=$WORK/state KEYS=$WORK/keys
SOCK=$WORK/control.sock POLDIR=$WORK/policy.d AUDIT=$WORK/audit.jsonl
SECDIR=$WORK/secrets BOX_CA=$WORK/box.pem QLOG=$WORK/queries.log
DNSBAD=$top_srcdir/tests/integ/dnsbad.py

last="" out=""
check_verbose() {
	echo "    last: $last"
	printf '%s\n' "$out" | head -20 | sed 's/^/    out: /'
	tail -5 "$WORK/sluiced.log" | sed 's/^/    log: /'
}
check_failed() {
	[ -n "$SL_PID" ] && ! kill -0 "$SL_PID" 2>/dev/null &&
	    why="${why:-"$* failed"} (sluiced is no longer running: $(sanitizer))"
}
short() { printf '%s' "$1" | tr '\n' ' ' | head -c 600; }

RESOLVE=(--resolve allowed.test:443:198.18.1.10 --resolve dropsyn.test:443:198.18.1.21)

# raw HOST PORT TLS_NAME FILE: sends FILE's bytes from sb (over TLS when
# TLS_NAME is not "-", trusting box's CA), then reads until the peer closes
# (8 s at most); what came back is in $WORK/raw.out, how it ended (a
# reset, TLS without close_notify) in $WORK/raw.err.
raw() {
	last="raw $*"
	in_sb "$PY" - "$@" >"$WORK/raw.out" 2>"$WORK/raw.err" <<-EOF
	import socket, ssl, sys, time
	host, port, name, f = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
	s = socket.create_connection((host, port), timeout=8)
	if name != "-":
	    ctx = ssl.create_default_context(cafile="$BOX_CA")
	    # an end without close_notify is an error, not a clean end
	    s = ctx.wrap_socket(s, server_hostname=name,
	                        suppress_ragged_eofs=False)
	s.sendall(open(f, "rb").read())
	end = time.time() + 8
	while time.time() < end:
	    try:
	        b = s.recv(65536)
	    except (ConnectionError, ssl.SSLError, socket.timeout, OSError) as e:
	        sys.stderr.write("recv: %s\n" % e)
	        break
	    if not b:
	        break
	    sys.stdout.buffer.write(b)
	    sys.stdout.flush()
	EOF
	out=$(head -c 600 "$WORK/raw.out")
	cat "$WORK/raw.out" >>"$SEEN"
}

alive() {
	kill -0 "$SL_PID" 2>/dev/null || { why="sluiced ($SL_PID) is gone: $(sanitizer)"; return 1; }
	hc https://allowed.test/pub/alive
	[ "$cst" = 200 ] || { why="after it, a plain request got $cst (exit $cexit)"; return 1; }
}

# ---------------------------------------------------------------- the world and sluiced

world_init
"$top_srcdir/certs/mkpki.sh" "$PKI" $WORLD_CERT_NAMES >"$WORK/mkpki.log" 2>&1 ||
    setup_fail "certs/mkpki.sh failed (see $WORK/mkpki.log)"
world_up >"$WORK/world.log" 2>&1 || setup_fail "world_up: $(tail -1 "$WORK/world.log")"
world_start_upstreams "$PKI" "$STATE" "$WORK" 2>>"$WORK/world.log" ||
    setup_fail "upstreams did not start (see $WORK/upstream.log)"
world_load_nft >>"$WORK/world.log" 2>&1 || setup_fail "cannot load contrib/sluice.nft"
# dropsyn.test: an address in up whose SYNs are dropped
ip -n "$NS_UP" addr add 198.18.1.21/24 dev eth0 &&
in_ns "$NS_UP" nft -f - <<-EOF || setup_fail "cannot drop SYNs to 198.18.1.21"
table inet hostile {
	chain input {
		type filter hook input priority 0;
		ip daddr 198.18.1.21 tcp flags syn drop
	}
}
EOF
# sluiced's resolver, in place of dnsmasq
world_spawn "$NS_UP" "$WORK/dnsbad.out" "$PY" "$DNSBAD" --listen 198.18.1.2:53 \
    --log "$QLOG" --zone allowed.test=198.18.1.10 --zone other.test=198.18.1.11 \
    --zone denied.test=198.18.1.12 --zone dropsyn.test=198.18.1.21 \
    --zone a.wild.test=198.18.1.11 --zone x.bad.test=198.18.1.12 \
    --zone fresh1.wild.test=198.18.1.11 --zone fresh2.wild.test=198.18.1.11 \
    --zone fresh3.wild.test=198.18.1.11 --zone fresh4.wild.test=198.18.1.11 \
    --zone fresh5.wild.test=198.18.1.11
DNS_PID=$SPAWNED
for i in $(seq 50); do
	[ -s "$QLOG" ] && break
	in_ns "$NS_UP" dig +time=1 +tries=1 +short @198.18.1.2 ready.probe A >/dev/null 2>&1
	sleep 0.1
done
[ -s "$QLOG" ] || setup_fail "dnsbad.py did not start: $(tail -2 "$WORK/dnsbad.out")"

"$SLUICECTL" keygen --out "$KEYS" >"$WORK/keygen.log" 2>&1 ||
    setup_fail "sluicectl keygen: $(tail -1 "$WORK/keygen.log")"
mkdir -p "$SECDIR" "$POLDIR"
TOK="tok-$(head -c 12 /dev/urandom | base64 | tr -d '\n=' | tr '+/' 'xy')"
printf '%s\n' "$TOK" >"$WORK/canary-values"
printf '%s' "$TOK" | "$SLUICECTL" seal --pub "$KEYS/gateway.pub" --name tok \
    --host allowed.test --secret-version 1 >"$SECDIR/tok.sealed" 2>"$WORK/seal.log" ||
    setup_fail "sealing: $(tail -1 "$WORK/seal.log")"

cp "$top_srcdir/policy.d/default.yaml" "$POLDIR/"
cat >"$POLDIR/hostile.yaml" <<EOF
# hostile: box's policy
name: hostile
egress:
  default: deny
  allow:
    - domain: other.test
    - domain: "*.wild.test"
    - domain: "*.refused.test"
    - domain: "*.servfail.test"
    - domain: "*.silent.test"
  deny:
    - domain: denied.test
    - domain: "*.bad.test"
    - cidr: 198.18.1.13/32
intercept:
  - name: inj
    match: {host: allowed.test, path: /reflect}
    inject:
      set: {authorization: "Bearer {{secret:tok}}"}
  - name: pub
    match: {host: allowed.test}
    action: pass
  - name: dropsyn
    match: {host: dropsyn.test}
    action: pass
EOF
cat >"$WORK/sluiced.yaml" <<EOF
# generated by tests/integ/hostile.sh
listen:
  transparent: ["0.0.0.0:15001", "[::]:15001"]
  proxy: ["198.18.0.1:3128"]
  dns: ["0.0.0.0:15053", "[::]:15053"]
  control: $SOCK
resolvers: ["198.18.1.2:53"]
policy_dir: $POLDIR
state_dir: $WORK/sbstate
secret_dir: $SECDIR
gateway_key: $KEYS/gateway.key
upstream_ca: $CA
audit: {path: $AUDIT}
workers: 2
timeouts: {handshake: 5s, idle: 3s, connect: 1s}
EOF
: >"$AUDIT"
"$SLUICED" -c "$WORK/sluiced.yaml" --check >"$WORK/check.log" 2>&1 ||
    setup_fail "sluiced --check: $(tail -2 "$WORK/check.log")"
daemon_start
register_box hostile

# ================================================================ crash

# Two pipelined requests on the inject rule: the first is answered with a
# content coding (so refused, 502) while its body is still coming, the
# second is a plain pass.  sluiced once pumped the rest of the coded body
# on a closing connection and ran on freed memory.
crash_coded_pipelined() {
	local i
	printf 'GET /reflect?ce=gzip&chunk=1 HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET /pub/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n' >"$WORK/req"
	for i in 1 2 3; do
		raw 198.18.1.10 443 allowed.test "$WORK/req"
		grep -q '^HTTP/1.1 502' "$WORK/raw.out" ||
		    { why="run $i: no 502 for the coded answer: $(short "$out")"; return 1; }
		grep -q 'response-not-redactable' "$WORK/raw.out" ||
		    { why="run $i: the 502 does not say why: $(short "$out")"; return 1; }
		! grep -q 'Content-Encoding' "$WORK/raw.out" ||
		    { why="run $i: the coded answer reached the sandbox"; return 1; }
		kill -0 "$SL_PID" 2>/dev/null || { why="run $i: sluiced died: $(sanitizer)"; return 1; }
	done
	alive
}
# the same with a malformed answer while bytes are still coming
crash_malformed_pipelined() {
	printf 'GET /bad-response?kind=dupcl HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET /pub/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n' >"$WORK/req"
	raw 198.18.1.10 443 allowed.test "$WORK/req"
	grep -q '^HTTP/1.1 502' "$WORK/raw.out" || { why="no 502: $(short "$out")"; return 1; }
	alive
}
# an upstream that stops mid-answer (the idle timeout, 3 s, ends it) with
# a second request pipelined behind: the connection ends, sluiced lives
crash_stall_pipelined() {
	local t0 t1
	printf 'GET /stall?ms=8000 HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET /pub/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n' >"$WORK/req"
	t0=$(date +%s%N)
	raw 198.18.1.10 443 allowed.test "$WORK/req"
	t1=$(date +%s%N)
	grep -q '^0123456789' "$WORK/raw.out" || { why="the answer's start did not come: $(short "$out")"; return 1; }
	[ $(( (t1 - t0) / 1000000 )) -lt 7000 ] || { why="still open after $(( (t1 - t0) / 1000000 )) ms"; return 1; }
	cut_not_ended || return 1
	alive
}
# cut_not_ended: the last raw answer had one head and ended in a reset:
# no answer of sluice's written into the body, no clean end
cut_not_ended() {
	[ "$(grep -ao 'HTTP/1\.1 [0-9][0-9][0-9]' "$WORK/raw.out" | wc -l)" = 1 ] ||
	    { why="another answer was written into the cut one: $(short "$out")"; return 1; }
	# a reset, or (TLS) an end without close_notify: either way not clean
	grep -qiE 'reset|EOF occurred in violation' "$WORK/raw.err" ||
	    { why="the cut answer ended cleanly: $(short "$(cat "$WORK/raw.err")")"; return 1; }
}
# An upstream that resets in the middle of an answer, framed by length or
# by the close: the sandbox's connection is reset too, never ended cleanly
abort_reset_intercepted() {
	local q
	for q in '' '?close=1'; do
		printf 'GET /reset-mid%s HTTP/1.1\r\nHost: allowed.test\r\n\r\n' "$q" >"$WORK/req"
		raw 198.18.1.10 443 allowed.test "$WORK/req"
		grep -q '^0123456789' "$WORK/raw.out" || { why="/reset-mid$q: the answer's start did not come: $(short "$out")"; return 1; }
		cut_not_ended || { why="/reset-mid$q: $why"; return 1; }
	done
	alive
}
# the same through the splice path (plain HTTP, passed through)
abort_reset_passthrough() {
	printf 'GET /reset-mid?close=1 HTTP/1.1\r\nHost: other.test\r\n\r\n' >"$WORK/req"
	raw 198.18.1.11 80 - "$WORK/req"
	grep -q '^0123456789' "$WORK/raw.out" || { why="the answer's start did not come: $(short "$out")"; return 1; }
	cut_not_ended
}
# An upstream that accepts and never answers: 504 once timeouts.idle (3 s)
# is up, not a silent close
noanswer_504() {
	local t0 t1
	t0=$(date +%s%N)
	HC_MAX=12 hc 'https://allowed.test/slow?ms=9000'
	t1=$(date +%s%N)
	[ "$cst" = 504 ] || { why="$cst (exit $cexit), want 504: $(short "$out")"; return 1; }
	jq -e '.reason == "upstream-timeout"' "$WORK/c.b" >/dev/null || { why="$(short "$(cat "$WORK/c.b")")"; return 1; }
	[ $(( (t1 - t0) / 1000000 )) -lt 6000 ] || { why="the 504 took $(( (t1 - t0) / 1000000 )) ms"; return 1; }
}
# An intercepted request whose upstream drops SYNs: 504 after
# timeouts.connect (1 s), and sluiced lives on.
crash_dropsyn() {
	local i t0 t1
	for i in 1 2; do
		t0=$(date +%s%N)
		hc https://dropsyn.test/x
		t1=$(date +%s%N)
		[ "$cst" = 504 ] || { why="run $i: $cst (exit $cexit), want 504: $(short "$out")"; return 1; }
		[ $(( (t1 - t0) / 1000000 )) -lt 4000 ] || { why="run $i: the 504 took $(( (t1 - t0) / 1000000 )) ms"; return 1; }
	done
	sleep 1.5	# a second timeout event would come now
	alive
}

# two requests pipelined to it: one 504, then the connection ends
crash_dropsyn_pipelined() {
	printf 'GET /a HTTP/1.1\r\nHost: dropsyn.test\r\n\r\nGET /b HTTP/1.1\r\nHost: dropsyn.test\r\n\r\n' >"$WORK/req"
	raw 198.18.1.21 443 dropsyn.test "$WORK/req"
	[ "$(grep -c '^HTTP/1.1' "$WORK/raw.out")" = 1 ] && grep -q '^HTTP/1.1 504' "$WORK/raw.out" ||
	    { why="want exactly one answer, a 504: $(short "$out")"; return 1; }
	sleep 1.5
	alive
}

check crash_coded_pipelined crash_coded_pipelined
check crash_malformed_pipelined crash_malformed_pipelined
check crash_stall_pipelined crash_stall_pipelined
check abort_reset_intercepted abort_reset_intercepted
check abort_reset_passthrough abort_reset_passthrough
check noanswer_504 noanswer_504
check crash_dropsyn crash_dropsyn
check crash_dropsyn_pipelined crash_dropsyn_pipelined

# ================================================================ upgrade

# An upgrade to h2c on a pass rule would open an HTTP/2 tunnel past every
# rule: refused, and nothing reaches the upstream (issue 15, fault 9)
upgrade_h2c_refused() {
	local u
	for u in 'h2c' 'websocket, h2c'; do
		printf 'GET /pub/x HTTP/1.1\r\nHost: allowed.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: %s\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n' "$u" >"$WORK/req"
		snap
		raw 198.18.1.10 443 allowed.test "$WORK/req"
		grep -q '^HTTP/1.1 403' "$WORK/raw.out" && grep -q '"upgrade-not-allowed"' "$WORK/raw.out" ||
		    { why="Upgrade: $u: $(short "$out")"; return 1; }
		upx 'allowed-tls.requests=0' || { why="Upgrade: $u: $why"; return 1; }
	done
}

check upgrade_h2c_refused upgrade_h2c_refused

# ================================================================ private

# An intercepted name whose address is private (allowed.test's ULA
# address) with no allow CIDR for it: refused like a passed-through name,
# and nothing (no credential) reaches that address (issue 15, fault 12)
private_intercepted() {
	snap
	hc --resolve 'allowed.test:443:[fd00:5c::2:10]' https://allowed.test/reflect
	[ "$cst" != 200 ] || { why="intercepted towards a private address: $cst"; return 1; }
	upx 'allowed-tls.accepted=0 allowed-tls.requests=0' || return 1
	audit_has 0 'type=conn action=deny reason=private-address sni=allowed.test dst=fd00:5c::2:10'
}

check private_intercepted private_intercepted

# ================================================================ half

# half_close HOST PORT TLS_NAME FILE: sends FILE, then ends its side
# (FIN, no close_notify), then reads the answer until sluiced closes
half_close() {
	last="half_close $*"
	in_sb "$PY" - "$@" >"$WORK/raw.out" 2>"$WORK/raw.err" <<-EOF
	import os, socket, ssl, sys
	host, port, name, f = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
	s = socket.create_connection((host, port), timeout=8)
	if name != "-":
	    ctx = ssl.create_default_context(cafile="$BOX_CA")
	    s = ctx.wrap_socket(s, server_hostname=name)
	s.sendall(open(f, "rb").read())
	# the socket's FIN, below TLS: no close_notify
	d = socket.socket(fileno=os.dup(s.fileno()))
	d.shutdown(socket.SHUT_WR)
	d.close()
	try:
	    while True:
	        b = s.recv(65536)
	        if not b:
	            break
	        sys.stdout.buffer.write(b)
	except (OSError, ssl.SSLError) as e:
	    sys.stderr.write("recv: %s\n" % e)
	EOF
	out=$(head -c 600 "$WORK/raw.out")
}
# A sandbox that half-closes after its requests still gets its answers,
# over intercepted TLS and intercepted plain HTTP (issue 15, fault 5)
half_close_answered() {
	local n
	printf 'GET /pub/h1 HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET /pub/h2 HTTP/1.1\r\nHost: allowed.test\r\n\r\n' >"$WORK/req"
	for n in "198.18.1.10 443 allowed.test" "198.18.1.10 80 -"; do
		snap
		# shellcheck disable=SC2086
		half_close $n "$WORK/req"
		[ "$(grep -ac '^HTTP/1.1 200' "$WORK/raw.out")" = 2 ] ||
		    { why="$n: want two answers: $(short "$out") $(cat "$WORK/raw.err")"; return 1; }
		upx 'allowed-tls.requests=2' || { why="$n: $why"; return 1; }
	done
}

# The same with a refusal held behind a slow answer: the answer, then the
# refusal, then the end (once, the end came at once and both were lost).
half_close_refused() {
	printf 'GET /slow?ms=800 HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET /pub/h HTTP/1.1\r\nHost: other.test\r\n\r\n' >"$WORK/req"
	snap
	half_close 198.18.1.10 443 allowed.test "$WORK/req"
	[ "$(grep -a '^HTTP/1.1 ' "$WORK/raw.out" | cut -c1-12 | tr -d '\r' | tr '\n' ,)" = "HTTP/1.1 200,HTTP/1.1 421," ] ||
	    { why="want 200 then 421: $(short "$out") $(cat "$WORK/raw.err")"; return 1; }
	upx "allowed-tls.requests=1 allowed-tls.paths=/slow?ms=800 other-tls.accepted=0"
}

check half_close_answered half_close_answered
check half_close_refused half_close_refused

# ================================================================ mem

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$SL_PID/status"; }
# A 64 MiB answer to a sandbox that does not read for 2.5 s: what sluiced
# holds for it stays near the bound (256 KiB a side), not the answer's
# size (issue 15, fault 3); then the sandbox reads it all, whole.
mem_slow_reader() {
	local before during got
	hc https://allowed.test/pub/warm >/dev/null
	before=$(rss_kb)
	in_sb "$PY" - "$BOX_CA" >"$WORK/slow.out" 2>&1 <<-'EOF' &
	import socket, ssl, sys, time
	ctx = ssl.create_default_context(cafile=sys.argv[1])
	s = ctx.wrap_socket(socket.create_connection(("198.18.1.10", 443), timeout=20),
	                    server_hostname="allowed.test")
	s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
	s.sendall(b"GET /big?n=67108864 HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	time.sleep(2.5)		# timeouts.idle is 3 s
	n = 0
	while True:
	    b = s.recv(1 << 20)
	    if not b:
	        break
	    n += len(b)
	    if n >= 67108864:
	        break
	print(n)
	EOF
	local pid=$!
	sleep 2
	during=$(rss_kb)
	wait "$pid"
	got=$(tail -1 "$WORK/slow.out")
	[ $(( during - before )) -lt 24576 ] ||
	    { why="sluiced grew by $(( (during - before) / 1024 )) MiB while the sandbox did not read"; return 1; }
	[ "${got:-0}" -ge 67108864 ] || { why="the sandbox got $got bytes: $(short "$(cat "$WORK/slow.out")")"; return 1; }
}

check mem_slow_reader mem_slow_reader

# A sandbox that pipelines a refused request behind a slow answer, then
# floods: nothing more of it is read while the refusal waits, so sluiced
# holds no more than a read or two of it (issue 15: "hold" did not stop
# reading, and the flood piled up in memory); the answer and the
# refusal still come, in order.
mem_refused_flood() {
	local before during
	hc https://allowed.test/pub/warm >/dev/null
	before=$(rss_kb)
	in_sb "$PY" - "$BOX_CA" >"$WORK/flood.out" 2>&1 <<-'EOF' &
	import re, socket, ssl, sys, time
	ctx = ssl.create_default_context(cafile=sys.argv[1])
	s = ctx.wrap_socket(socket.create_connection(("198.18.1.10", 443), timeout=20),
	                    server_hostname="allowed.test")
	s.sendall(b"GET /slow?ms=2500 HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
	          b"GET /pub/f HTTP/1.1\r\nHost: other.test\r\n\r\n")
	s.settimeout(2)
	sent = 0
	junk = b"A" * (1 << 20)
	try:
	    while sent < (64 << 20):
	        sent += s.send(junk)
	except (socket.timeout, ssl.SSLError, OSError):
	    pass
	s.settimeout(10)
	got = b""
	try:
	    while got.count(b"HTTP/1.1 ") < 2:
	        b = s.recv(65536)
	        if not b:
	            break
	        got += b
	except (socket.timeout, ssl.SSLError, OSError) as e:
	    print("recv:", e)
	print("sent", sent)
	print(",".join(m.decode() for m in re.findall(rb"HTTP/1\.1 [0-9]{3}", got)))
	EOF
	local pid=$!
	sleep 1.8
	during=$(rss_kb)
	wait "$pid"
	[ $(( during - before )) -lt 16384 ] ||
	    { why="sluiced grew by $(( (during - before) / 1024 )) MiB while a refusal waited: $(short "$(cat "$WORK/flood.out")")"; return 1; }
	grep -q '^HTTP/1.1 200,HTTP/1.1 421' "$WORK/flood.out" ||
	    { why="want 200 then 421: $(short "$(cat "$WORK/flood.out")")"; return 1; }
}

check mem_refused_flood mem_refused_flood

# ================================================================ deadline

# dribble HOST PORT TLS_NAME FIRST DRIP: from sb, sends the bytes of file
# FIRST at once (and reads its answer, when FIRST is not empty), then the
# bytes of DRIP one every DRIP_S s (0.5; each resets the idle limit, 3 s); prints
# the seconds from the first dripped byte until sluiced closed, or "open"
# after 14 s.
DRIP_S=0.5
dribble() {
	last="dribble $*"
	in_sb "$PY" - "$@" 2>"$WORK/raw.err" <<-EOF
	import select, socket, ssl, sys, time
	host, port, name, first, drip = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
	s = socket.create_connection((host, port), timeout=8)
	if name != "-":
	    ctx = ssl.create_default_context(cafile="$BOX_CA")
	    s = ctx.wrap_socket(s, server_hostname=name)
	first = open(first, "rb").read()
	if first:
	    s.sendall(first)
	    got = b""
	    while b"\r\n\r\n" not in got:
	        got += s.recv(65536)
	    time.sleep(0.3)
	    s.setblocking(False)
	    try:
	        while s.recv(65536):
	            pass
	    except (ssl.SSLWantReadError, BlockingIOError):
	        pass
	    s.setblocking(True)
	drip = open(drip, "rb").read()
	t0 = time.time()
	i = 0
	while time.time() - t0 < 14:
	    if i < len(drip):
	        try:
	            s.send(drip[i:i + 1])
	        except OSError:
	            print("%.1f" % (time.time() - t0)); sys.exit(0)
	        i += 1
	    r, _, _ = select.select([s], [], [], $DRIP_S)
	    if r:
	        try:
	            b = s.recv(65536)
	        except (ssl.SSLError, OSError):
	            b = b""
	        if not b:
	            print("%.1f" % (time.time() - t0)); sys.exit(0)
	print("open")
	EOF
}
# deadline_within SECONDS OUT: the dribble was cut in time
deadline_within() {
	[ "$2" != open ] && [ "${2%.*}" -lt "$1" ] ||
	    { why="$last: closed after ${2}s, want under ${1}s (handshake: 5s)"; return 1; }
}
# the handshake limit counts from the first byte, not from each byte
deadline_sniff() {
	local t
	# the longest method sniffing must wait on, 1.2 s a byte: each of its
	# bytes once restarted the limit (cut at 13 s instead of 5)
	: >"$WORK/first"
	printf 'OPTIONS / HTTP/1.1\r\nHost: other.test\r\n\r\n' >"$WORK/drip"
	t=$(DRIP_S=1.2 dribble 198.18.1.11 80 - "$WORK/first" "$WORK/drip")
	deadline_within 8 "$t"
}
# a later head on kept-alive plain HTTP, one byte at a time
deadline_http_head() {
	local t
	printf 'GET / HTTP/1.1\r\nHost: other.test\r\n\r\n' >"$WORK/first"
	printf 'GET / HTTP/1.1\r\nHost: other.test\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n' >"$WORK/drip"
	t=$(dribble 198.18.1.11 80 - "$WORK/first" "$WORK/drip")
	deadline_within 8 "$t"
}
# the same on an intercepted connection, after a first request
deadline_icpt_head() {
	local t off
	printf 'GET /pub/one HTTP/1.1\r\nHost: allowed.test\r\n\r\n' >"$WORK/first"
	printf 'GET /pub/two HTTP/1.1\r\nHost: allowed.test\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n' >"$WORK/drip"
	off=$(audit_lines)
	t=$(dribble 198.18.1.10 443 allowed.test "$WORK/first" "$WORK/drip")
	deadline_within 8 "$t" || return 1
	# cut by the head's deadline, not by the upstream's idle limit (3 s)
	audit_has "$off" 'type=conn sni=allowed.test close=handshake-timeout'
}

check deadline_sniff deadline_sniff
check deadline_http_head deadline_http_head
check deadline_icpt_head deadline_icpt_head

# ================================================================ pre

RND=$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
EXFIL=()	# names that must never reach the resolver

# proxy_ask REQUEST-HEAD: sends it to the explicit proxy from sb, reads the
# answer (the proxy closes after a refusal); sets pst (the status) and
# pbody.
pst="" pbody=""
proxy_ask() {
	last="proxy: $1"
	printf '%b' "$1" >"$WORK/req"
	in_sb "$PY" - "$WORK/req" >"$WORK/raw.out" 2>"$WORK/raw.err" <<-'EOF'
	import socket, sys
	s = socket.create_connection(("198.18.0.1", 3128), timeout=8)
	s.sendall(open(sys.argv[1], "rb").read())
	b = b""
	while b"\r\n\r\n" not in b:
	    x = s.recv(65536)
	    if not x:
	        break
	    b += x
	head, _, body = b.partition(b"\r\n\r\n")
	n = 0
	for l in head.split(b"\r\n")[1:]:
	    k, _, v = l.partition(b":")
	    if k.strip().lower() == b"content-length":
	        n = int(v)
	while len(body) < n:
	    x = s.recv(65536)
	    if not x:
	        break
	    body += x
	sys.stdout.buffer.write(head + b"\r\n\r\n" + body)
	EOF
	out=$(head -c 600 "$WORK/raw.out")
	cat "$WORK/raw.out" >>"$SEEN"
	pst=$(head -n1 "$WORK/raw.out" | tr -d '\r' | awk '{print $2}')
	pbody=$(sed '1,/^\r$/d' "$WORK/raw.out")
}
# asked NAME: 0 if the resolver got a question for exactly NAME
asked() { awk '{print tolower($1)}' "$QLOG" | grep -qxF -- "$1"; }
# pre_refused AUTHORITY REASON: CONNECT AUTHORITY gets sluice's 403 with
# REASON at once (no 200 before it)
pre_refused() {
	proxy_ask "CONNECT $1 HTTP/1.1\r\nHost: $1\r\n\r\n"
	[ "$pst" = 403 ] || { why="CONNECT $1: status $pst, want 403: $(short "$out")"; return 1; }
	! grep -q '200 Connection established' "$WORK/raw.out" || { why="CONNECT $1: a 200 came first"; return 1; }
	jq -e --arg r "$2" '.error == "denied" and .reason == $r' <<<"$pbody" >/dev/null ||
	    { why="CONNECT $1: not reason $2: $(short "$pbody")"; return 1; }
}
pre_names() {
	local n
	for n in "x$RND.exfil.test:443=not-allowed" "denied.test:443=deny-name" \
	    "y$RND.denied.test:443=not-allowed" "z$RND.bad.test:443=deny-name" \
	    "wild.test:443=not-allowed" "localhost:443=not-allowed" \
	    "metadata.google.internal:80=not-allowed" "q$RND.refused.test.evil:443=not-allowed"; do
		pre_refused "${n%=*}" "${n##*=}" || return 1
		EXFIL+=("${n%%:*}")
	done
}
pre_addresses() {
	local n
	for n in 198.18.1.1:3128=forbidden-address 198.18.0.1:3128=forbidden-address \
	    127.0.0.1:80=forbidden-address 169.254.169.254:80=forbidden-address \
	    '[::1]:443=forbidden-address' 198.18.1.13:443=deny-cidr \
	    10.0.0.5:443=private-address; do
		pre_refused "${n%=*}" "${n##*=}" || return 1
	done
}
# an absolute-form request for a name not allowed: 403, nothing resolved
pre_absolute() {
	proxy_ask "GET http://a$RND.exfil.test/x HTTP/1.1\r\nHost: a$RND.exfil.test\r\n\r\n"
	EXFIL+=("a$RND.exfil.test")
	[ "$pst" = 403 ] || { why="absolute form: status $pst: $(short "$out")"; return 1; }
	jq -e '.reason == "not-allowed"' <<<"$pbody" >/dev/null || { why="absolute form: $(short "$pbody")"; return 1; }
}
# allowed names still go through, and are resolved
pre_allowed() {
	proxy_ask "CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n"
	[ "$pst" = 200 ] || { why="CONNECT other.test:443: $pst: $(short "$out")"; return 1; }
	proxy_ask "CONNECT a.wild.test:443 HTTP/1.1\r\nHost: a.wild.test:443\r\n\r\n"
	[ "$pst" = 200 ] || { why="CONNECT a.wild.test:443: $pst: $(short "$out")"; return 1; }
	asked other.test && asked a.wild.test ||
	    { why="the resolver was not asked for the allowed names"; return 1; }
}

check pre_names pre_names
check pre_addresses pre_addresses
check pre_absolute pre_absolute
check pre_allowed pre_allowed

# ================================================================ dnsq

# the other ways a name arrives: SNI, Host on plain HTTP, a DNS question
dnsq_transparent() {
	local n
	n="s$RND.exfil.test"
	EXFIL+=("$n")
	in_sb "$PY" - "$n" <<-'EOF' >/dev/null 2>&1
	import socket, ssl, sys
	ctx = ssl.create_default_context()
	ctx.check_hostname = False
	ctx.verify_mode = ssl.CERT_NONE
	try:
	    s = socket.create_connection(("198.18.1.11", 443), timeout=5)
	    ctx.wrap_socket(s, server_hostname=sys.argv[1])
	except Exception:
	    pass
	EOF
	n="h$RND.exfil.test"
	EXFIL+=("$n")
	printf 'GET / HTTP/1.1\r\nHost: %s\r\n\r\n' "$n" >"$WORK/req"
	raw 198.18.1.11 80 - "$WORK/req"
	grep -q '^HTTP/1.1 403' "$WORK/raw.out" || { why="plain HTTP Host $n: $(short "$out")"; return 1; }
	n="d$RND.exfil.test"
	EXFIL+=("$n")
	out=$(in_sb dig +time=2 +tries=1 @198.18.0.1 "$n" A)
	grep -q 'status: NXDOMAIN' <<<"$out" || { why="DNS $n: $(short "$out")"; return 1; }
}
# none of the names the policy does not allow reached the resolver, and
# nothing nobody asked for did
dnsq_none() {
	local n
	[ ${#EXFIL[@]} -ge 10 ] || { why="only ${#EXFIL[@]} names tried"; return 1; }
	for n in "${EXFIL[@]}"; do
		if asked "$n"; then
			why="the resolver was asked for $n"
			return 1
		fi
	done
	! grep -qi 'google' "$QLOG" || { why="a query nobody asked for: $(grep -i google "$QLOG" | head -1)"; return 1; }
}

check dnsq_transparent dnsq_transparent
check dnsq_none dnsq_none

# ================================================================ res

# storm N: from sb, N names under each of refused.test, servfail.test and
# silent.test, asked every way at once: SNI, CONNECT, absolute form, DNS
storm() {
	in_sb "$PY" - "$1" "$RND" <<-'EOF'
	import socket, ssl, struct, sys, threading
	n, rnd = int(sys.argv[1]), sys.argv[2]
	def sni(name):
	    ctx = ssl.create_default_context()
	    ctx.check_hostname = False
	    ctx.verify_mode = ssl.CERT_NONE
	    try:
	        s = socket.create_connection(("198.18.1.11", 443), timeout=6)
	        ctx.wrap_socket(s, server_hostname=name)
	    except Exception:
	        pass
	def proxy(head):
	    try:
	        s = socket.create_connection(("198.18.0.1", 3128), timeout=6)
	        s.sendall(head.encode())
	        s.recv(4096)
	        s.close()
	    except Exception:
	        pass
	def dns(name):
	    q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
	    for l in name.split("."):
	        q += bytes([len(l)]) + l.encode()
	    q += b"\0" + struct.pack(">HH", 1, 1)
	    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
	    s.settimeout(4)
	    try:
	        s.sendto(q, ("198.18.0.1", 53))
	        s.recv(4096)
	    except Exception:
	        pass
	ts = []
	for i in range(n):
	    for z in ("refused", "servfail", "silent"):
	        name = "n%d-%s.%s.test" % (i, rnd, z)
	        w = i % 4
	        if w == 0:
	            t = threading.Thread(target=sni, args=(name,))
	        elif w == 1:
	            t = threading.Thread(target=proxy, args=("CONNECT %s:443 HTTP/1.1\r\n\r\n" % name,))
	        elif w == 2:
	            t = threading.Thread(target=proxy, args=("GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n" % (name, name),))
	        else:
	            t = threading.Thread(target=dns, args=(name,))
	        t.start()
	        ts.append(t)
	for t in ts:
	    t.join()
	EOF
}
# ms_to_200 AUTHORITY: milliseconds until the proxy answers its CONNECT 200
ms_to_200() {
	in_sb "$PY" - "$1" <<-'EOF'
	import socket, sys, time
	t = time.time()
	s = socket.create_connection(("198.18.0.1", 3128), timeout=5)
	s.sendall(("CONNECT %s HTTP/1.1\r\n\r\n" % sys.argv[1]).encode())
	b = s.recv(4096)
	print("%d %s" % ((time.time() - t) * 1000, b.split(b"\r\n")[0].decode()))
	EOF
}
# while hundreds of names time out and are refused, allowed names that
# were never asked before resolve and connect within a second
res_storm() {
	local pid i r
	storm 100 >/dev/null 2>&1 &
	pid=$!
	# measured once the storm is under way: 100 silent names in flight
	for i in $(seq 100); do
		[ "$(grep -c "$RND\.silent\.test " "$QLOG")" -ge 100 ] && break
		sleep 0.05
	done
	for i in 1 2 3; do
		r=$(ms_to_200 "fresh$i.wild.test:443")
		[ "${r#* }" = "HTTP/1.1 200 Connection established" ] && [ "${r%% *}" -lt 1000 ] ||
		    { why="during the storm, fresh$i.wild.test: $r"; wait "$pid"; return 1; }
	done
	wait "$pid"
	grep -q "refused.test" "$QLOG" && grep -q "silent.test" "$QLOG" ||
	    { why="the storm did not reach the resolver"; return 1; }
	for i in 4 5; do
		r=$(ms_to_200 "fresh$i.wild.test:443")
		[ "${r#* }" = "HTTP/1.1 200 Connection established" ] && [ "${r%% *}" -lt 1000 ] ||
		    { why="after the storm, fresh$i.wild.test: $r"; return 1; }
	done
	hc https://allowed.test/pub/after-storm
	[ "$cst" = 200 ] || { why="after the storm, intercepted: $cst"; return 1; }
}
# no query for a name nobody asked for (evdns probed with google.com)
# A resolver that answers REFUSED, then nothing else for 12 s: libevent's
# resolver marked it down and probed it with google.com after 10 s.
res_no_probe() {
	local i
	for i in 1 2 3; do
		proxy_ask "CONNECT p$i-$RND.refused.test:443 HTTP/1.1\r\n\r\n"
		[ "$pst" = 403 ] || { why="CONNECT p$i-$RND.refused.test: $pst"; return 1; }
	done
	sleep 12
	! grep -qi 'google' "$QLOG" || { why="$(grep -i google "$QLOG" | head -1)"; return 1; }
	! grep -vE '\.test |^ready\.probe ' "$QLOG" | grep -q . ||
	    { why="queries for names nobody asked for: $(grep -vE '\.test |^ready\.probe ' "$QLOG" | head -3 | tr '\n' ' ')"; return 1; }
}

check res_storm res_storm
check res_no_probe res_no_probe

# ================================================================ fmt

# dns_raw HEX: sends the datagram from sb to the DNS filter, prints the
# answer's hex (nothing when none came within 2 s)
dns_raw() {
	in_sb "$PY" - "$1" <<-'EOF'
	import socket, sys
	s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
	s.settimeout(2)
	s.sendto(bytes.fromhex(sys.argv[1]), ("198.18.0.1", 53))
	try:
	    print(s.recv(4096).hex())
	except socket.timeout:
	    pass
	EOF
}
# a question that does not parse (a label that overruns the message):
# FORMERR at once, with the query's id, never larger than the question
fmt_formerr() {
	local q=abcd01000001000000000000ff616263 r
	r=$(dns_raw "$q")
	[ -n "$r" ] || { why="no answer to an unparseable question"; return 1; }
	[ "${r:0:4}" = abcd ] || { why="answer id ${r:0:4}, want abcd"; return 1; }
	[ $(( 0x${r:6:2} & 0x0f )) = 1 ] && [ $(( 0x${r:4:2} & 0x80 )) = 128 ] ||
	    { why="not a FORMERR answer: $r"; return 1; }
	[ ${#r} -le ${#q} ] || { why="the answer ($(( ${#r} / 2 )) bytes) is larger than the question"; return 1; }
}
# a header that is not there: nothing back, and sluiced lives on
fmt_short() {
	local r
	r=$(dns_raw abcd0100)
	[ -z "$r" ] || { why="an answer to 4 bytes: $r"; return 1; }
	out=$(in_sb dig +time=2 +tries=1 @198.18.0.1 other.test A)
	grep -q 'status: NOERROR' <<<"$out" || { why="then other.test: $(short "$out")"; return 1; }
}

check fmt_formerr fmt_formerr
check fmt_short fmt_short

# ================================================================ daemon


check daemon_same daemon_same
check daemon_ends daemon_ends

check_done
