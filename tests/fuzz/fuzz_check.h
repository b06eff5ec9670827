/*
 * fuzz_check.h: CHECK(cond), a fuzzer's own check besides the
 * sanitizers: when cond is false it names the file, line and condition
 * and aborts, which libFuzzer reports as a crash with its input.
 */
#ifndef SLUICE_FUZZ_CHECK_H
#define SLUICE_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(c) do { \
	if (!(c)) { \
		fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
		    __LINE__, #c); \
		abort(); \
	} \
} while (0)

#endif
