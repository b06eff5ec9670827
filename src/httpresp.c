/*
 * httpresp.c: HTTP/1.x responses from an upstream, framed strictly, their
 * heads written again for the sandbox.
 *
 * It works as httphead.c does for requests.  Our head guard (status line
 * and header lines) and the shared body guard (Content-Length and chunked
 * bodies, httpcheck.c) run over the bytes first and stop at the first byte
 * they refuse or at the end of the head or body; llhttp is then given
 * exactly the bytes they accepted and fills the arena through its
 * callbacks.  Where both say where a head or a message ends, they must say
 * the same, or the response is refused.  A close-delimited body never
 * reaches llhttp: it is everything until the upstream closes.
 */
#include "autoconf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <llhttp.h>

#include "err.h"
#include "httpfwd.h"
#include "httphead.h"
#include "httphead_int.h"
#include "httpresp.h"

#define ARENA_MIN	512
#define OUT_EXTRA	32	/* "Connection: upgrade\r\n" and the like */

/* The head guard's position in a response head. */
enum rgstate {
	R_VERSION,	/* "HTTP/1.x" */
	R_STATUS,	/* the three digits */
	R_AFTER,	/* SP or CR after them */
	R_REASON,
	R_RL_LF,	/* CR after the status line seen */
	R_LINE,		/* start of a header line or of the final empty line */
	R_NAME,
	R_VALUE,
	R_VALUE_LF,
	R_END_LF,
	R_DONE,		/* the head is complete */
};

struct rguard {
	enum rgstate	 st;
	size_t		 limit;		/* header_limit */
	size_t		 total;		/* bytes so far */
	size_t		 tok;		/* bytes in the current token */
	unsigned	 nlines;	/* header lines */
	unsigned	 status;
	char		 version[8];
};

/* Where a stream is between events. */
enum rphase {
	RP_HEAD,	/* reading a head */
	RP_BODY,	/* HEAD reported; reading the body up to END */
	RP_UPGRADE,	/* HEAD of a 101 reported; TUNNEL is next */
	RP_TUNNEL,
	RP_CLOSED,	/* after a response that closes, or after finish */
	RP_DEAD,	/* INVALID reported */
};

struct http_resps {
	llhttp_t	 parser;
	enum rphase	 phase;
	int		 fresh;		/* the next byte begins a response */
	const char	*why;		/* set by a callback that refuses */
	const char	*dead;		/* the reason once RP_DEAD */
	struct rguard	 g;
	struct bodyguard bg;

	/* Requests sent upstream: whether each was HEAD, oldest first. */
	uint8_t		 q_is_head[HTTP_RESPS_MAX_PENDING];
	size_t		 q_first, q_len;

	/* The current head's bytes: reason phrase, names, values; NUL ends. */
	char		*arena;
	size_t		 alen, acap, amax;
	size_t		 reason_len;	/* the reason phrase is at offset 0 */
	struct hoff	 hoff[HTTP_MAX_HEADERS];
	size_t		 nhoff;
	int		 in_field;
	unsigned	 n_cl, n_te;

	/* What the head says about the body. */
	int		 no_body, chunked, has_cl;
	uint64_t	 content_length;

	char		*out;
	size_t		 out_cap;
	struct http_header hdrs[HTTP_MAX_HEADERS];
	struct http_resp_head head;
};

/* Records why a callback refuses (the first reason wins); returns -1. */
static int
cb_refuse(struct http_resps *s, const char *why)
{
	if (s->why == NULL)
		s->why = why;
	return -1;
}

/* ---- character classes -------------------------------------------------- */

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

/* ---- the head guard ----------------------------------------------------- */

static void
rguard_init(struct rguard *g, size_t limit)
{
	memset(g, 0, sizeof(*g));
	g->st = R_VERSION;
	g->limit = limit;
}

/* The version, complete at the SP after it. */
static const char *
rguard_version(const struct rguard *g)
{
	const char *v = g->version;

	if (g->tok != sizeof(g->version) || memcmp(v, "HTTP/", 5) != 0 ||
	    v[6] != '.' || v[5] < '0' || v[5] > '9' || v[7] < '0' || v[7] > '9')
		return "malformed status line";
	if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
		return "unsupported http version";
	return NULL;
}

/* One byte of the status line. */
static const char *
rguard_statusline(struct rguard *g, uint8_t c)
{
	switch (g->st) {
	case R_VERSION:
		if (c == ' ' && g->tok == sizeof(g->version)) {
			g->st = R_STATUS;
			g->tok = 0;
			return NULL;
		}
		if (g->tok == sizeof(g->version) || c == ' ' || c == '\r')
			return "malformed status line";
		g->version[g->tok++] = (char)c;
		return g->tok == sizeof(g->version) ? rguard_version(g) : NULL;
	case R_STATUS:
		if (c < '0' || c > '9')
			return "invalid status code";
		g->status = g->status * 10 + (unsigned)(c - '0');
		if (++g->tok == 3)
			g->st = R_AFTER;
		return NULL;
	case R_AFTER:
		if (g->status < 100 || g->status > 599 || (c != ' ' && c != '\r'))
			return "invalid status code";
		g->st = c == ' ' ? R_REASON : R_RL_LF;
		return NULL;
	case R_REASON:
		if (c == '\r')
			g->st = R_RL_LF;
		return NULL;	/* sanitised when written */
	case R_RL_LF:
		if (c != '\n')
			return "bare CR";
		g->st = R_LINE;
		return NULL;
	default:
		return "malformed response";
	}
}

/* One byte of the header lines (as httpcheck.c's guard for requests). */
static const char *
rguard_fields(struct rguard *g, uint8_t c)
{
	switch (g->st) {
	case R_LINE:
		if (c == '\r') {
			g->st = R_END_LF;
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
		g->st = R_NAME;
		return NULL;
	case R_NAME:
		if (c == ':') {
			g->st = R_VALUE;
			return NULL;
		}
		if (c == ' ' || c == '\t')
			return "whitespace before colon";
		if (c == '\r')
			return "header line without colon";
		if (!is_tchar(c))
			return "invalid header name";
		return NULL;
	case R_VALUE:
		if (c == '\r') {
			g->st = R_VALUE_LF;
			return NULL;
		}
		if (!is_vbyte(c))
			return "invalid header value";
		return NULL;
	case R_VALUE_LF:
	case R_END_LF:
		if (c != '\n')
			return "bare CR";
		g->st = g->st == R_VALUE_LF ? R_LINE : R_DONE;
		return NULL;
	default:
		return "malformed response";
	}
}

/* One byte of a head: NULL, or why it is refused. */
static const char *
rguard_byte(struct rguard *g, uint8_t c)
{
	int want_lf = g->st == R_RL_LF || g->st == R_VALUE_LF ||
	    g->st == R_END_LF;

	if (++g->total > g->limit)
		return "header too large";
	if (c == '\0')
		return "NUL in head";
	if (c == '\n' && !want_lf)
		return "bare LF";
	if (g->st <= R_RL_LF)
		return rguard_statusline(g, c);
	return rguard_fields(g, c);
}

/* Runs the guard until the head is complete or a byte is refused. */
static size_t
rguard_scan(struct rguard *g, const uint8_t *buf, size_t len, const char **why)
{
	size_t i;

	*why = NULL;
	for (i = 0; i < len && g->st != R_DONE; i++)
		if ((*why = rguard_byte(g, buf[i])) != NULL)
			break;
	return i;
}

/* ---- the arena ---------------------------------------------------------- */

/* Appends p[0..n), which must not point into the arena; 0 or -1. */
static int
arena_put(struct http_resps *s, const char *p, size_t n)
{
	size_t cap;
	char *a;

	if (n > s->amax - s->alen)
		return cb_refuse(s, "header too large");
	if (n > s->acap - s->alen) {
		cap = s->acap > 0 ? s->acap : ARENA_MIN;
		while (cap < s->alen + n && cap < s->amax)
			cap = cap > s->amax / 2 ? s->amax : cap * 2;
		if ((a = realloc(s->arena, cap)) == NULL)
			return cb_refuse(s, "out of memory");
		s->arena = a;
		s->acap = cap;
	}
	if (n > 0)
		memcpy(s->arena + s->alen, p, n);
	s->alen += n;
	return 0;
}

/* The index of the header called name (lower case), or -1. */
static long
hoff_find(const struct http_resps *s, const char *name)
{
	size_t i;

	for (i = 0; i < s->nhoff; i++)
		if (ascii_eq(s->arena + s->hoff[i].name, s->hoff[i].name_len, name))
			return (long)i;
	return -1;
}

/* ---- llhttp's callbacks ------------------------------------------------- */

static int
on_status(llhttp_t *p, const char *at, size_t len)
{
	struct http_resps *s = p->data;

	return s->phase == RP_HEAD ? arena_put(s, at, len) : 0;
}

static int
on_status_complete(llhttp_t *p)
{
	struct http_resps *s = p->data;

	if (s->phase != RP_HEAD)
		return 0;
	if (s->nhoff > 0 || s->in_field)
		return cb_refuse(s, "malformed response");
	s->reason_len = s->alen;
	return arena_put(s, "", 1);
}

static int
on_header_field(llhttp_t *p, const char *at, size_t len)
{
	struct http_resps *s = p->data;

	if (s->phase != RP_HEAD)
		return 0;
	if (s->alen == 0 && arena_put(s, "", 1) != 0)	/* no reason phrase */
		return -1;
	if (!s->in_field) {
		if (s->nhoff == HTTP_MAX_HEADERS)
			return cb_refuse(s, "too many headers");
		s->hoff[s->nhoff].name = s->alen;
		s->in_field = 1;
	}
	return arena_put(s, at, len);
}

/* Refuses a second framing header as soon as its name is known. */
static int
count_framing(struct http_resps *s, const char *name, size_t len)
{
	if (ascii_eq(name, len, "content-length")) {
		if (s->n_cl++ > 0)
			return cb_refuse(s, "repeated content-length");
	} else if (ascii_eq(name, len, "transfer-encoding")) {
		if (s->n_te++ > 0)
			return cb_refuse(s, "repeated transfer-encoding");
	}
	if (s->n_cl > 0 && s->n_te > 0)
		return cb_refuse(s, "content-length with transfer-encoding");
	return 0;
}

static int
on_header_field_complete(llhttp_t *p)
{
	struct http_resps *s = p->data;
	struct hoff *h;

	if (s->phase != RP_HEAD)
		return 0;
	if (!s->in_field)
		return cb_refuse(s, "empty header name");
	h = &s->hoff[s->nhoff];
	h->name_len = s->alen - h->name;
	if (arena_put(s, "", 1) != 0)
		return -1;
	h->value = s->alen;
	s->in_field = 0;
	return count_framing(s, s->arena + h->name, h->name_len);
}

static int
on_header_value(llhttp_t *p, const char *at, size_t len)
{
	struct http_resps *s = p->data;

	return s->phase == RP_HEAD ? arena_put(s, at, len) : 0;
}

static int
on_header_value_complete(llhttp_t *p)
{
	struct http_resps *s = p->data;
	struct hoff *h;
	const char *v;

	if (s->phase != RP_HEAD)
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

static const llhttp_settings_t resps_settings = {
	.on_status = on_status,
	.on_status_complete = on_status_complete,
	.on_header_field = on_header_field,
	.on_header_field_complete = on_header_field_complete,
	.on_header_value = on_header_value,
	.on_header_value_complete = on_header_value_complete,
	.on_headers_complete = on_headers_complete,
	.on_message_complete = on_message_complete,
};

/* ---- the head is complete ----------------------------------------------- */

/* The status line, checked against what the guard saw. */
static const char *
check_status_line(struct http_resps *s)
{
	llhttp_t *p = &s->parser;
	struct http_resp_head *h = &s->head;

	if (llhttp_get_http_major(p) != 1 || llhttp_get_http_minor(p) > 1 ||
	    s->g.version[7] - '0' != llhttp_get_http_minor(p))
		return "unsupported http version";
	if (llhttp_get_status_code(p) != (int)s->g.status)
		return "invalid status code";
	if (s->nhoff != s->g.nlines || s->g.st != R_DONE)
		return "malformed response";
	h->status = s->g.status;
	h->http_major = 1;
	h->http_minor = llhttp_get_http_minor(p);
	h->informational = h->status / 100 == 1 && h->status != 101;
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
 * A Transfer-Encoding value: a comma-separated list of tokens (no
 * parameters, no empty elements) whose last element, and only that one,
 * is chunked.
 */
static int
te_is_chunked(const char *v, size_t len)
{
	size_t i = 0, start, end, j, nchunked = 0;
	int last = 0;

	while (i <= len) {
		while (i < len && (v[i] == ' ' || v[i] == '\t'))
			i++;
		start = end = i;
		while (i < len && v[i] != ',') {
			i++;
			if (v[i - 1] != ' ' && v[i - 1] != '\t')
				end = i;
		}
		i++;
		if (end == start)
			return 0;
		for (j = start; j < end; j++)
			if (!is_tchar((uint8_t)v[j]))
				return 0;
		last = ascii_eq(v + start, end - start, "chunked");
		nchunked += (size_t)last;
	}
	return last && nchunked == 1;
}

/* Whether the pending request at the front of the queue was HEAD. */
static int
front_is_head(const struct http_resps *s)
{
	return s->q_len > 0 && s->q_is_head[s->q_first];
}

/*
 * How the body is framed, by our own reading of the headers; llhttp must
 * agree (checked once it knows about bodiless responses).  Sets the body
 * guard.
 */
static const char *
check_framing(struct http_resps *s)
{
	const struct http_resp_head *h = &s->head;
	const llhttp_t *p = &s->parser;
	const struct hoff *o;
	long i;

	if ((i = hoff_find(s, "content-length")) >= 0) {
		o = &s->hoff[i];
		if (parse_content_length(s->arena + o->value, o->value_len,
		    &s->content_length) != 0)
			return "invalid content-length";
		s->has_cl = 1;
	}
	if ((i = hoff_find(s, "transfer-encoding")) >= 0) {
		o = &s->hoff[i];
		if (h->http_minor == 0)
			return "transfer-encoding in http/1.0";
		if (!te_is_chunked(s->arena + o->value, o->value_len))
			return "bad transfer-encoding";
		s->chunked = 1;
	}
	if ((h->status / 100 == 1 || h->status == 204) &&
	    (s->chunked || s->content_length > 0))
		return "body framing on 1xx or 204";
	if (s->chunked != ((p->flags & F_CHUNKED) != 0) ||
	    s->has_cl != ((p->flags & F_CONTENT_LENGTH) != 0) ||
	    (!s->chunked && s->content_length != p->content_length))
		return "malformed response";

	/* RFC 9112 6.3: these have no body, whatever the headers say. */
	s->no_body = h->status / 100 == 1 || h->status == 204 ||
	    h->status == 304 || front_is_head(s);
	memset(&s->bg, 0, sizeof(s->bg));
	if (s->no_body)
		s->bg.st = B_DONE;
	else if (s->chunked)
		s->bg.st = B_SIZE;
	else if (s->content_length > 0) {
		s->bg.st = B_LENGTH;
		s->bg.left = s->content_length;
	} else
		s->bg.st = B_DONE;
	s->head.close_delimited = !s->no_body && !s->chunked && !s->has_cl;
	return NULL;
}

/* Points the headers into the arena, which no longer moves. */
static void
fill_pointers(struct http_resps *s)
{
	size_t i;

	for (i = 0; i < s->nhoff; i++) {
		s->hdrs[i].name = s->arena + s->hoff[i].name;
		s->hdrs[i].name_len = s->hoff[i].name_len;
		s->hdrs[i].value = s->arena + s->hoff[i].value;
		s->hdrs[i].value_len = s->hoff[i].value_len;
	}
	s->head.headers = s->hdrs;
	s->head.nheaders = s->nhoff;
}

/*
 * A 101 must name its protocol in Upgrade and say "upgrade" in Connection;
 * llhttp (which also reads Proxy-Connection) must see it the same way.
 */
static const char *
check_upgrade(struct http_resps *s)
{
	const struct http_resp_head *h = &s->head;
	int ours;

	ours = hoff_find(s, "upgrade") >= 0 &&
	    http_conn_names(h->headers, h->nheaders, "upgrade", 7);
	if (h->status == 101 && !ours)
		return "101 without upgrade";
	if ((h->status == 101) != (llhttp_get_upgrade(&s->parser) != 0))
		return "ambiguous upgrade";
	return NULL;
}

/* Whether header x is sent on to the sandbox. */
static int
resp_keeps(const struct http_resps *s, const struct http_header *x)
{
	const struct http_resp_head *h = &s->head;

	/* The body is relayed raw: its framing headers stay as they came. */
	if (ascii_eq(x->name, x->name_len, "content-length") ||
	    ascii_eq(x->name, x->name_len, "transfer-encoding"))
		return 1;
	if (h->status == 101 && ascii_eq(x->name, x->name_len, "upgrade"))
		return 1;
	return !http_hop_by_hop(x->name, x->name_len) &&
	    !http_conn_names(h->headers, h->nheaders, x->name, x->name_len);
}

static char *
put(char *o, const char *p, size_t n)
{
	memcpy(o, p, n);
	return o + n;
}

/* Writes the head for the sandbox into s->out; 0, or -1 via cb_refuse(). */
static int
build_out(struct http_resps *s)
{
	struct http_resp_head *h = &s->head;
	const char *r = s->arena, *conn = "";
	size_t i, rb = 0, re = s->reason_len, need;
	char status[4], *o;

	while (rb < re && (r[rb] == ' ' || r[rb] == '\t'))
		rb++;
	while (re > rb && (r[re - 1] == ' ' || r[re - 1] == '\t'))
		re--;
	if (h->status == 101)
		conn = "Connection: upgrade\r\n";
	else if (!h->informational && !h->keep_alive)
		conn = "Connection: close\r\n";

	need = 9 + 3 + 1 + (re - rb) + 2 + strlen(conn) + 2;
	for (i = 0; i < h->nheaders; i++)
		if (resp_keeps(s, &h->headers[i]))
			need += h->headers[i].name_len + 2 +
			    h->headers[i].value_len + 2;
	if (need > s->out_cap) {
		free(s->out);
		s->out_cap = 0;
		if ((s->out = malloc(need + OUT_EXTRA)) == NULL)
			return cb_refuse(s, "out of memory");
		s->out_cap = need + OUT_EXTRA;
	}

	status[0] = (char)('0' + h->status / 100);
	status[1] = (char)('0' + h->status / 10 % 10);
	status[2] = (char)('0' + h->status % 10);
	status[3] = ' ';
	o = put(s->out, "HTTP/1.1 ", 9);
	o = put(o, status, 4);
	for (i = rb; i < re; i++) {
		uint8_t c = (uint8_t)r[i];

		*o++ = c == '\t' ? ' ' : (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	o = put(o, "\r\n", 2);
	for (i = 0; i < h->nheaders; i++) {
		const struct http_header *x = &h->headers[i];

		if (!resp_keeps(s, x))
			continue;
		o = put(o, x->name, x->name_len);
		o = put(o, ": ", 2);
		o = put(o, x->value, x->value_len);
		o = put(o, "\r\n", 2);
	}
	o = put(o, conn, strlen(conn));
	o = put(o, "\r\n", 2);
	h->out = s->out;
	h->out_len = (size_t)(o - s->out);
	return 0;
}

/* The head is complete: derive its fields, or refuse it; then pause. */
static int
on_headers_complete(llhttp_t *p)
{
	struct http_resps *s = p->data;
	struct http_resp_head *h = &s->head;
	const char *why;

	if (s->phase != RP_HEAD)
		return cb_refuse(s, "malformed response");
	if (s->alen == 0 && arena_put(s, "", 1) != 0)	/* no reason, no header */
		return -1;
	if ((why = check_status_line(s)) != NULL ||
	    (why = check_framing(s)) != NULL)
		return cb_refuse(s, why);
	fill_pointers(s);
	if ((why = check_upgrade(s)) != NULL)
		return cb_refuse(s, why);
	/*
	 * What returning 1 from this callback would do, but we pause here:
	 * llhttp reads no body, and no longer waits for the upstream to close
	 * to end this response.
	 */
	if (s->no_body)
		p->flags |= F_SKIPBODY;
	if (h->close_delimited != (llhttp_message_needs_eof(p) != 0))
		return cb_refuse(s, "malformed response");
	h->keep_alive = h->status != 101 && llhttp_should_keep_alive(p);
	if (build_out(s) != 0)
		return -1;
	return HPE_PAUSED;
}

/* ---- the stream ---------------------------------------------------------- */

struct http_resps *
http_resps_new(size_t header_limit)
{
	struct http_resps *s;

	if (header_limit > SIZE_MAX / 4)
		return NULL;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	llhttp_init(&s->parser, HTTP_RESPONSE, &resps_settings);
	s->parser.data = s;
	s->amax = 2 * header_limit + 16;
	s->g.limit = header_limit;
	s->phase = RP_HEAD;
	s->fresh = 1;
	return s;
}

void
http_resps_free(struct http_resps *s)
{
	if (s == NULL)
		return;
	free(s->arena);
	free(s->out);
	free(s);
}

int
http_resps_expect(struct http_resps *s, const char *method)
{
	size_t i, len = strlen(method);

	if (len == 0 || len > 23)
		return SL_ERR_INVALID;
	for (i = 0; i < len; i++)
		if (!is_tchar((uint8_t)method[i]))
			return SL_ERR_INVALID;
	if (strcmp(method, "CONNECT") == 0)
		return SL_ERR_UNSUPPORTED;
	if (s->q_len == HTTP_RESPS_MAX_PENDING)
		return SL_ERR_TOO_BIG;
	s->q_is_head[(s->q_first + s->q_len) % HTTP_RESPS_MAX_PENDING] =
	    strcmp(method, "HEAD") == 0;
	s->q_len++;
	return 0;
}

size_t
http_resps_pending(const struct http_resps *s)
{
	return s->q_len;
}

/* The request at the front of the queue has its final response. */
static void
dequeue(struct http_resps *s)
{
	if (s->q_len == 0)
		return;
	s->q_first = (s->q_first + 1) % HTTP_RESPS_MAX_PENDING;
	s->q_len--;
}

/* Forgets the previous response: the next byte begins a new one. */
static void
start_response(struct http_resps *s)
{
	rguard_init(&s->g, s->g.limit);
	memset(&s->bg, 0, sizeof(s->bg));
	memset(&s->head, 0, sizeof(s->head));
	s->alen = 0;
	s->reason_len = 0;
	s->nhoff = 0;
	s->in_field = 0;
	s->n_cl = s->n_te = 0;
	s->no_body = s->chunked = s->has_cl = 0;
	s->content_length = 0;
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
	case HPE_INVALID_CONSTANT:
		return "malformed status line";
	case HPE_INVALID_STATUS:
		return "invalid status code";
	case HPE_LF_EXPECTED:
		return "bare CR";
	case HPE_CR_EXPECTED:
		return "bare LF";
	case HPE_UNEXPECTED_SPACE:
		return "obs-fold";
	case HPE_INVALID_HEADER_TOKEN:
		return "invalid header";
	case HPE_INVALID_VERSION:
		return "unsupported http version";
	case HPE_CLOSED_CONNECTION:
		return "response after connection close";
	default:
		return "malformed response";
	}
}

static enum http_resp_ev
die(struct http_resps *s, const char *why)
{
	s->phase = RP_DEAD;
	s->dead = why != NULL ? why : "malformed response";
	return HTTP_RESP_INVALID;
}

/*
 * Gives llhttp exactly buf[0..n), resuming it first if it paused.  *done
 * is where it stopped (n unless it paused).
 */
static llhttp_errno_t
run_parser(struct http_resps *s, const uint8_t *buf, size_t n, size_t *done)
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

static enum http_resp_ev
feed_head(struct http_resps *s, const uint8_t *buf, size_t len, size_t *used)
{
	const char *gwhy;
	llhttp_errno_t e;
	size_t n, done;

	if (len == 0)
		return HTTP_RESP_NEED_MORE;
	if (s->fresh) {
		if (s->q_len == 0)
			return die(s, "response without request");
		start_response(s);
	}
	n = rguard_scan(&s->g, buf, len, &gwhy);
	e = run_parser(s, buf, n, &done);
	if (e == HPE_PAUSED) {
		if (s->g.st != R_DONE || done != n)
			return die(s, "malformed response");
		*used = done;
		s->phase = s->head.status == 101 ? RP_UPGRADE : RP_BODY;
		return HTTP_RESP_HEAD;
	}
	if (e != HPE_OK)
		return die(s, s->why != NULL ? s->why : llhttp_reason(e));
	if (gwhy != NULL)
		return die(s, gwhy);
	if (s->g.st == R_DONE)		/* llhttp did not see the head end */
		return die(s, "malformed response");
	*used = n;
	return HTTP_RESP_NEED_MORE;
}

/* The response ended at the last byte consumed. */
static enum http_resp_ev
end_response(struct http_resps *s)
{
	if (!s->head.informational)
		dequeue(s);
	s->phase = s->head.keep_alive ? RP_HEAD : RP_CLOSED;
	s->fresh = 1;
	return HTTP_RESP_END;
}

static enum http_resp_ev
feed_body(struct http_resps *s, const uint8_t *buf, size_t len, size_t *used)
{
	const char *bwhy;
	llhttp_errno_t e;
	size_t n, done;

	if (s->head.close_delimited) {	/* llhttp is not told: we end it */
		*used = len;
		return HTTP_RESP_NEED_MORE;
	}
	n = http_body_scan(&s->bg, buf, len, &bwhy);
	e = run_parser(s, buf, n, &done);
	if (e == HPE_PAUSED) {
		if (s->bg.st != B_DONE || done != n)
			return die(s, "malformed response");
		*used = done;
		return end_response(s);
	}
	if (e != HPE_OK)
		return die(s, s->why != NULL ? s->why : llhttp_reason(e));
	if (bwhy != NULL)
		return die(s, bwhy);
	if (s->bg.st == B_DONE)		/* llhttp did not see the end */
		return die(s, "malformed response");
	*used = n;
	return HTTP_RESP_NEED_MORE;
}

/* HEAD of a 101 was reported; llhttp must now end it and stop too. */
static enum http_resp_ev
feed_upgrade(struct http_resps *s)
{
	size_t done;

	if (run_parser(s, NULL, 0, &done) != HPE_PAUSED || done != 0 ||
	    run_parser(s, NULL, 0, &done) != HPE_PAUSED_UPGRADE || done != 0)
		return die(s, "malformed response");
	dequeue(s);
	s->phase = RP_TUNNEL;
	return HTTP_RESP_TUNNEL;
}

/* The outputs every event shares. */
static enum http_resp_ev
report(struct http_resps *s, enum http_resp_ev ev, size_t *used,
    const struct http_resp_head **head, const char **reason)
{
	if (ev == HTTP_RESP_INVALID || ev == HTTP_RESP_TUNNEL)
		*used = 0;
	if (head != NULL)
		*head = (ev == HTTP_RESP_HEAD || ev == HTTP_RESP_END ||
		    ev == HTTP_RESP_TUNNEL) ? &s->head : NULL;
	if (reason != NULL)
		*reason = ev == HTTP_RESP_INVALID ? s->dead : NULL;
	return ev;
}

enum http_resp_ev
http_resps_feed(struct http_resps *s, const uint8_t *buf, size_t len,
    size_t *used, const struct http_resp_head **head, const char **reason)
{
	enum http_resp_ev ev;

	*used = 0;
	switch (s->phase) {
	case RP_HEAD:
		ev = feed_head(s, buf, len, used);
		break;
	case RP_BODY:
		ev = feed_body(s, buf, len, used);
		break;
	case RP_UPGRADE:
		ev = feed_upgrade(s);
		break;
	case RP_TUNNEL:
		ev = HTTP_RESP_TUNNEL;
		break;
	case RP_CLOSED:
		ev = len == 0 ? HTTP_RESP_NEED_MORE :
		    die(s, "response after connection close");
		break;
	default:
		ev = HTTP_RESP_INVALID;
		break;
	}
	return report(s, ev, used, head, reason);
}

enum http_resp_ev
http_resps_finish(struct http_resps *s, const struct http_resp_head **head,
    const char **reason)
{
	enum http_resp_ev ev;
	size_t used = 0;

	switch (s->phase) {
	case RP_HEAD:
	case RP_CLOSED:
		if (!s->fresh)
			ev = die(s, "upstream closed mid-response");
		else if (s->q_len > 0)
			ev = die(s, "upstream closed before responding");
		else {
			s->phase = RP_CLOSED;
			ev = HTTP_RESP_NEED_MORE;
		}
		break;
	case RP_BODY:
		if (s->head.close_delimited)
			ev = end_response(s);
		else if ((ev = feed_body(s, NULL, 0, &used)) != HTTP_RESP_END &&
		    ev != HTTP_RESP_INVALID)
			ev = die(s, "upstream closed mid-response");
		break;
	case RP_UPGRADE:
		ev = feed_upgrade(s);
		break;
	case RP_TUNNEL:
		ev = HTTP_RESP_TUNNEL;
		break;
	default:
		ev = HTTP_RESP_INVALID;
		break;
	}
	if (ev == HTTP_RESP_END)
		s->phase = RP_CLOSED;
	return report(s, ev, &used, head, reason);
}
