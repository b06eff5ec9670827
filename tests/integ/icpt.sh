#!/bin/bash
# icpt.sh: integration tests of TLS interception (SPEC "Per intercepted
# request", "Per-sandbox CA", upstream TLS), against one real sluiced in
# the namespace world of tests/integ/lib.sh.
#
# usage: tests/integ/icpt.sh [-k] [-v]
#   -k  keep the work directory (always kept when something fails)
#   -v  print the last client output and sluiced's log tail on each failure
# Environment: top_srcdir, top_builddir (set by make check), SLUICED
# (default $top_builddir/sluiced), PYTHON.
# Exit: 0 all passed, 1 something failed, 77 skipped (not root, no ip netns
# or nft, a tool missing).  Needs root: it creates namespaces.
#
# The sandbox "box" (sb, registered through the control API) has the
# policy "icpt": allowed.test is intercepted with rules per path, method,
# query and header, and a final deny; denied.test has one pass rule and
# nothing else; selfsigned.test, expired.test and wronghost.test are
# upstreams whose certificates fail verification; privca.test has a
# certificate of a private CA that only some rules trust (upstream.ca,
# with and without pin_sha256).
# The static sandbox "fixed" (sb2, sluiced.yaml) intercepts allowed.test
# with a CA of its own.  Clients trust the sandbox's CA only, never the
# test root, so every 200 below went through an interception.
# Every check looks at both ends: what the client got, and what the
# upstream (tests/integ/upstream.py) received or did not receive.
#
# One sluiced runs for the whole run; the checks, in order:
#   tls_*    the leaf (subject, issuer, SAN, the sandbox's CA), TLS 1.2
#            and 1.3, ALPN http/1.1, IPv6, per-sandbox CAs
#   hdr_*    the request head the upstream gets (Host rewritten, hop-by-hop
#            dropped, the rest intact) and the response head the client
#            gets
#   deny_*   method, path, query, header, no rule, forward without keys,
#            a method override on a rule that does not allow it: 403
#            JSON from sluice, nothing upstream; inject (a canary);
#            allow_method_override lets the override through
#   ka_*     keep-alive and pipelining: each request judged, answers in
#            order, refusals after slow answers, bodies of refused requests
#   host_*   Host, absolute-form target or port other than the SNI: 421
#   path_*   normalisation: dot segments, escapes, encoded slash: 400
#   smug_*   request smuggling corpus, first on a connection and after a
#            good request: 400, the connection closes, nothing smuggled;
#            malformed answers: 502, nothing of them passed on
#   cert_*   upstream certificates that fail (self-signed, expired, other
#            host, unknown CA): 502 naming the problem; a rule's own CA
#            and pins
#   body_*   several MiB up (chunked, Content-Length, Expect: 100-continue,
#            an upstream that reads late) and down
#   ws_*     WebSocket echo through a pass rule; refused and non-101
#            upgrades
#   audit_*  request and conn records
#   live_*   policy swaps on an open intercepted connection
#   tls_h2_only, tls_11_only  ClientHellos sluice refuses; it lives on
#   daemon_* sluiced is the same process throughout, and ends well
# Output: "ok NAME" or "FAIL NAME: why" per check, then "N passed, N failed"
# (the work directory, when kept, is named on stderr).

# shellcheck source=tests/integ/check.sh
. "$(dirname "$0")/check.sh"

check_needs curl openssl dnsmasq dig ss timeout jq sha256sum

check_work icpt
PKI=$WORK/pki CA=$WORK/pki/ca.pem XPKI=$WORK/xpki STATE=$WORK/state
SOCK=$WORK/control.sock POLDIR=$WORK/policy.d AUDIT=$WORK/audit.jsonl
BOX_CA=$WORK/box.pem FIXED_CA=$WORK/fixed.pem

# ---------------------------------------------------------------- checks

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

# ---------------------------------------------------------------- clients in the sandboxes

# The test internet (lib.sh) and the names this script adds (dnsmasq
# answers them through world_dns_host).
addr_of() {
	case "$1" in
	allowed.test) echo 198.18.1.10 ;;
	other.test) echo 198.18.1.11 ;;
	denied.test) echo 198.18.1.12 ;;
	selfsigned.test) echo 198.18.1.17 ;;
	expired.test) echo 198.18.1.18 ;;
	wronghost.test) echo 198.18.1.19 ;;
	privca.test) echo 198.18.1.20 ;;
	esac
}
RESOLVE=()
for n in allowed.test other.test denied.test selfsigned.test expired.test \
    wronghost.test privca.test; do
	RESOLVE+=(--resolve "$n:443:$(addr_of "$n")")
done

# hello_ok UPSTREAM: the last curl got 200 from that upstream server.
hello_ok() {
	cwant 200 || return 1
	grep -qx "hello from $1" "$WORK/c.b" ||
	    { why="$last: 200 but not from $1: $(short "$(head -c 200 "$WORK/c.b")")"; return 1; }
}

rout=""

# traw NAME SEND [OPT...]: SEND (\r \n \x escapes) written at once over TLS
# from sb to NAME (SNI, box's CA), answers read (upstream.py raw --json);
# rout holds its JSON lines.
traw() {
	local name=$1 send=$2
	shift 2
	last="raw $name $(short "$send")"
	rout=$(timeout 30 ip netns exec "$NS_SB" "$PY" "$UPSTREAM_PY" raw \
	    "$(addr_of "$name"):443" --tls-name "$name" --ca "$BOX_CA" --json \
	    --timeout 5 --send "$send" "$@" 2>&1)
	printf '%s\n' "$rout" >>"$SEEN"
	out=$rout
}

# rwant JQ...: each jq test holds over the answers of the last traw (an
# array: {"n","status","headers","body"}..., then {"trailing"}, {"end"}).
rwant() {
	local t
	for t in "$@"; do
		jq -s -e "$t" >/dev/null 2>&1 <<<"$rout" ||
		    { why="$last: not ($t): $(short "$rout")"; return 1; }
	done
}
# jq helpers for rwant
JQ_ST='map(select(.n)) | map(.status)'
JQ_CLOSED='.[-1].end | test("^(eof|reset|tls-error)")'
JQ_OPEN='.[-1].end == "open"'

NOTHING_UP='allowed-tls.accepted=0 allowed-tls.requests=0 other-tls.accepted=0 denied-tls.accepted=0'

NUM='~^[0-9]+$'

# ---------------------------------------------------------------- certificates

# The upstreams whose certificates must fail, and the private CA one rule
# trusts: made here with openssl (the expired one through "openssl ca",
# which alone can date a certificate in the past).
make_certs() {
	local d=$XPKI
	mkdir -p "$d/db" && : >"$d/db/index.txt" && echo 1000 >"$d/db/serial" || return 1
	cat >"$d/leaf.cnf" <<-EOF
	[req]
	distinguished_name = dn
	prompt = no
	[dn]
	[v3]
	basicConstraints = critical, CA:false
	keyUsage = critical, digitalSignature
	extendedKeyUsage = serverAuth
	subjectAltName = \${ENV::SAN}
	EOF
	# a self-signed leaf for selfsigned.test
	ec_key "$d/selfsigned.key" &&
	SAN=DNS:selfsigned.test openssl req -new -x509 -key "$d/selfsigned.key" \
	    -subj "/O=Icpt Test/CN=selfsigned.test" -days 30 -config "$d/leaf.cnf" \
	    -extensions v3 -out "$d/selfsigned.pem" || return 1
	# a private CA and its leaf for privca.test
	ec_key "$d/privca.key" &&
	openssl req -new -x509 -key "$d/privca.key" -subj "/O=Icpt Test/CN=Icpt Private CA" \
	    -days 30 -addext "basicConstraints=critical,CA:true,pathlen:0" \
	    -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$d/privca.ca.pem" || return 1
	ec_key "$d/privca.key2" &&
	openssl req -new -key "$d/privca.key2" -subj "/O=Icpt Test/CN=privca.test" \
	    -out "$d/privca.csr" &&
	SAN=DNS:privca.test openssl x509 -req -in "$d/privca.csr" -CA "$d/privca.ca.pem" \
	    -CAkey "$d/privca.key" -CAcreateserial -days 30 -extfile "$d/leaf.cnf" \
	    -extensions v3 -out "$d/privca.pem" || return 1
	# a leaf of the test root that expired long ago
	cat >"$d/ca.cnf" <<-EOF
	[ca]
	default_ca = tca
	[tca]
	database = $d/db/index.txt
	new_certs_dir = $d/db
	serial = $d/db/serial
	default_md = sha256
	policy = any
	unique_subject = no
	[any]
	commonName = supplied
	organizationName = optional
	EOF
	ec_key "$d/expired.key" &&
	openssl req -new -key "$d/expired.key" -subj "/O=Sluice Test/CN=expired.test" \
	    -out "$d/expired.csr" &&
	SAN=DNS:expired.test openssl ca -batch -notext -config "$d/ca.cnf" \
	    -cert "$CA" -keyfile "$PKI/ca.key" -in "$d/expired.csr" \
	    -startdate 20200101000000Z -enddate 20200201000000Z \
	    -extfile "$d/leaf.cnf" -extensions v3 -out "$d/expired.pem" || return 1
	# wronghost.test presents the test root's leaf for elsewhere.test
	# (certs/mkpki.sh made it)
	[ -s "$PKI/elsewhere.test.pem" ] || return 1
	# pins (base64 SHA-256 of the SPKI): privca.test's key, and another
	PIN_OK=$(spki_pin "$d/privca.pem") && PIN_BAD=$(spki_pin "$d/selfsigned.pem") &&
	    [ -n "$PIN_OK" ] && [ "$PIN_OK" != "$PIN_BAD" ]
}
ec_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }
spki_pin() {
	openssl x509 -in "$1" -noout -pubkey | openssl pkey -pubin -outform der |
	    openssl dgst -sha256 -binary | base64
}

# ---------------------------------------------------------------- the world and sluiced

world_init
"$top_srcdir/certs/mkpki.sh" "$PKI" $WORLD_CERT_NAMES elsewhere.test >"$WORK/mkpki.log" 2>&1 ||
    setup_fail "certs/mkpki.sh failed (see $WORK/mkpki.log)"
PIN_OK="" PIN_BAD=""
make_certs 2>>"$WORK/certs.log" >&2 || setup_fail "making the test certificates failed (see $WORK/certs.log)"
# the secret the inject rule names, and one bound elsewhere: canaries for
# tests/integ/leaks.sh, which looks for them in everything this run kept
canary_secrets "$WORK/keys" "$WORK/secrets" tok:allowed.test spare:other.test ||
    setup_fail "sealing the canary secrets: $(tail -1 "$WORK/seal.log" "$WORK/keygen.log" 2>/dev/null)"
CANARY_TOK=$(head -1 "$WORK/canary-values")
world_up >"$WORK/world.log" 2>&1 || setup_fail "world_up: $(tail -1 "$WORK/world.log")"
world_start_dns "$WORK" 2>>"$WORK/world.log" || setup_fail "dnsmasq did not start"
world_start_upstreams "$PKI" "$STATE" "$WORK" 2>>"$WORK/world.log" ||
    setup_fail "upstreams did not start (see $WORK/upstream.log)"
# the upstreams with bad certificates, on addresses of up that lib.sh
# leaves unused (198.18.1.20 serves UDP only)
world_spawn "$NS_UP" "$WORK/upstream-x.log" "$PY" "$UPSTREAM_PY" serve \
    --state-dir "$STATE" --ready "$STATE/ready-x" \
    "selfsigned-tls=tls;198.18.1.17:443;$XPKI/selfsigned.pem;$XPKI/selfsigned.key" \
    "expired-tls=tls;198.18.1.18:443;$XPKI/expired.pem;$XPKI/expired.key" \
    "wronghost-tls=tls;198.18.1.19:443;$PKI/elsewhere.test.pem;$PKI/elsewhere.test.key" \
    "privca-tls=tls;198.18.1.20:443;$XPKI/privca.pem;$XPKI/privca.key2"
world_wait_file "$STATE/ready-x" 100 || setup_fail "extra upstreams did not start: $(tail -3 "$WORK/upstream-x.log")"
for n in selfsigned.test expired.test wronghost.test privca.test; do
	world_dns_host "$n" "$(addr_of "$n")" 2>>"$WORK/world.log" || setup_fail "dnsmasq does not answer $n"
done
world_load_nft >>"$WORK/world.log" 2>&1 || setup_fail "cannot load contrib/sluice.nft"

mkdir -p "$POLDIR"
cp "$top_srcdir/policy.d/default.yaml" "$POLDIR/"
# icpt: the policy of box (sb).  Rules are tried in order; allowed-default
# is the last word on allowed.test.
ICPT_RULES="intercept:
  - name: pub-read
    match: {host: allowed.test, methods: [GET, HEAD], path: \"/pub/**\"}
    action: pass
  - name: slow
    match: {host: allowed.test, methods: [GET], path: /slow}
    action: pass
  - name: echo
    match: {host: allowed.test, path: /echo-headers}
    action: pass
  - name: upload
    match: {host: allowed.test, methods: [POST, PUT], path: /upload}
    action: pass
  - name: rand
    match: {host: allowed.test, methods: [GET], path: /rand}
    action: pass
  - name: search
    match: {host: allowed.test, methods: [GET], path: /search, query: {mode: \"safe-*\"}}
    action: pass
  - name: team
    match: {host: allowed.test, path: /team, headers: {x-team: \"ml-*\"}}
    action: pass
  - name: ws
    match: {host: allowed.test, methods: [GET], path: /ws}
    action: pass
  - name: bad-response
    match: {host: allowed.test, methods: [GET], path: /bad-response}
    action: pass
  - name: inject-token
    match: {host: allowed.test, path: /inject}
    inject:
      set: {authorization: \"Bearer {{secret:tok}}\"}
  - name: forward-broker
    match: {host: allowed.test, path: /forward}
    forward: {to: \"https://other.test\", audience: broker}
  - name: override-ok
    match: {host: allowed.test, path: \"/override-ok/**\"}
    action: pass
    allow_method_override: true
  - name: inject-override-ok
    match: {host: allowed.test, path: /inject-override-ok}
    inject:
      set: {authorization: \"Bearer {{secret:tok}}\"}
    allow_method_override: true"
ICPT_TAIL="  - name: allowed-default
    match: {host: allowed.test}
    action: deny
  - name: denied-only
    match: {host: denied.test, path: /only}
    action: pass
  - name: selfsigned-ca-missing
    match: {host: selfsigned.test, path: \"/missing-ca/**\"}
    action: pass
    upstream: {ca: \"$XPKI/no-such-ca.pem\"}
  - name: selfsigned
    match: {host: selfsigned.test}
    action: pass
  - name: expired
    match: {host: expired.test}
    action: pass
  - name: wronghost
    match: {host: wronghost.test}
    action: pass
  - name: privca-trusted
    match: {host: privca.test, path: \"/trusted/**\"}
    action: pass
    upstream: {ca: \"$XPKI/privca.ca.pem\"}
  - name: privca-pinned
    match: {host: privca.test, path: \"/pinned/**\"}
    action: pass
    upstream: {ca: \"$XPKI/privca.ca.pem\", pin_sha256: [\"$PIN_OK\"]}
  - name: privca-mispinned
    match: {host: privca.test, path: \"/mispinned/**\"}
    action: pass
    upstream: {ca: \"$XPKI/privca.ca.pem\", pin_sha256: [\"$PIN_BAD\"]}
  - name: privca
    match: {host: privca.test}
    action: pass"
cat >"$POLDIR/icpt.yaml" <<EOF
# icpt: box's policy
name: icpt
# HTTP/1.1 alone: this suite is about HTTP/1.1 (h2.sh: HTTP/2)
alpn: [http/1.1]
egress:
  default: deny
  allow:
    - domain: other.test
    # allowed.test's IPv6 address is ULA (private): intercepted there only
    # because this CIDR allows it (tls_ipv6)
    - cidr: "fd00:5c::2:10/128"
      ports: [443]
$ICPT_RULES
  - name: hold
    match: {host: allowed.test, methods: [GET], path: "/hold/**"}
    action: pass
$ICPT_TAIL
EOF
# icpt-deny: the same, but /hold/again is denied now
cat >"$POLDIR/icpt-deny.yaml" <<EOF
# icpt-deny: box's policy after the first live swap
name: icpt-deny
# HTTP/1.1 alone: this suite is about HTTP/1.1 (h2.sh: HTTP/2)
alpn: [http/1.1]
egress:
  default: deny
  allow:
    - domain: other.test
    # allowed.test's IPv6 address is ULA (private): intercepted there only
    # because this CIDR allows it (tls_ipv6)
    - cidr: "fd00:5c::2:10/128"
      ports: [443]
$ICPT_RULES
  - name: hold-again
    match: {host: allowed.test, path: /hold/again}
    action: deny
  - name: hold
    match: {host: allowed.test, methods: [GET], path: "/hold/**"}
    action: pass
$ICPT_TAIL
EOF
# icpt-none: allowed.test passed through, no longer intercepted
cat >"$POLDIR/icpt-none.yaml" <<EOF
# icpt-none: nothing intercepted
name: icpt-none
egress:
  default: deny
  allow:
    - domain: allowed.test
EOF
cat >"$POLDIR/fixed.yaml" <<EOF
# fixed: the static sandbox (sb2) reads /pub of allowed.test
name: fixed
# HTTP/1.1 alone: this suite is about HTTP/1.1 (h2.sh: HTTP/2)
alpn: [http/1.1]
egress:
  default: deny
intercept:
  - name: fixed-pub
    match: {host: allowed.test, methods: [GET], path: "/pub/**"}
    action: pass
EOF
cat >"$WORK/sluiced.yaml" <<EOF
# generated by tests/integ/icpt.sh
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
timeouts: {handshake: 5s, idle: 30s, connect: 3s}
sandboxes:
  - {id: fixed, sources: ["198.18.0.3", "fd00:5c::1:3"], policy: fixed}
EOF
: >"$AUDIT"
daemon_start
register_box icpt
api GET /v1/sandboxes/fixed/ca.pem
[ "$st" = 200 ] || setup_fail "fixed's CA: $st $(short "$out")"
cp "$WORK/api.b" "$FIXED_CA"
api GET /v1/policies/icpt
ICPT_REV=$(jq -r .revision <<<"$out")

# ================================================================ tls
# The sandbox's TLS ends at sluice: a leaf for the SNI host, issued by the
# sandbox's own CA (and only by it), TLS 1.2 and 1.3, ALPN http/1.1.

# leaf_of NS CAFILE: the leaf sluice presents for allowed.test in NS, in
# $WORK/leaf.pem; out holds s_client's output.
leaf_of() {
	out=$(timeout 15 ip netns exec "$1" openssl s_client -connect 198.18.1.10:443 \
	    -servername allowed.test -CAfile "$2" -showcerts </dev/null 2>&1)
	awk '/BEGIN CERTIFICATE/ { n++ } n == 1 { print } /END CERTIFICATE/ && n == 1 { exit }' \
	    <<<"$out" >"$WORK/leaf.pem"
	[ -s "$WORK/leaf.pem" ] || { why="no certificate from allowed.test: $(short "$out")"; return 1; }
}

tls_leaf() {
	local t subj ca_subj
	last="openssl s_client allowed.test (box's CA)"
	leaf_of "$NS_SB" "$BOX_CA" || return 1
	grep -q 'Verify return code: 0 (ok)' <<<"$out" ||
	    { why="s_client does not verify the leaf with box's CA: $(grep 'Verify return' <<<"$out")"; return 1; }
	t=$(openssl x509 -in "$WORK/leaf.pem" -noout -subject -issuer -ext subjectAltName -nameopt RFC2253 2>&1)
	subj=$(sed -n 's/^subject=//p' <<<"$t")
	ca_subj=$(openssl x509 -in "$BOX_CA" -noout -subject -nameopt RFC2253 | sed 's/^subject=//')
	grep -q 'CN=allowed.test' <<<"$subj" || { why="leaf subject '$subj' does not name allowed.test"; return 1; }
	[ "$(sed -n 's/^issuer=//p' <<<"$t")" = "$ca_subj" ] ||
	    { why="leaf issuer '$(sed -n 's/^issuer=//p' <<<"$t")' is not box's CA '$ca_subj'"; return 1; }
	grep -A1 'Subject Alternative Name' <<<"$t" | grep -qw 'DNS:allowed.test' ||
	    { why="leaf SAN lacks DNS:allowed.test: $(short "$t")"; return 1; }
	openssl verify -CAfile "$BOX_CA" "$WORK/leaf.pem" >/dev/null 2>&1 ||
	    { why="openssl verify: the leaf does not chain to box's CA"; return 1; }
	openssl verify -CAfile "$CA" "$WORK/leaf.pem" >/dev/null 2>&1 &&
	    { why="the leaf verifies against the test root: not sluice's"; return 1; }
	return 0
}
# what curl reports: the same leaf, verified with the sandbox CA
tls_curl_leaf() {
	local ca_cn
	ca_cn=$(openssl x509 -in "$BOX_CA" -noout -subject -nameopt RFC2253 | sed -n 's/^subject=.*CN=\([^,]*\).*/\1/p')
	hc -v https://allowed.test/pub/leaf
	hello_ok allowed-tls || return 1
	grep -q '^\*  subject: .*CN=allowed.test' <<<"$cerr" &&
	    grep '^\*  issuer: ' <<<"$cerr" | grep -qF "CN=$ca_cn" &&
	    grep -q "subjectAltName: host \"allowed.test\" matched" <<<"$cerr" &&
	    grep -q 'SSL certificate verify ok' <<<"$cerr" ||
	    { why="curl -v: $(short "$(grep -E '^\*  (subject|issuer|subjectAltName)|verify' <<<"$cerr")")"; return 1; }
}
tls_v12() {
	hc -v --tlsv1.2 --tls-max 1.2 https://allowed.test/pub/v12
	hello_ok allowed-tls || return 1
	grep -q 'SSL connection using TLSv1.2' <<<"$cerr" ||
	    { why="not TLS 1.2: $(grep 'SSL connection' <<<"$cerr")"; return 1; }
}
tls_v13() {
	hc -v --tlsv1.3 https://allowed.test/pub/v13
	hello_ok allowed-tls || return 1
	grep -q 'SSL connection using TLSv1.3' <<<"$cerr" ||
	    { why="not TLS 1.3: $(grep 'SSL connection' <<<"$cerr")"; return 1; }
}
# curl offers h2 and http/1.1: the policy offers http/1.1 alone, sluice
# takes it (by default it would take h2: h2.sh)
tls_alpn() {
	hc -v https://allowed.test/pub/alpn
	hello_ok allowed-tls || return 1
	grep -q 'ALPN: offers h2' <<<"$cerr" && grep -q 'ALPN: server accepted http/1.1' <<<"$cerr" &&
	    grep -q '^< HTTP/1.1 200' <<<"$cerr" ||
	    { why="ALPN: $(short "$(grep -E 'ALPN|^< HTTP' <<<"$cerr")")"; return 1; }
}
tls_ipv6() {
	last="curl https://allowed.test/pub/v6 via [fd00:5c::2:10]"
	hc --resolve 'allowed.test:443:[fd00:5c::2:10]' https://allowed.test/pub/v6
	hello_ok allowed-tls
}
# the static sandbox fixed (sb2) gets leaves of its own CA, not box's
tls_static_sandbox() {
	last="curl from sb2 (fixed's CA)"
	out=$(timeout 20 ip netns exec "$NS_SB2" curl -sS --max-time 10 --cacert "$FIXED_CA" \
	    --resolve allowed.test:443:198.18.1.10 https://allowed.test/pub/fixed 2>&1)
	[ "$out" = "hello from allowed-tls" ] || { why="sb2 with fixed's CA: $(short "$out")"; return 1; }
	leaf_of "$NS_SB2" "$FIXED_CA" || return 1
	openssl verify -CAfile "$FIXED_CA" "$WORK/leaf.pem" >/dev/null 2>&1 ||
	    { why="sb2's leaf does not chain to fixed's CA"; return 1; }
	openssl verify -CAfile "$BOX_CA" "$WORK/leaf.pem" >/dev/null 2>&1 &&
	    { why="sb2's leaf verifies with box's CA"; return 1; }
	out=$(timeout 20 ip netns exec "$NS_SB2" curl -sS --max-time 10 --cacert "$BOX_CA" \
	    --resolve allowed.test:443:198.18.1.10 https://allowed.test/pub/fixed 2>&1)
	[ $? = 60 ] || { why="sb2 trusting box's CA: want curl exit 60: $(short "$out")"; return 1; }
}

check tls_leaf tls_leaf
check tls_curl_leaf tls_curl_leaf
check tls_v12 tls_v12
check tls_v13 tls_v13
check tls_alpn tls_alpn
check tls_ipv6 tls_ipv6
check tls_static_sandbox tls_static_sandbox

# ================================================================ hdr
# What crosses: the upstream gets Host rewritten to the SNI host, none of
# the hop-by-hop headers (Connection and what it names, Keep-Alive, TE,
# Proxy-*), every other header as sent and in order; the client gets the
# answer without its hop-by-hop headers.

HOP_REQ='GET /echo-headers HTTP/1.1\r\nHost: Allowed.Test:443\r\nUser-Agent: icpt-test\r\nConnection: keep-alive, X-Conn-Named\r\nX-Conn-Named: secret\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nAccept: application/json\r\nProxy-Authorization: Basic Zm9vOmJhcg==\r\nProxy-Connection: keep-alive\r\nX-Custom: a  b\r\nCookie: c=1\r\nX-Dup: 1\r\nX-Dup: 2\r\n\r\n'
HOP_WANT='[["Host","allowed.test"],["User-Agent","icpt-test"],["Accept","application/json"],["X-Custom","a  b"],["Cookie","c=1"],["X-Dup","1"],["X-Dup","2"]]'

hdr_request() {
	snap
	traw allowed.test "$HOP_REQ" --responses 1
	rwant "$JQ_ST == [200]" || return 1
	upx 'allowed-tls.requests=1 allowed-tls.paths=/echo-headers' || return 1
	upwant allowed-tls "map(select(.headers | map(.[0] | ascii_downcase) |
	    any(. == \"connection\" or . == \"x-conn-named\" or . == \"keep-alive\" or . == \"te\" or
	        . == \"proxy-authorization\" or . == \"proxy-connection\"))) == []" || return 1
	upwant allowed-tls "map(select(.headers | map(select(.[0] | ascii_downcase == \"host\")) != [[\"Host\", \"allowed.test\"]])) == []" || return 1
	upwant allowed-tls ".[0].headers == $HOP_WANT" || return 1
	# the client's view: the echo says the same
	rwant "(.[0].body | fromjson | .headers) == $HOP_WANT"
}
# the same through curl (a real client's head)
hdr_request_curl() {
	snap
	hc -H 'Connection: keep-alive, X-Conn-Named' -H 'X-Conn-Named: secret' \
	    -H 'Keep-Alive: timeout=5' -H 'TE: trailers' -H 'Proxy-Authorization: Basic Zm9vOmJhcg==' \
	    -H 'Proxy-Connection: keep-alive' -H 'X-Custom: kept' https://allowed.test/echo-headers
	cwant 200 || return 1
	upwant allowed-tls 'length == 1' \
	    '[.[0].headers[][0] | ascii_downcase] as $n | ($n - ["connection", "x-conn-named", "keep-alive", "te", "proxy-authorization", "proxy-connection"]) == $n' \
	    '.[0].headers | map(select(.[0] == "Host")) == [["Host", "allowed.test"]]' \
	    '.[0].headers | index([["X-Custom", "kept"]]) != null' \
	    '.[0].headers | map(.[0]) | index("User-Agent") != null and index("Accept") != null'
}
# the answer carries Connection: X-Resp-Hop, X-Resp-Hop, Keep-Alive,
# Proxy-Authenticate and Upgrade: none reaches the client
hdr_response() {
	hc 'https://allowed.test/echo-headers?hop=1'
	cwant 200 || return 1
	grep -qix 'x-resp-ordinary: kept' <<<"$chdrs" && grep -qix 'x-upstream: allowed-tls' <<<"$chdrs" ||
	    { why="ordinary answer headers missing: $(short "$chdrs")"; return 1; }
	grep -Eiq '^(x-resp-hop|keep-alive|proxy-authenticate|upgrade):|^connection:.*x-resp-hop' <<<"$chdrs" &&
	    { why="hop-by-hop answer headers reached the client: $(short "$(grep -Ei '^(x-resp-hop|keep-alive|proxy-|upgrade|connection):' <<<"$chdrs")")"; return 1; }
	return 0
}
# an absolute-form target naming the SNI host: judged and sent origin-form
hdr_absolute_form() {
	snap
	traw allowed.test 'GET http://allowed.test/pub/abs?x=1 HTTP/1.1\r\nHost: allowed.test\r\n\r\n' --responses 1
	rwant "$JQ_ST == [200]" '.[0].body == "hello from allowed-tls\n"' || return 1
	upx 'allowed-tls.requests=1 allowed-tls.paths=/pub/abs?x=1 allowed-tls.hosts=allowed.test'
}

check hdr_request hdr_request
check hdr_request_curl hdr_request_curl
check hdr_response hdr_response
check hdr_absolute_form hdr_absolute_form

# ================================================================ deny
# A request no rule passes gets sluice's own 403 (JSON naming the rule and
# the reason) and the upstream sees nothing: no request, not even a
# connection.  Each has its allowed twin, so the refusal is the rule's.

deny_method() {
	snap
	hc -X POST --data-binary 'x=1' https://allowed.test/pub/m
	denied intercept:allowed-default deny-rule || return 1
	upx "$NOTHING_UP" || return 1
	hc -I https://allowed.test/pub/m
	[ "$cst" = 200 ] || { why="HEAD /pub/m (allowed): $cst"; return 1; }
}
deny_path() {
	snap
	hc https://allowed.test/private/p
	denied intercept:allowed-default deny-rule || return 1
	upx "$NOTHING_UP"
}
deny_query() {
	snap
	hc 'https://allowed.test/search?q=x&mode=unsafe'
	denied intercept:allowed-default deny-rule || return 1
	hc 'https://allowed.test/search?q=x'
	denied intercept:allowed-default deny-rule || return 1
	upx "$NOTHING_UP" || return 1
	hc 'https://allowed.test/search?q=x&mode=safe-1'
	hello_ok allowed-tls || return 1
	upx 'allowed-tls.requests=1 allowed-tls.paths=/search?q=x&mode=safe-1'
}
deny_header() {
	snap
	hc -H 'X-Team: ops' https://allowed.test/team
	denied intercept:allowed-default deny-rule || return 1
	hc https://allowed.test/team
	denied intercept:allowed-default deny-rule || return 1
	upx "$NOTHING_UP" || return 1
	hc -H 'X-Team: ml-agents' https://allowed.test/team
	hello_ok allowed-tls || return 1
	upx 'allowed-tls.requests=1 allowed-tls.paths=/team'
}
# denied.test has one rule: anything else matches none
deny_no_rule() {
	snap
	hc https://denied.test/other
	denied null no-matching-rule || return 1
	upx "$NOTHING_UP" || return 1
	hc https://denied.test/only
	hello_ok denied-tls || return 1
	upx 'denied-tls.requests=1 denied-tls.paths=/only'
}
# an inject rule: the upstream gets the canary, the sandbox's own
# Authorization does not reach it (secrets.sh tests injection in depth);
# this gateway has no signing_key: forward rules fail closed, saying why
# (forward.sh tests forwarding)
deny_inject() {
	snap
	hc -H 'Authorization: Bearer mine' https://allowed.test/inject
	hello_ok allowed-tls || return 1
	upwant allowed-tls 'length == 1' \
	    "[.[0].headers[] | select(.[0] | ascii_downcase == \"authorization\") | .[1]] == [\"Bearer $CANARY_TOK\"]"
}
deny_forward() {
	snap
	hc https://allowed.test/forward
	denied intercept:forward-broker forwarding-off || return 1
	upx "$NOTHING_UP"
}

# A method override (X-HTTP-Method-Override, X-HTTP-Method,
# X-Method-Override) on a pass or inject rule that does not allow it:
# sluice's 403 whatever the value names, and nothing upstream; the same
# requests without it pass.
deny_method_override() {
	local off
	snap
	off=$(audit_lines)
	hc -H 'X-HTTP-Method-Override: POST' https://allowed.test/pub/mo
	denied intercept:pub-read method-override || return 1
	hc -H 'x-http-method: DELETE' https://allowed.test/pub/mo
	denied intercept:pub-read method-override || return 1
	hc -H 'X-Method-Override: GET' https://allowed.test/pub/mo
	denied intercept:pub-read method-override || return 1
	hc -H 'X-HTTP-Method-Override: POST' https://allowed.test/inject
	denied intercept:inject-token method-override || return 1
	upx "$NOTHING_UP" || return 1
	audit_has "$off" \
	    "#3 type=request action=deny reason=method-override rule=intercept:pub-read path=/pub/mo status=403" \
	    "#1 type=request action=deny reason=method-override rule=intercept:inject-token path=/inject status=403" ||
	    return 1
	hc https://allowed.test/pub/mo
	hello_ok allowed-tls || return 1
	hc https://allowed.test/inject
	hello_ok allowed-tls || return 1
	upx 'allowed-tls.requests=2'
}
# allow_method_override: true lets the header through, as sent
allow_method_override() {
	snap
	hc -H 'X-HTTP-Method-Override: POST' https://allowed.test/override-ok/x
	hello_ok allowed-tls || return 1
	hc -H 'X-HTTP-Method-Override: POST' https://allowed.test/inject-override-ok
	hello_ok allowed-tls || return 1
	upwant allowed-tls 'length == 2' 'map(.method) == ["GET", "GET"]' \
	    'map(.path) == ["/override-ok/x", "/inject-override-ok"]' \
	    '[.[].headers[] | select(.[0] == "X-HTTP-Method-Override") | .[1]] == ["POST", "POST"]' \
	    "[.[1].headers[] | select(.[0] | ascii_downcase == \"authorization\") | .[1]] == [\"Bearer $CANARY_TOK\"]"
}

check deny_method deny_method
check deny_path deny_path
check deny_query deny_query
check deny_header deny_header
check deny_no_rule deny_no_rule
check deny_inject deny_inject
check deny_forward deny_forward
check deny_method_override deny_method_override
check allow_method_override allow_method_override

# ================================================================ ka
# Every request on a kept-alive connection is judged on its own; a refusal
# keeps the connection; answers come in the order of the requests.

ka_curl_two() {
	snap
	last="curl /pub/one /private/two on one connection"
	out=$(in_sb curl -sS --max-time 10 --cacert "$BOX_CA" "${RESOLVE[@]}" \
	    -w '%{http_code} %{num_connects}\n' -o /dev/null https://allowed.test/pub/one \
	    -o /dev/null https://allowed.test/private/two 2>&1)
	[ "$out" = $'200 1\n403 0' ] ||
	    { why="want '200 1' then '403 0' (status, new connections): $(short "$out")"; return 1; }
	upx 'allowed-tls.requests=1 allowed-tls.paths=/pub/one'
}
# three at once: a slow allowed one, a refused one, an allowed one; the 403
# must wait for the slow answer
ka_pipelined() {
	snap
	traw allowed.test 'GET /slow?ms=600 HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET /private/p2 HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET /pub/p3 HTTP/1.1\r\nHost: allowed.test\r\n\r\n' \
	    --responses 3 --linger 0.5
	rwant "$JQ_ST == [200, 403, 200]" "$JQ_OPEN" \
	    '.[0].body == "hello from allowed-tls\n" and .[2].body == "hello from allowed-tls\n"' \
	    '.[1].body | fromjson | .error == "denied" and .reason == "deny-rule"' || return 1
	upx 'allowed-tls.requests=2 allowed-tls.paths=/slow?ms=600,/pub/p3'
}
# bodies: a refused request's body is skipped as framed, never sent on nor
# read as a request
ka_pipelined_bodies() {
	snap
	traw allowed.test 'POST /upload HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 3\r\n\r\nabcPOST /private/b HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 50\r\n\r\nGET /pub/smuggled HTTP/1.1\r\nHost: allowed.test\r\n\r\nPOST /upload HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n4\r\ndefg\r\n0\r\n\r\n' \
	    --responses 3 --linger 0.5
	rwant "$JQ_ST == [200, 403, 200]" "$JQ_OPEN" \
	    '(.[0].body | fromjson | .bytes == 3) and (.[2].body | fromjson | .bytes == 4 and .chunked)' || return 1
	upx 'allowed-tls.requests=2 allowed-tls.paths=/upload,/upload' || return 1
	upwant allowed-tls "map(.body_sha256) == [\"$(printf abc | sha256sum | cut -d' ' -f1)\", \"$(printf defg | sha256sum | cut -d' ' -f1)\"]"
}

# a request with "Connection: close": answered, then the connection ends
# (RFC 9112 9.6), whatever the upstream did with its own connection
ka_connection_close() {
	snap
	traw allowed.test 'GET /pub/close HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n' \
	    --responses 1 --linger 2
	rwant "$JQ_ST == [200]" "$JQ_CLOSED" || return 1
	upx 'allowed-tls.requests=1 allowed-tls.paths=/pub/close'
}

check ka_curl_two ka_curl_two
check ka_pipelined ka_pipelined
# HEAD then GET on one connection: the answer to HEAD has no body, whatever
# its Content-Length says, so the GET's answer is read right
ka_head_then_get() {
	snap
	last="curl -I /pub/head1 --next /pub/head2 on one connection"
	out=$(in_sb curl -sS --max-time 10 --cacert "$BOX_CA" "${RESOLVE[@]}" -I -o /dev/null \
	    -w '%{http_code} %{num_connects}\n' https://allowed.test/pub/head1 --next \
	    --cacert "$BOX_CA" "${RESOLVE[@]}" -o "$WORK/c2.b" -w '%{http_code} %{num_connects}\n' \
	    https://allowed.test/pub/head2 2>&1)
	[ "$out" = $'200 1\n200 0' ] && [ "$(cat "$WORK/c2.b")" = "hello from allowed-tls" ] ||
	    { why="want '200 1', '200 0' and the GET's body: $(short "$out | $(head -c 100 "$WORK/c2.b")")"; return 1; }
	upx 'allowed-tls.requests=2 allowed-tls.paths=/pub/head1,/pub/head2'
}

check ka_pipelined_bodies ka_pipelined_bodies
# HEAD then a refused request, pipelined: the 403 waits for the answer
# to HEAD, which has no body, so it follows at once
ka_head_then_denied() {
	snap
	traw allowed.test 'HEAD /pub/head3 HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET /private/head4 HTTP/1.1\r\nHost: allowed.test\r\n\r\n' \
	    --responses 1 --linger 0.5 --timeout 3
	# (raw cannot know the first answer is to HEAD: the 403 is read as its
	# body or what follows it)
	rwant 'tostring | test("deny-rule")' "$JQ_OPEN" || return 1
	upx 'allowed-tls.requests=1 allowed-tls.paths=/pub/head3'
}

# The sandbox's "Connection: close" ends its own connection only: the
# upstream never sees it, its connection goes to the pool, and the
# sandbox's next connections (each a new TLS session to sluice) reuse it:
# no new upstream connection or handshake per client connection.
ka_close_pooled() {
	local i
	hc -H 'Connection: close' https://allowed.test/pub/warm
	[ "$cst" = 200 ] || { why="warm-up: $cst $(short "$cerr")"; return 1; }
	snap
	for i in 1 2 3; do
		hc -H 'Connection: close' https://allowed.test/pub/pooled$i
		[ "$cst" = 200 ] || { why="request $i: $cst $(short "$cerr")"; return 1; }
		# the client is told its connection ends (RFC 9112 9.6)
		grep -qi '^connection: close$' <<<"$chdrs" ||
		    { why="answer $i does not say Connection: close: $(short "$chdrs")"; return 1; }
	done
	upx 'allowed-tls.requests=3 allowed-tls.accepted=0 allowed-tls.handshakes=0' || return 1
	upwant allowed-tls 'map(.headers | map(select(.[0] | ascii_downcase == "connection")) | length == 0) | all'
}
# A client connection kept open after its answer holds no upstream: the
# next request of another of the sandbox's connections takes the pooled one.
ka_idle_parks() {
	local f=$WORK/park
	hc https://allowed.test/pub/park-warm
	[ "$cst" = 200 ] || { why="warm-up: $cst"; return 1; }
	snap
	# one request, then the connection stays open and idle for 3 s
	timeout 30 ip netns exec "$NS_SB" "$PY" "$UPSTREAM_PY" raw \
	    "$(addr_of allowed.test):443" --tls-name allowed.test --ca "$BOX_CA" \
	    --json --timeout 5 --responses 1 --linger 3 \
	    --send 'GET /pub/park1 HTTP/1.1\r\nHost: allowed.test\r\n\r\n' >"$f.out" 2>&1 &
	local held=$!
	sleep 1
	hc https://allowed.test/pub/park2
	[ "$cst" = 200 ] || { why="second connection: $cst"; wait "$held"; return 1; }
	wait "$held"
	upx 'allowed-tls.requests=2 allowed-tls.accepted=0' || { why="$why ($(short "$(cat "$f.out")"))"; return 1; }
}

check ka_head_then_get ka_head_then_get
check ka_head_then_denied ka_head_then_denied
check ka_connection_close ka_connection_close
check ka_close_pooled ka_close_pooled
check ka_idle_parks ka_idle_parks

# ================================================================ host
# Host and any absolute-form target must name the SNI host: else 421,
# nothing upstream (neither the SNI's host nor the one named).

misdirected() {
	rwant "$JQ_ST | .[0] == 421" '.[0].body | fromjson | .error == "misdirected" and .reason == "host-mismatch"'
}
host_header() {
	snap
	hc -H 'Host: other.test' https://allowed.test/pub/h
	cwant 421 '.error == "misdirected"' '.reason == "host-mismatch"' || return 1
	traw allowed.test 'GET /pub/h HTTP/1.1\r\nHost: other.test\r\n\r\n' --responses 1
	misdirected || return 1
	upx "$NOTHING_UP"
}
host_absolute() {
	snap
	traw allowed.test 'GET http://other.test/pub/h HTTP/1.1\r\nHost: allowed.test\r\n\r\n' --responses 1
	misdirected || return 1
	traw allowed.test 'GET http://other.test/pub/h HTTP/1.1\r\nHost: other.test\r\n\r\n' --responses 1
	misdirected || return 1
	upx "$NOTHING_UP"
}
host_port() {
	snap
	traw allowed.test 'GET /pub/h HTTP/1.1\r\nHost: allowed.test:8443\r\n\r\n' --responses 1
	misdirected || return 1
	upx "$NOTHING_UP"
}
# after a 421 the connection still serves a good request
host_then_good() {
	snap
	traw allowed.test 'GET /pub/h HTTP/1.1\r\nHost: other.test\r\n\r\nGET /pub/after421 HTTP/1.1\r\nHost: allowed.test\r\n\r\n' --responses 2
	rwant "$JQ_ST == [421, 200]" || return 1
	upx 'allowed-tls.requests=1 allowed-tls.paths=/pub/after421 other-tls.accepted=0'
}

check host_header host_header
check host_absolute host_absolute
check host_port host_port
check host_then_good host_then_good

# ================================================================ path
# Paths are judged after normalisation and sent on as judged; targets that
# cannot be normalised safely get 400 and the connection ends.

path_dotdot_allowed() {
	snap
	hc --path-as-is https://allowed.test/private/../pub/x
	hello_ok allowed-tls || return 1
	hc --path-as-is 'https://allowed.test/pub/a/./b//c/../d?k=1'
	hello_ok allowed-tls || return 1
	upx 'allowed-tls.requests=2 allowed-tls.paths=/pub/x,/pub/a/b/d?k=1'
}
path_dotdot_denied() {
	snap
	hc --path-as-is https://allowed.test/pub/../private/x
	denied intercept:allowed-default deny-rule || return 1
	hc --path-as-is 'https://allowed.test/pub/%2e%2E/private/x'
	denied intercept:allowed-default deny-rule || return 1
	upx "$NOTHING_UP"
}
path_unreserved() {
	snap
	hc --path-as-is 'https://allowed.test/%70ub/%7Euser/%41'
	hello_ok allowed-tls || return 1
	upx 'allowed-tls.requests=1 allowed-tls.paths=/pub/~user/A'
}
# bad_target TARGET: 400 from sluice, the connection closes, nothing up
bad_target() {
	traw allowed.test "GET $1 HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n" --responses 1 --linger 1
	rwant "$JQ_ST == [400]" "$JQ_CLOSED" \
	    '.[0].body | fromjson | .error == "refused" and .reason == "bad-target"' ||
	    { why="target $1: $why"; return 1; }
}
path_above_root() {
	snap
	bad_target '/%2e%2e/pub/x' || return 1
	bad_target '/pub/../../pub/x' || return 1
	bad_target '/pub/%2E%2E/%2e%2e/pub/x' || return 1
	upx "$NOTHING_UP"
}
path_encoded_slash() {
	snap
	bad_target '/pub%2Fx' || return 1
	bad_target '/pub/a%2fb' || return 1
	bad_target '/pub/a%5Cb' || return 1
	bad_target '/pub\\x' || return 1
	bad_target '/pub/%00' || return 1
	upx "$NOTHING_UP"
}

check path_dotdot_allowed path_dotdot_allowed
check path_dotdot_denied path_dotdot_denied
check path_unreserved path_unreserved
check path_above_root path_above_root
check path_encoded_slash path_encoded_slash

# ================================================================ smug
# Ambiguous framing, sent raw over TLS: 400, the connection closes, and no
# request (smuggled or not) reaches the upstream.  Each is sent alone and
# after a good request on the same connection (which alone gets through).
# All connections run at once; the upstream's view is checked at the end
# (smug_upstream): each item's good request (/pub/ok-NN) arrived, and no
# smuggled one (/pub/smuggled-NN) did.

SMUG_NEXT='GET /pub/smuggled-@N@ HTTP/1.1\r\nHost: allowed.test\r\n\r\n'	# 53 bytes
SMUG_POST='POST /upload HTTP/1.1\r\nHost: allowed.test\r\n'
declare -a SMUG=(
	"cl-te|${SMUG_POST}Content-Length: 58\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\n$SMUG_NEXT"
	"te-cl|${SMUG_POST}Transfer-Encoding: chunked\\r\\nContent-Length: 4\\r\\n\\r\\n35\\r\\n${SMUG_NEXT}\\r\\n0\\r\\n\\r\\n"
	"te-xchunked|${SMUG_POST}Transfer-Encoding: xchunked\\r\\n\\r\\n0\\r\\n\\r\\n$SMUG_NEXT"
	"te-xchunked-cl|${SMUG_POST}Content-Length: 5\\r\\nTransfer-Encoding: xchunked\\r\\n\\r\\n0\\r\\n\\r\\n$SMUG_NEXT"
	"te-space-colon|${SMUG_POST}Transfer-Encoding : chunked\\r\\n\\r\\n0\\r\\n\\r\\n$SMUG_NEXT"
	"te-duplicate|${SMUG_POST}Transfer-Encoding: chunked\\r\\nTransfer-Encoding: identity\\r\\n\\r\\n0\\r\\n\\r\\n$SMUG_NEXT"
	"te-not-last|${SMUG_POST}Transfer-Encoding: chunked, identity\\r\\n\\r\\n0\\r\\n\\r\\n$SMUG_NEXT"
	"te-vtab|${SMUG_POST}Transfer-Encoding:\\x0bchunked\\r\\n\\r\\n0\\r\\n\\r\\n$SMUG_NEXT"
	"te-http10|POST /upload HTTP/1.0\\r\\nHost: allowed.test\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\n$SMUG_NEXT"
	"cl-duplicate|${SMUG_POST}Content-Length: 0\\r\\nContent-Length: 53\\r\\n\\r\\n$SMUG_NEXT"
	"cl-repeated-same|${SMUG_POST}Content-Length: 53\\r\\nContent-Length: 53\\r\\n\\r\\n$SMUG_NEXT"
	"cl-sign|${SMUG_POST}Content-Length: +53\\r\\n\\r\\n$SMUG_NEXT"
	"chunk-overflow|${SMUG_POST}Transfer-Encoding: chunked\\r\\n\\r\\nffffffffffffffffff\\r\\nx\\r\\n0\\r\\n\\r\\n$SMUG_NEXT"
	"chunk-size-junk|${SMUG_POST}Transfer-Encoding: chunked\\r\\n\\r\\n3x\\r\\nabc\\r\\n0\\r\\n\\r\\n$SMUG_NEXT"
	"chunk-bare-lf|${SMUG_POST}Transfer-Encoding: chunked\\r\\n\\r\\n3\\nabc\\r\\n0\\r\\n\\r\\n$SMUG_NEXT"
	"bare-lf|GET /pub/lf HTTP/1.1\\nHost: allowed.test\\n\\n$SMUG_NEXT"
	"bare-lf-header|GET /pub/lf HTTP/1.1\\r\\nHost: allowed.test\\nX-A: b\\r\\n\\r\\n$SMUG_NEXT"
	"bare-cr|GET /pub/cr HTTP/1.1\\r\\nHost: allowed.test\\rX-A: b\\r\\n\\r\\n$SMUG_NEXT"
	"obs-fold|GET /pub/fold HTTP/1.1\\r\\nHost: allowed.test\\r\\nX-A: a\\r\\n b\\r\\n\\r\\n$SMUG_NEXT"
	"obs-fold-te|${SMUG_POST}X-A: a\\r\\n Transfer-Encoding: chunked\\r\\nContent-Length: 0\\r\\n\\r\\n$SMUG_NEXT"
	"nul-header|GET /pub/nul HTTP/1.1\\r\\nHost: allowed.test\\r\\nX-A: a\\x00b\\r\\n\\r\\n$SMUG_NEXT"
	"host-duplicate|GET /pub/hh HTTP/1.1\\r\\nHost: allowed.test\\r\\nHost: other.test\\r\\n\\r\\n$SMUG_NEXT"
)

# smug_send: every item alone and after a good request, all at once (one
# upstream.py raw --batch); the answers, by id NN.alone and NN.after, in
# $WORK/smug.out
smug_send() {
	local i nn bytes
	snap
	for i in "${!SMUG[@]}"; do
		nn=$(printf '%02d' "$i")
		bytes=${SMUG[$i]#*|}
		bytes=${bytes//@N@/$nn}
		printf '%s.alone\t%s\n' "$nn" "$bytes"
		printf '%s.after\tGET /pub/ok-%s HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n%s\n' "$nn" "$nn" "$bytes"
	done >"$WORK/smug.batch"
	timeout 30 ip netns exec "$NS_SB" "$PY" "$UPSTREAM_PY" raw 198.18.1.10:443 \
	    --tls-name allowed.test --ca "$BOX_CA" --timeout 4 --responses 2 --linger 1 \
	    --batch "$WORK/smug.batch" >"$WORK/smug.out" 2>&1
}
# smug_one NN NAME: what the client got, alone and after the good request
smug_one() {
	last="smuggling $2 alone"
	rout=$(jq -c --arg id "$1.alone" 'select(.id == $id) | del(.id)' "$WORK/smug.out")
	rwant "$JQ_ST == [400]" "$JQ_CLOSED" '.[0].body | fromjson | .error == "refused"' ||
	    { why="$2 alone: $why"; return 1; }
	last="smuggling $2 after GET /pub/ok-$1"
	rout=$(jq -c --arg id "$1.after" 'select(.id == $id) | del(.id)' "$WORK/smug.out")
	rwant "$JQ_ST == [200, 400]" "$JQ_CLOSED" '.[1].body | fromjson | .error == "refused"' ||
	    { why="$2 after a good request: $why"; return 1; }
}
# the upstream got the good requests, each once, and nothing else
smug_upstream() {
	local want
	want=$(for i in "${!SMUG[@]}"; do printf '/pub/ok-%02d\n' "$i"; done | jq -R . | jq -s -c .)
	last="smuggling corpus"
	upwant allowed-tls "map(.path) | sort == $want" || return 1
	upx 'other-tls.accepted=0'
}

# Answers are framed as strictly: a malformed one is a 502, and none of
# its bytes (nor of an answer nobody asked for) reach the client.
smug_response() {
	local k
	for k in dupcl clte fold lf status nul; do
		hc "https://allowed.test/bad-response?kind=$k"
		cwant 502 '.error == "bad-gateway"' '.reason == "upstream-malformed"' ||
		    { why="kind $k: $why"; return 1; }
	done
	traw allowed.test 'GET /bad-response?kind=extra HTTP/1.1\r\nHost: allowed.test\r\n\r\n' \
	    --responses 2 --linger 1 --timeout 3
	rwant "$JQ_ST | .[0] == 200" '.[0].body == "hello"' \
	    'map(select(.body? // .trailing? // "" | test("smuggled"))) == []' "$JQ_CLOSED"
}

smug_send
for i in "${!SMUG[@]}"; do
	check "smug_${SMUG[$i]%%|*}" smug_one "$(printf '%02d' "$i")" "${SMUG[$i]%%|*}"
done
check smug_upstream smug_upstream
check smug_response smug_response

# ================================================================ cert
# Upstream TLS is verified against upstream_ca (or the rule's own ca) and
# the host name: a certificate that fails gets 502 JSON naming the
# problem, and the request never reaches the upstream's HTTP.

# bad_cert NAME UPSTREAM: 502 upstream-cert-invalid, nothing served
bad_cert() {
	snap
	hc "https://$1/x"
	cwant 502 '.error == "bad-gateway"' '.reason | startswith("upstream-cert-invalid")' || return 1
	upx "$2.requests=0"
}
cert_selfsigned() { bad_cert selfsigned.test selfsigned-tls; }
cert_expired()    { bad_cert expired.test expired-tls; }
cert_wronghost()  { bad_cert wronghost.test wronghost-tls; }
cert_unknown_ca() { bad_cert privca.test privca-tls; }
# the 502 names what is wrong, not only that something is
cert_problem_named() {
	local h re bad=""
	for h in "selfsigned.test|self.signed" "expired.test|expired" \
	    "wronghost.test|hostname|mismatch" "privca.test|local issuer|unable to get"; do
		re=${h#*|}
		hc "https://${h%%|*}/x"
		grep -Eiq "$re" "$WORK/c.b" ||
		    bad="$bad ${h%%|*}: $(short "$(head -c 200 "$WORK/c.b")");"
	done
	[ -z "$bad" ] || { why="the 502 does not name the certificate problem:$bad"; return 1; }
}
# the rule privca-trusted verifies with the private CA: it works
cert_rule_ca() {
	snap
	hc https://privca.test/trusted/x
	hello_ok privca-tls || return 1
	upx 'privca-tls.requests=1 privca-tls.paths=/trusted/x'
}
# upstream.pin_sha256: the key must be the pinned one, on a new upstream
# connection (the first with the private CA: none is parked yet) and on
# one already verified (parked after /pinned/x, when the same worker
# takes the next)
cert_pin() {
	snap
	hc https://privca.test/mispinned/x
	cwant 502 '.error == "bad-gateway"' '.reason == "upstream-pin-mismatch"' || return 1
	hc https://privca.test/pinned/x
	hello_ok privca-tls || return 1
	traw privca.test 'GET /mispinned/y HTTP/1.1\r\nHost: privca.test\r\n\r\n' --responses 1 --linger 1 --timeout 3
	rwant "$JQ_ST == [502]" '.[0].body | fromjson | .reason == "upstream-pin-mismatch"' || return 1
	upx 'privca-tls.requests=1 privca-tls.paths=/pinned/x'
}
cert_rule_ca_missing() {
	local off
	off=$(audit_lines)
	snap
	hc https://selfsigned.test/missing-ca/x
	cwant 502 '.error == "bad-gateway"' '.reason == "upstream-ca-unavailable"' || return 1
	upx 'selfsigned-tls.accepted=0' || return 1
	audit_has "$off" "type=request host=selfsigned.test path=/missing-ca/x status=502 rule=intercept:selfsigned-ca-missing"
}
cert_audit() {
	local off
	off=$(audit_lines)
	hc https://expired.test/audited
	cwant 502 || return 1
	audit_has "$off" "type=request intercepted=true host=expired.test path=/audited status=502 rule=intercept:expired reason=~^upstream-cert-invalid"
}

check cert_selfsigned cert_selfsigned
check cert_expired cert_expired
check cert_wronghost cert_wronghost
check cert_unknown_ca cert_unknown_ca
check cert_problem_named cert_problem_named
check cert_pin cert_pin
check cert_rule_ca cert_rule_ca
check cert_rule_ca_missing cert_rule_ca_missing
check cert_audit cert_audit

# ================================================================ body
# Bodies are relayed as they are: several MiB up (chunked, and with
# Expect: 100-continue) and down (Content-Length and chunked) arrive whole.

head -c $((8 * 1024 * 1024)) /dev/urandom >"$WORK/up8.bin"
head -c $((6 * 1024 * 1024 + 7)) /dev/urandom >"$WORK/up6.bin"
UP8_SHA=$(sha256sum "$WORK/up8.bin" | cut -d' ' -f1)
UP6_SHA=$(sha256sum "$WORK/up6.bin" | cut -d' ' -f1)

body_chunked_upload() {
	snap
	HC_MAX=10 hc -H 'Transfer-Encoding: chunked' -H 'Expect:' --data-binary @"$WORK/up8.bin" \
	    https://allowed.test/upload
	cwant 200 ".sha256 == \"$UP8_SHA\"" '.bytes == 8388608' '.chunked' || return 1
	upwant allowed-tls 'length == 1' ".[0].body_sha256 == \"$UP8_SHA\"" '.[0].chunked' \
	    '.[0].headers | map(.[0] | ascii_downcase) | index("content-length") == null'
}
# the whole body at once, Content-Length, no Expect: sluice must hold the
# sandbox back while the upstream connects, and let it go on after
body_cl_upload() {
	snap
	HC_MAX=10 hc -H 'Expect:' --data-binary @"$WORK/up8.bin" https://allowed.test/upload
	cwant 200 ".sha256 == \"$UP8_SHA\"" '.bytes == 8388608' '.chunked | not' || return 1
	upwant allowed-tls 'length == 1' ".[0].body_sha256 == \"$UP8_SHA\""
}
body_expect_continue() {
	snap
	HC_MAX=10 hc -v -H 'Expect: 100-continue' --expect100-timeout 10 --data-binary @"$WORK/up6.bin" \
	    https://allowed.test/upload
	cwant 200 ".sha256 == \"$UP6_SHA\"" ".bytes == $((6 * 1024 * 1024 + 7))" '.chunked | not' || return 1
	grep -q '^< HTTP/1.1 100 Continue' <<<"$cerr" ||
	    { why="the client saw no 100 Continue: $(short "$(grep '^< HTTP' <<<"$cerr")")"; return 1; }
	upwant allowed-tls 'length == 1' ".[0].body_sha256 == \"$UP6_SHA\"" \
	    '.[0].headers | index([["Expect", "100-continue"]]) != null' \
	    ".[0].headers | index([[\"Content-Length\", \"$((6 * 1024 * 1024 + 7))\"]]) != null"
}
# download N [chunked]: /rand of N bytes arrives with the hash the
# upstream computed
download() {
	local n=$1 q="" h got
	[ "${2:-}" = chunked ] && q="&chunked=1"
	HC_MAX=10 hc "https://allowed.test/rand?n=$n&seed=icpt$q"
	cwant 200 || return 1
	h=$(sed -n 's/^x-body-sha256: //Ip' <<<"$chdrs")
	got=$(sha256sum "$WORK/c.b" | cut -d' ' -f1)
	[ -n "$h" ] && [ "$got" = "$h" ] && [ "$(stat -c %s "$WORK/c.b")" = "$n" ] ||
	    { why="$last: $(stat -c %s "$WORK/c.b") bytes, sha256 $got, upstream says '$h' for $n"; return 1; }
	if [ -n "$q" ]; then
		grep -qix 'transfer-encoding: chunked' <<<"$chdrs" || { why="$last: the answer is not chunked"; return 1; }
	fi
}
body_download()         { download $((16 * 1024 * 1024)); }
body_download_chunked() { download $((5 * 1024 * 1024 + 3)) chunked; }

check body_chunked_upload body_chunked_upload
# the upstream reads nothing for 1.5 s: sluice stops reading the sandbox
# while its buffer is full, and resumes once the upstream reads
body_backpressure() {
	snap
	HC_MAX=12 hc -H 'Expect:' --data-binary @"$WORK/up8.bin" 'https://allowed.test/upload?wait_ms=1500'
	cwant 200 ".sha256 == \"$UP8_SHA\"" '.bytes == 8388608' || return 1
	upwant allowed-tls 'length == 1' ".[0].body_sha256 == \"$UP8_SHA\""
}

check body_cl_upload body_cl_upload
check body_backpressure body_backpressure
check body_expect_continue body_expect_continue
check body_download body_download
check body_download_chunked body_download_chunked

# ================================================================ ws
# WebSocket: an upgrade is judged as a request; after the upstream's 101
# the bytes are tunnelled both ways.

ws_frames() { jq .ws_frames "$STATE/allowed-tls.json"; }
# ws PATH ARGS...: upstream.py ws from sb (box's CA)
ws() {
	local p=$1
	shift
	last="ws $p $*"
	out=$(timeout 30 ip netns exec "$NS_SB" "$PY" "$UPSTREAM_PY" ws 198.18.1.10:443 \
	    --tls-name allowed.test --ca "$BOX_CA" --path "$p" "$@" 2>&1)
}
ws_echo() {
	local f0 want
	f0=$(ws_frames)
	snap
	ws /ws --msg hello --msg 'a second message' --big 70000 --timeout 3
	want=$'status=101\naccept=ok\n1: echo len=5\n2: echo len=16\n3: echo len=70000\nclose op=8'
	[ "$out" = "$want" ] || { why="$last: $(short "$out")"; return 1; }
	[ "$(ws_frames)" = $((f0 + 3)) ] || { why="upstream echoed $(( $(ws_frames) - f0 )) frames, want 3"; return 1; }
	upwant allowed-tls 'length == 1' '.[0].path == "/ws"' \
	    '.[0].headers | map(select(.[0] | ascii_downcase == "upgrade")) == [["Upgrade", "websocket"]]' \
	    '.[0].headers | map(select(.[0] | ascii_downcase == "connection") | .[1] | ascii_downcase) == ["upgrade"]' \
	    '.[0].headers | map(.[0] | ascii_downcase) | index("sec-websocket-key") != null'
}
ws_denied() {
	snap
	ws /ws-admin --msg hello --timeout 1
	grep -qx 'status=403' <<<"$out" && grep -q '"reason":"deny-rule"' <<<"$out" ||
	    { why="$last: want status=403 (deny-rule): $(short "$out")"; return 1; }
	upx "$NOTHING_UP"
}
# bytes behind a refused upgrade are never sent on as a tunnel: the
# connection ends, or they are judged as requests
ws_denied_pipelined() {
	snap
	traw allowed.test 'GET /ws-admin HTTP/1.1\r\nHost: allowed.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\nGET /pub/behind HTTP/1.1\r\nHost: allowed.test\r\n\r\n' \
	    --responses 2 --linger 0.5 --timeout 3
	if jq -s -e "$JQ_ST == [403, 200]" >/dev/null 2>&1 <<<"$rout"; then
		upx 'allowed-tls.requests=1 allowed-tls.paths=/pub/behind'
		return
	fi
	rwant "$JQ_ST == [403]" "$JQ_CLOSED" ||
	    { why="behind a refused upgrade, want the end or an answer, got: $(short "$rout")"; return 1; }
	upx "$NOTHING_UP"
}
# an upgrade the upstream declines (200, no 101): the connection is HTTP
# again, so the request behind it is answered (or the connection ends) -
# it must not hang
ws_not_upgraded() {
	snap
	traw allowed.test 'GET /pub/noup HTTP/1.1\r\nHost: allowed.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\nGET /pub/after HTTP/1.1\r\nHost: allowed.test\r\n\r\n' \
	    --responses 2 --linger 0.5 --timeout 4
	if jq -s -e "$JQ_ST == [200, 200]" >/dev/null 2>&1 <<<"$rout"; then
		upx 'allowed-tls.requests=2 allowed-tls.paths=/pub/noup,/pub/after'
		return
	fi
	rwant "$JQ_ST == [200]" "$JQ_CLOSED" ||
	    { why="after a declined upgrade, want the next answer or the end, got: $(short "$rout")"; return 1; }
	upx 'allowed-tls.requests=1 allowed-tls.paths=/pub/noup'
}

check ws_echo ws_echo
check ws_denied ws_denied
check ws_denied_pipelined ws_denied_pipelined
check ws_not_upgraded ws_not_upgraded

# ================================================================ audit
# One request record per request (intercepted, rule, action, method, host,
# normalised path, status, bytes, duration, policy and revision); the conn
# record says intercept.

AUDIT_OFF=0
audit_traffic() {
	AUDIT_OFF=$(audit_lines)
	hc --path-as-is 'https://allowed.test/pub/./a/../audit-a?x=1'
	hello_ok allowed-tls || return 1
	hc -X POST --data-binary 'x=1' https://allowed.test/pub/audit-b
	cwant 403 || return 1
	hc https://denied.test/audit-c
	cwant 403 || return 1
	hc -H 'Host: other.test' https://allowed.test/pub/audit-d
	cwant 421 || return 1
	hc --path-as-is 'https://allowed.test/pub/%2e%2e/%2e%2e/audit-e'
	cwant 400
}
audit_allowed() {
	audit_has "$AUDIT_OFF" "#1 type=request intercepted=true sandbox=box policy=icpt revision=$ICPT_REV rule=intercept:pub-read action=pass method=GET host=allowed.test path=/pub/audit-a status=200 bytes_up=$NUM bytes_down=~^[1-9][0-9]*$ duration_ms=$NUM"
}
audit_denied() {
	audit_has "$AUDIT_OFF" \
	    "#1 type=request intercepted=true sandbox=box policy=icpt revision=$ICPT_REV rule=intercept:allowed-default action=deny reason=deny-rule method=POST host=allowed.test path=/pub/audit-b status=403 duration_ms=$NUM" \
	    "#1 type=request intercepted=true sandbox=box policy=icpt rule=null action=deny reason=no-matching-rule method=GET host=denied.test path=/audit-c status=403"
}
audit_refused() {
	audit_has "$AUDIT_OFF" \
	    "#1 type=request intercepted=true sandbox=box host=allowed.test path=/pub/audit-d status=421 reason=host-mismatch action=deny" \
	    "#1 type=request intercepted=true sandbox=box host=allowed.test status=400 reason=bad-target action=deny"
}
audit_conn() {
	audit_has "$AUDIT_OFF" \
	    "#4 type=conn action=intercept sandbox=box policy=icpt revision=$ICPT_REV sni=allowed.test dst=198.18.1.10 dst_port=443" \
	    "#1 type=conn action=intercept sandbox=box sni=denied.test dst=198.18.1.12"
}
# bytes of the big bodies above are counted in their records
audit_bytes() {
	audit_has 0 "type=request rule=intercept:upload status=200 bytes_up=~^([6-9][0-9]{6}|[1-9][0-9]{7,})$" \
	    "type=request rule=intercept:rand status=200 bytes_down=~^1677[0-9]{4}$"
}

check audit_traffic audit_traffic
check audit_allowed audit_allowed
check audit_denied audit_denied
check audit_refused audit_refused
check audit_conn audit_conn
check audit_bytes audit_bytes

# ================================================================ live
# PUT /v1/sandboxes/box/policy with a connection open: each request takes
# the policy in force; a policy that no longer intercepts the host closes
# the connection.

# watch_start ID: an intercepted connection held open (upstream.py watch)
watch_start() {
	rm -f "$WORK/watch.$1".*
	ip netns exec "$NS_SB" "$PY" "$UPSTREAM_PY" watch 198.18.1.10:443 --tls-name allowed.test \
	    --ca "$BOX_CA" --path /hold --ready "$WORK/watch.$1.ready" --go "$WORK/watch.$1.go" \
	    >"$WORK/watch.$1.out" 2>&1 &
	BG_PIDS+=($!)
	world_wait_file "$WORK/watch.$1.ready" 50 && grep -qx 'first 200' "$WORK/watch.$1.out" ||
	    { why="held connection $1: $(short "$(cat "$WORK/watch.$1.out")")"; return 1; }
}
# watch_again ID STATUS: one more request on it answers STATUS
watch_again() {
	local f=$WORK/watch.$1 n
	n=$(grep -c '^again' "$f.out")
	touch "$f.go"
	world_wait_file "$f.go.done" 50 && rm -f "$f.go.done"
	[ "$(grep '^again' "$f.out" | sed -n "$((n + 1))p")" = "again $2" ] ||
	    { why="held connection $1: want 'again $2': $(short "$(cat "$f.out")")"; return 1; }
}
put_policy() {
	api PUT /v1/sandboxes/box/policy "{\"policy\":\"$1\"}"
	[ "$st" = 200 ] && [ "$(jq -r .policy <<<"$out")" = "$1" ] ||
	    { why="PUT policy $1: $st $(short "$out")"; return 1; }
}

live_hold() { watch_start a; }
live_deny_next() {
	local off
	off=$(audit_lines)
	snap
	put_policy icpt-deny || return 1
	watch_again a 403 || return 1
	upx "$NOTHING_UP" || return 1
	audit_has "$off" "#1 type=request sandbox=box policy=icpt-deny path=/hold/again status=403 rule=intercept:hold-again action=deny"
}
live_back() {
	snap
	put_policy icpt || return 1
	watch_again a 200 || return 1
	upx 'allowed-tls.requests=1 allowed-tls.paths=/hold/again allowed-tls.accepted=0'
}
live_unintercept() {
	local off t0 t1 how at
	off=$(audit_lines)
	t0=$(now)
	put_policy icpt-none || return 1
	t1=$(now)
	for _ in $(seq 30); do
		grep -q '^closed' "$WORK/watch.a.out" && break
		sleep 0.1
	done
	read -r _ how at < <(grep '^closed' "$WORK/watch.a.out")
	case "${how:-}" in
	eof|reset|tls-error) ;;
	*) why="the intercepted connection was not closed within 3 s: $(short "$(cat "$WORK/watch.a.out")")"; return 1 ;;
	esac
	awk -v a="$at" -v t0="$t0" -v t1="$t1" 'BEGIN { exit !(a >= t0 && a <= t1 + 1.0) }' ||
	    { why="closed ($how) at $at, the answer came at $t1: not within 1 s"; return 1; }
	audit_has "$off" "#1 type=conn sandbox=box reason=policy-changed sni=allowed.test"
}
# a new connection now passes through: the upstream's own certificate
live_passthrough() {
	hc https://allowed.test/pub/after
	[ "$cexit" = 60 ] || { why="trusting box's CA: want curl exit 60 (not intercepted), got $cexit: $(short "$cerr")"; return 1; }
	last="curl https://allowed.test/pub/after (test root CA)"
	out=$(in_sb curl -sS --max-time 10 --cacert "$CA" "${RESOLVE[@]}" https://allowed.test/pub/after 2>&1)
	[ "$out" = "hello from allowed-tls" ] || { why="$last: $(short "$out")"; return 1; }
	put_policy icpt
}

check live_hold live_hold
check live_deny_next live_deny_next
check live_back live_back
check live_unintercept live_unintercept
check live_passthrough live_passthrough

# ================================================================ hostile handshakes
# ClientHellos sluice must refuse: only h2 offered where the policy says
# http/1.1 alone, only TLS 1.1, no SNI.
# The handshake fails, sluice lives on and serves the next client.  (Last
# but for daemon_*, so a crash here costs no other check.)

# hostile NAME S_CLIENT-ARGS...: the handshake must not succeed as asked
# for, and sluiced must still serve a request afterwards
hostile() {
	local name=$1
	shift
	last="openssl s_client $*"
	out=$(timeout 15 ip netns exec "$NS_SB" openssl s_client -connect 198.18.1.10:443 \
	    -CAfile "$BOX_CA" "$@" </dev/null 2>&1)
	grep -q '^CONNECTED' <<<"$out" || { why="s_client $*: cannot connect: $(short "$out")"; return 1; }
	case "$name" in
	h2) grep -q 'ALPN protocol: h2' <<<"$out" && { why="sluice selected h2 for an h2-only client"; return 1; } ;;
	tls11) grep -q '^New, (NONE), Cipher is (NONE)' <<<"$out" || { why="sluice accepted TLS 1.1: $(short "$(grep -E '^New,|Protocol' <<<"$out")")"; return 1; } ;;
	esac
	sleep 0.3
	hc https://allowed.test/pub/after-hostile
	hello_ok allowed-tls || { why="after s_client $*: $why"; return 1; }
}
tls_h2_only() { hostile h2 -servername allowed.test -alpn h2; }
tls_11_only() { hostile tls11 -servername allowed.test -tls1_1 -cipher 'DEFAULT:@SECLEVEL=0'; }

check tls_h2_only tls_h2_only
check tls_11_only tls_11_only

# ================================================================ daemon
# Everything above ran against one sluiced: it still runs, and it ends
# well (SIGTERM: exit 0, no sanitizer report).

check daemon_same daemon_same
check daemon_ends daemon_ends

# ================================================================ state
# Registrations through the API outlive the process (issue 16): after a
# restart, with no registration again, box has the same CA (the sandbox
# trusts it still), the same policy, the same requests pass, are injected
# and are refused; box2's inline policy is back.  A state file that does
# not parse leaves its sandbox out (under default) and the others
# restored; a deleted sandbox stays deleted, its file gone.

BOX2='{"id":"box2","sources":["198.18.20.7"],"policy":{"egress":{"default":"deny","allow":[{"domain":"other.test"}]}}}'
# restart: SIGTERM, then the same configuration again
restart() {
	world_stop "$SL_PID" TERM 80
	[ "$WORLD_STOP_STATUS" = 0 ] || { why="exit status $WORLD_STOP_STATUS after SIGTERM"; return 1; }
	daemon_start
}
state_restored() {
	local fp
	world_spawn "$NS_GW" "$WORK/sluiced.log" "$SLUICED" -c "$WORK/sluiced.yaml"
	SL_PID=$SPAWNED
	world_wait_listen "$NS_GW" 15001 100 && world_wait_file "$SOCK" 50 ||
	    { why="sluiced did not start again"; return 1; }
	api GET /v1/sandboxes/box
	[ "$st" = 200 ] || { why="box before: $st"; return 1; }
	fp=$(jq -r .ca.fingerprint_sha256 <<<"$out")
	api POST /v1/sandboxes "$BOX2"
	[ "$st" = 201 ] || { why="box2: $st $(short "$out")"; return 1; }
	[ -f "$WORK/sbstate/box.json" ] && [ -f "$WORK/sbstate/box2.json" ] ||
	    { why="state_dir: $(ls "$WORK/sbstate" | tr '\n' ' ')"; return 1; }
	! grep -q 'PRIVATE KEY' "$WORK/sbstate/box.json" || { why="a CA key in the clear"; return 1; }
	restart || return 1
	api GET /v1/sandboxes/box
	[ "$st" = 200 ] && [ "$(jq -r .ca.fingerprint_sha256 <<<"$out")" = "$fp" ] &&
	    [ "$(jq -r .policy <<<"$out")" = icpt ] ||
	    { why="box after the restart: $st $(short "$out") (CA was $fp)"; return 1; }
	api GET /v1/sandboxes/box2
	[ "$st" = 200 ] && jq -e '.policy_inline == true and .sources == ["198.18.20.7/32"]' <<<"$out" >/dev/null ||
	    { why="box2 after the restart: $st $(short "$out")"; return 1; }
	snap
	hc https://allowed.test/pub/after-restart
	hello_ok allowed-tls || { why="after the restart: $why"; return 1; }
	hc https://allowed.test/inject
	hello_ok allowed-tls || { why="inject after the restart: $why"; return 1; }
	upwant allowed-tls 'length == 2' \
	    "[.[1].headers[] | select(.[0] | ascii_downcase == \"authorization\") | .[1]] == [\"Bearer $CANARY_TOK\"]" || return 1
	hc https://allowed.test/forward
	denied intercept:forward-broker forwarding-off
}
state_corrupt() {
	world_stop "$SL_PID" TERM 80
	printf '{"version": 1, "id": "box2", "sources": [' >"$WORK/sbstate/box2.json"
	daemon_start || return 1
	api GET /v1/sandboxes/box2
	[ "$st" = 404 ] || { why="box2 from a broken file: $st $(short "$out")"; return 1; }
	api GET /v1/sandboxes/box
	[ "$st" = 200 ] || { why="box beside a broken file: $st"; return 1; }
	grep -q 'box2.json: not a registration of sandbox box2' "$WORK/sluiced.log" ||
	    { why="the broken file is not reported: $(grep state "$WORK/sluiced.log" | tail -2)"; return 1; }
	hc https://allowed.test/pub/beside-broken
	hello_ok allowed-tls
}
state_deleted() {
	rm -f "$WORK/sbstate/box2.json"
	api DELETE /v1/sandboxes/box
	[ "$st" = 200 ] || { why="delete: $st"; return 1; }
	[ ! -e "$WORK/sbstate/box.json" ] || { why="box.json is still there"; return 1; }
	restart || return 1
	api GET /v1/sandboxes/box
	[ "$st" = 404 ] || { why="box after delete and restart: $st $(short "$out")"; return 1; }
	world_stop "$SL_PID" TERM 80
	[ "$WORLD_STOP_STATUS" = 0 ] || { why="exit status $WORLD_STOP_STATUS"; return 1; }
	[ -z "$(sanitizer)" ] || { why="sanitizer: $(sanitizer)"; return 1; }
}

check state_restored state_restored
check state_corrupt state_corrupt
check state_deleted state_deleted

check_done
