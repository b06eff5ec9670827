/*
 * fuzz_clienthello.c: libFuzzer target for sniff_proto and
 * tls_clienthello_parse.  Besides memory errors (run it with ASan) it
 * checks the contracts the connection code relies on, and aborts when
 * one breaks:
 *  - a result other than NEED_MORE on a prefix of the stream is final:
 *    the whole stream gives the same result (the caller re-parses after
 *    every read, and must never see a verdict change);
 *  - COMPLETE reports a hello inside both len and limit, with terminated,
 *    bounded strings; re-parsing exactly hello_len bytes, or with a
 *    larger limit, gives the same hello, and a limit one byte short of
 *    hello_len gives TOO_BIG.
 */
#include "autoconf.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse/sniff.h"

static const size_t limits[] = {
	0, 5, 9, 64, 300, 512, 16384, 16389, 65536, SIZE_MAX,
};

static void
check(int ok)
{
	if (!ok)
		abort();
}

/* A copy of exactly n bytes, so that ASan sees a read past the end. */
static uint8_t *
dup_exact(const uint8_t *d, size_t n)
{
	uint8_t *p = malloc(n ? n : 1);

	check(p != NULL);
	if (n > 0)
		memcpy(p, d, n);
	return p;
}

static int
hello_equal(const struct tls_hello *a, const struct tls_hello *b)
{
	size_t i;

	if (a->has_sni != b->has_sni || strcmp(a->sni, b->sni) != 0 ||
	    a->has_ech != b->has_ech || a->offers_tls13 != b->offers_tls13 ||
	    a->legacy_version != b->legacy_version || a->nalpn != b->nalpn ||
	    a->hello_len != b->hello_len)
		return 0;
	for (i = 0; i < a->nalpn; i++)
		if (strcmp(a->alpn[i], b->alpn[i]) != 0)
			return 0;
	return 1;
}

static void
check_hello(const struct tls_hello *h, size_t len, size_t limit)
{
	size_t i, n;

	check(h->hello_len > 0 && h->hello_len <= len && h->hello_len <= limit);
	check(memchr(h->sni, '\0', sizeof(h->sni)) != NULL);
	check((h->has_sni != 0) == (h->sni[0] != '\0'));
	check(h->nalpn <= TLS_ALPN_MAX);
	for (i = 0; i < h->nalpn; i++) {
		n = strnlen(h->alpn[i], sizeof(h->alpn[i]));
		check(n > 0 && n < sizeof(h->alpn[i]));
	}
}

/* A hello found under one limit is found the same under larger ones. */
static void
check_complete(const uint8_t *d, size_t len, size_t limit,
    const struct tls_hello *h)
{
	struct tls_hello h2;
	uint8_t *p;
	size_t i;

	check_hello(h, len, limit);
	for (i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		if (limits[i] < limit)
			continue;
		check(tls_clienthello_parse(d, len, limits[i], &h2) ==
		    PARSE_COMPLETE && hello_equal(h, &h2));
	}
	p = dup_exact(d, h->hello_len);
	check(tls_clienthello_parse(p, h->hello_len, h->hello_len, &h2) ==
	    PARSE_COMPLETE && hello_equal(h, &h2));
	check(tls_clienthello_parse(p, h->hello_len, h->hello_len - 1, &h2) ==
	    PARSE_TOO_BIG);
	free(p);
}

/* The stream as two reads: a verdict on the first must stand. */
static void
check_split(const uint8_t *d, size_t len, size_t cut)
{
	struct tls_hello h1, h2;
	enum sniff_proto s1, s2;
	uint8_t *p = dup_exact(d, cut);
	int r1, r2;

	r1 = sniff_proto(p, cut, &s1);
	r2 = sniff_proto(d, len, &s2);
	if (r1 != PARSE_NEED_MORE)
		check(r1 == r2 && s1 == s2);
	r1 = tls_clienthello_parse(p, cut, 16384, &h1);
	r2 = tls_clienthello_parse(d, len, 16384, &h2);
	if (r1 != PARSE_NEED_MORE)
		check(r1 == r2);
	if (r1 == PARSE_COMPLETE)
		check(hello_equal(&h1, &h2));
	free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tls_hello h;
	enum sniff_proto proto;
	size_t i;
	int r;

	r = sniff_proto(data, size, &proto);
	check(r == PARSE_COMPLETE || r == PARSE_NEED_MORE);
	/* The smallest limit that completes; check_complete tries the rest. */
	for (i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		r = tls_clienthello_parse(data, size, limits[i], &h);
		check(r == PARSE_COMPLETE || r == PARSE_NEED_MORE ||
		    r == PARSE_INVALID || r == PARSE_TOO_BIG);
		if (r == PARSE_COMPLETE) {
			check_complete(data, size, limits[i], &h);
			break;
		}
	}
	if (size == 0)
		return 0;
	check_split(data, size, data[0] % (size + 1));
	/*
	 * Every TLS stream starts with 22, which would pin the cut above;
	 * the last byte moves a second one across the whole stream.
	 */
	check_split(data, size, (size_t)data[size - 1] * size / 255);
	return 0;
}
