/*
 * dnsup.c: one question asked of the upstream resolvers.  UDP first, from
 * a fresh socket each attempt so the source port is random as well as the
 * id; over TCP when the answer was truncated; each resolver in turn.
 */
#include "autoconf.h"

#include <sys/socket.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <sodium.h>

#include "util/err.h"
#include "util/log.h"
#include "parse/dnsmsg.h"
#include "conf/config.h"
#include "loop/dnsup.h"

#define ATTEMPTS_PER_SERVER	2

struct dnsup {
	struct event_base	*base;
	const struct endpoint	*servers;
	size_t			 nservers;
	unsigned		 timeout_ms;
	dnsup_cb		 cb;
	void			*arg;
	struct dns_query	 q;
	unsigned		 attempt;	/* across servers */
	int			 tcp;		/* this attempt is over TCP */
	uint16_t		 id;
	int			 fd;
	struct event		*ev;
	uint8_t			 query[DNS_HDR_LEN + NAME_BUFSZ + 32];
	size_t			 qlen;
	/* TCP: the 2-byte length then the message, both ways */
	uint8_t			*buf;
	size_t			 have, want, sent;
};

static void attempt_start(struct dnsup *u);

static void
attempt_reset(struct dnsup *u)
{
	if (u->ev != NULL)
		event_free(u->ev);
	u->ev = NULL;
	if (u->fd != -1)
		close(u->fd);
	u->fd = -1;
	free(u->buf);
	u->buf = NULL;
	u->have = u->want = u->sent = 0;
}

void
dnsup_cancel(struct dnsup *u)
{
	if (u == NULL)
		return;
	attempt_reset(u);
	free(u);
}

static void
finish(struct dnsup *u, int err, const uint8_t *resp, size_t len)
{
	dnsup_cb cb = u->cb;
	void *arg = u->arg;
	uint16_t id = u->id;
	uint8_t *buf = u->buf;	/* a TCP answer: resp points into it */

	u->buf = NULL;
	attempt_reset(u);
	free(u);
	cb(err, resp, len, id, arg);
	free(buf);
}

/* The next attempt, or failure when every resolver had its tries. */
static void
next_attempt(struct dnsup *u, int tcp)
{
	attempt_reset(u);
	if (!tcp)
		u->attempt++;
	u->tcp = tcp;
	if (u->attempt >= u->nservers * ATTEMPTS_PER_SERVER) {
		finish(u, SL_ERR_IO, NULL, 0);
		return;
	}
	attempt_start(u);
}

/* Our id, QR set, and the question we asked (names case-insensitively). */
static int
is_ours(const struct dnsup *u, const uint8_t *r, size_t len)
{
	/* The question ends where our query's OPT record (if any) begins. */
	size_t qend = DNS_HDR_LEN + u->q.question_len;
	size_t i;

	if (len < qend || r[0] != (u->id >> 8) || r[1] != (u->id & 0xff) ||
	    !(r[2] & 0x80) || r[4] != 0 || r[5] != 1)
		return 0;
	for (i = DNS_HDR_LEN; i < qend; i++) {
		uint8_t a = r[i], b = u->query[i];

		if (a >= 'A' && a <= 'Z')
			a += 32;
		if (b >= 'A' && b <= 'Z')
			b += 32;
		if (a != b)
			return 0;
	}
	return 1;
}

static void
udp_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dnsup *u = arg;
	uint8_t r[4096];
	ssize_t n;

	if (what & EV_TIMEOUT) {
		next_attempt(u, 0);
		return;
	}
	while ((n = recv(fd, r, sizeof(r), 0)) > 0) {
		if (!is_ours(u, r, (size_t)n))
			continue;	/* stray or spoofed: keep waiting */
		if (r[2] & 0x02) {
			next_attempt(u, 1);	/* truncated: ask over TCP */
			return;
		}
		finish(u, 0, r, (size_t)n);
		return;
	}
	if (n == -1 && errno != EAGAIN && errno != EINTR)
		next_attempt(u, 0);	/* e.g. ICMP port unreachable */
}

static void tcp_cb(evutil_socket_t, short, void *);

/* The query is out: wait for the answer only (not for writability). */
static int
tcp_wait_read(struct dnsup *u)
{
	struct timeval tv = { u->timeout_ms / 1000, (u->timeout_ms % 1000) * 1000 };

	event_free(u->ev);
	u->ev = event_new(u->base, u->fd, EV_READ | EV_PERSIST, tcp_cb, u);
	return u->ev != NULL && event_add(u->ev, &tv) == 0 ? 0 : SL_ERR_NOMEM;
}

static void
tcp_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dnsup *u = arg;
	ssize_t n;

	if (what & EV_TIMEOUT) {
		next_attempt(u, 0);
		return;
	}
	if (u->sent < u->qlen + 2) {
		uint8_t out[sizeof(u->query) + 2];

		out[0] = (uint8_t)(u->qlen >> 8);
		out[1] = (uint8_t)u->qlen;
		memcpy(out + 2, u->query, u->qlen);
		n = send(fd, out + u->sent, u->qlen + 2 - u->sent, MSG_NOSIGNAL);
		if (n == -1 && errno != EAGAIN && errno != EINTR) {
			next_attempt(u, 0);
			return;
		}
		if (n > 0)
			u->sent += (size_t)n;
		if (u->sent == u->qlen + 2 && tcp_wait_read(u) != 0)
			next_attempt(u, 0);
		return;
	}
	n = recv(fd, u->buf + u->have, u->want - u->have, 0);
	if (n == 0 || (n == -1 && errno != EAGAIN && errno != EINTR)) {
		next_attempt(u, 0);
		return;
	}
	if (n < 0)
		return;
	u->have += (size_t)n;
	if (u->want == 2 && u->have == 2) {
		size_t len = (size_t)u->buf[0] << 8 | u->buf[1];

		if (len < DNS_HDR_LEN) {
			next_attempt(u, 0);
			return;
		}
		u->want = 2 + len;	/* buf holds DNS_MSG_MAX + 2 */
	}
	if (u->have == u->want && u->want > 2) {
		if (!is_ours(u, u->buf + 2, u->have - 2)) {
			next_attempt(u, 0);
			return;
		}
		finish(u, 0, u->buf + 2, u->have - 2);
	}
}

static void
attempt_start(struct dnsup *u)
{
	const struct endpoint *ep = &u->servers[u->attempt % u->nservers];
	struct timeval tv = { u->timeout_ms / 1000, (u->timeout_ms % 1000) * 1000 };
	short what = EV_READ | EV_PERSIST;

	randombytes_buf(&u->id, sizeof(u->id));
	if (dns_build_query(&u->q, u->id, 1232, u->query, sizeof(u->query),
	    &u->qlen) != 0)
		goto fail;
	u->fd = socket(ep->ss.ss_family, (u->tcp ? SOCK_STREAM : SOCK_DGRAM) |
	    SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (u->fd == -1)
		goto fail;
	if (connect(u->fd, (const struct sockaddr *)&ep->ss, ep->len) == -1 &&
	    errno != EINPROGRESS)
		goto retry;
	if (u->tcp) {
		if ((u->buf = malloc(DNS_MSG_MAX + 2)) == NULL)
			goto fail;
		u->want = 2;
		what |= EV_WRITE;
		u->ev = event_new(u->base, u->fd, what, tcp_cb, u);
	} else {
		if (send(u->fd, u->query, u->qlen, 0) == -1)
			goto retry;
		u->ev = event_new(u->base, u->fd, what, udp_cb, u);
	}
	if (u->ev == NULL || event_add(u->ev, &tv) != 0)
		goto fail;
	return;
 retry:
	next_attempt(u, 0);
	return;
 fail:
	finish(u, SL_ERR_IO, NULL, 0);
}

static void
start_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dnsup *u = arg;

	event_free(u->ev);
	u->ev = NULL;
	attempt_start(u);
}

struct dnsup *
dnsup_start(struct event_base *base, const struct endpoint *servers,
    size_t nservers, const struct dns_query *q, unsigned timeout_ms,
    dnsup_cb cb, void *arg)
{
	struct dnsup *u;

	if (nservers == 0 || (u = calloc(1, sizeof(*u))) == NULL)
		return NULL;
	u->base = base;
	u->servers = servers;
	u->nservers = nservers;
	u->timeout_ms = timeout_ms;
	u->cb = cb;
	u->arg = arg;
	u->q = *q;
	u->fd = -1;
	/* Deferred: the caller gets its handle before any callback. */
	u->ev = evtimer_new(base, start_cb, u);
	if (u->ev == NULL) {
		free(u);
		return NULL;
	}
	event_active(u->ev, EV_WRITE, 0);
	return u;
}
