/*
 * notify.c: the sd_notify(3) protocol: newline-separated assignments in
 * one datagram to the socket the service manager names.  The watchdog is
 * fed from the main loop, so it stops when the loop does.
 */
#include "autoconf.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "util/log.h"
#include "daemon/notify.h"

static void
watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
	notify_send(arg, "WATCHDOG=1");
}

/* The watchdog's period for the service's main process, in µs, or 0. */
static unsigned long long
watchdog_usec(long mainpid)
{
	const char *us = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	unsigned long long v;
	char *end;

	if (us == NULL)
		return 0;
	if (pid != NULL && strtol(pid, NULL, 10) != mainpid)
		return 0;	/* another process's */
	v = strtoull(us, &end, 10);
	return *end == '\0' && v > 0 ? v : 0;
}

void
notify_open(struct notify *n, struct event_base *base, long mainpid)
{
	const char *path = getenv("NOTIFY_SOCKET");
	unsigned long long us;
	struct timeval tv;
	size_t len;

	memset(n, 0, sizeof(*n));
	n->fd = -1;
	if (path == NULL || (path[0] != '/' && path[0] != '@'))
		goto out;
	if ((len = strlen(path)) >= sizeof(n->sa.sun_path)) {
		log_warnx("notify", "NOTIFY_SOCKET is too long: not notified");
		goto out;
	}
	n->sa.sun_family = AF_UNIX;
	memcpy(n->sa.sun_path, path, len);
	if (path[0] == '@')
		n->sa.sun_path[0] = '\0';	/* the abstract namespace */
	n->salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
	    (path[0] == '@' ? 0 : 1));
	if ((n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1) {
		log_warnx("notify", "cannot make a socket for %s: %s", path,
		    strerror(errno));
		goto out;
	}
	/*
	 * Connected now, while the worker may still write to the socket's
	 * file: once it is another user and confined, it could not.
	 */
	n->connected = connect(n->fd, (const struct sockaddr *)&n->sa,
	    n->salen) == 0;
	if ((us = watchdog_usec(mainpid)) != 0) {
		tv.tv_sec = (time_t)(us / 2 / 1000000);
		tv.tv_usec = (suseconds_t)(us / 2 % 1000000);
		if ((n->watchdog = event_new(base, -1, EV_PERSIST, watchdog_cb,
		    n)) == NULL || event_add(n->watchdog, &tv) != 0)
			log_warnx("notify", "cannot feed the watchdog");
	}
 out:
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}

void
notify_send(struct notify *n, const char *msg)
{
	if (n->fd == -1)
		return;
	if ((n->connected ? send(n->fd, msg, strlen(msg), MSG_NOSIGNAL) :
	    sendto(n->fd, msg, strlen(msg), MSG_NOSIGNAL,
	    (const struct sockaddr *)&n->sa, n->salen)) == -1)
		log_debug("notify", "cannot tell the service manager: %s",
		    strerror(errno));
}

void
notify_close(struct notify *n)
{
	if (n->watchdog != NULL)
		event_free(n->watchdog);
	if (n->fd != -1)
		close(n->fd);
	n->watchdog = NULL;
	n->fd = -1;
}
