/*
 * h2up.c: HTTP/2 upstream sessions (see h2up.h).  nghttp2 does the
 * framing and flow control; this file reads each pipe's HTTP/1.1 request
 * (parse/httphead.h, as strict as for a sandbox's) into a stream, and
 * writes the stream's answer into the pipe as HTTP/1.1 with a chunked
 * body, so the icpt on the other side reads it as it reads any upstream.
 *
 * The window a stream's answer takes is given back only as the pipe's
 * owner reads it, and a pipe's request body is taken only while what
 * waits for nghttp2 is small: both directions are bounded per stream.
 * A session ends when its connection fails or idles out with no stream,
 * or after a GOAWAY once its streams are done; its pipes' owners are then
 * told by an error.  Memory goes on the next loop turn.
 */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>

#include "util/ascii.h"
#include "util/log.h"
#include "util/names.h"
#include "util/sbuf.h"
#include "parse/dechunk.h"
#include "parse/httphead.h"
#include "parse/httpwrite.h"
#include "loop/h2fields.h"
#include "loop/h2up.h"
#include "loop/loop.h"
#include "loop/tstream.h"

#define H2UP_HIGH		(256u * 1024)	/* frames queued for the upstream */
#define H2UP_BODY_HIGH		(64u * 1024)	/* a request body waiting for nghttp2 */
#define H2UP_STREAM_WINDOW	(256u * 1024)
#define H2UP_CONN_WINDOW	(4u * 1024 * 1024)
#define H2UP_MAX_STREAMS	100

/* A stream's request, read from its pipe. */
enum h2ups_rq {
	UQ_HEAD,	/* its head is read */
	UQ_BODY,	/* submitted; its body goes as it comes */
	UQ_DONE,	/* all of it is with nghttp2 */
};

/* A stream's answer, written into its pipe. */
enum h2ups_rs {
	UR_WAIT,	/* no final head yet */
	UR_BODY,	/* the head is in the pipe; the body follows, chunked */
	UR_ENDED,	/* the whole answer is in the pipe */
	UR_FAILED,	/* reset: its owner was told */
};

struct h2up;

struct h2ups {
	struct h2up	*u;
	struct h2ups	*next;
	int32_t		 id;		/* 0 until submitted */
	struct tstream	*pipe;		/* NULL once its owner let go */
	enum h2ups_rq	 rq;
	enum h2ups_rs	 rs;
	struct http_reqs *reqs;
	int		 chunked;	/* its request body is chunked */
	struct dechunk	 dc;
	struct evbuffer	*body;		/* request body for nghttp2 */
	struct evbuffer	*trailers;	/* the request's trailer section, if any */
	int		 deferred;	/* nghttp2 waits for body */
	int		 bodyless;	/* the answer has no body (HEAD) */
	struct evbuffer	*hdr;		/* the answer's header lines, as read */
	unsigned	 status;
	size_t		 hsize;
	size_t		 unconsumed;	/* answer bytes whose window is not back */
	int		 closed;	/* nghttp2 closed it */
};

struct h2up {
	struct h2up_pool *p;
	struct h2up	*next;
	struct tstream	*ts;
	nghttp2_session	*ng;
	const struct sb_counter *owner;
	char		 host[NAME_BUFSZ + 2];
	uint16_t	 port;
	uint8_t		 tls[UPOOL_TLS_LEN];
	struct h2ups	*streams;
	unsigned	 nstreams;
	int		 failed;	/* it ends on this step */
	struct event	*wake;
	size_t		 header_limit;
	unsigned	 idle_ms;
};

struct h2up_pool {
	struct event_base *base;
	struct h2up	*live;
	struct h2up	*dead;		/* freed on the next loop turn */
	unsigned	 n;
	struct event	*reap;
};

static void	session_step(struct h2up *u);
static void	pipe_in_cb(struct evbuffer *, const struct evbuffer_cb_info *,
		    void *);

/* ---- streams -------------------------------------------------------- */

static void
ups_free(struct h2ups *s)
{
	if (s == NULL)
		return;
	if (s->pipe != NULL) {
		evbuffer_remove_cb(tstream_input(s->pipe), pipe_in_cb, s);
		tstream_pipe_detach(s->pipe);
	}
	http_reqs_free(s->reqs);
	if (s->body != NULL)
		loop_evbuffer_wipe_free(s->body);	/* it may carry a credential */
	if (s->hdr != NULL)
		evbuffer_free(s->hdr);
	if (s->trailers != NULL)
		evbuffer_free(s->trailers);
	free(s);
}

/* The owner is told: no more of this answer comes. */
static void
ups_fail(struct h2ups *s)
{
	if (s->rs == UR_FAILED)
		return;
	s->rs = UR_FAILED;
	if (s->pipe != NULL)
		tstream_pipe_end(s->pipe, TSTREAM_ERROR | TSTREAM_READING);
	if (s->id > 0 && !s->closed)
		nghttp2_submit_rst_stream(s->u->ng, NGHTTP2_FLAG_NONE, s->id,
		    NGHTTP2_CANCEL);
}

static void
pipe_wake(void *arg)
{
	struct h2ups *s = arg;

	event_active(s->u->wake, 0, 1);
}

static void
pipe_gone(void *arg)
{
	struct h2ups *s = arg;

	evbuffer_remove_cb(tstream_input(s->pipe), pipe_in_cb, s);
	s->pipe = NULL;
	event_active(s->u->wake, 0, 1);
}

/* The owner read some of the answer: the window may open. */
static void
pipe_in_cb(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct h2ups *s = arg;

	if (info->n_deleted > 0)
		event_active(s->u->wake, 0, 1);
}

static void
ups_consume(struct h2ups *s)
{
	size_t left = s->pipe != NULL ?
	    evbuffer_get_length(tstream_input(s->pipe)) : 0, n;

	if (left >= s->unconsumed || s->closed || s->id <= 0)
		return;
	n = s->unconsumed - left;
	s->unconsumed = left;
	nghttp2_session_consume(s->u->ng, s->id, n);
}

/* The request's trailer section, if it has one. */
static int
trailers_add(void *arg, const uint8_t *p, size_t n)
{
	return h2_trailers_keep(&((struct h2ups *)arg)->trailers, p, n);
}

static ssize_t
body_read_cb(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
    uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct h2ups *s = src->ptr;
	int n;

	n = evbuffer_remove(s->body, buf, length);
	if (n < 0)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	if (evbuffer_get_length(s->body) == 0 && s->rq == UQ_DONE) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		/* Trailers end the stream instead. */
		if (h2_trailers_end(s->u->ng, s->id, s->trailers,
		    NGHTTP2_NV_FLAG_NO_INDEX, flags) != 0)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	} else if (n == 0) {
		s->deferred = 1;
		return NGHTTP2_ERR_DEFERRED;
	}
	if (n > 0)
		event_active(s->u->wake, 0, 1);	/* more may be taken */
	return n;
}

/* Not sent in HTTP/2: forbidden there, or made of the pseudo-headers. */
static int
not_for_h2(const char *name, size_t len)
{
	return http2_forbidden(name, len) || ascii_eq(name, len, "host") ||
	    ascii_eq(name, len, "http2-settings");
}

#define NV(n, nl, v, vl) (nghttp2_nv){ (uint8_t *)(n), (uint8_t *)(v), \
	(nl), (vl), NGHTTP2_NV_FLAG_NONE }

/* The request head: HEADERS, with a body to follow unless it has none. */
static int
ups_submit(struct h2ups *s, const struct http_head *h)
{
	nghttp2_nv nv[HTTP_MAX_HEADERS + 5];
	nghttp2_data_provider dp;
	const char *authority = NULL;
	char *lower = NULL, *p;
	size_t i, n = 0, alen = 0, total = 0;
	int grpc = 0, body;
	int32_t id;

	for (i = 0; i < h->nheaders; i++) {
		total += h->headers[i].name_len;
		if (ascii_eq(h->headers[i].name, h->headers[i].name_len,
		    "host")) {
			authority = h->headers[i].value;
			alen = h->headers[i].value_len;
		}
		if (ascii_eq(h->headers[i].name, h->headers[i].name_len,
		    "content-type") && http_grpc_type(h->headers[i].value,
		    h->headers[i].value_len))
			grpc = 1;
	}
	if (authority == NULL || (lower = malloc(total + 1)) == NULL) {
		free(lower);
		return -1;
	}
	nv[n++] = NV(":method", 7, h->method, strlen(h->method));
	nv[n++] = NV(":scheme", 7, "https", 5);
	nv[n++] = NV(":authority", 10, authority, alen);
	nv[n++] = NV(":path", 5, h->target, h->target_len);
	/* gRPC servers want it; HTTP/1.1 had no use for it. */
	if (grpc)
		nv[n++] = NV("te", 2, "trailers", 8);
	p = lower;
	for (i = 0; i < h->nheaders; i++) {
		const struct http_header *x = &h->headers[i];
		size_t k;

		if (not_for_h2(x->name, x->name_len))
			continue;
		for (k = 0; k < x->name_len; k++)
			p[k] = ascii_lower(x->name[k]);
		/*
		 * Never in the HPACK table: an injected value would stay in
		 * the session's memory as long as it lives.
		 */
		nv[n] = NV(p, x->name_len, x->value, x->value_len);
		nv[n++].flags = NGHTTP2_NV_FLAG_NO_INDEX;
		p += x->name_len;
	}
	body = h->chunked || h->content_length > 0;
	s->chunked = h->chunked;
	dechunk_init(&s->dc);
	dechunk_trailers(&s->dc, trailers_add);
	s->bodyless = strcmp(h->method, "HEAD") == 0;
	dp.source.ptr = s;
	dp.read_callback = body_read_cb;
	id = nghttp2_submit_request(s->u->ng, NULL, nv, n, body ? &dp : NULL,
	    s);
	free(lower);
	if (id < 0)
		return -1;
	s->id = id;
	s->rq = body ? UQ_BODY : UQ_DONE;
	return 0;
}

static int
body_add(void *arg, const uint8_t *p, size_t n)
{
	struct h2ups *s = arg;

	return evbuffer_add(s->body, p, n);
}

/* Request body bytes, in their HTTP/1.1 framing. */
static int
ups_body(struct h2ups *s, const uint8_t *p, size_t n)
{
	if (n == 0 || s->rq != UQ_BODY)
		return 0;
	if (s->chunked)
		return dechunk_feed(&s->dc, p, n, body_add, s);
	return evbuffer_add(s->body, p, n);
}

/* What the pipe's owner wrote: its request, as far as nghttp2 can take it. */
static void
ups_pump(struct h2ups *s)
{
	struct evbuffer *from = tstream_output(s->pipe);
	const struct http_head *h;
	const char *why;
	enum http_ev ev;
	size_t len, used, took = 0;
	uint8_t *data;

	while (s->rq != UQ_DONE && s->rs != UR_FAILED &&
	    (len = evbuffer_get_contiguous_space(from)) > 0 &&
	    evbuffer_get_length(s->body) < H2UP_BODY_HIGH) {
		data = evbuffer_pullup(from, (ssize_t)len);
		h = NULL;
		ev = http_reqs_feed(s->reqs, data, len, &used, &h, &why);
		if (ev == HTTP_EV_INVALID || ev == HTTP_EV_TUNNEL ||
		    (ev == HTTP_EV_HEAD && ups_submit(s, h) != 0) ||
		    ((ev == HTTP_EV_NEED_MORE || ev == HTTP_EV_END) &&
		    ups_body(s, data, used) != 0)) {
			log_debug("h2up", "a request cannot go: %s",
			    why != NULL ? why : "internal");
			ups_fail(s);
			break;
		}
		loop_evbuffer_wipe_drain(from, used);
		took += used;
		if (ev == HTTP_EV_END && s->rq == UQ_BODY)
			s->rq = UQ_DONE;
		if (ev == HTTP_EV_NEED_MORE && used == 0)
			break;
	}
	if (s->deferred && s->id > 0 && (evbuffer_get_length(s->body) > 0 ||
	    s->rq == UQ_DONE)) {
		s->deferred = 0;
		nghttp2_session_resume_data(s->u->ng, s->id);
	}
	if (took > 0)
		tstream_pipe_drained(s->pipe);
}

/* ---- the answer: nghttp2's callbacks record, the pipe gets HTTP/1.1 --- */

static struct h2ups *
ups_of(nghttp2_session *ng, int32_t id)
{
	return nghttp2_session_get_stream_user_data(ng, id);
}

static int
on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
    size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags,
    void *arg)
{
	struct h2up *u = arg;
	struct h2ups *s = ups_of(ng, f->hd.stream_id);
	unsigned st = 0;
	size_t i;

	if (s == NULL || (s->rs != UR_WAIT && s->rs != UR_BODY))
		return 0;
	if ((s->hsize += nlen + vlen + 4) > u->header_limit)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	if (s->rs == UR_BODY) {
		/* Trailers (gRPC's status): the trailer section of the body. */
		if (nlen > 0 && name[0] == ':')
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		goto line;
	}
	if (nlen == 7 && memcmp(name, ":status", 7) == 0) {
		for (i = 0; i < vlen && i < 3 && value[i] >= '0' &&
		    value[i] <= '9'; i++)
			st = st * 10 + (unsigned)(value[i] - '0');
		if (vlen != 3 || i != 3 || st < 100)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		s->status = st;
		return 0;
	}
	if (nlen > 0 && name[0] == ':')
		return 0;
	/* The body goes chunked: a length would contradict it. */
	if (nlen == 14 && memcmp(name, "content-length", 14) == 0 &&
	    !s->bodyless)
		return 0;
 line:
	if (evbuffer_add(s->hdr, name, nlen) != 0 ||
	    evbuffer_add(s->hdr, ": ", 2) != 0 ||
	    evbuffer_add(s->hdr, value, vlen) != 0 ||
	    evbuffer_add(s->hdr, "\r\n", 2) != 0)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	return 0;
}

/* The answer's head is whole: into the pipe as HTTP/1.1. */
static int
answer_head(struct h2ups *s, int end)
{
	struct evbuffer *in = tstream_input(s->pipe);
	int nobody = s->bodyless || s->status == 204 || s->status == 304;

	if (s->status / 100 == 1) {
		/* An interim answer: the final one follows. */
		evbuffer_drain(s->hdr, evbuffer_get_length(s->hdr));
		s->hsize = 0;
		return 0;
	}
	if (evbuffer_add_printf(in, "HTTP/1.1 %03u h2\r\n", s->status) < 0 ||
	    evbuffer_add_buffer(in, s->hdr) != 0 ||
	    evbuffer_add_printf(in, "%s\r\n", nobody ? "" :
	    "transfer-encoding: chunked\r\n") < 0)
		return -1;
	s->rs = UR_BODY;
	if (end || nobody) {
		if (!nobody && evbuffer_add(in, "0\r\n\r\n", 5) != 0)
			return -1;
		s->rs = UR_ENDED;
	}
	tstream_pipe_pushed(s->pipe);
	return 0;
}

static int
on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
	struct h2ups *s = f->hd.stream_id > 0 ?
	    ups_of(ng, f->hd.stream_id) : NULL;
	int end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;

	if (s == NULL || s->pipe == NULL || s->rs == UR_FAILED)
		return 0;
	if (f->hd.type == NGHTTP2_HEADERS && s->rs == UR_WAIT) {
		if (answer_head(s, end) != 0)
			ups_fail(s);
		return 0;
	}
	if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
	    end && s->rs == UR_BODY) {
		/* The last chunk, and the trailers if any came. */
		struct evbuffer *in = tstream_input(s->pipe);

		if (evbuffer_add(in, "0\r\n", 3) != 0 ||
		    evbuffer_add_buffer(in, s->hdr) != 0 ||
		    evbuffer_add(in, "\r\n", 2) != 0) {
			ups_fail(s);
			return 0;
		}
		s->rs = UR_ENDED;
		tstream_pipe_pushed(s->pipe);
	}
	return 0;
}

static int
on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id,
    const uint8_t *data, size_t len, void *arg)
{
	struct h2ups *s = ups_of(ng, id);
	struct evbuffer *in;
	char head[HTTP_CHUNK_HEAD_MAX];

	if (s == NULL || s->pipe == NULL || s->rs != UR_BODY) {
		nghttp2_session_consume(ng, id, len);
		return 0;
	}
	in = tstream_input(s->pipe);
	s->unconsumed += len;
	if (evbuffer_add(in, head, http_chunk_head(len, head)) != 0 ||
	    evbuffer_add(in, data, len) != 0 ||
	    evbuffer_add(in, "\r\n", 2) != 0)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	tstream_pipe_pushed(s->pipe);
	return 0;
}

static int
on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *arg)
{
	struct h2ups *s = ups_of(ng, id);

	if (s == NULL)
		return 0;
	s->closed = 1;
	if (s->rs != UR_ENDED)
		ups_fail(s);	/* a reset, or refused after a GOAWAY */
	return 0;
}

/* ---- the session ---------------------------------------------------- */

static void
reap_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2up_pool *p = arg;
	struct h2up *u;

	while ((u = p->dead) != NULL) {
		p->dead = u->next;
		if (u->ng != NULL)
			nghttp2_session_del(u->ng);
		tstream_free(u->ts);
		if (u->wake != NULL)
			event_free(u->wake);
		free(u);
	}
}

/*
 * The session ends: every pipe's owner gets an error, the streams go now,
 * the session on the next turn (a caller may be in one of its callbacks).
 */
static void
session_end(struct h2up *u)
{
	struct h2up **pp;
	struct h2ups *s;

	log_debug("h2up", "%s:%u: session ends", u->host, u->port);
	while ((s = u->streams) != NULL) {
		u->streams = s->next;
		ups_fail(s);
		ups_free(s);
	}
	u->nstreams = 0;
	for (pp = &u->p->live; *pp != NULL; pp = &(*pp)->next)
		if (*pp == u) {
			*pp = u->next;
			u->p->n--;
			break;
		}
	tstream_quiet(u->ts);
	event_del(u->wake);
	u->next = u->p->dead;
	u->p->dead = u;
	event_active(u->p->reap, 0, 1);
}

/* Streams both sides are done with go. */
static void
streams_step(struct h2up *u)
{
	struct h2ups **pp = &u->streams, *s;

	while ((s = *pp) != NULL) {
		if (s->pipe != NULL) {
			ups_consume(s);
			ups_pump(s);
		} else if (!s->closed && s->id > 0 && s->rs != UR_FAILED) {
			/* Its owner let go before the end: the stream goes. */
			s->rs = UR_FAILED;
			nghttp2_submit_rst_stream(u->ng, NGHTTP2_FLAG_NONE,
			    s->id, NGHTTP2_CANCEL);
		}
		if (s->pipe == NULL && s->unconsumed > 0) {
			/* No one reads what it held: the connection's window. */
			nghttp2_session_consume_connection(u->ng, s->unconsumed);
			s->unconsumed = 0;
		}
		if (s->pipe != NULL || (!s->closed && s->id > 0)) {
			pp = &s->next;
			continue;
		}
		*pp = s->next;
		u->nstreams--;
		ups_free(s);
	}
}

static void
session_step(struct h2up *u)
{
	struct evbuffer *in = tstream_input(u->ts);
	const uint8_t *data;
	ssize_t n;
	size_t len;

	while (!u->failed && (len = evbuffer_get_contiguous_space(in)) > 0) {
		data = evbuffer_pullup(in, (ssize_t)len);
		if ((n = nghttp2_session_mem_recv(u->ng, data, len)) < 0) {
			log_info("h2up", "%s:%u: %s", u->host, u->port,
			    nghttp2_strerror((int)n));
			u->failed = 1;
			break;
		}
		evbuffer_drain(in, (size_t)n);
	}
	streams_step(u);
	while (!u->failed && nghttp2_session_want_write(u->ng) &&
	    tstream_queued(u->ts) <= H2UP_HIGH) {
		if ((n = nghttp2_session_mem_send(u->ng, &data)) < 0) {
			u->failed = 1;
			break;
		}
		if (n == 0)
			break;
		evbuffer_add(tstream_output(u->ts), data, (size_t)n);
	}
	if (u->failed || (!nghttp2_session_want_read(u->ng) &&
	    !nghttp2_session_want_write(u->ng))) {
		session_end(u);
		return;
	}
	tstream_read(u->ts, tstream_queued(u->ts) <= H2UP_HIGH);
}

static void
wake_cb(evutil_socket_t fd, short what, void *arg)
{
	session_step(arg);
}

static void
ts_cb(struct tstream *ts, void *arg)
{
	session_step(arg);
}

static void
ts_event_cb(struct tstream *ts, short what, void *arg)
{
	struct h2up *u = arg;

	if ((what & TSTREAM_TIMEOUT) && u->nstreams > 0) {
		tstream_set_timeout(ts, u->idle_ms);	/* streams are under way */
		return;
	}
	u->failed = 1;		/* its end, an error, or idle */
	session_step(u);
}

/* The oldest session without a stream goes, to make room. */
static void
evict_idle(struct h2up_pool *p)
{
	struct h2up *u, *idle = NULL;

	for (u = p->live; u != NULL; u = u->next)
		if (u->nstreams == 0)
			idle = u;	/* the list is newest first */
	if (idle != NULL)
		session_end(idle);
}

static struct h2ups *
stream_new(struct h2up *u)
{
	struct h2ups *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->u = u;
	if ((s->reqs = http_reqs_new(u->header_limit)) == NULL ||
	    (s->body = evbuffer_new()) == NULL ||
	    (s->hdr = evbuffer_new()) == NULL ||
	    (s->pipe = tstream_pipe_new(u->p->base, pipe_wake, pipe_gone,
	    s)) == NULL ||
	    evbuffer_add_cb(tstream_input(s->pipe), pipe_in_cb, s) == NULL) {
		if (s->pipe != NULL) {
			tstream_pipe_detach(s->pipe);
			tstream_free(s->pipe);
			s->pipe = NULL;
		}
		ups_free(s);
		return NULL;
	}
	http_reqs_trailers(s->reqs, 1);	/* an HTTP/2 stream's, passed on */
	tstream_pipe_ssl(s->pipe, tstream_ssl(u->ts));
	tstream_start(s->pipe);
	s->next = u->streams;
	u->streams = s;
	u->nstreams++;
	return s;
}

static int
room(struct h2up *u)
{
	uint32_t max = nghttp2_session_get_remote_settings(u->ng,
	    NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);

	return !u->failed && nghttp2_session_check_request_allowed(u->ng) &&
	    u->nstreams < max && u->nstreams < H2UP_MAX_STREAMS;
}

struct tstream *
h2up_attach(struct h2up_pool *p, const struct sb_counter *owner,
    const char *host, uint16_t port, const uint8_t tls[UPOOL_TLS_LEN])
{
	struct h2up *u;
	struct h2ups *s;

	for (u = p->live; u != NULL; u = u->next)
		if (u->owner == owner && u->port == port &&
		    strcmp(u->host, host) == 0 &&
		    memcmp(u->tls, tls, UPOOL_TLS_LEN) == 0 && room(u))
			break;
	if (u == NULL || (s = stream_new(u)) == NULL)
		return NULL;
	tstream_set_timeout(u->ts, u->idle_ms);
	return s->pipe;
}

struct tstream *
h2up_adopt(struct h2up_pool *p, struct tstream *ts,
    const struct sb_counter *owner, const char *host, uint16_t port,
    const uint8_t tls[UPOOL_TLS_LEN], unsigned idle_ms, size_t header_limit)
{
	nghttp2_session_callbacks *cb = NULL;
	nghttp2_option *opt = NULL;
	struct h2up *u;
	struct h2ups *s;
	nghttp2_settings_entry set[] = {
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2UP_STREAM_WINDOW },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)header_limit },
	};

	if (p->n >= H2UP_MAX_SESSIONS)
		evict_idle(p);
	if ((u = calloc(1, sizeof(*u))) == NULL) {
		tstream_free(ts);
		return NULL;
	}
	u->p = p;
	u->ts = ts;
	u->owner = owner;
	str_copy(u->host, sizeof(u->host), host);
	u->port = port;
	memcpy(u->tls, tls, UPOOL_TLS_LEN);
	u->idle_ms = idle_ms;
	u->header_limit = header_limit;
	tstream_setcb(ts, ts_cb, ts_cb, ts_event_cb, u);
	if ((u->wake = event_new(p->base, -1, 0, wake_cb, u)) == NULL ||
	    nghttp2_session_callbacks_new(&cb) != 0 ||
	    nghttp2_option_new(&opt) != 0)
		goto fail;
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb,
	    on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb,
	    on_stream_close);
	nghttp2_option_set_no_auto_window_update(opt, 1);
	nghttp2_option_set_no_closed_streams(opt, 1);
	nghttp2_option_set_max_continuations(opt, 8);
	if (nghttp2_session_client_new2(&u->ng, cb, u, opt) != 0 ||
	    nghttp2_submit_settings(u->ng, NGHTTP2_FLAG_NONE, set,
	    sizeof(set) / sizeof(set[0])) != 0 ||
	    nghttp2_session_set_local_window_size(u->ng, NGHTTP2_FLAG_NONE, 0,
	    H2UP_CONN_WINDOW) != 0)
		goto fail;
	nghttp2_session_callbacks_del(cb);
	nghttp2_option_del(opt);
	cb = NULL;
	opt = NULL;
	u->next = p->live;
	p->live = u;
	p->n++;
	tstream_set_timeout(ts, idle_ms);
	if ((s = stream_new(u)) == NULL) {
		session_end(u);
		return NULL;
	}
	event_active(u->wake, 0, 1);	/* the preface and SETTINGS go */
	return s->pipe;
 fail:
	nghttp2_session_callbacks_del(cb);
	nghttp2_option_del(opt);
	if (u->ng != NULL)
		nghttp2_session_del(u->ng);
	if (u->wake != NULL)
		event_free(u->wake);
	tstream_quiet(ts);
	tstream_free(ts);
	free(u);
	return NULL;
}

struct h2up_pool *
h2up_pool_new(struct event_base *base)
{
	struct h2up_pool *p;

	if ((p = calloc(1, sizeof(*p))) == NULL)
		return NULL;
	p->base = base;
	if ((p->reap = event_new(base, -1, 0, reap_cb, p)) == NULL) {
		free(p);
		return NULL;
	}
	return p;
}

void
h2up_pool_free(struct h2up_pool *p)
{
	if (p == NULL)
		return;
	while (p->live != NULL)
		session_end(p->live);
	reap_cb(-1, 0, p);
	event_free(p->reap);
	free(p);
}

size_t
h2up_count(const struct h2up_pool *p, size_t *streams)
{
	const struct h2up *u;
	size_t n = 0;

	if (streams != NULL)
		*streams = 0;
	for (u = p->live; u != NULL; u = u->next) {
		n++;
		if (streams != NULL)
			*streams += u->nstreams;
	}
	return n;
}
