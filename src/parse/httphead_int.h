/*
 * httphead_int.h: what the request stream and the response stream share.
 * httphead.c holds the strict stream over llhttp that both run on (and the
 * request stream), httpcheck.c our own checks (the head and body guards,
 * the framing), httptarget.c the head's bytes and the fields derived from
 * them, httpwrite.c the heads sluice writes; httpresp.c is the response
 * stream.  Private to src/parse/http*.c; not installed.
 */
#ifndef SLUICE_HTTPHEAD_INT_H
#define SLUICE_HTTPHEAD_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <llhttp.h>

#include "util/ascii.h"
#include "parse/httphead.h"

/* The head guard's position in a head. */
enum gstate {
	/* The request line. */
	G_START,	/* before it (empty lines allowed) */
	G_LEAD_LF,	/* CR of a leading empty line seen */
	G_METHOD,
	G_TARGET,
	G_VERSION,	/* up to the CR */
	/* The status line. */
	G_SVERSION,	/* "HTTP/1.x", up to the SP */
	G_STATUS,	/* the three digits */
	G_SP,		/* SP or CR after them */
	G_REASON,
	/* Both. */
	G_RL_LF,	/* CR after the start line seen */
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
	unsigned	 status;
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
	B_TRAILER,	/* after the last chunk: a trailer field, or the empty line */
	B_TNAME,	/* a trailer field's name (trailers allowed) */
	B_TVALUE,	/* its value */
	B_TLF,		/* the LF of its line */
	B_END_LF,
};

/* The bytes of a trailer section, when trailers are allowed at all. */
#define TRAILER_MAX	8192

struct bodyguard {
	enum bstate	 st;
	uint64_t	 left;
	unsigned	 digits;
	size_t		 ext;
	int		 trailers;	/* trailer fields are allowed */
	size_t		 tbytes;
};

/* Where a stream is between events. */
enum phase {
	P_HEAD,		/* reading a head */
	P_BODY,		/* HEAD reported; reading the body up to END */
	P_UPGRADE,	/* TUNNEL is next (CONNECT, an upgrade, a 101) */
	P_TUNNEL,
	P_CLOSED,	/* after a message that closes the connection */
	P_DEAD,		/* INVALID reported */
};

/* A header while it is received: offsets into the arena. */
struct hoff {
	size_t	name, name_len, value, value_len;
};

/*
 * One direction of a connection: llhttp, our guards and the current
 * head's bytes.  A request stream (struct http_reqs) and a response stream
 * (struct http_resps) each begin with one, and llhttp's data points to it.
 */
struct http_stream {
	llhttp_t	 parser;
	llhttp_settings_t settings;
	int		 response;	/* a response stream */
	enum phase	 phase;
	int		 fresh;		/* the next byte begins a message */
	const char	*why;		/* set by a callback that refuses */
	const char	*dead;		/* the reason once P_DEAD */
	struct guard	 g;
	struct bodyguard bg;
	int		 trailers_ok;	/* bodies may end with trailer fields */

	/*
	 * The current head's bytes: the request-target or the reason phrase,
	 * names and values, each NUL-terminated.
	 */
	char		*arena;
	size_t		 alen, acap, amax;
	size_t		 line_len;	/* target or reason, at offset 0 */
	struct hoff	 hoff[HTTP_MAX_HEADERS];
	size_t		 nhoff;
	int		 in_field;
	unsigned	 n_cl, n_te, n_host;	/* n_host: requests only */

	/* What the head says about the body (http_check_framing()). */
	int		 chunked, has_cl;
	uint64_t	 content_length;

	struct http_header hdrs[HTTP_MAX_HEADERS];
};

/* The request stream (httphead.h); the response stream is in httpresp.c. */
struct http_reqs {
	struct http_stream hs;		/* first: llhttp's data points to it */
	size_t		 origin_off;	/* absolute-form: the origin-form target */
	struct http_head head;
};

/* ---- small helpers ------------------------------------------------------ */

/* Records why a callback refuses (the first reason wins); returns -1. */
static inline int
refuse(struct http_stream *s, const char *why)
{
	if (s->why == NULL)
		s->why = why;
	return -1;
}

/* What a stream says of a message it cannot make sense of. */
static inline const char *
malformed(const struct http_stream *s)
{
	return s->response ? "malformed response" : "malformed request";
}

/* A token character (RFC 9110 5.6.2). */
static inline int
is_tchar(uint8_t c)
{
	/* ALPHA, DIGIT and !#$%&'*+-.^_`|~, as a bit each. */
	static const uint64_t set[4] = {
		0x03ff6cfa00000000ull, 0x57ffffffc7fffffeull, 0, 0 };

	return (int)(set[c >> 6] >> (c & 63) & 1);
}

/* Bytes allowed in a field value: SP, HT, VCHAR and obs-text. */
static inline int
is_vbyte(uint8_t c)
{
	return c == ' ' || c == '\t' || (c >= 0x21 && c != 0x7f);
}

/* Copies p[0..n) to o; returns the byte after it. */
static inline char *
put(char *o, const char *p, size_t n)
{
	memcpy(o, p, n);
	return o + n;
}

/* ---- httphead.c: the stream over llhttp --------------------------------- */

/*
 * Allocates a zeroed stream of size bytes that begins with a struct
 * http_stream, of requests or of responses whose heads have at most
 * header_limit bytes; on_head is llhttp's on_headers_complete, the only
 * callback that differs.  Returns NULL when out of memory or header_limit
 * is over SIZE_MAX / 4.  Its owner frees s->arena, then the stream.
 */
void	*http_stream_new(size_t size, int response, size_t header_limit,
	    llhttp_cb on_head);
/* Forgets the previous message: the next byte begins a new one. */
void	http_stream_start(struct http_stream *s);
/* Whether s is at a message boundary with nothing of the next one read. */
int	http_stream_between(const struct http_stream *s);
/* s as http_stream_new made it (its arena kept), for another connection. */
void	http_stream_reset(struct http_stream *s, size_t header_limit);
/* The stream is dead for why (NULL: malformed); returns -1. */
int	http_stream_die(struct http_stream *s, const char *why);
/*
 * Feeds head bytes (P_HEAD) or body bytes (P_BODY) from buf[0..len)
 * through our guard and llhttp.  Returns 1 when both say the head (the
 * message) ended at buf[*used]; 0 when both want more (*used = len); -1
 * when the stream died.
 */
int	http_stream_step(struct http_stream *s, const uint8_t *buf,
	    size_t len, size_t *used);
/*
 * After the END of a message that upgrades: llhttp must stop there too,
 * taking no byte.  Returns 0 (then P_TUNNEL), or -1 when the stream died.
 */
int	http_stream_tunnel(struct http_stream *s);
/* Gives llhttp exactly buf[0..n); *done is where it stopped. */
llhttp_errno_t http_stream_run(struct http_stream *s, const uint8_t *buf,
	    size_t n, size_t *done);

/* ---- httpcheck.c: our own checks ---------------------------------------- */

/* Resets the head guard for a new head (a status line first if response). */
void	http_guard_init(struct guard *g, size_t limit, int response);
/* Runs the head guard over buf: the bytes that passed; *why if refused. */
size_t	http_guard_scan(struct guard *g, const uint8_t *buf, size_t len,
	    const char **why);
/* Runs the body guard over buf: the bytes that passed; *why if refused. */
size_t	http_body_scan(struct bodyguard *b, const uint8_t *buf, size_t len,
	    const char **why);
/*
 * The next element of a comma-separated list v[0..len) from *i on (start
 * at 0), optional whitespace around it trimmed.  Returns 0 at the end of
 * the list, else 1 and the element (possibly empty) in *e, *elen.
 */
int	http_list_next(const char *v, size_t len, size_t *i, const char **e,
	    size_t *elen);
/* An Upgrade header, and "upgrade" listed in a Connection header. */
int	http_upgrade_asked(const struct http_stream *s);
/*
 * Reads and checks the body framing (into s->chunked, s->has_cl and
 * s->content_length) and sets the body guard: no body when no_body.
 * Framing for a body is refused with bodiless when that is not NULL
 * (CONNECT, 1xx, 204).  llhttp must agree.  NULL, or why refused.
 */
const char *http_check_framing(struct http_stream *s, unsigned http_minor,
	    const char *bodiless, int no_body);
/* Checks llhttp's request line against the guard's, fills h's; NULL or why. */
const char *http_check_request_line(struct http_reqs *s, struct http_head *h);

/* ---- httptarget.c: the head's bytes and fields -------------------------- */

/* Appends p[0..n) (not in the arena) to the arena; 0, or -1 via refuse(). */
int	http_arena_put(struct http_stream *s, const char *p, size_t n);
/* The index of the header called name (lower case), or -1. */
long	http_hoff_find(const struct http_stream *s, const char *name);
/* Points s->hdrs into the arena, which no longer moves. */
void	http_fill_headers(struct http_stream *s);
/* Parses the request-target into h (authority, origin-form); NULL or why. */
const char *http_parse_target(struct http_reqs *s, struct http_head *h);
/* Parses the Host header, if any, into h; NULL or why. */
const char *http_parse_host(struct http_reqs *s, struct http_head *h);
/*
 * The writers of a head's lines: each writes its line, CRLF included, to
 * o, or only counts when o is NULL, and returns the line's length.
 * http_put_field: "name: value".  http_put_headers: every header of
 * hdrs[0..n) that keep(arg, header) keeps.  http_put_request_line:
 * "method target version", where version is 8 bytes ("HTTP/1.1").
 */
size_t	http_put_field(char *o, const char *name, size_t nlen,
	    const char *value, size_t vlen);
size_t	http_put_headers(char *o, const struct http_header *hdrs, size_t n,
	    int (*keep)(const void *, const struct http_header *),
	    const void *arg);
size_t	http_put_request_line(char *o, const char *method,
	    const char *target, size_t tlen, const char *version);

#endif
