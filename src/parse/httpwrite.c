/*
 * httpwrite.c: every request head sluice writes: the head of an
 * intercepted request as the upstream gets it, the head of a plain HTTP
 * request for its origin, the pieces both are made of, and the hop-by-hop
 * rules both directions share.
 */
#include "autoconf.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "util/err.h"
#include "parse/httphead.h"
#include "parse/httphead_int.h"
#include "parse/httpwrite.h"

/* ---- hop-by-hop headers ------------------------------------------------- */

/* a[0..alen) equals the NUL-terminated b, ignoring ASCII case. */
static int
name_eq(const char *a, size_t alen, const char *b)
{
	return strlen(b) == alen && ascii_caseeq(a, b, alen);
}

int
http_hop_by_hop(const char *name, size_t len)
{
	if (ascii_prefix(name, len, "proxy-"))	/* Proxy-Connection too */
		return 1;
	/* By length: asked of every field of every head. */
	switch (len) {
	case 2:
		return ascii_eq(name, len, "te");
	case 7:
		return ascii_eq(name, len, "trailer") ||
		    ascii_eq(name, len, "upgrade");
	case 10:
		return ascii_eq(name, len, "connection") ||
		    ascii_eq(name, len, "keep-alive");
	default:
		return 0;
	}
}

int
http2_forbidden(const char *name, size_t len)
{
	/* Proxy-Connection, but not Proxy-Status: sluice's refusals carry it. */
	return ascii_eq(name, len, "connection") ||
	    ascii_eq(name, len, "keep-alive") ||
	    ascii_eq(name, len, "proxy-connection") ||
	    ascii_eq(name, len, "transfer-encoding") ||
	    ascii_eq(name, len, "upgrade") ||
	    ascii_eq(name, len, "te") ||
	    ascii_eq(name, len, "trailer");
}

int
http_name_lower(const char *p, size_t len, char *out)
{
	size_t k;

	if (len == 0)
		return -1;
	for (k = 0; k < len; k++) {
		if (!is_tchar((uint8_t)p[k]))
			return -1;
		out[k] = (char)ascii_lower((unsigned char)p[k]);
	}
	return 0;
}

int
http_trailer_dropped(const char *name, size_t len)
{
	/*
	 * No framing, routing, authentication or content handling in
	 * trailers (RFC 9110 6.5.1); nor what a recipient might merge into
	 * the head, unjudged: a credential, a cookie.
	 */
	return http2_forbidden(name, len) ||
	    ascii_eq(name, len, "content-length") ||
	    ascii_eq(name, len, "host") ||
	    ascii_eq(name, len, "authorization") ||
	    ascii_eq(name, len, "cookie") ||
	    ascii_eq(name, len, "set-cookie") ||
	    ascii_eq(name, len, "content-type") ||
	    ascii_eq(name, len, "content-encoding") ||
	    ascii_eq(name, len, "content-range") ||
	    ascii_eq(name, len, "expect") ||
	    ascii_eq(name, len, "max-forwards") ||
	    ascii_prefix(name, len, "proxy-");
}

long
http_trailer_fields(char *p, size_t len, struct http_header *f, size_t max)
{
	char *end = p + len, *eol, *colon, *v;
	size_t n = 0, k, vlen;

	for (; p < end && n < max; p = eol + 2) {
		if ((eol = memchr(p, '\r', (size_t)(end - p))) == NULL ||
		    eol == p)
			break;		/* the empty line: the end */
		if (end - eol < 2 || eol[1] != '\n' ||
		    (colon = memchr(p, ':', (size_t)(eol - p))) == NULL)
			return -1;
		/* A name a redaction left no token is not sendable either. */
		k = (size_t)(colon - p);
		if (http_name_lower(p, k, p) != 0 || http_trailer_dropped(p, k))
			continue;
		for (v = colon + 1; v < eol && (*v == ' ' || *v == '\t'); v++)
			;
		for (vlen = (size_t)(eol - v); vlen > 0 &&
		    (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'); vlen--)
			;
		f[n].name = p;
		f[n].name_len = k;
		f[n].value = v;
		f[n++].value_len = vlen;
	}
	return (long)n;
}

int
http_grpc_type(const char *v, size_t len)
{
	static const char g[] = "application/grpc";
	size_t n = sizeof(g) - 1;

	return len >= n && ascii_caseeq(v, g, n) &&
	    (len == n || v[n] == '+' || v[n] == ';');
}

/* v[0..len) as a comma-separated list contains the element name[0..nlen). */
static int
list_has(const char *v, size_t len, const char *name, size_t nlen)
{
	size_t i = 0, elen;
	const char *e;

	while (http_list_next(v, len, &i, &e, &elen))
		if (elen == nlen && nlen > 0 && ascii_caseeq(e, name, nlen))
			return 1;
	return 0;
}

size_t
http_conn_first(const struct http_header *hdrs, size_t n)
{
	size_t i, at, elen;
	const char *e;

	for (i = 0; i < n; i++) {
		if (!ascii_eq(hdrs[i].name, hdrs[i].name_len, "connection"))
			continue;
		/*
		 * "keep-alive" alone (most answers say it) names a field that
		 * is hop-by-hop anyway: nothing to look for there.
		 */
		for (at = 0; http_list_next(hdrs[i].value, hdrs[i].value_len,
		    &at, &e, &elen); )
			if (!ascii_eq(e, elen, "keep-alive"))
				return i;
	}
	return n;
}

int
http_conn_names(const struct http_header *hdrs, size_t n, const char *name,
    size_t len)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (ascii_eq(hdrs[i].name, hdrs[i].name_len, "connection") &&
		    list_has(hdrs[i].value, hdrs[i].value_len, name, len))
			return 1;
	return 0;
}

/* ---- the upstream request head ------------------------------------------ */

/* What the caller asks for, gathered so the filter takes one argument. */
struct fwd {
	const struct http_head	*h;
	const char *const	*drop;
	size_t			 ndrop;
	const struct http_add	*add;
	size_t			 nadd;
	int			 upgrade;	/* Upgrade kept, "Connection: upgrade" */
	size_t			 conn;		/* http_conn_first() */
};

/* Content-Length or Transfer-Encoding. */
static int
is_framing(const char *name, size_t len)
{
	return ascii_eq(name, len, "content-length") ||
	    ascii_eq(name, len, "transfer-encoding");
}

/* Whether header x of the request goes upstream as received (arg: fwd). */
static int
fwd_keeps(const void *arg, const struct http_header *x)
{
	const struct fwd *f = arg;
	size_t i;

	if (ascii_eq(x->name, x->name_len, "host"))
		return 0;
	/*
	 * The framing stays as received whatever a rule or Connection says:
	 * the body is relayed raw, and the upstream must frame it as we do.
	 */
	if (is_framing(x->name, x->name_len))
		return 1;
	for (i = 0; i < f->ndrop; i++)
		if (name_eq(x->name, x->name_len, f->drop[i]))
			return 0;
	for (i = 0; i < f->nadd; i++)
		if (name_eq(x->name, x->name_len, f->add[i].name))
			return 0;
	if (f->upgrade && ascii_eq(x->name, x->name_len, "upgrade"))
		return 1;
	return !http_hop_by_hop(x->name, x->name_len) &&
	    !http_conn_names(f->h->headers + f->conn, f->h->nheaders - f->conn,
	    x->name, x->name_len);
}

/* Every byte of s is a tchar (or, for a value, SP, HT, VCHAR, obs-text). */
static int
sendable(const char *s, int is_name)
{
	const unsigned char *p = (const unsigned char *)s;

	if (is_name && *p == '\0')
		return 0;
	for (; *p != '\0'; p++)
		if (is_name ? !is_tchar(*p) :
		    (*p != ' ' && *p != '\t' && (*p < 0x21 || *p == 0x7f)))
			return 0;
	return 1;
}

/* The request-target and host are visible ASCII without spaces. */
static int
visible(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	if (*p == '\0')
		return 0;
	for (; *p != '\0'; p++)
		if (*p < 0x21 || *p >= 0x7f)
			return 0;
	return 1;
}

/* Writes the Host line to o (NULL: only counts).  Returns its length. */
static size_t
host_line(char *o, const char *host, uint16_t port)
{
	char pbuf[8];
	size_t n, hlen = strlen(host);
	int v6 = strchr(host, ':') != NULL;

	pbuf[0] = '\0';
	if (port != 443)
		snprintf(pbuf, sizeof(pbuf), ":%u", (unsigned)port);
	n = 6 + (v6 ? 2 : 0) + hlen + strlen(pbuf) + 2;
	if (o != NULL) {
		o = put(o, "Host: ", 6);
		if (v6)
			o = put(o, "[", 1);
		o = put(o, host, hlen);
		if (v6)
			o = put(o, "]", 1);
		o = put(o, pbuf, strlen(pbuf));
		put(o, "\r\n", 2);
	}
	return n;
}

/*
 * The Connection line we add, or "" for none.  Never "close": the
 * upstream connection is sluice's, kept for the sandbox's next request
 * (on this client connection or another); a client's close is honoured
 * on the client's side.
 */
static const char *
conn_line(const struct fwd *f)
{
	return f->upgrade ? "Connection: upgrade\r\n" : "";
}

long
http_head_serialize_upstream(const struct http_head *h, const char *target,
    const char *host, uint16_t port, int keep_upgrade,
    const char *const *drop, size_t ndrop, const struct http_add *add,
    size_t nadd, char *out, size_t out_len)
{
	struct fwd f = { h, drop, ndrop, add, nadd, 0,
	    http_conn_first(h->headers, h->nheaders) };
	size_t i, need, tlen;
	const char *conn;
	char *o = out;

	if (!visible(target) || !visible(host) || strchr(host, '/') != NULL)
		return SL_ERR_INVALID;
	for (i = 0; i < nadd; i++) {
		const char *n = add[i].name;

		if (!sendable(n, 1) || !sendable(add[i].value, 0) ||
		    name_eq(n, strlen(n), "host") || is_framing(n, strlen(n)) ||
		    http_hop_by_hop(n, strlen(n)))
			return SL_ERR_INVALID;
	}
	/* An upgrade in HTTP/1.0 is ignored by the origin (RFC 9110 7.8). */
	f.upgrade = keep_upgrade && h->upgrade && h->http_minor == 1;
	conn = conn_line(&f);

	tlen = strlen(target);
	need = http_put_request_line(NULL, h->method, target, tlen, "HTTP/1.1") +
	    host_line(NULL, host, port) + strlen(conn) + 2 +
	    http_put_headers(NULL, h->headers, h->nheaders, fwd_keeps, &f);
	for (i = 0; i < nadd; i++)
		need += http_put_field(NULL, add[i].name, strlen(add[i].name),
		    add[i].value, strlen(add[i].value));
	if (need > out_len || need > (size_t)LONG_MAX)
		return SL_ERR_TOO_BIG;

	o += http_put_request_line(o, h->method, target, tlen, "HTTP/1.1");
	o += host_line(o, host, port);
	o += http_put_headers(o, h->headers, h->nheaders, fwd_keeps, &f);
	o = put(o, conn, strlen(conn));
	for (i = 0; i < nadd; i++)
		o += http_put_field(o, add[i].name, strlen(add[i].name),
		    add[i].value, strlen(add[i].value));
	o = put(o, "\r\n", 2);
	return (long)(o - out);
}

/* ---- the pieces of a head, and the head for an origin ------------------- */

size_t
http_put_field(char *o, const char *name, size_t nlen, const char *value,
    size_t vlen)
{
	if (o != NULL) {
		o = put(o, name, nlen);
		o = put(o, ": ", 2);
		o = put(o, value, vlen);
		put(o, "\r\n", 2);
	}
	return nlen + 2 + vlen + 2;
}

size_t
http_put_headers(char *o, const struct http_header *hdrs, size_t n,
    int (*keep)(const void *, const struct http_header *), const void *arg)
{
	size_t i, len = 0;

	for (i = 0; i < n; i++)
		if (keep(arg, &hdrs[i]))
			len += http_put_field(o == NULL ? NULL : o + len,
			    hdrs[i].name, hdrs[i].name_len, hdrs[i].value,
			    hdrs[i].value_len);
	return len;
}

size_t
http_put_request_line(char *o, const char *method, const char *target,
    size_t tlen, const char *version)
{
	size_t mlen = strlen(method);

	if (o != NULL) {
		o = put(o, method, mlen);
		o = put(o, " ", 1);
		o = put(o, target, tlen);
		o = put(o, " ", 1);
		o = put(o, version, 8);
		put(o, "\r\n", 2);
	}
	return mlen + 1 + tlen + 1 + 8 + 2;
}

/* Whether a header goes to the origin: all but the Proxy-* ones. */
static int
origin_keeps(const void *arg, const struct http_header *x)
{
	return !ascii_prefix(x->name, x->name_len, "proxy-");
}

long
http_head_serialize_origin(const struct http_head *h, char *out,
    size_t out_len)
{
	const char *target = h->absolute_form ? h->origin_target : h->target;
	size_t tlen = h->absolute_form ? strlen(target) : h->target_len;
	char version[] = "HTTP/1.1";
	size_t need;
	char *o = out;

	version[5] = (char)('0' + h->http_major % 10);
	version[7] = (char)('0' + h->http_minor % 10);
	need = http_put_request_line(NULL, h->method, target, tlen, version) +
	    http_put_headers(NULL, h->headers, h->nheaders, origin_keeps, NULL) +
	    2;
	if (need > out_len || need > (size_t)LONG_MAX)
		return SL_ERR_TOO_BIG;

	o += http_put_request_line(o, h->method, target, tlen, version);
	o += http_put_headers(o, h->headers, h->nheaders, origin_keeps, NULL);
	o = put(o, "\r\n", 2);
	return (long)(o - out);
}

size_t
http_chunk_head(size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t len = 1, i;

	while (len < 2 * sizeof(size_t) && (n >> (4 * len)) != 0)
		len++;
	for (i = 0; i < len; i++)
		out[i] = hex[(n >> (4 * (len - 1 - i))) & 15];
	out[len] = '\r';
	out[len + 1] = '\n';
	return len + 2;
}
