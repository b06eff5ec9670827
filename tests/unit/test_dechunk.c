/*
 * test_dechunk.c: chunked bodies out of their framing (dechunk.c), fed
 * whole and a byte at a time, with extensions, trailers and bad framing.
 */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "parse/dechunk.h"

struct sink {
	char	 buf[256];
	size_t	 len;
	size_t	 calls;
	int	 stop_at;	/* say -1 on this call (0: never) */
};

static int
sink_cb(void *arg, const uint8_t *p, size_t n)
{
	struct sink *s = arg;

	if (++s->calls == (size_t)s->stop_at)
		return -1;
	assert_true(n > 0);
	assert_true(s->len + n <= sizeof(s->buf));
	memcpy(s->buf + s->len, p, n);
	s->len += n;
	return 0;
}

/* Feeds in whole (step 0) or step bytes at a time; the feed's result. */
static int
feed(const char *in, size_t step, struct sink *s, struct dechunk *d)
{
	size_t len = strlen(in), at, n;
	int rc = 0;

	dechunk_init(d);
	for (at = 0; at < len && rc == 0; at += n) {
		n = step == 0 || len - at < step ? len - at : step;
		rc = dechunk_feed(d, (const uint8_t *)in + at, n, sink_cb, s);
	}
	return rc;
}

static void
t_whole_and_bytewise(void **state)
{
	static const char *in = "5\r\nhello\r\n1;ext=\"a\"\r\n,\r\n"
	    "A\r\n world 123\r\n0\r\nX-Trailer: y\r\n\r\n";
	size_t steps[] = { 0, 1, 2, 7 }, i;
	struct dechunk d;

	(void)state;
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct sink s = { .stop_at = 0 };

		assert_int_equal(feed(in, steps[i], &s, &d), 0);
		assert_int_equal(s.len, 16);
		assert_memory_equal(s.buf, "hello, world 123", 16);
		assert_true(dechunk_done(&d));
	}
}

/* Both sinks of a feed that hands on its trailer section. */
struct two {
	struct sink	 data, trailers;
};

static int
two_data(void *arg, const uint8_t *p, size_t n)
{
	return sink_cb(&((struct two *)arg)->data, p, n);
}

static int
two_trailers(void *arg, const uint8_t *p, size_t n)
{
	return sink_cb(&((struct two *)arg)->trailers, p, n);
}

/* dechunk_trailers: the bytes after the last chunk, as they came. */
static void
t_trailers_handed_on(void **state)
{
	static const char in[] = "5\r\nhello\r\n0\r\ngrpc-status: 0\r\n"
	    "x-b: y\r\n\r\n";
	static const char want[] = "grpc-status: 0\r\nx-b: y\r\n\r\n";
	size_t steps[] = { 0, 1, 3 }, i, at, n, len = sizeof(in) - 1;
	struct dechunk d;

	(void)state;
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct two t = { .data.stop_at = 0 };

		dechunk_init(&d);
		dechunk_trailers(&d, two_trailers);
		for (at = 0; at < len; at += n) {
			n = steps[i] == 0 || len - at < steps[i] ? len - at :
			    steps[i];
			assert_int_equal(dechunk_feed(&d, (const uint8_t *)in + at,
			    n, two_data, &t), 0);
		}
		assert_int_equal(t.data.len, 5);
		assert_memory_equal(t.data.buf, "hello", 5);
		assert_int_equal(t.trailers.len, sizeof(want) - 1);
		assert_memory_equal(t.trailers.buf, want, sizeof(want) - 1);
	}
	/* A trailer sink that says -1 stops the feed. */
	{
		struct two t = { .trailers.stop_at = 1 };

		dechunk_init(&d);
		dechunk_trailers(&d, two_trailers);
		assert_int_equal(dechunk_feed(&d, (const uint8_t *)in, len,
		    two_data, &t), -1);
	}
	/* dechunk_init forgets it: the section is skipped again. */
	{
		struct two t = { .data.stop_at = 0 };

		dechunk_init(&d);
		assert_int_equal(dechunk_feed(&d, (const uint8_t *)in, len,
		    two_data, &t), 0);
		assert_int_equal(t.trailers.calls, 0);
	}
}

/*
 * dechunk_ended: the body is whole at its trailer section's empty line,
 * with or without fields, however it is cut; bytes after it are not its.
 */
static void
t_ended(void **state)
{
	static const char *ins[] = {
		"5\r\nhello\r\n0\r\n\r\nNEXT",
		"5\r\nhello\r\n0\r\ngrpc-status: 0\r\nx: \r\r\n\r\nNEXT",
	};
	size_t i, step, at, n, len;
	struct dechunk d;

	(void)state;
	for (i = 0; i < sizeof(ins) / sizeof(ins[0]); i++)
		for (step = 1; step <= 4; step++) {
			struct two t = { .data.stop_at = 0 };

			len = strlen(ins[i]);
			dechunk_init(&d);
			dechunk_trailers(&d, two_trailers);
			for (at = 0; at < len; at += n) {
				n = len - at < step ? len - at : step;
				/* Not ended before the empty line's LF. */
				assert_int_equal(dechunk_ended(&d),
				    at >= len - 4);
				assert_int_equal(dechunk_feed(&d,
				    (const uint8_t *)ins[i] + at, n, two_data,
				    &t), 0);
			}
			assert_true(dechunk_done(&d));
			assert_true(dechunk_ended(&d));
			assert_int_equal(t.data.len, 5);
			/* The section ends with its CRLF: NEXT is not in it. */
			assert_true(t.trailers.len >= 2);
			assert_memory_equal(t.trailers.buf + t.trailers.len - 2,
			    "\r\n", 2);
			assert_null(memchr(t.trailers.buf, 'N',
			    t.trailers.len));
		}
	/* The last chunk alone: done, not ended. */
	{
		struct sink sk = { .stop_at = 0 };

		assert_int_equal(feed("0\r\nx: 1\r\n", 0, &sk, &d), 0);
		assert_true(dechunk_done(&d));
		assert_false(dechunk_ended(&d));
	}
}

static void
t_not_done(void **state)
{
	struct sink s = { .stop_at = 0 };
	struct dechunk d;

	(void)state;
	assert_int_equal(feed("3\r\nabc\r\n", 0, &s, &d), 0);
	assert_false(dechunk_done(&d));
	assert_int_equal(s.len, 3);
}

static void
t_bad_framing(void **state)
{
	static const char *bad[] = {
		"g\r\n",			/* not hex */
		"3\r\nabcX\r\n",		/* no CRLF after the data */
		"3\rX",				/* CR without LF */
		"10000000000000000\r\n",	/* a size over 64 bits */
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sink s = { .stop_at = 0 };
		struct dechunk d;

		assert_int_equal(feed(bad[i], 0, &s, &d), -1);
		assert_int_equal(feed(bad[i], 1, &s, &d), -1);
	}
}

static void
t_callback_stops(void **state)
{
	struct sink s = { .stop_at = 2 };
	struct dechunk d;

	(void)state;
	assert_int_equal(feed("1\r\na\r\n1\r\nb\r\n0\r\n\r\n", 0, &s, &d), -1);
	assert_int_equal(s.len, 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_whole_and_bytewise),
		cmocka_unit_test(t_trailers_handed_on),
		cmocka_unit_test(t_ended),
		cmocka_unit_test(t_not_done),
		cmocka_unit_test(t_bad_framing),
		cmocka_unit_test(t_callback_stops),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
