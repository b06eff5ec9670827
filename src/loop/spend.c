/*
 * spend.c: GCRA cells of budgets, one table for every worker (spend.h).
 * Cells are kept in a hash table keyed by (sandbox, secret, window) with
 * SipHash under a random key, so a sandbox's names cannot flood one chain.
 */
#include "autoconf.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "util/names.h"
#include "loop/spend.h"

#define NBUCKETS	4096
#define KEY_MAX		(NAME_BUFSZ + SECRET_NAME_MAX + 4)

struct cell {
	struct cell	*next;
	uint64_t	 tat;		/* ms: when the cell is empty again */
	size_t		 klen;
	char		 key[];		/* 'g' or 's' sandbox, NUL, secret, NUL, window */
};

struct spend {
	pthread_mutex_t	 mu;
	uint8_t		 hkey[crypto_shorthash_KEYBYTES];
	struct cell	*b[NBUCKETS];
	size_t		 n;
};

static const uint64_t window_ms[] = { 60u * 1000, 24u * 3600 * 1000 };

struct spend *
spend_new(void)
{
	struct spend *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	if (pthread_mutex_init(&s->mu, NULL) != 0) {
		free(s);
		return NULL;
	}
	randombytes_buf(s->hkey, sizeof(s->hkey));
	return s;
}

void
spend_free(struct spend *s)
{
	struct cell *c, *next;
	size_t i;

	if (s == NULL)
		return;
	for (i = 0; i < NBUCKETS; i++)
		for (c = s->b[i]; c != NULL; c = next) {
			next = c->next;
			free(c);
		}
	pthread_mutex_destroy(&s->mu);
	free(s);
}

/* The key of it into k; its length, 0 when it does not fit. */
static size_t
key_of(const struct spend_item *it, char k[KEY_MAX])
{
	size_t a = it->sandbox != NULL ? strlen(it->sandbox) : 0;
	size_t b = strlen(it->secret);

	if (1 + a + 1 + b + 1 + 1 > KEY_MAX)
		return 0;
	k[0] = it->sandbox != NULL ? 's' : 'g';
	memcpy(k + 1, it->sandbox != NULL ? it->sandbox : "", a);
	k[1 + a] = '\0';
	memcpy(k + 2 + a, it->secret, b);
	k[2 + a + b] = '\0';
	k[3 + a + b] = (char)('0' + it->window);
	return 4 + a + b;
}

static size_t
bucket(const struct spend *s, const char *k, size_t len)
{
	uint8_t h[crypto_shorthash_BYTES];
	uint64_t v;

	crypto_shorthash(h, (const uint8_t *)k, len, s->hkey);
	memcpy(&v, h, sizeof(v));
	return (size_t)(v % NBUCKETS);
}

static struct cell *
find(struct spend *s, const char *k, size_t len, size_t *bk)
{
	struct cell *c;

	*bk = bucket(s, k, len);
	for (c = s->b[*bk]; c != NULL; c = c->next)
		if (c->klen == len && memcmp(c->key, k, len) == 0)
			return c;
	return NULL;
}

/* Forgets every cell that holds nothing at now: the table's room. */
static void
sweep(struct spend *s, uint64_t now)
{
	struct cell **pp, *c;
	size_t i;

	for (i = 0; i < NBUCKETS; i++)
		for (pp = &s->b[i]; (c = *pp) != NULL;) {
			if (c->tat <= now) {
				*pp = c->next;
				free(c);
				s->n--;
			} else
				pp = &c->next;
		}
}

static struct cell *
cell_get(struct spend *s, const char *k, size_t len, uint64_t now)
{
	struct cell *c;
	size_t bk;

	if ((c = find(s, k, len, &bk)) != NULL)
		return c;
	if (s->n >= SPEND_MAX_CELLS)
		sweep(s, now);
	if (s->n >= SPEND_MAX_CELLS ||
	    (c = calloc(1, sizeof(*c) + len)) == NULL)
		return NULL;
	memcpy(c->key, k, len);
	c->klen = len;
	c->tat = now;
	c->next = s->b[bk];
	s->b[bk] = c;
	s->n++;
	return c;
}

/* W / N, at least 1 ms. */
static uint64_t
interval(const struct spend_item *it)
{
	uint64_t t = window_ms[it->window] / it->limit;

	return t > 0 ? t : 1;
}

int
spend_take(struct spend *s, const struct spend_item *items, size_t n,
    uint64_t now, size_t *over, uint64_t *retry_ms)
{
	struct cell *cells[SPEND_MAX_TAKE];
	char k[KEY_MAX];
	uint64_t t, w, start;
	size_t i, len;
	int r = 0;

	*over = n;
	*retry_ms = 0;
	if (n > SPEND_MAX_TAKE)
		return -1;
	pthread_mutex_lock(&s->mu);
	for (i = 0; i < n && r == 0; i++) {
		if (items[i].limit == 0 || (len = key_of(&items[i], k)) == 0 ||
		    (cells[i] = cell_get(s, k, len, now)) == NULL) {
			r = -1;
			break;
		}
		t = interval(&items[i]);
		w = window_ms[items[i].window];
		start = cells[i]->tat > now ? cells[i]->tat : now;
		/* After this one the cell must stay within a window of now. */
		if (start + t - now > w) {
			*over = i;
			*retry_ms = start + t - now - w;
			r = -1;
		}
	}
	for (i = 0; r == 0 && i < n; i++) {
		start = cells[i]->tat > now ? cells[i]->tat : now;
		cells[i]->tat = start + interval(&items[i]);
	}
	pthread_mutex_unlock(&s->mu);
	return r;
}

unsigned
spend_used(struct spend *s, const struct spend_item *it, uint64_t now)
{
	struct cell *c;
	char k[KEY_MAX];
	uint64_t t, u = 0;
	size_t len, bk;

	if (it->limit == 0 || (len = key_of(it, k)) == 0)
		return 0;
	pthread_mutex_lock(&s->mu);
	if ((c = find(s, k, len, &bk)) != NULL && c->tat > now) {
		t = interval(it);
		u = (c->tat - now + t - 1) / t;
	}
	pthread_mutex_unlock(&s->mu);
	return (unsigned)(u > it->limit ? it->limit : u);
}
