/*
 * clock.h: the monotonic clock, the one sluice measures time by (never
 * the wall clock, which may jump).  The coarse readings (a few
 * milliseconds of resolution) are cheap enough for every read of a
 * socket; mono_us is exact, for latencies.
 */
#ifndef SLUICE_CLOCK_H
#define SLUICE_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Milliseconds, coarse. */
static inline uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Seconds, coarse. */
static inline time_t
mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return ts.tv_sec;
}

/* Microseconds, exact. */
static inline uint64_t
mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

#endif
