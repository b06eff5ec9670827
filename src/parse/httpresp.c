/*
 * httpresp.c: HTTP/1.x responses from an upstream, framed strictly, their
 * heads written again for the sandbox.
 *
 * It runs on the stream httphead.c runs requests on: our head guard (the
 * status line and header lines) and body guard (Content-Length and chunked
 * bodies, httpcheck.c) run over the bytes first and stop at the first
 * byte they refuse or at the end of the head or body; llhttp is then
 * given exactly the bytes they accepted and fills the arena through its
 * callbacks.  Where both say where a head or a message ends, they must say
 * the same, or the response is refused.  A close-delimited body never
 * reaches llhttp: it is everything until the upstream closes.
 */
#include "autoconf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <llhttp.h>

#include "util/ascii.h"
#include "util/err.h"
#include "parse/httphead.h"
#include "parse/httphead_int.h"
#include "parse/httpresp.h"
#include "parse/httpwrite.h"

#define OUT_EXTRA	32	/* "Connection: upgrade\r\n" and the like */

struct http_resps {
	struct http_stream hs;		/* first: llhttp's data points to it */

	/* Requests sent upstream: whether each was HEAD, oldest first. */
	uint8_t		 q_is_head[HTTP_RESPS_MAX_PENDING];
	uint8_t		 q_last[HTTP_RESPS_MAX_PENDING];	/* the client's last */
	size_t		 q_first, q_len;

	int		 no_body;	/* whatever the head's framing says */
	size_t		 conn;		/* http_conn_first() of the head */
	char		*out;
	size_t		 out_cap;
	struct http_resp_head head;
};

/* ---- the head is complete ----------------------------------------------- */

/* The status line, checked against what the guard saw. */
static const char *
check_status_line(struct http_resps *s)
{
	llhttp_t *p = &s->hs.parser;
	const struct guard *g = &s->hs.g;
	struct http_resp_head *h = &s->head;

	if (llhttp_get_http_major(p) != 1 || llhttp_get_http_minor(p) > 1 ||
	    g->version[7] - '0' != llhttp_get_http_minor(p))
		return "unsupported http version";
	if (llhttp_get_status_code(p) != (int)g->status)
		return "invalid status code";
	if (s->hs.nhoff != g->nlines || g->st != G_DONE)
		return "malformed response";
	h->status = g->status;
	h->http_major = 1;
	h->http_minor = llhttp_get_http_minor(p);
	h->informational = h->status / 100 == 1 && h->status != 101;
	return NULL;
}

/* Whether the pending request at the front of the queue was HEAD. */
static int
front_is_head(const struct http_resps *s)
{
	return s->q_len > 0 && s->q_is_head[s->q_first];
}

/* How the body is framed; llhttp must agree.  Sets the body guard. */
static const char *
check_framing(struct http_resps *s)
{
	struct http_resp_head *h = &s->head;
	int bodiless = h->status / 100 == 1 || h->status == 204;
	const char *why;

	/* RFC 9112 6.3: these have no body, whatever the headers say. */
	s->no_body = bodiless || h->status == 304 || front_is_head(s);
	if ((why = http_check_framing(&s->hs, h->http_minor,
	    bodiless ? "body framing on 1xx or 204" : NULL, s->no_body)) != NULL)
		return why;
	h->close_delimited = !s->no_body && !s->hs.chunked && !s->hs.has_cl;
	return NULL;
}

/*
 * A 101 must name its protocol in Upgrade and say "upgrade" in Connection;
 * llhttp (which also reads Proxy-Connection) must see it the same way.
 */
static const char *
check_upgrade(struct http_resps *s)
{
	const struct http_resp_head *h = &s->head;

	if (h->status == 101 && !http_upgrade_asked(&s->hs))
		return "101 without upgrade";
	if ((h->status == 101) != (llhttp_get_upgrade(&s->hs.parser) != 0))
		return "ambiguous upgrade";
	return NULL;
}

/* Whether Transfer-Encoding lists anything but one chunked (checked). */
static int
transfer_coded(const struct http_resp_head *h)
{
	const struct http_header *x;
	const char *e;
	size_t i, j, elen;

	for (i = 0; i < h->nheaders; i++) {
		x = &h->headers[i];
		if (!ascii_eq(x->name, x->name_len, "transfer-encoding"))
			continue;
		j = 0;
		while (http_list_next(x->value, x->value_len, &j, &e, &elen))
			if (!ascii_eq(e, elen, "chunked"))
				return 1;
	}
	return 0;
}

/* Whether header x is sent on to the sandbox (arg: the stream). */
static int
resp_keeps(const void *arg, const struct http_header *x)
{
	const struct http_resps *s = arg;
	const struct http_resp_head *h = &s->head;

	/* The body is relayed raw: its framing headers stay as they came. */
	if (ascii_eq(x->name, x->name_len, "content-length") ||
	    ascii_eq(x->name, x->name_len, "transfer-encoding"))
		return 1;
	if (h->status == 101 && ascii_eq(x->name, x->name_len, "upgrade"))
		return 1;
	return !http_hop_by_hop(x->name, x->name_len) &&
	    !http_conn_names(h->headers + s->conn, h->nheaders - s->conn,
	    x->name, x->name_len);
}

/* Writes the head for the sandbox into s->out; 0, or -1 via refuse(). */
static int
build_out(struct http_resps *s)
{
	struct http_resp_head *h = &s->head;
	const char *r = s->hs.arena, *conn = "";
	size_t i, rb = 0, re = s->hs.line_len, need;
	char status[4], *o;

	while (rb < re && (r[rb] == ' ' || r[rb] == '\t'))
		rb++;
	while (re > rb && (r[re - 1] == ' ' || r[re - 1] == '\t'))
		re--;
	if (h->status == 101)
		conn = "Connection: upgrade\r\n";
	else if (!h->informational && (!h->keep_alive ||
	    (s->q_len > 0 && s->q_last[s->q_first])))
		conn = "Connection: close\r\n";

	s->conn = http_conn_first(h->headers, h->nheaders);
	need = 9 + 3 + 1 + (re - rb) + 2 + strlen(conn) + 2 +
	    http_put_headers(NULL, h->headers, h->nheaders, resp_keeps, s);
	if (need > s->out_cap) {
		free(s->out);
		s->out_cap = 0;
		if ((s->out = malloc(need + OUT_EXTRA)) == NULL)
			return refuse(&s->hs, "out of memory");
		s->out_cap = need + OUT_EXTRA;
	}

	status[0] = (char)('0' + h->status / 100);
	status[1] = (char)('0' + h->status / 10 % 10);
	status[2] = (char)('0' + h->status % 10);
	status[3] = ' ';
	o = put(s->out, "HTTP/1.1 ", 9);
	o = put(o, status, 4);
	for (i = rb; i < re; i++) {
		uint8_t c = (uint8_t)r[i];

		*o++ = c == '\t' ? ' ' : (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	o = put(o, "\r\n", 2);
	o += http_put_headers(o, h->headers, h->nheaders, resp_keeps, s);
	o = put(o, conn, strlen(conn));
	o = put(o, "\r\n", 2);
	h->out = s->out;
	h->out_len = (size_t)(o - s->out);
	return 0;
}

/* The head is complete: derive its fields, or refuse it; then pause. */
static int
on_headers_complete(llhttp_t *p)
{
	struct http_resps *s = p->data;		/* hs is its first member */
	struct http_resp_head *h = &s->head;
	const char *why;

	if (s->hs.phase != P_HEAD)
		return refuse(&s->hs, "malformed response");
	if (s->hs.alen == 0 && http_arena_put(&s->hs, "", 1) != 0)
		return -1;	/* no reason, no header */
	if ((why = check_status_line(s)) != NULL ||
	    (why = check_framing(s)) != NULL)
		return refuse(&s->hs, why);
	http_fill_headers(&s->hs);
	h->headers = s->hs.hdrs;
	h->nheaders = s->hs.nhoff;
	if ((why = check_upgrade(s)) != NULL)
		return refuse(&s->hs, why);
	h->transfer_coded = transfer_coded(h);
	/*
	 * What returning 1 from this callback would do, but we pause here:
	 * llhttp reads no body, and no longer waits for the upstream to close
	 * to end this response.
	 */
	if (s->no_body)
		p->flags |= F_SKIPBODY;
	if (h->close_delimited != (llhttp_message_needs_eof(p) != 0))
		return refuse(&s->hs, "malformed response");
	h->keep_alive = h->status != 101 && llhttp_should_keep_alive(p) &&
	    !http_conn_names(h->headers, h->nheaders, "close", 5);	/* httphead.c */
	if (build_out(s) != 0)
		return -1;
	return HPE_PAUSED;
}

/* ---- the stream ---------------------------------------------------------- */

struct http_resps *
http_resps_new(size_t header_limit)
{
	return http_stream_new(sizeof(struct http_resps), 1, header_limit,
	    on_headers_complete);
}

int
http_resps_forget(struct http_resps *s, size_t n)
{
	/* The oldest is answered, or being answered: only newer ones go. */
	if (n > s->q_len || (n == s->q_len && n > 0 && !s->hs.fresh))
		return SL_ERR_INVALID;
	s->q_len -= n;
	return 0;
}

int
http_resps_between(const struct http_resps *s)
{
	return http_stream_between(&s->hs) && s->q_len == 0;
}

void
http_resps_reset(struct http_resps *s, size_t header_limit)
{
	http_stream_reset(&s->hs, header_limit);
	s->q_first = s->q_len = 0;
	s->no_body = 0;
}

void
http_resps_free(struct http_resps *s)
{
	if (s == NULL)
		return;
	free(s->hs.arena);
	free(s->out);
	free(s);
}
int
http_resps_expect(struct http_resps *s, const char *method)
{
	size_t i, len = strlen(method);

	if (len == 0 || len > 23)
		return SL_ERR_INVALID;
	for (i = 0; i < len; i++)
		if (!is_tchar((uint8_t)method[i]))
			return SL_ERR_INVALID;
	if (strcmp(method, "CONNECT") == 0)
		return SL_ERR_UNSUPPORTED;
	if (s->q_len == HTTP_RESPS_MAX_PENDING)
		return SL_ERR_TOO_BIG;
	s->q_is_head[(s->q_first + s->q_len) % HTTP_RESPS_MAX_PENDING] =
	    strcmp(method, "HEAD") == 0;
	s->q_last[(s->q_first + s->q_len) % HTTP_RESPS_MAX_PENDING] = 0;
	s->q_len++;
	return 0;
}

int
http_resps_last(struct http_resps *s)
{
	if (s->q_len == 0)
		return SL_ERR_INVALID;
	s->q_last[(s->q_first + s->q_len - 1) % HTTP_RESPS_MAX_PENDING] = 1;
	return 0;
}

void
http_resps_trailers(struct http_resps *s, int on)
{
	s->hs.trailers_ok = on != 0;
}

size_t
http_resps_pending(const struct http_resps *s)
{
	return s->q_len;
}

/* The request at the front of the queue has its final response. */
static void
dequeue(struct http_resps *s)
{
	if (s->q_len == 0)
		return;
	s->q_first = (s->q_first + 1) % HTTP_RESPS_MAX_PENDING;
	s->q_len--;
}

static enum http_resp_ev
die(struct http_resps *s, const char *why)
{
	http_stream_die(&s->hs, why);
	return HTTP_RESP_INVALID;
}

static enum http_resp_ev
feed_head(struct http_resps *s, const uint8_t *buf, size_t len, size_t *used)
{
	int r;

	if (len == 0)
		return HTTP_RESP_NEED_MORE;
	if (s->hs.fresh) {
		if (s->q_len == 0)
			return die(s, "response without request");
		http_stream_start(&s->hs);
		memset(&s->head, 0, sizeof(s->head));
		s->no_body = 0;
	}
	if ((r = http_stream_step(&s->hs, buf, len, used)) <= 0)
		return r < 0 ? HTTP_RESP_INVALID : HTTP_RESP_NEED_MORE;
	s->hs.phase = s->head.status == 101 ? P_UPGRADE : P_BODY;
	return HTTP_RESP_HEAD;
}

/* The response ended at the last byte consumed. */
static enum http_resp_ev
end_response(struct http_resps *s)
{
	if (!s->head.informational)
		dequeue(s);
	s->hs.phase = s->head.keep_alive ? P_HEAD : P_CLOSED;
	s->hs.fresh = 1;
	return HTTP_RESP_END;
}

static enum http_resp_ev
feed_body(struct http_resps *s, const uint8_t *buf, size_t len, size_t *used)
{
	int r;

	if (s->head.close_delimited) {	/* llhttp is not told: we end it */
		*used = len;
		return HTTP_RESP_NEED_MORE;
	}
	if ((r = http_stream_step(&s->hs, buf, len, used)) <= 0)
		return r < 0 ? HTTP_RESP_INVALID : HTTP_RESP_NEED_MORE;
	return end_response(s);
}

/* HEAD of a 101 was reported; llhttp must now end it and stop too. */
static enum http_resp_ev
feed_upgrade(struct http_resps *s)
{
	size_t done;

	if (http_stream_run(&s->hs, NULL, 0, &done) != HPE_PAUSED || done != 0)
		return die(s, NULL);
	if (http_stream_tunnel(&s->hs) != 0)
		return HTTP_RESP_INVALID;
	dequeue(s);
	return HTTP_RESP_TUNNEL;
}

/* The outputs every event shares. */
static enum http_resp_ev
report(struct http_resps *s, enum http_resp_ev ev, size_t *used,
    const struct http_resp_head **head, const char **reason)
{
	if (ev == HTTP_RESP_INVALID || ev == HTTP_RESP_TUNNEL)
		*used = 0;
	if (head != NULL)
		*head = (ev == HTTP_RESP_HEAD || ev == HTTP_RESP_END ||
		    ev == HTTP_RESP_TUNNEL) ? &s->head : NULL;
	if (reason != NULL)
		*reason = ev == HTTP_RESP_INVALID ? s->hs.dead : NULL;
	return ev;
}

enum http_resp_ev
http_resps_feed(struct http_resps *s, const uint8_t *buf, size_t len,
    size_t *used, const struct http_resp_head **head, const char **reason)
{
	enum http_resp_ev ev;

	*used = 0;
	switch (s->hs.phase) {
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
		ev = HTTP_RESP_TUNNEL;
		break;
	case P_CLOSED:
		ev = len == 0 ? HTTP_RESP_NEED_MORE :
		    die(s, "response after connection close");
		break;
	default:
		ev = HTTP_RESP_INVALID;
		break;
	}
	return report(s, ev, used, head, reason);
}

enum http_resp_ev
http_resps_finish(struct http_resps *s, const struct http_resp_head **head,
    const char **reason)
{
	enum http_resp_ev ev;
	size_t used = 0;

	switch (s->hs.phase) {
	case P_HEAD:
	case P_CLOSED:
		if (!s->hs.fresh)
			ev = die(s, "upstream closed mid-response");
		else if (s->q_len > 0)
			ev = die(s, "upstream closed before responding");
		else {
			s->hs.phase = P_CLOSED;
			ev = HTTP_RESP_NEED_MORE;
		}
		break;
	case P_BODY:
		if (s->head.close_delimited)
			ev = end_response(s);
		else if ((ev = feed_body(s, NULL, 0, &used)) != HTTP_RESP_END &&
		    ev != HTTP_RESP_INVALID)
			ev = die(s, "upstream closed mid-response");
		break;
	default:	/* as if fed nothing: the upgrade, tunnel or INVALID */
		return http_resps_feed(s, NULL, 0, &used, head, reason);
	}
	if (ev == HTTP_RESP_END)
		s->hs.phase = P_CLOSED;
	return report(s, ev, &used, head, reason);
}
