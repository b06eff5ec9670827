/*
 * fuzz_request.c: libFuzzer target for target normalisation and request
 * matching.
 *
 * Input: an HTTP/1.x client stream, fed to http_reqs_feed().  Each head's
 * origin-form target is normalised, and the result must hold what
 * httppath.h promises (and be a fixed point); the request is then matched
 * against a fixed policy whose rules use every kind of match.  The path
 * and value globs are checked against slow reference matchers (dynamic
 * programming over bytes or segments): the rules' own globs, and any
 * request header "x-glob" (a value glob, tried on every header value) or
 * "x-path-glob" (a path glob, tried on the normalised path).
 */
#include "autoconf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>

#include "util/err.h"
#include "parse/httphead.h"
#include "parse/httppath.h"
#include "conf/policy.h"
#include "fuzz_check.h"

#define REF_MAX_CELLS	(1u << 20)	/* reference matchers skip beyond */
#define XGLOB_HEADERS	16		/* header values tried with x-glob */

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);


static const char policy_yaml[] =
	"name: fuzz\n"
	"intercept:\n"
	"  - name: deny-admin\n"
	"    match: {host: api.example.com, path: \"/admin/**\"}\n"
	"    action: deny\n"
	"  - name: read\n"
	"    match:\n"
	"      host: api.example.com\n"
	"      methods: [GET, HEAD]\n"
	"      path: /repos/*/**\n"
	"      query: {per_page: \"*\", sort: \"a*b*c\"}\n"
	"      headers: {accept: \"application/*json\"}\n"
	"    inject:\n"
	"      set: {authorization: \"Bearer {{secret:tok}}\"}\n"
	"  - name: items\n"
	"    match: {host: \"*.example.com\", methods: [POST, PUT], "
	"path: \"/v1/*/items/%7Ex%20y\"}\n"
	"    action: pass\n"
	"  - name: mid\n"
	"    match: {host: \"*.example.com\", path: \"/a/**/b/*/**/c/\", "
	"headers: {x-a: \"*1*\", x-b: \"\"}}\n"
	"    action: pass\n"
	"  - name: search\n"
	"    match:\n"
	"      host: api.example.com\n"
	"      path: /\n"
	"      query: {q: \"x y*\", \"a b\": \"*\"}\n"
	"    forward: {to: \"https://broker.example:8443\", audience: aud}\n"
	"  - name: files\n"
	"    match: {host: api.example.com, path: \"/v1/files/*.js*n/x*%2A*\"}\n"
	"    action: pass\n"
	"  - name: fallback\n"
	"    match: {host: api.example.com}\n"
	"    action: deny\n";

/* ---- reference matchers --------------------------------------------- */

/* s[0..len) with every valid %XX decoded, into a fresh buffer. */
static char *
ref_decode(const char *s, size_t len, size_t *outlen)
{
	char *out, hex[3] = { 0, 0, 0 };
	size_t i, o = 0;

	CHECK((out = malloc(len + 1)) != NULL);
	for (i = 0; i < len; i++) {
		if (s[i] == '%' && i + 2 < len && s[i + 1] != '\0' &&
		    s[i + 2] != '\0' &&
		    strchr("0123456789abcdefABCDEF", s[i + 1]) != NULL &&
		    strchr("0123456789abcdefABCDEF", s[i + 2]) != NULL) {
			hex[0] = s[i + 1];
			hex[1] = s[i + 2];
			out[o++] = (char)strtoul(hex, NULL, 16);
			i += 2;
		} else
			out[o++] = s[i];
	}
	*outlen = o;
	return out;
}

/* Value glob by dynamic programming; -1 when too big to try. */
static int
ref_value(const char *g, const char *s, size_t len)
{
	size_t gl = strlen(g), i, j;
	unsigned char *prev, *cur, *t;
	int r;

	if ((gl + 1) * (len + 1) > REF_MAX_CELLS)
		return -1;
	CHECK((prev = calloc(len + 1, 1)) != NULL);
	CHECK((cur = calloc(len + 1, 1)) != NULL);
	prev[0] = 1;
	for (i = 0; i < gl; i++) {
		cur[0] = g[i] == '*' && prev[0];
		for (j = 1; j <= len; j++)
			cur[j] = g[i] == '*' ? (cur[j - 1] || prev[j]) :
			    (prev[j - 1] && s[j - 1] == g[i]);
		t = prev;
		prev = cur;
		cur = t;
	}
	r = prev[len];
	free(prev);
	free(cur);
	return r;
}

struct segs {
	const char	*p[HTTP_MAX_TARGET + 2];
	size_t		 n[HTTP_MAX_TARGET + 2];
	size_t		 count;
};

static void
ref_split(const char *s, size_t len, struct segs *sg)
{
	size_t i, start = 1;

	sg->count = 0;
	for (i = 1; i <= len; i++)
		if (i == len || s[i] == '/') {
			CHECK(sg->count < HTTP_MAX_TARGET + 2);
			sg->p[sg->count] = s + start;
			sg->n[sg->count++] = i - start;
			start = i + 1;
		}
}

/*
 * One glob segment against one path segment: "*" alone is one non-empty
 * segment; else each raw '*' is any run of bytes, the rest compares
 * decoded ("%2A" is a literal star).  By dynamic programming.
 */
static int
ref_unit(const char *g, size_t gn, const char *p, size_t pn)
{
	unsigned char *prev, *cur, *t;
	int *pat;
	char *b, *one;
	size_t bn, pl = 0, on, i, j, k;
	int r;

	if (gn == 1 && g[0] == '*')
		return pn > 0;
	CHECK((pat = malloc((gn + 1) * sizeof(*pat))) != NULL);
	for (i = 0; i < gn; i = k) {
		if (g[i] == '*') {
			pat[pl++] = -1;
			k = i + 1;
			continue;
		}
		for (k = i; k < gn && g[k] != '*'; k++)
			;
		one = ref_decode(g + i, k - i, &on);
		for (j = 0; j < on; j++)
			pat[pl++] = (unsigned char)one[j];
		free(one);
	}
	b = ref_decode(p, pn, &bn);
	CHECK((prev = calloc(bn + 1, 1)) != NULL);
	CHECK((cur = calloc(bn + 1, 1)) != NULL);
	prev[0] = 1;
	for (i = 0; i < pl; i++) {
		cur[0] = pat[i] < 0 && prev[0];
		for (j = 1; j <= bn; j++)
			cur[j] = pat[i] < 0 ? (cur[j - 1] || prev[j]) :
			    (prev[j - 1] && (unsigned char)b[j - 1] == pat[i]);
		t = prev;
		prev = cur;
		cur = t;
	}
	r = prev[bn];
	free(prev);
	free(cur);
	free(b);
	free(pat);
	return r;
}

/* Path glob by dynamic programming over segments; -1 when too big. */
static int
ref_path(const char *glob, const char *path, size_t len)
{
	static struct segs gs, ps;
	unsigned char *prev, *cur, *t;
	size_t i, j;
	int star, r;

	if (glob[0] != '/' || len == 0 || path[0] != '/')
		return 0;
	if (strlen(glob) > HTTP_MAX_TARGET || len > HTTP_MAX_TARGET)
		return -1;
	ref_split(glob, strlen(glob), &gs);
	ref_split(path, len, &ps);
	/* every pair of segments is matched once: at most the product */
	if ((gs.count + 1) * (ps.count + 1) > REF_MAX_CELLS / 64 ||
	    (strlen(glob) + 1) * (len + 1) > REF_MAX_CELLS)
		return -1;
	CHECK((prev = calloc(ps.count + 1, 1)) != NULL);
	CHECK((cur = calloc(ps.count + 1, 1)) != NULL);
	prev[0] = 1;
	for (i = 0; i < gs.count; i++) {
		star = gs.n[i] == 2 && gs.p[i][0] == '*' && gs.p[i][1] == '*';
		cur[0] = star && prev[0];
		for (j = 1; j <= ps.count; j++)
			cur[j] = star ? (cur[j - 1] || prev[j]) :
			    (prev[j - 1] && ref_unit(gs.p[i], gs.n[i],
			    ps.p[j - 1], ps.n[j - 1]));
		t = prev;
		prev = cur;
		cur = t;
	}
	r = prev[ps.count];
	free(prev);
	free(cur);
	return r;
}

/* ---- checks ------------------------------------------------------------- */

static int
is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F');
}

/* What httppath.h promises of a normalised path. */
static void
check_path(const char *target, size_t tlen, const char *out, size_t plen,
    const char *q, size_t qlen)
{
	char again[HTTP_MAX_TARGET + 2], hex[3] = { 0, 0, 0 };
	const char *q2, *why, *s, *e;
	size_t plen2, qlen2, i, n;
	int c;

	CHECK(strlen(out) == plen && plen <= tlen && out[0] == '/');
	CHECK(q == NULL || (q > target && q <= target + tlen && q[-1] == '?' &&
	    q + qlen == target + tlen));
	CHECK(q != NULL || qlen == 0);
	for (s = out + 1;; s = e + 1) {
		e = strchr(s, '/');
		n = e != NULL ? (size_t)(e - s) : strlen(s);
		CHECK(n > 0 || e == NULL);		/* no "//" */
		CHECK(!(n == 1 && s[0] == '.'));
		CHECK(!(n == 2 && s[0] == '.' && s[1] == '.'));
		if (e == NULL)
			break;
	}
	for (i = 0; i < plen; i++) {
		CHECK((unsigned char)out[i] > 0x20 && (unsigned char)out[i] < 0x7f);
		CHECK(out[i] != '\\' && out[i] != '?' && out[i] != '#');
		if (out[i] != '%')
			continue;
		CHECK(i + 2 < plen && is_hex(out[i + 1]) && is_hex(out[i + 2]));
		CHECK(strncmp(out + i, "%2F", 3) != 0 &&
		    strncmp(out + i, "%5C", 3) != 0 &&
		    strncmp(out + i, "%00", 3) != 0);
		/* Unreserved characters are never left encoded. */
		hex[0] = out[i + 1];
		hex[1] = out[i + 2];
		c = (int)strtoul(hex, NULL, 16);
		CHECK(strchr("-._~", c) == NULL && !(c >= '0' && c <= '9') &&
		    !(c >= 'A' && c <= 'Z') && !(c >= 'a' && c <= 'z'));
	}
	/* A fixed point. */
	CHECK(http_path_normalize(out, plen, again, plen + 1, &plen2, &q2,
	    &qlen2, &why) == 0);
	CHECK(plen2 == plen && memcmp(again, out, plen) == 0 && q2 == NULL);
}

static void
check_globs(const struct policy *p, const struct http_head *h,
    const char *path, size_t plen)
{
	const struct http_header *x;
	const struct intercept_rule *r;
	size_t i, j;
	int ref;

	for (i = 0; i < p->nintercepts; i++) {
		r = &p->intercepts[i];
		if (r->path != NULL && (ref = ref_path(r->path, path, plen)) >= 0)
			CHECK(policy_path_match(r->path, path, plen) == ref);
		for (j = 0; j < r->nheaders; j++) {
			x = http_head_get(h, r->headers[j].name);
			if (x != NULL && (ref = ref_value(r->headers[j].value,
			    x->value, x->value_len)) >= 0)
				CHECK(policy_value_match(r->headers[j].value,
				    x->value, x->value_len) == ref);
		}
	}
	if ((x = http_head_get(h, "x-glob")) != NULL)
		for (j = 0; j < h->nheaders && j < XGLOB_HEADERS; j++)
			if ((ref = ref_value(x->value, h->headers[j].value,
			    h->headers[j].value_len)) >= 0)
				CHECK(policy_value_match(x->value,
				    h->headers[j].value,
				    h->headers[j].value_len) == ref);
	if ((x = http_head_get(h, "x-path-glob")) != NULL &&
	    (ref = ref_path(x->value, path, plen)) >= 0)
		CHECK(policy_path_match(x->value, path, plen) == ref);
}

static void
check_head(const struct policy *p, const struct http_head *h)
{
	char out[HTTP_MAX_TARGET + 2];
	const struct intercept_rule *r;
	struct http_request_view rq;
	const char *target, *why = NULL;
	size_t tlen, plen;
	int rc;

	target = h->absolute_form ? h->origin_target : h->target;
	tlen = h->absolute_form ? strlen(target) : h->target_len;
	CHECK(tlen + 1 <= sizeof(out));
	memset(&rq, 0, sizeof(rq));
	/* len + 1 bytes always suffice. */
	rc = http_path_normalize(target, tlen, out, tlen + 1, &plen,
	    &rq.query, &rq.query_len, &why);
	if (rc != 0) {
		CHECK(rc == SL_ERR_INVALID && why != NULL);
		CHECK(strcmp(why, "path too long") != 0);
		return;
	}
	check_path(target, tlen, out, plen, rq.query, rq.query_len);
	rq.method = h->method;
	rq.host = h->has_host ? h->host : "api.example.com";
	rq.path = out;
	rq.headers = h->headers;
	rq.nheaders = h->nheaders;
	r = policy_match_request(p, &rq);
	CHECK(r == NULL || (r >= p->intercepts &&
	    r < p->intercepts + p->nintercepts));
	/* An intercepted host always has its fallback. */
	if (strcmp(rq.host, "api.example.com") == 0)
		CHECK(r != NULL);
	check_globs(p, h, out, plen);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct policy *p;	/* parsed once, kept for the process */
	struct errlist el = ERRLIST_INIT;
	const struct http_head *h;
	struct http_reqs *s;
	const char *why;
	size_t used, pos = 0, guard;
	enum http_ev ev;

	if (p == NULL) {
		CHECK(sodium_init() >= 0);
		CHECK(policy_parse("fuzz", policy_yaml, sizeof(policy_yaml) - 1,
		    &p, &el) == 0);
		errlist_free(&el);
	}
	CHECK((s = http_reqs_new(65536)) != NULL);
	/* Every event but END consumes a byte or ends the stream. */
	for (guard = 0; guard < 2 * size + 8; guard++) {
		ev = http_reqs_feed(s, size > pos ? data + pos : NULL,
		    size - pos, &used, &h, &why);
		if (ev == HTTP_EV_NEED_MORE || ev == HTTP_EV_INVALID ||
		    ev == HTTP_EV_TUNNEL)
			break;
		if (ev == HTTP_EV_HEAD)
			check_head(p, h);
		pos += used;
	}
	http_reqs_free(s);
	return 0;
}
