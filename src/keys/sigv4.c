/*
 * sigv4.c: AWS Signature Version 4 (sigv4.h), with libsodium's SHA-256
 * and HMAC-SHA-256.  The secret key and the keys derived from it live
 * only in guarded memory or on the stack, wiped before return.
 */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "util/ascii.h"
#include "util/sbuf.h"
#include "util/err.h"
#include "util/keyfile.h"
#include "parse/httppath.h"
#include "keys/sigv4.h"

#define MAX_PAIRS	256	/* query parameters signed */

void
aws_creds_free(struct aws_creds *c)
{
	if (c == NULL)
		return;
	secmem_free(c->mem);
	free(c);
}

/* A member of o that is a string of 1..SIGV4_MAX_FIELD visible bytes. */
static const char *
field(const json_t *o, const char *key, int need, size_t *len,
    const char **why)
{
	const json_t *v = json_object_get(o, key);
	const char *s;
	size_t i, n;

	if (v == NULL && !need)
		return NULL;
	if (!json_is_string(v) || (n = json_string_length(v)) == 0 ||
	    n > SIGV4_MAX_FIELD) {
		*why = need ? "not AWS credentials: access_key_id and "
		    "secret_access_key must be strings" : "not AWS credentials: "
		    "session_token must be a string";
		return NULL;
	}
	s = json_string_value(v);
	for (i = 0; i < n; i++)
		if (s[i] <= 0x20 || s[i] >= 0x7f) {
			*why = "not AWS credentials: a field holds a byte that "
			    "cannot go in a header";
			return NULL;
		}
	*len = n;
	return s;
}

int
aws_creds_parse(const uint8_t *json, size_t len, struct aws_creds **out,
    const char **why)
{
	const char *a, *s, *t = NULL;
	size_t alen = 0, slen = 0, tlen = 0;
	struct aws_creds *c = NULL;
	json_error_t e;
	json_t *o;
	int r = SL_ERR_INVALID;

	*why = "not AWS credentials: not a JSON object";
	if ((o = json_loadb((const char *)json, len, JSON_REJECT_DUPLICATES,
	    &e)) == NULL || !json_is_object(o))
		goto out;
	if ((a = field(o, "access_key_id", 1, &alen, why)) == NULL ||
	    (s = field(o, "secret_access_key", 1, &slen, why)) == NULL)
		goto out;
	if (json_object_get(o, "session_token") != NULL &&
	    (t = field(o, "session_token", 0, &tlen, why)) == NULL)
		goto out;
	r = SL_ERR_NOMEM;
	*why = "out of memory";
	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    (c->mem = secmem_alloc(alen + slen + tlen + 3)) == NULL)
		goto out;
	memcpy(c->mem, a, alen + 1);
	memcpy(c->mem + alen + 1, s, slen + 1);
	c->akid = (const char *)c->mem;
	c->secret = (const char *)c->mem + alen + 1;
	if (t != NULL) {
		memcpy(c->mem + alen + slen + 2, t, tlen + 1);
		c->token = (const char *)c->mem + alen + slen + 2;
		c->token_len = tlen;
	}
	sodium_mprotect_readonly(c->mem);
	*out = c;
	c = NULL;
	r = 0;
 out:
	json_decref(o);
	sodium_memzero(&e, sizeof(e));
	aws_creds_free(c);
	return r;
}

/* ---- the canonical request ------------------------------------------ */

/* s[0..n) decoded (%XX) and encoded as AWS asks. */
static void
sb_aws_encode(struct sbuf *b, const char *s, size_t n)
{
	unsigned char c;
	size_t i;
	int hi, lo;

	for (i = 0; i < n; i++) {
		c = (unsigned char)s[i];
		if (c == '%' && i + 2 < n &&
		    (hi = http_hexval((unsigned char)s[i + 1])) >= 0 &&
		    (lo = http_hexval((unsigned char)s[i + 2])) >= 0) {
			c = (unsigned char)(hi << 4 | lo);
			i += 2;
		}
		if (ascii_unreserved(c))
			sbuf_add(b, (const char *)&c, 1);
		else
			sbuf_pct(b, c);
	}
}

/* The path as sent, encoded again for double_encode ('/' kept). */
static void
sb_path(struct sbuf *b, const char *p, size_t n, int twice)
{
	size_t i;

	if (n == 0) {
		sbuf_add(b, "/", 1);
		return;
	}
	for (i = 0; i < n; i++) {
		if (!twice || p[i] == '/' || ascii_unreserved((unsigned char)p[i]))
			sbuf_add(b, p + i, 1);
		else
			sbuf_pct(b, (unsigned char)p[i]);
	}
}

struct pair {
	char	*k, *v;		/* encoded, in the pairs buffer */
};

static int
pair_cmp(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;
	int r = strcmp(x->k, y->k);

	return r != 0 ? r : strcmp(x->v, y->v);
}

/* The query's pairs, encoded, sorted, joined with '&'. */
static int
sb_query(struct sbuf *b, const char *q, size_t n)
{
	struct pair pairs[MAX_PAIRS];
	char *store;
	struct sbuf tmp;
	const char *p = q, *end = q + n, *amp, *eq;
	size_t np = 0, i;

	if (n == 0)
		return 0;
	/* Each byte may become three, and a NUL per name and value. */
	if ((store = malloc(3 * n + 2 * MAX_PAIRS + 1)) == NULL)
		return -1;
	tmp = (struct sbuf){ store, 0, 3 * n + 2 * MAX_PAIRS + 1, 0 };
	while (p < end) {
		if ((amp = memchr(p, '&', (size_t)(end - p))) == NULL)
			amp = end;
		if (amp > p) {
			if (np == MAX_PAIRS) {
				free(store);
				return -1;
			}
			eq = memchr(p, '=', (size_t)(amp - p));
			pairs[np].k = (char *)tmp.p + tmp.len;
			sb_aws_encode(&tmp, p, (size_t)((eq ? eq : amp) - p));
			if (tmp.over)
				break;
			tmp.p[tmp.len++] = '\0';
			pairs[np].v = (char *)tmp.p + tmp.len;
			if (eq != NULL)
				sb_aws_encode(&tmp, eq + 1, (size_t)(amp - eq - 1));
			if (tmp.over)
				break;
			tmp.p[tmp.len++] = '\0';
			np++;
		}
		p = amp + (amp < end);
	}
	if (tmp.over) {
		free(store);
		return -1;
	}
	qsort(pairs, np, sizeof(pairs[0]), pair_cmp);
	for (i = 0; i < np; i++) {
		if (i > 0)
			sbuf_add(b, "&", 1);
		sbuf_str(b, pairs[i].k);
		sbuf_add(b, "=", 1);
		sbuf_str(b, pairs[i].v);
	}
	free(store);
	return 0;
}

long
sigv4_canonical(const struct sigv4_req *r, const char *amz_date,
    const char *token, char *out, size_t cap)
{
	struct sbuf b = { out, 0, cap, cap == 0 };
	const char *q = strchr(r->target, '?');
	size_t plen = q != NULL ? (size_t)(q - r->target) : strlen(r->target);

	if (cap > 0)
		out[0] = '\0';
	sbuf_str(&b, r->method);
	sbuf_add(&b, "\n", 1);
	sb_path(&b, r->target, plen, r->double_encode);
	sbuf_add(&b, "\n", 1);
	if (q != NULL && sb_query(&b, q + 1, strlen(q + 1)) != 0)
		return -1;
	sbuf_add(&b, "\n", 1);
	sbuf_str(&b, "host:");
	sbuf_str(&b, r->host);
	sbuf_str(&b, "\nx-amz-content-sha256:");
	sbuf_str(&b, r->payload_hash);
	sbuf_str(&b, "\nx-amz-date:");
	sbuf_str(&b, amz_date);
	if (token != NULL) {
		sbuf_str(&b, "\nx-amz-security-token:");
		sbuf_str(&b, token);
	}
	sbuf_str(&b, "\n\nhost;x-amz-content-sha256;x-amz-date");
	if (token != NULL)
		sbuf_str(&b, ";x-amz-security-token");
	sbuf_add(&b, "\n", 1);
	sbuf_str(&b, r->payload_hash);
	return b.over ? -1 : (long)b.len;
}

/* ---- signing ----------------------------------------------------------- */

static void
hmac(uint8_t out[32], const uint8_t *key, size_t klen, const char *msg)
{
	crypto_auth_hmacsha256_state st;

	crypto_auth_hmacsha256_init(&st, key, klen);
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)msg, strlen(msg));
	crypto_auth_hmacsha256_final(&st, out);
	sodium_memzero(&st, sizeof(st));
}

/* Places s at buf[*off..), NUL-terminated; NULL when it does not fit. */
static const char *
put(char *buf, size_t cap, size_t *off, const char *s)
{
	size_t n = strlen(s);
	char *p;

	if (n + 1 > cap - *off)
		return NULL;
	p = buf + *off;
	memcpy(p, s, n + 1);
	*off += n + 1;
	return p;
}

long
sigv4_sign(const struct aws_creds *c, const struct sigv4_req *r, char *buf,
    size_t cap, struct sigv4_headers *h)
{
	char date[17], day[9], scope[160], hash[65], sig[65], auth[1024];
	uint8_t k[32], d[32], ksecret[SIGV4_MAX_FIELD + 4];
	char *canon = NULL, sts[512];
	size_t off = 0, slen = strlen(c->secret), clen;
	struct tm tm;
	long n = -1;

	memset(h, 0, sizeof(*h));
	if (gmtime_r(&r->now, &tm) == NULL)
		return -1;
	strftime(date, sizeof(date), "%Y%m%dT%H%M%SZ", &tm);
	strftime(day, sizeof(day), "%Y%m%d", &tm);
	snprintf(scope, sizeof(scope), "%s/%s/%s/aws4_request", day, r->region,
	    r->service);
	clen = 4 * strlen(r->target) + strlen(r->host) + 4 * 1024 +
	    (c->token != NULL ? c->token_len : 0) + 2 * MAX_PAIRS;
	if ((canon = malloc(clen)) == NULL)
		goto out;
	if (sigv4_canonical(r, date, c->token, canon, clen) < 0)
		goto out;
	crypto_hash_sha256(d, (const uint8_t *)canon, strlen(canon));
	sodium_bin2hex(hash, sizeof(hash), d, sizeof(d));
	snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s\n%s", date, scope,
	    hash);
	/* kSecret = "AWS4" + secret; then date, region, service, request. */
	memcpy(ksecret, "AWS4", 4);
	memcpy(ksecret + 4, c->secret, slen);
	hmac(k, ksecret, slen + 4, day);
	sodium_memzero(ksecret, sizeof(ksecret));
	hmac(k, k, sizeof(k), r->region);
	hmac(k, k, sizeof(k), r->service);
	hmac(k, k, sizeof(k), "aws4_request");
	hmac(d, k, sizeof(k), sts);
	sodium_memzero(k, sizeof(k));
	sodium_bin2hex(sig, sizeof(sig), d, sizeof(d));
	if (snprintf(auth, sizeof(auth), "AWS4-HMAC-SHA256 Credential=%s/%s, "
	    "SignedHeaders=host;x-amz-content-sha256;x-amz-date%s, "
	    "Signature=%s", c->akid, scope, c->token != NULL ?
	    ";x-amz-security-token" : "", sig) >= (int)sizeof(auth))
		goto out;
	if ((h->authorization = put(buf, cap, &off, auth)) == NULL ||
	    (h->amz_date = put(buf, cap, &off, date)) == NULL ||
	    (h->content_sha256 = put(buf, cap, &off, r->payload_hash)) ==
	    NULL || (c->token != NULL && (h->security_token = put(buf, cap,
	    &off, c->token)) == NULL))
		goto out;
	n = (long)off;
 out:
	if (canon != NULL)
		sodium_memzero(canon, clen);	/* it holds the token */
	free(canon);
	return n;
}
