/*
 * redact.h: replaces secret values in a byte stream, as it streams.
 *
 * A value is searched for in every form it commonly takes on the way
 * back: as is; base64, standard and URL-safe, in each of the three
 * alignments it can have inside a longer base64 text (padding never part
 * of a pattern); percent-encoded (upper- and lower-case hex, and the
 * form encoding with '+' for space); and for values of at most
 * REDACT_MAX_ESCAPED bytes also as hex digits (either case), with its
 * letters in one case (either), JSON-escaped as common encoders write it
 * ("\/" as PHP does, \u00XX for <>& as Go does, for <>&'+` in upper-case
 * hex as .NET does, and for every byte but the unreserved), HTML-escaped
 * (& < > " and ' as named or numeric references) and with every byte but
 * the unreserved as an HTML numeric reference (decimal, hex in either
 * case).  An encoder that mixes these styles in other ways is not
 * caught: redaction is a safety net, not a promise against an upstream
 * that transforms what it echoes.
 *
 * A base64 pattern is the "core" of the value at its alignment: only the
 * characters whose six bits all come from the value.  The characters
 * that mix in bits of the bytes around it change with them, so leaving
 * them out is what lets one pattern match wherever the value sits, at
 * the end of the text or followed by more (user:password in Basic, a
 * token inside base64 JSON).  At alignment 0 that drops the last
 * character when len % 3 != 0; that core is still at least one character
 * and never shorter than the value itself, so it is kept whatever its
 * length: it matches no more often by chance than the value as is, which
 * is searched anyway.  A redacted core can leave up to four bits of the
 * value on either side in a neighbouring character.
 *
 * Every occurrence of any pattern is replaced by REDACT_MARK, wherever
 * the stream is cut: bytes that may still begin a pattern are held back
 * until the next feed says whether they do (at most the longest pattern
 * less one byte), and flushed at the end.
 */
#ifndef SLUICE_REDACT_H
#define SLUICE_REDACT_H

#include <stddef.h>
#include <stdint.h>

#define REDACT_MARK		"[REDACTED]"
#define REDACT_MAX_VALUE	8192	/* longest value redact_forms() takes */
#define REDACT_MAX_ESCAPED	4096	/* longest value given the escaped forms */
#define REDACT_MAX_FORMS	26	/* patterns one value gives at most */
#define REDACT_MIN_SHIFTED	8	/* shorter cores of shifted base64 are left out */
#define REDACT_MAX_PATTERNS	128	/* patterns one redactor searches at once */
#define REDACT_MAX_KEYS		16	/* names of a build, at most */

/* A pattern: bytes the redactor does not own (they must outlive its use). */
struct redact_pat {
	const uint8_t	*p;
	size_t		 len;		/* >= 1 */
};

/*
 * Bytes of storage redact_forms() needs for a value of len bytes (a
 * bound; 0 when len is 0 or over REDACT_MAX_VALUE).
 */
size_t	redact_forms_size(size_t len);

/*
 * Writes the distinct patterns of value[0..len) into store (at least
 * redact_forms_size(len) bytes; the caller owns it, typically guarded
 * memory, and wipes it) and points pats[0..n) into it, the value as is
 * first; pats has room for max_pats >= REDACT_MAX_FORMS.  Forms equal to
 * one already listed are left out, and so are shifted base64 cores
 * shorter than REDACT_MIN_SHIFTED.  Percent-encoding escapes every byte
 * but the RFC 3986 unreserved A-Za-z0-9-._~.  Returns n (1 to
 * REDACT_MAX_FORMS), or SL_ERR_INVALID when len is 0 or over
 * REDACT_MAX_VALUE, or store or pats is too small (nothing written).
 */
int	redact_forms(const uint8_t *value, size_t len, uint8_t *store,
	    size_t store_len, struct redact_pat *pats, size_t max_pats);

/*
 * Where output goes: called with consecutive pieces of the redacted
 * stream (never with len 0).  Returns 0, or non-zero to stop the feed,
 * which then returns SL_ERR_IO.
 */
typedef int	(*redact_emit)(void *arg, const uint8_t *p, size_t len);

struct redactor;

/*
 * NULL when out of memory.  Its tables are in guarded memory (they hold
 * the patterns): sodium_init() must have run.  A redactor refuses to feed until a
 * redactor_reset() succeeds: a failed setup fails closed, never open.
 */
struct redactor *redactor_new(void);
/* Wipes its state (held-back bytes are secret prefixes) and frees it; accepts NULL. */
void	redactor_free(struct redactor *r);

/*
 * Starts a new stream searched for pats[0..n) (copied as pointers: the
 * bytes must stay valid until the next reset or free).  Held-back bytes
 * of the previous stream are dropped, and what was built from the old
 * patterns is wiped.  Returns 0, SL_ERR_INVALID (n over
 * REDACT_MAX_PATTERNS, or an empty pattern) or SL_ERR_NOMEM (also when
 * the patterns total 4 GiB or more); after an error, feeds and flushes
 * return SL_ERR_INVALID until a reset succeeds.  n may be 0: the stream
 * then passes unchanged.  Costs O(total pattern length) time, and
 * memory of about 28 bytes per pattern byte beyond 27 KiB a redactor.
 */
int	redactor_reset(struct redactor *r, const struct redact_pat *pats,
	    size_t n);

/*
 * A number never given before in this process: the name of a pattern
 * list that never changes (a secret's forms), for redactor_reset_keyed().
 */
uint64_t redact_serial(void);

/*
 * As redactor_reset(), for patterns that are the lists named
 * keys[0..nkeys) in that order: when the last build was of the same
 * names, it is kept and only the stream starts again (the patterns must
 * be the same bytes: a name stands for one unchanging list).  More than
 * REDACT_MAX_KEYS names, or none, build as redactor_reset() does.  The
 * build stays (in guarded memory) until the next reset, or the free.
 */
int	redactor_reset_keyed(struct redactor *r, const struct redact_pat *pats,
	    size_t n, const uint64_t *keys, size_t nkeys);
/* 1 when r's build is of keys[0..nkeys) (nkeys > 0), else 0. */
int	redactor_keyed(const struct redactor *r, const uint64_t *keys,
	    size_t nkeys);

/*
 * Feeds in[0..len) and emits whatever can no longer be part of an
 * occurrence.  The emitted stream, once flushed, is the input with every
 * occurrence replaced, left to right: at each point the occurrence that
 * ends first is replaced (the longest of those ending at the same byte)
 * and the search resumes after it.  Returns 0, SL_ERR_IO (emit said stop:
 * the stream is then broken, and feeds and flushes return SL_ERR_IO
 * until the next reset) or SL_ERR_INVALID (no successful reset).  O(len)
 * for a fixed set of patterns; allocates nothing and copies nothing: the
 * bytes held back are a prefix of a pattern and are emitted from there.
 */
int	redactor_feed(struct redactor *r, const uint8_t *in, size_t len,
	    redact_emit emit, void *arg);
/*
 * The stream ended: emits the held-back bytes.  Returns 0, SL_ERR_IO or
 * SL_ERR_INVALID, as redactor_feed().  Feeding may go on after it, as a
 * new stream with the same patterns and count.
 */
int	redactor_flush(struct redactor *r, redact_emit emit, void *arg);

/*
 * From here until the next reset, an occurrence is replaced by as many
 * bytes as it had: REDACT_MARK followed by '*', or only '*' when it is
 * shorter than the mark.
 * For a body whose framing counts bytes the redactor cannot see (a gRPC
 * message's length prefix, a protobuf field's length): the count stays
 * right, and the credential is gone all the same.
 */
void	redactor_same_length(struct redactor *r, int on);

/* Occurrences replaced since the last reset. */
uint64_t redactor_count(const struct redactor *r);

/*
 * One-shot form for short texts (a header value): redacts in[0..len)
 * into out (out_len bytes; 10 * len always suffices).  Returns the
 * length written, or SL_ERR_TOO_BIG when out is too small (out is then
 * unspecified), SL_ERR_INVALID or SL_ERR_NOMEM as redactor_reset(); adds
 * the replacements made to *count when count is not NULL, on success.
 */
long	redact_buf(const struct redact_pat *pats, size_t n, const uint8_t *in,
	    size_t len, uint8_t *out, size_t out_len, uint64_t *count);

#endif
