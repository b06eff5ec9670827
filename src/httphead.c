/* httphead.c: HTTP/1.x requests from a client stream, parsed strictly. */
#include "autoconf.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <llhttp.h>

#include "err.h"
#include "httphead.h"
#include "names.h"

/*
 * How it fits together.  Every byte of a request passes two checks.  Our
 * own guards (the head guard for the request line and header lines, the
 * body guard for Content-Length and chunked bodies) run first over the
 * bytes and stop at the first byte they refuse or at the end of the head
 * or body; llhttp is then given exactly the bytes the guards accepted and
 * fills the arena through its callbacks.  The guards refuse what llhttp,
 * in whichever mode it was compiled (its loose mode accepts bare LF line
 * ends, obs-fold, "Name : value", HTTP/0.9 and 2.0 request lines, and any
 * two bytes after chunk data), would let through; llhttp decides the
 * framing.  Where both say where a head or a message ends, they must say
 * the same, or the request is refused.
 */

#define CHUNK_SIZE_DIGITS	16	/* hex digits: fits a uint64_t */
#define CHUNK_EXT_MAX		1024	/* bytes of chunk extensions per chunk */
#define ARENA_MIN		512

/* The head guard's position in a head. */
enum gstate {
	G_START,	/* before the request line (empty lines allowed) */
	G_LEAD_LF,	/* CR of a leading empty line seen */
	G_METHOD,
	G_TARGET,
	G_VERSION,
	G_RL_LF,	/* CR after the version seen */
	G_LINE,		/* start of a header line or of the final empty line */
	G_NAME,
	G_VALUE,
	G_VALUE_LF,
	G_END_LF,
	G_DONE,		/* the head is complete */
};

struct guard {
	enum gstate	 st;
	size_t		 limit;		/* header_limit */
	size_t		 total;		/* bytes so far */
	size_t		 lead;		/* of which leading empty lines */
	size_t		 tok;		/* bytes in the current token */
	size_t		 target_len;
	unsigned	 nlines;	/* header lines */
	char		 method[24];	/* NUL-terminated once complete */
	char		 version[8];
};

/* The body guard's position in a body. */
enum bstate {
	B_DONE,		/* no body, or the body is complete */
	B_LENGTH,	/* Content-Length bytes left */
	B_SIZE,		/* chunk-size digits */
	B_EXT,		/* chunk extensions */
	B_SIZE_LF,
	B_DATA,		/* chunk data bytes left */
	B_DATA_CR,
	B_DATA_LF,
	B_TRAILER,	/* after the last chunk: only the empty line */
	B_END_LF,
};

struct bodyguard {
	enum bstate	 st;
	uint64_t	 left;
	unsigned	 digits;
	size_t		 ext;
};

/* Where a stream is between events. */
enum phase {
	P_HEAD,		/* reading a head */
	P_BODY,		/* HEAD reported; reading the body up to END */
	P_UPGRADE,	/* END reported for CONNECT/upgrade; TUNNEL is next */
	P_TUNNEL,
	P_CLOSED,	/* END of a request that is not keep-alive */
	P_DEAD,		/* INVALID reported */
};

/* A header while it is received: offsets into the arena. */
struct hoff {
	size_t	name, name_len, value, value_len;
};

struct http_reqs {
	llhttp_t	 parser;
	enum phase	 phase;
	int		 fresh;		/* the next byte begins a request */
	const char	*why;		/* set by a callback that refuses */
	const char	*dead;		/* the reason once P_DEAD */
	struct guard	 g;
	struct bodyguard bg;

	/* The current head's bytes: target, names and values, NUL-terminated. */
	char		*arena;
	size_t		 alen, acap, amax;
	size_t		 target_len;	/* the target is at offset 0 */
	size_t		 origin_off;
	struct hoff	 hoff[HTTP_MAX_HEADERS];
	size_t		 nhoff;
	int		 in_field;
	unsigned	 n_cl, n_te, n_host;

	struct http_header hdrs[HTTP_MAX_HEADERS];
	struct http_head head;
};

/* ---- character classes and small helpers ------------------------------ */

static int
is_tchar(uint8_t c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9'))
		return 1;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Bytes allowed in a field value: SP, HT, VCHAR and obs-text. */
static int
is_vbyte(uint8_t c)
{
	return c == ' ' || c == '\t' || (c >= 0x21 && c != 0x7f);
}

static int
hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int
ascii_lower(int c)
{
	return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

/* s[0..len) equals the lower-case word, ignoring ASCII case. */
static int
ascii_eq(const char *s, size_t len, const char *word)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (word[i] == '\0' || ascii_lower((unsigned char)s[i]) != word[i])
			return 0;
	return word[len] == '\0';
}

/* s[0..len) starts with the lower-case prefix, ignoring ASCII case. */
static int
ascii_prefix(const char *s, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return len >= n && ascii_eq(s, n, prefix);
}

/* ---- the head guard ----------------------------------------------------- */

static void
guard_init(struct guard *g, size_t limit)
{
	memset(g, 0, sizeof(*g));
	g->st = G_START;
	g->limit = limit;
}

/* The version seen before the CR of the request line. */
static const char *
guard_version(const struct guard *g)
{
	const char *v = g->version;

	if (g->tok != sizeof(g->version) || memcmp(v, "HTTP/", 5) != 0 ||
	    v[6] != '.' || hexval(v[5]) < 0 || hexval(v[5]) > 9 ||
	    hexval(v[7]) < 0 || hexval(v[7]) > 9)
		return "malformed request line";
	if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
		return "unsupported http version";
	return NULL;
}

/* One byte of the request line (or of the empty lines before it). */
static const char *
guard_reqline(struct guard *g, uint8_t c)
{
	switch (g->st) {
	case G_START:
		if (c == '\r') {
			g->lead++;
			g->st = G_LEAD_LF;
			return NULL;
		}
		g->st = G_METHOD;
		g->tok = 0;
		/* FALLTHROUGH */
	case G_METHOD:
		if (c == ' ' && g->tok > 0) {
			g->method[g->tok] = '\0';
			g->st = G_TARGET;
			g->tok = 0;
			return NULL;
		}
		if (!is_tchar(c))
			return "malformed request line";
		if (g->tok + 1 >= sizeof(g->method))
			return "unknown method";
		g->method[g->tok++] = (char)c;
		return NULL;
	case G_LEAD_LF:
		if (c != '\n')
			return "bare CR";
		g->lead++;
		g->st = G_START;
		return NULL;
	case G_TARGET:
		if (c == ' ' && g->tok > 0) {
			g->target_len = g->tok;
			g->st = G_VERSION;
			g->tok = 0;
			return NULL;
		}
		if (c == '#')
			return "fragment in target";
		if (c < 0x21 || c >= 0x7f)
			return "malformed request line";
		if (++g->tok > HTTP_MAX_TARGET)
			return "target too long";
		return NULL;
	case G_VERSION:
		if (c == '\r') {
			g->st = G_RL_LF;
			return guard_version(g);
		}
		if (g->tok == sizeof(g->version))
			return "malformed request line";
		g->version[g->tok++] = (char)c;
		return NULL;
	case G_RL_LF:
		if (c != '\n')
			return "bare CR";
		g->st = G_LINE;
		return NULL;
	default:
		return "malformed request";
	}
}

/* One byte of the header lines. */
static const char *
guard_fields(struct guard *g, uint8_t c)
{
	switch (g->st) {
	case G_LINE:
		if (c == '\r') {
			g->st = G_END_LF;
			return NULL;
		}
		if (c == ' ' || c == '\t')
			return "obs-fold";
		if (c == ':')
			return "empty header name";
		if (!is_tchar(c))
			return "invalid header name";
		if (++g->nlines > HTTP_MAX_HEADERS)
			return "too many headers";
		g->st = G_NAME;
		return NULL;
	case G_NAME:
		if (c == ':') {
			g->st = G_VALUE;
			return NULL;
		}
		if (c == ' ' || c == '\t')
			return "whitespace before colon";
		if (c == '\r')
			return "header line without colon";
		if (!is_tchar(c))
			return "invalid header name";
		return NULL;
	case G_VALUE:
		if (c == '\r') {
			g->st = G_VALUE_LF;
			return NULL;
		}
		if (!is_vbyte(c))
			return "invalid header value";
		return NULL;
	case G_VALUE_LF:
	case G_END_LF:
		if (c != '\n')
			return "bare CR";
		g->st = g->st == G_VALUE_LF ? G_LINE : G_DONE;
		return NULL;
	default:
		return "malformed request";
	}
}

/* One byte of a head: NULL, or why it is refused. */
static const char *
guard_byte(struct guard *g, uint8_t c)
{
	int want_lf = g->st == G_LEAD_LF || g->st == G_RL_LF ||
	    g->st == G_VALUE_LF || g->st == G_END_LF;

	if (++g->total > g->limit)
		return "header too large";
	if (c == '\0')
		return "NUL in head";
	if (c == '\n' && !want_lf)
		return "bare LF";
	if (g->st <= G_RL_LF)
		return guard_reqline(g, c);
	return guard_fields(g, c);
}

/*
 * Runs the head guard over buf until the head is complete (g->st ==
 * G_DONE) or a byte is refused (*why set).  Returns the number of bytes
 * that passed.
 */
static size_t
guard_scan(struct guard *g, const uint8_t *buf, size_t len, const char **why)
{
	size_t i;

	*why = NULL;
	for (i = 0; i < len && g->st != G_DONE; i++)
		if ((*why = guard_byte(g, buf[i])) != NULL)
			break;
	return i;
}

/* ---- the body guard ----------------------------------------------------- */

/* One byte of chunked framing (not of chunk data): NULL, or why refused. */
static const char *
chunk_byte(struct bodyguard *b, uint8_t c)
{
	int v;

	if (c == '\n' && b->st != B_SIZE_LF && b->st != B_DATA_LF &&
	    b->st != B_END_LF)
		return "bare LF";
	switch (b->st) {
	case B_SIZE:
		if (b->digits > 0 && (c == '\r' || c == ';')) {
			b->st = c == '\r' ? B_SIZE_LF : B_EXT;
			b->ext = 0;
			return NULL;
		}
		if ((v = hexval(c)) < 0 || b->digits == CHUNK_SIZE_DIGITS)
			return "invalid chunk size";
		b->left = b->left << 4 | (uint64_t)v;
		b->digits++;
		return NULL;
	case B_EXT:
		if (c == '\r') {
			b->st = B_SIZE_LF;
			return NULL;
		}
		if (!is_vbyte(c) || ++b->ext > CHUNK_EXT_MAX)
			return "invalid chunk extension";
		return NULL;
	case B_DATA_CR:
		if (c != '\r')
			return "invalid chunk framing";
		b->st = B_DATA_LF;
		return NULL;
	case B_TRAILER:
		if (c != '\r')
			return "trailer fields";
		b->st = B_END_LF;
		return NULL;
	case B_SIZE_LF:
	case B_DATA_LF:
	case B_END_LF:
		if (c != '\n')
			return "bare CR";
		if (b->st == B_END_LF)
			b->st = B_DONE;
		else if (b->st == B_DATA_LF)
			b->st = B_SIZE;
		else
			b->st = b->left > 0 ? B_DATA : B_TRAILER;
		b->digits = 0;
		if (b->st == B_SIZE)
			b->left = 0;
		return NULL;
	default:
		return "malformed request";
	}
}

/*
 * Runs the body guard over buf until the body is complete (b->st ==
 * B_DONE) or a byte is refused (*why set).  Returns the number of bytes
 * that passed.
 */
static size_t
body_scan(struct bodyguard *b, const uint8_t *buf, size_t len, const char **why)
{
	size_t i = 0, n;

	*why = NULL;
	while (i < len && b->st != B_DONE) {
		if (b->st == B_LENGTH || b->st == B_DATA) {
			n = (uint64_t)(len - i) < b->left ? len - i : (size_t)b->left;
			i += n;
			b->left -= n;
			if (b->left == 0)
				b->st = b->st == B_LENGTH ? B_DONE : B_DATA_CR;
			continue;
		}
		if ((*why = chunk_byte(b, buf[i])) != NULL)
			break;
		i++;
	}
	return i;
}

/* ---- the arena and llhttp's callbacks ----------------------------------- */

/* Records why a callback refuses (the first reason wins); returns -1. */
static int
refuse(struct http_reqs *s, const char *why)
{
	if (s->why == NULL)
		s->why = why;
	return -1;
}

/* Makes room for n more bytes; offsets stay valid, pointers may not. */
static int
arena_reserve(struct http_reqs *s, size_t n)
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
static int
arena_put(struct http_reqs *s, const char *p, size_t n)
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
arena_copy(struct http_reqs *s, size_t off, size_t n)
{
	if (arena_reserve(s, n) != 0)	/* may move the arena */
		return -1;
	memmove(s->arena + s->alen, s->arena + off, n);
	s->alen += n;
	return 0;
}

static int
on_url(llhttp_t *p, const char *at, size_t len)
{
	struct http_reqs *s = p->data;

	return s->phase == P_HEAD ? arena_put(s, at, len) : 0;
}

static int
on_url_complete(llhttp_t *p)
{
	struct http_reqs *s = p->data;

	if (s->phase != P_HEAD)
		return 0;
	s->target_len = s->alen;
	return arena_put(s, "", 1);
}

static int
on_header_field(llhttp_t *p, const char *at, size_t len)
{
	struct http_reqs *s = p->data;

	if (s->phase != P_HEAD)
		return 0;
	if (!s->in_field) {
		if (s->nhoff == HTTP_MAX_HEADERS)
			return refuse(s, "too many headers");
		s->hoff[s->nhoff].name = s->alen;
		s->in_field = 1;
	}
	return arena_put(s, at, len);
}

/*
 * Counts the headers that frame the message or name its host, and
 * refuses a second one or Content-Length with Transfer-Encoding as soon as
 * the name is known (before llhttp's own checks, so the reason is ours).
 */
static int
count_special(struct http_reqs *s, const char *name, size_t len)
{
	if (ascii_eq(name, len, "content-length")) {
		if (s->n_cl++ > 0)
			return refuse(s, "repeated content-length");
	} else if (ascii_eq(name, len, "transfer-encoding")) {
		if (s->n_te++ > 0)
			return refuse(s, "repeated transfer-encoding");
	} else if (ascii_eq(name, len, "host")) {
		if (s->n_host++ > 0)
			return refuse(s, "repeated host");
	}
	if (s->n_cl > 0 && s->n_te > 0)
		return refuse(s, "content-length with transfer-encoding");
	return 0;
}

static int
on_header_field_complete(llhttp_t *p)
{
	struct http_reqs *s = p->data;
	struct hoff *h;

	if (s->phase != P_HEAD)
		return 0;
	if (!s->in_field)
		return refuse(s, "empty header name");
	h = &s->hoff[s->nhoff];
	h->name_len = s->alen - h->name;
	if (arena_put(s, "", 1) != 0)
		return -1;
	h->value = s->alen;
	s->in_field = 0;
	return count_special(s, s->arena + h->name, h->name_len);
}

static int
on_header_value(llhttp_t *p, const char *at, size_t len)
{
	struct http_reqs *s = p->data;

	return s->phase == P_HEAD ? arena_put(s, at, len) : 0;
}

static int
on_header_value_complete(llhttp_t *p)
{
	struct http_reqs *s = p->data;
	struct hoff *h;
	const char *v;

	if (s->phase != P_HEAD)
		return 0;
	h = &s->hoff[s->nhoff];
	if (arena_put(s, "", 1) != 0)
		return -1;
	v = s->arena;
	h->value_len = s->alen - 1 - h->value;
	while (h->value_len > 0 && (v[h->value] == ' ' || v[h->value] == '\t')) {
		h->value++;
		h->value_len--;
	}
	while (h->value_len > 0 && (v[h->value + h->value_len - 1] == ' ' ||
	    v[h->value + h->value_len - 1] == '\t'))
		h->value_len--;
	s->arena[h->value + h->value_len] = '\0';
	s->nhoff++;
	return 0;
}

static int	on_headers_complete(llhttp_t *);

static int
on_message_complete(llhttp_t *p)
{
	return HPE_PAUSED;
}

static const llhttp_settings_t reqs_settings = {
	.on_url = on_url,
	.on_url_complete = on_url_complete,
	.on_header_field = on_header_field,
	.on_header_field_complete = on_header_field_complete,
	.on_header_value = on_header_value,
	.on_header_value_complete = on_header_value_complete,
	.on_headers_complete = on_headers_complete,
	.on_message_complete = on_message_complete,
};

/* ---- deriving the head's fields ----------------------------------------- */

/* The index of the header called name (lower case), or -1. */
static long
hoff_find(const struct http_reqs *s, const char *name)
{
	size_t i;

	for (i = 0; i < s->nhoff; i++)
		if (ascii_eq(s->arena + s->hoff[i].name, s->hoff[i].name_len, name))
			return (long)i;
	return -1;
}

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
	const char *t = s->arena, *auth = t + skip, *end = t + s->target_len;
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
	s->origin_off = s->alen;
	if ((aend == end || *aend == '?') && arena_put(s, "/", 1) != 0)
		return s->why;
	if (arena_copy(s, off, s->target_len - off) != 0 ||
	    arena_put(s, "", 1) != 0)
		return s->why;
	return NULL;
}

/* The request-target: CONNECT authority, origin, absolute or asterisk form. */
static const char *
parse_target(struct http_reqs *s, struct http_head *h)
{
	const char *t = s->arena;
	size_t len = s->target_len;

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
static const char *
parse_host(struct http_reqs *s, struct http_head *h)
{
	const struct hoff *o;
	long i;

	if ((i = hoff_find(s, "host")) < 0)
		return NULL;
	o = &s->hoff[i];
	if (parse_hostport(s->arena + o->value, o->value_len, 0, h->host,
	    &h->host_port, &h->host_is_ip) != 0)
		return "bad host";
	h->has_host = 1;
	return NULL;
}

/*
 * The next element of a comma-separated list v[0..len) from *i on, with
 * optional whitespace around it trimmed.  Returns 0 at the end of the
 * list, else 1 and the element (possibly empty) in *e, *elen.
 */
static int
list_next(const char *v, size_t len, size_t *i, const char **e, size_t *elen)
{
	size_t start, end;

	if (*i > len)
		return 0;
	while (*i < len && (v[*i] == ' ' || v[*i] == '\t'))
		(*i)++;
	start = end = *i;
	while (*i < len && v[*i] != ',') {
		(*i)++;
		if (v[*i - 1] != ' ' && v[*i - 1] != '\t')
			end = *i;
	}
	(*i)++;		/* past the comma, or past the end */
	*e = v + start;
	*elen = end - start;
	return 1;
}

/* Every byte of e[0..len) is a tchar, and there is at least one. */
static int
is_token(const char *e, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (!is_tchar((uint8_t)e[i]))
			return 0;
	return len > 0;
}

/*
 * A Transfer-Encoding value: a comma-separated list of transfer-coding
 * tokens (no parameters, no empty elements) whose last element, and only
 * that one, is chunked.
 */
static int
te_is_chunked(const char *v, size_t len)
{
	size_t i = 0, elen, nchunked = 0;
	const char *e;
	int last = 0;

	while (list_next(v, len, &i, &e, &elen)) {
		if (!is_token(e, elen))
			return 0;
		last = ascii_eq(e, elen, "chunked");
		nchunked += (size_t)last;
	}
	return last && nchunked == 1;
}

/*
 * An upgrade as the origin will see it: an Upgrade header and the token
 * "upgrade" in a Connection header.  llhttp also takes Proxy-Connection
 * for Connection, and the origin never gets that one: where llhttp's idea
 * differs from ours, the request is ambiguous.
 */
static const char *
check_upgrade(struct http_reqs *s, struct http_head *h)
{
	const struct hoff *o;
	const char *e;
	size_t i, j, elen;
	int conn = 0;

	if (h->is_connect)
		return NULL;
	for (i = 0; i < s->nhoff; i++) {
		o = &s->hoff[i];
		if (!ascii_eq(s->arena + o->name, o->name_len, "connection"))
			continue;
		j = 0;
		while (list_next(s->arena + o->value, o->value_len, &j, &e, &elen))
			conn |= ascii_eq(e, elen, "upgrade");
	}
	h->upgrade = conn && hoff_find(s, "upgrade") >= 0;
	if (h->upgrade != (llhttp_get_upgrade(&s->parser) != 0))
		return "ambiguous upgrade";
	return NULL;
}

/* Content-Length: 1 to 19 digits.  Returns 0 and writes *n, or -1. */
static int
parse_content_length(const char *v, size_t len, uint64_t *n)
{
	uint64_t x = 0;
	size_t i;

	if (len == 0 || len > 19)
		return -1;
	for (i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	*n = x;
	return 0;
}

/*
 * How the body is framed, by our own reading of the headers; llhttp must
 * agree.  Sets the body guard.
 */
static const char *
check_framing(struct http_reqs *s, struct http_head *h)
{
	const struct hoff *o;
	long i;

	if ((i = hoff_find(s, "content-length")) >= 0) {
		o = &s->hoff[i];
		if (parse_content_length(s->arena + o->value, o->value_len,
		    &h->content_length) != 0)
			return "invalid content-length";
	}
	if ((i = hoff_find(s, "transfer-encoding")) >= 0) {
		o = &s->hoff[i];
		if (h->http_minor == 0)
			return "transfer-encoding in http/1.0";
		if (!te_is_chunked(s->arena + o->value, o->value_len))
			return "bad transfer-encoding";
		h->chunked = 1;
	}
	if (h->is_connect && (h->chunked || h->content_length > 0))
		return "body on connect";
	if (h->chunked != ((s->parser.flags & F_CHUNKED) != 0) ||
	    (!h->chunked && h->content_length != s->parser.content_length))
		return "malformed request";

	memset(&s->bg, 0, sizeof(s->bg));
	if (h->chunked)
		s->bg.st = B_SIZE;
	else if (h->content_length > 0) {
		s->bg.st = B_LENGTH;
		s->bg.left = h->content_length;
	} else
		s->bg.st = B_DONE;
	return NULL;
}

/* The request line, checked against what the head guard saw. */
static const char *
check_request_line(struct http_reqs *s, struct http_head *h)
{
	llhttp_t *p = &s->parser;
	const char *m = llhttp_method_name((llhttp_method_t)llhttp_get_method(p));

	if (llhttp_get_http_major(p) != 1 || llhttp_get_http_minor(p) > 1)
		return "unsupported http version";
	if (m == NULL || strcmp(m, s->g.method) != 0)
		return "unknown method";
	if (s->target_len != s->g.target_len || s->target_len == 0 ||
	    s->nhoff != s->g.nlines || s->g.st != G_DONE)
		return "malformed request";
	memcpy(h->method, s->g.method, sizeof(h->method));
	h->http_major = 1;
	h->http_minor = llhttp_get_http_minor(p);
	h->head_len = s->g.total - s->g.lead;
	h->is_connect = llhttp_get_method(p) == HTTP_CONNECT;
	return NULL;
}

/* Points the head's strings into the arena, which no longer moves. */
static void
fill_pointers(struct http_reqs *s, struct http_head *h)
{
	size_t i;

	h->target = s->arena;
	h->target_len = s->target_len;
	h->origin_target = h->absolute_form ? s->arena + s->origin_off : NULL;
	for (i = 0; i < s->nhoff; i++) {
		s->hdrs[i].name = s->arena + s->hoff[i].name;
		s->hdrs[i].name_len = s->hoff[i].name_len;
		s->hdrs[i].value = s->arena + s->hoff[i].value;
		s->hdrs[i].value_len = s->hoff[i].value_len;
	}
	h->headers = s->hdrs;
	h->nheaders = s->nhoff;
}

/* The head is complete: derive its fields, or refuse it; then pause. */
static int
on_headers_complete(llhttp_t *p)
{
	struct http_reqs *s = p->data;
	struct http_head *h = &s->head;
	const char *why;

	if (s->phase != P_HEAD)
		return refuse(s, "malformed request");
	if ((why = check_request_line(s, h)) != NULL ||
	    (why = parse_target(s, h)) != NULL ||
	    (why = parse_host(s, h)) != NULL ||
	    (why = check_framing(s, h)) != NULL ||
	    (why = check_upgrade(s, h)) != NULL)
		return refuse(s, why);
	fill_pointers(s, h);
	h->keep_alive = llhttp_should_keep_alive(p);
	return HPE_PAUSED;
}

/* ---- the stream ---------------------------------------------------------- */

struct http_reqs *
http_reqs_new(size_t header_limit)
{
	struct http_reqs *s;

	if (header_limit > SIZE_MAX / 4)
		return NULL;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	llhttp_init(&s->parser, HTTP_REQUEST, &reqs_settings);
	s->parser.data = s;
	s->amax = 2 * header_limit + 16;
	s->g.limit = header_limit;
	s->phase = P_HEAD;
	s->fresh = 1;
	return s;
}

void
http_reqs_free(struct http_reqs *s)
{
	if (s == NULL)
		return;
	free(s->arena);
	free(s);
}

/* Forgets the previous request: the next byte begins a new one. */
static void
start_request(struct http_reqs *s)
{
	guard_init(&s->g, s->g.limit);
	memset(&s->bg, 0, sizeof(s->bg));
	memset(&s->head, 0, sizeof(s->head));
	s->alen = 0;
	s->target_len = s->origin_off = 0;
	s->nhoff = 0;
	s->in_field = 0;
	s->n_cl = s->n_te = s->n_host = 0;
	s->why = NULL;
	s->fresh = 0;
}

/* The phrase for an llhttp error (when no callback of ours refused). */
static const char *
llhttp_reason(llhttp_errno_t e)
{
	switch (e) {
	case HPE_UNEXPECTED_CONTENT_LENGTH:
		return "content-length with transfer-encoding";
	case HPE_INVALID_CONTENT_LENGTH:
		return "invalid content-length";
	case HPE_INVALID_TRANSFER_ENCODING:
		return "bad transfer-encoding";
	case HPE_INVALID_CHUNK_SIZE:
		return "invalid chunk size";
	case HPE_STRICT:	/* what the guards leave of it: chunk extensions */
		return "invalid chunk extension";
	case HPE_INVALID_CONSTANT:	/* "Expected HTTP/" and the like */
		return "malformed request line";
	case HPE_LF_EXPECTED:
		return "bare CR";
	case HPE_CR_EXPECTED:
		return "bare LF";
	case HPE_UNEXPECTED_SPACE:
		return "obs-fold";
	case HPE_INVALID_HEADER_TOKEN:
		return "invalid header";
	case HPE_INVALID_METHOD:
		return "unknown method";
	case HPE_INVALID_URL:
		return "invalid request target";
	case HPE_INVALID_VERSION:
		return "unsupported http version";
	case HPE_CLOSED_CONNECTION:
		return "request after connection close";
	default:
		return "malformed request";
	}
}

static enum http_ev
die(struct http_reqs *s, const char *why)
{
	s->phase = P_DEAD;
	s->dead = why != NULL ? why : "malformed request";
	return HTTP_EV_INVALID;
}

/*
 * Gives llhttp exactly buf[0..n), resuming it first if it paused.  *done
 * is where it stopped (n unless it paused).
 */
static llhttp_errno_t
run_parser(struct http_reqs *s, const uint8_t *buf, size_t n, size_t *done)
{
	static const char nothing[1];
	const char *p = n > 0 ? (const char *)buf : nothing;
	const char *pos;
	llhttp_errno_t e;

	if (llhttp_get_errno(&s->parser) == HPE_PAUSED)
		llhttp_resume(&s->parser);
	e = llhttp_execute(&s->parser, p, n);
	*done = n;
	if (e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) {
		pos = llhttp_get_error_pos(&s->parser);
		if (pos < p || pos > p + n)
			return HPE_INTERNAL;
		*done = (size_t)(pos - p);
	}
	return e;
}

static enum http_ev
feed_head(struct http_reqs *s, const uint8_t *buf, size_t len, size_t *used)
{
	const char *gwhy;
	llhttp_errno_t e;
	size_t n, done;

	if (len == 0)
		return HTTP_EV_NEED_MORE;
	if (s->fresh)
		start_request(s);
	n = guard_scan(&s->g, buf, len, &gwhy);
	e = run_parser(s, buf, n, &done);
	if (e == HPE_PAUSED) {
		if (s->g.st != G_DONE || done != n)
			return die(s, "malformed request");
		*used = done;
		s->phase = P_BODY;
		return HTTP_EV_HEAD;
	}
	if (e != HPE_OK)
		return die(s, s->why != NULL ? s->why : llhttp_reason(e));
	if (gwhy != NULL)
		return die(s, gwhy);
	if (s->g.st == G_DONE)		/* llhttp did not see the head end */
		return die(s, "malformed request");
	*used = n;
	return HTTP_EV_NEED_MORE;
}

static enum http_ev
feed_body(struct http_reqs *s, const uint8_t *buf, size_t len, size_t *used)
{
	const struct http_head *h = &s->head;
	const char *bwhy;
	llhttp_errno_t e;
	size_t n, done;

	n = body_scan(&s->bg, buf, len, &bwhy);
	e = run_parser(s, buf, n, &done);
	if (e == HPE_PAUSED) {
		if (s->bg.st != B_DONE || done != n)
			return die(s, "malformed request");
		*used = done;
		if (h->is_connect || h->upgrade)
			s->phase = P_UPGRADE;
		else
			s->phase = h->keep_alive ? P_HEAD : P_CLOSED;
		s->fresh = 1;
		return HTTP_EV_END;
	}
	if (e != HPE_OK)
		return die(s, s->why != NULL ? s->why : llhttp_reason(e));
	if (bwhy != NULL)
		return die(s, bwhy);
	if (s->bg.st == B_DONE)		/* llhttp did not see the end */
		return die(s, "malformed request");
	*used = n;
	return HTTP_EV_NEED_MORE;
}

/* END of a CONNECT or upgrade was reported; llhttp must now stop too. */
static enum http_ev
feed_upgrade(struct http_reqs *s)
{
	size_t done;

	if (run_parser(s, NULL, 0, &done) != HPE_PAUSED_UPGRADE || done != 0)
		return die(s, "malformed request");
	s->phase = P_TUNNEL;
	return HTTP_EV_TUNNEL;
}

enum http_ev
http_reqs_feed(struct http_reqs *s, const uint8_t *buf, size_t len,
    size_t *used, const struct http_head **head, const char **reason)
{
	enum http_ev ev;

	*used = 0;
	switch (s->phase) {
	case P_HEAD:
		ev = feed_head(s, buf, len, used);
		break;
	case P_BODY:
		ev = feed_body(s, buf, len, used);
		break;
	case P_UPGRADE:
		ev = feed_upgrade(s);
		break;
	case P_TUNNEL:
		ev = HTTP_EV_TUNNEL;
		break;
	case P_CLOSED:
		ev = len == 0 ? HTTP_EV_NEED_MORE :
		    die(s, "request after connection close");
		break;
	default:
		ev = HTTP_EV_INVALID;
		break;
	}
	if (ev == HTTP_EV_INVALID)
		*used = 0;
	if (head != NULL)
		*head = (ev == HTTP_EV_HEAD || ev == HTTP_EV_END ||
		    ev == HTTP_EV_TUNNEL) ? &s->head : NULL;
	if (reason != NULL)
		*reason = ev == HTTP_EV_INVALID ? s->dead : NULL;
	return ev;
}

int
http_reqs_upgrade_refused(struct http_reqs *s)
{
	if (s->phase != P_TUNNEL || !s->head.upgrade)
		return SL_ERR_INVALID;
	llhttp_resume_after_upgrade(&s->parser);
	s->phase = s->head.keep_alive ? P_HEAD : P_CLOSED;
	s->fresh = 1;
	return 0;
}

/* ---- reading and writing heads ------------------------------------------ */

const struct http_header *
http_head_get(const struct http_head *h, const char *name)
{
	size_t i, len = strlen(name);

	for (i = 0; i < h->nheaders; i++) {
		const struct http_header *x = &h->headers[i];
		size_t j;

		if (x->name_len != len)
			continue;
		for (j = 0; j < len; j++)
			if (ascii_lower((unsigned char)x->name[j]) !=
			    ascii_lower((unsigned char)name[j]))
				break;
		if (j == len)
			return x;
	}
	return NULL;
}

static char *
put(char *out, const char *p, size_t n)
{
	memcpy(out, p, n);
	return out + n;
}

long
http_head_serialize_origin(const struct http_head *h, char *out,
    size_t out_len)
{
	const char *target = h->absolute_form ? h->origin_target : h->target;
	size_t tlen = h->absolute_form ? strlen(target) : h->target_len;
	size_t i, need, mlen = strlen(h->method);
	char version[] = "HTTP/1.1";
	char *o = out;

	version[5] = (char)('0' + h->http_major % 10);
	version[7] = (char)('0' + h->http_minor % 10);
	need = mlen + 1 + tlen + 1 + 8 + 2 + 2;
	for (i = 0; i < h->nheaders; i++)
		if (!ascii_prefix(h->headers[i].name, h->headers[i].name_len, "proxy-"))
			need += h->headers[i].name_len + 2 + h->headers[i].value_len + 2;
	if (need > out_len || need > (size_t)LONG_MAX)
		return SL_ERR_TOO_BIG;

	o = put(o, h->method, mlen);
	o = put(o, " ", 1);
	o = put(o, target, tlen);
	o = put(o, " ", 1);
	o = put(o, version, 8);
	o = put(o, "\r\n", 2);
	for (i = 0; i < h->nheaders; i++) {
		const struct http_header *x = &h->headers[i];

		if (ascii_prefix(x->name, x->name_len, "proxy-"))
			continue;
		o = put(o, x->name, x->name_len);
		o = put(o, ": ", 2);
		o = put(o, x->value, x->value_len);
		o = put(o, "\r\n", 2);
	}
	o = put(o, "\r\n", 2);
	return (long)(o - out);
}
