/* test_sniff.c: first-bytes sniffing and the ClientHello parser. */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "parse/sniff.h"

#define LIMIT	16384

/* A growable byte buffer, the builder's only tool. */
struct bb {
	uint8_t	*p;
	size_t	 len;
	size_t	 cap;
};

static void
bb_put(struct bb *b, const void *d, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	if (n > 0)
		memcpy(b->p + b->len, d, n);
	b->len += n;
}

static void
bb_uint(struct bb *b, size_t v, size_t nbytes)
{
	uint8_t x[4];
	size_t i;

	for (i = 0; i < nbytes; i++)
		x[i] = (uint8_t)(v >> (8 * (nbytes - 1 - i)));
	bb_put(b, x, nbytes);
}

static void
bb_fill(struct bb *b, uint8_t c, size_t n)
{
	while (n-- > 0)
		bb_put(b, &c, 1);
}

/* Reserves an nbytes length field; bb_close fills it in. */
static size_t
bb_open(struct bb *b, size_t nbytes)
{
	size_t at = b->len;

	bb_uint(b, 0, nbytes);
	return at;
}

static void
bb_close(struct bb *b, size_t at, size_t nbytes)
{
	size_t v = b->len - at - nbytes, i;

	for (i = 0; i < nbytes; i++)
		b->p[at + i] = (uint8_t)(v >> (8 * (nbytes - 1 - i)));
}

static void
bb_free(struct bb *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* The parts of a ClientHello; hello_init gives a plain, valid one. */
struct hello {
	uint8_t		hs_type;
	uint16_t	version;
	size_t		sid_len;
	size_t		cs_len;
	size_t		comp_len;
	int		no_exts;	/* no extensions block */
	long		exts_delta;	/* added to its length */
	size_t		junk;		/* bytes after it */
	struct bb	exts;
};

static void
hello_init(struct hello *s)
{
	memset(s, 0, sizeof(*s));
	s->hs_type = 1;
	s->version = 0x0303;
	s->sid_len = 32;
	s->cs_len = 4;
	s->comp_len = 1;
}

static void
ext_add(struct hello *s, uint16_t type, const void *body, size_t len)
{
	bb_uint(&s->exts, type, 2);
	bb_uint(&s->exts, len, 2);
	bb_put(&s->exts, body, len);
}

/* A server_name extension naming one host. */
static void
ext_sni(struct hello *s, const char *name, size_t len)
{
	struct bb b = { 0 };
	size_t list;

	list = bb_open(&b, 2);
	bb_uint(&b, 0, 1);
	bb_uint(&b, len, 2);
	bb_put(&b, name, len);
	bb_close(&b, list, 2);
	ext_add(s, 0, b.p, b.len);
	bb_free(&b);
}

/* An ALPN extension from a NULL-terminated list. */
static void
ext_alpn(struct hello *s, const char *const *names)
{
	struct bb b = { 0 };
	size_t list;

	list = bb_open(&b, 2);
	for (; *names != NULL; names++) {
		bb_uint(&b, strlen(*names), 1);
		bb_put(&b, *names, strlen(*names));
	}
	bb_close(&b, list, 2);
	ext_add(s, 16, b.p, b.len);
	bb_free(&b);
}

/* The handshake message the parts describe. */
static void
hello_message(const struct hello *s, struct bb *hs)
{
	size_t msg, i;

	bb_uint(hs, s->hs_type, 1);
	msg = bb_open(hs, 3);
	bb_uint(hs, s->version, 2);
	bb_fill(hs, 0xab, 32);
	bb_uint(hs, s->sid_len, 1);
	bb_fill(hs, 0x5e, s->sid_len);
	bb_uint(hs, s->cs_len, 2);
	for (i = 0; i < s->cs_len; i++)
		bb_uint(hs, i % 2 ? 0x01 : 0x13, 1);
	bb_uint(hs, s->comp_len, 1);
	bb_fill(hs, 0, s->comp_len);
	if (!s->no_exts) {
		bb_uint(hs, (size_t)((long)s->exts.len + s->exts_delta), 2);
		bb_put(hs, s->exts.p, s->exts.len);
	}
	bb_fill(hs, 0xee, s->junk);
	bb_close(hs, msg, 3);
}

/* Wraps bytes into records of at most per bytes of content type ct. */
static void
frame(const uint8_t *d, size_t n, size_t per, uint8_t ct, struct bb *out)
{
	size_t chunk;

	while (n > 0) {
		chunk = n < per ? n : per;
		bb_uint(out, ct, 1);
		bb_uint(out, 0x0301, 2);
		bb_uint(out, chunk, 2);
		bb_put(out, d, chunk);
		d += chunk;
		n -= chunk;
	}
}

/* The hello as a stream of full-size records. */
static void
hello_stream(const struct hello *s, struct bb *out)
{
	struct bb hs = { 0 };

	hello_message(s, &hs);
	frame(hs.p, hs.len, 16384, 22, out);
	bb_free(&hs);
}

/* Parses a copy of exactly len bytes, so that ASan sees any over-read. */
static int
parse_exact(const uint8_t *d, size_t len, size_t limit, struct tls_hello *h)
{
	uint8_t *copy = malloc(len ? len : 1);
	int r;

	assert_non_null(copy);
	if (len > 0)
		memcpy(copy, d, len);
	r = tls_clienthello_parse(copy, len, limit, h);
	free(copy);
	return r;
}

/* Builds, parses, frees the parts; *out is poisoned first. */
static int
hello_parse(struct hello *s, struct tls_hello *h)
{
	struct bb st = { 0 };
	int r;

	hello_stream(s, &st);
	memset(h, 0xa5, sizeof(*h));
	r = parse_exact(st.p, st.len, 1 << 20, h);
	if (r == PARSE_COMPLETE)
		assert_int_equal(h->hello_len, st.len);
	bb_free(&st);
	bb_free(&s->exts);
	return r;
}

/* Every prefix of a stream that parses must ask for more. */
static void
assert_prefixes_need_more(const uint8_t *d, size_t len)
{
	struct tls_hello h, poison;
	size_t k;

	memset(&poison, 0xa5, sizeof(poison));
	for (k = 0; k < len; k++) {
		h = poison;
		if (parse_exact(d, k, LIMIT, &h) != PARSE_NEED_MORE)
			fail_msg("prefix of %zu of %zu bytes: not NEED_MORE", k,
			    len);
		assert_memory_equal(&h, &poison, sizeof(h));
	}
}

/* ---- captured fixtures ---- */

struct fixture {
	const char	*file;
	const char	*sni;		/* NULL: no SNI */
	const char	*alpn[3];	/* NULL-terminated */
	int		 tls13;
};

/* What capture-clienthello.sh asked each client to send. */
static const struct fixture fixtures[] = {
	{ "clienthello-openssl-tls13.bin", NULL, { NULL }, 1 },
	{ "clienthello-openssl-tls13-sni.bin", "www.example.com", { NULL }, 1 },
	{ "clienthello-openssl-tls12.bin", NULL, { NULL }, 0 },
	{ "clienthello-openssl-tls12-sni.bin", "tls12.example.org", { NULL },
	    0 },
	{ "clienthello-openssl-alpn.bin", "alpn.example.net",
	    { "h2", "http/1.1", NULL }, 1 },
	{ "clienthello-curl-alpn.bin", "curl.example.com",
	    { "h2", "http/1.1", NULL }, 1 },
	{ "clienthello-curl-noalpn.bin", "curl.example.com", { NULL }, 1 },
};
#define NFIXTURES (sizeof(fixtures) / sizeof(fixtures[0]))

static uint8_t *
load_fixture(const char *name, size_t *len)
{
	char path[1024];
	uint8_t *d;
	FILE *f;
	long n;

	snprintf(path, sizeof(path), "%s/fixtures/%s", TEST_SRCDIR, name);
	if ((f = fopen(path, "rb")) == NULL)
		fail_msg("cannot open %s", path);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	d = malloc((size_t)n);
	assert_non_null(d);
	assert_int_equal(fread(d, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return d;
}

static void
assert_fixture_hello(const struct fixture *fx, const struct tls_hello *h)
{
	size_t n;

	if (fx->sni != NULL) {
		assert_int_equal(h->has_sni, 1);
		assert_string_equal(h->sni, fx->sni);
	} else {
		assert_int_equal(h->has_sni, 0);
		assert_string_equal(h->sni, "");
	}
	for (n = 0; fx->alpn[n] != NULL; n++)
		;
	assert_int_equal(h->nalpn, n);
	for (n = 0; fx->alpn[n] != NULL; n++)
		assert_string_equal(h->alpn[n], fx->alpn[n]);
	assert_int_equal(h->offers_tls13, fx->tls13);
	assert_int_equal(h->has_ech, 0);
	assert_int_equal(h->legacy_version, 0x0303);
}

/* The handshake bytes the fixture's records carry. */
static void
fixture_handshake(const uint8_t *d, size_t len, struct bb *hs)
{
	size_t rlen;

	while (len >= 5) {
		assert_int_equal(d[0], 22);
		rlen = (size_t)d[3] << 8 | d[4];
		assert_true(rlen <= len - 5);
		bb_put(hs, d + 5, rlen);
		d += 5 + rlen;
		len -= 5 + rlen;
	}
	assert_int_equal(len, 0);
}

static void
test_fixtures_complete(void **state)
{
	struct tls_hello h;
	uint8_t *d;
	size_t i, len;

	for (i = 0; i < NFIXTURES; i++) {
		d = load_fixture(fixtures[i].file, &len);
		memset(&h, 0xa5, sizeof(h));
		assert_int_equal(parse_exact(d, len, LIMIT, &h),
		    PARSE_COMPLETE);
		assert_int_equal(h.hello_len, len);
		assert_fixture_hello(&fixtures[i], &h);
		free(d);
	}
}

static void
test_fixtures_truncated(void **state)
{
	uint8_t *d;
	size_t i, len;

	for (i = 0; i < NFIXTURES; i++) {
		d = load_fixture(fixtures[i].file, &len);
		assert_prefixes_need_more(d, len);
		free(d);
	}
}

static void
test_fixtures_reframed(void **state)
{
	static const size_t sizes[] = { 1, 2, 3, 7, 100, 255 };
	struct bb hs = { 0 }, st = { 0 };
	struct tls_hello h;
	uint8_t *d;
	size_t i, j, len;

	for (i = 0; i < NFIXTURES; i++) {
		d = load_fixture(fixtures[i].file, &len);
		fixture_handshake(d, len, &hs);
		for (j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++) {
			st.len = 0;
			frame(hs.p, hs.len, sizes[j], 22, &st);
			memset(&h, 0xa5, sizeof(h));
			assert_int_equal(parse_exact(st.p, st.len, 1 << 20, &h),
			    PARSE_COMPLETE);
			assert_int_equal(h.hello_len, st.len);
			assert_fixture_hello(&fixtures[i], &h);
			assert_prefixes_need_more(st.p, st.len);
		}
		hs.len = 0;
		free(d);
	}
	bb_free(&hs);
	bb_free(&st);
}

/* What follows the hello, in its record or after it, is not judged. */
static void
test_fixtures_trailing(void **state)
{
	static const uint8_t appdata[] = { 23, 3, 3, 0, 2, 'h', 'i' };
	struct bb hs = { 0 }, st = { 0 };
	struct tls_hello h;
	uint8_t *d;
	size_t len;

	d = load_fixture(fixtures[4].file, &len);
	bb_put(&st, d, len);
	bb_put(&st, appdata, sizeof(appdata));
	assert_int_equal(parse_exact(st.p, st.len, LIMIT, &h), PARSE_COMPLETE);
	assert_int_equal(h.hello_len, len);
	assert_fixture_hello(&fixtures[4], &h);

	/* Bytes after the hello in its own record: that must be whole. */
	fixture_handshake(d, len, &hs);
	bb_put(&hs, "\x02\x00\x00\x00", 4);
	st.len = 0;
	frame(hs.p, hs.len, 100, 22, &st);
	assert_int_equal(parse_exact(st.p, st.len, LIMIT, &h), PARSE_COMPLETE);
	assert_int_equal(h.hello_len, st.len);
	assert_fixture_hello(&fixtures[4], &h);
	assert_int_equal(parse_exact(st.p, st.len - 1, LIMIT, &h),
	    PARSE_NEED_MORE);
	bb_free(&hs);
	bb_free(&st);
	free(d);
}

static void
test_fixtures_limit(void **state)
{
	struct bb hs = { 0 }, st = { 0 };
	struct tls_hello h;
	uint8_t *d;
	size_t len, k;

	d = load_fixture(fixtures[5].file, &len);
	assert_int_equal(parse_exact(d, len, len, &h), PARSE_COMPLETE);
	assert_int_equal(parse_exact(d, len, len - 1, &h), PARSE_TOO_BIG);
	/* The record header alone proves it. */
	assert_int_equal(parse_exact(d, 5, len - 1, &h), PARSE_TOO_BIG);
	assert_int_equal(parse_exact(d, 5, len, &h), PARSE_NEED_MORE);

	/* Small records: the handshake length proves it before they arrive. */
	fixture_handshake(d, len, &hs);
	frame(hs.p, hs.len, 7, 22, &st);
	assert_int_equal(parse_exact(st.p, 9, hs.len, &h), PARSE_TOO_BIG);
	/*
	 * At best the rest of the hello comes in one more record: the
	 * first record, a header, and the rest.  One byte short of that is
	 * proven too big, that much is not.
	 */
	k = 5 + 7 + 5 + (hs.len - 7);
	assert_int_equal(parse_exact(st.p, 9, k - 1, &h), PARSE_TOO_BIG);
	assert_int_equal(parse_exact(st.p, 9, k, &h), PARSE_NEED_MORE);
	assert_int_equal(parse_exact(st.p, st.len, st.len, &h), PARSE_COMPLETE);
	assert_int_equal(parse_exact(st.p, st.len, st.len - 1, &h),
	    PARSE_TOO_BIG);
	/* A limit just above what the records need: never TOO_BIG early. */
	for (k = 0; k < st.len; k++)
		assert_int_equal(parse_exact(st.p, k, st.len, &h),
		    PARSE_NEED_MORE);
	bb_free(&hs);
	bb_free(&st);
	free(d);
}

/* ---- hand-built hellos ---- */

static void
test_built_sni(void **state)
{
	struct hello s;
	struct tls_hello h;

	hello_init(&s);
	ext_sni(&s, "example.com", 11);
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);
	assert_int_equal(h.has_sni, 1);
	assert_string_equal(h.sni, "example.com");
	assert_int_equal(h.nalpn, 0);
	assert_int_equal(h.offers_tls13, 0);
	assert_int_equal(h.has_ech, 0);

	hello_init(&s);
	ext_sni(&s, "WWW.Example.COM", 15);
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);
	assert_string_equal(h.sni, "www.example.com");

	hello_init(&s);
	ext_sni(&s, "example.com.", 12);
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);
	assert_string_equal(h.sni, "example.com");
}

static void
test_built_no_sni(void **state)
{
	struct hello s;
	struct tls_hello h;

	hello_init(&s);
	ext_add(&s, 23, NULL, 0);
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);
	assert_int_equal(h.has_sni, 0);
	assert_string_equal(h.sni, "");

	/* An old hello may end without an extensions block at all. */
	hello_init(&s);
	s.no_exts = 1;
	s.sid_len = 0;
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);
	assert_int_equal(h.has_sni, 0);

	/* An empty extensions block is well formed too. */
	hello_init(&s);
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);
}

/* Builds a name of n characters in labels of at most 63. */
static void
long_name(char *buf, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		buf[i] = (i % 64 == 63) ? '.' : 'a' + (char)(i % 26);
	buf[n] = '\0';
}

static void
test_built_sni_length(void **state)
{
	struct hello s;
	struct tls_hello h;
	char name[300];

	long_name(name, 253);
	hello_init(&s);
	ext_sni(&s, name, 253);
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);
	assert_string_equal(h.sni, name);

	/* 253 characters and the root's dot. */
	name[253] = '.';
	hello_init(&s);
	ext_sni(&s, name, 254);
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);
	assert_int_equal(strlen(h.sni), 253);

	long_name(name, 254);
	hello_init(&s);
	ext_sni(&s, name, 254);
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);

	long_name(name, 299);
	hello_init(&s);
	ext_sni(&s, name, 299);
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);
}

static void
test_built_sni_bad_names(void **state)
{
	static const char *const bad[] = {
		"exa mple.com", "bad!.example", "a..b", ".example.com",
		"example.com..", "caf\xc3\xa9.example", "a/b.example",
		"192.0.2.1", "127.1", "0x7f000001", "2130706433", "::1",
		"[::1]", "10.0.0.1.", "Example.0X7F",
	};
	struct hello s;
	struct tls_hello h;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		hello_init(&s);
		ext_sni(&s, bad[i], strlen(bad[i]));
		if (hello_parse(&s, &h) != PARSE_INVALID)
			fail_msg("SNI \"%s\" not refused", bad[i]);
	}
	/* A NUL inside the name must not cut it short. */
	hello_init(&s);
	ext_sni(&s, "evil.example\0.com", 17);
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);

	/* Digits are fine where they cannot make an address. */
	hello_init(&s);
	ext_sni(&s, "1.2.3.example", 13);
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);
	assert_string_equal(h.sni, "1.2.3.example");
}

/* server_name bodies that break the one-host_name rule. */
static void
test_built_sni_lists(void **state)
{
	static const struct {
		const char *body;
		size_t len;
	} bad[] = {
		/* an empty extension, an empty list, a zero-length name */
		{ "", 0 },
		{ "\x00\x00", 2 },
		{ "\x00\x03\x00\x00\x00", 5 },
		/* name_type 1, not host_name */
		{ "\x00\x04\x01\x00\x01" "a", 6 },
		/* two host names; a host name and another type */
		{ "\x00\x08\x00\x00\x01" "a" "\x00\x00\x01" "b", 10 },
		{ "\x00\x08\x00\x00\x01" "a" "\x01\x00\x01" "b", 10 },
		/* the list overruns the extension; the name the list */
		{ "\x00\x05\x00\x00\x01" "a", 6 },
		{ "\x00\x04\x00\x00\x02" "a", 6 },
		/* bytes after the list; after the name inside the list */
		{ "\x00\x04\x00\x00\x01" "a" "x", 7 },
		{ "\x00\x05\x00\x00\x01" "ab", 7 },
		/* half a list length */
		{ "\x00", 1 },
	};
	struct hello s;
	struct tls_hello h;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		hello_init(&s);
		ext_add(&s, 0, bad[i].body, bad[i].len);
		if (hello_parse(&s, &h) != PARSE_INVALID)
			fail_msg("server_name body %zu not refused", i);
	}
}

static void
test_built_duplicate_extension(void **state)
{
	struct hello s;
	struct tls_hello h;

	hello_init(&s);
	ext_add(&s, 23, NULL, 0);
	ext_add(&s, 13, "\x00\x02\x04\x03", 4);
	ext_add(&s, 23, NULL, 0);
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);

	hello_init(&s);
	ext_sni(&s, "a.example", 9);
	ext_sni(&s, "b.example", 9);
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);

	/* The highest type number still works as a bitmap index. */
	hello_init(&s);
	ext_add(&s, 0xffff, NULL, 0);
	ext_add(&s, 0xffff, NULL, 0);
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);
	hello_init(&s);
	ext_add(&s, 0xffff, NULL, 0);
	ext_add(&s, 0xfffe, NULL, 0);
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);
}

static void
test_built_extension_lengths(void **state)
{
	struct hello s;
	struct tls_hello h;

	/* One extension claims more than the block holds. */
	hello_init(&s);
	ext_add(&s, 23, NULL, 0);
	bb_put(&s.exts, "\x00\x15\x00\x09" "abc", 7);
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);

	/* An extension header cut short by the block's end. */
	hello_init(&s);
	ext_add(&s, 23, NULL, 0);
	bb_put(&s.exts, "\x00\x15\x00", 3);
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);

	/* The block's length disagrees with the message, both ways. */
	hello_init(&s);
	ext_sni(&s, "example.com", 11);
	s.exts_delta = -1;
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);
	hello_init(&s);
	ext_sni(&s, "example.com", 11);
	s.exts_delta = 1;
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);

	/* Junk after the extensions inside the message. */
	hello_init(&s);
	ext_add(&s, 23, NULL, 0);
	s.junk = 2;
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);

	/* A lone byte where the extensions length should be. */
	hello_init(&s);
	s.no_exts = 1;
	s.junk = 1;
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);
}

/*
 * A body parser that stops early must not let the rest of its extension
 * pass as more extensions: here a whole empty extension (type 23) hides
 * after each list.
 */
static void
test_built_extension_leftover(void **state)
{
	static const struct {
		uint16_t type;
		const char *body;
		size_t len;
	} cases[] = {
		{ 0, "\x00\x04\x00\x00\x01" "a" "\x00\x17\x00\x00", 10 },
		{ 0, "\x00\x08\x00\x00\x01" "a" "\x00\x17\x00\x00", 10 },
		{ 16, "\x00\x03\x02h2" "\x00\x17\x00\x00", 9 },
		{ 43, "\x02\x03\x04" "\x00\x17\x00\x00", 7 },
	};
	struct hello s;
	struct tls_hello h;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		hello_init(&s);
		ext_add(&s, cases[i].type, cases[i].body, cases[i].len);
		if (hello_parse(&s, &h) != PARSE_INVALID)
			fail_msg("leftover case %zu not refused", i);
	}
}

static void
test_built_body_fields(void **state)
{
	struct hello s;
	struct tls_hello h;

	hello_init(&s);
	s.sid_len = 33;
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);
	hello_init(&s);
	s.sid_len = 0;
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);

	hello_init(&s);
	s.cs_len = 5;
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);
	hello_init(&s);
	s.cs_len = 0;
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);
	hello_init(&s);
	s.cs_len = 2;
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);

	hello_init(&s);
	s.comp_len = 0;
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);

	hello_init(&s);
	s.hs_type = 2;
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);

	hello_init(&s);
	s.version = 0x0200;
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);
	hello_init(&s);
	s.version = 0x0301;
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);
	assert_int_equal(h.legacy_version, 0x0301);
}

/* A handshake message whose length ends inside a field. */
static void
test_built_message_too_short(void **state)
{
	static const uint8_t empty[] = { 1, 0, 0, 0 };
	struct hello s;
	struct bb hs = { 0 }, st = { 0 };
	struct tls_hello h;

	hello_init(&s);
	hello_message(&s, &hs);
	hs.p[3] = 20;	/* ends inside the random */
	frame(hs.p, hs.len, 16384, 22, &st);
	assert_int_equal(parse_exact(st.p, st.len, LIMIT, &h), PARSE_INVALID);
	bb_free(&hs);

	/* An empty ClientHello message. */
	st.len = 0;
	frame(empty, sizeof(empty), 16384, 22, &st);
	assert_int_equal(parse_exact(st.p, st.len, LIMIT, &h), PARSE_INVALID);
	bb_free(&st);
}

static void
test_built_records(void **state)
{
	struct hello s;
	struct bb hs = { 0 }, st = { 0 };
	struct tls_hello h;

	hello_init(&s);
	ext_sni(&s, "example.com", 11);
	hello_message(&s, &hs);
	bb_free(&s.exts);

	/* Not a handshake record at all. */
	frame(hs.p, hs.len, 16384, 23, &st);
	assert_int_equal(parse_exact(st.p, st.len, LIMIT, &h), PARSE_INVALID);
	assert_int_equal(parse_exact(st.p, 1, LIMIT, &h), PARSE_INVALID);

	/* A non-handshake record before the hello completes. */
	st.len = 0;
	frame(hs.p, 10, 16384, 22, &st);
	frame(hs.p + 10, hs.len - 10, 16384, 23, &st);
	assert_int_equal(parse_exact(st.p, st.len, LIMIT, &h), PARSE_INVALID);

	/* A zero-length record before the hello completes. */
	st.len = 0;
	frame(hs.p, 10, 16384, 22, &st);
	bb_put(&st, "\x16\x03\x01\x00\x00", 5);
	frame(hs.p + 10, hs.len - 10, 16384, 22, &st);
	assert_int_equal(parse_exact(st.p, st.len, LIMIT, &h), PARSE_INVALID);

	/* Record versions: 0x0300 to 0x0304 only. */
	st.len = 0;
	frame(hs.p, hs.len, 16384, 22, &st);
	st.p[2] = 0x05;
	assert_int_equal(parse_exact(st.p, st.len, LIMIT, &h), PARSE_INVALID);
	st.p[2] = 0x00;
	assert_int_equal(parse_exact(st.p, st.len, LIMIT, &h), PARSE_COMPLETE);
	st.p[1] = 0x02;
	assert_int_equal(parse_exact(st.p, st.len, LIMIT, &h), PARSE_INVALID);

	/* A record longer than TLS allows, whatever the limit. */
	st.len = 0;
	bb_put(&st, "\x16\x03\x01\x40\x01", 5);
	assert_int_equal(parse_exact(st.p, st.len, 1 << 20, &h), PARSE_INVALID);
	bb_free(&hs);
	bb_free(&st);
}

static void
test_built_too_big(void **state)
{
	struct hello s;
	struct bb st = { 0 };
	struct tls_hello h;
	uint8_t pad[20000];

	memset(pad, 0, sizeof(pad));
	hello_init(&s);
	ext_sni(&s, "example.com", 11);
	ext_add(&s, 21, pad, sizeof(pad));
	hello_stream(&s, &st);
	bb_free(&s.exts);

	assert_int_equal(parse_exact(st.p, st.len, 1 << 20, &h),
	    PARSE_COMPLETE);
	assert_string_equal(h.sni, "example.com");
	/* The first, full-size record alone is over the limit. */
	assert_int_equal(parse_exact(st.p, 5, LIMIT, &h), PARSE_TOO_BIG);
	/*
	 * It fits this one, but nine bytes hold the handshake length, which
	 * already proves that the second record cannot.
	 */
	assert_int_equal(parse_exact(st.p, st.len, 5 + LIMIT + 1000, &h),
	    PARSE_TOO_BIG);
	assert_int_equal(parse_exact(st.p, 9, 5 + LIMIT + 1000, &h),
	    PARSE_TOO_BIG);
	assert_int_equal(parse_exact(st.p, 8, 5 + LIMIT + 1000, &h),
	    PARSE_NEED_MORE);
	assert_int_equal(parse_exact(st.p, 0, 0, &h), PARSE_NEED_MORE);
	assert_int_equal(parse_exact(st.p, 5, 4, &h), PARSE_TOO_BIG);
	bb_free(&st);
}

static void
test_built_ech(void **state)
{
	struct hello s;
	struct tls_hello h;

	hello_init(&s);
	ext_sni(&s, "public.example", 14);
	ext_add(&s, 0xfe0d, "\x00\x00\x01\x00\x01\x00\x00\x00\x00\x00", 10);
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);
	assert_int_equal(h.has_ech, 1);
	assert_string_equal(h.sni, "public.example");

	/* Only the final codepoint counts; draft ones are other extensions. */
	hello_init(&s);
	ext_add(&s, 0xfe0a, "x", 1);
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);
	assert_int_equal(h.has_ech, 0);
}

static void
test_built_supported_versions(void **state)
{
	struct hello s;
	struct tls_hello h;

	hello_init(&s);
	ext_add(&s, 43, "\x04\x7a\x7a\x03\x04", 5);
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);
	assert_int_equal(h.offers_tls13, 1);

	hello_init(&s);
	ext_add(&s, 43, "\x04\x03\x03\x03\x02", 5);
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);
	assert_int_equal(h.offers_tls13, 0);

	hello_init(&s);
	ext_add(&s, 43, "\x03\x03\x04\x03", 4);	/* odd list */
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);
	hello_init(&s);
	ext_add(&s, 43, "\x04\x03\x04", 3);	/* list overruns */
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);
	hello_init(&s);
	ext_add(&s, 43, "\x02\x03\x04\x00", 4);	/* bytes after list */
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);
	hello_init(&s);
	ext_add(&s, 43, "\x00", 1);		/* empty list */
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);
}

static void
test_built_alpn(void **state)
{
	static const char *const many[] = {
		"p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9", NULL,
	};
	static const char *const mixed[] = {
		"h2", "bad\x01", "sp ace",
		"a-protocol-name-longer-than-31-characters", "http/1.1", NULL,
	};
	struct hello s;
	struct tls_hello h;

	hello_init(&s);
	ext_alpn(&s, many);
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);
	assert_int_equal(h.nalpn, TLS_ALPN_MAX);
	assert_string_equal(h.alpn[0], "p1");
	assert_string_equal(h.alpn[7], "p8");

	hello_init(&s);
	ext_alpn(&s, mixed);
	assert_int_equal(hello_parse(&s, &h), PARSE_COMPLETE);
	assert_int_equal(h.nalpn, 3);
	assert_string_equal(h.alpn[0], "h2");
	assert_string_equal(h.alpn[1], "a-protocol-name-longer-than-31-");
	assert_int_equal(strlen(h.alpn[1]), 31);
	assert_string_equal(h.alpn[2], "http/1.1");

	hello_init(&s);
	ext_add(&s, 16, "\x00\x04\x02h2\x00", 6);	/* empty protocol */
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);
	hello_init(&s);
	ext_add(&s, 16, "\x00\x00", 2);			/* empty list */
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);
	hello_init(&s);
	ext_add(&s, 16, "\x00\x04\x03h2", 5);		/* name overruns */
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);
	hello_init(&s);
	ext_add(&s, 16, "\x00\x03\x02h2x", 6);	/* bytes after list */
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);
	hello_init(&s);
	ext_add(&s, 16, "", 0);			/* no list length */
	assert_int_equal(hello_parse(&s, &h), PARSE_INVALID);
}

/* A built hello split over records of every size parses the same. */
static void
test_built_reframed(void **state)
{
	static const char *const protos[] = { "h2", NULL };
	struct hello s;
	struct bb hs = { 0 }, st = { 0 };
	struct tls_hello h;
	size_t per;

	hello_init(&s);
	ext_sni(&s, "split.example", 13);
	ext_alpn(&s, protos);
	ext_add(&s, 43, "\x02\x03\x04", 3);
	hello_message(&s, &hs);
	bb_free(&s.exts);
	for (per = 1; per <= hs.len; per++) {
		st.len = 0;
		frame(hs.p, hs.len, per, 22, &st);
		assert_int_equal(parse_exact(st.p, st.len, LIMIT, &h),
		    PARSE_COMPLETE);
		assert_string_equal(h.sni, "split.example");
		assert_int_equal(h.nalpn, 1);
		assert_int_equal(h.offers_tls13, 1);
		assert_int_equal(h.hello_len, st.len);
	}
	bb_free(&hs);
	bb_free(&st);
}

/* *out must be left alone unless the parse completes. */
static void
test_out_untouched(void **state)
{
	struct hello s;
	struct bb st = { 0 };
	struct tls_hello h, poison;

	memset(&poison, 0x5a, sizeof(poison));
	hello_init(&s);
	ext_sni(&s, "example.com", 11);
	ext_sni(&s, "example.org", 11);
	hello_stream(&s, &st);
	bb_free(&s.exts);
	h = poison;
	assert_int_equal(parse_exact(st.p, st.len, LIMIT, &h), PARSE_INVALID);
	assert_memory_equal(&h, &poison, sizeof(h));
	h = poison;
	assert_int_equal(parse_exact(st.p, st.len, 10, &h), PARSE_TOO_BIG);
	assert_memory_equal(&h, &poison, sizeof(h));
	bb_free(&st);
}

/* ---- sniff_proto ---- */

static int
sniff_exact(const char *d, size_t len, enum sniff_proto *p)
{
	uint8_t *copy = malloc(len ? len : 1);
	int r;

	assert_non_null(copy);
	if (len > 0)
		memcpy(copy, d, len);
	r = sniff_proto(copy, len, p);
	free(copy);
	return r;
}

static void
assert_sniff(const char *d, size_t len, int want_r, enum sniff_proto want)
{
	enum sniff_proto p = (enum sniff_proto)-1;
	int r = sniff_exact(d, len, &p);

	if (r != want_r)
		fail_msg("sniff of %zu bytes \"%.*s\": %d, not %d", len,
		    (int)len, d, r, want_r);
	if (r == PARSE_COMPLETE)
		assert_int_equal(p, want);
	else
		assert_int_equal(p, (enum sniff_proto)-1);
}

static void
test_sniff_tls(void **state)
{
	uint8_t *d;
	size_t i, len;

	assert_sniff("\x16\x03\x01", 3, PARSE_COMPLETE, SNIFF_TLS);
	assert_sniff("\x16\x03\x00\x00", 4, PARSE_COMPLETE, SNIFF_TLS);
	assert_sniff("\x16\x03\x04\x02\x00", 5, PARSE_COMPLETE, SNIFF_TLS);
	assert_sniff("\x16\x03\x05", 3, PARSE_COMPLETE, SNIFF_OPAQUE);
	assert_sniff("\x16\x02\x01", 3, PARSE_COMPLETE, SNIFF_OPAQUE);
	assert_sniff("\x16\x03", 2, PARSE_NEED_MORE, 0);
	assert_sniff("\x16", 1, PARSE_NEED_MORE, 0);
	assert_sniff("\x16\x04", 2, PARSE_COMPLETE, SNIFF_OPAQUE);
	assert_sniff("\x17\x03\x03", 3, PARSE_COMPLETE, SNIFF_OPAQUE);
	for (i = 0; i < NFIXTURES; i++) {
		d = load_fixture(fixtures[i].file, &len);
		assert_sniff((const char *)d, len, PARSE_COMPLETE, SNIFF_TLS);
		free(d);
	}
}

static void
test_sniff_http(void **state)
{
	static const char *const methods[] = {
		"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS",
		"TRACE", "PATCH",
	};
	char req[64];
	size_t i, k, n;

	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		n = (size_t)snprintf(req, sizeof(req), "%s / HTTP/1.1\r\n",
		    methods[i]);
		assert_sniff(req, n, PARSE_COMPLETE, SNIFF_HTTP);
		assert_sniff(req, strlen(methods[i]) + 1, PARSE_COMPLETE,
		    SNIFF_HTTP);
		for (k = 0; k <= strlen(methods[i]); k++)
			assert_sniff(req, k, PARSE_NEED_MORE, 0);
		/* The method must be followed by a space, nothing else. */
		req[strlen(methods[i])] = '\t';
		assert_sniff(req, n, PARSE_COMPLETE, SNIFF_OPAQUE);
	}
	assert_sniff("GE", 2, PARSE_NEED_MORE, 0);
	assert_sniff("GET", 3, PARSE_NEED_MORE, 0);
	assert_sniff("P", 1, PARSE_NEED_MORE, 0);
	assert_sniff("PU", 2, PARSE_NEED_MORE, 0);
}

static void
test_sniff_opaque(void **state)
{
	assert_sniff("", 0, PARSE_NEED_MORE, 0);
	assert_sniff("get ", 4, PARSE_COMPLETE, SNIFF_OPAQUE);
	assert_sniff("g", 1, PARSE_COMPLETE, SNIFF_OPAQUE);
	assert_sniff("SSH-2.0-OpenSSH_9.2\r\n", 21, PARSE_COMPLETE,
	    SNIFF_OPAQUE);
	assert_sniff("SSH-2.0", 7, PARSE_COMPLETE, SNIFF_OPAQUE);
	assert_sniff("GETX / HTTP/1.1", 15, PARSE_COMPLETE, SNIFF_OPAQUE);
	assert_sniff("GEX", 3, PARSE_COMPLETE, SNIFF_OPAQUE);
	assert_sniff("PRI * HTTP/2.0", 14, PARSE_COMPLETE, SNIFF_OPAQUE);
	assert_sniff(" GET /", 6, PARSE_COMPLETE, SNIFF_OPAQUE);
	assert_sniff("\0", 1, PARSE_COMPLETE, SNIFF_OPAQUE);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixtures_complete),
		cmocka_unit_test(test_fixtures_truncated),
		cmocka_unit_test(test_fixtures_reframed),
		cmocka_unit_test(test_fixtures_trailing),
		cmocka_unit_test(test_fixtures_limit),
		cmocka_unit_test(test_built_sni),
		cmocka_unit_test(test_built_no_sni),
		cmocka_unit_test(test_built_sni_length),
		cmocka_unit_test(test_built_sni_bad_names),
		cmocka_unit_test(test_built_sni_lists),
		cmocka_unit_test(test_built_duplicate_extension),
		cmocka_unit_test(test_built_extension_lengths),
		cmocka_unit_test(test_built_extension_leftover),
		cmocka_unit_test(test_built_body_fields),
		cmocka_unit_test(test_built_message_too_short),
		cmocka_unit_test(test_built_records),
		cmocka_unit_test(test_built_too_big),
		cmocka_unit_test(test_built_ech),
		cmocka_unit_test(test_built_supported_versions),
		cmocka_unit_test(test_built_alpn),
		cmocka_unit_test(test_built_reframed),
		cmocka_unit_test(test_out_untouched),
		cmocka_unit_test(test_sniff_tls),
		cmocka_unit_test(test_sniff_http),
		cmocka_unit_test(test_sniff_opaque),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
