/*
 * h2_answer.c: a stream's answer, as its icpt wrote it into the pipe
 * (HTTP/1.1, read back with the strict response parser), turned into
 * HEADERS, DATA and trailers for the sandbox; sluice's own refusal of a
 * gRPC call as a status it understands.
 */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <nghttp2/nghttp2.h>

#include "util/ascii.h"
#include "parse/dechunk.h"
#include "parse/httphead.h"
#include "parse/httpwrite.h"
#include "conf/config.h"
#include "loop/h2fields.h"
#include "loop/loop.h"
#include "loop/tstream.h"
#include "conn/conn.h"
#include "conn/h2.h"
#include "conn/h2_int.h"
#include "conn/icpt_int.h"

/*
 * The answer's trailer section, if it has one (gRPC's status is there):
 * most answers have none.
 */
static int
trailers_add(void *arg, const uint8_t *p, size_t n)
{
	return h2_trailers_keep(&((struct h2s *)arg)->trailers, p, n);
}

static ssize_t
data_read_cb(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
    uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct h2s *s = src->ptr;
	struct h2 *h = arg;
	int n;

	n = evbuffer_remove(s->out, buf, length);
	if (n < 0)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	h->out -= (size_t)n;
	if (evbuffer_get_length(s->out) == 0 && s->rs == H2R_ENDED) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		/* Trailers end the stream instead (gRPC's status is there). */
		if (h2_trailers_end(ng, s->id, s->trailers,
		    NGHTTP2_NV_FLAG_NONE, flags) != 0)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	} else if (n == 0) {
		s->deferred = 1;
		return NGHTTP2_ERR_DEFERRED;
	}
	if (n > 0)
		icpt_step(h->ic);	/* more may be taken from the pipe */
	return n;
}

/* The gRPC status for sluice's own answer of status (grpc/status.h codes). */
static const char *
grpc_code(int status)
{
	switch (status) {
	case 401: case 403:
		return "7";	/* PERMISSION_DENIED */
	case 429:
		return "8";	/* RESOURCE_EXHAUSTED */
	case 421: case 502: case 503: case 504:
		return "14";	/* UNAVAILABLE */
	case 400: case 411: case 413: case 431:
		return "3";	/* INVALID_ARGUMENT */
	default:
		return "13";	/* INTERNAL */
	}
}

#define NV(n, v, vl) { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vl), \
	NGHTTP2_NV_FLAG_NONE }

/*
 * sluice refused a gRPC call: the client gets a status it understands, in
 * a trailers-only answer, and the JSON body is dropped.
 */
static int
answer_grpc(struct h2s *s)
{
	char msg[160];
	const char *code = grpc_code(s->ic->own_answer);
	int n;

	n = snprintf(msg, sizeof(msg), "sluice: %s (%s)",
	    s->ic->own_answer == 403 ? "denied by the sandbox's egress policy" :
	    "refused", s->ic->own_reason ? s->ic->own_reason : "refused");
	if (n < 0 || (size_t)n >= sizeof(msg))
		n = (int)strlen(msg);
	/* Every byte of msg is printable ASCII but '%': percent-encoding needs none. */
	nghttp2_nv nv[] = {
		NV(":status", "200", 3),
		NV("content-type", "application/grpc", 16),
		NV("grpc-status", code, strlen(code)),
		NV("grpc-message", msg, (size_t)n),
	};
	s->rs = H2R_DROP;
	return nghttp2_submit_response(s->h->ng, s->id, nv, 4, NULL);
}

#define DIGIT(c)	((c) >= '0' && (c) <= '9')

/* What a stream's answer head says of its body (its framing). */
static void
answer_framing(struct h2s *s, unsigned status, int chunked, int has_length,
    uint64_t length)
{
	if (strcmp(s->method, "HEAD") == 0 || status == 204 || status == 304) {
		s->rs = H2R_ENDED;		/* none, whatever it says */
		return;
	}
	if (chunked) {
		s->frame = H2F_CHUNKED;
		dechunk_init(&s->dc);
		dechunk_trailers(&s->dc, trailers_add);
	} else if (has_length) {
		s->frame = H2F_LENGTH;
		s->left = length;
		if (length == 0)
			s->rs = H2R_ENDED;
	} else
		s->frame = H2F_CLOSE;	/* until its icpt closes the pipe */
}

/*
 * The head p[0..len) (through its empty line) as the stream's icpt wrote
 * it into the pipe: a head its strict parser read, re-written, or one of
 * sluice's own.  Read back by its lines alone: HEADERS, names in lower
 * case, what HTTP/2 forbids gone, its framing noted.  An interim one
 * (1xx: 100 Continue, 103) goes as HEADERS of its own before the final
 * one.  0, or -1.
 */
static int
answer_head(struct h2s *s, const char *p, size_t len)
{
	nghttp2_nv nv[HTTP_MAX_HEADERS + 1];
	nghttp2_data_provider dp;
	const char *end = p + len, *eol, *colon, *v;
	char small[1024], *names = small, *o;
	size_t n = 0, nlen, vlen;
	unsigned status;
	uint64_t length = 0;
	int chunked = 0, has_length = 0, interim, r;

	if (len < 14 || memcmp(p, "HTTP/1.", 7) != 0 || p[8] != ' ' ||
	    !DIGIT(p[9]) || !DIGIT(p[10]) || !DIGIT(p[11]))
		return -1;
	status = (unsigned)(p[9] - '0') * 100 + (unsigned)(p[10] - '0') * 10 +
	    (unsigned)(p[11] - '0');
	if (status < 100 || status == 101)
		return -1;		/* no tunnel in a stream */
	interim = status / 100 == 1;
	/* Names in lower case: no longer than the head, mostly on the stack. */
	if (len > sizeof(small) && (names = malloc(len)) == NULL)
		return -1;
	o = names;
	memcpy(o, p + 9, 3);
	nv[n++] = (nghttp2_nv)NV(":status", o, 3);
	o += 3;
	for (p = (const char *)memchr(p, '\n', len) + 1; p < end; p = eol + 1) {
		if ((eol = memchr(p, '\n', (size_t)(end - p))) == NULL ||
		    eol == p || eol[-1] != '\r')
			goto bad;
		if (eol - 1 == p)
			break;			/* the empty line */
		if ((colon = memchr(p, ':', (size_t)(eol - 1 - p))) == NULL)
			goto bad;
		nlen = (size_t)(colon - p);
		for (v = colon + 1; v < eol - 1 && (*v == ' ' || *v == '\t'); v++)
			;
		for (vlen = (size_t)(eol - 1 - v); vlen > 0 &&
		    (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'); vlen--)
			;
		if (http_name_lower(p, nlen, o) != 0)	/* as a redaction may leave it */
			continue;
		if (ascii_eq(o, nlen, "transfer-encoding")) {
			chunked = 1;	/* its parser let chunked alone frame */
			continue;
		}
		if (ascii_eq(o, nlen, "content-length")) {
			if (http_parse_length(v, vlen, &length) != 0)
				goto bad;
			has_length = 1;
			/* None in a 1xx or 204 (RFC 9110 8.6). */
			if (interim || status == 204)
				continue;
		}
		if (http2_forbidden(o, nlen))
			continue;
		if (n == HTTP_MAX_HEADERS + 1)
			goto bad;
		nv[n].name = (uint8_t *)o;
		nv[n].namelen = nlen;
		nv[n].value = (uint8_t *)v;
		nv[n].valuelen = vlen;
		nv[n++].flags = NGHTTP2_NV_FLAG_NONE;
		o += nlen;
	}
	if (interim) {
		r = nghttp2_submit_headers(s->h->ng, NGHTTP2_FLAG_NONE, s->id,
		    NULL, nv, n, NULL);
		r = r < 0 ? r : 0;
	} else if (s->ic->own_answer != 0 && s->grpc) {
		/* Its body, read by its framing, is dropped. */
		r = answer_grpc(s);
		answer_framing(s, status, chunked, has_length, length);
	} else {
		s->rs = H2R_BODY;
		answer_framing(s, status, chunked, has_length, length);
		dp.source.ptr = s;
		dp.read_callback = data_read_cb;
		r = nghttp2_submit_response(s->h->ng, s->id, nv, n, &dp);
	}
	if (names != small)
		free(names);
	return r;
 bad:
	if (names != small)
		free(names);
	return -1;
}

static int
out_add(void *arg, const uint8_t *p, size_t n)
{
	struct h2s *s = arg;

	if (evbuffer_add(s->out, p, n) != 0)
		return -1;
	s->h->out += n;
	return 0;
}

static int
drop_data(void *arg, const uint8_t *p, size_t n)
{
	return 0;
}

/* Body bytes of the answer in its framing (dropped once answered). */
static int
answer_body(struct h2s *s, const uint8_t *p, size_t n)
{
	dechunk_cb take = s->rs == H2R_BODY ? out_add : drop_data;

	switch (s->frame) {
	case H2F_CHUNKED:
		if (dechunk_feed(&s->dc, p, n, take, s) != 0)
			return -1;
		if (dechunk_ended(&s->dc))
			s->rs = H2R_ENDED;
		return 0;
	case H2F_LENGTH:
		if (take(s, p, n) != 0)
			return -1;
		if ((s->left -= n) == 0)	/* n is at most left */
			s->rs = H2R_ENDED;
		return 0;
	case H2F_CLOSE:
		break;
	}
	return take(s, p, n);
}

/* nghttp2 waits for body bytes that are there now. */
static void
answer_resume(struct h2s *s)
{
	if (s->deferred && (evbuffer_get_length(s->out) > 0 ||
	    s->rs == H2R_ENDED)) {
		s->deferred = 0;
		nghttp2_session_resume_data(s->h->ng, s->id);
	}
}

/* The length of the head at the front of from, through its empty line: 0 while partial. */
static size_t
head_length(struct evbuffer *from)
{
	struct evbuffer_ptr at = evbuffer_search(from, "\r\n\r\n", 4, NULL);

	return at.pos < 0 ? 0 : (size_t)at.pos + 4;
}

void
h2_answer_pump(struct h2s *s)
{
	struct h2 *h = s->h;
	struct evbuffer *from = tstream_output(s->pipe);
	size_t len, took = 0, limit = h->ic->c->l->cfg->limits.header_bytes;
	uint8_t *data;

	while (s->rs < H2R_ENDED && evbuffer_get_length(s->out) < H2_STREAM_OUT &&
	    h->out < H2_CONN_OUT) {
		if (s->rs == H2R_WAIT) {
			/* Its icpt bounds a head: past that, it is not one. */
			if ((len = head_length(from)) == 0 &&
			    evbuffer_get_length(from) > 2 * limit + 1024) {
				h2_stream_reset(s, NGHTTP2_INTERNAL_ERROR);
				break;
			}
			if (len == 0)
				break;
			data = evbuffer_pullup(from, (ssize_t)len);
			if (data == NULL ||
			    answer_head(s, (const char *)data, len) != 0) {
				h2_stream_reset(s, NGHTTP2_INTERNAL_ERROR);
				break;
			}
		} else {
			if ((len = evbuffer_get_contiguous_space(from)) == 0) {
				/* Until the end: its icpt closed the pipe. */
				if (s->frame == H2F_CLOSE &&
				    tstream_pipe_closing(s->pipe))
					s->rs = H2R_ENDED;
				break;
			}
			if (s->frame == H2F_LENGTH && len > s->left)
				len = (size_t)s->left;
			data = evbuffer_pullup(from, (ssize_t)len);
			if (answer_body(s, data, len) != 0) {
				h2_stream_reset(s, NGHTTP2_INTERNAL_ERROR);
				break;
			}
		}
		evbuffer_drain(from, len);
		took += len;
	}
	if (s->rs == H2R_RESET || s->rs == H2R_ENDED)
		evbuffer_drain(from, evbuffer_get_length(from));
	answer_resume(s);
	if (took > 0 || tstream_pipe_closing(s->pipe))
		tstream_pipe_drained(s->pipe);
}
