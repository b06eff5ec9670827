/* observe.c: observe mode ends on time (observe.h). */
#include "autoconf.h"

#include <time.h>

#include <event2/event.h>

#include "util/err.h"
#include "util/log.h"
#include "loop/state.h"
#include "daemon/ctl_int.h"
#include "daemon/daemon.h"
#include "daemon/observe.h"
#include "daemon/publish.h"
#include "daemon/sbstore.h"

static void
retry_soon(struct daemon *d)
{
	struct timeval tv = { 1, 0 };

	log_errx("observe", "cannot end observe mode now; trying again in 1 s");
	evtimer_add(d->observe_ev, &tv);
}

/* What expired: its record and its file (now without observe_until). */
static void
expired(struct daemon *d, const struct state *before, time_t now)
{
	const struct sandbox *sb, *was;
	char why[256];
	size_t i;

	for (i = 0; i < d->state->nsandboxes; i++) {
		sb = &d->state->sandboxes[i];
		was = state_sandbox(before, sb->id);
		if (sb->observe_until != 0 || was == NULL ||
		    was->observe_until == 0 || was->observe_until > now)
			continue;
		log_info("observe", "sandbox %s: observe mode ended", sb->id);
		ctl_audit_mode(d, sb, 1, "expired", -1);
		if (sbstore_put(d, sb, NULL, why, sizeof(why)) != 0)
			log_errx("observe", "sandbox %s: %s; after a restart "
			    "it does not observe anyway (its time is up)",
			    sb->id, why);
	}
}

static void
expire_cb(evutil_socket_t fd, short what, void *arg)
{
	struct errlist errs = ERRLIST_INIT;
	struct daemon *d = arg;
	struct state *st = NULL, *before;
	time_t now = time(NULL);
	size_t i, n = 0;

	if (state_clone(d->state, d->generation + 1, &st) != 0) {
		retry_soon(d);
		return;
	}
	for (i = 0; i < st->nsandboxes; i++)
		if (st->sandboxes[i].observe_until != 0 &&
		    st->sandboxes[i].observe_until <= now) {
			st->sandboxes[i].observe_until = 0;
			n++;
		}
	if (n == 0) {
		state_unref(st);
		observe_arm(d);
		return;
	}
	if (state_seal(st, d->state, &errs) != 0) {
		errlist_free(&errs);
		state_unref(st);
		retry_soon(d);
		return;
	}
	before = state_ref(d->state);
	publish_state(d, st);	/* arms the next expiry */
	expired(d, before, now);
	state_unref(before);
}

void
observe_arm(struct daemon *d)
{
	struct timeval tv;
	time_t next = 0, now = time(NULL);
	size_t i;

	if (d->observe_ev == NULL &&
	    (d->observe_ev = evtimer_new(d->base, expire_cb, d)) == NULL)
		return;
	for (i = 0; i < d->state->nsandboxes; i++) {
		time_t u = d->state->sandboxes[i].observe_until;

		if (u != 0 && (next == 0 || u < next))
			next = u;
	}
	if (next == 0) {
		evtimer_del(d->observe_ev);
		return;
	}
	tv.tv_sec = next > now ? next - now : 0;
	tv.tv_usec = 0;
	evtimer_add(d->observe_ev, &tv);
}

void
observe_close(struct daemon *d)
{
	if (d->observe_ev != NULL)
		event_free(d->observe_ev);
	d->observe_ev = NULL;
}
