/*
 * fuzz_sigv4.c: the SigV4 canonical request builder and the signer
 * (keys/sigv4.h) on any target a sandbox may send.  The first byte picks
 * the path encoding (s3 or not); the rest is the target.  Besides the
 * sanitizers: the canonical request is one of the shape AWS defines
 * (method, path, query, three or four headers, a blank line, the signed
 * headers, the payload hash), its query is sorted and encoded with upper-
 * case %XX and nothing outside A-Za-z0-9-_.~%=&, the same input gives the
 * same bytes, and signing never writes past the buffer it is given.
 */
#include "autoconf.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "keys/sigv4.h"

int	LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

#define MAX_TARGET	8192

/* The pair at p (up to '&' or end): name and value, and their lengths. */
static const char *
pair_at(const char *p, const char *end, size_t *nl, const char **v,
    size_t *vl)
{
	const char *amp = memchr(p, '&', (size_t)(end - p)), *eq;

	if (amp == NULL)
		amp = end;
	eq = memchr(p, '=', (size_t)(amp - p));
	*nl = (size_t)((eq != NULL ? eq : amp) - p);
	*v = eq != NULL ? eq + 1 : amp;
	*vl = (size_t)(amp - *v);
	return amp;
}

static int
cmp_part(const char *a, size_t al, const char *b, size_t bl)
{
	int r = memcmp(a, b, al < bl ? al : bl);

	return r != 0 ? r : (al > bl) - (al < bl);
}

static int
query_ok(const char *q, size_t n)
{
	const char *p = q, *end = q + n, *pn = NULL, *pv = NULL, *v, *next;
	size_t i, nl, vl, pnl = 0, pvl = 0;
	int c;

	for (i = 0; i < n; i++) {
		if (!((q[i] >= 'A' && q[i] <= 'Z') || (q[i] >= 'a' &&
		    q[i] <= 'z') || (q[i] >= '0' && q[i] <= '9') ||
		    strchr("-_.~%=&", q[i]) != NULL))
			return 0;
		/* "%" only as %XX in upper case */
		if (q[i] == '%' && (i + 2 >= n ||
		    strchr("0123456789ABCDEF", q[i + 1]) == NULL ||
		    strchr("0123456789ABCDEF", q[i + 2]) == NULL))
			return 0;
	}
	/* pairs in order: by name, then by value, as bytes */
	while (p < end) {
		next = pair_at(p, end, &nl, &v, &vl);
		if (pn != NULL) {
			c = cmp_part(pn, pnl, p, nl);
			if (c > 0 || (c == 0 && cmp_part(pv, pvl, v, vl) > 0))
				return 0;
		}
		pn = p;
		pnl = nl;
		pv = v;
		pvl = vl;
		p = next + (next < end);
	}
	return 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	static const char cj[] = "{\"access_key_id\": \"AKID\", "
	    "\"secret_access_key\": \"s3cr3t\", \"session_token\": \"tok\"}";
	static struct aws_creds *c;
	struct sigv4_req r;
	struct sigv4_headers h;
	char target[MAX_TARGET + 1], *a, *b, *nl, buf[8192];
	const char *why;
	size_t len, i, lines;
	long la, lb;

	if (c == NULL && (sodium_init() < 0 || aws_creds_parse(
	    (const uint8_t *)cj, sizeof(cj) - 1, &c, &why) != 0))
		abort();
	if (n < 1 || n - 1 > MAX_TARGET)
		return 0;
	/* A target as the parser passes it: visible ASCII, no NUL. */
	len = n - 1;
	for (i = 0; i < len; i++) {
		if (d[i + 1] <= 0x20 || d[i + 1] >= 0x7f)
			return 0;
		target[i] = (char)d[i + 1];
	}
	target[len] = '\0';
	memset(&r, 0, sizeof(r));
	r.method = "GET";
	r.target = target;
	r.host = "example.amazonaws.com";
	r.service = "svc";
	r.region = "us-east-1";
	r.payload_hash = SIGV4_EMPTY_SHA256;
	r.now = 1440938160;
	r.double_encode = d[0] & 1;
	if ((a = malloc(4 * len + 1024)) == NULL ||
	    (b = malloc(4 * len + 1024)) == NULL)
		abort();
	la = sigv4_canonical(&r, "20150830T123600Z", c->token, a,
	    4 * len + 1024);
	lb = sigv4_canonical(&r, "20150830T123600Z", c->token, b,
	    4 * len + 1024);
	if (la != lb || (la >= 0 && memcmp(a, b, (size_t)la + 1) != 0))
		abort();
	if (la >= 0) {
		if (strlen(a) != (size_t)la)
			abort();
		for (lines = 0, nl = a; (nl = strchr(nl, '\n')) != NULL; nl++)
			lines++;
		if (lines != 9)		/* the token makes four headers */
			abort();
		/* the third line: the query */
		nl = strchr(strchr(a, '\n') + 1, '\n') + 1;
		if (!query_ok(nl, (size_t)(strchr(nl, '\n') - nl)))
			abort();
	}
	/* signing into too small a buffer fails, never writes past it */
	(void)sigv4_sign(c, &r, buf, (size_t)(d[0] >> 1) * 32, &h);
	(void)sigv4_sign(c, &r, buf, sizeof(buf), &h);
	free(a);
	free(b);
	return 0;
}
