#!/bin/bash
# forward.sh: integration tests of forward rules (SPEC "Forwarding with an
# identity token"): requests sent to an operator's policy proxy with a
# signed identity token, against one real sluiced in the namespace world
# of tests/integ/lib.sh.
#
# usage: tests/integ/forward.sh [-k] [-v]
# Environment: top_srcdir, top_builddir (set by make check), SLUICED,
# SLUICECTL.  Exit: 0 all passed, 1 something failed, 77 skipped (not
# root, or no python3 with the jwt module: Debian's python3-jwt).
# Needs root: it creates namespaces.
#
# The policy proxy runs in the test internet (proxy.test:8443): a small
# server that verifies every Sluice-Identity it gets with PyJWT against
# the JWKS it fetches from sluiced's listen.jwks listener (no key is
# handed to it any other way), and answers with what it found: the claims,
# the path it was asked for, the Forwarded header, how many identity
# headers came.  Checked, at both ends:
#   fwd_*   claims (iss, sub, aud, iat/nbf/exp, jti, team, project,
#           sandbox, htm, htu), the path prefix, Forwarded, the sandbox's
#           own Sluice-Identity, Forwarded, X-Forwarded-*, X-Original-URL,
#           X-Real-IP, X-Envoy-*, method overrides, Sluice-* and the like
#           dropped (an ordinary header kept), the token never in
#           what the sandbox gets (a proxy that echoes it: [REDACTED]), a
#           body hash, the default audience, one token per request
#   bad_*   the proxy unreachable (502), silent (504), with a certificate
#           for another name (502): sluice's JSON error and an audit
#           record, nothing sent elsewhere
#   replay  a token replayed after exp, or to a proxy of another
#           audience: the proxy refuses it
#   jwks_*  GET /v1/jwks and /.well-known/*; a key rotation by reload:
#           old tokens verify until the old key leaves the set
#   audit   request records (rule, to, jti) and response records (status)
# Output: "ok NAME" or "FAIL NAME: why" per check, then "N passed, N failed".

# shellcheck source=tests/integ/check.sh
. "$(dirname "$0")/check.sh"

check_needs curl openssl dnsmasq timeout jq
# PyJWT (Debian's python3-jwt) verifies the tokens, as a proxy would.
JPY=""
for p in /usr/bin/python3 "$PY"; do
	if [ -x "$p" ] && "$p" -c 'import jwt, cryptography' 2>/dev/null; then
		JPY=$p
		break
	fi
done
[ -n "$JPY" ] || skip "no python3 with jwt and cryptography (apt-get install python3-jwt python3-cryptography)"

check_work forward
PKI=$WORK/pki CA=$WORK/pki/ca.pem STATE=$WORK/state
SOCK=$WORK/control.sock POLDIR=$WORK/policy.d AUDIT=$WORK/audit.jsonl
K=$WORK/keys BOX_CA=$WORK/box.pem PSTATE=$WORK/proxy.json
[ -x "$SLUICECTL" ] || setup_fail "$SLUICECTL not built"

last="" out=""
check_verbose() {
	echo "    last: $last"
	printf '%s\n' "$out" | head -20 | sed 's/^/    out: /'
	tail -5 "$WORK/sluiced.log" | sed 's/^/    log: /'
}
short() { printf '%s' "$1" | tr '\n' ' ' | head -c 600; }

# ---------------------------------------------------------------- the policy proxy

cat >"$WORK/proxy.py" <<'EOF'
"""The operator's policy proxy, as the tests need it: verifies each
Sluice-Identity with PyJWT against sluiced's JWKS (fetched on every
request, so a rotation shows at once) and answers what it found."""
import base64, hashlib, json, os, socket, ssl, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import jwt

jwks_url, iss, state, cert, key, addr = sys.argv[1:7]
lock = threading.Lock()
seen = []


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def handle_one(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n) if n else b""
        ids = self.headers.get_all("Sluice-Identity") or []
        res = {"path": self.path, "method": self.command,
               "forwarded": self.headers.get_all("Forwarded") or [],
               "host": self.headers.get("Host"), "identities": len(ids),
               "headers": [[k, v] for k, v in self.headers.items()],
               "body_sha256": base64.urlsafe_b64encode(
                   hashlib.sha256(body).digest()).rstrip(b"=").decode(),
               "verified": False}
        # /aud/NAME/... expects another audience
        aud = "broker"
        parts = self.path.split("/")
        if len(parts) > 3 and parts[1] == "aud":
            aud = parts[2]
        if self.path.startswith("/origin/"):
            aud = "https://proxy.test:8443"
        if len(ids) == 1:
            try:
                client = jwt.PyJWKClient(jwks_url, cache_jwk_set=False,
                                         cache_keys=False)
                k = client.get_signing_key_from_jwt(ids[0]).key
                res["claims"] = jwt.decode(
                    ids[0], k, algorithms=["ES256"], audience=aud,
                    issuer=iss, options={"require": [
                        "exp", "iat", "nbf", "iss", "sub", "aud", "jti"]})
                res["kid"] = jwt.get_unverified_header(ids[0]).get("kid")
                res["verified"] = True
            except Exception as e:
                res["error"] = "%s: %s" % (type(e).__name__, e)
        with lock:
            seen.append(dict(res, token=ids[0] if ids else None))
            tmp = state + ".tmp"
            with open(tmp, "w") as f:
                json.dump(seen, f)
            os.replace(tmp, state)
        out = json.dumps(res).encode()
        extra = []
        if "reflect" in self.path and ids:
            # a careless proxy: the token back in a header and the body
            out += b"\ntoken=" + ids[0].encode() + b"\n"
            extra.append(("X-Token", ids[0]))
        self.send_response(200 if res["verified"] else 401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = handle_one


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
host, port = addr.rsplit(":", 1)
srv = ThreadingHTTPServer((host, int(port)), H)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
# a listener that never answers: TLS to it stalls (stall.test)
stall = socket.socket()
stall.bind(("198.18.1.18", 8443))
stall.listen(16)
with open(state + ".ready", "w") as f:
    f.write("ready\n")
srv.serve_forever()
EOF

# ---------------------------------------------------------------- the world and sluiced

world_init
"$top_srcdir/certs/mkpki.sh" "$PKI" $WORLD_CERT_NAMES proxy.test elsewhere.test \
    >"$WORK/mkpki.log" 2>&1 || setup_fail "certs/mkpki.sh failed"
world_up >"$WORK/world.log" 2>&1 || setup_fail "world_up: $(tail -1 "$WORK/world.log")"
world_start_dns "$WORK" 2>>"$WORK/world.log" || setup_fail "dnsmasq did not start"
world_start_upstreams "$PKI" "$STATE" "$WORK" 2>>"$WORK/world.log" ||
    setup_fail "upstreams did not start"
# proxy.test the policy proxy, stall.test silent, wrong.test a certificate
# for elsewhere.test, down.test nothing listening
world_spawn "$NS_UP" "$WORK/proxy.log" "$JPY" "$WORK/proxy.py" \
    "http://198.18.1.1:19480/.well-known/jwks.json" "https://sluice.test" \
    "$PSTATE" "$PKI/proxy.test.pem" "$PKI/proxy.test.key" "198.18.1.17:8443"
world_spawn "$NS_UP" "$WORK/wrong.log" "$PY" "$UPSTREAM_PY" serve --state-dir "$STATE" \
    --ready "$STATE/ready-w" "wrong-tls=tls;198.18.1.19:8443;$PKI/elsewhere.test.pem;$PKI/elsewhere.test.key"
world_wait_file "$PSTATE.ready" 100 && world_wait_file "$STATE/ready-w" 100 ||
    setup_fail "the proxy did not start: $(tail -3 "$WORK/proxy.log" "$WORK/wrong.log")"
for nh in proxy.test:198.18.1.17 stall.test:198.18.1.18 wrong.test:198.18.1.19 \
    down.test:198.18.1.20; do
	world_dns_host "${nh%%:*}" "${nh#*:}" 2>>"$WORK/world.log" || setup_fail "dnsmasq: ${nh%%:*}"
done
world_load_nft >>"$WORK/world.log" 2>&1 || setup_fail "cannot load contrib/sluice.nft"

# two key sets: "current" signs, "previous" is published too
mkdir -p "$K"
for k in a b c; do
	"$SLUICECTL" keygen --out "$K/$k" >>"$WORK/keygen.log" 2>&1 || setup_fail "keygen"
done
cp -p "$K/a/signing.key" "$K/current.key" && cp -p "$K/b/signing.key" "$K/previous.key"
mkdir -p "$POLDIR" && cp "$top_srcdir/policy.d/default.yaml" "$POLDIR/"
cat >"$POLDIR/fwd.yaml" <<EOF
name: fwd
egress:
  default: deny
intercept:
  - name: broker
    match: {host: allowed.test, path: "/fwd/**"}
    forward: {to: "https://proxy.test:8443/broker", audience: broker}
  - name: other-aud
    match: {host: allowed.test, path: "/aud/**"}
    forward: {to: "https://proxy.test:8443", audience: broker}
  - name: hashed
    match: {host: allowed.test, path: "/hash/**"}
    forward: {to: "https://proxy.test:8443", audience: broker, body_hash: true}
  - name: origin
    match: {host: allowed.test, path: "/origin/**"}
    forward: {to: "https://proxy.test:8443"}
  - name: down
    match: {host: allowed.test, path: /down}
    forward: {to: "https://down.test:8443", audience: broker}
  - name: stall
    match: {host: allowed.test, path: /stall}
    forward: {to: "https://stall.test:8443", audience: broker}
  - name: wrong
    match: {host: allowed.test, path: /wrong}
    forward: {to: "https://wrong.test:8443", audience: broker}
  - name: pub
    match: {host: allowed.test, path: "/pub/**"}
    action: pass
EOF
cat >"$WORK/sluiced.yaml" <<EOF
listen:
  transparent: ["0.0.0.0:15001", "[::]:15001"]
  control: $SOCK
  jwks: "198.18.1.1:19480"
resolvers: ["198.18.1.2:53"]
policy_dir: $POLDIR
state_dir: $WORK/sbstate
signing_key: [$K/current.key, $K/previous.key]
issuer: https://sluice.test
token_ttl: 3s
upstream_ca: $CA
audit: {path: $AUDIT, fsync: batch}
workers: 2
timeouts: {handshake: 5s, idle: 30s, connect: 2s}
sandboxes:
  - {id: box, sources: ["198.18.0.2"], policy: fwd, team: ml, project: agents}
EOF
: >"$AUDIT"
daemon_start
curl -s -f --unix-socket "$SOCK" http://s/v1/sandboxes/box/ca.pem >"$BOX_CA" ||
    setup_fail "no CA for box"

RESOLVE=(--resolve allowed.test:443:198.18.1.10)
cst="" chdrs=""
hc() {
	last="curl $*"
	rm -f "$WORK/c.h" "$WORK/c.b"
	cst=$(timeout 30 ip netns exec "$NS_SB" curl -sS --max-time 10 --cacert "$BOX_CA" \
	    "${RESOLVE[@]}" -D "$WORK/c.h" -o "$WORK/c.b" -w '%{http_code}' "$@" 2>"$WORK/c.e")
	chdrs=$(tr -d '\r' <"$WORK/c.h" 2>/dev/null)
	cat "$WORK/c.h" "$WORK/c.b" >>"$SEEN" 2>/dev/null
	out="$cst $(head -c 600 "$WORK/c.b" 2>/dev/null) $(tail -2 "$WORK/c.e")"
}
# bwant JQ...: each test holds over the last body
bwant() {
	local t
	for t in "$@"; do
		jq -e "$t" "$WORK/c.b" >/dev/null 2>&1 ||
		    { why="$last: $cst, not ($t): $(short "$(head -c 600 "$WORK/c.b")")"; return 1; }
	done
}
# ptoken N: the token of the proxy's Nth request from the end (1: last)
ptoken() { jq -r ".[-$1].token" "$PSTATE"; }
pcount() { jq 'length' "$PSTATE" 2>/dev/null || echo 0; }

# ================================================================ fwd

fwd_claims() {
	local now
	now=$(date +%s)
	hc -X POST --data-binary 'amount=42' 'https://allowed.test/fwd/charges?x=1'
	[ "$cst" = 200 ] || { why="status $cst: $(short "$out")"; return 1; }
	bwant '.verified == true' '.path == "/broker/fwd/charges?x=1"' '.method == "POST"' \
	    '.host == "proxy.test:8443"' '.forwarded == ["host=\"allowed.test\";proto=https"]' \
	    '.identities == 1' \
	    '.claims.iss == "https://sluice.test"' '.claims.sub == "sandbox:box"' \
	    '.claims.aud == "broker"' '.claims.sandbox == "box"' '.claims.team == "ml"' \
	    '.claims.project == "agents"' '.claims.htm == "POST"' \
	    '.claims.htu == "https://allowed.test/fwd/charges?x=1"' \
	    '.claims.iat == .claims.nbf' '.claims.exp - .claims.iat == 3' \
	    '(.claims.jti | length) == 22' '.claims.body_sha256 == null' || return 1
	jq -e ".claims.iat >= $now - 2 and .claims.iat <= $now + 2" "$WORK/c.b" >/dev/null ||
	    { why="iat is not now"; return 1; }
	! grep -qi '^sluice-identity' <<<"$chdrs" || { why="the sandbox got Sluice-Identity"; return 1; }
	! grep -qF "$(ptoken 1)" "$WORK/c.h" "$WORK/c.b" || { why="the sandbox got the token"; return 1; }
}
# what the sandbox sends under those names never reaches the proxy
fwd_dropped() {
	hc -H 'Sluice-Identity: forged.by.sandbox' -H 'Forwarded: host=evil.example' \
	    -H 'X-Forwarded-Host: evil.example' https://allowed.test/fwd/x
	[ "$cst" = 200 ] || { why="status $cst: $(short "$out")"; return 1; }
	bwant '.verified == true' '.identities == 1' \
	    '.forwarded == ["host=\"allowed.test\";proto=https"]'
}
# whatever the sandbox claims on behalf of a gateway (where the request
# went, who sent it, which method to act as) never reaches the proxy, in
# any case; an ordinary header does, and sluice's own Forwarded and
# Sluice-Identity come once
CLAIMS=(X-Forwarded-Server X-Forwarded-Prefix X-Forwarded-Uri X-Forwarded-Scheme
    x-forwarded-for X-FORWARDED-HOST X-Original-URL X-Rewrite-URL X-Real-IP
    X-Client-IP True-Client-IP X-Envoy-Original-Path x-envoy-external-address
    X-HTTP-Method-Override X-HTTP-Method X-Method-Override Sluice-Foo
    sluice-identity FORWARDED)
fwd_claims_dropped() {
	local -a hs=() t=()
	local n
	for n in "${CLAIMS[@]}"; do
		hs+=(-H "$n: /admin")
		n=$(tr 'A-Z' 'a-z' <<<"$n")
		# sluice's own two come once: the sorted list below
		[ "$n" = forwarded ] || [ "$n" = sluice-identity ] ||
		    t+=("[.headers[][0] | ascii_downcase] | index(\"$n\") == null")
	done
	hc "${hs[@]}" -H 'X-Ordinary: kept' -H 'X-Forwardedfor: near-miss' \
	    -H 'Sluicex: near-miss' https://allowed.test/fwd/claims
	[ "$cst" = 200 ] || { why="status $cst: $(short "$out")"; return 1; }
	bwant '.verified == true' '.method == "GET"' '.path == "/broker/fwd/claims"' \
	    '.claims.htu == "https://allowed.test/fwd/claims"' "${t[@]}" \
	    '[.headers[] | select(.[0] | ascii_downcase | test("^(x-forwarded-|x-envoy-|sluice-)|^(forwarded|x-original-url|x-rewrite-url|x-real-ip|x-client-ip|true-client-ip|x-http-method-override|x-http-method|x-method-override)$"))] | map(.[0] | ascii_downcase) | sort == ["forwarded", "sluice-identity"]' \
	    '.forwarded == ["host=\"allowed.test\";proto=https"]' '.identities == 1' \
	    '[.headers[] | select(.[0] | ascii_downcase == "x-ordinary")] | map(.[1]) == ["kept"]' \
	    '[.headers[] | select(.[0] | ascii_downcase | . == "x-forwardedfor" or . == "sluicex") | .[1]] == ["near-miss", "near-miss"]'
}
# a proxy that echoes the token: the sandbox gets it redacted
fwd_reflect() {
	hc https://allowed.test/fwd/reflect
	[ "$cst" = 200 ] || { why="status $cst"; return 1; }
	grep -qi '^x-token: \[REDACTED\]$' <<<"$chdrs" || { why="X-Token: $(grep -i '^x-token' <<<"$chdrs")"; return 1; }
	grep -q '^token=\[REDACTED\]$' "$WORK/c.b" || { why="the body: $(tail -c 200 "$WORK/c.b")"; return 1; }
	! grep -qF "$(ptoken 1)" "$WORK/c.h" "$WORK/c.b" || { why="the token reached the sandbox"; return 1; }
}
fwd_body_hash() {
	local want
	want=$(printf 'a body to be hashed' | openssl dgst -sha256 -binary | base64 | tr '+/' '-_' | tr -d '=')
	hc -X PUT --data-binary 'a body to be hashed' https://allowed.test/hash/item
	[ "$cst" = 200 ] || { why="status $cst: $(short "$out")"; return 1; }
	bwant '.verified == true' ".claims.body_sha256 == \"$want\"" ".body_sha256 == \"$want\"" '.path == "/hash/item"'
	hc -H 'Transfer-Encoding: chunked' --data-binary 'x' https://allowed.test/hash/item
	[ "$cst" = 411 ] || { why="a chunked body for a hashed rule: $cst"; return 1; }
	# a client that waits for 100-continue gets it from sluice
	hc -v -H 'Expect: 100-continue' --expect100-timeout 30 -X PUT --data-binary 'a body to be hashed' \
	    https://allowed.test/hash/item
	[ "$cst" = 200 ] || { why="with Expect: status $cst: $(short "$out")"; return 1; }
	grep -qE '^< HTTP/(1.1 100 Continue|2 100)' "$WORK/c.e" || { why="no 100 Continue"; return 1; }
	bwant ".claims.body_sha256 == \"$want\""
}
fwd_default_audience() {
	hc https://allowed.test/origin/x
	[ "$cst" = 200 ] && bwant '.claims.aud == "https://proxy.test:8443"'
}
# one token a request, each its own jti, on one kept-alive connection
fwd_one_per_request() {
	local n0
	n0=$(pcount)
	hc https://allowed.test/fwd/a https://allowed.test/fwd/b https://allowed.test/fwd/c
	[ "$(pcount)" = $((n0 + 3)) ] || { why="the proxy got $(( $(pcount) - n0 )) requests"; return 1; }
	[ "$(jq -r '.[-3:][].claims.jti' "$PSTATE" | sort -u | wc -l)" = 3 ] ||
	    { why="jtis: $(jq -c '[.[-3:][].claims.jti]' "$PSTATE")"; return 1; }
}
check fwd_claims fwd_claims
check fwd_dropped fwd_dropped
check fwd_claims_dropped fwd_claims_dropped
check fwd_reflect fwd_reflect
check fwd_body_hash fwd_body_hash
check fwd_default_audience fwd_default_audience
check fwd_one_per_request fwd_one_per_request

# ================================================================ bad

# bad PATH STATUS REASON: sluice's own JSON error, a record, nothing at
# the proxy
bad() {
	local n0 off
	n0=$(pcount)
	off=$(audit_lines)
	hc "https://allowed.test$1"
	[ "$cst" = "$2" ] || { why="$1: status $cst, want $2: $(short "$out")"; return 1; }
	bwant ".reason == \"$3\"" '.error | type == "string"' || return 1
	[ "$(pcount)" = "$n0" ] || { why="the proxy got a request"; return 1; }
	audit_has "$off" "type=request action=forward rule=intercept:${1#/}" \
	    "type=response status=$2 reason=$3"
}
bad_unreachable() { bad /down 502 upstream-unreachable; }
bad_slow() { bad /stall 504 upstream-timeout; }
bad_cert() { bad /wrong 502 upstream-cert-invalid; }
check bad_unreachable bad_unreachable
check bad_slow bad_slow
check bad_cert bad_cert

# ================================================================ replay

# rsend PATH TOKEN: the token sent to the proxy straight, as a thief would
rsend() {
	out=$(timeout 15 ip netns exec "$NS_GW" curl -sS --max-time 10 --cacert "$CA" \
	    --resolve proxy.test:8443:198.18.1.17 -H "Sluice-Identity: $2" \
	    "https://proxy.test:8443$1" 2>&1)
}
replay() {
	local tok
	hc https://allowed.test/fwd/replay-me
	[ "$cst" = 200 ] || { why="status $cst"; return 1; }
	tok=$(ptoken 1)
	rsend /fwd/again "$tok"
	jq -e '.verified == true' <<<"$out" >/dev/null || { why="fresh token refused: $(short "$out")"; return 1; }
	rsend /aud/other/x "$tok"
	jq -e '.verified == false and (.error | test("Audience"))' <<<"$out" >/dev/null ||
	    { why="another audience: $(short "$out")"; return 1; }
	sleep 4
	rsend /fwd/again "$tok"
	jq -e '.verified == false and (.error | test("Expired"))' <<<"$out" >/dev/null ||
	    { why="after exp: $(short "$out")"; return 1; }
}
check replay replay

# ================================================================ jwks

jwks_endpoints() {
	local a b
	a=$(curl -s -f --unix-socket "$SOCK" http://s/v1/jwks) || { why="GET /v1/jwks failed"; return 1; }
	b=$(ip netns exec "$NS_UP" curl -s -f --max-time 5 http://198.18.1.1:19480/.well-known/jwks.json) ||
	    { why="listen.jwks failed"; return 1; }
	[ "$a" = "$b" ] || { why="the two JWKS differ"; return 1; }
	jq -e '.keys | length == 2' <<<"$a" >/dev/null &&
	jq -e 'all(.keys[]; .kty == "EC" and .crv == "P-256" and .alg == "ES256" and .use == "sig")' <<<"$a" >/dev/null ||
	    { why="JWKS: $(short "$a")"; return 1; }
	b=$(ip netns exec "$NS_UP" curl -s -f --max-time 5 http://198.18.1.1:19480/.well-known/openid-configuration) &&
	jq -e '.issuer == "https://sluice.test" and .jwks_uri == "https://sluice.test/.well-known/jwks.json"' <<<"$b" >/dev/null ||
	    { why="discovery: $(short "$b")"; return 1; }
	ip netns exec "$NS_UP" curl -s --max-time 5 -o /dev/null -w '%{http_code}' \
	    http://198.18.1.1:19480/v1/sandboxes | grep -qx 404 || { why="listen.jwks serves the API"; return 1; }
}
# a rotation by reload: the new key signs at once, tokens of the old one
# verify while it is published, and no longer once it leaves
jwks_rotation() {
	local kid_a kid_c old
	hc https://allowed.test/fwd/before
	kid_a=$(jq -r '.kid' "$WORK/c.b")
	old=$(ptoken 1)
	cp -p "$K/a/signing.key" "$K/previous.key" && cp -p "$K/c/signing.key" "$K/current.key"
	"$SLUICECTL" --socket "$SOCK" reload >/dev/null 2>&1 || { why="reload failed"; return 1; }
	hc https://allowed.test/fwd/after
	kid_c=$(jq -r '.kid' "$WORK/c.b")
	[ "$cst" = 200 ] && [ -n "$kid_c" ] && [ "$kid_c" != "$kid_a" ] ||
	    { why="after the rotation: $cst, kid $kid_c (was $kid_a)"; return 1; }
	rsend /fwd/old "$old"
	jq -e '.verified == true' <<<"$out" >/dev/null || { why="the old key's token: $(short "$out")"; return 1; }
	cp -p "$K/c/signing.key" "$K/previous.key"
	"$SLUICECTL" --socket "$SOCK" reload >/dev/null 2>&1 || { why="second reload failed"; return 1; }
	rsend /fwd/old "$old"
	jq -e '.verified == false' <<<"$out" >/dev/null || { why="a token of a key no longer published verified"; return 1; }
}
check jwks_endpoints jwks_endpoints
check jwks_rotation jwks_rotation

# ================================================================ audit and the end

fwd_audit() {
	local jti
	jti=$(jq -r '[.[] | select(.verified and (.path | startswith("/broker/")))][-1].claims.jti' "$PSTATE")
	audit_has 0 "type=request action=forward rule=intercept:broker to=proxy.test:8443 jti=$jti sandbox=box" \
	    "type=response rule=intercept:broker status=200"
}
fwd_no_token_left() {
	local t
	for t in $(jq -r '.[].token // empty' "$PSTATE"); do
		if grep -qF "$t" "$SEEN" "$AUDIT" "$WORK/sluiced.log" 2>/dev/null; then
			why="a token is in what sluice wrote or the sandbox got"
			return 1
		fi
	done
}
check fwd_audit fwd_audit
check fwd_no_token_left fwd_no_token_left
check daemon_ends daemon_ends

check_done
