/*
 * jwt.c: identity tokens, ES256 JWS in compact form (RFC 7515, 7519),
 * and the JWKS that verifies them.
 */
#include "autoconf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <sodium.h>

#include "util/err.h"
#include "keys/jwt.h"
#include "keys/signkey.h"

#define JTI_RAW		16
#define SUB_PREFIX	"sandbox:"
#define B64_VARIANT	sodium_base64_VARIANT_URLSAFE_NO_PADDING

/* The bytes base64url without padding takes for len, and a NUL. */
static size_t
b64url_size(size_t len)
{
	return len / 3 * 4 + (len % 3 != 0 ? len % 3 + 1 : 0) + 1;
}

int
jwt_b64url(const uint8_t *in, size_t len, char *out, size_t out_len)
{
	/* sodium_bin2base64 aborts on a short buffer: check first. */
	if (len > SIZE_MAX / 2 || out_len < b64url_size(len))
		return SL_ERR_TOO_BIG;
	sodium_bin2base64(out, out_len, in, len, B64_VARIANT);
	return 0;
}

/*
 * Decodes in[0..len), strict: only the URL-safe alphabet, no padding, no
 * whitespace, zero unused bits (one encoding a value), fits out[0..max).
 */
static int
b64url_decode(const char *in, size_t len, uint8_t *out, size_t max,
    size_t *outlen)
{
	size_t n;

	if (sodium_base642bin(out, max, in, len, NULL, &n, NULL,
	    B64_VARIANT) != 0)
		return SL_ERR_INVALID;
	*outlen = n;
	return 0;
}

/* Sets o[key] to the string v; NULL v leaves it out. */
static int
set_str(json_t *o, const char *key, const char *v)
{
	json_t *s;

	if (v == NULL)
		return 0;
	if ((s = json_string(v)) == NULL) {
		/* json_string fails for bad UTF-8 or memory; tell which. */
		if ((s = json_string_nocheck(v)) == NULL)
			return SL_ERR_NOMEM;
		json_decref(s);
		return SL_ERR_INVALID;
	}
	return json_object_set_new(o, key, s) == 0 ? 0 : SL_ERR_NOMEM;
}

static int
set_int(json_t *o, const char *key, json_int_t v)
{
	json_t *i;

	if ((i = json_integer(v)) == NULL)
		return SL_ERR_NOMEM;
	return json_object_set_new(o, key, i) == 0 ? 0 : SL_ERR_NOMEM;
}

static int
claims_check(const struct jwt_claims *c)
{
	if (c->iss == NULL || *c->iss == '\0' || c->sandbox == NULL ||
	    *c->sandbox == '\0' || c->aud == NULL || *c->aud == '\0')
		return SL_ERR_INVALID;
	if (c->ttl < 1 || c->now < 0 ||
	    (uint64_t)c->now > (uint64_t)INT64_MAX - c->ttl)
		return SL_ERR_INVALID;
	return 0;
}

/* The payload of c with jti, as a compact JSON string (malloc'd). */
static int
payload_json(const struct jwt_claims *c, const char *jti, char **out)
{
	const size_t plen = sizeof(SUB_PREFIX) - 1;
	json_t *o;
	char *sub = NULL, *s;
	size_t n;
	int r = SL_ERR_NOMEM;

	if ((o = json_object()) == NULL)
		goto out;
	n = strlen(c->sandbox);
	if ((sub = malloc(plen + n + 1)) == NULL)
		goto out;
	memcpy(sub, SUB_PREFIX, plen);
	memcpy(sub + plen, c->sandbox, n + 1);
	if ((r = set_str(o, "iss", c->iss)) != 0 ||
	    (r = set_str(o, "sub", sub)) != 0 ||
	    (r = set_str(o, "aud", c->aud)) != 0 ||
	    (r = set_int(o, "iat", (json_int_t)c->now)) != 0 ||
	    (r = set_int(o, "nbf", (json_int_t)c->now)) != 0 ||
	    (r = set_int(o, "exp", (json_int_t)c->now + c->ttl)) != 0 ||
	    (r = set_str(o, "jti", jti)) != 0 ||
	    (r = set_str(o, "sandbox", c->sandbox)) != 0 ||
	    (r = set_str(o, "team", c->team)) != 0 ||
	    (r = set_str(o, "project", c->project)) != 0 ||
	    (r = set_str(o, "htm", c->htm)) != 0 ||
	    (r = set_str(o, "htu", c->htu)) != 0 ||
	    (r = set_str(o, "body_sha256", c->body_sha256)) != 0)
		goto out;
	r = SL_ERR_NOMEM;
	if ((s = json_dumps(o, JSON_COMPACT)) == NULL)
		goto out;
	*out = s;
	r = 0;
 out:
	free(sub);
	json_decref(o);
	return r;
}

/* The protected header for k, as a compact JSON string (malloc'd). */
static int
header_json(const struct signkey *k, char **out)
{
	json_t *o;
	char *s;

	if ((o = json_pack("{s:s, s:s, s:s}", "alg", "ES256", "typ", "JWT",
	    "kid", signkey_kid(k))) == NULL)
		return SL_ERR_NOMEM;
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (s == NULL)
		return SL_ERR_NOMEM;
	*out = s;
	return 0;
}

/* Appends base64url of in[0..len) to tok[*off..max), NUL-terminated. */
static int
append_b64(char *tok, size_t max, size_t *off, const void *in, size_t len)
{
	int r;

	if ((r = jwt_b64url(in, len, tok + *off, max - *off)) != 0)
		return r;
	*off += strlen(tok + *off);
	return 0;
}

static int
append_dot(char *tok, size_t max, size_t *off)
{
	if (max - *off < 2)
		return SL_ERR_TOO_BIG;
	tok[(*off)++] = '.';
	tok[*off] = '\0';
	return 0;
}

/* A fresh jti: 16 random bytes, base64url. */
static int
new_jti(char jti[JWT_JTI_LEN + 1])
{
	uint8_t b[JTI_RAW];

	if (RAND_bytes(b, sizeof(b)) != 1) {
		ERR_clear_error();
		return SL_ERR_INTERNAL;
	}
	return jwt_b64url(b, sizeof(b), jti, JWT_JTI_LEN + 1);
}

/* Signs header.payload into tok (max bytes); *off ends at its NUL. */
static int
build_token(const struct signkey *k, const char *hdr, const char *pl,
    char *tok, size_t max, size_t *off)
{
	uint8_t sig[SIGNKEY_SIG_LEN];
	int r;

	*off = 0;
	tok[0] = '\0';
	if ((r = append_b64(tok, max, off, hdr, strlen(hdr))) != 0 ||
	    (r = append_dot(tok, max, off)) != 0 ||
	    (r = append_b64(tok, max, off, pl, strlen(pl))) != 0)
		return r;
	if ((r = signkey_sign(k, (const uint8_t *)tok, *off, sig)) != 0)
		return r;
	if ((r = append_dot(tok, max, off)) != 0 ||
	    (r = append_b64(tok, max, off, sig, sizeof(sig))) != 0)
		return r;
	return 0;
}

long
jwt_sign(const struct signkey *k, const struct jwt_claims *c,
    char *out, size_t out_len, char jti[JWT_JTI_LEN + 1])
{
	char tok[JWT_MAX], id[JWT_JTI_LEN + 1], *hdr = NULL, *pl = NULL;
	size_t max, len = 0;
	int r;

	if (k == NULL || c == NULL || out == NULL || jti == NULL) {
		r = SL_ERR_INVALID;
		goto out;
	}
	if ((r = claims_check(c)) != 0)
		goto out;
	if (signkey_is_remote(k))
		return jwt_remote_sign(k, c, out, out_len, jti);
	if ((r = new_jti(id)) != 0 ||
	    (r = header_json(k, &hdr)) != 0 ||
	    (r = payload_json(c, id, &pl)) != 0)
		goto out;
	max = out_len < sizeof(tok) ? out_len : sizeof(tok);
	if ((r = build_token(k, hdr, pl, tok, max, &len)) != 0)
		goto out;
	memcpy(out, tok, len + 1);
	memcpy(jti, id, sizeof(id));
	r = 0;
 out:
	/* A signed token is a bearer credential until it expires. */
	OPENSSL_cleanse(tok, sizeof(tok));
	free(hdr);
	free(pl);
	return r != 0 ? r : (long)len;
}

/*
 * A compact token's three parts: [0]..[1] are the signing input with the
 * dot between them; exactly two dots, no NUL.
 */
struct parts {
	const char	*p[3];
	size_t		 len[3];
};

static int
split(const char *token, size_t len, struct parts *pt)
{
	const char *d1, *d2, *end = token + len;

	if (memchr(token, '\0', len) != NULL)
		return SL_ERR_INVALID;
	if ((d1 = memchr(token, '.', len)) == NULL ||
	    (d2 = memchr(d1 + 1, '.', (size_t)(end - d1 - 1))) == NULL ||
	    memchr(d2 + 1, '.', (size_t)(end - d2 - 1)) != NULL)
		return SL_ERR_INVALID;
	pt->p[0] = token;
	pt->len[0] = (size_t)(d1 - token);
	pt->p[1] = d1 + 1;
	pt->len[1] = (size_t)(d2 - d1 - 1);
	pt->p[2] = d2 + 1;
	pt->len[2] = (size_t)(end - d2 - 1);
	if (pt->len[0] == 0 || pt->len[1] == 0 || pt->len[2] == 0)
		return SL_ERR_INVALID;
	return 0;
}

/* A base64url part holding a JSON object (duplicate members refused). */
static int
decode_object(const char *b64, size_t len, json_t **out)
{
	uint8_t buf[JWT_MAX];
	size_t n;
	json_t *o;

	if (b64url_decode(b64, len, buf, sizeof(buf), &n) != 0)
		return SL_ERR_INVALID;
	if ((o = json_loadb((const char *)buf, n, JSON_REJECT_DUPLICATES,
	    NULL)) == NULL)
		return SL_ERR_INVALID;
	if (!json_is_object(o)) {
		json_decref(o);
		return SL_ERR_INVALID;
	}
	*out = o;
	return 0;
}

/*
 * The protected header: alg ES256 (never "none" or an HMAC an attacker
 * could key with our public key), kid p's, no crit (we understand no
 * extension, so RFC 7515 4.1.11 says reject).
 */
static int
header_ok(const struct signpub *p, const char *b64, size_t len)
{
	json_t *h = NULL;
	const char *alg, *kid;
	int r = SL_ERR_INVALID;

	if (decode_object(b64, len, &h) != 0)
		goto out;
	if ((alg = json_string_value(json_object_get(h, "alg"))) == NULL ||
	    strcmp(alg, "ES256") != 0)
		goto out;
	if ((kid = json_string_value(json_object_get(h, "kid"))) == NULL ||
	    strcmp(kid, signpub_kid(p)) != 0)
		goto out;
	if (json_object_get(h, "crit") != NULL)
		goto out;
	r = 0;
 out:
	json_decref(h);
	return r;
}

int
jwt_verify(const struct signpub *p, const char *token, size_t len,
    json_t **claims)
{
	uint8_t sig[SIGNKEY_SIG_LEN + 1];
	struct parts pt;
	json_t *c = NULL;
	size_t n;
	int r = SL_ERR_INVALID;

	if (p == NULL || token == NULL || len == 0 || len >= JWT_MAX)
		goto out;
	if (split(token, len, &pt) != 0 ||
	    header_ok(p, pt.p[0], pt.len[0]) != 0)
		goto out;
	/* One byte of room: a longer signature must not decode as valid. */
	if (b64url_decode(pt.p[2], pt.len[2], sig, sizeof(sig), &n) != 0 ||
	    n != SIGNKEY_SIG_LEN)
		goto out;
	/* The signature first: an unauthenticated payload is not parsed. */
	if (signpub_verify(p, (const uint8_t *)token,
	    pt.len[0] + 1 + pt.len[1], sig) != 0)
		goto out;
	if (decode_object(pt.p[1], pt.len[1], &c) != 0)
		goto out;
	if (claims != NULL) {
		*claims = c;
		c = NULL;	/* transferred */
	}
	r = 0;
 out:
	json_decref(c);
	return r;
}

/* Whether a JWK with kid is in the array a already. */
static int
has_kid(const json_t *a, const char *kid)
{
	const char *k;
	size_t i;
	json_t *v;

	json_array_foreach(a, i, v) {
		k = json_string_value(json_object_get(v, "kid"));
		if (k != NULL && strcmp(k, kid) == 0)
			return 1;
	}
	return 0;
}

json_t *
jwt_jwks(struct signpub *const *pubs, size_t n)
{
	json_t *keys, *jwks = NULL, *ret = NULL;
	size_t i;

	if ((jwks = json_object()) == NULL || (keys = json_array()) == NULL ||
	    json_object_set_new(jwks, "keys", keys) != 0)
		goto out;
	for (i = 0; i < n; i++) {
		/* The signing key may also be listed among the old ones. */
		if (pubs[i] == NULL || has_kid(keys, signpub_kid(pubs[i])))
			continue;
		if (json_array_append_new(keys, signpub_jwk(pubs[i])) != 0)
			goto out;
	}
	ret = jwks;
	jwks = NULL;	/* transferred */
 out:
	json_decref(jwks);
	return ret;
}
