/* test_recent.c: a sandbox's last decisions, kept for dry runs (recent.h). */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "audit/arec.h"
#include "loop/recent.h"

struct seen {
	char	 first[RECENT_BYTES], last[RECENT_BYTES];
	size_t	 n;
};

static void
collect(const char *text, size_t len, void *arg)
{
	struct seen *s = arg;

	assert_true(len < RECENT_BYTES);
	assert_int_equal(text[0], '{');
	assert_int_equal(text[len - 1], '}');
	if (s->n++ == 0)
		snprintf(s->first, sizeof(s->first), "%.*s", (int)len, text);
	snprintf(s->last, sizeof(s->last), "%.*s", (int)len, text);
}

static void
add(struct recent *r, int i, size_t pad)
{
	static char big[2048];
	struct arec rec;

	memset(big, 'x', pad);
	big[pad] = '\0';
	arec_init(&rec);
	arec_int(&rec, "i", i);
	arec_str(&rec, "pad", big);
	recent_add(r, "conn", &rec);
}

static void
test_ring(void **state)
{
	struct recent r;
	struct seen s;
	int i;

	(void)state;
	recent_init(&r);
	memset(&s, 0, sizeof(s));
	recent_each(&r, collect, &s);
	assert_int_equal(s.n, 0);
	add(&r, 0, 3);
	memset(&s, 0, sizeof(s));
	recent_each(&r, collect, &s);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.first, "{\"type\":\"conn\",\"i\":0,\"pad\":\"xxx\"}");
	/* full: the oldest go, in order */
	for (i = 1; i < RECENT_MAX + 10; i++)
		add(&r, i, 3);
	memset(&s, 0, sizeof(s));
	recent_each(&r, collect, &s);
	assert_int_equal(s.n, RECENT_MAX);
	{
		char want[32];

		snprintf(want, sizeof(want), "\"i\":%d,", 10);
		assert_non_null(strstr(s.first, want));
		snprintf(want, sizeof(want), "\"i\":%d,", RECENT_MAX + 9);
		assert_non_null(strstr(s.last, want));
	}
	/* a record too long for a slot is not kept, nothing is cut */
	add(&r, 999, RECENT_BYTES);
	memset(&s, 0, sizeof(s));
	recent_each(&r, collect, &s);
	assert_int_equal(s.n, RECENT_MAX);
	assert_null(strstr(s.last, "999"));
	recent_destroy(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
