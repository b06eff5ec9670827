/*
 * test_mintcache.c: minted tokens shared by the workers (mintcache.c):
 * one mint for 100 threads asking at once, every waiter woken, early
 * refresh in the background, failures held, cancel, the table's bound.
 */
#include "autoconf.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <sodium.h>

#include "loop/mintcache.h"

#define NOW	1800000000
#define NTHREADS 100

static atomic_int woken;

static void
wake_cb(void *arg)
{
	(void)arg;
	atomic_fetch_add(&woken, 1);
}

struct asker {
	pthread_t	 th;
	struct mintcache *mc;
	struct mint_waiter w;
	enum mint_look	 r;
	pthread_barrier_t *go;
};

static void *
ask(void *arg)
{
	struct asker *a = arg;
	struct mtoken *t;
	char why[MINT_WHY_MAX];

	pthread_barrier_wait(a->go);
	a->r = mintcache_get(a->mc, "sb\npol@1\nsvc", NOW, &a->w, &t, why);
	mtoken_unref(t);
	return NULL;
}

static void
t_single_flight(void **state)
{
	static struct asker a[NTHREADS];
	struct mintcache *mc = mintcache_new();
	pthread_barrier_t go;
	struct mtoken *t;
	char why[MINT_WHY_MAX];
	int starts = 0, waits = 0, i;
	struct mint_waiter w = { .wake = wake_cb };

	(void)state;
	assert_non_null(mc);
	atomic_store(&woken, 0);
	pthread_barrier_init(&go, NULL, NTHREADS);
	for (i = 0; i < NTHREADS; i++) {
		memset(&a[i], 0, sizeof(a[i]));
		a[i].mc = mc;
		a[i].go = &go;
		a[i].w.wake = wake_cb;
		assert_int_equal(pthread_create(&a[i].th, NULL, ask, &a[i]), 0);
	}
	for (i = 0; i < NTHREADS; i++) {
		pthread_join(a[i].th, NULL);
		starts += a[i].r == MINT_START;
		waits += a[i].r == MINT_WAIT;
	}
	pthread_barrier_destroy(&go);
	assert_int_equal(starts, 1);
	assert_int_equal(waits, NTHREADS - 1);
	assert_int_equal(atomic_load(&woken), 0);
	mintcache_done(mc, "sb\npol@1\nsvc", mtoken_new("tok-1", 5, NOW,
	    NOW + 3600), NULL, NOW);
	assert_int_equal(atomic_load(&woken), NTHREADS);
	/* now it is there */
	assert_int_equal(mintcache_get(mc, "sb\npol@1\nsvc", NOW + 1, &w, &t,
	    why), MINT_HAVE);
	assert_string_equal(t->value, "tok-1");
	assert_true(t->npats >= 1);
	assert_int_equal(strlen(t->fp), 16);
	mtoken_unref(t);
	/* another sandbox's is another's */
	assert_int_equal(mintcache_get(mc, "sb2\npol@1\nsvc", NOW, &w, &t,
	    why), MINT_START);
	mintcache_cancel(mc, &w);
	mintcache_done(mc, "sb2\npol@1\nsvc", NULL, "x", NOW);
	mintcache_free(mc);
}

static void
count_cb(void *arg, const struct mint_info *in)
{
	(*(size_t *)arg)++;
	(void)in;
}

/* An entry no request asks for any more goes, and its token with it. */
static void
t_sweep(void **state)
{
	struct mintcache *mc = mintcache_new();
	struct mint_waiter w = { .wake = wake_cb };
	struct mtoken *t, *kept;
	char why[MINT_WHY_MAX];
	size_t n = 0, i;

	(void)state;
	assert_int_equal(mintcache_get(mc, "old", NOW, &w, &t, why), MINT_START);
	kept = mtoken_new("o", 1, NOW, NOW + 60);
	mintcache_done(mc, "old", mtoken_ref(kept), NULL, NOW);
	assert_int_equal(mintcache_get(mc, "new", NOW, &w, &t, why), MINT_START);
	mintcache_done(mc, "new", mtoken_new("n", 1, NOW, NOW + 6000), NULL, NOW);
	/* a good token stays however often the table is swept */
	for (i = 0; i < 2048; i++)
		if (mintcache_get(mc, "new", NOW + 1, &w, &t, why) == MINT_HAVE)
			mtoken_unref(t);
	mintcache_each(mc, NOW + 1, count_cb, &n);
	assert_int_equal(n, 2);
	assert_int_equal(atomic_load(&kept->refs), 2);
	/* expired and unasked for: gone within a sweep of every bucket */
	for (i = 0; i < 1024; i++)
		if (mintcache_get(mc, "new", NOW + 61, &w, &t, why) == MINT_HAVE)
			mtoken_unref(t);
	n = 0;
	mintcache_each(mc, NOW + 61, count_cb, &n);
	assert_int_equal(n, 1);
	assert_int_equal(atomic_load(&kept->refs), 1);	/* the table let go */
	mtoken_unref(kept);
	mintcache_free(mc);
}

/* A short token is not minted again by the requests that waited for it. */
static void
t_short_token(void **state)
{
	struct mintcache *mc = mintcache_new();
	struct mint_waiter w = { .wake = wake_cb };
	struct mtoken *t;
	char why[MINT_WHY_MAX];

	(void)state;
	/* 40 s: used till 30 s, early from half of that (15 s), not at once */
	assert_int_equal(mintcache_get(mc, "k", NOW, &w, &t, why), MINT_START);
	mintcache_done(mc, "k", mtoken_new("a", 1, NOW, NOW + 40), NULL, NOW);
	assert_int_equal(mintcache_get(mc, "k", NOW + 1, &w, &t, why),
	    MINT_HAVE);
	mtoken_unref(t);
	assert_int_equal(mintcache_get(mc, "k", NOW + 14, &w, &t, why),
	    MINT_HAVE);
	mtoken_unref(t);
	assert_int_equal(mintcache_get(mc, "k", NOW + 15, &w, &t, why),
	    MINT_HAVE_REFRESH);
	mtoken_unref(t);
	mintcache_done(mc, "k", mtoken_new("b", 1, NOW + 15, NOW + 27), NULL,
	    NOW + 15);
	/* 12 s: the waiters of its mint get it without minting again */
	assert_int_equal(mintcache_get(mc, "k", NOW + 15, &w, &t, why),
	    MINT_HAVE);
	assert_string_equal(t->value, "b");
	mtoken_unref(t);
	mintcache_free(mc);
}

static void
t_refresh_and_expiry(void **state)
{
	struct mintcache *mc = mintcache_new();
	struct mint_waiter w = { .wake = wake_cb }, w2 = { .wake = wake_cb };
	struct mtoken *t;
	char why[MINT_WHY_MAX];
	const char *k = "k";

	(void)state;
	assert_int_equal(mintcache_get(mc, k, NOW, &w, &t, why), MINT_START);
	mintcache_done(mc, k, mtoken_new("a", 1, NOW, NOW + 1000), NULL, NOW);
	/* a fifth of its life before it expires: minted again, early */
	assert_int_equal(mintcache_get(mc, k, NOW + 799, &w, &t, why),
	    MINT_HAVE);
	mtoken_unref(t);
	assert_int_equal(mintcache_get(mc, k, NOW + 800, &w, &t, why),
	    MINT_HAVE_REFRESH);
	mtoken_unref(t);
	/* once: the others keep using the old one meanwhile */
	assert_int_equal(mintcache_get(mc, k, NOW + 801, &w, &t, why),
	    MINT_HAVE);
	mtoken_unref(t);
	/* the early mint failed: the old one serves, no new try for a while */
	mintcache_done(mc, k, NULL, "refused", NOW + 802);
	assert_int_equal(mintcache_get(mc, k, NOW + 803, &w, &t, why),
	    MINT_HAVE);
	mtoken_unref(t);
	assert_int_equal(mintcache_get(mc, k, NOW + 802 + MINT_FAIL_HOLD_S, &w,
	    &t, why), MINT_HAVE_REFRESH);
	mtoken_unref(t);
	mintcache_done(mc, k, mtoken_new("b", 1, NOW + 810, NOW + 1810), NULL,
	    NOW + 810);
	assert_int_equal(mintcache_get(mc, k, NOW + 811, &w, &t, why),
	    MINT_HAVE);
	assert_string_equal(t->value, "b");
	mtoken_unref(t);
	/* within MINT_SKEW_S of its expiry it is not handed out */
	assert_int_equal(mintcache_get(mc, k, NOW + 1810 - MINT_SKEW_S, &w, &t,
	    why), MINT_START);
	assert_null(t);
	assert_int_equal(mintcache_get(mc, k, NOW + 1801, &w2, &t, why),
	    MINT_WAIT);
	/* a failure: both woken, and the next ones refused for a while */
	atomic_store(&woken, 0);
	mintcache_done(mc, k, NULL, "the token endpoint answered 401",
	    NOW + 1802);
	assert_int_equal(atomic_load(&woken), 2);
	assert_int_equal(mintcache_get(mc, k, NOW + 1803, &w, &t, why),
	    MINT_FAILED);
	assert_string_equal(why, "the token endpoint answered 401");
	assert_int_equal(mintcache_get(mc, k, NOW + 1802 + MINT_FAIL_HOLD_S,
	    &w, &t, why), MINT_START);
	/* a cancelled waiter is not woken */
	atomic_store(&woken, 0);
	mintcache_cancel(mc, &w);
	mintcache_cancel(mc, &w);	/* twice: nothing */
	mintcache_done(mc, k, NULL, "x", NOW + 1900);
	assert_int_equal(atomic_load(&woken), 0);
	mintcache_free(mc);
}

static void
t_bound(void **state)
{
	struct mintcache *mc = mintcache_new();
	struct mint_waiter w[2] = { { .wake = wake_cb }, { .wake = wake_cb } };
	struct mtoken *t;
	char why[MINT_WHY_MAX], key[32], big[MINT_KEY_MAX + 1];
	int i;

	(void)state;
	for (i = 0; i < MINT_MAX_ENTRIES; i++) {
		struct mint_waiter x = { .wake = wake_cb };

		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(mintcache_get(mc, key, NOW + i, &x, &t, why),
		    MINT_START);
		mintcache_cancel(mc, &x);
		mintcache_done(mc, key, mtoken_new("v", 1, NOW, NOW + 100000),
		    NULL, NOW + i);
	}
	/* full of good tokens: the one asked for least lately goes */
	assert_int_equal(mintcache_get(mc, "one-more", NOW + 5000, &w[0], &t,
	    why), MINT_START);
	mintcache_cancel(mc, &w[0]);
	assert_int_equal(mintcache_get(mc, "k1", NOW + 5001, &w[0], &t, why),
	    MINT_HAVE);
	mtoken_unref(t);
	assert_int_equal(mintcache_get(mc, "k0", NOW + 5002, &w[0], &t, why),
	    MINT_START);	/* k0 went for one-more (k2 for it) */
	mintcache_cancel(mc, &w[0]);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(mintcache_get(mc, big, NOW + 5003, &w[1], &t, why),
	    MINT_FAILED);
	mintcache_free(mc);

	/* full of mints under way: none can go, the next is refused */
	mc = mintcache_new();
	for (i = 0; i < MINT_MAX_ENTRIES; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(mintcache_get(mc, key, NOW, &w[0], &t, why),
		    MINT_START);
		mintcache_cancel(mc, &w[0]);
	}
	assert_int_equal(mintcache_get(mc, "one-more", NOW, &w[0], &t, why),
	    MINT_FAILED);
	assert_non_null(strstr(why, "too many"));
	mintcache_free(mc);
}

/* A sandbox that went: its tokens go, one being minted is not kept. */
static void
t_forget(void **state)
{
	struct mintcache *mc = mintcache_new();
	struct mint_waiter w = { .wake = wake_cb }, w2 = { .wake = wake_cb },
	    w3 = { .wake = wake_cb };
	struct mtoken *t, *kept;
	char why[MINT_WHY_MAX];
	size_t n = 0;

	(void)state;
	assert_int_equal(mintcache_get(mc, "sb\n1\nsvc", NOW, &w, &t, why),
	    MINT_START);
	kept = mtoken_new("a", 1, NOW, NOW + 3600);
	mintcache_done(mc, "sb\n1\nsvc", mtoken_ref(kept), NULL, NOW);
	assert_int_equal(mintcache_get(mc, "sb\n1\ngh", NOW, &w2, &t, why),
	    MINT_START);
	/* another registration of the same id: not forgotten with it */
	assert_int_equal(mintcache_get(mc, "sb\n12\nsvc", NOW, &w3, &t, why),
	    MINT_START);
	mintcache_cancel(mc, &w3);
	mintcache_forget(mc, "sb\n1\n");
	assert_int_equal(atomic_load(&kept->refs), 1);	/* let go, wiped */
	mtoken_unref(kept);
	/* the mint under way ends: its token is not kept, its waiter woken */
	atomic_store(&woken, 0);
	mintcache_done(mc, "sb\n1\ngh", mtoken_new("b", 1, NOW, NOW + 3600),
	    NULL, NOW);
	assert_int_equal(atomic_load(&woken), 1);
	mintcache_each(mc, NOW, count_cb, &n);
	assert_int_equal(n, 2);		/* gh (failed, held) and sb 12 */
	assert_int_equal(mintcache_get(mc, "sb\n1\ngh", NOW + 1, &w, &t, why),
	    MINT_FAILED);
	mintcache_free(mc);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_single_flight),
		cmocka_unit_test(t_refresh_and_expiry),
		cmocka_unit_test(t_short_token),
		cmocka_unit_test(t_sweep),
		cmocka_unit_test(t_forget),
		cmocka_unit_test(t_bound),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
