/*
 * test_auditfmt.c: the audit trail's canonical encoding, bounding,
 * sealing, chaining and checkpoints, and the verifier catching each way
 * a trail can be tampered with (files written to a temporary folder).
 */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <jansson.h>
#include <sodium.h>

#include "util/err.h"
#include "keys/sealed.h"
#include "keys/signkey.h"
#include "audit/auditfmt.h"

#define MAXREC	16
#define TS	"2026-12-01T05:40:28.123Z"

/* Two signing keys, each in its own folder, and a folder for trails. */
struct fx {
	char		 dir1[64], dir2[64], work[64];
	struct signkey	*k1, *k2;
	struct signpub	*p1, *p2;
};
static struct fx fx;

/* A trail being built: its lines ("\n" included) and their hashes. */
struct trail {
	char		*line[MAXREC];
	char		 hash[MAXREC][AUDIT_HASH_HEX + 1];
	size_t		 n;
	uint64_t	 seq;		/* the next one */
	char		 prev[AUDIT_HASH_HEX + 1];
	uint64_t	 since_cp;
};

static void
path_in(char *buf, size_t len, const char *dir, const char *name)
{
	assert_true((size_t)snprintf(buf, len, "%s/%s", dir, name) < len);
}

static void
rm_dir(const char *dir)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static int
group_setup(void **state)
{
	char path[128];
	const char *why = NULL;

	if (sodium_init() < 0)
		return -1;
	snprintf(fx.dir1, sizeof(fx.dir1), "/tmp/sl-test-audit1.XXXXXX");
	snprintf(fx.dir2, sizeof(fx.dir2), "/tmp/sl-test-audit2.XXXXXX");
	snprintf(fx.work, sizeof(fx.work), "/tmp/sl-test-audit3.XXXXXX");
	if (mkdtemp(fx.dir1) == NULL || mkdtemp(fx.dir2) == NULL ||
	    mkdtemp(fx.work) == NULL)
		return -1;
	if (keys_generate(fx.dir1, &why) != 0 ||
	    keys_generate(fx.dir2, &why) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/signing.key", fx.dir1);
	if (signkey_load(path, &fx.k1, &why) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/signing.key", fx.dir2);
	if (signkey_load(path, &fx.k2, &why) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/signing.pub", fx.dir1);
	if (signpub_load(path, &fx.p1, &why) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/signing.pub", fx.dir2);
	if (signpub_load(path, &fx.p2, &why) != 0)
		return -1;
	return 0;
}

static int
group_teardown(void **state)
{
	signkey_free(fx.k1);
	signkey_free(fx.k2);
	signpub_free(fx.p1);
	signpub_free(fx.p2);
	rm_dir(fx.dir1);
	rm_dir(fx.dir2);
	rm_dir(fx.work);
	return 0;
}

/* ---- building trails ---------------------------------------------------- */

static void
trail_init(struct trail *t, uint64_t seq, const char *prev)
{
	memset(t, 0, sizeof(*t));
	t->seq = seq;
	snprintf(t->prev, sizeof(t->prev), "%s", prev);
}

static void
trail_free(struct trail *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		free(t->line[i]);
	t->n = 0;
}

/* Seals rec (consumed) as the trail's next record. */
static void
trail_seal(struct trail *t, json_t *rec)
{
	char *line;
	size_t len;

	assert_true(t->n < MAXREC);
	assert_int_equal(auditfmt_seal(rec, t->seq, t->prev, t->hash[t->n],
	    &line, &len), 0);
	assert_int_equal(strlen(line), len);
	t->line[t->n] = line;
	memcpy(t->prev, t->hash[t->n], sizeof(t->prev));
	t->since_cp = strcmp(json_string_value(json_object_get(rec, "type")),
	    "checkpoint") == 0 ? 0 : t->since_cp + 1;
	t->n++;
	t->seq++;
	json_decref(rec);
}

static void
trail_add(struct trail *t, const char *host)
{
	trail_seal(t, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i}",
	    "ts", TS, "type", "request", "sandbox", "box", "action", "inject",
	    "method", "GET", "host", host, "status", 200));
}

/* A checkpoint of the trail so far, signed by k, counting records. */
static json_t *
checkpoint_rec(const struct trail *t, const struct signkey *k,
    uint64_t records)
{
	json_t *rec;

	rec = json_pack("{s:s, s:s, s:I, s:s, s:I}", "ts", TS,
	    "type", "checkpoint", "seq", (json_int_t)t->seq, "prev", t->prev,
	    "records", (json_int_t)records);
	assert_non_null(rec);
	if (k != NULL)
		assert_int_equal(auditfmt_checkpoint_sign(rec, k), 0);
	return rec;
}

static void
trail_cp(struct trail *t, const struct signkey *k)
{
	trail_seal(t, checkpoint_rec(t, k, t->since_cp));
}

/* Writes lines idx[0..n) of t (all when idx NULL) to dir/name. */
static void
write_lines(const char *name, char *const *lines, size_t n, char *path,
    size_t len)
{
	FILE *f;
	size_t i;

	path_in(path, len, fx.work, name);
	assert_non_null(f = fopen(path, "wb"));
	for (i = 0; i < n; i++)
		assert_int_equal(fwrite(lines[i], 1, strlen(lines[i]), f),
		    strlen(lines[i]));
	assert_int_equal(fclose(f), 0);
}

static void
write_bytes(const char *name, const void *b, size_t n, char *path,
    size_t len)
{
	FILE *f;

	path_in(path, len, fx.work, name);
	assert_non_null(f = fopen(path, "wb"));
	assert_int_equal(fwrite(b, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

/*
 * Verifies the files paths[0..n) in order with the keys given; returns
 * the first error (0: the trail is good) with why, and the stats.
 */
static int
verify(const char *const *paths, size_t n, struct signpub **pubs,
    size_t npubs, int flags, char *why, size_t why_len,
    struct audit_verify_stats *st)
{
	struct audit_verifier *v;
	size_t i;
	int r = 0;

	assert_non_null(v = audit_verifier_new(pubs, npubs, flags));
	why[0] = '\0';
	for (i = 0; i < n && r == 0; i++)
		r = audit_verifier_file(v, paths[i], why, why_len);
	if (r == 0)
		r = audit_verifier_finish(v, why, why_len);
	if (st != NULL)
		audit_verifier_stats(v, st);
	audit_verifier_free(v);
	if (r != 0)
		assert_true(why[0] != '\0');
	return r;
}

/* Verifies one file with key 1. */
static int
verify1(const char *path, int flags, char *why, size_t why_len,
    struct audit_verify_stats *st)
{
	struct signpub *pubs[] = { fx.p1 };

	return verify(&path, 1, pubs, 1, flags, why, why_len, st);
}

static void
assert_contains(const char *s, const char *part)
{
	if (strstr(s, part) == NULL)
		fail_msg("\"%s\" does not contain \"%s\"", s, part);
}

/* A five-record trail: four requests and a checkpoint. */
static void
five(struct trail *t)
{
	trail_init(t, 1, AUDIT_ZERO_HASH);
	trail_add(t, "a.test");
	trail_add(t, "b.test");
	trail_add(t, "c.test");
	trail_add(t, "d.test");
	trail_cp(t, fx.k1);
}

/* ---- encoding ----------------------------------------------------------- */

static void
test_canonical(void **state)
{
	static const char want[] = "{\"Z\":9223372036854775807,\"a\":-5,"
	    "\"b\":\"a/b\\u0001\\n\\\"\\\\\\u00E9\\uD83D\\uDE00\x7f\","
	    "\"n\":0,\"ts\":\"T\",\"type\":\"t\","
	    "\"\\u00E9\":{\"x\":false,\"y\":[1,\"x\",true,null]}}";
	json_t *rec;
	char *s;

	rec = json_pack("{s:s, s:s, s:s, s:i, s:I, s:i, s:{s:[i, s, b, n],"
	    " s:b}}", "type", "t", "ts", "T",
	    "b", "a/b\x01\n\"\\\xc3\xa9\xf0\x9f\x98\x80\x7f", "a", -5,
	    "Z", (json_int_t)INT64_MAX, "n", 0,
	    "\xc3\xa9", "y", 1, "x", 1, "x", 0);
	assert_non_null(rec);
	assert_non_null(s = auditfmt_canonical(rec));
	assert_string_equal(s, want);
	free(s);
	/* The hash member is left out; nothing else is. */
	json_object_set_new(rec, "hash", json_string(AUDIT_ZERO_HASH));
	assert_non_null(s = auditfmt_canonical(rec));
	assert_string_equal(s, want);
	free(s);
	assert_null(auditfmt_canonical(NULL));
	json_decref(rec);
}

/*
 * Keys that begin like "hash" but go on past ASCII, or with an escape,
 * sort by their bytes, not by their escaped form: the line's "hash" is
 * spliced in where jansson's sort puts it, and the line verifies.
 */
static void
test_seal_keys_near_hash(void **state)
{
	static const char *const keys[] = { "ha\xd9\x8ch", "has\x01",
	    "has\"", "hasH", "hash\xc3\xa9", "ha", "h\\", "hat" };
	struct audit_verifier *v;
	char h[AUDIT_HASH_HEX + 1], why[256], *line, *canon;
	json_t *rec, *back;
	size_t i, len;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		assert_non_null(rec = json_pack("{s:s, s:s, s:s}", "ts", "T",
		    "type", "t", keys[i], "v"));
		assert_int_equal(auditfmt_seal(rec, 1, AUDIT_ZERO_HASH, h,
		    &line, &len), 0);
		/* The line is the canonical encoding of what it holds. */
		assert_non_null(back = json_loadb(line, len, 0, NULL));
		assert_non_null(canon = json_dumps(back, JSON_COMPACT |
		    JSON_SORT_KEYS | JSON_ENSURE_ASCII));
		assert_int_equal(strlen(canon), len - 1);
		assert_memory_equal(canon, line, len - 1);
		assert_non_null(v = audit_verifier_new(NULL, 0,
		    AUDIT_VERIFY_OPEN));
		assert_int_equal(audit_verifier_mem(v, "k", line, len, why,
		    sizeof(why)), 0);
		audit_verifier_free(v);
		free(canon);
		free(line);
		json_decref(back);
		json_decref(rec);
	}
}

static void
test_seal_refusals(void **state)
{
	static const char *const bad_prev[] = { "", "00",
	    "000000000000000000000000000000000000000000000000000000000000000A",
	    "000000000000000000000000000000000000000000000000000000000000000",
	    "0000000000000000000000000000000000000000000000000000000000000000"
	    "0", NULL };
	char h[AUDIT_HASH_HEX + 1], *line = NULL, *big;
	json_t *rec, *copy, *deep;
	size_t len = 0, i;

	/* A real number, anywhere. */
	rec = json_pack("{s:s, s:s, s:{s:[f]}}", "ts", TS, "type", "x",
	    "a", "b", 1.5);
	copy = json_deep_copy(rec);
	assert_int_equal(auditfmt_seal(rec, 1, AUDIT_ZERO_HASH, h, &line,
	    &len), SL_ERR_INVALID);
	assert_true(json_equal(rec, copy));	/* left as it was */
	assert_null(line);
	json_decref(rec);
	json_decref(copy);
	/* No ts, no type, ts not a string. */
	rec = json_pack("{s:s}", "type", "x");
	assert_int_equal(auditfmt_seal(rec, 1, AUDIT_ZERO_HASH, h, &line,
	    &len), SL_ERR_INVALID);
	json_decref(rec);
	rec = json_pack("{s:s}", "ts", TS);
	assert_int_equal(auditfmt_seal(rec, 1, AUDIT_ZERO_HASH, h, &line,
	    &len), SL_ERR_INVALID);
	json_decref(rec);
	rec = json_pack("{s:i, s:s}", "ts", 5, "type", "x");
	assert_int_equal(auditfmt_seal(rec, 1, AUDIT_ZERO_HASH, h, &line,
	    &len), SL_ERR_INVALID);
	json_decref(rec);
	/* seq 0 and over INT64_MAX; a prev that is not a hash. */
	rec = json_pack("{s:s, s:s}", "ts", TS, "type", "x");
	assert_int_equal(auditfmt_seal(rec, 0, AUDIT_ZERO_HASH, h, &line,
	    &len), SL_ERR_INVALID);
	assert_int_equal(auditfmt_seal(rec, (uint64_t)INT64_MAX + 1,
	    AUDIT_ZERO_HASH, h, &line, &len), SL_ERR_INVALID);
	for (i = 0; bad_prev[i] != NULL; i++)
		assert_int_equal(auditfmt_seal(rec, 1, bad_prev[i], h, &line,
		    &len), SL_ERR_INVALID);
	assert_int_equal(auditfmt_seal(rec, 1, NULL, h, &line, &len),
	    SL_ERR_INVALID);
	assert_null(json_object_get(rec, "seq"));
	/* seq 1 and only seq 1 has the zero prev. */
	assert_int_equal(auditfmt_seal(rec, 2, AUDIT_ZERO_HASH, h, &line,
	    &len), SL_ERR_INVALID);
	assert_int_equal(auditfmt_seal(rec, 1, "abababababababababababababab"
	    "abababababababababababababababababab", h, &line, &len),
	    SL_ERR_INVALID);
	/* Not an object. */
	deep = json_array();
	assert_int_equal(auditfmt_seal(deep, 1, AUDIT_ZERO_HASH, h, &line,
	    &len), SL_ERR_INVALID);
	json_decref(deep);
	/* Too deep. */
	deep = json_array();
	json_object_set_new(rec, "deep", deep);
	for (i = 0; i < AUDIT_DEPTH_MAX; i++) {
		json_array_append_new(deep, json_array());
		deep = json_array_get(deep, 0);
	}
	assert_int_equal(auditfmt_seal(rec, 1, AUDIT_ZERO_HASH, h, &line,
	    &len), SL_ERR_INVALID);
	json_object_del(rec, "deep");
	/* A line over AUDIT_LINE_MAX, unless bounded first. */
	assert_non_null(big = malloc(AUDIT_LINE_MAX + 1));
	memset(big, 'x', AUDIT_LINE_MAX);
	big[AUDIT_LINE_MAX] = '\0';
	json_object_set_new(rec, "big", json_string(big));
	free(big);
	assert_int_equal(auditfmt_seal(rec, 1, AUDIT_ZERO_HASH, h, &line,
	    &len), SL_ERR_TOO_BIG);
	assert_null(line);
	auditfmt_bound(rec);
	assert_int_equal(auditfmt_seal(rec, 1, AUDIT_ZERO_HASH, h, &line,
	    &len), 0);
	assert_true(len < 2 * AUDIT_STR_MAX);
	free(line);
	json_decref(rec);
}

/* ---- bounding ----------------------------------------------------------- */

static void
test_bound(void **state)
{
	char s[3000], *enc;
	const char *v;
	json_t *rec, *arr;
	size_t i, len;

	/* 'a', then two-byte characters: the cut falls inside one. */
	s[0] = 'a';
	for (i = 1; i + 1 < sizeof(s) - 1; i += 2) {
		s[i] = (char)0xc3;
		s[i + 1] = (char)0xa9;
	}
	s[i] = '\0';
	assert_non_null(arr = json_array());
	for (i = 0; i < 100; i++)
		json_array_append_new(arr, json_integer((json_int_t)i));
	rec = json_pack("{s:s, s:s, s:s, s:{s:[s]}, s:o}", "ts", TS,
	    "type", "x", "top", s, "in", "deep", s, "many", arr);
	assert_non_null(rec);
	auditfmt_bound(rec);
	assert_true(json_is_true(json_object_get(rec, "cut")));
	assert_int_equal(json_array_size(json_object_get(rec, "many")), 64);
	assert_int_equal(json_integer_value(json_array_get(
	    json_object_get(rec, "many"), 63)), 63);
	v = json_string_value(json_object_get(rec, "top"));
	len = strlen(v);
	assert_true(len <= AUDIT_STR_MAX);
	assert_true(len > AUDIT_STR_MAX - 8 - 2);
	assert_string_equal(v + len - 8, "...[cut]");
	assert_memory_equal(v, s, len - 8);	/* a prefix, whole characters */
	assert_true(((len - 8) & 1) == 1);
	assert_string_equal(v, json_string_value(json_array_get(
	    json_object_get(json_object_get(rec, "in"), "deep"), 0)));
	/* Still UTF-8: it seals, and bounding again changes nothing. */
	assert_non_null(enc = auditfmt_canonical(rec));
	auditfmt_bound(rec);
	assert_string_equal(json_string_value(json_object_get(rec, "top")), v);
	free(enc);
	json_decref(rec);

	/* At the bound, nothing is cut and no "cut" is added. */
	memset(s, 'y', AUDIT_STR_MAX);
	s[AUDIT_STR_MAX] = '\0';
	rec = json_pack("{s:s, s:s, s:s}", "ts", TS, "type", "x", "s", s);
	auditfmt_bound(rec);
	assert_null(json_object_get(rec, "cut"));
	assert_int_equal(json_string_length(json_object_get(rec, "s")),
	    AUDIT_STR_MAX);
	json_decref(rec);
	auditfmt_bound(NULL);
}

/* ---- sealing and chaining ----------------------------------------------- */

static void
test_seal_hash(void **state)
{
	static const char prev[] =
	    "abababababababababababababababababababababababababababababababab";
	static const char canon[] = "{\"path\":\"/v1/x\",\"prev\":\"" 
	    "abababababababababababababababababababababababababababababababab"
	    "\",\"sandbox\":\"box\",\"seq\":7,\"ts\":\"" TS "\","
	    "\"type\":\"conn\"}";
	char h[AUDIT_HASH_HEX + 1], want[AUDIT_HASH_HEX + 1], expect[512];
	uint8_t raw[32];
	json_t *rec;
	char *line;
	size_t len;

	crypto_generichash(raw, sizeof(raw), (const uint8_t *)canon,
	    strlen(canon), NULL, 0);
	sodium_bin2hex(want, sizeof(want), raw, sizeof(raw));
	snprintf(expect, sizeof(expect), "{\"hash\":\"%s\",%s\n", want,
	    canon + 1);

	/* A stale hash, seq and prev are replaced. */
	rec = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i}", "ts", TS,
	    "type", "conn", "sandbox", "box", "path", "/v1/x",
	    "hash", "stale", "seq", 99);
	assert_int_equal(auditfmt_seal(rec, 7, prev, h, &line, &len), 0);
	assert_string_equal(h, want);
	assert_string_equal(line, expect);
	assert_int_equal(len, strlen(expect));
	assert_string_equal(json_string_value(json_object_get(rec, "hash")),
	    want);
	assert_int_equal(json_integer_value(json_object_get(rec, "seq")), 7);
	assert_string_equal(json_string_value(json_object_get(rec, "prev")),
	    prev);
	free(line);
	json_decref(rec);
}

static void
test_chain_three(void **state)
{
	struct audit_verify_stats st;
	struct trail t;
	char path[128], why[512];
	json_t *rec;
	size_t i;

	trail_init(&t, 1, AUDIT_ZERO_HASH);
	trail_add(&t, "a.test");
	trail_add(&t, "b.test");
	trail_add(&t, "c.test");
	for (i = 0; i < 3; i++) {
		assert_non_null(rec = json_loads(t.line[i], 0, NULL));
		assert_int_equal(json_integer_value(json_object_get(rec,
		    "seq")), i + 1);
		assert_string_equal(json_string_value(json_object_get(rec,
		    "prev")), i == 0 ? AUDIT_ZERO_HASH : t.hash[i - 1]);
		assert_string_equal(json_string_value(json_object_get(rec,
		    "hash")), t.hash[i]);
		json_decref(rec);
	}
	write_lines("three.log", t.line, t.n, path, sizeof(path));
	/* No checkpoint: only an open trail passes. */
	assert_int_equal(verify1(path, AUDIT_VERIFY_OPEN, why, sizeof(why),
	    &st), 0);
	assert_int_equal(st.records, 3);
	assert_int_equal(st.first_seq, 1);
	assert_int_equal(st.last_seq, 3);
	assert_int_equal(st.unsigned_tail, 3);
	assert_int_equal(st.checkpoints, 0);
	assert_int_equal(st.mid_chain, 0);
	assert_string_equal(st.last_hash, t.hash[2]);
	assert_int_equal(verify1(path, 0, why, sizeof(why), NULL),
	    SL_ERR_INVALID);
	assert_contains(why, "three.log:3: seq 3: the trail ends without a "
	    "checkpoint");
	trail_free(&t);
}

/* ---- checkpoints -------------------------------------------------------- */

static void
test_checkpoint_sign_verify(void **state)
{
	struct audit_verify_stats st;
	struct signpub *both[2] = { fx.p2, fx.p1 };
	struct trail t;
	uint8_t raw[SIGNKEY_SIG_LEN];
	char path[128], why[512], *msg;
	const char *sig;
	json_t *rec;
	size_t len;

	trail_init(&t, 1, AUDIT_ZERO_HASH);
	trail_add(&t, "a.test");
	rec = checkpoint_rec(&t, fx.k1, 1);
	assert_string_equal(json_string_value(json_object_get(rec, "key_id")),
	    signkey_kid(fx.k1));
	sig = json_string_value(json_object_get(rec, "sig"));
	assert_int_equal(strlen(sig), 86);	/* 64 bytes, no padding */
	assert_null(strpbrk(sig, "+/="));
	assert_int_equal(sodium_base642bin(raw, sizeof(raw), sig, strlen(sig),
	    NULL, &len, NULL, sodium_base64_VARIANT_URLSAFE_NO_PADDING), 0);
	assert_int_equal(len, SIGNKEY_SIG_LEN);
	/* Over the canonical encoding less sig and hash. */
	json_object_del(rec, "sig");
	assert_non_null(msg = auditfmt_canonical(rec));
	assert_int_equal(signpub_verify(fx.p1, (const uint8_t *)msg,
	    strlen(msg), raw), 0);
	assert_int_not_equal(signpub_verify(fx.p2, (const uint8_t *)msg,
	    strlen(msg), raw), 0);
	free(msg);
	json_decref(rec);
	trail_cp(&t, fx.k1);
	write_lines("cp.log", t.line, t.n, path, sizeof(path));

	assert_int_equal(verify1(path, 0, why, sizeof(why), &st), 0);
	assert_int_equal(st.checkpoints, 1);
	assert_int_equal(st.last_checkpoint_seq, 2);
	assert_int_equal(st.unsigned_tail, 0);
	assert_string_equal(st.last_kid, signkey_kid(fx.k1));
	assert_string_equal(st.last_checkpoint_ts, TS);
	assert_int_equal(verify(&(const char *){ path }, 1, both, 2, 0, why,
	    sizeof(why), NULL), 0);
	/* Without its key the trail cannot be checked. */
	assert_int_equal(verify(&(const char *){ path }, 1, &fx.p2, 1, 0,
	    why, sizeof(why), NULL), SL_ERR_NOT_FOUND);
	assert_contains(why, "cp.log:2: seq 2: checkpoint signed by key ");
	assert_contains(why, "not one of the public keys given");
	assert_int_equal(verify(&(const char *){ path }, 1, NULL, 0, 0, why,
	    sizeof(why), NULL), SL_ERR_NOT_FOUND);
	assert_contains(why, "no public key given");

	/* Signing refuses what is not a complete checkpoint. */
	rec = json_pack("{s:s, s:s, s:i, s:s}", "ts", TS, "type", "request",
	    "seq", 3, "prev", t.prev);
	assert_int_equal(auditfmt_checkpoint_sign(rec, fx.k1),
	    SL_ERR_INVALID);
	json_object_set_new(rec, "type", json_string("checkpoint"));
	assert_int_equal(auditfmt_checkpoint_sign(rec, fx.k1),
	    SL_ERR_INVALID);	/* no records */
	json_object_set_new(rec, "records", json_integer(0));
	json_object_set_new(rec, "prev", json_string("x"));
	assert_int_equal(auditfmt_checkpoint_sign(rec, fx.k1),
	    SL_ERR_INVALID);
	assert_null(json_object_get(rec, "sig"));
	json_decref(rec);
	trail_free(&t);
}

/* ---- the verifier against tampering ------------------------------------- */

/* Every byte of a good file, changed three ways, fails verification. */
static void
test_flip_every_byte(void **state)
{
	static const uint8_t masks[] = { 0x01, 0x20, 0x80 };
	struct trail t;
	char path[128], why[512], *all;
	size_t len = 0, i, m, fails;
	uint8_t save;

	five(&t);
	for (i = 0; i < t.n; i++)
		len += strlen(t.line[i]);
	assert_non_null(all = malloc(len + 1));
	all[0] = '\0';
	for (i = 0; i < t.n; i++)
		strcat(all, t.line[i]);
	write_bytes("five.log", all, len, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), NULL), 0);
	for (m = 0; m < sizeof(masks); m++) {
		fails = 0;
		for (i = 0; i < len; i++) {
			save = (uint8_t)all[i];
			all[i] = (char)(save ^ masks[m]);
			write_bytes("five.log", all, len, path, sizeof(path));
			if (verify1(path, 0, why, sizeof(why), NULL) != 0)
				fails++;
			else
				fail_msg("byte %zu ^ 0x%02x passed", i,
				    masks[m]);
			/* Open, only the last "\n" may go (a torn line). */
			if (verify1(path, AUDIT_VERIFY_OPEN, why, sizeof(why),
			    NULL) == 0 && i != len - 1)
				fail_msg("byte %zu ^ 0x%02x passed when open",
				    i, masks[m]);
			all[i] = (char)save;
		}
		assert_int_equal(fails, len);
	}
	free(all);
	trail_free(&t);
}

static void
test_record_removed(void **state)
{
	struct audit_verify_stats st;
	struct trail t;
	char path[128], why[512], *lines[MAXREC];

	five(&t);
	lines[0] = t.line[0];
	lines[1] = t.line[1];
	lines[2] = t.line[3];
	lines[3] = t.line[4];
	write_lines("removed.log", lines, 4, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), NULL),
	    SL_ERR_INVALID);
	assert_contains(why, "removed.log:3: seq 4: seq 4 after seq 2");

	/*
	 * The first record removed: the rest is a trail that starts in the
	 * middle, which verifies, but says so.
	 */
	write_lines("headless.log", t.line + 1, 4, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), &st), 0);
	assert_int_equal(st.mid_chain, 1);
	assert_int_equal(st.first_seq, 2);
	assert_string_equal(st.first_prev, t.hash[0]);
	trail_free(&t);
}

static void
test_records_swapped(void **state)
{
	struct trail t;
	char path[128], why[512], *lines[MAXREC];

	five(&t);
	memcpy(lines, t.line, sizeof(lines));
	lines[1] = t.line[2];
	lines[2] = t.line[1];
	write_lines("swapped.log", lines, t.n, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), NULL),
	    SL_ERR_INVALID);
	assert_contains(why, "swapped.log:2: seq 3: seq 3 after seq 1, and "
	    "prev is not its hash");
	trail_free(&t);
}

static void
test_record_inserted(void **state)
{
	struct trail t, f;
	char path[128], why[512], *lines[MAXREC];
	json_t *rec;
	size_t i;

	five(&t);
	/* A forged seq 3, validly hashed on seq 2, before the real one. */
	trail_init(&f, 3, t.hash[1]);
	trail_add(&f, "evil.test");
	lines[0] = t.line[0];
	lines[1] = t.line[1];
	lines[2] = f.line[0];
	for (i = 2; i < t.n; i++)
		lines[i + 1] = t.line[i];
	write_lines("inserted.log", lines, t.n + 1, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), NULL),
	    SL_ERR_INVALID);
	assert_contains(why, "inserted.log:4: seq 3: seq 3 after seq 3");
	trail_free(&f);

	/*
	 * Everything after it renumbered and chained again: the records
	 * pass, the checkpoint (its seq and prev signed) does not.
	 */
	trail_init(&f, 1, AUDIT_ZERO_HASH);
	trail_add(&f, "a.test");
	trail_add(&f, "b.test");
	trail_add(&f, "evil.test");
	trail_add(&f, "c.test");
	trail_add(&f, "d.test");
	assert_non_null(rec = json_loads(t.line[4], 0, NULL));
	json_object_set_new(rec, "records", json_integer(5));
	trail_seal(&f, rec);
	write_lines("rechained.log", f.line, f.n, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), NULL),
	    SL_ERR_INVALID);
	assert_contains(why, "rechained.log:6: seq 6: checkpoint signature "
	    "does not verify");
	trail_free(&f);
	trail_free(&t);
}

/* r1 r2 cp3 r4 r5 cp6 in one file, r7 cp8 in the next. */
static void
six_and_two(struct trail *t)
{
	trail_init(t, 1, AUDIT_ZERO_HASH);
	trail_add(t, "a.test");
	trail_add(t, "b.test");
	trail_cp(t, fx.k1);
	trail_add(t, "c.test");
	trail_add(t, "d.test");
	trail_cp(t, fx.k1);
	trail_add(t, "e.test");
	trail_cp(t, fx.k1);
}

static void
test_truncated_tail(void **state)
{
	struct signpub *pubs[] = { fx.p1 };
	struct audit_verify_stats st;
	struct trail t;
	char path[128], next[128], why[512];
	const char *paths[2] = { path, next };

	six_and_two(&t);
	write_lines("next.log", t.line + 6, 2, next, sizeof(next));
	/* r5 and cp6 removed: the trail no longer ends with a checkpoint. */
	write_lines("cut.log", t.line, 4, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), &st),
	    SL_ERR_INVALID);
	assert_contains(why, "cut.log:4: seq 4: the trail ends without a "
	    "checkpoint (1 record after the one at seq 3)");
	/* Open, it passes, with the unsigned tail shown. */
	assert_int_equal(verify1(path, AUDIT_VERIFY_OPEN, why, sizeof(why),
	    &st), 0);
	assert_int_equal(st.unsigned_tail, 1);
	assert_int_equal(st.last_checkpoint_seq, 3);
	assert_int_equal(st.last_seq, 4);
	/* With the file rotated after it, the gap shows. */
	assert_int_equal(verify(paths, 2, pubs, 1, AUDIT_VERIFY_OPEN, why,
	    sizeof(why), NULL), SL_ERR_INVALID);
	assert_contains(why, "next.log:1: seq 7: seq 7 after seq 4 (the last "
	    "record of ");
	assert_contains(why, "cut.log), and prev is not its hash");

	/*
	 * Cut exactly after a checkpoint, the file alone verifies: only an
	 * anchor kept elsewhere (the last checkpoint's seq and hash, the
	 * daemon's live seq) tells.  stats say where it ends.
	 */
	write_lines("cut.log", t.line, 3, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), &st), 0);
	assert_int_equal(st.last_seq, 3);
	assert_string_equal(st.last_hash, t.hash[2]);
	/* ... unless the next file is there too. */
	assert_int_equal(verify(paths, 2, pubs, 1, 0, why, sizeof(why),
	    NULL), SL_ERR_INVALID);
	assert_contains(why, "seq 7 after seq 3");
	trail_free(&t);
}

static void
test_forged_checkpoint(void **state)
{
	struct trail t, f;
	char path[128], why[512], *msg;
	uint8_t raw[SIGNKEY_SIG_LEN];
	char b64[128];
	json_t *rec, *cp3;

	/* Re-signed with another key. */
	trail_init(&t, 1, AUDIT_ZERO_HASH);
	trail_add(&t, "a.test");
	trail_add(&t, "b.test");
	trail_cp(&t, fx.k2);
	write_lines("other-key.log", t.line, t.n, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), NULL),
	    SL_ERR_NOT_FOUND);
	assert_contains(why, "other-key.log:3: seq 3: checkpoint signed by "
	    "key ");
	trail_free(&t);

	/* Signed with another key but naming ours. */
	trail_init(&t, 1, AUDIT_ZERO_HASH);
	trail_add(&t, "a.test");
	rec = checkpoint_rec(&t, NULL, 1);
	json_object_set_new(rec, "key_id", json_string(signkey_kid(fx.k1)));
	assert_non_null(msg = auditfmt_canonical(rec));
	assert_int_equal(signkey_sign(fx.k2, (const uint8_t *)msg,
	    strlen(msg), raw), 0);
	free(msg);
	sodium_bin2base64(b64, sizeof(b64), raw, sizeof(raw),
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	json_object_set_new(rec, "sig", json_string(b64));
	trail_seal(&t, rec);
	write_lines("named.log", t.line, t.n, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), NULL),
	    SL_ERR_INVALID);
	assert_contains(why, "named.log:2: seq 2: checkpoint signature does "
	    "not verify");
	trail_free(&t);

	/* The sig of another checkpoint, the record hashed again. */
	six_and_two(&t);
	assert_non_null(cp3 = json_loads(t.line[2], 0, NULL));
	trail_init(&f, 1, AUDIT_ZERO_HASH);
	trail_add(&f, "a.test");
	trail_add(&f, "b.test");
	trail_cp(&f, fx.k1);
	trail_add(&f, "c.test");
	trail_add(&f, "d.test");
	rec = checkpoint_rec(&f, fx.k1, 2);
	json_object_set(rec, "sig", json_object_get(cp3, "sig"));
	trail_seal(&f, rec);
	write_lines("copied-sig.log", f.line, f.n, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), NULL),
	    SL_ERR_INVALID);
	assert_contains(why, "copied-sig.log:6: seq 6: checkpoint signature "
	    "does not verify");
	json_decref(cp3);
	trail_free(&f);
	trail_free(&t);

	/* Signed, but counting wrong. */
	trail_init(&t, 1, AUDIT_ZERO_HASH);
	trail_add(&t, "a.test");
	trail_add(&t, "b.test");
	trail_seal(&t, checkpoint_rec(&t, fx.k1, 1));
	write_lines("count.log", t.line, t.n, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), NULL),
	    SL_ERR_INVALID);
	assert_contains(why, "count.log:3: seq 3: checkpoint counts 1 "
	    "records, but 2 came since the start of the trail");
	trail_free(&t);
}

/* A first checkpoint after a mid-chain start cannot be counted. */
static void
test_mid_chain_count(void **state)
{
	struct audit_verify_stats st;
	struct trail t;
	char path[128], why[512];
	char prev[] =
	    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

	trail_init(&t, 100, prev);
	trail_add(&t, "a.test");
	trail_seal(&t, checkpoint_rec(&t, fx.k1, 57));	/* from seq 44 */
	trail_add(&t, "b.test");
	trail_cp(&t, fx.k1);
	write_lines("mid.log", t.line, t.n, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), &st), 0);
	assert_int_equal(st.mid_chain, 1);
	assert_string_equal(st.first_prev, prev);
	assert_int_equal(st.first_seq, 100);
	assert_int_equal(st.checkpoints, 2);
	trail_free(&t);

	/* Even when the trail given starts with that checkpoint. */
	trail_init(&t, 100, prev);
	trail_seal(&t, checkpoint_rec(&t, fx.k1, 57));
	trail_add(&t, "a.test");
	trail_cp(&t, fx.k1);
	write_lines("mid.log", t.line, t.n, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), &st), 0);
	assert_int_equal(st.mid_chain, 1);
	trail_free(&t);
	/* From seq 1, the first checkpoint is counted from the start. */
	trail_init(&t, 1, AUDIT_ZERO_HASH);
	trail_seal(&t, checkpoint_rec(&t, fx.k1, 3));
	write_lines("mid.log", t.line, t.n, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), NULL),
	    SL_ERR_INVALID);
	assert_contains(why, "mid.log:1: seq 1: checkpoint counts 3 records, "
	    "but 0 came since the start of the trail");
	trail_free(&t);

	/* The second one is counted. */
	trail_init(&t, 100, prev);
	trail_add(&t, "a.test");
	trail_seal(&t, checkpoint_rec(&t, fx.k1, 57));
	trail_add(&t, "b.test");
	trail_seal(&t, checkpoint_rec(&t, fx.k1, 2));
	write_lines("mid.log", t.line, t.n, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), NULL),
	    SL_ERR_INVALID);
	assert_contains(why, "mid.log:4: seq 103: checkpoint counts 2 records,"
	    " but 1 came since the checkpoint before");
	trail_free(&t);
}

static void
test_other_chain(void **state)
{
	struct signpub *pubs[] = { fx.p1 };
	struct trail a, b;
	char pa[128], pb[128], why[512];
	const char *paths[2] = { pa, pb };
	char other[] =
	    "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

	trail_init(&a, 1, AUDIT_ZERO_HASH);
	trail_add(&a, "a.test");
	trail_add(&a, "b.test");
	trail_cp(&a, fx.k1);
	write_lines("a.log", a.line, a.n, pa, sizeof(pa));
	/* The right seq, another chain. */
	trail_init(&b, 4, other);
	trail_add(&b, "x.test");
	trail_cp(&b, fx.k1);
	write_lines("b.log", b.line, b.n, pb, sizeof(pb));
	assert_int_equal(verify(paths, 2, pubs, 1, 0, why, sizeof(why), NULL),
	    SL_ERR_INVALID);
	assert_contains(why, "b.log:1: seq 4: prev is not the hash of seq 3 "
	    "(the last record of ");
	assert_contains(why, "a.log)");
	/* Alone, b verifies (from the middle of its own chain). */
	assert_int_equal(verify(paths + 1, 1, pubs, 1, 0, why, sizeof(why),
	    NULL), 0);
	trail_free(&b);
	/* Another trail from its start. */
	trail_init(&b, 1, AUDIT_ZERO_HASH);
	trail_add(&b, "x.test");
	trail_cp(&b, fx.k1);
	write_lines("b.log", b.line, b.n, pb, sizeof(pb));
	assert_int_equal(verify(paths, 2, pubs, 1, 0, why, sizeof(why), NULL),
	    SL_ERR_INVALID);
	assert_contains(why, "b.log:1: seq 1: seq 1 after seq 3 (the last "
	    "record of ");
	assert_contains(why, "a.log): a new trail starts (prev is zero)");
	trail_free(&b);
	trail_free(&a);
}

static void
test_torn_last_line(void **state)
{
	struct signpub *pubs[] = { fx.p1 };
	struct audit_verify_stats st;
	struct trail t;
	char path[128], next[128], why[512], *lines[MAXREC];
	const char *paths[2] = { path, next };
	size_t torn;

	six_and_two(&t);
	memcpy(lines, t.line, sizeof(lines));
	torn = strlen(t.line[3]) / 2;
	t.line[3][torn] = '\0';		/* r4 half written */
	write_lines("torn.log", lines, 4, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), NULL),
	    SL_ERR_INVALID);
	assert_contains(why, "torn.log:4: torn line (no newline) (after seq "
	    "3)");
	assert_int_equal(verify1(path, AUDIT_VERIFY_OPEN, why, sizeof(why),
	    &st), 0);
	assert_int_equal(st.torn, 1);
	assert_int_equal(st.torn_bytes, torn);
	assert_int_equal(st.records, 3);
	assert_int_equal(st.unsigned_tail, 0);
	/* Not the last file: not tolerated even open. */
	write_lines("next.log", t.line + 6, 2, next, sizeof(next));
	assert_int_equal(verify(paths, 2, pubs, 1, AUDIT_VERIFY_OPEN, why,
	    sizeof(why), NULL), SL_ERR_INVALID);
	assert_contains(why, "torn.log:4: torn line (no newline), and another "
	    "file follows");
	trail_free(&t);
}

static void
test_rotation(void **state)
{
	struct signpub *pubs[] = { fx.p1 };
	struct audit_verify_stats st;
	struct trail t;
	char p1[128], p2[128], p3[128], why[512];
	const char *paths[3] = { p1, p2, p3 };
	json_t *rec;

	six_and_two(&t);
	write_lines("sluice.log.1", t.line, 3, p1, sizeof(p1));
	write_lines("sluice.log.2", t.line + 3, 3, p2, sizeof(p2));
	write_lines("sluice.log", t.line + 6, 2, p3, sizeof(p3));
	/* The first record of each file continues the one before. */
	assert_non_null(rec = json_loads(t.line[3], 0, NULL));
	assert_string_equal(json_string_value(json_object_get(rec, "prev")),
	    t.hash[2]);
	json_decref(rec);
	assert_int_equal(verify(paths, 3, pubs, 1, 0, why, sizeof(why), &st),
	    0);
	assert_int_equal(st.files, 3);
	assert_int_equal(st.records, 8);
	assert_int_equal(st.checkpoints, 3);
	assert_int_equal(st.last_checkpoint_seq, 8);
	assert_string_equal(st.last_hash, t.hash[7]);
	/* In the wrong order. */
	paths[0] = p2;
	paths[1] = p1;
	assert_int_equal(verify(paths, 3, pubs, 1, 0, why, sizeof(why), NULL),
	    SL_ERR_INVALID);
	assert_contains(why, "sluice.log.1:1: seq 1: seq 1 after seq 6");
	/* An empty file between two others changes nothing. */
	write_bytes("empty.log", "", 0, p2, sizeof(p2));
	paths[0] = p1;
	paths[1] = p2;
	write_lines("sluice.log", t.line + 3, 5, p3, sizeof(p3));
	assert_int_equal(verify(paths, 3, pubs, 1, 0, why, sizeof(why), &st),
	    0);
	assert_int_equal(st.files, 3);
	trail_free(&t);
}

/* The bytes b[0..n) (no "\n" added) fail with want in why. */
static void
bad_bytes(const char *b, size_t n, const char *want)
{
	char path[128], why[512];

	write_bytes("bad.log", b, n, path, sizeof(path));
	assert_int_not_equal(verify1(path, AUDIT_VERIFY_OPEN, why, sizeof(why),
	    NULL), 0);
	assert_contains(why, want);
}

static void
bad_line(const char *line, const char *want)
{
	bad_bytes(line, strlen(line), want);
}

/* rec (consumed) hashed and written as a line, nothing checked. */
static char *
hand_seal(json_t *rec)
{
	char h[AUDIT_HASH_HEX + 1], *canon, *line, *out;
	uint8_t raw[32];

	assert_non_null(canon = auditfmt_canonical(rec));
	crypto_generichash(raw, sizeof(raw), (const uint8_t *)canon,
	    strlen(canon), NULL, 0);
	sodium_bin2hex(h, sizeof(h), raw, sizeof(raw));
	json_object_set_new(rec, "hash", json_string(h));
	assert_non_null(line = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS |
	    JSON_ENSURE_ASCII));
	assert_non_null(out = malloc(strlen(line) + 2));
	sprintf(out, "%s\n", line);
	free(line);
	free(canon);
	json_decref(rec);
	return out;
}

/* rec sealed as seq 1, with its line edited: s/from/to/. */
static char *
sealed_edit(json_t *rec, const char *from, const char *to)
{
	char h[AUDIT_HASH_HEX + 1], *line, *out, *at;
	size_t len;

	assert_int_equal(auditfmt_seal(rec, 1, AUDIT_ZERO_HASH, h, &line,
	    &len), 0);
	json_decref(rec);
	assert_non_null(at = strstr(line, from));
	assert_non_null(out = malloc(len + strlen(to) + 1));
	memcpy(out, line, (size_t)(at - line));
	strcpy(out + (at - line), to);
	strcat(out, at + strlen(from));
	free(line);
	return out;
}

static void
test_hostile_lines(void **state)
{
	char *s, *big;
	size_t i;

	bad_line("\n", "bad.log:1: not JSON");
	bad_line("[1]\n", "bad.log:1: not a JSON object");
	bad_line("{\"a\":1,\"a\":1}\n", "bad.log:1: not JSON");
	bad_line("{\"prev\":\"" AUDIT_ZERO_HASH "\",\"seq\":1,\"ts\":\"x\","
	    "\"type\":\"x\"}\n", "seq 1: hash is not 64 lowercase hex digits");
	bad_line("{\"seq\":1,\"type\":\"x\"}\n", "seq 1: no ts");
	bad_line("{\"seq\":1.0,\"ts\":\"x\",\"type\":\"x\"}\n",
	    "bad.log:1: seq is not a positive integer");
	bad_line("{\"seq\":-1,\"ts\":\"x\",\"type\":\"x\"}\n",
	    "seq is not a positive integer");
	bad_line("{\"a\":\"\x01\"}\n", "not JSON");
	bad_line("{\"a\":\"\xc3\"}\n", "not JSON");
	bad_bytes("{\"a\":1}\0{\"b\":2}\n", 16, "not JSON");
	/* Canonical or not. */
	s = sealed_edit(json_pack("{s:s, s:s, s:s}", "ts", TS, "type", "x",
	    "p", "a/b"), "a/b", "a\\/b");
	bad_line(s, "bad.log:1: seq 1: not canonical");
	free(s);
	s = sealed_edit(json_pack("{s:s, s:s, s:s}", "ts", TS, "type", "x",
	    "p", "\xc3\xa9"), "\\u00E9", "\\u00e9");
	bad_line(s, "seq 1: not canonical");
	free(s);
	s = sealed_edit(json_pack("{s:s, s:s, s:s}", "ts", TS, "type", "x",
	    "p", "\xc3\xa9"), "\\u00E9", "\xc3\xa9");
	bad_line(s, "seq 1: not canonical");
	free(s);
	s = sealed_edit(json_pack("{s:s, s:s}", "ts", TS, "type", "x"),
	    ",\"seq\"", ", \"seq\"");
	bad_line(s, "seq 1: not canonical");
	free(s);
	s = sealed_edit(json_pack("{s:s, s:s}", "ts", TS, "type", "x"),
	    "\n", "\r\n");
	bad_line(s, "seq 1: not canonical");
	free(s);
	s = sealed_edit(json_pack("{s:s, s:s, s:i}", "ts", TS, "type", "x",
	    "n", 100), "100", "1e2");
	bad_line(s, "seq 1: a real number");
	free(s);
	s = sealed_edit(json_pack("{s:s, s:s, s:i}", "ts", TS, "type", "x",
	    "n", 0), ":0,", ":-0,");
	bad_line(s, "seq 1: not canonical");
	free(s);
	s = sealed_edit(json_pack("{s:s, s:s}", "ts", TS, "type", "x"),
	    "\"seq\":1", "\"seq\":01");
	bad_line(s, "not JSON");
	free(s);
	/* Hashed right, but prev not zero at seq 1, or zero later. */
	s = hand_seal(json_pack("{s:s, s:s, s:i, s:s}", "ts", TS, "type", "x",
	    "seq", 2, "prev", AUDIT_ZERO_HASH));
	bad_line(s, "bad.log:1: seq 2: prev is zero, as only seq 1 has it");
	free(s);
	s = hand_seal(json_pack("{s:s, s:s, s:i, s:s}", "ts", TS, "type", "x",
	    "seq", 1, "prev", "0123456789abcdef0123456789abcdef0123456789abcdef"
	    "0123456789abcdef"));
	bad_line(s, "seq 1: the first record of a trail has a prev that is "
	    "not zero");
	free(s);
	/* A hash changed with the record: the hash does not match. */
	s = sealed_edit(json_pack("{s:s, s:s, s:s}", "ts", TS, "type", "x",
	    "host", "a.test"), "a.test", "b.test");
	bad_line(s, "bad.log:1: seq 1: hash does not match");
	free(s);
	/* Too deep. */
	assert_non_null(s = malloc(2 * AUDIT_DEPTH_MAX + 256));
	strcpy(s, "{\"seq\":1,\"ts\":\"x\",\"type\":\"x\",\"d\":");
	for (i = 0; i < AUDIT_DEPTH_MAX; i++)
		strcat(s, "[");
	for (i = 0; i < AUDIT_DEPTH_MAX; i++)
		strcat(s, "]");
	strcat(s, ",\"prev\":\"" AUDIT_ZERO_HASH "\",\"hash\":\""
	    AUDIT_ZERO_HASH "\"}\n");
	bad_line(s, "seq 1: nested too deep");
	free(s);
	/* Too long, with or without its newline. */
	assert_non_null(big = malloc(AUDIT_LINE_MAX + 16));
	memset(big, ' ', AUDIT_LINE_MAX + 8);
	big[0] = '{';
	strcpy(big + AUDIT_LINE_MAX, "}\n");
	bad_line(big, "bad.log:1: line too long (over 65536 bytes)");
	big[AUDIT_LINE_MAX] = '\0';
	bad_line(big, "bad.log:1: line too long");
	free(big);
	/* The same in memory. */
	{
		struct audit_verifier *v;
		char why[256];

		assert_non_null(v = audit_verifier_new(NULL, 0, 0));
		assert_int_equal(audit_verifier_mem(v, "mem\x1b[0m", "x\n", 2,
		    why, sizeof(why)), SL_ERR_INVALID);
		assert_string_equal(why, "mem?[0m:1: not JSON (at byte 1)");
		/* Failed once, failed for good. */
		assert_int_equal(audit_verifier_finish(v, why, sizeof(why)),
		    SL_ERR_INVALID);
		assert_string_equal(why, "mem?[0m:1: not JSON (at byte 1)");
		audit_verifier_free(v);
	}
}

static void
test_empty_and_missing(void **state)
{
	char path[128], why[512];
	struct audit_verify_stats st;

	write_bytes("empty.log", "", 0, path, sizeof(path));
	assert_int_equal(verify1(path, 0, why, sizeof(why), NULL),
	    SL_ERR_INVALID);
	assert_string_equal(why, "no records");
	assert_int_equal(verify1(path, AUDIT_VERIFY_OPEN, why, sizeof(why),
	    &st), 0);
	assert_int_equal(st.records, 0);
	assert_int_equal(st.files, 1);
	path_in(path, sizeof(path), fx.work, "no-such.log");
	assert_int_equal(verify1(path, 0, why, sizeof(why), NULL),
	    SL_ERR_IO);
	assert_contains(why, "no-such.log: No such file or directory");
	assert_int_equal(verify1(fx.work, 0, why, sizeof(why), NULL),
	    SL_ERR_IO);
	assert_contains(why, "cannot read");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_canonical),
		cmocka_unit_test(test_seal_refusals),
		cmocka_unit_test(test_seal_keys_near_hash),
		cmocka_unit_test(test_bound),
		cmocka_unit_test(test_seal_hash),
		cmocka_unit_test(test_chain_three),
		cmocka_unit_test(test_checkpoint_sign_verify),
		cmocka_unit_test(test_flip_every_byte),
		cmocka_unit_test(test_record_removed),
		cmocka_unit_test(test_records_swapped),
		cmocka_unit_test(test_record_inserted),
		cmocka_unit_test(test_truncated_tail),
		cmocka_unit_test(test_forged_checkpoint),
		cmocka_unit_test(test_mid_chain_count),
		cmocka_unit_test(test_other_chain),
		cmocka_unit_test(test_torn_last_line),
		cmocka_unit_test(test_rotation),
		cmocka_unit_test(test_hostile_lines),
		cmocka_unit_test(test_empty_and_missing),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
