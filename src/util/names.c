/* names.c: DNS names and sets of exact and wildcard name patterns. */
#include "autoconf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <idn2.h>
#include <sodium.h>

#include "util/err.h"
#include "util/names.h"

#define LABEL_MAXLEN	63
/* Longest operator-written name we hand to libidn2; far above any valid. */
#define POLICY_NAME_MAX	1024

/* Whether a label is a number to an IPv4 parser: decimal, or 0x hex. */
static int
label_is_number(const char *p, size_t n)
{
	size_t i = 0;
	int hex = 0;

	if (n >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		hex = 1;
		i = 2;
	}
	for (; i < n; i++) {
		unsigned char c = (unsigned char)p[i];

		if (!(c >= '0' && c <= '9') && !(hex &&
		    ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))))
			return 0;
	}
	return 1;
}

static int
name_char_ok(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Checks one label of n characters and copies it lowercased into out. */
static int
copy_label(const char *in, size_t n, char *out, const char **why)
{
	size_t i;

	if (n == 0) {
		*why = "empty label";
		return SL_ERR_INVALID;
	}
	if (n > LABEL_MAXLEN) {
		*why = "label longer than 63 characters";
		return SL_ERR_INVALID;
	}
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];

		if (c == ':') {
			*why = "':' in a name (an IPv6 literal or a port?)";
			return SL_ERR_INVALID;
		}
		if (!name_char_ok(c)) {
			*why = "character not allowed in a name";
			return SL_ERR_INVALID;
		}
		out[i] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
	}
	return 0;
}

/* name_normalize, saying why a name was refused. */
static int
name_check(const char *in, size_t len, char *out, const char **why)
{
	char buf[NAME_BUFSZ];
	const char *dot;
	size_t start = 0, n;
	int r;

	if (len > 0 && in[len - 1] == '.')
		len--;
	if (len == 0) {
		*why = "empty name";
		return SL_ERR_INVALID;
	}
	if (len > NAME_MAXLEN) {
		*why = "name longer than 253 characters";
		return SL_ERR_INVALID;
	}
	for (;;) {
		dot = memchr(in + start, '.', len - start);
		n = dot != NULL ? (size_t)(dot - in) - start : len - start;
		if ((r = copy_label(in + start, n, buf + start, why)) != 0)
			return r;
		if (dot == NULL)
			break;
		buf[start + n] = '.';
		start += n + 1;
	}
	/*
	 * No top-level domain is numeric.  A name whose last label is a
	 * number is an IPv4 literal to inet_aton, getaddrinfo and browsers
	 * ("1.2.3.4", "127.1", "0x7f.1", "2130706433"), so it would connect
	 * somewhere other than a name lookup says.
	 */
	if (label_is_number(in + start, len - start)) {
		*why = "an IP address literal, not a name";
		return SL_ERR_INVALID;
	}
	buf[len] = '\0';
	memcpy(out, buf, len + 1);
	return 0;
}

int
name_normalize(const char *in, size_t len, char *out)
{
	const char *why;

	if (in == NULL)
		return SL_ERR_INVALID;
	return name_check(in, len, out, &why);
}

static int
has_non_ascii(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s >= 0x80)
			return 1;
	return 0;
}

int
name_from_policy(const char *in, char *out, const char **why)
{
	const char *dummy;
	char *ascii = NULL;
	size_t len;
	int rc, r = SL_ERR_INVALID;

	if (why == NULL)
		why = &dummy;
	if (in == NULL) {
		*why = "no name";
		return SL_ERR_INVALID;
	}
	if ((len = strnlen(in, POLICY_NAME_MAX + 1)) > POLICY_NAME_MAX) {
		*why = "name longer than 253 characters";
		return SL_ERR_INVALID;
	}
	if (!has_non_ascii(in))
		return name_check(in, len, out, why);

	/*
	 * Non-transitional UTS #46 processing maps case and width and keeps
	 * "ß" and ZWJ/ZWNJ distinct, as current browsers and resolvers do.
	 */
	rc = idn2_to_ascii_8z(in, &ascii, IDN2_NONTRANSITIONAL | IDN2_NFC_INPUT);
	if (rc == IDN2_MALLOC) {
		*why = "out of memory";
		r = SL_ERR_NOMEM;
		goto out;
	}
	if (rc != IDN2_OK) {
		*why = idn2_strerror(rc);	/* static */
		goto out;
	}
	r = name_check(ascii, strlen(ascii), out, why);
 out:
	idn2_free(ascii);
	return r;
}

/*
 * The set: two open-addressing tables, one for exact names and one for
 * wildcards keyed by the suffix after "*.".  Keys are hashed with SipHash
 * (crypto_shorthash) under a random key per set, so a policy or an SNI
 * cannot be crafted to collide.  Linear probing never looks at more than
 * PROBE_MAX slots: an insert that finds none grows the table instead.
 */
#define PROBE_MAX	64
#define TABLE_MINCAP	16
#define GROW_TRIES	8	/* doublings beyond load; never needed */

struct slot {
	char		*key;		/* owned; NULL when empty */
	uint64_t	 hash;
	uint32_t	 id;
	uint16_t	 len;
};

struct table {
	struct slot	*slots;
	size_t		 cap;		/* 0 or a power of two */
	size_t		 n;
};

struct nameset {
	unsigned char	 hkey[crypto_shorthash_KEYBYTES];
	struct table	 exact;
	struct table	 wild;
};

static uint64_t
name_hash(const struct nameset *s, const char *key, size_t len)
{
	unsigned char h[crypto_shorthash_BYTES];
	uint64_t v;

	crypto_shorthash(h, (const unsigned char *)key, len, s->hkey);
	memcpy(&v, h, sizeof(v));
	return v;
}

static struct slot *
table_find(const struct table *t, const char *key, size_t len, uint64_t h)
{
	size_t i, mask;

	if (t->cap == 0)
		return NULL;
	mask = t->cap - 1;
	for (i = 0; i < PROBE_MAX; i++) {
		struct slot *sl = &t->slots[(h + i) & mask];

		if (sl->key == NULL)
			return NULL;
		if (sl->hash == h && sl->len == len &&
		    memcmp(sl->key, key, len) == 0)
			return sl;
	}
	return NULL;
}

/* Puts sl into an empty slot of slots[cap]; SL_ERR_TOO_BIG if none near. */
static int
slots_place(struct slot *slots, size_t cap, const struct slot *sl)
{
	size_t i, mask = cap - 1;

	for (i = 0; i < PROBE_MAX; i++) {
		struct slot *dst = &slots[(sl->hash + i) & mask];

		if (dst->key == NULL) {
			*dst = *sl;
			return 0;
		}
	}
	return SL_ERR_TOO_BIG;
}

/* Moves every entry into a new array of at least cap slots. */
static int
table_resize(struct table *t, size_t cap)
{
	struct slot *ns;
	size_t i, tries;

	for (tries = 0; tries < GROW_TRIES; tries++, cap *= 2) {
		if (cap > SIZE_MAX / 2 / sizeof(*ns))
			return SL_ERR_NOMEM;
		if ((ns = calloc(cap, sizeof(*ns))) == NULL)
			return SL_ERR_NOMEM;
		for (i = 0; i < t->cap; i++)
			if (t->slots[i].key != NULL &&
			    slots_place(ns, cap, &t->slots[i]) != 0)
				break;
		if (i == t->cap) {
			free(t->slots);
			t->slots = ns;
			t->cap = cap;
			return 0;
		}
		free(ns);	/* a cluster too long: spread wider */
	}
	return SL_ERR_INTERNAL;
}

/* Inserts sl (not present yet), growing to keep the load at most 1/2. */
static int
table_insert(struct table *t, const struct slot *sl)
{
	size_t tries;
	int r;

	if ((t->n + 1) * 2 > t->cap &&
	    (r = table_resize(t, t->cap ? t->cap * 2 : TABLE_MINCAP)) != 0)
		return r;
	for (tries = 0; tries < GROW_TRIES; tries++) {
		if (slots_place(t->slots, t->cap, sl) == 0) {
			t->n++;
			return 0;
		}
		if ((r = table_resize(t, t->cap * 2)) != 0)
			return r;
	}
	return SL_ERR_INTERNAL;
}

static void
table_clear(struct table *t)
{
	size_t i;

	for (i = 0; i < t->cap; i++)
		free(t->slots[i].key);
	free(t->slots);
	t->slots = NULL;
	t->cap = t->n = 0;
}

struct nameset *
nameset_new(void)
{
	struct nameset *s;

	/* Idempotent and thread-safe; needed before randombytes_buf. */
	if (sodium_init() < 0)
		return NULL;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	crypto_shorthash_keygen(s->hkey);
	return s;
}

void
nameset_free(struct nameset *s)
{
	if (s == NULL)
		return;
	table_clear(&s->exact);
	table_clear(&s->wild);
	sodium_memzero(s->hkey, sizeof(s->hkey));
	free(s);
}

int
nameset_add(struct nameset *s, const char *pattern, uint32_t id)
{
	char norm[NAME_BUFSZ];
	struct table *t;
	struct slot sl, *found;
	const char *body;
	size_t len;
	int r;

	if (s == NULL || pattern == NULL)
		return SL_ERR_INVALID;
	body = pattern;
	t = &s->exact;
	if (strncmp(pattern, "*.", 2) == 0) {
		body = pattern + 2;
		t = &s->wild;
	}
	/* Only a name already in normal form: no trailing dot, lowercase. */
	len = strnlen(body, NAME_BUFSZ);
	if ((r = name_normalize(body, len, norm)) != 0)
		return r;
	if (strcmp(norm, body) != 0)
		return SL_ERR_INVALID;

	memset(&sl, 0, sizeof(sl));
	sl.hash = name_hash(s, body, len);
	if ((found = table_find(t, body, len, sl.hash)) != NULL) {
		if (id < found->id)
			found->id = id;
		return 0;
	}
	if ((sl.key = strdup(body)) == NULL)
		return SL_ERR_NOMEM;
	sl.len = (uint16_t)len;
	sl.id = id;
	if ((r = table_insert(t, &sl)) != 0) {
		free(sl.key);
		return r;
	}
	return 0;
}

static int
lookup(const struct nameset *s, const struct table *t, const char *key,
    size_t len, uint32_t *id)
{
	const struct slot *sl;

	if (t->n == 0)
		return 0;
	if ((sl = table_find(t, key, len, name_hash(s, key, len))) == NULL)
		return 0;
	*id = sl->id;
	return 1;
}

int
nameset_match(const struct nameset *s, const char *name, uint32_t *id)
{
	const char *p, *dot, *end;
	size_t len;

	if (s == NULL || name == NULL)
		return 0;
	len = strnlen(name, NAME_BUFSZ);
	if (len == 0 || len > NAME_MAXLEN)
		return 0;
	if (lookup(s, &s->exact, name, len, id))
		return 1;
	/*
	 * "*.c" is stored as "c" and covers every name strictly below c:
	 * try each proper suffix, longest (most specific) first.
	 */
	end = name + len;
	for (p = name; (dot = memchr(p, '.', (size_t)(end - p))) != NULL;
	    p = dot + 1) {
		if (lookup(s, &s->wild, dot + 1, (size_t)(end - dot - 1), id))
			return 1;
	}
	return 0;
}

size_t
nameset_count(const struct nameset *s)
{
	if (s == NULL)
		return 0;
	return s->exact.n + s->wild.n;
}

int
secret_name_ok(const char *s, size_t len)
{
	size_t i;

	if (len < 1 || len > SECRET_NAME_MAX)
		return 0;
	for (i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= '0' && s[i] <= '9') ||
		    s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}
