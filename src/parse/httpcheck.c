/*
 * httpcheck.c: our own checks of request and response heads and bodies,
 * where llhttp is lenient: the head guard and the body guard that run over
 * the bytes before llhttp sees them, and the checks of a complete head
 * (request line, framing, upgrade) against what llhttp made of it.
 */
#include "autoconf.h"

#include <stdint.h>
#include <string.h>

#include <llhttp.h>

#include "parse/httphead.h"
#include "parse/httphead_int.h"
#include "parse/httppath.h"
#include "parse/httpwrite.h"

#define CHUNK_SIZE_DIGITS	16	/* hex digits: fits a uint64_t */
#define CHUNK_EXT_MAX		1024	/* bytes of chunk extensions per chunk */

/* ---- the head guard ----------------------------------------------------- */

void
http_guard_init(struct guard *g, size_t limit, int response)
{
	memset(g, 0, sizeof(*g));
	g->st = response ? G_SVERSION : G_START;
	g->limit = limit;
}

/* The version, complete: NULL, or why it is refused (bad: malformed). */
static const char *
guard_version(const struct guard *g, const char *bad)
{
	const char *v = g->version;

	if (g->tok != sizeof(g->version) || memcmp(v, "HTTP/", 5) != 0 ||
	    v[6] != '.' || v[5] < '0' || v[5] > '9' || v[7] < '0' || v[7] > '9')
		return bad;
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
			return guard_version(g, "malformed request line");
		}
		if (g->tok == sizeof(g->version))
			return "malformed request line";
		g->version[g->tok++] = (char)c;
		return NULL;
	default:
		return "malformed request";
	}
}

/* One byte of the status line. */
static const char *
guard_statusline(struct guard *g, uint8_t c)
{
	switch (g->st) {
	case G_SVERSION:
		if (c == ' ' && g->tok == sizeof(g->version)) {
			g->st = G_STATUS;
			g->tok = 0;
			return NULL;
		}
		if (g->tok == sizeof(g->version) || c == ' ' || c == '\r')
			return "malformed status line";
		g->version[g->tok++] = (char)c;
		return g->tok == sizeof(g->version) ?
		    guard_version(g, "malformed status line") : NULL;
	case G_STATUS:
		if (c < '0' || c > '9')
			return "invalid status code";
		g->status = g->status * 10 + (unsigned)(c - '0');
		if (++g->tok == 3)
			g->st = G_SP;
		return NULL;
	case G_SP:
		if (g->status < 100 || g->status > 599 || (c != ' ' && c != '\r'))
			return "invalid status code";
		g->st = c == ' ' ? G_REASON : G_RL_LF;
		return NULL;
	case G_REASON:
		if (c == '\r')
			g->st = G_RL_LF;
		return NULL;	/* sanitised when written */
	default:
		return "malformed response";
	}
}

/* One byte of the header lines (or of the start line's CRLF). */
static const char *
guard_fields(struct guard *g, uint8_t c)
{
	switch (g->st) {
	case G_RL_LF:
		if (c != '\n')
			return "bare CR";
		g->st = G_LINE;
		return NULL;
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
		return "malformed head";
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
	if (g->st < G_SVERSION)
		return guard_reqline(g, c);
	if (g->st < G_RL_LF)
		return guard_statusline(g, c);
	return guard_fields(g, c);
}

/*
 * How many bytes from the front of buf[0..len) stay in a name (G_NAME)
 * or a value (G_VALUE) without a check failing or the state changing,
 * within the limit; they are counted.
 */
static size_t
run(struct guard *g, const uint8_t *buf, size_t len)
{
	size_t n = 0, room = g->total < g->limit ? g->limit - g->total : 0;

	if (len > room)
		len = room;
	if (g->st == G_NAME)
		while (n < len && is_tchar(buf[n]))
			n++;
	else
		while (n < len && is_vbyte(buf[n]))	/* CR, LF, NUL are not */
			n++;
	g->total += n;
	return n;
}

/*
 * Runs the head guard over buf until the head is complete (g->st ==
 * G_DONE) or a byte is refused (*why set).  Returns the number of bytes
 * that passed.
 */
size_t
http_guard_scan(struct guard *g, const uint8_t *buf, size_t len,
    const char **why)
{
	size_t i;

	*why = NULL;
	for (i = 0; i < len && g->st != G_DONE; i++) {
		/*
		 * Inside a name or a value, a run of the bytes that only
		 * count goes at once (the limit still counted).
		 */
		if (g->st == G_VALUE || g->st == G_NAME)
			i += run(g, buf + i, len - i);
		if (i == len)
			break;
		if ((*why = guard_byte(g, buf[i])) != NULL)
			break;
	}
	return i;
}

/* ---- the body guard ----------------------------------------------------- */

/* A byte of a trailer section, counted against its bound. */
static const char *
trailer_byte(struct bodyguard *b)
{
	return ++b->tbytes > TRAILER_MAX ? "trailer fields too large" : NULL;
}

/* One byte of chunked framing (not of chunk data): NULL, or why refused. */
static const char *
chunk_byte(struct bodyguard *b, uint8_t c)
{
	int v;

	if (c == '\n' && b->st != B_SIZE_LF && b->st != B_DATA_LF &&
	    b->st != B_END_LF && b->st != B_TLF)
		return "bare LF";
	switch (b->st) {
	case B_SIZE:
		if (b->digits > 0 && (c == '\r' || c == ';')) {
			b->st = c == '\r' ? B_SIZE_LF : B_EXT;
			b->ext = 0;
			return NULL;
		}
		if ((v = http_hexval(c)) < 0 || b->digits == CHUNK_SIZE_DIGITS)
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
		if (c == '\r') {
			b->st = B_END_LF;
			return NULL;
		}
		if (!b->trailers)
			return "trailer fields";
		if (!is_tchar(c))
			return "invalid trailer field";
		b->st = B_TNAME;
		return trailer_byte(b);
	case B_TNAME:
		if (c == ':')
			b->st = B_TVALUE;
		else if (!is_tchar(c))
			return "invalid trailer field";
		return trailer_byte(b);
	case B_TVALUE:
		if (c == '\r') {
			b->st = B_TLF;
			return NULL;
		}
		if (!is_vbyte(c))
			return "invalid trailer field";
		return trailer_byte(b);
	case B_TLF:
		if (c != '\n')
			return "bare CR";
		b->st = B_TRAILER;
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
		return "malformed body";
	}
}

/*
 * Runs the body guard over buf until the body is complete (b->st ==
 * B_DONE) or a byte is refused (*why set).  Returns the number of bytes
 * that passed.
 */
size_t
http_body_scan(struct bodyguard *b, const uint8_t *buf, size_t len,
    const char **why)
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

/* ---- the head's framing, upgrade and request line ----------------------- */

int
http_list_next(const char *v, size_t len, size_t *i, const char **e,
    size_t *elen)
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

	while (http_list_next(v, len, &i, &e, &elen)) {
		if (!is_token(e, elen))
			return 0;
		last = ascii_eq(e, elen, "chunked");
		nchunked += (size_t)last;
	}
	return last && nchunked == 1;
}

/*
 * An upgrade as the peer will see it.  llhttp also takes Proxy-Connection
 * for Connection, and the peer never gets that one: the callers refuse a
 * message where llhttp's idea differs from ours as ambiguous.
 */
int
http_upgrade_asked(const struct http_stream *s)
{
	const struct hoff *o;
	const char *e;
	size_t i, j, elen;
	int conn = 0;

	for (i = 0; i < s->nhoff; i++) {
		o = &s->hoff[i];
		if (!ascii_eq(s->arena + o->name, o->name_len, "connection"))
			continue;
		j = 0;
		while (http_list_next(s->arena + o->value, o->value_len, &j,
		    &e, &elen))
			conn |= ascii_eq(e, elen, "upgrade");
	}
	return conn && http_hoff_find(s, "upgrade") >= 0;
}

int
http_parse_length(const char *v, size_t len, uint64_t *n)
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

/* How the body is framed, by our own reading of the headers. */
const char *
http_check_framing(struct http_stream *s, unsigned http_minor,
    const char *bodiless, int no_body)
{
	const llhttp_t *p = &s->parser;
	const struct hoff *o;
	long i;

	if ((i = http_hoff_find(s, "content-length")) >= 0) {
		o = &s->hoff[i];
		if (http_parse_length(s->arena + o->value, o->value_len,
		    &s->content_length) != 0)
			return "invalid content-length";
		s->has_cl = 1;
	}
	if ((i = http_hoff_find(s, "transfer-encoding")) >= 0) {
		o = &s->hoff[i];
		if (http_minor == 0)
			return "transfer-encoding in http/1.0";
		if (!te_is_chunked(s->arena + o->value, o->value_len))
			return "bad transfer-encoding";
		s->chunked = 1;
	}
	if (bodiless != NULL && (s->chunked || s->content_length > 0))
		return bodiless;
	if (s->chunked != ((p->flags & F_CHUNKED) != 0) ||
	    s->has_cl != ((p->flags & F_CONTENT_LENGTH) != 0) ||
	    (!s->chunked && s->content_length != p->content_length))
		return malformed(s);

	memset(&s->bg, 0, sizeof(s->bg));
	s->bg.trailers = s->trailers_ok;
	if (no_body)
		s->bg.st = B_DONE;
	else if (s->chunked)
		s->bg.st = B_SIZE;
	else if (s->content_length > 0) {
		s->bg.st = B_LENGTH;
		s->bg.left = s->content_length;
	} else
		s->bg.st = B_DONE;
	return NULL;
}

/* The request line, checked against what the head guard saw. */
const char *
http_check_request_line(struct http_reqs *s, struct http_head *h)
{
	struct http_stream *hs = &s->hs;
	llhttp_t *p = &hs->parser;
	const char *m = llhttp_method_name((llhttp_method_t)llhttp_get_method(p));

	if (llhttp_get_http_major(p) != 1 || llhttp_get_http_minor(p) > 1)
		return "unsupported http version";
	if (m == NULL || strcmp(m, hs->g.method) != 0)
		return "unknown method";
	if (hs->line_len != hs->g.target_len || hs->line_len == 0 ||
	    hs->nhoff != hs->g.nlines || hs->g.st != G_DONE)
		return "malformed request";
	memcpy(h->method, hs->g.method, sizeof(h->method));
	h->http_major = 1;
	h->http_minor = llhttp_get_http_minor(p);
	h->head_len = hs->g.total - hs->g.lead;
	h->is_connect = llhttp_get_method(p) == HTTP_CONNECT;
	return NULL;
}
