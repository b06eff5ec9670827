#!/bin/bash
# tokens.sh: integration tests of minted tokens (issue 19; sluice-policy(5)
# "tokens", {{token:NAME}}), against one real sluiced in the namespace
# world of tests/integ/lib.sh, with keys and sealed files made by the real
# sluicectl and a token endpoint of our own (tests/integ/tokenep.py).
#
# usage: tests/integ/tokens.sh [-k] [-v]
#   -k  keep the work directory (always kept when something fails)
#   -v  print the last client output and the logs' tails on each failure
# Environment: top_srcdir, top_builddir (set by make check), SLUICED,
# SLUICECTL (default $top_builddir/sluiced, sluicectl), PYTHON.
# Exit: 0 all passed, 1 something failed, 77 skipped (not root, no ip netns
# or nft, a tool missing, no python3-cryptography).  Needs root: it
# creates namespaces.
#
# The token endpoint listens in the upstream namespace: auth.test
# (198.18.1.17, fd00:5c::2:17; OAuth at /oauth/token, certificate from the
# test CA) and gh.test (198.18.1.18, fd00:5c::2:18; a GitHub App's
# /app/installations/42/access_tokens, certificate from a second CA that
# only the gh source's own upstream_ca names).  It checks each client's
# credential (client secret in Basic, refresh token, an ES256 assertion,
# an RS256 app JWT), issues random tokens (with "-._~+/="), counts
# attempts and mints (GET /count, asked from the upstream namespace) and
# writes every token it issued to $WORK/ep/issued.jsonl.
#
# The sandbox "box" (sb) has the policy "tok": on allowed.test, /reflect
# with ?src=NAME gets "Authorization: Bearer {{token:NAME}}" (src=svc
# also X-Tok-B64: {{token:svc | base64}}); on other.test, ?src=gh gets
# "token {{token:gh}}".  The upstream (tests/integ/upstream.py) records
# what it receives and /reflect sends the credential back, as is and
# encoded: every check looks at what the upstream got (the minted token),
# what the endpoint counted and what the sandbox got (never the token).
#
#   tok_cc            client credentials: the token upstream, redacted
#                     from the answer; what the endpoint was asked
#   tok_cached        10 more requests: no new mint
#   tok_fail          401 invalid_client: 502 token-unavailable naming
#                     it, nothing upstream, the failure held 5 s
#   tok_unbound       a secret not bound to the request's host, or not
#                     to the endpoint's: 403 secret-host-binding, no mint
#   tok_refresh       refresh-token grant
#   tok_jwt_bearer    an ES256 assertion the endpoint verifies
#   tok_github_app    an RS256 app JWT, 201 token/expires_at, "token X"
#   tok_upstream_ca   the same endpoint without the source's upstream_ca:
#                     its certificate is refused, 502, nothing minted
#   tok_single_flight 100 concurrent first requests: one mint, 100 x 200
#   tok_early_start   a 40 s token: used again at once, no mint yet
#   tok_per_sandbox   a second sandbox gets its own token
#   tok_expiry        a 12 s token: after it expires, a new one
#   tok_fail_retry    5 s after a failure the endpoint is asked again
#   tok_early         the 40 s token 16 s on: the old one serves while a
#                     new one is minted in the background
#   tok_wait_reset    30 sandboxes reset while their token is minted; a
#                     mint past its 10 s deadline gets 502
#   tok_policy_refused  token_url host or port not allowed, an undeclared
#                     {{token:x}}: refused by --check, PUT and reload;
#                     the policy in force stays
#   tok_audit         request records (tokens, secrets), token_mint
#                     records; audit verify
#   tok_metrics       sluice_token_mints_total
#   tok_api           GET /v1/tokens, sluicectl token ls [SANDBOX]
#   tok_reload        a reload that leaves a source as it was keeps its
#                     token; one that changes it mints anew
#   tok_delete        a deleted sandbox's tokens go with it; its id
#                     registered again gets a token of its own
#   daemon_*, leak_none  the same sluiced throughout, a clean end, a
#                     verified trail; no secret value or minted token in
#                     anything sluiced wrote or the sandbox received
# Output: "ok NAME" or "FAIL NAME: why" per check, then "N passed, N failed".

# shellcheck source=tests/integ/check.sh
. "$(dirname "$0")/check.sh"

check_needs curl openssl dnsmasq dig timeout jq base64
TOKENEP=$top_srcdir/tests/integ/tokenep.py
"$PY" "$TOKENEP" deps 2>/dev/null || skip "python3-cryptography not found (for tests/integ/tokenep.py)"
check_work tokens
[ -x "$SLUICECTL" ] || setup_fail "$SLUICECTL not built"
PKI=$WORK/pki CA=$WORK/pki/ca.pem PKI2=$WORK/pki2 STATE=$WORK/state KEYS=$WORK/keys
SOCK=$WORK/control.sock POLDIR=$WORK/policy.d AUDIT=$WORK/audit.jsonl
SECDIR=$WORK/secrets BOX_CA=$WORK/box.pem BOX2_CA=$WORK/box2.pem
EP=$WORK/ep ISSUED=$WORK/ep/issued.jsonl
TOKEN_URL=https://auth.test/oauth/token

last="" out=""
check_verbose() {
	echo "    last: $last"
	printf '%s\n' "$out" | head -20 | sed 's/^/    out: /'
	tail -5 "$WORK/sluiced.log" | sed 's/^/    log: /'
	tail -3 "$WORK/tokenep.log" 2>/dev/null | sed 's/^/    tokenep: /'
}
short() { printf '%s' "$1" | tr '\n' ' ' | head -c 600; }

# Secret values: random for each run, with bytes that form-encoding,
# percent-encoding and base64 treat differently.
rnd() { head -c 12 /dev/urandom | base64 | tr -d '\n=' | tr '+/' 'xy'; }
SVC_SECRET="cs-$(rnd)/+=&?%$(rnd)" BAD_SECRET="bs-$(rnd):$(rnd)"
RT_SECRET="rt-$(rnd)~+/$(rnd)" UB1_SECRET="u1-$(rnd)" UB2_SECRET="u2-$(rnd)"
ALL_VALUES=("$SVC_SECRET" "$BAD_SECRET" "$RT_SECRET" "$UB1_SECRET" "$UB2_SECRET")
printf '%s\n' "${ALL_VALUES[@]}" >"$WORK/canary-values"

# the tokens the endpoint issued go to the canaries too (for leaks.sh)
cleanup_more() {
	[ -s "$ISSUED" ] && jq -r .token "$ISSUED" >>"$WORK/canary-values" 2>/dev/null
	return 0
}

# ---------------------------------------------------------------- sealing

# seal NAME VALUE HOST...: header secret NAME, version 1, into the folder
seal() {
	local name=$1 val=$2 h
	local -a hosts=()
	shift 2
	for h in "$@"; do hosts+=(--host "$h"); done
	printf '%s' "$val" | "$SLUICECTL" seal --pub "$KEYS/gateway.pub" --name "$name" \
	    --secret-version 1 "${hosts[@]}" >"$SECDIR/$name.sealed" 2>>"$WORK/seal.log"
}
# seal_pem NAME FILE HOST...: pem secret NAME (the private key in FILE)
seal_pem() {
	local name=$1 file=$2 h
	local -a hosts=()
	shift 2
	for h in "$@"; do hosts+=(--host "$h"); done
	"$SLUICECTL" seal --pub "$KEYS/gateway.pub" --name "$name" --kind pem \
	    --secret-version 1 "${hosts[@]}" <"$file" >"$SECDIR/$name.sealed" 2>>"$WORK/seal.log"
}

# ---------------------------------------------------------------- the endpoint's view

EPC=""
# ep_get: the endpoint's counts (GET /count, from the upstream namespace) in EPC
ep_get() {
	EPC=$(timeout 10 ip netns exec "$NS_UP" curl -sS --max-time 5 --cacert "$CA" \
	    --resolve auth.test:443:198.18.1.17 https://auth.test/count 2>&1)
	jq -e .attempts >/dev/null 2>&1 <<<"$EPC" || { why="GET /count: $(short "$EPC")"; return 1; }
}
# ep_n attempts|issued CLIENT: that count, from the last ep_get
ep_n() { jq -r --arg c "$2" ".$1[\$c] // 0" <<<"$EPC"; }
# ep_want CLIENT ATTEMPTS ISSUED: the endpoint was asked that often for
# CLIENT and issued that many
ep_want() {
	local a i
	ep_get || return 1
	a=$(ep_n attempts "$1") i=$(ep_n issued "$1")
	[ "$a" = "$2" ] && [ "$i" = "$3" ] ||
	    { why="${last:+$last: }the endpoint: $1 asked $a times, issued $i, want $2 and $3; rejected: $(jq -c --arg c "$1" '.rejected[$c]' <<<"$EPC")"; return 1; }
}
# ep_last CLIENT JQ...: each test holds over what the endpoint noted of
# CLIENT's last successful request (alg, aud, scope, host, ctype, ...)
ep_last() {
	local c=$1 t
	shift
	ep_get || return 1
	for t in "$@"; do
		jq -e --arg c "$c" ".last[\$c] | $t" >/dev/null 2>&1 <<<"$EPC" ||
		    { why="the endpoint's request of $c: not ($t): $(jq -c --arg c "$c" '.last[$c]' <<<"$EPC")"; return 1; }
	done
}
# tok_of CLIENT [N]: the Nth token (from 1; default the last) issued to CLIENT
tok_of() {
	local all
	all=$(jq -r --arg c "$1" 'select(.client == $c) | .token' "$ISSUED" 2>/dev/null)
	if [ -n "${2:-}" ]; then sed -n "${2}p" <<<"$all"; else tail -1 <<<"$all"; fi
}
# tok_at TOKEN: when the endpoint issued TOKEN (now's format), or nothing
tok_at() { jq -r --arg t "$1" 'select(.token == $t) | .at' "$ISSUED" 2>/dev/null | head -1; }
# up_vals NAME HEADER: the values of HEADER in each request upstream NAME
# got since snap, one line a request (several joined by ",")
up_vals() {
	upreqs "$1" | jq -r --arg h "$2" '.[] | [.headers[] | select(.[0] | ascii_downcase == $h) | .[1]] | join(",")'
}
# up_got NAME HEADER VALUE...: since snap, upstream NAME got exactly these
# requests, with these values of HEADER, in this order
up_got() {
	local n=$1 h=$2 got want
	shift 2
	got=$(up_vals "$n" "$h")
	want=$(printf '%s\n' "$@")
	[ "$got" = "$want" ] ||
	    { why="${last:+$last: }upstream $n got $h: [$(toks_named <<<"$got" | paste -sd '|')], want [$(toks_named <<<"$want" | paste -sd '|')]"; return 1; }
}
# toks_named: each line of stdin with the tokens the endpoint issued (as
# they are or in base64) named CLIENT#N instead, and anything else past
# its first 10 bytes cut: a test's output never shows a token or a value
toks_named() {
	"$PY" -c '
import base64, json, sys
names = []
for l in open(sys.argv[1]):
    r = json.loads(l)
    names.append((r["token"], "<%s#%d>" % (r["client"], r["n"])))
    names.append((base64.b64encode(r["token"].encode()).decode(), "<%s#%d b64>" % (r["client"], r["n"])))
for line in sys.stdin.read().splitlines():
    for t, name in names:
        line = line.replace(t, name)
    parts = line.split("<")
    print("<".join([parts[0][:10] + ("..." if len(parts[0]) > 10 else "")] + parts[1:]))
' "$ISSUED"
}
# wait_since T S: sleep until S seconds after time T (now's format)
wait_since() {
	local d
	d=$(awk -v t="$1" -v s="$2" -v n="$(now)" 'BEGIN { d = t + s - n; printf "%.2f\n", (d > 0 ? d : 0) }')
	sleep "$d"
}

# ---------------------------------------------------------------- what the sandbox may see

RESOLVE=(--resolve allowed.test:443:198.18.1.10 --resolve other.test:443:198.18.1.11)

# forms VALUE: the value as is and in the forms the tests look for
forms() {
	"$PY" - "$@" <<-'EOF'
	import base64, html, json, sys, urllib.parse
	keep = lambda c: c.isalnum() or c in "-._~"
	for s in sys.argv[1:]:
	    v = s.encode()
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
	local f=$1 x
	shift
	[ $# -gt 0 ] || return 0
	forms "$@" | grep -v '^$' >"$WORK/forms.txt"
	x=$(grep -aoF -f "$WORK/forms.txt" "$f" | head -1)
	[ -z "$x" ] || { why="$f holds a secret or token (in the form ${x:0:6}...)"; return 1; }
}
# red_ok TOKEN [SCHEME]: the last /reflect answer carried "SCHEME TOKEN"
# (default Bearer) only as [REDACTED], in its headers and in every line
# of its body
red_ok() {
	local tok=$1 sch=${2:-Bearer} l
	cwant 200 || return 1
	[ -n "$tok" ] || { why="no token to look for"; return 1; }
	grep -qi "^x-echo: $sch \[REDACTED\]$" <<<"$chdrs" || { why="X-Echo not redacted: $(grep -i '^x-echo:' <<<"$chdrs" | cut -c9- | toks_named)"; return 1; }
	grep -qi '^x-echo-b64: .*\[REDACTED\]' <<<"$chdrs" || { why="X-Echo-B64 not redacted"; return 1; }
	for l in raw b64 b64url tok64 wrapped pct form hex upper jslash juni html htmlnum; do
		grep -q "^$l=.*\[REDACTED\]" "$WORK/c.b" || { why="line $l not redacted: $(grep "^$l=" "$WORK/c.b" | cut -d= -f2- | toks_named)"; return 1; }
	done
	grep -qx end "$WORK/c.b" || { why="the body is cut: $(tail -c 100 "$WORK/c.b" | toks_named | tr '\n' ' ')"; return 1; }
	no_value "$WORK/c.h" "$tok" && no_value "$WORK/c.b" "$tok"
}

# ---------------------------------------------------------------- the world, the endpoint and sluiced

world_init
# shellcheck disable=SC2086  # the names are words
"$top_srcdir/certs/mkpki.sh" "$PKI" $WORLD_CERT_NAMES auth.test >"$WORK/mkpki.log" 2>&1 &&
"$top_srcdir/certs/mkpki.sh" "$PKI2" gh.test >>"$WORK/mkpki.log" 2>&1 ||
    setup_fail "certs/mkpki.sh failed (see $WORK/mkpki.log)"
world_up >"$WORK/world.log" 2>&1 || setup_fail "world_up: $(tail -1 "$WORK/world.log")"
world_start_dns "$WORK" 2>>"$WORK/world.log" || setup_fail "dnsmasq did not start"
world_start_upstreams "$PKI" "$STATE" "$WORK" 2>>"$WORK/world.log" ||
    setup_fail "upstreams did not start (see $WORK/upstream.log)"
world_load_nft >>"$WORK/world.log" 2>&1 || setup_fail "cannot load contrib/sluice.nft"
world_dns_host auth.test 198.18.1.17 fd00:5c::2:17 2>>"$WORK/world.log" &&
world_dns_host gh.test 198.18.1.18 fd00:5c::2:18 2>>"$WORK/world.log" ||
    setup_fail "dnsmasq does not answer auth.test or gh.test"

"$SLUICECTL" keygen --out "$KEYS" >"$WORK/keygen.log" 2>&1 ||
    setup_fail "sluicectl keygen: $(tail -1 "$WORK/keygen.log")"
mkdir -p "$SECDIR" "$POLDIR" "$EP"
# the jwt_bearer client's P-256 key and the GitHub App's RSA 2048 key,
# their public halves for the endpoint
{ openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$EP/jb.key" &&
  openssl pkey -in "$EP/jb.key" -pubout -out "$EP/jb.pub" &&
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$EP/gh.key" &&
  openssl pkey -in "$EP/gh.key" -pubout -out "$EP/gh.pub"; } >"$WORK/keys.log" 2>&1 ||
    setup_fail "the signing keys: $(tail -1 "$WORK/keys.log")"
# lines of the keys' private parts (the EC key's scalar starts on its
# second line; the RSA key's second line is its modulus, public: its tenth
# is inside the private exponent), for the leak scan
for k in jb:2 gh:10; do
	v=$(sed -n "${k#*:}p" "$EP/${k%:*}.key")
	ALL_VALUES+=("$v")
	printf '%s\n' "$v" >>"$WORK/canary-values"
done

seal svc-secret "$SVC_SECRET" auth.test allowed.test &&
seal bad-secret "$BAD_SECRET" auth.test allowed.test &&
seal rt-secret "$RT_SECRET" auth.test allowed.test &&
seal ub1-secret "$UB1_SECRET" auth.test &&
seal ub2-secret "$UB2_SECRET" allowed.test &&
seal_pem jb-key "$EP/jb.key" auth.test allowed.test &&
seal_pem gh-key "$EP/gh.key" gh.test other.test ||
    setup_fail "sealing: $(tail -1 "$WORK/seal.log")"

# The endpoint's clients.  bad-client's secret is not the one sealed: it
# answers 401 invalid_client.  sf-client's answers wait 1 s, so that the
# 100 concurrent requests all arrive while the one mint is under way.
jq -n --arg s "$SVC_SECRET" --arg rt "$RT_SECRET" --arg u1 "$UB1_SECRET" \
    --arg u2 "$UB2_SECRET" --arg bad "not-$(rnd)" --arg aud "$TOKEN_URL" \
    --arg jb "$EP/jb.pub" --arg gh "$EP/gh.pub" '{clients: {
	"svc-client": {grant: "client_credentials", secret: $s, scope: "read write", expires_in: 3600},
	"sf-client": {grant: "client_credentials", secret: $s, expires_in: 3600, delay_ms: 1000},
	"rs-client": {grant: "client_credentials", secret: $s, expires_in: 3600, delay_ms: 1500},
	"slow-client": {grant: "client_credentials", secret: $s, expires_in: 3600, delay_ms: 12000},
	"short-client": {grant: "client_credentials", secret: $s, expires_in: 12},
	"early-client": {grant: "client_credentials", secret: $s, expires_in: 40},
	"bad-client": {grant: "client_credentials", secret: $bad},
	"ub1-client": {grant: "client_credentials", secret: $u1},
	"ub2-client": {grant: "client_credentials", secret: $u2},
	"rt-client": {grant: "refresh_token", refresh_token: $rt, expires_in: 3600},
	"jb-client": {grant: "jwt_bearer", pub: $jb, alg: "ES256", aud: $aud, scope: "api"},
	"12345": {grant: "github_app", pub: $gh, installation: 42, expires_in: 3600}}}' \
    >"$EP/config.json" || setup_fail "the endpoint's configuration"
world_spawn "$NS_UP" "$WORK/tokenep.log" "$PY" "$TOKENEP" serve --config "$EP/config.json" \
    --issued "$ISSUED" --ready "$EP/ready" \
    "198.18.1.17:443;$PKI/auth.test.pem;$PKI/auth.test.key" \
    "[fd00:5c::2:17]:443;$PKI/auth.test.pem;$PKI/auth.test.key" \
    "198.18.1.18:443;$PKI2/gh.test.pem;$PKI2/gh.test.key" \
    "[fd00:5c::2:18]:443;$PKI2/gh.test.pem;$PKI2/gh.test.key"
world_wait_file "$EP/ready" 100 && ep_get ||
    setup_fail "the token endpoint did not start: $(tail -3 "$WORK/tokenep.log" | tr '\n' ' ')"

cp "$top_srcdir/policy.d/default.yaml" "$POLDIR/"
# tok_src NAME CLIENT SECRET: an oauth_client_credentials source at auth.test
tok_src() {
	printf '  - {name: %s, kind: oauth_client_credentials, token_url: "%s", client_id: %s, secret: %s}\n' \
	    "$1" "$TOKEN_URL" "$2" "$3"
}
# tok_rule NAME SOURCE: on allowed.test, /reflect?src=SOURCE gets the token
tok_rule() {
	printf '  - name: %s\n    match: {host: allowed.test, path: /reflect, query: {src: "%s"}}\n' "$1" "$2"
	printf '    inject:\n      set: {authorization: "Bearer {{token:%s}}"}\n' "$2"
}
{
	cat <<-EOF
	# tok: box's policy
	name: tok
	egress:
	  default: deny
	  allow:
	    - domain: auth.test       # the token endpoints: a policy must allow them
	      ports: [443]
	    - domain: gh.test
	      ports: [443]
	tokens:
	  - name: svc
	    kind: oauth_client_credentials
	    token_url: $TOKEN_URL
	    client_id: svc-client
	    secret: svc-secret
	    scope: "read write"
	EOF
	tok_src sf sf-client svc-secret
	tok_src short short-client svc-secret
	tok_src early early-client svc-secret
	tok_src rs rs-client svc-secret
	tok_src slow slow-client svc-secret
	tok_src slow2 slow-client svc-secret
	tok_src bad bad-client bad-secret
	tok_src ub1 ub1-client ub1-secret
	tok_src ub2 ub2-client ub2-secret
	cat <<-EOF
	  - name: rt
	    kind: oauth_refresh_token
	    token_url: $TOKEN_URL
	    client_id: rt-client
	    secret: rt-secret
	  - name: jb
	    kind: jwt_bearer
	    token_url: $TOKEN_URL
	    client_id: jb-client
	    secret: jb-key
	    scope: api
	  - name: gh
	    kind: github_app
	    token_url: https://gh.test/app/installations/42/access_tokens
	    app_id: "12345"
	    secret: gh-key
	    upstream_ca: $PKI2/ca.pem
	  - name: ghbad               # gh.test's certificate is not from upstream_ca
	    kind: github_app
	    token_url: https://gh.test/app/installations/42/access_tokens
	    app_id: "12345"
	    secret: gh-key
	intercept:
	  - name: cc
	    match: {host: allowed.test, path: /reflect, query: {src: svc}}
	    inject:
	      set: {authorization: "Bearer {{token:svc}}", x-tok-b64: "{{token:svc | base64}}"}
	EOF
	for s in sf short early bad ub1 ub2 rt jb rs slow slow2; do tok_rule "$s" "$s"; done
	cat <<-EOF
	  - name: gh
	    match: {host: other.test, path: /reflect, query: {src: gh}}
	    inject:
	      set: {authorization: "token {{token:gh}}"}
	  - name: ghbad
	    match: {host: other.test, path: /reflect, query: {src: ghbad}}
	    inject:
	      set: {authorization: "token {{token:ghbad}}"}
	EOF
} >"$POLDIR/tok.yaml"
cat >"$WORK/sluiced.yaml" <<EOF
# generated by tests/integ/tokens.sh
listen:
  transparent: ["0.0.0.0:15001", "[::]:15001"]
  dns: ["0.0.0.0:15053", "[::]:15053"]
  control: $SOCK
  metrics: "127.0.0.1:19464"
resolvers: ["198.18.1.2:53"]
policy_dir: $POLDIR
state_dir: $WORK/sbstate
secret_dir: $SECDIR
gateway_key: $KEYS/gateway.key
signing_key: $KEYS/signing.key
upstream_ca: $CA
audit: {path: $AUDIT, fsync: always}
workers: 2
timeouts: {handshake: 5s, idle: 30s, connect: 3s, drain: 2s}
EOF
: >"$AUDIT"
"$SLUICED" -c "$WORK/sluiced.yaml" --check >"$WORK/check.log" 2>&1 ||
    setup_fail "sluiced --check: $(grep -v '^warning' "$WORK/check.log" | tail -2)"
daemon_start
register_box tok

# ================================================================ oauth_client_credentials

SVC_T="" TOKCC_OFF=0
# the token goes upstream in place of the sandbox's own Authorization, and
# in base64 where the template says so; the echo comes back redacted; the
# endpoint was asked once, as RFC 6749 4.4 says
tok_cc() {
	TOKCC_OFF=$(audit_lines)
	snap
	hc -H 'Authorization: Bearer from-the-sandbox' 'https://allowed.test/reflect?src=svc'
	cwant 200 || return 1
	SVC_T=$(tok_of svc-client)
	[ -n "$SVC_T" ] || { ep_get; why="the endpoint issued svc-client nothing; rejected: $(jq -c '.rejected' <<<"$EPC")"; return 1; }
	up_got allowed-tls authorization "Bearer $SVC_T" || return 1
	up_got allowed-tls x-tok-b64 "$(printf '%s' "$SVC_T" | base64 -w0)" || return 1
	red_ok "$SVC_T" || return 1
	ep_want svc-client 1 1 || return 1
	ep_last svc-client '.host == "auth.test"' '.path == "/oauth/token"' '.scope == "read write"' \
	    '.ctype == "application/x-www-form-urlencoded"' '(.connection | ascii_downcase) == "close"'
}
# ten more, on one connection and on another: the same token, no mint
tok_cached() {
	local -a args=() want=()
	local i
	snap
	for i in $(seq 10); do args+=("https://allowed.test/reflect?src=svc&i=$i"); done
	for i in $(seq 2 10); do args+=(-o "$WORK/cached-$i.b"); done
	hc "${args[@]}"
	cat "$WORK"/cached-*.b >>"$SEEN" 2>/dev/null
	[ "$cst" = "$(printf '200%.0s' $(seq 10))" ] || { why="10 requests: $cst"; return 1; }
	hc 'https://allowed.test/reflect?src=svc&i=11'
	red_ok "$SVC_T" || return 1
	for i in $(seq 2 10); do no_value "$WORK/cached-$i.b" "$SVC_T" || return 1; done
	for i in $(seq 11); do want+=("Bearer $SVC_T"); done
	up_got allowed-tls authorization "${want[@]}" || return 1
	ep_want svc-client 1 1
}
check tok_cc tok_cc
check tok_cached tok_cached

# A token of 40 s: used until 10 s before it expires, minted again early
# (from 25 s before: never in the first half of what it may be used for),
# in the background: used again at once, no new mint;
# tok_early, later, comes back 16 s on.
EARLY_T0="" EARLY_A=""
tok_early_start() {
	snap
	hc 'https://allowed.test/reflect?src=early'
	EARLY_T0=$(now)
	red_ok "$(tok_of early-client)" || return 1
	EARLY_A=$(tok_of early-client)
	hc 'https://allowed.test/reflect?src=early'
	red_ok "$EARLY_A" || return 1
	up_got allowed-tls authorization "Bearer $EARLY_A" "Bearer $EARLY_A" || return 1
	ep_want early-client 1 1
}

# ================================================================ failures

# the endpoint refuses the client: 502 token-unavailable naming its status
# and error, the request never goes up without its credential, and the
# failure is remembered for 5 s (tok_fail_retry comes back after)
FAIL_T0=""
tok_fail() {
	local off el
	off=$(audit_lines)
	snap
	hc 'https://allowed.test/reflect?src=bad'
	FAIL_T0=$(now)
	cwant 502 '.reason == "token-unavailable"' '.message | test("401")' \
	    '.message | test("invalid_client")' || return 1
	ep_want bad-client 1 0 || return 1
	hc 'https://allowed.test/reflect?src=bad' -o /dev/null 'https://allowed.test/reflect?src=bad'
	el=$(awk -v t="$FAIL_T0" -v n="$(now)" 'BEGIN { print ((n - t < 4) ? "held" : "late") }')
	[ "$cst" = 502502 ] || { why="within 5 s: $cst, want 502 502"; return 1; }
	if [ "$el" = held ]; then
		ep_want bad-client 1 0 || { why="within 5 s of a failure: $why"; return 1; }
	fi
	upx 'allowed-tls.requests=0' || return 1
	audit_has "$off" 'type=token_mint sandbox=box policy=tok source=bad result=failed'
}
check tok_fail tok_fail

# the source's secret must be bound to the request's host (ub1-secret is
# bound to auth.test only) and to the endpoint's (ub2-secret to
# allowed.test only): 403 secret-host-binding, nothing minted, nothing up
tok_unbound() {
	local s
	snap
	for s in ub1 ub2; do
		hc "https://allowed.test/reflect?src=$s"
		cwant 403 '.reason == "secret-host-binding"' ".message | test(\"$s\")" || return 1
	done
	ep_want ub1-client 0 0 && ep_want ub2-client 0 0 || return 1
	upx 'allowed-tls.requests=0'
}
check tok_unbound tok_unbound

# ================================================================ the other kinds

tok_refresh() {
	local t
	snap
	hc 'https://allowed.test/reflect?src=rt'
	cwant 200 || return 1
	t=$(tok_of rt-client)
	red_ok "$t" || return 1
	up_got allowed-tls authorization "Bearer $t" || return 1
	ep_want rt-client 1 1 && ep_last rt-client '.scope == null' '.host == "auth.test"'
}
# the assertion: ES256 with the sealed P-256 key, iss = sub = client_id,
# aud = token_url (no audience given), verified by the endpoint
tok_jwt_bearer() {
	local t
	snap
	hc 'https://allowed.test/reflect?src=jb'
	cwant 200 || return 1
	t=$(tok_of jb-client)
	red_ok "$t" || return 1
	up_got allowed-tls authorization "Bearer $t" || return 1
	ep_want jb-client 1 1 &&
	    ep_last jb-client '.alg == "ES256"' ".aud == \"$TOKEN_URL\"" '.scope == "api"' '.life <= 300'
}
# an RS256 app JWT as Bearer to the installation's access_tokens; the
# answer is 201 {token, expires_at}; the endpoint's certificate verifies
# with the source's upstream_ca only
tok_github_app() {
	local t
	snap
	hc 'https://other.test/reflect?src=gh'
	cwant 200 || return 1
	t=$(tok_of 12345)
	red_ok "$t" token || return 1
	up_got other-tls authorization "token $t" || return 1
	ep_want 12345 1 1 &&
	    ep_last 12345 '.alg == "RS256"' '.host == "gh.test"' '.api_version == "2022-11-28"' \
	    '.path == "/app/installations/42/access_tokens"'
}
# the same endpoint through a source without that upstream_ca: sluiced
# refuses its certificate (the endpoint sees the handshake fail)
tok_upstream_ca() {
	local tls
	ep_get || return 1
	tls=$(jq .tls_errors <<<"$EPC")
	snap
	hc 'https://other.test/reflect?src=ghbad'
	cwant 502 '.reason == "token-unavailable"' || return 1
	ep_want 12345 1 1 || return 1
	[ "$(jq .tls_errors <<<"$EPC")" -gt "$tls" ] ||
	    { why="no handshake with gh.test failed: was the endpoint reached at all?"; return 1; }
	upx 'other-tls.requests=0'
}
check tok_refresh tok_refresh
check tok_jwt_bearer tok_jwt_bearer
check tok_github_app tok_github_app
check tok_upstream_ca tok_upstream_ca

# ================================================================ concurrency, sandboxes, expiry

# 100 concurrent first requests (connected first, then sent at once, while
# the one mint waits 1 s at the endpoint): one mint, 100 answers 200, the
# token upstream on each, redacted from each
tok_single_flight() {
	local off t n
	off=$(audit_lines)
	snap
	last="100 concurrent GET /reflect?src=sf"
	out=$(SBCA=$BOX_CA in_sb "$PY" - "$WORK/sf-bodies" <<-'EOF' 2>&1
	import http.client, os, socket, ssl, sys, threading
	ctx = ssl.create_default_context(cafile=os.environ["SBCA"])
	N = 100
	go = threading.Barrier(N)
	st, bodies = [None] * N, [b""] * N
	class C(http.client.HTTPSConnection):
	    def connect(self):
	        http.client.HTTPConnection.connect(self)
	        self.sock = ctx.wrap_socket(self.sock, server_hostname="allowed.test")
	def one(i):
	    try:
	        c = C("198.18.1.10", 443, timeout=25)
	        c.connect()
	    except Exception as e:
	        st[i] = "connect: %r" % e
	        go.abort()
	        return
	    try:
	        go.wait(20)
	        c.request("GET", "/reflect?src=sf&i=%d" % i, headers={"Host": "allowed.test"})
	        r = c.getresponse()
	        bodies[i] = bytes(str(r.headers), "latin-1") + r.read()
	        st[i] = r.status
	    except Exception as e:
	        st[i] = st[i] or "%r" % e
	ts = [threading.Thread(target=one, args=(i,)) for i in range(N)]
	for t in ts: t.start()
	for t in ts: t.join()
	open(sys.argv[1], "wb").write(b"\n".join(bodies))
	bad = [s for s in st if s != 200]
	print("200=%d" % (N - len(bad)), *sorted(set(map(str, bad)))[:5])
	EOF
	)
	cat "$WORK/sf-bodies" >>"$SEEN" 2>/dev/null
	[ "$out" = "200=100" ] || { why="$last: $(short "$out")"; return 1; }
	ep_want sf-client 1 1 || return 1
	t=$(tok_of sf-client)
	n=$(up_vals allowed-tls authorization | grep -cxF "Bearer $t")
	[ "$n" = 100 ] && [ "$(up_vals allowed-tls authorization | wc -l)" = 100 ] ||
	    { why="the upstream got $(up_vals allowed-tls authorization | wc -l) requests, $n with the token"; return 1; }
	[ "$(grep -c '^raw=Bearer \[REDACTED\]$' "$WORK/sf-bodies")" = 100 ] ||
	    { why="not every answer redacted: $(grep -c '^raw=Bearer \[REDACTED\]$' "$WORK/sf-bodies")"; return 1; }
	no_value "$WORK/sf-bodies" "$t" || return 1
	audit_has "$off" '#1 type=token_mint source=sf' '#100 type=request sandbox=box rule=intercept:sf'
}
check tok_single_flight tok_single_flight
check tok_early_start tok_early_start

# Sandboxes that give up while their token is minted: 30 connections send
# their request and reset during the 1.5 s mint.  The daemon goes on, the
# mint ends once, and the next request gets that token.  An endpoint that
# answers in 12 s: the mint ends at its 10 s deadline with 502.
tok_wait_reset() {
	local t
	last="30 requests for src=rs, reset while the mint is under way"
	out=$(SBCA=$BOX_CA in_sb "$PY" - <<-'EOF' 2>&1
	import os, socket, ssl, struct, threading, time
	ctx = ssl.create_default_context(cafile=os.environ["SBCA"])
	socks = []
	for i in range(30):
	    s = ctx.wrap_socket(socket.create_connection(("198.18.1.10", 443), timeout=10),
	                        server_hostname="allowed.test")
	    s.sendall(b"GET /reflect?src=rs&i=%d HTTP/1.1\r\nHost: allowed.test\r\n\r\n" % i)
	    socks.append(s)
	time.sleep(0.3)
	for s in socks:
	    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
	    s.close()
	print("reset=%d" % len(socks))
	EOF
	)
	[ "$out" = "reset=30" ] || { why="$last: $(short "$out")"; return 1; }
	sleep 2
	[ -z "$(sanitizer)" ] || { why="sluiced: $(sanitizer)"; return 1; }
	snap
	hc 'https://allowed.test/reflect?src=rs'
	t=$(tok_of rs-client)
	[ -n "$t" ] || { why="no rs token issued"; return 1; }
	red_ok "$t" || return 1
	ep_want rs-client 1 1 || return 1
	HC_MAX=15 hc 'https://allowed.test/reflect?src=slow'
	cwant 502 '.reason == "token-unavailable"' '.message | test("within 10 s")'
}

# each sandbox gets its own token of a source; box keeps its own
tok_per_sandbox() {
	local t2
	api POST /v1/sandboxes '{"id":"box2","sources":["198.18.0.3","fd00:5c::1:3"],"policy":"tok"}'
	[ "$st" = 201 ] || { why="registering box2: $st $(short "$out")"; return 1; }
	jq -j .ca_pem <<<"$out" >"$BOX2_CA"
	snap
	NS_SB=$NS_SB2 BOX_CA=$BOX2_CA hc 'https://allowed.test/reflect?src=svc'
	cwant 200 || return 1
	t2=$(tok_of svc-client 2)
	[ -n "$t2" ] && [ "$t2" != "$SVC_T" ] || { why="box2 got no token of its own"; return 1; }
	red_ok "$t2" || return 1
	hc 'https://allowed.test/reflect?src=svc'
	red_ok "$SVC_T" || return 1
	up_got allowed-tls authorization "Bearer $t2" "Bearer $SVC_T" || return 1
	ep_want svc-client 2 2
}
check tok_per_sandbox tok_per_sandbox

# A token of 12 s is used until 10 s before it expires: 3 s on, the next
# request waits for a token minted after that, not one minted with the
# first.  (A token that lives 40 s or less is due to be minted again early
# from the start, so the first request may leave a second mint behind: at
# most two more mints are allowed.)
tok_expiry() {
	local a b t0 n
	snap
	hc 'https://allowed.test/reflect?src=short'
	t0=$(now)
	a=$(up_vals allowed-tls authorization)
	a=${a#Bearer }
	[ -n "$(tok_at "$a")" ] || { why="the upstream did not get a token the endpoint issued"; return 1; }
	red_ok "$a" || return 1
	wait_since "$t0" 3
	snap
	hc 'https://allowed.test/reflect?src=short'
	b=$(up_vals allowed-tls authorization)
	b=${b#Bearer }
	[ -n "$b" ] && [ "$b" != "$a" ] || { why="after 3 s the upstream got the first token again, or none"; return 1; }
	[ -n "$(tok_at "$b")" ] || { why="the upstream got a token the endpoint never issued"; return 1; }
	awk -v a="$(tok_at "$b")" -v t="$t0" 'BEGIN { exit !(a >= t + 2) }' ||
	    { why="after 3 s the request carried a token minted $(awk -v a="$(tok_at "$b")" -v t="$t0" 'BEGIN { printf "%.2f", t - a }') s before the first answer: expired"; return 1; }
	red_ok "$b" || return 1
	ep_get || return 1
	n=$(ep_n issued short-client)
	[ "$n" = 2 ] || { why="the endpoint issued short-client $n tokens, want 2 (a waiter must not mint again)"; return 1; }
}
check tok_expiry tok_expiry

# past the 5 s a failure is held, the endpoint is asked again
tok_fail_retry() {
	[ -n "$FAIL_T0" ] || { why="tok_fail did not run"; return 1; }
	wait_since "$FAIL_T0" 6
	snap
	hc 'https://allowed.test/reflect?src=bad'
	cwant 502 '.reason == "token-unavailable"' || return 1
	ep_want bad-client 2 0 || return 1
	upx 'allowed-tls.requests=0'
}
check tok_fail_retry tok_fail_retry

# 11 s into the 40 s token: it still serves, and a new one is minted in
# the background; the request after gets the new one
tok_early() {
	local b i
	[ -n "$EARLY_A" ] || { why="tok_early_start did not run"; return 1; }
	wait_since "$EARLY_T0" 16
	snap
	hc 'https://allowed.test/reflect?src=early'
	red_ok "$EARLY_A" || return 1
	for i in $(seq 50); do
		ep_get && [ "$(ep_n issued early-client)" = 2 ] && break
		sleep 0.1
	done
	b=$(tok_of early-client 2)
	[ -n "$b" ] || { why="no mint in the background: the endpoint issued $(ep_n issued early-client)"; return 1; }
	hc 'https://allowed.test/reflect?src=early'
	red_ok "$b" || return 1
	up_got allowed-tls authorization "Bearer $EARLY_A" "Bearer $b" || return 1
	ep_want early-client 2 2
}
check tok_early tok_early
check tok_wait_reset tok_wait_reset

# ================================================================ refused policies

# bad_policy host|port|undeclared: a policy "tok" that must be refused
bad_policy() {
	local url=$TOKEN_URL ref=svc
	case "$1" in
	host) url=https://far.test/oauth/token ;;
	port) url=https://auth.test:8443/oauth/token ;;
	undeclared) ref=nope ;;
	esac
	cat <<-EOF
	name: tok
	egress:
	  default: deny
	  allow:
	    - domain: auth.test
	      ports: [443]
	tokens:
	  - name: svc
	    kind: oauth_client_credentials
	    token_url: $url
	    client_id: svc-client
	    secret: svc-secret
	intercept:
	  - name: cc
	    match: {host: allowed.test, path: /reflect}
	    inject:
	      set: {authorization: "Bearer {{token:$ref}}"}
	EOF
}
# what the refusal must name: the file's line and the problem
declare -A BAD_WHAT=([host]="far.test" [port]="8443" [undeclared]="nope")
# the token_url's host or port not allowed by the policy, and a template
# naming no source: sluiced --check fails naming file:line, a PUT through
# the API is refused (400) and so is a reload; the policy in force and
# its cached token stay
tok_policy_refused() {
	local k d rev o
	api GET /v1/policies/tok
	rev=$(jq .revision <<<"$out")
	cp "$POLDIR/tok.yaml" "$WORK/tok.before"
	for k in host port undeclared; do
		d=$WORK/bad-$k
		mkdir -p "$d/policy.d" && cp "$top_srcdir/policy.d/default.yaml" "$d/policy.d/" &&
		bad_policy "$k" >"$d/policy.d/tok.yaml" || return 1
		sed "s|^policy_dir: .*|policy_dir: $d/policy.d|" "$WORK/sluiced.yaml" >"$d/sluiced.yaml"
		last="sluiced --check ($k)"
		o=$("$SLUICED" -c "$d/sluiced.yaml" --check 2>&1) && { why="$last passed"; return 1; }
		printf '%s\n' "$o" >>"$WORK/check.log"
		grep -v '^warning' <<<"$o" | grep -E "tok\.yaml:[0-9]+:" | grep -qF "${BAD_WHAT[$k]}" ||
		    { why="$last: no file:line naming ${BAD_WHAT[$k]}: $(short "$o")"; return 1; }
		api PUT /v1/policies/tok "$(cat "$d/policy.d/tok.yaml")"
		[ "$st" = 400 ] && jq -e "[.error?, .errors[]?] | map(strings) | join(\" \") | test(\"${BAD_WHAT[$k]}\")" >/dev/null 2>&1 <<<"$out" ||
		    { why="PUT ($k): $st $(short "$out")"; return 1; }
	done
	# a reload with the bad file in the folder
	bad_policy undeclared | sed 's/^name: tok/name: tokbad/' >"$POLDIR/tokbad.yaml"
	last="sluicectl reload"
	o=$("$SLUICECTL" --socket "$SOCK" reload 2>&1) && { rm -f "$POLDIR/tokbad.yaml"; why="the reload was taken"; return 1; }
	rm -f "$POLDIR/tokbad.yaml"
	printf '%s\n' "$o" >>"$API_SEEN"
	grep -Eq 'tokbad\.yaml:[0-9]+:.*nope' <<<"$o" || { why="reload: $(short "$o")"; return 1; }
	cmp -s "$POLDIR/tok.yaml" "$WORK/tok.before" || { why="the policy's file changed"; return 1; }
	api GET /v1/policies/tok
	[ "$st" = 200 ] && [ "$(jq .revision <<<"$out")" = "$rev" ] || { why="the policy in force changed: $st $(short "$out")"; return 1; }
	api GET /v1/policies/tokbad
	[ "$st" = 404 ] || { why="the refused tokbad is in force: $st"; return 1; }
	snap
	hc 'https://allowed.test/reflect?src=svc'
	red_ok "$SVC_T" || return 1
	up_got allowed-tls authorization "Bearer $SVC_T"
}
check tok_policy_refused tok_policy_refused

# A reload that leaves a source as it was keeps its token (a new revision
# of the policy, a comment more); one that changes the source mints anew.
tok_reload() {
	local rev n
	api GET /v1/policies/tok
	rev=$(jq .revision <<<"$out")
	ep_get || return 1
	n=$(ep_n issued svc-client)
	printf '# reloaded by tok_reload\n' >>"$POLDIR/tok.yaml"
	o=$("$SLUICECTL" --socket "$SOCK" reload 2>&1) || { why="reload: $(short "$o")"; return 1; }
	api GET /v1/policies/tok
	[ "$(jq .revision <<<"$out")" != "$rev" ] || { why="the reload did not make a new revision"; return 1; }
	snap
	hc 'https://allowed.test/reflect?src=svc'
	red_ok "$SVC_T" || return 1
	up_got allowed-tls authorization "Bearer $SVC_T" || return 1
	ep_get || return 1
	[ "$(ep_n issued svc-client)" = "$n" ] || { why="a reload that left the source as it was minted again"; return 1; }
	# the same request, but the source now names its CA itself
	sed -i "s|^    scope: \"read write\"\$|&\\n    upstream_ca: $CA|" "$POLDIR/tok.yaml"
	grep -q "^    upstream_ca: $CA\$" "$POLDIR/tok.yaml" || { why="cannot change the source in the test's policy"; return 1; }
	o=$("$SLUICECTL" --socket "$SOCK" reload 2>&1) || { why="reload: $(short "$o")"; return 1; }
	snap
	hc 'https://allowed.test/reflect?src=svc'
	ep_get || return 1
	[ "$(ep_n issued svc-client)" = $((n + 1)) ] || { why="a changed source did not mint anew: $(ep_n issued svc-client) issued, want $((n + 1))"; return 1; }
	SVC_T=$(tok_of svc-client $((n + 1)))
	red_ok "$SVC_T" || return 1
	up_got allowed-tls authorization "Bearer $SVC_T"
}

# ================================================================ audit and metrics

# the request record names the source and the token's fingerprint (and the
# source's secret); one token_mint record a mint, ok with the same
# fingerprint, or failed; a second sandbox's token has another
tok_audit() {
	last="the audit trail"
	out=$("$PY" - "$AUDIT" "$TOKCC_OFF" <<-'EOF' 2>&1
	import json, re, sys
	recs = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
	def fail(m):
	    print(m)
	    sys.exit(1)
	reqs = [r for r in recs[int(sys.argv[2]):] if r.get("type") == "request" and
	        r.get("rule") == "intercept:cc" and r.get("sandbox") == "box"]
	if not reqs:
	    fail("no request record of intercept:cc")
	t = reqs[0].get("tokens")
	if not (isinstance(t, list) and len(t) == 1 and t[0].get("source") == "svc" and
	        re.fullmatch("[0-9a-f]{16}", str(t[0].get("fingerprint")))):
	    fail("the request record's tokens: %r" % (t,))
	fp = t[0]["fingerprint"]
	if not any(s.get("name") == "svc-secret" for s in reqs[0].get("secrets") or []):
	    fail("the request record's secrets do not name svc-secret: %r" % (reqs[0].get("secrets"),))
	if any(r.get("tokens") != t for r in reqs):
	    fail("box's requests of intercept:cc carry other tokens: %r" %
	         sorted(set(json.dumps(r.get("tokens")) for r in reqs)))
	mints = [r for r in recs if r.get("type") == "token_mint"]
	for r in mints:
	    if not all(isinstance(r.get(k), str) for k in ("sandbox", "policy", "source", "result")):
	        fail("a token_mint record without sandbox, policy, source or result: %r" % r)
	    if r["result"] == "ok" and not re.fullmatch("[0-9a-f]{16}", str(r.get("fingerprint"))):
	        fail("an ok token_mint record without a fingerprint: %r" % r)
	    if r["result"] not in ("ok", "failed"):
	        fail("a token_mint record's result: %r" % r)
	m = [r for r in mints if r["source"] == "svc" and r["sandbox"] == "box"]
	if len(m) != 1 or m[0]["result"] != "ok" or m[0]["policy"] != "tok" or m[0].get("fingerprint") != fp:
	    fail("box's svc token_mint records: %r (want one, ok, fingerprint %s)" % (m, fp))
	m2 = [r for r in mints if r["source"] == "svc" and r["sandbox"] == "box2"]
	if len(m2) != 1 or m2[0].get("fingerprint") in (None, fp):
	    fail("box2's svc token_mint records: %r" % m2)
	for src, n in (("sf", 1), ("short", 2), ("early", 2), ("rt", 1), ("jb", 1), ("gh", 1)):
	    got = [r["result"] for r in mints if r["source"] == src]
	    if set(got) != {"ok"} or len(got) != n:
	        fail("token_mint records of %s: %r, want %d ok" % (src, got, n))
	for src in ("bad", "ghbad"):
	    got = [r for r in mints if r["source"] == src]
	    if not got or any(r["result"] != "failed" or r.get("fingerprint") for r in got):
	        fail("token_mint records of %s: %r" % (src, got))
	if any(r["source"] in ("ub1", "ub2") for r in mints):
	    fail("a token_mint record of an unbound source")
	print("ok")
	EOF
	) || { why="$(short "$out")"; return 1; }
	out=$("$SLUICECTL" audit verify --open --pub "$KEYS/signing.pub" "$AUDIT" 2>&1) ||
	    { why="audit verify --open: $(short "$out")"; return 1; }
}
# metric NAME LABEL...: the value of NAME's series with every LABEL (k="v")
metric() {
	local n=$1 l lines
	shift
	lines=$(grep -E "^$n\{" <<<"$out")
	for l in "$@"; do lines=$(grep -F "$l" <<<"$lines"); done
	awk 'NR == 1 { print $NF }' <<<"$lines"
}
tok_metrics() {
	local ok failed want
	ep_get || return 1
	want=$(ep_n issued svc-client)
	out=$(ip netns exec "$NS_GW" curl -sS --max-time 5 http://127.0.0.1:19464/metrics)
	printf '%s\n' "$out" >>"$API_SEEN"
	ok=$(metric sluice_token_mints_total 'source="svc"' 'result="ok"')
	failed=$(metric sluice_token_mints_total 'source="bad"' 'result="failed"')
	awk -v a="$ok" -v b="$want" -v f="$failed" 'BEGIN { exit !(a != "" && a + 0 == b + 0 && f + 0 >= 1) }' ||
	    { why="sluice_token_mints_total: svc ok ${ok:-none} (the endpoint issued $want), bad failed ${failed:-none}: $(grep token_mint <<<"$out" | tr '\n' ' ' | head -c 400)"; return 1; }
}
# GET /v1/tokens and sluicectl token ls: what the gateway holds, by
# fingerprint, never a token; a sandbox's alone; a failure with its reason
tok_api() {
	out=$("$SLUICECTL" --socket "$SOCK" --json token ls 2>&1) ||
	    { why="token ls: $(short "$out")"; return 1; }
	printf '%s\n' "$out" >>"$API_SEEN"
	"$PY" - "$out" <<-'EOF' || { why="token ls --json: $(short "$out")"; return 1; }
	import json, re, sys
	t = json.loads(sys.argv[1])["tokens"]
	box = [e for e in t if e.get("sandbox") == "box" and e["source"] == "svc"]
	assert len(box) == 1 and box[0]["state"] == "ok", box
	assert re.fullmatch("[0-9a-f]{16}", box[0]["fingerprint"]), box
	assert box[0]["policy"] == "tok" and box[0]["secret"] == "svc-secret", box
	assert box[0]["expires_at"].endswith("Z") and box[0]["waiting"] == 0, box
	assert any(e.get("sandbox") == "box2" for e in t), t
	EOF
	out=$("$SLUICECTL" --socket "$SOCK" --json token ls box2 2>&1) ||
	    { why="token ls box2: $(short "$out")"; return 1; }
	printf '%s\n' "$out" >>"$API_SEEN"
	"$PY" -c 'import json, sys; t = json.loads(sys.argv[1])["tokens"]; assert t and all(e["sandbox"] == "box2" for e in t), t' "$out" ||
	    { why="token ls box2 lists others: $(short "$out")"; return 1; }
	out=$("$SLUICECTL" --socket "$SOCK" token ls 2>&1) ||
	    { why="token ls: $(short "$out")"; return 1; }
	printf '%s\n' "$out" >>"$API_SEEN"
	grep -q '^SANDBOX' <<<"$out" && grep -q 'box  *tok  *svc  *ok' <<<"$out" ||
	    { why="token ls table: $(short "$out")"; return 1; }
}
check tok_audit tok_audit
check tok_metrics tok_metrics
check tok_api tok_api
check tok_reload tok_reload

# A sandbox deleted takes its tokens with it: none listed, and the sandbox
# registered again under its id gets a token of its own, never the old one.
tok_delete() {
	local old n t
	api GET '/v1/tokens?sandbox=box2'
	old=$(jq -r '.tokens[] | select(.source == "svc") | .fingerprint' <<<"$out")
	[ -n "$old" ] || { why="box2 holds no svc token to begin with: $(short "$out")"; return 1; }
	api DELETE /v1/sandboxes/box2
	[ "$st" = 200 ] || { why="deleting box2: $st $(short "$out")"; return 1; }
	api GET '/v1/tokens?sandbox=box2'
	[ "$(jq '.tokens | length' <<<"$out")" = 0 ] || { why="box2's tokens outlived it: $(short "$out")"; return 1; }
	ep_get || return 1
	n=$(ep_n issued svc-client)
	api POST /v1/sandboxes '{"id":"box2","sources":["198.18.0.3","fd00:5c::1:3"],"policy":"tok"}'
	[ "$st" = 201 ] || { why="registering box2 again: $st $(short "$out")"; return 1; }
	jq -j .ca_pem <<<"$out" >"$BOX2_CA"
	snap
	NS_SB=$NS_SB2 BOX_CA=$BOX2_CA hc 'https://allowed.test/reflect?src=svc'
	cwant 200 || return 1
	ep_get || return 1
	[ "$(ep_n issued svc-client)" = $((n + 1)) ] || { why="box2 registered again got no new token: $(ep_n issued svc-client) issued, want $((n + 1))"; return 1; }
	t=$(tok_of svc-client $((n + 1)))
	red_ok "$t" || return 1
	up_got allowed-tls authorization "Bearer $t" || return 1
	api GET '/v1/tokens?sandbox=box2'
	[ "$(jq -r '.tokens[] | select(.source == "svc") | .fingerprint' <<<"$out")" != "$old" ] ||
	    { why="box2 registered again holds the old token"; return 1; }
}
check tok_delete tok_delete

# ================================================================ daemon and leaks

# the trail of the whole run, closed by the clean stop, verifies
audit_closed() {
	out=$("$SLUICECTL" audit verify --pub "$KEYS/signing.pub" "$AUDIT" 2>&1) ||
	    { why="audit verify: $(short "$out")"; return 1; }
}
# no secret value, private key or minted token, in any form, in anything
# sluiced wrote or the sandbox got
leak_none() {
	local f
	local -a toks=()
	mapfile -t toks < <(jq -r .token "$ISSUED" | sort -u)
	[ "${#toks[@]}" -ge 1 ] || { why="no token was issued"; return 1; }
	[ -s "$SEEN" ] && [ -s "$API_SEEN" ] && [ -s "$AUDIT" ] || { why="nothing collected to scan"; return 1; }
	for f in "$WORK/sluiced.log" "$AUDIT" "$SEEN" "$API_SEEN" "$WORK/check.log" "$WORK/seal.log" "$WORK/keygen.log"; do
		no_value "$f" "${ALL_VALUES[@]}" "${toks[@]}" || return 1
	done
	# and the scan finds a token where there is one
	printf 'x%sx' "$(printf '%s' "${toks[0]}" | base64 -w0)" >"$WORK/canary"
	no_value "$WORK/canary" "${toks[0]}" 2>/dev/null && { why="the scan misses a base64'd token"; return 1; }
	return 0
}

check daemon_same daemon_same
# A request still waiting for its token when sluiced stops: it is let go
# before its mint is ended, and nothing wakes it after (daemon_ends looks
# for a sanitizer report).
in_sb curl -sS --max-time 20 --cacert "$BOX_CA" "${RESOLVE[@]}" \
    'https://allowed.test/reflect?src=slow2' >"$WORK/slow2.out" 2>&1 &
SLOW2_PID=$!
sleep 1
check daemon_ends daemon_ends
wait "$SLOW2_PID" 2>/dev/null
cat "$WORK/slow2.out" >>"$SEEN"
check audit_closed audit_closed
check leak_none leak_none

check_done
