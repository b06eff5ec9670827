/*
 * fuzz_redact.c: libFuzzer target for the streaming secret redactor
 * (redact.c).
 *
 * Input:
 *   byte 0   bits 0-1: patterns less one (1 to 4); bits 2-5: the number
 *            of cuts; bit 6: the patterns are the forms of a value
 *            (redact_forms() of pattern 0, then 1 to 256 bytes long);
 *            bit 7: every pattern and body byte is folded to 'a'-'c', so
 *            that occurrences overlap often
 *   byte 1-4 the length of each pattern, less one (5 bits; 8 for a value)
 *            byte 4 bit 7: the body plants patterns (below)
 *   byte 5   the emit call that says stop in a third run, 0 none
 *   then the patterns' bytes, one byte per cut (the gap to the previous
 *   cut, less one), then the body.  In a body that plants patterns,
 *   0xff then k stands for pattern k % n (n patterns, or forms), whole
 *   or, by (k / n) % 4, whole, less its last byte or less its first: so
 *   that occurrences, near misses and hash collisions of the scans are
 *   common whatever the alphabet (up to MAXBODY bytes; past that, the
 *   bytes are taken as they are).
 *
 * The body is redacted whole, with the cuts, by redact_buf() and by a
 * plain reference scan: all four must agree on the bytes and the count.
 * Byte for byte (redactor_same_length), the output is as long as the
 * body and the count the same.
 * When no pattern has a byte of the mark, no pattern is left in the
 * output.  A stop from emit fails the feed at that call, after a prefix
 * of the right output, and every later feed until a reset.
 */
#include "autoconf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "util/err.h"
#include "util/redact.h"
#include "fuzz_check.h"

#define MAXPATS		4
#define MAXCUTS		16
#define HEAD		6
#define MAXBODY		16384
#define MARK_LEN	(sizeof(REDACT_MARK) - 1)

struct out {
	uint8_t		*buf;
	size_t		 len, cap;
	size_t		 calls;
	size_t		 stop_at;	/* 0 never */
};

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);


static int
collect(void *arg, const uint8_t *p, size_t len)
{
	struct out *o = arg;

	CHECK(len > 0);
	if (++o->calls == o->stop_at)
		return 1;
	if (len > o->cap - o->len) {
		o->cap = (o->cap + len) * 2;
		CHECK((o->buf = realloc(o->buf, o->cap)) != NULL);
	}
	memcpy(o->buf + o->len, p, len);
	o->len += len;
	return 0;
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
		memcpy(out + o, REDACT_MARK, MARK_LEN);
		o += MARK_LEN;
		from = end;
		(*count)++;
	}
	memcpy(out + o, in + from, len - from);
	return o + len - from;
}

/* Streams body cut at cuts[0..ncuts); the feed's result, or the flush's. */
static int
stream(struct redactor *r, const struct redact_pat *pats, size_t n,
    const uint8_t *body, size_t len, const size_t *cuts, size_t ncuts,
    struct out *o)
{
	size_t i, from = 0, to;
	int rv;

	CHECK(redactor_reset(r, pats, n) == 0);
	CHECK(redactor_count(r) == 0);
	for (i = 0; i <= ncuts; i++) {
		to = i < ncuts ? cuts[i] : len;
		if ((rv = redactor_feed(r, body + from, to - from, collect,
		    o)) != 0)
			return rv;
		from = to;
	}
	return redactor_flush(r, collect, o);
}

/* The forms of a value are distinct, laid out in order, within bounds. */
static int
make_forms(const uint8_t *value, size_t len, uint8_t **store,
    struct redact_pat *pats)
{
	size_t size = redact_forms_size(len), used = 0, i, j;
	uint64_t count = 0;
	uint8_t *copy;
	char *b64;
	int n;

	CHECK(size > 0);
	CHECK((*store = malloc(size)) != NULL);
	n = redact_forms(value, len, *store, size, pats, REDACT_MAX_FORMS);
	CHECK(n >= 1 && n <= REDACT_MAX_FORMS);
	CHECK(pats[0].len == len && memcmp(pats[0].p, value, len) == 0);
	for (i = 0; i < (size_t)n; i++) {
		CHECK(pats[i].p == *store + used && pats[i].len > 0);
		used += pats[i].len;
		for (j = 0; j < i; j++)
			CHECK(pats[i].len != pats[j].len ||
			    memcmp(pats[i].p, pats[j].p, pats[i].len) != 0);
	}
	CHECK(used <= size);

	/* The plain base64 of the value is caught. */
	CHECK((b64 = malloc(sodium_base64_ENCODED_LEN(len,
	    sodium_base64_VARIANT_ORIGINAL))) != NULL);
	CHECK((copy = malloc(10 * (len * 4 / 3 + 4))) != NULL);
	sodium_bin2base64(b64, sodium_base64_ENCODED_LEN(len,
	    sodium_base64_VARIANT_ORIGINAL), value, len,
	    sodium_base64_VARIANT_ORIGINAL);
	CHECK(redact_buf(pats, (size_t)n, (const uint8_t *)b64, strlen(b64),
	    copy, 10 * (len * 4 / 3 + 4), &count) >= 0 && count >= 1);
	free(copy);
	free(b64);
	return n;
}

/* No pattern has a byte of the mark, so none can straddle one. */
static int
mark_free(const struct redact_pat *pats, size_t n)
{
	size_t k, i;

	for (k = 0; k < n; k++) {
		for (i = 0; i < pats[k].len; i++)
			if (memchr(REDACT_MARK, pats[k].p[i], MARK_LEN) != NULL)
				return 0;
	}
	return 1;
}

/* No pattern has a '*', the same-length mask's filler. */
static int
star_free(const struct redact_pat *pats, size_t n)
{
	size_t k;

	for (k = 0; k < n; k++)
		if (memchr(pats[k].p, '*', pats[k].len) != NULL)
			return 0;
	return 1;
}

static void
check_no_pattern(const struct redact_pat *pats, size_t n, const uint8_t *out,
    size_t len)
{
	size_t k, i;

	for (k = 0; k < n; k++)
		for (i = 0; i + pats[k].len <= len; i++)
			CHECK(memcmp(out + i, pats[k].p, pats[k].len) != 0);
}

/*
 * The body of data[0..size): as is (folded if fold), or with planted
 * patterns; a new buffer of *len bytes.
 */
static uint8_t *
make_body(const uint8_t *data, size_t size, int fold, int planting,
    const struct redact_pat *pats, size_t n, size_t *len)
{
	const struct redact_pat *p;
	size_t i, o = 0, cap = planting ? MAXBODY : size, from, plen;
	uint8_t *body, k;

	if (cap < size)
		cap = size;
	CHECK((body = malloc(cap + 1)) != NULL);
	for (i = 0; i < size; i++) {
		if (planting && data[i] == 0xff && i + 1 < size) {
			k = data[++i];
			p = &pats[k % n];
			from = 0;
			plen = p->len;
			switch ((k / n) % 4) {
			case 2:
				plen--;
				break;
			case 3:
				from = 1;
				plen--;
				break;
			}
			if (plen <= cap - o - (size - i - 1)) {
				memcpy(body + o, p->p + from, plen);
				o += plen;
				continue;
			}
			i--;	/* no room: the two bytes as they are */
		}
		body[o++] = fold ? 'a' + data[i] % 3 : data[i];
	}
	*len = o;
	return body;
}

/* memcmp() that takes a NULL of an empty output. */
static int
same(const uint8_t *a, const uint8_t *b, size_t len)
{
	return len == 0 || memcmp(a, b, len) == 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct redact_pat pats[REDACT_MAX_FORMS];
	uint8_t *pbuf[MAXPATS] = { NULL }, *store = NULL, *body = NULL;
	uint8_t *want = NULL, *buf = NULL;
	struct redactor *r = NULL;
	struct out o = { 0 };
	size_t npats, ncuts = 0, want_cuts, cuts[MAXCUTS], i, k, len, pos;
	size_t wlen, stop_at, n, ncutb;
	uint64_t count = 0, bcount = 0;
	int fold, from_value, planting, rv;
	long got;

	static int ready;

	/* The redactor's tables are in guarded memory. */
	if (!ready && sodium_init() < 0)
		abort();
	ready = 1;
	if (size < HEAD)
		return 0;
	npats = (data[0] & 3) + 1;
	want_cuts = (data[0] >> 2) & 0x0f;
	from_value = (data[0] & 0x40) != 0;
	fold = (data[0] & 0x80) != 0;
	planting = (data[4] & 0x80) != 0;
	stop_at = data[5];
	pos = HEAD;
	if (from_value)
		npats = 1;
	for (k = 0; k < npats; k++) {
		len = from_value ? (size_t)data[1] + 1 :
		    (size_t)(data[1 + k] & 0x1f) + 1;
		if (size - pos < len)
			goto out;
		/* Exactly sized, so that ASan sees any overread. */
		CHECK((pbuf[k] = malloc(len)) != NULL);
		for (i = 0; i < len; i++)
			pbuf[k][i] = fold ? 'a' + data[pos + i] % 3 :
			    data[pos + i];
		pats[k].p = pbuf[k];
		pats[k].len = len;
		pos += len;
	}
	n = npats;
	if (from_value)
		n = (size_t)make_forms(pbuf[0], pats[0].len, &store, pats);
	if (size - pos < want_cuts)
		goto out;
	ncutb = pos;
	pos += want_cuts;
	body = make_body(data + pos, size - pos, fold, planting, pats, n, &len);
	for (i = 0, k = 0; i < want_cuts; i++) {
		k += (size_t)data[ncutb + i] + 1;
		if (k >= len)
			break;
		cuts[ncuts++] = k;
	}

	/* The reference. */
	CHECK((want = malloc(10 * len + 1)) != NULL);
	wlen = naive(pats, n, body, len, want, &count);
	CHECK(wlen <= 10 * len);

	/* One shot, and one byte short. */
	CHECK((buf = malloc(10 * len + 1)) != NULL);
	got = redact_buf(pats, n, body, len, buf, 10 * len, &bcount);
	CHECK(got >= 0 && (size_t)got == wlen && bcount == count);
	CHECK(same(buf, want, wlen));
	if (wlen > 0)
		CHECK(redact_buf(pats, n, body, len, buf, wlen - 1, &bcount) ==
		    SL_ERR_TOO_BIG && bcount == count);
	if (mark_free(pats, n))
		check_no_pattern(pats, n, want, wlen);

	/* Streamed with the cuts, then whole by the same redactor. */
	CHECK((r = redactor_new()) != NULL);
	CHECK(stream(r, pats, n, body, len, cuts, ncuts, &o) == 0);
	CHECK(o.len == wlen && same(o.buf, want, wlen));
	CHECK(redactor_count(r) == count);
	o.len = o.calls = 0;
	CHECK(stream(r, pats, n, body, len, NULL, 0, &o) == 0);
	CHECK(o.len == wlen && same(o.buf, want, wlen));
	CHECK(redactor_count(r) == count);

	/*
	 * Byte for byte (redactor_same_length), with the cuts: as long as
	 * the body, as many occurrences, and none left when no pattern has
	 * a byte of the mask.
	 */
	o.len = o.calls = 0;
	CHECK(redactor_reset(r, pats, n) == 0);
	redactor_same_length(r, 1);
	for (i = 0, pos = 0; i <= ncuts; i++) {
		k = i < ncuts ? cuts[i] : len;
		CHECK(redactor_feed(r, body + pos, k - pos, collect, &o) == 0);
		pos = k;
	}
	CHECK(redactor_flush(r, collect, &o) == 0);
	CHECK(o.len == len && redactor_count(r) == count);
	if (mark_free(pats, n) && star_free(pats, n))
		check_no_pattern(pats, n, o.buf, o.len);

	/* A stop: a prefix of the output, then nothing until a reset. */
	if (stop_at != 0) {
		o.len = o.calls = 0;
		o.stop_at = stop_at;
		rv = stream(r, pats, n, body, len, cuts, ncuts, &o);
		CHECK(rv == (o.calls >= stop_at ? SL_ERR_IO : 0));
		CHECK(o.len <= wlen && same(o.buf, want, o.len));
		if (rv != 0) {
			CHECK(redactor_feed(r, body, len, collect, &o) ==
			    SL_ERR_IO);
			CHECK(redactor_flush(r, collect, &o) == SL_ERR_IO);
			CHECK(o.calls == stop_at);
		} else
			CHECK(o.len == wlen);
	}
out:
	redactor_free(r);
	free(o.buf);
	free(buf);
	free(want);
	free(body);
	free(store);
	for (k = 0; k < MAXPATS; k++)
		free(pbuf[k]);
	return 0;
}
