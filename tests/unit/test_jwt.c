/*
 * test_jwt.c: signing keys (loading, refusals, kid as RFC 7638 says,
 * ES256 in raw r||s form), base64url, identity tokens and every way a
 * token is refused, the JWKS.
 */
#include "autoconf.h"

#include <sys/stat.h>

#include <fcntl.h>
#include <pthread.h>
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
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <sodium.h>

#include "util/err.h"
#include "keys/jwt.h"
#include "keys/sealed.h"
#include "keys/signkey.h"

#define KEYBIG		20000	/* over signkey.c's 16 KiB for a key file */
#define NTOKENS		1000
#define NTHREADS	4
#define NTHREAD_SIGS	100
#define B64_URL		sodium_base64_VARIANT_URLSAFE_NO_PADDING

/*
 * A fixed key made with `openssl genpkey -algorithm EC -pkeyopt
 * ec_paramgen_curve:P-256`; its thumbprint computed apart, with python3
 * and cryptography: base64url(sha256(json.dumps({crv,kty,x,y},
 * separators=(',',':'), sort_keys=True))).  x holds a '-', y a '_'.
 */
static const char fixed_key[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgRSJgy0byuDOpd3h+\n"
    "TjWfj4KlQPcE/0BwMHBJ0I/MxlShRANCAAT5LrIL74L0IOKzKZRUDAetglWuFCaK\n"
    "W5vH9WPRXc0h9NNX3ddtpAuBwBBYwcGGbRKp/yrFbDpgQ7mUwSJGu0er\n"
    "-----END PRIVATE KEY-----\n";
static const char fixed_pub[] =
    "-----BEGIN PUBLIC KEY-----\n"
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE+S6yC++C9CDisymUVAwHrYJVrhQm\n"
    "ilubx/Vj0V3NIfTTV93XbaQLgcAQWMHBhm0Sqf8qxWw6YEO5lMEiRrtHqw==\n"
    "-----END PUBLIC KEY-----\n";
static const char fixed_x[] = "-S6yC--C9CDisymUVAwHrYJVrhQmilubx_Vj0V3NIfQ";
static const char fixed_y[] = "01fd122kC4HAEFjBwYZtEqn_KsVsOmBDuZTBIka7R6s";
static const char fixed_kid[] = "6zVpYttGFlvfzD6dg7-DozQVww2ISpOJ-RvkiO5ZpjY";

/*
 * A SEC1 key whose x starts with a zero byte, so that the thumbprint
 * must pad it to 32 bytes; found and hashed the same way.
 */
static const char zero_x_key[] =
    "-----BEGIN EC PRIVATE KEY-----\n"
    "MHcCAQEEIBaFuL2If/pn5eT5/E1N/ODE7msPrQl79MURdw74OdEHoAoGCCqGSM49\n"
    "AwEHoUQDQgAEALGKJqaARb3aGXZoNSSxhfSwhAMtWESpLodrC7fV6/QMbF+EDn3a\n"
    "yBrIuvjUBeWs7BNr2qdhloyCMprQlqGpMg==\n"
    "-----END EC PRIVATE KEY-----\n";
static const char zero_x_x[] = "ALGKJqaARb3aGXZoNSSxhfSwhAMtWESpLodrC7fV6_Q";
static const char zero_x_kid[] = "Qukb6x_dFxUhfmPZeM5m_mKZu9hLZzKXpjmWaKjA6Ak";

/* Two key sets made by keys_generate, loaded once for the group. */
struct fx {
	char		 dir1[64], dir2[64], scratch[64];
	struct signkey	*k1, *k2;
	struct signpub	*p1, *p2;
	EVP_PKEY	*ossl_pub1;	/* signing.pub of dir1, read by OpenSSL */
};
static struct fx fx;

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

/* Writes a string to scratch/name with mode; the path into buf. */
static void
scratch_file(char *buf, size_t len, const char *name, const char *s,
    mode_t mode)
{
	path_in(buf, len, fx.scratch, name);
	write_file(buf, s, strlen(s), mode);
}

/* pkey as PEM (private: unencrypted PKCS#8, or with a passphrase). */
static char *
pem_of(EVP_PKEY *pkey, int private, const char *pass)
{
	const EVP_CIPHER *c = pass != NULL ? EVP_aes_256_cbc() : NULL;
	char *data, *s;
	long n;
	BIO *b;

	assert_non_null(b = BIO_new(BIO_s_mem()));
	if (private)
		assert_int_equal(PEM_write_bio_PKCS8PrivateKey(b, pkey, c,
		    NULL, 0, NULL, (void *)pass), 1);
	else
		assert_int_equal(PEM_write_bio_PUBKEY(b, pkey), 1);
	assert_true((n = BIO_get_mem_data(b, &data)) > 0);
	assert_non_null(s = calloc(1, (size_t)n + 1));
	memcpy(s, data, (size_t)n);
	BIO_free(b);
	return s;
}

static EVP_PKEY *
read_pub_file(const char *path)
{
	EVP_PKEY *pkey;
	FILE *f;

	assert_non_null(f = fopen(path, "r"));
	pkey = PEM_read_PUBKEY(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(pkey);
	return pkey;
}

static int
group_setup(void **state)
{
	char path[128];
	const char *why = NULL;

	if (sodium_init() < 0)
		return -1;
	snprintf(fx.dir1, sizeof(fx.dir1), "/tmp/sl-test-jwt1.XXXXXX");
	snprintf(fx.dir2, sizeof(fx.dir2), "/tmp/sl-test-jwt2.XXXXXX");
	snprintf(fx.scratch, sizeof(fx.scratch), "/tmp/sl-test-jwt3.XXXXXX");
	if (mkdtemp(fx.dir1) == NULL || mkdtemp(fx.dir2) == NULL ||
	    mkdtemp(fx.scratch) == NULL)
		return -1;
	if (keys_generate(fx.dir1, &why) != 0 ||
	    keys_generate(fx.dir2, &why) != 0)
		return -1;
	path_in(path, sizeof(path), fx.dir1, "signing.key");
	if (signkey_load(path, &fx.k1, &why) != 0)
		return -1;
	path_in(path, sizeof(path), fx.dir1, "signing.pub");
	if (signpub_load(path, &fx.p1, &why) != 0)
		return -1;
	fx.ossl_pub1 = read_pub_file(path);
	path_in(path, sizeof(path), fx.dir2, "signing.key");
	if (signkey_load(path, &fx.k2, &why) != 0)
		return -1;
	if (signkey_public(fx.k2, &fx.p2) != 0)
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
	EVP_PKEY_free(fx.ossl_pub1);
	rm_dir(fx.dir1);
	rm_dir(fx.dir2);
	rm_dir(fx.scratch);
	return 0;
}

/* Whether s is n characters of the base64url alphabet. */
static int
is_b64url(const char *s, size_t n)
{
	return strlen(s) == n && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "abcdefghijklmnopqrstuvwxyz0123456789-_") == n;
}

/* The keys keygen writes load, and every way to name one has one kid. */
static void
test_load_keygen(void **state)
{
	struct signpub *pub = NULL;

	assert_true(is_b64url(signkey_kid(fx.k1), SIGNKEY_KID_MAX - 1));
	assert_string_equal(signkey_kid(fx.k1), signpub_kid(fx.p1));
	assert_int_equal(signkey_public(fx.k1, &pub), 0);
	assert_string_equal(signpub_kid(pub), signkey_kid(fx.k1));
	signpub_free(pub);
	assert_string_equal(signpub_kid(fx.p2), signkey_kid(fx.k2));
	assert_string_not_equal(signkey_kid(fx.k1), signkey_kid(fx.k2));
	signkey_free(NULL);
	signpub_free(NULL);
}

/* Loads path as a private key, expecting err; out must stay untouched. */
static void
key_refused(const char *path, int err)
{
	struct signkey *k = (struct signkey *)&fx;	/* a sentinel */
	const char *why = NULL;

	assert_int_equal(signkey_load(path, &k, &why), err);
	assert_ptr_equal(k, (struct signkey *)&fx);
	assert_non_null(why);
	assert_int_equal(signkey_load(path, &k, NULL), err);
}

static void
pub_refused(const char *path, const char *want_why)
{
	struct signpub *p = (struct signpub *)&fx;
	const char *why = NULL;

	assert_int_equal(signpub_load(path, &p, &why), SL_ERR_INVALID);
	assert_ptr_equal(p, (struct signpub *)&fx);
	assert_non_null(why);
	if (want_why != NULL)
		assert_string_equal(why, want_why);
}

static void
test_load_mode_refusals(void **state)
{
	static const mode_t bad[] = { 0644, 0640, 0604, 0660, 0602, 0610,
	    0601, 0620 };
	struct signkey *k = NULL;
	char path[128];
	const char *why = NULL;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		scratch_file(path, sizeof(path), "mode.key", fixed_key, bad[i]);
		key_refused(path, SL_ERR_DENIED);
		assert_int_equal(signkey_load(path, &k, &why), SL_ERR_DENIED);
		assert_string_equal(why,
		    "group or others may access it (chmod 600 it)");
	}
	/* The same bytes, owner only: loads. */
	scratch_file(path, sizeof(path), "mode.key", fixed_key, 0600);
	assert_int_equal(signkey_load(path, &k, &why), 0);
	signkey_free(k);
	scratch_file(path, sizeof(path), "mode.key", fixed_key, 0400);
	assert_int_equal(signkey_load(path, &k, &why), 0);
	signkey_free(k);
}


/* A P-256 private key whose public point is another key's. */
static EVP_PKEY *
mismatched_pair(void)
{
	OSSL_PARAM_BLD *bld;
	OSSL_PARAM *params;
	EVP_PKEY_CTX *ctx;
	EVP_PKEY *a, *b, *m = NULL;
	BIGNUM *priv = NULL;
	uint8_t pub[65];
	size_t publen;

	assert_non_null(a = EVP_EC_gen("P-256"));
	assert_non_null(b = EVP_EC_gen("P-256"));
	assert_int_equal(EVP_PKEY_get_bn_param(a, OSSL_PKEY_PARAM_PRIV_KEY,
	    &priv), 1);
	assert_int_equal(EVP_PKEY_get_octet_string_param(b,
	    OSSL_PKEY_PARAM_PUB_KEY, pub, sizeof(pub), &publen), 1);
	assert_non_null(bld = OSSL_PARAM_BLD_new());
	assert_int_equal(OSSL_PARAM_BLD_push_utf8_string(bld,
	    OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0), 1);
	assert_int_equal(OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PRIV_KEY,
	    priv), 1);
	assert_int_equal(OSSL_PARAM_BLD_push_octet_string(bld,
	    OSSL_PKEY_PARAM_PUB_KEY, pub, publen), 1);
	assert_non_null(params = OSSL_PARAM_BLD_to_param(bld));
	assert_non_null(ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL));
	assert_int_equal(EVP_PKEY_fromdata_init(ctx), 1);
	assert_int_equal(EVP_PKEY_fromdata(ctx, &m, EVP_PKEY_KEYPAIR, params),
	    1);
	EVP_PKEY_CTX_free(ctx);
	OSSL_PARAM_free(params);
	OSSL_PARAM_BLD_free(bld);
	BN_clear_free(priv);
	EVP_PKEY_free(a);
	EVP_PKEY_free(b);
	return m;
}

/* Keys of other kinds, encrypted keys, halves swapped, inconsistent. */
static void
test_load_kind_refusals(void **state)
{
	EVP_PKEY *ed, *p384, *p256, *odd;
	char path[128], path2[128], *pem;

	assert_non_null(ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519"));
	assert_non_null(p384 = EVP_EC_gen("P-384"));
	assert_non_null(p256 = EVP_EC_gen("P-256"));

	pem = pem_of(ed, 1, NULL);
	scratch_file(path, sizeof(path), "ed.key", pem, 0600);
	key_refused(path, SL_ERR_INVALID);
	free(pem);
	pem = pem_of(ed, 0, NULL);
	scratch_file(path, sizeof(path), "ed.pub", pem, 0644);
	pub_refused(path, "not an ECDSA P-256 key");
	free(pem);

	pem = pem_of(p384, 1, NULL);
	scratch_file(path, sizeof(path), "p384.key", pem, 0600);
	key_refused(path, SL_ERR_INVALID);
	free(pem);
	pem = pem_of(p384, 0, NULL);
	scratch_file(path, sizeof(path), "p384.pub", pem, 0644);
	pub_refused(path, "not an ECDSA P-256 key");
	free(pem);

	/* The right kind of key, encrypted: refused, never a prompt. */
	pem = pem_of(p256, 1, "passphrase");
	assert_non_null(strstr(pem, "ENCRYPTED PRIVATE KEY"));
	scratch_file(path, sizeof(path), "enc.key", pem, 0600);
	key_refused(path, SL_ERR_INVALID);
	free(pem);

	/* A public key given as the private one, and the other way. */
	path_in(path2, sizeof(path2), fx.dir1, "signing.pub");
	pem = pem_of(p256, 0, NULL);
	scratch_file(path, sizeof(path), "pub-as.key", pem, 0600);
	key_refused(path, SL_ERR_INVALID);
	free(pem);
	path_in(path, sizeof(path), fx.dir1, "signing.key");
	pub_refused(path, "a private key: give the public one");

	/* A public point that is not the private key's. */
	odd = mismatched_pair();
	pem = pem_of(odd, 1, NULL);
	scratch_file(path, sizeof(path), "odd.key", pem, 0600);
	key_refused(path, SL_ERR_INVALID);
	free(pem);

	EVP_PKEY_free(odd);
	EVP_PKEY_free(p256);
	EVP_PKEY_free(p384);
	EVP_PKEY_free(ed);
}

/* Not keys at all, and not files. */
static void
test_load_garbage(void **state)
{
	static const char *const junk[] = {
		"",
		"hello\n",
		"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
		"-----BEGIN PRIVATE KEY-----\n",
	};
	char path[128], *big;
	size_t i;

	for (i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		scratch_file(path, sizeof(path), "junk.key", junk[i], 0600);
		key_refused(path, SL_ERR_INVALID);
		pub_refused(path, NULL);
	}
	/* A key followed by enough to pass the size bound. */
	assert_non_null(big = malloc(KEYBIG + 1));
	memset(big, '\n', KEYBIG);
	big[KEYBIG] = '\0';
	memcpy(big, fixed_key, strlen(fixed_key));
	scratch_file(path, sizeof(path), "big.key", big, 0600);
	key_refused(path, SL_ERR_INVALID);
	free(big);

	key_refused(fx.scratch, SL_ERR_INVALID);	/* a directory */
	pub_refused(fx.scratch, "not a regular file");
	path_in(path, sizeof(path), fx.scratch, "fifo.key");
	unlink(path);
	assert_int_equal(mkfifo(path, 0600), 0);
	key_refused(path, SL_ERR_INVALID);	/* refused, not waited on */
	unlink(path);
	path_in(path, sizeof(path), fx.scratch, "missing.key");
	key_refused(path, SL_ERR_IO);
}

/* Only root can give a file away; run there, skipped elsewhere. */
static void
test_load_owner(void **state)
{
	char path[128];

	if (geteuid() != 0)
		skip();
	scratch_file(path, sizeof(path), "owner.key", fixed_key, 0600);
	assert_int_equal(chown(path, 4242, 4242), 0);
	key_refused(path, SL_ERR_DENIED);
}

/* The kid is the RFC 7638 thumbprint another implementation computes. */
static void
test_kid_fixture(void **state)
{
	struct signpub *p = NULL, *q = NULL;
	struct signkey *k = NULL;
	const char *why = NULL;
	char path[128];
	json_t *jwk;

	scratch_file(path, sizeof(path), "fixed.key", fixed_key, 0600);
	assert_int_equal(signkey_load(path, &k, &why), 0);
	assert_string_equal(signkey_kid(k), fixed_kid);
	assert_int_equal(signkey_public(k, &q), 0);
	assert_string_equal(signpub_kid(q), fixed_kid);
	scratch_file(path, sizeof(path), "fixed.pub", fixed_pub, 0644);
	assert_int_equal(signpub_load(path, &p, &why), 0);
	assert_string_equal(signpub_kid(p), fixed_kid);
	assert_non_null(jwk = signpub_jwk(p));
	assert_string_equal(json_string_value(json_object_get(jwk, "x")),
	    fixed_x);
	assert_string_equal(json_string_value(json_object_get(jwk, "y")),
	    fixed_y);
	assert_string_equal(json_string_value(json_object_get(jwk, "kid")),
	    fixed_kid);
	json_decref(jwk);
	signpub_free(p);
	signpub_free(q);
	signkey_free(k);

	/* SEC1, and an x with a leading zero byte. */
	scratch_file(path, sizeof(path), "zero.key", zero_x_key, 0600);
	assert_int_equal(signkey_load(path, &k, &why), 0);
	assert_string_equal(signkey_kid(k), zero_x_kid);
	assert_int_equal(signkey_public(k, &q), 0);
	assert_non_null(jwk = signpub_jwk(q));
	assert_string_equal(json_string_value(json_object_get(jwk, "x")),
	    zero_x_x);
	json_decref(jwk);
	signpub_free(q);
	signkey_free(k);
}

static void
test_sign_verify(void **state)
{
	static const uint8_t msg[] = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0";
	uint8_t sig[SIGNKEY_SIG_LEN], sig2[SIGNKEY_SIG_LEN], m[sizeof(msg)];
	size_t i;

	assert_int_equal(signkey_sign(fx.k1, msg, sizeof(msg) - 1, sig), 0);
	assert_int_equal(signpub_verify(fx.p1, msg, sizeof(msg) - 1, sig), 0);
	assert_int_equal(signpub_verify(fx.p2, msg, sizeof(msg) - 1, sig),
	    SL_ERR_INVALID);
	/* ECDSA draws a nonce a signature: the same message, another one. */
	assert_int_equal(signkey_sign(fx.k1, msg, sizeof(msg) - 1, sig2), 0);
	assert_memory_not_equal(sig, sig2, sizeof(sig));
	assert_int_equal(signpub_verify(fx.p1, msg, sizeof(msg) - 1, sig2), 0);

	for (i = 0; i < 8 * sizeof(sig); i++) {
		memcpy(sig2, sig, sizeof(sig));
		sig2[i / 8] ^= 1u << (i % 8);
		assert_int_equal(signpub_verify(fx.p1, msg, sizeof(msg) - 1,
		    sig2), SL_ERR_INVALID);
	}
	for (i = 0; i < 8 * (sizeof(msg) - 1); i++) {
		memcpy(m, msg, sizeof(msg));
		m[i / 8] ^= 1u << (i % 8);
		assert_int_equal(signpub_verify(fx.p1, m, sizeof(msg) - 1,
		    sig), SL_ERR_INVALID);
	}
	assert_int_equal(signpub_verify(fx.p1, msg, sizeof(msg) - 2, sig),
	    SL_ERR_INVALID);
	assert_int_equal(signpub_verify(fx.p1, msg, sizeof(msg), sig),
	    SL_ERR_INVALID);

	/* r or s zero, or at least the group order: never valid. */
	memset(sig2, 0, sizeof(sig2));
	assert_int_equal(signpub_verify(fx.p1, msg, sizeof(msg) - 1, sig2),
	    SL_ERR_INVALID);
	memset(sig2, 0xff, sizeof(sig2));
	assert_int_equal(signpub_verify(fx.p1, msg, sizeof(msg) - 1, sig2),
	    SL_ERR_INVALID);

	/* The empty message. */
	assert_int_equal(signkey_sign(fx.k1, NULL, 0, sig), 0);
	assert_int_equal(signpub_verify(fx.p1, NULL, 0, sig), 0);
	assert_int_equal(signpub_verify(fx.p1, msg, 1, sig), SL_ERR_INVALID);
}

/*
 * OpenSSL's own verdict on a raw r||s, with no code of signkey.c: DER
 * made here, the digest made here, EVP_PKEY_verify on it.
 */
static int
ossl_verify_raw(EVP_PKEY *pub, const uint8_t *msg, size_t len,
    const uint8_t raw[SIGNKEY_SIG_LEN])
{
	uint8_t dgst[32], *der = NULL;
	unsigned dlen = sizeof(dgst);
	BIGNUM *r, *s;
	EVP_PKEY_CTX *ctx;
	ECDSA_SIG *es;
	int n, ok;

	assert_int_equal(EVP_Digest(msg, len, dgst, &dlen, EVP_sha256(), NULL),
	    1);
	assert_non_null(es = ECDSA_SIG_new());
	assert_non_null(r = BN_bin2bn(raw, 32, NULL));
	assert_non_null(s = BN_bin2bn(raw + 32, 32, NULL));
	assert_int_equal(ECDSA_SIG_set0(es, r, s), 1);
	assert_true((n = i2d_ECDSA_SIG(es, &der)) > 0);
	assert_non_null(ctx = EVP_PKEY_CTX_new(pub, NULL));
	assert_int_equal(EVP_PKEY_verify_init(ctx), 1);
	ok = EVP_PKEY_verify(ctx, der, (size_t)n, dgst, dlen);
	EVP_PKEY_CTX_free(ctx);
	OPENSSL_free(der);
	ECDSA_SIG_free(es);
	return ok;
}

/*
 * r or s under 2^248 has a DER INTEGER shorter than 32 bytes: each
 * happens about once in 256 signatures.  The raw form must left-pad it.
 */
static void
test_sig_padding_sign(void **state)
{
	uint8_t sig[SIGNKEY_SIG_LEN], bad[SIGNKEY_SIG_LEN];
	char msg[64];
	int i, short_r = 0, short_s = 0;

	for (i = 0; i < 40000 && !(short_r && short_s); i++) {
		snprintf(msg, sizeof(msg), "padding %d", i);
		assert_int_equal(signkey_sign(fx.k1, (uint8_t *)msg,
		    strlen(msg), sig), 0);
		if (i < 50 || sig[0] == 0 || sig[32] == 0)
			assert_int_equal(ossl_verify_raw(fx.ossl_pub1,
			    (uint8_t *)msg, strlen(msg), sig), 1);
		if (sig[0] == 0 && !short_r) {
			short_r = 1;
			assert_int_equal(signpub_verify(fx.p1, (uint8_t *)msg,
			    strlen(msg), sig), 0);
			/* The test can tell: r right-padded is refused. */
			memcpy(bad, sig, sizeof(bad));
			memmove(bad, bad + 1, 31);
			bad[31] = 0;
			assert_int_not_equal(ossl_verify_raw(fx.ossl_pub1,
			    (uint8_t *)msg, strlen(msg), bad), 1);
		}
		if (sig[32] == 0 && !short_s) {
			short_s = 1;
			assert_int_equal(signpub_verify(fx.p1, (uint8_t *)msg,
			    strlen(msg), sig), 0);
		}
	}
	assert_true(short_r);
	assert_true(short_s);
}

/* The other way: OpenSSL's DER with a short r or s, padded here, verifies. */
static void
test_sig_padding_verify(void **state)
{
	uint8_t der[80], raw[SIGNKEY_SIG_LEN];
	const uint8_t *p;
	const BIGNUM *r, *s;
	EVP_PKEY *priv;
	EVP_MD_CTX *ctx;
	ECDSA_SIG *es;
	char path[128], msg[64];
	size_t dlen;
	FILE *f;
	int i, short_r = 0, short_s = 0;

	path_in(path, sizeof(path), fx.dir1, "signing.key");
	assert_non_null(f = fopen(path, "r"));
	assert_non_null(priv = PEM_read_PrivateKey(f, NULL, NULL, NULL));
	fclose(f);
	for (i = 0; i < 40000 && !(short_r && short_s); i++) {
		snprintf(msg, sizeof(msg), "der %d", i);
		assert_non_null(ctx = EVP_MD_CTX_new());
		assert_int_equal(EVP_DigestSignInit(ctx, NULL, EVP_sha256(),
		    NULL, priv), 1);
		dlen = sizeof(der);
		assert_int_equal(EVP_DigestSign(ctx, der, &dlen,
		    (uint8_t *)msg, strlen(msg)), 1);
		EVP_MD_CTX_free(ctx);
		p = der;
		assert_non_null(es = d2i_ECDSA_SIG(NULL, &p, (long)dlen));
		ECDSA_SIG_get0(es, &r, &s);
		if (i < 50 || BN_num_bytes(r) < 32 || BN_num_bytes(s) < 32) {
			assert_int_equal(BN_bn2binpad(r, raw, 32), 32);
			assert_int_equal(BN_bn2binpad(s, raw + 32, 32), 32);
			assert_int_equal(signpub_verify(fx.p1, (uint8_t *)msg,
			    strlen(msg), raw), 0);
		}
		short_r |= BN_num_bytes(r) < 32;
		short_s |= BN_num_bytes(s) < 32;
		ECDSA_SIG_free(es);
	}
	EVP_PKEY_free(priv);
	assert_true(short_r);
	assert_true(short_s);
}

/* Many threads, one key each way. */
static void *
worker(void *arg)
{
	struct jwt_claims c;
	uint8_t sig[SIGNKEY_SIG_LEN];
	char msg[64], tok[JWT_MAX], jti[JWT_JTI_LEN + 1];
	long n;
	int i, bad = 0;

	memset(&c, 0, sizeof(c));
	c.iss = "sluice";
	c.sandbox = "t";
	c.aud = "proxy";
	c.now = 1000;
	c.ttl = 10;
	for (i = 0; i < NTHREAD_SIGS; i++) {
		snprintf(msg, sizeof(msg), "thread %d msg %d", (int)(intptr_t)arg,
		    i);
		if (signkey_sign(fx.k1, (uint8_t *)msg, strlen(msg), sig) != 0 ||
		    signpub_verify(fx.p1, (uint8_t *)msg, strlen(msg), sig) != 0)
			bad++;
		if ((n = jwt_sign(fx.k1, &c, tok, sizeof(tok), jti)) <= 0 ||
		    jwt_verify(fx.p1, tok, (size_t)n, NULL) != 0)
			bad++;
	}
	return (void *)(intptr_t)bad;
}

static void
test_threads(void **state)
{
	pthread_t t[NTHREADS];
	void *ret;
	int i;

	for (i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, worker,
		    (void *)(intptr_t)i), 0);
	for (i = 0; i < NTHREADS; i++) {
		assert_int_equal(pthread_join(t[i], &ret), 0);
		assert_int_equal((intptr_t)ret, 0);
	}
}

/* RFC 4648 section 10, padding dropped; and the URL-safe alphabet. */
static void
test_b64url(void **state)
{
	static const struct {
		const char	*in, *out;
	} v[] = {
		{ "", "" }, { "f", "Zg" }, { "fo", "Zm8" }, { "foo", "Zm9v" },
		{ "foob", "Zm9vYg" }, { "fooba", "Zm9vYmE" },
		{ "foobar", "Zm9vYmFy" },
		{ "\xfb\xff", "-_8" }, { "\xfb\xef\xff", "--__" },
		{ "\x3e\x3f", "Pj8" },
	};
	char out[16];
	size_t i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		memset(out, 'Z', sizeof(out));
		assert_int_equal(jwt_b64url((const uint8_t *)v[i].in,
		    strlen(v[i].in), out, sizeof(out)), 0);
		assert_string_equal(out, v[i].out);
		/* Exactly the room it needs, and one byte less. */
		assert_int_equal(jwt_b64url((const uint8_t *)v[i].in,
		    strlen(v[i].in), out, strlen(v[i].out) + 1), 0);
		assert_string_equal(out, v[i].out);
		assert_int_equal(jwt_b64url((const uint8_t *)v[i].in,
		    strlen(v[i].in), out, strlen(v[i].out)), SL_ERR_TOO_BIG);
	}
}

static void
claims_init(struct jwt_claims *c)
{
	memset(c, 0, sizeof(*c));
	c->iss = "sluice:gw-1";
	c->sandbox = "sb-42";
	c->aud = "https://policy.example";
	c->team = "blue";
	c->project = "apollo";
	c->htm = "POST";
	c->htu = "https://api.example.com:8443/v1/x?y=1&z=\xc3\xa9";
	c->body_sha256 = "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU";
	c->now = 1764567000;
	c->ttl = 60;
}

/* Decodes a base64url part into a JSON value (NULL if either fails). */
static json_t *
part_json(const char *b64, size_t len)
{
	uint8_t buf[JWT_MAX];
	size_t n;

	if (sodium_base642bin(buf, sizeof(buf), b64, len, NULL, &n, NULL,
	    B64_URL) != 0)
		return NULL;
	return json_loadb((const char *)buf, n, 0, NULL);
}

static const char *
claim_str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	assert_non_null(s);
	return s;
}

static json_int_t
claim_int(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	assert_true(json_is_integer(v));
	return json_integer_value(v);
}

static void
test_jwt_roundtrip(void **state)
{
	struct jwt_claims c;
	char tok[JWT_MAX], jti[JWT_JTI_LEN + 1];
	const char *d1;
	json_t *cl = NULL, *h;
	long n;

	claims_init(&c);
	n = jwt_sign(fx.k1, &c, tok, sizeof(tok), jti);
	assert_true(n > 0);
	assert_int_equal(strlen(tok), (size_t)n);
	assert_true(is_b64url(jti, JWT_JTI_LEN));
	assert_int_equal(jwt_verify(fx.p1, tok, (size_t)n, &cl), 0);
	assert_int_equal(json_object_size(cl), 13);
	assert_string_equal(claim_str(cl, "iss"), c.iss);
	assert_string_equal(claim_str(cl, "sub"), "sandbox:sb-42");
	assert_string_equal(claim_str(cl, "aud"), c.aud);
	assert_int_equal(claim_int(cl, "iat"), c.now);
	assert_int_equal(claim_int(cl, "nbf"), c.now);
	assert_int_equal(claim_int(cl, "exp"), c.now + 60);
	assert_string_equal(claim_str(cl, "jti"), jti);
	assert_string_equal(claim_str(cl, "sandbox"), c.sandbox);
	assert_string_equal(claim_str(cl, "team"), c.team);
	assert_string_equal(claim_str(cl, "project"), c.project);
	assert_string_equal(claim_str(cl, "htm"), c.htm);
	assert_string_equal(claim_str(cl, "htu"), c.htu);
	assert_string_equal(claim_str(cl, "body_sha256"), c.body_sha256);
	json_decref(cl);
	assert_int_equal(jwt_verify(fx.p1, tok, (size_t)n, NULL), 0);
	assert_int_equal(jwt_verify(fx.p2, tok, (size_t)n, NULL),
	    SL_ERR_INVALID);

	/* The header, exactly. */
	assert_non_null(d1 = strchr(tok, '.'));
	assert_non_null(h = part_json(tok, (size_t)(d1 - tok)));
	assert_int_equal(json_object_size(h), 3);
	assert_string_equal(claim_str(h, "alg"), "ES256");
	assert_string_equal(claim_str(h, "typ"), "JWT");
	assert_string_equal(claim_str(h, "kid"), signkey_kid(fx.k1));
	json_decref(h);
}

/* Optional claims left out are not in the token at all. */
static void
test_jwt_optional(void **state)
{
	struct jwt_claims c;
	char tok[JWT_MAX], jti[JWT_JTI_LEN + 1];
	json_t *cl = NULL;
	long n;

	claims_init(&c);
	c.team = c.project = c.htm = c.htu = c.body_sha256 = NULL;
	c.ttl = 1;
	assert_true((n = jwt_sign(fx.k2, &c, tok, sizeof(tok), jti)) > 0);
	assert_int_equal(jwt_verify(fx.p2, tok, (size_t)n, &cl), 0);
	assert_int_equal(json_object_size(cl), 8);
	assert_null(json_object_get(cl, "team"));
	assert_null(json_object_get(cl, "htu"));
	assert_int_equal(claim_int(cl, "exp"), c.now + 1);
	json_decref(cl);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(a, b);
}

static void
test_jwt_jti_unique(void **state)
{
	static char jtis[NTOKENS][JWT_JTI_LEN + 1];
	struct jwt_claims c;
	char tok[JWT_MAX];
	json_t *cl;
	size_t i;
	long n;

	claims_init(&c);
	for (i = 0; i < NTOKENS; i++) {
		assert_true((n = jwt_sign(fx.k1, &c, tok, sizeof(tok),
		    jtis[i])) > 0);
		assert_true(is_b64url(jtis[i], JWT_JTI_LEN));
		if (i % 100 == 0) {
			assert_int_equal(jwt_verify(fx.p1, tok, (size_t)n,
			    &cl), 0);
			assert_string_equal(claim_str(cl, "jti"), jtis[i]);
			json_decref(cl);
		}
	}
	qsort(jtis, NTOKENS, sizeof(jtis[0]), cmp_str);
	for (i = 1; i < NTOKENS; i++)
		assert_string_not_equal(jtis[i - 1], jtis[i]);
}

/* A refused jwt_sign writes neither out nor jti. */
static void
sign_refused(const struct jwt_claims *c, size_t out_len, long err)
{
	char tok[JWT_MAX], jti[JWT_JTI_LEN + 1];
	size_t i;

	memset(tok, 'Z', sizeof(tok));
	memset(jti, 'Z', sizeof(jti));
	assert_int_equal(jwt_sign(fx.k1, c, tok, out_len, jti), err);
	for (i = 0; i < sizeof(tok); i++)
		assert_int_equal(tok[i], 'Z');
	for (i = 0; i < sizeof(jti); i++)
		assert_int_equal(jti[i], 'Z');
}

static void
test_jwt_sign_refusals(void **state)
{
	struct jwt_claims c;
	char tok[JWT_MAX], jti[JWT_JTI_LEN + 1], *huge;
	long n;

	claims_init(&c);
	c.iss = NULL;
	sign_refused(&c, JWT_MAX, SL_ERR_INVALID);
	c.iss = "";
	sign_refused(&c, JWT_MAX, SL_ERR_INVALID);
	claims_init(&c);
	c.sandbox = NULL;
	sign_refused(&c, JWT_MAX, SL_ERR_INVALID);
	c.sandbox = "";
	sign_refused(&c, JWT_MAX, SL_ERR_INVALID);
	claims_init(&c);
	c.aud = NULL;
	sign_refused(&c, JWT_MAX, SL_ERR_INVALID);
	c.aud = "";
	sign_refused(&c, JWT_MAX, SL_ERR_INVALID);
	claims_init(&c);
	c.ttl = 0;
	sign_refused(&c, JWT_MAX, SL_ERR_INVALID);
	claims_init(&c);
	c.now = -1;
	sign_refused(&c, JWT_MAX, SL_ERR_INVALID);
	c.now = (time_t)(INT64_MAX - 59);	/* exp would overflow */
	sign_refused(&c, JWT_MAX, SL_ERR_INVALID);
	c.now = (time_t)(INT64_MAX - 60);
	assert_true(jwt_sign(fx.k1, &c, tok, sizeof(tok), jti) > 0);
	claims_init(&c);
	c.team = "bad \xff utf-8";
	sign_refused(&c, JWT_MAX, SL_ERR_INVALID);
	sign_refused(NULL, JWT_MAX, SL_ERR_INVALID);
	assert_int_equal(jwt_sign(NULL, &c, tok, sizeof(tok), jti),
	    SL_ERR_INVALID);

	/* Too long for the caller's buffer, by one byte and by a lot. */
	claims_init(&c);
	assert_true((n = jwt_sign(fx.k1, &c, tok, sizeof(tok), jti)) > 0);
	sign_refused(&c, (size_t)n, SL_ERR_TOO_BIG);
	sign_refused(&c, 100, SL_ERR_TOO_BIG);
	sign_refused(&c, 0, SL_ERR_TOO_BIG);
	assert_true(jwt_sign(fx.k1, &c, tok, (size_t)n + 1, jti) == n);
	/* And for any token. */
	assert_non_null(huge = malloc(JWT_MAX));
	memset(huge, 'a', JWT_MAX - 1);
	huge[JWT_MAX - 1] = '\0';
	c.htu = huge;
	sign_refused(&c, JWT_MAX, SL_ERR_TOO_BIG);
	free(huge);
}

static void
verify_bad(const char *tok, size_t len)
{
	json_t *cl = (json_t *)&fx;

	assert_int_equal(jwt_verify(fx.p1, tok, len, &cl), SL_ERR_INVALID);
	assert_ptr_equal(cl, (json_t *)&fx);
}

static void
verify_bad_str(const char *tok)
{
	verify_bad(tok, strlen(tok));
}

/* A token of these header and payload JSON texts, signed by k. */
static void
craft(const struct signkey *k, const char *hdr, const char *pl, char *out,
    size_t len)
{
	uint8_t sig[SIGNKEY_SIG_LEN];
	size_t off;

	assert_int_equal(jwt_b64url((const uint8_t *)hdr, strlen(hdr), out,
	    len), 0);
	off = strlen(out);
	out[off++] = '.';
	assert_int_equal(jwt_b64url((const uint8_t *)pl, strlen(pl),
	    out + off, len - off), 0);
	off += strlen(out + off);
	assert_int_equal(signkey_sign(k, (uint8_t *)out, off, sig), 0);
	out[off++] = '.';
	assert_int_equal(jwt_b64url(sig, sizeof(sig), out + off, len - off),
	    0);
}

static void
test_jwt_tamper_chars(void **state)
{
	static const char alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "abcdefghijklmnopqrstuvwxyz0123456789-_";
	static const char odd[] = "=+/ \n\t%*";
	struct jwt_claims c;
	char tok[JWT_MAX], t[JWT_MAX], jti[JWT_JTI_LEN + 1], *p;
	size_t i, j, len;
	long n;

	claims_init(&c);
	assert_true((n = jwt_sign(fx.k1, &c, tok, sizeof(tok), jti)) > 0);
	len = (size_t)n;
	/*
	 * Any one character changed is refused: another letter changes the
	 * bytes (or sets bits a strict decoder refuses), a character outside
	 * the alphabet is not base64url.
	 */
	for (i = 0; i < len; i++) {
		if (tok[i] == '.')
			continue;
		memcpy(t, tok, len + 1);
		p = strchr(alpha, tok[i]);
		assert_non_null(p);
		t[i] = alpha[(size_t)(p - alpha + 1 + i % 63) % 64];
		verify_bad(t, len);
		for (j = 0; j < sizeof(odd) - 1; j++) {
			t[i] = odd[j];
			verify_bad(t, len);
		}
	}
	/* Cut short anywhere, or longer. */
	for (i = 0; i < len; i++)
		verify_bad(tok, i);
	memcpy(t, tok, len + 1);
	verify_bad(t, len + 1);		/* a NUL inside */
	for (j = 0; j < sizeof(odd) - 1; j++) {
		memcpy(t, tok, len);
		t[len] = odd[j];
		t[len + 1] = '\0';
		verify_bad_str(t);
	}
	assert_int_equal(jwt_verify(fx.p1, tok, len, NULL), 0);
}

/* Decodes part k of tok, flips bit bit of it, encodes it back in t. */
static void
flip_in_part(const char *tok, int k, size_t bit, char *t, size_t tlen)
{
	uint8_t buf[JWT_MAX];
	const char *s = tok, *e;
	char enc[JWT_MAX];
	size_t n, off;
	int i;

	for (i = 0; i < k; i++)
		s = strchr(s, '.') + 1;
	e = strchr(s, '.');
	if (e == NULL)
		e = s + strlen(s);
	assert_int_equal(sodium_base642bin(buf, sizeof(buf), s, (size_t)(e - s),
	    NULL, &n, NULL, B64_URL), 0);
	assert_true(bit / 8 < n);
	buf[bit / 8] ^= 1u << (bit % 8);
	assert_int_equal(jwt_b64url(buf, n, enc, sizeof(enc)), 0);
	off = (size_t)(s - tok);
	assert_true(off + strlen(enc) + strlen(e) < tlen);
	memcpy(t, tok, off);
	snprintf(t + off, tlen - off, "%s%s", enc, e);
}

static void
test_jwt_tamper_bytes(void **state)
{
	struct jwt_claims c;
	char tok[JWT_MAX], t[JWT_MAX], jti[JWT_JTI_LEN + 1];
	uint8_t buf[JWT_MAX];
	size_t i, hlen, plen;
	long n;

	claims_init(&c);
	assert_true((n = jwt_sign(fx.k1, &c, tok, sizeof(tok), jti)) > 0);
	assert_int_equal(sodium_base642bin(buf, sizeof(buf), tok,
	    (size_t)(strchr(tok, '.') - tok), NULL, &hlen, NULL, B64_URL), 0);
	assert_int_equal(sodium_base642bin(buf, sizeof(buf),
	    strchr(tok, '.') + 1, (size_t)(strrchr(tok, '.') -
	    strchr(tok, '.') - 1), NULL, &plen, NULL, B64_URL), 0);
	/* Every bit of the signature, payload and header. */
	for (i = 0; i < 8 * SIGNKEY_SIG_LEN; i++) {
		flip_in_part(tok, 2, i, t, sizeof(t));
		verify_bad_str(t);
	}
	for (i = 0; i < 8 * plen; i++) {
		flip_in_part(tok, 1, i, t, sizeof(t));
		verify_bad_str(t);
	}
	for (i = 0; i < 8 * hlen; i++) {
		flip_in_part(tok, 0, i, t, sizeof(t));
		verify_bad_str(t);
	}
}

/* A token text made from parts, asserting it fits. */
static void mk(char *t, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
mk(char *t, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(t, len, fmt, ap);
	va_end(ap);
	assert_true(n >= 0 && (size_t)n < len);
}

/* The parts of tok: *h and *p as base64url, copies NUL-terminated. */
static void
parts_of(const char *tok, char *h, char *p, char *sig, size_t len)
{
	const char *d1 = strchr(tok, '.'), *d2 = strrchr(tok, '.');

	assert_true(d1 != NULL && d2 != NULL && d1 != d2);
	snprintf(h, len, "%.*s", (int)(d1 - tok), tok);
	snprintf(p, len, "%.*s", (int)(d2 - d1 - 1), d1 + 1);
	snprintf(sig, len, "%s", d2 + 1);
}

/* "alg":"none", and HS256 keyed with what an attacker knows. */
static void
test_jwt_alg_confusion(void **state)
{
	struct jwt_claims c;
	char tok[JWT_MAX], t[JWT_MAX], jti[JWT_JTI_LEN + 1], hdr[512];
	char h[JWT_MAX], p[JWT_MAX], s[JWT_MAX], hb[1024], mb[64];
	const char *kid = signpub_kid(fx.p1);
	uint8_t mac[EVP_MAX_MD_SIZE];
	unsigned maclen;
	char *pem;
	long n;

	claims_init(&c);
	assert_true((n = jwt_sign(fx.k1, &c, tok, sizeof(tok), jti)) > 0);
	parts_of(tok, h, p, s, JWT_MAX);

	snprintf(hdr, sizeof(hdr), "{\"alg\":\"none\",\"typ\":\"JWT\","
	    "\"kid\":\"%s\"}", kid);
	assert_int_equal(jwt_b64url((uint8_t *)hdr, strlen(hdr), hb,
	    sizeof(hb)), 0);
	mk(t, sizeof(t), "%s.%s.", hb, p);
	verify_bad_str(t);
	mk(t, sizeof(t), "%s.%s", hb, p);
	verify_bad_str(t);
	mk(t, sizeof(t), "%s.%s.%s", hb, p, s);
	verify_bad_str(t);

	/* HS256 with the public key's PEM, or its kid, as the secret. */
	snprintf(hdr, sizeof(hdr), "{\"alg\":\"HS256\",\"typ\":\"JWT\","
	    "\"kid\":\"%s\"}", kid);
	assert_int_equal(jwt_b64url((uint8_t *)hdr, strlen(hdr), hb,
	    sizeof(hb)), 0);
	mk(t, sizeof(t), "%s.%s", hb, p);
	pem = pem_of(fx.ossl_pub1, 0, NULL);
	assert_non_null(HMAC(EVP_sha256(), pem, (int)strlen(pem),
	    (uint8_t *)t, strlen(t), mac, &maclen));
	free(pem);
	assert_int_equal(jwt_b64url(mac, maclen, mb, sizeof(mb)), 0);
	mk(t, sizeof(t), "%s.%s.%s", hb, p, mb);
	verify_bad_str(t);
	mk(t, sizeof(t), "%s.%s", hb, p);
	assert_non_null(HMAC(EVP_sha256(), kid, (int)strlen(kid),
	    (uint8_t *)t, strlen(t), mac, &maclen));
	assert_int_equal(jwt_b64url(mac, maclen, mb, sizeof(mb)), 0);
	mk(t, sizeof(t), "%s.%s.%s", hb, p, mb);
	verify_bad_str(t);
	/* HS256 named, our valid ES256 signature: the header is signed. */
	mk(t, sizeof(t), "%s.%s.%s", hb, p, s);
	verify_bad_str(t);
}

/* tmpl with its "@KID@" (if any) replaced by kid. */
static void
subst_kid(char *out, size_t len, const char *tmpl, const char *kid)
{
	const char *at = strstr(tmpl, "@KID@");

	if (at == NULL) {
		assert_true((size_t)snprintf(out, len, "%s", tmpl) < len);
		return;
	}
	assert_true((size_t)snprintf(out, len, "%.*s%s%s", (int)(at - tmpl),
	    tmpl, kid, at + 5) < len);
}

/* Headers signed with our key but saying what we do not accept. */
static void
test_jwt_header_rules(void **state)
{
	static const char *const bad[] = {
		"{\"alg\":\"ES256\"}",				/* no kid */
		"{\"alg\":\"ES256\",\"kid\":\"@KID@\",\"crit\":[\"exp\"]}",
		"{\"alg\":\"ES256\",\"kid\":\"@KID@\",\"crit\":[]}",
		"{\"alg\":\"es256\",\"kid\":\"@KID@\"}",
		"{\"alg\":\"ES384\",\"kid\":\"@KID@\"}",
		"{\"alg\":\"none\",\"kid\":\"@KID@\"}",
		"{\"alg\":[\"ES256\"],\"kid\":\"@KID@\"}",
		"{\"kid\":\"@KID@\"}",
		"{\"alg\":\"ES256\",\"kid\":\"@KID@\",\"alg\":\"none\"}",
		"{\"alg\":\"ES256\",\"kid\":\"@KID@x\"}",
		"{\"alg\":\"ES256\",\"kid\":[\"@KID@\"]}",
		"[\"ES256\",\"@KID@\"]",
		"{\"alg\":\"ES256\",\"kid\":\"@KID@\"}x",
		"",
	};
	static const char *const bad_payload[] = {
		"[]", "\"x\"", "1", "{\"sub\":\"a\",\"sub\":\"b\"}",
		"{\"sub\":\"a\"", "{}{}", "{\"a\":\"\\u0000\"}", "",
	};
	char hdr[512], t[JWT_MAX];
	const char *kid = signpub_kid(fx.p1);
	json_t *cl = NULL;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		subst_kid(hdr, sizeof(hdr), bad[i], kid);
		craft(fx.k1, hdr, "{\"sub\":\"x\"}", t, sizeof(t));
		verify_bad_str(t);
	}
	subst_kid(hdr, sizeof(hdr), "{\"alg\":\"ES256\",\"kid\":\"@KID@\"}",
	    kid);
	for (i = 0; i < sizeof(bad_payload) / sizeof(bad_payload[0]); i++) {
		craft(fx.k1, hdr, bad_payload[i], t, sizeof(t));
		verify_bad_str(t);
	}
	/* The crafting is sound: the same way, acceptable parts pass. */
	craft(fx.k1, hdr, "{\"sub\":\"x\"}", t, sizeof(t));
	assert_int_equal(jwt_verify(fx.p1, t, strlen(t), &cl), 0);
	assert_string_equal(claim_str(cl, "sub"), "x");
	json_decref(cl);
	/* Another key's token, and ours under another key's kid. */
	craft(fx.k2, hdr, "{\"sub\":\"x\"}", t, sizeof(t));
	verify_bad_str(t);
	subst_kid(hdr, sizeof(hdr), "{\"alg\":\"ES256\",\"kid\":\"@KID@\"}",
	    signpub_kid(fx.p2));
	craft(fx.k1, hdr, "{\"sub\":\"x\"}", t, sizeof(t));
	verify_bad_str(t);
	assert_int_equal(jwt_verify(fx.p2, t, strlen(t), NULL),
	    SL_ERR_INVALID);
}

/* Two or four parts, empty parts, padding, a signature of a wrong size. */
static void
test_jwt_structure(void **state)
{
	struct jwt_claims c;
	char tok[JWT_MAX], t[JWT_MAX], jti[JWT_JTI_LEN + 1];
	char h[JWT_MAX], p[JWT_MAX], s[JWT_MAX], sb[128];
	uint8_t sig[SIGNKEY_SIG_LEN + 1];
	size_t n;
	long len;
	int v;

	claims_init(&c);
	assert_true((len = jwt_sign(fx.k1, &c, tok, sizeof(tok), jti)) > 0);
	parts_of(tok, h, p, s, JWT_MAX);
	assert_int_equal(strlen(s), 86);

	mk(t, sizeof(t), "%s.%s", h, p);
	verify_bad_str(t);
	mk(t, sizeof(t), "%s.%s.%s.", h, p, s);
	verify_bad_str(t);
	mk(t, sizeof(t), "%s.%s.%s.%s", h, p, s, s);
	verify_bad_str(t);
	mk(t, sizeof(t), "%s.%s.%s.%s", h, p, p, s);
	verify_bad_str(t);
	mk(t, sizeof(t), ".%s.%s", p, s);
	verify_bad_str(t);
	mk(t, sizeof(t), "%s..%s", h, s);
	verify_bad_str(t);
	mk(t, sizeof(t), "%s.%s..%s", h, p, s);
	verify_bad_str(t);
	verify_bad_str("..");
	verify_bad_str(".");
	verify_bad_str("");
	verify_bad(NULL, 0);
	assert_int_equal(jwt_verify(NULL, tok, (size_t)len, NULL),
	    SL_ERR_INVALID);

	/* Padding, anywhere a decoder might skip it. */
	mk(t, sizeof(t), "%s=.%s.%s", h, p, s);
	verify_bad_str(t);
	mk(t, sizeof(t), "%s.%s=.%s", h, p, s);
	verify_bad_str(t);
	mk(t, sizeof(t), "%s.%s.%s==", h, p, s);
	verify_bad_str(t);
	mk(t, sizeof(t), "%s.%s.%s=", h, p, s);
	verify_bad_str(t);

	/* 64 bytes make 86 characters, the last one with 4 unused bits. */
	assert_int_equal(sodium_base642bin(sig, sizeof(sig), s, strlen(s),
	    NULL, &n, NULL, B64_URL), 0);
	assert_int_equal(n, SIGNKEY_SIG_LEN);
	memcpy(sb, s, strlen(s) + 1);
	v = (int)(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789-_", sb[85]) - "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "abcdefghijklmnopqrstuvwxyz0123456789-_");
	assert_int_equal(v & 0x0f, 0);
	sb[85] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789-_"[v | 1];
	mk(t, sizeof(t), "%s.%s.%s", h, p, sb);
	verify_bad_str(t);

	/* One byte short, one byte more. */
	assert_int_equal(jwt_b64url(sig, SIGNKEY_SIG_LEN - 1, sb, sizeof(sb)),
	    0);
	mk(t, sizeof(t), "%s.%s.%s", h, p, sb);
	verify_bad_str(t);
	sig[SIGNKEY_SIG_LEN] = 0;
	assert_int_equal(jwt_b64url(sig, SIGNKEY_SIG_LEN + 1, sb, sizeof(sb)),
	    0);
	mk(t, sizeof(t), "%s.%s.%s", h, p, sb);
	verify_bad_str(t);

	/* The bound: a token of JWT_MAX bytes is refused unread. */
	verify_bad(tok, JWT_MAX);
	assert_int_equal(jwt_verify(fx.p1, tok, (size_t)len, NULL), 0);
}

/* x and y of an OpenSSL key, 32 bytes each. */
static void
ossl_xy(EVP_PKEY *pkey, uint8_t x[32], uint8_t y[32])
{
	BIGNUM *bx = NULL, *by = NULL;

	assert_int_equal(EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_EC_PUB_X,
	    &bx), 1);
	assert_int_equal(EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_EC_PUB_Y,
	    &by), 1);
	assert_int_equal(BN_bn2binpad(bx, x, 32), 32);
	assert_int_equal(BN_bn2binpad(by, y, 32), 32);
	BN_free(bx);
	BN_free(by);
}

static void
b64_32(const char *s, uint8_t out[32])
{
	uint8_t buf[64];
	size_t n;

	assert_non_null(s);
	assert_int_equal(sodium_base642bin(buf, sizeof(buf), s, strlen(s),
	    NULL, &n, NULL, B64_URL), 0);
	assert_int_equal(n, 32);
	memcpy(out, buf, 32);
}

static void
test_jwks(void **state)
{
	struct signpub *pubs[4] = { fx.p1, fx.p2, fx.p1, NULL };
	uint8_t x[32], y[32], ox[32], oy[32], h[32];
	char json[256], kid[SIGNKEY_KID_MAX];
	unsigned hlen = sizeof(h);
	const char *xs, *ys;
	json_t *jwks, *keys, *k;
	size_t i;

	assert_non_null(jwks = jwt_jwks(pubs, 4));
	assert_int_equal(json_object_size(jwks), 1);
	assert_true(json_is_array(keys = json_object_get(jwks, "keys")));
	assert_int_equal(json_array_size(keys), 2);
	json_array_foreach(keys, i, k) {
		assert_int_equal(json_object_size(k), 7);
		assert_string_equal(claim_str(k, "kty"), "EC");
		assert_string_equal(claim_str(k, "crv"), "P-256");
		assert_string_equal(claim_str(k, "use"), "sig");
		assert_string_equal(claim_str(k, "alg"), "ES256");
		assert_string_equal(claim_str(k, "kid"), signpub_kid(pubs[i]));
		b64_32(xs = claim_str(k, "x"), x);
		b64_32(ys = claim_str(k, "y"), y);
		/* The thumbprint again, from the JWK as a verifier sees it. */
		snprintf(json, sizeof(json), "{\"crv\":\"P-256\",\"kty\":"
		    "\"EC\",\"x\":\"%s\",\"y\":\"%s\"}", xs, ys);
		assert_int_equal(EVP_Digest(json, strlen(json), h, &hlen,
		    EVP_sha256(), NULL), 1);
		assert_int_equal(jwt_b64url(h, sizeof(h), kid, sizeof(kid)), 0);
		assert_string_equal(claim_str(k, "kid"), kid);
	}
	/* The first is signing.pub as OpenSSL reads it. */
	ossl_xy(fx.ossl_pub1, ox, oy);
	b64_32(claim_str(json_array_get(keys, 0), "x"), x);
	b64_32(claim_str(json_array_get(keys, 0), "y"), y);
	assert_memory_equal(x, ox, 32);
	assert_memory_equal(y, oy, 32);
	json_decref(jwks);

	assert_non_null(jwks = jwt_jwks(NULL, 0));
	assert_int_equal(json_array_size(json_object_get(jwks, "keys")), 0);
	json_decref(jwks);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load_keygen),
		cmocka_unit_test(test_load_mode_refusals),
		cmocka_unit_test(test_load_kind_refusals),
		cmocka_unit_test(test_load_garbage),
		cmocka_unit_test(test_load_owner),
		cmocka_unit_test(test_kid_fixture),
		cmocka_unit_test(test_sign_verify),
		cmocka_unit_test(test_sig_padding_sign),
		cmocka_unit_test(test_sig_padding_verify),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_b64url),
		cmocka_unit_test(test_jwt_roundtrip),
		cmocka_unit_test(test_jwt_optional),
		cmocka_unit_test(test_jwt_jti_unique),
		cmocka_unit_test(test_jwt_sign_refusals),
		cmocka_unit_test(test_jwt_tamper_chars),
		cmocka_unit_test(test_jwt_tamper_bytes),
		cmocka_unit_test(test_jwt_alg_confusion),
		cmocka_unit_test(test_jwt_header_rules),
		cmocka_unit_test(test_jwt_structure),
		cmocka_unit_test(test_jwks),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
