/*
 * mint.h: short-lived access tokens minted from sealed secrets -- the
 * request that asks a token endpoint for one, and the reading of its
 * answer, for the sources of conf/tokensrc.h.
 *
 * No I/O here: the caller sends the request over verified TLS and hands
 * the answer back.  Everything a request or an answer holds is a
 * credential: written only to the caller's guarded buffers, and what
 * jansson parsed is wiped before it is freed.
 */
#ifndef SLUICE_MINT_H
#define SLUICE_MINT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <openssl/evp.h>

#include "conf/tokensrc.h"

struct secret;

#define MINT_REQ_MAX		(16u * 1024)	/* a whole request */
#define MINT_ANSWER_MAX		(64u * 1024)	/* an answer's body */
#define MINT_TOKEN_MAX		8192	/* a buffer for a token or assertion */
#define MINT_TOKEN_LEN_MAX	4096	/* a minted token: REDACT_MAX_ESCAPED */
#define MINT_ASSERTION_TTL	300	/* seconds an assertion lives */
#define MINT_DEFAULT_TTL	300	/* an answer without expires_in */

/*
 * The HTTP/1.1 request (head and body) that mints a token from src with
 * the secret s (a header secret's value, or a pem secret's key), at now,
 * into out (cap bytes, the caller's guarded memory).  Returns its length,
 * or -1 with *why (a bad source, a key that is neither RSA nor P-256,
 * too large).
 */
long	mint_request(const struct mint_source *src, const struct secret *s,
	    time_t now, char *out, size_t cap, const char **why);

/* A token read from an answer. */
struct mint_token {
	size_t		 len;		/* of the token, written to the caller's buffer */
	int64_t		 expires_at;	/* unix seconds */
	int		 rotated;	/* a refresh grant's answer carried a new
					 * refresh token (which is not kept) */
};

/*
 * Reads the answer to a mint request of kind k: status, and its body
 * body[0..len) (the caller wipes it after).  On success the token goes to
 * tok (MINT_TOKEN_MAX bytes of the caller's guarded memory, NUL-
 * terminated) and *out says how long it is and when it expires; 0.  Else
 * -1 with a description in why (whycap bytes: the status, and the
 * endpoint's OAuth error code when it gave one; never a value).
 */
int	mint_answer(enum mint_kind k, int status, const char *body, size_t len,
	    time_t now, char *tok, struct mint_token *out, char *why,
	    size_t whycap);

/*
 * A compact JWS of the JSON object payload, signed with key: RS256 for
 * an RSA key, ES256 for a P-256 one.  Into out (cap bytes, NUL-
 * terminated); its length, or -1 with *why.
 */
long	mint_jws(EVP_PKEY *key, const char *payload, char *out, size_t cap,
	    const char **why);

#endif
