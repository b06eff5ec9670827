#!/bin/sh
# The whole test suite, as CI runs it: one clang build with ASan+UBSan, the
# test hooks (--enable-test-hooks: routes that make sluiced misbehave) and
# the libFuzzer targets, `make check` (unit tests, the namespace
# integration suite, bounded fuzzing), then one summary line.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build-check}
jobs=$(nproc 2>/dev/null || echo 2)

cd "$top" || exit 1
[ -x configure ] || autoreconf -fi || exit 1
# A build configured in the source tree itself would stop ours (automake
# allows one or the other); clean it, it is rebuilt by `make` there.
if [ -f config.status ]; then
	echo "run-all: the source tree was configured in place; make distclean there first"
	make distclean >/dev/null 2>&1 || rm -f config.status
fi
mkdir -p "$build" && cd "$build" || exit 1
if [ ! -f Makefile ]; then
	"$top/configure" CC=clang --enable-sanitizers --enable-fuzzers \
	    --enable-test-hooks || exit 1
fi
make -j"$jobs" || exit 1
make -j1 check
status=$?

# One line for CI: cmocka cases, integration scenarios and fuzz runs counted.
passed=0 failed=0
for log in $(find tests -name '*.log' ! -name test-suite.log | sort); do
	trs=${log%.log}.trs
	[ -f "$trs" ] || continue	# not a test's log (kept artifacts)
	res=$(sed -n 's/^:test-result: //p' "$trs" 2>/dev/null | head -n1)
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n1)
	if [ -z "$p$f" ]; then
		line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n1)
		p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
		f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
	fi
	case "$res" in
	PASS) [ -n "$p" ] || p=1 ;;
	SKIP) p=0; f=0; echo "skipped: $log" ;;
	*) [ -n "$f" ] && [ "$f" != 0 ] || f=1 ;;
	esac
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0}))
done
[ $status -eq 0 ] || [ $failed -gt 0 ] || failed=1
echo "$passed passed, $failed failed"
[ $status -eq 0 ] && [ $failed -eq 0 ]
