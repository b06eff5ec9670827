/*
 * auditfmt.h: the audit trail's format -- how a record is bounded,
 * chained, hashed and written as one line, how checkpoints are signed --
 * and the verifier that checks files of it (sluicectl audit verify).
 *
 * Canonical encoding: the record as a JSON object without its "hash"
 * member, written by jansson with JSON_COMPACT | JSON_SORT_KEYS |
 * JSON_ENSURE_ASCII (members sorted by key bytes, no whitespace, every
 * non-ASCII character as \uXXXX; integers only, no reals).  "hash" is the
 * lowercase hex BLAKE2b-256 of those bytes.  The line written is the same
 * encoding of the record with "hash", then "\n": so a verifier parses a
 * line, writes it again, and any byte changed anywhere shows as a line
 * that is not canonical or a hash that does not match.
 *
 * Every record has "ts" (UTC, milliseconds: 2026-12-01T05:40:28.123Z),
 * "seq" (1, 2, ... across files and restarts), "type", "prev" (the hash
 * of the record before it; 64 zeros for the first record of a new
 * trail), "hash".  A checkpoint ("type":"checkpoint") also has "key_id"
 * (the signing key's kid), "records" (records since the last checkpoint:
 * those between it and the checkpoint before it, so its seq minus that
 * one's minus 1; for a trail's first checkpoint, its seq minus 1) and
 * "sig": base64url without padding of the ES256 signature over the
 * canonical encoding of the checkpoint without "sig" and "hash" -- so it
 * covers its own seq and prev, the chain head.
 *
 * doc/audit-format.md says the same for operators, with what a verifier
 * can and cannot detect.
 */
#ifndef SLUICE_AUDITFMT_H
#define SLUICE_AUDITFMT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct signkey;
struct signpub;

#define AUDIT_HASH_HEX	64
#define AUDIT_STR_MAX	1024	/* longest string value kept whole */
#define AUDIT_LINE_MAX	(64u * 1024)	/* longest line, "\n" included */
#define AUDIT_DEPTH_MAX	32	/* deepest nesting of arrays and objects */
#define AUDIT_ZERO_HASH	\
	"0000000000000000000000000000000000000000000000000000000000000000"

/*
 * Bounds rec in place: every string value (at any depth) longer than
 * AUDIT_STR_MAX bytes is cut (at a UTF-8 character boundary) so that,
 * with "...[cut]" added, it is AUDIT_STR_MAX bytes at most -- so bounding
 * twice changes nothing; arrays longer than 64 items lose the rest; the
 * record gets "cut": true when anything was cut.  Best effort when out
 * of memory (a string is then left whole): auditfmt_seal still refuses a
 * line over AUDIT_LINE_MAX.
 */
void	auditfmt_bound(json_t *rec);

/* The canonical encoding of rec without "hash" (malloc'd), or NULL. */
char	*auditfmt_canonical(const json_t *rec);

/*
 * Finishes rec as record number seq after the record whose hash is prev:
 * sets "seq" and "prev", drops any "hash", computes and sets "hash" (also
 * copied into hash[], NUL-terminated), and writes the line ("\n"
 * included) into *line (malloc'd) and *len.  rec must already have "ts"
 * and "type" (strings).  Returns 0, SL_ERR_INVALID (not an object, no ts
 * or type, a real number somewhere, nesting deeper than AUDIT_DEPTH_MAX,
 * a string that is not UTF-8, a NUL in a key, seq 0 or over INT64_MAX,
 * prev not 64 lowercase hex digits, or zero with a seq other than 1 or
 * not zero with seq 1), SL_ERR_TOO_BIG (the line would be
 * over AUDIT_LINE_MAX: call auditfmt_bound first) or SL_ERR_NOMEM.  On
 * failure rec is as it was.  Whatever it seals, the verifier accepts.
 */
int	auditfmt_seal(json_t *rec, uint64_t seq, const char *prev,
	    char hash[AUDIT_HASH_HEX + 1], char **line, size_t *len);

/*
 * Signs a checkpoint record (type "checkpoint", with ts, seq, prev and
 * records set): sets "key_id" and "sig".  Call before auditfmt_seal...
 * which then must not change seq or prev: so the writer sets seq and prev
 * first, signs, then seals with the same seq and prev.  Returns 0,
 * SL_ERR_INVALID (one of those missing or of the wrong type),
 * SL_ERR_INTERNAL (signing failed) or SL_ERR_NOMEM; on failure rec is as
 * it was.
 */
int	auditfmt_checkpoint_sign(json_t *rec, const struct signkey *k);

/* Verifying files: one verifier for a list of files in order. */
struct audit_verifier;

#define AUDIT_VERIFY_OPEN	0x1	/* the last file may still be written:
					 * a torn last line or records after
					 * the last checkpoint are reported,
					 * not errors */

/*
 * pubs may be empty (n 0): checkpoints are then errors ("no key").  The
 * keys are borrowed: they must outlive the verifier.  NULL when out of
 * memory.
 */
struct audit_verifier *audit_verifier_new(struct signpub *const *pubs,
	    size_t n, int flags);
void	audit_verifier_free(struct audit_verifier *v);	/* accepts NULL */

/*
 * Checks the file at path (opened and read here, line by line, each at
 * most AUDIT_LINE_MAX bytes) as the next file of the trail: its first
 * record must follow the last record of the file before it (seq and
 * prev), or, for the first file, may start anywhere.  Returns 0, or
 * SL_ERR_INVALID with why[] (why_len bytes) naming the first bad record:
 * "FILE:LINE: seq N: WHAT" (e.g. "hash does not match", "prev is not the
 * hash of seq N-1", "seq 7 after seq 5", "checkpoint signature does not
 * verify", "not canonical", "not JSON", "torn line (no newline)"),
 * SL_ERR_NOT_FOUND (why as for SL_ERR_INVALID) when a checkpoint is
 * signed by a key that is not in pubs (or pubs is empty): the trail may
 * be sound but cannot be checked, or SL_ERR_IO when it cannot be read.
 * With AUDIT_VERIFY_OPEN a torn last line is kept aside: the next file
 * given (it was not the last one after all) fails on it.  After a
 * failure every call fails again with the same why.  Strings from the
 * file that why quotes are cut short and have their control characters
 * replaced by '?'.
 */
int	audit_verifier_file(struct audit_verifier *v, const char *path,
	    char *why, size_t why_len);

/*
 * After the last file: the trail must end with a checkpoint (sluiced
 * writes one at every rotation and clean shutdown), unless
 * AUDIT_VERIFY_OPEN, and hold a record.  Returns 0, SL_ERR_INVALID (why
 * as above), or the error of an earlier call.
 */
int	audit_verifier_finish(struct audit_verifier *v, char *why,
	    size_t why_len);

struct audit_verify_stats {
	uint64_t	records, checkpoints, files;
	uint64_t	first_seq, last_seq, last_checkpoint_seq;
	uint64_t	unsigned_tail;	/* records after the last checkpoint */
	/* audit_resumed records: the writer's outages, and what they cost. */
	uint64_t	outages, outage_ms, outage_refused;
	int		torn;		/* the last line was torn (OPEN only) */
	size_t		torn_bytes;
	/*
	 * The first record is not seq 1 with the zero prev: the files start
	 * in the middle of a trail, what came before is not checked, nor
	 * the "records" of the first checkpoint.  first_prev is its prev.
	 */
	int		mid_chain;
	char		first_prev[AUDIT_HASH_HEX + 1];
	char		last_hash[AUDIT_HASH_HEX + 1];	/* the chain head */
	char		last_kid[64];
	char		last_checkpoint_ts[32];	/* "" when none */
};
/* What was checked so far (files counts those begun). */
void	audit_verifier_stats(const struct audit_verifier *v,
	    struct audit_verify_stats *st);

/*
 * For tests and fuzzers: as audit_verifier_file with the file's bytes
 * buf[0..len) in memory, named name in why.
 */
int	audit_verifier_mem(struct audit_verifier *v, const char *name,
	    const void *buf, size_t len, char *why, size_t why_len);

#endif
