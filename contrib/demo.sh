#!/bin/bash
# demo.sh: sluice in a small world of network namespaces, in about ten seconds.
#
# usage: sh contrib/demo.sh [SLUICED]     (default $SLUICED, else ./sluiced)
# Needs root, iproute2, nftables, dnsmasq, curl, openssl, python3; builds
# nothing (build first: see README.md).
#
# It creates a sandbox, a gateway and a small test internet out of network
# namespaces (tests/integ/lib.sh: 198.18.0.0/15 and fd00:5c::/64 only, no
# route anywhere else), loads contrib/sluice.nft into the gateway, makes a
# test PKI (certs/mkpki.sh), starts the test servers and dnsmasq, and runs
# sluiced with contrib/demo/sluiced.yaml and contrib/demo/policy.d, and
# registers the sandbox through the control socket (sluicectl, found next
# to SLUICED).  Then, from inside the sandbox, which has no proxy settings:
#   1. an allowed HTTPS request: the upstream's answer, and its own
#      certificate (issued by the test root: sluice passed TLS through)
#   2. a denied HTTPS request: a TLS access_denied alert
#   3. a denied plain-HTTP request: 403 with a JSON body
#   3b. its DNS, sent to its usual resolver, answered by sluice's filter:
#      the allowed name resolves, the denied one is NXDOMAIN with an
#      Extended DNS Error naming the policy
#   3c. an allowed name sent to an address it does not own: refused
#   4. a credential added on the way out: other.test is intercepted, and
#      its requests get "Authorization: Bearer <api-token>" from a secret
#      sealed with sluicectl seal; the upstream sees the token, the sandbox
#      sees it [REDACTED] where the upstream echoes it; then the token is
#      rotated live (sluicectl secret put) and the next request gets the
#      new one
#   5. the sandbox's policy narrowed live to deny-all: the request of step
#      1 is refused now, with nothing restarted; then the sandbox is deleted
# and the audit lines sluiced wrote (sluicectl audit tail), and `sluicectl
# audit verify` checks their hash chain and signed checkpoints.  Everything is torn down at the end.
# Exit 0 only if everything behaved as expected.

if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
SLUICED=${1:-${SLUICED:-./sluiced}}
case "$SLUICED" in /*) ;; *) SLUICED=$(pwd)/$SLUICED ;; esac

SLUICECTL=${SLUICECTL:-$(dirname "$SLUICED")/sluicectl}

die() { echo "demo: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (it creates network namespaces)"
[ -x "$SLUICED" ] || die "$SLUICED: not an executable; build sluiced first (README.md)"
[ -x "$SLUICECTL" ] || die "$SLUICECTL: not an executable; build sluicectl first (README.md)"

WORLD_SRCDIR=$top
. "$top/tests/integ/lib.sh" || die "cannot read tests/integ/lib.sh"
why=$(world_available) || die "$why"
for t in curl openssl dnsmasq dig; do
	command -v "$t" >/dev/null 2>&1 || die "$t not found (sh contrib/install-deps-debian.sh)"
done
[ -n "$PY" ] || die "python3 not found"

RUN=$(mktemp -d "${TMPDIR:-/tmp}/sluice-demo.XXXXXX") || exit 1
SL_PID=""
ok=1
finish() {
	trap - EXIT INT TERM
	world_down
	if [ $ok = 1 ]; then
		rm -rf "$RUN"
	else
		echo "demo: logs kept in $RUN" >&2
	fi
}
trap finish EXIT
trap 'ok=0; exit 1' INT TERM

bad() { echo "  !! $*"; ok=0; }
if [ -t 1 ]; then
	say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
else
	say() { printf '\n== %s\n' "$*"; }
fi
sandbox() { ip netns exec "$NS_SB" "$@"; }

world_init "demo$$"
say "Building the world (namespaces $NS_SB, $NS_GW, $NS_UP)"
"$top/certs/mkpki.sh" "$RUN/pki" $WORLD_CERT_NAMES >"$RUN/mkpki.log" 2>&1 ||
    { ok=0; die "certs/mkpki.sh failed: $(tail -1 "$RUN/mkpki.log")"; }
{ world_up && world_load_nft; } >"$RUN/world.log" 2>&1 ||
    { ok=0; die "world setup failed: $(tail -1 "$RUN/world.log")"; }
world_start_dns "$RUN" 2>>"$RUN/world.log" || { ok=0; die "dnsmasq did not start"; }
world_start_upstreams "$RUN/pki" "$RUN/state" "$RUN" 2>>"$RUN/world.log" ||
    { ok=0; die "test servers did not start"; }
echo "  sandbox 198.18.0.2  ->  gateway 198.18.0.1 (sluiced, contrib/sluice.nft)  ->  test internet 198.18.1.0/24"
echo "  allowed.test = 198.18.1.10, denied.test = 198.18.1.12 (dnsmasq in the test internet)"

mkdir -p "$RUN/policy.d" "$RUN/secrets" "$RUN/put"
cp "$top/contrib/demo/policy.d/"*.yaml "$top/policy.d/default.yaml" "$RUN/policy.d/"
# The gateway's keys, and the API token sealed to them (only sluiced can
# open it; it is bound to other.test).
TOKEN1="demo-token-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
TOKEN2="demo-token-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
"$SLUICECTL" keygen --out "$RUN/keys" >"$RUN/keygen.out" 2>&1 ||
    { ok=0; die "sluicectl keygen failed: $(tail -1 "$RUN/keygen.out")"; }
printf '%s' "$TOKEN1" | "$SLUICECTL" seal --pub "$RUN/keys/gateway.pub" \
    --name api-token --host other.test --secret-version 1 \
    >"$RUN/secrets/api-token.sealed" 2>"$RUN/seal.err" ||
    { ok=0; die "sluicectl seal failed: $(cat "$RUN/seal.err")"; }
sed "s|@RUN@|$RUN|g" "$top/contrib/demo/sluiced.yaml" >"$RUN/sluiced.yaml"

say "Starting sluiced"
if ! ip netns exec "$NS_GW" "$SLUICED" -c "$RUN/sluiced.yaml" --check >"$RUN/check.out" 2>&1; then
	ok=0; cat "$RUN/check.out" >&2; die "sluiced --check refused the demo configuration"
fi
world_spawn "$NS_GW" "$RUN/sluiced.log" "$SLUICED" -c "$RUN/sluiced.yaml"
SL_PID=$SPAWNED
if ! world_wait_listen "$NS_GW" 15001 50; then
	ok=0; cat "$RUN/sluiced.log" >&2; die "sluiced did not start"
fi
echo "  $SLUICED -c sluiced.yaml"
echo "  policy 'agent':"; sed -n '/^name:/,$p' "$top/contrib/demo/policy.d/agent.yaml" | sed 's/^/    /'

ctl() { "$SLUICECTL" --socket "$RUN/control.sock" "$@"; }
say "Registering the sandbox (as an orchestrator would)"
echo "  \$ sluicectl sandbox add demo --source 198.18.0.2 --source fd00:5c::1:2 --policy agent --team demo"
ctl sandbox add demo --source 198.18.0.2 --source fd00:5c::1:2 --policy agent \
    --team demo >"$RUN/add.out" 2>&1 || bad "sluicectl sandbox add failed: $(cat "$RUN/add.out")"
echo "  \$ sluicectl sandbox ls"
ctl sandbox ls 2>&1 | sed 's/^/  /'
ctl sandbox ca demo >"$RUN/demo-ca.pem" 2>&1 &&
    echo "  its own CA (for interception; installed in the sandbox's trust store): $(openssl x509 -noout -subject -in "$RUN/demo-ca.pem" 2>&1)"

# The sandbox's own DNS goes to sluiced's DNS listener; this demo pins the
# names with --resolve so the requests do not depend on it.
CURL="curl -sS --max-time 8 --cacert $RUN/pki/ca.pem"

say "1. sandbox\$ curl https://allowed.test/"
sandbox $CURL -v --resolve allowed.test:443:198.18.1.10 https://allowed.test/ \
    >"$RUN/1.body" 2>"$RUN/1.err"
rc=$?
echo "  exit $rc; the upstream answered: $(cat "$RUN/1.body")"
issuer=$(sed -n 's/^\*  *issuer: //p' "$RUN/1.err" | head -1)
subject=$(sed -n 's/^\*  *subject: //p' "$RUN/1.err" | head -1)
echo "  certificate: subject $subject; issuer $issuer"
echo "  (the upstream's own certificate: sluice passed the TLS connection through)"
[ $rc = 0 ] || bad "expected exit 0"
grep -q 'hello from allowed-tls' "$RUN/1.body" || bad "expected the upstream's answer"
case "$issuer" in *"Sluice Test Root CA"*) ;; *) bad "expected the test root as issuer" ;; esac

say "2. sandbox\$ curl https://denied.test/"
sandbox $CURL --resolve denied.test:443:198.18.1.12 https://denied.test/ \
    >"$RUN/2.body" 2>"$RUN/2.err"
rc=$?
echo "  exit $rc: $(cat "$RUN/2.err")"
[ $rc = 35 ] || bad "expected curl exit 35 (TLS alert)"
grep -q 'alert access denied' "$RUN/2.err" || bad "expected a TLS access_denied alert"

say "3. sandbox\$ curl http://denied.test/"
sandbox $CURL -w 'HTTP %{http_code}\n' --resolve denied.test:80:198.18.1.12 \
    http://denied.test/ >"$RUN/3.out" 2>&1
rc=$?
sed 's/^/  /' "$RUN/3.out"
grep -q 'HTTP 403' "$RUN/3.out" || bad "expected 403"
grep -q '"denied"' "$RUN/3.out" || bad "expected a JSON body naming the denial"

say "3b. The sandbox's DNS goes to sluice, judged by the same policy"
for n in allowed.test denied.test; do
	echo "  sandbox\$ dig $n    (to its usual resolver 198.18.1.2; the firewall sends it to sluice)"
	sandbox dig +time=2 +tries=1 @198.18.1.2 "$n" A >"$RUN/dig.$n" 2>&1
	sed -n 's/^;; ->>HEADER<<- .*\(status: [A-Z]*\).*/\1/p; s/^; EDE: /EDE: /p; /^[a-z].*IN[[:space:]]*A[[:space:]]/p' "$RUN/dig.$n" | sed 's/^/    /'
done
grep -q 'status: NOERROR' "$RUN/dig.allowed.test" && grep -q '198\.18\.1\.10' "$RUN/dig.allowed.test" ||
    bad "expected allowed.test to resolve through sluice"
grep -q 'status: NXDOMAIN' "$RUN/dig.denied.test" && grep -q 'EDE: 15 (Blocked)' "$RUN/dig.denied.test" ||
    bad "expected NXDOMAIN with an Extended DNS Error for denied.test"

say "3c. An allowed name, sent to an address it does not own"
echo "  sandbox\$ curl --resolve allowed.test:443:198.18.1.12 https://allowed.test/   (denied.test's address)"
sandbox $CURL --resolve allowed.test:443:198.18.1.12 https://allowed.test/ \
    >"$RUN/3c.body" 2>"$RUN/3c.err"
rc=$?
echo "  exit $rc: $(cat "$RUN/3c.err")"
echo "  (sluice resolved allowed.test itself: a name lets a connection go only to its own addresses)"
[ $rc = 35 ] || bad "expected curl exit 35 (TLS alert): the name does not own the address"

say "4. A credential the sandbox never holds"
echo "  \$ sluicectl secret ls"
ctl secret ls 2>&1 | sed 's/^/  /'
# up_auth: the Authorization header of the last request other.test got
up_auth() {
	"$PY" -c 'import json,sys
r = json.load(open(sys.argv[1]))["requests"][-1]
print(dict((k.lower(), v) for k, v in r["headers"]).get("authorization", "-"))' \
	    "$RUN/state/other-tls.json" 2>/dev/null
}
ICURL="curl -sS --max-time 8 --cacert $RUN/demo-ca.pem --resolve other.test:443:198.18.1.11"
echo "  sandbox\$ curl -H 'Authorization: Bearer fake' https://other.test/echo-headers"
echo "  (the sandbox trusts its own CA: sluice terminates TLS for other.test)"
sandbox $ICURL -H 'Authorization: Bearer fake' https://other.test/echo-headers \
    >"$RUN/4.body" 2>"$RUN/4.err" || bad "the request failed: $(cat "$RUN/4.err")"
got=$(up_auth)
echo "  the upstream received:  Authorization: $got"
echo "  the sandbox got back:   $(grep -o '"[Aa]uthorization", "[^"]*"' "$RUN/4.body")"
[ "$got" = "Bearer $TOKEN1" ] || bad "expected the upstream to get the sealed token"
grep -q 'Bearer \[REDACTED\]' "$RUN/4.body" || bad "expected the echo redacted"
grep -q "$TOKEN1" "$RUN/4.body" && bad "the token reached the sandbox"
echo "  \$ sluicectl seal ... --secret-version 2 > api-token.sealed; sluicectl secret put api-token.sealed"
printf '%s' "$TOKEN2" | "$SLUICECTL" seal --pub "$RUN/keys/gateway.pub" \
    --name api-token --host other.test --secret-version 2 \
    >"$RUN/put/api-token.sealed" 2>>"$RUN/seal.err" &&
ctl secret put "$RUN/put/api-token.sealed" 2>&1 | sed 's/^/  /'
sandbox $ICURL https://other.test/echo-headers >"$RUN/4b.body" 2>"$RUN/4b.err" ||
    bad "the request after the rotation failed: $(cat "$RUN/4b.err")"
got=$(up_auth)
echo "  the next request:       Authorization: $got   (rotated, nothing restarted)"
[ "$got" = "Bearer $TOKEN2" ] || bad "expected the rotated token upstream"
grep -q "$TOKEN2" "$RUN/4b.body" && bad "the token reached the sandbox"

say "5. The workflow moves on: nothing may leave the sandbox now"
echo "  \$ sluicectl sandbox set-policy demo default     (the shipped deny-all)"
ctl sandbox set-policy demo default >"$RUN/set.out" 2>&1 ||
    bad "sluicectl sandbox set-policy failed: $(cat "$RUN/set.out")"
sed -n 's/^\(policy.*\)/  \1/p' "$RUN/set.out"
echo "  sandbox\$ curl https://allowed.test/   (the request of step 1, again)"
sandbox $CURL --resolve allowed.test:443:198.18.1.10 https://allowed.test/ \
    >"$RUN/5.body" 2>"$RUN/5.err"
rc=$?
echo "  exit $rc: $(cat "$RUN/5.err")"
[ $rc = 35 ] || bad "expected curl exit 35 (TLS alert) under deny-all"
echo "  \$ sluicectl sandbox rm demo"
ctl sandbox rm demo 2>&1 | sed 's/^/  /'
ctl sandbox ca demo >/dev/null 2>&1 && bad "the deleted sandbox's CA is still served"

say "The test internet saw"
for s in allowed-tls other-tls denied-tls denied-http; do
	n=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["accepted"])' "$RUN/state/$s.json" 2>/dev/null)
	echo "  $s: ${n:-?} connection(s)"
	case "$s" in
	allowed-tls) [ "$n" = 1 ] || bad "expected 1 connection at allowed.test" ;;
	other-tls) [ "${n:-0}" -ge 1 ] || bad "expected the injected requests at other.test" ;;
	*) [ "$n" = 0 ] || bad "expected nothing to reach $s" ;;
	esac
done

say "Stopping sluiced (SIGTERM drains)"
world_stop "$SL_PID" TERM 60
[ "$WORLD_STOP_STATUS" = 0 ] || bad "sluiced exit status $WORLD_STOP_STATUS, expected 0"
if grep -qiE 'error|fatal' "$RUN/sluiced.log"; then
	sed 's/^/  /' "$RUN/sluiced.log"
	bad "sluiced logged errors"
else
	echo "  done"
fi

say "The audit trail, as sluicectl shows it"
echo "  \$ sluicectl audit tail --file audit.jsonl -n 40"
"$SLUICECTL" audit tail --file "$RUN/audit.jsonl" -n 40 2>&1 | sed 's/^/  /'
"$PY" - "$RUN/audit.jsonl" <<'EOF' || ok=0
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
want = [("pass", "allowed.test", "agent"), ("deny", "denied.test", "agent"),
        ("deny", "denied.test", "agent"), ("deny", "allowed.test", "agent"),
        ("deny", "allowed.test", "default")]
got = sorted((r.get("action"), r.get("sni") or r.get("host"), r.get("policy"))
             for r in recs if r.get("type") == "conn" and
             (r.get("sni") or r.get("host")) != "other.test")
if got != sorted(want):
    print("  !! audit records %s, expected %s" % (got, sorted(want)))
    sys.exit(1)
life = [r["type"] for r in recs if r.get("type") in
        ("sandbox_add", "policy_change", "sandbox_delete", "secret_rotate")]
if life != ["secret_rotate", "sandbox_add", "secret_rotate", "policy_change",
            "sandbox_delete"]:
    print("  !! lifecycle records %s" % life)
    sys.exit(1)
inj = [r for r in recs if r.get("type") == "request" and r.get("action") == "inject"]
if [[s["version"] for s in r["secrets"]] for r in inj] != [[1], [2]]:
    print("  !! injected request records %s" % inj)
    sys.exit(1)
EOF

say "The audit trail verifies (hash chain, signed checkpoints)"
echo "  \$ sluicectl audit verify audit.jsonl --pub keys/signing.pub"
"$SLUICECTL" audit verify "$RUN/audit.jsonl" --pub "$RUN/keys/signing.pub" 2>&1 |
    sed 's/^/  /'
"$SLUICECTL" audit verify "$RUN/audit.jsonl" --pub "$RUN/keys/signing.pub" \
    >/dev/null 2>&1 || bad "the audit trail does not verify"

echo
if [ $ok = 1 ]; then
	echo "demo: everything behaved as expected"
	exit 0
fi
echo "demo: something did not behave as expected (see !! above)"
exit 1
