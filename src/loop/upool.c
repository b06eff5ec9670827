/* upool.c: parked upstream connections, keyed by sandbox, host, port and CA. */
#include "autoconf.h"

#include <sys/queue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "loop/state.h"
#include "loop/tstream.h"
#include "loop/upool.h"

struct upool_entry {
	TAILQ_ENTRY(upool_entry) link;	/* oldest first */
	struct upool	*pool;
	struct tstream	*ts;
	struct sb_counter *owner;	/* a reference */
	char		 host[256];
	uint8_t		 tls[UPOOL_TLS_LEN];
	uint16_t	 port;
};

TAILQ_HEAD(upool_list, upool_entry);

struct upool {
	struct event_base *base;
	struct upool_list idle;
	size_t		 n;
};

struct upool *
upool_new(struct event_base *base)
{
	struct upool *p;

	if ((p = calloc(1, sizeof(*p))) == NULL)
		return NULL;
	p->base = base;
	TAILQ_INIT(&p->idle);
	return p;
}

static void
free_cb(evutil_socket_t fd, short what, void *arg)
{
	tstream_free(arg);
}

/* Frees e; its stream on the next turn when one of its callbacks runs. */
static void
entry_drop(struct upool_entry *e, int in_cb)
{
	TAILQ_REMOVE(&e->pool->idle, e, link);
	e->pool->n--;
	if (e->ts != NULL) {
		tstream_quiet(e->ts);
		if (!in_cb || event_base_once(e->pool->base, -1, EV_TIMEOUT,
		    free_cb, e->ts, NULL) != 0)
			tstream_free(e->ts);
	}
	sb_counter_unref(e->owner);
	free(e);
}

/* A parked connection has nothing to say: anything from it ends it. */
static void
idle_read_cb(struct tstream *ts, void *arg)
{
	entry_drop(arg, 1);
}

static void
idle_event_cb(struct tstream *ts, short what, void *arg)
{
	entry_drop(arg, 1);	/* closed, failed or idle too long */
}

void
upool_put(struct upool *p, struct tstream *ts, struct sb_counter *owner,
    const char *host, uint16_t port, const uint8_t tls[UPOOL_TLS_LEN])
{
	struct upool_entry *e;

	if ((e = calloc(1, sizeof(*e))) == NULL) {
		tstream_quiet(ts);
		if (event_base_once(p->base, -1, EV_TIMEOUT, free_cb, ts,
		    NULL) != 0)
			tstream_free(ts);
		return;
	}
	if (p->n == UPOOL_MAX)
		entry_drop(TAILQ_FIRST(&p->idle), 0);
	e->pool = p;
	e->ts = ts;
	e->owner = sb_counter_ref(owner);
	e->port = port;
	snprintf(e->host, sizeof(e->host), "%s", host);
	memcpy(e->tls, tls, UPOOL_TLS_LEN);
	TAILQ_INSERT_TAIL(&p->idle, e, link);
	p->n++;
	tstream_setcb(ts, idle_read_cb, NULL, idle_event_cb, e);
	tstream_set_timeout(ts, UPOOL_IDLE_S * 1000);
	tstream_read(ts, 1);
}

struct tstream *
upool_get(struct upool *p, const struct sb_counter *owner, const char *host,
    uint16_t port, const uint8_t tls[UPOOL_TLS_LEN])
{
	struct upool_entry *e;
	struct tstream *ts;

	/* Newest first: the least likely to have been closed meanwhile. */
	TAILQ_FOREACH_REVERSE(e, &p->idle, upool_list, link) {
		if (e->owner != owner || e->port != port ||
		    strcmp(e->host, host) != 0 || memcmp(e->tls, tls, UPOOL_TLS_LEN) != 0)
			continue;
		ts = e->ts;
		e->ts = NULL;
		tstream_setcb(ts, NULL, NULL, NULL, NULL);
		entry_drop(e, 0);
		return ts;
	}
	return NULL;
}

size_t
upool_count(const struct upool *p)
{
	return p->n;
}

void
upool_free(struct upool *p)
{
	if (p == NULL)
		return;
	while (!TAILQ_EMPTY(&p->idle))
		entry_drop(TAILQ_FIRST(&p->idle), 0);
	free(p);
}
