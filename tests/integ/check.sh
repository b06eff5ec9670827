# check.sh: what the namespace test scripts (ctl.sh, icpt.sh) share: the
# prologue (bash, paths, options -k -v -h, lib.sh), the work directory and
# its cleanup, the checks and their count.  Sourced first:
#	. "$(dirname "$0")/check.sh"
# then check_needs TOOL..., check_work NAME, the checks (check NAME CMD...)
# and, last, check_done.
# Hooks a script may define after sourcing: check_failed (a check failed,
# why is set: may add to it), check_verbose (with -v, after a FAIL line),
# cleanup_more (at exit, after world_down, before the work directory goes).
# shellcheck shell=bash disable=SC2034  # what is set here is read by the scripts

if [ -z "${BASH_VERSION:-}" ]; then
	command -v bash >/dev/null 2>&1 || { echo "SKIP: bash not found"; exit 77; }
	exec bash "$0" "$@"
fi
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$(cd "$here/../.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
SLUICED=${SLUICED:-$top_builddir/sluiced}
SLUICECTL=${SLUICECTL:-$top_builddir/sluicectl}
WORLD_SRCDIR=$top_srcdir	# read by lib.sh

keep=0 verbose=0
while [ $# -gt 0 ]; do
	case "$1" in
	-k|--keep) keep=1 ;;
	-v|--verbose) verbose=1 ;;
	-h|--help) sed -n '2,/^$/s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) echo "${0##*/}: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done

skip() { echo "SKIP: $*"; exit 77; }

# shellcheck source=tests/integ/lib.sh
. "$top_srcdir/tests/integ/lib.sh" || skip "cannot read lib.sh"
why=$(world_available) || skip "$why"

# check_needs TOOL...: skips unless every TOOL and python3 are there.
check_needs() {
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null 2>&1 || skip "$t not found"
	done
	[ -n "$PY" ] || skip "python3 not found"
}

check_failed() { :; }
check_verbose() { :; }
cleanup_more() { :; }

# check_work NAME: fails unless sluiced is built; makes the work directory
# WORK (sluice-NAME.*), removed at exit unless kept.
check_work() {
	npass=0 nfail=0
	if [ ! -x "$SLUICED" ]; then
		echo "FAIL setup: $SLUICED not built"
		echo "0 passed, 1 failed"
		exit 1
	fi
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-$1.XXXXXX") || exit 1
	CHECK_NAME=$1
	# what the sandbox received and the control API answered, for leaks.sh
	SEEN=$WORK/sandbox-received API_SEEN=$WORK/api-answers
	: >"$SEEN" && : >"$API_SEEN" || exit 1
	[ -n "${SLUICE_ARTIFACTS:-}" ] && rm -rf "${SLUICE_ARTIFACTS:?}/$1"
	SL_PID=""
	BG_PIDS=()
	trap cleanup EXIT
	trap 'echo "interrupted"; nfail=$((nfail + 1)); exit 1' INT TERM
}

cleanup() {
	local p
	trap - EXIT INT TERM
	for p in "${BG_PIDS[@]}"; do
		kill "$p" 2>/dev/null
	done
	world_down
	cleanup_more
	keep_artifacts
	if [ "$nfail" -gt 0 ] || [ "$keep" = 1 ]; then
		echo "work directory kept: $WORK" >&2
	else
		rm -rf "$WORK"
	fi
}

# keep_artifacts: with SLUICE_ARTIFACTS set (make check sets it), what
# sluiced wrote and what the sandbox and the API clients received are kept
# in $SLUICE_ARTIFACTS/NAME, with the secret values of the run
# (canary-values), for tests/integ/leaks.sh.
keep_artifacts() {
	local d f
	[ -n "${SLUICE_ARTIFACTS:-}" ] || return 0
	d=$SLUICE_ARTIFACTS/$CHECK_NAME
	mkdir -p "$d" || return 0
	for f in sluiced.log check.log audit.jsonl sandbox-received api-answers \
	    canary-values seal.log keygen.log; do
		[ -f "$WORK/$f" ] && cp "$WORK/$f" "$d/"
	done
}

# canary_secrets KEYDIR SECDIR NAME:HOST...: a gateway key pair in KEYDIR
# and, in SECDIR, secret NAME (version 1, a random value) bound to HOST,
# each sealed with the real sluicectl; the values go to
# $WORK/canary-values, one a line, for the leak scan.
canary_secrets() {
	local keys=$1 dir=$2 nh v
	shift 2
	mkdir -p "$dir" &&
	"$SLUICECTL" keygen --out "$keys" >>"$WORK/keygen.log" 2>&1 || return 1
	for nh in "$@"; do
		v="canary-$(head -c 12 /dev/urandom | base64 | tr -d '\n=' | tr '+/' '-_')/+%"
		printf '%s' "$v" | "$SLUICECTL" seal --pub "$keys/gateway.pub" \
		    --name "${nh%%:*}" --host "${nh#*:}" --secret-version 1 \
		    >"$dir/${nh%%:*}.sealed" 2>>"$WORK/seal.log" || return 1
		printf '%s\n' "$v" >>"$WORK/canary-values"
	done
}

setup_fail() {
	echo "FAIL setup: $*"
	nfail=$((nfail + 1))
	echo "$npass passed, $nfail failed"
	exit 1
}

# check NAME CMD...: runs CMD (which sets why on failure) and reports it.
check() {
	local name=$1
	shift
	# CHECKS="NAME..." (a debugging aid): run only those
	case " ${CHECKS:-$name} " in *" $name "*) ;; *) return 0 ;; esac
	why=""
	if "$@"; then
		echo "ok $name"
		npass=$((npass + 1))
	else
		check_failed "$@"
		echo "FAIL $name: ${why:-"$* failed"}"
		nfail=$((nfail + 1))
		if [ "$verbose" = 1 ]; then
			check_verbose
		fi
	fi
}

# check_done: the count, last; its status is the script's.
check_done() {
	echo "$npass passed, $nfail failed"
	[ "$nfail" = 0 ]
}

# audit_lines: the audit file's length, an offset for audit_has.
audit_lines() { wc -l <"$AUDIT"; }

# audit_has OFFSET 'k=v ...'...: records written after line OFFSET (waited
# for, 3 s; '#N k=v' wants exactly N; 'k=~RE' a regular expression).
audit_has() {
	local off=$1 e o
	local -a a=()
	shift
	for e in "$@"; do a+=(--expect "$e"); done
	o=$("$PY" "$UPSTREAM_PY" audit "$AUDIT" "$off" --timeout 3 "${a[@]}" 2>&1) ||
	    { why=$(short "$o"); return 1; }
}

now() { date +%s.%N; }

# ---------------------------------------------------------------- shared by icpt.sh and secrets.sh
# They read WORK, SOCK, STATE, PY, UPSTREAM_PY and set last, out, why.

st=""

# api METHOD PATH [BODY]: one request on the control socket; sets st and
# out (the body).
api() {
	local -a d=()
	[ $# -ge 3 ] && d=(--data-binary "$3")
	last="$1 $2"
	st=$(curl -sS --max-time 10 --unix-socket "$SOCK" -X "$1" -H 'Expect:' \
	    -o "$WORK/api.b" -w '%{http_code}' "${d[@]}" "http://sluice$2" 2>"$WORK/api.e") ||
	    st="curl-error:$(short "$(cat "$WORK/api.e")")"
	out=$(cat "$WORK/api.b" 2>/dev/null)
	printf '%s\n' "$out" >>"$API_SEEN"
}

# in_sb CMD...: CMD in the sandbox sb (30 s at most).
in_sb() { timeout 30 ip netns exec "$NS_SB" "$@"; }

cst="" cexit="" chdrs="" cerr=""
# hc [CURL-ARGS...] URL: curl from sb trusting box's CA only (at most
# HC_MAX seconds, default 8), with the script's RESOLVE array; sets cst
# (the status), cexit, chdrs (response heads), cerr (stderr); the body is
# in $WORK/c.b.  What the sandbox got is also appended to $SEEN for the
# leak scan.
hc() {
	last="curl $*"
	rm -f "$WORK/c.h" "$WORK/c.b"
	cst=$(in_sb curl -sS --max-time "${HC_MAX:-8}" --cacert "$BOX_CA" "${RESOLVE[@]}" \
	    -D "$WORK/c.h" -o "$WORK/c.b" -w '%{http_code}' "$@" 2>"$WORK/c.e")
	cexit=$?
	chdrs=$(tr -d '\r' <"$WORK/c.h" 2>/dev/null)
	cerr=$(cat "$WORK/c.e")
	cat "$WORK/c.h" "$WORK/c.b" "$WORK/c.e" >>"$SEEN" 2>/dev/null
	out="$cst $(head -c 400 "$WORK/c.b" 2>/dev/null) $(tail -3 "$WORK/c.e")"
}

# cwant CODE [JQ...]: the last curl got CODE and its JSON body passes each test.
cwant() {
	local code=$1 t
	shift
	[ "$cst" = "$code" ] ||
	    { why="$last: status $cst (exit $cexit), want $code: $(short "$(head -c 300 "$WORK/c.b" 2>/dev/null) $(tail -2 "$WORK/c.e")")"; return 1; }
	for t in "$@"; do
		jq -e "$t" "$WORK/c.b" >/dev/null 2>&1 ||
		    { why="$last: $cst, but not ($t): $(short "$(head -c 400 "$WORK/c.b")")"; return 1; }
	done
}

# denied RULE REASON: the last curl got sluice's 403 (rule "null": none).
denied() {
	local r=".rule == \"$1\""
	[ "$1" = null ] && r='.rule == null'
	cwant 403 '.error == "denied"' "$r" ".reason == \"$2\"" '.message | type == "string"' \
	    '.host | type == "string"' '.policy | type == "string"' || return 1
	# an agent reads why (RFC 9209), not only a status
	grep -qiF "proxy-status: sluice; error=http_request_denied; details=\"$2\"" <<<"$chdrs" ||
	    { why="$last: Proxy-Status: $(grep -i '^proxy-status' <<<"$chdrs")"; return 1; }
}

# The upstreams' view: snap before, then upx 'NAME.FIELD=VALUE ...' (see
# upstream.py expect) and upreqs NAME (the requests it got since, JSON).
snap() { "$PY" "$UPSTREAM_PY" snapshot "$STATE" >"$WORK/snap.json"; }
upx() {
	local o
	o=$("$PY" "$UPSTREAM_PY" expect "$STATE" "$WORK/snap.json" "$*" 2>&1) ||
	    { why="${last:+$last: }$o"; return 1; }
}
upreqs() { "$PY" "$UPSTREAM_PY" requests "$STATE" "$WORK/snap.json" "$1"; }
# upwant NAME JQ...: each test holds over the requests NAME got since snap
upwant() {
	local n=$1 t r
	shift
	r=$(upreqs "$n")
	for t in "$@"; do
		jq -e "$t" >/dev/null 2>&1 <<<"$r" ||
		    { why="${last:+$last: }upstream $n: not ($t): $(short "$(jq -c 'map({method, path, headers, body_sha256, body_bytes})' <<<"$r")")"; return 1; }
	done
}
# sanitizer: the first sanitizer report in sluiced's log and its first
# frame, or nothing
sanitizer() {
	grep -m1 -A2 -E 'runtime error:|ERROR: [A-Za-z]+Sanitizer' "$WORK/sluiced.log" |
	    grep -vE '^(READ|WRITE) of' | tr '\n' ' ' | head -c 300
}

# ---------------------------------------------------------------- one sluiced for the run
# They read WORK, SOCK, NS_GW and set SL_PID, T_START (start) and st, out.

# daemon_start: sluiced -c $WORK/sluiced.yaml in gw, waited for (its
# transparent port and control socket), or the run fails.
daemon_start() {
	world_spawn "$NS_GW" "$WORK/sluiced.log" "$SLUICED" -c "$WORK/sluiced.yaml"
	SL_PID=$SPAWNED
	world_wait_listen "$NS_GW" 15001 100 && world_wait_file "$SOCK" 50 ||
	    setup_fail "sluiced did not start: $(tail -3 "$WORK/sluiced.log" | tr '\n' ' ')"
	# the monitor holds the sockets; the worker answers once it serves
	api GET /v1/status
	[ "$st" = 200 ] || setup_fail "sluiced does not serve: $st $(tail -3 "$WORK/sluiced.log" | tr '\n' ' ')"
	T_START=$(date +%s)
}
# register_box POLICY: sandbox "box" (sb's addresses) through the API; its
# CA goes to $BOX_CA.
register_box() {
	api POST /v1/sandboxes "{\"id\":\"box\",\"sources\":[\"198.18.0.2\",\"fd00:5c::1:2\"],\"policy\":\"$1\"}"
	[ "$st" = 201 ] || setup_fail "registering box: $st $(short "$out")"
	jq -j .ca_pem <<<"$out" >"$BOX_CA"
}
# daemon_same: the sluiced of daemon_start still runs, never restarted
daemon_same() {
	kill -0 "$SL_PID" 2>/dev/null || { why="sluiced ($SL_PID) is gone: $(sanitizer)"; return 1; }
	api GET /v1/status
	[ "$st" = 200 ] && [ "$(jq -r .uptime_s <<<"$out")" -ge $(( $(date +%s) - T_START - 1 )) ] ||
	    { why="status $st, uptime $(jq -r .uptime_s <<<"$out" 2>/dev/null): restarted?"; return 1; }
	# a worker that crashed was replaced by the monitor: that is a crash too
	[ "$(jq '.processes[] | select(.role == "worker") | .restarts' <<<"$out")" = 0 ] ||
	    { why="the worker process was restarted: $(sanitizer)"; return 1; }
}
# daemon_ends: SIGTERM ends it with status 0 and no sanitizer report
daemon_ends() {
	local san
	world_stop "$SL_PID" TERM 80
	san=$(sanitizer)
	[ -z "$san" ] || { why="sanitizer: $san"; return 1; }
	[ "$WORLD_STOP_STATUS" = 0 ] || { why="exit status $WORLD_STOP_STATUS after SIGTERM: $(tail -3 "$WORK/sluiced.log" | tr '\n' ' ')"; return 1; }
}
