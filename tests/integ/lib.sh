# lib.sh: the test world of sluice's integration tests and demo (bash).
#
# Source it, then call world_init [SUFFIX] and world_up.  The world is a set of
# network namespaces, unique to this process ($$ unless a suffix is given):
#
#   sb  198.18.0.2/24  fd00:5c::1:2/112  ─┐
#   sb2 198.18.0.3/24  fd00:5c::1:3/112  ─┤ bridge sb-br in gw (ports isolated)
#                                         │ 198.18.0.1/24 fd00:5c::1:1/112
#   gw  (sluiced runs here; contrib/sluice.nft loaded; ip_forward=0)
#       gw-up 198.18.1.1/24 fd00:5c::2:1/112
#                                         │ veth
#   up  198.18.1.2/24 fd00:5c::2:2/112 (dnsmasq on :53) plus one address per
#       test host: 198.18.1.10..20 and fd00:5c::2:10..fd00:5c::2:20
#
# The sandboxes route everything via gw; gw has routes only to its two links
# and up only back to the sandbox subnet, so no packet can leave the world
# (there is no default route out of gw or up, and nothing links the
# namespaces to the host's own network).
#
# The test internet (world_start_upstreams):
#   allowed.test  198.18.1.10 fd00:5c::2:10  allowed-tls :443 allowed-http :80
#   other.test    198.18.1.11 fd00:5c::2:11  other-tls :443   other-http :80
#   denied.test   198.18.1.12 fd00:5c::2:12  denied-tls :443  denied-http :80
#   blocked.test  198.18.1.13                blocked-tls :443
#   (no name)     198.18.1.14 fd00:5c::2:14  bare-tls :443    bare-echo :7
#   (no name)     198.18.1.15 fd00:5c::2:15  cidr-tls :443    cidr-echo :7
#                                            cidr-echo8 :8
#   xn--bcher-kva.test (IDN "bücher.test")
#                 198.18.1.16 fd00:5c::2:16  idn-tls :443
#   private.test  10.0.0.5 (never reachable: nothing listens, no route)
#   gw.test       198.18.1.1 (the gateway itself: gwself-tls :443 runs in gw,
#                 and gwself-echo on 198.18.0.1:22, its sandbox side)
#   udp-sink      198.18.1.10 udp :443 (counts datagrams, e.g. QUIC)
#   dns-sink      198.18.1.20 udp :53 (counts datagrams, never answers: the
#                 server dnsmasq forwards blackhole.test to)
#   sb2-echo      198.18.0.3 :7 in sb2 (lateral movement between sandboxes)
# Every server counts accepted connections, TLS handshakes, SNI, requests
# (method, path, Host) in a JSON state file (tests/integ/upstream.py).
#
# Every process started through world_spawn is killed by world_down, and so
# is anything else still running inside the namespaces; world_down deletes
# the namespaces (and with them every link).  Call world_down from a trap.

WORLD_SRCDIR=${WORLD_SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PY=${PYTHON:-$(python3 -c "import sys; print(sys.executable)" 2>/dev/null)}
UPSTREAM_PY=$WORLD_SRCDIR/tests/integ/upstream.py
WORLD_PIDS=""

# Test names of the PKI (certs/mkpki.sh arguments).
WORLD_CERT_NAMES="allowed.test other.test denied.test blocked.test private.test \
gw.test,198.18.1.1 198.18.1.14,fd00:5c::2:14 198.18.1.15,fd00:5c::2:15 \
xn--bcher-kva.test"

world_log() { echo "world: $*" >&2; }

# world_init [SUFFIX]: choose the namespace names; nothing is created yet.
world_init() {
	local s=${1:-$$}
	NS_SB=sl-sb-$s NS_SB2=sl-sb2-$s NS_GW=sl-gw-$s NS_UP=sl-up-$s
	WORLD_NSES="$NS_SB $NS_SB2 $NS_GW $NS_UP"
	WORLD_CREATED=""
}

# world_available: 0 if this machine can build the world (root, ip netns, nft).
world_available() {
	local probe=sl-probe-$$
	[ "$(id -u)" = 0 ] || { echo "not root"; return 1; }
	command -v ip >/dev/null 2>&1 || { echo "ip (iproute2) not found"; return 1; }
	command -v nft >/dev/null 2>&1 || { echo "nft not found"; return 1; }
	ip netns add "$probe" 2>/dev/null || { echo "ip netns add failed"; return 1; }
	if ! ip netns exec "$probe" nft list ruleset >/dev/null 2>&1; then
		ip netns del "$probe"; echo "nft unusable in a namespace"; return 1
	fi
	ip netns del "$probe"
	return 0
}

in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

_w() { "$@" || { world_log "failed: $*"; return 1; }; }

# world_up: create the namespaces and links described above.
world_up() {
	local ns i
	for ns in $WORLD_NSES; do
		_w ip netns add "$ns" || return 1
		WORLD_CREATED="$WORLD_CREATED $ns"
		# no DAD, so addresses are usable at once; set before links exist
		in_ns "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0 \
		    net.ipv6.conf.default.accept_dad=0 >/dev/null
		_w ip -n "$ns" link set lo up || return 1
		# sandboxes resolve through the gateway (redirected to sluiced)
		if [ "$ns" = "$NS_SB" ] || [ "$ns" = "$NS_SB2" ]; then
			mkdir -p "/etc/netns/$ns"
			printf 'nameserver 198.18.0.1\noptions timeout:1 attempts:1\n' \
			    >"/etc/netns/$ns/resolv.conf"
		fi
	done
	# gw: nothing is routed
	in_ns "$NS_GW" sysctl -qw net.ipv4.ip_forward=0 \
	    net.ipv6.conf.all.forwarding=0 >/dev/null
	_w ip -n "$NS_GW" link add sb-br type bridge || return 1
	in_ns "$NS_GW" sysctl -qw net.ipv6.conf.sb-br.accept_dad=0 >/dev/null
	_w ip -n "$NS_GW" link add gw-sb1 type veth peer name eth0 netns "$NS_SB" || return 1
	_w ip -n "$NS_GW" link add gw-sb2 type veth peer name eth0 netns "$NS_SB2" || return 1
	_w ip -n "$NS_GW" link add gw-up type veth peer name eth0 netns "$NS_UP" || return 1
	_w ip -n "$NS_GW" link set gw-sb1 master sb-br || return 1
	_w ip -n "$NS_GW" link set gw-sb2 master sb-br || return 1
	# Isolated ports: sandboxes reach the gateway, never each other (frames
	# bridged port to port would bypass the IP-layer ruleset).
	_w ip -n "$NS_GW" link set gw-sb1 type bridge_slave isolated on || return 1
	_w ip -n "$NS_GW" link set gw-sb2 type bridge_slave isolated on || return 1
	for i in sb-br gw-sb1 gw-sb2 gw-up; do
		_w ip -n "$NS_GW" link set "$i" up || return 1
	done
	_w ip -n "$NS_GW" addr add 198.18.0.1/24 dev sb-br || return 1
	_w ip -n "$NS_GW" addr add fd00:5c::1:1/112 dev sb-br nodad || return 1
	_w ip -n "$NS_GW" addr add 198.18.1.1/24 dev gw-up || return 1
	_w ip -n "$NS_GW" addr add fd00:5c::2:1/112 dev gw-up nodad || return 1

	_world_sandbox "$NS_SB" 2 || return 1
	_world_sandbox "$NS_SB2" 3 || return 1

	_w ip -n "$NS_UP" link set eth0 up || return 1
	_w ip -n "$NS_UP" addr add 198.18.1.2/24 dev eth0 || return 1
	_w ip -n "$NS_UP" addr add fd00:5c::2:2/112 dev eth0 nodad || return 1
	for i in 10 11 12 13 14 15 16 17 18 19 20; do
		_w ip -n "$NS_UP" addr add "198.18.1.$i/24" dev eth0 || return 1
		_w ip -n "$NS_UP" addr add "fd00:5c::2:$i/112" dev eth0 nodad || return 1
	done
	_w ip -n "$NS_UP" route add 198.18.0.0/24 via 198.18.1.1 || return 1
	_w ip -n "$NS_UP" -6 route add fd00:5c::1:0/112 via fd00:5c::2:1 || return 1
	return 0
}

_world_sandbox() {
	local ns=$1 n=$2
	_w ip -n "$ns" link set eth0 up || return 1
	_w ip -n "$ns" addr add "198.18.0.$n/24" dev eth0 || return 1
	_w ip -n "$ns" addr add "fd00:5c::1:$n/112" dev eth0 nodad || return 1
	_w ip -n "$ns" route add default via 198.18.0.1 || return 1
	_w ip -n "$ns" -6 route add default via fd00:5c::1:1 || return 1
}

# world_forwarding 0|1: let gw route between the links (self-test only).
world_forwarding() {
	in_ns "$NS_GW" sysctl -qw "net.ipv4.ip_forward=$1" \
	    "net.ipv6.conf.all.forwarding=$1" >/dev/null
}

# world_load_nft [FILE]: load contrib/sluice.nft into gw as it is (its
# default SANDBOX_IFS is this world's bridge, sb-br).
world_load_nft() {
	local f=${1:-$WORLD_SRCDIR/contrib/sluice.nft}
	in_ns "$NS_GW" nft -f "$f" || { world_log "nft -f $f failed"; return 1; }
}

world_flush_nft() {
	in_ns "$NS_GW" nft delete table inet sluice 2>/dev/null
	return 0
}

# world_spawn NS LOG CMD...: start CMD in NS in the background, output to LOG;
# sets SPAWNED to its pid and remembers it for world_down.
world_spawn() {
	local ns=$1 log=$2; shift 2
	ip netns exec "$ns" "$@" </dev/null >"$log" 2>&1 &
	SPAWNED=$!
	WORLD_PIDS="$WORLD_PIDS $SPAWNED"
}

# world_stop PID [SIG [TENTHS]]: stop one process we started (SIG, default
# TERM; KILL after TENTHS, default 30) and reap it; its exit status is left
# in WORLD_STOP_STATUS (137 when it had to be killed).
world_stop() {
	local pid=$1 sig=${2:-TERM} max=${3:-30} n=0
	if kill -0 "$pid" 2>/dev/null; then
		kill "-$sig" "$pid" 2>/dev/null
		while kill -0 "$pid" 2>/dev/null && [ $n -lt "$max" ]; do
			sleep 0.1; n=$((n + 1))
		done
		kill -KILL "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null
	WORLD_STOP_STATUS=$?
	return 0
}

# world_wait_file FILE [TENTHS]: wait until FILE exists (default 5 s).
world_wait_file() {
	local n=0 max=${2:-50}
	while [ ! -e "$1" ]; do
		[ $n -ge "$max" ] && return 1
		sleep 0.1; n=$((n + 1))
	done
}

# world_wait_listen NS PORT [TENTHS]: wait until a TCP socket listens on PORT.
world_wait_listen() {
	local n=0 max=${3:-50}
	while [ -z "$(in_ns "$1" ss -Hltn "sport = :$2" 2>/dev/null)" ]; do
		[ $n -ge "$max" ] && return 1
		sleep 0.1; n=$((n + 1))
	done
}

# world_start_dns DIR: dnsmasq in up on 198.18.1.2:53 and [fd00:5c::2:2]:53,
# authoritative for the test names only; queries logged to DIR/dnsmasq.log.
# Besides the host records of the test internet above it serves
#   allowed.test HTTPS  1 . alpn=h2 ipv4hint=198.18.1.10 ech=WORLD_DNS_ECH
#   private.test HTTPS  1 . alpn=h2 ipv4hint=10.0.0.5,198.18.1.10
#   gw.test      HTTPS  1 . mandatory=ech alpn=h2 ech=AQIDBA==
#   blocked.test HTTPS  1 denied.test. alpn=h2
#   alias.test   CNAME  other.test
#   blackhole.test  forwarded to dns-sink (198.18.1.20), which never answers
# and the hosts files in DIR/dnshosts (re-read when they change; see
# world_dns_host), for names whose address a test moves.
WORLD_DNS_ECH="sluice-ech-test!"	# base64 c2x1aWNlLWVjaC10ZXN0IQ==
world_start_dns() {
	local d=$1 https
	# SVCB RDATA: priority 1, target ".", alpn (1) "h2", ipv4hint (4)
	# 198.18.1.10, ech (5) the 16 bytes of WORLD_DNS_ECH
	https=0001000001000302683200040004c612010a0005$(printf '%04x' ${#WORLD_DNS_ECH})
	https=$https$(printf '%s' "$WORLD_DNS_ECH" | od -An -tx1 | tr -d ' \n')
	WORLD_DNS_HOSTS=$d/dnshosts
	mkdir -p "$WORLD_DNS_HOSTS"
	world_spawn "$NS_UP" "$d/dnsmasq.out" dnsmasq --keep-in-foreground \
	    --conf-file=/dev/null --no-resolv --no-hosts --no-poll \
	    --bind-interfaces --listen-address=198.18.1.2 \
	    --listen-address=fd00:5c::2:2 \
	    --user=root --group=root --pid-file="$d/dnsmasq.pid" \
	    --log-queries --log-facility="$d/dnsmasq.log" \
	    --local=/test/ --local-ttl=5 \
	    --host-record=allowed.test,198.18.1.10,fd00:5c::2:10 \
	    --host-record=other.test,198.18.1.11,fd00:5c::2:11 \
	    --host-record=denied.test,198.18.1.12,fd00:5c::2:12 \
	    --host-record=blocked.test,198.18.1.13 \
	    --host-record=private.test,10.0.0.5 \
	    --host-record=gw.test,198.18.1.1 \
	    --host-record=xn--bcher-kva.test,198.18.1.16,fd00:5c::2:16 \
	    --dns-rr=allowed.test,65,"$https" \
	    --dns-rr=private.test,65,00010000010003026832000400080a000005c612010a \
	    --dns-rr=gw.test,65,000100000000020005000100030268320005000401020304 \
	    --dns-rr=blocked.test,65,00010664656e69656404746573740000010003026832 \
	    --cname=alias.test,other.test \
	    --server=/blackhole.test/198.18.1.20 \
	    --hostsdir="$WORLD_DNS_HOSTS"
	WORLD_DNS_PID=$SPAWNED
	world_wait_listen "$NS_UP" 53 || { world_log "dnsmasq did not start:"; cat "$d/dnsmasq.out" >&2; return 1; }
}

# world_dns_host NAME ADDR...: dnsmasq answers NAME with these addresses (A
# and AAAA) from now on, instead of what it answered before; waits (3 s)
# until it answers the first.  A.B.C.D+N stands for N addresses from
# A.B.C.D on (D+N-1 at most 255).
world_dns_host() {
	local n=0 name=$1 f=$WORLD_DNS_HOSTS/$1 fam=A a b d i
	local -a addrs=()
	shift
	for a in "$@"; do
		case "$a" in
		*.*.*.*+*)
			b=${a%+*} d=${b##*.}
			for i in $(seq "$d" $((d + ${a#*+} - 1))); do
				addrs+=("${b%.*}.$i")
			done ;;
		*) addrs+=("$a") ;;
		esac
	done
	set -- "${addrs[@]}"
	case "$1" in *:*) fam=AAAA ;; esac
	# written beside the directory, then moved in: dnsmasq reads it whole
	for a in "$@"; do
		printf '%s %s\n' "$a" "$name"
	done >"$WORLD_DNS_HOSTS.$name" && mv "$WORLD_DNS_HOSTS.$name" "$f" || return 1
	until in_ns "$NS_UP" dig +time=1 +tries=1 +short @198.18.1.2 "$name" "$fam" |
	    grep -qxF "$1"; do
		[ $n -ge 30 ] && { world_log "dnsmasq does not answer $name $1"; return 1; }
		sleep 0.1; n=$((n + 1))
	done
}

# world_start_upstreams PKI STATEDIR LOGDIR: the test servers in up (and the
# gateway's own gwself-tls in gw); waits until all listen.
world_start_upstreams() {
	local pki=$1 st=$2 logd=$3 h n
	mkdir -p "$st"
	rm -f "$st/ready" "$st/ready-gw" "$st/ready-sb2"
	set --
	for h in allowed:10 other:11 denied:12; do
		n=${h##*:} h=${h%%:*}
		set -- "$@" "$h-tls=tls;198.18.1.$n:443,[fd00:5c::2:$n]:443;$pki/$h.test.pem;$pki/$h.test.key" \
		    "$h-http=http;198.18.1.$n:80,[fd00:5c::2:$n]:80"
	done
	set -- "$@" "blocked-tls=tls;198.18.1.13:443;$pki/blocked.test.pem;$pki/blocked.test.key"
	set -- "$@" "bare-tls=tls;198.18.1.14:443,[fd00:5c::2:14]:443;$pki/198.18.1.14.pem;$pki/198.18.1.14.key" \
	    "bare-echo=echo;198.18.1.14:7,[fd00:5c::2:14]:7"
	set -- "$@" "cidr-tls=tls;198.18.1.15:443,[fd00:5c::2:15]:443;$pki/198.18.1.15.pem;$pki/198.18.1.15.key" \
	    "cidr-echo=echo;198.18.1.15:7,[fd00:5c::2:15]:7" \
	    "cidr-echo8=echo;198.18.1.15:8,[fd00:5c::2:15]:8"
	set -- "$@" "idn-tls=tls;198.18.1.16:443,[fd00:5c::2:16]:443;$pki/xn--bcher-kva.test.pem;$pki/xn--bcher-kva.test.key"
	set -- "$@" "udp-sink=udp;198.18.1.10:443" "dns-sink=udp;198.18.1.20:53"
	world_spawn "$NS_UP" "$logd/upstream.log" "$PY" "$UPSTREAM_PY" serve \
	    --state-dir "$st" --ready "$st/ready" "$@"
	WORLD_UP_PID=$SPAWNED
	world_spawn "$NS_SB2" "$logd/upstream-sb2.log" "$PY" "$UPSTREAM_PY" serve \
	    --state-dir "$st" --ready "$st/ready-sb2" "sb2-echo=echo;198.18.0.3:7"
	world_spawn "$NS_GW" "$logd/upstream-gw.log" "$PY" "$UPSTREAM_PY" serve \
	    --state-dir "$st" --ready "$st/ready-gw" \
	    "gwself-tls=tls;198.18.1.1:443;$pki/gw.test.pem;$pki/gw.test.key" \
	    "gwself-echo=echo;198.18.0.1:22"
	WORLD_GWUP_PID=$SPAWNED
	world_wait_file "$st/ready" 100 && world_wait_file "$st/ready-gw" 100 &&
	    world_wait_file "$st/ready-sb2" 100 || {
		world_log "upstreams did not start:"
		cat "$logd/upstream.log" "$logd/upstream-gw.log" "$logd/upstream-sb2.log" >&2
		return 1
	}
}

# world_down: kill what we started and whatever still runs in our
# namespaces, delete the namespaces.  Idempotent.
world_down() {
	local pid ns
	for pid in $WORLD_PIDS; do
		kill -TERM "$pid" 2>/dev/null
	done
	for ns in $WORLD_CREATED; do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -TERM "$pid" 2>/dev/null
		done
	done
	sleep 0.2
	for pid in $WORLD_PIDS; do
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	for ns in $WORLD_CREATED; do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$pid" 2>/dev/null
		done
		ip netns del "$ns" 2>/dev/null
		rm -rf "/etc/netns/$ns"
	done
	WORLD_PIDS="" WORLD_CREATED=""
}
