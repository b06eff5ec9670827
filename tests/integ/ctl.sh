#!/bin/bash
# ctl.sh: integration tests of sluice's control plane (the control API on
# listen.control, the metrics listener and sluicectl), against one real
# sluiced running in the namespace world of tests/integ/lib.sh.
#
# usage: tests/integ/ctl.sh [-k] [-v]
#   -k  keep the work directory (always kept when something fails)
#   -v  print the last answer of the API on each failure
# Environment: top_srcdir, top_builddir (set by make check), SLUICED
# (default $top_builddir/sluiced), SLUICECTL (default
# $top_builddir/sluicectl), PYTHON.
# Exit: 0 all passed, 1 something failed, 77 skipped (not root, no ip netns
# or nft, a tool missing).  Needs root: it creates namespaces, a temporary
# group (for control_group) and runs clients as user nobody.
#
# One sluiced is started for the whole run and is never restarted: the
# checks build on each other, in this order:
#   api_*       the API contract: every endpoint, every error status, and
#               that refused requests change nothing
#   reload_*    POST /v1/reload, good and broken, proven by traffic of the
#               static sandbox (sb2's addresses)
#   conc_*      concurrent registrations
#   peer_*      the socket's mode and group, peer credentials (SO_PEERCRED)
#   flow_*      the orchestrator's workflow on the sandbox namespace sb:
#               register, live policy swaps that close what they no longer
#               allow, deny-all, delete
#   metrics_*   Prometheus text on the socket and on listen.metrics
#   ctl_*       sluicectl, each subcommand against the same daemon
#   daemon_*    sluiced is the same process throughout, and ends well
# Output: "ok NAME" or "FAIL NAME: why" per check, then "N passed, N failed"
# (the work directory, when kept, is named on stderr).

# shellcheck source=tests/integ/check.sh
. "$(dirname "$0")/check.sh"
SLUICECTL=${SLUICECTL:-$top_builddir/sluicectl}

check_needs curl openssl dnsmasq dig ss timeout jq setpriv groupadd groupdel
getent passwd nobody >/dev/null || skip "no user nobody"
NOGROUP=$(id -gn nobody 2>/dev/null) || skip "user nobody has no group"

group_made=0
check_work ctl
chmod 0755 "$WORK"		# user nobody must reach the socket in it
PKI=$WORK/pki CA=$WORK/pki/ca.pem STATE=$WORK/state
SOCK=$WORK/control.sock POLDIR=$WORK/policy.d AUDIT=$WORK/audit.jsonl
CTL_GROUP=slctl$$		# control_group: created here, deleted on exit

cleanup_more() {
	[ $group_made = 1 ] && groupdel "$CTL_GROUP" 2>/dev/null
}

# ---------------------------------------------------------------- checks

check_verbose() {
	echo "    last: $last -> $st"
	head -c 600 "$WORK/api.b" 2>/dev/null | sed 's/^/    body: /'
	tail -5 "$WORK/sluiced.log" | sed 's/^/    log: /'
}

short() { printf '%s' "$1" | tr '\n' ' ' | head -c 500; }

# ---------------------------------------------------------------- the API

st="" body="" hdrs="" last=""

# api METHOD PATH [BODY]: one request on the control socket; sets st (the
# status), body and hdrs (the response head).  BODY "@FILE" sends a file.
api() {
	local m=$1 p=$2
	local -a d=()
	[ $# -ge 3 ] && d=(--data-binary "$3")
	last="$m $p"
	st=$(curl -sS --max-time 10 --unix-socket "$SOCK" -X "$m" -H 'Expect:' \
	    -D "$WORK/api.h" -o "$WORK/api.b" -w '%{http_code}' "${d[@]}" \
	    "http://sluice$p" 2>"$WORK/api.e") || st="curl-error:$(short "$(cat "$WORK/api.e")")"
	body=$(cat "$WORK/api.b" 2>/dev/null)
	hdrs=$(tr -d '\r' <"$WORK/api.h" 2>/dev/null)
	printf '%s\n' "$body" >>"$API_SEEN"
}

# want CODE [JQ...]: the last answer has status CODE and every jq test holds.
want() {
	local code=$1 t
	shift
	[ "$st" = "$code" ] || { why="$last: status $st, want $code: $(short "$body")"; return 1; }
	for t in "$@"; do
		jq -e "$t" >/dev/null 2>&1 <<<"$body" ||
		    { why="$last: $st, but not ($t): $(short "$body")"; return 1; }
	done
	return 0
}

# want_err CODE [JQ...]: an error answer: {"error": "..."} (and "errors").
want_err() {
	want "$@" '.error | type == "string" and length > 0' \
	    '(keys - ["error", "errors"]) == []'
}

# want_header NAME VALUE: the last answer has that header (exact value).
want_header() {
	grep -qix "$1: $2" <<<"$hdrs" ||
	    { why="$last: no header '$1: $2' in: $(short "$hdrs")"; return 1; }
}

# jget JQ: a value of the last answer (raw).
jget() { jq -r "$1" <<<"$body"; }

# state_now: what a refused request must leave as it was (the sandboxes,
# the policies and the generation); each request on its own connection.
state_now() {
	local s
	api GET /v1/sandboxes; s=$st$body
	api GET /v1/policies; s=$s$st$body
	api GET /v1/status; s=$s$st$(jq -c '.generation, .sandboxes, .policies' <<<"$body")
	printf '%s' "$s"
}

# refused CODE JQ METHOD PATH [BODY]: the request is refused with CODE, an
# error whose body passes JQ, and nothing changes.
refused() {
	local code=$1 t=$2 before after
	shift 2
	before=$(state_now)
	api "$@"
	want_err "$code" "$t" || return 1
	local l=$last
	after=$(state_now)
	[ "$before" = "$after" ] || { why="$l (refused with $code) changed the state"; return 1; }
	last=$l
}

gen_now() { api GET /v1/status; jget .generation; }

# ---------------------------------------------------------------- clients in the sandboxes

# in_sb NS CMD...: run a client in a namespace (sb or sb2) with a timeout.
in_sb() {
	local ns=$NS_SB
	[ "$1" = sb2 ] && ns=$NS_SB2
	shift
	timeout 10 ip netns exec "$ns" "$@"
}

# fetch NS NAME ADDR: an HTTPS GET of https://NAME/ctl (connecting to
# ADDR); sets fexit (curl's status) and fout (status line, errors, body).
fetch() {
	local out
	out=$(in_sb "$1" curl -sS --max-time 5 --cacert "$CA" \
	    --resolve "$2:443:$3" -w 'status=%{http_code}\n' "https://$2/ctl" 2>&1)
	fexit=$?
	fout=$out
}

# fetch_ok NS NAME ADDR UPSTREAM: the GET passes and the upstream answers.
fetch_ok() {
	fetch "$1" "$2" "$3"
	[ "$fexit" = 0 ] && grep -q "hello from $4" <<<"$fout" ||
	    { why="$2 from $1: exit $fexit: $(short "$fout")"; return 1; }
}

# fetch_denied NS NAME ADDR: sluice refuses the TLS connection (alert).
fetch_denied() {
	fetch "$1" "$2" "$3"
	[ "$fexit" = 35 ] && grep -q 'alert access denied' <<<"$fout" ||
	    { why="$2 from $1: want a TLS access_denied alert (exit 35), got exit $fexit: $(short "$fout")"; return 1; }
}

# dig_status NS NAME: the DNS status sluice's filter answers (NOERROR, ...).
dig_status() {
	in_sb "$1" dig +time=2 +tries=1 @198.18.0.1 "$2" A 2>&1 |
	    sed -n 's/.*status: \([A-Z]*\),.*/\1/p'
}

# The watcher: holds one HTTPS connection from a sandbox and reports when
# it ends, to the microsecond (the time the peer closed it), so a check can
# tell how long after an API answer sluice closed it.
cat >"$WORK/watch.py" <<'EOF'
import os, select, socket, ssl, sys, time
addr, name, ca, ready, go = sys.argv[1:6]
host, port = addr.rsplit(":", 1)
def get(s, f, path):
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path, name)).encode())
    line = f.readline()
    if not line:
        return "eof"
    n = 0
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        if h.lower().startswith(b"content-length:"):
            n = int(h.split(b":")[1])
    f.read(n)
    return line.split()[1].decode()
try:
    s = socket.create_connection((host, int(port)), timeout=5)
    s = ssl.create_default_context(cafile=ca).wrap_socket(s, server_hostname=name)
    f = s.makefile("rb")
    print("first", get(s, f, "/watch/first"), flush=True)
except OSError as e:
    print("first error", e, flush=True)
    sys.exit(0)
open(ready, "w").close()
deadline = time.time() + 60
while time.time() < deadline:
    if os.path.exists(go):
        os.unlink(go)
        try:
            print("again", get(s, f, "/watch/again"), flush=True)
        except OSError as e:
            print("again error", e, flush=True)
        open(go + ".done", "w").close()
        continue
    if select.select([s], [], [], 0.02)[0]:
        try:
            b = s.recv(1)
            how = "data" if b else "eof"
        except ssl.SSLError as e:
            how = "tls-error"
        except ConnectionResetError:
            how = "reset"
        except OSError as e:
            how = "error"
        print("closed %s %.6f" % (how, time.time()), flush=True)
        sys.exit(0)
print("closed timeout", flush=True)
EOF

# watch_start ID NS NAME ADDR: a watched connection; waits until it works.
watch_start() {
	local id=$1 ns=$NS_SB
	[ "$2" = sb2 ] && ns=$NS_SB2
	rm -f "$WORK/watch.$id".*
	ip netns exec "$ns" "$PY" "$WORK/watch.py" "$4:443" "$3" "$CA" \
	    "$WORK/watch.$id.ready" "$WORK/watch.$id.go" >"$WORK/watch.$id.out" 2>&1 &
	BG_PIDS+=($!)
	world_wait_file "$WORK/watch.$id.ready" 50 &&
	    grep -qx 'first 200' "$WORK/watch.$id.out" ||
	    { why="watched connection $id to $3: $(short "$(cat "$WORK/watch.$id.out")")"; return 1; }
}

# watch_alive ID: the watched connection is open and serves one more request.
watch_alive() {
	local f=$WORK/watch.$1 n
	grep -q '^closed' "$f.out" && { why="connection $1 closed: $(short "$(cat "$f.out")")"; return 1; }
	n=$(grep -c '^again 200$' "$f.out")
	touch "$f.go"
	world_wait_file "$f.go.done" 50 && rm -f "$f.go.done"
	[ "$(grep -c '^again 200$' "$f.out")" = $((n + 1)) ] ||
	    { why="connection $1 does not serve: $(short "$(cat "$f.out")")"; return 1; }
}

# watch_closed ID T0 T1: the connection was closed by its peer (EOF or
# reset), not before T0 and at most 1 s after T1 (epoch seconds).
watch_closed() {
	local f=$WORK/watch.$1.out n=0 how at
	while ! grep -q '^closed' "$f" && [ $n -lt 30 ]; do
		sleep 0.1; n=$((n + 1))
	done
	read -r _ how at < <(grep '^closed' "$f")
	case "$how" in
	eof|reset|tls-error) ;;
	*) why="connection $1 not closed by sluice within 3 s: $(short "$(cat "$f")")"; return 1 ;;
	esac
	awk -v a="$at" -v t0="$2" -v t1="$3" 'BEGIN { exit !(a >= t0 && a <= t1 + 1.0) }' ||
	    { why="connection $1 closed ($how) at $at, answer at $3: not within 1 s"; return 1; }
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
groupadd "$CTL_GROUP" 2>>"$WORK/world.log" || setup_fail "groupadd $CTL_GROUP failed"
group_made=1

# The test internet's names (tests/integ/lib.sh): allowed.test plays the
# package registry, other.test the AI provider.
REG=allowed.test REG_IP=198.18.1.10 AI=other.test AI_IP=198.18.1.11

mkdir -p "$POLDIR"
cp "$top_srcdir/policy.d/default.yaml" "$POLDIR/"
cat >"$POLDIR/setup.yaml" <<EOF
# setup: a sandbox being provisioned reaches the registry and the AI provider
name: setup
egress:
  default: deny
  allow:
    - domain: $REG
    - domain: $AI
EOF
cat >"$POLDIR/ai-only.yaml" <<EOF
# ai-only: a provisioned sandbox reaches only the AI provider
name: ai-only
egress:
  default: deny
  allow:
    - domain: $AI
EOF
cat >"$POLDIR/static.yaml" <<EOF
# static: the policy of the sandbox declared in sluiced.yaml
name: static
egress:
  default: deny
  allow:
    - domain: $AI
EOF
cat >"$WORK/sluiced.yaml" <<EOF
# generated by tests/integ/ctl.sh
listen:
  transparent: ["0.0.0.0:15001", "[::]:15001"]
  dns: ["0.0.0.0:15053", "[::]:15053"]
  control: $SOCK
  metrics: "127.0.0.1:9464"
control_group: $CTL_GROUP
resolvers: ["198.18.1.2:53"]
policy_dir: $POLDIR
state_dir: $WORK/sbstate
upstream_ca: $CA
audit: {path: $AUDIT, fsync: always}
workers: 2
timeouts: {handshake: 5s, idle: 30s, connect: 3s}
sandboxes:
  - {id: fixed, sources: ["198.18.0.3", "fd00:5c::1:3"], policy: static}
EOF
: >"$AUDIT"
world_spawn "$NS_GW" "$WORK/sluiced.log" "$SLUICED" -c "$WORK/sluiced.yaml"
SL_PID=$SPAWNED
if ! world_wait_listen "$NS_GW" 15001 100 || ! world_wait_listen "$NS_GW" 9464 20 ||
    ! world_wait_file "$SOCK" 20; then
	setup_fail "sluiced did not start: $(tail -3 "$WORK/sluiced.log" | tr '\n' ' ')"
fi
T_START=$(date +%s)

# ================================================================ api
# The API contract: each endpoint answers what doc/control-api.md says,
# each error has its status and a JSON error naming the problem, and a
# refused request leaves the sandboxes, the policies and the generation as
# they were.

sb_body() {	# sb_body ID SOURCE... : a registration with policy setup
	local id=$1 s
	shift
	s=$(printf '"%s",' "$@")
	printf '{"id":"%s","sources":[%s],"policy":"setup"}' "$id" "${s%,}"
}

api_status() {
	api GET /v1/status
	want 200 '.version | test("^[0-9]+\\.[0-9]+")' '.workers == 2' \
	    '.sandboxes == 1' '.policies == 4' '.generation >= 1' \
	    '.connections == 0' '.uptime_s >= 0' ".pid == $SL_PID" \
	    '.started | test("^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$")' \
	    '.state_dir == true'
}

api_add() {
	api POST /v1/sandboxes '{"id":"alpha","team":"ml","project":"agent-x",
	    "sources":["198.18.5.1","fd00:005c:0:0:0:0:5:1"],"policy":"setup"}'
	want 201 '.id == "alpha"' '.team == "ml"' '.project == "agent-x"' \
	    '.sources == ["198.18.5.1/32", "fd00:5c::5:1/128"]' \
	    '.policy == "setup"' '.policy_revision == 1' '.policy_inline == false' \
	    '.origin == "api"' '.connections == 0' \
	    '.created | test("^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$")' \
	    '.ca.fingerprint_sha256 | test("^[0-9a-f]{64}$")' \
	    '.ca_pem | startswith("-----BEGIN CERTIFICATE-----\n")' || return 1
	jq -j .ca_pem <<<"$body" >"$WORK/alpha.pem"
	ALPHA_FP=$(jget .ca.fingerprint_sha256)
}

# The CA minted for alpha: names it, may sign leaves only (pathlen 0), P-256.
api_ca_cert() {
	local t fp
	t=$(openssl x509 -in "$WORK/alpha.pem" -noout -text -nameopt RFC2253 2>&1) ||
	    { why="ca_pem does not parse: $(short "$t")"; return 1; }
	grep -Eq '^ *Subject: .*alpha' <<<"$t" || { why="subject does not name alpha: $(grep Subject: <<<"$t")"; return 1; }
	grep -A1 'X509v3 Basic Constraints' <<<"$t" | grep -q 'CA:TRUE, pathlen:0' ||
	    { why="not CA:TRUE, pathlen:0: $(short "$(grep -A1 'Basic Constraints' <<<"$t")")"; return 1; }
	grep -q 'Public Key Algorithm: id-ecPublicKey' <<<"$t" && grep -q 'NIST CURVE: P-256' <<<"$t" ||
	    { why="key is not EC P-256: $(short "$(grep -A3 'Public Key Algorithm' <<<"$t")")"; return 1; }
	fp=$(openssl x509 -in "$WORK/alpha.pem" -noout -fingerprint -sha256 | sed 's/.*=//; s/://g' | tr 'A-F' 'a-f')
	[ "$fp" = "$ALPHA_FP" ] || { why="ca.fingerprint_sha256 $ALPHA_FP, the certificate's $fp"; return 1; }
}

# The doc's sandbox object: "ca" carries not_before and not_after (and
# name_constraints, null when unconstrained).
api_ca_validity() {
	local nb na
	api GET /v1/sandboxes/alpha
	want 200 '.ca.not_before | type == "string"' '.ca.not_after | type == "string"' \
	    '.ca | has("name_constraints")' || return 1
	nb=$(date -d "$(openssl x509 -in "$WORK/alpha.pem" -noout -startdate | cut -d= -f2)" +%s)
	na=$(date -d "$(openssl x509 -in "$WORK/alpha.pem" -noout -enddate | cut -d= -f2)" +%s)
	[ "$(date -d "$(jget .ca.not_before)" +%s)" = "$nb" ] &&
	    [ "$(date -d "$(jget .ca.not_after)" +%s)" = "$na" ] ||
	    { why="ca.not_before/not_after do not match the certificate"; return 1; }
}

# Its validity is bounded (ca.validity_days, 7 by default).
api_ca_bounded() {
	local nb na
	nb=$(date -d "$(openssl x509 -in "$WORK/alpha.pem" -noout -startdate | cut -d= -f2)" +%s)
	na=$(date -d "$(openssl x509 -in "$WORK/alpha.pem" -noout -enddate | cut -d= -f2)" +%s)
	[ $((na - nb)) -gt 0 ] && [ $((na - nb)) -le $((8 * 86400)) ] ||
	    { why="CA valid for $(( (na - nb) / 3600 )) h, want at most 8 days"; return 1; }
}

api_list_sorted() {
	api POST /v1/sandboxes "$(sb_body zeta 198.18.5.9)"
	want 201 || return 1
	api POST /v1/sandboxes "$(sb_body beta 198.18.6.0/24)"
	want 201 '.sources == ["198.18.6.0/24"]' || return 1
	api GET /v1/sandboxes
	want 200 '.sandboxes | map(.id) == ["alpha", "beta", "fixed", "zeta"]' \
	    'all(.sandboxes[]; has("ca_pem") | not)' \
	    '.sandboxes[0].sources == ["198.18.5.1/32", "fd00:5c::5:1/128"]'
}

api_get_one() {
	api GET /v1/sandboxes/alpha
	want 200 '.id == "alpha"' '.policy == "setup"' '.origin == "api"' || return 1
	jq -j .ca_pem <<<"$body" | cmp -s - "$WORK/alpha.pem" ||
	    { why="GET's ca_pem differs from POST's"; return 1; }
}

api_get_ca_pem() {
	api GET /v1/sandboxes/alpha/ca.pem
	[ "$st" = 200 ] || { why="status $st: $(short "$body")"; return 1; }
	want_header Content-Type application/x-pem-file || return 1
	cmp -s "$WORK/api.b" "$WORK/alpha.pem" || { why="ca.pem differs from ca_pem"; return 1; }
}

api_dup_id()       { refused 409 '.error | test("alpha")' POST /v1/sandboxes "$(sb_body alpha 198.18.7.1)"; }
api_overlap_same() { refused 409 '.error | test("'"'alpha'"'")' POST /v1/sandboxes "$(sb_body other1 198.18.5.1)"; }
api_overlap_v6()   { refused 409 '.error | test("'"'alpha'"'")' POST /v1/sandboxes "$(sb_body other1 fd00:5c::5:0/112)"; }
api_overlap_wider() { refused 409 '.error | test("'"'alpha'"'")' POST /v1/sandboxes "$(sb_body other1 198.18.7.1 198.18.5.0/24)"; }
api_overlap_inside() { refused 409 '.error | test("'"'beta'"'")' POST /v1/sandboxes "$(sb_body other1 198.18.6.7)"; }
api_overlap_static() { refused 409 '.error | test("'"'fixed'"'")' POST /v1/sandboxes "$(sb_body other1 198.18.0.0/24)"; }
api_unknown_field() {
	refused 400 '.error | test("color")' POST /v1/sandboxes \
	    '{"id":"x1","sources":["198.18.7.1"],"policy":"setup","color":"red"}'
}
api_sources_type() {
	refused 400 '.error | test("sources")' POST /v1/sandboxes \
	    '{"id":"x1","sources":"198.18.7.1","policy":"setup"}'
}
api_id_type() {
	refused 400 '.error | test("id")' POST /v1/sandboxes \
	    '{"id":7,"sources":["198.18.7.1"],"policy":"setup"}'
}
api_bad_ids() {
	local id
	for id in "../x" "$(printf 'a%.0s' $(seq 47))" "-x" "a/b" "" "é"; do
		refused 400 '.error | test("id")' POST /v1/sandboxes "$(sb_body "$id" 198.18.7.1)" ||
		    { why="id '$id': $why"; return 1; }
	done
}
api_id_46() {
	local id
	id=$(printf 'b%.0s' $(seq 46))
	api POST /v1/sandboxes "$(sb_body "$id" 198.18.7.46)"
	want 201 ".id == \"$id\"" || return 1
	api DELETE "/v1/sandboxes/$id"
	want 200 ".deleted == \"$id\""
}
api_bad_source() {
	local s
	for s in 198.18.7.1/33 198.18.7.1/24 0.0.0.0/0 fd00::/8 not-an-address; do
		refused 400 '.error | test("sources")' POST /v1/sandboxes "$(sb_body x1 "$s")" ||
		    { why="source '$s': $why"; return 1; }
	done
}
api_unknown_policy() {
	refused 404 '.error | test("nope")' POST /v1/sandboxes \
	    '{"id":"x1","sources":["198.18.7.1"],"policy":"nope"}'
}
api_inline_invalid() {
	refused 400 '.errors | type == "array" and length > 0 and all(.[]; type == "string")' \
	    POST /v1/sandboxes \
	    '{"id":"x1","sources":["198.18.7.1"],"policy":{"egress":{"default":"maybe"}}}'
}
# bodies are limited to 4 MiB (doc/control-api.md), with a length or chunked
BODY_MAX=$((4 * 1024 * 1024))
api_too_large() {
	{ printf '{"id":"x1","sources":["198.18.7.1"],"policy":"setup","team":"'
	  head -c "$BODY_MAX" /dev/zero | tr '\0' 'a'
	  printf '"}'; } >"$WORK/big.json"
	refused 413 '.error | test("large")' POST /v1/sandboxes "@$WORK/big.json"
}
api_too_large_chunked() {
	local before
	before=$(state_now)
	last="POST /v1/sandboxes (chunked, $(wc -c <"$WORK/big.json") bytes)"
	st=$(curl -sS --max-time 10 --unix-socket "$SOCK" -H 'Transfer-Encoding: chunked' \
	    -H 'Expect:' -o "$WORK/api.b" -w '%{http_code}' --data-binary "@$WORK/big.json" \
	    http://sluice/v1/sandboxes 2>"$WORK/api.e")
	body=$(cat "$WORK/api.b")
	want_err 413 '.error | test("large")' || return 1
	[ "$(state_now)" = "$before" ] || { why="$last changed the state"; return 1; }
}
api_malformed_json() { refused 400 '.error | test("JSON")' POST /v1/sandboxes '{"id": "x1",'; }
api_trailing_garbage() {
	refused 400 '.error | test("JSON")' POST /v1/sandboxes \
	    '{"id":"x1","sources":["198.18.7.1"],"policy":"setup"} x'
}
api_not_object() { refused 400 '.error | test("object")' POST /v1/sandboxes '["x1"]'; }
api_empty_body() { refused 400 '.error | test("body")' POST /v1/sandboxes; }
api_unknown_path() {
	refused 404 '.error | test("/v1/nothing")' GET /v1/nothing || return 1
	refused 404 '.error | test("path")' GET /v1/sandboxes/alpha/nothing || return 1
	refused 404 '.error | test("no sandbox")' GET /v1/sandboxes/nosuch
}
# wrong method: 405 naming the allowed ones in Allow
api_method() {
	local m p a
	while read -r m p a; do
		refused 405 '.error | test("method")' "$m" "$p" || return 1
		want_header Allow "${a//_/ }" || return 1
	done <<-EOF
	DELETE /v1/sandboxes GET,_POST
	POST /v1/sandboxes/alpha GET,_DELETE
	PUT /v1/sandboxes/alpha/ca.pem GET
	GET /v1/sandboxes/alpha/policy PUT
	DELETE /v1/policies GET
	POST /v1/policies/setup GET,_PUT
	GET /v1/reload POST
	POST /v1/status GET
	POST /metrics GET
	EOF
}

api_set_policy_name() {
	local g
	g=$(gen_now)
	api PUT /v1/sandboxes/alpha/policy '{"policy":"ai-only"}'
	want 200 '.id == "alpha"' '.policy == "ai-only"' '.policy_revision == 1' \
	    '.policy_inline == false' '.sources == ["198.18.5.1/32", "fd00:5c::5:1/128"]' || return 1
	api GET /v1/sandboxes/alpha
	want 200 '.policy == "ai-only"' || return 1
	[ "$(gen_now)" -gt "$g" ] || { why="generation did not grow ($g)"; return 1; }
}
api_set_policy_inline() {
	api PUT /v1/sandboxes/alpha/policy '{"policy":{"egress":{"default":"deny"}}}'
	want 200 '.policy == "alpha"' '.policy_inline == true' '.policy_revision >= 1' || return 1
	api GET /v1/sandboxes/alpha
	want 200 '.policy == "alpha"' '.policy_inline == true' || return 1
	# an inline policy is no named policy
	api GET /v1/policies
	want 200 '.policies | map(.name) | index("alpha") == null' || return 1
	api GET /v1/policies/alpha
	want_err 404
}
api_set_policy_errors() {
	refused 404 '.error | test("nosuch")' PUT /v1/sandboxes/nosuch/policy '{"policy":"setup"}' || return 1
	refused 404 '.error | test("nope")' PUT /v1/sandboxes/alpha/policy '{"policy":"nope"}' || return 1
	refused 400 '.errors | length > 0' PUT /v1/sandboxes/alpha/policy '{"policy":{"egress":{"allow":[{"domain":""}]}}}' || return 1
	refused 400 '.error | test("x")' PUT /v1/sandboxes/alpha/policy '{"policy":"setup","x":1}' || return 1
	refused 400 '.error | test("policy")' PUT /v1/sandboxes/alpha/policy '{"policy":7}' || return 1
	refused 400 '.error | test("policy")' PUT /v1/sandboxes/alpha/policy '{}'
}
api_delete() {
	api DELETE /v1/sandboxes/alpha
	want 200 '.deleted == "alpha"' || return 1
	api GET /v1/sandboxes/alpha
	want_err 404 '.error | test("alpha")' || return 1
	api GET /v1/sandboxes/alpha/ca.pem
	want_err 404 || return 1
	refused 404 '.error | test("alpha")' DELETE /v1/sandboxes/alpha || return 1
	# its sources are free again
	api POST /v1/sandboxes "$(sb_body alpha2 198.18.5.1)"
	want 201 || return 1
	api DELETE /v1/sandboxes/alpha2
	want 200
}
# a sandbox of sluiced.yaml is shown, but the API cannot change it
api_static() {
	api GET /v1/sandboxes/fixed
	want 200 '.origin == "config"' '.policy == "static"' \
	    '.sources == ["198.18.0.3/32", "fd00:5c::1:3/128"]' || return 1
	refused 409 '.error | test("fixed")' DELETE /v1/sandboxes/fixed || return 1
	refused 409 '.error | test("fixed")' PUT /v1/sandboxes/fixed/policy '{"policy":"setup"}'
}
# it is registered too, so it has its CA like any other
api_static_ca() {
	api GET /v1/sandboxes/fixed
	want 200 '.ca_pem | startswith("-----BEGIN CERTIFICATE-----")' \
	    '.ca.fingerprint_sha256 | test("^[0-9a-f]{64}$")' || return 1
	api GET /v1/sandboxes/fixed/ca.pem
	want 200
}

# team and project are absent from the output when not set
api_absent_fields() {
	api GET /v1/sandboxes/zeta
	want 200 'has("team") | not' 'has("project") | not' || return 1
	api GET /v1/sandboxes
	want 200 '.sandboxes[] | select(.id == "zeta") | (has("team") or has("project")) | not'
}

api_policies_list() {
	api GET /v1/policies
	want 200 '.generation | type == "number"' \
	    '.policies | map(.name) | sort == ["ai-only", "default", "setup", "static"]' \
	    'all(.policies[]; .revision == 1 and (.digest | test("^[0-9a-f]{16,}$")) and .intercepts == 0)' \
	    "all(.policies[]; .file == \"$POLDIR/\" + .name + \".yaml\")" \
	    '.policies[] | select(.name == "static") | .sandboxes == 1' \
	    '.policies[] | select(.name == "setup") | .sandboxes == 3'
}
api_policy_get() {
	api GET /v1/policies/setup
	want 200 '.name == "setup"' '.revision == 1' || return 1
	refused 404 '.error | test("nope")' GET /v1/policies/nope
}

EXTRA1='name: extra
egress:
  default: deny
  allow:
    - domain: allowed.test'
EXTRA2="$EXTRA1
    - domain: other.test"

api_policy_put_new() {
	api PUT /v1/policies/extra "$EXTRA1"
	want 201 '.name == "extra"' '.revision == 1' ".file == \"$POLDIR/extra.yaml\"" || return 1
	[ "$(cat "$POLDIR/extra.yaml" 2>/dev/null)" = "$EXTRA1" ] ||
	    { why="$POLDIR/extra.yaml does not hold the policy put"; return 1; }
	api GET /v1/policies/extra
	want 200 '.revision == 1'
}
api_policy_put_same() {
	api PUT /v1/policies/extra "$EXTRA1"
	want 200 '.name == "extra"' '.revision == 1'
}
api_policy_put_changed() {
	api PUT /v1/policies/extra "$EXTRA2"
	want 200 '.revision == 2' || return 1
	[ "$(cat "$POLDIR/extra.yaml")" = "$EXTRA2" ] || { why="file not replaced"; return 1; }
	api GET /v1/policies
	want 200 '.policies[] | select(.name == "extra") | .revision == 2'
}
api_policy_put_json() {
	api PUT /v1/policies/extra '{"name":"extra","egress":{"default":"deny","allow":[{"domain":"other.test"}]}}'
	want 200 '.revision == 3'
}
# a refused PUT leaves the policy, its revision and its file as they were
api_policy_put_bad() {
	cp "$POLDIR/extra.yaml" "$WORK/extra.before"
	refused 400 '.error | test("other") and test("extra")' PUT /v1/policies/extra \
	    "${EXTRA1/name: extra/name: other}" || return 1
	refused 400 '.errors | length > 0 and all(.[]; type == "string")' PUT /v1/policies/extra \
	    $'name: extra\negress: [' || return 1
	refused 400 '.errors | length > 0' PUT /v1/policies/extra \
	    $'name: extra\negress:\n  default: sometimes' || return 1
	refused 400 '.error | test("name")' PUT /v1/policies/-bad "$EXTRA1" || return 1
	refused 400 '.error | test("body")' PUT /v1/policies/extra || return 1
	cmp -s "$POLDIR/extra.yaml" "$WORK/extra.before" || { why="the file changed"; return 1; }
	api GET /v1/policies/extra
	want 200 '.revision == 3'
}

# this daemon has no gateway_key: the secret endpoints say secrets are
# off (409); nor a signing_key: no JWKS (404)
api_not_built() {
	local m p
	for m in "GET /v1/secrets" "PUT /v1/secrets/token" "DELETE /v1/secrets/token"; do
		p=${m#* }
		if [ "${m%% *}" = PUT ]; then
			refused 409 '.error | test("secrets are off")' PUT "$p" 'sealed' || return 1
		else
			refused 409 '.error | test("secrets are off")' "${m%% *}" "$p" || return 1
		fi
	done
	refused 404 '.error | test("no signing_key")' GET /v1/jwks
}

check api_status api_status
check api_add api_add
check api_ca_cert api_ca_cert
check api_ca_validity api_ca_validity
check api_ca_bounded api_ca_bounded
check api_list_sorted api_list_sorted
check api_get_one api_get_one
check api_absent_fields api_absent_fields
check api_get_ca_pem api_get_ca_pem
check api_dup_id api_dup_id
check api_overlap_same api_overlap_same
check api_overlap_v6 api_overlap_v6
check api_overlap_wider api_overlap_wider
check api_overlap_inside api_overlap_inside
check api_overlap_static api_overlap_static
check api_unknown_field api_unknown_field
check api_sources_type api_sources_type
check api_id_type api_id_type
check api_bad_ids api_bad_ids
check api_id_46 api_id_46
check api_bad_source api_bad_source
check api_unknown_policy api_unknown_policy
check api_inline_invalid api_inline_invalid
check api_too_large api_too_large
check api_too_large_chunked api_too_large_chunked
check api_malformed_json api_malformed_json
check api_trailing_garbage api_trailing_garbage
check api_not_object api_not_object
check api_empty_body api_empty_body
check api_unknown_path api_unknown_path
check api_method api_method
check api_policies_list api_policies_list
check api_set_policy_name api_set_policy_name
check api_set_policy_inline api_set_policy_inline
check api_set_policy_errors api_set_policy_errors
check api_delete api_delete
check api_static api_static
check api_static_ca api_static_ca
check api_policy_get api_policy_get
check api_policy_put_new api_policy_put_new
check api_policy_put_same api_policy_put_same
check api_policy_put_changed api_policy_put_changed
check api_policy_put_json api_policy_put_json
check api_policy_put_bad api_policy_put_bad
check api_not_built api_not_built

# ================================================================ reload
# POST /v1/reload re-reads policy_dir: new and changed files apply; a broken
# file, or a policy a sandbox names gone missing, refuses the whole reload
# (409 with errors) and the policies in force stay, which traffic of the
# static sandbox "fixed" (sb2, policy static: the AI provider only) shows.

reload_ok() {
	local g
	g=$(gen_now)
	api POST /v1/reload
	want 200 '.policies == 5' ".generation >= $g"
}
reload_new_file() {
	printf 'name: dropped\negress:\n  default: deny\n' >"$POLDIR/dropped.yaml"
	api POST /v1/reload
	want 200 '.policies == 6' || return 1
	api GET /v1/policies/dropped
	want 200 '.revision == 1' ".file == \"$POLDIR/dropped.yaml\""
}
reload_static_traffic() {
	local off
	off=$(audit_lines)
	fetch_ok sb2 "$AI" "$AI_IP" other-tls || return 1
	fetch_denied sb2 "$REG" "$REG_IP" || return 1
	audit_has "$off" "type=conn action=pass sandbox=fixed policy=static revision=1 sni=$AI" \
	    "type=conn action=deny sandbox=fixed policy=static revision=1 sni=$REG"
}
STATIC_REG='name: static
egress:
  default: deny
  allow:
    - domain: allowed.test'
reload_broken() {
	local off
	cp "$POLDIR/static.yaml" "$WORK/static.good"
	printf '%s\n' "$STATIC_REG" >"$POLDIR/static.yaml"	# valid, but not applied
	printf 'name: broken\negress:\n  default: [\n' >"$POLDIR/broken.yaml"
	refused 409 '.errors | length > 0 and any(.[]; test("broken\\.yaml"))' POST /v1/reload || return 1
	off=$(audit_lines)
	fetch_ok sb2 "$AI" "$AI_IP" other-tls || { why="after a refused reload: $why"; return 1; }
	fetch_denied sb2 "$REG" "$REG_IP" || { why="after a refused reload: $why"; return 1; }
	audit_has "$off" "type=conn action=pass sandbox=fixed policy=static revision=1 sni=$AI" || return 1
	api GET /v1/policies/static
	want 200 '.revision == 1'
}
reload_in_use() {
	rm -f "$POLDIR/broken.yaml" "$POLDIR/static.yaml"
	refused 409 '.errors | length > 0 and any(.[]; test("static"))' POST /v1/reload || return 1
	fetch_ok sb2 "$AI" "$AI_IP" other-tls
}
reload_applies() {
	local off
	off=$(audit_lines)
	printf '%s\n' "$STATIC_REG" >"$POLDIR/static.yaml"
	api POST /v1/reload
	want 200 || return 1
	api GET /v1/policies/static
	want 200 '.revision == 2' || return 1
	fetch_denied sb2 "$AI" "$AI_IP" || return 1
	fetch_ok sb2 "$REG" "$REG_IP" allowed-tls || return 1
	audit_has "$off" "type=policy_change policy=static revision=2 previous_revision=1 cause=reload uid=0" \
	    "type=conn action=pass sandbox=fixed policy=static revision=2 sni=$REG" || return 1
	cp "$WORK/static.good" "$POLDIR/static.yaml"
	api POST /v1/reload
	want 200 || return 1
	api GET /v1/policies/static
	want 200 '.revision == 3' || return 1
	fetch_ok sb2 "$AI" "$AI_IP" other-tls
}

check reload_ok reload_ok
check reload_new_file reload_new_file
check reload_static_traffic reload_static_traffic
check reload_broken reload_broken
check reload_in_use reload_in_use
check reload_applies reload_applies

# ================================================================ conc
# Registrations from many clients at once: each is applied whole, none is
# lost, ids and sources stay unique however the requests interleave.

# post_code ID SOURCE: one registration on its own connection; prints the status.
post_code() {
	curl -s --max-time 20 -o /dev/null -w '%{http_code}\n' --unix-socket "$SOCK" \
	    --data-binary "$(sb_body "$1" "$2")" http://sluice/v1/sandboxes
}

conc_register() {
	local c i n
	local -a pids=()
	for c in 0 1 2 3 4 5 6 7; do
		for i in $(seq 1 25); do
			post_code "c$c-$i" "198.18.$((64 + c)).$i"
		done >"$WORK/conc.$c" &
		pids+=($!)
	done
	wait "${pids[@]}"
	n=$(cat "$WORK"/conc.[0-7] | grep -c '^201$')
	[ "$n" = 200 ] || { why="$n of 200 answered 201: $(sort "$WORK"/conc.[0-7] | uniq -c | tr '\n' ' ')"; return 1; }
	api GET /v1/sandboxes
	want 200 '[.sandboxes[] | select(.id | test("^c[0-7]-"))] | length == 200' \
	    '[.sandboxes[].sources[]] | length == (unique | length)' \
	    '.sandboxes | map(.id) == (map(.id) | sort)' \
	    '[.sandboxes[] | select(.id | test("^c[0-7]-")) | .sources[0]] | unique | length == 200' || return 1
	api GET /v1/status
	want 200 '.sandboxes == 203'
}
conc_delete() {
	local c i n
	local -a pids=()
	for c in 0 1 2 3 4 5 6 7; do
		for i in $(seq 1 25); do
			curl -s --max-time 20 -o /dev/null -w '%{http_code}\n' -X DELETE \
			    --unix-socket "$SOCK" "http://sluice/v1/sandboxes/c$c-$i"
		done >"$WORK/concdel.$c" &
		pids+=($!)
	done
	wait "${pids[@]}"
	n=$(cat "$WORK"/concdel.[0-7] | grep -c '^200$')
	[ "$n" = 200 ] || { why="$n of 200 deletions answered 200"; return 1; }
	api GET /v1/sandboxes
	want 200 '.sandboxes | map(.id) == ["beta", "fixed", "zeta"]'
}
# race KIND: 8 clients at once register one id (KIND id) or one source (src)
race() {
	local c n
	local -a pids=()
	rm -f "$WORK/race.go"
	for c in 0 1 2 3 4 5 6 7; do
		(
			while [ ! -e "$WORK/race.go" ]; do sleep 0.01; done
			if [ "$1" = id ]; then
				post_code race "198.18.8.$((c + 1))"
			else
				post_code "race-$c" 198.18.9.1
			fi >"$WORK/race.$c"
		) &
		pids+=($!)
	done
	sleep 0.2
	touch "$WORK/race.go"
	wait "${pids[@]}"
	n=$(cat "$WORK"/race.[0-7] | grep -c '^201$')
	[ "$n" = 1 ] && [ "$(cat "$WORK"/race.[0-7] | grep -c '^409$')" = 7 ] ||
	    { why="want one 201 and seven 409, got $(sort "$WORK"/race.[0-7] | uniq -c | tr '\n' ' ')"; return 1; }
	api GET /v1/sandboxes
	want 200 '[.sandboxes[] | select(.id | startswith("race"))] | length == 1' || return 1
	n=$(jget '.sandboxes[] | select(.id | startswith("race")) | .id')
	api DELETE "/v1/sandboxes/$n"
	want 200
}
conc_race_id() { race id; }
conc_race_source() { race src; }

check conc_register conc_register
check conc_delete conc_delete
check conc_race_id conc_race_id
check conc_race_source conc_race_source

# ================================================================ peer
# Who may use the socket: it is created 0660 with group control_group;
# even when the file mode lets anyone connect, sluiced checks the peer's
# credentials: root and members of control_group (supplementary or
# primary group) are served, anyone else gets 403.

# as_nobody SETPRIV-OPTS... -- CURL-ARGS...: curl on the socket as nobody;
# sets st and body.
as_nobody() {
	local -a o=()
	local out
	while [ "$1" != -- ]; do o+=("$1"); shift; done
	shift
	last="(as nobody ${o[*]}) $*"
	out=$(setpriv --reuid=nobody "${o[@]}" curl -sS --max-time 5 \
	    --unix-socket "$SOCK" -w '\n%{http_code}' "$@" 2>&1)
	st=${out##*$'\n'}
	body=${out%$'\n'*}
}

peer_socket_mode() {
	local m
	m=$(stat -c '%a %U %G' "$SOCK")
	[ "$m" = "660 root $CTL_GROUP" ] || { why="socket is '$m', want '660 root $CTL_GROUP'"; return 1; }
}
# (the socket is made world-connectable: the credentials alone decide)
peer_refused() {
	local i
	chmod 0666 "$SOCK"
	# every time: the 403 must reach an ordinary client (curl), however
	# the client's writes and sluiced's answer interleave
	for i in $(seq 30); do
		as_nobody --regid="$NOGROUP" --clear-groups -- http://sluice/v1/status
		want_err 403 '.error | test("control_group")' || { why="call $i of 30: $why"; return 1; }
	done
}
# whatever the client sees, a refused peer changes nothing
peer_refused_nochange() {
	local before
	chmod 0666 "$SOCK"
	before=$(state_now)
	as_nobody --regid="$NOGROUP" --clear-groups -- \
	    --data-binary "$(sb_body intruder 198.18.10.1)" http://sluice/v1/sandboxes
	[ "$(state_now)" = "$before" ] || { why="a refused peer changed the state"; return 1; }
	api GET /v1/sandboxes/intruder
	want_err 404
}
peer_group_member() {
	local off
	off=$(audit_lines)
	as_nobody --regid="$NOGROUP" --groups="$CTL_GROUP" -- http://sluice/v1/status
	want 200 '.version | length > 0' || return 1
	as_nobody --regid="$NOGROUP" --groups="$CTL_GROUP" -- \
	    --data-binary "$(sb_body member 198.18.10.2)" http://sluice/v1/sandboxes
	want 201 '.id == "member"' || return 1
	# the change is audited with the peer's uid
	audit_has "$off" "type=sandbox_add sandbox=member uid=$(id -u nobody)" || return 1
	api DELETE /v1/sandboxes/member
	want 200
}
peer_primary_group() {
	as_nobody --regid="$CTL_GROUP" --clear-groups -- http://sluice/v1/status
	want 200 '.version | length > 0'
}

check peer_socket_mode peer_socket_mode
check peer_refused peer_refused
check peer_refused_nochange peer_refused_nochange
check peer_group_member peer_group_member
check peer_primary_group peer_primary_group
chmod 0660 "$SOCK"

# ================================================================ flow
# The orchestrator's workflow on the sandbox namespace sb (198.18.0.2,
# fd00:5c::1:2), with nothing restarted: register it with "setup" (registry
# and AI provider), hold a connection to each, swap to "ai-only": the
# registry connection is closed within 1 s of the answer and the AI one
# keeps working; then deny-all: nothing stays open, nothing connects, DNS
# says NXDOMAIN; then delete: its CA is gone and its address gets the
# policy "default".

FLOW_OFF=0 SETUP_REV=0 AI_REV=0

flow_unregistered() {
	local off
	off=$(audit_lines)
	fetch_denied sb "$REG" "$REG_IP" || return 1
	audit_has "$off" "type=conn action=deny sandbox=null policy=default src=198.18.0.2 sni=$REG"
}
flow_register() {
	FLOW_OFF=$(audit_lines)
	api GET /v1/policies/setup; SETUP_REV=$(jget .revision)
	api GET /v1/policies/ai-only; AI_REV=$(jget .revision)
	api POST /v1/sandboxes '{"id":"work","team":"agents","project":"demo",
	    "sources":["198.18.0.2","fd00:5c::1:2"],"policy":"setup"}'
	want 201 '.id == "work"' '.policy == "setup"' \
	    '.sources == ["198.18.0.2/32", "fd00:5c::1:2/128"]' || return 1
	jq -j .ca_pem <<<"$body" >"$WORK/work.pem"
}
flow_setup_dns() {
	local s n
	for n in "$REG" "$AI"; do
		s=$(dig_status sb "$n")
		[ "$s" = NOERROR ] || { why="dig $n from sb: '$s', want NOERROR"; return 1; }
	done
}
flow_setup_reach() {
	local off
	off=$(audit_lines)
	fetch_ok sb "$REG" "$REG_IP" allowed-tls || return 1
	fetch_ok sb "$AI" "$AI_IP" other-tls || return 1
	audit_has "$off" "type=conn action=pass sandbox=work policy=setup revision=$SETUP_REV sni=$REG" \
	    "type=conn action=pass sandbox=work policy=setup revision=$SETUP_REV sni=$AI"
}
flow_hold() {
	watch_start reg sb "$REG" "$REG_IP" || return 1
	watch_start ai sb "$AI" "$AI_IP" || return 1
	api GET /v1/sandboxes/work
	want 200 '.connections == 2'
}
flow_to_ai_only() {
	local t0 t1
	FLOW_OFF2=$(audit_lines)
	t0=$(now)
	api PUT /v1/sandboxes/work/policy '{"policy":"ai-only"}'
	t1=$(now)
	want 200 '.policy == "ai-only"' ".policy_revision == $AI_REV" '.policy_inline == false' || return 1
	T0=$t0 T1=$t1
}
flow_registry_closed() { watch_closed reg "$T0" "$T1"; }
flow_registry_close_audited() {
	audit_has "$FLOW_OFF2" "#1 type=conn sandbox=work reason=policy-changed policy=ai-only revision=$AI_REV sni=$REG"
}
flow_ai_kept() { watch_alive ai; }
flow_registry_denied() {
	local off
	off=$(audit_lines)
	fetch_denied sb "$REG" "$REG_IP" || return 1
	audit_has "$off" "type=conn action=deny sandbox=work policy=ai-only revision=$AI_REV sni=$REG"
}
flow_ai_reachable() {
	local off
	off=$(audit_lines)
	fetch_ok sb "$AI" "$AI_IP" other-tls || return 1
	audit_has "$off" "type=conn action=pass sandbox=work policy=ai-only revision=$AI_REV sni=$AI"
}
flow_dns_ai_only() {
	local s
	s=$(dig_status sb "$AI"); [ "$s" = NOERROR ] || { why="dig $AI: '$s', want NOERROR"; return 1; }
	s=$(dig_status sb "$REG"); [ "$s" = NXDOMAIN ] || { why="dig $REG: '$s', want NXDOMAIN"; return 1; }
	# the denial says it was blocked, and by which policy (RFC 8914)
	s=$(in_sb sb dig +time=2 +tries=1 @198.18.0.1 "$REG" A 2>&1)
	grep -q 'EDE: 15 (Blocked): (sluice: not allowed by the egress policy ai-only (not-allowed))' <<<"$s" ||
	    { why="dig $REG: no Extended DNS Error: $(short "$(grep -E 'EDE|status' <<<"$s")")"; return 1; }
	s=$(in_sb sb dig +noedns +time=2 +tries=1 @198.18.0.1 "$REG" A 2>&1)
	grep -q 'status: NXDOMAIN' <<<"$s" && ! grep -q 'EDE:' <<<"$s" ||
	    { why="dig +noedns $REG: $(short "$(grep -E 'EDE|status|OPT' <<<"$s")")"; return 1; }
}
flow_deny_all() {
	local t0 t1
	t0=$(now)
	api PUT /v1/sandboxes/work/policy '{"policy":{"egress":{"default":"deny"}}}'
	t1=$(now)
	want 200 '.policy == "work"' '.policy_inline == true' || return 1
	T0=$t0 T1=$t1
}
flow_ai_closed() { watch_closed ai "$T0" "$T1"; }
flow_none_open() {
	local v
	api GET /v1/sandboxes/work
	want 200 '.connections == 0' || return 1
	api GET /metrics
	v=$(awk '$1 == "sluice_sandbox_connections_open{sandbox=\"work\"}" { print $2 }' <<<"$body")
	[ "$v" = 0 ] || { why="sluice_sandbox_connections_open{sandbox=\"work\"} is '$v', want 0"; return 1; }
}
flow_nothing_connects() {
	local off
	off=$(audit_lines)
	fetch_denied sb "$AI" "$AI_IP" || return 1
	fetch_denied sb "$REG" "$REG_IP" || return 1
	audit_has "$off" "#2 type=conn action=deny sandbox=work policy=work"
}
flow_dns_nxdomain() {
	local s n
	for n in "$REG" "$AI"; do
		s=$(dig_status sb "$n")
		[ "$s" = NXDOMAIN ] || { why="dig $n from sb: '$s', want NXDOMAIN"; return 1; }
	done
}
flow_delete() {
	api DELETE /v1/sandboxes/work
	want 200 '.deleted == "work"' || return 1
	api GET /v1/sandboxes/work/ca.pem
	want_err 404 || return 1
	api GET /v1/sandboxes/work
	want_err 404
}
flow_default_again() {
	local off
	off=$(audit_lines)
	fetch_denied sb "$AI" "$AI_IP" || return 1
	audit_has "$off" "type=conn action=deny sandbox=null policy=default src=198.18.0.2 sni=$AI"
}
# the audit trail of the workflow: each change with its revisions and uid
flow_audit_lifecycle() {
	audit_has "$FLOW_OFF" \
	    "#1 type=sandbox_add sandbox=work team=agents project=demo policy=setup revision=$SETUP_REV uid=0" \
	    "#1 type=policy_change sandbox=work policy=ai-only revision=$AI_REV previous=setup previous_revision=$SETUP_REV inline=false uid=0" \
	    "#1 type=policy_change sandbox=work policy=work inline=true previous=ai-only previous_revision=$AI_REV revision=~^[1-9] uid=0" \
	    "#1 type=sandbox_delete sandbox=work uid=0"
}
# DELETE closes the sandbox's open connections too (within 1 s)
flow_delete_closes() {
	local off t0 t1
	api POST /v1/sandboxes '{"id":"work2","sources":["198.18.0.2"],"policy":"ai-only"}'
	want 201 || return 1
	watch_start ai2 sb "$AI" "$AI_IP" || return 1
	off=$(audit_lines)
	t0=$(now)
	api DELETE /v1/sandboxes/work2
	t1=$(now)
	want 200 '.deleted == "work2"' || return 1
	watch_closed ai2 "$t0" "$t1" || return 1
	audit_has "$off" "type=conn sandbox=work2 reason=sandbox-deleted sni=$AI"
}

check flow_unregistered flow_unregistered
check flow_register flow_register
check flow_setup_dns flow_setup_dns
check flow_setup_reach flow_setup_reach
check flow_hold flow_hold
check flow_to_ai_only flow_to_ai_only
check flow_registry_closed flow_registry_closed
check flow_registry_close_audited flow_registry_close_audited
check flow_ai_kept flow_ai_kept
check flow_registry_denied flow_registry_denied
check flow_ai_reachable flow_ai_reachable
check flow_dns_ai_only flow_dns_ai_only
check flow_deny_all flow_deny_all
check flow_ai_closed flow_ai_closed
check flow_none_open flow_none_open
check flow_nothing_connects flow_nothing_connects
check flow_dns_nxdomain flow_dns_nxdomain
check flow_delete flow_delete
check flow_default_again flow_default_again
check flow_audit_lifecycle flow_audit_lifecycle
check flow_delete_closes flow_delete_closes

# ================================================================ metrics
# Prometheus text on the control socket and on listen.metrics (TCP, only
# /metrics, to anyone), with the counters the traffic above must have moved.

# mval KEY: the value of a sample line of the last answer (KEY with labels).
mval() { awk -v k="$1" '$1 == k { print $2 }' <<<"$body"; }

# metrics_body_ok: the last answer is well-formed Prometheus text 0.0.4.
metrics_body_ok() {
	local bad
	bad=$(grep -Ev '^# (HELP|TYPE) [a-z_:]+ .+$|^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? -?[0-9.e+-]+$' <<<"$body" | head -3)
	[ -z "$bad" ] || { why="not Prometheus text: $(short "$bad")"; return 1; }
}
metrics_facts() {
	local k v g
	metrics_body_ok || return 1
	for k in 'sluice_connections_total{action="pass",reason="allow-name"}' \
	    'sluice_connections_total{action="deny",reason="not-allowed"}' \
	    'sluice_connections_total{action="deny",reason="policy-changed"}' \
	    'sluice_dns_queries_total{verdict="answered"}' \
	    'sluice_dns_queries_total{verdict="nxdomain"}' \
	    'sluice_handshake_seconds_bucket{le="+Inf"}' 'sluice_handshake_seconds_count' \
	    'sluice_control_requests_total{status="201"}' \
	    'sluice_control_requests_total{status="409"}'; do
		v=$(mval "$k")
		[ -n "$v" ] && [ "${v%%.*}" -gt 0 ] 2>/dev/null || { why="$k is '$v', want > 0"; return 1; }
	done
	[ "$(mval 'sluice_policy_revision{policy="static"}')" = 3 ] ||
	    { why="sluice_policy_revision{policy=\"static\"} is '$(mval 'sluice_policy_revision{policy="static"}')', want 3"; return 1; }
	[ "$(mval 'sluice_policy_revision{policy="extra"}')" = 3 ] || { why="policy_revision of extra is not 3"; return 1; }
	[ "$(mval sluice_sandboxes)" = 3 ] || { why="sluice_sandboxes is '$(mval sluice_sandboxes)', want 3"; return 1; }
	grep -q '^# TYPE sluice_handshake_seconds histogram$' <<<"$body" || { why="handshake_seconds is not a histogram"; return 1; }
	v=$(mval sluice_generation)
	g=$(gen_now)
	[ -n "$v" ] && [ "$v" = "$g" ] || { why="sluice_generation '$v', /v1/status says $g"; return 1; }
	# what an operator alerts on: the build, the start, reloads, the audit writer
	[ "$(mval "sluice_build_info{version=\"$(api GET /v1/status; jget .version)\"}")" = 1 ] ||
	    { why="no sluice_build_info for the running version"; return 1; }
	api GET /metrics
	v=$(mval process_start_time_seconds)
	[ -n "$v" ] && [ "$v" -ge $((T_START - 5)) ] && [ "$v" -le "$T_START" ] ||
	    { why="process_start_time_seconds '$v', started at about $T_START"; return 1; }
	for k in 'sluice_reloads_total{result="ok"}' 'sluice_reloads_total{result="failed"}' \
	    sluice_audit_records_total sluice_audit_last_sync_timestamp_seconds; do
		v=$(mval "$k")
		[ -n "$v" ] && [ "$v" -gt 0 ] 2>/dev/null || { why="$k is '$v', want > 0"; return 1; }
	done
	[ "$(mval sluice_audit_failing)" = 0 ] && [ "$(mval sluice_audit_errors_total)" = 0 ] &&
	    [ -n "$(mval sluice_audit_queue_depth)" ] ||
	    { why="audit writer health: failing '$(mval sluice_audit_failing)', errors '$(mval sluice_audit_errors_total)', queue '$(mval sluice_audit_queue_depth)'"; return 1; }
}
# contrib/monitoring names only metrics that exist: every sluice_* name in
# the alert rules and the dashboard is on a live /metrics, and each rule
# has what Prometheus needs
monitoring_names() {
	local t bad="" f=$top_srcdir/contrib/monitoring
	api GET /metrics
	for t in $(grep -ohE 'sluice_[a-z_]+' "$f/sluice.rules.yml" "$f/grafana-sluice.json" | sort -u); do
		grep -qE "^# TYPE $t |^$t[{ ]" <<<"$body" || bad="$bad $t"
	done
	[ -z "$bad" ] || { why="named in contrib/monitoring, not on /metrics:$bad"; return 1; }
	"$PY" - "$f/sluice.rules.yml" "$f/grafana-sluice.json" <<-'P' || { why="contrib/monitoring is malformed"; return 1; }
	import json, sys, yaml
	doc = yaml.safe_load(open(sys.argv[1]))
	rules = [r for g in doc["groups"] for r in g["rules"]]
	assert len(rules) >= 6
	for r in rules:
	    assert r["alert"] and r["expr"] and r["labels"]["severity"] in ("critical", "warning")
	    assert r["annotations"]["summary"]
	dash = json.load(open(sys.argv[2]))
	assert all(t["expr"] for p in dash["panels"] for t in p["targets"])
	P
}
metrics_socket() {
	api GET /metrics
	[ "$st" = 200 ] || { why="status $st"; return 1; }
	want_header Content-Type 'text/plain; version=0.0.4; charset=utf-8' || return 1
	metrics_facts
}
# on the TCP listener in gw (127.0.0.1:9464): /metrics, nothing else
mtcp() {
	last="$1 tcp:$2"
	st=$(ip netns exec "$NS_GW" curl -sS --max-time 5 -X "$1" -o "$WORK/m.b" \
	    -D "$WORK/m.h" -w '%{http_code}' "http://127.0.0.1:9464$2" 2>&1)
	body=$(cat "$WORK/m.b")
	hdrs=$(tr -d '\r' <"$WORK/m.h")
}
metrics_tcp() {
	mtcp GET /metrics
	[ "$st" = 200 ] || { why="status $st"; return 1; }
	want_header Content-Type 'text/plain; version=0.0.4; charset=utf-8' || return 1
	metrics_facts || return 1
	mtcp GET /v1/status
	want_err 404 || return 1
	mtcp GET /v1/sandboxes
	want_err 404 || return 1
	mtcp POST /metrics
	want_err 405
}

check metrics_socket metrics_socket
check monitoring_names monitoring_names
check metrics_tcp metrics_tcp

# ================================================================ ctl
# sluicectl against the same daemon: each subcommand's exit status (0 done,
# 1 the operation failed, 2 usage), the facts its output must show, and
# --json output that parses.

cout="" cerr="" cexit=""

# sctl WANT ARGS...: sluicectl --socket SOCK ARGS must exit WANT; sets
# cout, cerr.  A failure (1, 2) must say why.
sctl() {
	local want=$1
	shift
	last="sluicectl $*"
	cout=$(timeout 10 "$SLUICECTL" --socket "$SOCK" "$@" 2>"$WORK/ctl.err")
	cexit=$?
	cerr=$(cat "$WORK/ctl.err")
	[ "$cexit" = "$want" ] ||
	    { why="sluicectl $*: exit $cexit, want $want: $(short "$cout | $cerr")"; return 1; }
	# A failure says why (doc/sluicectl.8): a usage error with the usage,
	# a failed operation as "sluicectl: COMMAND: ..." (policy check: its
	# file:line:col errors, or its --json output).
	case "$want:$*" in
	2:*) grep -q 'usage: sluicectl' <<<"$cerr" ||
		{ why="sluicectl $*: exit 2 without the usage on stderr: $(short "$cerr")"; return 1; } ;;
	1:*"policy check"*) [ -n "$cerr$cout" ] ||
		{ why="sluicectl $*: exit 1 without a message"; return 1; } ;;
	1:*) grep -q '^sluicectl: ' <<<"$cerr" ||
		{ why="sluicectl $*: exit 1 without a 'sluicectl: ...' line on stderr: $(short "$cerr")"; return 1; } ;;
	esac
	return 0
}
# has WHERE TEXT...: each TEXT occurs in cout (WHERE out) or cerr (err)
has() {
	local w=$1 t s
	shift
	[ "$w" = out ] && s=$cout || s=$cerr
	for t in "$@"; do
		grep -qF -- "$t" <<<"$s" || { why="$last: std$w lacks '$t': $(short "$s")"; return 1; }
	done
}
# jout JQ...: cout is JSON (python3 -m json.tool agrees) and each test holds
jout() {
	local t
	"$PY" -m json.tool <<<"$cout" >/dev/null 2>&1 ||
	    { why="$last: --json output does not parse: $(short "$cout")"; return 1; }
	for t in "$@"; do
		jq -e "$t" >/dev/null 2>&1 <<<"$cout" ||
		    { why="$last: --json output fails ($t): $(short "$cout")"; return 1; }
	done
}

ctl_built() {
	[ -x "$SLUICECTL" ] || { why="$SLUICECTL not built"; return 1; }
}
ctl_sandbox_add() {
	sctl 0 sandbox add cli1 --source 198.18.11.1 --source fd00:5c::11:1 \
	    --policy setup --team ml --project p1 || return 1
	has out cli1 198.18.11.1/32 fd00:5c::11:1/128 setup ml p1 || return 1
	api GET /v1/sandboxes/cli1
	want 200 '.policy == "setup"' '.team == "ml"' '.sources == ["198.18.11.1/32", "fd00:5c::11:1/128"]'
}
ctl_sandbox_add_json() {
	sctl 0 --json sandbox add cli2 --source 198.18.11.2,198.18.11.12 --policy ai-only || return 1
	jout '.id == "cli2"' '.policy == "ai-only"' '.sources == ["198.18.11.2/32", "198.18.11.12/32"]' \
	    '.ca_pem | startswith("-----BEGIN CERTIFICATE-----")'
}
# --policy FILE registers the file's policy inline
ctl_sandbox_add_file() {
	printf 'egress:\n  default: deny\n  allow:\n    - domain: other.test\n' >"$WORK/inline.yaml"
	sctl 0 --json sandbox add cli3 --source 198.18.11.3 --policy "$WORK/inline.yaml" || return 1
	jout '.id == "cli3"' '.policy_inline == true' '.policy == "cli3"' || return 1
	api DELETE /v1/sandboxes/cli3
	want 200
}
ctl_sandbox_add_usage() {
	local before
	before=$(state_now)
	sctl 2 sandbox add || return 1
	sctl 2 sandbox add cli9 --policy setup || return 1
	has err source || return 1
	sctl 2 sandbox add cli9 --source 198.18.11.9 || return 1
	has err policy || return 1
	sctl 2 sandbox add cli9 cli10 --source 198.18.11.9 --policy setup || return 1
	sctl 2 sandbox add cli9 --source 198.18.11.9 --policy setup --bogus || return 1
	[ "$(state_now)" = "$before" ] || { why="a usage error changed the state"; return 1; }
}
ctl_sandbox_add_fail() {
	sctl 1 sandbox add cli1 --source 198.18.11.5 --policy setup || return 1
	has err "sluicectl: sandbox add: " exists "(409 Conflict)" || return 1
	sctl 1 sandbox add cli9 --source 198.18.11.1 --policy setup || return 1
	has err cli1 || return 1
	sctl 1 sandbox add cli9 --source 198.18.11.9 --policy nope || return 1
	has err nope || return 1
	sctl 1 sandbox add cli9 --source 198.18.11.9 --policy "$WORK/nonexistent/p.yaml"
}
ctl_sandbox_ls() {
	sctl 0 sandbox ls || return 1
	has out ID POLICY || return 1
	awk '$1 == "cli1" && / setup / { a = 1 } $1 == "cli2" && / ai-only / { b = 1 } END { exit !(a && b) }' <<<"$cout" ||
	    { why="sandbox ls lacks the rows of cli1 (setup) and cli2 (ai-only): $(short "$cout")"; return 1; }
	sctl 0 sandbox ls --json || return 1
	jout '.sandboxes | map(.id) | index("cli1") != null and index("cli2") != null and index("fixed") != null'
}
ctl_sandbox_show() {
	sctl 0 sandbox show cli1 || return 1
	has out cli1 setup 198.18.11.1/32 "$(api GET /v1/sandboxes/cli1; jget .ca.fingerprint_sha256)" || return 1
	sctl 0 --json sandbox show cli1 || return 1
	jout '.id == "cli1"' '.policy == "setup"' '.ca_pem | length > 0' || return 1
	sctl 1 sandbox show nosuch || return 1
	has err "sluicectl: sandbox show: " nosuch "(404 Not Found)" || return 1
	sctl 2 sandbox show || return 1
	sctl 2 sandbox show cli1 cli2
}
ctl_sandbox_ca() {
	sctl 0 sandbox ca cli1 || return 1
	api GET /v1/sandboxes/cli1/ca.pem
	[ "$cout" = "$body" ] || { why="sandbox ca output differs from ca.pem"; return 1; }
	openssl x509 -noout <<<"$cout" 2>/dev/null || { why="sandbox ca output is no certificate"; return 1; }
	sctl 0 --json sandbox ca cli1 || return 1
	jout '.ca_pem | startswith("-----BEGIN CERTIFICATE-----")' || return 1
	sctl 1 sandbox ca nosuch || return 1
	sctl 2 sandbox ca || return 1
	# --bundle: the roots, then the sandbox's CA; a client that trusts
	# only the bundle verifies a passed-through host's certificate and
	# the sandbox's CA both
	sctl 0 sandbox ca cli1 --bundle --roots "$CA" || return 1
	printf '%s\n' "$cout" >"$WORK/bundle.pem"
	[ "$(grep -c 'BEGIN CERTIFICATE' "$WORK/bundle.pem")" = $(( $(grep -c 'BEGIN CERTIFICATE' "$CA") + 1 )) ] &&
	    [ "$(head -n "$(wc -l <"$CA")" "$WORK/bundle.pem")" = "$(cat "$CA")" ] &&
	    grep -qF -- "$body" "$WORK/bundle.pem" ||
	    { why="--bundle is not the roots then the CA: $(grep -c 'BEGIN CERTIFICATE' "$WORK/bundle.pem") certificates"; return 1; }
	openssl verify -CAfile "$WORK/bundle.pem" "$PKI/allowed.test.pem" >/dev/null 2>&1 ||
	    { why="the bundle does not verify a passed-through host: $(openssl verify -CAfile "$WORK/bundle.pem" "$PKI/allowed.test.pem" 2>&1 | tail -1)"; return 1; }
	openssl verify -CAfile "$WORK/bundle.pem" <(printf '%s\n' "$body") >/dev/null 2>&1 ||
	    { why="the bundle does not hold the sandbox's CA"; return 1; }
	sctl 1 sandbox ca cli1 --bundle --roots "$WORK/no-such-roots.pem" || return 1
	sctl 2 sandbox ca cli1 --roots "$CA"
}
ctl_sandbox_set_policy() {
	sctl 0 sandbox set-policy cli1 ai-only || return 1
	has out cli1 ai-only || return 1
	api GET /v1/sandboxes/cli1
	want 200 '.policy == "ai-only"' || return 1
	sctl 0 --json sandbox set-policy cli1 setup || return 1
	jout '.id == "cli1"' '.policy == "setup"' '.policy_revision | type == "number"' || return 1
	sctl 1 sandbox set-policy nosuch setup || return 1
	has err nosuch || return 1
	sctl 1 sandbox set-policy cli1 nope || return 1
	has err nope || return 1
	sctl 1 sandbox set-policy fixed setup || return 1
	has err fixed || return 1
	sctl 2 sandbox set-policy cli1 || return 1
	api GET /v1/sandboxes/cli1
	want 200 '.policy == "setup"'
}
ctl_sandbox_rm() {
	sctl 0 sandbox rm cli1 || return 1
	has out cli1 || return 1
	api GET /v1/sandboxes/cli1
	want_err 404 || return 1
	sctl 1 sandbox rm cli1 || return 1
	has err cli1 || return 1
	sctl 1 sandbox rm fixed || return 1
	sctl 2 sandbox rm || return 1
	sctl 0 --json sandbox rm cli2 || return 1
	jout '.deleted == "cli2"'
}
ctl_policy_ls() {
	sctl 0 policy ls || return 1
	has out NAME REV || return 1
	awk '$1 == "static" && $2 == "3" { a = 1 } $1 == "extra" && $2 == "3" { b = 1 } END { exit !(a && b) }' <<<"$cout" ||
	    { why="policy ls lacks static and extra at revision 3: $(short "$cout")"; return 1; }
	sctl 0 --json policy ls || return 1
	jout '.policies | map(select(.name == "static"))[0].revision == 3' '.generation | type == "number"'
}
ctl_policy_put() {
	printf 'name: clipol\negress:\n  default: deny\n' >"$WORK/clipol.yaml"
	sctl 0 policy put "$WORK/clipol.yaml" || return 1
	has out created clipol "revision 1" || return 1
	[ -f "$POLDIR/clipol.yaml" ] || { why="$POLDIR/clipol.yaml not written"; return 1; }
	printf 'name: clipol\negress:\n  default: deny\n  allow:\n    - domain: other.test\n' >"$WORK/clipol.yaml"
	sctl 0 policy put "$WORK/clipol.yaml" || return 1
	has out replaced clipol "revision 2" || return 1
	printf '{"name": "clipol", "egress": {"default": "deny"}}' >"$WORK/clipol.json"
	sctl 0 --json policy put "$WORK/clipol.json" || return 1
	jout '.name == "clipol"' '.revision == 3' || return 1
	api GET /v1/policies/clipol
	want 200 '.revision == 3'
}
ctl_policy_put_fail() {
	printf 'name: clipol\negress:\n  default: sometimes\n' >"$WORK/clibad.yaml"
	sctl 1 policy put "$WORK/clibad.yaml" || return 1
	has err default || return 1
	sctl 1 policy put "$WORK/nonexistent.yaml" || return 1
	sctl 2 policy put || return 1
	api GET /v1/policies/clipol
	want 200 '.revision == 3'
}
# policy check works offline: the socket is not needed
ctl_policy_check() {
	local s=$SOCK
	SOCK=$WORK/no-daemon.sock
	sctl 0 policy check "$POLDIR/setup.yaml" "$POLDIR/static.yaml"; local rc=$?
	SOCK=$s
	[ $rc = 0 ] || return 1
	has out "$POLDIR/setup.yaml: ok" "name setup" "$POLDIR/static.yaml: ok" || return 1
	printf 'name: broken\negress:\n  default: sometimes\n' >"$WORK/broken.yaml"
	sctl 1 policy check "$POLDIR/setup.yaml" "$WORK/broken.yaml" || return 1
	has out "setup.yaml: ok" || return 1
	grep -Eq "$WORK/broken.yaml:[0-9]+:[0-9]+: " <<<"$cerr" ||
	    { why="policy check: no file:line:col error for broken.yaml: $(short "$cerr")"; return 1; }
	sctl 1 --json policy check "$POLDIR/setup.yaml" "$WORK/broken.yaml" || return 1
	jout 'length == 2' '.[0].ok == true' '.[0].name == "setup"' \
	    '.[1].ok == false' '.[1].errors | length > 0' || return 1
	sctl 2 policy check
}
ctl_reload() {
	sctl 0 reload || return 1
	has out "generation $(gen_now)" || return 1
	sctl 0 --json reload || return 1
	jout ".generation == $(gen_now)" '.policies | type == "number"' || return 1
	printf 'name: broken\negress:\n  default: [\n' >"$POLDIR/broken.yaml"
	sctl 1 reload; local rc=$?
	rm -f "$POLDIR/broken.yaml"
	[ $rc = 0 ] || return 1
	has err broken.yaml 409 || return 1
	sctl 2 reload now
}
ctl_stats() {
	local g n
	api GET /v1/status
	g=$(jget .generation) n=$(jget .sandboxes)
	sctl 0 stats || return 1
	grep -Eq "^generation: +$g\$" <<<"$cout" && grep -Eq "^sandboxes: +$n\$" <<<"$cout" ||
	    { why="stats lacks 'generation: $g' and 'sandboxes: $n': $(short "$cout")"; return 1; }
	has out "connections by action" pass deny || return 1
	sctl 0 --json stats || return 1
	jout ".status.generation == $g" '.metrics.connections_by_action.pass > 0' \
	    '.metrics.deny_reasons["not-allowed"] > 0' '.metrics.dns_queries_by_verdict.nxdomain > 0' || return 1
	sctl 2 stats now
}
# no secret store here: the daemon answers 409, sluicectl fails saying why
ctl_secret_ls() {
	sctl 1 secret ls || return 1
	has err "sluicectl: secret ls: " "secrets are off" "(409 Conflict)" || return 1
	sctl 1 --json secret ls || return 1
	sctl 2 secret ls now
}
# usage_top ARGS...: no command found: exit 2, one "sluicectl: ..." line
# pointing to --help (or, without any command, the whole usage)
usage_top() {
	last="sluicectl $*"
	cerr=$(timeout 10 "$SLUICECTL" --socket "$SOCK" "$@" 2>&1 >/dev/null)
	cexit=$?
	[ "$cexit" = 2 ] && grep -Eq '^sluicectl: .*--help|^usage: sluicectl' <<<"$cerr" ||
	    { why="sluicectl $*: exit $cexit, want 2 and a message: $(short "$cerr")"; return 1; }
}
ctl_usage() {
	usage_top || return 1
	usage_top bogus || return 1
	usage_top sandbox || return 1
	usage_top sandbox bogus || return 1
	usage_top --bogus sandbox ls || return 1
	sctl 2 sandbox ls extra || return 1
	has err "unexpected argument 'extra'" "usage: sluicectl sandbox ls"
}
ctl_no_daemon() {
	local s=$SOCK rc
	SOCK=$WORK/no-daemon.sock
	sctl 1 sandbox ls; rc=$?
	SOCK=$s
	[ $rc = 0 ] || return 1
	has err "cannot connect to $WORK/no-daemon.sock"
}
ctl_env_socket() {
	cout=$(SLUICE_SOCKET=$SOCK timeout 10 "$SLUICECTL" sandbox ls 2>&1)
	cexit=$?
	[ "$cexit" = 0 ] && grep -q fixed <<<"$cout" ||
	    { why="SLUICE_SOCKET: exit $cexit: $(short "$cout")"; return 1; }
}

check ctl_built ctl_built
if [ -x "$SLUICECTL" ]; then
	check ctl_sandbox_add ctl_sandbox_add
	check ctl_sandbox_add_json ctl_sandbox_add_json
	check ctl_sandbox_add_file ctl_sandbox_add_file
	check ctl_sandbox_add_usage ctl_sandbox_add_usage
	check ctl_sandbox_add_fail ctl_sandbox_add_fail
	check ctl_sandbox_ls ctl_sandbox_ls
	check ctl_sandbox_show ctl_sandbox_show
	check ctl_sandbox_ca ctl_sandbox_ca
	check ctl_sandbox_set_policy ctl_sandbox_set_policy
	check ctl_sandbox_rm ctl_sandbox_rm
	check ctl_policy_ls ctl_policy_ls
	check ctl_policy_put ctl_policy_put
	check ctl_policy_put_fail ctl_policy_put_fail
	check ctl_policy_check ctl_policy_check
	check ctl_reload ctl_reload
	check ctl_stats ctl_stats
	check ctl_secret_ls ctl_secret_ls
	check ctl_usage ctl_usage
	check ctl_no_daemon ctl_no_daemon
	check ctl_env_socket ctl_env_socket
fi

# ================================================================ daemon
# Everything above ran against one sluiced: the same process still serves
# the socket, and it ends well (SIGTERM: exit 0, no sanitizer report).

daemon_same() {
	local up
	kill -0 "$SL_PID" 2>/dev/null || { why="sluiced ($SL_PID) is gone"; return 1; }
	in_ns "$NS_GW" ss -Hxlp 2>/dev/null | grep -F "$SOCK" | grep -q "pid=$SL_PID," ||
	    { why="$SOCK is not served by pid $SL_PID: $(in_ns "$NS_GW" ss -Hxlp | grep -F "$SOCK")"; return 1; }
	api GET /v1/status
	up=$(jget .uptime_s)
	[ "$up" -ge $(( $(date +%s) - T_START - 1 )) ] ||
	    { why="uptime_s $up: restarted since the start $(( $(date +%s) - T_START )) s ago"; return 1; }
}
daemon_ends() {
	local san
	world_stop "$SL_PID" TERM 80
	[ "$WORLD_STOP_STATUS" = 0 ] || { why="exit status $WORLD_STOP_STATUS after SIGTERM: $(tail -3 "$WORK/sluiced.log" | tr '\n' ' ')"; return 1; }
	san=$(grep -m1 -E 'runtime error:|ERROR: [A-Za-z]+Sanitizer' "$WORK/sluiced.log")
	[ -z "$san" ] || { why="sanitizer: $san"; return 1; }
	[ ! -e "$SOCK" ] || { why="$SOCK left behind"; return 1; }
}

check daemon_same daemon_same
check daemon_ends daemon_ends

check_done
