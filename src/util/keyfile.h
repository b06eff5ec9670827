/*
 * keyfile.h: reading key files, and the guarded memory keys live in --
 * shared by the gateway keys (sealed.c) and the signing keys (signkey.c).
 */
#ifndef SLUICE_KEYFILE_H
#define SLUICE_KEYFILE_H

#include <stddef.h>
#include <stdint.h>

#define KEYFILE_MAX	16384		/* a PEM key is a few hundred bytes */

/*
 * Guarded memory for key and secret bytes: sodium_malloc, and locked for
 * sure (sodium_malloc goes on silently when it cannot lock, and a secret
 * must never reach swap).  NULL when it cannot be had; secmem_free wipes
 * and accepts NULL.
 */
void	*secmem_alloc(size_t len);
void	 secmem_free(void *p);

/*
 * Reads a key file into guarded memory: *buf holds *len bytes and a NUL
 * (free it with secmem_free).  Only a regular file is read, opened
 * non-blocking so that a FIFO in its place is refused, not waited on.
 * secret: the file must also be one neither group nor others may touch,
 * owned by root or by us (relayd's check_file_secrecy: SL_ERR_DENIED),
 * checked on the opened descriptor so that what is checked is what is
 * read.  Over KEYFILE_MAX bytes: SL_ERR_INVALID.  *why gets a static
 * description.
 */
int	keyfile_read(const char *path, int secret, uint8_t **buf, size_t *len,
	    const char **why);

typedef struct evp_pkey_st EVP_PKEY;

/*
 * Decodes a PEM key, private (PKCS#8 or SEC1; never encrypted) or public
 * (SubjectPublicKeyInfo), of any algorithm: the caller checks which.
 * SL_ERR_INVALID (a private key given as public is named as such) or
 * SL_ERR_NOMEM, with *why.
 */
int	keyfile_pem(const uint8_t *pem, size_t len, int private, EVP_PKEY **out,
	    const char **why);

/* An OpenSSL passphrase callback that never gives one: no encrypted keys. */
int	keyfile_no_passphrase(char *buf, int size, int rwflag, void *u);

#endif
