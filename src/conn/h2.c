/*
 * h2.c: HTTP/2 from the sandbox (see h2.h).  nghttp2 does the framing,
 * HPACK, flow control and the protocol's own checks (pseudo-headers,
 * connection-specific headers, content-length against DATA); this file
 * turns each stream into a request for an icpt of its own, hands its
 * answer to h2_answer.c, and watches for abuse.
 *
 * A stream's life: its head is collected (HEADERS and CONTINUATION),
 * then written as an HTTP/1.1 head into the pipe of a new icpt, with
 * "connection: close" so that icpt ends after the one answer; its DATA
 * follows (chunked when no content-length was given), and the window is
 * given back only as that icpt takes the bytes, so what a stream buffers
 * is bounded by the window we advertise.  The answer comes back through
 * the pipe (h2_answer.c).  The stream's memory goes once both nghttp2 and its icpt are done with
 * it, on a later loop turn.
 */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"
#include "parse/dechunk.h"
#include "parse/httphead.h"
#include "parse/httpwrite.h"
#include "conf/config.h"
#include "audit/arec.h"
#include "audit/audit.h"
#include "loop/loop.h"
#include "loop/state.h"
#include "loop/tstream.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/h2.h"
#include "conn/icpt.h"
#include "conn/icpt_int.h"

#include "conn/h2_int.h"

/* Streams whose icpt may be opening an upstream at once. */
#define H2_MAX_STARTING		8
/* The windows we advertise: what a stream, and all of them, may send ahead. */
#define H2_STREAM_WINDOW	(64u * 1024)
#define H2_CONN_WINDOW		(1024u * 1024)

/*
 * Abuse, as token buckets (burst, then so many a second): frames that
 * cost us work and carry no request.
 */
#define H2_CTRL_BURST		200	/* SETTINGS, PING, PRIORITY */
#define H2_CTRL_RATE		20
#define H2_RESET_BURST		50	/* RST_STREAM from the sandbox */
#define H2_RESET_RATE		10
#define H2_OWNRST_BURST		50	/* RST_STREAM we send (MadeYouReset) */
#define H2_OWNRST_RATE		10
#define H2_EMPTY_BURST		100	/* DATA without data nor END_STREAM */
#define H2_EMPTY_RATE		20

static void	stream_free(struct h2s *s);
static void	stream_gathered(struct h2s *s);

/* ---- abuse ---------------------------------------------------------- */

/* Takes a token: 0, or -1 when the bucket is empty. */
static int
bucket_take(struct h2_bucket *b, unsigned burst, unsigned rate)
{
	uint64_t now = mono_ms(), add;

	if (b->at == 0) {
		b->at = now;
		b->tokens = burst;
	}
	add = (now - b->at) * rate / 1000;
	if (add > 0) {
		b->tokens = add >= burst - b->tokens ? burst :
		    b->tokens + (unsigned)add;
		b->at = now;
	}
	if (b->tokens == 0)
		return -1;
	b->tokens--;
	return 0;
}

/*
 * The sandbox abuses the protocol: GOAWAY ENHANCE_YOUR_CALM, a record,
 * and the connection ends once the GOAWAY is out.
 */
static void
abuse(struct h2 *h, const char *kind)
{
	struct conn *c = h->ic->c;
	struct arec rec;

	if (h->abuse != NULL)
		return;
	h->abuse = kind;
	nghttp2_session_terminate_session(h->ng, NGHTTP2_ENHANCE_YOUR_CALM);
	log_warnx("h2", "sandbox %s, %s: %s: the connection ends "
	    "(ENHANCE_YOUR_CALM)", c->sb ? c->sb->id : "-", c->name, kind);
	arec_init(&rec);
	arec_str(&rec, "sandbox", c->sb ? c->sb->id : NULL);
	arec_str(&rec, "policy", c->policy_name);
	arec_str(&rec, "host", c->name);
	arec_str(&rec, "kind", kind);
	arec_int(&rec, "streams", h->nlive);
	audit_write_rec(c->l->audit, "h2_abuse", &rec);
	mtable_add(&c->l->metrics.conns, "h2-abuse", kind);
}

/* ---- streams -------------------------------------------------------- */

static struct h2s *
stream_of(struct h2 *h, int32_t id)
{
	return nghttp2_session_get_stream_user_data(h->ng, id);
}

/* Wakes the connection's step (from a stream's pipe, on the loop). */
static void
pipe_wake(void *arg)
{
	struct h2s *s = arg;

	icpt_step(s->h->ic);
}

/* Its icpt took bytes of its input: the step gives the window back. */
static void
pipe_in_cb(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct h2s *s = arg;

	if (info->n_deleted > 0)
		event_active(s->h->ic->wake, 0, 1);
}

/*
 * The window of the DATA its icpt has taken is given back: what is still
 * in the pipe (framing counted as data) keeps its share.
 */
static void
stream_consume(struct h2s *s)
{
	size_t left = evbuffer_get_length(tstream_input(s->pipe)), n;

	if (left >= s->unconsumed || s->closed)
		return;
	n = s->unconsumed - left;
	s->unconsumed = left;
	nghttp2_session_consume(s->h->ng, s->id, n);
}

/*
 * No one will read the DATA a stream still holds (its icpt ended, or the
 * stream did): its window is given back all the same, or the connection's
 * would shrink for good.  DATA that comes later is given back as it comes.
 */
static void
stream_giveback(struct h2s *s)
{
	size_t n = s->unconsumed;

	if (n == 0)
		return;
	s->unconsumed = 0;
	if (s->closed)
		nghttp2_session_consume_connection(s->h->ng, n);
	else
		nghttp2_session_consume(s->h->ng, s->id, n);
}

void
h2_stream_reset(struct h2s *s, uint32_t code)
{
	if (s->rs == H2R_RESET || s->rs == H2R_ENDED || s->closed)
		return;
	s->rs = H2R_RESET;
	nghttp2_submit_rst_stream(s->h->ng, NGHTTP2_FLAG_NONE, s->id, code);
}

/* Adds a field line "name: value" to b (the head's, or the trailers'). */
static int
head_line(struct evbuffer *b, const uint8_t *name, size_t nlen,
    const uint8_t *value, size_t vlen)
{
	if (evbuffer_add(b, name, nlen) != 0 ||
	    evbuffer_add(b, ": ", 2) != 0 ||
	    evbuffer_add(b, value, vlen) != 0 ||
	    evbuffer_add(b, "\r\n", 2) != 0)
		return -1;
	return 0;
}

/* Copies a pseudo-header's value into buf (cap bytes): -1 when too long. */
static int
pseudo_copy(char *buf, size_t cap, const uint8_t *v, size_t len)
{
	if (len >= cap)
		return -1;
	memcpy(buf, v, len);
	buf[len] = '\0';
	return 0;
}

/*
 * Streams whose icpt is about to open an upstream (not judged yet, or
 * connecting): a burst of streams must not become a burst of upstream
 * connections (one for each, before the first tells whether the upstream
 * speaks h2 and can carry them all).
 */
static unsigned
starting_count(const struct h2 *h)
{
	const struct h2s *s;
	unsigned n = 0;

	for (s = h->live; s != NULL; s = s->next)
		if (s->ic != NULL && !s->ic_over &&
		    ((s->ic->rs == RS_NONE && s->ic->rq == RQ_HEAD &&
		    s->ic->qn == 0) || s->ic->rs == RS_CONNECTING))
			n++;
	return n;
}

/* The count, made once a step (stream_run adds the ones it starts). */
static unsigned
starting(const struct h2 *h)
{
	return h->nstarting;
}

/*
 * One stream opens the session's first upstream alone: when it speaks h2,
 * the others are its streams (h2up.h) rather than connections of their
 * own.
 */
static unsigned
starting_max(const struct h2 *h)
{
	return h->upstream_seen ? H2_MAX_STARTING : 1;
}

void
h2_stream_upstream(struct h2s *s)
{
	if (s->h->upstream_seen)
		return;
	s->h->upstream_seen = 1;
	event_active(s->h->ic->wake, 0, 1);	/* the waiting streams start */
}

/*
 * A stream whose head is in its pipe gets its icpt, unless too many are
 * starting: it waits (its DATA, bounded by its window, waits in the pipe)
 * and the step starts it later.  0, or -1 when out of memory.
 */
static int
stream_run(struct h2s *s)
{
	if (s->ic != NULL || s->pipe == NULL || s->closed ||
	    starting(s->h) >= starting_max(s->h))
		return 0;
	if ((s->ic = icpt_stream_new(s->h->ic->c, s->pipe, s, s->id)) ==
	    NULL) {
		s->pipe = NULL;		/* freed with it */
		return -1;
	}
	s->h->nstarting++;
	tstream_pipe_pushed(s->pipe);
	return 0;
}

/*
 * The head is whole: written as an HTTP/1.1 head into the pipe of the
 * stream's own icpt.  end: END_STREAM came with it (no body).
 */
static int
stream_start(struct h2s *s, int end)
{
	struct h2 *h = s->h;
	struct conn *c = h->ic->c;
	struct evbuffer *in;
	const char *host = s->authority[0] ? s->authority : s->host;
	const char *target;

	if (s->method[0] == '\0' || (s->path == NULL &&
	    strcmp(s->method, "CONNECT") != 0))
		return -1;	/* nghttp2 checked: not reached */
	s->chunked = !end && !s->has_length;
	if ((s->pipe = tstream_pipe_new(c->l->base, pipe_wake, NULL, s)) == NULL)
		return -1;
	in = tstream_input(s->pipe);
	target = s->path != NULL ? s->path : host;
	if (evbuffer_add(in, s->method, strlen(s->method)) != 0 ||
	    evbuffer_add(in, " ", 1) != 0 ||
	    evbuffer_add(in, target, strlen(target)) != 0 ||
	    evbuffer_add(in, " HTTP/1.1\r\n", 11) != 0 ||
	    (host[0] != '\0' && (evbuffer_add(in, "host: ", 6) != 0 ||
	    evbuffer_add(in, host, strlen(host)) != 0 ||
	    evbuffer_add(in, "\r\n", 2) != 0)) ||
	    evbuffer_add_buffer(in, s->lines) != 0 ||
	    (s->cookie != NULL && evbuffer_get_length(s->cookie) > 0 &&
	    (evbuffer_add(in, "cookie: ", 8) != 0 ||
	    evbuffer_add_buffer(in, s->cookie) != 0 ||
	    evbuffer_add(in, "\r\n", 2) != 0)) ||
	    (s->chunked && evbuffer_add(in, "transfer-encoding: chunked\r\n",
	    28) != 0) ||
	    evbuffer_add(in, "connection: close\r\n\r\n", 21) != 0) {
		tstream_free(s->pipe);
		s->pipe = NULL;
		return -1;
	}
	if ((s->chunked && (s->gather = evbuffer_new()) == NULL) ||
	    evbuffer_add_cb(in, pipe_in_cb, s) == NULL) {
		tstream_free(s->pipe);
		s->pipe = NULL;
		return -1;
	}
	/* The head is in the pipe: what held it goes. */
	evbuffer_free(s->lines);
	if (s->cookie != NULL)
		evbuffer_free(s->cookie);
	s->lines = s->cookie = NULL;
	free(s->path);
	s->path = NULL;
	s->rq = end ? H2Q_ENDED : H2Q_BODY;
	/* Its icpt starts now, or once fewer streams open upstreams. */
	return stream_run(s);
}

/* END_STREAM from the sandbox: the body is whole. */
static void
stream_req_end(struct h2s *s)
{
	struct evbuffer *in;

	if (s->rq != H2Q_BODY)
		return;
	s->rq = H2Q_ENDED;
	if (s->chunked) {
		stream_gathered(s);
		in = tstream_input(s->pipe);
		evbuffer_add(in, "0\r\n", 3);
		if (s->rtrailers != NULL)
			evbuffer_add_buffer(in, s->rtrailers);
		evbuffer_add(in, "\r\n", 2);
	}
	tstream_pipe_pushed(s->pipe);
}

/* ---- nghttp2's callbacks: they record, the step acts ----------------- */

static int
on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
	struct h2 *h = arg;
	struct h2s *s;

	if (f->hd.type != NGHTTP2_HEADERS ||
	    f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;	/* trailers: on_header reads them */
	if (h->closed || h->nlive >= H2_MAX_STREAMS)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;	/* RST_STREAM */
	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->lines = evbuffer_new()) == NULL ||
	    (s->out = evbuffer_new()) == NULL) {
		stream_free(s);
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	s->h = h;
	s->id = f->hd.stream_id;
	s->born = mono_ms();
	s->next = h->live;
	h->live = s;
	if (h->nlive++ == 0)
		conn_arm_timer(h->ic->c, 1000);	/* h2_timer watches the streams */
	nghttp2_session_set_stream_user_data(ng, s->id, s);
	return 0;
}

/*
 * A field of the request's trailers (nghttp2 checked they end the
 * stream): the trailer section of its chunked body, as gRPC metadata
 * may need.  A body framed by its length has none in HTTP/1.1: they go,
 * as do the fields no trailer section carries (http_trailer_dropped).
 */
static int
req_trailer(struct h2s *s, const uint8_t *name, size_t nlen,
    const uint8_t *value, size_t vlen)
{
	if (!s->chunked || http_trailer_dropped((const char *)name, nlen))
		return 0;
	if ((s->rtrailers == NULL &&
	    (s->rtrailers = evbuffer_new()) == NULL) ||
	    head_line(s->rtrailers, name, nlen, value, vlen) != 0)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	return 0;
}

static int
on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
    size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags,
    void *arg)
{
	struct h2 *h = arg;
	struct h2s *s = stream_of(h, f->hd.stream_id);
	size_t limit = h->ic->c->l->cfg->limits.header_bytes;

	if (s == NULL)
		return 0;
	s->hsize += nlen + vlen + 32;
	if (s->hsize > limit) {
		/* More than SETTINGS_MAX_HEADER_LIST_SIZE said: an HPACK bomb. */
		abuse(h, "header-list-too-large");
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	if (s->rq == H2Q_BODY)
		return req_trailer(s, name, nlen, value, vlen);
	if (s->rq != H2Q_HEAD)
		return 0;
	if (nlen > 0 && name[0] == ':') {
		if (nlen == 7 && memcmp(name, ":method", 7) == 0)
			return pseudo_copy(s->method, sizeof(s->method), value,
			    vlen) == 0 ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		if (nlen == 10 && memcmp(name, ":authority", 10) == 0)
			return pseudo_copy(s->authority, sizeof(s->authority),
			    value, vlen) == 0 ? 0 :
			    NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		if (nlen == 5 && memcmp(name, ":path", 5) == 0) {
			if (vlen > HTTP_MAX_TARGET || s->path != NULL ||
			    (s->path = malloc(vlen + 1)) == NULL)
				return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
			memcpy(s->path, value, vlen);
			s->path[vlen] = '\0';
		}
		return 0;	/* :scheme is https (TLS); nghttp2 checked it */
	}
	if (nlen == 4 && memcmp(name, "host", 4) == 0)
		return pseudo_copy(s->host, sizeof(s->host), value, vlen) == 0 ?
		    0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	if (nlen == 2 && memcmp(name, "te", 2) == 0)
		return 0;	/* "trailers" alone (nghttp2): HTTP/1.1 needs none */
	if (nlen == 6 && memcmp(name, "cookie", 6) == 0) {
		/* Crumbs are joined again (RFC 9113 8.2.3). */
		if ((s->cookie == NULL &&
		    (s->cookie = evbuffer_new()) == NULL) ||
		    (evbuffer_get_length(s->cookie) > 0 &&
		    evbuffer_add(s->cookie, "; ", 2) != 0) ||
		    evbuffer_add(s->cookie, value, vlen) != 0)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		return 0;
	}
	if (nlen == 14 && memcmp(name, "content-length", 14) == 0)
		s->has_length = 1;
	if (nlen == 12 && memcmp(name, "content-type", 12) == 0)
		s->grpc = http_grpc_type((const char *)value, vlen);
	return head_line(s->lines, name, nlen, value, vlen) == 0 ? 0 :
	    NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

static int
on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id,
    const uint8_t *data, size_t len, void *arg)
{
	struct h2 *h = arg;
	struct h2s *s = stream_of(h, id);
	struct evbuffer *in;

	if (s == NULL || s->rq != H2Q_BODY || s->ic_over || s->pipe == NULL) {
		/* No one reads it: its window is given back at once. */
		nghttp2_session_consume(ng, id, len);
		return 0;
	}
	s->unconsumed += len;
	/*
	 * Chunked: gathered, and framed as one chunk per step, so frames of
	 * a byte each cost the pipe no more than their bytes.
	 */
	in = s->chunked ? s->gather : tstream_input(s->pipe);
	if (evbuffer_add(in, data, len) != 0)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	if (!s->chunked)
		tstream_pipe_pushed(s->pipe);
	return 0;
}

/* The DATA gathered since the last step, as one chunk into the pipe. */
static void
stream_gathered(struct h2s *s)
{
	struct evbuffer *in = tstream_input(s->pipe);
	size_t n = evbuffer_get_length(s->gather);
	char head[HTTP_CHUNK_HEAD_MAX];

	if (n == 0)
		return;
	evbuffer_add(in, head, http_chunk_head(n, head));
	evbuffer_add_buffer(in, s->gather);
	evbuffer_add(in, "\r\n", 2);
	tstream_pipe_pushed(s->pipe);
}

static int
on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
	struct h2 *h = arg;
	struct h2s *s = f->hd.stream_id ? stream_of(h, f->hd.stream_id) : NULL;
	int end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;

	switch (f->hd.type) {
	case NGHTTP2_HEADERS:
		if (s == NULL)
			return 0;
		if (s->rq == H2Q_HEAD && stream_start(s, end) != 0)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		if (end)
			stream_req_end(s);
		return 0;
	case NGHTTP2_DATA:
		if (f->hd.length == 0 && !end &&
		    bucket_take(&h->empty, H2_EMPTY_BURST, H2_EMPTY_RATE) != 0)
			abuse(h, "empty-frame-flood");
		if (s != NULL && end)
			stream_req_end(s);
		return 0;
	case NGHTTP2_RST_STREAM:
		if (bucket_take(&h->resets, H2_RESET_BURST, H2_RESET_RATE) != 0)
			abuse(h, "rapid-reset");
		return 0;
	case NGHTTP2_SETTINGS:
	case NGHTTP2_PING:
	case NGHTTP2_PRIORITY:
		if (bucket_take(&h->ctrl, H2_CTRL_BURST, H2_CTRL_RATE) != 0)
			abuse(h, f->hd.type == NGHTTP2_PING ? "ping-flood" :
			    f->hd.type == NGHTTP2_SETTINGS ? "settings-flood" :
			    "priority-flood");
		return 0;
	default:
		return 0;
	}
}

/* Every reset we send counts: a client can make us send them (MadeYouReset). */
static int
on_frame_send(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
	struct h2 *h = arg;

	if (f->hd.type == NGHTTP2_RST_STREAM &&
	    bucket_take(&h->ownrst, H2_OWNRST_BURST, H2_OWNRST_RATE) != 0)
		abuse(h, "made-to-reset");
	return 0;
}

static int
on_invalid_frame(nghttp2_session *ng, const nghttp2_frame *f, int err,
    void *arg)
{
	struct h2 *h = arg;

	/* A stream error follows: a reset we are made to send. */
	if (bucket_take(&h->ownrst, H2_OWNRST_BURST, H2_OWNRST_RATE) != 0)
		abuse(h, "made-to-reset");
	return 0;
}

static int
on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *arg)
{
	struct h2 *h = arg;
	struct h2s *s = stream_of(h, id);

	if (s == NULL)
		return 0;
	s->closed = 1;
	if (s->rs < H2R_ENDED)
		s->rs = H2R_RESET;
	/*
	 * Its icpt learns on the loop (the end of a whole answer, or a
	 * reset); the step lets the stream go.
	 */
	if (s->pipe != NULL && !s->ic_over)
		tstream_pipe_end(s->pipe, s->rs == H2R_ENDED ? TSTREAM_EOF :
		    TSTREAM_ERROR | TSTREAM_READING);
	icpt_step(h->ic);
	return 0;
}

/* ---- the session ---------------------------------------------------- */

static void
reap_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2 *h = arg;
	struct h2s *s;

	while ((s = h->dead) != NULL) {
		h->dead = s->next;
		stream_free(s);
	}
}

static void
stream_free(struct h2s *s)
{
	if (s == NULL)
		return;
	icpt_free(s->ic);	/* and its pipe */
	if (s->ic == NULL)
		tstream_free(s->pipe);
	if (s->lines != NULL)
		evbuffer_free(s->lines);
	if (s->cookie != NULL)
		evbuffer_free(s->cookie);
	if (s->out != NULL) {
		if (s->h != NULL)
			s->h->out -= evbuffer_get_length(s->out);
		evbuffer_free(s->out);
	}
	if (s->trailers != NULL)
		evbuffer_free(s->trailers);
	if (s->rtrailers != NULL)
		evbuffer_free(s->rtrailers);
	if (s->gather != NULL)
		evbuffer_free(s->gather);
	free(s->path);
	free(s);
}

/*
 * A stream nghttp2 and its icpt are both done with leaves the live list:
 * its icpt is closed now, its memory goes on the next turn.
 */
static void
streams_step(struct h2 *h)
{
	struct h2s **pp = &h->live, *s, *oldest;

	/* Waiting streams start, the oldest first (the list is newest first). */
	while (starting(h) < starting_max(h)) {
		oldest = NULL;
		for (s = h->live; s != NULL; s = s->next)
			if (s->ic == NULL && s->pipe != NULL && !s->closed)
				oldest = s;
		if (oldest == NULL)
			break;
		if (stream_run(oldest) != 0) {
			h2_stream_reset(oldest, NGHTTP2_INTERNAL_ERROR);
			break;
		}
	}

	while ((s = *pp) != NULL) {
		if (s->gather != NULL && s->pipe != NULL)
			stream_gathered(s);
		if (s->ic != NULL && !s->ic_over) {
			stream_consume(s);
			h2_answer_pump(s);
		}
		if (s->ic_over && s->rs < H2R_ENDED)
			h2_stream_reset(s, NGHTTP2_INTERNAL_ERROR);	/* cut short */
		if (s->ic_over || s->closed)
			stream_giveback(s);
		if (!s->closed || (s->ic != NULL && !s->ic_over)) {
			pp = &s->next;
			continue;
		}
		*pp = s->next;
		h->nlive--;
		if (s->ic != NULL)
			icpt_close(s->ic);
		s->next = h->dead;
		h->dead = s;
		event_active(h->reap, 0, 1);
	}
}

void
h2_stream_over(struct h2s *s, const char *reason)
{
	if (s->ic_over)
		return;
	log_debug("h2", "stream %d over: %s", s->id, reason);
	s->ic_over = 1;
	/* What it answered is still in its pipe: taken before it goes. */
	if (s->rs < H2R_ENDED)
		h2_answer_pump(s);
	event_active(s->h->ic->wake, 0, 1);
}

void
h2_step(struct h2 *h)
{
	struct icpt *ic = h->ic;
	struct evbuffer *in = tstream_input(ic->down);
	struct evbuffer *out = tstream_output(ic->down);
	const uint8_t *data;
	ssize_t n;
	size_t len;

	h->nstarting = starting_count(h);
	while ((len = evbuffer_get_contiguous_space(in)) > 0 &&
	    nghttp2_session_want_read(h->ng)) {
		data = evbuffer_pullup(in, (ssize_t)len);
		n = nghttp2_session_mem_recv(h->ng, data, len);
		if (n < 0) {
			log_debug("h2", "%p: %s", (void *)ic->c,
			    nghttp2_strerror((int)n));
			if (n == NGHTTP2_ERR_FLOODED)
				abuse(h, "flood");
			else if (n == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS)
				abuse(h, "continuation-flood");
			else if (n == NGHTTP2_ERR_NOMEM) {
				icpt_end(ic, "out-of-memory");
				return;
			}
			evbuffer_drain(in, evbuffer_get_length(in));
			if (nghttp2_is_fatal((int)n) && h->abuse == NULL) {
				/* The session is unusable: what is queued goes. */
				icpt_finish(ic);
				return;
			}
			break;
		}
		ic->from_sandbox += (size_t)n;
		evbuffer_drain(in, (size_t)n);
	}
	if (evbuffer_get_length(in) > 0 && !nghttp2_session_want_read(h->ng))
		evbuffer_drain(in, evbuffer_get_length(in));
	streams_step(h);
	while (nghttp2_session_want_write(h->ng) &&
	    icpt_down_queued(ic) <= ic->high) {
		n = nghttp2_session_mem_send(h->ng, &data);
		if (n < 0) {
			icpt_end(ic, "internal");
			return;
		}
		if (n == 0)
			break;
		evbuffer_add(out, data, (size_t)n);
	}
	if (!nghttp2_session_want_read(h->ng) &&
	    !nghttp2_session_want_write(h->ng))
		icpt_finish(ic);	/* GOAWAY is out: what is queued goes, then the end */
}

int
h2_reads(const struct h2 *h)
{
	return nghttp2_session_want_read(h->ng) &&
	    nghttp2_session_get_outbound_queue_size(h->ng) < 64;
}

void
h2_timer(struct h2 *h, uint64_t now)
{
	struct conn *c = h->ic->c;
	struct h2s *s;

	for (s = h->live; s != NULL; s = s->next) {
		if (s->ic != NULL && !s->ic_over)
			icpt_timer_ic(s->ic, now);
		else if (s->ic == NULL && !s->closed && (s->rq == H2Q_HEAD ?
		    now - s->born >= c->l->cfg->timeouts.handshake :
		    now - s->born >= c->l->cfg->timeouts.idle))
			/* A head never finished, or a wait for a start too long. */
			h2_stream_reset(s, s->rq == H2Q_HEAD ? NGHTTP2_CANCEL :
			    NGHTTP2_REFUSED_STREAM);
	}
	if (h->nlive == 0 && now - c->last_active >= c->l->cfg->timeouts.idle)
		nghttp2_session_terminate_session(h->ng, NGHTTP2_NO_ERROR);
	conn_arm_timer(c, h->nlive > 0 ? 1000 : conn_next_wake(c, now));
	icpt_step(h->ic);
}

struct h2 *
h2_new(struct icpt *ic)
{
	nghttp2_session_callbacks *cb = NULL;
	nghttp2_option *opt = NULL;
	struct h2 *h;
	nghttp2_settings_entry set[] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, H2_MAX_STREAMS },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
		    ic->c->l->cfg->limits.header_bytes },
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
	};

	if ((h = calloc(1, sizeof(*h))) == NULL)
		return NULL;
	h->ic = ic;
	if ((h->reap = event_new(ic->c->l->base, -1, 0, reap_cb, h)) == NULL ||
	    nghttp2_session_callbacks_new(&cb) != 0 ||
	    nghttp2_option_new(&opt) != 0)
		goto fail;
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb,
	    on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb,
	    on_data_chunk);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
	nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb,
	    on_invalid_frame);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb,
	    on_stream_close);
	/* The window opens as a stream's icpt takes its bytes. */
	nghttp2_option_set_no_auto_window_update(opt, 1);
	nghttp2_option_set_no_closed_streams(opt, 1);
	nghttp2_option_set_max_settings(opt, 16);
	nghttp2_option_set_max_outbound_ack(opt, 1000);
	nghttp2_option_set_max_continuations(opt, 8);
	nghttp2_option_set_stream_reset_rate_limit(opt, 2 * H2_RESET_BURST,
	    2 * H2_RESET_RATE);
	if (nghttp2_session_server_new2(&h->ng, cb, h, opt) != 0 ||
	    nghttp2_submit_settings(h->ng, NGHTTP2_FLAG_NONE, set,
	    sizeof(set) / sizeof(set[0])) != 0 ||
	    nghttp2_session_set_local_window_size(h->ng, NGHTTP2_FLAG_NONE, 0,
	    H2_CONN_WINDOW) != 0)
		goto fail;
	nghttp2_session_callbacks_del(cb);
	nghttp2_option_del(opt);
	return h;
 fail:
	nghttp2_session_callbacks_del(cb);
	nghttp2_option_del(opt);
	h2_free(h);
	return NULL;
}

void
h2_audit_durable(struct h2 *h, uint64_t durable, int failed)
{
	struct h2s *s;

	for (s = h->live; s != NULL; s = s->next)
		if (s->ic != NULL && !s->ic_over)
			icpt_audit_durable(s->ic, durable, failed);
}

void
h2_drain(struct h2 *h)
{
	if (h->closed || h->draining || h->abuse != NULL)
		return;
	h->draining = 1;
	log_debug("h2", "%p: draining: GOAWAY", (void *)h->ic->c);
	if (nghttp2_submit_goaway(h->ng, NGHTTP2_FLAG_NONE,
	    nghttp2_session_get_last_proc_stream_id(h->ng), NGHTTP2_NO_ERROR,
	    NULL, 0) != 0) {
		icpt_finish(h->ic);
		return;
	}
	event_active(h->ic->wake, 0, 1);	/* the step sends it */
}

void
h2_close(struct h2 *h)
{
	struct h2s *s;

	if (h == NULL || h->closed)
		return;
	h->closed = 1;
	for (s = h->live; s != NULL; s = s->next)
		if (s->ic != NULL)
			icpt_close(s->ic);	/* an unanswered request gets its record */
}

void
h2_free(struct h2 *h)
{
	struct h2s *s;

	if (h == NULL)
		return;
	if (h->ng != NULL)
		nghttp2_session_del(h->ng);
	while ((s = h->live) != NULL) {
		h->live = s->next;
		stream_free(s);
	}
	reap_cb(-1, 0, h);
	if (h->reap != NULL)
		event_free(h->reap);
	free(h);
}
