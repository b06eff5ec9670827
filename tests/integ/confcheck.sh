#!/bin/sh
# confcheck.sh: sluiced --check catches what would make the start fail or
# the gateway misbehave later (issue 20), with file:line, and prints the
# start's own warnings; the start refuses the same configurations.  No
# network: only configurations and the two programs.
#
#   check_ok            a sound configuration: exit 0, "ok"
#   check_user          'user' names no user: exit 1, sluiced.yaml:LINE
#   check_group         'control_group' names no group
#   check_upstream_ca   'upstream_ca' cannot be read
#   check_secret_missing  an inject rule names a secret not in secret_dir:
#                       a warning with policy file:line and the rule (a
#                       secret may arrive live later)
#   check_secret_unbound  its secret is bound to other hosts: a warning
#   check_warnings      'user: root', a secret_dir others may write:
#                       warnings, exit 0 (none for a secret_dir mounted
#                       read-only; none for root without 'user' when the
#                       user sluice, the default, exists)
#   start_refuses       the start stops on the same errors, naming them
#   log_json            log: {format: json}: one JSON object a line
#   log_journal         stderr is the journal: priority prefixes, no time
#   notify_protocol     Type=notify: READY, RELOADING then READY, WATCHDOG,
#                       STOPPING, as sd_notify(3) says
#   unit_hardened       contrib/systemd/sluiced.service: systemd-analyze
#                       security rates it at most 2.0 ("OK")
#   monitoring_rules    contrib/monitoring: promtool check rules, and
#                       promtool test rules (each alert fires on its series)
#   kubernetes_manifests  contrib/kubernetes/sluice.yaml, offline
#                       (k8scheck.py: fields, references, security context,
#                       mounts behind sluiced.yaml's paths), and its
#                       sluiced.yaml and policies pass sluiced --check; a
#                       manifest whose policies would not apply live fails
# Output: "ok NAME" or "FAIL NAME: why" per check, then "N passed, N failed".

# shellcheck source=tests/integ/check.sh
. "$(dirname "$0")/check.sh"

check_needs timeout jq
check_work confcheck
WORLD_PIDS="" WORLD_CREATED=""	# no namespaces here
short() { printf "%s" "$1" | tr "\n" " " | head -c 600; }

KEYS=$WORK/keys SECDIR=$WORK/secrets POLDIR=$WORK/policy.d
mkdir -p "$SECDIR" "$POLDIR" && chmod 700 "$SECDIR" "$POLDIR"
cp "$top_srcdir/policy.d/default.yaml" "$POLDIR/"
"$SLUICECTL" keygen --out "$KEYS" >"$WORK/keygen.log" 2>&1 ||
    setup_fail "sluicectl keygen: $(tail -1 "$WORK/keygen.log")"
printf 'v-1' | "$SLUICECTL" seal --pub "$KEYS/gateway.pub" --name tok \
    --host api.example.test --out "$SECDIR/tok.sealed" >>"$WORK/keygen.log" 2>&1 ||
    setup_fail "sluicectl seal: $(tail -1 "$WORK/keygen.log")"
chmod 600 "$SECDIR/tok.sealed"

# policy SECRET HOST: the inject policy, its rule on line 7
policy() {
	cat >"$POLDIR/agent.yaml" <<-P
	name: agent
	egress:
	  default: deny
	  allow:
	    - domain: $2
	intercept:
	  - name: token
	    match: {host: $2, path: /v1/**}
	    inject:
	      set: {authorization: "Bearer {{secret:$1}}"}
	P
}
# config [LINE...]: sluiced.yaml, the extra lines after the fixed ones
config() {
	{
		cat <<-C
		listen:
		  transparent: ["127.0.0.1:15001"]
		  control: $WORK/control.sock
		resolvers: ["127.0.0.1:53"]
		policy_dir: $POLDIR
		state_dir: $WORK/state
		secret_dir: $SECDIR
		gateway_key: $KEYS/gateway.key
		C
		printf '%s\n' "$@"
	} >"$WORK/sluiced.yaml"
}
# run_check: sluiced --check; sets rc and out
run_check() {
	last="sluiced --check"
	out=$(timeout 20 "$SLUICED" -c "$WORK/sluiced.yaml" --check 2>&1)
	rc=$?
}
# want_check RC TEXT...: the exit status, and each TEXT in the output
want_check() {
	local t want=$1
	shift
	run_check
	[ "$rc" = "$want" ] || { why="exit $rc, want $want: $out"; return 1; }
	for t in "$@"; do
		grep -qF -- "$t" <<<"$out" || { why="no '$t' in: $out"; return 1; }
	done
}

check_ok() {
	policy tok api.example.test
	config "user: nobody" "upstream_ca: /etc/ssl/certs/ca-certificates.crt"
	want_check 0 ": ok (" || return 1
	! grep -q '^warning:' <<<"$out" || { why="warnings for a sound configuration: $out"; return 1; }
}
check_user() {
	config "user: no-such-user-sluice"
	want_check 1 "sluiced.yaml:9: 'user': no user named 'no-such-user-sluice'"
}
check_group() {
	config "user: nobody" "control_group: no-such-group-sluice"
	want_check 1 "sluiced.yaml:10: 'control_group': no group named 'no-such-group-sluice'"
}
check_upstream_ca() {
	config "user: nobody" "upstream_ca: $WORK/missing-ca.pem"
	want_check 1 "sluiced.yaml:10: 'upstream_ca': cannot read $WORK/missing-ca.pem"
}
check_secret_missing() {
	policy nosuch api.example.test
	config "user: nobody"
	want_check 0 "warning: " "agent.yaml:7: intercept:token: the secret 'nosuch' is not in secret_dir"
}
check_secret_unbound() {
	policy tok other.example.test
	config "user: nobody"
	want_check 0 "warning: " "agent.yaml:7: intercept:token: the secret 'tok' is bound to other hosts than other.example.test"
}
check_warnings() {
	policy tok api.example.test
	config
	chmod 777 "$SECDIR"
	run_check
	chmod 700 "$SECDIR"
	[ "$rc" = 0 ] || { why="exit $rc: $out"; return 1; }
	if getent passwd sluice >/dev/null; then
		! grep -q "^warning: .*'user'" <<<"$out" ||
		    { why="a warning about 'user' though the default user exists: $out"; return 1; }
	fi
	grep -q "^warning: .*sluiced.yaml:7: secret_dir $SECDIR may be written by group or others" <<<"$out" ||
	    { why="no warning for a secret_dir others may write: $out"; return 1; }
	config "user: root"
	run_check
	[ "$rc" = 0 ] || { why="user root: exit $rc: $out"; return 1; }
	grep -q "^warning: .*sluiced.yaml:9: 'user: root': the worker that parses every sandbox byte" <<<"$out" ||
	    { why="no warning for 'user: root': $out"; return 1; }
	config
	# the same folder mounted read-only, as a Kubernetes Secret volume
	# (mode 1777 there): nobody can write it, no warning
	chmod 1777 "$SECDIR" && mount --bind "$SECDIR" "$SECDIR" &&
	    mount -o remount,bind,ro "$SECDIR" || { chmod 700 "$SECDIR"; why="cannot mount read-only"; return 1; }
	run_check
	umount "$SECDIR"
	chmod 700 "$SECDIR"
	[ "$rc" = 0 ] || { why="read-only: exit $rc: $out"; return 1; }
	! grep -q "secret_dir .* may be written" <<<"$out" ||
	    { why="a warning for a read-only secret_dir: $out"; return 1; }
}
start_refuses() {
	config "user: nobody" "upstream_ca: $WORK/missing-ca.pem"
	out=$(timeout 20 "$SLUICED" -c "$WORK/sluiced.yaml" 2>&1)
	rc=$?
	[ "$rc" != 0 ] && grep -qF "'upstream_ca': cannot read" <<<"$out" ||
	    { why="the start: exit $rc: $(short "$out")"; return 1; }
	[ ! -e "$WORK/control.sock" ] || { why="it started anyway"; return 1; }
}

# start_log EXTRA_ENV...: sluiced started on the configuration (a
# loopback listener), its stderr in $WORK/run.log, until it runs; then
# SIGTERM.  Sets rc (its exit status).
start_log() {
	local i pid
	: >"$WORK/run.log"
	env "$@" "$SLUICED" -c "$WORK/sluiced.yaml" 2>>"$WORK/run.log" &
	pid=$!
	for i in $(seq 1 100); do
		grep -q 'running' "$WORK/run.log" && break
		sleep 0.1
	done
	kill -TERM "$pid" 2>/dev/null
	wait "$pid"
	rc=$?
}
LISTEN_PORT=$((25000 + $$ % 5000))
# one JSON object a line: ts, prog, comp, level, msg
log_json() {
	policy tok api.example.test
	config "log: {format: json}"
	sed -i "s|127.0.0.1:15001|127.0.0.1:$LISTEN_PORT|" "$WORK/sluiced.yaml"
	start_log
	[ "$rc" = 0 ] || { why="exit $rc: $(short "$(cat "$WORK/run.log")")"; return 1; }
	jq -e -s 'length > 1 and all(.[]; (.ts | test("^20[0-9-]{8}T[0-9:.]{12}Z$")) and
	    .prog == "sluiced" and (.comp | type == "string") and
	    (.level | IN("error", "warning", "info", "debug")) and (.msg | type == "string"))' \
	    "$WORK/run.log" >/dev/null ||
	    { why="not one JSON object a line: $(short "$(head -c 600 "$WORK/run.log")")"; return 1; }
	jq -e -s 'any(.[]; .comp == "daemon" and .level == "info" and (.msg | test("running")))' \
	    "$WORK/run.log" >/dev/null || { why="no 'running' line: $(short "$(cat "$WORK/run.log")")"; return 1; }
}
# stderr is the journal: a priority prefix, no time (journald adds it)
log_journal() {
	config "user: root"	# for a warning
	sed -i "s|127.0.0.1:15001|127.0.0.1:$LISTEN_PORT|" "$WORK/sluiced.yaml"
	: >"$WORK/run.log"
	start_log JOURNAL_STREAM="$(stat -c '%d:%i' "$WORK/run.log")"
	[ "$rc" = 0 ] || { why="exit $rc: $(short "$(cat "$WORK/run.log")")"; return 1; }
	grep -q '^<6>sluiced\[daemon\] info: sluiced .* running' "$WORK/run.log" &&
	    grep -q '^<4>sluiced\[config\] warning: ' "$WORK/run.log" &&
	    ! grep -qv '^<[3467]>' "$WORK/run.log" ||
	    { why="not journal lines: $(short "$(head -c 600 "$WORK/run.log")")"; return 1; }
	# not the journal: text, with the time
	start_log JOURNAL_STREAM=1:1
	grep -q '^20[0-9-]*T[0-9:.]*Z sluiced\[daemon\] info: ' "$WORK/run.log" ||
	    { why="text lines: $(short "$(head -c 300 "$WORK/run.log")")"; return 1; }
}

# Type=notify: READY once it serves, RELOADING then READY on SIGHUP,
# WATCHDOG=1 every half period, STOPPING on SIGTERM (sd_notify(3))
notify_protocol() {
	local lis pid i
	policy tok api.example.test
	config
	sed -i "s|127.0.0.1:15001|127.0.0.1:$LISTEN_PORT|" "$WORK/sluiced.yaml"
	rm -f "$WORK/notify.sock" "$WORK/notify.out"
	"$PY" - "$WORK/notify.sock" >"$WORK/notify.out" 2>&1 <<-'P' &
	import socket, sys, time
	s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
	s.bind(sys.argv[1])
	s.settimeout(8)
	end = time.time() + 8
	while time.time() < end:
	    try:
	        m = s.recv(4096).decode()
	    except socket.timeout:
	        break
	    print(m.replace("\n", "|"), flush=True)
	    if m.startswith("STOPPING=1"):
	        break
	P
	lis=$!
	for i in $(seq 1 50); do [ -S "$WORK/notify.sock" ] && break; sleep 0.1; done
	NOTIFY_SOCKET=$WORK/notify.sock WATCHDOG_USEC=400000 "$SLUICED" -c "$WORK/sluiced.yaml" 2>"$WORK/run.log" &
	pid=$!
	for i in $(seq 1 50); do grep -q '^READY=1' "$WORK/notify.out" && break; sleep 0.1; done
	kill -HUP "$pid"
	sleep 1
	kill -TERM "$pid"
	wait "$pid"
	rc=$?
	wait "$lis"
	[ "$rc" = 0 ] || { why="exit $rc: $(short "$(cat "$WORK/run.log")")"; return 1; }
	grep -q '^READY=1|STATUS=serving: ' "$WORK/notify.out" &&
	    grep -q '^RELOADING=1|MONOTONIC_USEC=[0-9][0-9]*$' "$WORK/notify.out" &&
	    [ "$(grep -c '^READY=1' "$WORK/notify.out")" -ge 2 ] &&
	    [ "$(grep -c '^WATCHDOG=1$' "$WORK/notify.out")" -ge 2 ] &&
	    [ "$(tail -1 "$WORK/notify.out")" = 'STOPPING=1|STATUS=draining' ] ||
	    { why="the service manager heard: $(tr '\n' ' ' <"$WORK/notify.out")"; return 1; }
	# READY comes after RELOADING on the reload
	awk '/^RELOADING=1/ { r = NR } /^READY=1/ && r && NR > r { ok = 1 } END { exit !ok }' "$WORK/notify.out" ||
	    { why="no READY after RELOADING: $(tr '\n' ' ' <"$WORK/notify.out")"; return 1; }
}
# the shipped unit is hardened: systemd-analyze rates it "OK" (<= 2.0)
unit_hardened() {
	local score
	if ! command -v systemd-analyze >/dev/null 2>&1; then
		why="systemd-analyze not found"
		return 1
	fi
	out=$(systemd-analyze security --offline=yes "$top_srcdir/contrib/systemd/sluiced.service" 2>&1)
	score=$(sed -n 's/.*Overall exposure level for sluiced.service: \([0-9.]*\).*/\1/p' <<<"$out")
	[ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' ||
	    { why="exposure '$score': $(short "$(tail -3 <<<"$out")")"; return 1; }
	grep -q '^Type=notify$' "$top_srcdir/contrib/systemd/sluiced.service" &&
	    grep -q '^ExecReload=/bin/kill -HUP \$MAINPID$' "$top_srcdir/contrib/systemd/sluiced.service" &&
	    grep -q '^WatchdogSec=' "$top_srcdir/contrib/systemd/sluiced.service" ||
	    { why="the unit lacks Type=notify, ExecReload or WatchdogSec"; return 1; }
}

monitoring_rules() {
	if ! command -v promtool >/dev/null 2>&1; then
		why="promtool not found (Debian: prometheus)"
		return 1
	fi
	out=$(cd "$top_srcdir/contrib/monitoring" && promtool check rules sluice.rules.yml 2>&1 &&
	    promtool test rules sluice.rules.test.yml 2>&1) ||
	    { why="promtool: $(short "$out")"; return 1; }
}

kubernetes_manifests() {
	local root=$WORK/k8s conf
	conf=$("$PY" "$top_srcdir/tests/integ/k8scheck.py" "$top_srcdir/contrib/kubernetes/sluice.yaml" "$root" 2>&1) ||
	    { why="$conf"; return 1; }
	mkdir -p "$root/var/lib/sluice/secrets" "$root/var/lib/sluice/state" "$root/var/log/sluice" "$root/run/sluice" &&
	    chmod 700 "$root/var/lib/sluice/secrets" &&
	    "$SLUICECTL" keygen --out "$root/run/sluice-keys" >>"$WORK/keygen.log" 2>&1 ||
	    { why="cannot lay out the pod's folders"; return 1; }
	out=$(timeout 20 "$SLUICED" -c "$conf" --check 2>&1) ||
	    { why="sluiced --check of the DaemonSet's configuration: $(short "$out")"; return 1; }
	# and the check fails on a manifest that would not pick up policies
	sed 's/watch_policies: true/watch_policies: false/' "$top_srcdir/contrib/kubernetes/sluice.yaml" >"$WORK/k8s-bad.yaml"
	! "$PY" "$top_srcdir/tests/integ/k8scheck.py" "$WORK/k8s-bad.yaml" "$WORK/k8s-bad" >/dev/null 2>&1 ||
	    { why="k8scheck.py passes watch_policies: false"; return 1; }
}

check check_ok check_ok
check check_user check_user
check check_group check_group
check check_upstream_ca check_upstream_ca
check check_secret_missing check_secret_missing
check check_secret_unbound check_secret_unbound
check check_warnings check_warnings
check start_refuses start_refuses
check log_json log_json
check log_journal log_journal
check notify_protocol notify_protocol
check unit_hardened unit_hardened
check monitoring_rules monitoring_rules
check kubernetes_manifests kubernetes_manifests

check_done
