/* test_redact.c: the streaming secret redactor. */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include <sodium.h>

#include "util/err.h"
#include "util/redact.h"

#define MARK		REDACT_MARK
#define MARK_LEN	(sizeof(REDACT_MARK) - 1)

/* What a redactor emitted. */
struct out {
	uint8_t		*buf;
	size_t		 len, cap;
	size_t		 calls;
	size_t		 stop_at;	/* the call (from 1) that says stop */
	const uint8_t	*last;		/* the pointer of the last call */
};

static int
collect(void *arg, const uint8_t *p, size_t len)
{
	struct out *o = arg;

	assert_true(len > 0);
	o->calls++;
	o->last = p;
	if (o->stop_at != 0 && o->calls == o->stop_at)
		return 1;
	if (len > o->cap - o->len) {
		o->cap = (o->cap + len) * 2;
		assert_non_null(o->buf = realloc(o->buf, o->cap));
	}
	memcpy(o->buf + o->len, p, len);
	o->len += len;
	return 0;
}

static void
out_free(struct out *o)
{
	free(o->buf);
	memset(o, 0, sizeof(*o));
}

/* A handful of patterns from C strings. */
static size_t
pats_of(struct redact_pat *pats, const char *const *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		pats[i].p = (const uint8_t *)s[i];
		pats[i].len = strlen(s[i]);
	}
	return n;
}

/*
 * The contract, written plainly: from the current start, the first byte
 * where some pattern ends is replaced, with the longest pattern ending
 * there, and the search starts again after it.
 */
static size_t
naive(const struct redact_pat *pats, size_t n, const uint8_t *in, size_t len,
    uint8_t *out, uint64_t *count)
{
	size_t from = 0, end, best, k, o = 0;

	for (end = 1; end <= len; end++) {
		best = 0;
		for (k = 0; k < n; k++)
			if (pats[k].len <= end - from && pats[k].len > best &&
			    memcmp(in + end - pats[k].len, pats[k].p,
			    pats[k].len) == 0)
				best = pats[k].len;
		if (best == 0)
			continue;
		memcpy(out + o, in + from, end - best - from);
		o += end - best - from;
		memcpy(out + o, MARK, MARK_LEN);
		o += MARK_LEN;
		from = end;
		(*count)++;
	}
	memcpy(out + o, in + from, len - from);
	return o + len - from;
}

/* Streams in, cut at cuts[0..ncuts) (ascending), into o; returns the count. */
static uint64_t
stream(struct redactor *r, const struct redact_pat *pats, size_t n,
    const uint8_t *in, size_t len, const size_t *cuts, size_t ncuts,
    struct out *o)
{
	size_t i, from = 0, to;

	assert_int_equal(redactor_reset(r, pats, n), 0);
	for (i = 0; i <= ncuts; i++) {
		to = i < ncuts ? cuts[i] : len;
		assert_int_equal(redactor_feed(r, in + from, to - from,
		    collect, o), 0);
		from = to;
	}
	assert_int_equal(redactor_flush(r, collect, o), 0);
	return redactor_count(r);
}

/*
 * Whatever the cuts (none, one anywhere, two anywhere for short inputs,
 * every byte alone), the stream redacts in to want, as redact_buf does.
 */
static void
check_splits(const struct redact_pat *pats, size_t n, const uint8_t *in,
    size_t len, const uint8_t *want, size_t want_len, uint64_t want_count)
{
	struct redactor *r;
	struct out o = { 0 };
	size_t cuts[2], i, j, *ones;
	uint8_t *buf;
	uint64_t count = 0;
	long got;

	assert_non_null(r = redactor_new());
	assert_non_null(buf = malloc(10 * len + 1));
	got = redact_buf(pats, n, in, len, buf, 10 * len + 1, &count);
	assert_int_equal(got, want_len);
	assert_memory_equal(buf, want, want_len);
	assert_int_equal(count, want_count);

	assert_int_equal(stream(r, pats, n, in, len, NULL, 0, &o), want_count);
	assert_int_equal(o.len, want_len);
	assert_memory_equal(o.buf, want, want_len);
	out_free(&o);
	for (i = 0; i <= len; i++) {
		cuts[0] = i;
		assert_int_equal(stream(r, pats, n, in, len, cuts, 1, &o),
		    want_count);
		assert_int_equal(o.len, want_len);
		assert_memory_equal(o.buf, want, want_len);
		out_free(&o);
		for (j = i; len <= 200 && j <= len; j++) {
			cuts[1] = j;
			assert_int_equal(stream(r, pats, n, in, len, cuts, 2,
			    &o), want_count);
			assert_int_equal(o.len, want_len);
			assert_memory_equal(o.buf, want, want_len);
			out_free(&o);
		}
	}
	assert_non_null(ones = calloc(len + 1, sizeof(*ones)));
	for (i = 0; i < len; i++)
		ones[i] = i + 1;
	assert_int_equal(stream(r, pats, n, in, len, ones, len, &o),
	    want_count);
	assert_int_equal(o.len, want_len);
	assert_memory_equal(o.buf, want, want_len);
	out_free(&o);
	free(ones);
	free(buf);
	redactor_free(r);
}

/* check_splits() with C strings. */
static void
check_str(const char *const *s, size_t n, const char *in, const char *want,
    uint64_t want_count)
{
	struct redact_pat pats[8];

	assert_true(n <= 8);
	pats_of(pats, s, n);
	check_splits(pats, n, (const uint8_t *)in, strlen(in),
	    (const uint8_t *)want, strlen(want), want_count);
}

/* ---- forms --------------------------------------------------------------- */

/* Forms of value, checked to be well made; returns n. */
static int
forms(const char *value, size_t len, uint8_t **store, struct redact_pat *pats)
{
	size_t size = redact_forms_size(len), used = 0, i, j;
	int n;

	assert_true(size > 0);
	assert_non_null(*store = malloc(size));
	n = redact_forms((const uint8_t *)value, len, *store, size, pats,
	    REDACT_MAX_FORMS);
	assert_true(n >= 1 && n <= REDACT_MAX_FORMS);
	assert_int_equal(pats[0].len, len);
	assert_memory_equal(pats[0].p, value, len);
	for (i = 0; i < (size_t)n; i++) {
		/* Laid out one after the other, within the bound. */
		assert_ptr_equal(pats[i].p, *store + used);
		assert_true(pats[i].len >= 1);
		used += pats[i].len;
		for (j = 0; j < i; j++)
			assert_false(pats[i].len == pats[j].len &&
			    memcmp(pats[i].p, pats[j].p, pats[i].len) == 0);
	}
	assert_true(used <= size);
	return n;
}

static void
check_forms(const char *value, size_t len, const char *const *want,
    size_t nwant)
{
	struct redact_pat pats[REDACT_MAX_FORMS];
	uint8_t *store;
	size_t i;

	assert_int_equal(forms(value, len, &store, pats), nwant);
	for (i = 0; i < nwant; i++) {
		assert_int_equal(pats[i].len, strlen(want[i]));
		assert_memory_equal(pats[i].p, want[i], pats[i].len);
	}
	free(store);
}

/* Each of want[0..nwant) is among value's forms. */
static void
check_has_forms(const char *value, size_t len, const char *const *want,
    size_t nwant)
{
	struct redact_pat pats[REDACT_MAX_FORMS];
	uint8_t *store;
	size_t i, k;
	int n = forms(value, len, &store, pats);

	for (i = 0; i < nwant; i++) {
		for (k = 0; k < (size_t)n; k++)
			if (pats[k].len == strlen(want[i]) &&
			    memcmp(pats[k].p, want[i], pats[k].len) == 0)
				break;
		if (k == (size_t)n)
			fail_msg("no form %s", want[i]);
	}
	free(store);
}

/*
 * Expected strings from Python's base64, urllib.parse.quote(safe=''),
 * bytes.hex(), and a few lines of Python for each escaping style (what
 * redact.h describes), forms equal to an earlier one left out.
 */
static void
t_forms_known(void **st)
{
	static const char v1[] = "s3cr3t Tok~n/+?\xfe";
	static const char *const w1[] = {
		v1,
		"czNjcjN0IFRva35uLys//",	/* of ...Lys//g== */
		"czNjcjN0IFRva35uLys__",
		"MzY3IzdCBUb2t+bi8rP/",		/* after 1 byte */
		"MzY3IzdCBUb2t-bi8rP_",
		"zM2NyM3QgVG9rfm4vKz/+",	/* after 2 bytes */
		"zM2NyM3QgVG9rfm4vKz_-",
		"s3cr3t%20Tok~n%2F%2B%3F%FE",
		"s3cr3t%20Tok~n%2f%2b%3f%fe",
		"s3cr3t+Tok~n%2F%2B%3F%FE",
		"73336372337420546f6b7e6e2f2b3ffe",
		"73336372337420546F6B7E6E2F2B3FFE",
		"S3CR3T TOK~N/+?\xfe",
		"s3cr3t tok~n/+?\xfe",
		"s3cr3t Tok~n\\/+?\xfe",		/* PHP; Go's is v1 */
		"s3cr3t Tok~n/\\u002B?\xfe",		/* .NET */
		"s3cr3t\\u0020Tok~n\\u002f\\u002b\\u003f\\u00fe",
		"s3cr3t&#32;Tok~n&#47;&#43;&#63;&#254;",	/* HTML: v1 */
		"s3cr3t&#x20;Tok~n&#x2f;&#x2b;&#x3f;&#xfe;",
		"s3cr3t&#x20;Tok~n&#x2F;&#x2B;&#x3F;&#xFE;",
	};
	static const char v2[] = "\xfb\xff\xbf\xfb\xff\xbf\xfb\xff";
	static const char *const w2[] = {
		v2,
		"+/+/+/+/+/", "-_-_-_-_-_",
		"v/v/v/v/v/", "v_v_v_v_v_",
		"7/7/7/7/7/", "7_7_7_7_7_",
		"%FB%FF%BF%FB%FF%BF%FB%FF",
		"%fb%ff%bf%fb%ff%bf%fb%ff",	/* no space: form == upper */
		"fbffbffbffbffbff", "FBFFBFFBFFBFFBFF",
		"\\u00fb\\u00ff\\u00bf\\u00fb\\u00ff\\u00bf\\u00fb\\u00ff",
		"&#251;&#255;&#191;&#251;&#255;&#191;&#251;&#255;",
		"&#xfb;&#xff;&#xbf;&#xfb;&#xff;&#xbf;&#xfb;&#xff;",
		"&#xFB;&#xFF;&#xBF;&#xFB;&#xFF;&#xBF;&#xFB;&#xFF;",
	};
	/* base64 "YWJjZGVm"; the shifted cores have 7 chars, too short. */
	static const char *const w3[] = { "abcdef", "YWJjZGVm",
	    "616263646566", "ABCDEF" };
	/* "YWI=": the last char mixes in the next byte's bits. */
	static const char *const w4[] = { "ab", "YW", "6162", "AB" };
	/* "IA==": only "I" is the value's alone. */
	static const char *const w5[] = { " ", "I", "%20", "+", "20",
	    "\\u0020", "&#32;", "&#x20;" };
	/* Every JSON and HTML style differs here (its base64 not listed). */
	static const char v6[] = "a<b>&\"c'/d";
	static const char *const w6[] = {
		"a%3Cb%3E%26%22c%27%2Fd",
		"a%3cb%3e%26%22c%27%2fd",
		"613c623e262263272f64",
		"613C623E262263272F64",
		"A<B>&\"C'/D",
		"a<b>&\\\"c'\\/d",
		"a\\u003cb\\u003e\\u0026\\\"c'/d",
		"a\\u003Cb\\u003E\\u0026\\\"c\\u0027/d",
		"a\\u003cb\\u003e\\u0026\\u0022c\\u0027\\u002fd",
		"a&lt;b&gt;&amp;&quot;c&#x27;/d",
		"a&lt;b&gt;&amp;&quot;c&#39;/d",
		"a&#60;b&#62;&#38;&#34;c&#39;&#47;d",
		"a&#x3c;b&#x3e;&#x26;&#x22;c&#x27;&#x2f;d",
		"a&#x3C;b&#x3E;&#x26;&#x22;c&#x27;&#x2F;d",
	};

	check_forms(v1, sizeof(v1) - 1, w1, 20);
	check_forms(v2, sizeof(v2) - 1, w2, 15);
	check_forms("abcdef", 6, w3, 4);
	check_forms("ab", 2, w4, 4);
	check_forms(" ", 1, w5, 8);
	check_has_forms(v6, sizeof(v6) - 1, w6, sizeof(w6) / sizeof(w6[0]));
}

/* A base64 text with the value anywhere in it is caught. */
static void
t_forms_cover_base64(void **st)
{
	static const int variants[] = {
		sodium_base64_VARIANT_ORIGINAL,
		sodium_base64_VARIANT_ORIGINAL_NO_PADDING,
		sodium_base64_VARIANT_URLSAFE,
		sodium_base64_VARIANT_URLSAFE_NO_PADDING,
	};
	struct redact_pat pats[REDACT_MAX_FORMS];
	uint8_t raw[64], *store, *out;
	char b64[128];
	size_t len, pre, suf, v, trial, rawlen;
	uint64_t count;
	long got;
	int n;

	assert_true(sodium_init() >= 0);
	for (len = 1; len <= 40; len++) {
		for (trial = 0; trial < 4; trial++) {
			randombytes_buf(raw, sizeof(raw));
			n = forms((const char *)raw + 8, len, &store, pats);
			for (pre = 0; pre <= 5; pre++)
			for (suf = 0; suf <= 3; suf++)
			for (v = 0; v < 4; v++) {
				rawlen = pre + len + suf;
				sodium_bin2base64(b64, sizeof(b64),
				    raw + 8 - pre, rawlen, variants[v]);
				assert_non_null(out = malloc(10 * strlen(b64)));
				count = 0;
				got = redact_buf(pats, (size_t)n,
				    (const uint8_t *)b64, strlen(b64), out,
				    10 * strlen(b64), &count);
				assert_true(got > 0);
				/* Shifted cores exist from 7 bytes on. */
				if (pre % 3 == 0 || len >= 7)
					assert_true(count >= 1);
				free(out);
			}
			free(store);
		}
	}
}

/* redact_forms_size() bounds what redact_forms() writes; bad calls fail. */
static void
t_forms_size(void **st)
{
	struct redact_pat pats[REDACT_MAX_FORMS];
	uint8_t *value, *store;
	size_t len, kind, used, i, size;
	int n;

	assert_int_equal(redact_forms_size(0), 0);
	assert_int_equal(redact_forms_size(REDACT_MAX_VALUE + 1), 0);
	assert_non_null(value = malloc(REDACT_MAX_VALUE));
	for (len = 1; len <= REDACT_MAX_VALUE; len = len < 300 ? len + 1 :
	    len * 3 / 2) {
		for (kind = 0; kind < 4; kind++) {
			/* Worst for %XX (0xff, space), alnum, and noise. */
			if (kind < 3)
				memset(value, "\xff a"[kind], len);
			else
				randombytes_buf(value, len);
			n = forms((const char *)value, len, &store, pats);
			for (i = 0, used = 0; i < (size_t)n; i++)
				used += pats[i].len;
			assert_true(used <= redact_forms_size(len));
			free(store);
		}
	}
	len = REDACT_MAX_VALUE;
	randombytes_buf(value, len);
	size = redact_forms_size(len);
	assert_non_null(store = malloc(size));
	assert_true(redact_forms(value, len, store, size, pats,
	    REDACT_MAX_FORMS) >= 1);
	assert_int_equal(redact_forms(value, len, store, size - 1, pats,
	    REDACT_MAX_FORMS), SL_ERR_INVALID);
	assert_int_equal(redact_forms(value, len, store, size, pats,
	    REDACT_MAX_FORMS - 1), SL_ERR_INVALID);
	assert_int_equal(redact_forms(value, 0, store, size, pats,
	    REDACT_MAX_FORMS), SL_ERR_INVALID);
	assert_int_equal(redact_forms(value, REDACT_MAX_VALUE + 1, store,
	    SIZE_MAX, pats, REDACT_MAX_FORMS), SL_ERR_INVALID);
	free(store);
	free(value);
}

/* ---- streaming ----------------------------------------------------------- */

/* Each form of a value, in a body, cut anywhere. */
static void
t_forms_in_body(void **st)
{
	static const char v1[] = "s3cr3t Tok~n/+?\xfe";
	struct redact_pat pats[REDACT_MAX_FORMS];
	uint8_t *store, body[1024], want[2048];
	size_t k, blen, wlen;
	int n;

	n = forms(v1, sizeof(v1) - 1, &store, pats);
	assert_int_equal(n, 20);
	for (k = 0; k < (size_t)n; k++) {
		blen = wlen = 0;
		memcpy(body, "{\"echo\": \"", 10);
		memcpy(want, body, 10);
		blen = wlen = 10;
		memcpy(body + blen, pats[k].p, pats[k].len);
		blen += pats[k].len;
		memcpy(want + wlen, MARK, MARK_LEN);
		wlen += MARK_LEN;
		memcpy(body + blen, "\"}\n", 3);
		memcpy(want + wlen, "\"}\n", 3);
		blen += 3;
		wlen += 3;
		check_splits(pats, (size_t)n, body, blen, want, wlen, 1);
	}
	/* All of them, back to back and apart, in one body. */
	blen = wlen = 0;
	for (k = 0; k < (size_t)n; k++) {
		memcpy(body + blen, pats[k].p, pats[k].len);
		blen += pats[k].len;
		memcpy(want + wlen, MARK, MARK_LEN);
		wlen += MARK_LEN;
		if (k % 2) {
			memcpy(body + blen, " = ", 3);
			memcpy(want + wlen, " = ", 3);
			blen += 3;
			wlen += 3;
		}
	}
	check_splits(pats, (size_t)n, body, blen, want, wlen, (uint64_t)n);
	free(store);
}

static void
t_overlaps(void **st)
{
	static const char *const aba[] = { "aba" };
	static const char *const inner[] = { "abcd", "bc" };
	static const char *const same_end[] = { "bcd", "abcd" };
	static const char *const prefix[] = { "sec", "secret" };
	static const char *const aab[] = { "aab" };
	static const char *const suffix[] = { "b", "ab" };
	static const char *const many[] = { "he", "she", "his", "hers" };

	/* The first occurrence wins; the overlapping one is gone. */
	check_str(aba, 1, "ababa", MARK "ba", 1);
	check_str(aba, 1, "abaaba", MARK MARK, 2);
	check_str(aba, 1, "xabababax", "x" MARK "b" MARK "x", 2);
	/* The one that ends first, even if it starts later. */
	check_str(inner, 2, "abcd", "a" MARK "d", 1);
	/* Of those ending together, the longest. */
	check_str(same_end, 2, "xabcdx", "x" MARK "x", 1);
	check_str(suffix, 2, "ab b", MARK " " MARK, 2);
	/* A pattern that begins another ends first. */
	check_str(prefix, 2, "secret", MARK "ret", 1);
	check_str(prefix, 2, "secre", MARK "re", 1);
	/* Failure links: the match starts one byte into the held bytes. */
	check_str(aab, 1, "aaab", "a" MARK, 1);
	check_str(aab, 1, "aaaaaaaaab aa", "aaaaaaa" MARK " aa", 1);
	check_str(many, 4, "ushers", "u" MARK "rs", 1);
	check_str(many, 4, "this his hers", "t" MARK " " MARK " " MARK "rs",
	    3);
}

/* A possible start of a pattern waits for the next feed, or the flush. */
static void
t_held_back(void **st)
{
	static const char *const secret[] = { "secret" };
	struct redact_pat pats[1];
	struct redactor *r;
	struct out o = { 0 };

	pats_of(pats, secret, 1);
	assert_non_null(r = redactor_new());
	assert_int_equal(redactor_reset(r, pats, 1), 0);
	assert_int_equal(redactor_feed(r, (const uint8_t *)"xx secr", 7,
	    collect, &o), 0);
	assert_int_equal(o.len, 3);
	assert_memory_equal(o.buf, "xx ", 3);
	assert_int_equal(redactor_feed(r, (const uint8_t *)"", 0, collect,
	    &o), 0);
	assert_int_equal(o.len, 3);
	/* "secre" then "x": all of it goes, from the pattern's bytes. */
	assert_int_equal(redactor_feed(r, (const uint8_t *)"ex", 2, collect,
	    &o), 0);
	assert_int_equal(o.len, 9);
	assert_memory_equal(o.buf, "xx secre", 8);
	assert_int_equal(redactor_feed(r, (const uint8_t *)"s", 1, collect,
	    &o), 0);
	assert_int_equal(redactor_feed(r, (const uint8_t *)"e", 1, collect,
	    &o), 0);
	assert_int_equal(o.len, 9);
	assert_int_equal(redactor_flush(r, collect, &o), 0);
	assert_int_equal(o.len, 11);
	assert_memory_equal(o.buf, "xx secrexse", 11);
	/* Flushed, then fed again: a new stream, nothing left from before. */
	assert_int_equal(redactor_feed(r, (const uint8_t *)"cret", 4, collect,
	    &o), 0);
	assert_int_equal(redactor_flush(r, collect, &o), 0);
	assert_int_equal(o.len, 15);
	assert_memory_equal(o.buf + 11, "cret", 4);
	assert_int_equal(redactor_count(r), 0);
	/* A reset drops what was held back. */
	assert_int_equal(redactor_feed(r, (const uint8_t *)"abc sec", 7,
	    collect, &o), 0);
	assert_int_equal(redactor_reset(r, pats, 1), 0);
	assert_int_equal(redactor_feed(r, (const uint8_t *)"ret", 3, collect,
	    &o), 0);
	assert_int_equal(redactor_flush(r, collect, &o), 0);
	assert_int_equal(o.len, 22);
	assert_memory_equal(o.buf + 15, "abc ret", 7);
	out_free(&o);
	redactor_free(r);
}

/*
 * redactor_same_length: as many bytes as each occurrence had, the mark
 * then '*', or only '*' when shorter than the mark; fed a byte at a time
 * too; a reset (keyed or not) turns it off.
 */
static void
t_same_length(void **st)
{
	static const char *const secret[] = { "SECRETVALUE1234", "abcd" };
	static const char in[] = "x SECRETVALUE1234 y abcd z SECRETVALUE1234";
	static const char want[] = "x [REDACTED]***** y **** z [REDACTED]*****";
	static const uint64_t keys[] = { 7 };
	struct redact_pat pats[2];
	struct redactor *r;
	struct out o = { 0 };
	size_t i;

	(void)st;
	pats_of(pats, secret, 2);
	assert_non_null(r = redactor_new());
	assert_int_equal(redactor_reset_keyed(r, pats, 2, keys, 1), 0);
	redactor_same_length(r, 1);
	assert_int_equal(redactor_feed(r, (const uint8_t *)in, strlen(in),
	    collect, &o), 0);
	assert_int_equal(redactor_flush(r, collect, &o), 0);
	assert_int_equal(o.len, strlen(want));
	assert_memory_equal(o.buf, want, o.len);
	assert_int_equal(redactor_count(r), 3);
	out_free(&o);
	/* A byte at a time, after a keyed reset that kept the build: off. */
	assert_int_equal(redactor_reset_keyed(r, pats, 2, keys, 1), 0);
	for (i = 0; i < strlen(in); i++)
		assert_int_equal(redactor_feed(r, (const uint8_t *)in + i, 1,
		    collect, &o), 0);
	assert_int_equal(redactor_flush(r, collect, &o), 0);
	assert_int_equal(o.len, strlen("x [REDACTED] y [REDACTED] z [REDACTED]"));
	out_free(&o);
	/* On again, a byte at a time. */
	assert_int_equal(redactor_reset(r, pats, 2), 0);
	redactor_same_length(r, 1);
	for (i = 0; i < strlen(in); i++)
		assert_int_equal(redactor_feed(r, (const uint8_t *)in + i, 1,
		    collect, &o), 0);
	assert_int_equal(redactor_flush(r, collect, &o), 0);
	assert_int_equal(o.len, strlen(want));
	assert_memory_equal(o.buf, want, o.len);
	out_free(&o);
	redactor_free(r);
}

/* Held-back bytes come from the pattern: the input is not kept. */
static void
t_input_not_kept(void **st)
{
	static const char *const secret[] = { "secret" };
	struct redact_pat pats[1];
	struct redactor *r;
	struct out o = { 0 };
	uint8_t *in;

	pats_of(pats, secret, 1);
	assert_non_null(r = redactor_new());
	assert_int_equal(redactor_reset(r, pats, 1), 0);
	assert_non_null(in = malloc(7));
	memcpy(in, "xx secr", 7);
	assert_int_equal(redactor_feed(r, in, 7, collect, &o), 0);
	memset(in, 'Z', 7);
	free(in);
	assert_int_equal(redactor_feed(r, (const uint8_t *)"!", 1, collect,
	    &o), 0);
	assert_int_equal(redactor_flush(r, collect, &o), 0);
	assert_int_equal(o.len, 8);
	assert_memory_equal(o.buf, "xx secr!", 8);
	out_free(&o);
	redactor_free(r);
}

/* Never more than the longest pattern less one byte is held back. */
static void
t_held_bound(void **st)
{
	static const char *const p[] = { "aaab", "ab" };
	struct redact_pat pats[2];
	struct redactor *r;
	struct out o = { 0 };
	uint8_t c;
	size_t i;

	pats_of(pats, p, 2);
	assert_non_null(r = redactor_new());
	assert_int_equal(redactor_reset(r, pats, 2), 0);
	for (i = 0; i < 1000; i++) {
		c = 'a';
		assert_int_equal(redactor_feed(r, &c, 1, collect, &o), 0);
		/* "aaa" begins "aaab" and stays held; the rest goes. */
		assert_int_equal(i + 1 - o.len, i < 3 ? i + 1 : 3);
	}
	assert_int_equal(redactor_flush(r, collect, &o), 0);
	assert_int_equal(o.len, 1000);
	out_free(&o);
	redactor_free(r);
}

/*
 * Each reset builds from the bytes the patterns hold then: the same
 * pointers holding other bytes (memory freed and taken again) redact the
 * new value, not the old, and the count starts again.
 */
static void
t_reset_same_patterns(void **st)
{
	uint8_t val[] = "secret-one";
	struct redact_pat p = { val, sizeof(val) - 1 };
	struct redactor *r;
	struct out o = { 0 };
	static const uint8_t in1[] = "a secret-one b secret-two c";

	assert_non_null(r = redactor_new());
	assert_int_equal(redactor_reset(r, &p, 1), 0);
	assert_int_equal(redactor_feed(r, in1, sizeof(in1) - 1, collect, &o), 0);
	assert_int_equal(redactor_flush(r, collect, &o), 0);
	assert_int_equal(redactor_count(r), 1);
	assert_int_equal(o.len, strlen("a [REDACTED] b secret-two c"));
	assert_memory_equal(o.buf, "a [REDACTED] b secret-two c", o.len);
	/* Again, same patterns: same result, the count from zero. */
	o.len = 0;
	assert_int_equal(redactor_reset(r, &p, 1), 0);
	assert_int_equal(redactor_feed(r, in1, sizeof(in1) - 1, collect, &o), 0);
	assert_int_equal(redactor_flush(r, collect, &o), 0);
	assert_int_equal(redactor_count(r), 1);
	assert_memory_equal(o.buf, "a [REDACTED] b secret-two c", o.len);
	/* Same pointer and length, other bytes. */
	memcpy(val, "secret-two", 10);
	o.len = 0;
	assert_int_equal(redactor_reset(r, &p, 1), 0);
	assert_int_equal(redactor_feed(r, in1, sizeof(in1) - 1, collect, &o), 0);
	assert_int_equal(redactor_flush(r, collect, &o), 0);
	assert_int_equal(redactor_count(r), 1);
	assert_int_equal(o.len, strlen("a secret-one b [REDACTED] c"));
	assert_memory_equal(o.buf, "a secret-one b [REDACTED] c", o.len);
	out_free(&o);
	redactor_free(r);
}

/* Redacts in with r as it is reset, into o (emptied first). */
static void
run_keyed(struct redactor *r, const struct redact_pat *p, size_t n,
    const uint64_t *keys, size_t nkeys, const char *in, struct out *o)
{
	o->len = 0;
	assert_int_equal(redactor_reset_keyed(r, p, n, keys, nkeys), 0);
	assert_int_equal(redactor_feed(r, (const uint8_t *)in, strlen(in),
	    collect, o), 0);
	assert_int_equal(redactor_flush(r, collect, o), 0);
}

/*
 * A keyed reset keeps the build for the same names (held-back bytes and
 * the count start again), and builds anew for other names, more names or
 * none; serials are never given twice.
 */
static void
t_reset_keyed(void **st)
{
	uint8_t one[] = "secret-one", two[] = "secret-two";
	struct redact_pat p[2] = { { one, 10 }, { two, 10 } };
	uint64_t k1 = redact_serial(), k2 = redact_serial(), keys[2];
	struct redactor *r;
	struct out o = { 0 };
	static const char in[] = "a secret-one b secret-two c secret-";

	(void)st;
	assert_true(k1 != k2 && k1 != 0);
	assert_non_null(r = redactor_new());
	assert_false(redactor_keyed(r, &k1, 1));
	run_keyed(r, p, 1, &k1, 1, in, &o);
	assert_true(redactor_keyed(r, &k1, 1));
	assert_false(redactor_keyed(r, &k2, 1));
	assert_int_equal(redactor_count(r), 1);
	assert_int_equal(o.len, strlen("a [REDACTED] b secret-two c secret-"));
	assert_memory_equal(o.buf, "a [REDACTED] b secret-two c secret-", o.len);
	/* Held back "secret-" then: a new stream must not start with it. */
	o.len = 0;
	assert_int_equal(redactor_reset_keyed(r, p, 1, &k1, 1), 0);
	assert_int_equal(redactor_feed(r, (const uint8_t *)"secret-",
	    7, collect, &o), 0);
	assert_int_equal(redactor_reset_keyed(r, p, 1, &k1, 1), 0);
	o.len = 0;
	assert_int_equal(redactor_feed(r, (const uint8_t *)"one", 3,
	    collect, &o), 0);
	assert_int_equal(redactor_flush(r, collect, &o), 0);
	assert_int_equal(redactor_count(r), 0);
	assert_memory_equal(o.buf, "one", 3);
	/* Two lists, two names: both found. */
	keys[0] = k1;
	keys[1] = k2;
	run_keyed(r, p, 2, keys, 2, in, &o);
	assert_int_equal(redactor_count(r), 2);
	assert_memory_equal(o.buf, "a [REDACTED] b [REDACTED] c secret-", o.len);
	/* Back to one name: the second list is not searched any more. */
	run_keyed(r, p, 1, &k1, 1, in, &o);
	assert_int_equal(redactor_count(r), 1);
	/* No names: built each time, from the bytes there now. */
	memcpy(one, "secret-two", 10);
	run_keyed(r, p, 1, NULL, 0, in, &o);
	assert_false(redactor_keyed(r, &k1, 1));
	assert_memory_equal(o.buf, "a secret-one b [REDACTED] c secret-", o.len);
	/* A failed reset leaves no build to keep. */
	p[1].len = 0;
	assert_int_not_equal(redactor_reset_keyed(r, p + 1, 1, &k1, 1), 0);
	assert_false(redactor_keyed(r, &k1, 1));
	out_free(&o);
	redactor_free(r);
}

/* With no pattern, each feed is emitted at once, as is, in one piece. */
static void
t_passthrough(void **st)
{
	static const uint8_t in[] = "GET / HTTP/1.1\r\n\0\xff";
	struct redactor *r;
	struct out o = { 0 };
	uint8_t buf[64];

	assert_non_null(r = redactor_new());
	assert_int_equal(redactor_reset(r, NULL, 0), 0);
	assert_int_equal(redactor_feed(r, in, sizeof(in), collect, &o), 0);
	assert_int_equal(o.calls, 1);
	assert_ptr_equal(o.last, in);
	assert_int_equal(redactor_feed(r, in, 0, collect, &o), 0);
	assert_int_equal(redactor_flush(r, collect, &o), 0);
	assert_int_equal(o.calls, 1);
	assert_int_equal(o.len, sizeof(in));
	assert_memory_equal(o.buf, in, sizeof(in));
	assert_int_equal(redactor_count(r), 0);
	assert_int_equal(redact_buf(NULL, 0, in, sizeof(in), buf, sizeof(in),
	    NULL), sizeof(in));
	assert_memory_equal(buf, in, sizeof(in));
	out_free(&o);
	redactor_free(r);
}

/* A stop from emit fails the feed, and every later one until a reset. */
static void
t_emit_stops(void **st)
{
	static const char *const p[] = { "key" };
	static const char in[] = "a key, a k";
	struct redact_pat pats[1];
	struct redactor *r;
	struct out o = { 0 };
	size_t stop;

	pats_of(pats, p, 1);
	assert_non_null(r = redactor_new());
	/* "a ", the mark, ", a ", then "k" at the flush. */
	for (stop = 1; stop <= 4; stop++) {
		memset(&o, 0, sizeof(o));
		o.stop_at = stop;
		assert_int_equal(redactor_reset(r, pats, 1), 0);
		if (stop < 4) {
			assert_int_equal(redactor_feed(r, (const uint8_t *)in,
			    strlen(in), collect, &o), SL_ERR_IO);
		} else {
			assert_int_equal(redactor_feed(r, (const uint8_t *)in,
			    strlen(in), collect, &o), 0);
			assert_int_equal(redactor_flush(r, collect, &o),
			    SL_ERR_IO);
		}
		assert_int_equal(o.calls, stop);
		assert_int_equal(redactor_feed(r, (const uint8_t *)"x", 1,
		    collect, &o), SL_ERR_IO);
		assert_int_equal(redactor_flush(r, collect, &o), SL_ERR_IO);
		assert_int_equal(o.calls, stop);
		out_free(&o);
	}
	assert_int_equal(redactor_reset(r, pats, 1), 0);
	assert_int_equal(redactor_feed(r, (const uint8_t *)in, strlen(in),
	    collect, &o), 0);
	assert_int_equal(redactor_flush(r, collect, &o), 0);
	assert_int_equal(o.len, 17);
	assert_memory_equal(o.buf, "a " MARK ", a k", 17);
	out_free(&o);
	redactor_free(r);
}

static void
t_count(void **st)
{
	static const char *const p[] = { "tok", "en" };
	static const char in[] = "token tok en tokk";
	struct redact_pat pats[2];
	struct redactor *r;
	struct out o = { 0 };
	uint8_t buf[256];
	uint64_t count = 5;

	pats_of(pats, p, 2);
	assert_non_null(r = redactor_new());
	assert_int_equal(redactor_reset(r, pats, 2), 0);
	assert_int_equal(redactor_count(r), 0);
	assert_int_equal(redactor_feed(r, (const uint8_t *)in, strlen(in),
	    collect, &o), 0);
	assert_int_equal(redactor_flush(r, collect, &o), 0);
	assert_int_equal(redactor_count(r), 5);
	assert_int_equal(redactor_reset(r, pats, 2), 0);
	assert_int_equal(redactor_count(r), 0);
	assert_int_equal(redact_buf(pats, 2, (const uint8_t *)in, strlen(in),
	    buf, sizeof(buf), &count), o.len);
	assert_int_equal(count, 10);
	assert_memory_equal(buf, o.buf, o.len);
	out_free(&o);
	redactor_free(r);
}

static void
t_bad_setup_fails_closed(void **st)
{
	struct redact_pat pats[REDACT_MAX_PATTERNS + 1];
	struct redactor *r;
	struct out o = { 0 };
	uint8_t buf[16];
	uint64_t count = 0;
	size_t i;

	for (i = 0; i <= REDACT_MAX_PATTERNS; i++) {
		pats[i].p = (const uint8_t *)"pattern";
		pats[i].len = 1 + i % 7;
	}
	assert_non_null(r = redactor_new());
	/* Never reset: nothing passes. */
	assert_int_equal(redactor_feed(r, (const uint8_t *)"x", 1, collect,
	    &o), SL_ERR_INVALID);
	assert_int_equal(redactor_flush(r, collect, &o), SL_ERR_INVALID);
	assert_int_equal(redactor_reset(r, pats, REDACT_MAX_PATTERNS), 0);
	assert_int_equal(redactor_reset(r, pats, REDACT_MAX_PATTERNS + 1),
	    SL_ERR_INVALID);
	assert_int_equal(redactor_feed(r, (const uint8_t *)"x", 1, collect,
	    &o), SL_ERR_INVALID);
	pats[1].len = 0;
	assert_int_equal(redactor_reset(r, pats, 2), SL_ERR_INVALID);
	assert_int_equal(redactor_feed(r, (const uint8_t *)"x", 1, collect,
	    &o), SL_ERR_INVALID);
	assert_int_equal(o.calls, 0);
	assert_int_equal(redact_buf(pats, 2, (const uint8_t *)"x", 1, buf,
	    sizeof(buf), &count), SL_ERR_INVALID);
	assert_int_equal(redactor_reset(r, pats, 1), 0);
	assert_int_equal(redactor_feed(r, (const uint8_t *)"x", 1, collect,
	    &o), 0);
	out_free(&o);
	redactor_free(r);
	redactor_free(NULL);
}

static void
t_buf_too_small(void **st)
{
	static const char *const p[] = { "pw" };
	static const char in[] = "user pw!";
	struct redact_pat pats[1];
	uint8_t buf[64];
	uint64_t count = 0;

	pats_of(pats, p, 1);
	assert_int_equal(redact_buf(pats, 1, (const uint8_t *)in, strlen(in),
	    buf, 16, &count), 16);
	assert_memory_equal(buf, "user " MARK "!", 16);
	assert_int_equal(count, 1);
	assert_int_equal(redact_buf(pats, 1, (const uint8_t *)in, strlen(in),
	    buf, 15, &count), SL_ERR_TOO_BIG);
	assert_int_equal(redact_buf(pats, 1, (const uint8_t *)in, strlen(in),
	    buf, 6, &count), SL_ERR_TOO_BIG);
	assert_int_equal(count, 1);
	assert_int_equal(redact_buf(pats, 1, (const uint8_t *)"", 0, buf, 0,
	    &count), 0);
}

/* Random patterns and bodies over a small alphabet, against naive(). */
static void
t_random_vs_naive(void **st)
{
	struct redact_pat pats[4];
	uint8_t pbytes[4][8], in[200], want[2000];
	struct redactor *r;
	struct out o = { 0 };
	size_t iter, n, k, j, len, wlen, cuts[8], ncuts;
	uint64_t count;

	assert_non_null(r = redactor_new());
	for (iter = 0; iter < 3000; iter++) {
		n = randombytes_uniform(4) + 1;
		for (k = 0; k < n; k++) {
			pats[k].len = randombytes_uniform(6) + 1;
			for (j = 0; j < pats[k].len; j++)
				pbytes[k][j] = 'a' + randombytes_uniform(3);
			pats[k].p = pbytes[k];
		}
		len = randombytes_uniform(sizeof(in) + 1);
		for (j = 0; j < len; j++)
			in[j] = 'a' + randombytes_uniform(3);
		count = 0;
		wlen = naive(pats, n, in, len, want, &count);
		ncuts = randombytes_uniform(9);
		for (j = 0; j < ncuts; j++)
			cuts[j] = randombytes_uniform(len + 1);
		for (j = 1; j < ncuts; j++)	/* sorted, roughly */
			if (cuts[j] < cuts[j - 1])
				cuts[j] = cuts[j - 1];
		assert_int_equal(stream(r, pats, n, in, len, cuts, ncuts, &o),
		    count);
		assert_int_equal(o.len, wlen);
		assert_memory_equal(o.buf, want, wlen);
		out_free(&o);
	}
	redactor_free(r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_forms_known),
		cmocka_unit_test(t_forms_cover_base64),
		cmocka_unit_test(t_forms_size),
		cmocka_unit_test(t_forms_in_body),
		cmocka_unit_test(t_overlaps),
		cmocka_unit_test(t_held_back),
		cmocka_unit_test(t_same_length),
		cmocka_unit_test(t_input_not_kept),
		cmocka_unit_test(t_held_bound),
		cmocka_unit_test(t_passthrough),
		cmocka_unit_test(t_emit_stops),
		cmocka_unit_test(t_reset_same_patterns),
		cmocka_unit_test(t_reset_keyed),
		cmocka_unit_test(t_count),
		cmocka_unit_test(t_bad_setup_fails_closed),
		cmocka_unit_test(t_buf_too_small),
		cmocka_unit_test(t_random_vs_naive),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
