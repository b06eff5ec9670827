/*
 * pemkey.h: the OpenSSL objects of a pem secret, parsed once when the
 * secret is opened: its private key, and when it holds certificates, the
 * one that is the key's (the leaf) and the others as its chain, in the
 * order given.  Immutable once made; shared by reference between the
 * threads that present it (SSL_use_* take their own references).
 */
#ifndef SLUICE_PEMKEY_H
#define SLUICE_PEMKEY_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#define PEMKEY_MAX_CHAIN	8	/* certificates beside the leaf */

struct pemkey {
	EVP_PKEY	*key;
	X509		*leaf;		/* NULL: a key alone */
	STACK_OF(X509)	*chain;		/* NULL when there is no leaf */
};

/*
 * Parses pem[0..len): one unencrypted private key, and any number of
 * certificates before or after it, of which exactly one must be the
 * key's when there are any.  0 with *out, or SL_ERR_INVALID with *why
 * ("no unencrypted private key", "no certificate is the private key's",
 * "more than 8 certificates beside the leaf", "two certificates are the
 * private key's"), SL_ERR_NOMEM.  Never reads past len.
 */
int	pemkey_parse(const uint8_t *pem, size_t len, struct pemkey **out,
	    const char **why);
void	pemkey_free(struct pemkey *k);		/* accepts NULL */

#endif
