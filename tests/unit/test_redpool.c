/*
 * test_redpool.c: the loop's kept redactors (loop/redpool.h): a build
 * found again by its keys, the oldest one taken for other keys, the bound
 * on how many are kept, clearing, and the sweep of idle builds (this one
 * runs the event base for REDPOOL_IDLE_S + 1.5 seconds).
 */
#include "autoconf.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>
#include <sodium.h>

#include "util/redact.h"
#include "loop/redpool.h"

/* Patterns in plain memory: the redactor does not own their bytes. */
static const char	sa[] = "alpha-secret-value";
static const char	sb[] = "bravo-secret-value";
static const char	sc[] = "charlie-secret";

struct world {
	struct event_base *base;
	struct redpool	 p;
	struct redact_pat pa[2], pb[1], pc[1];
	uint64_t	 ka[1], kb[1], kc[1];
};

static int
setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));

	assert_non_null(w);
	assert_non_null(w->base = event_base_new());
	w->pa[0].p = (const uint8_t *)sa;
	w->pa[0].len = sizeof(sa) - 1;
	w->pa[1].p = (const uint8_t *)sc;
	w->pa[1].len = sizeof(sc) - 1;
	w->pb[0].p = (const uint8_t *)sb;
	w->pb[0].len = sizeof(sb) - 1;
	w->pc[0].p = (const uint8_t *)sc;
	w->pc[0].len = sizeof(sc) - 1;
	w->ka[0] = redact_serial();
	w->kb[0] = redact_serial();
	w->kc[0] = redact_serial();
	*state = w;
	return 0;
}

static int
teardown(void **state)
{
	struct world *w = *state;

	redpool_clear(&w->p);
	assert_int_equal(w->p.n, 0);
	assert_null(w->p.sweep);
	event_base_free(w->base);
	free(w);
	return 0;
}

/* What a redactor emitted. */
struct out {
	uint8_t		buf[256];
	size_t		len;
};

static int
collect(void *arg, const uint8_t *p, size_t len)
{
	struct out *o = arg;

	assert_true(len <= sizeof(o->buf) - o->len);
	memcpy(o->buf + o->len, p, len);
	o->len += len;
	return 0;
}

/* r redacts in into want. */
static void
redacts(struct redactor *r, const char *in, const char *want)
{
	struct out o = { .len = 0 };

	assert_int_equal(redactor_feed(r, (const uint8_t *)in, strlen(in),
	    collect, &o), 0);
	assert_int_equal(redactor_flush(r, collect, &o), 0);
	assert_int_equal(o.len, strlen(want));
	assert_memory_equal(o.buf, want, o.len);
}

/* A redactor from the pool, built for keys. */
static struct redactor *
get_built(struct world *w, const struct redact_pat *pats, size_t n,
    const uint64_t *keys)
{
	struct redactor *r = redpool_get(&w->p, keys, 1);

	assert_non_null(r);
	assert_int_equal(redactor_reset_keyed(r, pats, n, keys, 1), 0);
	assert_true(redactor_keyed(r, keys, 1));
	return r;
}

/* An empty pool gives a new, unbuilt redactor. */
static void
t_get_new(void **state)
{
	struct world *w = *state;
	struct redactor *r = redpool_get(&w->p, w->ka, 1);

	assert_non_null(r);
	assert_false(redactor_keyed(r, w->ka, 1));
	assert_int_equal(w->p.n, 0);
	assert_null(w->p.sweep);
	redactor_free(r);
}

/* Given back built, it comes back for the same keys, built. */
static void
t_same_keys(void **state)
{
	struct world *w = *state;
	struct redactor *r, *s, *g;

	r = get_built(w, w->pa, 2, w->ka);
	redacts(r, "x alpha-secret-value y", "x " REDACT_MARK " y");
	redpool_put(&w->p, w->base, r);
	assert_int_equal(w->p.n, 1);
	assert_non_null(w->p.sweep);
	assert_true(evtimer_pending(w->p.sweep, NULL));

	g = redpool_get(&w->p, w->ka, 1);
	assert_ptr_equal(g, r);
	assert_int_equal(w->p.n, 0);
	assert_true(redactor_keyed(g, w->ka, 1));
	/* The keyed reset keeps the build: it still redacts. */
	assert_int_equal(redactor_reset_keyed(g, w->pa, 2, w->ka, 1), 0);
	redacts(g, "charlie-secret!", REDACT_MARK "!");

	/* Two kept: each found by its keys, whatever its place. */
	s = get_built(w, w->pb, 1, w->kb);
	assert_ptr_not_equal(s, r);
	redpool_put(&w->p, w->base, r);		/* oldest */
	redpool_put(&w->p, w->base, s);
	assert_int_equal(w->p.n, 2);
	g = redpool_get(&w->p, w->kb, 1);	/* the newest, not the oldest */
	assert_ptr_equal(g, s);
	assert_true(redactor_keyed(g, w->kb, 1));
	assert_int_equal(w->p.n, 1);
	redpool_put(&w->p, w->base, g);		/* r, s again */
	g = redpool_get(&w->p, w->ka, 1);
	assert_ptr_equal(g, r);
	assert_int_equal(w->p.n, 1);
	redpool_put(&w->p, w->base, g);		/* now s is the oldest */
	g = redpool_get(&w->p, w->ka, 1);	/* the newest again */
	assert_ptr_equal(g, r);
	redpool_put(&w->p, w->base, g);
	assert_int_equal(w->p.n, 2);
}

/* Other keys: the one kept longest, then a new one. */
static void
t_other_keys(void **state)
{
	struct world *w = *state;
	struct redactor *r1, *r2, *g1, *g2, *g3;

	r1 = get_built(w, w->pa, 2, w->ka);
	r2 = get_built(w, w->pb, 1, w->kb);
	redpool_put(&w->p, w->base, r1);
	redpool_put(&w->p, w->base, r2);
	assert_int_equal(w->p.n, 2);

	g1 = redpool_get(&w->p, w->kc, 1);
	assert_ptr_equal(g1, r1);		/* the oldest */
	assert_int_equal(w->p.n, 1);
	assert_false(redactor_keyed(g1, w->kc, 1));
	assert_int_equal(redactor_reset_keyed(g1, w->pc, 1, w->kc, 1), 0);
	assert_true(redactor_keyed(g1, w->kc, 1));
	assert_false(redactor_keyed(g1, w->ka, 1));
	redacts(g1, "alpha-secret-value charlie-secret",
	    "alpha-secret-value " REDACT_MARK);

	g2 = redpool_get(&w->p, w->kc, 1);
	assert_ptr_equal(g2, r2);
	assert_int_equal(w->p.n, 0);

	g3 = redpool_get(&w->p, w->kc, 1);	/* none kept: a new one */
	assert_non_null(g3);
	assert_ptr_not_equal(g3, r1);
	assert_ptr_not_equal(g3, r2);
	assert_false(redactor_keyed(g3, w->kc, 1));
	redactor_free(g1);
	redactor_free(g2);
	redactor_free(g3);
}

/* More than REDPOOL_KEEP given back: the oldest are freed. */
static void
t_keep_bound(void **state)
{
	struct world *w = *state;
	uint64_t keys[REDPOOL_KEEP + 5];
	struct redactor *r;
	size_t i;

	for (i = 0; i < REDPOOL_KEEP + 5; i++) {
		keys[i] = redact_serial();
		r = redactor_new();	/* the pool's get would take one kept */
		assert_non_null(r);
		assert_int_equal(redactor_reset_keyed(r, w->pb, 1, &keys[i],
		    1), 0);
		redpool_put(&w->p, w->base, r);
		assert_int_equal(w->p.n, i < REDPOOL_KEEP ? i + 1 :
		    REDPOOL_KEEP);
	}
	/* The first five are gone: other keys get the sixth, the oldest. */
	for (i = 0; i < 5; i++)
		assert_false(redactor_keyed(w->p.r[0], &keys[i], 1));
	r = redpool_get(&w->p, &keys[0], 1);
	assert_non_null(r);
	assert_true(redactor_keyed(r, &keys[5], 1));
	assert_int_equal(w->p.n, REDPOOL_KEEP - 1);
	redpool_put(&w->p, w->base, r);
	/* The newest is still found by its keys. */
	r = redpool_get(&w->p, &keys[REDPOOL_KEEP + 4], 1);
	assert_true(redactor_keyed(r, &keys[REDPOOL_KEEP + 4], 1));
	redpool_put(&w->p, w->base, r);
	assert_int_equal(w->p.n, REDPOOL_KEEP);
}

/* NULL given back: nothing kept, nothing made. */
static void
t_put_null(void **state)
{
	struct world *w = *state;

	redpool_put(&w->p, w->base, NULL);
	assert_int_equal(w->p.n, 0);
	assert_null(w->p.sweep);
	redpool_put(&w->p, w->base, get_built(w, w->pa, 2, w->ka));
	redpool_put(&w->p, w->base, NULL);
	assert_int_equal(w->p.n, 1);
}

/* Clearing frees every redactor and the sweep; the pool works again. */
static void
t_clear(void **state)
{
	struct world *w = *state;

	struct redactor *r1, *r2, *r3;

	r1 = get_built(w, w->pa, 2, w->ka);
	r2 = get_built(w, w->pb, 1, w->kb);
	r3 = get_built(w, w->pc, 1, w->kc);
	redpool_put(&w->p, w->base, r1);
	redpool_put(&w->p, w->base, r2);
	redpool_put(&w->p, w->base, r3);
	assert_int_equal(w->p.n, 3);
	assert_int_equal(event_base_get_num_events(w->base,
	    EVENT_BASE_COUNT_ADDED), 1);
	redpool_clear(&w->p);
	assert_int_equal(w->p.n, 0);
	assert_null(w->p.sweep);
	assert_int_equal(event_base_get_num_events(w->base,
	    EVENT_BASE_COUNT_ADDED), 0);
	assert_int_equal(event_base_loop(w->base, EVLOOP_NONBLOCK), 1);
	redpool_clear(&w->p);			/* twice: harmless */

	redpool_put(&w->p, w->base, get_built(w, w->pa, 2, w->ka));
	assert_int_equal(w->p.n, 1);
	assert_non_null(w->p.sweep);
	assert_true(evtimer_pending(w->p.sweep, NULL));
}

/* A build left unused REDPOOL_IDLE_S seconds is swept, not before. */
static void
t_sweep(void **state)
{
	struct world *w = *state;
	struct timeval early = { REDPOOL_IDLE_S - 2, 500000 };
	struct timeval late = { 3, 0 };		/* IDLE_S + 1.5 s in all */

	redpool_put(&w->p, w->base, get_built(w, w->pa, 2, w->ka));
	assert_int_equal(w->p.n, 1);
	assert_int_equal(event_base_loopexit(w->base, &early), 0);
	assert_int_equal(event_base_dispatch(w->base), 0);
	assert_int_equal(w->p.n, 1);		/* not yet */
	assert_int_equal(event_base_loopexit(w->base, &late), 0);
	assert_int_equal(event_base_dispatch(w->base), 0);
	assert_int_equal(w->p.n, 0);
	/* Nothing kept: the sweep is not armed again. */
	assert_false(evtimer_pending(w->p.sweep, NULL));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(t_get_new, setup, teardown),
		cmocka_unit_test_setup_teardown(t_same_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(t_other_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(t_keep_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(t_put_null, setup, teardown),
		cmocka_unit_test_setup_teardown(t_clear, setup, teardown),
		cmocka_unit_test_setup_teardown(t_sweep, setup, teardown),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
