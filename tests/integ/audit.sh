#!/bin/bash
# audit.sh: integration tests of the audit trail (SPEC "Audit trail"):
# the hash chain and signed checkpoints as the real sluiced writes them,
# checked by the real `sluicectl audit verify`; rotation; crashes under
# load with injected requests; a full queue.
#
# usage: tests/integ/audit.sh [-k] [-v]
# Environment: top_srcdir, top_builddir (set by make check), SLUICED,
# SLUICECTL, PYTHON.  Exit: 0 all passed, 1 something failed, 77 skipped.
# Needs root: it creates namespaces.
#
# The sandbox "box" (static, sb) has the policy "aud": requests to
# allowed.test under /inj/ get "Authorization: Bearer {{secret:tok}}",
# the rest of /pub/ passes.  Each check starts its own sluiced on its own
# trail (or an earlier check's, to continue it):
#   chain_*   a clean run: the trail verifies, ends with a checkpoint, has
#             one every 50 records; a restart continues the same chain
#   tamper_*  the CLI names the first bad record of an edited copy
#   rot_*     SIGUSR1, `sluicectl audit rotate` and audit.max_size_mb: old
#             and new files verify together; a file of another trail after
#             them does not; a lost current file: the chain goes on from
#             the newest rotated one
#   cp_*      a checkpoint checkpoint_interval after records, idle or not
#   tail_*    sluicectl audit tail: filters, --json, the daemon's file
#   crash_*   SIGKILL under load (fsync always, then batch): the file
#             verifies up to its torn tail, every request the upstream got
#             with the credential has its record (batch: the records lost
#             are reported); the next start cuts the torn tail, says so,
#             and continues the chain
#   full_*    the trail on a pipe nobody reads, queue 16, queue_full
#             refuse: requests are refused once the queue is full, and
#             every request the upstream got has its record; the trail on
#             a full disk while an injected request waits behind an answer
#             owed: that answer goes out first and whole, then the 503
#   full_disk_recovers  refused while the disk is full, taken again after
#   rot_mv_signal  mv plus SIGUSR1: two files, one chain
# Output: "ok NAME" or "FAIL NAME: why" per check, then "N passed, N failed".

# shellcheck source=tests/integ/check.sh
. "$(dirname "$0")/check.sh"

check_needs curl openssl dnsmasq timeout jq

check_work audit
PKI=$WORK/pki CA=$WORK/pki/ca.pem STATE=$WORK/state KEYS=$WORK/keys
SOCK=$WORK/control.sock POLDIR=$WORK/policy.d SECDIR=$WORK/secrets
[ -x "$SLUICECTL" ] || setup_fail "$SLUICECTL not built"

last="" out=""
check_verbose() {
	echo "    last: $last"
	printf '%s\n' "$out" | head -20 | sed 's/^/    out: /'
	tail -5 "$WORK/sluiced.log" 2>/dev/null | sed 's/^/    log: /'
}
short() { printf '%s' "$1" | tr '\n' ' ' | head -c 600; }

# ---------------------------------------------------------------- the world

world_init
"$top_srcdir/certs/mkpki.sh" "$PKI" $WORLD_CERT_NAMES >"$WORK/mkpki.log" 2>&1 ||
    setup_fail "certs/mkpki.sh failed"
world_up >"$WORK/world.log" 2>&1 || setup_fail "world_up: $(tail -1 "$WORK/world.log")"
world_start_dns "$WORK" 2>>"$WORK/world.log" || setup_fail "dnsmasq did not start"
world_start_upstreams "$PKI" "$STATE" "$WORK" 2>>"$WORK/world.log" ||
    setup_fail "upstreams did not start"
world_load_nft >>"$WORK/world.log" 2>&1 || setup_fail "cannot load contrib/sluice.nft"
canary_secrets "$KEYS" "$SECDIR" tok:allowed.test || setup_fail "sealing the canary"
mkdir -p "$POLDIR" && cp "$top_srcdir/policy.d/default.yaml" "$POLDIR/"
cat >"$POLDIR/aud.yaml" <<EOF
name: aud
egress:
  default: deny
intercept:
  - name: inj
    match: {host: allowed.test, path: "/inj/**"}
    inject:
      set: {authorization: "Bearer {{secret:tok}}"}
  - name: pub
    match: {host: allowed.test, path: "/pub/**"}
    action: pass
  - name: slow
    match: {host: allowed.test, path: "/slow"}
    action: pass
EOF

# config TRAIL FSYNC [EXTRA-AUDIT-KEYS]: sluiced.yaml for a run on TRAIL
config() {
	cat >"$WORK/sluiced.yaml" <<-EOF
	listen:
	  transparent: ["0.0.0.0:15001", "[::]:15001"]
	  control: $SOCK
	resolvers: ["198.18.1.2:53"]
	policy_dir: $POLDIR
	state_dir: $WORK/sbstate
	secret_dir: $SECDIR
	gateway_key: $KEYS/gateway.key
	signing_key: $KEYS/signing.key
	upstream_ca: $CA
	audit: {path: $1, fsync: $2, checkpoint_records: 50${3:+, $3}}
	workers: 2
	timeouts: {handshake: 5s, idle: 30s, connect: 3s, drain: 3s}
	sandboxes:
	  - {id: box, sources: ["198.18.0.2"], policy: aud}
	EOF
}
start() {
	# a check that failed half-way may have left its daemon running
	[ -n "${SL_PID:-}" ] && world_stop "$SL_PID" TERM 30
	: >"$WORK/sluiced.log"
	world_spawn "$NS_GW" "$WORK/sluiced.log" "$SLUICED" -c "$WORK/sluiced.yaml"
	SL_PID=$SPAWNED
	world_wait_listen "$NS_GW" 15001 100 && world_wait_file "$SOCK" 50 ||
	    { why="sluiced did not start: $(tail -3 "$WORK/sluiced.log" | tr '\n' ' ')"; return 1; }
	BOX_CA=$WORK/box.pem
	curl -s -f --unix-socket "$SOCK" http://s/v1/sandboxes/box/ca.pem >"$BOX_CA" ||
	    { why="no CA for box"; return 1; }
}
stop() {
	world_stop "$SL_PID" TERM 80
	SL_PID=""
	[ "$WORLD_STOP_STATUS" = 0 ] || { why="sluiced exit $WORLD_STOP_STATUS: $(sanitizer)"; return 1; }
	[ -z "$(sanitizer)" ] || { why="sanitizer: $(sanitizer)"; return 1; }
}

# load N CONNS PREFIX: N injected GETs of /inj/PREFIX-K over CONNS
# kept-alive connections from the sandbox; prints "sent=… ok=… refused=…"
# and the paths answered 200 into $WORK/PREFIX.ok
load() {
	timeout 120 ip netns exec "$NS_SB" "$PY" - "$BOX_CA" "$1" "$2" "$3" "$WORK/$3.ok" <<-'EOF'
	import socket, ssl, sys, threading
	ca, n, conns, prefix, okf = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
	ctx = ssl.create_default_context(cafile=ca)
	lock = threading.Lock()
	st = {"sent": 0, "ok": 0, "refused": 0, "other": 0}
	oks = []
	def answer(f):
	    status = int(f.readline().split()[1])
	    clen, chunked, close = 0, False, False
	    while True:
	        h = f.readline()
	        if h in (b"\r\n", b""):
	            break
	        k, _, v = h.decode().partition(":")
	        k = k.lower()
	        if k == "content-length":
	            clen = int(v)
	        elif k == "transfer-encoding":
	            chunked = True
	        elif k == "connection" and "close" in v:
	            close = True
	    if chunked:
	        while True:
	            m = int(f.readline().split(b";")[0], 16)
	            f.read(m + 2)
	            if m == 0:
	                break
	    else:
	        f.read(clen)
	    return status, close
	def one(k0):
	    s = f = None
	    for k in range(k0, n, conns):
	        fresh = s is None
	        try:
	            if s is None:
	                s = ctx.wrap_socket(socket.create_connection(("198.18.1.10", 443), 5),
	                                    server_hostname="allowed.test")
	                f = s.makefile("rb")
	            path = "/inj/%s-%d" % (prefix, k)
	            s.sendall(("GET %s HTTP/1.1\r\nHost: allowed.test\r\n\r\n" % path).encode())
	            with lock:
	                st["sent"] += 1
	            status, close = answer(f)
	            with lock:
	                if status == 200:
	                    st["ok"] += 1
	                    oks.append(path)
	                elif status == 503:
	                    st["refused"] += 1
	                else:
	                    st["other"] += 1
	            if close:
	                s.close()
	                s = None
	        except Exception:
	            s = None
	            if fresh:
	                return      # nothing listens any more
	threads = [threading.Thread(target=one, args=(i,)) for i in range(conns)]
	for t in threads:
	    t.start()
	for t in threads:
	    t.join()
	open(okf, "w").write("\n".join(oks) + "\n")
	print(" ".join("%s=%d" % kv for kv in st.items()))
	EOF
}

# verify [ARGS...] FILE...: sluicectl audit verify with the signing key
verify() {
	last="sluicectl audit verify $*"
	out=$("$SLUICECTL" audit verify --pub "$KEYS/signing.pub" "$@" 2>&1)
}

# up_injected: the paths under /inj/ the upstream got, with the credential
up_injected() {
	"$PY" - "$STATE/allowed-tls.json" "$(head -1 "$WORK/canary-values")" <<-'EOF'
	import json, sys
	for r in json.load(open(sys.argv[1]))["requests"]:
	    h = dict((k.lower(), v) for k, v in r["headers"])
	    if r["path"].startswith("/inj/") and h.get("authorization") == "Bearer " + sys.argv[2]:
	        print(r["path"])
	EOF
}
# unaudited FILE PREFIX: paths of PREFIX the upstream got with no request
# record in FILE (one a line)
unaudited() {
	"$PY" - "$1" "$2" <(up_injected) <<-'EOF'
	import json, sys
	have = set()
	for line in open(sys.argv[1], errors="replace"):
	    try:
	        r = json.loads(line)
	    except ValueError:
	        continue
	    if r.get("type") == "request" and r.get("action") == "inject":
	        have.add(r.get("path"))
	for p in open(sys.argv[3]).read().split():
	    if p.startswith("/inj/%s-" % sys.argv[2]) and p not in have:
	        print(p)
	EOF
}

# ================================================================ chain

T1=$WORK/t1/audit.jsonl
mkdir -p "$WORK/t1" "$WORK/t2" "$WORK/t3" "$WORK/t4"

chain_clean() {
	config "$T1" batch && start || return 1
	out=$(load 120 4 c1)
	grep -q 'ok=120' <<<"$out" || { why="load: $out"; return 1; }
	stop || return 1
	verify "$T1" || { why="verify: $out"; return 1; }
	grep -q '^ok: ' <<<"$out" || { why="verify said: $out"; return 1; }
	# a checkpoint every 50 records, and one last at the clean stop
	"$PY" - "$T1" <<-'EOF' || { why="checkpoints: $(short "$(jq -c 'select(.type=="checkpoint") | {seq, records}' "$T1")")"; return 1; }
	import json, sys
	recs = [json.loads(l) for l in open(sys.argv[1])]
	cps = [r for r in recs if r["type"] == "checkpoint"]
	assert recs[-1]["type"] == "checkpoint", "does not end with one"
	assert len(cps) >= 5, "only %d" % len(cps)
	assert all(c["records"] <= 50 for c in cps)
	assert [r["seq"] for r in recs] == list(range(1, len(recs) + 1))
	assert recs[0]["prev"] == "0" * 64
	EOF
	[ -z "$(unaudited "$T1" c1)" ] || { why="requests without records: $(unaudited "$T1" c1 | head -3)"; return 1; }
}
# a second run on the same file continues its chain
chain_restart() {
	local n0
	n0=$(wc -l <"$T1")
	config "$T1" always && start || return 1
	out=$(load 20 2 c2)
	grep -q 'ok=20' <<<"$out" || { why="load: $out"; return 1; }
	stop || return 1
	verify "$T1" || { why="verify: $out"; return 1; }
	jq -s -e "map(select(.type == \"start\" and .continues_seq == $n0)) | length == 1" "$T1" >/dev/null ||
	    { why="no start record continuing seq $n0"; return 1; }
}

check chain_clean chain_clean
check chain_restart chain_restart

# ================================================================ tamper

# tampered NAME EXPECT-RE EDIT...: an edited copy fails naming what
tampered() {
	local name=$1 re=$2
	shift 2
	cp "$T1" "$WORK/$name.jsonl"
	"$PY" - "$WORK/$name.jsonl" "$@" <<-'EOF'
	import sys
	p, how = sys.argv[1], sys.argv[2]
	lines = open(p, "rb").read().split(b"\n")[:-1]
	if how == "byte":
	    b = bytearray(lines[30]); b[40] ^= 1; lines[30] = bytes(b)
	elif how == "remove":
	    del lines[12]
	elif how == "swap":
	    lines[20], lines[21] = lines[21], lines[20]
	elif how == "truncate":
	    last_cp = max(i for i, l in enumerate(lines) if b'"type":"checkpoint"' in l)
	    lines = lines[:last_cp - 1]
	open(p, "wb").write(b"\n".join(lines) + b"\n")
	EOF
	verify "$WORK/$name.jsonl"
	local rc=$?
	[ $rc = 1 ] && grep -Eq "$re" <<<"$out" ||
	    { why="$name: exit $rc, want 1 and /$re/: $(short "$out")"; return 1; }
}
tamper_byte() { tampered byte "$WORK/byte.jsonl:31: " byte; }
tamper_remove() { tampered remove "$WORK/remove.jsonl:13: " remove; }
tamper_swap() { tampered swap "$WORK/swap.jsonl:21: " swap; }
tamper_truncate() { tampered truncate "checkpoint" truncate; }
check tamper_byte tamper_byte
check tamper_remove tamper_remove
check tamper_swap tamper_swap
check tamper_truncate tamper_truncate

# ================================================================ rot

T2=$WORK/t2/audit.jsonl
rot_signal() {
	config "$T2" batch && start || return 1
	out=$(load 30 2 r1)
	kill -USR1 "$SL_PID"
	sleep 0.5
	out=$(load 30 2 r2)
	"$SLUICECTL" --socket "$SOCK" audit rotate >"$WORK/rot.out" 2>&1 ||
	    { why="sluicectl audit rotate: $(cat "$WORK/rot.out")"; return 1; }
	sleep 0.5
	out=$(load 30 2 r3)
	stop || return 1
	ls "$WORK/t2" | grep -c '^audit.jsonl\.' | grep -qx 2 ||
	    { why="rotated files: $(ls "$WORK/t2" | tr '\n' ' ')"; return 1; }
	jq -s -e '.[0].type == "file_start"' "$T2" >/dev/null ||
	    { why="the new file does not start with file_start"; return 1; }
}
rot_verify() {
	verify "$WORK"/t2/audit.jsonl.* "$T2" || { why="verify (all files, in order): $out"; return 1; }
	grep -q 'in 3 files' <<<"$out" || { why="verify: $out"; return 1; }
	[ -z "$(unaudited <(cat "$WORK"/t2/audit.jsonl*) r1)$(unaudited <(cat "$WORK"/t2/audit.jsonl*) r3)" ] ||
	    { why="requests without records"; return 1; }
}
# the files out of order, or one of another trail after them: refused
rot_other_chain() {
	verify "$T2" "$WORK"/t2/audit.jsonl.*
	[ $? = 1 ] || { why="files out of order verified: $out"; return 1; }
	verify "$WORK"/t2/audit.jsonl.* "$T1"
	[ $? = 1 ] && grep -q 'prev' <<<"$out" || { why="a file of another trail verified: $out"; return 1; }
}
# by size: audit.max_size_mb 1 rotates under load; then the current file
# is lost: the next start continues the chain from the newest rotated one
T5=$WORK/t5/audit.jsonl
rot_size() {
	mkdir -p "$WORK/t5"
	config "$T5" never "max_size_mb: 1" && start || return 1
	out=$(load 2500 8 s1)
	stop || return 1
	[ "$(ls "$WORK/t5" | grep -c '^audit.jsonl\.')" -ge 1 ] ||
	    { why="no file rotated by size: $(ls -l "$WORK/t5" | tr '\n' ' ')"; return 1; }
	verify "$WORK"/t5/audit.jsonl.* "$T5" || { why="verify: $out"; return 1; }
}
rot_lost_current() {
	rm -f "$T5"
	config "$T5" batch && start || return 1
	out=$(load 10 1 s2)
	stop || return 1
	jq -s -e 'map(select(.type == "start" and (.continues_file | type) == "string")) | length == 1' "$T5" >/dev/null ||
	    { why="the new file does not continue the rotated one: $(head -c 300 "$T5")"; return 1; }
	verify "$WORK"/t5/audit.jsonl.* "$T5" || { why="verify across the lost file: $out"; return 1; }
}
# a checkpoint comes checkpoint_interval after the last one, idle or not
cp_interval() {
	local t=$WORK/t6/audit.jsonl
	mkdir -p "$WORK/t6"
	config "$t" batch "checkpoint_interval: 1s" && start || return 1
	out=$(load 5 1 i1)
	sleep 2.5
	jq -s -e 'map(select(.type == "checkpoint")) | length >= 1' "$t" >/dev/null ||
	    { why="no checkpoint 2.5 s after records, with checkpoint_interval 1s"; return 1; }
	stop || return 1
	verify "$t" || { why="verify: $out"; return 1; }
}
# the readable view, filtered, from a file or from the daemon's own
tail_cli() {
	local o
	o=$("$SLUICECTL" audit tail --file "$T1" -n 3 --type request 2>&1) ||
	    { why="audit tail: $(short "$o")"; return 1; }
	[ "$(grep -c ' request ' <<<"$o")" = 3 ] && [ "$(wc -l <<<"$o")" = 3 ] ||
	    { why="audit tail -n 3 --type request: $(short "$o")"; return 1; }
	grep -q 'inject' <<<"$o" && grep -q 'secrets=tok@1' <<<"$o" ||
	    { why="the request lines: $(short "$o")"; return 1; }
	o=$("$SLUICECTL" audit tail --file "$T1" -n 2 --json 2>&1)
	jq -s -e 'length == 2 and all(.[]; .hash | length == 64)' <<<"$o" >/dev/null ||
	    { why="audit tail --json: $(short "$o")"; return 1; }
	config "$T1" batch && start || return 1
	o=$("$SLUICECTL" --socket "$SOCK" audit tail -n 1 --type start 2>&1)
	stop || return 1
	grep -q ' start ' <<<"$o" || { why="audit tail through the daemon: $(short "$o")"; return 1; }
}

# logrotate's recipe: mv, then SIGUSR1.  What comes between goes on
# into the moved file, which ends with a checkpoint; a new file at the
# path goes on from it; the two verify as one chain (issue 16).
rot_mv_signal() {
	local d=$WORK/t8 t=$WORK/t8/audit.jsonl
	mkdir -p "$d"
	config "$t" batch && start || return 1
	out=$(load 20 2 m1)
	mv "$t" "$t.1"
	out=$(load 10 1 m2)
	kill -USR1 "$SL_PID"
	sleep 0.5
	out=$(load 20 2 m3)
	stop || return 1
	[ -s "$t" ] || { why="no new file at the path after SIGUSR1: $(ls "$d" | tr '\n' ' ')"; return 1; }
	jq -s -e '.[-1].type == "checkpoint"' "$t.1" >/dev/null ||
	    { why="the moved file does not end with a checkpoint: $(tail -c 300 "$t.1")"; return 1; }
	jq -s -e '.[0].type == "file_start" and .[0].reopened == true' "$t" >/dev/null ||
	    { why="the new file does not start with file_start: $(head -c 300 "$t")"; return 1; }
	verify "$t.1" "$t" || { why="verify: $out"; return 1; }
	grep -q 'in 2 files' <<<"$out" || { why="verify: $out"; return 1; }
	[ -z "$(unaudited <(cat "$t.1" "$t") m1)$(unaudited <(cat "$t.1" "$t") m2)$(unaudited <(cat "$t.1" "$t") m3)" ] ||
	    { why="requests without records"; return 1; }
}

check rot_signal rot_signal
check rot_mv_signal rot_mv_signal
check rot_verify rot_verify
check rot_other_chain rot_other_chain
check rot_size rot_size
check rot_lost_current rot_lost_current
check cp_interval cp_interval
check tail_cli tail_cli

# ================================================================ disk
# (before the loads below: the upstreams' state files grow with every
# request they record, and answer slower)

# The disk fills while an injected request, pipelined behind an allowed
# one whose answer is slow, waits for its record (fsync always): the
# answer owed goes out whole and first, the injected request gets its 503
# after it, never reaches the upstream, and the connection ends.  (Before:
# the 503 went out at once in place of the first answer, blamed on it.)
# tiny_start DIR SIZE: sluiced with its trail (fsync always) at
# DIR/trail.jsonl, on a tmpfs of SIZE mounted there
tiny_start() {
	mkdir -p "$1" && mount -t tmpfs -o size="$2" tmpfs "$1" ||
	    { why="cannot mount a tmpfs"; return 1; }
	config "$1/trail.jsonl" always && start && return 0
	umount "$1"
	return 1
}
full_disk_pipelined() {
	local mnt=$WORK/tiny t=$WORK/tiny/trail.jsonl
	tiny_start "$mnt" 128k || return 1
	# no room left, not even in the trail's last page
	dd if=/dev/zero of="$mnt/fill" bs=4k >/dev/null 2>&1
	head -c 65536 /dev/zero >>"$t" 2>/dev/null
	snap
	last="raw: GET /slow?ms=800, then GET /inj/held, pipelined"
	out=$(timeout 30 ip netns exec "$NS_SB" "$PY" "$UPSTREAM_PY" raw \
	    198.18.1.10:443 --tls-name allowed.test --ca "$BOX_CA" --json \
	    --timeout 5 --responses 2 --linger 1 --send \
	    'GET /slow?ms=800 HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET /inj/held HTTP/1.1\r\nHost: allowed.test\r\n\r\n' 2>&1)
	world_stop "$SL_PID" TERM 80
	SL_PID=""
	umount "$mnt"
	jq -s -e '[.[] | select(.status)] | map(.status) == [200, 503]' <<<"$out" >/dev/null &&
	    jq -s -e '.[0].body == "hello from allowed-tls\n" and
	    (.[1].body | fromjson | .reason == "audit-unavailable") and
	    (.[-1].end | test("^(eof|reset)"))' <<<"$out" >/dev/null ||
	    { why="want the slow 200 whole, then a 503, then the end: $(short "$out")"; return 1; }
	upreqs allowed-tls | jq -e 'map(.path) == ["/slow?ms=800"]' >/dev/null ||
	    { why="the upstream got: $(upreqs allowed-tls | jq -c 'map(.path)')"; return 1; }
}
check full_disk_pipelined full_disk_pipelined

# inj_status NAME: the status of one injected GET of /inj/NAME
inj_status() {
	HC_MAX=6 hc --resolve allowed.test:443:198.18.1.10 "https://allowed.test/inj/$1"
	echo "$cst"
}
# The disk fills: injected requests are refused; once there is room
# again they pass, with no restart, and the trail says how long it
# refused and how many; it verifies whole (issue 16).
full_disk_recovers() {
	local mnt=$WORK/tiny2 t=$WORK/tiny2/trail.jsonl i st=000 got=""
	tiny_start "$mnt" 256k || return 1
	[ "$(inj_status d0)" = 200 ] || { why="before: $out"; world_stop "$SL_PID" TERM 80; SL_PID=""; umount "$mnt"; return 1; }
	dd if=/dev/zero of="$mnt/fill" bs=4k >/dev/null 2>&1
	# the slack of the trail's last page goes first, then one is refused
	for i in $(seq 1 40); do
		st=$(inj_status "d$i")
		got="$got $st"
		[ "$st" = 503 ] && break
	done
	if [ "$st" = 503 ]; then
		st=$(inj_status d-refused)	# refused while there is no room
		got="$got $st"
		rm -f "$mnt/fill"
		for i in $(seq 1 40); do
			st=$(inj_status "back$i")
			got="$got $st"
			[ "$st" = 200 ] && break
			sleep 0.2
		done
	fi
	world_stop "$SL_PID" TERM 80
	SL_PID=""
	cp "$t" "$WORK/recovered.jsonl"
	umount "$mnt"
	grep -q ' 503 503' <<<"$got" && [ "$st" = 200 ] ||
	    { why="want 200s, 503s while full, then 200 again: $got"; return 1; }
	jq -s -e 'map(select(.type == "audit_resumed")) | length == 1 and
	    .[0].refused >= 1 and .[0].refused_ms > 0' "$WORK/recovered.jsonl" >/dev/null ||
	    { why="no audit_resumed record: $(jq -c -s 'map(select(.type == "audit_resumed"))' "$WORK/recovered.jsonl")"; return 1; }
	verify "$WORK/recovered.jsonl" || { why="verify: $out"; return 1; }
	grep -q 'could not write for [0-9]* ms in 1 interval; [1-9][0-9]* request' <<<"$out" ||
	    { why="verify does not report the outage: $out"; return 1; }
}
check full_disk_recovers full_disk_recovers

# ================================================================ crash

# crash FSYNC TRAIL PREFIX: load, SIGKILL under way; the upstream's and
# the trail's view kept for the checks
crash() {
	local lp i
	config "$2" "$1" && start || return 1
	load 100000 8 "$3" >"$WORK/$3.load" 2>&1 &
	lp=$!
	# under way: 60 requests through (a slow disk under fsync always
	# takes longer), then the kill
	for i in $(seq 200); do
		sleep 0.1
		[ "$(up_injected | grep -c "^/inj/$3-")" -ge 60 ] && break
	done
	sleep 0.3
	kill -KILL "$SL_PID"
	wait "$lp"
	SL_PID=""
	sleep 0.3
}
crash_always() {
	local miss
	crash always "$WORK/t3/audit.jsonl" k1 || return 1
	verify --open "$WORK/t3/audit.jsonl" || { why="verify --open after SIGKILL: $out"; return 1; }
	[ "$(up_injected | grep -c '^/inj/k1-')" -gt 50 ] || { why="too little load: $(cat "$WORK/k1.load")"; return 1; }
	miss=$(unaudited "$WORK/t3/audit.jsonl" k1 | wc -l)
	echo "    fsync always: the upstream got $(up_injected | grep -c '^/inj/k1-') injected requests, $miss without a record"
	[ "$miss" = 0 ] || { why="$miss requests reached the upstream without a record"; return 1; }
}
crash_batch() {
	local miss got
	crash batch "$WORK/t4/audit.jsonl" k2 || return 1
	verify --open "$WORK/t4/audit.jsonl" || { why="verify --open after SIGKILL: $out"; return 1; }
	got=$(up_injected | grep -c '^/inj/k2-')
	miss=$(unaudited "$WORK/t4/audit.jsonl" k2 | wc -l)
	# batch: a request goes once its record is queued; what the writer
	# had not taken yet dies with the process
	echo "    fsync batch: the upstream got $got injected requests, $miss without a record (queued, not yet written)"
	[ "$got" -gt 50 ] || { why="too little load"; return 1; }
	[ "$miss" -le 1000 ] || { why="$miss lost: more than a batch"; return 1; }
}
# the next start cuts a torn tail off, says so, continues the chain
crash_restart() {
	local t=$WORK/t3/audit.jsonl
	# as if the kill came mid-write (unless it did)
	[ "$(tail -c 1 "$t" | od -An -tx1 | tr -d ' ')" = 0a ] && printf '{"ts":"torn' >>"$t"
	config "$t" always && start || return 1
	stop || return 1
	grep -q 'torn record' "$WORK/sluiced.log" || { why="the torn tail was not reported"; return 1; }
	grep -q '"torn_bytes":[1-9]' "$t" ||
	    { why="no start record with torn_bytes"; return 1; }
	verify "$t" || { why="verify after the restart: $out"; return 1; }
}
check crash_always crash_always
check crash_batch crash_batch
check crash_restart crash_restart

# ================================================================ full

full_refuse() {
	local fifo=$WORK/full.fifo reader
	mkfifo "$fifo" || return 1
	config "$fifo" never "queue: 16, queue_full: refuse" && start || return 1
	out=$(load 3000 8 f1)
	grep -Eq 'refused=[1-9]' <<<"$out" || { why="no request was refused: $out"; return 1; }
	cat "$fifo" >"$WORK/full.jsonl" &
	reader=$!
	stop || return 1
	sleep 0.5
	kill "$reader" 2>/dev/null
	echo "    queue full: $out"
	[ -z "$(unaudited "$WORK/full.jsonl" f1)" ] ||
	    { why="$(unaudited "$WORK/full.jsonl" f1 | wc -l) requests reached the upstream without a record"; return 1; }
	jq -s -e 'map(select(.type == "records_dropped" and .count > 0)) | length > 0' "$WORK/full.jsonl" >/dev/null 2>&1 ||
	    { why="the dropped records were not counted"; return 1; }
}
check full_refuse full_refuse


check_done
