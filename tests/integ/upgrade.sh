#!/bin/bash
# upgrade.sh: integration tests of the zero-downtime upgrade (issue 16):
# a new sluiced takes the listening sockets, the control socket and the
# audit trail from the running one while sandboxes keep connecting.
#
# usage: tests/integ/upgrade.sh [-k] [-v]
# Environment: top_srcdir, top_builddir (set by make check), SLUICED,
# SLUICECTL, PYTHON.  Exit: 0 all passed, 1 something failed, 77 skipped.
# Needs root: it creates namespaces.
#
# The sandbox "box" (static) and "box2" (registered through the API, so
# restored from state_dir) have the policy "up": requests to allowed.test
# under /inj/ get "Authorization: Bearer {{secret:tok}}", /pub/ passes;
# other.test passes through untouched.  The load (load_start) runs in
# threads from the sandbox until told to stop: kept-alive injected
# requests, a new intercepted connection per request, a new pass-through
# TLS connection per request, and DNS queries through sluice.  Every
# exception (a connection refused or reset, a request unanswered) and
# every answer but 200 (NOERROR for DNS) counts as an error.
#   upgrade_api       `sluicectl daemon upgrade` under load: a new pid
#                     serves, the old one exits by itself with status 0
#                     after draining, no load error, box2's CA and policy
#                     are the same, the trail verifies as one chain with
#                     the "upgrade" and "start" records between the two,
#                     and every request the upstream got with the
#                     credential has its record
#   upgrade_drains    the old process answers a kept-alive connection that
#                     was idle at the upgrade once more, with
#                     "Connection: close", and that request's record
#                     reaches the trail through the new process; a slow
#                     answer in flight arrives whole
#   upgrade_signal    SIGUSR2 to the process that took over (not our
#                     child), under load: the same again
#   upgrade_fails     a new binary that cannot start (a broken
#                     configuration): the API says why, the running
#                     process goes on serving and accepting changes
#   upgrade_refused   an upgrade while one is under way is refused (409)
#   upgrade_ends      SIGTERM ends the last process, no sanitizer report
# Output: "ok NAME" or "FAIL NAME: why" per check, then "N passed, N failed".

# shellcheck source=tests/integ/check.sh
. "$(dirname "$0")/check.sh"

check_needs curl openssl dnsmasq timeout jq dig

check_work upgrade
PKI=$WORK/pki CA=$WORK/pki/ca.pem STATE=$WORK/state KEYS=$WORK/keys
SOCK=$WORK/control.sock POLDIR=$WORK/policy.d SECDIR=$WORK/secrets
AUDIT=$WORK/audit.jsonl
[ -x "$SLUICECTL" ] || setup_fail "$SLUICECTL not built"

last="" out=""
check_verbose() {
	echo "    last: $last"
	printf '%s\n' "$out" | head -20 | sed 's/^/    out: /'
	tail -8 "$WORK/sluiced.log" 2>/dev/null | sed 's/^/    log: /'
}
short() { printf '%s' "$1" | tr '\n' ' ' | head -c 600; }

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
cat >"$POLDIR/up.yaml" <<EOF
name: up
egress:
  default: deny
  allow:
    - {domain: other.test, ports: [443]}
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
    inject:
      set: {authorization: "Bearer {{secret:tok}}"}
EOF
cat >"$WORK/sluiced.yaml" <<EOF
listen:
  transparent: ["0.0.0.0:15001", "[::]:15001"]
  dns: ["0.0.0.0:15053"]
  control: $SOCK
resolvers: ["198.18.1.2:53"]
policy_dir: $POLDIR
state_dir: $WORK/sbstate
secret_dir: $SECDIR
gateway_key: $KEYS/gateway.key
signing_key: $KEYS/signing.key
upstream_ca: $CA
audit: {path: $AUDIT, fsync: always, checkpoint_records: 200}
workers: 2
timeouts: {handshake: 5s, idle: 30s, connect: 3s, drain: 4s}
sandboxes:
  - {id: box, sources: ["198.18.0.2"], policy: up}
EOF
cp "$WORK/sluiced.yaml" "$WORK/sluiced.yaml.good"

# Every sluiced of the run, the ones that took over included (they are not
# our children, and world_down's sweep of the namespace is the last resort).
cleanup_more() { pkill -KILL -f "$SLUICED -c $WORK/sluiced.yaml" 2>/dev/null; :; }

# sl_pid: the pid that answers the control API now
sl_pid() { curl -s --max-time 5 --unix-socket "$SOCK" http://s/v1/status | jq -r .pid; }
# gone PID TENTHS: PID has exited within TENTHS
gone() {
	local n=0
	while kill -0 "$1" 2>/dev/null; do
		[ $n -ge "$2" ] && return 1
		sleep 0.1; n=$((n + 1))
	done
}

# load_start NAME: the load of the header, until $WORK/NAME.stop exists
# and each kind made at least 5 (30 s at most after that);
# its counts go to $WORK/NAME.out ("key=value" words), the injected
# paths answered 200 to $WORK/NAME.ok, and its progress (requests answered
# so far) to $WORK/NAME.n
load_start() {
	rm -f "$WORK/$1.stop" "$WORK/$1.out" "$WORK/$1.n"
	timeout 120 ip netns exec "$NS_SB" "$PY" - "$WORK/box.pem" "$CA" "$WORK/$1" <<-'EOF' &
	import os, socket, ssl, struct, sys, threading, time
	boxca, ca, base = sys.argv[1], sys.argv[2], sys.argv[3]
	ictx = ssl.create_default_context(cafile=boxca)
	pctx = ssl.create_default_context(cafile=ca)
	lock = threading.Lock()
	st = {"ok": 0, "bad": 0, "err": 0, "ka": 0, "cc": 0, "pt": 0, "dns": 0}
	errs, oks = [], []
	asked = []
	def stop():
	    # asked to stop, and every kind made its 5 (a loaded machine is
	    # slow), or 30 s since it was asked
	    if not os.path.exists(base + ".stop"):
	        return False
	    if not asked:
	        asked.append(time.time())
	    with lock:
	        enough = all(st[k] >= 5 for k in ("ka", "cc", "pt", "dns"))
	    return enough or time.time() - asked[0] > 30
	def answer(f):
	    line = f.readline()
	    if not line:
	        raise IOError("no answer")
	    status = int(line.split()[1])
	    clen, chunked, close = 0, False, False
	    while True:
	        h = f.readline()
	        if h == b"":
	            raise IOError("cut head")
	        if h == b"\r\n":
	            break
	        k, _, v = h.decode().partition(":")
	        if k.lower() == "content-length":
	            clen = int(v)
	        elif k.lower() == "transfer-encoding":
	            chunked = True
	        elif k.lower() == "connection" and "close" in v.lower():
	            close = True
	    while chunked:
	        m = int(f.readline().split(b";")[0], 16)
	        if len(f.read(m + 2)) != m + 2:
	            raise IOError("cut chunk")
	        if m == 0:
	            break
	    if not chunked and len(f.read(clen)) != clen:
	        raise IOError("cut body")
	    return status, close
	def tally(kind, status, path=None, what=""):
	    with lock:
	        st[kind] += 1
	        if status == 200:
	            st["ok"] += 1
	            if path:
	                oks.append(path)
	        else:
	            st["bad"] += 1
	            errs.append("%s %s %s" % (kind, status, what))
	def fail(kind, e):
	    with lock:
	        st["err"] += 1
	        errs.append("%s %r" % (kind, e))
	def kept(i):
	    s = f = None
	    k = 0
	    while not stop():
	        try:
	            if s is None:
	                s = ictx.wrap_socket(socket.create_connection(("198.18.1.10", 443), 5),
	                                     server_hostname="allowed.test")
	                f = s.makefile("rb")
	            path = "/inj/ka%d-%d" % (i, k)
	            k += 1
	            s.sendall(("GET %s HTTP/1.1\r\nHost: allowed.test\r\n\r\n" % path).encode())
	            status, close = answer(f)
	            tally("ka", status, path)
	            if close:
	                s.close()
	                s = None
	        except Exception as e:
	            fail("ka", e)
	            s = None
	            time.sleep(0.05)
	        time.sleep(0.005)
	def fresh(i):
	    k = 0
	    while not stop():
	        path = "/inj/cc%d-%d" % (i, k)
	        k += 1
	        try:
	            s = ictx.wrap_socket(socket.create_connection(("198.18.1.10", 443), 5),
	                                 server_hostname="allowed.test")
	            s.sendall(("GET %s HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n" % path).encode())
	            status, _ = answer(s.makefile("rb"))
	            s.close()
	            tally("cc", status, path)
	        except Exception as e:
	            fail("cc", e)
	            time.sleep(0.05)
	def passthrough():
	    k = 0
	    while not stop():
	        k += 1
	        try:
	            s = pctx.wrap_socket(socket.create_connection(("198.18.1.11", 443), 5),
	                                 server_hostname="other.test")
	            s.sendall(b"GET /pt-%d HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n" % k)
	            status, _ = answer(s.makefile("rb"))
	            s.close()
	            tally("pt", status)
	        except Exception as e:
	            fail("pt", e)
	            time.sleep(0.05)
	def dns():
	    k = 0
	    while not stop():
	        k += 1
	        q = struct.pack(">HHHHHH", k & 0xffff, 0x0100, 1, 0, 0, 0) + \
	            b"\x07allowed\x04test\x00" + struct.pack(">HH", 1, 1)
	        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
	        s.settimeout(3)
	        try:
	            s.sendto(q, ("198.18.1.2", 53))
	            a, _ = s.recvfrom(2048)
	            rcode = a[3] & 0xf
	            tally("dns", 200 if a[:2] == q[:2] and rcode == 0 else rcode, what="rcode")
	        except Exception as e:
	            fail("dns", e)
	        s.close()
	        time.sleep(0.02)
	def progress():
	    while not stop():
	        with lock:
	            n = st["ok"]
	        open(base + ".n.tmp", "w").write("%d\n" % n)
	        os.rename(base + ".n.tmp", base + ".n")
	        time.sleep(0.1)
	ts = [threading.Thread(target=kept, args=(i,)) for i in range(3)] + \
	     [threading.Thread(target=fresh, args=(i,)) for i in range(2)] + \
	     [threading.Thread(target=passthrough), threading.Thread(target=dns),
	      threading.Thread(target=progress)]
	for t in ts:
	    t.start()
	for t in ts:
	    t.join()
	open(base + ".ok", "w").write("\n".join(oks) + "\n")
	open(base + ".err", "w").write("\n".join(errs[:20]) + "\n")
	open(base + ".out", "w").write(" ".join("%s=%d" % kv for kv in st.items()) + "\n")
	EOF
	LOAD_PID=$!
	BG_PIDS+=("$LOAD_PID")
}
# load_n NAME: requests answered 200 so far
load_n() { cat "$WORK/$1.n" 2>/dev/null || echo 0; }
# load_grows NAME: more requests are answered within 3 s than now
load_grows() {
	local n0 n=0
	n0=$(load_n "$1")
	while [ $n -lt 30 ]; do
		[ "$(load_n "$1")" -gt $((n0 + 20)) ] && return 0
		sleep 0.1; n=$((n + 1))
	done
	return 1
}
# load_stop NAME: stops it and checks it saw no error and enough of each kind
load_stop() {
	local kind v
	touch "$WORK/$1.stop"
	wait "$LOAD_PID" 2>/dev/null
	out=$(cat "$WORK/$1.out" 2>/dev/null)
	[ -n "$out" ] || { why="the load did not finish"; return 1; }
	grep -qw 'err=0' <<<"$out" && grep -qw 'bad=0' <<<"$out" ||
	    { why="load: $out: $(head -5 "$WORK/$1.err" | tr '\n' ';')"; return 1; }
	for kind in ka cc pt dns; do
		v=$(tr ' ' '\n' <<<"$out" | sed -n "s/^$kind=//p")
		[ "${v:-0}" -ge 5 ] || { why="load: too few $kind: $out"; return 1; }
	done
}

# unaudited NAME: paths the upstream got with the credential that have no
# request record in the trail
unaudited() {
	"$PY" - "$AUDIT" "$STATE/allowed-tls.json" "$(head -1 "$WORK/canary-values")" <<-'EOF'
	import json, sys
	have = set()
	for line in open(sys.argv[1], errors="replace"):
	    try:
	        r = json.loads(line)
	    except ValueError:
	        continue
	    if r.get("type") == "request" and r.get("action") == "inject":
	        have.add(r.get("path"))
	for r in json.load(open(sys.argv[2]))["requests"]:
	    h = dict((k.lower(), v) for k, v in r["headers"])
	    if r["path"].startswith("/inj/") and h.get("authorization") == "Bearer " + sys.argv[3] \
	            and r["path"] not in have:
	        print(r["path"])
	EOF
}
# trail_ok OLD NEW: the trail verifies whole, and the handover from OLD to
# NEW is in it: "upgrade" to NEW, then NEW's "start" from OLD
trail_ok() {
	last="sluicectl audit verify $AUDIT"
	out=$("$SLUICECTL" audit verify --open --pub "$KEYS/signing.pub" "$AUDIT" 2>&1) ||
	    { why="verify: $(short "$out")"; return 1; }
	jq -se --argjson o "$1" --argjson n "$2" '
	    (map(.type == "upgrade" and .to_pid == $n) | index(true)) as $u |
	    (map(.type == "start" and .pid == $n and .upgraded_from == $o) | index(true)) as $s |
	    $u != null and $s != null and $u < $s' "$AUDIT" >/dev/null ||
	    { why="no upgrade $1 -> $2 in the trail: $(grep -E '"(upgrade|start)"' "$AUDIT" | tail -3 | tr '\n' ' ')"; return 1; }
	out=$(unaudited)
	[ -z "$out" ] || { why="injected with no record: $(short "$out")"; return 1; }
}

# ---------------------------------------------------------------- checks

world_spawn "$NS_GW" "$WORK/sluiced.log" "$SLUICED" -c "$WORK/sluiced.yaml"
SL_PID=$SPAWNED
world_wait_listen "$NS_GW" 15001 100 && world_wait_file "$SOCK" 50 ||
    setup_fail "sluiced did not start: $(tail -3 "$WORK/sluiced.log" | tr '\n' ' ')"
curl -s -f --unix-socket "$SOCK" http://s/v1/sandboxes/box/ca.pem >"$WORK/box.pem" ||
    setup_fail "no CA for box"
api POST /v1/sandboxes '{"id":"box2","sources":["198.18.0.3"],"policy":"up"}'
[ "$st" = 201 ] || setup_fail "registering box2: $st $(short "$out")"
BOX2_FP=$(jq -r .ca.fingerprint_sha256 <<<"$out")

upgrade_api() {
	local old=$SL_PID new
	load_start l1
	load_grows l1 || { why="the load does not run: $(cat "$WORK/l1.err" 2>/dev/null)"; return 1; }
	last="sluicectl daemon upgrade"
	out=$("$SLUICECTL" --socket "$SOCK" daemon upgrade 2>&1) ||
	    { why="daemon upgrade: $(short "$out")"; load_stop l1; return 1; }
	new=$(sed -n 's/^upgraded: pid \([0-9]*\) serves.*/\1/p' <<<"$out")
	[ -n "$new" ] && [ "$new" != "$old" ] && [ "$(sl_pid)" = "$new" ] ||
	    { why="after the upgrade: '$out', status pid $(sl_pid)"; load_stop l1; return 1; }
	load_grows l1 || { why="the load stalled after the upgrade"; load_stop l1; return 1; }
	# the old one drains (timeouts.drain 4 s) and exits by itself
	gone "$old" 80 || { why="pid $old still runs 8 s after the upgrade"; load_stop l1; return 1; }
	wait "$old"
	[ $? = 0 ] || { why="pid $old exited with $?"; load_stop l1; return 1; }
	load_grows l1 || { why="the load stalled once the old process went"; load_stop l1; return 1; }
	load_stop l1 || return 1
	api GET /v1/status
	[ "$(jq -r .upgraded_from <<<"$out")" = "$old" ] || { why="status: $(short "$out")"; return 1; }
	api GET /v1/sandboxes/box2
	[ "$st" = 200 ] && [ "$(jq -r .ca.fingerprint_sha256 <<<"$out")" = "$BOX2_FP" ] &&
	    [ "$(jq -r .policy <<<"$out")" = up ] || { why="box2 after: $st $(short "$out")"; return 1; }
	trail_ok "$old" "$new" || return 1
	[ -z "$(sanitizer)" ] || { why="sanitizer: $(sanitizer)"; return 1; }
	SL_PID=$new
}

# The old process finishes what it has: a kept-alive connection idle at
# the upgrade is answered once more (with "Connection: close", then the
# end), and that request's record reaches the trail through the new
# process; a slow answer in flight arrives whole.
upgrade_drains() {
	local old=$SL_PID new res
	rm -f "$WORK/d.ready" "$WORK/d.go"
	timeout 60 ip netns exec "$NS_SB" "$PY" - "$WORK/box.pem" "$WORK/d" <<-'EOF' >"$WORK/d.out" 2>&1 &
	import os, socket, ssl, sys, time
	ctx = ssl.create_default_context(cafile=sys.argv[1])
	base = sys.argv[2]
	def conn():
	    s = ctx.wrap_socket(socket.create_connection(("198.18.1.10", 443), 5),
	                        server_hostname="allowed.test")
	    return s, s.makefile("rb")
	def head(f):
	    st = f.readline().split()[1].decode()
	    hs = {}
	    while True:
	        h = f.readline()
	        if h in (b"\r\n", b""):
	            break
	        k, _, v = h.decode().partition(":")
	        hs[k.strip().lower()] = v.strip()
	    if "chunked" in hs.get("transfer-encoding", ""):
	        while True:
	            m = int(f.readline().split(b";")[0], 16)
	            f.read(m + 2)
	            if m == 0:
	                break
	    else:
	        f.read(int(hs.get("content-length", "0")))
	    return st, hs
	a, fa = conn()
	a.sendall(b"GET /inj/idle-1 HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	st, hs = head(fa)
	b, fb = conn()
	b.sendall(b"GET /slow?ms=2500 HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
	time.sleep(0.3)
	open(base + ".ready", "w").close()
	while not os.path.exists(base + ".go"):
	    time.sleep(0.05)
	a.sendall(b"GET /inj/idle-2 HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	st2, hs2 = head(fa)
	end = fa.read(1)
	st3, hs3 = head(fb)
	print("first=%s second=%s conn=%s eof=%s slow=%s" % (st, st2,
	      hs2.get("connection", "-"), end == b"", st3))
	EOF
	local cl=$!
	world_wait_file "$WORK/d.ready" 100 || { why="the client did not start: $(cat "$WORK/d.out")"; return 1; }
	out=$("$SLUICECTL" --socket "$SOCK" daemon upgrade 2>&1) || { why="daemon upgrade: $(short "$out")"; return 1; }
	new=$(sl_pid)
	touch "$WORK/d.go"
	wait "$cl"
	res=$(cat "$WORK/d.out")
	[ "$res" = "first=200 second=200 conn=close eof=True slow=200" ] ||
	    { why="the client: $(short "$res")"; return 1; }
	gone "$old" 80 || { why="pid $old still runs"; return 1; }
	grep -q '"path":"/inj/idle-2"' "$AUDIT" || { why="no record of the request the old process answered last"; return 1; }
	grep -qE "pid $old finished; it sent [1-9][0-9]* audit record" "$WORK/sluiced.log" ||
	    { why="no record came through the new process: $(grep "pid $old finished" "$WORK/sluiced.log")"; return 1; }
	trail_ok "$old" "$new" || return 1
	SL_PID=$new
}

upgrade_signal() {
	local old=$SL_PID new n=0
	load_start l2
	load_grows l2 || { why="the load does not run"; return 1; }
	kill -USR2 "$old"
	while new=$(sl_pid); [ "$new" = "$old" ] || [ -z "$new" ]; do
		[ $n -ge 100 ] && { why="no new process 10 s after SIGUSR2"; load_stop l2; return 1; }
		sleep 0.1; n=$((n + 1))
	done
	gone "$old" 80 || { why="pid $old still runs 8 s after SIGUSR2"; load_stop l2; return 1; }
	load_grows l2 || { why="the load stalled after the upgrade"; load_stop l2; return 1; }
	load_stop l2 || return 1
	trail_ok "$old" "$new" || return 1
	grep -q "pid $old hands over and drains" "$WORK/sluiced.log" ||
	    { why="the log does not say who drains"; return 1; }
	SL_PID=$new
}

upgrade_fails() {
	local before
	before=$(sl_pid)
	printf 'listen: {transparent: ["0.0.0.0:15001"]\n' >"$WORK/sluiced.yaml"
	api POST /v1/upgrade
	cp "$WORK/sluiced.yaml.good" "$WORK/sluiced.yaml"
	[ "$st" = 500 ] && jq -e '.error | test("exited with status 1")' <<<"$out" >/dev/null ||
	    { why="a broken new process: $st $(short "$out")"; return 1; }
	[ "$(sl_pid)" = "$before" ] || { why="pid $(sl_pid) answers, not $before"; return 1; }
	api GET /v1/status
	[ "$(jq -r .upgrade <<<"$out")" = none ] || { why="status: $(short "$out")"; return 1; }
	api GET /metrics
	grep -qx 'sluice_upgrades_failed_total 1' <<<"$out" ||
	    { why="metrics: $(grep upgrades <<<"$out")"; return 1; }
	# still serving, and taking changes
	api PUT /v1/sandboxes/box2/policy '{"policy":"default"}'
	[ "$st" = 200 ] || { why="a change after the failed upgrade: $st $(short "$out")"; return 1; }
	api PUT /v1/sandboxes/box2/policy '{"policy":"up"}'
	load_start l3
	load_grows l3 || { why="no traffic after the failed upgrade"; load_stop l3; return 1; }
	load_stop l3
}

# up2 A B: two POST /v1/upgrade at once, answers in $WORK/upA.json and
# upB.json, statuses in stA and stB
up2() {
	local a pids=""
	for a in "$1" "$2"; do
		curl -s --max-time 30 --unix-socket "$SOCK" -o "$WORK/up$a.json" \
		    -w '%{http_code}' -X POST http://s/v1/upgrade >"$WORK/up$a.st" &
		pids="$pids $!"
	done
	# shellcheck disable=SC2086
	wait $pids
}

upgrade_refused() {
	local old=$SL_PID new old2 try st1 st2 ok refused
	# Two at once: one upgrades, the other is refused while it is under
	# way.  Which comes first is the scheduler's choice, and on a loaded
	# machine the second may only come once the first is over (then it is
	# an upgrade of its own, from the new process): tried again then.
	for try in 1 2 3 4 5; do
		up2 1 2
		st1=$(cat "$WORK/up1.st") st2=$(cat "$WORK/up2.st")
		case "$st1/$st2" in
		200/409) ok=$WORK/up1.json refused=$WORK/up2.json ;;
		409/200) ok=$WORK/up2.json refused=$WORK/up1.json ;;
		200/200)
			# one after the other: the last one's process serves now
			new=$(jq -r .pid "$WORK/up1.json") old2=$(jq -r .pid "$WORK/up2.json")
			[ "$(jq -r .previous_pid "$WORK/up2.json")" = "$new" ] && new=$old2
			[ "$(sl_pid)" = "$new" ] ||
			    { why="two upgrades in a row, but pid $(sl_pid) serves, not $new"; return 1; }
			SL_PID=$new old=$new
			continue ;;
		*) why="the two upgrades: $st1 $(cat "$WORK/up1.json"), $st2 $(cat "$WORK/up2.json")"; return 1 ;;
		esac
		grep -q 'under way' "$refused" ||
		    { why="the refused upgrade: $(cat "$refused")"; return 1; }
		new=$(jq -r .pid "$ok" 2>/dev/null)
		[ -n "$new" ] && [ "$new" != "$old" ] && [ "$(sl_pid)" = "$new" ] ||
		    { why="the upgrade: $(cat "$ok")"; return 1; }
		gone "$old" 80 || { why="pid $old still runs"; return 1; }
		SL_PID=$new
		return 0
	done
	why="five pairs of upgrades never overlapped"
	return 1
}

upgrade_ends() {
	kill -TERM "$SL_PID"
	gone "$SL_PID" 80 || { why="pid $SL_PID still runs 8 s after SIGTERM"; return 1; }
	[ ! -e "$SOCK" ] || { why="the control socket is left"; return 1; }
	[ -z "$(sanitizer)" ] || { why="sanitizer: $(sanitizer)"; return 1; }
	"$SLUICECTL" audit verify --pub "$KEYS/signing.pub" "$AUDIT" >/dev/null 2>&1 ||
	    { why="the trail does not verify at the end"; return 1; }
}

check upgrade_api upgrade_api
check upgrade_drains upgrade_drains
check upgrade_signal upgrade_signal
check upgrade_fails upgrade_fails
check upgrade_refused upgrade_refused
check upgrade_ends upgrade_ends

check_done
