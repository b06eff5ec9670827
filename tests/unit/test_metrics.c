/* test_metrics.c: the workers' counter tables and latency histograms. */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/metrics.h"

static unsigned long long
count(struct mtable *t, const char *a, const char *b)
{
	unsigned i, n = atomic_load(&t->n);

	for (i = 0; i < n; i++)
		if (strcmp(t->e[i].a, a) == 0 && strcmp(t->e[i].b, b) == 0)
			return atomic_load(&t->e[i].n);
	return 0;
}

static void
t_counts_by_key(void **st)
{
	struct mtable *t = calloc(1, sizeof(*t));

	mtable_add(t, "pass", "allow-name");
	mtable_add(t, "pass", "allow-name");
	mtable_add(t, "deny", "allow-name");
	mtable_add(t, "deny", NULL);
	assert_int_equal(atomic_load(&t->n), 3);
	assert_int_equal(count(t, "pass", "allow-name"), 2);
	assert_int_equal(count(t, "deny", "allow-name"), 1);
	assert_int_equal(count(t, "deny", ""), 1);
	free(t);
}

static void
t_cardinality_bounded(void **st)
{
	struct mtable *t = calloc(1, sizeof(*t));
	char rule[32];
	unsigned i;

	/* a policy with thousands of rules must not grow the table */
	for (i = 0; i < 5000; i++) {
		snprintf(rule, sizeof(rule), "rule-%u", i);
		mtable_add(t, rule, "pass");
	}
	assert_int_equal(atomic_load(&t->n), METRICS_KEYS);
	assert_int_equal(count(t, "rule-0", "pass"), 1);
	assert_int_equal(count(t, "other", "other"), 5000 - (METRICS_KEYS - 1));
	/* keys seen before the table filled still count on their own */
	mtable_add(t, "rule-3", "pass");
	assert_int_equal(count(t, "rule-3", "pass"), 2);
	free(t);
}

static void
t_long_keys_cut(void **st)
{
	struct mtable *t = calloc(1, sizeof(*t));
	char big[300];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	mtable_add(t, big, big);
	assert_int_equal(strlen(t->e[0].a), sizeof(t->e[0].a) - 1);
	assert_int_equal(strlen(t->e[0].b), METRICS_KEYLEN - 1);
	/* The same long key again counts on the key it made, not a new one. */
	mtable_add(t, big, big);
	assert_int_equal(atomic_load(&t->n), 1);
	assert_int_equal(atomic_load(&t->e[0].n), 2);
	/* A secret's or rule's name fits whole. */
	memset(big, 'y', 64);
	big[64] = '\0';
	mtable_add(t, "intercept:" "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy",
	    big);
	assert_int_equal(count(t, "intercept:" "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"
	    "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy", big), 1);
	free(t);
}

static void
t_histogram_buckets(void **st)
{
	struct mhist *h = calloc(1, sizeof(*h));

	mhist_observe(h, 50);		/* <= 100us */
	mhist_observe(h, 100);		/* the bound itself is inside */
	mhist_observe(h, 101);		/* next bucket, 250us */
	mhist_observe(h, 60000000);	/* a minute: +Inf */
	assert_int_equal(atomic_load(&h->b[0]), 2);
	assert_int_equal(atomic_load(&h->b[1]), 1);
	assert_int_equal(atomic_load(&h->b[METRICS_BUCKETS]), 1);
	assert_int_equal(atomic_load(&h->sum_us), 50 + 100 + 101 + 60000000);
	free(h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_counts_by_key),
		cmocka_unit_test(t_cardinality_bounded),
		cmocka_unit_test(t_long_keys_cut),
		cmocka_unit_test(t_histogram_buckets),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
