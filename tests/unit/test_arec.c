/*
 * test_arec.c: audit records built flat (arec.h) against the jansson
 * path they stand in for.  The same members go into an arec and into a
 * json_t object; the arec is finished and sealed with aflat_seal, the
 * object bounded and sealed with auditfmt_seal, and the two lines and
 * hashes must be the same bytes: for fixed records, for a few thousand
 * drawn from a fixed seed, for strings that are not UTF-8 (replaced,
 * byte by byte, as arec.c says), in a chain the verifier walks, past
 * the bounds of a record, and with nested values given raw.
 */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <jansson.h>
#include <sodium.h>

#include "util/err.h"
#include "audit/auditfmt.h"
#include "audit/arec.h"

#define CANON_FLAGS	(JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII)
#define NRANDOM		3000
#define MAXOPS		64
#define CUT_MARK	"...[cut]"
#define CUT_MARK_LEN	(sizeof(CUT_MARK) - 1)
/*
 * What a record's members may take and still be sure to fit, with room
 * for what arec_finish adds and the slack arec_json_str wants: records
 * drawn under it are never cut for size, so jansson has the same ones.
 */
#define USER_MEMBERS	(AREC_MEMBERS - 3)
#define USER_BYTES	(AREC_BYTES - 256)
/* A record's time, as auditfmt.h has it; AREC_TS_LEN is a buffer's size. */
#define TS_CHARS	(sizeof("2026-12-01T05:40:28.123Z") - 1)

/* One member set on a record, the same way on both paths. */
enum kind { K_STR, K_CSTR, K_NULL, K_INT, K_BOOL, K_RAW };

struct op {
	const char	*key;
	enum kind	 kind;
	const char	*s;	/* K_STR, K_CSTR, K_RAW */
	size_t		 len;	/* K_STR, K_RAW */
	int64_t		 v;	/* K_INT, K_BOOL */
};

/* A sealed line and its hash, from aflat_seal. */
struct sealed {
	char		 line[AUDIT_LINE_MAX];
	size_t		 len;
	char		 hash[AUDIT_HASH_HEX + 1];
};

static int
group_setup(void **state)
{
	return sodium_init() < 0 ? -1 : 0;
}

/* ---- a reference for strings that are not UTF-8 ------------------------- */

/*
 * The length of the well-formed UTF-8 sequence at s[0..len) after the
 * Unicode standard's table 3-7, or 0: written from the table, not from
 * arec.c, so that the two can disagree.
 */
static size_t
wf_len(const unsigned char *s, size_t len)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n, k;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] == 0xe0) {
		n = 3;
		lo = 0xa0;
	} else if (s[0] == 0xed) {
		n = 3;
		hi = 0x9f;
	} else if (s[0] >= 0xe1 && s[0] <= 0xef)
		n = 3;
	else if (s[0] == 0xf0) {
		n = 4;
		lo = 0x90;
	} else if (s[0] == 0xf4) {
		n = 4;
		hi = 0x8f;
	} else if (s[0] >= 0xf1 && s[0] <= 0xf3)
		n = 4;
	else
		return 0;
	if (len < n || s[1] < lo || s[1] > hi)
		return 0;
	for (k = 2; k < n; k++)
		if (s[k] < 0x80 || s[k] > 0xbf)
			return 0;
	return n;
}

/*
 * s[0..len) made UTF-8 as arec.h promises: each byte that does not begin
 * a well-formed sequence is one U+FFFD.  malloc'd; its length in *out.
 */
static char *
utf8_fix(const char *str, size_t len, size_t *out)
{
	const unsigned char *s = (const unsigned char *)str;
	char *buf;
	size_t i = 0, o = 0, n;

	buf = malloc(3 * len + 1);
	assert_non_null(buf);
	while (i < len) {
		if ((n = wf_len(s + i, len - i)) == 0) {
			memcpy(buf + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
			continue;
		}
		memcpy(buf + o, s + i, n);
		o += n;
		i += n;
	}
	buf[o] = '\0';
	*out = o;
	return buf;
}

static int
utf8_ok(const char *s, size_t len)
{
	size_t i, n;

	for (i = 0; i < len; i += n)
		if ((n = wf_len((const unsigned char *)s + i, len - i)) == 0)
			return 0;
	return 1;
}

/* ---- both paths --------------------------------------------------------- */

static void
apply_arec(struct arec *r, const struct op *ops, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		switch (ops[i].kind) {
		case K_STR:
			arec_strn(r, ops[i].key, ops[i].s, ops[i].len);
			break;
		case K_CSTR:
		case K_NULL:
			arec_str(r, ops[i].key, ops[i].s);
			break;
		case K_INT:
			arec_int(r, ops[i].key, ops[i].v);
			break;
		case K_BOOL:
			arec_bool(r, ops[i].key, (int)ops[i].v);
			break;
		case K_RAW:
			arec_raw(r, ops[i].key, ops[i].s, ops[i].len);
			break;
		}
	}
}

/* The jansson value op sets; strings made UTF-8 first (see utf8_fix). */
static json_t *
op_json(const struct op *op)
{
	json_error_t jerr;
	json_t *v = NULL;
	char *fixed;
	size_t flen;

	switch (op->kind) {
	case K_STR:
	case K_CSTR:
		fixed = utf8_fix(op->s, op->kind == K_STR ? op->len :
		    strlen(op->s), &flen);
		v = json_stringn(fixed, flen);
		free(fixed);
		break;
	case K_NULL:
		v = json_null();
		break;
	case K_INT:
		v = json_integer((json_int_t)op->v);
		break;
	case K_BOOL:
		v = json_boolean(op->v);
		break;
	case K_RAW:
		v = json_loadb(op->s, op->len, JSON_DECODE_ANY |
		    JSON_ALLOW_NUL, &jerr);
		break;
	}
	assert_non_null(v);
	return v;
}

static json_t *
apply_json(const struct op *ops, size_t n)
{
	json_t *rec;
	size_t i;

	assert_non_null(rec = json_object());
	for (i = 0; i < n; i++)
		assert_int_equal(json_object_set_new(rec, ops[i].key,
		    op_json(&ops[i])), 0);
	return rec;
}

/*
 * The top-level "ts" of f: arec_finish takes the time itself, so the
 * jansson record is given the one it took.
 */
static void
body_ts(const struct aflat *f, char ts[AREC_TS_LEN])
{
	static const char pat[] = ",\"ts\":\"";
	const size_t plen = sizeof(pat) - 1;
	size_t i;
	int depth = 0, instr = 0;

	for (i = 0; i < f->len; i++) {
		if (instr) {
			if (f->body[i] == '\\')
				i++;
			else if (f->body[i] == '"')
				instr = 0;
			continue;
		}
		switch (f->body[i]) {
		case '"':
			instr = 1;
			break;
		case '[':
		case '{':
			depth++;
			break;
		case ']':
		case '}':
			depth--;
			break;
		case ',':
			if (depth != 0 || f->len - i < plen + TS_CHARS + 1 ||
			    memcmp(f->body + i, pat, plen) != 0)
				break;
			memcpy(ts, f->body + i + plen, TS_CHARS);
			ts[TS_CHARS] = '\0';
			if (f->body[i + plen + TS_CHARS] != '"' ||
			    ts[10] != 'T' || ts[19] != '.' ||
			    ts[TS_CHARS - 1] != 'Z')
				fail_msg("ts is not as auditfmt.h has it: %.*s",
				    (int)(f->len - i < 40 ? f->len - i : 40),
				    f->body + i);
			return;
		}
	}
	fail_msg("no top-level ts in the finished record");
}

/* Says where two lines part, then fails; a line is 64K at most. */
static void
assert_same_line(const char *got, size_t glen, const char *want,
    size_t wlen, const char *what)
{
	size_t i, from;

	if (glen == wlen && memcmp(got, want, glen) == 0)
		return;
	for (i = 0; i < glen && i < wlen && got[i] == want[i]; i++)
		;
	from = i > 40 ? i - 40 : 0;
	print_message("%s: lines differ at byte %zu (arec %zu bytes, "
	    "jansson %zu)\n  arec:    ...%.*s\n  jansson: ...%.*s\n", what, i,
	    glen, wlen, (int)(glen - from < 100 ? glen - from : 100),
	    got + from, (int)(wlen - from < 100 ? wlen - from : 100),
	    want + from);
	fail_msg("%s: aflat_seal and auditfmt_seal disagree", what);
}

/* Whether the verifier takes buf[0..len) as a trail file, still open. */
static int
verify(const char *buf, size_t len, char *why, size_t why_len)
{
	struct audit_verifier *v;
	int r;

	assert_non_null(v = audit_verifier_new(NULL, 0, AUDIT_VERIFY_OPEN));
	why[0] = '\0';
	r = audit_verifier_mem(v, "arec.log", buf, len, why, why_len);
	audit_verifier_free(v);
	return r;
}

static void
assert_verifies(const char *buf, size_t len)
{
	char why[512];

	if (verify(buf, len, why, sizeof(why)) != 0)
		fail_msg("the verifier refuses: %s\n  line: %.*s", why,
		    (int)(len < 300 ? len : 300), buf);
}

/* ops on an arec, finished as type and sealed; *fp is the aflat. */
static void
flat_seal(const struct op *ops, size_t n, const char *type, uint64_t seq,
    const char *prev, struct sealed *out, struct aflat **fp)
{
	struct arec *r;
	struct aflat *f;

	assert_non_null(r = malloc(sizeof(*r)));
	arec_init(r);
	apply_arec(r, ops, n);
	assert_non_null(f = arec_finish(r, type));
	free(r);
	assert_true(f->len <= AREC_BYTES);
	out->len = aflat_seal(f, seq, prev, out->hash, out->line,
	    sizeof(out->line));
	assert_true(out->len > 0);
	assert_int_equal(out->line[out->len - 1], '\n');
	assert_int_equal(strlen(out->hash), AUDIT_HASH_HEX);
	*fp = f;
}

/*
 * Seals ops both ways and asserts the same line and hash; the line
 * aflat_seal wrote is left in *out (NULL: not wanted).
 */
static void
check_same(const struct op *ops, size_t n, const char *type, uint64_t seq,
    const char *prev, const char *what, struct sealed *out)
{
	static struct sealed mine;
	char ts[AREC_TS_LEN], h[AUDIT_HASH_HEX + 1], *line = NULL;
	struct aflat *f;
	json_t *rec;
	size_t len;
	int r;

	flat_seal(ops, n, type, seq, prev, &mine, &f);
	body_ts(f, ts);
	free(f);
	rec = apply_json(ops, n);
	assert_int_equal(json_object_set_new(rec, "ts", json_string(ts)), 0);
	assert_int_equal(json_object_set_new(rec, "type", json_string(type)),
	    0);
	auditfmt_bound(rec);
	r = auditfmt_seal(rec, seq, prev, h, &line, &len);
	if (r != 0)
		fail_msg("%s: auditfmt_seal: %s", what, err_str(r));
	assert_same_line(mine.line, mine.len, line, len, what);
	assert_string_equal(mine.hash, h);
	free(line);
	json_decref(rec);
	if (out != NULL)
		*out = mine;
}

/* A record of ops alone, sealed first in a trail. */
static void
check_one(const struct op *ops, size_t n, const char *what)
{
	check_same(ops, n, "request", 1, AUDIT_ZERO_HASH, what, NULL);
}

#define STR(k, s)	{ (k), K_STR, (s), sizeof(s) - 1, 0 }
#define CSTR(k, s)	{ (k), K_CSTR, (s), 0, 0 }
#define STRN(k, s, n)	{ (k), K_STR, (s), (n), 0 }
#define NUL_(k)		{ (k), K_NULL, NULL, 0, 0 }
#define INT(k, v)	{ (k), K_INT, NULL, 0, (v) }
#define BOOL(k, v)	{ (k), K_BOOL, NULL, 0, (v) }
#define NOPS(a)		(sizeof(a) / sizeof((a)[0]))

/* ---- fixed records ------------------------------------------------------ */

static void
test_fixed_scalars(void **state)
{
	static const struct op none[1];
	static const struct op basic[] = {
		CSTR("sandbox", "box-1"), CSTR("method", "GET"),
		CSTR("host", "api.example.test"),
		CSTR("target", "/v1/items?id=7&x=/y"), INT("revision", 42),
		INT("n", 0), BOOL("intercepted", 1), BOOL("tls", 0),
		NUL_("rule"), STR("reason", ""), CSTR("action", "allow"),
	};
	static const struct op ints[] = {
		INT("a", INT64_MIN), INT("b", INT64_MAX), INT("c", -1),
		INT("d", 1), INT("e", 1000000007), BOOL("f", 7),
	};
	/* Keys on each side of those the writer splices in. */
	static const struct op keys[] = {
		INT("A", 1), INT("_", 2), INT("0", 3), INT("a", 4),
		INT("has", 5), INT("hasgz", 6), INT("hash0", 7), INT("hat", 8),
		INT("pre", 9), INT("preuz", 10), INT("prev0", 11),
		INT("prew", 12), INT("se", 13), INT("sepz", 14),
		INT("seq0", 15), INT("seqz", 16), INT("sf", 17), INT("tr", 18),
		INT("ts0", 19), INT("typ", 20), INT("type0", 21), INT("z", 22),
		INT("~", 23),
	};
	/* Only keys after "seq", or only before "hash". */
	static const struct op late[] = { INT("zz", 1), CSTR("u", "x") };
	static const struct op early[] = { INT("aa", 1), CSTR("b", "x") };
	/* The writer's own names are the writer's: theirs win. */
	static const struct op own[] = {
		CSTR("seq", "not a seq"), INT("prev", 3), BOOL("hash", 1),
		CSTR("ts", "yesterday"), CSTR("type", "mine"), INT("k", 1),
	};
	/* Last wins, whatever kind each was. */
	static const struct op twice[] = {
		CSTR("host", "first"), INT("n", 1), CSTR("host", "second"),
		NUL_("n"), BOOL("n", 1), INT("host", -5), CSTR("z", "a"),
		CSTR("z", ""), CSTR("a", "1"), NUL_("a"),
	};
	/* A "cut" of the caller's, when nothing was cut. */
	static const struct op cut[] = { BOOL("cut", 0), CSTR("x", "y") };

	check_one(none, 0, "no members");
	check_one(basic, NOPS(basic), "basic");
	check_one(ints, NOPS(ints), "integers");
	check_one(keys, NOPS(keys), "keys around hash, prev, seq");
	check_one(late, NOPS(late), "keys after seq only");
	check_one(early, NOPS(early), "keys before hash only");
	check_one(own, NOPS(own), "the writer's names");
	check_one(twice, NOPS(twice), "keys set twice");
	check_one(cut, NOPS(cut), "a cut of the caller's");
	check_same(basic, NOPS(basic), "conn", 2,
	    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	    "seq 2", NULL);
	check_same(basic, NOPS(basic), "x", (uint64_t)INT64_MAX,
	    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
	    "seq INT64_MAX", NULL);
}

static void
test_fixed_strings(void **state)
{
	static const char ctl[] =
	    "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"
	    "\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f"
	    "\x7f";
	static const struct op strs[] = {
		STR("empty", ""),
		STR("ctl", ctl),
		STR("nul", "a\0b"),
		STR("nul_end", "ab\0"),
		STR("quotes", "\"\"say \"hi\"\""),
		STR("bs", "\\\\n \\u0041 \\"),
		STR("slash", "/a//b/</script>"),
		STR("ascii", " !#$%&'()*+,-.0123456789:;<=>?@AZ[]^_`az{|}~"),
		/* U+0080 U+00E9 U+07FF */
		STR("two", "\xc2\x80\xc3\xa9\xdf\xbf"),
		STR("three", "\xe0\xa0\x80\xe2\x82\xac\xed\x9f\xbf\xee\x80\x80"
		    "\xef\xbf\xbd\xef\xbf\xbf"),	/* ... U+FFFD U+FFFF */
		STR("four", "\xf0\x90\x80\x80\xf0\x9f\x98\x80\xf3\xbf\xbf\xbf"
		    "\xf4\x8f\xbf\xbf"),	/* U+10000 ... U+10FFFF */
		STR("mixed", "a\"\xc3\xa9\\\n\xf0\x9f\x98\x80/\x7f\x01z"),
	};
	char one[2], key[8];
	struct op op[1];
	int c;

	check_one(strs, NOPS(strs), "strings");
	/* Each byte below 0x80 alone, so none hides behind another. */
	for (c = 0; c < 0x80; c++) {
		one[0] = (char)c;
		snprintf(key, sizeof(key), "c%02x", c);
		op[0] = (struct op){ key, K_STR, one, 1, 0 };
		check_one(op, 1, key);
	}
}

/* A string of len bytes: fill, with the sequence seq put at byte at. */
static char *
str_with(size_t len, size_t at, const char *seq)
{
	char *s;

	assert_non_null(s = malloc(len + 1));
	memset(s, 'a', len);
	if (seq != NULL) {
		assert_true(at + strlen(seq) <= len);
		memcpy(s + at, seq, strlen(seq));
	}
	s[len] = '\0';
	return s;
}

/* A string of n copies of seq. */
static char *
str_rep(const char *seq, size_t n, size_t *len)
{
	size_t sl = strlen(seq), i;
	char *s;

	assert_non_null(s = malloc(sl * n + 1));
	for (i = 0; i < n; i++)
		memcpy(s + i * sl, seq, sl);
	s[sl * n] = '\0';
	*len = sl * n;
	return s;
}

static void
check_long(const char *s, size_t len, const char *what)
{
	struct op ops[] = { STRN("long", s, len), CSTR("short", "x") };

	check_one(ops, NOPS(ops), what);
}

static void
test_long_strings(void **state)
{
	static const size_t lens[] = { 1015, 1016, 1017, 1023, 1024, 1025,
	    1026, 1100, 2048, 70000 };
	static const char *const seqs[] = { "\xc3\xa9", "\xe2\x82\xac",
	    "\xf0\x9f\x98\x80", "\xef\xbf\xbf", "\xf4\x8f\xbf\xbf", "\"",
	    "\x01" };
	const size_t keep = AUDIT_STR_MAX - CUT_MARK_LEN;
	char what[96], *s;
	size_t i, j, at, len;

	for (i = 0; i < NOPS(lens); i++) {
		s = str_with(lens[i], 0, NULL);
		snprintf(what, sizeof(what), "%zu ASCII bytes", lens[i]);
		check_long(s, lens[i], what);
		free(s);
	}
	/* Each multi-byte character at every place across the cut point. */
	for (j = 0; j < NOPS(seqs); j++)
		for (at = keep - 5; at <= keep + 1; at++) {
			s = str_with(1030, at, seqs[j]);
			snprintf(what, sizeof(what), "seq %zu at %zu of 1030",
			    j, at);
			check_long(s, 1030, what);
			free(s);
		}
	/* Long exactly, or one byte over, ending in a wide character. */
	for (j = 0; j < NOPS(seqs); j++)
		for (len = AUDIT_STR_MAX - 1; len <= AUDIT_STR_MAX + 1;
		    len++) {
			if (strlen(seqs[j]) > len)
				continue;
			s = str_with(len, len - strlen(seqs[j]), seqs[j]);
			snprintf(what, sizeof(what), "seq %zu ending %zu bytes",
			    j, len);
			check_long(s, len, what);
			free(s);
		}
	/* Wide characters only; and escapes six times their bytes. */
	s = str_rep("\xf0\x9f\x98\x80", 257, &len);
	check_long(s, len, "257 four-byte characters");
	free(s);
	s = str_rep("\xe2\x82\xac", 342, &len);
	check_long(s, len, "342 three-byte characters");
	free(s);
	s = str_rep("\x01", 1500, &len);
	check_long(s, len, "1500 control characters");
	free(s);
	/* A long string in the record, nothing else: still "cut". */
	{
		struct op op[1];

		s = str_with(5000, 0, NULL);
		op[0] = (struct op){ "body", K_STR, s, 5000, 0 };
		check_one(op, 1, "a long string alone");
		free(s);
	}
}

/* ---- strings that are not UTF-8 ----------------------------------------- */

struct bad {
	const char	*in;
	size_t		 len;
	const char	*want;	/* the JSON string arec makes of it */
};

#define BAD(in, want)	{ (in), sizeof(in) - 1, (want) }

static const struct bad bads[] = {
	BAD("\x80", "\"\\uFFFD\""),
	BAD("\xff", "\"\\uFFFD\""),
	BAD("\xfe\xfd", "\"\\uFFFD\\uFFFD\""),
	BAD("\xc0\x80", "\"\\uFFFD\\uFFFD\""),		/* overlong NUL */
	BAD("\xc1\xbf", "\"\\uFFFD\\uFFFD\""),		/* overlong U+007F */
	BAD("\xe0\x9f\xbf", "\"\\uFFFD\\uFFFD\\uFFFD\""),	/* overlong */
	BAD("\xf0\x8f\xbf\xbf", "\"\\uFFFD\\uFFFD\\uFFFD\\uFFFD\""),
	BAD("\xed\xa0\x80", "\"\\uFFFD\\uFFFD\\uFFFD\""),	/* U+D800 */
	BAD("\xed\xbf\xbf", "\"\\uFFFD\\uFFFD\\uFFFD\""),	/* U+DFFF */
	BAD("\xed\xa0\xbd\xed\xb8\x80",	/* CESU-8 of U+1F600 */
	    "\"\\uFFFD\\uFFFD\\uFFFD\\uFFFD\\uFFFD\\uFFFD\""),
	BAD("\xf4\x90\x80\x80", "\"\\uFFFD\\uFFFD\\uFFFD\\uFFFD\""),
	BAD("\xf5\x80\x80\x80", "\"\\uFFFD\\uFFFD\\uFFFD\\uFFFD\""),
	BAD("\xe2\x82", "\"\\uFFFD\\uFFFD\""),		/* cut at the end */
	BAD("a\xf0\x9f\x98", "\"a\\uFFFD\\uFFFD\\uFFFD\""),
	BAD("\xc3", "\"\\uFFFD\""),
	BAD("\xe2\x82z", "\"\\uFFFD\\uFFFDz\""),	/* cut by ASCII */
	BAD("\xe2\xe2\x82\xac", "\"\\uFFFD\\u20AC\""),	/* then a good one */
	BAD("\xc3\xa9\x80\xc3\xa9", "\"\\u00E9\\uFFFD\\u00E9\""),
	BAD("\x80\"\\\n", "\"\\uFFFD\\\"\\\\\\n\""),
	BAD("\xef\xbf\xbd", "\"\\uFFFD\""),	/* a real U+FFFD, for once */
	BAD("\xed\x9f\xbf\xee\x80\x80", "\"\\uD7FF\\uE000\""),	/* good */
	BAD("\xf0\x9f\x98\x80", "\"\\uD83D\\uDE00\""),		/* good */
	BAD("\xf4\x8f\xbf\xbf", "\"\\uDBFF\\uDFFF\""),		/* good */
	BAD("\xf0\x90\x80\x80", "\"\\uD800\\uDC00\""),		/* good */
};

static void
test_invalid_utf8(void **state)
{
	static struct sealed s;
	char out[256], member[300];
	struct aflat *f;
	struct op ops[2];
	size_t i, off;
	int r;

	for (i = 0; i < NOPS(bads); i++) {
		/* The string alone, written where arec_raw values are built. */
		memset(out, '#', sizeof(out));
		off = 3;
		r = arec_json_str(out, sizeof(out), &off, bads[i].in,
		    bads[i].len);
		assert_true(r >= 0);
		assert_int_equal(off - 3, strlen(bads[i].want));
		assert_memory_equal(out + 3, bads[i].want, off - 3);
		assert_int_equal(out[off], '#');
		/* As a member: in the line as such, and the line verifies. */
		ops[0] = (struct op){ "v", K_STR, bads[i].in, bads[i].len, 0 };
		ops[1] = (struct op){ "w", K_CSTR, "x", 0, 0 };
		flat_seal(ops, 2, "request", 1, AUDIT_ZERO_HASH, &s, &f);
		free(f);
		snprintf(member, sizeof(member), ",\"v\":%s,", bads[i].want);
		s.line[s.len - 1] = '\0';
		if (strstr(s.line, member) == NULL)
			fail_msg("case %zu: no %s in %s", i, member, s.line);
		s.line[s.len - 1] = '\n';
		assert_verifies(s.line, s.len);
		/* And what jansson makes of the string made UTF-8. */
		check_one(ops, 2, "not UTF-8");
	}
}

/* Strings that are not UTF-8 around the cut: replaced, then bounded. */
static void
test_invalid_long(void **state)
{
	const size_t keep = AUDIT_STR_MAX - CUT_MARK_LEN;
	static const char *const seqs[] = { "\xff", "\xe2\x82", "\xc3",
	    "\xf0\x9f\x98" };
	char what[96], *s;
	size_t j, at, n, len;

	/* 341 bad bytes are 1023 once replaced, 342 are 1026: cut. */
	for (n = 338; n <= 344; n++) {
		s = str_rep("\xff", n, &len);
		snprintf(what, sizeof(what), "%zu bad bytes", n);
		check_long(s, len, what);
		free(s);
	}
	for (j = 0; j < NOPS(seqs); j++)
		for (at = keep - 8; at <= keep + 1; at++) {
			s = str_with(1030, at, seqs[j]);
			snprintf(what, sizeof(what), "bad %zu at %zu", j, at);
			check_long(s, 1030, what);
			free(s);
		}
	/* Short in bytes, long once replaced, with good ones mixed in. */
	s = str_rep("\x80\xc3\xa9", 300, &len);
	check_long(s, len, "bad and good, 900 bytes");
	free(s);
}

/* ---- pseudo-random records ---------------------------------------------- */

/* xorshift64*: the same records on every libc. */
static uint64_t
rnd(uint64_t *st)
{
	*st ^= *st >> 12;
	*st ^= *st << 25;
	*st ^= *st >> 27;
	return *st * 0x2545f4914f6cdd1dULL;
}

static size_t
rnd_below(uint64_t *st, size_t n)
{
	return (size_t)(rnd(st) % n);
}

static const char *const rkeys[] = {
	"a", "action", "aud", "cut", "dst", "has", "hasgz", "hash0", "host",
	"method", "n", "pre", "preuz", "prev0", "reason", "rule", "sandbox",
	"se", "sepz", "seq0", "status", "target", "tls", "tt", "u", "z", "~",
};

/* Pieces strings are made of: each kind of escape, width and mistake. */
static const char *const pieces[] = {
	"a", "Z", "0", " ", "~", "/", "\"", "\\", "\b", "\f", "\n", "\r", "\t",
	"\x01", "\x1f", "\x7f", "\x1b[0m", "\xc2\x80", "\xc3\xa9", "\xdf\xbf",
	"\xe0\xa0\x80", "\xe2\x82\xac", "\xed\x9f\xbf", "\xee\x80\x80",
	"\xef\xbf\xbd", "\xef\xbf\xbf", "\xf0\x90\x80\x80", "\xf0\x9f\x98\x80",
	"\xf4\x8f\xbf\xbf", "hello", "/v1/x?y=1&z=2", "\\u0000",
	/* not UTF-8 */
	"\x80", "\xff", "\xc0\x80", "\xed\xa0\x80", "\xe2\x82", "\xf0\x9f\x98",
	"\xf4\x90\x80\x80", "\xc3",
};
#define NGOOD_PIECES	32	/* the first ones, all UTF-8 */

/*
 * A random string into buf (cap bytes): short mostly, sometimes around
 * AUDIT_STR_MAX, sometimes well over; not UTF-8 one time in five.
 */
static size_t
rnd_string(uint64_t *st, char *buf, size_t cap)
{
	size_t target, len = 0, np, p;
	int bad = rnd_below(st, 5) == 0;

	switch (rnd_below(st, 8)) {
	case 0:
		target = AUDIT_STR_MAX - 12 + rnd_below(st, 24);
		break;
	case 1:
		target = AUDIT_STR_MAX + rnd_below(st, 3000);
		break;
	case 2:
		target = 0;
		break;
	default:
		target = rnd_below(st, 40);
		break;
	}
	np = bad ? NOPS(pieces) : NGOOD_PIECES;
	while (len < target) {
		/* A NUL now and then: arec_strn takes it, and jansson. */
		if (rnd_below(st, 200) == 0) {
			if (len + 1 > cap)
				break;
			buf[len++] = '\0';
			continue;
		}
		p = rnd_below(st, np);
		if (len + strlen(pieces[p]) > cap)
			break;
		memcpy(buf + len, pieces[p], strlen(pieces[p]));
		len += strlen(pieces[p]);
	}
	return len;
}

/* A canonical JSON value (jansson's own encoding) for arec_raw. */
static char *
rnd_raw(uint64_t *st, size_t *len)
{
	char s[64], k[4];
	json_t *v, *item;
	size_t i, n, sl;
	char *enc;

	n = rnd_below(st, 5);
	if (rnd_below(st, 2) == 0) {
		assert_non_null(v = json_array());
		for (i = 0; i < n; i++) {
			sl = rnd_string(st, s, sizeof(s));
			if (rnd_below(st, 2) == 0 && utf8_ok(s, sl))
				item = json_stringn(s, sl);
			else
				item = json_integer((json_int_t)rnd(st));
			assert_int_equal(json_array_append_new(v, item), 0);
		}
	} else {
		assert_non_null(v = json_object());
		for (i = 0; i < n; i++) {
			snprintf(k, sizeof(k), "%c",
			    'a' + (int)rnd_below(st, 26));
			assert_int_equal(json_object_set_new(v, k,
			    json_integer((json_int_t)rnd_below(st, 1000))), 0);
		}
	}
	assert_non_null(enc = json_dumps(v, CANON_FLAGS | JSON_ENCODE_ANY));
	json_decref(v);
	*len = strlen(enc);
	return enc;
}

/*
 * The most bytes op can take in an arec: a byte is 3 once replaced at
 * most, and each of those 6 escaped at most (\u0001, or \uFFFD for 3);
 * the quotes, the cut mark and the slack arec_json_str wants on top.
 */
static size_t
op_cost(const struct op *op)
{
	size_t c = strlen(op->key) + 4, u;

	switch (op->kind) {
	case K_STR:
		u = 3 * op->len < AUDIT_STR_MAX ? 3 * op->len : AUDIT_STR_MAX;
		return c + 6 * u + 2 + CUT_MARK_LEN + 12;
	case K_RAW:
		return c + op->len;
	default:
		return c + 24;
	}
}

/* A value of op's kind is cut when set: it must not be set over. */
static int
op_cuts(const struct op *op)
{
	char *fixed;
	size_t flen;

	if (op->kind != K_STR)
		return 0;
	fixed = utf8_fix(op->s, op->len, &flen);
	free(fixed);
	return flen > AUDIT_STR_MAX;
}

struct rrec {
	struct op	 ops[MAXOPS];
	size_t		 n;
	char		*owned[MAXOPS];
	size_t		 nowned;
};

static void
rrec_free(struct rrec *rr)
{
	size_t i;

	for (i = 0; i < rr->nowned; i++)
		free(rr->owned[i]);
	rr->n = rr->nowned = 0;
}

/*
 * A random record within the bounds of an arec, keys from rkeys (some
 * set twice, any order).  A key whose value was cut is not set again:
 * see test_set_twice_cut.
 */
static void
rnd_record(uint64_t *st, struct rrec *rr)
{
	char *buf;
	size_t want, cost = 0, i, tries;
	struct op op;
	int stale;

	rr->n = rr->nowned = 0;
	want = rnd_below(st, USER_MEMBERS + 1);
	for (tries = 0; rr->n < want && tries < 4 * MAXOPS; tries++) {
		op.key = rkeys[rnd_below(st, NOPS(rkeys))];
		op.s = NULL;
		op.len = 0;
		op.v = 0;
		for (i = 0, stale = 0; i < rr->n; i++)
			if (strcmp(rr->ops[i].key, op.key) == 0 &&
			    op_cuts(&rr->ops[i]))
				stale = 1;
		if (stale)
			continue;
		switch (rnd_below(st, 10)) {
		case 0:
			op.kind = K_NULL;
			break;
		case 1:
			op.kind = K_INT;
			op.v = (int64_t)rnd(st) >> rnd_below(st, 64);
			break;
		case 2:
			op.kind = K_BOOL;
			op.v = (int64_t)rnd_below(st, 3);
			break;
		case 3:
			op.kind = K_RAW;
			op.s = buf = rnd_raw(st, &op.len);
			rr->owned[rr->nowned++] = buf;
			break;
		default:
			op.kind = K_STR;
			assert_non_null(buf = malloc(5000));
			op.len = rnd_string(st, buf, 5000);
			op.s = buf;
			rr->owned[rr->nowned++] = buf;
			break;
		}
		if (cost + op_cost(&op) > USER_BYTES) {
			/* Too much for one record: this one stays out. */
			if (op.s != NULL)
				free(rr->owned[--rr->nowned]);
			break;
		}
		cost += op_cost(&op);
		rr->ops[rr->n++] = op;
	}
}

static void
rnd_hash(uint64_t *st, char h[AUDIT_HASH_HEX + 1])
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < AUDIT_HASH_HEX; i++)
		h[i] = hex[rnd_below(st, 16)];
	h[AUDIT_HASH_HEX] = '\0';
	if (strcmp(h, AUDIT_ZERO_HASH) == 0)
		h[0] = '1';
}

static void
test_random(void **state)
{
	static const char *const types[] = { "request", "conn", "dns", "a",
	    "zzz" };
	uint64_t st = 0x5eed5eed5eedULL, seq;
	char prev[AUDIT_HASH_HEX + 1], what[64];
	struct rrec rr;
	size_t i;

	for (i = 0; i < NRANDOM; i++) {
		rnd_record(&st, &rr);
		if (rnd_below(&st, 4) == 0) {
			seq = 1;
			snprintf(prev, sizeof(prev), "%s", AUDIT_ZERO_HASH);
		} else {
			seq = 2 + rnd(&st) % ((uint64_t)INT64_MAX - 1);
			if (rnd_below(&st, 2) == 0)
				seq = 2 + rnd_below(&st, 1000);
			rnd_hash(&st, prev);
		}
		snprintf(what, sizeof(what), "random record %zu", i);
		check_same(rr.ops, rr.n, types[rnd_below(&st, NOPS(types))],
		    seq, prev, what, NULL);
		rrec_free(&rr);
	}
}

/* arec_json_str alone against jansson's encoding of the same string. */
static void
test_json_str(void **state)
{
	uint64_t st = 0xa5a5a5a5ULL;
	char *buf, *out, *fixed, *enc;
	json_t *s, *o;
	size_t i, len, flen, off;
	int r;

	assert_non_null(buf = malloc(5000));
	assert_non_null(out = malloc(6 * 5000 + 64));
	for (i = 0; i < NRANDOM; i++) {
		len = rnd_string(&st, buf, 5000);
		fixed = utf8_fix(buf, len, &flen);
		assert_non_null(s = json_stringn(fixed, flen));
		free(fixed);
		/* Bounded the way a record's member is. */
		assert_non_null(o = json_object());
		assert_int_equal(json_object_set_new(o, "s", s), 0);
		auditfmt_bound(o);
		assert_non_null(enc = json_dumps(json_object_get(o, "s"),
		    CANON_FLAGS | JSON_ENCODE_ANY));
		off = 0;
		r = arec_json_str(out, 6 * 5000 + 64, &off, buf, len);
		assert_true(r >= 0);
		/* Cut as "cut" says: a value is cut when jansson cut it. */
		assert_int_equal(r != 0, json_object_get(o, "cut") != NULL);
		assert_same_line(out, off, enc, strlen(enc), "arec_json_str");
		free(enc);
		json_decref(o);
	}
	free(out);
	free(buf);
}

/* Out of room: -1, *off as it was, and nothing written past cap. */
static void
test_json_str_room(void **state)
{
	char out[64], want[64];
	size_t cap, off, wlen;
	int r;

	off = 0;
	assert_int_equal(arec_json_str(want, sizeof(want), &off, "ab\x01",
	    3), 0);
	wlen = off;
	assert_memory_equal(want, "\"ab\\u0001\"", wlen);
	for (cap = 4; cap < 40; cap++) {
		memset(out, '#', sizeof(out));
		off = 4;
		r = arec_json_str(out, cap, &off, "ab\x01", 3);
		assert_true(r == 0 || r == -1);
		if (r == -1)
			assert_int_equal(off, 4);
		else {
			assert_int_equal(off, 4 + wlen);
			assert_memory_equal(out + 4, want, wlen);
		}
		assert_int_equal(out[cap], '#');
	}
	/* With room enough, it fits. */
	off = 4;
	assert_int_equal(arec_json_str(out, 4 + wlen + 16, &off, "ab\x01", 3),
	    0);
}

/* ---- a chain ------------------------------------------------------------ */

#define CHAIN	50

static void
test_chain(void **state)
{
	static const struct op mid[] = {
		CSTR("host", "caf\xc3\xa9.test"), STR("path", "/a\"b\\\x01"),
		INT("n", -3), BOOL("tls", 1), NUL_("rule"),
		STR("four", "\xf0\x9f\x98\x80"),
	};
	static struct sealed s;
	uint64_t st = 0xc4a1ULL;
	char prev[AUDIT_HASH_HEX + 1] = AUDIT_ZERO_HASH, why[512];
	size_t i, len = 0, mid_at = 0, mid_len = 0, b;
	struct audit_verify_stats vs;
	struct audit_verifier *v;
	struct rrec rr;
	char *trail;

	assert_non_null(trail = malloc(CHAIN * AUDIT_LINE_MAX));
	for (i = 0; i < CHAIN; i++) {
		if (i == CHAIN / 2) {
			/* Short, so that each of its bytes can be flipped. */
			check_same(mid, NOPS(mid), "request", i + 1, prev,
			    "chain", &s);
			mid_at = len;
			mid_len = s.len;
		} else {
			rnd_record(&st, &rr);
			check_same(rr.ops, rr.n, i % 2 ? "request" : "conn",
			    i + 1, prev, "chain", &s);
			rrec_free(&rr);
		}
		memcpy(trail + len, s.line, s.len);
		len += s.len;
		memcpy(prev, s.hash, sizeof(prev));
	}
	assert_non_null(v = audit_verifier_new(NULL, 0, AUDIT_VERIFY_OPEN));
	if (audit_verifier_mem(v, "chain.log", trail, len, why,
	    sizeof(why)) != 0)
		fail_msg("the chain does not verify: %s", why);
	audit_verifier_stats(v, &vs);
	assert_int_equal(vs.records, CHAIN);
	assert_int_equal(vs.first_seq, 1);
	assert_int_equal(vs.last_seq, CHAIN);
	assert_false(vs.mid_chain);
	assert_false(vs.torn);
	assert_string_equal(vs.last_hash, prev);
	audit_verifier_free(v);
	/* Any one byte of the middle record changed: refused. */
	for (b = mid_at; b < mid_at + mid_len; b++) {
		trail[b] ^= 0x01;
		if (verify(trail, len, why, sizeof(why)) == 0)
			fail_msg("byte %zu of the middle record flipped, and "
			    "the chain still verifies", b - mid_at);
		trail[b] ^= 0x01;
	}
	assert_int_equal(verify(trail, len, why, sizeof(why)), 0);
	free(trail);
}

/* ---- bounds ------------------------------------------------------------- */

/* The record the line holds, once the verifier took the line. */
static json_t *
line_record(const struct sealed *s)
{
	json_t *rec;

	assert_verifies(s->line, s->len);
	assert_non_null(rec = json_loadb(s->line, s->len, JSON_ALLOW_NUL,
	    NULL));
	assert_true(json_is_string(json_object_get(rec, "ts")));
	assert_string_equal(json_string_value(json_object_get(rec, "type")),
	    "request");
	return rec;
}

static void
test_bounds_members(void **state)
{
	static char keys[AREC_MEMBERS * 2][8];
	static struct op ops[AREC_MEMBERS * 2];
	static struct sealed s;
	struct aflat *f;
	json_t *rec, *v;
	size_t i, n;

	for (i = 0; i < NOPS(ops); i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%02zu", i);
		ops[i] = (struct op){ keys[i], K_INT, NULL, 0, (int64_t)i };
	}
	/* As many as a record keeps, with ts and type: nothing cut. */
	check_one(ops, USER_MEMBERS, "as many members as fit");
	/* More: no crash, what is kept is right, the record says cut. */
	for (n = USER_MEMBERS + 1; n <= NOPS(ops); n += 7) {
		flat_seal(ops, n, "request", 1, AUDIT_ZERO_HASH, &s, &f);
		free(f);
		rec = line_record(&s);
		assert_true(json_is_true(json_object_get(rec, "cut")));
		assert_true(json_object_size(rec) <= AREC_MEMBERS + 3);
		for (i = 0; i < n; i++)
			if ((v = json_object_get(rec, keys[i])) != NULL)
				assert_int_equal(json_integer_value(v), i);
		json_decref(rec);
	}
	/* The same key over and over: each time takes room all the same. */
	for (i = 0; i < NOPS(ops); i++)
		ops[i].key = "same";
	flat_seal(ops, NOPS(ops), "request", 1, AUDIT_ZERO_HASH, &s, &f);
	free(f);
	rec = line_record(&s);
	assert_non_null(json_object_get(rec, "same"));
	json_decref(rec);
}

static void
test_bounds_bytes(void **state)
{
	static char keys[40][8];
	static struct op ops[40];
	static struct sealed s;
	struct aflat *f;
	json_t *rec;
	char *ctl, *raw;
	size_t i, n;

	/* Control characters escape six times: three fill a record. */
	assert_non_null(ctl = malloc(5000));
	memset(ctl, 0x01, 5000);
	for (i = 0; i < NOPS(ops); i++) {
		snprintf(keys[i], sizeof(keys[i]), "s%02zu", i);
		ops[i] = (struct op){ keys[i], K_STR, ctl, 5000, 0 };
	}
	for (n = 1; n <= 10; n++) {
		flat_seal(ops, n, "request", 1, AUDIT_ZERO_HASH, &s, &f);
		assert_true(f->len <= AREC_BYTES);
		free(f);
		rec = line_record(&s);
		assert_true(json_is_true(json_object_get(rec, "cut")));
		json_decref(rec);
	}
	/* A value of its own bigger than a record: left out, cut. */
	assert_non_null(raw = malloc(AREC_BYTES + 2));
	raw[0] = '"';
	memset(raw + 1, 'a', AREC_BYTES);
	raw[AREC_BYTES + 1] = '"';
	ops[0] = (struct op){ "big", K_RAW, raw, AREC_BYTES + 2, 0 };
	ops[1] = (struct op){ "small", K_CSTR, "kept", 0, 0 };
	flat_seal(ops, 2, "request", 1, AUDIT_ZERO_HASH, &s, &f);
	free(f);
	rec = line_record(&s);
	assert_true(json_is_true(json_object_get(rec, "cut")));
	assert_null(json_object_get(rec, "big"));
	assert_string_equal(json_string_value(json_object_get(rec, "small")),
	    "kept");
	json_decref(rec);
	free(raw);
	free(ctl);
}

/*
 * A record filled to the byte: one raw member sized so that the record
 * is all but full, then a member that cannot fit.  ts and type always
 * fit, whatever the caller left.
 */
static void
test_bounds_full(void **state)
{
	static struct sealed s;
	struct aflat *f;
	struct op ops[3];
	json_t *rec;
	char *raw;
	size_t size, fill;

	assert_non_null(raw = malloc(AREC_BYTES));
	for (size = USER_BYTES - 64; size < AREC_BYTES; size += 8) {
		/* ,"big":"aaa..." in size bytes (raw: never bounded). */
		fill = size - 7;
		raw[0] = '"';
		memset(raw + 1, 'a', fill - 2);
		raw[fill - 1] = '"';
		ops[0] = (struct op){ "big", K_RAW, raw, fill, 0 };
		ops[1] = (struct op){ "next", K_CSTR, "x", 0, 0 };
		ops[2] = (struct op){ "last", K_INT, NULL, 0, 1 };
		flat_seal(ops, 3, "request", 1, AUDIT_ZERO_HASH, &s, &f);
		assert_true(f->len <= AREC_BYTES);
		free(f);
		if (s.len > AUDIT_LINE_MAX)
			fail_msg("a line of %zu bytes", s.len);
		rec = line_record(&s);
		/* What was kept is whole; what was not, the record says. */
		if (json_object_get(rec, "big") == NULL ||
		    json_object_get(rec, "next") == NULL ||
		    json_object_get(rec, "last") == NULL)
			assert_true(json_is_true(json_object_get(rec, "cut")));
		json_decref(rec);
	}
	free(raw);
}

/*
 * A member left out takes no room: after a record all but full, members
 * too big to fit, with keys of lengths halving (so that had each kept
 * the bytes of its key, the room left would end smaller than any
 * member), then a small one that fits.
 */
static void
test_bounds_drop(void **state)
{
	static const size_t klens[] = { 200, 100, 50, 25, 12, 6, 3, 1 };
	static char keys[NOPS(klens)][256];
	static struct sealed s;
	struct op ops[NOPS(klens) + 2];
	struct aflat *f;
	json_t *rec;
	char *raw, *ctl;
	size_t fill = USER_BYTES - 200 - 7, i, n = 0;

	assert_non_null(raw = malloc(fill));
	raw[0] = '"';
	memset(raw + 1, 'a', fill - 2);
	raw[fill - 1] = '"';
	assert_non_null(ctl = malloc(1000));
	memset(ctl, 0x01, 1000);
	ops[n++] = (struct op){ "big", K_RAW, raw, fill, 0 };
	for (i = 0; i < NOPS(klens); i++) {
		memset(keys[i], 'k', klens[i]);
		keys[i][klens[i]] = '\0';
		ops[n++] = (struct op){ keys[i], K_STR, ctl, 1000, 0 };
	}
	ops[n++] = (struct op){ "l", K_INT, NULL, 0, 12345 };
	flat_seal(ops, n, "request", 1, AUDIT_ZERO_HASH, &s, &f);
	free(f);
	rec = line_record(&s);
	assert_true(json_is_true(json_object_get(rec, "cut")));
	assert_non_null(json_object_get(rec, "big"));
	for (i = 0; i < NOPS(klens); i++)
		assert_null(json_object_get(rec, keys[i]));
	assert_int_equal(json_integer_value(json_object_get(rec, "l")),
	    12345);
	json_decref(rec);
	free(ctl);
	free(raw);
}

/* ---- the time ----------------------------------------------------------- */

/* The time now as the test writes it, to the millisecond. */
static void
now_ts(char buf[AREC_TS_LEN])
{
	struct timespec ts;
	struct tm tm;

	assert_int_equal(clock_gettime(CLOCK_REALTIME, &ts), 0);
	assert_non_null(gmtime_r(&ts.tv_sec, &tm));
	assert_int_equal(strftime(buf, AREC_TS_LEN, "%Y-%m-%dT%H:%M:%S",
	    &tm), 19);
	snprintf(buf + 19, AREC_TS_LEN - 19, ".%03ldZ",
	    ts.tv_nsec / 1000000);
	assert_int_equal(strlen(buf), TS_CHARS);
}

/*
 * "ts" is the time of arec_finish, in the format of every record: it
 * sorts between the times taken before and after (the format sorts as
 * time does).
 */
static void
test_ts(void **state)
{
	char before[AREC_TS_LEN], ts[AREC_TS_LEN], after[AREC_TS_LEN];
	struct arec *r;
	struct aflat *f;
	size_t i;

	assert_non_null(r = malloc(sizeof(*r)));
	for (i = 0; i < 20; i++) {
		now_ts(before);
		arec_init(r);
		arec_int(r, "n", (int64_t)i);
		assert_non_null(f = arec_finish(r, "request"));
		now_ts(after);
		body_ts(f, ts);
		free(f);
		if (strcmp(before, ts) > 0 || strcmp(ts, after) > 0)
			fail_msg("ts %s is not between %s and %s", ts, before,
			    after);
		arec_ts(ts);
		assert_int_equal(strlen(ts), TS_CHARS);
		now_ts(after);
		assert_true(strcmp(ts, after) <= 0);
	}
	free(r);
}

/* ---- nested values given raw -------------------------------------------- */

/* [{"fingerprint":..,"name":..,"version":..},...] as icpt_req.c builds it. */
static size_t
secrets_raw(char *out, size_t cap, const char *const *names, size_t n)
{
	size_t o = 0, i;

	out[o++] = '[';
	for (i = 0; i < n; i++) {
		o += (size_t)snprintf(out + o, cap - o, "%s{\"fingerprint\":",
		    i > 0 ? "," : "");
		assert_int_equal(arec_json_str(out, cap, &o, "sha256:ab\x01/",
		    12), 0);
		memcpy(out + o, ",\"name\":", 8);
		o += 8;
		assert_true(arec_json_str(out, cap, &o, names[i],
		    strlen(names[i])) >= 0);
		o += (size_t)snprintf(out + o, cap - o,
		    ",\"nested\":{\"a\":[],\"b\":{}},\"version\":%zu}", i);
	}
	out[o++] = ']';
	return o;
}

static void
test_raw(void **state)
{
	static const char *const names[] = { "token", "", "caf\xc3\xa9",
	    "\xf0\x9f\x98\x80\"\\/\n", "\xff bad", "x" };
	static char arr[64 * 1024];
	const char *two[] = { NULL, "after" };
	char *wide;
	size_t len, wlen;
	struct op ops[8];

	len = secrets_raw(arr, sizeof(arr), names, NOPS(names));
	ops[0] = (struct op){ "secrets", K_RAW, arr, len, 0 };
	ops[1] = (struct op){ "host", K_CSTR, "api.test", 0, 0 };
	ops[2] = (struct op){ "e", K_RAW, "[]", 2, 0 };
	ops[3] = (struct op){ "o", K_RAW, "{}", 2, 0 };
	ops[4] = (struct op){ "i", K_RAW, "-12", 3, 0 };
	ops[5] = (struct op){ "s", K_RAW, "\"\\u00E9\\u0000\"", 14, 0 };
	ops[6] = (struct op){ "t", K_RAW, "true", 4, 0 };
	ops[7] = (struct op){ "deep", K_RAW, "[[[{\"a\":[{\"b\":null}]}]]]",
	    24, 0 };
	check_one(ops, 8, "raw values");
	/*
	 * A name cut where it is built: the same bytes as jansson's once
	 * read back (it is cut already, so bounding keeps it).
	 */
	wide = str_rep("\xe2\x82\xac", 400, &wlen);
	two[0] = wide;
	len = secrets_raw(arr, sizeof(arr), two, 2);
	ops[0] = (struct op){ "secrets", K_RAW, arr, len, 0 };
	check_one(ops, 2, "raw with a name cut");
	free(wide);
}

/* ---- what the record says of itself ------------------------------------- */

/*
 * A key set twice keeps its last value: a long first value, cut, that a
 * short one replaced leaves nothing cut in the record, and jansson's
 * line has no "cut".
 */
static void
test_set_twice_cut(void **state)
{
	struct op ops[2];
	char *s;

	s = str_with(2000, 0, NULL);
	ops[0] = (struct op){ "host", K_STR, s, 2000, 0 };
	ops[1] = (struct op){ "host", K_CSTR, "short", 0, 0 };
	check_one(ops, 2, "a cut value set over");
	free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixed_scalars),
		cmocka_unit_test(test_fixed_strings),
		cmocka_unit_test(test_long_strings),
		cmocka_unit_test(test_invalid_utf8),
		cmocka_unit_test(test_invalid_long),
		cmocka_unit_test(test_json_str),
		cmocka_unit_test(test_json_str_room),
		cmocka_unit_test(test_random),
		cmocka_unit_test(test_chain),
		cmocka_unit_test(test_bounds_members),
		cmocka_unit_test(test_bounds_bytes),
		cmocka_unit_test(test_bounds_full),
		cmocka_unit_test(test_bounds_drop),
		cmocka_unit_test(test_ts),
		cmocka_unit_test(test_raw),
		cmocka_unit_test(test_set_twice_cut),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
