/*
 * jwt.h: the identity token a forward rule sends to the operator's policy
 * proxy: an ES256 JWS in compact form (RFC 7515, 7519), header
 * {"alg":"ES256","typ":"JWT","kid":KID}, signed by signkey.h's key.
 */
#ifndef SLUICE_JWT_H
#define SLUICE_JWT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

struct signkey;
struct signpub;

#define JWT_MAX		8192	/* a whole token, with its NUL */
#define JWT_JTI_LEN	22	/* base64url of 16 random bytes */

/* What a token says; strings may be NULL (then left out) unless noted. */
struct jwt_claims {
	const char	*iss;		/* required */
	const char	*sandbox;	/* required: sub is "sandbox:" + it */
	const char	*aud;		/* required */
	const char	*team, *project;
	const char	*htm;		/* the request's method */
	const char	*htu;		/* its URL: https://host[:port]/path?query */
	const char	*body_sha256;	/* base64url SHA-256 of the body, or NULL */
	time_t		 now;		/* iat and nbf, >= 0 */
	unsigned	 ttl;		/* exp = now + ttl, seconds, >= 1 */
};

/*
 * Signs a new token for c with k into out (JWT_MAX bytes; NUL-terminated)
 * and writes its jti (random, JWT_JTI_LEN + 1 bytes) into jti.  Claims:
 * iss, sub, aud, iat, nbf, exp, jti, sandbox, and team, project, htm,
 * htu, body_sha256 when given.  Returns the token's length, or
 * SL_ERR_INVALID (a required claim missing or empty, ttl 0, now negative,
 * a string not UTF-8), SL_ERR_TOO_BIG (over out_len or JWT_MAX),
 * SL_ERR_NOMEM, SL_ERR_INTERNAL; out and jti are written only on
 * success.  Safe from any thread.
 */
long	jwt_sign(const struct signkey *k, const struct jwt_claims *c,
	    char *out, size_t out_len, char jti[JWT_JTI_LEN + 1]);

/* jwt_remote.c: jwt_sign's way for a key the keys process holds. */
long	jwt_remote_sign(const struct signkey *k, const struct jwt_claims *c,
	    char *out, size_t out_len, char jti[JWT_JTI_LEN + 1]);
/*
 * Checks a compact token with p: three non-empty parts of strict
 * base64url (no padding, no other alphabet, no stray bits), the header a
 * JSON object with alg ES256, kid p's and no crit, the signature 64 bytes
 * and valid, the payload a JSON object (duplicate members refused).  On
 * success *claims (may be NULL) gets the parsed payload (the caller
 * decrefs it).  Does not judge exp or aud:
 * that is the verifier's policy.  Returns 0 or SL_ERR_INVALID.  For tests
 * and tools.
 */
int	jwt_verify(const struct signpub *p, const char *token, size_t len,
	    json_t **claims);

/*
 * base64url without padding, as JWS uses it: into out (NUL-terminated).
 * 0, or SL_ERR_TOO_BIG when out_len cannot hold it and the NUL.
 */
int	jwt_b64url(const uint8_t *in, size_t len, char *out, size_t out_len);

/*
 * A JWKS: {"keys": [jwk...]} of pubs[0..n), a kid listed twice once, NULL
 * entries skipped.  NULL when out of memory.
 */
json_t	*jwt_jwks(struct signpub *const *pubs, size_t n);

#endif
