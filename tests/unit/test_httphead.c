/* test_httphead.c: the strict HTTP/1.x request stream parser. */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/err.h"
#include "parse/httphead.h"
#include "parse/httpwrite.h"

#define LIMIT	65536
#define MAXEV	32

/* What a stream reported for one input: events with absolute offsets. */
struct trace {
	enum http_ev	 ev[MAXEV];
	size_t		 off[MAXEV];
	size_t		 n;
	size_t		 body;		/* bytes consumed between HEAD and END */
	size_t		 heads;
	const char	*reason;
	char		 target0[128];	/* target of the first head */
};

static const char *
evname(enum http_ev ev)
{
	switch (ev) {
	case HTTP_EV_NEED_MORE:	return "NEED_MORE";
	case HTTP_EV_HEAD:	return "HEAD";
	case HTTP_EV_END:	return "END";
	case HTTP_EV_TUNNEL:	return "TUNNEL";
	case HTTP_EV_INVALID:	return "INVALID";
	}
	return "?";
}

static void
record(struct trace *t, enum http_ev ev, size_t off)
{
	assert_true(t->n < MAXEV);
	t->ev[t->n] = ev;
	t->off[t->n] = off;
	t->n++;
}

/*
 * Feeds one piece as a client stream would, handling every event until the
 * piece is consumed.  Returns 0 to go on, 1 when the stream ended (INVALID
 * or TUNNEL).
 */
static int
feed_piece(struct http_reqs *s, struct trace *t, const uint8_t *p,
    size_t len, size_t base, int *in_body)
{
	const struct http_head *h;
	const char *why;
	size_t used, pos = 0;
	enum http_ev ev;
	int guard;

	for (guard = 0; guard < 1000; guard++) {
		ev = http_reqs_feed(s, len > pos ? p + pos : NULL, len - pos,
		    &used, &h, &why);
		assert_true(used <= len - pos);
		if (ev == HTTP_EV_NEED_MORE) {
			assert_int_equal(used, len - pos);
			assert_null(h);
			if (*in_body)
				t->body += used;
			return 0;
		}
		if (ev == HTTP_EV_INVALID) {
			assert_non_null(why);
			assert_null(h);
			t->reason = why;
			record(t, ev, 0);	/* where it is found is no contract */
			return 1;
		}
		assert_null(why);
		assert_non_null(h);
		if (ev == HTTP_EV_HEAD) {
			if (t->heads++ == 0)
				snprintf(t->target0, sizeof(t->target0), "%s", h->target);
			*in_body = 1;
		} else if (ev == HTTP_EV_END) {
			t->body += used;
			*in_body = 0;
		}
		pos += used;
		record(t, ev, base + pos);
		if (ev == HTTP_EV_TUNNEL) {
			assert_int_equal(used, 0);
			return 1;
		}
	}
	fail_msg("no progress");
	return 1;
}

/* Feeds buf cut at the given positions (sorted, each < len). */
static void
run_cuts(const void *buf, size_t len, size_t limit, const size_t *cuts,
    size_t ncuts, struct trace *t)
{
	const uint8_t *b = buf;
	struct http_reqs *s;
	size_t i, from = 0, to;
	int in_body = 0;

	memset(t, 0, sizeof(*t));
	assert_non_null(s = http_reqs_new(limit));
	for (i = 0; i <= ncuts; i++) {
		to = i < ncuts ? cuts[i] : len;
		if (feed_piece(s, t, b + from, to - from, from, &in_body) != 0)
			break;
		from = to;
	}
	http_reqs_free(s);
}

static void
run_whole(const void *buf, size_t len, struct trace *t)
{
	run_cuts(buf, len, LIMIT, NULL, 0, t);
}

static void
assert_same_trace(const struct trace *a, const struct trace *b, size_t cut)
{
	size_t i;

	if (a->n != b->n)
		fail_msg("cut at %zu: %zu events, not %zu", cut, b->n, a->n);
	for (i = 0; i < a->n; i++)
		if (a->ev[i] != b->ev[i] || a->off[i] != b->off[i])
			fail_msg("cut at %zu: event %zu is %s@%zu, not %s@%zu",
			    cut, i, evname(b->ev[i]), b->off[i],
			    evname(a->ev[i]), a->off[i]);
	/* Before a refusal, how much body streamed depends on the cuts. */
	if (a->heads != b->heads || (a->reason == NULL && a->body != b->body))
		fail_msg("cut at %zu: %zu heads and %zu body bytes, not %zu and %zu",
		    cut, b->heads, b->body, a->heads, a->body);
	if (a->reason != NULL || b->reason != NULL)
		assert_string_equal(a->reason, b->reason);
}

/* The trace is the same for every single cut and for byte-at-a-time. */
static void
assert_split_invariant(const void *buf, size_t len, const struct trace *whole)
{
	struct trace t;
	size_t i, *cuts;

	for (i = 1; i < len; i++) {
		run_cuts(buf, len, LIMIT, &i, 1, &t);
		assert_same_trace(whole, &t, i);
	}
	assert_non_null(cuts = calloc(len, sizeof(*cuts)));
	for (i = 1; i < len; i++)
		cuts[i - 1] = i;
	run_cuts(buf, len, LIMIT, cuts, len > 0 ? len - 1 : 0, &t);
	assert_same_trace(whole, &t, 0);
	free(cuts);
}

/* Parses one request whole and returns its head (the stream is *sp). */
static const struct http_head *
head_of(struct http_reqs **sp, const char *req, enum http_ev *ev,
    const char **why)
{
	const struct http_head *h;
	size_t used;

	assert_non_null(*sp = http_reqs_new(LIMIT));
	*ev = http_reqs_feed(*sp, (const uint8_t *)req, strlen(req), &used,
	    &h, why);
	if (*ev == HTTP_EV_HEAD)
		assert_int_equal(used, strlen(req));
	return h;
}

/* The reason a single request is refused, or NULL if it is not. */
static const char *
refusal(const char *req)
{
	struct http_reqs *s;
	const char *why;
	enum http_ev ev;

	head_of(&s, req, &ev, &why);
	http_reqs_free(s);
	if (ev == HTTP_EV_INVALID)
		return why;
	assert_int_equal(ev, HTTP_EV_HEAD);
	return NULL;
}

#define S(lit)	lit, sizeof(lit) - 1

/* ---- basic shapes -------------------------------------------------------- */

/*
 * http_reqs_trailers: an HTTP/2 stream's request body may end with
 * trailer fields, checked as header lines are; off, they are refused.
 */
static void
t_req_trailers(void **state)
{
	static const char ok[] = "POST /u HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"
	    "0\r\nX-Meta: m1\r\nGrpc-Thing: 2\r\n\r\n";
	static const char bad[] = "POST /u HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n0\r\nX(T): 1\r\n\r\n";
	const struct http_head *h;
	struct http_reqs *s;
	const char *why;
	enum http_ev ev;
	size_t used, off = 0;
	int heads = 0, ends = 0;

	(void)state;
	assert_non_null(s = http_reqs_new(LIMIT));
	http_reqs_trailers(s, 1);
	while (off < sizeof(ok) - 1) {
		ev = http_reqs_feed(s, (const uint8_t *)ok + off,
		    sizeof(ok) - 1 - off, &used, &h, &why);
		assert_int_not_equal(ev, HTTP_EV_INVALID);
		heads += ev == HTTP_EV_HEAD;
		ends += ev == HTTP_EV_END;
		off += used;
		if (ev == HTTP_EV_NEED_MORE)
			break;
	}
	assert_int_equal(off, sizeof(ok) - 1);
	assert_int_equal(heads, 1);
	assert_int_equal(ends, 1);
	/* A trailer line that is not a field is refused all the same. */
	http_reqs_reset(s, LIMIT);
	http_reqs_trailers(s, 1);
	for (off = 0, ev = HTTP_EV_HEAD; ev != HTTP_EV_INVALID &&
	    ev != HTTP_EV_NEED_MORE; off += used)
		ev = http_reqs_feed(s, (const uint8_t *)bad + off,
		    sizeof(bad) - 1 - off, &used, &h, &why);
	assert_int_equal(ev, HTTP_EV_INVALID);
	assert_string_equal(why, "invalid trailer field");
	/* Off again after a reset: trailer fields are refused. */
	http_reqs_reset(s, LIMIT);
	for (off = 0, ev = HTTP_EV_HEAD; ev != HTTP_EV_INVALID &&
	    ev != HTTP_EV_NEED_MORE; off += used)
		ev = http_reqs_feed(s, (const uint8_t *)ok + off,
		    sizeof(ok) - 1 - off, &used, &h, &why);
	assert_int_equal(ev, HTTP_EV_INVALID);
	assert_string_equal(why, "trailer fields");
	http_reqs_free(s);
}

/* http_hop_by_hop, every length it looks at, and the Proxy-* of each. */
static void
t_hop_names(void **state)
{
	static const char *const yes[] = { "te", "TE", "trailer", "Upgrade",
	    "connection", "Keep-Alive", "proxy-", "proxy-x", "Proxy-Auth",
	    "Proxy-Authorization", "proxy-connection" };
	static const char *const no[] = { "t", "tee", "trailers", "upgrades",
	    "connections", "keepalive", "proxy", "x-proxy-a", "host",
	    "content-length", "" };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		assert_true(http_hop_by_hop(yes[i], strlen(yes[i])));
	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		assert_false(http_hop_by_hop(no[i], strlen(no[i])));
}

/*
 * http_conn_first: the first Connection header naming more than
 * Keep-Alive; n when none does.
 */
static void
t_conn_first(void **state)
{
	struct http_header h[] = {
		{ "Date", 4, "x", 1 }, { "Connection", 10, "keep-alive", 10 },
		{ "X-A", 3, "1", 1 }, { "connection", 10, "Keep-Alive, x-a", 15 },
		{ "X-B", 3, "2", 1 },
	};

	(void)state;
	assert_int_equal(http_conn_first(h, 5), 3);
	assert_int_equal(http_conn_first(h, 3), 3);	/* none: n */
	assert_true(http_conn_names(h + 3, 2, "X-A", 3));
	assert_false(http_conn_names(h + 3, 2, "X-B", 3));
	assert_int_equal(http_conn_first(h, 1), 1);
}

/* http_trailer_fields: fields for HTTP/2, what never passes left out. */
static void
t_trailer_fields(void **state)
{
	char sec[] = "X-Meta:  m1 \r\nAuthorization: Bearer x\r\n"
	    "Grpc-Status: 0\r\ncookie: a=1\r\nContent-Length: 3\r\n"
	    "Proxy-Authorization: y\r\nTransfer-Encoding: chunked\r\n"
	    "Host: h\r\n[REDACTED]-x: 1\r\n\r\n";
	char broken[] = "X-Meta m1\r\n\r\n";
	struct http_header f[8];
	long n;

	(void)state;
	n = http_trailer_fields(sec, strlen(sec), f, 8);
	assert_int_equal(n, 2);
	assert_int_equal(f[0].name_len, 6);
	assert_memory_equal(f[0].name, "x-meta", 6);
	assert_int_equal(f[0].value_len, 2);
	assert_memory_equal(f[0].value, "m1", 2);
	assert_memory_equal(f[1].name, "grpc-status", 11);
	assert_memory_equal(f[1].value, "0", 1);
	assert_int_equal(http_trailer_fields(broken, strlen(broken), f, 8), -1);
	/* No more than max. */
	assert_int_equal(http_trailer_fields(sec, strlen(sec), f, 1), 1);
	assert_true(http_trailer_dropped("Proxy-Connection", 16));
	assert_false(http_trailer_dropped("grpc-message", 12));
}

static void
t_simple_get(void **state)
{
	static const char req[] = "GET /index.html?x=1 HTTP/1.1\r\n"
	    "Host: Example.COM\r\nUser-Agent:  t/1 \t\r\nAccept: */*\r\n\r\n";
	const struct http_head *h;
	const struct http_header *x;
	struct http_reqs *s;
	const char *why;
	enum http_ev ev;
	size_t used;

	h = head_of(&s, req, &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_string_equal(h->method, "GET");
	assert_string_equal(h->target, "/index.html?x=1");
	assert_int_equal(h->target_len, 15);
	assert_int_equal(h->http_major, 1);
	assert_int_equal(h->http_minor, 1);
	assert_int_equal(h->head_len, strlen(req));
	assert_int_equal(h->nheaders, 3);
	assert_string_equal(h->headers[0].name, "Host");
	assert_string_equal(h->headers[0].value, "Example.COM");
	assert_string_equal(h->headers[1].value, "t/1");
	assert_int_equal(h->headers[1].value_len, 3);
	assert_true(h->has_host);
	assert_string_equal(h->host, "example.com");
	assert_int_equal(h->host_port, 0);
	assert_false(h->host_is_ip);
	assert_false(h->is_connect);
	assert_false(h->absolute_form);
	assert_false(h->has_authority);
	assert_null(h->origin_target);
	assert_false(h->upgrade);
	assert_true(h->keep_alive);
	assert_false(h->chunked);
	assert_int_equal(h->content_length, 0);

	x = http_head_get(h, "user-AGENT");
	assert_non_null(x);
	assert_ptr_equal(x, &h->headers[1]);
	assert_null(http_head_get(h, "user-agen"));

	/* A request without a body ends right away, with nothing consumed. */
	ev = http_reqs_feed(s, NULL, 0, &used, &h, &why);
	assert_int_equal(ev, HTTP_EV_END);
	assert_int_equal(used, 0);
	assert_non_null(h);
	assert_string_equal(h->target, "/index.html?x=1");	/* still valid */
	ev = http_reqs_feed(s, NULL, 0, &used, &h, &why);
	assert_int_equal(ev, HTTP_EV_NEED_MORE);
	assert_null(h);
	http_reqs_free(s);
	http_reqs_free(NULL);
}

static void
t_pipelined(void **state)
{
#define R1 "GET /one HTTP/1.1\r\nHost: a.example\r\n\r\n"
#define R2 "POST /two HTTP/1.1\r\nHost: a.example\r\nContent-Length: 5\r\n\r\n"
#define R3 "GET /three HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n"
	static const char req[] = R1 R2 "hello" R3;
	static const enum http_ev want[] = {
		HTTP_EV_HEAD, HTTP_EV_END, HTTP_EV_HEAD, HTTP_EV_END,
		HTTP_EV_HEAD, HTTP_EV_END,
	};
	const size_t a = sizeof(R1) - 1, b = sizeof(R2) - 1, c = sizeof(R3) - 1;
	const size_t at[] = { a, a, a + b, a + b + 5, a + b + 5 + c, a + b + 5 + c };
	struct trace t;
	size_t i;

	assert_int_equal(a, 38);	/* by hand, so the macro arithmetic is checked */
	assert_int_equal(sizeof(req) - 1, 38 + 58 + 5 + 59);
	run_whole(S(req), &t);
	assert_int_equal(t.n, 6);
	for (i = 0; i < t.n; i++) {
		assert_int_equal(t.ev[i], want[i]);
		assert_int_equal(t.off[i], at[i]);
	}
	assert_int_equal(t.body, 5);
	assert_int_equal(t.heads, 3);
	assert_string_equal(t.target0, "/one");
	assert_split_invariant(S(req), &t);
#undef R1
#undef R2
#undef R3
}

/* The last request said Connection: close; anything after it is refused. */
static void
t_after_close(void **state)
{
	static const char req[] =
	    "POST / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"
	    "Content-Length: 1\r\n\r\nx"
	    "GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n";
	struct trace t;

	run_whole(S(req), &t);
	assert_int_equal(t.heads, 1);
	assert_int_equal(t.ev[t.n - 1], HTTP_EV_INVALID);
	assert_string_equal(t.reason, "request after connection close");
	assert_split_invariant(S(req), &t);
}

/*
 * A stream is between requests only at a boundary with nothing of the
 * next read; reset, even after a close or a refusal, it parses like a new
 * one (and a smaller limit holds).
 */
static void
t_between_reset(void **state)
{
	static const char a[] = "GET /a HTTP/1.1\r\nHost: a\r\n\r\n";
	static const char c[] = "GET /c HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
	static const char big[] = "GET /b HTTP/1.1\r\nHost: a\r\nX-Long: "
	    "0123456789012345678901234567890123456789\r\n\r\n";
	const struct http_head *h;
	struct http_reqs *s;
	const char *why;
	size_t used;

	assert_non_null(s = http_reqs_new(LIMIT));
	assert_true(http_reqs_between(s));
	assert_int_equal(http_reqs_feed(s, (const uint8_t *)a, 5, &used, &h,
	    &why), HTTP_EV_NEED_MORE);
	assert_false(http_reqs_between(s));	/* half a head read */
	assert_int_equal(http_reqs_feed(s, (const uint8_t *)a + 5,
	    sizeof(a) - 6, &used, &h, &why), HTTP_EV_HEAD);
	assert_false(http_reqs_between(s));
	assert_int_equal(http_reqs_feed(s, NULL, 0, &used, &h, &why),
	    HTTP_EV_END);
	assert_true(http_reqs_between(s));
	/* After "close" nothing may follow, until a reset. */
	assert_int_equal(http_reqs_feed(s, (const uint8_t *)c, sizeof(c) - 1,
	    &used, &h, &why), HTTP_EV_HEAD);
	assert_int_equal(http_reqs_feed(s, NULL, 0, &used, &h, &why),
	    HTTP_EV_END);
	assert_false(http_reqs_between(s));
	http_reqs_reset(s, LIMIT);
	assert_int_equal(http_reqs_feed(s, (const uint8_t *)a, sizeof(a) - 1,
	    &used, &h, &why), HTTP_EV_HEAD);
	assert_string_equal(h->target, "/a");
	assert_int_equal(http_reqs_feed(s, NULL, 0, &used, &h, &why),
	    HTTP_EV_END);
	/* Dead, then reset with a limit the long head is over. */
	assert_int_equal(http_reqs_feed(s, (const uint8_t *)"\x01", 1, &used,
	    &h, &why), HTTP_EV_INVALID);
	http_reqs_reset(s, 48);
	assert_true(http_reqs_between(s));
	assert_int_equal(http_reqs_feed(s, (const uint8_t *)big,
	    sizeof(big) - 1, &used, &h, &why), HTTP_EV_INVALID);
	http_reqs_reset(s, LIMIT);
	assert_int_equal(http_reqs_feed(s, (const uint8_t *)big,
	    sizeof(big) - 1, &used, &h, &why), HTTP_EV_HEAD);
	http_reqs_free(s);
}

static void
t_keepalive_flags(void **state)
{
	struct http_reqs *s;
	const struct http_head *h;
	const char *why;
	enum http_ev ev;

	h = head_of(&s, "GET / HTTP/1.0\r\nHost: a\r\n\r\n", &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_int_equal(h->http_minor, 0);
	assert_false(h->keep_alive);
	http_reqs_free(s);
	h = head_of(&s, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
	    &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_true(h->keep_alive);
	assert_false(h->has_host);
	http_reqs_free(s);
	h = head_of(&s, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n", &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_false(h->keep_alive);
	http_reqs_free(s);
	/* Whitespace after it, in a list, in another case (fuzz_httphead). */
	h = head_of(&s, "GET / HTTP/1.1\r\nConnection: close\t\r\n\r\n", &ev,
	    &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_false(h->keep_alive);
	http_reqs_free(s);
	h = head_of(&s, "GET / HTTP/1.1\r\nConnection: x-a, CLOSE \r\n\r\n",
	    &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_false(h->keep_alive);
	http_reqs_free(s);
}

static void
t_post_split(void **state)
{
	static const char req[] = "POST /upload HTTP/1.1\r\nHost: up.example\r\n"
	    "Content-Length: 11\r\nContent-Type: text/plain\r\n\r\n"
	    "hello world"
	    "GET /next HTTP/1.1\r\nHost: up.example\r\n\r\n";
	size_t head = sizeof("POST /upload HTTP/1.1\r\nHost: up.example\r\n"
	    "Content-Length: 11\r\nContent-Type: text/plain\r\n\r\n") - 1;
	struct trace t;

	run_whole(S(req), &t);
	assert_int_equal(t.n, 4);
	assert_int_equal(t.ev[0], HTTP_EV_HEAD);
	assert_int_equal(t.off[0], head);
	assert_int_equal(t.ev[1], HTTP_EV_END);
	assert_int_equal(t.off[1], head + 11);
	assert_int_equal(t.ev[2], HTTP_EV_HEAD);
	assert_int_equal(t.off[2], sizeof(req) - 1);
	assert_int_equal(t.ev[3], HTTP_EV_END);
	assert_int_equal(t.body, 11);
	assert_split_invariant(S(req), &t);
}

static void
t_chunked_split(void **state)
{
	static const char req[] = "POST /c HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: gzip, Chunked\r\n\r\n"
	    "5\r\nhello\r\n"
	    "0A;name=\"v\"\r\n0123456789\r\n"
	    "0\r\n\r\n"
	    "GET /after HTTP/1.1\r\nHost: a\r\n\r\n";
	size_t head = sizeof("POST /c HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: gzip, Chunked\r\n\r\n") - 1;
	size_t body = sizeof("5\r\nhello\r\n0A;name=\"v\"\r\n0123456789\r\n"
	    "0\r\n\r\n") - 1;
	struct trace t;

	run_whole(S(req), &t);
	assert_int_equal(t.n, 4);
	assert_int_equal(t.off[0], head);
	assert_int_equal(t.ev[1], HTTP_EV_END);
	assert_int_equal(t.off[1], head + body);
	assert_int_equal(t.body, body);
	assert_int_equal(t.ev[2], HTTP_EV_HEAD);
	assert_int_equal(t.ev[3], HTTP_EV_END);
	assert_split_invariant(S(req), &t);
}

static void
t_chunked_flag(void **state)
{
	struct http_reqs *s;
	const struct http_head *h;
	const char *why;
	enum http_ev ev;

	h = head_of(&s, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
	    &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_true(h->chunked);
	http_reqs_free(s);
	h = head_of(&s, "POST / HTTP/1.1\r\nContent-Length: 0042\r\n\r\n",
	    &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_false(h->chunked);
	assert_int_equal(h->content_length, 42);
	http_reqs_free(s);
}

static void
t_leading_crlf(void **state)
{
	static const char req[] = "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
	const struct http_head *h;
	struct http_reqs *s;
	const char *why;
	enum http_ev ev;

	h = head_of(&s, req, &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_int_equal(h->head_len, sizeof(req) - 1 - 4);
	http_reqs_free(s);
	assert_string_equal(refusal("\n\nGET / HTTP/1.1\r\n\r\n"), "bare LF");
}

/* ---- CONNECT, absolute-form, upgrades ----------------------------------- */

static void
t_connect(void **state)
{
	static const char req[] = "CONNECT Example.com:443 HTTP/1.1\r\n"
	    "Host: example.com:443\r\n\r\n\x16\x03\x01\x02\x00";
	size_t head = sizeof(req) - 1 - 5;
	const struct http_head *h;
	struct http_reqs *s;
	const char *why;
	enum http_ev ev;
	struct trace t;
	size_t used;

	assert_non_null(s = http_reqs_new(LIMIT));
	ev = http_reqs_feed(s, (const uint8_t *)req, sizeof(req) - 1, &used,
	    &h, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_int_equal(used, head);
	assert_true(h->is_connect);
	assert_true(h->has_authority);
	assert_false(h->absolute_form);
	assert_string_equal(h->authority, "example.com");
	assert_int_equal(h->authority_port, 443);
	assert_false(h->authority_is_ip);
	assert_string_equal(h->host, "example.com");
	assert_int_equal(h->host_port, 443);
	assert_false(h->upgrade);
	ev = http_reqs_feed(s, (const uint8_t *)req + head, 5, &used, &h, &why);
	assert_int_equal(ev, HTTP_EV_END);
	assert_int_equal(used, 0);
	ev = http_reqs_feed(s, (const uint8_t *)req + head, 5, &used, &h, &why);
	assert_int_equal(ev, HTTP_EV_TUNNEL);
	assert_int_equal(used, 0);
	assert_non_null(h);
	ev = http_reqs_feed(s, (const uint8_t *)req + head, 5, &used, &h, &why);
	assert_int_equal(ev, HTTP_EV_TUNNEL);
	assert_int_equal(used, 0);
	assert_int_equal(http_reqs_upgrade_refused(s), SL_ERR_INVALID);
	http_reqs_free(s);

	run_whole(S(req), &t);
	assert_int_equal(t.n, 3);
	assert_int_equal(t.ev[2], HTTP_EV_TUNNEL);
	assert_int_equal(t.off[2], head);
	assert_split_invariant(S(req), &t);

	h = head_of(&s, "CONNECT [2001:DB8::1]:8443 HTTP/1.1\r\n\r\n", &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_string_equal(h->authority, "2001:db8::1");
	assert_true(h->authority_is_ip);
	assert_int_equal(h->authority_port, 8443);
	http_reqs_free(s);
	h = head_of(&s, "CONNECT 192.0.2.7:22 HTTP/1.1\r\n\r\n", &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_string_equal(h->authority, "192.0.2.7");
	assert_true(h->authority_is_ip);
	http_reqs_free(s);

	assert_string_equal(refusal("CONNECT example.com HTTP/1.1\r\n\r\n"),
	    "bad connect target");
	assert_string_equal(refusal("CONNECT example.com:0 HTTP/1.1\r\n\r\n"),
	    "bad connect target");
	assert_string_equal(refusal("CONNECT /x HTTP/1.1\r\n\r\n"),
	    "bad connect target");
	assert_string_equal(refusal("CONNECT a:443 HTTP/1.1\r\n"
	    "Content-Length: 5\r\n\r\nhello"), "body on connect");
	assert_string_equal(refusal("CONNECT a:443 HTTP/1.1\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"), "body on connect");
	assert_null(refusal("CONNECT a:443 HTTP/1.1\r\nContent-Length: 0\r\n\r\n"));
}

static void
t_absolute_form(void **state)
{
	struct http_reqs *s;
	const struct http_head *h;
	const char *why;
	enum http_ev ev;

	h = head_of(&s, "GET HTTP://WWW.Example.com/a/b?c=d HTTP/1.1\r\n"
	    "Host: www.example.com\r\n\r\n", &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_true(h->absolute_form);
	assert_true(h->has_authority);
	assert_false(h->is_connect);
	assert_string_equal(h->authority, "www.example.com");
	assert_int_equal(h->authority_port, 80);
	assert_string_equal(h->origin_target, "/a/b?c=d");
	assert_string_equal(h->target, "HTTP://WWW.Example.com/a/b?c=d");
	http_reqs_free(s);

	h = head_of(&s, "GET http://example.com:8080 HTTP/1.1\r\n\r\n", &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_int_equal(h->authority_port, 8080);
	assert_string_equal(h->origin_target, "/");
	http_reqs_free(s);

	h = head_of(&s, "GET http://example.com?q=1 HTTP/1.1\r\n\r\n", &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_string_equal(h->origin_target, "/?q=1");
	http_reqs_free(s);

	h = head_of(&s, "GET http://[::1]:81/x HTTP/1.1\r\n\r\n", &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_string_equal(h->authority, "::1");
	assert_true(h->authority_is_ip);
	assert_int_equal(h->authority_port, 81);
	assert_string_equal(h->origin_target, "/x");
	http_reqs_free(s);

	assert_string_equal(refusal("GET https://example.com/ HTTP/1.1\r\n\r\n"),
	    "absolute-form https");
	assert_string_equal(refusal("GET http://user:pw@example.com/ HTTP/1.1\r\n\r\n"),
	    "userinfo in target");
	assert_string_equal(refusal("GET http://example.com@evil.example/ HTTP/1.1\r\n\r\n"),
	    "userinfo in target");
	assert_string_equal(refusal("GET http:///x HTTP/1.1\r\n\r\n"),
	    "bad authority");
	assert_string_equal(refusal("GET http://a:/x HTTP/1.1\r\n\r\n"),
	    "bad authority");
	assert_string_equal(refusal("GET http://ex%61mple.com/ HTTP/1.1\r\n\r\n"),
	    "bad authority");
	assert_string_equal(refusal("GET ftp://example.com/ HTTP/1.1\r\n\r\n"),
	    "unsupported scheme");
	assert_string_equal(refusal("GET * HTTP/1.1\r\n\r\n"), "bad target");
	assert_null(refusal("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"));
	assert_non_null(refusal("GET a/b HTTP/1.1\r\n\r\n"));
}

/* The origin-form copy of a long absolute-form target makes the arena grow. */
static void
t_absolute_long(void **state)
{
	size_t sizes[] = { 400, 500, 600, 1000, 2000, 4000, 8000 };
	const struct http_head *h;
	struct http_reqs *s;
	const char *why;
	enum http_ev ev;
	char *req, *want;
	size_t i, n;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		n = sizes[i];
		assert_non_null(req = malloc(n + 64));
		assert_non_null(want = malloc(n + 2));
		want[0] = '/';
		memset(want + 1, 'x', n);
		want[n + 1] = '\0';
		snprintf(req, n + 64, "GET http://a%s HTTP/1.1\r\n\r\n", want);
		h = head_of(&s, req, &ev, &why);
		assert_int_equal(ev, HTTP_EV_HEAD);
		assert_string_equal(h->origin_target, want);
		assert_int_equal(h->target_len, n + 9);
		http_reqs_free(s);
		free(req);
		free(want);
	}
}

static void
t_upgrade(void **state)
{
	static const char req[] = "GET /ws HTTP/1.1\r\nHost: a\r\n"
	    "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
	static const char next[] = "GET /again HTTP/1.1\r\nHost: a\r\n\r\n";
	const struct http_head *h;
	struct http_reqs *s;
	const char *why;
	enum http_ev ev;
	size_t used;

	h = head_of(&s, req, &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_true(h->upgrade);
	assert_int_equal(http_reqs_upgrade_refused(s), SL_ERR_INVALID);
	ev = http_reqs_feed(s, NULL, 0, &used, &h, &why);
	assert_int_equal(ev, HTTP_EV_END);
	ev = http_reqs_feed(s, NULL, 0, &used, &h, &why);
	assert_int_equal(ev, HTTP_EV_TUNNEL);
	/* The origin said no: requests go on. */
	assert_int_equal(http_reqs_upgrade_refused(s), 0);
	ev = http_reqs_feed(s, (const uint8_t *)next, sizeof(next) - 1, &used,
	    &h, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_int_equal(used, sizeof(next) - 1);
	assert_string_equal(h->target, "/again");
	assert_false(h->upgrade);
	http_reqs_free(s);

	/* Refused right after its END, before the TUNNEL was asked for. */
	h = head_of(&s, req, &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	ev = http_reqs_feed(s, NULL, 0, &used, &h, &why);
	assert_int_equal(ev, HTTP_EV_END);
	assert_int_equal(http_reqs_upgrade_refused(s), 0);
	ev = http_reqs_feed(s, (const uint8_t *)next, sizeof(next) - 1, &used,
	    &h, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_string_equal(h->target, "/again");
	assert_int_equal(http_reqs_upgrade_refused(s), SL_ERR_INVALID);
	http_reqs_free(s);

	h = head_of(&s, "GET / HTTP/1.1\r\nConnection: keep-alive\r\n"
	    "Connection: x, UPGRADE \r\nUpgrade: websocket\r\n\r\n", &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_true(h->upgrade);
	http_reqs_free(s);

	/* Only websocket, alone, is a passable upgrade. */
	h = head_of(&s, "GET / HTTP/1.1\r\nConnection: upgrade\r\n"
	    "Upgrade: WebSocket\r\n\r\n", &ev, &why);
	assert_true(h->upgrade);
	assert_true(http_upgrade_websocket_only(h));
	http_reqs_free(s);
	{
		static const char *const bad[] = { "h2c", "websocket, h2c",
		    "h2c, websocket", "websocket/13", "TLS/1.2", "websocketx",
		    "websocket,", NULL };
		char line[160];
		size_t k;

		for (k = 0; bad[k] != NULL; k++) {
			snprintf(line, sizeof(line), "GET / HTTP/1.1\r\nConnection: "
			    "upgrade\r\nUpgrade: %s\r\n\r\n", bad[k]);
			h = head_of(&s, line, &ev, &why);
			assert_int_equal(ev, HTTP_EV_HEAD);
			assert_false(http_upgrade_websocket_only(h));
			http_reqs_free(s);
		}
	}
	h = head_of(&s, "GET / HTTP/1.1\r\nConnection: upgrade\r\n"
	    "Upgrade: websocket\r\nUpgrade: h2c\r\n\r\n", &ev, &why);
	if (ev == HTTP_EV_HEAD)
		assert_false(http_upgrade_websocket_only(h));
	http_reqs_free(s);

	/*
	 * llhttp reads Proxy-Connection as Connection; the origin never sees
	 * it (it is not serialised), so an upgrade asked for there is refused.
	 */
	assert_string_equal(refusal("GET / HTTP/1.1\r\nProxy-Connection: upgrade\r\n"
	    "Upgrade: websocket\r\n\r\n"), "ambiguous upgrade");
	h = head_of(&s, "GET http://a/ HTTP/1.0\r\nProxy-Connection: keep-alive\r\n\r\n",
	    &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_true(h->keep_alive);	/* to us, the proxy */
	assert_false(h->upgrade);
	http_reqs_free(s);

	/* Upgrade without Connection: upgrade is no upgrade. */
	h = head_of(&s, "GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n", &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_false(h->upgrade);
	http_reqs_free(s);
}

/* An upgrade request with a body: the body ends before the tunnel. */
static void
t_upgrade_body(void **state)
{
	static const char req[] = "POST /u HTTP/1.1\r\nHost: a\r\n"
	    "Connection: upgrade\r\nUpgrade: x\r\nContent-Length: 3\r\n\r\n"
	    "abcTUNNELDATA";
	size_t head = sizeof(req) - 1 - 13;
	struct trace t;

	run_whole(S(req), &t);
	assert_int_equal(t.n, 3);
	assert_int_equal(t.ev[0], HTTP_EV_HEAD);
	assert_int_equal(t.off[0], head);
	assert_int_equal(t.ev[1], HTTP_EV_END);
	assert_int_equal(t.off[1], head + 3);
	assert_int_equal(t.ev[2], HTTP_EV_TUNNEL);
	assert_int_equal(t.off[2], head + 3);
	assert_split_invariant(S(req), &t);
}

/* ---- Host ---------------------------------------------------------------- */

static void
t_host(void **state)
{
	struct http_reqs *s;
	const struct http_head *h;
	const char *why;
	enum http_ev ev;

	h = head_of(&s, "GET / HTTP/1.1\r\nHost: WWW.Example.COM.:8080\r\n\r\n",
	    &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_true(h->has_host);
	assert_string_equal(h->host, "www.example.com");
	assert_int_equal(h->host_port, 8080);
	assert_false(h->host_is_ip);
	http_reqs_free(s);

	h = head_of(&s, "GET / HTTP/1.1\r\nHost: [2001:DB8:0::1]:8443\r\n\r\n",
	    &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_string_equal(h->host, "2001:db8::1");
	assert_true(h->host_is_ip);
	assert_int_equal(h->host_port, 8443);
	http_reqs_free(s);

	h = head_of(&s, "GET / HTTP/1.1\r\nHost: [::ffff:10.0.0.1]\r\n\r\n",
	    &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_true(h->host_is_ip);
	assert_int_equal(h->host_port, 0);
	http_reqs_free(s);

	h = head_of(&s, "GET / HTTP/1.1\r\nhOsT: 10.1.2.3\r\n\r\n", &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_string_equal(h->host, "10.1.2.3");
	assert_true(h->host_is_ip);
	http_reqs_free(s);

	/* No Host in HTTP/1.1: the parser lets it through; policy decides. */
	h = head_of(&s, "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_false(h->has_host);
	assert_string_equal(h->host, "");
	http_reqs_free(s);

	assert_string_equal(refusal("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
	    "repeated host");
	assert_string_equal(refusal("GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n"),
	    "repeated host");
}

static void
t_bad_host(void **state)
{
	static const char *bad[] = {
		"", "exa mple.com", "a..b", "a:0", "a:65536", "a:8o",
		"a:80:90", "[::1", "[::1]x", "[::1]:", "::1", "[1.2.3.4]",
		"127.1", "0x7f.0.0.1", "2130706433", "1.2.3.4.", "a_b%2e.c",
		"[fe80::1%25eth0]", "example.com:", "\xc3\xa9.example",
		"a/b", "user@host",
	};
	char req[256];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *why;

		snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n",
		    bad[i]);
		why = refusal(req);
		if (why == NULL || strcmp(why, "bad host") != 0)
			fail_msg("Host \"%s\": %s", bad[i], why ? why : "accepted");
	}
}

/* ---- the smuggling corpus ------------------------------------------------ */

struct bad {
	const char	*name;
	const char	*req;
	size_t		 len;
	const char	*why;
	size_t		 max_heads;	/* HEADs allowed before the refusal */
};

#define SMUGGLED "GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n"
#define POST "POST / HTTP/1.1\r\nHost: a\r\n"
#define BAD(n, r, w, h)	{ n, r, sizeof(r) - 1, w, h }

static const struct bad corpus[] = {
	/* CL.TE and TE.CL */
	BAD("CL.TE", POST "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "0\r\n\r\nX" SMUGGLED, "content-length with transfer-encoding", 0),
	BAD("TE.CL", POST "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
	    "8\r\nSMUGGLED\r\n0\r\n\r\n" SMUGGLED,
	    "content-length with transfer-encoding", 0),
	BAD("CL empty TE", POST "Content-Length:\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "0\r\n\r\n" SMUGGLED, "invalid content-length", 0),
	/* duplicate and odd Content-Length */
	BAD("CL twice equal", POST "Content-Length: 4\r\nContent-Length: 4\r\n\r\n"
	    "abcd" SMUGGLED, "repeated content-length", 0),
	BAD("CL twice differ", POST "Content-Length: 0\r\nContent-Length: 37\r\n\r\n"
	    SMUGGLED, "repeated content-length", 0),
	BAD("CL list", POST "Content-Length: 4, 4\r\n\r\nabcd" SMUGGLED,
	    "invalid content-length", 0),
	BAD("CL plus", POST "Content-Length: +4\r\n\r\nabcd" SMUGGLED,
	    "invalid content-length", 0),
	BAD("CL negative", POST "Content-Length: -1\r\n\r\n" SMUGGLED,
	    "invalid content-length", 0),
	BAD("CL overflow", POST "Content-Length: 99999999999999999999999\r\n\r\n"
	    SMUGGLED, "invalid content-length", 0),
	BAD("CL hex", POST "Content-Length: 0x10\r\n\r\n" SMUGGLED,
	    "invalid content-length", 0),
	/* TE.TE obfuscations */
	BAD("TE chunked, identity", POST "Transfer-Encoding: chunked, identity\r\n\r\n"
	    "0\r\n\r\n" SMUGGLED, "bad transfer-encoding", 0),
	BAD("TE identity", POST "Transfer-Encoding: identity\r\n\r\n" SMUGGLED,
	    "bad transfer-encoding", 0),
	BAD("TE xchunked", POST "Transfer-Encoding: xchunked\r\n\r\n"
	    "0\r\n\r\n" SMUGGLED, "bad transfer-encoding", 0),
	BAD("TE chunkedx", POST "Transfer-Encoding: chunkedx\r\n\r\n"
	    "0\r\n\r\n" SMUGGLED, "bad transfer-encoding", 0),
	BAD("TE chunked twice in list", POST "Transfer-Encoding: chunked, chunked\r\n\r\n"
	    "0\r\n\r\n" SMUGGLED, "bad transfer-encoding", 0),
	BAD("TE twice", POST "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "0\r\n\r\n" SMUGGLED, "repeated transfer-encoding", 0),
	BAD("TE gzip then chunked headers", POST "Transfer-Encoding: gzip\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" SMUGGLED,
	    "repeated transfer-encoding", 0),
	BAD("TE empty", POST "Transfer-Encoding:\r\n\r\n0\r\n\r\n" SMUGGLED,
	    "bad transfer-encoding", 0),
	BAD("TE empty element", POST "Transfer-Encoding: ,chunked\r\n\r\n"
	    "0\r\n\r\n" SMUGGLED, "bad transfer-encoding", 0),
	BAD("TE params", POST "Transfer-Encoding: chunked;q=1\r\n\r\n"
	    "0\r\n\r\n" SMUGGLED, "bad transfer-encoding", 0),
	BAD("TE space before colon", POST "Transfer-Encoding : chunked\r\n\r\n"
	    "0\r\n\r\n" SMUGGLED, "whitespace before colon", 0),
	BAD("TE vertical tab", POST "Transfer-Encoding:\x0b" "chunked\r\n\r\n"
	    "0\r\n\r\n" SMUGGLED, "invalid header value", 0),
	BAD("TE obs-fold", POST "Transfer-Encoding:\r\n chunked\r\n\r\n"
	    "0\r\n\r\n" SMUGGLED, "obs-fold", 0),
	BAD("TE http/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "0\r\n\r\n" SMUGGLED, "transfer-encoding in http/1.0", 0),
	/* chunk framing: the head is fine, the body is not */
	BAD("chunk size overflow", POST "Transfer-Encoding: chunked\r\n\r\n"
	    "ffffffffffffffffff\r\n" SMUGGLED, "invalid chunk size", 1),
	BAD("chunk size 17 digits", POST "Transfer-Encoding: chunked\r\n\r\n"
	    "00000000000000005\r\nhello\r\n0\r\n\r\n" SMUGGLED,
	    "invalid chunk size", 1),
	BAD("chunk size junk", POST "Transfer-Encoding: chunked\r\n\r\n"
	    "5x\r\nhello\r\n0\r\n\r\n" SMUGGLED, "invalid chunk size", 1),
	BAD("chunk size space", POST "Transfer-Encoding: chunked\r\n\r\n"
	    "5 \r\nhello\r\n0\r\n\r\n" SMUGGLED, "invalid chunk size", 1),
	BAD("chunk size 0x", POST "Transfer-Encoding: chunked\r\n\r\n"
	    "0x5\r\nhello\r\n0\r\n\r\n" SMUGGLED, "invalid chunk size", 1),
	BAD("chunk size negative", POST "Transfer-Encoding: chunked\r\n\r\n"
	    "-1\r\n" SMUGGLED, "invalid chunk size", 1),
	BAD("chunk size empty", POST "Transfer-Encoding: chunked\r\n\r\n"
	    "\r\n" SMUGGLED, "invalid chunk size", 1),
	BAD("chunk size bare LF", POST "Transfer-Encoding: chunked\r\n\r\n"
	    "5\nhello\r\n0\r\n\r\n" SMUGGLED, "bare LF", 1),
	BAD("chunk data no CRLF", POST "Transfer-Encoding: chunked\r\n\r\n"
	    "5\r\nhelloXX0\r\n\r\n" SMUGGLED, "invalid chunk framing", 1),
	BAD("chunk data bare LF", POST "Transfer-Encoding: chunked\r\n\r\n"
	    "5\r\nhello\n0\r\n\r\n" SMUGGLED, "bare LF", 1),
	BAD("chunk ext control", POST "Transfer-Encoding: chunked\r\n\r\n"
	    "5;a\x01\r\nhello\r\n0\r\n\r\n" SMUGGLED, "invalid chunk extension", 1),
	BAD("trailer field", POST "Transfer-Encoding: chunked\r\n\r\n"
	    "0\r\nX-Trailer: 1\r\n\r\n" SMUGGLED, "trailer fields", 1),
	BAD("last chunk bare LF", POST "Transfer-Encoding: chunked\r\n\r\n"
	    "0\r\n\n" SMUGGLED, "bare LF", 1),
	/* line ends */
	BAD("bare LF request line", "GET / HTTP/1.1\nHost: a\r\n\r\n" SMUGGLED,
	    "bare LF", 0),
	BAD("bare LF header", "GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n" SMUGGLED,
	    "bare LF", 0),
	BAD("bare LF end", "GET / HTTP/1.1\r\nHost: a\r\n\n" SMUGGLED,
	    "bare LF", 0),
	BAD("bare CR header", "GET / HTTP/1.1\r\nHost: a\rX: y\r\n\r\n" SMUGGLED,
	    "bare CR", 0),
	BAD("bare CR request line", "GET / HTTP/1.1\rHost: a\r\n\r\n" SMUGGLED,
	    "bare CR", 0),
	BAD("bare CR in value", "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n" SMUGGLED,
	    "bare CR", 0),
	BAD("bare CR end", "GET / HTTP/1.1\r\nHost: a\r\n\rX" SMUGGLED,
	    "bare CR", 0),
	/* obs-fold */
	BAD("obs-fold space", "GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n" SMUGGLED,
	    "obs-fold", 0),
	BAD("obs-fold tab", "GET / HTTP/1.1\r\nX: a\r\n\tb\r\n\r\n" SMUGGLED,
	    "obs-fold", 0),
	BAD("space after request line", "GET / HTTP/1.1\r\n Host: a\r\n\r\n"
	    SMUGGLED, "obs-fold", 0),
	/* NUL and control bytes */
	BAD("NUL in value", "GET / HTTP/1.1\r\nX: a\0b\r\n\r\n" SMUGGLED,
	    "NUL in head", 0),
	BAD("NUL in name", "GET / HTTP/1.1\r\nX\0: a\r\n\r\n" SMUGGLED,
	    "NUL in head", 0),
	BAD("NUL in target", "GET /a\0b HTTP/1.1\r\n\r\n" SMUGGLED,
	    "NUL in head", 0),
	BAD("NUL in method", "G\0T / HTTP/1.1\r\n\r\n" SMUGGLED,
	    "NUL in head", 0),
	BAD("DEL in value", "GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n" SMUGGLED,
	    "invalid header value", 0),
	BAD("ctl in value", "GET / HTTP/1.1\r\nX: a\x1b[0m\r\n\r\n" SMUGGLED,
	    "invalid header value", 0),
	/* header names */
	BAD("space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n" SMUGGLED,
	    "whitespace before colon", 0),
	BAD("tab before colon", "GET / HTTP/1.1\r\nHost\t: a\r\n\r\n" SMUGGLED,
	    "whitespace before colon", 0),
	BAD("name not a token", "GET / HTTP/1.1\r\nHo(st: a\r\n\r\n" SMUGGLED,
	    "invalid header name", 0),
	BAD("name with slash", "GET / HTTP/1.1\r\nX/Y: a\r\n\r\n" SMUGGLED,
	    "invalid header name", 0),
	BAD("name 8-bit", "GET / HTTP/1.1\r\nX\xc3\xa9: a\r\n\r\n" SMUGGLED,
	    "invalid header name", 0),
	BAD("empty name", "GET / HTTP/1.1\r\n: a\r\n\r\n" SMUGGLED,
	    "empty header name", 0),
	BAD("no colon", "GET / HTTP/1.1\r\nHost\r\n\r\n" SMUGGLED,
	    "header line without colon", 0),
	/* request line */
	BAD("fragment", "GET /a#b HTTP/1.1\r\n\r\n", "fragment in target", 0),
	BAD("HTTP/2.0", "GET / HTTP/2.0\r\n\r\n", "unsupported http version", 0),
	BAD("HTTP/0.9 line", "GET / HTTP/0.9\r\n\r\n", "unsupported http version", 0),
	BAD("HTTP/1.2", "GET / HTTP/1.2\r\n\r\n", "unsupported http version", 0),
	BAD("PRI", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "unsupported http version", 0),
	BAD("simple request", "GET /\r\n\r\n", "malformed request line", 0),
	BAD("lower-case version", "GET / http/1.1\r\n\r\n", "malformed request line", 0),
	BAD("long version", "GET / HTTP/1.10\r\n\r\n", "malformed request line", 0),
	BAD("two spaces", "GET  / HTTP/1.1\r\n\r\n", "malformed request line", 0),
	BAD("tab separator", "GET\t/ HTTP/1.1\r\n\r\n", "malformed request line", 0),
	BAD("space at end", "GET / HTTP/1.1 \r\n\r\n", "malformed request line", 0),
	BAD("8-bit target", "GET /\xc3\xa9 HTTP/1.1\r\n\r\n", "malformed request line", 0),
	BAD("unknown method", "FOO / HTTP/1.1\r\n\r\n", "unknown method", 0),
	BAD("lower-case method", "get / HTTP/1.1\r\n\r\n", "unknown method", 0),
	BAD("long method", "ABCDEFGHIJKLMNOPQRSTUVWXYZ / HTTP/1.1\r\n\r\n",
	    "unknown method", 0),
};

static void
t_smuggling(void **state)
{
	size_t i;
	struct trace t;

	for (i = 0; i < sizeof(corpus) / sizeof(corpus[0]); i++) {
		const struct bad *b = &corpus[i];

		run_whole(b->req, b->len, &t);
		if (t.n == 0 || t.ev[t.n - 1] != HTTP_EV_INVALID)
			fail_msg("%s: not refused (%zu events, last %s)", b->name,
			    t.n, t.n ? evname(t.ev[t.n - 1]) : "-");
		if (strcmp(t.reason, b->why) != 0)
			fail_msg("%s: \"%s\", not \"%s\"", b->name, t.reason, b->why);
		if (t.heads > b->max_heads)
			fail_msg("%s: %zu heads", b->name, t.heads);
		if (t.heads > 0 && strcmp(t.target0, "/") != 0)
			fail_msg("%s: head for %s", b->name, t.target0);
		assert_split_invariant(b->req, b->len, &t);
	}
}

/* A refused stream stays refused. */
static void
t_dead_stays_dead(void **state)
{
	static const char bad[] = "GET / HTTP/1.1\r\nHost : a\r\n\r\n";
	static const char good[] = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
	struct http_reqs *s;
	const struct http_head *h;
	const char *why, *why2;
	enum http_ev ev;
	size_t used;

	assert_non_null(s = http_reqs_new(LIMIT));
	ev = http_reqs_feed(s, (const uint8_t *)bad, sizeof(bad) - 1, &used,
	    &h, &why);
	assert_int_equal(ev, HTTP_EV_INVALID);
	assert_int_equal(used, 0);
	ev = http_reqs_feed(s, (const uint8_t *)good, sizeof(good) - 1, &used,
	    &h, &why2);
	assert_int_equal(ev, HTTP_EV_INVALID);
	assert_ptr_equal(why, why2);
	assert_null(h);
	http_reqs_free(s);
}

/* ---- limits -------------------------------------------------------------- */

static void
t_header_limit(void **state)
{
	static const char req[] = "GET /x HTTP/1.1\r\nHost: a\r\n\r\n";	/* 28 */
	static const char two[] = "GET /x HTTP/1.1\r\nHost: a\r\n\r\n"
	    "GET /x HTTP/1.1\r\nHost: a\r\n\r\n";
	size_t len = sizeof(req) - 1;
	struct trace t;

	assert_int_equal(len, 28);
	run_cuts(req, len, len, NULL, 0, &t);
	assert_int_equal(t.ev[0], HTTP_EV_HEAD);
	run_cuts(req, len, len - 1, NULL, 0, &t);
	assert_int_equal(t.n, 1);
	assert_int_equal(t.ev[0], HTTP_EV_INVALID);
	assert_string_equal(t.reason, "header too large");
	/* The limit is per head, not per stream. */
	run_cuts(two, sizeof(two) - 1, len, NULL, 0, &t);
	assert_int_equal(t.n, 4);
	assert_int_equal(t.heads, 2);
	/* Leading empty lines count. */
	run_cuts("\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n", len + 2, len + 1,
	    NULL, 0, &t);
	assert_int_equal(t.ev[0], HTTP_EV_INVALID);
	assert_string_equal(t.reason, "header too large");
	/* A large head under a large limit; split so the arena grows. */
	{
		size_t n = 60000, i, cut = 30001;
		char *big = malloc(n);

		assert_non_null(big);
		memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
		for (i = 19; i < n - 4; i++)
			big[i] = 'v';
		memcpy(big + n - 4, "\r\n\r\n", 4);
		run_cuts(big, n, LIMIT, &cut, 1, &t);
		assert_int_equal(t.ev[0], HTTP_EV_HEAD);
		assert_int_equal(t.off[0], n);
		run_cuts(big, n, n - 1, &cut, 1, &t);
		assert_int_equal(t.ev[0], HTTP_EV_INVALID);
		assert_string_equal(t.reason, "header too large");
		free(big);
	}
}

static void
t_header_count(void **state)
{
	char *req = malloc(16 * 200 + 64), *p;
	const struct http_head *h;
	struct http_reqs *s;
	const char *why;
	enum http_ev ev;
	int i;

	assert_non_null(req);
	p = req + sprintf(req, "GET / HTTP/1.1\r\n");
	for (i = 0; i < HTTP_MAX_HEADERS; i++)
		p += sprintf(p, "X-%d: %d\r\n", i, i);
	strcpy(p, "\r\n");
	h = head_of(&s, req, &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_int_equal(h->nheaders, HTTP_MAX_HEADERS);
	assert_string_equal(h->headers[99].name, "X-99");
	assert_string_equal(h->headers[99].value, "99");
	http_reqs_free(s);
	sprintf(p, "X-%d: %d\r\n\r\n", i, i);
	assert_string_equal(refusal(req), "too many headers");
	free(req);
}

static void
t_target_length(void **state)
{
	size_t n = HTTP_MAX_TARGET;
	char *req = malloc(n + 64);
	const struct http_head *h;
	struct http_reqs *s;
	const char *why;
	enum http_ev ev;

	assert_non_null(req);
	memcpy(req, "GET /", 5);
	memset(req + 5, 'a', n - 1);
	strcpy(req + 4 + n, " HTTP/1.1\r\n\r\n");
	h = head_of(&s, req, &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_int_equal(h->target_len, n);
	http_reqs_free(s);
	memset(req + 5, 'a', n);
	strcpy(req + 5 + n, " HTTP/1.1\r\n\r\n");
	assert_string_equal(refusal(req), "target too long");
	free(req);
}

/* ---- serialisation ------------------------------------------------------- */

static void
t_serialize(void **state)
{
	static const char req[] = "GET http://www.example.com:8080/p?q=1 HTTP/1.1\r\n"
	    "Host: www.example.com:8080\r\n"
	    "Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"
	    "Accept:   text/html  \r\n"
	    "proxy-connection: keep-alive\r\n"
	    "X-Proxy-Thing: kept\r\n"
	    "Empty:\r\n\r\n";
	static const char want[] = "GET /p?q=1 HTTP/1.1\r\n"
	    "Host: www.example.com:8080\r\n"
	    "Accept: text/html\r\n"
	    "X-Proxy-Thing: kept\r\n"
	    "Empty: \r\n\r\n";
	static const char req10[] = "POST /o?x HTTP/1.0\r\nContent-Length: 0\r\n\r\n";
	const struct http_head *h;
	struct http_reqs *s;
	const char *why;
	enum http_ev ev;
	char out[512];
	size_t n = sizeof(want) - 1;

	h = head_of(&s, req, &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	memset(out, '#', sizeof(out));
	assert_int_equal(http_head_serialize_origin(h, out, sizeof(out)), n);
	assert_memory_equal(out, want, n);
	assert_int_equal(out[n], '#');
	memset(out, '#', sizeof(out));
	assert_int_equal(http_head_serialize_origin(h, out, n), n);
	assert_memory_equal(out, want, n);
	memset(out, '#', sizeof(out));
	assert_int_equal(http_head_serialize_origin(h, out, n - 1), SL_ERR_TOO_BIG);
	assert_int_equal(out[0], '#');
	assert_int_equal(http_head_serialize_origin(h, out, 0), SL_ERR_TOO_BIG);
	http_reqs_free(s);

	h = head_of(&s, req10, &ev, &why);
	assert_int_equal(ev, HTTP_EV_HEAD);
	assert_int_equal(http_head_serialize_origin(h, out, sizeof(out)),
	    sizeof(req10) - 1);
	assert_memory_equal(out, req10, sizeof(req10) - 1);
	http_reqs_free(s);
}

/* ---- headers that speak for a gateway ---------------------------------- */

static enum http_claim
claim(const char *name)
{
	return http_header_claim(name, strlen(name));
}

static void
t_header_claim(void **state)
{
	static const char *const route[] = { "Forwarded", "forwarded",
	    "FORWARDED", "X-Forwarded-For", "x-forwarded-host",
	    "X-FORWARDED-PROTO", "X-Forwarded-Port", "X-Forwarded-Server",
	    "X-Forwarded-Prefix", "X-Forwarded-Uri", "x-forwarded-scheme",
	    "X-Forwarded-SSL", "X-Forwarded-", "X-Original-URL",
	    "x-original-url", "X-Rewrite-URL", "X-REWRITE-URL", "X-Real-IP",
	    "x-real-ip", "X-Client-IP", "True-Client-IP", "true-client-ip",
	    "X-Envoy-Original-Path", "x-envoy-external-address", "X-Envoy-",
	    "Sluice-Identity", "sluice-identity", "Sluice-Foo", "SLUICE-",
	    NULL };
	static const char *const method[] = { "X-HTTP-Method-Override",
	    "x-http-method-override", "X-Http-Method", "X-HTTP-METHOD",
	    "X-Method-Override", "x-method-override", NULL };
	static const char *const none[] = { "", "x", "Host", "Accept",
	    "Authorization", "X-Forwarded", "x-forwardedfor", "X-ForwardedFor",
	    "xforwarded-for", "X_Forwarded_For", "Xforwarded-", "Forward",
	    "Forwarded-For", "Forwardedx", "X-Forwarde-For", "sluice",
	    "sluicex", "SluiceX-Foo", "X-Sluice-Identity", "X-Envoy",
	    "X-Envoyx-A", "envoy-a", "X-Original-URLs", "X-Original-UR",
	    "X-Real-IPv6", "X-Client-IPs", "Client-IP", "X-Rewrite",
	    "X-HTTP-Method-Overrides", "X-HTTP-Methods", "X-HTTP-Method-",
	    "X-Method", "X-Method-Override-X", "HTTP-Method-Override",
	    "X-Request-Id", NULL };
	size_t i;

	(void)state;
	for (i = 0; route[i] != NULL; i++) {
		if (claim(route[i]) != HTTP_CLAIM_ROUTE)
			print_message("'%s': not a route claim\n", route[i]);
		assert_int_equal(claim(route[i]), HTTP_CLAIM_ROUTE);
	}
	for (i = 0; method[i] != NULL; i++) {
		if (claim(method[i]) != HTTP_CLAIM_METHOD)
			print_message("'%s': not a method claim\n", method[i]);
		assert_int_equal(claim(method[i]), HTTP_CLAIM_METHOD);
	}
	for (i = 0; none[i] != NULL; i++) {
		if (claim(none[i]) != HTTP_CLAIM_NONE)
			print_message("'%s': a claim\n", none[i]);
		assert_int_equal(claim(none[i]), HTTP_CLAIM_NONE);
	}
	/* The length decides, not a NUL: a prefix of a longer buffer. */
	assert_int_equal(http_header_claim("X-Real-IPv6", 9),
	    HTTP_CLAIM_ROUTE);
	assert_int_equal(http_header_claim("X-Forwarded-For", 11),
	    HTTP_CLAIM_NONE);
	assert_int_equal(http_header_claim("X-Forwarded-For", 12),
	    HTTP_CLAIM_ROUTE);
	assert_int_equal(http_header_claim("sluice-", 6), HTTP_CLAIM_NONE);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_simple_get),
		cmocka_unit_test(t_req_trailers),
		cmocka_unit_test(t_trailer_fields),
		cmocka_unit_test(t_hop_names),
		cmocka_unit_test(t_conn_first),
		cmocka_unit_test(t_pipelined),
		cmocka_unit_test(t_after_close),
		cmocka_unit_test(t_between_reset),
		cmocka_unit_test(t_keepalive_flags),
		cmocka_unit_test(t_post_split),
		cmocka_unit_test(t_chunked_split),
		cmocka_unit_test(t_chunked_flag),
		cmocka_unit_test(t_leading_crlf),
		cmocka_unit_test(t_connect),
		cmocka_unit_test(t_absolute_form),
		cmocka_unit_test(t_absolute_long),
		cmocka_unit_test(t_upgrade),
		cmocka_unit_test(t_upgrade_body),
		cmocka_unit_test(t_host),
		cmocka_unit_test(t_bad_host),
		cmocka_unit_test(t_smuggling),
		cmocka_unit_test(t_dead_stays_dead),
		cmocka_unit_test(t_header_limit),
		cmocka_unit_test(t_header_count),
		cmocka_unit_test(t_target_length),
		cmocka_unit_test(t_serialize),
		cmocka_unit_test(t_header_claim),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
