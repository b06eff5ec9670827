/*
 * tstream.c: a socket with TLS (or none) and a buffer each way, on the
 * loop (see tstream.h).  One thread's: the loop's.
 */
#include "autoconf.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sodium.h>

#include "util/clock.h"
#include "loop/loop.h"
#include "loop/tstream.h"

#define TS_RECORD	16384	/* plaintext per SSL_write: one full record */
#define TS_READ_TURN	(64 * 1024)	/* read per turn at most (fairness) */
#define TS_RBUF		(64 * 1024)	/* TLS read-ahead: records per recv */

enum ts_state {
	TS_NEW,			/* not started */
	TS_CONNECTING,		/* TCP */
	TS_HANDSHAKE,
	TS_OPEN,
	TS_CLOSING,		/* close_notify owed once the output is out */
	TS_CLOSED,		/* close_notify sent */
	TS_FAILED,		/* an error was reported, or quiet: no more I/O */
};

struct tstream {
	enum ts_state	 state;
	enum tstream_role role;
	int		 fd;
	SSL		*ssl;
	struct event	*rev;		/* EV_READ | EV_PERSIST */
	struct event	*wev;		/* EV_WRITE | EV_PERSIST; also activated */
	struct event	*tev;		/* the timeout, made when first set */
	int		 radded, wadded;	/* rev, wev in epoll */
	int		 wsched;	/* wev activated for queued bytes */
	int		 read_on;
	int		 eof;		/* the peer's end was read */
	int		 wmore;		/* the record being sent is not the last */
	int		 wipe;		/* output is wiped as it goes (tstream_wipe) */
	int		 rshort;	/* the last recv got less than it asked */
	struct evbuffer	*in, *out;
	uint8_t		*pre;		/* the prefix (TLS): read first */
	size_t		 pre_len, pre_off;
	size_t		 wlow;
	unsigned	 tmo_ms;
	uint64_t	 last;		/* progress, mono_ms */
	unsigned long	 ssl_err;
	tstream_cb	 readcb, writecb;
	tstream_event_cb eventcb;
	void		*arg;
	/* TSTREAM_PIPE: the other end, and what the owner is owed. */
	void		(*peer_wake)(void *);
	void		(*peer_gone)(void *);
	void		*peer_arg;
	short		 pipe_ev;	/* an event for the owner */
	int		 pipe_drained;	/* the owner's write callback is owed */
};

/* ---- the BIO: the prefix, then the socket ------------------------------ */

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static int
bio_read(BIO *b, char *buf, int len)
{
	struct tstream *ts = BIO_get_data(b);
	size_t n;
	ssize_t r;

	BIO_clear_retry_flags(b);
	if (len <= 0)
		return 0;
	if (ts->pre_off < ts->pre_len) {
		n = ts->pre_len - ts->pre_off;
		if (n > (size_t)len)
			n = (size_t)len;
		memcpy(buf, ts->pre + ts->pre_off, n);
		ts->pre_off += n;
		if (ts->pre_off == ts->pre_len) {	/* an idle stream keeps none */
			free(ts->pre);
			ts->pre = NULL;
			ts->pre_len = ts->pre_off = 0;
		}
		return (int)n;
	}
	do
		r = recv(ts->fd, buf, (size_t)len, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		BIO_set_retry_read(b);
	ts->rshort = r > 0 && r < len;
	return (int)r;
}

static int
bio_write(BIO *b, const char *buf, int len)
{
	struct tstream *ts = BIO_get_data(b);
	ssize_t r;

	BIO_clear_retry_flags(b);
	do
		r = send(ts->fd, buf, (size_t)len, MSG_NOSIGNAL |
		    (ts->wmore ? MSG_MORE : 0));
	while (r < 0 && errno == EINTR);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		BIO_set_retry_write(b);
	return (int)r;
}

static long
bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)b;
	(void)num;
	(void)ptr;
	return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int
bio_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static void
bio_method_make(void)
{
	BIO_METHOD *m;

	if ((m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK,
	    "sluice stream")) == NULL)
		return;
	if (BIO_meth_set_read(m, bio_read) != 1 ||
	    BIO_meth_set_write(m, bio_write) != 1 ||
	    BIO_meth_set_ctrl(m, bio_ctrl) != 1 ||
	    BIO_meth_set_create(m, bio_create) != 1) {
		BIO_meth_free(m);
		return;
	}
	bio_method = m;
}

/* Puts ts's BIO under its SSL; -1 out of memory. */
static int
bio_attach(struct tstream *ts)
{
	BIO *b;

	pthread_once(&bio_once, bio_method_make);
	if (bio_method == NULL || (b = BIO_new(bio_method)) == NULL)
		return -1;
	BIO_set_data(b, ts);
	SSL_set_bio(ts->ssl, b, b);
	return 0;
}

/* ---- events ------------------------------------------------------------ */

/* Whether application bytes flow: after the handshake, before a failure. */
static int
is_open(const struct tstream *ts)
{
	return ts->state >= TS_OPEN && ts->state <= TS_CLOSED;
}

static void
touch(struct tstream *ts)
{
	if (ts->tmo_ms != 0)
		ts->last = mono_ms();
}

/* rev in epoll exactly while something is to be read. */
static void
sync_rev(struct tstream *ts)
{
	int want;

	if (ts->role == TSTREAM_PIPE)
		return;		/* never in epoll: activated */
	want = ts->state == TS_HANDSHAKE ||
	    (is_open(ts) && ts->read_on && !ts->eof);

	if (want && !ts->radded && event_add(ts->rev, NULL) == 0)
		ts->radded = 1;
	else if (!want && ts->radded) {
		event_del(ts->rev);
		ts->radded = 0;
	}
}

static void
wait_write(struct tstream *ts, int on)
{
	if (on && !ts->wadded && event_add(ts->wev, NULL) == 0)
		ts->wadded = 1;
	else if (!on && ts->wadded) {
		event_del(ts->wev);
		ts->wadded = 0;
	}
}

/* A turn of the loop runs the write step (after this turn's callbacks). */
static void
schedule_write(struct tstream *ts)
{
	if (!ts->wsched) {
		ts->wsched = 1;
		event_active(ts->wev, EV_WRITE, 1);
	}
}

/* Reading goes on next turn: bytes wait inside the SSL (or a prefix). */
static void
schedule_read(struct tstream *ts)
{
	if (ts->role == TSTREAM_PIPE) {
		if (ts->pipe_ev != 0 || ts->pipe_drained ||
		    (is_open(ts) && ts->read_on &&
		    evbuffer_get_length(ts->in) > 0))
			event_active(ts->rev, EV_READ, 1);
		return;
	}
	if (is_open(ts) && ts->read_on &&
	    !ts->eof && ((ts->ssl != NULL && SSL_has_pending(ts->ssl)) ||
	    ts->pre_off < ts->pre_len))
		event_active(ts->rev, EV_READ, 1);
}

/*
 * SSL_get_error() reads the thread's error queue: it must be empty before
 * each TLS call.  Mostly it is, and clearing it whole costs more than
 * looking (a visible share of a small request's CPU).
 */
static inline void
err_clear(void)
{
	if (ERR_peek_error() != 0)
		ERR_clear_error();
}

/* An error ends all I/O; the owner is told. */
static void
fail(struct tstream *ts, short what)
{
	if (ts->ssl != NULL && ts->ssl_err == 0)
		ts->ssl_err = ERR_peek_last_error();
	ERR_clear_error();
	ts->state = TS_FAILED;
	sync_rev(ts);
	wait_write(ts, 0);
	if (ts->eventcb != NULL)
		ts->eventcb(ts, what, ts->arg);
}

/* ---- the handshake ----------------------------------------------------- */

static void
handshake_step(struct tstream *ts)
{
	int r, e;

	ts->wmore = 0;
	err_clear();
	if ((r = SSL_do_handshake(ts->ssl)) == 1) {
		ts->state = TS_OPEN;
		touch(ts);
		wait_write(ts, 0);
		sync_rev(ts);
		if (ts->eventcb != NULL)
			ts->eventcb(ts, TSTREAM_CONNECTED, ts->arg);
		if (ts->state != TS_OPEN)
			return;
		if (evbuffer_get_length(ts->out) > 0)
			schedule_write(ts);
		schedule_read(ts);
		return;
	}
	e = SSL_get_error(ts->ssl, r);
	if (e == SSL_ERROR_WANT_READ) {
		wait_write(ts, 0);
		sync_rev(ts);
		/* A prefix read whole may leave nothing for the socket to wake. */
		return;
	}
	if (e == SSL_ERROR_WANT_WRITE) {
		wait_write(ts, 1);
		return;
	}
	fail(ts, TSTREAM_ERROR | TSTREAM_READING);
}

/* ---- reading ----------------------------------------------------------- */

/*
 * What a failed SSL_read means: 0 would block, else the flags to report
 * (an end without close_notify is an EOF or an error as the role says).
 */
static short
read_failed(struct tstream *ts, int r)
{
	int e = SSL_get_error(ts->ssl, r);
	unsigned long le;
	int dirty = 0;

	switch (e) {
	case SSL_ERROR_WANT_READ:
		return 0;
	case SSL_ERROR_WANT_WRITE:
		wait_write(ts, 1);	/* a key update's answer; reading follows */
		return 0;
	case SSL_ERROR_ZERO_RETURN:
		return TSTREAM_EOF | TSTREAM_READING;
	case SSL_ERROR_SYSCALL:
		dirty = ERR_peek_error() == 0 && (r == 0 || errno == 0);
		break;
	case SSL_ERROR_SSL:
		le = ERR_peek_error();
		dirty = ERR_GET_LIB(le) == ERR_LIB_SSL &&
		    ERR_GET_REASON(le) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
		break;
	}
	if (!dirty)
		return TSTREAM_ERROR | TSTREAM_READING;
	return TSTREAM_EOF | TSTREAM_READING |
	    (ts->role == TSTREAM_CONNECT ? TSTREAM_ERROR : 0);
}

/* One read of at most len into p: > 0 bytes, 0 would block, < 0 flags negated. */
static int
read_some(struct tstream *ts, void *p, size_t len)
{
	ssize_t n;
	short what;

	if (ts->ssl != NULL) {
		ts->wmore = 0;		/* what it may write is alone */
		err_clear();
		if ((n = SSL_read(ts->ssl, p, (int)len)) > 0)
			return (int)n;
		what = read_failed(ts, (int)n);
		return what == 0 ? 0 : -what;
	}
	do
		n = recv(ts->fd, p, len, 0);
	while (n < 0 && errno == EINTR);
	ts->rshort = n > 0 && (size_t)n < len;
	if (n > 0)
		return (int)n;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	return n == 0 ? -(TSTREAM_EOF | TSTREAM_READING) :
	    -(TSTREAM_ERROR | TSTREAM_READING);
}

static void
read_step(struct tstream *ts)
{
	struct evbuffer_iovec v;
	size_t got = 0;
	int n = 0;

	while (ts->read_on && !ts->eof) {
		if (got >= TS_READ_TURN) {
			event_active(ts->rev, EV_READ, 1);	/* the rest next turn */
			break;
		}
		if (evbuffer_reserve_space(ts->in, TS_RECORD, &v, 1) < 1) {
			n = -(TSTREAM_ERROR | TSTREAM_READING);
			break;
		}
		ts->rshort = 0;
		if ((n = read_some(ts, v.iov_base, v.iov_len)) <= 0)
			break;
		v.iov_len = (size_t)n;
		evbuffer_commit_space(ts->in, &v, 1);
		got += (size_t)n;
		/*
		 * A recv that got less than it asked emptied the socket: the
		 * next would only say EAGAIN (epoll tells of more).
		 */
		if (ts->rshort && (ts->ssl == NULL ||
		    !SSL_has_pending(ts->ssl)))
			break;
	}
	if (got > 0) {
		touch(ts);
		if (ts->readcb != NULL)
			ts->readcb(ts, ts->arg);
	}
	if (n >= 0 || ts->state == TS_FAILED)
		return;
	if ((-n) & TSTREAM_ERROR) {
		fail(ts, (short)-n);
		return;
	}
	ts->eof = 1;
	sync_rev(ts);
	if (ts->eventcb != NULL)
		ts->eventcb(ts, (short)-n, ts->arg);
}

/* ---- writing ----------------------------------------------------------- */

/* The TCP connect finished: the handshake, or open. */
static void
connected_step(struct tstream *ts)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(ts->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		err = errno;
	if (err == EINPROGRESS || err == EINTR)
		return;
	if (err != 0) {
		errno = err;
		fail(ts, TSTREAM_ERROR | TSTREAM_WRITING);
		return;
	}
	touch(ts);
	if (ts->ssl != NULL) {
		ts->state = TS_HANDSHAKE;
		handshake_step(ts);
		return;
	}
	ts->state = TS_OPEN;
	wait_write(ts, 0);
	sync_rev(ts);
	if (ts->eventcb != NULL)
		ts->eventcb(ts, TSTREAM_CONNECTED, ts->arg);
	if (ts->state == TS_OPEN && evbuffer_get_length(ts->out) > 0)
		schedule_write(ts);
}

/*
 * write_some for a stream whose output is wiped: the front is copied to
 * a staging buffer (evbuffer_pullup would leave unwiped copies in the
 * chains it merges), sent from there, and wiped in both places once
 * taken.  The TLS library's own record buffer is not ours to wipe.
 */
static int
write_wiped(struct tstream *ts, size_t len)
{
	static _Thread_local unsigned char stage[TS_RECORD];
	ssize_t n;
	int r, e;

	if (len > sizeof(stage))
		len = sizeof(stage);
	if (evbuffer_copyout(ts->out, stage, len) != (ssize_t)len)
		return -1;
	ts->wmore = evbuffer_get_length(ts->out) > len;
	if (ts->ssl == NULL) {
		n = send(ts->fd, stage, len, MSG_NOSIGNAL |
		    (ts->wmore ? MSG_MORE : 0));
		r = n > 0 ? (int)n : n < 0 && (errno == EAGAIN ||
		    errno == EWOULDBLOCK || errno == EINTR) ? 0 : -1;
	} else {
		err_clear();
		if ((r = SSL_write(ts->ssl, stage, (int)len)) <= 0) {
			e = SSL_get_error(ts->ssl, r);
			r = e == SSL_ERROR_WANT_WRITE ||
			    e == SSL_ERROR_WANT_READ ? 0 : -1;
		}
	}
	sodium_memzero(stage, len);
	if (r > 0)
		loop_evbuffer_wipe_drain(ts->out, (size_t)r);
	return r;
}

/* One write of the output's front: > 0 bytes, 0 would block, -1 failed. */
static int
write_some(struct tstream *ts)
{
	size_t len = evbuffer_get_length(ts->out);
	unsigned char *p;
	int r, e;

	if (ts->wipe)
		return write_wiped(ts, len);
	if (ts->ssl == NULL) {
		r = evbuffer_write(ts->out, ts->fd);
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
		    errno == EINTR))
			return 0;
		return r > 0 ? r : -1;
	}
	if (len > TS_RECORD)
		len = TS_RECORD;
	if ((p = evbuffer_pullup(ts->out, (ssize_t)len)) == NULL)
		return -1;
	/* Records that follow at once go in fewer, fuller segments. */
	ts->wmore = evbuffer_get_length(ts->out) > len;
	err_clear();
	if ((r = SSL_write(ts->ssl, p, (int)len)) > 0) {
		evbuffer_drain(ts->out, (size_t)r);
		return r;
	}
	e = SSL_get_error(ts->ssl, r);
	return e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ ? 0 : -1;
}

/* The close_notify, once nothing is queued: 0 sent, 1 would block, -1. */
static int
close_notify_step(struct tstream *ts)
{
	int r;

	ts->wmore = 0;
	err_clear();
	if ((r = SSL_shutdown(ts->ssl)) >= 0) {
		ts->state = TS_CLOSED;
		return 0;
	}
	return SSL_get_error(ts->ssl, r) == SSL_ERROR_WANT_WRITE ? 1 : -1;
}

static void
write_step(struct tstream *ts)
{
	size_t wrote = 0;
	int r = 1, blocked = 0, closed = 0;

	while (evbuffer_get_length(ts->out) > 0) {
		if ((r = write_some(ts)) <= 0)
			break;
		wrote += (size_t)r;
	}
	if (r < 0) {
		fail(ts, TSTREAM_ERROR | TSTREAM_WRITING);
		return;
	}
	blocked = evbuffer_get_length(ts->out) > 0;
	if (!blocked && ts->state == TS_CLOSING) {
		if ((r = close_notify_step(ts)) < 0) {
			fail(ts, TSTREAM_ERROR | TSTREAM_WRITING);
			return;
		}
		blocked = r;
		closed = !blocked;
	}
	wait_write(ts, blocked);
	if (wrote == 0 && !closed)
		return;
	touch(ts);
	if (ts->writecb != NULL && tstream_queued(ts) <= ts->wlow)
		ts->writecb(ts, ts->arg);
	if (is_open(ts))
		schedule_read(ts);
}

/* ---- pipes ------------------------------------------------------------- */

static void	rev_cb(evutil_socket_t, short, void *);
static void	wev_cb(evutil_socket_t, short, void *);
static void	out_cb(struct evbuffer *, const struct evbuffer_cb_info *,
		    void *);

/*
 * The owner's callbacks a pipe owes, on the loop: an event first (it
 * ends the stream), then the write callback, then the read one.  Each
 * may free nothing (the owner frees on a later turn), but may quiet ts.
 */
static void
pipe_owner_step(struct tstream *ts)
{
	short ev = ts->pipe_ev;

	if (ev != 0 && ts->state != TS_FAILED) {
		ts->pipe_ev = 0;
		if (ev & TSTREAM_ERROR)
			ts->state = TS_FAILED;
		else
			ts->eof = 1;
		if (ts->eventcb != NULL)
			ts->eventcb(ts, ev, ts->arg);
		return;
	}
	if (ts->pipe_drained && is_open(ts)) {
		ts->pipe_drained = 0;
		if (ts->writecb != NULL)
			ts->writecb(ts, ts->arg);
	}
	if (is_open(ts) && ts->read_on && evbuffer_get_length(ts->in) > 0 &&
	    ts->readcb != NULL)
		ts->readcb(ts, ts->arg);
}

struct tstream *
tstream_pipe_new(struct event_base *base, void (*wake)(void *),
    void (*gone)(void *), void *arg)
{
	struct tstream *ts;

	if ((ts = calloc(1, sizeof(*ts))) == NULL)
		return NULL;
	ts->fd = -1;
	ts->role = TSTREAM_PIPE;
	ts->read_on = 1;
	ts->peer_wake = wake;
	ts->peer_gone = gone;
	ts->peer_arg = arg;
	if ((ts->in = evbuffer_new()) == NULL ||
	    (ts->out = evbuffer_new()) == NULL ||
	    evbuffer_add_cb(ts->out, out_cb, ts) == NULL ||
	    (ts->rev = event_new(base, -1, 0, rev_cb, ts)) == NULL ||
	    (ts->wev = event_new(base, -1, 0, wev_cb, ts)) == NULL) {
		tstream_free(ts);
		return NULL;
	}
	return ts;
}

void
tstream_pipe_pushed(struct tstream *ts)
{
	touch(ts);
	schedule_read(ts);
}

void
tstream_pipe_drained(struct tstream *ts)
{
	if (ts->state == TS_CLOSING && evbuffer_get_length(ts->out) == 0)
		ts->state = TS_CLOSED;
	if (tstream_queued(ts) <= ts->wlow && is_open(ts)) {
		ts->pipe_drained = 1;
		schedule_read(ts);
	}
}

void
tstream_pipe_end(struct tstream *ts, short what)
{
	if (ts->state == TS_FAILED || ts->pipe_ev != 0)
		return;
	ts->pipe_ev = what;
	schedule_read(ts);
}

int
tstream_pipe_closing(const struct tstream *ts)
{
	return ts->state == TS_CLOSING || ts->state == TS_CLOSED;
}

void
tstream_pipe_ssl(struct tstream *ts, SSL *ssl)
{
	ts->ssl = ssl;		/* borrowed: a pipe never frees it */
}

void
tstream_pipe_detach(struct tstream *ts)
{
	ts->peer_wake = NULL;
	ts->peer_gone = NULL;
}

/* The owner is done with a pipe: its peer lets go of it, once. */
static void
pipe_gone(struct tstream *ts)
{
	void (*gone)(void *) = ts->peer_gone;

	ts->peer_wake = NULL;
	ts->peer_gone = NULL;
	if (gone != NULL)
		gone(ts->peer_arg);
}

/* ---- callbacks: they only dispatch -------------------------------------- */

static void
rev_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tstream *ts = arg;

	(void)fd;
	(void)what;
	if (ts->role == TSTREAM_PIPE)
		pipe_owner_step(ts);
	else if (ts->state == TS_HANDSHAKE)
		handshake_step(ts);
	else if (is_open(ts))
		read_step(ts);
}

static void
wev_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tstream *ts = arg;

	(void)fd;
	(void)what;
	ts->wsched = 0;
	if (ts->role == TSTREAM_PIPE) {
		if (ts->peer_wake != NULL && ts->state != TS_FAILED)
			ts->peer_wake(ts->peer_arg);
	} else if (ts->state == TS_CONNECTING)
		connected_step(ts);
	else if (ts->state == TS_HANDSHAKE)
		handshake_step(ts);
	else if (is_open(ts))
		write_step(ts);
}

static void
tev_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tstream *ts = arg;
	uint64_t now = mono_ms(), idle = now - ts->last;
	struct timeval tv;
	short dir;

	(void)fd;
	(void)what;
	if (ts->state == TS_FAILED || ts->tmo_ms == 0)
		return;
	dir = ts->state < TS_OPEN ? TSTREAM_READING | TSTREAM_WRITING :
	    tstream_queued(ts) > 0 ? TSTREAM_WRITING :
	    ts->read_on && !ts->eof ? TSTREAM_READING : 0;
	if (dir == 0) {		/* nothing awaited: the clock starts again */
		ts->last = now;
		idle = 0;
	}
	if (idle < ts->tmo_ms) {
		tv.tv_sec = (ts->tmo_ms - idle) / 1000;
		tv.tv_usec = (ts->tmo_ms - idle) % 1000 * 1000;
		evtimer_add(ts->tev, &tv);
		return;
	}
	if (ts->eventcb != NULL)
		ts->eventcb(ts, TSTREAM_TIMEOUT | dir, ts->arg);
}

/* Queued bytes are written after this turn's callbacks. */
static void
out_cb(struct evbuffer *b, const struct evbuffer_cb_info *info, void *arg)
{
	struct tstream *ts = arg;

	(void)b;
	if (info->n_added > 0 && ts->state >= TS_OPEN &&
	    ts->state <= TS_CLOSING)
		schedule_write(ts);
}

/* ---- the interface ----------------------------------------------------- */

struct tstream *
tstream_new(struct event_base *base, int fd, SSL *ssl,
    enum tstream_role role)
{
	struct tstream *ts;

	if ((ts = calloc(1, sizeof(*ts))) == NULL) {
		if (fd >= 0)
			close(fd);
		SSL_free(ssl);
		return NULL;
	}
	ts->fd = fd;
	ts->ssl = ssl;
	ts->role = role;
	ts->read_on = 1;
	if ((ts->in = evbuffer_new()) == NULL ||
	    (ts->out = evbuffer_new()) == NULL ||
	    evbuffer_add_cb(ts->out, out_cb, ts) == NULL ||
	    (ts->rev = event_new(base, fd, EV_READ | EV_PERSIST, rev_cb,
	    ts)) == NULL ||
	    (ts->wev = event_new(base, fd, EV_WRITE | EV_PERSIST, wev_cb,
	    ts)) == NULL ||
	    (ssl != NULL && fd >= 0 && bio_attach(ts) != 0)) {
		tstream_free(ts);
		return NULL;
	}
	if (ssl != NULL) {
		SSL_set_read_ahead(ssl, 1);
		SSL_set_default_read_buffer_len(ssl, TS_RBUF);
		SSL_set_mode(ssl, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
		    SSL_MODE_RELEASE_BUFFERS);
		if (role == TSTREAM_ACCEPT)
			SSL_set_accept_state(ssl);
		else
			SSL_set_connect_state(ssl);
	}
	return ts;
}

int
tstream_prefix(struct tstream *ts, const void *p, size_t len)
{
	if (len == 0)
		return 0;
	if (ts->state != TS_NEW || ts->pre != NULL)
		return -1;		/* once, before the start */
	if (ts->ssl == NULL)
		return evbuffer_add(ts->in, p, len);
	if ((ts->pre = malloc(len)) == NULL)
		return -1;
	memcpy(ts->pre, p, len);
	ts->pre_len = len;
	ts->pre_off = 0;
	return 0;
}

void
tstream_start(struct tstream *ts)
{
	if (ts->state != TS_NEW)
		return;
	touch(ts);
	if (ts->ssl != NULL && ts->role != TSTREAM_PIPE) {
		ts->state = TS_HANDSHAKE;
		sync_rev(ts);
		if (ts->pre_len > 0)
			event_active(ts->rev, EV_READ, 1);
		return;
	}
	ts->state = TS_OPEN;	/* a prefix is in the input: the owner's */
	sync_rev(ts);
	if (evbuffer_get_length(ts->out) > 0)
		schedule_write(ts);
	if (ts->role == TSTREAM_PIPE)
		schedule_read(ts);
}

int
tstream_connect(struct tstream *ts, const struct sockaddr *sa, socklen_t len)
{
	int fd, one = 1;

	if (ts->state != TS_NEW || ts->fd >= 0) {
		errno = EINVAL;
		return -1;
	}
	if ((fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0)) < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, sa, len) != 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	ts->fd = fd;
	if (event_assign(ts->rev, event_get_base(ts->rev), fd,
	    EV_READ | EV_PERSIST, rev_cb, ts) != 0 ||
	    event_assign(ts->wev, event_get_base(ts->wev), fd,
	    EV_WRITE | EV_PERSIST, wev_cb, ts) != 0 ||
	    (ts->ssl != NULL && bio_attach(ts) != 0)) {
		errno = ENOMEM;
		return -1;	/* fd is ts's: freed with it */
	}
	ts->state = TS_CONNECTING;
	touch(ts);
	wait_write(ts, 1);
	return 0;
}

void
tstream_setcb(struct tstream *ts, tstream_cb readcb, tstream_cb writecb,
    tstream_event_cb eventcb, void *arg)
{
	ts->readcb = readcb;
	ts->writecb = writecb;
	ts->eventcb = eventcb;
	ts->arg = arg;
}

void
tstream_read(struct tstream *ts, int on)
{
	on = on != 0;
	if (on == ts->read_on)
		return;
	ts->read_on = on;
	if (on)
		touch(ts);
	sync_rev(ts);
	if (on)
		schedule_read(ts);
}

int
tstream_reading(const struct tstream *ts)
{
	return ts->read_on;
}

void
tstream_set_timeout(struct tstream *ts, unsigned ms)
{
	struct timeval tv = { ms / 1000, ms % 1000 * 1000 };

	ts->tmo_ms = ms;
	if (ms == 0) {
		if (ts->tev != NULL)
			evtimer_del(ts->tev);
		return;
	}
	if (ts->tev == NULL && (ts->tev = evtimer_new(event_get_base(ts->rev),
	    tev_cb, ts)) == NULL)
		return;
	ts->last = mono_ms();
	evtimer_add(ts->tev, &tv);
}

void
tstream_set_wlow(struct tstream *ts, size_t lowat)
{
	ts->wlow = lowat;
}

struct evbuffer *
tstream_input(struct tstream *ts)
{
	return ts->in;
}

struct evbuffer *
tstream_output(struct tstream *ts)
{
	return ts->out;
}

size_t
tstream_queued(const struct tstream *ts)
{
	return evbuffer_get_length(ts->out) + (ts->state == TS_CLOSING);
}

void
tstream_close_notify(struct tstream *ts)
{
	if ((ts->ssl == NULL && ts->role != TSTREAM_PIPE) ||
	    ts->state != TS_OPEN)
		return;
	ts->state = TS_CLOSING;
	schedule_write(ts);
}

SSL *
tstream_ssl(const struct tstream *ts)
{
	return ts->ssl;
}

int
tstream_fd(const struct tstream *ts)
{
	return ts->fd;
}

unsigned long
tstream_ssl_error(const struct tstream *ts)
{
	return ts->ssl_err;
}

void
tstream_quiet(struct tstream *ts)
{
	if (ts == NULL)
		return;
	ts->readcb = ts->writecb = NULL;
	ts->eventcb = NULL;
	if (ts->role == TSTREAM_PIPE)
		pipe_gone(ts);
	if (ts->state != TS_NEW)
		ts->state = TS_FAILED;
	if (ts->rev != NULL)
		event_del(ts->rev);
	if (ts->wev != NULL)
		event_del(ts->wev);
	if (ts->tev != NULL)
		evtimer_del(ts->tev);
	ts->radded = ts->wadded = ts->wsched = 0;
}

void
tstream_free(struct tstream *ts)
{
	if (ts == NULL)
		return;
	if (ts->rev != NULL)
		event_free(ts->rev);
	if (ts->wev != NULL)
		event_free(ts->wev);
	if (ts->tev != NULL)
		event_free(ts->tev);
	if (ts->role == TSTREAM_PIPE)
		pipe_gone(ts);
	else
		SSL_free(ts->ssl);
	if (ts->fd >= 0)
		close(ts->fd);
	if (ts->in != NULL)
		evbuffer_free(ts->in);
	if (ts->out != NULL && ts->wipe)
		loop_evbuffer_wipe_free(ts->out);
	else if (ts->out != NULL)
		evbuffer_free(ts->out);
	free(ts->pre);
	free(ts);
}

void
tstream_wipe(struct tstream *ts)
{
	ts->wipe = 1;
}
