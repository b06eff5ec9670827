/*
 * upgrade_inherit.c: the new process's side of an upgrade (upgrade.h):
 * the listening sockets it inherited, "ready", and the audit trail and
 * records its predecessor hands over.
 */
#include "autoconf.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "util/log.h"
#include "conf/config.h"
#include "audit/audit.h"
#include "audit/auditfmt.h"
#include "daemon/daemon.h"
#include "daemon/upgrade.h"

#define INHERIT_MAX	1024
/* A line of the channel: "R " and a record, at most. */
#define CHAN_LINE_MAX	(AUDIT_LINE_MAX + 64)

struct inherited {
	int			 fd;	/* -1: taken */
	int			 type;
	struct sockaddr_storage	 ss;
	socklen_t		 len;
};

struct upgrade_in {
	long		 from;		/* the predecessor's pid */
	int		 chan;
	struct inherited *fds;
	size_t		 nfds;
	struct bufferevent *bev;	/* the channel, once serving */
	struct event	*durable;	/* the audit moved (audit_notify) */
	int		 released;	/* the predecessor let go of the trail */
	uint64_t	 last;		/* ticket of its last record queued */
	uint64_t	 ack_theirs;	/* an "S": its ticket, to answer */
	uint64_t	 ack_ours;	/* once ours is durable; 0: none owed */
	unsigned long long records;	/* it sent, while it drained */
};

long
upgrade_from(const struct daemon *d)
{
	return d->up_in != NULL ? d->up_in->from : 0;
}

int
upgrade_taking_over(const struct daemon *d)
{
	return d->up_in != NULL && !d->up_in->released;
}

/* fd is a socket: what it is bound to. */
static int
describe(int fd, struct inherited *in)
{
	struct stat sb;
	socklen_t tl = sizeof(in->type);

	in->fd = fd;
	in->len = sizeof(in->ss);
	if (fstat(fd, &sb) != 0 || !S_ISSOCK(sb.st_mode) ||
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &in->type, &tl) != 0 ||
	    getsockname(fd, (struct sockaddr *)&in->ss, &in->len) != 0)
		return -1;
	fcntl(fd, F_SETFD, FD_CLOEXEC);	/* a later upgrade passes its own */
	return 0;
}

int
upgrade_inherit(struct daemon *d)
{
	const char *chan = getenv("SLUICE_UPGRADE"), *list = getenv("SLUICE_FDS");
	struct upgrade_in *u;
	char *end;
	long fd;

	if (chan == NULL)
		return 0;
	if ((u = calloc(1, sizeof(*u))) == NULL ||
	    (u->fds = calloc(INHERIT_MAX, sizeof(*u->fds))) == NULL) {
		free(u);
		return -1;
	}
	d->up_in = u;
	u->chan = -1;
	fd = strtol(chan, &end, 10);
	if (fd < 3 || fd > 65535 || *end != ':' ||
	    (u->from = strtol(end + 1, &end, 10)) <= 1 || *end != '\0' ||
	    fcntl((int)fd, F_SETFD, FD_CLOEXEC) != 0) {
		log_errx("upgrade", "SLUICE_UPGRADE is not FD:PID");
		return -1;
	}
	u->chan = (int)fd;
	while (list != NULL && *list != '\0') {
		fd = strtol(list, &end, 10);
		if (end == list || fd < 0 || fd > 65535 ||
		    (*end != ',' && *end != '\0') || u->nfds == INHERIT_MAX ||
		    describe((int)fd, &u->fds[u->nfds]) != 0) {
			log_errx("upgrade", "SLUICE_FDS names what is not a "
			    "socket: %.*s", (int)(end - list), list);
			return -1;
		}
		u->nfds++;
		list = *end == ',' ? end + 1 : end;
	}
	unsetenv("SLUICE_UPGRADE");
	unsetenv("SLUICE_FDS");
	log_info("upgrade", "taking over from pid %ld: %zu listening sockets",
	    u->from, u->nfds);
	return 0;
}

static int
same_inet(const struct inherited *in, const struct endpoint *ep)
{
	const struct sockaddr_in *a4 = (const void *)&in->ss,
	    *b4 = (const void *)&ep->ss;
	const struct sockaddr_in6 *a6 = (const void *)&in->ss,
	    *b6 = (const void *)&ep->ss;

	if (in->fd == -1 || in->ss.ss_family != ep->ss.ss_family)
		return 0;
	if (ep->ss.ss_family == AF_INET)
		return a4->sin_port == b4->sin_port &&
		    a4->sin_addr.s_addr == b4->sin_addr.s_addr;
	if (ep->ss.ss_family == AF_INET6)
		return a6->sin6_port == b6->sin6_port &&
		    memcmp(&a6->sin6_addr, &b6->sin6_addr, 16) == 0;
	return 0;
}

int
upgrade_take_inet(struct daemon *d, const struct endpoint *ep, int type)
{
	struct upgrade_in *u = d->up_in;
	size_t i;
	int fd;

	for (i = 0; u != NULL && i < u->nfds; i++)
		if (u->fds[i].type == type && same_inet(&u->fds[i], ep)) {
			fd = u->fds[i].fd;
			u->fds[i].fd = -1;
			return fd;
		}
	return -1;
}

size_t
upgrade_count(const struct daemon *d, const struct endpoint *ep, int type)
{
	const struct upgrade_in *u = d->up_in;
	size_t i, n = 0;

	for (i = 0; u != NULL && i < u->nfds; i++)
		n += u->fds[i].type == type && same_inet(&u->fds[i], ep);
	return n;
}

int
upgrade_take_unix(struct daemon *d, const char *path)
{
	struct upgrade_in *u = d->up_in;
	const struct sockaddr_un *sun;
	size_t i;
	int fd;

	for (i = 0; u != NULL && i < u->nfds; i++) {
		sun = (const void *)&u->fds[i].ss;
		if (u->fds[i].fd != -1 && sun->sun_family == AF_UNIX &&
		    u->fds[i].len > offsetof(struct sockaddr_un, sun_path) &&
		    strncmp(sun->sun_path, path, sizeof(sun->sun_path)) == 0) {
			fd = u->fds[i].fd;
			u->fds[i].fd = -1;
			return fd;
		}
	}
	return -1;
}

/* ---- the channel ---------------------------------------------------- */

static void
chan_end(struct daemon *d, const char *why)
{
	struct upgrade_in *u = d->up_in;

	if (!u->released) {
		/* It went without letting go: the trail is free, take it. */
		log_warnx("upgrade", "pid %ld %s before it handed the audit "
		    "trail over; taking it as it is", u->from, why);
		audit_takeover(d->audit);
		u->released = 1;
	} else
		log_info("upgrade", "pid %ld %s; it sent %llu audit record(s) "
		    "while it drained", u->from, why, u->records);
	bufferevent_free(u->bev);	/* closes the channel */
	u->bev = NULL;
}

/* An "S" is answered once what it covers is durable here. */
static void
answer(struct daemon *d)
{
	struct upgrade_in *u = d->up_in;
	char line[32];

	if (u->bev == NULL || u->ack_theirs == 0 ||
	    (u->ack_ours != 0 && audit_durable(d->audit) < u->ack_ours))
		return;
	snprintf(line, sizeof(line), "A %" PRIu64 "\n", u->ack_theirs);
	bufferevent_write(u->bev, line, strlen(line));
	u->ack_theirs = u->ack_ours = 0;
}

static void
durable_cb(evutil_socket_t fd, short what, void *arg)
{
	answer(arg);
}

/* One line from the predecessor; -1 ends the channel. */
static int
chan_line(struct daemon *d, const char *line, size_t len)
{
	struct upgrade_in *u = d->up_in;
	uint64_t t = 0;
	char *end;

	if (len == 8 && memcmp(line, "released", 8) == 0 && !u->released) {
		u->released = 1;
		audit_takeover(d->audit);
		return 0;
	}
	if (len > 2 && line[0] == 'R' && line[1] == ' ' && u->released) {
		/* A record it made while draining: chained here. */
		if (audit_submit_text(d->audit, line + 2, len - 2, &t) != 0) {
			log_errx("upgrade", "pid %ld sent a record that does "
			    "not parse", u->from);
			return -1;
		}
		if (t != 0)
			u->last = t;
		u->records++;
		return 0;
	}
	if (len > 2 && line[0] == 'S' && line[1] == ' ' && u->released) {
		u->ack_theirs = strtoull(line + 2, &end, 10);
		u->ack_ours = u->last;
		if (*end != '\0' || u->ack_theirs == 0)
			return -1;
		answer(d);
		return 0;
	}
	log_errx("upgrade", "pid %ld said what is not of the protocol",
	    u->from);
	return -1;
}

static void
chan_read_cb(struct bufferevent *bev, void *arg)
{
	struct daemon *d = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len;
	char *line;

	while ((line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF)) != NULL) {
		int r = chan_line(d, line, len);

		free(line);
		if (r != 0) {
			chan_end(d, "broke the protocol");
			return;
		}
	}
	if (evbuffer_get_length(in) > CHAN_LINE_MAX)
		chan_end(d, "sent a line too long");
}

static void
chan_event_cb(struct bufferevent *bev, short what, void *arg)
{
	chan_end(arg, "finished");
}

int
upgrade_announce(struct daemon *d)
{
	struct upgrade_in *u = d->up_in;
	char line[32];
	size_t i;

	if (u == NULL)
		return 0;
	for (i = 0; i < u->nfds; i++)
		if (u->fds[i].fd != -1) {
			log_info("upgrade", "an inherited socket the "
			    "configuration no longer names is closed");
			close(u->fds[i].fd);
			u->fds[i].fd = -1;
		}
	if ((u->durable = event_new(d->base, -1, EV_PERSIST, durable_cb,
	    d)) == NULL || audit_notify(d->audit, u->durable) != 0 ||
	    (u->bev = bufferevent_socket_new(d->base, u->chan,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL)
		return -1;
	u->chan = -1;	/* the bufferevent's */
	bufferevent_setcb(u->bev, chan_read_cb, NULL, chan_event_cb, d);
	bufferevent_setwatermark(u->bev, EV_READ, 0, CHAN_LINE_MAX + 1);
	bufferevent_enable(u->bev, EV_READ);
	snprintf(line, sizeof(line), "ready %ld\n", (long)d->mainpid);
	bufferevent_write(u->bev, line, strlen(line));
	log_info("upgrade", "serving; pid %ld hands over and drains",
	    u->from);
	return 0;
}

void
upgrade_inherit_free(struct daemon *d)
{
	struct upgrade_in *u = d->up_in;
	size_t i;

	if (u == NULL)
		return;
	if (u->bev != NULL)
		bufferevent_free(u->bev);
	if (u->chan != -1)
		close(u->chan);
	for (i = 0; i < u->nfds; i++)
		if (u->fds[i].fd != -1)
			close(u->fds[i].fd);
	if (u->durable != NULL)
		event_free(u->durable);
	free(u->fds);
	free(u);
	d->up_in = NULL;
}
