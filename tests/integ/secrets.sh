#!/bin/bash
# secrets.sh: integration tests of sealed secrets, credential injection,
# rotation and response redaction (SPEC "Secrets", "Policies: intercept ->
# inject"), against one real sluiced in the namespace world of
# tests/integ/lib.sh, with keys and sealed files made by the real
# sluicectl.
#
# usage: tests/integ/secrets.sh [-k] [-v]
#   -k  keep the work directory (always kept when something fails)
#   -v  print the last client output and sluiced's log tail on each failure
# Environment: top_srcdir, top_builddir (set by make check), SLUICED,
# SLUICECTL (default $top_builddir/sluiced, sluicectl), PYTHON.
# Exit: 0 all passed, 1 something failed, 77 skipped (not root, no ip netns
# or nft, a tool missing).  Needs root: it creates namespaces.
#
# The sandbox "box" (sb) has the policy "sec": on allowed.test, /reflect
# and /echo-headers get "Authorization: Bearer {{secret:tok}}" (the
# sandbox's own Authorization and Cookie go), /basic gets a Basic
# credential from {{secret:basic | base64}}, /unbound names a secret bound
# to other.test only, /missing one that does not exist.  The upstream
# (tests/integ/upstream.py) records what it receives and /reflect sends
# the credential back in headers and body, as is and encoded, framed as
# asked.  Every check looks at both ends: what the upstream received (the
# real value) and what the sandbox got (never the value).
#
#   inj_*     injection: replaced client values, Basic, host binding,
#             missing secrets, secrets-off reasons, the audit records
#   red_*     redaction in headers and bodies: Content-Length, chunked in
#             3-byte chunks, close-delimited, HEAD, a content coding
#   rot_*     rotation through the folder and the API while one kept-alive
#             connection stays open; a request in flight keeps its version
#   bad_*     refused blobs: tampered, lower version, sealed to another
#             key, another name; the version in force stays
#   key_*     a second gateway key opens what is sealed to it
#   api_*     GET lists names, versions, fingerprints, hosts; DELETE
#   leak_*    every byte sluiced wrote (log, audit, metrics, API answers)
#             and every byte the sandbox received: no secret value, in any
#             form
#   daemon_*  the same sluiced throughout, and a clean end
# Output: "ok NAME" or "FAIL NAME: why" per check, then "N passed, N failed".

# shellcheck source=tests/integ/check.sh
. "$(dirname "$0")/check.sh"

check_needs curl openssl dnsmasq dig timeout jq base64
check_work secrets
[ -x "$SLUICECTL" ] || setup_fail "$SLUICECTL not built"
PKI=$WORK/pki CA=$WORK/pki/ca.pem STATE=$WORK/state KEYS=$WORK/keys
SOCK=$WORK/control.sock POLDIR=$WORK/policy.d AUDIT=$WORK/audit.jsonl
SECDIR=$WORK/secrets BOX_CA=$WORK/box.pem

last="" out=""
check_verbose() {
	echo "    last: $last"
	printf '%s\n' "$out" | head -20 | sed 's/^/    out: /'
	tail -5 "$WORK/sluiced.log" | sed 's/^/    log: /'
}
short() { printf '%s' "$1" | tr '\n' ' ' | head -c 600; }

# Secret values: random for each run, with bytes that percent-encoding and
# base64 alphabets treat differently.
rnd() { head -c 12 /dev/urandom | base64 | tr -d '\n=' | tr '+/' 'xy'; }
TOK1="t1-$(rnd)/+=&?$(rnd)" TOK2="t2-$(rnd)/+=&?$(rnd)" TOK3="t3-$(rnd)~!$(rnd)"
TOK4="t4-$(rnd)%$(rnd)" TOK5="t5-$(rnd):$(rnd)" TOKX="tx-$(rnd)@$(rnd)"
BASIC="user-$(rnd):pw/$(rnd)" OTHER="o-$(rnd)$(rnd)"
METER="m-$(rnd)" GMETER="g-$(rnd)" PHV="p-$(rnd)/+&=$(rnd)"
AWSK="ak-$(rnd)" AWST="st-$(rnd)$(rnd)"
ALL_VALUES=("$TOK1" "$TOK2" "$TOK3" "$TOK4" "$TOK5" "$TOKX" "$BASIC" "$OTHER" "$METER" "$GMETER" "$PHV" "$AWSK" "$AWST")
printf '%s\n' "${ALL_VALUES[@]}" >"$WORK/canary-values"

# ---------------------------------------------------------------- keys and sealing

# seal PUB NAME VERSION VALUE [HOST...]: a sealed blob on stdout
seal() {
	local pub=$1 name=$2 ver=$3 val=$4 h
	local -a hosts=()
	shift 4
	for h in "$@"; do hosts+=(--host "$h"); done
	printf '%s' "$val" | "$SLUICECTL" seal --pub "$pub" --name "$name" \
	    --secret-version "$ver" "${hosts[@]}" 2>>"$WORK/seal.log"
}
# put_file NAME VERSION VALUE [PUB]: sealed into the folder by a rename
put_file() {
	seal "${4:-$KEYS/gateway.pub}" "$1" "$2" "$3" allowed.test >"$WORK/.tmp.sealed" &&
	    mv "$WORK/.tmp.sealed" "$SECDIR/$1.sealed"
}
# wait_version NAME VERSION: the daemon runs it (3 s at most)
wait_version() {
	local i v
	for i in $(seq 30); do
		api GET "/v1/secrets/$1"
		v=$(jq -r .version <<<"$out" 2>/dev/null)
		[ "$v" = "$2" ] && return 0
		sleep 0.1
	done
	why="secret $1 is at version $v, want $2"
	return 1
}

# ---------------------------------------------------------------- clients in the sandbox

RESOLVE=(--resolve allowed.test:443:198.18.1.10 --resolve other.test:443:198.18.1.11
    --resolve other.test:8443:198.18.1.11 --resolve denied.test:80:198.18.1.12)

# forms VALUE: the value as is and in the forms the tests look for
forms() {
	"$PY" - "$1" <<-'EOF'
	import base64, html, json, sys, urllib.parse
	s = sys.argv[1]
	v = s.encode()
	keep = lambda c: c.isalnum() or c in "-._~"
	for f in (v, base64.b64encode(v).rstrip(b"="),
	          base64.urlsafe_b64encode(v).rstrip(b"="),
	          urllib.parse.quote(v, safe="").encode(),
	          urllib.parse.quote_plus(v).encode(),
	          v.hex().encode(), v.hex().upper().encode(), s.upper().encode(),
	          json.dumps(s)[1:-1].replace("/", "\\/").encode(),
	          "".join(c if keep(c) else "\\u%04x" % ord(c) for c in s).encode(),
	          html.escape(s).encode(),
	          "".join(c if keep(c) else "&#%d;" % ord(c) for c in s).encode()):
	    print(f.decode())
	EOF
}
# no_value FILE VALUE...: FILE holds none of the values, in any form
no_value() {
	local f=$1 v x
	shift
	for v in "$@"; do
		while IFS= read -r x; do
			[ -n "$x" ] || continue
			if grep -aqF -- "$x" "$f"; then
				why="$f holds a secret (in the form ${x:0:6}...)"
				return 1
			fi
		done < <(forms "$v")
	done
}

# ---------------------------------------------------------------- the world and sluiced

world_init
"$top_srcdir/certs/mkpki.sh" "$PKI" $WORLD_CERT_NAMES >"$WORK/mkpki.log" 2>&1 ||
    setup_fail "certs/mkpki.sh failed (see $WORK/mkpki.log)"
world_up >"$WORK/world.log" 2>&1 || setup_fail "world_up: $(tail -1 "$WORK/world.log")"
world_start_dns "$WORK" 2>>"$WORK/world.log" || setup_fail "dnsmasq did not start"
world_start_upstreams "$PKI" "$STATE" "$WORK" 2>>"$WORK/world.log" ||
    setup_fail "upstreams did not start (see $WORK/upstream.log)"
world_load_nft >>"$WORK/world.log" 2>&1 || setup_fail "cannot load contrib/sluice.nft"

"$SLUICECTL" keygen --out "$KEYS" >"$WORK/keygen.log" 2>&1 ||
    setup_fail "sluicectl keygen: $(tail -1 "$WORK/keygen.log")"
"$SLUICECTL" keygen --out "$WORK/keys2" >>"$WORK/keygen.log" 2>&1 &&
"$SLUICECTL" keygen --out "$WORK/keys3" >>"$WORK/keygen.log" 2>&1 ||
    setup_fail "sluicectl keygen (second and third): $(tail -1 "$WORK/keygen.log")"
mkdir -p "$SECDIR" "$POLDIR"
put_file tok 1 "$TOK1" || setup_fail "sealing tok: $(tail -1 "$WORK/seal.log")"
seal "$KEYS/gateway.pub" basic 1 "$BASIC" allowed.test >"$SECDIR/basic.sealed" &&
seal "$KEYS/gateway.pub" other 1 "$OTHER" other.test >"$SECDIR/other.sealed" &&
seal "$KEYS/gateway.pub" metered 1 "$METER" allowed.test >"$SECDIR/metered.sealed" &&
seal "$KEYS/gateway.pub" gmeter 1 "$GMETER" allowed.test >"$SECDIR/gmeter.sealed" &&
seal "$KEYS/gateway.pub" phk 1 "$PHV" allowed.test >"$SECDIR/phk.sealed" &&
printf '{"access_key_id": "AKIDTEST", "secret_access_key": "%s", "session_token": "%s"}\n' \
    "$AWSK" "$AWST" >"$WORK/awsx.json" &&
"$SLUICECTL" seal --pub "$KEYS/gateway.pub" --name awsx --kind json --host allowed.test \
    <"$WORK/awsx.json" >"$SECDIR/awsx.sealed" 2>>"$WORK/seal.log" ||
    setup_fail "sealing: $(tail -1 "$WORK/seal.log")"

# mTLS: a client CA, the client's key and certificate (sealed together as
# one pem secret bound to other.test), and an upstream that requires them
{ openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=client-ca -keyout "$WORK/cca.key" -out "$WORK/cca.pem" &&
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=sluice-client \
    -keyout "$WORK/cli.key" -out "$WORK/cli.csr" &&
  openssl x509 -req -in "$WORK/cli.csr" -CA "$WORK/cca.pem" -CAkey "$WORK/cca.key" \
    -CAcreateserial -days 2 -out "$WORK/cli.pem"; } >"$WORK/cca.log" 2>&1 ||
    setup_fail "the client certificate: $(tail -1 "$WORK/cca.log")"
cat "$WORK/cli.key" "$WORK/cli.pem" | "$SLUICECTL" seal --pub "$KEYS/gateway.pub" --name ccert \
    --kind pem --host other.test >"$SECDIR/ccert.sealed" 2>>"$WORK/seal.log" ||
    setup_fail "sealing ccert: $(tail -1 "$WORK/seal.log")"
# the key's body, for the leak scan
CLIKEY=$(sed -n 2p "$WORK/cli.key")
ALL_VALUES+=("$CLIKEY")
printf '%s\n' "$CLIKEY" >>"$WORK/canary-values"
world_spawn "$NS_UP" "$WORK/upstream-mtls.log" "$PY" "$UPSTREAM_PY" serve --state-dir "$STATE" \
    --ready "$STATE/ready-mtls" "mtls-tls=tls;198.18.1.11:8443;$PKI/other.test.pem;$PKI/other.test.key;$WORK/cca.pem"
world_wait_file "$STATE/ready-mtls" 100 || setup_fail "the mTLS upstream did not start"

cp "$top_srcdir/policy.d/default.yaml" "$POLDIR/"
cat >"$POLDIR/sec.yaml" <<EOF
# sec: box's policy
name: sec
egress:
  default: deny
  allow:
    - domain: denied.test     # plain HTTP, passed through: ph_plain
budgets:
  - {secret: metered, requests_per_minute: 30}
intercept:
  - name: metered
    match: {host: allowed.test, path: /metered}
    inject:
      set: {x-api-key: "{{secret:metered}}"}
  - name: gmetered
    match: {host: allowed.test, path: /gmetered}
    inject:
      set: {x-api-key: "{{secret:gmeter}}"}
  - name: ph
    match: {host: allowed.test, path: /echo-headers, query: {ph: "1"}}
    inject:
      placeholders: [phk]
  - name: sigv4
    match: {host: allowed.test, path: "/sigv4/**"}
    inject:
      sigv4: {secret: awsx, service: execute-api, region: eu-west-1}
  - name: s3
    match: {host: allowed.test, path: "/s3/**"}
    inject:
      sigv4: {secret: awsx, service: s3, region: us-east-1}
  - name: cookies
    match: {host: allowed.test, path: /reflect, query: {keep: "1"}}
    inject:
      set: {authorization: "Bearer {{secret:tok}}"}
      keep_cookies: true
  - name: bearer
    match: {host: allowed.test, path: /reflect}
    inject:
      set: {authorization: "Bearer {{secret:tok}}"}
      remove: [cookie]
  - name: echo
    match: {host: allowed.test, path: /echo-headers}
    inject:
      set: {authorization: "Bearer {{secret:tok}}", x-both: "a={{ secret:tok }};b={{secret:basic|base64}}"}
      remove: [cookie]
  - name: basic
    match: {host: allowed.test, path: /basic}
    inject:
      set: {authorization: "Basic {{secret:basic | base64}}"}
  - name: unbound
    match: {host: allowed.test, path: /unbound}
    inject:
      set: {x-api-key: "{{secret:other}}"}
  - name: missing
    match: {host: allowed.test, path: /missing}
    inject:
      set: {x-api-key: "{{secret:nope}}"}
  - name: pub
    match: {host: allowed.test, path: "/pub/**"}
    action: pass
  - name: mtls
    match: {host: other.test, path: "/mtls/**"}
    action: pass
    upstream: {client_cert: ccert}
  - name: mtls-inj
    match: {host: other.test, path: /mtls-inj}
    inject:
      set: {x-api-key: "{{secret:other}}"}
    upstream: {client_cert: ccert}
  - name: plain
    match: {host: other.test, path: "/plain/**"}
    action: pass
  - name: mtls-far
    match: {host: allowed.test, path: /mtls-far}
    action: pass
    upstream: {client_cert: ccert}
EOF
cat >"$WORK/sluiced.yaml" <<EOF
# generated by tests/integ/secrets.sh
listen:
  transparent: ["0.0.0.0:15001", "[::]:15001"]
  dns: ["0.0.0.0:15053", "[::]:15053"]
  control: $SOCK
  metrics: "127.0.0.1:19464"
resolvers: ["198.18.1.2:53"]
policy_dir: $POLDIR
state_dir: $WORK/sbstate
secret_dir: $SECDIR
gateway_key: [$KEYS/gateway.key, $WORK/keys2/gateway.key]
upstream_ca: $CA
audit: {path: $AUDIT, fsync: always}
workers: 2
timeouts: {handshake: 5s, idle: 30s, connect: 3s}
budgets:
  - {secret: gmeter, requests_per_day: 2}
EOF
: >"$AUDIT"
"$SLUICED" -c "$WORK/sluiced.yaml" --check >"$WORK/check.log" 2>&1 ||
    setup_fail "sluiced --check: $(tail -2 "$WORK/check.log")"
daemon_start
register_box sec
SECTL=("$SLUICECTL" --socket "$SOCK")

# ================================================================ inj

# the upstream gets the real value; the sandbox's own Authorization and
# Cookie never reach it; Accept-Encoding asks for no coding
inj_replaces() {
	snap
	hc -H 'Authorization: Bearer from-the-sandbox' -H 'Cookie: sid=abc' \
	    -H 'Accept-Encoding: gzip' https://allowed.test/echo-headers
	cwant 200 || return 1
	upwant allowed-tls 'length == 1' \
	    "[.[0].headers[] | select(.[0] | ascii_downcase == \"authorization\") | .[1]] == [\"Bearer $TOK1\"]" \
	    '[.[0].headers[] | select(.[0] | ascii_downcase == "cookie")] == []' \
	    '[.[0].headers[] | select(.[0] | ascii_downcase == "accept-encoding") | .[1]] == ["identity"]' \
	    "[.[0].headers[] | select(.[0] | ascii_downcase == \"x-both\") | .[1]] == [\"a=$TOK1;b=$(printf '%s' "$BASIC" | base64 -w0)\"]"
}
# what the echo sent back names the credential: the sandbox sees it redacted
inj_echo_redacted() {
	grep -q 'REDACTED' "$WORK/c.b" || { why="no [REDACTED] in the echo: $(short "$(head -c 300 "$WORK/c.b")")"; return 1; }
	no_value "$WORK/c.b" "$TOK1" "$BASIC"
}
# The answer's head comes in two TLS records, read apart, the echo of
# the credential in the first: the sandbox still gets one whole head with
# the echo redacted, never the first record's bytes as they came.
inj_split_head() {
	hc "https://allowed.test/reflect?split=-4"
	cwant 200 || return 1
	[ "$(grep -c '^HTTP/' <<<"$chdrs")" = 1 ] ||
	    { why="the head came garbled: $(short "$chdrs")"; return 1; }
	grep -qi '^x-echo: .*REDACTED' <<<"$chdrs" ||
	    { why="the echo in the head is not redacted: $(short "$chdrs")"; return 1; }
	no_value "$WORK/c.h" "$TOK1" "$BASIC" && no_value "$WORK/c.b" "$TOK1" "$BASIC"
}
inj_basic() {
	snap
	hc https://allowed.test/basic
	cwant 200 || return 1
	upwant allowed-tls "[.[0].headers[] | select(.[0] | ascii_downcase == \"authorization\") | .[1]] == [\"Basic $(printf '%s' "$BASIC" | base64 -w0)\"]"
}
inj_unbound() {
	snap
	hc https://allowed.test/unbound
	denied intercept:unbound secret-host-binding || return 1
	jq -e '.message | test("other")' "$WORK/c.b" >/dev/null || { why="the message does not name the secret"; return 1; }
	upx 'allowed-tls.accepted=0 allowed-tls.requests=0'
}
inj_missing() {
	snap
	hc https://allowed.test/missing
	cwant 503 '.reason == "secret-unavailable"' '.rule == "intercept:missing"' || return 1
	upx 'allowed-tls.requests=0'
}
# the request record, with name, version and fingerprint, comes before
# the response record; neither holds a value
inj_audit() {
	local off fp
	off=$(audit_lines)
	hc https://allowed.test/reflect
	cwant 200 || return 1
	api GET /v1/secrets/tok
	fp=$(jq -r .fingerprint <<<"$out")
	audit_has "$off" "type=request action=inject rule=intercept:bearer sandbox=box host=allowed.test path=/reflect policy=sec rid=~. secrets=~$fp" \
	    'type=response rule=intercept:bearer status=200 rid=~. redacted=~^[1-9]' \
	    'type=secret_reflected rule=intercept:bearer in_head=~^[1-9] in_body=~^[1-9]' || return 1
	"$PY" - "$AUDIT" "$off" "$fp" <<-'EOF' || { why="request and response records: $(short "$(tail -3 "$AUDIT")")"; return 1; }
	import json, sys
	recs = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()[int(sys.argv[2]):]]
	req = [r for r in recs if r["type"] == "request" and r.get("rule") == "intercept:bearer"]
	resp = [r for r in recs if r["type"] == "response" and r["rid"] == req[0]["rid"]]
	want = [{"name": "tok", "version": 1, "fingerprint": sys.argv[3]}]
	sys.exit(0 if req and resp and req[0]["seq"] < resp[0]["seq"] and
	         req[0]["secrets"] == want else 1)
	EOF
}

check inj_replaces inj_replaces
check inj_echo_redacted inj_echo_redacted
check inj_split_head inj_split_head
check inj_basic inj_basic
check inj_unbound inj_unbound
check inj_missing inj_missing
check inj_audit inj_audit

# Range and If-Range never reach the upstream of an injected request: a
# credential served back in ranges would come in pieces too short to
# redact
inj_range() {
	snap
	hc -H 'Range: bytes=0-3' -H 'If-Range: "x"' https://allowed.test/echo-headers
	cwant 200 || return 1
	upwant allowed-tls '[.[0].headers[][0] | ascii_downcase] | (index("range") == null and index("if-range") == null)' \
	    '[.[0].headers[][0] | ascii_downcase] | index("authorization") != null'
}
# Set-Cookie on the answer to an injected request goes, unless the rule
# keeps cookies; a kept one is redacted like any header
inj_cookies() {
	hc 'https://allowed.test/reflect?cookie=1'
	cwant 200 || return 1
	grep -qi '^set-cookie' <<<"$chdrs" && { why="Set-Cookie reached the sandbox: $(grep -i '^set-cookie' <<<"$chdrs" | head -c 80)"; return 1; }
	hc 'https://allowed.test/reflect?cookie=1&keep=1'
	cwant 200 || return 1
	grep -qix 'set-cookie: sid=\[REDACTED\]; Path=/; Secure' <<<"$chdrs" ||
	    { why="kept cookie: $(grep -i '^set-cookie' <<<"$chdrs" | tr '\n' ' ' | head -c 120)"; return 1; }
	grep -qix 'set-cookie: plain=1' <<<"$chdrs" || { why="the harmless cookie did not come"; return 1; }
}
check inj_range inj_range
check inj_cookies inj_cookies

# ================================================================ red

# red_ok: the last /reflect answer carried the value only as [REDACTED],
# in the headers and in every line of the body
red_ok() {
	local tok=${1:-$TOK1} l
	cwant 200 || return 1
	grep -qi '^x-echo: Bearer \[REDACTED\]$' <<<"$chdrs" || { why="X-Echo not redacted: $(grep -i '^x-echo' <<<"$chdrs")"; return 1; }
	grep -qi '^x-echo-b64: .*\[REDACTED\]' <<<"$chdrs" || { why="X-Echo-B64 not redacted: $(grep -i '^x-echo-b64' <<<"$chdrs")"; return 1; }
	for l in raw b64 b64url tok64 wrapped pct form hex upper jslash juni html htmlnum; do
		grep -q "^$l=.*\[REDACTED\]" "$WORK/c.b" || { why="line $l not redacted: $(grep "^$l=" "$WORK/c.b")"; return 1; }
	done
	grep -qx end "$WORK/c.b" || { why="the body is cut: $(short "$(tail -c 100 "$WORK/c.b")")"; return 1; }
	no_value "$WORK/c.h" "$tok" && no_value "$WORK/c.b" "$tok"
}
# (HTTP/1.1 framing: over HTTP/2 the length is the frames')
red_length() {
	hc --http1.1 https://allowed.test/reflect
	red_ok || return 1
	grep -qi '^transfer-encoding: chunked' <<<"$chdrs" && ! grep -qi '^content-length' <<<"$chdrs" ||
	    { why="not re-framed as chunked: $(short "$chdrs")"; return 1; }
}
red_chunked3() { hc 'https://allowed.test/reflect?chunk=3'; red_ok; }
red_chunked1() { hc 'https://allowed.test/reflect?chunk=1'; red_ok; }
red_close() {
	hc --http1.1 'https://allowed.test/reflect?close=1'
	red_ok || return 1
	! grep -qi '^transfer-encoding' <<<"$chdrs" || { why="a close-delimited body was re-framed"; return 1; }
}
red_head() {
	hc -I https://allowed.test/reflect
	[ "$cst" = 200 ] || { why="HEAD: $cst"; return 1; }
	grep -qi '^x-echo: Bearer \[REDACTED\]$' <<<"$chdrs" || { why="HEAD: X-Echo not redacted: $(short "$chdrs")"; return 1; }
	no_value "$WORK/c.h" "$TOK1"
}
# a body the redactor cannot read is not passed on
red_coded() {
	hc 'https://allowed.test/reflect?ce=gzip'
	cwant 502 '.reason == "response-not-redactable"' || return 1
	no_value "$WORK/c.b" "$TOK1"
}
# nor one with a transfer coding besides chunked (issue 15, fault 10):
# it would go on re-framed as plain chunked
red_te_coded() {
	hc 'https://allowed.test/reflect?chunk=7&te=gzip'
	cwant 502 '.reason == "response-not-redactable"' || return 1
	no_value "$WORK/c.b" "$TOK1"
}

# pipelined: a refused request, a passed HEAD and an injected GET on one
# connection: the answers come in order, framed right, the last redacted
red_pipelined() {
	local send='GET /missing HTTP/1.1\r\nHost: allowed.test\r\n\r\nHEAD /pub/h HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET /reflect HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n'
	last="pipelined /missing, HEAD /pub/h, /reflect"
	out=$(timeout 30 ip netns exec "$NS_SB" "$PY" "$UPSTREAM_PY" raw 198.18.1.10:443 \
	    --tls-name allowed.test --ca "$BOX_CA" --json --timeout 5 --send "$send" 2>&1)
	printf '%s\n' "$out" >>"$SEEN"
	# (the raw client does not know the second was HEAD: it reads the
	# third answer as the second's body; so the third is checked in the
	# bytes after the second's head)
	jq -s -e '[.[] | select(.n) | .status] == [503, 200]' <<<"$out" >/dev/null ||
	    { why="answers: $(short "$out")"; return 1; }
	jq -s -e '([.[] | select(.n)][1].body + ([.[] | select(.trailing)][0].trailing // "")) |
	    startswith("HTTP/1.1 200 OK\r\n") and test("X-Echo: Bearer \\[REDACTED\\]\r\n") and
	    test("raw=Bearer \\[REDACTED\\]\n") and endswith("0\r\n\r\n")' <<<"$out" >/dev/null ||
	    { why="the injected answer after the HEAD: $(short "$out")"; return 1; }
	no_value <(printf '%s' "$out") "$TOK1"
}

check red_length red_length
check red_pipelined red_pipelined
check red_chunked3 red_chunked3
check red_chunked1 red_chunked1
check red_close red_close
check red_head red_head
check red_coded red_coded
check red_te_coded red_te_coded

# ================================================================ rot
# One TLS connection from the sandbox stays open across rotations; each
# request on it is judged again and gets the version in force.

KA_IN=$WORK/ka.in KA_OUT=$WORK/ka.out
ka_start() {
	rm -f "$KA_IN" "$KA_OUT"
	mkfifo "$KA_IN" || return 1
	timeout 300 ip netns exec "$NS_SB" "$PY" - "$BOX_CA" "$KA_IN" >"$KA_OUT" 2>&1 <<-'EOF' &
	import socket, ssl, sys
	ctx = ssl.create_default_context(cafile=sys.argv[1])
	s = ctx.wrap_socket(socket.create_connection(("198.18.1.10", 443), 5),
	                    server_hostname="allowed.test")
	f = s.makefile("rb")
	for line in open(sys.argv[2]):
	    path = line.strip()
	    if not path:
	        break
	    s.sendall(("GET %s HTTP/1.1\r\nHost: allowed.test\r\n\r\n" % path).encode())
	    head = b""
	    while not head.endswith(b"\r\n\r\n"):
	        head += f.read(1)
	    body = b""
	    while True:
	        n = int(f.readline().split(b";")[0], 16)
	        if n == 0:
	            f.readline()
	            break
	        body += f.read(n)
	        f.readline()
	    print("RESP", head.split(b"\r\n")[0].decode(), len(body), flush=True)
	    sys.stdout.buffer.write(head + body)
	    sys.stdout.flush()
	print("DONE", flush=True)
	EOF
	KA_PID=$!
	BG_PIDS+=("$KA_PID")
	exec {KA_FD}>"$KA_IN"
}
# ka_get PATH: one more request on the kept-alive connection
ka_get() {
	local n i
	n=$(grep -c '^RESP' "$KA_OUT" 2>/dev/null)
	echo "$1" >&"$KA_FD"
	for i in $(seq 50); do
		[ "$(grep -c '^RESP' "$KA_OUT" 2>/dev/null)" -gt "$n" ] && return 0
		sleep 0.1
	done
	why="no answer on the kept-alive connection: $(short "$(tail -c 300 "$KA_OUT")")"
	return 1
}
ka_stop() {
	[ -n "${KA_FD:-}" ] || return 0
	echo >&"$KA_FD"
	exec {KA_FD}>&-
	wait "$KA_PID" 2>/dev/null
	cat "$KA_OUT" >>"$SEEN"
}
# up_auth N: the Authorization of the last N requests the upstream got
up_auth() { upreqs allowed-tls | jq -r ".[-$1:][] | .headers[] | select(.[0] | ascii_downcase == \"authorization\") | .[1]"; }

rot_folder() {
	snap
	ka_start || return 1
	ka_get /reflect || return 1
	put_file tok 2 "$TOK2" && wait_version tok 2 || return 1
	ka_get /reflect || return 1
	[ "$(up_auth 2 | tr '\n' ' ')" = "Bearer $TOK1 Bearer $TOK2 " ] ||
	    { why="the upstream got $(up_auth 2 | sed 's/Bearer \(.....\).*/\1.../' | tr '\n' ' '), want v1 then v2"; return 1; }
	upx 'allowed-tls.requests=2'
}
rot_api() {
	seal "$KEYS/gateway.pub" tok 3 "$TOK3" allowed.test >"$WORK/tok3.sealed" || return 1
	# sluicectl takes the name from the file's
	mkdir -p "$WORK/put" && cp "$WORK/tok3.sealed" "$WORK/put/tok.sealed" || return 1
	"${SECTL[@]}" secret put "$WORK/put/tok.sealed" >"$WORK/put.out" 2>&1 ||
	    { why="sluicectl secret put: $(short "$(cat "$WORK/put.out")")"; return 1; }
	cat "$WORK/put.out" >>"$API_SEEN"
	ka_get /reflect || return 1
	[ "$(up_auth 1)" = "Bearer $TOK3" ] || { why="after the API put the upstream got another value"; return 1; }
	cmp -s "$WORK/tok3.sealed" "$SECDIR/tok.sealed" || { why="the API did not write the folder's file"; return 1; }
	grep -c '^RESP HTTP/1.1 200' "$KA_OUT" | grep -qx 3 || { why="the kept-alive connection: $(grep '^RESP' "$KA_OUT" | tr '\n' ' ')"; return 1; }
	no_value "$KA_OUT" "$TOK1" "$TOK2" "$TOK3"
}
rot_audit() {
	audit_has 0 'type=secret_rotate secret=tok version=2 previous_version=1 cause=file' \
	    'type=secret_rotate secret=tok version=3 previous_version=2 cause=api uid=0'
}
# a request in flight finishes with its version: the answer to a request
# that got v3, arriving after v4 is in force, is redacted for v3
rot_inflight() {
	local pid
	snap
	in_sb curl -sS --max-time 10 --cacert "$BOX_CA" "${RESOLVE[@]}" -D "$WORK/fl.h" \
	    -o "$WORK/fl.b" 'https://allowed.test/reflect?ms=1500' 2>"$WORK/fl.e" &
	pid=$!
	sleep 0.5
	put_file tok 4 "$TOK4" && wait_version tok 4 || return 1
	wait "$pid"
	cat "$WORK/fl.h" "$WORK/fl.b" >>"$SEEN"
	[ "$(up_auth 1)" = "Bearer $TOK3" ] || { why="the slow request went up with another version"; return 1; }
	no_value "$WORK/fl.b" "$TOK3" || return 1
	hc https://allowed.test/reflect
	red_ok "$TOK4" && [ "$(up_auth 1)" = "Bearer $TOK4" ]
}

check rot_folder rot_folder
check rot_api rot_api
check rot_audit rot_audit

# ================================================================ bad
# Refused blobs change nothing: the version in force keeps working, on
# the same kept-alive connection too.

bad_api() {
	local code=$1 test=$2 file=$3
	api PUT /v1/secrets/tok "$(cat "$file")"
	[ "$st" = "$code" ] && jq -e "$test" <<<"$out" >/dev/null ||
	    { why="PUT $file: $st $(short "$out"), want $code and $test"; return 1; }
}
bad_put() {
	# curl --data-binary @file keeps every byte
	last="PUT /v1/secrets/$2 @$3"
	st=$(curl -sS --max-time 10 --unix-socket "$SOCK" -X PUT -H 'Expect:' \
	    -o "$WORK/api.b" -w '%{http_code}' --data-binary "@$3" "http://sluice/v1/secrets/$2")
	out=$(cat "$WORK/api.b")
	printf '%s\n' "$out" >>"$API_SEEN"
	[ "$st" = "$1" ] || { why="PUT $3: $st $(short "$out"), want $1"; return 1; }
	jq -e "$4" <<<"$out" >/dev/null || { why="PUT $3: not ($4): $(short "$out")"; return 1; }
}
still_v3() {
	wait_version tok 3 || return 1
	ka_get /reflect || return 1
	[ "$(up_auth 1)" = "Bearer $TOK3" ] || { why="the upstream no longer gets v3"; return 1; }
}
bad_tampered() {
	local off
	off=$(audit_lines)
	cp "$WORK/tok3.sealed" "$WORK/tampered.sealed"
	# one byte of the ciphertext flipped
	printf '\x01' | dd of="$WORK/tampered.sealed" bs=1 seek=60 conv=notrunc 2>/dev/null
	"$PY" -c 'import sys; a=open(sys.argv[1],"rb").read(); b=open(sys.argv[2],"rb").read(); sys.exit(a == b)' \
	    "$WORK/tok3.sealed" "$WORK/tampered.sealed" || { why="the copy is not changed"; return 1; }
	bad_put 400 tok "$WORK/tampered.sealed" '.error | test("does not open")' || return 1
	cp "$WORK/tampered.sealed" "$WORK/.t" && mv "$WORK/.t" "$SECDIR/tok.sealed"
	audit_has "$off" 'type=secret_refused cause=file error=~tok.sealed' || return 1
	still_v3
}
bad_downgrade() {
	seal "$KEYS/gateway.pub" tok 2 "$TOK2" allowed.test >"$WORK/tok2.sealed" || return 1
	bad_put 409 tok "$WORK/tok2.sealed" '.error | test("version 2 would replace the newer version 3")' || return 1
	cp "$WORK/tok2.sealed" "$WORK/.t" && mv "$WORK/.t" "$SECDIR/tok.sealed"
	sleep 0.3
	grep -q 'tok.sealed: refused: version 2 would replace' "$WORK/sluiced.log" ||
	    { why="no refusal of the folder's downgrade in the log"; return 1; }
	still_v3
}
bad_same_version() {
	seal "$KEYS/gateway.pub" tok 3 "$TOKX" allowed.test >"$WORK/tok3x.sealed" || return 1
	bad_put 409 tok "$WORK/tok3x.sealed" '.error | test("version 3 is in force with another value")' || return 1
	bad_put 200 tok "$WORK/tok3.sealed" '.version == 3' || return 1
	still_v3
}
bad_other_key() {
	seal "$WORK/keys3/gateway.pub" tok 9 "$TOKX" allowed.test >"$WORK/tok9.sealed" || return 1
	bad_put 400 tok "$WORK/tok9.sealed" '.error | test("another gateway key")' || return 1
	still_v3
}
bad_other_name() {
	bad_put 400 tok "$SECDIR/basic.sealed" '.error | test("sealed as .basic., not .tok.")' || return 1
	bad_put 400 tok "$WORK/keygen.log" '.error | test("not a sealed secret")' || return 1
	still_v3
}
bad_value() {
	local o
	o=$(printf 'a\nb' | "$SLUICECTL" seal --pub "$KEYS/gateway.pub" --name x 2>&1 >/dev/null)
	[ $? = 1 ] && grep -q 'CR, LF or NUL' <<<"$o" || { why="sealing a value with LF: $(short "$o")"; return 1; }
}

check bad_tampered bad_tampered
check bad_downgrade bad_downgrade
check bad_same_version bad_same_version
check bad_other_key bad_other_key
check bad_other_name bad_other_name
check bad_value bad_value
# the folder holds v3 again, so that its rescans agree with the daemon
cp "$WORK/tok3.sealed" "$SECDIR/.t" && mv "$SECDIR/.t" "$SECDIR/tok.sealed"
check rot_inflight rot_inflight

# ================================================================ key

# a blob sealed to the second configured gateway key opens too
key_second() {
	seal "$WORK/keys2/gateway.pub" tok 5 "$TOK5" allowed.test >"$WORK/tok5.sealed" || return 1
	bad_put 200 tok "$WORK/tok5.sealed" ".version == 5 and .key_id != \"$(jq -r .key_id <<<"$(curl -s --unix-socket "$SOCK" http://s/v1/secrets/basic)")\"" || return 1
	ka_get /reflect || return 1
	[ "$(up_auth 1)" = "Bearer $TOK5" ] || { why="v5 (second key) not injected"; return 1; }
}
check key_second key_second
ka_stop

# ================================================================ api

api_list() {
	api GET /v1/secrets
	[ "$st" = 200 ] || { why="GET /v1/secrets: $st"; return 1; }
	jq -e '[.secrets[].name] == ["awsx", "basic", "ccert", "gmeter", "metered", "other", "phk", "tok"]' <<<"$out" >/dev/null &&
	jq -e '.secrets[] | select(.name == "tok") | .kind == "header" and .version == 5 and (.fingerprint | test("^[0-9a-f]{32}$")) and .hosts == ["allowed.test"] and .source == "api"' <<<"$out" >/dev/null &&
	jq -e '.secrets[] | select(.name == "other") | .hosts == ["other.test"] and .source == "file"' <<<"$out" >/dev/null ||
	    { why="GET /v1/secrets: $(short "$out")"; return 1; }
	"${SECTL[@]}" secret ls >"$WORK/ls.out" 2>&1 || { why="sluicectl secret ls failed"; return 1; }
	cat "$WORK/ls.out" >>"$API_SEEN"
	grep -Eq '^tok +header +5 +[0-9a-f]{32} +allowed.test ' "$WORK/ls.out" ||
	    { why="secret ls: $(short "$(cat "$WORK/ls.out")")"; return 1; }
}
api_delete() {
	"${SECTL[@]}" secret rm tok >"$WORK/rm.out" 2>&1 || { why="secret rm: $(cat "$WORK/rm.out")"; return 1; }
	[ ! -e "$SECDIR/tok.sealed" ] || { why="the file is still there"; return 1; }
	hc https://allowed.test/reflect
	cwant 503 '.reason == "secret-unavailable"' || return 1
	api DELETE /v1/secrets/tok
	[ "$st" = 404 ] || { why="a second DELETE: $st"; return 1; }
	audit_has 0 'type=secret_delete secret=tok version=5 cause=api'
}
api_folder_add() {
	put_file tok 6 "$TOK1" && wait_version tok 6 || return 1
	hc https://allowed.test/reflect
	red_ok "$TOK1"
}
api_metrics() {
	out=$(ip netns exec "$NS_GW" curl -sS --max-time 5 http://127.0.0.1:19464/metrics)
	printf '%s\n' "$out" >>"$API_SEEN"
	grep -q '^sluice_secret_version{secret="tok"} 6$' <<<"$out" &&
	grep -Eq '^sluice_injections_total\{secret="tok"\} [1-9]' <<<"$out" &&
	grep -Eq '^sluice_redactions_total\{rule="intercept:bearer",where="body"\} [1-9]' <<<"$out" ||
	    { why="metrics: $(grep -E 'secret|inject|redact' <<<"$out" | short "$(cat)")"; return 1; }
}
check api_list api_list
check api_delete api_delete
check api_folder_add api_folder_add
check api_metrics api_metrics

# ================================================================ mtls
# A rule's upstream.client_cert is presented to an upstream that requires
# it; a rule without one never gets a connection or a session made with it.

MT=https://other.test:8443
mtls_pass() {
	snap
	hc "$MT/mtls/a"
	cwant 200 || return 1
	upwant mtls-tls 'length == 1' '.[0].client_cn == "sluice-client"' '.[0].path == "/mtls/a"'
}
mtls_inject() {
	snap
	hc "$MT/mtls-inj"
	cwant 200 || return 1
	upwant mtls-tls '.[0].client_cn == "sluice-client"' \
	    "[.[0].headers[] | select(.[0] | ascii_downcase == \"x-api-key\") | .[1]] == [\"$OTHER\"]"
}
# after a connection with the certificate, one without it is refused by
# the upstream: no pooled connection and no session crossed over
mtls_none() {
	snap
	hc "$MT/plain/b"
	[ "$cst" = 502 ] || { why="no certificate: $cst, want 502"; return 1; }
	upx 'mtls-tls.requests=0'
}
# one client connection: with, without, with again
mtls_switch() {
	snap
	hc "$MT/mtls/1" -o /dev/null "$MT/plain/2" -o /dev/null "$MT/mtls/3"
	[ "$cst" = 200502200 ] || { why="codes $cst, want 200 502 200"; return 1; }
	upwant mtls-tls 'length == 2' '[.[].client_cn] == ["sluice-client", "sluice-client"]' \
	    '[.[].path] == ["/mtls/1", "/mtls/3"]'
}
mtls_unbound() {
	snap
	hc https://allowed.test/mtls-far
	cwant 403 '.reason == "secret-host-binding"' || return 1
	upx 'allowed-tls.requests=0'
}
mtls_audit() {
	local off fp
	off=$(audit_lines)
	hc "$MT/mtls/audited"
	cwant 200 || return 1
	api GET /v1/secrets/ccert
	jq -e '.kind == "pem" and .hosts == ["other.test"]' <<<"$out" >/dev/null || { why="GET ccert: $(short "$out")"; return 1; }
	fp=$(jq -r .fingerprint <<<"$out")
	audit_has "$off" "type=request action=pass rule=intercept:mtls host=other.test path=/mtls/audited rid=~. secrets=~$fp" \
	    'type=response rule=intercept:mtls status=200 rid=~.'
}
check mtls_pass mtls_pass
check mtls_inject mtls_inject
check mtls_none mtls_none
check mtls_switch mtls_switch
check mtls_unbound mtls_unbound
check mtls_audit mtls_audit

# ================================================================ placeholders
# The sandbox holds "sluice-ph-...", never the value: the rule that names
# the secret swaps it on the secret's hosts (header, Basic, query); any
# other request that carries it is refused and audited.

PH=""
# up_hdr NAME: the value of header NAME the upstream got last
up_hdr() { upreqs allowed-tls | jq -r ".[-1].headers[] | select(.[0] | ascii_downcase == \"$1\") | .[1]"; }
ph_issue() {
	PH=$("${SECTL[@]}" sandbox placeholder box phk 2>&1) || { why="sandbox placeholder: $PH"; return 1; }
	[[ $PH =~ ^sluice-ph-[0-9a-f]{32}$ ]] || { why="placeholder: $PH"; return 1; }
	# the same again; another for another secret
	[ "$("${SECTL[@]}" sandbox placeholder box phk)" = "$PH" ] || { why="not the same twice"; return 1; }
	[ "$("${SECTL[@]}" sandbox placeholder box tok)" != "$PH" ] || { why="the same for two secrets"; return 1; }
	api POST /v1/sandboxes/nobox/placeholders '{"secret": "phk"}'
	[ "$st" = 404 ] || { why="unknown sandbox: $st"; return 1; }
	api POST /v1/sandboxes/box/placeholders '{"secret": "a b"}'
	[ "$st" = 400 ] || { why="bad name: $st"; return 1; }
}
ph_header() {
	snap
	hc -H "X-Api-Key: $PH" -H "X-Other: a $PH b" 'https://allowed.test/echo-headers?ph=1'
	cwant 200 || return 1
	[ "$(up_hdr x-api-key)" = "$PHV" ] && [ "$(up_hdr x-other)" = "a $PHV b" ] ||
	    { why="the upstream did not get the value in place of the placeholder"; return 1; }
	no_value "$WORK/c.b" "$PHV"
}
ph_basic() {
	snap
	hc -u "agent:$PH" 'https://allowed.test/echo-headers?ph=1'
	cwant 200 || return 1
	[ "$(up_hdr authorization)" = "Basic $(printf 'agent:%s' "$PHV" | base64 -w0)" ] ||
	    { why="Basic not swapped: $(up_hdr authorization | head -c 12)..."; return 1; }
}
ph_query() {
	local enc
	snap
	hc "https://allowed.test/echo-headers?ph=1&key=$PH"
	cwant 200 || return 1
	enc=$("$PY" -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$PHV")
	upwant allowed-tls "length == 1" ".[0].path == \"/echo-headers?ph=1&key=$enc\""
}
ph_elsewhere() {
	local off
	off=$(audit_lines)
	snap
	hc -H "X-Api-Key: $PH" https://allowed.test/pub/a
	cwant 403 '.reason == "placeholder-elsewhere"' || return 1
	hc "https://allowed.test/pub/$PH"
	cwant 403 '.reason == "placeholder-elsewhere"' || return 1
	hc -u "agent:$PH" https://allowed.test/pub/b
	cwant 403 '.reason == "placeholder-elsewhere"' || return 1
	# an inject rule that does not name it, in its query
	hc "https://allowed.test/echo-headers?x=$PH"
	cwant 403 '.reason == "placeholder-elsewhere"' || return 1
	upx 'allowed-tls.requests=0' || return 1
	audit_has "$off" 'type=placeholder_elsewhere sandbox=box secret=phk host=allowed.test where=header rule=intercept:pub' \
	    'type=placeholder_elsewhere secret=phk where=target'
}
# a placeholder that is not this sandbox's is only text
ph_foreign() {
	snap
	hc -H "X-Api-Key: sluice-ph-0123456789abcdef0123456789abcdef" https://allowed.test/pub/c
	cwant 200 || return 1
	upx 'allowed-tls.requests=1'
}
# in the first 64 KiB of a body, however it is framed and split
ph_body() {
	local off
	off=$(audit_lines)
	snap
	hc -X POST --data-binary "{\"key\": \"$PH\"}" https://allowed.test/pub/a
	cwant 403 '.reason == "placeholder-elsewhere"' '.message | test("body")' || return 1
	# on the rule that swaps it in headers too: a body is never swapped
	hc -X POST --data-binary "key=$PH" 'https://allowed.test/echo-headers?ph=1'
	cwant 403 '.reason == "placeholder-elsewhere"' || return 1
	# chunked, split between two chunks and two reads, after 60000 bytes
	SBCA=$BOX_CA UPIP=198.18.1.10 PHX=$PH in_sb "$PY" - > "$WORK/c.b" 2>&1 <<'PYEOF' ||
import socket, ssl, time, os
ph = os.environ["PHX"].encode()
ctx = ssl.create_default_context(cafile=os.environ["SBCA"])
s = ctx.wrap_socket(socket.create_connection((os.environ["UPIP"], 443)), server_hostname="allowed.test")
s.sendall(b"POST /pub/c HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n")
s.sendall(b"%x\r\n" % 60000 + b"a" * 60000 + b"\r\n")
time.sleep(0.1)
s.sendall(b"%x\r\n" % 7 + ph[:7] + b"\r\n")
time.sleep(0.1)
s.sendall(b"%x\r\n" % (len(ph) - 7) + ph[7:] + b"\r\n0\r\n\r\n")
s.settimeout(5)
got = b""
try:
    while True:
        b = s.recv(65536)
        if not b: break
        got += b
except (ConnectionError, socket.timeout, ssl.SSLError):
    pass
print(got.decode(errors="replace"))
assert got.startswith(b"HTTP/1.1 403 "), got[:100]
assert b"placeholder-elsewhere" in got
PYEOF
	    { why="chunked split: $(short "$(cat "$WORK/c.b")")"; return 1; }
	upx 'allowed-tls.requests=0' || return 1
	audit_has "$off" 'type=placeholder_elsewhere sandbox=box secret=phk host=allowed.test where=body' || return 1
	# past the first 64 KiB it is only read by the upstream
	snap
	{ head -c 70000 /dev/zero | tr '\0' a; printf '%s' "$PH"; } > "$WORK/late.bin"
	hc -X POST --data-binary "@$WORK/late.bin" https://allowed.test/pub/d
	cwant 200 || return 1
	upx 'allowed-tls.requests=1'
}
# plain HTTP passed through: the head is read for placeholders too
ph_plain() {
	local off
	off=$(audit_lines)
	snap
	hc http://denied.test/pub/plain
	[ "$cst" = 200 ] || { why="plain GET: $out"; return 1; }
	hc -H "X-Api-Key: $PH" http://denied.test/pub/plain
	cwant 403 '.reason == "placeholder-elsewhere"' || return 1
	hc -u "agent:$PH" http://denied.test/pub/plain2
	cwant 403 '.reason == "placeholder-elsewhere"' || return 1
	upx 'denied-http.requests=1' || return 1
	audit_has "$off" 'type=placeholder_elsewhere sandbox=box secret=phk host=denied.test where=header'
}
check ph_issue ph_issue
check ph_header ph_header
check ph_basic ph_basic
check ph_query ph_query
check ph_elsewhere ph_elsewhere
check ph_foreign ph_foreign
check ph_body ph_body
check ph_plain ph_plain

# ================================================================ sigv4
# An inject rule's sigv4 re-signs the request; the upstream checks the
# signature with botocore (the credentials are in its state dir).

cp "$WORK/awsx.json" "$STATE/aws-creds.json"
sigv4_get() {
	snap
	hc -H 'Authorization: AWS4-HMAC-SHA256 Credential=SANDBOX/x' -H 'X-Amz-Date: 20000101T000000Z' \
	    'https://allowed.test/sigv4/a%20b/c?z=1&a=x%2Fy&a=b&empty'
	[ "$cst" = 200 ] && grep -q 'sigv4 ok' "$WORK/c.b" ||
	    { why="GET: $cst $(head -c 80 "$WORK/c.b") $(tail -3 "$WORK/upstream.log" | tr '\n' ' ')"; return 1; }
	[ "$(up_hdr x-amz-security-token)" = "$AWST" ] || { why="no session token upstream"; return 1; }
	upwant allowed-tls '[.[0].headers[] | select(.[0] | ascii_downcase == "authorization")] | length == 1'
}
sigv4_s3_put() {
	hc -X PUT --data-binary 'hello, bucket' 'https://allowed.test/s3/bucket/key.txt'
	[ "$cst" = 200 ] && grep -q 'sigv4 ok' "$WORK/c.b" ||
	    { why="PUT: $cst $(head -c 80 "$WORK/c.b") $(tail -3 "$WORK/upstream.log" | tr '\n' ' ')"; return 1; }
	[ "$(up_hdr x-amz-content-sha256)" = UNSIGNED-PAYLOAD ] || { why="not UNSIGNED-PAYLOAD"; return 1; }
}
# another service signs its body's hash: the head waits for the body
sigv4_body() {
	local n
	snap
	hc -X POST -H 'X-Amz-Content-Sha256: 0000' --data-binary 'Action=ListUsers&Version=2010-05-08' \
	    'https://allowed.test/sigv4/post'
	[ "$cst" = 200 ] && grep -q 'sigv4 ok' "$WORK/c.b" ||
	    { why="POST: $cst $(head -c 80 "$WORK/c.b") $(tail -3 "$WORK/upstream.log" | tr '\n' ' ')"; return 1; }
	# a body of 1 MiB that comes slowly, in pieces, on a kept connection after a GET
	head -c 1048576 /dev/urandom > "$WORK/mib.bin"
	SBCA=$BOX_CA UPIP=198.18.1.10 in_sb "$PY" - "$WORK/mib.bin" > "$WORK/c.b" 2>&1 <<'PYEOF' || { why="slow 1 MiB: $(cat "$WORK/c.b")"; return 1; }
import http.client, ssl, sys, time, os
body = open(sys.argv[1], "rb").read()
ctx = ssl.create_default_context(cafile=os.environ["SBCA"])
class C(http.client.HTTPSConnection):
    def connect(self):
        http.client.HTTPConnection.connect(self)
        self.sock = ctx.wrap_socket(self.sock, server_hostname="allowed.test")
c = C(os.environ["UPIP"], 443, timeout=20)
c.request("GET", "/sigv4/g", headers={"Host": "allowed.test"})
r = c.getresponse(); b = r.read()
assert r.status == 200 and b"sigv4 ok" in b, (r.status, b)
c.putrequest("PUT", "/sigv4/put", skip_host=True)
c.putheader("Host", "allowed.test")
c.putheader("Content-Length", str(len(body)))
c.endheaders()
for i in range(0, len(body), 200000):
    c.send(body[i:i + 200000]); time.sleep(0.05)
r = c.getresponse(); b = r.read()
assert r.status == 200 and b"sigv4 ok" in b, (r.status, b)
print("ok")
PYEOF
	n=$(upreqs allowed-tls | jq '[.[] | select(.path == "/sigv4/put" and .body_bytes == 1048576)] | length')
	[ "$n" = 1 ] || { why="the upstream got $n whole PUTs"; return 1; }
}
# a client that waits for 100-continue gets it from sluice, and no
# Expect reaches the upstream (the body comes with the head)
sigv4_body_continue() {
	snap
	head -c 900000 /dev/urandom > "$WORK/kib900.bin"
	hc -v -H 'Expect: 100-continue' --expect100-timeout 30 -X POST --data-binary "@$WORK/kib900.bin" \
	    'https://allowed.test/sigv4/post'
	[ "$cst" = 200 ] && grep -q 'sigv4 ok' "$WORK/c.b" || { why="900 KB: $cst $(short "$(cat "$WORK/c.b")")"; return 1; }
	grep -qE '^< HTTP/(1.1 100 Continue|2 100)' "$WORK/c.e" || { why="no 100 Continue: $(grep '^[<>] ' "$WORK/c.e" | head -c 300)"; return 1; }
	upwant allowed-tls 'length == 1' '[.[0].headers[] | select(.[0] | ascii_downcase == "expect")] | length == 0' \
	    '.[0].body_bytes == 900000'
}
sigv4_body_limits() {
	snap
	head -c 1048577 /dev/zero > "$WORK/big.bin"
	hc -X POST --data-binary "@$WORK/big.bin" 'https://allowed.test/sigv4/post'
	cwant 413 '.reason == "body-too-large"' || return 1
	hc -X POST -H 'Transfer-Encoding: chunked' --data-binary 'x=1' 'https://allowed.test/sigv4/post'
	cwant 411 '.reason == "length-required"' || return 1
	upx 'allowed-tls.requests=0'
}
# the sandbox gives up in the middle of a held body: nothing goes upstream
sigv4_body_abandoned() {
	snap
	SBCA=$BOX_CA UPIP=198.18.1.10 in_sb "$PY" - > "$WORK/c.b" 2>&1 <<'PYEOF' ||
	    { why="abandon: $(short "$(cat "$WORK/c.b")")"; return 1; }
import socket, ssl, os, time
ctx = ssl.create_default_context(cafile=os.environ["SBCA"])
for i in range(20):
    s = ctx.wrap_socket(socket.create_connection((os.environ["UPIP"], 443)), server_hostname="allowed.test")
    s.sendall(b"POST /sigv4/x HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 100000\r\n\r\n" + b"a" * 5000)
    time.sleep(0.01)
    s.close()
PYEOF
	sleep 0.5
	daemon_same || return 1
	upx 'allowed-tls.requests=0'
}
check sigv4_get sigv4_get
check sigv4_s3_put sigv4_s3_put
check sigv4_body sigv4_body
check sigv4_body_continue sigv4_body_continue
check sigv4_body_limits sigv4_body_limits
check sigv4_body_abandoned sigv4_body_abandoned

# ================================================================ budgets
# The sandbox's policy gives metered 30 a minute; sluiced.yaml gives gmeter
# 2 a day over all sandboxes.  Beyond: 429, Retry-After, the secret and the
# budget named, an audit record, a metric; the use shows in the API.

budget_sandbox() {
	local -a urls=()
	local i off ra
	off=$(audit_lines)
	snap
	for i in $(seq 30); do urls+=(https://allowed.test/metered -o /dev/null); done
	hc "${urls[@]}"
	[ "$cst" = "$(printf '200%.0s' $(seq 30))" ] || { why="30 within the budget: $cst"; return 1; }
	hc https://allowed.test/metered
	cwant 429 '.reason == "budget-exceeded"' '.secret == "metered"' '.budget == "requests_per_minute"' \
	    '.scope == "sandbox"' '.retry_after == 1 or .retry_after == 2' || return 1
	ra=$(jq .retry_after "$WORK/c.b")
	# the time the 30 took came back already: one each 2 s
	grep -qix "retry-after: $ra" <<<"$chdrs" || { why="no Retry-After: $ra"; return 1; }
	upx 'allowed-tls.requests=30' || return 1
	audit_has "$off" "type=budget_exceeded sandbox=box secret=metered budget=requests_per_minute scope=sandbox limit=30 retry_after=$ra" \
	    'type=request action=deny reason=budget-exceeded rule=intercept:metered status=429' || return 1
	api GET /v1/sandboxes/box
	jq -e '.budgets == [{"secret": "metered", "requests_per_minute": {"limit": 30, "used": 30}, "requests_per_day": null}] or .budgets == [{"secret": "metered", "requests_per_minute": {"limit": 30, "used": 29}, "requests_per_day": null}]' <<<"$out" >/dev/null ||
	    { why="GET box: $(jq -c .budgets <<<"$out")"; return 1; }
	# one more comes every two seconds
	sleep 2.2
	hc https://allowed.test/metered
	cwant 200
}
budget_gateway() {
	hc https://allowed.test/gmetered -o /dev/null https://allowed.test/gmetered
	[ "$cst" = 200200 ] || { why="2 within the budget: $cst"; return 1; }
	hc https://allowed.test/gmetered
	cwant 429 '.secret == "gmeter"' '.budget == "requests_per_day"' '.scope == "gateway"' \
	    '.retry_after > 40000' || return 1
	api GET /v1/secrets/gmeter
	jq -e '.budget == {"secret": "gmeter", "requests_per_minute": null, "requests_per_day": {"limit": 2, "used": 2}}' <<<"$out" >/dev/null ||
	    { why="GET gmeter: $(short "$out")"; return 1; }
	"${SECTL[@]}" secret ls >"$WORK/ls3.out" 2>&1 &&
	grep -Eq '^gmeter .* 2/2/day$' "$WORK/ls3.out" && grep -Eq '^tok .* -$' "$WORK/ls3.out" ||
	    { why="secret ls: $(short "$(cat "$WORK/ls3.out")")"; return 1; }
	out=$(ip netns exec "$NS_GW" curl -sS --max-time 5 http://127.0.0.1:19464/metrics)
	grep -Eq '^sluice_budget_refusals_total\{budget="gateway/day",secret="gmeter"\} 1$' <<<"$out" &&
	grep -Eq '^sluice_budget_refusals_total\{budget="sandbox/minute",secret="metered"\} 1$' <<<"$out" ||
	    { why="metrics: $(grep budget <<<"$out" | tr '\n' ' ')"; return 1; }
}
check budget_sandbox budget_sandbox
check budget_gateway budget_gateway

# ================================================================ kinds
# A json or pem document is sealed with --kind, keeps its newlines, and
# never goes into a header template: not through a policy, not through a
# new secret a policy in force names, not by changing a name's kind.

SKV="sk-$(rnd)/$(rnd)"
ALL_VALUES+=("$SKV")
printf '%s\n' "$SKV" >>"$WORK/canary-values"
# seal_doc NAME KIND FILE [VERSION]: FILE sealed as NAME of KIND on stdout
seal_doc() {
	local -a v=()
	[ -n "${4:-}" ] && v=(--secret-version "$4")
	"$SLUICECTL" seal --pub "$KEYS/gateway.pub" --name "$1" --kind "$2" \
	    --host allowed.test "${v[@]}" <"$3" 2>>"$WORK/seal.log"
}
kind_json() {
	printf '{\n  "access_key_id": "AKIDEXAMPLE",\n  "secret_access_key": "%s"\n}\n' "$SKV" >"$WORK/aws.json"
	seal_doc awsc json "$WORK/aws.json" >"$WORK/awsc.sealed" || { why="seal --kind json: $(tail -1 "$WORK/seal.log")"; return 1; }
	bad_put 201 awsc "$WORK/awsc.sealed" '.kind == "json" and .name == "awsc"' || return 1
	api GET /v1/secrets/awsc
	jq -e '.kind == "json"' <<<"$out" >/dev/null || { why="GET: $(short "$out")"; return 1; }
	"${SECTL[@]}" secret ls >"$WORK/ls2.out" 2>&1 &&
	grep -Eq '^awsc +json +[0-9]+ ' "$WORK/ls2.out" || { why="secret ls: $(short "$(cat "$WORK/ls2.out")")"; return 1; }
	# the header kind refuses the newlines, and says what to do
	o=$("$SLUICECTL" seal --pub "$KEYS/gateway.pub" --name x <"$WORK/aws.json" 2>&1 >/dev/null)
	grep -q -- '--kind json' <<<"$o" || { why="header seal of JSON: $(short "$o")"; return 1; }
	# json that is no object, pem that is no key
	printf '[1]' >"$WORK/arr.json"
	o=$(seal_doc x json "$WORK/arr.json" 2>&1 >/dev/null; tail -1 "$WORK/seal.log")
	grep -q 'one JSON object' <<<"$o" || { why="seal of an array: $(short "$o")"; return 1; }
	o=$(seal_doc x pem "$WORK/aws.json" 2>&1 >/dev/null; tail -1 "$WORK/seal.log")
	grep -q 'private key' <<<"$o" || { why="seal of JSON as pem: $(short "$o")"; return 1; }
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/k.pem" 2>/dev/null &&
	seal_doc ck pem "$WORK/k.pem" >"$WORK/ck.sealed" || { why="seal --kind pem: $(tail -1 "$WORK/seal.log")"; return 1; }
	bad_put 201 ck "$WORK/ck.sealed" '.kind == "pem"'
}
kind_template() {
	local n tv
	api GET /v1/secrets/tok
	tv=$(jq .version <<<"$out")
	n=$(grep -c 'policies not reloaded' "$WORK/sluiced.log")
	cat >"$POLDIR/kind.yaml" <<-EOF
	name: kind
	egress: {default: deny}
	intercept:
	  - name: docs
	    match: {host: allowed.test, path: /reflect}
	    inject:
	      set: {authorization: "AWS {{secret:awsc}}"}
	EOF
	"${SECTL[@]}" reload >"$WORK/rl.out" 2>&1 && { why="the reload was taken"; return 1; }
	grep -q "intercept:docs: the secret 'awsc' is a json secret" "$WORK/rl.out" ||
	    { why="reload: $(short "$(cat "$WORK/rl.out")")"; return 1; }
	rm -f "$POLDIR/kind.yaml"
	[ "$(grep -c 'policies not reloaded' "$WORK/sluiced.log")" -gt "$n" ] || { why="no refusal in the log"; return 1; }
	api GET /v1/policies/kind
	[ "$st" = 404 ] || { why="the refused policy is in force: $st"; return 1; }
	# a policy in force that names a header secret not there yet...
	cat >"$POLDIR/kind.yaml" <<-EOF
	name: kind
	egress: {default: deny}
	intercept:
	  - name: later
	    match: {host: allowed.test, path: /later}
	    inject:
	      set: {authorization: "Bearer {{secret:later}}"}
	EOF
	"${SECTL[@]}" reload >"$WORK/rl.out" 2>&1 || { why="reload: $(short "$(cat "$WORK/rl.out")")"; return 1; }
	# ... refuses it as a document, through the API and through the folder
	seal_doc later json "$WORK/aws.json" >"$WORK/later.sealed" || return 1
	bad_put 409 later "$WORK/later.sealed" ".error | test(\"intercept:later: the secret 'later' is a json secret\")" || return 1
	cp "$WORK/later.sealed" "$SECDIR/.t" && mv "$SECDIR/.t" "$SECDIR/later.sealed"
	sleep 0.5
	api GET /v1/secrets/later
	[ "$st" = 404 ] || { why="the folder's json 'later' is in force: $st"; return 1; }
	grep -q "the secret 'later' is a json secret" "$WORK/sluiced.log" || { why="no refusal of the folder's file in the log"; return 1; }
	rm -f "$SECDIR/later.sealed" "$POLDIR/kind.yaml"
	"${SECTL[@]}" reload >"$WORK/rl.out" 2>&1 || { why="reload: $(short "$(cat "$WORK/rl.out")")"; return 1; }
	wait_version tok "$tv"
}
kind_change() {
	local tv
	api GET /v1/secrets/tok
	tv=$(jq .version <<<"$out")
	# tok is a header secret: a json version of it is refused, the remedy named
	seal_doc tok json "$WORK/aws.json" 99999999999999999 >"$WORK/tokj.sealed" || return 1
	bad_put 409 tok "$WORK/tokj.sealed" '.error | test("json secret and version [0-9]+ in force is a header secret; remove the secret first")' || return 1
	wait_version tok "$tv"
}
# rotations a script makes within one second each get a higher version
kind_versions() {
	local v1 v2 i
	for i in 1 2; do
		printf 'rv-%s' "$i" | "$SLUICECTL" seal --pub "$KEYS/gateway.pub" --name rv \
		    >"$WORK/rv$i.sealed" 2>>"$WORK/seal.log" || return 1
	done
	bad_put 201 rv "$WORK/rv1.sealed" '.version > 1000000000000000' || return 1
	v1=$(jq .version <<<"$out")
	bad_put 200 rv "$WORK/rv2.sealed" ".version > $v1" || return 1
	v2=$(jq .version <<<"$out")
	# and the refusal of the older one names the remedy
	bad_put 409 rv "$WORK/rv1.sealed" '.error | test("seal again without --secret-version")' || return 1
	[ "$v2" -gt "$v1" ] || { why="versions $v1 then $v2"; return 1; }
	"${SECTL[@]}" secret rm rv >/dev/null 2>&1
}
check kind_json kind_json
check kind_template kind_template
check kind_change kind_change
check kind_versions kind_versions

# ================================================================ daemon and leaks

# no secret value, in any form, in anything sluiced wrote or the sandbox got
leak_none() {
	local f
	[ -s "$SEEN" ] && [ -s "$API_SEEN" ] && [ -s "$AUDIT" ] || { why="nothing collected to scan"; return 1; }
	for f in "$WORK/sluiced.log" "$AUDIT" "$SEEN" "$API_SEEN" "$WORK/check.log" "$WORK/seal.log" "$WORK/keygen.log"; do
		no_value "$f" "${ALL_VALUES[@]}" || return 1
	done
	# and the scan finds a value where there is one
	printf 'x%sx' "$(printf '%s' "$TOK2" | base64 -w0)" >"$WORK/canary"
	no_value "$WORK/canary" "$TOK2" 2>/dev/null && { why="the scan misses a base64'd value"; return 1; }
	return 0
}

check daemon_same daemon_same
check daemon_ends daemon_ends
check leak_none leak_none

check_done
