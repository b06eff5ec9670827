/*
 * fuzz_httpresp.c: libFuzzer target for the upstream response stream
 * (httpresp.c) and the upstream request head (httpwrite.c).
 *
 * Input:
 *   byte 0   header_limit (bit 7: 65536, else 16 + 8 * the low 7 bits)
 *   byte 1   bits 0-3: the number of cuts; bits 4-6: the number of
 *            requests expected (0 to 7); bit 7: the upstream closes at the
 *            end
 *   byte 2-3 the method of each expected request, 2 bits each, low bits
 *            first: GET, HEAD, POST, OPTIONS
 *   byte 4-5 the length of the request part (little-endian)
 *   then one byte per cut (the gap to the previous cut, minus one), then
 *   the request part, then the response stream.
 *
 * The responses are fed whole and again in pieces: both must report the
 * same events at the same offsets, the same reason and the same bytes for
 * the sandbox, which are every head's out plus exactly the body bytes
 * consumed.  Every head written must parse back to the same head.  Each
 * request of the request part is written for the upstream, and must parse
 * back with its Host rewritten and nothing hop-by-hop left.
 */
#include "autoconf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/err.h"
#include "parse/httphead.h"
#include "parse/httpresp.h"
#include "parse/httpwrite.h"
#include "fuzz_check.h"

#define MAXCUTS		16
#define MAXEV		256
#define REQ_LIMIT	8192

static const char *const methods[4] = { "GET", "HEAD", "POST", "OPTIONS" };

struct trace {
	enum http_resp_ev ev[MAXEV];
	size_t		 off[MAXEV];
	size_t		 n;
	const char	*reason;
	size_t		 pending;
	uint8_t		*out;		/* what the sandbox gets */
	size_t		 out_len, out_cap;
	size_t		 heads_len;	/* of which written heads */
	size_t		 body_len;	/* of which body bytes consumed */
	int		 in_body;
};

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);


static void
emit(struct trace *t, const void *p, size_t n)
{
	if (n == 0)
		return;
	if (n > t->out_cap - t->out_len) {
		size_t cap = t->out_cap * 2 + n + 256;

		CHECK((t->out = realloc(t->out, cap)) != NULL);
		t->out_cap = cap;
	}
	memcpy(t->out + t->out_len, p, n);
	t->out_len += n;
}

/* ---- responses ----------------------------------------------------------- */

/* A written head parses back to itself. */
static void
check_roundtrip(const struct http_resp_head *h, const char *method)
{
	const struct http_resp_head *h2;
	struct http_resps *s;
	const char *why;
	size_t used;
	enum http_resp_ev ev;

	CHECK((s = http_resps_new(h->out_len)) != NULL);
	CHECK(http_resps_expect(s, method) == 0);
	ev = http_resps_feed(s, (const uint8_t *)h->out, h->out_len, &used,
	    &h2, &why);
	/* Connection: close may make one header more than a head may have. */
	if (ev == HTTP_RESP_INVALID && h->nheaders == HTTP_MAX_HEADERS &&
	    strcmp(why, "too many headers") == 0) {
		http_resps_free(s);
		return;
	}
	if (ev != HTTP_RESP_HEAD)
		fprintf(stderr, "round trip: %d %s\n%.*s", ev, why ? why : "",
		    (int)h->out_len, h->out);
	CHECK(ev == HTTP_RESP_HEAD);
	CHECK(used == h->out_len);
	CHECK(h2->status == h->status);
	CHECK(h2->http_minor == 1);
	CHECK(h2->informational == h->informational);
	CHECK(h2->close_delimited == h->close_delimited);
	CHECK(h2->keep_alive == h->keep_alive || h->informational);
	CHECK(h2->out_len == h->out_len);
	CHECK(memcmp(h2->out, h->out, h->out_len) == 0);
	http_resps_free(s);
}

/* What a head promises. */
static void
check_head(const struct http_resp_head *h, size_t head_bytes,
    const char *method)
{
	size_t i;

	CHECK(h->status >= 100 && h->status <= 599);
	CHECK(h->http_major == 1 && h->http_minor <= 1);
	CHECK(h->informational == (h->status / 100 == 1 && h->status != 101));
	CHECK(!h->close_delimited || !h->keep_alive);
	CHECK(h->nheaders <= HTTP_MAX_HEADERS);
	for (i = 0; i < h->nheaders; i++) {
		CHECK(strlen(h->headers[i].name) == h->headers[i].name_len);
		CHECK(h->headers[i].name_len > 0);
		CHECK(strlen(h->headers[i].value) == h->headers[i].value_len);
	}
	/* ": " for ":", the SP before an absent reason, our Connection. */
	CHECK(h->out_len <= head_bytes + h->nheaders + 1 + 21);
	CHECK(h->out_len >= 17 && memcmp(h->out, "HTTP/1.1 ", 9) == 0);
	CHECK(memcmp(h->out + h->out_len - 4, "\r\n\r\n", 4) == 0);
	check_roundtrip(h, method);
}

/* Feeds one piece, handling events until it is consumed; 1 when done. */
static int
feed_piece(struct http_resps *s, struct trace *t, const uint8_t *p,
    size_t len, size_t base, const char *const *expect, size_t nexpect,
    size_t *head_start)
{
	const struct http_resp_head *h;
	const char *why;
	size_t used, pos = 0, guard, before;
	enum http_resp_ev ev;

	for (guard = 0; guard < 2 * len + 8; guard++) {
		before = http_resps_pending(s);
		ev = http_resps_feed(s, p + pos, len - pos, &used, &h, &why);
		CHECK(used <= len - pos);
		CHECK(http_resps_pending(s) <= before);
		if (ev == HTTP_RESP_NEED_MORE) {
			CHECK(used == len - pos && h == NULL && why == NULL);
			if (t->in_body) {
				emit(t, p + pos, used);
				t->body_len += used;
			}
			return 0;
		}
		if (t->n == MAXEV)
			return 1;	/* both runs stop at the same event */
		if (ev == HTTP_RESP_INVALID) {
			CHECK(why != NULL && h == NULL && used == 0);
			t->reason = why;
			t->ev[t->n] = ev;
			t->off[t->n++] = 0;
			return 1;
		}
		CHECK(h != NULL && why == NULL);
		if (ev == HTTP_RESP_HEAD) {
			CHECK(!t->in_body);
			/* The request answered is the oldest pending one. */
			CHECK(before > 0 && before <= nexpect);
			check_head(h, base + pos + used - *head_start,
			    expect[nexpect - before]);
			emit(t, h->out, h->out_len);
			t->heads_len += h->out_len;
			t->in_body = 1;
		} else if (ev == HTTP_RESP_END) {
			CHECK(t->in_body);
			emit(t, p + pos, used);
			t->body_len += used;
			t->in_body = 0;
		}
		pos += used;
		t->ev[t->n] = ev;
		t->off[t->n++] = base + pos;
		if (ev != HTTP_RESP_HEAD)
			*head_start = base + pos;
		if (ev == HTTP_RESP_TUNNEL) {
			CHECK(used == 0);
			return 1;
		}
	}
	CHECK(!"no progress");
	return 1;
}

static void
run(const uint8_t *buf, size_t len, size_t limit, const char *const *expect,
    size_t nexpect, int fin, const size_t *cuts, size_t ncuts,
    struct trace *t)
{
	const struct http_resp_head *h;
	struct http_resps *s;
	size_t i, from = 0, to, head_start = 0;
	enum http_resp_ev ev;
	const char *why;
	int done = 0;

	memset(t, 0, sizeof(*t));
	CHECK((s = http_resps_new(limit)) != NULL);
	for (i = 0; i < nexpect; i++)
		CHECK(http_resps_expect(s, expect[i]) == 0);
	for (i = 0; i <= ncuts && !done; i++) {
		to = i < ncuts ? cuts[i] : len;
		done = feed_piece(s, t, buf + from, to - from, from, expect,
		    nexpect, &head_start);
		from = to;
	}
	for (i = 0; !done && fin && i < 4 && t->n < MAXEV; i++) {
		ev = http_resps_finish(s, &h, &why);
		t->ev[t->n] = ev;
		t->off[t->n++] = len;
		if (ev == HTTP_RESP_INVALID) {
			CHECK(why != NULL && h == NULL);
			t->reason = why;
		} else if (ev == HTTP_RESP_END) {
			CHECK(h != NULL && t->in_body);
			t->in_body = 0;
			continue;
		}
		break;
	}
	CHECK(t->out_len == t->heads_len + t->body_len);
	CHECK(t->body_len <= len);
	t->pending = http_resps_pending(s);
	CHECK(t->pending <= nexpect);
	http_resps_free(s);
}

/* ---- requests for the upstream ------------------------------------------- */

/* Header x of a written request is one we may send. */
static void
check_fwd_header(const struct http_header *x, int upgrade)
{
	const char *n = x->name;

	CHECK(strncasecmp(n, "proxy-", 6) != 0);
	CHECK(strcasecmp(n, "keep-alive") != 0 && strcasecmp(n, "te") != 0 &&
	    strcasecmp(n, "trailer") != 0 && strcasecmp(n, "cookie") != 0 &&
	    strcasecmp(n, "x-drop") != 0);
	if (strcasecmp(n, "upgrade") == 0)
		CHECK(upgrade);
	/* The upstream connection is kept: never "close". */
	if (strcasecmp(n, "connection") == 0)
		CHECK(upgrade && strcmp(x->value, "upgrade") == 0);
}

static void
check_fwd(const struct http_head *h, int keep_upgrade, uint16_t port)
{
	static const char *const drop[] = { "cookie", "x-drop" };
	static const struct http_add add[] = {
		{ "Authorization", "Bearer fuzz" },
	};
	const char *target = h->absolute_form ? h->origin_target : h->target;
	const struct http_head *h2;
	struct http_reqs *s;
	const char *why;
	size_t i, used, cap = h->head_len + 512;
	char *out;
	long n;
	int upgrade = keep_upgrade && h->upgrade && h->http_minor == 1;
	enum http_ev ev;

	CHECK((out = malloc(cap)) != NULL);
	n = http_head_serialize_upstream(h, target, "api.example.com", port,
	    keep_upgrade, drop, 2, add, 1, out, cap);
	CHECK(n > 0 && (size_t)n <= cap);
	CHECK(http_head_serialize_upstream(h, target, "api.example.com", port,
	    keep_upgrade, drop, 2, add, 1, out, (size_t)n - 1) == SL_ERR_TOO_BIG);

	CHECK((s = http_reqs_new((size_t)n)) != NULL);
	ev = http_reqs_feed(s, (const uint8_t *)out, (size_t)n, &used, &h2, &why);
	if (ev == HTTP_EV_INVALID && h->nheaders + 3 > HTTP_MAX_HEADERS &&
	    strcmp(why, "too many headers") == 0)
		goto out;
	if (ev != HTTP_EV_HEAD)
		fprintf(stderr, "upstream head: %d %s\n%.*s", ev,
		    why ? why : "", (int)n, out);
	CHECK(ev == HTTP_EV_HEAD);
	CHECK(used == (size_t)n && h2->head_len == (size_t)n);
	CHECK(strcmp(h2->method, h->method) == 0);
	CHECK(h2->http_minor == 1);
	CHECK(h2->has_host && strcmp(h2->host, "api.example.com") == 0);
	CHECK(h2->host_port == (port == 443 ? 0 : port));
	CHECK(h2->chunked == h->chunked);
	CHECK(h2->content_length == h->content_length);
	CHECK(h2->upgrade == upgrade);
	/* The upstream connection is kept, whatever the client asked. */
	CHECK(h2->keep_alive);
	CHECK(strcmp(http_head_get(h2, "authorization")->value,
	    "Bearer fuzz") == 0);
	for (i = 0; i < h2->nheaders; i++)
		check_fwd_header(&h2->headers[i], upgrade);
out:
	http_reqs_free(s);
	free(out);
}

/* Writes every request of buf for the upstream. */
static void
run_requests(const uint8_t *buf, size_t len, int keep_upgrade, uint16_t port)
{
	const struct http_head *h;
	struct http_reqs *s;
	const char *why;
	size_t used, pos = 0, guard;
	enum http_ev ev;

	CHECK((s = http_reqs_new(REQ_LIMIT)) != NULL);
	for (guard = 0; guard < 2 * len + 8; guard++) {
		ev = http_reqs_feed(s, buf + pos, len - pos, &used, &h, &why);
		pos += used;
		if (ev == HTTP_EV_HEAD)
			check_fwd(h, keep_upgrade, port);
		else if (ev != HTTP_EV_END)
			break;
	}
	http_reqs_free(s);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t cuts[MAXCUTS], ncuts = 0, want, i, limit, pos = 0, nexpect;
	size_t reqlen;
	const char *expect[8];
	struct trace whole, split;
	const uint8_t *gaps;
	unsigned kinds;
	int fin;

	if (size < 6)
		return 0;
	limit = (data[0] & 0x80) ? 65536 : 16 + (size_t)(data[0] & 0x7f) * 8;
	want = data[1] & 0x0f;
	nexpect = (data[1] >> 4) & 0x07;
	fin = (data[1] & 0x80) != 0;
	kinds = (unsigned)data[2] | (unsigned)data[3] << 8;
	reqlen = (size_t)data[4] | (size_t)data[5] << 8;
	for (i = 0; i < nexpect; i++)
		expect[i] = methods[(kinds >> (2 * i)) & 3];
	data += 6;
	size -= 6;
	if (size < want)
		return 0;
	gaps = data;
	data += want;
	size -= want;
	if (reqlen > size)
		reqlen = size;
	run_requests(data, reqlen, kinds & 0x8000 ? 1 : 0,
	    kinds & 0x4000 ? 8443 : 443);
	data += reqlen;
	size -= reqlen;
	for (i = 0; i < want; i++) {
		pos += (size_t)gaps[i] + 1;
		if (pos >= size)
			break;
		cuts[ncuts++] = pos;
	}

	run(data, size, limit, expect, nexpect, fin, NULL, 0, &whole);
	run(data, size, limit, expect, nexpect, fin, cuts, ncuts, &split);
	CHECK(whole.n == split.n);
	for (i = 0; i < whole.n; i++)
		CHECK(whole.ev[i] == split.ev[i] && whole.off[i] == split.off[i]);
	CHECK((whole.reason == NULL) == (split.reason == NULL));
	CHECK(whole.reason == NULL || strcmp(whole.reason, split.reason) == 0);
	CHECK(whole.pending == split.pending);
	/* Before a refusal, how much body streamed depends on the cuts. */
	if (whole.reason == NULL) {
		CHECK(whole.out_len == split.out_len);
		CHECK(whole.out_len == 0 ||
		    memcmp(whole.out, split.out, whole.out_len) == 0);
	}
	free(whole.out);
	free(split.out);
	return 0;
}
