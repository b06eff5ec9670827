#!/bin/bash
# Control-plane benchmark: how fast sluiced registers and deletes sandboxes
# through the control API, what a registered sandbox costs in memory, and
# how fast a policy swap closes the open connections it no longer allows,
# for all sandboxes at once and for one alone.  Not a test (not part of
# make check): it prints a results block, and exits non-zero naming the
# step that failed.
#
# usage: tests/bench/ctl.sh [BUILDDIR]      (root; BUILDDIR holds sluiced)
# env:   SLUICED ($BUILDDIR/sluiced; use a build without sanitizers),
#        CTL_SANDBOXES (1000, at most 1000), CTL_PER (connections a
#        sandbox; 10, or fewer when RLIMIT_NOFILE cannot hold them all)
#
# The world is tests/integ/lib.sh's.  The sandboxes' sources are
# 198.18.16.1 .. 198.18.19.250 (/32 each, on sb's eth0; gw routes the /22
# back via sb's 198.18.0.2, so its neighbour table holds one entry, not a
# thousand); the upstream is an echo server on 198.18.1.17:7000 in up
# that holds every connection open, allowed by CIDR in the policy "open".
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top}
SLUICED=${SLUICED:-$build/sluiced}
nsb=${CTL_SANDBOXES:-1000}
UPADDR=198.18.1.17 UPPORT=7000
ONE=123		# the sandbox whose policy is swapped alone
WORLD_SRCDIR=$top
. "$top/tests/integ/lib.sh"
LOAD="$PY $top/tests/bench/ctl_load.py"

die() { echo "ctl-bench: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root"
[ -x "$SLUICED" ] || die "no $SLUICED (set SLUICED or give BUILDDIR)"
[ -n "$PY" ] || die "python3 not found"
[ "$nsb" -ge 1 ] && [ "$nsb" -le 1000 ] || die "CTL_SANDBOXES must be 1..1000"
[ "$ONE" -lt "$nsb" ] || ONE=0
if nm -D "$SLUICED" 2>/dev/null | grep -q __asan_init; then
	echo "ctl-bench: warning: $SLUICED is built with ASan; memory and speed figures mean little" >&2
fi

# File descriptors: sluiced holds 2 sockets and 2 splice pipes (6 fds) for
# each relayed connection; it raises its soft limit to the hard one itself.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
nofile=$(ulimit -n)
per_fit=$(( (nofile - 512) / (6 * nsb) ))
if [ -n "${CTL_PER:-}" ]; then
	per=$CTL_PER
else
	per=10
	if [ "$per_fit" -lt "$per" ]; then
		per=$per_fit
		echo "ctl-bench: RLIMIT_NOFILE is $nofile (hard limit; raising it needs CAP_SYS_RESOURCE):" \
		    "sluiced needs 6 fds a relayed connection, so $per a sandbox, not 10" >&2
	fi
fi
[ "$per" -ge 1 ] || die "RLIMIT_NOFILE $nofile is too small for one connection a sandbox"

tmp=$(mktemp -d /dev/shm/sluice-ctlbench.XXXXXX)
world_init ctlb$$
cleanup() { world_down; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
world_up || die "world_up failed"

# Sources: /32s on sb's eth0, one ip(8) batch; gw routes them back to sb.
$LOAD addrs "$nsb" | sed 's|.*|addr add &/32 dev eth0|' > "$tmp/addrs.ip" || die "ctl_load.py addrs failed"
ip -n "$NS_SB" -b "$tmp/addrs.ip" || die "adding the sandbox addresses failed"
ip -n "$NS_GW" route add 198.18.16.0/22 via 198.18.0.2 dev sb-br || die "route in gw failed"

mkdir -p "$tmp/pol"
cp "$top/policy.d/default.yaml" "$tmp/pol/"
cat > "$tmp/pol/open.yaml" <<POL
name: open
egress:
  default: deny
  allow:
    - cidr: $UPADDR/32
      ports: [$UPPORT]
POL
printf 'name: closed\negress:\n  default: deny\n' > "$tmp/pol/closed.yaml"
cat > "$tmp/sluiced.yaml" <<CFG
listen: {transparent: ["0.0.0.0:15001"], control: $tmp/control.sock}
resolvers: ["198.18.1.2:53"]
policy_dir: $tmp/pol
state_dir: $tmp/sbstate
audit: {path: $tmp/audit.jsonl, fsync: batch}
workers: 2
limits: {connections: 1024}
CFG

world_load_nft || die "loading contrib/sluice.nft failed"
world_spawn "$NS_UP" "$tmp/upstream.log" $LOAD upstream "$UPADDR" "$UPPORT" "$tmp/up.ready"
world_wait_file "$tmp/up.ready" 100 || { cat "$tmp/upstream.log" >&2; die "the upstream did not start"; }
world_spawn "$NS_GW" "$tmp/sluiced.log" "$SLUICED" -c "$tmp/sluiced.yaml"
sl=$SPAWNED
world_wait_listen "$NS_GW" 15001 && world_wait_file "$tmp/control.sock" ||
    { cat "$tmp/sluiced.log" >&2; die "sluiced did not start"; }
sleep 0.5

rss() { awk '/^VmRSS/ {print $2}' "/proc/$sl/status"; }
lck() { awk '/^VmLck/ {print $2}' "/proc/$sl/status"; }
alive() { kill -0 "$sl" 2>/dev/null || { tail -20 "$tmp/sluiced.log" >&2; die "sluiced died ($1)"; }; }
field() { $PY -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
ctl() {		# STEP ARGS...: one ctl_load.py run; its JSON to stdout
	local step=$1 out; shift
	out=$($LOAD "$@") || { alive "$step"; die "$step failed"; }
	alive "$step"
	echo "$out"
}
fmt() { awk -v v="$1" -v f="$2" 'BEGIN {printf f, v}'; }

echo "ctl-bench: $SLUICED, $nsb sandboxes, $per connections each" >&2
rss0=$(rss) lck0=$(lck)
r=$(ctl "registering (1 client)" reg "$tmp/control.sock" "$nsb" 1 open) || exit 1
reg1=$(echo "$r" | field rate) reg1c=$(echo "$r" | field per100)
sleep 0.2
rss1=$(rss) lck1=$(lck)
r=$(ctl "deleting (1 client)" del "$tmp/control.sock" "$nsb" 1) || exit 1
del1=$(echo "$r" | field rate) del1c=$(echo "$r" | field per100)
sleep 0.2
rss_del1=$(rss)
r=$(ctl "registering (4 clients)" reg "$tmp/control.sock" "$nsb" 4 open) || exit 1
reg4=$(echo "$r" | field rate)
echo "ctl-bench: registered: $(fmt "$reg1" %.0f)/s, $(fmt "$reg4" %.0f)/s with 4 clients;" \
    "RSS $rss0 -> $rss1 KiB; opening connections" >&2

r=$(in_ns "$NS_SB" $LOAD conns "$tmp/control.sock" "$nsb" "$per" "$UPADDR" "$UPPORT" "$sl" "$ONE") ||
    { alive "connections"; die "the connection step failed"; }
alive "connections"
c=$r
rss_conns=$(rss)

r=$(ctl "deleting (4 clients)" del "$tmp/control.sock" "$nsb" 4) || exit 1
del4=$(echo "$r" | field rate)
sleep 0.2
rss3=$(rss)
left=$($PY - "$tmp/control.sock" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b"GET /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
d = b""
while True:
    x = s.recv(65536)
    if not x: break
    d += x
print(json.loads(d.partition(b"\r\n\r\n")[2])["sandboxes"])
PY
) || die "GET /v1/status failed"
[ "$left" = 0 ] || die "$left sandboxes left after deleting all"

n=$(echo "$c" | field opened)
printf '\nsluiced %s: %d sandboxes (one /32 each, policy by name), %d connections (%d a sandbox), workers 2\n' \
    "$SLUICED" "$nsb" "$n" "$per"
[ "$per" -lt 10 ] && printf 'note: %d connections a sandbox, not 10: RLIMIT_NOFILE is %d here and sluiced uses 6 fds a relayed connection\n' \
    "$per" "$nofile"
printf 'registrations: %.0f/s (1 client), %.0f/s (4 clients)\n' "$reg1" "$reg4"
printf '  1 client, each hundred in turn: %s /s\n' "$reg1c"
printf 'rss: %d KiB -> %d KiB after %d registrations: +%.1f KiB/sandbox (locked: +%.1f KiB/sandbox)\n' \
    "$rss0" "$rss1" "$nsb" "$(awk -v a="$rss1" -v b="$rss0" -v n="$nsb" 'BEGIN {print (a - b) / n}')" \
    "$(awk -v a="$lck1" -v b="$lck0" -v n="$nsb" 'BEGIN {print (a - b) / n}')"
printf 'deletes: %.0f/s (1 client, no connections), %.0f/s (4 clients, after the connections)\n' "$del1" "$del4"
printf '  1 client, each hundred in turn: %s /s\n' "$del1c"
printf 'rss after deleting all: %d KiB (first round), %d KiB (second; was %d with %d connections open)\n' \
    "$rss_del1" "$rss3" "$rss_conns" "$n"
printf '%d conns: opened at %.0f/s, sluiced %.1f fds/conn; PUT /v1/policies/open (deny all) answered in %.1f ms, all closed %.1f ms after the PUT\n' \
    "$n" "$(echo "$c" | field open_rate)" "$(echo "$c" | field fds_per_conn)" \
    "$(echo "$c" | field all_put_ms)" "$(echo "$c" | field all_closed_ms)"
printf 'single sandbox: PUT /v1/sandboxes/sb%d/policy (deny all) answered in %.1f ms, its %d closed %.1f ms after the PUT, the other %d still open\n' \
    "$ONE" "$(echo "$c" | field one_put_ms)" "$(echo "$c" | field one_n)" \
    "$(echo "$c" | field one_closed_ms)" "$(echo "$c" | field one_others_open)"
