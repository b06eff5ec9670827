/*
 * mint.c: the requests that mint access tokens and the reading of the
 * answers (mint.h).
 */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sodium.h>

#include "util/ascii.h"
#include "util/names.h"
#include "util/sbuf.h"
#include "keys/jwt.h"
#include "keys/mint.h"
#include "keys/pemkey.h"
#include "keys/secrets.h"
#include "keys/signkey.h"

/* ---- building ------------------------------------------------------- */

/* s percent-encoded as a form value: all but the unreserved bytes. */
static void
put_form(struct sbuf *w, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (ascii_unreserved((unsigned char)s[i]))
			sbuf_add(w, s + i, 1);
		else
			sbuf_pct(w, (unsigned char)s[i]);
}

/* "&name=value" (no '&' first), value form-encoded. */
static void
put_param(struct sbuf *w, int first, const char *name, const char *v,
    size_t n)
{
	if (!first)
		sbuf_add(w, "&", 1);
	sbuf_str(w, name);
	sbuf_add(w, "=", 1);
	put_form(w, v, n);
}

/* base64url of 16 random bytes. */
static int
random_id(char out[JWT_JTI_LEN + 1])
{
	uint8_t b[16];

	if (RAND_bytes(b, sizeof(b)) != 1) {
		ERR_clear_error();
		return -1;
	}
	return jwt_b64url(b, sizeof(b), out, JWT_JTI_LEN + 1);
}

long
mint_jws(EVP_PKEY *key, const char *payload, char *out, size_t cap,
    const char **why)
{
	uint8_t der[1024], raw[SIGNKEY_SIG_LEN];
	const uint8_t *sig = der;
	size_t dlen = sizeof(der), slen, off;
	EVP_MD_CTX *ctx = NULL;
	const char *hdr;
	int rsa = EVP_PKEY_is_a(key, "RSA");
	long r = -1;

	if (rsa) {
		if (EVP_PKEY_get_bits(key) < 2048) {
			*why = "an RSA key must have 2048 bits or more";
			return -1;
		}
		hdr = "{\"alg\":\"RS256\",\"typ\":\"JWT\"}";
	} else if (EVP_PKEY_is_a(key, "EC")) {
		char curve[32];

		if (EVP_PKEY_get_utf8_string_param(key,
		    OSSL_PKEY_PARAM_GROUP_NAME, curve, sizeof(curve), NULL) != 1 ||
		    strcmp(curve, "prime256v1") != 0) {
			ERR_clear_error();
			*why = "an EC key must be P-256 (ES256)";
			return -1;
		}
		hdr = "{\"alg\":\"ES256\",\"typ\":\"JWT\"}";
	} else {
		*why = "the key is neither RSA (RS256) nor P-256 (ES256)";
		return -1;
	}
	*why = "the token does not fit";
	if (jwt_b64url((const uint8_t *)hdr, strlen(hdr), out, cap) != 0)
		return -1;
	off = strlen(out);
	if (cap - off < 2)
		return -1;
	out[off++] = '.';
	if (jwt_b64url((const uint8_t *)payload, strlen(payload), out + off,
	    cap - off) != 0)
		return -1;
	off += strlen(out + off);
	*why = "the key cannot sign";
	if ((ctx = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestSignInit_ex(ctx, NULL, "SHA256", NULL, NULL, key,
	    NULL) != 1 ||
	    EVP_DigestSign(ctx, der, &dlen, (const uint8_t *)out, off) != 1)
		goto done;
	slen = dlen;
	if (!rsa) {
		if (signkey_der_to_raw(der, dlen, raw) != 0)
			goto done;
		sig = raw;
		slen = sizeof(raw);
	}
	*why = "the token does not fit";
	if (cap - off < 2)
		goto done;
	out[off++] = '.';
	if (jwt_b64url(sig, slen, out + off, cap - off) != 0)
		goto done;
	r = (long)(off + strlen(out + off));
 done:
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return r;
}

/* The assertion of a jwt_bearer or github_app source, into a. */
static long
assertion(const struct mint_source *src, const struct secret *s, time_t now,
    char *a, size_t cap, const char **why)
{
	char jti[JWT_JTI_LEN + 1], *pl;
	json_t *o;
	long n;

	if (s->pem == NULL || s->pem->key == NULL) {
		*why = "the secret is not a private key";
		return -1;
	}
	if (src->kind == MINT_GITHUB_APP && !EVP_PKEY_is_a(s->pem->key, "RSA")) {
		*why = "a GitHub App signs with its RSA key (RS256)";
		return -1;
	}
	if (random_id(jti) != 0) {
		*why = "no randomness";
		return -1;
	}
	if (src->kind == MINT_GITHUB_APP)
		/* GitHub allows 10 minutes; a minute back for clock skew. */
		o = json_pack("{s:s, s:I, s:I}", "iss", src->app_id,
		    "iat", (json_int_t)now - 60, "exp", (json_int_t)now + 540);
	else
		o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s}",
		    "iss", src->client_id, "sub", src->client_id,
		    "aud", src->audience != NULL ? src->audience :
		    src->token_url, "iat", (json_int_t)now,
		    "exp", (json_int_t)now + MINT_ASSERTION_TTL, "jti", jti);
	if (o == NULL || (pl = json_dumps(o, JSON_COMPACT)) == NULL) {
		json_decref(o);
		*why = "out of memory";
		return -1;
	}
	json_decref(o);
	n = mint_jws(s->pem->key, pl, a, cap, why);
	free(pl);		/* claims only: no secret in it */
	return n;
}

long
mint_request(const struct mint_source *src, const struct secret *s,
    time_t now, char *out, size_t cap, const char **why)
{
	struct mint_url u;
	struct sbuf w = { out, 0, cap, 0 }, b;
	char *body, *jwt = NULL, clen[32];
	size_t bcap = MINT_REQ_MAX / 2;
	long r = -1, n;

	if (mint_url_parse(src->token_url, &u, why) != 0)
		return -1;
	if ((mint_kind_signs(src->kind) ? (src->kind == MINT_GITHUB_APP ?
	    src->app_id == NULL : src->client_id == NULL) :
	    src->client_id == NULL)) {
		*why = src->kind == MINT_GITHUB_APP ? "needs app_id" :
		    "needs client_id";
		return -1;
	}
	if (!mint_kind_signs(src->kind) && s->kind != SEALED_KIND_HEADER) {
		*why = "the secret is not a header value";
		return -1;
	}
	if ((body = sodium_malloc(bcap)) == NULL ||
	    (mint_kind_signs(src->kind) &&
	    (jwt = sodium_malloc(MINT_TOKEN_MAX)) == NULL)) {
		*why = "out of guarded memory";
		goto done;
	}
	b = (struct sbuf){ body, 0, bcap, 0 };
	body[0] = '\0';
	if (mint_kind_signs(src->kind) &&
	    (n = assertion(src, s, now, jwt, MINT_TOKEN_MAX, why)) < 0)
		goto done;
	switch (src->kind) {
	case MINT_CLIENT_CREDENTIALS:
		put_param(&b, 1, "grant_type", "client_credentials", 18);
		break;
	case MINT_REFRESH_TOKEN:
		put_param(&b, 1, "grant_type", "refresh_token", 13);
		put_param(&b, 0, "refresh_token", (const char *)s->value,
		    s->value_len);
		put_param(&b, 0, "client_id", src->client_id,
		    strlen(src->client_id));
		break;
	case MINT_JWT_BEARER:
		put_param(&b, 1, "grant_type",
		    "urn:ietf:params:oauth:grant-type:jwt-bearer", 43);
		put_param(&b, 0, "assertion", jwt, strlen(jwt));
		break;
	case MINT_GITHUB_APP:
		break;		/* the JWT is the credential; no body */
	}
	if (src->scope != NULL && src->kind != MINT_GITHUB_APP)
		put_param(&b, 0, "scope", src->scope, strlen(src->scope));
	/* The OAuth kinds: the API the token is for (Auth0 and others). */
	if (src->audience != NULL && !mint_kind_signs(src->kind))
		put_param(&b, 0, "audience", src->audience,
		    strlen(src->audience));
	sbuf_str(&w, "POST ");
	sbuf_str(&w, u.target);
	sbuf_str(&w, " HTTP/1.1\r\nHost: ");
	sbuf_str(&w, u.host);
	if (u.port != 443) {
		snprintf(clen, sizeof(clen), ":%u", u.port);
		sbuf_str(&w, clen);
	}
	sbuf_str(&w, "\r\nUser-Agent: sluice\r\nAccept: application/json\r\n");
	if (src->kind == MINT_CLIENT_CREDENTIALS) {
		/* RFC 6749 2.3.1: both form-encoded, then Basic. */
		struct sbuf id = { jwt = sodium_malloc(MINT_TOKEN_MAX), 0,
		    MINT_TOKEN_MAX, 0 };

		if (jwt == NULL) {
			*why = "out of guarded memory";
			goto done;
		}
		jwt[0] = '\0';
		put_form(&id, src->client_id, strlen(src->client_id));
		sbuf_add(&id, ":", 1);
		put_form(&id, (const char *)s->value, s->value_len);
		if (id.over || sodium_base64_ENCODED_LEN(id.len,
		    sodium_base64_VARIANT_ORIGINAL) > cap - w.len) {
			*why = "the client secret is too long";
			goto done;
		}
		sbuf_str(&w, "Authorization: Basic ");
		if (!w.over) {
			sodium_bin2base64(w.p + w.len, w.cap - w.len,
			    (const unsigned char *)id.p, id.len,
			    sodium_base64_VARIANT_ORIGINAL);
			w.len += strlen(w.p + w.len);
		}
		sbuf_str(&w, "\r\n");
	} else if (src->kind == MINT_GITHUB_APP) {
		sbuf_str(&w, "Authorization: Bearer ");
		sbuf_str(&w, jwt);
		sbuf_str(&w, "\r\nX-GitHub-Api-Version: 2022-11-28\r\n");
	}
	if (b.len > 0)
		sbuf_str(&w, "Content-Type: application/x-www-form-urlencoded\r\n");
	snprintf(clen, sizeof(clen), "%zu", b.len);
	sbuf_str(&w, "Content-Length: ");
	sbuf_str(&w, clen);
	sbuf_str(&w, "\r\nConnection: close\r\n\r\n");
	sbuf_add(&w, body, b.len);
	if (w.over || b.over) {
		*why = "the request does not fit";
		goto done;
	}
	r = (long)w.len;
 done:
	sodium_free(body);	/* accepts NULL; wipes */
	sodium_free(jwt);
	if (r < 0)
		sodium_memzero(out, cap);
	return r;
}

/* ---- answers -------------------------------------------------------- */

/* Wipes the strings jansson holds of o (a token among them) before it goes. */
static void
wipe_json(json_t *o)
{
	const char *k;
	json_t *v;
	size_t i;

	if (json_is_string(o))
		sodium_memzero((char *)json_string_value(o), json_string_length(o));
	else if (json_is_object(o)) {
		json_object_foreach(o, k, v)
			wipe_json(v);
	} else if (json_is_array(o)) {
		json_array_foreach(o, i, v)
			wipe_json(v);
	}
}

/* RFC 3339 "YYYY-MM-DDTHH:MM:SSZ" as unix seconds; -1 if not that. */
static int64_t
rfc3339_utc(const char *s)
{
	struct tm tm;
	const char *e;

	memset(&tm, 0, sizeof(tm));
	if (strlen(s) != 20 || (e = strptime(s, "%Y-%m-%dT%H:%M:%SZ",
	    &tm)) == NULL || *e != '\0')
		return -1;
	return (int64_t)timegm(&tm);
}

/*
 * expires_in: whole seconds, 1 to 366 days, a JSON number or a string of
 * digits (as some endpoints send it); -1 for anything else.
 */
static int64_t
seconds_of(const json_t *x)
{
	const char *s;
	int64_t v = 0;
	size_t i, n;

	if (json_is_integer(x))
		v = json_integer_value(x);
	else if (json_is_string(x)) {
		s = json_string_value(x);
		n = json_string_length(x);
		if (n == 0 || n > 8)
			return -1;
		for (i = 0; i < n; i++) {
			if (s[i] < '0' || s[i] > '9')
				return -1;
			v = v * 10 + (s[i] - '0');
		}
	} else
		return -1;
	return v > 0 && v <= 366 * 86400 ? v : -1;
}

/* One of RFC 6749 5.2's error codes (and 6750's invalid_token). */
static int
oauth_error(const char *s)
{
	static const char *const codes[] = { "invalid_request",
	    "invalid_client", "invalid_grant", "unauthorized_client",
	    "unsupported_grant_type", "invalid_scope", "invalid_token",
	    "access_denied", "server_error", "temporarily_unavailable" };
	size_t i;

	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strcmp(s, codes[i]) == 0)
			return 1;
	return 0;
}

/*
 * A token as an HTTP header may carry it: visible ASCII, no space, and
 * short enough that every form of it is redacted (REDACT_MAX_ESCAPED).
 */
static int
token_ok(const char *t, size_t n)
{
	size_t i;

	if (n == 0 || n > MINT_TOKEN_LEN_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
			return 0;
	return 1;
}

int
mint_answer(enum mint_kind k, int status, const char *body, size_t len,
    time_t now, char *tok, struct mint_token *out, char *why, size_t whycap)
{
	json_error_t err;
	json_t *o = NULL, *t, *x;
	const char *tv;
	int64_t exp = -1, life;
	size_t tl;
	int r = -1;

	memset(out, 0, sizeof(*out));
	if (len <= MINT_ANSWER_MAX)
		o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &err);
	if (status < 200 || status > 299) {
		x = json_is_object(o) ? json_object_get(o, "error") : NULL;
		/* RFC 6749's codes alone: other text could carry anything. */
		if (json_is_string(x) && oauth_error(json_string_value(x)))
			snprintf(why, whycap, "the token endpoint answered %d "
			    "(%s)", status, json_string_value(x));
		else
			snprintf(why, whycap, "the token endpoint answered %d",
			    status);
		goto done;
	}
	if (!json_is_object(o)) {
		snprintf(why, whycap, "the token endpoint's answer is not a "
		    "JSON object");
		goto done;
	}
	t = json_object_get(o, k == MINT_GITHUB_APP ? "token" : "access_token");
	if (!json_is_string(t) || !token_ok(json_string_value(t),
	    json_string_length(t))) {
		snprintf(why, whycap, "the token endpoint's answer has no "
		    "usable %s", k == MINT_GITHUB_APP ? "token" : "access_token");
		goto done;
	}
	if (k == MINT_GITHUB_APP) {
		x = json_object_get(o, "expires_at");
		if (!json_is_string(x) ||
		    (exp = rfc3339_utc(json_string_value(x))) < 0) {
			snprintf(why, whycap, "the token endpoint's answer has "
			    "no expires_at");
			goto done;
		}
	} else if ((x = json_object_get(o, "expires_in")) == NULL)
		exp = (int64_t)now + MINT_DEFAULT_TTL;
	else if ((life = seconds_of(x)) > 0)
		exp = (int64_t)now + life;
	else {
		snprintf(why, whycap, "the token endpoint's answer has a bad "
		    "expires_in");
		goto done;
	}
	if (exp <= (int64_t)now) {
		snprintf(why, whycap, "the token endpoint gave an expired "
		    "token");
		goto done;
	}
	tv = json_string_value(t);
	tl = json_string_length(t);
	memcpy(tok, tv, tl);
	tok[tl] = '\0';
	out->len = tl;
	out->expires_at = exp;
	/* A refresh grant's answer may rotate the refresh token: not kept. */
	out->rotated = k == MINT_REFRESH_TOKEN &&
	    json_is_string(json_object_get(o, "refresh_token"));
	r = 0;
 done:
	if (o != NULL) {
		wipe_json(o);
		json_decref(o);
	}
	return r;
}
