/*
 * auditfmt.c: the audit trail's format -- bounding, canonical encoding,
 * sealing and signing records -- and the verifier of files of it.
 */
#include "autoconf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "util/err.h"
#include "util/utf8.h"
#include "keys/signkey.h"
#include "audit/auditfmt.h"

#define CANON_FLAGS	(JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII)
/*
 * A duplicate member would vanish from the re-encoding, and "\u0000" is
 * JSON that the encoder writes: both are read, then judged.
 */
#define LOAD_FLAGS	(JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL)
#define ARRAY_MAX	64
#define CUT_MARK	"...[cut]"
#define CUT_MARK_LEN	(sizeof(CUT_MARK) - 1)
#define SIG_B64_MAX	96	/* base64 of 64 bytes is 86 characters */
#define QUOTE_MAX	48	/* longest string from a file that why quotes */
#define WHERE_MAX	256	/* longest file name kept for why */
#define WHY_MAX		1024

static const char *const no_hash[] = { "hash", NULL };
static const char *const no_sig_hash[] = { "sig", "hash", NULL };

/* ---- strings ------------------------------------------------------------ */

/* Whether s[0..len) is UTF-8 as JSON allows it (no surrogates, overlongs). */
static int
utf8_valid(const char *s, size_t len)
{
	size_t i = 0;

	while (i < len)
		if (utf8_next((const unsigned char *)s, len, &i) < 0)
			return 0;
	return 1;
}

/* The length of the longest prefix of s, max bytes at most, that ends
 * at a character boundary. */
static size_t
utf8_floor(const char *s, size_t len, size_t max)
{
	size_t n = max;

	if (len <= max)
		return len;
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

static int
is_hash(const char *s, size_t len)
{
	size_t i;

	if (len != AUDIT_HASH_HEX)
		return 0;
	for (i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

static int
member_is_hash(const json_t *rec, const char *key)
{
	const json_t *v = json_object_get(rec, key);

	return json_is_string(v) &&
	    is_hash(json_string_value(v), json_string_length(v));
}

/* Whether member key of rec is the string s. */
static int
member_is(const json_t *rec, const char *key, const char *s)
{
	const json_t *v = json_object_get(rec, key);

	return json_is_string(v) && json_string_length(v) == strlen(s) &&
	    memcmp(json_string_value(v), s, strlen(s)) == 0;
}

/* rec's seq, or 0 when it has none that is a positive integer. */
static uint64_t
seq_of(const json_t *rec)
{
	const json_t *v = json_object_get(rec, "seq");

	if (!json_is_integer(v) || json_integer_value(v) < 1)
		return 0;
	return (uint64_t)json_integer_value(v);
}

/*
 * Copies s[0..len) into buf for a message: control characters and
 * non-ASCII bytes as '?', cut at QUOTE_MAX (or what buf holds) with "...".
 */
static void
quote(char *buf, size_t size, const char *s, size_t len)
{
	size_t i, max = QUOTE_MAX < size - 1 ? QUOTE_MAX : size - 1;

	for (i = 0; i < len && i < max; i++)
		buf[i] = (unsigned char)s[i] < 0x20 ||
		    (unsigned char)s[i] >= 0x7f ? '?' : s[i];
	if (i < len && i >= 3)
		memcpy(buf + i - 3, "...", 3);
	buf[i] = '\0';
}

static void
hash_hex(const char *s, size_t len, char hex[AUDIT_HASH_HEX + 1])
{
	uint8_t h[crypto_generichash_BYTES];

	crypto_generichash(h, sizeof(h), (const unsigned char *)s, len,
	    NULL, 0);
	sodium_bin2hex(hex, AUDIT_HASH_HEX + 1, h, sizeof(h));
}

/* ---- bounding ----------------------------------------------------------- */

/* Cuts a long string; 1 when it did. */
static int
bound_string(json_t *v)
{
	char buf[AUDIT_STR_MAX];
	size_t len = json_string_length(v), keep;

	if (len <= AUDIT_STR_MAX)
		return 0;
	keep = utf8_floor(json_string_value(v), len,
	    AUDIT_STR_MAX - CUT_MARK_LEN);
	memcpy(buf, json_string_value(v), keep);
	memcpy(buf + keep, CUT_MARK, CUT_MARK_LEN);
	/* A prefix of UTF-8 cut at a character boundary is UTF-8. */
	return json_string_setn_nocheck(v, buf, keep + CUT_MARK_LEN) == 0;
}

/* Bounds v (a container at depth) and what it holds; 1 when it cut. */
static int
bound_value(json_t *v, int depth)
{
	const char *key;
	json_t *item;
	size_t i;
	int cut = 0;

	/* Deeper is refused by auditfmt_seal; this bounds the recursion. */
	if (depth > AUDIT_DEPTH_MAX)
		return 0;
	switch (json_typeof(v)) {
	case JSON_STRING:
		return bound_string(v);
	case JSON_ARRAY:
		while (json_array_size(v) > ARRAY_MAX &&
		    json_array_remove(v, json_array_size(v) - 1) == 0)
			cut = 1;
		json_array_foreach(v, i, item)
			cut |= bound_value(item, depth + 1);
		return cut;
	case JSON_OBJECT:
		json_object_foreach(v, key, item)
			cut |= bound_value(item, depth + 1);
		return cut;
	default:
		return 0;
	}
}

void
auditfmt_bound(json_t *rec)
{
	if (json_is_object(rec) && bound_value(rec, 1))
		(void)json_object_set_new(rec, "cut", json_true());
}

/* ---- encoding ----------------------------------------------------------- */

/* Why v, a value at depth, cannot be in a record; NULL when it can. */
static const char *
value_problem(json_t *v, int depth)
{
	const char *key, *why;
	json_t *item;
	size_t i, klen;

	switch (json_typeof(v)) {
	case JSON_REAL:
		return "a real number (integers only)";
	case JSON_STRING:
		return utf8_valid(json_string_value(v), json_string_length(v)) ?
		    NULL : "a string that is not UTF-8";
	case JSON_ARRAY:
		if (depth > AUDIT_DEPTH_MAX)
			return "nested too deep";
		json_array_foreach(v, i, item)
			if ((why = value_problem(item, depth + 1)) != NULL)
				return why;
		return NULL;
	case JSON_OBJECT:
		if (depth > AUDIT_DEPTH_MAX)
			return "nested too deep";
		json_object_keylen_foreach(v, key, klen, item) {
			if (memchr(key, '\0', klen) != NULL ||
			    !utf8_valid(key, klen))
				return "a member name that is not UTF-8 "
				    "without NUL";
			if ((why = value_problem(item, depth + 1)) != NULL)
				return why;
		}
		return NULL;
	default:
		return NULL;
	}
}

/* Why rec cannot be a record (with its hash when with_hash), or NULL. */
static const char *
record_problem(json_t *rec, int with_hash)
{
	if (!json_is_string(json_object_get(rec, "ts")))
		return "no ts";
	if (!json_is_string(json_object_get(rec, "type")))
		return "no type";
	if (seq_of(rec) == 0)
		return "seq is not a positive integer";
	if (!member_is_hash(rec, "prev"))
		return "prev is not 64 lowercase hex digits";
	if (with_hash && !member_is_hash(rec, "hash"))
		return "hash is not 64 lowercase hex digits";
	return value_problem(rec, 1);
}

/* The canonical encoding of the object rec less the members drop[]. */
static char *
encode_without(json_t *rec, const char *const *drop)
{
	json_t *c;
	char *s;
	size_t i;
	int any = 0;

	for (i = 0; drop[i] != NULL; i++)
		if (json_object_get(rec, drop[i]) != NULL)
			any = 1;
	if (!any)
		return json_dumps(rec, CANON_FLAGS);
	/* Shallow: takes references to rec's members, changes none. */
	if ((c = json_copy(rec)) == NULL)
		return NULL;
	for (i = 0; drop[i] != NULL; i++)
		json_object_del(c, drop[i]);
	s = json_dumps(c, CANON_FLAGS);
	json_decref(c);
	return s;
}

char *
auditfmt_canonical(const json_t *rec)
{
	if (!json_is_object(rec))
		return NULL;
	/* encode_without changes neither rec nor what it holds. */
	return encode_without((json_t *)(uintptr_t)rec, no_hash);
}

/* Puts from's seq, prev and hash into rec. */
static int
adopt_seal(json_t *rec, json_t *from)
{
	static const char *const keys[] = { "seq", "prev", "hash" };
	size_t i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (json_object_set(rec, keys[i],
		    json_object_get(from, keys[i])) != 0)
			return SL_ERR_NOMEM;
	return 0;
}

/*
 * The next byte of the key whose encoding is at *p (in a canonical
 * string: escapes as jansson writes them), moving *p past it; -1 at the
 * closing quote.  A character past ASCII, as \uXXXX, is its UTF-8 lead
 * byte (0xc2 or more): all that ordering against ASCII needs.
 */
static int
key_byte(const char **p)
{
	const char *s = *p;
	unsigned cp = 0;
	int i;

	if (*s == '"')
		return -1;
	if (*s != '\\') {
		*p = s + 1;
		return (unsigned char)*s;
	}
	switch (s[1]) {
	case 'b':	*p = s + 2; return '\b';
	case 'f':	*p = s + 2; return '\f';
	case 'n':	*p = s + 2; return '\n';
	case 'r':	*p = s + 2; return '\r';
	case 't':	*p = s + 2; return '\t';
	case 'u':
		for (i = 2; i < 6; i++)
			cp = cp << 4 | (unsigned)(s[i] <= '9' ? s[i] - '0' :
			    (s[i] | 0x20) - 'a' + 10);
		*p = s + 6;
		/* The rest of a character past ASCII cannot matter here. */
		return cp < 0x80 ? (int)cp : cp < 0x800 ? 0xc0 | (int)(cp >> 6) :
		    cp >= 0xd800 && cp < 0xdc00 ? 0xf0 : 0xe0 | (int)(cp >> 12);
	default:	/* \" \\ \/ */
		*p = s + 2;
		return (unsigned char)s[1];
	}
}

/* The order of the key encoded at p (after its quote) against "hash". */
static int
key_vs_hash(const char *p)
{
	static const char h[] = "hash";
	int i, b;

	for (i = 0; i < 4; i++) {
		if ((b = key_byte(&p)) == -1)
			return -1;		/* a prefix of "hash" */
		if (b != (unsigned char)h[i])
			return b < (unsigned char)h[i] ? -1 : 1;
	}
	return key_byte(&p) == -1 ? 0 : 1;
}

/*
 * Where a top-level member named "hash" goes in canon, a canonical
 * object (members sorted by key bytes): before the first top-level key
 * that sorts after it, else before the closing brace.  canon comes from
 * jansson, so strings are well formed: a quote inside one is escaped.
 */
static size_t
hash_place(const char *canon)
{
	size_t i;
	int depth = 0, instr = 0, key;

	for (i = 0; canon[i] != '\0'; i++) {
		if (instr) {
			if (canon[i] == '\\')
				i++;
			else if (canon[i] == '"')
				instr = 0;
			continue;
		}
		switch (canon[i]) {
		case '"':
			/* A key of the top level: right after '{' or ','. */
			key = depth == 1 && (canon[i - 1] == '{' ||
			    canon[i - 1] == ',');
			/* Compared as key bytes, as the sort was: unescaped. */
			if (key && key_vs_hash(canon + i + 1) > 0)
				return i;
			instr = 1;
			break;
		case '{':
		case '[':
			depth++;
			break;
		case '}':
		case ']':
			if (--depth == 0)
				return i;
			break;
		}
	}
	return i;
}

/* canon with "hash":"h" in its sorted place and a newline: malloc'd. */
static char *
splice_hash(const char *canon, const char *h, size_t *len)
{
	size_t n = strlen(canon), at = hash_place(canon), o;
	int first = canon[at - 1] == '{', last = canon[at] == '}';
	char *out;

	/* "hash":"<64>" and a comma, and the newline */
	if ((out = malloc(n + 8 + AUDIT_HASH_HEX + 2 + 2)) == NULL)
		return NULL;
	memcpy(out, canon, at);
	o = at;
	if (last && !first)
		out[o++] = ',';
	o += (size_t)sprintf(out + o, "\"hash\":\"%s\"", h);
	if (!last)
		out[o++] = ',';
	memcpy(out + o, canon + at, n - at);
	o += n - at;
	out[o++] = '\n';
	out[o] = '\0';
	*len = o;
	return out;
}

int
auditfmt_seal(json_t *rec, uint64_t seq, const char *prev,
    char hash[AUDIT_HASH_HEX + 1], char **line, size_t *len)
{
	char h[AUDIT_HASH_HEX + 1], *canon = NULL, *full = NULL;
	json_t *c = NULL;
	size_t n;
	int r = SL_ERR_INVALID;

	if (!json_is_object(rec) || seq == 0 || seq > INT64_MAX ||
	    prev == NULL || !is_hash(prev, strlen(prev)) ||
	    (seq == 1) != (strcmp(prev, AUDIT_ZERO_HASH) == 0))
		goto out;
	/* Built aside, so that a refusal leaves rec as it was. */
	r = SL_ERR_NOMEM;
	if ((c = json_copy(rec)) == NULL)
		goto out;
	json_object_del(c, "hash");
	if (json_object_set_new(c, "seq", json_integer((json_int_t)seq)) != 0 ||
	    json_object_set_new(c, "prev", json_string(prev)) != 0)
		goto out;
	r = SL_ERR_INVALID;
	if (record_problem(c, 0) != NULL)
		goto out;
	r = SL_ERR_NOMEM;
	if ((canon = json_dumps(c, CANON_FLAGS)) == NULL)
		goto out;
	hash_hex(canon, strlen(canon), h);
	/* The line is canon with "hash" in its sorted place: spliced in. */
	if (json_object_set_new(c, "hash", json_string(h)) != 0 ||
	    (full = splice_hash(canon, h, &n)) == NULL)
		goto out;
	r = SL_ERR_TOO_BIG;
	if (n > AUDIT_LINE_MAX)
		goto out;
	if ((r = adopt_seal(rec, c)) != 0)
		goto out;
	memcpy(hash, h, sizeof(h));
	*line = full;
	full = NULL;	/* transferred */
	*len = n;	/* the newline included */
 out:
	free(full);
	free(canon);
	json_decref(c);
	return r;
}

int
auditfmt_checkpoint_sign(json_t *rec, const struct signkey *k)
{
	uint8_t sig[SIGNKEY_SIG_LEN];
	char b64[SIG_B64_MAX], *msg = NULL;
	const json_t *records = json_object_get(rec, "records");
	json_t *c = NULL;
	int r = SL_ERR_INVALID;

	if (!json_is_object(rec) || !member_is(rec, "type", "checkpoint") ||
	    !json_is_string(json_object_get(rec, "ts")) || seq_of(rec) == 0 ||
	    !member_is_hash(rec, "prev") || !json_is_integer(records) ||
	    json_integer_value(records) < 0)
		goto out;
	r = SL_ERR_NOMEM;
	if ((c = json_copy(rec)) == NULL ||
	    json_object_set_new(c, "key_id",
	    json_string(signkey_kid(k))) != 0 ||
	    (msg = encode_without(c, no_sig_hash)) == NULL)
		goto out;
	if ((r = signkey_sign(k, (const uint8_t *)msg, strlen(msg), sig)) != 0)
		goto out;
	sodium_bin2base64(b64, sizeof(b64), sig, sizeof(sig),
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	r = SL_ERR_NOMEM;
	if (json_object_set(rec, "key_id", json_object_get(c, "key_id")) != 0 ||
	    json_object_set_new(rec, "sig", json_string(b64)) != 0)
		goto out;
	r = 0;
 out:
	sodium_memzero(sig, sizeof(sig));
	free(msg);
	json_decref(c);
	return r;
}

/* ---- the verifier ------------------------------------------------------- */

struct audit_verifier {
	struct signpub	**pubs;		/* borrowed */
	size_t		  npubs;
	int		  flags;
	struct audit_verify_stats st;
	uint64_t	  since_cp;	/* records since the last checkpoint */
	int		  cp_seen;	/* so its "records" can be checked */
	int		  first_in_file;
	char		  cur[WHERE_MAX];	/* the file being read */
	uint64_t	  line;
	char		  last[WHERE_MAX];	/* where the last record was */
	uint64_t	  last_line;
	char		  torn[WHERE_MAX];	/* a torn line kept aside */
	uint64_t	  torn_line;
	int		  failed;	/* the error every call returns now */
	char		  why[WHY_MAX];
};

struct audit_verifier *
audit_verifier_new(struct signpub *const *pubs, size_t n, int flags)
{
	struct audit_verifier *v;

	if ((v = calloc(1, sizeof(*v))) == NULL)
		return NULL;
	if (n > 0 && (v->pubs = calloc(n, sizeof(*v->pubs))) == NULL) {
		free(v);
		return NULL;
	}
	if (n > 0)
		memcpy(v->pubs, pubs, n * sizeof(*v->pubs));
	v->npubs = n;
	v->flags = flags;
	return v;
}

void
audit_verifier_free(struct audit_verifier *v)
{
	if (v == NULL)
		return;
	free(v->pubs);
	free(v);
}

/*
 * Fails v for the line at file:line (file NULL: no place): "FILE:LINE:
 * seq N: what", or "what (after seq N)" when the line has no seq.
 */
static int __attribute__((format(printf, 6, 0)))
vfail_at(struct audit_verifier *v, int err, const char *file, uint64_t line,
    uint64_t seq, const char *fmt, va_list ap)
{
	char what[WHY_MAX], place[WHERE_MAX + 64] = "", after[48] = "";

	vsnprintf(what, sizeof(what), fmt, ap);
	if (file != NULL)
		snprintf(place, sizeof(place), "%s:%llu: ", file,
		    (unsigned long long)line);
	if (seq != 0)
		snprintf(place + strlen(place), sizeof(place) - strlen(place),
		    "seq %llu: ", (unsigned long long)seq);
	else if (v->st.records > 0)
		snprintf(after, sizeof(after), " (after seq %llu)",
		    (unsigned long long)v->st.last_seq);
	snprintf(v->why, sizeof(v->why), "%s%s%s", place, what, after);
	v->failed = err;
	return err;
}

static int __attribute__((format(printf, 6, 7)))
fail_at(struct audit_verifier *v, int err, const char *file, uint64_t line,
    uint64_t seq, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err = vfail_at(v, err, file, line, seq, fmt, ap);
	va_end(ap);
	return err;
}

/* Fails v as invalid at the line being checked. */
static int __attribute__((format(printf, 3, 4)))
fail(struct audit_verifier *v, uint64_t seq, const char *fmt, ...)
{
	va_list ap;
	int err;

	va_start(ap, fmt);
	err = vfail_at(v, SL_ERR_INVALID, v->cur, v->line, seq, fmt, ap);
	va_end(ap);
	return err;
}

static int
fail_nomem(struct audit_verifier *v, uint64_t seq)
{
	return fail_at(v, SL_ERR_NOMEM, v->cur, v->line, seq, "%s",
	    err_str(SL_ERR_NOMEM));
}

/* name for why: control characters as '?'; a long one keeps its end,
 * which is what tells rotated files apart. */
static void
set_place(char dst[WHERE_MAX], const char *name)
{
	size_t len = strlen(name);

	if (len < WHERE_MAX)
		memcpy(dst, name, len + 1);
	else
		snprintf(dst, WHERE_MAX, "...%s", name + len - (WHERE_MAX - 4));
	for (; *dst != '\0'; dst++)
		if ((unsigned char)*dst < 0x20 || *dst == 0x7f)
			*dst = '?';
}

/* " (the last record of FILE)" when rec begins a file after another. */
static const char *
file_hint(const struct audit_verifier *v, char *buf, size_t len)
{
	if (!v->first_in_file || v->st.files < 2 ||
	    strcmp(v->last, v->cur) == 0)
		return "";
	snprintf(buf, len, " (the last record of %s)", v->last);
	return buf;
}

/* seq and prev follow the record before (none: the trail starts here). */
static int
check_chain(struct audit_verifier *v, const json_t *rec, uint64_t seq)
{
	const char *prev = json_string_value(json_object_get(rec, "prev"));
	char hint[WHERE_MAX + 32];
	int zero = strcmp(prev, AUDIT_ZERO_HASH) == 0;

	if (seq == 1 && !zero)
		return fail(v, seq, "the first record of a trail has a prev "
		    "that is not zero");
	if (seq != 1 && zero)
		return fail(v, seq, "prev is zero, as only seq 1 has it");
	if (v->st.records == 0)
		return 0;
	/* Say whether it is another chain too: that is what splices show. */
	if (seq != v->st.last_seq + 1)
		return fail(v, seq, "seq %llu after seq %llu%s%s",
		    (unsigned long long)seq,
		    (unsigned long long)v->st.last_seq,
		    file_hint(v, hint, sizeof(hint)),
		    zero ? ": a new trail starts (prev is zero)" :
		    strcmp(prev, v->st.last_hash) != 0 ? ", and prev is not "
		    "its hash" : "");
	if (strcmp(prev, v->st.last_hash) != 0)
		return fail(v, seq, "prev is not the hash of seq %llu%s",
		    (unsigned long long)v->st.last_seq,
		    file_hint(v, hint, sizeof(hint)));
	return 0;
}

static const struct signpub *
find_pub(const struct audit_verifier *v, const json_t *kid)
{
	const char *k;
	size_t i;

	for (i = 0; i < v->npubs; i++) {
		k = signpub_kid(v->pubs[i]);
		if (k != NULL && strlen(k) == json_string_length(kid) &&
		    memcmp(k, json_string_value(kid), strlen(k)) == 0)
			return v->pubs[i];
	}
	return NULL;
}

/* The raw signature of a checkpoint's sig; 0 or -1. */
static int
sig_decode(const json_t *sig, uint8_t raw[SIGNKEY_SIG_LEN])
{
	const char *s = json_string_value(sig), *end = NULL;
	size_t len;

	if (s == NULL || sodium_base642bin(raw, SIGNKEY_SIG_LEN, s,
	    json_string_length(sig), NULL, &len, &end,
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
	    len != SIGNKEY_SIG_LEN || end != s + json_string_length(sig))
		return -1;
	return 0;
}

/* What a checkpoint promises: signed by a key given, counts right. */
static int
check_checkpoint(struct audit_verifier *v, json_t *rec, uint64_t seq)
{
	const json_t *kid = json_object_get(rec, "key_id");
	const json_t *n = json_object_get(rec, "records");
	const struct signpub *p;
	uint8_t raw[SIGNKEY_SIG_LEN];
	char q[QUOTE_MAX + 1], *msg = NULL;
	int r;

	if (!json_is_string(kid))
		return fail(v, seq, "checkpoint has no key_id");
	if (!json_is_integer(n) || json_integer_value(n) < 0)
		return fail(v, seq, "checkpoint has no records count");
	if (sig_decode(json_object_get(rec, "sig"), raw) != 0)
		return fail(v, seq, "checkpoint sig is not a base64url ES256 "
		    "signature");
	quote(q, sizeof(q), json_string_value(kid), json_string_length(kid));
	if (v->npubs == 0)
		return fail_at(v, SL_ERR_NOT_FOUND, v->cur, v->line, seq,
		    "checkpoint signed by key %s cannot be checked: no public "
		    "key given", q);
	if ((p = find_pub(v, kid)) == NULL)
		return fail_at(v, SL_ERR_NOT_FOUND, v->cur, v->line, seq,
		    "checkpoint signed by key %s, which is not one of the "
		    "public keys given", q);
	if ((msg = encode_without(rec, no_sig_hash)) == NULL)
		return fail_nomem(v, seq);
	r = signpub_verify(p, (const uint8_t *)msg, strlen(msg), raw);
	free(msg);
	if (r != 0)
		return fail(v, seq, "checkpoint signature does not verify");
	/*
	 * After a mid-chain start the first count covers unseen records (a
	 * first record, not yet in the stats, starts mid-chain unless seq 1).
	 */
	if ((v->cp_seen || (v->st.records == 0 ? seq == 1 :
	    !v->st.mid_chain)) &&
	    (uint64_t)json_integer_value(n) != v->since_cp)
		return fail(v, seq, "checkpoint counts %lld records, but %llu "
		    "came since %s", (long long)json_integer_value(n),
		    (unsigned long long)v->since_cp, v->cp_seen ?
		    "the checkpoint before" : "the start of the trail");
	return 0;
}

/* Takes a checked record into the stats. */
static void
account(struct audit_verifier *v, const json_t *rec, uint64_t seq,
    const char hash[AUDIT_HASH_HEX + 1])
{
	struct audit_verify_stats *st = &v->st;
	const json_t *s;

	if (st->records == 0) {
		st->first_seq = seq;
		snprintf(st->first_prev, sizeof(st->first_prev), "%s",
		    json_string_value(json_object_get(rec, "prev")));
		st->mid_chain = seq != 1;
	}
	st->records++;
	st->last_seq = seq;
	memcpy(st->last_hash, hash, AUDIT_HASH_HEX + 1);
	memcpy(v->last, v->cur, sizeof(v->last));
	v->last_line = v->line;
	v->first_in_file = 0;
	if (member_is(rec, "type", "audit_resumed")) {
		st->outages++;
		if (json_is_integer(s = json_object_get(rec, "refused_ms")) &&
		    json_integer_value(s) > 0)
			st->outage_ms += (uint64_t)json_integer_value(s);
		if (json_is_integer(s = json_object_get(rec, "refused")) &&
		    json_integer_value(s) > 0)
			st->outage_refused += (uint64_t)json_integer_value(s);
	}
	if (!member_is(rec, "type", "checkpoint")) {
		v->since_cp++;
		return;
	}
	st->checkpoints++;
	st->last_checkpoint_seq = seq;
	s = json_object_get(rec, "key_id");
	quote(st->last_kid, sizeof(st->last_kid), json_string_value(s),
	    json_string_length(s));
	s = json_object_get(rec, "ts");
	quote(st->last_checkpoint_ts, sizeof(st->last_checkpoint_ts),
	    json_string_value(s), json_string_length(s));
	v->since_cp = 0;
	v->cp_seen = 1;
}

/* Whether line[0..len) is exactly the canonical encoding of rec. */
static int
is_canonical(json_t *rec, const char *line, size_t len, int *nomem)
{
	char *enc;
	int same;

	if ((enc = json_dumps(rec, CANON_FLAGS)) == NULL) {
		*nomem = 1;
		return 0;
	}
	same = strlen(enc) == len && memcmp(enc, line, len) == 0;
	free(enc);
	return same;
}

/* Checks a record whose hash matches: its place in the chain, its sig. */
static int
check_record(struct audit_verifier *v, json_t *rec, uint64_t seq,
    const char hash[AUDIT_HASH_HEX + 1])
{
	int r;

	if ((r = check_chain(v, rec, seq)) != 0)
		return r;
	if (member_is(rec, "type", "checkpoint") &&
	    (r = check_checkpoint(v, rec, seq)) != 0)
		return r;
	account(v, rec, seq, hash);
	return 0;
}

/* Checks one whole line, line[0..len) without its "\n". */
static int
check_line(struct audit_verifier *v, const char *line, size_t len)
{
	char h[AUDIT_HASH_HEX + 1], *enc = NULL;
	json_error_t jerr;
	json_t *rec = NULL;
	const char *what;
	uint64_t seq = 0;
	int r, nomem = 0;

	v->line++;
	if (len + 1 > AUDIT_LINE_MAX) {
		r = fail(v, 0, "line too long (over %u bytes)", AUDIT_LINE_MAX);
		goto out;
	}
	if ((rec = json_loadb(line, len, LOAD_FLAGS, &jerr)) == NULL) {
		r = fail(v, 0, "not JSON (at byte %d)", jerr.position);
		goto out;
	}
	if (!json_is_object(rec)) {
		r = fail(v, 0, "not a JSON object");
		goto out;
	}
	seq = seq_of(rec);
	if ((what = record_problem(rec, 1)) != NULL) {
		r = fail(v, seq, "%s", what);
		goto out;
	}
	if (!is_canonical(rec, line, len, &nomem)) {
		r = nomem ? fail_nomem(v, seq) : fail(v, seq, "not canonical");
		goto out;
	}
	if ((enc = encode_without(rec, no_hash)) == NULL) {
		r = fail_nomem(v, seq);
		goto out;
	}
	hash_hex(enc, strlen(enc), h);
	if (!member_is(rec, "hash", h)) {
		r = fail(v, seq, "hash does not match");
		goto out;
	}
	r = check_record(v, rec, seq, h);
 out:
	free(enc);
	json_decref(rec);
	return r;
}

/* A last line without its "\n", len bytes. */
static int
check_torn(struct audit_verifier *v, size_t len)
{
	v->line++;
	if (len + 1 > AUDIT_LINE_MAX)
		return fail(v, 0, "line too long (over %u bytes)",
		    AUDIT_LINE_MAX);
	if (!(v->flags & AUDIT_VERIFY_OPEN))
		return fail(v, 0, "torn line (no newline)");
	/* Perhaps being written: fine if no other file follows. */
	memcpy(v->torn, v->cur, sizeof(v->torn));
	v->torn_line = v->line;
	v->st.torn = 1;
	v->st.torn_bytes = len;
	return 0;
}

static int
file_begin(struct audit_verifier *v, const char *name)
{
	if (v->failed != 0)
		return v->failed;
	if (v->st.torn)
		return fail_at(v, SL_ERR_INVALID, v->torn, v->torn_line, 0,
		    "torn line (no newline), and another file follows");
	set_place(v->cur, name);
	v->line = 0;
	v->first_in_file = 1;
	v->st.files++;
	return 0;
}

static int
give_why(const struct audit_verifier *v, int r, char *why, size_t why_len)
{
	if (r != 0 && why != NULL && why_len > 0)
		snprintf(why, why_len, "%s", v->why);
	return r;
}

int
audit_verifier_mem(struct audit_verifier *v, const char *name,
    const void *buf, size_t len, char *why, size_t why_len)
{
	const char *p = buf, *end = p + len, *nl;
	int r;

	if ((r = file_begin(v, name)) != 0)
		goto out;
	while (p < end) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL) {
			r = check_torn(v, (size_t)(end - p));
			goto out;
		}
		if ((r = check_line(v, p, (size_t)(nl - p))) != 0)
			goto out;
		p = nl + 1;
	}
 out:
	return give_why(v, r, why, why_len);
}

/* Reads fd to the end, checking each line; a line fits in buf. */
static int
check_fd(struct audit_verifier *v, int fd, char *buf)
{
	size_t have = 0, rest;
	char *p, *nl;
	ssize_t n;
	int r;

	for (;;) {
		n = read(fd, buf + have, AUDIT_LINE_MAX - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail_at(v, SL_ERR_IO, v->cur, v->line + 1, 0,
			    "cannot read: %s", strerror(errno));
		if (n == 0)
			return have > 0 ? check_torn(v, have) : 0;
		have += (size_t)n;
		for (p = buf; (nl = memchr(p, '\n',
		    have - (size_t)(p - buf))) != NULL; p = nl + 1)
			if ((r = check_line(v, p, (size_t)(nl - p))) != 0)
				return r;
		rest = have - (size_t)(p - buf);
		memmove(buf, p, rest);
		have = rest;
		if (have == AUDIT_LINE_MAX) {
			v->line++;
			return fail(v, 0, "line too long (over %u bytes)",
			    AUDIT_LINE_MAX);
		}
	}
}

int
audit_verifier_file(struct audit_verifier *v, const char *path,
    char *why, size_t why_len)
{
	char *buf = NULL;
	int fd = -1, r;

	if ((r = file_begin(v, path)) != 0)
		goto out;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		r = fail_at(v, SL_ERR_IO, NULL, 0, 0, "%s: %s", v->cur,
		    strerror(errno));
		goto out;
	}
	if ((buf = malloc(AUDIT_LINE_MAX)) == NULL) {
		r = fail_nomem(v, 0);
		goto out;
	}
	r = check_fd(v, fd, buf);
 out:
	free(buf);
	if (fd != -1)
		close(fd);
	return give_why(v, r, why, why_len);
}

int
audit_verifier_finish(struct audit_verifier *v, char *why, size_t why_len)
{
	int r = v->failed;

	if (r != 0 || (v->flags & AUDIT_VERIFY_OPEN))
		goto out;
	if (v->st.records == 0)
		r = fail_at(v, SL_ERR_INVALID, NULL, 0, 0, "no records");
	else if (v->since_cp > 0 && v->cp_seen)
		r = fail_at(v, SL_ERR_INVALID, v->last, v->last_line,
		    v->st.last_seq, "the trail ends without a checkpoint "
		    "(%llu %s after the one at seq %llu)",
		    (unsigned long long)v->since_cp,
		    v->since_cp == 1 ? "record" : "records",
		    (unsigned long long)v->st.last_checkpoint_seq);
	else if (v->since_cp > 0)
		r = fail_at(v, SL_ERR_INVALID, v->last, v->last_line,
		    v->st.last_seq, "the trail ends without a checkpoint "
		    "(there is none in %llu %s)",
		    (unsigned long long)v->since_cp,
		    v->since_cp == 1 ? "record" : "records");
 out:
	return give_why(v, r, why, why_len);
}

void
audit_verifier_stats(const struct audit_verifier *v,
    struct audit_verify_stats *st)
{
	*st = v->st;
	st->unsigned_tail = v->since_cp;
}
