/* dnsmem.c: which addresses the DNS filter gave each sandbox for each name. */
#include "autoconf.h"

#include <sys/queue.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "util/names.h"
#include "dns/dnsmem.h"

#define NSHARDS		64
#define NBUCKETS	256	/* per shard */
#define SANDBOX_MAX	64

struct sbmem;

struct entry {
	struct entry	*next;			/* hash chain */
	TAILQ_ENTRY(entry) age;			/* its sandbox's, oldest first */
	struct sbmem	*sb;
	time_t		 expires;
	struct sl_addr	 addr;
	char		 name[NAME_BUFSZ];
};
TAILQ_HEAD(entry_list, entry);

/* One sandbox's answers: bounded, its own oldest evicted first. */
struct sbmem {
	struct sbmem	*next;			/* in its shard */
	struct entry_list age;
	size_t		 n;
	char		 sandbox[SANDBOX_MAX];
};

/* A sandbox's entries all live in one shard, picked by its id. */
struct shard {
	pthread_mutex_t	 mtx;
	struct entry	*buckets[NBUCKETS];
	struct sbmem	*sandboxes;
	size_t		 n;
};

struct dnsmem {
	struct shard	 shards[NSHARDS];
	size_t		 max_per_sandbox;
	unsigned	 grace;
	unsigned char	 key[crypto_shorthash_KEYBYTES];
};

struct dnsmem *
dnsmem_new(size_t max_per_sandbox, unsigned grace_s)
{
	struct dnsmem *m;
	size_t i;

	if ((m = calloc(1, sizeof(*m))) == NULL)
		return NULL;
	m->grace = grace_s;
	m->max_per_sandbox = max_per_sandbox ? max_per_sandbox : 1;
	randombytes_buf(m->key, sizeof(m->key));
	for (i = 0; i < NSHARDS; i++)
		pthread_mutex_init(&m->shards[i].mtx, NULL);
	return m;
}

static void
sbmem_free(struct sbmem *sm)
{
	struct entry *e;

	while ((e = TAILQ_FIRST(&sm->age)) != NULL) {
		TAILQ_REMOVE(&sm->age, e, age);
		free(e);
	}
	free(sm);
}

void
dnsmem_free(struct dnsmem *m)
{
	struct sbmem *sm;
	size_t i;

	if (m == NULL)
		return;
	for (i = 0; i < NSHARDS; i++) {
		while ((sm = m->shards[i].sandboxes) != NULL) {
			m->shards[i].sandboxes = sm->next;
			sbmem_free(sm);
		}
		pthread_mutex_destroy(&m->shards[i].mtx);
	}
	free(m);
}

static struct shard *
shard_of(struct dnsmem *m, const char *sandbox)
{
	uint64_t h;

	crypto_shorthash((unsigned char *)&h, (const unsigned char *)sandbox,
	    strnlen(sandbox, SANDBOX_MAX - 1), m->key);
	return &m->shards[h % NSHARDS];
}

static struct sbmem *
sbmem_find(struct shard *s, const char *sandbox, int create)
{
	struct sbmem *sm;

	for (sm = s->sandboxes; sm != NULL; sm = sm->next)
		if (strncmp(sm->sandbox, sandbox, SANDBOX_MAX - 1) == 0)
			return sm;
	if (!create || (sm = calloc(1, sizeof(*sm))) == NULL)
		return NULL;
	TAILQ_INIT(&sm->age);
	snprintf(sm->sandbox, sizeof(sm->sandbox), "%s", sandbox);
	sm->next = s->sandboxes;
	s->sandboxes = sm;
	return sm;
}

/* One keyed hash picks the shard (high bits) and the bucket (low bits). */
static uint64_t
hash_of(const struct dnsmem *m, const char *sandbox, const char *name,
    const struct sl_addr *a)
{
	unsigned char buf[SANDBOX_MAX + NAME_BUFSZ + 17];
	size_t sl = strnlen(sandbox, SANDBOX_MAX - 1), nl = strlen(name);
	uint64_t h;

	memcpy(buf, sandbox, sl);
	buf[sl] = 0;
	memcpy(buf + sl + 1, name, nl);
	buf[sl + 1 + nl] = (unsigned char)a->family;
	memcpy(buf + sl + 2 + nl, a->bytes, 16);
	crypto_shorthash((unsigned char *)&h, buf, sl + nl + 18, m->key);
	return h;
}

static struct entry **
find(struct shard *s, uint64_t h, const struct sbmem *sm, const char *name,
    const struct sl_addr *a)
{
	struct entry **pp = &s->buckets[h % NBUCKETS];

	for (; *pp != NULL; pp = &(*pp)->next)
		if ((*pp)->sb == sm && addr_equal(&(*pp)->addr, a) &&
		    strcmp((*pp)->name, name) == 0)
			return pp;
	return NULL;
}

static void
unlink_entry(struct dnsmem *m, struct shard *s, struct entry *e)
{
	uint64_t h = hash_of(m, e->sb->sandbox, e->name, &e->addr);
	struct entry **pp = &s->buckets[h % NBUCKETS];

	while (*pp != e)
		pp = &(*pp)->next;
	*pp = e->next;
	TAILQ_REMOVE(&e->sb->age, e, age);
	e->sb->n--;
	s->n--;
}

void
dnsmem_add(struct dnsmem *m, const char *sandbox, const char *name,
    const struct sl_addr *addr, uint32_t ttl, time_t now)
{
	uint64_t h = hash_of(m, sandbox, name, addr);
	struct shard *s = shard_of(m, sandbox);
	struct entry **pp, *e;
	struct sbmem *sm;

	pthread_mutex_lock(&s->mtx);
	if ((sm = sbmem_find(s, sandbox, 1)) == NULL)
		goto out;	/* not remembered: the firewall asks upstream */
	if ((pp = find(s, h, sm, name, addr)) != NULL) {
		e = *pp;
		TAILQ_REMOVE(&sm->age, e, age);	/* renewed: now the youngest */
	} else {
		if (sm->n >= m->max_per_sandbox) {
			e = TAILQ_FIRST(&sm->age);	/* its own oldest goes */
			unlink_entry(m, s, e);
		} else if ((e = malloc(sizeof(*e))) == NULL)
			goto out;
		memset(e, 0, sizeof(*e));
		e->sb = sm;
		snprintf(e->name, sizeof(e->name), "%s", name);
		e->addr = *addr;
		e->next = s->buckets[h % NBUCKETS];
		s->buckets[h % NBUCKETS] = e;
		sm->n++;
		s->n++;
	}
	e->expires = now + (time_t)ttl + m->grace;
	TAILQ_INSERT_TAIL(&sm->age, e, age);
 out:
	pthread_mutex_unlock(&s->mtx);
}

int
dnsmem_has(struct dnsmem *m, const char *sandbox, const char *name,
    const struct sl_addr *addr, time_t now)
{
	uint64_t h = hash_of(m, sandbox, name, addr);
	struct shard *s = shard_of(m, sandbox);
	struct entry **pp;
	struct sbmem *sm;
	int r = 0;

	pthread_mutex_lock(&s->mtx);
	if ((sm = sbmem_find(s, sandbox, 0)) != NULL &&
	    (pp = find(s, h, sm, name, addr)) != NULL)
		r = (*pp)->expires >= now;
	pthread_mutex_unlock(&s->mtx);
	return r;
}

void
dnsmem_forget(struct dnsmem *m, const char *sandbox)
{
	struct shard *s = shard_of(m, sandbox);
	struct sbmem **pp, *sm;
	struct entry *e;

	pthread_mutex_lock(&s->mtx);
	for (pp = &s->sandboxes; *pp != NULL; pp = &(*pp)->next)
		if (strncmp((*pp)->sandbox, sandbox, SANDBOX_MAX - 1) == 0)
			break;
	if ((sm = *pp) != NULL) {
		while ((e = TAILQ_FIRST(&sm->age)) != NULL) {
			unlink_entry(m, s, e);
			free(e);
		}
		*pp = sm->next;
		free(sm);
	}
	pthread_mutex_unlock(&s->mtx);
}

size_t
dnsmem_count(struct dnsmem *m)
{
	size_t i, n = 0;

	for (i = 0; i < NSHARDS; i++) {
		pthread_mutex_lock(&m->shards[i].mtx);
		n += m->shards[i].n;
		pthread_mutex_unlock(&m->shards[i].mtx);
	}
	return n;
}

size_t
dnsmem_entry_size(void)
{
	return sizeof(struct entry);
}
