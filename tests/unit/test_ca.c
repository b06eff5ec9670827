/* test_ca.c: the per-sandbox CA and the leaves it mints. */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sodium.h>

#include "util/err.h"
#include "keys/ca.h"

#define DAY	86400u

static struct ca *
new_ca(const char *id, const char *const *names, size_t n, unsigned v)
{
	struct ca *ca = NULL;

	assert_int_equal(ca_new(id, names, n, v, &ca), 0);
	assert_non_null(ca);
	return ca;
}

static X509 *
mint(struct ca *ca, const char *host, EVP_PKEY *key, unsigned v)
{
	X509 *leaf = NULL;

	assert_int_equal(ca_mint_leaf(ca, host, key, v, &leaf), 0);
	assert_non_null(leaf);
	return leaf;
}

/* X509_verify_cert of leaf against cacert alone, checking host. */
static int
verify(X509 *cacert, X509 *leaf, const char *host)
{
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	int ok, err;

	assert_non_null(store);
	assert_non_null(ctx);
	assert_int_equal(X509_STORE_add_cert(store, cacert), 1);
	assert_int_equal(X509_STORE_CTX_init(ctx, store, leaf, NULL), 1);
	assert_int_equal(X509_VERIFY_PARAM_set1_host(
	    X509_STORE_CTX_get0_param(ctx), host, 0), 1);
	ok = X509_verify_cert(ctx);
	err = X509_STORE_CTX_get_error(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	if (ok == 1)
		assert_int_equal(err, X509_V_OK);
	else
		assert_int_not_equal(err, X509_V_OK);
	return err;
}

/* Seconds from now to t (negative if past). */
static long
secs_from_now(const ASN1_TIME *t)
{
	int days = 0, secs = 0;

	assert_int_equal(ASN1_TIME_diff(&days, &secs, NULL, t), 1);
	return (long)days * 86400 + secs;
}

/* A serial is positive, at most 127 bits (16 DER octets), and random. */
static void
assert_serial_ok(const X509 *x)
{
	BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);

	assert_non_null(bn);
	assert_false(BN_is_negative(bn));
	assert_true(BN_num_bits(bn) <= 127);
	assert_true(BN_num_bits(bn) >= 64);
	BN_free(bn);
}

static int
ext_critical(X509 *x, int nid)
{
	int i = X509_get_ext_by_NID(x, nid, -1);

	assert_true(i >= 0);
	return X509_EXTENSION_get_critical(X509_get_ext(x, i));
}

static void
test_ca_cert(void **state)
{
	struct ca *ca;
	X509 *x;
	BASIC_CONSTRAINTS *bc;
	EVP_PKEY *pub;
	const ASN1_INTEGER *serial;
	char cn[128], o[32], group[32];
	size_t glen = 0;
	int crit = -1;

	(void)state;
	ca = new_ca("sb-42", NULL, 0, 7 * DAY);
	x = ca_cert(ca);
	assert_non_null(x);
	assert_int_equal(X509_get_version(x), X509_VERSION_3);

	bc = X509_get_ext_d2i(x, NID_basic_constraints, &crit, NULL);
	assert_non_null(bc);
	assert_int_equal(crit, 1);
	assert_true(bc->ca);
	assert_non_null(bc->pathlen);
	assert_int_equal(ASN1_INTEGER_get(bc->pathlen), 0);
	BASIC_CONSTRAINTS_free(bc);

	assert_true(X509_get_key_usage(x) & KU_KEY_CERT_SIGN);
	assert_true(X509_get_key_usage(x) & KU_CRL_SIGN);
	assert_false(X509_get_key_usage(x) & KU_DIGITAL_SIGNATURE);
	assert_int_equal(ext_critical(x, NID_key_usage), 1);
	assert_non_null(X509_get0_subject_key_id(x));
	assert_int_equal(X509_get_ext_by_NID(x, NID_name_constraints, -1),
	    -1);

	assert_true(X509_NAME_get_text_by_NID(X509_get_subject_name(x),
	    NID_commonName, cn, sizeof(cn)) > 0);
	assert_string_equal(cn, "sluice sandbox sb-42 CA");
	assert_true(X509_NAME_get_text_by_NID(X509_get_subject_name(x),
	    NID_organizationName, o, sizeof(o)) > 0);
	assert_string_equal(o, "sluice");
	assert_int_equal(X509_NAME_cmp(X509_get_subject_name(x),
	    X509_get_issuer_name(x)), 0);

	assert_true(labs(secs_from_now(X509_get0_notAfter(x)) -
	    (long)(7 * DAY)) <= 7200);
	assert_true(labs(secs_from_now(X509_get0_notBefore(x)) + 3600) <=
	    7200);

	serial = X509_get0_serialNumber(x);
	assert_int_equal(ASN1_STRING_type(serial), V_ASN1_INTEGER);
	assert_int_equal(ASN1_STRING_length(serial), 16);
	assert_serial_ok(x);

	pub = X509_get0_pubkey(x);
	assert_non_null(pub);
	assert_true(EVP_PKEY_is_a(pub, "EC"));
	assert_int_equal(EVP_PKEY_get_bits(pub), 256);
	assert_int_equal(EVP_PKEY_get_group_name(pub, group, sizeof(group),
	    &glen), 1);
	assert_string_equal(group, "prime256v1");
	assert_int_equal(X509_verify(x, pub), 1);
	assert_int_equal(X509_get_signature_nid(x),
	    NID_ecdsa_with_SHA256);
	ca_free(ca);
}

static void
test_ca_pem_roundtrip(void **state)
{
	struct ca *ca;
	char *pem;
	size_t len = 0;
	BIO *bio;
	X509 *back;

	(void)state;
	ca = new_ca("sb-pem", NULL, 0, DAY);
	pem = ca_cert_pem(ca, &len);
	assert_non_null(pem);
	assert_int_equal(strlen(pem), len);
	assert_non_null(strstr(pem, "-----BEGIN CERTIFICATE-----"));
	assert_null(strstr(pem, "PRIVATE"));
	bio = BIO_new_mem_buf(pem, (int)len);
	assert_non_null(bio);
	back = PEM_read_bio_X509(bio, NULL, NULL, NULL);
	assert_non_null(back);
	assert_int_equal(X509_cmp(back, ca_cert(ca)), 0);
	X509_free(back);
	BIO_free(bio);
	free(pem);
	ca_free(ca);
}

/* A CA taken away (cert, exported key) and loaded again signs the same. */
static void
test_ca_export_load(void **state)
{
	struct ca *ca, *back = NULL, *other;
	char *pem, *pem2, *key, *key2;
	size_t len, klen, klen2;
	EVP_PKEY *lk;
	X509 *leaf;

	(void)state;
	ca = new_ca("sb-keep", NULL, 0, DAY);
	other = new_ca("sb-other", NULL, 0, DAY);
	assert_non_null(pem = ca_cert_pem(ca, &len));
	assert_int_equal(ca_key_export(ca, &key, &klen), 0);
	assert_int_equal(strlen(key), klen);
	assert_null(strchr(key, '\n'));
	assert_int_equal(ca_load(pem, len, key, klen, &back), 0);
	assert_int_equal(X509_cmp(ca_cert(back), ca_cert(ca)), 0);
	/* What the loaded one mints verifies against the original's cert. */
	assert_int_equal(ca_new_leaf_key(&lk), 0);
	leaf = mint(back, "api.example.com", lk, DAY);
	assert_int_equal(verify(ca_cert(ca), leaf, "api.example.com"), X509_V_OK);
	X509_free(leaf);
	/* Its export is the same key. */
	assert_int_equal(ca_key_export(back, &key2, &klen2), 0);
	assert_int_equal(klen2, klen);
	assert_memory_equal(key2, key, klen);
	sodium_free(key2);
	ca_free(back);
	/* Another CA's key, a cut key, garbage: refused. */
	assert_int_equal(ca_key_export(other, &key2, &klen2), 0);
	back = NULL;
	assert_int_equal(ca_load(pem, len, key2, klen2, &back), SL_ERR_INVALID);
	assert_null(back);
	assert_int_equal(ca_load(pem, len, key, klen / 2, &back),
	    SL_ERR_INVALID);
	assert_int_equal(ca_load(pem, len, "not base64!", 11, &back),
	    SL_ERR_INVALID);
	assert_non_null(pem2 = ca_cert_pem(other, &len));
	assert_int_equal(ca_load(pem2, len / 2, key2, klen2, &back),
	    SL_ERR_INVALID);
	assert_null(back);
	free(pem2);
	sodium_free(key2);
	sodium_free(key);
	free(pem);
	EVP_PKEY_free(lk);
	ca_free(other);
	ca_free(ca);
}

static void
test_leaf(void **state)
{
	struct ca *ca;
	EVP_PKEY *key = NULL;
	X509 *leaf;
	GENERAL_NAMES *san;
	const GENERAL_NAME *gn;
	BASIC_CONSTRAINTS *bc;
	char cn[128];
	int crit = -1;

	(void)state;
	ca = new_ca("sb-leaf", NULL, 0, 30 * DAY);
	assert_int_equal(ca_new_leaf_key(&key), 0);
	leaf = mint(ca, "api.example.test", key, DAY);

	assert_int_equal(verify(ca_cert(ca), leaf, "api.example.test"),
	    X509_V_OK);
	assert_int_equal(verify(ca_cert(ca), leaf, "other.test"),
	    X509_V_ERR_HOSTNAME_MISMATCH);

	san = X509_get_ext_d2i(leaf, NID_subject_alt_name, &crit, NULL);
	assert_non_null(san);
	assert_int_equal(sk_GENERAL_NAME_num(san), 1);
	gn = sk_GENERAL_NAME_value(san, 0);
	assert_int_equal(gn->type, GEN_DNS);
	assert_int_equal(ASN1_STRING_length(gn->d.dNSName),
	    strlen("api.example.test"));
	assert_memory_equal(ASN1_STRING_get0_data(gn->d.dNSName),
	    "api.example.test", strlen("api.example.test"));
	GENERAL_NAMES_free(san);

	bc = X509_get_ext_d2i(leaf, NID_basic_constraints, &crit, NULL);
	assert_non_null(bc);
	assert_false(bc->ca);
	assert_int_equal(crit, 1);
	BASIC_CONSTRAINTS_free(bc);
	assert_int_equal(X509_check_ca(leaf), 0);

	assert_true(X509_get_extended_key_usage(leaf) & XKU_SSL_SERVER);
	assert_true(X509_get_key_usage(leaf) & KU_DIGITAL_SIGNATURE);
	assert_false(X509_get_key_usage(leaf) & KU_KEY_CERT_SIGN);
	assert_true(X509_NAME_get_text_by_NID(X509_get_subject_name(leaf),
	    NID_commonName, cn, sizeof(cn)) > 0);
	assert_string_equal(cn, "api.example.test");
	assert_int_equal(X509_NAME_cmp(X509_get_issuer_name(leaf),
	    X509_get_subject_name(ca_cert(ca))), 0);
	assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(leaf), key), 1);
	assert_int_equal(X509_get_signature_nid(leaf),
	    NID_ecdsa_with_SHA256);
	assert_true(labs(secs_from_now(X509_get0_notAfter(leaf)) -
	    (long)DAY) <= 7200);
	assert_int_not_equal(ASN1_INTEGER_cmp(X509_get0_serialNumber(leaf),
	    X509_get0_serialNumber(ca_cert(ca))), 0);

	X509_free(leaf);
	EVP_PKEY_free(key);
	ca_free(ca);
}

static void
test_leaf_clamped(void **state)
{
	struct ca *ca;
	EVP_PKEY *key = NULL;
	X509 *leaf;
	int i;

	(void)state;
	ca = new_ca("sb-clamp", NULL, 0, 2 * DAY);
	assert_int_equal(ca_new_leaf_key(&key), 0);

	/* Serials: each one's top bit is clear (1 in 2^16 to miss it). */
	for (i = 0; i < 16; i++) {
		leaf = mint(ca, "serial.example.test", key, DAY);
		assert_serial_ok(leaf);
		X509_free(leaf);
	}

	leaf = mint(ca, "long.example.test", key, 365 * DAY);
	assert_int_equal(ASN1_TIME_compare(X509_get0_notAfter(leaf),
	    X509_get0_notAfter(ca_cert(ca))), 0);
	assert_true(ASN1_TIME_compare(X509_get0_notBefore(leaf),
	    X509_get0_notBefore(ca_cert(ca))) >= 0);
	assert_int_equal(verify(ca_cert(ca), leaf, "long.example.test"),
	    X509_V_OK);
	X509_free(leaf);

	/* A shorter leaf keeps its own, earlier, notAfter. */
	leaf = mint(ca, "short.example.test", key, 3600);
	assert_true(ASN1_TIME_compare(X509_get0_notAfter(leaf),
	    X509_get0_notAfter(ca_cert(ca))) < 0);
	assert_true(labs(secs_from_now(X509_get0_notAfter(leaf)) - 3600) <=
	    7200);
	X509_free(leaf);

	EVP_PKEY_free(key);
	ca_free(ca);
}

static void
test_name_constraints(void **state)
{
	static const char *const names[] = {
		"api.example.test", "*.githubusercontent.test"
	};
	struct ca *ca;
	EVP_PKEY *key = NULL;
	X509 *leaf;
	NAME_CONSTRAINTS *nc;
	int crit = -1;

	(void)state;
	ca = new_ca("sb-nc", names, 2, DAY);
	nc = X509_get_ext_d2i(ca_cert(ca), NID_name_constraints, &crit,
	    NULL);
	assert_non_null(nc);
	assert_int_equal(crit, 1);
	assert_int_equal(sk_GENERAL_SUBTREE_num(nc->permittedSubtrees), 2);
	assert_null(nc->excludedSubtrees);
	NAME_CONSTRAINTS_free(nc);

	assert_int_equal(ca_new_leaf_key(&key), 0);

	leaf = mint(ca, "raw.githubusercontent.test", key, DAY);
	assert_int_equal(verify(ca_cert(ca), leaf,
	    "raw.githubusercontent.test"), X509_V_OK);
	X509_free(leaf);

	leaf = mint(ca, "api.example.test", key, DAY);
	assert_int_equal(verify(ca_cert(ca), leaf, "api.example.test"),
	    X509_V_OK);
	X509_free(leaf);

	/* The apex of a "*." pattern: RFC 5280 cannot exclude it. */
	leaf = mint(ca, "githubusercontent.test", key, DAY);
	assert_int_equal(verify(ca_cert(ca), leaf,
	    "githubusercontent.test"), X509_V_OK);
	X509_free(leaf);

	leaf = mint(ca, "evil.test", key, DAY);
	assert_int_equal(verify(ca_cert(ca), leaf, "evil.test"),
	    X509_V_ERR_PERMITTED_VIOLATION);
	X509_free(leaf);

	/* An exact name does not permit siblings or its parent. */
	leaf = mint(ca, "example.test", key, DAY);
	assert_int_equal(verify(ca_cert(ca), leaf, "example.test"),
	    X509_V_ERR_PERMITTED_VIOLATION);
	X509_free(leaf);

	EVP_PKEY_free(key);
	ca_free(ca);
}

static void
test_two_cas_differ(void **state)
{
	struct ca *a, *b;
	EVP_PKEY *key = NULL;
	X509 *leaf;

	(void)state;
	a = new_ca("sb-same", NULL, 0, DAY);
	b = new_ca("sb-same", NULL, 0, DAY);
	assert_int_not_equal(ASN1_INTEGER_cmp(
	    X509_get0_serialNumber(ca_cert(a)),
	    X509_get0_serialNumber(ca_cert(b))), 0);
	assert_int_not_equal(EVP_PKEY_eq(X509_get0_pubkey(ca_cert(a)),
	    X509_get0_pubkey(ca_cert(b))), 1);

	assert_int_equal(ca_new_leaf_key(&key), 0);
	leaf = mint(a, "api.example.test", key, DAY);
	assert_int_equal(verify(ca_cert(a), leaf, "api.example.test"),
	    X509_V_OK);
	assert_int_not_equal(verify(ca_cert(b), leaf, "api.example.test"),
	    X509_V_OK);
	assert_int_not_equal(X509_verify(leaf, X509_get0_pubkey(ca_cert(b))),
	    1);
	X509_free(leaf);

	EVP_PKEY_free(key);
	ca_free(a);
	ca_free(b);
}

static void
test_invalid_input(void **state)
{
	static const char *const bad_names[] = { "ok.test", "a,DNS:b" };
	static const char *const null_name[] = { NULL };
	struct ca *sentinel = (struct ca *)&sentinel, *ca = sentinel;
	EVP_PKEY *key = NULL;
	X509 *xs = (X509 *)&xs, *leaf = xs;

	(void)state;
	assert_int_equal(ca_new(NULL, NULL, 0, DAY, &ca), SL_ERR_INVALID);
	assert_int_equal(ca_new("", NULL, 0, DAY, &ca), SL_ERR_INVALID);
	assert_int_equal(ca_new("a/b", NULL, 0, DAY, &ca), SL_ERR_INVALID);
	assert_int_equal(ca_new("sb", NULL, 0, 0, &ca), SL_ERR_INVALID);
	assert_int_equal(ca_new("sb", NULL, 1, DAY, &ca), SL_ERR_INVALID);
	assert_int_equal(ca_new("sb", bad_names, 2, DAY, &ca),
	    SL_ERR_INVALID);
	assert_int_equal(ca_new("sb", null_name, 1, DAY, &ca),
	    SL_ERR_INVALID);
	assert_ptr_equal(ca, sentinel);

	ca = new_ca("sb", NULL, 0, DAY);
	assert_int_equal(ca_new_leaf_key(&key), 0);
	assert_int_equal(ca_mint_leaf(ca, "a.test,IP:1.2.3.4", key, DAY,
	    &leaf), SL_ERR_INVALID);
	assert_int_equal(ca_mint_leaf(ca, "", key, DAY, &leaf),
	    SL_ERR_INVALID);
	assert_int_equal(ca_mint_leaf(ca, NULL, key, DAY, &leaf),
	    SL_ERR_INVALID);
	assert_int_equal(ca_mint_leaf(ca, "a..test", key, DAY, &leaf),
	    SL_ERR_INVALID);
	assert_int_equal(ca_mint_leaf(ca, "a.test", NULL, DAY, &leaf),
	    SL_ERR_INVALID);
	assert_int_equal(ca_mint_leaf(ca, "a.test", key, 0, &leaf),
	    SL_ERR_INVALID);
	assert_ptr_equal(leaf, xs);
	EVP_PKEY_free(key);
	ca_free(ca);
}

/* A host too long for a CN still gets a valid leaf, named by its SAN. */
static void
test_leaf_long_host(void **state)
{
	const char *host = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa."
	    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.test";
	struct ca *ca;
	EVP_PKEY *key = NULL;
	X509 *leaf;

	(void)state;
	assert_true(strlen(host) > 64);
	ca = new_ca("sb-long", NULL, 0, DAY);
	assert_int_equal(ca_new_leaf_key(&key), 0);
	leaf = mint(ca, host, key, DAY);
	assert_int_equal(ext_critical(leaf, NID_subject_alt_name), 1);
	assert_int_equal(verify(ca_cert(ca), leaf, host), X509_V_OK);
	X509_free(leaf);
	EVP_PKEY_free(key);
	ca_free(ca);
}

static void
test_expired_ca_refuses(void **state)
{
	struct ca *ca;
	EVP_PKEY *key = NULL;
	X509 *xs = (X509 *)&xs, *leaf = xs;

	(void)state;
	ca = new_ca("sb-exp", NULL, 0, 1);
	assert_int_equal(ca_new_leaf_key(&key), 0);
	sleep(2);
	assert_int_equal(ca_mint_leaf(ca, "a.test", key, DAY, &leaf),
	    SL_ERR_DENIED);
	assert_ptr_equal(leaf, xs);
	EVP_PKEY_free(key);
	ca_free(ca);
}

static void
test_free_null(void **state)
{
	(void)state;
	ca_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ca_cert),
		cmocka_unit_test(test_ca_pem_roundtrip),
		cmocka_unit_test(test_ca_export_load),
		cmocka_unit_test(test_leaf),
		cmocka_unit_test(test_leaf_clamped),
		cmocka_unit_test(test_name_constraints),
		cmocka_unit_test(test_two_cas_differ),
		cmocka_unit_test(test_invalid_input),
		cmocka_unit_test(test_leaf_long_host),
		cmocka_unit_test(test_expired_ca_refuses),
		cmocka_unit_test(test_free_null),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
