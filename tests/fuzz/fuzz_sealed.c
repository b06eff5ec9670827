/*
 * fuzz_sealed.c: sealed_open and its payload parser.
 *
 * An input that starts with the magic is a sealed file, opened with a
 * fixed gateway key (made from the seed below), so that the corpus can
 * hold real blobs.  Any other input is a payload, parsed directly with
 * its own key id so that the fuzzer gets past that check.  Whatever
 * opens or parses must keep the promises of sealed.h, and must come back
 * the same when sealed again with sealed_seal and opened (a document
 * whose kind check fails is not sealed again: only sealed_seal and
 * secret_open judge what a pem or json value holds).
 *
 * Built with -DFUZZ_SEALED_SEEDS and without -fsanitize=fuzzer, this file
 * writes the seed corpus instead (blobs sealed to the fixed key and their
 * payloads); from the build folder, with s the source folder:
 *
 *   cc -DFUZZ_SEALED_SEEDS -I. -I$s/src $s/tests/fuzz/fuzz_sealed.c \
 *       $s/src/keys/sealed.c $s/src/keys/pemkey.c $s/src/util/names.c \
 *       $s/src/util/err.c $s/src/util/keyfile.c \
 *       -lidn2 -lsodium -lcrypto -ljansson -o gen-sealed-seeds
 *   ./gen-sealed-seeds $s/tests/fuzz/corpus/sealed
 */
#include "autoconf.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "keys/sealed.h"

int	LLVMFuzzerInitialize(int *argc, char ***argv);
int	LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

/* Exactly crypto_box_SEEDBYTES (32) characters. */
static const uint8_t seed[crypto_box_SEEDBYTES] =
    "sluice fuzz_sealed fixed seed 01";

/* Written once at start, as the fuzzer has no context to pass. */
static struct gwkey *fixed;

static struct gwkey *
fixed_key(void)
{
	struct gwkey *k;

	if (sodium_init() < 0 || (k = calloc(1, sizeof(*k))) == NULL ||
	    (k->sk = sodium_malloc(32)) == NULL)
		abort();
	if (crypto_box_seed_keypair(k->pk, k->sk, seed) != 0 ||
	    sodium_mprotect_noaccess(k->sk) != 0)
		abort();
	gwkey_id(k->pk, k->id);
	sodium_bin2hex(k->idhex, sizeof(k->idhex), k->id, sizeof(k->id));
	return k;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fixed = fixed_key();
	return 0;
}

static int
name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

/* What sealed.h promises of an opened secret. */
static void
check_secret(const struct sealed_secret *s)
{
	size_t i, n;

	n = strlen(s->name);
	if (n < 1 || n > SEALED_NAME_MAX)
		abort();
	for (i = 0; i < n; i++)
		if (!name_char(s->name[i]))
			abort();
	if (s->nhosts > SEALED_MAX_HOSTS)
		abort();
	for (i = 0; i < s->nhosts; i++) {
		n = strlen(s->hosts[i]);
		if (n < 1 || n > NAME_MAXLEN)
			abort();
		if (sealed_host_bound(s, s->hosts[i]) != 1)
			abort();
	}
	if ((unsigned)s->kind > SEALED_KIND_MAX)
		abort();
	if (s->value_len < 1 || s->value[s->value_len] != '\0' ||
	    memchr(s->value, '\0', s->value_len) != NULL)
		abort();
	/* A header value is a header's; a document may have lines. */
	if (s->kind == SEALED_KIND_HEADER && (s->value_len > SEALED_MAX_VALUE ||
	    memchr(s->value, '\r', s->value_len) != NULL ||
	    memchr(s->value, '\n', s->value_len) != NULL))
		abort();
	if (s->kind != SEALED_KIND_HEADER && s->value_len > SEALED_MAX_DOC)
		abort();
	for (i = 0; i < s->value_len; i++)
		if ((s->value[i] < 0x20 && s->value[i] != '\t' &&
		    s->value[i] != '\r' && s->value[i] != '\n') ||
		    s->value[i] == 0x7f)
			abort();
}

static int
has_host(const struct sealed_secret *s, const char *h)
{
	size_t i;

	for (i = 0; i < s->nhosts; i++)
		if (strcmp(s->hosts[i], h) == 0)
			return 1;
	return 0;
}

/* Seals a's fields again and opens them: the same secret comes back. */
static void
reseal(const struct sealed_secret *a)
{
	const char *hosts[SEALED_MAX_HOSTS];
	struct sealed_in in;
	struct sealed_secret *b = NULL;
	const char *why;
	uint8_t *blob = NULL;
	size_t len, i;

	for (i = 0; i < a->nhosts; i++)
		hosts[i] = a->hosts[i];
	in.name = a->name;
	in.version = a->version;
	in.created = a->created;
	in.hosts = hosts;
	in.nhosts = a->nhosts;
	in.value = a->value;
	in.value_len = a->value_len;
	in.kind = a->kind;
	/* A document is judged by its kind only when sealed (or opened by
	 * secret_open): a crafted payload may hold one that is no key. */
	if (sealed_kind_check(a->kind, a->value, a->value_len, &why) != 0)
		return;
	if (sealed_seal(fixed->pk, &in, &blob, &len, &why) != 0)
		abort();
	if (sealed_open(&fixed, 1, blob, len, &b, NULL, &why) != 0)
		abort();
	/* Hosts as a set: sealing drops a duplicate the payload had. */
	if (strcmp(a->name, b->name) != 0 || a->version != b->version ||
	    a->kind != b->kind ||
	    a->created != b->created || a->value_len != b->value_len ||
	    memcmp(a->value, b->value, a->value_len) != 0 ||
	    memcmp(b->keyid, fixed->id, SEALED_KEYID_LEN) != 0)
		abort();
	for (i = 0; i < a->nhosts; i++)
		if (!has_host(b, a->hosts[i]))
			abort();
	for (i = 0; i < b->nhosts; i++)
		if (!has_host(a, b->hosts[i]))
			abort();
	sealed_secret_free(b);
	free(blob);
}

static void
fuzz_blob(const uint8_t *d, size_t n)
{
	struct sealed_secret *s = NULL;
	char buf[128];
	const char *why = NULL;

	if (sealed_open(&fixed, 1, d, n, &s, buf, &why) != 0) {
		if (s != NULL || why == NULL || strlen(why) >= sizeof(buf))
			abort();
		return;
	}
	check_secret(s);
	if (memcmp(s->keyid, fixed->id, SEALED_KEYID_LEN) != 0)
		abort();
	reseal(s);
	sealed_secret_free(s);
}

static void
fuzz_payload(const uint8_t *d, size_t n)
{
	static const uint8_t zero[SEALED_KEYID_LEN];
	struct sealed_secret *s = NULL;
	const char *why = NULL;

	if (sealed_parse_payload(d, n, n > SEALED_KEYID_LEN ? d + 1 : zero,
	    &s, &why) != 0) {
		if (s != NULL || why == NULL)
			abort();
		return;
	}
	check_secret(s);
	reseal(s);
	sealed_secret_free(s);
}

int
LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	if (fixed == NULL)
		fixed = fixed_key();
	if (n >= 8 && memcmp(d, SEALED_MAGIC, 8) == 0)
		fuzz_blob(d, n);
	else
		fuzz_payload(d, n);
	return 0;
}

#ifdef FUZZ_SEALED_SEEDS
static void
write_seed(const char *dir, const char *name, const uint8_t *b, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((f = fopen(path, "wb")) == NULL || fwrite(b, 1, n, f) != n ||
	    fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

/* Seals in to the fixed key; writes the blob and its payload. */
static void
write_blob_seed(const char *dir, const char *name,
    const struct sealed_in *in)
{
	uint8_t *blob, payload[SEALED_MAX_BLOB];
	struct sealed_secret *s;
	char file[256];
	const char *why;
	size_t len;

	if (sealed_seal(fixed->pk, in, &blob, &len, &why) != 0) {
		fprintf(stderr, "%s: %s\n", name, why);
		exit(1);
	}
	snprintf(file, sizeof(file), "blob-%s", name);
	write_seed(dir, file, blob, len);
	sodium_mprotect_readonly(fixed->sk);
	if (crypto_box_seal_open(payload, blob + SEALED_HEADER_LEN,
	    len - SEALED_HEADER_LEN, fixed->pk, fixed->sk) != 0)
		abort();
	sodium_mprotect_noaccess(fixed->sk);
	snprintf(file, sizeof(file), "payload-%s", name);
	write_seed(dir, file, payload,
	    len - SEALED_HEADER_LEN - crypto_box_SEALBYTES);
	if (sealed_open(&fixed, 1, blob, len, &s, NULL, &why) != 0) {
		fprintf(stderr, "%s: does not open: %s\n", name, why);
		exit(1);
	}
	sealed_secret_free(s);
	LLVMFuzzerTestOneInput(blob, len);
	free(blob);
}

int
main(int argc, char **argv)
{
	static const char *const one[] = { "api.example.com" };
	static const char *const some[] = {
		"*.example.org", "API.GitHub.com", "b\303\274cher.example",
		"uploads.s3.eu-west-1.amazonaws.com",
	};
	static const uint8_t v1[] = "ghp_0123456789abcdefghijABCDEFGHIJ0123";
	static const uint8_t v2[] = "Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig";
	static const uint8_t v3[] = "{\n  \"access_key_id\": \"AKID\",\r\n"
	    "\t\"secret_access_key\": \"wJalrXUtn\"\n}\n";
	struct sealed_in in;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	fixed = fixed_key();
	in = (struct sealed_in){ "api-token", 1, 1700000000, one, 1, v1,
	    sizeof(v1) - 1, SEALED_KIND_HEADER };
	write_blob_seed(argv[1], "one-host", &in);
	in = (struct sealed_in){ "gh.pat_2", 1764547200, 1764547200, some, 4,
	    v2, sizeof(v2) - 1, SEALED_KIND_HEADER };
	write_blob_seed(argv[1], "hosts", &in);
	in = (struct sealed_in){ "x", 0, -1, NULL, 0, (const uint8_t *)"v",
	    1, SEALED_KIND_HEADER };
	write_blob_seed(argv[1], "no-host", &in);
	in = (struct sealed_in){ "aws", 2, 1700000000, one, 1, v3,
	    sizeof(v3) - 1, SEALED_KIND_JSON };
	write_blob_seed(argv[1], "json", &in);
	return 0;
}
#endif
