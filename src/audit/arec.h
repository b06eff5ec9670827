/*
 * arec.h: an audit record built flat, without a JSON tree.
 *
 * The data path writes a record per connection and per request; building
 * each as a jansson tree, then copying, sorting and dumping it in the
 * writer thread, cost more CPU than relaying the request.  A record here
 * is encoded member by member, as it is set, straight into the canonical
 * form of auditfmt.h (compact, ASCII only, every non-ASCII character as
 * \uXXXX the way jansson writes it); arec_finish sorts the members into
 * one block, and the writer splices in "seq", "prev" and "hash" and
 * hashes the line as it copies it into its buffer.  A line written so is
 * byte for byte the line auditfmt_seal writes for the same record.
 *
 * Strings are bounded as auditfmt_bound bounds them (AUDIT_STR_MAX, cut
 * at a character boundary, "...[cut]" added, "cut": true); bytes that
 * are not UTF-8 become U+FFFD, so a name a sandbox made up always has a
 * record.  Keys are the caller's constants: plain ASCII without
 * anything to escape.  "seq", "prev" and "hash" are the writer's.
 */
#ifndef SLUICE_AREC_H
#define SLUICE_AREC_H

#include <stddef.h>
#include <stdint.h>

#include "audit/auditfmt.h"

#define AREC_BYTES	(16u * 1024)	/* encoded members, at most */
#define AREC_MEMBERS	32

struct arec {
	size_t		 len, n;
	int		 dropped;	/* a member did not fit: left out */
	int		 any_cut;	/* some member's value was cut */
	int		 finishing;	/* arec_finish adds its members */
	struct {
		const char *key;
		uint32_t    off, len;	/* of ,"key":value in buf */
		int	    cut;	/* its value was cut */
	}		 m[AREC_MEMBERS];
	char		 buf[AREC_BYTES];
};

/* A record ready for the writer: its members sorted, "ts" and "type" in. */
struct aflat {
	uint32_t	 len;
	uint32_t	 at_hash, at_prev, at_seq;	/* where those go */
	char		 body[];	/* ,"key":value,... sorted by key */
};

#define AREC_TS_LEN	32	/* 2026-12-01T05:40:28.123Z and its NUL, and room */

/* The time now as records have it (UTC, milliseconds). */
void	arec_ts(char buf[AREC_TS_LEN]);

void	arec_init(struct arec *r);
/* A string member; s NULL: the value is null. */
void	arec_str(struct arec *r, const char *key, const char *s);
void	arec_strn(struct arec *r, const char *key, const char *s, size_t len);
void	arec_int(struct arec *r, const char *key, int64_t v);
void	arec_bool(struct arec *r, const char *key, int v);
/*
 * A member whose value is already canonical JSON (an array or object
 * built with arec_json_* below, its members in key order).
 */
/*
 * The record so far as one JSON object with "type" first (no "ts"; a key
 * set twice is there twice, the last counts), NUL-terminated in out; its
 * length, or 0 when it does not fit in cap.
 */
size_t	arec_json(const struct arec *r, const char *type, char *out,
	    size_t cap);
void	arec_raw(struct arec *r, const char *key, const char *json,
	    size_t len);

/*
 * Appends the canonical JSON string of s[0..len) (quotes included,
 * bounded and escaped as above) to out[*off..cap).  Returns 0, 1 when the
 * string was cut, or -1 when it does not fit: *off is then unchanged
 * (bytes past it may have been written).  For building arec_raw values,
 * which are not bounded further: their builder keeps them small.
 */
int	arec_json_str(char *out, size_t cap, size_t *off, const char *s,
	    size_t len);

/*
 * Adds "ts" (now) and "type", sorts, and returns the record for the
 * writer (malloc'd, one block), or NULL when out of memory.  A key set
 * twice keeps its last value.
 */
struct aflat *arec_finish(struct arec *r, const char *type);

/*
 * Seals f as record seq after prev (as auditfmt_seal): writes its line,
 * "\n" included, to out[0..cap) and its hash to hash[].  Returns the
 * line's length, or 0 when it does not fit (cap AUDIT_LINE_MAX always
 * fits what arec_finish returns).
 */
size_t	aflat_seal(const struct aflat *f, uint64_t seq, const char *prev,
	    char hash[AUDIT_HASH_HEX + 1], char *out, size_t cap);

#endif
