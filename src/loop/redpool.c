/*
 * redpool.c: the loop's redactors, kept built between answers (see
 * redpool.h).  One thread's: the loop's.
 */
#include "autoconf.h"

#include <string.h>

#include <event2/event.h>

#include "util/clock.h"
#include "util/redact.h"
#include "loop/redpool.h"

/* Takes the i-th kept redactor out of p. */
static struct redactor *
take(struct redpool *p, size_t i)
{
	struct redactor *r = p->r[i];

	memmove(&p->r[i], &p->r[i + 1], (p->n - i - 1) * sizeof(p->r[0]));
	memmove(&p->back[i], &p->back[i + 1],
	    (p->n - i - 1) * sizeof(p->back[0]));
	p->n--;
	return r;
}

struct redactor *
redpool_get(struct redpool *p, const uint64_t *keys, size_t nkeys)
{
	size_t i;

	for (i = p->n; i-- > 0; )
		if (redactor_keyed(p->r[i], keys, nkeys))
			return take(p, i);
	if (p->n > 0)
		return take(p, 0);
	return redactor_new();
}

/* Frees what was given back REDPOOL_IDLE_S ago or before. */
static void
sweep_cb(evutil_socket_t fd, short what, void *arg)
{
	struct redpool *p = arg;
	time_t now = mono_s();
	struct timeval tv = { 1, 0 };

	(void)fd;
	(void)what;
	while (p->n > 0 && now - p->back[0] >= REDPOOL_IDLE_S)
		redactor_free(take(p, 0));
	if (p->n > 0) {
		tv.tv_sec = REDPOOL_IDLE_S - (now - p->back[0]);
		evtimer_add(p->sweep, &tv);
	}
}

void
redpool_put(struct redpool *p, struct event_base *base, struct redactor *r)
{
	struct timeval tv = { REDPOOL_IDLE_S, 0 };

	if (r == NULL)
		return;
	if (p->sweep == NULL &&
	    (p->sweep = evtimer_new(base, sweep_cb, p)) == NULL) {
		redactor_free(r);	/* nothing would wipe it */
		return;
	}
	if (p->n == REDPOOL_KEEP)
		redactor_free(take(p, 0));
	p->r[p->n] = r;
	p->back[p->n] = mono_s();
	p->n++;
	if (!evtimer_pending(p->sweep, NULL))
		evtimer_add(p->sweep, &tv);
}

void
redpool_clear(struct redpool *p)
{
	while (p->n > 0)
		redactor_free(take(p, p->n - 1));
	if (p->sweep != NULL)
		event_free(p->sweep);
	p->sweep = NULL;
}
