#!/bin/sh
# mkpki.sh: a throw-away test PKI (a root CA and server leaves), openssl CLI only.
#
# usage: certs/mkpki.sh DIR [NAME[,SAN...]]...
#
# Writes into DIR (created if needed):
#   ca.pem, ca.key          the test root CA "Sluice Test Root CA" (ECDSA P-256,
#                           CA:true, pathlen:0); reused if it already exists
#   NAME.pem, NAME.key      one leaf per argument (ECDSA P-256, serverAuth),
#                           CN=NAME, SAN = NAME and every extra SAN given after
#                           a comma; IPv4/IPv6 literals become IP SANs, all
#                           else DNS SANs ("*.example.test" works)
#   NAME.chain.pem          leaf followed by the CA
# Existing leaves are re-issued (cheap), so the script is idempotent.
# Nothing here is secret: the keys are for tests and demos only, never deploy.
#
# example: certs/mkpki.sh /tmp/pki allowed.test other.test,www.other.test 198.18.1.14
set -eu

usage() { echo "usage: $0 DIR [NAME[,SAN...]]..." >&2; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in -h|--help) usage ;; esac
dir=$1; shift
command -v openssl >/dev/null 2>&1 || { echo "mkpki.sh: openssl not found" >&2; exit 1; }
mkdir -p "$dir"
umask 077
days=30

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mkpki.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

if [ ! -s "$dir/ca.pem" ] || [ ! -s "$dir/ca.key" ]; then
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
	    -out "$dir/ca.key" 2>/dev/null
	cat >"$tmp/ca.cnf" <<'EOF'
[req]
distinguished_name = dn
prompt = no
x509_extensions = v3_ca
[dn]
O = Sluice Test
CN = Sluice Test Root CA
[v3_ca]
basicConstraints = critical, CA:true, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
EOF
	openssl req -new -x509 -config "$tmp/ca.cnf" -key "$dir/ca.key" \
	    -days "$days" -sha256 -out "$dir/ca.pem"
fi

is_ip() {
	case "$1" in
	*:*) return 0 ;;				# IPv6 literal
	*[!0-9.]*) return 1 ;;
	*.*.*.*) return 0 ;;
	*) return 1 ;;
	esac
}

for spec in "$@"; do
	name=${spec%%,*}
	case "$name" in ''|*/*) echo "mkpki.sh: bad name '$name'" >&2; exit 2 ;; esac
	sans=""
	oldifs=$IFS; IFS=,
	for s in $spec; do
		if is_ip "$s"; then sans="$sans${sans:+,}IP:$s"
		else sans="$sans${sans:+,}DNS:$s"; fi
	done
	IFS=$oldifs
	cat >"$tmp/leaf.cnf" <<EOF
[req]
distinguished_name = dn
prompt = no
[dn]
O = Sluice Test
CN = $name
[v3_leaf]
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = $sans
EOF
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
	    -out "$dir/$name.key" 2>/dev/null
	openssl req -new -config "$tmp/leaf.cnf" -key "$dir/$name.key" \
	    -out "$tmp/leaf.csr"
	openssl x509 -req -in "$tmp/leaf.csr" -CA "$dir/ca.pem" \
	    -CAkey "$dir/ca.key" -CAcreateserial -CAserial "$tmp/ca.srl" \
	    -days "$days" -sha256 -extfile "$tmp/leaf.cnf" \
	    -extensions v3_leaf -out "$dir/$name.pem" 2>/dev/null
	cat "$dir/$name.pem" "$dir/ca.pem" >"$dir/$name.chain.pem"
done
# certificates are public; keys stay 0600
chmod 644 "$dir"/*.pem
