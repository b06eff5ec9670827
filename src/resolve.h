/* resolve.h: the worker's asynchronous resolver with a TTL cache. */
#ifndef SLUICE_RESOLVE_H
#define SLUICE_RESOLVE_H

#include <stddef.h>

#include "addr.h"

struct event_base;
struct endpoint;
struct resolver;
struct resolve_req;

#define RESOLVE_MAX_ADDRS 16

struct resolve_answer {
	size_t		n;
	struct sl_addr	addrs[RESOLVE_MAX_ADDRS];	/* canonical */
};

/*
 * Called once per lookup that was not cancelled; err is 0 (ans may hold no
 * address: the name does not exist or has no A/AAAA) or SL_ERR_IO (no
 * answer from any resolver).  ans is valid during the call only.
 */
typedef void (*resolve_cb)(int err, const struct resolve_answer *ans,
	    void *arg);

/*
 * One resolver per worker thread, on that worker's event base; never
 * shared.  Answers are cached per their TTL (clamped to 5 s .. 1 h,
 * negative answers 5 s); at most max_entries names are kept.
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
 */
int	resolve_name(struct resolver *r, const char *name, int flags,
	    struct resolve_answer *ans, resolve_cb cb, void *arg,
	    struct resolve_req **req);
/* Forgets a request; its callback is not called.  Accepts NULL. */
void	resolve_cancel(struct resolve_req *req);

int	resolve_answer_has(const struct resolve_answer *ans,
	    const struct sl_addr *a);

#endif
