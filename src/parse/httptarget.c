/*
 * httptarget.c: a head's bytes and the fields derived from them: the arena
 * that holds the target (or reason phrase), names and values; a request's
 * target, authority and Host; and the header lines written back.
 */
#include "autoconf.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/names.h"
#include "parse/httphead.h"
#include "parse/httphead_int.h"

#define ARENA_MIN		512

/* ---- the arena ---------------------------------------------------------- */

/* Makes room for n more bytes; offsets stay valid, pointers may not. */
static int
arena_reserve(struct http_stream *s, size_t n)
{
	size_t cap;
	char *a;

	if (n > s->amax - s->alen)
		return refuse(s, "header too large");
	if (n <= s->acap - s->alen)
		return 0;
	cap = s->acap > 0 ? s->acap : ARENA_MIN;
	while (cap < s->alen + n && cap < s->amax)
		cap = cap > s->amax / 2 ? s->amax : cap * 2;
	if ((a = realloc(s->arena, cap)) == NULL)
		return refuse(s, "out of memory");
	s->arena = a;
	s->acap = cap;
	return 0;
}

/* Appends p[0..n), which must not point into the arena. */
int
http_arena_put(struct http_stream *s, const char *p, size_t n)
{
	if (arena_reserve(s, n) != 0)
		return -1;
	if (n > 0)
		memcpy(s->arena + s->alen, p, n);
	s->alen += n;
	return 0;
}

/* Appends a copy of the arena's own bytes [off, off + n). */
static int
arena_copy(struct http_stream *s, size_t off, size_t n)
{
	if (arena_reserve(s, n) != 0)	/* may move the arena */
		return -1;
	memmove(s->arena + s->alen, s->arena + off, n);
	s->alen += n;
	return 0;
}

/* The index of the header called name (lower case), or -1. */
long
http_hoff_find(const struct http_stream *s, const char *name)
{
	size_t i;

	for (i = 0; i < s->nhoff; i++)
		if (ascii_eq(s->arena + s->hoff[i].name, s->hoff[i].name_len, name))
			return (long)i;
	return -1;
}

/* ---- deriving the head's fields ----------------------------------------- */

/*
 * Parses a port: 1 to 5 digits, 1 to 65535.  Returns 0 and writes *port,
 * or SL_ERR_INVALID.
 */
static int
parse_port(const char *in, size_t len, uint16_t *port)
{
	unsigned long v = 0;
	size_t i;

	if (len == 0 || len > 5)
		return SL_ERR_INVALID;
	for (i = 0; i < len; i++) {
		if (in[i] < '0' || in[i] > '9')
			return SL_ERR_INVALID;
		v = v * 10 + (unsigned long)(in[i] - '0');
	}
	if (v == 0 || v > 65535)
		return SL_ERR_INVALID;
	*port = (uint16_t)v;
	return 0;
}

/*
 * Writes the canonical text of an IP literal of family af in[0..len) to
 * out (HTTP_HOST_BUFSZ bytes).  Returns 0 or SL_ERR_INVALID.
 */
static int
ip_literal(int af, const char *in, size_t len, char *out)
{
	char buf[INET6_ADDRSTRLEN];
	unsigned char bin[sizeof(struct in6_addr)];

	if (len >= sizeof(buf) || memchr(in, '\0', len) != NULL)
		return SL_ERR_INVALID;
	memcpy(buf, in, len);
	buf[len] = '\0';
	if (inet_pton(af, buf, bin) != 1 ||
	    inet_ntop(af, bin, buf, sizeof(buf)) == NULL)
		return SL_ERR_INVALID;
	memcpy(out, buf, strlen(buf) + 1);
	return 0;
}

/*
 * Parses "host[:port]" as in a Host header, a CONNECT target or an
 * absolute-form authority.  host is a DNS name (normalised with
 * name_normalize), a dotted-quad IPv4 address, or an IPv6 address in
 * brackets; the port, if written, is 1 to 65535 and is required when
 * need_port.  Writes host (HTTP_HOST_BUFSZ bytes, canonical form, no
 * brackets), *port (0 when not written) and *is_ip, only on success.
 * Returns 0 or SL_ERR_INVALID.
 */
static int
parse_hostport(const char *in, size_t len, int need_port, char *host,
    uint16_t *port, int *is_ip)
{
	char out[HTTP_HOST_BUFSZ];
	const char *end = in + len, *hend, *rest;
	uint16_t p = 0;
	int ip = 1;

	if (len > 0 && in[0] == '[') {
		if ((hend = memchr(in, ']', len)) == NULL ||
		    ip_literal(AF_INET6, in + 1, (size_t)(hend - in - 1), out) != 0)
			return SL_ERR_INVALID;
		rest = hend + 1;
	} else {
		if ((hend = memchr(in, ':', len)) == NULL)
			hend = end;
		if (hend == in)
			return SL_ERR_INVALID;
		if (ip_literal(AF_INET, in, (size_t)(hend - in), out) != 0) {
			ip = 0;
			if (name_normalize(in, (size_t)(hend - in), out) != 0)
				return SL_ERR_INVALID;
		}
		rest = hend;
	}
	if (rest != end && (*rest != ':' ||
	    parse_port(rest + 1, (size_t)(end - rest - 1), &p) != 0))
		return SL_ERR_INVALID;
	if (need_port && p == 0)
		return SL_ERR_INVALID;
	memcpy(host, out, strlen(out) + 1);
	*port = p;
	*is_ip = ip;
	return 0;
}

/*
 * An absolute-form target "http://authority[/path][?query]": fills the
 * authority and appends the origin-form target to the arena.  Returns
 * NULL or why it is refused.
 */
static const char *
parse_absolute(struct http_reqs *s, struct http_head *h, size_t skip)
{
	struct http_stream *hs = &s->hs;
	const char *t = hs->arena, *auth = t + skip, *end = t + hs->line_len;
	const char *aend = auth;
	size_t off;

	while (aend < end && *aend != '/' && *aend != '?')
		aend++;
	if (memchr(auth, '@', (size_t)(aend - auth)) != NULL)
		return "userinfo in target";
	if (parse_hostport(auth, (size_t)(aend - auth), 0, h->authority,
	    &h->authority_port, &h->authority_is_ip) != 0)
		return "bad authority";
	if (h->authority_port == 0)
		h->authority_port = 80;
	h->absolute_form = h->has_authority = 1;

	off = (size_t)(aend - t);	/* the arena may move from here on */
	s->origin_off = hs->alen;
	if ((aend == end || *aend == '?') && http_arena_put(hs, "/", 1) != 0)
		return hs->why;
	if (arena_copy(hs, off, hs->line_len - off) != 0 ||
	    http_arena_put(hs, "", 1) != 0)
		return hs->why;
	return NULL;
}

/* The request-target: CONNECT authority, origin, absolute or asterisk form. */
const char *
http_parse_target(struct http_reqs *s, struct http_head *h)
{
	const char *t = s->hs.arena;
	size_t len = s->hs.line_len;

	if (h->is_connect) {
		if (parse_hostport(t, len, 1, h->authority, &h->authority_port,
		    &h->authority_is_ip) != 0)
			return "bad connect target";
		h->has_authority = 1;
		return NULL;
	}
	if (t[0] == '/')
		return NULL;
	if (len == 1 && t[0] == '*')
		return strcmp(h->method, "OPTIONS") == 0 ? NULL : "bad target";
	if (ascii_prefix(t, len, "http://"))
		return parse_absolute(s, h, 7);
	if (ascii_prefix(t, len, "https://"))
		return "absolute-form https";
	return memchr(t, ':', len) != NULL ? "unsupported scheme" : "bad target";
}

/* The Host header, if there is one (a second was refused already). */
const char *
http_parse_host(struct http_reqs *s, struct http_head *h)
{
	const struct hoff *o;
	long i;

	if ((i = http_hoff_find(&s->hs, "host")) < 0)
		return NULL;
	o = &s->hs.hoff[i];
	if (parse_hostport(s->hs.arena + o->value, o->value_len, 0, h->host,
	    &h->host_port, &h->host_is_ip) != 0)
		return "bad host";
	h->has_host = 1;
	return NULL;
}

void
http_fill_headers(struct http_stream *s)
{
	size_t i;

	for (i = 0; i < s->nhoff; i++) {
		s->hdrs[i].name = s->arena + s->hoff[i].name;
		s->hdrs[i].name_len = s->hoff[i].name_len;
		s->hdrs[i].value = s->arena + s->hoff[i].value;
		s->hdrs[i].value_len = s->hoff[i].value_len;
	}
}

/* ---- reading heads ------------------------------------------------------ */

const struct http_header *
http_head_get(const struct http_head *h, const char *name)
{
	size_t i, len = strlen(name);

	for (i = 0; i < h->nheaders; i++)
		if (h->headers[i].name_len == len &&
		    ascii_caseeq(h->headers[i].name, name, len))
			return &h->headers[i];
	return NULL;
}
