/* upool.c: parked upstream connections, keyed by sandbox, host, port and CA. */
#include "autoconf.h"

#include <sys/queue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "loop/state.h"
#include "loop/upool.h"

struct upool_entry {
	TAILQ_ENTRY(upool_entry) link;	/* oldest first */
	struct upool	*pool;
	struct bufferevent *bev;
	struct sb_counter *owner;	/* a reference */
	char		 host[256];
	char		 tls[UPOOL_TLS_MAX];
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
entry_drop(struct upool_entry *e)
{
	TAILQ_REMOVE(&e->pool->idle, e, link);
	e->pool->n--;
	if (e->bev != NULL)
		bufferevent_free(e->bev);
	sb_counter_unref(e->owner);
	free(e);
}

/* A parked connection has nothing to say: anything from it ends it. */
static void
idle_read_cb(struct bufferevent *bev, void *arg)
{
	entry_drop(arg);
}

static void
idle_event_cb(struct bufferevent *bev, short what, void *arg)
{
	entry_drop(arg);	/* closed, failed or idle too long */
}

void
upool_put(struct upool *p, struct bufferevent *bev, struct sb_counter *owner,
    const char *host, uint16_t port, const char *tls)
{
	struct timeval idle = { UPOOL_IDLE_S, 0 };
	struct upool_entry *e;

	if ((e = calloc(1, sizeof(*e))) == NULL) {
		bufferevent_free(bev);
		return;
	}
	if (p->n == UPOOL_MAX)
		entry_drop(TAILQ_FIRST(&p->idle));
	e->pool = p;
	e->bev = bev;
	e->owner = sb_counter_ref(owner);
	e->port = port;
	snprintf(e->host, sizeof(e->host), "%s", host);
	snprintf(e->tls, sizeof(e->tls), "%s", tls ? tls : "");
	TAILQ_INSERT_TAIL(&p->idle, e, link);
	p->n++;
	bufferevent_setcb(bev, idle_read_cb, NULL, idle_event_cb, e);
	bufferevent_set_timeouts(bev, &idle, NULL);
	bufferevent_enable(bev, EV_READ);
}

struct bufferevent *
upool_get(struct upool *p, const struct sb_counter *owner, const char *host,
    uint16_t port, const char *tls)
{
	struct upool_entry *e;
	struct bufferevent *bev;

	if (tls == NULL)
		tls = "";
	/* Newest first: the least likely to have been closed meanwhile. */
	TAILQ_FOREACH_REVERSE(e, &p->idle, upool_list, link) {
		if (e->owner != owner || e->port != port ||
		    strcmp(e->host, host) != 0 || strcmp(e->tls, tls) != 0)
			continue;
		bev = e->bev;
		e->bev = NULL;
		bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
		entry_drop(e);
		return bev;
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
		entry_drop(TAILQ_FIRST(&p->idle));
	free(p);
}
