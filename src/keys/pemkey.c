/*
 * pemkey.c: a pem secret's key and certificates, as OpenSSL objects.
 * The key is decoded from guarded memory; OpenSSL clears its own copies
 * of private key material when they are freed.
 */
#include "autoconf.h"

#include <stdlib.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include "util/err.h"
#include "keys/pemkey.h"

void
pemkey_free(struct pemkey *k)
{
	if (k == NULL)
		return;
	EVP_PKEY_free(k->key);
	X509_free(k->leaf);
	sk_X509_pop_free(k->chain, X509_free);
	free(k);
}

/* Every certificate of pem, in order, onto certs. */
static int
read_certs(const uint8_t *pem, size_t len, STACK_OF(X509) *certs)
{
	X509 *x;
	BIO *b;

	if ((b = BIO_new_mem_buf(pem, (int)len)) == NULL)
		return SL_ERR_NOMEM;
	while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
		if (sk_X509_push(certs, x) <= 0) {
			X509_free(x);
			BIO_free(b);
			return SL_ERR_NOMEM;
		}
	}
	BIO_free(b);
	ERR_clear_error();	/* the end of the input */
	return 0;
}

/* Moves the key's certificate out of certs into k->leaf, the rest to chain. */
static int
split_leaf(struct pemkey *k, STACK_OF(X509) *certs, const char **why)
{
	int i, leaf = -1;

	for (i = 0; i < sk_X509_num(certs); i++) {
		if (X509_check_private_key(sk_X509_value(certs, i), k->key) != 1)
			continue;
		if (leaf != -1) {
			*why = "two certificates are the private key's";
			return SL_ERR_INVALID;
		}
		leaf = i;
	}
	ERR_clear_error();
	if (leaf == -1) {
		*why = "no certificate is the private key's";
		return SL_ERR_INVALID;
	}
	if (sk_X509_num(certs) - 1 > PEMKEY_MAX_CHAIN) {
		*why = "more than 8 certificates beside the leaf";
		return SL_ERR_INVALID;
	}
	k->leaf = sk_X509_delete(certs, leaf);
	k->chain = certs;
	return 0;
}

int
pemkey_parse(const uint8_t *pem, size_t len, struct pemkey **out,
    const char **why)
{
	STACK_OF(X509) *certs = NULL;
	struct pemkey *k;
	BIO *b = NULL;
	int r = SL_ERR_NOMEM;

	*why = "out of memory";
	if (len > INT32_MAX || (k = calloc(1, sizeof(*k))) == NULL)
		return SL_ERR_NOMEM;
	if ((b = BIO_new_mem_buf(pem, (int)len)) == NULL ||
	    (certs = sk_X509_new_null()) == NULL)
		goto out;
	/* An empty password: an encrypted key is refused, never prompted. */
	if ((k->key = PEM_read_bio_PrivateKey(b, NULL, NULL, (void *)"")) ==
	    NULL) {
		*why = "no unencrypted private key";
		r = SL_ERR_INVALID;
		goto out;
	}
	if ((r = read_certs(pem, len, certs)) != 0)
		goto out;
	if (sk_X509_num(certs) > 0) {
		if ((r = split_leaf(k, certs, why)) != 0)
			goto out;
		certs = NULL;	/* k->chain */
	}
	*out = k;
	k = NULL;
	r = 0;
 out:
	BIO_free(b);
	sk_X509_pop_free(certs, X509_free);
	pemkey_free(k);
	ERR_clear_error();
	return r;
}
