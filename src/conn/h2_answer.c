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
#include <strings.h>

#include <event2/buffer.h>
#include <nghttp2/nghttp2.h>

#include "parse/dechunk.h"
#include "parse/httphead.h"
#include "parse/httpresp.h"
#include "parse/httpwrite.h"
#include "loop/tstream.h"
#include "conn/conn.h"
#include "conn/h2.h"
#include "conn/h2_int.h"
#include "conn/icpt_int.h"

static int
trailers_add(void *arg, const uint8_t *p, size_t n)
{
	struct h2s *s = arg;

	/*
	 * Made only for an answer that has trailers: a section that begins
	 * with its end (CRLF) has none, and most answers have none.
	 */
	if (s->trailers == NULL && n > 0 && (p[0] == '\r' || p[0] == '\n'))
		return 0;
	if (s->trailers == NULL && (s->trailers = evbuffer_new()) == NULL)
		return -1;
	return evbuffer_add(s->trailers, p, n);
}

/*
 * The trailer section (field lines the parser checked, and the final
 * CRLF) as HEADERS after the last DATA: 0, or -1.
 */
static int
send_trailers(struct h2s *s)
{
	nghttp2_nv nv[HTTP_MAX_HEADERS];
	size_t len = evbuffer_get_length(s->trailers), n = 0, k, vlen;
	char *p, *end, *eol, *colon, *v;

	if ((p = (char *)evbuffer_pullup(s->trailers, (ssize_t)len)) == NULL)
		return -1;
	for (end = p + len; p < end && n < HTTP_MAX_HEADERS; p = eol + 2) {
		if ((eol = memchr(p, '\r', (size_t)(end - p))) == NULL ||
		    eol == p)
			break;		/* the empty line: the end */
		if ((colon = memchr(p, ':', (size_t)(eol - p))) == NULL)
			return -1;
		for (k = 0; p + k < colon; k++)
			if (p[k] >= 'A' && p[k] <= 'Z')
				p[k] = (char)(p[k] + 32);
		/*
		 * What HTTP/2 forbids in any field section (RFC 9113 8.2.2),
		 * and framing in trailers (RFC 9110 6.5.1), as the upstream
		 * may send them: a client would reset the stream.
		 */
		if (http2_forbidden(p, k) || (k == 14 &&
		    memcmp(p, "content-length", 14) == 0) ||
		    (k == 4 && memcmp(p, "host", 4) == 0))
			continue;
		for (v = colon + 1; v < eol && (*v == ' ' || *v == '\t'); v++)
			;
		for (vlen = (size_t)(eol - v); vlen > 0 &&
		    (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'); vlen--)
			;
		nv[n].name = (uint8_t *)p;
		nv[n].namelen = (size_t)(colon - p);
		nv[n].value = (uint8_t *)v;
		nv[n].valuelen = vlen;
		nv[n++].flags = NGHTTP2_NV_FLAG_NONE;
	}
	return nghttp2_submit_trailer(s->h->ng, s->id, nv, n) == 0 ? 0 : -1;
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
		if (s->trailers != NULL &&
		    evbuffer_get_length(s->trailers) > 2) {
			*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
			if (send_trailers(s) != 0)
				return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		}
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

/*
 * The answer's head: HEADERS, its names in lower case, hop-by-hop gone.
 * An interim one (1xx: 100 Continue, 103) goes as HEADERS of its own
 * before the final one.
 */
static int
answer_head(struct h2s *s, const struct http_resp_head *rh)
{
	nghttp2_nv nv[HTTP_MAX_HEADERS + 1];
	nghttp2_data_provider dp;
	char status[4], *names = NULL, *p;
	size_t i, n = 0, total = 0;
	int interim = rh->informational, r;

	if (s->ic->own_answer != 0 && s->grpc && !interim)
		return answer_grpc(s);
	for (i = 0; i < rh->nheaders; i++)
		total += rh->headers[i].name_len + 1;
	if ((names = malloc(total + 1)) == NULL)
		return -1;
	snprintf(status, sizeof(status), "%03u", rh->status);
	nv[n++] = (nghttp2_nv)NV(":status", status, 3);
	p = names;
	s->resp_chunked = 0;
	for (i = 0; i < rh->nheaders && n < HTTP_MAX_HEADERS + 1; i++) {
		const struct http_header *x = &rh->headers[i];
		size_t k;

		if (x->name_len == 17 &&
		    strncasecmp(x->name, "transfer-encoding", 17) == 0)
			s->resp_chunked = 1;	/* the parser allows chunked alone */
		if (http2_forbidden(x->name, x->name_len))
			continue;
		/* None in a 1xx or 204 (RFC 9110 8.6); HTTP/1.1 let "0" by. */
		if ((rh->status / 100 == 1 || rh->status == 204) &&
		    x->name_len == 14 &&
		    strncasecmp(x->name, "content-length", 14) == 0)
			continue;
		for (k = 0; k < x->name_len; k++)
			p[k] = (char)((x->name[k] >= 'A' && x->name[k] <= 'Z') ?
			    x->name[k] + 32 : x->name[k]);
		nv[n].name = (uint8_t *)p;
		nv[n].namelen = x->name_len;
		nv[n].value = (uint8_t *)x->value;
		nv[n].valuelen = x->value_len;
		nv[n].flags = NGHTTP2_NV_FLAG_NONE;
		p += x->name_len;
		n++;
	}
	if (interim) {
		r = nghttp2_submit_headers(s->h->ng, NGHTTP2_FLAG_NONE, s->id,
		    NULL, nv, n, NULL);
		free(names);
		return r < 0 ? r : 0;
	}
	dechunk_init(&s->dc);
	dechunk_trailers(&s->dc, trailers_add);
	dp.source.ptr = s;
	dp.read_callback = data_read_cb;
	s->rs = H2R_BODY;
	r = nghttp2_submit_response(s->h->ng, s->id, nv, n, &dp);
	free(names);
	return r;
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

/* Body bytes of the answer, in its HTTP/1.1 framing. */
static int
answer_body(struct h2s *s, const uint8_t *p, size_t n)
{
	if (n == 0 || s->rs != H2R_BODY)
		return 0;
	if (s->resp_chunked)
		return dechunk_feed(&s->dc, p, n, out_add, s);
	return out_add(s, p, n);
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

void
h2_answer_pump(struct h2s *s)
{
	struct h2 *h = s->h;
	struct evbuffer *from = tstream_output(s->pipe);
	const struct http_resp_head *rh;
	enum http_resp_ev ev;
	size_t len, used, took = 0;
	uint8_t *data;

	while ((len = evbuffer_get_contiguous_space(from)) > 0 &&
	    s->rs < H2R_ENDED && evbuffer_get_length(s->out) < H2_STREAM_OUT &&
	    h->out < H2_CONN_OUT) {
		data = evbuffer_pullup(from, (ssize_t)len);
		ev = http_resps_feed(s->resps, data, len, &used, &rh, NULL);
		if (ev == HTTP_RESP_INVALID || ev == HTTP_RESP_TUNNEL ||
		    (ev == HTTP_RESP_HEAD && answer_head(s, rh) != 0) ||
		    ((ev == HTTP_RESP_NEED_MORE || ev == HTTP_RESP_END) &&
		    answer_body(s, data, used) != 0)) {
			h2_stream_reset(s, NGHTTP2_INTERNAL_ERROR);
			break;
		}
		evbuffer_drain(from, used);
		took += used;
		if (ev == HTTP_RESP_END && (s->rs == H2R_BODY ||
		    s->rs == H2R_DROP) && rh != NULL && !rh->informational)
			s->rs = H2R_ENDED;
		if (ev == HTTP_RESP_NEED_MORE && used == 0)
			break;
	}
	if (s->rs == H2R_RESET || s->rs == H2R_ENDED)
		evbuffer_drain(from, evbuffer_get_length(from));
	answer_resume(s);
	if (took > 0 || tstream_pipe_closing(s->pipe))
		tstream_pipe_drained(s->pipe);
}

