/* relay.c: moving bytes between the two halves of a connection. */
#include "autoconf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "util/err.h"
#include "util/log.h"
#include "parse/sniff.h"
#include "loop/loop.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/relay.h"

#define SPLICE_CHUNK	(64 * 1024)
#define READS_PER_WAKE	4	/* fairness between connections */
#define RELAY_KEEP_BUF	0	/* bytes of drained queue kept (none: RSS) */

int
relay_start(struct conn *c)
{
	struct half *hs[2] = { &c->down, &c->up };
	int i;

	for (i = 0; i < 2; i++)
		if (hs[i]->pipe[0] == -1 &&
		    loop_pipe_get(c->l, hs[i]->pipe) == -1)
			return SL_ERR_IO;
	conn_set_state(c, CS_RELAY);
	half_want_read(&c->down, half_pending(&c->up) < RELAY_HIGH_WATER);
	half_want_read(&c->up, 1);
	relay_flush(&c->up);
	return 0;
}

/* Writes user-space output; returns 1 when all of it is out. */
static int
flush_out(struct half *h)
{
	ssize_t n;

	while (half_pending(h) > 0) {
		n = send(h->fd, h->out.buf + h->out.off, half_pending(h),
		    MSG_NOSIGNAL);
		if (n == -1) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return -1;
		}
		h->out.off += (size_t)n;
	}
	h->out.off = h->out.len = 0;
	if (h->out.cap > RELAY_KEEP_BUF) {	/* idle connections stay small */
		free(h->out.buf);
		memset(&h->out, 0, sizeof(h->out));
	}
	return 1;
}

/* Moves the peer's piped bytes to h's fd; returns 1 when the pipe is empty. */
static int
flush_pipe(struct half *h)
{
	struct half *src = h->peer;
	ssize_t n;

	while (src->inpipe > 0) {
		n = splice(src->pipe[0], NULL, h->fd, NULL, src->inpipe,
		    SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
		if (n == -1) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return -1;
		}
		src->inpipe -= (size_t)n;
	}
	return 1;
}

/*
 * In a refusal: requests sent before the refused one still go upstream,
 * followed by our end of stream; the sandbox gets upstream's remaining
 * answers, then the refusal, then end of stream.
 */
static void
deny_flush(struct half *h)
{
	struct conn *c = h->c;
	int r;

	if (h == &c->up) {
		if ((r = flush_out(h)) == 0) {
			half_want_write(h, 1);
			return;
		}
		half_want_write(h, 0);
		if (r == -1)
			h->eof = 1;	/* upstream is gone: refuse at once */
		else if (!h->shut) {
			shutdown(h->fd, SHUT_WR);
			h->shut = 1;
		}
		if (r == 1)
			return;
		h = &c->down;
	}
	r = flush_pipe(h);
	if (r == 1 && h->peer->fd != -1 && !h->peer->eof) {
		half_want_write(h, 0);
		half_want_read(h->peer, 1);	/* more answers may come */
		return;
	}
	if (r == 1)
		r = flush_out(h);
	if (r == -1) {
		conn_close(c, c->close_reason);
		return;
	}
	if (r == 0) {
		half_want_write(h, 1);
		half_want_read(h->peer, 0);	/* back-pressure */
		return;
	}
	half_want_write(h, 0);
	if (!h->shut) {
		shutdown(h->fd, SHUT_WR);
		h->shut = 1;
	}
	if (h->eof)
		conn_close(c, c->close_reason);	/* both ways are done */
}

/*
 * Writes everything queued for h's fd: first user-space output, then what
 * the peer spliced.  When all is out, resumes reading the peer and passes
 * on its end of stream.
 */
void
relay_flush(struct half *h)
{
	struct conn *c = h->c;
	int r1, r2;

	if (h->fd == -1)
		return;
	if (c->state == CS_DENY) {
		deny_flush(h);
		return;
	}
	r1 = flush_out(h);
	r2 = r1 == 1 ? flush_pipe(h) : 0;
	if (r1 == -1 || r2 == -1) {
		conn_close(c, errno == ECONNRESET ? "reset" : "write-error");
		return;
	}
	if (r1 == 0 || r2 == 0) {
		half_want_write(h, 1);
		half_want_read(h->peer, 0);	/* back-pressure */
		return;
	}
	half_want_write(h, 0);
	if (c->state != CS_RELAY)
		return;
	if (!h->peer->eof) {
		if (!(c->http != NULL && h->peer == &c->down && c->http_hold))
			half_want_read(h->peer, 1);
	} else if (c->http != NULL && h == &c->up &&
	    (c->http_hold || c->hparsed < c->hlen)) {
		/* A held request is still to be judged: EOF after it. */
	} else if (!h->shut) {
		shutdown(h->fd, SHUT_WR);	/* pass on the half-close */
		h->shut = 1;
	}
	if (c->down.shut && c->up.shut)
		conn_close(c, "closed");
}

/*
 * A client judged opaque because it kept silent must not then speak TLS or
 * HTTP: its name would never have been checked.  Returns 0 to relay on.
 */
static int
late_sniff(struct conn *c)
{
	uint8_t buf[16];
	enum sniff_proto p;
	ssize_t n;

	n = recv(c->down.fd, buf, sizeof(buf), MSG_PEEK);
	if (n <= 0)
		return 0;	/* end of stream and errors: the splice sees them */
	if (sniff_proto(buf, (size_t)n, &p) == PARSE_COMPLETE &&
	    p == SNIFF_OPAQUE) {
		c->late_sniff = 0;
		return 0;
	}
	/* XXX a prefix of TLS or HTTP is refused too, rather than waited for. */
	c->dec.verdict = VERDICT_DENY;
	c->dec.rule = NULL;
	c->close_reason = "late-named-protocol";
	conn_deny(c, "late-named-protocol", NULL);
	return -1;
}

void
relay_on_read(struct half *h)
{
	struct conn *c = h->c;
	ssize_t n;
	int i;

	if (c->http != NULL && h == &c->down) {
		conn_http_read(c);
		return;
	}
	if (c->late_sniff && h == &c->down && late_sniff(c) != 0)
		return;
	for (i = 0; i < READS_PER_WAKE && h->inpipe == 0; i++) {
		n = splice(h->fd, NULL, h->pipe[1], NULL, SPLICE_CHUNK,
		    SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
		if (n == -1) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			if (errno == ECONNRESET) {
				/*
				 * A reset is no end of stream: the peer gets one
				 * too, so a close-delimited answer cut short does
				 * not look whole.
				 */
				struct linger lg = { 1, 0 };

				if (h->peer->fd != -1)
					setsockopt(h->peer->fd, SOL_SOCKET,
					    SO_LINGER, &lg, sizeof(lg));
				conn_close(c, "reset");
				return;
			}
			conn_close(c, "read-error");
			return;
		}
		if (n == 0) {
			h->eof = 1;
			half_want_read(h, 0);
			relay_flush(h->peer);
			return;
		}
		h->inpipe += (size_t)n;
		h->bytes += (uint64_t)n;
		relay_flush(h->peer);
		if (c->state == CS_CLOSED)
			return;
	}
}
