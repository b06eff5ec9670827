#!/bin/bash
# run.sh: sluice's integration scenarios, run in network namespaces.
#
# usage: tests/integ/run.sh [--selftest] [-k] [-v] [PATTERN...]
#   --selftest  prove the world and harness without sluiced: runs the
#               scenarios of mode "direct" (gw routes, no nftables) and
#               "nft" (contrib/sluice.nft loaded, a reporter of the original
#               destination stands in for sluiced)
#   -k          keep the work directory (always kept when something fails)
#   -v          on failure, show the client output and sluiced's log tail
#   PATTERN     run only scenarios whose name matches the shell glob
# Environment: top_srcdir, top_builddir (set by make check), SLUICED (the
# daemon binary, default $top_builddir/sluiced), PYTHON.
# Exit: 0 all passed, 1 something failed, 77 skipped (not root, no ip netns
# or nft, a tool missing).  Needs root: it creates namespaces (lib.sh).
#
# The world (tests/integ/lib.sh) is built once per run; sluiced is restarted
# only when a scenario needs another policy set, asks for a fresh daemon, or
# the previous scenario changed or stopped it.  sluiced runs in gw with
#   transparent 0.0.0.0:15001 and [::]:15001, proxy 198.18.0.1:3128,
#   dns 0.0.0.0:15053 and [::]:15053 (the sandboxes' port 53, redirected),
#   resolvers 198.18.1.2:53 (dnsmasq in up), audit to a file, and the static
#   sandbox sb1 = 198.18.0.2, fd00:5c::1:2 with policy "agent" (or the
#   scenario's); sb2 (198.18.0.3) is registered nowhere and gets "default".
# policy_dir holds the shipped policy.d/default.yaml and
# tests/integ/policies/*.yaml (tests/integ/policies/variants/ are installed
# only by the "policy" step).
#
# SCENARIO FILES: tests/integ/scenarios/NAME.scn, run in name order (st-*
# are the self-test's).  NAME.scn.pending is a scenario that shows a known
# daemon bug: not run (its desc says what is expected); rename it to
# NAME.scn once the bug is fixed.  A scenario is data: bash assignments of
# the keys below, nothing else; a variable that is not a key is an error (a
# typo would drop an expectation).  Unknown verbs and steps fail the
# scenario.
#
#   desc='...'            what it shows (printed on failure)
#   mode=daemon           daemon (default); direct or nft run only --selftest
#   from=sb               namespace of the client: sb (sandbox sb1), sb2;
#                         up or gw for self-test controls
#   policy=agent          policy of sb1 (a file in tests/integ/policies/)
#   policy_yaml='...'     inline policy, written to policy_dir; its "name:"
#                         names it and sb1 gets it unless policy= is given
#   fresh=1               restart sluiced before this scenario
#   cfg_limits='k: v, ...'    sluiced.yaml "limits" for this scenario (e.g.
#                         'connections: 3'); absent: sluiced's defaults
#   cfg_nofile=N          sluiced runs with at most N open files (prlimit)
#   cfg_timeouts='k: v, ...'  replaces those keys of the default timeouts
#                         (handshake 5s, idle 30s, connect 3s, first_byte
#                         1s, drain 3s), e.g. 'handshake: 2s, idle: 2s'
#   sb2_policy=NAME       register sb2 (198.18.0.3, fd00:5c::1:3) as a
#                         sandbox of its own with that policy
#   steps='client'        what to do, ';'-separated, in order:
#       client              run the client action
#       sighup | sigterm    signal sluiced
#       policy NAME FILE    install tests/integ/policies/FILE as NAME.yaml
#       wait_log ERE        wait (3 s) for ERE in sluiced's log of this scenario,
#                           after the place an earlier wait_log matched
#       wait_audit k=v ...  wait (3 s) for such an audit record (as in
#                           expect_audit) written during the scenario
#       alive               sluiced must still run
#       hold ADDR:PORT [ID [tls=NAME]]  open an echo connection and keep it
#                           (background); several may be held at once under
#                           distinct IDs; tls=NAME: an HTTPS connection with
#                           SNI and Host NAME, each round trip a GET
#       release [ID] [closed]  use the held connection ID (default 1) again
#                           (it must work, or with "closed" it must have
#                           been closed), close it
#       trip ADDR:PORT ok|reset|fail [sb|sb2]  a new echo connection (from
#                           the scenario's namespace or the one named) must
#                           echo (ok), be reset without echo, or not echo
#       refused ADDR:PORT   a new TCP echo round trip must fail (tried once
#                           sluiced stops listening on 15001, or after 2 s)
#       exited STATUS       sluiced must exit (drain + 3 s) with STATUS
#       sleep SECONDS
#       do [NS] [CHECK...] VERB ARGS  one more client action (the verbs of
#                           client=, ARGS split at blanks) from NS (sb, sb2,
#                           up, gw; default the scenario's); each CHECK must
#                           hold: has=TEXT (in its output), lacks=TEXT,
#                           exit=N|!0; TEXT takes printf %b escapes (\x20)
#       spawn ID [NS] VERB ARGS  the same, in the background
#       join ID [CHECK...]  wait for the spawned action ID; CHECKs as in do
#       dns_host NAME ADDR...  dnsmasq answers NAME with these addresses
#                           from now on (a hosts file it re-reads; waits
#                           until it answers the first)
#   client='VERB ARGS'    the client action; ARGS are shell words, $CA (test
#                         root CA file) and $PKI (its directory) expand:
#       curl ARGS           curl -sS --max-time T --cacert $CA ARGS
#       s_client ARGS       openssl s_client -CAfile $CA -verify_return_error
#                           ARGS, sending "GET / HTTP/1.1" with Host = the
#                           -servername (else the -connect host), Connection:
#                           close
#       tcp ADDR:PORT [DATA [OPT...]]  raw TCP (upstream.py tcp, \x escapes;
#                                   OPT e.g. --wait 1.5: silent first)
#       raw ADDR:PORT DATA [OPT...] DATA in one write, the answers parsed
#                                   as HTTP responses (upstream.py raw)
#       hello ADDR:PORT [OPT...]    a built ClientHello (upstream.py hello:
#                                   --sni N --pad B --cut B --wait S)
#       http-seq ADDR:PORT HOST...  requests on one kept-alive connection
#       udp ADDR:PORT [DATA]        one datagram, wait for a reply
#       dig ARGS                    dig +time=1 +tries=1 ARGS
#       dns ADDR:PORT [--tcp] MSG...  DNS messages, one after the other
#                                   (upstream.py dns: NAME/TYPE queries,
#                                   bad:KIND malformed ones; 1 s each)
#       dnsflood ADDR:PORT NAME [OPT...]  paced UDP queries, rcodes counted
#                                   (upstream.py dnsflood: --count --rate)
#       conns ADDR:PORT [OPT...]    many idle TCP connections held open
#                                   (upstream.py conns: --count --hold)
#       sluiced-check               sluiced -c CONFIG --check (runs in gw)
#   timeout=8             seconds allowed to each client action
#   expect_exit=N         the client's exit status; "!0" any failure
#   expect_status=CODE    HTTP status curl saw
#   expect_out='TEXT'     every line must occur in the client's output
#                         (stdout, stderr and, for curl, the body)
#   expect_not_out='TEXT' no line may occur
#   expect_up='NAME.FIELD=V ...'  change of the upstreams' counters during the
#                         scenario (upstream.py expect; e.g. "*.accepted=0",
#                         "allowed-tls.sni=allowed.test")
#   expect_audit='k=v ...'  one line per audit record that must have been
#                         written during the scenario (upstream.py audit;
#                         "k=~ERE" matches a regular expression); a line
#                         '#N k=v ...' means exactly N such records,
#                         '#N-M k=v ...' between N and M
#   expect_log='ERE'      every line must match sluiced's log of the scenario
#   expect_dns_log='ERE'  every line must match (case-insensitively) a line
#                         dnsmasq logged during the scenario, waited for (3 s)
#   expect_not_dns_log='ERE'  no line may; checked after expect_dns_log
#                         matched, so a control name asked after the names
#                         that must stay away from dnsmasq proves the log
#                         was written that far
#
# Output: "PASS name" or "FAIL name: why" per scenario, then "N passed, N
# failed".  Every sluiced instance must also end well: an exit status other
# than 0 after SIGTERM, a death of its own or a sanitizer report in its log
# is one more "FAIL sluiced.N: ..." line.  Details of a run stay in the work
# directory it names (the per-scenario files under scn/NAME, and one
# sluiced.N directory per instance with its config, policies, log, audit).

if [ -z "${BASH_VERSION:-}" ]; then
	command -v bash >/dev/null 2>&1 || { echo "SKIP: bash not found"; exit 77; }
	exec bash "$0" "$@"
fi
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$(cd "$here/../.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
SLUICED=${SLUICED:-$top_builddir/sluiced}
WORLD_SRCDIR=$top_srcdir
SCN_DIR=$top_srcdir/tests/integ/scenarios
POL_DIR=$top_srcdir/tests/integ/policies

selftest=0 keep=0 verbose=0 patterns=()
while [ $# -gt 0 ]; do
	case "$1" in
	--selftest) selftest=1 ;;
	-k|--keep) keep=1 ;;
	-v|--verbose) verbose=1 ;;
	-h|--help) sed -n '2,/^$/s/^# \{0,1\}//p' "$0"; exit 0 ;;
	-*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	*) patterns+=("$1") ;;
	esac
	shift
done

skip() { echo "SKIP: $*"; exit 77; }

. "$top_srcdir/tests/integ/lib.sh" || skip "cannot read lib.sh"
why=$(world_available) || skip "$why"
for t in curl openssl dnsmasq dig ss timeout; do
	command -v "$t" >/dev/null 2>&1 || skip "$t not found"
done
[ -n "$PY" ] || skip "python3 not found"
if [ $selftest = 0 ] && [ ! -x "$SLUICED" ]; then
	echo "FAIL setup: $SLUICED not built"
	echo "0 passed, 1 failed"
	exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-integ.XXXXXX") || exit 1
PKI=$WORK/pki CA=$WORK/pki/ca.pem STATE=$WORK/state
npass=0 nfail=0
SL_PID="" SL_KEY="" SL_RUN="" SL_N=0 REDIR_PID=""
declare -A HOLD_PIDS=() SPAWN_PIDS=()
DO_N=0
world_mode=""

cleanup() {
	trap - EXIT INT TERM
	world_down
	if [ $nfail -gt 0 ] || [ $keep = 1 ]; then
		echo "work directory kept: $WORK"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'echo "interrupted"; nfail=$((nfail + 1)); exit 1' INT TERM

setup_fail() {
	echo "FAIL setup: $*"
	nfail=$((nfail + 1))
	echo "$npass passed, $nfail failed"
	exit 1
}

# ---------------------------------------------------------------- world

world_init
"$top_srcdir/certs/mkpki.sh" "$PKI" $WORLD_CERT_NAMES >"$WORK/mkpki.log" 2>&1 ||
    setup_fail "certs/mkpki.sh failed (see $WORK/mkpki.log)"
world_up >"$WORK/world.log" 2>&1 || setup_fail "world_up: $(tail -1 "$WORK/world.log")"
world_start_dns "$WORK" 2>>"$WORK/world.log" || setup_fail "dnsmasq did not start"
world_start_upstreams "$PKI" "$STATE" "$WORK" 2>>"$WORK/world.log" ||
    setup_fail "upstreams did not start (see $WORK/upstream.log)"

# world_mode daemon|direct|nft: ruleset, forwarding and the stand-in.
set_world_mode() {
	[ "$world_mode" = "$1" ] && return 0
	[ -n "$REDIR_PID" ] && { world_stop "$REDIR_PID"; REDIR_PID=""; }
	case "$1" in
	daemon)
		world_forwarding 0
		world_load_nft || return 1 ;;
	direct)
		sluiced_stop
		world_flush_nft
		world_forwarding 1 ;;
	nft)
		# forwarding on, to show the ruleset alone keeps sandboxes in
		sluiced_stop
		world_forwarding 1
		world_load_nft || return 1
		rm -f "$WORK/redir.ready"
		world_spawn "$NS_GW" "$WORK/redir.log" "$PY" "$UPSTREAM_PY" serve \
		    --state-dir "$STATE" --ready "$WORK/redir.ready" \
		    "redir=origdst;0.0.0.0:15001,[::]:15001,0.0.0.0:15053,[::]:15053,198.18.0.1:3128" \
		    "redir-dns=udpecho;0.0.0.0:15053,[::]:15053"
		REDIR_PID=$SPAWNED
		world_wait_file "$WORK/redir.ready" 100 || return 1 ;;
	esac
	world_mode=$1
}

# ---------------------------------------------------------------- sluiced

# sluiced_stop: SIGTERM the running instance; an exit status other than 0
# (a crash, a sanitizer report, a drain that hangs) is a failure of its own.
sluiced_stop() {
	if [ -n "$SL_PID" ]; then
		if sluiced_alive; then
			world_stop "$SL_PID" TERM 80
			sluiced_status "$WORLD_STOP_STATUS" "exit status after SIGTERM"
		else
			wait "$SL_PID"
			sluiced_status $? "died on its own"
		fi
	fi
	SL_PID="" SL_KEY=""
}

# sluiced_status STATUS WHAT: report an instance that did not end well, or
# whose log has a sanitizer report (UBSan goes on after one).
sluiced_status() {
	local san
	san=$(grep -m1 -E 'runtime error:|ERROR: [A-Za-z]+Sanitizer' "$SL_RUN/sluiced.log" 2>/dev/null)
	[ "$1" = 0 ] && [ "$2" != "died on its own" ] && [ -z "$san" ] && return 0
	if [ -n "$san" ]; then
		echo "FAIL sluiced.$SL_N: sanitizer: $san (log $SL_RUN/sluiced.log)"
	else
		echo "FAIL sluiced.$SL_N: $2: $1 (log $SL_RUN/sluiced.log)"
		tail -5 "$SL_RUN/sluiced.log" | sed 's/^/    log: /'
	fi
	nfail=$((nfail + 1))
}

sluiced_alive() { [ -n "$SL_PID" ] && kill -0 "$SL_PID" 2>/dev/null; }

# merge_map "k: v, ..." "k: v, ...": the first flow map's pairs, each
# replaced by the second's of the same key, then the second's new keys.
merge_map() {
	local kv k o1 out="" seen=" " dflt ovr
	IFS=',' read -ra dflt <<<"$1"
	IFS=',' read -ra ovr <<<"$2"
	for kv in "${dflt[@]}"; do
		k=${kv%%:*}; k=${k// /}
		for o1 in "${ovr[@]}"; do
			[ "$(printf '%s' "${o1%%:*}" | tr -d ' ')" = "$k" ] && kv=$o1
		done
		out="$out${out:+, }${kv#"${kv%%[! ]*}"}"
		seen="$seen$k "
	done
	for kv in "${ovr[@]}"; do
		k=${kv%%:*}; k=${k// /}
		[ -z "$k" ] && continue
		case "$seen" in *" $k "*) ;; *) out="$out${out:+, }${kv#"${kv%%[! ]*}"}" ;; esac
	done
	echo "$out"
}

# sluiced_start KEY: a fresh instance with its own run directory.
sluiced_start() {
	local key=$1 f
	sluiced_stop
	SL_N=$((SL_N + 1))
	SL_RUN=$WORK/sluiced.$SL_N
	mkdir -p "$SL_RUN/policy.d"
	cp "$top_srcdir/policy.d/default.yaml" "$SL_RUN/policy.d/"
	for f in "$POL_DIR"/*.yaml; do
		[ -e "$f" ] && cp "$f" "$SL_RUN/policy.d/"
	done
	if [ -n "$policy_yaml" ]; then
		printf '%s\n' "$policy_yaml" >"$SL_RUN/policy.d/$inline_name.yaml"
	fi
	cat >"$SL_RUN/sluiced.yaml" <<EOF
# generated by tests/integ/run.sh for scenario $scn
listen:
  transparent: ["0.0.0.0:15001", "[::]:15001"]
  proxy: ["198.18.0.1:3128"]
  dns: ["0.0.0.0:15053", "[::]:15053"]
  control: $SL_RUN/control.sock
resolvers: ["198.18.1.2:53"]
policy_dir: $SL_RUN/policy.d
state_dir: $SL_RUN/sbstate
upstream_ca: $CA
audit: {path: $SL_RUN/audit.jsonl, fsync: always}
workers: 2
timeouts: {$(merge_map "handshake: 5s, idle: 30s, connect: 3s, first_byte: 1s, drain: 3s" "$cfg_timeouts")}
sandboxes:
  - {id: sb1, sources: ["198.18.0.2", "fd00:5c::1:2"], policy: $sb1_policy}
EOF
	[ -z "$sb2_policy" ] || echo "  - {id: sb2, sources: [\"198.18.0.3\", \"fd00:5c::1:3\"], policy: $sb2_policy}" >>"$SL_RUN/sluiced.yaml"
	[ -z "$cfg_limits" ] || echo "limits: {$cfg_limits}" >>"$SL_RUN/sluiced.yaml"
	: >"$SL_RUN/audit.jsonl"
	if [ -n "$cfg_nofile" ]; then
		world_spawn "$NS_GW" "$SL_RUN/sluiced.log" prlimit --nofile="$cfg_nofile:$cfg_nofile" \
		    -- "$SLUICED" -c "$SL_RUN/sluiced.yaml"
	else
		world_spawn "$NS_GW" "$SL_RUN/sluiced.log" "$SLUICED" -c "$SL_RUN/sluiced.yaml"
	fi
	SL_PID=$SPAWNED
	if ! world_wait_listen "$NS_GW" 15001 50 || ! world_wait_listen "$NS_GW" 3128 10 ||
	    ! world_wait_listen "$NS_GW" 15053 10; then
		if sluiced_alive; then
			why="sluiced does not listen on 15001, 3128 and 15053 after 5 s"
			world_stop "$SL_PID" TERM 80
		else
			wait "$SL_PID"
			why="sluiced exited with status $? at start: $(tail -3 "$SL_RUN/sluiced.log" | tr '\n' ' ')"
		fi
		SL_PID="" SL_KEY=""
		return 1
	fi
	SL_KEY=$key
}

# ---------------------------------------------------------------- scenarios

scn_reset() {
	desc="" mode=daemon from=sb policy="" policy_yaml="" fresh=0
	cfg_limits="" cfg_timeouts="" cfg_nofile="" sb2_policy=""
	steps=client client="" timeout=8
	expect_exit="" expect_status="" expect_out="" expect_not_out=""
	expect_up="" expect_audit="" expect_log=""
	expect_dns_log="" expect_not_dns_log=""
}

SCN_KEYS=" PIPESTATUS BASH_LINENO _ desc mode from policy policy_yaml fresh cfg_limits cfg_timeouts cfg_nofile \
sb2_policy steps client timeout expect_exit \
expect_status expect_out expect_not_out expect_up expect_audit expect_log \
expect_dns_log expect_not_dns_log "

# scn_lint FILE: every variable the file sets must be a known key (a typo
# would otherwise drop an expectation silently).
scn_lint() {
	local v bad=""
	for v in $(comm -13 <(env -i bash -c 'compgen -v' | sort) \
	    <(env -i bash -c '. "$1" >/dev/null 2>&1; compgen -v' _ "$1" | sort)); do
		case "$SCN_KEYS" in *" $v "*) ;; *) bad="$bad $v" ;; esac
	done
	[ -z "$bad" ] || { echo "unknown key(s):$bad"; return 1; }
	case "$mode" in daemon|direct|nft) ;; *) echo "bad mode '$mode'"; return 1 ;; esac
	case "$from" in sb|sb2|up|gw) ;; *) echo "bad from '$from'"; return 1 ;; esac
	case "$timeout" in ''|*[!0-9]*) echo "bad timeout '$timeout'"; return 1 ;; esac
	case "$cfg_nofile" in *[!0-9]*) echo "bad cfg_nofile '$cfg_nofile'"; return 1 ;; esac
	return 0
}

# The client's namespace.
cns() {
	case "${1:-$from}" in
	sb2) echo "$NS_SB2" ;; up) echo "$NS_UP" ;; gw) echo "$NS_GW" ;; *) echo "$NS_SB" ;;
	esac
}

# run_client: runs $client, leaves $D/out (all output), $D/exit, $D/status.
# shellcheck disable=SC2120	# its arguments come from eval set -- $client
run_client() {
	eval "set -- $client" || { why="bad client line"; return 1; }
	client_exec "$(cns)" "$D/" "$@"
}

# client_exec NS PFX VERB ARGS...: one client action in namespace NS; leaves
# PFXout (all output), PFXexit, PFXstatus (and PFXbody, PFXerr).
client_exec() {
	local ns=$1 p=$2 verb=$3 host args
	shift 3
	: >"${p}body"; : >"${p}status"
	case "$verb" in
	curl)
		timeout $((timeout + 2)) ip netns exec "$ns" curl -sS \
		    --max-time "$timeout" --cacert "$CA" -o "${p}body" \
		    -w '%{http_code}\n' "$@" >"${p}status" 2>"${p}err"
		echo $? >"${p}exit"
		{ echo "status=$(cat "${p}status")"; cat "${p}err" "${p}body"; } >"${p}out" ;;
	s_client)
		host="" args=("$@")
		while [ $# -gt 0 ]; do
			case "$1" in
			-servername) host=$2; shift ;;
			-connect) [ -z "$host" ] && { host=${2%:*}; host=${host#[}; host=${host%]}; } ;;
			esac
			shift
		done
		printf 'GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$host" |
		    timeout "$timeout" ip netns exec "$ns" openssl s_client \
		    -CAfile "$CA" -verify_return_error -ign_eof "${args[@]}" >"${p}out" 2>&1
		echo $? >"${p}exit" ;;
	tcp|udp)
		timeout $((timeout + 2)) ip netns exec "$ns" "$PY" "$UPSTREAM_PY" \
		    "$verb" "$1" --timeout "$timeout" ${2+--send "$2"} "${@:3}" >"${p}out" 2>&1
		echo $? >"${p}exit" ;;
	raw)
		timeout $((timeout + 2)) ip netns exec "$ns" "$PY" "$UPSTREAM_PY" \
		    raw "$1" --timeout "$timeout" --send "$2" "${@:3}" >"${p}out" 2>&1
		echo $? >"${p}exit" ;;
	hello|dnsflood|conns)
		timeout $((timeout + 2)) ip netns exec "$ns" "$PY" "$UPSTREAM_PY" \
		    "$verb" "$1" --timeout "$timeout" "${@:2}" >"${p}out" 2>&1
		echo $? >"${p}exit" ;;
	dns)
		# the timeout is per message here: 1 s unless --timeout is given
		timeout $((timeout + 2)) ip netns exec "$ns" "$PY" "$UPSTREAM_PY" \
		    dns --timeout 1 "$@" >"${p}out" 2>&1
		echo $? >"${p}exit" ;;
	http-seq)
		timeout $((timeout + 2)) ip netns exec "$ns" "$PY" "$UPSTREAM_PY" \
		    http-seq --timeout "$timeout" "$@" >"${p}out" 2>&1
		echo $? >"${p}exit" ;;
	dig)
		timeout "$timeout" ip netns exec "$ns" dig +time=1 +tries=1 "$@" >"${p}out" 2>&1
		echo $? >"${p}exit" ;;
	sluiced-check)
		timeout "$timeout" ip netns exec "$NS_GW" "$SLUICED" -c "$SL_RUN/sluiced.yaml" \
		    --check >"${p}out" 2>&1
		echo $? >"${p}exit" ;;
	*)
		why="unknown client verb '$verb'"; return 1 ;;
	esac
	return 0
}

# client_step NAME PFX [NS] [has=T|lacks=T|exit=N]... [VERB ARGS...]: the
# namespace and the expectations of a do/spawn/join step, then (with VERB)
# the client action itself.  T: printf %b escapes (\x20 a space).
client_step() {
	local name=$1 p=$2 ns w t got
	local -a chk=()
	shift 2
	ns=$(cns)
	case "${1:-}" in sb|sb2|up|gw) ns=$(cns "$1"); shift ;; esac
	while [ $# -gt 0 ]; do
		case "$1" in
		has=*|lacks=*|exit=*) chk+=("$1"); shift ;;
		*) break ;;
		esac
	done
	if [ $# -gt 0 ]; then
		client_exec "$ns" "$p" "$@" || return 1
	fi
	[ -f "${p}out" ] || { why="$name: no output"; return 1; }
	for w in "${chk[@]}"; do
		t=$(printf '%b' "${w#*=}")
		case "$w" in
		has=*) grep -qF -- "$t" "${p}out" ||
			{ why="$name: output lacks '$t': $(head -c 600 "${p}out" | tr '\n' '|')"; return 1; } ;;
		lacks=*) grep -qF -- "$t" "${p}out" &&
			{ why="$name: output has '$t': $(head -c 600 "${p}out" | tr '\n' '|')"; return 1; } ;;
		exit=*) got=$(cat "${p}exit" 2>/dev/null)
			if [ "$t" = '!0' ]; then
				[ -n "$got" ] && [ "$got" != 0 ]
			else
				[ "$got" = "$t" ]
			fi || { why="$name: exit $got, want $t"; return 1; } ;;
		esac
	done
	return 0
}

# step WORDS...: one step; sets why and returns 1 on failure.
step() {
	local n=0 st id a=()
	case "$1" in
	client) run_client ;;
	sighup|sigterm)
		sluiced_alive || { why="$1: sluiced not running"; return 1; }
		if [ "$1" = sighup ]; then
			kill -HUP "$SL_PID"
			SL_KEY="dirty:$SL_KEY"
		else
			kill -TERM "$SL_PID"
		fi ;;
	policy)
		[ -f "$POL_DIR/$3" ] || { why="no policy file $3"; return 1; }
		SL_KEY="dirty:$SL_KEY"
		cp "$POL_DIR/$3" "$SL_RUN/policy.d/$2.yaml.tmp" &&
		    mv "$SL_RUN/policy.d/$2.yaml.tmp" "$SL_RUN/policy.d/$2.yaml" ||
		    { why="cannot install policy $3"; return 1; } ;;
	wait_log)
		shift
		while st=$(tail -c +"$wait_off" "$SL_RUN/sluiced.log" |
		    grep -Ebo -m1 -- "$*" | head -1 | cut -d: -f1); [ -z "$st" ]; do
			[ $n -ge 30 ] && { why="sluiced never logged /$*/"; return 1; }
			sleep 0.1; n=$((n + 1))
		done
		wait_off=$((wait_off + st + 1)) ;;
	wait_audit)
		shift
		"$PY" "$UPSTREAM_PY" audit "$SL_RUN/audit.jsonl" "$audit_off" \
		    --timeout 3 --expect "$*" >"$D/wait_audit.out" 2>&1 ||
		    { why="wait_audit: $(head -c 1500 "$D/wait_audit.out")"; return 1; } ;;
	alive)
		sluiced_alive || { why="sluiced is not running"; return 1; } ;;
	hold)
		id=${3:-1}
		[ -z "${HOLD_PIDS[$id]:-}" ] || { why="hold: $id is held already"; return 1; }
		rm -f "$D/held.$id" "$D/go.$id"
		a=()
		case "${4:-}" in
		'') ;;
		tls=?*) a=(--tls-name "${4#tls=}" --ca "$CA") ;;
		*) why="hold: bad option '$4'"; return 1 ;;
		esac
		ip netns exec "$(cns)" "$PY" "$UPSTREAM_PY" hold "$2" --ready "$D/held.$id" \
		    --go "$D/go.$id" "${a[@]}" >"$D/hold.$id.out" 2>&1 &
		HOLD_PIDS[$id]=$!
		world_wait_file "$D/held.$id" 50 || { why="hold $id: $(cat "$D/hold.$id.out")"; return 1; }
		grep -q '^first ok' "$D/hold.$id.out" || { why="hold $id: $(cat "$D/hold.$id.out")"; return 1; } ;;
	release)
		id=1 st=""
		shift
		for a in "$@"; do
			case "$a" in closed) st=closed ;; *) id=$a ;; esac
		done
		[ -n "${HOLD_PIDS[$id]:-}" ] || { why="release: $id is not held"; return 1; }
		touch "$D/go.$id"
		wait "${HOLD_PIDS[$id]}"; unset "HOLD_PIDS[$id]"
		if [ "$st" = closed ]; then
			if grep -q '^second ok' "$D/hold.$id.out"; then
				why="held connection $id still served, want it closed"
				return 1
			fi
		else
			grep -q '^second ok' "$D/hold.$id.out" ||
			    { why="release $id: $(tr '\n' ' ' <"$D/hold.$id.out")"; return 1; }
		fi ;;
	trip)
		case "${3:-}" in ok|reset|fail) ;; *) why="trip: want ok, reset or fail"; return 1 ;; esac
		timeout 6 ip netns exec "$(cns "${4:-}")" "$PY" "$UPSTREAM_PY" tcp "$2" --timeout 3 \
		    --send 'trip\n' >"$D/trip.out" 2>&1
		st=$(tr '\n' ' ' <"$D/trip.out")
		case "$3" in
		ok) grep -q "^recv b'trip" "$D/trip.out" ||
			{ why="trip $2 ${4:-}: no echo: $st"; return 1; } ;;
		reset) if grep -q '^recv' "$D/trip.out" || ! grep -q '^reset' "$D/trip.out"; then
			why="trip $2 ${4:-}: not reset: $st"; return 1
		fi ;;
		fail) grep -q '^recv' "$D/trip.out" &&
			{ why="trip $2 ${4:-}: echoed: $st"; return 1; } ;;
		esac
		return 0 ;;
	refused)
		# give a draining sluiced up to 2 s to close its listener
		while [ -n "$(in_ns "$NS_GW" ss -Hltn 'sport = :15001' 2>/dev/null)" ] && [ $n -lt 20 ]; do
			sleep 0.1; n=$((n + 1))
		done
		timeout 5 ip netns exec "$(cns)" "$PY" "$UPSTREAM_PY" tcp "$2" --timeout 2 \
		    --send 'refused?\n' >"$D/refused.out" 2>&1
		if grep -q '^recv' "$D/refused.out"; then
			why="new connection to $2 still served after SIGTERM"; return 1
		fi ;;
	exited)
		while sluiced_alive; do
			[ $n -ge 60 ] && { why="sluiced still running 6 s after SIGTERM"; return 1; }
			sleep 0.1; n=$((n + 1))
		done
		wait "$SL_PID"; st=$?
		SL_PID="" SL_KEY=""
		[ "$st" = "$2" ] || { why="sluiced exit status $st, want $2"; return 1; }
		if grep -qE 'runtime error:|ERROR: [A-Za-z]+Sanitizer' "$SL_RUN/sluiced.log"; then
			why="sanitizer report in $SL_RUN/sluiced.log"; return 1
		fi ;;
	do)
		shift
		DO_N=$((DO_N + 1))
		client_step "do $DO_N" "$D/do.$DO_N." "$@" ;;
	spawn)
		id=${2:-}
		[ -n "$id" ] && [ -z "${SPAWN_PIDS[$id]:-}" ] ||
		    { why="spawn: no ID or $id is running already"; return 1; }
		shift 2
		st=$(cns)
		case "${1:-}" in sb|sb2|up|gw) st=$(cns "$1"); shift ;; esac
		[ $# -gt 0 ] || { why="spawn $id: no client"; return 1; }
		rm -f "$D/spawn.$id.out"
		client_exec "$st" "$D/spawn.$id." "$@" &
		SPAWN_PIDS[$id]=$! ;;
	join)
		id=${2:-}
		[ -n "${SPAWN_PIDS[$id]:-}" ] || { why="join: $id was not spawned"; return 1; }
		wait "${SPAWN_PIDS[$id]}"; unset "SPAWN_PIDS[$id]"
		shift 2
		case "${1:-}" in has=*|lacks=*|exit=*|'') ;; *) why="join $id: bad check '$1'"; return 1 ;; esac
		client_step "join $id" "$D/spawn.$id." "$@" ;;
	dns_host)
		shift
		[ $# -ge 2 ] || { why="dns_host: want NAME ADDR..."; return 1; }
		world_dns_host "$@" 2>"$D/dns_host.err" ||
		    { why="dns_host $1 $2: $(cat "$D/dns_host.err")"; return 1; } ;;
	sleep) sleep "$2" ;;
	'') ;;
	*) why="unknown step '$1'"; return 1 ;;
	esac
}

# check: the expectations against what the steps left behind.
check() {
	local line got
	if [ -n "$expect_exit" ]; then
		got=$(cat "$D/exit" 2>/dev/null)
		case "$expect_exit" in
		'!0') [ -n "$got" ] && [ "$got" != 0 ] || { why="client exit $got, want non-zero"; return 1; } ;;
		*) [ "$got" = "$expect_exit" ] || { why="client exit $got, want $expect_exit"; return 1; } ;;
		esac
	fi
	if [ -n "$expect_status" ]; then
		got=$(cat "$D/status" 2>/dev/null)
		[ "$got" = "$expect_status" ] || { why="HTTP status $got, want $expect_status"; return 1; }
	fi
	while IFS= read -r line; do
		[ -z "$line" ] && continue
		grep -qF -- "$line" "$D/out" || { why="output lacks '$line'"; return 1; }
	done <<<"$expect_out"
	while IFS= read -r line; do
		[ -z "$line" ] && continue
		grep -qF -- "$line" "$D/out" && { why="output has '$line'"; return 1; }
	done <<<"$expect_not_out"
	if [ -n "$expect_audit" ]; then
		local a=()
		while IFS= read -r line; do
			[ -n "$line" ] && a+=(--expect "$line")
		done <<<"$expect_audit"
		"$PY" "$UPSTREAM_PY" audit "$SL_RUN/audit.jsonl" "$audit_off" "${a[@]}" \
		    >"$D/audit.check" 2>&1 || { why=$(head -c 1500 "$D/audit.check"); return 1; }
	fi
	if [ -n "$expect_up" ]; then
		"$PY" "$UPSTREAM_PY" expect "$STATE" "$D/snap.json" $expect_up \
		    >"$D/up.check" 2>&1 || { why=$(cat "$D/up.check"); return 1; }
	fi
	while IFS= read -r line; do
		[ -z "$line" ] && continue
		tail -c +"$log_off" "$SL_RUN/sluiced.log" | grep -Eq -- "$line" ||
		    { why="sluiced log lacks /$line/"; return 1; }
	done <<<"$expect_log"
	check_dns_log
}

# check_dns_log: expect_dns_log (waited for), then expect_not_dns_log,
# against dnsmasq's query log of the scenario.
check_dns_log() {
	local line n
	while IFS= read -r line; do
		[ -z "$line" ] && continue
		n=0
		until tail -c +"$dns_off" "$WORK/dnsmasq.log" | grep -Eiq -- "$line"; do
			[ $n -ge 30 ] && { why="dnsmasq's log lacks /$line/"; return 1; }
			sleep 0.1; n=$((n + 1))
		done
	done <<<"$expect_dns_log"
	while IFS= read -r line; do
		[ -z "$line" ] && continue
		tail -c +"$dns_off" "$WORK/dnsmasq.log" | grep -Ei -m1 -- "$line" >"$D/dns_log.hit" &&
		    { why="dnsmasq's log has /$line/: $(cat "$D/dns_log.hit")"; return 1; }
	done <<<"$expect_not_dns_log"
	return 0
}

# run_scenario FILE: one scenario; prints its PASS/FAIL line.
run_scenario() {
	local f=$1 key s rc
	scn=$(basename "$f" .scn)
	scn_reset
	why=""
	# shellcheck disable=SC1090
	if ! . "$f"; then
		why="cannot parse $f"
	else
		why=$(scn_lint "$f")
	fi
	D=$WORK/scn/$scn
	mkdir -p "$D"
	inline_name=""
	if [ -n "$policy_yaml" ]; then
		inline_name=$(printf '%s\n' "$policy_yaml" | sed -n 's/^name:[[:space:]]*\([A-Za-z0-9_.-]*\).*/\1/p' | head -1)
		[ -n "$inline_name" ] || why="policy_yaml has no name:"
	fi
	sb1_policy=${policy:-${inline_name:-agent}}
	if [ -z "$why" ]; then
		set_world_mode "$mode" || why="cannot set up world mode $mode"
	fi
	if [ -z "$why" ] && [ "$mode" = daemon ]; then
		key="$sb1_policy|$(printf '%s' "$policy_yaml" | cksum)|$cfg_limits|$cfg_timeouts|$sb2_policy|$cfg_nofile"
		if [ "$fresh" = 1 ] || [ "$key" != "$SL_KEY" ] || ! sluiced_alive; then
			sluiced_start "$key"
		fi
	fi
	if [ -z "$why" ]; then
		if [ -n "$SL_RUN" ] && [ "$mode" = daemon ]; then
			audit_off=$(wc -l <"$SL_RUN/audit.jsonl" 2>/dev/null || echo 0)
			log_off=$(($(wc -c <"$SL_RUN/sluiced.log") + 1))
		else
			audit_off=0 log_off=1
		fi
		wait_off=$log_off
		dns_off=$(($(wc -c <"$WORK/dnsmasq.log" 2>/dev/null || echo 0) + 1))
		DO_N=0
		"$PY" "$UPSTREAM_PY" snapshot "$STATE" >"$D/snap.json"
		IFS=';' read -ra ss <<<"$steps"
		for s in "${ss[@]}"; do
			set -f		# step words are not file names
			# shellcheck disable=SC2086
			step $s; rc=$?
			set +f
			if [ $rc != 0 ]; then
				[ -z "$why" ] && why="step '$s' failed"
				break
			fi
		done
		for s in "${!HOLD_PIDS[@]}"; do
			kill "${HOLD_PIDS[$s]}" 2>/dev/null; wait "${HOLD_PIDS[$s]}"
		done
		HOLD_PIDS=()
		for s in "${!SPAWN_PIDS[@]}"; do
			# a spawned client not joined: its own timeout ends it
			wait "${SPAWN_PIDS[$s]}"
		done
		SPAWN_PIDS=()
		[ -z "$why" ] && check
		if [ "$mode" = daemon ] && [ -n "$SL_PID" ] && ! sluiced_alive; then
			wait "$SL_PID"; s=$?
			SL_PID="" SL_KEY=""
			[ -z "$why" ] && why="sluiced died during the scenario (status $s)"
			sluiced_status "$s" "died on its own"
		fi
	fi
	if [ -z "$why" ]; then
		echo "PASS $scn"
		npass=$((npass + 1))
	else
		echo "FAIL $scn: $why"
		nfail=$((nfail + 1))
		[ -n "$desc" ] && echo "    ($desc)"
		if [ $verbose = 1 ]; then
			[ -f "$D/out" ] && sed 's/^/    out: /' "$D/out" | head -40
			[ -n "$SL_RUN" ] && [ -f "$SL_RUN/sluiced.log" ] &&
			    tail -c +"${log_off:-1}" "$SL_RUN/sluiced.log" | tail -20 | sed 's/^/    log: /'
		fi
		# a failed scenario may leave sluiced in any state
		[ "$mode" = daemon ] && SL_KEY="dirty:$SL_KEY"
	fi
}

selected() {
	local n=$1 p m
	m=$(sed -n 's/^mode=\([a-z]*\).*/\1/p' "$2" | tail -1)
	m=${m:-daemon}
	if [ $selftest = 1 ]; then
		[ "$m" = direct ] || [ "$m" = nft ] || return 1
	else
		[ "$m" = daemon ] || return 1
	fi
	[ ${#patterns[@]} = 0 ] && return 0
	for p in "${patterns[@]}"; do
		# shellcheck disable=SC2053
		[[ $n == $p ]] && return 0
	done
	return 1
}

n=0
for f in "$SCN_DIR"/*.scn; do
	[ -e "$f" ] || continue
	selected "$(basename "$f" .scn)" "$f" || continue
	run_scenario "$f"
	n=$((n + 1))
done
sluiced_stop
if [ $n = 0 ]; then
	echo "FAIL setup: no scenario selected"
	nfail=$((nfail + 1))
fi
echo "$npass passed, $nfail failed"
[ $nfail = 0 ]
