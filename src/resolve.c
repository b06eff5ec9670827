/* resolve.c: the worker's asynchronous resolver (evdns) with a TTL cache. */
#include "autoconf.h"

#include <sys/queue.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <sodium.h>

#include "config.h"
#include "err.h"
#include "log.h"
#include "names.h"
#include "resolve.h"

#define TTL_MIN		5
#define TTL_MAX		3600
#define TTL_NEGATIVE	5
#define NBUCKETS	1024

struct rentry;
struct resolve_req;
TAILQ_HEAD(req_list, resolve_req);

struct resolve_req {
	TAILQ_ENTRY(resolve_req) link;
	struct req_list	*list;		/* the list it is on: waiters or ready */
	struct rentry	*e;
	resolve_cb	 cb;
	void		*arg;
};

struct rentry {
	struct rentry	*next;		/* hash chain */
	TAILQ_ENTRY(rentry) lru;
	struct resolver	*r;
	char		 name[NAME_BUFSZ];
	int		 pending;	/* evdns queries outstanding */
	int		 failed;	/* no answer from any resolver */
	int		 errors;	/* queries that failed */
	int		 busy;		/* its callbacks are running */
	uint32_t	 ttl;
	time_t		 expires;	/* monotonic seconds */
	struct resolve_answer ans;	/* valid when pending == 0 */
	struct resolve_answer build;	/* being filled by the queries */
	struct req_list	 waiters;
};
TAILQ_HEAD(rentry_list, rentry);

struct resolver {
	struct evdns_base *dns;
	struct rentry	*buckets[NBUCKETS];
	struct rentry_list lru;		/* least recently used first */
	size_t		 n, max;
	unsigned char	 key[crypto_shorthash_KEYBYTES];
};

static time_t
now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

struct resolver *
resolver_new(struct event_base *base, const struct endpoint *servers,
    size_t nservers, unsigned timeout_ms, size_t max_entries)
{
	struct resolver *r;
	char tmo[32];
	size_t i;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	TAILQ_INIT(&r->lru);
	r->max = max_entries;
	randombytes_buf(r->key, sizeof(r->key));
	if ((r->dns = evdns_base_new(base, 0)) == NULL)
		goto fail;
	for (i = 0; i < nservers; i++)
		if (evdns_base_nameserver_sockaddr_add(r->dns,
		    (const struct sockaddr *)&servers[i].ss, servers[i].len,
		    0) != 0) {
			log_warnx("resolve", "cannot use resolver %s",
			    servers[i].text);
			goto fail;
		}
	snprintf(tmo, sizeof(tmo), "%u.%03u", timeout_ms / 1000,
	    timeout_ms % 1000);
	evdns_base_set_option(r->dns, "timeout:", tmo);
	evdns_base_set_option(r->dns, "attempts:", "2");
	evdns_base_set_option(r->dns, "randomize-case:", "0");
	return r;
 fail:
	if (r->dns != NULL)
		evdns_base_free(r->dns, 0);
	free(r);
	return NULL;
}

static size_t
bucket_of(const struct resolver *r, const char *name)
{
	uint64_t h;

	crypto_shorthash((unsigned char *)&h, (const unsigned char *)name,
	    strlen(name), r->key);
	return (size_t)(h % NBUCKETS);
}

static void
entry_unlink(struct resolver *r, struct rentry *e)
{
	struct rentry **pp = &r->buckets[bucket_of(r, e->name)];

	while (*pp != e)
		pp = &(*pp)->next;
	*pp = e->next;
	TAILQ_REMOVE(&r->lru, e, lru);
	r->n--;
}

void
resolver_free(struct resolver *r)
{
	struct rentry *e;
	struct resolve_req *q;

	if (r == NULL)
		return;
	/* Outstanding evdns requests are dropped without callbacks. */
	evdns_base_free(r->dns, 0);
	while ((e = TAILQ_FIRST(&r->lru)) != NULL) {
		while ((q = TAILQ_FIRST(&e->waiters)) != NULL) {
			TAILQ_REMOVE(&e->waiters, q, link);
			free(q);
		}
		entry_unlink(r, e);
		free(e);
	}
	free(r);
}

static struct rentry *
entry_find(struct resolver *r, const char *name)
{
	struct rentry *e;

	for (e = r->buckets[bucket_of(r, name)]; e != NULL; e = e->next)
		if (strcmp(e->name, name) == 0)
			return e;
	return NULL;
}

/* Drops idle entries from the cold end while over the bound; never keep. */
static void
evict(struct resolver *r, const struct rentry *keep)
{
	struct rentry *e, *next;

	for (e = TAILQ_FIRST(&r->lru); e != NULL && r->n > r->max; e = next) {
		next = TAILQ_NEXT(e, lru);
		if (e != keep && !e->busy && e->pending == 0 &&
		    TAILQ_EMPTY(&e->waiters)) {
			entry_unlink(r, e);
			free(e);
		}
	}
}

static struct rentry *
entry_new(struct resolver *r, const char *name)
{
	struct rentry *e;
	size_t b;

	if ((e = calloc(1, sizeof(*e))) == NULL)
		return NULL;
	e->r = r;
	snprintf(e->name, sizeof(e->name), "%s", name);
	TAILQ_INIT(&e->waiters);
	b = bucket_of(r, name);
	e->next = r->buckets[b];
	r->buckets[b] = e;
	TAILQ_INSERT_TAIL(&r->lru, e, lru);
	r->n++;
	evict(r, e);
	return e;
}

static void
entry_finish(struct rentry *e)
{
	struct req_list ready;
	struct resolve_req *q;
	uint32_t ttl;

	e->ans = e->build;
	ttl = e->ans.n == 0 ? TTL_NEGATIVE : e->ttl;
	if (ttl < TTL_MIN)
		ttl = TTL_MIN;
	if (ttl > TTL_MAX)
		ttl = TTL_MAX;
	e->expires = e->failed ? 0 : now_sec() + ttl;

	/* Callbacks may start new lookups on this entry: detach them first. */
	TAILQ_INIT(&ready);
	TAILQ_CONCAT(&ready, &e->waiters, link);
	TAILQ_FOREACH(q, &ready, link)
		q->list = &ready;	/* cancels during callbacks find it */
	e->busy = 1;	/* callbacks must not evict what we still read */
	while ((q = TAILQ_FIRST(&ready)) != NULL) {
		TAILQ_REMOVE(&ready, q, link);
		q->cb(e->failed ? SL_ERR_IO : 0, &e->ans, q->arg);
		free(q);
	}
	e->busy = 0;
}

static void
add_addr(struct resolve_answer *ans, int family, const void *bytes)
{
	struct sl_addr a;

	if (ans->n == RESOLVE_MAX_ADDRS)
		return;
	memset(&a, 0, sizeof(a));
	a.family = (sa_family_t)family;
	memcpy(a.bytes, bytes, family == AF_INET ? 4 : 16);
	addr_canonical(&a, &ans->addrs[ans->n++]);
}

static void
dns_cb(int result, char type, int count, int ttl, void *addresses, void *arg)
{
	struct rentry *e = arg;
	int i;

	if (result == DNS_ERR_NONE) {
		for (i = 0; i < count; i++) {
			if (type == DNS_IPv4_A)
				add_addr(&e->build, AF_INET,
				    (const uint8_t *)addresses + 4 * i);
			else if (type == DNS_IPv6_AAAA)
				add_addr(&e->build, AF_INET6,
				    (const uint8_t *)addresses + 16 * i);
		}
		if (ttl >= 0 && (e->ttl == 0 || (uint32_t)ttl < e->ttl))
			e->ttl = (uint32_t)ttl;
	} else if (result != DNS_ERR_NOTEXIST && result != DNS_ERR_NODATA)
		e->errors++;
	if (--e->pending > 0)
		return;
	/* An address from one family is an answer; silence from both is not. */
	e->failed = e->build.n == 0 && e->errors > 0;
	entry_finish(e);
}

/* Starts both queries; returns how many were started. */
static int
entry_start(struct resolver *r, struct rentry *e)
{
	memset(&e->build, 0, sizeof(e->build));
	e->ttl = 0;
	e->errors = 0;
	e->pending = 2;
	if (evdns_base_resolve_ipv4(r->dns, e->name, DNS_QUERY_NO_SEARCH,
	    dns_cb, e) == NULL) {
		e->pending--;
		e->errors++;
	}
	if (evdns_base_resolve_ipv6(r->dns, e->name, DNS_QUERY_NO_SEARCH,
	    dns_cb, e) == NULL) {
		e->pending--;
		e->errors++;
	}
	return e->pending;
}

int
resolve_name(struct resolver *r, const char *name, int flags,
    struct resolve_answer *ans, resolve_cb cb, void *arg,
    struct resolve_req **req)
{
	struct rentry *e;
	struct resolve_req *q;

	if ((e = entry_find(r, name)) == NULL &&
	    (e = entry_new(r, name)) == NULL)
		return SL_ERR_NOMEM;
	TAILQ_REMOVE(&r->lru, e, lru);
	TAILQ_INSERT_TAIL(&r->lru, e, lru);
	if (e->pending == 0 && !(flags & RESOLVE_FRESH) &&
	    e->expires > now_sec()) {
		*ans = e->ans;
		return 0;
	}
	if (e->pending == 0 && entry_start(r, e) == 0) {
		e->expires = 0;
		return SL_ERR_IO;
	}
	if ((q = calloc(1, sizeof(*q))) == NULL)
		return SL_ERR_NOMEM;	/* the query still fills the cache */
	q->e = e;
	q->cb = cb;
	q->arg = arg;
	TAILQ_INSERT_TAIL(&e->waiters, q, link);
	q->list = &e->waiters;
	*req = q;
	return 1;
}

void
resolve_cancel(struct resolve_req *q)
{
	if (q == NULL)
		return;
	TAILQ_REMOVE(q->list, q, link);
	free(q);
}

int
resolve_answer_has(const struct resolve_answer *ans, const struct sl_addr *a)
{
	size_t i;

	for (i = 0; i < ans->n; i++)
		if (addr_equal(&ans->addrs[i], a))
			return 1;
	return 0;
}
