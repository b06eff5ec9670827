/* test_outbuf.c: the write queue shared by relays and DNS over TCP. */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "util/outbuf.h"

static void
t_append_in_order(void **st)
{
	struct outbuf o = { 0 };

	assert_int_equal(outbuf_append(&o, "abc", 3), 0);
	assert_int_equal(outbuf_append(&o, "", 0), 0);
	assert_int_equal(outbuf_append(&o, "def", 3), 0);
	assert_int_equal(outbuf_pending(&o), 6);
	assert_memory_equal(o.buf + o.off, "abcdef", 6);
	outbuf_free(&o);
	assert_null(o.buf);
	assert_int_equal(outbuf_pending(&o), 0);
}

/* A queue written as it fills keeps its unwritten bytes, and does not grow. */
static void
t_written_front_is_reused(void **st)
{
	struct outbuf o = { 0 };
	char chunk[1000], want[1000];
	size_t cap, i;

	memset(chunk, 'x', sizeof(chunk));
	assert_int_equal(outbuf_append(&o, chunk, sizeof(chunk)), 0);
	cap = o.cap;
	for (i = 0; i < 1000; i++) {
		o.off += 700;		/* the writer took most of it */
		memset(chunk, 'a' + (int)(i % 26), sizeof(chunk));
		assert_int_equal(outbuf_append(&o, chunk, sizeof(chunk)), 0);
		assert_int_equal(outbuf_pending(&o), 1300);
		o.off += 300;		/* and the rest of the older chunk */
	}
	assert_int_equal(o.cap, cap);	/* compaction, not growth */
	memset(want, 'a' + (int)(999 % 26), sizeof(want));
	assert_memory_equal(o.buf + o.len - 1000, want, 1000);
	outbuf_free(&o);
}

static void
t_reserve_grows(void **st)
{
	struct outbuf o = { 0 };

	assert_int_equal(outbuf_reserve(&o, 100000), 0);
	assert_true(o.cap >= 100000);
	assert_int_equal(outbuf_pending(&o), 0);
	outbuf_free(&o);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_append_in_order),
		cmocka_unit_test(t_written_front_is_reused),
		cmocka_unit_test(t_reserve_grows),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
