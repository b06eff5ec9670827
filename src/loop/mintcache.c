/* mintcache.c: minted tokens shared by the workers (mintcache.h). */
#include "autoconf.h"

#include <sys/mman.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "util/keyfile.h"
#include "util/redact.h"
#include "loop/mintcache.h"

#define NBUCKETS	1024

struct mentry {
	struct mentry	*next;
	char		 key[MINT_KEY_MAX];
	struct mtoken	*tok;		/* the last good one, or NULL */
	int		 minting;	/* a caller was told to mint */
	int		 forgotten;	/* its sandbox went: no token is kept */
	int64_t		 used;		/* last asked for (unix seconds) */
	int64_t		 failed_until;	/* the last mint failed: refused till then */
	char		 why[MINT_WHY_MAX];
	struct mint_waiter *waiters;
};

struct mintcache {
	pthread_mutex_t	 mu;
	struct mentry	*b[NBUCKETS];
	size_t		 n;
	size_t		 sweep;		/* the bucket swept next */
};

/* ---- tokens --------------------------------------------------------- */

struct mtoken *
mtoken_new(const char *value, size_t len, int64_t now, int64_t expires_at)
{
	size_t fl = redact_forms_size(len);
	uint8_t d[8];
	struct mtoken *t;
	int n;

	if (len == 0 || fl == 0 || (t = calloc(1, sizeof(*t))) == NULL)
		return NULL;
	/*
	 * Guarded, and the token locked: its forms are locked too while
	 * the limit allows (libsodium tries), but never at the token's cost:
	 * they are many times its length.
	 */
	if ((t->mem = sodium_malloc(len + 1 + fl)) == NULL ||
	    mlock(t->mem, len + 1) != 0) {
		sodium_free(t->mem);
		free(t);
		return NULL;
	}
	memcpy(t->mem, value, len);
	t->mem[len] = '\0';
	t->value = (const char *)t->mem;
	t->len = len;
	if ((n = redact_forms(t->mem, len, t->mem + len + 1, fl, t->pats,
	    REDACT_MAX_FORMS)) < 1) {
		sodium_free(t->mem);
		free(t);
		return NULL;
	}
	t->npats = (size_t)n;
	t->pats_key = redact_serial();
	crypto_generichash(d, sizeof(d), t->mem, len, NULL, 0);
	sodium_bin2hex(t->fp, sizeof(t->fp), d, sizeof(d));
	t->minted_at = now;
	t->expires_at = expires_at;
	atomic_init(&t->refs, 1);
	return t;
}

struct mtoken *
mtoken_ref(struct mtoken *t)
{
	atomic_fetch_add(&t->refs, 1);
	return t;
}

void
mtoken_unref(struct mtoken *t)
{
	if (t == NULL || atomic_fetch_sub(&t->refs, 1) != 1)
		return;
	sodium_free(t->mem);	/* wipes, unlocks */
	free(t);
}

/* ---- the table ------------------------------------------------------ */

struct mintcache *
mintcache_new(void)
{
	struct mintcache *mc;

	if ((mc = calloc(1, sizeof(*mc))) == NULL)
		return NULL;
	if (pthread_mutex_init(&mc->mu, NULL) != 0) {
		free(mc);
		return NULL;
	}
	return mc;
}

void
mintcache_free(struct mintcache *mc)
{
	struct mentry *e, *next;
	size_t i;

	if (mc == NULL)
		return;
	for (i = 0; i < NBUCKETS; i++)
		for (e = mc->b[i]; e != NULL; e = next) {
			next = e->next;
			mtoken_unref(e->tok);
			free(e);
		}
	pthread_mutex_destroy(&mc->mu);
	free(mc);
}

static size_t
bucket(const char *key)
{
	uint32_t h = 2166136261u;

	while (*key != '\0')
		h = (h ^ (uint8_t)*key++) * 16777619u;
	return h % NBUCKETS;
}

/* Whether e's token serves at now, and whether it is time to mint anew. */
static int
usable(const struct mentry *e, int64_t now, int *early)
{
	int64_t life, lead;

	if (e->tok == NULL || now >= e->tok->expires_at - MINT_SKEW_S)
		return 0;
	life = e->tok->expires_at - e->tok->minted_at;
	lead = life / 5 > MINT_EARLY_MIN_S ? life / 5 : MINT_EARLY_MIN_S;
	/*
	 * Never in the first half of its usable life: a short token would
	 * else be minted again by the very requests that waited for it.
	 */
	if (lead > MINT_SKEW_S + (life - MINT_SKEW_S) / 2)
		lead = MINT_SKEW_S + (life - MINT_SKEW_S) / 2;
	*early = now >= e->tok->expires_at - lead;
	return 1;
}

/* An entry nothing depends on any more: no mint, no waiter, no good token. */
static int
idle(const struct mentry *e, int64_t now)
{
	int early;

	return !e->minting && e->waiters == NULL && !usable(e, now, &early) &&
	    now >= e->failed_until;
}

/*
 * Drops the idle entries of one bucket, the next one each call: a key no
 * request asks for any more (a sandbox gone, a source changed) lets its
 * token's locked memory go within NBUCKETS lookups.
 */
static void
sweep(struct mintcache *mc, int64_t now)
{
	struct mentry **pp = &mc->b[mc->sweep], *e;

	mc->sweep = (mc->sweep + 1) % NBUCKETS;
	while ((e = *pp) != NULL) {
		if (!idle(e, now)) {
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		mtoken_unref(e->tok);
		free(e);
		mc->n--;
	}
}

/*
 * Drops one entry to make room: an idle one, else the one asked for
 * least lately that no request waits for (its token is minted again when
 * it is wanted); 0, or -1 when every entry has a mint under way.
 */
static int
evict(struct mintcache *mc, int64_t now)
{
	struct mentry **pp, *e, **oldest = NULL;
	size_t i;

	for (i = 0; i < NBUCKETS; i++)
		for (pp = &mc->b[i]; (e = *pp) != NULL; pp = &e->next) {
			if (idle(e, now)) {
				oldest = pp;
				goto drop;
			}
			if (!e->minting && e->waiters == NULL &&
			    (oldest == NULL || e->used < (*oldest)->used))
				oldest = pp;
		}
	if (oldest == NULL)
		return -1;
 drop:
	e = *oldest;
	*oldest = e->next;
	mtoken_unref(e->tok);
	free(e);
	mc->n--;
	return 0;
}

static struct mentry *
find(struct mintcache *mc, const char *key, int make, int64_t now)
{
	size_t i = bucket(key);
	struct mentry *e;

	for (e = mc->b[i]; e != NULL; e = e->next)
		if (strcmp(e->key, key) == 0)
			return e;
	if (!make || strlen(key) >= MINT_KEY_MAX ||
	    (mc->n >= MINT_MAX_ENTRIES && evict(mc, now) != 0) ||
	    (e = calloc(1, sizeof(*e))) == NULL)
		return NULL;
	snprintf(e->key, sizeof(e->key), "%s", key);
	e->next = mc->b[i];
	mc->b[i] = e;
	mc->n++;
	return e;
}

static void
enqueue(struct mentry *e, struct mint_waiter *w)
{
	w->next = e->waiters;
	if (w->next != NULL)
		w->next->prevp = &w->next;
	w->prevp = &e->waiters;
	e->waiters = w;
}

static void
dequeue(struct mint_waiter *w)
{
	if (w->prevp == NULL)
		return;
	*w->prevp = w->next;
	if (w->next != NULL)
		w->next->prevp = w->prevp;
	w->next = NULL;
	w->prevp = NULL;
}

enum mint_look
mintcache_get(struct mintcache *mc, const char *key, int64_t now,
    struct mint_waiter *w, struct mtoken **tok, char why[MINT_WHY_MAX])
{
	enum mint_look r;
	struct mentry *e;
	int early = 0;

	*tok = NULL;
	pthread_mutex_lock(&mc->mu);
	sweep(mc, now);
	if ((e = find(mc, key, 1, now)) != NULL)
		e->used = now;
	if (e == NULL) {
		snprintf(why, MINT_WHY_MAX, "too many tokens being minted at once");
		r = MINT_FAILED;
	} else if (usable(e, now, &early)) {
		*tok = mtoken_ref(e->tok);
		/* Early, and not while an early one failed lately. */
		r = early && !e->minting && now >= e->failed_until ?
		    MINT_HAVE_REFRESH : MINT_HAVE;
		e->minting |= r == MINT_HAVE_REFRESH;
	} else if (now < e->failed_until) {
		snprintf(why, MINT_WHY_MAX, "%s", e->why);
		r = MINT_FAILED;
	} else {
		r = e->minting ? MINT_WAIT : MINT_START;
		e->minting = 1;
		enqueue(e, w);
	}
	pthread_mutex_unlock(&mc->mu);
	return r;
}

void
mintcache_done(struct mintcache *mc, const char *key, struct mtoken *tok,
    const char *why, int64_t now)
{
	struct mint_waiter *w;
	struct mentry *e;

	pthread_mutex_lock(&mc->mu);
	if ((e = find(mc, key, 0, now)) == NULL) {
		pthread_mutex_unlock(&mc->mu);
		mtoken_unref(tok);
		return;
	}
	e->minting = 0;
	if (tok != NULL && e->forgotten) {
		mtoken_unref(tok);	/* its sandbox went while it was minted */
		tok = NULL;
		why = "the sandbox went";
	}
	if (tok != NULL) {
		mtoken_unref(e->tok);
		e->tok = tok;
		e->failed_until = 0;
	} else {
		/* An early mint that failed leaves the old token serving. */
		e->failed_until = now + MINT_FAIL_HOLD_S;
		snprintf(e->why, sizeof(e->why), "%s", why != NULL ? why :
		    "the mint failed");
	}
	while ((w = e->waiters) != NULL) {
		dequeue(w);
		w->wake(w->arg);
	}
	pthread_mutex_unlock(&mc->mu);
}

void
mintcache_cancel(struct mintcache *mc, struct mint_waiter *w)
{
	pthread_mutex_lock(&mc->mu);
	dequeue(w);
	pthread_mutex_unlock(&mc->mu);
}

int
mintcache_waiting(struct mintcache *mc, const struct mint_waiter *w)
{
	int r;

	pthread_mutex_lock(&mc->mu);
	r = w->prevp != NULL;
	pthread_mutex_unlock(&mc->mu);
	return r;
}

void
mintcache_each(struct mintcache *mc, int64_t now,
    void (*cb)(void *arg, const struct mint_info *info), void *arg)
{
	struct mint_waiter *w;
	struct mint_info in;
	struct mentry *e;
	size_t i;

	pthread_mutex_lock(&mc->mu);
	for (i = 0; i < NBUCKETS; i++)
		for (e = mc->b[i]; e != NULL; e = e->next) {
			memset(&in, 0, sizeof(in));
			in.key = e->key;
			in.minting = e->minting;
			for (w = e->waiters; w != NULL; w = w->next)
				in.waiters++;
			if (e->tok != NULL && now < e->tok->expires_at) {
				in.fp = e->tok->fp;
				in.minted_at = e->tok->minted_at;
				in.expires_at = e->tok->expires_at;
			}
			if (now < e->failed_until) {
				in.failed_until = e->failed_until;
				in.why = e->why;
			}
			cb(arg, &in);
		}
	pthread_mutex_unlock(&mc->mu);
}

void
mintcache_forget(struct mintcache *mc, const char *prefix)
{
	struct mentry **pp, *e;
	size_t i, n = strlen(prefix);

	pthread_mutex_lock(&mc->mu);
	for (i = 0; i < NBUCKETS; i++)
		for (pp = &mc->b[i]; (e = *pp) != NULL;) {
			if (strncmp(e->key, prefix, n) != 0) {
				pp = &e->next;
				continue;
			}
			mtoken_unref(e->tok);
			e->tok = NULL;
			if (e->minting || e->waiters != NULL) {
				e->forgotten = 1;	/* goes once idle */
				pp = &e->next;
				continue;
			}
			*pp = e->next;
			free(e);
			mc->n--;
		}
	pthread_mutex_unlock(&mc->mu);
}
