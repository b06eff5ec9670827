/*
 * fuzz_auditline.c: the audit verifier on hostile bytes, and the round
 * trip of auditfmt_seal.
 *
 * Any input is an audit file, verified in memory (audit_verifier_mem)
 * closed and open, and again split in two files after its middle "\n":
 * the verifier must not crash, must explain every refusal, and must come
 * to the same verdict for one file or two.  An input that is a JSON
 * object is also bounded, given a ts and a type when it has none, sealed
 * as the first record of a trail and followed by a signed checkpoint:
 * whatever auditfmt_seal accepts must verify and read back the same.
 *
 * Checkpoints are signed with the fixed key below, made for this fuzzer
 * alone, so that the corpus can hold trails whose signatures verify.
 *
 * Built with -DFUZZ_AUDITLINE_SEEDS and without -fsanitize=fuzzer, this
 * file writes the seed corpus instead; from the build folder, with s the
 * source folder:
 *
 *   cc -DFUZZ_AUDITLINE_SEEDS -I. -I$s/src $s/tests/fuzz/fuzz_auditline.c \
 *       libaudit.a libkeys.a libconf.a libparse.a libutil.a -ljansson -lsodium \
 *       -lcrypto -o gen-auditline-seeds
 *   ./gen-auditline-seeds $s/tests/fuzz/corpus/auditline
 *
 * (with --enable-sanitizers, add the same -fsanitize flags).
 */
#include "autoconf.h"

#include <sys/stat.h>

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "util/err.h"
#include "keys/signkey.h"
#include "audit/auditfmt.h"

int	LLVMFuzzerInitialize(int *argc, char ***argv);
int	LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

/* A P-256 key for this fuzzer only: it signs nothing anyone trusts. */
static const char fuzz_key_pem[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg9RGcCpPsZRKscpcD\n"
    "TdI9w0RLwf2iTmi7v1PCrAjlFTKhRANCAAQCNngmcZTh/vga1eq2GBjN1qfAgft6\n"
    "Jed8DjjX0EuSvKk/TVyh7geQeTVyonUATBa8xw7bxMPIu3n1YyHGJYMC\n"
    "-----END PRIVATE KEY-----\n";

#define TS	"2026-12-01T05:40:28.123Z"

/* Written once at start, as the fuzzer has no context to pass. */
static struct signkey *key;
static struct signpub *pub;

static void
load_key(void)
{
	char dir[] = "/tmp/sl-fuzz-audit.XXXXXX", path[64];
	const char *why = NULL;
	int fd;

	if (sodium_init() < 0 || mkdtemp(dir) == NULL)
		abort();
	snprintf(path, sizeof(path), "%s/signing.key", dir);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600)) == -1 ||
	    write(fd, fuzz_key_pem, sizeof(fuzz_key_pem) - 1) !=
	    (ssize_t)(sizeof(fuzz_key_pem) - 1) || close(fd) != 0)
		abort();
	if (signkey_load(path, &key, &why) != 0 ||
	    signkey_public(key, &pub) != 0) {
		fprintf(stderr, "fuzz_auditline: key: %s\n", why ? why : "?");
		abort();
	}
	unlink(path);
	rmdir(dir);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	load_key();
	return 0;
}

/* ---- the verifier on any bytes ------------------------------------------ */

/* Verifies the files parts[0..n) (each lens[i] bytes); 0 or the error. */
static int
verify(const uint8_t *const *parts, const size_t *lens, size_t n, int flags,
    struct audit_verify_stats *st)
{
	static const char *const names[] = { "a.log", "b.log" };
	struct audit_verifier *v;
	char why[512];
	size_t i;
	int r = 0;

	if ((v = audit_verifier_new(&pub, 1, flags)) == NULL)
		abort();
	why[0] = '\0';
	for (i = 0; i < n && r == 0; i++)
		r = audit_verifier_mem(v, names[i], parts[i], lens[i], why,
		    sizeof(why));
	if (r == 0)
		r = audit_verifier_finish(v, why, sizeof(why));
	audit_verifier_stats(v, st);
	audit_verifier_free(v);
	/* Refused for what the bytes are, with a reason of one line. */
	if (r != 0 && ((r != SL_ERR_INVALID && r != SL_ERR_NOT_FOUND) ||
	    why[0] == '\0' || strchr(why, '\n') != NULL))
		abort();
	return r;
}

static void
check_stats(const struct audit_verify_stats *st, int r, int flags)
{
	if (st->checkpoints > st->records || st->unsigned_tail > st->records ||
	    (st->records > 0 && st->last_seq - st->first_seq + 1 !=
	    st->records))
		abort();
	if (r == 0 && !(flags & AUDIT_VERIFY_OPEN) &&
	    (st->records == 0 || st->unsigned_tail != 0 || st->torn ||
	    st->last_checkpoint_seq != st->last_seq))
		abort();
}

static void
fuzz_file(const uint8_t *d, size_t n)
{
	struct audit_verify_stats st;
	const uint8_t *parts[2], *nl;
	size_t lens[2];
	int closed, open;

	parts[0] = d;
	lens[0] = n;
	closed = verify(parts, lens, 1, 0, &st);
	check_stats(&st, closed, 0);
	open = verify(parts, lens, 1, AUDIT_VERIFY_OPEN, &st);
	check_stats(&st, open, AUDIT_VERIFY_OPEN);
	if (closed == 0 && open != 0)
		abort();
	/* After the "\n" nearest the middle: the same verdict. */
	if ((nl = memchr(d + n / 2, '\n', n - n / 2)) == NULL)
		return;
	lens[0] = (size_t)(nl - d) + 1;
	parts[1] = nl + 1;
	lens[1] = n - lens[0];
	if ((verify(parts, lens, 2, 0, &st) == 0) != (closed == 0))
		abort();
}

/* ---- the round trip ----------------------------------------------------- */

/* Whether bounding kept its promise for v at depth. */
static int
bounded(json_t *v, int depth)
{
	const char *k;
	json_t *item;
	size_t i;

	if (depth > AUDIT_DEPTH_MAX)
		return 1;
	switch (json_typeof(v)) {
	case JSON_STRING:
		return json_string_length(v) <= AUDIT_STR_MAX;
	case JSON_ARRAY:
		if (json_array_size(v) > 64)
			return 0;
		json_array_foreach(v, i, item)
			if (!bounded(item, depth + 1))
				return 0;
		return 1;
	case JSON_OBJECT:
		json_object_foreach(v, k, item)
			if (!bounded(item, depth + 1))
				return 0;
		return 1;
	default:
		return 1;
	}
}

/* Seals rec (consumed) at seq after prev; 0 and the line, or the error. */
static int
seal(json_t *rec, uint64_t seq, const char *prev, char *hash, char **line,
    size_t *len)
{
	int r;

	r = auditfmt_seal(rec, seq, prev, hash, line, len);
	if (r != 0 && r != SL_ERR_INVALID && r != SL_ERR_TOO_BIG)
		abort();
	return r;
}

/* The checkpoint at seq after prev, counting records: its line. */
static char *
checkpoint(uint64_t seq, const char *prev, uint64_t records, size_t *len)
{
	char h[AUDIT_HASH_HEX + 1], *line;
	json_t *rec;

	rec = json_pack("{s:s, s:s, s:I, s:s, s:I}", "ts", TS,
	    "type", "checkpoint", "seq", (json_int_t)seq, "prev", prev,
	    "records", (json_int_t)records);
	if (rec == NULL || auditfmt_checkpoint_sign(rec, key) != 0 ||
	    seal(rec, seq, prev, h, &line, len) != 0)
		abort();
	json_decref(rec);
	return line;
}

/* line reads back as rec, and its hash is that of rec's encoding. */
static void
reads_back(const json_t *rec, const char *line, size_t len,
    const char *hash)
{
	char h[AUDIT_HASH_HEX + 1], *canon;
	uint8_t raw[32];
	json_t *back;

	if ((back = json_loadb(line, len, JSON_ALLOW_NUL, NULL)) == NULL ||
	    !json_equal(back, rec) || (canon = auditfmt_canonical(back)) ==
	    NULL)
		abort();
	crypto_generichash(raw, sizeof(raw), (const uint8_t *)canon,
	    strlen(canon), NULL, 0);
	sodium_bin2hex(h, sizeof(h), raw, sizeof(raw));
	if (strcmp(h, hash) != 0)
		abort();
	free(canon);
	json_decref(back);
}

/* A JSON object made the first record of a trail closed by a checkpoint. */
static void
fuzz_roundtrip(const uint8_t *d, size_t n)
{
	struct audit_verify_stats st;
	char h[AUDIT_HASH_HEX + 1], *l1 = NULL, *l2 = NULL;
	const uint8_t *parts[1];
	size_t len1, len2, lens[1];
	uint8_t *both;
	json_t *rec;
	int is_cp;

	rec = json_loadb((const char *)d, n, JSON_ALLOW_NUL, NULL);
	if (!json_is_object(rec)) {
		json_decref(rec);
		return;
	}
	if (json_object_get(rec, "ts") == NULL)
		json_object_set_new(rec, "ts", json_string(TS));
	if (json_object_get(rec, "type") == NULL)
		json_object_set_new(rec, "type", json_string("fuzz"));
	auditfmt_bound(rec);
	if (!bounded(rec, 1))
		abort();
	is_cp = json_is_string(json_object_get(rec, "type")) &&
	    strcmp(json_string_value(json_object_get(rec, "type")),
	    "checkpoint") == 0;
	if (is_cp) {
		/* A checkpoint is signed with the seq and prev it gets. */
		json_object_set_new(rec, "seq", json_integer(1));
		json_object_set_new(rec, "prev", json_string(AUDIT_ZERO_HASH));
		json_object_set_new(rec, "records", json_integer(0));
		if (auditfmt_checkpoint_sign(rec, key) != 0) {
			json_decref(rec);
			return;
		}
	}
	if (seal(rec, 1, AUDIT_ZERO_HASH, h, &l1, &len1) != 0) {
		json_decref(rec);
		return;
	}
	reads_back(rec, l1, len1, h);
	l2 = checkpoint(2, h, is_cp ? 0 : 1, &len2);
	if ((both = malloc(len1 + len2)) == NULL)
		abort();
	memcpy(both, l1, len1);
	memcpy(both + len1, l2, len2);
	parts[0] = both;
	lens[0] = len1 + len2;
	if (verify(parts, lens, 1, 0, &st) != 0 || st.records != 2)
		abort();
	free(both);
	free(l1);
	free(l2);
	json_decref(rec);
}

int
LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	if (key == NULL)
		load_key();
	fuzz_file(d, n);
	fuzz_roundtrip(d, n);
	return 0;
}

#ifdef FUZZ_AUDITLINE_SEEDS
static void
write_seed(const char *dir, const char *name, const void *b, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((f = fopen(path, "wb")) == NULL || fwrite(b, 1, n, f) != n ||
	    fclose(f) != 0) {
		perror(path);
		exit(1);
	}
	LLVMFuzzerTestOneInput(b, n);
}

/* A trail: a few records of each kind, a checkpoint, and more after. */
static size_t
trail(char *buf, size_t size)
{
	char prev[AUDIT_HASH_HEX + 1] = AUDIT_ZERO_HASH, *line;
	char h[AUDIT_HASH_HEX + 1];
	json_t *recs[3];
	size_t used = 0, len, i;

	recs[0] = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:s}",
	    "ts", TS, "type", "conn", "sandbox", "box", "src", "10.0.0.2",
	    "dst", "93.184.216.34", "dst_port", 443, "action", "deny",
	    "reason", "no-rule");
	recs[1] = json_pack("{s:s, s:s, s:s, s:s, s:s, s:[{s:s, s:i}]}",
	    "ts", TS, "type", "request", "sandbox", "box", "host",
	    "api.test", "path", "/v1/\xc3\xa9t\xc3\xa9", "secrets", "name",
	    "tok", "version", 3);
	recs[2] = json_pack("{s:s, s:s, s:s, s:s, s:[s]}", "ts", TS,
	    "type", "dns", "sandbox", "box", "name", "a.test", "answers",
	    "1.2.3.4");
	for (i = 0; i < 3; i++) {
		if (seal(recs[i], i + 1, prev, h, &line, &len) != 0 ||
		    used + len > size)
			abort();
		memcpy(prev, h, sizeof(prev));
		memcpy(buf + used, line, len);
		used += len;
		free(line);
		json_decref(recs[i]);
	}
	line = checkpoint(4, prev, 3, &len);
	memcpy(buf + used, line, len);
	free(line);
	return used + len;
}

int
main(int argc, char **argv)
{
	static const char rec[] = "{\"type\":\"request\",\"host\":\"a.test\","
	    "\"n\":[1,-2,{\"x\":\"\\u00e9\\u0000/\"}],\"ok\":true,\"z\":null}";
	static const char cp[] = "{\"type\":\"checkpoint\",\"ts\":\"" TS "\"}";
	static const char odd[] = "{\"seq\":1,\"ts\":\"x\",\"type\":\"x\","
	    "\"prev\":\"" AUDIT_ZERO_HASH "\",\"hash\":\"" AUDIT_ZERO_HASH
	    "\"}\n{\"a\":1.5}\n[]\n\n";
	char buf[8192];
	size_t n;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	load_key();
	n = trail(buf, sizeof(buf));
	write_seed(argv[1], "trail", buf, n);
	write_seed(argv[1], "trail-torn", buf, n - 40);
	write_seed(argv[1], "record", rec, sizeof(rec) - 1);
	write_seed(argv[1], "checkpoint", cp, sizeof(cp) - 1);
	write_seed(argv[1], "odd-lines", odd, sizeof(odd) - 1);
	return 0;
}
#endif
