/* test_sealed.c: gateway keys, sealing, and every way a blob is refused. */
#include "autoconf.h"

#include <sys/stat.h>

#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sodium.h>

#include "util/err.h"
#include "keys/sealed.h"

static const char *const keyfiles[] = {
	"gateway.key", "gateway.pub", "signing.key", "signing.pub",
};
#define NKEYFILES	4
#define KEYBIG		20000	/* over sealed.c's 16 KiB for a key file */
/* The shortest blob that can hold a payload. */
#define BLOB_MIN	(SEALED_HEADER_LEN + crypto_box_SEALBYTES + 31)

/* Two key sets, each in its own folder, made once for the group. */
struct fx {
	char		 dir1[64], dir2[64], scratch[64];
	struct gwkey	*k1, *k2;
};
static struct fx fx;

static void
path_in(char *buf, size_t len, const char *dir, const char *name)
{
	assert_true((size_t)snprintf(buf, len, "%s/%s", dir, name) < len);
}

/* Removes every file of dir and dir itself; dirs here hold no subdirs. */
static void
rm_dir(const char *dir)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void
write_file(const char *path, const void *b, size_t n, mode_t mode)
{
	int fd;

	unlink(path);
	assert_true((fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode)) >= 0);
	assert_int_equal(write(fd, b, n), (ssize_t)n);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

/* The whole file at path, NUL-terminated, in a malloc'd buffer. */
static char *
slurp(const char *path, size_t *len)
{
	char *b;
	FILE *f;
	long n;

	assert_non_null(f = fopen(path, "rb"));
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	assert_true((n = ftell(f)) >= 0);
	rewind(f);
	assert_non_null(b = malloc((size_t)n + 1));
	assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
	b[n] = '\0';
	fclose(f);
	if (len != NULL)
		*len = (size_t)n;
	return b;
}

static void
copy_file(const char *from, const char *to, mode_t mode)
{
	size_t n;
	char *b = slurp(from, &n);

	write_file(to, b, n, mode);
	free(b);
}

static int
group_setup(void **state)
{
	char path[128];
	const char *why = NULL;

	if (sodium_init() < 0)
		return -1;
	snprintf(fx.dir1, sizeof(fx.dir1), "/tmp/sl-test-sealed1.XXXXXX");
	snprintf(fx.dir2, sizeof(fx.dir2), "/tmp/sl-test-sealed2.XXXXXX");
	snprintf(fx.scratch, sizeof(fx.scratch), "/tmp/sl-test-sealed3.XXXXXX");
	if (mkdtemp(fx.dir1) == NULL || mkdtemp(fx.dir2) == NULL ||
	    mkdtemp(fx.scratch) == NULL)
		return -1;
	if (keys_generate(fx.dir1, &why) != 0 ||
	    keys_generate(fx.dir2, &why) != 0)
		return -1;
	path_in(path, sizeof(path), fx.dir1, "gateway.key");
	if (gwkey_load(path, &fx.k1, &why) != 0)
		return -1;
	path_in(path, sizeof(path), fx.dir2, "gateway.key");
	if (gwkey_load(path, &fx.k2, &why) != 0)
		return -1;
	return 0;
}

static int
group_teardown(void **state)
{
	gwkey_free(fx.k1);
	gwkey_free(fx.k2);
	rm_dir(fx.dir1);
	rm_dir(fx.dir2);
	rm_dir(fx.scratch);
	return 0;
}

/* A fresh empty folder under scratch. */
static void
fresh_dir(char *buf, size_t len, const char *name)
{
	path_in(buf, len, fx.scratch, name);
	rm_dir(buf);
	assert_int_equal(mkdir(buf, 0700), 0);
}

static mode_t
mode_of(const char *dir, const char *name)
{
	char path[128];
	struct stat st;

	path_in(path, sizeof(path), dir, name);
	assert_int_equal(stat(path, &st), 0);
	return st.st_mode & 07777;
}

/* The key files: PEM of the right kinds and modes, whatever the umask. */
static void
test_keygen_files(void **state)
{
	static const mode_t modes[NKEYFILES] = { 0600, 0644, 0600, 0644 };
	char dir[128], path[128], group[32];
	const char *why = NULL;
	EVP_PKEY *pkey;
	mode_t old;
	size_t i;
	BIO *bio;
	char *pem;

	fresh_dir(dir, sizeof(dir), "umask");
	old = umask(077);
	assert_int_equal(keys_generate(dir, &why), 0);
	umask(old);
	for (i = 0; i < NKEYFILES; i++)
		assert_int_equal(mode_of(dir, keyfiles[i]), modes[i]);

	path_in(path, sizeof(path), dir, "gateway.key");
	pem = slurp(path, NULL);
	assert_non_null(strstr(pem, "-----BEGIN PRIVATE KEY-----"));
	free(pem);
	path_in(path, sizeof(path), dir, "signing.key");
	pem = slurp(path, NULL);
	assert_non_null(strstr(pem, "-----BEGIN PRIVATE KEY-----"));
	assert_non_null(bio = BIO_new_mem_buf(pem, -1));
	assert_non_null(pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL));
	assert_true(EVP_PKEY_is_a(pkey, "EC"));
	assert_int_equal(EVP_PKEY_get_group_name(pkey, group, sizeof(group),
	    NULL), 1);
	assert_string_equal(group, "prime256v1");
	EVP_PKEY_free(pkey);
	BIO_free(bio);
	free(pem);
	path_in(path, sizeof(path), dir, "signing.pub");
	pem = slurp(path, NULL);
	assert_non_null(bio = BIO_new_mem_buf(pem, -1));
	assert_non_null(pkey = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL));
	assert_true(EVP_PKEY_is_a(pkey, "EC"));
	EVP_PKEY_free(pkey);
	BIO_free(bio);
	free(pem);
}

/* No file is ever overwritten, and a refused run leaves nothing behind. */
static void
test_keygen_refuses_overwrite(void **state)
{
	char dir[128], path[128], *before[NKEYFILES], *after;
	const char *why = NULL;
	size_t i;

	for (i = 0; i < NKEYFILES; i++) {
		path_in(path, sizeof(path), fx.dir1, keyfiles[i]);
		before[i] = slurp(path, NULL);
	}
	assert_int_equal(keys_generate(fx.dir1, &why), SL_ERR_EXISTS);
	assert_non_null(why);
	for (i = 0; i < NKEYFILES; i++) {
		path_in(path, sizeof(path), fx.dir1, keyfiles[i]);
		after = slurp(path, NULL);
		assert_string_equal(before[i], after);
		free(after);
		free(before[i]);
	}

	/* Only the last one there: the first three must not appear. */
	fresh_dir(dir, sizeof(dir), "partial");
	path_in(path, sizeof(path), dir, "signing.pub");
	write_file(path, "x", 1, 0644);
	assert_int_equal(keys_generate(dir, &why), SL_ERR_EXISTS);
	for (i = 0; i < 3; i++) {
		path_in(path, sizeof(path), dir, keyfiles[i]);
		assert_int_equal(access(path, F_OK), -1);
	}
	path_in(path, sizeof(path), dir, "signing.pub");
	after = slurp(path, NULL);
	assert_string_equal(after, "x");
	free(after);

	/* A dangling symlink is "there" too: never followed. */
	fresh_dir(dir, sizeof(dir), "symlink");
	path_in(path, sizeof(path), dir, "gateway.key");
	assert_int_equal(symlink("/tmp/sl-test-sealed-nowhere", path), 0);
	assert_int_equal(keys_generate(dir, &why), SL_ERR_EXISTS);
	assert_int_equal(access("/tmp/sl-test-sealed-nowhere", F_OK), -1);

	why = NULL;
	assert_int_equal(keys_generate("/nonexistent/sluice/keys", &why),
	    SL_ERR_IO);
	assert_non_null(why);
}

static void
test_gwkey_load(void **state)
{
	uint8_t pk[32], id[SEALED_KEYID_LEN];
	char path[128], hex[2 * SEALED_KEYID_LEN + 1];
	const char *why = NULL;

	path_in(path, sizeof(path), fx.dir1, "gateway.pub");
	assert_int_equal(gwkey_load_pub(path, pk, &why), 0);
	assert_memory_equal(pk, fx.k1->pk, 32);
	gwkey_id(pk, id);
	assert_memory_equal(id, fx.k1->id, SEALED_KEYID_LEN);
	sodium_bin2hex(hex, sizeof(hex), id, sizeof(id));
	assert_string_equal(hex, fx.k1->idhex);
	path_in(path, sizeof(path), fx.dir1, "gateway.key");
	assert_string_equal(fx.k1->path, path);
	assert_memory_not_equal(fx.k1->pk, fx.k2->pk, 32);
	assert_memory_not_equal(fx.k1->id, fx.k2->id, SEALED_KEYID_LEN);

	/* The id is the first 8 bytes of BLAKE2b-256 of the raw key. */
	{
		uint8_t h[32];

		crypto_generichash(h, 32, pk, 32, NULL, 0);
		assert_memory_equal(h, id, SEALED_KEYID_LEN);
	}
	gwkey_free(NULL);
}

/* gwkey_load on path must fail with r; *why is set, out untouched. */
static void
load_fails(const char *path, int r)
{
	struct gwkey *k = (struct gwkey *)&fx;	/* a sentinel */
	const char *why = NULL;

	assert_int_equal(gwkey_load(path, &k, &why), r);
	assert_ptr_equal(k, (struct gwkey *)&fx);
	assert_non_null(why);
}

static void
test_gwkey_load_refusals(void **state)
{
	char path[128], src[128], big[KEYBIG];
	struct gwkey *k = NULL;
	const char *why = NULL;
	EVP_PKEY *pkey;
	uint8_t pk[32];
	BIO *bio;
	char *pem;
	long n;

	path_in(src, sizeof(src), fx.dir1, "gateway.key");
	path_in(path, sizeof(path), fx.scratch, "copy.key");
	copy_file(src, path, 0644);
	load_fails(path, SL_ERR_DENIED);
	assert_int_equal(chmod(path, 0640), 0);
	load_fails(path, SL_ERR_DENIED);
	assert_int_equal(chmod(path, 0602), 0);
	load_fails(path, SL_ERR_DENIED);
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(gwkey_load(path, &k, &why), 0);
	assert_memory_equal(k->pk, fx.k1->pk, 32);
	gwkey_free(k);
	if (geteuid() == 0) {
		assert_int_equal(chown(path, 4242, 4242), 0);
		load_fails(path, SL_ERR_DENIED);
	}

	load_fails("/nonexistent/gateway.key", SL_ERR_IO);
	load_fails(fx.scratch, SL_ERR_INVALID);		/* a folder */

	/* A public key, a P-256 key, garbage, a huge file. */
	path_in(src, sizeof(src), fx.dir1, "gateway.pub");
	path_in(path, sizeof(path), fx.scratch, "pub-as.key");
	copy_file(src, path, 0600);
	load_fails(path, SL_ERR_INVALID);
	path_in(src, sizeof(src), fx.dir1, "signing.key");
	path_in(path, sizeof(path), fx.scratch, "p256.key");
	copy_file(src, path, 0600);
	load_fails(path, SL_ERR_INVALID);
	path_in(path, sizeof(path), fx.scratch, "garbage.key");
	write_file(path, "-----BEGIN PRIVATE KEY-----\nAAAA\n", 33, 0600);
	load_fails(path, SL_ERR_INVALID);
	memset(big, 'A', sizeof(big));
	path_in(path, sizeof(path), fx.scratch, "big.key");
	write_file(path, big, sizeof(big), 0600);
	load_fails(path, SL_ERR_INVALID);

	/* An encrypted key is refused, never prompted for. */
	assert_non_null(pkey = EVP_PKEY_Q_keygen(NULL, NULL, "X25519"));
	assert_non_null(bio = BIO_new(BIO_s_mem()));
	assert_int_equal(PEM_write_bio_PKCS8PrivateKey(bio, pkey,
	    EVP_aes_256_cbc(), NULL, 0, NULL, "passphrase"), 1);
	n = BIO_get_mem_data(bio, &pem);
	path_in(path, sizeof(path), fx.scratch, "encrypted.key");
	write_file(path, pem, (size_t)n, 0600);
	load_fails(path, SL_ERR_INVALID);
	BIO_free(bio);
	EVP_PKEY_free(pkey);

	/* Public keys: a private key, a P-256 key, nothing. */
	path_in(path, sizeof(path), fx.dir1, "gateway.key");
	why = NULL;
	assert_int_equal(gwkey_load_pub(path, pk, &why), SL_ERR_INVALID);
	assert_non_null(strstr(why, "private"));
	path_in(path, sizeof(path), fx.dir1, "signing.pub");
	assert_int_equal(gwkey_load_pub(path, pk, &why), SL_ERR_INVALID);
	assert_int_equal(gwkey_load_pub("/nonexistent.pub", pk, NULL),
	    SL_ERR_IO);
}

/* Seals in to k1; returns the blob. */
static uint8_t *
seal(const struct sealed_in *in, size_t *len)
{
	const char *why = NULL;
	uint8_t *blob = NULL;

	assert_int_equal(sealed_seal(fx.k1->pk, in, &blob, len, &why), 0);
	assert_non_null(blob);
	return blob;
}

static const uint8_t value[] = "tok-3f9a8b7c6d5e4f3a2b1c";
/* A name one character too long. */
static const char n65[] = "1234567890123456789012345678901234567890"
    "1234567890123456789012345";
#define VALUE_LEN	(sizeof(value) - 1)

static uint8_t *
seal_simple(size_t *len)
{
	static const char *const hosts[] = { "api.example.com" };
	struct sealed_in in = { "api-token", 7, 1700000000, hosts, 1, value,
	    VALUE_LEN, SEALED_KIND_HEADER };

	return seal(&in, len);
}

/* Opening blob with keys must fail with why (a prefix); out untouched. */
static void
open_fails(struct gwkey *const *keys, size_t nkeys, const uint8_t *blob,
    size_t len, const char *want)
{
	struct sealed_secret *s = (struct sealed_secret *)&fx;
	char buf[128];
	const char *why = NULL;

	assert_int_equal(sealed_open(keys, nkeys, blob, len, &s, buf, &why),
	    SL_ERR_INVALID);
	assert_ptr_equal(s, (struct sealed_secret *)&fx);
	assert_non_null(why);
	if (strncmp(why, want, strlen(want)) != 0)
		fail_msg("want \"%s\", got \"%s\"", want, why);
}

static struct sealed_secret *
open_ok(const uint8_t *blob, size_t len)
{
	struct sealed_secret *s = NULL;
	const char *why = NULL;
	char buf[128];

	if (sealed_open(&fx.k1, 1, blob, len, &s, buf, &why) != 0)
		fail_msg("does not open: %s", why);
	assert_non_null(s);
	return s;
}

static void
test_roundtrip(void **state)
{
	static const char *const hosts[] = {
		"API.Example.COM.", "*.Example.org", "b\303\274cher.example",
		"api.example.com",	/* the first, again: dropped */
	};
	struct sealed_in in = { "Api_token-2.v1", UINT64_MAX - 1, -5, hosts, 4,
	    value, VALUE_LEN, SEALED_KIND_HEADER };
	struct sealed_secret *s;
	uint8_t *blob;
	size_t len;

	blob = seal(&in, &len);
	assert_memory_equal(blob, SEALED_MAGIC, 8);
	assert_int_equal(blob[8], SEALED_FORMAT);
	assert_memory_equal(blob + 9, fx.k1->id, SEALED_KEYID_LEN);
	s = open_ok(blob, len);
	assert_string_equal(s->name, "Api_token-2.v1");
	assert_true(s->version == UINT64_MAX - 1);
	assert_true(s->created == -5);
	assert_int_equal(s->nhosts, 3);
	assert_string_equal(s->hosts[0], "api.example.com");
	assert_string_equal(s->hosts[1], "*.example.org");
	assert_string_equal(s->hosts[2], "xn--bcher-kva.example");
	assert_memory_equal(s->keyid, fx.k1->id, SEALED_KEYID_LEN);
	assert_int_equal(s->value_len, VALUE_LEN);
	assert_memory_equal(s->value, value, VALUE_LEN);
	assert_int_equal(s->value[VALUE_LEN], '\0');
	sealed_secret_free(s);
	free(blob);
	sealed_secret_free(NULL);

	/* No hosts; the bounds: 64-byte name, 8192-byte value, 16 hosts. */
	{
		char name[SEALED_NAME_MAX + 1], hbuf[16][260];
		const char *hp[16];
		uint8_t *big;
		size_t i;

		memset(name, 'n', SEALED_NAME_MAX);
		name[SEALED_NAME_MAX] = '\0';
		assert_non_null(big = malloc(SEALED_MAX_VALUE));
		memset(big, 'v', SEALED_MAX_VALUE);
		for (i = 0; i < 16; i++) {
			/* 4 labels of 63, distinct: 253 characters */
			memset(hbuf[i], 'a' + (int)i, 253);
			hbuf[i][63] = hbuf[i][127] = hbuf[i][191] = '.';
			hbuf[i][253] = '\0';
			hp[i] = hbuf[i];
		}
		in = (struct sealed_in){ name, 0, 0, hp, 16, big,
		    SEALED_MAX_VALUE, SEALED_KIND_HEADER };
		blob = seal(&in, &len);
		assert_true(len <= SEALED_MAX_BLOB);
		s = open_ok(blob, len);
		assert_int_equal(s->nhosts, 16);
		assert_string_equal(s->hosts[15], hbuf[15]);
		assert_int_equal(s->value_len, SEALED_MAX_VALUE);
		assert_string_equal(s->name, name);
		sealed_secret_free(s);
		free(blob);

		in = (struct sealed_in){ "x", 1, 1, NULL, 0, big, 1,
		    SEALED_KIND_HEADER };
		blob = seal(&in, &len);
		s = open_ok(blob, len);
		assert_int_equal(s->nhosts, 0);
		assert_int_equal(s->value_len, 1);
		sealed_secret_free(s);
		free(blob);
		free(big);
	}
}

/* sealed_seal(in) must succeed (a value with HTAB, say). */
static void
seal_ok_len(const struct sealed_in *in)
{
	uint8_t *blob = NULL;
	size_t len = 0;
	const char *why = NULL;

	assert_int_equal(sealed_seal(fx.k1->pk, in, &blob, &len, &why), 0);
	assert_non_null(blob);
	free(blob);
}

/* sealed_seal(in) must fail with SL_ERR_INVALID and a reason. */
static void
seal_fails(const struct sealed_in *in, const char *want)
{
	uint8_t *blob = (uint8_t *)&fx;
	size_t len = 12345;
	const char *why = NULL;

	assert_int_equal(sealed_seal(fx.k1->pk, in, &blob, &len, &why),
	    SL_ERR_INVALID);
	assert_ptr_equal(blob, (uint8_t *)&fx);
	assert_int_equal(len, 12345);
	assert_non_null(why);
	if (want != NULL && strstr(why, want) == NULL)
		fail_msg("want \"%s\", got \"%s\"", want, why);
}

static void
test_seal_refusals(void **state)
{
	static const char *const badnames[] = {
		"", "a/b", "a b", "a:b", "caf\xc3\xa9", "a\tb",
		n65,
	};
	static const char *const badhosts[] = {
		"", "*", "*.", "**.a.com", "a.*.com", "x*.y", "a..b", ".a",
		"1.2.3.4", "[::1]", "a b.com", "a/b.com", "*.*.a.com",
	};
	struct sealed_in in = { "n", 1, 1, NULL, 0, value, VALUE_LEN,
	    SEALED_KIND_HEADER };
	char hosts[17][8], wild[300];
	const char *hp[17];
	uint8_t big[SEALED_MAX_VALUE + 1], zero[32];
	size_t i;

	for (i = 0; i < sizeof(badnames) / sizeof(badnames[0]); i++) {
		in.name = badnames[i];
		seal_fails(&in, "bad name");
	}
	in.name = NULL;
	seal_fails(&in, "bad name");
	in.name = "n";

	in.value_len = 0;
	seal_fails(&in, "empty");
	in.value = NULL;
	in.value_len = 3;
	seal_fails(&in, "empty");
	memset(big, 'v', sizeof(big));
	in.value = big;
	in.value_len = sizeof(big);
	seal_fails(&in, "longer");
	in.value = (const uint8_t *)"ab\rc";
	in.value_len = 4;
	seal_fails(&in, "CR, LF or NUL");
	in.value = (const uint8_t *)"ab\nc";
	seal_fails(&in, "CR, LF or NUL");
	in.value = (const uint8_t *)"ab\0c";
	seal_fails(&in, "CR, LF or NUL");
	in.value = (const uint8_t *)"abc\n";
	seal_fails(&in, "CR, LF or NUL");
	in.value = (const uint8_t *)"a\001bc";	/* any control byte */
	seal_fails(&in, "control byte");
	in.value = (const uint8_t *)"ab\x7f";
	in.value_len = 3;
	seal_fails(&in, "control byte");
	in.value = (const uint8_t *)"a\tb";	/* but HTAB */
	seal_ok_len(&in);
	in.value = value;
	in.value_len = VALUE_LEN;

	for (i = 0; i < sizeof(badhosts) / sizeof(badhosts[0]); i++) {
		in.hosts = &badhosts[i];
		in.nhosts = 1;
		seal_fails(&in, NULL);
	}
	in.hosts = NULL;
	seal_fails(&in, NULL);
	for (i = 0; i < 17; i++) {
		snprintf(hosts[i], sizeof(hosts[i]), "h%zu.com", i);
		hp[i] = hosts[i];
	}
	in.hosts = hp;
	in.nhosts = 17;
	seal_fails(&in, "16");
	/* "*." over a 252-character name: 254, over the limit. */
	memset(wild, 'w', sizeof(wild));
	memcpy(wild, "*.", 2);
	wild[2 + 63] = wild[2 + 127] = wild[2 + 191] = '.';
	wild[2 + 252] = '\0';
	hp[0] = wild;
	in.nhosts = 1;
	seal_fails(&in, "253");
	wild[2 + 251] = '\0';
	{
		struct sealed_secret *s;
		uint8_t *blob;
		size_t len;

		blob = seal(&in, &len);
		s = open_ok(blob, len);
		assert_string_equal(s->hosts[0], wild);
		sealed_secret_free(s);
		free(blob);
	}

	/* A public key that is the identity cannot be sealed to. */
	memset(zero, 0, sizeof(zero));
	in.nhosts = 0;
	{
		uint8_t *blob = NULL;
		size_t len;
		const char *why = NULL;

		assert_int_equal(sealed_seal(zero, &in, &blob, &len, &why),
		    SL_ERR_INVALID);
		assert_null(blob);
	}
}

/*
 * Every byte of a good blob, changed three ways: the header gives its
 * own error, anything after it does not open.
 */
static void
test_tamper_each_byte(void **state)
{
	static const uint8_t masks[] = { 0x01, 0x80, 0xff };
	uint8_t *blob;
	size_t len, i, m;

	blob = seal_simple(&len);
	for (i = 0; i < len; i++) {
		for (m = 0; m < sizeof(masks); m++) {
			blob[i] ^= masks[m];
			if (i < 8)
				open_fails(&fx.k1, 1, blob, len,
				    "not a sealed secret");
			else if (i == 8)
				open_fails(&fx.k1, 1, blob, len,
				    "unsupported format version");
			else if (i < SEALED_HEADER_LEN)
				open_fails(&fx.k1, 1, blob, len,
				    "sealed to another gateway key (id ");
			else
				open_fails(&fx.k1, 1, blob, len,
				    "does not open");
			blob[i] ^= masks[m];
		}
	}
	sealed_secret_free(open_ok(blob, len));
	free(blob);
}

static void
test_wrong_key(void **state)
{
	struct gwkey *both[2], *none[1] = { NULL }, fake;
	struct sealed_secret *s = NULL;
	char buf[128], want[128];
	const char *why = NULL;
	uint8_t *blob;
	size_t len;

	blob = seal_simple(&len);
	snprintf(want, sizeof(want), "sealed to another gateway key (id %s)",
	    fx.k1->idhex);
	open_fails(&fx.k2, 1, blob, len, want);
	assert_int_equal(sealed_open(&fx.k2, 1, blob, len, &s, buf, &why),
	    SL_ERR_INVALID);
	assert_string_equal(why, want);
	assert_int_equal(sealed_open(&fx.k2, 1, blob, len, &s, NULL, &why),
	    SL_ERR_INVALID);
	assert_string_equal(why, "sealed to another gateway key");
	open_fails(NULL, 0, blob, len, "sealed to another gateway key");
	open_fails(none, 1, blob, len, "sealed to another gateway key");
	assert_int_equal(sealed_open(&fx.k2, 1, blob, len, &s, NULL, NULL),
	    SL_ERR_INVALID);
	assert_null(s);

	/* k2 claiming k1's id: tried, and it does not open. */
	fake = *fx.k2;
	memcpy(fake.id, fx.k1->id, SEALED_KEYID_LEN);
	both[0] = &fake;
	open_fails(both, 1, blob, len, "does not open");
	/* Ids that collide: the next key with that id is tried too. */
	both[1] = fx.k1;
	assert_int_equal(sealed_open(both, 2, blob, len, &s, buf, &why), 0);
	sealed_secret_free(s);
	s = NULL;
	/* The right key second of two. */
	both[0] = fx.k2;
	assert_int_equal(sealed_open(both, 2, blob, len, &s, buf, &why), 0);
	assert_memory_equal(s->keyid, fx.k1->id, SEALED_KEYID_LEN);
	sealed_secret_free(s);
	free(blob);
}

static void
test_truncated_and_trailing(void **state)
{
	uint8_t *blob, *longer;
	size_t len, i;

	blob = seal_simple(&len);
	for (i = 0; i < len; i++)
		open_fails(&fx.k1, 1, blob, i, i < BLOB_MIN ?
		    "not a sealed secret" : "does not open");
	open_fails(&fx.k1, 1, NULL, 0, "not a sealed secret");
	assert_non_null(longer = malloc(len + 16));
	memcpy(longer, blob, len);
	for (i = 1; i <= 16; i++) {
		longer[len + i - 1] = (uint8_t)i;
		open_fails(&fx.k1, 1, longer, len + i, "does not open");
	}
	free(longer);

	/* Magic and format by themselves. */
	blob[7] = 'X';
	open_fails(&fx.k1, 1, blob, len, "not a sealed secret");
	blob[7] = 'B';
	blob[8] = SEALED_FORMAT_KIND;	/* a header value is format 1 */
	open_fails(&fx.k1, 1, blob, len, "header and payload disagree");
	blob[8] = 3;
	open_fails(&fx.k1, 1, blob, len, "unsupported format version");
	blob[8] = 0;
	open_fails(&fx.k1, 1, blob, len, "unsupported format version");
	blob[8] = SEALED_FORMAT;
	sealed_secret_free(open_ok(blob, len));
	free(blob);

	/* Over the size of a sealed file, even if it starts right. */
	assert_non_null(longer = calloc(1, SEALED_MAX_BLOB + 1));
	memcpy(longer, SEALED_MAGIC, 8);
	longer[8] = SEALED_FORMAT;
	memcpy(longer + 9, fx.k1->id, SEALED_KEYID_LEN);
	open_fails(&fx.k1, 1, longer, SEALED_MAX_BLOB + 1,
	    "not a sealed secret");
	open_fails(&fx.k1, 1, longer, SEALED_MAX_BLOB, "does not open");
	free(longer);
}

/*
 * Crafted payloads, sealed with crypto_box_seal directly, so that the
 * opener's own checks are what refuses them.
 */
struct spec {
	uint8_t		 fmt;
	uint8_t		 id[SEALED_KEYID_LEN];
	uint64_t	 version, created;
	const char	*name;
	size_t		 namelen;
	size_t		 nhosts;
	size_t		 count;		/* written instead of nhosts if not 0 */
	const char	*hosts[20];
	size_t		 hostlen[20];
	const uint8_t	*value;
	size_t		 vlen;
	size_t		 extra;		/* trailing bytes */
	int		 kind;		/* the kind byte; -1: none written */
};

struct pl {
	uint8_t		 b[40000];
	size_t		 n;
};

static void
pl_bytes(struct pl *p, const void *b, size_t n)
{
	assert_true(n <= sizeof(p->b) - p->n);
	memcpy(p->b + p->n, b, n);
	p->n += n;
}

static void
pl_uint(struct pl *p, uint64_t v, size_t n)
{
	uint8_t b[8];
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	pl_bytes(p, b, n);
}

static void
spec_init(struct spec *s)
{
	memset(s, 0, sizeof(*s));
	s->fmt = SEALED_FORMAT;
	memcpy(s->id, fx.k1->id, SEALED_KEYID_LEN);
	s->version = 42;
	s->created = 1700000000;
	s->name = "crafted";
	s->namelen = 7;
	s->value = value;
	s->vlen = VALUE_LEN;
	s->kind = -1;
}

static void
build(const struct spec *s, struct pl *p)
{
	size_t i, n;

	p->n = 0;
	pl_uint(p, s->fmt, 1);
	pl_bytes(p, s->id, SEALED_KEYID_LEN);
	pl_uint(p, s->version, 8);
	pl_uint(p, s->created, 8);
	if (s->kind >= 0)
		pl_uint(p, (uint64_t)s->kind, 1);
	pl_uint(p, s->namelen, 1);
	pl_bytes(p, s->name, s->namelen);
	pl_uint(p, s->count != 0 ? s->count : s->nhosts, 1);
	for (i = 0; i < s->nhosts; i++) {
		n = s->hostlen[i] != 0 ? s->hostlen[i] : strlen(s->hosts[i]);
		pl_uint(p, n, 1);
		pl_bytes(p, s->hosts[i], n);
	}
	pl_uint(p, s->vlen, 2);
	pl_bytes(p, s->value, s->vlen);
	for (i = 0; i < s->extra; i++)
		pl_uint(p, 0x41, 1);
}

/* A blob around p with k1's header; caller frees. */
static uint8_t *
craft(const struct pl *p, size_t *len)
{
	uint8_t *b;

	*len = SEALED_HEADER_LEN + crypto_box_SEALBYTES + p->n;
	assert_non_null(b = malloc(*len));
	memcpy(b, SEALED_MAGIC, 8);
	/* The clear format as sealed_seal writes it: 2 only for format 2. */
	b[8] = p->n > 0 && p->b[0] == SEALED_FORMAT_KIND ? SEALED_FORMAT_KIND :
	    SEALED_FORMAT;
	memcpy(b + 9, fx.k1->id, SEALED_KEYID_LEN);
	assert_int_equal(crypto_box_seal(b + SEALED_HEADER_LEN, p->b, p->n,
	    fx.k1->pk), 0);
	return b;
}

/* The spec opens (want NULL) or is refused with want. */
static void
check_spec(const struct spec *s, const char *want)
{
	struct sealed_secret *o;
	struct pl *p;
	uint8_t *blob;
	size_t len;

	assert_non_null(p = malloc(sizeof(*p)));
	build(s, p);
	blob = craft(p, &len);
	if (want != NULL) {
		open_fails(&fx.k1, 1, blob, len, want);
	} else {
		o = open_ok(blob, len);
		assert_int_equal(o->nhosts, s->nhosts);
		assert_int_equal(o->value_len, s->vlen);
		assert_int_equal(o->version, s->version);
		sealed_secret_free(o);
	}
	free(blob);
	free(p);
}

static void
test_crafted_header_payload(void **state)
{
	struct spec s;

	spec_init(&s);
	check_spec(&s, NULL);
	memcpy(s.id, fx.k2->id, SEALED_KEYID_LEN);
	check_spec(&s, "header and payload disagree");
	spec_init(&s);
	s.fmt = 3;
	check_spec(&s, "header and payload disagree");
	s.fmt = 0;
	check_spec(&s, "header and payload disagree");
	spec_init(&s);
	s.extra = 1;
	check_spec(&s, "malformed payload");
	s.extra = 100;
	check_spec(&s, "malformed payload");

	/* created is signed: all ones is -1. */
	spec_init(&s);
	s.created = UINT64_MAX;
	{
		struct sealed_secret *o;
		struct pl p;
		uint8_t *blob;
		size_t len;

		build(&s, &p);
		blob = craft(&p, &len);
		o = open_ok(blob, len);
		assert_true(o->created == -1);
		assert_string_equal(o->name, "crafted");
		sealed_secret_free(o);
		free(blob);
	}
}

/* A P-256 private key in PEM, then a certificate of it if cert. */
static char *
pem_key(int cert, size_t *len)
{
	EVP_PKEY *k;
	X509 *x;
	BIO *b;
	char *data, *out;
	long n;

	assert_non_null(k = EVP_EC_gen("P-256"));
	assert_non_null(b = BIO_new(BIO_s_mem()));
	assert_int_equal(PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL,
	    NULL), 1);
	if (cert) {
		assert_non_null(x = X509_new());
		ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
		X509_gmtime_adj(X509_getm_notBefore(x), 0);
		X509_gmtime_adj(X509_getm_notAfter(x), 3600);
		X509_set_pubkey(x, k);
		X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN",
		    MBSTRING_ASC, (const unsigned char *)"client", -1, -1, 0);
		X509_set_issuer_name(x, X509_get_subject_name(x));
		assert_true(X509_sign(x, k, EVP_sha256()) > 0);
		assert_int_equal(PEM_write_bio_X509(b, x), 1);
		X509_free(x);
	}
	n = BIO_get_mem_data(b, &data);
	assert_true(n > 0);
	assert_non_null(out = malloc((size_t)n + 1));
	memcpy(out, data, (size_t)n);
	out[n] = '\0';
	*len = (size_t)n;
	BIO_free(b);
	EVP_PKEY_free(k);
	return out;
}

static void
test_kinds(void **state)
{
	static const char json[] = "{\n\t\"access_key_id\": \"AKIDEXAMPLE\",\r\n"
	    "\"secret_access_key\": \"wJalrXUtnFEMI\"\n}\n";
	struct sealed_in in = { "doc", 7, 1, NULL, 0, NULL, 0,
	    SEALED_KIND_PEM };
	struct sealed_secret *o;
	struct spec sp;
	uint8_t *blob, *big;
	size_t len, klen;
	char *key;

	assert_string_equal(sealed_kind_name(SEALED_KIND_HEADER), "header");
	assert_string_equal(sealed_kind_name(SEALED_KIND_PEM), "pem");
	assert_string_equal(sealed_kind_name(SEALED_KIND_JSON), "json");
	assert_int_equal(sealed_kind_parse("pem"), SEALED_KIND_PEM);
	assert_int_equal(sealed_kind_parse("json"), SEALED_KIND_JSON);
	assert_int_equal(sealed_kind_parse("header"), SEALED_KIND_HEADER);
	assert_int_equal(sealed_kind_parse("PEM"), -1);
	assert_int_equal(sealed_kind_parse(""), -1);

	/* A key and its certificate, newlines and all, in format 2. */
	key = pem_key(1, &klen);
	in.value = (const uint8_t *)key;
	in.value_len = klen;
	blob = seal(&in, &len);
	assert_int_equal(blob[8], SEALED_FORMAT_KIND);
	o = open_ok(blob, len);
	assert_int_equal(o->kind, SEALED_KIND_PEM);
	assert_int_equal(o->value_len, klen);
	assert_memory_equal(o->value, key, klen);
	sealed_secret_free(o);
	free(blob);

	/* JSON with TAB, CR and LF. */
	in.kind = SEALED_KIND_JSON;
	in.value = (const uint8_t *)json;
	in.value_len = sizeof(json) - 1;
	blob = seal(&in, &len);
	assert_int_equal(blob[8], SEALED_FORMAT_KIND);
	o = open_ok(blob, len);
	assert_int_equal(o->kind, SEALED_KIND_JSON);
	assert_memory_equal(o->value, json, sizeof(json) - 1);
	sealed_secret_free(o);
	free(blob);

	/* A header value stays in format 1, kind header. */
	in.kind = SEALED_KIND_HEADER;
	in.value = value;
	in.value_len = VALUE_LEN;
	blob = seal(&in, &len);
	assert_int_equal(blob[8], SEALED_FORMAT);
	o = open_ok(blob, len);
	assert_int_equal(o->kind, SEALED_KIND_HEADER);
	sealed_secret_free(o);
	free(blob);

	/* What each kind refuses. */
	in.value = (const uint8_t *)json;
	in.value_len = sizeof(json) - 1;
	seal_fails(&in, "CR, LF or NUL");		/* header: no LF */
	in.kind = SEALED_KIND_PEM;
	seal_fails(&in, "unencrypted private key");	/* not a key */
	in.kind = SEALED_KIND_JSON;
	in.value = (const uint8_t *)"[1, 2]";
	in.value_len = 6;
	seal_fails(&in, "one JSON object");
	in.value = (const uint8_t *)"{\"a\": 1, \"a\": 2}";
	in.value_len = 16;
	seal_fails(&in, "one JSON object");	/* duplicate keys */
	in.value = (const uint8_t *)"{\"a\": 1} x";
	in.value_len = 10;
	seal_fails(&in, "one JSON object");
	in.value = (const uint8_t *)"{\"a\":\0 1}";
	in.value_len = 9;
	seal_fails(&in, "NUL");
	in.value = (const uint8_t *)"{\"a\":\x1b 1}";
	seal_fails(&in, "control byte");
	in.kind = (enum sealed_kind)7;
	seal_fails(&in, "unknown kind");

	/* Bounds: a document up to 32768 bytes (a key with blank lines after). */
	assert_non_null(big = malloc(SEALED_MAX_DOC + 1));
	memset(big, '\n', SEALED_MAX_DOC + 1);
	memcpy(big, key, klen);
	in.kind = SEALED_KIND_PEM;
	in.value = big;
	in.value_len = SEALED_MAX_DOC;
	blob = seal(&in, &len);
	assert_true(len <= SEALED_MAX_BLOB);
	o = open_ok(blob, len);
	assert_int_equal(o->value_len, SEALED_MAX_DOC);
	sealed_secret_free(o);
	free(blob);
	in.value_len = SEALED_MAX_DOC + 1;
	seal_fails(&in, "longer than 32768");
	in.kind = SEALED_KIND_HEADER;
	memset(big, 'v', SEALED_MAX_VALUE + 1);
	in.value_len = SEALED_MAX_VALUE + 1;
	seal_fails(&in, "longer than 8192");

	/* Crafted: the kind byte of format 2, and what format 1 forbids. */
	spec_init(&sp);
	sp.fmt = SEALED_FORMAT_KIND;
	sp.kind = SEALED_KIND_JSON;
	check_spec(&sp, NULL);
	sp.kind = SEALED_KIND_HEADER;		/* header is format 1's */
	check_spec(&sp, "unknown kind");
	sp.kind = 3;
	check_spec(&sp, "unknown kind");
	sp.kind = 255;
	check_spec(&sp, "unknown kind");
	sp.kind = SEALED_KIND_PEM;		/* not judged here: secret_open does */
	sp.value = (const uint8_t *)"a\nb";
	sp.vlen = 3;
	check_spec(&sp, NULL);
	sp.value = (const uint8_t *)"a\0b";
	check_spec(&sp, "value holds NUL");
	sp.vlen = SEALED_MAX_DOC + 1;
	sp.value = big;
	check_spec(&sp, "value longer than 32768");
	spec_init(&sp);
	sp.value = (const uint8_t *)"a\nb";	/* format 1: a header value */
	sp.vlen = 3;
	check_spec(&sp, "value holds CR, LF or NUL");
	spec_init(&sp);
	sp.fmt = SEALED_FORMAT_KIND;		/* the kind byte missing */
	check_spec(&sp, "unknown kind");
	free(big);
	free(key);
}

static void
test_crafted_name_value(void **state)
{
	uint8_t big[SEALED_MAX_VALUE + 1];
	struct spec s;

	spec_init(&s);
	s.namelen = 0;
	check_spec(&s, "bad name");
	s.name = "a b";
	s.namelen = 3;
	check_spec(&s, "bad name");
	s.name = "a\0b";
	check_spec(&s, "bad name");
	s.name = "a/b";
	check_spec(&s, "bad name");
	s.name = n65;
	s.namelen = 65;
	check_spec(&s, "bad name");
	s.namelen = 64;
	check_spec(&s, NULL);

	spec_init(&s);
	s.vlen = 0;
	check_spec(&s, "empty value");
	memset(big, 'v', sizeof(big));
	s.value = big;
	s.vlen = sizeof(big);
	check_spec(&s, "value longer than 8192 bytes");
	s.vlen = SEALED_MAX_VALUE;
	check_spec(&s, NULL);
	s.value = (const uint8_t *)"a\rb";
	s.vlen = 3;
	check_spec(&s, "value holds CR, LF or NUL");
	s.value = (const uint8_t *)"a\nb";
	check_spec(&s, "value holds CR, LF or NUL");
	s.value = (const uint8_t *)"a\0b";
	check_spec(&s, "value holds CR, LF or NUL");
	s.value = (const uint8_t *)"ab\n";
	check_spec(&s, "value holds CR, LF or NUL");
}

static void
test_crafted_hosts(void **state)
{
	static const char *const bad[] = {
		"Example.com", "example.com.", "*", "*.", "*.*.a.com", "a.*.b",
		"1.2.3.4", "*.1.2.3.4", "a..b", ".a", "a b", "xn--\xc3\xbc.com",
	};
	char many[20][8], longest[256];
	struct spec s;
	size_t i;

	spec_init(&s);
	s.nhosts = 0;
	check_spec(&s, NULL);
	for (i = 0; i < 20; i++)
		snprintf(many[i], sizeof(many[i]), "h%zu.com", i);
	for (i = 0; i < 16; i++)
		s.hosts[i] = many[i];
	s.nhosts = 16;
	check_spec(&s, NULL);
	for (; i < 17; i++)
		s.hosts[i] = many[i];
	s.nhosts = 17;
	check_spec(&s, "more than 16 hosts");
	s.count = 255;
	check_spec(&s, "more than 16 hosts");

	spec_init(&s);
	s.nhosts = 2;
	s.hosts[0] = "ok.example";
	s.hosts[1] = "*.ok.example";
	check_spec(&s, NULL);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		s.hosts[1] = bad[i];
		check_spec(&s, "bad host");
	}
	s.hosts[1] = "a\0b.com";
	s.hostlen[1] = 7;
	check_spec(&s, "bad host");
	s.hosts[1] = "";
	s.hostlen[1] = 0;
	check_spec(&s, "bad host");

	/* 253 characters is the longest; 254 and 255 are not. */
	memset(longest, 'l', sizeof(longest));
	longest[63] = longest[127] = longest[191] = '.';
	s.hosts[1] = longest;
	s.hostlen[1] = 253;
	check_spec(&s, NULL);
	s.hostlen[1] = 254;
	check_spec(&s, "bad host");
	s.hostlen[1] = 255;
	check_spec(&s, "bad host");
	/* A wildcard counts its "*." too. */
	memcpy(longest, "*.", 2);
	longest[65] = longest[129] = longest[193] = '.';
	longest[63] = longest[127] = longest[191] = 'l';
	s.hostlen[1] = 253;
	check_spec(&s, NULL);
	s.hostlen[1] = 254;
	check_spec(&s, "bad host");
}

/* The parser on every prefix of a good payload: refused, never overread. */
static void
test_parse_every_prefix(void **state)
{
	static const char *const hosts[] = { "a.example", "*.b.example" };
	struct sealed_secret *s = NULL;
	const char *why;
	uint8_t *p;
	struct spec sp;
	struct pl pl;
	size_t i;

	spec_init(&sp);
	sp.nhosts = 2;
	sp.hosts[0] = hosts[0];
	sp.hosts[1] = hosts[1];
	build(&sp, &pl);
	for (i = 0; i < pl.n; i++) {
		/* Exactly i bytes on the heap, so ASan sees any overread. */
		assert_non_null(p = malloc(i + 1));
		memcpy(p, pl.b, i);
		why = NULL;
		assert_int_equal(sealed_parse_payload(p, i, fx.k1->id, &s,
		    &why), SL_ERR_INVALID);
		assert_null(s);
		assert_non_null(why);
		free(p);
	}
	assert_int_equal(sealed_parse_payload(pl.b, pl.n, fx.k1->id, &s, &why),
	    0);
	assert_int_equal(s->nhosts, 2);
	assert_string_equal(s->hosts[1], "*.b.example");
	sealed_secret_free(s);
	s = NULL;
	assert_int_equal(sealed_parse_payload(pl.b, pl.n, fx.k2->id, &s, &why),
	    SL_ERR_INVALID);
	assert_string_equal(why, "header and payload disagree");
}

static void
test_host_bound(void **state)
{
	struct sealed_secret s;

	memset(&s, 0, sizeof(s));
	assert_int_equal(sealed_host_bound(&s, "anything.example"), 1);
	assert_int_equal(sealed_host_bound(&s, NULL), 0);

	s.nhosts = 2;
	snprintf(s.hosts[0], sizeof(s.hosts[0]), "api.example.com");
	snprintf(s.hosts[1], sizeof(s.hosts[1]), "*.example.org");
	assert_int_equal(sealed_host_bound(&s, "api.example.com"), 1);
	assert_int_equal(sealed_host_bound(&s, "x.api.example.com"), 0);
	assert_int_equal(sealed_host_bound(&s, "example.com"), 0);
	assert_int_equal(sealed_host_bound(&s, "api.example.co"), 0);
	assert_int_equal(sealed_host_bound(&s, "a.example.org"), 1);
	assert_int_equal(sealed_host_bound(&s, "a.b.c.example.org"), 1);
	/* The apex is not below itself. */
	assert_int_equal(sealed_host_bound(&s, "example.org"), 0);
	assert_int_equal(sealed_host_bound(&s, "badexample.org"), 0);
	assert_int_equal(sealed_host_bound(&s, "a.badexample.org"), 0);
	assert_int_equal(sealed_host_bound(&s, ".example.org"), 0);
	assert_int_equal(sealed_host_bound(&s, "example.org.evil"), 0);
	assert_int_equal(sealed_host_bound(&s, ""), 0);
	assert_int_equal(sealed_host_bound(&s, NULL), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keygen_files),
		cmocka_unit_test(test_keygen_refuses_overwrite),
		cmocka_unit_test(test_gwkey_load),
		cmocka_unit_test(test_gwkey_load_refusals),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_seal_refusals),
		cmocka_unit_test(test_tamper_each_byte),
		cmocka_unit_test(test_wrong_key),
		cmocka_unit_test(test_truncated_and_trailing),
		cmocka_unit_test(test_crafted_header_payload),
		cmocka_unit_test(test_crafted_name_value),
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_crafted_hosts),
		cmocka_unit_test(test_parse_every_prefix),
		cmocka_unit_test(test_host_bound),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
