/*
 * h2up.h: HTTP/2 upstream sessions of interception, one connection
 * carrying the requests of many streams (nghttp2, client side).
 *
 * An icpt serving an HTTP/2 stream speaks HTTP/1.1 to its upstream; when
 * the upstream chose h2, that HTTP/1.1 goes into a pipe (tstream.h)
 * instead of onto a socket, and the session here turns each pipe's one
 * request into a stream of its own (HEADERS, DATA) and the answer back
 * into HTTP/1.1, chunked.  Sessions are kept per worker, for the sandbox,
 * host, port and TLS key that made them (as upool.h keeps idle HTTP/1.1
 * connections), so the streams of one sandbox share a connection and
 * those of two sandboxes never do.
 */
#ifndef SLUICE_H2UP_H
#define SLUICE_H2UP_H

#include <stddef.h>
#include <stdint.h>

#include "loop/upool.h"

struct event_base;
struct sb_counter;
struct tstream;
struct h2up_pool;

#define H2UP_MAX_SESSIONS	64	/* a worker's; past it the oldest idle one goes */

struct h2up_pool *h2up_pool_new(struct event_base *base);
/* Ends every session (their pipes' owners get TSTREAM_ERROR); accepts NULL. */
void	h2up_pool_free(struct h2up_pool *p);

/*
 * A pipe for one request on a session for exactly owner, host, port and
 * tls with room for another stream, or NULL.  The pipe lends the session's
 * SSL (tstream_ssl: the pins can be checked).  Its owner writes one
 * HTTP/1.1 request into it and reads the answer, HTTP/1.1 with a chunked
 * body; a reset or the session's end is TSTREAM_ERROR.
 */
struct tstream *h2up_attach(struct h2up_pool *p, const struct sb_counter *owner,
	    const char *host, uint16_t port, const uint8_t tls[UPOOL_TLS_LEN]);
/*
 * ts, connected and checked, chose h2: it becomes a session of p (which
 * owns it from here on, on failure too), and the first pipe on it is
 * returned, or NULL.  idle_ms: how long a session without a stream stays;
 * header_limit: the largest head either way.
 */
struct tstream *h2up_adopt(struct h2up_pool *p, struct tstream *ts,
	    const struct sb_counter *owner, const char *host, uint16_t port,
	    const uint8_t tls[UPOOL_TLS_LEN], unsigned idle_ms,
	    size_t header_limit);
/* Sessions alive, and streams on them. */
size_t	h2up_count(const struct h2up_pool *p, size_t *streams);

#endif
