/* ca.c: a sandbox's own certificate authority, and the leaves it signs. */
#include "autoconf.h"

#include <sys/mman.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sodium.h>

#include "util/err.h"
#include "util/names.h"
#include "keys/ca.h"
#include "keys/ca_int.h"
#include "keys/kclient.h"

#define CA_SERIAL_LEN	16	/* 128 bits, top bit clear */
#define CA_BACKDATE_S	3600	/* notBefore is an hour before now */
#define CA_CN_MAX	64	/* ub-common-name (RFC 5280) */
#define CA_ID_MAX	(CA_CN_MAX - (sizeof("sluice sandbox  CA") - 1))


/* Whether s is a name already in normal form (names.c has the rules). */
static int
host_ok(const char *s)
{
	char n[NAME_BUFSZ];

	return s != NULL && name_normalize(s, strlen(s), n) == 0 &&
	    strcmp(n, s) == 0;
}

/* Whether a sandbox id fits in the CA's common name without escaping. */
static int
sandbox_id_ok(const char *s)
{
	size_t i, n;

	if (s == NULL)
		return 0;
	n = strlen(s);
	if (n == 0 || n > CA_ID_MAX)
		return 0;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
			return 0;
	}
	return 1;
}

/* A random, positive 128-bit serial with a non-zero leading byte. */
static int
set_random_serial(X509 *x)
{
	unsigned char buf[CA_SERIAL_LEN];
	int r = SL_ERR_INTERNAL;

	if (RAND_bytes(buf, sizeof(buf)) != 1)
		goto out;
	buf[0] = (unsigned char)((buf[0] & 0x7f) | 0x40);
	if (ASN1_STRING_set(X509_get_serialNumber(x), buf,
	    (int)sizeof(buf)) != 1) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	r = 0;
 out:
	OPENSSL_cleanse(buf, sizeof(buf));
	return r;
}

/* notBefore an hour ago, notAfter validity_s from now. */
static int
set_validity(X509 *x, time_t now, unsigned validity_s)
{
	int days = (int)(validity_s / 86400);
	long secs = (long)(validity_s % 86400);

	if (ASN1_TIME_adj(X509_getm_notBefore(x), now, 0,
	    -CA_BACKDATE_S) == NULL ||
	    ASN1_TIME_adj(X509_getm_notAfter(x), now, days, secs) == NULL)
		return SL_ERR_INTERNAL;
	return 0;
}

/* Adds an extension from a fixed (never caller-supplied) config string. */
static int
add_ext_conf(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext = NULL;
	int r = SL_ERR_INTERNAL;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	if ((ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value)) == NULL)
		goto out;
	if (X509_add_ext(x, ext, -1) != 1)
		goto out;
	r = 0;
 out:
	X509_EXTENSION_free(ext);
	return r;
}

/* A GEN_DNS general name holding name. */
static GENERAL_NAME *
dns_general_name(const char *name)
{
	GENERAL_NAME *gn = NULL;
	ASN1_IA5STRING *ia5 = NULL;

	if ((gn = GENERAL_NAME_new()) == NULL ||
	    (ia5 = ASN1_IA5STRING_new()) == NULL ||
	    ASN1_STRING_set(ia5, name, (int)strlen(name)) != 1) {
		ASN1_IA5STRING_free(ia5);
		GENERAL_NAME_free(gn);
		return NULL;
	}
	GENERAL_NAME_set0_value(gn, GEN_DNS, ia5);
	return gn;
}

/*
 * A critical nameConstraints extension permitting the DNS subtree of each
 * name.  "*.x" permits the subtree "x": RFC 5280 DNS constraints match a
 * name and everything below it, so the apex x is permitted too; there is
 * no way to express "below x only".
 */
static int
add_name_constraints(X509 *x, const char *const *names, size_t nnames)
{
	NAME_CONSTRAINTS *nc = NULL;
	GENERAL_SUBTREE *sub = NULL;
	size_t i;
	int r = SL_ERR_INTERNAL;

	if ((nc = NAME_CONSTRAINTS_new()) == NULL ||
	    (nc->permittedSubtrees = sk_GENERAL_SUBTREE_new_null()) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	for (i = 0; i < nnames; i++) {
		const char *name = names[i];

		if (strncmp(name, "*.", 2) == 0)
			name += 2;
		if ((sub = GENERAL_SUBTREE_new()) == NULL) {
			r = SL_ERR_NOMEM;
			goto out;
		}
		GENERAL_NAME_free(sub->base);
		if ((sub->base = dns_general_name(name)) == NULL) {
			r = SL_ERR_NOMEM;
			goto out;
		}
		if (sk_GENERAL_SUBTREE_push(nc->permittedSubtrees, sub) == 0) {
			r = SL_ERR_NOMEM;
			goto out;
		}
		sub = NULL;	/* transferred */
	}
	if (X509_add1_ext_i2d(x, NID_name_constraints, nc, 1,
	    X509V3_ADD_DEFAULT) != 1)
		goto out;
	r = 0;
 out:
	GENERAL_SUBTREE_free(sub);
	NAME_CONSTRAINTS_free(nc);
	return r;
}

/* Checks the CA's names before anything is generated. */
static int
names_ok(const char *const *names, size_t nnames)
{
	size_t i;

	if (nnames > 0 && names == NULL)
		return 0;
	for (i = 0; i < nnames; i++) {
		const char *n = names[i];

		if (n == NULL)
			return 0;
		if (strncmp(n, "*.", 2) == 0)
			n += 2;
		if (!host_ok(n))
			return 0;
	}
	return 1;
}

int
ca_new(const char *sandbox_id, const char *const *names, size_t nnames,
    unsigned validity_s, struct ca **out)
{
	struct ca *ca = NULL;
	EVP_PKEY *pkey = NULL;
	X509 *x = NULL;
	X509_NAME *subj = NULL;
	char cn[CA_CN_MAX + 1];
	unsigned char *p;
	int len, r = SL_ERR_INTERNAL;

	if (out == NULL || !sandbox_id_ok(sandbox_id) || validity_s == 0 ||
	    !names_ok(names, nnames)) {
		r = SL_ERR_INVALID;
		goto out;
	}
	/* A worker process holds no CA key: the keys process mints it. */
	if (kclient_remote())
		return ca_remote_new(sandbox_id, names, nnames, validity_s, out);
	if ((ca = calloc(1, sizeof(*ca))) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	if ((pkey = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256")) == NULL)
		goto out;

	if ((x = X509_new()) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	if (X509_set_version(x, X509_VERSION_3) != 1)
		goto out;
	if ((r = set_random_serial(x)) != 0)
		goto out;
	r = SL_ERR_INTERNAL;
	if (set_validity(x, time(NULL), validity_s) != 0)
		goto out;
	snprintf(cn, sizeof(cn), "sluice sandbox %s CA", sandbox_id);
	if ((subj = X509_NAME_new()) == NULL ||
	    X509_NAME_add_entry_by_txt(subj, "CN", MBSTRING_ASC,
	    (const unsigned char *)cn, -1, -1, 0) != 1 ||
	    X509_NAME_add_entry_by_txt(subj, "O", MBSTRING_ASC,
	    (const unsigned char *)"sluice", -1, -1, 0) != 1 ||
	    X509_set_subject_name(x, subj) != 1 ||
	    X509_set_issuer_name(x, subj) != 1 ||
	    X509_set_pubkey(x, pkey) != 1)
		goto out;
	if (add_ext_conf(x, x, NID_basic_constraints,
	    "critical,CA:TRUE,pathlen:0") != 0 ||
	    add_ext_conf(x, x, NID_key_usage,
	    "critical,keyCertSign,cRLSign") != 0 ||
	    add_ext_conf(x, x, NID_subject_key_identifier, "hash") != 0)
		goto out;
	if (nnames > 0 && (r = add_name_constraints(x, names, nnames)) != 0)
		goto out;
	r = SL_ERR_INTERNAL;
	if (X509_sign(x, pkey, EVP_sha256()) <= 0)
		goto out;

	/* Keep the key only as DER in guarded memory. */
	if ((len = i2d_PrivateKey(pkey, NULL)) <= 0)
		goto out;
	if ((ca->key_der = sodium_malloc((size_t)len)) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	/*
	 * sodium_malloc tries to lock and goes on silently when it cannot
	 * (RLIMIT_MEMLOCK); the key must never be written to swappable
	 * memory, so check before writing it.
	 */
	if (mlock(ca->key_der, (size_t)len) != 0) {
		r = SL_ERR_IO;
		goto out;
	}
	ca->key_len = (size_t)len;
	p = ca->key_der;
	if (i2d_PrivateKey(pkey, &p) != len)
		goto out;
	if (sodium_mprotect_noaccess(ca->key_der) != 0)
		goto out;

	ca->cert = x;
	x = NULL;	/* transferred */
	*out = ca;
	ca = NULL;	/* transferred */
	r = 0;
 out:
	X509_NAME_free(subj);
	X509_free(x);
	EVP_PKEY_free(pkey);
	ca_free(ca);
	return r;
}

/* Keeps der[0..len) as ca's key: guarded, locked, noaccess at rest. */
static int
keep_key(struct ca *ca, const unsigned char *der, size_t len)
{
	if ((ca->key_der = sodium_malloc(len)) == NULL)
		return SL_ERR_NOMEM;
	if (mlock(ca->key_der, len) != 0)
		return SL_ERR_IO;	/* never in swappable memory */
	memcpy(ca->key_der, der, len);
	ca->key_len = len;
	return sodium_mprotect_noaccess(ca->key_der) == 0 ? 0 :
	    SL_ERR_INTERNAL;
}

int
ca_key_export(struct ca *ca, char **out, size_t *len)
{
	size_t cap = sodium_base64_ENCODED_LEN(ca->key_len,
	    sodium_base64_VARIANT_ORIGINAL);
	char *b;

	if (ca->key_der == NULL)
		return SL_ERR_DENIED;	/* kept by the keys process */
	if ((b = sodium_malloc(cap)) == NULL)
		return SL_ERR_NOMEM;
	if (sodium_mprotect_readonly(ca->key_der) != 0) {
		sodium_free(b);
		return SL_ERR_INTERNAL;
	}
	sodium_bin2base64(b, cap, ca->key_der, ca->key_len,
	    sodium_base64_VARIANT_ORIGINAL);
	sodium_mprotect_noaccess(ca->key_der);
	*out = b;
	*len = strlen(b);
	return 0;
}

int
ca_load(const char *cert_pem, size_t cert_len, const char *key_b64,
    size_t key_len, struct ca **out)
{
	struct ca *ca = NULL;
	unsigned char *der = NULL;
	const unsigned char *p;
	EVP_PKEY *pkey = NULL;
	size_t dlen = 0;
	BIO *bio = NULL;
	int r = SL_ERR_INVALID;

	if (cert_len > INT_MAX || key_len > 4096)
		return SL_ERR_INVALID;
	if (kclient_remote())
		return SL_ERR_DENIED;	/* no CA key is loaded here */
	if ((ca = calloc(1, sizeof(*ca))) == NULL ||
	    (der = sodium_malloc(key_len)) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	if ((bio = BIO_new_mem_buf(cert_pem, (int)cert_len)) == NULL ||
	    (ca->cert = PEM_read_bio_X509(bio, NULL, NULL, NULL)) == NULL)
		goto out;
	if (sodium_base642bin(der, key_len, key_b64, key_len, NULL, &dlen,
	    NULL, sodium_base64_VARIANT_ORIGINAL) != 0 || dlen == 0)
		goto out;
	p = der;
	/*
	 * The certificate must be the key's own, signed by it, and a CA: one
	 * re-signed elsewhere with other dates or names must not pass for it.
	 */
	if ((pkey = d2i_AutoPrivateKey(NULL, &p, (long)dlen)) == NULL ||
	    p != der + dlen || X509_check_private_key(ca->cert, pkey) != 1 ||
	    X509_verify(ca->cert, pkey) != 1 || X509_check_ca(ca->cert) < 1)
		goto out;
	if ((r = keep_key(ca, der, dlen)) != 0)
		goto out;
	*out = ca;
	ca = NULL;
	r = 0;
 out:
	ERR_clear_error();
	BIO_free(bio);
	EVP_PKEY_free(pkey);
	if (der != NULL)
		sodium_free(der);	/* wipes */
	ca_free(ca);
	return r;
}

void
ca_free(struct ca *ca)
{
	if (ca == NULL)
		return;
	if (ca->remote != 0)
		ca_remote_drop(ca);		/* wiped there */
	if (ca->key_der != NULL)
		sodium_free(ca->key_der);	/* wipes; any protection */
	X509_free(ca->cert);
	free(ca);
}

X509 *
ca_cert(const struct ca *ca)
{
	return ca->cert;
}

char *
ca_cert_pem(const struct ca *ca, size_t *len)
{
	BIO *bio = NULL;
	char *data, *pem = NULL;
	long n;

	if ((bio = BIO_new(BIO_s_mem())) == NULL ||
	    PEM_write_bio_X509(bio, ca->cert) != 1)
		goto out;
	if ((n = BIO_get_mem_data(bio, &data)) <= 0)
		goto out;
	if ((pem = malloc((size_t)n + 1)) == NULL)
		goto out;
	memcpy(pem, data, (size_t)n);
	pem[n] = '\0';
	if (len != NULL)
		*len = (size_t)n;
 out:
	BIO_free(bio);
	return pem;
}

/* Signs x with the CA key, unprotecting the key only for the signature. */
static int
ca_sign(struct ca *ca, X509 *x)
{
	EVP_PKEY *pkey = NULL;
	const unsigned char *p;
	int r = SL_ERR_INTERNAL;

	if (sodium_mprotect_readonly(ca->key_der) != 0)
		return SL_ERR_INTERNAL;
	p = ca->key_der;
	pkey = d2i_PrivateKey(EVP_PKEY_EC, NULL, &p, (long)ca->key_len);
	if (sodium_mprotect_noaccess(ca->key_der) != 0)
		goto out;
	if (pkey == NULL)
		goto out;
	if (X509_sign(x, pkey, EVP_sha256()) <= 0)
		goto out;
	r = 0;
 out:
	EVP_PKEY_free(pkey);	/* clears the private scalar */
	return r;
}

/*
 * Leaf validity within the CA's: from an hour ago (not before the CA's
 * notBefore) to validity_s from now (not after the CA's notAfter).
 */
static int
set_leaf_validity(X509 *leaf, const X509 *cacert, unsigned validity_s)
{
	const ASN1_TIME *ca_nb = X509_get0_notBefore(cacert);
	const ASN1_TIME *ca_na = X509_get0_notAfter(cacert);
	time_t now = time(NULL);

	if (X509_cmp_time(ca_na, &now) <= 0)
		return SL_ERR_DENIED;	/* the CA has expired */
	if (set_validity(leaf, now, validity_s) != 0)
		return SL_ERR_INTERNAL;
	if (ASN1_TIME_compare(X509_get0_notBefore(leaf), ca_nb) < 0 &&
	    X509_set1_notBefore(leaf, ca_nb) != 1)
		return SL_ERR_INTERNAL;
	if (ASN1_TIME_compare(X509_get0_notAfter(leaf), ca_na) > 0 &&
	    X509_set1_notAfter(leaf, ca_na) != 1)
		return SL_ERR_INTERNAL;
	return 0;
}

int
ca_mint_leaf(struct ca *ca, const char *host, EVP_PKEY *leaf_key,
    unsigned validity_s, X509 **out)
{
	X509 *x = NULL;
	X509_NAME *subj = NULL;
	GENERAL_NAMES *san = NULL;
	GENERAL_NAME *gn = NULL;
	int long_host, r = SL_ERR_INTERNAL;

	if (ca == NULL || leaf_key == NULL || out == NULL ||
	    validity_s == 0 || !host_ok(host)) {
		r = SL_ERR_INVALID;
		goto out;
	}
	if (ca->remote != 0)
		return ca_remote_mint(ca, host, leaf_key, validity_s, out);
	long_host = strlen(host) > CA_CN_MAX;

	if ((x = X509_new()) == NULL || (subj = X509_NAME_new()) == NULL ||
	    (san = GENERAL_NAMES_new()) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	if (X509_set_version(x, X509_VERSION_3) != 1)
		goto out;
	if ((r = set_random_serial(x)) != 0)
		goto out;
	if ((r = set_leaf_validity(x, ca->cert, validity_s)) != 0)
		goto out;
	r = SL_ERR_INTERNAL;
	/* A CN cannot hold more than 64 characters: such leaves go without. */
	if (!long_host && X509_NAME_add_entry_by_txt(subj, "CN",
	    MBSTRING_ASC, (const unsigned char *)host, -1, -1, 0) != 1)
		goto out;
	if (X509_set_subject_name(x, subj) != 1 ||
	    X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) != 1 ||
	    X509_set_pubkey(x, leaf_key) != 1)
		goto out;

	if ((gn = dns_general_name(host)) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	if (sk_GENERAL_NAME_push(san, gn) == 0) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	gn = NULL;	/* transferred */
	/* With an empty subject the SAN must be critical (RFC 5280 4.2.1.6). */
	if (X509_add1_ext_i2d(x, NID_subject_alt_name, san, long_host,
	    X509V3_ADD_DEFAULT) != 1)
		goto out;
	if (add_ext_conf(x, ca->cert, NID_basic_constraints,
	    "critical,CA:FALSE") != 0 ||
	    add_ext_conf(x, ca->cert, NID_key_usage,
	    "critical,digitalSignature") != 0 ||
	    add_ext_conf(x, ca->cert, NID_ext_key_usage, "serverAuth") != 0 ||
	    add_ext_conf(x, ca->cert, NID_subject_key_identifier,
	    "hash") != 0 ||
	    add_ext_conf(x, ca->cert, NID_authority_key_identifier,
	    "keyid:always") != 0)
		goto out;
	if ((r = ca_sign(ca, x)) != 0)
		goto out;

	*out = x;
	x = NULL;	/* transferred */
	r = 0;
 out:
	GENERAL_NAME_free(gn);
	GENERAL_NAMES_free(san);
	X509_NAME_free(subj);
	X509_free(x);
	return r;
}

int
ca_new_leaf_key(EVP_PKEY **out)
{
	EVP_PKEY *pkey;

	if (out == NULL)
		return SL_ERR_INVALID;
	if ((pkey = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256")) == NULL)
		return SL_ERR_INTERNAL;
	*out = pkey;
	return 0;
}
