/*
 * fuzz_arec.c: audit records built flat (arec.h) from hostile bytes.
 *
 * The input is a list of members, each a byte that chooses the kind of
 * value (its top three bits) and the key (the rest, an index into keys[]
 * below), two bytes of length (big-endian; cut to what is left), then
 * the bytes of the value.  The record is built, finished and sealed
 * twice, as seq 1 and seq 2 after it; the verifier must take both lines
 * and find ts, type and, when a string was cut, "cut": true.  When no
 * key is set twice (ts and type count: arec_finish sets them) and the
 * members are sure to fit in an arec, the same record built with jansson
 * (strings that are not UTF-8 replaced byte by byte, as arec.h says) and
 * sealed by auditfmt_seal must be the same line, byte for byte.
 *
 * Built with -DFUZZ_AREC_SEEDS and without -fsanitize=fuzzer, this file
 * writes the seed corpus instead; from the build folder, with s the
 * source folder:
 *
 *   cc -DFUZZ_AREC_SEEDS -I. -I$s/src $s/tests/fuzz/fuzz_arec.c \
 *       libaudit.a libkeys.a libconf.a libparse.a libutil.a -ljansson \
 *       -lsodium -lcrypto -o gen-arec-seeds
 *   ./gen-arec-seeds $s/tests/fuzz/corpus/arec
 *
 * (with --enable-sanitizers, add the same -fsanitize flags).
 */
#include "autoconf.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "audit/auditfmt.h"
#include "audit/arec.h"

int	LLVMFuzzerInitialize(int *argc, char ***argv);
int	LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

#define CANON_FLAGS	(JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII)
#define MAXOPS		(2 * AREC_MEMBERS)	/* members read, at most */
#define RAW_DEPTH	16	/* deepest raw value given: records nest 32 */
#define ARRAY_MAX	64	/* what auditfmt_bound keeps of an array */
/*
 * What the members may take and still be sure to fit, with the room
 * arec_finish keeps for itself and the slack arec_json_str wants.
 */
#define USER_MEMBERS	(AREC_MEMBERS - 3)
#define USER_BYTES	(AREC_BYTES - 256)
#define TYPE		"request"

/* Keys on each side of the writer's own, and the writer's own. */
static const char *const keys[32] = {
	"a", "action", "has", "hasgz", "hash", "hash0", "host", "method",
	"n", "pre", "preuz", "prev", "prev0", "reason", "rule", "sandbox",
	"se", "sepz", "seq", "seq0", "target", "tls", "tr", "ts", "ts0",
	"typ", "type", "type0", "z", "~", "K", "cut",
};

enum kind { K_STR, K_CSTR, K_NULL, K_INT, K_BOOL, K_RAW };

struct op {
	const char	*key;
	enum kind	 kind;
	char		*s;	/* owned; NUL-terminated for K_CSTR */
	size_t		 len;
	int64_t		 v;
};

struct rec {
	struct op	 ops[MAXOPS];
	size_t		 n;
	int		 same;	/* jansson must write the same line */
	int		 cut;	/* a string is over AUDIT_STR_MAX */
};

#define CHECK(cond, what)	check((cond), (what), __LINE__)

static void
check(int ok, const char *what, int line)
{
	if (ok)
		return;
	fprintf(stderr, "fuzz_arec:%d: %s\n", line, what);
	abort();
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	CHECK(sodium_init() >= 0, "sodium_init");
	return 0;
}

/* ---- strings ------------------------------------------------------------ */

/* The well-formed UTF-8 sequence at s[0..len) (Unicode table 3-7), or 0. */
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

/* s made UTF-8, each byte that begins no character one U+FFFD. */
static char *
utf8_fix(const char *str, size_t len, size_t *out)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, o = 0, n;
	char *buf;

	CHECK((buf = malloc(3 * len + 1)) != NULL, "malloc");
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

/* ---- the input as members ----------------------------------------------- */

/*
 * Whether v, a raw value at depth, may be in a record (no reals, no NUL
 * in a key, not too deep); *bounded cleared when auditfmt_bound would
 * change it, so that jansson would not write it as given.
 */
static int
raw_ok(json_t *v, int depth, int *bounded)
{
	const char *k;
	json_t *item;
	size_t i, klen;

	if (depth > RAW_DEPTH)
		return 0;
	switch (json_typeof(v)) {
	case JSON_REAL:
		return 0;
	case JSON_STRING:
		if (json_string_length(v) > AUDIT_STR_MAX)
			*bounded = 0;
		return 1;
	case JSON_ARRAY:
		if (json_array_size(v) > ARRAY_MAX)
			*bounded = 0;
		json_array_foreach(v, i, item)
			if (!raw_ok(item, depth + 1, bounded))
				return 0;
		return 1;
	case JSON_OBJECT:
		json_object_keylen_foreach(v, k, klen, item)
			if (memchr(k, '\0', klen) != NULL ||
			    !raw_ok(item, depth + 1, bounded))
				return 0;
		return 1;
	default:
		return 1;
	}
}

/* Bytes the value of op takes encoded (jansson's encoding, bounded). */
static size_t
enc_len(json_t *v)
{
	json_t *o;
	char *enc;
	size_t len;

	CHECK((o = json_object()) != NULL, "json_object");
	CHECK(json_object_set(o, "v", v) == 0, "json_object_set");
	auditfmt_bound(o);
	CHECK((enc = json_dumps(json_object_get(o, "v"), CANON_FLAGS |
	    JSON_ENCODE_ANY)) != NULL, "json_dumps");
	len = strlen(enc);
	free(enc);
	json_decref(o);
	return len;
}

/* The jansson value op sets; strings as arec makes them UTF-8. */
static json_t *
op_json(const struct op *op)
{
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
		    JSON_ALLOW_NUL, NULL);
		break;
	}
	CHECK(v != NULL, "a value jansson does not take");
	return v;
}

/* A raw value from d: canonical (jansson's encoding), or NULL. */
static char *
raw_from(const uint8_t *d, size_t len, size_t *out, int *bounded)
{
	json_t *v;
	char *enc = NULL;

	v = json_loadb((const char *)d, len, JSON_DECODE_ANY |
	    JSON_ALLOW_NUL, NULL);
	if (v != NULL && raw_ok(v, 1, bounded))
		enc = json_dumps(v, CANON_FLAGS | JSON_ENCODE_ANY);
	json_decref(v);
	if (enc != NULL)
		*out = strlen(enc);
	return enc;
}

static void
rec_free(struct rec *r)
{
	size_t i;

	for (i = 0; i < r->n; i++)
		free(r->ops[i].s);
	r->n = 0;
}

/* Reads the members of d[0..n) into r, and whether jansson must agree. */
static void
parse(const uint8_t *d, size_t n, struct rec *r)
{
	size_t len, i, cost = 0, flen;
	struct op *op;
	json_t *v;
	char *fixed;
	uint8_t sel;
	int bounded, cstr;

	r->n = 0;
	r->same = 1;
	r->cut = 0;
	while (n >= 3 && r->n < MAXOPS) {
		op = &r->ops[r->n];
		memset(op, 0, sizeof(*op));
		sel = d[0];
		op->key = keys[sel & 31];
		len = (size_t)d[1] << 8 | d[2];
		d += 3;
		n -= 3;
		if (len > n)
			len = n;
		/* Strings half the time: most of what records hold. */
		switch (sel >> 5) {
		case 0:
		case 1:
		case 2:
			op->kind = K_STR;
			break;
		case 3:
			op->kind = K_CSTR;
			break;
		case 4:
			op->kind = len % 2 ? K_NULL : K_BOOL;
			op->v = len > 0 ? d[0] & 1 : 0;
			break;
		case 5:
			op->kind = K_INT;
			for (i = 0; i < len && i < 8; i++)
				op->v = (int64_t)((uint64_t)op->v << 8 | d[i]);
			break;
		default:
			op->kind = K_RAW;
			bounded = 1;
			op->s = raw_from(d, len, &op->len, &bounded);
			if (op->s == NULL) {
				d += len;
				n -= len;
				continue;	/* not a value a record holds */
			}
			if (!bounded)
				r->same = 0;
			break;
		}
		if (op->kind == K_STR || op->kind == K_CSTR) {
			/*
			 * A string given by length ends where its buffer does,
			 * so that a read past it is the sanitizer's to see.
			 */
			cstr = op->kind == K_CSTR;
			CHECK((op->s = malloc(len + cstr + !len)) != NULL,
			    "malloc");
			memcpy(op->s, d, len);
			if (cstr)
				op->s[len] = '\0';
			op->len = len;
			fixed = utf8_fix(op->s, op->kind == K_STR ? len :
			    strlen(op->s), &flen);
			free(fixed);
			if (flen > AUDIT_STR_MAX)
				r->cut = 1;
		}
		d += len;
		n -= len;
		/* Set twice, or set again by arec_finish: not the same. */
		for (i = 0; i < r->n; i++)
			if (strcmp(r->ops[i].key, op->key) == 0)
				r->same = 0;
		if (strcmp(op->key, "ts") == 0 || strcmp(op->key, "type") == 0)
			r->same = 0;
		if (r->same) {
			v = op_json(op);
			cost += strlen(op->key) + 4 + enc_len(v);
			json_decref(v);
		}
		r->n++;
	}
	if (r->n > USER_MEMBERS || cost + 32 > USER_BYTES)
		r->same = 0;
}

/* ---- the checks --------------------------------------------------------- */

static void
build(const struct rec *rc, struct arec *r)
{
	const struct op *op;
	size_t i;

	arec_init(r);
	for (i = 0; i < rc->n; i++) {
		op = &rc->ops[i];
		switch (op->kind) {
		case K_STR:
			arec_strn(r, op->key, op->s, op->len);
			break;
		case K_CSTR:
			arec_str(r, op->key, op->s);
			break;
		case K_NULL:
			arec_str(r, op->key, NULL);
			break;
		case K_INT:
			arec_int(r, op->key, op->v);
			break;
		case K_BOOL:
			arec_bool(r, op->key, (int)op->v);
			break;
		case K_RAW:
			arec_raw(r, op->key, op->s, op->len);
			break;
		}
	}
}

/* The verifier takes buf[0..len); line[0..line_len) read back. */
static json_t *
verified(const char *buf, size_t len, const char *line, size_t line_len)
{
	struct audit_verifier *v;
	char why[512];
	json_t *rec;

	CHECK((v = audit_verifier_new(NULL, 0, AUDIT_VERIFY_OPEN)) != NULL,
	    "audit_verifier_new");
	if (audit_verifier_mem(v, "arec.log", buf, len, why,
	    sizeof(why)) != 0) {
		fprintf(stderr, "fuzz_arec: the verifier refuses: %s\n", why);
		abort();
	}
	audit_verifier_free(v);
	rec = json_loadb(line, line_len, JSON_ALLOW_NUL, NULL);
	CHECK(rec != NULL, "a verified line that does not load");
	return rec;
}

/* The same record through jansson: the same line and hash as line. */
static void
same_as_jansson(const struct rec *rc, const json_t *back, const char *line,
    size_t len, const char *hash)
{
	char h[AUDIT_HASH_HEX + 1], *jline = NULL;
	json_t *rec;
	size_t jlen, i;

	CHECK((rec = json_object()) != NULL, "json_object");
	for (i = 0; i < rc->n; i++)
		CHECK(json_object_set_new(rec, rc->ops[i].key,
		    op_json(&rc->ops[i])) == 0, "json_object_set_new");
	CHECK(json_object_set(rec, "ts", json_object_get(back, "ts")) == 0,
	    "set ts");
	CHECK(json_object_set_new(rec, "type", json_string(TYPE)) == 0,
	    "set type");
	auditfmt_bound(rec);
	CHECK(auditfmt_seal(rec, 1, AUDIT_ZERO_HASH, h, &jline, &jlen) == 0,
	    "auditfmt_seal refuses the record");
	if (jlen != len || memcmp(jline, line, len) != 0) {
		fprintf(stderr, "fuzz_arec: arec:    %.*s"
		    "fuzz_arec: jansson: %.*s", (int)len, line, (int)jlen,
		    jline);
		abort();
	}
	CHECK(strcmp(h, hash) == 0, "the hashes differ");
	free(jline);
	json_decref(rec);
}

int
LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	static struct arec r;	/* 16K: kept off the stack */
	static char buf[2 * AUDIT_LINE_MAX];
	char h1[AUDIT_HASH_HEX + 1], h2[AUDIT_HASH_HEX + 1];
	struct aflat *f;
	struct rec rc;
	json_t *back;
	size_t l1, l2;

	parse(d, n, &rc);
	build(&rc, &r);
	CHECK((f = arec_finish(&r, TYPE)) != NULL, "arec_finish");
	CHECK(f->len <= AREC_BYTES, "a record over AREC_BYTES");
	l1 = aflat_seal(f, 1, AUDIT_ZERO_HASH, h1, buf, AUDIT_LINE_MAX);
	CHECK(l1 > 0 && buf[l1 - 1] == '\n', "aflat_seal, seq 1");
	l2 = aflat_seal(f, 2, h1, h2, buf + l1, AUDIT_LINE_MAX);
	CHECK(l2 > 0 && buf[l1 + l2 - 1] == '\n', "aflat_seal, seq 2");
	free(f);
	/* Two records of a chain: the same members, each seq its own. */
	back = verified(buf, l1 + l2, buf, l1 - 1);
	CHECK(json_is_string(json_object_get(back, "ts")), "no ts");
	CHECK(json_is_string(json_object_get(back, "type")) &&
	    strcmp(json_string_value(json_object_get(back, "type")), TYPE) ==
	    0, "no type");
	if (rc.cut && rc.same)	/* not one set over */
		CHECK(json_is_true(json_object_get(back, "cut")),
		    "a string was cut, and the record does not say so");
	if (rc.same)
		same_as_jansson(&rc, back, buf, l1, h1);
	json_decref(back);
	rec_free(&rc);
	return 0;
}

#ifdef FUZZ_AREC_SEEDS
/* A seed: members (sel, value) put in the input format, and tried once. */
struct seedm {
	uint8_t		 sel;
	const char	*v;
	size_t		 len;
};

#define M(kind, key, s)	{ (uint8_t)((kind) << 5 | (key)), (s), sizeof(s) - 1 }

static void
write_seed(const char *dir, const char *name, const struct seedm *m,
    size_t nm)
{
	static uint8_t b[8192];
	char path[4096];
	size_t i, n = 0;
	FILE *fp;

	for (i = 0; i < nm; i++) {
		if (n + 3 + m[i].len > sizeof(b))
			abort();
		b[n++] = m[i].sel;
		b[n++] = (uint8_t)(m[i].len >> 8);
		b[n++] = (uint8_t)m[i].len;
		memcpy(b + n, m[i].v, m[i].len);
		n += m[i].len;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fp = fopen(path, "wb")) == NULL || fwrite(b, 1, n, fp) != n ||
	    fclose(fp) != 0) {
		perror(path);
		exit(1);
	}
	LLVMFuzzerTestOneInput(b, n);
}

/* keys[] indexes, so that seeds read as what they hold. */
enum { KA = 0, KHOST = 6, KMETHOD = 7, KN = 8, KREASON = 13, KRULE = 14,
    KSANDBOX = 15, KTARGET = 20, KTLS = 21, KZ = 28, KCUT = 31,
    KHASH = 4, KPREV = 11, KSEQ = 18 };

int
main(int argc, char **argv)
{
	static char longs[1100];
	static const struct seedm request[] = {
		M(0, KSANDBOX, "box-1"), M(0, KMETHOD, "GET"),
		M(0, KHOST, "api.example.test"),
		M(0, KTARGET, "/v1/items?id=7&x=\"y\"\\z"),
		M(5, KN, "\x00\x00\x00\x07"), M(4, KTLS, "\x01\x01"),
		M(4, KRULE, "\x00"), M(0, KREASON, ""),
	};
	static const struct seedm utf8[] = {
		M(0, KA, "caf\xc3\xa9 \xe2\x82\xac \xef\xbf\xbf "
		    "\xf0\x90\x80\x80 \xf4\x8f\xbf\xbf"),
		M(0, KZ, "\x01\x1f\x7f\n\t\"\\/"),
		M(3, KHOST, "with\0nul"),
		M(0, KN, "\x80\xff\xc0\x80\xed\xa0\x80\xe2\x82"
		    "\xf4\x90\x80\x80"),
	};
	static const struct seedm raw[] = {
		M(6, KA, "[{\"fingerprint\":\"sha256:ab\",\"name\":\"tok\","
		    "\"version\":3},{\"name\":\"\\u00e9\",\"version\":1}]"),
		M(7, KZ, "{\"b\":[1,-2,null,true],\"a\":{}}"),
		M(6, KN, "\"\\ud83d\\ude00\""),
		M(7, KHOST, "1.5"),
	};
	static const struct seedm own[] = {
		M(0, KSEQ, "x"), M(5, KPREV, "\x01"), M(4, KHASH, "\x01"),
		M(4, KCUT, ""), M(0, KA, "a"), M(0, KA, "again"),
	};
	struct seedm cut[2];

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	if (sodium_init() < 0)
		return 1;
	memset(longs, 'a', sizeof(longs));
	memcpy(longs + 1014, "\xf0\x9f\x98\x80", 4);	/* across the cut */
	cut[0] = (struct seedm){ KTARGET, longs, sizeof(longs) };
	cut[1] = (struct seedm){ KHOST, "h", 1 };
	write_seed(argv[1], "request", request,
	    sizeof(request) / sizeof(request[0]));
	write_seed(argv[1], "utf8", utf8, sizeof(utf8) / sizeof(utf8[0]));
	write_seed(argv[1], "raw", raw, sizeof(raw) / sizeof(raw[0]));
	write_seed(argv[1], "own-keys", own, sizeof(own) / sizeof(own[0]));
	write_seed(argv[1], "cut", cut, 2);
	return 0;
}
#endif
