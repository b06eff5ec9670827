#!/bin/sh
# watch.sh: policies and secrets picked up live from folders laid out as a
# Kubernetes ConfigMap and Secret volume (issue 20's DaemonSet): files are
# links into ..data, and an update makes a new folder and swaps the ..data
# link by a rename, as kubelet's atomic writer does.  No namespaces: one
# sluiced on loopback, judged through its control socket and audit trail.
#
#   k8s_start          the start reads both folders through their links
#   k8s_secret_swap    a swapped Secret volume: the new version in force,
#                      secret_rotate cause=file
#   k8s_policy_swap    a swapped ConfigMap (watch_policies: true): the new
#                      revision, policy_change cause=watch
#   k8s_policy_added   a key added to the ConfigMap: a new policy
#   k8s_policy_broken  a broken policy swapped in: refused, the revision in
#                      force stays, reloads_total{result="failed"} counts
#                      it; fixed, it applies
#   link_outside       a secret file linking out of the folder is refused
#                      with a reason, the version in force stays
#   watch_off          watch_policies absent: a changed file waits for
#                      SIGHUP, whose records say cause=sighup
# Output: "ok NAME" or "FAIL NAME: why" per check, then "N passed, N failed".

# shellcheck source=tests/integ/check.sh
. "$(dirname "$0")/check.sh"

check_needs timeout jq curl
check_work watch
WORLD_PIDS="" WORLD_CREATED=""	# no namespaces here
short() { printf "%s" "$1" | tr "\n" " " | head -c 600; }

KEYS=$WORK/keys SECDIR=$WORK/secrets POLDIR=$WORK/policy.d
SOCK=$WORK/control.sock AUDIT=$WORK/audit.jsonl API_SEEN=$WORK/api.seen
SRC=$WORK/src
mkdir -p "$SECDIR" "$POLDIR" "$SRC/sec" "$SRC/pol" && chmod 700 "$SECDIR" "$POLDIR"
"$SLUICECTL" keygen --out "$KEYS" >"$WORK/keygen.log" 2>&1 ||
    setup_fail "sluicectl keygen: $(tail -1 "$WORK/keygen.log")"

# seal NAME VERSION [DIR]: a sealed secret into DIR (the Secret's source)
seal() {
	printf 'v-%s' "$2" | "$SLUICECTL" seal --pub "$KEYS/gateway.pub" \
	    --name "$1" --secret-version "$2" --host api.example.test \
	    --out "${3:-$SRC/sec}/$1.sealed" >>"$WORK/keygen.log" 2>&1
}
# policy NAME DOMAIN: a policy into the ConfigMap's source
policy() {
	printf 'name: %s\negress:\n  default: deny\n  allow:\n    - domain: %s\n' \
	    "$1" "$2" >"$SRC/pol/$1.yaml"
}
# publish DIR SRC: kubelet's atomic writer: SRC's files into a new hidden
# folder, a ..data_tmp link to it renamed over ..data, a link for each new
# file, the links of files gone removed, then the old folder
publish() {
	local dir=$1 src=$2 ts old f
	ts="..$(date +%Y_%m_%d_%H_%M_%S.%N)"
	mkdir "$dir/$ts" && cp "$src"/* "$dir/$ts/" && chmod 400 "$dir/$ts"/* || return 1
	old=$(readlink "$dir/..data" 2>/dev/null)
	ln -s "$ts" "$dir/..data_tmp" && mv -T "$dir/..data_tmp" "$dir/..data" || return 1
	for f in "$src"/*; do
		f=${f##*/}
		[ -L "$dir/$f" ] || ln -s "..data/$f" "$dir/$f" || return 1
	done
	for f in "$dir"/*; do
		[ -e "$f" ] || rm -f "$f"
	done
	[ -z "$old" ] || rm -rf "${dir:?}/$old"
}

# config [LINE...]: sluiced.yaml with the extra lines
config() {
	{
		cat <<-C
		listen:
		  transparent: ["127.0.0.1:15101"]
		  control: $SOCK
		resolvers: ["127.0.0.1:53"]
		policy_dir: $POLDIR
		state_dir: $WORK/state
		secret_dir: $SECDIR
		gateway_key: $KEYS/gateway.key
		audit: {path: $AUDIT, fsync: always}
		workers: 1
		C
		printf '%s\n' "$@"
	} >"$WORK/sluiced.yaml"
}
start() {
	"$SLUICED" -c "$WORK/sluiced.yaml" >>"$WORK/sluiced.log" 2>&1 &
	SL_PID=$!
	WORLD_PIDS="$WORLD_PIDS $SL_PID"
	world_wait_file "$SOCK" 100 ||
	    setup_fail "sluiced did not start: $(tail -3 "$WORK/sluiced.log" | tr '\n' ' ')"
}
stop() {
	world_stop "$SL_PID" TERM 80
	san=$(sanitizer)
	[ -z "$san" ] || { why="sanitizer: $san"; return 1; }
	[ "$WORLD_STOP_STATUS" = 0 ] || { why="exit status $WORLD_STOP_STATUS: $(tail -3 "$WORK/sluiced.log" | tr '\n' ' ')"; return 1; }
}
# wait_jq PATH JQ: the API's answer at PATH passes JQ (3 s at most)
wait_jq() {
	local i
	for i in $(seq 30); do
		api GET "$1"
		[ "$st" = 200 ] && jq -e "$2" >/dev/null 2>&1 <<<"$out" && return 0
		sleep 0.1
	done
	why="GET $1: $st, not ($2): $(short "$out")"
	return 1
}
revision() { api GET "/v1/policies/$1"; jq -r .revision <<<"$out" 2>/dev/null; }

seal tok 1 && policy agent a.example.test && policy default none.example.test ||
    setup_fail "sealing: $(tail -1 "$WORK/keygen.log")"
publish "$SECDIR" "$SRC/sec" && publish "$POLDIR" "$SRC/pol" ||
    setup_fail "cannot lay out the volumes"
config "watch_policies: true"
start

k8s_start() {
	[ -L "$SECDIR/tok.sealed" ] && [ -L "$POLDIR/agent.yaml" ] ||
	    { why="the volumes are not made of links"; return 1; }
	wait_jq /v1/secrets/tok '.version == 1' &&
	wait_jq /v1/policies/agent '.revision == 1'
}
k8s_secret_swap() {
	local off
	off=$(audit_lines)
	seal tok 2 && publish "$SECDIR" "$SRC/sec" || { why="publish failed"; return 1; }
	wait_jq /v1/secrets/tok '.version == 2' || return 1
	audit_has "$off" 'type=secret_rotate secret=tok version=2 previous_version=1 cause=file'
}
k8s_policy_swap() {
	local off
	off=$(audit_lines)
	policy agent b.example.test && publish "$POLDIR" "$SRC/pol" || { why="publish failed"; return 1; }
	wait_jq /v1/policies/agent '.revision == 2' || return 1
	audit_has "$off" 'type=policy_change policy=agent revision=2 previous_revision=1 cause=watch'
}
k8s_policy_added() {
	policy extra c.example.test && publish "$POLDIR" "$SRC/pol" || { why="publish failed"; return 1; }
	wait_jq /v1/policies/extra '.revision == 1'
}
k8s_policy_broken() {
	local i failed
	printf 'name: agent\negress: [\n' >"$SRC/pol/agent.yaml"
	publish "$POLDIR" "$SRC/pol" || { why="publish failed"; return 1; }
	for i in $(seq 30); do
		api GET /metrics
		failed=$(sed -n 's/^sluice_reloads_total{result="failed"} //p' <<<"$out")
		[ "${failed:-0}" -ge 1 ] && break
		sleep 0.1
	done
	[ "${failed:-0}" -ge 1 ] || { why="no failed reload counted: $(grep reloads_total <<<"$out" | tr '\n' ' ')"; return 1; }
	[ "$(revision agent)" = 2 ] || { why="the broken policy replaced revision 2: $(short "$out")"; return 1; }
	grep -q 'agent.yaml:[0-9]*' "$WORK/sluiced.log" ||
	    { why="the log does not name the file and line: $(grep reload "$WORK/sluiced.log" | tail -2 | tr '\n' ' ')"; return 1; }
	policy agent d.example.test && publish "$POLDIR" "$SRC/pol" || { why="publish failed"; return 1; }
	wait_jq /v1/policies/agent '.revision == 3'
}
link_outside() {
	local off
	off=$(audit_lines)
	mkdir -p "$WORK/outside" && seal tok 9 "$WORK/outside" || { why="sealing failed"; return 1; }
	ln -sfn "$WORK/outside/tok.sealed" "$SECDIR/.tmp" && mv -T "$SECDIR/.tmp" "$SECDIR/tok.sealed" ||
	    { why="cannot place the link"; return 1; }
	audit_has "$off" 'type=secret_refused error=~symbolic.link.out.of.the.folder' || return 1
	wait_jq /v1/secrets/tok '.version == 2' || return 1
	# the volume's own link again (a refused file would stop a start)
	ln -sfn ..data/tok.sealed "$SECDIR/.tmp" && mv -T "$SECDIR/.tmp" "$SECDIR/tok.sealed"
}
check k8s_start k8s_start
check k8s_secret_swap k8s_secret_swap
check k8s_policy_swap k8s_policy_swap
check k8s_policy_added k8s_policy_added
check k8s_policy_broken k8s_policy_broken
check link_outside link_outside

watch_off() {
	local off
	stop || return 1
	config
	start
	wait_jq /v1/policies/agent '.revision == 1' || return 1
	off=$(audit_lines)
	policy agent e.example.test && publish "$POLDIR" "$SRC/pol" || { why="publish failed"; return 1; }
	sleep 1
	[ "$(revision agent)" = 1 ] || { why="without watch_policies the change applied by itself"; return 1; }
	kill -HUP "$SL_PID"
	wait_jq /v1/policies/agent '.revision == 2' || return 1
	audit_has "$off" 'type=policy_change policy=agent revision=2 previous_revision=1 cause=sighup' || return 1
	! "$PY" -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("type") == "policy_change" and r.get("cause") == "sighup" and "uid" in r: sys.exit(0)
sys.exit(1)' "$AUDIT" || { why="a SIGHUP record names a uid"; return 1; }
	stop
}
check watch_off watch_off

check_done
