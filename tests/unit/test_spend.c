/* test_spend.c: GCRA budget cells (loop/spend.h). */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <sodium.h>

#include "loop/spend.h"

#define T0	1000000u	/* a start far from 0 */

static int
take1(struct spend *s, const struct spend_item *it, uint64_t now,
    uint64_t *retry)
{
	size_t over;
	uint64_t r;

	return spend_take(s, it, 1, now, &over, retry != NULL ? retry : &r);
}

/* N at once, then one each W / N; retry says when. */
static void
t_rate(void **st)
{
	struct spend *s = spend_new();
	struct spend_item it = { "sb1", "tok", SPEND_MINUTE, 60 };
	uint64_t retry = 0;
	int i;

	(void)st;
	assert_non_null(s);
	assert_int_equal(spend_used(s, &it, T0), 0);
	for (i = 0; i < 60; i++)
		assert_int_equal(take1(s, &it, T0, NULL), 0);
	assert_int_equal(spend_used(s, &it, T0), 60);
	assert_int_equal(take1(s, &it, T0, &retry), -1);
	assert_int_equal(retry, 1000);		/* one each second */
	assert_int_equal(take1(s, &it, T0 + 999, &retry), -1);
	assert_int_equal(retry, 1);
	assert_int_equal(take1(s, &it, T0 + 1000, NULL), 0);
	assert_int_equal(take1(s, &it, T0 + 1000, NULL), -1);
	/* a refused take spends nothing */
	assert_int_equal(spend_used(s, &it, T0 + 1000), 60);
	/* a minute later it is all there again */
	assert_int_equal(spend_used(s, &it, T0 + 61000), 0);
	for (i = 0; i < 60; i++)
		assert_int_equal(take1(s, &it, T0 + 61000, NULL), 0);
	assert_int_equal(take1(s, &it, T0 + 61000, NULL), -1);
	spend_free(s);
	spend_free(NULL);
}

/* Cells are apart by sandbox, gateway, secret and window. */
static void
t_keys(void **st)
{
	struct spend *s = spend_new();
	struct spend_item a = { "sb1", "tok", SPEND_MINUTE, 1 };
	struct spend_item b = { "sb2", "tok", SPEND_MINUTE, 1 };
	struct spend_item g = { NULL, "tok", SPEND_MINUTE, 1 };
	struct spend_item o = { "sb1", "other", SPEND_MINUTE, 1 };
	struct spend_item d = { "sb1", "tok", SPEND_DAY, 1 };
	/* "sb" + "1tok" must not be "sb1" + "tok" */
	struct spend_item x = { "sb", "1tok", SPEND_MINUTE, 1 };
	uint64_t retry;

	(void)st;
	assert_int_equal(take1(s, &a, T0, NULL), 0);
	assert_int_equal(take1(s, &a, T0, NULL), -1);
	assert_int_equal(take1(s, &b, T0, NULL), 0);
	assert_int_equal(take1(s, &g, T0, NULL), 0);
	assert_int_equal(take1(s, &o, T0, NULL), 0);
	assert_int_equal(take1(s, &x, T0, NULL), 0);
	assert_int_equal(take1(s, &d, T0, NULL), 0);
	assert_int_equal(take1(s, &d, T0 + 3600000, &retry), -1);
	assert_int_equal(retry, 24u * 3600000 - 3600000);
	spend_free(s);
}

/* All of one take or none. */
static void
t_all_or_none(void **st)
{
	struct spend *s = spend_new();
	struct spend_item two[2] = {
		{ "sb1", "tok", SPEND_MINUTE, 10 },
		{ NULL, "tok", SPEND_DAY, 1 },
	};
	struct spend_item many[SPEND_MAX_TAKE + 1];
	uint64_t retry;
	size_t over, i;

	(void)st;
	assert_int_equal(spend_take(s, two, 2, T0, &over, &retry), 0);
	assert_int_equal(spend_used(s, &two[0], T0), 1);
	assert_int_equal(spend_take(s, two, 2, T0, &over, &retry), -1);
	assert_int_equal(over, 1);
	assert_true(retry > 0);
	/* the sandbox's was not spent by the refused take */
	assert_int_equal(spend_used(s, &two[0], T0), 1);
	for (i = 0; i <= SPEND_MAX_TAKE; i++)
		many[i] = two[0];
	assert_int_equal(spend_take(s, many, SPEND_MAX_TAKE + 1, T0, &over,
	    &retry), -1);
	assert_int_equal(over, SPEND_MAX_TAKE + 1);
	assert_int_equal(retry, 0);
	/* a limit of 0 is no budget to take from: refused, fail closed */
	many[0].limit = 0;
	assert_int_equal(spend_take(s, many, 1, T0, &over, &retry), -1);
	assert_int_equal(over, 1);
	assert_int_equal(spend_used(s, &many[0], T0), 0);
	spend_free(s);
}

/* A full table forgets empty cells, and refuses when none is empty. */
static void
t_full(void **st)
{
	struct spend *s = spend_new();
	struct spend_item it = { NULL, "tok", SPEND_DAY, 5 };
	char name[32];
	uint64_t retry;
	size_t i, over;

	(void)st;
	it.secret = name;
	for (i = 0; i < SPEND_MAX_CELLS; i++) {
		snprintf(name, sizeof(name), "s%zu", i);
		assert_int_equal(take1(s, &it, T0, NULL), 0);
	}
	snprintf(name, sizeof(name), "new");
	assert_int_equal(spend_take(s, &it, 1, T0, &over, &retry), -1);
	assert_int_equal(over, 1);
	/* a day later every cell is empty: room again */
	assert_int_equal(take1(s, &it, T0 + 24u * 3600000, NULL), 0);
	spend_free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_rate),
		cmocka_unit_test(t_keys),
		cmocka_unit_test(t_all_or_none),
		cmocka_unit_test(t_full),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
