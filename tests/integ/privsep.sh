#!/bin/bash
# privsep.sh: privilege separation (issue 17): the keys process holds
# every key; the process that reads sandbox bytes holds none.  One real
# sluiced in the namespace world of tests/integ/lib.sh, with a sealed
# secret injected on an intercepted host, so both a gateway key and a
# sandbox's CA key are in use.  Memory is read through /proc/PID/mem.
#
#   tree_keys        sluiced (the monitor) has one child, "sluiced:
#                    worker 0" (comm sluiced-worker0), which has one,
#                    "sluiced: keys" (comm sluiced-keys); GET /v1/status
#                    lists the three with their pids
#   keys_no_net      the keys process has no socket but its channels
#                    (AF_UNIX: control, audit, one a worker), no
#                    listener; the one file it has open is the trail
#   keys_no_dump     the keys process cannot dump core
#   confined         the worker: Seccomp 2 (a filter), NoNewPrivs 1,
#                    CapEff 0 and no capability left in any set, uid and
#                    gid those of the user sluice (the default 'user');
#                    the keys process: a filter of its own
#   no_files         the worker has no file open but its log, and no
#                    key, policy or secret file mapped; yet a policy
#                    written through the API and a reload (its files
#                    come through the monitor) work
#   icpt_works       an intercepted request gets its injected credential
#                    upstream: leaves are minted over the channel
#   gwkey_where      the gateway's private key is in the keys process's
#                    memory and nowhere in the worker's or the monitor's
#   cakey_where      box's CA private key likewise, after a leaf was minted
#   signkey_where    the signing key (identity tokens, checkpoints)
#                    likewise; the trail still verifies with signing.pub
#   key_files        neither the worker nor the monitor has a key file open
#   restart_ca       a restart restores box's CA from state_dir (opened by
#                    the keys process): the same certificate, and a new
#                    connection verifies against it
#   violation        a request outside the table (test hook) ends the
#                    worker and its keys process; the monitor starts
#                    another pair within a second, which serves
#   forbidden        a forbidden system call in the worker (execve,
#                    test hook) kills it (SIGSYS); the monitor starts
#                    another within a second, which serves
#   worker_dies      a worker killed by a signal is restarted within a
#                    second: new connections are intercepted, status
#                    counts the restart, the trail still verifies
#   keys_die         the keys process killed: sluiced stops (status 1)
#   early_signal     SIGHUP and SIGUSR1 sent while the worker starts wait
#                    for its handlers: it serves, never restarted
#   group_kept       started under another group (setpriv --regid, as a
#                    firewall exempting sluiced's connections by skgid
#                    wants), the worker keeps it, as the user sluice
# Output: "ok NAME" or "FAIL NAME: why" per check, then "N passed, N failed".

# shellcheck source=tests/integ/check.sh
. "$(dirname "$0")/check.sh"

check_needs curl openssl dnsmasq timeout jq
check_work privsep
PKI=$WORK/pki CA=$WORK/pki/ca.pem STATE=$WORK/state KEYS=$WORK/keys
SOCK=$WORK/control.sock POLDIR=$WORK/policy.d AUDIT=$WORK/audit.jsonl
SECDIR=$WORK/secrets BOX_CA=$WORK/box.pem MEMSCAN=$top_srcdir/tests/integ/memscan.py
RESOLVE=(--resolve allowed.test:443:198.18.1.10)
short() { printf '%s' "$1" | tr '\n' ' ' | head -c 600; }
last="" out=""
check_verbose() {
	echo "    last: $last"
	tail -5 "$WORK/sluiced.log" | sed 's/^/    log: /'
}

world_init
"$top_srcdir/certs/mkpki.sh" "$PKI" $WORLD_CERT_NAMES >"$WORK/mkpki.log" 2>&1 ||
    setup_fail "certs/mkpki.sh failed (see $WORK/mkpki.log)"
world_up >"$WORK/world.log" 2>&1 || setup_fail "world_up: $(tail -1 "$WORK/world.log")"
world_start_dns "$WORK" 2>>"$WORK/world.log" || setup_fail "dnsmasq did not start"
world_start_upstreams "$PKI" "$STATE" "$WORK" 2>>"$WORK/world.log" ||
    setup_fail "upstreams did not start (see $WORK/upstream.log)"
world_load_nft >>"$WORK/world.log" 2>&1 || setup_fail "cannot load contrib/sluice.nft"
canary_secrets "$KEYS" "$SECDIR" tok:allowed.test ||
    setup_fail "keys and secrets: $(tail -1 "$WORK/keygen.log" "$WORK/seal.log")"
"$SLUICECTL" keygen --out "$KEYS/sign" >>"$WORK/keygen.log" 2>&1 ||
    setup_fail "sluicectl keygen (signing): $(tail -1 "$WORK/keygen.log")"
TOK=$(head -1 "$WORK/canary-values")

mkdir -p "$POLDIR"
cp "$top_srcdir/policy.d/default.yaml" "$POLDIR/"
cat >"$POLDIR/sec.yaml" <<EOF
name: sec
egress: {default: deny}
intercept:
  - name: bearer
    match: {host: allowed.test, path: /echo-headers}
    inject:
      set: {authorization: "Bearer {{secret:tok}}"}
EOF
cat >"$WORK/sluiced.yaml" <<EOF
# generated by tests/integ/privsep.sh
listen:
  transparent: ["0.0.0.0:15001", "[::]:15001"]
  dns: ["0.0.0.0:15053"]
  control: $SOCK
resolvers: ["198.18.1.2:53"]
policy_dir: $POLDIR
state_dir: $WORK/sbstate
secret_dir: $SECDIR
gateway_key: $KEYS/gateway.key
signing_key: $KEYS/sign/signing.key
upstream_ca: $CA
audit: {path: $AUDIT, fsync: batch}
workers: 2
timeouts: {handshake: 5s, idle: 30s, connect: 3s, drain: 2s}
EOF
: >"$AUDIT"
daemon_start
register_box sec

# worker_pid: the worker of sluiced $SL_PID (the monitor); keys_pid: its keys process
worker_pid() { pgrep -P "$SL_PID" | head -1; }
keys_pid() { pgrep -P "$(worker_pid)" | head -1; }
cmdline() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | sed 's/ *$//'; }

tree_keys() {
	local kids k w
	kids=$(pgrep -P "$SL_PID" | wc -l)
	[ "$kids" = 1 ] || { why="sluiced has $kids children, want 1"; return 1; }
	w=$(worker_pid)
	[ "$(cmdline "$w")" = "sluiced: worker 0" ] ||
	    { why="the child's command line is '$(cmdline "$w")'"; return 1; }
	[ "$(cat "/proc/$w/comm")" = sluiced-worker0 ] ||
	    { why="the child's comm is '$(cat "/proc/$w/comm")'"; return 1; }
	kids=$(pgrep -P "$w" | wc -l)
	[ "$kids" = 1 ] || { why="the worker has $kids children, want 1"; return 1; }
	k=$(keys_pid)
	[ "$(cmdline "$k")" = "sluiced: keys" ] ||
	    { why="the child's command line is '$(cmdline "$k")'"; return 1; }
	[ "$(cat "/proc/$k/comm")" = sluiced-keys ] ||
	    { why="the child's comm is '$(cat "/proc/$k/comm")'"; return 1; }
	api GET /v1/status
	jq -e --argjson k "$k" --argjson w "$w" --argjson m "$SL_PID" \
	    '(.processes | map(select(.role == "keys" and .pid == $k)) | length) == 1 and
	     (.processes | map(select(.role == "worker" and .pid == $w)) | length) == 1 and
	     (.processes | map(select(.role == "monitor" and .pid == $m)) | length) == 1 and
	     .pid == $m' \
	    <<<"$out" >/dev/null || { why="status processes: $(jq -c .processes <<<"$out")"; return 1; }
}

keys_no_net() {
	local k fd link ino n=0
	k=$(keys_pid)
	for fd in /proc/"$k"/fd/*; do
		link=$(readlink "$fd") || continue
		case "$link" in
		socket:*)
			ino=${link#socket:[}; ino=${ino%]}
			# every socket of it is one of the AF_UNIX channels
			in_ns "$NS_GW" awk -v i="$ino" '$7 == i { f = 1 } END { exit !f }' /proc/net/unix ||
			    { why="fd $fd is a socket that is not AF_UNIX ($link)"; return 1; }
			n=$((n + 1)) ;;
		/dev/null|/dev/pts/*|pipe:*|*/sluiced.log|"$AUDIT") ;;
		*) why="the keys process has $link open"; return 1 ;;
		esac
	done
	[ "$n" = 4 ] || { why="$n channels, want 4 (control, audit and 2 workers)"; return 1; }
}

keys_no_dump() {
	local k
	k=$(keys_pid)
	grep -Eq '^Max core file size +0 +0 ' "/proc/$k/limits" ||
	    { why="core limit: $(grep 'core file' "/proc/$k/limits")"; return 1; }
}

# status_field PID NAME: the value of NAME in /proc/PID/status
status_field() { awk -v n="$2:" '$1 == n { print $2 }' "/proc/$1/status"; }

confined() {
	local w k f
	w=$(worker_pid) k=$(keys_pid)
	[ "$(status_field "$w" Seccomp)" = 2 ] || { why="worker Seccomp: $(status_field "$w" Seccomp)"; return 1; }
	[ "$(status_field "$w" NoNewPrivs)" = 1 ] || { why="worker NoNewPrivs: $(status_field "$w" NoNewPrivs)"; return 1; }
	for f in CapEff CapPrm CapInh CapAmb CapBnd; do
		[ "$(status_field "$w" $f)" = 0000000000000000 ] ||
		    { why="worker $f: $(status_field "$w" $f)"; return 1; }
	done
	[ "$(status_field "$k" Seccomp)" = 2 ] || { why="keys Seccomp: $(status_field "$k" Seccomp)"; return 1; }
	[ "$(status_field "$SL_PID" Seccomp)" = 0 ] || { why="the monitor has a filter too"; return 1; }
	[ "$(awk '$1 == "Uid:" { print $2 $3 $4 $5 }' "/proc/$w/status")" = "$(id -u sluice)$(id -u sluice)$(id -u sluice)$(id -u sluice)" ] ||
	    { why="worker uids: $(grep Uid: "/proc/$w/status")"; return 1; }
	[ "$(awk '$1 == "Gid:" { print $2 }' "/proc/$w/status")" = "$(id -g sluice)" ] ||
	    { why="worker gid: $(grep Gid: "/proc/$w/status")"; return 1; }
}

no_files() {
	local w fd link
	w=$(worker_pid)
	for fd in /proc/"$w"/fd/*; do
		link=$(readlink "$fd") || continue
		case "$link" in
		socket:*|pipe:*|anon_inode:*|/dev/null|/dev/pts/*|*/sluiced.log) ;;
		*) why="the worker has $link open"; return 1 ;;
		esac
	done
	! grep -E "\.key|\.sealed|$POLDIR|$SECDIR" "/proc/$w/maps" >/dev/null ||
	    { why="mapped: $(grep -E "\.key|\.sealed|$POLDIR|$SECDIR" "/proc/$w/maps" | head -1)"; return 1; }
	api PUT /v1/policies/extra "name: extra
egress: {default: deny, allow: [{domain: extra.test}]}"
	[ "$st" = 200 ] || [ "$st" = 201 ] || { why="PUT policy: $st $(short "$out")"; return 1; }
	[ -f "$POLDIR/extra.yaml" ] || { why="no $POLDIR/extra.yaml: $(ls "$POLDIR")"; return 1; }
	api POST /v1/reload
	[ "$st" = 200 ] || { why="reload: $st $(short "$out")"; return 1; }
	api GET /v1/policies
	jq -e '[.policies[] | .name] | index("extra") != null' <<<"$out" >/dev/null ||
	    { why="policies: $(short "$out")"; return 1; }
}

icpt_works() {
	local o
	snap
	o=$(in_sb curl -sS --max-time 8 --cacert "$BOX_CA" "${RESOLVE[@]}" \
	    -o /dev/null -w '%{http_code}' https://allowed.test/echo-headers 2>&1)
	[ "$o" = 200 ] || { why="status $o"; return 1; }
	upwant allowed-tls "[.[0].headers[] | select(.[0] | ascii_downcase == \"authorization\") | .[1]] == [\"Bearer $TOK\"]"
}

# in_mem PID HEX: PID's memory holds the bytes HEX
in_mem() { [ -n "$("$PY" "$MEMSCAN" has "$1" "$2")" ]; }
rev() { echo "$1" | fold -w2 | tac | tr -d '\n'; }

gwkey_where() {
	local key k
	key=$("$PY" "$MEMSCAN" gwkey "$KEYS/gateway.key") && [ ${#key} = 64 ] ||
	    { why="cannot read the gateway key"; return 1; }
	k=$(keys_pid)
	in_mem "$k" "$key" || { why="the keys process does not hold the gateway key (the scan is blind)"; return 1; }
	! in_mem "$(worker_pid)" "$key" || { why="the worker's memory holds the gateway key"; return 1; }
	! in_mem "$SL_PID" "$key" || { why="the monitor's memory holds the gateway key"; return 1; }
}

cakey_where() {
	local d k
	k=$(keys_pid)
	d=$("$PY" "$MEMSCAN" cakey "$k" "$BOX_CA")
	[ ${#d} = 64 ] || { why="box's CA key is not in the keys process (the scan is blind)"; return 1; }
	! in_mem "$(worker_pid)" "$d" || { why="the worker's memory holds box's CA key"; return 1; }
	! in_mem "$(worker_pid)" "$(rev "$d")" || { why="the worker's memory holds box's CA key (as a bignum)"; return 1; }
	! in_mem "$SL_PID" "$d" || { why="the monitor's memory holds box's CA key"; return 1; }
}

signkey_where() {
	local d k
	k=$(keys_pid)
	d=$("$PY" "$MEMSCAN" scalar "$KEYS/sign/signing.key") && [ ${#d} = 64 ] ||
	    { why="cannot read the signing key"; return 1; }
	in_mem "$k" "$d" || in_mem "$k" "$(rev "$d")" ||
	    { why="the keys process does not hold the signing key (the scan is blind)"; return 1; }
	! in_mem "$(worker_pid)" "$d" || { why="the worker's memory holds the signing key"; return 1; }
	! in_mem "$(worker_pid)" "$(rev "$d")" || { why="the worker's memory holds the signing key (as a bignum)"; return 1; }
	! in_mem "$SL_PID" "$d" || { why="the monitor's memory holds the signing key"; return 1; }
	"$SLUICECTL" audit verify --open "$AUDIT" --pub "$KEYS/sign/signing.pub" >"$WORK/verify.out" 2>&1 ||
	    { why="audit verify: $(tail -2 "$WORK/verify.out" | tr '\n' ' ')"; return 1; }
}

key_files() {
	local l p
	for p in "$SL_PID" "$(worker_pid)"; do
		[ -d "/proc/$p/fd" ] || { why="no process $p"; return 1; }
		l=$(ls -l /proc/"$p"/fd/ 2>/dev/null | grep -E "gateway.key|signing.key|\.sealed" | head -1)
		[ -z "$l" ] || { why="pid $p has a key file open: $l"; return 1; }
	done
}

restart_ca() {
	local o
	cp "$BOX_CA" "$WORK/box-before.pem"
	world_stop "$SL_PID" TERM 80
	[ "$WORLD_STOP_STATUS" = 0 ] || { why="exit status $WORLD_STOP_STATUS"; return 1; }
	daemon_start
	api GET /v1/sandboxes/box/ca.pem
	[ "$st" = 200 ] || { why="ca.pem: $st"; return 1; }
	printf '%s\n' "$out" | cmp -s - "$WORK/box-before.pem" ||
	    diff <(printf '%s' "$out") <(cat "$WORK/box-before.pem") >/dev/null ||
	    { why="box has another CA after the restart"; return 1; }
	o=$(in_sb curl -sS --max-time 8 --cacert "$WORK/box-before.pem" "${RESOLVE[@]}" \
	    -o /dev/null -w '%{http_code}' https://allowed.test/echo-headers 2>&1)
	[ "$o" = 200 ] || { why="after the restart: $o"; return 1; }
}

# new_worker OLD: waits up to 1 s for a worker that is not OLD, which serves
new_worker() {
	local old=$1 n=0 w=""
	while [ $n -lt 10 ]; do
		w=$(worker_pid)
		[ -n "$w" ] && [ "$w" != "$old" ] && break
		sleep 0.1; n=$((n + 1))
	done
	[ -n "$w" ] && [ "$w" != "$old" ] || { why="no new worker 1 s after pid $old ended"; return 1; }
	NEWW=$w
}

# served: an intercepted request through the restarted worker, within 2 s
served() {
	local o n=0
	while [ $n -lt 20 ]; do
		o=$(in_sb curl -sS --max-time 3 --cacert "$BOX_CA" "${RESOLVE[@]}" \
		    -o /dev/null -w '%{http_code}' https://allowed.test/echo-headers 2>&1)
		[ "$o" = 200 ] && return 0
		sleep 0.1; n=$((n + 1))
	done
	why="after the restart: $o"
	return 1
}

violation() {
	local k w n=0
	w=$(worker_pid) k=$(keys_pid)
	api POST /v1/test/keys-violation
	new_worker "$w" || return 1
	grep -q 'sent a request that is not in the table: ending the worker' "$WORK/sluiced.log" ||
	    { why="no word of it in the log: $(tail -2 "$WORK/sluiced.log" | tr '\n' ' ')"; return 1; }
	! kill -0 "$w" 2>/dev/null || { why="the worker lives on"; return 1; }
	while kill -0 "$k" 2>/dev/null && [ $n -lt 10 ]; do sleep 0.1; n=$((n + 1)); done
	! kill -0 "$k" 2>/dev/null || { why="the old keys process lives on"; return 1; }
	kill -0 "$SL_PID" || { why="the monitor is gone"; return 1; }
	served || return 1
	[ -n "$(keys_pid)" ] && [ "$(keys_pid)" != "$k" ] || { why="no new keys process"; return 1; }
}

forbidden() {
	local w
	w=$(worker_pid)
	api POST /v1/test/forbidden-syscall
	new_worker "$w" || return 1
	! kill -0 "$w" 2>/dev/null || { why="the worker lives on (api: $st $out)"; return 1; }
	grep -q 'the worker process was killed by signal 31' "$WORK/sluiced.log" ||
	    { why="no word of it in the log: $(tail -2 "$WORK/sluiced.log" | tr '\n' ' ')"; return 1; }
	served || return 1
}

worker_dies() {
	local w
	w=$(worker_pid)
	kill -SEGV "$w"
	new_worker "$w" || return 1
	# under a sanitizer the worker reports the signal and exits 1
	grep -Eq 'the worker process (was killed by signal 11|exited with status 1)' "$WORK/sluiced.log" ||
	    { why="no word of it in the log: $(tail -2 "$WORK/sluiced.log" | tr '\n' ' ')"; return 1; }
	served || return 1
	api GET /v1/status
	jq -e '.processes[] | select(.role == "worker") | .restarts == 3' <<<"$out" >/dev/null ||
	    { why="status: $(jq -c .processes <<<"$out")"; return 1; }
	"$SLUICECTL" audit verify --open "$AUDIT" --pub "$KEYS/sign/signing.pub" >"$WORK/verify.out" 2>&1 ||
	    { why="audit verify: $(tail -2 "$WORK/verify.out" | tr '\n' ' ')"; return 1; }
}

keys_die() {
	local k n=0
	k=$(keys_pid)
	[ -n "$k" ] || { why="no keys process"; return 1; }
	kill -KILL "$k"
	while kill -0 "$SL_PID" 2>/dev/null && [ $n -lt 50 ]; do sleep 0.1; n=$((n + 1)); done
	! kill -0 "$SL_PID" 2>/dev/null || { why="sluiced lives on without its keys process"; return 1; }
	wait "$SL_PID" 2>/dev/null
	n=$?
	[ "$n" = 1 ] || { why="exit status $n, want 1"; return 1; }
	grep -q 'the keys process ended' "$WORK/sluiced.log" || { why="no word of it in the log"; return 1; }
}

check tree_keys tree_keys
check keys_no_net keys_no_net
check keys_no_dump keys_no_dump
check confined confined
check icpt_works icpt_works
check no_files no_files
check gwkey_where gwkey_where
check cakey_where cakey_where
check signkey_where signkey_where
check key_files key_files
check restart_ca restart_ca
check violation violation
check forbidden forbidden
check worker_dies worker_dies
group_kept() {
	local w n=0 g
	world_spawn "$NS_GW" "$WORK/sluiced.log" setpriv --regid=54321 --clear-groups \
	    "$SLUICED" -c "$WORK/sluiced.yaml"
	SL_PID=$SPAWNED
	world_wait_listen "$NS_GW" 15001 100 && world_wait_file "$SOCK" 50 ||
	    { why="it did not start: $(tail -2 "$WORK/sluiced.log" | tr '\n' ' ')"; return 1; }
	api GET /v1/status
	[ "$st" = 200 ] || { why="status: $st $(tail -2 "$WORK/sluiced.log" | tr '\n' ' ')"; return 1; }
	w=$(worker_pid)
	g=$(awk '$1 == "Gid:" { print $2 $3 $4 $5 }' "/proc/$w/status")
	[ "$g" = 54321543215432154321 ] || { why="worker gids: $(grep Gid: "/proc/$w/status")"; return 1; }
	[ "$(awk '$1 == "Uid:" { print $2 }' "/proc/$w/status")" = "$(id -u sluice)" ] ||
	    { why="worker uid: $(grep Uid: "/proc/$w/status")"; return 1; }
	[ "$(awk '$1 == "Groups:" { print $2 }' "/proc/$w/status")" = 54321 ] ||
	    { why="worker groups: $(grep Groups: "/proc/$w/status")"; return 1; }
	world_stop "$SL_PID" TERM 80
	[ "$WORLD_STOP_STATUS" = 0 ] || { why="exit status $WORLD_STOP_STATUS"; return 1; }
}

early_signal() {
	world_spawn "$NS_GW" "$WORK/sluiced.log" "$SLUICED" -c "$WORK/sluiced.yaml"
	SL_PID=$SPAWNED
	# once the monitor blocks them (SigBlk has SIGHUP, bit 0), many
	# through the worker's start: its handlers are not in at first
	n=0
	until [ $(( 0x$(awk '$1 == "SigBlk:" { print $2 }' "/proc/$SL_PID/status" 2>/dev/null || echo 0) & 1 )) = 1 ]; do
		[ $n -lt 2000 ] || { why="the monitor never blocked SIGHUP"; return 1; }
		n=$((n + 1))
	done
	for n in $(seq 1 40); do
		kill -HUP "$SL_PID" 2>/dev/null; kill -USR1 "$SL_PID" 2>/dev/null
		sleep 0.005
	done
	world_wait_listen "$NS_GW" 15001 100 && world_wait_file "$SOCK" 50 ||
	    { why="it did not start: $(tail -2 "$WORK/sluiced.log" | tr '\n' ' ')"; return 1; }
	api GET /v1/status
	[ "$st" = 200 ] || { why="status: $st $(tail -2 "$WORK/sluiced.log" | tr '\n' ' ')"; return 1; }
	jq -e '.processes[] | select(.role == "worker") | .restarts == 0' <<<"$out" >/dev/null ||
	    { why="the worker was restarted: $(grep monitor "$WORK/sluiced.log" | tail -1)"; return 1; }
	world_stop "$SL_PID" TERM 80
	[ "$WORLD_STOP_STATUS" = 0 ] || { why="exit status $WORLD_STOP_STATUS"; return 1; }
}

check keys_die keys_die
check early_signal early_signal
check group_kept group_kept
check_done
