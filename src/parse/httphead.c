/*
 * httphead.c: HTTP/1.x messages parsed strictly, as a stream over llhttp
 * that requests and responses (httpresp.c) share, the stream of requests
 * from a client, and which of their headers speak for a gateway.
 */
#include "autoconf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <llhttp.h>

#include "util/err.h"
#include "parse/httphead.h"
#include "parse/httphead_int.h"
#include "parse/httpwrite.h"

/*
 * How it fits together.  Every byte of a request or a response passes two
 * checks.  Our own guards (httpcheck.c: the head guard for the start line
 * and header lines, the body guard for Content-Length and chunked bodies)
 * run first over the bytes and stop at the first byte they refuse or at
 * the end of the head or body; llhttp is then given exactly the bytes the
 * guards accepted and fills the arena through its callbacks.  The guards
 * refuse what llhttp, in whichever mode it was compiled (its loose mode
 * accepts bare LF line ends, obs-fold, "Name : value", HTTP/0.9 and 2.0
 * request lines, and any two bytes after chunk data), would let through;
 * llhttp decides the framing.  Where both say where a head or a message
 * ends, they must say the same, or the message is refused.
 */

/* ---- llhttp's callbacks ------------------------------------------------- */

/* A piece of the request-target, reason phrase or a value: appended. */
static int
on_span(llhttp_t *p, const char *at, size_t len)
{
	struct http_stream *s = p->data;

	return s->phase == P_HEAD ? http_arena_put(s, at, len) : 0;
}

/* The request-target or the reason phrase is complete. */
static int
on_line_complete(llhttp_t *p)
{
	struct http_stream *s = p->data;

	if (s->phase != P_HEAD)
		return 0;
	if (s->nhoff > 0 || s->in_field)
		return refuse(s, malformed(s));
	s->line_len = s->alen;
	return http_arena_put(s, "", 1);
}

static int
on_header_field(llhttp_t *p, const char *at, size_t len)
{
	struct http_stream *s = p->data;

	if (s->phase != P_HEAD)
		return 0;
	if (s->alen == 0 && http_arena_put(s, "", 1) != 0)	/* no reason */
		return -1;
	if (!s->in_field) {
		if (s->nhoff == HTTP_MAX_HEADERS)
			return refuse(s, "too many headers");
		s->hoff[s->nhoff].name = s->alen;
		s->in_field = 1;
	}
	return http_arena_put(s, at, len);
}

/*
 * Counts the headers that frame the message or name a request's host,
 * and refuses a second one or Content-Length with Transfer-Encoding as
 * soon as the name is known (before llhttp's own checks, so the reason is
 * ours).
 */
static int
count_special(struct http_stream *s, const char *name, size_t len)
{
	if (ascii_eq(name, len, "content-length")) {
		if (s->n_cl++ > 0)
			return refuse(s, "repeated content-length");
	} else if (ascii_eq(name, len, "transfer-encoding")) {
		if (s->n_te++ > 0)
			return refuse(s, "repeated transfer-encoding");
	} else if (!s->response && ascii_eq(name, len, "host")) {
		if (s->n_host++ > 0)
			return refuse(s, "repeated host");
	}
	if (s->n_cl > 0 && s->n_te > 0)
		return refuse(s, "content-length with transfer-encoding");
	return 0;
}

static int
on_header_field_complete(llhttp_t *p)
{
	struct http_stream *s = p->data;
	struct hoff *h;

	if (s->phase != P_HEAD)
		return 0;
	if (!s->in_field)
		return refuse(s, "empty header name");
	h = &s->hoff[s->nhoff];
	h->name_len = s->alen - h->name;
	if (http_arena_put(s, "", 1) != 0)
		return -1;
	h->value = s->alen;
	s->in_field = 0;
	return count_special(s, s->arena + h->name, h->name_len);
}

static int
on_header_value_complete(llhttp_t *p)
{
	struct http_stream *s = p->data;
	struct hoff *h;
	const char *v;

	if (s->phase != P_HEAD)
		return 0;
	h = &s->hoff[s->nhoff];
	if (http_arena_put(s, "", 1) != 0)
		return -1;
	v = s->arena;
	h->value_len = s->alen - 1 - h->value;
	while (h->value_len > 0 && (v[h->value] == ' ' || v[h->value] == '\t')) {
		h->value++;
		h->value_len--;
	}
	while (h->value_len > 0 && (v[h->value + h->value_len - 1] == ' ' ||
	    v[h->value + h->value_len - 1] == '\t'))
		h->value_len--;
	s->arena[h->value + h->value_len] = '\0';
	s->nhoff++;
	return 0;
}

static int
on_message_complete(llhttp_t *p)
{
	return HPE_PAUSED;
}

/* ---- the stream both directions share ----------------------------------- */

void *
http_stream_new(size_t size, int response, size_t header_limit,
    llhttp_cb on_head)
{
	struct http_stream *s;
	llhttp_settings_t *set;

	if (header_limit > SIZE_MAX / 4)
		return NULL;
	if ((s = calloc(1, size)) == NULL)
		return NULL;
	set = &s->settings;
	llhttp_settings_init(set);
	set->on_url = set->on_status = on_span;	/* as the stream's type */
	set->on_url_complete = set->on_status_complete = on_line_complete;
	set->on_header_field = on_header_field;
	set->on_header_field_complete = on_header_field_complete;
	set->on_header_value = on_span;
	set->on_header_value_complete = on_header_value_complete;
	set->on_headers_complete = on_head;
	set->on_message_complete = on_message_complete;
	llhttp_init(&s->parser, response ? HTTP_RESPONSE : HTTP_REQUEST, set);
	s->parser.data = s;
	s->response = response;
	s->amax = 2 * header_limit + 16;
	s->g.limit = header_limit;
	s->phase = P_HEAD;
	s->fresh = 1;
	return s;
}

int
http_stream_between(const struct http_stream *s)
{
	return s->phase == P_HEAD && s->fresh;
}

void
http_stream_reset(struct http_stream *s, size_t header_limit)
{
	llhttp_init(&s->parser, s->response ? HTTP_RESPONSE : HTTP_REQUEST,
	    &s->settings);
	s->parser.data = s;
	s->amax = 2 * header_limit + 16;
	s->g.limit = header_limit;
	s->phase = P_HEAD;
	s->fresh = 1;
	s->why = NULL;
	s->dead = NULL;
	s->alen = 0;
	s->trailers_ok = 0;
}

void
http_stream_start(struct http_stream *s)
{
	http_guard_init(&s->g, s->g.limit, s->response);
	memset(&s->bg, 0, sizeof(s->bg));
	s->alen = 0;
	s->line_len = 0;
	s->nhoff = 0;
	s->in_field = 0;
	s->n_cl = s->n_te = s->n_host = 0;
	s->chunked = s->has_cl = 0;
	s->content_length = 0;
	s->why = NULL;
	s->fresh = 0;
}

/* The phrase for an llhttp error (when no callback of ours refused). */
static const char *
llhttp_reason(const struct http_stream *s, llhttp_errno_t e)
{
	switch (e) {
	case HPE_UNEXPECTED_CONTENT_LENGTH:
		return "content-length with transfer-encoding";
	case HPE_INVALID_CONTENT_LENGTH:
		return "invalid content-length";
	case HPE_INVALID_TRANSFER_ENCODING:
		return "bad transfer-encoding";
	case HPE_INVALID_CHUNK_SIZE:
		return "invalid chunk size";
	case HPE_STRICT:	/* what the guards leave of it: chunk extensions */
		return "invalid chunk extension";
	case HPE_INVALID_CONSTANT:	/* "Expected HTTP/" and the like */
		return s->response ? "malformed status line" :
		    "malformed request line";
	case HPE_INVALID_STATUS:
		return "invalid status code";
	case HPE_LF_EXPECTED:
		return "bare CR";
	case HPE_CR_EXPECTED:
		return "bare LF";
	case HPE_UNEXPECTED_SPACE:
		return "obs-fold";
	case HPE_INVALID_HEADER_TOKEN:
		return "invalid header";
	case HPE_INVALID_METHOD:
		return "unknown method";
	case HPE_INVALID_URL:
		return "invalid request target";
	case HPE_INVALID_VERSION:
		return "unsupported http version";
	case HPE_CLOSED_CONNECTION:
		return s->response ? "response after connection close" :
		    "request after connection close";
	default:
		return malformed(s);
	}
}

int
http_stream_die(struct http_stream *s, const char *why)
{
	s->phase = P_DEAD;
	s->dead = why != NULL ? why : malformed(s);
	return -1;
}

llhttp_errno_t
http_stream_run(struct http_stream *s, const uint8_t *buf, size_t n,
    size_t *done)
{
	static const char nothing[1];
	const char *p = n > 0 ? (const char *)buf : nothing;
	const char *pos;
	llhttp_errno_t e;

	if (llhttp_get_errno(&s->parser) == HPE_PAUSED)
		llhttp_resume(&s->parser);
	e = llhttp_execute(&s->parser, p, n);
	*done = n;
	if (e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) {
		pos = llhttp_get_error_pos(&s->parser);
		if (pos < p || pos > p + n)
			return HPE_INTERNAL;
		*done = (size_t)(pos - p);
	}
	return e;
}

int
http_stream_step(struct http_stream *s, const uint8_t *buf, size_t len,
    size_t *used)
{
	const char *why;
	llhttp_errno_t e;
	size_t n, done;
	int ended;

	if (s->phase == P_HEAD) {
		n = http_guard_scan(&s->g, buf, len, &why);
		ended = s->g.st == G_DONE;
	} else {
		n = http_body_scan(&s->bg, buf, len, &why);
		ended = s->bg.st == B_DONE;
	}
	/* llhttp gets what the guard passed and pauses where it sees an end. */
	e = http_stream_run(s, buf, n, &done);
	if (e == HPE_PAUSED) {
		if (!ended || done != n)
			return http_stream_die(s, NULL);
		*used = done;
		return 1;
	}
	if (e != HPE_OK)
		return http_stream_die(s, s->why != NULL ? s->why :
		    llhttp_reason(s, e));
	if (why != NULL)
		return http_stream_die(s, why);
	if (ended)		/* llhttp did not see the end */
		return http_stream_die(s, NULL);
	*used = n;
	return 0;
}

int
http_stream_tunnel(struct http_stream *s)
{
	size_t done;

	if (http_stream_run(s, NULL, 0, &done) != HPE_PAUSED_UPGRADE ||
	    done != 0)
		return http_stream_die(s, NULL);
	s->phase = P_TUNNEL;
	return 0;
}

/* ---- the request stream ------------------------------------------------- */

/*
 * An upgrade as the origin will see it; CONNECT is a tunnel of its own
 * (llhttp calls it an upgrade too).
 */
static const char *
check_upgrade(struct http_reqs *s, struct http_head *h)
{
	if (h->is_connect)
		return NULL;
	h->upgrade = http_upgrade_asked(&s->hs);
	if (h->upgrade != (llhttp_get_upgrade(&s->hs.parser) != 0))
		return "ambiguous upgrade";
	return NULL;
}

/* Points the head's strings into the arena, which no longer moves. */
static void
fill_pointers(struct http_reqs *s, struct http_head *h)
{
	struct http_stream *hs = &s->hs;

	http_fill_headers(hs);
	h->headers = hs->hdrs;
	h->nheaders = hs->nhoff;
	h->target = hs->arena;
	h->target_len = hs->line_len;
	h->origin_target = h->absolute_form ? hs->arena + s->origin_off : NULL;
}

/* The head is complete: derive its fields, or refuse it; then pause. */
static int
on_headers_complete(llhttp_t *p)
{
	struct http_reqs *s = p->data;		/* hs is its first member */
	struct http_head *h = &s->head;
	const char *why;

	if (s->hs.phase != P_HEAD)
		return refuse(&s->hs, "malformed request");
	if ((why = http_check_request_line(s, h)) != NULL ||
	    (why = http_parse_target(s, h)) != NULL ||
	    (why = http_parse_host(s, h)) != NULL ||
	    (why = http_check_framing(&s->hs, h->http_minor,
	    h->is_connect ? "body on connect" : NULL, 0)) != NULL ||
	    (why = check_upgrade(s, h)) != NULL)
		return refuse(&s->hs, why);
	h->chunked = s->hs.chunked;
	h->content_length = s->hs.content_length;
	fill_pointers(s, h);
	/*
	 * llhttp misses a "close" with whitespace after it ("close\t"),
	 * which we trim: our own reading has the last word.
	 */
	h->keep_alive = llhttp_should_keep_alive(p) &&
	    !http_conn_names(h->headers, h->nheaders, "close", 5);
	return HPE_PAUSED;
}

struct http_reqs *
http_reqs_new(size_t header_limit)
{
	return http_stream_new(sizeof(struct http_reqs), 0, header_limit,
	    on_headers_complete);
}

int
http_reqs_between(const struct http_reqs *s)
{
	return http_stream_between(&s->hs);
}

void
http_reqs_reset(struct http_reqs *s, size_t header_limit)
{
	http_stream_reset(&s->hs, header_limit);
	s->origin_off = 0;
}

void
http_reqs_trailers(struct http_reqs *s, int on)
{
	s->hs.trailers_ok = on != 0;
}

void
http_reqs_free(struct http_reqs *s)
{
	if (s == NULL)
		return;
	free(s->hs.arena);
	free(s);
}

static enum http_ev
die(struct http_reqs *s, const char *why)
{
	http_stream_die(&s->hs, why);
	return HTTP_EV_INVALID;
}

static enum http_ev
feed_head(struct http_reqs *s, const uint8_t *buf, size_t len, size_t *used)
{
	int r;

	if (len == 0)
		return HTTP_EV_NEED_MORE;
	if (s->hs.fresh) {
		http_stream_start(&s->hs);
		memset(&s->head, 0, sizeof(s->head));
		s->origin_off = 0;
	}
	if ((r = http_stream_step(&s->hs, buf, len, used)) <= 0)
		return r < 0 ? HTTP_EV_INVALID : HTTP_EV_NEED_MORE;
	s->hs.phase = P_BODY;
	return HTTP_EV_HEAD;
}

static enum http_ev
feed_body(struct http_reqs *s, const uint8_t *buf, size_t len, size_t *used)
{
	const struct http_head *h = &s->head;
	int r;

	if ((r = http_stream_step(&s->hs, buf, len, used)) <= 0)
		return r < 0 ? HTTP_EV_INVALID : HTTP_EV_NEED_MORE;
	if (h->is_connect || h->upgrade)
		s->hs.phase = P_UPGRADE;
	else
		s->hs.phase = h->keep_alive ? P_HEAD : P_CLOSED;
	s->hs.fresh = 1;
	return HTTP_EV_END;
}

enum http_ev
http_reqs_feed(struct http_reqs *s, const uint8_t *buf, size_t len,
    size_t *used, const struct http_head **head, const char **reason)
{
	enum http_ev ev;

	*used = 0;
	switch (s->hs.phase) {
	case P_HEAD:
		ev = feed_head(s, buf, len, used);
		break;
	case P_BODY:
		ev = feed_body(s, buf, len, used);
		break;
	case P_UPGRADE:
		ev = http_stream_tunnel(&s->hs) == 0 ? HTTP_EV_TUNNEL :
		    HTTP_EV_INVALID;
		break;
	case P_TUNNEL:
		ev = HTTP_EV_TUNNEL;
		break;
	case P_CLOSED:
		ev = len == 0 ? HTTP_EV_NEED_MORE :
		    die(s, "request after connection close");
		break;
	default:
		ev = HTTP_EV_INVALID;
		break;
	}
	if (ev == HTTP_EV_INVALID)
		*used = 0;
	if (head != NULL)
		*head = (ev == HTTP_EV_HEAD || ev == HTTP_EV_END ||
		    ev == HTTP_EV_TUNNEL) ? &s->head : NULL;
	if (reason != NULL)
		*reason = ev == HTTP_EV_INVALID ? s->hs.dead : NULL;
	return ev;
}

int
http_reqs_upgrade_refused(struct http_reqs *s)
{
	if (s->hs.phase == P_UPGRADE && s->head.upgrade &&
	    http_stream_tunnel(&s->hs) != 0)
		return SL_ERR_INVALID;
	if (s->hs.phase != P_TUNNEL || !s->head.upgrade)
		return SL_ERR_INVALID;
	llhttp_resume_after_upgrade(&s->hs.parser);
	s->hs.phase = s->head.keep_alive ? P_HEAD : P_CLOSED;
	s->hs.fresh = 1;
	return 0;
}

/* ---- headers that speak for a gateway ----------------------------------- */

enum http_claim
http_header_claim(const char *name, size_t len)
{
	static const char *const route[] = { "forwarded", "x-original-url",
	    "x-rewrite-url", "x-real-ip", "x-client-ip", "true-client-ip",
	    NULL };
	static const char *const route_prefix[] = { "x-forwarded-",
	    "x-envoy-", "sluice-", NULL };
	static const char *const method[] = { "x-http-method-override",
	    "x-http-method", "x-method-override", NULL };
	size_t i;

	for (i = 0; method[i] != NULL; i++)
		if (ascii_eq(name, len, method[i]))
			return HTTP_CLAIM_METHOD;
	for (i = 0; route[i] != NULL; i++)
		if (ascii_eq(name, len, route[i]))
			return HTTP_CLAIM_ROUTE;
	for (i = 0; route_prefix[i] != NULL; i++)
		if (ascii_prefix(name, len, route_prefix[i]))
			return HTTP_CLAIM_ROUTE;
	return HTTP_CLAIM_NONE;
}

int
http_upgrade_websocket_only(const struct http_head *h)
{
	const char *e;
	size_t i, j, elen;
	int n = 0;

	for (i = 0; i < h->nheaders; i++) {
		if (!ascii_eq(h->headers[i].name, h->headers[i].name_len,
		    "upgrade"))
			continue;
		j = 0;
		while (http_list_next(h->headers[i].value,
		    h->headers[i].value_len, &j, &e, &elen)) {
			if (!ascii_eq(e, elen, "websocket"))
				return 0;
			n++;
		}
	}
	return n > 0;
}
