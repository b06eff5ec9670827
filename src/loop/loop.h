/*
 * loop.h: what a connection may use of its thread.  A worker thread runs
 * one event loop; everything a connection (or the DNS filter) reaches of
 * it, and of the process behind it, is here, so a connection never needs
 * the worker or the daemon.  Types only: this header includes no conn,
 * dns, worker or daemon header, and a unit test can build a connection on
 * a struct loop of its own.
 *
 * Thread: a loop's fields are its thread's, but for the pointers into the
 * process (cfg, audit, dnsmem, TLS contexts, secrets), which are written
 * once at start and only read after, and metrics, which scrapes read.
 */
#ifndef SLUICE_LOOP_H
#define SLUICE_LOOP_H

#include <sys/queue.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "util/freelist.h"
#include "loop/redpool.h"
#include "util/metrics.h"

struct audit;
struct config;
struct conn;
struct dns_worker;
struct mintcache;
struct minter;
struct dnsmem;
struct event_base;
struct evconnlistener;
struct event;
struct resolver;
struct secret_store;
struct ssl_ctx_st;
struct state;
struct tlsup;
struct spend;
struct upool;
struct h2up_pool;

TAILQ_HEAD(conn_list, conn);

#define LOOP_PIPES	64	/* empty splice pipes a loop keeps */

struct loop {
	struct event_base	*base;
	unsigned		 idx;		/* the worker's number */
	time_t			 started;	/* the process's start */
	const struct config	*cfg;
	struct audit		*audit;
	struct dnsmem		*dnsmem;	/* what the DNS filter answered */
	struct ssl_ctx_st	*tls_down;	/* interception, towards sandboxes */
	struct tlsup		*tls_up;	/* interception, towards upstreams */
	const struct secret_store *secrets;	/* NULL: secrets are off */
	struct resolver		*res;
	struct upool		*upool;		/* idle intercepted upstreams */
	struct h2up_pool	*h2up;		/* HTTP/2 upstream sessions (or NULL) */
	struct spend		*spend;		/* budgets, shared by all */
	struct mintcache	*mints;		/* minted tokens, shared by all */
	struct minter		*minters;	/* this loop's mints (conn/minter.c) */
	struct state		*st;		/* the snapshot in force here (ref) */
	struct dns_worker	*dns;		/* the DNS filter's state (dns.c) */
	struct conn_list	 conns;
	size_t			 nconns;
	int			 draining;	/* exit once nconns and ndns are 0 */
	size_t			 ndns;	/* DNS questions and TCP clients (dns.c) */
	time_t			 last_accept_warn;
	char			*scratch;	/* guarded, INJECT_BUF bytes; on first use */
	uint64_t		 rid_next;	/* injected requests' ids */
	/* Kept for interception's requests under way (icpt.c). */
	struct freelist		 qblocks;	/* request queues */
	struct freelist		 reqs, resps;	/* HTTP parsers */
	struct redpool		 reds;		/* redactors, built */
	/* Empty splice pipes of closed relays, for the next ones. */
	int			 pipes[LOOP_PIPES][2];
	size_t			 npipes;
	struct wmetrics		 metrics;	/* written here, read by scrapes */
};

/* loop.c */

/* A connection of l went: a draining loop ends when none is left. */
void	loop_conn_gone(struct loop *l);
/*
 * l's guarded scratch for rendering injected headers (INJECT_BUF bytes,
 * locked; wiped by its user after each use), made on first use.  NULL
 * when guarded memory is short.
 */
char	*loop_scratch(struct loop *l);
/*
 * Frees b after wiping every byte it holds: for buffers that held a
 * rendered credential.
 */
struct evbuffer;
void	loop_evbuffer_wipe_free(struct evbuffer *b);
/* Drains n bytes of b (at most all), each wiped before it goes. */
void	loop_evbuffer_wipe_drain(struct evbuffer *b, size_t n);
/*
 * Moves n bytes (at most all) from src to the end of dst, wiping them in
 * src: evbuffer_remove_buffer would leave the bytes it copies out of a
 * chain it splits in that chain, unwiped.  0, or -1 when out of memory.
 */
int	loop_evbuffer_move_wiped(struct evbuffer *src, struct evbuffer *dst,
	    size_t n);
/* Frees what l keeps for reuse (its freelists). */
void	loop_caches_clear(struct loop *l);
/*
 * A splice pipe (O_NONBLOCK, O_CLOEXEC) into p: one l kept, or a new one.
 * 0, or -1 with errno.  A relay makes two per connection: kept, they
 * cost no pipe2 and no closes.
 */
int	loop_pipe_get(struct loop *l, int p[2]);
/* Takes p back (p becomes -1, -1): kept if empty, else closed. */
void	loop_pipe_put(struct loop *l, int p[2]);
/* The destructors of what the freelists keep, for freelist_put. */
void	loop_reqs_destroy(void *p);
void	loop_resps_destroy(void *p);

/* listen.c: accepting that fails (out of descriptors, say). */

/*
 * Stops accepting on lev for a moment instead of spinning on the error;
 * resume (from loop_resume_event) turns it back on.  Warns once a second
 * at most.
 */
void	loop_pause_listener(struct loop *l, struct evconnlistener *lev,
	    struct event *resume);
struct event *loop_resume_event(struct loop *l, struct evconnlistener *lev);

#endif
