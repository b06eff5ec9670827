/*
 * signkey.h: the gateway's ECDSA P-256 signing keys (signing.key and
 * signing.pub as sluicectl keygen writes them), for identity tokens
 * (ES256 JWS, jwt.h) and signed audit checkpoints (auditfmt.h).
 *
 * A key's id (kid) is its RFC 7638 JWK thumbprint (SHA-256 over
 * {"crv","kty","x","y"}), base64url without padding: the same for the
 * private key and its public half, stable across files.  Signatures are
 * ES256 as JWS wants them: SHA-256, then the raw 64-byte r||s (each
 * left-padded to 32 bytes), not DER.
 *
 * A loaded key is immutable: signing and verifying are safe from any
 * number of threads at once.
 */
#ifndef SLUICE_SIGNKEY_H
#define SLUICE_SIGNKEY_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define SIGNKEY_KID_MAX		44	/* base64url of 32 bytes, and a NUL */
#define SIGNKEY_SIG_LEN		64

struct signkey;
struct signpub;

/*
 * Loads a private key (PEM PKCS#8 or SEC1, ECDSA P-256, unencrypted).
 * Refused when group or others have any permission on the file or it is
 * owned by neither root nor the effective user (SL_ERR_DENIED), when it
 * is not a regular file or not such a key (SL_ERR_INVALID), or
 * unreadable (SL_ERR_IO); *why (may be NULL) gets a static description.
 * The file's bytes are wiped after use.
 */
int	signkey_load(const char *path, struct signkey **out, const char **why);
void	signkey_free(struct signkey *k);		/* accepts NULL */
/*
 * A key the keys process holds (kclient.h), known here by its kid:
 * jwt_sign asks there for whole tokens; signkey_sign refuses it
 * (SL_ERR_DENIED), so no process but the keys process signs bytes.
 */
int	signkey_remote(const char *kid, struct signkey **out);
int	signkey_is_remote(const struct signkey *k);
const char *signkey_kid(const struct signkey *k);
/*
 * The raw r||s of a P-256 DER ECDSA-Sig-Value, each left-padded to 32
 * bytes (as JWS ES256 wants it); 0 or SL_ERR_INTERNAL.
 */
int	signkey_der_to_raw(const uint8_t *der, size_t len,
	    uint8_t raw[SIGNKEY_SIG_LEN]);
/*
 * ES256 over msg[0..len).  0, or SL_ERR_NOMEM, SL_ERR_INTERNAL when
 * OpenSSL fails (sig then untouched).
 */
int	signkey_sign(const struct signkey *k, const uint8_t *msg, size_t len,
	    uint8_t sig[SIGNKEY_SIG_LEN]);
/* The public half (a new object the caller frees). */
int	signkey_public(const struct signkey *k, struct signpub **out);

/*
 * Loads a public key (PEM SubjectPublicKeyInfo, P-256); *why as above.
 * The file's mode is not checked: a public key is public.
 */
int	signpub_load(const char *path, struct signpub **out, const char **why);
void	signpub_free(struct signpub *p);		/* accepts NULL */
/* A public key as DER SubjectPublicKeyInfo (*der: OPENSSL_free it), and back. */
int	signpub_der(const struct signpub *p, uint8_t **der, size_t *len);
int	signpub_from_der(const uint8_t *der, size_t len, struct signpub **out);
const char *signpub_kid(const struct signpub *p);
/*
 * 0 when sig is a valid ES256 signature of msg, else SL_ERR_INVALID (or
 * SL_ERR_NOMEM, SL_ERR_INTERNAL when OpenSSL fails: never 0).
 */
int	signpub_verify(const struct signpub *p, const uint8_t *msg, size_t len,
	    const uint8_t sig[SIGNKEY_SIG_LEN]);
/*
 * The public key as a JWK (RFC 7517/7518): {"kty":"EC","crv":"P-256",
 * "x","y" (base64url, 32 bytes each),"kid","use":"sig","alg":"ES256"}.
 * NULL when out of memory.
 */
json_t	*signpub_jwk(const struct signpub *p);

#endif
