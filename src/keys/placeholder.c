/* placeholder.c: stand-ins for secrets a sandbox may hold (placeholder.h). */
#include "autoconf.h"

#include <string.h>

#include <sodium.h>

#include "util/ascii.h"
#include "parse/httphead.h"
#include "keys/placeholder.h"
#include "keys/secrets.h"

void
placeholder_of(const struct secret_store *st, const char *sandbox,
    const char *secret, char out[PH_LEN + 1])
{
	crypto_generichash_state h;
	uint8_t d[16];
	const char *sb = sandbox != NULL ? sandbox : "";

	/* Both strings with their NUL: ("a", "bc") is not ("ab", "c"). */
	crypto_generichash_init(&h, st->phkey, crypto_generichash_KEYBYTES,
	    sizeof(d));
	crypto_generichash_update(&h, (const uint8_t *)sb, strlen(sb) + 1);
	crypto_generichash_update(&h, (const uint8_t *)secret,
	    strlen(secret) + 1);
	crypto_generichash_final(&h, d, sizeof(d));
	memcpy(out, PH_PREFIX, PH_PREFIX_LEN);
	sodium_bin2hex(out + PH_PREFIX_LEN, 33, d, sizeof(d));
}

const struct secret *
placeholder_owner(const struct secret_store *st, const struct secret_set *set,
    const char *sandbox, const char *p)
{
	char ph[PH_LEN + 1];
	size_t i;

	for (i = 0; set != NULL && i < set->n; i++) {
		placeholder_of(st, sandbox, set->v[i]->name, ph);
		if (sodium_memcmp(ph, p, PH_LEN) == 0)
			return set->v[i];
	}
	return NULL;
}

const char *
placeholder_find(const struct secret_store *st, const struct secret_set *set,
    const char *sandbox, const char *s, size_t len,
    const struct secret **which)
{
	const char *p = s, *end = s + len;

	while ((size_t)(end - p) >= PH_LEN &&
	    (p = memmem(p, (size_t)(end - p), PH_PREFIX, PH_PREFIX_LEN)) !=
	    NULL && (size_t)(end - p) >= PH_LEN) {
		if ((*which = placeholder_owner(st, set, sandbox, p)) != NULL)
			return p;
		p += PH_PREFIX_LEN;
	}
	return NULL;
}

/* The value of s at out[o..cap), percent-encoded when pct; -1: no room. */
static long
put_value(const struct secret *s, int pct, char *out, size_t o, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i;

	for (i = 0; i < s->value_len; i++) {
		if (!pct || ascii_unreserved(s->value[i])) {
			if (o >= cap)
				return -1;
			out[o++] = (char)s->value[i];
			continue;
		}
		if (cap - o < 3)
			return -1;
		out[o++] = '%';
		out[o++] = hex[s->value[i] >> 4];
		out[o++] = hex[s->value[i] & 0xf];
	}
	return (long)o;
}

long
placeholder_swap(const char *s, size_t len, const struct ph_swap *swaps,
    size_t nswaps, int pct, char *out, size_t cap, size_t *count)
{
	size_t i = 0, o = 0, k;
	long n;

	while (i < len) {
		for (k = 0; s[i] == 's' && k < nswaps && (len - i < PH_LEN ||
		    memcmp(s + i, swaps[k].ph, PH_LEN) != 0); k++)
			;
		if (s[i] == 's' && k < nswaps) {
			if ((n = put_value(swaps[k].s, pct, out, o, cap)) < 0)
				return -1;
			o = (size_t)n;
			i += PH_LEN;
			(*count)++;
			continue;
		}
		if (o >= cap)
			return -1;
		out[o++] = s[i++];
	}
	return (long)o;
}

/* Whether v is "Basic <base64>"; *b64 its credential. */
int
placeholder_basic_of(const char *v, size_t len, const char **b64,
    size_t *blen)
{
	if (len <= PH_BASIC_LEN || !ascii_prefix(v, len, "basic "))
		return 0;
	*b64 = v + PH_BASIC_LEN;
	*blen = len - PH_BASIC_LEN;
	return 1;
}

/* The first placeholder in s[0..len), or NULL (quick when it has none). */
static const struct secret *
in_text(const struct secret_store *st, const struct secret_set *set,
    const char *sandbox, const char *s, size_t len)
{
	const struct secret *which = NULL;

	if (memmem(s, len, PH_PREFIX, PH_PREFIX_LEN) == NULL)
		return NULL;
	placeholder_find(st, set, sandbox, s, len, &which);
	return which;
}

const struct secret *
placeholder_in_head(const struct secret_store *st,
    const struct secret_set *set, const char *sandbox,
    const struct http_head *h, const char *target,
    int (*skip)(void *, const char *, size_t), void *arg, char *buf,
    size_t cap, const char **where)
{
	const struct secret *s;
	const char *b64;
	size_t i, blen, n;

	*where = "target";
	if ((s = in_text(st, set, sandbox, target != NULL ? target : h->target,
	    target != NULL ? strlen(target) : h->target_len)) != NULL)
		return s;
	*where = "header";
	for (i = 0; i < h->nheaders; i++) {
		const struct http_header *x = &h->headers[i];

		if (skip != NULL && skip(arg, x->name, x->name_len))
			continue;
		if ((s = in_text(st, set, sandbox, x->value,
		    x->value_len)) != NULL)
			return s;
		if (!placeholder_basic_of(x->value, x->value_len, &b64, &blen) ||
		    sodium_base642bin((unsigned char *)buf, cap, b64, blen, NULL,
		    &n, NULL, sodium_base64_VARIANT_ORIGINAL) != 0)
			continue;
		s = in_text(st, set, sandbox, buf, n);
		sodium_memzero(buf, n);
		if (s != NULL)
			return s;
	}
	return NULL;
}
