/*
 * resolve.c: the worker's asynchronous resolver with a TTL cache.
 *
 * A name's lookup is two questions, A and AAAA, asked through dnsup (the
 * DNS filter's upstream client) and read with the DNS filter's own answer
 * parser.  What one name's failure can change stays with that name: a
 * SERVFAIL, a REFUSED, a timeout or a malformed answer fails that lookup
 * and is not cached, and the next lookup asks again.  There is no "server
 * down" state, no probe, and no question for a name nobody asked: evdns,
 * which this replaces, had all three, and one sandbox's failing names could
 * get every resolver marked down (an internal-only resolver answers the
 * "google.com" probe REFUSED, so it never came back) and every upstream
 * connect refused until restart.
 *
 * The only shared resources are bounded ones: at most RESOLVE_INFLIGHT_MAX
 * names are asked at once, later ones wait in a FIFO, and a pump (one
 * deferred event) starts them as slots free.  Starting from the pump, never
 * from resolve_name itself, means no callback runs inside resolve_name and
 * no lookup's completion starts another under its caller's feet.
 */
#include "autoconf.h"

#include <sys/queue.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <sodium.h>

#include "util/clock.h"
#include "util/err.h"
#include "util/log.h"
#include "util/names.h"
#include "parse/dnsmsg.h"
#include "conf/config.h"
#include "loop/dnsup.h"
#include "loop/resolve.h"

#define TTL_MIN		5
#define TTL_MAX		3600
#define TTL_NEGATIVE	5
#define NBUCKETS	1024
#define NQTYPES		2	/* A, AAAA */

static const uint16_t qtypes[NQTYPES] = { DNS_T_A, DNS_T_AAAA };

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

/* A name's lookup: idle (answer cached or none), waiting for a slot, asking. */
enum rstate { RS_IDLE, RS_QUEUED, RS_ASKING };

struct rentry {
	struct rentry	*next;		/* hash chain */
	TAILQ_ENTRY(rentry) lru;
	TAILQ_ENTRY(rentry) qlink;	/* on r->queue when RS_QUEUED */
	struct resolver	*r;
	char		 name[NAME_BUFSZ];	/* normalised, or as given */
	int		 askable;	/* name is a host name in normal form */
	enum rstate	 state;
	struct dnsup	*up[NQTYPES];	/* questions outstanding (RS_ASKING) */
	int		 pending;	/* how many of up[] */
	int		 errors;	/* questions without a usable answer */
	int		 failed;	/* the last lookup got no usable answer */
	int		 busy;		/* its callbacks are running */
	uint32_t	 ttl;		/* least TTL of build's addresses */
	time_t		 expires;	/* monotonic seconds */
	struct resolve_answer ans;	/* valid when RS_IDLE */
	struct resolve_answer build;	/* being filled by the questions */
	struct req_list	 waiters;
};
TAILQ_HEAD(rentry_list, rentry);

struct resolver {
	struct event_base *base;
	struct endpoint	*servers;	/* our copy */
	size_t		 nservers;
	unsigned	 timeout_ms;
	struct event	*pump;		/* starts queued lookups */
	struct rentry_list queue;	/* RS_QUEUED, oldest first */
	size_t		 inflight;	/* entries RS_ASKING */
	uint8_t		*scratch;	/* DNS_MSG_MAX: the filter's output */
	struct rentry	*buckets[NBUCKETS];
	struct rentry_list lru;		/* least recently used first */
	size_t		 n, max;
	unsigned char	 key[crypto_shorthash_KEYBYTES];
};

static void pump_cb(evutil_socket_t, short, void *);

struct resolver *
resolver_new(struct event_base *base, const struct endpoint *servers,
    size_t nservers, unsigned timeout_ms, size_t max_entries)
{
	struct resolver *r;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	TAILQ_INIT(&r->lru);
	TAILQ_INIT(&r->queue);
	r->base = base;
	r->max = max_entries;
	r->timeout_ms = timeout_ms;
	randombytes_buf(r->key, sizeof(r->key));
	if (nservers > 0 &&
	    (r->servers = calloc(nservers, sizeof(*r->servers))) == NULL)
		goto fail;
	if (nservers > 0)
		memcpy(r->servers, servers, nservers * sizeof(*r->servers));
	r->nservers = nservers;
	if ((r->scratch = malloc(DNS_MSG_MAX)) == NULL ||
	    (r->pump = event_new(base, -1, 0, pump_cb, r)) == NULL)
		goto fail;
	return r;
 fail:
	free(r->scratch);
	free(r->servers);
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
	size_t i;

	if (r == NULL)
		return;
	while ((e = TAILQ_FIRST(&r->lru)) != NULL) {
		/* Outstanding questions are dropped without callbacks. */
		for (i = 0; i < NQTYPES; i++)
			dnsup_cancel(e->up[i]);
		while ((q = TAILQ_FIRST(&e->waiters)) != NULL) {
			TAILQ_REMOVE(&e->waiters, q, link);
			free(q);
		}
		entry_unlink(r, e);
		free(e);
	}
	if (r->pump != NULL)
		event_free(r->pump);
	free(r->scratch);
	free(r->servers);
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
		if (e != keep && !e->busy && e->state == RS_IDLE &&
		    TAILQ_EMPTY(&e->waiters)) {
			entry_unlink(r, e);
			free(e);
		}
	}
}

static struct rentry *
entry_new(struct resolver *r, const char *key, int askable)
{
	struct rentry *e;
	size_t b;

	if ((e = calloc(1, sizeof(*e))) == NULL)
		return NULL;
	e->r = r;
	snprintf(e->name, sizeof(e->name), "%s", key);
	e->askable = askable;
	e->state = RS_IDLE;
	TAILQ_INIT(&e->waiters);
	b = bucket_of(r, e->name);
	e->next = r->buckets[b];
	r->buckets[b] = e;
	TAILQ_INSERT_TAIL(&r->lru, e, lru);
	r->n++;
	evict(r, e);
	return e;
}

/* The lookup is over: cache it (unless failed) and call its waiters. */
static void
entry_finish(struct rentry *e)
{
	struct req_list ready;
	struct resolve_req *q;
	uint32_t ttl;

	e->state = RS_IDLE;
	/* An address from one family is an answer; failures without one are not. */
	e->failed = e->build.n == 0 && e->errors > 0;
	e->ans = e->build;
	ttl = e->ans.n == 0 ? TTL_NEGATIVE : e->ttl;
	if (ttl < TTL_MIN)
		ttl = TTL_MIN;
	if (ttl > TTL_MAX)
		ttl = TTL_MAX;
	e->expires = e->failed ? 0 : mono_s() + ttl;
	if (e->failed && log_level() >= LOG_LVL_DEBUG) {
		char esc[4 * NAME_BUFSZ];

		log_debug("resolve", "%s: no usable answer", log_escape(e->name,
		    strlen(e->name), esc, sizeof(esc)));
	}

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

/*
 * An address of the answer (canonical already: an AAAA of ::ffff:a.b.c.d
 * is the IPv4 address, as a sandbox dialing it is seen), once.
 */
static void
add_addr(struct rentry *e, const struct dns_kept *k)
{
	size_t i;

	for (i = 0; i < e->build.n; i++)
		if (addr_equal(&e->build.addrs[i], &k->addr))
			return;
	if (e->build.n == RESOLVE_MAX_ADDRS)
		return;
	e->build.addrs[e->build.n++] = k->addr;
	if (k->ttl < e->ttl)
		e->ttl = k->ttl;
}

static int
accept_name(const char *name, void *arg)
{
	return 1;
}

static int
accept_addr(const struct sl_addr *a, void *arg)
{
	return 1;
}

/* The question for e's name and type, as dnsup and the filter want it. */
static void
query_for(const struct rentry *e, uint16_t qtype, struct dns_query *q)
{
	size_t n = strlen(e->name);

	memset(q, 0, sizeof(*q));
	memcpy(q->name, e->name, n + 1);
	memcpy(q->echo_name, e->name, n + 1);
	q->flags = DNS_F_RD;
	q->qtype = qtype;
	q->qclass = DNS_C_IN;
	q->udp_size = DNS_UDP_MIN;
	q->question_len = (n == 0 ? 1 : n + 2) + 4;
}

/*
 * Reads one answer into e->build.  NOERROR with addresses adds them;
 * NOERROR without (NODATA) and NXDOMAIN add nothing and are not errors;
 * everything else (another rcode, a message the filter refuses) is an
 * error for this name.  The filter runs without the UDP limit (udp 0:
 * 65535 bytes, what the scratch buffer holds) so no address is cut.  The
 * rcode is read from the filter's output, where every rcode but NOERROR
 * and NXDOMAIN, extended ones from an OPT record included, is SERVFAIL.
 */
static int
answer_read(struct rentry *e, size_t t, const uint8_t *resp, size_t len,
    uint16_t id)
{
	struct dns_filter_ops ops = { accept_name, accept_addr, NULL };
	struct dns_filter_result res;
	struct dns_query q;
	uint16_t flags;
	size_t outlen, i;

	query_for(e, qtypes[t], &q);
	if (dns_filter_answer(resp, len, &q, id, 0, &ops, e->r->scratch,
	    DNS_MSG_MAX, &outlen, &res) != 0 ||
	    dns_peek_header(e->r->scratch, outlen, NULL, &flags) != 0)
		return SL_ERR_INVALID;
	switch (flags & DNS_F_RCODE) {
	case DNS_RCODE_NOERROR:
		for (i = 0; i < res.nkept; i++)
			add_addr(e, &res.kept[i]);
		return 0;
	case DNS_RCODE_NXDOMAIN:
		return 0;
	default:
		return SL_ERR_IO;	/* SERVFAIL, and REFUSED, FORMERR, ... */
	}
}

/* One question is over: count it, and finish the lookup after both. */
static void
question_done(struct rentry *e, size_t t, int err, const uint8_t *resp,
    size_t len, uint16_t id)
{
	struct resolver *r = e->r;

	e->up[t] = NULL;		/* it freed itself */
	if (err != 0 || answer_read(e, t, resp, len, id) != 0)
		e->errors++;
	if (--e->pending > 0)
		return;
	r->inflight--;
	if (!TAILQ_EMPTY(&r->queue))
		event_active(r->pump, EV_TIMEOUT, 0);
	entry_finish(e);
}

static void
a_cb(int err, const uint8_t *resp, size_t len, uint16_t id, void *arg)
{
	question_done(arg, 0, err, resp, len, id);
}

static void
aaaa_cb(int err, const uint8_t *resp, size_t len, uint16_t id, void *arg)
{
	question_done(arg, 1, err, resp, len, id);
}

/*
 * Asks both questions; a question dnsup cannot start counts as an error.
 * Returns how many are under way (0: the lookup already failed).
 */
static int
entry_start(struct resolver *r, struct rentry *e)
{
	static const dnsup_cb cbs[NQTYPES] = { a_cb, aaaa_cb };
	struct dns_query q;
	size_t t;

	memset(&e->build, 0, sizeof(e->build));
	e->ttl = UINT32_MAX;
	e->errors = 0;
	e->pending = 0;
	for (t = 0; t < NQTYPES; t++) {
		e->up[t] = NULL;
		if (e->askable) {
			query_for(e, qtypes[t], &q);
			e->up[t] = dnsup_start(r->base, r->servers,
			    r->nservers, &q, r->timeout_ms, cbs[t], e);
		}
		if (e->up[t] != NULL)
			e->pending++;
		else
			e->errors++;
	}
	return e->pending;
}

/* Starts queued lookups, oldest first, while slots are free. */
static void
pump_cb(evutil_socket_t fd, short what, void *arg)
{
	struct resolver *r = arg;
	struct rentry *e;

	while (r->inflight < RESOLVE_INFLIGHT_MAX &&
	    (e = TAILQ_FIRST(&r->queue)) != NULL) {
		TAILQ_REMOVE(&r->queue, e, qlink);
		e->state = RS_ASKING;
		if (entry_start(r, e) > 0)
			r->inflight++;
		else
			entry_finish(e);	/* its callbacks may queue more */
	}
}

static void
entry_enqueue(struct resolver *r, struct rentry *e)
{
	e->state = RS_QUEUED;
	TAILQ_INSERT_TAIL(&r->queue, e, qlink);
	event_active(r->pump, EV_TIMEOUT, 0);
}

int
resolve_name(struct resolver *r, const char *name, int flags,
    struct resolve_answer *ans, resolve_cb cb, void *arg,
    struct resolve_req **req)
{
	char key[NAME_BUFSZ];
	struct rentry *e;
	struct resolve_req *q;
	int askable;

	/* A name that is not a host name is never asked; its lookups fail. */
	askable = name_normalize(name, strlen(name), key) == 0;
	if (!askable)
		snprintf(key, sizeof(key), "%s", name);
	if ((e = entry_find(r, key)) == NULL &&
	    (e = entry_new(r, key, askable)) == NULL)
		return SL_ERR_NOMEM;
	TAILQ_REMOVE(&r->lru, e, lru);
	TAILQ_INSERT_TAIL(&r->lru, e, lru);
	if (e->state == RS_IDLE && !(flags & RESOLVE_FRESH) &&
	    e->expires > mono_s()) {
		*ans = e->ans;
		return 0;
	}
	if ((q = calloc(1, sizeof(*q))) == NULL)
		return SL_ERR_NOMEM;
	if (e->state == RS_IDLE)
		entry_enqueue(r, e);
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
	struct rentry *e;

	if (q == NULL)
		return;
	e = q->e;
	TAILQ_REMOVE(q->list, q, link);
	/* A lookup nobody waits for any more is not asked at all. */
	if (q->list == &e->waiters && e->state == RS_QUEUED &&
	    TAILQ_EMPTY(&e->waiters)) {
		TAILQ_REMOVE(&e->r->queue, e, qlink);
		e->state = RS_IDLE;
	}
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
