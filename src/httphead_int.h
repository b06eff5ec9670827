/*
 * httphead_int.h: what httphead.c (the stream over llhttp), httpcheck.c (our
 * own checks) and httptarget.c (the head's bytes and fields) share.  Private
 * to src/http*.c; not installed.
 */
#ifndef SLUICE_HTTPHEAD_INT_H
#define SLUICE_HTTPHEAD_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <llhttp.h>

#include "httphead.h"

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

/* ---- small helpers ------------------------------------------------------ */

/* Records why a callback refuses (the first reason wins); returns -1. */
static inline int
refuse(struct http_reqs *s, const char *why)
{
	if (s->why == NULL)
		s->why = why;
	return -1;
}

/* c in lower case if it is an ASCII capital letter. */
static inline int
ascii_lower(int c)
{
	return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

/* s[0..len) equals the lower-case word, ignoring ASCII case. */
static inline int
ascii_eq(const char *s, size_t len, const char *word)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (word[i] == '\0' || ascii_lower((unsigned char)s[i]) != word[i])
			return 0;
	return word[len] == '\0';
}

/* s[0..len) starts with the lower-case prefix, ignoring ASCII case. */
static inline int
ascii_prefix(const char *s, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return len >= n && ascii_eq(s, n, prefix);
}

/* ---- httpcheck.c: our own checks ---------------------------------------- */

/* Resets the head guard for a new head of at most limit bytes. */
void	http_guard_init(struct guard *g, size_t limit);
/* Runs the head guard over buf: the bytes that passed; *why if refused. */
size_t	http_guard_scan(struct guard *g, const uint8_t *buf, size_t len,
	    const char **why);
/* Runs the body guard over buf: the bytes that passed; *why if refused. */
size_t	http_body_scan(struct bodyguard *b, const uint8_t *buf, size_t len,
	    const char **why);
/* Sets h->upgrade; NULL, or why refused when llhttp's idea differs. */
const char *http_check_upgrade(struct http_reqs *s, struct http_head *h);
/* Checks and records the body framing and sets the body guard; NULL or why. */
const char *http_check_framing(struct http_reqs *s, struct http_head *h);
/* Checks llhttp's request line against the guard's, fills h's; NULL or why. */
const char *http_check_request_line(struct http_reqs *s, struct http_head *h);

/* ---- httptarget.c: the head's bytes and fields -------------------------- */

/* Appends p[0..n) (not in the arena) to the arena; 0, or -1 via refuse(). */
int	http_arena_put(struct http_reqs *s, const char *p, size_t n);
/* The index of the header called name (lower case), or -1. */
long	http_hoff_find(const struct http_reqs *s, const char *name);
/* Parses the request-target into h (authority, origin-form); NULL or why. */
const char *http_parse_target(struct http_reqs *s, struct http_head *h);
/* Parses the Host header, if any, into h; NULL or why. */
const char *http_parse_host(struct http_reqs *s, struct http_head *h);
/* Points the head's strings into the arena, which no longer moves. */
void	http_fill_pointers(struct http_reqs *s, struct http_head *h);

#endif
