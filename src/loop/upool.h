/* upool.h: idle upstream TLS connections of interception, reused per sandbox. */
#ifndef SLUICE_UPOOL_H
#define SLUICE_UPOOL_H

#include <stddef.h>
#include <stdint.h>

struct tstream;
struct event_base;
struct sb_counter;
struct upool;

#define UPOOL_MAX	512	/* idle connections a worker keeps */
#define UPOOL_IDLE_S	30	/* how long one may wait for a new request */
#define UPOOL_TLS_LEN	32	/* a TLS key's digest (BLAKE2b) */

/*
 * One per worker (not thread-safe).  A connection is parked after its
 * last answer, with nothing pending either way, and handed out again only
 * to a connection of the same sandbox (the very counter: a sandbox deleted
 * and registered again is another one) for the same host, port and TLS
 * key (the digest of what the connection was made with: its CA file and
 * client certificate, UPOOL_TLS_LEN bytes), so a verified
 * connection is never shared between sandboxes, nor one that presented a
 * client certificate used where none is to be.  A parked connection that speaks, closes or idles out is
 * dropped; past UPOOL_MAX the oldest goes.
 */
struct upool *upool_new(struct event_base *base);
void	upool_free(struct upool *p);		/* accepts NULL */

/*
 * Parks ts (the pool owns it from here on; it is freed on a later loop
 * turn when it goes, so a caller inside one of its callbacks is safe).
 */
void	upool_put(struct upool *p, struct tstream *ts,
	    struct sb_counter *owner, const char *host, uint16_t port,
	    const uint8_t tls[UPOOL_TLS_LEN]);
/* A parked connection for exactly that, taken out of the pool, or NULL. */
struct tstream *upool_get(struct upool *p, const struct sb_counter *owner,
	    const char *host, uint16_t port, const uint8_t tls[UPOOL_TLS_LEN]);
size_t	upool_count(const struct upool *p);

#endif
