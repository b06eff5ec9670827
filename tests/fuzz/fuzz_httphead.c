/*
 * fuzz_httphead.c: libFuzzer target for the HTTP request stream parser.
 *
 * Input: byte 0 picks header_limit, byte 1 (low 4 bits) the number of
 * cuts, then one byte per cut (the gap to the previous cut, minus one),
 * then the stream.  The stream is fed whole and again in pieces; both
 * must report the same events at the same offsets with the same reasons.
 * Every head is serialised, and the result must parse back to the same
 * request.
 */
#include "autoconf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/err.h"
#include "parse/httphead.h"
#include "parse/httpwrite.h"
#include "fuzz_check.h"

#define MAXCUTS	16
#define MAXEV	256

struct trace {
	enum http_ev	 ev[MAXEV];
	size_t		 off[MAXEV];
	size_t		 n;
	const char	*reason;
};

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);


/* A serialised head parses back to the same request. */
static void
check_roundtrip(const struct http_head *h, const char *buf, size_t len)
{
	const struct http_head *h2;
	struct http_reqs *s;
	const char *why;
	size_t used, i, n = 0;
	enum http_ev ev;

	for (i = 0; i < h->nheaders; i++)
		if (h->headers[i].name_len < 6 ||
		    strncasecmp(h->headers[i].name, "proxy-", 6) != 0)
			n++;
	/* Proxy-Connection speaks to us only: keep-alive may change. */
	CHECK((s = http_reqs_new(len)) != NULL);
	ev = http_reqs_feed(s, (const uint8_t *)buf, len, &used, &h2, &why);
	if (ev != HTTP_EV_HEAD)
		fprintf(stderr, "round trip: %d %s\n", ev, why ? why : "");
	CHECK(ev == HTTP_EV_HEAD);
	CHECK(used == len);
	CHECK(h2->head_len == len);
	CHECK(strcmp(h2->method, h->method) == 0);
	CHECK(h2->http_minor == h->http_minor);
	CHECK(h2->nheaders == n);
	CHECK(h2->has_host == h->has_host);
	CHECK(strcmp(h2->host, h->host) == 0);
	CHECK(h2->host_port == h->host_port);
	CHECK(h2->is_connect == h->is_connect);
	CHECK(h2->chunked == h->chunked);
	CHECK(h2->content_length == h->content_length);
	CHECK(h2->upgrade == h->upgrade);
	CHECK(h2->keep_alive == h->keep_alive ||
	    http_head_get(h, "proxy-connection") != NULL);
	CHECK(!h2->absolute_form);
	if (h->absolute_form)
		CHECK(strcmp(h2->target, h->origin_target) == 0);
	else
		CHECK(strcmp(h2->target, h->target) == 0);
	http_reqs_free(s);
}

/* What a head promises: lengths, NUL ends, lookups, serialisation. */
static void
check_head(const struct http_head *h)
{
	size_t i, cap = h->head_len + h->nheaders + 16;
	char *out;
	long n;

	CHECK(strlen(h->target) == h->target_len);
	CHECK(h->target_len > 0 && h->target_len <= HTTP_MAX_TARGET);
	CHECK(h->nheaders <= HTTP_MAX_HEADERS);
	CHECK(h->http_major == 1 && h->http_minor <= 1);
	CHECK(!h->absolute_form || h->origin_target[0] == '/');
	CHECK(!h->has_authority || h->authority[0] != '\0');
	CHECK(!h->has_host || h->host[0] != '\0');
	for (i = 0; i < h->nheaders; i++) {
		const struct http_header *x = &h->headers[i];

		CHECK(strlen(x->name) == x->name_len && x->name_len > 0);
		CHECK(strlen(x->value) == x->value_len);
		CHECK(http_head_get(h, x->name) != NULL);
	}
	CHECK((out = malloc(cap)) != NULL);
	n = http_head_serialize_origin(h, out, cap);
	CHECK(n > 0 && (size_t)n <= cap);
	CHECK(http_head_serialize_origin(h, out, (size_t)n - 1) == SL_ERR_TOO_BIG);
	check_roundtrip(h, out, (size_t)n);
	free(out);
}

/* Feeds one piece, handling events until it is consumed; 1 when done. */
static int
feed_piece(struct http_reqs *s, struct trace *t, const uint8_t *p,
    size_t len, size_t base)
{
	const struct http_head *h;
	const char *why;
	size_t used, pos = 0;
	enum http_ev ev;
	size_t guard;

	/* Every event but END and TUNNEL consumes a byte; they do not repeat. */
	for (guard = 0; guard < 2 * len + 8; guard++) {
		ev = http_reqs_feed(s, p + pos, len - pos, &used, &h, &why);
		CHECK(used <= len - pos);
		if (ev == HTTP_EV_NEED_MORE) {
			CHECK(used == len - pos && h == NULL && why == NULL);
			return 0;
		}
		if (t->n == MAXEV)
			return 1;	/* both runs stop at the same event */
		if (ev == HTTP_EV_INVALID) {
			CHECK(why != NULL && h == NULL && used == 0);
			t->reason = why;
			t->ev[t->n] = ev;
			t->off[t->n++] = 0;
			return 1;
		}
		CHECK(h != NULL && why == NULL);
		if (ev == HTTP_EV_HEAD)
			check_head(h);
		pos += used;
		t->ev[t->n] = ev;
		t->off[t->n++] = base + pos;
		if (ev == HTTP_EV_TUNNEL) {
			CHECK(used == 0);
			return 1;
		}
	}
	CHECK(!"no progress");
	return 1;
}

static void
run(const uint8_t *buf, size_t len, size_t limit, const size_t *cuts,
    size_t ncuts, struct trace *t)
{
	struct http_reqs *s;
	size_t i, from = 0, to;

	memset(t, 0, sizeof(*t));
	CHECK((s = http_reqs_new(limit)) != NULL);
	for (i = 0; i <= ncuts; i++) {
		to = i < ncuts ? cuts[i] : len;
		if (feed_piece(s, t, buf + from, to - from, from) != 0)
			break;
		from = to;
	}
	http_reqs_free(s);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t cuts[MAXCUTS], ncuts = 0, want, i, limit, pos = 0;
	struct trace whole, split;
	const uint8_t *gaps;

	if (size < 2)
		return 0;
	limit = (data[0] & 0x80) ? 65536 : 32 + (size_t)(data[0] & 0x7f) * 8;
	want = data[1] & 0x0f;
	data += 2;
	size -= 2;
	if (size < want)
		return 0;
	gaps = data;
	data += want;
	size -= want;
	for (i = 0; i < want; i++) {
		pos += (size_t)gaps[i] + 1;
		if (pos >= size)
			break;
		cuts[ncuts++] = pos;
	}

	run(data, size, limit, NULL, 0, &whole);
	run(data, size, limit, cuts, ncuts, &split);
	CHECK(whole.n == split.n);
	for (i = 0; i < whole.n; i++)
		CHECK(whole.ev[i] == split.ev[i] && whole.off[i] == split.off[i]);
	CHECK((whole.reason == NULL) == (split.reason == NULL));
	CHECK(whole.reason == NULL || strcmp(whole.reason, split.reason) == 0);
	return 0;
}
