/* dnsmem.c: which addresses the DNS filter gave each sandbox for each name. */
#include "autoconf.h"

#include <sys/queue.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "dnsmem.h"
#include "names.h"

#define NSHARDS		64
#define NBUCKETS	256	/* per shard */
#define SANDBOX_MAX	64

struct entry {
	struct entry	*next;			/* hash chain */
	TAILQ_ENTRY(entry) age;			/* oldest first */
	time_t		 expires;
	struct sl_addr	 addr;
	char		 sandbox[SANDBOX_MAX];
	char		 name[NAME_BUFSZ];
};
TAILQ_HEAD(entry_list, entry);

struct shard {
	pthread_mutex_t	 mtx;
	struct entry	*buckets[NBUCKETS];
	struct entry_list age;
	size_t		 n, max;
};

struct dnsmem {
	struct shard	 shards[NSHARDS];
	unsigned	 grace;
	unsigned char	 key[crypto_shorthash_KEYBYTES];
};

struct dnsmem *
dnsmem_new(size_t max_entries, unsigned grace_s)
{
	struct dnsmem *m;
	size_t i;

	if ((m = calloc(1, sizeof(*m))) == NULL)
		return NULL;
	m->grace = grace_s;
	randombytes_buf(m->key, sizeof(m->key));
	for (i = 0; i < NSHARDS; i++) {
		pthread_mutex_init(&m->shards[i].mtx, NULL);
		TAILQ_INIT(&m->shards[i].age);
		m->shards[i].max = max_entries / NSHARDS ? max_entries / NSHARDS : 1;
	}
	return m;
}

void
dnsmem_free(struct dnsmem *m)
{
	struct entry *e;
	size_t i;

	if (m == NULL)
		return;
	for (i = 0; i < NSHARDS; i++) {
		while ((e = TAILQ_FIRST(&m->shards[i].age)) != NULL) {
			TAILQ_REMOVE(&m->shards[i].age, e, age);
			free(e);
		}
		pthread_mutex_destroy(&m->shards[i].mtx);
	}
	free(m);
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
find(struct shard *s, uint64_t h, const char *sandbox, const char *name,
    const struct sl_addr *a)
{
	struct entry **pp = &s->buckets[h % NBUCKETS];

	for (; *pp != NULL; pp = &(*pp)->next)
		if (addr_equal(&(*pp)->addr, a) &&
		    strcmp((*pp)->name, name) == 0 &&
		    strncmp((*pp)->sandbox, sandbox, SANDBOX_MAX - 1) == 0)
			return pp;
	return NULL;
}

static void
unlink_entry(struct dnsmem *m, struct shard *s, struct entry *e)
{
	uint64_t h = hash_of(m, e->sandbox, e->name, &e->addr);
	struct entry **pp = &s->buckets[h % NBUCKETS];

	while (*pp != e)
		pp = &(*pp)->next;
	*pp = e->next;
	TAILQ_REMOVE(&s->age, e, age);
	s->n--;
}

void
dnsmem_add(struct dnsmem *m, const char *sandbox, const char *name,
    const struct sl_addr *addr, uint32_t ttl, time_t now)
{
	uint64_t h = hash_of(m, sandbox, name, addr);
	struct shard *s = &m->shards[(h >> 32) % NSHARDS];
	struct entry **pp, *e;

	pthread_mutex_lock(&s->mtx);
	if ((pp = find(s, h, sandbox, name, addr)) != NULL) {
		e = *pp;
		TAILQ_REMOVE(&s->age, e, age);	/* renewed: now the youngest */
	} else {
		if (s->n >= s->max) {
			e = TAILQ_FIRST(&s->age);
			unlink_entry(m, s, e);
		} else if ((e = malloc(sizeof(*e))) == NULL) {
			pthread_mutex_unlock(&s->mtx);
			return;		/* not remembered: the firewall asks upstream */
		}
		memset(e, 0, sizeof(*e));
		snprintf(e->sandbox, sizeof(e->sandbox), "%s", sandbox);
		snprintf(e->name, sizeof(e->name), "%s", name);
		e->addr = *addr;
		e->next = s->buckets[h % NBUCKETS];
		s->buckets[h % NBUCKETS] = e;
		s->n++;
	}
	e->expires = now + (time_t)ttl + m->grace;
	TAILQ_INSERT_TAIL(&s->age, e, age);
	pthread_mutex_unlock(&s->mtx);
}

int
dnsmem_has(struct dnsmem *m, const char *sandbox, const char *name,
    const struct sl_addr *addr, time_t now)
{
	uint64_t h = hash_of(m, sandbox, name, addr);
	struct shard *s = &m->shards[(h >> 32) % NSHARDS];
	struct entry **pp;
	int r = 0;

	pthread_mutex_lock(&s->mtx);
	if ((pp = find(s, h, sandbox, name, addr)) != NULL)
		r = (*pp)->expires >= now;
	pthread_mutex_unlock(&s->mtx);
	return r;
}

void
dnsmem_forget(struct dnsmem *m, const char *sandbox)
{
	struct entry *e, *next;
	size_t i;

	for (i = 0; i < NSHARDS; i++) {
		struct shard *s = &m->shards[i];

		pthread_mutex_lock(&s->mtx);
		for (e = TAILQ_FIRST(&s->age); e != NULL; e = next) {
			next = TAILQ_NEXT(e, age);
			if (strncmp(e->sandbox, sandbox, SANDBOX_MAX - 1) == 0) {
				unlink_entry(m, s, e);
				free(e);
			}
		}
		pthread_mutex_unlock(&s->mtx);
	}
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
