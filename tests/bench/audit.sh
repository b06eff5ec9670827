#!/bin/sh
# Audit benchmark: records a second the audit writer takes with fsync
# never, batch and always, on the disk of BENCH_DIR (default /var/tmp, not
# a tmpfs), with checkpoints signed every 1,000 records; with always also
# as an injected request waits for its record (durable before it goes).
# Not a test: prints one line per run.  The cost of each mode in
# keep-alive intercepted requests a second is measured by
# tests/bench/icpt.sh (ICPT_PEERS=sluice-inject ICPT_AUDIT_FSYNC=MODE).
#
# usage: tests/bench/audit.sh [BUILDDIR]   (a build without sanitizers)
# env:   AUDIT_SECONDS (5), AUDIT_THREADS (2), BENCH_DIR (/var/tmp)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top}
secs=${AUDIT_SECONDS:-5}
threads=${AUDIT_THREADS:-2}
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/sluice-audit-bench.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
make -C "$build" -s tests/bench/audit_bench >/dev/null || { echo "audit-bench: cannot build audit_bench" >&2; exit 1; }
"$build/sluicectl" keygen --out "$dir/keys" >/dev/null || exit 1
df -T "$dir" | tail -1 | awk '{print "audit-bench: disk " $1 " (" $2 ")"}'
for run in "never" "batch" "always" "always wait" "batch wait"; do
	set -- $run
	rm -f "$dir/a.jsonl"
	"$build/tests/bench/audit_bench" "$dir/a.jsonl" "$1" "$secs" "$threads" \
	    "${2:-nowait}" "$dir/keys/signing.key"
	"$build/sluicectl" audit verify --pub "$dir/keys/signing.pub" "$dir/a.jsonl" >/dev/null ||
	    echo "audit-bench: the trail of $run does not verify" >&2
done
