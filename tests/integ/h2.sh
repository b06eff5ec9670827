#!/bin/bash
# h2.sh: HTTP/2 from the sandbox on intercepted hosts, against one real
# sluiced in the namespace world of tests/integ/lib.sh.
#
# usage: tests/integ/h2.sh [-k] [-v]
#   -k  keep the work directory (always kept when something fails)
#   -v  print the last client output and sluiced's log tail on each failure
# Environment: top_srcdir, top_builddir (set by make check), SLUICED.
# Exit: 0 all passed, 1 something failed, 77 skipped (not root, no ip netns
# or nft, a tool missing).  Needs root: it creates namespaces.
#
# The sandbox "box" (sb) has the policy "h2": its ALPN is the default,
# [h2, http/1.1], for every intercepted host but denied.test, whose rule
# says http/1.1 alone.  Clients: curl --http2, nghttp, h2load, and tests/integ/h2client.py
# (python3-h2, and raw frames for the floods).  Each check looks at what
# the client got and at what the upstream (tests/integ/upstream.py) did or
# did not receive.
#
#   alpn_*    h2 is chosen where the policy offers it, http/1.1 where the
#             rule says so; a client offering h2 alone is refused there
#   pass_*    a GET and a POST with a body (Content-Length and none) pass
#   deny_*    a denied stream gets sluice's 403 JSON, nothing upstream
#   mux_*     one connection: a denied stream beside allowed ones, each
#             answered alone; 100 concurrent streams (h2load)
#   inject    the upstream sees the injected header, the client never
#   authority :authority other than the SNI host: 421 on that stream
#   connect   CONNECT in a stream: 400
#   ws_over_h2 extended CONNECT (RFC 8441, never offered): that stream is
#             reset, the next one served
#   audit     one request record per stream, with its stream id
#   flood_*   rapid reset, resets we are made to send, SETTINGS, PING,
#             PRIORITY and empty DATA floods, a CONTINUATION flood, an HPACK
#             bomb: GOAWAY ENHANCE_YOUR_CALM and an h2_abuse record; the
#             next connection is served
#   slow_head a header block never finished: the stream is reset
#   tiny_data DATA a byte a frame: the upload arrives whole
#   idle_mem  300 idle connections: the worker's RSS per connection
#             (printed; at most 64 KiB, ten times that under ASan)
#   window    a client that never opens its window: the session holds a
#             bounded amount, and others are served meanwhile
#   daemon_*  sluiced is the same process throughout, and ends well
# Output: "ok NAME" or "FAIL NAME: why" per check, then "N passed, N failed".

# shellcheck source=tests/integ/check.sh
. "$(dirname "$0")/check.sh"

check_needs curl nghttp h2load nghttpd openssl dnsmasq ss timeout jq

check_work h2
SAN_FACTOR=1
nm -D "$SLUICED" 2>/dev/null | grep -q __asan_init && SAN_FACTOR=10
# The clients need python3-h2 and python3-grpcio (Debian's python3 has
# them once contrib/install-deps-debian.sh ran): a missing one fails.
for p in "$PY" /usr/bin/python3; do
	"$p" -c 'import h2, grpc' 2>/dev/null && { PY=$p; break; }
done
"$PY" -c 'import h2, grpc' 2>/dev/null ||
    setup_fail "python3-h2 and python3-grpcio are needed (contrib/install-deps-debian.sh)"
PKI=$WORK/pki CA=$WORK/pki/ca.pem STATE=$WORK/state
SOCK=$WORK/control.sock POLDIR=$WORK/policy.d AUDIT=$WORK/audit.jsonl
BOX_CA=$WORK/box.pem
H2C=$top_srcdir/tests/integ/h2client.py

last="" out=""
check_failed() {
	[ -n "$SL_PID" ] && ! kill -0 "$SL_PID" 2>/dev/null &&
	    why="${why:-"$* failed"} (sluiced is no longer running)"
}
check_verbose() {
	echo "    last: $last"
	printf '%s\n' "$out" | head -20 | sed 's/^/    out: /'
	tail -5 "$WORK/sluiced.log" | sed 's/^/    log: /'
}
short() { printf '%s' "$1" | tr '\n' ' ' | head -c 600; }

RESOLVE=(--resolve allowed.test:443:198.18.1.10 --resolve denied.test:443:198.18.1.12 \
    --resolve h2up.test:443:198.18.1.17)

# h2c NAME ARGS...: h2client.py from sb to NAME (box's CA); hout holds its
# JSON lines (streams, then the connection's).
hout=""
h2c() {
	local name=$1 addr=198.18.1.10
	shift
	[ "$name" = denied.test ] && addr=198.18.1.12
	[ "$name" = h2up.test ] && addr=198.18.1.17
	last="h2client $name $(short "$*" | head -c 200)"
	hout=$(timeout 40 ip netns exec "$NS_SB" "$PY" "$H2C" "$addr:443" \
	    --name "$name" --ca "$BOX_CA" "$@" 2>&1)
	printf '%s\n' "$hout" >>"$SEEN"
	out=$hout
}
# hwant JQ...: each test holds over the last h2c's lines, slurped
hwant() {
	local t
	for t in "$@"; do
		jq -s -e "$t" >/dev/null 2>&1 <<<"$hout" ||
		    { why="$last: not ($t): $(short "$hout" | head -c 400)"; return 1; }
	done
}
req() { jq -nc --arg m "$1" --arg p "$2" '{method: $m, path: $p}'; }

# ---------------------------------------------------------------- the world and sluiced

world_init
"$top_srcdir/certs/mkpki.sh" "$PKI" $WORLD_CERT_NAMES h2up.test grpc.test >"$WORK/mkpki.log" 2>&1 ||
    setup_fail "certs/mkpki.sh failed (see $WORK/mkpki.log)"
canary_secrets "$WORK/keys" "$WORK/secrets" tok:allowed.test tok2:h2up.test \
    gtok:grpc.test ||
    setup_fail "sealing the canary secret: $(tail -1 "$WORK/seal.log" "$WORK/keygen.log" 2>/dev/null)"
CANARY_TOK=$(head -1 "$WORK/canary-values")
CANARY_TOK2=$(sed -n 2p "$WORK/canary-values")
CANARY_GTOK=$(sed -n 3p "$WORK/canary-values")
world_up >"$WORK/world.log" 2>&1 || setup_fail "world_up: $(tail -1 "$WORK/world.log")"
world_start_dns "$WORK" 2>>"$WORK/world.log" || setup_fail "dnsmasq did not start"
world_start_upstreams "$PKI" "$STATE" "$WORK" 2>>"$WORK/world.log" ||
    setup_fail "upstreams did not start (see $WORK/upstream.log)"
# h2up.test: an upstream that speaks h2 (nghttpd, verbose: its log is
# what it received), files from htdocs, uploads echoed
mkdir -p "$WORK/htdocs/pub" && printf 'hello from h2up\n' >"$WORK/htdocs/pub/a" &&
    printf 'secret door\n' >"$WORK/htdocs/inject" && printf 'echo\n' >"$WORK/htdocs/echo" ||
    setup_fail "htdocs"
world_spawn "$NS_UP" "$WORK/nghttpd.log" nghttpd -v --echo-upload -a 198.18.1.17 \
    --htdocs="$WORK/htdocs" 443 "$PKI/h2up.test.key" "$PKI/h2up.test.pem"
for i in $(seq 100); do
	[ -n "$(in_ns "$NS_UP" ss -Hltn 'src 198.18.1.17 and sport = :443' 2>/dev/null)" ] && break
	sleep 0.1
done
[ -n "$(in_ns "$NS_UP" ss -Hltn 'src 198.18.1.17 and sport = :443' 2>/dev/null)" ] ||
    setup_fail "nghttpd did not start: $(tail -2 "$WORK/nghttpd.log")"
world_dns_host h2up.test 198.18.1.17 2>>"$WORK/world.log" || setup_fail "dnsmasq does not answer h2up.test"
# grpc.test: a gRPC server (tests/integ/grpcpeer.py), every call logged
GRPC=$top_srcdir/tests/integ/grpcpeer.py
world_spawn "$NS_UP" "$WORK/grpc.out" "$PY" "$GRPC" serve 198.18.1.18:443 \
    --cert "$PKI/grpc.test.pem" --key "$PKI/grpc.test.key" --ready "$WORK/grpc.ready" \
    --log "$WORK/grpc.log"
world_wait_file "$WORK/grpc.ready" 100 || setup_fail "the gRPC server did not start: $(tail -3 "$WORK/grpc.out")"
world_dns_host grpc.test 198.18.1.18 2>>"$WORK/world.log" || setup_fail "dnsmasq does not answer grpc.test"
touch "$WORK/grpc.log"
world_load_nft >>"$WORK/world.log" 2>&1 || setup_fail "cannot load contrib/sluice.nft"

mkdir -p "$POLDIR"
cp "$top_srcdir/policy.d/default.yaml" "$POLDIR/"
cat >"$POLDIR/h2.yaml" <<EOF
# h2: box's policy (alpn: the default, h2 then http/1.1)
name: h2
egress:
  default: deny
intercept:
  - name: pub-read
    match: {host: allowed.test, methods: [GET, HEAD], path: "/pub/**"}
    action: pass
  - name: echo
    match: {host: allowed.test, path: /echo-headers}
    action: pass
  - name: upload
    match: {host: allowed.test, methods: [POST, PUT], path: /upload}
    action: pass
  - name: slow
    match: {host: allowed.test, methods: [GET], path: /slow}
    action: pass
  - name: inject-token
    match: {host: allowed.test, path: /inject}
    inject:
      set: {authorization: "Bearer {{secret:tok}}"}
  - name: reflect-token
    match: {host: allowed.test, methods: [GET, POST], path: /reflect}
    inject:
      set: {authorization: "Bearer {{secret:tok}}"}
  - name: allowed-default
    match: {host: allowed.test}
    action: deny
  - name: old-only
    match: {host: denied.test, path: "/pub/**"}
    action: pass
    alpn: [http/1.1]
  - name: h2up-pub
    match: {host: h2up.test, path: "/pub/**"}
    action: pass
  - name: h2up-echo
    match: {host: h2up.test, methods: [POST], path: /echo}
    action: pass
  - name: h2up-inject
    match: {host: h2up.test, path: /inject}
    inject:
      set: {authorization: "Bearer {{secret:tok2}}"}
  - name: h2up-default
    match: {host: h2up.test}
    action: deny
  - name: grpc-echo
    match: {host: grpc.test, methods: [POST], path: "/test.Echo/*"}
    inject:
      set: {x-api-key: "{{secret:gtok}}"}
  - name: grpc-default
    match: {host: grpc.test}
    action: deny
EOF
cat >"$WORK/sluiced.yaml" <<EOF
# generated by tests/integ/h2.sh
listen:
  transparent: ["0.0.0.0:15001", "[::]:15001"]
  dns: ["0.0.0.0:15053", "[::]:15053"]
  control: $SOCK
resolvers: ["198.18.1.2:53"]
policy_dir: $POLDIR
state_dir: $WORK/sbstate
upstream_ca: $CA
secret_dir: $WORK/secrets
gateway_key: $WORK/keys/gateway.key
audit: {path: $AUDIT, fsync: always}
workers: 2
timeouts: {handshake: 5s, idle: 30s, connect: 3s, drain: 6s}
EOF
: >"$AUDIT"
daemon_start
register_box h2

# ================================================================ alpn

alpn_h2() {
	cst=$(in_sb curl -sS --http2 --max-time 8 --cacert "$BOX_CA" "${RESOLVE[@]}" \
	    -o /dev/null -w '%{http_version} %{http_code}' https://allowed.test/pub/a 2>&1)
	out=$cst
	[ "$cst" = "2 200" ] || { why="curl --http2: $cst, want 2 200"; return 1; }
}
check alpn_h2 alpn_h2

alpn_rule_h11() {
	cst=$(in_sb curl -sS --http2 --max-time 8 --cacert "$BOX_CA" "${RESOLVE[@]}" \
	    -o /dev/null -w '%{http_version} %{http_code}' https://denied.test/pub/a 2>&1)
	out=$cst
	[ "$cst" = "1.1 200" ] || { why="curl --http2 to denied.test: $cst, want 1.1 200"; return 1; }
	# a client that speaks h2 alone is refused there (no_application_protocol)
	h2c denied.test --req "$(req GET /pub/a)"
	[ -n "$hout" ] && ! jq -s -e '.[-1].alpn == "h2"' >/dev/null 2>&1 <<<"$hout" ||
	    { why="h2 alone to denied.test: $(short "$hout")"; return 1; }
}
check alpn_rule_h11 alpn_rule_h11

# ================================================================ pass, deny

pass_get() {
	snap
	h2c allowed.test --req "$(req GET /pub/x)"
	hwant '.[0].status == 200' '.[0].body == "hello from allowed-tls\n"' \
	    '.[0].headers["x-upstream"] == "allowed-tls"' \
	    '.[0].headers | has("connection") | not' '.[-1].end == "done"' || return 1
	upx 'allowed-tls.requests=1'
}
check pass_get pass_get

pass_post() {
	local body
	body=$(head -c 60000 /dev/urandom | base64 -w0)
	snap
	# with a content-length, and without one (chunked upstream)
	h2c allowed.test --req "$(jq -nc --arg b "$body" '{method: "POST", path: "/upload", body: $b, headers: {"content-length": ($b | length | tostring)}}')" \
	    --req "$(jq -nc --arg b "$body" '{method: "POST", path: "/upload", body: $b}')"
	hwant 'map(select(.id)) | length == 2' 'map(select(.id) | .status) == [200, 200]' || return 1
	upwant allowed-tls "length == 2" \
	    "map(.body_bytes) == [${#body}, ${#body}]" \
	    'map(.headers | map({key: (.[0] | ascii_downcase), value: .[1]}) | from_entries) | .[0]["content-length"] != null and .[1]["transfer-encoding"] == "chunked"'
}
check pass_post pass_post

# A request's trailers: the trailer section of its chunked body upstream;
# what no trailer section may carry (a credential, a cookie) goes, and a
# body framed by its length carries none.
req_trailers() {
	snap
	h2c allowed.test --req "$(jq -nc '{method: "POST", path: "/upload", body: "abc", trailers: {"x-meta": "m1", "authorization": "Bearer from-the-box", "cookie": "c=1"}}')" \
	    --req "$(jq -nc '{method: "POST", path: "/upload", body: "abcd", headers: {"content-length": "4"}, trailers: {"x-meta": "m2"}}')"
	hwant 'map(select(.id) | .status) == [200, 200]' || return 1
	upwant allowed-tls 'length == 2' \
	    'map(select(.chunked)) | length == 1' \
	    'map(select(.chunked)) | .[0].trailers == ["x-meta: m1"]' \
	    'map(select(.chunked)) | .[0].body_bytes == 3' \
	    'map(select(.chunked | not)) | .[0].trailers == [] and .[0].body_bytes == 4'
}
check req_trailers req_trailers

# Trailers past what a trailer section may hold (8 KiB), and an upload
# beside them: that stream fails alone, the other passes, sluiced lives.
req_trailers_big() {
	local big
	big=$(head -c 3000 /dev/zero | tr '\0' 'v')
	snap
	h2c allowed.test --req "$(jq -nc --arg v "$big" '{method: "POST", path: "/upload", body: "abc", trailers: {"x-a": $v, "x-b": $v, "x-c": $v, "x-d": $v}}')" \
	    --req "$(jq -nc '{method: "POST", path: "/upload", body: "fine"}')"
	hwant 'map(select(.id)) | length == 2' '.[1].status == 200' \
	    '.[0].status == 400' '(.[0].body | fromjson | .message) == "trailer fields too large"' || return 1
	upwant allowed-tls 'map(select(.body_bytes == 4)) | length == 1' \
	    'map(.trailers | length) | add == 0' || return 1
	daemon_same
}
check req_trailers_big req_trailers_big

# Answers of every framing, read back from the stream's icpt: HEAD (a
# length, no body), 100 Continue before the answer, and an injected
# request's answer that echoes the credential, redacted, as the upstream
# framed it: a length, chunks, or until it closes.
answer_shapes() {
	local r
	h2c allowed.test --req "$(req HEAD /pub/h)" \
	    --req "$(jq -nc '{method: "POST", path: "/upload", body: "12345", headers: {"expect": "100-continue"}}')" \
	    --req "$(req GET /reflect)" --req "$(req GET '/reflect?chunk=7')" \
	    --req "$(req GET '/reflect?close=1')"
	hwant 'map(select(.id)) | length == 5' 'map(select(.id) | .status) == [200, 200, 200, 200, 200]' \
	    'map(select(.id) | .reset) == [null, null, null, null, null]' '.[-1].end == "done"' \
	    '.[0].body == "" and .[0].headers["content-length"] != null' \
	    '(.[1].body | fromjson | .bytes) == 5' || return 1
	for r in 2 3 4; do
		hwant ".[$r].body | test(\"REDACTED\")" ".[$r].headers[\"x-echo\"] | test(\"REDACTED\")" || return 1
	done
	! grep -qF "$CANARY_TOK" <<<"$hout" || { why="the secret reached the sandbox"; return 1; }
}
check answer_shapes answer_shapes

deny_stream() {
	snap
	h2c allowed.test --req "$(req GET /private)"
	hwant '.[0].status == 403' '(.[0].body | fromjson | .reason) == "deny-rule"' \
	    '(.[0].body | fromjson | .rule) == "intercept:allowed-default"' \
	    '.[0].headers["proxy-status"] | test("^sluice; error=http_request_denied")' || return 1
	upx 'allowed-tls.requests=0'
}
check deny_stream deny_stream

# ================================================================ one connection, many streams

mux_deny_beside() {
	snap
	h2c allowed.test --req "$(req GET /pub/one)" --req "$(req GET /private)" \
	    --req "$(req GET /pub/two)"
	hwant 'map(select(.id) | .status) == [200, 403, 200]' \
	    'map(select(.id) | .reset) == [null, null, null]' '.[-1].goaway == null' || return 1
	upwant allowed-tls 'length == 2' 'map(.path) | sort == ["/pub/one", "/pub/two"]'
}
check mux_deny_beside mux_deny_beside

mux_nghttp() {
	# nghttp resolves the URI's host itself: the sandbox's resolver is dnsmasq
	out=$(timeout 20 ip netns exec "$NS_SB" nghttp -v -n --no-verify-peer \
	    https://allowed.test/pub/n1 https://allowed.test/private 2>&1)
	last="nghttp two streams"
	grep -q ':status: 200' <<<"$out" && grep -q ':status: 403' <<<"$out" ||
	    { why="nghttp: $(short "$(grep -E ':status|GOAWAY|error' <<<"$out")")"; return 1; }
	[ "$(grep -c 'recv HEADERS frame' <<<"$out")" -ge 2 ] ||
	    { why="nghttp: fewer than two answers"; return 1; }
}
check mux_nghttp mux_nghttp

mux_h2load() {
	snap
	out=$(timeout 60 ip netns exec "$NS_SB" h2load -n 2000 -c 2 -m 20 \
	    https://allowed.test/pub/load 2>&1)
	last="h2load -n 2000 -c 2 -m 20"
	grep -q '2000 succeeded' <<<"$out" && grep -q 'status codes: 2000 2xx' <<<"$out" ||
	    { why="h2load: $(short "$(grep -E 'requests:|status codes|Application protocol' <<<"$out")")"; return 1; }
	grep -q 'Application protocol: h2' <<<"$out" || { why="h2load did not speak h2"; return 1; }
	upx 'allowed-tls.requests=2000'
}
check mux_h2load mux_h2load

# ================================================================ inject, authority, connect

inject() {
	snap
	h2c allowed.test --req "$(req GET /inject)"
	hwant '.[0].status == 200' || return 1
	upwant allowed-tls 'length == 1' \
	    "[.[0].headers[] | select(.[0] | ascii_downcase == \"authorization\") | .[1]] == [\"Bearer $CANARY_TOK\"]" || return 1
	! grep -qF "$CANARY_TOK" <<<"$hout" || { why="the secret reached the sandbox"; return 1; }
}
check inject inject

authority() {
	snap
	h2c allowed.test --req "$(jq -nc '{method: "GET", path: "/pub/x", authority: "denied.test"}')" \
	    --req "$(req GET /pub/y)"
	hwant 'map(select(.id) | .status) == [421, 200]' \
	    '(.[0].body | fromjson | .reason) == "host-mismatch"' || return 1
	upwant allowed-tls 'length == 1' '.[0].path == "/pub/y"'
}
check authority authority

connect_refused() {
	snap
	h2c allowed.test --req "$(jq -nc '{method: "CONNECT", path: null}' | sed 's/"path":null/"path":""/')" --timeout 5
	# a CONNECT stream carries no :path: the client library sends it as
	# asked, and sluice answers on that stream alone
	hwant 'map(select(.id) | (.status == 400 or .reset != null)) | all' || return 1
	upx 'allowed-tls.requests=0'
}
check connect_refused connect_refused

ws_over_h2() {
	# RFC 8441 is not offered (no SETTINGS_ENABLE_CONNECT_PROTOCOL): an
	# extended CONNECT is refused on its stream, nothing goes upstream,
	# and the connection serves the next stream
	snap
	h2c allowed.test --req "$(jq -nc '{method: "CONNECT", path: "/ws", protocol: "websocket"}')" \
	    --req "$(req GET /pub/after-ws)" --timeout 5
	hwant '.[0].status == null and .[0].reset != null' '.[1].status == 200' || return 1
	upwant allowed-tls 'length == 1' '.[0].path == "/pub/after-ws"'
}
check ws_over_h2 ws_over_h2

audit_streams() {
	local off
	off=$(audit_lines)
	h2c allowed.test --req "$(req GET /pub/a1)" --req "$(req GET /private)"
	audit_has "$off" 'type=request path=/pub/a1 stream=1 action=pass status=200' \
	    'type=request path=/private stream=3 action=deny status=403'
}
check audit_streams audit_streams

# ================================================================ an upstream that speaks h2

# nghttpd's sessions so far ([id=N] of its log)
up_sessions() { grep -o '^\[id=[0-9]*\]' "$WORK/nghttpd.log" | sort -u | wc -l; }
# the requests nghttpd got for PATH
up_got() { grep -c ":path: $1\$" "$WORK/nghttpd.log"; }

up_h2_pass() {
	h2c h2up.test --req "$(req GET /pub/a)"
	hwant '.[0].status == 200' '.[0].body == "hello from h2up\n"' || return 1
	[ "$(up_got /pub/a)" = 1 ] || { why="nghttpd got /pub/a $(up_got /pub/a) times"; return 1; }
}
check up_h2_pass up_h2_pass

# Trailers to an h2 upstream: HEADERS after the last DATA.
up_h2_trailers() {
	h2c h2up.test --req "$(jq -nc '{method: "POST", path: "/echo?t=1", body: "xyz", trailers: {"x-meta": "up-m3", "authorization": "Bearer no"}}')"
	hwant '.[0].status == 200' || return 1
	grep -q 'x-meta: up-m3$' "$WORK/nghttpd.log" ||
	    { why="nghttpd got no x-meta trailer: $(grep -A12 'path: /echo?t=1' "$WORK/nghttpd.log" | short)"; return 1; }
	! grep -q 'authorization: Bearer no$' "$WORK/nghttpd.log" ||
	    { why="an authorization trailer reached the upstream"; return 1; }
}
check up_h2_trailers up_h2_trailers

up_h2_mux() {
	local before after
	before=$(up_sessions)
	h2c h2up.test $(for i in $(seq 20); do printf -- '--req {"path":"/pub/a?n=%d"} ' "$i"; done) \
	    --req "$(req GET /private)"
	hwant 'map(select(.id)) | length == 21' \
	    '[map(select(.id) | .status) | .[] | select(. == 200)] | length == 20' \
	    '[map(select(.id) | .status) | .[] | select(. == 403)] | length == 1' || return 1
	after=$(up_sessions)
	# one more session at most (the first stream's connection carries the rest)
	[ $((after - before)) -le 2 ] || { why="nghttpd sessions $before -> $after for 20 streams"; return 1; }
	! grep -q ':path: /private$' "$WORK/nghttpd.log" || { why="the denied stream reached the upstream"; return 1; }
}
check up_h2_mux up_h2_mux

up_h2_inject() {
	h2c h2up.test --req "$(req GET /inject)"
	hwant '.[0].status == 200' '.[0].body == "secret door\n"' || return 1
	grep -qF "authorization: Bearer $CANARY_TOK2" "$WORK/nghttpd.log" ||
	    { why="nghttpd did not get the injected header"; return 1; }
	! grep -qF "$CANARY_TOK2" <<<"$hout" || { why="the secret reached the sandbox"; return 1; }
}
check up_h2_inject up_h2_inject

up_h2_post() {
	local body
	body=$(head -c 90000 /dev/urandom | base64 -w0)
	h2c h2up.test --req "$(jq -nc --arg b "$body" '{method: "POST", path: "/echo", body: $b}')"
	hwant '.[0].status == 200' || return 1
	jq -s -e --arg b "$body" '.[0].body == $b' >/dev/null <<<"$hout" ||
	    { why="the echoed body differs ($(jq -s '.[0].body | length' <<<"$hout") bytes back, ${#body} sent)"; return 1; }
}
check up_h2_post up_h2_post

up_h2_load() {
	local before after
	before=$(up_sessions)
	out=$(timeout 60 ip netns exec "$NS_SB" h2load -n 3000 -c 2 -m 100 \
	    https://h2up.test/pub/a 2>&1)
	last="h2load -n 3000 -c 2 -m 100 to h2up.test"
	grep -q '3000 succeeded' <<<"$out" && grep -q 'status codes: 3000 2xx' <<<"$out" ||
	    { why="h2load: $(short "$(grep -E 'requests:|status codes' <<<"$out")")"; return 1; }
	after=$(up_sessions)
	# 200 streams at once: the first few open connections, the rest share them
	[ $((after - before)) -le 40 ] || { why="nghttpd sessions $before -> $after"; return 1; }
}
check up_h2_load up_h2_load

# ================================================================ gRPC

gout=""
# gcall METHOD [ARGS...]: grpcpeer.py call from sb to grpc.test (box's CA)
gcall() {
	last="grpc $*"
	# by name: sluice lets grpc.test reach only the address its DNS gave
	gout=$(timeout 40 ip netns exec "$NS_SB" "$PY" "$GRPC" call grpc.test:443 \
	    --name grpc.test --ca "$BOX_CA" --method "$@" 2>&1 | tail -1)
	printf '%s\n' "$gout" >>"$SEEN"
	out=$gout
}
gwant() {
	local t
	for t in "$@"; do
		jq -e "$t" >/dev/null 2>&1 <<<"$gout" ||
		    { why="$last: not ($t): $(short "$gout")"; return 1; }
	done
}
# the calls grpc.test got for METHOD
grpc_got() { grep -c "\"method\": \"$1\"" "$WORK/grpc.log"; }
KEY_SHA=""

grpc_unary() {
	KEY_SHA=$(printf '%s' "$CANARY_GTOK" | sha256sum | cut -d' ' -f1)
	gcall /test.Echo/Unary --msg hello
	gwant '.code == 0' '(.responses[0] | fromjson | .got) == "hello"' \
	    "(.responses[0] | fromjson | .auth_sha256) == \"$KEY_SHA\"" \
	    '.trailing["x-trailer"] == "yes"' || return 1
	! grep -qF "$CANARY_GTOK" <<<"$gout" || { why="the secret reached the sandbox"; return 1; }
}
check grpc_unary grpc_unary

grpc_denied() {
	local before
	before=$(grpc_got /test.Admin/Delete)
	gcall /test.Admin/Delete
	gwant '.code == 7' '.details | test("sluice")' '.details | test("deny-rule")' || return 1
	[ "$(grpc_got /test.Admin/Delete)" = "$before" ] || { why="the denied call reached the server"; return 1; }
}
check grpc_denied grpc_denied

grpc_streams() {
	gcall /test.Echo/ServerStream --n 50
	gwant '.code == 0' '.responses | length == 50' '.responses[49] == "m49"' \
	    '.trailing["x-trailer"] == "yes"' || return 1
	gcall /test.Echo/ClientStream --msg a --msg b --msg c
	gwant '.code == 0' '.responses == ["a|b|c"]' '.trailing["x-trailer"] == "yes"' || return 1
	gcall /test.Echo/Bidi --msg one --msg two --msg three
	gwant '.code == 0' '.responses == ["ONE", "TWO", "THREE"]' '.trailing["x-trailer"] == "yes"'
}
check grpc_streams grpc_streams

grpc_beside() {
	# a denied call and an allowed one at once, on one channel
	gcall /test.Echo/Unary --msg first --parallel /test.Admin/Delete
	gwant '.code == 0' '(.responses[0] | fromjson | .got) == "first"' '.other.code == 7'
}
check grpc_beside grpc_beside

grpc_audit() {
	local off
	off=$(audit_lines)
	gcall /test.Echo/Unary --msg audited
	gwant '.code == 0' || return 1
	audit_has "$off" 'type=request path=/test.Echo/Unary action=inject host=grpc.test stream=~^[0-9]+$' \
	    'type=response status=200 stream=~^[0-9]+$'
}
check grpc_audit grpc_audit

# The upstream echoes the credential in a message and in its trailers: the
# message's bytes are masked one for one (its length prefix stays right,
# the call succeeds), the trailer is redacted.
grpc_leak() {
	local n=${#CANARY_GTOK}
	gcall /test.Echo/Leak --msg x
	gwant '.code == 0' ".responses[0] | fromjson | .len == $n" \
	    ".responses[0] | fromjson | .key | length == $n" \
	    '.responses[0] | fromjson | .key | startswith("[REDACTED]")' \
	    '.trailing["x-leak"] | test("REDACTED")' '.trailing["x-trailer"] == "yes"' || return 1
	! grep -qF "$CANARY_GTOK" <<<"$gout" || { why="the secret reached the sandbox"; return 1; }
}
check grpc_leak grpc_leak

# An injected gRPC call asks for uncompressed messages, whatever the
# sandbox said; an answer that is compressed anyway cannot be searched
# for the credential: refused, as a gRPC status.
grpc_encoding() {
	local body
	body=$(printf '\0\0\0\0\2hi' | base64 -w0)
	h2c h2up.test --req "$(jq -nc '{method: "POST", path: "/inject?g=1", body: "xx", headers: {"content-type": "application/grpc", "grpc-accept-encoding": "gzip"}}')"
	hwant '.[0].status != null' || return 1
	grep -A25 'path: /inject?g=1$' "$WORK/nghttpd.log" | grep -q 'grpc-accept-encoding: identity$' ||
	    { why="no grpc-accept-encoding: identity upstream: $(grep -A25 'path: /inject?g=1$' "$WORK/nghttpd.log" | grep -E 'grpc|te:' | short)"; return 1; }
	! grep -A25 'path: /inject?g=1$' "$WORK/nghttpd.log" | grep -q 'grpc-accept-encoding: gzip' ||
	    { why="the sandbox's grpc-accept-encoding went upstream"; return 1; }
	grep -A25 'path: /inject?g=1$' "$WORK/nghttpd.log" | grep -q 'te: trailers$' ||
	    { why="no te: trailers upstream"; return 1; }
	h2c allowed.test --req "$(jq -nc '{method: "POST", path: "/reflect?ge=gzip", body: "xx", headers: {"content-type": "application/grpc"}}')"
	hwant '.[0].status == 200' '.[0].headers["grpc-status"] == "14"' \
	    '.[0].headers["grpc-message"] | test("response-not-redactable")' '.[0].body == ""' || return 1
	! grep -qF "$CANARY_TOK" <<<"$hout" || { why="the secret reached the sandbox"; return 1; }
}
check grpc_encoding grpc_encoding

# ================================================================ floods

# flood KIND COUNT: the connection gets GOAWAY ENHANCE_YOUR_CALM (11), an
# h2_abuse record of KIND's name is written, and h2 is served after.
flood() {
	local kind=$1 n=$2 rec=$3 off
	off=$(audit_lines)
	h2c allowed.test --flood "$kind" --count "$n" --timeout 15
	hwant '.[-1].goaway == 11' || return 1
	audit_has "$off" "type=h2_abuse kind=$rec host=allowed.test sandbox=box" || return 1
	# and counted: sluice_connections_total{action="h2-abuse",reason=KIND}
	api GET /metrics
	grep -qE "^sluice_connections_total\{action=\"h2-abuse\",reason=\"$rec\"\} [1-9]" <<<"$out" ||
	    { why="no h2-abuse $rec in /metrics: $(grep h2-abuse <<<"$out" | short)"; return 1; }
	h2c allowed.test --req "$(req GET /pub/after)"
	hwant '.[0].status == 200' || return 1
	daemon_same
}
check flood_rapid_reset flood rapid-reset 5000 rapid-reset
check flood_made_you_reset flood made-you-reset 2000 made-to-reset
check flood_ping flood ping 20000 ping-flood
check flood_settings flood settings 20000 settings-flood
check flood_priority flood priority 20000 priority-flood
check flood_empty_data flood empty-data 5000 empty-frame-flood
check flood_continuation flood continuation 100 continuation-flood
check flood_hpack_bomb flood hpack-bomb 1 header-list-too-large

flood_streams() {
	# more streams than SETTINGS_MAX_CONCURRENT_STREAMS: the extra ones
	# are refused (RST_STREAM), sluiced lives
	h2c allowed.test --flood streams --count 300 --timeout 10
	hwant '.[-1].rst >= 1 or .[-1].goaway == 11' || return 1
	h2c allowed.test --req "$(req GET /pub/after)"
	hwant '.[0].status == 200' || return 1
	daemon_same
}
check flood_streams flood_streams

slow_head() {
	# a header block never finished: its stream is reset within
	# timeouts.handshake (5 s here), not kept
	h2c allowed.test --flood slow-head --count 1 --timeout 9
	hwant '.[-1].rst >= 1' || return 1
	daemon_same
}
check slow_head slow_head

tiny_data() {
	# 20000 DATA frames of a byte each, then the end: one upload, whole
	snap
	h2c allowed.test --flood tiny-data --count 20000 --timeout 10
	upwant allowed-tls 'length == 1' '.[0].body_bytes == 20000' || return 1
	daemon_same
}
check tiny_data tiny_data

window() {
	# 50 streams of 200 KB each, and a window of 0: nothing can come
	h2c allowed.test --window 0 --timeout 4 $(for i in $(seq 50); do printf -- '--req {"path":"/pub/big%d"} ' "$i"; done)
	hwant '.[-1].end == "timeout"' 'map(select(.id) | .body) | all(. == "")' || return 1
	h2c allowed.test --req "$(req GET /pub/meanwhile)"
	hwant '.[0].status == 200' || return 1
	daemon_same
}
check window window

# KiB of the worker's RSS for each idle HTTP/2 connection (printed, and
# bounded: a session holds no request state while idle)
idle_mem() {
	local wpid before after ipid n=300
	api GET /v1/status
	wpid=$(jq '.processes[] | select(.role == "worker") | .pid' <<<"$out")
	before=$(awk '/^VmRSS/ {print $2}' "/proc/$wpid/status")
	rm -f "$WORK/idle.ready"
	ip netns exec "$NS_SB" "$PY" "$H2C" 198.18.1.10:443 --name allowed.test \
	    --ca "$BOX_CA" --idle $n --ready "$WORK/idle.ready" --timeout 6 \
	    >"$WORK/idle.out" 2>&1 &
	ipid=$!
	world_wait_file "$WORK/idle.ready" 300 ||
	    { why="the idle connections: $(cat "$WORK/idle.out")"; kill $ipid; return 1; }
	sleep 1
	after=$(awk '/^VmRSS/ {print $2}' "/proc/$wpid/status")
	wait $ipid
	last="$n idle h2 connections"
	echo "    idle h2: $(( (after - before) / n )) KiB a connection ($before -> $after KiB for $n)"
	# 41 KiB in an -O2 build; AddressSanitizer's redzones and quarantine
	# make it ten times that
	[ $(( (after - before) / n )) -le $((64 * ${SAN_FACTOR:-1})) ] ||
	    { why="$(( (after - before) / n )) KiB per idle connection"; return 1; }
	daemon_same
}
check idle_mem idle_mem

check daemon_same daemon_same

# SIGTERM: an HTTP/2 connection hears GOAWAY (NO_ERROR) at once, its
# stream under way still gets its whole answer, and sluiced ends as soon
# as that connection is done, not at timeouts.drain (6 s).
drain_goaway() {
	local t0 n=0 npid
	# nghttp: python3-h2 reads nothing after a GOAWAY
	timeout 20 ip netns exec "$NS_SB" nghttp -v -n --no-verify-peer \
	    'https://allowed.test/slow?ms=2500' >"$WORK/drain.out" 2>&1 &
	npid=$!
	sleep 1		# the request is upstream, waiting
	t0=$(date +%s)
	kill -TERM "$SL_PID"
	wait $npid
	out=$(cat "$WORK/drain.out")
	last="nghttp, a stream under way at SIGTERM"
	# GOAWAY first (its details on the next line), then the answer, whole
	grep -A1 'recv GOAWAY frame' <<<"$out" | grep -q 'error_code=NO_ERROR' ||
	    { why="no GOAWAY NO_ERROR: $(short "$(grep -A1 -E 'GOAWAY|:status' <<<"$out")")"; return 1; }
	[ "$(grep -n 'recv GOAWAY frame' <<<"$out" | head -1 | cut -d: -f1)" -lt \
	    "$(grep -n ':status: 200' <<<"$out" | head -1 | cut -d: -f1)" ] 2>/dev/null ||
	    { why="no answer, or GOAWAY came after it: $(short "$(grep -A1 -E 'GOAWAY|:status' <<<"$out")")"; return 1; }
	grep -A1 'recv DATA frame' <<<"$out" | grep -q 'END_STREAM' ||
	    { why="the stream did not end whole: $(short "$(grep -A1 -E 'DATA|RST' <<<"$out")")"; return 1; }
	while kill -0 "$SL_PID" 2>/dev/null && [ $n -lt 40 ]; do
		sleep 0.1; n=$((n + 1))
	done
	kill -0 "$SL_PID" 2>/dev/null &&
	    { why="sluiced still runs $(( $(date +%s) - t0 )) s after SIGTERM, its last connection done"; return 1; }
	daemon_ends
}
check drain_goaway drain_goaway
check_done
