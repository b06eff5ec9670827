/*
 * resolve.h: the worker's asynchronous resolver with a TTL cache, used to
 * check that a name owns the address a sandbox dials and to resolve
 * CONNECT authorities and forward-rule proxies.
 *
 * Each lookup is its own pair of questions (A and AAAA) asked through
 * dnsup.h, the DNS filter's upstream client: a fresh socket and id per
 * attempt, each resolver in turn.  Nothing a failure leaves behind is
 * shared between names: no resolver is ever marked down, nothing is
 * probed, and no question is asked that no caller asked.  (libevent's
 * evdns, used before, marked a server down after timeouts or a REFUSED
 * answer and probed it with a name of its own choosing; one sandbox's
 * failing names then failed every lookup of the worker until restart.)
 */
#ifndef SLUICE_RESOLVE_H
#define SLUICE_RESOLVE_H

#include <stddef.h>

#include "util/addr.h"

struct event_base;
struct endpoint;
struct resolver;
struct resolve_req;

#define RESOLVE_MAX_ADDRS 16

/*
 * Names asked upstream at once, per resolver (two dnsup queries, so two
 * sockets, each).  Lookups past it wait in arrival order and start as
 * earlier ones finish; they are never refused for it.
 */
#define RESOLVE_INFLIGHT_MAX 256

struct resolve_answer {
	size_t		n;
	struct sl_addr	addrs[RESOLVE_MAX_ADDRS];	/* canonical */
};

/*
 * Called once per lookup that was not cancelled; err is 0 (ans may hold no
 * address: the name does not exist or has no A/AAAA) or SL_ERR_IO (no
 * usable answer: every attempt timed out, or the resolvers answered
 * SERVFAIL, REFUSED, FORMERR, NOTIMP or something malformed, for both
 * types).  ans is valid during the call only.
 */
typedef void (*resolve_cb)(int err, const struct resolve_answer *ans,
	    void *arg);

/*
 * One resolver per worker thread, on that worker's event base; never
 * shared.  servers are copied; timeout_ms bounds each attempt (each
 * server is tried twice, in turn).  Answers are cached per their TTL
 * (clamped to 5 s .. 1 h, answers without an address 5 s); failures are
 * not cached.  At most max_entries names are kept.
 */
struct resolver *resolver_new(struct event_base *base,
	    const struct endpoint *servers, size_t nservers,
	    unsigned timeout_ms, size_t max_entries);
/* Frees without calling any callback; cancel outstanding requests first. */
void	resolver_free(struct resolver *r);

#define RESOLVE_FRESH	0x1	/* ignore a cached answer */

/*
 * Resolves name (A and AAAA).  Returns 0 with *ans filled when the cache
 * answers now (cb is not called), 1 when a lookup is under way (*req set;
 * cb is called later exactly once unless resolve_cancel), or SL_ERR_NOMEM.
 * Concurrent lookups of one name share one pair of questions.
 */
int	resolve_name(struct resolver *r, const char *name, int flags,
	    struct resolve_answer *ans, resolve_cb cb, void *arg,
	    struct resolve_req **req);
/* Forgets a request; its callback is not called.  Accepts NULL. */
void	resolve_cancel(struct resolve_req *req);

int	resolve_answer_has(const struct resolve_answer *ans,
	    const struct sl_addr *a);

#endif
