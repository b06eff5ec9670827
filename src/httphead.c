/* httphead.c: HTTP/1.x requests from a client stream, parsed strictly. */
#include "autoconf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <llhttp.h>

#include "err.h"
#include "httphead.h"
#include "httphead_int.h"

/*
 * How it fits together.  Every byte of a request passes two checks.  Our
 * own guards (the head guard for the request line and header lines, the
 * body guard for Content-Length and chunked bodies) run first over the
 * bytes and stop at the first byte they refuse or at the end of the head
 * or body; llhttp is then given exactly the bytes the guards accepted and
 * fills the arena through its callbacks.  The guards refuse what llhttp,
 * in whichever mode it was compiled (its loose mode accepts bare LF line
 * ends, obs-fold, "Name : value", HTTP/0.9 and 2.0 request lines, and any
 * two bytes after chunk data), would let through; llhttp decides the
 * framing.  Where both say where a head or a message ends, they must say
 * the same, or the request is refused.
 */

/* ---- llhttp's callbacks ------------------------------------------------- */

static int
on_url(llhttp_t *p, const char *at, size_t len)
{
	struct http_reqs *s = p->data;

	return s->phase == P_HEAD ? http_arena_put(s, at, len) : 0;
}

static int
on_url_complete(llhttp_t *p)
{
	struct http_reqs *s = p->data;

	if (s->phase != P_HEAD)
		return 0;
	s->target_len = s->alen;
	return http_arena_put(s, "", 1);
}

static int
on_header_field(llhttp_t *p, const char *at, size_t len)
{
	struct http_reqs *s = p->data;

	if (s->phase != P_HEAD)
		return 0;
	if (!s->in_field) {
		if (s->nhoff == HTTP_MAX_HEADERS)
			return refuse(s, "too many headers");
		s->hoff[s->nhoff].name = s->alen;
		s->in_field = 1;
	}
	return http_arena_put(s, at, len);
}

/*
 * Counts the headers that frame the message or name its host, and
 * refuses a second one or Content-Length with Transfer-Encoding as soon as
 * the name is known (before llhttp's own checks, so the reason is ours).
 */
static int
count_special(struct http_reqs *s, const char *name, size_t len)
{
	if (ascii_eq(name, len, "content-length")) {
		if (s->n_cl++ > 0)
			return refuse(s, "repeated content-length");
	} else if (ascii_eq(name, len, "transfer-encoding")) {
		if (s->n_te++ > 0)
			return refuse(s, "repeated transfer-encoding");
	} else if (ascii_eq(name, len, "host")) {
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
	struct http_reqs *s = p->data;
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
on_header_value(llhttp_t *p, const char *at, size_t len)
{
	struct http_reqs *s = p->data;

	return s->phase == P_HEAD ? http_arena_put(s, at, len) : 0;
}

static int
on_header_value_complete(llhttp_t *p)
{
	struct http_reqs *s = p->data;
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

static int	on_headers_complete(llhttp_t *);

static int
on_message_complete(llhttp_t *p)
{
	return HPE_PAUSED;
}

static const llhttp_settings_t reqs_settings = {
	.on_url = on_url,
	.on_url_complete = on_url_complete,
	.on_header_field = on_header_field,
	.on_header_field_complete = on_header_field_complete,
	.on_header_value = on_header_value,
	.on_header_value_complete = on_header_value_complete,
	.on_headers_complete = on_headers_complete,
	.on_message_complete = on_message_complete,
};

/* ---- the head is complete ----------------------------------------------- */

/* The head is complete: derive its fields, or refuse it; then pause. */
static int
on_headers_complete(llhttp_t *p)
{
	struct http_reqs *s = p->data;
	struct http_head *h = &s->head;
	const char *why;

	if (s->phase != P_HEAD)
		return refuse(s, "malformed request");
	if ((why = http_check_request_line(s, h)) != NULL ||
	    (why = http_parse_target(s, h)) != NULL ||
	    (why = http_parse_host(s, h)) != NULL ||
	    (why = http_check_framing(s, h)) != NULL ||
	    (why = http_check_upgrade(s, h)) != NULL)
		return refuse(s, why);
	http_fill_pointers(s, h);
	h->keep_alive = llhttp_should_keep_alive(p);
	return HPE_PAUSED;
}

/* ---- the stream ---------------------------------------------------------- */

struct http_reqs *
http_reqs_new(size_t header_limit)
{
	struct http_reqs *s;

	if (header_limit > SIZE_MAX / 4)
		return NULL;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	llhttp_init(&s->parser, HTTP_REQUEST, &reqs_settings);
	s->parser.data = s;
	s->amax = 2 * header_limit + 16;
	s->g.limit = header_limit;
	s->phase = P_HEAD;
	s->fresh = 1;
	return s;
}

void
http_reqs_free(struct http_reqs *s)
{
	if (s == NULL)
		return;
	free(s->arena);
	free(s);
}

/* Forgets the previous request: the next byte begins a new one. */
static void
start_request(struct http_reqs *s)
{
	http_guard_init(&s->g, s->g.limit);
	memset(&s->bg, 0, sizeof(s->bg));
	memset(&s->head, 0, sizeof(s->head));
	s->alen = 0;
	s->target_len = s->origin_off = 0;
	s->nhoff = 0;
	s->in_field = 0;
	s->n_cl = s->n_te = s->n_host = 0;
	s->why = NULL;
	s->fresh = 0;
}

/* The phrase for an llhttp error (when no callback of ours refused). */
static const char *
llhttp_reason(llhttp_errno_t e)
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
		return "malformed request line";
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
		return "request after connection close";
	default:
		return "malformed request";
	}
}

static enum http_ev
die(struct http_reqs *s, const char *why)
{
	s->phase = P_DEAD;
	s->dead = why != NULL ? why : "malformed request";
	return HTTP_EV_INVALID;
}

/*
 * Gives llhttp exactly buf[0..n), resuming it first if it paused.  *done
 * is where it stopped (n unless it paused).
 */
static llhttp_errno_t
run_parser(struct http_reqs *s, const uint8_t *buf, size_t n, size_t *done)
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

static enum http_ev
feed_head(struct http_reqs *s, const uint8_t *buf, size_t len, size_t *used)
{
	const char *gwhy;
	llhttp_errno_t e;
	size_t n, done;

	if (len == 0)
		return HTTP_EV_NEED_MORE;
	if (s->fresh)
		start_request(s);
	n = http_guard_scan(&s->g, buf, len, &gwhy);
	e = run_parser(s, buf, n, &done);
	if (e == HPE_PAUSED) {
		if (s->g.st != G_DONE || done != n)
			return die(s, "malformed request");
		*used = done;
		s->phase = P_BODY;
		return HTTP_EV_HEAD;
	}
	if (e != HPE_OK)
		return die(s, s->why != NULL ? s->why : llhttp_reason(e));
	if (gwhy != NULL)
		return die(s, gwhy);
	if (s->g.st == G_DONE)		/* llhttp did not see the head end */
		return die(s, "malformed request");
	*used = n;
	return HTTP_EV_NEED_MORE;
}

static enum http_ev
feed_body(struct http_reqs *s, const uint8_t *buf, size_t len, size_t *used)
{
	const struct http_head *h = &s->head;
	const char *bwhy;
	llhttp_errno_t e;
	size_t n, done;

	n = http_body_scan(&s->bg, buf, len, &bwhy);
	e = run_parser(s, buf, n, &done);
	if (e == HPE_PAUSED) {
		if (s->bg.st != B_DONE || done != n)
			return die(s, "malformed request");
		*used = done;
		if (h->is_connect || h->upgrade)
			s->phase = P_UPGRADE;
		else
			s->phase = h->keep_alive ? P_HEAD : P_CLOSED;
		s->fresh = 1;
		return HTTP_EV_END;
	}
	if (e != HPE_OK)
		return die(s, s->why != NULL ? s->why : llhttp_reason(e));
	if (bwhy != NULL)
		return die(s, bwhy);
	if (s->bg.st == B_DONE)		/* llhttp did not see the end */
		return die(s, "malformed request");
	*used = n;
	return HTTP_EV_NEED_MORE;
}

/* END of a CONNECT or upgrade was reported; llhttp must now stop too. */
static enum http_ev
feed_upgrade(struct http_reqs *s)
{
	size_t done;

	if (run_parser(s, NULL, 0, &done) != HPE_PAUSED_UPGRADE || done != 0)
		return die(s, "malformed request");
	s->phase = P_TUNNEL;
	return HTTP_EV_TUNNEL;
}

enum http_ev
http_reqs_feed(struct http_reqs *s, const uint8_t *buf, size_t len,
    size_t *used, const struct http_head **head, const char **reason)
{
	enum http_ev ev;

	*used = 0;
	switch (s->phase) {
	case P_HEAD:
		ev = feed_head(s, buf, len, used);
		break;
	case P_BODY:
		ev = feed_body(s, buf, len, used);
		break;
	case P_UPGRADE:
		ev = feed_upgrade(s);
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
		*reason = ev == HTTP_EV_INVALID ? s->dead : NULL;
	return ev;
}

int
http_reqs_upgrade_refused(struct http_reqs *s)
{
	if (s->phase != P_TUNNEL || !s->head.upgrade)
		return SL_ERR_INVALID;
	llhttp_resume_after_upgrade(&s->parser);
	s->phase = s->head.keep_alive ? P_HEAD : P_CLOSED;
	s->fresh = 1;
	return 0;
}
