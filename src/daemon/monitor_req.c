/*
 * monitor_req.c: the worker's requests to the monitor (monitor.h), from
 * its main thread only, each answered before the next is sent.
 */
#include "autoconf.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/chan.h"
#include "util/fsvc.h"
#include "util/log.h"
#include "util/wire.h"
#include "daemon/daemon.h"
#include "daemon/monitor.h"

#define MON_REPLY_MS	15000	/* a successor that will not end is killed in 10 s */

int
monitor_tell(struct daemon *d, enum mon_msg type, const void *p, size_t len)
{
	if (d->mon == -1 || chan_send(d->mon, type, 0, p, len, -1) != 0)
		return -1;
	return 0;
}

/* Sends a request and waits for its answer into r (over buf). */
static int
ask(struct daemon *d, enum mon_msg type, const struct wire_w *w, int fd,
    uint8_t *buf, size_t cap, struct wire_r *r)
{
	ssize_t n;

	/* fsvc's: one request at a time, whichever thread asks. */
	if ((n = fsvc_ask(d->mon, type, w->p, w->len, fd, buf, cap,
	    MON_REPLY_MS)) < 0) {
		log_errx("monitor", "no answer from the monitor");
		return -1;
	}
	wire_r_init(r, buf, (size_t)n);
	return 0;
}

int
monitor_spawn(struct daemon *d, int chan, pid_t *pid, char *why,
    size_t why_len)
{
	uint8_t buf[MON_WHY_MAX + 16];
	struct wire_w w;
	struct wire_r r;
	const uint8_t *s;
	size_t n;

	wire_w_init(&w, NULL, 0);
	if (ask(d, MON_SPAWN, &w, chan, buf, sizeof(buf), &r) != 0) {
		snprintf(why, why_len, "the monitor did not answer");
		return -1;
	}
	*pid = (pid_t)wire_get_u32(&r);
	s = wire_get_bytes(&r, MON_WHY_MAX, &n);
	if (r.bad || wire_done(&r) != 0) {
		snprintf(why, why_len, "the monitor answered nonsense");
		return -1;
	}
	if (*pid <= 0) {
		snprintf(why, why_len, "%.*s", (int)n, (const char *)s);
		return -1;
	}
	return 0;
}

int
monitor_child_end(struct daemon *d, pid_t pid, unsigned grace_ms,
    int *status)
{
	uint8_t buf[16], req[8];
	struct wire_w w;
	struct wire_r r;
	uint32_t had;

	wire_w_init(&w, req, sizeof(req));
	wire_u32(&w, (uint32_t)pid);
	wire_u32(&w, grace_ms);
	if (ask(d, MON_CHILD_END, &w, -1, buf, sizeof(buf), &r) != 0)
		return -1;
	had = wire_get_u32(&r);
	*status = (int)wire_get_u32(&r);
	return wire_done(&r) == 0 && had ? 0 : -1;
}
