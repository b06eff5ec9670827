/*
 * policy_request.c: which intercept rule judges a request, and what the
 * rule still refuses.  Globs are matched greedily, backtracking only to
 * the last star, so no glob costs more than the product of its length and
 * the text's; nothing allocates.
 */
#include "autoconf.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "parse/httphead.h"
#include "parse/httppath.h"
#include "conf/policy.h"

/* How the text under a glob is read. */
enum decode {
	DEC_RAW,	/* header values: bytes as they are */
	DEC_PCT,	/* path segments: %XX is one byte */
	DEC_FORM,	/* query names and values: %XX, and '+' is a space */
};

static unsigned char
lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

/*
 * The byte at s[*i] (*i < len), decoded as mode says, and advances *i past
 * it.  A '%' that starts no valid escape is itself (http_path_normalize()
 * refuses such targets, so only other callers meet one).
 */
static unsigned char
next_byte(const char *s, size_t len, size_t *i, enum decode mode)
{
	unsigned char c = (unsigned char)s[*i];
	int hi, lo;

	if (mode == DEC_FORM && c == '+') {
		(*i)++;
		return ' ';
	}
	if (mode != DEC_RAW && c == '%' && len - *i >= 3 &&
	    (hi = http_hexval((unsigned char)s[*i + 1])) >= 0 &&
	    (lo = http_hexval((unsigned char)s[*i + 2])) >= 0) {
		*i += 3;
		return (unsigned char)(hi << 4 | lo);
	}
	(*i)++;
	return c;
}

/*
 * A glob against decoded text: remember the last '*' and where the text
 * stood; on a mismatch let that star take one more byte and retry.  Each
 * retry moves the star's resume point forward, so the work is at most
 * strlen(glob) * len steps.
 */
static int
glob_match(const char *g, const char *s, size_t len, enum decode mode)
{
	const char *star = NULL;
	size_t i = 0, next, resume = 0;
	unsigned char c;

	while (i < len) {
		if (*g == '*') {
			while (*g == '*')
				g++;
			star = g;
			resume = i;
			continue;
		}
		next = i;
		c = next_byte(s, len, &next, mode);
		if (*g != '\0' && (unsigned char)*g == c) {
			g++;
			i = next;
			continue;
		}
		if (star == NULL)
			return 0;
		g = star;
		(void)next_byte(s, len, &resume, mode);
		i = resume;
	}
	while (*g == '*')
		g++;
	return *g == '\0';
}

int
policy_value_match(const char *glob, const char *s, size_t len)
{
	return glob_match(glob, s, len, DEC_RAW);
}

/* Whether want (NUL-terminated) equals s[0..len) decoded as mode says. */
static int
decoded_equal(const char *want, const char *s, size_t len, enum decode mode)
{
	size_t i = 0;

	while (i < len)
		if (*want == '\0' ||
		    (unsigned char)*want++ != next_byte(s, len, &i, mode))
			return 0;
	return *want == '\0';
}

/* ---- paths -------------------------------------------------------------- */

/* Where the segment starting at s[from] ends: the next '/', or len. */
static size_t
seg_end(const char *s, size_t len, size_t from)
{
	const char *e;

	if (from >= len)
		return len;
	e = memchr(s + from, '/', len - from);
	return e != NULL ? (size_t)(e - s) : len;
}

/*
 * Glob segment g[0..gn) against path segment p[0..pn), both decoded: a
 * segment that is "*" alone is one non-empty segment; otherwise each '*'
 * is any run of bytes, none included, within the segment (an escaped
 * "%2A" is a literal '*').  As glob_match: at most gn * pn steps.
 */
static int
seg_match(const char *g, size_t gn, const char *p, size_t pn)
{
	size_t i = 0, j = 0, star = SIZE_MAX, resume = 0, gi, pj;

	if (gn == 1 && g[0] == '*')
		return pn > 0;
	while (j < pn) {
		if (i < gn && g[i] == '*') {
			star = ++i;
			resume = j;
			continue;
		}
		gi = i;
		pj = j;
		if (i < gn && next_byte(g, gn, &gi, DEC_PCT) ==
		    next_byte(p, pn, &pj, DEC_PCT)) {
			i = gi;
			j = pj;
			continue;
		}
		if (star == SIZE_MAX)
			return 0;
		i = star;
		(void)next_byte(p, pn, &resume, DEC_PCT);
		j = resume;
	}
	while (i < gn && g[i] == '*')
		i++;
	return i == gn;
}

static int
is_globstar(const char *g, size_t from, size_t end)
{
	return end - from == 2 && g[from] == '*' && g[from + 1] == '*';
}

/*
 * As glob_match, a segment at a time: "**" is the star.  A cursor is the
 * offset of the '/' that opens a segment; it equals the length once every
 * segment is used.
 */
int
policy_path_match(const char *glob, const char *path, size_t len)
{
	size_t glen, gc = 0, pc = 0, ge, pe, star_g = SIZE_MAX, star_p = 0;

	if (glob[0] != '/' || len == 0 || path[0] != '/')
		return 0;
	glen = strlen(glob);
	while (pc < len) {
		pe = seg_end(path, len, pc + 1);
		if (gc < glen) {
			ge = seg_end(glob, glen, gc + 1);
			if (is_globstar(glob, gc + 1, ge)) {
				star_g = gc = ge;
				star_p = pc;
				continue;
			}
			if (seg_match(glob + gc + 1, ge - gc - 1, path + pc + 1,
			    pe - pc - 1)) {
				gc = ge;
				pc = pe;
				continue;
			}
		}
		if (star_g == SIZE_MAX)
			return 0;
		gc = star_g;
		star_p = seg_end(path, len, star_p + 1);
		pc = star_p;
	}
	while (gc < glen && is_globstar(glob, gc + 1,
	    (ge = seg_end(glob, glen, gc + 1))))
		gc = ge;
	return gc == glen;
}

/* ---- the parts of a rule ------------------------------------------------ */

/* Every appearance of the parameter matches, and there is one. */
static int
query_match(const struct kv *want, const char *q, size_t len)
{
	size_t i, end, eq, val, seen = 0;

	for (i = 0; i < len; i = end + 1) {
		end = i;
		while (end < len && q[end] != '&')
			end++;
		if (end == i)
			continue;
		eq = i;
		while (eq < end && q[eq] != '=')
			eq++;
		if (!decoded_equal(want->name, q + i, eq - i, DEC_FORM))
			continue;
		val = eq < end ? eq + 1 : end;
		if (!glob_match(want->value, q + val, end - val, DEC_FORM))
			return 0;
		seen++;
	}
	return seen > 0;
}

/* Every line of the header matches, and there is one. */
static int
header_match(const struct kv *want, const struct http_header *hs, size_t n)
{
	size_t i, j, len = strlen(want->name), seen = 0;

	for (i = 0; i < n; i++) {
		if (hs[i].name_len != len)
			continue;
		for (j = 0; j < len; j++)
			if (lower((unsigned char)hs[i].name[j]) !=
			    (unsigned char)want->name[j])
				break;
		if (j < len)
			continue;
		if (!glob_match(want->value, hs[i].value, hs[i].value_len,
		    DEC_RAW))
			return 0;
		seen++;
	}
	return seen > 0;
}

/* Uppercase rule method against the request's, ignoring ASCII case. */
static int
method_equal(const char *rule, const char *m)
{
	for (; *rule != '\0' && *m != '\0'; rule++, m++)
		if (lower((unsigned char)*rule) != lower((unsigned char)*m))
			return 0;
	return *rule == *m;
}

static int
rule_match(const struct intercept_rule *r, const struct http_request_view *rq,
    size_t path_len)
{
	size_t i;

	if (!policy_pattern_match(r->host, rq->host))
		return 0;
	if (r->nmethods > 0) {
		for (i = 0; i < r->nmethods; i++)
			if (rq->method != NULL &&
			    method_equal(r->methods[i], rq->method))
				break;
		if (i == r->nmethods)
			return 0;
	}
	if (r->path != NULL && !policy_path_match(r->path, rq->path, path_len))
		return 0;
	for (i = 0; i < r->nquery; i++)
		if (rq->query == NULL ||
		    !query_match(&r->query[i], rq->query, rq->query_len))
			return 0;
	for (i = 0; i < r->nheaders; i++)
		if (!header_match(&r->headers[i], rq->headers, rq->nheaders))
			return 0;
	return 1;
}

const struct intercept_rule *
policy_match_request(const struct policy *p,
    const struct http_request_view *rq)
{
	size_t i, path_len = strlen(rq->path);

	for (i = 0; i < p->nintercepts; i++)
		if (rule_match(&p->intercepts[i], rq, path_len))
			return &p->intercepts[i];
	return NULL;
}

const char *
policy_request_refusal(const struct intercept_rule *r,
    const struct http_request_view *rq)
{
	size_t i;

	if ((r->action != ICPT_PASS && r->action != ICPT_INJECT) ||
	    r->allow_method_override)
		return NULL;
	for (i = 0; i < rq->nheaders; i++)
		if (http_header_claim(rq->headers[i].name,
		    rq->headers[i].name_len) == HTTP_CLAIM_METHOD)
			return "method-override";
	return NULL;
}
