/* metrics.c: lock-free counters per worker, summed into Prometheus text. */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/metrics.h"

/* Upper bounds of the histogram buckets, in microseconds. */
const uint64_t mhist_bound_us[METRICS_BUCKETS] = {
	100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000,
	250000, 1000000, 5000000, 10000000,
};

/* src cut to fit dst[cap] as snprintf "%s" would (it was a visible cost). */
static void
keycpy(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

void
mtable_add(struct mtable *t, const char *a, const char *b)
{
	unsigned i, n = atomic_load_explicit(&t->n, memory_order_relaxed);
	struct mkey *k;
	char ca[METRICS_KEYLEN], cb[METRICS_KEYLEN];

	/* As a key keeps them: a longer one must still find its key. */
	keycpy(ca, sizeof(ca), a);
	keycpy(cb, sizeof(cb), b != NULL ? b : "");
	a = ca;
	b = cb;
	for (i = 0; i < n; i++) {
		k = &t->e[i];
		if (strcmp(k->a, a) == 0 && strcmp(k->b, b) == 0) {
			atomic_fetch_add_explicit(&k->n, 1, memory_order_relaxed);
			return;
		}
	}
	if (n == METRICS_KEYS) {	/* full: the last slot is "other" */
		atomic_fetch_add_explicit(&t->e[n - 1].n, 1, memory_order_relaxed);
		return;
	}
	if (n == METRICS_KEYS - 1) {
		a = "other";
		b = "other";
	}
	k = &t->e[n];
	keycpy(k->a, sizeof(k->a), a);
	keycpy(k->b, sizeof(k->b), b);
	atomic_store_explicit(&k->n, 1, memory_order_relaxed);
	atomic_store_explicit(&t->n, n + 1, memory_order_release);
}

void
mhist_observe(struct mhist *h, uint64_t us)
{
	unsigned i;

	for (i = 0; i < METRICS_BUCKETS && us > mhist_bound_us[i]; i++)
		;
	atomic_fetch_add_explicit(&h->b[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum_us, us, memory_order_relaxed);
}
