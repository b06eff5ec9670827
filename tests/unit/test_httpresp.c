/*
 * test_httpresp.c: the upstream response stream (httpresp.c) and the
 * upstream request head (httpwrite.c).
 */
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
#include "parse/httpresp.h"
#include "parse/httpwrite.h"

#define LIMIT	65536
#define MAXEV	32
#define OUTMAX	8192

/*
 * What a stream reported for one input: the events but NEED_MORE with
 * absolute offsets, and what a relay would have sent to the sandbox (each
 * head's out, then the body bytes as consumed).
 */
struct trace {
	enum http_resp_ev ev[MAXEV];
	size_t		 off[MAXEV];
	unsigned	 status[MAXEV];	/* of the head, for HEAD events */
	size_t		 n;
	char		 out[OUTMAX];
	size_t		 out_len;
	const char	*reason;
	int		 in_body;
	size_t		 pending;	/* http_resps_pending() at the end */
};

static const char *
evname(enum http_resp_ev ev)
{
	switch (ev) {
	case HTTP_RESP_NEED_MORE:	return "NEED_MORE";
	case HTTP_RESP_HEAD:		return "HEAD";
	case HTTP_RESP_END:		return "END";
	case HTTP_RESP_TUNNEL:		return "TUNNEL";
	case HTTP_RESP_INVALID:		return "INVALID";
	}
	return "?";
}

static void
emit(struct trace *t, const void *p, size_t n)
{
	assert_true(n <= OUTMAX - t->out_len);
	if (n == 0)
		return;
	memcpy(t->out + t->out_len, p, n);
	t->out_len += n;
}

static void
record(struct trace *t, enum http_resp_ev ev, size_t off, unsigned status)
{
	assert_true(t->n < MAXEV);
	t->ev[t->n] = ev;
	t->off[t->n] = off;
	t->status[t->n] = status;
	t->n++;
}

/*
 * Handles one event as a relay would.  Returns 1 when the stream is done
 * (INVALID or TUNNEL), else 0.
 */
static int
handle(struct trace *t, enum http_resp_ev ev, const uint8_t *p, size_t used,
    const struct http_resp_head *h, const char *why, size_t off)
{
	switch (ev) {
	case HTTP_RESP_NEED_MORE:
		assert_null(h);
		assert_null(why);
		if (t->in_body)
			emit(t, p, used);
		return 0;
	case HTTP_RESP_INVALID:
		assert_non_null(why);
		assert_null(h);
		assert_int_equal(used, 0);
		t->reason = why;
		record(t, ev, 0, 0);	/* where it is found is no contract */
		return 1;
	case HTTP_RESP_HEAD:
		assert_non_null(h);
		assert_false(t->in_body);
		emit(t, h->out, h->out_len);
		t->in_body = 1;
		record(t, ev, off, h->status);
		return 0;
	case HTTP_RESP_END:
		assert_non_null(h);
		assert_true(t->in_body);
		emit(t, p, used);
		t->in_body = 0;
		record(t, ev, off, 0);
		return 0;
	case HTTP_RESP_TUNNEL:
		assert_non_null(h);
		assert_int_equal(used, 0);
		record(t, ev, off, 0);
		return 1;
	}
	fail_msg("unknown event");
	return 1;
}

/* Feeds one piece, handling every event until it is consumed; 1 when done. */
static int
feed_piece(struct http_resps *s, struct trace *t, const uint8_t *p,
    size_t len, size_t base)
{
	const struct http_resp_head *h;
	const char *why;
	size_t used, pos = 0;
	enum http_resp_ev ev;
	int guard;

	for (guard = 0; guard < 1000; guard++) {
		ev = http_resps_feed(s, len > pos ? p + pos : NULL, len - pos,
		    &used, &h, &why);
		assert_true(used <= len - pos);
		if (handle(t, ev, p + pos, used, h, why, base + pos + used))
			return 1;
		pos += used;
		if (ev == HTTP_RESP_NEED_MORE) {
			assert_int_equal(pos, len);
			return 0;
		}
	}
	fail_msg("no progress");
	return 1;
}

/* After the last byte: the upstream closes. */
static void
finish(struct http_resps *s, struct trace *t, size_t len)
{
	const struct http_resp_head *h;
	const char *why;
	enum http_resp_ev ev;
	int guard;

	for (guard = 0; guard < 8; guard++) {
		ev = http_resps_finish(s, &h, &why);
		if (ev == HTTP_RESP_NEED_MORE)
			return;
		if (handle(t, ev, NULL, 0, h, why, len) != 0 ||
		    ev != HTTP_RESP_END)
			return;
	}
	fail_msg("finish does not settle");
}

/* run_cuts' streams take trailer fields (http_resps_trailers). */
static int trailers_on;
#define TRAILERS_BIG	9000	/* past TRAILER_MAX (8192) */

/*
 * Feeds buf, with the given methods expected, cut at the given positions
 * (sorted, each < len); then finishes if fin.
 */
static void
run_cuts(const char *const *methods, const void *buf, size_t len,
    size_t limit, const size_t *cuts, size_t ncuts, int fin, struct trace *t)
{
	const uint8_t *b = buf;
	struct http_resps *s;
	size_t i, from = 0, to;
	int done = 0;

	memset(t, 0, sizeof(*t));
	assert_non_null(s = http_resps_new(limit));
	if (trailers_on)
		http_resps_trailers(s, 1);
	for (i = 0; methods != NULL && methods[i] != NULL; i++)
		assert_int_equal(http_resps_expect(s, methods[i]), 0);
	for (i = 0; i <= ncuts && !done; i++) {
		to = i < ncuts ? cuts[i] : len;
		done = feed_piece(s, t, b + from, to - from, from);
		from = to;
	}
	if (!done && fin)
		finish(s, t, len);
	t->pending = http_resps_pending(s);
	http_resps_free(s);
}

static void
run_whole(const char *const *methods, const void *buf, size_t len, int fin,
    struct trace *t)
{
	run_cuts(methods, buf, len, LIMIT, NULL, 0, fin, t);
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
	if (a->reason != NULL || b->reason != NULL)
		assert_string_equal(a->reason, b->reason);
	/* Before a refusal, how much body streamed depends on the cuts. */
	if (a->reason == NULL) {
		assert_int_equal(a->out_len, b->out_len);
		assert_memory_equal(a->out, b->out, a->out_len);
	}
	assert_int_equal(a->pending, b->pending);
}

/* The trace is the same for every single cut and for byte-at-a-time. */
static void
assert_split_invariant(const char *const *methods, const void *buf,
    size_t len, int fin, const struct trace *whole)
{
	struct trace t;
	size_t i, *cuts;

	for (i = 1; i < len; i++) {
		run_cuts(methods, buf, len, LIMIT, &i, 1, fin, &t);
		assert_same_trace(whole, &t, i);
	}
	assert_non_null(cuts = calloc(len, sizeof(*cuts)));
	for (i = 1; i < len; i++)
		cuts[i - 1] = i;
	run_cuts(methods, buf, len, LIMIT, cuts, len > 0 ? len - 1 : 0, fin, &t);
	assert_same_trace(whole, &t, 0);
	free(cuts);
}

/* The reason one response (to GET unless method says) is refused, or NULL. */
static const char *
refusal(const char *method, const char *resp)
{
	const char *const m[] = { method != NULL ? method : "GET", NULL };
	struct trace t;

	run_whole(m, resp, strlen(resp), 1, &t);
	return t.reason;
}

static void
assert_out(const struct trace *t, const char *want)
{
	if (t->out_len != strlen(want) || memcmp(t->out, want, t->out_len) != 0)
		fail_msg("sent\n%.*s\nnot\n%s", (int)t->out_len, t->out, want);
}

#define S(lit)	lit, sizeof(lit) - 1

static const char *const GET1[] = { "GET", NULL };

/* ---- framing ------------------------------------------------------------- */

static void
t_content_length(void **state)
{
	static const char r[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
	    "Content-Length: 5\r\nX-A:b\r\n\r\nhello";
	struct trace t;

	run_whole(GET1, S(r), 0, &t);
	assert_null(t.reason);
	assert_int_equal(t.n, 2);
	assert_int_equal(t.ev[0], HTTP_RESP_HEAD);
	assert_int_equal(t.off[0], sizeof(r) - 1 - 5);
	assert_int_equal(t.status[0], 200);
	assert_int_equal(t.ev[1], HTTP_RESP_END);
	assert_int_equal(t.off[1], sizeof(r) - 1);
	assert_int_equal(t.pending, 0);
	assert_out(&t, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
	    "Content-Length: 5\r\nX-A: b\r\n\r\nhello");
	assert_split_invariant(GET1, S(r), 0, &t);
}

static void
t_head_fields(void **state)
{
	static const char r[] = "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n"
	    "Location:  /x \r\n\r\n";
	const struct http_resp_head *h;
	struct http_resps *s;
	const char *why;
	size_t used;

	assert_non_null(s = http_resps_new(LIMIT));
	assert_int_equal(http_resps_expect(s, "POST"), 0);
	assert_int_equal(http_resps_pending(s), 1);
	assert_int_equal(http_resps_feed(s, (const uint8_t *)r, sizeof(r) - 1,
	    &used, &h, &why), HTTP_RESP_HEAD);
	assert_int_equal(used, sizeof(r) - 1);
	assert_null(why);
	assert_int_equal(h->status, 201);
	assert_int_equal(h->http_major, 1);
	assert_int_equal(h->http_minor, 1);
	assert_false(h->informational);
	assert_true(h->keep_alive);
	assert_false(h->close_delimited);
	assert_int_equal(h->nheaders, 2);
	assert_string_equal(h->headers[1].name, "Location");
	assert_string_equal(h->headers[1].value, "/x");
	assert_int_equal(http_resps_feed(s, NULL, 0, &used, &h, &why),
	    HTTP_RESP_END);
	assert_int_equal(used, 0);
	assert_int_equal(h->status, 201);	/* still valid */
	assert_int_equal(http_resps_pending(s), 0);
	assert_int_equal(http_resps_feed(s, NULL, 0, &used, &h, &why),
	    HTTP_RESP_NEED_MORE);
	assert_null(h);
	assert_int_equal(http_resps_finish(s, &h, &why), HTTP_RESP_NEED_MORE);
	/* Closed: nothing may follow. */
	assert_int_equal(http_resps_feed(s, (const uint8_t *)r, 1, &used, &h,
	    &why), HTTP_RESP_INVALID);
	http_resps_free(s);
	http_resps_free(NULL);
}

static void
t_chunked(void **state)
{
	static const char r[] = "HTTP/1.1 200 OK\r\n"
	    "Transfer-Encoding: gzip, chunked\r\n\r\n"
	    "5;ext=\"v\"\r\nhello\r\n"
	    "A\r\n0123456789\r\n"
	    "0\r\n\r\n";
	static const char body[] = "5;ext=\"v\"\r\nhello\r\nA\r\n0123456789\r\n"
	    "0\r\n\r\n";
	struct trace t;

	run_whole(GET1, S(r), 0, &t);
	assert_null(t.reason);
	assert_int_equal(t.n, 2);
	assert_int_equal(t.ev[1], HTTP_RESP_END);
	assert_int_equal(t.off[1], sizeof(r) - 1);
	assert_int_equal(t.off[0], sizeof(r) - sizeof(body));
	/* The body went on byte for byte, with its chunk framing. */
	assert_out(&t, r);
	assert_split_invariant(GET1, S(r), 0, &t);
}

/* Transfer-codings besides chunked are relayed, and said so. */
static void
t_transfer_coded(void **state)
{
	static const char *const heads[] = {
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: x-foo ,Chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\ntransfer-encoding:  CHUNKED \r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	};
	static const int coded[] = { 1, 1, 0, 0, 0 };
	const struct http_resp_head *h;
	struct http_resps *s;
	const char *why;
	size_t i, used;

	for (i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		assert_non_null(s = http_resps_new(LIMIT));
		assert_int_equal(http_resps_expect(s, "GET"), 0);
		assert_int_equal(http_resps_feed(s, (const uint8_t *)heads[i],
		    strlen(heads[i]), &used, &h, &why), HTTP_RESP_HEAD);
		assert_int_equal(h->transfer_coded, coded[i]);
		http_resps_free(s);
	}
}

/* Trailer fields, allowed: relayed as body bytes, bounded, checked. */
static void
t_trailers(void **state)
{
	static const char r[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked"
	    "\r\nContent-Type: application/grpc\r\n\r\n"
	    "5\r\nhello\r\n0\r\ngrpc-status: 0\r\ngrpc-message: \tall good \r\n"
	    "\r\nHTTP/1.1 204 No Content\r\n\r\n";
	static const char want[] = "0\r\ngrpc-status: 0\r\n"
	    "grpc-message: \tall good \r\n\r\n";
	static const char *const GET2[] = { "GET", "GET", NULL };
#define TR(x) "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" x, \
	sizeof("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" x) - 1
	static const struct {
		const char *resp;
		size_t len;
		const char *why;
	} bad[] = {
	    { TR("0\r\nX(T): 1\r\n\r\n"), "invalid trailer field" },
	    { TR("0\r\n: 1\r\n\r\n"), "invalid trailer field" },
	    { TR("0\r\nX-T: 1\r\n folded\r\n\r\n"), "invalid trailer field" },
	    { TR("0\r\nX-T: 1\n\r\n"), "bare LF" },
	    { TR("0\r\nX-T: 1\rX\r\n\r\n"), "bare CR" },
	    { TR("0\r\nX-T: a\x01\r\n\r\n"), "invalid trailer field" },
	    { TR("0\r\nX-T: a\0b\r\n\r\n"), "invalid trailer field" },
	};
#undef TR
	char big[TRAILERS_BIG];
	struct trace t;
	size_t i, n;

	(void)state;
	trailers_on = 1;
	run_whole(GET2, S(r), 0, &t);
	assert_null(t.reason);
	assert_int_equal(t.n, 4);
	assert_int_equal(t.ev[1], HTTP_RESP_END);
	/* The first answer ends after its trailers' empty line. */
	assert_int_equal(t.off[1], strstr(r, "\r\n\r\nHTTP") - r + 4);
	assert_int_equal(t.status[2], 204);
	assert_non_null(memmem(t.out, t.out_len, want, sizeof(want) - 1));
	assert_split_invariant(GET2, S(r), 0, &t);

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		run_whole(GET1, bad[i].resp, bad[i].len, 0, &t);
		if (t.reason == NULL || strcmp(t.reason, bad[i].why) != 0)
			fail_msg("case %zu: %s, want %s", i, t.reason ?
			    t.reason : "accepted", bad[i].why);
	}
	/* More than TRAILER_MAX bytes of them. */
	n = (size_t)snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n0\r\n");
	while (n + 40 < sizeof(big) - 3)
		n += (size_t)snprintf(big + n, sizeof(big) - n,
		    "x-pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
	memcpy(big + n, "\r\n", 2);
	n += 2;
	run_whole(GET1, big, n, 0, &t);
	assert_non_null(t.reason);
	assert_string_equal(t.reason, "trailer fields too large");
	trailers_on = 0;

	/* Not asked for: refused, as before. */
	run_whole(GET2, S(r), 0, &t);
	assert_non_null(t.reason);
	assert_string_equal(t.reason, "trailer fields");
}

static void
t_close_delimited(void **state)
{
	static const char r[] = "HTTP/1.1 200 OK\r\nContent-Type: a/b\r\n\r\n"
	    "all of it until close";
	const struct http_resp_head *h;
	struct http_resps *s;
	const char *why;
	struct trace t;
	size_t used;

	run_whole(GET1, S(r), 1, &t);
	assert_null(t.reason);
	assert_int_equal(t.n, 2);
	assert_int_equal(t.ev[0], HTTP_RESP_HEAD);
	assert_int_equal(t.ev[1], HTTP_RESP_END);
	assert_int_equal(t.off[1], sizeof(r) - 1);
	assert_int_equal(t.pending, 0);
	assert_out(&t, "HTTP/1.1 200 OK\r\nContent-Type: a/b\r\n"
	    "Connection: close\r\n\r\nall of it until close");
	assert_split_invariant(GET1, S(r), 1, &t);

	/* Without the close, it never ends. */
	run_whole(GET1, S(r), 0, &t);
	assert_int_equal(t.n, 1);

	assert_non_null(s = http_resps_new(LIMIT));
	assert_int_equal(http_resps_expect(s, "GET"), 0);
	assert_int_equal(http_resps_feed(s, (const uint8_t *)r, sizeof(r) - 1,
	    &used, &h, &why), HTTP_RESP_HEAD);
	assert_true(h->close_delimited);
	assert_false(h->keep_alive);
	assert_int_equal(http_resps_finish(s, &h, &why), HTTP_RESP_END);
	assert_non_null(h);
	assert_int_equal(http_resps_finish(s, &h, &why), HTTP_RESP_NEED_MORE);
	assert_int_equal(http_resps_feed(s, (const uint8_t *)"x", 1, &used, &h,
	    &why), HTTP_RESP_INVALID);
	assert_string_equal(why, "response after connection close");
	http_resps_free(s);
}

static void
t_head_request(void **state)
{
	static const char r[] =
	    "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "HTTP/1.1 200 OK\r\n\r\n"		/* not close-delimited */
	    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	static const char *const m[] = { "HEAD", "HEAD", "HEAD", "GET", NULL };
	struct trace t;

	run_whole(m, S(r), 0, &t);
	assert_null(t.reason);
	assert_int_equal(t.n, 8);
	assert_int_equal(t.ev[1], HTTP_RESP_END);
	assert_int_equal(t.off[1], t.off[0]);		/* END with nothing */
	assert_int_equal(t.off[3], t.off[2]);
	assert_int_equal(t.off[5], t.off[4]);
	assert_int_equal(t.off[7], sizeof(r) - 1);
	assert_int_equal(t.pending, 0);
	assert_out(&t, r);
	assert_split_invariant(m, S(r), 0, &t);
}

static void
t_no_body_status(void **state)
{
	static const char r[] =
	    "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
	    "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\nETag: \"x\"\r\n\r\n"
	    "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "HTTP/1.1 204 No Content\r\n\r\n"
	    "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n!";
	static const char *const m[] = { "DELETE", "GET", "GET", "PUT", "GET",
	    NULL };
	struct trace t;

	run_whole(m, S(r), 0, &t);
	assert_null(t.reason);
	assert_int_equal(t.n, 10);
	assert_int_equal(t.status[0], 204);
	assert_int_equal(t.status[2], 304);
	assert_int_equal(t.off[3], t.off[2]);
	assert_int_equal(t.off[9], sizeof(r) - 1);
	assert_out(&t, r);
	assert_split_invariant(m, S(r), 0, &t);
}

static void
t_continue(void **state)
{
	static const char r[] = "HTTP/1.1 100 Continue\r\n\r\n"
	    "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
	    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	static const char *const m[] = { "POST", NULL };
	const struct http_resp_head *h;
	struct http_resps *s;
	const char *why;
	struct trace t;
	size_t used, off = 0;

	run_whole(m, S(r), 0, &t);
	assert_null(t.reason);
	assert_int_equal(t.n, 6);
	assert_int_equal(t.status[0], 100);
	assert_int_equal(t.ev[1], HTTP_RESP_END);
	assert_int_equal(t.status[2], 103);
	assert_int_equal(t.status[4], 200);
	assert_out(&t, r);
	assert_split_invariant(m, S(r), 0, &t);

	/* Pending until the final response ends. */
	assert_non_null(s = http_resps_new(LIMIT));
	assert_int_equal(http_resps_expect(s, "POST"), 0);
	assert_int_equal(http_resps_feed(s, (const uint8_t *)r, sizeof(r) - 1,
	    &used, &h, &why), HTTP_RESP_HEAD);
	assert_true(h->informational);
	off += used;
	assert_int_equal(http_resps_feed(s, (const uint8_t *)r + off,
	    sizeof(r) - 1 - off, &used, &h, &why), HTTP_RESP_END);
	assert_int_equal(http_resps_pending(s), 1);
	/* The upstream may not close between the 100 and the final response. */
	assert_int_equal(http_resps_finish(s, &h, &why), HTTP_RESP_INVALID);
	assert_string_equal(why, "upstream closed before responding");
	http_resps_free(s);
}

static void
t_switching(void **state)
{
	static const char r[] = "HTTP/1.1 101 Switching Protocols\r\n"
	    "Upgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
	    "Keep-Alive: timeout=5\r\nSec-WebSocket-Accept: abc=\r\n\r\n"
	    "\x81\x05hello";
	const struct http_resp_head *h;
	struct http_resps *s;
	const char *why;
	struct trace t;
	size_t used;

	run_whole(GET1, S(r), 1, &t);
	assert_null(t.reason);
	assert_int_equal(t.n, 2);
	assert_int_equal(t.ev[0], HTTP_RESP_HEAD);
	assert_int_equal(t.ev[1], HTTP_RESP_TUNNEL);
	assert_int_equal(t.off[1], sizeof(r) - 1 - 7);
	assert_int_equal(t.pending, 0);
	assert_out(&t, "HTTP/1.1 101 Switching Protocols\r\n"
	    "Upgrade: websocket\r\nSec-WebSocket-Accept: abc=\r\n"
	    "Connection: upgrade\r\n\r\n");
	assert_split_invariant(GET1, S(r), 1, &t);

	assert_non_null(s = http_resps_new(LIMIT));
	assert_int_equal(http_resps_expect(s, "GET"), 0);
	assert_int_equal(http_resps_feed(s, (const uint8_t *)r, sizeof(r) - 1,
	    &used, &h, &why), HTTP_RESP_HEAD);
	assert_false(h->informational);
	assert_false(h->keep_alive);
	assert_int_equal(http_resps_feed(s, (const uint8_t *)r + used,
	    sizeof(r) - 1 - used, &used, &h, &why), HTTP_RESP_TUNNEL);
	assert_int_equal(used, 0);
	assert_int_equal(h->status, 101);
	assert_int_equal(http_resps_feed(s, (const uint8_t *)"x", 1, &used, &h,
	    &why), HTTP_RESP_TUNNEL);
	assert_int_equal(used, 0);
	assert_int_equal(http_resps_finish(s, &h, &why), HTTP_RESP_TUNNEL);
	http_resps_free(s);

	assert_string_equal(refusal(NULL, "HTTP/1.1 101 Switching\r\n\r\n"),
	    "101 without upgrade");
	assert_string_equal(refusal(NULL, "HTTP/1.1 101 Switching\r\n"
	    "Upgrade: websocket\r\n\r\n"), "101 without upgrade");
	assert_string_equal(refusal(NULL, "HTTP/1.1 101 Switching\r\n"
	    "Connection: upgrade\r\n\r\n"), "101 without upgrade");
}

/* Every shape after another, with the connection kept, cut everywhere. */
static void
t_pipelined(void **state)
{
	static const char r[] =
	    "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nabc"
	    "HTTP/1.1 100 Continue\r\n\r\n"
	    "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "3\r\nxyz\r\n0\r\n\r\n"
	    "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"
	    "HTTP/1.1 304 Not Modified\r\n\r\n"
	    "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n1"
	    "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\n\r\n<html>gone";
	static const char want[] =
	    "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
	    "HTTP/1.1 100 Continue\r\n\r\n"
	    "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "3\r\nxyz\r\n0\r\n\r\n"
	    "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"
	    "HTTP/1.1 304 Not Modified\r\n\r\n"
	    "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1"
	    "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\n"
	    "Connection: close\r\n\r\n<html>gone";
	static const char *const m[] = { "GET", "PUT", "HEAD", "GET", "GET",
	    "GET", NULL };
	struct trace t;

	run_whole(m, S(r), 1, &t);
	assert_null(t.reason);
	assert_int_equal(t.n, 14);
	assert_int_equal(t.ev[13], HTTP_RESP_END);
	assert_int_equal(t.pending, 0);
	assert_out(&t, want);
	assert_split_invariant(m, S(r), 1, &t);
}

/*
 * The client's last request: the sandbox's head says close, the upstream
 * connection stays kept (keep_alive is the upstream's).
 */
static void
t_last(void **state)
{
	static const char r[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	static const char want[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n"
	    "Connection: close\r\n\r\n";
	const struct http_resp_head *h;
	struct http_resps *s;
	const char *why;
	size_t used;

	assert_non_null(s = http_resps_new(LIMIT));
	assert_int_equal(http_resps_last(s), SL_ERR_INVALID);
	assert_int_equal(http_resps_expect(s, "GET"), 0);
	assert_int_equal(http_resps_expect(s, "GET"), 0);
	assert_int_equal(http_resps_last(s), 0);
	/* The first answer is not the last one's. */
	assert_int_equal(http_resps_feed(s, (const uint8_t *)r, sizeof(r) - 1,
	    &used, &h, &why), HTTP_RESP_HEAD);
	assert_int_equal(h->out_len, sizeof(r) - 1);
	assert_memory_equal(h->out, r, sizeof(r) - 1);
	assert_int_equal(http_resps_feed(s, NULL, 0, &used, &h, &why),
	    HTTP_RESP_END);
	assert_int_equal(http_resps_feed(s, (const uint8_t *)r, sizeof(r) - 1,
	    &used, &h, &why), HTTP_RESP_HEAD);
	assert_true(h->keep_alive);
	assert_int_equal(h->out_len, sizeof(want) - 1);
	assert_memory_equal(h->out, want, sizeof(want) - 1);
	http_resps_free(s);
}

/*
 * Requests never sent leave the expectations (newest first, never one
 * being answered); a stream between responses with none expected is
 * reset for another connection and frames as a new one would.
 */
static void
t_forget_reset(void **state)
{
	static const char r1[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nab";
	static const char r2[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nxy";
	const struct http_resp_head *h;
	struct http_resps *s;
	const char *why;
	size_t used;

	assert_non_null(s = http_resps_new(LIMIT));
	assert_true(http_resps_between(s));
	assert_int_equal(http_resps_expect(s, "GET"), 0);
	assert_int_equal(http_resps_expect(s, "HEAD"), 0);
	assert_int_equal(http_resps_expect(s, "GET"), 0);
	assert_false(http_resps_between(s));
	assert_int_equal(http_resps_forget(s, 4), SL_ERR_INVALID);
	assert_int_equal(http_resps_forget(s, 2), 0);
	assert_int_equal(http_resps_pending(s), 1);
	/* The one left is being answered: it cannot go. */
	assert_int_equal(http_resps_feed(s, (const uint8_t *)r1, sizeof(r1) - 1,
	    &used, &h, &why), HTTP_RESP_HEAD);
	assert_int_equal(http_resps_forget(s, 1), SL_ERR_INVALID);
	assert_int_equal(http_resps_pending(s), 1);
	assert_false(http_resps_between(s));
	/* Reset in the middle of a body: a new stream, nothing expected. */
	http_resps_reset(s, LIMIT);
	assert_true(http_resps_between(s));
	assert_int_equal(http_resps_pending(s), 0);
	assert_int_equal(http_resps_expect(s, "GET"), 0);
	assert_int_equal(http_resps_feed(s, (const uint8_t *)r2, sizeof(r2) - 1,
	    &used, &h, &why), HTTP_RESP_HEAD);
	assert_int_equal(h->status, 200);
	assert_int_equal(http_resps_feed(s, (const uint8_t *)r2 + used,
	    sizeof(r2) - 1 - used, &used, &h, &why), HTTP_RESP_END);
	assert_int_equal(used, 2);
	assert_true(http_resps_between(s));
	http_resps_free(s);
}

/* ---- the head sent on ---------------------------------------------------- */

/* "Connection: close" with whitespace after it still closes (llhttp's misses it). */
static void
t_close_tab(void **state)
{
	static const char r[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
	    "Connection: close\t\r\n\r\nok";
	const struct http_resp_head *h;
	struct http_resps *s;
	const char *why;
	size_t used;

	(void)state;
	assert_non_null(s = http_resps_new(LIMIT));
	assert_int_equal(http_resps_expect(s, "GET"), 0);
	assert_int_equal(http_resps_feed(s, (const uint8_t *)r, sizeof(r) - 1,
	    &used, &h, &why), HTTP_RESP_HEAD);
	assert_false(h->keep_alive);
	assert_false(h->close_delimited);
	http_resps_free(s);
}

static void
t_hop_by_hop(void **state)
{
	static const char r[] = "HTTP/1.1 200 OK\r\n"
	    "Connection: X-Private, close , content-length\r\n"
	    "X-Private: secret\r\nX-Kept: 1\r\nKeep-Alive: timeout=5\r\n"
	    "Proxy-Authenticate: Basic\r\nProxy-Connection: keep-alive\r\n"
	    "Proxy-Authentication-Info: x\r\nTE: trailers\r\nTrailer: X-T\r\n"
	    "Upgrade: h2c\r\nConnection: x-other\r\nX-Other: 2\r\n"
	    "Content-Length: 2\r\nSet-Cookie: a=b\r\n\r\nhi";
	struct trace t;

	run_whole(GET1, S(r), 0, &t);
	assert_null(t.reason);
	assert_out(&t, "HTTP/1.1 200 OK\r\nX-Kept: 1\r\n"
	    "Content-Length: 2\r\nSet-Cookie: a=b\r\nConnection: close\r\n"
	    "\r\nhi");
}

static void
t_connection_close(void **state)
{
	static const char r10[] = "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi";
	static const char r11[] = "HTTP/1.1 500 Oops\r\nConnection: close\r\n"
	    "Content-Length: 2\r\n\r\nhiHTTP/1.1 200 OK\r\n\r\n";
	static const char *const m2[] = { "GET", "GET", NULL };
	struct trace t;

	run_whole(GET1, S(r10), 1, &t);
	assert_null(t.reason);
	assert_out(&t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
	    "Connection: close\r\n\r\nhi");

	run_whole(m2, S(r11), 1, &t);
	assert_string_equal(t.reason, "response after connection close");
	assert_int_equal(t.ev[1], HTTP_RESP_END);
	assert_out(&t, "HTTP/1.1 500 Oops\r\nContent-Length: 2\r\n"
	    "Connection: close\r\n\r\nhi");
}

static void
t_reason_phrase(void **state)
{
	struct trace t;

	run_whole(GET1, S("HTTP/1.1 404  Not\tFound\x01\x80\x7f \r\n"
	    "Content-Length: 0\r\n\r\n"), 0, &t);
	assert_null(t.reason);
	assert_out(&t, "HTTP/1.1 404 Not Found???\r\nContent-Length: 0\r\n\r\n");
	run_whole(GET1, S("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n"), 0, &t);
	assert_out(&t, "HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n");
	run_whole(GET1, S("HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n"), 0, &t);
	assert_out(&t, "HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n");
	run_whole(GET1, S("HTTP/1.1 204 \r\n\r\n"), 0, &t);
	assert_out(&t, "HTTP/1.1 204 \r\n\r\n");
}

/* ---- refusals ------------------------------------------------------------ */

static void
t_invalid(void **state)
{
	static const struct {
		const char *resp, *why;
	} c[] = {
	    { "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n"
	      "Transfer-Encoding: chunked\r\n\r\n",
	      "content-length with transfer-encoding" },
	    { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
	      "Content-Length: 1\r\n\r\n",
	      "content-length with transfer-encoding" },
	    { "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
	      "repeated content-length" },
	    { "HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\n",
	      "invalid content-length" },
	    { "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
	      "invalid content-length" },
	    { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
	      "Transfer-Encoding: chunked\r\n\r\n", "repeated transfer-encoding" },
	    { "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
	      "bad transfer-encoding" },
	    { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
	      "bad transfer-encoding" },
	    { "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
	      "transfer-encoding in http/1.0" },
	    { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nx\r\n",
	      "invalid chunk size" },
	    { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	      "1\r\nab\r\n", "invalid chunk framing" },
	    { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	      "0\r\nX-T: 1\r\n\r\n", "trailer fields" },
	    { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\n\r\n",
	      "bare LF" },
	    { "HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\n\r\n", "obs-fold" },
	    { "HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", "bare LF" },
	    { "HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n", "bare LF" },
	    { "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\n", "bare LF" },
	    { "HTTP/1.1 200 OK\r\nX-A: 1\rX\r\n\r\n", "bare CR" },
	    { "HTTP/1.1 200 O\0K\r\n\r\n", "NUL in head" },
	    { "HTTP/1.1 200 OK\r\nX-A: a\0b\r\n\r\n", "NUL in head" },
	    { "HTTP/1.1 200 OK\r\nX-A: a\x01" "b\r\n\r\n", "invalid header value" },
	    { "HTTP/1.1 200 OK\r\nX-A : b\r\n\r\n", "whitespace before colon" },
	    { "HTTP/1.1 200 OK\r\nX(A): b\r\n\r\n", "invalid header name" },
	    { "HTTP/1.1 200 OK\r\nX-A\r\n\r\n", "header line without colon" },
	    { "HTTP/1.1 200 OK\r\n: b\r\n\r\n", "empty header name" },
	    { "\r\nHTTP/1.1 200 OK\r\n\r\n", "malformed status line" },
	    { "HTTP/2.0 200 OK\r\n\r\n", "unsupported http version" },
	    { "HTTP/1.2 200 OK\r\n\r\n", "unsupported http version" },
	    { "http/1.1 200 OK\r\n\r\n", "malformed status line" },
	    { "HTTP/1.1  200 OK\r\n\r\n", "invalid status code" },
	    { "HTTP/1.1 099 OK\r\n\r\n", "invalid status code" },
	    { "HTTP/1.1 600 OK\r\n\r\n", "invalid status code" },
	    { "HTTP/1.1 2000 OK\r\n\r\n", "invalid status code" },
	    { "HTTP/1.1 20 OK\r\n\r\n", "invalid status code" },
	    { "HTTP/1.1 200OK\r\n\r\n", "invalid status code" },
	    { "HTTP/1.1\r\n\r\n", "malformed status line" },
	    { "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
	      "body framing on 1xx or 204" },
	    { "HTTP/1.1 100 Continue\r\nTransfer-Encoding: chunked\r\n\r\n",
	      "body framing on 1xx or 204" },
	    { "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n",	/* then closed */
	      "upstream closed mid-response" },
	    { "HTTP/1.1 200 OK\r\nContent-Le",
	      "upstream closed mid-response" },
	};
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		const char *const m[] = { "GET", NULL };
		const char *r = c[i].resp;
		size_t len = strlen(r);
		struct trace t;

		/* The literals with a NUL: as far as the second CRLFCRLF. */
		if (strstr(c[i].why, "NUL") != NULL)
			len += 1 + strlen(r + len + 1);
		run_whole(m, r, len, 1, &t);
		if (t.reason == NULL)
			fail_msg("case %zu: not refused", i);
		if (strcmp(t.reason, c[i].why) != 0)
			fail_msg("case %zu: \"%s\", not \"%s\"", i, t.reason,
			    c[i].why);
		assert_split_invariant(m, r, len, 1, &t);
	}
}

static void
t_unexpected(void **state)
{
	static const char r[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	static const char two[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
	    "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	struct trace t;

	run_whole(NULL, S(r), 0, &t);
	assert_string_equal(t.reason, "response without request");
	assert_int_equal(t.n, 1);
	run_whole(GET1, S(two), 0, &t);
	assert_string_equal(t.reason, "response without request");
	assert_int_equal(t.n, 3);
	assert_split_invariant(GET1, S(two), 0, &t);
}

static void
t_header_limit(void **state)
{
	static const char r[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	static const char *const m[] = { "GET", NULL };
	struct trace t;
	char many[HTTP_MAX_HEADERS * 8 + 64];
	size_t i, n;

	/* The limit counts every byte of the head, its last CRLF included. */
	run_cuts(m, S(r), sizeof(r) - 1, NULL, 0, 0, &t);
	assert_null(t.reason);
	assert_int_equal(t.n, 2);
	run_cuts(m, S(r), sizeof(r) - 2, NULL, 0, 0, &t);
	assert_string_equal(t.reason, "header too large");
	run_cuts(m, S(r), 0, NULL, 0, 0, &t);
	assert_string_equal(t.reason, "header too large");

	n = (size_t)snprintf(many, sizeof(many), "HTTP/1.1 200 OK\r\n");
	for (i = 0; i <= HTTP_MAX_HEADERS; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n, "A: b\r\n");
	n += (size_t)snprintf(many + n, sizeof(many) - n, "\r\n");
	run_whole(m, many, n, 1, &t);
	assert_string_equal(t.reason, "too many headers");
}

static void
t_finish(void **state)
{
	const struct http_resp_head *h;
	struct http_resps *s;
	const char *why;
	size_t used;

	/* Nothing pending: a close is fine, before and after responses. */
	assert_non_null(s = http_resps_new(LIMIT));
	assert_int_equal(http_resps_finish(s, &h, &why), HTTP_RESP_NEED_MORE);
	assert_null(h);
	assert_null(why);
	http_resps_free(s);

	/* Pending: not. */
	assert_non_null(s = http_resps_new(LIMIT));
	assert_int_equal(http_resps_expect(s, "GET"), 0);
	assert_int_equal(http_resps_finish(s, &h, &why), HTTP_RESP_INVALID);
	assert_string_equal(why, "upstream closed before responding");
	/* Dead stays dead. */
	assert_int_equal(http_resps_feed(s, NULL, 0, &used, &h, &why),
	    HTTP_RESP_INVALID);
	assert_string_equal(why, "upstream closed before responding");
	http_resps_free(s);

	/* A HEAD whose END was not asked for yet ends at the close. */
	assert_non_null(s = http_resps_new(LIMIT));
	assert_int_equal(http_resps_expect(s, "GET"), 0);
	assert_int_equal(http_resps_feed(s, (const uint8_t *)S(
	    "HTTP/1.1 204 No Content\r\n\r\n"), &used, &h, &why), HTTP_RESP_HEAD);
	assert_int_equal(http_resps_finish(s, &h, &why), HTTP_RESP_END);
	assert_int_equal(h->status, 204);
	assert_int_equal(http_resps_finish(s, &h, &why), HTTP_RESP_NEED_MORE);
	http_resps_free(s);
}

static void
t_expect(void **state)
{
	struct http_resps *s;
	size_t i;

	assert_non_null(s = http_resps_new(LIMIT));
	for (i = 0; i < HTTP_RESPS_MAX_PENDING; i++)
		assert_int_equal(http_resps_expect(s, "GET"), 0);
	assert_int_equal(http_resps_expect(s, "GET"), SL_ERR_TOO_BIG);
	assert_int_equal(http_resps_pending(s), HTTP_RESPS_MAX_PENDING);
	http_resps_free(s);

	assert_non_null(s = http_resps_new(LIMIT));
	assert_int_equal(http_resps_expect(s, ""), SL_ERR_INVALID);
	assert_int_equal(http_resps_expect(s, "G T"), SL_ERR_INVALID);
	assert_int_equal(http_resps_expect(s, "ABCDEFGHIJKLMNOPQRSTUVWX"),
	    SL_ERR_INVALID);
	assert_int_equal(http_resps_expect(s, "CONNECT"), SL_ERR_UNSUPPORTED);
	assert_int_equal(http_resps_pending(s), 0);
	http_resps_free(s);
}

/* The queue wraps around: responses to 200 requests, 50 at a time. */
static void
t_queue_wraps(void **state)
{
	static const char r[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	const struct http_resp_head *h;
	struct http_resps *s;
	const char *why;
	size_t used, i, j;

	assert_non_null(s = http_resps_new(LIMIT));
	for (i = 0; i < 4; i++) {
		for (j = 0; j < 50; j++)
			assert_int_equal(http_resps_expect(s,
			    j % 2 ? "HEAD" : "GET"), 0);
		for (j = 0; j < 50; j++) {
			assert_int_equal(http_resps_feed(s, (const uint8_t *)r,
			    sizeof(r) - 1, &used, &h, &why), HTTP_RESP_HEAD);
			assert_int_equal(http_resps_feed(s, NULL, 0, &used, &h,
			    &why), HTTP_RESP_END);
		}
		assert_int_equal(http_resps_pending(s), 0);
	}
	http_resps_free(s);
}

/* ---- the request head for the upstream ----------------------------------- */

/* Parses one request whole; returns its head (the stream is *sp). */
static const struct http_head *
req_head(struct http_reqs **sp, const char *req)
{
	const struct http_head *h;
	const char *why;
	size_t used;

	assert_non_null(*sp = http_reqs_new(LIMIT));
	assert_int_equal(http_reqs_feed(*sp, (const uint8_t *)req, strlen(req),
	    &used, &h, &why), HTTP_EV_HEAD);
	return h;
}

static void
assert_fwd(const char *req, const char *target, uint16_t port, int upgrade,
    const char *const *drop, size_t ndrop, const struct http_add *add,
    size_t nadd, const char *want)
{
	const struct http_head *h;
	struct http_reqs *s;
	char out[2048];
	long n;

	h = req_head(&s, req);
	n = http_head_serialize_upstream(h, target, "api.example.com", port,
	    upgrade, drop, ndrop, add, nadd, out, sizeof(out));
	if (n < 0)
		fail_msg("serialise: %ld", n);
	if ((size_t)n != strlen(want) || memcmp(out, want, (size_t)n) != 0)
		fail_msg("wrote\n%.*s\nnot\n%s", (int)n, out, want);
	http_reqs_free(s);
}

static void
t_fwd_headers(void **state)
{
	static const char req[] = "GET http://api.example.com/a/../b?q HTTP/1.1\r\n"
	    "Host: API.example.com\r\nUser-Agent: t\r\n"
	    "Connection: keep-alive, X-Hop, content-length\r\n"
	    "X-Hop: 1\r\nKeep-Alive: 5\r\nProxy-Authorization: Basic eA==\r\n"
	    "Proxy-Connection: keep-alive\r\nTE: trailers\r\nTrailer: X-T\r\n"
	    "Upgrade: h2c\r\nAccept:  */* \r\nCookie: c=1\r\n"
	    "authorization: old\r\nContent-Length: 2\r\n\r\n";
	static const char *const drop[] = { "cookie", "x-absent" };
	static const struct http_add add[] = {
		{ "Authorization", "Bearer t0k" },
		{ "X-Added", "yes" },
	};

	assert_fwd(req, "/b?q", 443, 0, drop, 2, add, 2,
	    "GET /b?q HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: t\r\n"
	    "Accept: */*\r\nContent-Length: 2\r\n"
	    "Authorization: Bearer t0k\r\nX-Added: yes\r\n\r\n");
	assert_fwd(req, "/b?q", 8443, 0, NULL, 0, NULL, 0,
	    "GET /b?q HTTP/1.1\r\nHost: api.example.com:8443\r\n"
	    "User-Agent: t\r\nAccept: */*\r\nCookie: c=1\r\n"
	    "authorization: old\r\nContent-Length: 2\r\n\r\n");
}

static void
t_fwd_framing(void **state)
{
	static const char req[] = "POST /p HTTP/1.1\r\nHost: h.example\r\n"
	    "Transfer-Encoding: chunked\r\nConnection: transfer-encoding\r\n\r\n";
	static const char *const drop[] = { "Transfer-Encoding", "host" };

	/* Framing stays, whatever Connection or a rule says. */
	assert_fwd(req, "/p", 443, 0, drop, 2, NULL, 0,
	    "POST /p HTTP/1.1\r\nHost: api.example.com\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n");
}

static void
t_fwd_upgrade(void **state)
{
	static const char req[] = "GET /ws HTTP/1.1\r\nHost: h.example\r\n"
	    "Connection: Upgrade\r\nUpgrade: websocket\r\n"
	    "Sec-WebSocket-Key: k==\r\nSec-WebSocket-Version: 13\r\n\r\n";

	assert_fwd(req, "/ws", 443, 1, NULL, 0, NULL, 0,
	    "GET /ws HTTP/1.1\r\nHost: api.example.com\r\nUpgrade: websocket\r\n"
	    "Sec-WebSocket-Key: k==\r\nSec-WebSocket-Version: 13\r\n"
	    "Connection: upgrade\r\n\r\n");
	assert_fwd(req, "/ws", 443, 0, NULL, 0, NULL, 0,
	    "GET /ws HTTP/1.1\r\nHost: api.example.com\r\n"
	    "Sec-WebSocket-Key: k==\r\nSec-WebSocket-Version: 13\r\n\r\n");
	/* Not an upgrade request: nothing to keep. */
	assert_fwd("GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n",
	    "/", 443, 1, NULL, 0, NULL, 0,
	    "GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n");
}

static void
t_fwd_close(void **state)
{
	/* The client's close stays on its side: the upstream is kept. */
	assert_fwd("GET / HTTP/1.0\r\nHost: h\r\nConnection: keep-alive\r\n"
	    "Accept: */*\r\n\r\n", "/", 80, 0, NULL, 0, NULL, 0,
	    "GET / HTTP/1.1\r\nHost: api.example.com:80\r\nAccept: */*\r\n"
	    "\r\n");
	assert_fwd("GET / HTTP/1.0\r\n\r\n", "/", 443, 0, NULL, 0, NULL, 0,
	    "GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n");
	assert_fwd("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
	    "/", 443, 0, NULL, 0, NULL, 0,
	    "GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n");
}

static void
t_fwd_errors(void **state)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n";
	static const char want[] = "GET /x HTTP/1.1\r\nHost: api.example.com\r\n"
	    "Accept: */*\r\n\r\n";
	static const struct http_add bad[][1] = {
		{ { "Bad Name", "v" } }, { { "", "v" } }, { { "X", "a\r\nB: c" } },
		{ { "Host", "evil" } }, { { "content-length", "0" } },
		{ { "Connection", "close" } }, { { "Proxy-Authorization", "x" } },
	};
	const struct http_head *h;
	struct http_reqs *s;
	char out[256];
	size_t i, n = sizeof(want) - 1;

	h = req_head(&s, req);
	memset(out, 'Z', sizeof(out));
	assert_int_equal(http_head_serialize_upstream(h, "/x", "api.example.com",
	    443, 0, NULL, 0, NULL, 0, out, n - 1), SL_ERR_TOO_BIG);
	for (i = 0; i < sizeof(out); i++)
		assert_int_equal(out[i], 'Z');
	assert_int_equal(http_head_serialize_upstream(h, "/x", "api.example.com",
	    443, 0, NULL, 0, NULL, 0, out, n), (long)n);
	assert_memory_equal(out, want, n);
	assert_int_equal(out[n], 'Z');

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(http_head_serialize_upstream(h, "/x",
		    "api.example.com", 443, 0, NULL, 0, bad[i], 1, out,
		    sizeof(out)), SL_ERR_INVALID);
	assert_int_equal(http_head_serialize_upstream(h, "/x y",
	    "api.example.com", 443, 0, NULL, 0, NULL, 0, out, sizeof(out)),
	    SL_ERR_INVALID);
	assert_int_equal(http_head_serialize_upstream(h, "",
	    "api.example.com", 443, 0, NULL, 0, NULL, 0, out, sizeof(out)),
	    SL_ERR_INVALID);
	assert_int_equal(http_head_serialize_upstream(h, "/x", "a\r\nb", 443, 0,
	    NULL, 0, NULL, 0, out, sizeof(out)), SL_ERR_INVALID);
	http_reqs_free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_content_length),
		cmocka_unit_test(t_head_fields),
		cmocka_unit_test(t_chunked),
		cmocka_unit_test(t_transfer_coded),
		cmocka_unit_test(t_close_delimited),
		cmocka_unit_test(t_trailers),
		cmocka_unit_test(t_head_request),
		cmocka_unit_test(t_no_body_status),
		cmocka_unit_test(t_continue),
		cmocka_unit_test(t_switching),
		cmocka_unit_test(t_pipelined),
		cmocka_unit_test(t_forget_reset),
		cmocka_unit_test(t_last),
		cmocka_unit_test(t_hop_by_hop),
		cmocka_unit_test(t_close_tab),
		cmocka_unit_test(t_connection_close),
		cmocka_unit_test(t_reason_phrase),
		cmocka_unit_test(t_invalid),
		cmocka_unit_test(t_unexpected),
		cmocka_unit_test(t_header_limit),
		cmocka_unit_test(t_finish),
		cmocka_unit_test(t_expect),
		cmocka_unit_test(t_queue_wraps),
		cmocka_unit_test(t_fwd_headers),
		cmocka_unit_test(t_fwd_framing),
		cmocka_unit_test(t_fwd_upgrade),
		cmocka_unit_test(t_fwd_close),
		cmocka_unit_test(t_fwd_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
