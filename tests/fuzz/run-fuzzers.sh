#!/bin/sh
# run-fuzzers.sh: runs every built libFuzzer target for a bounded time
# with its seed corpus; `make check` calls it when fuzzers are enabled.
#
# env: top_srcdir, top_builddir (exported by make check; default: this
#      script's tree and the current directory), FUZZ_SECONDS (per target,
#      default 20).
# A target fuzz_NAME uses tests/fuzz/corpus/NAME/.  The corpus is copied
# to a temporary directory, so the source tree is never written; inputs
# that crash are kept in $top_builddir/tests/fuzz/artifacts/.
# Exit: 0 all ran clean, 1 a target failed, 77 (skip) none was built.

set -u

here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$(cd "$here/../.." && pwd)}
top_builddir=${top_builddir:-$(pwd)}
seconds=${FUZZ_SECONDS:-20}
fuzzdir=$top_builddir/tests/fuzz
artifacts=$fuzzdir/artifacts

case $seconds in
''|*[!0-9]*)
	echo "run-fuzzers: FUZZ_SECONDS must be a whole number, not '$seconds'" >&2
	exit 1 ;;
esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

# The targets we know of, then any other one that was built.
targets="fuzz_clienthello fuzz_policy"
for bin in "$fuzzdir"/fuzz_*; do
	[ -f "$bin" ] && [ -x "$bin" ] || continue
	name=$(basename "$bin")
	case " $targets " in
	*" $name "*) ;;
	*) targets="$targets $name" ;;
	esac
done

status=0
ran=0
for name in $targets; do
	bin=$fuzzdir/$name
	if [ ! -x "$bin" ]; then
		echo "run-fuzzers: $name: not built, skipped"
		continue
	fi
	corpus=$tmp/${name#fuzz_}
	mkdir -p "$corpus" "$artifacts" || exit 1
	seeds=$top_srcdir/tests/fuzz/corpus/${name#fuzz_}
	if [ -d "$seeds" ]; then
		cp -R "$seeds"/. "$corpus"/ || exit 1
	else
		echo "run-fuzzers: $name: no seed corpus at $seeds"
	fi
	echo "run-fuzzers: $name for ${seconds}s"
	# libFuzzer's own failure code is 77, which make check reads as skip.
	"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
	    -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
	    -artifact_prefix="$artifacts/$name-" "$corpus"
	rc=$?
	ran=$((ran + 1))
	if [ "$rc" -ne 0 ]; then
		echo "run-fuzzers: $name FAILED (exit $rc); inputs in $artifacts" >&2
		status=1
	fi
done

if [ "$ran" -eq 0 ]; then
	echo "run-fuzzers: no fuzz target built"
	exit 77
fi
exit $status
