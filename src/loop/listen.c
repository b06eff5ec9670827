/*
 * listen.c: a listener whose accept fails (out of descriptors, say) rests
 * for 100 ms instead of spinning on the error; the workers' listeners and
 * the DNS filter's TCP listeners share it.
 */
#include "autoconf.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "util/log.h"
#include "loop/loop.h"

static void
resume_cb(evutil_socket_t fd, short what, void *arg)
{
	evconnlistener_enable(arg);
}

struct event *
loop_resume_event(struct loop *l, struct evconnlistener *lev)
{
	return evtimer_new(l->base, resume_cb, lev);
}

void
loop_pause_listener(struct loop *l, struct evconnlistener *lev,
    struct event *resume)
{
	static const struct timeval pause = { 0, 100000 };
	int e = errno;
	time_t now = time(NULL);

	evconnlistener_disable(lev);
	if (resume != NULL)
		evtimer_add(resume, &pause);
	if (now != l->last_accept_warn) {	/* once a second at most */
		l->last_accept_warn = now;
		log_warnx("worker", "accept failed: %s; not accepting for 100 ms",
		    strerror(e));
	}
}
